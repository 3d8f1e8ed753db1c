# RDoc generation over Ruby's own sources, as benchmark/gc/rdoc.rb in the Ruby tree does.
# Usage: ruby rdoc_workload.rb SRCDIR [--quick]
#   --quick documents a fixed subset (a few core C files and stdlib Ruby files) for fast runs.
require "rdoc/rdoc"
require "tmpdir"

srcdir = File.expand_path(ARGV.fetch(0))
quick = ARGV.include?("--quick")
targets = if quick
  %w[array.c string.c hash.c object.c io.c numeric.c lib/optparse.rb lib/set.rb lib/ipaddr.rb lib/erb.rb]
    .map { |f| File.join(srcdir, f) }
else
  [srcdir]
end

Dir.mktmpdir("mosaic-rdoc-") do |d|
  args = %W[--root #{srcdir} --encoding=UTF-8 --no-force-update --all --ri --quiet --op #{File.join(d, "out")}]
  args += %W[--page-dir #{srcdir}/doc] unless quick
  RDoc::RDoc.new.document(args + targets)
end
