# What one call of GC.stat and GC.stat_heap costs, by form: nanoseconds per call, the median of
# five batches of 1M calls (100k for the Hash) less an empty loop's. Not a benchmark of the suite:
# a measurement for changes to stats.c (docs/DESIGN.md, "Code size"). Tools call these
# per request or per event (Rails' instrumentation reads GC.stat(:total_allocated_objects) at the
# start and end of every event).
# Usage: RUBY_GC_LIBRARY=mosaic ruby bench/stat_calls.rb
def batch(n) = (t = Process.clock_gettime(Process::CLOCK_MONOTONIC); yield; (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t) / n * 1e9)
def med(n, &b) = Array.new(5) { batch(n, &b) }.sort[2]
n = 1_000_000
empty = med(n) { n.times {} }
h = {}
r = {
  "stat(:total_allocated_objects)" => med(n) { n.times { GC.stat(:total_allocated_objects) } } - empty,
  "stat(:time)" => med(n) { n.times { GC.stat(:time) } } - empty,
  "stat(:major_gc_count)" => med(n) { n.times { GC.stat(:major_gc_count) } } - empty,
  "stat(hash)" => med(n / 10) { (n / 10).times { GC.stat(h) } } - empty,
  "stat_heap(0, :total_allocated_objects)" => med(n) { n.times { GC.stat_heap(0, :total_allocated_objects) } } - empty,
}
puts "#{GC.config[:implementation]}: " + r.map { |k, v| "#{k} #{v.round} ns" }.join(", ")
