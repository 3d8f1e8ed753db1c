require_relative "helper"

# Incremental marking (src/collect/incremental.c, src/collect/mark.c, DESIGN.md "Incremental marking"): a major GC the pacer
# starts marks in steps taken at allocation; between them the program runs and writes into
# objects the GC has already traced. With MOSAIC_STRESS_INCREMENTAL=N every such major marks
# in steps of N slots, so the scripts below catch it between steps (GC.latest_gc_info(:state)
# is :marking) and then do what the write barrier must report: store young objects into old,
# already traced containers and drop every other reference, delete WeakMap entries, fork,
# call GC.start. Every object the program can still reach must be intact afterwards.
class TestMosaicIncremental < Test::Unit::TestCase
  include MosaicTestHelper

  # On by default; the environment says so anyway, so these tests keep testing it if the
  # default changes. MOSAIC_STRESS_INCREMENTAL implies it.
  # The room scale off (MOSAIC_GC_TIME_MIN=0): the tests below count the majors a ring makes
  # the pacer ask for, and with less room while its first GCs are cheap it asks for 5-7
  # instead of 13, too few to tell which ones marked in steps.
  ON = { "MOSAIC_INCREMENTAL" => "1", "MOSAIC_GC_TIME_MIN" => "0" }
  STEPS = { "MOSAIC_STRESS_INCREMENTAL" => "64" }
  # Every step shared with a GC thread (mark_workers.c): each marker marks 32 slots, then the
  # thread hands its stack back.
  PARALLEL_STEPS = STEPS.merge("MOSAIC_GC_THREADS" => "2", "MOSAIC_PARALLEL_MARK_MIN" => "0")

  # Starts a major GC that marks in steps (as in the default GC, GC.start(immediate_mark:
  # false) does), and checks that it is marking.
  PRELUDE = <<~'RUBY'
    def start_marking
      GC.start(full_mark: true, immediate_mark: false)
      raise "no major GC is marking in steps" unless GC.latest_gc_info(:state) == :marking
      true
    end
  RUBY

  STORES_WHILE_MARKING = PRELUDE + <<~'RUBY'
      # Old containers, traced early in each major GC; the pacer asks for majors as the old
      # generation grows.
      old = Array.new(200) { [] }
      table = {}
      2.times { GC.start }
      caught = 0
      200.times do |round|
        if round.even? && start_marking
          caught += 1
          # While marking: fresh objects whose only reference is a store into an old array or
          # hash (write barrier), some nested (their children are white too).
          50.times do |i|
            old[(round * 7 + i) % 200] << ["r#{round}-#{i}", { k: "v#{round}-#{i}" }]
            table["t#{round}-#{i}"] = "x" * (i % 40) + "#{round}"
          end
          # Move references between traced containers: the only path left goes through an
          # object marked before the move.
          old[round % 200], old[(round + 1) % 200] = old[(round + 1) % 200], old[round % 200]
        end
        Array.new(2000) { |i| "garbage #{i}" }
        old.each { |a| a.shift(a.size - 60) if a.size > 80 }
        table.delete(table.first[0]) while table.size > 3000
      end
      assert_equal 100, caught
      assert_operator GC.stat(:mosaic_incremental_marks), :>=, 100
      assert_operator GC.stat(:mosaic_incremental_steps), :>, GC.stat(:mosaic_incremental_marks)
      GC.start
      old.each do |a|
        a.each do |s, h|
          assert_match(/\Ar(\d+)-(\d+)\z/, s)
          assert_equal "v#{s[1..]}", h[:k]
        end
      end
      table.each { |k, v| r, i = k[1..].split("-").map(&:to_i); assert_equal "x" * (i % 40) + r.to_s, v }
      GC.verify_internal_consistency
  RUBY

  def test_objects_stored_into_traced_containers_while_marking_survive
    omit "Mosaic's incremental marking" unless mosaic?
    assert_gc_script(STORES_WHILE_MARKING, env: STEPS, timeout: 300)
  end

  WEAKMAP_CHURN = PRELUDE + <<~'RUBY'
      wm = ObjectSpace::WeakMap.new
      wkm = ObjectSpace::WeakKeyMap.new
      keys = Array.new(20_000) { |i| "key#{i}" }
      vals = Array.new(20_000) { |i| "val#{i}" }
      keys.each_with_index { |k, i| wm[k] = vals[i]; wkm[k] = vals[i] }
      GC.start
      caught = 0
      40.times do |round|
        start_marking
        caught += 1
        # The WeakMap was traced (its entries registered) or will be: delete and replace
        # entries, whose memory CRuby frees at once, and store new ones.
        500.times do |j|
          i = (round * 500 + j) % 20_000
          wm.delete(keys[i]) if j.even?
          wkm.delete(keys[i]) if j % 3 == 0
          vals[i] = "val#{i}"
          wm[keys[i]] = vals[i] if j % 4 == 0
          wkm[keys[i]] = vals[i] if j % 5 == 0
        end
      end
      assert_equal 40, caught
      3.times { GC.start }
      keys.each_with_index do |k, i|
        v = wm[k]
        assert_equal "val#{i}", v if v
        v = wkm[k]
        assert_equal "val#{i}", v if v
      end
      GC.verify_internal_consistency
  RUBY

  def test_weakmap_entries_deleted_and_replaced_while_marking
    omit "Mosaic's incremental marking" unless mosaic?
    assert_gc_script(WEAKMAP_CHURN, env: STEPS, timeout: 300)
  end

  # The GC threads register the weak slots of what they trace in their own lists, merged into
  # the collecting thread's at the end of each step. Once a WeakMap#delete between steps has
  # built that list's index, a merged slot must go into the index too: else a later delete
  # misses it, and the end of the mark reads the freed entry (the checking build reports it).
  # Many WeakMaps, traced one by one across the steps (behind a chain of arrays), with entries
  # deleted from each between steps: the first delete from a traced map builds the index, and
  # the maps traced after it are traced by either thread. A use after free here is certain
  # only under ASan (the end of the mark writes into the freed entry when its key is dead).
  def test_weakmap_churn_with_steps_shared_by_gc_threads
    omit "Mosaic's incremental marking" unless mosaic?
    assert_gc_script(PRELUDE + <<~'RUBY', env: PARALLEL_STEPS, timeout: 300)
      n = 300
      keys = Array.new(n) { |m| Array.new(40) { |i| "k#{m}-#{i}" } }
      vals = Array.new(n) { |m| Array.new(40) { |i| "v#{m}-#{i}" } }
      maps = Array.new(n) { |m| w = ObjectSpace::WeakMap.new; 40.times { |i| w[keys[m][i]] = vals[m][i] }; w }
      chain = maps.reverse.inject(nil) { |rest, w| [w, rest] }
      GC.start
      10.times do |round|
        start_marking
        n.times do |m|
          w = maps[(m * 7 + round) % n]
          2.times do |j|
            i = (round * 4 + j * 2 + m) % 40
            w.delete(keys[(m * 7 + round) % n][i])
            keys[(m * 7 + round) % n][i] = "k#{m}-#{i}-#{round}"   # the deleted key dies
          end
          Array.new(30) { |i| "garbage #{i}" }
        end
      end
      3.times { GC.start }
      maps.each_with_index do |w, m|
        keys[m].each_with_index { |k, i| v = w[k]; assert_equal "v#{m}-#{i}", v if v }
      end
      assert_not_nil chain
      assert_operator GC.stat(:mosaic_incremental_parallel_steps), :>, 0
      GC.verify_internal_consistency
    RUBY
  end

  # Bulk writes into arrays already traced: CRuby reports them with rb_gc_writebarrier_remember
  # (more than 16 elements copied at once), which greys the array again. Re-greyed objects are
  # traced again by the collecting thread alone at the start of the next step, before the GC
  # threads start (no object traced on two threads at once); the fresh strings stored by the
  # bulk copy must survive (with the re-greyed arrays dropped instead of traced, the checking
  # build's heap check failed, 2 runs of 2).
  def test_bulk_writes_while_marking_with_steps_shared_by_gc_threads
    omit "Mosaic's incremental marking" unless mosaic?
    assert_gc_script(<<~'RUBY', env: PARALLEL_STEPS, timeout: 300)
      def start_marking
        GC.start(full_mark: true, immediate_mark: false)
        raise "no major GC is marking in steps" unless GC.latest_gc_info(:state) == :marking
      end
      # Enough live objects that a mark spans many rounds of the loop below.
      keep = Array.new(100_000) { |i| "keep #{i}" }
      old = Array.new(100) { [] }
      2.times { GC.start }
      60.times do |round|
        start_marking
        20.times do |j|
          a = old[(round * 3 + j) % 100]
          a.clear if a.size > 300
          a.concat(Array.new(40) { |k| "bulk #{round} #{j} #{k}" })
          Array.new(50) { |i| "garbage #{i}" }
        end
      end
      GC.start
      bad = 0
      old.each { |a| a.each { |s| bad += 1 unless s.is_a?(String) && s.start_with?("bulk ") } }
      assert_equal 0, bad
      assert_equal "keep 99999", keep.last
      assert_operator GC.stat(:mosaic_incremental_parallel_steps), :>, 0
      GC.verify_internal_consistency
    RUBY
  end

  def test_stores_while_marking_with_steps_shared_by_gc_threads
    omit "Mosaic's incremental marking" unless mosaic?
    assert_gc_script(STORES_WHILE_MARKING + <<~'RUBY', env: PARALLEL_STEPS, timeout: 300)
      assert_operator GC.stat(:mosaic_incremental_parallel_steps), :>, 0
    RUBY
  end

  def test_gc_start_and_fork_while_marking
    omit "Mosaic's incremental marking" unless mosaic?
    assert_gc_script(PRELUDE + <<~'RUBY', env: STEPS, timeout: 300)
      keep = Array.new(50_000) { |i| "k#{i}" }
      2.times { GC.start }
      start_marking
      finishes = GC.stat(:mosaic_incremental_forced_finishes)
      majors = GC.stat(:major_gc_count)
      GC.start
      assert_not_equal :marking, GC.latest_gc_info(:state)
      assert_equal finishes + 1, GC.stat(:mosaic_incremental_forced_finishes), "GC.start did not finish the marking first"
      assert_equal majors + 1, GC.stat(:major_gc_count), "the finished major GC and GC.start's are one count each"

      if Process.respond_to?(:fork)
        start_marking
        rd, wr = IO.pipe
        pid = fork do
          rd.close
          Array.new(100_000) { |i| "c#{i}" }
          GC.start
          ok = keep.each_with_index.all? { |s, i| s == "k#{i}" }
          GC.verify_internal_consistency
          wr.write(ok ? "ok" : "lost")
          wr.close
          exit!(0)
        end
        wr.close
        msg = rd.read
        Process.wait(pid)
        assert_equal "ok", msg
        assert $?.success?
        assert_not_equal :marking, GC.latest_gc_info(:state), "fork did not finish the marking"
      end
      keep.each_with_index { |s, i| assert_equal "k#{i}", s }
      GC.verify_internal_consistency
    RUBY
  end

  # Review finding: the sweep holds pages back for the next incremental major (sweep.c); a
  # compaction in the same cycle retired some of them (empty, to the pool or the OS) and
  # rebuilt every queue, but the held-back list still linked them, and the next major queued
  # them again: a segfault, or "pages in the pool" miscounted by the checking build. An old
  # object limit factor below 1 makes every major ask for the next one, so each compaction's
  # sweep holds pages back.
  def test_compaction_after_a_sweep_that_held_pages_back
    omit "Mosaic's incremental marking" unless mosaic?
    # (stderr: the GC reports the variable it was given, as the default GC does when verbose.)
    # (MOSAIC_INCREMENTAL_RATIO=0: the sweep holds pages back only for a major that will mark
    # in steps, and this one must, whatever its minors took.)
    env = ON.merge("RUBY_GC_HEAP_OLDOBJECT_LIMIT_FACTOR" => "0.4", "MOSAIC_INCREMENTAL_RATIO" => "0")
    assert_gc_script(<<~'RUBY', env: env, timeout: 300, ignore_stderr: true)
      keep = Array.new(60_000) { |i| "k#{i}" * (i % 3) }
      4.times do |r|
        Array.new(40_000) { |i| [i, "j#{i}"] }
        keep.each_slice(3) { |a| a[1] = nil if a.size > 1 }   # sparse pages
        GC.compact
        Array.new(100_000) { |i| "after#{r}-#{i}" }
        GC.start(full_mark: true, immediate_mark: false)
        Array.new(50_000) { |i| "x#{i}" }
      end
      assert_operator GC.stat(:mosaic_incremental_marks), :>, 0
      keep.each_slice(3).with_index { |a, n| assert_equal "k#{n * 3}" * ((n * 3) % 3), a[0] }
      GC.verify_internal_consistency
    RUBY
  end

  # (MOSAIC_INCREMENTAL_RATIO=0: the majors mark in steps whatever their minors took. Which
  # majors mark at once is the machine's speed: under the sanitizers, with four GC threads on two
  # cores, minor marks passed the 16 ms floor and only 3 majors marked in steps.)
  def test_the_pacer_starts_majors_that_mark_in_steps
    omit "Mosaic's incremental marking" unless mosaic?
    assert_gc_script(<<~'RUBY', env: ON.merge("MOSAIC_INCREMENTAL_RATIO" => "0"), timeout: 300)
      # Strings that live long enough to grow old, then die: the old generation fills with
      # garbage, and the pacer asks for major GCs (no GC.start here).
      ring = Array.new(150_000)
      2_500_000.times { |n| ring[n % 150_000] = "ring #{n}" }
      marks = GC.stat(:mosaic_incremental_marks)
      assert_operator marks, :>, 3
      assert_operator GC.stat(:mosaic_incremental_steps), :>, marks, "the marks took no step between their pauses"
      # (Not under the stress gate, whose forced collections leave the pacer no say.)
      unless ENV["MOSAIC_STRESS_MINOR"]
        assert_equal 0, GC.stat_heap.sum { |_, h| h[:force_incremental_marking_finish_count] },
                     "allocation outran the marking (the sweep holds pages back for it)"
      end
      ring.each_with_index { |s, i| assert_match(/\Aring \d+\z/, s, "slot #{i}") }
      GC.verify_internal_consistency
    RUBY
  end

  # A major GC the pacer wants starts when the sweep has ended (the sweep holds pages back for
  # it). When the class that allocates is swept out while another class that nothing allocates
  # in still has pages to sweep (dead objects with ids there: the background sweeper leaves them
  # to the Ruby thread), the refill sweeps them (sweep.c, mosaic_sweep_help), so the major
  # starts. Before, the sweep stayed open and the class grew by fresh pages instead (redblack:
  # the pool's 15 MiB and 7.6 MiB of fresh pages taken before the major began; here, with a
  # class that may grow to its init slots without collecting, 367 fresh pages and no major in
  # 300k allocations). Each refill that helps takes a page: about one per 16 left to sweep.
  # (MOSAIC_INCREMENTAL_RATIO=0: the major must mark in steps, whatever its minors took, or
  # nothing waits for the sweep.)
  def test_a_class_that_runs_dry_ends_the_sweep_a_waiting_major_needs
    omit "Mosaic's incremental marking" unless mosaic?
    omit "the stress gate's forced collections leave the pacer no say" if ENV["MOSAIC_STRESS_MINOR"]
    omit "the heap check after each GC ends its sweep" if checking_build? || GC.config[:verify_after_gc]
    # (stderr: the GC reports the variable it was given, as the default GC does when verbose.)
    env = ON.merge("RUBY_GC_HEAP_1_INIT_SLOTS" => "2000000", "MOSAIC_INCREMENTAL_RATIO" => "0")
    assert_gc_script(<<~'RUBY', env: env, timeout: 300, ignore_stderr: true)
      require "objspace"
      Node = Struct.new(:key, :value, :left, :right, :red)
      assert_equal GC.stat_heap(1, :slot_size), ObjectSpace.memsize_of(Node.new), "Node is not in class 1"
      tree = nil
      100_000.times { |i| tree = Node.new(i, nil, tree) }
      GC.start
      6.times do
        # Young garbage with object ids in the largest class, where nothing below allocates.
        40.times { ("w" * 500).object_id }
        GC.start(full_mark: false, immediate_sweep: false)
        break if GC.latest_gc_info(:need_major_by)
      end
      assert_not_nil GC.latest_gc_info(:need_major_by), "no minor GC asked for a major"
      assert_equal :sweeping, GC.latest_gc_info(:state)
      majors = GC.stat(:major_gc_count)
      pages = GC.stat(:total_allocated_pages)
      chunks = 0
      while GC.stat(:major_gc_count) == majors && chunks < 300
        1000.times { |i| Node.new(i) }
        chunks += 1
      end
      grown = GC.stat(:total_allocated_pages) - pages   # pages mapped or taken back from the pool
      assert_operator GC.stat(:major_gc_count), :>, majors, "no major GC began in #{chunks}k allocations (#{grown} pages taken)"
      assert_operator grown, :<=, 16, "pages taken (fresh or pooled) while the major waited for the sweep"
      assert_equal 100_000, (n = 0; t = tree; (n += 1; t = t.left) while t; n)
      GC.verify_internal_consistency
    RUBY
  end

  # A child forked while the sweep holds pages back for a major GC (sweep.c) does not wait for
  # that major: the fork drops the parent's reasons for it (pace.c, mosaic_pace_after_fork), so
  # nothing would have put the pages back on the queues before the child's first GC. They
  # join the queues at the fork. Before, the child kept them held (606 slots here, against 0).
  def test_a_child_forked_while_pages_are_held_back_gets_them
    omit "Mosaic's incremental marking" unless mosaic?
    omit "fork" unless Process.respond_to?(:fork)
    omit "the stress gate's forced collections leave the pacer no say" if ENV["MOSAIC_STRESS_MINOR"]
    omit "the heap check after each GC ends its sweep" if checking_build? || GC.config[:verify_after_gc]
    # (MOSAIC_INCREMENTAL_RATIO=0: the sweep holds pages back only for a major in steps.)
    assert_gc_script(<<~'RUBY', env: ON.merge("MOSAIC_INCREMENTAL_RATIO" => "0"), timeout: 300)
      keep = []
      GC.start
      held = 0
      8.times do |round|
        # Pages half free after each minor; young garbage with ids in the largest class asks
        # for a major (:nofree) within a few minors, whose sweep then holds pages back.
        200_000.times { |i| s = "s#{round}-#{i}"; keep << s if i.even? }
        40.times { ("w" * 500).object_id }
        GC.start(full_mark: false, immediate_sweep: false)
        next unless GC.latest_gc_info(:need_major_by)
        majors = GC.stat(:major_gc_count)
        500.times do
          20.times { |i| "n#{i}" }
          held = GC.stat(:mosaic_held_back_slots)
          break if held > 0 || GC.stat(:major_gc_count) != majors
        end
        break if held > 0
      end
      assert_operator held, :>, 0, "the sweep held no page back before the major began"
      r, w = IO.pipe
      pid = fork do
        r.close
        w.write [GC.stat(:mosaic_held_back_slots), keep.size, keep[-1]].join(" ")
        w.close
        exit!(0)
      end
      w.close
      child_held, size, last = r.read.split
      Process.wait(pid)
      assert_predicate $?, :success?
      assert_equal "0", child_held, "the child kept the parent's held-back pages"
      assert_equal [keep.size.to_s, keep[-1]], [size, last]
      assert_operator GC.stat(:mosaic_held_back_slots), :>, 0, "the parent's held-back pages were released"
      GC.verify_internal_consistency
    RUBY
  end

  # A program building up its data (hash-heavy's shape: nested Hashes, every one kept) fills a
  # class faster than the pace expected, so a refill finds no room while a major GC marks in
  # steps. It catches up (a step of an eighth of the mark, then a page of growth: collect.c,
  # mosaic_incremental_catch_up) instead of finishing the whole mark in one pause. Before,
  # 2 of this script's 10 marks were finished so (hash-heavy: 233-366 ms pauses).
  # (MOSAIC_INCREMENTAL_RATIO=0: its minors trace much of the build-up and may take 16 ms or
  # more, and then some of its majors mark at once; this test is about the marks that take
  # steps.)
  def test_allocation_that_outruns_the_marking_catches_up_without_finishing_it
    omit "Mosaic's incremental marking" unless mosaic?
    omit "the stress gate's forced collections finish marks" if ENV["MOSAIC_STRESS_MINOR"]
    omit "fixed-size stress steps take no catch-up" if ENV["MOSAIC_STRESS_INCREMENTAL"]
    assert_gc_script(<<~'RUBY', env: ON.merge("MOSAIC_INCREMENTAL_RATIO" => "0"), timeout: 300)
      # Whether a class runs out depends on how the heap grew: build up to 6 times, until one
      # mark had to catch up (one does within the first two rounds in runs seen here).
      kept = nil
      6.times do |round|
        by_group = Hash.new { |h, k| h[k] = {} }
        500_000.times do |i|
          by_group[i % 1009][i] = { id: i, name: "w#{round}-#{i % 5003}", tags: { "odd" => i.odd? } }
        end
        kept = [round, by_group]
        break if GC.stat(:mosaic_incremental_catch_up_steps) > 0
      end
      assert_operator GC.stat(:mosaic_incremental_marks), :>, 3
      assert_operator GC.stat(:mosaic_incremental_catch_up_steps), :>, 0, "allocation never outran a mark here"
      assert_equal 0, GC.stat_heap.sum { |_, h| h[:force_incremental_marking_finish_count] },
                   "a refill finished a mark in one pause"
      round, by_group = kept
      assert_equal 500_000, by_group.sum { |_, g| g.size }
      assert_equal({ id: 499_999, name: "w#{round}-#{499_999 % 5003}", tags: { "odd" => true } },
                   by_group[499_999 % 1009][499_999])
      GC.verify_internal_consistency
    RUBY
  end

  # Found by the stress gate (TestGc#test_gc_parameter's child, at boot): loading instruction
  # sequences from binary announces each literal with a write barrier as it is loaded
  # (compile.c, ibf_load_code) but publishes the iseq's code only once the sequence and every
  # child sequence in it are loaded. A major GC that starts in between traces the iseq without
  # its literals, so once the code is published a black iseq refers to white strings, which the
  # loader's object list (grey) still holds: safe, and the weak tri-color invariant the checking
  # build checks (verify.c). Its strong form made the checker abort here (checked by putting it
  # back: "marked ... (imemo iseq), not grey, refers to unmarked ... (type 0x5)"). Methods with
  # literals around large nested blocks make every load span collections; in the checking build
  # a collection every 300 allocations starts majors mid-load and every step is checked.
  def test_iseqs_loaded_from_binary_while_marking
    omit "Mosaic's incremental marking" unless mosaic?
    env = STEPS.merge("RUBY_GC_HEAP_OLDOBJECT_LIMIT_FACTOR" => "0")
    env = env.merge("MOSAIC_STRESS_MINOR" => "300", "MOSAIC_VERIFY_STEPS" => "1") if checking_build?
    # (stderr: the GC reports the variable it was given, as the default GC does when verbose.)
    assert_gc_script(<<~'RUBY', env: env, timeout: 300, ignore_stderr: true)
      $VERBOSE = nil   # each load redefines the methods
      src = +""
      60.times do |m|
        literals = (0...8).map { |i| "\"lit-#{m}-#{i}\"" }.join(", ")
        inner = (0...200).map { |i| "\"in-#{m}-#{i}\"" }.join(", ")
        src << "def m#{m}(x)\n"
        src << "  a = [#{literals}]\n"
        src << "  b = x.map { |y| [\"blk-#{m}-\" + y.to_s, [1].map { |z| [#{inner}].last }] }\n"
        src << "  [a, b]\nend\n"
      end
      bin = RubyVM::InstructionSequence.compile(src).to_binary
      majors = GC.stat(:major_gc_count)
      rounds(50).times do |round|
        RubyVM::InstructionSequence.load_from_binary(bin).eval
        Array.new(500) { |i| "garbage #{i}" }
        next unless round % 5 == 0
        60.times do |m|
          a, b = send(:"m#{m}", [round])
          assert_equal (0...8).map { |i| "lit-#{m}-#{i}" }, a
          assert_equal [["blk-#{m}-#{round}", ["in-#{m}-199"]]], b
        end
      end
      assert_operator GC.stat(:major_gc_count) - majors, :>=, 5
      assert_operator GC.stat(:mosaic_incremental_marks), :>=, 5
      GC.verify_internal_consistency
    RUBY
  end

  # Which pacer-started majors mark in steps (policy/trigger.c, mark_at_once_is_short): all, unless
  # the longest recent minor mark took MOSAIC_INCREMENTAL_LONG_MINOR (16 ms) or more and the
  # major's mark done at once would take at most MOSAIC_INCREMENTAL_RATIO (2) times as long;
  # those mark at once, since the program's pauses are that long already. The ring's minors
  # take about 3 ms, so under the defaults its majors mark in steps (asserted with a floor of
  # 1000 ms, which no minor of this program reaches: on a machine loaded enough, its minors
  # pass 16 ms, and then marking its majors at once is the right call); they trace about as much
  # as its majors (the Strings written since the previous GC, against the ring's 150k: 3
  # against 3.5 ms), so with no floor on the minors (0) its majors mark at once (all but the
  # first large enough to take steps, traced before its minors grew). With a ratio of 0 every
  # one marks in steps; with a ratio no mark can reach, none does. (How long the pauses get
  # is measured by bench/run.rb, docs/decisions/0012-majors-mark-at-once-where-minors-are-long.md.)
  def test_incremental_ratio_decides_which_pacer_majors_mark_in_steps
    omit "Mosaic's incremental marking" unless mosaic?
    omit "the stress gate's forced collections leave the pacer no say" if ENV["MOSAIC_STRESS_MINOR"]
    omit "MOSAIC_STRESS_INCREMENTAL makes every pacer major mark in steps" if ENV["MOSAIC_STRESS_INCREMENTAL"]
    omit "the ThreadSanitizer build's minor marks pass the 16 ms floor: its majors mark at once" if tsan_build?
    # On the checking build (heap verification after every GC; the ASan and race gates) this
    # ring runs 6-8 majors, and the 3 marked in steps before any mark is timed leave no margin
    # under majors / 2 (the race gate once saw 3 of 6). test_env.rb omits its ring there too.
    omit "the checking build's ring runs too few majors to tell" if checking_build?
    ring = <<~'RUBY'
      ring = Array.new(150_000)
      1_500_000.times { |n| ring[n % 150_000] = "ring #{n}" }
      majors = GC.stat(:major_gc_count)
      marks = GC.stat(:mosaic_incremental_marks)
      ring.each_with_index { |s, i| assert_match(/\Aring \d+\z/, s, "slot #{i}") }
    RUBY
    no_floor = ON.merge("MOSAIC_INCREMENTAL_LONG_MINOR" => "0")
    all_in_steps = <<~'RUBY'
      # (The first majors, of fewer than MOSAIC_INCREMENTAL_MIN slots, mark at once.)
      assert_operator marks, :>, 3
      assert_operator marks, :>=, majors - 3, "pacer majors marked at once"
    RUBY
    assert_gc_script(ring + all_in_steps, env: ON.merge("MOSAIC_INCREMENTAL_LONG_MINOR" => "1000"), timeout: 300)
    assert_gc_script(ring + all_in_steps, env: no_floor.merge("MOSAIC_INCREMENTAL_RATIO" => "0"), timeout: 300)
    assert_gc_script(ring + <<~'RUBY', env: no_floor, timeout: 300)
      assert_operator majors, :>, 3, "the pacer asked for too few majors to tell"
      assert_operator marks, :<, majors / 2, "majors no longer than its minors marked in steps"
    RUBY
    assert_gc_script(ring + <<~'RUBY', env: no_floor.merge("MOSAIC_INCREMENTAL_RATIO" => "1e9"), timeout: 300)
      assert_operator majors, :>, 3, "the pacer asked for too few majors to tell"
      assert_equal 0, marks, "a major marked in steps although its mark at once was short enough"
    RUBY
  end


  # rb_gc_writebarrier_remember (bulk writes: Array#[]= with a range, #concat, #replace, ...)
  # on an object already marked queues it to be traced again at the next step. Once: a loop of
  # bulk writes with no allocation between two steps used to queue it once per write (a queue of
  # 1M entries, 7.8 MB, for 1M writes, each traced again at the next pause). The counters say how
  # many objects the pauses traced again and the most the queue ever held.
  def test_bulk_writes_between_steps_queue_an_object_once
    omit "Mosaic's incremental marking" unless mosaic?
    omit "the stress gate's forced collections end the mark this test holds open" if ENV["MOSAIC_STRESS_MINOR"]
    assert_gc_script(PRELUDE + <<~'RUBY', env: ON, timeout: 300)
      def rss_kb = File.read("/proc/self/status")[/VmRSS:\s+(\d+)/, 1].to_i
      # A global: its value is a root, marked by the start pause, so every write below finds
      # the array marked. (A local is reached through the thread, which the first step
      # traces; with no step before the loop, it was marked only when a conservative stack
      # word happened to hold it, and then nothing was queued at all.)
      $bulk_target = big = Array.new(2_000) { |i| i }
      small = Array.new(20) { |i| i }
      retraced0 = GC.stat(:mosaic_incremental_retraced_objects)
      n = 1_000_000; i = 0
      r0 = rss_kb   # (before the mark starts: reading it allocates, and could take a step)
      start_marking
      while i < n
        big[0, 20] = small; i += 1
      end
      assert_equal :marking, GC.latest_gc_info(:state), "a step ran during the loop: nothing allocates there"
      grown_kb = rss_kb - r0
      GC.start
      retraced = GC.stat(:mosaic_incremental_retraced_objects) - retraced0
      assert_operator retraced, :>=, 1, "the array written in bulk was not traced again"
      assert_operator retraced, :<=, 16, "objects traced again for #{n} bulk writes to one array"
      assert_operator GC.stat(:mosaic_incremental_retrace_queue_max), :<=, 16
      # The queue held 1M entries (7.8 MB) before it was bounded; what RSS allows here is noise.
      # (Not under ThreadSanitizer: its own shadow and history memory grows with the accesses.)
      unless GC::OPTS.include?("MOSAIC_TSAN")
        assert_operator grown_kb, :<, 2048, "RSS grew during #{n} bulk writes that allocate nothing"
      end
      assert_equal [*0...20, *20...2_000], big
      GC.verify_internal_consistency
    RUBY
  end

  # The same through Array#concat on a growing array: before the bound, each of the 2,000
  # concats queued the array again, and the next pause traced it 2,000 times at its final
  # size (one GC that marked for 69 s with 100,000 concats onto 20,000 elements).
  def test_concat_between_steps_traces_the_array_again_once_per_step
    omit "Mosaic's incremental marking" unless mosaic?
    omit "the stress gate's forced collections end the mark this test holds open" if ENV["MOSAIC_STRESS_MINOR"]
    assert_gc_script(PRELUDE + <<~'RUBY', env: ON, timeout: 300)
      big = Array.new(20_000) { |i| i }
      small = Array.new(20) { |i| "s#{i}" }
      retraced0 = GC.stat(:mosaic_incremental_retraced_objects)
      steps0 = GC.stat(:mosaic_incremental_steps)
      start_marking
      2_000.times { big.concat(small) }
      GC.start
      retraced = GC.stat(:mosaic_incremental_retraced_objects) - retraced0
      steps = GC.stat(:mosaic_incremental_steps) - steps0
      # At most once per pause (each step, and the final one) that found it queued.
      assert_operator retraced, :<=, steps + 16, "objects traced again for 2,000 concats (#{steps} steps)"
      assert_equal 60_000, big.size
      assert_equal "s19", big.last
      GC.verify_internal_consistency
    RUBY
  end

  # What the mutator does while a major marks in steps may cost the collector work in
  # proportion to the heap, never to the number of calls (DESIGN.md, "Work the mutator
  # can cause"): the same operations repeated 100 times more leave the mark stacks' peak, the
  # objects traced again and the weak registrations where they were. Each operation reaches the
  # collector: bulk writes (rb_gc_writebarrier_remember), stores of marked objects into marked
  # containers (the barrier's insertion step), object ids and finalizers asked for again, WeakMap
  # entries set again and deleted.
  def test_the_collectors_work_stays_proportional_to_the_heap
    omit "Mosaic's incremental marking" unless mosaic?
    omit "the stress gate's forced collections end the mark this test holds open" if ENV["MOSAIC_STRESS_MINOR"]
    assert_gc_script(PRELUDE + <<~'RUBY', env: STEPS, timeout: 300)
      old = Array.new(2_000) { |i| "old#{i}" }
      bigs = Array.new(8) { |i| Array.new(1_000 + i) { |j| old[j] } }
      small = old.first(20)
      h = Hash[old.first(40).each_slice(2).to_a]
      h2 = Hash[old.last(40).each_slice(2).to_a]
      wm = ObjectSpace::WeakMap.new
      old.first(500).each_with_index { |k, i| wm[k] = old[-1 - i] }
      fin = proc {}
      keep = old[7]
      4.times { GC.start }

      def phase(n, old, bigs, small, h, h2, wm, fin, keep)
        # Locals: on the VM stack, traced with the thread by the first step, so from then on
        # every bulk write to one finds it marked (elements of `bigs` would mostly still be
        # white).
        b0, b1, b2, b3 = bigs
        st0 = GC.stat
        n.times do |i|
          start_marking if GC.latest_gc_info(:state) != :marking
          b = (i & 3) == 0 ? b0 : (i & 3) == 1 ? b1 : (i & 3) == 2 ? b2 : b3
          b[0, 20] = small                 # bulk write
          b.concat(small); b.pop(20)       # bulk write, then back to its size
          (i.even? ? h : h2).replace(i.even? ? h2 : h)
          b[i % 1_000] = old[(i * 7) % 2_000]
          keep.object_id
          ObjectSpace.define_finalizer(keep, fin)
          wm[old[i % 500]] = old[-1 - (i % 500)]
          wm.delete(old[500 + i % 10]); wm[old[500 + i % 10]] = keep
        end
        GC.start
        st1 = GC.stat
        { pauses: st1[:mosaic_incremental_steps] - st0[:mosaic_incremental_steps] +
                  st1[:mosaic_incremental_marks] - st0[:mosaic_incremental_marks] + 1,
          retraced: st1[:mosaic_incremental_retraced_objects] - st0[:mosaic_incremental_retraced_objects],
          peak: st1[:mosaic_peak_mark_stack_bytes], weak: GC.latest_gc_info(:weak_references_count) }
      end

      a = phase(2_000, old, bigs, small, h, h2, wm, fin, keep)
      b = phase(rounds(200_000), old, bigs, small, h, h2, wm, fin, keep)
      assert_operator GC.stat(:mosaic_incremental_marks), :>, 2, "no major marked in steps"
      # At most the objects written in bulk (8 arrays, 2 hashes, and whatever else CRuby writes
      # that way) once per pause.
      assert_operator b[:retraced], :<=, 16 * b[:pauses], "objects traced again: #{b}"
      assert_operator b[:peak], :<=, a[:peak] * 2 + 65_536, "mark stacks grew with the calls: #{a} then #{b}"
      assert_operator b[:weak], :<=, a[:weak] * 2 + 64, "weak registrations grew with the calls: #{a} then #{b}"
      assert_operator b[:retraced], :>, 0, "no bulk write found its object marked: the test tests nothing"
      assert_equal old.first(20), bigs[3].first(20)
      assert_equal 1_003, bigs[3].size
      GC.verify_internal_consistency
    RUBY
  end

  def test_incremental_off_marks_at_once
    omit "Mosaic's incremental marking" unless mosaic?
    assert_gc_script(PRELUDE + <<~'RUBY', env: { "MOSAIC_INCREMENTAL" => "0" }, timeout: 300)
      old = []
      100.times { |r| old << Array.new(2000) { |i| "o#{r}-#{i}" }; Array.new(5000) { |i| "g#{i}" } }
      assert_operator GC.stat(:major_gc_count), :>, 1
      GC.start(full_mark: true, immediate_mark: false)
      assert_equal 0, GC.stat(:mosaic_incremental_marks)
      assert_not_equal :marking, GC.latest_gc_info(:state)
    RUBY
  end
end
