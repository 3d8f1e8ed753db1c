require_relative "helper"

class TestMosaicObjectId < Test::Unit::TestCase
  include MosaicTestHelper

  def test_object_id_stable_and_forgotten
    assert_gc_script(<<~'RUBY')
      objs = Array.new(1_000) { Object.new }
      ids = objs.map(&:object_id)
      5.times { GC.start; 100_000.times { Object.new } }
      assert_equal ids, objs.map(&:object_id)
      assert_same objs[500], ObjectSpace._id2ref(ids[500])

      dead_ids = Array.new(1_000) { Object.new.object_id }
      3.times { GC.start }
      recycled = dead_ids.count do |id|
        ObjectSpace._id2ref(id)
        false
      rescue RangeError => e
        assert_match(/recycled object|not id value/, e.message)
        true
      end
      assert_operator recycled, :>=, 990
      assert_raise(RangeError) { ObjectSpace._id2ref(2**62) }
    RUBY
  end

  def test_ids_never_repeat
    assert_gc_script(<<~'RUBY')
      seen = {}
      20.times do
        10_000.times { id = Object.new.object_id; raise "repeated #{id}" if seen[id]; seen[id] = true }
        GC.start
      end
    RUBY
  end
end
