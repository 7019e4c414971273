# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # A job from a fair queue: acknowledged (dropped from the in-flight list, with the next fetch) after it
      # ran, or put back at the front of its tenant. `held`: the jid whose slot the fetch took, or "".
      FairUnit = Struct.new(:queue, :job, :entry, :fetch, :held) do
        def acknowledge
          fetch.acknowledged(entry, slotless: held.to_s.empty?)
        end

        def queue_name
          queue.delete_prefix("queue:")
        end

        def requeue
          fetch.finish("requeue", [entry])
        end
      end
    end
  end
end
