/*
 * sweep.c: the sweep phase.
 *
 * Owns: turning a marked page into a freelist, freeing dead objects exactly once (weak VM
 * references, object id, rb_gc_obj_free, FREEOBJ events), deferring zombies, moving empty
 * pages to the empty-page pool (page.c), queueing pages with free slots (page_queue.c),
 * and lazy sweeping driven by allocation.
 *
 * Invariants:
 *  - After mosaic_sweep_prepare every page is before_sweep and no cache holds a slot
 *    (collect.c handed them back). Pages created afterwards are not before_sweep and the
 *    sweeper skips them.
 *  - A page is swept at most once per cycle. Its freelist survives from cycle to cycle (every
 *    T_NONE slot is already on it, see alloc.c); the sweep only pushes the objects it frees.
 *    It never writes to a slot that was already free, nor to a live one: a GC in a forked
 *    child dirties only the pages where it actually frees something. The same holds for the
 *    page's metadata: the per-cycle flags live in page->cycle (packed by arena), and the
 *    struct's own fields and bitmaps are stored only when they change.
 *  - Every page is swept before the next mark phase starts (collect.c calls
 *    mosaic_sweep_finish_now first), so garbage_object_p only needs before_sweep + mark bit.
 *  - Sweeping runs with during_gc set, under the VM lock, with other Ractors stopped.
 */
#include <stdlib.h>

#include "core/mosaic.h"

/* Frees one dead object. Returns true when its slot is free now (false: it became a zombie,
 * counted by mosaic_zombie_push, and keeps its slot until its finalizer has run). */
static inline bool
free_one(mosaic_objspace_t *objspace, VALUE obj, bool hook)
{
    if (hook) rb_gc_event_hook(obj, RUBY_INTERNAL_EVENT_FREEOBJ);
#if MOSAIC_SIZE_HISTOGRAM
    mosaic_size_histogram_death(obj);  /* before the free: the object is still whole */
#endif

    bool has_object_id = RB_FL_TEST_RAW(obj, RUBY_FL_SEEN_OBJ_ID);
    rb_gc_obj_free_vm_weak_references(obj);
    if (rb_gc_obj_free(objspace, obj)) {
        if (has_object_id) mosaic_objid_free(objspace, obj);
        RBASIC(obj)->flags = 0;
        return true;
    }
    return false;
}

/* Flags whose object is in a VM table that its free must edit, whatever its type: generic
 * ivars (FL_EXIVAR), the object-id tables (SEEN_OBJ_ID), finalizers (FL_FINALIZE). Neither the
 * trivial frees nor the background sweeper's take such an object. */
#define FLAGS_IN_VM_TABLES (RUBY_FL_EXIVAR | RUBY_FL_SEEN_OBJ_ID | RUBY_FL_FINALIZE)

/* Whether freeing a dead object is only clearing its header: CRuby's rb_gc_obj_free and
 * rb_gc_obj_free_vm_weak_references do nothing else for it (3.4.5: gc.c, array.c rb_ary_free,
 * string.c rb_str_free). Read from the flags word, which the sweep loads anyway:
 *  - no generic ivars, object id or finalizer (EXIVAR, SEEN_OBJ_ID, FINALIZE);
 *  - an embedded array (its elements are in the slot; RARRAY_EMBED_FLAG), an embedded string
 *    not in the frozen-string table (RSTRING_NOEMBED, RSTRING_FSTR clear), a heap float, a
 *    rational or a complex (their values are VALUEs in the slot);
 *  - an embedded T_OBJECT (ROBJECT_EMBED) whose shape is not "too complex": CRuby turns an object
 *    too complex (its ivars in an st_table) without clearing ROBJECT_EMBED, and rb_gc_obj_free
 *    asks the shape first (rb_shape_obj_too_complex); so does this, through gc.h's
 *    rb_gc_get_shape.
 * Most of what a program drops is of these kinds (all of array-new's, most of strings' and
 * objects'): the two calls into CRuby and their type switches were a third of the sweep's
 * instructions per dead object (cachegrind, docs/PERFORMANCE.md). */
