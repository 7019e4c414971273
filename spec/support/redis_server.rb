# frozen_string_literal: true

require "socket"
require "tmpdir"
require "redis"

# A private redis-server on a free loopback port, for specs, benchmarks and the demo.
# Every server started here is stopped at exit, also when the run is interrupted.
class RedisServer
  attr_reader :port, :pid

  def self.free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  def initialize(port: self.class.free_port)
    @port = port
    @dir = Dir.mktmpdir("fair-tenant-redis")
    @pid = nil
  end

  def url(db = 0)
    "redis://127.0.0.1:#{port}/#{db}"
  end

  def start
    return self if running?

    @pid = Process.spawn("sh", "-c", WATCHDOG, "watchdog", Process.pid.to_s, *server_args,
                         out: File::NULL, err: File::NULL, pgroup: true)
    self.class.started << self
    wait_until_ready
    self
  end

  def stop
    return unless @pid

    Process.kill("TERM", @pid)
    Process.wait(@pid)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  ensure
    @pid = nil
  end

  def running?
    !@pid.nil?
  end

  def redis
    Redis.new(url: url, timeout: 5)
  end

  def self.started
    @started ||= []
  end

  def self.stop_all
    started.each(&:stop)
  end

  # Runs redis-server and stops it when asked (TERM) or when the process that started it is
  # gone, even if that process crashed before its at_exit hooks ran.
  WATCHDOG = <<~SH
    parent=$1; shift
    redis-server "$@" & server=$!
    trap 'kill $server 2>/dev/null; wait $server; exit 0' TERM INT
    while kill -0 "$parent" 2>/dev/null && kill -0 "$server" 2>/dev/null; do sleep 0.5; done
    kill $server 2>/dev/null; wait $server
  SH

  private

  def server_args
    ["--port", port.to_s, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
     "--enable-debug-command", "local", "--dir", @dir, "--daemonize", "no", "--loglevel", "warning"]
  end

  def wait_until_ready
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    loop do
      Redis.new(url: url, timeout: 0.2).tap { |r| r.ping && r.close }
      return
    rescue Redis::BaseConnectionError
      raise "redis-server on port #{port} did not start" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.02
    end
  end
end

at_exit { RedisServer.stop_all }
