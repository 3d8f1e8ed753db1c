require_relative "helper"

# Weak references are cleared when their referent dies, and only then.
class TestMosaicWeak < Test::Unit::TestCase
  include MosaicTestHelper

  def test_weakmap_churn
    assert_gc_script(<<~'RUBY', timeout: 300)
      wm = ObjectSpace::WeakMap.new
      keep = []
      20.times do |round|
        5_000.times do |i|
          k = "k#{round}-#{i}"
          v = Object.new
          wm[k] = v
          keep << k << v if i % 100 == 0
        end
        GC.start
      end
      keep.each_slice(2) { |k, v| assert_same v, wm[k] }
      assert_operator wm.size, :<, 20 * 5_000 / 2
      GC.verify_internal_consistency
    RUBY
  end

  def test_weakkeymap_drops_dead_keys
    assert_gc_script(<<~'RUBY')
      m = ObjectSpace::WeakKeyMap.new
      live = Array.new(100) { |i| "live#{i}" }
      live.each { |k| m[k] = k.upcase }
      10_000.times { |i| m["dead#{i}"] = i }
      3.times { GC.start }
      live.each { |k| assert_equal k.upcase, m[k] }
      assert_nil m["dead5"]
    RUBY
  end

  def test_weak_reference_counts
    assert_gc_script(<<~'RUBY')
      GC.start
      wm = ObjectSpace::WeakMap.new
      objs = Array.new(10_000) { Object.new }
      objs.each { |o| wm[o] = true }
      GC.start
      assert_operator GC.latest_gc_info(:weak_references_count), :>=, 10_000
      assert_operator GC.latest_gc_info(:retained_weak_references_count), :>=, 10_000
    RUBY
  end
end
