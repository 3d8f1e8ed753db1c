#!/usr/bin/env ruby
# bench/summary.rb: the summary table of one results file of bench/run.rb (a baseline in
# bench/baselines/, or a run in bench/results/), in Markdown on stdout, and optionally its chart.
# docs/PERFORMANCE.md's table and chart are this script's output for the baseline:
#
#   bench/summary.rb bench/baselines/2026-11-24-7b92b84.json --vs mosaic \
#     --chart docs/performance-chart.svg
#
# One row per timed benchmark (figure-only ones, objects-cachegrind and pauses-*, are left out):
# the ratios CONFIG / baseline of wall time, CPU time and peak RSS (median of the per-pair ratios,
# with their min-max, flagged *noise* when the interval of the median holds 1.0 and *?* when too
# few pairs agree: bench/lib/noise.rb; for results files written before those existed, computed
# from their runs), then both configurations' medians of wall time, CPU time, peak RSS, GC count
# and GC wall time (bench/lib/pauses.c: the sum of the stays in the collector, the same clock
# under every GC); then the geometric means of the ratios over every row, and, with
# --geomean-without, over the rows less those benchmarks. A results file from before CPU time was
# measured has no CPU columns. Runs with any Ruby >= 3.0.
require "json"
require "optparse"
require_relative "lib/chart"
require_relative "lib/noise"

options = { vs: nil, chart: nil, without: nil }
parser = OptionParser.new do |o|
  o.banner = "Usage: bench/summary.rb RESULTS.json [--vs CONFIG] [--chart OUT.svg|OUT.png] [--geomean-without a,b]"
  o.on("--vs CONFIG", "the configuration compared with the baseline (default: the second of the run's)") { |c| options[:vs] = c }
  o.on("--chart FILE", "also draw the chart of CONFIG / baseline into FILE (.svg; .png needs rsvg-convert)") { |f| options[:chart] = f }
  o.on("--geomean-without LIST", Array, "a second geometric-mean row without these benchmarks") { |l| options[:without] = l }
end
begin
  parser.parse!(ARGV)
  raise OptionParser::InvalidArgument, "one results file" unless ARGV.size == 1
rescue OptionParser::ParseError => e
  warn e.message, parser.help
  exit 2
end

file = ARGV.first
saved = JSON.parse(File.read(file))
unless saved["results"].is_a?(Array) && saved["gcs"]
  warn "bench/summary.rb: #{file} is not a results file of bench/run.rb"
  exit 2
end
base = saved["baseline"]
vs = options[:vs] || (saved["gcs"] - [base]).first
unless vs && saved["gcs"].include?(vs) && vs != base
  warn "bench/summary.rb: #{file} has no configuration #{vs.inspect} other than its baseline #{base.inspect} " \
       "(it has #{saved["gcs"].join(", ")})"
  exit 2
end
rows = saved["results"].select { |r| r["timing"] && r.dig("ratios", vs, "wall_s") }

def num(v, digits = 3)
  return "-" if v.nil?
  return v.to_s if v.is_a?(Integer)
  return format("%.0f", v) if v.abs >= 100
  format("%#.#{digits}g", v)
end

def ratio(r) = r && r["median"] ? format("%.2f (%.2f-%.2f)", r["median"], r["min"], r["max"]) + Noise.flag(r) : "-"

def pair(res, a, b, &fig)
  "#{num(fig.call(res["per_gc"][a]))} / #{num(fig.call(res["per_gc"][b]))}"
end

def geomean(values) = Math.exp(values.sum { |v| Math.log(v) } / values.size)

puts "Commit #{saved["git_commit"]}, #{saved["date"]}, #{saved["mode"]} inputs, #{saved["reps"]} repetitions per " \
     "configuration, #{saved.dig("machine", "nproc")} CPUs (#{saved.dig("machine", "cpu_model")}), load average at start " \
     "#{saved.dig("machine", "load_average_at_start")}. Ratio = #{vs} / #{base}, below 1 is better for #{vs}.\n\n"
# CPU time only when the file has it (older results files do not)
FIELDS = (rows.any? { |r| r.dig("ratios", vs, "cpu_s") } ? %w[wall_s cpu_s peak_rss_kb] : %w[wall_s peak_rss_kb]).freeze
cpu = FIELDS.include?("cpu_s")
# the ratios of a row, each with its interval and verdict (computed from the runs for older files)
def ratios(res, base, vs) = FIELDS.to_h { |f| [f, Noise.complete(res.dig("ratios", vs, f), res["runs"] || [], base, vs, f)] }

label = { "wall_s" => "wall", "cpu_s" => "CPU", "peak_rss_kb" => "peak RSS" }
head = ["benchmark", *FIELDS.map { |f| "#{label[f]} #{vs}/#{base}" }, "wall s #{base} / #{vs}",
        *(cpu ? ["CPU s #{base} / #{vs}"] : []), "peak RSS MB #{base} / #{vs}", "GC count #{base} / #{vs}",
        "GC wall ms #{base} / #{vs}"]
puts "| #{head.join(" | ")} |", "|#{(["---"] + ["---:"] * (head.size - 1)).join("|")}|"
rows.each do |res|
  rt = ratios(res, base, vs)
  puts "| #{[res["name"], *FIELDS.map { |f| ratio(rt[f]) },
             pair(res, base, vs) { |s| s.dig("wall_s", "median") },
             *(cpu ? [pair(res, base, vs) { |s| s.dig("cpu_s", "median") }] : []),
             pair(res, base, vs) { |s| (kb = s.dig("peak_rss_kb", "median")) && kb / 1024.0 },
             pair(res, base, vs) { |s| s.dig("gc_count", "median") },
             pair(res, base, vs) { |s| s.dig("pauses", "gc_wall_ms", "median") }].join(" | ")} |"
end
sets = [["all #{rows.size}", rows]]
if options[:without]
  rest = rows.reject { |r| options[:without].include?(r["name"]) }
  sets << ["#{rest.size}: without #{options[:without].join(", ")}", rest]
end
sets.each do |name, set|
  means = FIELDS.map do |f|
    values = set.map { |r| r.dig("ratios", vs, f, "median") }.compact
    values.empty? ? "-" : format("**%.2f**", geomean(values))
  end
  puts "| **geometric mean** (#{name}) | #{means.join(" | ")} |#{" |" * (head.size - 1 - FIELDS.size)}"
end
verdicts = rows.flat_map { |res| ratios(res, base, vs).map { |f, r| [f, r && r["verdict"]] } }.select(&:last)
unless verdicts.empty?
  level = (Noise::LEVEL * 100).round
  counts = FIELDS.filter_map do |f|
    v = verdicts.select { |g, _| g == f }.map(&:last)
    "#{label[f]} #{v.count("real")} real, #{v.count("noise")} within noise, #{v.count("few")} too few pairs" unless v.empty?
  end
  puts "", "*noise*: the #{level}% interval of the median pair ratio (order statistics, bench/lib/noise.rb) contains 1.0; " \
           "*?*: every pair agrees but fewer than #{Noise::MIN_PAIRS} pairs, too few for #{level}%. #{counts.join("; ")}."
end

if (out = options[:chart])
  ext = File.extname(out).delete(".")
  unless %w[svg png].include?(ext)
    warn "bench/summary.rb: --chart wants a .svg or .png file, not #{out}"
    exit 2
  end
  files = Chart.draw(saved["results"], [base, vs], base, saved, out.delete_suffix(".#{ext}"), formats: [ext])
  warn "bench/summary.rb: wrote #{files.join(", ")}" unless files.empty?
  exit 1 if files.empty?
end
