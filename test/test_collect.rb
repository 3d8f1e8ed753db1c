require_relative "helper"

# Collection frees garbage, keeps what is reachable, and survives large and deep graphs.
class TestMosaicCollect < Test::Unit::TestCase
  include MosaicTestHelper

  def test_garbage_is_freed_and_live_data_kept
    assert_gc_script(<<~'RUBY')
      keep = Array.new(10_000) { |i| "keep-#{i}" }
      before = GC.stat(:total_freed_objects)
      200_000.times { |i| "garbage-#{i}" }
      GC.start
      assert_operator GC.stat(:total_freed_objects) - before, :>=, 200_000
      assert_equal "keep-9999", keep[9999]
      assert_equal 10_000, keep.count { |s| s.start_with?("keep-") }
    RUBY
  end

  # The sweep clears a dead embedded array, embedded string, float, rational or complex by its
  # header alone (sweep.c, free_is_trivial_p), unless something outside the slot names it: its
  # generic ivars, its object id, its finalizer, the interned-string table. Each of those must
  # still be cleaned when it dies, or a table keeps naming the slot. The heap checker
  # (GC.verify_internal_consistency) carries most of the test: it fails on an interned-string,
  # generic-ivar or object-id entry that names a free slot or an object without the table's flag.
  # Half the rounds leave the sweep lazy, to the background sweeper where it runs.
  def test_dead_objects_leave_nothing_behind_in_the_vm_tables
    assert_gc_script(<<~'RUBY', timeout: 300)
      FINALIZED = []
      FIN = proc { FINALIZED << 1 }   # made here: a proc made in the loop would keep its array alive
      ids = {}
      rounds(10).times do |round|
        objs = Array.new(2_000) do |i|
          case i % 5
          when 0 then a = [i, round]; a.instance_variable_set(:@tag, "tag-#{i}"); a
          when 1 then s = +"str-#{i}"; s.instance_variable_set(:@tag, "tag-#{i}"); s
          when 2 then a = [i]; ids[a.object_id] = i; a
          when 3 then a = [i, i]; ObjectSpace.define_finalizer(a, FIN); a
          when 4 then -"interned-#{round}-#{i}"
          end
        end
        objs.clear
        GC.start(immediate_sweep: round.even?)
        # New objects of the same kinds take the slots just freed (and finish a lazy sweep).
        fresh = Array.new(4_000) { |i| i.even? ? [i, round] : +"str-#{i}" }
        GC.start
        GC.verify_internal_consistency
        2_000.times do |i|
          next unless i % 5 == 4
          s = -"interned-#{round}-#{i}"
          assert_equal "interned-#{round}-#{i}", s
          assert_predicate s, :frozen?
          assert_same s, -"interned-#{round}-#{i}"
        end
        fresh.clear
      end
      GC.start
      # An id names its own array while a stale stack word keeps it alive, and nothing after.
      ids.each do |id, i|
        found = begin
          ObjectSpace._id2ref(id)
        rescue RangeError
          nil
        end
        assert_equal [i], found, "object id #{id} names another object" if found
      end
      # All finalizers ran, but for the few a stale conservative reference may hold.
      assert_operator FINALIZED.size, :>=, rounds(10) * 400 * 99 / 100
    RUBY
  end

  # An embedded T_OBJECT turned "too complex" keeps ROBJECT_EMBED and its ivars move to an
  # st_table: the sweep's trivial path must leave it to rb_gc_obj_free, which frees the table
  # (sweep.c, free_is_trivial_p asks the shape; MOSAIC_TOO_COMPLEX_SHAPE_ID mirrors CRuby's id).
  def test_dead_too_complex_objects_free_their_tables
    omit "Mosaic's live-malloc figure" unless mosaic?
    assert_gc_script(<<~'RUBY', timeout: 300)
      require "objspace"
      class TooComplex; end
      # More shape variations than a class may have (shape.c, SHAPE_MAX_VARIATIONS: 8) make the
      # class's objects too complex as they take a new ivar.
      12.times { |k| TooComplex.new.instance_variable_set(:"@v#{k}", k) }
      probe = TooComplex.new
      probe.instance_variable_set(:@x, 1)
      dump = ObjectSpace.dump(probe)
      assert_include dump, '"too_complex_shape":true'
      assert_include dump, '"embedded":true'
      assert_include dump, '"shape_id":2,', "CRuby's too-complex shape id is not the one Mosaic mirrors"
      GC.start
      before = GC.stat(:mosaic_malloc_bytes)
      objs = Array.new(50_000) do |i|
        o = TooComplex.new
        o.instance_variable_set(:@x, i)
        o.instance_variable_set(:@y, i)
        o
      end
      held = GC.stat(:mosaic_malloc_bytes) - before
      assert_operator held, :>, 50_000 * 64, "the objects' ivar tables are malloc'd"
      objs.clear
      GC.start
      GC.start
      assert_operator GC.stat(:mosaic_malloc_bytes) - before, :<, held / 10, "dead too-complex objects kept their tables"
    RUBY
  end

  def test_every_size_class_survives_collections
    assert_gc_script(<<~'RUBY')
      data = (0..700).step(7).map { |n| ["s" * n, Array.new(n / 8) { |i| i }, { n => n.to_s }] }
      5.times { GC.start; 50_000.times { Object.new } }
      (0..700).step(7).each_with_index do |n, i|
        s, a, h = data[i]
        assert_equal "s" * n, s
        assert_equal (0...(n / 8)).to_a, a
        assert_equal({ n => n.to_s }, h)
      end
    RUBY
  end

  def test_million_deep_linked_list
    assert_gc_script(<<~'RUBY', timeout: 300)
      Node = Struct.new(:next, :value)
      head = nil
      1_000_000.times { |i| head = Node.new(head, i) }
      GC.start
      n = 0
      node = head
      while node
        n += 1
        node = node.next
      end
      assert_equal 1_000_000, n
      GC.verify_internal_consistency
    RUBY
  end

  def test_large_arrays_hashes_strings
    assert_gc_script(<<~'RUBY', timeout: 300)
      big_array = Array.new(2_000_000) { |i| i.to_s }
      big_hash = {}
      300_000.times { |i| big_hash["k#{i}"] = [i] }
      big_string = "x" * 50_000_000
      GC.start
      assert_equal "1999999", big_array[-1]
      assert_equal [299_999], big_hash["k299999"]
      assert_equal 50_000_000, big_string.bytesize
      GC.verify_internal_consistency
    RUBY
  end

  def test_heap_grows_then_returns_pages
    assert_gc_script(<<~'RUBY', timeout: 300)
      GC.start
      base = GC.stat(:heap_allocated_pages)
      $data = Array.new(1_500_000) { Object.new }
      grown = GC.stat(:heap_allocated_pages)
      assert_operator grown, :>, base + 100
      $data = nil
      4.times { GC.start }
      shrunk = GC.stat(:heap_allocated_pages)
      assert_operator shrunk, :<, grown / 2, "pages: base #{base}, grown #{grown}, after release #{shrunk}"
      assert_operator GC.stat(:total_freed_pages), :>, 0
    RUBY
  end

  def test_lazy_sweep_then_allocation
    assert_gc_script(<<~'RUBY')
      keep = []
      20.times do |round|
        300_000.times { |i| keep << i.to_s if i % 1000 == 0 }
        GC.start(immediate_sweep: false)
        assert_equal false, GC.latest_gc_info(:immediate_sweep)
        50_000.times { [1, 2, 3] }
      end
      assert_equal 20 * 300, keep.size
      assert keep.all? { |s| s.is_a?(String) && s.to_i % 1000 == 0 }
      GC.verify_internal_consistency
    RUBY
  end

  def test_disable_stops_collection
    assert_gc_script(<<~'RUBY')
      GC.start
      GC.disable
      c = GC.count
      500_000.times { Object.new }
      assert_equal c, GC.count
      assert_equal true, GC.enable, "GC.enable returns whether GC was disabled"
      500_000.times { Object.new }
      assert_operator GC.count, :>, c
    RUBY
  end

  # Page bodies come from arenas, one mapping each: hundreds of new pages must not add
  # hundreds of kernel mappings (a mapping per page capped the heap near vm.max_map_count,
  # ~4 GiB, and made fork pay per page). (Review bug 2.)
  def test_heap_growth_adds_few_memory_mappings
    # Under ThreadSanitizer, 383 new pages added 59 mappings, every one TSan's (shadow, meta and
    # trace ranges, its allocator's heap), none of Mosaic's arenas.
    omit "ThreadSanitizer maps its own memory as the heap grows" if tsan_build?
    assert_gc_script(<<~'RUBY')
      def mappings = File.readlines("/proc/self/maps").size
      GC.start
      pages0, maps0 = GC.stat(:heap_allocated_pages), mappings
      keep = Array.new(600_000) { |i| "str#{i}" }
      added_pages = GC.stat(:heap_allocated_pages) - pages0
      added_maps = mappings - maps0
      assert_operator added_pages, :>=, 300
      assert_operator added_maps, :<=, added_pages / 16 + 8, "#{added_pages} pages added #{added_maps} mappings"
      assert_equal "str599999", keep.last
      keep = nil
      GC.start
      # Returning pages and growing again reuses the same arenas. (The default GC unmaps
      # each freed page body on its own, so this half holds for Mosaic only.)
      again = Array.new(600_000) { |i| "str#{i}" }
      assert_operator mappings - maps0, :<=, added_pages / 16 + 8 if GC.config[:implementation] == "mosaic"
      assert_equal "str599999", again.last
    RUBY
  end
end
