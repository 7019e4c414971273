# frozen_string_literal: true

require "spec_helper"
require_relative "../support/sidekiq_process"

RSpec.describe "queue check at Sidekiq server boot" do
  def boot(queues)
    process = SidekiqProcess.new(redis_url: ENV.fetch("REDIS_URL"), queues: queues,
                                 app: File.expand_path("../support/boot_check_app.rb", __dir__)).start
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
    sleep 0.1 until File.read(process.log).include?("queue check done") ||
                    Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline || !process.alive?
    File.read(process.log)
  ensure
    process&.stop
  end

  it "warns loudly about stranded rule queues and throttled queues outweighing their source" do
    log = boot(%w[default,1 throttled_2x,3 slow])
    expect(log).to include("queue check done")
    expect(log).to include('ThrottledJob re-routes to "throttled_4x", which this process does not work on')
    expect(log).to include('ThrottledJob: throttled queue "throttled_2x" (weight 3) outweighs its source "default"')
    expect(log).not_to include("DurationRuleJob") # its slow queue is processed
  end

  it "stays quiet when the process works on the queues the rules imply" do
    log = boot(%w[default,4 throttled_2x,2 throttled_4x slow])
    expect(log).to include("queue check done")
    expect(log).not_to include("re-routes to")
    expect(log).not_to include("outweighs")
  end

  it "names the Redis server whose version it checked against what the scripts need" do
    name = RedisServer.binary.delete_suffix("-server")
    version = RedisServer.version_of(RedisServer.binary)
    log = boot(%w[default throttled_2x throttled_4x slow])
    expect(log).to include("queue check done")
    expect(log).to match(/Redis server: #{name} #{Regexp.escape(version.to_s)}\b/)
    expect(log).not_to include("Redis server check skipped")
  end
end
