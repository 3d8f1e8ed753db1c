#!/usr/bin/env bash
# Runs CRuby test-all files directly with the in-tree ruby (as `make test-all` does), so that
# runner options such as `-n /pattern/` pass through unmangled.
# Usage: RUBY_GC_LIBRARY=mosaic scripts/run-cruby-tests.sh [runner options] test/ruby/test_gc.rb ...
source "$(dirname "$0")/lib.sh"
cd "$MOSAIC_RUBY_SRC"
exec ./miniruby -I./lib -I. -I.ext/common ./tool/runruby.rb --extout=.ext -- --disable-gems \
  ./test/runner.rb --ruby="./miniruby -I./lib -I. -I.ext/common ./tool/runruby.rb --extout=.ext -- --disable-gems" "$@"
