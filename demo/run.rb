# frozen_string_literal: true

# The demo (bin/demo runs it after bin/setup, under Bundler): what a greedy tenant does to everyone
# else's wait, eight ways side by side (MODES): plain Sidekiq (FIFO), fair-tenant re-routing, re-routing
# plus per-tenant concurrency slots, fair fetch (start-time fair queueing of tenants inside the queue), and
# fair fetch with a per-tenant cap, elastic or static (the fetcher takes the slot with the job); then a
# sidekiq-fair_tenant user's rules kept with fair queues on, not re-routed (the default) and re-routed (opt-in).
# Each mode is measured against its own ideal: its jobs (its enqueue times, its measured durations) run
# in start-time fair order on the same number of threads, simulated (Demo::Report.ideal; fair_fetch+shared's, with
# its tenant, shared and rate limits held, by Demo::SharedIdeal).
# Real Sidekiq server processes (demo/app.rb) run the jobs; this process enqueues, waits, reports
# (demo/summary.rb) and charts (demo/chart.rb, gnuplot). Each mode runs on a freshly flushed Redis DB:
# REDIS_URL if given (it is flushed!), else a private redis-server. The Sidekiq version is the bundle's:
# BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile runs it on Sidekiq 7.3.
ROOT = File.expand_path("..", __dir__)
$LOAD_PATH.unshift(File.join(ROOT, "lib"))
require "fileutils"
require "json"
require "logger"
require "optparse"
require_relative "chart"
require_relative "rate_chart"
require_relative "report"
require_relative "shared_ideal"
require_relative "summary"

SMALL_JOBS_PER_TENANT = 3
MODES = {
  "plain" => "Sidekiq as it is: one queue, first in first out",
  "fair_tenant" => "re-routing: past the threshold a tenant's jobs go to the queue \"throttled\" " \
                   "(weight 1 against default's 4)",
  "fair_tenant+slots" => "re-routing, and at most --slot-limit running jobs per tenant (the rest parked)",
  "fair_fetch" => "fair fetch: \"default\" is a fair queue, so each tenant's jobs wait in their own list " \
                  "and the fetcher serves tenants in start-time fair order (weights 1); no re-routing, no slots",
  "fair_fetch+elastic" => "fair fetch, and at most --slot-limit running jobs per tenant, elastic: a tenant at " \
                          "its limit still gets the threads no tenant under its limit can use",
  "fair_fetch+static" => "fair fetch, and at most --slot-limit running jobs per tenant, static: a tenant at its " \
                         "limit leaves the rotation until one of its jobs finishes",
  "fair_fetch+rules" => "sidekiq-fair_tenant's rules kept (default -> default_throttled past the threshold a " \
                        "minute, default_superslow past 5x), all three queues fair (weights 6/3/1): a fair queue's " \
                        "jobs are not re-routed unless a rule says from_fair_queue: true, so they stay in default",
  "fair_fetch+reroute" => "the same rules with from_fair_queue: true: the greedy tenant's jobs spread over the " \
                          "three fair queues, and Sidekiq's queue weights pick the queue a thread tries first",
  "fair_fetch+time" => "fair fetch by worker time (fair_queues default:time): a tenant's virtual time advances by " \
                       "its jobs' run time (its mean charged at the fetch, the measured time corrected at the " \
                       "acknowledgement), not by their count",
  "fair_fetch+rate" => "fair fetch, the tenant \"limited-shop\" held to --rate-limit starts a second " \
                       "(fair_tenant_rate: [{ limit:, per: 1 }] on its jobs' class): over its window it leaves the " \
                       "rotation until it may start; the other tenants are uncapped",
  "fair_fetch+shared" => "fair fetch, every job calling one partner API: at most --slot-limit in flight per tenant " \
                         "and, for all tenants together, --shared-limit in flight and --shared-rate starts a second " \
                         "(fair_tenant_concurrency: [{ limit: }, { limit:, key: :api_scope }], fair_tenant_rate: " \
                         "{ limit:, per: 1, key: :api_scope }): a job starts when all three have room"
}.freeze
MODE_ALIASES = { "slots" => "fair_tenant+slots", "fair" => "fair_fetch", "elastic" => "fair_fetch+elastic",
                 "static" => "fair_fetch+static", "rules" => "fair_fetch+rules",
                 "reroute" => "fair_fetch+reroute", "time" => "fair_fetch+time",
                 "rate" => "fair_fetch+rate", "shared" => "fair_fetch+shared" }.freeze
