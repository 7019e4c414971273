# frozen_string_literal: true

module Demo
  # What bin/demo's report reads from a run's job records (hashes with "tenant", "enqueued_at", "started_at",
  # "finished_at"): tenant classes, waits, the greedy tenants' total time, the most jobs a tenant ran at once.
  module Records
    GREEDY_PAIR = %w[greedy-a greedy-b].freeze

    module_function

    def tenant_class(tenant) = tenant.start_with?("greedy") ? "greedy" : "small"
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

    # [{ tenant => jobs/s }, Jain's index] of the greedy pair while both are backlogged; [nil, nil] if never.
    def jain(records)
      throughputs = Report.backlogged_throughputs(records, GREEDY_PAIR)
      throughputs ? [throughputs, Report.jain(throughputs.values)] : [nil, nil]
    end
  end
end
