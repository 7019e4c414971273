# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class CLI
      # The `limits` command of the `sidekiq-fair_tenant` CLI.
      module Limits
        private

        def limits(argv)
          action = argv.shift or raise CLI::UsageError, "limits needs list, get, set or delete"
          limits = FairTenant.limits
          @out.puts(
            case action
            when "list" then Format.limits(Printable.deep(limits.list))
            when "get" then limits.get(**target(argv)) || "none"
            when "set" then set_limit(limits, argv)
            when "delete" then "limit deleted; #{limits.delete(**target(argv))} parked job(s) released"
            else raise CLI::UsageError, "unknown limits action #{action.inspect}"
            end
          )
        end

        # The gem's Redis, and Sidekiq's (where fair queues, weights, slots and limits are), both with the
        # gem's TLS settings.
        def use_redis(url)
          FairTenant.configure { |c| c.redis_url = url }
          Sidekiq.configure_client { |c| c.redis = { url: url }.merge(FairTenant.config.sidekiq_tls_options) }
        end

        def set_limit(limits, argv)
          value = argv.shift or raise CLI::UsageError, "limits set needs a LIMIT"
          "limit set; #{limits.set(value, **target(argv))} parked job(s) released"
        end
      end
    end
  end
end
