# frozen_string_literal: true

module Demo
  # Plain numbers for bin/demo's report: percentiles, the ideal small-tenant wait, Jain's index.
  # No Sidekiq, no Redis: unit-tested in spec/integration/demo_spec.rb.
  module Report
    module_function

    # Linear interpolation between closest ranks (numpy's default). nil for an empty list.
    def percentile(values, pct)
      return nil if values.empty?

      sorted = values.sort
      rank = (pct / 100.0) * (sorted.size - 1)
      lower = sorted[rank.floor]
      upper = sorted[rank.ceil]
      lower + ((upper - lower) * (rank - rank.floor))
    end

    # p50, p95 and max of a list of numbers.
    def summary(values)
      { p50: percentile(values, 50), p95: percentile(values, 95), max: values.max, count: values.size }
    end

    # Ideal small-tenant wait: R + max(m*s*(K+1)/W, sqrt(2*B*S/W)), B = K*m*s total small work.
    #   threads W, greedy_s S (greedy job length), small_tenants K, per_tenant m, small_s s; R, the time
    #   until the first running greedy job ends, is taken as S.
    def ideal_wait(threads:, greedy_s:, small_tenants:, per_tenant:, small_s:)
      w = threads.to_f
      small_work = small_tenants * per_tenant * small_s
      greedy_s + [per_tenant * small_s * (small_tenants + 1) / w, Math.sqrt(2 * small_work * greedy_s / w)].max
    end

    # Jain's fairness index of a list of throughputs: (sum x)^2 / (n * sum x^2); 1 is perfectly fair.
    def jain(values)
      squares = values.sum { |v| v * v }
      return 1.0 if values.empty? || squares.zero?

      (values.sum**2) / (values.size * squares.to_f)
    end

    # Throughput (jobs started per second) of each tenant while all of them are backlogged: from the
    # last tenant's first enqueue to the first time one of them has no job left waiting (its last start).
    # records: hashes with "tenant", "enqueued_at", "started_at". Returns { tenant => jobs/s } or nil.
    def backlogged_throughputs(records, tenants)
      by_tenant = records.group_by { |r| r["tenant"] }.slice(*tenants)
      return nil unless by_tenant.size == tenants.size

      from, to = backlog_window(by_tenant.values)
      return nil unless to > from

      by_tenant.transform_values { |rs| rs.count { |r| r["started_at"].between?(from, to) } / (to - from) }
    end

    # Most intervals [start, finish) open at once; finish before start when equal.
    def peak_concurrency(intervals)
      events = intervals.flat_map { |from, to| [[from, 1], [to, -1]] }.sort_by { |at, delta| [at, delta] }
      events.reduce([0, 0]) { |(now, peak), (_, delta)| [now + delta, [peak, now + delta].max] }.last
    end

    def backlog_window(groups)
      [groups.map { |rs| rs.map { |r| r["enqueued_at"] }.min }.max,
       groups.map { |rs| rs.map { |r| r["started_at"] }.max }.min]
    end
  end
end
