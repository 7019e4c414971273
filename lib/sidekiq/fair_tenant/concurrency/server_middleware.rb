# frozen_string_literal: true

require "securerandom"

module Sidekiq
  module FairTenant
    # Server middleware enforcing `fair_tenant_concurrency`: at most `limit` jobs of a scope (a
    # tenant's jobs from one original queue, or the class's `key:` method's value) run at once.
    #
    #   class WebhookJob
    #     include Sidekiq::Job
    #     sidekiq_options fair_tenant_concurrency: { limit: 2, lease: 60, key: :webhook_key }
    #     def self.webhook_key(customer_id, *) = "customer-#{customer_id}"
    #   end
    #
    # Acquire and release are one script call each, on Sidekiq's own connection (SlotCalls). A job that
    # finds no free slot is parked in Redis in the same atomic step and the middleware returns without
    # running it; a freed slot is handed to the oldest parked job, which goes back to the front of its
    # queue holding it.
    # Redis trouble at acquire time: the acquire is sent again until Redis answers, for up to PATIENCE; then the
    # job runs anyway (one warning), and what a call whose reply was lost may have taken (a slot, a parked copy)
    # is given back once Redis answers. Release never raises.
    # A slot belongs to one run of its job (a token per call here): a release by one run never frees another's.
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
        return run(fair_slot(job), give_back: false, &block) if HeldSlot.held?(job)

        slot = slot_for(worker, job)
        return yield unless slot

        payload = Sidekiq.dump_json(job)
        case acquire(slot, payload, job)
        when :parked then parked(slot, job)
        when :dropped then nil # a copy of a job that ran already (its run was given up after a lost reply)
        when :failed then unslotted(slot, payload, job, &block)
        else run(slot, &block)
        end
      end

      private

      # `give_back: false`: the fair fetcher gives the slot back with the job's acknowledgement.
      def run(slot, give_back: true)
        Slots.running(slot)
        yield
      ensure
        Slots.finished(slot)
        release(slot) if give_back
      end

      def fair_slot(job)
        tag, sub, limit, lease_ms, = job[SlotScope::FIELD]
        Slot.new(tag, sub, job["jid"].to_s, lease_ms.to_i, limit.to_i)
      end

      def slot_for(worker, job)
        options, tag, sub = SlotScope.resolve(worker.class, job)
        tag && Slot.new(tag, sub, job["jid"].to_s, options.lease_ms, options.limit, SecureRandom.hex(8))
      rescue StandardError => e
        class_name = JobInfo.class_name(worker.class, job)
        FairTenant.warn(:slot_scope, class_name) { "#{e.class}: #{e.message}; job #{job["jid"]} runs without a slot" }
        nil
      end

      # Redis trouble (SlotCalls::REDIS_ERRORS): the acquire is sent again (the same run: idempotent) every
      # PAUSE for up to PATIENCE, and its answer followed; only then does the job run without a slot. Anything
      # else that lands here - Thread#raise, Timeout, Sidekiq::Shutdown - may arrive after the script took the
      # slot: it is given back (release is idempotent) and the exception goes on.
      def acquire(slot, payload, job)
        give_up = Interval.now + (ServerMiddleware.unanswered ? 0 : PATIENCE)
        begin
          SlotCalls.acquire(slot, payload, job["enqueued_at"].to_f).tap { ServerMiddleware.unanswered = false }
        rescue *SlotCalls::REDIS_ERRORS => e
          retry if Interval.now < give_up && sleep(PAUSE)
          ServerMiddleware.unanswered = true # an outage: the next jobs run without a slot at once, until one answers
          FairTenant.warn(:acquire, e.class) { "#{e.class}: #{e.message}; job #{slot.jid} runs without a slot" }
          :failed
        end
      rescue Exception # rubocop:disable Lint/RescueException
        release(slot)
        raise
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

      def release(slot)
        handed = SlotCalls.release(slot)
        Instrumentation.instrument(:hand_over, scope: [slot.tag, slot.sub], count: handed) if handed.positive?
      rescue StandardError => e
        FairTenant.warn(:release, e.class) do
          "#{e.class}: #{e.message}; slot of #{slot.jid} frees when its lease expires"
        end
      end
    end
  end
end
