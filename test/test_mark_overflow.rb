# frozen_string_literal: true
# Marking when its own memory runs out. The mark stack (mark.c, mark_overflow_rescan): a marked
# object that cannot be pushed stays marked without an entry, and the mark's end traces every
# marked object again until a pass overflows no more. The weak list (weak_slot_unregistered): a
# slot it cannot take keeps its referent alive. Without them, running out of memory during a
# collection was a [BUG] ("out of memory growing the mark stack", "... an internal vector"), and
# a crash while printing it.
require_relative "helper"

class TestMarkOverflow < Test::Unit::TestCase
  include MosaicTestHelper

  # Structures whose marking needs the stack: a wide Array of Arrays, a deep chain, a Hash of
  # Strings, a WeakMap with live and dead entries. Each collection kind runs with at most one
  # mark-stack chunk mapped (MOSAIC_STRESS_MARK_MEMORY=1), so pushes fail once a chunk is in use;
  # the checking build verifies the heap after every collection (every reference, weak ones and
  # the WeakMap's included, must name a live object), so an object left untraced is a [BUG]
  # there, and the values below must all read back.
  OVERFLOW_SCRIPT = <<~'RUBY'
    def build
      wide = Array.new(200_000) { |i| [i, "s#{i}"] }
      chain = nil
      30_000.times { |i| chain = [chain, "c#{i}"] }
      table = {}
      50_000.times { |i| table["k#{i}"] = "v#{i}" * 2 }
      [wide, chain, table]
    end

    def check(wide, chain, table)
      assert_equal 200_000, wide.size
      assert_equal "s199999", wide[199_999][1]
      assert_equal (0...200_000).sum, wide.sum { |x| x[0] }
      n = 0
      node = chain
      while node
        n += 1
        assert_equal "c#{30_000 - n}", node[1] if n % 1000 == 0
        node = node[0]
      end
      assert_equal 30_000, n
      assert_equal 50_000, table.size
      assert_equal "v49999v49999", table["k49999"]
    end

    wide, chain, table = build
    weak = ObjectSpace::WeakMap.new
    kept = Array.new(1000) { |i| "kept#{i}" }
    values = kept.map(&:upcase)              # a WeakMap holds its values weakly too
    kept.each_with_index { |k, i| weak[k] = values[i] }
    1000.times { |i| weak["dead#{i}"] = "x" }   # entries whose keys die: the verifier checks their slots

    rescans0 = GC.stat(:mosaic_mark_overflow_rescans)
    GC.start                                   # a major GC
    GC.start(full_mark: false)                 # a minor GC: old objects count as marked
    20.times { wide << [0, "young"]; Array.new(10_000) { |i| "t#{i}" } }  # minors from allocation
    GC.start
    wide.pop(20)
    assert_operator GC.stat(:mosaic_mark_overflow_rescans), :>, rescans0
    check(wide, chain, table)
    kept.each_with_index { |k, i| assert_same values[i], weak[k] }
  RUBY

  def test_marking_completes_when_the_mark_stack_cannot_grow
    omit "MOSAIC_STRESS_MARK_MEMORY is the checking build's" unless mosaic? && checking_build?
    assert_gc_script(OVERFLOW_SCRIPT, env: { "MOSAIC_STRESS_MARK_MEMORY" => "1" })
  end

  # The same with a GC thread marking beside the collecting one, both failing their pushes (four
  # chunks: a spare each and one in use each).
  def test_parallel_marking_completes_when_the_mark_stack_cannot_grow
    omit "MOSAIC_STRESS_MARK_MEMORY is the checking build's" unless mosaic? && checking_build?
    env = { "MOSAIC_STRESS_MARK_MEMORY" => "4", "MOSAIC_GC_THREADS" => "2", "MOSAIC_PARALLEL_MARK_MIN" => "0" }
    assert_gc_script(OVERFLOW_SCRIPT + <<~'RUBY', env: env)
      assert_operator GC.stat(:mosaic_parallel_marks), :>, 0
      assert_operator GC.stat(:mosaic_parallel_marked_by_threads), :>, 0
    RUBY
  end

  # And with every major GC the pacer starts marking in steps, where the mutator runs between
  # steps with grey objects on no stack (and writes that re-grey objects fail to queue them).
  def test_incremental_marking_completes_when_the_mark_stack_cannot_grow
    omit "MOSAIC_STRESS_MARK_MEMORY is the checking build's" unless mosaic? && checking_build?
    assert_gc_script(<<~'RUBY', env: { "MOSAIC_STRESS_MARK_MEMORY" => "1", "MOSAIC_STRESS_INCREMENTAL" => "64" })
      rescans0 = GC.stat(:mosaic_mark_overflow_rescans)
      steps0 = GC.stat(:mosaic_incremental_steps)
      root = []
      200.times do |round|
        root << Array.new(500) { |i| "r#{round}-#{i}" }
        # A bulk write between steps (more than 16 elements: rb_gc_writebarrier_remember, the
        # re-grey queue, whose pushes fail too).
        root[round / 2].concat(Array.new(20) { |i| "late#{round}-#{i}" })
        Array.new(2000) { |i| [i] }                   # garbage, to start majors
      end
      assert_operator GC.stat(:mosaic_incremental_steps), :>, steps0
      assert_operator GC.stat(:mosaic_mark_overflow_rescans), :>, rescans0   # before any GC.start
      GC.start
      assert_equal 200, root.size
      assert_equal "r199-499", root[199][499]
      assert_equal 200 * 500 + 200 * 20, root.sum(&:size)
      assert_equal "late199-19", root[99].last
    RUBY
  end

  # The weak list and its index cannot grow past 4094 entries (MOSAIC_STRESS_MARK_MEMORY=1; both
  # grow in powers of two, the index failing first): the slots beyond are not registered, and
  # their referents live as if the edges were strong. A
  # WeakMap's live entries must read back; a slot left pointing at a freed object is a [BUG]
  # in the checking build's verifier (it checks every weak slot and every WeakMap after every
  # GC). Deleting entries while a major marks in steps removes slots from a list whose index
  # cannot be built (a scan instead).
  def test_weak_references_stay_right_when_the_weak_list_cannot_grow
    omit "MOSAIC_STRESS_MARK_MEMORY is the checking build's" unless mosaic? && checking_build?
    [{}, { "MOSAIC_STRESS_INCREMENTAL" => "64" },
     { "MOSAIC_GC_THREADS" => "2", "MOSAIC_PARALLEL_MARK_MIN" => "0" }].each do |extra|
      assert_gc_script(<<~'RUBY', env: { "MOSAIC_STRESS_MARK_MEMORY" => "1" }.merge(extra))
        weak = ObjectSpace::WeakMap.new
        keys = Array.new(10_000) { |i| "key#{i}" }
        values = Array.new(10_000) { |i| "value#{i}" }
        keys.each_with_index { |k, i| weak[k] = values[i] }
        10_000.times { |i| weak["gone#{i}"] = "x#{i}" }   # dead keys: some kept, as if strong
        3.times do |round|
          2000.times { |i| weak[keys[i]] = values[i] }     # writes while marking
          500.times { |i| weak.delete(keys[9000 + round * 300 + i]) }
          Array.new(20_000) { |i| [i] }                   # garbage: majors start
          GC.start(full_mark: round.odd?)
        end
        GC.start
        8000.times { |i| assert_same values[i], weak[keys[i]] }
        (9000...9900).each { |i| assert_nil weak[keys[i]] }
        assert_operator weak.size, :>=, 8000
        assert_operator GC.stat(:mosaic_weak_slots_unregistered), :>, 0
      RUBY
    end
  end

  # Real memory exhaustion (an address-space limit), in a program whose live Array of small
  # objects grows until memory runs out, so that collections run with almost nothing left for
  # the mark stack. The process may end with NoMemoryError rescued, or with CRuby's "[FATAL]
  # failed to allocate memory" (raising the error needs memory too: the default GC ends this
  # program that way), but never with a [BUG] or a signal. Before the fix 5 of 8 such runs
  # ended in "[BUG] Mosaic: out of memory growing the mark stack", with a SIGSEGV or SIGABRT.
  def test_running_out_of_memory_while_marking_is_not_a_crash
    omit "the sanitizers' allocators reserve address space of their own" if sanitized_build?
    omit "the checking build verifies every GC: filling the memory takes minutes" if checking_build?
    limit = <<~'RUBY'
      vm = File.read("/proc/self/status")[/VmSize:\s+(\d+)/, 1].to_i * 1024
      Process.setrlimit(:AS, vm + (256 << 20))
    RUBY
    objects = limit + <<~'RUBY'
      a = []
      begin
        loop { a << Object.new }
      rescue NoMemoryError
        a = nil
        puts "rescued"
      end
    RUBY
    # A WeakMap of live keys: its weak slots fill the mark's weak list (1 of 9 runs was a [BUG]
    # "out of memory growing an internal vector" before).
    weak_map = limit + <<~'RUBY'
      w = ObjectSpace::WeakMap.new
      a = []
      begin
        i = 0
        loop { k = "k#{i}"; a << k; w[k] = k; i += 1 }
      rescue NoMemoryError
        a = nil
        puts "rescued"
      end
    RUBY
    [objects, objects, objects, weak_map, weak_map].each do |script|
      out, status = Open3.capture2e({ "RUBY_GC_LIBRARY" => LIB_NAME, "RUBYOPT" => nil },
                                    RbConfig.ruby, "--disable=gems", "-e", script)
      refute_match(/\[BUG\]/, out)
      refute status.signaled?, "ended by signal #{status.termsig}: #{out[0, 2000]}"
      assert(status.success? || out.include?("[FATAL] failed to allocate memory"), out[0, 2000])
    end
  end
end
