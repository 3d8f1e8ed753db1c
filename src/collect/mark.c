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
 *  - Outside marking, the entry points only serve an edge walk (checks.edge_visitor set: the
 *    heap checker).
 *  - Per-thread state: everything a marker changes while tracing (stack, queue, parent, depth,
 *    counts, its weak list) is its own struct mosaic_marker, found through a thread-local
 *    pointer (rb_gc_mark_children hands us only the objspace). With parallel marking
 *    (mark_workers.c) several markers trace at once; then a slot belongs to the marker whose
 *    atomic fetch-or set its mark bit, and only that marker traces and ages it; every bit it
 *    sets in a shared bitmap word (mark, pin, age, old, remembered) is set atomically. Counts
 *    and weak lists are merged into the objspace when the phase ends (mosaic_marker_end).
 *  - The mark stack is mapped from the OS and the weak list uses plain malloc: marking never
 *    calls into Ruby's allocator, so it cannot recurse into the collector. Running out of either
 *    loses nothing: an object the stack has no room for stays marked and the phase's end traces
 *    every marked object again (mark_overflow_rescan); a weak slot the list has no room for keeps
 *    its referent alive as a strong edge would (weak_slot_unregistered).
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "core/mosaic.h"

/* ========================================================== mark stack */

/* Mark stack chunks are mapped from the OS, not malloc'd, and unmapped when the stack shrinks
 * past them (one spare is kept). *Why*: a wide object scanned deeper than the in-place bound
 * pushes every child (an Array of 300k Strings held by a captured block's environment: 300k
 * entries, 2.4 MB). Malloc'd chunks reuse glibc heap memory that a forked child shares with
 * its parent, so each one copied shared pages that stayed private after the GC (3336 kB in
 * test_gc_in_forked_child_keeps_pages_shared with the Array held that way); mapped chunks are
 * fresh pages, given back at the end of marking. */
/* Chunks mapped now, and the most ever mapped at once, by every marker and the re-grey queue
 * (GC.stat(:mosaic_peak_mark_stack_bytes)): what marking holds must follow the heap, not the
 * mutator's calls (test_the_collectors_work_stays_proportional_to_the_heap). Relaxed atomics:
 * the GC threads map and unmap chunks too. */
static size_t chunks_mapped, chunks_mapped_peak;
#if MOSAIC_CHECK
/* MOSAIC_STRESS_MARK_MEMORY (checking build): at most this many chunks mapped at once, a chunk
 * beyond them failing as if memory had run out, and a weak list or index of at most this many
 * chunks' worth of entries (0: no limit). Set at each mark's start. */
static size_t chunks_limit;
#define WEAK_LIMIT (chunks_limit * MOSAIC_MARK_CHUNK)
#else
#define WEAK_LIMIT ((size_t)0)
#endif

/* A fresh chunk, or NULL when none can be mapped (memory exhausted): the caller's object then
 * stays marked without an entry, and the mark's end traces every marked object again
 * (mark_overflow_rescan). */
