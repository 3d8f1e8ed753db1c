#!/usr/bin/env ruby
# bench/size_tables.rb: peak RSS and GC figures of workloads under each size-class table
# (MOSAIC_SIZE_CLASSES, docs/DESIGN.md "Heap layout"), one GC library, interleaved runs.
# Peak RSS and counts are what it is for: they do not depend on the machine's load; wall times
# are printed too, for what they are worth.
#
# Usage: bench/size_tables.rb [--gc LIB] [--reps N] [--tables a,b,...] [--only w1,w2] [--json FILE]
#   LIB is a librubygc.LIB.so (default mosaic); tables are names or size lists (; separated
#   when they hold commas, e.g. --tables "default;40,56,72,104,1032").
require "json"
require "optparse"
require "tmpdir"

ROOT = File.expand_path("..", __dir__)
RUBY = ENV.fetch("MOSAIC_RUBY") { RbConfig.ruby }
WORKLOADS = {
  "rdoc-subset" => ["rdoc.rb", "--quick"],
  "liquid" => ["liquid.rb"],
  "binary-trees" => ["binary_trees.rb"],
  "gcbench" => ["gcbench.rb"],
  "redblack" => ["redblack.rb", "--quick"],
  "strings" => ["strings.rb", "--quick"],
  "arrays" => ["arrays.rb", "--quick"],
  "hash-heavy" => ["hash_heavy.rb", "--quick"],
}
opts = { gc: "mosaic", reps: 1, tables: %w[default fine large cacheline], only: WORKLOADS.keys, json: nil }
OptionParser.new do |o|
  o.on("--gc LIB") { |v| opts[:gc] = v }
  o.on("--reps N", Integer) { |v| opts[:reps] = v }
  o.on("--tables LIST") { |v| opts[:tables] = v.include?(";") ? v.split(";") : v.split(",") }
  o.on("--only LIST") { |v| opts[:only] = v.split(",") }
  o.on("--json FILE") { |v| opts[:json] = v }
end.parse!

rows = []
Dir.mktmpdir do |dir|
  opts[:only].each do |w|
    script, *args = WORKLOADS.fetch(w)
    opts[:reps].times do |rep|
      opts[:tables].each do |table|
        probe = File.join(dir, "probe.json")
        File.delete(probe) if File.exist?(probe)
        env = { "RUBY_GC_LIBRARY" => opts[:gc], "MOSAIC_SIZE_CLASSES" => table, "MOSAIC_BENCH_PROBE" => probe,
                "MOSAIC_BENCH_FIGURES" => nil, "RUBYOPT" => nil }
        t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        ok = system(env, RUBY, "-r#{ROOT}/bench/lib/probe.rb", "#{ROOT}/bench/workloads/#{script}", *args,
                    out: File::NULL, err: File.join(dir, "err"))
        wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
        err = File.read(File.join(dir, "err"))
        abort "#{w} under #{table}: failed\n#{err}" unless ok && File.exist?(probe)
        abort "#{w} under #{table}: #{err}" if err.include?("invalid value for MOSAIC_SIZE_CLASSES")
        p = JSON.parse(File.read(probe))
        m = p["mosaic_stats"] || {}
        row = { workload: w, table: table, rep: rep, wall_s: wall.round(2), peak_rss_mb: (p["peak_rss_kb"] / 1024.0).round(1),
                gc_count: p["gc_count"], major: p["major_gc_count"],
                peak_heap_pages_mb: ((m["mosaic_peak_heap_pages_bytes"] || 0) / 1048576.0).round(1),
                peak_heap_live_mb: ((m["mosaic_peak_heap_live_bytes"] || 0) / 1048576.0).round(1),
                peak_malloc_mb: ((m["mosaic_peak_malloc_bytes"] || 0) / 1048576.0).round(1) }
        rows << row
        $stderr.puts row.values.join("\t")
      end
    end
  end
end
File.write(opts[:json], JSON.pretty_generate(rows)) if opts[:json]

puts "| workload | table | peak RSS MB | peak heap pages MB | peak slot bytes in use MB | peak malloc MB | GCs (major) | wall s |"
puts "|---|---|---:|---:|---:|---:|---:|---:|"
rows.group_by { |r| [r[:workload], r[:table]] }.each do |(w, t), rs|
  med = ->(k) { v = rs.map { |r| r[k] }.sort; v[v.size / 2] }
  puts "| #{w} | #{t} | #{med[:peak_rss_mb]} | #{med[:peak_heap_pages_mb]} | #{med[:peak_heap_live_mb]} | #{med[:peak_malloc_mb]} | #{med[:gc_count]} (#{med[:major]}) | #{med[:wall_s]} |"
end
