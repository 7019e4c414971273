# frozen_string_literal: true

module Sidekiq
  module FairTenant
    class CLI
      # Plain-text tables for the `sidekiq-fair_tenant` command.
      module Format
        USAGE = <<~TEXT
          Usage: sidekiq-fair_tenant [--redis-url URL] [-r FILE] COMMAND [ARGS]

          Commands:
            stats JOB_CLASS [--top N | --limit N --offset N] [--tenant NAME] [--json]
                                        active tenants: counts per rule window, next queue
            stats --fair [QUEUE] [--limit N --offset N] [--json]
                                        fair queues: backlog, in flight; a queue's tenants: waiting,
                                        oldest wait, weight, running/limit, mean run time (:time);
                                        its capped tenants: running/limit, static or elastic, in
                                        force or lifted; its rate-capped tenants: windows, next start
            stats --concurrency [--json]
                                        concurrency scopes: running/limit, parked, oldest parked
            limits list                 runtime concurrency limits
            limits get    (--tenant NAME [--queue QUEUE] | --key KEY)
            limits set    (--tenant NAME [--queue QUEUE] | --key KEY) LIMIT
            limits delete (--tenant NAME [--queue QUEUE] | --key KEY)
            rates list                  runtime rate windows (replace fair_tenant_rate's)
            rates get    (--tenant NAME [--queue QUEUE] | --key KEY)
            rates set    (--tenant NAME [--queue QUEUE] | --key KEY) LIMIT/SECONDS[,LIMIT/SECONDS...]
            rates delete (--tenant NAME [--queue QUEUE] | --key KEY)
            weights list                tenants' weights in fair queues (default 1; 0 pauses)
            weights get    --tenant NAME [--queue QUEUE]
            weights set    --tenant NAME [--queue QUEUE] WEIGHT
            weights delete --tenant NAME [--queue QUEUE]
            fair-off QUEUE              move QUEUE's fair backlog back to queue:QUEUE, in fair order
                                        (after every process runs without QUEUE in fair_queues)
            queues                      the weighted :queues: block implied by the rules
            why JID [--json]            where a job stands and what holds it: its tenant's jobs ahead,
                                        the tenant's place in the rotation and share, a pause or a
                                        concurrency cap (running/limit, holders); or running, plain
                                        queue, scheduled, retry, dead

          Options:
            --redis-url URL   Redis to use, the gem's and (for weights) Sidekiq's (default: Sidekiq's,
                              which defaults to REDIS_URL)
            -r, --require F   load this file first (your job classes; e.g. config/environment.rb)
        TEXT

        module_function

        def tenants(total, rows)
          lines = ["#{total} active tenant(s)"]
          rows.each do |row|
            windows = row[:windows].map { |w| "#{w[:count]}/#{w[:threshold]} per #{w[:per].round(3)}s" }.join(", ")
            rerouted = row[:last_rerouted_at] ? "\tlast re-route #{row[:last_rerouted_at].utc.iso8601}" : ""
            throttled = row[:throttled] ? " (throttled)" : ""
            lines << "#{row[:tenant]}\t#{windows}\tnext: #{row[:next_queue]}#{throttled}#{rerouted}"
          end
          lines.join("\n")
        end

        def scopes(scopes)
          return "no concurrency scope holds or waits for a slot" if scopes.empty?

          scopes.map do |s|
            age = s[:oldest_parked_age] ? format(" oldest %.1fs", s[:oldest_parked_age]) : ""
            "#{scope_name(s)}\trunning #{s[:running]}/#{s[:limit] || "default"}\tparked #{s[:parked]}#{age}"
          end.join("\n")
        end

        def limits(limits)
          return "no runtime limits" if limits.empty?

          limits.map { |l| "#{scope_name(l)}\t#{l[:limit]}" }.join("\n")
        end

        def fair(result)
          return fair_list(result) if result.is_a?(Array)

          lines = [fair_summary(result)]
          result[:page].each do |t|
            weight = t[:paused] ? "0 (paused)" : format_number(t[:weight])
            lines << "#{t[:tenant]}\twaiting #{t[:backlog]}\toldest #{t[:oldest_age]}s\tweight #{weight}\t" \
                     "running #{t[:running]}/#{t[:limit] || "-"}#{"\tmean #{t[:mean_ms]}ms" if t[:mean_ms]}"
          end
          lines.concat(capped(result)).concat(Rated.lines(result)).join("\n")
        end

        def capped(result)
          return [] if result[:capped].empty?

          shown = result[:capped].size < result[:capped_tenants] ? " (first #{result[:capped].size})" : ""
          ["#{result[:capped_tenants]} capped tenant(s)#{shown}:"] + result[:capped].map { |c| capped_row(c) }
        end

        def capped_row(row)
          cap = "#{row[:elastic] ? "elastic" : "static"} cap #{row[:in_force] ? "in force" : "lifted"}"
          scope = row[:scope] ? "\t#{scope_name(row[:scope])}" : ""
          running = "#{row[:running] || "-"}/#{row[:limit] || "-"}"
          "#{row[:tenant]}\trunning #{running}\t#{cap}\twaiting #{row[:waiting]}#{scope}"
        end

        def fair_list(queues)
          queues.empty? ? "no fair queue" : queues.map { |q| fair_summary(q) }.join("\n")
        end

        def fair_summary(queue)
          "#{queue[:queue]}\twaiting #{queue[:backlog]}\tstartable #{queue[:startable]}\tpaused #{queue[:paused]}" \
            "\theld #{queue[:held]}\trate-held #{queue[:rate_held]}\tin flight #{queue[:in_flight]}\ttenants " \
            "#{queue[:tenants]}\tcapped #{queue[:capped_tenants]}\trate-capped #{queue[:rated_tenants]}" \
            "#{"\tby worker time: mean #{queue[:mean_ms]}ms" if queue[:mean_ms]}"
        end

        def weights(weights)
          return "no weights set (every tenant has weight 1)" if weights.empty?

          weights.map { |w| "tenant #{w[:tenant]}#{" queue #{w[:queue]}" if w[:queue]}\t#{format_number(w[:weight])}" }
                 .join("\n")
        end

        def format_number(value)
          value == value.to_i ? value.to_i.to_s : value.to_s
        end

        def scope_name(entry)
          return "key #{entry[:key]}" if entry[:key]

          "tenant #{entry[:tenant]}#{" queue #{entry[:queue]}" if entry[:queue]}"
        end
      end
    end
  end
end
