/*
 * alloc.c: object allocation.
 *
 * Owns: the per-Ractor caches (one private freelist per size class), the lock-free fast path
 * that pops a slot, and the slow path that refills a cache under the VM lock: from a swept
 * page, by lazily sweeping, by growing the heap within its budget, or by collecting.
 *
 * Invariants:
 *  - Every free (T_NONE) slot is on exactly one freelist: its page's, or the cache's that
 *    took that page's list. A cache's list is the remainder of one page's list, from a page
 *    already swept this cycle. Every collection makes every cache hand its remainder back to
 *    its page before marking (mosaic_caches_clear), so the sweep never needs to relink (and
 *    so write to) a slot that was already free: a GC in a forked child leaves those pages
 *    shared.
 *  - A new object is initialised as CRuby expects: flags, klass, v1..v3 (the rest of the slot
 *    is not cleared, as under the default GC: CRuby initialises what it uses).
 *  - Allocation never happens inside a collection (during_gc): that is a bug, reported.
 */
#include <stdlib.h>

#include "core/mosaic.h"

/* =============================================================== caches */

struct mosaic_cache *
mosaic_cache_new(mosaic_objspace_t *objspace)
{
    struct mosaic_cache *cache = calloc(1, sizeof(struct mosaic_cache));
    if (!cache) rb_memerror();
    objspace->live_ractor_cache_count++;
    return cache;
}

static void
cache_flush_counts(mosaic_objspace_t *objspace, struct mosaic_cache *cache)
{
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        objspace->heaps[i].total_allocated_objects += cache->heaps[i].allocated;
        cache->heaps[i].allocated = 0;
    }
}

/* Hands every free slot the cache still holds back to its page (VM lock held). */
static void
cache_clear_i(void *cache_ptr, void *data)
{
    struct mosaic_cache *cache = cache_ptr;
    cache_flush_counts((mosaic_objspace_t *)data, cache);
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_free_slot *head = cache->heaps[i].freelist;
        if (!head) continue;
        /* All of these slots come from one page: put them back in front of its list. */
        struct mosaic_page *page = mosaic_page_of((VALUE)head);
        struct mosaic_free_slot *tail = head;
        while (tail->next) tail = tail->next;
        tail->next = page->freelist;
        page->freelist = head;
        cache->heaps[i].freelist = NULL;
    }
}

/* A Ractor ends: its free slots go back to their pages, not into a leak. */
void
mosaic_cache_free(mosaic_objspace_t *objspace, struct mosaic_cache *cache)
{
    unsigned int lev = rb_gc_vm_lock();
    cache_clear_i(cache, objspace);
    objspace->live_ractor_cache_count--;
    rb_gc_vm_unlock(lev);
    free(cache);
}

/* Called with the world stopped (or the VM lock held and no allocation possible). */
void
mosaic_caches_clear(mosaic_objspace_t *objspace)
{
    rb_gc_ractor_newobj_cache_foreach(cache_clear_i, objspace);
}

struct allocated_sum {
    int heap_index;
    size_t sum;
};

static void
cache_sum_i(void *cache_ptr, void *data)
{
    struct allocated_sum *s = data;
    s->sum += ((struct mosaic_cache *)cache_ptr)->heaps[s->heap_index].allocated;
}

static void
cache_sum_all_i(void *cache_ptr, void *data)
{
    const struct mosaic_cache *cache = cache_ptr;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) *(size_t *)data += cache->heaps[i].allocated;
}

/* Objects ever allocated in a size class, counting what caches have not flushed yet. */
size_t
mosaic_heap_total_allocated(mosaic_objspace_t *objspace, int heap_index)
{
    struct allocated_sum s = { heap_index, 0 };
    rb_gc_ractor_newobj_cache_foreach(cache_sum_i, &s);
    return objspace->heaps[heap_index].total_allocated_objects + s.sum;
}

/* The same over every class, in one pass over the caches (GC.stat(:total_allocated_objects)
 * is read at every Rails instrumentation event). */
size_t
mosaic_total_allocated(mosaic_objspace_t *objspace)
{
    size_t sum = 0;
    rb_gc_ractor_newobj_cache_foreach(cache_sum_all_i, &sum);
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) sum += objspace->heaps[i].total_allocated_objects;
    return sum;
}

/* Objects allocated and not freed (live, zombies, garbage not swept yet), all classes. */
size_t
mosaic_live_slots(mosaic_objspace_t *objspace)
{
    size_t gone = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) gone += objspace->heaps[i].total_freed_objects + objspace->heaps[i].final_slots;
    return mosaic_total_allocated(objspace) - gone;
}

/* ============================================================ slow path */

