# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/slots_app"

# Real `sidekiq` processes running RoomyJob (limit 10, lease 600 s): a slot taken with room goes back with its
# thread's next acquire (one script call per job), alone when the thread has no next job within
# RELEASE_DEFER_MS, and at once when the process quiets or stops. The lease is far longer than the specs: a slot
# still held after its job ended was never given back.
RSpec.describe "Concurrency slots given back with the next acquire" do
  let(:servers) { [] }

  after { servers.each(&:stop) }

  def start_server(concurrency: 1, args: [])
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: concurrency, args: args)
                  .start.tap { |s| servers << s }
  end

  def events = redis.lrange(SlotsApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }
  def finished = events.count { |e| e["event"] == "finish" }
  def scope = Sidekiq::FairTenant::Native::Slots.tenant_scope("R", "default")
  def holders = Sidekiq::FairTenant.native.stats.inspect_scope(*scope)[0].map(&:first)

  def scripts_run
    redis.info("commandstats").sum { |name, stats| name.start_with?("eval") ? stats["calls"].to_i : 0 }
  end

  it "sends one script call per job in a thread running one job after another, and gives every slot back" do
    jobs = 60
    jobs.times { |i| RoomyJob.perform_async("R", i, 0) }
    redis.call("CONFIG", "RESETSTAT")
    start_server(concurrency: 1)
    wait_for("#{jobs} jobs") { finished == jobs }
    wait_for("the last slot back") { holders.empty? }

    # An acquire per job carrying the previous job's release, the last release alone, and the heartbeat's few
    # calls (two per job before).
    expect(scripts_run).to be < jobs * 1.2
    expect(events.select { |e| e["event"] == "start" }.map { |e| e["index"] }.sort).to eq((0...jobs).to_a)
  end

  it "gives a slot back alone within a few ms when its thread gets no next job" do
    start_server(concurrency: 2)
    RoomyJob.perform_async("R", 0, 0)
    wait_for("the job") { finished == 1 }
    ended = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    wait_for("its slot back", timeout: 5, every: 0.005) { holders.empty? }

    expect(Process.clock_gettime(Process::CLOCK_MONOTONIC) - ended).to be < 1.0 # the lease is 600 s
    expect(servers.first.alive?).to be(true)
  end

  it "gives slots back at once when the process quiets, and when it stops" do
    server = start_server(concurrency: 2, args: %w[-t 10])
    RoomyJob.perform_async("R", 0, 0)
    wait_for("the first job") { finished == 1 }
    RoomyJob.perform_async("R", 1, 1_500)
    wait_for("the second job running") { events.any? { |e| e["event"] == "start" && e["index"] == 1 } }

    Process.kill("TSTP", server.pid) # quiet: no next job will come
    wait_for("the first slot back") { holders.size == 1 }
    server.term!
    expect(server.stop).to be(true)
    expect(finished).to eq(2)
    expect(holders).to be_empty # the job that ended while the process stopped gave its slot back
  end
end
