#!/usr/bin/env bash
# Refuses a Ruby Mosaic cannot be built for, in one line on stderr that says why and how to fix
# it, and exits 1; exits 0 silently when the Ruby will do. The Makefile runs it before anything
# is compiled (target ruby-check).
#
# Usage: scripts/ruby-check.sh RUBY
#
# A Ruby will do when it is 3.4 (Mosaic implements 3.4's Modular GC interface), was configured
# with --with-modular-gc=DIR (RbConfig::CONFIG["modular_gc_dir"] is then DIR, ending in "/"; a
# 3.4 configured without it has "", an older Ruby no such key), and has its headers installed
# (ruby.h under rubyhdrdir, ruby/config.h under rubyarchhdrdir). The Ruby code below runs under
# the Ruby being checked, so it keeps to syntax any Ruby reads.
set -uo pipefail
ruby=${1:-}
if [ -z "$ruby" ]; then
  echo "mosaic: no Ruby to build for: give RUBY=/path/to/bin/ruby (a Ruby 3.4 configured --with-modular-gc=DIR), or run make toolchain for this project's own" >&2
  exit 1
fi
if ! command -v "$ruby" >/dev/null; then
  echo "mosaic: RUBY=$ruby: no such program: give RUBY=/path/to/bin/ruby of a Ruby 3.4 configured --with-modular-gc=DIR" >&2
  exit 1
fi
if ! out=$("$ruby" -rrbconfig -e '
  c = RbConfig::CONFIG
  v = RUBY_VERSION
  if v !~ /\A3\.4\./
    puts "is Ruby #{v}, and Mosaic builds only for Ruby 3.4: give RUBY=/path/to/bin/ruby of a Ruby 3.4 configured --with-modular-gc=DIR"
  elsif c["modular_gc_dir"].to_s.empty?
    puts "(Ruby #{v}) was configured without modular GC: reconfigure it with ./configure --with-modular-gc=DIR (DIR: where GC libraries go), rebuild and reinstall it"
  elsif !File.file?(File.join(c["rubyhdrdir"].to_s, "ruby.h")) || !File.file?(File.join(c["rubyarchhdrdir"].to_s, "ruby", "config.h"))
    puts "(Ruby #{v}) has no headers installed under #{c["rubyhdrdir"]}: install its development files (make install of Ruby installs them)"
  end' 2>&1); then
  echo "mosaic: RUBY=$ruby does not run ($(head -1 <<<"$out")): give RUBY=/path/to/bin/ruby of a Ruby 3.4 configured --with-modular-gc=DIR" >&2
  exit 1
fi
if [ -n "$out" ]; then
  echo "mosaic: $ruby $out" >&2
  exit 1
fi
