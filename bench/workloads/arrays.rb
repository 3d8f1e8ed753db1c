# Workload "arrays": Array.new(n) ten million times for each n from 0 to 16 (embedded and
# heap-allocated array bodies), in seconds per n. --quick does one million per n.
# Usage: ruby bench/workloads/arrays.rb [--quick]
require_relative "../lib/bench_support"

iterations = Bench.size(10_000_000, 1_000_000)
(0..16).each do |n|
  Bench.figure("Array.new(#{n}) x#{iterations}", Bench.array_new_seconds(n, iterations), "s", better: :lower)
end
