# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/slots_app"

# Real `sidekiq` server processes running SlotJob (limit 2, lease 2 s) from spec/support/slots_app.rb.
RSpec.describe "Concurrency slots in real Sidekiq processes" do
  let(:servers) { [] }

  after { servers.each(&:stop) }

  def start_server(concurrency: 10, args: [])
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: concurrency, args: args)
                  .start.tap { |s| servers << s }
  end

  def events = redis.lrange(SlotsApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }
  def finished(tenant = nil) = events.count { |e| e["event"] == "finish" && (tenant.nil? || e["tenant"] == tenant) }

  # Most jobs of `tenant` running at the same moment, from start/finish events.
  def max_running(tenant)
    running = 0
    events.select { |e| e["tenant"] == tenant && %w[start finish fail].include?(e["event"]) }
          .sort_by { |e| [e["at"], e["event"] == "start" ? 1 : 0] }
          .map { |e| running += e["event"] == "start" ? 1 : -1 }.max
  end

  def scope(tenant) = Sidekiq::FairTenant::Native::Slots.tenant_scope(tenant, "default")
  def parked(tenant) = Sidekiq::FairTenant.native.stats.inspect_scope(*scope(tenant))[1]
  def holders(tenant) = Sidekiq::FairTenant.native.stats.inspect_scope(*scope(tenant))[0].map(&:first)

  # A slot taken with room goes back with its thread's next acquire, or alone within RELEASE_DEFER_MS: well
  # within the 2 s lease, so a slot not given back is still seen.
  def slots_back(tenant)
    wait_for("#{tenant}'s slots back", timeout: 1, every: 0.005) { holders(tenant).empty? }
  end

  it "runs at most 2 of A's jobs at once, never blocks B, runs all 220 once, A in enqueue order" do
    200.times { |i| SlotJob.perform_async("A", i, 10) }
    20.times { |i| SlotJob.perform_async("B", i, 10) }
    start_server(concurrency: 10)
    wait_for("220 jobs") { finished == 220 }

    starts = events.select { |e| e["event"] == "start" }
    expect(starts.size).to eq(220)
    expect(starts.map { |e| e["jid"] }.uniq.size).to eq(220)
    expect(max_running("A")).to eq(2)
    expect(max_running("B")).to be <= 2

    a_starts = starts.select { |e| e["tenant"] == "A" }.sort_by { |e| e["at"] }
    b_last_finish = events.select { |e| e["tenant"] == "B" && e["event"] == "finish" }.map { |e| e["at"] }.max
    expect(b_last_finish).to be < a_starts[100]["at"] # B done while A still had half its backlog

    # Enqueue order: a job is overtaken only by jobs fetched together with it by the 10 threads, once when
    # they park (in the order the threads get there) and once when handed over and fetched again.
    order = a_starts.map { |e| e["index"] }
    displacement = order.each_with_index.map { |index, position| (index - position).abs }.max
    expect(displacement).to be < 2 * 10
    expect(parked("A")).to eq(0)
    slots_back("A")
  end

  it "renews the leases of long jobs (heartbeat), so a 3 s job keeps its 2 s lease" do
    2.times { |i| SlotJob.perform_async("H", i, 3_000) }
    start_server(concurrency: 5)
    wait_for("2 long jobs holding slots") { holders("H").size == 2 }
    SlotJob.perform_async("H", 2, 10) # must wait although the 2 s leases run out meanwhile
    wait_for("3 jobs of H") { finished("H") == 3 }

    expect(max_running("H")).to eq(2)
    short = events.find { |e| e["index"] == 2 && e["event"] == "start" }
    long_finishes = events.select { |e| e["index"] < 2 && e["event"] == "finish" }.map { |e| e["at"] }
    expect(short["at"]).to be > long_finishes.min
  end

  it "gives a SIGKILLed process's slots back within the lease, and every parked job runs" do
    2.times { |i| SlotJob.perform_async("K", i, 60_000) }
    first = start_server(concurrency: 6)
    wait_for("2 long jobs holding slots") { holders("K").size == 2 }
    4.times { |i| SlotJob.perform_async("K", 10 + i, 10) }
    wait_for("4 parked") { parked("K") == 4 }

    first.kill!
    start_server(concurrency: 6)
    wait_for("the 4 parked jobs", timeout: 30) { finished("K") == 4 }

    expect(events.select { |e| e["event"] == "finish" }.map { |e| e["index"] }).to contain_exactly(10, 11, 12, 13)
    expect(parked("K")).to eq(0)
  end

  it "parks everything at limit 0 and releases at once when the limit is raised" do
    Sidekiq::FairTenant.limits.set(0, tenant: "Z")
    3.times { |i| SlotJob.perform_async("Z", i, 10) }
    start_server(concurrency: 5)
    wait_for("3 parked") { parked("Z") == 3 }
    expect(events).to be_empty

    expect(Sidekiq::FairTenant.limits.set(2, tenant: "Z")).to eq(2)
    wait_for("3 jobs of Z") { finished("Z") == 3 }
    expect(max_running("Z")).to be <= 2
  ensure
    Sidekiq::FairTenant.limits.delete(tenant: "Z")
  end

  it "registers the client middleware in server processes too: jobs pushed by jobs are re-routed" do
    PushFromServerJob.perform_async("S")
    start_server(concurrency: 2)
    wait_for("the pushed job") { redis.llen("queue:elsewhere_slow") == 1 }

    expect(JSON.parse(redis.lindex("queue:elsewhere_slow", 0))).to include("fair_tenant" => "S",
                                                                           "fair_tenant_rerouted_from" => "elsewhere")
  end

  it "releases slots on shutdown (Sidekiq::Shutdown in perform) and Sidekiq requeues the jobs" do
    2.times { |i| SlotJob.perform_async("T", i, 60_000) }
    # As many threads as jobs: an idle thread blocked in BRPOP during a hard shutdown can pop a
    # requeued job and be killed with it (Sidekiq's BasicFetch), which is not what this tests.
    server = start_server(concurrency: 2, args: %w[-t 1])
    wait_for("2 jobs holding slots") { holders("T").size == 2 }

    server.stop
    expect(holders("T")).to be_empty
    expect(redis.llen("queue:default")).to eq(2) # requeued by Sidekiq, not lost
  end

  it "releases the slot when perform raises, and Sidekiq retries the job" do
    require "sidekiq/api"
    jid = SlotJob.perform_async("E", 0, 10, true)
    start_server(concurrency: 5)
    wait_for("the job in the retry set") { Sidekiq::RetrySet.new.size == 1 }
    slots_back("E")

    SlotJob.perform_async("E", 1, 10)
    Sidekiq::RetrySet.new.each(&:retry)
    wait_for("both jobs of E") { finished("E") == 2 }
    expect(events.count { |e| e["jid"] == jid && e["event"] == "start" }).to eq(2)
    slots_back("E")
  end
end
