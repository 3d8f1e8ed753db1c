# Workload "bulk-writes-marking": bulk writes while a major GC marks in steps. CRuby reports a
# bulk write (Array#[]= over more than 16 elements, #concat, #replace, hash copies) with
# rb_gc_writebarrier_remember; a collector marking in steps must trace the written object
# again, and must not queue it once per write. Two phases, each started by
# GC.start(full_mark: true, immediate_mark: false) (under Mosaic a major that marks in steps;
# under the default GC a full mark at once):
#   1. big[0, 20] = small 1M times on a 2,000-element Array (--quick: 200k); nothing allocates,
#      so no step runs: figures are the RSS growth during the loop and the next GC.start;
#   2. big.concat(small) 100,000 times onto a 20,000-element Array (--quick: 20,000), then
#      GC.start: the loop's and the GC's time together, and the GC time they contain.
# Lower is better for every figure. Usage: ruby bench/workloads/bulk_writes_marking.rb [--quick]
require_relative "../lib/bench_support"

def rss_kb = File.read("/proc/self/status")[/VmRSS:\s+(\d+)/, 1].to_i
def gc_ms = GC.stat(:time)

big = Array.new(2_000) { |i| i }
small = Array.new(20) { |i| i }
n = Bench.size(1_000_000, 200_000)
GC.start(full_mark: true, immediate_mark: false)
r0 = rss_kb   # (after the GC.start: that one may return pages)
i = 0
while i < n
  big[0, 20] = small
  i += 1
end
grown = rss_kb - r0
next_gc = Bench.time { GC.start }

big = Array.new(20_000) { |i| i }
m = Bench.size(100_000, 20_000)
GC.start
GC.start(full_mark: true, immediate_mark: false)
ms0 = gc_ms
dt = Bench.time do
  k = 0
  while k < m
    big.concat(small)
    k += 1
  end
  GC.start
end
raise "bulk-writes-marking: lost elements" unless big.size == 20_000 + 20 * m

Bench.figure("RSS growth during #{n} bulk writes", grown, "kB", better: :lower)
Bench.figure("next GC.start after them", next_gc * 1000, "ms", better: :lower)
Bench.figure("#{m} concats + GC.start", dt * 1000, "ms", better: :lower)
Bench.figure("GC time in them", gc_ms - ms0, "ms", better: :lower)
