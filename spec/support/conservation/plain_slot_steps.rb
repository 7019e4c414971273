# frozen_string_literal: true

module Conservation
  # A job of a plain queue with `fair_tenant_concurrency` runs through the server middleware's plain path: it
  # acquires its slots (every scope at once for a job of several: acquire_all.lua) and runs, paused inside the job
  # until it ends (SlotSteps#job_returns); or it parks (on the scope that refused, holding none) and its unit ends
  # at once (:parked): the job waits in the scope's parked set until a freed slot hands it over to its queue.
  module PlainSlotSteps
    private

    # nil, or :parked (the unit is not running: the middleware returned without running the job).
    def plain_starts(process, held)
      job = plain_job(held) or return
      klass = Object.const_get(job["class"])
      all = Sidekiq::FairTenant::Concurrency::SlotScope.resolve_all(klass, job)
      scopes = all.map { |opts, tag, sub| [tag, sub, opts.limit] }
      handed = scopes.all? { |scope| leased(scope.first(2)).include?(held.id) }
      return :parked unless plain_run(process, held, klass, job)

      held.scopes = scopes
      held.scope = scopes.first.first(2)
      plain_started(process, held, job, handed)
    end

    # The job, when it is one with a slot (a payload that is not JSON is sent to the dead set by Sidekiq's
    # processor before any middleware: `finish`).
    def plain_job(held)
      job = Sidekiq.load_json(held.unit.job)
      job if job.is_a?(Hash) && job["fair_tenant_concurrency"]
    rescue JSON::ParserError
      nil
    end

    # True when the middleware ran the job (paused inside it), false when it returned without (parked, dropped).
    def plain_run(process, held, klass, job)
      started = false
      held.run = Fiber.new do
        Sidekiq::FairTenant::ServerMiddleware.new.call(klass.new, job, held.unit.queue_name) do
          started = true
          Fiber.yield
        end
      end
      SlotHeartbeats.as(process) { held.run.resume }
      started
    end

    # Checked when it starts: under every scope's limit. A job handed its slots while parked took them under the
    # limit of that moment, in hand_over (checked by the slot lockstep tests), not here, where a limit lowered since
    # would count against it.
    def plain_started(process, held, job, handed)
      if handed
        @notes[:plain_handed_started] += 1
      else
        held.scopes.each { |scope| check_cap(process, held, scope, Conservation.tenant_of(job["args"].first), []) }
        @notes[:plain_capped_started] += 1
      end
      nil
    end
  end
end
