# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Concurrency
      # Runtime concurrency limits stored in Redis, changed without a deploy. A per-queue override
      # beats a tenant-wide one, which beats the class's `fair_tenant_concurrency` limit. Raising a
      # limit releases parked jobs at once; 0 halts the scope (its jobs park) until raised. They live
      # with the slots, in Sidekiq's Redis (this process's default one: one shard), and are written and
      # read on Sidekiq's own connection; keys, arguments and replies' meaning come from the extension.
      #
      #   limits = Sidekiq::FairTenant.limits
      #   limits.set(3, tenant: "acme")                    # every queue of acme
      #   limits.set(5, tenant: "acme", queue: "default")  # acme's jobs from "default"
      #   limits.set(2, key: "customer-42")                # a custom concurrency key
      #   limits.get(tenant: "acme")                       # => 3 (nil when not overridden)
      #   limits.delete(tenant: "acme")                    # back to the class default
      #   limits.list                                      # => [{tenant: "acme", queue: nil, limit: 3}, ...]
      class Limits
        include OverrideScope

        MAX = 1_000_000
        INDEX_KEY = Native::Limits.index_key.freeze

        # Returns how many parked jobs were released by the change.
        def set(limit, tenant: nil, queue: nil, key: nil)
          tag, field = target(tenant, queue, key)
          handed(tag, field, write(tag, field, validate(limit)))
        end

        def get(tenant: nil, queue: nil, key: nil)
          tag, field = target(tenant, queue, key)
          Native::Limits.value(SidekiqRedis.with { |conn| conn.call("HGET", Native::Limits.key(tag), field) })
        end

        def delete(tenant: nil, queue: nil, key: nil)
          tag, field = target(tenant, queue, key)
          handed(tag, field, write(tag, field, nil))
        end

        def list
          entries = SidekiqRedis.with { |conn| stored(conn, INDEX_KEY) { |tag| Native::Limits.key(tag) } }
          Native::Limits.targets(entries)
        end

        private

        # Each call hands over a bounded number of parked jobs per scope (Names::HAND_OVER_BATCH): called again
        # (the same value) until nothing more can go.
        def write(tag, field, limit)
          call = Native::Limits.set_call(tag, field, limit)
          SidekiqRedis.with do |conn|
            total = 0
            loop do
              handed, more = ScriptRunner.run(conn, "set_limit", *call)
              total += handed
              break total unless more == 1
            end
          end
        end

        def handed(tag, field, count)
          Instrumentation.instrument(:hand_over, scope: [tag, field], count: count) if count.positive?
          count
        end

        def validate(limit)
          value = limit.is_a?(String) && limit.match?(/\A\s*\d+\s*\z/) ? limit.to_i : limit
          return value if value.is_a?(Integer) && value.between?(0, MAX)

          raise ArgumentError, "limit must be an Integer from 0 to #{MAX}, got #{limit.inspect}"
        end
      end
    end
  end
end
