# Workload "malloc-fragmented": what a collector costs when glibc's malloc holds many free
# chunks, as a long-running server's does. Allocates 200k strings of 1.1-3 KB (malloc'd
# buffers; --quick: 50k), drops every other one, runs GC.start (the freed buffers stay in
# glibc's bins: no whole page of them is free), then times 10 more GC.start calls and 1000
# calls of GC.stat[:count], the Hash form tools use for one figure. Figures: the median
# GC.start pause and the cost of one GC.stat call, in microseconds (lower is better).
# Mosaic's after-major malloc_trim test and its GC.stat memory keys once walked those bins at
# each call (docs/decisions/0019-malloc-trim-when-it-pays.md): 25 ms per GC.start, 27 ms per GC.stat.
# Usage: ruby bench/workloads/malloc_fragmented.rb [--quick]
require_relative "../lib/bench_support"

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

n = Bench.size(200_000, 50_000)
srand(1)
strings = Array.new(n) { "x" * (1100 + rand(2000)) }
strings.each_index { |i| strings[i] = nil if i.odd? }
GC.start
pauses = Array.new(10) { t = now; GC.start; now - t }.sort
t = now
1000.times { GC.stat[:count] }
stat = (now - t) / 1000
raise "malloc-fragmented: lost strings" unless strings.compact.size == n / 2

Bench.figure("GC.start pause (median of 10)", pauses[pauses.size / 2] * 1e6, "us", better: :lower)
Bench.figure("GC.stat[:count]", stat * 1e6, "us", better: :lower)
