# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # What the middleware needs to know about a job payload: its class, the queue that class
    # sends jobs to by default, its perform arguments and its tenant. Works for Sidekiq jobs
    # and ActiveJob classes on the Sidekiq adapter (Rails' or Sidekiq 7.3.9+'s own), whether the
    # class arrives as a Class or, on a re-push by the scheduler/retry poller/Web UI, a String.
    module JobInfo
      module_function

      # The job class (ActiveJob's wrapped class for wrapper jobs), or nil if not loaded here.
      def job_class(worker, job)
        klass = job["wrapped"] || worker
        return klass if klass.is_a?(Class)

        Object.const_get(klass.to_s)
      rescue NameError
        nil
      end

      def class_name(worker, job)
        name = job["wrapped"] || worker
        name.is_a?(Class) ? name.name.to_s : name.to_s
      end

      def active_job?(klass, job)
        return false unless job.key?("wrapped")

        defined?(::ActiveJob::Base) && klass.is_a?(Class) && klass <= ::ActiveJob::Base
      end

      # The queue a job of this class goes to when nobody asks for another one; nil if unknown. The block, if
      # given, returns the perform arguments (JobView's, worked out once).
      def default_queue(klass, job, &args)
        return nil unless klass

        if active_job?(klass, job)
          queue = klass.queue_name
          queue = active_job_instance(klass, job, &args).queue_name if queue.is_a?(Proc)
          queue&.to_s
        elsif klass.respond_to?(:get_sidekiq_options)
          klass.get_sidekiq_options["queue"]&.to_s
        end
      end

      # Perform arguments: ActiveJob's are deserialized (GlobalID records included), so
      # `self.fair_tenant(*args)` sees what `perform` sees.
      def arguments(klass, job)
        return job["args"] unless active_job?(klass, job)

        serialized = job.dig("args", 0, "arguments") || []
        begin
          ::ActiveJob::Arguments.deserialize(serialized)
        rescue StandardError
          serialized
        end
      end

      # A job's tenant, first found: job["fair_tenant"] (given_tenant), Class.fair_tenant(*args), job["apartment"]
      # (derived_tenant). JobView#tenant asks in this order.
      def given_tenant(job)
        tenant = job["fair_tenant"]
        blank?(tenant) ? nil : stored_tenant(tenant.to_s, job)
      end

      # Class.fair_tenant(*args), then job["apartment"]; the block, if given, returns the arguments.
      def derived_tenant(klass, job)
        if klass.respond_to?(:fair_tenant)
          tenant = klass.fair_tenant(*(block_given? ? yield : arguments(klass, job)))
        end
        tenant = job["apartment"] if blank?(tenant)
        blank?(tenant) ? nil : stored_tenant(tenant.to_s, job)
      end

      # A tenant name as every structure of the gem names it: a name longer than Names::TENANT_MAX_BYTES bytes
      # becomes its short form (a prefix and the SHA-1 of the whole, Native::Tenant), with one warning a minute
      # per class that names the class and the length, never the name.
      def stored_tenant(tenant, job)
        short = Native::Tenant.stored(tenant) or return tenant

        FairTenant.warn(:long_tenant, job["wrapped"] || job["class"]) do
          "#{job["wrapped"] || job["class"]}: a tenant name of #{tenant.bytesize} bytes is longer than " \
            "#{Native::Names::TENANT_MAX_BYTES}; stored as its first bytes and its SHA-1 (docs/CONFIGURATION.md)"
        end
        short
      end

      # A tenant name given to an API (weights, limits, stats): its stored form, without a warning. The length
      # rule is Native::Tenant.stored's (nil: the name is kept as it is).
      def stored_name(tenant)
        tenant = tenant.to_s
        Native::Tenant.stored(tenant) || tenant
      end

      def blank?(value)
        value.nil? || (value.respond_to?(:empty?) && value.empty?)
      end

      def active_job_instance(klass, job)
        data = job.dig("args", 0) || {}
        klass.new(*(block_given? ? yield : arguments(klass, job))).tap do |instance|
          instance.job_id = data["job_id"] if data["job_id"]
        end
      end
    end
  end
end
