# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # The concurrency scope of a job with `fair_tenant_concurrency`: its tenant's jobs from one (original) queue,
    # or the value of the class's `key:` method. Used by the server middleware and, for fair queues, by the
    # client (FairPush writes the slot into the job, so the fetcher takes it in the same step as the job).
    module SlotScope
      # What a job of a fair queue carries: tag, sub, limit, lease (ms), elastic (1/0), in Names::SLOT_FIELDS order.
      FIELD = Native::Names::SLOT_FIELD

      module_function

      # [options, tag, sub], or nil when the job has no tenant or key (one warning: it runs unlimited).
      # Raises ArgumentError on invalid options, and what the class's key or tenant method raises.
      def resolve(worker, job, view = JobView.new(worker, job))
        class_name = view.class_name
        options = FairTenant.concurrency_cache.fetch(class_name, job["fair_tenant_concurrency"])
        tag, sub = scope(view, options, class_name)
        tag && [options, tag, sub]
      end

      # The slot a job pushed to a fair queue carries, or nil (no option, no scope, or it cannot be worked out:
      # then the server middleware decides when the job runs, as on other queues).
      def descriptor(job, view = nil)
        return nil if job["fair_tenant_concurrency"].nil?

        options, tag, sub = resolve(job["class"], job, view || JobView.new(job["class"], job))
        return nil unless options

        parts = { "tag" => tag, "sub" => sub, "limit" => options.limit, "lease" => options.lease_ms,
                  "elastic" => options.elastic ? 1 : 0 }
        Native::Names::SLOT_FIELDS.map { |field| parts.fetch(field) }
      rescue StandardError => e
        FairTenant.warn(:slot_descriptor, job["class"]) do
          "#{e.class}: #{e.message}; job #{job["jid"]} takes its slot when it runs"
        end
        nil
      end

      def scope(view, options, class_name)
        if options.key_method
          key = view.klass.public_send(options.key_method, *view.arguments)
          return Native::Slots.key_scope(key.to_s) unless JobInfo.blank?(key)
        else
          tenant = view.tenant
          job = view.job
          queue = job["fair_tenant_rerouted_from"] || job["queue"]
          return Native::Slots.tenant_scope(tenant, queue.to_s) if tenant
        end
        FairTenant.warn(:no_scope, class_name) do
          "#{class_name} has fair_tenant_concurrency but no tenant or key: runs unlimited"
        end
      end
    end
  end
end
