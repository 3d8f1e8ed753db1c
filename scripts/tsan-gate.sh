#!/usr/bin/env bash
# The ThreadSanitizer gate: Mosaic's own suite (test/*.rb) on the checking build compiled with
# -fsanitize=thread (make install-tsan: librubygc.mosaic_tsan.so; this script installs
# nothing), libtsan preloaded, four GC threads and every mark parallel
# (MOSAIC_GC_THREADS=4 MOSAIC_PARALLEL_MARK_MIN=0), the background sweeper on (its default) for
# every lazy sweep, however small (MOSAIC_BACKGROUND_SWEEP_MIN_PAGES=0).
# Fails on any ThreadSanitizer report, in the runner or in any child Ruby (assert_separately's
# children inherit LD_PRELOAD and TSAN_OPTIONS; every process writes its reports to its own
# file under the log directory, log_path, so a child whose stderr a test ignores still fails
# the gate), on a failed test, or when the library loaded is not the TSan build.
# What TSan sees in this setup, and what it does not: docs/BUILDING.md, "ThreadSanitizer".
#
# Usage: scripts/tsan-gate.sh [--all | TEST_FILE...]
#   no argument   the files whose tests run the GC threads beside each other and beside the
#                 mutator: parallel marking (also with pushes failing: the mark-stack
#                 overflow), the background sweeper, incremental steps (shared with the
#                 markers), fork (threads stopped and restarted), weak references, compaction. The whole suite takes too long under TSan for CI (GC.stress
#                 collects at every allocation: test_stress.rb alone runs for many minutes).
#   --all         the whole suite (test/)
#   TEST_FILE...  those files (paths, or names under test/: test_weak.rb)
# Prints "PASS  mosaic suite under mosaic_tsan[, which files]: <summary> (<secs>s)" or FAIL lines
# with the reports; exits 0 or 1. MOSAIC_LOG_DIR (build/test-logs) holds tsan.log and tsan-reports/.
# TSAN_EXTRA_OPTIONS is appended to TSAN_OPTIONS (e.g. history_size=7 to restore more stacks).
source "$(dirname "$0")/lib.sh"
set +e

THREADS="test_parallel_mark.rb test_mark_overflow.rb test_bg_sweep.rb test_idle_trim.rb test_incremental.rb test_process.rb test_weak.rb test_compact.rb"
files=()
all=false
for arg in "$@"; do
  case "$arg" in
    --all) all=true ;;
    -*) echo "usage: $0 [--all | TEST_FILE...]" >&2; exit 2 ;;
    *) if [ -e "$arg" ]; then files+=("$(cd "$(dirname "$arg")" && pwd)/$(basename "$arg")")
       elif [ -e "$MOSAIC_ROOT/test/$arg" ]; then files+=("$MOSAIC_ROOT/test/$arg")
       else echo "$0: no test file $arg" >&2; exit 2; fi ;;
  esac
done
name="mosaic suite under mosaic_tsan"
if $all; then
  files=("$MOSAIC_ROOT/test")
