# frozen_string_literal: true

require "sidekiq/api"
require "sidekiq/paginator"

module Sidekiq
  module FairTenant
    module FairQueues
      # Sidekiq's API and Web UI see a fair queue's backlog too: `Sidekiq::Queue#size`, `#latency`, `#clear`,
      # `#each` (so `#count`, `#find_job` and the rest of Enumerable), `Sidekiq::JobRecord#delete`, the Queues
      # page and a queue's page (its list, paging and Delete), `Sidekiq::Stats#enqueued`, `#queues` (what
      # autoscalers such as judoscale and HireFire read) and `#default_queue_latency`, so the Web UI's /stats and
      # /stats/queues too. Works in any process with the gem loaded (the Web UI's too), whether or not it has
      # `fair_queues` configured: a queue that never was fair has no backlog there. (Sidekiq 7.2.3-8.0.1's
      # `HEAD /` of the Web UI: Web::Heartbeat, with the Web tab.)
      module Visibility
        PAGE = 50 # jobs of Sidekiq's list per round trip of Queue#each, as Sidekiq's own

        # Prepended to Sidekiq::Queue.
        module Queue
          def size
            super + Sidekiq.redis { |conn| FairQueues.backlog(conn, name) }
          end

          # The wait of the oldest job a free thread could start now: a fair backlog's paused tenants and
          # tenants held back by a static cap are left out (`size` counts them).
          def latency
            [super, Sidekiq.redis { |conn| Backlog.latency(conn, name) }].max
          end

          # Sidekiq's list first, as Sidekiq pages it (newest first; a job deleted meanwhile does not make
          # the next page skip one), then the fair backlog (Backlog.each).
          def each(&block)
            return to_enum(:each) unless block

            each_listed(&block)
            Backlog.each(name) do |tenant, job|
              yield ::Sidekiq::JobRecord.new(job, name).tap { |record| record.fair_tenant = tenant }
            end
          end

          def each_listed
            key = "queue:#{name}"
            initial = Sidekiq.redis { |conn| conn.call("LLEN", key) }
            deleted = 0
            (0..).step(PAGE) do |from|
              entries = Sidekiq.redis { |conn| conn.call("LRANGE", key, from - deleted, from - deleted + PAGE - 1) }
              break if entries.empty?

              entries.each { |entry| yield ::Sidekiq::JobRecord.new(entry, name) }
              deleted = initial - Sidekiq.redis { |conn| conn.call("LLEN", key) }
            end
          end
          private :each_listed

          # As Sidekiq's: deletes the list and takes the queue out of the `queues` set (the next push puts it
          # back); then the fair backlog.
          def clear
            result = super
            Sidekiq.redis { |conn| FairQueues.clear(conn, name) }
            result
          end
        end

        # Prepended to Sidekiq::JobRecord (not SortedEntry, which has its own delete).
        module JobRecord
          # The tenant whose list a job of a fair backlog was read from (Queue#each sets it).
          attr_writer :fair_tenant

          # A job not in Sidekiq's list is looked for in the queue's fair backlog: in its tenant's list first
          # (the one it was read from, else the tenant its payload names), then in every tenant's.
          def delete
            super || (value.is_a?(String) && Backlog.delete(@queue.to_s, value, fair_tenant))
          end

          def fair_tenant
            @fair_tenant ||= FairQueues.tenant(item)
          end
        end

        # Prepended to Sidekiq::Paginator (Sidekiq's Web pages a queue with it, LRANGE on `queue:<name>`).
        module Paginator
          def page(key, pageidx = 1, page_size = 25, opts = nil)
            queue = key.to_s.start_with?("queue:") && key.to_s.delete_prefix("queue:")
            return super unless queue && Sidekiq.redis { |conn| FairQueues.backlog(conn, queue) }.positive?

            Backlog.page(queue, pageidx, page_size, opts && opts[:reverse])
          end
        end

        # Prepended to Sidekiq::Stats: `enqueued`, and `default_queue_latency` (the Web UI's /stats serves it),
        # as Queue#latency of `default`.
        module Stats
          def enqueued
            super + Visibility.backlogs.values.sum
          end

          def default_queue_latency
            [super, Sidekiq.redis { |conn| Backlog.latency(conn, "default") }].max
          end
        end

        # Prepended to Sidekiq 7+'s Sidekiq::Stats: `queues` (queue lengths, as the Web UI's /stats/queues serves them).
        module StatsQueues
          def queues = Visibility.with_backlogs(super)
        end

        # Prepended to Sidekiq 6's Sidekiq::Stats::Queues: `lengths`, which its Stats#queues and the Web UI's
        # /stats/queues read.
        module StatsLengths
          def lengths = Visibility.with_backlogs(super)
        end

        module_function

        # Fair backlog per queue of Sidekiq's `queues` set.
        def backlogs
          Sidekiq.redis do |conn|
            queues = conn.call("SMEMBERS", "queues")
            queues.to_h { |queue| [queue, FairQueues.backlog(conn, queue)] }
          end
        end

        # Queue lengths (name => size, largest first) with each queue's fair backlog added.
        def with_backlogs(lengths)
          fair = backlogs
          lengths.to_h { |queue, size| [queue, size + fair.fetch(queue, 0)] }.sort_by { |_, size| -size }.to_h
        end

        def install
          ::Sidekiq::Queue.prepend(Queue)
          ::Sidekiq::JobRecord.prepend(JobRecord)
          ::Sidekiq::Paginator.prepend(Paginator)
          ::Sidekiq::Stats.prepend(Stats)
          if defined?(::Sidekiq::Stats::Queues)
            ::Sidekiq::Stats::Queues.prepend(StatsLengths)
          else
            ::Sidekiq::Stats.prepend(StatsQueues)
          end
        end
      end
    end
  end
end
