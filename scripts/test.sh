#!/usr/bin/env bash
# The README's test command. Runs, in order:
#   1. the C unit tests of the collector's pure parts (make test-c: test/c/; no Ruby process,
#      only Ruby's headers) -- scripts/test-c.sh;
#   2. the Ruby toolchain check (built, and each GC library loads: +GC[name]);
#   3. Mosaic's own suite (test/*.rb) under mosaic, and under default to prove the suite;
#   4. CRuby's bootstraptest in full, under default and mosaic;
#   5. CRuby's whole test-all under mosaic (-j2, test/excludes/mosaic): no failure, error,
#      crash or hang that is not in test/known-failures/test-all.txt (failures that also happen
#      under the default GC, each with its reason) -- scripts/test-all-full.sh mosaic --gate;
#   6. ruby/spec under default and mosaic: no failure default lacks -- scripts/test-spec.sh;
#   7. the differential stress tester: regression scripts and a fixed budget of random seeds,
#      same output under default, mosaic and the checking build -- scripts/difftest.sh;
#   8. the compaction gate: the GC-critical test-all files (test/gates.txt) under mosaic with
#      GC.auto_compact = true from the start of every Ruby (test/auto_compact_on.rb), less the
#      reviewed exclusions of test/excludes/compact;
#   9. the stress gate: Mosaic's suite and the GC-critical test-all files on the checking build
#      with a collection forced every 1000 allocations -- scripts/stress-gate.sh;
#  10. the sanitizer gate: Mosaic's suite on the checking build compiled with AddressSanitizer
#      and UBSan (make install-asan: librubygc.mosaic_asan.so), four GC threads marking in
#      parallel, no report;
#  11. the race gate: Mosaic's suite and the differential tester on the checking build with
#      four GC threads, the background sweeper on, and every hand-over between them and the
#      mutator delayed at random (MOSAIC_STRESS_RACES) -- scripts/race-gate.sh;
#  12. the ThreadSanitizer gate: the suite's files that run the GC threads beside each other and
#      the mutator, on the checking build compiled with -fsanitize=thread (make install-tsan:
#      librubygc.mosaic_tsan.so), no report -- scripts/tsan-gate.sh;
#  13. the gem gate: the mosaic-gc gem built, installed (as librubygc.mosaic_gem.so), loaded and
#      uninstalled, and make install's refusals -- scripts/gem-gate.sh;
#  14. the server gate: Puma in cluster mode (2 workers, preload_app!, Process.warmup) serves the
#      bench's Rails app over loopback under mosaic and default, every answer and the serving GC
#      checked, no restart, exit 0 on SIGTERM; then Sidekiq on a private redis-server runs 400
#      jobs under each GC, every result checked, exit 0 on SIGTERM (bench/setup.sh first if the
#      gems or redis-server are missing) -- scripts/server-gate.sh;
#  15. the prefix gate: make install RUBY=... from the toolchain's installed prefix alone (its
#      source tree hidden in a private mount namespace), loaded, test/smoke.rb and the boot and
#      API tests passed -- scripts/prefix-gate.sh.
# Prints one line per gate and a closing "N passed, N failed" line; exits non-zero on failure.
# MOSAIC_GATES chooses gates (default "ctest unit btest gem prefix server testall-full spec diff compact stress asan races tsan"; "testall" is
# the GC-critical test-all files under default and mosaic, a quicker subset of testall-full);
# MOSAIC_GCS="default mosaic" the GCs for the unit, btest and testall gates; MOSAIC_COMPACT_GC
# (mosaic) the library of the compact gate.
source "$(dirname "$0")/lib.sh"
set +e
GATES=${MOSAIC_GATES:-"ctest unit btest gem prefix server testall-full spec diff compact stress asan races tsan"}
GCS=${MOSAIC_GCS:-"default mosaic"}
LOGS=${MOSAIC_LOG_DIR:-$MOSAIC_ROOT/build/test-logs}
mkdir -p "$LOGS"
passed=0; failed=0; failed_names=()
pass() { passed=$((passed+1)); printf 'PASS  %s\n' "$1"; }
fail() { failed=$((failed+1)); failed_names+=("$1"); printf 'FAIL  %s\n' "$1"; [ -n "${2:-}" ] && sed 's/^/      | /' <<<"$2"; }
now() { date +%s; }

