# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Settings
      # When a server process starts: Sidekiq's Redis server has what the gem's scripts need (the needs and the
      # rule are the extension's, server_check.rs), or the process refuses to start with an error naming the
      # server, its version and what it lacks, instead of a fair queue's first fetch failing in a script. A server
      # that cannot be asked (no INFO for this user, a proxy) is logged and let through.
      module ServerCheck
        module_function

        def verify_at_boot(config)
          info = config.redis { |conn| conn.call("INFO", "server") }.to_s
          problem = Native::ServerCheck.problem(info, FairQueues.any?)
          raise ConfigurationError, "sidekiq-fair_tenant-rs: #{problem}" if problem

          FairTenant.logger.info(Printable.log("Redis server: #{Native::ServerCheck.describe(info)}"))
        rescue ConfigurationError
          raise
        rescue StandardError => e
          FairTenant.logger.warn(Printable.log("Redis server check skipped: #{e.class}: #{e.message}"))
        end
      end
    end
  end
end
