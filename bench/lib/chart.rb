# The chart of a benchmark run, as SVG written by this file (no plotting program needed): one row
# per timed benchmark, and in it one horizontal bar per series (wall time and peak RSS of each
# configuration other than the baseline), for the ratio configuration / baseline.
#
# - The axis is logarithmic and centred on 1.0: a bar starts at 1.0 and ends at the median of the
#   per-pair ratios, leftwards when the configuration is better (0.5 is as far left as 2.0 is
#   right); the whisker spans the per-pair ratios' min to max.
# - The axis spans the data, but never more than CLIP either way (1/CLIP to CLIP): a ratio beyond
#   it is drawn to the edge, ends in an arrowhead, and its value is printed. So one extreme ratio
#   (a 37.7x) does not flatten the others.
# - Every bar has its own line, and its value label sits beyond the bar's (or whisker's) far end
#   in a margin kept for labels: labels never overlap each other, the bars or the names.
# Writes BASE.svg, and BASE.png when rsvg-convert (Debian package librsvg2-bin) is installed.
require "open3"

module Chart
  COLORS = %w[#4472c4 #ed7d31 #2e8b57 #8c8c8c #7030a0 #c00000].freeze
  CLIP = 2.5          # the axis spans at most 1/CLIP .. CLIP
  MIN_SPAN = 1.25     # and at least 1/MIN_SPAN .. MIN_SPAN
  WIDTH = 960
  NAME_W = 160        # column of benchmark names
  LABEL_PAD = 64      # margin each side of the plot, for the value labels only
  RIGHT_PAD = 16
  BAR_H = 12
  BAR_GAP = 3
  GROUP_GAP = 9
  FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
  LABEL_FONT_SIZE = 10
  TICKS = [0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 2.5,
           3.0, 4.0, 5.0, 7.0, 10.0].freeze

  module_function

  # The rows and series to draw: [rows, series], rows = [[name, [{median, min, max} or nil per
  # series]]], series = [[config, field, label]]. Timed benchmarks that have a ratio only.
  def data(results, gcs, baseline)
    others = gcs - [baseline]
    series = others.flat_map { |o| [[o, "wall_s", "wall time"], [o, "peak_rss_kb", "peak RSS"]] }
    rows = results.select { |r| r["timing"] && others.any? { |o| r.dig("ratios", o, "wall_s") } }
                  .map { |r| [r["name"], series.map { |o, field, _| r.dig("ratios", o, field) }] }
    [rows, series]
  end

  # => the files written (possibly none). base_name has no extension; formats: %w[svg png] or a
  # subset (png only if rsvg-convert is installed).
  def draw(results, gcs, baseline, meta, base_name, formats: %w[svg png])
    rows, series = data(results, gcs, baseline)
    if series.empty? || rows.empty?
      warn "bench: no chart: no benchmark has a ratio to draw (need two GCs and successful runs)"
      return []
    end
    svg_file = "#{base_name}.svg"
    File.write(svg_file, svg(rows, series, baseline, meta))
    files = []
    files << svg_file if formats.include?("svg")
    if formats.include?("png")
      rsvg = ENV.fetch("PATH", "").split(":").map { |d| File.join(d, "rsvg-convert") }.find { |f| File.executable?(f) }
      if rsvg
        png = "#{base_name}.png"
        _, err, status = Open3.capture3(rsvg, "-b", "white", "-o", png, svg_file)
        status.success? ? files << png : warn("bench: rsvg-convert could not draw #{png}: #{err.strip}")
      end
    end
    File.delete(svg_file) unless formats.include?("svg")
    files
  end

  # The axis: [lo, hi] in ratio units, symmetric around 1.0 in log scale.
  def domain(rows)
    values = rows.flat_map { |_, cells| cells.compact.flat_map { |c| [c["median"], c["min"], c["max"]] } }
                 .select { |v| v.is_a?(Numeric) && v.positive? && v.finite? }
    half = values.map { |v| Math.log(v).abs }.max.to_f * 1.04
    half = half.clamp(Math.log(MIN_SPAN), Math.log(CLIP))
    [Math.exp(-half), Math.exp(half)]
  end

  def ticks(lo, hi, x_of)
    picked = []
    TICKS.select { |t| t >= lo && t <= hi }.sort_by { |t| (Math.log(t)).abs }.each do |t|
      # nearest to 1.0 first; keep a tick only if its label has room
      picked << t if picked.all? { |p| (x_of.call(p) - x_of.call(t)).abs >= 34 }
    end
    picked.sort
  end

  def esc(s) = s.to_s.gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;").gsub('"', "&quot;")
  def f1(v) = format("%.1f", v)
  def value_label(v) = v >= 9.995 ? format("%.1f", v) : format("%.2f", v)

  def svg(rows, series, baseline, meta)
    others = series.map(&:first).uniq
    lo, hi = domain(rows)
    x0 = NAME_W + LABEL_PAD
    x1 = WIDTH - RIGHT_PAD - LABEL_PAD
    span = Math.log(hi) - Math.log(lo)
    x_of = ->(v) { x0 + (Math.log(v.clamp(lo, hi)) - Math.log(lo)) / span * (x1 - x0) }
    x_one = x_of.call(1.0)

    out = +"" # everything but the opening lines, which need the height
    who = others.map { |o| "#{o} / #{baseline}" }.join(", ")
    out << %(<text x="#{WIDTH / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">#{esc(who)}: wall time and peak RSS per benchmark</text>\n)
    sub = "#{meta["mode"]} mode, #{meta["reps"]} reps per configuration, commit #{meta["git_commit"]}, " \
          "#{meta["date"]}, #{meta.dig("machine", "nproc")} CPUs"
    out << %(<text x="#{WIDTH / 2}" y="40" text-anchor="middle" font-size="11" fill="#444444">#{esc(sub)}</text>\n)
    note = "bar: median of the per-pair ratios (run j against run j), from 1.0; whisker: their min to max; " \
           "log scale; left of 1.0 #{others.join("/")} is better"
    out << %(<text x="#{WIDTH / 2}" y="56" text-anchor="middle" font-size="11" fill="#444444">#{esc(note)}</text>\n)

    # legend: as many rows as it needs
    items = series.each_with_index.map do |(o, _, label), k|
      [others.size > 1 ? "#{label} (#{o})" : label, COLORS[k % COLORS.size], :box]
    end
    items << ["clipped at the axis end (value printed)", "#333333", :arrow]
    lx, ly = x0, 70
    items.each do |text, color, kind|
      w = 19 + text.size * 6.5 + 18
      if lx + w > WIDTH - RIGHT_PAD && lx > x0
        lx = x0
        ly += 16
      end
      out << if kind == :box
               %(<rect x="#{lx}" y="#{ly}" width="14" height="10" fill="#{color}"/>)
             else
               %(<path d="M#{lx} #{ly + 5} h8 M#{lx + 8} #{ly} l6 5 l-6 5 z" stroke="#{color}" fill="#{color}"/>)
             end
      out << %(<text class="legend" x="#{lx + 19}" y="#{ly + 9}" font-size="11">#{esc(text)}</text>\n)
      lx += w
    end
    top = ly + 38
    group_h = series.size * BAR_H + (series.size - 1) * BAR_GAP
    plot_h = rows.size * (group_h + GROUP_GAP) + GROUP_GAP
    bottom = top + plot_h
    height = bottom + 58

    # grid, ticks (top and bottom), the 1.0 line
    ticks(lo, hi, x_of).each do |t|
      x = x_of.call(t)
      out << %(<line x1="#{f1(x)}" y1="#{top}" x2="#{f1(x)}" y2="#{bottom}" stroke="#{t == 1.0 ? "#222222" : "#dddddd"}" ) <<
             %(stroke-width="#{t == 1.0 ? 1.4 : 1}"/>\n)
      label = t.to_s.sub(/\.0\z/, "")
      [top - 5, bottom + 14].each do |y|
        out << %(<text class="tick" x="#{f1(x)}" y="#{y}" text-anchor="middle" font-size="10" fill="#444444">#{label}</text>\n)
      end
    end
    out << %(<line x1="#{f1(x_one)}" y1="#{top}" x2="#{f1(x_one)}" y2="#{bottom}" stroke="#222222" stroke-width="1.4"/>\n)
    out << %(<text x="#{f1((x0 + x1) / 2.0)}" y="#{bottom + 32}" text-anchor="middle" font-size="11">ratio #{esc(who)} (log scale)</text>\n)

    rows.each_with_index do |(name, cells), i|
      gy = top + GROUP_GAP + i * (group_h + GROUP_GAP)
      if i.odd?
        out << %(<rect x="0" y="#{gy - GROUP_GAP / 2.0}" width="#{WIDTH}" height="#{group_h + GROUP_GAP}" fill="#000000" fill-opacity="0.035"/>\n)
      end
      out << %(<text class="name" x="#{NAME_W - 8}" y="#{f1(gy + group_h / 2.0 + 4)}" text-anchor="end" font-size="12">#{esc(name)}</text>\n)
      cells.each_with_index do |c, k|
        y = gy + k * (BAR_H + BAR_GAP)
        cy = y + BAR_H / 2.0
        color = COLORS[k % COLORS.size]
        unless c && c["median"].is_a?(Numeric) && c["median"].positive?
          out << %(<text class="value" x="#{f1(x_one + 4)}" y="#{f1(cy + 3.5)}" font-size="#{LABEL_FONT_SIZE}" fill="#888888">no ratio</text>\n)
          next
        end
        m = c["median"]
        xm = x_of.call(m)
        clipped = m > hi ? 1 : m < lo ? -1 : 0
        bx, bw = [x_one, xm].min, (xm - x_one).abs
        out << %(<rect class="bar" data-row="#{esc(name)}" data-series="#{k}" data-value="#{m}" data-clipped="#{clipped != 0}" ) <<
               %(x="#{f1(bx)}" y="#{y}" width="#{f1(bw)}" height="#{BAR_H}" fill="#{color}"/>\n)
        if clipped != 0 # arrowhead past the edge
          tip = xm + clipped * 8
          out << %(<path d="M#{f1(xm)} #{y - 1} L#{f1(tip)} #{f1(cy)} L#{f1(xm)} #{y + BAR_H + 1} z" fill="#{color}"/>\n)
        end
        # whisker: min to max, capped where not clipped
        wmin, wmax = c["min"], c["max"]
        if wmin.is_a?(Numeric) && wmax.is_a?(Numeric) && wmin.positive?
          xa, xb = x_of.call(wmin), x_of.call(wmax)
          out << %(<path class="whisker" d="M#{f1(xa)} #{f1(cy)} H#{f1(xb)})
          out << %( M#{f1(xa)} #{f1(cy - 4)} V#{f1(cy + 4)}) if wmin >= lo
          out << %( M#{f1(xb)} #{f1(cy - 4)} V#{f1(cy + 4)}) if wmax <= hi
          out << %(" stroke="#222222" stroke-width="1" fill="none"/>\n)
        else
          xa = xb = xm
        end
        # value label beyond the far end of bar, arrowhead and whisker
        if m >= 1.0
          lx = [xm + (clipped == 1 ? 8 : 0), xb].max + 4
          anchor = "start"
        else
          lx = [xm - (clipped == -1 ? 8 : 0), xa].min - 4
          anchor = "end"
        end
        weight = clipped != 0 ? %( font-weight="bold") : ""
        out << %(<text class="value" x="#{f1(lx)}" y="#{f1(cy + 3.5)}" text-anchor="#{anchor}" font-size="#{LABEL_FONT_SIZE}"#{weight}>) <<
               %(#{value_label(m)}</text>\n)
      end
    end
    out << %(<rect x="#{x0}" y="#{top}" width="#{f1(x1 - x0)}" height="#{plot_h}" fill="none" stroke="#999999"/>\n)
    head = +%(<?xml version="1.0" encoding="UTF-8"?>\n)
    head << %(<svg xmlns="http://www.w3.org/2000/svg" width="#{WIDTH}" height="#{height}" viewBox="0 0 #{WIDTH} #{height}" ) <<
            %(font-family="#{FONT}" font-size="12">\n)
    head << %(<rect x="0" y="0" width="#{WIDTH}" height="#{height}" fill="#ffffff"/>\n)
    head + out + "</svg>\n"
  end
end
