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
