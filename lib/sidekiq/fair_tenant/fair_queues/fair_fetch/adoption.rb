# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # Jobs of a fair queue's `queue:<name>` list (pushed there by other means, or there when the queue was made
      # fair) are adopted into fair order by a thread's next call after it was handed a job: the job starts first.
      module Adoption
        KEY = :sidekiq_fair_tenant_adopt_later

        # This thread adopts jobs of `queue:<queue>` at its next call.
        def adopt_later(queue)
          Thread.current[KEY] = queue
        end

        def adopt_left(conn, batch)
          queue = Thread.current[KEY] or return
          Thread.current[KEY] = nil
          FairQueues.adopt(conn, queue, batch)
        end
      end
    end
  end
end
