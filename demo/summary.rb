# frozen_string_literal: true

require_relative "rate_lines"
require_relative "records"
require_relative "report"
require_relative "shared_lines"
require_relative "targets"
require_relative "wait_lines"

module Demo
  # bin/demo's printed report: per mode, each tenant class's waits as measured and in the mode's ideal
  # schedule (Report.ideal) with measured / ideal, throughput, the greedy tenants' total time against plain,
  # Jain's index between two greedy tenants; then the fair_fetch modes against their targets (Targets).
  class Summary
    include Records

    def self.tenant_class(tenant) = Records.tenant_class(tenant)

    # results: { mode => [measured records, ideal records] }; modes: { mode => description }; caps: { mode =>
    # running jobs per tenant } of the capped fair_fetch modes; rule_modes: the modes whose jobs have re-routing
    # rules (their records name the queue each job ran from); rate: { modes:, limit: } in the rate-capped scenario;
    # shared: { modes:, limits: { tenant:, shared:, rate: } } in the shared-api scenario.
    def initialize(results, threads:, two_megas:, modes:, caps: {}, rule_modes: [], mixed: false, rate: nil, # rubocop:disable Metrics/ParameterLists
                   shared: nil)
      @mixed = mixed
      @rate = rate
      @shared = shared
      @results = results
      @threads = threads
      @two_megas = two_megas
      @modes = modes
      @caps = caps
      @rule_modes = rule_modes
      @plain_greedy = results["plain"] && greedy_total(results["plain"].first)
      @targets = Targets.new(results, threads: threads, two_megas: two_megas, caps: caps, rule_modes: rule_modes,
                                      mixed: mixed, rate: rate, shared: shared)
    end

    def lines
      out = header_lines
      @results.each { |mode, (records, ideal)| out.concat(mode_lines(mode, records, ideal)) }
      targeted = %w[fair_fetch fair_fetch+time] + @caps.keys + @rule_modes + (@rate&.fetch(:modes) || []) +
                 (@shared&.fetch(:modes) || [])
      out.concat((targeted & @results.keys).map { |mode| @targets.line(mode) })
    end

    private

    def header_lines
      out = @results.keys.map { |mode| format("mode %-18s %s", mode, @modes.fetch(mode)) }
      out << format("ideal: each mode's own jobs (enqueue times, measured durations) in start-time fair order " \
                    "(weights 1) on %d non-preemptive threads, never idle while a job waits: simulated", @threads)
      capped = @caps.keys & @results.keys
      if capped.any?
        out << "ideal of #{capped.join(", ")}: the same, uncapped (a cap is not simulated): no tenant is held " \
               "back while a thread is free"
      end
      if @results.key?(Targets::TIME)
        out << "ideal of #{Targets::TIME}: the same, fair by worker time (each job charged its tenant's mean run " \
               "time so far, corrected by its duration when it ends)"
      end
      out.concat(RateLines.header(@rate[:modes] & @results.keys, @rate[:limit])) if @rate
      out.concat(SharedLines.header(@shared[:modes] & @results.keys, @shared[:limits], @threads)) if @shared
      out
    end

    def mode_lines(mode, records, ideal)
      out = %w[small greedy].flat_map { |klass| WaitLines.class_lines(mode, klass, records, ideal, @threads) }
      out << WaitLines.totals_line(mode, records)
      out << greedy_line(mode, records, ideal)
      out << jain_line(mode, records, ideal) if @two_megas
      out << shares_line(mode, records, ideal) if @mixed
      out.concat(RateLines.summary(mode, records, ideal, @rate[:limit], @threads)) if @rate
      out.concat(shared_lines(mode, records, ideal)) if @shared
      out << queues_line(mode, records) if @rule_modes.include?(mode)
      out
    end

    # What the shared API saw, in every mode of the shared-api scenario; its use and the fair shares in its own.
    def shared_lines(mode, records, ideal)
      SharedLines.summary(mode, records, ideal, @shared[:limits], @shared[:modes].include?(mode))
    end

    # Where each tenant class's jobs ran: the queue Sidekiq fetched them from.
    def queues_line(mode, records)
      by_class = %w[greedy small].map do |klass|
        counts = of_class(records, klass).map { |r| r["queue"] || "?" }.tally.sort_by { |queue, _| queue }
        "#{klass} #{counts.map { |queue, n| "#{queue} #{n}" }.join(", ")}"
      end
      format("%-18s jobs ran from: %s", mode, by_class.join("; "))
    end

    # Also the most jobs one greedy tenant had running at once (at most the slot limit with slots).
    def greedy_line(mode, records, ideal)
      total = greedy_total(records)
      return format("%-18s greedy total -", mode) unless total

      vs_plain = @plain_greedy ? format(" (%.2fx plain)", total / @plain_greedy) : ""
      peak = peak_running(of_class(records, "greedy"))
      format("%-18s greedy total %.2fs%s, ideal %.2fs; at most %d running at once per greedy tenant", mode, total,
             vs_plain, greedy_total(ideal), peak)
    end

    def jain_line(mode, records, ideal)
      throughputs, index = jain(records)
      return format("%-18s Jain's index: the greedy tenants were never backlogged together", mode) unless index

      best = jain(ideal).last
      format("%-18s greedy-a %.0f jobs/s, greedy-b %.0f jobs/s while both backlogged: Jain's index %.3f " \
             "(ideal %s)", mode, throughputs["greedy-a"], throughputs["greedy-b"], index,
             best ? format("%.3f", best) : "-")
    end

    # The mixed-durations pair's shares of the worker time while both were backlogged, measured and ideal.
    def shares_line(mode, records, ideal)
      shares = ->(rs) { time_shares(rs)&.values_at(*MIXED_PAIR)&.map { |v| format("%.0f%%", 100 * v) } }
      measured = shares.call(records)
      return format("%-18s worker time: the greedy tenants were never backlogged together", mode) unless measured

      best = shares.call(ideal) || %w[- -]
      format("%-18s worker time while both backlogged: greedy-slow %s, greedy-fast %s (ideal %s, %s)", mode,
             *measured, *best)
    end
  end
end
