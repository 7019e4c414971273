# frozen_string_literal: true

# Issue 30 item 6 (bounded by work, not count): the longest single command (SLOWLOG, its own execution time)
# of the operations whose work grew with what they met, on a private redis-server:
#   held  BOUNDS_HELD (100,000) tenants held back on one shared `key:` concurrency scope (limit 1), two jobs each:
#         a requeue of the slot holder's job (push_front looks for its tenant's waiting entry), a delete of a
#         held tenant's oldest job (unwait), fetch + ack, and the reads;
#   big   BOUNDS_BIG (200) jobs of BOUNDS_BYTES (1 MB) over 10 tenants: push, fetch, requeue, recovery of a dead
#         process holding them, delete, Queue#each, drain.
#
#   bundle exec ruby bench/longest_bounds.rb                  # both
#   BOUNDS_ONLY=held BOUNDS_HELD=100000 bundle exec ruby bench/longest_bounds.rb
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "logger"
require_relative "../spec/support/redis_server"

server = RedisServer.new.start
ENV["REDIS_URL"] = server.url
require "sidekiq"
require "sidekiq/api"
require "sidekiq/fair_tenant"
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
Sidekiq.logger.level = Logger::WARN
Sidekiq.configure_client { |c| c.redis = { url: server.url, size: 10 } }
Sidekiq::FairTenant.configure { |c| c.redis_url = server.url }
FAIR_MAX_JOBS = 1_000_000

# A fair queue's job.
class BenchFairJob
  include Sidekiq::Worker
  sidekiq_options queue: "bench_fair"
end

require_relative "fair_fill"
require_relative "longest"

# The two set-ups and what is measured on each.
module BoundsBench
  HELD = Integer(ENV.fetch("BOUNDS_HELD", "100000"))
  BIG = Integer(ENV.fetch("BOUNDS_BIG", "200"))
  BYTES = Integer(ENV.fetch("BOUNDS_BYTES", "1000000"))
  QUEUE = LongestBench::QUEUE
  Names = Sidekiq::FairTenant::Native::Names
  FairQueues = Sidekiq::FairTenant::FairQueues
  SHARED = ["#{Names::KEY_TAG}shared", Names::KEY_SUB, 1, 600_000, 0].freeze

  module_function

  def redis = FairBench.redis

  def job(index, tenant, slot: nil, pad: nil)
    job = { "class" => "BenchFairJob", "queue" => QUEUE, "args" => [index, pad].compact, "jid" => "j#{index}",
            "enqueued_at" => Time.now.to_f, "fair_tenant" => tenant }
    job[Names::SLOT_FIELD] = slot if slot
    [tenant, JSON.generate(Sidekiq::FairTenant::FairQueues::JobBytes.head_first(job))]
  end

  def push(pairs, slice = 100)
    Sidekiq.redis { |conn| pairs.each_slice(slice) { |part| FairQueues.push(conn, QUEUE, part) } }
  end

  def fetcher(identity = "bench-bounds:1:#{rand(1 << 30)}")
    Sidekiq::FairTenant::FairFetch.new({ queues: [QUEUE] }, identity)
  end

  # One fetch script call for one thread (no wait for a token): the job served, or nil.
  def fetch_once(fetch)
    want = FairFetch::Batch::Want.new([QUEUE], false, Thread.current)
    Sidekiq.redis { |conn| fetch.instance_variable_get(:@serving).fetch_once(conn, [want]).served.first }
  end

  FairFetch = Sidekiq::FairTenant::FairFetch

  def capped = redis.zcard(FairQueues.key(QUEUE, Names::CAPPED))

  # HELD tenants, two jobs each on the shared scope: the first fetch serves one (its tenant's next job is held
  # back), the next calls hold back the rest (100 a call).
  def held
    redis.flushdb
    LongestBench.load_scripts
    push(Array.new(HELD * 2) { |i| job(i, "t#{i % HELD}", slot: SHARED) })
    fetch = fetcher
    served = fetch_once(fetch)
    fetch_once(fetch) while capped < HELD
    other = "t#{HELD / 2}"
    other_job = redis.lindex("#{FairQueues.base(QUEUE)}#{Names::TENANT_LIST}#{other}", 0)
    results = {}
    results["requeue the slot holder's job (#{HELD} held on its scope)"] =
      LongestBench.longest { fetch.finish("requeue", [served.entry]) }
    results["delete a held tenant's oldest job (unwait)"] =
      LongestBench.longest { Sidekiq::FairTenant::FairQueues::Backlog.delete(QUEUE, other_job, other) }
    results["fetch + ack 100 (each wakes one)"] = LongestBench.longest { fetch_ack(fetch, 100) }
    results["Queue#size, #latency (held)"] =
      LongestBench.longest { Sidekiq::Queue.new(QUEUE).then { |q| [q.size, q.latency] } }
    results["stats (fair_stats.queue, held)"] = LongestBench.longest { Sidekiq::FairTenant.fair_stats.queue(QUEUE) }
    results["waiting index after (entries; bytes in `which`)"] =
      { calls: redis.hlen(index_key), longest_us: 0, over: 0,
        command: "index #{memory(index_key)} B, waiting set #{memory(waiting_key)} B" }
    results
  ensure
    Sidekiq::FairTenant::Concurrency::Slots.stop
  end

  def waiting_key = "#{Names::SLOTS_PREFIX}#{SHARED[0].size}:#{SHARED[0]}:#{SHARED[1]}#{Names::WAITING}"

  def index_key = "#{waiting_key}#{Names::WAITING_INDEX}"

  def memory(key) = redis.call("MEMORY", "USAGE", key, "SAMPLES", "0").to_i

  def fetch_ack(fetch, count)
    count.times { fetch_once(fetch)&.then { |r| fetch.finish("ack", [r.entry, ""]) } }
  end

  # BIG jobs of BYTES over 10 tenants.
  def big
    redis.flushdb
    LongestBench.load_scripts
    pad = "x" * BYTES
    results = {}
    results["push #{BIG} jobs of #{BYTES} B (100 a call)"] =
      LongestBench.longest { push(Array.new(BIG) { |i| job(i, "t#{i % 10}", pad: pad) }) }
    results["Queue#each, first 100 (big)"] = LongestBench.longest { Sidekiq::Queue.new(QUEUE).first(100) }
    fetch = fetcher
    replies = []
    results["fetch #{BIG} (big)"] = LongestBench.longest { BIG.times { fetch_once(fetch)&.then { |r| replies << r } } }
    results["requeue #{replies.size} in flight in one finish (big)"] =
      LongestBench.longest { fetch.finish("requeue", replies.map(&:entry)) }
    results["recover a dead process (#{[BIG, 50].min} big in flight)"] =
      LongestBench.longest { LongestSetups.recover(QUEUE, [BIG, 50].min) }
    victim = redis.lindex("#{FairQueues.base(QUEUE)}#{Names::TENANT_LIST}t3", -1)
    results["delete a job (big)"] = LongestBench.longest do
      Sidekiq::FairTenant::FairQueues::Backlog.delete(QUEUE, victim, "t3")
    end
    results["fair-off drain (big)"] =
      LongestBench.longest { Sidekiq.redis { |conn| FairQueues.drain(conn, QUEUE) } }
    results.merge(BoundsMore.adopt(pad), BoundsMore.big_held(pad))
  ensure
    Sidekiq::FairTenant::Concurrency::Slots.stop
  end

  def print(title, results)
    puts
    puts "  #{title}"
    puts format("  %-56s %9s %11s %8s  %s", "operation", "commands", "longest us", "> 5 ms", "which")
    results.each do |name, r|
      puts format("  %-56s %9d %11d %8d  %s", name, r[:calls], r[:longest_us], r[:over], r[:command])
    end
  end
