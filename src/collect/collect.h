/*
 * collect.h: the collection. The cycle and its entry and exit (collect.c), marking and its
 * stacks (mark.c, weak_index.c), generations and write barriers (generation.c), sweeping
 * (sweep.c), compaction (compact.c), finalizers (finalize.c) and object ids (objid.c).
 * Invariants: docs/DESIGN.md, "collect".
 */
#ifndef MOSAIC_COLLECT_H
#define MOSAIC_COLLECT_H

#include "core/defs.h"
#include "space/space.h"

#pragma GCC visibility push(hidden)

/* A slot whose free was deferred (T_DATA without FREE_IMMEDIATELY, or with a finalizer). */
struct mosaic_zombie {
    struct RBasic basic;
    VALUE next;
    void (*dfree)(void *);
    void *data;
};

/* Explicit mark stack: chunks of VALUEs, so depth is bounded by memory, not the C stack. */
#define MOSAIC_MARK_CHUNK 4094
/* How many in-place scans may nest before newly marked objects go on the mark stack (mark.c,
 * scan_in_place). Each level costs a few C frames: rb_gc_mark_children, the type's mark
 * function, mosaic_mark. */
#ifndef MOSAIC_MARK_EAGER_DEPTH
#define MOSAIC_MARK_EAGER_DEPTH 4
#endif
struct mosaic_mark_chunk {
    struct mosaic_mark_chunk *prev;
    size_t used;
    VALUE items[MOSAIC_MARK_CHUNK];
};

struct mosaic_mark_stack {
    struct mosaic_mark_chunk *top;
    struct mosaic_mark_chunk *spare;
};

/* Newly marked objects wait here, prefetched, before they are scanned (mark.c). */
#ifndef MOSAIC_MARK_QUEUE
# define MOSAIC_MARK_QUEUE 16  /* a power of two; 0 turns the queue off */
#endif
struct mosaic_mark_queue {
    VALUE items[MOSAIC_MARK_QUEUE ? MOSAIC_MARK_QUEUE : 1];
    unsigned char depths[MOSAIC_MARK_QUEUE ? MOSAIC_MARK_QUEUE : 1];  /* mark_depth when queued */
    unsigned int head, count;
};
/* Scans nested on the C stack at most (mark.c): a queued object is scanned at the depth it was
 * marked at, which can be less than the nesting at the time it leaves the queue. */
#define MOSAIC_MARK_NEST_MAX (MOSAIC_MARK_EAGER_DEPTH + 1)
_Static_assert((MOSAIC_MARK_QUEUE & (MOSAIC_MARK_QUEUE - 1)) == 0, "MOSAIC_MARK_QUEUE must be 0 or a power of two");

/* weak_index.c: slot address -> position in the weak list, built on the first removal. */
struct mosaic_weak_entry {
    VALUE *ptr;                      /* NULL: empty; (VALUE *)1: removed */
    size_t pos;
};
struct mosaic_weak_index {
    struct mosaic_weak_entry *entries;
    size_t capa;                     /* a power of two, or 0 */
    size_t count;                    /* slots in the table */
    size_t used;                     /* entries not empty: slots + tombstones */
    bool built;
    bool unbuildable;                /* a build failed for memory this mark: removals scan the list (mark.c) */
};

/* One thread's marking state (mark.c). The collecting thread's is objspace->mark.main_marker; each
 * parallel marking thread has its own (mark_workers.c). Nothing in it is shared. */
struct mosaic_marker {
    struct mosaic_mark_stack stack;
    struct mosaic_mark_queue queue;
    VALUE parent;                    /* object whose children are being marked (or Qfalse) */
    bool parent_old;
    bool shared;                     /* other markers run: set bits atomically, share work */
    unsigned int depth;              /* depth of the object being scanned, as marked (MOSAIC_MARK_EAGER_DEPTH) */
    unsigned int nest;               /* scans nested on the C stack (MOSAIC_MARK_NEST_MAX) */
    unsigned int base_depth;         /* depth of roots and popped objects: 0, or MOSAIC_MARK_EAGER_DEPTH
                                        (incremental steps: nothing in place, every child pushed) */
    unsigned int pushes;             /* pushes since work was last offered to idle markers */
    size_t weak_count;               /* weak slots it registered */
    size_t marked_by_heap[MOSAIC_HEAP_MAX]; /* slots this marker marked in this phase, by class */
    struct mosaic_ptr_vec *weak_refs; /* where it registers weak slots */
    struct mosaic_weak_index *weak_index; /* their index, built by a remove_weak (weak_index.c) */
    struct mosaic_ptr_vec traced;    /* an evacuating minor GC: the objects it marked (nursery.c) */
};


