# frozen_string_literal: true

require "securerandom"

module Sidekiq
  module FairTenant
    module Concurrency
      # Server middleware enforcing `fair_tenant_concurrency`: at most `limit` jobs of a scope (a
      # tenant's jobs from one original queue, or the class's `key:` method's value) run at once.
      #
      #   class WebhookJob
      #     include Sidekiq::Job
      #     sidekiq_options fair_tenant_concurrency: { limit: 2, lease: 60, key: :webhook_key }
      #     def self.webhook_key(customer_id, *) = "customer-#{customer_id}"
      #   end
      #
      # Acquire and release are script calls on Sidekiq's own connection (SlotCalls): one per job where a
      # thread runs one job after another, the acquire carrying the release of the thread's previous job
      # (Releases: only a slot taken with room waits for it, for at most Releases::WAIT). A
      # job that finds no free slot is parked in Redis in the same atomic step and the middleware returns without
      # running it; a freed slot is handed to the oldest parked job, which goes back to the front of its queue holding
      # it. Redis trouble at acquire time: the acquire is sent again until Redis answers, for up to PATIENCE; then the
      # job runs anyway (one warning), and what a call whose reply was lost may have taken (a slot, a parked copy) is
      # given back once Redis answers. Release never raises. A slot belongs to one run of its job (a token per call
      # here): a release by one run never frees another's.
      #
      # On a fair queue the fetcher took the slot with the job (HeldSlot): the job runs, its lease is
      # renewed while it runs, and the slot is given back with its acknowledgement (no call here).
      class ServerMiddleware
        include ::Sidekiq::ServerMiddleware if defined?(::Sidekiq::ServerMiddleware)

        # `run`: this run's token (nil for a slot a fair queue's fetch took).
        Slot = Struct.new(:tag, :sub, :jid, :lease_ms, :limit, :run)
        PATIENCE = Native::Names::ACQUIRE_PATIENCE_MS / 1000.0
        PAUSE = Native::Names::ACQUIRE_PAUSE_MS / 1000.0

        class << self
          # True once an acquire found no answer for PATIENCE (Redis down): later jobs fail open at once, without
          # waiting, until an acquire is answered.
          attr_accessor :unanswered
        end

        def call(worker, job, _queue, &block)
          raw = job["fair_tenant_concurrency"]
          return yield if raw.nil?
          return held(fair_slots(job), &block) if HeldSlot.held?(job)

          slot = slot_for(worker, job)
          return yield unless slot

          payload = Sidekiq.dump_json(job)
          outcome, deferrable = acquire(slot, payload, job)
          case outcome
          when :parked then parked(slot, job)
          when :dropped then nil # a copy of a job that ran already (its run was given up after a lost reply)
          when :failed then unslotted(slot, payload, job, &block)
          else run(slot, deferrable: deferrable, &block)
          end
        end

        private

        # `deferrable`: the release may wait for the thread's next acquire (Releases).
        def run(slot, deferrable: false)
          each_slot(slot) { |one| Slots.running(one) }
          yield
        ensure
          each_slot(slot) { |one| Slots.finished(one) }
          Releases.finished(slot, deferrable)
        end

        # Each Slot of `slot` (a Slot, or a SlotCalls::Several): the heartbeat renews each scope's lease.
        def each_slot(slot, &block)
          slot.is_a?(SlotCalls::Several) ? slot.slots.each(&block) : yield(slot)
        end

        # A job whose slots a fair queue's fetch took: their leases are renewed while it runs; the fetcher gives
        # them back with its acknowledgement.
        def held(slots)
          slots.each { |slot| Slots.running(slot) }
          yield
        ensure
          slots.each { |slot| Slots.finished(slot) }
        end

        # Every slot the job carries (its first scope, then the others), as the fetch took them.
        def fair_slots(job)
          more = job[SlotScope::MORE_FIELD]
          [job[SlotScope::FIELD], *(more.is_a?(Array) ? more : [])].filter_map do |scope|
            next unless scope.is_a?(Array) && scope[0].is_a?(String) && scope[1].is_a?(String)

            tag, sub, limit, lease_ms, = scope
            Slot.new(tag, sub, job["jid"].to_s, lease_ms.to_i, limit.to_i)
          end
        end

        # The job's Slot, or a SlotCalls::Several of one Slot per scope (one run token for all), or nil (no scope).
        def slot_for(worker, job)
          run = SecureRandom.hex(8)
          slots = SlotScope.resolve_all(worker.class, job).map do |options, tag, sub|
            Slot.new(tag, sub, job["jid"].to_s, options.lease_ms, options.limit, run)
          end
          slots.size > 1 ? SlotCalls::Several.new(slots) : slots.first
        rescue StandardError => e
          class_name = JobInfo.class_name(worker.class, job)
          FairTenant.warn(:slot_scope, class_name) { "#{e.class}: #{e.message}; job #{job["jid"]} runs without a slot" }
          nil
        end

        # [outcome, deferrable]. The call carries the release the thread's previous job left (Releases.carried).
        # Anything that lands here but Redis trouble - Thread#raise, Timeout, Sidekiq::Shutdown - may arrive after
        # the script took the slot: it is given back (release is idempotent) and the exception goes on. A carried
        # release whose call got no answer is sent again alone.
        def acquire(slot, payload, job)
          carried = Releases.carried unless slot.is_a?(SlotCalls::Several) # (whose release is never deferred)
          outcome, deferrable, handed = take(slot, payload, job, carried)
          if handed # answered: the carried release was done
            Releases.instrument(carried, handed) if carried
            carried = nil
          end
          [outcome, deferrable]
        rescue Exception # rubocop:disable Lint/RescueException
          Releases.now(slot)
          raise
        ensure
          Releases.now(carried) if carried
        end

        # [outcome, deferrable, handed]. Redis trouble (SlotCalls::REDIS_ERRORS): the call is sent again (the same
        # run and release: idempotent) every PAUSE for up to PATIENCE, and its answer followed; only then does the
        # job run without a slot ([:failed, false, nil]).
        def take(slot, payload, job, carried)
          give_up = Interval.now + (ServerMiddleware.unanswered ? 0 : PATIENCE)
          begin
            SlotCalls.take(slot, payload, job["enqueued_at"].to_f, carried).tap { ServerMiddleware.unanswered = false }
          rescue *SlotCalls::REDIS_ERRORS => e
            retry if Interval.now < give_up && sleep(PAUSE)
            ServerMiddleware.unanswered = true # an outage: the next jobs run without a slot at once, until one answers
            FairTenant.warn(:acquire, e.class) { "#{e.class}: #{e.message}; job #{slot.jid} runs without a slot" }
            [:failed, false, nil]
          end
        end

        # Runs without its slot (fail-open). The acquire may have reached Redis all the same (or come later) and
        # taken a slot or parked a copy: given back at once when Redis answers now, else by the heartbeat, so the
        # copy never runs the job again.
        def unslotted(slot, payload, job)
          queue = job["queue"].to_s
          begin
            SlotCalls.forget(slot, payload, queue)
          rescue *SlotCalls::REDIS_ERRORS
            Slots.forget(slot, payload, queue)
          end
          yield
        end

        def parked(slot, job)
          Instrumentation.instrument(:park, job_class: job["wrapped"] || job["class"], tenant: job["fair_tenant"],
                                            jid: slot.jid, queue: job["queue"], scope: [slot.tag, slot.sub])
          nil
        end
      end
    end
  end
end
