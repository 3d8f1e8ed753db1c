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

  # An old map whose referents are young: the write barrier remembers the map, the next minor
  # GC traces it (and clears its remembered bit); unless marking remembers it again because
  # its weak referents are still young, the minor GC after that frees them without clearing
  # the map's slots, and the map hands back whatever reuses those slots. (Review bug 1.)
  def test_weakmap_young_values_of_old_map_survive_two_minor_gcs
    assert_gc_script(<<~'RUBY')
      class Val; def initialize(n) = @n = n; attr_reader :n; end
      wm = ObjectSpace::WeakMap.new
      4.times { GC.start }
      keys = Array.new(5000) { |i| "key#{i}" }
      vals = []
      keys.each_with_index { |k, i| v = Val.new(i); vals << v; wm[k] = v }
      GC.start(full_mark: false, immediate_sweep: true)
      kept = vals.values_at(*(0...5000).step(100))
      vals.clear
      GC.start(full_mark: false, immediate_sweep: true)
      junk = Array.new(20000) { |i| "junk#{i}" }
      wrong = keys.count { |k| (v = wm[k]) && !v.is_a?(Val) }
      assert_equal 0, wrong, "WeakMap values that are not the objects stored"
      kept.each { |v| assert_same v, wm[keys[v.n]] }
      assert_operator wm.size, :<, 1000
      junk.clear
    RUBY
  end

  def test_weakkeymap_young_keys_of_old_map_survive_two_minor_gcs
    assert_gc_script(<<~'RUBY')
      m = ObjectSpace::WeakKeyMap.new
      4.times { GC.start }
      keys = Array.new(3000) { |i| "k#{i}" }
      keys.each_with_index { |k, i| m[k] = i }
      GC.start(full_mark: false, immediate_sweep: true)
      kept = keys.values_at(*(0...3000).step(100))
      keys.clear
      GC.start(full_mark: false, immediate_sweep: true)
      junk = Array.new(20000) { |i| "k#{i}" }
      kept.each { |k| assert_equal k[1..].to_i, m[k] }
      # Equal strings that were never keys: a dangling slot reused by one would answer.
      assert_nil m[junk[1]]
      assert_operator m.inspect[/size=(\d+)/, 1].to_i, :<, 1000
      junk.clear
    RUBY
  end
end
