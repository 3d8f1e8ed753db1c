# Shared by every workload under bench/workloads/: the --quick and --pauses flags, the
# project-local gem directory, and how a workload reports its own figures (i/s, latency, ...).
#
# A workload calls Bench.figure(name, value, unit, better: :higher|:lower). The figures are printed
# on stdout (so a workload run on its own is readable) and, when run under bench/run.rb, also
# written as JSON to $MOSAIC_BENCH_FIGURES at exit. A workload that cannot run here (missing gem,
# missing tool) calls Bench.skip(reason): exit status 77, which run.rb reports as "skipped".
require "json"

module Bench
  SKIP_STATUS = 77
  DIR = File.expand_path("..", __dir__)            # bench/
  ROOT = File.expand_path("..", DIR)               # the repository
  GEM_DIR = File.join(DIR, ".gems")

  @figures = []
  @pauses = []

  class << self
    attr_reader :figures

    def quick? = ARGV.include?("--quick") || ENV["MOSAIC_BENCH_QUICK"] == "1"
    def pauses? = ARGV.include?("--pauses")

    # full or quick value, chosen by --quick
    def size(full, quick) = quick? ? quick : full

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def time
      t = now
      yield
      now - t
    end

    # Seconds for `iterations` calls of Array.new(n), keeping nothing (arrays.rb, array_new.rb).
    def array_new_seconds(n, iterations)
      time do
        i = 0
        while i < iterations
          Array.new(n)
          i += 1
        end
      end
    end

    def figure(name, value, unit, better: :higher)
      @figures << { "name" => name, "value" => value, "unit" => unit, "better" => better.to_s }
      shown = value.is_a?(Float) ? format("%.4g", value) : value
      puts format("  %-28s %12s %s", name, shown, unit)
    end

    # Rate of the block, run for about `seconds` (after a warm-up of one batch): calls per
    # second, times `per_call` when each call handles several items (reported in `unit`).
    def ips(name, seconds: size(3.0, 0.6), batch: 10_000, per_call: 1, unit: "i/s", &blk)
      batch.times(&blk) # warm-up
      iters = 0
      start = now
      while now - start < seconds
        batch.times(&blk)
        iters += batch
      end
      figure(name, iters * per_call / (now - start), unit)
    end

    # p50/p90/p99/p100 of a list of seconds, reported in ms (lower is better).
    # (nearest-rank percentiles; p100 is the maximum)
    def percentiles(prefix, seconds_list, ps = [50, 90, 99, 100])
      sorted = seconds_list.sort
      ps.each do |p|
        idx = [(p / 100.0 * sorted.size).ceil - 1, 0].max
        label = p == 100 ? "max" : "p#{p}"
        figure("#{prefix} #{label}", sorted[idx] * 1000.0, "ms", better: :lower)
      end
    end

    def skip(reason)
      puts "SKIP: #{reason}"
      $stdout.flush
      exit!(SKIP_STATUS) # no at_exit hooks: nothing was measured
    end

    # Activates the gems bench/setup.sh installed into bench/.gems (not the machine's own). A gem
    # is a name, or [name, requirement] (activated before a later gem that depends on it).
    def use_gems(*names)
      Gem.use_paths(GEM_DIR, [GEM_DIR])
      names.each do |n|
        gem(*Array(n))
      rescue Gem::LoadError, Gem::MissingSpecError => e
        skip("gem #{Array(n).join(" ")} is not installed in bench/.gems (run bench/setup.sh): #{e.message.lines.first.strip}")
      end
    end

    def write_figures
      if @pauses_enabled
        times = GC::Profiler.raw_data.map { |r| r[:GC_TIME] }
        GC::Profiler.disable
        if times.empty?
          figure("GC pauses", 0, "pauses")
        else
          figure("GC pauses", times.size, "pauses", better: :lower)
          percentiles("pause", times, [50, 99, 100])
        end
      end
      out = ENV["MOSAIC_BENCH_FIGURES"]
      File.write(out, JSON.generate(@figures)) if out
    end

    # --pauses: record every GC with GC::Profiler (both GCs fill raw_data with per-GC GC_TIME).
    def start_pause_recording
      return unless pauses?
      GC::Profiler.enable
      GC::Profiler.clear
      @pauses_enabled = true
    end
  end

  start_pause_recording
  at_exit { write_figures }
end
