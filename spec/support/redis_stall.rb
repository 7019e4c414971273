# frozen_string_literal: true

# Makes the spec's Redis busy for a while, as a slow command or another client's long script would: a read-only
# Lua loop on a connection of its own (every other client waits; below busy-reply-threshold nobody gets BUSY).
# A client whose read timeout is shorter sees its call time out and sends it again (redis-rb 4.8, redis-client):
# Redis runs both, in order, once the loop ends.
module RedisStall
  LOOP = "local n, i = tonumber(ARGV[1]), 0 while i < n do i = i + 1 end return i"
  PROBE = 0.2

  module_function

  # Loop turns per second on this machine, now (measured before each stall, on a loop of about a tenth of a
  # second: the machine's load moves it).
  def rate(url)
    turns = 5_000_000
    client = Redis.new(url: url, timeout: 30)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    client.call("EVAL", LOOP, 0, turns)
    turns / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
  ensure
    client&.close
  end

  # Starts a stall of about `seconds` and returns its thread once Redis is busy with it.
  def start(url, seconds)
    turns = (rate(url) * seconds).to_i
    thread = Thread.new { Redis.new(url: url, timeout: seconds + 30).call("EVAL", LOOP, 0, turns) }
    probe = Redis.new(url: url, timeout: PROBE, reconnect_attempts: 0)
    loop do
      probe.call("PING")
      sleep 0.005
    rescue Redis::BaseConnectionError
      break # a PING that does not come back in PROBE: the loop runs (a loaded machine answers well within it)
    end
    thread
  ensure
    probe&.close
  end
end
