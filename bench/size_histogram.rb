#!/usr/bin/env ruby
# bench/size_histogram.rb: what Ruby asks for (issue 9, "Size classes chosen by measurement").
# Builds the size-histogram variant of Mosaic (make install-histogram: only
# $MOSAIC_GC_DIR/librubygc.mosaic_hist.so is written), runs each workload under it
# (RUBY_GC_LIBRARY=mosaic_hist) with MOSAIC_SIZE_HISTOGRAM_OUT set, and prints a Markdown report:
# per workload and Ruby type, the distribution of the alloc_size passed to rb_gc_impl_new_obj,
# and of rb_gc_obj_optimal_size at death (sweep), with the bytes lost to rounding each request
# up to a slot size under the current table and under candidate tables. The report goes to
# bench/results/<UTC timestamp>-size-histogram.md, the raw histograms beside it (.json).
# Only counts are measured: timings do not matter and are not reported.
#
# Waste is exact: the variant keeps, per 8-byte bucket, the count and the byte sum, and every
# table here has 8-byte-multiple slot sizes, so a bucket's requests all round to one slot.
#
# Usage: bench/size_histogram.rb [--full] [--only rdoc,rails,...] [--no-build] [--setup]
#                                [--from FILE.json]   (re-print the report of saved histograms)
require "json"
require "optparse"
require "tmpdir"
require "fileutils"
require "time"

BENCH_DIR = __dir__
ROOT = File.expand_path("..", BENCH_DIR)
WORKLOADS = File.join(BENCH_DIR, "workloads")
SKIP_STATUS = 77
LIB = "mosaic_hist"

# name, script, arguments (full run); quick adds --quick (rdoc: the fixed subset).
Workload = Struct.new(:name, :script, :args)
ALL = [
  Workload.new("rdoc", "rdoc.rb", []),
  Workload.new("rails", "rails.rb", []),
  Workload.new("liquid", "liquid.rb", []),
  Workload.new("binary-trees", "binary_trees.rb", []),
  Workload.new("gcbench", "gcbench.rb", []),
  Workload.new("redblack", "redblack.rb", []),
  Workload.new("hash-heavy", "hash_heavy.rb", []),
  Workload.new("strings", "strings.rb", []),
  Workload.new("arrays", "arrays.rb", []),
  Workload.new("objects", "objects.rb", []),
].freeze

# Slot-size tables compared. Every size is a multiple of 8 (see the top comment).
TABLES = {
  "current" => [40, 80, 160, 320, 640],
  "fine-8" => (40..640).step(8).to_a,
  "13-class" => [40, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 640],
  "cache-line" => [64, 128, 256, 512, 640],
}.freeze
TABLE_ABOUT = {
  "current" => "40/80/160/320/640 (src/core/mosaic.h today)",
  "fine-8" => "every multiple of 8 from 40 to 640 (the lower bound of waste for 8-byte-aligned slots)",
  "13-class" => "40/48/64/80/96/128/160/192/256/320/384/512/640",
  "cache-line" => "64/128/256/512, plus 640 so that everything that fits today still fits",
}.freeze
# The current classes' ranges, (low, high]: an 8-byte bucket falls in exactly one.
CLASS_RANGES = [[0, 40], [40, 80], [80, 160], [160, 320], [320, 640]].freeze

options = { quick: true, only: nil, build: true, setup: false, from: nil, timeout: 1800 }
OptionParser.new do |o|
  o.banner = "Usage: bench/size_histogram.rb [options]"
  o.on("--full", "full workload sizes (default: each workload's --quick size; rdoc: the subset)") { options[:quick] = false }
  o.on("--only LIST", Array, "only these workloads: #{ALL.map(&:name).join(",")}") { |l| options[:only] = l }
  o.on("--no-build", "use the installed librubygc.#{LIB}.so as it is") { options[:build] = false }
  o.on("--setup", "run bench/setup.sh first (gems for rails and liquid)") { options[:setup] = true }
  o.on("--timeout SECONDS", Integer, "per-workload time limit (default 1800)") { |t| options[:timeout] = t }
  o.on("--from FILE", "only print the report of histograms saved by an earlier run") { |f| options[:from] = f }
end.parse!(ARGV)

# ---------------------------------------------------------------------------------------------
# Histogram arithmetic. A histogram is {type => [[upper, count, bytes], ...]}; upper is the
# bucket's largest size (0: size 0, -1: above 640).

def slot_for(table, upper)
  table.find { |t| t >= upper }
end

