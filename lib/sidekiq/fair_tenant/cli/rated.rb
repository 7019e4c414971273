# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class CLI
      # `stats --fair QUEUE`'s lines for the tenants waiting for a rate window.
      module Rated
        module_function

        def lines(result)
          return [] if result[:rated].empty?

          shown = result[:rated].size < result[:rated_tenants] ? " (first #{result[:rated].size})" : ""
          ["#{result[:rated_tenants]} rate-capped tenant(s)#{shown}:"] + result[:rated].map { |r| rated_row(r) }
        end

        def rated_row(row)
          windows = row[:windows].map { |w| "#{w[:starts]}/#{w[:limit]} per #{Format.format_number(w[:per])}s" }
          windows = windows.join(", ")
          start = row[:next_start_in] ? "in #{row[:next_start_in]}s" : "never (until its windows change)"
          scope = row[:scope] ? "\t#{Format.scope_name(row[:scope])}" : ""
          "#{row[:tenant]}\twindows #{windows}\tnext start #{start}\twaiting #{row[:waiting]}#{scope}"
        end
      end
    end
  end
end
