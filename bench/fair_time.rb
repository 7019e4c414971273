# frozen_string_literal: true

# What fair by worker time costs: fetch + acknowledge through an in-process FairFetch, one job after the other (the
# acknowledgement, with its run time, rides with the next fetch), on a queue by job count against the same queue
# by worker time (`queue:time`), as backlogged tenants grow. Round trips, Redis commands (inside scripts included)
# and server us (FCALL/EVALSHA usec) per job. bin/bench runs it after bench/fair.rb's fetch table; alone:
#
#   bundle exec ruby bench/fair_time.rb                  # 2,000 jobs per cell; FAIR_TIME_FETCHES to change
module FairTimeBench
  QUEUE = "bench_time"
  FETCHES = Integer(ENV.fetch("FAIR_TIME_FETCHES", "2000"))
  CELLS = [10, 1_000, 100_000].freeze

  module_function

  def redis = @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"))

  # { [mode, tenants] => { round_trips:, commands:, server_us: } }
  def run
    CELLS.product(%w[jobs time]).to_h do |tenants, mode|
      redis.flushdb
      Sidekiq::FairTenant.configure { |c| c.fair_queues = [{ QUEUE => mode }] }
      fill(tenants, [tenants, FETCHES].max * 2)
      [[mode, tenants], fetch_cost]
    end
  end

  def print(figures)
    puts
    puts format("  by job count against by worker time (%s:time), in-process FairFetch, %d jobs per cell, " \
                "every tenant backlogged: per job", QUEUE, FETCHES)
    puts "    tenants mode    round trips   Redis cmds    server us"
    figures.each do |(mode, tenants), cost|
      row = { tenants: tenants, mode: mode, trips: cost[:round_trips], cmds: cost[:commands], us: cost[:server_us] }
      puts format("  %<tenants>9d %<mode>-6s %<trips>12.2f %<cmds>12.2f %<us>12.1f", row)
    end
  end

  def fill(tenants, jobs)
    payload = '{"class":"BenchFairJob","queue":"%s","args":[%d],"jid":"%d"}'
    Sidekiq.redis do |conn|
      (0...jobs).each_slice(1000) do |slice|
        pairs = slice.map { |i| ["t#{i % tenants}", format(payload, QUEUE, i, i)] }
        Sidekiq::FairTenant::FairQueues.push(conn, QUEUE, pairs)
      end
    end
  end

  def fetch_cost
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: [QUEUE])
    fetch.retrieve_work.acknowledge # registers, loads the scripts
    cost = measure { FETCHES.times { fetch.retrieve_work.acknowledge } }
    fetch.flush_acks
    cost
  end

  def measure
    before = stats
    yield
    after = stats
    calls = ->(s) { s.sum { |cmd, v| cmd == "info" ? 0 : v["calls"] } }
    scripts = %w[calls usec].to_h do |f|
      [f, %w[fcall evalsha].sum { |c| after.dig(c, f).to_i - before.dig(c, f).to_i }]
    end
    { round_trips: scripts["calls"].fdiv(FETCHES), commands: (calls.call(after) - calls.call(before)).fdiv(FETCHES),
      server_us: scripts["usec"].fdiv(FETCHES) }
  end

  def stats
    redis.info("commandstats").to_h { |cmd, v| [cmd.delete_prefix("cmdstat_"), v.transform_values(&:to_f)] }
  end
end

if $PROGRAM_NAME == __FILE__
  require_relative "../spec/support/redis_server"
  server = RedisServer.new.start
  ENV["REDIS_URL"] = server.url
  require "sidekiq"
  require "sidekiq/fair_tenant"
  Sidekiq.logger.level = Logger::ERROR
  Sidekiq.configure_client { |c| c.redis = { url: server.url } }
  begin
    FairTimeBench.print(FairTimeBench.run)
  ensure
    Sidekiq::FairTenant::Concurrency::Slots.stop if defined?(Sidekiq::FairTenant::Concurrency::Slots)
    server.stop
  end
end
