# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Routing
      # Client middleware that re-routes a greedy tenant's jobs to the queue of the last
      # `fair_tenant_queues` rule whose sliding-window count (this job included) exceeds its
      # threshold. One Redis round trip per push (an EVALSHA on the gem's own pool).
      #
      # A job whose queue is a fair queue stays there: only rules with `from_fair_queue: true` apply
      # to it, and without any the push is neither counted nor routed (no round trip).
      #
      # It never loses a job and never raises into the enqueueing code, except an ArgumentError
      # for invalid rules pushed from a class (code you control). Anything else - Redis down or
      # slow, a re-pushed payload with odd values, a bug here - leaves the job on its original
      # queue and logs one rate-limited warning.
      class ClientMiddleware
        include ::Sidekiq::ClientMiddleware if defined?(::Sidekiq::ClientMiddleware)

        COUNTED = "fair_tenant_counted"

        def call(worker, job, _queue, _redis_pool = nil)
          raw = job["fair_tenant_queues"]
          # Scheduled: counted and routed when the poller pushes it to its queue. Already counted:
          # a retry, a "retry now" from the Web UI or a scheduled job's second pass.
          unless JobInfo.blank?(raw) || job.key?("at") || job[COUNTED]
            view = JobView.new(worker, job)
            rules = rules_for(view.class_name, worker, job, raw)
            route(rules, view.class_name, view) if rules
            keep(view)
          end
          yield
        end

        private

        # What routing worked out (class, arguments, tenant), for the fair push of this job (FairQueues::Push).
        def keep(view)
          JobView.keep(view) if view.resolved? && FairQueues.fair?(view.job["queue"]) && !FairQueues.testing?
        end

        def route(rules, class_name, view)
          job = view.job
          queue = job["queue"]
          fair = FairQueues.fair?(queue)
          return unless rules.routes?(fair) # a fair queue's job, and no rule asked to re-route it

          default = view.default_queue
          return if default && default != queue # pushed to an explicit queue: respect it

          tenant = view.tenant
          return warn_no_tenant(class_name) unless tenant

          job["fair_tenant"] = json_safe(tenant)
          index = FairTenant.native.router.route(rules, class_name, queue, tenant, Time.now.to_f, fair)
          job[COUNTED] = true
          reroute(class_name, job, rules, index, queue) if index
        rescue StandardError => e
          FairTenant.warn(:failure, e.class) do
            "#{e.class}: #{e.message}; job #{job["jid"]} stays on #{job["queue"].inspect}"
          end
        end

        # Invalid rules raise from code you control (a push from the class); a re-push by Sidekiq
        # (class given as a String) logs and leaves the job alone.
        def rules_for(class_name, worker, job, raw)
          FairTenant.rule_cache.fetch(class_name, raw, FairTenant.config.max_throttling_window)
        rescue StandardError => e
          raise if e.is_a?(ArgumentError) && worker.is_a?(Class)

          FairTenant.warn(:invalid_rules, class_name) { "#{e.message}; job #{job["jid"]} not re-routed" }
          nil
        end

        def reroute(class_name, job, rules, index, queue)
          target = rules.queue(index)
          return if target == queue

          job["queue"] = target
          job["fair_tenant_rule"] = index
          job["fair_tenant_rerouted_from"] = queue
          Instrumentation.instrument(:reroute) do
            { job_class: class_name, tenant: job["fair_tenant"], jid: job["jid"], from: queue, to: target, rule: index }
          end
        end

        # The payload is JSON: a tenant that is not valid UTF-8 is recorded scrubbed (the Redis key
        # keeps its exact bytes).
        def json_safe(tenant)
          return tenant if tenant.encoding == Encoding::UTF_8 && tenant.valid_encoding?

          tenant.dup.force_encoding(Encoding::UTF_8).scrub
        end

        def warn_no_tenant(class_name)
          FairTenant.warn(:no_tenant, class_name) do
            "#{class_name} has fair_tenant_queues but no tenant: set `fair_tenant` " \
              "(Job.set(fair_tenant: ...), def self.fair_tenant(*args)); its jobs are not re-routed"
          end
        end
      end
    end
  end
end
