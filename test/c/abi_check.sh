#!/usr/bin/env bash
# abi_check.sh: the drift test between Mosaic's declaration of the Modular GC interface
# (src/core/gc_abi.h) and CRuby's (gc/gc.h, gc/gc_impl.h in the toolchain's source tree), so
# that the two cannot drift apart. make test-c runs it beside the C unit tests; like them it
# prints what it checked and ends with "abi_check: N checks, F failed", exit 1 on a failure.
#
#   prototypes     abi_protos.c: CRuby's headers and gc_abi.h in one translation unit; a
#                  function or callback typedef declared differently does not compile
#   impl declared  each rb_gc_impl_* of gc_impl.h (its GC_IMPL_FN lines) is declared by gc_abi.h
#   impl extra     gc_abi.h declares no rb_gc_impl_* that gc_impl.h lacks
#   vm declared    each VM function gc_abi.h declares is declared by CRuby's gc/gc.h or the two
#                  internal headers (so the prototype check compared it)
#   vm exported    ... and exported by the toolchain's Ruby
#   layout         abi_layout.c built with gc.h and with gc_abi.h prints the same
#   library        the library (ABI_LIB) defines every rb_gc_impl_* of gc_impl.h and exports
#                  no other rb_*, ruby_* or mosaic_* symbol
#   load check     src/core/load_check.c preloaded into the Ruby: silent when built for it;
#                  built for another API version, one line and exit status 1
#
# Environment: MOSAIC_RUBY_SRC (CRuby's configured source tree), MOSAIC_RUBY (its Ruby),
# ABI_CC, ABI_CFLAGS (the library's warnings), ABI_LIB (the built library; its check is
# skipped, and counted as failed, when missing). The Makefile's test-c target sets them.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
src=${MOSAIC_RUBY_SRC:-}
ruby=${MOSAIC_RUBY:-}
cc=${ABI_CC:-cc}
cflags=${ABI_CFLAGS:--std=gnu11 -Wall -Wextra -Wno-unused-parameter -Werror}
lib=${ABI_LIB:-}
abi=$root/src/core/gc_abi.h
impl_h=$src/gc/gc_impl.h

export LC_ALL=C   # the compiler's messages in ASCII, as the checks below parse them
checks=0; failed=0
# ok WHAT [CHECKS]; bad WHAT [DETAILS] [CHECKS] [FAILED]: CHECKS checks (1), FAILED of them (all).
ok()   { checks=$((checks+${2:-1})); echo "ok    $1"; }
bad()  { checks=$((checks+${3:-1})); failed=$((failed+${4:-${3:-1}})); echo "FAIL  $1"; [ -n "${2:-}" ] && sed 's/^/      | /' <<<"$2"; }
finish() { echo "abi_check: $checks checks, $failed failed"; [ $failed = 0 ]; exit $?; }

if [ ! -f "$impl_h" ] || [ ! -f "$src/gc/gc.h" ] || [ ! -x "$ruby" ]; then
  bad "CRuby's gc/gc.h, gc/gc_impl.h and Ruby (MOSAIC_RUBY_SRC=$src, MOSAIC_RUBY=$ruby): not found (make toolchain)"
  finish
