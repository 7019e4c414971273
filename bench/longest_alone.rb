# frozen_string_literal: true

# bench/longest.rb alone (bin/bench runs it last, after 15-20 minutes of the rest), on a private redis-server:
#
#   LONGEST_JOBS=1000000 LONGEST_TENANTS=100000 bundle exec ruby bench/longest_alone.rb
#   LONGEST_NICE=-10 ...   # the redis-server at that priority (root only): less preempted on a busy machine
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "logger"
require_relative "../spec/support/redis_server"

server = RedisServer.new.start
ENV["REDIS_URL"] = server.url
require "sidekiq"
require "sidekiq/fair_tenant"
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
Sidekiq.logger.level = Logger::WARN
Sidekiq.configure_client { |c| c.redis = { url: server.url, size: 10 } }
Sidekiq::FairTenant.configure { |c| c.redis_url = server.url }
FAIR_MAX_JOBS = Integer(ENV.fetch("FAIR_MAX_JOBS", "1000000"))

# A fair queue's job.
class BenchFairJob
  include Sidekiq::Worker
  sidekiq_options queue: "bench_fair"
end

require_relative "fair_fill"
require_relative "longest"
if (nice = ENV.fetch("LONGEST_NICE", nil))
  Process.setpriority(Process::PRIO_PROCESS, Integer(FairBench.redis.info("server")["process_id"]), Integer(nice))
end
begin
  LongestBench.print(LongestBench.run)
ensure
  server.stop
end
