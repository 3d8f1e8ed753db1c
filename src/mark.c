/*
 * mark.c: the mark phase.
 *
 * Owns: the explicit mark stack, the mark entry points CRuby calls (mark, mark_and_pin,
 * mark_maybe, mark_weak, remove_weak), root marking, and clearing dead weak references.
 * remove_weak finds its slot through weak_index.c (O(1) expected, no scan of the list).
 *
 * Invariants:
 *  - Marking runs with the world stopped and every page swept (collect.c guarantees both),
 *    so an unmarked, non-T_NONE slot after marking is garbage.
 *  - A slot is traced exactly once per cycle, after its mark bit goes 0 -> 1: marked at a
 *    depth below MOSAIC_MARK_EAGER_DEPTH, it waits in the prefetch queue (MOSAIC_MARK_QUEUE
 *    objects, prefetched) and is then scanned in place at the depth it was marked at
 *    (scan_in_place), or pushed on the mark stack when MOSAIC_MARK_NEST_MAX (EAGER + 1) scans are nested
 *    on the C stack; marked deeper, it is pushed. mark_drain empties both before any phase
 *    reads the mark bits. Depth, not the queue's order, decides what is scanned in place, so
 *    a wide object near the roots (an Array of 300k Strings) has its children scanned in place,
 *    not pushed (in a forked child, a large mark stack copies shared heap memory).
 *  - Only the exact start of a live (not T_NONE, not T_ZOMBIE) slot counts as a conservative
 *    reference; such an object is marked and pinned.
 *  - After marking, every registered weak reference to an unmarked object reads Qundef.
 *  - Generations (generation.c): a newly marked object ages by one and becomes old at
 *    MOSAIC_OLD_AGE (no aging while full marks are disabled). An old parent that has a
 *    child which is still young after this mark, through a strong OR a weak edge, is
 *    remembered, so the remembered-set invariant holds for both kinds of edge when the cycle
 *    ends. In a minor GC, mark bits start as a copy of the old bits: old objects count as
 *    reached, and only traced parents register their weak slots.
 *  - Outside marking, the entry points only serve the heap checker (verify_ctx set).
 *  - The mark stack is mapped from the OS and the weak list uses plain malloc: marking never
 *    calls into Ruby's allocator, so it cannot recurse into the collector.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "mosaic.h"

/* ========================================================== mark stack */

/* Mark stack chunks are mapped from the OS, not malloc'd, and unmapped when the stack shrinks
 * past them (one spare is kept). *Why*: a wide object scanned deeper than the in-place bound
 * pushes every child (an Array of 300k Strings held by a captured block's environment: 300k
 * entries, 2.4 MB). Malloc'd chunks reuse glibc heap memory that a forked child shares with
 * its parent, so each one copied shared pages that stayed private after the GC (3336 kB in
 * test_gc_in_forked_child_keeps_pages_shared with the Array held that way); mapped chunks are
 * fresh pages, given back at the end of marking. */
static struct mosaic_mark_chunk *
mark_chunk_map(void)
{
    void *p = mmap(NULL, sizeof(struct mosaic_mark_chunk), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) rb_bug("Mosaic: out of memory growing the mark stack");
    return p;
}

static void
mark_chunk_unmap(struct mosaic_mark_chunk *chunk)
{
    if (chunk) munmap(chunk, sizeof(struct mosaic_mark_chunk));
}

static void
mark_stack_push(struct mosaic_mark_stack *stack, VALUE obj)
{
    struct mosaic_mark_chunk *top = stack->top;
    if (RB_UNLIKELY(!top || top->used == MOSAIC_MARK_CHUNK)) {
        struct mosaic_mark_chunk *chunk = stack->spare;
        if (chunk) {
            stack->spare = NULL;
        }
        else {
            chunk = mark_chunk_map();
        }
        chunk->prev = top;
        chunk->used = 0;
        stack->top = top = chunk;
    }
    top->items[top->used++] = obj;
}

static bool
mark_stack_pop(struct mosaic_mark_stack *stack, VALUE *obj)
{
    struct mosaic_mark_chunk *top = stack->top;
    while (top && top->used == 0) {
        stack->top = top->prev;
        if (stack->spare) mark_chunk_unmap(top);
        else stack->spare = top;
        top = stack->top;
    }
    if (!top) return false;
    *obj = top->items[--top->used];
    return true;
}

void
mosaic_mark_stack_free(struct mosaic_mark_stack *stack)
{
    VALUE dummy;
    while (mark_stack_pop(stack, &dummy));
    mark_chunk_unmap(stack->spare);
    stack->spare = NULL;
}

/* ===================================================== prefetch queue */

