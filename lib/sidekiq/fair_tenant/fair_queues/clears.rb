# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # Fair queues' `Queue#clear`s cut short between their calls (the caller killed, a call refused with
      # NOREPLICAS, OOM or a timeout): FairQueues.clear records each clear with its cut (Redis's time at its first
      # call) and removes the record at its end; a recovery sweep (Sweeper.turn) finishes what is recorded.
      module Clears
        CLEARING = Native::Names::FAIR_CLEARING_KEY

        module_function

        # Finishes every recorded clear (clear.lua's mode `cut`): of each queue, the tenants whose jobs were all
        # enqueued by the clear's cut are deleted, any other is kept whole, so a job pushed after the clear began
        # is never deleted (and a job pushed before it, in a tenant that got one since, runs). Returns the jobs
        # deleted.
        def finish(conn, batch: Native::Names::CLEAR_BATCH)
          conn.call("HKEYS", CLEARING).sum do |queue|
            record = conn.call("HGET", CLEARING, queue) or next 0
            finish_queue(conn, queue, record, batch)
          end
        end

        # One queue's clear, to its end: the script keeps its cursor in the record, and writes nothing once the
        # record is gone or holds a newer clear's cut (which covers this one).
        def finish_queue(conn, queue, record, batch)
          total = 0
          loop do
            deleted, more = ScriptRunner.run(conn, "clear", [], [FairQueues.base(queue), queue, batch, "cut", record])
            total += deleted.to_i
            return total if more.to_i.zero?
          end
        end
      end
    end
  end
end
