# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/fair_app"

# Recovery housekeeping across a fleet: real `sidekiq` processes beside many registered (fake) ones. One
# sweep per interval for the whole fleet, each under the fleet's lease; a dead process is still recovered,
# and no live one is. Sweeps are seen through keyspace notifications on the lease and the sweep's lock.
RSpec.describe "Fair queue recovery across a fleet" do
  let(:fair) { Sidekiq::FairTenant::Native::Fair }
  let(:registry) { fair.registry_key }
  let(:lease) { fair.recovery_lease_key }
  let(:lock) { fair.recovery_lock_key }
  let(:servers) { [] }
  let(:seen) { Queue.new }

  before do
    redis.flushdb
    redis.call("CONFIG", "SET", "notify-keyspace-events", "K$g")
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after do
    servers.each(&:stop)
    @listener&.kill
    @listener&.join(1)
    redis.call("CONFIG", "SET", "notify-keyspace-events", "")
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def entry(job, tenant) = "4:fair#{tenant.bytesize}:#{tenant}#{job}"

  def job(tenant, index)
    JSON.generate("class" => "SteadyFairJob", "queue" => "fair", "args" => [tenant, index], "jid" => "j#{index}",
                  "enqueued_at" => Time.now.to_f)
  end

  # A process registered with one job in flight; `beating`: its Sidekiq heartbeat key exists.
  def register(identity, index, beating:)
    if beating
      redis.hset(identity, "beat", Time.now.to_f.to_s)
      redis.expire(identity, 600)
    end
    redis.sadd(registry, identity)
    redis.lpush(fair.inflight_key(identity), entry(job("t#{index}", index), "t#{index}"))
  end

  # [key, event] of every write to the lease and the lock, in order.
  def listen
    ready = Queue.new
    out = seen
    conn = Redis.new(url: ENV.fetch("REDIS_URL"))
    @listener = Thread.new do
      Thread.current.report_on_exception = false
      conn.psubscribe("__keyspace@*__:#{Sidekiq::FairTenant::Native::Names::ROOT}:fair:recovery-*") do |on|
        on.psubscribe { ready << true }
        on.pmessage { |_, channel, event| out << [channel.split(":", 2).last, event] }
      end
    end
    ready.pop
  end

  def events
    Array.new(seen.size) { seen.pop }.tap { |list| (@events ||= []).concat(list) }
    @events
  end

  def sweeps = events.count { |key, event| key == lock && event == "set" }
  def swept = events.count { |key, event| key == lock && event == "del" }
  def leases = events.count { |key, event| key == lease && event == "set" }
  def finished = redis.lrange(FairApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }.select { |e| e["event"] == "finish" }

  it "runs one sweep per interval for the fleet under its lease, and still recovers a dead process" do
    live = Array.new(20) { |i| "fake-host-#{i}:#{100 + i}:#{format("%06x", i)}" }
    live.each_with_index { |identity, i| register(identity, i, beating: true) }
    dead = "dead-host:1:dead"
    register(dead, 99, beating: false)
    listen

    app = File.expand_path("../support/fair_app.rb", __dir__)
    3.times do
      servers << SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 2, queues: %w[fair], app: app).start
    end
    # A sweep suspects it, the next (when its lapse is over) recovers it, and a fetcher runs its job.
    wait_for("the dead process's job ran", timeout: 90) { finished.any? { |e| e["jid"] == "j99" } }
    # One more sweep, a full interval on: nothing suspected any more.
    after_recovery = sweeps
    # (to its end: its lock deleted, so the last turn is whole when the turns are read)
    wait_for("the next interval's sweep", timeout: 60) { sweeps > after_recovery && swept == sweeps }

    # Every sweep ran under a lease of its own: each lease taken is followed by one sweep (its lock set and
    # deleted) before the next is taken. Three processes each sweeping on their own would interleave.
    turns = events.select { |key, event| (key == lease && event == "set") || (key == lock && event != "expire") }
    expect(turns.each_slice(3).map { |slice| slice.map(&:last) }.uniq).to eq([%w[set set del]]), turns.inspect
    expect(sweeps).to eq(leases)
    expect(sweeps).to be_between(3, 4)
    # The dead process left the registry; the live ones kept their jobs and are not suspected.
    expect(redis.smembers(registry)).not_to include(dead)
    expect(redis.exists?(fair.inflight_key(dead))).to be(false)
    live.each { |identity| expect(redis.llen(fair.inflight_key(identity))).to eq(1) } # (format-2 lists: left alone)
    expect(redis.hkeys(fair.recovery_suspects_key) & live).to eq([])
  end

  describe "the recovery thread" do
    let(:sweeper) { Sidekiq::FairTenant::FairFetch::Sweeper }
    let(:pace) { Sidekiq::FairTenant::FairQueues::Recovery::PACE }

    after { pace.now! }

    it "sweeps on a thread of its own, started with a fetcher, again in a forked child, and stops" do
      dead = "gone-host:1:abc"
      register(dead, 1, beating: false)
      redis.hset(fair.recovery_suspects_key, dead, (Time.now.to_f - 60).to_s) # found gone a minute ago
      pace.now!
      Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "inproc-host:1:a")

      wait_for("recovered by the thread") { !redis.sismember(registry, dead) }
      expect(Thread.list.map(&:name)).to include("fair_tenant-recovery")
      expect(redis.get(lease)).to eq("inproc-host:1:a")
      expect(redis.lrange("#{fair.base("fair")}t:t1", 0, -1).size).to eq(1)

      pace.never!
      pid = fork { exit!(sweeper.tap { |s| s.forked("child:1:c") }.running? ? 0 : 1) }
      expect(Process.wait2(pid).last.exitstatus).to eq(0)

      sweeper.stop
      expect(sweeper.running?).to be(false)
      expect(Thread.list.map(&:name)).not_to include("fair_tenant-recovery")
    end
  end
end
