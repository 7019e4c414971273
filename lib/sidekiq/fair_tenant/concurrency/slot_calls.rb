# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # A job's slot taken and given back on Sidekiq's own connection (in a worker thread, its capsule's): the
    # slot keys live in Sidekiq's Redis, where a fair queue's fetch and acknowledgement take and give back slots
    # too, so one client writes them. Scripts, keys, arguments and the reply's meaning come from the extension
    # (Native::Slots); this sends them.
    module SlotCalls
      SCRIPTS = %w[acquire release].to_h { |name| [name, Native::Slots.script(name).map(&:freeze).freeze] }.freeze
      # What Sidekiq's client raises when Redis is unreachable or refuses a call (redis-rb 4.8 on 6.x,
      # redis-client on 7.x/8.x), and the gem's own errors.
      REDIS_ERRORS = [Error, (::Redis::BaseError if defined?(::Redis::BaseError)),
                      (::RedisClient::Error if defined?(::RedisClient::Error))].compact.freeze

      module_function

      # :acquired, :held (run the job) or :parked.
      def acquire(slot, payload, enqueued_at)
        keys, argv = Native::Slots.acquire_call(slot.tag, slot.sub, slot.jid, slot.lease_ms, slot.limit, payload,
                                                enqueued_at)
        Native::Slots.acquired(Sidekiq.redis { |conn| run(conn, "acquire", keys, argv) })
      end

      # Frees the job's slot; returns how many parked jobs were handed a slot.
      def release(slot)
        keys, argv = Native::Slots.release_call(slot.tag, slot.sub, slot.jid, slot.lease_ms, slot.limit)
        Sidekiq.redis { |conn| run(conn, "release", keys, argv) }
      end

      def run(conn, name, keys, argv)
        ScriptRunner.run(conn, *SCRIPTS.fetch(name), keys, argv)
      end
    end
  end
end
