# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Publishes what the gem does as ActiveSupport::Notifications events when ActiveSupport is
    # loaded, otherwise as debug log lines. Events (payload keys):
    #
    #   reroute.sidekiq_fair_tenant          job_class, tenant, jid, from, to, rule
    #   park.sidekiq_fair_tenant             job_class, tenant, jid, queue, scope
    #   hand_over.sidekiq_fair_tenant        scope, count (a release or a raised limit freed slots)
    #   lease_reclaimed.sidekiq_fair_tenant  count, handed
    #
    #   ActiveSupport::Notifications.subscribe("reroute.sidekiq_fair_tenant") do |event|
    #     StatsD.increment("fair_tenant.reroute", tags: ["queue:#{event.payload[:to]}"])
    #   end
    module Instrumentation
      NAMESPACE = "sidekiq_fair_tenant"

      module_function

      EVENTS = Hash.new { |names, event| names[event] = "#{event}.#{NAMESPACE}".freeze }

      # A failing subscriber never breaks a push or a job: it is logged (rate limited). The payload may be given
      # as a block, called only when someone listens (an ActiveSupport subscriber, or a logger at debug level):
      # an event on every push costs nothing then.
      def instrument(event, payload = nil)
        if defined?(::ActiveSupport::Notifications)
          name = EVENTS[event]
          ::ActiveSupport::Notifications.instrument(name, payload || yield) if listening?(name)
        elsif FairTenant.logger.debug?
          log(event, payload || yield)
        end
      rescue StandardError => e
        FairTenant.warn(:instrument, event) do
          "#{event} subscriber raised #{e.class}: #{e.message}"
        end
      end

      def listening?(name) = ::ActiveSupport::Notifications.notifier.listening?(name)

      def log(event, payload)
        FairTenant.logger.debug { Printable.log("#{event} #{payload.map { |k, v| "#{k}=#{v}" }.join(" ")}") }
      end
    end
  end
end
