require_relative "helper"
require "open3"

# Parallel marking (src/threads/mark_workers.c, DESIGN.md "Parallel marking"): with
# MOSAIC_PARALLEL_MARK_MIN=0 every collection marks on MOSAIC_GC_THREADS threads, so these
# scripts check, on graphs where the markers must hand work to each other, that nothing
# reachable is lost, weak references are cleared exactly when their referents die, the
# remembered set stays complete for the minor GCs that follow, and the threads are stopped
# across fork.
class TestMosaicParallelMark < Test::Unit::TestCase
  include MosaicTestHelper

  PARALLEL = { "MOSAIC_GC_THREADS" => "2", "MOSAIC_PARALLEL_MARK_MIN" => "0" }

  def test_parallel_marks_keep_every_reachable_object
    omit "Mosaic's parallel marker" unless mosaic?
    assert_gc_script(<<~'RUBY', env: PARALLEL, timeout: 300)
      # A deep list (work only one marker can follow), wide arrays and hashes (work to share),
      # and shuffled cross references.
      list = nil
      200_000.times { |i| list = [i, list] }
      wide = Array.new(200) { |i| Array.new(1000) { |j| "s#{i}-#{j}" } }
      hash = {}
      50_000.times { |i| hash["k#{i}"] = [i, i.to_s] }
      cross = (wide.flatten(1) + hash.values).shuffle(random: Random.new(42))
      6.times { |n| GC.start(full_mark: n.even?) }
      assert_operator GC.stat(:mosaic_parallel_marks), :>=, 6
      assert_operator GC.stat(:mosaic_parallel_marked_by_threads), :>, 0, "the second thread marked nothing"

      n = 0
      node = list
      while node
        assert_equal 199_999 - n, node[0]
        n += 1
        node = node[1]
      end
      assert_equal 200_000, n
      wide.each_with_index { |a, i| assert_equal "s#{i}-999", a[999]; assert_equal 1000, a.size }
      50_000.times { |i| assert_equal [i, i.to_s], hash["k#{i}"] }
      assert_equal 200 * 1000 + 50_000, cross.size
      GC.verify_internal_consistency
    RUBY
  end

  def test_weak_references_after_parallel_marks
    omit "Mosaic's parallel marker" unless mosaic?
    assert_gc_script(<<~'RUBY', env: PARALLEL, timeout: 300)
      wm = ObjectSpace::WeakMap.new
      keys = Array.new(40_000) { |i| "key#{i}" }
      vals = Array.new(40_000) { |i| "val#{i}" }
      keys.each_with_index { |k, i| wm[k] = vals[i] }
      GC.start
      kept = (0...40_000).step(7).to_a
      kept_vals = vals.values_at(*kept)
      vals = nil
      3.times { GC.start }
      junk = Array.new(80_000) { |i| "val#{i}" }
      kept.each_with_index { |i, n| assert_same kept_vals[n], wm[keys[i]] }
      wrong = keys.each_with_index.count { |k, i| (v = wm[k]) && v != "val#{i}" }
      assert_equal 0, wrong, "WeakMap values that are not the objects stored"
      assert_operator wm.size, :<, 40_000
      assert_operator GC.stat(:mosaic_parallel_marks), :>=, 4
      junk.clear
    RUBY
  end

  # Old objects that gain young children, marked by parallel majors then minors: the
  # remembered set a parallel mark rebuilds must be complete, or a minor GC frees a child.
  def test_minor_gcs_after_parallel_marks_keep_young_children_of_old_parents
    omit "Mosaic's parallel marker" unless mosaic?
    assert_gc_script(<<~'RUBY', env: PARALLEL, timeout: 300)
      olds = Array.new(20_000) { [] }
      4.times { GC.start }
      20.times do |round|
        olds.each_with_index { |o, i| o << "r#{round}-#{i}" if (i + round) % 3 == 0 }
        GC.start(full_mark: false)
        GC.start(full_mark: round % 5 == 0)
      end
      olds.each_with_index do |o, i|
        expect = (0...20).select { |r| (i + r) % 3 == 0 }.map { |r| "r#{r}-#{i}" }
        assert_equal expect, o
      end
      GC.verify_internal_consistency
    RUBY
  end

  # The marking threads (named mosaic-mark) are joined before fork: the child starts with
  # none, marks its first collection alone (so that a child that collects once right after
  # the fork, as Process.daemon's may, has no thread it did not make: CRuby's
  # TestProcess#test_daemon_no_threads), and gets them back at its next parallel mark; the
  # parent at its next one.
  def test_marking_threads_are_stopped_across_fork
    omit "Mosaic's parallel marker" unless mosaic?
    omit "needs fork and /proc" unless Process.respond_to?(:fork) && File.directory?("/proc/self/task")
    assert_gc_script(<<~'RUBY', env: PARALLEL, timeout: 120)
      def markers = Dir.glob("/proc/self/task/*/comm").count { |f| (File.read(f) rescue "").start_with?("mosaic-mark") }
      keep = Array.new(50_000) { |i| [i] }
      GC.start
      assert_equal 1, markers
      r, w = IO.pipe
      pid = fork do
        r.close
        before = markers
        GC.start
        first = markers
        GC.start
        w.puts [before, first, markers, keep.sum(&:first)].join(",")
        w.close
        exit!(0)
      end
      w.close
      assert_equal "0,0,1,#{(0...50_000).sum}", r.read.chomp
      Process.wait(pid)
      assert_predicate $?, :success?
      GC.start
      assert_equal 1, markers
    RUBY
  end

  def test_one_thread_marks_alone_and_bad_values_warn
    omit "Mosaic's parallel marker" unless mosaic?
    assert_gc_script(<<~'RUBY', env: { "MOSAIC_GC_THREADS" => "1", "MOSAIC_PARALLEL_MARK_MIN" => "0" })
      a = Array.new(100_000) { |i| [i] }
      3.times { GC.start }
      assert_equal 0, GC.stat(:mosaic_parallel_marks)
      assert_equal 1, GC.stat(:mosaic_gc_threads)
      assert_equal 100_000, a.size
    RUBY
    out, err, status = EnvUtil.invoke_ruby([{ "RUBY_GC_LIBRARY" => LIB_NAME, "MOSAIC_GC_THREADS" => "0" },
                                            "-e", "p GC.stat(:mosaic_gc_threads) >= 1"], "", true, true)
    assert_predicate status, :success?
    assert_match(/MOSAIC_GC_THREADS=0 is ignored/, err)
    assert_equal "true\n", out
    out, err, status = EnvUtil.invoke_ruby([{ "RUBY_GC_LIBRARY" => LIB_NAME, "MOSAIC_GC_THREADS" => "many" },
                                            "-e", "p GC.stat(:mosaic_gc_threads) >= 1"], "", true, true)
    assert_predicate status, :success?
    assert_match(/invalid value for MOSAIC_GC_THREADS: many/, err)
    assert_equal "true\n", out
  end

  # The default thread count follows the CPUs the process may run on (src/core/cpus.c): pinned
  # to one CPU with taskset, a process starts no marking thread beside the Ruby thread, so it
  # never marks in parallel; MOSAIC_GC_THREADS still overrides it. The background sweeper stays
  # on with one thread (it does the sweeping the Ruby thread would do lazily). (The cgroup CPU
  # quota, the other bound, is covered by test/c/test_cpus.c's made-up trees.)
  def test_gc_threads_follow_the_cpus_the_process_may_use
    omit "Mosaic's parallel marker" unless mosaic?
    taskset = ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |d| File.join(d, "taskset") }
                 .find { |f| File.executable?(f) }
    omit "taskset (util-linux) is not installed" unless taskset
    script = <<~'RUBY'
      require "etc"
      a = Array.new(100_000) { |i| [i] }
      3.times { GC.start }
      names = Dir["/proc/self/task/*/comm"].map { |f| File.read(f).strip rescue nil }
      puts [Etc.nprocessors, GC.stat(:mosaic_gc_threads), GC.stat(:mosaic_parallel_marks),
            names.count("mosaic-mark"), names.count("mosaic-sweep"), a.size].join(",")
    RUBY
    run = lambda do |env, pin|
      cmd = pin ? [taskset, "-c", pin, EnvUtil.rubybin] : [EnvUtil.rubybin]
      # The default count: no MOSAIC_GC_THREADS from the gate that runs this test.
      out, err, status = Open3.capture3({ "RUBY_GC_LIBRARY" => LIB_NAME, "MOSAIC_GC_THREADS" => nil,
                                          "MOSAIC_BACKGROUND_SWEEP" => nil, "MOSAIC_PARALLEL_MARK_MIN" => "0",
                                          "MOSAIC_BACKGROUND_SWEEP_MIN_PAGES" => "0" }.merge(env),
                                        *cmd, "-e", script)
      assert_predicate status, :success?, err
      assert_match(/\A\d+(,\d+){5}\n\z/, out, err)
      out.split(",").map(&:to_i)
    end
    cpu = File.read("/proc/self/status")[/^Cpus_allowed_list:\s*(\d+)/, 1] || "0"
    assert_equal [1, 1, 0, 0, 1, 100_000], run.({}, cpu),
                 "pinned to one CPU: [CPUs, GC threads, parallel marks, marking threads, sweeping threads, size]"
    _, threads, parallel_marks, markers, _, size = run.({ "MOSAIC_GC_THREADS" => "2" }, cpu)
    assert_equal [2, 1, 100_000], [threads, markers, size], "MOSAIC_GC_THREADS=2 on one CPU"
    assert_operator parallel_marks, :>=, 3
    nprocs, threads, = run.({}, nil)
    assert_operator threads, :<=, [nprocs, 8].min
    assert_operator threads, :>=, 1
    _, threads, _, _, sweepers, = run.({ "MOSAIC_GC_THREADS" => "1" }, nil)
    assert_equal [1, 1], [threads, sweepers], "one GC thread: the background sweeper still runs"
  end
end