# Modes whose queues are fair queues; among them those whose job class has a cap (fair_tenant_concurrency), and
# those whose job class has re-routing rules (their queues: Demo::RULE_QUEUES).
FAIR_MODES = %w[fair_fetch fair_fetch+elastic fair_fetch+static fair_fetch+rules fair_fetch+reroute
                fair_fetch+time fair_fetch+rate fair_fetch+shared].freeze
TIME_MODES = %w[fair_fetch+time].freeze
RULE_MODES = %w[fair_fetch+rules fair_fetch+reroute].freeze
RATE_MODES = %w[fair_fetch+rate].freeze
SHARED_MODES = %w[fair_fetch+shared].freeze
CAP_MODES = %w[fair_fetch+elastic fair_fetch+static].freeze
CAP_LIMIT_DEFAULT = 2
SCENARIOS = %w[mega-merchant two-megas long-jobs mixed-durations rate-capped shared-api].freeze
MIXED = "mixed-durations"
RATED = "rate-capped"
SHARED = "shared-api"
# mixed-durations: the fast greedy tenant's jobs are this much shorter, and it enqueues this many times more.
MIXED_RATIO = 10

def rate_options(parser, options)
  parser.on("--rate-limit N", Integer, "rate-capped: the capped tenant's starts a second (default 5)") do |v|
    options[:rate_limit] = v
  end
  parser.on("--capped-jobs N", Integer, "rate-capped: the capped tenant's jobs (default 9 s of its limit)") do |v|
    options[:capped_jobs] = v
  end
  parser.on("--spread F", Float, "rate-capped, shared-api: job lengths uniform over --job-ms x (1 +- F) (default " \
                                 "0.5; 0: all equal, the threads then finish in step)") { |v| options[:spread] = v }
end

def shared_options(parser, options)
  parser.on("--shared-limit N", Integer, "shared-api: the API's jobs in flight, all tenants (default 10)") do |v|
    options[:shared_limit] = v
  end
  parser.on("--shared-rate N", Integer, "shared-api: the API's starts in any 1 s, all tenants (default 20)") do |v|
    options[:shared_rate] = v
  end
end

MODES_HELP = "comma-separated, any of #{MODES.keys.join(",")} (default all but fair_fetch+time and +rate; " \
             "mixed-durations: plain,fair_fetch,fair_fetch+time; rate-capped: plain,fair_fetch,fair_fetch+rate; " \
             "shared-api: fair_fetch+shared; " \
             "#{MODE_ALIASES.map { |short, mode| "#{short} = #{mode}" }.join(", ")})".freeze
JOB_MS_HELP = "job length (default 20; long-jobs: 200; mixed-durations: the slow greedy tenant's, 200, the others' " \
              "#{MIXED_RATIO}x shorter; rate-capped, shared-api: 50)".freeze
options = { scenario: "mega-merchant", jobs: nil, threads: nil, job_ms: nil, small_tenants: nil, seed: 1,
            slot_limit: nil, modes: nil, out: File.join(ROOT, "tmp/demo"), rate_limit: 5, capped_jobs: nil,
            spread: 0.5, shared_limit: 10, shared_rate: 20 }
