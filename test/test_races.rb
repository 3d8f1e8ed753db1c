require_relative "helper"

# The race-provoking mode (src/debug/stress_races.c): MOSAIC_STRESS_RACES=N on the checking build
# delays a thread by 0..N us, or yields its core, at the points where the GC threads (markers,
# the background sweeper) and the mutator hand work over. Programs must run as without it;
# the race gate (scripts/race-gate.sh) runs the whole suite and the differential tester so.
class TestMosaicRaces < Test::Unit::TestCase
  include MosaicTestHelper

  # Four GC threads, every mark parallel, the background sweeper on: every kind of hand-over.
  RACES = { "MOSAIC_STRESS_RACES" => "30", "MOSAIC_GC_THREADS" => "4", "MOSAIC_PARALLEL_MARK_MIN" => "0",
            "MOSAIC_BACKGROUND_SWEEP" => "1", "MOSAIC_BACKGROUND_SWEEP_MIN_PAGES" => "0",
            "MOSAIC_STRESS_INCREMENTAL" => "256" }

  WORK = <<~'RUBY'
    live = {}
    old = Array.new(300) { |i| ["o#{i}"] }
    4.times { GC.start }
    rounds(300).times do |r|
      # Young garbage (background sweeps), stores of young objects into old arrays (barriers),
      # bulk writes into them (re-greys while a major marks in steps), and a few majors.
      Array.new(500) { |i| "g#{r}-#{i}" }
      old[r % 300] << "y#{r}"
      old[(r * 7) % 300].concat(Array.new(20) { |i| "c#{r}-#{i}" })
      old[(r * 7) % 300].shift(20) if old[(r * 7) % 300].size > 60
      live[r % 50] = Array.new(40) { |i| "l#{r}-#{i}" }
      GC.start(full_mark: true, immediate_mark: false) if r % 60 == 0
      GC.start(immediate_sweep: false) if r % 45 == 0
    end
    GC.start
    old.each_with_index { |a, i| raise "old #{i}: #{a.first}" unless a.first == "o#{i}" }
    live.each { |k, a| raise "live #{k}" unless a.size == 40 && a.all? { |s| s.start_with?("l") } }
    GC.verify_internal_consistency
  RUBY

  def test_race_mode_delays_the_hand_overs_and_changes_no_result
    omit "the checking build's race mode" unless mosaic? && checking_build?
    assert_gc_script(WORK + <<~'RUBY', env: RACES, timeout: 300)
      assert_operator GC.stat(:mosaic_race_delays), :>, 100, "race mode injected (almost) nothing"
      assert_operator GC.stat(:mosaic_background_sweeps), :>, 0
      assert_operator GC.stat(:mosaic_parallel_marks) + GC.stat(:mosaic_incremental_parallel_steps), :>, 0
      assert_operator GC.stat(:mosaic_incremental_marks), :>, 0
    RUBY
  end

  def test_race_mode_is_off_unless_asked
    omit "Mosaic's race mode" unless mosaic?
    assert_gc_script(WORK + <<~'RUBY', env: RACES.merge("MOSAIC_STRESS_RACES" => "0"), timeout: 300)
      assert_equal 0, GC.stat(:mosaic_race_delays)
    RUBY
  end

  def test_race_mode_needs_the_checking_build_and_a_number
    omit "Mosaic's messages" unless mosaic?
    if checking_build?
      out, err, status = EnvUtil.invoke_ruby([{ "RUBY_GC_LIBRARY" => LIB_NAME, "MOSAIC_STRESS_RACES" => "soon" },
                                              "-e", "print GC.stat(:mosaic_race_delays)"], "", true, true)
      assert_predicate status, :success?, err
      assert_match(/\[mosaic\] invalid value for MOSAIC_STRESS_RACES: soon/, err)
      assert_equal "0", out
    else
      out, err, status = EnvUtil.invoke_ruby([{ "RUBY_GC_LIBRARY" => LIB_NAME, "MOSAIC_STRESS_RACES" => "50" },
                                              "-e", "GC.start; print GC.stat(:mosaic_race_delays)"], "", true, true)
      assert_predicate status, :success?, err
      assert_match(/\[mosaic\] MOSAIC_STRESS_RACES is ignored: it needs the checking build/, err)
      assert_equal "0", out
    end
  end

  # mosaic_collect read whether a major marks in steps before it took the VM lock: a Ractor's
  # GC.start(full_mark: false) that lost the lock to another Ractor's
  # GC.start(immediate_mark: false) then ran a minor collection over the mark in steps (mark
  # bits reset to the old bits under its grey objects), and the mark's final pause took old
  # objects for traced: their young children were freed while referenced (the checking build's
  # verifier: "refers to ..., a dead slot"). Found by the differential tester's ractor_bulk
  # step under race mode. With a race point in that window it failed 4 runs of 4.
  def test_a_collection_does_not_run_over_a_mark_another_ractor_started
    omit "Mosaic" unless mosaic?
    env = checking_build? ? { "MOSAIC_STRESS_RACES" => "200", "MOSAIC_GC_THREADS" => "1" } : {}
    assert_gc_script(<<~'RUBY', env: env, timeout: 300)
      Warning[:experimental] = false
      old = Array.new(200) { |i| ["o#{i}"] }
      4.times { GC.start }
      r = Ractor.new do
        keep = []
        300.times do |i|
          GC.start(full_mark: false)
          keep << Array.new(20) { |j| "r#{i}-#{j}" }
          keep.shift if keep.size > 20
        end
        keep.all? { |a| a.size == 20 && a.all? { |x| x.start_with?("r") } }
      end
      300.times do |i|
        GC.start(full_mark: true, immediate_mark: false)
        old[i % 200] << "y#{i}"
        Array.new(200) { |j| "g#{j}" }
      end
      assert_true r.take, "the Ractor's arrays"
      GC.start
      old.each_with_index { |a, i| assert_equal "o#{i}", a.first; assert a.drop(1).all? { |x| x.start_with?("y") } }
      GC.verify_internal_consistency
    RUBY
  end

  # GC.disable and GC.enable take no lock, and another Ractor reads the flag as it allocates and
  # mallocs (alloc.c's refill, malloc.c's guard). A refill that read it twice could decline to
  # grow past the budget (GC enabled), then to collect (GC now disabled), and raise
  # NoMemoryError: 6 of 6 runs did before it read the flag once. Under the TSan gate this also
  # failed with a data race between rb_gc_impl_gc_enable's store and cache_refill's load,
  # before every access went through mosaic_dont_gc / mosaic_set_dont_gc. Both sides run for a
  # second of wall time, so the Ractor's refills meet the toggles however fast either is.
  def test_gc_disable_while_another_ractor_allocates
    omit "Mosaic's GC.disable" unless mosaic?
    assert_gc_script(<<~'RUBY', timeout: 300)
      Warning[:experimental] = false
      r = Ractor.new do
        keep = []
        stop = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 1.0
        rounds = 0
        while Process.clock_gettime(Process::CLOCK_MONOTONIC) < stop
          1000.times { |i| keep << ("r#{i}" * 40); keep.shift if keep.size > 100 }
          rounds += 1
        end
        [rounds, keep == (900..999).map { |i| "r#{i}" * 40 }]
      end
      stop = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 1.0
      toggles = 0
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) < stop
        100.times do |i|
          assert_false GC.disable
          assert_equal "m#{i}".size * 40, ("m#{i}" * 40).size
          assert_true GC.enable
        end
        toggles += 100
      end
      rounds, kept = r.take
      assert_operator rounds, :>, 0
      assert_operator toggles, :>, 0
      assert_true kept, "the Ractor's last strings"
      assert_false GC.disable
      GC.enable
    RUBY
  end
end
