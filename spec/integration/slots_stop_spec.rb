# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/slots_app"

# A slot lives as long as its job: through quiet, TERM and Sidekiq's whole shutdown timeout, its lease is renewed
# (WebhookJob: limit 1, lease 2 s), so no other process starts the scope's next job while it still runs.
RSpec.describe "Concurrency slots while Sidekiq stops" do
  let(:servers) { [] }

  after { servers.each(&:stop) }

  def start_server(args: [])
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 2, args: args).start.tap { |s| servers << s }
  end

  def events = redis.lrange(SlotsApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }
  def scope = Sidekiq::FairTenant::Native::Slots.key_scope("customer-G")
  def state = Sidekiq::FairTenant.native.stats.inspect_scope(*scope)

  it "renews a running job's lease past TERM until it ends: another process starts the next job only after" do
    first = WebhookJob.perform_async("G", 0, 5_000) # longer than the lease, shorter than the -t timeout
    stopping = start_server(args: %w[-t 20])
    wait_for("the long job holding the slot") { state[0].map(&:first).any? { |h| h.start_with?(first) } }
    WebhookJob.perform_async("G", 1, 10)
    wait_for("the next job parked") { state[1] == 1 }

    stopping.term!
    start_server
    wait_for("both jobs", timeout: 30) { events.count { |e| e["event"] == "finish" } == 2 }

    order = events.map { |e| [e["event"], e["index"]] }
    expect(order).to eq([["start", 0], ["finish", 0], ["start", 1], ["finish", 1]])
    expect(stopping.stop).to be(true)
  end
end
