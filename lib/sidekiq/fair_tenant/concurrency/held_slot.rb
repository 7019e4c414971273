# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module Concurrency
      # Which job's concurrency slot a fair queue's fetch took with it, per thread: the fetcher says so, and the
      # server middleware, which Sidekiq runs in the thread that fetched the job right after the fetch, then only
      # renews the slot's lease (the job's acknowledgement gives the slot back).
      module HeldSlot
        KEY = :sidekiq_fair_tenant_held

        module_function

        # The jid of the job this thread just fetched, when the fetch took its slot ("" or nil: none).
        def held!(jid)
          Thread.current[KEY] = jid.nil? || jid.empty? ? nil : jid
        end

        # True once, in the thread that fetched it, for a job whose slot the fetch took.
        def held?(job)
          held = Thread.current[KEY] or return false
          Thread.current[KEY] = nil
          held == job["jid"]
        end
      end
    end
  end
end
