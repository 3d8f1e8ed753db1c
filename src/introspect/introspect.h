/*
 * introspect.h: what Ruby code can ask the collector. GC.stat, GC.stat_heap,
 * GC.latest_gc_info and GC::Profiler (stats.c), ObjectSpace's heap walks (walk.c), and the
 * size-histogram variant's records (size_histogram.c).
 */
#ifndef MOSAIC_INTROSPECT_H
#define MOSAIC_INTROSPECT_H

#include "core/defs.h"

#pragma GCC visibility push(hidden)

#define MOSAIC_PROFILE_MAX 100000
struct mosaic_profile_record {
    unsigned int reason;
    double gc_time;                  /* seconds */
    double invoke_time;              /* seconds since boot */
    size_t heap_use_size;
    size_t heap_total_size;
    size_t heap_total_objects;
};

struct mosaic_stats {
    size_t count;
    uint64_t marking_time_ns;
    uint64_t sweeping_time_ns;
    size_t marked_slots;
    size_t weak_references_count;
    size_t retained_weak_references_count;
    size_t remembered_rescanned;     /* objects a minor GC traced from the remembered set */
    size_t malloc_trim_count;        /* memory.c */
    uint64_t malloc_trim_time_ns;
    size_t minor_gc_count;
    size_t major_gc_count;
    unsigned int latest_reason;
    size_t compact_count;            /* compact.c: compactions run */
    /* collect.c: every stay inside the collector (a collection, a lazy-sweep step, the
     * shutdown frees), from after entering (VM lock, barrier, GC_ENTER hook) to before
     * leaving (GC_EXIT hook). Wall time is CLOCK_MONOTONIC; CPU time is the collecting
     * thread's CLOCK_THREAD_CPUTIME_ID (GC worker threads, when there are any, add theirs).
     * A pause is one stay; its kind is the kind of the latest collection (full_mark), so a
     * lazy-sweep step after a major GC counts as a major pause. Only while measure_time. */
    uint64_t gc_wall_ns;
    uint64_t gc_cpu_ns;
    uint64_t pause_max_minor_ns;
    uint64_t pause_max_major_ns;
    uint64_t enter_wall_ns;          /* 0 when the current stay is not measured */
    uint64_t enter_cpu_ns;
    size_t total_moved_objects;      /* compact.c: objects ever moved */
    size_t fragmentation_compact_count;  /* compact.c: compactions the fragmentation policy ran */
    size_t parallel_marks;           /* mark phases run on several threads (mark_workers.c) */
    size_t incremental_marks;        /* major GCs that marked in steps */
    size_t incremental_steps;        /* their steps, start and final pauses excluded */
    size_t incremental_forced_finishes; /* marks finished early: allocation outran them, or a GC was asked for */
    size_t incremental_parallel_steps; /* steps shared with the GC threads */
    size_t incremental_catch_up_steps; /* steps of L / MOSAIC_MARK_CATCH_UP_DIV when allocation outran a mark */
    size_t incremental_retraced_objects; /* marked objects traced again after a bulk write (mark.c) */
    size_t incremental_retrace_queue_max; /* the most entries the re-grey queue has held at once */
    size_t mark_overflow_rescans;    /* heap passes tracing every marked object again after the mark stack could not grow (mark.c) */
    size_t weak_slots_unregistered;  /* weak slots the weak list had no memory for: referents kept as if strong (mark.c) */
    size_t background_sweeps;        /* cycles the background sweeper was started on */
    size_t background_freed_objects; /* objects it freed (its CPU time and pages: bg_sweep.c) */
    size_t parallel_mark_offers;     /* chunks of mark work handed from one marker to another */
    size_t parallel_marked_by_threads; /* slots the GC threads (not the collecting one) marked */
    size_t compact_freed_pages;      /* compact.c: pages compactions emptied, ever */

    bool profiler_enabled;
    struct mosaic_profile_record *records;
    size_t record_count;
    size_t record_capa;
    struct timespec boot_time;
};

/* stats.c: GC.stat, GC.stat_heap, GC.latest_gc_info, GC::Profiler */
void mosaic_stats_init(void);
VALUE mosaic_stat(mosaic_objspace_t *objspace, VALUE hash_or_sym);
VALUE mosaic_stat_heap(mosaic_objspace_t *objspace, VALUE heap_name, VALUE hash_or_sym);
VALUE mosaic_latest_gc_info(mosaic_objspace_t *objspace, VALUE hash_or_key);
void mosaic_profile_record(mosaic_objspace_t *objspace, unsigned int reason, uint64_t start_ns, uint64_t end_ns);
void mosaic_define_profiler(void);

/* walk.c: heap walking */
void mosaic_each_object(mosaic_objspace_t *objspace, void (*func)(VALUE, void *), void *data);
void mosaic_each_objects(mosaic_objspace_t *objspace, int (*callback)(void *, void *, size_t, void *), void *data);

#if MOSAIC_SIZE_HISTOGRAM
/* size_histogram.c: requested sizes at allocation, optimal sizes at death, JSON at exit */
void mosaic_size_histogram_alloc(VALUE flags, size_t alloc_size);
void mosaic_size_histogram_death(VALUE obj);
void mosaic_size_histogram_write(void);
#endif

#pragma GCC visibility pop

#endif /* MOSAIC_INTROSPECT_H */
