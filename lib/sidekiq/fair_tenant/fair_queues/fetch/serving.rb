# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # The fetch script's calls for the wants of one Batch: what each thread is handed.
        class Serving
          STARVED_CALLS = 3

          # `fetcher`: the units' (they acknowledge and requeue through it); `keys`: its fetch script's keys;
          # `identity`: its process's; `acks`: its list's pending acknowledgements (Acks::Pending), carried by
          # every call; `ledger`: its list's (InFlight), told which thread each unit was handed to.
          def initialize(fetcher, keys, identity, acks, ledger)
            @fetcher = fetcher
            @keys = keys
            @identity = identity
            @acks = acks
            @ledger = ledger
          end

          # Calls until every want is served or one found nothing. Jobs to adopt: a few at once when a fair queue
          # has nothing in fair order (at most STARVED_CALLS calls), else more by the calling thread's next call
          # (`state`, its ThreadStates::State), after the jobs served.
          def serve(conn, wants, state)
            starved = 0
            until wants.empty?
              reply = fetch_once(conn, wants)
              wants = handed(wants, reply, state)
              return wants.each { |want| want.due = reply.soonest } if reply.empty
              next unless reply.starved # (else stopped at CALL_BYTES: the next call serves the rest)
              return if (starved += 1) >= STARVED_CALLS

              FairQueues.adopt(conn, reply.starved, ADOPT_FIRST)
            end
          end

          # One call of the fetch script for `wants`, carrying the pending acknowledgements (forgotten once it
          # returned); its reply read (Reply). Each want names its order of the queues (Sidekiq's weights,
          # shuffled per thread).
          def fetch_once(conn, wants)
            carried, acks = @acks.carried
            queues = wants.flat_map(&:names).uniq
            index = queues.each_with_index.to_h
            orders = wants.map do |want|
              order = want.names == queues ? "" : want.names.map { |name| index[name] + 1 }.join(",")
              (want.woken ? "1" : "0") + order
            end
            argv = [@identity, acks.size / 2, *acks, queues.size, *queues.flat_map { |name| Fetch.fetch_args(name) },
                    *orders]
            reply = ScriptRunner.run(conn, "fetch", @keys, argv)
            @acks.applied(carried)
            Reply.read(reply)
          end

          # The unit of work of a served job (a fair queue's with its in-flight field), handed to
          # `thread`. Under `time` it carries its charge and its tenant's member, and the clock starts.
          def unit(served, thread)
            queue = "queue:#{served.queue}"
            return PlainUnit.new(queue, served.job, @fetcher) unless served.entry

            timing = FairUnit.timing(served.queue, served.charged, served.member)
            FairUnit.new(queue, served.job, served.entry, @fetcher, served.held, timing).tap do |unit|
              InFlight.handed(@ledger, unit, thread)
            end
          end

          private

          # Each served job to its want's thread, in order; the wants left.
          def handed(wants, reply, state)
            reply.served.zip(wants) { |served, want| want.unit = unit(served, want.thread) }
            reply.later.each { |queue| state.adopt = queue }
            wants.drop(reply.served.size)
          end
        end
      end
    end
  end
end