static struct mosaic_mark_chunk *
mosaic_mark_chunk_map(void)
{
#if MOSAIC_CHECK
    if (chunks_limit && __atomic_load_n(&chunks_mapped, __ATOMIC_RELAXED) >= chunks_limit) return NULL;
#endif
    void *p = mmap(NULL, sizeof(struct mosaic_mark_chunk), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    size_t now = __atomic_add_fetch(&chunks_mapped, 1, __ATOMIC_RELAXED);
    size_t peak = __atomic_load_n(&chunks_mapped_peak, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&chunks_mapped_peak, &peak, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return p;
}

static void
mosaic_mark_chunk_unmap(struct mosaic_mark_chunk *chunk)
{
    if (!chunk) return;
    munmap(chunk, sizeof(struct mosaic_mark_chunk));
    __atomic_sub_fetch(&chunks_mapped, 1, __ATOMIC_RELAXED);
}

size_t
mosaic_peak_mark_stack_bytes(void)
{
    return __atomic_load_n(&chunks_mapped_peak, __ATOMIC_RELAXED) * sizeof(struct mosaic_mark_chunk);
}

/* False when the stack cannot grow (no chunk can be mapped): obj is not on it. */
static bool
mark_stack_push(struct mosaic_mark_stack *stack, VALUE obj)
{
    struct mosaic_mark_chunk *top = stack->top;
    if (RB_UNLIKELY(!top || top->used == MOSAIC_MARK_CHUNK)) {
        struct mosaic_mark_chunk *chunk = stack->spare;
        if (chunk) {
            stack->spare = NULL;
        }
        else {
            chunk = mosaic_mark_chunk_map();
            if (!chunk) return false;
        }
        chunk->prev = top;
        chunk->used = 0;
        stack->top = top = chunk;
    }
    top->items[top->used++] = obj;
    return true;
}

/* A marked object that could not be pushed: grey with no entry anywhere. Any thread (the GC
 * threads too); the mark's end, all markers idle, reads the flag (mark_overflow_rescan). */
static void
mark_overflowed(mosaic_objspace_t *objspace)
{
    __atomic_store_n(&objspace->mark.overflowed, true, __ATOMIC_RELAXED);
}

/* Pushes a marked object to be traced; when the stack cannot grow, it stays marked and the
 * mark's end finds it (mark_overflow_rescan). */
static inline void
push_grey(mosaic_objspace_t *objspace, struct mosaic_mark_stack *stack, VALUE obj)
{
    if (RB_UNLIKELY(!mark_stack_push(stack, obj))) mark_overflowed(objspace);
}

static bool
mark_stack_pop(struct mosaic_mark_stack *stack, VALUE *obj)
{
    struct mosaic_mark_chunk *top = stack->top;
    while (top && top->used == 0) {
        stack->top = top->prev;
        if (stack->spare) mosaic_mark_chunk_unmap(top);
        else stack->spare = top;
        top = stack->top;
    }
    if (!top) return false;
    *obj = top->items[--top->used];
    return true;
}

/* Puts a chunk of work from another marker on top of the stack. */
void
mosaic_mark_stack_push_chunk(struct mosaic_mark_stack *stack, struct mosaic_mark_chunk *chunk)
{
    chunk->prev = stack->top;
    stack->top = chunk;
}

/* Takes the top chunk with work in it off the stack, whole (an incremental step's marker hands
 * its work back, mark_workers.c). NULL when the stack is empty. */
struct mosaic_mark_chunk *
mosaic_mark_stack_take_chunk(struct mosaic_mark_stack *stack)
{
    for (;;) {
        struct mosaic_mark_chunk *top = stack->top;
        if (!top) return NULL;
        stack->top = top->prev;
        top->prev = NULL;
        if (top->used) return top;
        if (stack->spare) mosaic_mark_chunk_unmap(top);
        else stack->spare = top;
    }
}

/* Takes about half of the stack's work out, as a chunk another marker can trace: a whole full
 * chunk from under the top one if there is one, else the older half of the top chunk (copied
 * into a fresh chunk). NULL when there is too little to be worth handing over. */
struct mosaic_mark_chunk *
mosaic_mark_stack_split(struct mosaic_mark_stack *stack)
{
    struct mosaic_mark_chunk *top = stack->top;
    if (!top) return NULL;
    if (top->prev && top->prev->used > 0) {
        struct mosaic_mark_chunk *below = top->prev;
        top->prev = below->prev;
        below->prev = NULL;
        return below;
    }
    if (top->used < 16) return NULL;
    struct mosaic_mark_chunk *chunk = stack->spare;
    if (chunk) stack->spare = NULL;
    else if (!(chunk = mosaic_mark_chunk_map())) return NULL;   /* no memory: nothing to hand over */
    size_t half = top->used / 2;
    memcpy(chunk->items, top->items, half * sizeof(VALUE));
    memmove(top->items, top->items + half, (top->used - half) * sizeof(VALUE));
    chunk->used = half;
    chunk->prev = NULL;
    top->used -= half;
    return chunk;
}

void
mosaic_mark_stack_free(struct mosaic_mark_stack *stack)
{
    VALUE dummy;
    while (mark_stack_pop(stack, &dummy));
    mosaic_mark_chunk_unmap(stack->spare);
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

/* ============================================================ markers */

/* The marker of the running thread: the collecting thread's objspace->mark.main_marker, or a
 * marking thread's own (mark_workers.c). Initial-exec: one load, no call, on every mark. */
static __thread struct mosaic_marker *current_marker __attribute__((tls_model("initial-exec")));

/* Starts a mark phase for `marker` on this thread. `shared`: other markers run at the same
 * time, so bits are set atomically and work is offered to idle ones. */
void
mosaic_marker_begin(mosaic_objspace_t *objspace, struct mosaic_marker *marker, bool shared)
{
    marker->parent = Qfalse;
    marker->parent_old = false;
    marker->shared = shared;
    marker->depth = 0;
    marker->base_depth = 0;
    marker->nest = 0;
    marker->pushes = 0;
    marker->weak_count = 0;
    memset(marker->marked_by_heap, 0, sizeof(marker->marked_by_heap));
    current_marker = marker;
}

/* Adds a weak slot to a list; once a removal built the list's index (weak_index.c), a slot
 * registered already (its parent traced twice) is not added twice: a removal must drop every
 * registration. MOSAIC_WEAK_PRESENT when it was there; MOSAIC_WEAK_NO_MEMORY when the list or
 * its index cannot grow: the slot is not registered, and the caller keeps its referent alive
 * instead (weak_slot_unregistered). */
static enum mosaic_weak_add
weak_list_add(struct mosaic_ptr_vec *list, struct mosaic_weak_index *index, VALUE *ptr)
{
    if (RB_UNLIKELY(!mosaic_ptr_vec_try_push(list, ptr, WEAK_LIMIT))) return MOSAIC_WEAK_NO_MEMORY;
    if (RB_UNLIKELY(index->built)) {
        enum mosaic_weak_add added = mosaic_weak_index_insert(index, ptr, list->size - 1, WEAK_LIMIT);
        if (added != MOSAIC_WEAK_ADDED) list->size--;
        return added;
    }
    return MOSAIC_WEAK_ADDED;
}

/* A weak slot that could not be registered (no memory for the weak list): nothing would clear
 * it if its referent died, so the referent is marked as if the edge were strong, and lives
 * through this GC. Marking on the running thread's marker. */
static void
weak_slot_unregistered(mosaic_objspace_t *objspace, VALUE *ptr)
{
    VALUE obj = *ptr;
    __atomic_add_fetch(&objspace->stats.weak_slots_unregistered, 1, __ATOMIC_RELAXED);
    if (!RB_SPECIAL_CONST_P(obj)) mosaic_mark(objspace, obj, false);
}

/* Ends `marker`'s phase (collecting thread, every marker idle): its counts go to the heaps and
 * the statistics, its weak slots to the objspace's list. Returns the slots it marked. */
size_t
mosaic_marker_end(mosaic_objspace_t *objspace, struct mosaic_marker *marker)
{
    MOSAIC_ASSERT(!marker->stack.top || !marker->stack.top->used);
    size_t marked = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        objspace->heaps[i].marked_slots += marker->marked_by_heap[i];
        marked += marker->marked_by_heap[i];
    }
    objspace->stats.marked_slots += marked;
    objspace->stats.weak_references_count += marker->weak_count;
    if (marker->weak_refs != &objspace->mark.weak_refs) {
        /* Between the steps of an incremental mark the objspace's list may have its index
         * built (a removal built it): merged slots go into it too, or a later removal would
         * miss them (a slot of freed memory left in the list). */
        for (size_t i = 0; i < marker->weak_refs->size; i++) {
            VALUE *ptr = marker->weak_refs->items[i];
            if (ptr && weak_list_add(&objspace->mark.weak_refs, &objspace->mark.weak_index, ptr) == MOSAIC_WEAK_NO_MEMORY) {
                /* Merged on the collecting thread, its marker current: what this marks waits
                 * on the main marker's stack or queue, drained after the threads' end
                 * (mark_complete) or by the next step. */
                weak_slot_unregistered(objspace, ptr);
            }
        }
        marker->weak_refs->size = 0;
        mosaic_weak_index_reset(marker->weak_index);
    }
    /* An evacuating minor GC: what this marker marked joins the objects to update (nursery.c). */
    for (size_t i = 0; i < marker->traced.size; i++) mosaic_ptr_vec_push(&objspace->nursery.traced, marker->traced.items[i]);
    marker->traced.size = 0;
    marker->shared = false;
    if (current_marker == marker) current_marker = NULL;
    return marked;
}

/* ======================================================= mark entries */

static inline void
bit_set(mosaic_bits_t *bits, size_t i, bool shared)
{
    if (shared) mosaic_bit_set_atomic(bits, i);
    else mosaic_bit_set(bits, i);
}

static inline void
bit_clear(mosaic_bits_t *bits, size_t i, bool shared)
{
    if (shared) mosaic_bit_clear_atomic(bits, i);
    else mosaic_bit_clear(bits, i);
}

/* Sets the mark bit; true when this call set it (the caller then owns the slot's tracing). */
static inline bool
mark_bit_claim(mosaic_bits_t *bits, size_t i, bool shared)
{
    mosaic_bits_t mask = (mosaic_bits_t)1 << (i % 64);
    mosaic_bits_t *word = &bits[i / 64];
    if (__atomic_load_n(word, __ATOMIC_RELAXED) & mask) return false;
    if (!shared) {
        *word |= mask;
        return true;
    }
    return !(__atomic_fetch_or(word, mask, __ATOMIC_RELAXED) & mask);
}

/* Only the marker that claimed the slot changes its age bits; neighbours in the same words may
 * be changed by other markers at the same time, hence atomic updates when shared. */
static inline void
age_and_promote(struct mosaic_page *page, size_t bit, bool shared)
{
    bool a0 = mosaic_bit_test(page->age0_bits, bit);
    bool a1 = mosaic_bit_test(page->age1_bits, bit);
    if (a1 && a0) return;                          /* already at the old age */
    if (a0) {
        bit_clear(page->age0_bits, bit, shared);
        bit_set(page->age1_bits, bit, shared);
    }
    else {
        bit_set(page->age0_bits, bit, shared);
    }
    if (a1 && !a0) {                               /* 2 -> 3: promoted */
        bit_set(page->old_bits, bit, shared);
    }
}

static void mark_stack_push_offering(mosaic_objspace_t *objspace, struct mosaic_marker *marker, VALUE obj);

/* Traces obj's children now, as its parent (marker->parent) for the generational checks, at the
 * depth it was marked at (its children are marked at depth + 1), then gives the outer context
 * back. Called for an object leaving the prefetch queue (or marked with the queue off) while it
 * was marked below MOSAIC_MARK_EAGER_DEPTH; deeper ones go on the mark stack. *Why in place*:
 * pushing every newly marked object made the stack as large as the widest object's fan-out (an
 * Array of 500k Strings pushed 500k entries, 4 MB), and in a forked child that stack copied
 * heap memory shared with the parent (bench/workloads/fork_share.rb); the stack's chunks are
 * now mapped from the OS as well (mosaic_mark_chunk_map). */
static void
scan_in_place(mosaic_objspace_t *objspace, struct mosaic_marker *marker, VALUE obj, unsigned int depth)
{
    VALUE parent = marker->parent;
    bool parent_old = marker->parent_old;
    unsigned int outer_depth = marker->depth;
    marker->depth = depth + 1;
    marker->nest++;
    marker->parent = obj;
    marker->parent_old = objspace->params.generational && mosaic_old_p(obj);
    rb_gc_mark_children(objspace, obj);
    /* An old iseq still loading stays remembered: literals announced before this trace are not
     * in its code yet, so the trace could not see them to remember it (DESIGN.md,
     * "Loading iseqs"); the minor GC after the code is published traces it whole. */
    if (RB_UNLIKELY(marker->parent_old) && mosaic_iseq_loading_p(obj)) mosaic_remember(objspace, obj);
    marker->parent = parent;
    marker->parent_old = parent_old;
    marker->nest--;
    marker->depth = outer_depth;
}

/* An object leaves the prefetch queue: scanned now, at the depth it was marked at (so a wide
 * object marked near the roots still has its children scanned in place, not pushed), unless
 * MOSAIC_MARK_NEST_MAX scans are already nested on the C stack: then it goes on the mark stack
 * (one entry; the drain scans it near the top). */
static inline void
scan_dequeued(mosaic_objspace_t *objspace, struct mosaic_marker *marker, VALUE obj, unsigned int depth)
{
    if (marker->nest < MOSAIC_MARK_NEST_MAX) scan_in_place(objspace, marker, obj, depth);
    else mark_stack_push_offering(objspace, marker, obj);
}

/* Every 64 pushes or pops a shared marker looks whether another one waits for work, and hands
 * it half of its stack (mark_workers.c). */
static inline void
maybe_offer(mosaic_objspace_t *objspace, struct mosaic_marker *marker)
{
    if (RB_UNLIKELY(marker->shared) && (++marker->pushes & 63) == 0) {
        mosaic_race_point();   /* a marker slowed mid-trace: the others run dry and wait */
        if (mosaic_mark_workers_hungry(objspace)) mosaic_mark_workers_offer(objspace, marker);
    }
}

static void
mark_stack_push_offering(mosaic_objspace_t *objspace, struct mosaic_marker *marker, VALUE obj)
{
    push_grey(objspace, &marker->stack, obj);
    maybe_offer(objspace, marker);
}

void
mosaic_mark(mosaic_objspace_t *objspace, VALUE obj, bool pin)
{
    if (RB_SPECIAL_CONST_P(obj)) return;

    if (RB_UNLIKELY(!objspace->marking)) {
        /* The heap checker walks every object's edges through rb_gc_mark_children; it reports
         * a bad edge with its parent. */
        if (objspace->checks.edge_visitor) {
            objspace->checks.edge_visitor(objspace, obj, false);
            return;
        }
        rb_bug("Mosaic: rb_gc_impl_mark(%p) called outside the mark phase", (void *)obj);
    }
    struct mosaic_marker *marker = current_marker;
#if MOSAIC_CHECK
    if (!marker) rb_bug("Mosaic: marking %p on a thread that is not marking", (void *)obj);
    if (!mosaic_pointer_to_slot_p(objspace, (void *)obj)) {
        rb_bug("Mosaic: marking %p, which is not a slot of the heap", (void *)obj);
    }
    if (RB_BUILTIN_TYPE(obj) == T_NONE) {
        rb_bug("Mosaic: marking %p, a free slot", (void *)obj);
    }
#endif

    struct mosaic_page *page = mosaic_page_of(obj);
    size_t bit = mosaic_bit_index(obj);
    bool shared = marker->shared;
    /* An evacuating minor GC pins what the roots name directly (no parent): the VM's fields,
     * global variables and the like, which only rb_gc_update_vm_references would update
     * (docs/decisions/0027-reference-updates-per-minor-measured.md). */
    if (RB_UNLIKELY(objspace->nursery.evacuating) && marker->parent == Qfalse) pin = true;
    if (pin && !mosaic_bit_test(page->pinned_bits, bit)) bit_set(page->pinned_bits, bit, shared);
    if (mark_bit_claim(page->mark_bits, bit, shared)) {
        marker->marked_by_heap[page->heap - objspace->heaps]++;
        if (RB_UNLIKELY(objspace->nursery.evacuating)) mosaic_ptr_vec_push(&marker->traced, (void *)obj);
        if (objspace->mark.aging) age_and_promote(page, bit, shared);
        /* Old parent, child still young after this mark: keep the edge in the remembered set.
         * (With other markers, a child another marker is promoting may still read young: the
         * parent is then remembered once too often, which is safe.) */
        if (marker->parent_old && !mosaic_bit_test(page->old_bits, bit)) {
            mosaic_remember(objspace, marker->parent);
        }
        if (marker->depth < MOSAIC_MARK_EAGER_DEPTH) {
#if MOSAIC_MARK_QUEUE
            VALUE ready;
            unsigned int ready_depth;
            if (mark_queue_put(&marker->queue, obj, marker->depth, &ready, &ready_depth)) {
                scan_dequeued(objspace, marker, ready, ready_depth);
            }
#else
            scan_in_place(objspace, marker, obj, marker->depth);
#endif
        }
        else {
            mark_stack_push_offering(objspace, marker, obj);
        }
        return;
    }

    /* Old parent, child still young after this mark: keep the edge in the remembered set. */
    if (marker->parent_old && !mosaic_bit_test(page->old_bits, bit)) {
        mosaic_remember(objspace, marker->parent);
    }
}

/* rb_gc_mark_and_move: a movable edge. CRuby's reference updating (compact.c) walks the same
 * functions with reference_updating set and calls this for each edge: then it updates the
 * edge to its object's new address instead of marking. */
void
mosaic_mark_and_move(mosaic_objspace_t *objspace, VALUE *ptr)
{
    if (RB_UNLIKELY(objspace->compact.updating_references)) {
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
        if (objspace->checks.edge_visitor) {
            objspace->checks.edge_visitor(objspace, obj, true);
            return;
        }
        rb_bug("Mosaic: rb_gc_impl_mark_weak(%p) called outside the mark phase", (void *)ptr);
    }
    if (RB_UNLIKELY(RB_BUILTIN_TYPE(obj) == T_NONE)) {
        rb_bug("Mosaic: weak reference %p points to a free slot %p", (void *)ptr, (void *)obj);
    }
    struct mosaic_marker *marker = current_marker;
    /* An evacuating minor GC moves no weakly referenced object: weak slots are cleared, not
     * updated (nursery.c). */
    if (RB_UNLIKELY(objspace->nursery.evacuating)) {
        struct mosaic_page *page = mosaic_page_of(obj);
        size_t bit = mosaic_bit_index(obj);
        if (!mosaic_bit_test(page->pinned_bits, bit)) bit_set(page->pinned_bits, bit, marker->shared);
    }
    /* Each marker has its own list and index: a parent is traced by one marker, which
     * registers all of its slots. */
    switch (weak_list_add(marker->weak_refs, marker->weak_index, ptr)) {
      case MOSAIC_WEAK_ADDED: marker->weak_count++; break;
      case MOSAIC_WEAK_PRESENT: break;
      case MOSAIC_WEAK_NO_MEMORY: weak_slot_unregistered(objspace, ptr); return;
    }

    /* The same rule as for strong edges: an old parent whose weak referent is young stays
     * remembered, so the next minor GC traces it again and registers this slot again. Without
     * it, that minor GC would free the referent and leave the slot pointing at a reused slot. */
    if (marker->parent_old && !mosaic_old_p(obj)) {
        mosaic_remember(objspace, marker->parent);
    }
}

/* Forgets every registration of ptr in `marker`'s list, if its parent registered it. */
static void
remove_weak_registered(struct mosaic_marker *marker, VALUE parent, VALUE *ptr)
{
    /* Only a parent that is marked has been traced (it registers its slots when traced, after
     * being marked). */
    if (!RB_SPECIAL_CONST_P(parent) && !mosaic_marked_p(parent)) return;
    struct mosaic_weak_index *index = marker->weak_index;
    if (!index->built && (index->unbuildable || !mosaic_weak_index_build(index, marker->weak_refs, WEAK_LIMIT))) {
        /* No memory for the index: every registration of ptr found by a scan of the list. */
        struct mosaic_ptr_vec *list = marker->weak_refs;
        for (size_t i = 0; i < list->size; i++) {
            if (list->items[i] == (void *)ptr) list->items[i] = NULL;
        }
        return;
    }
    size_t pos;
    if (mosaic_weak_index_remove(index, ptr, &pos)) marker->weak_refs->items[pos] = NULL;
}

/* rb_gc_remove_weak: the memory at ptr is about to be freed; forget every registration of it.
 * O(1) expected (weak_index.c), never a scan of the list. Only a reference registered in the
 * current mark phase can still be in the list. */
void
mosaic_remove_weak(mosaic_objspace_t *objspace, VALUE parent, VALUE *ptr)
{
    if (objspace->checks.edge_visitor) return;
    if (objspace->marking) {
        /* Called from a mark function (the parent's): the slot is in the list of the marker
         * tracing it, the one running here; else the collecting thread's. */
        remove_weak_registered(current_marker ? current_marker : &objspace->mark.main_marker, parent, ptr);
        return;
    }
    if (!objspace->incremental.marking) return;
    /* Between the steps of an incremental mark the mutator deletes entries (WeakMap#delete and
     * the like), maybe in several Ractors at once: the list and its index are the collecting
     * thread's, so under the VM lock (no barrier: a step holds the lock with the world
     * stopped), the state read again under it. */
    unsigned int lev = rb_gc_vm_lock_no_barrier();
    if (objspace->incremental.marking) remove_weak_registered(&objspace->mark.main_marker, parent, ptr);
    rb_gc_vm_unlock_no_barrier(lev);
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
            size_t words = mosaic_page_bitmap_words(page);
            memset(page->mark_bits, 0, MOSAIC_BITMAP_WORDS * sizeof(mosaic_bits_t));
            /* Written only where set: in a forked child, most pages have none. */
            for (size_t w = 0; w < words; w++) {
                MOSAIC_STORE_CHANGED(page->pinned_bits[w], 0);
                MOSAIC_STORE_CHANGED(page->remembered_bits[w], 0);
            }
        }
    }
}

