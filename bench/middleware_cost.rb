# frozen_string_literal: true

# The re-routing client middleware's own cost per re-routed push, in-process on a redis-server of its own (no
# Sidekiq push around it): the middleware with its real router, the floor's middleware (one no-op script on the
# gem's pool, as bench/run.rb's `floor`), and the middleware with its router answered in Ruby (what the middleware
# costs in Ruby alone); taking turns in blocks of 1,000.
#
#   bundle exec ruby bench/middleware_cost.rb
#   BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile TURNS=40 bundle exec ruby bench/middleware_cost.rb
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "logger"
require_relative "../spec/support/redis_server"

server = RedisServer.new.start
ENV["REDIS_URL"] = server.url
require "sidekiq"
require "sidekiq/fair_tenant"
abort "bench/middleware_cost.rb: build with the cargo feature `bench` (bundle exec rake compile)" \
  unless Sidekiq::FairTenant::Native::Client.method_defined?(:noop_eval)
Sidekiq.logger.level = Logger::WARN
Sidekiq.configure_client { |c| c.redis = { url: server.url, size: 10 } }

TURNS = Integer(ENV.fetch("TURNS", "20"))
BLOCK = 1000

# The job bin/bench pushes: re-routed past its thresholds.
class MiddlewareCostJob
  include Sidekiq::Worker
  sidekiq_options queue: "default", fair_tenant_queues: [{ queue: "throttled_2x", threshold: 100, per: 3600 },
                                                         { queue: "throttled_4x", threshold: 20, per: 60 }]
end

# A router that answers "rule 1" without Redis.
class AnsweringRouter
  def route(*) = 1
end

FT = Sidekiq::FairTenant
ANSWERING = AnsweringRouter.new
RULES = MiddlewareCostJob.get_sidekiq_options["fair_tenant_queues"]
middleware = FT::ClientMiddleware.new
stubbed = false
FT::Native::Client.prepend(Module.new { define_method(:router) { stubbed ? ANSWERING : super() } })
job = ->(i) { { "class" => MiddlewareCostJob, "args" => [i], "queue" => "default", "jid" => i.to_s, "fair_tenant" => "tenant-#{i % 50}", "fair_tenant_queues" => RULES } } # rubocop:disable Layout/LineLength
modes = {
  "middleware" => ->(payload) { middleware.call(MiddlewareCostJob, payload, "default") { true } },
  "floor (a no-op script)" => ->(payload) { FT.native.noop_eval("bench:noop:#{payload["fair_tenant"]}") },
  "middleware, router answered in Ruby" => lambda do |payload|
    stubbed = true
    middleware.call(MiddlewareCostJob, payload, "default") { true }
  ensure
    stubbed = false
  end
}
modes.each_value { |mode| 200.times { |i| mode.call(job.call(i)) } }
spent = Hash.new(0.0)
TURNS.times do |turn|
  modes.to_a.rotate(turn).each do |label, mode|
    payloads = Array.new(BLOCK) { |i| job.call(i) }
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    payloads.each { |payload| mode.call(payload) }
    spent[label] += Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  end
end
puts "Ruby #{RUBY_VERSION}, Sidekiq #{Sidekiq::VERSION}, #{TURNS} turns of #{BLOCK} per mode; us per push:"
modes.each_key { |label| puts format("  %-36<l>s %<us>.2f", l: label, us: spent[label] * 1e6 / (TURNS * BLOCK)) }
server.stop
