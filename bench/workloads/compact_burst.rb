# Workload "compact-burst": issue 9's compaction target, GC.compact on a heap fragmented by a
# burst. Allocates 1M mixed objects (strings, 2-element arrays, objects with one ivar, one-entry
# hashes; --quick: 250k), drops 90% of them at random (fixed seed), runs GC.start twice (so both
# GCs start from a swept heap with nothing left to free but what compaction frees), then times
# one GC.compact. Figures: pages in the size classes (heap_eden_pages) before and after and
# how many it gave back (higher is better), the GC.compact time, wall and process CPU (lower is
# better; CPU time is less disturbed by other processes on a loaded machine), VmRSS after.
# Mosaic's auto-compaction policy is switched off (GC.config auto_compact_policy: :off) so that
# its GC.start calls do not compact first: GC.compact is measured on the fragmented heap itself.
# Usage: ruby bench/workloads/compact_burst.rb [--quick]
require_relative "../lib/bench_support"

Bench.skip("GC.compact is not implemented by this GC") unless GC.respond_to?(:compact) &&
                                                              (GC.latest_compact_info rescue false)

def rss_kb = File.read("/proc/self/status")[/VmRSS:\s+(\d+)/, 1].to_i

GC.config(auto_compact_policy: :off) if GC.config.key?(:auto_compact_policy)
n = Bench.size(1_000_000, 250_000)
srand(42)
objs = Array.new(n) do |i|
  case i % 4
  when 0 then "str#{i}"
  when 1 then [i, i + 1]
  when 2 then Object.new.tap { |o| o.instance_variable_set(:@a, i) }
  else { i => i }
  end
end
peak_pages = GC.stat(:heap_eden_pages)
objs.each_index { |i| objs[i] = nil if rand < 0.9 }
GC.start
GC.start
before = GC.stat(:heap_eden_pages)
rss_before = rss_kb
cpu0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
dt = Bench.time { GC.compact }
cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu0
after = GC.stat(:heap_eden_pages)
live = objs.compact.size
raise "compact-burst: lost objects" unless live.between?(n / 20, n / 5)

Bench.figure("pages after the burst", peak_pages, "pages", better: :lower)
Bench.figure("pages after GC.start", before, "pages", better: :lower)
Bench.figure("pages after GC.compact", after, "pages", better: :lower)
Bench.figure("pages freed by GC.compact", before - after, "pages", better: :higher)
Bench.figure("GC.compact time", dt * 1000, "ms", better: :lower)
Bench.figure("GC.compact CPU time", cpu * 1000, "ms", better: :lower)
Bench.figure("RSS before GC.compact", rss_before / 1024.0, "MB", better: :lower)
Bench.figure("RSS after GC.compact", rss_kb / 1024.0, "MB", better: :lower)
