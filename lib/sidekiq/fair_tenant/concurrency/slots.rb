# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Concurrency
      # Per-process bookkeeping of concurrency slots: the jobs running here, a heartbeat that renews
      # their leases every lease/3 (so `lease` bounds recovery after SIGKILL/OOM, not job length),
      # and a periodic sweep that reclaims expired leases and hands them to parked jobs, so parked
      # jobs are never stranded when no job of their scope runs any more.
      #
      # A lease lives as long as its job: Sidekiq fires :shutdown before it waits up to its timeout for running
      # jobs, so the heartbeat does not stop there (#stop_when_idle) but once nothing is held any more, or with
      # the process.
      module Slots
        TICK = 0.5
        RENEW = Interval.new(TICK)
        SWEEP = Interval.new(TICK)

        @running = {}.compare_by_identity
        @mutex = Mutex.new
        @thread = nil
        @pid = nil
        @stopping = false
        @on_beat = []

        class << self
          # Recorded before the heartbeat is (re)started, so a heartbeat ending because nothing was held sees it.
          def running(slot)
            @mutex.synchronize do
              forget_parent
              @running[slot] = slot
            end
            start
          end

          def finished(slot)
            @mutex.synchronize { @running.delete(slot) }
          end

          # A run whose acquire's reply was lost: the heartbeat gives back what the call took (LostReplies).
          def forget(slot, payload, queue)
            LostReplies.add(slot, payload, queue)
            start
          end

          # One entry per scope and jid: two copies of one job running here (a stalled process that fetched its own
          # recovered copy) renew its one holder once.
          def running_slots
            @mutex.synchronize { @running.values }.uniq { |slot| [slot.tag, slot.sub, slot.jid, slot.run] }
          end

          # Starts the heartbeat thread in this process (again in a forked child, which forgets
          # the parent's running jobs).
          def start
            return if started?

            @mutex.synchronize do
              next if started?

              forget_parent
              @thread = Thread.new { loop_forever }
              @thread.name = "fair_tenant-heartbeat"
            end
          end

          def started?
            @thread&.alive? && @pid == ::Process.pid
          end

          # Sidekiq is stopping (:shutdown): jobs still running keep their leases through its timeout; the
          # heartbeat ends once none is held here.
          def stop_when_idle
            @mutex.synchronize { @stopping = true }
          end

          def stop
            thread = @thread
            @thread = nil
            thread&.kill
            thread&.join(1)
          end

          # One heartbeat: renew the leases due, sweep when due, and call what rides on the heartbeat (on_beat:
          # fair-queue recovery's Liveness, this process lives). Public for specs and `bin/bench`.
          def beat(now = Interval.now)
            LostReplies.give_back
            renew if RENEW.due?(now, every: renew_every)
            sweep if SWEEP.due?(now, every: FairTenant.config.sweep_interval)
            @on_beat.each { |callback| callback.call(now) }
          end

          # Calls the block with the time of every beat, on the heartbeat thread. Features above concurrency
          # register here (FairQueues::Liveness), so that this heartbeat names none of them.
          def on_beat(&block)
            @on_beat << block
          end

          private

          def loop_forever
            until idle_after_stop?
              begin
                beat
              rescue StandardError => e
                FairTenant.warn(:heartbeat, e.class) { "heartbeat: #{e.class}: #{e.message}" }
              end
              sleep TICK
            end
          end

          # True, with the thread forgotten, once the process is stopping and holds no slot: a job recorded
          # after this starts a new heartbeat (#running records, then starts).
          def idle_after_stop?
            @mutex.synchronize do
              next false unless @stopping && @running.empty? && LostReplies.empty?

              @thread = nil if @thread == Thread.current
              true
            end
          end

          # In a forked child: the parent's running jobs and heartbeat are not this process's.
          def forget_parent
            return if @pid == ::Process.pid

            @running = {}.compare_by_identity
            @stopping = false
            @pid = ::Process.pid
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
end
