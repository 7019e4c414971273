# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # What fair queues hold right now, read from Sidekiq's Redis (where they live):
      #
      #   stats = Sidekiq::FairTenant.fair_stats
      #   stats.queues      # => [{queue: "imports", backlog: 120, startable: 100, paused: 20, held: 0, rate_held: 0,
      #                     #      rated_tenants: 0, in_flight: 8, tenants: 3, capped_tenants: 1}, ...]
      #   stats.queue("imports", limit: 50, offset: 0, capped_limit: 50, rated_limit: 50)
      #   # => {queue:, backlog:, startable:, paused:, held:, rate_held:, rated_tenants:, in_flight:, tenants: 3,
      #   #     mean_ms: 240.5, page: [{tenant: "acme", backlog: 100, oldest_age: 12.5,
      #   #      weight: 1.0, paused: false, running: 5, mean_ms: 812.0, limit: 2}, ...],  (oldest waiting job first)
      #   #     capped_tenants: 1, capped: [{tenant: "acme", running: 2, limit: 2, elastic: false, in_force: true,
      #   #      waiting: 100, scope: {tenant: "acme", queue: "imports"}}, ...],  (lowest start tag first)
      #   #     rated: [{tenant: "acme", windows: [{limit: 2, per: 1.0, starts: 2}], next_start_in: 0.4,
      #   #      waiting: 100, scope: {tenant: "acme", queue: "imports"}}, ...]}  (soonest first)
      #
      # `backlog` counts every waiting job; of them, `paused` are paused tenants' (weight 0), `held` those of
      # tenants a static `fair_tenant_concurrency` cap holds back now, `rate_held` those of tenants waiting for a
      # `fair_tenant_rate` window (`rated_tenants` counts those tenants), `startable` the rest (a free thread may
      # start them; an elastic cap's over-limit tenants included, which spare threads serve).
      #
      # In `page`, `running` counts the tenant's jobs in flight from that queue; `limit` is its runtime concurrency
      # limit (Concurrency::Limits; nil: the class's own or none). `mean_ms`, of the queue and of each tenant, is the
      # recent mean run time a queue fair by worker time (`:time`) charges by; nil where none was learnt (a queue by job
      # count).
      #
      # `capped` lists the tenants held back by a `fair_tenant_concurrency` cap right now (at most
      # `capped_limit`; `capped_tenants` counts them all): the scope of the tenant's next job (`{tenant:, queue:}`
      # or `{key:}`), its running jobs (unexpired leases) and effective limit, its waiting jobs, and whether the
      # cap is `elastic` and `in_force`. A static cap is in force while the tenant is listed; an elastic one while
      # tenants under their limits wait, and lifted (`in_force: false`) while the tenant runs past its limit on
      # threads nobody else needs.
      #
      # `rated` lists the tenants out of the rotation until a rate window lets their next job start (at most
      # `rated_limit`): that job's scope, its windows (`per` in seconds) with the starts each counts now,
      # `next_start_in` (seconds until the tenant rejoins the rotation; nil: never, until the windows change),
      # and its waiting jobs.
      class Stats
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

              { queue: name, backlog: backlog, **Backlog.counts(conn, name, backlog),
                in_flight: flights.fetch(name, {}).values.sum, tenants: zcard(conn, name, NAMES::HEADS),
                capped_tenants: zcard(conn, name, NAMES::CAPPED) + zcard(conn, name, NAMES::OVER) }
            end
          end
        end

        def queue(name, offset: 0, limit: 50, capped_limit: 50, rated_limit: 50)
          offset, limit, capped_limit, rated_limit = [offset, limit, capped_limit, rated_limit].map { |v| Integer(v) }
          if offset.negative? || [limit, capped_limit, rated_limit].any? { |v| !v.between?(1, MAX_PAGE) }
            raise ArgumentError, "offset must be >= 0, limit, capped_limit and rated_limit 1..#{MAX_PAGE}, " \
                                 "got #{offset}, #{limit}, #{capped_limit}, #{rated_limit}"
          end

          Sidekiq.redis { |conn| page(conn, name.to_s, offset, limit, [capped_limit, rated_limit]) }
        end

        private

        def zcard(conn, queue, suffix)
          conn.call("ZCARD", FairQueues.key(queue, suffix)).to_i
        end

        def page(conn, name, offset, limit, lists)
          backlog, waiting, rows, capped_count, capped, _, rated, mean = stats_call(conn, name, offset, limit, lists)
          more_rows(conn, name, offset, limit, rows)
          running = in_flight(conn).fetch(name, {})
          now = Time.now.to_f
          { queue: name, backlog: backlog.to_i, **Backlog.counts(conn, name, backlog.to_i),
            in_flight: running.values.sum, tenants: waiting.to_i, mean_ms: mean_ms(mean),
            page: rows.map { |row| tenant_row(name, row, running, now) },
            capped_tenants: capped_count.to_i, capped: capped.map { |row| capped_row(row) },
            rated: rated.map { |row| rated_row(row) } }
        end

        # One call of the stats script: at most ROWS tenant rows (and the capped and rated tenants `lists` asks).
        def stats_call(conn, name, offset, limit, lists)
          ScriptRunner.run(conn, "stats", [FairQueues::WEIGHTS_KEY],
                           [FairQueues.base(name), name, offset, [limit, ROWS].min, *lists])
        end

        # Rows past the first call's, until `limit` or the last tenant.
        def more_rows(conn, name, offset, limit, rows)
          while rows.size < limit
            more = stats_call(conn, name, offset + rows.size, limit - rows.size, [0, 0])[2]
            break if more.empty?

            rows.concat(more)
          end
        end

        def rated_row(row)
          tenant, due, waiting, scope, windows = row
          { tenant: tenant, next_start_in: due.to_i.negative? ? nil : due.to_i / 1000.0, waiting: waiting.to_i,
            windows: windows.map do |lim, per, starts|
              { limit: lim.to_i, per: per.to_i / 1000.0, starts: starts.to_i }
            end,
            scope: Stats.scope_hash(scope) }
        end

        def capped_row(row)
          tenant, running, limit, elastic, in_force, waiting, scope = row
          { tenant: tenant, running: running&.to_i, limit: limit&.to_i, elastic: elastic.to_i == 1,
            in_force: in_force.to_i == 1, waiting: waiting.to_i, scope: Stats.scope_hash(scope) }
        end

        def tenant_row(queue, row, running, now)
          tenant, oldest, jobs, weight, paused, mean = row
          weight = weight ? weight.to_f : 1.0
          { tenant: tenant, backlog: jobs.to_i, oldest_age: [now - oldest.to_f, 0.0].max.round(3),
            weight: weight, paused: paused.to_i == 1 || weight.zero?, running: running.fetch(tenant, 0),
            mean_ms: mean_ms(mean),
            limit: FairTenant.limits.get(tenant: tenant, queue: queue) || FairTenant.limits.get(tenant: tenant) }
        rescue Error
          { tenant: tenant, backlog: jobs.to_i, oldest_age: nil, weight: nil, paused: nil, running: nil,
            mean_ms: nil, limit: nil }
        end

        # A mean run time a queue fair by worker time learnt (ms, to 0.1), nil where none was.
        def mean_ms(value) = value&.to_f&.round(1)

        # queue => tenant => jobs in flight, from every in-flight list (processes registered or being recovered).
        def in_flight(conn)
          counts = Hash.new { |h, k| h[k] = Hash.new(0) }
          Recovery.owners(conn).each do |identity|
            InFlightKeys.fields(conn, Native::Fair.inflight_key(identity)).each do |field|
              queue, tenant, = Native::Fair.decode_entry(field)
              counts[queue][tenant] += 1 if queue
            end
          end
          counts
        end
      end
    end
  end
end
