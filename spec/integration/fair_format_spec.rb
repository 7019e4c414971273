# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/fair_app"

# The fair state's format version: a process refuses (loudly) a state a newer gem wrote, and serves nothing,
# instead of serving it wrongly; a state without a version gets this gem's.
RSpec.describe "Fair queues: the state's format version" do
  let(:check) { Sidekiq::FairTenant::FairFetch::FormatCheck }
  let(:key) { Sidekiq::FairTenant::Native::Fair.format_key }
  let(:servers) { [] }

  before do
    redis.flushdb
    check.reset!
    stub_const("Sidekiq::FairTenant::FairFetch::TIMEOUT", 0.01)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after do
    servers.each(&:stop)
    check.reset!
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def fetcher = Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "format:1:a")

  it "writes this gem's version into a state that has none, and serves" do
    FairJob.perform_async("acme", 1)

    expect(fetcher.retrieve_work).not_to be_nil
    expect(redis.get(key)).to eq(Sidekiq::FairTenant::Native::Fair::FORMAT.to_s)
  end

  it "refuses a newer format, once per minute in the log, and serves once the state is its format again" do
    redis.set(key, "99")
    FairJob.perform_async("acme", 1)
    log = StringIO.new
    allow(Sidekiq).to receive(:logger).and_return(Logger.new(log))
    fetch = fetcher

    2.times { expect(fetch.retrieve_work).to be_nil }
    expect(log.string.scan("fair queues refused").size).to eq(1)
    expect(log.string).to include("is 99, this gem knows format #{Sidekiq::FairTenant::Native::Fair::FORMAT}")
    expect(redis.get(key)).to eq("99") # never written down
    expect(Sidekiq.redis { |conn| Sidekiq::FairTenant::FairQueues.backlog(conn, "fair") }).to eq(1)

    redis.del(key) # the rollback's step (OPERATIONS.md), then the next check
    check.reset!
    expect(fetch.retrieve_work).not_to be_nil
  end

  it "keeps a real sidekiq process from serving a newer format's state, with the reason in its log" do
    newer = (Sidekiq::FairTenant::Native::Fair::FORMAT + 1).to_s
    redis.set(key, newer)
    FairJob.perform_async("acme", 1)
    server = SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 2, queues: %w[fair],
                                app: File.expand_path("../support/fair_app.rb", __dir__)).start
    servers << server

    wait_for("the refusal in the log") { File.read(server.log).include?("fair queues refused") }
    expect(File.read(server.log)).to include("is #{newer}, this gem knows format")
    expect(redis.lrange(FairApp::EVENTS, 0, -1)).to be_empty
  end
end
