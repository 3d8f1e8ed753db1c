/*
 * nursery.c: the young space's evacuation (MOSAIC_NURSERY_PAGES; docs/DESIGN.md, "The nursery").
 *
 * With the nursery on, allocation takes nursery pages first (alloc.c: up to
 * MOSAIC_NURSERY_PAGES per size class, kept at the front of their class's pages so that the
 * sweep takes them first). A minor GC that evacuates (trigger.c: not inside malloc, no heap walk
 * live) records while it marks every object it traces (mark.c), pins what the roots name
 * directly and what weak slots name, and then, here, before the lazy sweep starts: moves every
 * movable survivor on a nursery page to a free slot of an old-space page of its class, updates
 * the references of every object that minor traced, and puts the moved objects' old slots on
 * their pages' freelists. The sweep then frees the nursery pages' dead around them, as on any
 * page, and allocation fills the nursery again.
 *
 * Owns: which survivors move (mosaic_nursery_movable_p), where they go, the reference update
 * after the moves, GC.stat's nursery counts.
 *
 * Invariants (who may point at a moved object, and who updates it):
 *  - A young survivor is referred to by traced objects only (the objects this minor marked,
 *    and the remembered and old wb-unprotected objects it rescanned: the remembered-set
 *    invariant, generation.c), by roots, by weak slots, by the address-keyed tables, and by
 *    dead objects. Traced objects are updated here (rb_gc_update_object_references); what the
 *    roots name directly and what weak slots name is pinned by the mark and never moves; the
 *    object-id, finalizer and generic-ivar tables are re-keyed as an object moves (compact.c,
 *    mosaic_move_object); freeing a dead object reads only the object, its own buffers and the
 *    VM's tables, never a referent. Nothing calls rb_gc_update_vm_references: what the VM's
 *    tables hold (frozen strings, Symbols, imemos) never moves
 *    (docs/decisions/0027-reference-updates-per-minor-measured.md).
 *  - Only objects this minor marked move; an object old when the minor started never does
 *    (its referrers need not be remembered). Only types whose every reference from another
 *    object is a marked edge move (mosaic_nursery_movable_p): a class is named by its
 *    subclasses' lists and call caches without a write barrier, which a minor cannot see.
 *  - T_MOVED slots exist only inside mosaic_nursery_evacuate (compacting set); each becomes a
 *    free slot on its page's freelist before it returns, with no GC bit set.
 *  - A nursery page keeps what could not move (pinned survivors, the kinds that never move,
 *    zombies, old objects) and is allocated around
 *    (docs/decisions/0028-nursery-allocates-around-unmovable-survivors.md).
 */
#include "core/mosaic.h"

/* Whether an object of this kind may move at a minor GC: every reference to it from another
 * object is an edge its referrer marks, so the remembered set finds every referrer. Strings
 * the frozen-string table holds stay. */
bool
mosaic_nursery_movable_p(VALUE obj)
{
    VALUE flags = RBASIC(obj)->flags;
    switch (flags & RUBY_T_MASK) {
      case T_STRING:
        return !(flags & RSTRING_FSTR);
      case T_OBJECT: case T_ARRAY: case T_HASH: case T_STRUCT: case T_FLOAT: case T_BIGNUM:
      case T_RATIONAL: case T_COMPLEX: case T_MATCH: case T_REGEXP:
        return true;
      default:
        return false;
    }
}

/* Where a class's survivors go: free slots of its old-space pages, from `cursor` on, then fresh
 * pages (`fresh`: the latest, queued for allocation once the moves are done). */
struct destination {
    size_t cursor;
    struct mosaic_page *fresh;
};

/* A free slot of an old-space page of the class, or 0 when memory is exhausted. The pages are
 * before_sweep (the lazy sweep counts their free slots again), or fresh. */
