# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"
require_relative "../support/fair_rate_app"
require "sidekiq/fair_tenant/cli"

# Rate caps inside a fair queue, on real `sidekiq` server processes: a tenant whose next job would start over
# a window leaves the rotation until the instant it may, and comes back by itself; others are served meanwhile.
# The cap is decided on Redis's clock when the job is fetched; a job records its start a little later (in the
# job), so the recorded starts are checked in windows MARGIN shorter than the cap's (a count bound, with room
# for the time between a fetch and the job's first line).
RSpec.describe "Rate caps inside fair queues" do
  margin = 0.25
  let(:servers) { [] }
  let(:base) { Sidekiq::FairTenant::Native::Fair.base("fair") }

  before do
    redis.flushdb
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
  end

  after do
    servers.each(&:stop)
    Sidekiq::FairTenant.configure { |c| c.fair_queues = [] }
  end

  def start_server(concurrency:)
    SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), concurrency: concurrency, queues: %w[fair],
                       app: File.expand_path("../support/fair_rate_app.rb", __dir__)).start.tap { |s| servers << s }
  end

  def events = redis.lrange(FairRateApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }
  def starts(tenant) = events.select { |e| e["event"] == "start" && e["tenant"] == tenant }
  def finished(tenant) = events.count { |e| e["event"] == "finish" && e["tenant"] == tenant }
  def rated_tenants = redis.zrange("#{base}rated", 0, -1).map { |member| member[16..] }

  # The most starts in any window of `length` seconds ending at a start.
  def most_in_window(times, length)
    times = times.sort
    times.each_index.map { |i| times[0..i].count { |t| t > times[i] - length } }.max || 0
  end

  it "validates fair_tenant_rate at sidekiq_options time, naming the class and the rule" do
    define = lambda do |option|
      Class.new do
        include Sidekiq::Worker

        def self.name = "ShopSyncJob"
        sidekiq_options fair_tenant_rate: option
      end
    end
    [[[{ limit: 0, per: 1 }], /window 1: limit must be an Integer >= 1/],
     [[{ limit: 2, per: 1 }, { limit: 2 }], /window 2: per must be/],
     [[{ limit: 2, per: 1, every: 3 }], /unknown key "every"/],
     [Array.new(9) { { limit: 1, per: 1 } }, /1 to 8 windows/],
     [{ windows: [{ limit: 1, per: 1 }], key: 3 }, /key must name a class method/],
     ["2/s", /must be an Array of windows/]].each do |option, reason|
      expect { define.call(option) }.to raise_error(ArgumentError, /ShopSyncJob: invalid fair_tenant_rate .*/) { |e|
        expect(e.message).to match(reason)
      }
    end
    duration = Struct.new(:to_f).new(86_400.0) # as an ActiveSupport::Duration answers
    rate = Sidekiq::FairTenant::Native::Rate.new("J", [{ limit: 2, per: 1 }, { "limit" => 10_000, "per" => duration }])
    expect(rate.flat).to eq([2, 1000, 10_000, 86_400_000])
    expect(Sidekiq::FairTenant::Native::Rate.new("J",
                                                 { limit: 5, per: 0.5, key: :shop_id }).key_method).to eq("shop_id")
  end

  it "takes a tenant out of the rotation in-process: no job fetched twice, Queue#latency leaves it out" do
    fetch = Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "rate:1:a").tap do
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
    3.times { |i| SlowRateJob.perform_async("L", i, 0) }
    UncappedRateAppJob.perform_async("M", 0, 0)
    served = Array.new(4) { fetch.retrieve_work&.tap(&:acknowledge) }.compact.map { |u| JSON.parse(u.job)["args"][0] }
    # L's 2 starts in 3 s, then only M; the third L job waits in `rated`, not fetched and pushed back.
    expect(served.sort).to eq(%w[L L M])
    expect(rated_tenants).to eq(["L"])
    expect(Sidekiq::Queue.new("fair").size).to eq(1)
    expect(Sidekiq::Queue.new("fair").latency).to eq(0.0)
    why = Sidekiq::FairTenant.why(Sidekiq::Queue.new("fair").first.jid)
    expect(why).to include(state: :waiting, tenant: "L", place: :rated)
    expect(why[:held_by][:rate][:starts_in]).to be_between(0, 3)
    expect(Sidekiq::FairTenant::CLI::WhyText.lines(why).last).to start_with("held by a rate window: may start in")
    fetch.flush_acks
  end

  it "holds tenants whose names hold `]` (the job's head arrays end at a `]` that may be in a name)" do
    fetch = Sidekiq::FairTenant::FairFetch.new({ queues: %w[fair] }, "rate:1:b").tap do
      Sidekiq::FairTenant::Concurrency::Slots.stop
    end
    names = ["L]", "[x]\"]", "a#{"]" * 12}b"] # the last: more than the head reader tries, so the whole job is read
    names.each { |name| 3.times { |i| SlowRateJob.perform_async(name, i, 0) } }
    served = Array.new(9) { fetch.retrieve_work&.tap(&:acknowledge) }.compact.map { |u| JSON.parse(u.job)["args"][0] }
    expect(served.tally).to eq(names.to_h { |name| [name, 2] }) # 2 starts in 3 s each; the third waits, rated
    expect(rated_tenants).to match_array(names)
    fetch.flush_acks
  end

  it "never starts more than 5 a second over a 30 s run (2 processes x 5 threads), others served meanwhile" do
    2.times { start_server(concurrency: 5) }
    wait_for("2 processes up") { redis.scard("processes") == 2 }
    150.times { |i| RateJob.perform_async("R", i, 20) }
    60.times { |i| UncappedRateAppJob.perform_async("U#{i % 3}", i, 50) }

    wait_for("R out of the rotation") { rated_tenants == ["R"] }
    wait_for("the uncapped jobs", timeout: 30) { %w[U0 U1 U2].sum { |t| finished(t) } == 60 }
    expect(starts("R").size).to be < 150 # they did not wait for R's backlog
    wait_for("R's 150 jobs", timeout: 60) { finished("R") == 150 }

    r = starts("R")
    expect(r.map { |e| e["jid"] }.uniq.size).to eq(150) # none fetched twice
    expect(r.map { |e| e["pid"] }.uniq.size).to eq(2)
    expect(most_in_window(r.map { |e| e["at"] }, 1 - margin)).to be <= 5
    # 150 starts at 5 a second: at least 29 s from the first to the last (30 windows, the first one at once).
    expect(r.map { |e| e["at"] }.max - r.map { |e| e["at"] }.min).to be > 29 - margin
    expect(redis.zcard("#{base}rated")).to eq(0)
  end

  it "holds two windows at once: 3 a second and 5 in 3 seconds" do
    start_server(concurrency: 4)
    15.times { |i| TwoWindowsJob.perform_async("W", i, 10) }
    wait_for("W's 15 jobs", timeout: 30) { finished("W") == 15 }

    times = starts("W").map { |e| e["at"] }
    expect(most_in_window(times, 1 - margin)).to be <= 3
    expect(most_in_window(times, 3 - margin)).to be <= 5
    # The 3-second window is what holds it: 15 starts take 3 such windows after the first.
    expect(times.max - times.min).to be > 6 - margin
  end

  it "keeps a SIGKILLed process's starts counted: a replacement starts no more than the window allows" do
    victim = start_server(concurrency: 2)
    wait_for("the victim up") { redis.scard("processes") == 1 }
    6.times { |i| SlowRateJob.perform_async("K", i, 5000) }
    wait_for("2 starts on the victim") { starts("K").size == 2 }
    victim.kill!
    start_server(concurrency: 2)
    wait_for("4 more starts after the kill", timeout: 30) { starts("K").size >= 6 }

    times = starts("K").map { |e| e["at"] }
    expect(most_in_window(times, 3 - margin)).to be <= 2
    expect(starts("K").map { |e| e["pid"] }.uniq.size).to eq(2)
  end

  # The scope's windows as if recorded by a clock `ms` ahead of the server's (then restarted on a machine whose
  # clock is behind): every bucket's last start, its number and the scope's time moved on by `shift_ms`.
  # (A start stamped ahead of the server's clock counts until its window ends on that later clock; the lockstep
  # test checks the scope's own clock, never going back, against the model.)
  def shift_rate_clock(conn, key, shift_ms)
    names = Sidekiq::FairTenant::Native::Names
    conn.hgetall(key).each do |field, value|
      moved = if field == names::RATE_SEEN then (value.to_i + shift_ms).to_s
              else
                value.split(",").map do |bucket|
                  _, count, last = bucket.split(":").map(&:to_i)
                  "#{(last + shift_ms) * names::RATE_BUCKETS / field.to_i}:#{count}:#{last + shift_ms}"
                end.join(",")
              end
      conn.hset(key, field, moved)
    end
  end

  it "keeps counting starts across a Redis restart, and when the restarted server's clock is behind" do
    shard = RedisServer.new.start
    pool = ConnectionPool.new(size: 1) do
      SpecHelpers::SIDEKIQ7 ? Sidekiq::RedisConnection.create(url: shard.url).checkout : Redis.new(url: shard.url)
    end
    servers << SidekiqProcess.new(redis_url: shard.url, concurrency: 2, queues: %w[fair],
                                  app: File.expand_path("../support/fair_rate_app.rb", __dir__)).start
    starts = lambda do
      shard.redis.lrange(FairRateApp::EVENTS, 0, -1).map { |e| JSON.parse(e) }
           .select { |e| e["event"] == "start" }.map { |e| e["at"] }.sort
    end
    Sidekiq::Client.via(pool) { 5.times { |i| RateJob.perform_async("C", i, 0) } }
    wait_for("5 starts") { starts.call.size == 5 }
    key = shard.redis.keys("#{Sidekiq::FairTenant::Native::Names::RATE_PREFIX}*").first
    shift_rate_clock(shard.redis, key, 3000)
    shard.redis.call("SAVE")
    shard.stop
    shard.start # the same port and directory: its dump is loaded
    Sidekiq::Client.via(pool) { 5.times { |i| RateJob.perform_async("C", 5 + i, 0) } }
    wait_for("10 starts after the restart", timeout: 30) { starts.call.size == 10 }

    times = starts.call
    # The five starts before the restart count until their window ends on the later clock: ~4 s after them.
    expect(times[5] - times[4]).to be > 3.5
    expect(most_in_window(times, 1 - margin)).to be <= 5
  ensure
    servers.each(&:stop)
    shard&.stop
  end

  it "applies a runtime override at once: a tenant held at 2 in 3 s starts 6 in one window once raised" do
    start_server(concurrency: 3)
    wait_for("the process up") { redis.scard("processes") == 1 }
    8.times { |i| SlowRateJob.perform_async("O", i, 10) }
    wait_for("O held after its 2 starts") { rated_tenants == ["O"] && starts("O").size == 2 }

    expect(Sidekiq::FairTenant.rates.set("6/3", tenant: "O", queue: "fair")).to eq(1)
    wait_for("O's 8 jobs", timeout: 30) { finished("O") == 8 }
    times = starts("O").map { |e| e["at"] }
    # More than the class's 2 in a window (only the override allows it), never more than its 6.
    expect(most_in_window(times, 3 - margin)).to be_between(3, 6)
    expect(Sidekiq::FairTenant.rates.delete(tenant: "O", queue: "fair")).to eq(0)
  end

  it "holds a rate cap and a concurrency cap on the same tenant" do
    2.times { start_server(concurrency: 3) }
    12.times { |i| RateAndSlotJob.perform_async("B", i, 100) }
    wait_for("B's 12 jobs", timeout: 30) { finished("B") == 12 }

    b = events.select { |e| e["tenant"] == "B" }.sort_by { |e| [e["at"], e["event"] == "start" ? 1 : 0] }
    running = 0
    most = b.map { |e| running += e["event"] == "start" ? 1 : -1 }.max
    expect(most).to eq(1)
    expect(most_in_window(starts("B").map { |e| e["at"] }, 1 - margin)).to be <= 4
    holders = "sidekiq-fair_tenant:slots:3:t:B:q:fair:holders"
    # (The last job records its end a little before its acknowledgement gives its slot back.)
    wait_for("B's slot given back") { redis.zcard(holders).zero? }
  end
end