/* A newly marked object is scanned only after MOSAIC_MARK_QUEUE later ones have been marked (or
 * when a drain empties the queue); it is prefetched when it enters. *Why*: scanning an object
 * starts with loading its header, a cache miss for most objects of a large heap, and a
 * depth-first marker waits for each of those loads in turn; with a small FIFO in between, the
 * loads of the next few objects are under way while one is scanned (the buffered prefetch of
 * Cher, Hosking and Vijaykumar, ASPLOS 2004). Order does not matter to marking: every queued
 * object is scanned, with its own parent context, before the phase ends (mark_drain). */
#if MOSAIC_MARK_QUEUE
static inline bool
mark_queue_put(struct mosaic_mark_queue *queue, VALUE obj, unsigned int depth, VALUE *out, unsigned int *out_depth)
{
    __builtin_prefetch((const void *)obj, 0, 3);
    if (queue->count < MOSAIC_MARK_QUEUE) {
        unsigned int i = (queue->head + queue->count++) & (MOSAIC_MARK_QUEUE - 1);
        queue->items[i] = obj;
        queue->depths[i] = (unsigned char)depth;
        return false;
    }
    *out = queue->items[queue->head];
    *out_depth = queue->depths[queue->head];
    queue->items[queue->head] = obj;
    queue->depths[queue->head] = (unsigned char)depth;
    queue->head = (queue->head + 1) & (MOSAIC_MARK_QUEUE - 1);
    return true;
}

static inline bool
mark_queue_take(struct mosaic_mark_queue *queue, VALUE *out, unsigned int *out_depth)
{
    if (!queue->count) return false;
    *out = queue->items[queue->head];
    *out_depth = queue->depths[queue->head];
    queue->head = (queue->head + 1) & (MOSAIC_MARK_QUEUE - 1);
    queue->count--;
    return true;
}
#else
static inline bool
mark_queue_take(struct mosaic_mark_queue *queue, VALUE *out, unsigned int *out_depth)
{
    return false;
}
#endif

/* ======================================================= mark entries */

static inline void
age_and_promote(struct mosaic_page *page, size_t bit)
{
    bool a0 = mosaic_bit_test(page->age0_bits, bit);
    bool a1 = mosaic_bit_test(page->age1_bits, bit);
    if (a1 && a0) return;                          /* already at the old age */
    if (a0) {
        mosaic_bit_clear(page->age0_bits, bit);
        mosaic_bit_set(page->age1_bits, bit);
    }
    else {
        mosaic_bit_set(page->age0_bits, bit);
    }
    if (a1 && !a0) {                               /* 2 -> 3: promoted */
        mosaic_bit_set(page->old_bits, bit);
    }
}

/* Traces obj's children now, as its parent (mark_parent) for the generational checks, at the
 * depth it was marked at (its children are marked at depth + 1), then gives the outer context
 * back. Called for an object leaving the prefetch queue (or marked with the queue off) while it
 * was marked below MOSAIC_MARK_EAGER_DEPTH; deeper ones go on the mark stack. *Why in place*:
 * pushing every newly marked object made the stack as large as the widest object's fan-out (an
 * Array of 500k Strings pushed 500k entries, 4 MB), and in a forked child that stack copied
 * heap memory shared with the parent (bench/workloads/fork_share.rb); the stack's chunks are
 * now mapped from the OS as well (mark_chunk_map). */
static void
scan_in_place(mosaic_objspace_t *objspace, VALUE obj, unsigned int depth)
{
    VALUE parent = objspace->mark_parent;
    bool parent_old = objspace->mark_parent_old;
    unsigned int outer_depth = objspace->mark_depth;
    objspace->mark_depth = depth + 1;
    objspace->mark_nest++;
    objspace->mark_parent = obj;
    objspace->mark_parent_old = objspace->params.generational && mosaic_old_p(obj);
    rb_gc_mark_children(objspace, obj);
    objspace->mark_parent = parent;
    objspace->mark_parent_old = parent_old;
    objspace->mark_nest--;
    objspace->mark_depth = outer_depth;
}

/* An object leaves the prefetch queue: scanned now, at the depth it was marked at (so a wide
 * object marked near the roots still has its children scanned in place, not pushed), unless
 * MOSAIC_MARK_NEST_MAX scans are already nested on the C stack: then it goes on the mark stack
 * (one entry; mark_drain scans it near the top). */
static inline void
scan_dequeued(mosaic_objspace_t *objspace, VALUE obj, unsigned int depth)
{
    if (objspace->mark_nest < MOSAIC_MARK_NEST_MAX) scan_in_place(objspace, obj, depth);
    else mark_stack_push(&objspace->mark_stack, obj);
}

