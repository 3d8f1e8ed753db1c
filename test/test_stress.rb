require_relative "helper"

# GC.stress collects at every allocation: any missed root or premature free shows up at once.
class TestMosaicStress < Test::Unit::TestCase
  include MosaicTestHelper

  def test_stress_allocation_heavy
    assert_gc_script(<<~'RUBY', timeout: 300)
      GC.stress = true
      a = []
      2_000.times { |i| a << "str#{i}" << [i, i.to_s] << { i => i.to_s } }
      h = a.group_by(&:class)
      GC.stress = false
      assert_equal 2_000, h[String].size
      assert_equal [1999, "1999"], h[Array].last
      GC.verify_internal_consistency
    RUBY
  end

  def test_stress_with_lazy_sweep_mode
    # Stress mode bit 1 keeps sweeping lazy, so allocation meets unswept pages.
    assert_gc_script(<<~'RUBY', timeout: 300)
      GC.stress = 2
      s = +""
      3_000.times { |i| s << i.to_s; [i].map(&:to_s) }
      GC.stress = false
      assert_equal (0...3000).map(&:to_s).join, s
    RUBY
  end

  def test_stress_compile_and_eval
    assert_gc_script(<<~'RUBY', timeout: 300)
      GC.stress = true
      v = eval("def m(a, b: 2) = [a, b] * 2; m(1)")
      GC.stress = false
      assert_equal [1, 2, 1, 2], v
    RUBY
  end
end
