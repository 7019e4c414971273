# frozen_string_literal: true

require "spec_helper"
require "open3"
require_relative "../support/sidekiq_process"
require_relative "../support/fair_app"

# Fair queues on their worst day, on real `sidekiq` processes and the spec's redis-server: a slim image's
# LANG=C, a stalled process, refused writes, a SIGKILL before fair-off, payloads that are not jobs, a
# backlog switched on. Every job runs; none is lost, stranded, or run again after it finished.
RSpec.describe "Fair queues through faults" do
  let(:base) { Sidekiq::FairTenant::Native::Fair.base("fair") }
  let(:registry) { Sidekiq::FairTenant::Native::Fair.registry_key }
  let(:recovery) { Sidekiq::FairTenant::FairQueues::Recovery }
  let(:servers) { [] }

  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after do
    servers.each { |server| Process.kill("CONT", server.pid) if server.alive? }
    servers.each(&:stop)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
    redis.call("CONFIG", "SET", "min-replicas-to-write", "0")
  end

  def start_server(concurrency: 4, queues: %w[fair plain], env: {})
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: concurrency, queues: queues, env: env,
                       app: File.expand_path("../support/fair_app.rb", __dir__)).start.tap { |s| servers << s }
  end

  def events(kind = "start")
    redis.lrange(FairApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }.select { |e| e["event"] == kind }
  end

  def finished = events("finish").map { |e| e["index"] }.sort

  def identity_of(server)
    wait_for("#{server.pid} registered") { redis.smembers(registry).find { |i| i.include?(":#{server.pid}:") } }
  end

  # A sweep of this process's own (the server's sweeper may hold the fleet's lease at that moment: then again).
  def sweep
    result = nil
    wait_for("the sweep lease") { result = Sidekiq.redis { |conn| recovery.sweep(conn) } }
    result
  end

  it "keeps non-ASCII jobs through a SIGKILL and recovery under LANG=C (payloads are bytes, not text)" do
    slim = { "LANG" => "C", "LC_ALL" => "C" }
    12.times { |i| SteadyFairJob.perform_async("boutique-café-☕", i, 2000) }
    first = start_server(concurrency: 4, env: slim)
    identity = identity_of(first)
    wait_for("4 jobs running") { events.size >= 4 }
    first.kill!
    redis.del(identity) # its heartbeat, which would expire 60 s after the last beat

    start_server(concurrency: 12, env: slim)
    wait_for("all 12 jobs finished", timeout: 90) { finished == (0..11).to_a }
    expect(events("finish").map { |e| e["tenant"] }.uniq).to eq(["boutique-café-☕"])
    expect(redis.zcard("dead")).to eq(0)
    expect(in_flight_jobs).to eq(0)
  end

  it "does not recover a live process over a heartbeat lapse; recovers a stalled one, which re-registers, " \
     "takes its jobs back and loses none when later SIGKILLed" do
    40.times { |i| SteadyFairJob.perform_async("acme", i, 2000) }
    live = start_server(concurrency: 4)
    identity = identity_of(live)
    wait_for("4 jobs running") { events.size >= 4 }

    # A lapse shorter than LAPSE (an evicted or deleted key): seen gone, then back; nothing moves.
    redis.del(identity)
    expect(sweep).to include(suspected: 1, recovered: 0)
    wait_for("its next beat") { redis.exists?(identity) }
    # The beat that wrote its key again (Sidekiq's :heartbeat event) cleared the suspicion itself.
    wait_for("the suspicion cleared") { redis.hlen(Sidekiq::FairTenant::Native::Fair.recovery_suspects_key).zero? }
    expect(sweep).to include(suspected: 0, recovered: 0)

    # A stall longer than LAPSE: its running jobs are taken back.
    wait_for("jobs running") { redis.hlen(Sidekiq::FairTenant::Native::Fair.inflight_key(identity)).positive? }
    Process.kill("STOP", live.pid)
    redis.del(identity)
    expect(sweep).to include(suspected: 1)
    sleep(recovery::LAPSE)
    result = sweep
    expect(result).to include(processes: 1)
    expect(result[:recovered]).to be_between(1, 4)
    expect(redis.smembers(registry)).not_to include(identity)
    Process.kill("CONT", live.pid)

    wait_for("re-registered with its next call") { redis.smembers(registry).include?(identity) }
    done = finished.size
    wait_for("a few more jobs") { finished.size >= done + 4 }
    # It took the copies of its recovered jobs back (nobody else had taken them): none ran twice.
    expect(events.map { |e| e["index"] }.tally.select { |_, n| n > 1 }).to eq({})
    expect(redis.exists?(Sidekiq::FairTenant::Native::Fair.recovered_key(identity))).to be(false)
    live.kill!
    redis.del(identity)

    start_server(concurrency: 8)
    wait_for("all 40 jobs finished", timeout: 120) { finished.uniq == (0..39).to_a }
    # Jobs the stalled process was running ran again elsewhere (at least once); all of them end, and every
    # finished job was acknowledged (the recovering process's list empties too).
    wait_for("no job in flight or waiting") { in_flight_jobs.zero? && redis.hget("#{base}state", "n").to_i.zero? }
    expect(redis.zcard("dead")).to eq(0)
  end

  it "keeps acknowledgements through refused writes: after a graceful stop no finished job runs again" do
    40.times { |i| SteadyFairJob.perform_async("t#{i % 4}", i, 100) }
    server = start_server(concurrency: 5)
    wait_for("10 jobs finished") { finished.size >= 10 }
    redis.call("CONFIG", "SET", "min-replicas-to-write", "1") # every write refused (NOREPLICAS), as in a failover
    sleep 1
    redis.call("CONFIG", "SET", "min-replicas-to-write", "0")
    wait_for("40 jobs finished") { finished.size >= 40 }
    server.stop

    expect(in_flight_jobs).to eq(0)
    expect(events.map { |e| e["index"] }.tally.select { |_, n| n > 1 }).to eq({})
    start_server(concurrency: 5)
    sleep 2 # a server that would find a finished job's entry (after a recovery) would run it now
    expect(events.size).to eq(40)
  end

  it "fair-off takes the in-flight jobs of a SIGKILLed process back before draining, and says so" do
    6.times { |i| SteadyFairJob.perform_async("acme", i, 30_000) }
    first = start_server(concurrency: 3)
    identity = identity_of(first)
    wait_for("3 jobs running") { events.size >= 3 }
    first.kill!
    redis.del(identity)

    exe = File.expand_path("../../exe/sidekiq-fair_tenant", __dir__)
    out, err, status = Open3.capture3({ "RUBYLIB" => File.expand_path("../../lib", __dir__) },
                                      Gem.ruby, exe, "--redis-url", ENV.fetch("REDIS_URL"), "fair-off", "fair")
    expect(status).to be_success, err
    expect(out).to include("took 3 in-flight job(s) of 1 dead process(es) back; " \
                           "moved 3 job(s) of fair's fair backlog to queue:fair")
    expect(redis.llen("queue:fair")).to eq(6)
    expect(in_flight_jobs).to eq(0)
    expect(redis.smembers(registry)).to eq([])
  end

  it "sends payloads that are not jobs to the dead set and serves every job and every queue after it" do
    bad = ["not json", "[1]", "null", "42", '{"class":"FairJob","args":["acme",']
    20.times do |i|
      job = { "class" => "FairJob", "queue" => "fair", "args" => ["t#{i % 3}", i], "jid" => "j#{i}" }
      redis.lpush("queue:fair", JSON.generate(job))
      redis.lpush("queue:fair", bad[i / 4]) if (i % 4).zero?
    end
    3.times { |i| PlainQueueJob.perform_async(i) }
    server = start_server(concurrency: 2, queues: %w[fair plain]) # strict order: fair first

    wait_for("20 fair and 3 plain jobs ran") { events.size >= 23 }
    expect(events.select { |e| e["queue"] == "fair" }.map { |e| e["index"] }.sort).to eq((0..19).to_a)
    expect(redis.zrange("dead", 0, -1)).to match_array(bad)
    expect(redis.llen("queue:fair")).to eq(0)
    expect(File.read(server.log)).to include("sent to the dead set")
  end

  it "starts serving a large backlog switched on before it has adopted it (adoption serves while it adopts)" do
    20_000.times.each_slice(1000) do |slice|
      redis.lpush("queue:fair", slice.map do |i|
        JSON.generate("class" => "ProbeFairJob", "queue" => "fair", "args" => ["t#{i % 50}", i], "jid" => "p#{i}")
      end)
    end
    start_server(concurrency: 2)

    first = wait_for("the first job") { events.first }
    expect(first["index"]).to be > 15_000 # jobs still in queue:fair when the first one started
    wait_for("the backlog adopted") { redis.llen("queue:fair").zero? }
  end

  it "forgets acknowledgements once a call applied them, and keeps them while calls fail" do
    4.times { |i| SteadyFairJob.perform_async("acme", i) }
    fetch = Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "acks:1:a")
    pending = -> { fetch.instance_variable_get(:@acks).entries }
    2.times { fetch.retrieve_work.acknowledge } # the second fetch carried the first's acknowledgement
    acked = pending.call
    expect(acked.size).to eq(1)

    redis.call("CONFIG", "SET", "min-replicas-to-write", "1")
    expect { fetch.retrieve_work }.to raise_error(/NOREPLICAS/)
    expect(pending.call).to eq(acked) # kept for the next call
    redis.call("CONFIG", "SET", "min-replicas-to-write", "0")

    fetch.retrieve_work.acknowledge # carried it
    expect(pending.call.size).to eq(1)
    expect(pending.call).not_to eq(acked)
    fetch.flush_acks
    expect(pending.call).to eq([])
    expect(redis.hlen(fetch.inflight_key)).to eq(0)
  end

  it "acknowledges a job fetched through another fetcher of the same process (Sidekiq 7+ may build several)" do
    3.times { |i| SteadyFairJob.perform_async("acme", i) }
    # Two processor threads each built a fetcher at startup; the capsule kept the second.
    first, kept = Array.new(2) { Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "acks:2:b") }
    first.retrieve_work.acknowledge
    expect(redis.hlen(kept.inflight_key)).to eq(1)
    kept.retrieve_work.acknowledge # its fetch carries the first fetcher's acknowledgement too
    kept.flush_acks
    expect(redis.hlen(kept.inflight_key)).to eq(0)
    expect(redis.hget("#{base}state", "n").to_i).to eq(1)
  end

  describe "recovery, in this process" do
    let(:gone) { "gone-host:1:abc" }
    let(:inflight) { Sidekiq::FairTenant::Native::Fair.inflight_key(gone) }

    before { recovery::PACE.never! } # sweeps only where the example calls them, not from this process's thread
    after { recovery::PACE.now! }

    # As if a sweep had found the process's heartbeat gone a minute ago.
    def suspect_long_gone
      redis.sadd(registry, gone)
      redis.hset(Sidekiq::FairTenant::Native::Fair.recovery_suspects_key, gone, (Time.now.to_f - 60).to_s)
    end

    def entry(job, queue: "fair", tenant: "acme") = "#{queue.bytesize}:#{queue}#{tenant.bytesize}:#{tenant}#{job}".b

    context "when the recovered process was only stalled" do
      let(:stalled) { Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "stalled-host:1:s") }
      let(:copies) { Sidekiq::FairTenant::Native::Fair.recovered_key(stalled.identity) }

      def waiting = redis.lrange("#{base}t:acme", 0, -1).map { |job| JSON.parse(job)["args"][1] }
      def in_flight_of(fetch) = redis.hvals(fetch.inflight_key).map { |job| JSON.parse(job)["args"][1] }

      # Two jobs running in the stalled process; the sweep takes them back (its heartbeat long gone).
      def stall_and_recover
        4.times { |i| SteadyFairJob.perform_async("acme", i) }
        running = Array.new(2) { stalled.retrieve_work }
        Sidekiq::FairTenant::FairQueues::Liveness.fetching_as(nil) # its heartbeat thread stalls with it
        # A beat of the gem's heartbeat thread that read the identity just before may still clear this
        # suspicion (then the sweep only suspects it anew): suspected a minute ago again, and swept again.
        result = nil
        wait_for("the stalled process recovered") do
          redis.hset(Sidekiq::FairTenant::Native::Fair.recovery_suspects_key, stalled.identity,
                     (Time.now.to_f - 60).to_s)
          (result = sweep)[:recovered].positive?
        end
        expect(result).to include(recovered: 2, processes: 1)
        expect(waiting).to eq([0, 1, 2, 3]) # the copies in front
        expect(redis.smembers(registry)).not_to include(stalled.identity)
        expect(redis.hlen(copies)).to eq(2)
        running
      end

      it "takes the copies still waiting back before it fetches again, so it runs none twice" do
        running = stall_and_recover
        running.first.acknowledge # finished while it was taken for dead

        expect(stalled.retrieve_work.job).to include('"args":["acme",2') # not a copy of its own jobs
        expect(redis.smembers(registry)).to include(stalled.identity)
        expect(redis.exists?(copies)).to be(false)
        expect(waiting).to eq([3])
        expect(in_flight_of(stalled)).to contain_exactly(1, 2) # the finished one acknowledged, the other back
        running.last.acknowledge
        stalled.flush_acks
        expect(in_flight_of(stalled)).to eq([2])
        expect(redis.hget("#{base}state", "n").to_i).to eq(1)
      end

      it "holds a taken-back job's concurrency slot again, as the job runs" do
        tag, sub = Sidekiq::FairTenant::Native::Slots.tenant_scope("acme", "fair")
        holders = "sidekiq-fair_tenant:slots:#{tag.bytesize}:#{tag}:#{sub}:holders"
        2.times { |i| CappedFairJob.perform_async("acme", i, 0) }
        running = stalled.retrieve_work
        Sidekiq::FairTenant::FairQueues::Liveness.fetching_as(nil)
        redis.hset(Sidekiq::FairTenant::Native::Fair.recovery_suspects_key, stalled.identity,
                   (Time.now.to_f - 60).to_s)
        expect(sweep).to include(recovered: 1)
        expect(redis.zcard(holders)).to eq(0) # given back with the recovery

        expect(JSON.parse(stalled.retrieve_work.job)["args"][1]).to eq(1) # the next job, not the copy
        expect(redis.zrange(holders, 0, -1)).to contain_exactly(JSON.parse(running.job)["jid"], anything)
        running.acknowledge
        stalled.flush_acks
        expect(redis.zcard(holders)).to eq(1)
      end

      it "looks for a copy only among the first TAKE_BACK_DEPTH jobs of its tenant: a bounded call" do
        running = stall_and_recover
        depth = Sidekiq::FairTenant::Native::Names::TAKE_BACK_DEPTH
        third = JSON.parse(redis.lindex("#{base}t:acme", 2))
        # As many jobs recovered or requeued to acme since, in front of the copies.
        filler = Array.new(depth) { |i| JSON.generate(third.merge("jid" => "filler#{i}", "args" => ["acme", -1])) }
        redis.lpush("#{base}t:acme", filler)

        running.each(&:acknowledge)
        stalled.flush_acks # registers again; the copies are too deep to be looked for: left to run (at least once)

        expect(redis.smembers(registry)).to include(stalled.identity)
        expect(redis.exists?(copies)).to be(false)
        expect(in_flight_of(stalled)).to eq([])
        expect(redis.llen("#{base}t:acme")).to eq(depth + 4)
        expect(redis.lrange("#{base}t:acme", depth, -1).map { |job| JSON.parse(job)["args"][1] }).to eq([0, 1, 2, 3])
      end

      it "leaves a copy another process took to it (at least once), and an acknowledgement leaves nothing behind" do
        running = stall_and_recover
        other = Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "other-host:1:o")
        taken = other.retrieve_work # the copy of job 0
        expect(taken.job).to include('"fair_tenant_interrupted":1').and include('"args":["acme",0')

        running.each(&:acknowledge)
        stalled.flush_acks # an acknowledgement without a fetch (a thread about to block) looks too
        expect(redis.smembers(registry)).to include(stalled.identity)
        expect(in_flight_of(stalled)).to eq([])
        expect(waiting).to eq([2, 3])
        expect(redis.hget("#{base}state", "n").to_i).to eq(2)
        expect(in_flight_of(other)).to eq([0])
      end
    end

    it "puts back a job whose bytes are not UTF-8 with its bytes intact (its interruption count written in)" do
      job = %({"class":"FairJob","queue":"fair","args":["caf\xE9",1],"jid":"latin1"}).b
      redis.lpush(inflight, entry(job))
      suspect_long_gone

      expect(sweep).to include(recovered: 1, processes: 1)
      expect(redis.lrange("#{base}t:acme", 0, -1).map(&:b))
        .to eq([job.sub(/\}\z/, ',"fair_tenant_interrupted":1}')]) # at the end: the job's first bytes stay
      expect(redis.smembers(registry)).to eq([])
    end

    it "keeps the interruption count out of the job's arguments, even where they hold a field of its name" do
      job = JSON.generate({ "class" => "FairJob", "queue" => "fair", "jid" => "args-count",
                            "args" => ["acme", { "fair_tenant_interrupted" => 7 }] })
      redis.lpush(inflight, entry(job))
      suspect_long_gone

      expect(sweep).to include(recovered: 1)
      back = JSON.parse(redis.lrange("#{base}t:acme", 0, -1).first)
      expect(back["args"]).to eq(["acme", { "fair_tenant_interrupted" => 7 }]) # read and written at the top level
      expect(back["fair_tenant_interrupted"]).to eq(1)
      expect(redis.zcard("dead")).to eq(0)
    end

    it "sends in-flight payloads that are not jobs to the dead set, as they are" do
      ["not json", "[1]", "null"].each { |bad| redis.lpush(inflight, entry(bad)) }
      redis.lpush(inflight, "garbage")
      suspect_long_gone

      expect(sweep).to include(recovered: 4)
      expect(redis.zrange("dead", 0, -1)).to match_array(["not json", "[1]", "null", "garbage"])
      expect(redis.exists?(inflight)).to be(false)
    end

    it "calls Sidekiq's death handlers for a job interrupted three times, and a new push starts the count again" do
      calls = []
      sidekiq_config.death_handlers << ->(job, error) { calls << [job["jid"], error.class, error.message] }
      job = { "class" => "FairJob", "queue" => "fair", "args" => ["acme", 1], "jid" => "third",
              "fair_tenant_interrupted" => 2 }
      redis.lpush(inflight, entry(JSON.generate(job)))
      suspect_long_gone

      expect(sweep).to include(recovered: 1)
      expect(calls).to eq([["third", Sidekiq::FairTenant::Interrupted,
                            "interrupted 3 times (its process died while running it) in fair queue fair"]])
      dead = JSON.parse(redis.zrange("dead", 0, -1).first)
      expect(dead).to include("error_class" => "Sidekiq::FairTenant::Interrupted", "fair_tenant_interrupted" => 3)

      Sidekiq::Client.push(dead) # "retry now" from the dead set
      expect(JSON.parse(redis.lrange("#{base}t:acme", 0, -1).first)).not_to have_key("fair_tenant_interrupted")
    ensure
      sidekiq_config.death_handlers.pop
    end
  end
end