static VALUE
take_destination(mosaic_objspace_t *objspace, struct mosaic_heap *heap, struct destination *dest)
{
    struct mosaic_page *page = NULL;
    if (dest->fresh && dest->fresh->freelist) {
        page = dest->fresh;
    }
    else {
        while (dest->cursor < heap->page_count) {
            struct mosaic_page *p = heap->pages[dest->cursor];
            if (!p->nursery && p->freelist) {
                page = p;
                break;
            }
            dest->cursor++;
        }
    }
    if (!page) {
        page = mosaic_pool_take(objspace, heap);
        if (!page) page = mosaic_page_new(objspace, heap);
        if (!page) return 0;
        dest->fresh = page;
        dest->cursor = heap->page_count;   /* the pages before it are full */
    }
    struct mosaic_free_slot *slot = page->freelist;
    page->freelist = slot->next;
    if (page->free_slots) page->free_slots--;
    return (VALUE)slot;
}

/* A moved object's old slot becomes free, on its page's freelist. The page is still
 * before_sweep: its sweep counts the slot as free already (unmarked, flags 0: every GC bit went
 * with the object), and frees the page's dead objects around it. */
static void
free_forwarding_slot(VALUE obj)
{
    struct mosaic_page *page = mosaic_page_of(obj);
    struct mosaic_free_slot *slot = (struct mosaic_free_slot *)obj;
    slot->flags = 0;
    slot->next = page->freelist;
    page->freelist = slot;
}

/* After an evacuating minor GC's mark and mosaic_sweep_prepare, world stopped, before the
 * lazy sweep or the background sweeper takes any page (collect.c). */
void
mosaic_nursery_evacuate(mosaic_objspace_t *objspace)
{
    struct mosaic_nursery *nursery = &objspace->nursery;
    MOSAIC_ASSERT(!objspace->full_mark && objspace->heap_walk_depth == 0);

    /* 1. Move: the objects this minor marked (not those it rescanned: old before it began). */
    struct destination dests[MOSAIC_HEAP_MAX] = {{0}};
    size_t moved = 0, stayed = 0;
    objspace->compact.compacting = true;
    for (size_t i = nursery->rescanned; i < nursery->traced.size; i++) {
        VALUE obj = (VALUE)nursery->traced.items[i];
        struct mosaic_page *page = mosaic_page_of(obj);
        if (!page->nursery) continue;
        if (mosaic_bit_test(page->pinned_bits, mosaic_bit_index(obj)) || !mosaic_nursery_movable_p(obj)) {
            stayed++;
            continue;
        }
        struct mosaic_heap *heap = page->heap;
        VALUE dest = take_destination(objspace, heap, &dests[heap - objspace->heaps]);
        if (!dest) {
            stayed++;                /* out of memory: it stays, and the heap is still whole */
            continue;
        }
        mosaic_move_object(objspace, obj, dest);
        moved++;
    }

    /* 2. Update every object this minor traced: only they can refer to what moved. */
    if (moved) {
        objspace->compact.updating_references = true;
        for (size_t i = 0; i < nursery->traced.size; i++) {
            rb_gc_update_object_references(objspace, mosaic_location(objspace, (VALUE)nursery->traced.items[i]));
        }
        objspace->compact.updating_references = false;
        objspace->checks.verify_roots_due = true;
    }

    /* 3. The moved objects' old slots become free; the nursery pages wait for the sweep, which
     *    takes them first (they lead their class's pages). A fresh destination page is swept
     *    already: its free slots are queued now. */
    if (moved) {
        for (size_t i = nursery->rescanned; i < nursery->traced.size; i++) {
            VALUE obj = (VALUE)nursery->traced.items[i];
            if (mosaic_moved_p(obj)) free_forwarding_slot(obj);
        }
    }
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        struct mosaic_page *fresh = dests[h].fresh;
        if (fresh && fresh->freelist && !fresh->cycle->before_sweep) mosaic_heap_queue_free_page(&objspace->heaps[h], fresh);
    }
    objspace->compact.compacting = false;

    nursery->evacuations++;
    nursery->moved_objects += moved;
    nursery->stayed_objects += stayed;
    nursery->traced.size = 0;
    nursery->rescanned = 0;
}
