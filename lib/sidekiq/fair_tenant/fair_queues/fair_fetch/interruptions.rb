# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # How often a fair job's process died while running it: a count written into the job's bytes by each
      # recovery (no decoding, so bytes that are not UTF-8 stay as they were), gone with a new push (a retry,
      # by hand or by Sidekiq's poller). At MAX the job goes to the dead set instead.
      module Interruptions
        MAX = 3
        COUNT = "fair_tenant_interrupted"
        FIELD = /"#{COUNT}":\s*(\d+)/n

        module_function

        def count(job)
          job.b[FIELD, 1].to_i
        end

        def with_count(job, count)
          bytes = job.b
          field = %("#{COUNT}":#{count})
          return bytes.sub(FIELD, field) if bytes.match?(FIELD)
          return bytes.sub(/\{\s*\}/, "{#{field}}") if bytes.match?(/\A\s*\{\s*\}/)

          # At the end: the first bytes stay as FairPush wrote them (JobBytes.head_first).
          return bytes.sub(/\}\s*\z/n, ",#{field}}") if bytes.match?(/\}\s*\z/n)

          bytes.sub("{", "{#{field},")
        end

        # The payload for the dead set, with the reason (`killed` is told, for Dead.written).
        def dead(payload, count, queue, job, killed)
          reason = "interrupted #{count} times (its process died while running it) in fair queue #{queue}"
          payload[COUNT] = count
          payload["error_class"] = Interrupted.name
          payload["error_message"] = reason
          payload["failed_at"] ||= Time.now.to_f
          killed << [payload, job, Interrupted.new(reason)]
          Dead.dump(payload) || with_count(job, count)
        end
      end
    end
  end
end