# {requested:, count:, slot:, waste:, zero:, zero_count:, above:, above_count:} for one type's buckets.
def waste(buckets, table)
  r = Hash.new(0)
  buckets.each do |upper, count, bytes|
    if upper == 0
      r[:zero_count] += count
    elsif upper < 0
      r[:above_count] += count
      r[:above] += bytes
    else
      slot = slot_for(table, upper)
      r[:count] += count
      r[:requested] += bytes
      r[:slot] += slot * count
      r[:waste] += slot * count - bytes
    end
  end
  r
end

def sum_types(hist, table)
  hist.each_value.map { |b| waste(b, table) }.reduce(Hash.new(0)) { |a, w| a.merge(w) { |_, x, y| x + y } }
end

def pct(part, whole) = whole.zero? ? "-" : format("%.1f%%", 100.0 * part / whole)
def num(n) = n.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
def mib(n) = format("%.1f", n / 1048576.0)

# ---------------------------------------------------------------------------------------------
# Running

def toolchain
  @toolchain ||= IO.popen([File.join(ROOT, "scripts/toolchain.sh"), "paths"], &:read)
                   .lines.to_h { |l| l.strip.split("=", 2) }.reject { |k, _| k.nil? }
end

def run_workload(w, quick, timeout)
  ruby = toolchain.fetch("MOSAIC_RUBY")
  Dir.mktmpdir("mosaic-size-histogram-") do |dir|
    out = File.join(dir, "histogram.json")
    env = {
      "RUBY_GC_LIBRARY" => LIB, "MOSAIC_SIZE_HISTOGRAM_OUT" => out,
      "MOSAIC_RUBY_SRC" => toolchain["MOSAIC_RUBY_SRC"], "RUBYOPT" => nil, "RUBYLIB" => nil,
      "GEM_HOME" => nil, "GEM_PATH" => nil, "BUNDLE_GEMFILE" => nil,
    }
    args = w.args + (quick ? ["--quick"] : [])
    cmd = [ruby, File.join(WORKLOADS, w.script), *args]
    log = File.join(dir, "log")
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    pid = Process.spawn(env, *cmd, out: log, err: %i[child out], chdir: dir, pgroup: true)
    status = nil
    loop do
      _, status = Process.wait2(pid, Process::WNOHANG)
      break if status
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) - t > timeout
        Process.kill("KILL", -pid) rescue nil
        Process.wait(pid)
        return { "error" => "timed out after #{timeout}s" }
      end
      sleep 0.2
    end
    command = "RUBY_GC_LIBRARY=#{LIB} ruby bench/workloads/#{w.script} #{args.join(" ")}".strip
    return { "skipped" => File.read(log).lines.last.to_s.strip, "command" => command } if status.exitstatus == SKIP_STATUS
    unless status.success? && File.file?(out)
      return { "error" => "exit #{status.exitstatus.inspect}#{File.file?(out) ? "" : ", no histogram"}: " +
                          File.read(log).lines.last(15).join, "command" => command }
    end
    children = Dir[File.join(dir, "histogram.json.*")].size
    JSON.parse(File.read(out)).merge("command" => command, "forked_children" => children)
  end
end

# ---------------------------------------------------------------------------------------------
# Report

def distribution_table(io, hist, what)
  io.puts "| type | #{what} | bytes | ≤40 | 41–80 | 81–160 | 161–320 | 321–640 | >640 | #{what == "deaths" ? "0 (no opinion) | " : ""}most common 8-byte buckets (upper bound: count) |"
  io.puts "|---|---:|---:|---:|---:|---:|---:|---:|---:|#{what == "deaths" ? "---:|" : ""}---|"
  hist.sort_by { |_, b| -b.sum { |x| x[1] } }.each do |type, buckets|
    count = buckets.sum { |x| x[1] }
    bytes = buckets.sum { |x| x[2] }
    ranges = CLASS_RANGES.map do |lo, hi|
      sel = buckets.select { |u, _, _| u > lo && u <= hi }
      n = sel.sum { |x| x[1] }
      n.zero? ? "" : "#{num(n)} (#{mib(sel.sum { |x| x[2] })} MiB)"
    end
    above = buckets.select { |u, _, _| u < 0 }
    above_s = above.empty? ? "" : "#{num(above.sum { |x| x[1] })} (#{mib(above.sum { |x| x[2] })} MiB)"
    zero = buckets.select { |u, _, _| u == 0 }.sum { |x| x[1] }
    top = buckets.reject { |u, _, _| u <= 0 }.max_by(4) { |x| x[1] }.map { |u, n, _| "#{u}: #{num(n)}" }.join(", ")
    io.puts "| #{type} | #{num(count)} | #{mib(bytes)} MiB | #{ranges.join(" | ")} | #{above_s} | " \
            "#{what == "deaths" ? "#{zero.zero? ? "" : num(zero)} | " : ""}#{top} |"
  end
