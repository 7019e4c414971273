# frozen_string_literal: true

require "bundler/setup"
require "redis"
require_relative "../spec/support/redis_server"

# The floor under any fair fetch done in a Redis function: what a call costs Redis before it does the gem's work.
# On a redis-server of its own, one client calls one at a time (as a fetching thread does), against a backlog of
# 1 KB jobs: BasicFetch's BRPOP; a function that returns at once; one that moves a job with one LMOVE (the least
# a reliable fetch does); and one that does the least a fair, reliable fetch must (take the first tenant of a
# ZSET, pop its job, put the tenant back at its next tag, push the job to an in-flight list, drop the previous
# job's in-flight entry: 5 commands). Printed per call, and as ratios to BRPOP: calls/s, Redis CPU
# (used_cpu_user + used_cpu_sys), server time (commandstats of the outer command).
#
#   bundle exec ruby bench/fetch_floor.rb
#   FLOOR_CALLS=50000 bundle exec ruby bench/fetch_floor.rb
module FetchFloor
  CALLS = Integer(ENV.fetch("FLOOR_CALLS", "20000"))
  ROUNDS = Integer(ENV.fetch("FLOOR_ROUNDS", "3"))
  TENANTS = 50
  JOB = "x" * 1024
  LIBRARY = <<~LUA
    #!lua name=fetch_floor
    redis.register_function('noop', function() return 1 end)
    redis.register_function('move', function(keys) return redis.call('LMOVE', keys[1], keys[2], 'RIGHT', 'LEFT') end)
    redis.register_function('fair', function(keys, argv)
      local top = redis.call('ZRANGE', keys[1], 0, 0, 'WITHSCORES')
      local job = redis.call('LPOP', keys[3] .. top[1])
      redis.call('ZADD', keys[1], tonumber(top[2]) + 1, top[1])
      redis.call('LPUSH', keys[2], job)
      redis.call('LREM', keys[2], -1, argv[1])
      return job
    end)
  LUA

  BASE = "BasicFetch (BRPOP)"
  FAIR_TURN = "function: 5-command fair turn"
  VARIANTS = {
    BASE => ->(r, _prev) { r.brpop("queue:plain", timeout: 1)[1] },
    "function: return 1" => ->(r, _prev) { r.call("FCALL", "noop", 0) },
    "function: 1 LMOVE" => ->(r, _prev) { r.call("FCALL", "move", 2, "queue:plain", "inflight") },
    FAIR_TURN => ->(r, prev) { r.call("FCALL", "fair", 3, "floor:tenants", "inflight", "floor:jobs:", prev || "") }
  }.freeze
  OUTER = { BASE => "brpop" }.freeze

  module_function

  def fill(redis)
    redis.flushall
    redis.pipelined { |p| CALLS.times { p.lpush("queue:plain", JOB) } }
    redis.pipelined do |p|
      TENANTS.times do |t|
        p.zadd("floor:tenants", 0, "tenant#{t}")
        ((CALLS / TENANTS) + 2).times { p.rpush("floor:jobs:tenant#{t}", JOB) }
      end
    end
  end

  def cpu(redis)
    info = redis.info("cpu")
    info["used_cpu_user"].to_f + info["used_cpu_sys"].to_f
  end

  def server_us(redis, command)
    stats = redis.call("INFO", "commandstats")
    line = stats.lines.find { |l| l.start_with?("cmdstat_#{command}:") } or return 0.0
    line[/usec=(\d+)/, 1].to_f
  end

  def measure(redis, name, step)
    fill(redis)
    redis.call("CONFIG", "RESETSTAT")
    cpu_before = cpu(redis)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    prev = nil
    CALLS.times { prev = step.call(redis, prev) }
    wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    { rate: CALLS / wall, cpu_us: (cpu(redis) - cpu_before) * 1e6 / CALLS,
      server_us: server_us(redis, OUTER.fetch(name, "fcall")) / CALLS }
  end

  def run
    server = RedisServer.new.start
    redis = Redis.new(url: server.url)
    redis.call("FUNCTION", "LOAD", "REPLACE", LIBRARY)
    rows = Hash.new { |h, k| h[k] = [] }
    ROUNDS.times { VARIANTS.each { |name, step| rows[name] << measure(redis, name, step) } }
    rows.transform_values { |runs| median_of(runs) }
  ensure
    server&.stop
  end

  def median_of(runs)
    runs.first.keys.to_h { |key| [key, runs.map { |r| r[key] }.sort[runs.size / 2]] }
  end

  def report(rows)
    base = rows.fetch(BASE)
    puts format("the floor of a fetch in a Redis function (1 KB jobs, one client, %d calls, median of %d rounds)",
                CALLS, ROUNDS)
    puts format("  %-30s %10s %8s %14s %8s %12s %8s", "", "calls/s", "ratio", "Redis CPU us", "ratio",
                "server us", "ratio")
    rows.each do |name, r|
      puts format("  %-30s %10.0f %7.2fx %14.1f %7.2fx %12.2f %7.2fx", name, r[:rate], r[:rate] / base[:rate],
                  r[:cpu_us], r[:cpu_us] / base[:cpu_us], r[:server_us], r[:server_us] / base[:server_us])
    end
  end
end

FetchFloor.report(FetchFloor.run) if $PROGRAM_NAME == __FILE__
