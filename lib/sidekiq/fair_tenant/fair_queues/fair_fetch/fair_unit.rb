# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # A job from a fair queue: acknowledged (dropped from the in-flight list, with the next fetch) after it
      # ran, or put back at the front of its tenant.
      FairUnit = Struct.new(:queue, :job, :entry, :fetch) do
        def acknowledge
          fetch.acknowledged(entry)
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
