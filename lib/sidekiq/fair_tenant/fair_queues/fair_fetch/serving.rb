# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # The fetch script's calls for the wants of one Batch: what each thread is handed.
      module Serving
        STARVED_CALLS = 3

        private

        # Calls until every want is served or one found nothing. Jobs to adopt: a few at once when a fair queue
        # has nothing in fair order (at most STARVED_CALLS calls), else more after the jobs served.
        def serve(conn, wants)
          starved = 0
          until wants.empty?
            reply = fetch_once(conn, wants)
            wants = handed(wants, reply)
            return wants.each { |want| want.due = reply.soonest } if reply.empty
            next unless reply.starved # (else stopped at CALL_BYTES: the next call serves the rest)
            return if (starved += 1) >= STARVED_CALLS

            FairQueues.adopt(conn, reply.starved, ADOPT_FIRST)
          end
        end

        # Each served job to its want's thread, in order; the wants left.
        def handed(wants, reply)
          reply.served.zip(wants) { |served, want| want.unit = unit(served, want.thread) }
          reply.later.each { |queue| FairFetch.adopt_later(queue) }
          wants.drop(reply.served.size)
        end

        # One call of the fetch script for `wants`, carrying the pending acknowledgements (forgotten once it
        # returned); its reply read (FetchReply). Each want names its order of the queues (Sidekiq's weights,
        # shuffled per thread).
        def fetch_once(conn, wants)
          carried, acks = acks_for_fetch
          queues = wants.flat_map(&:names).uniq
          index = queues.each_with_index.to_h
          orders = wants.map do |want|
            (want.woken ? "1" : "0") + (want.names == queues ? "" : want.names.map { |name| index[name] + 1 }.join(","))
          end
          argv = [@identity, acks.size / 2, *acks, queues.size, *queues.flat_map { |name| FairFetch.fetch_args(name) },
                  *orders]
          reply = FairQueues.run(conn, "fetch", @keys, argv)
          acks_applied(carried)
          FetchReply.read(reply)
        end

        # The unit of work of a served job (a fair queue's with its in-flight field), handed to
        # `thread`. Under `time` it carries its charge and its tenant's member, and the clock starts.
        def unit(served, thread)
          queue = "queue:#{served.queue}"
          return PlainUnit.new(queue, served.job, self) unless served.entry

          timing = FairUnit.timing(served.queue, served.charged, served.member)
          FairUnit.new(queue, served.job, served.entry, self, served.held, timing).tap do |unit|
            InFlight.handed(@ledger, unit, thread)
          end
        end
      end
    end
  end
end
