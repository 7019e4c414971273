# frozen_string_literal: true

module Demo
  # bin/demo's rate chart (gnuplot), in the rate-capped scenario: the capped tenant's starts in each second since
  # the mode's first enqueue, measured and in the simulated ideal, per mode, against its limit. Writes rate.dat,
  # rate.gp, rate.png and rate.svg to the output directory.
  module RateChart
    module_function

    # Measured in a rate mode, its ideal, measured in the other modes.
    STYLES = { measured: "with boxes fs solid 0.5 lc rgb '#1f4e9a'", ideal: "with points pt 7 ps 1.2 lc rgb '#2ca02c'",
               other: "with impulses lw 3" }.freeze

    # runs: { mode => [measured records, ideal records] }; rated: the modes whose tenant was capped.
    def draw(runs, out, tenant, limit, rated)
      return unless system("command -v gnuplot >/dev/null 2>&1")

      data = File.join(out, "rate.dat")
      series = write_data(runs, tenant, data, rated)
      png = File.join(out, "rate.png")
      svg = File.join(out, "rate.svg")
      File.write(File.join(out, "rate.gp"), script(data, series, limit, png, svg))
      puts(system("gnuplot", File.join(out, "rate.gp")) ? ["chart: #{png}", "chart: #{svg}"] : "chart: gnuplot failed")
    end

    # One block per series (a rate mode: measured and ideal; another: measured): the middle of a second, starts
    # in it. Returns [[block index, style, title], ...].
    def write_data(runs, tenant, data, rated)
      blocks = []
      titles = runs.flat_map do |mode, (measured, ideal)|
        start = measured.map { |r| r["enqueued_at"] }.min
        series(rated.include?(mode), measured, ideal).map do |kind, records|
          blocks << per_second(offsets(records, tenant, start))
          [blocks.size - 1, STYLES.fetch(kind), kind == :ideal ? "#{mode}, ideal" : mode]
        end
      end
      File.open(data, "w") { |f| blocks.each { |b| f.puts(b.map { |x, y| "#{x} #{y}" }, "", "") } }
      titles
    end

    def offsets(records, tenant, start)
      records.filter_map { |r| r["started_at"] - start if r["tenant"] == tenant }
    end

    def series(rated, measured, ideal) = rated ? { measured: measured, ideal: ideal } : { other: measured }

    # [second + 0.5, starts in [second, second + 1)], from 0 to the last.
    def per_second(offsets)
      counts = offsets.map(&:floor).tally
      (0..(counts.keys.max || 0)).map { |s| [s + 0.5, counts.fetch(s, 0)] }
    end

    def script(data, series, limit, png, svg)
      plot = series.map { |i, style, title| "'#{data}' index #{i} using 1:2 #{style} title '#{title}'" }
      body = <<~GP
        set termoption noenhanced
        set title "The capped tenant's starts per second (limit #{limit} in any 1 s window)"
        set xlabel "s since the mode's first enqueue"
        set ylabel "starts in the second"
        set xrange [0:*]
        set yrange [0:*]
        set boxwidth 0.9
        set grid
        set key below horizontal
        plot #{limit} with lines dt 2 lw 2 lc rgb '#d62728' title 'limit', #{plot.join(", ")}
      GP
      "set terminal png size 1000,480\nset output \"#{png}\"\n#{body}" \
        "set terminal svg size 1000,480\nset output \"#{svg}\"\nreplot\n"
    end
  end
end
