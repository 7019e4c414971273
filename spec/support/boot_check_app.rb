# frozen_string_literal: true

# A Sidekiq app for the boot-check spec: the sample job classes and the gem.
require "active_support"
require "active_support/core_ext/numeric/time"
require "logger"
require "sidekiq"
require "sidekiq/fair_tenant"
require_relative "jobs"

Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
Sidekiq.configure_server do |config|
  config.logger.level = Logger::INFO # the Redis server check's line
  # Runs after the gem's own startup hook (registered when it was required).
  config.on(:startup) { config.logger.warn("queue check done") }
end

require_relative "parent_watch"
