# frozen_string_literal: true

require_relative "redis_counters"

# What recovery housekeeping costs a fleet per Recovery::INTERVAL, driven as the code runs it today: every process
# sweeps once per interval (Recovery.sweep under the lock, which it frees when done) and beats its liveness every
# Liveness::EVERY seconds. The fleet is faked the way Sidekiq registers processes: the `processes` set and an
# identity hash expiring in 60 s, each identity also in the fair fetch registry (as after its first fetch).
module HousekeepingBench
  FLEETS = [10, 500].freeze
  Recovery = Sidekiq::FairTenant::FairFetch::Recovery
  Liveness = Sidekiq::FairTenant::FairFetch::Liveness

  module_function

  def register(redis, count)
    Array.new(count) do |i|
      identity = format("bench-host-%<i>d:%<pid>d:%<nonce>012x", i: i, pid: 1000 + i, nonce: rand(1 << 48))
      redis.pipelined do |pipe|
        pipe.sadd("processes", identity)
        pipe.hset(identity, "info", JSON.generate("hostname" => "bench-host-#{i}", "identity" => identity),
                  "busy", "0", "beat", Time.now.to_f.to_s, "quiet", "false")
        pipe.expire(identity, 60)
        pipe.sadd(Recovery::REGISTRY, identity)
      end
      identity
    end
  end

  # {processes => {commands:, sweep_commands:, exists:, beats:, sweep_ms:}} per interval of the whole fleet.
  def run(redis)
    FLEETS.to_h do |count|
      redis.flushdb
      [count, interval(redis, register(redis, count))]
    end
  end

  # One interval of a fleet of `identities`: one sweep per process, its liveness beats.
  def interval(redis, identities)
    before = RedisCounters.take(redis)
    walls = sweep_all(identities)
    sweeps = RedisCounters.take(redis).since(before)
    before = RedisCounters.take(redis)
    identities.each { |identity| Liveness.alive(identity) }
    beats = RedisCounters.take(redis).since(before)[:calls] * Recovery::INTERVAL.fdiv(Liveness::EVERY)
    { commands: sweeps[:calls] + beats, sweep_commands: sweeps[:calls], beats: beats,
      exists: sweeps[:by_command].fetch("exists", 0), sweep_ms: walls.sort[walls.size / 2] * 1000,
      sweep_server_ms: sweeps[:usec] / 1000.0 / identities.size }
  end

  # Each process's sweep in turn; the wall time of each.
  def sweep_all(identities)
    identities.map do |identity|
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      Sidekiq.redis { |conn| Recovery.sweep(conn, identity) }
      Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    end
  end

  def print(table)
    puts
    puts "  recovery housekeeping per #{Recovery::INTERVAL} s interval for the whole fleet (every process sweeps " \
         "once, beats every #{Liveness::EVERY} s), fake processes registered as Sidekiq does:"
    puts format("  %9s %14s %14s %8s %12s %16s %18s", "processes", "Redis cmds", "of them sweep", "EXISTS",
                "liveness", "sweep wall ms", "sweep server ms")
    table.each do |count, r|
      puts format("  %9d %14.0f %14d %8d %12.0f %16.2f %18.2f", count, r[:commands], r[:sweep_commands], r[:exists],
                  r[:beats], r[:sweep_ms], r[:sweep_server_ms])
    end
  end
end
