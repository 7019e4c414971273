# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # Each process audits its own in-flight hash, so that a job no thread of it runs does not wait for the
        # process to exit. Two ways to get there: a fetch script ran but its reply was lost (Redis busy past the
        # client's read timeout: redis-rb 4.8 and redis-client send the call again, and the second run serves
        # another job), or Sidekiq never acknowledged a job (its retry could not be written: the processor's
        # thread ends).
        #
        # Every `every` seconds (EVERY unless set) the recovery thread (Sweeper, never a fetching thread) reads
        # the fields of its in-flight hash (HKEYS: short, the jobs stay in Redis). A field that no live thread of
        # the process runs (InFlight) and no pending acknowledgement names (Acks) is orphaned. A field orphaned
        # at two audits in a row goes back to
        # the front of its tenant (the ack script's "requeue": atomic, harmless when sent twice, the job's
        # interruption count untouched: it did not run), provided every call that started before the first of
        # them had read the list (InFlight's numbers) has ended: a fetch whose reply is still on its way has then
        # handed its unit to its thread, or lost it. So a stranded job goes back within two intervals (plus a
        # call still under way: bounded by the client's read timeout and its one retry).
        module Audit
          EVERY = Native::Fair::INFLIGHT_AUDIT_SECONDS
          PACE = Interval.new(EVERY)
          @every = EVERY

          class << self
            attr_reader :every

            # Seconds between two audits (EVERY by default; a spec's app sets less).
            def every=(seconds)
              @every = Float(seconds)
              PACE.now!
            end

            # Seconds within which an entry no thread runs goes back (two audits, and the recovery thread's tick).
            def within = ((2 * every) + Sweeper::TICK).ceil

            # The recovery thread's turn: every in-flight list of this process, when due.
            def beat
              return unless PACE.due?(Interval.now, every: every)

              InFlight.ledgers.each { |ledger| ::Sidekiq.redis { |conn| run(conn, ledger) } }
            end

            # One audit of a ledger's list. Returns how many of its jobs went back.
            def run(conn, ledger)
              previous, mark = ledger.mutex.synchronize { [ledger.candidates, ledger.mark] }
              found = {}
              back = audit_page(conn, ledger, conn.call("HKEYS", ledger.key), [previous, mark, found])
              started = InFlight.started(ledger) # every entry read was written by a call numbered up to this
              ledger.mutex.synchronize do
                ledger.candidates = found
                ledger.mark = started
              end
              warn(back) if back.positive?
              back
            end

            private

            # What the fields say, in this order: the fields read, then whether the previous audit's calls have
            # ended, then what runs here (a call that ended had handed its unit out before).
            def audit_page(conn, ledger, page, (previous, mark, found))
              settled = InFlight.settled?(ledger, mark)
              held = held(ledger)
              back = []
              page.each do |entry|
                bytes = entry.b
                next held[bytes] -= 1 if held[bytes].positive?

                if settled && previous.key?(bytes)
                  back << bytes
                else
                  found[bytes] = true
                end
              end
              back.empty? ? 0 : ledger.fetcher.finish("requeue", back, conn).to_i
            end

            # How many times each entry is held: run by a live thread, or named by a pending acknowledgement. (What
            # runs first: a unit acknowledged meanwhile is then among the pending.)
            def held(ledger)
              counts = Hash.new(0)
              InFlight.running(ledger).each { |entry| counts[entry.b] += 1 }
              Acks.pending(ledger.key).each { |entry| counts[entry.b] += 1 }
              counts
            end

            def warn(count)
              FairTenant.warn(:inflight_audit, :back) do
                "put #{count} in-flight job(s) that no thread of this process runs back at the front of their " \
                  "tenants (a fetch whose reply was lost to a timeout, or a job never acknowledged)"
              end
            end
          end

          FairQueues.back_within_from { within }
        end
      end
    end
  end
end