OptionParser.new do |o|
  o.banner = "Usage: bin/demo [options]"
  o.on("--scenario NAME", SCENARIOS, "#{SCENARIOS.join("|")} (default mega-merchant)") { |v| options[:scenario] = v }
  o.on("--jobs N", Integer, "greedy jobs (default 3000; long-jobs: 300; mixed-durations: the slow greedy " \
                            "tenant's, 150, and #{MIXED_RATIO}x as many for the fast one)") { |v| options[:jobs] = v }
  o.on("--threads N", Integer, "Sidekiq threads (default 10; shared-api: 20)") { |v| options[:threads] = v }
  o.on("--job-ms MS", Float, JOB_MS_HELP) { |v| options[:job_ms] = v }
  o.on("--small-tenants N", Integer, "small tenants, #{SMALL_JOBS_PER_TENANT} jobs each (default 20; shared-api: " \
                                     "49)") { |v| options[:small_tenants] = v }
  o.on("--seed N", Integer, "random seed (default 1)") { |v| options[:seed] = v }
  rate_options(o, options)
  shared_options(o, options)
  o.on("--slot-limit N", Integer, "running jobs per tenant: fair_tenant+slots (default threads - 1), " \
                                  "fair_fetch+elastic and +static (default #{CAP_LIMIT_DEFAULT})") do |v|
    options[:slot_limit] = v
  end
  o.on("--modes LIST", Array, MODES_HELP) do |v|
    options[:modes] = v.map { |m| MODE_ALIASES.fetch(m, m) }.uniq
  end
  o.on("--out DIR", "chart and logs directory (default tmp/demo)") { |v| options[:out] = File.expand_path(v) }
  o.separator ""
  o.separator "Modes:"
  MODES.each { |mode, text| o.separator format("    %-19s %s", mode, text) }
end.parse!
mixed = options[:scenario] == MIXED
rated = options[:scenario] == RATED
shared = options[:scenario] == SHARED
options[:jobs] ||= { "long-jobs" => 300, MIXED => 150, RATED => 2000, SHARED => 2000 }.fetch(options[:scenario], 3000)
options[:job_ms] ||= { "long-jobs" => 200.0, MIXED => 200.0, RATED => 50.0, SHARED => 50.0 }
                     .fetch(options[:scenario], 20.0)
options[:threads] ||= shared ? 20 : 10
options[:small_tenants] ||= shared ? 49 : 20
options[:capped_jobs] ||= 9 * options[:rate_limit]
options[:modes] ||= if mixed then %w[plain fair_fetch fair_fetch+time]
                    elsif rated then %w[plain fair_fetch fair_fetch+rate]
                    elsif shared then %w[fair_fetch+shared]
                    else
                      MODES.keys - TIME_MODES - RATE_MODES - SHARED_MODES
                    end
options[:cap_limit] = options[:slot_limit] || CAP_LIMIT_DEFAULT
options[:slot_limit] ||= [options[:threads] - 1, 1].max
unknown = options[:modes] - MODES.keys
abort "bin/demo: unknown mode(s) #{unknown.join(", ")}; known: #{MODES.keys.join(", ")}" if unknown.any?
abort "bin/demo: --slot-limit must be at least 1" unless options[:slot_limit].positive?
abort "bin/demo: --rate-limit must be at least 1" unless options[:rate_limit].positive?
abort "bin/demo: --spread must be from 0 to 1" unless options[:spread].between?(0, 1)
abort "bin/demo: --shared-limit and --shared-rate must be at least 1" unless options[:shared_limit].positive? &&
                                                                             options[:shared_rate].positive?

require_relative "../spec/support/redis_server"
unless ENV["REDIS_URL"]
  $redis_server = RedisServer.new.start # rubocop:disable Style/GlobalVars
  ENV["REDIS_URL"] = $redis_server.url # rubocop:disable Style/GlobalVars
end
# The gem's own keys (counters, slots, parked jobs) go to the same DB, which run_mode flushes.
ENV["SIDEKIQ_FAIR_TENANT_REDIS_URL"] = ENV.fetch("REDIS_URL")
# Read by demo/app.rb, here and in Sidekiq.
ENV["FAIR_TENANT_DEMO_SLOT_LIMIT"] = options[:slot_limit].to_s
ENV["FAIR_TENANT_DEMO_CAP_LIMIT"] = options[:cap_limit].to_s
ENV["FAIR_TENANT_DEMO_RATE_LIMIT"] = options[:rate_limit].to_s
ENV["FAIR_TENANT_DEMO_SHARED_LIMIT"] = options[:shared_limit].to_s
ENV["FAIR_TENANT_DEMO_SHARED_RATE"] = options[:shared_rate].to_s
require "sidekiq"
require "sidekiq/fair_tenant"
unless Sidekiq::FairTenant::Native::Fair.respond_to?(:simulate)
  abort "bin/demo: this extension was built without the cargo feature `bench` (the demo's simulator, " \
        "Native::Fair.simulate): run `bundle exec rake compile` in this checkout, which turns it on"
