#!/usr/bin/env bash
# The server gate: a real forking server and a real job server, end to end, under each GC.
#   1. bench/setup.sh, if bench/.gems lacks a gem the workloads need or redis-server is missing (a
#      fresh clone has no gems: it installs the Debian packages and the pinned gems, Puma, Rails
#      and Sidekiq among them);
#   2. bench/workloads/puma_cluster.rb --quick under RUBY_GC_LIBRARY=mosaic and default: Puma in
#      cluster mode (2 workers, preload_app!, Process.warmup before the fork) serves the bench's
#      Rails app on 127.0.0.1; 300 requests over keep-alive connections, every status, body and
#      serving GC checked; no worker restarted; SIGTERM stops the server with exit status 0 (a
#      worker that outlives SIGTERM by 10 s, which Puma then kills, is shown as a warning);
#   3. bench/workloads/sidekiq_jobs.rb --quick under each GC: a Sidekiq process (5 threads) on a
#      private redis-server runs 400 jobs; every job's result checked against the digest the
#      workload computes itself and naming the run's GC; SIGTERM stops Sidekiq with exit status 0.
# Prints PASS/FAIL lines (with the setup's and each run's seconds); exits 1 on any failure.
# MOSAIC_SERVER_GCS="mosaic default" the GCs; MOSAIC_SERVER_REQUESTS (300) the requests per run;
# MOSAIC_SERVER_JOBS (400) the jobs per run.
source "$(dirname "$0")/lib.sh"
set +e
GEM_DIR="$MOSAIC_ROOT/bench/.gems"
WORKLOAD="$MOSAIC_ROOT/bench/workloads/puma_cluster.rb"
JOBS_WORKLOAD="$MOSAIC_ROOT/bench/workloads/sidekiq_jobs.rb"
GCS=${MOSAIC_SERVER_GCS:-"mosaic default"}
REQUESTS=${MOSAIC_SERVER_REQUESTS:-300}
JOBS=${MOSAIC_SERVER_JOBS:-400}
unset MOSAIC_BENCH_FIGURES MOSAIC_BENCH_QUICK
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

have_gems() {
  command -v redis-server >/dev/null &&
  "$MOSAIC_RUBY" -e 'Gem.use_paths(ARGV[0], [ARGV[0]])
    %w[puma railties actionpack actionview activerecord sqlite3].each { |g| gem g }
    gem "connection_pool", "< 3"; gem "sidekiq"' "$GEM_DIR" 2>/dev/null
}

# 1. The gems.
if have_gems; then
  check_pass "bench/.gems has Puma, Rails and Sidekiq; redis-server is installed"
else
  t=$SECONDS
  if "$MOSAIC_ROOT/bench/setup.sh" >"$scratch/setup.log" 2>&1 && have_gems; then
    check_pass "bench/setup.sh installed the gems ($((SECONDS - t))s)"
  else
    check_fail "bench/setup.sh ($((SECONDS - t))s)"; tail -20 "$scratch/setup.log"
    echo "FAIL  server gate"; exit 1
  fi
fi

# 2. The servers under each GC.
# Runs one workload under $gc: LABEL (for the messages), KEY (its log's name), SUMMARY (the regex
# of its summary line), then the command. It passes when it exits 0 and the summary names this GC;
# then $log is its log and $secs its seconds, for the pass line. A skip (77) or any other exit
# fails, with the log's end.
serve() {
  local label=$1 key=$2 summary=$3 t=$SECONDS rc
  shift 3
  log="$scratch/$gc.$key.log"
  RUBY_GC_LIBRARY=$gc "$MOSAIC_RUBY" "$@" >"$log" 2>&1
  rc=$?
  secs=$((SECONDS - t))
  if [ $rc = 0 ] && [[ "$(grep "$summary" "$log" | tail -1)" == *"GC $gc;"* ]]; then return 0; fi
  if [ $rc = 77 ]; then check_fail "$label under $gc: skipped: $(grep '^SKIP' "$log")"
  else check_fail "$label under $gc: exit $rc (${secs}s)"; tail -30 "$log"; fi
  return 1
}
# A figure of the latest run's log ("requests/s 519.5").
figure() { awk -v name="$1" '$1 == name { print $2 }' "$log"; }

for gc in $GCS; do
  if ! msg=$(assert_gc_loads "$gc"); then check_fail "loads +GC[$gc]: $msg"; continue; fi
  if serve "puma cluster" puma '^puma-cluster: .* requests, ' "$WORKLOAD" --quick --requests "$REQUESTS"; then
    check_pass "puma cluster under $gc: $REQUESTS requests checked, $(figure requests/s) req/s, workers on $gc, none restarted, exit 0 $(figure shutdown)s after SIGTERM (${secs}s)"
    grep '^puma-cluster: WARNING' "$log" | sed 's/^/      /' || true
  fi
  if serve sidekiq jobs '^sidekiq-jobs: .* jobs checked, ' "$JOBS_WORKLOAD" --quick --jobs "$JOBS"; then
    check_pass "sidekiq under $gc: $JOBS jobs' results checked, $(figure jobs/s) jobs/s, Sidekiq on $gc, exit 0 $(figure shutdown)s after SIGTERM (${secs}s)"
  fi
done

[ $checks_failed = 0 ] && echo "PASS  server gate" || { echo "FAIL  server gate"; exit 1; }
