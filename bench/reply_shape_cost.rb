# frozen_string_literal: true

# Issue 31: what a fetch reply's shape costs the client. A script returning the jobs of a call of 4 (1 KB each)
# nested, 7 elements a job (the fetch script's reply before), nested with 3, and flat with 2 (its reply now);
# client CPU per call (the thread's CPU clock), on a private redis-server, through the bundle's Redis client.
#
#   bundle exec ruby bench/reply_shape_cost.rb
#   BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile bundle exec ruby bench/reply_shape_cost.rb
require "bundler/setup"
require "sidekiq"
require_relative "../spec/support/redis_server"

# The probe: one EVAL a call, each shape in turn.
module ReplyShapeCost
  CALLS = Integer(ENV.fetch("CALLS", "20000"))
  SHAPES = {
    "nested, 7 elements a job" => "local s = {} for i = 1, 4 do s[i] = {'default', 'acme', false, ARGV[1], '', '', " \
                                  "''} end return {s, false, {}, false, 0}",
    "nested, 3 elements a job" => "local s = {} for i = 1, 4 do s[i] = {'acme', ARGV[1], ''} end " \
                                  "return {s, false, {}, false, 0}",
    "flat, 2 elements a job" => "local s = {false, false, 0, 0} for i = 1, 4 do s[#s + 1] = ARGV[1] " \
                                "s[#s + 1] = '' end return s"
  }.freeze

  module_function

  def cpu_us(conn, source, pad)
    GC.start
    started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
    CALLS.times { conn.call("EVAL", source, 0, pad) }
    (Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started) * 1e6 / CALLS
  end

  def run
    server = RedisServer.new.start
    Sidekiq.configure_client { |config| config.redis = { url: server.url } }
    pad = "x" * 1000
    puts "client CPU per call of 4 jobs of 1 KB (#{CALLS} calls, Sidekiq #{Sidekiq::VERSION}), 3 rounds:"
    Sidekiq.redis do |conn|
      SHAPES.each do |label, source|
        rounds = Array.new(3) { cpu_us(conn, source, pad).round(1) }.join(" ")
        puts "  #{label.ljust(26)} #{rounds} us"
      end
    end
  ensure
    server&.stop
  end
end

ReplyShapeCost.run
