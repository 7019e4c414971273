# frozen_string_literal: true

# A Sidekiq app for the boot-check spec: the sample job classes and the gem.
require "active_support"
require "active_support/core_ext/numeric/time"
require "logger"
require "sidekiq"
require "sidekiq/fair_tenant"
require_relative "jobs"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
Sidekiq.configure_server do |config|
  config.logger.level = Logger::WARN
  # Runs after the gem's own startup hook (registered when it was required).
  config.on(:startup) { config.logger.warn("queue check done") }
end

# Exit when the spec process is gone.
if (parent = ENV.fetch("FAIR_TENANT_SPEC_PARENT", nil))
  Thread.new do
    loop do
      sleep 1
      Process.kill(0, Integer(parent))
    rescue Errno::ESRCH
      Process.kill("KILL", Process.pid)
    end
  end
end
