#!/usr/bin/env bash
# Runs CRuby's whole test-all with -j2 under one GC library and writes a summary file:
# tests, assertions, failures, errors, skips, and the names of failing tests.
# Usage: scripts/test-all-full.sh GC   (writes build/test-all-GC.log and build/test-all-GC.summary)
source "$(dirname "$0")/lib.sh"
gc=${1:?usage: test-all-full.sh GC_NAME}
mkdir -p "$MOSAIC_ROOT/build"
log=$MOSAIC_ROOT/build/test-all-$gc.log
summary=$MOSAIC_ROOT/build/test-all-$gc.summary
excl=""
[ -d "$MOSAIC_ROOT/test/excludes/$gc" ] && excl="--excludes-dir=$MOSAIC_ROOT/test/excludes/$gc"
assert_gc_loads "$gc"
start=$(date +%s)
set +e
(cd "$MOSAIC_RUBY_SRC" && RUBY_GC_LIBRARY=$gc make test-all TESTOPTS="-j2 -q $excl") >"$log" 2>&1
rc=$?
set -e
{
  echo "gc: $gc"
  echo "ruby: $(RUBY_GC_LIBRARY=$gc "$MOSAIC_RUBY" -v)"
  echo "exit status: $rc; wall time: $(( $(date +%s) - start )) s"
  echo "summary: $(testall_summary "$log")"
  echo "excludes: ${excl:-none}"
  echo "failing tests:"
  testall_failures "$log" | sed 's/^/  /'
  grep -q '\[BUG\]' "$log" && { echo "crashes ([BUG] lines):"; grep '\[BUG\]' "$log" | sed 's/^/  /'; }
  true
} >"$summary"
cat "$summary"
