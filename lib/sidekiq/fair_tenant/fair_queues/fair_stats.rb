# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # What fair queues hold right now, read from Sidekiq's Redis (where they live):
    #
    #   stats = Sidekiq::FairTenant.fair_stats
    #   stats.queues      # => [{queue: "imports", backlog: 120, startable: 100, paused: 20, held: 0, in_flight: 8,
    #                     #      tenants: 3, capped_tenants: 1}, ...]
    #   stats.queue("imports", limit: 50, offset: 0, capped_limit: 50)
    #   # => {queue:, backlog:, startable:, paused:, held:, in_flight:, tenants: 3,
    #   #     page: [{tenant: "acme", backlog: 100, oldest_age: 12.5,
    #   #      weight: 1.0, paused: false, running: 5, limit: 2}, ...],  (oldest waiting job first)
    #   #     capped_tenants: 1, capped: [{tenant: "acme", running: 2, limit: 2, elastic: false, in_force: true,
    #   #      waiting: 100, scope: {tenant: "acme", queue: "imports"}}, ...]}  (lowest start tag first)
    #
    # `backlog` counts every waiting job; of them, `paused` are paused tenants' (weight 0), `held` those of
    # tenants a static `fair_tenant_concurrency` cap holds back now, `startable` the rest (a free thread may
    # start them; an elastic cap's over-limit tenants included, which spare threads serve).
    #
    # In `page`, `running` counts the tenant's jobs in flight from that queue; `limit` is its runtime
    # concurrency limit (Limits; nil: the class's own or none).
    #
    # `capped` lists the tenants held back by a `fair_tenant_concurrency` cap right now (at most
    # `capped_limit`; `capped_tenants` counts them all): the scope of the tenant's next job (`{tenant:, queue:}`
    # or `{key:}`), its running jobs (unexpired leases) and effective limit, its waiting jobs, and whether the
    # cap is `elastic` and `in_force`. A static cap is in force while the tenant is listed; an elastic one while
    # tenants under their limits wait, and lifted (`in_force: false`) while the tenant runs past its limit on
    # threads nobody else needs.
    class FairStats
      MAX_PAGE = 1_000
      ROWS = 250 # tenant rows per round trip of a page (a longer page takes several, so a row may repeat)
      NAMES = Native::Names

      # The script's {"tenant", tenant, queue} or {"key", key}.
      def self.scope_hash(scope)
        kind, name, queue = scope
        case kind
        when "tenant" then { tenant: name, queue: queue }
        when "key" then { key: name }
        end
      end

      # Every queue of Sidekiq's `queues` set that is fair here or holds a fair backlog.
      def queues
        Sidekiq.redis do |conn|
          flights = in_flight(conn)
          names = (conn.call("SMEMBERS", "queues") | FairQueues.names).sort
          names.filter_map do |name|
            backlog = FairQueues.backlog(conn, name)
            next unless FairQueues.fair?(name) || backlog.positive?

            { queue: name, backlog: backlog, **FairBacklog.counts(conn, name, backlog),
              in_flight: flights.fetch(name, {}).values.sum, tenants: zcard(conn, name, NAMES::HEADS),
              capped_tenants: zcard(conn, name, NAMES::CAPPED) + zcard(conn, name, NAMES::OVER) }
          end
        end
      end

      def queue(name, offset: 0, limit: 50, capped_limit: 50)
        offset = Integer(offset)
        limit = Integer(limit)
        capped_limit = Integer(capped_limit)
        if offset.negative? || !limit.between?(1, MAX_PAGE) || !capped_limit.between?(1, MAX_PAGE)
          raise ArgumentError, "offset must be >= 0, limit and capped_limit 1..#{MAX_PAGE}, " \
                               "got #{offset}, #{limit}, #{capped_limit}"
        end

        Sidekiq.redis { |conn| page(conn, name.to_s, offset, limit, capped_limit) }
      end

      private

      def zcard(conn, queue, suffix)
        conn.call("ZCARD", FairQueues.key(queue, suffix)).to_i
      end

      def page(conn, name, offset, limit, capped_limit)
        backlog, waiting, rows, capped_count, capped = stats_call(conn, name, offset, limit, capped_limit)
        while rows.size < limit && (more = stats_call(conn, name, offset + rows.size, limit - rows.size, 0)[2]).any?
          rows.concat(more)
        end
        running = in_flight(conn).fetch(name, {})
        now = Time.now.to_f
        { queue: name, backlog: backlog.to_i, **FairBacklog.counts(conn, name, backlog.to_i),
          in_flight: running.values.sum, tenants: waiting.to_i,
          page: rows.map { |row| tenant_row(name, row, running, now) },
          capped_tenants: capped_count.to_i, capped: capped.map { |row| capped_row(row) } }
      end

      # One call of the stats script: at most ROWS tenant rows (and `capped_limit` capped tenants).
      def stats_call(conn, name, offset, limit, capped_limit)
        FairQueues.run(conn, "stats", [FairQueues::WEIGHTS_KEY],
                       [FairQueues.base(name), name, offset, [limit, ROWS].min, capped_limit])
      end

      def capped_row(row)
        tenant, running, limit, elastic, in_force, waiting, scope = row
        { tenant: tenant, running: running&.to_i, limit: limit&.to_i, elastic: elastic.to_i == 1,
          in_force: in_force.to_i == 1, waiting: waiting.to_i, scope: FairStats.scope_hash(scope) }
      end

      def tenant_row(queue, row, running, now)
        tenant, oldest, jobs, weight, paused = row
        weight = weight ? weight.to_f : 1.0
        { tenant: tenant, backlog: jobs.to_i, oldest_age: [now - oldest.to_f, 0.0].max.round(3),
          weight: weight, paused: paused.to_i == 1 || weight.zero?, running: running.fetch(tenant, 0),
          limit: FairTenant.limits.get(tenant: tenant, queue: queue) || FairTenant.limits.get(tenant: tenant) }
      rescue FairTenant::Error
        { tenant: tenant, backlog: jobs.to_i, oldest_age: nil, weight: nil, paused: nil, running: nil, limit: nil }
      end

      # queue => tenant => jobs in flight, from every registered process's in-flight list.
      def in_flight(conn)
        counts = Hash.new { |h, k| h[k] = Hash.new(0) }
        conn.call("SMEMBERS", Native::Fair.registry_key).each do |identity|
          conn.call("LRANGE", Native::Fair.inflight_key(identity), 0, -1).each do |entry|
            queue, tenant, = Native::Fair.decode_entry(entry)
            counts[queue][tenant] += 1 if queue
          end
        end
        counts
      end
    end
  end
end
