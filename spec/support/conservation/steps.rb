# frozen_string_literal: true

# rubocop:disable Metrics/ModuleLength, Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity -- a model checker's case analysis, kept in one place

require "English"

module Conservation
  # Steps of a Run on jobs, each on the real objects: Sidekiq's client, FairFetch instances and their units
  # FairQueues::Recovery, the weights and limits APIs, FairQueues.drain. Each returns a line for the history.
  module Steps
    TEXTS = ["plain", "héllo wörld", "日本語のテキスト", "emoji 🎉🧪", "quote \" back \\ slash /", "sep \u2028 \u2029",
             "tab\tnl\n", "ünïcødé ✓"].freeze

    private

    def push(count = nil)
      return "push: #{@open.size} jobs open, none pushed" if @open.size >= Run::MAX_OPEN

      (count || (1 + rng.rand(3))).times.map { push_one }.join("; ")
    end

    def push_one
      klass, queue = pick_class
      tenants = klass.get_sidekiq_options["fair_tenant_concurrency"] ? CAPPED_TENANTS : TENANTS
      tenant = (@without.include?(:bytes) ? tenants - ["bytes"] : tenants).sample(random: rng)
      id = "j#{@jobs.size}"
      args = [tenant, @jobs.size, TEXTS.sample(random: rng)]
      job = Job.new(id: id, queue: queue, klass: klass.name, args: args, pushed: true)
      @jobs[id] = job
      @open << id
      begin
        Sidekiq::Client.push("class" => klass, "queue" => queue, "args" => args, "jid" => id)
        @notes[:pushed] += 1
        "push #{id} #{klass.name} #{queue} #{tenant}"
      rescue StandardError => e
        job.pushed = false
        "push #{id} raised #{e.class}: #{e.message[0, 60]}"
      end
    end

    def pick_class
      case rng.rand(100)
      when 0...47 then [ConservedJob, "fair"]
      when 47...50 then [ConservedRatedJob, "fair"] # concurrency and rate, each per tenant and shared
      when 50...62 then [ConservedCappedJob, "fair"]
      when 62...67 then [ConservedSharedJob, "fair"]
      when 67...70 then [ConservedSharedFirstJob, "fair"]
      when 70...85 then [ConservedJob, "fair2"]
      when 85...88 then [ConservedSharedJob, "plain"] # several scopes on a plain queue (acquire_all.lua)
      when 88...90 then [ConservedSharedFirstJob, "plain"]
      else [ConservedJob, "plain"]
      end
    end

    # One fetch by one thread of a process: retrieve_work, blocking at most FairFetch::TIMEOUT (made short).
    def fetch(process = fetching.sample(random: rng), idle: rng.rand(4).zero?)
      return "fetch: no process" unless process
      return "fetch #{process.identity}: stopping, fetches nothing" if process.stopping

      process.fetcher.instance_variable_get(:@threads)[Thread.current].idle = idle # its last wait timed out
      pending = process.pending.dup
      unit = begin
        process.fetcher.retrieve_work
      ensure
        confirm_acks(process, pending, failed: $ERROR_INFO)
      end
      return "fetch #{process.identity}#{" (idle)" if idle}: nothing" unless unit

      hold(process, unit, pending)
    end

    # Several threads of one process fetch at the same moment: FairFetch::Batch serves them with shared calls
    # (the first carries the pending acknowledgements). Each unit then runs in this thread, as a single fetch's.
    def fetch_batch(process = fetching.sample(random: rng))
      return "fetch batch: no process" unless process
      return "fetch batch #{process.identity}: stopping, fetches nothing" if process.stopping

      pending = process.pending.dup
      results = batch_results(process, 2 + rng.rand(4))
      failed = results.find { |result| result.is_a?(Exception) }
      confirm_acks(process, pending, failed: failed)
      lines = results.filter_map { |result| batch_unit(process, *result, pending) unless result.is_a?(Exception) }
      raise failed if failed

      @notes[:batched] += lines.size if lines.size > 1
      "fetch batch of #{results.size} on #{process.identity}: #{lines.size} served#{": " unless lines.empty?}" \
        "#{lines.map { |line| line.split(": ", 2).last }.join(", ")}"
    end

    # [unit or nil, the slot note its thread was left] per thread, or the error its fetch raised.
    def batch_results(process, count)
      gate = Queue.new
      threads = Array.new(count) do
        Thread.new do
          gate.pop
          [process.fetcher.retrieve_work, Thread.current[Sidekiq::FairTenant::Concurrency::HeldSlot::KEY]]
        rescue StandardError => e
          e
        end
      end
      count.times { gate << true }
      threads.map(&:value)
    end

    def batch_unit(process, unit, held_jid, carried)
      return nil unless unit

      ledger = Sidekiq::FairTenant::FairFetch::InFlight.ledger(process.fetcher.inflight_key)
      Sidekiq::FairTenant::FairFetch::InFlight.handed(ledger, unit) if unit.respond_to?(:entry) # runs here now
      Thread.current[Sidekiq::FairTenant::Concurrency::HeldSlot::KEY] = held_jid
      hold(process, unit, carried)
    end

    # `carried`: the acknowledgements the fetch carried.
    def hold(process, unit, carried)
      id = RedisView.id_of(unit.job)
      entry = unit.respond_to?(:entry) ? unit.entry.b : nil
      held = Held.new(id: id, unit: unit, entry: entry, stale: false)
      if job_starts(process, held, carried) == :parked
        @notes[:parked_plain] += 1
        return "fetch #{process.identity}: #{id} plain #{unit.queue}, parked for a slot"
      end
      process.units << held
      job = @jobs[id]
      @notes[:fetched] += 1
      @notes[:reruns_after_crash] += 1 if job&.unconfirmed
      "fetch #{process.identity}: #{id} #{entry ? "fair" : "plain"} #{unit.queue}"
    end

    # A unit runs and ends: acknowledged (rides with the process's next fetch). A payload that is no job goes
    # to the dead set, as Sidekiq's processor does with a job it cannot parse.
    def finish(process = random_process(&:units))
      return "finish: nothing running" unless process

      held = process.units.delete_at(rng.rand(process.units.size))
      job_returns(process, held)
      job = @jobs[held.id]
      if job&.garbage && !held.stale
        Sidekiq::DeadSet.new.kill(held.unit.job, notify_failure: false)
        job.killed = true
      end
      held.unit.acknowledge
      if held.entry
        process.pending << held # stale: the ack takes its copy back first if it still waits (confirm_acks)
      elsif !job&.garbage
        job.done = true
      end
      line = "finish #{held.id} on #{process.identity}#{" (stale: recovered meanwhile)" if held.stale}"
      stopped_when_idle(process, line)
    end

    def requeue(process = random_process(&:units))
      return "requeue: nothing running" unless process

      index = rng.rand(process.units.size)
      held = process.units[index]
      job_returns(process, held) # (Sidekiq::Shutdown raised in the job: the middleware's `ensure` first)
      begin
        held.unit.requeue
      rescue StandardError
        # Its thread gave the job up all the same (a shutdown): a fair job's entry stays, nothing runs it (the
        # audit, or a recovery, puts it back); a plain one is gone, as with Sidekiq's BasicFetch.
        if held.entry
          # (A stale one's copy, recovered, may come back with the process's next call: nothing runs it either.)
          (held.stale ? process.stale_leaked : process.leaked) << held.entry
        elsif @jobs[held.id]
          @jobs[held.id].lost_ok = true
        end
        raise
      ensure
        process.units.delete_at(index)
      end
      stopped_when_idle(process, "requeue #{held.id} on #{process.identity}")
    end

    def flush(process = random_process)
      return "flush: no process" unless process

      pending = process.pending.dup
      begin
        process.fetcher.flush_acks
      ensure
        confirm_acks(process, pending, failed: $ERROR_INFO)
      end
      "flush_acks #{process.identity} (#{pending.size})"
    end
  end
end
# rubocop:enable Metrics/ModuleLength, Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity
