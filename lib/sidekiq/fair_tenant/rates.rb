# frozen_string_literal: true

require "securerandom"
require_relative "loader"

module Sidekiq
  module FairTenant
    # Runtime rate overrides for `fair_tenant_rate`, changed without a deploy, as Concurrency::Limits are for
    # concurrency. An override replaces the windows of the jobs whose scope it names (a per-queue override beats a
    # tenant-wide one); jobs without `fair_tenant_rate` are not capped by it. It takes effect at once: tenants waiting
    # for a rate window in the fair queues rejoin the rotation and the next fetch checks them under the new windows. The
    # starts already counted stay counted. Stored in Sidekiq's Redis, beside the fair queues.
    #
    #   rates = Sidekiq::FairTenant.rates
    #   rates.set([{ limit: 5, per: 1 }, { limit: 10_000, per: 86_400 }], tenant: "acme")  # or "5/1,10000/86400"
    #   rates.set([{ limit: 2, per: 1 }], tenant: "acme", queue: "default")
    #   rates.set("2/1", key: "shop-42")                # a `key:` scope
    #   rates.get(tenant: "acme")                       # => [{limit: 5, per: 1.0}, ...] (nil: not overridden)
    #   rates.delete(tenant: "acme")                    # back to the class's windows
    #   rates.list                                      # => [{tenant: "acme", queue: nil, windows: [...]}, ...]
    class Rates
      Loader.register(self)

      include Concurrency::OverrideScope

      INDEX_KEY = Native::Rate.overrides_index_key.freeze
      RECHECKS_KEY = Native::Names::RATE_RECHECKS_KEY
      BATCH = Native::Names::RATE_RECHECK_BATCH
      # Rechecks cut short that one recovery sweep finishes (the rest wait for the next).
      FINISH_BATCH = 20

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

      # The rechecks that writers cut short left (killed between calls, a call refused), finished: each one's
      # rated tenants brought back on every fair queue, then its mark removed unless written again since. Run by
      # the recovery sweep. Returns the tenants brought back.
      def finish(conn)
        _cursor, page = conn.call("HSCAN", RECHECKS_KEY, "0", "COUNT", FINISH_BATCH)
        pairs(page).sum do |member, nonce|
          tag, field = Native::Rate.recheck_target(member)
          pending = [member, nonce]
          back = tag ? apply(conn, [field, "", tag], pending, write: false) : 0
          done(conn, pending)
          back
        end
      end

      private

      # The override, then each queue's rated tenants in bounded calls (BATCH each), then its mark removed.
      # Returns the tenants brought back.
      def write(tag, field, value)
        pending = [Native::Rate.recheck_member(tag, field), SecureRandom.hex(8)]
        Sidekiq.redis do |conn|
          back = apply(conn, [field, value, tag], pending, write: true)
          done(conn, pending)
          back
        end
      end

      def apply(conn, args, pending, write:)
        queues = (conn.call("SMEMBERS", "queues") | FairTenant.config.fair_queues).sort
        (queues.empty? ? [""] : queues).each_with_index.sum do |queue, i|
          recheck(conn, args, pending, queue, first: write && i.zero?)
        end
      end

      def recheck(conn, args, pending, queue, first:)
        back = 0
        from = 0
        while from >= 0
          brought, from = ScriptRunner.run(conn, "set_rate", keys(args[2]),
                                           [*args, first ? "1" : "0", queue, from, BATCH, *pending])
          first = false
          back += brought
        end
        back
      end

      def done(conn, pending)
        ScriptRunner.run(conn, "set_rate", keys(""), ["", "", "", "0", "", 0, 0, *pending])
      end

      def keys(tag) = [Native::Rate.overrides_key(tag), INDEX_KEY, RECHECKS_KEY]
    end
  end
end
