# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Concurrency
      # When a finished job's slot on a plain queue goes back. A slot taken with room (the acquire's reply says
      # another slot of the scope is free and nobody waits for one: no parked job, no fair-queue tenant) is kept
      # for its thread's next acquire, which carries the release in the same script call (one round trip per job in
      # place of two); a thread with no next acquire within WAIT has it sent alone by a thread of this module's. A
      # slot taken without room, and every slot once the process quiets or stops (or exits), goes back at once.
      #
      # A kept slot still counts against its scope's limit, at most WAIT longer than its job: another job of the
      # scope may park meanwhile and wait that much more for it (a scope with room when the slot was taken).
      module Releases
        WAIT = Native::Names::RELEASE_DEFER_MS / 1000.0

        @pending = {} # thread => [slot, when it is sent alone]
        @mutex = Mutex.new
        @due = ConditionVariable.new
        @thread = nil
        @pid = nil
        @stopping = false

        class << self
          # The thread's job is over: its release waits for the thread's next acquire when `deferrable` (and the
          # process is not stopping), else it is sent now.
          def finished(slot, deferrable)
            now(slot) unless deferrable && keep(slot)
          end

          # The release this thread's next acquire carries, taken from the kept ones (nil: none).
          def carried
            return nil if @pending.empty? # read without the lock: only this thread adds its own entry

            @mutex.synchronize do
              forget_parent # a forked child's thread carries nothing of its parent's
              @pending.delete(Thread.current)&.first
            end
          end

          # Sends a release alone; never raises (the lease frees the slot when Redis does not answer).
          def now(slot)
            handed = SlotCalls.release(slot)
            instrument(slot, handed)
          rescue StandardError => e
            FairTenant.warn(:release, e.class) do
              "#{e.class}: #{e.message}; slot of #{slot.jid} frees when its lease expires"
            end
          end

          def instrument(slot, handed)
            Instrumentation.instrument(:hand_over, scope: [slot.tag, slot.sub], count: handed) if handed.positive?
          end

          # Quiet, shutdown, exit: every kept release is sent, and none is kept from now on.
          def flush
            slots = @mutex.synchronize do
              forget_parent
              @stopping = true
              @pending.values.map(&:first).tap { @pending.clear }
            end
            slots.each { |slot| now(slot) }
          end

          # Specs: forgets what is kept (its Redis flushed) and keeps releases again after a flush.
          def reset!
            @mutex.synchronize do
              @pending.clear
              @stopping = false
            end
          end

          def kept
            @mutex.synchronize { @pending.size }
          end

          private

          # False when the process is stopping: then the caller sends it.
          def keep(slot)
            displaced = @mutex.synchronize do
              forget_parent
              return false if @stopping

              start
              @due.signal if @pending.empty? # the sender waits without a bound while nothing is kept
              @pending.delete(Thread.current).tap { @pending[Thread.current] = [slot, Interval.now + WAIT] }
            end
            now(displaced.first) if displaced # a job run inside a job (inline): the outer one's is sent
            true
          end

          def start
            return if @thread&.alive?

            @thread = Thread.new { send_forever }
            @thread.name = "fair_tenant-releases"
          end

          def send_forever
            loop { overdue.each { |slot| now(slot) } }
          end

          # Waits until a kept release is WAIT old, then takes those that are.
          def overdue
            @mutex.synchronize do
              loop do
                at = Interval.now
                late = @pending.select { |_, (_, due)| due <= at }
                unless late.empty?
                  late.each_key { |thread| @pending.delete(thread) }
                  break late.values.map(&:first)
                end
                @due.wait(@mutex, @pending.empty? ? nil : @pending.values.map(&:last).min - at)
              end
            end
          end

          # In a forked child: the parent's kept releases and sender are not this process's.
          def forget_parent
            return if @pid == ::Process.pid

            @pending = {}
            @thread = nil
            @stopping = false
            @pid = ::Process.pid
          end
        end

        at_exit { flush }
      end
    end
  end
end