static inline bool
free_is_trivial_p(VALUE obj, VALUE flags)
{
    if (flags & FLAGS_IN_VM_TABLES) return false;
    switch (flags & RUBY_T_MASK) {
      case T_ARRAY:
        return (flags & RARRAY_EMBED_FLAG) != 0;
      case T_STRING:
        return !(flags & (RSTRING_NOEMBED | RSTRING_FSTR));
      case T_OBJECT:
        return (flags & ROBJECT_EMBED) && rb_gc_get_shape(obj) != MOSAIC_TOO_COMPLEX_SHAPE_ID;
      case T_FLOAT: case T_RATIONAL: case T_COMPLEX:
        return true;
      default:
        return false;
    }
}

/* bits &= keep, atomically when it changes something: write barriers set remembered and
 * wb-unprotected bits with atomic ORs (generation.c), and they run while the background
 * sweeper sweeps the page (a live old object in the same word as dead ones), so a plain
 * read-modify-write here could drop one. The read is atomic too: a plain read concurrent
 * with a barrier's OR is a data race (ThreadSanitizer reported it), though the bits it
 * decides on, the dead slots', are ones no barrier sets. */
static inline void
bits_keep(mosaic_bits_t *word, mosaic_bits_t keep)
{
    if (__atomic_load_n(word, __ATOMIC_RELAXED) & ~keep) __atomic_fetch_and(word, keep, __ATOMIC_RELAXED);
}

/* bits &= keep for a word only sweeping and marking change: a plain read, and a store only
 * when it changes something (untouched words stay shared with a forked parent). The store is
 * atomic because the write barrier reads old bits of the page's live objects while the
 * background sweeper runs (their bits are the same before and after). */
static inline void
bits_store_keep(mosaic_bits_t *word, mosaic_bits_t keep)
{
    mosaic_bits_t bits = *word;
    if (bits & ~keep) __atomic_store_n(word, bits & keep, __ATOMIC_RELAXED);
}

/* The unmarked slots of bitmap word w, each prefetched: the sweep reads every unmarked
 * slot's header (free slot or dead object), and those reads were most of its time (a cache
 * miss each; perf on RDoc put 77% of the sweep loop's samples on that one load). */
static inline mosaic_bits_t
prefetch_unmarked(const struct mosaic_page *page, const struct mosaic_heap *heap, size_t w)
{
    mosaic_bits_t dead = heap->slot_bits[w] & ~page->mark_bits[w];
    for (mosaic_bits_t d = dead; d; d &= d - 1) {
        __builtin_prefetch((const void *)mosaic_slot_at(page, w * 64 + (size_t)__builtin_ctzll(d)));
    }
    return dead;
}

/* Whether freeing `obj` touches nothing but the object and the buffers it malloc'd, so that
 * the background sweeper may free it while the mutator runs (bg_sweep.c). rb_gc_obj_free of
 * these types only frees buffers (ruby_xfree: thread-safe, malloc.c) when none of the flags
 * below is set; each flag, and every other type, reaches VM tables or runs code: generic
 * ivars (FL_EXIVAR), the object-id tables (SEEN_OBJ_ID), finalizers (FL_FINALIZE, a
 * zombie), the fstring table (RSTRING_FSTR), and for other types method tables, subclass
 * lists, dfree, symbols, call caches.
 * Of the imemos (CRuby 3.4.5's imemo.c rb_imemo_free, gc.c rb_gc_obj_free_vm_weak_references),
 * those whose free does nothing (cref, svar, throw_data, ifunc, memo) or frees only the
 * object's own buffer (env: its copy of the frame): none is in a VM table, and nothing reads
 * a dead one. Left to the mutator: callinfo (the VM's callinfo table, a shared kwarg count),
 * callcache (read by class call-cache tables after a garbage check), ment (method
 * definitions' reference counts), iseq, constcache, tmpbuf, parser_strterm. On RDoc the
 * svars of regexp matches ($~) were 3.3 of the 3.8 million objects left to the mutator. */
