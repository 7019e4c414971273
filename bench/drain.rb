# frozen_string_literal: true

require_relative "redis_counters"
require_relative "process_counters"
require_relative "drain_app"
require_relative "batch_sizes"
require_relative "drain_table"

# Each drain mode's `sidekiq` environment: BasicFetch, FairFetch, the minimal reliable fetch (bench/reliable_fetch.rb),
# and FairFetch without batching (bench/drain_parts.rb's, bench/unbatched_fetch.rb).
module DrainModes
  FAIR = { "SIDEKIQ_FAIR_TENANT_FAIR_QUEUES" => "default" }.freeze
  ENV = { basic: {}, fair: FAIR, reliable: { "BENCH_FETCH" => "reliable" },
          unbatched: FAIR.merge("BENCH_UNBATCHED" => "1") }.freeze
end

# The drain table of bin/bench: a real `sidekiq -c 10` draining no-op jobs with BasicFetch and with FairFetch, a
# private redis-server per round, the two taking turns round by round; per cell the median of ROUNDS rounds of
# jobs/s and, per job, Redis CPU, Redis commands (those inside scripts included) and server time (commandstats),
# and the sidekiq processes' own CPU and thread switches (what sets the pace when Redis is not the bottleneck).
# The window runs from the first push (the process already booted and idle) to the last job's INCR: it counts the
# pushes, fetches, acknowledgements and the job's own INCR, and Sidekiq's heartbeats meanwhile (both modes alike).
module DrainBench
  ROUNDS = Integer(ENV.fetch("DRAIN_ROUNDS", "3"))
  # [payload bytes, jobs]: 10,000 jobs of 1 KB, DRAIN_JOBS_LARGE (default 1,000: 200 MB per round) of 200 KB.
  PAYLOADS = [[1_000, Integer(ENV.fetch("DRAIN_JOBS", "10000"))],
              [200_000, Integer(ENV.fetch("DRAIN_JOBS_LARGE", "1000"))]].freeze
  TENANT_COUNTS = [50, 10_000].freeze
  MODES = %i[basic fair].freeze
  # The cell that also runs the least a reliable fetch does (bench/reliable_fetch.rb: BLMOVE, then LREM; no
  # fairness): how much of the gap to BasicFetch any reliable fetch pays.
  RELIABLE_CELL = [1_000, 50].freeze
  FIELDS = %i[rate cpu_us commands server_us batch_mean batch_p95 sidekiq_cpu_us switches].freeze
  BULK_BYTES = 1_000_000 # per push_bulk call
  DEADLINE = 900
  FLEET = Integer(ENV.fetch("DRAIN_FLEET", "3")) # processes of the fleet row

  module_function

  # An argument of about `bytes` bytes of JSON: an array of small objects, as real arguments look.
  def filler(bytes)
    Array.new((bytes / 41).clamp(1, nil)) { |n| { "id" => n, "sku" => format("item-%06d", n), "qty" => n % 7 } }
  end

  # One round of one mode on its own redis-server, drained by `processes` sidekiq processes: {rate:, cpu_us:,
  # commands:, server_us:, by_command:, batch_mean:, batch_p95:}.
  def round(mode, bytes, jobs, tenants, processes = 1)
    server = RedisServer.new.start
    redis = server.redis
    pool = Sidekiq::RedisConnection.create(url: server.url, size: 2)
    fleet = Array.new(processes) { boot(mode, server, redis) }
    result = push_and_wait(redis, fleet, jobs) { push(pool, filler(bytes), jobs, tenants) }
    fleet.each(&:stop)
    result.merge(BatchSizes.read(redis))
  ensure
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
    redis&.close
    server.stop
    server.remove_dir
  end

  # More environment for every drain `sidekiq` (bench/drain_parts.rb: BENCH_PARTS).
  singleton_class.attr_accessor :extra_env

  def boot(mode, server, redis)
    fair = DrainModes::ENV.fetch(mode).key?("SIDEKIQ_FAIR_TENANT_FAIR_QUEUES")
    env = DrainModes::ENV.fetch(mode).merge(extra_env || {})
    sidekiq = SidekiqProcess.new(redis_url: server.url, concurrency: 10, env: env,
                                 app: File.expand_path("drain_app.rb", __dir__)).start
    wait(sidekiq) { redis.smembers("processes").any? { |identity| identity.include?(":#{sidekiq.pid}:") } }
    sleep 0.5 # every thread idle in its BRPOP
    Sidekiq::FairTenant.configure { |c| c.fair_queues = fair ? %w[default] : [] }
    sidekiq
  end

  # Pushes `jobs` jobs in bulks of about BULK_BYTES through `pool` (the round's server).
  def push(pool, filler, jobs, tenants)
    batch = (BULK_BYTES / [JSON.generate(filler).bytesize, 1].max).clamp(1, 1000)
    Sidekiq::Client.via(pool) do
      jobs.times.each_slice(batch) do |slice|
        Sidekiq::Client.push_bulk("class" => BenchDrainJob, "args" => slice.map { |i| [i, "t#{i % tenants}", filler] })
      end
    end
  end

  # Runs the block (the pushes) and waits for `jobs` jobs done by `fleet`; the figures of that window.
  def push_and_wait(redis, fleet, jobs)
    pids = fleet.map(&:pid)
    before = [RedisCounters.take(redis), ProcessCounters.take(pids)]
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    yield
    polls = wait(fleet.first) { redis.get("bench:done").to_i >= jobs }
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    processes = ProcessCounters.take(pids).since(before.last)
    per_job(RedisCounters.take(redis).since(before.first, ignore: { "get" => polls }), processes, jobs, elapsed)
  end

  # Per job: Redis's work, and the sidekiq processes' CPU and thread switches.
  def per_job(work, processes, jobs, elapsed)
    { rate: jobs / elapsed, cpu_us: work[:cpu] * 1e6 / jobs, commands: work[:calls].fdiv(jobs),
      server_us: work[:usec].fdiv(jobs), by_command: work[:by_command].transform_values { |n| n.fdiv(jobs) },
      sidekiq_cpu_us: processes[:cpu] * 1e6 / jobs, switches: processes[:switches].fdiv(jobs) }
  end

  # Polls until the block is true; the number of polls.
  def wait(sidekiq)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + DEADLINE
    polls = 0
    until yield
      polls += 1
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline || !sidekiq.alive?
        raise "bin/bench: the drain's sidekiq did not finish; its log #{sidekiq.log}:\n" \
              "#{File.read(sidekiq.log).lines.last(20).join}"
      end
      sleep 0.01
    end
    polls + 1
  end

  def median(values) = values.sort[values.size / 2]

  # {[bytes, tenants] => {jobs:, basic: {...}, fair: {...}}}, rounds alternating which mode goes first.
  def run
    round(:basic, 1_000, 1_000, 50) # warm up: OS caches, the first boot
    PAYLOADS.product(TENANT_COUNTS).to_h do |(bytes, jobs), tenants|
      modes = RELIABLE_CELL.eql?([bytes, tenants]) ? MODES + [:reliable] : MODES
      rounds = Hash.new { |h, k| h[k] = [] }
      ROUNDS.times do |r|
        modes.rotate(r).each { |mode| rounds[mode] << round(mode, bytes, jobs, tenants) }
      end
      cell = modes.to_h do |mode|
        [mode, FIELDS.to_h { |f| [f, median(rounds[mode].map { |x| x[f] })] }]
      end
      [[bytes, tenants], cell.merge(jobs: jobs, tenants_with_jobs: [jobs, tenants].min)]
    end.merge(fleet_cell)
  end

  # A fleet: FLEET processes of 10 threads drain 1 KB jobs of 50 tenants ({[bytes, tenants, processes] => cell}).
  def fleet_cell
    jobs = PAYLOADS.first.last
    rounds = Hash.new { |h, k| h[k] = [] }
    ROUNDS.times { |r| MODES.rotate(r).each { |mode| rounds[mode] << round(mode, 1_000, jobs, 50, FLEET) } }
    cell = MODES.to_h { |mode| [mode, FIELDS.to_h { |f| [f, median(rounds[mode].map { |x| x[f] })] }] }
    { [1_000, 50, FLEET] => cell.merge(jobs: jobs, tenants_with_jobs: 50) }
  end

  def print(table) = DrainTable.print(table)
end
