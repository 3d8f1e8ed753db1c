#!/usr/bin/env bash
# Runs CRuby's whole test-all with -j2 under one GC library, with test/excludes/GC/ (the reviewed
# exclusion list) when it exists.
#
# Usage: scripts/test-all-full.sh GC [--gate]
#   Writes build/test-all-GC.log and build/test-all-GC.summary (tests, assertions, failures,
#   errors, skips, the names of failing tests, tests that failed once and passed on retry, crashes).
#   Without --gate it prints the summary file.
#   With --gate (the CI gate) it prints ONE line and exits 0 iff the run
#     - really ran on +GC[GC] and ended with a summary of at least MOSAIC_TESTALL_MIN_TESTS tests
#       (31000: the whole suite is ~32,240 tests, or ~31,330 when one worker loads
#       test/prism/api/lex_test.rb before test/prism/lex_test.rb: the second file only reopens
#       Prism::LexTest, which the runner does not run again, so its ~916 tests are not run,
#       under any GC; a crashed worker ends the run early);
#     - finished within MOSAIC_TESTALL_TIMEOUT seconds (2400), and shows no "[BUG]", no crashed
#       test worker and no hung test case (a GC bug shows this way);
#     - has no failure or error, final or on the first (parallel) pass, that is not listed in
#       test/known-failures/test-all.txt, the reviewed list of failures that also happen under
#       the default GC, each with its reason.
#   Listed failures that did not happen are reported, not failed (as non-root they pass).
# MOSAIC_TESTALL_OPTS adds test-all options (e.g. -v to list every test); MOSAIC_TESTALL_REUSE_LOG=1
# judges the existing build/test-all-GC.log instead of running; MOSAIC_TESTALL_KNOWN names
# another list of known failures.
# The body is one block so that editing this file while it runs cannot change what runs.
{
source "$(dirname "$0")/lib.sh"
gc=${1:?usage: test-all-full.sh GC_NAME [--gate]}
gate=false; [ "${2:-}" = --gate ] && gate=true
min_tests=${MOSAIC_TESTALL_MIN_TESTS:-31000}
limit=${MOSAIC_TESTALL_TIMEOUT:-2400}
known_file=${MOSAIC_TESTALL_KNOWN:-$MOSAIC_ROOT/test/known-failures/test-all.txt}
mkdir -p "$MOSAIC_ROOT/build"
log=$MOSAIC_ROOT/build/test-all-$gc.log
summary=$MOSAIC_ROOT/build/test-all-$gc.summary
excl=""
[ -d "$MOSAIC_ROOT/test/excludes/$gc" ] && excl="--excludes-dir=$MOSAIC_ROOT/test/excludes/$gc"

gate_result() { # status message
  echo "$1 whole test-all under $gc: $2"
  [ "$1" = PASS ]; exit
}

if ! msg=$(assert_gc_loads "$gc"); then
  $gate && gate_result FAIL "GC library does not load: $msg"
  echo "$msg"; exit 1
fi

# Names in the reviewed list; every entry must carry its reason.
known_names() {
  local bad
  bad=$(grep -vE '^[[:space:]]*(#|$)' "$known_file" | grep -vE '^[^ ]+  # .*[^ ]' || true)
  if [ -n "$bad" ]; then echo "entries without a reason in $known_file: $bad" >&2; return 1; fi
  grep -vE '^[[:space:]]*(#|$)' "$known_file" | sed 's/  # .*//' | sort -u
}
# Tests that failed on the first, parallel pass ("Failed tests:" block before "Retrying...").
# (An omitted test can be listed there as "PendedError"; it is not a failure.)
first_pass_failures() {
  sed -n '/^Failed tests:$/,/^Retrying\.\.\.$/p' "$log" | grep -v ': Test::Unit::PendedError' |
    grep -oE '^[A-Za-z0-9_:]+#[^ ]+: ' | sed 's/: $//' | sort -u || true
}
# Failures whose report the parent runner could not read: a worker's result that names an
# exception class the runner has not loaded (OpenSSL::SSL::SSLError, Socket::ResolutionError)
# makes it print "unknown object: <dump>" and drop the whole suite's result, failures included.
# Decodes those dumps (defining the missing classes) and prints each failing test, sorted.
lost_failures() {
  grep -q 'unknown object: ' "$log" || return 0
  "$MOSAIC_RUBY" --disable-gems -e '
    def define_missing(path)
      parent = Object
      names = path.split("::")
      names.each_with_index do |n, i|
        parent = if parent.const_defined?(n, false) then parent.const_get(n, false)
                 elsif i == names.size - 1 then parent.const_set(n, Class.new(StandardError))
                 else parent.const_set(n, Module.new) end
      end
    end
    ARGF.read.scan(/unknown object: ("(?:[^"\\]|\\.)*")/) do |(dumped)|
      data = dumped.undump
      r = nil
      20.times do
        r = Marshal.load(data)
        break
      rescue ArgumentError => e
        e.message =~ /undefined class\/module (\S+)/ or raise
        define_missing($1)
      end
      Array(r && r[2]).each do |suite, meth, exc|
        puts "#{suite}##{meth}" unless exc.class.name.to_s.end_with?("PendedError")
      end
    end' "$log" | sort -u
}
crash_lines() {
  grep -nE '\[BUG\]|A test worker crashed|Retrying hung up testcases|Some worker was crashed|Segmentation fault' "$log" | head -20 || true
}

# The first "[BUG]" report of the log: its first line and its C backtrace (at most 30 frames,
# paths shortened to the file name).
crash_report() {
  awk '/\[BUG\]/ && !seen { seen = 1; print; next }
       seen && /^-- C level backtrace information/ { bt = 1; print; next }
       bt && (/^-- / || /^$/ || ++n > 30) { exit }
       bt { print }' "$log" | sed -E 's#(^| )[^ ]*/([^/ ]+)#\1\2#g'
}

start=$(date +%s)
if [ "${MOSAIC_TESTALL_REUSE_LOG:-}" = 1 ] && [ -f "$log" ]; then
  rc=reused  # re-judge the last run's log without running the suite again
else
  set +e
  # A deadlocked runner (it runs on the GC under test too) must not hang CI: kill the group.
  (cd "$MOSAIC_RUBY_SRC" && RUBY_GC_LIBRARY=$gc timeout -k 30 "$limit" make test-all TESTOPTS="-j2 -q $excl ${MOSAIC_TESTALL_OPTS:-}") >"$log" 2>&1
  rc=$?
  set -e
fi
secs=$(( $(date +%s) - start ))
sum=$(testall_summary "$log" || true)
lost=$(lost_failures || echo "LOST-RESULTS-UNREADABLE#see_log")
final=$(printf '%s\n' "$(testall_failures "$log")" "$lost" | grep . | sort -u || true)
first=$(first_pass_failures)
flaky=$(comm -23 <(echo "$first" | grep . || true) <(echo "$final" | grep . || true))
crashes=$(crash_lines)
{
  echo "gc: $gc"
  echo "ruby: $(RUBY_GC_LIBRARY=$gc "$MOSAIC_RUBY" -v)"
  echo "exit status: $rc; wall time: $secs s"
  echo "summary: ${sum:-none}"
  echo "excludes: ${excl:-none}"
  echo "failing tests:"
  echo "$final" | grep . | sed 's/^/  /' || true
  if [ -n "$lost" ]; then echo "of which reported only in results the runner dropped (\"unknown object\"):"; echo "$lost" | sed 's/^/  /'; fi
  if [ -n "$flaky" ]; then echo "failed on the first pass, passed on retry:"; echo "$flaky" | sed 's/^/  /'; fi
  if [ -n "$crashes" ]; then echo "crashes / hangs (log lines):"; echo "$crashes" | sed 's/^/  /'; fi
  true
} >"$summary"
$gate || { cat "$summary"; exit 0; }

# --- the gate ---
known=$(known_names) || gate_result FAIL "bad $known_file"
[ "$rc" != 124 ] || gate_result FAIL "timed out after $limit s (MOSAIC_TESTALL_TIMEOUT) (log $log): $(tail -3 "$log" | tr '\n' ' ')"
grep -q "+GC\[$gc\]" "$log" || gate_result FAIL "did not run on +GC[$gc] (log $log)"
[ -n "$sum" ] || gate_result FAIL "no summary, exit status $rc (log $log): $(tail -3 "$log" | tr '\n' ' ')"
ntests=$(awk '{print $1}' <<<"$sum")
[ "$ntests" -ge "$min_tests" ] || gate_result FAIL "$sum; only $ntests tests ran, expected >= $min_tests (log $log)"
if [ -n "$crashes" ]; then
  # CI keeps only this script's output: show the first crash's C backtrace, so that a crash
  # seen once can be read without the log.
  crash_report | sed 's/^/  /'
  gate_result FAIL "$sum; crash or hang: $(echo "$crashes" | head -3 | tr '\n' ' ') (log $log)"
fi
extra=$(comm -23 <(printf '%s\n' "$final" "$first" | grep . | sort -u || true) <(echo "$known"))
missing=$(comm -13 <(echo "$final" | grep . | sort -u || true) <(echo "$known") | wc -l)
note=""; [ "$missing" -gt 0 ] && note="; $missing listed failure(s) did not occur"
[ -n "$lost" ] && note="$note; $(echo "$lost" | wc -l) more failure(s) found in results the runner dropped, all listed"
[ -n "$flaky" ] && note="$note; passed on retry: $(echo "$flaky" | tr '\n' ' ')"
if [ -n "$extra" ]; then
  gate_result FAIL "$sum; not in test/known-failures/test-all.txt: $(echo "$extra" | tr '\n' ' ')(log $log) ($secs s)"
fi
gate_result PASS "$sum; no failure outside test/known-failures/test-all.txt$note ($secs s)"
exit
}
