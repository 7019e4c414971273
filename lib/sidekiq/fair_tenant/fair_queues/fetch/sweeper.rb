# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # The fleet's recovery sweeps, off the fetching threads: a thread per process (started by its first
        # Fetch, again in a forked child; stopped when the process goes quiet or stops) tries the fleet's
        # lease every Recovery::INTERVAL seconds (Recovery::PACE), and the process that takes it sweeps
        # (Recovery.sweep) on Sidekiq's own pool (7.x/8.x: the internal one; a capsule's has one connection
        # per fetching thread, all of them blocked in BRPOP when idle). The lease lives LEASE_MS, a little
        # less than the interval: one sweep per interval whatever the fleet's size, one command for each
        # other process. While a process is suspected, the sweeper shortens the lease to when the first
        # suspect is due, and looks again then. The same thread audits this process's own in-flight list every
        # Audit.every seconds (Audit).
        module Sweeper
          LEASE = Native::Fair.recovery_lease_key.freeze
          LEASE_MS = Native::Fair::RECOVERY_LEASE_MS
          TICK = 0.5
          # Seconds a stop waits for a sweep under way to end (it is never killed halfway through a command).
          JOIN = 5

          @mutex = Mutex.new
          @wake = ConditionVariable.new
          @thread = nil
          @pid = nil
          @identity = nil

          class << self
            # This process sweeps as `identity` (its fetchers'); the thread starts unless it runs.
            def start(identity)
              @mutex.synchronize do
                @identity = identity
                next if @pid == ::Process.pid && @thread&.alive?

                @pid = ::Process.pid
                @thread = Thread.new { run }
                @thread.name = "fair_tenant-recovery"
              end
            end

            # Starts the thread in a forked child, whose parent's thread did not survive the fork (a fetch asks).
            def forked(identity)
              start(identity) unless @pid == ::Process.pid
            end

            def running?
              @mutex.synchronize { @pid == ::Process.pid && @thread&.alive? } || false
            end

            # Stops the thread (the process goes quiet or stops); a sweep under way ends first, up to JOIN s.
            def stop
              thread = @mutex.synchronize do
                current = @thread
                @thread = nil
                @wake.broadcast
                current
              end
              thread.join(JOIN) if thread && thread != Thread.current
            end

            # One try: if this process takes the lease, the clears cut short finished, then the fleet's sweep
            # (Recovery.sweep's result, with :cleared, :drained and :rechecked), else nil. Public for specs and
            # `bin/bench`.
            def turn(conn, identity)
              return unless conn.call("SET", LEASE, identity, "NX", "PX", LEASE_MS)

              cleared = finish_clears(conn)
              result = Recovery.sweep(conn, identity) or return
              result[:cleared] = cleared
              result[:drained] = Off.finish(conn)
              result[:rechecked] = Rates.new.finish(conn)
              if (due = result[:due_in])
                conn.call("PEXPIRE", LEASE, [(due * 1000).ceil, 1].max)
                Recovery::PACE.within(due)
              end
              result
            end

            # Clears cut short (Clears.finish), before the recovery: a job in flight when a clear began
            # is not the clear's to delete, and one put back at the front of a tenant the clear had not reached
            # would go with that tenant. A failure here (a refused write) does not hold the recovery back.
            def finish_clears(conn)
              Clears.finish(conn)
            rescue StandardError => e
              FairTenant.warn(:clear, e.class) { "finishing a Queue#clear cut short: #{e.class}: #{e.message}" }
              0
            end

            private

            def run
              on = false
              while current?
                on ||= switch_on
                beat
                @mutex.synchronize { @wake.wait(@mutex, TICK) if @thread == Thread.current }
              end
            end

            def current? = @mutex.synchronize { @thread == Thread.current }

            # Once per process, at its start (retried until Redis answers): its fair queues are on.
            def switch_on
              ::Sidekiq.redis { |conn| Off.switched_on(conn) }
              true
            rescue StandardError => e
              FairTenant.warn(:recovery, e.class) { "fair queues on: #{e.class}: #{e.message}" }
              false
            end

            def beat
              audit
              identity = @identity
              return unless identity && Recovery::PACE.due?

              ::Sidekiq.redis { |conn| turn(conn, identity) }
            rescue StandardError => e
              FairTenant.warn(:recovery, e.class) { "recovery sweep: #{e.class}: #{e.message}" }
            end

            # This process's own in-flight list (Audit), when due.
            def audit
              Audit.beat
            rescue StandardError => e
              FairTenant.warn(:inflight_audit, e.class) { "in-flight audit: #{e.class}: #{e.message}" }
            end
          end
        end
      end
    end
  end
end
