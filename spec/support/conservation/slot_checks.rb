# frozen_string_literal: true

# rubocop:disable Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity -- a model checker's case analysis, kept in one place

module Conservation
  # What a Run checks of concurrency caps: at each start (a static cap), and after every step (the leases of the
  # jobs running with a slot).
  module SlotChecks
    HOLDERS = Sidekiq::FairTenant::Native::Names::HOLDERS
    SLOTS_PREFIX = Sidekiq::FairTenant::Native::Names::SLOTS_PREFIX

    private

    # A static cap: no job starts while its scope already runs `limit` (the one in force now: a lowered limit
    # stops no running job). Running: the jobs the harness runs holding a slot of the scope (no stale one: a
    # recovery gave its slot back), and those Redis holds a lease for, but the acks this fetch carried.
    def check_cap(process, held, (tenant, default), carried)
      limit = Sidekiq::FairTenant.limits.get(tenant: tenant, queue: "fair") || default
      running = @processes.flat_map(&:units).select { |other| other.scope == held.scope && !other.stale }
                          .map(&:id)
      leased = leased(held.scope) - [held.id] - carried.map(&:id)
      ran = running | leased
      return if ran.size < limit

      violation(:cap_exceeded, "#{held.id} started on #{process.identity} while its scope " \
                               "#{held.scope.join(" ").inspect} ran #{ran.size} (limit #{limit}): running " \
                               "#{running.join(",")}, leased in Redis #{leased.join(",")}")
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
      running = @processes.flat_map { |process| process.units.select(&:scope).map { |held| [process, held] } }
      running.reject! { |_, held| held.stale || held.lost }
      return if running.empty?

      now, expiries = lease_expiries(running.map(&:last))
      running.zip(expiries).each do |(process, held), expiry|
        lease_lost(process, held, expiry) unless expiry && expiry.to_f > now
      end
    end

    # Redis's time (ms) and the lease expiry of each running job (nil: none).
    def lease_expiries(helds)
      now, *expiries = sidekiq_redis do |conn|
        conn.pipelined do |pipe|
          pipe.call("TIME")
          helds.each { |held| pipe.call("ZSCORE", holders_key(held.scope), held.id) }
        end
      end
      [(now[0].to_i * 1000) + (now[1].to_i / 1000), expiries]
    end

    def lease_lost(process, held, expiry)
      held.lost = true
      violation(:lease_lost, "#{held.id} runs on #{process.identity}#{" (stopping)" if process.stopping} and its " \
                             "slot's lease is #{expiry ? "over" : "gone"}: another job of its scope may start")
    end
  end
end
# rubocop:enable Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity
