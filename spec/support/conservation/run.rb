# frozen_string_literal: true

# rubocop:disable Metrics/ClassLength, Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity -- a model checker's case analysis, kept in one place

require "set"
require_relative "jobs"
require_relative "model"
require_relative "redis_view"
require_relative "steps"
require_relative "process_steps"
require_relative "setting_steps"
require_relative "fault_steps"
require_relative "slot_steps"
require_relative "plain_slot_steps"
require_relative "slot_checks"
require_relative "checks"

module Conservation
  FAIR_QUEUES = %w[fair fair2].freeze

  # A randomised run of pushes, fetches, acks, requeues, crashes, graceful stops, recoveries, heartbeat lapses,
  # slot lease time passing, weight and limit changes, refused writes and fair-off/on, with FairFetch objects of
  # several "processes" (identities) in this Ruby process against the spec's redis-server; after every step,
  # Checks read Redis (and the caps: at each start, and the leases of running jobs). The same seed replays the
  # same run. `violations` maps a kind to its count, first message and the steps before it.
  class Run
    include Steps
    include ProcessSteps
    include SettingSteps
    include FaultSteps
    include SlotSteps
    include PlainSlotSteps
    include SlotChecks
    include Checks

    WEIGHTS = { push: 22, fetch: 20, fetch_batch: 6, finish: 18, requeue: 3, flush: 3, crash: 2, start_process: 2,
                lapse: 3, beat: 4, sweep: 5, sweep_cut: 2, time_passes: 2, weight: 4, limit: 3, refused: 3,
                toggle_fair: 1, garbage: 1, resent: 3, audit: 2, graceful_stop: 2, lease_time_passes: 2 }.freeze
    KINDS = WEIGHTS.flat_map { |kind, weight| [kind] * weight }.freeze
    HISTORY = (ENV["CONSERVATION_HISTORY"] || 20).to_i
    # Pushes wait while this many jobs are open, so a long run's Redis (read after every step) stays small.
    MAX_OPEN = 150
    RATE_WINDOW = 1.05 # seconds: ConservedRatedJob's windows (per: 1), and a little more

    attr_reader :seed, :steps, :violations, :notes, :history

    def initialize(seed:, steps:)
      @seed = seed
      @steps = steps
      @rng = Random.new(seed)
      @jobs = {}
      @processes = []
      @started = 0
      @history = []
      @violations = {}
      @notes = Hash.new(0)
      @checked_payloads = Set.new
      @step = 0
      @found = []
      @open = Set.new
    end

    def call
      srand(@seed) # Sidekiq's weighted queue order shuffles with Kernel's generator
      @without = without
      timers_off
      # a heartbeat thread of this Ruby process would renew on the wall clock
      Sidekiq::FairTenant::Concurrency::Slots.stop
      configure_fair(FAIR_QUEUES)
      2.times { record(:start_process) }
      kinds = KINDS - @without
      @steps.times { record(kinds.sample(random: rng)) }
      settle
      self
    ensure
      min_replicas_to_write(0)
      configure_fair([])
      @processes.each do |process|
        Sidekiq::FairTenant::FairFetch::Acks.instance_variable_get(:@fetchers).delete(process.fetcher)
      end
    end

    def report
      lines = ["conservation run: seed #{seed}, #{@step} steps, #{@jobs.size} jobs; " \
               "replay: CONSERVATION_SEED=#{seed} CONSERVATION_STEPS=#{steps}"]
      lines << "notes: #{@notes.sort.map { |k, v| "#{k}=#{v}" }.join(" ")}"
      @violations.each do |kind, found|
        lines << "#{kind}: #{found[:count]}x, first at step #{found[:step]}: #{found[:message]}"
        lines << "  the steps before it:"
        lines.concat(found[:history].map { |line| "    #{line}" })
      end
      lines.join("\n")
    end

    private

    attr_reader :rng

    # Step kinds left out of the run (CONSERVATION_WITHOUT=garbage,lapse; "bytes": the tenant whose name is
    # not UTF-8; "plain_slots": plain-queue jobs run without the server middleware, so hold no slot): to tell
    # apart what a failing seed found.
    def without
      ENV.fetch("CONSERVATION_WITHOUT", "").split(",").map { |kind| kind.strip.to_sym }
    end

    # Recovery sweeps and idle looks happen when the steps say, not on the wall clock.
    def timers_off
      Sidekiq::FairTenant::FairQueues::Recovery::PACE.never!
      Sidekiq::FairTenant::FairFetch::IdleLook::PACE.never!
    end

    def record(kind, *args, **options)
      @step += 1
      @swept = nil
      @recovering = []
      line = begin
        send(kind, *args, **options)
      rescue StandardError => e
        unless @refusing
          violation(:step_raised,
                    "#{kind}: #{e.class}: #{e.message[0, 200]} at #{e.backtrace.first(3).join(" < ")}")
        end
        "#{kind} raised #{e.class}: #{e.message[0, 100]}"
      end
      @history << "#{@step}. #{line}"
      @history.shift while @history.size > HISTORY
      view = check
      @found.each { |found, message| note_violation(found, message) }
      @found.clear
      view
    end

    # Violations found during a step are kept with the steps up to and including it.
    def violation(kind, message)
      @found << [kind, message]
    end

    def note_violation(kind, message)
      found = @violations[kind] ||= { count: 0, step: @step, message: message, history: @history.dup }
      found[:count] += 1
    end

    # The acknowledgement of a job recovered while its process stalled. That process's call took the copy back
    # first if it still waited, and dropped it with the original entry: the job is then nowhere and done. A copy
    # another process took runs there too (at least once).
    def stale_acknowledged(held)
      places = sidekiq_redis { |conn| RedisView.new(conn, FAIR_QUEUES) }.places.fetch(held.id, [])
      job = @jobs[held.id]
      was_waiting = @last_view&.places&.fetch(held.id, [])&.any? { |kind, _| kind == :tenant }
      if places.empty? && was_waiting && !job.done
        job.done = true unless job.garbage
        @notes[:acked_after_reclaim] += 1
      else
        @notes[:ran_twice_after_lapse] += 1
      end
    end

    # Acknowledgements the process had when a fetch or flush of it succeeded were sent with it. One that
    # raised may have sent them or not; those it did not send are sent by the next one that succeeds.
    def confirm_acks(process, pending, failed: nil)
      return if pending.empty?

      list = sidekiq_redis { |conn| conn.call("HKEYS", process.fetcher.inflight_key) }.map(&:b).tally
      pending.each do |held|
        next if failed && !held.stale && list.fetch(held.entry, 0).positive?
        next if failed && held.stale # the call that takes its copy back may not have run

        process.pending.delete_if { |other| other.equal?(held) }
        next stale_acknowledged(held) if held.stale

        if list.fetch(held.entry, 0).positive?
          violation(:ack_not_applied, "#{process.identity}: the ack of #{held.id} was pending when a fetch or " \
                                      "flush succeeded, and its entry is still in flight")
          process.leaked << held.entry
        else
          @notes[:acks_applied] += 1
          @jobs[held.id].done = true unless @jobs[held.id].garbage
        end
      end
    end

    # Everything healed (writes, weights, limits, fair on, heartbeats), crashed processes' jobs recovered,
    # then every job served and finished by a process fetching every queue.
    def settle
      heal
      final = @processes.last
      recover_crashed(final)
      @processes.dup.each do |process|
        record(:finish, process) until process.units.empty?
        next unless @processes.include?(process) # a stopping one exited with its last job

        record(:flush, process)
        record(:audit, process) # what a lost fetch reply left in its list goes back
      end
      idle = 0
      while idle < 3 && @step < (@steps * 4) + 1000
        record(:fetch, final, idle: false)
        if final.units.empty?
          idle += 1
          record(:lease_time_passes) # a crashed process's plain slots come back, to jobs parked for them
          sleep(RATE_WINDOW) if @jobs.each_value.any? { |job| job.klass == "ConservedRatedJob" } # windows pass
        else
          idle = 0
          record(:finish, final)
        end
      end
      record(:flush, final)
      check_settled
    end

    # Sweeps until no crashed process has jobs in flight: a sweep suspects a process whose key is gone, and
    # recovers it once Recovery::LAPSE seconds have passed (time_passes).
    def recover_crashed(sweeper)
      3.times do
        view = record(:sweep, sweeper)
        orphans = view.inflight.any? do |identity, entries|
          !entries.empty? && !live?(identity) && view.registry.include?(identity) # others are never recovered
        end
        break unless orphans

        record(:time_passes)
      end
    end

    def heal
      min_replicas_to_write(0)
      configure_fair(FAIR_QUEUES)
      weights = Sidekiq::FairTenant.weights
      WEIGHTED_TENANTS.product([nil, *FAIR_QUEUES]).each do |tenant, queue|
        weights.delete(tenant: tenant, queue: queue)
      end
      CAPPED_TENANTS.each { |tenant| Sidekiq::FairTenant.limits.delete(tenant: tenant, queue: "fair") }
      Sidekiq::FairTenant.limits.delete(key: SHARED_KEY)
      @processes.each { |process| beat(process) }
      @history << "settle: writes, weights, limits, fair-on and heartbeats healed"
      record(:start_process, [%w[fair fair2 plain], true])
    end

    # At the end every job finished, is dead, went with a crashed process's memory (plain), or waits for the
    # recovery of a crashed process (its heartbeat gone, its identity registered).
    def check_settled
      view = check
      dump_state if ENV["CONSERVATION_DUMP"]
      stranded(view)
      @found.each { |kind, message| note_violation(kind, message) } # (after the loop: its findings too)
      @found.clear
    end

    # CONSERVATION_DUMP=1: every key but Sidekiq's own (the first items of lists, to stderr) at the end, to read
    # what holds a stranded job.
    def dump_state
      sidekiq_redis do |conn|
        conn.call("KEYS", "*").sort.each do |key|
          next if key.match?(/\A(processes|queues|dead|stat)/)

          warn "#{key.inspect} #{conn.call("TYPE", key)}: #{read_key(conn, key).inspect[0, 400]}"
        end
        warn "TIME #{conn.call("TIME").inspect}"
      end
    end

    def read_key(conn, key)
      case conn.call("TYPE", key)
      when "zset" then conn.call("ZRANGE", key, 0, -1, "WITHSCORES")
      when "hash" then conn.call("HGETALL", key)
      when "set" then conn.call("SMEMBERS", key)
      when "list" then conn.call("LRANGE", key, 0, 3)
      when "string" then conn.call("GET", key)
      end
    end

    def stranded(view)
      @jobs.each_value do |job|
        next if job.done || job.lost_ok || !job.pushed

        places = view.places.fetch(job.id, [])
        next if places.any? { |kind, _| kind == :dead }
        next if places.any? { |kind, where| kind == :inflight && !live?(where) && view.registry.include?(where) }

        violation(:stranded, "#{job.id} (#{job.klass} #{job.queue} #{job.args.inspect}) never ran to its end: " \
                             "#{describe(places)}")
      end
    end

    def random_process(&filter)
      candidates = filter ? @processes.reject { |process| filter.call(process).empty? } : @processes
      candidates.empty? ? nil : candidates.sample(random: rng)
    end

    def live?(identity)
      @processes.any? { |process| process.identity.b == identity.b }
    end

    def beating?(identity)
      @processes.any? { |process| process.identity.b == identity.b && process.beating }
    end

    def sidekiq_redis(&block)
      Sidekiq.redis(&block)
    end
  end
end
# rubocop:enable Metrics/ClassLength, Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity
