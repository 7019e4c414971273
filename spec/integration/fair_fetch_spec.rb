# frozen_string_literal: true

require "spec_helper"
require "open3"
require_relative "../support/sidekiq_process"
require_relative "../support/fair_app"
require_relative "../support/active_job"

class FairActiveJob < ActiveJob::Base
  queue_as :fair

  def self.fair_tenant(tenant, *) = tenant

  def perform(tenant, index); end
end

# Fair fetch on real `sidekiq` server processes (Sidekiq 6.4 or 7.3, whichever the bundle has) and the
# spec Redis: the queue `fair` is fair, `plain` is not.
RSpec.describe "Fair fetch" do
  let(:base) { Sidekiq::FairTenant::Native::Fair.base("fair") }
  let(:weights) { Sidekiq::FairTenant::FairQueues::WEIGHTS_KEY }
  let(:servers) { [] }

  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after do
    servers.each(&:stop)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def start_server(concurrency: 5, queues: %w[fair plain], args: [])
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: concurrency, queues: queues, args: args,
                       app: File.expand_path("../support/fair_app.rb", __dir__)).start.tap { |s| servers << s }
  end

  def events(kind = "start")
    redis.lrange(FairApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }.select { |e| e["event"] == kind }
  end

  def backlog = redis.hget("#{base}state", "n").to_i

  describe "pushing" do
    it "replaces Sidekiq's SADD + LPUSH with one script call: queue:fair stays empty, the backlog counts it" do
      FairJob.perform_async("acme", 0) # loads the library
      sent = monitor_commands { 10.times { |i| FairJob.perform_async("acme", i + 1) } }

      expect(sent).to eq(["fcall"] * 10)
      expect(queue_size("fair")).to eq(0)
      expect(backlog).to eq(11)
      expect(redis.smembers("queues")).to include("fair")
    end

    it "loads the library again when the server lost it (a restart, a failover, FUNCTION FLUSH)" do
      FairJob.perform_async("acme", 0)
      redis.call("FUNCTION", "FLUSH")
      FairJob.perform_async("acme", 1)

      expect(backlog).to eq(2)
      library = Sidekiq::FairTenant::FairQueues::LIBRARY[/name=(\w+)/, 1]
      names = redis.call("FUNCTION", "LIST").map { |lib| lib.is_a?(Hash) ? lib["library_name"] : lib[1] } # RESP3, 2
      expect(names).to eq([library])
    end

    it "runs the scripts by EVALSHA on a server without functions (as Redis 6.2)" do
      old = RedisServer.new(args: ["--rename-command", "FCALL", ""]).start
      conn = SpecHelpers::SIDEKIQ7 ? Sidekiq::RedisConnection.create(url: old.url).checkout : Redis.new(url: old.url)
      Sidekiq::Client.via(ConnectionPool.new(size: 1) { conn }) { 2.times { |i| FairJob.perform_async("old", i) } }

      expect(old.redis.hget("#{base}state", "n")).to eq("2")
      stats = old.redis.info("commandstats")
      expect(stats).to include("evalsha")
      expect(stats).not_to include("fcall")
    ensure
      old&.stop
    end

    it "keeps push_bulk's jids and pushes the batch in one call" do
      jids = Sidekiq::Client.push_bulk("class" => FairJob, "args" => [%w[a 1], %w[b 2], %w[a 3]])

      expect(jids.size).to eq(3)
      expect(backlog).to eq(3)
      stored = redis.lrange("#{base}t:a", 0, -1).map { |j| JSON.parse(j)["jid"] }
      expect(stored).to eq([jids[0], jids[2]])
    end

    it "splits a bulk push that mixes queues (Sidekiq 8 groups them): fair jobs in fair order, others as usual" do
      payloads = [%w[fair a], %w[plain b], %w[fair c]].map do |queue, tenant|
        { "class" => "FairJob", "queue" => queue, "args" => [tenant, 0], "jid" => tenant, "fair_tenant" => tenant }
      end
      Sidekiq::Client.new.send(:raw_push, payloads)

      expect(backlog).to eq(2)
      expect(queue_size("plain")).to eq(1)
    end

    it "leaves scheduled jobs and jobs of other queues to Sidekiq" do
      FairJob.perform_in(60, "acme", 1)
      PlainQueueJob.perform_async(1)

      expect(redis.zcard("schedule")).to eq(1)
      expect(queue_size("plain")).to eq(1)
      expect(backlog).to eq(0)
    end

    it "recovers from a flushed script cache (EVAL once, then EVALSHA again)" do
      redis.script(:flush)
      FairJob.perform_async("acme", 1)
      FairJob.perform_async("acme", 2)

      expect(backlog).to eq(2)
    end
  end

  describe "every way in" do
    def tenants_waiting = redis.keys("#{base}t:*").map { |k| k.delete_prefix("#{base}t:") }.sort

    it "takes scheduled jobs when the poller pushes them, and Web's retry now" do
      FairJob.perform_at(Time.now.to_f - 1, "scheduled", 1)
      enqueue_scheduled
      expect(backlog).to eq(1)

      payload = { "class" => "FairJob", "queue" => "fair", "args" => ["retried", 2], "jid" => "r1",
                  "retry_count" => 0, "error_message" => "boom" }
      redis.zadd("retry", Time.now.to_f + 3600, JSON.generate(payload))
      Sidekiq::RetrySet.new.first.retry # the Web UI's "retry now"
      expect(backlog).to eq(2)
      expect(queue_size("fair")).to eq(0)
      expect(tenants_waiting).to eq(%w[retried scheduled])
    end

    it "takes ActiveJob jobs, with the tenant of the job class" do
      FairActiveJob.perform_later("aj-tenant", 1)

      expect(backlog).to eq(1)
      expect(tenants_waiting).to eq(%w[aj-tenant])
    end

    it "takes jobs a re-routing rule sends to a fair queue" do
      2.times { |i| RoutedToFairJob.perform_async("greedy", i) }

      expect(queue_size("plain")).to eq(1)
      expect(backlog).to eq(1)
      expect(tenants_waiting).to eq(%w[greedy])
    end

    it "runs a failed job's retry, pushed back by the retry poller, through fair order" do
      FlakyFairJob.perform_async("flaky", 1)
      start_server(concurrency: 2)

      wait_for("the retry to finish") { events("finish").any? }
      expect(events.size).to eq(2) # the failed run and the retry
      expect(redis.zcard("retry")).to eq(0)
    end

    it "keeps a job in the shard its client chose (Sidekiq::Client.via), fetched there" do
      shard = RedisServer.new.start
      pool = ConnectionPool.new(size: 1) do
        SpecHelpers::SIDEKIQ7 ? Sidekiq::RedisConnection.create(url: shard.url).checkout : Redis.new(url: shard.url)
      end
      Sidekiq::Client.via(pool) { FairJob.perform_async("sharded", 1) }

      expect(backlog).to eq(0)
      expect(shard.redis.hget("#{base}state", "n")).to eq("1")
      server = SidekiqProcess.new(redis_url: shard.url, concurrency: 1, queues: %w[fair],
                                  app: File.expand_path("../support/fair_app.rb", __dir__)).start
      servers << server
      wait_for("the job on the shard") { shard.redis.llen(FairApp::EVENTS).positive? }
      expect(redis.llen(FairApp::EVENTS)).to eq(0)
    ensure
      servers.each(&:stop)
      shard&.stop
    end
  end

  describe "slots on a fair queue" do
    it "never runs more than the tenant's limit at once, and runs every job" do
      12.times { |i| CappedFairJob.perform_async("capped", i, 150) }
      3.times { |i| CappedFairJob.perform_async("other", i, 150) }
      start_server(concurrency: 8)

      wait_for("15 jobs") { events("finish").size >= 15 }
      capped = redis.lrange(FairApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }.select { |e| e["tenant"] == "capped" }
      running = 0
      peak = capped.sort_by { |e| [e["at"], e["event"] == "finish" ? 0 : 1] }.map do |e|
        running += e["event"] == "start" ? 1 : -1
      end.max
      expect(peak).to be <= 2
      expect(events("finish").map { |e| [e["tenant"], e["index"]] }.uniq.size).to eq(15)
    end
  end

  describe "idle" do
    # Commands a server sends while idle for `seconds` (after its boot settled): what MONITOR sees from
    # clients (commands run inside scripts are not sent), and what Redis counts (those included).
    def idle_commands(env, seconds: 6)
      server = SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 10, queues: %w[fair plain],
                                  app: File.expand_path("../support/fair_app.rb", __dir__), env: env).start
      servers << server
      sleep 3
      before = redis.info("stats")["total_commands_processed"].to_i
      sent = monitor_commands { sleep seconds }
      counted = redis.info("stats")["total_commands_processed"].to_i - before
      server.stop
      [sent.size, counted]
    end

    it "blocks in Redis: an idle server sends at most twice the commands of the same server on BasicFetch" do
      basic, basic_counted = idle_commands({ "FAIR_APP_PLAIN" => "1" })
      fair, fair_counted = idle_commands({})
      warn format("  idle 6 s, 10 threads: sent BasicFetch %<basic>d, FairFetch %<fair>d (%<ratio>.2fx); " \
                  "counted by Redis (script-internal included) %<bc>d vs %<fc>d",
                  basic: basic, fair: fair, ratio: fair.to_f / basic, bc: basic_counted, fc: fair_counted)
      expect(fair).to be <= 2 * basic
      expect(fair).to be < 10 * 6 * 2 # no busy loop: about one per idle thread per second
    end
  end

  describe "serving" do
    it "gives backlogged tenants service in proportion to their weights (1/1/3, ±5% over 3,000 jobs)" do
      redis.hset(weights, "c", 3)
      args = Array.new(2000) { |i| %w[a b c].map { |t| [t, i] } }.flatten(1)
      args.each_slice(1000) { |slice| Sidekiq::Client.push_bulk("class" => FairJob, "args" => slice) }
      start_server(concurrency: 5)

      first = wait_for("3,000 jobs started") { (e = events).size >= 3000 && e.first(3000) }
      counts = first.group_by { |e| e["tenant"] }.transform_values(&:size)
      { "a" => 600, "b" => 600, "c" => 1800 }.each do |tenant, want|
        expect(counts[tenant]).to be_within(want * 0.05).of(want), "#{tenant}: #{counts.inspect}"
      end
    end

    it "runs a tenant's jobs in the order they were pushed, and a small tenant's job before a big backlog" do
      200.times { |i| FairJob.perform_async("mega", i) }
      FairJob.perform_async("small", 0)
      start_server(concurrency: 1)

      started = wait_for("201 jobs") { (e = events).size >= 201 && e }
      mega = started.select { |e| e["tenant"] == "mega" }.map { |e| e["index"] }
      expect(mega).to eq((0...200).to_a)
      expect(started.index { |e| e["tenant"] == "small" }).to be <= 1
      expect(redis.hlen(Sidekiq::FairTenant::Native::Fair.inflight_key("x"))).to eq(0)
    end

    it "adopts jobs pushed straight to queue:fair (a raw LPUSH, a client without the gem) into fair order" do
      jobs = Array.new(5) { |i| { "class" => "FairJob", "queue" => "fair", "args" => ["raw", i], "jid" => "raw#{i}" } }
      redis.lpush("queue:fair", jobs.map { |j| JSON.generate(j) })
      start_server(concurrency: 2)

      started = wait_for("5 raw jobs") { (e = events).size >= 5 && e }
      expect(started.map { |e| e["jid"] }.sort).to eq(jobs.map { |j| j["jid"] }.sort)
      expect(queue_size("fair")).to eq(0)
    end

    it "starts a job pushed to an idle server at once, and fetches plain queues as BasicFetch does" do
      start_server(concurrency: 3)
      sleep 2.5 # every thread blocks in BRPOP
      pushed = Process.clock_gettime(Process::CLOCK_REALTIME)
      FairJob.perform_async("acme", 1)
      PlainQueueJob.perform_async(2)

      started = wait_for("both jobs") { (e = events).size >= 2 && e }
      fair = started.find { |e| e["queue"] == "fair" }
      expect(fair["at"] - pushed).to be < 1.0 # blocked in BRPOP, woken by the push (not by its 2 s timeout)
      expect(started.map { |e| e["queue"] }).to contain_exactly("fair", "plain")
      wait_for("in-flight list emptied") do
        in_flight_jobs.zero?
      end
    end

    it "costs one round trip per job while work waits: the acknowledgement rides with the next fetch" do
      20.times { |i| FairJob.perform_async("t#{i % 4}", i) }
      fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
      Sidekiq::FairTenant::Concurrency::Slots.stop # its heartbeat (a sweep every few seconds) sends commands of its own
      Sidekiq::FairTenant::FairFetch::Sweeper.stop # and so do its recovery sweeps
      fetch.retrieve_work.acknowledge # loads the script

      sent = monitor_commands { 10.times { fetch.retrieve_work.acknowledge } }

      expect(sent).to eq(["fcall"] * 10)
      expect(redis.hlen(fetch.inflight_key)).to eq(1) # the last one, until the next fetch
      fetch.flush_acks
      expect(redis.hlen(fetch.inflight_key)).to eq(0)
    end

    it "moves no job when the in-flight id counter is refused (overwritten by hand): it raises before any write" do
      FairJob.perform_async("acme", 1)
      seq = "#{Sidekiq::FairTenant::Native::Fair.inflight_key("").delete_suffix(":")}-seq"
      redis.set(seq, "not a number")
      fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
      Sidekiq::FairTenant::Concurrency::Slots.stop

      expect { fetch.retrieve_work }.to raise_error(/not an integer/)
      expect(redis.llen("#{base}t:acme")).to eq(1)
      expect(redis.exists?(fetch.inflight_key)).to be(false)
      redis.del(seq)
      expect(JSON.parse(fetch.retrieve_work.job)["args"]).to eq(["acme", 1])
    end

    it "acknowledges a large job by its short field: the job's bytes never go back to Redis" do
      long = "x" * 200_000
      6.times { |i| FairJob.perform_async("t#{i % 2}", i, long) }
      fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
      Sidekiq::FairTenant::Concurrency::Slots.stop
      Sidekiq::FairTenant::FairFetch::Sweeper.stop
      fetch.retrieve_work.acknowledge # loads the script
      received = -> { redis.info("stats")["total_net_input_bytes"].to_i }

      before = received.call
      sent = monitor_commands { 3.times { fetch.retrieve_work.acknowledge } }
      into_redis = received.call - before

      expect(sent).to eq(%w[fcall] * 3)
      expect(into_redis).to be < 20_000 # three fetches, each with the previous job's acknowledgement (and the INFO)
      expect(redis.hlen(fetch.inflight_key)).to eq(1) # the last one, until the next fetch
      fetch.flush_acks
      expect(redis.hlen(fetch.inflight_key)).to eq(0)
    end

    it "pauses a tenant with weight 0 and resumes it" do
      redis.hset(weights, "paused", 0)
      3.times { |i| FairJob.perform_async("paused", i) }
      FairJob.perform_async("other", 0)
      start_server(concurrency: 2)

      wait_for("the other tenant's job") { events.any? { |e| e["tenant"] == "other" } }
      sleep 0.5
      expect(events.map { |e| e["tenant"] }).not_to include("paused")
      expect(backlog).to eq(3)
    end
  end

  describe "reliability" do
    let(:registry) { Sidekiq::FairTenant::Native::Fair.registry_key }

    def inflight(identity) = Sidekiq::FairTenant::Native::Fair.inflight_key(identity)
    def finished_indexes = events("finish").map { |e| e["index"] }.uniq.sort

    it "puts a SIGKILLed process's jobs back once its heartbeat is gone, and runs every job" do
      6.times { |i| FairJob.perform_async("acme", i, 3000) }
      first = start_server(concurrency: 3)
      wait_for("3 jobs running") { events.size >= 3 }
      identity = redis.smembers(registry).first
      first.kill!

      expect(redis.hlen(inflight(identity))).to eq(3) # nothing lost: in flight, not gone
      redis.del(identity) # the heartbeat key, which would expire 60 s after the last beat
      start_server(concurrency: 6)

      wait_for("all 6 jobs finished") { finished_indexes == (0..5).to_a }
      expect(redis.exists?(inflight(identity))).to be(false)
      expect(redis.smembers(registry)).not_to include(identity)
      expect(redis.zcard("dead")).to eq(0)
    end

    it "puts running jobs back at the front of their tenant on a TERM past Sidekiq's timeout" do
      4.times { |i| FairJob.perform_async("acme", i, 5000) }
      server = start_server(concurrency: 2, args: %w[-t 1])
      wait_for("2 jobs running") { events.size >= 2 }
      server.stop

      expect(backlog).to eq(4)
      expect(redis.lrange("#{base}t:acme", 0, 1).map { |j| JSON.parse(j)["args"][1] }).to match_array([0, 1])
      expect(in_flight_jobs).to eq(0)
    end

    it "leaves no in-flight entry after a graceful TERM (the last acknowledgements are sent)" do
      6.times { |i| FairJob.perform_async("acme", i, 200) }
      server = start_server(concurrency: 3)
      wait_for("6 jobs finished") { events("finish").size >= 6 }
      server.stop

      expect(in_flight_jobs).to eq(0)
    end

    it "sends a job interrupted three times to the dead set, with the reason" do
      job = { "class" => "FairJob", "queue" => "fair", "args" => ["acme", 9], "jid" => "poison",
              "fair_tenant_interrupted" => 2 }
      entry = "4:fair4:acme#{JSON.generate(job)}"
      redis.sadd(registry, "gone-host:1:abc")
      redis.lpush(inflight("gone-host:1:abc"), entry)
      start_server(concurrency: 1)

      dead = wait_for("the dead set") { redis.zrange("dead", 0, -1).first }
      expect(JSON.parse(dead)).to include("jid" => "poison", "fair_tenant_interrupted" => 3,
                                          "error_message" => /interrupted 3 times/)
      wait_for("the in-flight entry dropped") { !redis.exists?(inflight("gone-host:1:abc")) } # after the ZADD
      expect(backlog).to eq(0)
    end
  end

  describe "weights" do
    let(:api) { Sidekiq::FairTenant.weights }

    it "sets, reads, lists and deletes weights per tenant and per tenant and queue; rejects bad ones" do
      api.set(3, tenant: "acme")
      api.set("0.5", tenant: "acme", queue: "fair")

      expect(api.get(tenant: "acme")).to eq(3.0)
      expect(api.get(tenant: "acme", queue: "fair")).to eq(0.5)
      expect(api.get(tenant: "other")).to be_nil
      expect(api.list).to eq([{ tenant: "acme", queue: nil, weight: 3.0 },
                              { tenant: "acme", queue: "fair", weight: 0.5 }])
      api.delete(tenant: "acme", queue: "fair")
      expect(api.list.size).to eq(1)
      [-1, "x", 2_000_000].each do |bad|
        expect { api.set(bad, tenant: "acme") }.to raise_error(ArgumentError, /weight must be a number from 0/)
      end
    end

    it "resumes a paused tenant when its weight is raised, without banking credit" do
      api.set(0, tenant: "paused")
      3.times { |i| FairJob.perform_async("paused", i) }
      FairJob.perform_async("other", 0)
      fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])

      first = fetch.retrieve_work
      expect(JSON.parse(first.job)["args"][0]).to eq("other")
      expect(fetch.retrieve_work).to be_nil # paused: nothing to serve (after one 2 s wait)
      expect(api.set(1, tenant: "paused")).to eq(1)
      expect(3.times.map { JSON.parse(fetch.retrieve_work.job)["args"] }).to eq([["paused", 0], ["paused", 1],
                                                                                 ["paused", 2]])
    end

    it "resumes a paused tenant from a process without the queue in its config, after Sidekiq forgot the queue" do
      api.set(0, tenant: "paused")
      FairJob.perform_async("paused", 0)
      fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
      stub_const("Sidekiq::FairTenant::FairFetch::TIMEOUT", 0.01)
      expect(fetch.retrieve_work).to be_nil # its turn came: it left the rotation, paused
      redis.srem("queues", "fair") # Queue#clear of another queue's name, a cleanup by hand
      Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } # a console, another app

      expect(api.set(1, tenant: "paused")).to eq(1)

      Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
      expect(JSON.parse(fetch.retrieve_work.job)["args"]).to eq(["paused", 0])
      expect(redis.smembers(Sidekiq::FairTenant::Native::Names::FAIR_PAUSED_QUEUES_KEY)).to be_empty
    end
  end

  describe "switching off" do
    it "moves the whole fair backlog back to queue:fair in fair order, paused tenants last, losing nothing" do
      Sidekiq::FairTenant.weights.set(0, tenant: "paused")
      %w[a a a b].each_with_index { |t, i| FairJob.perform_async(t, i) }
      FairJob.perform_async("paused", 9)

      moved = Sidekiq.redis { |conn| Sidekiq::FairTenant::FairQueues.drain(conn, "fair", batch: 2) }

      expect(moved).to eq(5)
      in_order = redis.lrange("queue:fair", 0, -1).reverse.map { |j| JSON.parse(j)["args"] } # RPOP order
      expect(in_order).to eq([["a", 0], ["b", 3], ["a", 1], ["a", 2], ["paused", 9]])
      expect(backlog).to eq(0)
      expect(redis.keys("#{base}t:*")).to eq([])
    end

    it "runs every job once switched off and back on (a BasicFetch server, then a fair one)" do
      10.times { |i| FairJob.perform_async("t#{i % 3}", i) }
      Sidekiq.redis { |conn| Sidekiq::FairTenant::FairQueues.drain(conn, "fair") }
      plain = SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 2, queues: %w[fair],
                                 app: File.expand_path("../support/fair_app.rb", __dir__),
                                 env: { "FAIR_APP_PLAIN" => "1" }).start
      servers << plain
      wait_for("10 jobs on BasicFetch") { events.size >= 10 }
      plain.stop
      10.times { |i| FairJob.perform_async("t#{i % 3}", 10 + i) } # back on: fair again
      start_server(concurrency: 2)
      wait_for("20 jobs") { events.size >= 20 }
      expect(events.map { |e| e["index"] }.sort).to eq((0...20).to_a)
    end
  end

  describe "visibility" do
    it "counts the fair backlog in Sidekiq::Queue#size/#latency, Stats#enqueued/#queues; #clear deletes it" do
      3.times { |i| FairJob.perform_async("a", i) }
      2.times { |i| FairJob.perform_async("b", i) }
      redis.lpush("queue:fair", JSON.generate("class" => "FairJob", "args" => ["raw", 0], "jid" => "raw",
                                              "enqueued_at" => Time.now.to_f - 30))
      queue = Sidekiq::Queue.new("fair")

      expect(queue.size).to eq(6)
      expect(Sidekiq::Queue.all.map(&:name)).to include("fair")
      expect(Sidekiq::Stats.new.enqueued).to eq(6)
      expect(Sidekiq::Stats.new.queues).to include("fair" => 6)
      expect(queue.latency).to be_within(2).of(30) # the raw job is the oldest
      redis.del("queue:fair")
      expect(queue.latency).to be_between(0, 5)

      queue.clear
      expect(queue.size).to eq(0)
      expect(redis.keys("#{base}t:*")).to eq([])
      expect(queue.latency).to eq(0)
    end

    it "reports per queue its backlog and jobs in flight, and per tenant waiting, oldest, weight, running" do
      3.times { |i| FairJob.perform_async("acme", i) }
      FairJob.perform_async("small", 0)
      Sidekiq::FairTenant.weights.set(2, tenant: "acme")
      fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
      unit = fetch.retrieve_work # acme's first job (activated first); registers the process for recovery

      stats = Sidekiq::FairTenant.fair_stats
      expect(stats.queues).to eq([{ queue: "fair", backlog: 3, startable: 3, paused: 0, held: 0, rate_held: 0,
                                    rated_tenants: 0, in_flight: 1, tenants: 2, capped_tenants: 0 }])
      page = stats.queue("fair")[:page]
      expect(page.map { |t| t.slice(:tenant, :backlog, :weight, :paused, :running) })
        .to eq([{ tenant: "acme", backlog: 2, weight: 2.0, paused: false, running: 1 },
                { tenant: "small", backlog: 1, weight: 1.0, paused: false, running: 0 }])
      expect(page.first[:oldest_age]).to be >= 0
      unit.acknowledge
      expect(stats.queues.first[:in_flight]).to eq(1) # dropped by the next fetch, or a flush
      fetch.flush_acks
      expect(stats.queues.first[:in_flight]).to eq(0)
    end

    it "tracks the oldest waiting job as jobs are adopted and fetched (the queue's latency)" do
      now = Time.now.to_f
      jobs = [[0, now - 100], [1, now - 50]].map do |i, at|
        JSON.generate("class" => "FairJob", "queue" => "fair", "args" => ["old", i], "jid" => "o#{i}",
                      "enqueued_at" => at)
      end
      redis.lpush("queue:fair", jobs) # oldest at the tail, as Sidekiq pushes
      fetch = Sidekiq::FairTenant::FairFetch.new(queues: %w[fair])
      queue = Sidekiq::Queue.new("fair")

      first = fetch.retrieve_work # adopts both, then serves the oldest
      expect(JSON.parse(first.job)["jid"]).to eq("o0")
      expect(queue.latency).to be_within(2).of(50)
      first.acknowledge
      fetch.retrieve_work.acknowledge
      expect(queue.latency).to eq(0)
      expect(queue.size).to eq(0)
    end
  end

  describe "sidekiq/testing" do
    # In a process of its own: sidekiq/testing changes Sidekiq::Client for good, and other specs check it
    # is not loaded.
    it "leaves fake and inline testing to Sidekiq (the push path defers to it)" do
      script = <<~RUBY
        require "sidekiq"
        require "sidekiq/fair_tenant"
        require #{File.expand_path("../support/fair_app.rb", __dir__).dump}
        require "sidekiq/testing"
        Sidekiq.configure_client { |c| c.logger = Logger.new($stderr) } # standard output is the answer alone
        Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
        Sidekiq::Testing.fake! { FairJob.perform_async("acme", 1) }
        fake = FairJob.jobs.size
        FairJob.drain
        Sidekiq::Testing.inline! { FairJob.perform_async("acme", 2) }
        Sidekiq::Testing.disable! { FairJob.perform_async("acme", 3) }
        puts [fake, FairJob.jobs.size].join(",")
      RUBY
      lib = File.expand_path("../../lib", __dir__)
      out, err, status = Open3.capture3({ "RUBYOPT" => "-I#{lib}" }, Gem.ruby, "-e", script)

      expect(status.exitstatus).to eq(0), err
      expect(out.strip).to eq("1,0") # faked once, drained
      expect(backlog).to eq(1) # only the push with testing disabled reached Redis, in fair order
    end
  end

  describe "installing" do
    it "refuses to start a server that has another fetch strategy, naming it" do
      server = SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 1, queues: %w[fair],
                                  app: File.expand_path("../support/fair_app.rb", __dir__),
                                  env: { "FAIR_APP_OTHER_FETCH" => "1" }).start
      servers << server
      wait_for("the server to exit") { !server.alive? }
      expect(File.read(server.log)).to include("fair_queues needs Sidekiq::FairTenant::FairFetch", "OtherFetch")
    end

    it "refuses to replace another fetch strategy" do
      config = { fetch_class: Class.new }
      config.define_singleton_method(:respond_to?) { |name, *| name != :options && super(name) }
      expect { Sidekiq::FairTenant::FairFetch.install(config) }
        .to raise_error(Sidekiq::FairTenant::ConfigurationError, /fetch strategy.*Sidekiq runs one per process/)
    end
  end
end
