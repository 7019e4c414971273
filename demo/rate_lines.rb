# frozen_string_literal: true

require_relative "records"

module Demo
  # bin/demo's lines about a rate-capped tenant (the rate-capped scenario): its starts, as recorded in the job (a
  # little after the fetch script decided them), against its limit, and the threads left idle while other tenants'
  # jobs waited, in a mode and against plain's (which holds nothing back: its idle time is the fetch between jobs).
  module RateLines
    extend Records

    # Idle thread time while uncapped jobs wait: at most plain's share plus this.
    IDLE_SLACK = 0.01
    THROUGHPUT_TARGET = (0.95..1.05)

    module_function

    def header(modes, limit)
      return [] if modes.empty?

      ["ideal of #{modes.join(", ")}: the same, the capped tenant skipped while its next start would exceed #{limit} " \
       "in a 1 s window (the scripts' bucketed window, simulated), back at its instant"]
    end

    def summary(mode, records, ideal, limit, threads)
      figures = rate_figures(records, limit)
      best = rate_figures(ideal, limit)
      capped = if figures
                 format("%-18s capped: %d starts, most in any 1 s window %d (ideal %s), %s starts/s after its first " \
                        "%d (limit %d)", mode, figures[:count], figures[:most], best ? best[:most] : "-",
                        figures[:rate] ? format("%.2f", figures[:rate]) : "-", limit, limit)
               else
                 format("%-18s capped: fewer than 2 starts", mode)
               end
      idle, longest, total = idle_figures(records, threads)
      [capped, format("%-18s idle threads while uncapped jobs waited: %.3f thread-s of %.1f (%.2f%%), longest " \
                      "stretch %.1fms", mode, idle, total, 100 * idle / total, 1000 * longest)]
    end

    # The targets: at most `limit` in any 1 s window, 95-105% of it while backlogged, no more idle than `base`
    # (fair_fetch's records, else plain's: the same fetch with nothing held back).
    def checks(records, limit, threads, base)
      figures = rate_figures(records, limit)
      return ["capped tenant - (fewer than 2 starts)"] unless figures

      most = figures[:most]
      tightest = if figures[:tightest]
                   format(", the tightest %<n>d span %<s>.3fs", n: limit + 1,
                                                                s: figures[:tightest])
                 else
                   ""
                 end
      out = ["capped most in any 1 s window #{most} (<= #{limit}: #{most <= limit ? "met" : "missed"}; start " \
             "times recorded in the job, a scheduling jitter after the fetch script's decision#{tightest})"]
      if figures[:rate]
        share = figures[:rate] / limit
        verdict = THROUGHPUT_TARGET.cover?(share) ? "met" : "missed"
        out << format("capped %<rate>.2f starts/s = %<pct>.1f%% of its limit (95-105%%: %<verdict>s)",
                      rate: figures[:rate], pct: 100 * share, verdict: verdict)
      end
      out << idle_check(records, threads, base)
    end

    def idle_check(records, threads, base)
      idle, longest, total = idle_figures(records, threads)
      text = format("idle while uncapped jobs waited %<pct>.2f%% of thread time, longest %<ms>.1fms",
                    pct: 100 * idle / total, ms: 1000 * longest)
      return "#{text} (no plain or fair_fetch run to compare)" unless base

      name, records = base
      b_idle, b_longest, b_total = idle_figures(records, threads)
      verdict = idle / total <= (b_idle / b_total) + IDLE_SLACK ? "met" : "missed"
      format("%<text>s (%<name>s %<pct>.2f%%, longest %<ms>.1fms: the fetch between jobs; <= %<name>s + 1 point: " \
             "%<verdict>s)", text: text, name: name, pct: 100 * b_idle / b_total, ms: 1000 * b_longest,
                             verdict: verdict)
    end
  end
end
