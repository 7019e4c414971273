# frozen_string_literal: true

# Fair queues (bin/bench's last part; `require_relative`d by bench/run.rb with its helpers and server):
# the cost of a push to a fair queue against a plain Sidekiq push in the same run, the cost of a fetch as
# tenants and backlog grow, by job count against by worker time (bench/fair_time.rb), rate-capped tenants
# (bench/rate_cost.rb), one, two and four concurrency scopes per job (bench/scope_cost.rb), a capped tenant's extra
# work,
# the drain table (bench/drain.rb), recovery housekeeping
# (bench/fleet_housekeeping.rb), the longest command (bench/longest.rb), and issue 22's targets (bench/summary.rb).
FAIR_PUSHES = Integer(ENV.fetch("FAIR_PUSHES", PUSHES.to_s))
FAIR_FETCHES = Integer(ENV.fetch("FAIR_FETCHES", "2000"))
FAIR_MAX_JOBS = Integer(ENV.fetch("FAIR_MAX_JOBS", "1000000"))
require_relative "summary"
require_relative "drain"
require_relative "fleet_housekeeping"
require_relative "longest"
require_relative "fetch_floor"
require_relative "fair_fill"

# A plain queue's job: the push and drain that fair queues are measured against.
class BenchPlainQueueJob
  include Sidekiq::Worker
  sidekiq_options queue: "bench_plain"
end

# A fair queue's job.
class BenchFairJob
  include Sidekiq::Worker
  sidekiq_options queue: "bench_fair"
end

# A fair queue's job with a re-routing rule.
class BenchFairRoutedJob
  include Sidekiq::Worker
  sidekiq_options queue: "bench_fair", fair_tenant_queues: [{ queue: "bench_fair_slow", threshold: 100, per: 3600 }]
end

