# One measured child process of bench/run.rb: spawned in its own process group, waited for, timed.
# Plain Ruby >= 3.0; tested by test/test_bench_measure.rb.
#
# Wall time: CLOCK_MONOTONIC from just before the spawn to the return of a blocking wait (a
# watchdog thread enforces the time limit), so it is not rounded up to a polling interval.
# CPU time: what getrusage(RUSAGE_CHILDREN) of this process (read by Process.times, in
# microseconds) gains across the wait. The kernel adds a child's rusage there when it is waited
# for: user and system time of all its threads, plus that of every descendant it waited for
# itself (a workload's forked workers, valgrind). It is exact as long as this process reaps no
# other child meanwhile, which run.rb does not. A descendant nobody waits for is not counted.
module Measure
  Result = Struct.new(:status, :wall_s, :cpu_user_s, :cpu_sys_s, :timed_out, keyword_init: true) do
    def cpu_s = cpu_user_s + cpu_sys_s
  end

  module_function

  # env and cmd as for Process.spawn; opts: more spawn options (out:, err:, chdir:).
  def run(env, cmd, timeout:, **opts)
    times0 = Process.times
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    pid = Process.spawn(env, *cmd, pgroup: true, **opts)
    timed_out = false
    watchdog = Thread.new do
      sleep timeout
      timed_out = true
      kill_group(pid)
    end
    _, status = Process.wait2(pid)
    wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    timed_out ? watchdog.join : watchdog.kill.join
    times1 = Process.times
    Result.new(status: status, wall_s: wall, timed_out: timed_out,
               cpu_user_s: times1.cutime - times0.cutime, cpu_sys_s: times1.cstime - times0.cstime)
  end

  # TERM to the child's process group, then KILL to what is left of it after 2 s. (The group is
  # gone once every member has exited and the child was reaped by the wait in run.)
  def kill_group(pid)
    Process.kill("TERM", -pid)
    20.times do
      sleep 0.1
      Process.kill(0, -pid)
    end
    Process.kill("KILL", -pid)
  rescue Errno::ESRCH
    nil
  end
end
