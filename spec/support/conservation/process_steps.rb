# frozen_string_literal: true

# rubocop:disable Metrics/CyclomaticComplexity -- a model checker's case analysis, kept in one place

module Conservation
  # Steps of a Run on processes: crash, start, heartbeat, lapse, recovery sweep.
  module ProcessSteps
    private

    def crash(process = random_process)
      return "crash: no process" unless process && @processes.size > 1

      @processes.delete(process)
      process.fetcher.send(:take_acks) # the process is gone: what it had in memory with it
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
      fetcher = Sidekiq::FairTenant::FairFetch.new({ queues: queues, strict: strict }, identity: identity)
      Sidekiq::FairTenant::Slots.stop # its lease sweep would run on the wall clock; no slot lease expires here
      process = Proc.new(identity: identity, fetcher: fetcher, units: [], pending: [], beating: false, leaked: [])
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
      process.beating = true
      "beat #{process.identity}"
    end

    def lapse(process = random_process)
      return "lapse: no process" unless process

      sidekiq_redis { |conn| conn.call("DEL", process.identity) }
      process.lapsed_at = monotonic if process.beating
      process.beating = false
      "lapse #{process.identity} (heartbeat key deleted, process alive)"
    end

    def sweep(process = random_process)
      return "sweep: no process" unless process

      before = garbage_in_flight
      found = sidekiq_redis { |conn| Sidekiq::FairTenant::FairFetch::Recovery.sweep(conn, process.identity) }
      @swept = before
      @notes[:recovered] += found.to_i
      "sweep by #{process.identity}: #{found} recovered"
    end
  end
end
# rubocop:enable Metrics/CyclomaticComplexity
