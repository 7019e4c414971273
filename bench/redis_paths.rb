# frozen_string_literal: true

# Which Redis stack a call on Sidekiq's Redis should take: a no-op script (EVALSHA of `return 0`) and the
# concurrency slot's release (release.lua, its keys and arguments built in Rust) sent through Sidekiq's own pool
# (Ruby, `Sidekiq.redis`) and through the gem's Rust pool (GVL released), 1 and 10 threads, the paths taking turns
# in blocks so that the figures are ratios of one run. Part of bin/bench (bench/run.rb requires it), or alone:
#
#   bundle exec ruby bench/redis_paths.rb
#   BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile bundle exec ruby bench/redis_paths.rb
#   PATH_CALLS=50000 bundle exec ruby bench/redis_paths.rb
if File.expand_path($PROGRAM_NAME) == File.expand_path(__FILE__) # alone, not from bench/run.rb
  $LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
  require "logger"
  require_relative "../spec/support/redis_server"
  PATHS_SERVER = RedisServer.new.start
  ENV["REDIS_URL"] = PATHS_SERVER.url
  require "sidekiq"
  require "sidekiq/fair_tenant"
  Sidekiq.logger.level = Logger::WARN
  Sidekiq.configure_client { |c| c.redis = { url: PATHS_SERVER.url, size: 10 } }
  Sidekiq::FairTenant.configure { |c| c.pool_size = 10 }
  at_exit { PATHS_SERVER.stop }
end

# Helpers of the Redis-paths benchmark.
module RedisPaths
  CALLS = Integer(ENV.fetch("PATH_CALLS", "20000"))
  BLOCK = 1000
  LEASE_MS = 60_000
  LIMIT = 1_000_000
  NOOP = "return 0" # the script behind Native::Client#noop_eval
  SCOPES = Array.new(50) { |i| Sidekiq::FairTenant::Native::Slots.tenant_scope("paths-#{i}", "default") }.freeze

  module_function

  def redis = @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"))
  # No redis_url of its own: on Sidekiq's Redis.
  def slots = Sidekiq::FairTenant.native.slots

  # The native acquire (beforehand) holds as run jid: the same run releases.
  def slot(job)
    Sidekiq::FairTenant::ServerMiddleware::Slot.new(*SCOPES[job % 50], "j#{job}", LEASE_MS, LIMIT, "j#{job}")
  end

  def noop_script
    @noop_script ||= Sidekiq::FairTenant::ScriptRunner::Script.new("noop", redis.script(:load, NOOP), NOOP)
  end

  def noop(conn, key) = Sidekiq::FairTenant::ScriptRunner.run(conn, noop_script, [key], [])

  # What one call does on each path; `i` names the job (and its scope).
  PATHS = {
    "no-op script" => {
      sidekiq: ->(i) { Sidekiq.redis { |c| noop(c, "bench:noop:#{i % 50}") } },
      rust: ->(i) { Sidekiq::FairTenant.native.noop_eval("bench:noop:#{i % 50}") }
    },
    "slot release" => {
      sidekiq: ->(i) { Sidekiq::FairTenant::Concurrency::SlotCalls.release(slot(i)) }, # the server middleware's release
      rust: ->(i) { slots.release(*SCOPES[i % SCOPES.size], "j#{i}", LEASE_MS, LIMIT) }
    }
  }.freeze

  # The slots a block's releases give back, taken beforehand (not timed).
  def hold(from, count)
    count.times { |i| slots.acquire(*SCOPES[(from + i) % SCOPES.size], "j#{from + i}", LEASE_MS, LIMIT, "{}", 0.0) }
  end

  # Wall and CPU time of BLOCK calls split over `threads` threads.
  def block(call, threads, from)
    per_thread = BLOCK / threads
    wall = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
    work = ->(t) { per_thread.times { |i| call.call(from + (t * per_thread) + i) } }
    threads == 1 ? work.call(0) : Array.new(threads) { |t| Thread.new { work.call(t) } }.each(&:join)
    [Process.clock_gettime(Process::CLOCK_MONOTONIC) - wall,
     Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu]
  end

  # Per path: us per call (wall), client CPU us per call, and the median over turns of Sidekiq's block time over
  # the Rust pool's (above 1: the Rust pool is faster).
  def measure(calls, threads, release)
    redis.flushdb
    totals = { sidekiq: [0.0, 0.0, []], rust: [0.0, 0.0, []] }
    (CALLS / BLOCK).times do |turn|
      calls.to_a.rotate(turn).each do |path, call|
        from = ((turn * 2) + (path == :rust ? 1 : 0)) * BLOCK
        hold(from, BLOCK) if release
        wall, cpu = block(call, threads, from)
        totals[path][0] += wall
        totals[path][1] += cpu
        totals[path][2] << wall
      end
    end
    n = (CALLS / BLOCK) * BLOCK.to_f
    ratios = totals[:sidekiq][2].zip(totals[:rust][2]).map { |s, r| s / r }
    totals.transform_values { |wall, cpu, _| [wall * 1e6 / n, cpu * 1e6 / n] }
          .merge(ratio: ratios.sort[ratios.size / 2])
  end

  def report
    200.times { |i| PATHS.each_value { |calls| calls.each_value { |call| call.call(i) } } } # load scripts, connect
    puts
    puts "Sidekiq's Redis through Sidekiq's pool (Ruby, #{Sidekiq.redis_pool.size} connections) vs the gem's " \
         "Rust pool (GVL released, #{Sidekiq::FairTenant.config.pool_size}), #{CALLS} calls per path, turns of " \
         "#{BLOCK}:"
    puts format("  %-13s %7s %14s %14s %16s %16s %14s", "call", "threads", "Sidekiq us/call", "Rust us/call",
                "Sidekiq CPU us", "Rust CPU us", "Rust speed-up")
    PATHS.each do |name, calls|
      [1, 10].each do |threads|
        r = measure(calls, threads, name == "slot release")
        puts format("  %-13s %7d %14.1f %14.1f %16.1f %16.1f %13.2fx", name, threads, r[:sidekiq][0], r[:rust][0],
                    r[:sidekiq][1], r[:rust][1], r[:ratio])
      end
    end
    puts "  us/call: wall time per call; CPU us: this process's CPU per call (all threads); Rust speed-up: the median"
    puts "  over the turns of Sidekiq's block time over the Rust pool's (1.00x: alike)."
  end
end

RedisPaths.report
