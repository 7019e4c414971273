# frozen_string_literal: true

require "tmpdir"

# A real `sidekiq` server process for specs, loading spec/support/slots_app.rb and the gem from
# lib/. Stopped with TERM (then KILL) by #stop, killed by #kill!, and all of them at exit; the app
# also exits by itself when the spec process is gone.
class SidekiqProcess
  ROOT = File.expand_path("../..", __dir__)
  APP = File.join(__dir__, "slots_app.rb")

  attr_reader :pid, :log

  def self.started
    @started ||= []
  end

  def initialize(redis_url:, concurrency: 10, queues: %w[default], app: APP, args: [], env: {}) # rubocop:disable Metrics/ParameterLists
    @app = app
    @env = env
    @args = args
    @redis_url = redis_url
    @concurrency = concurrency
    @queues = queues
    @log = File.join(Dir.mktmpdir("fair-tenant-sidekiq"), "sidekiq.log")
  end

  def start
    env = { "REDIS_URL" => @redis_url, "RUBYLIB" => File.join(ROOT, "lib"),
            "FAIR_TENANT_SPEC_PARENT" => Process.pid.to_s }.merge(@env)
    # The bundle's sidekiq (6.4 or 7.3), not whichever one PATH finds first.
    args = [Gem.ruby, Gem.bin_path("sidekiq", "sidekiq"), "-r", @app, "-c", @concurrency.to_s,
            *@queues.flat_map { |q| ["-q", q] }, *@args]
    @pid = Process.spawn(env, *args, chdir: ROOT, out: @log, err: @log, pgroup: true)
    self.class.started << self
    self
  end

  def stop(timeout: 15)
    return true unless @pid

    signal("TERM")
    wait(timeout) || (signal("KILL") && wait(5))
  end

  # TERM without waiting: Sidekiq goes quiet, then waits up to its -t timeout for running jobs.
  def term!
    signal("TERM")
  end

  def kill!
    return true unless @pid

    signal("KILL")
    wait(5)
  end

  def alive?
    !@pid.nil? && Process.waitpid(@pid, Process::WNOHANG).nil?
  rescue Errno::ECHILD
    false
  end

  private

  def signal(name)
    Process.kill(name, @pid) if @pid
    true
  rescue Errno::ESRCH
    false
  end

  def wait(timeout)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      if Process.waitpid(@pid, Process::WNOHANG)
        @pid = nil
        return true
      end

      sleep 0.05
    end
    false
  rescue Errno::ECHILD
    @pid = nil
    true
  end
end

at_exit { SidekiqProcess.started.each { |p| p.stop(timeout: 5) if p.pid } }
