# frozen_string_literal: true

require "sidekiq/fetch"
require_relative "../loader"

module Sidekiq
  module FairTenant
    module FairQueues
      # Sidekiq's fetch strategy for processes with fair queues (installed at startup when `fair_queues` is
      # set; Sidekiq 6.4 `options[:fetch]`, 7.x/8.x `config[:fetch_class]`). Queues are polled in Sidekiq's
      # order and weights, as BasicFetch does; inside a fair queue the next job is the next in weighted fair
      # order per tenant (Native::Fair), moved to this process's in-flight hash in the same script, so a job
      # is always in exactly one place in Redis. Queues that are not fair are fetched as BasicFetch does.
      #
      # At most one round trip per job while work waits (threads that want work at the same moment share one
      # call: Batch); when there is none, the thread blocks in BRPOP (on the fair queues' wake-up lists and the
      # plain queues) for up to TIMEOUT seconds, as BasicFetch does, or until a rate-capped tenant may start.
      #
      # Its whole state is set in `initialize`: Sidekiq's queue settings, the in-flight list's keys, the parts
      # (each given what it uses: Serving makes the fetch calls, Finish the acknowledge and requeue calls, Batch
      # shares calls between threads) and what it remembers per thread (ThreadStates), passed to the methods
      # that read it. Pending acknowledgements (Acks) and the in-flight ledger (InFlight) belong to the list:
      # every fetcher of the process into it shares them.
      class Fetch
        Loader.register(self)

        extend Setup

        TIMEOUT = 2
        SIG = Native::Names::SIG
        # Jobs of a fair queue's `queue:<name>` list moved into fair order per round trip: ADOPT_BATCH by a
        # thread's next call after it was handed a job (the job starts first), and ADOPT_FIRST when none waits
        # in fair order (few, so that the first job of a large backlog starts at once).
        ADOPT_BATCH = 100
        ADOPT_FIRST = 2

        attr_reader :inflight_key, :identity

        # Sidekiq 7.x/8.x pass a capsule; 6.4 its options Hash. `identity` names the in-flight list (Sidekiq's
        # heartbeat identity of this process unless given).
        def initialize(capsule_or_options, identity = Fetch.identity)
          @capsule, @strict, @queues = Fetch.queue_settings(capsule_or_options)
          @identity = identity
          @inflight_key = Native::Fair.inflight_key(identity)
          @keys = [@inflight_key, FairQueues::WEIGHTS_KEY, Recovery::REGISTRY, Native::Fair.recovered_key(identity)]
          @acks = Acks.track(self)
          @ledger = InFlight.ledger(@inflight_key, self)
          @serving = Serving.new(self, @keys, identity, @acks, @ledger)
          @finish = Finish.new(self, @keys, identity, @ledger)
          @batch = Batch.new
          @threads = ThreadStates.new
          Fetch.background(self)
        end

        def redis(&block)
          @capsule ? @capsule.redis(&block) : ::Sidekiq.redis(&block)
        end

        def retrieve_work
          Concurrency::HeldSlot.held!(nil)
          names = queue_order
          if names.empty? || !format_ok?
            sleep(TIMEOUT)
            return nil
          end
          state = @threads[Thread.current]
          redis do |conn|
            housekeeping(conn, state)
            want = fetch(conn, names, state, woken: false) if IdleLook.look_first?(state)
            want&.unit || wait_and_fetch(conn, names, state, want&.due)
          end
        end

        # Jobs still running at a hard shutdown: fair ones to the front of their tenants, others to their
        # queues (as BasicFetch). `options` is 6.4's second argument.
        def bulk_requeue(inprogress, _options = nil)
          flush_acks
          return if inprogress.empty?

          @finish.requeue_units(inprogress)
          ::Sidekiq.logger.info("Pushed #{inprogress.size} jobs back to Redis")
        rescue StandardError => e
          ::Sidekiq.logger.warn("Failed to requeue #{inprogress.size} jobs: #{Printable.call(e.message)}")
        end

        # A FairUnit ran: its field is dropped with the next call of any thread into the list (Acks). `timing`:
        # under a queue fair by worker time, its charge and measured run time.
        def acknowledged(entry, timing: nil)
          @acks.add(entry, timing)
        end

        # Sends the pending acknowledgements on their own (a thread about to block, shutdown, the process's exit).
        def flush_acks(conn = nil)
          entries = @acks.entries
          return if entries.empty?

          finish("ack", @acks.args(entries), conn)
          @acks.applied(entries)
        end

        # Acknowledges or requeues in-flight fields (Finish#finish): the units' and the audit's way.
        def finish(mode, entries, conn = nil, sizes: nil)
          @finish.finish(mode, entries, conn, sizes: sizes)
        end

        # A unit of this list was acknowledged or requeued: no thread runs it.
        def returned(unit)
          @finish.returned(unit)
        end

        private

        # The fair state is in the format this gem knows (FormatCheck: once per process, again after a refusal).
        def format_ok? = FormatCheck.ok_here? || redis { |conn| FormatCheck.ok?(conn) }

        # Adopts what the thread's last fetch left (`state.adopt`). (Dead processes' jobs are recovered by
        # Sweeper's thread; a process registers in its first fetch or ack, and again in the first after a
        # recovery took its jobs.)
        def housekeeping(conn, state)
          Sweeper.forked(@identity)
          queue = state.adopt or return
          state.adopt = nil
          FairQueues.adopt(conn, queue, ADOPT_BATCH)
        end

        # Sidekiq's order: strict, or shuffled by weight (a queue listed twice is twice as likely first).
        def queue_order
          return @queues if @strict

          @queues.shuffle.uniq
        end

        # Threads that want a job at the same moment share one call (Batch). A call may write entries into the
        # in-flight list (InFlight): it ends once its units were handed out, each to the thread it was served for.
        # The thread's Want: its unit, or when none, its `due` (the ms until a rate-capped tenant may start).
        def fetch(conn, names, state, woken:)
          want = @batch.take(names, woken) { |wants| InFlight.call(@ledger) { @serving.serve(conn, wants, state) } }
          Concurrency::HeldSlot.held!(want.unit.held) if want.unit.is_a?(FairUnit)
          want
        end

        # Blocks until a job may be there: a wake-up token of a fair queue, a job of a plain one, or the instant
        # `due` (ms) a rate-capped tenant may start (then it fetches at once: nobody pushes a token for that).
        def wait_and_fetch(conn, names, state, due)
          flush_acks(conn)
          keys = names.map { |name| FairQueues.fair?(name) ? FairQueues.key(name, SIG) : "queue:#{name}" }
          key, value = blocking_pop(conn, keys, due ? [due / 1000.0, TIMEOUT].min : TIMEOUT)
          return timed_out(conn, names, state, due) unless key

          state.idle = false
          return PlainUnit.new(key, value, self) if key.start_with?("queue:")

          fetch(conn, names, state, woken: true).unit
        end

        # Idle unless the wait ended at a rate-capped tenant's start: then it fetches at once.
        def timed_out(conn, names, state, due)
          state.idle = !due
          due && fetch(conn, names, state, woken: false).unit
        end

        def blocking_pop(conn, keys, timeout)
          if conn.respond_to?(:blocking_call)
            conn.blocking_call(TIMEOUT, "BRPOP", *keys, timeout)
          else
            conn.brpop(*keys, timeout: timeout)
          end
        end
      end
    end
  end
end
