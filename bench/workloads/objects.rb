# Workload "objects": 0x400000.times { Object.new } (--quick: 0x100000), in seconds.
# --count N overrides the count (objects_cachegrind.rb runs it under valgrind with small counts).
# Usage: ruby bench/workloads/objects.rb [--quick] [--count N]
require_relative "../lib/bench_support"

count = if (i = ARGV.index("--count")) then Integer(ARGV[i + 1])
        else Bench.size(0x400000, 0x100000)
        end
seconds = Bench.time { count.times { Object.new } }
Bench.figure("#{count} x Object.new", seconds, "s", better: :lower)
