# frozen_string_literal: true

require_relative "records"
require_relative "report"

module Demo
  # bin/demo's lines about waits: a tenant class's waits, measured and ideal (Report.ideal), the part of the small
  # tenants' waits after a thread came free, and what a thread loses between jobs.
  module WaitLines
    extend Records

    module_function

    def class_lines(mode, klass, records, ideal, threads)
      measured = Report.summary(waits(of_class(records, klass)))
      best = Report.summary(waits(of_class(ideal, klass)))
      [format("%-18s %-7s wait  p50 %8s  p95 %8s  max %8s  (%d jobs)", mode, klass, fmt(measured[:p50]),
              fmt(measured[:p95]), fmt(measured[:max]), measured[:count]),
       format("%-18s %-7s ideal p50 %8s  p95 %8s  max %8s  measured / ideal: p50 %s, p95 %s", mode, klass,
              fmt(best[:p50]), fmt(best[:p95]), fmt(best[:max]), ratio(measured[:p50], best[:p50]),
              ratio(measured[:p95], best[:p95])),
       (past_line(mode, klass, records, ideal, threads) if klass == "small")].compact
    end

    # The part of a class's wait after a thread came free (fair order and the fetch), measured and ideal; the rest
    # of the wait is every thread busy.
    def past_line(mode, klass, records, ideal, threads)
      past = ->(rs) { Report.summary(Report.past_free_thread(rs, of_class(rs, klass), threads)) }
      measured = past.call(records)
      best = past.call(ideal)
      format("%-18s %-7s of which after a thread came free (fair order, fetch): p50 %s  p95 %s  max %s " \
             "(ideal p50 %s  p95 %s  max %s)", mode, klass, ms(measured[:p50]), ms(measured[:p95]),
             ms(measured[:max]), ms(best[:p50]), ms(best[:p95]), ms(best[:max]))
    end

    # Also what a thread loses between jobs while work waits (fetch, acknowledge, record: the ideal has none).
    def totals_line(mode, records)
      makespan = records.map { |r| r["finished_at"] }.max - records.map { |r| r["enqueued_at"] }.min
      gaps = Report.busy_gaps(records)
      mean = gaps.empty? ? nil : gaps.sum / gaps.size
      format("%-18s makespan %.2fs  %.0f jobs/s; a thread between jobs while jobs wait: mean %s, p95 %s", mode,
             makespan, records.size / makespan, ms(mean), ms(Report.percentile(gaps, 95)))
    end

    def fmt(seconds) = seconds.nil? ? "-" : format("%.3fs", seconds)
    def ms(seconds) = seconds.nil? ? "-" : format("%.1fms", seconds * 1000)
    def ratio(value, ideal) = value && ideal&.positive? ? format("%.2fx", value / ideal) : "-"
  end
end
