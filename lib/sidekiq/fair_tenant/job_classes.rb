# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # The loaded job classes that declare `fair_tenant_queues` or `fair_tenant_concurrency`.
    # Only loaded classes are found: in Rails, eager-load first (`Rails.application.eager_load!`).
    module JobClasses
      module_function

      def all
        ObjectSpace.each_object(Class).select { |klass| fair?(klass) }.sort_by(&:name)
      end

      def routed
        all.select { |klass| rules(klass) }
      end

      def find(name)
        klass = Object.const_get(name.to_s)
        raise ArgumentError, "#{name} declares no fair_tenant_queues" unless rules(klass)

        klass
      rescue NameError
        raise ArgumentError, "unknown job class #{name.inspect} (load your app first)"
      end

      def fair?(klass)
        klass.name && klass.respond_to?(:get_sidekiq_options) &&
          (options(klass).key?("fair_tenant_queues") || options(klass).key?("fair_tenant_concurrency"))
      rescue StandardError
        false
      end

      def options(klass)
        klass.get_sidekiq_options
      end

      # The class's parsed rules (a Native::RuleSet), nil without any.
      def rules(klass)
        raw = options(klass)["fair_tenant_queues"]
        return nil if JobInfo.blank?(raw)

        FairTenant.rule_cache.fetch(klass.name, raw, FairTenant.config.max_throttling_window)
      end

      # The class's concurrency scopes (Native::Concurrency each, its first first), nil without any.
      def concurrency(klass)
        raw = options(klass)["fair_tenant_concurrency"]
        raw.nil? ? nil : FairTenant.concurrency_cache.fetch(klass.name, raw)
      end

      # The class's own queue: ActiveJob's queue_name ("default" when it is a Proc, which depends
      # on each job's arguments), else the Sidekiq option.
      def default_queue(klass)
        if defined?(::ActiveJob::Base) && klass <= ::ActiveJob::Base
          queue = klass.queue_name
          return queue.is_a?(Proc) ? "default" : queue.to_s
        end
        (options(klass)["queue"] || "default").to_s
      end
    end
  end
end
