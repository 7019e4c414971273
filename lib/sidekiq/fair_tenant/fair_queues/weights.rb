# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # Runtime weights of tenants in fair queues, stored in Sidekiq's Redis and changed without a deploy.
      # A backlogged tenant gets service in proportion to its weight (default 1); a per-queue weight beats
      # the tenant's; 0 pauses the tenant (its jobs wait, it leaves the rotation) until raised.
      #
      #   weights = Sidekiq::FairTenant.weights
      #   weights.set(3, tenant: "acme")                    # every fair queue
      #   weights.set(0.5, tenant: "acme", queue: "imports") # acme in "imports" only
      #   weights.get(tenant: "acme")                       # => 3.0 (nil when not set)
      #   weights.delete(tenant: "acme")                    # back to 1
      #   weights.list                                      # => [{tenant: "acme", queue: nil, weight: 3.0}, ...]
      class Weights
        PAUSED_QUEUES = Native::Names::FAIR_PAUSED_QUEUES_KEY
        # Returns the number of fair queues where the tenant resumed (it was paused there).
        def set(weight, tenant:, queue: nil)
          write(tenant, queue, format_weight(Native::Fair.check_weight(number(weight))))
        end

        def get(tenant:, queue: nil)
          value = Sidekiq.redis { |conn| conn.call("HGET", FairQueues::WEIGHTS_KEY, field(tenant, queue)) }
          value&.to_f
        end

        def delete(tenant:, queue: nil)
          write(tenant, queue, "")
        end

        def list
          pairs = Sidekiq.redis { |conn| conn.call("HGETALL", FairQueues::WEIGHTS_KEY) }
          pairs = pairs.to_a.flatten.each_slice(2) unless pairs.is_a?(Hash)
          rows = pairs.map do |field, value|
            tenant, queue = Native::Fair.parse_weight_field(field)
            { tenant: tenant, queue: queue, weight: value.to_f }
          end
          rows.sort_by { |row| [row[:tenant], row[:queue].to_s] }
        end

        private

        # The tenant resumes wherever it was paused: fair queues Sidekiq's `queues` set names, those where a tenant
        # was paused (a set of the gem's: `Queue#clear` empties Sidekiq's) and this process's fair queues.
        def write(tenant, queue, value)
          Sidekiq.redis do |conn|
            queues = (conn.call("SUNION", "queues", PAUSED_QUEUES) | FairQueues.names).uniq
            ScriptRunner.run(conn, "weight", [FairQueues::WEIGHTS_KEY],
                             [field(tenant, queue), value, JobInfo.stored_name(tenant), *queues])
          end
        end

        def field(tenant, queue)
          raise ArgumentError, "weights need tenant:, got #{tenant.inspect}" if tenant.nil?

          Native::Fair.weight_field(JobInfo.stored_name(tenant), JobInfo.blank?(queue) ? nil : queue.to_s)
        end

        def number(weight)
          return weight.to_f if weight.is_a?(Numeric)

          Float(weight.to_s, exception: false) ||
            raise(ArgumentError,
                  "weight must be a number from 0 to 1000000 (0 pauses the tenant), got #{weight.inspect}")
        end

        # 3.0 -> "3", 0.5 -> "0.5": what the scripts read back.
        def format_weight(weight)
          weight == weight.to_i ? weight.to_i.to_s : weight.to_s
        end
      end
    end
  end
end
