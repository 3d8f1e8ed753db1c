/*
 * abi_protos.c: the prototype half of the drift test (test/c/abi_check.sh compiles it; nothing
 * runs). CRuby 3.4.5's gc/gc.h and gc/gc_impl.h, the internal headers that declare the other
 * two VM functions Mosaic calls, then Mosaic's src/core/gc_abi.h, in one translation unit. C
 * lets a function be declared again only with a compatible type (same return type, same number
 * of parameters of compatible types), so a prototype gc_abi.h writes differently from CRuby's
 * is a compile error that names it, and so is a callback typedef that differs. C's compatible
 * types are ABI-equal ones: VALUE and unsigned long, or a top-level const on a parameter,
 * pass; bool and int, or size_t and unsigned int, do not.
 *
 * The struct and the enum gc.h defines cannot be defined twice in one unit: gc_abi.h leaves
 * them to gc.h here (MOSAIC_ABI_TYPES_FROM_CRUBY) and abi_layout.c compares them.
 */
#define MOSAIC_ABI_TYPES_FROM_CRUBY 1

#include "ruby/ruby.h"
#include "gc/gc.h"
#include "gc/gc_impl.h"
#include "internal/thread.h"    /* ruby_thread_has_gvl_p */
#include "internal/variable.h"  /* rb_mv_generic_ivar */

#include "core/gc_abi.h"