/* A page with free slots, without growing: the fullest queued one, else by sweeping more of
 * the class (lazily), else an empty page from the pool (memory already resident). A class
 * swept out while a major GC waits for the sweep's end helps the other classes' sweep first
 * (sweep.c, mosaic_sweep_help): once it ends, the next refill starts that major. */
static struct mosaic_page *
heap_take_free_page(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    struct mosaic_page *page = mosaic_heap_dequeue_free_page(heap);
    if (page) return page;
    while (objspace->lazy_sweeping && heap->sweep_index < heap->page_count) {
        if ((page = mosaic_sweep_for_free_page(objspace, heap)) != NULL) return page;
        /* A batch of empty pages went to the pool: take one back rather than sweeping the
         * whole class in this one allocation. */
        if (objspace->pool.head && (page = mosaic_pool_take(objspace, heap)) != NULL) return page;
    }
    if (objspace->lazy_sweeping && objspace->incremental.reserving) mosaic_sweep_help(objspace);
    return mosaic_pool_take(objspace, heap);
}

/* Adds a fresh page to the class if a budget allows (its own first, then the shared one), or
 * if forced (GC disabled, or a collection did not free enough). */
static struct mosaic_page *
heap_grow(mosaic_objspace_t *objspace, struct mosaic_heap *heap, bool force)
{
    bool own = heap->allocatable_slots > 0;
    bool shared = objspace->pace.allocatable_bytes >= MOSAIC_PAGE_SIZE;
    if (!force && !own && !shared) return NULL;
    if (!force && mosaic_pace_over_limit(objspace)) return NULL;
    if (!force && !own && mosaic_pace_grown_enough(objspace)) return NULL;
    struct mosaic_page *page = mosaic_page_new(objspace, heap);
    if (!page) return NULL;
    /* Atomic: another Ractor's malloc reads it without the VM lock (malloc.c); every writer
     * holds that lock, so the plain read here sees the latest value. */
    __atomic_store_n(&objspace->pace.grown_since_gc, objspace->pace.grown_since_gc + MOSAIC_PAGE_SIZE, __ATOMIC_RELAXED);
    if (own) {
        heap->allocatable_slots = heap->allocatable_slots > page->total_slots
            ? heap->allocatable_slots - page->total_slots : 0;
    }
    else if (shared) {
        objspace->pace.allocatable_bytes -= MOSAIC_PAGE_SIZE;
    }
    return page;
}

/* A page that becomes a nursery page while the class has fewer than MOSAIC_NURSERY_PAGES: from
 * the pool, else a fresh page within the growth budget (heap_grow). NULL otherwise. */
static struct mosaic_page *
nursery_page_take(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    if (heap->nursery_pages >= objspace->params.nursery_pages) return NULL;
    struct mosaic_page *page = mosaic_pool_take(objspace, heap);
    if (!page) page = heap_grow(objspace, heap, false);
    if (!page) return NULL;
    mosaic_page_make_nursery(heap, page);
    return page;
}

/* Returns the freelist of a page for heap `heap_index`, or NULL when memory is exhausted.
 * Takes the VM lock; may sweep, grow, or collect. */
static struct mosaic_free_slot *
cache_refill(mosaic_objspace_t *objspace, struct mosaic_cache *cache, size_t heap_index)
{
    struct mosaic_heap *heap = &objspace->heaps[heap_index];
    struct mosaic_free_slot *slot = NULL;
    mosaic_free_handoff_drain_some(objspace);   /* the background sweeper's frees (free_handoff.c) */
    unsigned int lev = rb_gc_vm_lock();

    /* A collection empties this cache; a slot another path left there is still good. */
    if ((slot = cache->heaps[heap_index].freelist) != NULL) goto done;

    /* A major GC marking in steps: a step per refill, sized by the page the refill takes
     * (collect.c). It may end the marking, which empties this cache. */
    if (RB_UNLIKELY(objspace->incremental.marking)) {
        mosaic_incremental_step(objspace, heap->slots_per_page);
        if ((slot = cache->heaps[heap_index].freelist) != NULL) goto done;
    }
    else if (RB_UNLIKELY(objspace->gen.need_major) && mosaic_incremental_start_due(objspace)) {
        /* The pacer asked for a major GC that marks in steps, and the sweep has held pages
         * back for it: it starts now (its start pause), with room to allocate while marking. */
        mosaic_collect(objspace, MOSAIC_REASON_NEWOBJ);
        if ((slot = cache->heaps[heap_index].freelist) != NULL) goto done;
    }

    bool collected = false;
    for (;;) {
        /* Read once: another Ractor's GC.disable or GC.enable (no lock) may land between the
         * grow and the collect below. Read twice, a refill could grow without force (GC
         * enabled), then not collect either (GC now disabled), and report no memory. */
        bool dont_gc = mosaic_dont_gc(objspace);
        /* The nursery first (nursery.c): a swept nursery page, else a new one. */
        struct mosaic_page *page = heap->nursery_free ? mosaic_heap_dequeue_free_page(heap) : NULL;
        if (!page && objspace->params.nursery_pages) page = nursery_page_take(objspace, heap);
        if (!page) page = heap_take_free_page(objspace, heap);
        if (!page) page = heap_grow(objspace, heap, dont_gc || collected);
        /* Allocation outran a mark in steps: catch up, and grow by a page while marking lasts
         * (collect.c, mosaic_incremental_catch_up), unless over the soft memory limit: then
         * the collection below finishes the mark first. If the step ended the mark, its
         * sweep has the room: look again. */
        if (!page && !collected && objspace->incremental.marking && mosaic_incremental_catch_up(objspace)) {
            if (!objspace->incremental.marking) continue;
            if (!mosaic_pace_over_limit(objspace)) {
                page = heap_grow(objspace, heap, true);
                if (page) heap->catch_up_slots += page->total_slots;
            }
        }
        if (!page && !collected && !dont_gc) {
            collected = true;
            /* Allocation outran an incremental mark: it finishes in this collection. */
            if (objspace->incremental.marking) heap->force_incremental_finishes++;
            mosaic_collect(objspace, MOSAIC_REASON_NEWOBJ);
            if ((slot = cache->heaps[heap_index].freelist) != NULL) goto done;
            continue;
        }
        if (!page) break;  /* out of memory */
        if (page->freelist) {
            slot = page->freelist;
            page->freelist = NULL;
            break;
        }
    }

  done:
    rb_gc_vm_unlock(lev);
    return slot;
}

