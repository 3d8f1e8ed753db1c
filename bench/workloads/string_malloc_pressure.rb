# Workload "string-malloc-pressure": strings whose bytes live in malloc, not in the GC's slots,
# in rounds. Each string is a buffer of 1-8 KB capacity (far above what a slot holds, so its bytes
# are one malloc'd block), created with String.new(capacity:) as output and read buffers are, and
# filled with half to all of its capacity. Three in four are dropped at once; one in four goes
# into the round's list, which the program holds until the next round ends, so kept strings
# survive many collections and then die together. A long-lived table of 100k small records
# (quick: 20k) gives every full mark some work. 30 rounds of 25k strings (quick: 8 x 10k): about
# 3.2 GiB of malloc'd capacity in all (quick 0.34 GiB), about 27 MiB of it kept per round (quick
# 11 MiB).
# The slots hold little next to the malloc traffic, and every collection during a round finds the
# latest rounds' strings alive: a collector that collects whenever malloc grows keeps the process
# small and spends its time marking and sweeping; one that lets old malloc pile up between its
# major GCs is faster and larger (the shape of ruby-bench's string_malloc_pressure, where Mosaic
# took 2.84x the default GC's time at 0.21x its peak RSS). Reports the seconds of the rounds.
# Usage: ruby bench/workloads/string_malloc_pressure.rb [--quick]
require_relative "../lib/bench_support"

rounds = Bench.size(30, 8)
per_round = Bench.size(25_000, 10_000)
records = Bench.size(100_000, 20_000)
rng = Random.new(20_240_611)

# 16 frozen 8 KB texts to fill the buffers from.
TEXTS = Array.new(16) { |i| ((("a".ord + i).chr * 63) + "\n").*(128).freeze }.freeze
# Long-lived records: a constant, so they stay reachable to the end.
RECORDS = Array.new(records) { |i| [i, "record-#{i}", { id: i, ok: i.odd? }] }.freeze

capacity = 0
kept_total = 0
last_round = nil
objects_before = GC.stat(:total_allocated_objects)
seconds = Bench.time do
  rounds.times do |round|
    kept = []
    per_round.times do |i|
      cap = 1024 + rng.rand(7169) # 1-8 KB
      s = String.new(capacity: cap)
      s << TEXTS[(i + round) & 15].byteslice(0, cap / 2 + rng.rand(cap / 2 + 1))
      capacity += cap
      kept << s if (i & 3).zero?
    end
    kept_total += kept.size
    last_round = kept # held until the next round ends
  end
end

raise "string-malloc-pressure: round list lost entries" unless last_round.size == (per_round + 3) / 4
raise "string-malloc-pressure: bad buffer" unless last_round.all? { |s| s.bytesize >= 512 && s.bytesize <= 8192 }
raise "string-malloc-pressure: records lost" unless RECORDS.size == records && RECORDS.last[2][:id] == records - 1

objects = GC.stat(:total_allocated_objects) - objects_before
puts format("  (%d strings in %d rounds: %.0f MB of malloc'd capacity, %d objects; %d kept in round lists)",
            rounds * per_round, rounds, capacity / 1048576.0, objects, kept_total)
Bench.figure("string-malloc-pressure", seconds, "s", better: :lower)
