# frozen_string_literal: true

require "spec_helper"
require_relative "../../bench/redis_counters"

# bin/bench's per-job figures count what Redis ran: a script's own commands too, INFO and the bench's polls not.
RSpec.describe RedisCounters do
  let(:redis) { Redis.new(url: ENV.fetch("REDIS_URL")) }

  after { redis.close }

  it "counts the commands a script runs besides the script call, and leaves INFO and ignored polls out" do
    before = described_class.take(redis)
    redis.eval("redis.call('SET', KEYS[1], '1') redis.call('INCR', KEYS[1]) return redis.call('GET', KEYS[1])",
               keys: ["bench-counters:key"])
    3.times { redis.get("bench-counters:key") }
    redis.info("memory")
    work = described_class.take(redis).since(before, ignore: { "get" => 3 })

    expect(work[:by_command]).to eq("eval" => 1, "set" => 1, "incr" => 1, "get" => 1)
    expect(work[:calls]).to eq(4)
    expect(work[:usec]).to be_positive
    expect(work[:cpu]).to be >= 0
  end
end