#define MOSAIC_IMEMO_BACKGROUND_SAFE \
    (1u << MOSAIC_IMEMO_ENV | 1u << MOSAIC_IMEMO_CREF | 1u << MOSAIC_IMEMO_SVAR | \
     1u << MOSAIC_IMEMO_THROW_DATA | 1u << MOSAIC_IMEMO_IFUNC | 1u << MOSAIC_IMEMO_MEMO)

static inline bool
background_safe_p(VALUE obj)
{
    VALUE flags = RBASIC(obj)->flags;
    if (flags & FLAGS_IN_VM_TABLES) return false;
    switch (flags & RUBY_T_MASK) {
      case T_STRING:
        return !(flags & RSTRING_FSTR);
      case T_OBJECT: case T_ARRAY: case T_HASH: case T_FLOAT: case T_BIGNUM:
      case T_STRUCT: case T_RATIONAL: case T_COMPLEX: case T_MATCH:
        return true;
      case T_IMEMO:
        return (MOSAIC_IMEMO_BACKGROUND_SAFE >> mosaic_imemo_kind(obj)) & 1;
      default:
        return false;
    }
}

enum sweep_mode {
    SWEEP_ALL,         /* the mutator sweeps the page whole */
    SWEEP_BACKGROUND,  /* the background sweeper: background_safe_p objects only, the others are
                        * left in leftover_bits */
    SWEEP_LEFTOVERS,   /* the mutator frees what the background sweeper left */
};

/* Sweeps one page: frees its unmarked objects (in SWEEP_LEFTOVERS: those of leftover_bits)
 * and pushes their slots on the page's freelist. One bitmap word at a time: a word whose
 * slots are all marked costs one load, and the GC bits of every unmarked slot (freed, already
 * free, left over, or a zombie's) are cleared word-wise, so the next object in a freed slot
 * starts young and protected. Slots are visited downwards so the rebuilt freelist hands them
 * out upwards. Returns the slots freed; *empty counts unmarked slots that were free already.
 * It writes only this page's freelist and bitmaps, and reads no other page's state: the
 * background sweeper runs it while the mutator runs (bg_sweep.c). */
static size_t
page_sweep(mosaic_objspace_t *objspace, struct mosaic_page *page, enum sweep_mode mode, size_t *empty)
{
    const struct mosaic_heap *heap = page->heap;
    bool hook = mode != SWEEP_BACKGROUND && (objspace->hook_events & RUBY_INTERNAL_EVENT_FREEOBJ);
    /* A FREEOBJ hook sees every free, and the size histogram every death (free_one). */
    bool trivial_frees = !hook && !MOSAIC_SIZE_HISTOGRAM;
    size_t freed = 0;
    *empty = 0;
    struct mosaic_free_slot *head = page->freelist;

    size_t w = mosaic_page_bitmap_words(page);
    mosaic_bits_t next_dead = mode == SWEEP_LEFTOVERS ? 0 : prefetch_unmarked(page, heap, w - 1);
    while (w-- > 0) {
        mosaic_bits_t keep = page->mark_bits[w];
        mosaic_bits_t dead, leftover = 0;
        if (mode == SWEEP_LEFTOVERS) {
            dead = page->leftover_bits[w];
            page->leftover_bits[w] = 0;
        }
        else {
            dead = next_dead;
            /* The next word's slots are fetched while this word's are freed. */
            next_dead = w > 0 ? prefetch_unmarked(page, heap, w - 1) : 0;
        }
        if (!dead) continue;
        while (dead) {
            int b = 63 - __builtin_clzll(dead);
            mosaic_bits_t bit = (mosaic_bits_t)1 << b;
            dead &= ~bit;
            VALUE obj = mosaic_slot_at(page, w * 64 + (size_t)b);
            VALUE flags = RBASIC(obj)->flags;
            if (flags == 0) {
                (*empty)++;   /* already on the freelist: leave the slot untouched */
                continue;
            }
            if (trivial_frees && free_is_trivial_p(obj, flags)) {
                /* A subset of what the background sweeper may free (background_safe_p). */
                MOSAIC_ASSERT(background_safe_p(obj));
                RBASIC(obj)->flags = 0;
            }
            else {
                if ((flags & RUBY_T_MASK) == T_ZOMBIE) continue;
                if (mode == SWEEP_BACKGROUND && !background_safe_p(obj)) {
                    leftover |= bit;
                    continue;
                }
                if (!free_one(objspace, obj, hook)) continue;  /* became a zombie */
            }
            freed++;
            struct mosaic_free_slot *slot = (struct mosaic_free_slot *)obj;
            slot->next = head;
            head = slot;
        }
        if (mode == SWEEP_LEFTOVERS) continue;  /* the background sweep cleared the bits */
        if (mode == SWEEP_BACKGROUND) page->leftover_bits[w] = leftover;
        bits_store_keep(&page->age0_bits[w], keep);
        bits_store_keep(&page->age1_bits[w], keep);
        bits_store_keep(&page->old_bits[w], keep);
        bits_keep(&page->wb_unprotected_bits[w], keep);
        bits_keep(&page->remembered_bits[w], keep);
    }

    MOSAIC_STORE_CHANGED(page->freelist, head);
    return freed;
}

