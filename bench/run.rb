#!/usr/bin/env ruby
# bench/run.rb: the one command of Mosaic's benchmark suite (`make bench BENCH_ARGS="..."`).
# It owns the list of benchmarks and the whole measuring loop: for every benchmark it runs the
# workload script (bench/workloads/*.rb) under each GC library of the same Ruby binary, interleaved
# (default, mosaic, default, mosaic, ...), N times; takes wall and CPU time of each child process
# (bench/lib/measure.rb: CPU is user + system of all its threads and of the children it waited
# for) and the child's own peak RSS, GC count and GC time (bench/lib/probe.rb) and figures (i/s,
# latency...); pairs run j of each configuration with run j of the baseline and tells, per ratio,
# whether the difference is real or within noise (bench/lib/noise.rb); then prints a Markdown
# table, writes JSON + Markdown under bench/results/ (not tracked by git) and draws the ratio
# chart (bench/lib/chart.rb: SVG, and PNG with rsvg-convert). It runs with
# any Ruby >= 3.0; the measured Ruby is found with scripts/toolchain.sh paths. A failing run is
# reported with its stderr tail, never dropped.
# A configuration is a GC library, optionally with "+jemalloc": the same GC with Debian's
# libjemalloc.so.2 preloaded (LD_PRELOAD), as Rails' production Dockerfile does, and optionally
# with environment variables after a colon ("mosaic:MOSAIC_INCREMENTAL=0", "mosaic:A=1:B=2"). Each
# configuration is its own column; the first is the baseline of every ratio.
# --ballast 0,6,12,... runs each benchmark once per ballast: that many MiB of small Strings kept
# alive from before the workload starts (bench/lib/probe.rb). It shifts where the collections fall
# in a program's phases; a program that builds and drops its data in rounds has a peak RSS that
# depends on where its major GCs fall (DESIGN.md, "Judging a pacing change"), so a change
# to pacing is judged over several ballasts: the report's "Across ballasts" section gives each
# ratio's geometric mean over them.
#
# Usage: bench/run.rb [--suite default|ruby-bench] [--quick] [--reps N] [--only a,b] [--gcs default,mosaic,default+jemalloc,...]
#                     [--jemalloc] [--ballast MIB,...] [--list] [--setup]
#        bench/run.rb --chart bench/results/FILE.json   (redraw a chart)
#        bench/summary.rb FILE.json [--chart OUT.svg]   (the summary table of docs/PERFORMANCE.md)
require "json"
require "optparse"
require "rbconfig"
require "tmpdir"
require "fileutils"
require "time"
require_relative "lib/chart"
require_relative "lib/noise"
require_relative "lib/measure"

BENCH_DIR = __dir__
ROOT = File.expand_path("..", BENCH_DIR)
WORKLOADS = File.join(BENCH_DIR, "workloads")
SKIP_STATUS = 77 # a workload's "cannot run here" (see lib/bench_support.rb)

# The benchmarks, in run order. Every field but name/script is optional:
#   args       extra arguments, always passed; --quick is added in quick mode
#   timing     false: wall time and peak RSS are not the point (figures only; left out of the chart)
#   reps       fixed repetition count (deterministic figures need one run)
#   full_only  "why": left out in --quick mode unless named with --only
#   (ballast_mb and base_name are set by --ballast, not in this list)
Benchmark = Struct.new(:name, :script, :args, :about, :timing, :reps, :full_only, :ballast_mb, :base_name,
                       keyword_init: true) do
  def timing? = timing != false
end

BENCHMARKS = [
  Benchmark.new(name: "rdoc", script: "rdoc.rb", about: "RDoc (ri) over Ruby 3.4.5's sources (quick: a subset)"),
  Benchmark.new(name: "rdoc-subset", script: "rdoc.rb", args: ["--quick"],
                about: "RDoc over a fixed subset of the sources", full_only: "same as rdoc in --quick mode"),
  Benchmark.new(name: "strings", script: "strings.rb", about: "VWA microbenchmarks on 71-byte strings (i/s)"),
  Benchmark.new(name: "arrays", script: "arrays.rb", about: "Array.new(n) 10M times for n = 0..16 (quick: 1M)"),
  Benchmark.new(name: "array-new", script: "array_new.rb",
                about: "Array.new(n) 10M times for n = 0..10, total s (quick: 1M; issue 37's transient-heap bench)"),
  Benchmark.new(name: "objects", script: "objects.rb", about: "0x400000.times { Object.new } (quick: 0x100000)"),
  Benchmark.new(name: "objects-cachegrind", script: "objects_cachegrind.rb", timing: false, reps: 1,
                about: "D1/LL cache misses of the objects loop under cachegrind (deterministic, one run)"),
  Benchmark.new(name: "binary-trees", script: "binary_trees.rb", about: "binary trees, depth 18 (quick: 14)"),
  Benchmark.new(name: "gcbench", script: "gcbench.rb", about: "Ellis-Kovac-Boehm GCBench"),
  Benchmark.new(name: "hash-heavy", script: "hash_heavy.rb", about: "hash-heavy program"),
  Benchmark.new(name: "redblack", script: "redblack.rb", about: "red-black tree inserts and lookups"),
  Benchmark.new(name: "ring", script: "ring.rb", about: "ring of objects, old-to-young stores"),
  Benchmark.new(name: "longlived", script: "longlived.rb",
                about: "~1M-node long-lived tree + steady young garbage, 1% stored into the tree"),
  Benchmark.new(name: "string-malloc-pressure", script: "string_malloc_pressure.rb",
                about: "1-8 KB malloc'd strings in rounds, 1 in 4 kept until the next round ends (s)"),
  Benchmark.new(name: "small-heap-malloc", script: "small_heap_malloc.rb",
                about: "4-64 KB malloc'd strings through a heap too small for the background sweeper (s)"),
  Benchmark.new(name: "splay", script: "splay.rb",
                about: "Octane-style splay tree, 20k nodes with payloads replaced (s, batch max/p99 ms)"),
  Benchmark.new(name: "longlived-tree-churn", script: "longlived_tree_churn.rb",
                about: "booted-app tree of hashes/arrays/strings + request-like young garbage (s)"),
  Benchmark.new(name: "old-heap-young-garbage", script: "old_heap_young_garbage.rb",
                about: "~70 MiB old heap + batches of 1000 young allocations: worst/p99 batch (ms)"),
  Benchmark.new(name: "mark-shuffled", script: "mark_shuffled.rb",
                about: "10 full GCs over 1.2M objects shuffled in memory (marking speed; s)"),
  Benchmark.new(name: "liquid", script: "liquid.rb", about: "Liquid templates: parse and render (templates/s)"),
  Benchmark.new(name: "rails", script: "rails.rb", about: "Rails app on sqlite3, in-process requests (req/s, latency)"),
  Benchmark.new(name: "fork-share", script: "fork_share.rb",
                about: "child's Private_Dirty after fork + full GC (copy-on-write sharing)"),
  Benchmark.new(name: "fork-share-warmup", script: "fork_share.rb", args: ["--warmup"],
                about: "fork-share with Process.warmup in the parent before fork"),
  Benchmark.new(name: "prefork", script: "prefork.rb",
                about: "Rails app booted, Process.warmup, 4 forked workers serving requests (private kB, total PSS)"),
  Benchmark.new(name: "puma-cluster", script: "puma_cluster.rb",
                about: "Puma cluster (2 workers, preload, Process.warmup) serving the Rails app over loopback " \
                       "(req/s, latency, worker PSS/Private_Dirty)"),
  Benchmark.new(name: "sidekiq-jobs", script: "sidekiq_jobs.rb",
                about: "Sidekiq (5 threads) on a private redis-server: 20000 jobs (JSON, sort, format, SHA-256), " \
                       "every result checked (jobs/s, latency, Sidekiq's peak RSS and GCs)"),
  Benchmark.new(name: "compact-burst", script: "compact_burst.rb",
                about: "GC.compact on a heap fragmented by a burst (1M mixed objects, 90% dropped; pages freed, ms)"),
  Benchmark.new(name: "bulk-writes-marking", script: "bulk_writes_marking.rb",
                about: "bulk writes (Array#[]=, #concat) while a major marks in steps: RSS growth (kB), next GC (ms)"),
  Benchmark.new(name: "malloc-fragmented", script: "malloc_fragmented.rb",
                about: "GC.start and GC.stat with 100k free chunks in glibc's bins (us)"),
  Benchmark.new(name: "pauses-rdoc", script: "rdoc.rb", args: ["--quick", "--pauses"], timing: false,
                about: "GC pause distribution (GC::Profiler) during RDoc over the subset"),
  Benchmark.new(name: "pauses-rails", script: "rails.rb", args: ["--pauses"], timing: false,
                about: "GC pause distribution (GC::Profiler) during the Rails requests"),
].freeze

