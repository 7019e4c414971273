# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # Prepended to Sidekiq::Client: a push to a fair queue runs the fair push script in place of Sidekiq's
      # SADD + LPUSH (one round trip, on the same connection, so in the client's shard). Every way in goes
      # through here: perform_async, set(...), push_bulk, ActiveJob, the scheduled and retry pollers, the
      # Web UI's "retry now". Scheduled jobs (`at`) and `sidekiq/testing` keep Sidekiq's own path.
      module Push
        private

        def raw_push(payloads)
          return super unless fair_candidate?(payloads.first)

          queue = one_fair_queue(payloads)
          return fair_push(queue, payloads) if queue

          # Sidekiq 8 groups a bulk push by queue: jobs of other queues keep Sidekiq's path.
          fair, plain = payloads.partition { |payload| FairQueues.fair?(payload["queue"]) }
          super(plain) unless plain.empty?
          fair.group_by { |payload| payload["queue"] }.each { |name, group| fair_push(name, group) }
          true
        ensure
          JobView.forget
        end

        def fair_candidate?(first)
          FairQueues.any? && first && !first.key?("at") && !FairQueues.testing?
        end

        # The fair queue of every payload (a push, a bulk push of one queue), or nil.
        def one_fair_queue(payloads)
          queue = payloads.first["queue"]
          queue if FairQueues.fair?(queue) && payloads.all? { |payload| payload["queue"] == queue }
        end

        def fair_push(queue, payloads)
          now = FairQueues.now
          calls = PushCalls.build(queue, payloads.map { |payload| fair_job(payload, now) })
          @redis_pool.with do |conn|
            retryable = true
            begin
              PushCalls.send_all(conn, calls) # sent again, the same calls: a bulk push's run once
            rescue StandardError => e
              # As Sidekiq's own push: after a failover the connection may point at a replica.
              raise unless retryable && e.message =~ /READONLY|NOREPLICAS|UNBLOCKED/

              conn.respond_to?(:disconnect!) ? conn.disconnect! : conn.close
              retryable = false
              retry
            end
          end
          true
        end

        # [tenant, the job as JSON]: its enqueue time set, and the fields the scripts read first.
        def fair_job(payload, now)
          payload["enqueued_at"] = now
          payload.delete(Interruptions::COUNT) # a push (a retry, by hand or not) starts the count again
          view = JobView.take(payload) # the middleware's, if it looked at this job: one tenant lookup per push
          FairQueues.carry_slot(payload, view)
          [FairQueues.tenant(payload, view), Sidekiq.dump_json(JobBytes.head_first(payload))]
        end
      end
    end
  end
end