/* The background sweeper's sweep of `page` (bg_sweep.c, its thread, while the mutator runs):
 * the page's result waits in the page (free_slots, bg_freed, bg_leftovers) for the mutator's
 * lazy sweep to take it (heap_sweep_step). */
void
mosaic_sweep_page_background(mosaic_objspace_t *objspace, struct mosaic_page *page)
{
    size_t words = mosaic_page_bitmap_words(page);
    size_t empty;
    mosaic_malloc_tally_begin();
    size_t freed = page_sweep(objspace, page, SWEEP_BACKGROUND, &empty);
    mosaic_malloc_tally_end(objspace);
    bool leftovers = false;
    for (size_t w = 0; w < words && !leftovers; w++) leftovers = page->leftover_bits[w] != 0;
    page->cycle->bg_leftovers = leftovers;
    page->cycle->bg_freed = (uint32_t)freed;
    MOSAIC_STORE_CHANGED(page->free_slots, (uint32_t)(freed + empty));
}

/* The mutator sweeps `page` (or takes the background sweeper's result and frees what it
 * left), and sets its free_slots. Returns them. */
static size_t
page_sweep_here(mosaic_objspace_t *objspace, struct mosaic_page *page)
{
    size_t empty, freed;
    mosaic_malloc_tally_begin();
    if (mosaic_bg_sweep_claim(objspace, page)) {
        freed = page_sweep(objspace, page, SWEEP_ALL, &empty);
        MOSAIC_STORE_CHANGED(page->free_slots, (uint32_t)(freed + empty));
    }
    else {
        page->heap->total_freed_objects += page->cycle->bg_freed;
        objspace->stats.background_freed_objects += page->cycle->bg_freed;
        freed = page->cycle->bg_leftovers ? page_sweep(objspace, page, SWEEP_LEFTOVERS, &empty) : 0;
        if (freed) page->free_slots += (uint32_t)freed;
    }
    mosaic_malloc_tally_end(objspace);
    page->cycle->before_sweep = false;
    page->heap->total_freed_objects += freed;
    return page->free_slots;
}

/* Sweeps heap->pages[sweep_index] and decides what happens to it: an empty page goes back to
 * the OS while the class is above what it should keep (freeable_pages, pace.c), else to the
 * empty-page pool (any class may reuse it; page.c gives pages idle there back to the OS); a
 * page with room is queued by fullness; a full one is left alone. Returns its free slots
 * when it was queued, else 0. */