end
require_relative "app"
Sidekiq.logger.level = Logger::WARN
Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq.configure_client { |c| c.redis = { url: ENV.fetch("REDIS_URL"), size: 5 } }

def now = Time.now.to_f
def redis = @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"), timeout: 5)

# The workload: phases run one after the other; a phase's streams of [offset_s, tenant] are pushed
# concurrently, one thread each, offsets counted from the phase's start.
def schedule(opts)
  rng = Random.new(opts[:seed])
  small = (1..opts[:small_tenants]).flat_map { |k| Array.new(SMALL_JOBS_PER_TENANT, format("small-%02d", k)) }
  small.shuffle!(random: rng)
  n = opts[:jobs]
  own = { "long-jobs" => -> { long_jobs_schedule(opts, small, rng) }, MIXED => -> { mixed_schedule(opts, small) },
          RATED => -> { rated_schedule(opts, small, rng) }, SHARED => -> { shared_schedule(opts, small, rng) } }
  return own[opts[:scenario]].call if own.key?(opts[:scenario])

  # Half a second after the greedy burst, or sooner when the burst's backlog is shorter than 2 s.
  late = [0.5, n * opts[:job_ms] / 1000.0 / opts[:threads] / 4].min
  greedy = if opts[:scenario] == "two-megas"
             [Array.new(n / 2) { [0.0, "greedy-a"] }, Array.new(n - (n / 2)) { [late / 2, "greedy-b"] }]
           else
             [Array.new(n) { [0.0, "greedy"] }]
           end
  [greedy, [small.map { |t| [late, t] }]]
end

# The greedy tenant enqueues steadily at 1.5x what the threads can run; small tenants trickle meanwhile.
def long_jobs_schedule(opts, small, rng)
  rate = 1.5 * opts[:threads] * 1000.0 / opts[:job_ms]
  duration = opts[:jobs] / rate
  trickle = small.map { |t| [0.5 + (rng.rand * [duration - 0.5, 0.5].max), t] }.sort_by(&:first)
  [[Array.new(opts[:jobs]) { |i| [i / rate, "greedy"] }, trickle]]
end

# Two greedy tenants backlogged at once, one with jobs MIXED_RATIO times shorter (and as many times more of
# them); small tenants' jobs as short, a second later. Entries carry their job's length (ms).
def mixed_schedule(opts, small)
  fast = opts[:job_ms] / MIXED_RATIO
  greedy = [Array.new(opts[:jobs]) { [0.0, "greedy-slow", opts[:job_ms]] },
            Array.new(opts[:jobs] * MIXED_RATIO) { [0.0, "greedy-fast", fast] }]
  [greedy, [small.map { |t| [1.0, t, fast] }]]
end

# A greedy backlog of about (jobs x job length / threads) seconds and the capped tenant's backlog, both at once;
# small tenants trickle in meanwhile. Job lengths spread uniformly over job_ms x (1 +- spread), seeded.
def rated_schedule(opts, small, rng)
  duration = opts[:jobs] * opts[:job_ms] / 1000.0 / opts[:threads]
  trickle = small.map { |t| [0.5 + (rng.rand * [duration - 1.0, 0.5].max), t] }.sort_by(&:first)
  length = -> { opts[:job_ms] * (1 + (opts[:spread] * ((2 * rng.rand) - 1))) }
  [[Array.new(opts[:jobs]) { [0.0, "greedy", length.call] },
    Array.new(opts[:capped_jobs]) { [0.0, Demo::CAPPED_TENANT, length.call] },
    trickle.map { |at, t| [at, t, length.call] }]]
