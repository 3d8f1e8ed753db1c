# Which requests of the rails workload are the slowest, and whether a collection ran in them:
# serves the workload's warm-up and its 4000 timed requests (bench/workloads/rails.rb's mix) and
# prints the longest ones with the GC work inside each (collections started, GC.stat(:time)
# gained: a lazy-sweep or incremental-marking step shows as time without a collection). Used to
# read the benchmark's "latency max": whether the GC or the request itself sets it.
# Usage: RUBY_GC_LIBRARY=mosaic ruby bench/longest_requests.rb [N]   (N longest, default 12)
require_relative "lib/bench_support"
Bench.use_gems("railties", "actionpack", "actionview", "activerecord", "sqlite3")
require_relative "workloads/rails_app/bench_app"

shown = (ARGV[0] || 12).to_i
300.times { |i| RailsBench.expect(i, RailsBench.request(i)) }
requests = 4000.times.map do |i|
  count, gc_ms = GC.count, GC.stat(:time)
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  res = RailsBench.request(i)
  ms = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t) * 1000
  RailsBench.expect(i, res)
  [ms, i, GC.count - count, GC.stat(:time) - gc_ms]
end
puts "GC #{GC.config[:implementation]}: the #{shown} longest of #{requests.size} requests"
requests.max_by(shown, &:first).each do |ms, i, collections, gc_ms|
  printf("%7.2f ms  request %4d  collections started %d  GC time %d ms\n", ms, i, collections, gc_ms)
end