static void
push_for_rescan(mosaic_objspace_t *objspace, VALUE obj)
{
    push_grey(objspace, &objspace->mark.main_marker.stack, obj);
    if (RB_UNLIKELY(objspace->nursery.evacuating)) {
        mosaic_ptr_vec_push(&objspace->nursery.traced, (void *)obj);
        objspace->nursery.rescanned++;
    }
}

/* The slots a marker has marked in this phase (all classes). */
size_t
mosaic_marker_marked(const struct mosaic_marker *marker)
{
    size_t n = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) n += marker->marked_by_heap[i];
    return n;
}

/* Scans until this marker's mark stack and prefetch queue are both empty, or until it has
 * marked `budget` more slots (SIZE_MAX: no bound; an incremental step's budget). What the
 * stack hands out goes through the queue too, so it is prefetched as well. Returns true when
 * both are empty. Other markers may still be tracing when it returns (mosaic_mark_workers_finish
 * waits for them). */
static bool
marker_trace(mosaic_objspace_t *objspace, struct mosaic_marker *marker, size_t budget)
{
    VALUE obj;
    unsigned int depth = 0;
    size_t until = budget == SIZE_MAX ? SIZE_MAX : mosaic_add_sat(mosaic_marker_marked(marker), budget);
    for (;;) {
        if (RB_UNLIKELY(until != SIZE_MAX) && mosaic_marker_marked(marker) >= until) return false;
        if (mark_stack_pop(&marker->stack, &obj)) {
            depth = marker->base_depth;
            maybe_offer(objspace, marker);
#if MOSAIC_MARK_QUEUE
            VALUE ready;
            if (!mark_queue_put(&marker->queue, obj, marker->base_depth, &ready, &depth)) continue;
            obj = ready;
#endif
        }
        else if (!mark_queue_take(&marker->queue, &obj, &depth)) {
            break;
        }
        scan_dequeued(objspace, marker, obj, depth);
    }
    MOSAIC_ASSERT(marker->depth == marker->base_depth && marker->nest == 0);
    marker->parent = Qfalse;
    marker->parent_old = false;
    return true;
}

