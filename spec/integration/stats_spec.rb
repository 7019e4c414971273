# frozen_string_literal: true

require "spec_helper"

RSpec.describe Sidekiq::FairTenant::Routing::Stats do
  subject(:stats) { Sidekiq::FairTenant.stats }

  let(:index) { "sidekiq-fair_tenant:tenants:ThrottledJob" }

  it "indexes a class's tenants in the enqueue script itself (no extra round trip)" do
    ThrottledJob.perform_async(0) # the first call may load the script
    commands = monitor_commands { ThrottledJob.perform_async(1) }
    expect(commands).to eq(%w[evalsha sadd lpush])
    expect(redis.hkeys(index)).to contain_exactly("tenant-0", "tenant-1")
    expect(redis.pttl(index)).to be_between(119_000, 120_000) # twice the longest window
  end

  it "writes a busy tenant's index time once per hundredth of the window (0.6 s here), not once a push" do
    router = Sidekiq::FairTenant.native.router
    rules = Sidekiq::FairTenant::JobClasses.rules(ThrottledJob)
    indexed = -> { redis.hget(index, "busy").unpack1("G") }
    hsets = -> { command_calls.fetch("hset", 0) }
    now = Time.now.to_f
    before = hsets.call
    100.times { |i| router.route(rules, "ThrottledJob", "default", "busy", now + (i * 0.005)) } # 0.5 s
    expect(hsets.call - before).to eq(1)
    expect(indexed.call).to eq(now)

    # Never idle, one push every 0.1 s for 3 s: the entry keeps up, 0.6 s behind at most.
    before = hsets.call
    lags = Array.new(30) do |i|
      at = now + 0.5 + (i * 0.1)
      router.route(rules, "ThrottledJob", "default", "busy", at)
      at - indexed.call
    end
    expect(lags.max).to be < 0.6 + 1e-6
    expect(hsets.call - before).to be_between(4, 6)
    expect(redis.pttl(index)).to be > 119_000 # every index write pushes its TTL out
    expect(stats.tenants(ThrottledJob).tenants.first[:last_enqueued_at].to_f).to eq(now + 3.4)
  end

  it "reports each tenant's count per rule window, its next queue and its last re-route" do
    started = Time.now
    6.times { ThrottledJob.perform_async(1) }
    2.times { ThrottledJob.perform_async(2) }

    page = stats.tenants(ThrottledJob)
    expect(page.total).to eq(2)
    greedy = stats.top(ThrottledJob, 1).first
    expect(greedy).to include(tenant: "tenant-1", next_queue: "throttled_4x", throttled: true)
    expect(greedy[:windows]).to eq([{ queue: "throttled_2x", threshold: 3, per: 60.0, count: 6 },
                                    { queue: "throttled_4x", threshold: 5, per: 10.0, count: 6 }])
    expect(greedy[:last_rerouted_at]).to be_between(started - 0.01, Time.now)

    calm = stats.tenant(ThrottledJob, "tenant-2")
    expect(calm).to include(next_queue: "default", throttled: false, last_rerouted_at: nil)
    expect(calm[:windows].map { |w| w[:count] }).to eq([2, 2])
  end

  it "forgets counts as windows pass and drops tenants whose enqueues all left the window" do
    4.times { ThrottledJob.perform_async(1) }
    travel 30.seconds
    expect(stats.tenant(ThrottledJob, "tenant-1")[:windows].map { |w| w[:count] }).to eq([4, 0])
    # Past the 60 s window, plus the 0.6 s a busy tenant's index time may lag (travel drops usec).
    travel 32.seconds
    expect(stats.tenants(ThrottledJob).total).to eq(0)
    expect(stats.tenant(ThrottledJob, "tenant-1")).to include(throttled: false, next_queue: "default")
  end

  it "pages by most recent enqueue and ranks the greediest first" do
    [3, 1, 2].each { |n| n.times { ThrottledJob.perform_async("t#{n}") } }

    recent = stats.tenants(ThrottledJob, limit: 2)
    expect(recent.tenants.map { |t| t[:tenant] }).to eq(%w[tenant-t2 tenant-t1])
    expect(stats.tenants(ThrottledJob, limit: 2, offset: 2).tenants.map { |t| t[:tenant] }).to eq(["tenant-t3"])
    expect(stats.top(ThrottledJob, 3).map { |t| t[:tenant] }).to eq(%w[tenant-t3 tenant-t2 tenant-t1])
    expect { stats.tenants(ThrottledJob, limit: 0) }.to raise_error(ArgumentError)
    expect { stats.tenants("NoSuchJob") }.to raise_error(ArgumentError, /unknown job class/)
  end

  it "stays cheap on 10,000 tenants", gc_stress: false do
    router = Sidekiq::FairTenant.native.router
    rules = Sidekiq::FairTenant::JobClasses.rules(ThrottledJob)
    now = Time.now.to_f
    10_000.times { |i| router.route(rules, "ThrottledJob", "default", "t#{i}", now + (i * 1e-4)) }
    expect(redis.hlen(index)).to eq(10_000)

    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    page = stats.tenants(ThrottledJob, limit: 50)
    recent_ms = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) * 1000
    top = stats.top(ThrottledJob, 10)
    top_ms = ((Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) * 1000) - recent_ms

    expect(page.total).to eq(10_000)
    expect(page.tenants.first[:tenant]).to eq("t9999")
    expect(top.size).to eq(10)
    expect(recent_ms).to be < 250
    expect(top_ms).to be < 1_500

    router.route(rules, "ThrottledJob", "default", "one-more", now + 2)
    expect(redis.hlen(index)).to eq(10_000) # capped: a random tenant made room
  end

  it "shows concurrency scopes: holders, lease expiry, parked count and effective limit" do
    slots = Sidekiq::FairTenant.native.slots
    tag, sub = Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "default")
    acquired_at = Time.now
    slots.acquire(tag, sub, "running-1", 60_000, 1, { "jid" => "running-1", "queue" => "default" }.to_json, 1.0)
    slots.acquire(tag, sub, "waiting-1", 60_000, 1, { "jid" => "waiting-1", "queue" => "default" }.to_json,
                  acquired_at.to_f - 5)
    Sidekiq::FairTenant.limits.set(1, tenant: "acme")

    scope = stats.concurrency.find { |s| s[:tenant] == "acme" }
    elapsed = Time.now - acquired_at # seconds under GC.stress
    expect(scope).to include(queue: "default", running: 1, parked: 1, limit: 1, limit_override: 1, default_limit: 1)
    expect(scope[:holders].first[:jid]).to eq("running-1")
    expect(scope[:holders].first[:lease_expires_at]).to be_between(acquired_at + 59.99, acquired_at + elapsed + 60)
    expect(scope[:oldest_parked_age]).to be_between(4.99, elapsed + 5.01)
  end

  it "adds the tenant's concurrency scope for classes that also limit concurrency" do
    klass = Class.new do
      include Sidekiq::Worker
      sidekiq_options queue: "default", fair_tenant_queues: [{ queue: "slow", threshold: 1, per: 60 }],
                      fair_tenant_concurrency: { limit: 3, lease: 60 }
    end
    stub_const("LimitedRoutedJob", klass)
    2.times { LimitedRoutedJob.set(fair_tenant: "acme").perform_async }
    tag, sub = Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "default")
    Sidekiq::FairTenant.native.slots.acquire(tag, sub, "j1", 60_000, 3, { jid: "j1", queue: "default" }.to_json, 1.0)

    row = stats.tenant(LimitedRoutedJob, "acme")
    expect(row).to include(next_queue: "slow", throttled: true)
    expect(row[:concurrency]).to include(tenant: "acme", queue: "default", running: 1, parked: 0, limit: 3)
  end
end
