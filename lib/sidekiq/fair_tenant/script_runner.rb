# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Runs one of the extension's scripts on a connection Sidekiq hands over (redis-rb 4.8 or redis-client):
    # EVALSHA, and EVAL when the server does not know the script yet (a restart, a failover, SCRIPT FLUSH).
    # Fair-queue scripts are functions of one library (Redis >= 7): FCALL, the library loaded when the server
    # lacks it (FUNCTION LOAD REPLACE, then the call again); on a server without functions (Redis 6.2), the
    # same script by EVALSHA, from then on on that connection.
    module ScriptRunner
      WITHOUT_FUNCTIONS = ObjectSpace::WeakMap.new
      # Key counts as the clients would write them (an Integer argument costs them a conversion each call).
      NUMKEYS = Array.new(16) { |count| count.to_s.freeze }.freeze

      module_function

      def run(conn, sha, source, keys, argv)
        conn.call("EVALSHA", sha, NUMKEYS[keys.size] || keys.size, *keys, *argv)
      rescue StandardError => e
        raise unless e.message.start_with?("NOSCRIPT")

        conn.call("EVAL", source, keys.size, *keys, *argv)
      end

      # `function`: [name, library source, sha, source] (the last two for EVALSHA without functions).
      def fcall(conn, function, keys, argv)
        name, library, sha, source = function
        return run(conn, sha, source, keys, argv) if WITHOUT_FUNCTIONS.key?(conn)

        begin
          conn.call("FCALL", name, NUMKEYS[keys.size] || keys.size, *keys, *argv)
        rescue StandardError => e
          raise unless e.message.include?("Function not found") || e.message.match?(/unknown command .FCALL/i)
          return no_functions(conn, sha, source, keys, argv) if e.message.include?("unknown command")

          conn.call("FUNCTION", "LOAD", "REPLACE", library)
          conn.call("FCALL", name, keys.size, *keys, *argv)
        end
      end

      # Calls of one function with the same keys, sent together (one round trip, a pipeline). The pipeline is sent
      # again whole once the server was given what it lacked (the library, or the script where functions are
      # unknown), so each call must be safe to send twice. Raises the first call's error, once every call ran.
      def fcall_all(conn, function, keys, argvs)
        name, library, sha, source = function
        attempts = 0
        begin
          evalsha = WITHOUT_FUNCTIONS.key?(conn)
          conn.pipelined do |pipeline|
            argvs.each do |argv|
              if evalsha
                pipeline.call("EVALSHA", sha, keys.size, *keys, *argv)
              else
                pipeline.call("FCALL", name, keys.size, *keys, *argv)
              end
            end
          end
        rescue StandardError => e
          raise if (attempts += 1) > 2 || !provide(conn, e.message, library, source)

          retry
        end
      end

      # What a server lacked for a call that failed with `message`, given it; false for any other failure.
      def provide(conn, message, library, source)
        if message.start_with?("NOSCRIPT")
          conn.call("SCRIPT", "LOAD", source)
        elsif message.match?(/unknown command .FCALL/i)
          WITHOUT_FUNCTIONS[conn] = true
        elsif message.include?("Function not found")
          conn.call("FUNCTION", "LOAD", "REPLACE", library)
        else
          return false
        end
        true
      end

      def no_functions(conn, sha, source, keys, argv)
        WITHOUT_FUNCTIONS[conn] = true
        run(conn, sha, source, keys, argv)
      end
    end
  end
end