void
mosaic_marker_drain(mosaic_objspace_t *objspace, struct mosaic_marker *marker)
{
    marker_trace(objspace, marker, SIZE_MAX);
}

static void
mark_drain(mosaic_objspace_t *objspace)
{
    mosaic_marker_drain(objspace, &objspace->mark.main_marker);
}

static void
update_weak_references(mosaic_objspace_t *objspace)
{
    size_t retained = 0;
    for (size_t i = 0; i < objspace->mark.weak_refs.size; i++) {
        VALUE *ptr = objspace->mark.weak_refs.items[i];
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
    objspace->mark.weak_refs.size = 0;
    mosaic_weak_index_reset(&objspace->mark.weak_index);   /* built, or found unbuildable */
}

/* Parallel marking pays for its hand-offs only when there is much to trace: when the latest
 * mark phase of the same kind traced at least parallel_mark_min slots (a minor GC traces what
 * survives of the young, usually far less than the young slots in use), and more than one GC
 * thread is configured. Before the first of its kind, the slots in use (major) or young slots
 * in use (minor) stand for it. */
static bool
parallel_mark_p(mosaic_objspace_t *objspace, bool full)
{
    if (objspace->params.gc_threads < 2) return false;
    return mosaic_expected_traced(objspace, full) >= objspace->params.parallel_mark_min;
}

/* The start of every mark phase: counts zeroed, the main marker set up, the mark bits cleared
 * (major) or set to the old bits with the remembered set pushed and traced (minor). */
static void
mark_setup(mosaic_objspace_t *objspace, bool full, bool parallel)
{
    objspace->stats.marked_slots = 0;
    objspace->stats.weak_references_count = 0;
    objspace->incremental.traced_by_threads = 0;
    objspace->mark.overflowed = false;
#if MOSAIC_CHECK
    chunks_limit = objspace->params.stress_mark_memory;
#endif
    objspace->stats.remembered_rescanned = 0;
    objspace->nursery.traced.size = 0;
    objspace->nursery.rescanned = 0;
    /* With full marks disabled (GC.config(rgengc_allow_full_mark: false)) nothing is promoted:
     * old garbage could then only be freed by an explicit GC.start, as in the default GC. */
    objspace->mark.aging = objspace->params.generational && objspace->params.allow_full_mark;
    objspace->marking = true;
    struct mosaic_marker *marker = &objspace->mark.main_marker;
    marker->weak_refs = &objspace->mark.weak_refs;
    marker->weak_index = &objspace->mark.weak_index;
    mosaic_marker_begin(objspace, marker, parallel);

    if (full) {
        major_mark_start(objspace);
    }
    else {
        mosaic_minor_mark_start(objspace, push_for_rescan);
        mark_drain(objspace);
    }
}

/* The roots: what Mosaic's own tables hold (finalizers, object ids; neither has a write
 * barrier), the machine context, and CRuby's roots. Not drained here. */
static void
mark_roots(mosaic_objspace_t *objspace)
{
    mosaic_finalize_mark_roots(objspace);
    mosaic_objid_mark_roots(objspace);
    rb_gc_save_machine_context();
    rb_gc_mark_roots(objspace, NULL);
}

/* The type of a marked slot that tracing may read: not free, not a zombie, not moved. */
static inline bool
traceable_p(VALUE obj)
{
    switch (RB_BUILTIN_TYPE(obj)) {
      case T_NONE: case T_ZOMBIE: case T_MOVED:
        return false;
      default:
        return true;
    }
}

/* The mark stack could not grow during this phase (no chunk could be mapped: memory exhausted,
 * or MOSAIC_STRESS_MARK_MEMORY), so some marked objects were never traced. Every marked object
 * is traced again here, by `marker` on the collecting thread alone (every other marker is idle),
 * and what that marks is drained; a pass that overflows again is followed by another. Tracing a
 * marked object twice is harmless: its marked children are skipped, remembering an old parent
 * and registering a weak slot are idempotent (the weak list may hold a slot twice; clearing it
 * twice is the same). In a minor GC the old objects count as marked and are traced too: a young
 * object an old garbage object names then survives this GC, which is safe. Each pass marks at
 * least the children of every marked object, so the passes end. An evacuating minor GC moves
 * nothing after an overflow: its list of traced objects would miss the rescanned ones. */
static void
mark_overflow_rescan(mosaic_objspace_t *objspace, struct mosaic_marker *marker)
{
    while (__atomic_load_n(&objspace->mark.overflowed, __ATOMIC_RELAXED)) {
        objspace->mark.overflowed = false;
        objspace->stats.mark_overflow_rescans++;
        objspace->nursery.evacuating = false;
        marker->shared = false;
        for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
            struct mosaic_heap *heap = &objspace->heaps[h];
            for (size_t j = 0; j < heap->page_count; j++) {
                struct mosaic_page *page = heap->pages[j];
                size_t words = mosaic_page_bitmap_words(page);
                for (size_t w = 0; w < words; w++) {
                    mosaic_bits_t bits = page->mark_bits[w];
                    while (bits) {
                        int b = __builtin_ctzll(bits);
                        bits &= bits - 1;
                        VALUE obj = mosaic_slot_at(page, w * 64 + (size_t)b);
                        if (!traceable_p(obj)) continue;
                        scan_in_place(objspace, marker, obj, marker->base_depth);
                        marker_trace(objspace, marker, SIZE_MAX);
                    }
                }
            }
        }
    }
}

