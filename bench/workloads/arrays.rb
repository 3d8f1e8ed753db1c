# Workload "arrays": Array.new(n) ten million times for each n from 0 to 16 (embedded and
# heap-allocated array bodies), in seconds per n. --quick does one million per n.
# Usage: ruby bench/workloads/arrays.rb [--quick]
require_relative "../lib/bench_support"

iterations = Bench.size(10_000_000, 1_000_000)
(0..16).each do |n|
  seconds = Bench.time do
    i = 0
    while i < iterations
      Array.new(n)
      i += 1
    end
  end
  Bench.figure("Array.new(#{n}) x#{iterations}", seconds, "s", better: :lower)
end
