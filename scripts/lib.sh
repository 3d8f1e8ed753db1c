# Shared helpers for Mosaic's scripts. Source it; it sets MOSAIC_RUBY, MOSAIC_RUBY_SRC, MOSAIC_GC_DIR.
set -euo pipefail
MOSAIC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
eval "$("$MOSAIC_ROOT/scripts/toolchain.sh" env)"
export MOSAIC_RUBY MOSAIC_RUBY_SRC MOSAIC_GC_DIR MOSAIC_ROOT

# A script gate's checks, one PASS or FAIL line each; check_fail records the failure in
# $checks_failed (the gate's last line and exit status follow it).
checks_failed=0
check_pass() { echo "PASS  $*"; }
check_fail() { echo "FAIL  $*"; checks_failed=1; }

# Fails unless the Ruby really loads GC library $1.
assert_gc_loads() {
  local v
  v=$(RUBY_GC_LIBRARY="$1" "$MOSAIC_RUBY" -v 2>&1) || { echo "$v"; return 1; }
  case "$v" in *"+GC[$1]"*) ;; *) echo "expected +GC[$1] in: $v"; return 1 ;; esac
}

# Parses the last "N tests, N assertions, N failures, N errors, N skips" line of a test-all log.
testall_summary() {
  grep -E '^[0-9]+ tests, [0-9]+ assertions, [0-9]+ failures, [0-9]+ errors, [0-9]+ skips' "$1" | tail -1
}

# Names of failing/erroring tests in a test-all log, one "Class#method" per line, sorted.
testall_failures() {
  grep -E '^ +[0-9]+\) (Failure|Error):' -A1 "$1" | grep -oE '^[A-Za-z0-9_:]+#[^ ]+' | sed 's/:$//' | sort -u || true
}
