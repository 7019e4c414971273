# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # In-flight fields dropped (acknowledged) or their jobs put back at the front of their tenants (requeued), and
        # the in-flight ledger (InFlight) told: a call that may write entries into the list is counted while under way,
        # and a unit acknowledged or requeued runs in no thread any more.
        class Finish
          # `fetcher`: whose Redis a call without a connection uses; `keys`: its fetch script's keys (the in-flight
          # list first, its recovered-jobs key last); `identity`: its process's; `ledger`: its list's (InFlight).
          def initialize(fetcher, keys, identity, ledger)
            @fetcher = fetcher
            @keys = keys
            @identity = identity
            @ledger = ledger
          end

          # Drops in-flight fields ("ack": field, timing pairs) or puts their jobs back at the front of their
          # tenants ("requeue"), one call per FairQueues::CALL_BYTES of jobs moved (`sizes`: the jobs' bytes, one
          # per field, read with HSTRLEN when not given; a shutdown's bulk requeue of large jobs is several calls).
          # Returns how many were found.
          def finish(mode, entries, conn = nil, sizes: nil)
            return @fetcher.redis { |c| finish(mode, entries, c, sizes: sizes) } unless conn

            groups = entries.each_slice(mode == "ack" ? 2 : 1).to_a
            weights = (sizes || weights(conn, mode, groups)).each
            InFlight.call(@ledger) do
              JobBytes.slices(groups, Float::INFINITY) { weights.next }
                      .sum { |slice| finish_call(conn, mode, slice.flatten).to_i }
            end
          end

          # A unit of this list was acknowledged (its acknowledgement is pending) or requeued: no thread runs it.
          def returned(unit)
            InFlight.returned(@ledger, unit)
          end

          # Units still running at a hard shutdown: fair ones to the front of their tenants, others to their queues.
          def requeue_units(units)
            fair, plain = units.partition { |unit| unit.is_a?(FairUnit) }
            requeue_fair(fair) unless fair.empty?
            requeue_plain(plain.group_by(&:queue)) unless plain.empty?
          end

          private

          # What each group moves: a requeue's jobs (read with HSTRLEN), an acknowledgement's field and timing.
          def weights(conn, mode, groups)
            return groups.map { |group| group.sum(&:bytesize) } unless mode == "requeue" && groups.size > 1

            conn.pipelined { |pipe| groups.each { |(field)| pipe.call("HSTRLEN", @keys.first, field) } }.map(&:to_i)
          end

          # One call of the ack script ("ack" or "requeue").
          def finish_call(conn, mode, entries)
            ScriptRunner.run(conn, "ack", [*@keys.first(3), Recovery::SUSPECTS, "dead", @keys.last],
                             [mode, @identity, "0", Recovery::KEEP,
                              *entries])
          end

          def requeue_fair(units)
            finish("requeue", units.map(&:entry), sizes: units.map { |unit| unit.job.bytesize })
          ensure
            units.each { |unit| returned(unit) }
          end

          def requeue_plain(by_queue)
            @fetcher.redis { |conn| by_queue.each { |queue, list| conn.call("RPUSH", queue, *list.map(&:job)) } }
          end
        end
      end
    end
  end
end
