# frozen_string_literal: true

module Demo
  # bin/demo's rate chart (gnuplot), in the rate-capped scenario: the capped tenant's starts in each second since
  # the mode's first enqueue, measured and in the simulated ideal, per mode, against its limit. Writes rate.dat,
  # rate.gp, rate.png and rate.svg to the output directory.
  module RateChart
    module_function

    # runs: { mode => [measured records, ideal records] }.
    def draw(runs, out, tenant, limit)
      return unless system("command -v gnuplot >/dev/null 2>&1")

      data = File.join(out, "rate.dat")
      series = write_data(runs, tenant, data)
      png = File.join(out, "rate.png")
      svg = File.join(out, "rate.svg")
      File.write(File.join(out, "rate.gp"), script(data, series, limit, png, svg))
      puts(system("gnuplot", File.join(out, "rate.gp")) ? ["chart: #{png}", "chart: #{svg}"] : "chart: gnuplot failed")
    end

    # One block per (mode, measured or ideal): second, starts in it. Returns [[block index, title], ...].
    def write_data(runs, tenant, data)
      blocks = []
      titles = runs.flat_map do |mode, (measured, ideal)|
        start = measured.map { |r| r["enqueued_at"] }.min
        { "measured" => measured, "ideal" => ideal }.map do |source, records|
          blocks << per_second(offsets(records, tenant, start))
          [blocks.size - 1, "#{mode}, #{source}"]
        end
      end
      File.open(data, "w") { |f| blocks.each { |b| f.puts(b.map { |x, y| "#{x} #{y}" }, "", "") } }
      titles
    end

    def offsets(records, tenant, start)
      records.filter_map { |r| r["started_at"] - start if r["tenant"] == tenant }
    end

    # [second, starts in [second, second + 1)], from 0 to the last, and the last again at its end (for steps).
    def per_second(offsets)
      counts = offsets.map(&:floor).tally
      last = counts.keys.max || 0
      (0..last).map { |s| [s, counts.fetch(s, 0)] } << [last + 1, counts.fetch(last, 0)]
    end

    def script(data, series, limit, png, svg)
      plot = series.map { |i, title| "'#{data}' index #{i} using 1:2 with steps lw 2 title '#{title}'" }
      body = <<~GP
        set termoption noenhanced
        set title "The capped tenant's starts per second (limit #{limit} in any 1 s window)"
        set xlabel "s since the mode's first enqueue"
        set ylabel "starts in the second (clipped at #{4 * limit})"
        set yrange [0:#{4 * limit}]
        set grid
        set key below horizontal
        plot #{limit} with lines dt 2 lw 2 lc rgb '#d62728' title 'limit', #{plot.join(", ")}
      GP
      "set terminal png size 1000,480\nset output \"#{png}\"\n#{body}" \
        "set terminal svg size 1000,480\nset output \"#{svg}\"\nreplot\n"
    end
  end
end