# --suite ruby-bench: programs of ruby/ruby-bench (https://github.com/ruby/ruby-bench), each run by
# bench/workloads/ruby_bench.rb with ruby-bench's own harness for a fixed number of iterations,
# under its own Gemfile. bench/ruby-bench/setup.sh prepares the checkout and the gems (the same list).
RUBY_BENCH_PROGRAMS = {
  "railsbench" => "Rails 8 app on sqlite3: 2000 in-process requests per iteration (posts index, show, JSON)",
  "erubi-rails" => "Rails view rendering: a Discourse topic page (erubi), 10000 renders per iteration",
  "liquid-render" => "Liquid 5.4 theme render (liquid's performance/ theme runner), 20 renders per iteration",
  "hexapdf" => "HexaPDF 0.16: paginate The Odyssey into a PDF at a 50-pt line width",
  "optcarrot" => "NES emulator: 200 frames of Lan Master per iteration (headless)",
  "splay" => "Octane-style splay tree: 8000 nodes with payload trees, 50 x 80 modifications per iteration",
  "string_malloc_pressure" => "100k String.new(capacity: 64 KiB) per iteration, kept until it ends (malloc-driven GC pacing)",
  "sequel" => "Sequel ORM on in-memory sqlite: 10000 rows, 1000 model lookups + strings per iteration",
  "binarytrees" => "Computer Language Benchmarks Game binary-trees, depth 4..14",
  "fluentd" => "fluentd's LTSV parser plugin over 250k log lines per iteration",
}.freeze
RUBY_BENCH_BENCHMARKS = RUBY_BENCH_PROGRAMS.map do |name, about|
  Benchmark.new(name: name, script: "ruby_bench.rb", args: [name], about: "ruby-bench: #{about}")
end.freeze
SUITES = { "default" => BENCHMARKS, "ruby-bench" => RUBY_BENCH_BENCHMARKS }.freeze

# A configuration: GC library name, and the allocator the process must run with.
Config = Struct.new(:name, :gc, :allocator, :env, keyword_init: true)
ALLOCATOR_SUFFIXES = { "jemalloc" => "jemalloc" }.freeze # spec suffix => allocator the probe must see

def parse_config(spec)
  lib, *assigns = spec.split(":")
  env = assigns.to_h do |a|
    name, value = a.split("=", 2)
    unless value && name.match?(/\A[A-Z_][A-Z0-9_]*\z/)
      raise OptionParser::InvalidArgument, "--gcs: #{a.inspect} in #{spec.inspect} is not NAME=value"
    end
    [name, value]
  end
  gc, suffix = lib.split("+", 2)
  raise OptionParser::InvalidArgument, "--gcs: empty GC name in #{spec.inspect}" if gc.to_s.empty?
  if suffix && !ALLOCATOR_SUFFIXES.key?(suffix)
    raise OptionParser::InvalidArgument, "--gcs: unknown allocator in #{spec.inspect} (known: +#{ALLOCATOR_SUFFIXES.keys.join(", +")})"
  end
  Config.new(name: spec, gc: gc, allocator: suffix ? ALLOCATOR_SUFFIXES[suffix] : "glibc", env: env)
end

# Debian's libjemalloc2 (bench/setup.sh installs it): the file dpkg lists, else its usual place.
def find_jemalloc
  listed = IO.popen(%w[dpkg -L libjemalloc2], err: File::NULL, &:read).lines.map(&:strip) rescue []
  [*listed.select { |f| f.end_with?("/libjemalloc.so.2") }, "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"]
    .find { |f| File.file?(f) }
end

# ---------------------------------------------------------------------------------------------
# Options and toolchain

options = { suite: "default", list: false, reps: nil, quick: false, only: nil, gcs: %w[default mosaic], jemalloc: false, setup: false, timeout: nil,
            pauses: true, ballast: nil }
parser = OptionParser.new do |o|
  o.banner = "Usage: bench/run.rb [options]   (compare GC libraries of one Ruby, side by side)"
  o.on("--quick", "small inputs and 2 repetitions (about 5 minutes)") { options[:quick] = true }
  o.on("--reps N", Integer, "repetitions per GC (default 5, quick 2)") { |n| options[:reps] = n }
  o.on("--suite NAME", SUITES.keys, "which list of benchmarks: default (this project's workloads) or ruby-bench " \
                                    "(ruby/ruby-bench's programs; bench/ruby-bench/setup.sh first)") { |s| options[:suite] = s }
  o.on("--only LIST", Array, "run only these benchmarks of the suite (comma-separated; see --list)") { |l| options[:only] = l }
  o.on("--gcs LIST", Array, "configurations, baseline first: GC libraries, each optionally with +jemalloc " \
                            "(default: default,mosaic)") { |l| options[:gcs] = l }
  o.on("--jemalloc", "also run every plain GC of --gcs with +jemalloc (libjemalloc.so.2 preloaded)") do
    options[:jemalloc] = true
  end
  o.on("--ballast LIST", Array, "run each benchmark once per ballast (MiB of live Strings from the start; " \
                                "e.g. 0,6,12,24,48): phases shifted, geometric means reported") do |l|
    options[:ballast] = l.map { |v| Integer(v, 10) }
  end
  o.on("--timeout SECONDS", Integer, "per-run time limit (default 1200, quick 300)") { |t| options[:timeout] = t }
  o.on("--setup", "run bench/setup.sh first (gems, valgrind, rsvg-convert); with --suite ruby-bench, bench/ruby-bench/setup.sh") { options[:setup] = true }
  o.on("--no-pauses", "do not time GC pauses in every run (bench/lib/pauses.c; to measure its overhead)") do
    options[:pauses] = false
  end
  o.on("--chart FILE.json", "only redraw the chart (SVG; PNG with rsvg-convert) of a results file, beside it") { |f| options[:chart] = f }
  o.on("--list", "list the benchmarks of both suites and exit") { options[:list] = true }
