# Workload "small-heap-malloc": a small heap whose garbage is malloc'd bytes. 300k strings of
# 4-64 KB capacity (quick: 60k), each one malloc'd block, filled with 100 bytes; one in a hundred
# is kept in a window of the latest 50. The heap holds a few hundred KiB of slots, below the
# size at which Mosaic's background sweeper takes a sweep (MOSAIC_BACKGROUND_SWEEP_MIN_PAGES),
# so the Ruby thread sweeps lazily, while about 10 GB of capacity goes through malloc: when a GC
# comes is set by malloc accounting alone. (Mosaic netted a lazy sweep's frees against the
# malloc since the latest GC and held about three malloc limits of garbage at every GC: peak RSS
# 1.47 of the default GC's.) Reports the loop's seconds.
# Usage: ruby bench/workloads/small_heap_malloc.rb [--quick]
require_relative "../lib/bench_support"

count = Bench.size(300_000, 60_000)
rng = Random.new(20_261_129)
FILL = ("y" * 100).freeze

keep = []
capacity = 0
seconds = Bench.time do
  count.times do |i|
    cap = 4096 + rng.rand(60_000)
    s = String.new(capacity: cap)
    s << FILL
    capacity += cap
    keep << s if i % 100 == 0
    keep.shift if keep.size > 50
  end
end

raise "small-heap-malloc: window lost entries" unless keep.size == 50 && keep.all? { |s| s == FILL }
puts format("  (%d strings: %.0f MB of malloc'd capacity, %d GCs)", count, capacity / 1048576.0, GC.count)
Bench.figure("small-heap-malloc", seconds, "s", better: :lower)
