# frozen_string_literal: true

require "spec_helper"
require "securerandom"
require_relative "../support/sidekiq_process"
require_relative "../support/fair_app"
require_relative "../support/capped_fair"

# Sidekiq's API on a fair queue (`fair`), whose backlog lives in per-tenant lists: Queue#each (#count,
# #find_job), JobRecord#delete, #clear and #latency, on the spec Redis and, where a job must or must not run,
# real `sidekiq` server processes.
RSpec.describe "Sidekiq's API on a fair queue" do
  let(:base) { Sidekiq::FairTenant::Native::Fair.base("fair") }
  let(:queue) { Sidekiq::Queue.new("fair") }
  let(:servers) { [] }

  before { Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] } }

  after do
    servers.each(&:stop)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def start_server
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 3, queues: %w[fair],
                       app: File.expand_path("../support/fair_app.rb", __dir__)).start.tap { |s| servers << s }
  end

  def started
    redis.lrange(FairApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }.select { |e| e["event"] == "start" }
  end

  def backlog = redis.hget("#{base}state", "n").to_i

  # Tenants in the fair state's places.
  def tenants_in(set) = redis.zrange("#{base}#{set}", 0, -1).map { |m| m[16..] }

  # Pushes a job as FairQueues::Push does, enqueued `age` seconds ago (as the scheduled poller pushes old jobs); returns
  # its jid. Sidekiq 8 writes enqueued_at in milliseconds.
  def push(tenant, index, age: 0, klass: FairJob)
    fair = Sidekiq::FairTenant::FairQueues
    at = Time.now.to_f - age
    stamp = fair.now.is_a?(Integer) ? (at * 1000).round : at
    job = { "class" => klass.name, "args" => [tenant, index, 0], "jid" => SecureRandom.hex(12),
            "created_at" => stamp, "enqueued_at" => stamp }
    payload = JSON.parse(JSON.generate(klass.get_sidekiq_options.merge(job)))
    fair.carry_slot(payload)
    Sidekiq.redis { |conn| fair.push(conn, "fair", [[fair.tenant(payload), Sidekiq.dump_json(payload)]], at) }
    payload["jid"]
  end

  # acme 6, beta 4, cid 2: acme's jobs are the oldest, cid's the newest.
  def push_twelve
    jids = {}
    [["acme", 6, 300], ["beta", 4, 200], ["cid", 2, 100]].each do |tenant, count, age|
      jids[tenant] = Array.new(count) { |i| push(tenant, i, age: age - i) }
    end
    jids
  end

  it "lists the fair backlog through #each, #count and #find_job: tenants by oldest job, each oldest first" do
    jids = push_twelve
    redis.lpush("queue:fair", JSON.generate("class" => "FairJob", "queue" => "fair", "args" => ["raw", 0, 0],
                                            "jid" => "raw-1", "enqueued_at" => Time.now.to_f))

    expect(queue.size).to eq(13)
    expect(queue.count).to eq(13)
    records = queue.to_a
    expect(records).to all(be_a(Sidekiq::JobRecord))
    expect(records.map(&:jid)).to eq(["raw-1", *jids["acme"], *jids["beta"], *jids["cid"]])
    expect(records.last.args).to eq(["cid", 1, 0])
    expect(records.map(&:queue).uniq).to eq(["fair"])

    found = queue.find_job(jids["beta"][2])
    expect([found.klass, found.args]).to eq(["FairJob", ["beta", 2, 0]])
    expect(queue.find_job("no-such-jid")).to be_nil
  end

  it "walks a large backlog page by page, ties in the oldest-job order included, each job once" do
    payloads = Array.new(150) { |t| Array.new(2) { |i| ["t#{t}", i, 0] } }.flatten(1)
    Sidekiq::Client.push_bulk("class" => FairJob, "args" => payloads) # one enqueue time: 150 tenants tie
    250.times { |i| FairJob.perform_async("big", i, 0) }

    jids = queue.map(&:jid)
    expect(jids.size).to eq(550)
    expect(jids.uniq.size).to eq(550)
    big = queue.select { |r| r.args[0] == "big" }.map { |r| r.args[1] }
    expect(big).to eq((0...250).to_a)
  end

  it "goes on after a tenant the walk stands on when it leaves meanwhile (tied oldest jobs)" do
    Sidekiq::Client.push_bulk("class" => FairJob, "args" => Array.new(150) { |t| ["t#{t}", 0, 0] })
    standing = Array.new(150) { |t| "t#{t}" }.sort[100] # where the first page of 100 stops

    seen = queue.each_with_index.map do |record, i|
      Sidekiq::JobRecord.new(redis.lindex("#{base}t:#{standing}", 0), "fair").delete if i == 50
      record.args[0]
    end
    expect(seen.size).to eq(149)
    expect(seen).to match_array(Array.new(150) { |t| "t#{t}" } - [standing])
  end

  it "serves Sidekiq's Web paginator a page of the same order, larger pages over several round trips" do
    [["a", 500], ["b", 400], ["c", 300]].each do |tenant, count|
      Sidekiq::Client.push_bulk("class" => FairJob, "args" => Array.new(count) { |i| [tenant, i, 0] })
    end
    all = queue.map(&:value)
    paginator = Object.new.extend(Sidekiq::Paginator)

    expect(paginator.page("queue:fair", 1, 1100)).to eq([1, 1200, all.first(1100)])
    expect(paginator.page("queue:fair", 2, 1100)).to eq([2, 1200, all.drop(1100)])
    expect(paginator.page("queue:fair", 3, 1100)).to eq([3, 1200, []])
    expect(paginator.page("queue:other", 1, 25)).to eq([1, 0, []])
  end

  it "deletes while iterating, as Sidekiq's `job.delete if ...` does, without skipping the next page" do
    300.times { |i| FairJob.perform_async("big", i, 0) }
    10.times { |i| FairJob.perform_async("small", i, 0) }

    seen = []
    queue.each do |record|
      seen << record.args[1] if record.args[0] == "big"
      record.delete if record.args[0] == "big" && record.args[1].even?
    end

    expect(seen).to eq((0...300).to_a)
    expect(backlog).to eq(160)
    expect(queue.select { |r| r.args[0] == "big" }.map { |r| r.args[1] }).to eq((1...300).step(2).to_a)
  end

  it "deletes a job for good: a real server then runs the other 11, never the deleted one" do
    jids = push_twelve
    gone = jids["beta"][1]

    expect(queue.find_job(gone).delete).to be(true)
    expect(queue.find_job(gone)).to be_nil
    expect([queue.size, backlog]).to eq([11, 11])
    as_posted = Sidekiq::JobRecord.new(queue.find_job(jids["acme"][0]).value, "fair") # tenant from its payload
    expect(as_posted.delete).to be(true)
    expect(queue.size).to eq(10)

    start_server
    wait_for("10 jobs run") { started.size == 10 }
    servers.each(&:stop)
    ran = started.map { |e| e["jid"] }
    expect(ran).to match_array(jids.values.flatten - [gone, jids["acme"][0]])
    expect([queue.size, backlog, started.size]).to eq([0, 0, 10])
  end

  it "finds a job whose tenant the process cannot tell (class not loaded here) in every tenant's list" do
    job = JSON.generate("class" => "NotLoadedHereJob", "queue" => "fair", "args" => [1], "jid" => "ghost-1",
                        "enqueued_at" => Time.now.to_f)
    Sidekiq.redis { |conn| Sidekiq::FairTenant::FairQueues.push(conn, "fair", [["ghost", job]]) }
    30.times { |i| FairJob.perform_async("t#{i}", i, 0) }

    expect(Sidekiq::JobRecord.new(job, "fair").delete).to be(true) # as the Web's Delete: payload and queue only
    expect(Sidekiq::JobRecord.new(job, "fair").delete).to be(false)
    expect(backlog).to eq(30)
    expect(redis.zscore("#{base}heads", "ghost")).to be_nil
  end

  it "keeps the fair state as when a tenant's last job is served: it leaves heads and the rotation" do
    jids = push_twelve
    queue.select { |r| r.args[0] == "cid" }.each(&:delete)

    expect(backlog).to eq(10)
    expect(redis.zrange("#{base}heads", 0, -1)).to eq(%w[acme beta])
    expect(tenants_in("ready")).to match_array(%w[acme beta])
    expect(redis.exists?("#{base}t:cid")).to be(false)

    fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
    served = Array.new(11) { fetch.retrieve_work }.compact.map { |u| JSON.parse(u.job)["jid"] }
    expect(served).to match_array(jids["acme"] + jids["beta"])
  end

  it "a paused tenant's job deleted: it leaves `paused` and a raised weight resumes nothing" do
    Sidekiq::FairTenant.weights.set(0, tenant: "sleepy")
    jid = push("sleepy", 0)
    expect(redis.smembers("#{base}paused")).to eq(["sleepy"])

    expect(queue.find_job(jid).delete).to be(true)
    expect(redis.smembers("#{base}paused")).to be_empty
    expect(Sidekiq::FairTenant.weights.set(1, tenant: "sleepy")).to eq(0)
    expect(tenants_in("ready")).to be_empty
  end

  describe "held back by a concurrency cap" do
    let(:fetch) { Sidekiq::FairTenant::FairFetch.new(queues: %w[fair]) }

    it "deleting a capped tenant's waiting job takes it out of `capped` and off the scope's waiting list" do
      _, units = CappedFair.build # static and keyed capped, elastic over, plain ready
      waiting = queue.find { |r| r.args == ["static", 1] }

      expect(waiting.delete).to be(true)
      expect(tenants_in("capped")).to eq(%w[keyed])
      expect(redis.keys("sidekiq-fair_tenant:slots:*static*waiting")).to be_empty
      units.each(&:acknowledge)
      fetch.flush_acks
      expect(tenants_in("ready") + tenants_in("capped")).not_to include("static")
    end

    it "deleting the job a tenant is held back on brings it back: its next job needs no slot and is served" do
      2.times { |i| ShownStaticCapJob.perform_async("static", i) }
      ShownUncappedJob.perform_async("static", 9)
      fetch.retrieve_work # static's first job takes the scope's one slot: static is held back
      expect(tenants_in("capped")).to eq(%w[static])

      expect(queue.find { |r| r.args == ["static", 1] }.delete).to be(true)
      expect(tenants_in("capped")).to be_empty
      expect(JSON.parse(fetch.retrieve_work.job)["args"]).to eq(["static", 9])
    end
  end

  describe "#clear" do
    it "deletes the fair backlog and Sidekiq's list, and takes the queue out of `queues` as Sidekiq does" do
      push_twelve
      redis.lpush("queue:fair", JSON.generate("class" => "FairJob", "queue" => "fair", "args" => ["raw", 0, 0]))
      expect(redis.smembers("queues")).to eq(["fair"])

      queue.clear
      expect([queue.size, queue.count, backlog]).to eq([0, 0, 0])
      expect(redis.smembers("queues")).to be_empty
      expect(redis.keys("#{base}t:*")).to be_empty
      expect(Sidekiq::Stats.new.enqueued).to eq(0)

      FairJob.perform_async("acme", 1, 0)
      expect(redis.smembers("queues")).to eq(["fair"])
      expect(queue.map(&:args)).to eq([["acme", 1, 0]])
    end
  end

  describe "#latency" do
    it "is 0 while only a paused tenant's work waits (size counts it); a real server leaves that job alone" do
      Sidekiq::FairTenant.weights.set(0, tenant: "paused")
      pushed_at = Time.now.to_f
      paused_jid = push("paused", 0, age: 100)
      push("busy", 0, age: 30)
      # An age, and the time the spec has taken since the push (a loaded machine stretches it, not the rule).
      aged = ->(age) { be_between(age - 1, age + (Time.now.to_f - pushed_at) + 1) }
      expect(queue.latency).to aged.call(30)

      start_server
      wait_for("busy's job run") { started.size == 1 }
      servers.each(&:stop)
      expect(started.map { |e| e["tenant"] }).to eq(["busy"])
      expect(queue.size).to eq(1)
      expect(queue.latency).to eq(0.0)
      expect(Sidekiq::FairTenant.fair_stats.queues.first).to include(backlog: 1, startable: 0, paused: 1, held: 0)

      Sidekiq::FairTenant.weights.set(1, tenant: "paused")
      expect(queue.latency).to aged.call(100)
      expect(queue.find_job(paused_jid).args).to eq(["paused", 0, 0])
    end

    it "is the oldest waiting job's age once a tenant's oldest job ran (serving does not read the next job)" do
      push("acme", 0, age: 300)
      push("acme", 1, age: 20)
      push("beta", 0, age: 100)
      fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
      expect(JSON.parse(fetch.retrieve_work.job)["args"]).to eq(["acme", 0, 0])
      # heads keeps the time acme had (no later than its next job's); latency and stats read the head job.
      expect(Time.now.to_f - redis.zscore("#{base}heads", "acme")).to be_within(5).of(300)
      expect(queue.latency).to be_within(5).of(100)
      page = Sidekiq::FairTenant.fair_stats.queue("fair")[:page]
      expect(page.to_h { |row| [row[:tenant], row[:oldest_age]] }).to match("acme" => be_within(5).of(20),
                                                                            "beta" => be_within(5).of(100))
      fetch.retrieve_work # beta's
      expect(queue.latency).to be_within(5).of(20)
    end

    it "counts a tenant set to weight 0 that has not left the rotation yet as paused" do
      push("later", 0, age: 100)
      push("now", 0, age: 10)
      Sidekiq::FairTenant.weights.set(0, tenant: "later") # still in `ready` until its turn comes
      expect(tenants_in("ready")).to include("later")
      expect(queue.latency).to be_within(5).of(10)
    end

    it "leaves out a tenant held back by a static cap, counts one over an elastic cap" do
      2.times { |i| push("static", i, age: 200, klass: ShownStaticCapJob) }
      2.times { |i| push("elastic", i, age: 100, klass: ShownElasticCapJob) }
      push("plain", 0, age: 30, klass: ShownUncappedJob)
      fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
      2.times { fetch.retrieve_work } # static and elastic take their slots; their next jobs wait
      expect([tenants_in("capped"), tenants_in("over")]).to eq([%w[static], %w[elastic]])

      expect(queue.latency).to be_within(5).of(100)
      expect(queue.size).to eq(3)
      stats = Sidekiq::FairTenant.fair_stats
      expect(stats.queues.first).to include(backlog: 3, startable: 2, paused: 0, held: 1)
      expect(stats.queue("fair")).to include(startable: 2, paused: 0, held: 1)

      fetch.retrieve_work # plain
      fetch.retrieve_work # elastic, past its limit on a spare thread
      expect(queue.latency).to eq(0.0)
      expect(queue.size).to eq(1)
    end

    it "past the capped tenants it reads, tells a held-back tenant by its next job's full static scope" do
      %w[first second].each { |t| 2.times { |i| push(t, i, age: 200, klass: ShownStaticCapJob) } }
      push("open", 0, age: 100, klass: ShownStaticCapJob)
      push("plain", 0, age: 30, klass: ShownUncappedJob)
      fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
      2.times { fetch.retrieve_work } # first and second take their slots and are held back
      expect(tenants_in("capped")).to eq(%w[first second])

      latency = lambda { |read|
        Sidekiq.redis { |c| Sidekiq::FairTenant::FairQueues::Backlog.latency(c, "fair", capped_read: read) }
      }
      expect(latency.call(1)).to be_within(5).of(100) # "second" found held by its scope, "open" has room
      expect(latency.call(1000)).to be_within(5).of(100)
    end
  end
end