end
begin
  parser.parse!(ARGV)
  raise OptionParser::InvalidArgument, ARGV.join(" ") unless ARGV.empty?
  raise OptionParser::InvalidArgument, "--reps must be >= 1" if options[:reps] && options[:reps] < 1
  raise OptionParser::InvalidArgument, "--gcs needs at least one library" if options[:gcs].empty?
  if options[:ballast] && (options[:ballast].empty? || options[:ballast].any? { |m| m.negative? || m > 4096 })
    raise OptionParser::InvalidArgument, "--ballast takes MiB values from 0 to 4096"
  end
rescue OptionParser::ParseError => e
  warn e.message, parser.help
  exit 2
end
if options[:list]
  width = SUITES.values.flatten.map { |b| b.name.size }.max
  SUITES.each_with_index do |(suite, list), i|
    puts if i.positive?
    puts suite == "default" ? "Suite default (bench/run.rb):" : "Suite #{suite} (bench/run.rb --suite #{suite}):"
    list.each { |b| puts format("  %-*s %s", width, b.name, b.about) }
  end
  exit
end
if (json_file = options[:chart])
  saved = JSON.parse(File.read(json_file))
  unless saved["results"].is_a?(Array) && saved["gcs"]
    warn "bench/run.rb: #{json_file} is not a results file of bench/run.rb"
    exit 2
  end
  files = Chart.draw(saved["results"], saved["gcs"], saved["baseline"], saved, json_file.sub(/\.json\z/, ""))
  puts files
  exit(files.empty? ? 1 : 0)
end

quick = options[:quick]
reps = options[:reps] || (quick ? 2 : 5)
timeout = options[:timeout] || (quick ? 300 : 1200)
gcs = options[:gcs].uniq
# (+jemalloc goes before a configuration's environment: "mosaic:A=1" -> "mosaic+jemalloc:A=1")
gcs += gcs.reject { |g| g.split(":").first.include?("+") }.map { |g| g.sub(/(:|\z)/, "+jemalloc\\1") } if options[:jemalloc]
gcs.uniq!
configs = begin
  gcs.to_h { |spec| [spec, parse_config(spec)] }
rescue OptionParser::ParseError => e
  warn e.message, parser.help
  exit 2
end
baseline = gcs.first
# Under jemalloc, the other GCs are also compared with the baseline GC under jemalloc
# (e.g. mosaic+jemalloc / default+jemalloc): that pair's baseline, and the configurations compared.
jemalloc_baseline = "#{configs[baseline].gc}+jemalloc"
jemalloc_baseline = nil unless configs[baseline].allocator == "glibc" && gcs.include?(jemalloc_baseline)
jemalloc_others = jemalloc_baseline ? gcs.select { |g| configs[g].allocator == "jemalloc" && g != jemalloc_baseline } : []

suite = SUITES.fetch(options[:suite])
selected = if options[:only]
  unknown = options[:only] - suite.map(&:name)
  abort "bench/run.rb: unknown benchmark(s) in suite #{options[:suite]}: #{unknown.join(", ")} (see --list)" unless unknown.empty?
  suite.select { |b| options[:only].include?(b.name) }
else
  suite.reject { |b| quick && b.full_only }
end

if options[:ballast]
  # One benchmark per ballast, each named with its ballast; the base name groups them.
  selected = selected.flat_map do |b|
    options[:ballast].uniq.map { |m| b.dup.tap { |v| v.name = "#{b.name}@#{m}M"; v.ballast_mb = m; v.base_name = b.name } }
  end
end

if options[:setup]
  setup = options[:suite] == "ruby-bench" ? "ruby-bench/setup.sh" : "setup.sh"
  system(File.join(BENCH_DIR, setup)) || warn("bench/run.rb: bench/#{setup} reported problems (see above)")
end

toolchain = IO.popen([File.join(ROOT, "scripts/toolchain.sh"), "paths"], &:read)
TOOL = toolchain.scan(/^(\w+)=(.*)$/).to_h
ruby = TOOL["MOSAIC_RUBY"]
unless ruby && File.executable?(ruby)
  abort "bench/run.rb: the Mosaic Ruby toolchain is not built (#{ruby.inspect}); run `make` first"
end

# The pause timer (bench/lib/pauses.c), built once per invocation with the measured Ruby (mkmf,
# under the default GC: the build is not what is measured) into a directory removed at exit.
# Every run loads it through the probe; a build failure is reported and the runs go on without
# pause figures.
def build_pauses_ext(ruby)
  dir = Dir.mktmpdir("mosaic-bench-pauses-")
  at_exit { FileUtils.rm_rf(dir) }
  FileUtils.cp(File.join(BENCH_DIR, "lib/pauses.c"), dir)
  env = { "RUBY_GC_LIBRARY" => "default", "RUBYOPT" => nil, "RUBYLIB" => nil, "LD_PRELOAD" => nil }
  log = IO.popen(env, [ruby, "-rmkmf", "-e", '$CFLAGS << " -O2"; create_makefile("mosaic_bench_pauses")'],
                 chdir: dir, err: %i[child out], &:read)
  log << IO.popen(env, ["make"], chdir: dir, err: %i[child out], &:read) if $?.success?
  so = File.join(dir, "mosaic_bench_pauses.so")
  return so if $?.success? && File.file?(so)
  warn "bench/run.rb: WARNING: building bench/lib/pauses.c failed; no pause figures:\n#{tail(log.to_s, 15)}"
  nil
end

# The environment of a configuration's processes: its GC library, and LD_PRELOAD of jemalloc or
# none at all (so that a plain configuration runs on glibc's malloc even if the caller preloads one).
JEMALLOC = configs.values.any? { |c| c.allocator == "jemalloc" } ? find_jemalloc : nil
if configs.values.any? { |c| c.allocator == "jemalloc" } && !JEMALLOC
  warn "bench/run.rb: WARNING: libjemalloc.so.2 not found (apt-get install libjemalloc2, or bench/setup.sh): " \
       "the +jemalloc runs will FAIL"
end

def config_env(cfg)
  { "RUBY_GC_LIBRARY" => cfg.gc, "LD_PRELOAD" => cfg.allocator == "jemalloc" ? JEMALLOC : nil }.merge(cfg.env || {})
end

def tail(text, lines = 25) = text.to_s.lines.last(lines).join

PAUSES_EXT = options[:pauses] ? build_pauses_ext(ruby) : nil

# Each GC library must load: `ruby -v` shows +GC[name]. A library that does not load is reported
# and its runs fail visibly (they are not silently dropped from the comparison). The allocator is
# checked in every run by the probe.
ruby_versions = configs.to_h do |spec, cfg|
  out = IO.popen(config_env(cfg), [ruby, "-v"], err: %i[child out], &:read).strip
  warn "bench/run.rb: WARNING: #{spec}: RUBY_GC_LIBRARY=#{cfg.gc} does not load: #{out}" unless out.include?("+GC[#{cfg.gc}]")
  [spec, out]
end

unless Dir.exist?(File.join(BENCH_DIR, ".gems")) ||
       (selected.map(&:script) & %w[liquid.rb rails.rb prefork.rb puma_cluster.rb sidekiq_jobs.rb]).empty?
  warn "bench/run.rb: bench/.gems is missing: the liquid, rails, prefork, puma-cluster and sidekiq-jobs benchmarks will skip. " \
       "Run bench/setup.sh (or bench/run.rb --setup) first."
