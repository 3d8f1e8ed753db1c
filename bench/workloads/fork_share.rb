# Workload "fork-share": how much of a large heap stays shared (copy-on-write) after fork.
# The parent builds a large heap (500k strings in an array and a 100k-entry hash; --quick: 100k
# and 20k), runs GC, and forks; the child runs a full GC.start and then reads its own
# Private_Dirty from /proc/self/smaps_rollup: the memory the child's GC had to copy (lower is
# better). The child reports through a pipe and leaves with exit! (no at_exit hooks).
# --warmup (benchmark "fork-share-warmup"): the parent also runs Process.warmup after its GCs, just
# before fork, as a preforking server may (a full GC that compacts the heap and promotes every
# survivor); the figures keep their names and meaning, so the two benchmarks compare directly.
# Usage: ruby bench/workloads/fork_share.rb [--quick] [--warmup]
require_relative "../lib/bench_support"

WARMUP = ARGV.include?("--warmup")

Bench.skip("no /proc/self/smaps_rollup on this system") unless File.readable?("/proc/self/smaps_rollup")
Bench.skip("fork is not available") unless Process.respond_to?(:fork)
Bench.skip("Process.warmup is not available (Ruby < 3.3)") if WARMUP && !Process.respond_to?(:warmup)

def rollup_kb(field) = File.read("/proc/self/smaps_rollup")[/^#{field}:\s+(\d+) kB/, 1].to_i

strings = Bench.size(500_000, 100_000)
entries = Bench.size(100_000, 20_000)
array = Array.new(strings) { |i| "string number #{i} of the shared heap" }
hash = {}
entries.times { |i| hash["key-#{i}"] = [i, "value #{i}"] }
3.times { GC.start }
Process.warmup if WARMUP

reader, writer = IO.pipe
pid = fork do
  reader.close
  before = rollup_kb("Private_Dirty")
  GC.start(full_mark: true, immediate_sweep: true)
  after = rollup_kb("Private_Dirty")
  writer.write("#{before} #{after} #{rollup_kb("Pss")} #{rollup_kb("Rss")}")
  writer.close
  exit!(0)
end
writer.close
report = reader.read
_, status = Process.wait2(pid)
raise "fork-share: child failed (#{status.inspect})" unless status.success? && !report.empty?
before, after, pss, rss = report.split.map(&:to_i)
raise "fork-share: heap lost" unless array.size == strings && hash.size == entries

Bench.figure("child Private_Dirty after GC", after, "kB", better: :lower)
Bench.figure("child Private_Dirty before GC", before, "kB", better: :lower)
Bench.figure("child Pss after GC", pss, "kB", better: :lower)
Bench.figure("child Rss after GC", rss, "kB", better: :lower)
