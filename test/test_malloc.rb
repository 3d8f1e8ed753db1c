require_relative "helper"

# Malloc accounting: malloc'd bytes trigger collections, but never from inside a realloc.
class TestMosaicMalloc < Test::Unit::TestCase
  include MosaicTestHelper

  # Regression (found by CRuby's TestMethod#test_splat_long_array under Mosaic): a collection
  # started from inside xrealloc marked an Array whose old buffer realloc had just freed.
  def test_growth_through_realloc_under_a_tiny_malloc_limit
    env = { "RUBY_GC_MALLOC_LIMIT" => "200000", "RUBY_GC_MALLOC_LIMIT_MAX" => "200000" }
    assert_gc_script(<<~'RUBY', env: env, args: ["-W0"], timeout: 300)
      a = []
      h = {}
      s = +""
      300_000.times do |i|
        a << i.to_s
        h[i] = i if i % 3 == 0
        s << "x"
      end
      b = (1..2_000_000).map { |i| i }
      GC.start
      assert_equal [300_000, 100_000, 300_000, 2_000_000], [a.size, h.size, s.size, b.size]
      assert_equal "299999", a.last
      assert_equal 2_000_000, b.last
    RUBY
  end

  def test_malloc_bytes_trigger_collection
    assert_gc_script(<<~'RUBY')
      GC.start
      c = GC.count
      limit = GC.stat(:malloc_increase_bytes_limit)
      # Few objects, many malloc'd bytes.
      (limit / 1_000_000 * 3).times { "x" * 1_000_000 }
      assert_operator GC.count, :>, c
    RUBY
  end

  # Regression: the frees of a lazy sweep (a heap below MOSAIC_BACKGROUND_SWEEP_MIN_PAGES, or
  # the sweeper off) were netted against malloc_increase, so the garbage of the cycle before,
  # swept while the program malloc'd the next, hid the new mallocs: a GC came after about three
  # limits of malloc instead of one, and each held that much garbage (peak RSS 1.47 of the
  # default GC's on such a loop). A sweep's frees now leave the increase alone. The count of GCs
  # for a given volume of malloc depends on the accounting only, not on timing: the sweeper is
  # off, so the lazy sweep advances with allocation.
  def test_swept_garbage_does_not_hide_new_malloc
    omit "Mosaic's malloc accounting" unless mosaic?
    # At most one malloc limit (32 MiB) between GCs would be total / 32 MiB, 300 here; the
    # netted count was 136, one GC per 75 MB.
    assert_gc_per_malloc(48, 300_000, "String.new(capacity: cap)")
  end

  # A C extension's object whose dfree may not run inside the GC (its data type lacks
  # RUBY_TYPED_FREE_IMMEDIATELY) becomes a zombie, and its dfree runs later from the finalizer
  # job. What that frees was garbage the GC before found, like a sweep's frees: netted against
  # malloc_increase it hid the cycle's new malloc, and GCs came after several limits of it.
  def test_zombie_frees_do_not_hide_new_malloc
    omit "Mosaic's malloc accounting" unless mosaic?
    ext = built_extension("mosaic_deferred_free")
    # One malloc limit (32 MiB) between GCs is total / 32 MiB, 102 here; netted against the
    # zombies' frees, 73 (one per 45 MiB).
    assert_gc_per_malloc(40, "rounds(100_000)", "MosaicDeferredFree.new(cap)", prelude: "require #{ext.dump}")
  end

  # Runs `count` (Ruby code) allocations of `make` (Ruby code of `cap`, 4-64 KB of malloc), one in
  # 100 kept for 50 more, with the malloc limit at 32 MiB and the background sweeper off (the lazy
  # sweep then advances with allocation, so the count depends on accounting, not timing), and
  # asserts at least one GC per `mib` MiB of that malloc.
  def assert_gc_per_malloc(mib, count, make, prelude: "")
    env = { "RUBY_GC_MALLOC_LIMIT_MAX" => "33554432", "MOSAIC_BACKGROUND_SWEEP" => "0" }
    assert_gc_script(<<~RUBY, env: env, args: ["-W0"])
      #{prelude}
      GC.start
      c = GC.count
      keep = []
      total = 0
      rng = Random.new(1)
      (#{count}).times do |i|
        cap = 4096 + rng.rand(60_000)
        obj = #{make}
        total += cap
        keep << obj if i % 100 == 0
        keep.shift if keep.size > 50
      end
      gcs = GC.count - c
      assert_operator gcs, :>=, total / (#{mib} << 20), "GCs for \#{total >> 20} MiB of malloc"
      assert_equal 50, keep.size
    RUBY
  end

  # A failed malloc is retried after a full GC, major_by :force, as in the default GC: old
  # garbage may hold the big buffers. (Review bug 3: it used to be a minor GC.)
  def test_failed_malloc_retries_after_a_major_gc
    # The sanitized build's allocator warns on stderr when it returns NULL (the asan gate sets
    # allocator_may_return_null=1, glibc's behaviour).
    assert_gc_script(<<~'RUBY', ignore_stderr: sanitized_build?)
      GC.start
      major, minor = GC.stat(:major_gc_count), GC.stat(:minor_gc_count)
      assert_raise(NoMemoryError) { String.new(capacity: 1 << 44) }
      assert_operator GC.stat(:major_gc_count), :>, major
      assert_equal minor, GC.stat(:minor_gc_count)
      assert_equal :force, GC.latest_gc_info(:major_by)
      assert_equal :malloc, GC.latest_gc_info(:gc_by)
    RUBY
  end

  # GC.stress collects on malloc too, as the default GC does: an Array growing its buffer
  # with no object allocation in between still sees collections.
  def test_gc_stress_collects_on_malloc
    assert_gc_script(<<~'RUBY')
      a = []
      100.times { |i| a << i }  # a heap buffer, so the pushes below realloc
      c = GC.count
      GC.stress = true
      begin
        1000.times { |i| a << i }
      ensure
        GC.stress = false
      end
      assert_operator GC.count - c, :>=, 5
      assert_equal 1100, a.size
    RUBY
  end
end
