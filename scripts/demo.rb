# Runs a workload under each GC on the same Ruby binary, interleaved (A B A B ...), and prints a
# side-by-side summary of medians: wall time, peak RSS, GC count, GC time.
# Usage: ruby demo.rb [--full] [--reps N] [--gcs default,mosaic]
require "json"
require "tmpdir"

ruby = ENV.fetch("MOSAIC_RUBY")
src = ENV.fetch("MOSAIC_RUBY_SRC")
root = File.expand_path("..", __dir__)
full = ARGV.include?("--full")
reps = (ARGV[ARGV.index("--reps") + 1] if ARGV.include?("--reps")).to_i
reps = full ? 3 : 5 if reps <= 0
gcs = (ARGV[ARGV.index("--gcs") + 1] if ARGV.include?("--gcs"))&.split(",") || %w[default mosaic]

workload = [File.join(root, "scripts/rdoc_workload.rb"), src] + (full ? [] : ["--quick"])
label = full ? "rdoc over Ruby's sources" : "rdoc over a subset of Ruby's sources (--full for all)"
puts "Workload: #{label}; #{reps} interleaved runs per GC on #{`#{ruby} -v`.strip.sub(/\+GC\[\w+\] /, "")}"

results = Hash.new { |h, k| h[k] = [] }
Dir.mktmpdir("mosaic-demo-") do |tmp|
  reps.times do |rep|
    gcs.each do |gc|
      probe = File.join(tmp, "probe-#{gc}-#{rep}.json")
      env = { "RUBY_GC_LIBRARY" => gc, "MOSAIC_PROBE_OUT" => probe }
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      ok = system(env, ruby, "-r#{File.join(root, "scripts/gc_probe.rb")}", *workload, err: File.join(tmp, "err-#{gc}"))
      wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
      unless ok && File.exist?(probe)
        warn "run #{rep + 1} under #{gc} failed (#{$?}):\n" + File.read(File.join(tmp, "err-#{gc}")).lines.last(20).join
        exit 1
      end
      r = JSON.parse(File.read(probe)).merge("wall" => wall)
      results[gc] << r
      printf("  run %d/%d %-8s %6.2f s  %7.1f MB  %4d GCs  %6d ms in GC\n", rep + 1, reps, gc, wall,
             r["peak_rss_kb"] / 1024.0, r["gc_count"], r["gc_time_ms"])
    end
  end
end

median = ->(xs) { s = xs.sort; s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2.0 }
rows = {
  "wall time (s)" => ->(r) { r["wall"] },
  "peak RSS (MB)" => ->(r) { r["peak_rss_kb"] / 1024.0 },
  "GC count" => ->(r) { r["gc_count"] },
  "GC time (ms)" => ->(r) { r["gc_time_ms"] },
}
puts
puts "| median of #{reps} | " + gcs.join(" | ") + (gcs.size == 2 ? " | #{gcs[1]}/#{gcs[0]} |" : " |")
puts "|---" * (gcs.size + (gcs.size == 2 ? 2 : 1)) + "|"
rows.each do |name, f|
  vals = gcs.map { |gc| median.(results[gc].map(&f)) }
  cells = vals.map { |v| v.is_a?(Float) ? format("%.2f", v) : v.to_s }
  ratio = gcs.size == 2 && vals[0].to_f > 0 ? format(" %.2f |", vals[1].to_f / vals[0].to_f) : ""
  puts "| #{name} | #{cells.join(" | ")} |#{ratio}"
end
