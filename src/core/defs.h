/*
 * defs.h: what every Mosaic file needs first: Ruby's installed headers and Mosaic's declaration
 * of the Modular GC interface (core/gc_abi.h), the checking build's assertions, the constants
 * of the heap's geometry, the reasons a collection runs, and a few helpers about Ruby objects.
 * Every other header includes it.
 */
#ifndef MOSAIC_DEFS_H
#define MOSAIC_DEFS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "ruby/ruby.h"
#include "ruby/atomic.h"
#include "ruby/debug.h"
#include "ruby/st.h"
#include "core/gc_abi.h"

#include "core/util.h"

/* Everything declared below is internal to the library: hidden, so calls between Mosaic's files
 * are direct (no PLT stub, no GOT load) and only the rb_gc_impl_* entry points, declared above
 * by core/gc_abi.h, are exported. */
#pragma GCC visibility push(hidden)

#ifndef RBOOL
# define RBOOL(v) ((v) ? Qtrue : Qfalse)
#endif

/* ------------------------------------------------------------------ checks */

#ifndef MOSAIC_CHECK
# define MOSAIC_CHECK 0
#endif

#if MOSAIC_CHECK
# define MOSAIC_ASSERT(expr) do { \
    if (RB_UNLIKELY(!(expr))) rb_bug("Mosaic assertion failed: %s (%s:%d)", #expr, __FILE__, __LINE__); \
} while (0)
#else
# define MOSAIC_ASSERT(expr) ((void)0)
#endif

/* The size-histogram variant (make HISTOGRAM=1): records requested and optimal sizes
 * (size_histogram.c). 0 in every other build, where its hooks compile to nothing. */
#ifndef MOSAIC_SIZE_HISTOGRAM
# define MOSAIC_SIZE_HISTOGRAM 0
#endif

/* -------------------------------------------------------------- constants */

/* MOSAIC_PAGE_SIZE, MOSAIC_BASE_SLOT_SIZE and MOSAIC_MAX_SLOT_SIZE are in core/util.h (pure C,
 * for the pacer's formulas and the C unit tests); the rest of the geometry follows from them. */
#define MOSAIC_PAGE_MASK        (~((uintptr_t)MOSAIC_PAGE_SIZE - 1))
/* Page bodies are carved out of arenas, one mapping of 64 bodies (4 MiB) each (arena.c). */
#define MOSAIC_ARENA_PAGES      64
#define MOSAIC_ARENA_SIZE       ((size_t)MOSAIC_ARENA_PAGES * MOSAIC_PAGE_SIZE)
#define MOSAIC_ARENA_FULL       UINT64_MAX
/* Size classes: a table chosen at boot (size_class.c, MOSAIC_SIZE_CLASSES) of MOSAIC_HEAP_COUNT
 * classes, at most MOSAIC_HEAP_MAX (arrays per class are sized for that many). */
#define MOSAIC_HEAP_MAX         16
extern int mosaic_heap_count;
#define MOSAIC_HEAP_COUNT       mosaic_heap_count
/* The first slot starts one base slot into the body, after the body's header (struct
 * mosaic_page_header: the page pointer, and copies of the slot reciprocal, start offset and
 * side-bitmap word count).
 * A class whose slot size is a multiple of a cache line starts at MOSAIC_LINE_SIZE instead, so
 * that none of its slots straddles a line (size_class.c, heap_start_offset). */
#define MOSAIC_PAGE_HEADER_SIZE MOSAIC_BASE_SLOT_SIZE
#define MOSAIC_LINE_SIZE        64
#define MOSAIC_BITMAP_BITS      ((MOSAIC_PAGE_SIZE - MOSAIC_PAGE_HEADER_SIZE) / MOSAIC_BASE_SLOT_SIZE)
#define MOSAIC_BITMAP_WORDS     ((MOSAIC_BITMAP_BITS + 63) / 64)
/* Swept pages wait for allocation in buckets by free ratio (quarters). */
#define MOSAIC_FREE_BUCKETS     4

