# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # Jobs left in the in-flight hash of a process that died without requeueing them (SIGKILL, OOM, a lost
      # host) go back to the front of their tenants: at least once. A process is taken for dead when its
      # Sidekiq heartbeat key (rewritten every 5-10 s, expiring 60 s after the last beat) is gone, and still
      # gone LAPSE seconds after a sweep first found it gone, and the process did not show it lives meanwhile:
      # every Liveness::EVERY seconds the gem's own heartbeat thread of a process with a fair fetcher clears any
      # suspicion of it (Liveness), so a live process whose key was deleted or evicted keeps its jobs, and only
      # a process whose threads all stopped (dead, or stalled for longer than LAPSE) is recovered.
      # One process of the fleet sweeps per INTERVAL (Sweeper: the fleet's lease), sooner while a process is
      # suspected, on Sidekiq's own Redis (where it fetches); the liveness of BATCH
      # registered processes is read per call (the liveness script, Native::Fair's rule). A process being
      # recovered moves from the registry to RECOVERING with the first call, and leaves it with its last entry;
      # every sweep finishes the recoveries found there, so one cut short (the sweeper killed between two
      # calls, a call refused or timed out) strands nothing. Its copies are remembered for KEEP seconds: a
      # process that was only stalled finds itself missing at its next call, registers again (leaving
      # RECOVERING: it keeps the rest of its list) and takes back the copies still waiting (the scripts'
      # ensure_registered), so it runs none of its jobs twice unless another process took a copy meanwhile.
      #
      # Payloads move as bytes. A job interrupted Interruptions::MAX times, and a payload that is not a job,
      # go to the dead set instead (Sidekiq's death handlers are called for a job), with the reason.
      module Recovery
        INTERVAL = Native::Fair::RECOVERY_INTERVAL_SECONDS
        LAPSE = Native::Fair::RECOVERY_LAPSE_SECONDS
        BATCH = Native::Fair::RECOVERY_BATCH
        REGISTRY = Native::Fair.registry_key.freeze
        SUSPECTS = Native::Fair.recovery_suspects_key.freeze
        RECOVERING = Native::Fair.recovering_key.freeze
        LOCK = Native::Fair.recovery_lock_key.freeze
        KEEP = Native::Fair::RECOVERED_KEEP_SECONDS
        ENTRIES = Native::Names::RECOVER_BATCH

        # When this process next tries the fleet's lease (Sweeper).
        PACE = Interval.new(INTERVAL)

        class << self
          # Recovers the in-flight jobs of every registered process (but `own_identity`) found dead. Returns
          # {recovered:, processes:, suspected:, due_in:} (recovered: jobs put back or sent to the dead set;
          # suspected: processes whose heartbeat is gone but not for LAPSE seconds yet; due_in: seconds until
          # the first of them is due, or nil), or nil when another process is sweeping (the lock).
          def sweep(conn, own_identity = nil)
            return unless conn.call("SET", LOCK, own_identity.to_s, "NX", "EX", INTERVAL)

            begin
              look(conn, own_identity)
            ensure
              conn.call("DEL", LOCK) # the TTL only frees it after a crash mid-sweep
            end
          end

          # A process's in-flight jobs back (fair queues of this process's config to their tenants, other
          # queues to `queue:<name>`), the newest ENTRIES per call (the fields' ids), each put at the front of
          # its tenant: a later call's older jobs go ahead of an earlier call's, so a tenant gets them back in
          # the order it was given them. Each call checks in Redis that the process may still be recovered (the
          # script): one that registered again between calls (it was only stalled) keeps the rest. A format-2
          # list (a process of an older gem) becomes a hash first (the script's "upgrade"). Returns the number
          # of jobs taken.
          def recover_process(conn, identity)
            key = Native::Fair.inflight_key(identity)
            return 0 if conn.call("TYPE", key).to_s == "list" && upgrade(conn, identity, key).to_i.zero?

            fields = RecoveryBatch.fields(conn, key)
            found = 0
            loop do
              pairs, more = RecoveryBatch.read(conn, key, fields)
              taken = recover_entries(conn, identity, key, pairs) # none: the process is forgotten all the same
              found += taken
              break if !more || taken.zero?
            end
            log(identity, found) if found.positive?
            found
          end

          # Every process with an in-flight list: registered, or being recovered.
          def owners(conn) = conn.call("SUNION", REGISTRY, RECOVERING)

          # The recoveries a sweep cut short left (RECOVERING), finished: a batch of identities per SSCAN call.
          def resume(conn, result)
            cursor = "0"
            loop do
              cursor, batch = conn.call("SSCAN", RECOVERING, cursor, "COUNT", BATCH)
              batch.uniq.each do |identity|
                result[:recovered] += recover_process(conn, identity)
                result[:processes] += 1
              end
              return result if cursor.to_s == "0"
            end
          end

          private

          def recover_entries(conn, identity, key, pairs)
            killed = []
            triples = pairs.flat_map { |field, job| disposition(field, job, killed) }
            found = RecoveryBatch.call(conn, identity, key, "recover", triples)
            Dead.written(killed) if found.to_i.positive? # (0: the process may not be recovered any more)
            found.to_i
          end

          def upgrade(conn, identity, key) = RecoveryBatch.call(conn, identity, key, "upgrade", [])

          def look(conn, own_identity)
            result = resume(conn, { recovered: 0, processes: 0, suspected: 0, due_in: nil })
            cursor = "0"
            done = {} # SSCAN may return an identity twice
            loop do
              cursor, suspected, due_in, *dead = liveness(conn, cursor, own_identity)
              count(result, suspected, due_in)
              (dead - done.keys).each do |identity|
                done[identity] = true
                result[:recovered] += recover_process(conn, identity)
                result[:processes] += 1
              end
              return result if cursor.to_s == "0"
            end
          end

          # One batch of the registry judged: [next cursor, suspects, seconds until the first is due, *dead].
          def liveness(conn, cursor, own_identity)
            ScriptRunner.run(conn, "liveness", [REGISTRY, SUSPECTS], [cursor, BATCH, LAPSE, own_identity.to_s])
          end

          def count(result, suspected, due_in)
            result[:suspected] += suspected.to_i
            return if due_in.to_s.empty?

            result[:due_in] = [result[:due_in], Float(due_in)].compact.min
          end

          # [field, action, job] for the recover script.
          def disposition(field, job, killed)
            raw = field.b
            job = job.b
            queue, = Native::Fair.decode_entry(raw)
            return [raw, "dead", job].tap { killed << [nil, job, NotAJob.new("not an in-flight entry")] } unless queue

            payload = Dead.job(job)
            unless payload
              killed << [nil, job, NotAJob.new("not a job (a JSON object) in fair queue #{queue}")]
              return [raw, "dead", job]
            end
            count = Interruptions.count(payload) + 1
            return [raw, "dead", Interruptions.dead(payload, count, queue, job, killed)] if count >= Interruptions::MAX

            [raw, FairQueues.fair?(queue) ? "fair" : "plain", Interruptions.with_count(job, count)]
          end

          def log(identity, count)
            ::Sidekiq.logger.warn(
              Printable.log("took #{count} in-flight job(s) of #{identity} back " \
                            "(its heartbeat has been gone for #{LAPSE} s since first found gone)")
            )
          end
        end
      end
    end
  end
end
