# frozen_string_literal: true

# rubocop:disable Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity -- a model checker's case analysis, kept in one place

module Conservation
  # What a Run checks of concurrency caps: at each start (a static cap), and after every step (the leases of the
  # jobs running with a slot).
  module SlotChecks
    HOLDERS = Sidekiq::FairTenant::Native::Names::HOLDERS
    SLOTS_PREFIX = Sidekiq::FairTenant::Native::Names::SLOTS_PREFIX

    private

    # A static cap: no job starts while one of its scopes already runs `limit` (the one in force now: a lowered
    # limit stops no running job). Running: the jobs the harness runs holding a slot of the scope (no stale one:
    # a recovery gave its slot back), and those Redis holds a lease for, but the acks this fetch carried.
    def check_cap(process, held, (tag, sub, default), tenant, carried)
      scope = [tag, sub]
      limit = scope_limit(scope, tenant) || default
      running = @processes.flat_map(&:units).select { |other| running_in?(other, scope) }.map(&:id)
      leased = leased(scope) - [held.id] - carried.map(&:id)
      ran = running | leased
      return if ran.size < limit

      violation(:cap_exceeded, "#{held.id} started on #{process.identity} while its scope " \
                               "#{scope.join(" ").inspect} ran #{ran.size} (limit #{limit}): running " \
                               "#{running.join(",")}, leased in Redis #{leased.join(",")}")
    end

    def running_in?(unit, scope)
      !unit.stale && (unit.scopes || []).any? { |s| s.first(2) == scope }
    end

    # The runtime limit in force for a scope of the run's jobs (its tenant's in the queue its sub names, or the
    # shared key's).
    def scope_limit(scope, tenant)
      limits = Sidekiq::FairTenant.limits
      shared = Sidekiq::FairTenant::Native::Slots.key_scope(Conservation::SHARED_KEY)
      return limits.get(key: Conservation::SHARED_KEY) if scope == shared

      limits.get(tenant: tenant, queue: scope[1].delete_prefix(Sidekiq::FairTenant::Native::Names::QUEUE_SUB))
    end

    # The jids holding an unexpired lease of the scope.
    def leased(scope)
      sidekiq_redis do |conn|
        now = now_ms(conn)
        conn.call("ZRANGEBYSCORE", holders_key(scope), "(#{now}", "+inf")
      end
    end

    def now_ms(conn)
      seconds, micros = conn.call("TIME")
      (seconds.to_i * 1000) + (micros.to_i / 1000)
    end

    def holders_key(scope)
      tag, sub = scope
      "#{SLOTS_PREFIX}#{tag.bytesize}:#{tag}:#{sub}#{HOLDERS}"
    end

    # A job running with its slot holds its lease (its process's heartbeat renews it) until it ends: once it is
    # gone, another process may start the scope's next job.
    def check_leases
      running = @processes.flat_map do |process|
        process.units.select(&:scope).flat_map { |held| held.scopes.map { |scope| [process, held, scope.first(2)] } }
      end
      running.reject! { |_, held, _| held.stale || held.lost }
      return if running.empty?

      now, expiries = lease_expiries(running.map { |_, held, scope| [held, scope] })
      running.zip(expiries).each do |(process, held, scope), expiry|
        lease_lost(process, held, scope, expiry) unless held.lost || (expiry && expiry.to_f > now)
      end
    end

    # Redis's time (ms) and the lease expiry of each running job in each of its scopes (nil: none).
    def lease_expiries(pairs)
      now, *expiries = sidekiq_redis do |conn|
        conn.pipelined do |pipe|
          pipe.call("TIME")
          pairs.each { |held, scope| pipe.call("ZSCORE", holders_key(scope), held.id) }
        end
      end
      [(now[0].to_i * 1000) + (now[1].to_i / 1000), expiries]
    end

    def lease_lost(process, held, scope, expiry)
      held.lost = true
      violation(:lease_lost, "#{held.id} runs on #{process.identity}#{" (stopping)" if process.stopping} and its " \
                             "slot's lease in #{scope.join(" ").inspect} is #{expiry ? "over" : "gone"}: another " \
                             "job of that scope may start")
    end
  end
end
# rubocop:enable Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity
