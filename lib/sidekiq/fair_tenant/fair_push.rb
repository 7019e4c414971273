# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Prepended to Sidekiq::Client: a push to a fair queue runs the fair push script in place of Sidekiq's
    # SADD + LPUSH (one round trip, on the same connection, so in the client's shard). Every way in goes
    # through here: perform_async, set(...), push_bulk, ActiveJob, the scheduled and retry pollers, the
    # Web UI's "retry now". Scheduled jobs (`at`) and `sidekiq/testing` keep Sidekiq's own path.
    module FairPush
      private

      def raw_push(payloads)
        first = payloads.first
        return super if first.nil? || first.key?("at") || !FairQueues.fair?(first["queue"]) || FairQueues.testing?

        fair_push(first["queue"], payloads)
      end

      def fair_push(queue, payloads)
        now = FairQueues.now
        seconds = now.is_a?(Integer) ? now / 1000.0 : now
        pairs = payloads.map do |payload|
          payload["enqueued_at"] = now
          [FairQueues.tenant(payload), Sidekiq.dump_json(payload)]
        end
        @redis_pool.with do |conn|
          retryable = true
          begin
            FairQueues.push(conn, queue, pairs, seconds)
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
    end
  end
end
