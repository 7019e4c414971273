# frozen_string_literal: true

require "securerandom"
require_relative "loader"

module Sidekiq
  module FairTenant
    # Fair queues: queues whose jobs are served in weighted fair order per tenant (FairQueues::Fetch on servers,
    # FairQueues::Push on clients). The rule, its scripts and its keys are in the extension (Native::Fair); the scripts
    # run (ScriptRunner) on Sidekiq's own connections, so a job stays in the shard its client chose.
    module FairQueues
      Loader.register(self)

      NAMES = Native::Names
      WEIGHTS_KEY = Native::Fair.weights_key.freeze
      PUSH_BATCH = NAMES::PUSH_BATCH
      SHARED_TENANT = Native::Fair::SHARED_TENANT
      LIBRARY = ScriptRunner::LIBRARY
      MILLISECONDS = Gem::Version.new(::Sidekiq::VERSION) >= Gem::Version.new("8") # enqueued_at's unit

      module_function

      # Seconds within which an in-flight job that no thread of its live process runs goes back (see `why`). The
      # fetch's audit tells it (`Fetch::Audit.within`) when it loads, so that the API here names no part of the fetch.
      def back_within = @back_within&.call

      def back_within_from(&block)
        @back_within = block
      end

      def names
        FairTenant.config.fair_queues
      end

      def fair?(queue)
        !names.empty? && names.include?(queue.to_s)
      end

      def any? = !names.empty?

      # Whether the queue shares its workers by worker time (`imports:time`).
      def time?(queue)
        FairTenant.config.fair_time_queues.include?(queue.to_s)
      end

      BASES = Hash.new { |bases, queue| bases[queue] = Native::Fair.base(queue).freeze }

      # A queue's key prefix; kept per queue name (asked on every push and every fetch).
      def base(queue)
        BASES[queue.to_s]
      end

      # One of a queue's keys: `suffix` is one of Native::Names' (HEADS, SIG, ...).
      def key(queue, suffix)
        "#{base(queue)}#{suffix}"
      end

      # The tenant of a payload, found as for re-routing; a job with none belongs to the shared tenant.
      def tenant(payload, view = JobView.new(payload["class"], payload))
        view.tenant || SHARED_TENANT
      rescue StandardError
        SHARED_TENANT
      end

      # Pushes JSON jobs (with their tenants) to a fair queue in one round trip (PushCalls: one script call per
      # PUSH_BATCH jobs or CALL_BYTES of them, sent together). `enqueued_at` (s), or PushCalls::NO_TIME: each job's
      # own, read from its head. Returns the jobs now waiting.
      def push(conn, queue, tenants_and_jobs, enqueued_at = PushCalls::NO_TIME)
        PushCalls.send_all(conn, PushCalls.build(queue, tenants_and_jobs, enqueued_at))
      end

      # Jobs waiting in a queue's fair backlog (0 for a queue that never was fair).
      def backlog(conn, queue)
        conn.call("HGET", key(queue, NAMES::STATE), NAMES::STATE_N).to_i
      end

      # Switching fair fetch off for a queue: moves its whole fair backlog back to `queue:<name>` in fair
      # order, paused tenants' jobs last, `batch` jobs (or CALL_BYTES of them) per round trip. Returns the
      # number of jobs moved.
      def drain(conn, queue, batch: NAMES::DRAIN_BATCH)
        total = 0
        loop do
          moved, more = ScriptRunner.run(conn, "drain", ["queue:#{queue}", WEIGHTS_KEY],
                                         [base(queue), queue.to_s, batch])
          total += moved.to_i
          return total if more.to_i.zero?
        end
      end

      # Deletes a queue's fair backlog, `batch` tenants per round trip; returns the number of jobs deleted. The
      # first call records the clear (FAIR_CLEARING_KEY, with its cut: Redis's time; by an id, so the call sent
      # again after a lost reply keeps the cut), the last one removes the record: a clear cut short between its
      # calls is finished by a recovery sweep (Clears.finish).
      def clear(conn, queue, batch: NAMES::CLEAR_BATCH)
        total = 0
        first = ["begin", SecureRandom.hex(8)]
        (0..).each do |call|
          deleted, more = ScriptRunner.run(conn, "clear", [],
                                           [base(queue), queue.to_s, batch, *(call.zero? ? first : ["next"])])
          total += deleted.to_i
          return total if more.to_i.zero?
        end
      end

      # Moves the oldest jobs of a fair queue's `queue:<name>` list into fair order (their tenants found as
      # for re-routing): jobs pushed by a client without the gem, a raw LPUSH, a slot hand-over, or the
      # backlog from before fair fetch. If another process does the same at once the script refuses (-1)
      # and the next fetch tries again. A job with `fair_tenant_concurrency` is stored with its slot
      # (carry_slot), a job whose `enqueued_at` the scripts could not read with the time of its adoption
      # (JobBytes.fix_time); a payload that is not a job (not a JSON object) goes to the dead set, as Sidekiq's
      # processor sends one it cannot parse.
      def adopt(conn, queue, batch)
        jobs = JobBytes.oldest(conn, "queue:#{queue}", batch)
        return 0 if jobs.empty?

        killed = []
        triples = jobs.map { |job| adoption(queue, job, killed) }
        moved = ScriptRunner.run(conn, "adopt", ["queue:#{queue}", WEIGHTS_KEY, "dead"],
                                 [base(queue), queue, Time.now.to_f.to_s, *triples.flatten])
        Dead.written(killed, queue_of: queue) if moved.to_i.positive?
        moved
      end

      # [tenant, job as read, job as stored ("": to the dead set)].
      def adoption(queue, job, killed)
        payload = Dead.job(job)
        unless payload
          killed << [nil, job, NotAJob.new("not a job (a JSON object) in queue #{queue}")]
          return [SHARED_TENANT, job, ""]
        end
        stored = begin
          changed = JobBytes.fix_time(payload, now) | carry_slot(payload)
          changed ? ::Sidekiq.dump_json(JobBytes.head_first(payload)) : job
        rescue StandardError # bytes that are not UTF-8, a value JSON cannot write: stored as read (the script copes)
          job
        end
        [tenant(payload), job, stored]
      end

      # Writes into a job for a fair queue the concurrency slot its fetch takes (Concurrency::SlotScope.descriptors) and
      # the rate cap it is held to (Rates::Scope.descriptors), or drops stale ones: the first scope of each in its
      # field, the others in its MORE_FIELD. True when the payload changed.
      def carry_slot(payload, view = nil)
        [Concurrency::SlotScope, Rates::Scope].map do |scope|
          carry_scopes(payload, scope, scope.descriptors(payload, view))
        end.any?
      end

      def carry_scopes(payload, scope, all)
        first, *more = all
        more = nil if more.empty?
        JobBytes.carry(payload, scope::FIELD, first) | JobBytes.carry(payload, scope::MORE_FIELD, more)
      end

      # Sidekiq's `sidekiq/testing` (fake or inline) handles pushes itself.
      def testing?
        defined?(::Sidekiq::Testing) && !::Sidekiq::Testing.disabled?
      end

      # `enqueued_at` as the running Sidekiq writes it (8.0+: epoch milliseconds).
      def now
        # Time.now.to_f's value without making a Time.
        ::Process.clock_gettime(::Process::CLOCK_REALTIME, MILLISECONDS ? :millisecond : :float_second)
      end
    end
  end
end
