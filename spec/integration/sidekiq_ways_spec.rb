# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/fair_app"

# Fair queues with what newer Sidekiq versions bring, on real `sidekiq` processes: iterable jobs (7.3+),
# capsules (7.0+), and Sidekiq 8's millisecond `enqueued_at` (read in every version).
RSpec.describe "Fair queues with Sidekiq's newer ways" do
  let(:fair) { Sidekiq::FairTenant::FairQueues }
  let(:registry) { Sidekiq::FairTenant::Native::Fair.registry_key }
  let(:servers) { [] }

  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair fair2] }
  end

  after do
    servers.each(&:stop)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def start_server(concurrency: 2, env: {})
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: concurrency, queues: %w[fair], env: env,
                       app: File.expand_path("../support/fair_app.rb", __dir__)).start.tap { |s| servers << s }
  end

  def events(kind)
    redis.lrange(FairApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }.select { |e| e["event"] == kind }
  end

  it "reads Sidekiq 8's millisecond enqueued_at as seconds (latency, the queue's oldest job)" do
    enqueued_ms = ((Time.now.to_f - 30) * 1000).round
    redis.lpush("queue:fair", JSON.generate("class" => "SteadyFairJob", "queue" => "fair", "args" => ["acme", 1],
                                            "jid" => "ms1", "enqueued_at" => enqueued_ms))
    Sidekiq.redis { |conn| fair.adopt(conn, "fair", 10) }

    expect(Sidekiq::Queue.new("fair").latency).to be_within(5).of(30)
    expect(redis.zscore("#{fair.base("fair")}heads", "acme")).to be_within(1).of(enqueued_ms / 1000.0)
  end

  if defined?(Sidekiq::IterableJob)
    it "puts an iterable job interrupted by a stop back to its tenant; it resumes from its cursor elsewhere" do
      jid = FairIterableJob.perform_async("acme", 30)
      first = start_server
      first_pid = first.pid
      wait_for("a few iterations") { events("iteration").size >= 5 }
      first.stop # TERM: Sidekiq interrupts the job at its next element and pushes it again

      waiting = redis.lrange("#{fair.base("fair")}t:acme", 0, -1).map { |job| JSON.parse(job)["jid"] }
      expect(waiting).to eq([jid]) # back in its tenant's list of the fair queue, not queue:fair
      expect(redis.llen("queue:fair")).to eq(0)
      expect(in_flight_jobs).to eq(0)
      done = events("iteration").size

      second = start_server
      wait_for("the job complete", timeout: 30) { events("complete").any? }
      elements = events("iteration").map { |e| e["index"] }
      expect(elements).to eq((0...30).to_a) # every element once, in order, across both processes
      expect(events("iteration").map { |e| e["pid"] }.chunk_while { |a, b| a == b }.map(&:first))
        .to eq([first_pid, second.pid])
      expect(done).to be < 30
      wait_for("nothing in flight") { in_flight_jobs.zero? }
    end
  end

  if SpecHelpers::SIDEKIQ7
    it "serves two capsules' fair queues in one process, each with its fetcher, in one in-flight list" do
      6.times do |i|
        SteadyFairJob.perform_async("acme", i, 200)
        SecondCapsuleJob.perform_async("bravo", i, 200)
      end
      server = start_server(env: { "FAIR_APP_CAPSULE" => "1" })
      wait_for("12 jobs finished", timeout: 60) { events("finish").size == 12 }

      expect(events("finish").group_by { |e| e["tenant"] }.transform_values(&:size)).to eq("acme" => 6, "bravo" => 6)
      # The process's identity is registered once; both capsules' jobs were acknowledged.
      expect(redis.smembers(registry).grep(/:#{server.pid}:/).size).to eq(1)
      wait_for("nothing in flight") { in_flight_jobs.zero? }
      expect(server.stop).to be(true)
      expect(redis.hget("#{fair.base("fair2")}state", "n").to_i).to eq(0)
    end
  end
end
