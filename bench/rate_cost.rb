# frozen_string_literal: true

# Rate caps' cost (issue 23 item 2): fetch + acknowledge, in-process FairFetch on a private redis-server, per job:
# round trips, Redis commands (those inside scripts included) and server us (FCALL usec). Rows: no rate cap; every
# job under a rate cap that never binds (the check and the record); one tenant held by a binding cap beside
# uncapped ones, and 10 / 1,000 / 10,000 tenants waiting in `rated` (what the others' jobs cost then).
#
#   bundle exec ruby bench/rate_cost.rb      (RATE_FETCHES: jobs per row, default 2000)
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
Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[rate_bench] }

FETCHES = Integer(ENV.fetch("RATE_FETCHES", "2000"))
QUEUE = "rate_bench"
NAMES = Sidekiq::FairTenant::Native::Names

# Redis work per job, from INFO commandstats.
module RateBench
  module_function

  def redis = @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"))

  def stats = redis.info("commandstats")

  def job(tenant, jid, rate)
    payload = { "enqueued_at" => 1.0, "jid" => jid }
    if rate
      tag, sub = Sidekiq::FairTenant::Native::Slots.tenant_scope(tenant, QUEUE)
      payload[NAMES::RATE_FIELD] = [tag, sub, *rate]
    end
    JSON.generate(payload.merge("class" => "RateBenchJob", "queue" => QUEUE, "args" => [jid]))
  end

  def fill(pairs)
    Sidekiq.redis { |conn| pairs.each_slice(100) { |s| Sidekiq::FairTenant::FairQueues.push(conn, QUEUE, s) } }
  end

  def cost
    fetch = Sidekiq::FairTenant::FairFetch.new(queues: [QUEUE])
    fetch.retrieve_work.acknowledge
    before = stats
    FETCHES.times { fetch.retrieve_work.acknowledge }
    after = stats
    fetch.flush_acks
    calls = ->(s) { s.sum { |cmd, v| cmd == "info" ? 0 : v["calls"].to_i } }
    { trips: (after.dig("fcall", "calls").to_i - before.dig("fcall", "calls").to_i).fdiv(FETCHES),
      commands: (calls.call(after) - calls.call(before)).fdiv(FETCHES),
      us: (after.dig("fcall", "usec").to_i - before.dig("fcall", "usec").to_i).fdiv(FETCHES) }
  end
end

uncapped = ->(n) { Array.new(n) { |i| ["t#{i % 10}", RateBench.job("t#{i % 10}", "j#{i}", nil)] } }
capped = lambda do |n, windows|
  Array.new(n) { |i| ["t#{i % 10}", RateBench.job("t#{i % 10}", "j#{i}", windows)] }
end
# name => [jobs pushed first (each capped tenant starts once, then waits an hour in rated), tenants held, jobs]
rows = {
  "no rate cap, 10 tenants" => [[], 0, uncapped],
  "every job capped, 1 window, never binding" => [[], 0, ->(n) { capped.call(n, [1_000_000, 1000]) }],
  "every job capped, 2 windows, never binding" =>
    [[], 0, ->(n) { capped.call(n, [1_000_000, 1000, 10_000_000, 86_400_000]) }]
}
[1, 10, 1_000, 10_000].each do |held|
  warm = Array.new(held * 2) { |i| ["r#{i % held}", RateBench.job("r#{i % held}", "r#{i}", [1, 3_600_000])] }
  rows["#{held} tenant(s) held in rated, 10 uncapped"] = [warm, held, uncapped]
end

puts "rate caps, fetch + ack per job                  round trips   Redis cmds  server us"
rated = Sidekiq::FairTenant::FairQueues.key(QUEUE, NAMES::RATED)
rows.each do |name, (warm, held, pairs)|
  RateBench.redis.flushdb
  unless warm.empty?
    RateBench.fill(warm)
    f = Sidekiq::FairTenant::FairFetch.new(queues: [QUEUE])
    f.retrieve_work&.acknowledge until RateBench.redis.zcard(rated) == held
    f.flush_acks
  end
  RateBench.fill(pairs.call(FETCHES + 10))
  c = RateBench.cost
  puts format("%<name>-46s %<trips>12.2f %<commands>12.2f %<us>10.1f", name: name, **c)
end
server.stop
