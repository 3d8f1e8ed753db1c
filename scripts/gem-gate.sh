#!/usr/bin/env bash
# The gem gate: the mosaic-gc gem goes from a checkout to a loaded collector and back.
#   1. `gem build mosaic-gc.gemspec` in a copy of the checkout (the working tree's files as the
#      gemspec lists them) makes mosaic-gc-VERSION.gem;
#   2. `gem install --local` of that file into a scratch GEM_HOME compiles the library with the
#      toolchain's Ruby and installs it into that Ruby's modular_gc_dir, named mosaic_gem
#      (MOSAIC_GEM_GC_NAME, so the library the other gates test is left alone);
#   3. Ruby loads it (+GC[mosaic_gem]) and runs a program that collects, compacts and checks its
#      data;
#   4. `gem uninstall` removes the library again;
#   5. a bad MOSAIC_GEM_GC_NAME fails the install in one line and installs nothing;
#   6. make install refuses, in one line, a Ruby that is not 3.4, a missing Ruby, a missing C
#      compiler and a GC directory it cannot write.
# Prints PASS/FAIL lines; exits 1 on any failure.
source "$(dirname "$0")/lib.sh"
GEM="$(dirname "$MOSAIC_RUBY")/gem"
NAME=mosaic_gem
LIB="$MOSAIC_GC_DIR/librubygc.$NAME.so"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"; rm -f "$LIB"' EXIT

# 1. Build the gem from the files the gemspec lists.
version=$(cat "$MOSAIC_ROOT/VERSION")
if (cd "$MOSAIC_ROOT" && "$GEM" build mosaic-gc.gemspec --output "$scratch/mosaic-gc.gem") >"$scratch/build.log" 2>&1; then
  check_pass "gem build: mosaic-gc-$version ($(tar -xOf "$scratch/mosaic-gc.gem" data.tar.gz | tar -tz | wc -l) files)"
else
  check_fail "gem build"; tail -20 "$scratch/build.log"
fi

# 2. Install it (compiles; installs into the modular GC dir).
rm -f "$LIB"
if MOSAIC_GEM_GC_NAME=$NAME GEM_HOME="$scratch/gems" GEM_PATH="$scratch/gems" \
     "$GEM" install --local --no-document "$scratch/mosaic-gc.gem" >"$scratch/install.log" 2>&1 && [ -f "$LIB" ]; then
  check_pass "gem install: $LIB"
else
  check_fail "gem install"; tail -20 "$scratch/install.log"
  find "$scratch/gems" -name gem_make.out -exec tail -20 {} \; 2>/dev/null
fi

# 3. Load it and collect.
if out=$(RUBY_GC_LIBRARY=$NAME "$MOSAIC_RUBY" -e '
  raise "implementation #{GC.config[:implementation]}" unless GC.config[:implementation] == ARGV[0]
  data = Array.new(200_000) { |i| [i, "s#{i}", { k: i }] }
  20.times { Array.new(50_000) { |i| "garbage #{i}" } }
  GC.start
  GC.compact
  data.each_with_index { |(i, s, h), j| raise "lost #{j}" unless i == j && s == "s#{j}" && h[:k] == j }
  GC.verify_internal_consistency
  puts "#{GC.count} GCs"' $NAME 2>&1) && assert_gc_loads $NAME >/dev/null; then
  check_pass "loads +GC[$NAME], collects and compacts: $out"
else
  check_fail "load: $out"
fi

# 4. Uninstall removes the library.
if GEM_HOME="$scratch/gems" GEM_PATH="$scratch/gems" "$GEM" uninstall -x mosaic-gc >"$scratch/uninstall.log" 2>&1 && [ ! -e "$LIB" ]; then
  check_pass "gem uninstall removed $LIB"
else
  check_fail "gem uninstall (library left: $([ -e "$LIB" ] && echo yes || echo no))"; tail -10 "$scratch/uninstall.log"
fi

# 5. Bad input: one line, non-zero, nothing installed.
if MOSAIC_GEM_GC_NAME=bad-name GEM_HOME="$scratch/gems2" GEM_PATH="$scratch/gems2" \
     "$GEM" install --local --no-document "$scratch/mosaic-gc.gem" >"$scratch/bad.log" 2>&1; then
  check_fail "gem install with MOSAIC_GEM_GC_NAME=bad-name succeeded"
elif grep -rq "mosaic-gc: MOSAIC_GEM_GC_NAME=\"bad-name\"" "$scratch/bad.log" "$scratch/gems2" 2>/dev/null && [ ! -e "$MOSAIC_GC_DIR/librubygc.bad-name.so" ]; then
  check_pass "a bad MOSAIC_GEM_GC_NAME is refused in one line"
else
  check_fail "bad MOSAIC_GEM_GC_NAME: no clear refusal"; tail -10 "$scratch/bad.log"
fi

# 6. make install's refusals, each one line and a non-zero exit: a Ruby that is not 3.4 (Debian's
#    own, when the machine has one), no such Ruby, no C compiler, a GC directory it cannot write.
refused() { # expected-text command...
  local want=$1 out; shift
  if out=$("$@" 2>&1); then check_fail "not refused: $*"; return; fi
  if grep -q "$want" <<<"$out"; then check_pass "refused in one line: $(grep "$want" <<<"$out" | head -1 | cut -c1-110)"
  else check_fail "refused without saying \"$want\": $*: $(tail -3 <<<"$out")"; fi
}
if [ -x /usr/bin/ruby ] && ! /usr/bin/ruby -e 'exit RUBY_VERSION.start_with?("3.4.") ? 0 : 1'; then
  refused "Mosaic builds only for Ruby 3.4" "$MOSAIC_ROOT/scripts/ruby-check.sh" /usr/bin/ruby
fi
refused "no such program" "$MOSAIC_ROOT/scripts/ruby-check.sh" /nonexistent/bin/ruby
refused "mosaic: no C compiler" make --no-print-directory -C "$MOSAIC_ROOT" lib RUBY="$MOSAIC_RUBY" CC=/nonexistent/cc BUILD=build/gem-gate
refused "mosaic: cannot write /proc/mosaic-gate" make --no-print-directory -C "$MOSAIC_ROOT" install RUBY="$MOSAIC_RUBY" GC_DIR=/proc/mosaic-gate

[ $checks_failed = 0 ] && echo "PASS  gem gate" || { echo "FAIL  gem gate"; exit 1; }
