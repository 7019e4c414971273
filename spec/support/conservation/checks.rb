# frozen_string_literal: true

# rubocop:disable Metrics/ModuleLength, Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity -- a model checker's case analysis, kept in one place

require "json"

module Conservation
  # What a Run checks after every step, reading Redis (RedisView) against what the harness did.
  module Checks
    private

    def check
      view = sidekiq_redis { |conn| RedisView.new(conn, FAIR_QUEUES) }
      view.problems.each { |problem| violation(:redis_state, problem) }
      check_live_lists(view)
      check_leases
      check_registry(view)
      check_jobs(view)
      check_garbage_recovery(view) if @swept
      @last_view = view
    end

    # A live process's in-flight list holds exactly the entries of the units it runs and of the
    # acknowledgements it has not sent. An entry leaves it only by its ack or requeue, or by a recovery while
    # its heartbeat key is missing (the unit is then stale: its job may run elsewhere too).
    def check_live_lists(view)
      @processes.each do |process|
        list = (view.inflight[process.identity.b] || []).tally
        expected = expected_entries(process).tally
        expected.each do |entry, count|
          missing = count - list.fetch(entry, 0)
          vanished(process, entry, missing) if missing.positive?
        end
        list.each do |entry, count|
          extra = count - expected.fetch(entry, 0)
          extra -= reclaimed(process, entry, extra) if extra.positive?
          next unless extra.positive?

          violation(:unexpected_entry, "#{process.identity}'s in-flight list holds #{entry[0, 100].inspect} " \
                                       "(#{extra}x), which no unit or pending ack of it stands for")
          process.leaked.concat([entry] * extra)
        end
      end
    end

    def expected_entries(process)
      process.units.reject(&:stale).filter_map(&:entry) + process.pending.reject(&:stale).map(&:entry) +
        process.leaked
    end

    # A recovered process that was only stalled took the copies still waiting back at its next call: the
    # entries of its stale units are in its list again, and those units are its own again. Returns how many.
    def reclaimed(process, entry, count)
      helds = (process.units + process.pending).select { |held| held.stale && held.entry == entry }.first(count)
      helds.each { |held| held.stale = false }
      @notes[:reclaimed] += helds.size
      # An entry nothing ran (a lost fetch reply's, a requeue that failed) taken by a recovery, and back.
      leaked = [count - helds.size, process.stale_leaked.count(entry)].min
      leaked.times do
        process.stale_leaked.delete_at(process.stale_leaked.index(entry))
        process.leaked << entry
      end
      helds.size + leaked
    end

    # Entries gone from a live process's list: the units are stale from now on (and entries left over by an
    # ack that was never sent are forgotten). Only a recovery while its heartbeat key was missing may do that, or
    # the rest of one cut short then (its key may be back: the process is recovered until its next call).
    def vanished(process, entry, count)
      helds = (process.units + process.pending).select { |held| !held.stale && held.entry == entry }.first(count)
      helds.each { |held| held.stale = true }
      away = @swept && (!process.beating || @recovering.include?(process.identity.b))
      (count - helds.size).times do
        process.leaked.delete_at(process.leaked.index(entry))
        process.stale_leaked << entry if away # its copy may come back with the process
      end
      if away
        @notes[:lapse_recovered] += count
        unless process.stalled || @recovering.include?(process.identity.b) # (that recovery began while it was)
          lapse = Sidekiq::FairTenant::FairQueues::Recovery::LAPSE
          violation(:live_recovered, "#{process.identity}: #{count} in-flight job(s) of a live process recovered " \
                                     "before its heartbeat key had been gone for #{lapse} s")
        end
      else
        ids = helds.map(&:id).join(",")
        violation(:entry_vanished, "#{process.identity}: in-flight entry #{ids.empty? ? entry[0, 80].inspect : ids} " \
                                   "gone though it runs there (heartbeat #{process.beating ? "present" : "missing"})")
      end
    end

    # A process missing from the registry re-registers on its next fetch, and a recovery cut short is finished
    # by the next sweep from `recovering`: an in-flight list of an identity neither names would never be
    # recovered.
    def check_registry(view)
      view.inflight.each do |identity, entries|
        next if entries.empty? || view.registry.include?(identity)

        violation(:unregistered, "in-flight list of #{identity.inspect} (#{entries.size} jobs, " \
                                 "#{live?(identity) ? "live" : "crashed"}) is neither registered nor being " \
                                 "recovered: never recovered")
      end
    end

    def check_jobs(view)
      running_plain = @processes.flat_map(&:units).reject { |held| held.entry || held.stale }.map(&:id).tally
      # Jobs done (or gone with a crash) are looked at again only when Redis holds them.
      (@open | view.places.keys).each do |id|
        job = @jobs[id] or next
        check_job(job, view.places.fetch(id, []), running_plain)
        job.pushed && !job.done && !job.lost_ok ? @open << id : @open.delete(id)
      end
      view.places.each_key do |id|
        violation(:unknown_job, "#{id} is in Redis but was never pushed") unless @jobs.key?(id)
      end
    end

    def check_job(job, places, running_plain)
      count = places.size + running_plain.fetch(job.id, 0)
      return pushed_anyway(job, places) if !job.pushed && count.positive?
      return unless job.pushed

      # A payload the processor sent to the dead set is there and, until its ack is applied (or, at least once,
      # after a crash or a lapse), in flight or waiting to be sent there again.
      count -= 1 if count > 1 && job.killed && places.any? { |kind, _| kind == :dead }
      if count > 1
        violation(:duplicate, "#{job.id} is in #{count} places: #{describe(places)}")
      elsif count.zero? && !job.done && !job.lost_ok
        violation(:lost, "#{job.id} (#{job.klass} #{job.queue} #{job.args.inspect}) is nowhere and never finished")
        job.lost_ok = true
      elsif job.done && count.positive?
        violation(:ran_after_done, "#{job.id} finished (ack applied) and is back: #{describe(places)}")
        job.done = false
      end
      check_contents(job, places) unless job.garbage
    end

    def pushed_anyway(job, places)
      violation(:push_raised_but_stored, "#{job.id}: the push raised, yet the job is in #{describe(places)}")
      job.pushed = true
    end

    # Jobs keep what they carry through every move (recovery, requeue, drain, adoption): jid, class, queue,
    # arguments (non-ASCII ones included).
    def check_contents(job, places)
      places.each do |_kind, where, payload|
        next if @checked_payloads.include?(payload)

        @checked_payloads << payload
        parsed = parse(payload)
        next if parsed && parsed.values_at("jid", "class", "queue", "args") == [job.id, job.klass, job.queue, job.args]

        violation(:payload_changed, "#{job.id} in #{where.inspect} reads #{payload[0, 160].inspect}")
      end
    end

    def parse(payload)
      parsed = JSON.parse(payload.dup.force_encoding(Encoding::UTF_8))
      parsed.is_a?(Hash) ? parsed : nil
    rescue JSON::ParserError
      nil
    end

    # A recovered payload that is not a JSON object goes to the dead set (never back to its tenant, never
    # nowhere).
    def check_garbage_recovery(view)
      @swept.each do |id, identity|
        places = view.places.fetch(id, [])
        next if places.any? { |kind, where| kind == :inflight && where == identity }
        next if places.any? { |kind, _| kind == :dead }

        violation(:garbage_not_dead, "#{id}, recovered from #{identity}'s in-flight list, is not in the dead set " \
                                     "but in #{describe(places)}")
      end
    end

    # [id, identity] of payloads that are no job, in the in-flight lists of processes without a heartbeat.
    def garbage_in_flight
      view = sidekiq_redis { |conn| RedisView.new(conn, FAIR_QUEUES) }
      view.places.flat_map do |id, places|
        next [] unless @jobs[id]&.garbage

        places.select { |kind, where| kind == :inflight && !beating?(where) }.map { |_, where| [id, where] }
      end
    end

    def describe(places)
      return "nowhere" if places.empty?

      places.map { |kind, where, _| "#{kind} #{where.dup.force_encoding(Encoding::UTF_8).scrub.inspect}" }.join(", ")
    end
  end
end
# rubocop:enable Metrics/ModuleLength, Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity
