# bench/compact_burst.rb: issue 9's compaction target, measured: GC.compact on a heap fragmented
# by a burst. Allocates 1M mixed objects (strings, 2-element arrays, objects with one ivar,
# one-entry hashes), drops 90% of them at random (fixed seed), runs GC.start, then times one
# GC.compact and prints heap_eden_pages and VmRSS before and after. Run it under each GC:
#   RUBY_GC_LIBRARY=default ruby bench/compact_burst.rb; RUBY_GC_LIBRARY=mosaic ruby bench/compact_burst.rb
srand(42)
objs = Array.new(1_000_000) do |i|
  case i % 4
  when 0 then "str#{i}"
  when 1 then [i, i + 1]
  when 2 then Object.new.tap { |o| o.instance_variable_set(:@a, i) }
  else { i => i }
  end
end
objs.each_index { |i| objs[i] = nil if rand < 0.9 }
GC.start
before = GC.stat(:heap_eden_pages)
rss0 = File.read("/proc/self/status")[/VmRSS:\s+(\d+)/, 1].to_i
t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
GC.compact
dt = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
after = GC.stat(:heap_eden_pages)
rss1 = File.read("/proc/self/status")[/VmRSS:\s+(\d+)/, 1].to_i
live = objs.compact.size
printf("%s pages %d -> %d (%d freed), compact %.1f ms, RSS %d -> %d MB, kept %d\n", GC.config[:implementation], before, after, before - after, dt * 1000, rss0 / 1024, rss1 / 1024, live)
