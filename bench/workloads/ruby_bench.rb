# Workload "rb-NAME" of bench/run.rb --suite ruby-bench: runs ruby/ruby-bench's program NAME
# (benchmarks/NAME/benchmark.rb, or benchmarks/NAME.rb for a single-file one) with ruby-bench's
# own harness (harness/harness.rb) for a fixed number of iterations: WARMUP_ITRS warm-up ones,
# then MIN_BENCH_ITRS measured ones (MIN_BENCH_TIME=0, so the count does not depend on speed),
# chosen per program below so that a run takes about 5-30 s here (quick: fewer). Its figure is
# the median of the measured iterations (ms), as ruby-bench reports them.
#
# The checkout is $RUBY_BENCH_DIR or bench/.ruby-bench, the gems bench/.ruby-bench-gems, both
# prepared by bench/ruby-bench/setup.sh; a program whose gems are missing or failed to install
# skips (exit 77) with the reason. Under its Gemfile (BUNDLE_GEMFILE) the program runs with the
# toolchain's bundler, and with one change to the harness: `use_gemfile` does `Bundler.setup`
# only, without ruby-bench's `bundle check || bundle install` and extra setup command in a
# subprocess every run (setup.sh ran them once). Nothing here loads a gem before Bundler.setup
# (json, a default gem, would be activated at its default version): bench_support is loaded
# only when the harness returns its results. Environment overrides: RUBY_BENCH_WARMUP_ITRS,
# RUBY_BENCH_ITRS.
# Usage: ruby bench/workloads/ruby_bench.rb NAME [--quick]
NAME = ARGV.find { |a| !a.start_with?("--") }
QUICK = ARGV.include?("--quick") || ENV["MOSAIC_BENCH_QUICK"] == "1"
BENCH_DIR = File.expand_path("..", __dir__)

def skip(reason)
  puts "SKIP: #{reason}"
  $stdout.flush
  exit!(77) # no at_exit hooks: nothing was measured
end

# [warm-up, measured] iterations, full and quick: about 5-30 s per run (quick: 3-20 s) on this
# project's 2-vCPU machines at load average 2, boot and, for Rails, loading the app included
# (interpreter, no JIT). Comments: seconds per iteration under the default GC there.
ITERATIONS = {
  "railsbench" => [[1, 4], [1, 2]],              # 4.3 s (the first: ~7 s), ~3 s of boot
  "erubi-rails" => [[1, 5], [1, 2]],             # 1.5 s, ~2 s of boot
  "liquid-render" => [[5, 30], [3, 20]],         # 0.18 s
  "hexapdf" => [[1, 3], [1, 2]],                 # 2.8 s
  "optcarrot" => [[1, 4], [1, 2]],               # 5.1 s
  "splay" => [[10, 40], [5, 25]],                # 0.12 s, after ~1.5 s building the tree
  "string_malloc_pressure" => [[2, 8], [1, 4]],  # 1.0 s (Mosaic: 0.5 s)
  "sequel" => [[10, 60], [5, 30]],               # 0.08 s, after ~3 s inserting its rows
  "binarytrees" => [[2, 12], [1, 8]],            # 0.47 s
  "fluentd" => [[5, 25], [2, 8]],                # 0.6 s
}.freeze

skip("usage: ruby_bench.rb NAME [--quick]") unless NAME
checkout = ENV["RUBY_BENCH_DIR"].to_s.empty? ? File.join(BENCH_DIR, ".ruby-bench") : ENV["RUBY_BENCH_DIR"]
unless File.directory?(File.join(checkout, "harness"))
  skip("no ruby-bench checkout at #{checkout} (run bench/ruby-bench/setup.sh, or set RUBY_BENCH_DIR)")
end
checkout = File.realpath(checkout)
dir = File.join(checkout, "benchmarks", NAME)
script = File.file?(File.join(dir, "benchmark.rb")) ? File.join(dir, "benchmark.rb") : "#{dir}.rb"
skip("ruby-bench has no benchmark #{NAME} in #{checkout} (bench/ruby-bench/setup.sh #{NAME})") unless File.file?(script)

gems = File.join(BENCH_DIR, ".ruby-bench-gems")
status = File.join(gems, "status", NAME)
gemfile = File.join(dir, "Gemfile")
uses_gemfile = File.file?(gemfile) && File.read(script).include?("use_gemfile")
if File.file?("#{status}.failed")
  skip("bench/ruby-bench/setup.sh could not install #{NAME}'s gems: #{File.read("#{status}.failed").lines.last.to_s.strip} " \
       "(log: #{status}.log)")
end
if uses_gemfile && !File.file?("#{status}.ok")
  skip("#{NAME}'s gems are not installed (run bench/ruby-bench/setup.sh)")
end

full, quick = ITERATIONS.fetch(NAME, [[2, 8], [1, 3]])
warmup, itrs = QUICK ? quick : full
ENV["WARMUP_ITRS"] = ENV.fetch("RUBY_BENCH_WARMUP_ITRS", warmup.to_s)
ENV["MIN_BENCH_ITRS"] = ENV.fetch("RUBY_BENCH_ITRS", itrs.to_s)
ENV["MIN_BENCH_TIME"] = "0"
ENV["RESULT_JSON_PATH"] = File::NULL # the harness's own results file: not kept
# harness-common.rb compares `ruby` on PATH with this Ruby and, when they differ, puts this one
# first and clears GEM_HOME/GEM_PATH: put it first here, so that it keeps the gem paths below.
ENV["PATH"] = "#{File.dirname(RbConfig.ruby)}#{File::PATH_SEPARATOR}#{ENV["PATH"]}"
if uses_gemfile
  ENV["GEM_HOME"] = ENV["GEM_PATH"] = gems
  ENV["BUNDLE_GEMFILE"] = gemfile
  ENV["BUNDLE_USER_HOME"] = File.join(gems, ".bundle-home")
  ENV["BUNDLE_VERSION"] = "system"
  ENV["BUNDLE_FROZEN"] = "true"
  ENV["GIT_CONFIG_GLOBAL"] = File.join(gems, "gitconfig")
  Gem.use_paths(gems, [gems])
end

# ruby-bench's harness, loaded as its loader.rb would (`require "harness"` with harness/ on the
# load path; the program's own require then finds it loaded).
$LOAD_PATH << File.join(checkout, "harness")
require "harness"

def use_gemfile(extra_setup_cmd: nil) # rubocop:disable Lint/UnusedMethodArgument -- setup.sh ran it
  require "bundler"
  Bundler.setup
end

alias mosaic_ruby_bench_return_results return_results
def return_results(warmup_iterations, bench_iterations, **extra)
  require_relative "../lib/bench_support"
  times = bench_iterations.sort
  unless times.empty?
    mid = times.size / 2
    median = times.size.odd? ? times[mid] : (times[mid - 1] + times[mid]) / 2.0
    Bench.figure("median iteration", median * 1000.0, "ms", better: :lower)
  end
  mosaic_ruby_bench_return_results(warmup_iterations, bench_iterations, **extra)
end

$0 = script
load script