end
if selected.any? { |b| b.script == "ruby_bench.rb" } && ENV["RUBY_BENCH_DIR"].to_s.empty? &&
   !Dir.exist?(File.join(BENCH_DIR, ".ruby-bench"))
  warn "bench/run.rb: bench/.ruby-bench is missing: the ruby-bench programs will skip. " \
       "Run bench/ruby-bench/setup.sh first (or set RUBY_BENCH_DIR)."
end

# ---------------------------------------------------------------------------------------------
# Running one measured child

# gc is the configuration (e.g. "mosaic+jemalloc"); allocator is the one the probe saw. The memory
# fields are the probe's figures at exit (see bench/lib/probe.rb); mallinfo2 is null off glibc.
# cpu_s is user + system CPU time of the child, all its threads, and every descendant it waited
# for (getrusage(RUSAGE_CHILDREN) around the wait), less the probe's own CPU time at exit;
# cpu_user_s and cpu_sys_s are its two parts (the probe's share not taken off), cpu_self_s the
# process's own CPU time (its threads, no children) when the probe started.
RunResult = Struct.new(:gc, :rep, :status, :exit_code, :signal, :wall_s, :cpu_s, :cpu_user_s, :cpu_sys_s,
                       :cpu_self_s, :probe_cpu_ms, :peak_rss_kb, :gc_count,
                       :gc_time_ms, :figures, :message, :stderr_tail, :allocator, :allocator_lib,
                       :rss_kb, :rss_anon_kb, :rss_file_kb, :mallinfo2, :heap_live_slots, :heap_free_slots,
                       :heap_allocated_pages, :mosaic_stats, :probe_ms, :probe_errors, :pauses, keyword_init: true) do
  def ok? = status == "ok"

  # glibc malloc at exit, bytes: in use (arena chunks in use + mmapped chunks), free inside the
  # arenas, mmapped chunks. nil when mallinfo2 was not taken (other allocator, older results).
  def libc_in_use = mallinfo2 && mallinfo2["uordblks"].to_i + mallinfo2["hblkhd"].to_i
  def libc_free = mallinfo2 && mallinfo2["fordblks"]
  def libc_mmapped = mallinfo2 && mallinfo2["hblkhd"]

  # GC CPU time, ms: the larger of the pause timer's (the thread that stays in the GC) and the
  # GC's own report when it has one (Mosaic's :mosaic_gc_cpu_time, which adds its worker threads).
  def gc_cpu_ms = [pauses && pauses["gc_cpu_ms"], mosaic_stats && mosaic_stats["mosaic_gc_cpu_time"]].compact.max
  def gc_wall_ms = pauses && pauses["gc_wall_ms"]
  def pause(kind, figure) = pauses && pauses.dig(kind, figure)
end

# What to show of a failed run's stderr: for a Ruby crash report ([BUG] ...), the [BUG] line and
# the frames and backtraces, without the register dump, loaded features and memory map that end
# it; otherwise the last lines.
def stderr_excerpt(text)
  bug = text.index(/^.*\[BUG\]/)
  return tail(text) unless bug
  report = text[bug..]
  report = report[0, report.index(/^-- Other runtime information/) || report.size]
  report = report.gsub(/^-- Machine register context -+\n.*?(?=^-- )/m, "")
  lines = report.lines
  (lines.size > 70 ? lines.first(10) + ["[...]\n"] + lines.last(60) : lines).join
end

