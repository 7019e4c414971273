# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # An idle thread's wait when a rate-capped tenant waits in one of its fair queues: the fetch script says
      # in how many ms the first may start, and the thread's BRPOP ends then (nobody pushes a wake-up token at
      # that instant), then it fetches at once. Without one, the wait is TIMEOUT, as before.
      module RateWait
        KEY = :sidekiq_fair_tenant_rate_due

        private

        # Nothing served, and a rate-capped tenant may start in `millis`.
        def rate_due!(millis)
          Thread.current[KEY] = millis
          nil
        end

        def take_due
          due = Thread.current[KEY]
          Thread.current[KEY] = nil
          due
        end

        def timed_out(conn, names, due)
          idle!(!due)
          due && fetch(conn, names, woken: false)
        end

        def blocking_pop(conn, keys, timeout)
          if conn.respond_to?(:blocking_call)
            conn.blocking_call(FairFetch::TIMEOUT, "BRPOP", *keys, timeout)
          else
            conn.brpop(*keys, timeout: timeout)
          end
        end
      end
    end
  end
end
