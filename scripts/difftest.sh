#!/usr/bin/env bash
# Differential stress test (test/diff/README.md): random programs over what a GC touches, run
# under default, mosaic and the checking build (mosaic_check, and mosaic_check_steps: incremental
# marking in steps of 64 slots; when installed); every output must
# equal default's. Runs the regression scripts in test/diff/regress/ first, then seeds.
#
#   scripts/difftest.sh                 the CI budget: seeds 1..$DIFFTEST_CI_SEEDS (about 3 minutes on 2 cores)
#   DIFFTEST_SEEDS=500..900 scripts/difftest.sh      those seeds
#   DIFFTEST_DURATION=600 scripts/difftest.sh        new seeds for 600 s (from DIFFTEST_START, default: the clock)
#   DIFFTEST_GCS=default,mosaic scripts/difftest.sh  other GCs (default is always the reference)
# Extra arguments go to test/diff/run.rb. Failures are saved under build/difftest/; shrink one
# with: $MOSAIC_RUBY test/diff/shrink.rb SEED mosaic
source "$(dirname "$0")/lib.sh"
DIFFTEST_CI_SEEDS=${DIFFTEST_CI_SEEDS:-240}
args=(--regress)
if [ -n "${DIFFTEST_DURATION:-}" ]; then
  start=${DIFFTEST_START:-$(date +%s)}
  args+=(--duration "$DIFFTEST_DURATION" --start "$start")
elif [ -n "${DIFFTEST_SEEDS:-}" ]; then
  case "$DIFFTEST_SEEDS" in
    *..*) args+=(--seeds "$DIFFTEST_SEEDS") ;;
    *) args+=(--count "$DIFFTEST_SEEDS" --start "${DIFFTEST_START:-1}") ;;
  esac
else
  args+=(--count "$DIFFTEST_CI_SEEDS" --start 1)
fi
[ -n "${DIFFTEST_GCS:-}" ] && args+=(--gcs "$DIFFTEST_GCS")
exec env RUBY_GC_LIBRARY=default "$MOSAIC_RUBY" "$MOSAIC_ROOT/test/diff/run.rb" "${args[@]}" "$@"