end

# The greedy backlog at once; small tenants' jobs trickle in over the time the greedy tenant alone needs for it (at
# the API's rate, or its own limit's pace, whichever is slower). Job lengths as in rated_schedule.
def shared_schedule(opts, small, rng)
  in_flight = [opts[:cap_limit], opts[:shared_limit]].min
  duration = [opts[:jobs].fdiv(opts[:shared_rate]), opts[:jobs] * opts[:job_ms] / 1000.0 / in_flight].max
  trickle = small.map { |t| [0.5 + (rng.rand * [duration - 1.0, 0.5].max), t] }.sort_by(&:first)
  length = -> { opts[:job_ms] * (1 + (opts[:spread] * ((2 * rng.rand) - 1))) }
  [[Array.new(opts[:jobs]) { [0.0, "greedy", length.call] }, trickle.map { |at, t| [at, t, length.call] }]]
end

# The class a tenant's jobs are pushed with: the capped tenant's carry the rate cap in the rate modes.
def job_class(mode, tenant)
  RATE_MODES.include?(mode) && tenant == Demo::CAPPED_TENANT ? Demo::RateCappedJob : Demo::JOBS.fetch(mode)
end

def enqueue(mode, phases, job_ms)
  phases.each do |streams|
    t0 = now
    streams.map do |stream|
      Thread.new do
        stream.each do |offset, tenant, ms|
          delay = t0 + offset - now
          sleep(delay) if delay.positive?
          job_class(mode, tenant).set(fair_tenant: tenant).perform_async(tenant, now, ms || job_ms)
        end
      end
    end.each(&:join)
  end
end

def sidekiq_bin
  Gem.bin_path("sidekiq", "sidekiq")
rescue Gem::Exception
  "sidekiq"
end

# The demo's queues are fair in the fair_fetch modes only: in this process (pushes, which write a capped job's
# slot into it) and in that mode's Sidekiq (which then fetches with FairFetch).
def fair_queues(mode)
  return Demo::RULE_QUEUES.keys if RULE_MODES.include?(mode)

  return ["default:#{Sidekiq::FairTenant::Native::Names::FAIR_MODE_TIME}"] if TIME_MODES.include?(mode)

  FAIR_MODES.include?(mode) ? %w[default] : []
end

# Sidekiq's -q arguments: the rule modes' three queues weighted 6/3/1, else default against throttled 4/1.
def queue_args(mode)
  weights = RULE_MODES.include?(mode) ? Demo::RULE_QUEUES : { "default" => 4, "throttled" => 1 }
  weights.flat_map { |queue, weight| ["-q", "#{queue},#{weight}"] }
end

def start_sidekiq(mode, threads, log)
  fair = fair_queues(mode).join(",")
  env = { "REDIS_URL" => ENV.fetch("REDIS_URL"), "FAIR_TENANT_DEMO_PARENT_PID" => Process.pid.to_s,
          "SIDEKIQ_FAIR_TENANT_FAIR_QUEUES" => fair.empty? ? nil : fair }
  pid = Process.spawn(env, Gem.ruby, "-I", File.join(ROOT, "lib"), sidekiq_bin, "-r", "./demo/app.rb",
                      "-c", threads.to_s, *queue_args(mode), "-t", "5",
                      chdir: ROOT, pgroup: true, in: File::NULL, out: log, err: log)
  $sidekiq_pids << pid # rubocop:disable Style/GlobalVars
  deadline = now + 30
  until redis.scard("processes").positive? && redis.exists?(Demo::SERVER_VERSION_KEY)
    raise "Sidekiq did not start; see #{log}" if now > deadline || Process.wait(pid, Process::WNOHANG)

    sleep 0.05
  end
  $sidekiq_version ||= server_version # rubocop:disable Style/GlobalVars
  pid
end

# The Sidekiq version the server process itself loaded (demo/app.rb records it at startup).
def server_version
  redis.get(Demo::SERVER_VERSION_KEY) || "unknown"
