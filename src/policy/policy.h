/*
 * policy.h: the decisions about memory. When the next collection runs and how the heap grows
 * and shrinks (pace.c), the accounting of malloc'd bytes (malloc.c), and where the memory
 * goes: the breakdown, MOSAIC_TRACE, the memory report, malloc_trim (memory.c).
 * Invariants: docs/DESIGN.md, "policy".
 */
#ifndef MOSAIC_POLICY_H
#define MOSAIC_POLICY_H

#include "core/defs.h"

#pragma GCC visibility push(hidden)

/* Where the memory goes, in bytes (memory.c). One X-macro so that the struct, GC.stat's keys
 * (mosaic_<name>_bytes, mosaic_peak_<name>_bytes) and the report never disagree. */
#define MOSAIC_MEMORY_FIELDS(X) \
    X(rss)            /* resident set size (VmRSS) */ \
    X(heap_pages)     /* pages in use by a size class, whole (MOSAIC_PAGE_SIZE each) */ \
    X(heap_live)      /* bytes of slots holding an object (live, or garbage not swept yet) */ \
    X(heap_free)      /* bytes of free slots in pages in use */ \
    X(heap_pooled)    /* empty pages held in the pool, resident, for any class */ \
    X(metadata)       /* page descriptors with their side bitmaps, page arrays, index */ \
    X(malloc)         /* bytes malloc'd through Ruby's accounting (usable sizes), now */ \
    X(libc_in_use)    /* glibc mallinfo2: uordblks + hblkhd, the whole process */ \
    X(libc_free)      /* glibc mallinfo2: fordblks, free inside malloc's arenas */ \
    X(libc_mmap)      /* glibc mallinfo2: hblkhd, blocks malloc mmapped directly */ \
    X(other)          /* rss - heap_pages - heap_pooled - libc_in_use - libc_free, >= 0 */

struct mosaic_memory {
#define MOSAIC_MEMORY_MEMBER(name) size_t name;
    MOSAIC_MEMORY_FIELDS(MOSAIC_MEMORY_MEMBER)
#undef MOSAIC_MEMORY_MEMBER
};

/* The pacer (pace.c): when the next collection runs, how far the heap may grow. */
struct mosaic_pacer {
    /* Growth budget shared by all classes, in bytes of page. */
    size_t allocatable_bytes;
    size_t grown_since_gc;           /* fresh page bytes mapped since the latest GC */
    size_t free_slots_floor_bytes;   /* what the latest GC granted for RUBY_GC_HEAP_FREE_SLOTS */
    size_t heap_target_bytes;        /* the page bytes the heap may reach before the next GC */
    size_t growth_trigger_bytes;     /* fresh pages + malloc since the latest GC that run a GC from malloc */
    size_t oldmalloc_held_bytes;     /* survivors' malloc beyond the latest major's live malloc */
    size_t oldmalloc_trigger_bytes;  /* oldmalloc_held_bytes when a minor asked for a major */
    bool limit_set_aside;            /* live memory does not fit memory_limit */
    bool limit_warned;
    double gc_ns_recent;             /* GC time and all time, decaying sums */
    double all_ns_recent;
    uint64_t last_gc_end_ns;
    uint64_t gc_ns_at_last_end;      /* marking + sweeping time when the latest GC ended */
    double gc_time_share;            /* gc_ns_recent / all_ns_recent at the latest GC's end */
    /* The room scale (MOSAIC_GC_TIME_MAX / _MIN): the free-slot ratios' room times it; set
     * from the GC time share of the GCs since it was last set (pace.c). */
    double room_scale;
    uint64_t cycle_gc_ns, cycle_all_ns;       /* GC time and all time since the scale was set */
    unsigned int cycle_gcs;                   /* GCs since the scale was set */
    size_t major_live_bytes;                  /* slot bytes live at the latest major that set it */
    size_t room_pages;                        /* pages in use when the scale was last set */
    /* Of the slot bytes allocated before the latest GC that measured it (one that saw at least
     * MOSAIC_PM_SURVIVAL_MIN_BYTES allocated since the GC before it), the share that GC found
     * alive (1.0 before any GC): a build-up keeps nearly all (pace.c, mark_totals). */
    double survival;
    bool build_up_ended;             /* this GC follows a build-up's end (pace.c, mark_totals) */
};

/* Malloc accounting (malloc.c). */
struct mosaic_malloc_account {
    size_t bytes;                    /* atomic; outstanding, usable sizes */
    size_t increase;                 /* atomic */
    size_t limit;
    size_t old_increase;             /* atomic; bytes malloc'd since the latest major GC */
    size_t old_limit;
    size_t live_bytes;               /* bytes when the latest major GC's sweep ended */
    size_t bytes_at_gc;              /* bytes when the latest GC started */
    size_t high_at_gc;               /* the most bytes_at_gc since the latest major's sweep ended */
    size_t freed_by_sweep;           /* bytes the current cycle's sweep freed (sweep.c) */
};

