# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # `fair-off` (CLI and rake): switching fair fetch off for a queue.
    module FairOff
      module_function

      # Switching fair fetch off for a queue (`fair-off`, after every process runs without it in fair_queues):
      # first the in-flight jobs of dead processes are recovered (a process suspected dead is waited for, up
      # to Recovery::LAPSE seconds: `on_wait` is told), then the fair backlog is drained to `queue:<name>`.
      # Returns {recovered:, processes:, moved:}.
      def run(conn, queue, on_wait: nil)
        recovered = processes = 0
        3.times do
          result = FairFetch::Recovery.sweep(conn)
          unless result # another process is sweeping
            sleep(1)
            next
          end
          recovered += result[:recovered]
          processes += result[:processes]
          break if result[:suspected].zero?

          on_wait&.call(result[:suspected], FairFetch::Recovery::LAPSE)
          sleep(FairFetch::Recovery::LAPSE)
        end
        { recovered: recovered, processes: processes, moved: FairQueues.drain(conn, queue) }
      end

      def waiting(out, suspected, seconds)
        out.puts("#{suspected} process(es) without a heartbeat: waiting #{seconds} s to tell a dead one from a " \
                 "stalled one before taking its in-flight jobs back")
      end

      def note(queue, result)
        "took #{result[:recovered]} in-flight job(s) of #{result[:processes]} dead process(es) back; " \
          "moved #{result[:moved]} job(s) of #{queue}'s fair backlog to queue:#{queue}"
      end
    end
  end
end
