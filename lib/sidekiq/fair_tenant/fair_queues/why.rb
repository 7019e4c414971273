# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # Why is this job still waiting? Where a job stands and what holds it, found by its jid:
      #
      #   Sidekiq::FairTenant.why("b4a577edbccf1d805744efa9")
      #   # => {jid: "b4a5...", state: :waiting, queue: "imports", tenant: "acme",
      #   #     ahead_in_tenant: 3, tenant_backlog: 120,           # its tenant's jobs before it, and all of them
      #   #     place: :capped, tenants_ahead: 0, tenants_ready: 4, # where its tenant is, tenants served before it
      #   #     weight: 1.0, share: 0.2,                           # the tenant's weight, its share of the queue
      #   #     held_by: {concurrency: {scope: {tenant: "acme", queue: "imports"}, running: 2, limit: 2,
      #   #               elastic: false, holders: [{jid: "...", lease_left: 41.5}, ...]}}}
      #
      # `state`: :running (in a process's in-flight list: `process`, and `queue`/`tenant` for a fair queue;
      # `alive`: its Sidekiq heartbeat key exists, and then `back_within`: the seconds within which the process's
      # audit puts the job back at the front of its tenant if no thread of it runs the job),
      # :waiting (in a fair queue's backlog, explained as above), :queued (in a plain queue's list: `ahead`, jobs
      # Sidekiq pops first), :parked (a plain-queue job the server middleware parked until its concurrency scope
      # has room: `held_by` names that scope, its holders and how many are parked there), :scheduled, :retry or
      # :dead (`at`: when it runs next, or died), or :unknown.
      # `place`: :ready (in the rotation; `tenants_ahead` of the ready tenants start first), :capped (out of the
      # rotation until its next job's concurrency scope has room), :over (at an elastic cap: served only while no
      # tenant under its limit is ready), :rated (out of the rotation until a rate window lets its next job start),
      # :paused (weight 0), or nil. `held_by` names what holds it: :paused, the concurrency scope (its running jobs,
      # limit and first holders, longest lease first), a rate window ({rate: {starts_in: s, at: Time}}), or nil.
      # `share` is nil when more than WHY_SHARE_MAX tenants are ready.
      #
      # A search: in-flight lists, then fair backlogs (bounded script calls, FIND_BATCH jobs each), then plain
      # queue lists, the scopes with parked jobs and Sidekiq's sorted sets. A job that moves meanwhile may be
      # missed (:unknown; ask again).
      class Why
        NAMES = Native::Names
        PLACES = { NAMES::READY => :ready, NAMES::CAPPED => :capped, NAMES::OVER => :over,
                   NAMES::RATED => :rated, NAMES::PAUSED => :paused }.freeze
        PAGE = 100
        SETS = { scheduled: "ScheduledSet", retry: "RetrySet", dead: "DeadSet" }.freeze

        def call(jid)
          jid = jid.to_s
          raise ArgumentError, "#{self.class.name}: a jid is a non-empty string" if jid.empty?

          Sidekiq.redis do |conn|
            running(conn, jid) || waiting(conn, jid) || queued(conn, jid) || parked(conn, jid) || in_sets(jid) ||
              { jid: jid, state: :unknown }
          end
        end

        private

        def quoted(jid) = "\"jid\":#{JSON.generate(jid)}"

        def running(conn, jid)
          Recovery.owners(conn).each do |identity|
            InFlightKeys.each_job(conn, Native::Fair.inflight_key(identity)) do |field, job|
              next unless job.include?(quoted(jid))

              return in_flight(conn, jid, identity, field)
            end
          end
          nil
        end

        def in_flight(conn, jid, identity, entry)
          queue, tenant, = Native::Fair.decode_entry(entry)
          alive = conn.call("EXISTS", identity).to_i == 1
          { jid: jid, state: :running, queue: queue, tenant: tenant, process: identity, alive: alive,
            back_within: alive ? FairQueues.back_within : nil }
        end

        def waiting(conn, jid)
          Visibility.backlogs.each do |queue, backlog|
            next unless backlog.positive?

            tenant, job = find(conn, queue, jid)
            return explain(conn, jid, queue, tenant, job) if tenant
          end
          nil
        end

        def find(conn, queue, jid)
          cursor = [0, 0]
          loop do
            reply = ScriptRunner.run(conn, "find", [], [FairQueues.base(queue), quoted(jid), *cursor])
            return nil if reply.empty?
            return [reply[1], reply[3]] if reply[0].nil? || reply[0] == false

            cursor = reply
          end
        end

        def explain(conn, jid, queue, tenant, job)
          ahead, jobs, place, rank, ready, weight, share, slot, rate =
            ScriptRunner.run(conn, "why", [FairQueues::WEIGHTS_KEY], [FairQueues.base(queue), queue, tenant, job])
          place = PLACES[place]
          { jid: jid, state: :waiting, queue: queue, tenant: tenant, ahead_in_tenant: ahead, tenant_backlog: jobs.to_i,
            place: place, tenants_ahead: rank.to_i, tenants_ready: ready.to_i, weight: weight.to_f,
            share: share&.to_f&.round(4), held_by: held_by(place, slot, rate) }
        end

        def held_by(place, slot, rate = nil)
          return :paused if place == :paused
          return { rate: { starts_in: (rate.to_f / 1000).round(3), at: Time.now + (rate.to_f / 1000) } } if rate
          return nil unless slot && %i[capped over].include?(place)

          scope, running, limit, elastic, holders = slot
          { concurrency: { scope: Stats.scope_hash(scope), running: running.to_i, limit: limit.to_i,
                           elastic: elastic.to_i == 1,
                           holders: holders.map { |j, left| { jid: j, lease_left: (left.to_f / 1000).round(1) } } } }
        end

        # A plain queue's list, PAGE entries a round trip from the end Sidekiq pops.
        def queued(conn, jid)
          conn.call("SMEMBERS", "queues").each do |queue|
            key = "queue:#{queue}"
            (0..).step(PAGE) do |from|
              entries = conn.call("LRANGE", key, -from - PAGE, -from - 1)
              index = entries.rindex { |entry| entry.include?(quoted(jid)) }
              return { jid: jid, state: :queued, queue: queue, ahead: from + entries.size - 1 - index } if index
              break if entries.size < PAGE
            end
          end
          nil
        end

        # A plain-queue job the server middleware parked: the scope whose waits hash names it (the one it waits
        # on; a job of several scopes parks on one at a time, holding none).
        def parked(conn, jid)
          scopes = FairTenant.stats.parked_scopes(conn).flat_map { |tag, subs| subs.map { |sub| [tag, sub] } }
          found = scopes.find { |tag, sub| conn.call("HEXISTS", Native::Stats.waits_key(tag, sub), jid).to_i == 1 }
          found && { jid: jid, state: :parked, held_by: { concurrency: parked_scope(FairTenant.stats.scope(*found)) } }
        end

        def parked_scope(details)
          { scope: details.slice(:tenant, :queue, :key), running: details[:running], limit: details[:limit],
            elastic: false, parked: details[:parked],
            holders: details[:holders].map do |holder|
              { jid: holder[:jid], lease_left: [holder[:lease_expires_at] - Time.now, 0].max.round(1) }
            end }
        end

        def in_sets(jid)
          SETS.each do |state, name|
            set = ::Sidekiq.const_get(name)
            entry = set.new.find_job(jid) or next
            return { jid: jid, state: state, queue: entry.queue, at: entry.at }
          end
          nil
        end
      end
    end
  end
end
