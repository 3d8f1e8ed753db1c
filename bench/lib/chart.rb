# The chart of a benchmark run, drawn with gnuplot (Debian package gnuplot-nox): for every timed
# benchmark, the ratio other GC / baseline GC of wall time and of peak RSS, as bars at the median
# of the per-pair ratios with whiskers from their min to their max, and a dashed line at 1.0.
# Writes BASE.svg and BASE.png; without gnuplot it says so and draws nothing.
require "open3"

module Chart
  COLORS = %w[#4472c4 #ed7d31 #70ad47 #a5a5a5 #7030a0 #c00000].freeze
  GAP = 1.5

  module_function

  # => the files written (possibly none)
  def draw(results, gcs, baseline, meta, base_name)
    gnuplot = ENV.fetch("PATH", "").split(":").map { |d| File.join(d, "gnuplot") }.find { |f| File.executable?(f) }
    unless gnuplot
      warn "bench/run.rb: no chart: gnuplot is not installed (apt-get install gnuplot-nox, or bench/setup.sh)"
      return []
    end
    others = gcs - [baseline]
    rows = results.select { |r| r["timing"] && others.any? { |o| r.dig("ratios", o, "wall_s") } }
    if others.empty? || rows.empty?
      warn "bench/run.rb: no chart: no benchmark has a ratio to draw (need two GCs and successful runs)"
      return []
    end

    series = others.flat_map { |o| [[o, "wall_s", "wall time"], [o, "peak_rss_kb", "peak RSS"]] }
    data = "#{base_name}.chart.dat"
    File.open(data, "w") do |f|
      f.puts "# benchmark, then per series: median min max (ratio to #{baseline})"
      rows.each do |r|
        cols = series.flat_map do |o, field, _|
          s = r.dig("ratios", o, field)
          s ? [s["median"], s["min"], s["max"]] : %w[NaN NaN NaN]
        end
        f.puts ([%("#{r["name"]}")] + cols.map { |v| v.is_a?(String) ? v : format("%.4f", v) }).join(" ")
      end
    end

    files = []
    [["svg", "svg size 1400,640 dynamic enhanced font 'Sans,12' background '#ffffff'"],
     ["png", "pngcairo size 1400,640 enhanced font 'Sans,11' background '#ffffff'"]].each do |ext, terminal|
      out = "#{base_name}.#{ext}"
      script = gnuplot_script(terminal, out, data, series, rows.size, others, baseline, meta)
      _, err, status = Open3.capture3(gnuplot, stdin_data: script)
      if status.success? && File.size?(out)
        files << out
      else
        warn "bench/run.rb: gnuplot could not draw #{out}: #{err.lines.last(3).join.strip}"
      end
    end
    File.delete(data)
    files
  end

  def gnuplot_script(terminal, out, data, series, nrows, others, baseline, meta)
    n = series.size
    width = 1.0 / (n + GAP) # gnuplot's clustered-histogram bar width
    who = others.map { |o| "#{o} / #{baseline}" }.join(", ")
    plots = series.each_with_index.map do |(o, _, label), k|
      c = 2 + 3 * k
      title = others.size > 1 ? "#{label} (#{o})" : label
      %(#{k.zero? ? "'#{data}'" : "''"} using #{c}:#{c + 1}:#{c + 2}#{k.zero? ? ":xtic(1)" : ""} title "#{title}" lc rgb "#{COLORS[k % COLORS.size]}")
    end
    labels = series.each_index.map do |k|
      c = 2 + 3 * k
      x = (k - (n - 1) / 2.0) * width
      %('' using ($0#{format("%+.3f", x)}):(column(#{c + 2})):(sprintf("%.2f", column(#{c}))) with labels boxed offset 0,0.7 font ",8" notitle)
    end
    <<~GNUPLOT
      set terminal #{terminal}
      set output '#{out}'
      set title "#{who}: wall time and peak RSS per benchmark\\n{/*0.8 bar = median of the per-pair ratios (run j vs run j), whisker = min to max; below the dashed line (1.0) #{others.join("/")} is better}\\n{/*0.7 #{meta["mode"]} mode, #{meta["reps"]} reps, commit #{meta["git_commit"]}, #{meta["date"]}, #{meta.dig("machine", "nproc")} CPUs}"
      set style data histogram
      set style histogram errorbars gap #{GAP} lw 1.3
      set style fill solid 0.85 border rgb "#333333"
      set boxwidth 0.95 relative
      set ylabel "ratio #{who}"
      set yrange [0:*]
      set xrange [-0.6:#{nrows - 0.4}]
      set xtics rotate by -30 scale 0 nomirror
      set ytics nomirror
      set grid ytics lc rgb "#dddddd"
      set key outside right top vertical
      set bmargin 6
      set arrow from graph 0, first 1 to graph 1, first 1 nohead lc rgb "#000000" lw 1.5 dt 2 back
      set style textbox opaque fillcolor rgb "#ffffff" noborder margins 1,1
      plot #{(plots + labels).join(", \\\n     ")}
    GNUPLOT
  end
end
