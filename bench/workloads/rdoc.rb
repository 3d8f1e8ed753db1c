# Workload "rdoc": RDoc (ri format) over CRuby 3.4.5's own sources, as benchmark/gc/rdoc.rb in the
# Ruby tree does. --quick documents a fixed subset (six core C files, four stdlib Ruby files).
# The source tree is $MOSAIC_RUBY_SRC, or found with scripts/toolchain.sh paths.
# Usage: ruby bench/workloads/rdoc.rb [--quick] [--pauses]
require_relative "../lib/bench_support"
require "rdoc/rdoc"
require "tmpdir"

srcdir = ENV["MOSAIC_RUBY_SRC"] ||
         `#{Bench::ROOT}/scripts/toolchain.sh paths`[/^MOSAIC_RUBY_SRC=(.*)$/, 1]
Bench.skip("no Ruby source tree (MOSAIC_RUBY_SRC)") unless srcdir && File.file?(File.join(srcdir, "array.c"))

targets = if Bench.quick?
  %w[array.c string.c hash.c object.c io.c numeric.c lib/optparse.rb lib/set.rb lib/ipaddr.rb lib/erb.rb]
    .map { |f| File.join(srcdir, f) }
else
  [srcdir]
end

seconds = Bench.time do
  Dir.mktmpdir("mosaic-bench-rdoc-") do |d|
    args = %W[--root #{srcdir} --encoding=UTF-8 --no-force-update --all --ri --quiet --op #{File.join(d, "out")}]
    args += %W[--page-dir #{srcdir}/doc] unless Bench.quick?
    RDoc::RDoc.new.document(args + targets)
  end
end
Bench.figure("rdoc time", seconds, "s", better: :lower)