# Runs `ruby -r probe.rb workload args` under the configuration's GC library and allocator;
# never raises for a bad child.
def run_once(ruby, bench, cfg, rep, quick, timeout, scratch)
  probe = File.join(scratch, "probe.json")
  figures = File.join(scratch, "figures.json")
  out_file = File.join(scratch, "stdout")
  err_file = File.join(scratch, "stderr")
  [probe, figures].each { |f| FileUtils.rm_f(f) }
  env = config_env(cfg).merge(
    "MOSAIC_BENCH_PROBE" => probe, "MOSAIC_BENCH_FIGURES" => figures, "MOSAIC_BENCH_PAUSES" => PAUSES_EXT,
    "MOSAIC_RUBY_SRC" => TOOL["MOSAIC_RUBY_SRC"], "RUBYOPT" => nil, "RUBYLIB" => nil,
    "GEM_HOME" => nil, "GEM_PATH" => nil, "BUNDLE_GEMFILE" => nil,
    "MOSAIC_BENCH_BALLAST_MB" => bench.ballast_mb&.to_s,
  )
  args = (bench.args || []).dup
  args << "--quick" if quick && !args.include?("--quick")
  cmd = [ruby, "-r", File.join(BENCH_DIR, "lib/probe.rb"), File.join(WORKLOADS, bench.script), *args]

  # Wall and CPU time of the child (lib/measure.rb): CPU is user + system of all its threads and
  # of the processes it waited for.
  m = Measure.run(env, cmd, timeout: timeout, out: out_file, err: err_file, chdir: scratch)
  status = m.status
  timed_out = m.timed_out

  stdout = File.read(out_file) rescue ""
  stderr = File.read(err_file) rescue ""
  result = RunResult.new(gc: cfg.name, rep: rep, exit_code: status.exitstatus, signal: status.termsig,
                         wall_s: m.wall_s, cpu_s: m.cpu_s.round(6), cpu_user_s: m.cpu_user_s.round(6),
                         cpu_sys_s: m.cpu_sys_s.round(6), figures: [], stderr_tail: nil)
  if status.exitstatus == SKIP_STATUS
    result.status = "skipped"
    result.message = stdout[/^SKIP: (.*)$/, 1] || "skipped"
    result.wall_s = nil
    result.cpu_s = nil
    return result
  end
  probe_data = (JSON.parse(File.read(probe)) rescue nil)
  result.figures = (JSON.parse(File.read(figures)) rescue [])
  if probe_data
    result.peak_rss_kb = probe_data["peak_rss_kb"]
    result.gc_count = probe_data["gc_count"]
    result.gc_time_ms = probe_data["gc_time_ms"]
    %w[allocator allocator_lib rss_kb rss_anon_kb rss_file_kb mallinfo2 heap_live_slots heap_free_slots
       heap_allocated_pages mosaic_stats probe_ms probe_errors pauses cpu_self_s probe_cpu_ms].each { |k| result[k] = probe_data[k] }
    # The probe's own time at exit is measuring, not the workload: left out of wall and CPU time.
    # (Its walks of glibc's bins, mallinfo2 and Mosaic's measured memory keys, took 25 and 45
    # ms of malloc-fragmented's ~0.55 s under default and mosaic: 100k free chunks.)
    result.wall_s -= probe_data["probe_ms"].to_f / 1000 if probe_data["probe_ms"].is_a?(Numeric)
    if probe_data["probe_cpu_ms"].is_a?(Numeric)
      result.cpu_s = (result.cpu_s - probe_data["probe_cpu_ms"].to_f / 1000).round(6)
    end
  end
  problem =
    if timed_out then "timed out after #{timeout} s"
    elsif status.signaled? then "killed by signal #{status.termsig} (#{Signal.signame(status.termsig) rescue "?"})"
    elsif !status.success? then "exit status #{status.exitstatus}"
    elsif !probe_data then "no probe output (the process did not reach at_exit)"
    elsif probe_data["gc"] != cfg.gc then "ran under GC #{probe_data["gc"].inspect}, not #{cfg.gc.inspect}"
    elsif probe_data["allocator"] != cfg.allocator
      "ran with allocator #{probe_data["allocator"].inspect} (malloc from #{probe_data["allocator_lib"] || "?"}), " \
        "not #{cfg.allocator.inspect}#{cfg.allocator == "jemalloc" ? " (LD_PRELOAD=#{JEMALLOC.inspect})" : ""}" +
        (probe_data["probe_errors"] ? "; probe errors: #{probe_data["probe_errors"].join("; ")}" : "")
    end
  if problem
    result.status = "failed"
    result.message = problem
    result.stderr_tail = stderr_excerpt(stderr.empty? ? stdout : stderr)
  else
    result.status = "ok"
  end
  result
end

# ---------------------------------------------------------------------------------------------
# Statistics

def median(values) = Noise.median(values)

def spread(values)
  v = values.compact
  v.empty? ? nil : { "median" => median(v), "min" => v.min, "max" => v.max }
end

# Ratio other/baseline from runs paired by repetition (run j of other vs run j of baseline):
# the median of the per-pair ratios, their min and max, and the noise figures of lib/noise.rb
# (the ratios, their quartiles, the interval of the median and its verdict).
def pair_ratio(base_runs, other_runs, field)
  Noise.ratio(Noise.pair_ratios(base_runs, other_runs, field))
end

# The ratios of one comparison: wall time, CPU time, peak RSS.
RATIO_FIELDS = %w[wall_s cpu_s peak_rss_kb].freeze
def pair_ratios(base_runs, other_runs) = RATIO_FIELDS.to_h { |f| [f, pair_ratio(base_runs, other_runs, f)] }

# Medians (min, max) of the probe's memory figures at exit over the successful runs; every numeric
# mosaic_* GC.stat key that the runs report is kept, whatever its name.
def memory_summary(ok)
  mosaic_keys = ok.flat_map { |r| (r.mosaic_stats || {}).keys }.uniq
  {
    "rss_kb" => spread(ok.map(&:rss_kb)),
    "libc_in_use_bytes" => spread(ok.map(&:libc_in_use)),
    "libc_free_bytes" => spread(ok.map(&:libc_free)),
    "libc_mmapped_bytes" => spread(ok.map(&:libc_mmapped)),
    "heap_live_slots" => spread(ok.map(&:heap_live_slots)),
    "heap_free_slots" => spread(ok.map(&:heap_free_slots)),
    "heap_allocated_pages" => spread(ok.map(&:heap_allocated_pages)),
    "mosaic_stats" => mosaic_keys.filter_map do |k|
      values = ok.map { |r| (r.mosaic_stats || {})[k] }.grep(Numeric)
      [k, spread(values)] unless values.empty?
    end.to_h,
  }
end

# Medians (min, max) over the successful runs of the pause timer's figures (bench/lib/pauses.c):
# per kind the count and p50/p99/max of the pauses (ms), and the GC wall and CPU time (ms).
def pause_summary(ok)
  return nil if ok.none?(&:pauses)
  kinds = %w[minor major minor_gc major_gc].to_h do |kind|
    [kind, %w[count p50_ms p99_ms max_ms].to_h { |f| [f, spread(ok.map { |r| r.pause(kind, f) })] }]
  end
  kinds.merge("gc_wall_ms" => spread(ok.map(&:gc_wall_ms)), "gc_cpu_ms" => spread(ok.map(&:gc_cpu_ms)))
end

def summarize(bench, runs_by_gc, baseline, jemalloc_baseline, jemalloc_others)
  per_gc = runs_by_gc.to_h do |gc, runs|
    ok = runs.select(&:ok?)
    figures = ok.flat_map(&:figures).group_by { |f| f["name"] }.to_h do |name, fs|
      [name, spread(fs.map { |f| f["value"] }).merge("unit" => fs.first["unit"], "better" => fs.first["better"])]
    end
    [gc, {
      "runs" => runs.size, "ok" => ok.size,
      "failed" => runs.count { |r| r.status == "failed" },
      "skipped" => runs.any? { |r| r.status == "skipped" } ? runs.find { |r| r.status == "skipped" }.message : nil,
      "wall_s" => spread(ok.map(&:wall_s)), "cpu_s" => spread(ok.map(&:cpu_s)), "peak_rss_kb" => spread(ok.map(&:peak_rss_kb)),
      "gc_count" => spread(ok.map(&:gc_count)), "gc_time_ms" => spread(ok.map(&:gc_time_ms)),
      "figures" => figures, "allocator" => ok.map(&:allocator).uniq.join(","), "memory" => memory_summary(ok),
      "pauses" => pause_summary(ok),
    }]
  end
  ratios = runs_by_gc.keys.reject { |g| g == baseline }.to_h do |gc|
    [gc, pair_ratios(runs_by_gc[baseline], runs_by_gc[gc])]
  end
  # other+jemalloc / baseline-GC+jemalloc: what a GC gains over the baseline GC when both run on jemalloc
  jemalloc_ratios = jemalloc_others.to_h do |gc|
    [gc, { "vs" => jemalloc_baseline }.merge(pair_ratios(runs_by_gc[jemalloc_baseline], runs_by_gc[gc]))]
  end
  { "name" => bench.name, "base_name" => bench.base_name, "ballast_mb" => bench.ballast_mb,
    "about" => bench.about, "timing" => bench.timing?, "per_gc" => per_gc, "ratios" => ratios,
    "jemalloc_ratios" => jemalloc_ratios, "runs" => runs_by_gc.values.flatten.map { |r| r.to_h.transform_keys(&:to_s) } }
end

# ---------------------------------------------------------------------------------------------
# Report: Markdown

def fmt(v, digits = 3)
  return "-" if v.nil?
  return v.to_s if v.is_a?(Integer)
  return format("%.0f", v) if v.abs >= 1000
  format("%.#{digits}g", v)
end

# median (min-max) of the per-pair ratios, flagged *noise* or *?* by lib/noise.rb's verdict
def ratio_cell(r)
  return "-" unless r && r["median"]
  format("%.2f (%.2f-%.2f)", r["median"], r["min"], r["max"]) + Noise.flag(r)
end

def mb(v) = v.nil? ? "-" : fmt(v / 1048576.0)

def markdown(results, gcs, baseline, meta)
  others = gcs - [baseline]
  jbase = meta["jemalloc_baseline"]
  jothers = jbase ? (meta["jemalloc_compared"] || []) : []
  suite = meta["suite"] && meta["suite"] != "default" ? ", suite #{meta["suite"]}" : ""
  out = +"## Mosaic benchmarks: #{gcs.join(" vs ")} (#{meta["mode"]}#{suite}, #{meta["reps"]} reps, #{meta["git_commit"]})\n\n"
  out << "Wall time is per process (boot included); CPU time is its user + system time, all threads and the " \
         "children it waited for; peak RSS is VmHWM; GC count and time are GC.stat(:count/:time).\n"
  out << "Values are medians over the successful runs; ratio = #{others.map { |o| "#{o}/#{baseline}" }.join(", ")}: " \
         "median of per-pair ratios (run j vs run j), with the min-max of those ratios. Below 1 is better for #{others.join("/")}. " \
         "*noise*: the ratio's #{(Noise::LEVEL * 100).round}% interval contains 1.0, not a difference; " \
         "*?*: every pair agrees but there are fewer than #{Noise::MIN_PAIRS} pairs, too few to tell (see \"Noise\" below).\n"
  if gcs.any? { |g| g.end_with?("+jemalloc") }
    out << "A `+jemalloc` configuration is the same GC with #{meta.dig("jemalloc", "path") || "libjemalloc.so.2"} " \
           "(#{meta.dig("jemalloc", "package") || "libjemalloc2"}) preloaded with LD_PRELOAD; every run's allocator is checked.\n"
  end
  out << "\n"
  head = ["benchmark", "GC", "runs ok", "wall median s", "wall min s", "wall max s", "CPU median s", "peak RSS MB",
          "GC count", "GC time ms"]
  others.each { |o| head += ["wall #{o}/#{baseline}", "CPU #{o}/#{baseline}", "RSS #{o}/#{baseline}"] }
  out << "| #{head.join(" | ")} |\n|#{head.map { "---" }.join("|")}|\n"
  results.each do |res|
    gcs.each do |gc|
      s = res["per_gc"][gc]
      status = if s["skipped"] then "skipped"
               elsif s["failed"].positive? then "**#{s["ok"]}/#{s["runs"]} (#{s["failed"]} FAILED)**"
               else "#{s["ok"]}/#{s["runs"]}"
               end
      w = s["wall_s"] || {}
      row = [res["name"], gc, status, fmt(w["median"]), fmt(w["min"]), fmt(w["max"]), fmt(s.dig("cpu_s", "median")),
             s["peak_rss_kb"] ? fmt(s["peak_rss_kb"]["median"] / 1024.0) : "-",
             fmt(s.dig("gc_count", "median")), fmt(s.dig("gc_time_ms", "median"))]
      others.each do |o|
        r = gc == o ? res["ratios"][o] : nil
        row += r ? RATIO_FIELDS.map { |f| ratio_cell(r[f]) } : ["", "", ""]
      end
      out << "| #{row.join(" | ")} |\n"
    end
  end

  unless jothers.empty?
    out << "\n### Under jemalloc: #{jothers.map { |o| "#{o} / #{jbase}" }.join(", ")}\n\n"
    out << "Both sides run on jemalloc; same pairing (run j vs run j), spread and flags as above. Below 1 is better for #{jothers.join("/")}.\n\n"
    jhead = ["benchmark", *jothers.flat_map { |o| ["wall #{o}/#{jbase}", "CPU #{o}/#{jbase}", "RSS #{o}/#{jbase}"] }]
    out << "| #{jhead.join(" | ")} |\n|#{jhead.map { "---" }.join("|")}|\n"
    results.each do |res|
      cells = jothers.flat_map do |o|
        r = res.dig("jemalloc_ratios", o) || {}
        RATIO_FIELDS.map { |f| ratio_cell(r[f]) }
      end
      out << "| #{[res["name"], *cells].join(" | ")} |\n"
    end
  end

  out << noise_markdown(results, others.map { |o| [o, baseline, "ratios"] } + jothers.map { |o| [o, jbase, "jemalloc_ratios"] })

  out << "\n### The benchmarks' own figures\n\n"
  fhead = ["benchmark", "figure", "unit", *gcs.map { |g| "#{g} median (min-max)" }, *others.map { |o| "#{o}/#{baseline}" },
           *jothers.map { |o| "#{o}/#{jbase}" }, "better"]
  out << "| #{fhead.join(" | ")} |\n|#{fhead.map { "---" }.join("|")}|\n"
  results.each do |res|
    names = gcs.flat_map { |g| res["per_gc"][g]["figures"].keys }.uniq
    names.each do |name|
      cells = gcs.map do |g|
        f = res["per_gc"][g]["figures"][name]
        f ? (f["min"] == f["max"] ? fmt(f["median"], 4) : "#{fmt(f["median"], 4)} (#{fmt(f["min"])}-#{fmt(f["max"])})") : "-"
      end
      ratio = lambda do |o, b|
        f = res["per_gc"][o]["figures"][name]
        base = res["per_gc"][b]["figures"][name]
        f && base && base["median"].to_f.nonzero? ? format("%.2f", f["median"].to_f / base["median"]) : "-"
      end
      ratios = others.map { |o| ratio.call(o, baseline) } + jothers.map { |o| ratio.call(o, jbase) }
      any = gcs.map { |g| res["per_gc"][g]["figures"][name] }.compact.first
      out << "| #{[res["name"], name, any["unit"], *cells, *ratios, any["better"]].join(" | ")} |\n"
    end
  end

  out << ballast_markdown(results, others, baseline)
  out << pauses_markdown(results, gcs)
  out << memory_markdown(results, gcs)

  problems = results.flat_map { |res| res["runs"].map { |r| [res["name"], r] } }
                    .reject { |_, r| r["status"] == "ok" }
  skipped = problems.select { |_, r| r["status"] == "skipped" }.uniq { |n, r| [n, r["gc"]] }
  failed = problems.select { |_, r| r["status"] == "failed" }
  unless skipped.empty?
    out << "\n### Skipped\n\n"
    skipped.each { |n, r| out << "- #{n} (#{r["gc"]}): #{r["message"]}\n" }
  end
  unless failed.empty?
    out << "\n### FAILED runs\n\n"
    failed.each do |n, r|
      out << "- **#{n}** under #{r["gc"]}, run #{r["rep"]}: #{r["message"]}; stderr tail:\n\n"
      out << "```\n#{r["stderr_tail"].to_s.rstrip}\n```\n\n"
    end
  end
  out
end

# The "Noise" section: per timed benchmark and comparison (other, base, key of its ratios in a
# result), each ratio's interval and verdict (lib/noise.rb), and a count of the verdicts.
def noise_markdown(results, comparisons)
  rows = results.select { |r| r["timing"] }
  return "" if rows.empty? || comparisons.empty?
  level = (Noise::LEVEL * 100).round
  out = +"\n### Noise: which differences are real\n\n"
  out << "Per ratio: the median of the per-pair ratios and, in brackets, the distribution-free #{level}% confidence " \
         "interval of that median (order statistics of the pairs: the sign test's interval; with fewer than " \
         "#{Noise::MIN_PAIRS} pairs no interval reaches #{level}% and it is min-max, at the confidence shown). " \
         "**real**: the interval excludes 1.0 at #{level}% or more; noise: it contains 1.0, the run does not tell the " \
         "two apart; too few: every pair agrees, but with too few pairs for #{level}% (run more with --reps). " \
         "Real means not run-to-run noise: peak RSS, repeatable run to run, can still move with where the " \
         "collections fall (--ballast).\n\n"
  head = ["benchmark", "ratio", "pairs (confidence)", "wall", "CPU", "peak RSS"]
  out << "| #{head.join(" | ")} |\n|#{head.map { "---" }.join("|")}|\n"
  counts = Hash.new { |h, k| h[k] = Hash.new(0) }
  rows.each do |res|
    comparisons.each do |other, base, key|
      rs = res.dig(key, other) or next
      next unless RATIO_FIELDS.any? { |f| rs[f] }
      w = rs["wall_s"] || {}
      pairs = w["pairs"] ? "#{w["pairs"]} (#{(w["confidence"].to_f * 100).round}%)" : "-"
      cells = RATIO_FIELDS.map do |f|
        r = rs[f]
        next "-" unless r && r["median"]
        counts[f][r["verdict"]] += 1
        word = { "real" => "**real**", "noise" => "noise", "few" => "too few" }[r["verdict"]]
        extra = r["pairs"] == w["pairs"] ? "" : ", #{r["pairs"]} pairs"
        format("%.2f [%.2f-%.2f] %s%s", r["median"], r["lo"], r["hi"], word, extra)
      end
      out << "| #{[res["name"], "#{other}/#{base}", pairs, *cells].join(" | ")} |\n"
    end
  end
  tally = { "wall_s" => "wall", "cpu_s" => "CPU", "peak_rss_kb" => "peak RSS" }.filter_map do |f, label|
    c = counts[f]
    "#{label}: #{c["real"]} real, #{c["noise"]} within noise, #{c["few"]} too few pairs" unless c.empty?
  end
  out << "\n#{tally.join("; ")}.\n" unless tally.empty?
  out
end

# The "Across ballasts" section (--ballast): per benchmark and configuration, the median ratios
# at each ballast and their geometric mean.
def ballast_markdown(results, others, baseline)
  groups = results.select { |r| r["base_name"] }.group_by { |r| r["base_name"] }
  return "" if groups.empty? || others.empty?
  geo = ->(xs) { xs.empty? ? nil : Math.exp(xs.sum { |x| Math.log(x) } / xs.size) }
  out = +"\n### Across ballasts\n\n"
  out << "Each benchmark ran with each ballast (MiB of small Strings kept alive from the start), which moves its " \
         "collections against its phases. Cells: median peak RSS and wall ratio (#{others.map { |o| "#{o}/#{baseline}" }.join(", ")}) " \
         "per ballast, then their geometric mean.\n\n"
  ballasts = groups.values.first.map { |r| r["ballast_mb"] }
  head = ["benchmark", "configuration", "ratio", *ballasts.map { |m| "+#{m} MiB" }, "geometric mean"]
  out << "| #{head.join(" | ")} |\n|#{head.map { "---" }.join("|")}|\n"
  groups.each do |name, rows|
    others.each do |o|
      { "peak RSS" => "peak_rss_kb", "wall" => "wall_s" }.each do |label, key|
        vals = rows.map { |r| r.dig("ratios", o, key, "median") }
        cells = vals.map { |v| v ? format("%.2f", v) : "-" }
        g = geo.call(vals.compact)
        out << "| #{[name, o, label, *cells, g ? format("**%.3f**", g) : "-"].join(" | ")} |\n"
      end
    end
  end
  out
end

# The "GC pauses and GC time" section: the pause timer's figures (bench/lib/pauses.c), per
# benchmark and configuration, medians over the successful runs.
def pauses_markdown(results, gcs)
  rows = results.select { |res| gcs.any? { |g| res["per_gc"][g]["pauses"] } }
  return "" if rows.empty?
  out = +"\n### GC pauses and GC time\n\n"
  out << "Timed in every run by bench/lib/pauses.c from the GC_ENTER/GC_EXIT hooks, the same way under every GC: " \
         "a pause is one stay in the collector (a collection, a lazy-sweep or incremental-marking step), wall clock; " \
         "major if the latest collection started was major (so a major GC's lazy-sweep steps are major pauses). " \
         "n = pauses, percentiles nearest-rank (within 3%), max exact. GC wall = sum of all pauses; GC CPU = CPU time " \
         "of the thread in the GC during them (or the GC's own figure when larger: Mosaic's :mosaic_gc_cpu_time counts " \
         "its worker threads); GC.stat time = GC.stat(:time) (the default GC: process CPU time of marking and sweeping; " \
         "Mosaic: their wall time). Medians over the runs; ms.\n\n"
  head = ["benchmark", "GC", "minor n", "minor p50", "minor p99", "minor max", "major n", "major p50", "major p99",
          "major max", "GC wall ms", "GC CPU ms", "GC.stat time ms"]
  out << "| #{head.join(" | ")} |\n|#{head.map { "---" }.join("|")}|\n"
  rows.each do |res|
    gcs.each do |gc|
      s = res["per_gc"][gc]
      p = s["pauses"] or next
      cell = ->(*path) { fmt(p.dig(*path, "median")) }
      out << "| #{[res["name"], gc,
                   *%w[minor major].flat_map { |k| [cell.call(k, "count"), *%w[p50_ms p99_ms max_ms].map { |f| cell.call(k, f) }] },
                   cell.call("gc_wall_ms"), cell.call("gc_cpu_ms"), fmt(s.dig("gc_time_ms", "median"))].join(" | ")} |\n"
    end
  end
  out << "\nThe collections alone: the pauses in which a collection started (GC.count changed), without the later " \
         "lazy-sweep and incremental-marking steps (what GC::Profiler records per GC, but on the same clock for both GCs). ms.\n\n"
  head = ["benchmark", "GC", "minor GCs", "minor GC p50", "minor GC p99", "minor GC max", "major GCs", "major GC p50",
          "major GC p99", "major GC max"]
  out << "| #{head.join(" | ")} |\n|#{head.map { "---" }.join("|")}|\n"
  rows.each do |res|
    gcs.each do |gc|
      p = res["per_gc"][gc]["pauses"] or next
      next unless p["minor_gc"]
      cell = ->(*path) { fmt(p.dig(*path, "median")) }
      out << "| #{[res["name"], gc,
                   *%w[minor_gc major_gc].flat_map { |k| [cell.call(k, "count"), *%w[p50_ms p99_ms max_ms].map { |f| cell.call(k, f) }] }].join(" | ")} |\n"
    end
  end
  out
