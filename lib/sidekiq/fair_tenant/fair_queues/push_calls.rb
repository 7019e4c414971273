# frozen_string_literal: true

require "securerandom"

module Sidekiq
  module FairTenant
    module FairQueues
      # The calls of the fair push script (lua/fair/push.lua) that push jobs to a fair queue: one per PUSH_BATCH jobs
      # or CALL_BYTES of them (a push, or a bulk push of up to PUSH_BATCH small jobs, is one), so no call blocks Redis
      # for long, all sent together in one round trip (a pipeline). As Sidekiq's own push_bulk (a round trip per
      # 1,000), a bulk push is atomic per call, not as a whole. The calls of a bulk push carry ids, drawn once: the
      # same calls sent again (a lost reply, the pipeline sent again after a failover) push each job once.
      #
      #   calls = PushCalls.build("default", [[tenant, json], ...])
      #   PushCalls.send_all(conn, calls) # => jobs now waiting in the queue's fair backlog
      module PushCalls
        KEYS = ["queues", FairQueues::WEIGHTS_KEY].freeze
        NO_TIME = "" # each job's own enqueue time, read from its head when its tenant is activated
        NO_ID = ""

        module_function

        # The script's arguments of each call.
        def build(queue, pairs, enqueued_at = NO_TIME)
          if pairs.size == 1 # the most common: no slicing, no id (sent again, it runs again, as Sidekiq's LPUSH)
            tenant, job = pairs[0]
            # The script's short form (each argument sent costs the client its encoding): queue, tenant, job.
            return [[queue.to_s, tenant, job]] if enqueued_at == NO_TIME

            return [[FairQueues.base(queue), queue.to_s, enqueued_at, NO_ID, tenant, job]]
          end

          base = FairQueues.base(queue)
          id = SecureRandom.hex(8)
          JobBytes.slices(pairs, FairQueues::PUSH_BATCH) { |pair| pair[0].to_s.bytesize + pair[1].bytesize }
                  .each_with_index.map do |slice, index|
            [base, queue.to_s, enqueued_at, "#{id}.#{index}"].concat(*slice)
          end
        end

        # Sends the calls in one round trip; returns the last one's reply.
        def send_all(conn, calls)
          return ScriptRunner.run(conn, "push", KEYS, calls[0]) if calls.size == 1

          ScriptRunner.run_all(conn, "push", KEYS, calls).last
        end
      end
    end
  end
end
