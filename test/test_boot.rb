require_relative "helper"

# The library is loaded and describes itself truthfully.
class TestMosaicBoot < Test::Unit::TestCase
  include MosaicTestHelper

  def test_loaded_gc_is_the_requested_one
    assert_equal GC_NAME, GC.config[:implementation]
    out = IO.popen([{ "RUBY_GC_LIBRARY" => LIB_NAME }, EnvUtil.rubybin, "-v"], &:read)
    assert_match(/\+GC\[#{GC_NAME}\]/, out)  # the name the library reports
  end

  def test_internal_constants_match_heap
    c = GC::INTERNAL_CONSTANTS
    assert_equal c[:HEAP_COUNT], GC.stat_heap.size
    GC.stat_heap.each do |i, h|
      assert_equal (c[:BASE_SLOT_SIZE] + c[:RVALUE_OVERHEAD]) * 2**i, h[:slot_size]
    end
    assert_equal GC.stat_heap(c[:HEAP_COUNT] - 1, :slot_size), c[:RVARGC_MAX_ALLOCATE_SIZE]
  end

  # The default GC's names for what Mosaic also does: a tool that asks GC::OPTS whether the
  # collector compacts must hear yes (it used to hear no after compaction was built).
  def test_opts_describe_mosaic
    omit "Mosaic-specific" unless mosaic?
    assert_include GC::OPTS, "MOSAIC"
    assert_include GC::OPTS, "USE_RGENGC"
    assert_include GC::OPTS, "GC_COMPACTION_SUPPORTED"
    assert_include GC::OPTS, "RGENGC_ESTIMATE_OLDMALLOC"
    assert_equal 3, GC::INTERNAL_CONSTANTS[:RVALUE_OLD_AGE]
  end

  def test_compaction_methods_exist
    %i[compact auto_compact auto_compact= latest_compact_info verify_compaction_references].each do |m|
      assert_equal true, GC.respond_to?(m), "GC.#{m} should be implemented"
    end
  end
end
