/*
 * free_handoff.c: the frees the background sweeper hands to the mutator.
 *
 * Owns: the batches of malloc'd blocks that dead objects held, which the background sweeper
 * took off the books (malloc.c) but did not give to free(); the mutator frees them, a batch
 * at a time just before its own mallocs and allocation refills, and all of them when a sweep
 * is prepared.
 *
 * Why (docs/DESIGN.md, "Background sweeping"): glibc serves a block beyond its per-thread
 * cache (above 1032 bytes, or once that cache's bin holds 7) from an arena, under the arena's
 * lock. A dead String's buffer belongs to the main arena, where the mutator mallocs the next
 * one; a sweeper freeing it there beside the mutator contends for that lock at every call
 * (string-malloc-pressure: 96,507 context switches, against the default GC's 14). Freed by
 * the mutator just before its malloc, a block is also the first one glibc can hand back.
 *
 * Invariants:
 *  - Only the background sweeper thread defers (mosaic_free_handoff_thread_begin marks it).
 *    It fills a batch of its own and publishes it at the end of every page it sweeps
 *    (mosaic_free_handoff_publish), so no block waits in an unpublished batch past its page,
 *    and none when the thread is idle (a stop, a fork, a collection).
 *  - `full` and `spare` are lock-free stacks of batches. `full` is emptied only by exchange
 *    with NULL (take everything), by a thread holding the GVL; what it does not free it pushes
 *    back. `spare` is popped only by the sweeper thread: one popper, so no ABA.
 *  - The books (malloc_bytes, malloc_increase, the sweep's tally) are settled when a block is
 *    deferred, as if freed: the VM no longer holds it. Only the call to free() moves.
 *  - A fork: the sweeper is idle (bg_sweep.c's fork handler), and Ruby forks holding the GVL,
 *    so no drain is half done; the child inherits the batches and frees them as the parent
 *    would.
 */
#include <stdlib.h>

#include "core/mosaic.h"

/* Blocks of at most this many usable bytes are freed by the sweeper itself: glibc's fast bins
 * (up to 128 bytes on 64-bit) take them without the arena lock. */
#ifndef MOSAIC_HANDOFF_MIN_BYTES
# define MOSAIC_HANDOFF_MIN_BYTES 128
#endif
#define MOSAIC_HANDOFF_BATCH 62

struct mosaic_free_batch {
    struct mosaic_free_batch *next;
    size_t count;
    void *blocks[MOSAIC_HANDOFF_BATCH];
};

/* The sweeper thread's batch being filled, and whether this thread defers at all. */
static __thread struct mosaic_free_batch *filling;
static __thread bool deferring;

static void
push(struct mosaic_free_batch **stack, struct mosaic_free_batch *batch)
{
    struct mosaic_free_batch *head = __atomic_load_n(stack, __ATOMIC_RELAXED);
    mosaic_race_point();   /* another push, or a drain's exchange, between the load and the CAS */
    do {
        batch->next = head;
    } while (!__atomic_compare_exchange_n(stack, &head, batch, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* The sweeper's next empty batch: a spare one, else a new one (NULL if malloc fails). */
static struct mosaic_free_batch *
take_spare(struct mosaic_free_handoff *handoff)
{
    struct mosaic_free_batch *head = __atomic_load_n(&handoff->spare, __ATOMIC_ACQUIRE);
    while (head && !__atomic_compare_exchange_n(&handoff->spare, &head, head->next, true,
                                                __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
    }
    if (!head && !(head = malloc(sizeof(*head)))) return NULL;
    head->count = 0;
    head->next = NULL;
    return head;
}

void
mosaic_free_handoff_thread_begin(void)
{
    deferring = true;
}

bool
mosaic_free_handoff_defer(mosaic_objspace_t *objspace, void *block, size_t usable_size)
{
    if (!deferring || usable_size <= MOSAIC_HANDOFF_MIN_BYTES) return false;
    struct mosaic_free_handoff *handoff = &objspace->threads.free_handoff;
    if (!filling && !(filling = take_spare(handoff))) return false;
    filling->blocks[filling->count++] = block;
    if (filling->count == MOSAIC_HANDOFF_BATCH) mosaic_free_handoff_publish(objspace);
    return true;
}

void
mosaic_free_handoff_publish(mosaic_objspace_t *objspace)
{
    struct mosaic_free_batch *batch = filling;
    if (!batch || batch->count == 0) return;
    filling = NULL;
    struct mosaic_free_handoff *handoff = &objspace->threads.free_handoff;
    __atomic_fetch_add(&handoff->deferred_blocks, batch->count, __ATOMIC_RELAXED);
    push(&handoff->full, batch);
}

/* Frees the blocks of up to `max_batches` published batches (all of them for SIZE_MAX). */
static void
drain(mosaic_objspace_t *objspace, size_t max_batches)
{
    struct mosaic_free_handoff *handoff = &objspace->threads.free_handoff;
    struct mosaic_free_batch *taken = __atomic_exchange_n(&handoff->full, NULL, __ATOMIC_ACQUIRE);
    mosaic_race_point();   /* the sweeper publishes meanwhile: its batch waits for the push-back */
    for (size_t n = 0; taken && n < max_batches; n++) {
        struct mosaic_free_batch *batch = taken;
        taken = batch->next;
        for (size_t i = 0; i < batch->count; i++) free(batch->blocks[i]);
        push(&handoff->spare, batch);   /* take_spare empties it */
    }
    while (taken) {
        struct mosaic_free_batch *batch = taken;
        taken = batch->next;
        push(&handoff->full, batch);
    }
}

void
mosaic_free_handoff_drain_some(mosaic_objspace_t *objspace)
{
    if (RB_LIKELY(!__atomic_load_n(&objspace->threads.free_handoff.full, __ATOMIC_RELAXED))) return;
    if (!ruby_native_thread_p() || !ruby_thread_has_gvl_p()) return;
    drain(objspace, 1);
}

void
mosaic_free_handoff_drain_all(mosaic_objspace_t *objspace)
{
    drain(objspace, SIZE_MAX);
}

/* At the objspace's end (sweeper joined): every block freed, every batch too. */
void
mosaic_free_handoff_free(mosaic_objspace_t *objspace)
{
    mosaic_free_handoff_drain_all(objspace);
    struct mosaic_free_batch *batch = __atomic_exchange_n(&objspace->threads.free_handoff.spare, NULL, __ATOMIC_ACQUIRE);
    while (batch) {
        struct mosaic_free_batch *next = batch->next;
        free(batch);
        batch = next;
    }
}
