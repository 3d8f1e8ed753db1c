# Workload "array-new": the transient heap's microbenchmark (issue 37, "A young space"):
# Array.new(n) ten million times for each n from 0 to 10, keeping nothing, in seconds (the total,
# which issue 37 targets at <= 0.65x the default GC's, and each n's). Every array is embedded in
# its slot (40 to 120 bytes): the loop is slot allocation, the young sweep and Ruby's own array
# code. --quick does 1M per n; --count N overrides the count (for cachegrind runs).
# Usage: ruby bench/workloads/array_new.rb [--quick] [--count N]
require_relative "../lib/bench_support"

iterations = if (i = ARGV.index("--count")) then Integer(ARGV[i + 1])
             else Bench.size(10_000_000, 1_000_000)
             end
per_n = (0..10).map { |n| Bench.array_new_seconds(n, iterations) }
Bench.figure("Array.new(0..10) x#{iterations}", per_n.sum, "s", better: :lower)
per_n.each_with_index { |s, n| Bench.figure("Array.new(#{n}) x#{iterations}", s, "s", better: :lower) }
