# frozen_string_literal: true

module Demo
  # What bin/demo's report reads from a run's job records (hashes with "tenant", "enqueued_at", "started_at",
  # "finished_at"): tenant classes, waits, the greedy tenants' total time, the most jobs a tenant ran at once.
  module Records
    GREEDY_PAIR = %w[greedy-a greedy-b].freeze
    MIXED_PAIR = %w[greedy-slow greedy-fast].freeze

    module_function

    # A tenant's class by its name: greedy..., limited... (the rate-capped tenant), else small.
    def tenant_class(tenant) = %w[greedy limited].find { |c| tenant.start_with?(c) } || "small"
    def of_class(records, klass) = records.select { |r| tenant_class(r["tenant"]) == klass }
    def waits(records) = records.map { |r| r["started_at"] - r["enqueued_at"] }

    # The greedy tenants' first enqueue to their last finish; nil without greedy jobs.
    def greedy_total(records) = Report.span(of_class(records, "greedy"))

    # The most jobs one tenant of these records had running at once (start to finish); nil without records.
    def peak_running(records)
      records.group_by { |r| r["tenant"] }.values.map do |rs|
        Report.peak_concurrency(rs.map { |r| [r["started_at"], r["finished_at"]] })
      end.max
    end

    # { tenant => share of the worker time } of the mixed-durations pair over the jobs started while both were
    # backlogged (from the later first enqueue to the earlier last start); nil if never.
    def time_shares(records)
      by_tenant = records.group_by { |r| r["tenant"] }.slice(*MIXED_PAIR)
      return nil unless by_tenant.size == MIXED_PAIR.size

      from, to = Report.backlog_window(by_tenant.values)
      spent = by_tenant.transform_values { |rs| worker_time(rs, from, to) }
      total = spent.values.sum
      total.positive? ? spent.transform_values { |t| t / total } : nil
    end

    # The capped tenant's starts: { count:, most: in any 1 s window, tightest: the shortest span of limit + 1 of
    # them (nil if fewer), rate: starts/s after its first `limit` (a burst), over the span of its starts }; nil
    # without two starts.
    def rate_figures(records, limit)
      starts = of_class(records, "limited").map { |r| r["started_at"] }.sort
      return nil if starts.size < 2

      span = starts.last - starts.first
      { count: starts.size, most: Report.most_in_window(starts, 1.0),
        tightest: starts.each_cons(limit + 1).map { |s| s.last - s.first }.min,
        rate: span.positive? ? (starts.size - [limit, starts.size - 1].min) / span : nil }
    end

    # [thread-seconds idle while jobs of tenants not capped waited, the longest such stretch, thread-seconds]
    def idle_figures(records, threads)
      idle, longest = Report.idle_while_waiting(records, records.reject { |r| tenant_class(r["tenant"]) == "limited" },
                                                threads)
      span = records.map { |r| r["finished_at"] }.max - records.map { |r| r["enqueued_at"] }.min
      [idle, longest, threads * span]
    end

    # Run time of the jobs started from `from` to `to`.
    def worker_time(records, from, to)
      records.select { |r| r["started_at"].between?(from, to) }.sum { |r| r["finished_at"] - r["started_at"] }
    end

    # [{ tenant => jobs/s }, Jain's index] of the greedy pair while both are backlogged; [nil, nil] if never.
    def jain(records)
      throughputs = Report.backlogged_throughputs(records, GREEDY_PAIR)
      throughputs ? [throughputs, Report.jain(throughputs.values)] : [nil, nil]
    end
  end
end
