# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # Said once when a server process starts, if job classes with `fair_tenant_queues` rules send their jobs to
      # a fair queue: those jobs stay there unless a rule has `from_fair_queue: true` (the line is the extension's,
      # fair/rules.rs).
      module RulesCheck
        module_function

        def warn_at_boot(classes = JobClasses.routed)
          line = notice(classes)
          FairTenant.logger.warn(Printable.log(line)) if line
        rescue StandardError => e
          FairTenant.logger.warn(Printable.log("fair queue rule check failed: #{e.class}: #{e.message}"))
        end

        def notice(classes = JobClasses.routed)
          return nil unless FairQueues.any?

          sources = classes.filter_map do |klass|
            queue = JobClasses.default_queue(klass)
            [klass.name, queue, JobClasses.rules(klass)] if FairQueues.fair?(queue)
          end
          Native::RuleSet.fair_queue_notice(sources)
        end
      end
    end
  end
end