end

def waste_table(io, hist)
  io.puts "| type | objects | requested MiB | #{TABLES.keys.map { |t| "#{t}: lost" }.join(" | ")} |"
  io.puts "|---|---:|---:|#{TABLES.keys.map { "---:" }.join("|")}|"
  rows = hist.map { |type, b| [type, TABLES.transform_values { |t| waste(b, t) }] }
  rows.sort_by { |_, w| -w["current"][:waste] }.each do |type, w|
    next if w["current"][:count].zero?
    cells = TABLES.keys.map { |t| "#{mib(w[t][:waste])} MiB (#{pct(w[t][:waste], w[t][:slot])})" }
    io.puts "| #{type} | #{num(w["current"][:count])} | #{mib(w["current"][:requested])} | #{cells.join(" | ")} |"
  end
  all = TABLES.transform_values { |t| sum_types(hist, t) }
  cells = TABLES.keys.map { |t| "**#{mib(all[t][:waste])} MiB (#{pct(all[t][:waste], all[t][:slot])})**" }
  io.puts "| **all** | **#{num(all["current"][:count])}** | **#{mib(all["current"][:requested])}** | #{cells.join(" | ")} |"
end

def report(io, results, meta)
  io.puts "# Size histogram: what Ruby asks for (issue 9)"
  io.puts
  io.puts "Measured #{meta["date"]} on #{meta["ruby"]}, Mosaic #{meta["commit"]}, the size-histogram variant " \
          "(`make install-histogram`, RUBY_GC_LIBRARY=#{LIB}). Command: `#{meta["command"]}`. Counts only; no timings."
  io.puts
  io.puts "- **Requested**: the `alloc_size` CRuby passes to `rb_gc_impl_new_obj`, by the new object's type."
  io.puts "- **Optimal at death**: `rb_gc_obj_optimal_size(obj)` of each object the sweep frees, just before it is " \
          "freed (0 = CRuby has no opinion for that type: left out of the waste figures). Objects alive at exit are not counted."
  io.puts "- **Lost**: Σ (slot size − size) over the objects, each rounded up to the smallest slot that holds it; " \
          "the percentage is of the slot bytes (lost / Σ slot size). Sizes above 640 fit no table and are left out (counted apart)."
  io.puts "- Tables: " + TABLES.keys.map { |t| "**#{t}** = #{TABLE_ABOUT[t]}" }.join("; ") + "."
  io.puts "- Every table starts at 40 (MOSAIC_BASE_SLOT_SIZE, the smallest slot): requests under 40 bytes " \
          "(e.g. `Object.new` of a class with no ivars asks for 16) lose the same in all of them."
  io.puts "- T_OBJECT at death: CRuby sets an object's ivar capacity from the slot it got (the root shape of " \
          "that size class), and `rb_gc_obj_optimal_size` answers the embedded size of that capacity: unless " \
          "the object grew past it, its \"optimal\" size is its slot size. For T_OBJECT read the requested sizes."
  io.puts
  io.puts "## Headline: % of slot bytes lost to rounding"
  io.puts
  io.puts "| workload | objects allocated | requested MiB | >640 B | #{TABLES.keys.map { |t| "#{t}" }.join(" | ")} | deaths (optimal > 0) | #{TABLES.keys.map { |t| "#{t} (death)" }.join(" | ")} |"
  io.puts "|---|---:|---:|---:|#{TABLES.keys.map { "---:" }.join("|")}|---:|#{TABLES.keys.map { "---:" }.join("|")}|"
  results.each do |name, r|
    next unless r["alloc"]
    a = TABLES.transform_values { |t| sum_types(r["alloc"], t) }
    d = TABLES.transform_values { |t| sum_types(r["death_optimal"] || {}, t) }
    io.puts "| #{name} | #{num(a["current"][:count] + a["current"][:above_count] + a["current"][:zero_count])} | " \
            "#{mib(a["current"][:requested])} | #{num(a["current"][:above_count])} | " \
            "#{TABLES.keys.map { |t| pct(a[t][:waste], a[t][:slot]) }.join(" | ")} | #{num(d["current"][:count])} | " \
            "#{TABLES.keys.map { |t| pct(d[t][:waste], d[t][:slot]) }.join(" | ")} |"
  end
  results.each do |name, r|
    io.puts
    io.puts "## #{name}"
    io.puts
    io.puts "`#{r["command"]}`" if r["command"]
    io.puts
    if r["skipped"] || r["error"]
      io.puts "Not measured: #{r["skipped"] ? "skipped: #{r["skipped"]}" : "failed: #{r["error"].strip}"}"
      next
    end
    io.puts "Forked children wrote their own histograms (not included): #{r["forked_children"]}." if r["forked_children"].to_i > 0
    io.puts "### Requested sizes (allocation)"
    io.puts
    distribution_table(io, r["alloc"], "objects")
    io.puts
    io.puts "Bytes lost to rounding up, by table:"
    io.puts
    waste_table(io, r["alloc"])
    io.puts
    io.puts "### Optimal sizes at death (sweep)"
    io.puts
    distribution_table(io, r["death_optimal"], "deaths")
    io.puts
    io.puts "Bytes lost to rounding up, by table:"
    io.puts
    waste_table(io, r["death_optimal"])
    if (ds = r["death_slot"]) && !ds.empty?
      io.puts
      io.puts "Slot the dead objects occupied (current classes #{r["slot_sizes"].join("/")}):"
      io.puts
      io.puts "| type | #{r["slot_sizes"].join(" | ")} |"
      io.puts "|---|#{r["slot_sizes"].map { "---:" }.join("|")}|"
      ds.sort_by { |_, v| -v.sum }.each { |type, v| io.puts "| #{type} | #{v.map { |n| num(n) }.join(" | ")} |" }
    end
  end
