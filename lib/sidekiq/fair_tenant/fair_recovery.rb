# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # Jobs left in the in-flight list of a process that died without requeueing them (SIGKILL, OOM, a
      # lost host) go back to the front of their tenants once that process's Sidekiq heartbeat key is gone
      # (it expires 60 s after the last beat): at least once. A job interrupted MAX_INTERRUPTIONS times
      # goes to the dead set instead, with the reason. Every INTERVAL seconds one fetching process (a lock)
      # looks, on the connection it fetches with, so jobs stay in their shard.
      module Recovery
        INTERVAL = 15
        MAX_INTERRUPTIONS = 3
        COUNT = "fair_tenant_interrupted"
        REGISTRY = Native::Fair.registry_key.freeze
        LOCK = Native::Fair.recovery_lock_key.freeze

        @next = 0.0
        @mutex = Mutex.new

        class << self
          # True once per INTERVAL per process: this caller looks (others go on fetching).
          def due?
            now = ::Process.clock_gettime(::Process::CLOCK_MONOTONIC)
            @mutex.synchronize do
              return false if now < @next

              @next = now + INTERVAL
            end
            true
          end

          def register(conn, identity)
            conn.call("SADD", REGISTRY, identity)
          end

          # Recovers the in-flight jobs of every registered process whose heartbeat is gone. Returns the
          # number of jobs put back (dead-set ones included).
          def sweep(conn, own_identity)
            return 0 unless conn.call("SET", LOCK, own_identity, "NX", "EX", INTERVAL)

            begin
              conn.call("SMEMBERS", REGISTRY).sum do |identity|
                next 0 if identity == own_identity || conn.call("EXISTS", identity).to_i.positive?

                recover_process(conn, identity)
              end
            ensure
              conn.call("DEL", LOCK) # the TTL only frees it after a crash mid-sweep
            end
          end

          def recover_process(conn, identity)
            key = Native::Fair.inflight_key(identity)
            entries = conn.call("LRANGE", key, 0, -1)
            pairs = entries.flat_map { |entry| [entry, replacement(conn, entry)] }
            found = 0
            unless pairs.empty?
              found = FairQueues.run(conn, "ack", [key, FairQueues::WEIGHTS_KEY],
                                     ["recover", Native::Fair.base_template, FairQueues::TOKEN_CAP, *pairs])
            end
            conn.call("SREM", REGISTRY, identity) if conn.call("LLEN", key).to_i.zero?
            log(identity, found) if found.positive?
            found
          end

          # The job with its interruption count raised; "" once it reached MAX_INTERRUPTIONS, after it was
          # written to the dead set.
          def replacement(conn, entry)
            queue, _tenant, job = Native::Fair.decode_entry(entry)
            payload = ::Sidekiq.load_json(job)
            payload[COUNT] = payload[COUNT].to_i + 1
            return ::Sidekiq.dump_json(payload) if payload[COUNT] < MAX_INTERRUPTIONS

            kill(conn, payload, queue)
            ""
          rescue StandardError
            job.to_s # unreadable: back as it was
          end

          def kill(conn, payload, queue)
            payload["error_class"] = "Sidekiq::FairTenant::Interrupted"
            payload["error_message"] = "interrupted #{payload[COUNT]} times (its process died while running it) " \
                                       "in fair queue #{queue}"
            payload["failed_at"] ||= Time.now.to_f
            conn.call("ZADD", "dead", Time.now.to_f.to_s, ::Sidekiq.dump_json(payload))
          end

          def log(identity, count)
            ::Sidekiq.logger.warn("[sidekiq-fair_tenant] put #{count} in-flight job(s) of #{identity} back " \
                                  "(its heartbeat is gone)")
          end
        end
      end
    end
  end
end
