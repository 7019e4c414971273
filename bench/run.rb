# frozen_string_literal: true

# Enqueue benchmark: plain Sidekiq pushes vs pushes through the fair-tenant middleware, against
# a private redis-server, all in one run so the figures are ratios measured side by side.
#
#   bin/bench                 # defaults (bin/bench runs bin/setup, then this file under Bundler)
#   PUSHES=50000 bin/bench    # more pushes per mode
#   BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile bin/bench   # on Sidekiq 7.3
#   BENCH_ONLY=enqueue bundle exec ruby bench/run.rb    # the enqueue table alone
#
# Modes (all push the same job class, whose sidekiq_options carry the two rules):
#   plain        Sidekiq push, no middleware
#   floor        plain push + one no-op EVALSHA on the gem's own pool (the design's floor)
#   fair_tenant  the real middleware: 2 rules, 50 tenants round-robin
# then perform (slots), fair queues (bench/fair.rb), Sidekiq's pool against the gem's Rust pool on the same
# calls (bench/redis_paths.rb), and recovery housekeeping per interval for a fleet (bench/fleet_housekeeping.rb).
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "etc"
require "logger"
require_relative "../spec/support/redis_server"

server = RedisServer.new.start
ENV["REDIS_URL"] = server.url
require "sidekiq"
require "sidekiq/fair_tenant"
# Sidekiq 6.4 calls redis-rb 4.8's sadd the 4.x way: a warning written per plain push would slow plain pushes only.
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
unless Sidekiq::FairTenant::Native::Client.method_defined?(:noop_eval)
  abort "bin/bench: this extension was built without the cargo feature `bench` (Client#noop_eval, " \
        "Router#route_args): run `bundle exec rake compile` in this checkout, which turns it on"
end
Sidekiq.logger.level = Logger::WARN
Sidekiq.configure_client { |c| c.redis = { url: server.url, size: 10 } }
Sidekiq::FairTenant.configure { |c| c.pool_size = 10 }

PUSHES = Integer(ENV.fetch("PUSHES", "20000"))
ROUNDS = Integer(ENV.fetch("ROUNDS", "3"))
TENANTS = Array.new(50) { |i| "tenant-#{i}" }.freeze

# The job pushed in every mode: re-routed past its thresholds.
class BenchRoutedJob
  include Sidekiq::Worker
  sidekiq_options queue: "default",
                  fair_tenant_queues: [
                    { queue: "throttled_2x", threshold: 100, per: 3600 },
                    { queue: "throttled_4x", threshold: 20, per: 60 }
                  ]
end

# The floor: what any design that makes one script call per push must pay.
class NoopEvalMiddleware
  def call(_worker, job, _queue, _pool)
    Sidekiq::FairTenant.native.noop_eval("bench:noop:#{job["fair_tenant"]}")
    yield
  end
end

def chain_with(*middleware)
  Sidekiq.configure_client do |config|
    config.client_middleware do |chain|
      chain.clear
      middleware.each { |m| chain.add(m) }
    end
  end
end

def redis = @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"))

def commandstats
  redis.info("commandstats").to_h { |cmd, v| [cmd.delete_prefix("cmdstat_"), v.transform_values(&:to_f)] }
end

# Modes take turns in blocks of BLOCK pushes (the first mode rotating), and each mode's time and
# Redis counters are summed over its blocks: a 2-core VM's noise comes in bursts of seconds, and
# fine-grained turns spread it over every mode alike.
BLOCK = 500
MODES = [[:plain, []], [:floor, [NoopEvalMiddleware]], [:fair_tenant, [Sidekiq::FairTenant::ClientMiddleware]]].freeze

def push_block(threads, offset)
  per_thread = BLOCK / threads
  work = lambda do |t|
    per_thread.times do |i|
      n = offset + (t * per_thread) + i
      BenchRoutedJob.set(fair_tenant: TENANTS[n % TENANTS.size]).perform_async(n)
    end
  end
  threads == 1 ? work.call(0) : Array.new(threads) { |t| Thread.new { work.call(t) } }.each(&:join)
  per_thread * threads