end

# The big jobs' adoption and held-back rows (BoundsBench's helpers).
module BoundsMore
  QUEUE = BoundsBench::QUEUE
  FairQueues = BoundsBench::FairQueues
  RAW = '{"class":"BenchFairJob","queue":"%<q>s","args":[%<i>d,"%<pad>s"],"jid":"a%<i>d","fair_tenant":"t%<t>d"}'

  module_function

  def redis = FairBench.redis

  # 100 jobs of BYTES in queue:<name> adopted: FairQueues.adopt as it is, or (BOUNDS_ADOPT=old) one call of all
  # 100, as FairQueues.adopt did before its bytes bound.
  def adopt(pad)
    redis.flushdb
    LongestBench.load_scripts
    redis.lpush("queue:#{QUEUE}", Array.new(100) { |i| format(RAW, q: QUEUE, i: i, pad: pad, t: i % 10) })
    old = ENV.fetch("BOUNDS_ADOPT", "") == "old"
    { "adopt 100 of 1 MB from queue:<name>#{" (one call, as before)" if old}" =>
      LongestBench.longest { Sidekiq.redis { |conn| old ? adopt_at_once(conn) : adopt_all(conn) } } }
  end

  def adopt_all(conn)
    loop { break unless FairQueues.adopt(conn, QUEUE, 100).positive? }
  end

  def adopt_at_once(conn)
    jobs = conn.call("LRANGE", "queue:#{QUEUE}", -100, -1).reverse
    triples = jobs.map { |job| FairQueues.adoption(QUEUE, job, []) }
    argv = [FairQueues.base(QUEUE), QUEUE, Time.now.to_f.to_s, *triples.flatten]
    Sidekiq::FairTenant::ScriptRunner.run(conn, "adopt", ["queue:#{QUEUE}", FairQueues::WEIGHTS_KEY, "dead"], argv)
  end

  # 100 tenants with a job of BYTES each on the shared scope (limit 1): one fetch serves one, the next holds
  # back the other 99 (each head job popped and pushed back).
  def big_held(pad)
    redis.flushdb
    LongestBench.load_scripts
    BoundsBench.push(Array.new(100) { |i| BoundsBench.job(10_000 + i, "h#{i}", slot: BoundsBench::SHARED, pad: pad) })
    fetch = BoundsBench.fetcher
    BoundsBench.fetch_once(fetch)
    rows = { "fetch holding back 99 tenants' big jobs (full scope)" =>
      LongestBench.longest { BoundsBench.fetch_once(fetch) } }
    capped = "#{FairQueues.base(QUEUE)}#{BoundsBench::Names::CAPPED}"
    BoundsBench.fetch_once(fetch) while redis.zcard(capped) < 99
    rows.merge("clear, 99 tenants held with a 1 MB head job" =>
      LongestBench.longest { Sidekiq.redis { |conn| FairQueues.clear(conn, QUEUE) } })
  ensure
    Sidekiq::FairTenant::Concurrency::Slots.stop
  end
end

begin
  Sidekiq::FairTenant.configure { |c| c.fair_queues = [BoundsBench::QUEUE] }
  FairBench.redis.call("CONFIG", "SET", "slowlog-max-len", "200000")
  only = ENV.fetch("BOUNDS_ONLY", "held,big").split(",")
  if only.include?("held")
    BoundsBench.print("#{BoundsBench::HELD} tenants held back on one key: scope (limit 1), 2 jobs each:",
                      BoundsBench.held)
  end
  if only.include?("big")
    BoundsBench.print("#{BoundsBench::BIG} jobs of #{BoundsBench::BYTES} bytes over 10 tenants:", BoundsBench.big)
  end
ensure
  server.stop
end
