# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # What this process knows of its own in-flight list, for its audit (Audit): the units handed to Sidekiq
        # and not yet acknowledged or requeued, each with the thread it was handed to, and the calls under way that
        # may write entries into the list (fetch, acknowledgement, requeue), numbered in the order they started.
        #
        # A unit runs in the thread that fetched it: Sidekiq's processor fetches a job and runs it in one thread,
        # and a processor that could not acknowledge its job (its retry could not be written) re-raises and its
        # thread ends. So a unit whose thread is gone, unacknowledged, runs nowhere.
        #
        # Keyed by in-flight list, as Acks: every fetcher of the process fetching into one list shares its ledger.
        # `candidates` and `mark` are the audit's (Audit): the entries it found orphaned, and the number of the last
        # call started when it had read the list.
        module InFlight
          Ledger = Struct.new(:key, :fetcher, :mutex, :handed, :calls, :started, :candidates, :mark)
          @ledgers = {}
          @pid = nil
          @mutex = Mutex.new

          class << self
            # The ledger of the in-flight list `key` (`fetcher` fetches into it: the audit's requeue goes through it).
            def ledger(key, fetcher = nil)
              @mutex.synchronize do
                forget_parent
                @ledgers[key] ||= Ledger.new(key, fetcher, Mutex.new, {}.compare_by_identity, {}, 0, {}, 0)
              end
            end

            # This process's ledgers (none of a parent's, after a fork).
            def ledgers
              @mutex.synchronize do
                forget_parent
                @ledgers.values
              end
            end

            # Runs the block as a call that may write entries into the list.
            def call(ledger)
              token = ledger.mutex.synchronize do
                ledger.started += 1
                ledger.calls[ledger.started] = true
                ledger.started
              end
              yield
            ensure
              ledger.mutex.synchronize { ledger.calls.delete(token) } if token
            end

            # `unit` was handed to `thread`.
            def handed(ledger, unit, thread = Thread.current)
              ledger.mutex.synchronize { ledger.handed[unit] = thread }
            end

            # `unit` was acknowledged (its acknowledgement pending, Acks) or requeued.
            def returned(ledger, unit)
              ledger.mutex.synchronize { ledger.handed.delete(unit) }
            end

            def started(ledger) = ledger.mutex.synchronize { ledger.started }

            # True when no call numbered up to `mark` is under way (calls end in any order; numbers only grow).
            def settled?(ledger, mark)
              ledger.mutex.synchronize { ledger.calls.each_key.none? { |token| token <= mark } }
            end

            # The entries of the units a live thread runs; those whose thread ended unacknowledged are forgotten.
            def running(ledger)
              ledger.mutex.synchronize do
                ledger.handed.delete_if { |_unit, thread| !thread.alive? }
                ledger.handed.keys.map(&:entry)
              end
            end

            private

            def forget_parent
              return if @pid == ::Process.pid

              @pid = ::Process.pid
              @ledgers = {}
            end
          end
        end
      end
    end
  end
end
