# frozen_string_literal: true

# Rate caps' cost (issue 23 items 2 and 6): fetch + acknowledge, in-process FairFetch, per job: round trips,
# Redis commands (those inside scripts included) and server us (FCALL usec). Rows: 10 and 100,000 backlogged
# tenants, uncapped against every job under a rate cap that never binds (each tenant its own window state: the
# check and the record); then one to 10,000 tenants held by a binding cap, waiting in `rated`, beside 10 uncapped
# ones (what the others' jobs cost then). bin/bench runs it after bench/fair_time.rb; alone:
#
#   bundle exec ruby bench/rate_cost.rb      (RATE_FETCHES: jobs per row, default 2000; RATE_TENANTS: 10,100000)
module RateCostBench
  QUEUE = "rate_bench"
  FETCHES = Integer(ENV.fetch("RATE_FETCHES", "2000"))
  TENANTS = ENV.fetch("RATE_TENANTS", "10,100000").split(",").map { |n| Integer(n) }
  HELD = [1, 10, 1_000, 10_000].freeze
  # A window that never binds, and one that holds a tenant for an hour after its first start.
  LOOSE = [1_000_000, 1000].freeze
  HOUR = [1, 3_600_000].freeze

  module_function

  def redis = @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"))
  def names = Sidekiq::FairTenant::Native::Names

  # { [row, tenants] => { round_trips:, commands:, server_us: } }; row: :uncapped, :capped or :held (tenants:
  # those held in rated).
  def run
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [QUEUE] }
    out = TENANTS.product(%i[uncapped capped]).to_h do |tenants, row|
      redis.flushdb
      fill(backlog(tenants, [tenants, FETCHES].max + FETCHES + 10, row == :capped ? LOOSE : nil))
      [[row, tenants], cost]
    end
    HELD.each { |held| out[[:held, held]] = held_cost(held) }
    out
  end

  def print(figures)
    puts
    puts "  rate caps (#{QUEUE}), in-process FairFetch, #{FETCHES} jobs per cell, fetch + acknowledge per job:"
    puts "  #{" " * 66} #{"round trips".rjust(12)} #{"Redis cmds".rjust(12)} #{"server us".rjust(10)}"
    figures.each do |(row, tenants), c|
      name = { uncapped: "#{tenants} tenants backlogged, no rate cap",
               capped: "#{tenants} tenants backlogged, every job rate-capped (never binding)",
               held: "#{tenants} tenant(s) held in rated, 10 uncapped served" }.fetch(row)
      puts format("  %<name>-66s %<round_trips>12.2f %<commands>12.2f %<server_us>10.1f", name: name, **c)
    end
  end

  # Each tenant capped starts once, then waits an hour in rated; then the uncapped tenants' jobs are measured.
  def held_cost(held)
    redis.flushdb
    fill(backlog(held, held * 2, HOUR, prefix: "r"))
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: [QUEUE])
    rated = Sidekiq::FairTenant::FairQueues.key(QUEUE, names::RATED)
    fetch.retrieve_work&.acknowledge until redis.zcard(rated) == held
    fetch.flush_acks
    fill(backlog(10, FETCHES + 10, nil))
    cost
  end

  def backlog(tenants, jobs, rate, prefix: "t")
    Array.new(jobs) { |i| ["#{prefix}#{i % tenants}", "#{prefix}#{i}"] }.map { |t, jid| [t, job(t, jid, rate)] }
  end

  def job(tenant, jid, rate)
    payload = { "enqueued_at" => 1.0, "jid" => jid }
    if rate
      tag, sub = Sidekiq::FairTenant::Native::Slots.tenant_scope(tenant, QUEUE)
      payload[names::RATE_FIELD] = [tag, sub, *rate]
    end
    JSON.generate(payload.merge("class" => "RateBenchJob", "queue" => QUEUE, "args" => [jid]))
  end

  def fill(pairs)
    Sidekiq.redis { |conn| pairs.each_slice(1000) { |s| Sidekiq::FairTenant::FairQueues.push(conn, QUEUE, s) } }
  end

  def cost
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: [QUEUE])
    fetch.retrieve_work.acknowledge
    before = stats
    FETCHES.times { fetch.retrieve_work.acknowledge }
    after = stats
    fetch.flush_acks
    scripts = %w[calls usec].to_h { |f| [f, script_stat(after, f) - script_stat(before, f)] }
    { round_trips: scripts["calls"].fdiv(FETCHES), commands: (calls(after) - calls(before)).fdiv(FETCHES),
      server_us: scripts["usec"].fdiv(FETCHES) }
  end

  def calls(stats) = stats.sum { |cmd, v| cmd == "info" ? 0 : v["calls"].to_i }
  def script_stat(stats, field) = %w[fcall evalsha].sum { |c| stats.dig(c, field).to_i }

  def stats
    redis.info("commandstats").transform_keys { |cmd| cmd.delete_prefix("cmdstat_") }
  end
end

if $PROGRAM_NAME == __FILE__
  $LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
  require "json"
  require "logger"
  require_relative "../spec/support/redis_server"
  server = RedisServer.new.start
  ENV["REDIS_URL"] = server.url
  require "sidekiq"
  require "sidekiq/fair_tenant"
  Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
  Sidekiq.logger.level = Logger::WARN
  Sidekiq.configure_client { |c| c.redis = { url: server.url, size: 5 } }
  begin
    RateCostBench.print(RateCostBench.run)
  ensure
    server.stop
  end
end
