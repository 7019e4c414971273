# frozen_string_literal: true

module Sidekiq
  module FairTenant
    module FairQueues
      # What follows a fair queue's script writing a payload to Sidekiq's dead set (atomically with taking it
      # from where it was): the set trimmed as Sidekiq's DeadSet#kill trims it, Sidekiq's death handlers
      # called for a job, and one rate-limited warning naming the cause.
      module Dead
        module_function

        # A payload decoded for the dead set: a job Hash, or nil when it is not a job (not a JSON object).
        def job(raw)
          payload = ::Sidekiq.load_json(utf8(raw))
          payload.is_a?(Hash) ? payload : nil
        rescue StandardError
          nil
        end

        # JSON for a job, or nil when it cannot be written back (bytes that are not UTF-8).
        def dump(payload)
          ::Sidekiq.dump_json(payload)
        rescue StandardError
          nil
        end

        def utf8(raw)
          raw.encoding == Encoding::UTF_8 ? raw : raw.dup.force_encoding(Encoding::UTF_8)
        end

        # After the script wrote them: `killed` [payload Hash or nil, raw, reason] triples.
        def written(killed, queue_of: nil)
          return if killed.empty?

          trim
          killed.each do |payload, raw, reason|
            notify(payload, reason) if payload
            warn(payload, raw, reason, queue_of)
          end
        end

        def trim
          dead = ::Sidekiq::DeadSet.new
          if dead.respond_to?(:trim)
            dead.trim
          else # 6.4: DeadSet#kill trims inline
            now = Time.now.to_f
            ::Sidekiq.redis do |conn|
              conn.call("ZREMRANGEBYSCORE", "dead", "-inf", now - ::Sidekiq::DeadSet.timeout)
              conn.call("ZREMRANGEBYRANK", "dead", 0, -::Sidekiq::DeadSet.max_jobs)
            end
          end
        rescue StandardError => e
          ::Sidekiq.logger.warn(Printable.log("could not trim the dead set: #{e.message}"))
        end

        def notify(payload, reason)
          error = reason.is_a?(Exception) ? reason : Interrupted.new(reason.to_s)
          handlers.each do |handler|
            handler.call(payload, error)
          rescue StandardError => e
            ::Sidekiq.logger.warn(Printable.log("a death handler raised: #{e.class}: #{e.message}"))
          end
        end

        def handlers
          if ::Sidekiq.respond_to?(:default_configuration)
            ::Sidekiq.default_configuration.death_handlers
          else
            ::Sidekiq.death_handlers
          end
        end

        def warn(payload, raw, reason, queue)
          FairTenant.warn(:dead, reason.class) do
            what = payload ? "job #{payload["class"]} #{payload["jid"]}" : "payload #{raw.b[0, 60].inspect}"
            "#{what}#{" of fair queue #{queue}" if queue} sent to the dead set: #{reason}"
          end
        end
      end
    end
  end
end
