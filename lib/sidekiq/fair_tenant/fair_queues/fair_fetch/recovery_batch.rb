# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class FairFetch
      # What one recovery call takes of a dead process's in-flight list: its newest entries, up to Recovery::ENTRIES
      # of them and BYTES (past the first: an entry larger than that goes alone), read PAGE per LRANGE, so no call
      # (reads and script) carries much more than twice BYTES however large the jobs (1 MB jobs included).
      module RecoveryBatch
        BYTES = Native::Names::RECOVER_BYTES
        PAGE = Native::Names::RECOVER_PAGE

        module_function

        # [entries, whether the list may hold more].
        def read(conn, key, entries: Recovery::ENTRIES)
          taken = []
          bytes = 0
          loop do
            want = [PAGE, entries - taken.size].min
            page = conn.call("LRANGE", key, taken.size, taken.size + want - 1)
            page.each do |entry|
              return [taken, true] if bytes >= BYTES

              taken << entry
              bytes += entry.bytesize
            end
            return [taken, false] if page.size < want
            return [taken, true] if taken.size >= entries || bytes >= BYTES
          end
        end
      end
    end
  end
end
