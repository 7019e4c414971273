# frozen_string_literal: true

# rubocop:disable Metrics/CyclomaticComplexity -- a model checker's case analysis, kept in one place

module Conservation
  # Steps of a Run on processes: crash, start, heartbeat, lapse, recovery sweep (a graceful stop: SlotSteps).
  module ProcessSteps
    private

    def crash(process = random_process)
      return "crash: no process" unless process && @processes.size > 1

      @processes.delete(process)
      process.fetcher.instance_variable_get(:@acks).list.clear # the process is gone: what it had in memory with it
      Sidekiq::FairTenant::FairFetch::Acks.instance_variable_get(:@fetchers).delete(process.fetcher)
      process.pending.each { |held| @jobs[held.id].unconfirmed = true unless held.stale }
      process.units.each { |held| @jobs[held.id].lost_ok = true if !held.entry && !held.stale }
      sidekiq_redis { |conn| conn.call("DEL", process.identity) }
      "crash #{process.identity} (#{process.units.size} running, #{process.pending.size} acks unsent)"
    end

    def start_process(settings = nil)
      return "start: enough processes" if @processes.size >= 4 && !settings

      identity = "host-#{rng.rand(3)}:#{1000 + @started}:#{format("%06x", rng.rand(1 << 24))}"
      @started += 1
      queues, strict = settings || QUEUE_SETS.sample(random: rng)
      process = Proc.new(identity: identity, units: [], pending: [], beating: false, leaked: [], stale_leaked: [],
                         stopping: false, slots: SlotHeartbeats.fresh)
      # Its slot heartbeat (started by the fetcher) turns on the run's clock (lease_time_passes).
      process.fetcher = SlotHeartbeats.as(process) do
        Sidekiq::FairTenant::FairFetch.new({ queues: queues, strict: strict }, identity)
      end
      @processes << process
      beat(process)
      "start #{identity} #{queues.join(",")}#{" strict" if strict}"
    end

    # Sidekiq's heartbeat: the hash named by the identity, expiring 60 s after the last beat.
    def beat(process = random_process)
      return "beat: no process" unless process

      sidekiq_redis do |conn|
        conn.call("HSET", process.identity, "beat", Time.now.to_f.to_s, "busy", process.units.size.to_s)
        conn.call("EXPIRE", process.identity, 60)
      end
      # The gem's own heartbeat thread, which runs beside Sidekiq's (a lapse stalls both).
      Sidekiq::FairTenant::FairQueues::Liveness.alive(process.identity)
      process.beating = true
      process.stalled = false
      "beat #{process.identity}"
    end

    def lapse(process = random_process)
      return "lapse: no process" unless process

      sidekiq_redis { |conn| conn.call("DEL", process.identity) }
      process.beating = false
      "lapse #{process.identity} (heartbeat key deleted, process alive)"
    end

    # Recovery::LAPSE seconds pass (on Redis's clock, as the sweep reads it: every suspect's first-seen-gone
    # time moves back). A live process a sweep suspected, whose key is still gone, has stalled that long.
    def time_passes
      key = Sidekiq::FairTenant::Native::Fair.recovery_suspects_key
      lapse = Sidekiq::FairTenant::FairQueues::Recovery::LAPSE
      suspects = sidekiq_redis { |conn| conn.call("HGETALL", key) }
      suspects = suspects.each_slice(2).to_h if suspects.is_a?(Array)
      sidekiq_redis do |conn|
        suspects.each { |identity, since| conn.call("HSET", key, identity, (since.to_f - lapse - 1).to_s) }
      end
      stalled = @processes.select { |process| !process.beating && suspects.key?(process.identity) }
      stalled.each { |process| process.stalled = true }
      "#{lapse + 1} s pass (#{suspects.size} suspected, #{stalled.size} of them alive: stalled)"
    end

    def sweep(process = random_process)
      return "sweep: no process" unless process

      stalled_in_real_time
      before = garbage_in_flight
      @recovering = being_recovered
      result = sidekiq_redis { |conn| Sidekiq::FairTenant::FairQueues::Recovery.sweep(conn, process.identity) }
      @swept = before
      found = result ? result[:recovered] : 0
      @notes[:recovered] += found
      "sweep by #{process.identity}: #{found} recovered, #{result && result[:suspected]} suspected"
    end

    # A live process a sweep suspected whose key is still gone Recovery::LAPSE seconds later on Redis's clock has
    # stalled that long for real (a loaded machine stretches the steps between beats), as after time_passes.
    def stalled_in_real_time
      lapse = Sidekiq::FairTenant::FairQueues::Recovery::LAPSE
      key = Sidekiq::FairTenant::Native::Fair.recovery_suspects_key
      suspects, now = sidekiq_redis { |conn| [conn.call("HGETALL", key), conn.call("TIME")] }
      suspects = suspects.each_slice(2).to_h if suspects.is_a?(Array)
      now = now[0].to_f + (now[1].to_f / 1_000_000)
      @processes.each do |process|
        since = suspects[process.identity]
        next if process.beating || process.stalled || since.nil? || now - since.to_f < lapse

        process.stalled = true
        @notes[:stalled_for_real] += 1
      end
    end

    # The processes whose recovery was cut short (a sweep finishes it whether their key is back or not).
    def being_recovered
      sidekiq_redis { |conn| conn.call("SMEMBERS", RedisView::RECOVERING) }.map(&:b)
    end

    # A sweep whose process dies after its first recovery call (SIGKILL between two calls): what that call
    # took is back, the rest of the list waits for the next sweep.
    def sweep_cut(process = random_process)
      return "sweep_cut: no process" unless process

      stalled_in_real_time
      before = garbage_in_flight
      @recovering = being_recovered
      calls = CutRecovery.cut_after(1) do
        sidekiq_redis { |conn| Sidekiq::FairTenant::FairQueues::Recovery.sweep(conn, process.identity) }
      end
      @swept = before
      @notes[:recoveries_cut] += 1 if calls > 1
      "sweep by #{process.identity}, killed after its first recovery call (#{calls} call(s) tried)"
    end
  end

  # The sweeping process killed between two recovery calls: the second call never reaches Redis.
  module CutRecovery
    Killed = Class.new(StandardError)

    # Runs the block with every recovery call after the first `calls` raising Killed; returns the calls tried.
    def self.cut_after(calls)
      Thread.current[:conservation_cut] = [calls, 0]
      begin
        yield
      rescue Killed
        nil
      end
      Thread.current[:conservation_cut][1]
    ensure
      Thread.current[:conservation_cut] = nil
    end

    def recover_entries(*args)
      cut = Thread.current[:conservation_cut]
      if cut
        cut[1] += 1
        raise Killed if cut[1] > cut[0]
      end
      super
    end
  end
  Sidekiq::FairTenant::FairQueues::Recovery.singleton_class.prepend(CutRecovery)
end
# rubocop:enable Metrics/CyclomaticComplexity
