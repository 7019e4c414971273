# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # `fair-off` (CLI and rake): switching fair fetch off for a queue.
      module Off
        OFF = Native::Names::FAIR_OFF_KEY

        module_function

        # The drains of queues switched off that a `fair-off` cut short left (the CLI killed, a call refused), or
        # that jobs pushed fair since (a client still on the old settings) refilled, finished by a recovery sweep:
        # queues of FAIR_OFF that are not fair in this process's settings (a process still fair for one was started
        # before the switch, and adopts what a drain moves). Returns the jobs moved.
        def finish(conn)
          conn.call("SMEMBERS", OFF).sum do |queue|
            next 0 if FairQueues.fair?(queue) || FairQueues.backlog(conn, queue).zero?

            FairQueues.drain(conn, queue)
          end
        end

        # A process that fetches queues fair switches them on again (at its start): their requeued and recovered
        # jobs go back to their tenants.
        def switched_on(conn, queues = FairQueues.names)
          conn.call("SREM", OFF, *queues) unless queues.empty?
        end

        # Switching fair fetch off for a queue (`fair-off`, after every process runs without it in fair_queues):
        # first the in-flight jobs of dead processes are recovered (a process suspected dead is waited for, up
        # to Recovery::LAPSE seconds: `on_wait` is told), then the fair backlog is drained to `queue:<name>`.
        # Returns {recovered:, processes:, moved:}.
        def run(conn, queue, on_wait: nil)
          recovered = processes = 0
          free_by = Interval.now + Recovery::INTERVAL + 1
          3.times do
            result = sweep_when_free(conn, free_by) or next
            recovered += result[:recovered]
            processes += result[:processes]
            break if result[:suspected].zero?

            on_wait&.call(result[:suspected], Recovery::LAPSE)
            sleep(Recovery::LAPSE)
          end
          { recovered: recovered, processes: processes, moved: FairQueues.drain(conn, queue) }
        end

        # A sweep, once no other process holds the sweep's lock: one sweeping now, or one killed mid-sweep (its
        # lock expires after Recovery::INTERVAL), until `free_by`. nil when it never came free.
        def sweep_when_free(conn, free_by)
          loop do
            result = Recovery.sweep(conn)
            return result if result || Interval.now > free_by

            sleep(1)
          end
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
end