void
mosaic_mark(mosaic_objspace_t *objspace, VALUE obj, bool pin)
{
    if (RB_SPECIAL_CONST_P(obj)) return;

    if (RB_UNLIKELY(!objspace->marking)) {
        /* The heap checker walks every object's edges through rb_gc_mark_children; it reports
         * a bad edge with its parent. */
        if (objspace->verify_ctx) {
            mosaic_verify_edge(objspace, obj, false);
            return;
        }
        rb_bug("Mosaic: rb_gc_impl_mark(%p) called outside the mark phase", (void *)obj);
    }
#if MOSAIC_CHECK
    if (!mosaic_pointer_to_slot_p(objspace, (void *)obj)) {
        rb_bug("Mosaic: marking %p, which is not a slot of the heap", (void *)obj);
    }
    if (RB_BUILTIN_TYPE(obj) == T_NONE) {
        rb_bug("Mosaic: marking %p, a free slot", (void *)obj);
    }
#endif

    struct mosaic_page *page = mosaic_page_of(obj);
    size_t bit = mosaic_bit_index(page, obj);
    if (pin) mosaic_bit_set(page->pinned_bits, bit);
    if (!mosaic_bit_test(page->mark_bits, bit)) {
        mosaic_bit_set(page->mark_bits, bit);
        page->heap->marked_slots++;
        objspace->stats.marked_slots++;
        if (objspace->aging) age_and_promote(page, bit);
        /* Old parent, child still young after this mark: keep the edge in the remembered set. */
        if (objspace->mark_parent_old && !mosaic_bit_test(page->old_bits, bit)) {
            mosaic_remember(objspace, objspace->mark_parent);
        }
        if (objspace->mark_depth < MOSAIC_MARK_EAGER_DEPTH) {
#if MOSAIC_MARK_QUEUE
            VALUE ready;
            unsigned int ready_depth;
            if (mark_queue_put(&objspace->mark_queue, obj, objspace->mark_depth, &ready, &ready_depth)) {
                scan_dequeued(objspace, ready, ready_depth);
            }
#else
            scan_in_place(objspace, obj, objspace->mark_depth);
#endif
        }
        else {
            mark_stack_push(&objspace->mark_stack, obj);
        }
        return;
    }

    /* Old parent, child still young after this mark: keep the edge in the remembered set. */
    if (objspace->mark_parent_old && !mosaic_bit_test(page->old_bits, bit)) {
        mosaic_remember(objspace, objspace->mark_parent);
    }
}

/* rb_gc_mark_and_move: a movable edge. CRuby's reference updating (compact.c) walks the same
 * functions with reference_updating set and calls this for each edge: then it updates the
 * edge to its object's new address instead of marking. */
void
mosaic_mark_and_move(mosaic_objspace_t *objspace, VALUE *ptr)
{
    if (RB_UNLIKELY(objspace->updating_references)) {
        *ptr = mosaic_location(objspace, *ptr);
        return;
    }
    mosaic_mark(objspace, *ptr, false);
}

void
mosaic_mark_maybe(mosaic_objspace_t *objspace, VALUE obj)
{
    /* A conservative word is not an edge the checker can hold anyone to. */
    if (RB_UNLIKELY(!objspace->marking)) return;
    if (!mosaic_pointer_to_slot_p(objspace, (void *)obj)) return;
    switch (RB_BUILTIN_TYPE(obj)) {
      case T_NONE:
      case T_ZOMBIE:
      case T_MOVED:
        return;
      default:
        mosaic_mark(objspace, obj, true);
    }
}

void
mosaic_mark_weak(mosaic_objspace_t *objspace, VALUE *ptr)
{
    VALUE obj = *ptr;
    if (RB_SPECIAL_CONST_P(obj)) return;
    if (RB_UNLIKELY(!objspace->marking)) {
        if (objspace->verify_ctx) {
            mosaic_verify_edge(objspace, obj, true);
            return;
        }
        rb_bug("Mosaic: rb_gc_impl_mark_weak(%p) called outside the mark phase", (void *)ptr);
    }
    if (RB_UNLIKELY(RB_BUILTIN_TYPE(obj) == T_NONE)) {
        rb_bug("Mosaic: weak reference %p points to a free slot %p", (void *)ptr, (void *)obj);
    }
    /* Once a removal built the index (weak_index.c), a slot registered again (its parent
     * traced twice) is not pushed twice: a removal must drop every registration. */
    if (!RB_UNLIKELY(objspace->weak_index.built) ||
        mosaic_weak_index_insert(&objspace->weak_index, ptr, objspace->weak_refs.size)) {
        mosaic_ptr_vec_push(&objspace->weak_refs, ptr);
        objspace->stats.weak_references_count++;
    }

    /* The same rule as for strong edges: an old parent whose weak referent is young stays
     * remembered, so the next minor GC traces it again and registers this slot again. Without
     * it, that minor GC would free the referent and leave the slot pointing at a reused slot. */
    if (objspace->mark_parent_old && !mosaic_old_p(obj)) {
        mosaic_remember(objspace, objspace->mark_parent);
    }
}

