# frozen_string_literal: true

require_relative "records"
require_relative "report"
require_relative "shared_sweep"

module Demo
  # bin/demo's lines about the shared-api scenario: what the partner API saw (the most jobs in flight at once, the
  # most starts in any 1 s window, per tenant the most in flight), how fully the shared limits were used (in flight:
  # while a job waited whose tenant was under its own limit, so only the shared ones could hold it; starts a
  # second: while the greedy tenant had jobs waiting), and each tenant's starts against its fair share while it had
  # a job waiting (SharedSweep). From the job records: a job records its start a little after the fetch took its
  # slots and its finish a little before the acknowledgement gives them back, so the API's slots are held a little
  # longer than the records show. limits: { tenant:, shared:, rate: } (rate: starts in any 1 s).
  module SharedLines
    extend Records

    USE_TARGET = 0.95

    module_function

    def header(modes, limits, threads)
      return [] if modes.empty?

      ["ideal of #{modes.join(", ")}: the same, each tenant at most #{limits[:tenant]} in flight, all together at " \
       "most #{limits[:shared]} in flight and #{limits[:rate]} starts in any 1 s (an exact sliding window: the " \
       "scripts' buckets allow at least 20/21 of it), on #{threads} threads, a tenant at its limit back at " \
       "max(its tag, V): simulated in Ruby (demo/shared_ideal.rb; the extension's simulator has no such limits)"]
    end

    def summary(mode, records, ideal, limits, shared)
      f = figures(records, limits)
      out = [format("%<mode>-18s API: at most %<peak>d in flight at once (limit %<shared>d), most starts in any 1 s " \
                    "window %<most>d (limit %<rate>d), at most %<tenant_peak>d in flight per tenant (limit " \
                    "%<tenant>d); mean job %<ms>.1fms", mode: mode, **f.slice(:peak, :most, :tenant_peak),
                                                        **limits, ms: 1000 * f[:mean_job])]
      return out unless shared

      out << use_line(mode, f, limits)
      out << format("%<mode>-18s starts against the fair share (each start split evenly among the tenants with a " \
                    "job waiting): %<measured>s; ideal %<ideal>s", mode: mode, measured: share_text(f),
                                                                   ideal: share_text(figures(ideal, limits)))
    end

    def use_line(mode, fig, limits)
      return format("%-18s no job waited for the shared limits", mode) unless fig[:waited].positive?

      format("%<mode>-18s while a job waited whose tenant was under its limit (%<waited>.1fs): %<shared>d in " \
             "flight %<at_limit>.1f%% of that time, mean %<mean>.2f in flight (%<use>.1f%% of %<shared>d); while " \
             "the greedy tenant had jobs waiting (%<span>.1fs): %<start_rate>.2f starts/s (%<rate_use>.1f%% of " \
             "%<rate>d/s); the binding limit: %<binding>s", mode: mode, waited: fig[:waited], **limits,
                                                            at_limit: 100 * fig[:at_limit], mean: fig[:mean_in_flight],
                                                            use: 100 * fig[:in_flight_use], span: fig[:span],
                                                            start_rate: fig[:start_rate],
                                                            rate_use: 100 * fig[:rate_use],
                                                            binding: binding_text(fig, limits))
    end

    def binding_text(fig, limits)
      values = { **limits, ms: 1000 * fig[:mean_job], allows: limits[:shared] / fig[:mean_job] }
      if fig[:binding] == :rate
        format("%<rate>d starts/s (%<shared>d in flight allow %<shared>d / %<ms>.0fms = %<allows>.0f/s)", values)
      else
        format("%<shared>d in flight (%<shared>d / %<ms>.0fms = %<allows>.1f starts/s, under %<rate>d/s)", values)
      end
    end

    def share_text(fig)
      small = fig[:small_ratios]
      spread = if small.empty? then ""
               else
                 format(" (per tenant %<min>.2fx .. %<max>.2fx, %<n>d tenants)", min: small.min, max: small.max,
                                                                                 n: small.size)
               end
      "greedy #{ratio(fig[:greedy_ratio])}, small tenants together #{ratio(fig[:small_ratio])}#{spread}"
    end

    def ratio(value) = value ? format("%.2fx", value) : "-"
    def verdict(met) = met ? "met" : "missed"

    # The targets line's checks: the limits never exceeded, the binding limit's use, the greedy tenant's share.
    def checks(records, limits)
      f = figures(records, limits)
      ["API at most #{f[:peak]} in flight (<= #{limits[:shared]}: #{verdict(f[:peak] <= limits[:shared])})",
       "API most starts in any 1 s window #{f[:most]} (<= #{limits[:rate]}: #{verdict(f[:most] <= limits[:rate])}; " \
       "start times recorded in the job#{tightest_text(f, limits)})",
       "per tenant at most #{f[:tenant_peak]} in flight (<= #{limits[:tenant]}: " \
       "#{verdict(f[:tenant_peak] <= limits[:tenant])})",
       use_check(f, limits), "greedy #{ratio(f[:greedy_ratio])} of its fair share of starts (no target)"]
    end

    def tightest_text(fig, limits)
      return "" unless fig[:tightest]

      format(", the tightest %<n>d starts span %<s>.3fs", n: limits[:rate] + 1, s: fig[:tightest])
    end

    def use_check(fig, limits)
      rate = fig[:binding] == :rate
      use = rate ? fig[:rate_use] : fig[:in_flight_use]
      format("use of the binding limit (%<which>s) while jobs waited %<pct>.1f%% (>= 95%%: %<verdict>s)",
             which: rate ? "#{limits[:rate]}/s" : "#{limits[:shared]} in flight", pct: 100 * use,
             verdict: verdict(use >= USE_TARGET))
    end

    def figures(records, limits)
      starts = records.map { |r| r["started_at"] }.sort
      mean_job = records.sum { |r| r["finished_at"] - r["started_at"] } / [records.size, 1].max
      { peak: Report.peak_concurrency(records.map { |r| [r["started_at"], r["finished_at"]] }),
        most: Report.most_in_window(starts, 1.0), tenant_peak: peak_running(records) || 0, mean_job: mean_job,
        tightest: tightest(starts, limits[:rate] + 1),
        binding: limits[:shared] / mean_job > limits[:rate] ? :rate : :in_flight,
        **sweep(records, limits), **pace(records, starts, limits) }
    end

    # The shortest span of `count` consecutive starts; nil if fewer.
    def tightest(starts, count) = starts.each_cons(count).map { |s| s.last - s.first }.min

    def sweep(records, limits)
      s = SharedSweep.run(records, limits[:tenant], limits[:shared])
      of = method(:tenant_class)
      { waited: s.waited, at_limit: s.at_limit, mean_in_flight: s.mean_in_flight,
        in_flight_use: s.mean_in_flight / limits[:shared], greedy_ratio: s.ratio(of, "greedy"),
        small_ratio: s.ratio(of, "small"), small_ratios: s.ratios(of, "small") }
    end

    # Starts a second from the first enqueue to the greedy tenant's last start (jobs waited all that time).
    def pace(records, starts, limits)
      greedy = of_class(records, "greedy")
      return { span: 0.0, start_rate: 0.0, rate_use: 0.0 } if greedy.empty?

      from = records.map { |r| r["enqueued_at"] }.min
      span = greedy.map { |r| r["started_at"] }.max - from
      rate = span.positive? ? starts.count { |at| at.between?(from, from + span) } / span : 0.0
      { span: span, start_rate: rate, rate_use: rate / limits[:rate] }
    end
  end
end
