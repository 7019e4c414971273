# frozen_string_literal: true

# What the fair push script costs on the server against the least a one-call push could cost, on a redis-server of
# its own: server µs per FCALL (commandstats) of the push function as shipped (called as a client's single push
# calls it, the short form: queue, tenant, job; and in its long form: base, queue, cap, time, id, tenant, job), a
# function of the same library that only returns (issue 31's "push as before" variant is gone: the library's push
# block now carries only the helpers today's push uses), one that runs just RPUSH, SADD, LLEN and HINCRBY on keys
# made by hand, and Sidekiq's own SADD + LPUSH; modes taking turns.
#
#   bundle exec ruby bench/push_script_cost.rb
#   CALLS=50000 ROUNDS=5 bundle exec ruby bench/push_script_cost.rb
require "bundler/setup"
require "logger"
require_relative "../spec/support/redis_server"

server = RedisServer.new.start
require "sidekiq"
require "sidekiq/fair_tenant"
Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)

FQ = Sidekiq::FairTenant::FairQueues
CALLS = Integer(ENV.fetch("CALLS", "20000"))
ROUNDS = Integer(ENV.fetch("ROUNDS", "3"))
TENANTS = Array.new(50) { |i| "tenant-#{i}" }.freeze
FUNCTION, LIBRARY = Sidekiq::FairTenant::ScriptRunner::SCRIPTS.fetch("push").then { |s| [s.function, s.library] }
LIBRARY_NAME = LIBRARY[/name=(\S+)/, 1]
FOUR_COMMANDS = "local b = ARGV[1]; redis.call('RPUSH', b .. 'l:' .. ARGV[6], ARGV[7]); " \
                "redis.call('SADD', KEYS[1], ARGV[2]); redis.call('LLEN', b .. 'sig'); " \
                "do return redis.call('HINCRBY', b .. 'state', 'n', 1) end"
BODY = /(_push', callback = function\(KEYS, ARGV\)\n)/
VARIANTS = {
  "push function" => ->(source) { source },
  "function that only returns" => ->(source) { source.sub(BODY) { "#{Regexp.last_match(1)}do return 1 end\n" } },
  "RPUSH, SADD, LLEN, HINCRBY" => ->(source) { source.sub(BODY) { "#{Regexp.last_match(1)}#{FOUR_COMMANDS}\n" } }
}.freeze

job = Sidekiq.dump_json({ "enqueued_at" => 1.7e9, "jid" => "0123456789abcdef01234567", "class" => "PushJob",
                          "args" => [1], "queue" => "bench_fair", "fair_tenant" => "tenant-1", "created_at" => 1.7e9 })
redis = Redis.new(url: server.url)
functions = VARIANTS.each_with_index.to_h do |(label, patch), index|
  library = patch.call(LIBRARY).gsub(LIBRARY_NAME, "variant#{index}")
  abort "push_script_cost: #{label} no longer applies" if index.positive? && patch.call(LIBRARY) == LIBRARY
  redis.call("FUNCTION", "LOAD", "REPLACE", library)
  [label, FUNCTION.sub(LIBRARY_NAME, "variant#{index}")]
end
PUSH = Sidekiq::FairTenant::FairQueues::PushCalls
args = ->(i) { [2, *PUSH::KEYS, *PUSH.build("bench_fair", [[TENANTS[i % 50], job]]).first] } # a client's: short
BASE = FQ.base("bench_fair")
long_args = ->(i) { [2, *PUSH::KEYS, BASE, "bench_fair", "", "", TENANTS[i % 50], job] }
# [call, the commands whose server time it is] (commands run inside a function are counted apart too).
modes = functions.to_h do |label, name|
  given = { "RPUSH, SADD, LLEN, HINCRBY" => long_args }.fetch(label, args)
  [label, [->(i) { redis.call("FCALL", name, *given.call(i)) }, %w[fcall]]]
end
modes["push function, long form"] = [->(i) { redis.call("FCALL", functions["push function"], *long_args.call(i)) },
                                     %w[fcall]]
modes["Sidekiq's SADD + LPUSH"] = [lambda do |_|
  redis.pipelined { |p| [p.call("SADD", "queues", "plain"), p.call("LPUSH", "queue:plain", job)] }
end, %w[sadd lpush]]

server_us = lambda do |commands|
  stats = redis.info("commandstats").transform_keys { |command| command.delete_prefix("cmdstat_") }
  commands.sum { |command| stats.dig(command, "usec").to_f } / CALLS
end
puts "redis-server #{redis.info["redis_version"]}, #{CALLS} calls per mode per round, 50 tenants; server us per call:"
ROUNDS.times do |round|
  figures = modes.to_a.rotate(round).to_h do |label, (call, commands)|
    redis.flushdb
    200.times(&call)
    redis.call("CONFIG", "RESETSTAT")
    CALLS.times(&call)
    [label, server_us.call(commands)]
  end
  row = modes.keys.map { |label| format("%<l>s %<us>.2f", l: label, us: figures[label]) }
  puts "  round #{round + 1}: #{row.join(", ")}"
end
server.stop
