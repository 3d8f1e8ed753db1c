require_relative "helper"
require "rbconfig"
require_relative "../bench/lib/measure"

# bench/lib/measure.rb, how the benchmark runner times a child: wall time, and CPU time from its
# getrusage(RUSAGE_CHILDREN) across the wait. Plain Ruby; the measured children are tiny Ruby
# scripts under whatever GC the suite runs under. Broad bounds only: the machine may be loaded.
class TestMosaicBenchMeasure < Test::Unit::TestCase
  # A child's CPU time is user + system of its threads and of the children it waited for: a busy
  # loop counts, a sleep does not. The loops burn the child's own CPU clock, not wall time.
  def ruby_cmd(code) = [RbConfig.ruby, "--disable-gems", "-e", code]

  BURN = "def burn(s, clock = Process::CLOCK_PROCESS_CPUTIME_ID)\n" \
         "  t = Process.clock_gettime(clock); nil while Process.clock_gettime(clock) - t < s\nend\n"

  def measure(code) = Measure.run({}, ruby_cmd(BURN + code), timeout: 60, out: File::NULL)

  def test_cpu_time_of_a_busy_loop_is_counted
    m = measure("burn(0.25)")
    assert_predicate m.status, :success?
    assert_operator m.cpu_s, :>=, 0.25
    assert_operator m.cpu_s, :<=, m.wall_s + 0.1
    assert_in_delta m.cpu_s, m.cpu_user_s + m.cpu_sys_s, 1e-9
  end

  def test_cpu_time_of_a_sleep_is_not_counted
    m = measure("sleep 0.5")
    assert_predicate m.status, :success?
    assert_operator m.wall_s, :>=, 0.5
    assert_operator m.cpu_s, :<, m.wall_s - 0.3
  end

  def test_cpu_time_includes_threads_and_waited_children
    m = measure("Process.wait(fork { burn(0.2) }) if Process.respond_to?(:fork)\n" \
                "2.times.map { Thread.new { burn(0.1, Process::CLOCK_THREAD_CPUTIME_ID) } }.each(&:join)")
    assert_predicate m.status, :success?
    assert_operator m.cpu_s, :>=, Process.respond_to?(:fork) ? 0.4 : 0.2
  end

  def test_a_run_past_its_time_limit_is_killed
    m = Measure.run({}, ["sleep", "30"], timeout: 0.3)
    assert_true m.timed_out
    assert_predicate m.status, :signaled?
    assert_operator m.wall_s, :<, 2
  end
end