/* The young space (nursery.c; DESIGN.md, "The nursery"): what an evacuating minor GC records
 * while it marks, and what it moved. */
struct mosaic_nursery {
    bool evacuating;                 /* this minor GC evacuates: marking records and pins (mark.c) */
    struct mosaic_ptr_vec traced;    /* every object this minor traced: first the remembered and
                                      * old wb-unprotected objects it rescanned, then those it marked */
    size_t rescanned;                /* traced[0..rescanned-1] are the rescanned ones */
    size_t evacuations;              /* minor GCs that evacuated */
    size_t moved_objects;            /* objects moved out of nursery pages, all minors */
    size_t stayed_objects;           /* survivors on nursery pages that could not move, all minors */
};

/* Why the latest compaction ran (GC.latest_compact_info[:mosaic_trigger]). */
enum mosaic_compact_trigger {
    MOSAIC_COMPACT_BY_METHOD,        /* GC.compact, verify_compaction_references, Process.warmup, stress */
    MOSAIC_COMPACT_BY_AUTO_COMPACT,  /* GC.auto_compact = true: every major GC */
    MOSAIC_COMPACT_BY_ALWAYS,        /* MOSAIC_AUTO_COMPACT=always: every major GC */
    MOSAIC_COMPACT_BY_FRAGMENTATION, /* the fragmentation policy chose some classes */
};

/* Marking (mark.c, collect.c): the collecting thread's marker, the weak slots found, and
 * what marks cost (for the choice between marking a major in steps and at once). */
struct mosaic_mark_state {
    struct mosaic_marker main_marker; /* the collecting thread's marking state (mark.c) */
    struct mosaic_ptr_vec weak_refs;  /* weak slots registered this mark phase, all markers' */
    struct mosaic_weak_index weak_index; /* weak_index.c; built only after a remove_weak */
    bool aging;                      /* this mark phase ages and promotes what it marks */
    bool overflowed;                 /* a marked object could not be pushed (no memory for the stack): the
                                      * phase's end traces every marked object again (mark.c) */
    size_t last_traced[2];           /* slots traced by the latest minor [0] and major [1] mark phase, plus one (0: none yet) */
    uint64_t latest_ns;              /* the latest mark done at once: MOSAIC_TRACE, the fragmentation policy's
                                      * move budget, the mark cost below (measured even with GC time off) */
    /* What a mark done at once costs (collect.c, mark_cost_observe): for the choice between
     * marking a major in steps and at once (incremental_p). */
    double ns_per_slot;              /* ns per slot traced, moving average over marks done at once (0: none yet) */
    uint64_t minor_peak_ns;          /* the longest recent minor mark: each minor's, or the peak less 1/8 per mark done at once */
};

/* Incremental marking (docs/DESIGN.md, "Incremental marking"; collect.c and mark.c). */
struct mosaic_incremental {
    bool marking;                    /* a major GC is marking in steps: between its pauses too */
    unsigned int reason;             /* its MOSAIC_REASON_* (the sweep and reports read them at its end) */
    double mark_per_slot;            /* slots a step marks per slot a cache takes */
    double live_estimate;            /* L, the slots this mark in steps expects to trace */
    size_t catch_ups;                /* catch-up steps this mark took (collect.c) */
    bool marked_in_steps;            /* the latest cycle's major marked in steps (MOSAIC_TRACE) */
    size_t steps_at_start;           /* stats.incremental_steps when it started */
    size_t traced_by_threads;        /* slots the GC threads marked in this mark's steps */
    struct mosaic_mark_stack retrace; /* objects re-greyed between steps, traced again by the collecting thread alone (mark.c) */
    size_t retrace_queued;           /* entries on it now: at most one per object (page->retrace_bits) */
    bool reserving;                  /* this sweep holds pages back for an incremental major (sweep.c) */
};

/* Generations (generation.c, pace.c); whether they are on is params.generational. */
struct mosaic_generations {
    unsigned int need_major;         /* MOSAIC_REASON_MAJOR_* for the next collection */
    size_t old_objects;
    size_t old_objects_limit;
    size_t old_wb_unprotected_objects;
    size_t old_wb_unprotected_limit;
    size_t last_major_count;         /* stats.count at the latest major GC */
};

