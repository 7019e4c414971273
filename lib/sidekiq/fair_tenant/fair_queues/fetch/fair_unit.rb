# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # A job from a fair queue: acknowledged (its in-flight field dropped, with the next fetch) after it ran, or
        # put back at the front of its tenant. `entry`: its in-flight field. `held`: the jid whose slot the fetch
        # took, or "".
        # `timing`: under a queue fair by worker time, [charge (ms), queue, member, fetched at (ms)].
        FairUnit = Struct.new(:queue, :job, :entry, :fetch, :held, :timing) do
          def self.timing(queue, charged, member)
            return nil if charged.nil? || charged.empty?

            [charged, queue, member, FairUnit.now_ms]
          end

          def self.now_ms
            ::Process.clock_gettime(::Process::CLOCK_MONOTONIC, :millisecond)
          end

          # Pending first, then no longer run: the audit (Audit) always finds the entry in one or the other.
          def acknowledge
            fetch.acknowledged(entry, timing: ran)
            fetch.returned(self)
          end

          def queue_name
            queue.delete_prefix("queue:")
          end

          def requeue
            fetch.finish("requeue", [entry])
          ensure
            fetch.returned(self)
          end

          private

          # What the acknowledgement tells the scripts (Native::Fair.timing; serve.lua's charge_back).
          def ran
            return nil unless timing

            charged, queue, member, fetched_at = timing
            Native::Fair.timing(charged, FairUnit.now_ms - fetched_at, queue, member)
          end
        end
      end
    end
  end
end
