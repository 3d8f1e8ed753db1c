require_relative "helper"

class TestMosaicWalk < Test::Unit::TestCase
  include MosaicTestHelper

  def test_each_object_sees_live_objects_only
    assert_gc_script(<<~'RUBY')
      class Marker; end
      keep = Array.new(1_000) { Marker.new }
      Array.new(5_000) { Marker.new }
      GC.start(immediate_sweep: false)
      n = ObjectSpace.each_object(Marker).count
      assert_operator n, :>=, 1_000
      assert_operator n, :<=, 1_010
      keep.clear
    RUBY
  end

  def test_each_object_survives_allocation_and_gc_in_block
    assert_gc_script(<<~'RUBY')
      seen = 0
      ObjectSpace.each_object(String) do |s|
        seen += 1
        100.times { "tmp" * 3 }
        GC.start if seen % 5_000 == 0
      end
      assert_operator seen, :>, 1_000
      GC.verify_internal_consistency
    RUBY
  end

  def test_raise_inside_each_object
    assert_gc_script(<<~'RUBY')
      assert_raise(RuntimeError) { ObjectSpace.each_object(String) { raise "stop" } }
      # The walk ended; pages may be released again.
      $data = Array.new(300_000) { Object.new }
      $data = nil
      4.times { GC.start }
      assert_operator GC.stat(:total_freed_pages), :>, 0
    RUBY
  end

  # Regression (found by CRuby's TestObjSpace#test_internal_class_of): a GC inside an
  # each_object block swept lazily, so the walk went on to yield unswept garbage; code that
  # kept those objects then held freed slots. Any GC during a walk must sweep at once.
  def test_gc_inside_walk_never_yields_garbage
    assert_gc_script(<<~'RUBY', timeout: 300)
      seen = []
      n = 0
      ObjectSpace.each_object(Array) do |a|
        n += 1
        if n % 100 == 0
          Array.new(2_000) { [n] }      # garbage arrays, spread over many pages
          GC.start(immediate_sweep: false)
        end
        seen << a
      end
      assert_operator n, :>, 300
      GC.start
      GC.verify_internal_consistency   # rb_bug if `seen` refers to a freed slot
      assert seen.all? { |a| a.is_a?(Array) }
    RUBY
  end

  # A walk suspended in a Fiber that is dropped (Enumerator#next not run to the end) never
  # runs its ensure clause. It must still end when its Fiber is freed: it used to keep every
  # page from going back to the OS, and every GC sweeping at once, for the rest of the
  # process. (Review bug 10.)
  def test_abandoned_walk_does_not_pin_the_heap
    assert_gc_script(<<~'RUBY', timeout: 300)
      def pages_after_churn
        GC.start
        3.times do
          a = Array.new(400_000) { "x" * 30 }
          a.clear
          4.times { GC.start }
        end
        GC.stat(:heap_allocated_pages)
      end
      def start_and_abandon_walk
        e = ObjectSpace.each_object(String)
        e.next
        nil
      end
      plain = pages_after_churn
      start_and_abandon_walk
      4.times { GC.start }
      after = pages_after_churn
      assert_operator after, :<=, plain + plain / 4, "pages: #{plain} without the walk, #{after} after it"
      if GC.config[:implementation] == "mosaic"  # a live walk makes Mosaic sweep at once
        GC.start(immediate_sweep: false)
        assert_equal false, GC.latest_gc_info(:immediate_sweep)
      end
    RUBY
  end

  # A suspended walk that can still resume keeps its pages: resuming it after collections
  # that freed lots of pages yields only live objects.
  def test_suspended_walk_resumes_safely_after_collections
    assert_gc_script(<<~'RUBY', timeout: 300)
      class Marker; end
      keep = Array.new(2_000) { Marker.new }
      e = ObjectSpace.each_object(Marker)
      first = e.next
      3.times do
        a = Array.new(200_000) { Marker.new }
        a.clear
        3.times { GC.start }
      end
      seen = 1
      loop { assert_kind_of Marker, e.next; seen += 1 }
      assert_kind_of Marker, first
      assert_operator seen, :>=, 1
      keep.clear
    RUBY
  end
end