fi
arch_inc=$(dirname "$(dirname "$(ls "$src"/.ext/include/*/ruby/config.h 2>/dev/null | head -1)")")
cruby_inc=(-I"$root/src" -I"$arch_inc" -I"$src/include" -I"$src")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# Names: the rb_gc_impl_* of gc_impl.h's GC_IMPL_FN lines; those gc_abi.h declares; the other
# functions gc_abi.h declares (a declaration starts a line with its return type).
grep -E '^GC_IMPL_FN ' "$impl_h" | grep -oE 'rb_gc_impl_[a-z_0-9]+ *\(' | tr -d ' (' | sort -u >"$tmp/impl"
grep -oE '\brb_gc_impl_[a-z_0-9]+ *\(' "$abi" | tr -d ' (' | sort -u >"$tmp/abi_impl"
grep -E '^[a-z][^(]*\b(rb|ruby)_[a-z_0-9]+\(' "$abi" | grep -oE '\b(rb|ruby)_[a-z_0-9]+\(' \
  | tr -d '(' | grep -v '^rb_gc_impl_' | sort -u >"$tmp/abi_vm"
n_impl=$(wc -l <"$tmp/impl"); n_vm=$(wc -l <"$tmp/abi_vm")

# prototypes
if out=$($cc $cflags -DBUILDING_MODULAR_GC -fsyntax-only "${cruby_inc[@]}" "$root/test/c/abi_protos.c" 2>&1); then
  ok "prototypes: gc_abi.h agrees with CRuby's gc/gc.h, gc/gc_impl.h, internal/thread.h, internal/variable.h"
else
  bad "prototypes: gc_abi.h differs from CRuby's headers" "$(grep -E 'error|note' <<<"$out" | head -20)"
fi

# impl declared: a unit with gc_abi.h alone that names every function of gc_impl.h
if [ "$n_impl" -lt 60 ]; then
  bad "impl declared: only $n_impl rb_gc_impl_* functions found in $impl_h (did its format change?)"
else
  { echo '#include "core/gc_abi.h"'; echo 'void *abi_names[] = {'
    sed 's/.*/    (void *)&, /' "$tmp/impl"; echo '};'; } >"$tmp/impl_declared.c"
  out=$($cc $cflags -fsyntax-only "${cruby_inc[@]}" "$tmp/impl_declared.c" 2>&1)
  missing=$(grep -oE "'rb_gc_impl_[a-z_0-9]+' undeclared" <<<"$out" | tr -d "'" | sed 's/ undeclared//' | sort -u)
  if [ -n "$missing" ]; then
    bad "impl declared: gc_impl.h functions gc_abi.h does not declare: $(echo $missing)" "" "$n_impl" "$(wc -l <<<"$missing")"
  elif [ -n "$out" ]; then
    bad "impl declared: the check did not compile" "$(head -20 <<<"$out")" "$n_impl"
  else
    ok "impl declared: all $n_impl rb_gc_impl_* functions of gc_impl.h" "$n_impl"
  fi
fi

# impl extra
extra=$(comm -13 "$tmp/impl" "$tmp/abi_impl")
if [ -z "$extra" ]; then ok "impl extra: gc_abi.h declares no rb_gc_impl_* that gc_impl.h lacks"
else bad "impl extra: gc_abi.h declares functions gc_impl.h lacks: $(echo $extra)"; fi

# vm declared: a unit with CRuby's headers alone that names every VM function of gc_abi.h
{ printf '#include "ruby/ruby.h"\n#include "gc/gc.h"\n#include "internal/thread.h"\n#include "internal/variable.h"\n'
  echo 'void *abi_names[] = {'; sed 's/.*/    (void *)&, /' "$tmp/abi_vm"; echo '};'; } >"$tmp/vm_declared.c"
out=$($cc $cflags -DBUILDING_MODULAR_GC -fsyntax-only "${cruby_inc[@]}" "$tmp/vm_declared.c" 2>&1)
undeclared=$(grep -oE "'(rb|ruby)_[a-z_0-9]+' undeclared" <<<"$out" | tr -d "'" | sed 's/ undeclared//' | sort -u)
if [ "$n_vm" = 0 ]; then bad "vm declared: no VM function found in gc_abi.h"
elif [ -n "$undeclared" ]; then bad "vm declared: CRuby's headers do not declare $(echo $undeclared)" "" "$n_vm" "$(wc -l <<<"$undeclared")"
elif [ -n "$out" ]; then bad "vm declared: the check did not compile" "$(head -20 <<<"$out")" "$n_vm"
else ok "vm declared: all $n_vm VM functions gc_abi.h declares, by CRuby's headers" "$n_vm"; fi

# vm exported: by the Ruby binary, or by libruby.so for a Ruby built --enable-shared
rubylib=$("$ruby" -rrbconfig -e 'c = RbConfig::CONFIG
  print(c["ENABLE_SHARED"] == "yes" ? File.join(c["libdir"], c["LIBRUBY_SO"]) : File.join(c["bindir"], c["ruby_install_name"] + c["EXEEXT"]))')
nm -D --defined-only "$rubylib" 2>/dev/null | awk '{print $NF}' | sort -u >"$tmp/ruby_exports"
unexported=$(comm -23 "$tmp/abi_vm" "$tmp/ruby_exports")
if [ -z "$unexported" ]; then ok "vm exported: all $n_vm, by $rubylib" "$n_vm"
else bad "vm exported: $rubylib does not export $(echo $unexported)" "" "$n_vm" "$(wc -l <<<"$unexported")"; fi

# layout
if out=$($cc $cflags -DBUILDING_MODULAR_GC -O1 -DABI_LAYOUT_FROM_CRUBY "${cruby_inc[@]}" -o "$tmp/layout_cruby" "$root/test/c/abi_layout.c" 2>&1 &&
         $cc $cflags -O1 -DBUILDING_MODULAR_GC "${cruby_inc[@]}" -o "$tmp/layout_mosaic" "$root/test/c/abi_layout.c" 2>&1); then
  "$tmp/layout_cruby" >"$tmp/layout_cruby.txt"; "$tmp/layout_mosaic" >"$tmp/layout_mosaic.txt"
  if d=$(diff "$tmp/layout_cruby.txt" "$tmp/layout_mosaic.txt" | sed 's/^</CRuby: /; s/^>/Mosaic:/'); then
    ok "layout: struct rb_gc_vm_context and enum rb_gc_vm_weak_tables as gc.h's ($(wc -l <"$tmp/layout_cruby.txt") facts)"
  else bad "layout: gc_abi.h's types differ from gc.h's" "$d"; fi
else
  bad "layout: abi_layout.c did not compile" "$(head -20 <<<"$out")"
fi

# library
if [ -z "$lib" ] || [ ! -f "$lib" ]; then
  bad "library: ${lib:-ABI_LIB} not built"
else
  nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u >"$tmp/lib_exports"
  undefined=$(comm -23 "$tmp/impl" "$tmp/lib_exports")
  others=$(grep -E '^(rb|ruby|mosaic)_' "$tmp/lib_exports" | comm -13 "$tmp/impl" -)
  if [ -z "$undefined" ] && [ -z "$others" ]; then ok "library: $lib exports the $n_impl rb_gc_impl_* and nothing else of Mosaic's"
  else bad "library: $lib${undefined:+ lacks $(echo $undefined)}${others:+ exports $(echo $others)}"; fi
fi

# load check: load_check.c alone, as a preloaded library, into the Ruby
lc=(-std=gnu11 -fPIC -shared -DBUILDING_MODULAR_GC "${cruby_inc[@]}" "$root/src/core/load_check.c")
running=$("$ruby" -e 'print RUBY_VERSION')
if ! out=$($cc "${lc[@]}" -o "$tmp/load_same.so" 2>&1 &&
           $cc "${lc[@]}" -DMOSAIC_BUILT_API_MAJOR=3 -DMOSAIC_BUILT_API_MINOR=99 \
               -DMOSAIC_BUILT_RUBY_VERSION='"3.99.0"' -o "$tmp/load_other.so" 2>&1); then
  bad "load check: load_check.c did not compile" "$(head -20 <<<"$out")" 2
else
  out=$(LD_PRELOAD="$tmp/load_same.so" "$ruby" -e 'print :ran' 2>&1); rc=$?
  if [ $rc = 0 ] && [ "$out" = ran ]; then ok "load check: built for this Ruby, silent"
  else bad "load check: built for this Ruby, exit status $rc" "$out"; fi
  out=$(LD_PRELOAD="$tmp/load_other.so" "$ruby" -e 'print :ran' 2>&1); rc=$?
  if [ $rc = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && [[ "$out" == *"built for Ruby 3.99.0 and this is Ruby $running"* ]]; then
    ok "load check: built for Ruby 3.99, refused in one line, exit status 1"
  else bad "load check: built for Ruby 3.99, expected one line and exit status 1, got exit status $rc" "$out"; fi
fi

finish
