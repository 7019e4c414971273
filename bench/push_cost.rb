# frozen_string_literal: true

# Where a fair push's time goes against a plain Sidekiq push, on a redis-server of its own: pushes/s of plain,
# fair, fair with a re-routing rule (off on the fair queue) and the fair push's Ruby path with a no-op script in
# place of the push script (what Ruby and one EVALSHA cost without the script's work), taking turns in blocks of
# 500 as bench/fair.rb does; the client's user CPU per push; the server time per push (commandstats).
#
#   bundle exec ruby bench/push_cost.rb                                              # Sidekiq 6.4
#   BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile bundle exec ruby bench/push_cost.rb     # Sidekiq 7.3
#   PUSHES=50000 ROUNDS=5 bundle exec ruby bench/push_cost.rb
require "bundler/setup"
require "digest"
require "logger"
require_relative "../spec/support/redis_server"

server = RedisServer.new.start
require "sidekiq"
require "sidekiq/fair_tenant"
Sidekiq.logger.level = Logger::WARN
Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq.configure_client { |c| c.redis = { url: server.url, size: 10 } }
Sidekiq::FairTenant.configure do |c|
  c.redis_url = server.url
  c.fair_queues = %w[bench_fair bench_fair_slow bench_noop]
end

PUSHES = Integer(ENV.fetch("PUSHES", "20000"))
ROUNDS = Integer(ENV.fetch("ROUNDS", "3"))
BLOCK = 500
TENANTS = Array.new(50) { |i| "tenant-#{i}" }.freeze
NOOP_SCRIPT = "return 1"
NOOP = Sidekiq::FairTenant::ScriptRunner::Script.new("noop", Digest::SHA1.hexdigest(NOOP_SCRIPT), NOOP_SCRIPT).freeze

def job_class(name, options)
  Object.const_set(name, Class.new { include Sidekiq::Worker }).tap { |k| k.sidekiq_options(options) }
end

RULES = [{ queue: "bench_fair_slow", threshold: 100, per: 3600 }].freeze
JOBS = {
  plain: job_class(:PushCostPlainJob, queue: "bench_plain"),
  fair: job_class(:PushCostFairJob, queue: "bench_fair"),
  fair_rules: job_class(:PushCostRoutedJob, queue: "bench_fair", fair_tenant_queues: RULES),
  noop_script: job_class(:PushCostNoopJob, queue: "bench_noop")
}.freeze

# The fair push to bench_noop runs `return 1` with the push script's keys and arguments.
Sidekiq::FairTenant::ScriptRunner.singleton_class.prepend(Module.new do
  def run(conn, name, keys, argv)
    queue = argv.size == 3 ? argv[0] : argv[1] # the push script's short form (one job), or its long form
    return super(conn, NOOP, keys, argv) if name == "push" && queue == "bench_noop"

    super
  end
end)

redis = Redis.new(url: server.url)
commandstats = lambda do
  redis.info("commandstats").to_h { |c, v| [c.delete_prefix("cmdstat_"), v.transform_values(&:to_f)] }
end
push = ->(klass, count) { count.times { |i| klass.set(fair_tenant: TENANTS[i % TENANTS.size]).perform_async(i) } }
JOBS.each_value { |klass| push.call(klass, 200) } # loads the scripts

puts "Ruby #{RUBY_VERSION}, Sidekiq #{Sidekiq::VERSION}, redis-server #{redis.info["redis_version"]}, " \
     "#{PUSHES} pushes per mode per round, 1 thread"
ROUNDS.times do |round|
  redis.flushdb
  wall = Hash.new(0.0)
  user = Hash.new(0.0)
  (PUSHES / BLOCK).times do |block|
    JOBS.to_a.rotate(block).each do |mode, klass|
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      utime = Process.times.utime
      push.call(klass, BLOCK)
      user[mode] += Process.times.utime - utime
      wall[mode] += Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    end
  end
  rate = wall.transform_values { |elapsed| PUSHES / elapsed }
  cpu = user.map { |m, s| format("%<m>s %<us>.1f", m: m, us: s * 1e6 / PUSHES) }.join(", ")
  puts format("  round %d, pushes/s: plain %.0f, fair %.0f (%.2fx), fair with a rule %.0f (%.2fx), fair path + no-op " \
              "script %.0f (%.2fx); client user CPU us/push: %s", round + 1, rate[:plain], rate[:fair],
              rate[:fair] / rate[:plain], rate[:fair_rules], rate[:fair_rules] / rate[:plain], rate[:noop_script],
              rate[:noop_script] / rate[:plain], cpu)
end

server_us = JOBS.to_h do |mode, klass|
  redis.call("CONFIG", "RESETSTAT")
  push.call(klass, 2000)
  stats = commandstats.call
  [mode, %w[fcall evalsha lpush sadd].sum { |c| stats.dig(c, "usec").to_f } / 2000]
end
puts "  server us per push (commandstats: FCALL/EVALSHA, or LPUSH + SADD): " \
     "#{server_us.map { |m, us| format("%<m>s %<us>.2f", m: m, us: us) }.join(", ")}"
server.stop
