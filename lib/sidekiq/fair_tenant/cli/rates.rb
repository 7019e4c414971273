# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class CLI
      # The `rates` command of the `sidekiq-fair_tenant` CLI: runtime overrides of `fair_tenant_rate` windows,
      # written "LIMIT/SECONDS[,LIMIT/SECONDS...]" (e.g. 5/1,10000/86400).
      module Rates
        def self.list(entries)
          return "no runtime rates" if entries.empty?

          entries.map { |e| "#{Format.scope_name(e)}\t#{windows(e[:windows])}" }.join("\n")
        end

        def self.windows(windows)
          windows&.map { |w| "#{w[:limit]}/#{Format.format_number(w[:per])}" }&.join(",")
        end

        def self.rechecked(count)
          count.positive? ? "; #{count} waiting tenant(s) checked again at once" : ""
        end

        private

        def rates(argv)
          action = argv.shift or raise CLI::UsageError, "rates needs list, get, set or delete"
          rates = FairTenant.rates
          @out.puts(
            case action
            when "list" then list_rates(rates, argv)
            when "get" then Rates.windows(rates.get(**target(argv))) || "none"
            when "set" then set_rate(rates, argv)
            when "delete" then "rate deleted#{Rates.rechecked(rates.delete(**target(argv)))}"
            else raise CLI::UsageError, "unknown rates action #{action.inspect}"
            end
          )
        end

        def list_rates(rates, argv)
          extra!(argv)
          Rates.list(Printable.deep(rates.list))
        end

        def set_rate(rates, argv)
          value = argv.shift or raise CLI::UsageError, "rates set needs WINDOWS like 5/1,10000/86400"
          "rate set#{Rates.rechecked(rates.set(value, **target(argv)))}"
        end
      end
    end
  end
end
