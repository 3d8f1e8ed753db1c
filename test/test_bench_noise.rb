require_relative "helper"
require_relative "../bench/lib/noise"

# bench/lib/noise.rb, the benchmark runner's verdict on each ratio: real, within noise, or too few
# pairs to tell. Plain Ruby, no collector involved. On a 2-core machine shared with other jobs,
# one run can be 1.5x slower than the run beside it: a ratio is called a difference only when the
# order-statistic interval of its median pair ratio excludes 1.0.
class TestMosaicBenchNoise < Test::Unit::TestCase
  def test_coverage_of_order_statistic_intervals
    assert_in_delta 0.5, Noise.coverage(2, 1), 1e-12
    assert_in_delta 0.75, Noise.coverage(3, 1), 1e-12
    assert_in_delta 0.9375, Noise.coverage(5, 1), 1e-12
    assert_in_delta 1 - 2 * 11 / 1024.0, Noise.coverage(10, 2), 1e-12
    assert_in_delta 1 - 2 * 56 / 1024.0, Noise.coverage(10, 3), 1e-12 # 89%: below LEVEL
    assert_in_delta 1.0, Noise.binomial_cdf(4, 4), 1e-12
    assert_equal 0.0, Noise.binomial_cdf(4, -1)
  end

  def test_interval_is_the_widest_rank_pair_that_reaches_the_level
    ten = [0.95, 0.70, 0.91, 0.88, 0.93, 1.40, 0.90, 0.89, 0.92, 0.94]
    i = Noise.median_interval(ten)
    assert_equal 2, i["k"]
    assert_equal [0.88, 0.95], [i["lo"], i["hi"]] # 2nd and 9th of the sorted ten
    assert_operator i["confidence"], :>=, Noise::LEVEL
    five = Noise.median_interval([1.1, 0.9, 1.0, 1.2, 0.8])
    assert_equal [0.8, 1.2, 1], [five["lo"], five["hi"], five["k"]]
    two = Noise.median_interval([0.9, 0.8])
    assert_equal [0.8, 0.9], [two["lo"], two["hi"]]
    assert_in_delta 0.5, two["confidence"], 1e-12
    assert_nil Noise.median_interval([])
  end

  def test_verdicts
    verdict = ->(values) { Noise.ratio(values)["verdict"] }
    # every one of 5 pairs below 1: real at 93.75%
    assert_equal "real", verdict.call([0.80, 0.82, 0.85, 0.88, 0.90])
    assert_equal "real", verdict.call([1.10, 1.12, 1.08, 1.20, 1.15])
    # the median is far below 1, but one pair of 5 above it: the interval (min-max) holds 1.0
    assert_equal "noise", verdict.call([0.80, 0.82, 0.85, 0.88, 1.05])
    # with 10 pairs, one slow spell (1.40) moves the interval by one rank only
    assert_equal "real", verdict.call([0.95, 0.70, 0.91, 0.88, 0.93, 1.40, 0.90, 0.89, 0.92, 0.94])
    # ... but two pairs on the other side of 1.0 make it noise
    assert_equal "noise", verdict.call([0.95, 0.70, 0.91, 0.88, 1.02, 1.40, 0.90, 0.89, 0.92, 0.94])
    # all agree, but 3 pairs reach only 75%
    assert_equal "few", verdict.call([0.80, 0.82, 0.85])
    assert_equal "few", verdict.call([0.9])
    # an interval that touches 1.0 contains it; identical runs (peak RSS) give a point
    assert_equal "noise", verdict.call([1.0, 1.02, 1.05, 1.03, 1.04])
    assert_equal "noise", verdict.call([1.0] * 5)
    assert_equal "real", verdict.call([0.93] * 5)
  end

  def test_ratio_keeps_its_old_keys_and_flags
    r = Noise.ratio([0.9, 1.1, 1.0, 0.95])
    assert_equal [0.975, 0.9, 1.1, 4], r.values_at("median", "min", "max", "pairs")
    assert_equal "noise", r["verdict"]
    assert_equal " *noise*", Noise.flag(r)
    assert_equal " *?*", Noise.flag(Noise.ratio([0.9, 0.8]))
    assert_equal "", Noise.flag(Noise.ratio([0.9] * 6))
    assert_equal "", Noise.flag(nil)
    q1, q3 = Noise.quartiles([1, 2, 3, 4, 5])
    assert_equal [2.0, 4.0], [q1, q3]
  end

  def test_pairs_by_repetition_and_only_successful_runs
    run = ->(gc, rep, wall, status = "ok") { { "gc" => gc, "rep" => rep, "status" => status, "wall_s" => wall } }
    base = [run.call("default", 1, 2.0), run.call("default", 2, 1.0, "failed"), run.call("default", 3, 4.0)]
    other = [run.call("mosaic", 3, 2.0), run.call("mosaic", 2, 1.0), run.call("mosaic", 1, 3.0)]
    assert_equal [1.5, 0.5], Noise.pair_ratios(base, other, "wall_s")
    assert_equal [], Noise.pair_ratios(base, other, "cpu_s") # an older file has no CPU time
    # a ratio of an older results file gets its interval and verdict from the runs
    old = { "median" => 1.0, "min" => 0.5, "max" => 1.5, "pairs" => 2 }
    full = Noise.complete(old, base + other, "default", "mosaic", "wall_s")
    assert_equal ["noise", 0.5, 1.5], full.values_at("verdict", "lo", "hi")
    assert_equal 1.0, full["median"]
  end
end
