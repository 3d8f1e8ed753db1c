#!/usr/bin/env bash
# The race gate: the GC threads truly running beside the mutator, with the hand-overs between
# them stretched at random (MOSAIC_STRESS_RACES, src/debug/stress_races.c), on the checking build
# (assertions, heap verification after every GC, the tri-color and re-grey queue checks between
# incremental steps). Four GC threads, every mark parallel (MOSAIC_PARALLEL_MARK_MIN=0), the
# background sweeper on. Runs
#   1. unit: Mosaic's own suite (test/*.rb), one test process (the GC threads get the cores);
#   2. diff: the differential tester (test/diff/run.rb) over seeds 1..$RACE_DIFF_SEEDS and the
#      regression scripts, under mosaic_check_races and mosaic_check_steps_races (the same,
#      with every pacer major and GC.start(immediate_mark: false) marking in steps of 64
#      slots); it fails if the run did not exercise the mechanisms it is for (--require-reach,
#      RACE_REQUIRE_REACH).
# The gate also fails when race mode injected nothing (GC.stat(:mosaic_race_delays) is 0).
# Usage: scripts/race-gate.sh [unit|diff]...   (both by default); MOSAIC_STRESS_RACES sets the
# longest delay in microseconds (default 50); RACE_DIFF_SEEDS the seeds (default 60).
source "$(dirname "$0")/lib.sh"
set +e
LOGS=${MOSAIC_LOG_DIR:-$MOSAIC_ROOT/build/test-logs}
PARTS=${*:-unit diff}
SEEDS=${RACE_DIFF_SEEDS:-60}
# What the differential part must have exercised under both variants (test/diff/README.md,
# "Reach"): race delays, marks in steps and their parallel steps, parallel marks, background
# sweeps, compactions, forks; re-greys where the steps are small enough to meet bulk writes.
REACH=${RACE_REQUIRE_REACH:-race_delays,incremental_marks,steps,parallel_marks,parallel_steps,bg_sweeps,compactions,forks,mosaic_check_steps_races:regreys}
mkdir -p "$LOGS"
rc_all=0
export MOSAIC_STRESS_RACES=${MOSAIC_STRESS_RACES:-50}
export MOSAIC_GC_THREADS=4 MOSAIC_PARALLEL_MARK_MIN=0 MOSAIC_BACKGROUND_SWEEP=1 MOSAIC_BACKGROUND_SWEEP_MIN_PAGES=0
# Each hand-over may wait up to MOSAIC_STRESS_RACES us and every GC is verified: scale timeouts.
export RUBY_TEST_TIMEOUT_SCALE=${RUBY_TEST_TIMEOUT_SCALE:-5}

delays=$(RUBY_GC_LIBRARY=mosaic_check "$MOSAIC_RUBY" -e '
  abort "not the checking build: #{GC::OPTS.inspect}" unless GC::OPTS.include?("MOSAIC_CHECK")
  a = []; 300.times { a << Array.new(100) { |i| "r#{i}" }; a.shift if a.size > 40 }; GC.start
  print GC.stat(:mosaic_race_delays)' 2>&1)
if ! [[ "$delays" =~ ^[0-9]+$ ]] || [ "$delays" = 0 ]; then
  echo "race gate FAILED: race mode injects no delay on librubygc.mosaic_check.so (make install-check): $delays"
  exit 1
fi

for part in $PARTS; do
  t=$(date +%s)
  case $part in
    unit)
      log=$LOGS/race-unit.log
      RUBY_GC_LIBRARY=mosaic_check MOSAIC_EXPECT_GC=mosaic \
        "$MOSAIC_RUBY" "$MOSAIC_RUBY_SRC/tool/test/runner.rb" -q "$MOSAIC_ROOT/test" >"$log" 2>&1
      rc=$?
      sum=$(testall_summary "$log")
      if [ $rc = 0 ] && [ -n "$sum" ] && grep -q '+GC\[mosaic\]' "$log" && ! grep -q '\[BUG\]' "$log"; then
        echo "race gate (unit, mosaic_check, delays up to ${MOSAIC_STRESS_RACES} us, 4 GC threads): $sum ($(( $(date +%s) - t ))s)"
      else
        rc_all=1
        echo "race gate (unit) FAILED: ${sum:-no summary} (log $log)"
        grep -a -E '^ +[0-9]+\) (Failure|Error|Timeout):' -A3 "$log" | head -40 | sed 's/^/  /'
        grep -a '\[BUG\]' "$log" | head -5 | sed 's/^/  /'
      fi ;;
    diff)
      log=$LOGS/race-diff.log
      RUBY_GC_LIBRARY=default "$MOSAIC_RUBY" "$MOSAIC_ROOT/test/diff/run.rb" --regress --quiet \
        --count "$SEEDS" --start 1 --timeout 300 --gcs default,mosaic_check_races,mosaic_check_steps_races \
        --require-reach "$REACH" >"$log" 2>&1
      rc=$?
      last=$(grep '^difftest:' "$log" | tail -1)
      if [ $rc = 0 ] && [ -n "$last" ]; then
        echo "race gate (diff, mosaic_check_races and mosaic_check_steps_races): ${last#difftest: }"
        grep '^reach ' "$log" | sed 's/^/  /'
      else
        rc_all=1
        echo "race gate (diff) FAILED: ${last:-no summary} (log $log)"
        grep -v '^ok ' "$log" | tail -30 | sed 's/^/  /'
      fi ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
exit $rc_all