# Helpers of the fair-queue benchmark.
module FairBench
  module_function

  # Commands clients sent per push (MONITOR; commands inside scripts are not sent).
  def sent_per_push(job_class, pushes = 100)
    lines = Queue.new
    ready = Queue.new
    monitor = Redis.new(url: ENV.fetch("REDIS_URL"))
    thread = Thread.new { monitor.monitor { |line| line == "OK" ? ready << true : lines << line } }
    ready.pop
    pushes.times { |i| job_class.set(fair_tenant: TENANTS[i % TENANTS.size]).perform_async(i) }
    marker = "fair-bench-#{rand(1 << 30)}"
    redis.echo(marker)
    sent = []
    until (line = lines.pop).include?(marker)
      sent << line[/\] "(\w+)"/, 1].downcase unless line.include?(" lua]")
    end
    thread.kill
    monitor.close
    sent.tally.transform_values { |n| n.to_f / pushes }
  end

  # A real `sidekiq -c 10` on an empty Redis, booted, with "default" fair (in it and here) or not.
  def start_sidekiq(fair)
    redis.flushdb
    env = fair ? { "SIDEKIQ_FAIR_TENANT_FAIR_QUEUES" => "default" } : {}
    sidekiq = SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 10, env: env,
                                 app: File.expand_path("perform_app.rb", __dir__)).start
    sleep 0.05 until redis.scard("processes").positive?
    Sidekiq::FairTenant.configure { |c| c.fair_queues = fair ? %w[default] : [] }
    sidekiq
  end

  # Fetches and acknowledges `count` jobs in-process, one after the other as a worker thread does (an
  # acknowledgement rides with the next fetch); Redis work per job.
  def fetch_cost(name, count)
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: [name])
    fetch.retrieve_work.acknowledge # registers, loads the scripts
    cost = measure(count) { count.times { fetch.retrieve_work.acknowledge } }
    fetch.flush_acks # not left for the exit hook, which would find the server gone
    cost
  end

  # A fair queue with `waiting` jobs of tenant "big" (carrying `slot`, or none) and `others` jobs each of two
  # uncapped tenants, interleaved.
  def fill_capped(name, waiting, slot, others)
    payload = ->(jid) { { "class" => "BenchFairJob", "queue" => name, "args" => [jid], "jid" => jid } }
    carry = slot ? { Sidekiq::FairTenant::Native::Names::SLOT_FIELD => slot } : {}
    big = Array.new(waiting) { |i| ["big", JSON.generate(payload.call("big-#{i}").merge(carry))] }
    small = Array.new(others) { |i| ["small-#{i % 2}", JSON.generate(payload.call("small-#{i}"))] }
    pairs = Array.new([big.size, small.size].max) { |i| [big[i], small[i]] }.flatten(1).compact
    Sidekiq.redis do |conn|
      pairs.each_slice(1000) { |slice| Sidekiq::FairTenant::FairQueues.push(conn, name, slice) }
    end
  end

  # Fetches and acknowledges `count` jobs with `threads` in flight at a time (the oldest acknowledged before each
  # fetch, riding with it); Redis work per job, and the share of jobs that were big's.
  def concurrent_fetch_cost(name, threads, count)
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: [name])
    Sidekiq::FairTenant::Concurrency::Slots.stop # its heartbeat's commands are not per job
    units = Array.new(threads) { fetch.retrieve_work }
    big = 0
    cost = measure(count) do
      count.times do
        units.shift.acknowledge
        units << fetch.retrieve_work
        big += 1 if units.last.job.include?('"jid":"big-')
      end
    end
    fetch.flush_acks
    cost.merge(capped_share: big.to_f / count)
  end

  def measure(count)
    before = commandstats
    yield
    after = commandstats
    calls = ->(s) { s.sum { |cmd, v| cmd == "info" ? 0 : v["calls"] } }
    scripts = %w[calls usec].to_h do |f|
      [f, %w[fcall evalsha].sum { |c| after.dig(c, f).to_i - before.dig(c, f).to_i }]
    end
    { round_trips: scripts["calls"].fdiv(count), commands: (calls.call(after) - calls.call(before)).fdiv(count),
      server_us: scripts["usec"].fdiv(count) }
  end
end

puts
puts "fair queues (Sidekiq::FairTenant fair_queues):"
Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[bench_fair bench_fair_slow bench_fetch] }
chain_with(Sidekiq::FairTenant::ClientMiddleware)
redis.flushdb
%w[plain fair fair+rules].zip([BenchPlainQueueJob, BenchFairJob, BenchFairRoutedJob]).each do |mode, klass|
  klass.perform_async(0) # loads the scripts
  sent = FairBench.sent_per_push(klass)
  BenchSummary.figures[:sent_fair] = sent if mode == "fair"
  puts format("  %-10s commands sent per push: %s", mode, sent.map { |c, n| format("%s %.2f", c, n) }.join(", "))
end
jobs = { plain: BenchPlainQueueJob, fair: BenchFairJob, fair_rules: BenchFairRoutedJob }
totals = Hash.new(0.0)
(FAIR_PUSHES / BLOCK).times do |block|
  jobs.to_a.rotate(block).each do |name, klass|
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    BLOCK.times { |i| klass.set(fair_tenant: TENANTS[i % TENANTS.size]).perform_async(i) }
    totals[name] += Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  end
end
rates = totals.transform_values { |elapsed| FAIR_PUSHES / elapsed }
BenchSummary.figures[:push] = rates.merge(sent_fair: BenchSummary.figures.delete(:sent_fair))
puts format("  pushes/s, 1 thread, %d per mode in alternating blocks: plain %.0f, fair queue %.0f (%.2fx plain), " \
            "fair queue with a re-routing rule %.0f (%.2fx)", FAIR_PUSHES, rates[:plain], rates[:fair],
            rates[:fair] / rates[:plain], rates[:fair_rules], rates[:fair_rules] / rates[:plain])

