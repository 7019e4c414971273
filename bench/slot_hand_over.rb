# frozen_string_literal: true

# A raised limit hands over a large backlog of parked jobs in bounded script calls (HAND_OVER_BATCH jobs /
# HAND_OVER_BYTES per call): PARKED jobs (default 50,000, payloads of ~470 bytes) parked in one scope at limit 0,
# then `limits.set` raises it; prints the set_limit.lua calls made and Redis's time per call (INFO commandstats),
# on a redis-server of its own.
#
#   bundle exec ruby bench/slot_hand_over.rb
#   PARKED=200000 bundle exec ruby bench/slot_hand_over.rb
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "logger"
require_relative "../spec/support/redis_server"
SERVER = RedisServer.new.start
at_exit { SERVER.stop }
require "sidekiq"
require "sidekiq/fair_tenant"
Sidekiq.logger.level = Logger::WARN
Sidekiq.configure_client { |c| c.redis = { url: SERVER.url } }

# Parks the backlog, raises the limit, reports.
module SlotHandOver
  FT = Sidekiq::FairTenant
  PARKED = Integer(ENV.fetch("PARKED", "50000"))
  SCOPE = FT::Native::Slots.tenant_scope("acme", "default")

  module_function

  def redis = @redis ||= Redis.new(url: SERVER.url)
  def payload(job) = %({"class":"SlotJob","queue":"default","jid":"p#{job}","args":["acme",#{job},"#{"x" * 400}"]})

  def park
    FT.limits.set(0, tenant: "acme")
    Sidekiq.redis do |conn|
      PARKED.times do |i|
        call = FT::Native::Slots.acquire_call(*SCOPE, "p#{i}", "p#{i}", 60_000, 1, payload(i), 1_000_000.0 + i)
        FT::ScriptRunner.run(conn, "acquire", *call)
      end
    end
  end

  def raise_limit
    redis.call("CONFIG", "RESETSTAT")
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    handed = FT.limits.set(1_000_000, tenant: "acme")
    [handed, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started]
  end

  def report(handed, seconds)
    stat = redis.call("INFO", "commandstats")[/cmdstat_evalsha:(\S+)/, 1]
    calls = stat[/calls=(\d+)/, 1].to_i
    usec = stat[/usec=(\d+)/, 1].to_i
    puts "#{handed} of #{PARKED} parked jobs handed over (queue: #{redis.llen("queue:default")}) in #{calls} " \
         "set_limit calls, #{(usec / calls.to_f / 1000).round(2)} ms of Redis time per call, " \
         "#{(usec / 1000.0).round} ms in all (#{(seconds * 1000).round} ms for limits.set)"
  end
end

SlotHandOver.park
SlotHandOver.report(*SlotHandOver.raise_limit)
