#!/usr/bin/env bash
# Installs what the benchmark suite needs beyond the Ruby toolchain, idempotently:
# Debian packages (librsvg2-bin for the chart's PNG, valgrind for cache misses, libsqlite3-dev, and
# libjemalloc2 for the +jemalloc configurations of bench/run.rb, preloaded as Rails' Dockerfile does;
# redis-server for sidekiq-jobs) and the gems of the application benchmarks (liquid; Rails + sqlite3;
# Puma for puma-cluster; Sidekiq for sidekiq-jobs) into bench/.gems (not committed).
# Usage: bench/setup.sh            (safe to re-run; installs only what is missing)
# A gem that the registry cannot serve is reported; its benchmark then skips with a message.
set -uo pipefail
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$BENCH")
eval "$("$ROOT/scripts/toolchain.sh" paths)"
[ -x "$MOSAIC_RUBY" ] || "$ROOT/scripts/toolchain.sh" build
GEM="$(dirname "$MOSAIC_RUBY")/gem"
GEM_DIR="$BENCH/.gems"
log() { printf '[bench/setup] %s\n' "$*" >&2; }

SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
missing=""
for p in librsvg2-bin valgrind libsqlite3-dev pkg-config libjemalloc2 redis-server; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  log "installing Debian packages:$missing"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null \
    || log "WARNING: apt-get could not install:$missing (chart PNG, cachegrind figures, +jemalloc runs or sidekiq-jobs will be missing)"
fi

# Gem sets, one per application benchmark. Versions are pinned so that runs stay comparable.
# base64: liquid requires it, and Ruby 3.4 made it a bundled gem (absent from this toolchain).
LIQUID_GEMS="liquid:5.14.0 base64:0.3.0"
# Only the Rails frameworks the app uses (the full "rails" meta-gem also pulls mailers, cable, storage).
# puma: the forking server of the puma-cluster workload (it compiles a C extension, and pulls nio4r).
RAILS_GEMS="railties:8.1.4.1 actionpack:8.1.4.1 actionview:8.1.4.1 activerecord:8.1.4.1 sqlite3:2.10.2 puma:6.6.1"
# Sidekiq for sidekiq-jobs (with Debian's redis-server). connection_pool 2.x: Sidekiq 7.3.9's scheduler
# calls TimedStack#pop with a positional timeout, which connection_pool 3 refuses.
SIDEKIQ_GEMS="connection_pool:2.5.5 redis-client:0.31.0 sidekiq:7.3.9"

installed() { # NAME:VERSION -> 0 if present in GEM_DIR
  local n=${1%%:*} v=${1##*:}
  GEM_HOME="$GEM_DIR" GEM_PATH="$GEM_DIR" "$GEM" list -i "^${n}\$" -v "$v" >/dev/null 2>&1
}

status=0
for set in LIQUID_GEMS RAILS_GEMS SIDEKIQ_GEMS; do
  for spec in ${!set}; do
    if installed "$spec"; then log "have $spec"; continue; fi
    log "installing gem $spec into $GEM_DIR"
    if ! GEM_HOME="$GEM_DIR" GEM_PATH="$GEM_DIR" "$GEM" install --no-document --install-dir "$GEM_DIR" \
        "${spec%%:*}" -v "${spec##*:}" >"$GEM_DIR.install.log" 2>&1; then
      log "WARNING: could not install $spec (its benchmark will skip); last lines:"
      tail -5 "$GEM_DIR.install.log" >&2
      status=1
    fi
  done
done
rm -f "$GEM_DIR.install.log"
log "done (gems in $GEM_DIR)"
exit $status
