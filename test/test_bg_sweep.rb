require_relative "helper"

# The background sweeper (src/threads/bg_sweep.c, DESIGN.md "Background sweeping"): after a collection that leaves
# a lazy sweep, a thread frees the dead objects whose freeing touches only the object and its
# buffers, while the mutator runs; the mutator frees the rest. These scripts check that every
# dead object is freed exactly once and by the right thread (the VM's tables that name dead
# objects are cleaned), that the mutator never sees a half-swept page, and that the thread is
# out of the way of fork, heap walks and event hooks.
class TestMosaicBackgroundSweep < Test::Unit::TestCase
  include MosaicTestHelper

  BG = { "MOSAIC_GC_THREADS" => "2", "MOSAIC_BACKGROUND_SWEEP" => "1", "MOSAIC_BACKGROUND_SWEEP_MIN_PAGES" => "0" }

  # Garbage of every kind the thread frees (strings, arrays, hashes, objects, floats, bignums,
  # structs, match data), with heap buffers, among live data that must survive intact.
  PRELUDE = <<~'RUBY'
    S = Struct.new(:a, :b, :c, :d, :e)
    def garbage(n, tag)
      n.times do |i|
        case i % 8
        when 0 then "#{tag}-string-#{i}" * 8
        when 1 then Array.new(30) { |j| j }
        when 2 then { a: i, b: i.to_s, c: [i] }.merge((0..20).to_h { |k| [k, k] })
        when 3 then o = Object.new; 12.times { |k| o.instance_variable_set(:"@v#{k}", k) }; o
        when 4 then (i.to_f * 1.5) + 0.25
        when 5 then 2**200 + i
        when 6 then S.new(i, i, i, i, i)
        when 7 then /(\d+)-(\w+)/.match("#{i}-abc")
        end
      end
    end
  RUBY

  def test_background_sweeper_frees_while_the_mutator_runs
    omit "Mosaic's background sweeper" unless mosaic?
    assert_gc_script(PRELUDE + <<~'RUBY', env: BG, timeout: 300)
      live = Array.new(20_000) { |i| ["live-#{i}" * 4, i, { i => i.to_s }] }
      rounds(30).times do |round|
        garbage(60_000, round)
        # A lazy sweep: the thread takes pages while this loop allocates on.
        GC.start(immediate_sweep: false) if round % 3 == 0
        live[round * 17] = ["live-#{round * 17}" * 4, round * 17, { round * 17 => (round * 17).to_s }]
      end
      GC.start
      assert_operator GC.stat(:mosaic_background_sweeps), :>, 0
      assert_operator GC.stat(:mosaic_background_swept_pages), :>, 0
      assert_operator GC.stat(:mosaic_background_freed_objects), :>, rounds(30) * 3_000, "the thread freed next to nothing"
      live.each_with_index do |(s, i, h), n|
        assert_equal n, i
        assert_equal "live-#{n}" * 4, s
        assert_equal({ n => n.to_s }, h)
      end
      # Every free counted once: the slots in use are what was allocated less what was freed.
      s = GC.stat
      assert_equal s[:total_allocated_objects] - s[:total_freed_objects], s[:heap_live_slots] + s[:heap_final_slots]
      GC.verify_internal_consistency
    RUBY
  end

  # Frames' imemos the thread frees too (sweep.c, background_safe_p): svars (a method's $~),
  # escaped environments, throw data (break), C blocks (ifunc) and their memos. Each must be
  # freed once, while live ones of the same kinds (a held proc's environment, a frame still
  # using $~) keep working. A method that sets $~ makes an svar per call: most of what RDoc
  # left to the mutator (3.3 of 3.8 million objects). The first part makes 50k svars and
  # nothing else (no string per call, GC disabled), lets one GC's sweep run on the thread alone
  # (the mutator waits), and counts what the thread freed: none of them before it took svars.
  def test_background_sweeper_frees_frames_imemos
    omit "Mosaic's background sweeper" unless mosaic?
    assert_gc_script(<<~'RUBY', env: BG, timeout: 300)
      def reset_match(s) = ($~ = nil; "c".freeze)                   # an svar per call, no other object
      def match(s) = s =~ /b(c)/ ? $1 : nil                        # an svar and a MatchData
      def closure(i) = -> { i * 2 }                                # an escaped environment
      def broken(a) = a.each { |x| break x if x > 1 }              # throw data
      def sliced(a) = a.each_slice(2).sum { |x, y| x + (y || 0) }  # ifunc and memo
      held = Array.new(100) { |i| closure(i) }
      GC.start
      GC.disable
      arg = "abcd"
      50_000.times { raise "wrong result" unless reset_match(arg).equal?("c".freeze) }
      GC.enable
      before = GC.stat(:mosaic_background_freed_objects)
      pages_before = GC.stat(:mosaic_background_swept_pages)
      GC.start(immediate_sweep: false)
      # The thread sweeps the cycle's pages while this thread allocates nothing; its page count
      # grows once it has been through all of them (bg_sweep.c).
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
      until GC.stat(:mosaic_background_swept_pages) > pages_before
        break if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        sleep 0.01
      end
      GC.start   # takes the thread's pages: their frees are counted now
      by_thread = GC.stat(:mosaic_background_freed_objects) - before
      assert_operator by_thread, :>=, 45_000, "the thread freed the svars"
      rounds(20).times do |round|
        20_000.times do |i|
          closure(i)
          raise "wrong match" unless match("abcd") == "c"
          raise "wrong break" unless broken([0, 1, 2, 3]) == 2
          raise "wrong sum" unless sliced([1, 2, 3]) == 6
        end
        GC.start(immediate_sweep: false) if round.even?
        held.each_with_index { |pr, i| raise "held proc #{i}" unless pr.call == i * 2 }
        "xbcx" =~ /b(c)/
        raise "live $~ lost" unless $~ && $1 == "c"
      end
      GC.start
      s = GC.stat
      assert_equal s[:total_allocated_objects] - s[:total_freed_objects], s[:heap_live_slots] + s[:heap_final_slots]
      GC.verify_internal_consistency
    RUBY
  end

  # Dead objects the thread must leave to the mutator, on the same pages as those it frees:
  # interned strings (fstring table), strings with instance variables (generic ivar table),
  # with object ids (id tables), with finalizers, dynamic symbols, T_DATA. If the thread freed
  # one, the table would name a freed slot: the new strings, ids and symbols below would come
  # back wrong, or the heap check would report it.
  def test_objects_left_for_the_mutator_are_freed_by_it
    omit "Mosaic's background sweeper" unless mosaic?
    assert_gc_script(PRELUDE + <<~'RUBY', env: BG, timeout: 300)
      $finalized = 0
      fin = proc { $finalized += 1 }
      ids = []
      n = rounds(20)
      n.times do |round|
        2_000.times do |i|
          _ = -"interned-#{round}-#{i}"                              # fstring, then dead
          s = "ivar-#{i}"; s.instance_variable_set(:@x, i)            # generic ivar
          ids << "id-#{round}-#{i}".object_id if i % 10 == 0          # object id
          ObjectSpace.define_finalizer("fin-#{i}", fin) if i % 50 == 0
          :"sym-#{round}-#{i}"                                       # dynamic symbol
          Object.new.method(:to_s) if i % 4 == 0                      # T_DATA
          garbage(4, i)
        end
        GC.start(immediate_sweep: false)
        # While the thread sweeps, the mutator adds to the tables the dead objects are in:
        # had the thread freed those, their entries would be deleted concurrently (a crash).
        keep = []
        10_000.times do |i|
          f = -"new-#{round}-#{i}"
          t = "t-#{i}"; t.instance_variable_set(:@y, i)
          keep << [f, t, "k#{i}".object_id] if i % 100 == 0
        end
        keep.each { |f, t, _| assert_predicate f, :frozen?; assert_kind_of Integer, t.instance_variable_get(:@y) }
        garbage(20_000, round)
      end
      GC.start
      GC.start
      ids.each do |id|
        assert_raise(RangeError) { ObjectSpace._id2ref(id) }
      end
      n.times do |round|
        [0, 999, 1999].each do |i|
          f = -"interned-#{round}-#{i}"
          assert_equal "interned-#{round}-#{i}", f
          assert_predicate f, :frozen?
          assert_same f, -"interned-#{round}-#{i}"
          assert_equal "sym-#{round}-#{i}", :"sym-#{round}-#{i}".to_s
        end
      end
      fresh = Array.new(10_000) { |i| "ivar-#{i}" }
      assert_equal 0, fresh.count { |s| !s.instance_variables.empty? }
      assert_operator $finalized, :>, 0
      assert_operator GC.stat(:mosaic_background_freed_objects), :>, 0
      GC.verify_internal_consistency
    RUBY
  end

  # The race the thread must stay out of: dead interned strings, strings with generic ivars
  # and with object ids die by the tens of thousands, and while the thread sweeps their pages
  # the mutator interns strings, sets generic ivars and takes ids (the same tables). If the
  # thread freed those objects it would delete their entries concurrently: a version that did
  # crashed this script 3 of 3 runs.
  def test_vm_tables_used_while_the_thread_sweeps
    omit "Mosaic's background sweeper" unless mosaic?
    assert_gc_script(<<~'RUBY', env: BG, timeout: 300)
      keep = []
      rounds(30).times do |round|
        40_000.times do |i|
          _ = -"in-#{round}-#{i}"
          s = "iv-#{i}"; s.instance_variable_set(:@x, i)
          "id-#{i}".object_id if i % 3 == 0
        end
        GC.start(immediate_sweep: false)
        20_000.times do |i|
          f = -"new-#{round}-#{i}"
          t = "t-#{i}"; t.instance_variable_set(:@y, i)
          keep << [f, t, "k#{i}".object_id] if i % 100 == 0
        end
      end
      keep.each do |f, t, id|
        assert_predicate f, :frozen?
        assert_match(/\Anew-\d+-\d+\z/, f)
        assert_kind_of Integer, t.instance_variable_get(:@y)
      end
      assert_operator GC.stat(:mosaic_background_freed_objects), :>, 0
      GC.verify_internal_consistency
    RUBY
  end

  # A fork while the thread sweeps: it stops first (pthread_atfork), the child has no such
  # thread, and both processes go on sweeping and collecting.
  # Write barriers on old objects while the thread sweeps their pages: the old arrays share
  # bitmap words with dead strings, so a barrier sets a remembered bit in a word whose dead
  # slots' bits the thread clears (sweep.c, bits_keep; both sides atomic). The young strings
  # written must survive the minor GCs that follow (the remembered set kept them). Under the
  # ThreadSanitizer build (scripts/tsan-gate.sh) this puts the barrier and the sweeper on one
  # word at once: the collection is not followed by a heap check there, which would wait for
  # the thread.
  def test_write_barriers_on_pages_the_thread_sweeps
    omit "Mosaic's background sweeper" unless mosaic?
    assert_gc_script(<<~'RUBY', env: BG, timeout: 300)
      olds = []
      100_000.times { |i| olds << []; "g#{i}" }        # arrays, garbage between them
      4.times { GC.start }                               # the arrays are old
      rounds(5).times do |round|
        olds.each { |a| a[0] = nil }                     # not remembered after the next GC
        ys = []
        100_000.times { ys << "y#{round}"; "t" }         # young strings and garbage in the holes
        GC.start(full_mark: false, immediate_sweep: false)
        # Barriers only, no allocation (which would sweep here) while the thread sweeps.
        olds.each_with_index { |a, i| a[0] = ys[i] }
        ys = nil
        2.times { GC.start(full_mark: false) }
        olds.each_with_index { |a, i| a[0] == "y#{round}" or raise "round #{round}: array #{i} holds #{a[0].inspect}" }
      end
      assert_operator GC.stat(:mosaic_background_swept_pages), :>, 0
    RUBY
  end

  def test_fork_while_the_background_sweeper_runs
    omit "Mosaic's background sweeper" unless mosaic?
    omit "no fork" unless Process.respond_to?(:fork)
    assert_gc_script(PRELUDE + <<~'RUBY', env: BG, timeout: 300)
      def thread_names = Dir.glob("/proc/self/task/*/comm").map { |f| File.read(f).strip rescue "" }
      live = Array.new(5_000) { |i| "keep-#{i}" }
      rounds(6).times do |round|
        garbage(100_000, round)
        GC.start(immediate_sweep: false)
        assert_include thread_names, "mosaic-sweep" if File.directory?("/proc/self/task")
        pid = fork do
          exit!(3) if thread_names.include?("mosaic-sweep")
          garbage(50_000, round)
          GC.start
          ok = live.each_with_index.all? { |s, i| s == "keep-#{i}" }
          GC.verify_internal_consistency
          exit!(ok ? 0 : 2)
        end
        garbage(50_000, round)
        _, st = Process.wait2(pid)
        assert_equal 0, st.exitstatus, "child of round #{round}"
      end
      live.each_with_index { |s, i| assert_equal "keep-#{i}", s }
      GC.verify_internal_consistency
    RUBY
  end

  # A forked child's first collection starts no sweeper thread (the mutator sweeps), its second
  # does: a child that collects once right after the fork (Process.daemon's) must not show a
  # thread it did not make (CRuby's TestProcess#test_daemon_no_threads failed that way).
  def test_forked_child_starts_the_sweeper_at_its_second_collection
    omit "Mosaic's background sweeper" unless mosaic?
    omit "needs fork and /proc" unless Process.respond_to?(:fork) && File.directory?("/proc/self/task")
    assert_gc_script(PRELUDE + <<~'RUBY', env: BG, timeout: 120)
      def sweepers = Dir.glob("/proc/self/task/*/comm").count { |f| (File.read(f) rescue "").start_with?("mosaic-sweep") }
      live = Array.new(5_000) { |i| "keep-#{i}" }
      garbage(100_000, 0)
      GC.start(immediate_sweep: false)
      r, w = IO.pipe
      pid = fork do
        r.close
        before = sweepers
        GC.start(immediate_sweep: false)   # the child's first collection
        first = sweepers
        garbage(100_000, 1)
        GC.start(immediate_sweep: false)
        w.puts [before, first, sweepers, live.last].join(",")
        w.close
        exit!(0)
      end
      w.close
      assert_equal "0,0,1,keep-4999", r.read.chomp
      Process.wait(pid)
      assert_predicate $?, :success?
    RUBY
  end

  # Heap walks and a FREEOBJ hook turned on in the middle of a sweep stop the thread: a walk
  # never yields an object the thread freed, and every free after the hook is reported.
  def test_heap_walks_and_hooks_during_a_background_sweep
    omit "Mosaic's background sweeper" unless mosaic?
    assert_gc_script(PRELUDE + <<~'RUBY', env: BG, timeout: 300)
      require "objspace"
      live = Array.new(3_000) { |i| "walk-live-#{i}" }
      10.times do |round|
        Array.new(30_000) { |i| "walk-dead-#{i}" }
        garbage(20_000, round)
        GC.start(immediate_sweep: false)
        seen = 0
        ObjectSpace.each_object(String) { |s| seen += 1 if s.start_with?("walk-") }
        assert_operator seen, :>=, live.size
        assert_operator seen, :<, live.size + 40_000
        if round == 5
          ObjectSpace.trace_object_allocations_start
          garbage(20_000, round)
          ObjectSpace.trace_object_allocations_stop
        end
      end
      counts = ObjectSpace.count_objects
      assert_operator counts[:T_STRING], :>=, live.size
      live.each_with_index { |s, i| assert_equal "walk-live-#{i}", s }
      GC.verify_internal_consistency
    RUBY
  end

  # ObjectSpace.count_objects reads every slot: the thread stops for it, so two counts with
  # no string allocated in between agree on the strings (they differed by tens of thousands
  # when it did not). (A count itself allocates an imemo or so, and the first one interns its
  # keys: the first count and the imemos are not compared.)
  def test_count_objects_is_stable_while_a_sweep_is_pending
    omit "Mosaic's background sweeper" unless mosaic?
    assert_gc_script(PRELUDE + <<~'RUBY', env: BG, timeout: 300)
      h1 = {}
      h2 = {}
      ObjectSpace.count_objects(h1)
      5.times do |round|
        Array.new(200_000) { |i| "dead-#{i}" * 2 }
        GC.start(immediate_sweep: false)
        ObjectSpace.count_objects(h1)
        ObjectSpace.count_objects(h2)
        assert_equal h1[:T_STRING], h2[:T_STRING], "round #{round}"
        assert_equal h1[:TOTAL], h2[:TOTAL], "round #{round}"
      end
    RUBY
  end

  # Blocks of more than 128 bytes that dead objects held are not freed by the thread: it hands
  # them to the Ruby thread (src/threads/free_handoff.c), which frees them before its next
  # mallocs and allocation refills, and all of them when a sweep ends or the next one is
  # prepared. Every handed-over block must be freed: glibc's bytes in use come back to where
  # they were after rounds of 4-8 KB buffers that die (half a GiB in all), and the mutator
  # must not free a block twice or lose one (strings made from the freed memory stay intact).
  def test_frees_handed_to_the_mutator_all_happen
    omit "Mosaic's background sweeper" unless mosaic?
    omit "glibc only" unless GC.stat(:mosaic_libc_in_use_bytes).to_i > 0
    omit "reads glibc's bytes in use, which the sanitizer's allocator does not report" if sanitized_build?
    assert_gc_script(<<~'RUBY', env: BG, timeout: 300)
      keep = Array.new(2_000) { |i| "keep #{i} ".ljust(5_000, "k") }
      GC.start
      in_use = GC.stat(:mosaic_libc_in_use_bytes)
      rounds(100).times do |r|
        # 5 MB of buffers that die, under a lazy sweep the thread takes pages of.
        1_000.times { |i| String.new("r#{r}-#{i} ", capacity: 4_096 + (i % 4) * 1_024) << "x" * 3_000 }
        GC.start(immediate_sweep: false) if r % 4 == 0
        keep[r % 2_000] = "keep #{r % 2_000} ".ljust(5_000, "k")
      end
      GC.start
      assert_operator GC.stat(:mosaic_background_handed_over_blocks), :>, 1_000, "the thread handed over next to nothing"
      grown = GC.stat(:mosaic_libc_in_use_bytes) - in_use
      assert_operator grown, :<, 4 << 20, "blocks handed to the mutator were not all freed"
      keep.each_with_index { |s, i| assert_equal "keep #{i} ".ljust(5_000, "k"), s }
      GC.verify_internal_consistency
    RUBY
  end

  def test_background_sweep_can_be_turned_off
    omit "Mosaic's background sweeper" unless mosaic?
    assert_gc_script(PRELUDE + <<~'RUBY', env: BG.merge("MOSAIC_BACKGROUND_SWEEP" => "0"))
      5.times { |r| garbage(50_000, r); GC.start(immediate_sweep: false) }
      garbage(50_000, 9)
      assert_equal 0, GC.stat(:mosaic_background_sweeps)
      assert_equal 0, GC.stat(:mosaic_background_freed_objects)
      assert_equal 0, GC.stat(:mosaic_background_handed_over_blocks)
    RUBY
  end

  # A lazy sweep of fewer pages than MOSAIC_BACKGROUND_SWEEP_MIN_PAGES stays on the Ruby thread
  # (waking the thread costs more than it takes off the mutator); one of at least that many
  # goes to the thread. The same program, its heap's page count between the two thresholds.
  def test_small_sweeps_stay_on_the_ruby_thread
    omit "Mosaic's background sweeper" unless mosaic?
    work = <<~'RUBY'
      5.times { |r| garbage(50_000, r); GC.start(immediate_sweep: false) }
      garbage(50_000, 9)
      pages = GC.stat(:heap_allocated_pages)
    RUBY
    assert_gc_script(PRELUDE + work + <<~'RUBY', env: BG.merge("MOSAIC_BACKGROUND_SWEEP_MIN_PAGES" => "100000"))
      assert_operator pages, :>, 1
      assert_equal 0, GC.stat(:mosaic_background_sweeps), "a sweep of #{pages} pages went to the thread"
      assert_equal 0, GC.stat(:mosaic_background_freed_objects)
    RUBY
    assert_gc_script(PRELUDE + work + <<~'RUBY', env: BG.merge("MOSAIC_BACKGROUND_SWEEP_MIN_PAGES" => "1"))
      assert_operator GC.stat(:mosaic_background_sweeps), :>, 0, "no sweep of #{pages} pages went to the thread"
      assert_operator GC.stat(:mosaic_background_freed_objects), :>, 0
    RUBY
  end
end
