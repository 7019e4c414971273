# frozen_string_literal: true

# Loaded by the `sidekiq` processes bin/bench starts to measure perform throughput.
require "logger"
require "sidekiq"
require "sidekiq/fair_tenant"

Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq.configure_server { |config| config.logger.level = Logger::WARN }

# A job that only counts itself (one INCR), without slots.
class BenchNoopJob
  include Sidekiq::Worker
  sidekiq_options queue: "default", retry: false

  def perform(*)
    Sidekiq.redis { |conn| conn.incr("bench:done") }
  end
end

# The same job under a limit high enough never to block.
class BenchNoopSlotJob < BenchNoopJob
  sidekiq_options fair_tenant_concurrency: { limit: 1_000, lease: 60 }
end

# Records when it started (bin/bench's idle-server start latency).
class BenchStampJob
  include Sidekiq::Worker
  sidekiq_options queue: "default", retry: false

  def perform(*)
    Sidekiq.redis { |conn| conn.call("SET", "bench:started", Process.clock_gettime(Process::CLOCK_REALTIME).to_s) }
  end
end
