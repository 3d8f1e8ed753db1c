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
end
