require_relative "helper"

# Tunables from the environment: bad values warn and fall back; good ones take effect.
class TestMosaicEnv < Test::Unit::TestCase
  include MosaicTestHelper

  def run_with(env, code, args = [])
    out, err, status = EnvUtil.invoke_ruby([{ "RUBY_GC_LIBRARY" => LIB_NAME }.merge(env), *args, "-e", code], "", true, true)
    [out, err, status]
  end

  def test_malformed_value_warns_and_falls_back
    omit "Mosaic's messages" unless mosaic?
    out, err, status = run_with({ "RUBY_GC_HEAP_GROWTH_FACTOR" => "fast", "RUBY_GC_MALLOC_LIMIT" => "12q" },
                                "p GC.config[:heap_growth_factor], GC.config[:malloc_limit_min]")
    assert_predicate status, :success?
    assert_match(/invalid value for RUBY_GC_HEAP_GROWTH_FACTOR: fast/, err)
    assert_match(/invalid value for RUBY_GC_MALLOC_LIMIT: 12q/, err)
    assert_equal "1.8\n16777216\n", out
  end

  def test_out_of_range_value_warns
    omit "Mosaic's messages" unless mosaic?
    out, err, status = run_with({ "RUBY_GC_HEAP_FREE_SLOTS_MIN_RATIO" => "3" }, "p GC.config[:heap_free_slots_min_ratio]")
    assert_predicate status, :success?
    assert_match(/RUBY_GC_HEAP_FREE_SLOTS_MIN_RATIO=3.0+ is ignored/, err)
    assert_equal "0.2\n", out
  end

  def test_valid_values_take_effect_and_echo_with_w
    omit "Mosaic's keys" unless mosaic?
    env = { "RUBY_GC_HEAP_GROWTH_FACTOR" => "2.0", "RUBY_GC_MALLOC_LIMIT" => "1m" }
    out, err, status = run_with(env, "p GC.config[:heap_growth_factor], GC.config[:malloc_limit_min]", ["-w"])
    assert_predicate status, :success?
    assert_match(/RUBY_GC_HEAP_GROWTH_FACTOR=2.0/, err)
    assert_match(/RUBY_GC_MALLOC_LIMIT=1048576/, err)
    assert_equal "2.0\n1048576\n", out
  end

  def test_init_slots_delay_first_gc
    omit "counts collections; the stress gate forces them" if ENV["MOSAIC_STRESS_MINOR"]
    out, _err, status = run_with({ "RUBY_GC_HEAP_0_INIT_SLOTS" => "400000" },
                                 "c = GC.count; 200_000.times { Object.new }; p GC.count - c")
    assert_predicate status, :success?
    assert_equal "0\n", out
  end

  def test_mosaic_verify_checks_heap_after_every_gc
    omit "Mosaic's own variable" unless mosaic?
    code = "a = Array.new(50_000) { |i| [i.to_s] }; 3.times { GC.start }; 100_000.times { {} }; " \
           "p GC.config[:verify_after_gc], a.last.first"
    out, err, status = run_with({ "MOSAIC_VERIFY" => "1" }, code)
    assert_predicate status, :success?, err
    assert_equal "true\n\"49999\"\n", out
    out, _err, status = run_with({ "MOSAIC_VERIFY" => "maybe" }, "p GC.config[:verify_after_gc]")
    assert_predicate status, :success?
    assert_equal "false\n", out
  end

  # Factors far out of the usual range are clamped, never converted with overflow: a huge
  # old-object factor used to make every GC major, a huge growth factor made growth 0.
  # Values that are not finite are rejected with a warning. (Review bug 8.)
  def test_extreme_factors_are_clamped_and_non_finite_rejected
    omit "Mosaic's pacing" unless mosaic?
    omit "reads why GCs ran; the stress gate forces them" if ENV["MOSAIC_STRESS_MINOR"]
    code = "GC.start; 3.times { 300_000.times { Object.new } }; " \
           "p GC.stat(:minor_gc_count) > 0, GC.latest_gc_info(:major_by), GC.stat(:old_objects_limit) >= 2**60"
    out, err, status = run_with({ "RUBY_GC_HEAP_OLDOBJECT_LIMIT_FACTOR" => "1e300" }, code)
    assert_predicate status, :success?, err
    assert_equal "true\nnil\ntrue\n", out
    # With a goal ratio of 0 a growth step is total * (factor - 1), as in the default GC (with
    # one, the factor only caps the step). Growth is taken in steps of 1/8 of the heap between
    # GCs (pace.c), so a huge factor still means a few GCs (6 measured); a factor that
    # collapsed to no growth means one GC per page (185 measured with a factor of 1.0000001).
    out, err, status = run_with({ "RUBY_GC_HEAP_GROWTH_FACTOR" => "1e300", "RUBY_GC_HEAP_FREE_SLOTS_GOAL_RATIO" => "0" },
                                "a = Array.new(300_000) { Object.new }; p GC.count < 20, a.size")
    assert_predicate status, :success?, err
    assert_equal "true\n300000\n", out
    out, err, status = run_with({ "RUBY_GC_HEAP_GROWTH_FACTOR" => "inf", "RUBY_GC_HEAP_OLDOBJECT_LIMIT_FACTOR" => "nan" },
                                "p GC.config[:heap_growth_factor], GC.config[:oldobject_limit_factor]")
    assert_predicate status, :success?
    assert_match(/invalid value for RUBY_GC_HEAP_GROWTH_FACTOR: inf/, err)
    assert_match(/invalid value for RUBY_GC_HEAP_OLDOBJECT_LIMIT_FACTOR: nan/, err)
    assert_equal "1.8\n2.0\n", out
  end
end