/* The end of every mark phase (stack and queue empty): what an overflow left traced, counts
 * merged, dead weak references cleared, old objects counted. */
static void
mark_complete(mosaic_objspace_t *objspace, bool full, bool parallel)
{
    struct mosaic_marker *marker = &objspace->mark.main_marker;
    size_t traced = 0;
    if (parallel) {
        traced = mosaic_mark_workers_finish(objspace, marker);
        /* What merging the threads' weak slots had to mark strongly (weak_slot_unregistered). */
        marker->shared = false;
        marker_trace(objspace, marker, SIZE_MAX);
    }
    mark_overflow_rescan(objspace, marker);
    traced += mosaic_marker_end(objspace, marker) + objspace->incremental.traced_by_threads;
    objspace->mark.last_traced[full] = traced + 1;

    update_weak_references(objspace);
    objspace->marking = false;
    if (objspace->params.generational) mosaic_generation_count(objspace);
    rb_ractor_finish_marking();
}

/* Marks everything reachable from the roots (full), or from the roots and the remembered
 * set with old objects taken as reached (minor). World stopped, all pages swept. */
void
mosaic_mark_phase(mosaic_objspace_t *objspace, bool full)
{
    /* Markers start after the objspace's marking state is set: they read it (mark_setup sets
     * the rest before any object is marked). */
    objspace->mark.aging = objspace->params.generational && objspace->params.allow_full_mark;
    objspace->marking = true;
    bool parallel = parallel_mark_p(objspace, full) && mosaic_mark_workers_begin(objspace, 0);
    mark_setup(objspace, full, parallel);
    mosaic_finalize_mark_roots(objspace);
    mosaic_objid_mark_roots(objspace);
    mark_drain(objspace);
    rb_gc_save_machine_context();
    rb_gc_mark_roots(objspace, NULL);
    mark_drain(objspace);
    mark_complete(objspace, full, parallel);
}

