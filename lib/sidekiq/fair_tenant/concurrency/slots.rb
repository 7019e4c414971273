# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Per-process bookkeeping of concurrency slots: the jobs running here, a heartbeat that renews
    # their leases every lease/3 (so `lease` bounds recovery after SIGKILL/OOM, not job length),
    # and a periodic sweep that reclaims expired leases and hands them to parked jobs, so parked
    # jobs are never stranded when no job of their scope runs any more.
    module Slots
      TICK = 0.5
      RENEW = Interval.new(TICK)
      SWEEP = Interval.new(TICK)

      @running = {}
      @mutex = Mutex.new
      @thread = nil
      @pid = nil

      class << self
        def running(slot)
          start
          @mutex.synchronize { @running[slot.jid] = slot }
        end

        def finished(slot)
          @mutex.synchronize { @running.delete(slot.jid) }
        end

        def running_slots
          @mutex.synchronize { @running.values }
        end

        # Starts the heartbeat thread in this process (again in a forked child, which forgets
        # the parent's running jobs).
        def start
          return if started?

          @mutex.synchronize do
            next if started?

            @running = {} unless @pid == ::Process.pid
            @pid = ::Process.pid
            @thread = Thread.new { loop_forever }
            @thread.name = "fair_tenant-heartbeat"
          end
        end

        def started?
          @thread&.alive? && @pid == ::Process.pid
        end

        def stop
          thread = @thread
          @thread = nil
          thread&.kill
          thread&.join(1)
        end

        # One heartbeat: renew the leases due, sweep when due, and tell fair-queue recovery this process lives.
        # Public for specs and `bin/bench`.
        def beat(now = Interval.now)
          renew if RENEW.due?(now, every: renew_every)
          sweep if SWEEP.due?(now, every: FairTenant.config.sweep_interval)
          FairFetch::Liveness.beat(now)
        end

        private

        def loop_forever
          loop do
            beat
            sleep TICK
          rescue StandardError => e
            FairTenant.warn(:heartbeat, e.class) { "heartbeat: #{e.class}: #{e.message}" }
            sleep TICK
          end
        end

        # A third of the shortest lease running here (3 s when none runs), at least a TICK.
        def renew_every
          shortest = running_slots.map(&:lease_ms).min || 3_000
          [shortest / 3000.0, TICK].max
        end

        def renew
          slots = running_slots
          return if slots.empty?

          SlotCalls.renew(slots)
        end

        def sweep
          handed, reclaimed = SlotCalls.sweep(FairTenant.config.sweep_batch)
          Instrumentation.instrument(:lease_reclaimed, count: reclaimed, handed: handed) if reclaimed.positive?
        end
      end
    end
  end
end
