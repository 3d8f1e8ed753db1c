# Workload "prefork": a preforking Rails server (like Puma's cluster mode or Unicorn), where
# copy-on-write sharing decides how many workers fit in a machine's memory. The parent boots the rails
# workload's app once (bench/workloads/rails_app/bench_app.rb: eager loading, database seeded),
# closes its database connections, runs Process.warmup (Ruby's "get the heap ready to be forked":
# a full GC that compacts and promotes every survivor) and forks 4 workers. Each worker serves the
# rails workload's request mix in-process (Rack::MockRequest) with its own GCs: 300 warm-up
# requests, then 2000 timed ones (quick: 100 and 400), writing comments to the shared sqlite3
# file (WAL; a worker waits up to 10 s for another's write lock).
#
# Measurement: when every worker has served its requests, the parent tells them all to read their
# own /proc/self/smaps_rollup (so that all are idle and alive while any of them measures); they send
# Private_Clean + Private_Dirty (the memory only that worker maps: what its requests and its GCs
# un-shared or allocated), Pss and Rss through a pipe and wait; the parent then reads its own
# Pss, releases them, and they leave with exit! (no at_exit hooks). Figures, kB: the median and max
# over workers of their private memory, the total Pss of parent + workers (the whole family's
# memory, shared pages divided among their sharers), the parent's Pss and the median worker's Pss
# (all lower is better); and requests/s of one worker, median over workers (higher is better; the
# 4 workers share this machine's cores, so this is not the single-process rate of "rails").
#
# Usage: ruby bench/workloads/prefork.rb [--quick] [--no-warmup] [--workers N] [--breakdown]
#   --no-warmup   fork without Process.warmup (for comparison; bench/run.rb always warms up)
#   --workers N   number of workers (default 4)
#   --breakdown   each worker also prints where its private memory is, by kind of mapping
#                 (/proc/self/smaps): glibc's brk heap ([heap]: small malloc chunks), anonymous
#                 mappings of at least 4 MiB (Mosaic's arenas, glibc's thread arenas) and smaller
#                 ones (the default GC's 64 KiB pages, which posix_memalign maps one by one; large
#                 malloc chunks; stacks), and files (code, data of shared libraries)
require_relative "../lib/bench_support"

Bench.skip("no /proc/self/smaps_rollup on this system") unless File.readable?("/proc/self/smaps_rollup")
Bench.skip("fork is not available") unless Process.respond_to?(:fork)
Bench.skip("Process.warmup is not available (Ruby < 3.3)") unless Process.respond_to?(:warmup)
Bench.use_gems("railties", "actionpack", "actionview", "activerecord", "sqlite3")

WORKERS = (ARGV[ARGV.index("--workers") + 1] if ARGV.include?("--workers")).then { |n| n ? Integer(n) : 4 }
WARMUP = !ARGV.include?("--no-warmup")
BREAKDOWN = ARGV.include?("--breakdown")
WARMUP_REQUESTS = Bench.size(300, 100)
REQUESTS = Bench.size(2000, 400)

module RailsBench
  SQLITE_TIMEOUT_MS = 10_000 # the workers write to one database file
end
require_relative "rails_app/bench_app"

