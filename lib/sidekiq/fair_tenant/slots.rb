# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Per-process bookkeeping of concurrency slots: the jobs running here, a heartbeat that renews
    # their leases every lease/3 (so `lease` bounds recovery after SIGKILL/OOM, not job length),
    # and a periodic sweep that reclaims expired leases and hands them to parked jobs, so parked
    # jobs are never stranded when no job of their scope runs any more.
    module Slots
      TICK = 0.5

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
        def beat(now = monotonic)
          renew if now >= (@next_renew ||= 0)
          sweep if now >= (@next_sweep ||= 0)
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

        def renew
          slots = running_slots
          shortest = slots.map(&:lease_ms).min || 3_000
          @next_renew = monotonic + [shortest / 3000.0, TICK].max
          return if slots.empty?

          FairTenant.slots_native.slots.renew(slots.map { |s| [s.tag, s.sub, s.jid, s.lease_ms] })
        end

        def sweep
          @next_sweep = monotonic + FairTenant.config.sweep_interval
          handed, reclaimed = FairTenant.slots_native.slots.sweep_details(FairTenant.config.sweep_batch)
          Instrumentation.instrument(:lease_reclaimed, count: reclaimed, handed: handed) if reclaimed.positive?
        end

        def monotonic
          ::Process.clock_gettime(::Process::CLOCK_MONOTONIC)
        end
      end
    end
  end
end