# The C unit tests first: they need no Ruby, and a broken formula or helper shows here in
# seconds, before the Ruby gates run for an hour.
if [[ " $GATES " == *" ctest "* ]]; then
  log=$LOGS/ctest.log; t=$(now)
  "${MAKE:-make}" --no-print-directory -C "$MOSAIC_ROOT" test-c >"$log" 2>&1
  rc=$?; sum=$(grep '^C unit tests:' "$log" | tail -1)
  if [ $rc = 0 ] && [ -n "$sum" ]; then pass "$sum ($(( $(now)-t ))s)"
  else fail "${sum:-C unit tests: no summary} (log $log)" "$(grep -v '^  CC ' "$log" | tail -40)"; fi
fi

for gc in $GCS; do
  if msg=$(assert_gc_loads "$gc"); then pass "loads +GC[$gc]"; else fail "loads +GC[$gc]" "$msg"; fi
done

if [[ " $GATES " == *" unit "* ]]; then
  for gc in $GCS; do
    log=$LOGS/unit-$gc.log; t=$(now)
    RUBY_GC_LIBRARY=$gc "$MOSAIC_RUBY" "$MOSAIC_RUBY_SRC/tool/test/runner.rb" -q "$MOSAIC_ROOT/test" >"$log" 2>&1
    rc=$?; sum=$(testall_summary "$log")
    if [ $rc = 0 ] && grep -q "+GC\[$gc\]" "$log"; then pass "mosaic suite under $gc: $sum ($(( $(now)-t ))s)"
    else fail "mosaic suite under $gc: ${sum:-no summary} (log $log)" "$(tail -40 "$log")"; fi
  done
fi

if [[ " $GATES " == *" btest "* ]]; then
  for gc in $GCS; do
    log=$LOGS/btest-$gc.log; t=$(now)
    (cd "$MOSAIC_RUBY_SRC" && RUBY_GC_LIBRARY=$gc make btest) >"$log" 2>&1
    rc=$?
    if [ $rc = 0 ] && grep -q "Target is .*+GC\[$gc\]" "$log" && grep -q '^PASS all' "$log"; then
      pass "bootstraptest under $gc: $(grep '^PASS all' "$log") ($(( $(now)-t ))s)"
    else fail "bootstraptest under $gc (log $log)" "$(grep -E 'FAIL|Target|not ok|#[0-9]+ ' "$log" | head -30; tail -5 "$log")"; fi
  done
fi

if [[ " $GATES " == *" testall "* ]]; then
  tests=$(grep -v '^#' "$MOSAIC_ROOT/test/gates.txt" | grep . | tr '\n' ' ')
  declare -A fails
  for gc in $GCS; do
    log=$LOGS/testall-$gc.log; t=$(now)
    excl=""
    [ -d "$MOSAIC_ROOT/test/excludes/$gc" ] && excl="--excludes-dir=$MOSAIC_ROOT/test/excludes/$gc"
    (cd "$MOSAIC_RUBY_SRC" && RUBY_GC_LIBRARY=$gc make test-all TESTS="$tests" TESTOPTS="-j2 -q $excl") >"$log" 2>&1
    rc=$?; sum=$(testall_summary "$log")
    fails[$gc]=$(testall_failures "$log")
    if ! grep -q "+GC\[$gc\]" "$log"; then fail "GC-critical test-all under $gc: did not run on +GC[$gc] (log $log)" "$(tail -20 "$log")"; continue; fi
    if [ -z "$sum" ]; then fail "GC-critical test-all under $gc: no summary (log $log)" "$(tail -30 "$log")"; continue; fi
    if [ "$gc" = default ]; then
      # The reference run: its failures are the baseline, not a gate (root-only tests and the like).
      pass "GC-critical test-all under default: $sum ($(( $(now)-t ))s)"
      continue
    fi
    extra=$(comm -23 <(echo "${fails[$gc]}" | grep . | sort -u) <(echo "${fails[default]:-}" | grep . | sort -u))
    if [ -z "$extra" ]; then pass "GC-critical test-all under $gc: $sum; no failure that default lacks ($(( $(now)-t ))s)"
    else fail "GC-critical test-all under $gc: $sum; failures default does not show (log $log)" "$extra"; fi
  done
