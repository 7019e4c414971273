# frozen_string_literal: true

# Jobs stranded by lost replies, with and without the in-flight audit (issue 30 item 1). A real `sidekiq -c 5`
# (spec/support/fair_app.rb, Sidekiq's `network_timeout: 0.5`) runs 300 jobs of 20 ms that do not touch Redis,
# spread over 3 tenants of the fair queue `fair`, on a redis-server of its own; three times, once 40, 100 and 160
# jobs have started, another client keeps Redis busy with a read-only Lua loop of about 1.2 s, longer than the
# read timeout, so the fetches under way are sent again and the first runs' replies are lost. Then it waits WAIT
# seconds (40) and counts the jobs that started while the process lived, those that started twice, and when the
# last one started after the last stall. Each row is one audit interval: "off" is an interval longer than the
# run (the process audits once, at its start: as before the audit existed), 15 s is the default.
#
#   bundle exec ruby bench/lost_reply.rb
#   BUNDLE_GEMFILE=gemfiles/sidekiq7.gemfile bundle exec ruby bench/lost_reply.rb
#   INTERVALS=off,15 WAIT=40 RUNS=2 bundle exec ruby bench/lost_reply.rb
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "json"
require "logger"
require "tmpdir"
require "redis"
require_relative "../spec/support/redis_server"
require_relative "../spec/support/sidekiq_process"
require_relative "../spec/support/redis_stall"

# One run per audit interval.
module LostReply
  JOBS = 300
  STALLS_AT = [40, 100, 160].freeze
  APP = File.expand_path("../spec/support/fair_app.rb", __dir__)

  module_function

  def run(server, interval, wait)
    redis = server.redis
    redis.flushdb
    push(server.url)
    events = File.join(Dir.mktmpdir("lost-reply"), "started")
    process = start(server.url, interval, events)
    stalled_at = stalls(server.url, events)
    sleep wait
    started = read(events)
    alive = process.alive?
    process.stop
    report(interval, started, stalled_at, alive)
  end

  def push(url)
    system({ "REDIS_URL" => url, "RUBYLIB" => File.expand_path("../lib", __dir__) }, Gem.ruby, "-e", <<~RUBY,
      require "sidekiq"
      require "sidekiq/fair_tenant"
      require "#{APP}"
      Sidekiq.logger.level = Logger::WARN
      Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
      #{JOBS}.times { |i| FileFairJob.perform_async("t\#{i % 3}", i, 20) }
    RUBY
           exception: true)
  end

  def start(url, interval, events)
    env = { "FAIR_APP_NETWORK_TIMEOUT" => "0.5", "FAIR_APP_EVENTS_FILE" => events,
            "FAIR_APP_AUDIT_SECONDS" => interval == "off" ? "1000000" : interval }
    SidekiqProcess.new(redis_url: url, concurrency: 5, queues: %w[fair], env: env, app: APP).start
  end

  def stalls(url, events)
    STALLS_AT.map do |count|
      sleep 0.01 until read(events).size >= count
      RedisStall.start(url, 1.2).join
      Time.now
    end.last
  end

  def read(events) = File.exist?(events) ? File.readlines(events).map { |line| line.split.map(&:to_f) } : []

  def report(interval, started, stalled_at, alive)
    indexes = started.map { |index, _| index.to_i }
    last = started.map(&:last).max
    format("| %-8<i>s | %3<ran>d / %<jobs>d | %<never>3d | %<twice>3d | %<last>6.1f | %<alive>s |",
           i: interval, ran: indexes.uniq.size, jobs: JOBS, never: JOBS - indexes.uniq.size,
           twice: indexes.tally.count { |_, n| n > 1 }, last: last ? last - stalled_at.to_f : 0, alive: alive)
  end
end

if File.expand_path($PROGRAM_NAME) == File.expand_path(__FILE__)
  server = RedisServer.new.start
  at_exit { server.stop }
  intervals = ENV.fetch("INTERVALS", "off,15").split(",")
  wait = Float(ENV.fetch("WAIT", 40))
  require "sidekiq/version"
  puts "Sidekiq #{Sidekiq::VERSION}, 3 stalls of ~1.2 s (read timeout 0.5 s), #{LostReply::JOBS} jobs of 20 ms, " \
       "sidekiq -c 5, #{wait.to_i} s after the last stall"
  puts "| audit every | jobs run while alive | never ran | ran twice | last start after last stall (s) | alive |"
  puts "|---|---|---|---|---|---|"
  Integer(ENV.fetch("RUNS", 2)).times do
    intervals.each { |interval| puts LostReply.run(server, interval, wait) }
  end
end
