/*
 * sweep.c: the sweep phase.
 *
 * Owns: turning a marked page into a freelist, freeing dead objects exactly once (weak VM
 * references, object id, rb_gc_obj_free, FREEOBJ events), deferring zombies, returning
 * empty pages to the OS when the pacer allows, and lazy sweeping driven by allocation.
 *
 * Invariants:
 *  - After mosaic_sweep_prepare every page is before_sweep and no cache holds a slot
 *    (collect.c handed them back). Pages created afterwards are not before_sweep and the
 *    sweeper skips them.
 *  - A page is swept at most once per cycle. Its freelist survives from cycle to cycle (every
 *    T_NONE slot is already on it, see alloc.c); the sweep only pushes the objects it frees.
 *    It never writes to a slot that was already free, nor to a live one: a GC in a forked
 *    child dirties only the pages where it actually frees something.
 *  - Every page is swept before the next mark phase starts (collect.c calls
 *    mosaic_sweep_finish_now first), so garbage_object_p only needs before_sweep + mark bit.
 *  - Sweeping runs with during_gc set, under the VM lock.
 */
#include <stdlib.h>

#include "mosaic.h"

struct sweep_result {
    size_t freed;
    size_t empty;      /* T_NONE slots found */
};

static inline void
free_one(mosaic_objspace_t *objspace, VALUE obj, struct sweep_result *res, bool hook)
{
    if (hook) rb_gc_event_hook(obj, RUBY_INTERNAL_EVENT_FREEOBJ);

    bool has_object_id = RB_FL_TEST_RAW(obj, RUBY_FL_SEEN_OBJ_ID);
    rb_gc_obj_free_vm_weak_references(obj);
    if (rb_gc_obj_free(objspace, obj)) {
        if (has_object_id) mosaic_objid_free(objspace, obj);
        RBASIC(obj)->flags = 0;
        res->freed++;
    }
    /* Otherwise rb_gc_obj_free made it a zombie (counted by mosaic_zombie_push); it keeps
     * its slot until its finalizer has run. */
}

/* A freed slot keeps no GC state: the next object there starts young and protected. */
static inline void
clear_slot_bits(struct mosaic_page *page, size_t bit)
{
    mosaic_bit_clear(page->wb_unprotected_bits, bit);
    mosaic_bit_clear(page->age0_bits, bit);
    mosaic_bit_clear(page->age1_bits, bit);
    mosaic_bit_clear(page->old_bits, bit);
    mosaic_bit_clear(page->remembered_bits, bit);
}

/* Sweeps one page. Returns its number of free slots; its freelist is rebuilt. */
static size_t
page_sweep(mosaic_objspace_t *objspace, struct mosaic_page *page)
{
    struct sweep_result res = { 0, 0 };
    bool hook = objspace->hook_events & RUBY_INTERNAL_EVENT_FREEOBJ;
    size_t slot_size = page->slot_size;
    size_t step = slot_size / MOSAIC_BASE_SLOT_SIZE;
    size_t first_bit = mosaic_bit_index((VALUE)page->start);
    struct mosaic_free_slot *head = page->freelist;

    for (size_t i = page->total_slots; i-- > 0;) {
        VALUE obj = (VALUE)(page->start + i * slot_size);
        size_t bit = first_bit + i * step;
        if (mosaic_bit_test(page->mark_bits, bit)) continue;

        if (RBASIC(obj)->flags == 0) {
            res.empty++;      /* already on the freelist: leave the slot untouched */
            continue;
        }
        if (RB_BUILTIN_TYPE(obj) == T_ZOMBIE) continue;
        clear_slot_bits(page, bit);
        free_one(objspace, obj, &res, hook);
        if (RBASIC(obj)->flags != 0) continue;  /* became a zombie */

        struct mosaic_free_slot *slot = (struct mosaic_free_slot *)obj;
        slot->next = head;
        head = slot;
    }

    page->freelist = head;
    page->before_sweep = false;
    page->heap->total_freed_objects += res.freed;
    return res.freed + res.empty;
}

