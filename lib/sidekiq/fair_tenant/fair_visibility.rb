# frozen_string_literal: true

require "sidekiq/api"

module Sidekiq
  module FairTenant
    # Sidekiq's API counts a fair queue's backlog too: `Sidekiq::Queue#size`, `#latency` and `#clear`, the
    # Queues page, `Sidekiq::Stats#enqueued` and `#queues` (what autoscalers such as
    # judoscale and HireFire read). Works in any process with the gem loaded (the Web UI's too), whether or
    # not it has `fair_queues` configured: a queue that never was fair has no backlog there.
    module FairVisibility
      # Prepended to Sidekiq::Queue.
      module Queue
        def size
          super + Sidekiq.redis { |conn| FairQueues.backlog(conn, name) }
        end

        def latency
          [super, Sidekiq.redis { |conn| FairQueues.latency(conn, name) }].max
        end

        def clear
          Sidekiq.redis { |conn| FairQueues.clear(conn, name) }
          super
        end
      end

      # Prepended to Sidekiq::Stats: `enqueued`, and `queues` (queue lengths, as the Web UI's stats serve them).
      module Stats
        def enqueued
          super + FairVisibility.backlogs.values.sum
        end

        def queues
          fair = FairVisibility.backlogs
          super.to_h { |queue, size| [queue, size + fair.fetch(queue, 0)] }.sort_by { |_, size| -size }.to_h
        end
      end

      module_function

      # Fair backlog per queue of Sidekiq's `queues` set.
      def backlogs
        Sidekiq.redis do |conn|
          queues = conn.call("SMEMBERS", "queues")
          queues.to_h { |queue| [queue, FairQueues.backlog(conn, queue)] }
        end
      end

      def install
        ::Sidekiq::Queue.prepend(Queue)
        ::Sidekiq::Stats.prepend(Stats)
      end
    end
  end
end
