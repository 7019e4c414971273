# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # What a fetch leaves for later, per thread: which job's concurrency slot it took (Sidekiq runs a job's
      # middleware in the thread that fetched it, right after the fetch), and a queue to adopt jobs of.
      module Held
        KEY = :sidekiq_fair_tenant_held
        ADOPT_KEY = :sidekiq_fair_tenant_adopt_later

        # The jid of the job this thread just fetched, when the fetch took its slot ("" or nil: none).
        def held!(jid)
          Thread.current[KEY] = jid.nil? || jid.empty? ? nil : jid
        end

        # This thread adopts jobs of `queue:<queue>` into fair order at its next call (after its job started).
        def adopt_later(queue)
          Thread.current[ADOPT_KEY] = queue
        end

        def adopt_left(conn, batch)
          queue = Thread.current[ADOPT_KEY] or return
          Thread.current[ADOPT_KEY] = nil
          FairQueues.adopt(conn, queue, batch)
        end

        # True once, in the thread that fetched it, for a job whose slot the fetch took (the server middleware
        # then only renews its lease; its acknowledgement gives the slot back).
        def held?(job)
          held = Thread.current[KEY] or return false
          Thread.current[KEY] = nil
          held == job["jid"]
        end
      end

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