end

# The "Memory breakdown at exit" section: the probe's figures (medians over the successful runs)
# of the timed benchmarks; then every mosaic_*_bytes GC.stat key any run reported, in MB.
def memory_markdown(results, gcs)
  rows = results.select { |res| res["timing"] }
  return "" if rows.empty?
  out = +"\n### Memory breakdown at exit\n\n"
  out << "Medians over the successful runs, taken by bench/lib/probe.rb when the process exits: peak RSS (VmHWM) and " \
         "RSS at exit (VmRSS) from /proc/self/status; glibc malloc from mallinfo2(): in use (uordblks + hblkhd), free " \
         "inside its arenas (fordblks), mmapped chunks (hblkhd) -- \"-\" under jemalloc; Ruby heap from GC.stat: " \
         "live and free slots, allocated pages. MB = 2^20 bytes. Figure-only benchmarks are left out.\n\n"
  head = ["benchmark", "GC", "peak RSS MB", "RSS at exit MB", "libc in use MB", "libc free in arenas MB",
          "libc mmapped MB", "live slots", "free slots", "heap pages"]
  out << "| #{head.join(" | ")} |\n|#{head.map { "---" }.join("|")}|\n"
  med = ->(h, k) { h && h[k] && h[k]["median"] }
  rows.each do |res|
    gcs.each do |gc|
      s = res["per_gc"][gc]
      m = s["memory"] || {}
      kb = ->(v) { v.nil? ? "-" : fmt(v / 1024.0) }
      out << "| #{[res["name"], gc, kb.call(med.call(s, "peak_rss_kb")), kb.call(med.call(m, "rss_kb")),
                   mb(med.call(m, "libc_in_use_bytes")), mb(med.call(m, "libc_free_bytes")), mb(med.call(m, "libc_mmapped_bytes")),
                   fmt(med.call(m, "heap_live_slots")&.round), fmt(med.call(m, "heap_free_slots")&.round),
                   fmt(med.call(m, "heap_allocated_pages")&.round)].join(" | ")} |\n"
    end
  end

  keys = rows.flat_map { |res| gcs.flat_map { |g| (res["per_gc"][g].dig("memory", "mosaic_stats") || {}).keys } }
             .uniq.grep(/\Amosaic_.*_bytes\z/)
  return out if keys.empty?
  out << "\nMosaic's own accounting at exit: every `mosaic_*_bytes` key of GC.stat the runs reported, in MB " \
         "(medians; rows of configurations that report none are left out).\n\n"
  head = ["benchmark", "GC", *keys.map { |k| "#{k.delete_suffix("_bytes")} MB" }]
  out << "| #{head.join(" | ")} |\n|#{head.map { "---" }.join("|")}|\n"
  rows.each do |res|
    gcs.each do |gc|
      stats = res["per_gc"][gc].dig("memory", "mosaic_stats") || {}
      next if (stats.keys & keys).empty?
      out << "| #{[res["name"], gc, *keys.map { |k| mb(med.call(stats, k)) }].join(" | ")} |\n"
    end
  end
  out
