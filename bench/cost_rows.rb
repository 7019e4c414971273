# frozen_string_literal: true

# bin/bench's summary rows of issue 23 item 6 (BenchSummary prints them): per job, a :time queue (bench/fair_time.rb),
# rate-capped jobs (bench/rate_cost.rb) and jobs of four concurrency scopes (bench/scope_cost.rb, issue 32) against
# jobs without, one round trip, and flat from the fewest tenants to the most (commands +-1, server us <= 1.5x); and
# others' jobs as tenants are held in `rated`.
module CostRows
  module_function

  def rows(figures)
    cost_rows(":time queue vs :jobs", figures[:time], "jobs", "time") +
      cost_rows("rate-capped vs uncapped", figures[:rate], :uncapped, :capped) + [held_row(figures[:rate])] +
      cost_rows("4 concurrency scopes vs none", figures[:scopes], 0, 4)
  end

  # { tenants => cost } of one row (or mode).
  def of(cells, row) = cells.select { |(r, _), _| r == row }.transform_keys(&:last)

  # Per tenant count: base -> row's commands and server us, one round trip; then flat from fewest to most.
  def cost_rows(name, cells, base_row, row)
    return [["#{name}: 1 round trip per job, flat in tenants", nil, nil]] unless cells

    base = of(cells, base_row)
    runs = of(cells, row)
    per = runs.map do |tenants, c|
      ["#{name}, #{tenants} tenants: 1 round trip per job",
       format("cmds %<bc>.1f->%<c>.1f, server us %<bu>.1f->%<u>.1f, %<t>.2f trips", bc: base[tenants][:commands],
                                                                                    c: c[:commands], t: c[:round_trips],
                                                                                    bu: base[tenants][:server_us],
                                                                                    u: c[:server_us]),
       c[:round_trips] <= 1.0]
    end
    low, high = runs.keys.minmax
    per << ["#{name}: flat #{low}..#{high} tenants (cmds +-1, server us <= 1.5x)",
            format("cmds %<c1>.1f..%<c2>.1f, server us %<u1>.1f..%<u2>.1f", c1: runs[low][:commands],
                                                                            c2: runs[high][:commands],
                                                                            u1: runs[low][:server_us],
                                                                            u2: runs[high][:server_us]),
            flat?(runs[low], runs[high])]
  end

  def flat?(low, high) = (high[:commands] - low[:commands]).abs <= 1 && high[:server_us] <= 1.5 * low[:server_us]

  def held_row(cells)
    held = cells && of(cells, :held)
    return ["others' jobs with tenants held in rated: flat", nil, nil] if held.nil? || held.empty?

    fewest, most = held.keys.minmax
    ["others' jobs with #{fewest}..#{most} tenants held in rated: flat (cmds +-1, us <= 1.5x)",
     format("%<c1>.1f..%<c2>.1f cmds, %<u1>.1f..%<u2>.1f us", c1: held[fewest][:commands], c2: held[most][:commands],
                                                              u1: held[fewest][:server_us], u2: held[most][:server_us]),
     flat?(held[fewest], held[most])]
  end
end