/* Why a collection ran, and how: recorded for GC.latest_gc_info and the profiler. */
enum mosaic_reason {
    MOSAIC_REASON_NEWOBJ          = 1 << 0,
    MOSAIC_REASON_MALLOC          = 1 << 1,
    MOSAIC_REASON_METHOD          = 1 << 2,
    MOSAIC_REASON_CAPI            = 1 << 3,
    MOSAIC_REASON_STRESS          = 1 << 4,
    MOSAIC_REASON_IMMEDIATE_SWEEP = 1 << 5,
    MOSAIC_REASON_IMMEDIATE_MARK  = 1 << 6,
    MOSAIC_REASON_FULL_MARK       = 1 << 7,
    MOSAIC_REASON_HAVE_FINALIZE   = 1 << 8,
    MOSAIC_REASON_MAJOR_NOFREE    = 1 << 9,
    MOSAIC_REASON_MAJOR_FORCE     = 1 << 10,
    MOSAIC_REASON_MAJOR_OLDGEN    = 1 << 11,
    MOSAIC_REASON_MAJOR_SHADY     = 1 << 12,
    MOSAIC_REASON_MAJOR_OLDMALLOC = 1 << 13,
    /* The collection runs inside rb_gc_impl_malloc & co (malloc.c): the caller may be in the
     * middle of editing an st table (its resize is that malloc), so nothing may move. */
    MOSAIC_REASON_INSIDE_MALLOC   = 1 << 14,
    /* This collection compacts (GC.compact, verify_compaction_references, the stress gate's
     * compacting GCs): a bit of the request, not a flag in the objspace, so a collection
     * another Ractor starts meanwhile (from inside its malloc, say) does not take it up. */
    MOSAIC_REASON_COMPACT         = 1 << 15,
    /* GC.start(immediate_mark: false): a major GC that marks in steps, as in the default GC. */
    MOSAIC_REASON_STEPS           = 1 << 16,
};
#define MOSAIC_REASON_MAJOR_MASK (MOSAIC_REASON_MAJOR_NOFREE | MOSAIC_REASON_MAJOR_FORCE | \
                                  MOSAIC_REASON_MAJOR_OLDGEN | MOSAIC_REASON_MAJOR_SHADY | \
                                  MOSAIC_REASON_MAJOR_OLDMALLOC)

/* A young object becomes old when a collection marks it for the MOSAIC_OLD_AGE-th time. */
#define MOSAIC_OLD_AGE 3


/* The collector's whole state: core/mosaic.h composes it from its owners' parts. */
typedef struct mosaic_objspace mosaic_objspace_t;

/* Stores `value` in the page field `field` only when it differs. A store of the same value
 * still dirties the memory page it lands on, so in a forked child it would copy the parent's
 * page: what a collection leaves as it was must be read, not rewritten. */
#define MOSAIC_STORE_CHANGED(field, value) do { \
    __typeof__(field) mosaic_value_ = (value); \
    if ((field) != mosaic_value_) (field) = mosaic_value_; \
} while (0)

/* A growable array of pointers, malloc'd outside Ruby's accounting. */
struct mosaic_ptr_vec {
    void **items;
    size_t size;
    size_t capa;
};
void mosaic_ptr_vec_push(struct mosaic_ptr_vec *vec, void *item);
bool mosaic_ptr_vec_try_push(struct mosaic_ptr_vec *vec, void *item, size_t limit);
void mosaic_ptr_vec_free(struct mosaic_ptr_vec *vec);

/* CRuby's imemo kind of a T_IMEMO: bits RUBY_FL_USHIFT.. of its flags (internal/imemo.h's
 * imemo_type, IMEMO_MASK 0x0f). Mosaic reads it for instruction sequences (mark.c), heap
 * environments (generation.c), the kinds the background sweeper may free (sweep.c) and the
 * kinds the VM's tables key (debug/ref_update_probe.c). */
enum {
    MOSAIC_IMEMO_ENV = 0, MOSAIC_IMEMO_CREF = 1, MOSAIC_IMEMO_SVAR = 2, MOSAIC_IMEMO_THROW_DATA = 3,
    MOSAIC_IMEMO_IFUNC = 4, MOSAIC_IMEMO_MEMO = 5, MOSAIC_IMEMO_MENT = 6, MOSAIC_IMEMO_ISEQ = 7,
    MOSAIC_IMEMO_CALLINFO = 11,
};
static inline unsigned int
mosaic_imemo_kind(VALUE obj)
{
    return (unsigned int)((RBASIC(obj)->flags >> RUBY_FL_USHIFT) & 0x0f);
}

/* CRuby's shape id of an object whose ivars are in an st_table (shape.h's
 * OBJ_TOO_COMPLEX_SHAPE_ID in 3.4: ROOT_SHAPE_ID 0, SPECIAL_CONST_SHAPE_ID 1, then this), as
 * gc.h's rb_gc_get_shape returns it. The sweep reads it for dead T_OBJECTs (sweep.c). */
#define MOSAIC_TOO_COMPLEX_SHAPE_ID 2

/* An instruction sequence CRuby is still loading from binary: ISEQ_NOT_LOADED_YET (iseq.h:
 * IMEMO_FL_USER1, which is RUBY_FL_USER5) is set from its allocation until compile.c's
 * ibf_load_iseq_complete, and meanwhile its literals are announced (RB_OBJ_WRITTEN) before
 * the code that holds them is published (DESIGN.md, "Loading iseqs"). */
static inline bool
mosaic_iseq_loading_p(VALUE obj)
{
    return RB_BUILTIN_TYPE(obj) == T_IMEMO && mosaic_imemo_kind(obj) == MOSAIC_IMEMO_ISEQ &&
        (RBASIC(obj)->flags & RUBY_FL_USER5);
}

#pragma GCC visibility pop

#endif /* MOSAIC_DEFS_H */
