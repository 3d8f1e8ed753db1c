#!/usr/bin/env bash
# Prepares the ruby-bench suite of bench/run.rb (`--suite ruby-bench`), idempotently:
#  1. a checkout of ruby/ruby-bench: $RUBY_BENCH_DIR when set (a checkout you made, used in place),
#     else extracted with `git archive` from a bare copy of the repository (the search tool's
#     `fetch github:ruby/ruby-bench` leaves one under /work/.mirror/ruby+ruby-bench*/repo; or set
#     RUBY_BENCH_GIT to any git dir) into bench/.ruby-bench/ (not tracked). Only harness/, misc/
#     and the chosen benchmarks are extracted: the copy may lack a few large blobs of other
#     benchmarks (lobsters' database, protoboeuf's messages);
#  2. the gems of each chosen benchmark that has a Gemfile, installed by the toolchain's bundler
#     into bench/.ruby-bench-gems (GEM_HOME; not tracked). The Gemfiles of liquid-render and
#     fluentd take liquid and yajl-ruby from GitHub: git is pointed at local copies with
#     url.<copy>.insteadOf in a gitconfig of its own (GIT_CONFIG_GLOBAL), found as
#     $LIQUID_GIT / $YAJL_GIT or /work/.mirror/Shopify+liquid*/repo, /work/.mirror/brianmario+yajl-ruby*/repo;
#  3. a benchmark's own one-time setup (railsbench: its sqlite database, `rails db:migrate db:seed`),
#     which ruby-bench's harness would run before every run.
# A benchmark whose gems or setup fail is reported and marked; bench/workloads/ruby_bench.rb then
# skips it with that message. Its log stays in bench/.ruby-bench-gems/status/NAME.log.
# Usage: bench/ruby-bench/setup.sh [NAME...]     (default: every benchmark of the suite)
# Native gems build with MAKEFLAGS=-j1 (set MAKEFLAGS to change it).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH=$(dirname "$HERE")
ROOT=$(dirname "$BENCH")
eval "$("$ROOT/scripts/toolchain.sh" paths)"
[ -x "$MOSAIC_RUBY" ] || { echo "bench/ruby-bench/setup.sh: no toolchain Ruby ($MOSAIC_RUBY); run make first" >&2; exit 1; }
log() { printf '[ruby-bench/setup] %s\n' "$*" >&2; }

# The suite's programs: the same list as bench/run.rb's RUBY_BENCH_SUITE.
ALL="railsbench erubi-rails liquid-render hexapdf optcarrot splay string_malloc_pressure sequel binarytrees fluentd"
NAMES=${*:-$ALL}

GEMS="$BENCH/.ruby-bench-gems"
STATUS="$GEMS/status"
mkdir -p "$STATUS"

# --- 1. the checkout
if [ -n "${RUBY_BENCH_DIR:-}" ]; then
  CHECKOUT=$(cd "$RUBY_BENCH_DIR" && pwd) || { log "RUBY_BENCH_DIR=$RUBY_BENCH_DIR is not a directory"; exit 1; }
  log "using the checkout RUBY_BENCH_DIR=$CHECKOUT"
else
  CHECKOUT="$BENCH/.ruby-bench"
  SRC=${RUBY_BENCH_GIT:-$(ls -d /work/.mirror/ruby+ruby-bench*/repo 2>/dev/null | head -1)}
  if [ -z "$SRC" ] || ! git --git-dir="$SRC" rev-parse -q --verify HEAD^{commit} >/dev/null; then
    log "no copy of ruby/ruby-bench: set RUBY_BENCH_DIR to a checkout, or RUBY_BENCH_GIT to a git dir"
    log "(the search tool's \`fetch github:ruby/ruby-bench\` leaves one under /work/.mirror/ruby+ruby-bench/repo)"
    exit 1
  fi
  commit=$(git --git-dir="$SRC" rev-parse HEAD)
  have=$(cat "$CHECKOUT/.commit" 2>/dev/null)
  paths="harness misc"
  for n in $NAMES; do
    if git --git-dir="$SRC" cat-file -e "HEAD:benchmarks/$n" 2>/dev/null; then paths="$paths benchmarks/$n"
    else paths="$paths benchmarks/$n.rb"; fi
  done
  missing=""
  for p in $paths; do [ -e "$CHECKOUT/$p" ] || missing="$missing $p"; done
  if [ "$have" != "$commit" ] || [ -n "$missing" ]; then
    [ "$have" != "$commit" ] && [ -n "$have" ] && { log "ruby-bench moved from $have to $commit: extracting again"; rm -rf "$CHECKOUT"; missing=" $paths"; }
    mkdir -p "$CHECKOUT"
    log "extracting ruby-bench $commit from $SRC:$missing"
    # (git archive names the blobs missing from the copy even when they are outside the paths
    # asked for, and still succeeds: its messages are shown only if it fails)
    # shellcheck disable=SC2086
    if ! git --git-dir="$SRC" archive --format=tar HEAD $missing 2>"$GEMS/archive.err" | tar -x -C "$CHECKOUT"; then
      log "git archive failed:"; cat "$GEMS/archive.err" >&2; exit 1
    fi
    echo "$commit" >"$CHECKOUT/.commit"
  else
    log "have ruby-bench $commit in $CHECKOUT"
  fi
