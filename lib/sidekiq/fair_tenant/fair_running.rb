# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # The fair jobs this fetcher handed out and that have not ended, by jid. A job recovered while it still
      # ran here (this process's heartbeat lapsed) and fetched here again is not run a second time: its entry
      # replaces the first one's, which the recovery already took, so the run's acknowledgement drops it.
      module Running
        JID = /"jid":"([^"\\]*)"/
        RECOVERED = %("#{Interruptions::COUNT}":).b.freeze

        # The jid of a job as the fetch script returned it (any bytes; nil when none).
        def self.jid_of(job)
          text = job.valid_encoding? ? job : job.b
          text[JID, 1]
        end

        # The entry a unit's end acknowledges or requeues (its own, or a later fetch's of the same job).
        def ended(unit)
          @running_mutex.synchronize do
            @running.delete(unit.jid) if unit.jid && @running[unit.jid].equal?(unit)
            unit.entry
          end
        end

        private

        def init_running
          @running = {}
          @running_mutex = Mutex.new
        end

        # The unit to run, or nil when its job already runs here and this is its recovered copy (the earlier
        # unit takes over the copy's entry).
        def started(unit)
          return unit unless unit.jid

          earlier = @running_mutex.synchronize do
            current = @running[unit.jid]
            if current.nil?
              @running[unit.jid] = unit
              nil
            elsif unit.job.b.include?(RECOVERED)
              current.entry = unit.entry
              current
            end
          end
          return unit unless earlier

          FairFetch.held!(nil)
          ::Sidekiq.logger.warn("[sidekiq-fair_tenant] job #{unit.jid} was recovered while it ran here " \
                                "(this process's heartbeat lapsed): not run twice")
          nil
        end
      end
    end
  end
end
