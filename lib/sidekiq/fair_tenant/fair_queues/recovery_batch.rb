# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # What one recovery call takes of a dead process's in-flight hash: its newest jobs (the fields' ids, read
      # once with HKEYS, sorted), up to Recovery::ENTRIES of them and BYTES (past the first: a job larger than
      # that goes alone), read PAGE per HMGET, so no call (reads and script) carries much more than twice BYTES
      # however large the jobs (1 MB jobs included).
      module RecoveryBatch
        BYTES = Native::Names::RECOVER_BYTES
        PAGE = Native::Names::RECOVER_PAGE

        module_function

        # One call of the ack script for the recovery of `identity`'s in-flight hash `key` ("recover", or
        # "upgrade": a format-2 list made a hash first).
        def call(conn, identity, key, mode, args)
          ScriptRunner.run(conn, "ack", [key, FairQueues::WEIGHTS_KEY, Recovery::REGISTRY, Recovery::SUSPECTS, "dead",
                                         Native::Fair.recovered_key(identity), Recovery::RECOVERING],
                           [mode, identity, Time.now.to_f.to_s,
                            Recovery::KEEP, *args])
        end

        # The hash's fields, the newest (highest id) first; a field that is no field of this format last.
        def fields(conn, key)
          conn.call("HKEYS", key).sort_by { |field| -(Native::Fair.field_id(field.b) || -1) }
        end

        # [[field, job] pairs, whether `fields` holds more]; the fields taken leave `fields`. A field gone
        # meanwhile is skipped.
        def read(conn, key, fields, entries: Recovery::ENTRIES)
          taken = []
          bytes = 0
          until fields.empty? || taken.size >= entries || bytes >= BYTES
            page = fields.first([PAGE, entries - taken.size].min)
            jobs = conn.call("HMGET", key, *page)
            page.zip(jobs).each do |field, job|
              break if bytes >= BYTES

              fields.shift
              next unless job

              taken << [field, job]
              bytes += job.bytesize
            end
          end
          [taken, !fields.empty?]
        end
      end
    end
  end
end