fi

# --- 2. git sources of the Gemfiles, pointed at local copies
GITCONFIG="$GEMS/gitconfig"
: >"$GITCONFIG"
for pair in "LIQUID_GIT Shopify/liquid Shopify+liquid" "YAJL_GIT brianmario/yajl-ruby brianmario+yajl-ruby"; do
  set -- $pair
  dir=${!1:-$(ls -d /work/.mirror/$3*/repo 2>/dev/null | head -1)}
  if [ -n "$dir" ] && [ -d "$dir" ]; then
    git config --file "$GITCONFIG" "url.file://$dir.insteadOf" "https://github.com/$2.git"
  else
    log "no local copy of $2 (set $1): bundler will try github.com"
  fi
done
export GIT_CONFIG_GLOBAL="$GITCONFIG"

RUBY_BIN=$(dirname "$MOSAIC_RUBY")
export PATH="$RUBY_BIN:$PATH" GEM_HOME="$GEMS" GEM_PATH="$GEMS" BUNDLE_USER_HOME="$GEMS/.bundle-home"
export BUNDLE_JOBS=1 MAKEFLAGS=${MAKEFLAGS:--j1} BUNDLE_VERSION=system BUNDLE_SILENCE_ROOT_WARNING=1
export BUNDLE_FROZEN=true # install exactly the lockfile's versions
unset RUBYOPT RUBYLIB BUNDLE_PATH BUNDLE_APP_CONFIG
export RUBY_GC_LIBRARY=default

# --- 3. per benchmark: gems, then its one-time setup
failed=""
for n in $NAMES; do
  dir="$CHECKOUT/benchmarks/$n"
  rm -f "$STATUS/$n.failed"
  if [ ! -f "$dir/Gemfile" ] || ! grep -q use_gemfile "$dir/benchmark.rb" 2>/dev/null; then
    log "$n: no gems to install"
    echo ok >"$STATUS/$n.ok"; continue
  fi
  export BUNDLE_GEMFILE="$dir/Gemfile"
  if (cd "$dir" && bundle check) >"$STATUS/$n.log" 2>&1; then
    log "$n: gems present"
  else
    log "$n: bundle install (log: $STATUS/$n.log)"
    if ! (cd "$dir" && bundle install) >>"$STATUS/$n.log" 2>&1; then
      log "WARNING: $n: bundle install failed (the benchmark will skip); last lines:"
      tail -8 "$STATUS/$n.log" | sed 's/^/    | /' >&2
      tail -3 "$STATUS/$n.log" >"$STATUS/$n.failed"
      rm -f "$STATUS/$n.ok"; failed="$failed $n"; continue
    fi
  fi
  if [ "$n" = railsbench ] && [ ! -s "$dir/db/production.sqlite3" -o ! -f "$STATUS/$n.ok" ]; then
    log "$n: rails db:migrate db:seed (production)"
    if ! (cd "$dir" && RAILS_ENV=production bundle exec ruby bin/rails db:migrate db:seed) >>"$STATUS/$n.log" 2>&1; then
      log "WARNING: $n: database setup failed (the benchmark will skip); last lines:"
      tail -8 "$STATUS/$n.log" | sed 's/^/    | /' >&2
      tail -3 "$STATUS/$n.log" >"$STATUS/$n.failed"
      rm -f "$STATUS/$n.ok"; failed="$failed $n"; continue
    fi
  fi
  echo ok >"$STATUS/$n.ok"
done
unset BUNDLE_GEMFILE
if [ -n "$failed" ]; then
  log "done; FAILED:$failed (they will skip)"
  exit 1
fi
log "done (checkout $CHECKOUT, gems in $GEMS)"