puts
puts format("  fetch + acknowledge, in-process FairFetch, %d jobs per cell: round trips, Redis commands (those",
            FAIR_FETCHES)
puts "  inside scripts included) and server us (FCALL/EVALSHA usec) per job:"
puts format("  %9s %9s %12s %12s %12s", "tenants", "waiting", "round trips", "Redis cmds", "server us")
[[10, 100], [10, 1_000_000], [1_000, 1_000_000], [100_000, 100_000], [100_000, 1_000_000]].each do |tenants, waiting|
  waiting = [waiting, FAIR_MAX_JOBS].min
  next if tenants > waiting

  redis.flushdb
  FairBench.fill("bench_fetch", tenants, waiting + FAIR_FETCHES + 1)
  cost = FairBench.fetch_cost("bench_fetch", FAIR_FETCHES)
  (BenchSummary.figures[:fetch] ||= {})[[tenants, waiting]] = cost
  puts format("  %9d %9d %12.2f %12.2f %12.1f", tenants, waiting, cost[:round_trips], cost[:commands], cost[:server_us])
end
redis.flushdb
require_relative "fair_time"
BenchSummary.figures[:time] = FairTimeBench.run
FairTimeBench.print(BenchSummary.figures[:time])
redis.flushdb
require_relative "rate_cost"
BenchSummary.figures[:rate] = RateCostBench.run
RateCostBench.print(BenchSummary.figures[:rate])
redis.flushdb
require_relative "scope_cost"
BenchSummary.figures[:scopes] = ScopeCostBench.run
ScopeCostBench.print(BenchSummary.figures[:scopes])
require_relative "plain_scope_cost"
PlainScopeCostBench.print(PlainScopeCostBench.run)
Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[bench_fair bench_fair_slow bench_fetch] }
redis.flushdb

# A capped tenant (fair_tenant_concurrency limit 2) with a backlog, beside 2 uncapped tenants: 10 jobs in flight
# at a time (fetched and acknowledged as 10 worker threads would), so the cap binds and the tenant leaves and
# rejoins the rotation about once per job of its own.
puts
puts format("  a capped tenant (limit 2) with 1,000 or 10,000 jobs waiting, 2 uncapped tenants, 10 jobs in " \
            "flight, %d jobs per cell:", FAIR_FETCHES)
puts format("  %-22s %8s %12s %22s %12s", "", "waiting", "Redis cmds", "capped tenant's share", "server us")
baseline = {}
capped = {}
[["uncapped", nil], ["static limit 2", 0], ["elastic limit 2", 1]].each do |name, elastic|
  [1_000, 10_000].each do |waiting|
    redis.flushdb
    slot = elastic && [*Sidekiq::FairTenant::Native::Slots.tenant_scope("big", "bench_fetch"), 2, 60_000, elastic]
    FairBench.fill_capped("bench_fetch", waiting, slot, FAIR_FETCHES + 200)
    cost = FairBench.concurrent_fetch_cost("bench_fetch", 10, FAIR_FETCHES)
    baseline[waiting] ||= cost[:commands]
    capped[[name, waiting]] = cost
    puts format("  %-22s %8d %12.2f %22s %12.1f", name, waiting, cost[:commands],
                format("%.0f%% of jobs", cost[:capped_share] * 100), cost[:server_us])
  end
end
puts format("  (commands per job, script-internal ones included; the uncapped run is the baseline: %.2f)",
            baseline[1_000])
# A capped tenant's job's extra commands: the run's commands over the uncapped run's, per job of the capped tenant.
extra = { static: "static limit 2", elastic: "elastic limit 2" }.transform_values do |name|
  cost = capped[[name, 1_000]]
  (cost[:commands] - baseline[1_000]) / cost[:capped_share]
end
BenchSummary.figures[:capped_extra] = extra
puts format("  extra Redis commands per capped tenant's job (1,000 waiting; the run's extra over the uncapped run, " \
            "per capped job): static %+.1f, elastic %+.1f", extra[:static], extra[:elastic])