/* Memory figures (memory.c). */
struct mosaic_memory_state {
    struct mosaic_memory peak;       /* the breakdown at the GC with the highest RSS */
    size_t overhead_at_trim;         /* rss_overhead_bytes after the latest malloc_trim */
    size_t idle_at_trim;             /* glibc's idle bytes at the first walk after the latest trim */
    size_t trim_returned_bytes;      /* how far the latest malloc_trim lowered the overhead */
    size_t draw_bytes[3];            /* malloc.high_at_gc above the survivors of the major that ended it,
                                      * for the latest three cycles, newest first (memory.c, expected_refill) */
    uint64_t libc_walk_ns;           /* what the latest walk of glibc's bins took (mallinfo2, malloc_trim) */
    uint64_t libc_walked_at_ns;      /* when the collector's latest walk ended (the walk budget) */
    size_t libc_walked_chunks;       /* the free chunks it visited (mallinfo2's count; after a trim, an estimate) */
    size_t libc_walked_malloc;       /* malloc bytes then */
    size_t libc_measured_malloc;     /* malloc bytes at the latest mallinfo2 walk (libc_measured's baseline) */
    size_t libc_freed_page_bytes;    /* malloc.c: whole-page bytes in chunks Ruby freed since the latest trim, estimated */
    size_t rss_overhead_bytes;       /* RSS beyond pages + malloc bytes at the latest GC's end */
    size_t rss_measured;             /* RSS at its latest read: a GC's end, a measured breakdown */
    struct mosaic_memory libc_measured; /* glibc's figures (libc_*) at the latest mallinfo2 walk */
};


/* pace.c: when the next GC runs, how the heap grows and shrinks */
void mosaic_pace_init(mosaic_objspace_t *objspace);
void mosaic_pace_measure_mark(mosaic_objspace_t *objspace);
void mosaic_pace_after_mark(mosaic_objspace_t *objspace);
void mosaic_pace_after_sweep(mosaic_objspace_t *objspace);
void mosaic_pace_old_limits(mosaic_objspace_t *objspace, size_t live);
void mosaic_pace_gc_time(mosaic_objspace_t *objspace, uint64_t start_ns, uint64_t end_ns);
void mosaic_pace_malloc_limit(mosaic_objspace_t *objspace);
size_t mosaic_pace_counted_bytes(mosaic_objspace_t *objspace);
size_t mosaic_pace_used_bytes(mosaic_objspace_t *objspace);
bool mosaic_pace_over_limit(mosaic_objspace_t *objspace);
bool mosaic_pace_grown_enough(mosaic_objspace_t *objspace);
size_t mosaic_pace_growth_step(mosaic_objspace_t *objspace);
bool mosaic_pace_near_limit(mosaic_objspace_t *objspace);
void mosaic_pace_after_fork(mosaic_objspace_t *objspace);
size_t mosaic_pace_keep_slots(mosaic_objspace_t *objspace, int h, size_t live);

/* trigger.c: what a collection does: minor or major, compact, marks in steps */
struct mosaic_collection_plan {
    unsigned int reason;             /* the request's MOSAIC_REASON_* bits, completed */
    bool full;                       /* a major GC */
    bool compact;                    /* compacts after a complete sweep */
    bool by_fragmentation;           /* the fragmentation policy decides after the mark */
    bool evacuate;                   /* a minor GC that moves the nursery's survivors out (nursery.c) */
};
void mosaic_trigger_plan(mosaic_objspace_t *objspace, unsigned int reason, struct mosaic_collection_plan *plan);
bool mosaic_trigger_in_steps(mosaic_objspace_t *objspace, unsigned int reason);
void mosaic_trigger_observe_mark(mosaic_objspace_t *objspace, bool full, uint64_t mark_ns);
double mosaic_trigger_major_slots(mosaic_objspace_t *objspace);
size_t mosaic_expected_traced(mosaic_objspace_t *objspace, bool full);
bool mosaic_incremental_wanted(mosaic_objspace_t *objspace);
bool mosaic_incremental_start_due(mosaic_objspace_t *objspace);

/* memory.c: where the memory goes; MOSAIC_TRACE, MOSAIC_MEMORY_REPORT, malloc_trim */
/* How fresh mosaic_memory_breakdown's measured figures (RSS, glibc's) are. */
enum mosaic_measure {
    MOSAIC_MEASURE_NONE,   /* RSS as of its latest read, glibc's figures estimated: no system call, no walk */
    MOSAIC_MEASURE_PACED,  /* RSS now; glibc's figures now if the walk budget allows */
    MOSAIC_MEASURE_NOW,    /* both now, whatever the walk costs */
};
void mosaic_memory_breakdown(mosaic_objspace_t *objspace, struct mosaic_memory *m, enum mosaic_measure measure);
size_t mosaic_memory_measure_overhead(mosaic_objspace_t *objspace);
size_t mosaic_memory_rss_bytes(void);
void mosaic_memory_after_gc(mosaic_objspace_t *objspace, unsigned int reason);
void mosaic_memory_after_sweep(mosaic_objspace_t *objspace);
void mosaic_memory_trim_now(mosaic_objspace_t *objspace);
void mosaic_memory_report(mosaic_objspace_t *objspace, const char *when);

/* malloc.c: accounting of malloc'd bytes */
void mosaic_malloc_increase(mosaic_objspace_t *objspace, size_t size, bool may_collect);
void mosaic_malloc_decrease(mosaic_objspace_t *objspace, size_t size);
void mosaic_malloc_tally_begin(void);
void mosaic_malloc_tally_end(mosaic_objspace_t *objspace);

#pragma GCC visibility pop

#endif /* MOSAIC_POLICY_H */