end

def total_calls(stats) = stats.sum { |cmd, v| cmd == "info" ? 0 : v["calls"] }

def measure_block(totals, threads, offset)
  before = commandstats
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  pushed = push_block(threads, offset)
  totals[:elapsed] += Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  totals[:pushes] += pushed
  after = commandstats
  %w[calls usec].each do |field|
    totals["evalsha_#{field}"] += after.dig("evalsha", field).to_f - before.dig("evalsha", field).to_f
  end
  totals[:all_cmds] += total_calls(after) - total_calls(before)
  totals[:blocks] << (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
end

def median(values) = values.sort[values.size / 2]

def run(threads:)
  redis.flushdb
  totals = MODES.to_h { |mode, _| [mode, Hash.new(0.0).tap { |t| t[:blocks] = [] }] }
  (PUSHES / BLOCK).times do |block|
    MODES.rotate(block).each do |mode, chain|
      chain_with(*chain)
      measure_block(totals[mode], threads, block * BLOCK)
    end
  end
  floor_blocks = totals[:floor][:blocks]
  totals.transform_values do |t|
    calls = t["evalsha_calls"]
    # Each block's time against the floor's block of the same turn; the median of those ratios
    # shrugs off a burst of noise that lands on a few blocks.
    { rate: t[:pushes] / t[:elapsed], us: t[:elapsed] * 1e6 / t[:pushes], evalsha: calls / t[:pushes],
      all_cmds: t[:all_cmds] / t[:pushes], server_us: calls.zero? ? 0 : t["evalsha_usec"] / calls,
      vs_floor: median(floor_blocks.zip(t[:blocks]).map { |f, b| f / b }) }
  end
end

def warm_up
  chain_with(Sidekiq::FairTenant::ClientMiddleware)
  200.times { |i| BenchRoutedJob.set(fair_tenant: "warm").perform_async(i) }
  chain_with(NoopEvalMiddleware)
  200.times { |i| BenchRoutedJob.set(fair_tenant: "warm").perform_async(i) }
end

puts "sidekiq-fair_tenant-rs enqueue benchmark"
puts "Ruby #{RUBY_VERSION}, Sidekiq #{Sidekiq::VERSION}, redis-server #{redis.info["redis_version"]}, " \
     "#{PUSHES} pushes per mode taking turns in blocks of #{BLOCK}, #{TENANTS.size} tenants, " \
     "#{Etc.nprocessors} cores"
warm_up

results = {}
[1, 8].each do |threads|
  run(threads: threads).each { |mode, r| results[[mode, threads]] = r }
end

puts
puts format("%-12s %7s %12s %9s %10s %12s %13s", "mode", "threads", "pushes/s", "us/push", "vs floor",
            "EVALSHA/push", "Redis cmds/push")
results.each do |(mode, threads), r|
  puts format("%-12s %7d %12.0f %9.1f %9.2fx %12.2f %13.2f", mode, threads, r[:rate], r[:us],
              r[:vs_floor], r[:evalsha], r[:all_cmds])
end
ft = results[[:fair_tenant, 1]]
puts
puts "vs floor is the median, over the turns, of the floor's block time over this mode's (1.00x = as fast as"
puts "the floor). Redis cmds/push counts commands run inside scripts too (INFO commandstats); round trips per push are"
puts "Sidekiq's pipelined SADD+LPUSH plus the EVALSHA column."
puts format("server time per EVALSHA during the 1-thread runs (INFO commandstats usec_per_call): " \
            "routing %.2f us, no-op script %.2f us", ft[:server_us], results[[:floor, 1]][:server_us])
if ENV["BENCH_ONLY"] == "enqueue" # the table above alone (`BENCH_ONLY=enqueue bundle exec ruby bench/run.rb`)
  server.stop
  exit
end

# Server time per decision with Redis kept busy: the same pushes (50 tenants round-robin, the two
# rules above) sent as EVALSHA in pipelines of 100, so the figure is the script's own cost rather
# than cache misses and scheduling between one-at-a-time calls on a 2-core VM shared with Ruby.
# Compared with a no-op script and with the least an exact design must do (read the tenant's
# state, write one time back), given the same KEYS and ARGV.
def pipelined_server_us(sha, calls)
  redis.flushdb
  redis.config(:resetstat)
  calls.each_slice(100) do |batch|
    redis.pipelined { |p| batch.each { |keys, argv| p.evalsha(sha, keys: keys, argv: argv) } }
  end
  commandstats.fetch("evalsha").fetch("usec_per_call")
end

route_rules = Sidekiq::FairTenant::Native::RuleSet.new("BenchRoutedJob",
                                                       BenchRoutedJob.get_sidekiq_options["fair_tenant_queues"],
                                                       Sidekiq::FairTenant.max_throttling_window)
start = Time.now.to_f
calls = Array.new(PUSHES * 2) do |i|
  Sidekiq::FairTenant.native.router.route_args(route_rules, "BenchRoutedJob", "default", TENANTS[i % TENANTS.size],
                                               start + (i * 0.0005))
end
Sidekiq::FairTenant.native.router.route(route_rules, "BenchRoutedJob", "default", "load", start) # loads the script
scripts = {
  "no-op" => redis.script(:load, "return 0"),
  "GET + PSETEX" => redis.script(:load, "redis.call('GET', KEYS[1]) redis.call('PSETEX', KEYS[1], ARGV[2], ARGV[1])"),
  "routing" => Sidekiq::FairTenant::Native::Router.route_script_sha
}
busy = Hash.new(Float::INFINITY)
ROUNDS.times { scripts.each { |name, sha| busy[name] = [busy[name], pipelined_server_us(sha, calls)].min } }
puts format("server time per EVALSHA with Redis busy (pipelines of 100, %d calls, best of %d): " \
            "no-op %.2f us, GET + PSETEX %.2f us, routing %.2f us",
            calls.size, ROUNDS, busy["no-op"], busy["GET + PSETEX"], busy["routing"])
puts format("  routing's own work over the no-op script: %.2f us per decision", busy["routing"] - busy["no-op"])

# Memory of one greedy tenant after 100,000 enqueues (the script called directly, same code path).
redis.flushdb
router = Sidekiq::FairTenant.native.router
rules = Sidekiq::FairTenant::Native::RuleSet.new("BenchRoutedJob",
                                                 BenchRoutedJob.get_sidekiq_options["fair_tenant_queues"],
                                                 Sidekiq::FairTenant.max_throttling_window)
now = Time.now.to_f
100_000.times do |i|
  router.route(rules, "BenchRoutedJob", "default", "greedy", now + (i * 0.001))
end
key = router.key_for("BenchRoutedJob", "default", "greedy")
bytes = redis.call("MEMORY", "USAGE", key, "SAMPLES", "0")
puts format("greedy tenant after 100,000 enqueues: %d entries, MEMORY USAGE %d bytes (%.1f KB), TTL %ds",
            redis.strlen(key) / 8, bytes, bytes / 1024.0, redis.ttl(key))

# The gem's own Redis unreachable while Sidekiq's is up: every push fails open to its original queue, and only
# the one that finds Redis gone (then one probe per reconnect_backoff) waits for a timeout. Plain pushes and
# pushes through the middleware take turns in blocks, as above.
DOWN_PUSHES = Integer(ENV.fetch("DOWN_PUSHES", "4000"))

# Pushes/s of each setup, the setups taking turns in blocks of BLOCK pushes.
def alternating_rates(pushes, setups)
  totals = Hash.new(0.0)
  (pushes / BLOCK).times do |block|
    setups.to_a.rotate(block).each do |name, setup|
      setup.call
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      BLOCK.times { |i| BenchRoutedJob.set(fair_tenant: TENANTS[i % TENANTS.size]).perform_async(i) }
      totals[name] += Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    end
  end
  totals.transform_values { |elapsed| pushes / elapsed }
end

def down_rates
  alternating_rates(DOWN_PUSHES, plain: -> { chain_with },
                                 fair_tenant: -> { chain_with(Sidekiq::FairTenant::ClientMiddleware) })
end

paused = RedisServer.new.start
puts
puts "the gem's Redis down, Sidekiq's up (#{DOWN_PUSHES} pushes per mode, 1 thread, timeouts 0.5 s, " \
     "reconnect_backoff #{Sidekiq::FairTenant.config.reconnect_backoff} s):"
{ "refused" => "redis://127.0.0.1:#{RedisServer.free_port}/0",
  "unresolvable" => "redis://no-such-host.invalid:6379/0",
  "stalled (CLIENT PAUSE WRITE)" => paused.url }.each do |how, url|
  Sidekiq::FairTenant.configure { |c| c.redis_url = url }
  paused.redis.call("CLIENT", "PAUSE", "600000", "WRITE") if how.start_with?("stalled") # PAUSE ALL blocks UNPAUSE
  rates = down_rates
  puts format("  %-24s plain %6.0f pushes/s, fair_tenant %6.0f pushes/s (%.2fx plain), %d connection attempts",
              how, rates[:plain], rates[:fair_tenant], rates[:fair_tenant] / rates[:plain],
              Sidekiq::FairTenant.native.pool_stats[:connects])
ensure
  paused.redis.call("CLIENT", "UNPAUSE") if how.start_with?("stalled")
end
paused.stop
Sidekiq::FairTenant.configure { |c| c.redis_url = server.url }
chain_with(Sidekiq::FairTenant::ClientMiddleware)

# The gem's Redis over TLS (a throwaway CA, a redis-server with --tls-port) against plain TCP, same run.
require_relative "../spec/support/test_certificates"
certs = TestCertificates.new
tls_server = RedisServer.new(tls: certs).start
tls_pushes = Integer(ENV.fetch("TLS_PUSHES", PUSHES.to_s))
rates = alternating_rates(tls_pushes,
                          tcp: lambda {
                            Sidekiq::FairTenant.configure do |c|
                              c.redis_url = server.url
                              c.ssl_ca_file = nil
                            end
                          },
                          tls: lambda {
                            Sidekiq::FairTenant.configure do |c|
                              c.redis_url = tls_server.url
                              c.ssl_ca_file = certs.ca_file
                            end
                          })
puts
puts format("the gem's Redis over TLS (rustls, ring, CA file): %.0f pushes/s vs %.0f over plain TCP (%.2fx), " \
            "1 thread, %d pushes each", rates[:tls], rates[:tcp], rates[:tls] / rates[:tcp], tls_pushes)
tls_server.stop
Sidekiq::FairTenant.configure do |c|
  c.redis_url = server.url
  c.ssl_ca_file = nil
end

# ---------------------------------------------------------------------------------------------
# Perform side (concurrency slots): the server middleware driven in-process with a no-op job.
class BenchSlotJob
  include Sidekiq::Worker
  sidekiq_options queue: "default", fair_tenant_concurrency: { limit: 1_000, lease: 60 }
end

def payloads(job_class, count)
  options = job_class.get_sidekiq_options
  Array.new(count) do |i|
    options.merge("class" => job_class.name, "args" => [i], "jid" => format("%024x", rand(1 << 96)),
                  "enqueued_at" => Time.now.to_f, "fair_tenant" => TENANTS[i % TENANTS.size])
  end
end

def perform_run(job_class, count)
  middleware = Sidekiq::FairTenant::ServerMiddleware.new
  worker = job_class.new
  jobs = payloads(job_class, count)
  redis.flushdb
  before = commandstats
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  jobs.each { |job| middleware.call(worker, job, "default") { nil } }
  elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  after = commandstats
  calls = ->(cmd) { after.fetch(cmd, {}).fetch("calls", 0) - before.fetch(cmd, {}).fetch("calls", 0) }
  all = after.sum { |c, v| c == "info" ? 0 : v["calls"] } - before.sum { |c, v| c == "info" ? 0 : v["calls"] }
  { rate: count / elapsed, us: elapsed * 1e6 / count, evalsha: calls.call("evalsha") / count.to_f,
    all_cmds: all / count.to_f }
end

PERFORMS = Integer(ENV.fetch("PERFORMS", "10000"))
perform_run(BenchSlotJob, 200) # warm up: load the scripts
slot_perform = perform_run(BenchSlotJob, PERFORMS)
puts
puts "perform side, server middleware in-process (no-op job, limit 1000 so it never blocks, #{PERFORMS} jobs):"
puts format("  %.2f EVALSHA (round trips) per job, %.2f Redis commands per job, %.1f us per job",
            slot_perform[:evalsha], slot_perform[:all_cmds], slot_perform[:us])

# Real `sidekiq -c 10` draining PERFORMS no-op jobs, without and with slots.
require_relative "../spec/support/sidekiq_process"
require_relative "perform_app"
drain = lambda do |job_class|
  redis.flushdb
  sidekiq = SidekiqProcess.new(redis_url: server.url, concurrency: 10,
                               app: File.expand_path("perform_app.rb", __dir__)).start
  sleep 0.05 until redis.scard("processes").positive? # booted and fetching
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  Sidekiq::Client.push_bulk("class" => job_class, "args" => Array.new(PERFORMS) { |i| [i] },
                            "fair_tenant" => "bench")
  sleep 0.01 until redis.get("bench:done").to_i >= PERFORMS
  elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  sidekiq.stop
  PERFORMS / elapsed
end
drain.call(BenchNoopJob) # warm up the OS caches
plain_rate = drain.call(BenchNoopJob)
slot_rate = drain.call(BenchNoopSlotJob)
puts format("real sidekiq -c 10 draining #{PERFORMS} no-op jobs: %.0f jobs/s plain, %.0f jobs/s with slots (%.2fx)",
            plain_rate, slot_rate, slot_rate / plain_rate)

# 10,000 jobs parked behind limit 1: each completion releases the holder (hand-over to the
# oldest parked job), the handed job is fetched (RPOP) and acquires its slot ("held"). Redis
# work per completed job must not grow with the number parked.
PARKED = Integer(ENV.fetch("PARKED", "10000"))
redis.flushdb
slots = Sidekiq::FairTenant.native.slots # no redis_url of its own: on Sidekiq's Redis
tag, sub = Sidekiq::FairTenant::Native::Slots.tenant_scope("parked-bench", "default")
template = payloads(BenchSlotJob, 1).first.merge("fair_tenant" => "parked-bench")
slots.acquire(tag, sub, "holder", 60_000, 1, JSON.generate(template.merge("jid" => "holder")), 0.0)
PARKED.times do |i|
  slots.acquire(tag, sub, "p#{i}", 60_000, 1, JSON.generate(template.merge("jid" => "p#{i}")), i.to_f)
end
holder = "holder"
phase = lambda do |count|
  before = commandstats
  count.times do
    slots.release(tag, sub, holder, 60_000, 1)
    holder = JSON.parse(redis.rpop("queue:default"))["jid"]
    slots.acquire(tag, sub, holder, 60_000, 1, "{}", 0.0)
  end
  after = commandstats
  all = after.sum { |c, v| c == "info" ? 0 : v["calls"] } - before.sum { |c, v| c == "info" ? 0 : v["calls"] }
  usec = after["evalsha"]["usec"] - before["evalsha"]["usec"]
  evals = after["evalsha"]["calls"] - before["evalsha"]["calls"]
  [all / count.to_f, usec / evals]
end
window = [PARKED / 10, 1].max
first_cmds, first_us = phase.call(window)
phase.call(PARKED - (2 * window))
last_cmds, last_us = phase.call(window)
puts
puts "#{PARKED} jobs parked behind limit 1, completed one by one (release -> hand-over -> fetch -> acquire):"
puts format("  first %d completions (~%d parked): %.2f Redis cmds/job, %.2f us server per script call",
            window, PARKED, first_cmds, first_us)
puts format("  last  %d completions (~%d parked): %.2f Redis cmds/job, %.2f us server per script call",
            window, window, last_cmds, last_us)
require_relative "fair"
require_relative "redis_paths"
server.stop