fi

# The compaction gate: the GC-critical test-all files under mosaic with GC.auto_compact = true in
# every Ruby of the run (RUBYOPT=-r test/auto_compact_on.rb; children inherit RUBYOPT), so every
# major GC compacts; test/excludes/compact lists, reviewed, the tests that assert what
# auto-compaction changes by design, each with how the default GC fares with it on.
if [[ " $GATES " == *" compact "* ]]; then
  tests=$(grep -v '^#' "$MOSAIC_ROOT/test/gates.txt" | grep . | tr '\n' ' ')
  gc=${MOSAIC_COMPACT_GC:-mosaic}
  log=$LOGS/compact-$gc.log; t=$(now)
  # RUBYOPT on make's command line too: CRuby's common.mk sets RUBYOPT = - for its children.
  opt="-r$MOSAIC_ROOT/test/auto_compact_on.rb"
  (cd "$MOSAIC_RUBY_SRC" && RUBYOPT="$opt" RUBY_GC_LIBRARY=$gc make test-all RUBYOPT="$opt" TESTS="$tests" \
    TESTOPTS="-j2 -q --excludes-dir=$MOSAIC_ROOT/test/excludes/mosaic:$MOSAIC_ROOT/test/excludes/compact") >"$log" 2>&1
  rc=$?; sum=$(testall_summary "$log")
  if [ $rc = 0 ] && [ -n "$sum" ] && grep -q "+GC\[$gc\]" "$log" && ! grep -q '\[BUG\]' "$log"; then
    pass "GC-critical test-all under $gc with GC.auto_compact = true: $sum ($(( $(now)-t ))s)"
  else
    fail "GC-critical test-all under $gc with GC.auto_compact = true: ${sum:-no summary} (log $log)" \
      "$(grep -a -E '^ +[0-9]+\) (Failure|Error|Timeout):' -A3 "$log" | head -40; grep -a '\[BUG\]' "$log" | head -5)"
  fi
fi

# Gates that are scripts of their own: each prints its own lines and exits 0 or 1.
script_gate() { # name command...
  local name=$1 log=$LOGS/$1.log t=$(now) out rc
  shift
  out=$("$@" 2>&1 | tee "$log" | tail -40); rc=${PIPESTATUS[0]}
  if [ $rc = 0 ]; then pass "$(grep -v '^ ' <<<"$out" | tail -2 | sed 's/^PASS *//' | paste -sd ';' -)"
  else fail "$name (log $log)" "$out"; fi
}
if [[ " $GATES " == *" gem "* ]]; then
  script_gate gem "$MOSAIC_ROOT/scripts/gem-gate.sh"
fi
if [[ " $GATES " == *" prefix "* ]]; then
  script_gate prefix "$MOSAIC_ROOT/scripts/prefix-gate.sh"
fi
if [[ " $GATES " == *" server "* ]]; then
  script_gate server "$MOSAIC_ROOT/scripts/server-gate.sh"
fi
if [[ " $GATES " == *" testall-full "* ]]; then
  script_gate testall-full "$MOSAIC_ROOT/scripts/test-all-full.sh" mosaic --gate
fi
if [[ " $GATES " == *" spec "* ]]; then
  script_gate spec "$MOSAIC_ROOT/scripts/test-spec.sh" default mosaic
