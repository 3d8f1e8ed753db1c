require_relative "helper"

# The nursery (src/collect/nursery.c; MOSAIC_NURSERY_PAGES): new objects are allocated into
# nursery pages, and every minor GC moves their survivors out to old-space pages, updating the
# objects that minor traced. Survivors keep their contents, ids, generic ivars, finalizers and
# hash positions; what the roots name directly, what weak slots name, and the kinds that never
# move (frozen strings, classes, imemos...) stay where they are.
class TestMosaicNursery < Test::Unit::TestCase
  include MosaicTestHelper

  NURSERY = { "MOSAIC_NURSERY_PAGES" => "8" }.freeze

  PRELUDE = <<~'RUBY'
    require "objspace"
    def addr(o) = ObjectSpace.dump(o)[/"address":"(0x\h+)"/, 1]
    def moved = GC.stat(:mosaic_nursery_moved_objects)
    # A minor GC that evacuates: GC.start(full_mark: false) is a major when the pacer asked for
    # one (the old-object limit), so it is asked again until a minor evacuated. The first one
    # empties the nursery that booting filled.
    def minor
      n = GC.stat(:mosaic_nursery_evacuations) || 0
      3.times do
        GC.start(full_mark: false, immediate_sweep: false)
        return if GC.stat(:mosaic_nursery_evacuations) > n
      end
      raise "no minor GC evacuated"
    end
    minor if ENV["MOSAIC_NURSERY_PAGES"].to_i > 0
    # Under the stress gate a GC every N allocations moves objects before the minor GC a
    # script asks for: what moved there is not counted, only what everything holds is.
    EXACT = !ENV["MOSAIC_STRESS_MINOR"]
  RUBY

  def setup
    omit "Mosaic's nursery" unless mosaic?
    omit "MOSAIC_STRESS_COMPACT makes the forced GCs major" if ENV["MOSAIC_STRESS_COMPACT"]
  end

  def test_off_by_default_nothing_moves_at_a_minor
    assert_gc_script(PRELUDE + <<~'RUBY', env: { "MOSAIC_NURSERY_PAGES" => nil })
      keep = Array.new(1000) { |i| "s#{i}" * 4 }
      a = addr(keep[500])
      GC.start(full_mark: false)
      assert_equal 0, GC.stat(:mosaic_nursery_pages)
      assert_equal 0, GC.stat(:mosaic_nursery_evacuations)
      assert_equal a, addr(keep[500])
    RUBY
  end

  def test_survivors_move_out_and_keep_what_they_hold
    assert_gc_script(PRELUDE + <<~'RUBY', env: NURSERY)
      Pair = Struct.new(:a, :b)
      class Holder; def initialize(x) = @x = x; attr_reader :x; end
      keep = []
      GC.disable   # nothing collects between the allocations and the minor GC below
      200.times do |i|
        keep << ["a#{i}" * 3, { "k#{i}" => [i, "v#{i}"] }, Pair.new(i, "p#{i}"), Holder.new("h#{i}"),
                 (2**70) + i, i.to_r / 7, Float::MAX / (i + 2)]
      end
      before = keep.map { |row| row.map { |o| addr(o) } }
      evacuations = GC.stat(:mosaic_nursery_evacuations)
      m = moved
      GC.enable
      minor
      assert_operator GC.stat(:mosaic_nursery_evacuations), :>, evacuations
      after = keep.map { |row| row.map { |o| addr(o) } }
      if EXACT
        assert_operator moved - m, :>=, 200 * 7, "every kept object was young and movable"
        assert_equal 0, before.flatten.zip(after.flatten).count { |x, y| x == y }, "every one moved"
      end
      keep.each_with_index do |(s, h, pair, holder, big, rat, flt), i|
        assert_equal "a#{i}" * 3, s
        assert_equal [i, "v#{i}"], h["k#{i}"]
        assert_equal [i, "p#{i}"], [pair.a, pair.b]
        assert_equal "h#{i}", holder.x
        assert_equal (2**70) + i, big
        assert_equal i.to_r / 7, rat
        assert_equal Float::MAX / (i + 2), flt
      end
      GC.verify_internal_consistency
    RUBY
  end

  # Old containers are not traced by a minor GC unless remembered: the write barrier must have
  # put them in the remembered set, and the evacuation must update them with the young objects.
  def test_old_containers_see_their_young_children_moved
    assert_gc_script(PRELUDE + <<~'RUBY', env: NURSERY)
      class Holder; attr_accessor :x; end
      ary, hash, holder = [], {}, Holder.new
      4.times { GC.start }
      assert_include ObjectSpace.dump(ary), '"old":true'
      300.times do |i|
        ary << "a#{i}"
        hash["k#{i}"] = ["v#{i}"]
        holder.x = { i => "h#{i}" }
      end
      addresses = ary.map { |s| addr(s) }
      m = moved
      minor
      if EXACT
        assert_operator moved - m, :>=, 600
        assert_equal 300, ary.map { |s| addr(s) }.zip(addresses).count { |x, y| x != y }
      end
      assert_equal (0...300).map { |i| "a#{i}" }, ary
      assert_equal (0...300).map { |i| ["v#{i}"] }, (0...300).map { |i| hash["k#{i}"] }
      assert_equal({ 299 => "h299" }, holder.x)
      3.times { minor }
      assert_equal "a299", ary.last
      GC.verify_internal_consistency
    RUBY
  end

  # Addresses are keys of the object-id, generic-ivar and finalizer tables: a moved object is
  # found under its new address. Keys of an identity hash are pinned by its mark (CRuby hashes
  # them by address), so they stay and are found.
  def test_tables_keyed_by_address_follow_the_move
    assert_gc_script(PRELUDE + <<~'RUBY', env: NURSERY)
      strs = Array.new(100) { |i| "s#{i}" * 2 }
      ids = strs.map(&:object_id)
      strs.each_with_index { |s, i| s.instance_variable_set(:@n, i) }   # generic ivars
      keys = Array.new(100) { |i| "k#{i}" * 2 }
      ident = {}.compare_by_identity
      keys.each_with_index { |k, i| ident[k] = i }
      before = strs.map { |s| addr(s) }
      key_addresses = keys.map { |k| addr(k) }
      minor
      assert_equal 100, strs.map { |s| addr(s) }.zip(before).count { |x, y| x != y } if EXACT
      assert_equal ids, strs.map(&:object_id)
      strs.each_with_index { |s, i| assert_same s, ObjectSpace._id2ref(ids[i]) }
      assert_equal (0...100).to_a, strs.map { |s| s.instance_variable_get(:@n) }
      assert_equal key_addresses, keys.map { |k| addr(k) }
      assert_equal (0...100).to_a, keys.map { |k| ident[k] }
      GC.verify_internal_consistency
    RUBY
  end

  def test_a_finalizer_follows_its_object_and_runs_once
    assert_in_out_err([NURSERY, "-robjspace", "-e", <<~'RUBY'], "", ["kept", "ran"], [])
      def addr(o) = ObjectSpace.dump(o)[/"address":"(0x\h+)"/, 1]
      def minor
        n = GC.stat(:mosaic_nursery_evacuations)
        3.times { GC.start(full_mark: false); return if GC.stat(:mosaic_nursery_evacuations) > n }
        raise "no minor GC evacuated"
      end
      minor
      kept = ["s" * 10]
      ObjectSpace.define_finalizer(kept[0], proc { puts "ran" })
      a = addr(kept[0])
      minor
      raise "did not move" if addr(kept[0]) == a && !ENV["MOSAIC_STRESS_MINOR"]
      puts "kept" if kept[0] == "s" * 10
    RUBY
  end

  # What the roots name directly (here a global variable) and what a weak slot names would
  # need the VM's tables or the weak slot updated: they stay. Frozen strings and Symbols, which
  # the VM's tables hold, stay too.
  def test_roots_weak_referents_and_table_held_objects_stay
    assert_gc_script(PRELUDE + <<~'RUBY', env: NURSERY)
      $global = "global" * 3
      wm = ObjectSpace::WeakMap.new
      held = ["weak key" * 2, "weak value" * 2]   # strongly held by an Array, weakly by the map
      wm[held[0]] = held[1]
      interned = -("interned #{rand}")
      moving = ["in an array" * 2]
      a = [addr($global), addr(held[0]), addr(held[1]), addr(interned), addr(moving[0])]
      minor
      assert_equal a[0, 4], [addr($global), addr(held[0]), addr(held[1]), addr(interned)]
      assert_not_equal a[4], addr(moving[0]) if EXACT
      assert_operator GC.stat(:mosaic_nursery_stayed_objects), :>, 0
      assert_equal "global" * 3, $global
      assert_same held[1], wm[held[0]]
      GC.verify_internal_consistency
    RUBY
  end

  # Many minors under churn: the nursery's pages are reused, not grown, and everything kept
  # stays whole.
  def test_churn_reuses_the_nursery_and_keeps_survivors_whole
    assert_gc_script(PRELUDE + <<~'RUBY', env: NURSERY, timeout: 300)
      keep = {}
      rounds(200).times do |r|
        2_000.times { |i| x = ["t#{i}", { i => i.to_s }]; keep[[r, i]] = x if i % 100 == 0 }
      end
      assert_operator GC.stat(:mosaic_nursery_evacuations), :>, 3
      assert_operator GC.stat(:mosaic_nursery_pages), :<=, Integer(ENV["MOSAIC_NURSERY_PAGES"]) * GC::INTERNAL_CONSTANTS[:HEAP_COUNT]
      keep.each { |(r, i), x| assert_equal ["t#{i}", { i => i.to_s }], x }
      GC.verify_internal_consistency
    RUBY
  end
end
