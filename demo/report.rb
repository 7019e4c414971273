# frozen_string_literal: true

module Demo
  # Plain numbers for bin/demo's report: percentiles, the ideal (simulated) schedule, Jain's index.
  # No Redis, no Sidekiq server: unit-tested in spec/integration/demo_spec.rb.
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

    # The ideal schedule of a run: each record's start time when start-time fair queueing (one job, one unit;
    # weights 1) runs the same jobs, arriving at their enqueue times and lasting what they lasted (finish -
    # start), on `threads` non-preemptive threads, never idle while a job waits. Simulated by the extension
    # (Native::Fair.simulate, ext/fair_tenant_rs/src/demo/ideal.rs), which the caller has loaded. Returns copies of
    # the records with "started_at" and "finished_at" replaced by the simulated ones. fifo: all jobs as one
    # tenant's, first in first out (plain Sidekiq without its overhead). time: fair by worker time (a fair
    # queue's `time` mode: each job charged its tenant's mean run time so far, corrected when it ends).
    # rates: { tenant => [limit, per_ms, ...] }, tenants held to rate windows (a rate cap: skipped until they may
    # start).
    def ideal(records, threads, fifo: false, time: false, rates: {})
      jobs = records.map do |r|
        [fifo ? "" : r["tenant"], r["enqueued_at"], [r["finished_at"] - r["started_at"], 0.0].max]
      end
      fair = Sidekiq::FairTenant::Native::Fair
      starts = if rates.empty? || fifo
                 fair.simulate_by(jobs, threads, time)
               else
                 fair.simulate_rated(jobs, threads, time, rates.to_a)
               end
      records.zip(jobs, starts).map do |r, (_, _, duration), start|
        r.merge("started_at" => start, "finished_at" => start + duration)
      end
    end

    # The most of these times in any window (t - width, t], to a microsecond (epoch seconds as floats are exact
    # to about a quarter of one). times: sorted.
    def most_in_window(times, width)
      from = 0
      times.each_index.map do |i|
        from += 1 while times[from] <= times[i] - width + 1e-6
        i - from + 1
      end.max || 0
    end

    # Thread-seconds idle while jobs of `waiting` were enqueued and not started (at most one thread per waiting
    # job), and the longest stretch with such an idle thread: `records` are all the jobs (busy threads).
    def idle_while_waiting(records, waiting, threads)
      events = records.flat_map { |r| [[r["started_at"], :busy, 1], [r["finished_at"], :busy, -1]] } +
               waiting.flat_map { |r| [[r["enqueued_at"], :waiting, 1], [r["started_at"], :waiting, -1]] }
      count = { busy: 0, waiting: 0 }
      idle = longest = stretch = 0.0
      events.sort_by(&:first).each_cons(2) do |(at, kind, delta), (upto, _, _)|
        count[kind] += delta
        free = [threads - count[:busy], count[:waiting]].min.clamp(0, threads)
        stretch = free.positive? ? stretch + (upto - at) : 0.0
        idle += free * (upto - at)
        longest = [longest, stretch].max
      end
      [idle, longest]
    end

    # First enqueue to last finish; nil for no records.
    def span(records)
      return nil if records.empty?

      records.map { |r| r["finished_at"] }.max - records.map { |r| r["enqueued_at"] }.min
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

    # Time a thread spends between one job's finish and its next job's start while some job waits (enqueued,
    # not started): what fetching, acknowledging and recording cost per job. records: hashes with "thread",
    # "enqueued_at", "started_at", "finished_at".
    def busy_gaps(records)
      enqueues = records.map { |r| r["enqueued_at"] }.sort
      starts = records.map { |r| r["started_at"] }.sort
      waiting = ->(at) { count_upto(enqueues, at) > count_upto(starts, at) }
      records.group_by { |r| r["thread"] }.values.flat_map { |rs| thread_gaps(rs, waiting) }
    end

    def thread_gaps(records, waiting)
      records.sort_by { |r| r["started_at"] }.each_cons(2).filter_map do |done, nxt|
        nxt["started_at"] - done["finished_at"] if waiting.call(done["finished_at"])
      end
    end

    # For each of `selected` (some of `records`, all jobs of a run on `threads` threads): how long after a thread
    # was first free since its enqueue it started. A thread is free at the enqueue when fewer than `threads` jobs
    # ran then, else at the first finish after it. What the scheduler and the fetch add to a job's wait once
    # a thread could take it; the rest of the wait is the threads being busy. A job another waiting job took
    # that thread from (a fair order) counts that too.
    def past_free_thread(records, selected, threads)
      starts = records.map { |r| r["started_at"] }.sort
      finishes = records.map { |r| r["finished_at"] }.sort
      selected.map do |r|
        at = r["enqueued_at"]
        running = count_upto(starts, at) - count_upto(finishes, at)
        free = running < threads ? at : finishes[count_upto(finishes, at)] || at
        [r["started_at"] - free, 0.0].max
      end
    end

    # Values <= x in a sorted list.
    def count_upto(sorted, value)
      sorted.bsearch_index { |v| v > value } || sorted.size
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