end

# Turns the variant's JSON (type => {total, buckets}) into type => buckets.
def flatten(raw)
  raw.merge(%w[alloc death_optimal].to_h { |k| [k, (raw[k] || {}).transform_values { |v| v["buckets"] }] })
end

# ---------------------------------------------------------------------------------------------

if options[:from]
  saved = JSON.parse(File.read(options[:from]))
  report($stdout, saved["results"].transform_values { |r| r["alloc"] ? flatten(r) : r }, saved["meta"])
  exit
end

selected = options[:only] ? ALL.select { |w| options[:only].include?(w.name) } : ALL
abort "bench/size_histogram.rb: unknown workload in --only (#{ALL.map(&:name).join(", ")})" if selected.empty?
system(File.join(BENCH_DIR, "setup.sh")) || warn("bench/setup.sh reported problems") if options[:setup]
if options[:build]
  system("make", "-C", ROOT, "--no-print-directory", "install-histogram") or abort "make install-histogram failed"
end
lib = File.join(toolchain.fetch("MOSAIC_GC_DIR"), "librubygc.#{LIB}.so")
abort "#{lib} is missing (make install-histogram)" unless File.file?(lib)

results = {}
selected.each do |w|
  $stderr.print "[size-histogram] #{w.name} ... "
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  results[w.name] = run_workload(w, options[:quick], options[:timeout])
  status = results[w.name]["error"] ? "FAILED" : results[w.name]["skipped"] ? "skipped" : "ok"
  $stderr.puts format("%s (%.0fs)", status, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t)
end

commit = IO.popen(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], err: File::NULL, &:read).strip
dirty = IO.popen(["git", "-C", ROOT, "status", "--porcelain", "src"], err: File::NULL, &:read).strip.empty? ? "" : "+dirty"
ruby_v = IO.popen({ "RUBY_GC_LIBRARY" => LIB }, [toolchain.fetch("MOSAIC_RUBY"), "-v"], &:read).strip
argv = ["bench/size_histogram.rb", (options[:quick] ? nil : "--full"), (options[:only] ? "--only #{options[:only].join(",")}" : nil)].compact
stamp = Time.now.utc
meta = { "date" => stamp.iso8601, "ruby" => ruby_v, "commit" => commit + dirty, "command" => argv.join(" "),
         "quick" => options[:quick] }
FileUtils.mkdir_p(File.join(BENCH_DIR, "results"))
base = File.join(BENCH_DIR, "results", "#{stamp.strftime("%Y-%m-%dT%H%M%SZ")}-size-histogram")
File.write("#{base}.json", JSON.generate({ "meta" => meta, "results" => results }))
flat = results.transform_values { |r| r["alloc"] ? flatten(r) : r }
File.open("#{base}.md", "w") { |f| report(f, flat, meta) }
report($stdout, flat, meta)
$stderr.puts "[size-histogram] wrote #{base}.md and #{base}.json"