/* Whether an allocation must look at the collector's state before taking a slot: a collection
 * running (a bug if this thread is its collector), GC.stress, or a GC malloc asked for.
 * Relaxed atomic loads, without the VM lock: another Ractor's malloc sets malloc_gc_pending
 * (malloc.c). As plain loads the compiler read the neighbouring flags as one word, dont_gc
 * with them, which another Ractor writes (GC.disable, mosaic_gc_hold): ThreadSanitizer
 * reported that pair. */
static inline bool
gc_work_pending(mosaic_objspace_t *objspace)
{
    return __atomic_load_n(&objspace->during_gc, __ATOMIC_RELAXED) ||
        __atomic_load_n(&objspace->gc_stress, __ATOMIC_RELAXED) ||
        __atomic_load_n(&objspace->malloc_gc_pending, __ATOMIC_RELAXED);
}

static void
new_obj_slow_checks(mosaic_objspace_t *objspace)
{
    if (RB_UNLIKELY(objspace->during_gc)) {
        /* Checked under the VM lock, in the default GC's order: during_gc is read here
         * without the lock, so another Ractor's collection may be what set it. If it is still
         * set once this thread holds the lock (recursively), this thread is the collector:
         * a bug. */
        unsigned int lev = rb_gc_vm_lock();
        bool inside = objspace->during_gc;
        rb_gc_vm_unlock(lev);
        if (inside) {
            mosaic_set_dont_gc(objspace, true);
            objspace->during_gc = false;
            if (rb_memerror_reentered()) rb_memerror();
            rb_bug("Mosaic: object allocation during garbage collection");
        }
    }
    if (objspace->gc_stress && !mosaic_dont_gc(objspace)) {
        mosaic_collect(objspace, MOSAIC_REASON_STRESS);
    }
    else if (__atomic_load_n(&objspace->malloc_gc_pending, __ATOMIC_RELAXED)) {
        /* Cleared even while GC is disabled, so allocation leaves the slow path. */
        __atomic_store_n(&objspace->malloc_gc_pending, false, __ATOMIC_RELAXED);
        if (!mosaic_dont_gc(objspace)) mosaic_collect(objspace, MOSAIC_REASON_MALLOC);
    }
}

#if MOSAIC_CHECK
/* MOSAIC_STRESS_MINOR's collection. The next interval is computed under the VM lock: the live
 * count walks every Ractor's cache, and the list of Ractors changes only under that lock.
 * With MOSAIC_STRESS_COMPACT=1 it is a major GC that compacts, every other one toward the
 * emptiest pages (as verify_compaction_references(toward: :empty)) so that objects move even in
 * a heap already compacted: objects move at every kind of allocation point, and each move is
 * verified (as after any GC of the checking build). */
