# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # Installing Fetch in a server process, and the identity its in-flight list is named after.
        module Setup
          # Makes Fetch the process's fetch strategy. Sidekiq runs one per process: another one already set
          # (Sidekiq Pro's super_fetch, sidekiq-limit_fetch, sidekiq-throttled's) is an error, never replaced.
          def install(config)
            if config.respond_to?(:options) # Sidekiq 6.x: the Sidekiq module, a fetcher instance
              current = config.options[:fetch]
              refuse(current.class) if current && !current.is_a?(Fetch)
              config.options[:fetch] = Fetch.new(config.options) unless current
            else # 7.x/8.x: a fetch class, instantiated per capsule
              current = config[:fetch_class]
              refuse(current) if current && current != Fetch
              config[:fetch_class] = Fetch
            end
          end

          def refuse(other)
            raise ConfigurationError, "fair_queues needs Sidekiq::FairTenant::FairFetch as the fetch strategy, " \
                                      "but #{other} is configured (Sidekiq runs one per process): remove it, " \
                                      "or the fair_queues"
          end

          # [capsule or nil, strict, queue names] from what Sidekiq hands a fetcher: 7.x/8.x a capsule, 6.4 its
          # options Hash.
          def queue_settings(capsule_or_options)
            if capsule_or_options.respond_to?(:queues)
              capsule = capsule_or_options
              strict = capsule.mode == :strict
              queues = capsule.queues.map(&:to_s)
            else
              raise ArgumentError, "missing queue list" unless capsule_or_options[:queues]

              strict = capsule_or_options[:strict] ? true : false
              queues = capsule_or_options[:queues].map(&:to_s)
            end
            [capsule, strict, strict ? queues.uniq : queues]
          end

          # A queue's arguments of the fetch script: its key prefix ("" when not fair), name, mode.
          def fetch_args(queue)
            return ["", queue, ""] unless FairQueues.fair?(queue)

            [FairQueues.base(queue), queue, FairQueues.time?(queue) ? Native::Names::FAIR_MODE_TIME : ""]
          end

          # The process's threads beside a fetcher's: the heartbeat (Concurrency::Slots: renews the leases of slots
          # taken here, its sweep brings back tenants whose holder died; Liveness beats) and the fleet's recovery
          # sweeps.
          def background(fetcher)
            Liveness.fetching_as(fetcher.identity)
            Sweeper.start(fetcher.identity)
            Concurrency::Slots.start
          end

          # This process's identity as Sidekiq's heartbeat names it.
          def identity
            if defined?(::Sidekiq::Component)
              Object.new.extend(::Sidekiq::Component).identity
            else
              require "sidekiq/util"
              Object.new.extend(::Sidekiq::Util).identity
            end
          end
        end
      end
    end
  end
end
