# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class CLI
      # The fair-queue commands of the `sidekiq-fair_tenant` CLI: `weights`, `fair-off` and `why`.
      module Weights
        private

        def why(argv)
          jid = argv.shift or raise CLI::UsageError, "why needs a JID"
          extra!(argv)
          result = FairTenant.why(jid)
          @out.puts(@options[:json] ? Printable.json(result) : WhyText.lines(Printable.deep(result)).join("\n"))
        end

        def weights(argv)
          action = argv.shift or raise CLI::UsageError, "weights needs list, get, set or delete"
          handler = { "list" => :list_weights, "get" => :get_weight, "set" => :set_weight,
                      "delete" => :delete_weight }[action]
          raise CLI::UsageError, "unknown weights action #{action.inspect}" unless handler

          @out.puts(send(handler, FairTenant.weights, argv))
        end

        def list_weights(weights, argv)
          extra!(argv)
          Format.weights(Printable.deep(weights.list))
        end

        def get_weight(weights, argv)
          weight = weights.get(**weight_target(argv))
          weight ? Format.format_number(weight) : "none"
        end

        def set_weight(weights, argv)
          value = argv.shift or raise CLI::UsageError, "weights set needs a WEIGHT"
          "weight set#{resumed(weights.set(value, **weight_target(argv)))}"
        end

        def delete_weight(weights, argv)
          "weight deleted#{resumed(weights.delete(**weight_target(argv)))}"
        end

        # fair-off QUEUE: the fair backlog back to queue:QUEUE (see `rake fair_tenant:fair_off`).
        def fair_off(argv)
          queue = argv.shift or raise CLI::UsageError, "fair-off needs a QUEUE"
          extra!(argv)
          off = FairQueues::Off
          result = Sidekiq.redis { |conn| off.run(conn, queue, on_wait: off.method(:waiting).curry[@out]) }
          @out.puts(FairQueues::Off.note(Printable.call(queue), result))
        end

        # stats --fair [QUEUE]: every fair queue, or one queue's waiting tenants (oldest first).
        def fair_queue_stats(argv)
          queue = argv.shift
          extra!(argv)
          stats = FairTenant.fair_stats
          result = queue ? stats.queue(queue, limit: @options[:limit], offset: @options[:offset]) : stats.queues
          @out.puts(@options[:json] ? Printable.json(result) : Format.fair(Printable.deep(result)))
        end

        def resumed(count)
          count.positive? ? "; resumed in #{count} fair queue(s)" : ""
        end

        def weight_target(argv)
          extra!(argv)
          raise CLI::UsageError, "weights need --tenant NAME" unless @options[:tenant]
          raise CLI::UsageError, "weights take --tenant and --queue, not --key" if @options[:key]

          @options.slice(:tenant, :queue)
        end
      end
    end
  end
end