static void
stress_minor_collect(mosaic_objspace_t *objspace)
{
    unsigned int lev = rb_gc_vm_lock();
    if (objspace->params.stress_compact) {
        objspace->compact.toward_empty = (objspace->checks.stress_compactions++ & 1) != 0;
        mosaic_collect(objspace, MOSAIC_REASON_STRESS | MOSAIC_REASON_FULL_MARK | MOSAIC_REASON_COMPACT);
        objspace->compact.toward_empty = false;
    }
    else {
        mosaic_collect(objspace, MOSAIC_REASON_STRESS);
    }
    size_t interval = mosaic_live_slots(objspace) / 32;
    if (interval < objspace->params.stress_minor_every) interval = objspace->params.stress_minor_every;
    __atomic_store_n(&objspace->checks.stress_minor_countdown, interval, __ATOMIC_RELAXED);
    rb_gc_vm_unlock(lev);
}
#endif

/* ============================================================ fast path */

/* Pops `slot`, the head of the cache's list for the class, and makes it the new object. */
static inline VALUE
take_slot(mosaic_objspace_t *objspace, struct mosaic_cache *cache, size_t heap_index, struct mosaic_free_slot *slot,
          VALUE klass, VALUE flags, VALUE v1, VALUE v2, VALUE v3, bool wb_protected)
{
    struct mosaic_free_slot *next = slot->next;
    cache->heaps[heap_index].freelist = next;
    cache->heaps[heap_index].allocated++;
    /* The next allocation's slot, fetched while the mutator fills this one (a prefetch of
     * NULL is harmless). Measured (bench/run.rb --only strings,arrays, 3 reps each): String#*
     * of 71 bytes (160-byte slots) 1.05x the allocations per second without clearing the
     * slot, 1.09x with this prefetch too; 40-byte Object.new gained nothing from it (DESIGN
     * section 3). */
    __builtin_prefetch(next, 1, 3);

    MOSAIC_ASSERT(slot->flags == 0);
    VALUE *p = (VALUE *)slot;
    p[0] = flags;
    p[1] = klass;
    p[2] = v1;
    p[3] = v2;
    p[4] = v3;
    /* The rest of the slot is left as it was (zeros, or a dead object's bytes): CRuby
     * initialises what it uses, as it must under the default GC, which does not clear slots
     * either. */

    if (!wb_protected) {
        /* Atomic: another Ractor may set a bit of the same word at the same time
         * (rb_gc_writebarrier_unprotect on an object of this page it can reach). */
        mosaic_writebarrier_unprotect(objspace, (VALUE)p);
    }
    return (VALUE)p;
}

/* An allocation with something to do first (a collection pending, GC.stress, the stress gate's
 * countdown) or with an empty cache. Out of line, so that the common case saves no registers. */
static VALUE __attribute__((noinline))
new_obj_slow(mosaic_objspace_t *objspace, struct mosaic_cache *cache, size_t heap_index, VALUE klass,
             VALUE flags, VALUE v1, VALUE v2, VALUE v3, bool wb_protected)
{
    if (gc_work_pending(objspace)) new_obj_slow_checks(objspace);

#if MOSAIC_CHECK
    /* The stress gate (MOSAIC_STRESS_MINOR=N): a collection every N allocations, minor unless
     * the pacer asks for a major, so minor GCs run at every kind of moment. A collection costs
     * O(heap) (finishing the sweep), so on a big heap the interval stretches to 1/32 of the
     * live slots: small heaps, most tests, get a GC every N allocations; a program with
     * millions of live objects is slowed by a bounded factor instead of quadratically. */
    if (objspace->params.stress_minor_every && !mosaic_dont_gc(objspace) &&
            __atomic_sub_fetch(&objspace->checks.stress_minor_countdown, 1, __ATOMIC_RELAXED) == 0) {
        stress_minor_collect(objspace);
    }
#endif

    struct mosaic_free_slot *slot = cache->heaps[heap_index].freelist;
    if (!slot) {
        slot = cache_refill(objspace, cache, heap_index);
        if (!slot) rb_memerror();
    }
    return take_slot(objspace, cache, heap_index, slot, klass, flags, v1, v2, v3, wb_protected);
}

VALUE
mosaic_new_obj(mosaic_objspace_t *objspace, struct mosaic_cache *cache, VALUE klass, VALUE flags,
               VALUE v1, VALUE v2, VALUE v3, bool wb_protected, size_t alloc_size)
{
    size_t heap_index = mosaic_heap_index_for_size(alloc_size);
#if MOSAIC_SIZE_HISTOGRAM
    mosaic_size_histogram_alloc(flags, alloc_size);
#endif
    struct mosaic_free_slot *slot = cache->heaps[heap_index].freelist;
    if (RB_UNLIKELY(!slot || gc_work_pending(objspace) || (MOSAIC_CHECK && objspace->params.stress_minor_every))) {
        return new_obj_slow(objspace, cache, heap_index, klass, flags, v1, v2, v3, wb_protected);
    }
    return take_slot(objspace, cache, heap_index, slot, klass, flags, v1, v2, v3, wb_protected);
}
