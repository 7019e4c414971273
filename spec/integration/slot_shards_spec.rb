# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/slots_app"

# Concurrency slots live in the Redis a server process fetches from (Sidekiq's own, its shard), never in
# the gem's own redis_url: a parked job handed a slot is pushed where its process fetches it. Real
# redis-servers and real `sidekiq` processes running OneSlotJob (limit 1) from spec/support/slots_app.rb.
# The spec's own server (REDIS_URL) is Sidekiq's Redis S, and shard A.
RSpec.describe "Concurrency slots per shard" do
  extra = {}
  before(:all) { extra.merge!(gem: RedisServer.new.start, shard_b: RedisServer.new.start) }
  after(:all) { extra.each_value(&:stop) }

  let(:gem_server) { extra.fetch(:gem) }
  let(:shard_b) { extra.fetch(:shard_b) }
  let(:processes) { [] }

  before { extra.each_value { |server| server.redis.flushdb } }

  after do
    processes.each(&:stop)
    Sidekiq::FairTenant.configure { |c| c.redis_url = nil }
  end

  def start_process(redis_url:, gem_redis_url:, concurrency: 5)
    SidekiqProcess.new(redis_url: redis_url, concurrency: concurrency,
                       env: { "SIDEKIQ_FAIR_TENANT_REDIS_URL" => gem_redis_url })
                  .start.tap { |p| processes << p }
  end

  def events(conn) = conn.lrange(SlotsApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }
  def finished(conn) = events(conn).count { |e| e["event"] == "finish" }

  # Waits for the block, noting meanwhile whether the tenant's scope ever had parked jobs in `stats`'s Redis.
  def wait_for(what, parked_in: nil, tenant: nil, timeout: 60)
    parked_seen = false
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until yield
      parked_seen ||= parked_in.inspect_scope(*scope(tenant))[1].positive? if parked_in
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        logs = processes.map { |p| File.read(p.log).then { |log| log[-2000..] || log } }
        raise "timed out waiting for #{what}; sidekiq logs: #{logs}"
      end

      sleep 0.02
    end
    parked_seen
  end

  # Most jobs running at the same moment, from start/finish events.
  def max_running(list)
    running = 0
    list.select { |e| %w[start finish].include?(e["event"]) }
        .sort_by { |e| [e["at"], e["event"] == "start" ? 1 : 0] }
        .map { |e| running += e["event"] == "start" ? 1 : -1 }.max
  end

  def scope(tenant) = Sidekiq::FairTenant::Native::Slots.tenant_scope(tenant, "default")

  # Native::Stats over another server than the spec's.
  def stats_on(server)
    settings = Sidekiq::FairTenant.config.connection_settings.merge(redis_url: server.url)
    Sidekiq::FairTenant::Native::Stats.new(Sidekiq::FairTenant::Native::Client.new(settings))
  end

  def slot_keys(conn) = conn.keys("sidekiq-fair_tenant:slots:*") + conn.keys("sidekiq-fair_tenant:limits:*")

  it "parks and hands over in Sidekiq's Redis when the gem's own redis_url is another server" do
    8.times { |i| OneSlotJob.perform_async("G", i, 100) }
    PushFromServerJob.perform_async("R") # routes through the gem's Redis in the server process
    start_process(redis_url: ENV.fetch("REDIS_URL"), gem_redis_url: gem_server.url)
    parked = wait_for("8 jobs", parked_in: Sidekiq::FairTenant.native.stats, tenant: "G") do
      finished(redis) == 8 && redis.llen("queue:elsewhere_slow") == 1
    end

    starts = events(redis).select { |e| e["event"] == "start" }
    expect(starts.map { |e| e["index"] }).to contain_exactly(*0..7)
    expect(starts.map { |e| e["jid"] }.uniq.size).to eq(8)
    expect(max_running(events(redis))).to eq(1)
    expect(parked).to be(true) # some jobs waited, in S, and came back through hand-overs there
    expect(redis.llen("queue:default")).to eq(0)
    expect(Sidekiq::FairTenant.native.stats.inspect_scope(*scope("G"))).to eq([[], 0])

    expect(gem_server.redis.keys("queue:*")).to be_empty
    expect(slot_keys(gem_server.redis)).to be_empty
    expect(gem_server.redis.exists?("sidekiq-fair_tenant:enqueued:RoutedElsewhereJob:tenant:R")).to be(true)
  end

  it "keeps the jobs of a shard, pushed with Sidekiq::Client.via, in that shard's process" do
    pool_b = Sidekiq::RedisConnection.create(url: shard_b.url, size: 2)
    Sidekiq::Client.via(pool_b) { 8.times { |i| OneSlotJob.perform_async("B", i, 100) } }
    expect(shard_b.redis.llen("queue:default")).to eq(8)
    expect(redis.llen("queue:default")).to eq(0)

    # One routing Redis for the whole app (shard A), as an app with a gem redis_url of its own has.
    start_process(redis_url: ENV.fetch("REDIS_URL"), gem_redis_url: ENV.fetch("REDIS_URL"))
    b = start_process(redis_url: shard_b.url, gem_redis_url: ENV.fetch("REDIS_URL"))
    parked = wait_for("8 jobs in shard B", parked_in: stats_on(shard_b), tenant: "B") { finished(shard_b.redis) == 8 }

    b_events = events(shard_b.redis)
    expect(b_events.select { |e| e["event"] == "start" }.map { |e| e["index"] }).to contain_exactly(*0..7)
    expect(b_events.map { |e| e["pid"] }.uniq).to eq([b.pid])
    expect(max_running(b_events)).to eq(1)
    expect(parked).to be(true)
    expect(shard_b.redis.llen("queue:default")).to eq(0)

    expect(events(redis)).to be_empty
    expect(redis.keys("queue:*")).to be_empty
    expect(slot_keys(redis)).to be_empty
  end

  describe "in the API" do
    it "sets limits and reads concurrency in Sidekiq's Redis, routes through the gem's own" do
      Sidekiq::FairTenant.configure { |c| c.redis_url = gem_server.url }
      expect(Sidekiq::FairTenant.native.server).to include(":#{gem_server.port}/")

      Sidekiq::FairTenant.limits.set(3, tenant: "acme")
      slot = Sidekiq::FairTenant::ServerMiddleware::Slot.new(*scope("acme"), "j1", 60_000, 1, "r1")
      expect(Sidekiq::FairTenant::Concurrency::SlotCalls.acquire(slot, "{}", 1.0)).to eq(:acquired)
      expect(Sidekiq::FairTenant.limits.list).to eq([{ tenant: "acme", queue: nil, limit: 3 }])
      expect(Sidekiq::FairTenant.stats.concurrency).to match([include(tenant: "acme", running: 1, limit: 3)])
      expect(slot_keys(redis)).not_to be_empty
      expect(slot_keys(gem_server.redis)).to be_empty

      ThrottledJob.perform_async(1)
      expect(gem_server.redis.keys("sidekiq-fair_tenant:enqueued:*")).not_to be_empty
      expect(redis.keys("sidekiq-fair_tenant:enqueued:*")).to be_empty
    end
  end
end
