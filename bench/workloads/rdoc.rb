# Workload "rdoc": RDoc (ri format) over CRuby 3.4.5's own sources, as benchmark/gc/rdoc.rb in the
# Ruby tree does. --quick documents a fixed subset (six core C files, four stdlib Ruby files).
# The source tree is $MOSAIC_RUBY_SRC, or found with scripts/toolchain.sh paths.
# Usage: ruby bench/workloads/rdoc.rb [--quick] [--pauses]
#
# The ri output (about 16k files, 65 MB) goes to a directory on a RAM file system (/dev/shm) when there
# is one, or $MOSAIC_BENCH_TMPDIR. On ext4 a run that creates many files shortly after another run
# deleted many pays for it in the kernel: inode allocation skips inodes deleted in the last 60-300 s
# (ext4's recently_deleted), measured at 4-5 s of system time on the full run. Interleaved runs
# would charge that to whichever GC ran second, not to either GC.
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

outdir_base = ENV["MOSAIC_BENCH_TMPDIR"] ||
              (["/dev/shm"].find { |d| File.directory?(d) && File.writable?(d) }) ||
              Dir.tmpdir

seconds = Bench.time do
  Dir.mktmpdir("mosaic-bench-rdoc-", outdir_base) do |d|
    args = %W[--root #{srcdir} --encoding=UTF-8 --no-force-update --all --ri --quiet --op #{File.join(d, "out")}]
    args += %W[--page-dir #{srcdir}/doc] unless Bench.quick?
    RDoc::RDoc.new.document(args + targets)
  end
end
Bench.figure("rdoc time", seconds, "s", better: :lower)