# Private (Private_Clean + Private_Dirty), Pss and Rss of this process, kB.
def rollup
  text = File.read("/proc/self/smaps_rollup")
  kb = ->(field) { text[/^#{field}:\s+(\d+) kB/, 1].to_i }
  { private: kb.("Private_Clean") + kb.("Private_Dirty"), pss: kb.("Pss"), rss: kb.("Rss") }
end

# --breakdown: Private_Clean + Private_Dirty of this process by kind of mapping, kB.
def private_by_mapping
  kb = Hash.new(0)
  kind = nil
  File.foreach("/proc/self/smaps") do |line|
    if (m = line.match(/\A(\h+)-(\h+) \S+ \S+ \S+ \S+\s*(.*)$/))
      size = m[2].to_i(16) - m[1].to_i(16)
      kind = if m[3].empty? then size >= 4 << 20 ? "anon>=4M" : "anon<4M"
             elsif m[3].start_with?("[") then m[3]
             else "files"
             end
    elsif (m = line.match(/\APrivate_(?:Clean|Dirty):\s+(\d+) kB/))
      kb[kind] += m[1].to_i
    end
  end
  kb.select { |_, v| v.positive? }.sort_by { |_, v| -v }.map { |k, v| "#{k} #{v}" }.join(", ")
end

# A worker: serves its requests, reports its rate, then measures when told to and waits for the
# parent to have measured itself. Speaks one line at a time through `up`, listens on `down`.
def worker(index, up, down)
  gcs = GC.count
  stat_at_fork = GC.stat
  first = index * (WARMUP_REQUESTS + REQUESTS) # each worker its own stretch of the (cyclic) mix
  WARMUP_REQUESTS.times { |k| RailsBench.expect(first + k, RailsBench.request(first + k)) }
  first += WARMUP_REQUESTS
  seconds = Bench.time { REQUESTS.times { |k| RailsBench.expect(first + k, RailsBench.request(first + k)) } }
  up.puts "ready #{REQUESTS / seconds} #{GC.count - gcs}"
  raise "worker #{index}: no measure order" unless down.gets == "measure\n"
  m = rollup
  if BREAKDOWN
    keys = %i[minor_gc_count major_gc_count mosaic_malloc_trim_count].select { |k| stat_at_fork.key?(k) }
    gcs_here = keys.map { |k| "#{k} #{GC.stat(k) - stat_at_fork[k]}" }.join(", ")
    puts "prefork: worker #{index} private kB by mapping: #{private_by_mapping}; in this worker: #{gcs_here}"
  end
  $stdout.flush
  up.puts "#{m[:private]} #{m[:pss]} #{m[:rss]}"
  down.gets # the parent has measured itself (a line, or EOF if it went away)
  exit!(0)
rescue Exception => e # whatever it is, a worker must never go on to run the parent's code
  warn "prefork: worker #{index} failed: #{e.class}: #{e.message}\n#{e.backtrace&.first(8)&.join("\n")}"
  exit!(1)
end

# Like a preforking server before it forks: no database connection is inherited.
ActiveRecord::Base.connection_handler.clear_all_connections!
Process.warmup if WARMUP

Worker = Struct.new(:pid, :up, :down)
workers = []
begin
  WORKERS.times do |index|
    up_r, up_w = IO.pipe
    down_r, down_w = IO.pipe
    pid = fork do
      # only this worker's own ends stay open: no worker holds another's pipes
      [up_r, down_w, *workers.flat_map { |w| [w.up, w.down] }].each(&:close)
      worker(index, up_w, down_r)
    end
    up_w.close
    down_r.close
    workers << Worker.new(pid, up_r, down_w)
  end

  read_line = lambda do |w, what|
    line = w.up.gets or raise "prefork: worker #{w.pid} died before sending its #{what}"
    line.split
  end
  ready = workers.map { |w| read_line.(w, "rate") }
  raise "prefork: unexpected worker message #{ready.inspect}" unless ready.all? { |r| r.first == "ready" }
  workers.each { |w| w.down.puts "measure" }
  measured = workers.map { |w| read_line.(w, "memory figures").map { |v| Integer(v) } }
  parent = rollup # while every worker is alive and idle
  workers.each { |w| w.down.puts "exit" }
ensure
  if $! # a failure above: leave no worker behind
    workers.each do |w|
      Process.kill(:KILL, w.pid)
    rescue Errno::ESRCH
      nil
    end
  end
  workers.each do |w|
    w.down.close unless w.down.closed?
    w.up.close unless w.up.closed?
  end
  statuses = workers.map { |w| Process.wait2(w.pid).last }
end
failed = statuses.reject(&:success?)
raise "prefork: #{failed.size} worker(s) failed: #{failed.map(&:inspect).join(", ")}" unless failed.empty?

median = ->(v) { s = v.sort; s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2.0 }
privates = measured.map { |m| m[0] }
rates = ready.map { |r| Float(r[1]) }
puts "prefork: #{WORKERS} workers, #{WARMUP ? "Process.warmup" : "no warmup"} before fork; per worker " \
     "private kB #{privates.join(" ")}, Pss kB #{measured.map { |m| m[1] }.join(" ")}, " \
     "req/s #{rates.map { |r| r.round(1) }.join(" ")}, GCs #{ready.map { |r| r[2] }.join(" ")}; parent Pss #{parent[:pss]} kB"
Bench.figure("worker private median", median.(privates).round, "kB", better: :lower)
Bench.figure("worker private max", privates.max, "kB", better: :lower)
Bench.figure("total Pss parent+workers", parent[:pss] + measured.sum { |m| m[1] }, "kB", better: :lower)
Bench.figure("parent Pss", parent[:pss], "kB", better: :lower)
Bench.figure("worker Pss median", median.(measured.map { |m| m[1] }).round, "kB", better: :lower)
Bench.figure("requests/s per worker", median.(rates), "req/s")
