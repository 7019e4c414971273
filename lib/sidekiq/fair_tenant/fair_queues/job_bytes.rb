# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # A fair queue's job as bytes: as Push writes it, and as it comes back inside an in-flight entry.
      module JobBytes
        # Most bytes of jobs one script call carries past its first (a larger job goes alone).
        CALL_BYTES = Native::Names::CALL_BYTES

        module_function

        # The oldest jobs of the list `key` (oldest first, as LPUSH leaves them at its tail): at most `count`, and
        # at most CALL_BYTES past the first (the oldest read alone, then as many more as fit at its size, cut
        # at CALL_BYTES should they be larger).
        def oldest(conn, key, count)
          first = conn.call("LRANGE", key, -1, -1)
          return first if first.empty? || count <= 1

          more = [count - 1, (CALL_BYTES - first[0].bytesize) / [first[0].bytesize, 1].max].min
          rest = more.positive? ? conn.call("LRANGE", key, -1 - more, -2).reverse : []
          slices(first + rest, count, &:bytesize).first
        end

        # `items` in order, in slices of at most `count` and at most CALL_BYTES past each slice's first item
        # (the block gives an item's bytes); one empty slice for none.
        def slices(items, count)
          slices = [[]]
          bytes = 0
          items.each do |item|
            if !slices.last.empty? && (slices.last.size >= count || bytes >= CALL_BYTES)
              slices << []
              bytes = 0
            end
            slices.last << item
            bytes += yield(item)
          end
          slices
        end

        # `enqueued_at`, `jid`, the slot (its first scope, then the others) and the rate cap (the same) first, the
        # rest in their order, so the scripts read them from the job's first bytes, never decoding the job
        # (lua/fair/common.lua, lua/fair/serve.lua).
        def head_first(payload)
          head = { "enqueued_at" => payload["enqueued_at"], "jid" => payload["jid"] }
          [Concurrency::SlotScope, Rates::Scope].each do |scope|
            [scope::FIELD, scope::MORE_FIELD].each { |field| head[field] = payload[field] if payload.key?(field) }
          end
          head.merge!(payload)
        end

        # The greatest `enqueued_at` the scripts read (epoch ms, year 5138; lua/fair/common.lua's job_time).
        MAX_TIME = 1e14

        # Sets `enqueued_at` to `now` when the scripts could not read it (absent, not a number, NaN, Infinity,
        # below 0, past MAX_TIME), as Push sets it on every push; true when the payload changed.
        def fix_time(payload, now)
          time = payload["enqueued_at"]
          return false if time.is_a?(Numeric) && time.to_f.finite? && time.between?(0, MAX_TIME)

          payload["enqueued_at"] = now
          true
        end

        # Sets (or, nil, deletes) a field the scripts read; true when the payload changed.
        def carry(payload, field, value)
          return false if payload[field] == value

          value ? payload[field] = value : payload.delete(field)
          true
        end
      end
    end
  end
end