elif [ ${#files[@]} -eq 0 ]; then
  name+=", GC-thread files"
  for f in $THREADS; do files+=("$MOSAIC_ROOT/test/$f"); done
else
  name+=", $(for f in "${files[@]}"; do basename "$f" .rb; done | paste -sd' ' -)"
fi

LOGS=${MOSAIC_LOG_DIR:-$MOSAIC_ROOT/build/test-logs}
log=$LOGS/tsan.log
reports=$LOGS/tsan-reports
mkdir -p "$LOGS"
rm -rf "$reports" && mkdir -p "$reports"
t=$(date +%s)
fail() { printf 'FAIL  %s\n' "$1"; [ -n "${2:-}" ] && sed 's/^/      | /' <<<"$2"; exit 1; }

libtsan=$(${CC:-cc} -print-file-name=libtsan.so)
[ -e "$libtsan" ] || fail "$name: no libtsan.so for ${CC:-cc} ($libtsan)"

# halt_on_error=0: every report of the run, not only the first. die_after_fork=0: Ruby forks
# with its timer thread running, and the child starts threads (TSan would kill it).
# allocator_may_return_null=1: a request over TSan's 1 TiB maximum returns NULL, as glibc's
# malloc does, for the NoMemoryError tests (else TSan reports allocation-size-too-big and
# aborts). history_size=4: one above the default, so more earlier accesses keep a stack. The
# suppressions are the VM's, each explained in the file. Reports go to $reports/tsan.<pid>.
supp=$MOSAIC_ROOT/test/tsan.supp
tsan_options="halt_on_error=0:die_after_fork=0:allocator_may_return_null=1:history_size=4:second_deadlock_stack=1"
# print_suppressions=0 (TSan's default here, said explicitly): matched suppressions print to the
# report files, and any output there fails the gate.
tsan_options+=":suppressions=$supp:print_suppressions=0"
[ -n "${TSAN_EXTRA_OPTIONS:-}" ] && tsan_options+=":$TSAN_EXTRA_OPTIONS"
tsan_env=(LD_PRELOAD="$libtsan" RUBY_GC_LIBRARY=mosaic_tsan)

# TSan maps its shadow memory at fixed addresses; with more address randomization than it
# expects (vm.mmap_rnd_bits above 28 on newer kernels) it dies with "unexpected memory
# mapping". Then every Ruby of the run goes without randomization (setarch -R, inherited by
# children).
run=()
probe() { env "${tsan_env[@]}" TSAN_OPTIONS="$tsan_options" "${run[@]}" "$MOSAIC_RUBY" -e 'print GC::OPTS.join(" ")' 2>&1; }
opts=$(probe)
if [[ "$opts" == *"unexpected memory mapping"* ]]; then
  run=(setarch "$(uname -m)" -R)
  opts=$(probe)
fi
[[ " $opts " == *" MOSAIC_TSAN "* ]] || fail "$name: the library is not the TSan build (make install-tsan; GC::OPTS: $opts)"

env "${tsan_env[@]}" TSAN_OPTIONS="$tsan_options:log_path=$reports/tsan" MOSAIC_GC_THREADS=4 MOSAIC_PARALLEL_MARK_MIN=0 MOSAIC_BACKGROUND_SWEEP_MIN_PAGES=0 RUBY_TEST_TIMEOUT_SCALE=${RUBY_TEST_TIMEOUT_SCALE:-5} \
  MOSAIC_EXPECT_GC=mosaic "${run[@]}" "$MOSAIC_RUBY" "$MOSAIC_RUBY_SRC/tool/test/runner.rb" -q "${files[@]}" >"$log" 2>&1
rc=$?; sum=$(testall_summary "$log")
secs=$(( $(date +%s)-t ))

# TSan writes nothing else to the files under $reports (log_path): any of them fails the gate,
# whatever it holds: a report ("WARNING: ThreadSanitizer: data race", lock-order inversion,
# use of a destroyed mutex...), or TSan giving up ("ThreadSanitizer: dup thread with used id"
# in a forked child, a CHECK failure). The runner's own log is searched for the same lines in
# case a process wrote to stderr (skip messages name ThreadSanitizer too, so not any mention).
pattern='(WARNING|ERROR|FATAL): ThreadSanitizer|==ThreadSanitizer: |ThreadSanitizer: CHECK failed|ThreadSanitizer:DEADLYSIGNAL'
bad=$( { ls "$reports"/tsan.* 2>/dev/null; grep -qaE "$pattern" "$log" && echo "$log"; } )
if [ -n "$bad" ]; then
  n=$(cat $bad | grep -caE "$pattern")
  # Each distinct report once (its SUMMARY line, with how often), then the first one whole.
  fail "$name: $n ThreadSanitizer report(s) in $(wc -w <<<"$bad") file(s); ${sum:-no summary} (${secs}s; log $log, reports $reports)" \
    "$(cat $bad | grep -aE "^SUMMARY: ThreadSanitizer|^(ERROR|FATAL): ThreadSanitizer|==ThreadSanitizer: |CHECK failed" | sort | uniq -c | sort -rn | head -20
       echo; cat $bad | awk '/^==================$/ { if (seen) exit; next } /ThreadSanitizer/ { seen = 1 } seen' | head -60)"
fi
if [ $rc = 0 ] && [ -n "$sum" ]; then
  printf 'PASS  %s: %s (%ss)\n' "$name" "$sum" "$secs"
else
  fail "$name: ${sum:-no summary}, exit $rc (${secs}s; log $log)" \
    "$(grep -aE -A12 '^ +[0-9]+\) (Failure|Error|Timeout):' "$log" | head -60; tail -5 "$log")"
fi
