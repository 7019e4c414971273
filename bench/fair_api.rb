# frozen_string_literal: true

# What Sidekiq's API and Web UI cost on a large fair backlog (FairQueues::Visibility, FairQueues::Backlog): server time
# per script call (INFO commandstats) and wall time per operation, on a private redis-server.
#
#   bundle exec ruby bench/fair_api.rb                     # 100,000 jobs over 1,000 tenants
#   FAIR_API_JOBS=1000000 FAIR_API_TENANTS=10000 bundle exec ruby bench/fair_api.rb
require_relative "../spec/support/redis_server"

JOBS = Integer(ENV.fetch("FAIR_API_JOBS", "100000"))
TENANTS = Integer(ENV.fetch("FAIR_API_TENANTS", "1000"))
PAUSED = Integer(ENV.fetch("FAIR_API_PAUSED", "100"))

server = RedisServer.new.start
ENV["REDIS_URL"] = server.url
require "sidekiq"
require "sidekiq/api"
require "sidekiq/fair_tenant"
Sidekiq.logger.level = Logger::ERROR
Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[bench] }

FairQueues = Sidekiq::FairTenant::FairQueues
redis = Redis.new(url: server.url)

def job(tenant, index)
  Sidekiq.dump_json("class" => "BenchJob", "queue" => "bench", "args" => [tenant, index],
                    "jid" => "#{tenant}-#{index}", "enqueued_at" => Time.now.to_f, "fair_tenant" => tenant)
end

# PAUSED tenants, paused first (their jobs the oldest), then the rest.
PAUSED.times { |t| Sidekiq::FairTenant.weights.set(0, tenant: "t#{t}") }
per = JOBS / TENANTS
Sidekiq.redis do |conn|
  TENANTS.times do |t|
    per.times.each_slice(1000) do |slice|
      FairQueues.push(conn, "bench", slice.map { |i| ["t#{t}", job("t#{t}", i)] }, Time.now.to_f - 1000 + t)
    end
  end
end

# Script calls, server microseconds per call (INFO commandstats) and the slowest call (SLOWLOG) since the reset.
def script_costs(redis)
  stats = redis.info("commandstats").slice("evalsha", "eval").values
  calls = stats.sum { |s| s["calls"].to_i }
  usec = stats.sum { |s| s["usec"].to_i }
  [calls, usec.fdiv([calls, 1].max), script_durations(redis).max || 0]
end

def script_durations(redis)
  redis.call("SLOWLOG", "GET", 100_000).select { |e| e[3][0].to_s.downcase.start_with?("eval") }.map { |e| e[2] }
end

def measure(redis, label)
  redis.call("CONFIG", "RESETSTAT")
  redis.call("SLOWLOG", "RESET")
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  result = yield
  wall = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) * 1000
  calls, mean, slowest = script_costs(redis)
  puts "#{label.ljust(50)} #{format("%9.1f", wall)} ms wall #{calls.to_s.rjust(6)} script calls " \
       "#{format("%8.1f", mean)} us/call, slowest #{slowest.to_s.rjust(6)} us  => #{result}"
end

redis.call("FUNCTION", "LOAD", "REPLACE", FairQueues::LIBRARY) # no first-call load measured
redis.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
redis.call("CONFIG", "SET", "slowlog-max-len", "100000")
queue = Sidekiq::Queue.new("bench")
base = FairQueues.base("bench")
list = "#{base}#{Sidekiq::FairTenant::Native::Names::TENANT_LIST}"
puts "#{JOBS} jobs over #{TENANTS} tenants (#{PAUSED} paused, the oldest), redis #{redis.info["redis_version"]}"
measure(redis, "Queue#size") { queue.size }
measure(redis, "Queue#count (walks every job)") { queue.count }
measure(redis, "Queue#latency (#{PAUSED} paused tenants passed over)") { queue.latency.round(1) }
action = Object.new.extend(Sidekiq::Paginator)
measure(redis, "Web queue page 1") { action.page("queue:bench", 1, 25)[2].size }
last = JOBS / 25
measure(redis, "Web queue page #{last} (the last)") { action.page("queue:bench", last, 25)[2].size }
measure(redis, "fair_stats.queues (startable, paused, held)") do
  Sidekiq::FairTenant.fair_stats.queues.first.slice(:startable, :paused, :held)
end
newest = "t#{TENANTS - 1}"
measure(redis, "JobRecord#delete, tenant known (its last job)") do
  record = Sidekiq::JobRecord.new(redis.lindex("#{list}#{newest}", -1), "bench")
  record.fair_tenant = newest
  record.delete
end
measure(redis, "JobRecord#delete, tenant unknown (scan)") do
  record = Sidekiq::JobRecord.new(redis.lindex("#{list}#{newest}", -1), "bench")
  record.fair_tenant = "nobody"
  record.delete
end
Sidekiq.redis { |conn| FairQueues.push(conn, "bench", [["solo", job("solo", 0)]]) }
measure(redis, "JobRecord#delete of a tenant's only job (leaves)") do
  record = Sidekiq::JobRecord.new(redis.lindex("#{list}solo", 0), "bench")
  record.fair_tenant = "solo"
  [record.delete, redis.zscore("#{base}#{Sidekiq::FairTenant::Native::Names::HEADS}", "solo")]
end
server.stop
