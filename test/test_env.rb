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
    out, err, status = run_with({ "RUBY_GC_HEAP_GROWTH_FACTOR" => "fast", "RUBY_GC_MALLOC_LIMIT" => "12q",
                                  "RUBY_GC_HEAP_FREE_SLOTS" => "lots" },
                                "p GC.config[:heap_growth_factor], GC.config[:malloc_limit_min], GC.config[:heap_free_slots]")
    assert_predicate status, :success?
    assert_match(/invalid value for RUBY_GC_HEAP_GROWTH_FACTOR: fast/, err)
    assert_match(/invalid value for RUBY_GC_MALLOC_LIMIT: 12q/, err)
    assert_match(/invalid value for RUBY_GC_HEAP_FREE_SLOTS: lots/, err)
    assert_equal "1.8\n16777216\n4096\n", out
  end

  def test_bad_incremental_ratio_warns_and_keeps_the_default
    omit "Mosaic's messages" unless mosaic?
    omit "the stress gate's forced collections leave the pacer no say" if ENV["MOSAIC_STRESS_MINOR"]
    omit "MOSAIC_STRESS_INCREMENTAL makes every pacer major mark in steps" if ENV["MOSAIC_STRESS_INCREMENTAL"]
    omit "the ThreadSanitizer build's minor marks pass the 16 ms floor: its majors mark at once" if tsan_build?
    # (A ring whose 3 ms minors trace about as much as its majors: with no floor on the minors,
    # its majors mark at once under the default ratio and all but the first few in steps under
    # a ratio of 0; under the default floor, in steps. test_incremental.rb.)
    code = "ring = Array.new(150_000); 1_500_000.times { |n| ring[n % 150_000] = \"r\#{n}\" }; " \
           "print GC.stat(:mosaic_incremental_marks), ' ', GC.stat(:major_gc_count)"
    %w[often -1].each do |bad|
      out, err, status = run_with({ "MOSAIC_INCREMENTAL_RATIO" => bad, "MOSAIC_INCREMENTAL_LONG_MINOR" => "0" }, code)
      assert_predicate status, :success?, err
      assert_match(/\[mosaic\] (invalid value for MOSAIC_INCREMENTAL_RATIO: often|MOSAIC_INCREMENTAL_RATIO=-1\.0+ is ignored)/, err)
      marks, majors = out.split.map(&:to_i)
      assert_operator majors, :>, 3, "the pacer asked for too few majors to tell"
      assert_operator marks, :<, majors / 2, "the default ratio was not kept for #{bad}"
    end
    out, err, status = run_with({ "MOSAIC_INCREMENTAL_LONG_MINOR" => "soon" }, code)
    assert_predicate status, :success?, err
    assert_match(/\[mosaic\] invalid value for MOSAIC_INCREMENTAL_LONG_MINOR: soon/, err)
    marks, majors = out.split.map(&:to_i)
    assert_operator marks, :>, 3, "too few majors marked in steps to tell"
    assert_operator marks, :>=, majors - 3, "the default floor (16 ms) was not kept"
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
    env = { "RUBY_GC_HEAP_GROWTH_FACTOR" => "2.0", "RUBY_GC_MALLOC_LIMIT" => "1m", "RUBY_GC_HEAP_FREE_SLOTS" => "8192" }
    out, err, status = run_with(env, "p GC.config[:heap_growth_factor], GC.config[:malloc_limit_min], GC.config[:heap_free_slots]", ["-w"])
    assert_predicate status, :success?
    assert_match(/RUBY_GC_HEAP_GROWTH_FACTOR=2.0/, err)
    assert_match(/RUBY_GC_MALLOC_LIMIT=1048576/, err)
    assert_match(/RUBY_GC_HEAP_FREE_SLOTS=8192/, err)
    assert_equal "2.0\n1048576\n8192\n", out
  end

  def test_init_slots_delay_first_gc
    omit "counts collections; the stress gate forces them" if ENV["MOSAIC_STRESS_MINOR"]
    out, _err, status = run_with({ "RUBY_GC_HEAP_0_INIT_SLOTS" => "400000" },
                                 "c = GC.count; 200_000.times { Object.new }; p GC.count - c")
    assert_predicate status, :success?
    assert_equal "0\n", out
  end

  # RUBY_GC_HEAP_FREE_SLOTS is the default GC's "prepare at least this amount of slots after
  # GC": every GC leaves room for that many 40-byte objects (pace.c). Mosaic used to ignore it,
  # collecting every few thousand allocations of a small heap whatever it said; GC.config
  # changes it at run time.
  def test_heap_free_slots_leaves_room_after_each_gc
    omit "Mosaic's pacing" unless mosaic?
    omit "counts collections; the stress gate forces them" if ENV["MOSAIC_STRESS_MINOR"]
    churn = "GC.start; c = GC.count; 2_000_000.times { Object.new }; print GC.count - c, ' '"
    out, err, status = run_with({}, churn)
    assert_predicate status, :success?, err
    assert_operator out.to_i, :>, 40, "a small heap collects often without the setting"
    out, err, status = run_with({ "RUBY_GC_HEAP_FREE_SLOTS" => "500000" }, churn)
    assert_predicate status, :success?, err
    assert_operator out.to_i, :<=, 6, "2M allocations with room for 500k after each GC"
    out, err, status = run_with({}, "#{churn}; GC.config(heap_free_slots: 500_000); #{churn}")
    assert_predicate status, :success?, err
    without, with = out.split.map(&:to_i)
    assert_operator without, :>, 40
    assert_operator with, :<=, 6
    # A heap that grows while the program mallocs now and then keeps the floor too: any malloc
    # used to end the floor's budget once 16 MiB of fresh pages and malloc together were taken
    # (the growth trigger): 8 GCs for this build-up, 4 now, 28 without the setting.
    build_up = "GC.start; c = GC.count; a = []; 2_000_000.times { |i| a << Object.new; 'm' * 1000 if i % 1000 == 0 }; print GC.count - c"
    out, err, status = run_with({ "RUBY_GC_HEAP_FREE_SLOTS" => "3000000" }, build_up)
    assert_predicate status, :success?, err
    assert_operator out.to_i, :<=, 5
    # A value too large to mean anything (4 TB of room) still collects: one GC's floor budget
    # is at most the pages in use or 32 MiB, so the heap grows by steps with GCs between.
    # (4M objects, 160 MB: with 2M the count depends on whether the old-generation major
    # starts early, to mark in steps, or at the ordinary trigger, to mark at once:
    # MOSAIC_INCREMENTAL_RATIO, DESIGN section 10.)
    out, err, status = run_with({ "RUBY_GC_HEAP_FREE_SLOTS" => "100000000000" }, churn.sub("2_000_000", "4_000_000"))
    assert_predicate status, :success?, err
    assert_operator out.to_i, :>=, 2
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
