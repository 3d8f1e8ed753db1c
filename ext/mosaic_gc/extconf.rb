# extconf.rb of the mosaic-gc gem: run by `gem install` with the Ruby the gem is installed for.
# It refuses, in one line, a Ruby Mosaic cannot be built for (scripts/ruby-check.sh: not 3.4, no
# modular GC, no installed headers) or a machine without a C compiler or make, and otherwise
# writes a Makefile whose `make` builds librubygc.mosaic.so with the project's own Makefile
# (`make lib RUBY=<this Ruby>`: its installed headers only) and whose `make install` puts it into
# this Ruby's modular_gc_dir, atomically (copy, then rename), recording the path in
# installed.txt for `gem uninstall` (lib/rubygems_plugin.rb).
#
# MOSAIC_GEM_GC_NAME=name installs it as librubygc.name.so instead (RUBY_GC_LIBRARY=name; letters,
# digits and _, at most 20): the test command installs the gem that way beside the library it
# tests.
require "rbconfig"

def refuse(why)
  warn "mosaic-gc: #{why}"
  exit 1
end

root = File.expand_path("../..", __dir__)
ruby = RbConfig.ruby
name = ENV.fetch("MOSAIC_GEM_GC_NAME", "mosaic")
refuse "MOSAIC_GEM_GC_NAME=#{name.inspect}: letters, digits and _ only, at most 20" unless name.match?(/\A[A-Za-z0-9_]{1,20}\z/)

check = File.join(root, "scripts", "ruby-check.sh")
refuse "#{ruby} cannot load Mosaic (the line above says why)" unless system(check, ruby)

cc = ENV["CC"] || RbConfig::CONFIG["CC"].to_s.split.first || "cc"
refuse "no C compiler (#{cc}): install one (Debian and Ubuntu: apt-get install gcc make)" unless system("command -v #{cc} >/dev/null 2>&1")
make = ENV["MAKE"] || "make"
refuse "no #{make}: install GNU make (Debian and Ubuntu: apt-get install make)" unless system("command -v #{make} >/dev/null 2>&1")

gc_dir = RbConfig::CONFIG["modular_gc_dir"].to_s.chomp("/")
lib = File.join(gc_dir, "librubygc.#{name}.so")
target = name == "mosaic" ? "install" : "variant NAME=#{name}"
args = "-C '#{root}' RUBY='#{ruby}' CC='#{cc}'"
installed = File.join(__dir__, "installed.txt")

File.write("Makefile", <<~MAKE)
  # Written by extconf.rb of the mosaic-gc gem.
  all:
  \t@#{make} --no-print-directory #{args} lib
  install:
  \t@[ -d '#{gc_dir}' ] && [ -w '#{gc_dir}' ] || { echo "mosaic-gc: cannot write #{gc_dir} (this Ruby's modular_gc_dir): install as its owner, or with sudo" >&2; exit 1; }
  \t@#{make} --no-print-directory #{args} #{target}
  \t@echo '#{lib}' > '#{installed}'
  clean:
  \t@rm -rf '#{root}/build'
MAKE
