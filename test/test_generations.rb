require_relative "helper"

# Generations: objects age and become old; minor GCs trace only young objects and the
# remembered set, so every old -> young edge must survive them.
class TestMosaicGenerations < Test::Unit::TestCase
  include MosaicTestHelper

  def test_object_becomes_old_after_surviving_three_collections
    assert_gc_script(<<~'RUBY')
      require "objspace"
      GC.disable
      o = Object.new
      2.times { GC.start }
      assert_not_include ObjectSpace.dump(o), '"old":true'
      GC.start
      assert_include ObjectSpace.dump(o), '"old":true'
    RUBY
  end

  def test_young_churn_runs_minor_collections
    omit "counts minor GCs; MOSAIC_STRESS_COMPACT makes the forced GCs major" if ENV["MOSAIC_STRESS_COMPACT"]
    assert_gc_script(<<~'RUBY')
      keep = Array.new(50_000) { |i| i.to_s }
      4.times { GC.start }
      minor = GC.stat(:minor_gc_count)
      2_000_000.times { Object.new }
      assert_operator GC.stat(:minor_gc_count), :>, minor
      assert_equal "49999", keep.last
    RUBY
  end

  def test_old_to_young_edges_survive_minor_collections
    omit "counts minor GCs; MOSAIC_STRESS_COMPACT makes the forced GCs major" if ENV["MOSAIC_STRESS_COMPACT"]
    assert_gc_script(<<~'RUBY', timeout: 300)
      Pair = Struct.new(:a, :b)
      class Holder; attr_accessor :x; end
      ary, hash, str_ary, holder, pair = [], {}, [], Holder.new, Pair.new
      wm = ObjectSpace::WeakMap.new
      keys, values = [], []   # WeakMap holds both weakly: keep both alive
      4.times { GC.start }   # all of the containers are old now
      50.times do |round|
        ary << "a#{round}"
        hash["k#{round}"] = ["v#{round}"]
        str_ary.unshift(round.to_s * 3)
        holder.x = { round => "h#{round}" }
        pair.b = [round]
        k = "wk#{round}"
        v = "wv#{round}"
        keys << k
        values << v
        wm[k] = v
        20_000.times { [] }    # young garbage: minor GCs in between
      end
      assert_operator GC.stat(:minor_gc_count), :>, 5
      GC.verify_internal_consistency
      assert_equal (0...50).map { |r| "a#{r}" }, ary
      assert_equal ["v49"], hash["k49"]
      assert_equal "494949", str_ary.first
      assert_equal({ 49 => "h49" }, holder.x)
      assert_equal [49], pair.b
      keys.each_with_index { |k, r| assert_equal "wv#{r}", wm[k] }
    RUBY
  end

  def test_full_mark_false_is_a_minor_gc
    assert_gc_script(<<~'RUBY')
      3.times { GC.start }
      GC.start(full_mark: false)
      assert_nil GC.latest_gc_info(:major_by)
      GC.start(full_mark: true)
      if ENV["MOSAIC_STRESS_MINOR"]
        # The stress GCs in between may have made the pacer ask for a major GC already
        # (:nofree, :oldgen); it is reported first, as in the default GC.
        refute_nil GC.latest_gc_info(:major_by)
      else
        assert_equal :force, GC.latest_gc_info(:major_by)
      end
    RUBY
  end

  def test_old_garbage_is_collected_by_a_major_gc
    assert_gc_script(<<~'RUBY', timeout: 300)
      $big = Array.new(300_000) { Object.new }
      4.times { GC.start }
      old = GC.stat(:old_objects)
      $big = nil
      GC.start(full_mark: false)
      assert_operator GC.stat(:old_objects), :>=, old - 1_000, "a minor GC keeps old garbage"
      GC.start
      assert_operator GC.stat(:old_objects), :<, old - 250_000
    RUBY
  end

  def test_generations_can_be_turned_off
    omit "Mosaic's own variable" unless mosaic?
    out, err, status = EnvUtil.invoke_ruby(
      [{ "RUBY_GC_LIBRARY" => LIB_NAME, "MOSAIC_GENERATIONAL" => "0" }, "-e",
       "1_000_000.times { Object.new }; p GC.config[:generational], GC.stat(:minor_gc_count), GC.count > 0"],
      "", true, true)
    assert_predicate status, :success?, err
    assert_equal "false\n0\ntrue\n", out
  end

  # With full marks disabled nothing may be promoted: an object that survives a few minor GCs
  # and then dies would otherwise be old garbage that no GC frees until an explicit GC.start
  # (the default GC stops aging too). (Review bug 4.)
  def test_no_promotion_while_full_marks_are_disabled
    assert_gc_script(<<~'RUBY', timeout: 300)
      4.times { GC.start }
      GC.config(rgengc_allow_full_mark: false)
      old0, live0 = GC.stat(:old_objects), GC.stat(:heap_live_slots)
      minor0 = GC.stat(:minor_gc_count)
      rounds(30).times do
        batch = Array.new(5_000) { Object.new }
        6.times { 40_000.times { [] } }       # young garbage: minor GCs while the batch lives
        batch.clear
      end
      assert_operator GC.stat(:minor_gc_count) - minor0, :>=, 10
      assert_operator GC.stat(:old_objects) - old0, :<, 5_000
      GC.start(full_mark: false)
      assert_operator GC.stat(:heap_live_slots) - live0, :<, 20_000
    RUBY
  end

  # The old-object limit counts what a major found live, not only what was old: a structure
  # still young at a major, then promoted, stays within it (old + (factor - 1) * live). With
  # old * factor, its promotion asked for an :oldgen major that found it all live (fluentd's
  # split array, every second major).
  def test_promoting_what_a_major_found_live_asks_for_no_major
    omit "Mosaic's generations" unless mosaic?
    omit "reads Mosaic's pacing; the stress gate forces GCs" if ENV["MOSAIC_STRESS_MINOR"]
    assert_gc_script(<<~'RUBY')
      base = Array.new(50_000) { [] }
      3.times { GC.start }                       # base is old
      GC.disable
      round = Array.new(300_000) { [] }          # all young at the next major
      GC.enable
      GC.start
      old0 = GC.stat(:old_objects)
      majors = GC.stat(:major_gc_count)
      4.times { GC.start(full_mark: false) }     # round ages to old in these minors
      assert_operator GC.stat(:old_objects), :>, old0 + 250_000, "the structure was not promoted"
      assert_nil GC.latest_gc_info(:need_major_by), "its promotion asked for a major GC"
      assert_equal majors, GC.stat(:major_gc_count), GC.latest_gc_info.inspect
      [base.size, round.size]
    RUBY
  end

  # Process.warmup makes every survivor old; the old-object limit must follow, or the first GC
  # after it (in each forked child of a preforking server) is a major for :oldgen.
  def test_warmup_does_not_make_the_next_gc_major
    omit "Mosaic's generations" unless mosaic?
    omit "reads Mosaic's pacing; the stress gate forces GCs" if ENV["MOSAIC_STRESS_MINOR"]
    assert_gc_script(<<~'RUBY')
      GC.disable
      keep = Array.new(100_000) { |i| [i] }  # young when warmup starts: made old by it
      GC.enable
      Process.warmup
      assert_operator GC.stat(:old_objects), :<=, GC.stat(:old_objects_limit)
      majors = GC.stat(:major_gc_count)
      600_000.times { |i| [i] }  # young garbage: minor GCs
      assert_equal majors, GC.stat(:major_gc_count), GC.latest_gc_info.inspect
      keep.size
    RUBY
  end

  # Found by the review of the tri-color change: CRuby announces a loading
  # iseq's literals (RB_OBJ_WRITTEN) before it publishes the code that holds them (compile.c,
  # ibf_load_code). A method whose load spans collections becomes old while it loads; a
  # literal announced then remembers it, but a minor GC before the publication traced it
  # without the literal and did not remember it again, so after the publication an old iseq
  # referred to a young literal unremembered, and once the loader died a minor GC could free
  # it. A Bignum literal: a new object at every load (a string literal is interned, and old
  # already). In the checking build, a collection every 200 allocations puts minor GCs in that
  # window, and the check after each reported "old ... (type 0x1a) refers to young ... (type
  # 0xa) but is not remembered" before the fix (6 runs of 7, checked by reverting it).
  def test_literals_of_an_iseq_loaded_from_binary_over_several_collections
    env = checking_build? ? { "MOSAIC_STRESS_MINOR" => "200" } : {}
    assert_gc_script(<<~'RUBY', env: env, timeout: 300)
      $VERBOSE = nil   # each round defines the method again
      inner, paths = 2000, 150
      src = +"def loaded\n"
      src << "  x = proc { [#{(0...inner).map { |i| "\"in-#{i}\"" }.join(", ")}] }\n"
      src << "  y = 123456789012345678901234567890\n"
      # Constant paths load their names (allocations the iseq is not told of) after the literal.
      src << "  if y.nil?\n#{(0...paths).map { |i| "    Cns#{i}::Sub#{i}\n" }.join}  end\n"
      src << "  [x, y]\nend\n"
      bin = RubyVM::InstructionSequence.compile(src).to_binary
      20.times do |r|
        pad = Array.new(r * 37) { |i| "p#{i}" }   # shifts where the collections fall in the load
        RubyVM::InstructionSequence.load_from_binary(bin).eval
        pad.clear
        Array.new(3000) { |i| "g#{i}" }   # collections after the loader died
        x, y = loaded
        assert_equal 123456789012345678901234567890, y
        assert_equal "in-#{inner - 1}", x.call.last
        Object.send(:remove_method, :loaded)
      end
      GC.verify_internal_consistency
    RUBY
  end
end
