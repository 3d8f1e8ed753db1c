/*
 * threads.h: the GC threads that run beside the collector and the mutator: the parallel
 * markers (mark_workers.c), the background sweeper (bg_sweep.c, and the frees it hands to
 * the Ruby thread: free_handoff.c), and the idle trim (idle_trim.c). Their state is opaque;
 * what they share with the mutator, and the rules for it: docs/DESIGN.md, "threads".
 */
#ifndef MOSAIC_THREADS_H
#define MOSAIC_THREADS_H

#include "core/defs.h"
#include "collect/collect.h"

#pragma GCC visibility push(hidden)

/* The frees the background sweeper hands to the mutator (free_handoff.c): stacks of batches. */
struct mosaic_free_handoff {
    struct mosaic_free_batch *full;  /* published batches of blocks to free */
    struct mosaic_free_batch *spare; /* emptied batches, for the sweeper */
    size_t deferred_blocks;          /* blocks handed over, all cycles */
};

/* The GC threads: the parallel markers and the background sweeper, each opaque outside its
 * file, and the fork rule they share. */
struct mosaic_gc_threads {
    struct mosaic_mark_workers *workers; /* parallel marking threads (mark_workers.c), or NULL */
    struct mosaic_bg_sweep *bg_sweep; /* the background sweeper (bg_sweep.c), or NULL */
    struct mosaic_free_handoff free_handoff;
    size_t held_until_count;         /* no GC thread starts while stats.count <= this (mosaic_gc_threads_allowed) */
};

/* mark_workers.c: parallel marking threads and the work they share */
void mosaic_gc_threads_after_fork(mosaic_objspace_t *objspace);
bool mosaic_mark_workers_begin(mosaic_objspace_t *objspace, size_t step_budget);
void mosaic_mark_workers_step(mosaic_objspace_t *objspace, struct mosaic_marker *marker);
bool mosaic_mark_workers_hungry(mosaic_objspace_t *objspace);
void mosaic_mark_workers_offer(mosaic_objspace_t *objspace, struct mosaic_marker *marker);
size_t mosaic_mark_workers_finish(mosaic_objspace_t *objspace, struct mosaic_marker *marker);
void mosaic_mark_workers_stop(mosaic_objspace_t *objspace);
bool mosaic_gc_thread_create(pthread_t *thread, void *(*main)(void *), void *arg);
void mosaic_gc_thread_begin(const char *name);

/* bg_sweep.c: the background sweeper */
void mosaic_bg_sweep_init(mosaic_objspace_t *objspace);
void mosaic_bg_sweep_list(mosaic_objspace_t *objspace);
void mosaic_bg_sweep_start(mosaic_objspace_t *objspace);
void mosaic_bg_sweep_stop(mosaic_objspace_t *objspace);
void mosaic_bg_sweep_resume(mosaic_objspace_t *objspace);
void mosaic_bg_sweep_hooks_changed(mosaic_objspace_t *objspace, rb_event_flag_t events);
void mosaic_bg_sweep_totals(mosaic_objspace_t *objspace, uint64_t *cpu_ns, size_t *pages);
void mosaic_bg_sweep_wait(mosaic_objspace_t *objspace);
bool mosaic_bg_sweep_claim(mosaic_objspace_t *objspace, struct mosaic_page *page);
void mosaic_bg_sweep_free(mosaic_objspace_t *objspace);

/* idle_trim.c: malloc_trim once the program has gone quiet */
void mosaic_idle_trim_init(mosaic_objspace_t *objspace);
void mosaic_idle_trim_after_gc(mosaic_objspace_t *objspace, size_t overhead);
void mosaic_idle_trim_after_sweep(mosaic_objspace_t *objspace, size_t overhead);
void mosaic_idle_trim_totals(size_t *trims, size_t *returned_bytes, uint64_t *time_ns);
void mosaic_idle_trim_free(void);

/* free_handoff.c: the sweeper's frees of large blocks, done by the mutator */
void mosaic_free_handoff_thread_begin(void);
bool mosaic_free_handoff_defer(mosaic_objspace_t *objspace, void *block, size_t usable_size);
void mosaic_free_handoff_publish(mosaic_objspace_t *objspace);
void mosaic_free_handoff_drain_some(mosaic_objspace_t *objspace);
void mosaic_free_handoff_drain_all(mosaic_objspace_t *objspace);
void mosaic_free_handoff_free(mosaic_objspace_t *objspace);

#pragma GCC visibility pop

#endif /* MOSAIC_THREADS_H */