/* Compaction (compact.c). */
struct mosaic_compaction {
    bool auto_compact;               /* GC.auto_compact: every major GC compacts */
    bool toward_empty;               /* verify_compaction_references(toward: :empty): move dense pages into empty ones */
    bool expand;                     /* verify_compaction_references(expand_heap/double_heap): add empty pages first */
    bool compacting;                 /* objects are moving; T_MOVED slots exist */
    bool updating_references;        /* rb_gc_impl_mark_and_move updates instead of marking */
    size_t considered[RUBY_T_MASK + 1];  /* latest compaction, per type */
    size_t moved[RUBY_T_MASK + 1];
    size_t moved_up[RUBY_T_MASK + 1];    /* ... of which into a larger class */
    size_t moved_down[RUBY_T_MASK + 1];  /* ... of which into a smaller class */
    /* The fragmentation policy (compact.c, mosaic_compact_select) and the latest compaction. */
    int trigger;                     /* enum mosaic_compact_trigger */
    unsigned int classes;            /* bit h: class h takes part (all for every trigger but fragmentation) */
    size_t budget;                   /* most objects the compaction may move; SIZE_MAX: no bound */
    double move_ns;                  /* measured cost of one move, ns (moving average) */
    uint64_t update_ns;              /* the latest compaction's reference-update pass, ns */
    double occupancy[MOSAIC_HEAP_MAX];     /* per class, as measured after the mark */
    size_t freeable[MOSAIC_HEAP_MAX];      /* per class: occupied pages - pages needed */
    size_t freed[MOSAIC_HEAP_MAX];         /* per class: pages the compaction emptied */
    unsigned int skip[MOSAIC_HEAP_MAX];    /* majors the policy skips the class for */
    unsigned int backoff[MOSAIC_HEAP_MAX]; /* the next skip after a fruitless compaction */
};

/* Finalization (finalize.c). */
struct mosaic_finalizers {
    st_table *table;                 /* obj -> hidden Array of finalizer procs */
    VALUE zombies;                   /* atomic singly linked list through mosaic_zombie.next */
    rb_postponed_job_handle_t job;
    rb_atomic_t running;
};

/* Object ids (objid.c). */
struct mosaic_object_ids {
    st_table *obj_to_id;
    st_table *id_to_obj;
    unsigned long long next_id;
};


/* enter.c: entering and leaving the collector */
void mosaic_gc_enter(mosaic_objspace_t *objspace, unsigned int *lock_lev, bool barrier);
void mosaic_gc_exit(mosaic_objspace_t *objspace, unsigned int *lock_lev);
bool mosaic_gc_allowed_here(void);

/* collect.c: the cycle */
bool mosaic_collect(mosaic_objspace_t *objspace, unsigned int reason);
void mosaic_collect_finish_cycle(mosaic_objspace_t *objspace, unsigned int reason, bool compact, bool by_fragmentation,
                                 uint64_t start_ns, unsigned int *lev);
void mosaic_gc_rest(mosaic_objspace_t *objspace);

/* incremental.c: a major GC that marks in steps */
void mosaic_incremental_start(mosaic_objspace_t *objspace, unsigned int reason, unsigned int *lev);
void mosaic_incremental_step(mosaic_objspace_t *objspace, size_t slots_taken);
/* Catch-up steps: how many a mark in steps may take, and the share of L each marks. */
#define MOSAIC_MARK_CATCH_UPS 16
#define MOSAIC_MARK_CATCH_UP_DIV 8
bool mosaic_incremental_catch_up(mosaic_objspace_t *objspace);
void mosaic_incremental_finish(mosaic_objspace_t *objspace);

