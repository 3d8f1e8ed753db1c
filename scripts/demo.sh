#!/usr/bin/env bash
# `make demo`: build everything (toolchain, Mosaic) and compare default and mosaic on RDoc.
source "$(dirname "$0")/lib.sh"
exec "$MOSAIC_RUBY" "$MOSAIC_ROOT/scripts/demo.rb" "$@" ${DEMO_ARGS:-}