static size_t
heap_sweep_step(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    struct mosaic_page *page = heap->pages[heap->sweep_index];
    if (!page->cycle->before_sweep) {
        heap->sweep_index++;
        return 0;
    }

    size_t free_slots = page_sweep_here(objspace, page);
    if (free_slots == page->total_slots && page->final_slots == 0 && objspace->heap_walk_depth == 0) {
        mosaic_heap_retire_empty_page(objspace, heap, heap->sweep_index);
        /* The last page moved into sweep_index: do not advance. */
        return 0;
    }

    heap->sweep_index++;
    if (free_slots > 0) {
        /* Before a major GC that will mark in steps, every other page with room is held back
         * for the mutator to allocate from while it marks (collect.c): free room the heap
         * already has, not growth. Without it that major starts when the heap is full, and
         * its first step finds no page left: it would finish in one pause. */
        if (RB_UNLIKELY(objspace->incremental.reserving) && heap->reserve_slots < heap->reserve_target && (heap->sweep_index & 1)) {
            page->free_next = heap->reserve;
            heap->reserve = page;
            heap->reserve_slots += free_slots;
            return 0;
        }
        mosaic_heap_queue_free_page(heap, page);
        return free_slots;
    }
    return 0;
}

static void
update_lazy_sweeping(mosaic_objspace_t *objspace)
{
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        if (objspace->heaps[i].sweep_index < objspace->heaps[i].page_count) return;
    }
    if (objspace->lazy_sweeping) {
        objspace->lazy_sweeping = false;
        /* The memory figures first: the pacer reads them (the overhead, the malloc trim). */
        mosaic_memory_after_sweep(objspace);
        mosaic_pace_after_sweep(objspace);
        rb_gc_event_hook(0, RUBY_INTERNAL_EVENT_GC_END_SWEEP);
        objspace->gc_state = MOSAIC_STATE_NONE;
    }
}

static void
after_sweep_work(mosaic_objspace_t *objspace)
{
    if (objspace->finalize.zombies && !ruby_free_at_exit_p()) {
        rb_postponed_job_trigger(objspace->finalize.job);
    }
}

/* Every page becomes before_sweep and leaves the free-page queue (the sweep queues it again).
 * World stopped, caches handed back. */
void
mosaic_sweep_prepare(mosaic_objspace_t *objspace)
{
    objspace->incremental.reserving = mosaic_incremental_wanted(objspace);
    mosaic_bg_sweep_stop(objspace);   /* idle already (the previous sweep finished); the list is rebuilt */
    mosaic_free_handoff_drain_all(objspace);   /* what the thread freed last cycle, before this one's */
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        for (int b = 0; b < MOSAIC_FREE_BUCKETS; b++) heap->free_pages[b] = NULL;
        heap->nursery_free = NULL;
        heap->reserve = NULL;
        heap->reserve_slots = 0;
        heap->reserve_target = heap->marked_slots / 4;
        heap->sweep_index = 0;
        objspace->malloc.freed_by_sweep = 0;
        for (size_t j = 0; j < heap->page_count; j++) {
            struct mosaic_page *page = heap->pages[j];
            page->cycle->before_sweep = true;
            MOSAIC_STORE_CHANGED(page->free_next, NULL);
        }
    }
    mosaic_bg_sweep_list(objspace);
    objspace->lazy_sweeping = true;
}

/* Sweeps every page that is left. Caller is inside the GC (during_gc, VM lock). The
 * background sweeper, if it may run, takes pages too (from its list, while this loop takes
 * them in each class's order): the pause's sweep on two cores. With one GC thread (one CPU
 * the process may use) it is not started for that: it would only take turns with this loop,
 * and the pause would wait for it to be scheduled and stop. It is idle when this returns
 * (marking or compaction may follow). */
void
mosaic_sweep_rest(mosaic_objspace_t *objspace)
{
    if (!objspace->lazy_sweeping) return;
    if (objspace->heap_walk_depth == 0 && objspace->params.gc_threads > 1) mosaic_bg_sweep_start(objspace);
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        while (heap->sweep_index < heap->page_count) {
            heap_sweep_step(objspace, heap);
        }
    }
    mosaic_bg_sweep_stop(objspace);
    mosaic_free_handoff_drain_all(objspace);   /* a whole sweep done: its frees too */
    update_lazy_sweeping(objspace);
}

