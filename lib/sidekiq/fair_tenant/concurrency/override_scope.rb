# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Concurrency
      # What runtime overrides (Limits, Rates) share: the scope an override names (tenant:, optionally with
      # queue:, or key:) as the extension's (tag, field) pair, and the stored overrides, read through their index.
      module OverrideScope
        private

        def target(tenant, queue, key)
          if JobInfo.blank?(tenant) == JobInfo.blank?(key)
            raise ArgumentError,
                  "give tenant: (optionally with queue:) or key:, got tenant: #{tenant.inspect}, key: #{key.inspect}"
          end
          raise ArgumentError, "queue: goes with tenant:, not key:" if key && queue

          tenant &&= JobInfo.stored_name(tenant)
          Native::Limits.limit_target(tenant, JobInfo.blank?(queue) ? nil : queue.to_s, key&.to_s)
        end

        # [[tag, field, value], ...] of every override: the index set lists the tags, the block names a tag's hash.
        def stored(conn, index_key)
          conn.call("SMEMBERS", index_key).flat_map do |tag|
            pairs(conn.call("HGETALL", yield(tag))).map { |field, value| [tag, field, value] }
          end
        end

        # HGETALL's reply: a flat Array (RESP2), or a Hash (RESP3).
        def pairs(reply)
          reply.is_a?(Hash) ? reply.to_a : reply.each_slice(2).to_a
        end
      end
    end
  end
end
