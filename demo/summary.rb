# frozen_string_literal: true

module Demo
  # bin/demo's printed report: per mode, each tenant class's waits as measured and in the mode's ideal
  # schedule (Report.ideal) with measured / ideal, throughput, the greedy tenants' total time against plain,
  # Jain's index between two greedy tenants; then the fair_fetch mode against its targets (issue 12).
  class Summary
    # Targets of the fair_fetch mode: small p95 / ideal p95, greedy total / plain's, Jain's index.
    SMALL_P95_TARGET = 1.2
    GREEDY_TOTAL_TARGET = 1.02
    JAIN_TARGET = 0.95
    GREEDY_PAIR = %w[greedy-a greedy-b].freeze

    def self.tenant_class(tenant) = tenant.start_with?("greedy") ? "greedy" : "small"

    # results: { mode => [measured records, ideal records] }; modes: { mode => description }.
    def initialize(results, threads:, two_megas:, modes:)
      @results = results
      @threads = threads
      @two_megas = two_megas
      @modes = modes
      @plain_greedy = results["plain"] && greedy_total(results["plain"].first)
    end

    def lines
      out = @results.keys.map { |mode| format("mode %-17s %s", mode, @modes.fetch(mode)) }
      out << format("ideal: each mode's own jobs (enqueue times, measured durations) in start-time fair order " \
                    "(weights 1) on %d non-preemptive threads, never idle while a job waits: simulated", @threads)
      @results.each { |mode, (records, ideal)| out.concat(mode_lines(mode, records, ideal)) }
      out << targets_line if @results.key?("fair_fetch")
      out
    end

    private

    def mode_lines(mode, records, ideal)
      out = %w[small greedy].flat_map { |klass| class_lines(mode, klass, records, ideal) }
      out << totals_line(mode, records)
      out << greedy_line(mode, records, ideal)
      out << jain_line(mode, records, ideal) if @two_megas
      out
    end

    def class_lines(mode, klass, records, ideal)
      measured = Report.summary(waits(of_class(records, klass)))
      best = Report.summary(waits(of_class(ideal, klass)))
      [format("%-17s %-7s wait  p50 %8s  p95 %8s  max %8s  (%d jobs)", mode, klass, fmt(measured[:p50]),
              fmt(measured[:p95]), fmt(measured[:max]), measured[:count]),
       format("%-17s %-7s ideal p50 %8s  p95 %8s  max %8s  measured / ideal: p50 %s, p95 %s", mode, klass,
              fmt(best[:p50]), fmt(best[:p95]), fmt(best[:max]), ratio(measured[:p50], best[:p50]),
              ratio(measured[:p95], best[:p95]))]
    end

    # Also what a thread loses between jobs while work waits (fetch, acknowledge, record: the ideal has none).
    def totals_line(mode, records)
      makespan = records.map { |r| r["finished_at"] }.max - records.map { |r| r["enqueued_at"] }.min
      gaps = Report.busy_gaps(records)
      mean = gaps.empty? ? nil : gaps.sum / gaps.size
      format("%-17s makespan %.2fs  %.0f jobs/s; a thread between jobs while jobs wait: mean %s, p95 %s", mode,
             makespan, records.size / makespan, ms(mean), ms(Report.percentile(gaps, 95)))
    end

    # Also the most jobs one greedy tenant had running at once (at most the slot limit with slots).
    def greedy_line(mode, records, ideal)
      total = greedy_total(records)
      return format("%-17s greedy total -", mode) unless total

      vs_plain = @plain_greedy ? format(" (%.2fx plain)", total / @plain_greedy) : ""
      peak = of_class(records, "greedy").group_by { |r| r["tenant"] }.values.map do |rs|
        Report.peak_concurrency(rs.map { |r| [r["started_at"], r["finished_at"]] })
      end.max
      format("%-17s greedy total %.2fs%s, ideal %.2fs; at most %d running at once per greedy tenant", mode, total,
             vs_plain, greedy_total(ideal), peak)
    end

    def jain_line(mode, records, ideal)
      throughputs, index = jain(records)
      return format("%-17s Jain's index: the greedy tenants were never backlogged together", mode) unless index

      best = jain(ideal).last
      format("%-17s greedy-a %.0f jobs/s, greedy-b %.0f jobs/s while both backlogged: Jain's index %.3f " \
             "(ideal %s)", mode, throughputs["greedy-a"], throughputs["greedy-b"], index,
             best ? format("%.3f", best) : "-")
    end

    def targets_line
      records, ideal = @results.fetch("fair_fetch")
      small_p95 = ->(rs) { Report.percentile(waits(of_class(rs, "small")), 95) }
      checks = [check("small p95 / ideal", small_p95.call(records), small_p95.call(ideal), SMALL_P95_TARGET)]
      checks << greedy_check(records, ideal)
      checks << jain_check(records) if @two_megas
      "fair_fetch targets: #{checks.join("; ")}"
    end

    def check(name, value, reference, limit)
      return "#{name} - (no reference)" unless value && reference&.positive?

      ratio = value / reference
      format("%s %.2fx (<= %.2fx: %s)", name, ratio, limit, ratio <= limit ? "met" : "missed")
    end

    # With what fairness itself costs the greedy tenants: the fair run simulated in SFQ order against the plain
    # run simulated first in first out (small tenants' jobs no longer wait behind all of theirs).
    def greedy_check(records, ideal)
      measured = check("greedy total / plain", greedy_total(records), @plain_greedy, GREEDY_TOTAL_TARGET)
      return measured unless @plain_greedy

      fifo = greedy_total(Report.ideal(@results["plain"].first, @threads, fifo: true))
      measured.sub(/\)\z/, format("; simulated, SFQ / FIFO: %.2fx)", greedy_total(ideal) / fifo))
    end

    def jain_check(records)
      index = jain(records).last
      return "Jain's index - (never backlogged together)" unless index

      format("Jain's index %.3f (>= %.2f: %s)", index, JAIN_TARGET, index >= JAIN_TARGET ? "met" : "missed")
    end

    # [{ tenant => jobs/s }, Jain's index] of the greedy pair while both are backlogged; [nil, nil] if never.
    def jain(records)
      throughputs = Report.backlogged_throughputs(records, GREEDY_PAIR)
      throughputs ? [throughputs, Report.jain(throughputs.values)] : [nil, nil]
    end

    # The greedy tenants' first enqueue to their last finish; nil without greedy jobs.
    def greedy_total(records) = Report.span(of_class(records, "greedy"))

    def of_class(records, klass) = records.select { |r| Summary.tenant_class(r["tenant"]) == klass }
    def waits(records) = records.map { |r| r["started_at"] - r["enqueued_at"] }
    def fmt(seconds) = seconds.nil? ? "-" : format("%.3fs", seconds)
    def ms(seconds) = seconds.nil? ? "-" : format("%.1fms", seconds * 1000)
    def ratio(value, ideal) = value && ideal&.positive? ? format("%.2fx", value / ideal) : "-"
  end
end
