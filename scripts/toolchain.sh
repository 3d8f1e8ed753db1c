#!/usr/bin/env bash
# Builds (once) and caches the CRuby 3.4.5 toolchain Mosaic is developed and tested against:
# a Ruby configured --with-modular-gc, its configured source tree (headers and test suites),
# and CRuby's own default GC built as librubygc.default.so in the same modular GC directory.
#
# Invariant: the cache directory is complete iff it holds the stamp file written as the very
# last step; a partial cache (interrupted build) is removed and rebuilt from scratch.
#
# Usage: scripts/toolchain.sh [build|env|paths]
#   build  build if missing (default)
#   env    print MOSAIC_RUBY=... MOSAIC_RUBY_SRC=... MOSAIC_GC_DIR=... (builds first if missing)
set -euo pipefail

RUBY_VERSION=3.4.5
DEB_VERSION=3.4.5-1~exp1
TARBALL=ruby3.4_${RUBY_VERSION}.orig.tar.xz
HERE=$(cd "$(dirname "$0")/.." && pwd)
SHARED_VENDOR=${MOSAIC_SHARED_VENDOR:-$HERE/../shared/vendor}
CACHE_ROOT=${MOSAIC_CACHE:-$HOME/.cache/mosaic}
CONFIGURE_FLAGS="--disable-install-doc --enable-shared=no"
# The cache key covers everything that changes the build: version, flags and this recipe's revision.
RECIPE_REV=1
KEY=$(printf '%s|%s|%s' "$RUBY_VERSION" "$CONFIGURE_FLAGS" "$RECIPE_REV" | sha256sum | cut -c1-12)
DIR=$CACHE_ROOT/ruby-$RUBY_VERSION-$KEY
PREFIX=$DIR/prefix
SRC=$DIR/src
GC_DIR=$PREFIX/lib/ruby/gc
STAMP=$DIR/.complete

log() { printf '[toolchain] %s\n' "$*" >&2; }

need_root_apt() {
  if [ "$(id -u)" != 0 ]; then echo sudo; fi
}

install_build_deps() {
  local pkgs="build-essential autoconf bison ruby libssl-dev libyaml-dev zlib1g-dev libffi-dev libgmp-dev libreadline-dev dpkg-dev xz-utils valgrind gdb"
  local missing=""
  for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    log "installing Debian packages:$missing"
    $(need_root_apt) apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $(need_root_apt) apt-get install -y -qq $missing >/dev/null
  fi
}

# Adds a deb-src entry for Debian's experimental suite, reusing the mirror the machine already
# uses for its own packages (so no host name is hard-coded here).
add_experimental_src() {
  local list=/etc/apt/sources.list.d/mosaic-experimental-src.sources
  [ -f "$list" ] && return 0
  local uri
  uri=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)
  if [ -z "$uri" ]; then
    uri=$(grep -h '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)
  fi
  [ -n "$uri" ] || return 1
  printf 'Types: deb-src\nURIs: %s\nSuites: experimental\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" \
    | $(need_root_apt) tee "$list" >/dev/null
}

fetch_tarball() {
  local dl=$CACHE_ROOT/downloads
  mkdir -p "$dl"
  if [ -f "$dl/$TARBALL" ] && check_sum "$dl/$TARBALL"; then echo "$dl/$TARBALL"; return; fi
  log "fetching Debian source package ruby3.4=$DEB_VERSION"
  if add_experimental_src && $(need_root_apt) apt-get update -qq 2>/dev/null \
     && (cd "$dl" && apt-get source --download-only -qq "ruby3.4=$DEB_VERSION" >/dev/null 2>&1) \
     && [ -f "$dl/$TARBALL" ]; then
    log "got $TARBALL from the package registry"
  elif [ -f "$SHARED_VENDOR/$TARBALL" ]; then
    log "package registry could not serve it; using $SHARED_VENDOR/$TARBALL"
    cp "$SHARED_VENDOR/$TARBALL" "$dl/$TARBALL"
  else
    log "cannot obtain $TARBALL"; exit 1
  fi
  check_sum "$dl/$TARBALL" || { log "checksum mismatch for $TARBALL"; exit 1; }
  echo "$dl/$TARBALL"
}

check_sum() {
  local want=141fb3b0192b8196361b3b4d6c29fc9b10c0798dbe54ada1539d9f1c311bfcbf
  [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$want" ]
}

build() {
  if [ -f "$STAMP" ]; then return 0; fi
  install_build_deps
  local tb; tb=$(fetch_tarball)
  log "building Ruby $RUBY_VERSION into $DIR (configure ~40 s, make ~4 min, install ~1 min)"
  rm -rf "$DIR"; mkdir -p "$SRC"
  tar -xJf "$tb" -C "$SRC" --strip-components=1
  # Debian's orig tarball has no gems/*.gem; without them `make install` tries to download the
  # bundled gems and fails offline. Empty the list: core and default gems still install.
  sed -i -e '/^[a-z]/d' "$SRC/gems/bundled_gems"
  cd "$SRC"
  ./configure --prefix="$PREFIX" --with-modular-gc="$GC_DIR" $CONFIGURE_FLAGS >"$DIR/configure.log" 2>&1 \
    || { tail -30 "$DIR/configure.log"; exit 1; }
  make -j"$(nproc)" >"$DIR/make.log" 2>&1 || { tail -40 "$DIR/make.log"; exit 1; }
  make modular-gc MODULAR_GC=default >>"$DIR/make.log" 2>&1 || { tail -40 "$DIR/make.log"; exit 1; }
  make install >"$DIR/install.log" 2>&1 || { tail -40 "$DIR/install.log"; exit 1; }
  mkdir -p "$GC_DIR"
  [ -f "$GC_DIR/librubygc.default.so" ] || cp gc/default/librubygc.default.so "$GC_DIR/"
  RUBY_GC_LIBRARY=default "$PREFIX/bin/ruby" -v | grep -q '+GC\[default\]' \
    || { log "built Ruby does not load the default modular GC"; exit 1; }
  date -u +%FT%TZ >"$STAMP"
  log "done"
}

print_env() {
  printf 'MOSAIC_RUBY=%s\nMOSAIC_RUBY_SRC=%s\nMOSAIC_GC_DIR=%s\nMOSAIC_RUBY_PREFIX=%s\n' \
    "$PREFIX/bin/ruby" "$SRC" "$GC_DIR" "$PREFIX"
}

case "${1:-build}" in
  build) build ;;
  env) build; print_env ;;
  paths) print_env ;;
  *) echo "usage: $0 [build|env|paths]" >&2; exit 2 ;;
esac
