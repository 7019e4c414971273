# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      class Fetch
        # The fair state's format version (Native::Fair's rule), checked once per process before its first fetch:
        # a state a newer gem wrote (after a rollback) is refused, loudly, instead of served by a gem that would
        # ignore what it does not know of; the process fetches nothing, keeps the jobs where they are, and looks
        # again every RECHECK seconds (the rollback's documented step: OPERATIONS.md). A state without a version
        # gets this gem's.
        module FormatCheck
          KEY = Native::Fair.format_key.freeze
          FORMAT = Native::Fair::FORMAT
          RECHECK = 60

          @ok_pid = nil
          @refused_at = nil

          class << self
            # Whether this process found the state in its format (no call).
            def ok_here? = @ok_pid == ::Process.pid

            def ok?(conn)
              return true if ok_here?
              return false if @refused_at && Interval.now - @refused_at < RECHECK

              conn.call("SET", KEY, FORMAT.to_s, "NX")
              verdict, found = Native::Fair.format_verdict(conn.call("GET", KEY))
              return refuse(verdict, found) if %w[newer unreadable].include?(verdict)

              conn.call("SET", KEY, FORMAT.to_s) if verdict == "upgrade"
              @refused_at = nil
              @ok_pid = ::Process.pid
              true
            end

            # Forgets the verdict (specs).
            def reset!
              @ok_pid = @refused_at = nil
            end

            private

            def refuse(verdict, found)
              @refused_at = Interval.now
              seen = verdict == "newer" ? found : "not a version"
              ::Sidekiq.logger.error(Printable.log(
                                       "fair queues refused: #{KEY} is #{seen}, this gem knows format #{FORMAT} " \
                                       "(a newer gem, or a hand, wrote it); nothing is fetched from any queue of " \
                                       "this process until the state is this format: see OPERATIONS.md, " \
                                       "\"Upgrading and rolling back\""
                                     ))
              false
            end
          end
        end
      end
    end
  end
end
