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

      # A failing subscriber never breaks a push or a job: it is logged (rate limited).
      def instrument(event, payload)
        if defined?(::ActiveSupport::Notifications)
          ::ActiveSupport::Notifications.instrument("#{event}.#{NAMESPACE}", payload)
        else
          logger = FairTenant.logger
          logger.debug { "[sidekiq-fair_tenant] #{event} #{payload.map { |k, v| "#{k}=#{v}" }.join(" ")}" }
        end
      rescue StandardError => e
        FairTenant.warn(:instrument, event) do
          "#{event} subscriber raised #{e.class}: #{e.message}"
        end
      end
    end
  end
end
