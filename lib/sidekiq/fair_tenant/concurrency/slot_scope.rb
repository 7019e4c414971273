# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Concurrency
      # The concurrency scopes of a job with `fair_tenant_concurrency`: per scope, its tenant's jobs from one (original)
      # queue, or the value of the class's `key:` method. Used by the server middleware and, for fair queues, by the
      # client (FairQueues::Push writes the slots into the job, so the fetcher takes them in the same step as the job).
      module SlotScope
        # What a job of a fair queue carries: tag, sub, limit, lease (ms), elastic (1/0), in Names::SLOT_FIELDS order,
        # for its first scope; its other scopes (`fair_tenant_concurrency: [...]`), an array of those, in MORE_FIELD.
        FIELD = Native::Names::SLOT_FIELD
        MORE_FIELD = Native::Names::SLOT_MORE_FIELD

        module_function

        # [options, tag, sub] per scope of the job, its first first; a scope named twice (two key methods returning
        # one value) once; a scope without tenant or key is passed over (one warning: the job is not held to it).
        # Raises ArgumentError on invalid options, and what the class's key or tenant method raises.
        def resolve_all(worker, job, view = JobView.new(worker, job))
          class_name = view.class_name
          all = FairTenant.concurrency_cache.fetch(class_name, job["fair_tenant_concurrency"])
          scopes = all.filter_map do |options|
            tag, sub = scope(view, options) || no_scope(class_name)
            tag && [options, tag, sub]
          end
          scopes.uniq { |_, tag, sub| [tag, sub] }
        end

        # The first scope as resolve_all gives it, or nil.
        def resolve(worker, job, view = JobView.new(worker, job))
          resolve_all(worker, job, view).first
        end

        # The slots a job pushed to a fair queue carries (one array per scope, its first first), or nil (no option, no
        # scope, or they cannot be worked out: then the server middleware decides when the job runs, as on other
        # queues).
        def descriptors(job, view = nil)
          return nil if job["fair_tenant_concurrency"].nil?

          scopes = resolve_all(job["class"], job, view || JobView.new(job["class"], job))
          scopes.empty? ? nil : scopes.map { |options, tag, sub| fields(options, tag, sub) }
        rescue StandardError => e
          FairTenant.warn(:slot_descriptor, job["class"]) do
            "#{e.class}: #{e.message}; job #{job["jid"]} takes its slot when it runs"
          end
        end

        # One scope as a job carries it, in Names::SLOT_FIELDS order.
        def fields(options, tag, sub)
          parts = { "tag" => tag, "sub" => sub, "limit" => options.limit, "lease" => options.lease_ms,
                    "elastic" => options.elastic ? 1 : 0 }
          Native::Names::SLOT_FIELDS.map { |field| parts.fetch(field) }
        end

        # [tag, sub] of the job's scope for one entry of its concurrency or rate option (Rates::Scope's too), or nil
        # (no tenant, or a blank key). The rule is Native::Slots.job_scope's; this calls what it reads: the class's
        # key method, else the job's tenant.
        def scope(view, options)
          job = view.job
          if options.key_method
            key = view.klass.public_send(options.key_method, *view.arguments)
            Native::Slots.job_scope(true, JobInfo.blank?(key) ? nil : key.to_s, nil, nil)
          else
            from = job["fair_tenant_rerouted_from"]
            from = nil if from == false # a raw payload's false names no queue
            Native::Slots.job_scope(false, view.tenant, job["queue"]&.to_s, from&.to_s)
          end
        end

        def no_scope(class_name)
          FairTenant.warn(:no_scope, class_name) do
            "#{class_name} has fair_tenant_concurrency but no tenant or key: runs unlimited"
          end
        end
      end
    end
  end
end
