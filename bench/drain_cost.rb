# frozen_string_literal: true

# A real `sidekiq -c 10` draining no-op jobs of 50 tenants, BasicFetch against FairFetch, at ~1 KB and ~200 KB
# of arguments, and a fair queue's capped tenant (a limit never reached) against an uncapped one: jobs/s from
# the first push to the last job done, and per job the Redis server's CPU (used_cpu_user + sys), its commands
# and their time (INFO commandstats, reset after boot: commands inside a script are counted, and timed, both
# on their own and inside the script's call). A private redis-server; rounds alternate, best of ROUNDS.
# Run from a checkout's root (its lib, its compiled extension): `bundle exec ruby bench/drain_cost.rb`.
ROOT = Dir.pwd
$LOAD_PATH.unshift(File.join(ROOT, "lib"))
require "logger"
require File.join(ROOT, "spec/support/redis_server")
require File.join(ROOT, "spec/support/sidekiq_process")

server = RedisServer.new.start
at_exit { server.stop }
ENV["REDIS_URL"] = server.url
require "sidekiq"
require "sidekiq/fair_tenant"
require File.join(ROOT, "bench/perform_app")
Sidekiq.configure_client { |c| c.redis = { url: server.url } }

ROUNDS = Integer(ENV.fetch("ROUNDS", "2"))
TENANTS = Array.new(50) { |i| "tenant-#{i}" }.freeze
OWN = %w[info config get flushdb].freeze # this script's own commands

def redis = @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"))

def cpu
  info = redis.info("cpu")
  info["used_cpu_user"].to_f + info["used_cpu_sys"].to_f
end

def start_sidekiq(fair)
  redis.flushdb
  env = fair ? { "SIDEKIQ_FAIR_TENANT_FAIR_QUEUES" => "default" } : {}
  sidekiq = SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: 10, env: env,
                               app: File.join(ROOT, "bench/perform_app.rb")).start
  sleep 0.05 until redis.scard("processes").positive?
  Sidekiq::FairTenant.configure { |c| c.fair_queues = fair ? %w[default] : [] }
  redis.call("CONFIG", "RESETSTAT")
  sidekiq
end

def push_and_wait(job_class, jobs, arg)
  jobs.times.each_slice(100) do |slice|
    Sidekiq::Client.push_bulk("class" => job_class, "args" => slice.map { |i| [i, arg] },
                              "fair_tenant" => TENANTS[slice.first / 100 % TENANTS.size])
  end
  sleep 0.005 until redis.get("bench:done").to_i >= jobs
end

def per_job(jobs, elapsed, cpu_used)
  stats = redis.info("commandstats").except(*OWN)
  total = ->(names) { names.sum { |name| stats.dig(name, "usec").to_i } }
  { rate: jobs / elapsed, cpu: cpu_used * 1e6 / jobs, commands: stats.sum { |_, s| s["calls"].to_i }.to_f / jobs,
    usec: total.call(stats.keys).to_f / jobs, scripts: total.call(%w[fcall evalsha eval]).to_f / jobs,
    each: stats.transform_values { |s| s["calls"].to_f / jobs } }
end

def drain(fair:, job_class:, jobs:, arg:)
  sidekiq = start_sidekiq(fair)
  cpu_before = cpu
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  push_and_wait(job_class, jobs, arg)
  result = per_job(jobs, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, cpu - cpu_before)
  sidekiq.stop
  result
ensure
  Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
end

def best(runs) = runs.max_by { |r| r[:rate] }

def row(label, run, base = nil)
  ratio = ""
  if base
    ratio = format(" (%<rate>.2fx jobs/s, %<cpu>.2fx CPU, %<usec>.2fx server µs)",
                   rate: run[:rate] / base[:rate], cpu: run[:cpu] / base[:cpu], usec: run[:usec] / base[:usec])
  end
  run = run.except(:each)
  puts format("  %<label>-12s %<rate>7.0f jobs/s  CPU %<cpu>7.1f µs  %<commands>5.1f commands  " \
              "server %<usec>7.1f µs (scripts %<scripts>7.1f)%<ratio>s", label: label, ratio: ratio, **run)
end

{ "~1 KB" => [10_000, "x" * 1_000], "~200 KB" => [Integer(ENV.fetch("BIG_JOBS", "500")), "x" * 200_000] }
  .each do |label, (jobs, arg)|
  drain(fair: false, job_class: BenchNoopJob, jobs: [jobs / 10, 100].max, arg: arg) # warm up
  basic = []
  fair = []
  ROUNDS.times do
    basic << drain(fair: false, job_class: BenchNoopJob, jobs: jobs, arg: arg)
    fair << drain(fair: true, job_class: BenchNoopJob, jobs: jobs, arg: arg)
  end
  puts "#{jobs} no-op jobs of 50 tenants, #{label} argument, sidekiq #{Sidekiq::VERSION}, best of #{ROUNDS}:"
  row("BasicFetch", best(basic))
  row("FairFetch", best(fair), best(basic))
end

capped = best(Array.new(ROUNDS) { drain(fair: true, job_class: BenchNoopSlotJob, jobs: 5_000, arg: "x") })
uncapped = best(Array.new(ROUNDS) { drain(fair: true, job_class: BenchNoopJob, jobs: 5_000, arg: "x") })
puts "a fair queue's capped tenant (limit 1,000, never reached) against an uncapped one, 5,000 jobs:"
row("no limit", uncapped)
row("limit 1,000", capped, uncapped)
puts format("  capped tenant's extra Redis commands per job: %+.1f", capped[:commands] - uncapped[:commands])
extra = capped[:each].to_h { |name, calls| [name, calls - uncapped[:each].fetch(name, 0)] }
extra = extra.reject { |_, d| d.abs < 0.05 }.sort_by { |_, d| -d }
puts "  by command: #{extra.map { |name, d| format("%<name>s %<d>+.2f", name: name, d: d) }.join(", ")}"
