# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Concurrency
      # Runs whose acquire's reply was lost (Redis did not answer in time, and the job ran without its slot): the call
      # may have reached Redis all the same and taken a slot or parked a copy. The heartbeat (Slots.beat)
      # gives either back (SlotCalls.forget) as soon as Redis answers, so a parked copy never runs the job
      # a second time.
      module LostReplies
        MAX = Native::Names::LOST_REPLIES_MAX
        @pending = [] # [slot, payload as the acquire sent it, queue]
        @mutex = Mutex.new
        @pid = nil

        class << self
          def add(slot, payload, queue)
            @mutex.synchronize do
              forget_parent
              @pending << [slot, payload, queue]
              @pending.shift while @pending.size > MAX
            end
          end

          def empty?
            @mutex.synchronize do
              forget_parent
              @pending.empty?
            end
          end

          # Redis still not answering: kept for the next beat, silently (the acquire's warning said it).
          def give_back
            @mutex.synchronize { @pending.dup }.each do |entry|
              SlotCalls.forget(*entry)
              @mutex.synchronize { @pending.delete(entry) }
            rescue *SlotCalls::REDIS_ERRORS
              break
            end
          end

          private

          # In a forked child: the parent's runs are not this process's.
          def forget_parent
            return if @pid == ::Process.pid

            @pending = []
            @pid = ::Process.pid
          end
        end
      end
    end
  end
end
