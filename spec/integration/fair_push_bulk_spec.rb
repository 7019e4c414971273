# frozen_string_literal: true

require "spec_helper"
require_relative "../support/fair_app"
require_relative "../support/redis_stall"
require_relative "../support/round_trips"

# Issue 31 item 4: a bulk push to a fair queue is one round trip whatever its size, each of its script calls still
# bounded (PUSH_BATCH jobs, CALL_BYTES), and a call sent again (a lost reply, a pipeline sent again) pushes nothing
# twice. Checked on the spec's redis-server through Sidekiq's own client and connections.
RSpec.describe "Fair bulk push" do
  let(:fair) { Sidekiq::FairTenant::FairQueues }
  let(:runner) { Sidekiq::FairTenant::ScriptRunner }
  let(:names) { Sidekiq::FairTenant::Native::Names }
  let(:base) { fair.base("fair") }
  let(:push_calls) { Sidekiq::FairTenant::FairQueues::PushCalls }

  before do
    Sidekiq::FairTenant.configure { |c| c.fair_queues = %w[fair] }
    FairJob.perform_async("warm", 0) # the library loaded and a connection made: what follows is the push alone
  end

  after { Sidekiq::FairTenant.configure { |c| c.fair_queues = [] } }

  # Every job in the fair backlog: [tenant, args] of each, with repeats.
  def listed
    redis.keys("#{base}#{names::TENANT_LIST}*").flat_map do |key|
      redis.lrange(key, 0, -1).map { |job| JSON.parse(job)["args"] }
    end
  end

  def pairs(count, tenants: 5)
    Array.new(count) do |i|
      job = { "enqueued_at" => Time.now.to_f, "jid" => "j#{i}", "class" => "FairJob", "queue" => "fair",
              "args" => ["t#{i % tenants}", i] }
      ["t#{i % tenants}", JSON.generate(job)]
    end
  end

  def fcalls = command_calls["fcall"].to_i

  def calls_for(queue, pairs) = push_calls.build(queue, pairs)

  it "sends a push_bulk of many script calls in one round trip, each call bounded" do
    count = (names::PUSH_BATCH * 9) + 7 # ten calls (Sidekiq 7 sends 1,000 jobs per raw_push: one of them)
    jids = nil
    before = fcalls
    trips = RoundTrips.count do
      jids = Sidekiq::Client.push_bulk("class" => FairJob, "args" => Array.new(count) { |i| ["t#{i % 7}", i] })
    end

    expect(trips).to eq(1)
    expect(fcalls - before).to eq(10)
    expect(jids.compact.uniq.size).to eq(count)
    expect(fair.backlog(redis, "fair")).to eq(count + 1)
    expect(listed - [["warm", 0]]).to match_array(Array.new(count) { |i| ["t#{i % 7}", i] })
  end

  it "sends a single push as one call, without a call id" do
    trips = RoundTrips.count { FairJob.perform_async("acme", 1) }

    expect(trips).to eq(1)
    expect(redis.keys("#{base}#{names::PUSH_CALL}*")).to eq([])
  end

  it "sends a single push in the script's short form (queue, tenant, job), as the long form pushes it" do
    job = pairs(1)
    short = calls_for("fair", job)
    long = push_calls.build("fair", job, Time.now.to_f - 10)
    expect(short).to eq([["fair", *job[0]]])
    expect(long[0].size).to eq(6)

    Sidekiq.redis { |conn| push_calls.send_all(conn, short) }
    Sidekiq.redis { |conn| push_calls.send_all(conn, long) }
    expect(fair.backlog(redis, "fair")).to eq(3)
    expect(listed.tally).to eq({ ["warm", 0] => 1, ["t0", 0] => 2 })
    expect(redis.keys("#{base}#{names::PUSH_CALL}*")).to eq([])
    expect { Sidekiq.redis { |conn| runner.run(conn, "push", push_calls::KEYS, %w[fair t0]) } }
      .to raise_error(/ERR push: base, queue, enqueued_at/)
  end

  it "pushes nothing twice when a bulk push's calls are sent again whole (a lost reply)" do
    calls = calls_for("fair", pairs(250))
    expect(calls.size).to eq(3)

    Sidekiq.redis { |conn| push_calls.send_all(conn, calls) }
    Sidekiq.redis { |conn| expect(push_calls.send_all(conn, calls)).to eq(251) } # the jobs waiting, as the first time

    expect(fair.backlog(redis, "fair")).to eq(251)
    expect(listed.tally.values).to all(eq(1))
    expect(redis.ttl(redis.keys("#{base}#{names::PUSH_CALL}*").first)).to be_between(1, names::PUSH_CALL_TTL)
  end

  it "keeps the other calls' jobs, once, when one call of the pipeline is refused, and pushes it when sent again" do
    calls = calls_for("fair", pairs(250))
    refused = calls.dup
    refused[1] = calls[1][0...-1] # a job's tenant without its job: the script refuses the call before any write

    expect { Sidekiq.redis { |conn| push_calls.send_all(conn, refused) } }.to raise_error(/ERR push/)
    expect(fair.backlog(redis, "fair")).to eq(151) # the first and last calls' jobs (and the warm-up's)

    Sidekiq.redis { |conn| push_calls.send_all(conn, calls) }
    expect(fair.backlog(redis, "fair")).to eq(251)
    expect(listed.tally.values).to all(eq(1))
    expect(listed.size).to eq(251)
  end

  it "loads the library and sends the calls again when the server lost it, every job once" do
    redis.call("FUNCTION", "FLUSH")
    args = Array.new(250) { |i| ["t", i] }
    trips = RoundTrips.count { Sidekiq::Client.push_bulk("class" => FairJob, "args" => args) }

    expect(trips).to eq(3) # refused whole, FUNCTION LOAD, sent again
    expect(fair.backlog(redis, "fair")).to eq(251)
    expect(listed.tally.values).to all(eq(1))
  end

  it "sends a bulk push in one pipeline by EVALSHA on a server without functions (as Redis 6.2), every job once" do
    old = RedisServer.new(args: ["--rename-command", "FCALL", ""]).start
    conn = SpecHelpers::SIDEKIQ7 ? Sidekiq::RedisConnection.create(url: old.url).checkout : Redis.new(url: old.url)
    trips = Sidekiq::Client.via(ConnectionPool.new(size: 1) { conn }) do
      Sidekiq::Client.push_bulk("class" => FairJob, "args" => Array.new(250) { |i| ["t#{i % 5}", i] }) # loads it
      RoundTrips.count { Sidekiq::Client.push_bulk("class" => FairJob, "args" => Array.new(250) { |i| ["u", i] }) }
    end

    expect(trips).to eq(1)
    expect(old.redis.hget("#{base}state", "n")).to eq("500")
    stats = old.redis.info("commandstats")
    expect(stats.dig("evalsha", "calls").to_i - stats.dig("evalsha", "failed_calls").to_i).to eq(6)
    expect(stats).not_to include("fcall")
  ensure
    old&.stop
  end

  # (gc_stress: false: the push must be sent while the stall lasts, which GC.stress on every call would not keep.)
  it "pushes every job of a push_bulk once when its reply was lost and the client sent it again", gc_stress: false do
    url = ENV.fetch("REDIS_URL")
    args = Array.new(250) { |i| ["t#{i % 5}", i] }
    with_sidekiq_redis(url: url, network_timeout: 0.5) do
      sent = 0
      # A stall can miss the push (sent after it ended, or on a connection whose handshake timed out): tried again,
      # up to three times, on an empty backlog.
      3.times do
        redis.flushdb
        Sidekiq.redis { |conn| conn.call("PING") } # connected before the stall
        before = fcalls
        stall = RedisStall.start(url, 1.0) # longer than the read timeout: the client sends the pipeline again
        begin
          Sidekiq::Client.push_bulk("class" => FairJob, "args" => args)
        rescue StandardError
          nil # both attempts timed out: both run all the same, once the stall ends
        end
        stall.join
        sleep 0.2
        sent = fcalls - before
        break if sent > 3
      end

      # Three calls sent twice: Redis runs of the first pipeline what it read before it found the connection closed
      # (some or all of it), then the second whole.
      expect(sent).to be_between(4, 6)
      expect(fair.backlog(redis, "fair")).to eq(250)
      expect(listed).to match_array(args)
    end
  end
end
