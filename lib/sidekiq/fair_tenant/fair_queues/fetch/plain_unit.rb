# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # A job from a queue that is not fair, as BasicFetch hands it out.
        PlainUnit = Struct.new(:queue, :job, :fetch) do
          def acknowledge; end

          def queue_name
            queue.delete_prefix("queue:")
          end

          def requeue
            fetch.redis { |conn| conn.call("RPUSH", queue, job) }
          end
        end
      end
    end
  end
end
