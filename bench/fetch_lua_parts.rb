# frozen_string_literal: true

# Issue 31 item 2: where a fair fetch's own Lua time goes (bench/fetch_anatomy.rb found it is 80-90% of the
# fetch's server time). On a redis-server of its own, probes appended to the gem's own function library call its
# parts one at a time, each against a fresh backlog of JOBS jobs of BYTES bytes over 50 tenants; commandstats
# gives the server µs per call of each (its commands included), in ROUNDS rounds taking turns:
#   empty        a function that returns at once (what any FCALL costs)
#   keys         + fair_keys: the queue's key names built
#   serve        + serve: the next tenant's turn, its job popped (nothing put in flight, no acknowledgement)
#   serve+entry  + the in-flight entry built and pushed, and the reply a fetch gives
#
#   bundle exec ruby bench/fetch_lua_parts.rb
#   BYTES=200000 JOBS=1000 bundle exec ruby bench/fetch_lua_parts.rb
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "logger"
require_relative "../spec/support/redis_server"

server = RedisServer.new.start
require "sidekiq"
require "sidekiq/fair_tenant"
Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq.logger.level = Logger::WARN
Sidekiq.configure_client { |c| c.redis = { url: server.url, size: 5 } }
Sidekiq::FairTenant.configure do |c|
  c.redis_url = server.url
  c.fair_queues = %w[parts]
end

# The job: its tenant is its first argument.
class PartsJob
  include Sidekiq::Worker

  sidekiq_options queue: "parts"

  def self.fair_tenant(tenant, *) = tenant
end

# The probes and their runs.
module FetchLuaParts
  JOBS = Integer(ENV.fetch("JOBS", "5000"))
  BYTES = Integer(ENV.fetch("BYTES", "1024"))
  ROUNDS = Integer(ENV.fetch("ROUNDS", "3"))
  FQ = Sidekiq::FairTenant::FairQueues
  PROBES = <<~LUA
    redis.register_function{function_name = 'parts_empty', callback = function(KEYS, ARGV) return 1 end}
    redis.register_function{function_name = 'parts_keys', callback = function(KEYS, ARGV)
      fair_keys(ARGV[1], KEYS[1]); return 1 end}
    redis.register_function{function_name = 'parts_serve', callback = function(KEYS, ARGV)
      serve(fair_keys(ARGV[1], KEYS[1]), ARGV[2], false, {}); return 1 end}
    redis.register_function{function_name = 'parts_serve_entry', callback = function(KEYS, ARGV)
      local tenant, job = serve(fair_keys(ARGV[1], KEYS[1]), ARGV[2], false, {})
      local entry = inflight_entry(ARGV[2], tenant, job)
      redis.call('LPUSH', KEYS[2], entry)
      return { ARGV[2], tenant, false, entry } end}
  LUA
  PARTS = { "empty" => "parts_empty", "keys" => "parts_keys", "serve" => "parts_serve",
            "serve+entry" => "parts_serve_entry" }.freeze

  module_function

  # The gem's library with the probes added to the fetch function's block (they reach the local functions it
  # carries), under a name of its own.
  def library
    name, source = Sidekiq::FairTenant::ScriptRunner::SCRIPTS.fetch("fetch").then { |s| [s.function, s.library] }
    lib = name.delete_suffix("_fetch")
    fetch_block = /(function_name = '#{name}'.*?\nend\}\n)(end\n)/m
    renamed = source.sub("#!lua name=#{lib}", "#!lua name=#{lib}_parts")
    renamed.sub(fetch_block) { "#{::Regexp.last_match(1)}#{PROBES}#{::Regexp.last_match(2)}" }
  end

  def fill(redis)
    redis.flushall
    redis.call("FUNCTION", "LOAD", "REPLACE", library)
    pad = "x" * BYTES
    (JOBS + 10).times.each_slice(1000) do |slice|
      Sidekiq::Client.push_bulk("class" => PartsJob, "args" => slice.map { |i| ["t#{i % 50}", i, pad] })
    end
  end

  def measure(redis, function)
    fill(redis)
    redis.call("CONFIG", "RESETSTAT")
    keys = [FQ::WEIGHTS_KEY, "parts:inflight"]
    JOBS.times { redis.call("FCALL", function, keys.size, *keys, FQ.base("parts"), "parts") }
    stats = redis.info("commandstats").fetch("fcall")
    stats.fetch("usec").to_f / stats.fetch("calls").to_i
  end

  def run(redis)
    figures = Hash.new { |h, k| h[k] = [] }
    ROUNDS.times { PARTS.each { |part, function| figures[part] << measure(redis, function) } }
    puts "fair fetch's Lua by part: #{JOBS} calls, #{BYTES} B jobs, 50 tenants, median of #{ROUNDS} rounds"
    before = 0.0
    PARTS.each_key do |part|
      us = figures[part].sort[figures[part].size / 2]
      puts "  #{part.ljust(12)} #{us.round(2).to_s.rjust(8)} µs per call (+#{(us - before).round(2)})"
      before = us
    end
  end
end

begin
  FetchLuaParts.run(Redis.new(url: server.url))
ensure
  server.stop
end
