# frozen_string_literal: true

require "spec_helper"
require_relative "../support/fair_app"
require_relative "../support/conservation/redis_view"

# Draining (fair-off) and clearing a fair backlog run in bounded script calls; between two calls pushes,
# fetches and acknowledgements go on. Every job is in exactly one place after each call, the state's counters
# are exact, and a tenant is scheduled exactly while its list holds jobs.
RSpec.describe "Fair backlog drained and cleared in batches" do
  let(:fair) { Sidekiq::FairTenant::FairQueues }
  let(:runner) { Sidekiq::FairTenant::ScriptRunner }
  let(:names) { Sidekiq::FairTenant::Native::Names }
  let(:base) { fair.base("fair") }
  let(:acked) { [] }
  let(:held) { [] }
  let(:fetch) do
    Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "batches:1:a").tap do
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
  end

  before do
    redis.flushdb
    stub_const("Sidekiq::FairTenant::FairFetch::TIMEOUT", 0.01)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
    Sidekiq::FairTenant.weights.set(0, tenant: "paused")
    # Sweeps only where the example calls them: the sweeper thread its fetcher starts would finish a clear the
    # example leaves half done.
    Sidekiq::FairTenant::FairQueues::Recovery::PACE.never!
  end

  after do
    Sidekiq::FairTenant::FairQueues::Recovery::PACE.now!
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def jid_of(job) = JSON.parse(job)["jid"]

  def fill
    jids = Array.new(24) { |i| FairJob.perform_async("t#{i % 12}", i) }
    jids += Array.new(8) { |i| FairJob.perform_async("paused", 100 + i) }
    jids + Array.new(5) { |i| CappedFairJob.perform_async("capped", 200 + i) }
  end

  # Pushes, fetches and acknowledges (the job fetched the round before) between two batch calls; the jids pushed.
  def meanwhile(round)
    pushed = [FairJob.perform_async("t#{round % 3}", 1000 + round), FairJob.perform_async("paused", 2000 + round)]
    if (unit = held.shift)
      unit.acknowledge
      acked << jid_of(unit.job)
    end
    fetch.retrieve_work&.then { |fetched| held << fetched }
    fetch.flush_acks
    pushed
  end

  # Tenants scheduled (ready, capped, over, paused) and in heads are exactly those whose lists hold jobs.
  def scheduled_as_listed
    prefix = "#{base}#{names::TENANT_LIST}"
    lists = redis.keys("#{prefix}*").to_h { |key| [key.delete_prefix(prefix), redis.llen(key)] }
    digits = names::ACTIVATION_DIGITS
    tiers = [names::READY, names::CAPPED, names::OVER].flat_map { |tier| redis.zrange("#{base}#{tier}", 0, -1) }
    scheduled = tiers.map { |member| member[digits..] } + redis.smembers("#{base}#{names::PAUSED}")
    expect(scheduled.tally.values).to all(eq(1))
    expect(scheduled).to match_array(lists.select { |_, len| len.positive? }.keys)
    expect(redis.zrange("#{base}#{names::HEADS}", 0, -1)).to match_array(scheduled)
  end

  # Every jid pushed is in one place (waiting, in flight, queue:fair), or was acknowledged, or deleted.
  def check_places(pushed, deleted: 0)
    view = Sidekiq.redis { |conn| Conservation::RedisView.new(conn, %w[fair]) }
    expect(view.problems).to eq([])
    expect(view.places.values.map(&:size)).to all(eq(1))
    expect(view.places.keys & acked).to eq([])
    expect(pushed - view.places.keys - acked).to have_attributes(size: deleted)
    expect(view.places.keys - pushed).to eq([])
    scheduled_as_listed
    view
  end

  # Jobs moved (the reply's second: 1 when more may be left).
  def drain_step(batch)
    Sidekiq.redis { |conn| runner.run(conn, "drain", ["queue:fair", fair::WEIGHTS_KEY], [base, "fair", batch]) }.first
  end

  def clear_step(batch) = Sidekiq.redis { |conn| runner.run(conn, "clear", [], [base, "fair", batch]) }

  it "drains in calls of 3 jobs to the end: fair order first, each paused tenant's jobs last, oldest first" do
    Array.new(6) { |i| FairJob.perform_async("t#{i % 2}", i) }
    Array.new(7) { |i| FairJob.perform_async("paused", 100 + i) }

    moved = Sidekiq.redis { |conn| fair.drain(conn, "fair", batch: 3) }

    expect(moved).to eq(13)
    order = redis.lrange("queue:fair", 0, -1).reverse.map { |job| JSON.parse(job)["args"] } # Sidekiq's RPOP order
    expect(order).to eq([["t0", 0], ["t1", 1], ["t0", 2], ["t1", 3], ["t0", 4], ["t1", 5]] +
                        Array.new(7) { |i| ["paused", 100 + i] })
    expect(fair.backlog(redis, "fair")).to eq(0)
    expect(redis.keys("#{base}#{names::TENANT_LIST}*")).to eq([])
    expect(redis.smembers("#{base}#{names::PAUSED}")).to eq([])
  end

  it "keeps every job in one place and the state exact while pushes, fetches and acks go on between drain calls" do
    pushed = fill
    pushed += meanwhile(0)
    8.times do |round|
      expect(drain_step(3)).to eq(3)
      check_places(pushed)
      pushed += meanwhile(round + 1)
    end
    loop do # the rest, nothing else going on (a fetch adopts drained jobs back)
      moved = drain_step(3)
      expect(moved).to be <= 3
      check_places(pushed)
      break if moved < 3
    end
    expect(fair.backlog(redis, "fair")).to eq(0)
    expect(redis.keys("#{base}#{names::TENANT_LIST}*")).to eq([])
    expect(redis.llen("queue:fair")).to be_positive
  end

  it "clears in calls of 3 tenants to the end, paused and capped tenants included" do
    fill
    capped = "#{base}#{names::CAPPED}"
    until redis.zcard(capped).positive? # capped's 2 slots taken (in flight), its next job held back
      unit = fetch.retrieve_work
      unit.acknowledge unless JSON.parse(unit.job)["class"] == "CappedFairJob"
    end
    fetch.flush_acks
    expect(redis.keys("*#{names::WAITING}").size).to eq(1)
    waiting = fair.backlog(redis, "fair")

    deleted = Sidekiq.redis { |conn| fair.clear(conn, "fair", batch: 3) }

    expect(deleted).to eq(waiting)
    expect(fair.backlog(redis, "fair")).to eq(0)
    expect(redis.keys("#{base}#{names::TENANT_LIST}*")).to eq([])
    %w[READY CAPPED OVER PAUSED HEADS SIG].each do |set|
      expect(redis.exists?("#{base}#{names.const_get(set)}")).to be(false)
    end
    expect(redis.keys("*#{names::WAITING}")).to eq([])
  end

  it "keeps every job in one place and the state exact while pushes, fetches and acks go on between clear calls" do
    pushed = fill
    pushed += meanwhile(0)
    deleted = 0
    4.times do |round|
      gone, more = clear_step(3)
      expect(more).to eq(1)
      deleted += gone
      check_places(pushed, deleted: deleted)
      pushed += meanwhile(round + 1)
    end
    loop do
      tenants = redis.zcard("#{base}#{names::HEADS}")
      gone, more = clear_step(3)
      expect(tenants - redis.zcard("#{base}#{names::HEADS}")).to be <= 3
      deleted += gone
      check_places(pushed, deleted: deleted)
      break if more.zero?
    end
    expect(deleted).to be_positive
    expect(fair.backlog(redis, "fair")).to eq(0)
    expect(redis.keys("#{base}#{names::TENANT_LIST}*")).to eq([])
  end

  describe "a clear cut short, finished by a sweep (mode cut)" do
    let(:clearing) { names::FAIR_CLEARING_KEY }

    def cut_step(record, batch = 3)
      Sidekiq.redis { |conn| runner.run(conn, "clear", [], [base, "fair", batch, "cut", record]) }
    end

    def tenants_listed
      prefix = "#{base}#{names::TENANT_LIST}"
      redis.keys("#{prefix}*").map { |key| key.delete_prefix(prefix) }
    end

    it "deletes only tenants whose jobs all came before the cut, the state whole after each call" do
      pushed = fill
      until redis.zcard("#{base}#{names::CAPPED}").positive? # capped's next job held back on its full scope
        unit = fetch.retrieve_work
        next if JSON.parse(unit.job)["class"] == "CappedFairJob"

        unit.acknowledge
        acked << jid_of(unit.job)
      end
      fetch.flush_acks
      pushed += Array.new(12) { |i| FairJob.perform_async("u#{i % 6}", 300 + i) }
      deleted = clear_step(3).first # the clear's first call: its caller dies after it
      record = redis.hget(clearing, "fair")
      kept = tenants_listed.grep(/\Au\d/).first
      sleep(0.002) # pushed after the clear's millisecond: Sidekiq 8 writes whole ms, a push in it is concurrent
      pushed += [FairJob.perform_async(kept, 500), FairJob.perform_async("late", 501)]

      loop do
        gone, more = cut_step(record)
        deleted += gone
        check_places(pushed, deleted: deleted)
        break if more.zero?
      end

      expect(tenants_listed).to match_array([kept, "late"])
      expect(redis.hexists(clearing, "fair")).to be(false)
      expect(fair.backlog(redis, "fair")).to eq(redis.llen("#{base}#{names::TENANT_LIST}#{kept}") + 1)
      expect(redis.keys("*#{names::WAITING}")).to eq([])
    end

    it "deletes a tenant whose last job was enqueued by the cut (s or ms), keeps one with a later or unreadable time" do
      cut = 1_700_000_000
      job = ->(time, jid) { %({"enqueued_at":#{time},"jid":"#{jid}","class":"FairJob","queue":"fair","args":[]}) }
      pairs = [["at", job.call("#{cut}.0", "a")], ["after", job.call("#{cut}.5", "b")],
               ["ms", job.call((cut * 1000) - 1, "c")], ["unreadable", job.call('"soon"', "d")],
               ["mixed", job.call(cut - 60, "e1")], ["mixed", job.call(cut + 1, "e2")]]
      Sidekiq.redis { |conn| fair.push(conn, "fair", pairs, cut - 100) }
      record = "#{cut}.000000 #{"f" * names::ACTIVATION_DIGITS} x"
      redis.hset(clearing, "fair", record)

      expect(cut_step(record, 200)).to eq([2, 0])
      expect(tenants_listed).to match_array(%w[after unreadable mixed])
      expect(fair.backlog(redis, "fair")).to eq(4)
    end

    it "writes nothing for a record a newer clear replaced, and drops a record nobody can read" do
      fill
      clear_step(3)
      old = redis.hget(clearing, "fair")
      sleep(0.002)
      clear_step(3) # a newer clear's first call
      newer = redis.hget(clearing, "fair")
      waiting = fair.backlog(redis, "fair")

      expect(newer).not_to eq(old)
      expect(cut_step(old)).to eq([0, 0])
      expect(redis.hget(clearing, "fair")).to eq(newer)
      unreadable = "nan #{"0" * names::ACTIVATION_DIGITS} - 1 0"
      redis.hset(clearing, "fair", unreadable)
      expect(cut_step(unreadable)).to eq([0, 0])
      expect(redis.hexists(clearing, "fair")).to be(false)
      expect(fair.backlog(redis, "fair")).to eq(waiting)
    end

    it "keeps the cut when a clear's first call is sent again (a lost reply); another clear's replaces it" do
      fill
      begin_call = ->(id) { Sidekiq.redis { |conn| runner.run(conn, "clear", [], [base, "fair", 3, "begin", id]) } }
      begin_call.call("clear1")
      first = redis.hget(clearing, "fair")
      sleep(0.002)
      begin_call.call("clear1")
      expect(redis.hget(clearing, "fair")).to eq(first)
      begin_call.call("clear2")
      expect(redis.hget(clearing, "fair")).not_to eq(first)
      expect(redis.hget(clearing, "fair")).to end_with(" clear2")
    end

    it "refuses a bad count or mode before any write" do
      fill
      waiting = fair.backlog(redis, "fair")
      [%w[nan begin], %w[0 begin], %w[1.5 begin], %w[inf cut], %w[3 all], ["3", "begin", "a b"]].each do |args|
        expect { Sidekiq.redis { |conn| runner.run(conn, "clear", [], [base, "fair", *args]) } }
          .to raise_error(/ERR clear/)
      end
      expect(redis.exists?(clearing)).to be(false)
      expect(fair.backlog(redis, "fair")).to eq(waiting)
    end
  end

  it "pushes a bulk push larger than PUSH_BATCH in calls of PUSH_BATCH jobs, every job once" do
    count = (fair::PUSH_BATCH * 2) + 7
    jids = nil
    sent = monitor_commands do
      jids = Sidekiq::Client.push_bulk("class" => FairJob, "args" => Array.new(count) { |i| ["t#{i % 5}", i] })
    end
    expect(sent.count("fcall")).to eq(3)
    expect(jids.compact.size).to eq(count)
    expect(fair.backlog(redis, "fair")).to eq(count)
    check_places(jids)
  end

  it "recovers a dead process's in-flight jobs in calls of 3 to the end, each job back once" do
    recovery = Sidekiq::FairTenant::FairQueues::Recovery
    stub_const("#{recovery}::ENTRIES", 3)
    pushed = Array.new(10) { |i| FairJob.perform_async("t#{i % 3}", i) }
    dead = Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "dead:1:a").tap do
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
    8.times { dead.retrieve_work }
    expect(redis.hlen(dead.inflight_key)).to eq(8)

    Sidekiq.redis { |conn| expect(recovery.sweep(conn)).to include(suspected: 1, recovered: 0) }
    redis.hgetall(recovery::SUSPECTS).each { |id, since| redis.hset(recovery::SUSPECTS, id, since.to_f - 3600) }
    sent = monitor_commands do
      Sidekiq.redis { |conn| expect(recovery.sweep(conn)).to include(recovered: 8, processes: 1) }
    end
    expect(sent.count("hmget")).to eq(3) # 3 + 3 + 2 jobs

    expect(redis.hlen(dead.inflight_key)).to eq(0)
    expect(redis.sismember(recovery::REGISTRY, "dead:1:a")).to be(false)
    expect(fair.backlog(redis, "fair")).to eq(10)
    check_places(pushed)
    # Each tenant has its jobs back in the order it was given them, whichever call took them back.
    3.times do |t|
      order = redis.lrange("#{base}#{names::TENANT_LIST}t#{t}", 0, -1).map { |job| JSON.parse(job)["args"][1] }
      expect(order).to eq((0...10).select { |i| i % 3 == t })
    end
  ensure
    recovery::PACE.now!
  end

  it "reads a fair_stats page of tenants in calls of ROWS rows, as one call would" do
    7.times { |i| FairJob.perform_async("t#{i}", i) }
    stats = Sidekiq::FairTenant.fair_stats
    rows = ->(page) { page.map { |row| row.except(:oldest_age) } }
    whole = rows.call(stats.queue("fair", offset: 1, limit: 5)[:page])
    stub_const("Sidekiq::FairTenant::FairQueues::Stats::ROWS", 2)

    sent = monitor_commands { expect(rows.call(stats.queue("fair", offset: 1, limit: 5)[:page])).to eq(whole) }

    expect(whole.map { |row| row[:tenant] }).to eq(%w[t1 t2 t3 t4 t5])
    expect(sent.count("fcall")).to eq(4) # stats: 2 + 2 + 1 rows; held: the counts
  end

  it "deletes a tenant's only job, its place read from the members index, or searched SEARCH members per call " \
     "in a state without it, the state exact" do
    stub_const("Sidekiq::FairTenant::FairQueues::Backlog::SEARCH", 2)
    pushed = Array.new(200) { |i| FairJob.perform_async("s#{i}", i) } # past 128 members: ZSCAN goes step by step
    only = ->(tenant) { redis.lindex("#{base}#{names::TENANT_LIST}#{tenant}", 0) }
    # The tenants ZSCAN meets last in `ready` (its order is the hash table's), so a search takes many steps.
    ready = "#{base}#{names::READY}"
    scanned = redis.zscan_each(ready, count: 2).map { |member, _| member[names::ACTIVATION_DIGITS..] }
    indexed, unindexed = (scanned - ["s7"]).last(2)

    first = only.call(indexed)
    backlog = Sidekiq::FairTenant::FairQueues::Backlog
    sent = monitor_commands { expect(backlog.delete("fair", first, indexed)).to be(true) }
    expect(sent.count("fcall")).to eq(1)
    redis.hdel("#{base}#{names::MEMBERS}", unindexed) # as an older gem's state
    last = only.call(unindexed)
    sent = monitor_commands { expect(backlog.delete("fair", last, unindexed)).to be(true) }
    expect(sent.count("fcall")).to be > 3
    expect(Sidekiq::FairTenant::FairQueues::Backlog.delete("fair", only.call("s7"), "nobody")).to be(true) # scanned for

    expect(fair.backlog(redis, "fair")).to eq(197)
    check_places(pushed, deleted: 3)
    [indexed, unindexed].each { |t| expect(redis.zscore("#{base}#{names::FIN}", t)).to be_nil } # tags not ahead of v
    expect(redis.hlen("#{base}#{names::MEMBERS}")).to eq(197)
  end
end