end

# ---------------------------------------------------------------------------------------------
# Machine info

def machine_info
  cpu = (File.read("/proc/cpuinfo")[/^model name\s*:\s*(.*)$/, 1] rescue nil)
  mem_kb = (File.read("/proc/meminfo")[/^MemTotal:\s+(\d+)/, 1].to_i rescue nil)
  { "nproc" => (Integer(`nproc`.strip) rescue nil), "cpu_model" => cpu, "mem_total_kb" => mem_kb,
    "kernel" => (`uname -sr`.strip rescue nil), "hostname" => (`hostname`.strip rescue nil),
    "load_average_at_start" => (File.read("/proc/loadavg").split.first(3).join(" ") rescue nil) }
end

# Read-only git queries (--no-optional-locks: not even the index's stat cache is refreshed).
def git(*args) = IO.popen(["git", "--no-optional-locks", "-C", ROOT, *args], err: File::NULL, &:read).to_s.strip

# ---------------------------------------------------------------------------------------------
# Main loop: benchmarks in order; within one, reps interleaved over the GCs (A B A B ...).

commit = git("rev-parse", "--short", "HEAD")
commit = "nogit" if commit.empty?
dirty = !git("status", "--porcelain", "--untracked-files=no").empty?
stamp = Time.now.utc.strftime("%Y-%m-%dT%H%M%SZ")
meta = {
  "date" => Time.now.utc.iso8601, "git_commit" => commit + (dirty ? "-dirty" : ""),
  "suite" => options[:suite], "mode" => quick ? "quick" : "full", "reps" => reps, "gcs" => gcs, "baseline" => baseline,
  "ruby" => ruby, "ruby_version" => ruby_versions, "gc_dir" => TOOL["MOSAIC_GC_DIR"],
  "machine" => machine_info, "command" => "bench/run.rb #{options.inspect}", "ballast_mb" => options[:ballast],
  "ratio_spread" => "median of per-pair ratios (run j of a GC vs run j of the baseline), with min and max",
  "noise_rule" => "lo-hi: distribution-free (order-statistic, sign-test) confidence interval of the median pair ratio " \
                  "at #{Noise::LEVEL} or more (min-max below #{Noise::MIN_PAIRS} pairs, at its lower confidence); " \
                  "verdict noise if it contains 1.0, real if not at that confidence, few if not but below it",
  "cpu_time" => "user + system time of the child, all threads, and of the processes it waited for " \
                "(getrusage RUSAGE_CHILDREN around the wait), less the probe's CPU at exit",
  "configs" => configs.transform_values { |c| { "gc" => c.gc, "allocator" => c.allocator, "ld_preload" => config_env(c)["LD_PRELOAD"], "env" => c.env } },
  "jemalloc_baseline" => jemalloc_baseline, "jemalloc_compared" => jemalloc_others,
  "pause_timer" => PAUSES_EXT ? "bench/lib/pauses.c (GC_ENTER/GC_EXIT hooks)" : nil,
}
if JEMALLOC
  version = IO.popen(["dpkg-query", "-W", "-f", "${Version}", "libjemalloc2"], err: File::NULL, &:read).strip rescue ""
  meta["jemalloc"] = { "path" => JEMALLOC, "package" => version.empty? ? nil : "libjemalloc2 #{version}" }
