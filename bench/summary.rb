# frozen_string_literal: true

require_relative "cost_rows"

# bin/bench's closing table: each target of issue 22 against the figure this run measured, met or missed computed
# from the figures. `figures` is filled by bench/fair.rb as the parts run; a part that did not run shows "not run".
module BenchSummary
  module_function

  def figures = (@figures ||= {})

  def ratio(cell, key) = cell[:fair][key] / cell[:basic][key]

  def drain(bytes, tenants) = figures.dig(:drain, [bytes, tenants])

  # [target, figure text, met?] rows.
  def rows
    push_rows + drain_rows + server_rows + [capped_row, flat_row, housekeeping_row, longest_row, floor_row] +
      CostRows.rows(figures)
  end

  # Not a target: what the least fair, reliable fetch in a Redis function costs against BRPOP (bench/fetch_floor.rb).
  def floor_row
    rows = figures[:floor] or return ["floor: a 5-command fair turn in a function vs BRPOP", nil, nil]
    turn = rows.fetch(FetchFloor::FAIR_TURN)
    base = rows.fetch(FetchFloor::BASE)
    ["floor: a 5-command fair turn in a function vs BRPOP (bench/fetch_floor.rb)",
     format("CPU %.2fx, server us %.1fx, calls/s %.2fx", turn[:cpu_us] / base[:cpu_us],
            turn[:server_us] / base[:server_us], turn[:rate] / base[:rate]), :floor]
  end

  def push_rows
    push = figures[:push] or return [["push: fair queue >= 0.95x plain pushes/s", nil, nil]]
    trips = push[:sent_fair].values.sum
    [["push: fair queue >= 0.95x plain pushes/s", format("%.2fx (%.0f vs %.0f)", push[:fair] / push[:plain],
                                                         push[:fair], push[:plain]),
      push[:fair] / push[:plain] >= 0.95],
     ["push: one round trip in total", format("%.2f commands sent per push", trips), trips <= 1.0]]
  end

  def drain_rows
    DrainBench::TENANT_COUNTS.flat_map do |tenants|
      cell = drain(1_000, tenants)
      next [["drain 1 KB, #{tenants} tenants", nil, nil]] unless cell

      [["drain 1 KB, #{tenants} tenants: jobs/s >= 1.0x BasicFetch (issue 31)",
        format("%.2fx (%.0f vs %.0f; threads a call mean %.1f, p95 %d; sidekiq CPU/job %.2fx, switches/job %.1f vs " \
               "%.1f)%s", ratio(cell, :rate), cell[:fair][:rate], cell[:basic][:rate], cell[:fair][:batch_mean],
               cell[:fair][:batch_p95], ratio(cell, :sidekiq_cpu_us), cell[:fair][:switches], cell[:basic][:switches],
               reliable_note(cell)),
        ratio(cell, :rate) >= 1.0],
       ["drain 1 KB, #{tenants} tenants: Redis CPU/job <= 1.2x (issue 31)",
        format("%.2fx (%.1f vs %.1f us)", ratio(cell, :cpu_us), cell[:fair][:cpu_us], cell[:basic][:cpu_us]),
        ratio(cell, :cpu_us) <= 1.2]]
    end
  end

  # Where the drain ran the least a reliable fetch does (bench/reliable_fetch.rb), its pace beside BasicFetch's.
  def reliable_note(cell)
    return "" unless cell[:reliable]

    format("; a minimal reliable fetch %.2fx", cell[:reliable][:rate] / cell[:basic][:rate])
  end

  def server_rows
    [[1_000, 2], [200_000, 3]].map do |bytes, limit| # issue 31 item 3 (issue 22 had 4x at 1 KB)
      cells = DrainBench::TENANT_COUNTS.filter_map { |tenants| drain(bytes, tenants) }
      next ["server us/job (push, fetch, ack) at #{bytes / 1000} KB <= #{limit}x", nil, nil] if cells.empty?

      worst = cells.max_by { |cell| ratio(cell, :server_us) }
      ["server us/job (push, fetch, ack) at #{bytes / 1000} KB <= #{limit}x",
       format("%.1fx worst cell (%.1f vs %.1f us)", ratio(worst, :server_us), worst[:fair][:server_us],
              worst[:basic][:server_us]), ratio(worst, :server_us) <= limit]
    end
  end

  def capped_row
    extra = figures[:capped_extra] or return ["capped tenant's job <= +3 Redis commands", nil, nil]
    ["capped tenant's job <= +3 Redis commands",
     format("%+.1f (static), %+.1f (elastic) per capped job", extra[:static], extra[:elastic]),
     extra.values.max <= 3]
  end

  def flat_row
    cells = figures[:fetch] or return ["fetch work flat in tenants and backlog", nil, nil]
    commands = cells.values.map { |c| c[:commands] }
    server = cells.values.map { |c| c[:server_us] }
    spread = commands.max - commands.min
    growth = server.max / server.min
    tenants, waiting = cells.keys.transpose.map(&:minmax)
    ["fetch work flat #{tenants.join("..")} tenants, #{waiting.join("..")} jobs (cmds +-1, server us <= 1.5x)",
     format("commands %.1f..%.1f, server us %.1f..%.1f (%.2fx)", commands.min, commands.max, server.min, server.max,
            growth), spread <= 1 && growth <= 1.5]
  end

  def housekeeping_row
    fleet = figures[:housekeeping] or return ["housekeeping O(processes) per interval", nil, nil]
    small, large = fleet.minmax_by { |count, _| count }
    per_small = small[1][:commands] / small[0]
    per_large = large[1][:commands] / large[0]
    ["housekeeping O(processes) per interval (per process at #{large[0]} <= 1.5x at #{small[0]})",
     format("%.0f cmds at %d, %.0f at %d (%.1f vs %.1f per process)", small[1][:commands], small[0],
            large[1][:commands], large[0], per_small, per_large), per_large <= 1.5 * per_small]
  end

  def longest_row
    results = figures[:longest] or return ["longest script <= 5 ms", nil, nil]
    name, worst = results.reject { |n, _| n.start_with?("plain") }.max_by { |_, r| r[:longest_us] }
    ["longest command <= 5 ms (#{LongestBench::JOBS} jobs, #{LongestBench::TENANTS} tenants)",
     format("%.1f ms (%s: %s)", worst[:longest_us] / 1000.0, name, worst[:command]), worst[:longest_us] <= 5_000]
  end

  def print
    puts
    puts "summary: issue 22's targets (and issue 23's costs), ratios to stock Sidekiq measured in this run"
    puts format("| %-86s | %-58s | %-6s |", "target", "this run", "")
    puts "|#{"-" * 88}|#{"-" * 60}|#{"-" * 8}|"
    rows.each do |target, figure, met|
      verdict = if figure.nil? then ""
                elsif met == :floor then "floor"
                elsif met then "met"
                else
                  "missed"
                end
      puts format("| %-86s | %-58s | %-6s |", target, figure || "not run", verdict)
    end
  end
end
