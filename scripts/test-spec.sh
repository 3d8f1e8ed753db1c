#!/usr/bin/env bash
# Runs ruby/spec (`make test-spec` in the Ruby tree, mspec -j: one child per core) under each GC
# and gates Mosaic on it.
#
# Usage: scripts/test-spec.sh [GC...]          (default: default mosaic)
#   Writes build/test-spec-GC.log and build/test-spec-GC.summary per GC. Prints ONE line and
#   exits 0 iff every run
#     - really ran on GC (test/spec-excludes/all.mspec makes mspec and each child report
#       GC.config[:implementation]; RUBY_DESCRIPTION is faked there) and ended with its
#       "N files, N examples, ..." tally;
#     - finished within MOSAIC_SPEC_TIMEOUT seconds (1200) with no example over 300 s, and
#       shows no "[BUG]" and no dead mspec child (a crash ends the run early);
#     - and, for every GC but default, has no failure or error that is neither a failure of the
#       default run of this invocation nor listed in test/known-failures/spec.txt (the reviewed
#       list of failures that also happen under the default GC, each with its reason).
#   test/spec-excludes/GC.mspec, when it exists, is loaded as an extra mspec config (exclusions,
#   each with its reason). Extra mspec options: MOSAIC_MSPECOPT.
main() {
  source "$(dirname "$0")/lib.sh"
  local gcs=("$@"); [ ${#gcs[@]} = 0 ] && gcs=(default mosaic)
  local known_file=$MOSAIC_ROOT/test/known-failures/spec.txt
  mkdir -p "$MOSAIC_ROOT/build"
  local known bad
  bad=$(grep -vE '^[[:space:]]*(#|$)' "$known_file" | grep -vE '.  # .*[^ ]' || true)
  [ -z "$bad" ] || result FAIL "entries without a reason in $known_file: $bad"
  known=$(grep -vE '^[[:space:]]*(#|$)' "$known_file" | sed 's/  # .*//' | sort -u || true)

  local gc log summary opts rc t secs tally fails base extra crashes msg ran_on newdef parts=() total=0 default_fails=""
  for gc in "${gcs[@]}"; do
    log=$MOSAIC_ROOT/build/test-spec-$gc.log
    summary=$MOSAIC_ROOT/build/test-spec-$gc.summary
    msg=$(assert_gc_loads "$gc") || result FAIL "$gc: GC library does not load: $msg"
    opts="-j --timeout 300 -B $MOSAIC_ROOT/test/spec-excludes/all.mspec ${MOSAIC_MSPECOPT:-}"
    [ -f "$MOSAIC_ROOT/test/spec-excludes/$gc.mspec" ] && opts="$opts -B $MOSAIC_ROOT/test/spec-excludes/$gc.mspec"
    t=$(date +%s)
    set +e
    # mspec's --timeout ends a child stuck in one example; timeout(1) a stuck parent.
    (cd "$MOSAIC_RUBY_SRC" && RUBY_GC_LIBRARY=$gc timeout -k 30 "${MOSAIC_SPEC_TIMEOUT:-1200}" make test-spec MSPECOPT="$opts") >"$log" 2>&1
    rc=$?
    set -e
    secs=$(( $(date +%s) - t )); total=$((total + secs))
    tally=$(grep -E '^[0-9]+ files?, [0-9]+ examples?, ' "$log" | tail -1 || true)
    fails=$(spec_failures "$log")
    crashes=$(grep -nE '\[BUG\]|A child mspec-run process|Segmentation fault|took longer than the configured timeout' "$log" | head -5 || true)
    [ "$rc" != 124 ] || crashes="timed out after ${MOSAIC_SPEC_TIMEOUT:-1200} s (MOSAIC_SPEC_TIMEOUT); $crashes"
    {
      echo "gc: $gc"
      echo "ruby: $(RUBY_GC_LIBRARY=$gc "$MOSAIC_RUBY" -v)"
      echo "mspec options: $opts"
      echo "exit status: $rc; wall time: $secs s"
      echo "tally: ${tally:-none}"
      echo "failing specs:"
      echo "$fails" | grep . | sed 's/^/  /' || true
      [ -n "$crashes" ] && { echo "crashes:"; echo "$crashes" | sed 's/^/  /'; }
      true
    } >"$summary"
    # all.mspec makes mspec and each child print the GC it runs on (RUBY_DESCRIPTION cannot tell).
    ran_on=$(grep -oE '^mspec process runs on GC\[[^]]*\]' "$log" | sort | uniq -c | tr -s ' ' | tr '\n' ';' || true)
    [ "$(grep -cE "^mspec process runs on GC\[$gc\]" "$log" || true)" -ge 2 ] && [ -z "$(grep -E '^mspec process runs on GC' "$log" | grep -v "GC\[$gc\]" || true)" ] \
      || result FAIL "$gc: did not run on GC[$gc] only, processes: ${ran_on:-none} (log $log)"
    [ -n "$tally" ] || result FAIL "$gc: no tally, exit status $rc (log $log): $(tail -3 "$log" | tr '\n' ' ')"
    [ -z "$crashes" ] || result FAIL "$gc: $tally; crash: $(echo "$crashes" | tr '\n' ' ') (log $log)"
    if [ "$gc" = default ]; then
      default_fails=$fails
      newdef=$(comm -23 <(echo "$fails" | grep . | sort -u || true) <(echo "$known") | grep -c . || true)
      [ "$newdef" = 0 ] || tally="$tally, $newdef not in spec.txt"
    else
      base=$(printf '%s\n' "$known" "$default_fails" | grep . | sort -u || true)
      extra=$(comm -23 <(echo "$fails" | grep . | sort -u || true) <(echo "$base"))
      [ -z "$extra" ] || result FAIL "$gc: $tally; failures default lacks: $(echo "$extra" | sed 's/$/;/' | tr '\n' ' ')(log $log, summary $summary)"
    fi
    parts+=("$gc: $tally (${secs}s)")
  done
  result PASS "$(IFS='|'; echo "${parts[*]}" | sed 's/|/; /g'); no failure that default lacks (${total}s)"
}

# Descriptions of failing/erroring specs: after each "N)" header (and an optional "An exception
# occurred during: ..." line), the line ending in " FAILED" or " ERROR", without that word.
spec_failures() {
  awk '/^[0-9]+\)$/ { hdr=3; next }
       hdr && / (FAILED|ERROR)$/ { sub(/ (FAILED|ERROR)$/, ""); print; hdr=0; next }
       hdr { hdr-- }' "$1" | sort -u
}

result() {
  echo "$1 ruby/spec: $2"
  [ "$1" = PASS ]; exit
}

main "$@"
