# Workload "mark-shuffled": the speed of a full mark over a heap whose objects are laid out in
# no useful order, where marking is mostly waiting on cache misses. Builds 1.2M Strings, Arrays,
# Hashes and plain Objects (400k with --quick), shuffles them into 64-element Arrays so that
# neighbours in the graph are far apart in memory, then times 10 full, immediately swept GCs.
# Figures: seconds of wall time and of thread CPU time for the 10 GCs (lower is better).
# Usage: ruby bench/workloads/mark_shuffled.rb [--quick]
require_relative "../lib/bench_support"

count = Bench.size(1_200_000, 400_000)
srand(1)
objects = Array.new(count) do |i|
  case i % 4
  when 0 then "string #{i}"
  when 1 then [i, i.to_s]
  when 2 then { a: i, b: "x#{i}" }
  else Object.new
  end
end
objects.shuffle!
groups = objects.each_slice(64).to_a
objects = nil
GC.start

cpu = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
seconds = Bench.time { 10.times { GC.start(full_mark: true, immediate_sweep: true) } }
cpu = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - cpu
raise "mark-shuffled: lost objects" unless groups.sum(&:size) == count
Bench.figure("10 full GCs", seconds, "s", better: :lower)
Bench.figure("10 full GCs, CPU", cpu, "s", better: :lower)
