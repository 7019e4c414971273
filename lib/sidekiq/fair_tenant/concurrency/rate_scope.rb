# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # The rate cap a job with `fair_tenant_rate` carries into a fair queue: its scope (its tenant's jobs from one
    # (original) queue, or the value of the class's `key:` method, as for concurrency) and its windows. FairPush
    # writes it into the job after its slot, so the fetch script reads it from the job's first bytes. On queues
    # that are not fair the option does nothing.
    module RateScope
      # [tag, sub, limit, per (ms), limit, per (ms), ...] (Names::RATE_FIELD).
      FIELD = Native::Names::RATE_FIELD

      module_function

      # What a job pushed to a fair queue carries, or nil (no option, no scope, or it cannot be worked out:
      # then the job starts without a rate cap, one warning a minute says so).
      def descriptor(job, view = nil)
        raw = job["fair_tenant_rate"]
        return nil if raw.nil?

        view ||= JobView.new(job["class"], job)
        options = FairTenant.rate_cache.fetch(view.class_name, raw)
        tag, sub = scope(view, options)
        tag && [tag, sub, *options.flat]
      rescue StandardError => e
        FairTenant.warn(:rate_descriptor, job["class"]) do
          "#{e.class}: #{e.message}; job #{job["jid"]} starts without its rate cap"
        end
        nil
      end

      def scope(view, options)
        if options.key_method
          key = view.klass.public_send(options.key_method, *view.arguments)
          return Native::Slots.key_scope(key.to_s) unless JobInfo.blank?(key)
        else
          tenant = view.tenant
          queue = view.job["fair_tenant_rerouted_from"] || view.job["queue"]
          return Native::Slots.tenant_scope(tenant, queue.to_s) if tenant
        end
        FairTenant.warn(:no_rate_scope, view.class_name) do
          "#{view.class_name} has fair_tenant_rate but no tenant or key: runs without a rate cap"
        end
      end
    end
  end
end
