#!/usr/bin/env bash
# The GC-frequency stress gate: the checking build (assertions, heap verification) installed as
# librubygc.mosaic_check.so, with MOSAIC_STRESS_MINOR=N forcing a collection every N allocations
# (minor unless the pacer asks for a major), runs
#   1. Mosaic's own suite (test/*.rb), and
#   2. CRuby's GC-critical test-all files (test/gates.txt), with test/excludes/mosaic and
#      test/excludes/stress (tests that count collections or read the library's name), with
#      every major GC the pacer starts marking in steps (MOSAIC_STRESS_INCREMENTAL=64).
# Both parts run two test processes at once (-j2; the parallel runner counts each skip twice in
# its summary), and every timeout is scaled (below).
# Prints one line per part; exits non-zero if either has a failure, an error or a [BUG].
# Usage: scripts/stress-gate.sh [unit|testall]...   (both by default); MOSAIC_STRESS_N sets N.
source "$(dirname "$0")/lib.sh"
set +e
N=${MOSAIC_STRESS_N:-1000}
LOGS=${MOSAIC_LOG_DIR:-$MOSAIC_ROOT/build/test-logs}
PARTS=${*:-unit testall}
mkdir -p "$LOGS"
rc_all=0
export MOSAIC_STRESS_MINOR=$N RUBY_GC_LIBRARY=mosaic_check MOSAIC_EXPECT_GC=mosaic
# Every collection marks on two threads (MOSAIC_PARALLEL_MARK_MIN=0) and every lazy sweep has the
# background sweeper beside it (MOSAIC_BACKGROUND_SWEEP_MIN_PAGES=0), so the heap checker runs
# after both; the serial marker and sweeper are what the release-build gates run below the thresholds.
export MOSAIC_GC_THREADS=${MOSAIC_GC_THREADS:-2} MOSAIC_PARALLEL_MARK_MIN=${MOSAIC_PARALLEL_MARK_MIN:-0}
export MOSAIC_BACKGROUND_SWEEP_MIN_PAGES=${MOSAIC_BACKGROUND_SWEEP_MIN_PAGES:-0}
# A verified collection every N allocations makes allocation-heavy child scripts several times
# slower than their timeouts assume (TestObjectSpace#test_finalizer defines a million finalizers
# in 60 s): scale every timeout, as CRuby's CI does for its valgrind and sanitizer builds
# (EnvUtil.apply_timeout_scale reads RUBY_TEST_TIMEOUT_SCALE).
export RUBY_TEST_TIMEOUT_SCALE=${RUBY_TEST_TIMEOUT_SCALE:-5}
# The checking build names itself "mosaic" (ruby -v shows +GC[mosaic]); ask it for its checks.
"$MOSAIC_RUBY" -e 'exit(GC::OPTS.include?("MOSAIC_CHECK"))' 2>/dev/null ||
  { echo "stress gate FAILED: librubygc.mosaic_check.so does not load as the checking build (make install-check)"; exit 1; }

for part in $PARTS; do
  t=$(date +%s)
  case $part in
    unit)
      log=$LOGS/stress-unit.log
      "$MOSAIC_RUBY" "$MOSAIC_RUBY_SRC/tool/test/runner.rb" -j2 -q "$MOSAIC_ROOT/test" >"$log" 2>&1
      rc=$? ;;
    testall)
      # The pacer's majors mark in steps of 64 slots here (the unit part keeps them whole):
      # the forced collections land between steps, and the checker checks the tri-color
      # invariant every 8th step.
      export MOSAIC_STRESS_INCREMENTAL=${MOSAIC_STRESS_INCREMENTAL:-64}
      log=$LOGS/stress-testall.log
      tests=$(grep -v '^#' "$MOSAIC_ROOT/test/gates.txt" | grep . | tr '\n' ' ')
      (cd "$MOSAIC_RUBY_SRC" && make test-all TESTS="$tests" \
        TESTOPTS="-j2 -q --excludes-dir=$MOSAIC_ROOT/test/excludes/mosaic:$MOSAIC_ROOT/test/excludes/stress") >"$log" 2>&1
      rc=$? ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
  sum=$(testall_summary "$log")
  if [ $rc = 0 ] && [ -n "$sum" ] && ! grep -q '\[BUG\]' "$log"; then
    echo "stress gate ($part, mosaic_check, a GC every $N allocations): $sum ($(( $(date +%s) - t ))s)"
  else
    rc_all=1
    echo "stress gate ($part, mosaic_check, a GC every $N allocations) FAILED: ${sum:-no summary} (log $log)"
    grep -a -E '^ +[0-9]+\) (Failure|Error|Timeout):' -A3 "$log" | head -40 | sed 's/^/  /'
    grep -a '\[BUG\]' "$log" | head -5 | sed 's/^/  /'
  fi
done
exit $rc_all
