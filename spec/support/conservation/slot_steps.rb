# frozen_string_literal: true

require_relative "slot_heartbeats"

module Conservation
  # Steps of a Run on concurrency slots: capped jobs run through the server middleware, a graceful stop, slot
  # lease time passing (SlotHeartbeats).
  module SlotSteps
    SLOT_FIELD = Sidekiq::FairTenant::Native::Names::SLOT_FIELD
    SLOT_FIELDS = Sidekiq::FairTenant::Native::Names::SLOT_FIELDS
    SLOT_MORE_FIELD = Sidekiq::FairTenant::Native::Names::SLOT_MORE_FIELD
    # Longer than any lease of the run's jobs (ConservedCappedJob: 600 s).
    LEASE_PASSES_MS = 601_000

    private

    # Sidekiq's TERM (Launcher#stop): quiet, then :shutdown, the gem's hooks run; its threads finish the jobs they
    # run (finish and requeue steps) and fetch nothing more. Picked again, its shutdown timeout ends (leave).
    def graceful_stop(process = random_process)
      return "graceful_stop: no process" unless process
      return leave(process) if process.stopping
      return "graceful_stop: #{process.identity} is the last process fetching" if fetching.size < 2

      begin_stop(process)
    end

    def begin_stop(process)
      process.stopping = true
      SlotHeartbeats.as(process) { %i[quiet shutdown].each { |event| lifecycle.fire(event) } }
      @notes[:graceful_stops] += 1
      @notes[:stopped_holding_slots] += 1 if process.units.any?(&:scope)
      line = "graceful stop of #{process.identity} (#{process.units.size} running, " \
             "#{process.units.count(&:scope)} holding slots): quiet, :shutdown"
      process.units.empty? ? "#{line}; #{leave(process)}" : line
    end

    # A stopping process exits once its last job ended (Manager#stop's wait ends early).
    def stopped_when_idle(process, line)
      return line unless process.stopping && process.units.empty? && @processes.include?(process)

      "#{line}; #{leave(process)}"
    end

    # The processes that fetch (not stopping).
    def fetching = @processes.reject(&:stopping)

    def lifecycle
      @lifecycle ||= Lifecycle.new
    end

    # The end of the shutdown: jobs still running are pushed back (Manager#hard_shutdown: the fetch's
    # bulk_requeue, then the threads die), the acknowledgements sent (Launcher#stop's bulk_requeue([])), and
    # the process exits (its heartbeat key gone). Its in-flight list keeps only what nothing of it stood for.
    def leave(process)
      running = process.units.dup
      pending = process.pending.dup
      begin
        process.fetcher.bulk_requeue(running.map(&:unit))
      ensure
        confirm_acks(process, pending)
      end
      running.each { |held| job_returns(process, held) } # the killed threads' middleware `ensure`
      process.units.clear
      process.fetcher.bulk_requeue([])
      sidekiq_redis { |conn| conn.call("DEL", process.identity) }
      @processes.delete(process)
      Sidekiq::FairTenant::FairFetch::Acks.instance_variable_get(:@fetchers).delete(process.fetcher)
      left_in_flight(process, running.select(&:stale))
      @notes[:left] += 1
      @notes[:requeued_at_shutdown] += running.size
      return "#{process.identity} exits (#{pending.size} acks sent)" if running.empty?

      "#{process.identity}'s shutdown timeout ends: #{running.size} still running pushed back, " \
        "#{pending.size} acks sent; it exits"
    end

    # What may stay: entries nothing of it stood for (a lost fetch reply's, a requeue that failed), and those a
    # recovery took while it stalled (their copies come back with its next call), recovered later.
    def left_in_flight(process, stale)
      left = in_flight_of(process).tally
      allowed = process.leaked + process.stale_leaked + stale.filter_map(&:entry)
      allowed.each { |entry| left[entry] -= 1 if left[entry]&.positive? }
      left.select! { |_entry, count| count.positive? }
      return if left.empty?

      violation(:left_in_flight, "#{process.identity} exited after a graceful stop with #{left.values.sum} " \
                                 "entries of its own jobs in flight: #{left.keys.first[0, 100].inspect}")
    end

    # Lease time passes (longer than any lease): the heartbeats that run renew the leases of the jobs their
    # processes run (each one turn of its loop, its own decision); every other lease expires, and the slot sweep
    # (Slots' periodic one) reclaims it.
    def lease_time_passes
      aged = age_leases
      turns = @processes.map { |process| SlotHeartbeats.turn(process) }
      handed, reclaimed = Sidekiq::FairTenant::Concurrency::SlotCalls.sweep(Sidekiq::FairTenant.config.sweep_batch)
      @notes[:leases_reclaimed] += reclaimed
      "lease time passes: #{aged} leases, #{turns.grep(Integer).sum} renewed by #{turns.grep(Integer).size} " \
        "heartbeats (#{turns.count(:ended)} ended: stopping, nothing held); the sweep reclaimed #{reclaimed}, " \
        "handed #{handed}"
    end

    # Every lease's expiry moves back by LEASE_PASSES_MS (Redis's clock cannot move): all are over.
    def age_leases
      sidekiq_redis do |conn|
        conn.call("KEYS", "#{SlotChecks::SLOTS_PREFIX}*#{SlotChecks::HOLDERS}").sum do |key|
          pairs = conn.call("ZRANGE", key, 0, -1, "WITHSCORES").flatten.each_slice(2).to_a
          pairs.each { |jid, expiry| conn.call("ZADD", key, "XX", expiry.to_f - LEASE_PASSES_MS, jid) }
          pairs.size
        end
      end
    end

    # A job whose fair fetch took its slot starts as Sidekiq's processor runs it, in the thread that fetched it:
    # through the server middleware (its fair-queue path: the heartbeat renews the lease while the job runs),
    # paused inside the job until it ends (job_returns). Checked first: it starts under its limit.
    def job_starts(process, held, carried)
      # (A plain-queue job runs through the middleware's plain path, unless CONSERVATION_WITHOUT=plain_slots.)
      return (@without.include?(:plain_slots) ? nil : plain_starts(process, held)) unless held.entry

      held_jid = Thread.current[Sidekiq::FairTenant::Concurrency::HeldSlot::KEY]
      return if held_jid.nil? || !held.entry

      Thread.current[Sidekiq::FairTenant::Concurrency::HeldSlot::KEY] = nil
      job = Sidekiq.load_json(held.unit.job)
      held.scopes = [job[SLOT_FIELD], *job[SLOT_MORE_FIELD]].map do |scope|
        SLOT_FIELDS.zip(scope).to_h.values_at("tag", "sub", "limit")
      end
      held.scope = held.scopes.first.first(2)
      held.scopes.each { |scope| check_cap(process, held, scope, Conservation.tenant_of(job["args"].first), carried) }
      held.run = Fiber.new do
        Sidekiq::FairTenant::Concurrency::HeldSlot.held!(held_jid) # the fetch's note, fiber-local as the thread's is
        Sidekiq::FairTenant::ServerMiddleware.new.call(Object.const_get(job["class"]).new, job, held.unit.queue_name) do
          Fiber.yield
        end
      end
      SlotHeartbeats.as(process) { held.run.resume }
      @notes[:capped_started] += 1
    end

    # The job's `perform` returns (or its thread dies): the middleware's `ensure` runs.
    def job_returns(process, held)
      return unless held.run&.alive?

      SlotHeartbeats.as(process) { held.run.resume }
    end
  end
end
