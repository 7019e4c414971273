# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # Read-only looks into any process's in-flight jobs, for the operator's views (stats, `why`): a hash of
      # fields and jobs (this format), or the list a process of an older gem (format 2) still keeps until it
      # stops or its recovery turns it into a hash. A field and a format-2 entry both begin with the job's
      # queue and tenant (Native::Fair.decode_entry reads either).
      module InFlightKeys
        PAGE = Native::Names::RECOVER_PAGE

        module_function

        # The fields (a format-2 list: its entries).
        def fields(conn, key)
          return conn.call("LRANGE", key, 0, -1) if list?(conn, key)

          conn.call("HKEYS", key)
        end

        # Yields field (or format-2 entry) and job, PAGE jobs a round trip.
        def each_job(conn, key, &block)
          return each_listed(conn, key, &block) if list?(conn, key)

          cursor = "0"
          loop do
            cursor, pairs = conn.call("HSCAN", key, cursor, "COUNT", PAGE)
            pairs.each_slice(2, &block)
            break if cursor.to_s == "0"
          end
        end

        def each_listed(conn, key)
          (0..).step(PAGE) do |from|
            page = conn.call("LRANGE", key, from, from + PAGE - 1)
            page.each { |entry| yield entry, Native::Fair.decode_entry(entry)&.last || entry }
            break if page.size < PAGE
          end
        end

        def list?(conn, key) = conn.call("TYPE", key).to_s == "list"
      end
    end
  end
end
