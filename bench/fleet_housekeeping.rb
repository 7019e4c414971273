# frozen_string_literal: true

# Recovery housekeeping's Redis work per Recovery::INTERVAL for a whole fleet of 10 and 500 registered processes
# (fake ones, registered as Sidekiq does: an identity hash expiring in 60 s, in the fair fetch registry), before
# and after issue 22: "before" replays the commands every process sent per interval until then (each swept under
# the lock it freed when done: SMEMBERS, TIME, HGETALL, one EXISTS per registered process), "after" runs this
# code (every process tries the fleet's lease once, Sweeper.turn: one takes it and sweeps). Both count each
# process's liveness beats (Liveness::EVERY). Part of bin/bench (bench/run.rb requires it), or alone:
#
#   bundle exec ruby bench/fleet_housekeeping.rb
#   BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile bundle exec ruby bench/fleet_housekeeping.rb
if File.expand_path($PROGRAM_NAME) == File.expand_path(__FILE__) # alone, not from bench/run.rb
  $LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
  require "logger"
  require_relative "../spec/support/redis_server"
  FLEET_SERVER = RedisServer.new.start
  ENV["REDIS_URL"] = FLEET_SERVER.url
  require "sidekiq"
  require "sidekiq/fair_tenant"
  Sidekiq.logger.level = Logger::WARN
  Sidekiq.configure_client { |c| c.redis = { url: FLEET_SERVER.url, size: 5 } }
  at_exit { FLEET_SERVER.stop }
end

# Helpers of the fleet housekeeping benchmark.
module FleetHousekeeping
  FLEETS = [10, 500].freeze
  Recovery = Sidekiq::FairTenant::FairQueues::Recovery
  Liveness = Sidekiq::FairTenant::FairQueues::Liveness
  Sweeper = Sidekiq::FairTenant::FairFetch::Sweeper

  module_function

  def call(*args) = Sidekiq.redis { |conn| conn.call(*args) }

  def register(count)
    Array.new(count) do |i|
      identity = format("bench-host-%<i>d:%<pid>d:%<nonce>06x", i: i, pid: 1000 + i, nonce: i)
      call("HSET", identity, "beat", Time.now.to_f.to_s, "busy", "0")
      call("EXPIRE", identity, 60)
      call("SADD", Recovery::REGISTRY, identity)
      identity
    end
  end

  # {command => calls} from INFO commandstats (commands run inside scripts included).
  def stats
    info = Sidekiq.redis { |conn| conn.call("INFO", "commandstats") }
    info.scan(/^cmdstat_(\w+):calls=(\d+)/).to_h.transform_values(&:to_i)
  end

  # [commands, EXISTS, wall ms of the slowest process's turn] of the block, INFO itself left out.
  def measured
    before = stats
    walls = yield
    after = stats
    delta = after.to_h { |cmd, calls| [cmd, calls - before.fetch(cmd, 0)] }
    delta["info"] = delta.fetch("info", 1) - 1
    [delta.values.sum, delta.fetch("exists", 0), walls.max * 1000]
  end

  def timed
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    yield
    Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  end

  # One process's sweep as it ran until issue 22 (recovery.rb's look, judge and lock, its Redis commands).
  def sweep_before(conn, own)
    return unless conn.call("SET", Recovery::LOCK, own, "NX", "EX", Recovery::INTERVAL)

    identities = conn.call("SMEMBERS", Recovery::REGISTRY) - [own]
    conn.call("TIME")
    conn.call("HGETALL", Recovery::SUSPECTS)
    identities.each { |identity| conn.call("EXISTS", identity) }
  ensure
    conn.call("DEL", Recovery::LOCK) if identities
  end

  def beats(identities)
    (Recovery::INTERVAL.fdiv(Liveness::EVERY).ceil * identities.size).tap do |count|
      count.times { |i| Liveness.alive(identities[i % identities.size]) }
    end
  end

  def interval(identities, mode)
    call("DEL", Sweeper::LEASE, Recovery::LOCK)
    measured do
      walls = identities.map do |identity|
        timed do
          Sidekiq.redis { |conn| mode == :before ? sweep_before(conn, identity) : Sweeper.turn(conn, identity) }
        end
      end
      beats(identities)
      walls
    end
  end

  # Prints the table; returns {processes => {commands:, before:}} per interval (after, and before issue 22).
  def report
    figures = {}
    puts
    puts "Recovery housekeeping per #{Recovery::INTERVAL} s interval, whole fleet (fake processes registered as " \
         "Sidekiq does; liveness beats every #{Liveness::EVERY} s included; commands counted by Redis, those " \
         "inside scripts included):"
    puts format("  %9s %-7s %12s %10s %12s %16s", "processes", "code", "Redis cmds", "EXISTS", "cmds/process",
                "slowest turn ms")
    FLEETS.each do |count|
      call("FLUSHDB")
      identities = register(count)
      %i[before after].each do |mode|
        commands, exists, wall = interval(identities, mode)
        (figures[count] ||= {})[mode == :after ? :commands : :before] = commands
        puts format("  %9d %-7s %12d %10d %12.1f %16.2f", count, mode, commands, exists, commands.fdiv(count), wall)
      end
    end
    puts "  before: every process swept (one EXISTS per registered process, on a fetching thread); after: one sweep"
    puts "  per interval for the fleet (one liveness script call per #{Recovery::BATCH} processes), on its own thread."
    figures
  end
end

FleetHousekeeping.report if File.expand_path($PROGRAM_NAME) == File.expand_path(__FILE__)
