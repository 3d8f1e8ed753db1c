require_relative "helper"

# The idle trim (src/threads/idle_trim.c, DESIGN.md "The idle trim"): once no GC has run for the
# quiet time, a thread returns what glibc holds idle with malloc_trim, memory the after-major rule
# leaves in place and only a later GC would look at again. These scripts free 24 MB of malloc'd
# String buffers with a minor GC (no after-major trim), between 1 KB buffers that stay live so that
# glibc cannot give the freed chunks back by itself, and then stop collecting.
class TestMosaicIdleTrim < Test::Unit::TestCase
  include MosaicTestHelper

  QUIET = { "MOSAIC_IDLE_TRIM_MS" => "200" }
  GLIBC = RUBY_PLATFORM.include?("linux") && !RUBY_PLATFORM.include?("musl")

  PRELUDE = <<~'RUBY'
    def rss = File.read("/proc/self/statm").split[1].to_i * 4096
    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    def trims = GC.stat(:mosaic_idle_trim_count)
    # 24 MB of 8 KB String buffers, every fourth followed by a 1 KB one that stays, given back to
    # glibc by String#clear after a major GC (so that the after-major trim does not see them),
    # then a minor GC.
    def leave_idle_malloc_memory(keep, strings = 3000)
      GC.disable
      junk = Array.new(strings) { |i| s = "x" * 8000; keep << "y" * 1000 if i % 4 == 0; s }
      GC.enable
      GC.start
      junk.each(&:clear)
      GC.start(full_mark: false)
    end
    def wait_for_trims(n, seconds = 60)
      deadline = now + seconds
      sleep 0.02 until trims >= n || now > deadline
    end
  RUBY

  def test_a_quiet_program_gives_idle_malloc_memory_back
    omit "Mosaic's idle trim" unless mosaic?
    omit "needs /proc and glibc" unless File.exist?("/proc/self/statm") && GLIBC
    assert_gc_script(PRELUDE + <<~'RUBY', env: QUIET)
      keep = []
      leave_idle_malloc_memory(keep)
      count = GC.count
      before = rss
      wait_for_trims(1)
      assert_equal 1, trims
      assert_equal count, GC.count, "the trim needs no GC"
      # A sanitizer's allocator is not glibc's: its malloc_trim has nothing to give back.
      unless GC::OPTS.include?("MOSAIC_ASAN") || GC::OPTS.include?("MOSAIC_TSAN")
        assert_operator GC.stat(:mosaic_idle_trim_returned_bytes), :>=, 8 << 20
        assert_operator rss, :<=, before - (8 << 20)
      end
      sleep 1
      assert_equal 1, trims, "one trim per quiet spell"
      assert_equal 750, keep.count { |s| s == "y" * 1000 }
    RUBY
  end

  # A program that collects steadily never looks quiet: what its next cycle takes back stays
  # (a trim of it would cost page faults, and its walk of glibc's bins, for nothing). The loop
  # frees 2.4 MB of buffers every 100 ms without a GC, so that the GCs in it find memory idle
  # and arm the thread (a major's trim may take what was idle before). Once it stops, idle memory
  # goes back. The quiet time here is the default's, 1 s: a machine slow for a moment must not
  # make a gap between two GCs of the loop look quiet.
  def test_no_trim_while_the_program_collects
    omit "Mosaic's idle trim" unless mosaic?
    omit "needs /proc and glibc" unless File.exist?("/proc/self/statm") && GLIBC
    assert_gc_script(PRELUDE + <<~'RUBY')
      keep = []
      count = GC.count
      stop = now + 2
      freed_at = now
      i = 0
      while now < stop
        Array.new(100) { |j| "garbage #{i} #{j}" }
        if now > freed_at + 0.1
          Array.new(300) { |k| s = "x" * 8000; keep << "y" * 1000 if k % 4 == 0; s }.each(&:clear)
          freed_at = now
        end
        i += 1
      end
      assert_operator GC.count - count, :>=, 10, "the loop did not collect"
      assert_equal 0, trims, "a trim while GCs ran every #{(2000.0 / (GC.count - count)).round(1)} ms"
      leave_idle_malloc_memory(keep)
      wait_for_trims(1)
      assert_equal 1, trims
    RUBY
  end

  def test_zero_turns_it_off
    omit "Mosaic's idle trim" unless mosaic?
    omit "needs /proc and glibc" unless File.directory?("/proc/self/task") && GLIBC
    assert_gc_script(PRELUDE + <<~'RUBY', env: { "MOSAIC_IDLE_TRIM_MS" => "0" })
      leave_idle_malloc_memory([])
      sleep 1.5
      assert_equal 0, trims
      names = Dir.glob("/proc/self/task/*/comm").map { |f| File.read(f).strip rescue "" }
      assert_not_include names, "mosaic-trim"
    RUBY
  end

  # A forked child has no thread of its parent's: its record starts over, and it trims its own
  # idle memory once a GC of its own (not its first: mosaic_gc_threads_allowed) leaves some.
  def test_forked_child_trims_on_its_own
    omit "Mosaic's idle trim" unless mosaic?
    omit "needs fork, /proc and glibc" unless Process.respond_to?(:fork) && File.directory?("/proc/self/task") &&
                                              GLIBC
    assert_gc_script(PRELUDE + <<~'RUBY', env: QUIET)
      def trimmers = Dir.glob("/proc/self/task/*/comm").count { |f| (File.read(f) rescue "").start_with?("mosaic-trim") }
      keep = []
      leave_idle_malloc_memory(keep)
      wait_for_trims(1)
      assert_equal 1, trimmers
      r, w = IO.pipe
      junk = Array.new(1000) { |i| s = "x" * 8000; keep << "y" * 1000 if i % 4 == 0; s }
      pid = fork do
        r.close
        before = [trimmers, trims]
        junk.each(&:clear)                  # 8 MB idle: still, the child's first GC starts no thread
        GC.start(full_mark: false)
        first = trimmers
        leave_idle_malloc_memory(keep)
        wait_for_trims(before[1] + 1)
        w.puts [*before, first, trimmers, trims - before[1]].join(",")
        w.close
        exit!(0)
      end
      w.close
      assert_equal "0,1,0,1,1", r.read.chomp
      Process.wait(pid)
      assert_predicate $?, :success?
    RUBY
  end
end
