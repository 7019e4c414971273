# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # What fair queues hold right now, read from Sidekiq's Redis (where they live):
    #
    #   stats = Sidekiq::FairTenant.fair_stats
    #   stats.queues                  # => [{queue: "imports", backlog: 120, in_flight: 8, tenants: 3}, ...]
    #   stats.queue("imports", limit: 50, offset: 0)
    #   # => {queue:, backlog:, in_flight:, tenants: 3, page: [{tenant: "acme", backlog: 100, oldest_age: 12.5,
    #   #      weight: 1.0, paused: false, running: 5, limit: 2}, ...]}  (oldest waiting job first)
    #
    # `running` counts the tenant's jobs in flight from that queue; `limit` is its runtime concurrency limit
    # (Limits; nil: the class's own or none).
    class FairStats
      MAX_PAGE = 1_000

      # Every queue of Sidekiq's `queues` set that is fair here or holds a fair backlog.
      def queues
        Sidekiq.redis do |conn|
          flights = in_flight(conn)
          names = (conn.call("SMEMBERS", "queues") | FairQueues.names).sort
          names.filter_map do |name|
            backlog = FairQueues.backlog(conn, name)
            next unless FairQueues.fair?(name) || backlog.positive?

            { queue: name, backlog: backlog, in_flight: flights.fetch(name, {}).values.sum,
              tenants: conn.call("ZCARD", "#{FairQueues.base(name)}heads").to_i }
          end
        end
      end

      def queue(name, offset: 0, limit: 50)
        offset = Integer(offset)
        limit = Integer(limit)
        if offset.negative? || !limit.between?(1, MAX_PAGE)
          raise ArgumentError, "offset must be >= 0 and limit 1..#{MAX_PAGE}, got #{offset}, #{limit}"
        end

        Sidekiq.redis { |conn| page(conn, name.to_s, offset, limit) }
      end

      private

      def page(conn, name, offset, limit)
        backlog, waiting, rows = FairQueues.run(conn, "stats", [FairQueues::WEIGHTS_KEY],
                                                [FairQueues.base(name), name, offset, limit])
        running = in_flight(conn).fetch(name, {})
        now = Time.now.to_f
        { queue: name, backlog: backlog.to_i, in_flight: running.values.sum, tenants: waiting.to_i,
          page: rows.map { |row| tenant_row(name, row, running, now) } }
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
