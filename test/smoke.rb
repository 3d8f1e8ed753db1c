# A smoke test that needs nothing but Ruby: no test framework, no gems, no source tree. It runs
# on whatever collector RUBY_GC_LIBRARY names and raises on the first wrong answer, so it checks
# an installed library where CRuby's test runner is not at hand (scripts/prefix-gate.sh; a user
# can run it too: RUBY_GC_LIBRARY=mosaic ruby test/smoke.rb). Each check is something the
# collector can get wrong: data lost or moved without its references, an id that changes, a
# weak reference that survives its object or loses a live one, a finalizer never run, a forked
# child whose collections break, threads allocating at once.
def check(what)
  raise "smoke: #{what}" unless yield
end

checks = 0
count = ->(what, &blk) { check(what, &blk); checks += 1 }

# Data of every size class survives minor, major and compacting collections.
data = Array.new(20_000) { |i| [i, "s#{i}" * (i % 9), { k: i, l: [i] * (i % 5) }, i.to_f / 3] }
ids = data.first(1_000).map(&:object_id)
40.times { |r| Array.new(20_000) { |i| "garbage #{r} #{i}" } }
GC.start(full_mark: false)
GC.start
GC.compact
check_data = lambda do
  data.each_with_index.all? do |(i, s, h, f), j|
    i == j && s == "s#{j}" * (j % 9) && h[:k] == j && h[:l] == [j] * (j % 5) && f == j.to_f / 3
  end
end
count.("data intact after minor, major and compacting GCs", &check_data)
count.("object ids unchanged by compaction") { data.first(1_000).map(&:object_id) == ids }
count.("ObjectSpace._id2ref finds a live object") { ObjectSpace._id2ref(ids[7]).equal?(data[7]) } if ObjectSpace.respond_to?(:_id2ref)

# Weak references: a live key keeps its entry, dead ones go.
wm = ObjectSpace::WeakMap.new
live = Array.new(100) { |i| "live #{i}" }
live.each_with_index { |k, i| wm[k] = i }
200.times { |i| wm["dead #{i}"] = i }
4.times { GC.start }
count.("WeakMap keeps its live keys") { live.each_with_index.all? { |k, i| wm[k] == i } }
count.("WeakMap drops its dead keys") { wm.size < 300 }

# A finalizer runs once its object is gone (here at the latest at exit, checked by the child).
r, w = IO.pipe
pid = fork do
  r.close
  obj = Object.new
  ObjectSpace.define_finalizer(obj, proc { w.write("finalized") })
  obj = nil
  # The forked child collects on the parent's heap: its data stays intact.
  10.times { Array.new(10_000) { |i| "child #{i}" } }
  GC.start
  GC.compact
  exit!(1) unless check_data.call
  exit 0
end
w.close
_, status = Process.wait2(pid)
count.("a forked child collects and compacts, data intact, exit 0") { status.success? }
count.("a finalizer ran in the child") { r.read == "finalized" }

# Threads allocating at once.
threads = Array.new(4) do |t|
  Thread.new { Array.new(50) { |n| Array.new(2_000) { |i| "t#{t} #{n} #{i}" }.last }.last }
end
count.("threads allocating at once get their own results") { threads.map(&:value) == Array.new(4) { |t| "t#{t} 49 1999" } }

# The statistics callers read under the default GC's names.
stat = GC.stat
count.("GC.stat has the default GC's keys") do
  %i[count time minor_gc_count major_gc_count heap_live_slots total_allocated_objects total_freed_objects
     malloc_increase_bytes oldmalloc_increase_bytes].all? { |k| stat[k].is_a?(Integer) }
end
count.("GC.count counts the collections asked for") { stat[:count] >= 7 && stat[:major_gc_count] >= 6 }
count.("GC.stat_heap lists the size classes") { GC.stat_heap.size == GC::INTERNAL_CONSTANTS[:HEAP_COUNT] }
count.("GC.latest_gc_info names its reason") { GC.latest_gc_info.key?(:major_by) }
count.("ObjectSpace.count_objects counts the live Strings") { ObjectSpace.count_objects[:T_STRING] >= 20_000 }

GC.verify_internal_consistency
count.("data intact at the end", &check_data)
puts "#{checks} checks passed on #{GC.config[:implementation]} (#{GC.count} GCs)"
