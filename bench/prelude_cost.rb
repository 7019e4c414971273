# frozen_string_literal: true

# Server time per EVALSHA (INFO commandstats) of the shared names' prelude of the fetch script, the largest,
# against `return 1` and against the same names as a table (`local K = {...}`), on a redis-server of its own:
#
#   bundle exec ruby bench/prelude_cost.rb
require "bundler/setup"
require "redis"
require "socket"
require "sidekiq/fair_tenant"

prelude = Sidekiq::FairTenant::Native::Fair.script_source("fetch").lines.first
names, values = prelude.delete_prefix("local ").chomp.split(" = ", 2)
fields = names.split(", ").zip(values.split(/, (?=(?:[^']*'[^']*')*[^']*\z)/)).map { |n, v| "#{n} = #{v}" }
table = "local K = { #{fields.join(", ")} }\n"
variants = { "return 1" => "", "prelude (locals)" => prelude, "as a table" => table }

port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
pid = spawn("redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--save", "", out: File::NULL)
begin
  redis = Redis.new(port: port)
  50.times do
    break redis.ping
  rescue Redis::CannotConnectError
    sleep 0.1
  end
  puts "the fetch script's prelude: #{names.split(", ").size} names"
  variants.each do |name, head|
    sha = redis.script(:load, "#{head}return 1")
    redis.call("CONFIG", "RESETSTAT")
    200_000.times.each_slice(1000) { |slice| redis.pipelined { |p| slice.each { p.evalsha(sha) } } }
    usec = redis.info("commandstats")["evalsha"]["usec_per_call"]
    puts format("  %<name>-18s %<usec>s µs per call", name: name, usec: usec)
  end
ensure
  Process.kill("TERM", pid)
  Process.wait(pid)
end
