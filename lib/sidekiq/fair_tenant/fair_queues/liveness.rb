# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # A fetching process shows recovery it lives: every EVERY seconds the gem's heartbeat thread
      # (Concurrency::Slots.beat) clears any suspicion a sweep raised because its Sidekiq heartbeat key was gone
      # (deleted, evicted). Only a process whose threads have all stopped for longer than Recovery::LAPSE is
      # recovered.
      module Liveness
        EVERY = 4

        PACE = Interval.new(EVERY)
        @identity = nil

        class << self
          # The process named `identity` lives: a later absence of its heartbeat key starts a suspicion anew.
          def alive(identity)
            ::Sidekiq.redis { |conn| conn.call("HDEL", Recovery::SUSPECTS, identity) }
          end

          def beat(now)
            identity = @identity or return
            alive(identity) if PACE.due?(now)
          end

          # Called by a Fetch: this process fetches as `identity`.
          def fetching_as(identity)
            @identity = identity
            PACE.now!
          end
        end

        Concurrency::Slots.on_beat { |now| beat(now) }
      end
    end
  end
end
