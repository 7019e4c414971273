# frozen_string_literal: true

require "json"
require "logger"
require "stringio"
require "active_support"
require "active_support/core_ext/numeric/time"
require "active_support/testing/time_helpers"

require_relative "support/redis_server"

# One private redis-server for the whole run unless REDIS_URL points at one (it is flushed!).
unless ENV["REDIS_URL"]
  $redis_server = RedisServer.new.start # rubocop:disable Style/GlobalVars
  ENV["REDIS_URL"] = $redis_server.url # rubocop:disable Style/GlobalVars
end

require "sidekiq"
require "sidekiq/fair_tenant"
require_relative "support/jobs"
if ENV["FAIR_TENANT_GC_STRESS"] == "1"
  require_relative "support/gc_stress"
  GcStress.enable!
end

Sidekiq.logger.level = Logger::ERROR
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=) # Sidekiq 6.4 calls sadd the 4.x way

module SpecHelpers
  SIDEKIQ7 = Gem::Version.new(Sidekiq::VERSION) >= Gem::Version.new("7")
  SIDEKIQ8 = Gem::Version.new(Sidekiq::VERSION) >= Gem::Version.new("8")

  # Polls the block until it returns something truthy, which it returns. On timeout it raises naming `what`, with
  # the last lines of each Sidekiq process's log (the example's `servers`, when it has them).
  def wait_for(what, timeout: 60, every: 0.05)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until (result = yield)
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        logs = (respond_to?(:servers) ? servers : []).map { |s| File.read(s.log).lines.last(30).join }.join("\n")
        raise "timed out waiting for #{what}; sidekiq logs:\n#{logs}"
      end
      sleep every
    end
    result
  end

  # Sidekiq 7 dropped the module-level config (Sidekiq.options, Sidekiq.client_middleware, ...).
  def sidekiq_config
    SIDEKIQ7 ? Sidekiq.default_configuration : Sidekiq
  end

  # Moves due scheduled jobs and retries to their queues, as Sidekiq's poller does.
  def enqueue_scheduled
    require "sidekiq/scheduled"
    (SIDEKIQ7 ? Sidekiq::Scheduled::Enq.new(Sidekiq.default_configuration) : Sidekiq::Scheduled::Enq.new).enqueue_jobs
  end

  # Sidekiq's Redis settings for the block (the spec's REDIS_URL, which would win, set aside), then back.
  def with_sidekiq_redis(options)
    url = ENV.delete("REDIS_URL")
    config = SIDEKIQ7 ? Sidekiq.default_configuration : nil
    saved = config && %i[@redis_config @redis].to_h { |ivar| [ivar, config.instance_variable_get(ivar)] }
    given = Sidekiq::FairTenant::Settings::SidekiqRedisGiven.given
    Sidekiq.configure_client { |c| c.redis = options }
    config&.instance_variable_set(:@redis, nil) # 7.x builds its pool once: from these settings, as 6.x does
    Sidekiq::FairTenant.reset_native!
    yield
  ensure
    ENV["REDIS_URL"] = url
    if saved
      saved.each { |ivar, value| config.instance_variable_set(ivar, value) }
    else
      Sidekiq.configure_client { |c| c.redis = { url: url } }
    end
    Sidekiq::FairTenant::Settings::SidekiqRedisGiven.given = given
    Sidekiq::FairTenant.reset_native!
  end

  # Jobs in flight in every process's in-flight hash (or format-2 list, written by a spec as an older gem would).
  def in_flight_jobs
    redis.keys("#{Sidekiq::FairTenant::Native::Fair.inflight_key("")}*")
         .sum { |key| redis.type(key) == "list" ? redis.llen(key) : redis.hlen(key) }
  end

  def redis
    @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"))
  end

  def queue_jobs(name)
    redis.lrange("queue:#{name}", 0, -1).map { |j| JSON.parse(j) }
  end

  # Enqueue times a tenant key holds (8 bytes each, after a 16-byte header).
  def entries(key)
    entries_in(redis, key)
  end

  def entries_in(conn, key)
    [(conn.strlen(key) / 8) - 2, 0].max
  end

  def queue_size(name)
    redis.llen("queue:#{name}")
  end

  def command_calls(conn = redis)
    conn.info("commandstats").transform_values { |v| v["calls"].to_i }
  end

  # Commands clients sent while the block ran (MONITOR lines, commands run by Lua left out).
  def monitor_commands
    lines = Queue.new
    ready = Queue.new
    monitor = Redis.new(url: ENV.fetch("REDIS_URL"))
    thread = Thread.new do
      Thread.current.report_on_exception = false
      # redis-rb 5+ yields nil each time its read times out with nothing to read
      monitor.monitor { |line| line == "OK" ? ready << true : (lines << line if line) }
    end
    begin
      ready.pop
      yield
      sentinel = "monitor-sentinel-#{rand(1 << 30)}"
      redis.echo(sentinel)
      seen = []
      until (line = lines.pop).include?(sentinel)
        seen << line unless line.include?(" lua]")
      end
      seen.map { |command| command[/\] "(\w+)"/, 1].downcase }
    ensure
      thread.kill
      monitor.close
    end
  end

  # Captures what the gem logs.
  def capture_log
    io = StringIO.new
    previous = Sidekiq::FairTenant.config.logger
    Sidekiq::FairTenant.config.logger = Logger.new(io)
    yield
    io.string
  ensure
    Sidekiq::FairTenant.config.logger = previous
  end
