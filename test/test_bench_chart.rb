require_relative "helper"
require_relative "../bench/lib/chart"

# bench/lib/chart.rb, the ratio chart of bench/run.rb and bench/summary.rb. Plain Ruby, no
# collector involved: the chart must stay readable when one ratio is extreme. (A linear axis
# from 0 to the largest ratio drew a 37.7x bar and flattened every other bar to a line whose
# labels overlapped.)
class TestMosaicBenchChart < Test::Unit::TestCase
  META = { "mode" => "full", "reps" => 3, "git_commit" => "abc1234", "date" => "2026-01-01T00:00:00Z",
           "machine" => { "nproc" => 2 } }.freeze

  def result(name, wall, rss)
    spread = ->(m) { { "median" => m, "min" => m * 0.97, "max" => m * 1.03, "pairs" => 3 } }
    { "name" => name, "timing" => true,
      "ratios" => { "mosaic" => { "wall_s" => spread.call(wall), "peak_rss_kb" => spread.call(rss) } } }
  end

  def results
    [result("slower", 1.1, 0.95), result("faster", 0.9, 1.0), result("outlier", 37.7, 1.02),
     result("tiny", 1.0 / 37.7, 0.8), result("a-much-longer-benchmark-name", 0.98, 1.05), result("close", 0.96, 0.95),
     { "name" => "figures-only", "timing" => false, "ratios" => { "mosaic" => { "wall_s" => { "median" => 5.0 } } } }]
  end

  def draw
    rows, series = Chart.data(results, %w[default mosaic], "default")
    Chart.svg(rows, series, "default", META)
  end

  def attrs(tag) = tag.scan(/([\w-]+)="([^"]*)"/).to_h

  def bars(svg)
    svg.scan(/<rect class="bar"[^>]*>/).to_h { |t| a = attrs(t); [[a["data-row"], a["data-series"].to_i], a] }
  end

  def test_an_extreme_ratio_does_not_flatten_the_others
    svg = draw
    b = bars(svg)
    slower, faster, outlier = b[["slower", 0]], b[["faster", 0]], b[["outlier", 0]]
    plot = svg[/<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="[\d.]+" fill="none"/, 2].to_f
    assert_operator plot, :>, 400
    [slower, faster].each { |bar| assert_operator bar["width"].to_f, :>, plot * 0.04, "ratio #{bar["data-value"]}" }
    # log scale from 1.0: 0.9 is further from 1.0 than 1.1, on the other side of it
    assert_operator faster["width"].to_f, :>, slower["width"].to_f + 1
    assert_operator faster["x"].to_f + faster["width"].to_f, :<=, slower["x"].to_f + 0.1
    # the extreme ratios are clipped at the axis ends, and their values are printed
    assert_equal "true", outlier["data-clipped"]
    assert_equal "true", b[["tiny", 0]]["data-clipped"]
    assert_operator outlier["width"].to_f, :<, plot * 0.6
    assert_match(%r{<text class="value"[^>]*>37\.7</text>}, svg)
    assert_match(%r{<text class="value"[^>]*>0\.03</text>}, svg)
    # figure-only benchmarks are not drawn
    assert_not_include svg, "figures-only"
  end

  def test_every_bar_has_a_value_label_and_no_labels_overlap
    svg = draw
    bs = bars(svg).values
    assert_equal 12, bs.size
    bs.combination(2).each do |a, b|
      ya, yb = a["y"].to_f, b["y"].to_f
      assert_false ya < yb + b["height"].to_f && yb < ya + a["height"].to_f,
                   "bars #{a["data-row"]}/#{a["data-series"]} and #{b["data-row"]}/#{b["data-series"]} share a line"
    end
    texts = svg.scan(/<text class="(value|name|tick|legend)"([^>]*)>([^<]*)</).map do |kind, tag, text|
      a = attrs(tag)
      size = (a["font-size"] || 12).to_f
      w = text.size * size * 0.62 # wider than DejaVu Sans's average glyph
      x = a["x"].to_f
      x -= w if a["text-anchor"] == "end"
      x -= w / 2 if a["text-anchor"] == "middle"
      [kind, text, x, a["y"].to_f - size * 0.8, w, size]
    end
    assert_equal 12, texts.count { |k, *| k == "value" }
    texts.combination(2).each do |(ka, ta, xa, ya, wa, ha), (kb, tb, xb, yb, wb, hb)|
      overlap = xa < xb + wb && xb < xa + wa && ya < yb + hb && yb < ya + ha
      assert_false overlap, "#{ka} #{ta.inspect} overlaps #{kb} #{tb.inspect}"
    end
  end

  def test_axis_is_centred_on_one_and_clipped
    lo, hi = Chart.domain([["x", [{ "median" => 37.7, "min" => 36.0, "max" => 41.8 }]]])
    assert_in_delta 1.0, lo * hi, 1e-9
    assert_in_delta Chart::CLIP, hi, 1e-9
    lo, hi = Chart.domain([["x", [{ "median" => 0.9, "min" => 0.88, "max" => 1.01 }]]])
    assert_in_delta Chart::MIN_SPAN, hi, 1e-9
  end
end