/* ================================================= incremental marking */

/* Between the pauses of an incremental mark (DESIGN.md, "Incremental marking") the main marker keeps its
 * stack (the grey objects), counts and weak list; each pause takes it up again on the
 * collecting thread, and leaves it with the prefetch queue emptied onto the stack: a queued
 * object is marked but not yet scanned, so it is grey and must be found by a later step. */
static void
marker_resume(mosaic_objspace_t *objspace, struct mosaic_marker *marker, unsigned int base_depth)
{
    marker->parent = Qfalse;
    marker->parent_old = false;
    marker->base_depth = base_depth;
    marker->depth = base_depth;
    marker->nest = 0;
    current_marker = marker;
    objspace->marking = true;
}

/* The prefetch queue emptied onto the stack: a queued object is marked but not yet scanned. */
static void
marker_flush_queue(mosaic_objspace_t *objspace, struct mosaic_marker *marker)
{
#if MOSAIC_MARK_QUEUE
    VALUE obj;
    unsigned int depth;
    while (mark_queue_take(&marker->queue, &obj, &depth)) push_grey(objspace, &marker->stack, obj);
#else
    (void)objspace;
    (void)marker;
#endif
}

static void
marker_pause(mosaic_objspace_t *objspace, struct mosaic_marker *marker)
{
    marker_flush_queue(objspace, marker);
    objspace->marking = false;
    current_marker = NULL;
}

