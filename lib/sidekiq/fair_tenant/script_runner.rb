# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # Runs one of the extension's scripts on a connection Sidekiq hands over (redis-rb 4.8 or redis-client):
    # EVALSHA, and EVAL when the server does not know the script yet (a restart, a failover, SCRIPT FLUSH).
    module ScriptRunner
      module_function

      def run(conn, sha, source, keys, argv)
        conn.call("EVALSHA", sha, keys.size, *keys, *argv)
      rescue StandardError => e
        raise unless e.message.start_with?("NOSCRIPT")

        conn.call("EVAL", source, keys.size, *keys, *argv)
      end
    end
  end
end
