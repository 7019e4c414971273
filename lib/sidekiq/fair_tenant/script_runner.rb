# frozen_string_literal: true

module Sidekiq
  module FairTenant
    # The one way the gem runs its scripts on a connection Sidekiq hands over (redis-rb 4.8 or redis-client), by
    # name (SCRIPTS: every script of the extension, Native::Fair's and Native::Slots'): `run`, and `run_all` for
    # calls sent together. A slot script by EVALSHA, and EVAL when the server does not know it yet (a restart, a
    # failover, SCRIPT FLUSH). Fair-queue scripts are functions of one library (Redis >= 7): FCALL, the library
    # loaded when the server lacks it (FUNCTION LOAD REPLACE, then the call again); on a server without functions
    # (Redis 6.2), the same script by EVALSHA, from then on on that connection.
    module ScriptRunner
      # `function` and `library`: nil for a script that is no function (EVALSHA).
      Script = Struct.new(:name, :sha, :source, :function, :library)
      LIBRARY = Native::Fair.library_source.freeze
      SCRIPTS = {
        **Native::Fair.script_names.to_h do |name|
          [name, Script.new(name, Native::Fair.script_sha(name).freeze, Native::Fair.script_source(name).freeze,
                            Native::Fair.function_name(name).freeze, LIBRARY).freeze]
        end,
        **Native::Slots.script_names.to_h do |name|
          [name, Script.new(name, *Native::Slots.script(name).map(&:freeze)).freeze]
        end
      }.freeze
      WITHOUT_FUNCTIONS = ObjectSpace::WeakMap.new
      # Key counts as the clients would write them (an Integer argument costs them a conversion each call).
      NUMKEYS = Array.new(16) { |count| count.to_s.freeze }.freeze

      module_function

      # Runs the script `name` (a key of SCRIPTS, or a Script: the benches' own) once; its reply.
      def run(conn, name, keys, argv)
        script = name.is_a?(Script) ? name : SCRIPTS.fetch(name)
        return evalsha(conn, script, keys, argv) unless script.function

        fcall(conn, script, keys, argv)
      end

      # Calls of one function with the same keys, sent together (one round trip, a pipeline). The pipeline is sent
      # again whole once the server was given what it lacked (the library, or the script where functions are
      # unknown), so each call must be safe to send twice. Raises the first call's error, once every call ran.
      def run_all(conn, name, keys, argvs)
        script = SCRIPTS.fetch(name)
        attempts = 0
        begin
          pipeline(conn, script, keys, argvs)
        rescue StandardError => e
          raise if (attempts += 1) > 2 || !provide(conn, e.message, script)

          retry
        end
      end

      def evalsha(conn, script, keys, argv)
        conn.call("EVALSHA", script.sha, NUMKEYS[keys.size] || keys.size, *keys, *argv)
      rescue StandardError => e
        raise unless e.message.start_with?("NOSCRIPT")

        conn.call("EVAL", script.source, keys.size, *keys, *argv)
      end

      def fcall(conn, script, keys, argv)
        return evalsha(conn, script, keys, argv) if WITHOUT_FUNCTIONS.key?(conn)

        begin
          conn.call("FCALL", script.function, NUMKEYS[keys.size] || keys.size, *keys, *argv)
        rescue StandardError => e
          raise unless e.message.include?("Function not found") || e.message.match?(/unknown command .FCALL/i)
          return no_functions(conn, script, keys, argv) if e.message.include?("unknown command")

          conn.call("FUNCTION", "LOAD", "REPLACE", script.library)
          conn.call("FCALL", script.function, keys.size, *keys, *argv)
        end
      end

      def pipeline(conn, script, keys, argvs)
        evalsha = WITHOUT_FUNCTIONS.key?(conn)
        conn.pipelined do |pipeline|
          argvs.each do |argv|
            if evalsha
              pipeline.call("EVALSHA", script.sha, keys.size, *keys, *argv)
            else
              pipeline.call("FCALL", script.function, keys.size, *keys, *argv)
            end
          end
        end
      end

      # What a server lacked for a call that failed with `message`, given it; false for any other failure.
      def provide(conn, message, script)
        if message.start_with?("NOSCRIPT")
          conn.call("SCRIPT", "LOAD", script.source)
        elsif message.match?(/unknown command .FCALL/i)
          WITHOUT_FUNCTIONS[conn] = true
        elsif message.include?("Function not found")
          conn.call("FUNCTION", "LOAD", "REPLACE", script.library)
        else
          return false
        end
        true
      end

      def no_functions(conn, script, keys, argv)
        WITHOUT_FUNCTIONS[conn] = true
        evalsha(conn, script, keys, argv)
      end
    end
  end
end