end

t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
elapsed = lambda do
  s = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0).to_i
  format("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60)
end
warn "bench/run.rb: #{selected.size} benchmarks#{options[:suite] == "default" ? "" : " of suite #{options[:suite]}"} x #{gcs.join(",")} x #{reps} reps (#{meta["mode"]} mode), " \
     "commit #{meta["git_commit"]}, load #{meta["machine"]["load_average_at_start"]}"

results = []
Dir.mktmpdir("mosaic-bench-") do |scratch|
  selected.each_with_index do |bench, i|
    n = bench.reps || reps
    runs_by_gc = gcs.to_h { |g| [g, []] }
    skipped = false
    (1..n).each do |rep|
      break if skipped
      gcs.each do |gc|
        $stderr.print "[#{elapsed.call}] benchmark #{i + 1}/#{selected.size} #{bench.name}: run #{rep}/#{n} #{gc} ... "
        r = run_once(ruby, bench, configs[gc], rep, quick, timeout, scratch)
        runs_by_gc[gc] << r
        case r.status
        when "ok" then warn format("%.2f s, %.0f MB", r.wall_s, r.peak_rss_kb / 1024.0)
        when "skipped" then warn "skipped: #{r.message}"
        else warn "FAILED: #{r.message}\n#{r.stderr_tail.to_s.lines.first(6).map { |l| "    | #{l}" }.join}"
        end
        skipped = true if r.status == "skipped"
      end
    end
    results << summarize(bench, runs_by_gc, baseline, jemalloc_baseline, jemalloc_others)
  end
end
meta["duration_s"] = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0).round(1)

table = markdown(results, gcs, baseline, meta)
puts table

results_dir = File.join(BENCH_DIR, "results")
FileUtils.mkdir_p(results_dir)
suite_tag = options[:suite] == "default" ? "" : "-#{options[:suite]}"
base_name = File.join(results_dir, "#{stamp}-#{commit}#{dirty ? "-dirty" : ""}#{suite_tag}#{quick ? "-quick" : ""}")
File.write("#{base_name}.json", JSON.pretty_generate(meta.merge("results" => results)) + "\n")
File.write("#{base_name}.md", table)
chart_files = Chart.draw(results, gcs, baseline, meta, base_name)
warn "\nbench/run.rb: done in #{elapsed.call}; wrote #{base_name}.json, .md#{chart_files.empty? ? "" : ", " + chart_files.map { |f| File.extname(f) }.join(", ")}"

failed = results.sum { |r| r["per_gc"].values.sum { |s| s["failed"] } }
warn "bench/run.rb: #{failed} run(s) FAILED (see the table's FAILED section)" if failed.positive?
exit(failed.positive? ? 1 : 0)
