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
end