/* A marker of a parallel incremental step (mark_workers.c): traces until `budget` more slots
 * are marked (false: what is left is all on its stack) or it has nothing left (true). */
bool
mosaic_marker_trace(mosaic_objspace_t *objspace, struct mosaic_marker *marker, size_t budget)
{
    if (marker_trace(objspace, marker, budget)) return true;
    marker_flush_queue(objspace, marker);
    return false;
}

static bool
mark_stack_empty(const struct mosaic_mark_stack *stack)
{
    for (const struct mosaic_mark_chunk *c = stack->top; c; c = c->prev) {
        if (c->used) return false;
    }
    return true;
}

/* The start pause of an incremental major GC (world stopped, every page swept): the mark bits
 * cleared and the roots marked; what they reach waits on the stack for the steps. */
void
mosaic_mark_incremental_start(mosaic_objspace_t *objspace)
{
    mark_setup(objspace, true, false);
    /* The roots' children are pushed, not scanned in place: the start pause marks the roots
     * only (scanning in place to MOSAIC_MARK_EAGER_DEPTH from every root covers much of a
     * large heap). */
    marker_resume(objspace, &objspace->mark.main_marker, MOSAIC_MARK_EAGER_DEPTH);
    mark_roots(objspace);
    marker_pause(objspace, &objspace->mark.main_marker);
    objspace->incremental.marking = true;
}

/* Objects the mutator re-greyed between steps (rb_gc_writebarrier_remember on a marked object:
 * mosaic_mark_grey_again) are traced again here, on the collecting thread alone, before any GC
 * thread starts: such an object may still be on the mark stack as well (grey since it was
 * marked), and two markers must never trace one object at the same time (a mark function may
 * change what it marks: CRuby's method-cache cleanup frees entries). Every other object is on
 * the stack at most once: it is pushed when it is marked, by the marker that marked it. Each
 * object's retrace bit is cleared before it is traced: a bulk write after this step queues it
 * again, once. */
static void
retrace_regreyed(mosaic_objspace_t *objspace, struct mosaic_marker *marker)
{
    VALUE obj;
    while (mark_stack_pop(&objspace->incremental.retrace, &obj)) {
        mosaic_bit_clear(mosaic_page_of(obj)->retrace_bits, mosaic_bit_index(obj));
        objspace->stats.incremental_retraced_objects++;
        scan_in_place(objspace, marker, obj, marker->base_depth);
    }
    objspace->incremental.retrace_queued = 0;
}

/* One step (a pause): traces until `budget` more slots are marked or nothing is grey. Returns
 * true when nothing is grey (the final pause may come). */
bool
mosaic_mark_incremental_step(mosaic_objspace_t *objspace, size_t budget)
{
    struct mosaic_marker *marker = &objspace->mark.main_marker;
    /* Nothing in place: a popped object's children are pushed, so the budget is checked
     * after each object, not after a subtree. */
    marker_resume(objspace, marker, MOSAIC_MARK_EAGER_DEPTH);
    retrace_regreyed(objspace, marker);
    /* A step large enough is shared with the GC threads, each marker taking an equal part of
     * the budget (mark_workers.c); they hand what is left back to this stack. */
    unsigned int markers = objspace->params.gc_threads;
    bool parallel = markers >= 2 && budget >= objspace->params.parallel_mark_min / 8 &&
        mosaic_mark_workers_begin(objspace, budget / markers + 1);
    if (parallel) {
        marker->shared = true;
        mosaic_mark_workers_step(objspace, marker);
        marker->shared = false;
    }
    else {
        marker_trace(objspace, marker, budget);
    }
    marker_pause(objspace, marker);
    return mark_stack_empty(&marker->stack);
}

