#!/usr/bin/env bash
# The prefix gate: Mosaic builds and installs from an installed Ruby alone, with no CRuby source
# tree anywhere it can see, as it does for a user whose Ruby came from ruby-build, a Docker image
# or a package.
#
# The toolchain's Ruby is not relocatable (configured without --enable-load-relative: its
# library and GC directories are absolute paths), so a copy of its prefix elsewhere would still
# read the original. Instead the gate runs in a private mount namespace (unshare -m), where
#   - the toolchain's source tree (MOSAIC_RUBY_SRC) is covered by an empty directory: the prefix
#     is all that is left of that Ruby;
#   - the Ruby's modular GC directory is covered by an empty scratch directory, so the install
#     lands there and the libraries the other gates test are neither read nor replaced;
# and in it:
#   1. `make install RUBY=<the prefix's ruby>` in a copy of the checkout's tracked files (no
#      build products) compiles and installs librubygc.mosaic.so;
#   2. no object of that build depends on a file outside Mosaic's sources and the prefix (the
#      compiler's -MMD lists);
#   3. the Ruby loads it (+GC[mosaic]) and runs test/smoke.rb, which needs nothing but Ruby;
#   4. with the source tree visible again (CRuby's test runner lives there) but the scratch GC
#      directory still in place, Mosaic's boot and API tests pass on that library.
# Nothing outside the namespace changes. Prints PASS/FAIL lines; exits 1 on any failure.
source "$(dirname "$0")/lib.sh"
PREFIX=$(cd "$(dirname "$MOSAIC_RUBY")/.." && pwd)

if [ "${1:-}" != --inside ]; then
  if ! unshare -m --propagation private true 2>/dev/null; then
    echo "FAIL  prefix gate: cannot make a private mount namespace (unshare -m needs root or CAP_SYS_ADMIN)"
    exit 1
  fi
  exec unshare -m --propagation private "$0" --inside
fi

scratch=$(mktemp -d)
trap 'umount "$MOSAIC_GC_DIR" 2>/dev/null || true; umount "$MOSAIC_RUBY_SRC" 2>/dev/null || true; rm -rf "$scratch"' EXIT
mkdir -p "$scratch/empty" "$scratch/gc" "$scratch/mosaic"
mount --bind "$scratch/empty" "$MOSAIC_RUBY_SRC"
mount --bind "$scratch/gc" "$MOSAIC_GC_DIR"
if [ -n "$(ls -A "$MOSAIC_RUBY_SRC")" ] || [ -n "$(ls -A "$MOSAIC_GC_DIR")" ]; then
  check_fail "the source tree or the GC directory is still visible"; echo "FAIL  prefix gate"; exit 1
fi

# 1. Build and install from the prefix alone.
(cd "$MOSAIC_ROOT" && git ls-files -z | tar --null -T - -cf -) | tar -C "$scratch/mosaic" -xf -
if make --no-print-directory -C "$scratch/mosaic" install RUBY="$MOSAIC_RUBY" >"$scratch/build.log" 2>&1 \
     && [ -f "$MOSAIC_GC_DIR/librubygc.mosaic.so" ]; then
  check_pass "make install RUBY=$PREFIX/bin/ruby, no source tree: $(tail -1 "$scratch/build.log")"
else
  check_fail "make install from the prefix alone"; tail -20 "$scratch/build.log"
fi

# 2. Every header the build read is Mosaic's or the prefix's (or the C library's).
outside=$(cat "$scratch"/mosaic/build/release/*/*.d 2>/dev/null | tr ' \\' '\n\n' | grep '^/' | sort -u |
          grep -v -e "^$scratch/mosaic/" -e "^$PREFIX/" -e '^/usr/' || true)
deps=$(cat "$scratch"/mosaic/build/release/*/*.d 2>/dev/null | tr ' \\' '\n\n' | grep "^$PREFIX/" | sort -u | wc -l)
if [ -z "$outside" ] && [ "$deps" -gt 0 ]; then
  check_pass "the build read $deps headers from the prefix and none from elsewhere"
else
  check_fail "headers from outside Mosaic and the prefix (or none from the prefix: $deps): $outside"
fi

# 3. It loads, and the smoke test passes.
if out=$(RUBY_GC_LIBRARY=mosaic "$MOSAIC_RUBY" "$scratch/mosaic/test/smoke.rb" 2>&1) && assert_gc_loads mosaic >/dev/null; then
  check_pass "loads +GC[mosaic] from the scratch GC directory; test/smoke.rb: $(tail -1 <<<"$out")"
else
  check_fail "smoke test: $(tail -5 <<<"$out")"
fi

# 4. Mosaic's boot and API tests on that library (the runner is CRuby's, from its source tree).
umount "$MOSAIC_RUBY_SRC"
if out=$(RUBY_GC_LIBRARY=mosaic "$MOSAIC_RUBY" "$MOSAIC_RUBY_SRC/tool/test/runner.rb" -q \
           "$scratch/mosaic/test/test_boot.rb" "$scratch/mosaic/test/test_api.rb" 2>&1) && grep -q '+GC\[mosaic\]' <<<"$out"; then
  check_pass "test_boot.rb and test_api.rb on that library: $(testall_summary <(echo "$out"))"
else
  check_fail "test_boot.rb and test_api.rb on that library"; tail -30 <<<"$out"
fi

[ $checks_failed = 0 ] && echo "PASS  prefix gate" || { echo "FAIL  prefix gate"; exit 1; }