fi
if [[ " $GATES " == *" diff "* ]]; then
  # The CI budget must have reached what each configuration is for (test/diff/README.md, "Reach").
  script_gate difftest "$MOSAIC_ROOT/scripts/difftest.sh" --quiet \
    --require-reach incremental_marks,steps,bg_sweeps,compactions,forks,mosaic:lazy_forks,mosaic_check:parallel_marks,mosaic_check_steps:parallel_marks,mosaic_check_steps:regreys
fi
if [[ " $GATES " == *" stress "* ]]; then
  script_gate stress "$MOSAIC_ROOT/scripts/stress-gate.sh"
fi
if [[ " $GATES " == *" races "* ]]; then
  script_gate races "$MOSAIC_ROOT/scripts/race-gate.sh"
fi
if [[ " $GATES " == *" tsan "* ]]; then
  script_gate tsan "$MOSAIC_ROOT/scripts/tsan-gate.sh"
fi
# Only Mosaic's code is instrumented (docs/BUILDING.md): a slot freed too early shows as a wrong
# value or a [BUG] from the VM, which the other gates catch; this one catches Mosaic's own
# accesses past the end of, or after the free of, malloc'd memory (page structs, the arenas'
# mark bits, the page index, the weak index, the sweeper's state) and undefined behaviour.
# Four GC threads, every mark parallel (MOSAIC_PARALLEL_MARK_MIN=0) and every lazy sweep shared
# with the background sweeper (MOSAIC_BACKGROUND_SWEEP_MIN_PAGES=0): the threads work beside Ruby
# even on 2 cores and small heaps. Timeouts scaled by 5 as in the stress gate (the suite runs about 4x slower).
# Children of assert_separately inherit the preload, and any report on their stderr fails them.
# allocator_may_return_null=1 makes ASan's malloc return NULL past its 1 TiB maximum, as glibc's
# does, for the NoMemoryError tests (it then warns; those tests ignore stderr under this build).
if [[ " $GATES " == *" asan "* ]]; then
  log=$LOGS/unit-asan.log; t=$(now)
  libasan=$(${CC:-cc} -print-file-name=libasan.so)
  asan_env=(LD_PRELOAD="$libasan" ASAN_OPTIONS=detect_leaks=0:use_sigaltstack=0:allocator_may_return_null=1
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 RUBY_GC_LIBRARY=mosaic_asan)
  if [ ! -e "$libasan" ]; then
    fail "mosaic suite under mosaic_asan: no libasan.so for ${CC:-cc} ($libasan)"
  elif ! opts=$(env "${asan_env[@]}" "$MOSAIC_RUBY" -e 'print GC::OPTS.join(" ")' 2>&1) || [[ " $opts " != *" MOSAIC_ASAN "* ]]; then
    fail "mosaic suite under mosaic_asan: the library is not the sanitized build (GC::OPTS: $opts)"
  else
    env "${asan_env[@]}" MOSAIC_GC_THREADS=4 MOSAIC_PARALLEL_MARK_MIN=0 MOSAIC_BACKGROUND_SWEEP_MIN_PAGES=0 RUBY_TEST_TIMEOUT_SCALE=5 \
      MOSAIC_EXPECT_GC=mosaic "$MOSAIC_RUBY" "$MOSAIC_RUBY_SRC/tool/test/runner.rb" -q "$MOSAIC_ROOT/test" >"$log" 2>&1
    rc=$?; sum=$(testall_summary "$log")
    if [ $rc = 0 ] && [ -n "$sum" ] && grep -q "+GC\[mosaic\]" "$log" && ! grep -aqE "AddressSanitizer|runtime error:" "$log"; then
      pass "mosaic suite under mosaic_asan: $sum ($(( $(now)-t ))s)"
    else fail "mosaic suite under mosaic_asan: ${sum:-no summary} (log $log)" "$(grep -aE -A12 'AddressSanitizer|runtime error:|Failure:|Error:' "$log" | head -60; tail -5 "$log")"; fi
  fi
fi

echo
if [ $failed -gt 0 ]; then printf 'failed gates:\n'; printf '  %s\n' "${failed_names[@]}"; fi
echo "$passed passed, $failed failed"
[ $failed = 0 ]