/* Sweeps heap->pages[sweep_index] and decides what happens to it: released when it is empty
 * and the pacer wants pages back, queued on free_pages when it has room, else left full.
 * Returns the page when it has free slots and was queued. */
static struct mosaic_page *
heap_sweep_step(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    struct mosaic_page *page = heap->pages[heap->sweep_index];
    if (!page->before_sweep) {
        heap->sweep_index++;
        return NULL;
    }

    size_t free_slots = page_sweep(objspace, page);
    if (free_slots == page->total_slots && heap->freeable_pages > 0 &&
            objspace->heap_walk_depth == 0) {
        heap->freeable_pages--;
        mosaic_page_release(objspace, heap, heap->sweep_index);
        /* The last page moved into sweep_index: do not advance. */
        return NULL;
    }

    heap->sweep_index++;
    if (free_slots > 0) {
        page->free_next = heap->free_pages;
        heap->free_pages = page;
        return page;
    }
    return NULL;
}

static void
update_lazy_sweeping(mosaic_objspace_t *objspace)
{
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        if (objspace->heaps[i].sweep_index < objspace->heaps[i].page_count) return;
    }
    if (objspace->lazy_sweeping) {
        objspace->lazy_sweeping = false;
        rb_gc_event_hook(0, RUBY_INTERNAL_EVENT_GC_END_SWEEP);
    }
}

static void
after_sweep_work(mosaic_objspace_t *objspace)
{
    if (objspace->zombies && !ruby_free_at_exit_p()) {
        rb_postponed_job_trigger(objspace->finalize_job);
    }
}

/* Every page becomes before_sweep and leaves the free-page queue (the sweep queues it again).
 * World stopped, caches handed back. */
void
mosaic_sweep_prepare(mosaic_objspace_t *objspace)
{
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        heap->free_pages = NULL;
        heap->sweep_index = 0;
        for (size_t j = 0; j < heap->page_count; j++) {
            struct mosaic_page *page = heap->pages[j];
            page->before_sweep = true;
            page->free_next = NULL;
        }
    }
    objspace->lazy_sweeping = true;
}

/* Sweeps every page that is left. Caller is inside the GC (during_gc, VM lock). */
void
mosaic_sweep_rest(mosaic_objspace_t *objspace)
{
    if (!objspace->lazy_sweeping) return;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        while (heap->sweep_index < heap->page_count) {
            heap_sweep_step(objspace, heap);
        }
    }
    update_lazy_sweeping(objspace);
}

/* Lazy sweeping from the allocation slow path (VM lock held, outside the GC): sweeps pages
 * of `heap` until one has a free slot. Returns it, dequeued, or NULL. */
struct mosaic_page *
mosaic_sweep_for_free_page(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    struct mosaic_page *found = NULL;
    unsigned int lev;

    mosaic_gc_enter(objspace, &lev, true);
    uint64_t start = objspace->measure_time ? mosaic_now_ns() : 0;
    while (!found && heap->sweep_index < heap->page_count) {
        found = heap_sweep_step(objspace, heap);
    }
    if (found) {
        heap->free_pages = found->free_next;
        found->free_next = NULL;
    }
    update_lazy_sweeping(objspace);
    if (objspace->measure_time) objspace->stats.sweeping_time_ns += mosaic_now_ns() - start;
    mosaic_gc_exit(objspace, &lev);

    after_sweep_work(objspace);
    return found;
}

/* Finishes a pending lazy sweep from outside the GC. */
void
mosaic_sweep_finish_now(mosaic_objspace_t *objspace)
{
    if (!objspace->lazy_sweeping) return;
    unsigned int lev;
    mosaic_gc_enter(objspace, &lev, true);
    uint64_t start = objspace->measure_time ? mosaic_now_ns() : 0;
    mosaic_sweep_rest(objspace);
    if (objspace->measure_time) objspace->stats.sweeping_time_ns += mosaic_now_ns() - start;
    mosaic_gc_exit(objspace, &lev);
    after_sweep_work(objspace);
}
