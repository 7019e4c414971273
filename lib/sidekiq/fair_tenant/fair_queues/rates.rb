# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Runtime rate overrides for `fair_tenant_rate`, changed without a deploy, as Limits are for concurrency. An
    # override replaces the windows of the jobs whose scope it names (a per-queue override beats a tenant-wide
    # one); jobs without `fair_tenant_rate` are not capped by it. It takes effect at once: tenants waiting for a
    # rate window in the fair queues rejoin the rotation and the next fetch checks them under the new windows.
    # The starts already counted stay counted. Stored in Sidekiq's Redis, beside the fair queues.
    #
    #   rates = Sidekiq::FairTenant.rates
    #   rates.set([{ limit: 5, per: 1 }, { limit: 10_000, per: 86_400 }], tenant: "acme")  # or "5/1,10000/86400"
    #   rates.set([{ limit: 2, per: 1 }], tenant: "acme", queue: "default")
    #   rates.set("2/1", key: "shop-42")                # a `key:` scope
    #   rates.get(tenant: "acme")                       # => [{limit: 5, per: 1.0}, ...] (nil: not overridden)
    #   rates.delete(tenant: "acme")                    # back to the class's windows
    #   rates.list                                      # => [{tenant: "acme", queue: nil, windows: [...]}, ...]
    class Rates
      include OverrideScope

      INDEX_KEY = Native::Rate.overrides_index_key.freeze
      BATCH = Native::Names::RATE_RECHECK_BATCH

      # Returns how many waiting tenants were brought back into the rotation to be checked again.
      def set(windows, tenant: nil, queue: nil, key: nil)
        write(*target(tenant, queue, key), Native::Rate.for_override(windows).encoded)
      end

      def get(tenant: nil, queue: nil, key: nil)
        tag, field = target(tenant, queue, key)
        Native::Rate.stored(Sidekiq.redis { |conn| conn.call("HGET", Native::Rate.overrides_key(tag), field) })
      end

      def delete(tenant: nil, queue: nil, key: nil)
        write(*target(tenant, queue, key), "")
      end

      def list
        entries = Sidekiq.redis { |conn| stored(conn, INDEX_KEY) { |tag| Native::Rate.overrides_key(tag) } }
        Native::Rate.override_targets(entries)
      end

      private

      # The override, then each queue's rated tenants in bounded calls (BATCH each). Returns the tenants brought back.
      def write(tag, field, value)
        keys = [Native::Rate.overrides_key(tag), INDEX_KEY]
        Sidekiq.redis do |conn|
          queues = (conn.call("SMEMBERS", "queues") | FairQueues.names).sort
          (queues.empty? ? [""] : queues).each_with_index.sum do |queue, i|
            recheck(conn, keys, [field, value, tag], queue, first: i.zero?)
          end
        end
      end

      def recheck(conn, keys, args, queue, first:)
        back = 0
        from = 0
        while from >= 0
          brought, from = FairQueues.run(conn, "set_rate", keys, [*args, first ? "1" : "0", queue, from, BATCH])
          first = false
          back += brought
        end
        back
      end
    end
  end
end
