# frozen_string_literal: true

require_relative "rate_lines"
require_relative "records"
require_relative "shared_lines"

module Demo
  # The last lines of bin/demo's report: the fair_fetch modes against their targets, each figure a ratio
  # measured in this one run. fair_fetch (issue 12) and fair_fetch+elastic (issue 13): small tenants' p95 wait
  # against the simulated ideal's, the greedy tenants' total time against plain's (with what fairness itself
  # costs them, simulated on the mode's own jobs), Jain's index of two greedy tenants. fair_fetch+static prints
  # the same ratios without targets (its greedy tenant gets limit threads out of all, so its total is bound to
  # grow): its target is that no tenant ever ran more jobs at once than its limit (as the job records show).
  # fair_fetch+rules (issue 19): sidekiq-fair_tenant's rules kept on fair queues re-route nothing, and it meets
  # fair_fetch's targets; fair_fetch+reroute (the rules opted in) prints its ratios and re-routed jobs, no target.
  # fair_fetch+shared (issue 32, the shared-api scenario): small p95 against an ideal holding the same limits, the
  # API's and each tenant's limits never exceeded, the binding limit used >= 95% while jobs waited (SharedLines).
  class Targets
    include Records

    SMALL_P95_TARGET = 1.2
    GREEDY_TOTAL_TARGET = 1.02
    JAIN_TARGET = 0.95
    STATIC = "fair_fetch+static"
    REROUTE = "fair_fetch+reroute"
    TIME = "fair_fetch+time"
    SHARE_TARGET = (0.45..0.55)
    NO_TARGET = [STATIC, REROUTE].freeze

    # results: { mode => [measured records, ideal records] }; caps: { mode => running jobs per tenant };
    # rule_modes: the modes whose jobs have re-routing rules from their fair queue "default".
    def initialize(results, threads:, two_megas:, caps:, rule_modes: [], mixed: false, rate: nil, shared: nil) # rubocop:disable Metrics/ParameterLists
      @mixed = mixed
      @rate = rate
      @shared = shared
      @results = results
      @threads = threads
      @two_megas = two_megas
      @caps = caps
      @rule_modes = rule_modes
      @plain_greedy = results["plain"] && greedy_total(results["plain"].first)
    end

    def line(mode)
      records, ideal = @results.fetch(mode)
      target = !NO_TARGET.include?(mode)
      small_p95 = ->(rs) { Report.percentile(waits(of_class(rs, "small")), 95) }
      checks = []
      checks << rerouted_check(mode, records) if @rule_modes.include?(mode)
      checks << check("small p95 / ideal", small_p95.call(records), small_p95.call(ideal),
                      target && SMALL_P95_TARGET)
      checks << greedy_check(records, ideal, target && GREEDY_TOTAL_TARGET) unless shared?(mode)
      "#{mode} targets: #{(checks + scenario_checks(mode, records)).join("; ")}"
    end

    private

    # What a scenario or a mode adds: Jain's index, worker-time shares, caps, rate caps.
    def scenario_checks(mode, records)
      checks = []
      checks << jain_check(records, mode != REROUTE) if @two_megas
      checks << shares_check(records, mode == TIME) if @mixed
      checks.concat(cap_checks(mode, records)) if @caps.key?(mode)
      checks + limit_checks(mode, records)
    end

    # A rate-capped tenant's, or the shared API's limits.
    def limit_checks(mode, records)
      return rate_checks(records) if @rate&.fetch(:modes)&.include?(mode)
      return SharedLines.checks(records, @shared[:limits]) if shared?(mode)

      []
    end

    # The shared-api mode's greedy total is the API's pace, not fairness's cost: not compared with plain's.
    def shared?(mode) = @shared&.fetch(:modes)&.include?(mode)

    def rate_checks(records)
      base = %w[fair_fetch plain].find { |mode| @results.key?(mode) }
      RateLines.checks(records, @rate[:limit], @threads, base && [base, @results[base].first])
    end

    # Jobs that ran from another queue than their class's own, fair "default": none without from_fair_queue.
    def rerouted_check(mode, records)
      moved = records.count { |r| r["queue"] != "default" }
      text = "jobs re-routed away from their fair queue #{moved} of #{records.size}"
      return "#{text} (from_fair_queue: true)" if mode == REROUTE

      "#{text} (none: #{moved.zero? ? "met" : "missed"})"
    end

    # The most jobs one tenant ran at once, greedy and small tenants, against the limit.
    def cap_checks(mode, records)
      limit = @caps.fetch(mode)
      %w[greedy small].filter_map do |klass|
        peak = peak_running(of_class(records, klass))
        next unless peak

        verdict = if mode == STATIC
                    peak <= limit ? "never exceeded: met" : "EXCEEDED by #{peak - limit}: missed"
                  else
                    peak <= limit ? "elastic, never above it" : "elastic, above it on spare threads"
                  end
        "#{klass} at most #{peak} running at once per tenant (limit #{limit}, #{verdict})"
      end
    end

    # limit false: the ratio alone.
    def check(name, value, reference, limit)
      return "#{name} - (no reference)" unless value && reference&.positive?

      ratio = value / reference
      return format("%<name>s %<ratio>.2fx (no target)", name: name, ratio: ratio) unless limit

      verdict = ratio <= limit ? "met" : "missed"
      format("%<name>s %<ratio>.2fx (<= %<limit>.2fx: %<verdict>s)", name: name, ratio: ratio, limit: limit,
                                                                     verdict: verdict)
    end

    # With what fairness itself costs the greedy tenants: this run's jobs (arrivals, measured durations)
    # simulated in SFQ order against the same jobs simulated first in first out (small tenants' jobs no longer
    # wait behind all of theirs). The same jobs on both sides, so the run-to-run difference in job durations
    # (sleep overshoot under load) stays out of it.
    def greedy_check(records, ideal, target)
      measured = check("greedy total / plain", greedy_total(records), @plain_greedy, target)
      fifo = greedy_total(Report.ideal(records, @threads, fifo: true))
      return measured unless fifo&.positive?

      measured.sub(/\)\z/, format("; simulated on its own jobs, SFQ / FIFO: %<ratio>.2fx)",
                                  ratio: greedy_total(ideal) / fifo))
    end

    # The mixed-durations pair's shares of the worker time: near even by worker time, not by job count.
    def shares_check(records, target)
      shares = time_shares(records)
      return "worker time shares - (never backlogged together)" unless shares

      slow, fast = shares.values_at(*MIXED_PAIR).map { |v| (100 * v).round }
      text = "worker time greedy-slow #{slow}% / greedy-fast #{fast}%"
      return "#{text} (no target)" unless target

      verdict = shares.values.all? { |v| SHARE_TARGET.cover?(v) } ? "met" : "missed"
      "#{text} (each 45-55%: #{verdict})"
    end

    def jain_check(records, target)
      index = jain(records).last
      return "Jain's index - (never backlogged together)" unless index
      return format("Jain's index %.3f (no target)", index) unless target

      verdict = index >= JAIN_TARGET ? "met" : "missed"
      format("Jain's index %<index>.3f (>= %<target>.2f: %<verdict>s)", index: index, target: JAIN_TARGET,
                                                                        verdict: verdict)
    end
  end
end
