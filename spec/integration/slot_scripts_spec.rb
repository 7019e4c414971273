# frozen_string_literal: true

require "spec_helper"
require_relative "../support/slots_app"
require_relative "../support/active_job"

class AjSlotJob < ActiveJob::Base
  queue_as :default
  sidekiq_options fair_tenant_concurrency: { limit: 1, lease: 60 }

  def self.fair_tenant(account) = "aj-#{account}"

  def perform(_account); end
end

# The slot scripts and the server middleware driven directly (no server process), so every
# interleaving is deterministic.
RSpec.describe "Concurrency slots (scripts and middleware)" do
  let(:slots) { Sidekiq::FairTenant.native.slots }
  let(:stats) { Sidekiq::FairTenant.native.stats }
  let(:tag) { scope[0] }
  let(:sub) { scope[1] }
  let(:scope) { Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "default") }
  let(:middleware) { Sidekiq::FairTenant::ServerMiddleware.new }

  def payload(jid, enqueued_at = Time.now.to_f, tenant: "acme")
    { "class" => "SlotJob", "queue" => "default", "args" => [tenant, 0, 0], "jid" => jid,
      "enqueued_at" => enqueued_at, "fair_tenant" => tenant,
      "fair_tenant_concurrency" => { "limit" => 1, "lease" => 60 } }
  end

  def acquire(jid, limit: 1, enqueued_at: Time.now.to_f)
    slots.acquire(tag, sub, jid, 60_000, limit, JSON.generate(payload(jid, enqueued_at)), enqueued_at)
  end

  # Examples tagged gc_stress: false count on a 50-100 ms lease still holding a call or two later, which
  # GC.stress (seconds per call) breaks; the other examples make the same calls under it.
  # Read on Sidekiq's own connection, wherever the gem's redis_url points.
  def holders = Sidekiq::FairTenant.stats.scope(tag, sub)[:holders].map { |h| h[:jid] }
  def parked = Sidekiq::FairTenant.stats.scope(tag, sub)[:parked]

  it "grants up to the limit, parks the rest and hands freed slots to the oldest parked job" do
    expect(acquire("a", limit: 2)).to eq(:acquired)
    expect(acquire("b", limit: 2)).to eq(:acquired)
    expect(acquire("d", limit: 2, enqueued_at: Time.now.to_f + 1)).to eq(:parked)
    expect(acquire("c", limit: 2, enqueued_at: Time.now.to_f - 1)).to eq(:parked) # older: first in line
    expect(parked).to eq(2)

    expect(slots.release(tag, sub, "a", 60_000, 2)).to eq(1)
    expect(holders).to contain_exactly("b", "c")
    front = JSON.parse(redis.lindex("queue:default", -1))
    expect(front["jid"]).to eq("c") # pushed to the end Sidekiq pops next
    expect(redis.sismember("queues", "default")).to be(true)
  end

  it "hands jobs of one enqueue millisecond (Sidekiq 8) over in the order they parked, not by payload" do
    ms = Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
    expect(acquire("a", enqueued_at: ms)).to eq(:acquired)
    expect(%w[z b y].map { |jid| acquire(jid, enqueued_at: ms) }).to eq(%i[parked parked parked])
    expect(acquire("x", enqueued_at: ms - 1)).to eq(:parked) # an older millisecond still goes first

    handed = %w[a x z b].map do |holder|
      slots.release(tag, sub, holder, 60_000, 1)
      holders.first
    end
    expect(handed).to eq(%w[x z b y])
  end

  it "lets a handed-over job run without parking again, and a re-acquire is a no-op" do
    acquire("a")
    acquire("b")
    slots.release(tag, sub, "a", 60_000, 1)
    expect(acquire("b")).to eq(:held)
    expect(acquire("b")).to eq(:held)
    expect(holders).to eq(["b"])
  end

  it "lets a handed-over job's run claim its slot with a payload that names no queue (nothing taken back)" do
    acquire("a")
    acquire("b")
    slots.release(tag, sub, "a", 60_000, 1)
    expect(slots.acquire(tag, sub, "b", 60_000, 1, "{}", 0.0)).to eq(:held) # raised before
    expect(holders).to eq(["b"])
    expect(redis.llen("queue:default")).to eq(1) # the handed-over copy stays where it was put
  end

  it "releases idempotently: a double release never admits more than the limit" do
    acquire("a")
    %w[b c].each { |j| acquire(j) }
    expect(slots.release(tag, sub, "a", 60_000, 1)).to eq(1)
    expect(slots.release(tag, sub, "a", 60_000, 1)).to eq(0)
    expect(holders).to eq(["b"])
    expect(parked).to eq(1)
  end

  it "never over-admits under 25 threads acquiring at once" do
    results = Array.new(25) { |i| Thread.new { acquire("t#{i}", limit: 3) } }.map(&:value)
    expect(results.count(:acquired)).to eq(3)
    expect(results.count(:parked)).to eq(22)
  end

  it "never over-admits across forked processes" do
    children = Array.new(4) do |p|
      reader, writer = IO.pipe
      pid = fork do
        reader.close
        outcomes = Array.new(10) { |i| acquire("p#{p}-#{i}", limit: 3) }
        writer.write(JSON.generate(outcomes))
        exit!(0)
      end
      writer.close
      [pid, reader]
    end
    outcomes = children.flat_map { |_, r| JSON.parse(r.read) }
    children.map(&:first).each { |pid| Process.wait(pid) }
    expect(outcomes.count("acquired")).to eq(3)
    expect(holders.size).to eq(3)
    expect(parked).to eq(37)
  end

  it "reclaims expired leases on the next acquire and in the sweep", gc_stress: false do
    slots.acquire(tag, sub, "crashed", 50, 1, JSON.generate(payload("crashed")), Time.now.to_f)
    expect(acquire("waiting")).to eq(:parked)
    sleep 0.1 # the 50 ms lease of the "crashed" holder runs out; nobody releases it
    expect(slots.sweep(10)).to eq(1)
    expect(holders).to eq(["waiting"])
    expect(redis.scard("sidekiq-fair_tenant:slots:tags")).to eq(1)

    slots.release(tag, sub, "waiting", 60_000, 1)
    slots.sweep(10)
    expect(redis.scard("sidekiq-fair_tenant:slots:tags")).to eq(0) # nothing left to watch
  end

  it "drops a dead worker's expired lease when its slot is needed, and never counts it as running" do
    slots.acquire(tag, sub, "crashed", 50, 2, "{}", Time.now.to_f)
    sleep 0.1
    expect(acquire("a", limit: 2)).to eq(:acquired) # a free slot: the expired lease is left alone
    expect(holders).to contain_exactly("crashed", "a")
    expect(Sidekiq::FairTenant::Routing::Stats.new.scope(tag, sub)[:running]).to eq(1)

    expect(acquire("b", limit: 2)).to eq(:acquired) # full: the expired lease makes room
    expect(holders).to contain_exactly("a", "b")
    slots.release(tag, sub, "a", 60_000, 2) # nobody parked: the release only removes "a"
    expect(holders).to eq(["b"])
  end

  it "renews leases of running jobs (heartbeat) and never resurrects a reclaimed one", gc_stress: false do
    slots.acquire(tag, sub, "long", 100, 1, "{}", Time.now.to_f)
    expect(slots.renew([[tag, sub, "long", "long", 60_000], [tag, sub, "gone", "gone", 60_000]])).to eq(1)
    sleep 0.15
    expect(acquire("next")).to eq(:parked) # "long" still holds: its lease was extended
    expect(holders).to eq(["long"])
  end

  it "renews and sweeps on Sidekiq's own connection, as the heartbeat does (SlotCalls)", gc_stress: false do
    slot = ->(jid) { Sidekiq::FairTenant::ServerMiddleware::Slot.new(tag, sub, jid, 60_000, 1, jid) }
    slots.acquire(tag, sub, "long", 100, 1, "{}", Time.now.to_f)
    expect(Sidekiq::FairTenant::Concurrency::SlotCalls.renew([slot.call("long"), slot.call("gone")])).to eq(1)
    sleep 0.15
    expect(acquire("next")).to eq(:parked) # "long" still holds: its lease was extended

    other, other_sub = Sidekiq::FairTenant::Native::Slots.tenant_scope("swept", "default")
    slots.acquire(other, other_sub, "crashed", 50, 1, "{}", Time.now.to_f)
    waiting = JSON.generate(payload("waiting", tenant: "swept"))
    expect(slots.acquire(other, other_sub, "waiting", 60_000, 1, waiting, Time.now.to_f)).to eq(:parked)
    sleep 0.1 # the 50 ms lease of "crashed" runs out; acme's "long" still holds
    expect(Sidekiq::FairTenant::Concurrency::SlotCalls.sweep(10)).to eq([1, 1])
    expect(stats.inspect_scope(other, other_sub)[0].map(&:first)).to eq(["waiting"])
    expect(holders).to eq(["long"])
  end

  describe "middleware" do
    def perform(job)
      ran = false
      middleware.call(SlotJob.new, job, "default") { ran = true }
      ran
    end

    it "runs, parks and releases in ensure, also when perform raises" do
      job = payload("m1")
      expect { middleware.call(SlotJob.new, job, "default") { raise "boom" } }.to raise_error("boom")
      expect(holders).to be_empty

      first = payload("m2")
      second = payload("m3")
      middleware.call(SlotJob.new, first, "default") do
        expect(holders).to eq(["m2"])
        expect(perform(second)).to be(false) # no slot: parked, not run
        expect(parked).to eq(1)
      end
      expect(holders).to eq(["m3"]) # handed over on release
      expect(perform(JSON.parse(redis.rpop("queue:default")))).to be(true)
      expect(holders).to be_empty
    end

    it "releases the slot when the thread is interrupted mid-perform (Thread#raise)" do
      worker = Thread.new do
        middleware.call(SlotJob.new, payload("tr"), "default") { sleep 30 }
      rescue RuntimeError
        :interrupted
      end
      sleep 0.01 until holders == ["tr"]
      worker.raise(RuntimeError, "stop")

      expect(worker.value).to eq(:interrupted)
      expect(holders).to be_empty
    end

    it "gives the slot back when an interrupt lands just after the script took it, and lets it through" do
      # The interrupt arrives once the acquire script has run, before the job starts.
      allow(Sidekiq::FairTenant::Concurrency::SlotCalls).to receive(:take).and_wrap_original do |original, *args|
        original.call(*args)
        raise Timeout::Error, "interrupted"
      end
      ran = false

      expect { middleware.call(SlotJob.new, payload("late"), "default") { ran = true } }
        .to raise_error(Timeout::Error)
      expect(ran).to be(false)
      expect(holders).to be_empty
    end

    it "limits ActiveJob jobs by the tenant from self.fair_tenant(*arguments)" do
      2.times { AjSlotJob.perform_later(7) }
      first, second = redis.lrange("queue:default", 0, -1).map { |j| JSON.parse(j) }
      wrapper = ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper.new
      aj_tag, aj_sub = Sidekiq::FairTenant::Native::Slots.tenant_scope("aj-7", "default")
      middleware.call(wrapper, first, "default") do
        expect(stats.inspect_scope(aj_tag, aj_sub)[0].size).to eq(1)
        expect(middleware.call(wrapper, second, "default") { raise "must not run" }).to be_nil
        expect(stats.inspect_scope(aj_tag, aj_sub)[1]).to eq(1)
      end
    end

    it "scopes by the original queue of a re-routed job" do
      rerouted = payload("r1").merge("queue" => "throttled", "fair_tenant_rerouted_from" => "default")
      middleware.call(SlotJob.new, rerouted, "throttled") { expect(holders).to eq(["r1"]) }
    end

    it "scopes a raw payload whose fair_tenant_rerouted_from is false (or null) by its own queue" do
      [false, nil].each_with_index do |from, i|
        job = payload("f#{i}").merge("fair_tenant_rerouted_from" => from)
        middleware.call(SlotJob.new, job, "default") { expect(holders).to eq(["f#{i}"]) }
      end
    end

    it "uses the class's key method for custom scopes" do
      job = { "class" => "WebhookJob", "queue" => "default", "args" => [42, 0, 0], "jid" => "w1",
              "enqueued_at" => Time.now.to_f, "fair_tenant_concurrency" => { "limit" => 1, "key" => "webhook_key" } }
      key_tag, key_sub = Sidekiq::FairTenant::Native::Slots.key_scope("customer-42")
      middleware.call(WebhookJob.new, job, "default") do
        expect(stats.inspect_scope(key_tag, key_sub)[0].map(&:first)).to eq(["w1"])
      end
    end

    it "never raises when the release fails; the lease frees the slot later" do
      gone = Sidekiq::RedisConnection.create(url: "redis://127.0.0.1:#{RedisServer.free_port}/0", size: 1)
      log = capture_log do
        middleware.call(SlotJob.new, payload("rf"), "default") do
          allow(Sidekiq).to receive(:redis) { |&block| gone.with(&block) } # Sidekiq's Redis went away
        end
      end
      expect(log).to include("slot of rf frees when its lease expires")
    end

    it "runs the job when Sidekiq's Redis (where the slots are) is unreachable (fail open) and warns once" do
      log = with_sidekiq_redis(url: "redis://127.0.0.1:#{RedisServer.free_port}/0") do
        capture_log { 3.times { |i| expect(perform(payload("x#{i}"))).to be(true) } }
      end
      # One warning for the three jobs (and, past the acquire's patience, one of the heartbeat that gives back
      # what a lost call may have taken: each rate-limited on its own).
      expect(log.scan("runs without a slot").size).to eq(1), log
      expect(log.scan("[sidekiq-fair_tenant]").size).to be <= 2, log
    end

    it "keeps slots in Sidekiq's Redis when the gem's own redis_url points elsewhere" do
      Sidekiq::FairTenant.configure { |c| c.redis_url = "redis://127.0.0.1:#{RedisServer.free_port}/0" }
      expect(perform(payload("elsewhere"))).to be(true)
      expect(middleware.call(SlotJob.new, payload("inside"), "default") { holders }).to eq(["inside"])
    ensure
      Sidekiq::FairTenant.configure { |c| c.redis_url = nil }
    end
  end

  describe "runtime limits" do
    let(:limits) { Sidekiq::FairTenant.limits }

    it "sets, gets, lists and deletes per-tenant, per-queue and per-key overrides" do
      limits.set(3, tenant: "acme")
      limits.set(5, tenant: "acme", queue: "default")
      limits.set("2", key: "customer-1")
      expect(limits.get(tenant: "acme")).to eq(3)
      expect(limits.get(tenant: "acme", queue: "default")).to eq(5)
      expect(limits.get(tenant: "other")).to be_nil
      expect(limits.list).to contain_exactly({ tenant: "acme", queue: nil, limit: 3 },
                                             { tenant: "acme", queue: "default", limit: 5 },
                                             { key: "customer-1", limit: 2 })
      limits.delete(tenant: "acme", queue: "default")
      limits.delete(key: "customer-1")
      expect(limits.list).to eq([{ tenant: "acme", queue: nil, limit: 3 }])
    end

    it "applies a raise at once, releasing parked jobs up to the new limit; 0 halts" do
      limits.set(0, tenant: "acme")
      expect(%w[a b c].map { |j| acquire(j) }).to eq(%i[parked parked parked])

      expect(limits.set(2, tenant: "acme")).to eq(2)
      expect(holders.size).to eq(2)
      expect(redis.llen("queue:default")).to eq(2)
      expect(limits.set(5, tenant: "acme", queue: "default")).to eq(1)
      expect(parked).to eq(0)
    end

    it "rejects invalid input with ArgumentError" do
      expect { limits.set(-1, tenant: "acme") }.to raise_error(ArgumentError, /limit must be an Integer/)
      expect { limits.set(1.5, tenant: "acme") }.to raise_error(ArgumentError)
      expect { limits.set("lots", tenant: "acme") }.to raise_error(ArgumentError)
      expect { limits.set(1) }.to raise_error(ArgumentError, /give tenant:/)
      expect { limits.set(1, tenant: "a", key: "b") }.to raise_error(ArgumentError)
      expect { limits.set(1, key: "b", queue: "q") }.to raise_error(ArgumentError, /queue: goes with tenant:/)
    end
  end

  it "validates fair_tenant_concurrency at sidekiq_options time" do
    expect do
      Class.new do
        include Sidekiq::Worker

        def self.name = "BadSlotsJob"
        sidekiq_options fair_tenant_concurrency: { limit: -1 }
      end
    end.to raise_error(ArgumentError, /BadSlotsJob: invalid fair_tenant_concurrency .*limit must be an Integer/)
  end
end
