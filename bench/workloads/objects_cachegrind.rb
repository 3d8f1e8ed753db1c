# Workload "objects-cachegrind": the D1 and LL cache misses of the "objects" workload, counted by
# valgrind --tool=cachegrind with a fixed simulated cache (32 KiB 8-way L1s, 8 MiB 16-way LL, 64-byte
# lines) so the figure is deterministic and the same on every machine. The boot of Ruby is counted
# separately (the same run with --count 0) and subtracted, giving the misses of the loop itself.
# Skips with a message when valgrind is missing or cannot run this Ruby.
# Usage: ruby bench/workloads/objects_cachegrind.rb [--quick]   (full: 0x400000 objects, quick: 0x40000)
require_relative "../lib/bench_support"
require "open3"

valgrind = ENV.fetch("PATH", "").split(":").map { |d| File.join(d, "valgrind") }.find { |f| File.executable?(f) }
Bench.skip("valgrind is not installed (apt-get install valgrind, or run bench/setup.sh)") unless valgrind

count = Bench.size(0x400000, 0x40000)
objects_rb = File.join(__dir__, "objects.rb")
CACHE = %w[--I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64].freeze
child_env = { "MOSAIC_BENCH_FIGURES" => nil, "MOSAIC_BENCH_PROBE" => nil, "RUBYOPT" => nil }

# => {"D1 misses" => Integer, "LL misses" => Integer, "D refs" => Integer}
def cachegrind(valgrind, env, ruby_args)
  cmd = [valgrind, "--tool=cachegrind", "--cache-sim=yes", "--cachegrind-out-file=/dev/null", *CACHE,
         RbConfig.ruby, *ruby_args]
  out, status = Open3.capture2e(env, *cmd)
  unless status.success?
    Bench.skip("valgrind could not run this Ruby (exit #{status.exitstatus}): #{out.lines.last(5).join.strip}")
  end
  %w[D\ refs D1\ misses LL\ misses].to_h do |label|
    n = out[/^==\d+== #{label.sub(" ", "\\s+")}:\s+([\d,]+)/, 1]
    Bench.skip("could not read '#{label}' from cachegrind's output: #{out.lines.last(5).join.strip}") unless n
    [label, n.delete(",").to_i]
  end
end

boot = cachegrind(valgrind, child_env, [objects_rb, "--count", "0"])
full = cachegrind(valgrind, child_env, [objects_rb, "--count", count.to_s])
puts "  (#{count} objects under cachegrind; boot-only run subtracted)"
Bench.figure("D1 misses (loop)", full["D1 misses"] - boot["D1 misses"], "misses", better: :lower)
Bench.figure("LL misses (loop)", full["LL misses"] - boot["LL misses"], "misses", better: :lower)
Bench.figure("D refs (loop)", full["D refs"] - boot["D refs"], "refs", better: :lower)
Bench.figure("D1 misses (whole run)", full["D1 misses"], "misses", better: :lower)
Bench.figure("LL misses (whole run)", full["LL misses"], "misses", better: :lower)