end

def stop_process_group(pid)
  Process.kill("TERM", -pid)
  deadline = now + 10
  while now < deadline
    return if Process.wait(pid, Process::WNOHANG)

    sleep 0.05
  end
  Process.kill("KILL", -pid)
  Process.wait(pid)
rescue Errno::ESRCH, Errno::ECHILD
  nil
end

def stop_sidekiqs
  $sidekiq_pids.each { |pid| stop_process_group(pid) } # rubocop:disable Style/GlobalVars
  $sidekiq_pids.clear # rubocop:disable Style/GlobalVars
end

def progress(done, total)
  width = 30
  filled = total.zero? ? width : (width * done / total)
  $stderr.print("\r[#{"#" * filled}#{"." * (width - filled)}] #{done}/#{total} jobs")
end

def wait_for(total, timeout)
  deadline = now + timeout
  loop do
    done = redis.llen(Demo::RECORDS_KEY)
    progress(done, total)
    break if done >= total
    raise "timed out: #{done}/#{total} jobs finished after #{timeout.round} s" if now > deadline

    sleep 0.1
  end
ensure
  $stderr.puts
end

# A minute, plus three times the jobs' work spread over the threads (and the capped tenant's or the API's pace,
# twice).
def timeout_for(mode, phases, opts)
  work = phases.flatten(1).sum { |stream| stream.sum { |_, _, ms| ms || opts[:job_ms] } } / 1000.0
  paced = RATE_MODES.include?(mode) ? 2.0 * opts[:capped_jobs] / opts[:rate_limit] : 0
  paced = 2.0 * phases.flatten(1).sum(&:size) / opts[:shared_rate] if SHARED_MODES.include?(mode)
  60 + (3.0 * work / opts[:threads]) + paced
end

def run_mode(mode, opts)
  flush
  log = File.join(opts[:out], "sidekiq-#{mode}.log")
  pid = start_sidekiq(mode, opts[:threads], log)
  Sidekiq::FairTenant.configure { |c| c.fair_queues = fair_queues(mode) }
  phases = schedule(opts)
  total = phases.flatten(1).sum(&:size)
  warn "== #{mode}: #{total} jobs"
  enqueue(mode, phases, opts[:job_ms])
  wait_for(total, timeout_for(mode, phases, opts))
  records = redis.lrange(Demo::RECORDS_KEY, 0, -1).map { |r| JSON.parse(r) }
  File.write(File.join(opts[:out], "records-#{mode}.json"), JSON.generate(records)) # for a closer look
  stop_process_group(pid)
  $boot_lines[mode] = boot_lines(log) if RULE_MODES.include?(mode) # rubocop:disable Style/GlobalVars
  records
end

# What the gem said at boot, without Sidekiq's time/pid/level prefix.
def boot_lines(log)
  tag = /\[sidekiq-fair_tenant\]/
  File.readlines(log).grep(tag).map { |line| line.strip.sub(/\A.*?(?=#{tag})/, "") }
end

# Everything, including the gem's sidekiq-fair_tenant:* counters, slots and parked jobs of the last mode.
def flush
  redis.flushdb
  left = redis.scan_each(match: "#{Sidekiq::FairTenant::Native::Names::ROOT}:*").first(1)
  raise "flushdb left #{left.first}" if left.any?
end

$sidekiq_pids = [] # rubocop:disable Style/GlobalVars
$boot_lines = {} # rubocop:disable Style/GlobalVars
%w[INT TERM].each { |sig| trap(sig) { raise Interrupt } }
FileUtils.mkdir_p(options[:out])
results = {}
begin
  options[:modes].each { |mode| results[mode] = run_mode(mode, options) }
rescue Interrupt
  warn "\ninterrupted; stopping Sidekiq"
  exit 130
ensure
  stop_sidekiqs
end
rates = ->(mode) { RATE_MODES.include?(mode) ? { Demo::CAPPED_TENANT => [options[:rate_limit], 1000] } : {} }
limits = { tenant: options[:cap_limit], shared: options[:shared_limit], rate: options[:shared_rate] }
ideal = lambda do |mode, records|
  if SHARED_MODES.include?(mode)
    Demo::SharedIdeal.run(records, options[:threads], limits)
  else
    Demo::Report.ideal(records, options[:threads], time: TIME_MODES.include?(mode), rates: rates.call(mode))
  end
end
results = results.to_h { |mode, records| [mode, [records, ideal.call(mode, records)]] }

o = options
puts "Sidekiq #{$sidekiq_version} server processes, Ruby #{RUBY_VERSION}" # rubocop:disable Style/GlobalVars
if mixed
  puts format("mixed-durations: greedy-slow %d jobs of %g ms and greedy-fast %d of %g ms, both at once; small " \
              "tenants' jobs %g ms, a second later", o[:jobs], o[:job_ms], o[:jobs] * MIXED_RATIO,
              o[:job_ms] / MIXED_RATIO, o[:job_ms] / MIXED_RATIO)
end
if rated
  puts format("rate-capped: greedy %d jobs and %s %d jobs (fair_fetch+rate: at most %d starts in any 1 s), both at " \
              "once; %d small tenants trickle in; jobs of %g ms +- %d%% (uniform)", o[:jobs], Demo::CAPPED_TENANT,
              o[:capped_jobs], o[:rate_limit], o[:small_tenants], o[:job_ms], (o[:spread] * 100).round)
end
if shared
  puts format("shared-api: greedy %d jobs at once, %d small tenants x %d jobs trickling in, all calling one API; " \
              "fair_fetch+shared: at most %d in flight per tenant, %d in flight and %d starts in any 1 s for all; " \
              "jobs of %g ms +- %d%% (uniform)", o[:jobs], o[:small_tenants], SMALL_JOBS_PER_TENANT, limits[:tenant],
              limits[:shared], limits[:rate], o[:job_ms], (o[:spread] * 100).round)
end
puts format("scenario %s: %d greedy jobs, %d small tenants x %d jobs, %g ms jobs, %d threads, seed %d, " \
            "fair_tenant threshold %d/60s, slot limit %d per tenant (lease %ds), " \
            "fair_fetch+elastic/+static cap %d per tenant",
            o[:scenario], o[:jobs], o[:small_tenants], SMALL_JOBS_PER_TENANT, o[:job_ms], o[:threads], o[:seed],
            Demo::THROTTLE_THRESHOLD, Demo::SLOT_LIMIT, Demo::SLOT_LEASE, Demo::CAP_LIMIT)
caps = CAP_MODES.to_h { |mode| [mode, Demo::CAP_LIMIT] }
if (RULE_MODES & results.keys).any?
  puts format("fair_fetch+rules/+reroute: Sidekiq -q %s; rules: default_throttled past %d jobs a minute, " \
              "default_superslow past %d", Demo::RULE_QUEUES.map { |q, w| "#{q},#{w}" }.join(" -q "),
              Demo::THROTTLE_THRESHOLD, Demo::SUPERSLOW_THRESHOLD)
end
puts Demo::Summary.new(results, threads: o[:threads], two_megas: o[:scenario] == "two-megas", modes: MODES,
                                caps: caps, rule_modes: RULE_MODES, mixed: mixed,
                                rate: rated ? { modes: RATE_MODES, limit: o[:rate_limit] } : nil,
                                shared: shared ? { modes: SHARED_MODES, limits: limits } : nil).lines
$boot_lines.each do |mode, lines| # rubocop:disable Style/GlobalVars
  lines.each { |line| puts "sidekiq log (#{mode}): #{line}" }
end
titles = results.keys.to_h { |mode| [mode, caps[mode] ? "#{mode} (at most #{caps[mode]} running per tenant)" : mode] }
Demo::Chart.draw(results, o[:out], Demo::Summary.method(:tenant_class), titles) if results.any?
Demo::RateChart.draw(results, o[:out], Demo::CAPPED_TENANT, o[:rate_limit], RATE_MODES) if rated
