# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Routing
      # Read-only view of the routing and concurrency state, computed in the extension from what
      # the scripts store (one ZCOUNT + ZREVRANGEBYSCORE + MGET per page of tenants). Tenants and counts
      # come from the gem's Redis, concurrency scopes from Sidekiq's (where the slots are).
      #
      #   stats = Sidekiq::FairTenant.stats
      #   page = stats.tenants(SyncOrdersJob, limit: 50, offset: 0)   # most recent enqueue first
      #   page.total                                                  # active tenants of the class
      #   page.tenants.first                                          # => {tenant: "acme", windows: [...], ...}
      #   stats.top(SyncOrdersJob, 10)                                # greediest: most enqueues in the longest window
      #   stats.tenant(SyncOrdersJob, "acme")
      #   stats.concurrency                                           # scopes with running or parked jobs
      class Stats
        Page = Struct.new(:total, :tenants, :offset, :limit, keyword_init: true)
        MAX_PAGE = 1_000
        TAGS_KEY = Native::Slots.tags_key.freeze # tags with parked jobs
        SCAN_MATCH, SCAN_COUNT, SCAN_ROUNDS = Native::Stats.holders_scan # holders keys: scopes with running jobs

        def initialize(client_source = FairTenant)
          @client_source = client_source
        end

        def job_classes
          JobClasses.routed
        end

        # Active tenants (an enqueue inside the longest rule window), `order: :recent` or `:greedy`.
        def tenants(job_class, offset: 0, limit: 50, order: :recent, now: Time.now.to_f)
          klass, rules, queue = resolve(job_class)
          offset = Integer(offset)
          limit = Integer(limit)
          if offset.negative? || !limit.between?(1, MAX_PAGE)
            raise ArgumentError, "offset must be >= 0 and limit 1..#{MAX_PAGE}, got #{offset}, #{limit}"
          end

          total, rows = native.tenant_stats(rules, klass.name, queue, now, order.to_sym, offset, limit,
                                            FairQueues.fair?(queue))
          Page.new(total: total, tenants: rows.map { |row| present(klass, rules, queue, row, now) },
                   offset: offset, limit: limit)
        end

        # The `n` greediest tenants.
        def top(job_class, count = 10, now: Time.now.to_f)
          tenants(job_class, limit: count, order: :greedy, now: now).tenants
        end

        def tenant(job_class, tenant, now: Time.now.to_f)
          klass, rules, queue = resolve(job_class)
          row = native.tenant_stat(rules, klass.name, queue, JobInfo.stored_name(tenant), now, FairQueues.fair?(queue))
          present(klass, rules, queue, row, now)
        end

        # Concurrency scopes with running or parked jobs (at most `max`), each with its holders
        # (jid, lease expiry; expired leases are listed but not counted as running), parked count,
        # oldest parked job's age and effective limit.
        def concurrency(max: 200, now: Time.now.to_f)
          scopes(max).map { |tag, sub| scope(tag, sub, now) }
        end

        def scope(tag, sub, now = Time.now.to_f)
          reply = SidekiqRedis.with { |conn| ScriptRunner.run(conn, "details", *Native::Stats.details_call(tag, sub)) }
          details = Native::Stats.details(tag, sub, reply)
          oldest = details.delete(:oldest_parked_ms)
          # A lease past its expiry is a worker that died (or a clock ahead of Redis's): it is dropped
          # when the scope next needs the slot, and not counted as running meanwhile.
          details.merge(running: details[:holders].count { |_jid, ms| ms / 1000.0 >= now },
                        holders: details[:holders].map do |jid, ms|
                          { jid: jid, lease_expires_at: Time.at(ms / 1000.0) }
                        end,
                        oldest_parked_age: oldest && [now - (oldest / 1000.0), 0].max)
        end

        # The scopes with parked jobs, [[tag, [sub, ...]], ...], read on `conn` (Sidekiq's, where the slots are).
        def parked_scopes(conn)
          conn.call("SMEMBERS", TAGS_KEY).to_a.map { |tag| [tag, conn.call("HKEYS", Native::Stats.meta_key(tag))] }
        end

        private

        # Native::Stats of the gem's connection (rebuilt after a fork or a settings change), for tenants and
        # counts; concurrency scopes are read on Sidekiq's own connection, where the slots are.
        def native
          @client_source.native.stats
        end

        # Every scope with parked jobs, then those with running jobs a bounded SCAN finds: at most `max`.
        def scopes(max)
          SidekiqRedis.with do |conn|
            parked = parked_scopes(conn)
            Native::Stats.scope_list(parked, holder_keys(conn, max - parked.sum { |_, subs| subs.size }), max)
          end
        end

        def holder_keys(conn, wanted)
          keys = []
          cursor = "0"
          SCAN_ROUNDS.times do
            cursor, batch = conn.call("SCAN", cursor, "MATCH", SCAN_MATCH, "COUNT", SCAN_COUNT)
            keys.concat(batch)
            break if cursor == "0" || keys.size >= wanted
          end
          keys
        end

        def resolve(job_class)
          klass = job_class.is_a?(Class) ? job_class : JobClasses.find(job_class)
          rules = JobClasses.rules(klass)
          raise ArgumentError, "#{klass} declares no fair_tenant_queues" unless rules

          [klass, rules, JobClasses.default_queue(klass)]
        end

        def present(klass, rules, queue, row, now)
          index = row[:next_rule]
          windows = rules.to_a.zip(row[:counts]).map do |rule, count|
            { queue: rule["queue"], threshold: rule["threshold"], per: rule["per"], count: count }
          end
          {
            tenant: row[:tenant],
            last_enqueued_at: row[:last_enqueued_at].positive? ? Time.at(row[:last_enqueued_at]) : nil,
            windows: windows,
            next_queue: index ? rules.queue(index) : queue,
            throttled: !index.nil?,
            last_rerouted_at: row[:last_rerouted_at] && Time.at(row[:last_rerouted_at]),
            concurrency: tenant_scope(klass, queue, row[:tenant], now)
          }
        end

        def tenant_scope(klass, queue, tenant, now)
          options = JobClasses.concurrency(klass)&.find { |scope| !scope.key_method }
          return nil if options.nil?

          tag, sub = Native::Slots.tenant_scope(tenant, queue)
          scope(tag, sub, now).tap { |s| s[:limit] ||= options.limit }
        end
      end
    end
  end
end
