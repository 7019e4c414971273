# frozen_string_literal: true

require "sidekiq/api"

# The longest single command (a script call, mostly) Redis runs for the operations users run on a large fair
# backlog: LONGEST_JOBS waiting jobs over LONGEST_TENANTS tenants, LONGEST_PAUSED of them paused. Durations from
# SLOWLOG with slowlog-log-slower-than 0 (every command logged, its own execution time, no network).
module LongestBench
  JOBS = Integer(ENV.fetch("LONGEST_JOBS", [1_000_000, FAIR_MAX_JOBS].min.to_s))
  TENANTS = Integer(ENV.fetch("LONGEST_TENANTS", "100000"))
  PAUSED = Integer(ENV.fetch("LONGEST_PAUSED", (TENANTS / 10).to_s))
  QUEUE = "bench_long"
  FairQueues = Sidekiq::FairTenant::FairQueues
  NAMES = FairQueues::SCRIPTS.to_h { |name, (sha, _)| [sha, name] }
  # SLOWLOG keeps an argument's first 128 bytes: enough to tell the sources apart.
  SOURCES = FairQueues::SCRIPTS.to_h { |name, (_, source)| [source.b[0, 100], name] }
  IGNORED = %w[slowlog config info].freeze

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
    results.merge(clear)
  ensure
    redis.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  # The backlog filled anew, then cleared.
  def clear
    redis.flushdb
    FairBench.fill(QUEUE, TENANTS, JOBS)
    { "clear (Queue#clear)" => longest { Sidekiq.redis { |conn| FairQueues.clear(conn, QUEUE) } } }
  ensure
    redis.flushdb
  end

  # EVALSHA from the start: a first call's EVAL (compiling the script) is not what is measured.
  def load_scripts
    FairQueues::SCRIPTS.each_value { |_, source| redis.call("SCRIPT", "LOAD", source) }
  end

  def pause
    PAUSED.times { |t| Sidekiq::FairTenant.weights.set(0, tenant: "t#{t * (TENANTS / [PAUSED, 1].max)}") }
  end

  def operations
    { "stats (fair_stats.queues, .queue)" => -> { [fair_stats.queues, fair_stats.queue(QUEUE)] },
      "Queue#size, #latency" => -> { Sidekiq::Queue.new(QUEUE).then { |q| [q.size, q.latency] } },
      "push (100 single jobs)" => -> { push(100) },
      "fetch + ack (500 jobs, FairFetch)" => -> { fetch_and_ack(500) },
      "adopt (1,000 jobs from queue:<name>)" => -> { adopt(1_000) },
      "delete, tenant known" => -> { delete("t#{TENANTS - 1}", "t#{TENANTS - 1}") },
      "delete, tenant unknown (scan)" => -> { delete("t#{TENANTS - 2}", "nobody") },
      "fair-off drain (FairQueues.drain)" => -> { Sidekiq.redis { |conn| FairQueues.drain(conn, QUEUE) } } }
  end

  def fair_stats = Sidekiq::FairTenant.fair_stats

  def plain_bulk(count)
    Sidekiq::Client.push_bulk("class" => "BenchFairJob", "queue" => "bench_plain", "args" => Array.new(count) { [1] })
  end

  def push(count)
    count.times do |i|
      Sidekiq::Client.push("class" => "BenchFairJob", "queue" => QUEUE, "args" => [i], "fair_tenant" => "t#{i}")
    end
  end

  # Deletes the last job of `owner` (Sidekiq::JobRecord#delete's path), looked for in `tenant`'s list first.
  def delete(owner, tenant)
    job = redis.lindex("#{FairQueues.base(QUEUE)}#{Sidekiq::FairTenant::Native::Names::TENANT_LIST}#{owner}", -1)
    Sidekiq::FairTenant::FairBacklog.delete(QUEUE, job, tenant)
  end

  def fetch_and_ack(count)
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: [QUEUE])
    count.times { fetch.retrieve_work&.acknowledge }
    fetch.flush_acks
  ensure
    Sidekiq::FairTenant::Slots.stop
  end

  def adopt(count)
    raw = '{"class":"BenchFairJob","queue":"%s","args":[%d],"jid":"a%d","fair_tenant":"t%d"}'
    redis.lpush("queue:#{QUEUE}", Array.new(count) { |i| format(raw, QUEUE, i, i, i % TENANTS) })
    Sidekiq.redis do |conn|
      loop { break unless FairQueues.adopt(conn, QUEUE, Sidekiq::FairTenant::FairFetch::ADOPT_BATCH).positive? }
    end
  end

  # Runs the block with every command logged; {calls:, longest_us:, command:} of what it ran.
  def longest
    redis.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    redis.call("SLOWLOG", "RESET")
    yield
    entries = redis.call("SLOWLOG", "GET", "200000").reject { |e| IGNORED.include?(e[3][0].to_s.downcase) }
    slowest = entries.max_by { |e| e[2] }
    { calls: entries.size, longest_us: slowest ? slowest[2] : 0, command: slowest && describe(slowest[3]) }
  ensure
    redis.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
  end

  def describe(args)
    command = args[0].to_s.downcase
    return command unless command.start_with?("eval")

    return SOURCES.fetch(args[1].to_s.b[0, 100], "eval") if command == "eval"

    NAMES.fetch(args[1].to_s, "script #{args[1].to_s[0, 8]}")
  end

  def print(results)
    puts
    puts format("  the longest command per operation (SLOWLOG, every command logged), %d jobs waiting over %d " \
                "tenants, %d paused:", JOBS, TENANTS, PAUSED)
    puts format("  %-40s %9s %14s  %s", "operation", "commands", "longest us", "which")
    results.each do |name, r|
      puts format("  %-40s %9d %14d  %s", name, r[:calls], r[:longest_us], r[:command])
    end
  end
end