redis.flushdb

# Real `sidekiq -c 10` draining no-op jobs, BasicFetch against FairFetch, each round on its own redis-server.
BenchSummary.figures[:drain] = DrainBench.run
DrainBench.print(BenchSummary.figures[:drain])

# A job pushed to an idle server (every thread blocked for a while): how long until it starts.
idle_start = lambda do |fair|
  sidekiq = FairBench.start_sidekiq(fair)
  latencies = Array.new(5) do
    sleep 2.5 # every thread blocked in BRPOP, past a timeout
    redis.del("bench:started")
    pushed = Process.clock_gettime(Process::CLOCK_REALTIME)
    BenchStampJob.set(fair_tenant: "idle").perform_async
    sleep 0.001 until (started = redis.get("bench:started"))
    started.to_f - pushed
  end
  sidekiq.stop
  latencies.sort
end
basic_idle = idle_start.call(false)
fair_idle = idle_start.call(true)
Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
puts format("  a job pushed to an idle sidekiq -c 10 starts after (5 pushes, median / max): " \
            "BasicFetch %.1f / %.1f ms, FairFetch %.1f / %.1f ms",
            basic_idle[2] * 1000, basic_idle[4] * 1000, fair_idle[2] * 1000, fair_idle[4] * 1000)

# A backlog present when fair fetch is switched on (FAIR_MAX_JOBS jobs in queue:<name>, pushed before the queue
# was fair): how long until the first job is handed out. BasicFetch's first job is one BRPOP on that list.
backlog = [FAIR_MAX_JOBS, 1_000_000].min
redis.flushdb
raw = '{"class":"BenchFairJob","queue":"bench_fetch","args":[%d],"jid":"b%d","fair_tenant":"t%d"}'
(0...backlog).each_slice(10_000) do |slice|
  redis.pipelined do |pipe|
    slice.each_slice(1000) { |s| pipe.lpush("queue:bench_fetch", s.map { |i| format(raw, i, i, i % 50) }) }
  end
end
first_job = lambda do |fetch|
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  job = fetch.call
  [Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, job]
end
basic_first, = first_job.call(-> { redis.brpop("queue:bench_fetch", timeout: 1) })
redis.rpush("queue:bench_fetch", format(raw, 0, 0, 0)) # put it back
Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[bench_fetch bench_warm] }
redis.lpush("queue:bench_warm", format(raw, 0, 0, 0).sub("bench_fetch", "bench_warm"))
warm = Sidekiq::FairTenant::FairFetch.new(queues: ["bench_warm"])
warm.retrieve_work.acknowledge # loads the fetch and adoption scripts
warm.flush_acks
fetch = Sidekiq::FairTenant::FairFetch.new(queues: ["bench_fetch"])
fair_first, unit = first_job.call(-> { fetch.retrieve_work })
unit.acknowledge
fetch.flush_acks
Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
puts format("  a backlog of %d jobs switched on: first job handed out after %.2f ms (FairFetch: three round trips, " \
            "fetch, adopt %d, fetch; the thread adopts %d more at its next call) against %.2f ms (BasicFetch's " \
            "BRPOP); %d still to adopt",
            backlog, fair_first * 1000, Sidekiq::FairTenant::FairFetch::ADOPT_FIRST,
            Sidekiq::FairTenant::FairFetch::ADOPT_BATCH, basic_first * 1000, redis.llen("queue:bench_fetch"))
redis.flushdb

BenchSummary.figures[:housekeeping] = FleetHousekeeping.report
redis.flushdb

BenchSummary.figures[:longest] = LongestBench.run
LongestBench.print(BenchSummary.figures[:longest])

puts
BenchSummary.figures[:floor] = FetchFloor.run
FetchFloor.report(BenchSummary.figures[:floor])
BenchSummary.print
