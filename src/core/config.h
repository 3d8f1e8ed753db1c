/*
 * config.h: Mosaic's tunables (struct mosaic_params), read once at boot from the environment
 * and changed by GC.config (config.c).
 */
#ifndef MOSAIC_CONFIG_H
#define MOSAIC_CONFIG_H

#include "core/defs.h"

#pragma GCC visibility push(hidden)

/* Tunables, read once at boot (config.c). */
struct mosaic_params {
    size_t heap_init_slots[MOSAIC_HEAP_MAX];
    size_t heap_free_slots;          /* RUBY_GC_HEAP_FREE_SLOTS: free slots a GC leaves at least, per Ractor (pace.c) */
    double growth_factor;
    size_t growth_max_slots;
    double free_slots_min_ratio;
    double free_slots_goal_ratio;
    double free_slots_max_ratio;
    size_t malloc_limit_min;
    size_t malloc_limit_max;
    double malloc_limit_growth_factor;
    size_t oldmalloc_limit_min;
    size_t oldmalloc_limit_max;
    double oldmalloc_limit_growth_factor;
    bool allow_full_mark;            /* GC.config(rgengc_allow_full_mark:); stored, see config.c */
    bool verify_after_gc;            /* MOSAIC_VERIFY=1: run the heap checker after every GC */
    bool verify_every_step;          /* MOSAIC_VERIFY_STEPS=1 (checking build): the tri-color check after every incremental step */
    bool generational;               /* MOSAIC_GENERATIONAL=0 turns minor GCs off (boot only) */
    double oldobject_limit_factor;
    double wb_unprotected_limit_ratio;
    size_t stress_minor_every;       /* checking build: MOSAIC_STRESS_MINOR=N, a GC every N allocations */
    bool stress_compact;             /* checking build: MOSAIC_STRESS_COMPACT=1, those GCs compact (alloc.c) */
    size_t stress_mark_memory;        /* checking build: MOSAIC_STRESS_MARK_MEMORY=N, at most N mark-stack chunks mapped, weak lists of N chunks' entries (mark.c) */
    bool trace;                      /* MOSAIC_TRACE=1: one line per GC on stderr (memory.c) */
    bool ref_update_probe;           /* MOSAIC_REF_UPDATE_PROBE=1: debug/ref_update_probe.c */
    bool memory_report;              /* MOSAIC_MEMORY_REPORT=1: breakdown at exit and at peak */
    size_t memory_limit;             /* MOSAIC_MEMORY_LIMIT / GC.config(memory_limit:); 0: none */
    double gc_time_max;              /* MOSAIC_GC_TIME_MAX: above this share of time in GC the room grows (pace.c; 0: off) */
    double gc_time_min;              /* MOSAIC_GC_TIME_MIN: below it the room shrinks (0: off) */
    /* Auto-compaction policy (compact.c; DESIGN.md, "Auto-compaction"): MOSAIC_AUTO_COMPACT / GC.config. */
    int auto_compact_policy;         /* MOSAIC_AUTO_COMPACT_OFF / _FRAGMENTATION / _ALWAYS */
    double compact_occupancy;        /* a class compacts when its occupied pages are at most this full */
    double compact_pause_fraction;   /* move budget: this fraction of the mark time */
    unsigned int gc_threads;         /* MOSAIC_GC_THREADS: threads that mark, the collector's included */
    size_t parallel_mark_min;        /* MOSAIC_PARALLEL_MARK_MIN: slots in use below which marking stays on one thread */
    bool incremental;                /* MOSAIC_INCREMENTAL=0 turns off marking in steps for pacer-started majors (DESIGN.md, "Incremental marking") */
    bool background_sweep;           /* MOSAIC_BACKGROUND_SWEEP=0 turns off the background sweeper (bg_sweep.c; on by default) */
    size_t background_sweep_min_pages; /* MOSAIC_BACKGROUND_SWEEP_MIN_PAGES: a sweep of fewer pages stays on the Ruby thread */
    size_t idle_trim_ms;             /* MOSAIC_IDLE_TRIM_MS: the quiet time before the idle trim (threads/idle_trim.c; 0: off) */
    size_t incremental_min;          /* MOSAIC_INCREMENTAL_MIN: live slots below which a major marks at once */
    double incremental_ratio;        /* MOSAIC_INCREMENTAL_RATIO: a major marks in steps only if marking it at once would
                                      * take more than this many times the longest recent minor mark (0: always) */
    double incremental_long_minor_ms; /* MOSAIC_INCREMENTAL_LONG_MINOR: ... and only once that minor took this long (ms) */
    size_t mark_step_min;            /* MOSAIC_MARK_STEP_MIN: slots a step marks at least */
    size_t nursery_pages;            /* MOSAIC_NURSERY_PAGES: nursery pages per size class (0: no nursery; nursery.c) */
    size_t stress_incremental;       /* MOSAIC_STRESS_INCREMENTAL=N: every pacer major marks in steps, of N slots (implies MOSAIC_INCREMENTAL=1) */
};

/* What a major GC does about compaction when GC.auto_compact is false (GC.auto_compact = true
 * is ALWAYS). */
enum mosaic_auto_compact_policy {
    MOSAIC_AUTO_COMPACT_OFF,
    MOSAIC_AUTO_COMPACT_FRAGMENTATION,
    MOSAIC_AUTO_COMPACT_ALWAYS,
};

/* config.c: tunables and GC.config */
void mosaic_params_defaults(struct mosaic_params *params);
void mosaic_params_from_env(struct mosaic_params *params);
VALUE mosaic_config_get(mosaic_objspace_t *objspace);
void mosaic_config_set(mosaic_objspace_t *objspace, VALUE hash);

#pragma GCC visibility pop

#endif /* MOSAIC_CONFIG_H */