/* The frame of a sweep from outside the GC (allocation slow path or API, VM lock held): enter
 * the collector (other Ractors stopped), count the time as sweeping, and once out of it queue
 * the finalizers the sweep made due. Shared by the three callers below. */
static uint64_t
outside_sweep_begin(mosaic_objspace_t *objspace, unsigned int *lev)
{
    mosaic_gc_enter(objspace, lev, true);
    return objspace->measure_time ? mosaic_now_ns() : 0;
}

static void
outside_sweep_end(mosaic_objspace_t *objspace, unsigned int lev, uint64_t start)
{
    if (objspace->measure_time) objspace->stats.sweeping_time_ns += mosaic_now_ns() - start;
    mosaic_gc_exit(objspace, &lev);
    after_sweep_work(objspace);
}

/* Lazy sweeping from the allocation slow path (VM lock held, outside the GC): sweeps a batch
 * of `heap`'s pages, until they hold a quarter page of free slots or MOSAIC_SWEEP_BATCH pages
 * were swept, and returns the fullest queued page, dequeued, or NULL. A batch, not one page:
 * each step pays for entering the collector (hooks, clock), so it should free enough to be
 * worth it, and choosing the fullest of several pages keeps allocation dense. Other Ractors
 * are stopped (the barrier costs nothing when there is only one): freeing an object touches
 * VM structures they may be using (a dead class's superclass's subclass list, the object-id
 * tables, heap walk snapshots), as in the default GC's gc_continue. */
#define MOSAIC_SWEEP_BATCH 16
struct mosaic_page *
mosaic_sweep_for_free_page(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    unsigned int lev;
    size_t found = 0, pages = 0, want = heap->slots_per_page / 4;

    uint64_t start = outside_sweep_begin(objspace, &lev);
    while (heap->sweep_index < heap->page_count && found < want && pages < MOSAIC_SWEEP_BATCH) {
        found += heap_sweep_step(objspace, heap);
        pages++;
    }
    struct mosaic_page *page = mosaic_heap_dequeue_free_page(heap);
    update_lazy_sweeping(objspace);
    outside_sweep_end(objspace, lev, start);
    return page;
}

/* A class whose sweep is done ran dry while other classes still sweep lazily and a major GC
 * that marks in steps waits for the whole sweep to end (collect.c, mosaic_incremental_start_due;
 * this sweep holds pages back for it): the refill sweeps a batch of the other classes' pages
 * (MOSAIC_SWEEP_BATCH at most, from the allocation slow path, VM lock held), so that the sweep
 * ends and the major starts within a few refills. Without it a class that seldom allocates
 * (only the Ruby thread's sweep advances sweep_index) keeps the sweep open while the dry class
 * takes pooled and fresh pages and fills them with garbage the waiting major would have let it
 * reuse (redblack: a few pages of the 160-640 byte classes left unswept while the 40-byte class
 * took the pool's 15 MiB and 7.6 MiB of fresh pages before the major started; peak RSS 69.4
 * against 60.9 MB with the help). */
void
mosaic_sweep_help(mosaic_objspace_t *objspace)
{
    if (!objspace->lazy_sweeping) return;
    unsigned int lev;
    size_t pages = 0;
    uint64_t start = outside_sweep_begin(objspace, &lev);
    for (int i = 0; i < MOSAIC_HEAP_COUNT && pages < MOSAIC_SWEEP_BATCH; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        while (heap->sweep_index < heap->page_count && pages < MOSAIC_SWEEP_BATCH) {
            heap_sweep_step(objspace, heap);
            pages++;
        }
    }
    update_lazy_sweeping(objspace);
    outside_sweep_end(objspace, lev, start);
}

/* Finishes a pending lazy sweep from outside the GC. */
void
mosaic_sweep_finish_now(mosaic_objspace_t *objspace)
{
    if (!objspace->lazy_sweeping) return;
    unsigned int lev;
    uint64_t start = outside_sweep_begin(objspace, &lev);
    mosaic_sweep_rest(objspace);
    outside_sweep_end(objspace, lev, start);
}
