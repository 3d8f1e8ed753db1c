require_relative "helper"

# Finalizers run once, after the object is unreachable, with its object id; at exit the rest run.
class TestMosaicFinalize < Test::Unit::TestCase
  include MosaicTestHelper

  def test_thousands_of_finalizers_run
    assert_gc_script(<<~'RUBY', timeout: 300)
      ran = []
      ids = []
      # The finalizer must not capture the object, or it keeps it alive forever.
      def recorder(ran) = proc { |id| ran << id }
      def make(ran, ids)
        5_000.times do
          o = Object.new
          ids << o.object_id
          ObjectSpace.define_finalizer(o, recorder(ran))
        end
      end
      make(ran, ids)
      10.times { GC.start; break if ran.size >= 4_990 }
      # A few may be held by a stale conservative reference; nearly all must have run.
      assert_operator ran.size, :>=, 4_990
      assert_equal ran.size, ran.uniq.size, "a finalizer ran twice"
      assert_empty ran - ids
    RUBY
  end

  def test_undefine_finalizer
    assert_gc_script(<<~'RUBY')
      ran = []
      def recorder(ran) = proc { ran << 1 }
      2_000.times do
        o = Object.new
        ObjectSpace.define_finalizer(o, recorder(ran))
        ObjectSpace.undefine_finalizer(o)
      end
      3.times { GC.start }
      assert_equal [], ran
    RUBY
  end

  def test_finalizers_run_at_exit
    assert_in_out_err([{ "RUBY_GC_LIBRARY" => LIB_NAME }, "-e", <<~'RUBY'], "", %w[first second], [])
      a = Object.new
      b = Object.new
      ObjectSpace.define_finalizer(a, proc { puts "first" })
      ObjectSpace.define_finalizer(b, proc { puts "second" })
      $keep = [a, b]
    RUBY
  end

  def test_data_objects_with_deferred_free
    # Dir and Thread::Mutex are T_DATA; many of them exercise zombie handling.
    assert_gc_script(<<~'RUBY')
      20_000.times { Thread::Mutex.new; Thread::Queue.new }
      5.times { GC.start }
      assert_equal 0, GC.stat(:heap_final_slots)
      GC.verify_internal_consistency
    RUBY
  end

  # Regression (found by CRuby's TestRubyOptions#test_free_at_exit_env_var under Mosaic):
  # finishing a lazy sweep at exit made new zombies (garbage Files), and the exit-time pass
  # then called rb_gc_obj_free on them a second time ([BUG] unknown data type 0x1d).
  def test_free_at_exit_with_pending_zombies
    env = { "RUBY_GC_LIBRARY" => LIB_NAME, "RUBY_FREE_AT_EXIT" => "1" }
    code = '1000.times { File.open("/dev/null") }; GC.start(immediate_sweep: false)'
    _out, err, status = EnvUtil.invoke_ruby([env, "-W0", "-e", code], "", true, true)
    assert_predicate status, :success?, err
    assert_not_match(/\[BUG\]/, err)
  end
end
