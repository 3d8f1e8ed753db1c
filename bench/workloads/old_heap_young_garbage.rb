# Workload "old-heap-young-garbage": the latency of steady young garbage over a large old heap, as
# the program sees it. First a large heap that lives to the end (about 70 MiB of slots and malloc;
# quick: about 15 MiB): 80k Strings of 100-600 bytes (quick 20k) and a Hash of 200k entries (quick
# 40k) whose values are small Arrays and small Hashes, each holding a String. Then 20k batches
# (quick 4k) of 1000 allocations of young garbage each (Strings, small Arrays and Hashes, dropped at
# once), and in every batch 4 writes of a young object into old containers (an element of one of the
# table's small Arrays, or a value of one of its small Hashes, replaced: old-to-young stores). Each
# batch is timed with CLOCK_MONOTONIC around the batch alone, so a collection that falls inside a
# batch -- a minor, a major's pause or its steps, a sweep step -- lengthens that batch whatever the
# collector counts as its pause. On a program of this shape (about 160 MiB live, 4 s of young
# garbage) Mosaic's worst batch was 75-155 ms against the default GC's 12-18 ms, at 1.9x its peak
# RSS. Reports the worst and the p99 batch (ms) and the seconds of the loop.
# Usage: ruby bench/workloads/old_heap_young_garbage.rb [--quick]
require_relative "../lib/bench_support"

strings = Bench.size(80_000, 20_000)
entries = Bench.size(200_000, 40_000)
batches = Bench.size(20_000, 4_000)
writes_per_batch = 4
rng = Random.new(16_180)

TEXT = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor " * 10).freeze

# The old heap: constants, so they stay reachable to the end.
build = Bench.time do
  OLD_STRINGS = Array.new(strings) { |i| "#{i}:" + TEXT.byteslice(0, 100 + rng.rand(501)) }
  OLD_TABLE = {}
  entries.times do |i|
    OLD_TABLE[i] = if i.odd?
                     [i, "entry #{i}", i * 3]
                   else
                     { id: i, name: "entry #{i}", seen: 0 }
                   end
  end
end

batch_times = Array.new(batches)
sink = nil
seconds = Bench.time do
  batches.times do |b|
    t = Bench.now
    # 1000 allocations: 200 rounds of a String (a slice), an Array, a Hash, and an interpolated
    # String (2 objects: the Integer's to_s and the result).
    200.times do |k|
      s = TEXT.byteslice(k, 20 + (k & 31))
      a = [b, k, s]
      h = { batch: b, k: k, a: a }
      sink = "item #{k}"
      h[:s] = sink
    end
    # A few old-to-young writes: a young object into a small old container of the table.
    writes_per_batch.times do |w|
      entry = OLD_TABLE[rng.rand(entries)]
      if entry.is_a?(Array)
        entry[2] = [b, w]
      else
        entry[:seen] = "seen in batch #{b}"
      end
    end
    batch_times[b] = Bench.now - t
  end
end

raise "old-heap-young-garbage: table lost entries" unless OLD_TABLE.size == entries
raise "old-heap-young-garbage: strings lost" unless OLD_STRINGS.size == strings && OLD_STRINGS.all? { |s| s.bytesize >= 100 }

sorted = batch_times.sort
p99 = sorted[[(0.99 * sorted.size).ceil - 1, 0].max]
puts format("  (%d old strings, %d-entry table, built in %.2f s; %d batches of 1000 allocations, %d writes each)",
            strings, entries, build, batches, writes_per_batch)
Bench.figure("worst batch", sorted.last * 1000.0, "ms", better: :lower)
Bench.figure("p99 batch", p99 * 1000.0, "ms", better: :lower)
Bench.figure("young-garbage loop", seconds, "s", better: :lower)