/* Every object that is marked and write-barrier-unprotected: the final pause traces each again
 * (its writes since it was traced were not reported), so between steps they count as grey. */
void
mosaic_marked_wb_unprotected_each(mosaic_objspace_t *objspace, void (*func)(VALUE obj, void *data), void *data)
{
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        struct mosaic_heap *heap = &objspace->heaps[h];
        for (size_t j = 0; j < heap->page_count; j++) {
            struct mosaic_page *page = heap->pages[j];
            size_t words = mosaic_page_bitmap_words(page);
            for (size_t w = 0; w < words; w++) {
                mosaic_bits_t bits = page->mark_bits[w] & page->wb_unprotected_bits[w];
                while (bits) {
                    int b = __builtin_ctzll(bits);
                    bits &= bits - 1;
                    func(mosaic_slot_at(page, w * 64 + (size_t)b), data);
                }
            }
        }
    }
}

static void
push_main_i(VALUE obj, void *data)
{
    mosaic_objspace_t *objspace = data;
    push_grey(objspace, &objspace->mark.main_marker.stack, obj);
}

/* The final pause: the roots again (none of them has a write barrier), then every marked
 * wb-unprotected object traced again, then what a mark phase does at its end. */
void
mosaic_mark_incremental_finish(mosaic_objspace_t *objspace)
{
    struct mosaic_marker *marker = &objspace->mark.main_marker;
    objspace->incremental.marking = false;
    /* On the collecting thread alone: the marked wb-unprotected objects pushed again may still
     * be on the stack as grey (see retrace_regreyed). */
    marker_resume(objspace, marker, 0);
    retrace_regreyed(objspace, marker);
    mark_roots(objspace);
    mark_drain(objspace);
    mosaic_marked_wb_unprotected_each(objspace, push_main_i, objspace);
    mark_drain(objspace);
    mark_complete(objspace, true, false);
}

/* The write barrier's insertion step while a major GC marks in steps (generation.c; VM lock
 * held, outside the pauses): obj, newly referred to by a marked object, is marked and pushed
 * (grey), so no marked object is left referring to an unmarked one that no step would find. */
void
mosaic_mark_grey(mosaic_objspace_t *objspace, VALUE obj)
{
    struct mosaic_page *page = mosaic_page_of(obj);
    size_t bit = mosaic_bit_index(obj);
    if (!mark_bit_claim(page->mark_bits, bit, true)) return;
    objspace->mark.main_marker.marked_by_heap[page->heap - objspace->heaps]++;
    if (objspace->mark.aging) age_and_promote(page, bit, true);
    push_grey(objspace, &objspace->mark.main_marker.stack, obj);
}

/* True when obj is marked and not queued for a retrace yet: only then does a bulk write to it
 * need the VM lock and mosaic_mark_grey_again. Read without the lock (relaxed loads): a bit
 * another Ractor sets meanwhile is read again under the lock. */
bool
mosaic_mark_needs_regrey(VALUE obj)
{
    struct mosaic_page *page = mosaic_page_of(obj);
    size_t bit = mosaic_bit_index(obj);
    mosaic_bits_t mask = (mosaic_bits_t)1 << (bit % 64);
    return (__atomic_load_n(&page->mark_bits[bit / 64], __ATOMIC_RELAXED) & mask) &&
        !(__atomic_load_n(&page->retrace_bits[bit / 64], __ATOMIC_RELAXED) & mask);
}

/* rb_gc_writebarrier_remember while marking in steps (VM lock held, outside the pauses): obj
 * changed in bulk (no write was reported one by one). If it is marked it is traced again at the
 * next step, queued once however many bulk writes it takes before then (page->retrace_bits):
 * the queue holds at most one entry per marked object, not one per write. */
void
mosaic_mark_grey_again(mosaic_objspace_t *objspace, VALUE obj)
{
    if (!mosaic_marked_p(obj)) return;
    /* After an overflow the final pause traces every marked object again anyway; queueing would
     * only try to map a chunk again at every bulk write. */
    if (RB_UNLIKELY(__atomic_load_n(&objspace->mark.overflowed, __ATOMIC_RELAXED))) return;
    struct mosaic_page *page = mosaic_page_of(obj);
    size_t bit = mosaic_bit_index(obj);
    if (mosaic_bit_test(page->retrace_bits, bit)) return;
    mosaic_bit_set_atomic(page->retrace_bits, bit);   /* other Ractors read it without the lock */
    if (RB_UNLIKELY(!mark_stack_push(&objspace->incremental.retrace, obj))) {
        /* Not queued: the final pause traces every marked object again instead. The bit goes,
         * so that a later bulk write queues the object again rather than taking it as queued. */
        mosaic_bit_clear_atomic(page->retrace_bits, bit);
        mark_overflowed(objspace);
        return;
    }
    if (++objspace->incremental.retrace_queued > objspace->stats.incremental_retrace_queue_max) {
        objspace->stats.incremental_retrace_queue_max = objspace->incremental.retrace_queued;
    }
}

/* Every grey object between steps: the main marker's stack and the re-greyed objects (verify.c). */
void
mosaic_mark_stack_each(mosaic_objspace_t *objspace, void (*func)(VALUE obj, void *data), void *data)
{
    const struct mosaic_mark_stack *stacks[] = { &objspace->mark.main_marker.stack, &objspace->incremental.retrace };
    for (size_t s = 0; s < sizeof(stacks) / sizeof(stacks[0]); s++) {
        for (const struct mosaic_mark_chunk *c = stacks[s]->top; c; c = c->prev) {
            for (size_t i = 0; i < c->used; i++) func(c->items[i], data);
        }
    }
}
