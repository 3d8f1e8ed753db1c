require_relative "helper"
require "rbconfig"
require "tmpdir"
require "open3"
require "fileutils"

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

  # rb_gc_remove_weak during a mark phase (what a WeakMap delete between incremental-marking
  # steps does) drops *every* registration of the slot, so the end of marking never writes
  # Qundef into memory the caller reused or freed; it finds the slot through an index
  # (weak_index.c), not a scan of the list. Driven by test/ext/mosaic_weak_probe.c, whose dmark
  # registers slots (even ones twice: a parent traced twice), removes the even ones and puts
  # the word of a dead object there. The scan this replaced dropped only the first
  # registration: the second one then cleared the reused slot.
  def test_remove_weak_during_marking_drops_every_registration
    omit "Mosaic honours remove_weak during any mark phase; the default GC only while incremental" unless mosaic?
    ext = built_extension("mosaic_weak_probe")
    assert_gc_script(<<~RUBY, timeout: 300)
      require #{ext.dump}
      n = 2_000
      GC.start
      GC.disable
      probe = MosaicWeakProbe.new(n)
      [1, 2, 3].each do |dups|
        fill = ->(i) { probe.set(i, Object.new); probe.foreign(i, Object.new) if i.even? }
        n.times(&fill)
        probe.arm(dups)
        GC.start                       # runs while disabled (a method call)
        n.times do |i|
          next unless i.even?
          assert_equal probe.foreign_raw(i), probe.raw(i), "even slot \#{i} (registered \#{dups}x, removed) was written"
        end
        cleared = (0...n).count { |i| i.odd? && probe.undef?(i) }
        assert_operator cleared, :>=, n / 4, "dead referents of the slots left registered are cleared"
        probe = MosaicWeakProbe.new(n)
      end
      GC.enable
      GC.verify_internal_consistency
    RUBY
  end
end
