# frozen_string_literal: true

require "sidekiq"
require "uri"

require_relative "fair_tenant/loader"

module Sidekiq
  # Keeps one greedy tenant of a multi-tenant Sidekiq application from starving the others.
  #
  #   class SyncOrdersJob
  #     include Sidekiq::Job
  #     sidekiq_options queue: "default",
  #                     fair_tenant_queues: [
  #                       { queue: "throttled_2x", threshold: 100, per: 1.hour },
  #                       { queue: "throttled_4x", threshold: 10, per: 1.minute }
  #                     ]
  #
  #     def self.fair_tenant(shop_id, *) = "shop-#{shop_id}"
  #   end
  #
  #   SyncOrdersJob.perform_async(42)                           # tenant from self.fair_tenant
  #   SyncOrdersJob.set(fair_tenant: "acme").perform_async(42)  # or given explicitly
  #
  # Requiring this file adds the client middleware to Sidekiq's client and server chains.
  module FairTenant
    class << self
      def config
        @config ||= Config.new
      end

      # Yields the config; rebuilds the Redis pool if connection settings changed. Compares the
      # settings as given: working out the effective URL here could ask Sidekiq for its Redis
      # before the app has configured it.
      def configure
        before = config.raw_connection_settings
        yield config
        reset_native! if config.raw_connection_settings != before
        config
      end

      def max_throttling_window = config.max_throttling_window
      def enqueues_key = config.enqueues_key
      def logger = config.logger

      # The extension's connection to the gem's Redis for this process (a Native::Client), and through
      # it routing: `native.router`, and `native.stats` for tenant counts (made on first use, kept by the
      # client). Rebuilt after a fork, those objects with it: a child never touches the parent's
      # sockets. Ask for them through `native` each time; never keep one.
      def native
        client = @native
        return client if client && @native_pid == ::Process.pid

        client = Native::Client.new(config.connection_settings)
        @native_pid = ::Process.pid
        @native = client
      end

      def reset_native!
        @native = nil
      end

      def rule_cache
        @rule_cache ||= OptionCache.new { |name, raw, window| Native::RuleSet.new(name, raw, window) }
      end

      def concurrency_cache
        @concurrency_cache ||= OptionCache.new { |name, raw, _| Native::Concurrency.list(name, raw) }
      end

      def rate_cache
        @rate_cache ||= OptionCache.new { |name, raw, _| Native::Rate.list(name, raw) }
      end

      def warnings
        @warnings ||= RateLimitedLog.new
      end

      # Logs the block's message at most once a minute per (kind, subject); returns nil.
      def warn(kind, subject, &block)
        warnings.warn([kind, subject], logger, &block)
        nil
      end

      # Checks the Redis connection; raises ConnectionError/TimeoutError when it fails.
      def ping
        native.ping
      end

      # Runtime concurrency limits (see Concurrency::Limits).
      def limits
        @limits ||= Concurrency::Limits.new
      end

      # What fair queues hold right now (see FairQueues::Stats).
      def fair_stats
        @fair_stats ||= FairQueues::Stats.new
      end

      # Where a job stands and what holds it, by its jid (see FairQueues::Why).
      def why(jid)
        FairQueues::Why.new.call(jid)
      end

      # Runtime weights of tenants in fair queues (see FairQueues::Weights).
      def weights
        @weights ||= FairQueues::Weights.new
      end

      # Runtime rate overrides of `fair_tenant_rate` (see Rates).
      def rates
        @rates ||= Rates.new
      end

      # Tenants, counts and concurrency scopes (see Routing::Stats).
      def stats
        @stats ||= Routing::Stats.new
      end

      def register_client_middleware(config)
        config.client_middleware do |chain|
          chain.add Routing::ClientMiddleware unless chain.exists?(Routing::ClientMiddleware)
        end
      end

      # Server side: the client middleware (jobs pushed from jobs) and the slots middleware, with
      # the heartbeat/sweep thread running while the process works.
      def register_server_middleware(config)
        register_client_middleware(config)
        config.server_middleware do |chain|
          chain.add Concurrency::ServerMiddleware unless chain.exists?(Concurrency::ServerMiddleware)
        end
        config.on(:startup) do
          Settings::ServerCheck.verify_at_boot(config)
          FairQueues::Fetch.install(config) if FairQueues.any?
          Routing::QueueConfig.warn_at_boot(config)
          FairQueues::RulesCheck.warn_at_boot
          Concurrency::Slots.start
        end
        config.on(:quiet) do
          FairQueues::Fetch::Sweeper.stop
          # no next job: slots kept for a thread's next acquire go back now, and from now on at once
          Concurrency::Releases.flush
        end
        config.on(:shutdown) do
          FairQueues::Fetch::Sweeper.stop
          Concurrency::Releases.flush
          Concurrency::Slots.stop_when_idle # leases of running jobs live through Sidekiq's shutdown timeout
        end
      end
    end

    # Public names: the classes users name in their Sidekiq config (middleware chains, `fetch_class`) and the
    # docs show, kept as aliases of the classes in their folders' namespaces (spec/unit/layout_spec.rb).
    ClientMiddleware = Routing::ClientMiddleware
    ServerMiddleware = Concurrency::ServerMiddleware
    FairFetch = FairQueues::Fetch

    Routing::OptionsValidation.install
    ::Sidekiq::Client.prepend(FairQueues::Push)
    FairQueues::Visibility.install
  end
end

Sidekiq::FairTenant::Loader.eager_load

Sidekiq.configure_client { |config| Sidekiq::FairTenant.register_client_middleware(config) }
Sidekiq.configure_server { |config| Sidekiq::FairTenant.register_server_middleware(config) }
