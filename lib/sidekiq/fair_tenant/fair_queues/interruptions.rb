# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # How often a fair job's process died while running it: a top-level field of the job, read from the
      # decoded payload's top level (never from its arguments, which may hold a field of the same name) and
      # written as the payload's last field by each recovery (a byte edit: no re-encoding, so bytes that are not
      # UTF-8 and the first bytes Push wrote stay as they were). Anchored at the end, the edit cannot touch
      # the arguments: a nested object's field would be followed by more than one closing bracket. Gone with a
      # new push (a retry, by hand or by Sidekiq's poller: Push drops it). At MAX the job goes to the dead set
      # instead.
      module Interruptions
        MAX = 3
        COUNT = "fair_tenant_interrupted"
        LAST = /("#{COUNT}"\s*:\s*)\d+(\s*\}\s*\z)/n

        module_function

        # The count of a decoded payload (its top level only); 0 when absent or not a count.
        def count(payload)
          value = payload[COUNT]
          value.is_a?(Integer) && value.positive? ? value : 0
        end

        def with_count(job, count)
          bytes = job.b
          field = %("#{COUNT}":#{count})
          return bytes.sub(LAST) { "#{Regexp.last_match(1)}#{count}#{Regexp.last_match(2)}" } if bytes.match?(LAST)
          return bytes.sub(/\}\s*\z/n, "#{field}}") if bytes.match?(/\A\s*\{\s*\}\s*\z/n)

          bytes.sub(/\}\s*\z/n, ",#{field}}")
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