/* rb_gc_remove_weak: the memory at ptr is about to be freed; forget every registration of it.
 * O(1) expected (weak_index.c), never a scan of the list. */
void
mosaic_remove_weak(mosaic_objspace_t *objspace, VALUE parent, VALUE *ptr)
{
    /* Only a reference registered in this mark phase can still be in the list, and only by a
     * parent that is marked (it registers its slots when traced, after being marked). */
    if (!objspace->marking) return;
    if (!RB_SPECIAL_CONST_P(parent) && !mosaic_marked_p(parent)) return;
    struct mosaic_weak_index *index = &objspace->weak_index;
    if (!index->built) mosaic_weak_index_build(index, &objspace->weak_refs);
    size_t pos;
    if (mosaic_weak_index_remove(index, ptr, &pos)) objspace->weak_refs.items[pos] = NULL;
}

/* ========================================================== the phase */

/* Major GC setup: nothing is reached yet; every edge will be seen, so the remembered set is
 * rebuilt from scratch by the relation check in mosaic_mark. */
static void
major_mark_start(mosaic_objspace_t *objspace)
{
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        heap->marked_slots = 0;
        for (size_t j = 0; j < heap->page_count; j++) {
            struct mosaic_page *page = heap->pages[j];
            memset(page->mark_bits, 0, sizeof(page->mark_bits));
            memset(page->pinned_bits, 0, sizeof(page->pinned_bits));
            memset(page->remembered_bits, 0, sizeof(page->remembered_bits));
        }
    }
}

static void
push_for_rescan(mosaic_objspace_t *objspace, VALUE obj)
{
    mark_stack_push(&objspace->mark_stack, obj);
}

/* Scans until the mark stack and the prefetch queue are both empty. What the stack hands out
 * goes through the queue too, so it is prefetched as well. */
static void
mark_drain(mosaic_objspace_t *objspace)
{
    VALUE obj;
    unsigned int depth = 0;
    for (;;) {
        if (mark_stack_pop(&objspace->mark_stack, &obj)) {
            depth = 0;
#if MOSAIC_MARK_QUEUE
            VALUE ready;
            if (!mark_queue_put(&objspace->mark_queue, obj, 0, &ready, &depth)) continue;
            obj = ready;
#endif
        }
        else if (!mark_queue_take(&objspace->mark_queue, &obj, &depth)) {
            break;
        }
        scan_dequeued(objspace, obj, depth);
    }
    MOSAIC_ASSERT(objspace->mark_depth == 0 && objspace->mark_nest == 0);
    objspace->mark_parent = Qfalse;
    objspace->mark_parent_old = false;
}

static void
update_weak_references(mosaic_objspace_t *objspace)
{
    size_t retained = 0;
    for (size_t i = 0; i < objspace->weak_refs.size; i++) {
        VALUE *ptr = objspace->weak_refs.items[i];
        if (!ptr) continue;
        VALUE obj = *ptr;
        if (RB_SPECIAL_CONST_P(obj)) continue;
        if (!mosaic_marked_p(obj)) {
            *ptr = Qundef;
        }
        else {
            retained++;
        }
    }
    objspace->stats.retained_weak_references_count = retained;
    objspace->weak_refs.size = 0;
    if (objspace->weak_index.built) mosaic_weak_index_reset(&objspace->weak_index);
}

/* Marks everything reachable from the roots (full), or from the roots and the remembered
 * set with old objects taken as reached (minor). World stopped, all pages swept. */
void
mosaic_mark_phase(mosaic_objspace_t *objspace, bool full)
{
    objspace->stats.marked_slots = 0;
    objspace->stats.weak_references_count = 0;
    objspace->stats.remembered_rescanned = 0;
    objspace->mark_parent = Qfalse;
    objspace->mark_parent_old = false;
    /* With full marks disabled (GC.config(rgengc_allow_full_mark: false)) nothing is promoted:
     * old garbage could then only be freed by an explicit GC.start, as in the default GC. */
    objspace->aging = objspace->params.generational && objspace->params.allow_full_mark;
    objspace->marking = true;

    if (full) {
        major_mark_start(objspace);
    }
    else {
        mosaic_minor_mark_start(objspace, push_for_rescan);
        mark_drain(objspace);
    }

    mosaic_finalize_mark_roots(objspace);
    mosaic_objid_mark_roots(objspace);
    mark_drain(objspace);

    rb_gc_save_machine_context();
    rb_gc_mark_roots(objspace, NULL);
    mark_drain(objspace);

    update_weak_references(objspace);
    objspace->marking = false;
    if (objspace->params.generational) mosaic_generation_count(objspace);
    rb_ractor_finish_marking();
}
