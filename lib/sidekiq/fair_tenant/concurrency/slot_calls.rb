# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Concurrency
      # Concurrency slots taken, given back, renewed and swept on Sidekiq's own connection (in a worker thread, its
      # capsule's): the slot keys live in Sidekiq's Redis, where a fair queue's fetch and acknowledgement take and
      # give back slots too, so one client writes them. Scripts, keys, arguments and the reply's meaning come from
      # the extension (Native::Slots); ScriptRunner sends them.
      module SlotCalls
        TAGS_KEY = Native::Slots.tags_key.freeze # the tags with parked jobs, for the sweep
        # What Sidekiq's client raises when Redis is unreachable or refuses a call (redis-rb 4.8 on 6.x,
        # redis-client on 7.x/8.x), and the gem's own errors.
        REDIS_ERRORS = [Error, (::Redis::BaseError if defined?(::Redis::BaseError)),
                        (::RedisClient::Error if defined?(::RedisClient::Error))].compact.freeze

        # The slots of one run of a job of several scopes on a plain queue (`fair_tenant_concurrency: [...]`), one
        # Slot per scope, its first first, all of one run: taken all at once or none (acquire_all), freed together.
        Several = Struct.new(:slots) do
          def jid = slots.first.jid
          def tag = slots.first.tag
          def sub = slots.first.sub
          def run = slots.first.run

          # [[tag, sub, lease_ms, default limit], ...] as Native::Slots.acquire_all_call takes them.
          def scopes = slots.map { |slot| [slot.tag, slot.sub, slot.lease_ms, slot.limit] }
        end

        module_function

        # :acquired, :held (run the job), :parked or :dropped. Idempotent per run (slot.run): a re-sent call never
        # parks twice nor takes two slots.
        def acquire(slot, payload, enqueued_at)
          take(slot, payload, enqueued_at).first
        end

        # The acquire, carrying the release of the thread's previous run (`carried`, a Slot, or nil), done first in
        # the same call; idempotent as each half is. Returns [outcome (as #acquire), whether the run's release may
        # wait for the thread's next acquire (Releases), parked jobs the carried release handed a slot]. A Several's
        # acquire_all carries none, and its release is never deferred.
        def take(slot, payload, enqueued_at, carried = nil)
          return [acquire_all(slot, payload, enqueued_at), false, 0] if slot.is_a?(Several)

          acquire = [slot.tag, slot.sub, slot.jid, slot.run, slot.lease_ms, slot.limit, payload, enqueued_at]
          keys, argv = if carried
                         Native::Slots.acquire_carrying_call(
                           *acquire,
                           [carried.tag, carried.sub, carried.jid, carried.run, carried.lease_ms, carried.limit]
                         )
                       else
                         Native::Slots.acquire_call(*acquire)
                       end
          Native::Slots.acquired(Sidekiq.redis { |conn| ScriptRunner.run(conn, "acquire", keys, argv) })
        end

        # A run of a job of several scopes (Several): :acquired or :held (run the job, holding a slot in every
        # scope), :parked (on a scope that refused, holding none) or :dropped. Idempotent per run.
        def acquire_all(several, payload, enqueued_at)
          keys, argv = Native::Slots.acquire_all_call(several.scopes, several.jid, several.run, payload, enqueued_at)
          Native::Slots.acquired(Sidekiq.redis { |conn| ScriptRunner.run(conn, "acquire_all", keys, argv) }).first
        end

        # Frees the run's slot (every one of a Several); returns how many parked jobs were handed a slot.
        def release(slot)
          if slot.is_a?(Several)
            keys, argv = Native::Slots.release_all_call(slot.scopes, slot.jid, slot.run)
            return Sidekiq.redis { |conn| ScriptRunner.run(conn, "release_all", keys, argv) }.first
          end

          keys, argv = Native::Slots.release_call(slot.tag, slot.sub, slot.jid, slot.run, slot.lease_ms, slot.limit)
          Sidekiq.redis { |conn| ScriptRunner.run(conn, "release", keys, argv) }.first
        end

        # After an acquire whose reply was lost (the job ran without its slot): gives back what that call may have
        # taken, the run's slot or its parked copy (the payload it sent), handed over or not.
        def forget(slot, payload, queue)
          if slot.is_a?(Several)
            keys, argv = Native::Slots.forget_all_call(slot.scopes, [slot.jid, slot.run], payload, queue)
            return Sidekiq.redis { |conn| ScriptRunner.run(conn, "release_all", keys, argv) }.first
          end

          keys, argv = Native::Slots.forget_call(slot.tag, slot.sub, slot.jid, slot.run, slot.lease_ms, slot.limit,
                                                 payload, queue)
          Sidekiq.redis { |conn| ScriptRunner.run(conn, "release", keys, argv) }.first
        end

        # Extends the leases of jobs running here (ServerMiddleware::Slot); returns how many were renewed.
        def renew(slots)
          return 0 if slots.empty?

          keys, argv = Native::Slots.renew_call(slots.map { |s| [s.tag, s.sub, s.jid, s.run.to_s, s.lease_ms] })
          Sidekiq.redis { |conn| ScriptRunner.run(conn, "renew", keys, argv) }
        end

        # Reclaims expired leases and hands freed slots to parked jobs, for at most `max_tags` tags with parked
        # jobs picked at random. Returns [jobs handed a slot, expired leases reclaimed].
        def sweep(max_tags)
          Sidekiq.redis do |conn|
            conn.call("SRANDMEMBER", TAGS_KEY, max_tags).each_with_object([0, 0]) do |tag, swept|
              handed, reclaimed, = ScriptRunner.run(conn, "sweep", *Native::Slots.sweep_call(tag))
              swept[0] += handed
              swept[1] += reclaimed
            end
          end
        end
      end
    end
  end
end
