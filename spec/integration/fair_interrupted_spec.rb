# frozen_string_literal: true

require "spec_helper"
require_relative "../support/conservation/run"
require_relative "../support/fair_app"

# Multi-call flows cut short after any call (the calling process SIGKILLed, the next call refused): a later sweep
# by any process finishes them, and every non-empty in-flight list belongs to a process that is registered or
# being recovered at every instant (RELIABILITY.md's invariant).
RSpec.describe "Fair queues: flows interrupted between their calls" do
  let(:fair) { Sidekiq::FairTenant::FairQueues }
  let(:recovery) { Sidekiq::FairTenant::FairQueues::Recovery }
  let(:names) { Sidekiq::FairTenant::Native::Fair }
  let(:runner) { Sidekiq::FairTenant::ScriptRunner }

  before do
    stub_const("Sidekiq::FairTenant::FairFetch::TIMEOUT", 0.01)
    stub_const("Sidekiq::FairTenant::FairQueues::Recovery::ENTRIES", 5) # 12 jobs: three recovery calls
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
    recovery::PACE.never!
  end

  after do
    recovery::PACE.now!
    redis.config(:set, "min-replicas-to-write", "0")
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def fetcher(identity)
    Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, identity).tap do
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
  end

  # A process that fetched `count` jobs and died (no heartbeat key): suspected by one sweep, due LAPSE s later.
  def dead_process(identity, count)
    count.times { |i| ConservedJob.perform_async("t#{i % 3}", i, "x") }
    fetch = fetcher(identity)
    count.times { fetch.retrieve_work }
    Sidekiq::FairTenant::FairFetch::Acks.instance_variable_get(:@fetchers).delete(fetch)
    expect(redis.hlen(names.inflight_key(identity))).to eq(count)
    expect(sweep).to include(suspected: 1, recovered: 0)
    key = names.recovery_suspects_key
    redis.hgetall(key).each { |id, since| redis.hset(key, id, (since.to_f - recovery::LAPSE - 1).to_s) }
  end

  # A fetcher's recovery thread switches its fair queues on at its start (FairQueues::Off.switched_on), whenever it gets
  # to run: stopped (and joined) before a spec switches one off, so that it cannot switch it on again after.
  def stop_switching_on = Sidekiq::FairTenant::FairFetch::Sweeper.stop

  def sweep(identity = "sweeper:1:a") = Sidekiq.redis { |conn| recovery.sweep(conn, identity) }
  def waiting = Sidekiq.redis { |conn| fair.backlog(conn, "fair") }
  def owners = redis.sunion(names.registry_key, names.recovering_key)

  # Every recovery call after the first `calls` does `fault` instead (raises, or has Redis refuse writes).
  def cut_after(calls, &fault)
    done = 0
    allow(recovery).to receive(:recover_entries).and_wrap_original do |original, *args|
      fault.call if done == calls
      done += 1
      original.call(*args)
    end
  end

  # The in-flight list a process of the previous gem (format 2) kept, newest entry first:
  # "<len>:<queue><len>:<tenant><job>".
  def as_format2_list(identity)
    key = names.inflight_key(identity)
    fields = redis.hgetall(key).sort_by { |field, _job| -names.field_id(field) }
    redis.del(key)
    fields.each do |field, job|
      queue, tenant, = names.decode_entry(field)
      redis.rpush(key, "#{queue.bytesize}:#{queue}#{tenant.bytesize}:#{tenant}#{job}")
    end
  end

  it "recovers the in-flight list of a dead process of the previous gem (a rolling deploy strands nothing)" do
    dead_process("dead:old:a", 9)
    as_format2_list("dead:old:a")
    redis.rpush(names.inflight_key("dead:old:a"), "not an entry") # the oldest
    expect(redis.type(names.inflight_key("dead:old:a"))).to eq("list")

    expect(sweep).to include(recovered: 10, processes: 1)
    expect(redis.exists?(names.inflight_key("dead:old:a"))).to be(false)
    expect(owners).to be_empty
    expect(redis.zrange("dead", 0, -1)).to eq(["not an entry"])
    # Each tenant has its jobs back in the order it was served them (t0: 0, 3, 6), ahead of nothing else.
    %w[t0 t1 t2].each_with_index do |tenant, t|
      back = redis.lrange("#{fair.base("fair")}t:#{tenant}", 0, -1).map { |job| JSON.parse(job)["args"][1] }
      expect(back).to eq([t, t + 3, t + 6])
    end
  end

  it "finishes a recovery whose sweeper died after its first call (the rest is not stranded)" do
    dead_process("dead:1:a", 12)
    killed = Class.new(Exception) # rubocop:disable Lint/InheritException -- SIGKILL: nothing rescues it
    cut_after(1) { raise killed }

    expect { sweep }.to raise_error(killed)
    expect(redis.hlen(names.inflight_key("dead:1:a"))).to eq(7)
    expect(owners).to include("dead:1:a") # never in no set while its list holds jobs
    expect(redis.sismember(names.registry_key, "dead:1:a")).to be(false) # (a comeback re-registers)

    RSpec::Mocks.space.proxy_for(recovery).reset
    expect(sweep).to include(recovered: 7)
    expect(redis.hlen(names.inflight_key("dead:1:a"))).to eq(0)
    expect(owners).to be_empty
    expect(waiting).to eq(12)
  end

  it "finishes a recovery whose second call was refused (NOREPLICAS) once writes are accepted again" do
    dead_process("dead:2:a", 12)
    cut_after(1) { redis.config(:set, "min-replicas-to-write", "1") }

    expect { sweep }.to raise_error(/NOREPLICAS/)
    redis.config(:set, "min-replicas-to-write", "0")
    expect(owners).to eq(["dead:2:a"])

    RSpec::Mocks.space.proxy_for(recovery).reset
    redis.del(names.recovery_lock_key) # its DEL was refused too: the lock expires after Recovery::INTERVAL
    expect(sweep).to include(recovered: 7)
    expect(redis.hlen(names.inflight_key("dead:2:a"))).to eq(0)
    expect(owners).to be_empty
    expect(waiting).to eq(12)
  end

  it "leaves a process that came back between two calls the rest of its list, and takes back its copies" do
    dead_process("live:3:a", 12)
    killed = Class.new(Exception) # rubocop:disable Lint/InheritException
    cut_after(1) { raise killed }
    expect { sweep }.to raise_error(killed)
    RSpec::Mocks.space.proxy_for(recovery).reset

    fetch = fetcher("live:3:a") # it had stalled: its next call registers it again
    redis.hset("live:3:a", "beat", "1")
    fetch.retrieve_work
    expect(redis.sismember(names.recovering_key, "live:3:a")).to be(false)

    expect(sweep).to include(recovered: 0)
    expect(redis.hlen(names.inflight_key("live:3:a"))).to eq(12) # 7 kept, 5 copies taken back
    expect(waiting).to eq(0)
  end

  it "recovers nothing of a process whose heartbeat came back between the look and the first call" do
    dead_process("live:4:a", 3)
    allow(recovery).to receive(:recover_entries).and_wrap_original do |original, *args|
      redis.hset("live:4:a", "beat", "1") # Sidekiq's heartbeat, written just before the call
      original.call(*args)
    end

    expect(sweep).to include(recovered: 0)
    expect(redis.hlen(names.inflight_key("live:4:a"))).to eq(3)
    expect(redis.sismember(names.registry_key, "live:4:a")).to be(true)
  end

  it "finishes a recovery cut short by a real SIGKILL of the sweeping process" do
    dead_process("dead:5:a", 12)
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      pool = Sidekiq::RedisConnection.create(url: ENV.fetch("REDIS_URL"))
      calls = 0
      allow(recovery).to receive(:recover_entries).and_wrap_original do |original, *args|
        if (calls += 1) == 2
          writer.puts("first call done")
          sleep
        end
        original.call(*args)
      end
      pool.with { |conn| recovery.sweep(conn, "sweeper:child:a") }
      exit!(0)
    end
    writer.close
    expect(reader.gets).to eq("first call done\n")
    Process.kill("KILL", pid)
    Process.wait(pid)

    expect(redis.hlen(names.inflight_key("dead:5:a"))).to eq(7)
    redis.del(names.recovery_lock_key) # a SIGKILLed sweeper's lock expires after Recovery::INTERVAL
    sweep
    expect(redis.hlen(names.inflight_key("dead:5:a"))).to eq(0)
    expect(owners).to be_empty
    expect(waiting).to eq(12)
  end

  it "recovers large jobs a few per call: no call carries much more than RECOVER_BYTES" do
    stub_const("Sidekiq::FairTenant::FairQueues::Recovery::ENTRIES", 50)
    big = "x" * 300_000
    8.times { |i| ConservedJob.perform_async("t#{i % 2}", i, big) }
    fetch = fetcher("dead:7:a")
    8.times { fetch.retrieve_work }
    Sidekiq::FairTenant::FairFetch::Acks.instance_variable_get(:@fetchers).delete(fetch)
    sweep
    key = names.recovery_suspects_key
    redis.hgetall(key).each { |id, since| redis.hset(key, id, (since.to_f - recovery::LAPSE - 1).to_s) }
    sizes = []
    allow(recovery).to receive(:recover_entries).and_wrap_original do |original, *args|
      sizes << args[3].flatten.sum(&:bytesize)
      original.call(*args)
    end

    expect(sweep).to include(recovered: 8)
    expect(sizes.size).to eq(2) # 4 + 4 entries of about 300 KB (the fourth passes 1 MB)
    expect(sizes.max).to be < Sidekiq::FairTenant::Native::Names::RECOVER_BYTES + 310_000
    expect(waiting).to eq(8)
  end

  describe "Queue#clear" do
    let(:clearing) { Sidekiq::FairTenant::Native::Names::FAIR_CLEARING_KEY }
    let(:lists) { "#{fair.base("fair")}#{Sidekiq::FairTenant::Native::Names::TENANT_LIST}" }
    let(:queue) { Sidekiq::Queue.new("fair") }

    before do
      stub_const("Sidekiq::FairTenant::Native::Names::CLEAR_BATCH", 2) # 2 tenants a call
      Sidekiq::FairTenant.weights.set(0, tenant: "paused")
    end

    def backlog_jobs(count_per_tenant, tenants)
      tenants.flat_map { |tenant| Array.new(count_per_tenant) { |i| FairJob.perform_async(tenant, i) } }
    end

    # Every clear call after the first `calls` does `fault` instead.
    def clear_cut_after(calls, &fault)
      done = 0
      allow(runner).to receive(:run).and_wrap_original do |original, conn, name, *args|
        if name == "clear"
          fault.call if done == calls
          done += 1
        end
        original.call(conn, name, *args)
      end
    end

    def finishing_sweep
      RSpec::Mocks.space.proxy_for(runner).reset
      Sidekiq.redis { |conn| Sidekiq::FairTenant::FairFetch::Sweeper.turn(conn, "sweeper:9:a") }
    end

    # Fetches and runs (in this process) every job there is to fetch; the jids run.
    def run_all(identity)
      fetch = fetcher(identity)
      ran = []
      while (unit = fetch.retrieve_work)
        payload = JSON.parse(unit.job)
        Object.const_get(payload["class"]).new.tap { |job| job.jid = payload["jid"] }.perform(*payload["args"])
        unit.acknowledge
        ran << payload["jid"]
      end
      fetch.flush_acks
      ran
    end

    it "records the clear while it runs and removes the record at its end" do
      backlog_jobs(2, %w[t0 t1 t2 paused])
      seen = []
      allow(runner).to receive(:run).and_wrap_original do |original, conn, name, *args|
        seen << redis.hget(clearing, "fair") if name == "clear"
        original.call(conn, name, *args)
      end

      queue.clear

      expect(seen.size).to eq(3) # 2 + 2 tenants, then the call that finds nothing left
      expect(seen.first).to be_nil
      expect(seen.drop(1).uniq.size).to eq(1) # the first call's cut, kept by the later calls
      expect(redis.exists?(clearing)).to be(false)
      expect(queue.size).to eq(0)
    end

    it "is finished by a recovery sweep when its caller died after the first call: every job it was asked to delete" do
      backlog_jobs(3, %w[t0 t1 t2 t3 paused])
      killed = Class.new(Exception) # rubocop:disable Lint/InheritException -- SIGKILL: nothing rescues it
      clear_cut_after(1) { raise killed }

      expect { queue.clear }.to raise_error(killed)
      expect(redis.hexists(clearing, "fair")).to be(true)
      expect(waiting).to eq(9) # 2 tenants of 5 deleted

      expect(finishing_sweep).to include(cleared: 9)
      expect(redis.exists?(clearing)).to be(false)
      expect(queue.size).to eq(0)
      expect(redis.keys("#{lists}*")).to eq([])
      sleep(0.002) # pushed after the clear's millisecond: Sidekiq 8 writes whole ms, a push in it is concurrent
      late = [FairJob.perform_async("t0", 100), FairJob.perform_async("new", 101)]
      expect(queue.size).to eq(2)
      expect(run_all("runner:1:a")).to match_array(late)
    end

    it "keeps, when a sweep finishes it after writes were refused (NOREPLICAS), every job pushed after it began" do
      backlog_jobs(3, %w[t0 t1 t2 t3 paused])
      clear_cut_after(1) { redis.config(:set, "min-replicas-to-write", "1") }
      expect { queue.clear }.to raise_error(/NOREPLICAS/)
      redis.config(:set, "min-replicas-to-write", "0")
      left = redis.keys("#{lists}*").map { |key| key.delete_prefix(lists) }
      expect(left.size).to eq(3) # t0 and t1 deleted by the first call
      pre_cut = left - %w[paused]
      sleep(0.002) # pushed after the clear's millisecond: Sidekiq 8 writes whole ms, a push in it is concurrent
      late = [FairJob.perform_async(pre_cut.first, 200), FairJob.perform_async("new", 201)]

      expect(finishing_sweep).to include(cleared: 6) # the other tenant and paused: all their jobs before the cut
      expect(redis.exists?(clearing)).to be(false)
      # The tenant with a job after the cut is kept whole: its 3 jobs from before it too (the keep side).
      expect(queue.size).to eq(5)
      expect(run_all("runner:2:a")).to include(*late).and(have_attributes(size: 5))
      expect(queue.size).to eq(0)
    end

    it "recovers dead processes at a sweep whose finishing of a clear fails (a write refused)" do
      dead_process("dead:8:a", 3)
      backlog_jobs(1, %w[t0 t1 t2])
      clear_cut_after(1) { redis.config(:set, "min-replicas-to-write", "1") }
      expect { queue.clear }.to raise_error(/NOREPLICAS/)
      redis.config(:set, "min-replicas-to-write", "0")
      allow(Sidekiq::FairTenant::FairQueues::Clears).to receive(:finish).and_raise(RuntimeError, "NOREPLICAS")

      result = Sidekiq.redis { |conn| Sidekiq::FairTenant::FairFetch::Sweeper.turn(conn, "sweeper:8:a") }

      expect(result).to include(cleared: 0, recovered: 3)
      expect(redis.hexists(clearing, "fair")).to be(true) # the next sweep finishes it
    end

    it "keeps a job that was in flight when the clear began and was requeued after its cut" do
      FairJob.perform_async("busy", 0)
      fetch = fetcher("busy:1:a")
      unit = fetch.retrieve_work # in flight: the tenant's list is empty, it leaves the rotation
      backlog_jobs(3, %w[t0 t1 t2])
      killed = Class.new(Exception) # rubocop:disable Lint/InheritException -- SIGKILL: nothing rescues it
      clear_cut_after(1) { raise killed }
      expect { queue.clear }.to raise_error(killed)
      fetch.bulk_requeue([unit]) # the process stops: back to the front of its tenant, enqueued before the cut

      expect(finishing_sweep).to include(cleared: 3)
      expect(queue.size).to eq(1) # activated after the cut: every job of its list came after the clear began
      expect(run_all("runner:3:a")).to eq([JSON.parse(unit.job)["jid"]])
    end
  end

  describe "fair-off" do
    let(:off) { Sidekiq::FairTenant::FairQueues::Off }

    it "requeues a job a process still ran after fair-off to queue:<name>, not to a fair list nobody serves" do
      2.times { |i| ConservedJob.perform_async("acme", i, "x") }
      fetch = fetcher("old:1:a") # started before the switch: fair in its settings
      unit = fetch.retrieve_work
      stop_switching_on
      Sidekiq.redis { |conn| fair.drain(conn, "fair") } # fair-off

      fetch.bulk_requeue([unit])

      expect(redis.lrange("queue:fair", 0, -1).map { |job| JSON.parse(job)["args"][1] }).to eq([1, 0]) # 0 runs first
      expect(waiting).to eq(0)
    end

    it "recovers a dead process's jobs of a switched-off queue to queue:<name>, whatever the sweeper's settings" do
      dead_process("dead:6:a", 3)
      stop_switching_on
      Sidekiq.redis { |conn| fair.drain(conn, "fair") }

      expect(sweep).to include(recovered: 3)
      expect(redis.llen("queue:fair")).to eq(3)
      expect(waiting).to eq(0)
    end

    it "finishes a drain cut short after its first call at the next sweep of a process without the queue fair" do
      7.times { |i| ConservedJob.perform_async("t#{i % 2}", i, "x") }
      Sidekiq.redis do |conn|
        runner.run(conn, "drain", ["queue:fair", fair::WEIGHTS_KEY], [fair.base("fair"), "fair", 3])
      end
      expect(waiting).to eq(4) # the CLI was killed here
      Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[other] }

      result = Sidekiq.redis { |conn| Sidekiq::FairTenant::FairFetch::Sweeper.turn(conn, "sweeper:2:a") }

      expect(result).to include(drained: 4)
      expect(waiting).to eq(0)
      expect(redis.llen("queue:fair")).to eq(7)
    end

    it "is switched on again by a process that starts with the queue fair: requeues go back to the tenant" do
      ConservedJob.perform_async("acme", 0, "x")
      fetch = fetcher("new:1:a")
      unit = fetch.retrieve_work
      Sidekiq.redis { |conn| fair.drain(conn, "fair") }
      Sidekiq.redis { |conn| off.switched_on(conn) } # the sweeper thread of a process fair for it, at its start

      fetch.bulk_requeue([unit])

      expect(waiting).to eq(1)
      expect(redis.llen("queue:fair")).to eq(0)
    end
  end
end
