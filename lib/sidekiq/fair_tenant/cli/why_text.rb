# frozen_string_literal: true

require "time"

module Sidekiq
  module FairTenant
    class CLI
      # FairTenant.why's answer as sentences, for the CLI (`sidekiq-fair_tenant why JID`) and the Web tab.
      module WhyText
        PLACES = {
          ready: "%<tenant>s is in the rotation: %<ahead>d of %<ready>d ready tenant(s) start before it " \
                 "(weight %<weight>s, share %<share>s)",
          capped: "%<tenant>s is out of the rotation until its next job's concurrency scope has room",
          over: "%<tenant>s is at its elastic cap: served only while no tenant under its limit is ready",
          rated: "%<tenant>s is out of the rotation until a rate window lets its next job start",
          paused: "%<tenant>s is paused (weight 0): its jobs wait until its weight is set above 0",
          nil => "%<tenant>s is in no place of the rotation (its jobs changed meanwhile: ask again)"
        }.freeze
        SETS = { scheduled: "the scheduled set: runs at", retry: "the retry set: retries at",
                 dead: "the dead set: died at" }.freeze

        module_function

        def lines(why)
          jid = why[:jid]
          case why[:state]
          when :running then in_flight(why)
          when :waiting then waiting(why)
          when :queued, :parked then plain(why)
          when *SETS.keys then ["#{jid} is in #{SETS[why[:state]]} #{why[:at]&.utc&.iso8601} (queue #{why[:queue]})"]
          else ["#{jid} was not found waiting, running, scheduled, retrying or dead (it may have finished)"]
          end
        end

        # On a queue that is not fair: in its list, or parked by the server middleware until its scope has room.
        def plain(why)
          jid = why[:jid]
          return ["#{jid} is parked (queue not fair) until its concurrency scope has room", *held(why[:held_by])] \
            if why[:state] == :parked

          ["#{jid} waits in queue #{why[:queue]}, not fair (first in, first out): #{why[:ahead]} job(s) ahead of it"]
        end

        # A live process runs it, or its audit puts it back; a dead one's jobs are recovered.
        def in_flight(why)
          where = "#{why[:jid]} is in flight at #{why[:process]} (queue #{why[:queue]}, tenant #{why[:tenant]})"
          return ["#{where}: its heartbeat is gone; it goes back once the process is taken for dead"] unless why[:alive]

          ["#{where}: running there, or back at the front of its tenant within #{why[:back_within]} s " \
           "if no thread there runs it"]
        end

        def waiting(why)
          tenant = why[:tenant]
          place = format(PLACES.fetch(why[:place]), tenant: tenant, ahead: why[:tenants_ahead],
                                                    ready: why[:tenants_ready], share: share(why),
                                                    weight: Format.format_number(why[:weight]))
          ["#{why[:jid]} waits in fair queue #{why[:queue]}, tenant #{tenant}",
           "#{why[:ahead_in_tenant] || "?"} of #{tenant}'s #{why[:tenant_backlog]} waiting job(s) are ahead of it",
           place, *held(why[:held_by])]
        end

        def share(why)
          why[:share] ? format("%.1f%%", why[:share] * 100) : "not computed: many tenants ready"
        end

        def held(held_by)
          return [] unless held_by.is_a?(Hash)
          return rate_held(held_by[:rate]) if held_by[:rate]

          held_by[:concurrency] ? cap_held(held_by[:concurrency]) : []
        end

        def cap_held(cap)
          holders = cap[:holders].map { |h| "#{h[:jid]} (lease #{h[:lease_left]}s left)" }
          ["held by #{Format.scope_name(cap[:scope] || {})}: running #{cap[:running]}/#{cap[:limit]}" \
           "#{" (elastic)" if cap[:elastic]}#{"; holders: #{holders.join(", ")}" unless holders.empty?}"]
        end

        def rate_held(rate)
          ["held by a rate window: may start in #{rate[:starts_in]}s (#{rate[:at].utc.iso8601(3)})"]
        end
      end
    end
  end
end
