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

      module_function

      def run(conn, sha, source, keys, argv)
        conn.call("EVALSHA", sha, keys.size, *keys, *argv)
      rescue StandardError => e
        raise unless e.message.start_with?("NOSCRIPT")

        conn.call("EVAL", source, keys.size, *keys, *argv)
      end

      # `function`: [name, library source, sha, source] (the last two for EVALSHA without functions).
      def fcall(conn, function, keys, argv)
        name, library, sha, source = function
        return run(conn, sha, source, keys, argv) if WITHOUT_FUNCTIONS.key?(conn)

        begin
          conn.call("FCALL", name, keys.size, *keys, *argv)
        rescue StandardError => e
          raise unless e.message.include?("Function not found") || e.message.match?(/unknown command .FCALL/i)
          return no_functions(conn, sha, source, keys, argv) if e.message.include?("unknown command")

          conn.call("FUNCTION", "LOAD", "REPLACE", library)
          conn.call("FCALL", name, keys.size, *keys, *argv)
        end
      end

      def no_functions(conn, sha, source, keys, argv)
        WITHOUT_FUNCTIONS[conn] = true
        run(conn, sha, source, keys, argv)
      end
    end
  end
end
