# frozen_string_literal: true

module Demo
  # bin/demo's chart (gnuplot): one panel per mode, each job's wait by its enqueue time, as measured and as
  # in the simulated ideal schedule of the same run (Report.ideal; uncapped, also for the capped modes).
  # Writes wait.dat, wait.gp, wait.png and wait.svg to the output directory.
  module Chart
    # Waits are drawn on a log scale: shorter ones (an idle thread, 0 in the simulation) at this floor.
    FLOOR = 1e-3
    TITLE = "Wait before a job starts, by enqueue time: measured, and the ideal " \
            "(start-time fair queueing simulated on the same jobs and threads)"
    # Tenant class, source, gnuplot style.
    SERIES = [
      ["greedy", :measured, "with points pt 1 ps 0.4 lc rgb '#9a9a9a'"],
      ["greedy", :ideal, "with points pt 7 ps 0.2 lc rgb '#1f4e9a'"],
      ["small", :measured, "with points pt 7 ps 0.9 lc rgb '#d62728'"],
      ["small", :ideal, "with points pt 6 ps 1.3 lw 1.5 lc rgb '#2ca02c'"]
    ].freeze
    SOURCE_TITLES = { measured: "", ideal: ", ideal" }.freeze

    module_function

    # runs: { mode => [measured records, ideal records] }; klass: tenant -> "greedy" or "small"; titles: panel
    # titles by mode (default: the mode's name).
    def draw(runs, out, klass, titles = {})
      unless system("command -v gnuplot >/dev/null 2>&1")
        puts "chart: gnuplot not found (bin/setup installs gnuplot-nox); no chart written"
        return
      end
      data = File.join(out, "wait.dat")
      png = File.join(out, "wait.png")
      svg = File.join(out, "wait.svg")
      panels, max_x, max_y = write_data(runs, data, klass, titles)
      File.write(File.join(out, "wait.gp"), script(data, panels, [max_x, max_y], png, svg))
      if system("gnuplot", File.join(out, "wait.gp"))
        puts "chart: #{png}", "chart: #{svg}"
      else
        puts "chart: gnuplot failed; script and data left in #{out}"
      end
    end

    # One gnuplot data block per (mode, series): x = enqueue time since the mode's first enqueue, y = wait.
    # Returns [panel title, [[block index, style, title], ...]] per mode, and the largest x and y.
    def write_data(runs, data, klass, titles)
      blocks = []
      panels = runs.map do |mode, (measured, ideal)|
        [titles.fetch(mode, mode), panel(measured, ideal, klass, blocks)]
      end
      File.open(data, "w") do |f|
        blocks.each { |block| f.puts(block.map { |x, y| format("%<x>.4f %<y>.5f", x: x, y: y) }, "", "") }
      end
      all = blocks.flatten(1)
      [panels, [FLOOR, *all.map(&:first)].max, [FLOOR, *all.map(&:last)].max]
    end

    # Appends one mode's series to blocks; returns their [block index, style, title].
    def panel(measured, ideal, klass, blocks)
      start = measured.map { |r| r["enqueued_at"] }.min
      runs = { measured: measured, ideal: ideal }
      SERIES.filter_map do |tenants, source, style|
        records = runs.fetch(source).select { |r| klass.call(r["tenant"]) == tenants }
        next if records.empty?

        blocks << records.map { |r| [r["enqueued_at"] - start, [r["started_at"] - r["enqueued_at"], FLOOR].max] }
        [blocks.size - 1, style, "#{tenants}#{SOURCE_TITLES.fetch(source)}"]
      end
    end

    # The same panels drawn twice: a multiplot cannot be replotted on another terminal.
    def script(data, panels, extent, png, svg)
      <<~GP
        #{terminal} size #{size(panels.size)}
        set output "#{png}"
        #{multiplot(data, panels, *extent)}
        set terminal svg size #{size(panels.size)}
        set output "#{svg}"
        #{multiplot(data, panels, *extent)}
      GP
    end

    def terminal
      terminals = IO.popen(["gnuplot", "-e", "set terminal"], err: %i[child out], &:read)
      terminals.match?(/^\s*pngcairo\s/) ? "set terminal pngcairo" : "set terminal png"
    end

    # Two panels a row; a row 450 px high (one alone 480).
    def size(count)
      rows = (count + 1) / 2
      "1200,#{rows > 1 ? 450 * rows : 480}"
    end

    def multiplot(data, panels, max_x, max_y)
      rows = (panels.size + 1) / 2
      cols = panels.size > 1 ? 2 : 1
      plots = panels.map do |panel_title, series|
        lines = series.map { |i, style, title| "'#{data}' index #{i} #{style} title '#{title}'" }
        "set title '#{panel_title}'\nplot #{lines.join(", \\\n     ")}"
      end
      <<~GP
        set termoption noenhanced
        set multiplot layout #{rows},#{cols} title "#{TITLE}"
        set xlabel "enqueue time (s since the mode's first enqueue)"
        set ylabel "wait (s, log scale; < #{(FLOOR * 1000).round} ms drawn at #{(FLOOR * 1000).round} ms)"
        set logscale y
        set xrange [0:#{format("%.3f", max_x * 1.02)}]
        set yrange [#{FLOOR * 0.8}:#{format("%.3f", max_y * 2)}]
        set grid
        set key below horizontal
        #{plots.join("\n")}
        unset multiplot
      GP
    end
  end
end
