# frozen_string_literal: true

# A tenant capped at 5 starts a second (RateJob, spec/support/fair_rate_app.rb) with a deep backlog beside uncapped
# tenants arriving all along, on 2 real `sidekiq -c 5` and a private redis-server: its starts per second against
# its limit, and the most starts in any 1 s window of the starts the jobs recorded (a little after the fetch).
#
#   bundle exec ruby bench/rate_live.rb      (N: the capped tenant's jobs, default 100)
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "json"
require_relative "../spec/support/redis_server"
server = RedisServer.new.start
ENV["REDIS_URL"] = server.url
require_relative "../spec/support/sidekiq_process"
require_relative "../spec/support/fair_rate_app"
Sidekiq.configure_client { |c| c.redis = { url: server.url } }
Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
redis = Redis.new(url: server.url)
procs = Array.new(2) do
  SidekiqProcess.new(redis_url: server.url, concurrency: 5, queues: %w[fair],
                     app: File.expand_path("../spec/support/fair_rate_app.rb", __dir__)).start
end
sleep 0.1 until redis.scard("processes") == 2
n = Integer(ENV.fetch("N", "100"))
n.times { |i| RateJob.perform_async("R", i, 20) }
# Uncapped tenants arrive all along, a few at a time, so threads go idle and busy in turn.
feeder = Thread.new do
  200.times do |i|
    UncappedRateAppJob.perform_async("U#{i % 4}", i, 30)
    sleep 0.1
  end
end
sleep 0.2 until redis.lrange(FairRateApp::EVENTS, 0, -1).count { |e| e.include?('"finish"') && e.include?('"R"') } == n
feeder.join
events = redis.lrange(FairRateApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }
r = events.select { |e| e["event"] == "start" && e["tenant"] == "R" }.map { |e| e["at"] }.sort
span = r.last - r.first
most = r.each_index.map { |i| r[0..i].count { |t| t > r[i] - 1 } }.max
# After the first burst of 5 at once, (n - 5) starts in `span`: the rate the cap allowed after the first window.
puts format("R: %d starts in %.2f s: %.2f starts/s after the first window (limit 5/s: %.1f%%); most in any 1 s " \
            "window of recorded starts: %d", n, span, (n - 5) / span, (n - 5) / span / 5 * 100, most)
procs.each(&:stop)
server.stop
