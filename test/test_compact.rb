require_relative "helper"

# Compaction (src/collect/compact.c): GC.compact moves live, unpinned objects, each to the size class
# CRuby asks for (rb_gc_obj_optimal_size: up, down, or its own), and updates every reference;
# objects keep their contents, ids, finalizers, weak-map entries and hash positions, and keep
# working in their new slot; pinned objects stay; a fragmented heap ends on fewer pages.
class TestMosaicCompact < Test::Unit::TestCase
  include MosaicTestHelper

  # These measure what one compaction moves: under MOSAIC_STRESS_COMPACT, compactions forced
  # at allocation points have moved those objects already.
  def omit_under_stress_compact
    omit "measures one compaction's moves; MOSAIC_STRESS_COMPACT compacts before it" if ENV["MOSAIC_STRESS_COMPACT"]
  end

  # For the tests that build a fragmented heap, run GC.start, then measure what GC.compact does:
  # Mosaic's fragmentation policy would compact that heap at the GC.start already.
  COMPACT_ONLY = { "MOSAIC_AUTO_COMPACT" => "off" }.freeze

  # Every script can find an object's address with addr(obj).
  PRELUDE = <<~'RUBY'
    require "objspace"
    def addr(o) = ObjectSpace.dump(o)[/"address":"(0x\h+)"/, 1]
    def slot(o) = ObjectSpace.dump(o)[/"slot_size":(\d+)/, 1].to_i
    def embedded?(o) = ObjectSpace.dump(o).include?('"embedded":true')
    BASE = GC::INTERNAL_CONSTANTS[:BASE_SLOT_SIZE]
    MOSAIC_GC = GC::OPTS.include?("MOSAIC")
  RUBY

  def test_contents_survive_and_objects_move
    assert_gc_script(PRELUDE + <<~'RUBY')
      Point = Struct.new(:x, :y)
      class Box; def initialize(v) = (@v = v; @w = [v]); attr_reader :v, :w; end
      strs = Array.new(2000) { |i| "string #{i}" }
      longs = Array.new(200) { |i| "long string number #{i} " * 4 }
      arys = Array.new(500) { |i| [i, "e#{i}", [i]] }
      hashes = Array.new(500) { |i| { i => "v#{i}", "k#{i}" => i } }
      boxes = Array.new(500) { |i| Box.new("b#{i}") }
      points = Array.new(500) { |i| Point.new(i, -i) }
      GC.start
      before = strs.map { addr(_1) }
      moved_before = GC.stat(:total_moved_objects)
      count = GC.stat(:compact_count)
      info = GC.verify_compaction_references(toward: :empty, expand_heap: true)
      assert_equal count + 1, GC.stat(:compact_count)
      assert_operator GC.stat(:total_moved_objects), :>, moved_before
      assert_operator info[:moved][:T_STRING], :>=, 2000
      assert_operator info[:considered][:T_STRING], :>=, info[:moved][:T_STRING]
      assert_operator strs.map { addr(_1) }.zip(before).count { |a, b| a != b }, :>=, 1900
      strs.each_with_index { |s, i| assert_equal "string #{i}", s }
      longs.each_with_index { |s, i| assert_equal "long string number #{i} " * 4, s }
      arys.each_with_index { |a, i| assert_equal [i, "e#{i}", [i]], a }
      hashes.each_with_index { |h, i| assert_equal({ i => "v#{i}", "k#{i}" => i }, h) }
      boxes.each_with_index { |b, i| assert_equal "b#{i}", b.v; assert_equal ["b#{i}"], b.w }
      points.each_with_index { |pt, i| assert_equal [i, -i], pt.to_a }
      GC.verify_internal_consistency
      # Still a working heap: allocate, collect, compact again.
      more = Array.new(10_000) { |i| "more #{i}" }
      GC.compact
      more.each_with_index { |s, i| assert_equal "more #{i}", s }
      strs.each_with_index { |s, i| assert_equal "string #{i}", s }
    RUBY
  end

  # Objects move to the class their content fits (the default GC's rule since Ruby 3.2): a
  # string, array or T_OBJECT whose content lives outside a small slot moves up and is embedded
  # in the larger one; one whose embedded content shrank moves down; a hash whose table became
  # an st_table moves down. Each keeps its contents, and keeps working once moved (it grows past
  # its new slot, shrinks, takes more instance variables, keys), through more compactions.
  def test_objects_move_across_size_classes
    omit_under_stress_compact
    assert_gc_script(PRELUDE + <<~'RUBY', timeout: 300)
      N = 3000
      class Foo
        def fill(i) = 10.times { |j| instance_variable_set(:"@v#{j}", i + j) }
        def values = 10.times.map { |j| instance_variable_get(:"@v#{j}") }
      end
      GC.verify_compaction_references(expand_heap: true, toward: :empty)

      tail = "z" * (BASE * 4)
      up_strs = Array.new(N) { |i| +"#{i}:" << tail }                 # 40 B slot, heap buffer
      down_strs = Array.new(N) { |i| ("a" * (BASE * 4)).squeeze! << i.to_s }  # 320 B slot, 2-6 bytes
      up_arys = Array.new(N) { |i| a = []; 5.times { |j| a << i + j }; a }      # 40 B slot, heap buffer
      down_arys = Array.new(N) { |i| a = [i + 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]; a.uniq!; a }  # 160 B, 2 left
      objs = Array.new(N) { Foo.new }                                 # 40 B slot (no ivars known)
      objs.each_with_index { |o, i| o.fill(i) }                       # ivars outside the slot
      GC.start
      Foo.new.fill(0)                                                 # shapes under the 160 B root
      hashes = Array.new(N) { |i| h = { a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8 }; h[i] = i; h }

      assert_equal [BASE], (up_strs + up_arys + objs).map { slot(_1) }.uniq
      refute (up_strs + up_arys + objs).any? { embedded?(_1) }
      assert_equal [BASE * 8], down_strs.map { slot(_1) }.uniq
      assert_equal [BASE * 4], (down_arys + hashes).map { slot(_1) }.uniq

      info = GC.verify_compaction_references(expand_heap: true, toward: :empty)
      assert_operator info[:moved_up][:T_STRING] || 0, :>=, N - 10
      assert_operator info[:moved_up][:T_ARRAY] || 0, :>=, N - 10
      assert_operator info[:moved_up][:T_OBJECT] || 0, :>=, N - 10
      assert_operator info[:moved_down][:T_STRING] || 0, :>=, N - 10
      assert_operator info[:moved_down][:T_ARRAY] || 0, :>=, N - 10
      assert_operator info[:moved_down][:T_HASH] || 0, :>=, N - 10

      # Up: now embedded in a larger slot. Down: in the smallest slot their content fits.
      assert_operator up_strs.count { slot(_1) == BASE * 8 && embedded?(_1) }, :>=, N - 10
      assert_operator up_arys.count { slot(_1) > BASE && embedded?(_1) }, :>=, N - 10
      assert_operator objs.count { slot(_1) == BASE * 4 && embedded?(_1) }, :>=, N - 10
      assert_operator down_strs.count { slot(_1) == BASE && embedded?(_1) }, :>=, N - 10
      assert_operator down_arys.count { slot(_1) == BASE && embedded?(_1) }, :>=, N - 10
      assert_operator hashes.count { slot(_1) == BASE * 2 }, :>=, N - 10

      check = lambda do
        up_strs.each_with_index { |s, i| assert_equal "#{i}:#{tail}", s }
        down_strs.each_with_index { |s, i| assert_equal "a#{i}", s }
        up_arys.each_with_index { |a, i| assert_equal (i...i + 5).to_a, a }
        down_arys.each_with_index { |a, i| assert_equal [i + 2, 1], a }
        objs.each_with_index { |o, i| assert_equal (i...i + 10).to_a, o.values }
        hashes.each_with_index do |h, i|
          assert_equal({ a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i => i }, h)
        end
      end
      check.call
      GC.verify_internal_consistency

      # They keep working where they are: grow past the slot, take new ivars and keys.
      up_strs.each { _1 << "!" * 500 }
      down_strs.each { _1 << "b" * 100 }
      up_arys.each { |a| 100.times { a << _1 } }
      down_arys.each { |a| 20.times { a << _1 } }
      objs.each_with_index { |o, i| o.instance_variable_set(:@extra, i) }
      hashes.each { |h| 20.times { h[:"k#{_1}"] = _1 } }
      up_strs.each_with_index { |s, i| assert_equal "#{i}:#{tail}#{"!" * 500}", s }
      down_strs.each_with_index { |s, i| assert_equal "a#{i}#{"b" * 100}", s }
      up_arys.each_with_index { |a, i| assert_equal (i...i + 5).to_a + (0...100).to_a, a }
      down_arys.each_with_index { |a, i| assert_equal [i + 2, 1] + (0...20).to_a, a }
      objs.each_with_index { |o, i| assert_equal (i...i + 10).to_a, o.values; assert_equal i, o.instance_variable_get(:@extra) }
      hashes.each_with_index { |h, i| assert_equal 29, h.size; assert_equal i, h[i]; assert_equal 19, h[:k19] }
      GC.compact
      GC.verify_compaction_references(expand_heap: true, toward: :empty)
      up_strs.each_with_index { |s, i| assert_equal "#{i}:#{tail}#{"!" * 500}", s }
      down_strs.each_with_index { |s, i| assert_equal "a#{i}#{"b" * 100}", s }
      objs.each_with_index { |o, i| assert_equal (i...i + 10).to_a, o.values; assert_equal i, o.instance_variable_get(:@extra) }
      hashes.each_with_index { |h, i| assert_equal 29, h.size; assert_equal i, h[i] }
      GC.verify_internal_consistency
    RUBY
  end

  # A T_OBJECT changes class only with a shape rebuilt under the new class's root shape (the
  # shape fixes its ivar capacity): a frozen one keeps its frozen shape; one whose ivars have no
  # shape under the larger root stays in its own class, intact.
  def test_moved_objects_keep_shape_and_frozen_state
    omit_under_stress_compact
    assert_gc_script(PRELUDE + <<~'RUBY')
      class Bar
        def fill = (@a, @b, @c, @d, @e = 1, 2, 3, 4, 5)
        def set_a = (@a = 10)
      end
      frozen = Array.new(1000) { Bar.new }                  # 40 B slots: no Bar had ivars yet
      frozen.each { |o| o.fill; o.freeze }                  # ivars outside the slot
      other = Bar.new.tap(&:fill)
      other.set_a                                           # an inline cache for @a
      Bar.new.tap(&:fill).freeze                            # the same shapes under the 80 B root
      lone = Class.new                                      # no instance of it has ivars yet
      lonely = Array.new(1000) { lone.new }
      lonely.each_with_index { |o, i| 6.times { |j| o.instance_variable_set(:"@only#{j}", i) } }
      assert_equal [BASE], (frozen + lonely).map { slot(_1) }.uniq
      GC.verify_compaction_references(expand_heap: true, toward: :empty)
      assert_operator frozen.count { slot(_1) == BASE * 2 && embedded?(_1) }, :>=, 990
      assert_equal [BASE], lonely.map { slot(_1) }.uniq
      frozen.each do |o|
        assert_predicate o, :frozen?
        assert_raise(FrozenError) { o.set_a }
        assert_equal [1, 2, 3, 4, 5], %i[@a @b @c @d @e].map { o.instance_variable_get(_1) }
      end
      lonely.each_with_index { |o, i| assert_equal [i] * 6, o.instance_variables.map { o.instance_variable_get(_1) } }
      GC.verify_internal_consistency
    RUBY
  end

  # GC.compact (not only verify_compaction_references) moves objects across classes wherever
  # they are: all the hashes whose table became an st_table leave the 160 B class for the free
  # slots of the 80 B class. (The default GC, whose cursors advance a page per class per round,
  # moved about half of them here: each class stops taking objects once its cursors met.)
  def test_gc_compact_moves_objects_into_a_small_class
    omit_under_stress_compact
    assert_gc_script(PRELUDE + <<~'RUBY', env: COMPACT_ONLY)
      srand(3)
      GC.start
      fill = Array.new(818 * 40) { |i| [i, i, i, i, i, i] }       # 80 B slots, where they belong
      keep80 = fill.select { rand < 0.1 }
      fill = nil
      hashes = Array.new(20_000) { |i| h = { a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8 }; h[:i] = i; h }
      GC.start
      pages = GC.stat(:heap_eden_pages)
      info = GC.compact
      after = GC.stat(:heap_eden_pages)
      if MOSAIC_GC
        assert_operator info[:moved_down][:T_HASH] || 0, :>=, 19_000, info.inspect
        assert_operator after, :<, pages
        assert_operator hashes.count { slot(_1) == BASE * 2 }, :>=, 19_000
      end
      hashes.each_with_index { |h, i| assert_equal 9, h.size; assert_equal i, h[:i]; assert_equal 8, h[:h] }
      keep80.each { |a| assert_equal [a[0]] * 6, a }
      GC.verify_internal_consistency
    RUBY
  end

  # latest_compact_info counts a move across classes once, under moved_up or moved_down, and
  # also under moved; types CRuby gives no size (classes, procs...) never change class.
  def test_latest_compact_info_counts_moves_across_classes
    omit_under_stress_compact
    assert_gc_script(PRELUDE + <<~'RUBY')
      strs = Array.new(2000) { |i| +"#{i}" << "y" * 200 }
      small = Array.new(2000) { |i| ("q" * 200).squeeze! << i.to_s }
      info = GC.verify_compaction_references(expand_heap: true, toward: :empty)
      assert_equal %i[considered moved moved_up moved_down], info.keys.first(4)
      assert_operator info[:moved_up][:T_STRING], :>=, 1990
      assert_operator info[:moved_down][:T_STRING], :>=, 1990
      info[:moved].each do |type, n|
        assert_operator (info[:moved_up][type] || 0) + (info[:moved_down][type] || 0), :<=, n, type
      end
      (info[:moved_up].keys + info[:moved_down].keys).each do |type|
        assert_includes %i[T_STRING T_ARRAY T_OBJECT T_HASH], type
      end
      assert_equal info, GC.latest_compact_info
      # Nothing left to move across: a second compaction right away moves none of these.
      again = GC.verify_compaction_references(expand_heap: true, toward: :empty)
      assert_operator again[:moved_up][:T_STRING] || 0, :<, 100
      assert_operator again[:moved_down][:T_STRING] || 0, :<, 100
      strs.each_with_index { |s, i| assert_equal "#{i}#{"y" * 200}", s }
      small.each_with_index { |s, i| assert_equal "q#{i}", s }
    RUBY
  end

  # Mosaic counts an object that changed class where it lives now: the memory breakdown
  # (slot bytes in use, per class) follows it up, and back down when it dies, without wrapping.
  def test_moves_across_classes_keep_per_class_counts
    omit_under_stress_compact
    omit "Mosaic's own figures" unless mosaic?
    assert_gc_script(PRELUDE + <<~'RUBY')
      GC.verify_compaction_references(expand_heap: true, toward: :empty)
      live0 = GC.stat(:mosaic_heap_live_bytes)
      strs = Array.new(20_000) { |i| +"#{i}" << "w" * 200 }     # 40 B slots, buffers of ~220 B
      GC.start
      live1 = GC.stat(:mosaic_heap_live_bytes)
      info = GC.verify_compaction_references(expand_heap: true, toward: :empty)
      assert_operator info[:moved_up][:T_STRING], :>=, 19_990
      live2 = GC.stat(:mosaic_heap_live_bytes)
      # Each moved from a 40 B slot to a 320 B one.
      assert_operator live2 - live1, :>=, 19_990 * 280 * 0.9, [live0, live1, live2].inspect
      strs.clear
      GC.start
      GC.start
      live3 = GC.stat(:mosaic_heap_live_bytes)
      assert_operator live3, :<, live0 + 1_000_000, [live0, live1, live2, live3].inspect
      assert_operator GC.stat(:mosaic_heap_free_bytes), :>=, 0
      GC.verify_internal_consistency
    RUBY
  end

  def test_object_ids_survive
    assert_gc_script(PRELUDE + <<~'RUBY')
      objs = Array.new(3000) { Object.new }
      ids = objs.map(&:object_id)
      before = objs.map { addr(_1) }
      GC.verify_compaction_references(toward: :empty, expand_heap: true)
      assert_operator objs.map { addr(_1) }.zip(before).count { |a, b| a != b }, :>=, 2900
      assert_equal ids, objs.map(&:object_id)
      ids.each_with_index { |id, i| assert_same objs[i], ObjectSpace._id2ref(id) }
      # New ids are new.
      fresh = Object.new.object_id
      refute_includes ids, fresh
      GC.verify_internal_consistency
    RUBY
  end

  def test_finalizers_survive_a_move
    assert_gc_script(PRELUDE + <<~'RUBY')
      RAN = []
      # A finalizer made here captures no object of the test.
      def finalizer = proc { |id| RAN << id }
      objs = Array.new(500) { Object.new }
      objs.each { |o| ObjectSpace.define_finalizer(o, finalizer) }
      ids = objs.map(&:object_id)
      before = objs.map { addr(_1) }
      GC.verify_compaction_references(toward: :empty, expand_heap: true)
      # Mosaic moves them and re-keys the finalizer table; the default GC keeps them in place.
      if MOSAIC_GC
        assert_operator objs.map { addr(_1) }.zip(before).count { |a, b| a != b }, :>=, 450
      end
      GC.verify_internal_consistency
      assert_empty RAN
      objs = nil
      5.times { GC.start }
      assert_equal ids.sort, RAN.sort
    RUBY
  end

  def test_weakmap_entries_survive
    assert_gc_script(PRELUDE + <<~'RUBY')
      wm = ObjectSpace::WeakMap.new
      keys = Array.new(2000) { |i| "key #{i}" }
      vals = Array.new(2000) { Object.new }
      keys.zip(vals) { |k, v| wm[k] = v }
      2000.times { |i| wm["dead #{i}"] = Object.new }
      wkm = ObjectSpace::WeakKeyMap.new
      keys.each_with_index { |k, i| wkm[k] = i }
      before = keys.map { addr(_1) }
      GC.verify_compaction_references(toward: :empty, expand_heap: true)
      assert_operator keys.map { addr(_1) }.zip(before).count { |a, b| a != b }, :>=, 1900
      keys.each_with_index do |k, i|
        assert_same vals[i], wm[k]
        assert_equal i, wkm[k]
      end
      assert_operator wm.size, :<, 4000
      GC.start
      keys.each_with_index { |k, i| assert_same vals[i], wm[k] }
      GC.verify_internal_consistency
    RUBY
  end

  def test_hash_lookups_of_moved_keys
    assert_gc_script(PRELUDE + <<~'RUBY')
      keys = Array.new(3000) { Object.new }             # identity hash (object id)
      h = {}
      keys.each_with_index { |k, i| h[k] = i }
      ident = {}.compare_by_identity
      skeys = Array.new(3000) { |i| "s#{i}" }
      skeys.each_with_index { |k, i| ident[k] = i }
      hashes = keys.map(&:hash)
      before = keys.map { addr(_1) }
      GC.verify_compaction_references(toward: :empty, expand_heap: true)
      assert_operator keys.map { addr(_1) }.zip(before).count { |a, b| a != b }, :>=, 2900
      assert_equal hashes, keys.map(&:hash)
      keys.each_with_index { |k, i| assert_equal i, h[k] }
      skeys.each_with_index { |k, i| assert_equal i, ident[k] }
      assert_nil ident["s1".dup]
      # Tables keep working after the move: insert, delete, rehash.
      keys.first(100).each { |k| h.delete(k) }
      assert_equal 2900, h.size
      h.rehash
      keys.drop(100).each_with_index { |k, i| assert_equal i + 100, h[k] }
    RUBY
  end

  # Whatever the compacting GC pinned kept its address: after a compaction, an object still
  # carries the pin bit of the GC that compacted (pins are cleared only by the next major).
  def test_pinned_objects_do_not_move
    # Under the stress gate a minor GC runs within ObjectSpace.dump's allocations and sets pin
    # bits of its own (a minor re-pins what it marks with mark_and_pin or conservatively).
    omit "reads the compacting GC's pin bits; the stress gate forces GCs" if ENV["MOSAIC_STRESS_MINOR"]
    assert_gc_script(PRELUDE + <<~'RUBY')
      strs = []
      ObjectSpace.each_object(String) { |s| strs << s }
      objs = strs + Array.new(2000) { |i| "free #{i}" }
      before = objs.map { addr(_1) }
      GC.verify_compaction_references(toward: :empty, expand_heap: true)
      pinned = objs.each_index.select { |i| ObjectSpace.dump(objs[i]).include?('"pinned":true') }
      if MOSAIC_GC
        assert_operator pinned.size, :>, 0, "some strings are pinned (by C code, conservative roots)"
      end
      pinned.each { |i| assert_equal before[i], addr(objs[i]), "pinned #{objs[i].inspect[0, 40]} moved" }
      moved = objs.each_index.count { |i| before[i] != addr(objs[i]) }
      assert_operator moved, :>=, 2000
    RUBY
  end

  def test_fragmented_heap_ends_with_fewer_pages
    assert_gc_script(PRELUDE + <<~'RUBY', timeout: 300, env: COMPACT_ONLY)
      srand(1234)
      objs = Array.new(200_000) { |i| i.even? ? "str #{i}" : [i] }
      keep = objs.each_index.select { rand < 0.1 }
      kept = keep.map { objs[_1] }
      objs = nil
      GC.start
      GC.start
      pages = GC.stat(:heap_allocated_pages)
      eden = GC.stat(:heap_eden_pages)
      info = GC.compact
      refute_empty info[:moved]
      after = GC.stat(:heap_allocated_pages)
      assert_operator after, :<, pages, "pages: #{pages} before, #{after} after"
      # Mosaic gives the emptied pages to its pool at once (the default GC frees them lazily).
      assert_operator after, :<, pages * 0.6, "pages: #{pages} before, #{after} after" if MOSAIC_GC
      assert_operator GC.stat(:heap_eden_pages), :<, eden
      kept.zip(keep) { |o, i| assert_equal(i.even? ? "str #{i}" : [i], o) }
      GC.verify_internal_consistency
    RUBY
  end

  # GC.compact fills pages that cannot empty (they hold an object that never moves: here
  # dynamic Symbols) before the pages whose objects can all move, so those empty. (Ordered by
  # fill alone, the sparse Symbol pages were evacuated first and kept their free slots.)
  def test_pages_that_cannot_empty_are_filled_first
    omit_under_stress_compact
    assert_gc_script(PRELUDE + <<~'RUBY', env: COMPACT_ONLY)
      def page(o) = addr(o).to_i(16) & ~0xffff
      srand(1)
      GC.start
      GC.disable                    # fresh pages in allocation order: no hole is reused
      syms = []
      junk = nil
      (1637 * 8).times { |i| if i % 800 == 0 then syms << :"fixed_sym_#{i}" else junk = "junk #{i}" end }
      live = Array.new(20_000) { |i| "live #{i}" }
      kept = live.select { rand < 0.5 }
      live = junk = nil
      GC.enable
      GC.start
      sym_pages = syms.map { page(_1) }.uniq
      assert_operator kept.count { sym_pages.include?(page(_1)) }, :<, kept.size * 0.2
      before = GC.stat_heap(0, :heap_eden_pages)
      GC.compact
      after = GC.stat_heap(0, :heap_eden_pages)
      on_sym_pages = kept.count { sym_pages.include?(page(_1)) }
      msg = "40 B pages #{before} -> #{after}; #{on_sym_pages} kept strings on the #{sym_pages.size} pages with Symbols"
      if MOSAIC_GC
        assert_operator after, :<=, before - kept.size / 1637, msg
        assert_operator on_sym_pages, :>=, kept.size * 0.35, msg
      end
      assert_equal syms, syms.map { _1.to_s.to_sym }
      srand(1)
      assert_equal Array.new(20_000) { |i| "live #{i}" }.select { rand < 0.5 }, kept
      GC.verify_internal_consistency
    RUBY
  end

  def test_auto_compact_flag_and_stats
    # Policy off: the GC.start below must not compact (Mosaic's fragmentation policy may).
    assert_gc_script(PRELUDE + <<~'RUBY', env: { "MOSAIC_AUTO_COMPACT" => "off" })
      assert_equal false, GC.auto_compact
      assert_equal true, (GC.auto_compact = true)
      assert_equal true, GC.auto_compact
      count = GC.stat(:compact_count)
      GC.start
      assert_operator GC.stat(:compact_count), :>, count
      # Compaction sweeps at once, but latest_gc_info says what the cycle was asked, as the
      # default GC does under auto_compact (CRuby's test_start_immediate_sweep).
      count = GC.stat(:compact_count)
      GC.start(immediate_sweep: false)
      assert_equal count + 1, GC.stat(:compact_count)
      assert_equal false, GC.latest_gc_info(:immediate_sweep)
      GC.auto_compact = false
      assert_equal false, GC.auto_compact
      count = GC.stat(:compact_count)
      GC.start
      assert_equal count, GC.stat(:compact_count)
      info = GC.latest_compact_info
      assert_equal %i[considered moved moved_up moved_down], info.keys.first(4)
      refute_empty info[:considered]
      GC.verify_compaction_references(double_heap: true)
      GC.verify_compaction_references(expand_heap: false)
      GC.verify_compaction_references
    RUBY
  end

  # ---------------------------------------------------------------- the fragmentation policy
  # (MOSAIC_AUTO_COMPACT=fragmentation, compact.c's mosaic_compact_select): a major GC, without
  # GC.compact and with GC.auto_compact false, compacts the classes whose occupied pages are
  # sparse enough that packing them frees pages, and moves at most a budget of objects.

  FRAGMENT = <<~'RUBY'
    def page_count(i) = GC.stat_heap(i, :heap_eden_pages)
    # 300,000 40-byte objects on fresh pages, 10% kept at random: sparse pages in class 0.
    def fragment_40
      srand(7)
      objs = Array.new(300_000) { |i| i.even? ? "s#{i}" : [i] }
      objs.select { rand < 0.1 }
    end
  RUBY

  def test_fragmentation_policy_compacts_a_sparse_class_at_a_major
    omit "Mosaic's auto-compaction policy" unless mosaic?
    omit_under_stress_compact
    assert_gc_script(PRELUDE + FRAGMENT + <<~'RUBY', env: { "MOSAIC_AUTO_COMPACT" => "fragmentation" })
      assert_equal :fragmentation, GC.config[:auto_compact_policy]
      assert_equal false, GC.auto_compact     # what the user set, not the policy
      kept = fragment_40
      before_pages = page_count(0)
      count = GC.stat(:compact_count)
      GC.start                               # a plain major GC: no GC.compact
      assert_equal count + 1, GC.stat(:compact_count)
      assert_equal 1, GC.stat(:mosaic_fragmentation_compact_count)
      info = GC.latest_compact_info
      assert_equal :fragmentation, info[:mosaic_trigger]
      assert_include info[:mosaic_classes].keys, BASE
      c = info[:mosaic_classes][BASE]
      assert_operator c[:occupancy], :<=, 0.5
      assert_operator c[:freeable_pages], :>=, 2
      assert_operator c[:freed_pages], :>, 0
      assert_operator info[:moved].values.sum, :>, 0
      assert_equal GC.stat(:mosaic_compact_freed_pages), info[:mosaic_classes].sum { _2[:freed_pages] }
      # The sweep alone frees pages with nothing live; the compaction frees the sparse ones too.
      assert_operator page_count(0), :<=, before_pages - c[:freed_pages]
      assert_equal fragment_40, kept         # the same objects, rebuilt: nothing lost or changed
      GC.verify_internal_consistency
    RUBY
  end

  # The same heap under MOSAIC_AUTO_COMPACT=off: the major GC does not compact (so the test
  # above fails without the policy).
  def test_policy_off_does_not_compact_at_a_major
    omit "Mosaic's auto-compaction policy" unless mosaic?
    omit_under_stress_compact
    assert_gc_script(PRELUDE + FRAGMENT + <<~'RUBY', env: { "MOSAIC_AUTO_COMPACT" => "off" })
      assert_equal :off, GC.config[:auto_compact_policy]
      kept = fragment_40
      GC.start
      GC.start
      assert_equal 0, GC.stat(:compact_count)
      assert_equal 0, GC.stat(:mosaic_fragmentation_compact_count)
      # Switched on at run time, the next major compacts.
      GC.config(auto_compact_policy: :fragmentation)
      GC.start
      assert_equal 1, GC.stat(:mosaic_fragmentation_compact_count)
      refute_empty kept
    RUBY
  end

  # The measure keeps what the pacer's shrink keeps, by the ratio in force at this GC: raised by
  # GC.config just before the major, heap_free_slots_max_ratio 0.95 lets class 0 keep 20x its live
  # slots, more than the sparse class has, so nothing is freeable and the major does not compact.
  # (The measure once read a copy of the ratio that only the previous GC's pacing had set, and
  # compacted here.)
  def test_fragmentation_policy_measures_with_the_ratio_in_force
    omit "Mosaic's auto-compaction policy" unless mosaic?
    omit_under_stress_compact
    assert_gc_script(PRELUDE + FRAGMENT + <<~'RUBY', env: { "MOSAIC_AUTO_COMPACT" => "fragmentation" })
      _kept = fragment_40
      GC.config(heap_free_slots_max_ratio: 0.95)
      GC.start
      assert_equal 0, GC.stat(:mosaic_fragmentation_compact_count)
      _kept = nil
      _kept = fragment_40
      GC.config(heap_free_slots_max_ratio: 0.65)
      GC.start
      assert_equal 1, GC.stat(:mosaic_fragmentation_compact_count)
    RUBY
  end

  # A dense class is not touched: only the sparse class takes part, and the dense class's
  # objects keep their addresses.
  def test_fragmentation_policy_leaves_a_dense_class_alone
    omit "Mosaic's auto-compaction policy" unless mosaic?
    omit_under_stress_compact
    assert_gc_script(PRELUDE + FRAGMENT + <<~'RUBY', env: { "MOSAIC_AUTO_COMPACT" => "fragmentation" })
      # Dense: 100,000 80-byte strings, all kept (an embedded String of 41..56 bytes).
      dense = Array.new(100_000) { |i| ("d%07d" % i) * 6 }
      assert_equal 2 * BASE, slot(dense[0])
      GC.start
      GC.start
      addrs = dense.map { addr(_1) }
      count = GC.stat(:mosaic_fragmentation_compact_count)
      _kept = fragment_40                     # now fragment class 0
      GC.start
      assert_equal count + 1, GC.stat(:mosaic_fragmentation_compact_count)
      info = GC.latest_compact_info
      assert_equal :fragmentation, info[:mosaic_trigger]
      assert_equal [BASE], info[:mosaic_classes].keys
      assert_operator info[:mosaic_classes][BASE][:freed_pages], :>, 0
      assert_equal addrs, dense.map { addr(_1) }
      dense.each_with_index { |s, i| assert_equal(("d%07d" % i) * 6, s) }
    RUBY
  end

  # The pause bound: a major GC under the policy moves at most the budget
  # (max(2048, compact_pause_fraction * mark time / measured move cost)); with the fraction at
  # 0 the budget is its floor, and a heap that needs more moves gets only that many, sparsest
  # pages first, so pages still empty. GC.compact and GC.auto_compact are not bounded.
  def test_fragmentation_policy_moves_at_most_its_budget
    omit "Mosaic's auto-compaction policy" unless mosaic?
    omit_under_stress_compact
    assert_gc_script(PRELUDE + FRAGMENT + <<~'RUBY', env: { "MOSAIC_AUTO_COMPACT" => "fragmentation" })
      GC.config(compact_pause_fraction: 0)
      _kept = fragment_40
      GC.start
      info = GC.latest_compact_info
      assert_equal :fragmentation, info[:mosaic_trigger]
      assert_equal 2048, info[:mosaic_move_budget]
      assert_equal 2048, info[:moved].values.sum
      assert_operator info[:mosaic_classes][BASE][:freed_pages], :>, 0
      # Not bounded: GC.auto_compact = true compacts every major, all it can.
      GC.auto_compact = true
      _kept2 = fragment_40
      GC.start
      info = GC.latest_compact_info
      assert_equal :auto_compact, info[:mosaic_trigger]
      assert_nil info[:mosaic_move_budget]
      assert_operator info[:moved].values.sum, :>, 2048
    RUBY
  end

  # GC.start(immediate_sweep: false) asked for a lazy sweep: the policy does not compact it.
  def test_fragmentation_policy_keeps_an_explicit_lazy_sweep
    omit "Mosaic's auto-compaction policy" unless mosaic?
    omit_under_stress_compact
    assert_gc_script(PRELUDE + FRAGMENT + <<~'RUBY', env: { "MOSAIC_AUTO_COMPACT" => "fragmentation" })
      _kept = fragment_40
      GC.start(immediate_sweep: false)
      assert_equal false, GC.latest_gc_info(:immediate_sweep)
      assert_equal 0, GC.stat(:compact_count)
    RUBY
  end

  # Settings: MOSAIC_AUTO_COMPACT / GC.config. A bad environment value warns and keeps the
  # default; a bad GC.config value raises and changes nothing.
  def test_auto_compact_policy_settings
    omit "Mosaic's auto-compaction policy" unless mosaic?
    assert_gc_script(<<~'RUBY', env: { "MOSAIC_AUTO_COMPACT" => "always" })
      assert_equal :always, GC.config[:auto_compact_policy]
      assert_equal false, GC.auto_compact
      GC.start
      assert_equal :always, GC.latest_compact_info[:mosaic_trigger]
      assert_raise(ArgumentError) { GC.config(auto_compact_policy: :sometimes) }
      assert_raise(ArgumentError) { GC.config(auto_compact_policy: :off, compact_occupancy: 1.5) }
      assert_raise(ArgumentError) { GC.config(compact_pause_fraction: -1) }
      assert_raise(TypeError) { GC.config(compact_occupancy: "half") }
      assert_equal :always, GC.config[:auto_compact_policy]
      GC.config(auto_compact_policy: "off", compact_occupancy: 0.25)
      assert_equal :off, GC.config[:auto_compact_policy]
      assert_equal 0.25, GC.config[:compact_occupancy]
    RUBY
    env = { "RUBY_GC_LIBRARY" => LIB_NAME, "MOSAIC_AUTO_COMPACT" => "sometimes", "MOSAIC_COMPACT_OCCUPANCY" => "2" }
    assert_in_out_err([env, "-e", "p GC.config.values_at(:auto_compact_policy, :compact_occupancy)"], "",
                      ["[:off, 0.5]"], /invalid value for MOSAIC_AUTO_COMPACT: sometimes.*\n.*MOSAIC_COMPACT_OCCUPANCY=2.* is ignored/)
  end

  # A heap walk holds a page snapshot and object addresses: GC.compact inside one is a plain
  # major GC (Mosaic), and the walk goes on over intact objects.
  def test_compact_inside_a_heap_walk
    omit "counts compactions; MOSAIC_STRESS_COMPACT forces them" if ENV["MOSAIC_STRESS_COMPACT"]
    assert_gc_script(PRELUDE + <<~'RUBY')
      strs = Array.new(5000) { |i| "walk #{i}" }
      count = GC.stat(:compact_count)
      seen = 0
      ObjectSpace.each_object(String) do |s|
        GC.compact if seen == 0
        seen += 1
      end
      assert_operator seen, :>=, 5000 if MOSAIC_GC   # the default GC moves objects under the walk
      assert_equal count, GC.stat(:compact_count) if MOSAIC_GC
      strs.each_with_index { |s, i| assert_equal "walk #{i}", s }
      GC.compact
      assert_equal count + 1, GC.stat(:compact_count) if MOSAIC_GC
      GC.verify_internal_consistency
    RUBY
  end

  # Other Ractors allocate while the main Ractor compacts: they are stopped during the moves,
  # their stacks pin what they hold, and their data comes through intact.
  def test_compact_while_ractors_allocate
    assert_gc_script(PRELUDE + <<~'RUBY', timeout: 300)
      Warning[:experimental] = false
      rs = 3.times.map do |k|
        Ractor.new(k) do |k|
          keep = []
          100.times do |r|
            a = Array.new(1000) { |i| "r#{k}-#{r}-#{i}" }
            keep << a.values_at(0, 500, 999)
            h = {}
            200.times { |i| h[Object.new] = i }
            raise "hash lost a key" unless h.keys.each_with_index.all? { |o, i| h[o] == i }
          end
          keep.each_with_index.all? { |(a, b, c), r| a == "r#{k}-#{r}-0" && b == "r#{k}-#{r}-500" && c == "r#{k}-#{r}-999" }
        end
      end
      objs = Array.new(20_000) { |i| [i, "m#{i}"] }
      10.times { GC.compact }
      assert_equal [true, true, true], rs.map(&:take)
      objs.each_with_index { |(i, s), j| assert_equal [j, "m#{j}"], [i, s] }
      GC.verify_internal_consistency
    RUBY
  end

  # Moved objects stay in every address-keyed table: generic ivars (on Strings and Arrays),
  # object ids, WeakMap keys, finalizers, interned strings, dynamic Symbols; the heap checker
  # (which compares each table with the heap) passes after the moves.
  def test_address_keyed_tables_follow_moves
    assert_gc_script(PRELUDE + <<~'RUBY')
      strs = Array.new(2000) { |i| s = "gen #{i}"; s.instance_variable_set(:@g, [i]); s }
      arys = Array.new(500) { |i| a = [i]; a.instance_variable_set(:@g, "a#{i}"); a }
      ids = strs.map(&:object_id)
      interned = Array.new(500) { |i| -"interned #{i}" }
      syms = Array.new(500) { |i| :"dsym_compact_#{i}" }
      wm = ObjectSpace::WeakMap.new
      strs.each_with_index { |s, i| wm[s] = arys[i % 500] }
      fin = Array.new(200) { Object.new }
      fin.each { |o| ObjectSpace.define_finalizer(o, proc {}) }
      before = strs.map { addr(_1) }
      GC.verify_compaction_references(toward: :empty, expand_heap: true)
      assert_operator strs.map { addr(_1) }.zip(before).count { |a, b| a != b }, :>=, 1900 if MOSAIC_GC
      GC.verify_internal_consistency
      strs.each_with_index do |s, i|
        assert_equal [i], s.instance_variable_get(:@g)
        assert_same arys[i % 500], wm[s]
      end
      arys.each_with_index { |a, i| assert_equal "a#{i}", a.instance_variable_get(:@g) }
      assert_equal ids, strs.map(&:object_id)
      ids.each_with_index { |id, i| assert_same strs[i], ObjectSpace._id2ref(id) }
      interned.each_with_index { |f, i| assert_same f, -"interned #{i}" }
      syms.each_with_index { |sym, i| assert_same sym, "dsym_compact_#{i}".to_sym }
    RUBY
  end

  # The checking build's MOSAIC_STRESS_COMPACT=1: each MOSAIC_STRESS_MINOR collection is a major
  # GC that compacts (every other one toward the emptiest pages), verified like every GC there.
  def test_stress_compact_moves_objects_at_allocation_points
    omit "MOSAIC_STRESS_COMPACT needs Mosaic's checking build" unless mosaic? && GC::OPTS.include?("MOSAIC_CHECK")
    env = { "MOSAIC_STRESS_MINOR" => "500", "MOSAIC_STRESS_COMPACT" => "1" }
    assert_gc_script(PRELUDE + <<~'RUBY', env: env)
      keep = Array.new(3000) { |i| s = "keep #{i}"; s.instance_variable_set(:@i, i); s }
      ids = keep.map(&:object_id)
      before = keep.map { addr(_1) }
      count = GC.stat(:compact_count)
      20_000.times { |i| keep[i % 3000].dup }
      assert_operator GC.stat(:compact_count), :>=, count + 5
      assert_operator keep.map { addr(_1) }.zip(before).count { |a, b| a != b }, :>, 300
      keep.each_with_index { |s, i| assert_equal "keep #{i}", s; assert_equal i, s.instance_variable_get(:@i) }
      assert_equal ids, keep.map(&:object_id)
    RUBY
  end
end
