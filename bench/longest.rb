# frozen_string_literal: true

require "sidekiq/api"
require_relative "longest_setups"

# The longest single command (a script call, mostly) Redis runs for the operations users run on a large fair
# backlog: LONGEST_JOBS waiting jobs over LONGEST_TENANTS tenants, LONGEST_PAUSED of them paused. Durations from
# SLOWLOG (a command's own execution time, no network); commands from INFO commandstats.
module LongestBench
  JOBS = Integer(ENV.fetch("LONGEST_JOBS", [1_000_000, FAIR_MAX_JOBS].min.to_s))
  TENANTS = Integer(ENV.fetch("LONGEST_TENANTS", "100000"))
  PAUSED = Integer(ENV.fetch("LONGEST_PAUSED", (TENANTS / 10).to_s))
  IN_FLIGHT = Integer(ENV.fetch("LONGEST_IN_FLIGHT", "2000")) # a dead process's in-flight jobs, recovered
  SCOPES = Integer(ENV.fetch("LONGEST_SCOPES", "10000")) # concurrency scopes with an expired lease, swept
  QUEUE = "bench_long"
  FairQueues = Sidekiq::FairTenant::FairQueues
  Runner = Sidekiq::FairTenant::ScriptRunner
  # Fair scripts run as functions (FCALL <function>), slot scripts by EVALSHA <sha>.
  NAMES = Runner::SCRIPTS.to_h do |name, script|
    script.function ? [script.function, name] : [script.sha, "slots #{name}"]
  end
  IGNORED = %w[slowlog config info].freeze
  LOGGED = 100 # us: commands as long as this are logged
  LIMIT = 5_000 # us: issue 22's bound on one command

  module_function

  def redis = FairBench.redis

  # {operation => {calls:, longest_us:, command:}}, and :fill / :clear refill the backlog.
  def run
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [QUEUE] }
    redis.call("CONFIG", "SET", "slowlog-max-len", "200000")
    results = {}
    redis.flushdb
    load_scripts
    results["plain push_bulk of 1,000 (Sidekiq's LPUSH)"] = longest { plain_bulk(1_000) }
    results["push_bulk of 1,000 (the fill)"] = longest { FairBench.fill(QUEUE, TENANTS, JOBS) }
    results["pause #{PAUSED} tenants (weight 0)"] = longest { pause }
    operations.each { |name, operation| results[name] = longest(&operation) }
    results.merge(clear, sweep)
  ensure
    redis.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  # The backlog filled anew, then cleared; filled again, a clear cut short after its first call (one tenant)
  # and finished by a sweep (every tenant's last job read against the cut).
  def clear
    redis.flushdb
    FairBench.fill(QUEUE, TENANTS, JOBS)
    results = { "clear (Queue#clear)" => longest { Sidekiq.redis { |conn| FairQueues.clear(conn, QUEUE) } } }
    redis.flushdb
    FairBench.fill(QUEUE, TENANTS, JOBS)
    Sidekiq.redis { |conn| Runner.run(conn, "clear", [], [FairQueues.base(QUEUE), QUEUE, 1, "begin", "cut"]) }
    results.merge("a clear cut short, finished by a sweep" =>
                    longest { Sidekiq.redis { |conn| Sidekiq::FairTenant::FairQueues::Clears.finish(conn) } })
  ensure
    redis.flushdb
  end

  # Loaded from the start: a first call's load (compiling the library or script) is not what is measured.
  def load_scripts
    redis.call("FUNCTION", "LOAD", "REPLACE", FairQueues::LIBRARY)
    Runner::SCRIPTS.each_value { |script| script.function || redis.call("SCRIPT", "LOAD", script.source) }
  end

  def pause
    PAUSED.times { |t| Sidekiq::FairTenant.weights.set(0, tenant: "t#{t * (TENANTS / [PAUSED, 1].max)}") }
  end

  def operations = LongestSetups.operations(QUEUE, TENANTS, IN_FLIGHT)

  # The slot sweep over SCOPES scopes, each with an expired lease and a parked job (on an empty Redis).
  def sweep
    redis.flushdb
    LongestSetups.expired_scopes(SCOPES)
    tags = Sidekiq::FairTenant::Concurrency::SlotCalls::TAGS_KEY
    { "slot sweep (#{SCOPES} scopes, expired)" => longest do
      Sidekiq::FairTenant::Concurrency::SlotCalls.sweep(1_000) while redis.scard(tags).positive?
    end }
  ensure
    redis.flushdb
  end

  def plain_bulk(count)
    Sidekiq::Client.push_bulk("class" => "BenchFairJob", "queue" => "bench_plain", "args" => Array.new(count) { [1] })
  end

  # Runs the block; {calls:, longest_us:, command:, over:} of what it ran: commands (INFO commandstats, those run
  # by scripts included), the longest (SLOWLOG, which keeps those over LOGGED us: no shorter one can be the
  # longest, and the log never overflows) and how many took over LIMIT us (on a shared machine a command
  # preempted by another process logs the time it waited too: one over the limit is a hint, many are a cost).
  def longest
    before = command_calls
    redis.call("CONFIG", "SET", "slowlog-log-slower-than", LOGGED.to_s)
    redis.call("SLOWLOG", "RESET")
    yield
    entries = redis.call("SLOWLOG", "GET", "-1").reject { |e| IGNORED.include?(e[3][0].to_s.downcase) }
    slowest = entries.max_by { |e| e[2] }
    { calls: command_calls - before, longest_us: slowest ? slowest[2] : 0, command: slowest && describe(slowest[3]),
      over: entries.count { |e| e[2] > LIMIT } }
  ensure
    redis.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
  end

  def command_calls
    redis.info("commandstats").sum { |name, stats| IGNORED.include?(name) ? 0 : stats["calls"].to_i }
  end

  def describe(args)
    command = args[0].to_s.downcase
    return command unless %w[evalsha fcall].include?(command)

    NAMES.fetch(args[1].to_s, "script #{args[1].to_s[0, 8]}")
  end

  def print(results)
    puts
    puts format("  the longest command per operation (SLOWLOG), %d jobs waiting over %d tenants, %d paused:",
                JOBS, TENANTS, PAUSED)
    puts format("  %-48s %9s %11s %8s  %s", "operation", "commands", "longest us", "> 5 ms", "which")
    results.each do |name, r|
      puts format("  %-48s %9d %11d %8d  %s", name, r[:calls], r[:longest_us], r[:over], r[:command])
    end
  end
end