/* mark.c: marking and weak references */
void mosaic_mark(mosaic_objspace_t *objspace, VALUE obj, bool pin);
void mosaic_mark_maybe(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_mark_and_move(mosaic_objspace_t *objspace, VALUE *ptr);
void mosaic_mark_weak(mosaic_objspace_t *objspace, VALUE *ptr);
void mosaic_remove_weak(mosaic_objspace_t *objspace, VALUE parent, VALUE *ptr);
void mosaic_mark_phase(mosaic_objspace_t *objspace, bool full);
void mosaic_mark_incremental_start(mosaic_objspace_t *objspace);
bool mosaic_mark_incremental_step(mosaic_objspace_t *objspace, size_t budget);
void mosaic_mark_incremental_finish(mosaic_objspace_t *objspace);
void mosaic_mark_grey(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_mark_grey_again(mosaic_objspace_t *objspace, VALUE obj);
bool mosaic_mark_needs_regrey(VALUE obj);
size_t mosaic_peak_mark_stack_bytes(void);
void mosaic_mark_stack_each(mosaic_objspace_t *objspace, void (*func)(VALUE obj, void *data), void *data);
void mosaic_marked_wb_unprotected_each(mosaic_objspace_t *objspace, void (*func)(VALUE obj, void *data), void *data);
size_t mosaic_verify_retrace_queue(mosaic_objspace_t *objspace);
size_t mosaic_verify_tricolor(mosaic_objspace_t *objspace);
void mosaic_mark_stack_free(struct mosaic_mark_stack *stack);
void mosaic_marker_begin(mosaic_objspace_t *objspace, struct mosaic_marker *marker, bool shared);
void mosaic_marker_drain(mosaic_objspace_t *objspace, struct mosaic_marker *marker);
size_t mosaic_marker_end(mosaic_objspace_t *objspace, struct mosaic_marker *marker);
void mosaic_mark_stack_push_chunk(struct mosaic_mark_stack *stack, struct mosaic_mark_chunk *chunk);
struct mosaic_mark_chunk *mosaic_mark_stack_split(struct mosaic_mark_stack *stack);
struct mosaic_mark_chunk *mosaic_mark_stack_take_chunk(struct mosaic_mark_stack *stack);
bool mosaic_marker_trace(mosaic_objspace_t *objspace, struct mosaic_marker *marker, size_t budget);
size_t mosaic_marker_marked(const struct mosaic_marker *marker);

/* weak_index.c */
enum mosaic_weak_add { MOSAIC_WEAK_ADDED, MOSAIC_WEAK_PRESENT, MOSAIC_WEAK_NO_MEMORY };
enum mosaic_weak_add mosaic_weak_index_insert(struct mosaic_weak_index *index, VALUE *ptr, size_t pos, size_t limit);
bool mosaic_weak_index_remove(struct mosaic_weak_index *index, VALUE *ptr, size_t *pos);
bool mosaic_weak_index_build(struct mosaic_weak_index *index, struct mosaic_ptr_vec *list, size_t limit);
void mosaic_weak_index_reset(struct mosaic_weak_index *index);

/* generation.c: ages, old objects, the remembered set, write barriers */
void mosaic_remember(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_writebarrier(mosaic_objspace_t *objspace, VALUE a, VALUE b);
void mosaic_writebarrier_unprotect(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_writebarrier_remember(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_minor_mark_start(mosaic_objspace_t *objspace, void (*push)(mosaic_objspace_t *, VALUE));
void mosaic_generation_count(mosaic_objspace_t *objspace);
void mosaic_promote_all(mosaic_objspace_t *objspace);
void mosaic_generation_after_fork(mosaic_objspace_t *objspace);

/* sweep.c: sweeping and page reuse */
void mosaic_sweep_prepare(mosaic_objspace_t *objspace);
struct mosaic_page *mosaic_sweep_for_free_page(mosaic_objspace_t *objspace, struct mosaic_heap *heap);
void mosaic_sweep_help(mosaic_objspace_t *objspace);
void mosaic_sweep_rest(mosaic_objspace_t *objspace);
void mosaic_sweep_finish_now(mosaic_objspace_t *objspace);
void mosaic_sweep_page_background(mosaic_objspace_t *objspace, struct mosaic_page *page);

/* compact.c: moving objects, forwarding, reference updating */
void mosaic_compact(mosaic_objspace_t *objspace);
bool mosaic_compact_select(mosaic_objspace_t *objspace);
VALUE mosaic_location(mosaic_objspace_t *objspace, VALUE obj);
bool mosaic_moved_p(VALUE obj);
void mosaic_define_compact(void);
void mosaic_move_object(mosaic_objspace_t *objspace, VALUE src, VALUE dest);

/* nursery.c: the young space's evacuation */
bool mosaic_nursery_movable_p(VALUE obj);
void mosaic_nursery_evacuate(mosaic_objspace_t *objspace);

/* finalize.c: zombies, finalizers */
void mosaic_finalize_init(mosaic_objspace_t *objspace);
void mosaic_zombie_push(mosaic_objspace_t *objspace, VALUE obj, void (*dfree)(void *), void *data);
void mosaic_finalize_deferred(mosaic_objspace_t *objspace);
void mosaic_finalize_mark_roots(mosaic_objspace_t *objspace);
void mosaic_finalize_move(mosaic_objspace_t *objspace, VALUE src, VALUE dest);

/* objid.c: object ids */
void mosaic_objid_init(mosaic_objspace_t *objspace);
void mosaic_objid_free(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_objid_mark_roots(mosaic_objspace_t *objspace);
VALUE mosaic_object_id(mosaic_objspace_t *objspace, VALUE obj);
VALUE mosaic_object_id_to_ref(mosaic_objspace_t *objspace, VALUE id);
VALUE mosaic_objid_for_finalizer(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_objid_move(mosaic_objspace_t *objspace, VALUE src, VALUE dest);

#pragma GCC visibility pop

#endif /* MOSAIC_COLLECT_H */
