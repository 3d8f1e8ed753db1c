#!/usr/bin/env bash
# The C unit tests' runner (make test-c builds the binaries, then calls this with them): runs
# each, prints its closing line indented (and everything it printed when it failed), and ends
# with one line, "C unit tests: N checks in M files, F failed". A binary that exits non-zero
# without its closing line (a crash, a sanitizer report, rb_bug's stub, a hang past
# TEST_C_TIMEOUT seconds, 300 by default) counts as one failure.
# Exits 1 when anything failed. The binaries are plain executables and need no Ruby; the drift
# test, test/c/abi_check.sh, is run the same way and prints the same closing line.
set -uo pipefail
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
checks=0; failed=0; files=0
for bin in "$@"; do
  files=$((files+1))
  out=$(timeout "${TEST_C_TIMEOUT:-300}" "$bin" 2>&1); rc=$?
  [ $rc = 124 ] && out+=$'\n'"timed out after ${TEST_C_TIMEOUT:-300} s"
  line=$(grep -E '^[^ ]+: [0-9]+ checks, [0-9]+ failed$' <<<"$out" | tail -1)
  if [ -n "$line" ]; then
    n=$(sed -E 's/.*: ([0-9]+) checks, ([0-9]+) failed$/\1/' <<<"$line")
    f=$(sed -E 's/.*: ([0-9]+) checks, ([0-9]+) failed$/\2/' <<<"$line")
  else
    n=0; f=0; line="$bin: no summary (exit status $rc)"
  fi
  [ $rc != 0 ] && [ "$f" = 0 ] && f=1
  checks=$((checks+n)); failed=$((failed+f))
  echo "  $line"
  [ $rc != 0 ] && sed 's/^/    | /' <<<"$out"
done
echo "C unit tests: $checks checks in $files files, $failed failed"
[ $failed = 0 ]
