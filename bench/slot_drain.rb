# frozen_string_literal: true

# The drain figure of bin/bench's perform section alone, repeated: a real `sidekiq -c 10` draining no-op jobs on a
# plain queue, without slots and with `fair_tenant_concurrency: { limit: 1000 }`, the two taking turns (ROUNDS
# pairs), each on a flushed private redis-server. Prints for each run jobs/s and, per job, Redis CPU (INFO cpu),
# Redis commands (those inside scripts included), script calls, the sidekiq process's CPU (/proc), and Redis's µs
# per script call; then the medians and their ratios.
#
#   bundle exec ruby bench/slot_drain.rb                      # PERFORMS=10000 ROUNDS=3
#   BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile bundle exec ruby bench/slot_drain.rb
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "etc"
require "logger"
require_relative "../spec/support/redis_server"

server = RedisServer.new.start
ENV["REDIS_URL"] = server.url
require "sidekiq"
require "sidekiq/fair_tenant"
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
Sidekiq.logger.level = Logger::WARN
Sidekiq.configure_client { |c| c.redis = { url: server.url, size: 10 } }
require_relative "../spec/support/sidekiq_process"
require_relative "perform_app"

PERFORMS = Integer(ENV.fetch("PERFORMS", "10000"))
ROUNDS = Integer(ENV.fetch("ROUNDS", "3"))
redis = Redis.new(url: server.url)

cpu = lambda do
  info = redis.info("cpu")
  (info["used_cpu_sys"].to_f + info["used_cpu_user"].to_f) * 1e6
end
commands = lambda do
  stats = redis.info("commandstats")
  [stats.sum { |name, v| name.start_with?("info", "config") ? 0 : v["calls"].to_i },
   stats.sum { |name, v| name.start_with?("eval") ? v["calls"].to_i : 0 }]
end

# CPU µs the sidekiq process has used (user + system, from /proc).
process_cpu = lambda do |pid|
  fields = File.read("/proc/#{pid}/stat").split(") ").last.split
  (fields[11].to_i + fields[12].to_i) * 1e6 / Etc.sysconf(Etc::SC_CLK_TCK)
end

drain = lambda do |job_class|
  redis.flushdb
  redis.config("resetstat")
  sidekiq = SidekiqProcess.new(redis_url: server.url, concurrency: 10,
                               app: File.expand_path("perform_app.rb", __dir__)).start
  sleep 0.05 until redis.scard("processes").positive? # booted and fetching
  cpu_before = cpu.call
  sidekiq_cpu = process_cpu.call(sidekiq.pid)
  cmds_before = commands.call
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  Sidekiq::Client.push_bulk("class" => job_class, "args" => Array.new(PERFORMS) { |i| [i] }, "fair_tenant" => "bench")
  sleep 0.01 until redis.get("bench:done").to_i >= PERFORMS
  elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  cmds_after = commands.call
  script_us = redis.info("commandstats").fetch("evalsha", {})["usec_per_call"].to_f
  result = { rate: PERFORMS / elapsed, cpu_us: (cpu.call - cpu_before) / PERFORMS,
             cmds: (cmds_after[0] - cmds_before[0]).to_f / PERFORMS,
             scripts: (cmds_after[1] - cmds_before[1]).to_f / PERFORMS,
             sidekiq_cpu_us: (process_cpu.call(sidekiq.pid) - sidekiq_cpu) / PERFORMS, script_us: script_us }
  sidekiq.stop
  result
end

median = ->(xs) { xs.sort[xs.size / 2] }
drain.call(BenchNoopJob) # warm up the OS caches
runs = { plain: [], slots: [] }
ROUNDS.times do
  runs[:plain] << drain.call(BenchNoopJob)
  runs[:slots] << drain.call(BenchNoopSlotJob)
  puts format("plain %.0f jobs/s, per job %.1f µs Redis CPU %.1f cmds %.2f scripts %.0f µs sidekiq CPU " \
              "(%.1f µs per script) | slots %.0f jobs/s, %.1f µs %.1f cmds %.2f scripts %.0f µs (%.1f µs)",
              *runs[:plain].last.values, *runs[:slots].last.values)
end
plain = runs[:plain].map { |r| r[:rate] }
slots = runs[:slots].map { |r| r[:rate] }
plain_cpu = median.call(runs[:plain].map { |r| r[:cpu_us] })
slot_cpu = median.call(runs[:slots].map { |r| r[:cpu_us] })
puts format("median: %<plain>.0f jobs/s plain, %<slots>.0f with slots (%<ratio>.2fx); " \
            "Redis CPU per job %<plain_cpu>.1f → %<slot_cpu>.1f µs (%<cpu_ratio>.2fx)",
            plain: median.call(plain), slots: median.call(slots), ratio: median.call(slots) / median.call(plain),
            plain_cpu: plain_cpu, slot_cpu: slot_cpu, cpu_ratio: slot_cpu / plain_cpu)
server.stop
