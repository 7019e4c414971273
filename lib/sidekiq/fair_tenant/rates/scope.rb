# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class Rates
      # The rate caps a job with `fair_tenant_rate` carries into a fair queue: per scope (its tenant's jobs from one
      # (original) queue, or the value of a `key:` method, as for concurrency) its windows. A window may name its own
      # `key:` (`[{ limit: 5, per: 1 }, { limit: 100, per: 1, key: :api_scope }]`): its windows form another scope.
      # FairQueues::Push writes them into the job after its slots, so the fetch script reads them from the job's first
      # bytes. On queues that are not fair the option does nothing.
      module Scope
        # [tag, sub, limit, per (ms), limit, per (ms), ...] (Names::RATE_FIELD) for the first scope; an array of those
        # for the others (Names::RATE_MORE_FIELD).
        FIELD = Native::Names::RATE_FIELD
        MORE_FIELD = Native::Names::RATE_MORE_FIELD

        module_function

        # What a job pushed to a fair queue carries (one array per scope, its first first), or nil (no option, no
        # scope, or they cannot be worked out: then the job starts without a rate cap, one warning a minute says so).
        # Two keys that give one scope are one, with the windows of both.
        def descriptors(job, view = nil)
          raw = job["fair_tenant_rate"]
          return nil if raw.nil?

          scopes = windows_by_scope(view || JobView.new(job["class"], job), raw)
          scopes.empty? ? nil : scopes.map { |(tag, sub), flat| [tag, sub, *flat] }
        rescue StandardError => e
          FairTenant.warn(:rate_descriptor, job["class"]) do
            "#{e.class}: #{e.message}; job #{job["jid"]} starts without its rate cap"
          end
        end

        # [tag, sub] => its windows (limit, per ms, ...), in the order the option names them.
        def windows_by_scope(view, raw)
          FairTenant.rate_cache.fetch(view.class_name, raw).each_with_object({}) do |options, found|
            tag, sub = Concurrency::SlotScope.scope(view, options) || no_scope(view.class_name)
            (found[[tag, sub]] ||= []).concat(options.flat) if tag
          end
        end

        def no_scope(class_name)
          FairTenant.warn(:no_rate_scope, class_name) do
            "#{class_name} has fair_tenant_rate but no tenant or key: runs without a rate cap"
          end
        end
      end
    end
  end
end
