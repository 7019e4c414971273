# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/slots_app"

# Slots on plain queues hold their limits, in real `sidekiq` processes (spec/support/slots_app.rb): each parked
# job is handed a slot under its own limit.
RSpec.describe "Concurrency slot limits in real Sidekiq processes" do
  let(:servers) { [] }

  after { servers.each(&:stop) }

  def start_server(concurrency:, env: {})
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: concurrency, env: env)
                  .start.tap { |s| servers << s }
  end

  def events = redis.lrange(SlotsApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }
  def finished = events.count { |e| e["event"] == "finish" }

  # Most of the given jids running at once, in the order the events reached Redis.
  def max_running(jids)
    running = 0
    events.select { |e| jids.include?(e["jid"]) }.map { |e| running += e["event"] == "start" ? 1 : -1 }.max
  end

  it "hands a job parked behind a wider class a slot under its own limit (3 and 1 sharing tenant + queue)" do
    wide = Array.new(3) { |i| WideJob.perform_async("M", i, 600) }
    narrow = Array.new(4) { |i| NarrowJob.perform_async("M", 10 + i, 200) }
    start_server(concurrency: 8)
    wait_for("7 jobs", timeout: 30) { finished == 7 }

    expect(max_running(wide)).to be <= 3
    expect(max_running(narrow)).to eq(1)
  end
end
