# Which ratios of a benchmark run are differences and which are noise (bench/run.rb and
# bench/summary.rb; tested by test/test_bench_noise.rb). Plain Ruby >= 3.0, no gems.
#
# A ratio other/baseline comes from runs paired by repetition: run j of the other configuration
# with run j of the baseline, run just before it, so that a slow spell of the machine that covers
# both cancels out. Its figure is the median of the per-pair ratios. Its interval is the
# distribution-free confidence interval of that median from order statistics (the interval of
# the sign test): with the n ratios sorted, [r(k), r(n+1-k)] holds the median of the pairs'
# distribution with probability 1 - 2 P(Binomial(n, 1/2) <= k-1), whatever that distribution's
# shape. It assumes only that the pairs are independent draws of one distribution: no normality,
# and one pair ruined by a 1.5x slow spell moves it by one rank, not by the spell's size. k is
# the largest that keeps that probability at LEVEL or more; with fewer than MIN_PAIRS pairs no
# interval reaches LEVEL, and the interval is min-max with its lower confidence.
#
# Verdict of a ratio:
#   "noise"  the interval contains 1.0: the run does not tell the two apart
#   "real"   the interval excludes 1.0 at LEVEL or more
#   "few"    the interval excludes 1.0 (every pair agrees) but there are too few pairs for LEVEL
module Noise
  LEVEL = 0.90
  # the fewest pairs whose min-max reaches LEVEL: 5 (1 - 2/2^5 = 93.75%)
  MIN_PAIRS = 5

  module_function

  def median(values)
    v = values.compact.sort
    return nil if v.empty?
    v.size.odd? ? v[v.size / 2] : (v[v.size / 2 - 1] + v[v.size / 2]) / 2.0
  end

  # P(Binomial(n, 1/2) <= j)
  def binomial_cdf(n, j)
    return 0.0 if j.negative?
    c = 1
    sum = 0
    (0..[j, n].min).each do |i|
      sum += c
      c = c * (n - i) / (i + 1)
    end
    sum.to_f / (2**n)
  end

  # Confidence that [r(k), r(n+1-k)] of n sorted values holds their distribution's median.
  def coverage(n, k) = 1.0 - 2.0 * binomial_cdf(n, k - 1)

  # The order-statistic interval of the median of values: { "lo", "hi", "confidence", "k" }, nil
  # for no values.
  def median_interval(values, level = LEVEL)
    v = values.compact.sort
    n = v.size
    return nil if n.zero?
    k = 1
    k += 1 while k + 1 <= (n + 1) / 2 && coverage(n, k + 1) >= level
    { "lo" => v[k - 1], "hi" => v[n - k], "confidence" => coverage(n, k).round(4), "k" => k }
  end

  # Lower and upper quartiles (linear interpolation between order statistics; descriptive only).
  def quartiles(values)
    v = values.compact.sort
    return nil if v.empty?
    at = lambda do |q|
      pos = q * (v.size - 1)
      lo = v[pos.floor]
      hi = v[pos.ceil]
      lo + (hi - lo) * (pos - pos.floor)
    end
    [at.call(0.25), at.call(0.75)]
  end

  def verdict(interval, level = LEVEL)
    return nil unless interval
    return "noise" if interval["lo"] <= 1.0 && interval["hi"] >= 1.0
    interval["confidence"] >= level ? "real" : "few"
  end

  # The per-pair ratios other/baseline of field: run j of other_runs over run j of base_runs, for
  # every j where both succeeded. Runs are anything that answers ["rep"], ["status"] and [field]
  # (run.rb's RunResult, or a run of a results file's JSON).
  def pair_ratios(base_runs, other_runs, field)
    field = field.to_s
    base_runs.filter_map do |b|
      o = other_runs.find { |r| r["rep"] == b["rep"] }
      next unless o && o["status"] == "ok" && b["status"] == "ok"
      bv = b[field]
      ov = o[field]
      ov.to_f / bv if bv && ov && bv.to_f.positive?
    end
  end

  # Everything about one ratio: median, min, max, pairs (as before), the ratios themselves, the
  # interquartile range, the interval and the verdict. nil when no pair succeeded.
  def ratio(pairs, level = LEVEL)
    return nil if pairs.empty?
    interval = median_interval(pairs, level)
    q1, q3 = quartiles(pairs)
    { "median" => median(pairs), "min" => pairs.min, "max" => pairs.max, "pairs" => pairs.size,
      "values" => pairs.map { |x| x.round(6) }, "q1" => q1, "q3" => q3,
      "lo" => interval["lo"], "hi" => interval["hi"], "confidence" => interval["confidence"],
      "verdict" => verdict(interval, level) }
  end

  # A ratio hash of a results file, with the interval and verdict filled in from its runs when it
  # was written before they existed. runs: the benchmark's "runs" (JSON).
  def complete(r, runs, base, other, field)
    return r if r.nil? || r["verdict"]
    pairs = pair_ratios(runs.select { |x| x["gc"] == base }, runs.select { |x| x["gc"] == other }, field)
    pairs.empty? ? r : r.merge(ratio(pairs).reject { |k, _| %w[median min max pairs].include?(k) })
  end

  # The flag a table cell carries after the ratio: "" when real.
  def flag(r)
    case r && r["verdict"]
    when "noise" then " *noise*"
    when "few" then " *?*"
    else ""
    end
  end
end
