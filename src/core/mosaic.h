/*
 * mosaic.h: the collector's whole state, composed of its owners' parts. Each part is defined,
 * with the functions of its module, in its owner's header:
 *
 *   core/defs.h            Ruby and Modular GC headers, assertions, constants, reasons
 *   core/util.h            page geometry numbers, bits, slot-number reciprocal, saturating
 *                          sizes, clocks (pure C)
 *   core/config.h          the tunables (struct mosaic_params), GC.config
 *   space/space.h          size classes, pages, the page table, the pool, allocation caches
 *   collect/collect.h      the cycle, marking, incremental marking, generations, sweeping,
 *                          compaction, finalizers, object ids
 *   threads/threads.h      the parallel markers, the background sweeper, the idle trim
 *   policy/policy.h        pacing, malloc accounting, memory figures
 *   introspect/introspect.h  GC.stat and the profiler's records, heap walks
 *   debug/debug.h          the checking build's state, the heap checker, race mode; the reference-update probe
 *
 * Every .c file includes this header. The parts are members by value (no indirection on the
 * allocation and marking paths), so a change to any part's struct recompiles every file.
 */
#ifndef MOSAIC_H
#define MOSAIC_H

#include "core/defs.h"
#include "core/config.h"
#include "space/space.h"
#include "collect/collect.h"
#include "threads/threads.h"
#include "policy/policy.h"
#include "introspect/introspect.h"
#include "debug/debug.h"

#pragma GCC visibility push(hidden)

_Static_assert(MOSAIC_SIZE_MAX == (size_t)RUBY_FIXNUM_MAX, "MOSAIC_SIZE_MAX is a Fixnum");

struct mosaic_objspace {
    /* Where objects live (space/). */
    struct mosaic_heap heaps[MOSAIC_HEAP_MAX];
    struct mosaic_page_table pages;
    struct mosaic_page_pool pool;

    /* The cycle (collect.c). */
    bool during_gc;
    bool dont_gc;
    bool gc_stress;
    VALUE gc_stress_mode;
    bool measure_time;
    bool lazy_sweeping;              /* some heap has pages before_sweep */
    bool marking;
    /* GC.latest_gc_info(:state), the default GC's gc_mode: MARKING from just after the
     * GC_START hook through the GC_END_MARK hook, SWEEPING from then through the GC_END_SWEEP
     * hook (compaction included; lazy sweeping keeps it between collections), else NONE. */
    enum { MOSAIC_STATE_NONE, MOSAIC_STATE_MARKING, MOSAIC_STATE_SWEEPING } gc_state;
    bool full_mark;                  /* the running (or latest) collection is a major GC */
    int heap_walk_depth;             /* > 0: pages must not be freed (a walk holds a snapshot) */
    bool malloc_gc_pending;          /* malloc limit crossed without the GVL */
    rb_event_flag_t hook_events;
    size_t live_bytes;               /* slot bytes marked by the latest GC */
    size_t heap_bytes_at_gc;         /* slot bytes holding objects when the latest GC started */
    uint64_t gc_start_ns;            /* when the latest GC started (MOSAIC_TRACE) */

    /* The collection's parts (collect/). */
    struct mosaic_mark_state mark;
    struct mosaic_incremental incremental;
    struct mosaic_generations gen;
    struct mosaic_compaction compact;
    struct mosaic_finalizers finalize;
    struct mosaic_object_ids objid;
    struct mosaic_nursery nursery;

    /* The GC threads (threads/). */
    struct mosaic_gc_threads threads;

    /* Policy (policy/). */
    struct mosaic_pacer pace;
    struct mosaic_malloc_account malloc;
    struct mosaic_memory_state memory;

    struct mosaic_params params;     /* core/config.c */
    struct mosaic_stats stats;       /* introspect/stats.c */
    struct mosaic_checks checks;     /* debug/: the checking build's */
    struct mosaic_ref_probe ref_probe;   /* debug/ref_update_probe.c: MOSAIC_REF_UPDATE_PROBE */
    unsigned long live_ractor_cache_count;
};

/* dont_gc (GC.disable, and the holds below) is read and written by every Ractor, some without
 * the VM lock (GC.enable and GC.disable take none; malloc's and mosaic_collect's guards run
 * before they take it): every access goes through these two, relaxed atomics. */
static inline bool
mosaic_dont_gc(const mosaic_objspace_t *objspace)
{
    return __atomic_load_n(&objspace->dont_gc, __ATOMIC_RELAXED);
}

static inline void
mosaic_set_dont_gc(mosaic_objspace_t *objspace, bool dont_gc)
{
    __atomic_store_n(&objspace->dont_gc, dont_gc, __ATOMIC_RELAXED);
}

/* Holds collections off around an update of an address-keyed st table (object ids,
 * finalizers) outside the GC: st_insert may malloc, malloc may collect, and a collection
 * deletes dead keys from (sweep) and re-keys moved objects in (compaction) the very same
 * tables; st is not reentrant. Returns the state to give back to mosaic_gc_release. */
static inline bool
mosaic_gc_hold(mosaic_objspace_t *objspace)
{
    bool prev = mosaic_dont_gc(objspace);
    mosaic_set_dont_gc(objspace, true);
    return prev;
}

static inline void
mosaic_gc_release(mosaic_objspace_t *objspace, bool prev)
{
    mosaic_set_dont_gc(objspace, prev);
}

/* Whether a GC thread (marker, background sweeper) may start now: not in a forked child's
 * first collection (threads/mark_workers.c, mosaic_gc_threads_after_fork). */
static inline bool
mosaic_gc_threads_allowed(const mosaic_objspace_t *objspace)
{
    return objspace->stats.count > objspace->threads.held_until_count;
}

/* Memory taken since the latest GC, slots and malloc in one budget: fresh page bytes mapped
 * plus the malloc increase, net of frees other than a sweep's (policy/malloc.c). */
static inline size_t
mosaic_pace_grown_bytes(mosaic_objspace_t *objspace)
{
    return mosaic_add_sat(objspace->pace.grown_since_gc, __atomic_load_n(&objspace->malloc.increase, __ATOMIC_RELAXED));
}

#pragma GCC visibility pop

#endif /* MOSAIC_H */