end

RSpec.configure do |config|
  config.include SpecHelpers
  config.include ActiveSupport::Testing::TimeHelpers
  config.disable_monkey_patching!
  config.order = :random
  config.example_status_persistence_file_path = "tmp/rspec-status.txt"

  config.before do
    # Middleware specs start the heartbeat/sweep thread in this process; a sweep from it would race
    # the next example's own assertions. A client it built meanwhile may come from the settings the
    # previous example had changed and restored (building one takes most of a second under GC.stress):
    # dropped with it.
    heartbeat = Sidekiq::FairTenant::Concurrency::Slots.started?
    Sidekiq::FairTenant::Concurrency::Slots.stop
    Sidekiq::FairTenant::FairFetch::Sweeper.stop # an in-process fetcher's recovery sweeps, likewise
    Sidekiq::FairTenant::FairFetch::Audit::PACE.never! # and its audit of its own in-flight list: examples call it
    Sidekiq::FairTenant.reset_native! if heartbeat
    # slots kept for a thread's next acquire, and an in-process :quiet's stop
    Sidekiq::FairTenant::Concurrency::Releases.reset!
    redis.flushdb
    Sidekiq::FairTenant.warnings.reset
  end

  config.after do
    travel_back
  end

  # A stuck example ends the run instead of hanging it (and CI): every thread's backtrace on stderr, then exit 1.
  # Not a raise into the runner, which a `rescue` around a join could swallow. The children specs start (Redis,
  # Sidekiq) watch this process and stop when it is gone.
  config.around do |example|
    limit = Float(ENV.fetch("FAIR_TENANT_EXAMPLE_TIMEOUT", 300))
    watchdog = Thread.new do
      Thread.current.name = "spec watchdog"
      sleep limit
      threads = Thread.list.map { |t| "#{t.inspect}\n  #{(t.backtrace || []).join("\n  ")}" }
      $stderr.write("\nExample stuck for #{limit} s: #{example.full_description} (#{example.location})\n" \
                    "#{threads.join("\n")}\nExiting with status 1.\n")
      $stderr.flush
      $stdout.flush
      exit!(1)
    end
    example.run
  ensure
    watchdog&.kill
  end

  # Bulk examples (thousands of calls) would take minutes each under GC.stress; they still run without it.
  config.filter_run_excluding(gc_stress: false) if ENV["FAIR_TENANT_GC_STRESS"] == "1"
end
