/*
 * incremental.c: a major GC that marks in steps (docs/DESIGN.md, "Incremental marking").
 *
 * The cycle: the start pause marks the roots (mosaic_incremental_start); steps, pauses of
 * their own at cache refills (alloc.c), trace a bounded number of slots, paced so that the
 * mark ends with about half of the heap's free room left (set_mark_pace); a catch-up step
 * runs when allocation in one class outruns the mark; the final pause
 * (mosaic_incremental_finish) marks the roots again, traces again what the write barrier
 * re-greyed, and finishes the cycle as a collection done at once would (collect.c). What a
 * step traces, the re-grey queue and the barrier's side are mark.c's and generation.c's;
 * which majors mark in steps is trigger.c's decision.
 *
 * Invariants: between steps the tri-color invariant holds (no black object points to a white
 * one, checked by the checking build: verify.c); the re-grey queue holds each object at
 * most once (page->retrace_bits); any collection asked for meanwhile finishes the mark
 * first (mosaic_collect).
 */
#include "core/mosaic.h"

static void set_mark_pace(mosaic_objspace_t *objspace);

/* The start pause of a major GC that marks in steps (mosaic_collect, step 4, once
 * mosaic_trigger_in_steps chose steps): the roots are marked, the steps' pace is set, and
 * the collector is left (*lev: the VM lock level mosaic_gc_enter returned). */
void
mosaic_incremental_start(mosaic_objspace_t *objspace, unsigned int reason, unsigned int *lev)
{
    bool measure = objspace->measure_time;
    uint64_t t = measure ? mosaic_now_ns() : 0;
    objspace->incremental.reason = reason & ~MOSAIC_REASON_IMMEDIATE_MARK;
    objspace->stats.latest_reason = objspace->incremental.reason;
    mosaic_heap_release_reserves(objspace);
    mosaic_mark_incremental_start(objspace);
    set_mark_pace(objspace);
    objspace->stats.incremental_marks++;
    objspace->incremental.steps_at_start = objspace->stats.incremental_steps;
    objspace->incremental.marked_in_steps = true;
    if (measure) objspace->stats.marking_time_ns += mosaic_now_ns() - t;
    mosaic_gc_exit(objspace, lev);
}

/* How much a step marks (DESIGN.md, "Pacing by allocation"): L slots to mark (the
 * latest major GC's count, or the old objects now if there are more), F free slots in the
 * heap's pages (the room the held-back pages give); a step per refill marks 2 * L / F slots
 * per slot the refill takes, so marking ends with about half of that room left. The growth
 * budgets are not counted in F: pacing by them spread a mark over room the heap did not have
 * yet, and the heap grew into it while marking (hash-heavy: 440 MB peak against 398 with
 * stop-the-world majors). *Why the old objects*: in a program building up its data the latest
 * major's count is far behind (hash-heavy: 1.29M traced, 1.54M old at the next major), the
 * steps were too small, the room ran out with much left to mark, and the collection that
 * followed finished the mark in one pause (319 and 366 ms in two runs). Old objects may have
 * died since, so this can overestimate L: the mark then ends early, in larger steps (safe). */
static void
set_mark_pace(mosaic_objspace_t *objspace)
{
    double live = mosaic_trigger_major_slots(objspace);
    double free = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        size_t total = heap->page_count * heap->slots_per_page;
        free += (double)(total > heap->used_slots_at_gc ? total - heap->used_slots_at_gc : 0);
    }
    objspace->incremental.mark_per_slot = free >= 1 ? 2.0 * live / free : live;
    objspace->incremental.live_estimate = live;
    objspace->incremental.catch_ups = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) objspace->heaps[i].catch_up_slots = 0;
}

static void incremental_step_of(mosaic_objspace_t *objspace, size_t budget);

/* A step, from a cache refill (alloc.c; VM lock held) that takes about `slots_taken` slots. */
void
mosaic_incremental_step(mosaic_objspace_t *objspace, size_t slots_taken)
{
    if (!objspace->incremental.marking || mosaic_dont_gc(objspace) || objspace->during_gc) return;
    if (!mosaic_gc_allowed_here()) return;
    size_t budget = (size_t)(objspace->incremental.mark_per_slot * (double)slots_taken);
    if (budget < objspace->params.mark_step_min) budget = objspace->params.mark_step_min;
    if (objspace->params.stress_incremental) budget = objspace->params.stress_incremental;
    incremental_step_of(objspace, budget);
}

/* A refill found no room and no budget while a major GC marks in steps: allocation in its
 * class outran the marking (the pace spreads L over the free slots of all classes, and one
 * class can fill first). Rather than finish the whole mark in this pause (the forced finish:
 * hash-heavy's 233-366 ms major pauses), a catch-up step marks L / MOSAIC_MARK_CATCH_UP_DIV
 * slots and the refill then grows the class by one page (alloc.c; not over the soft memory
 * limit), at most MOSAIC_MARK_CATCH_UPS times per mark across all classes; after that the
 * refill collects, which finishes the mark. So a mark that falls behind costs a few pauses of
 * an eighth of the mark each and at most that many pages. (The default GC of 3.4.5 finishes
 * the mark in this situation, gc_marks_continue: this is a departure from it.) Returns
 * true when the refill may grow (the mark goes on), false when it should not (no catch-up
 * left, or none allowed here); the step may also end the mark (incremental_marking false),
 * and then the refill looks for room again. */
bool
mosaic_incremental_catch_up(mosaic_objspace_t *objspace)
{
    if (!objspace->incremental.marking || mosaic_dont_gc(objspace) || objspace->during_gc) return false;
    if (!mosaic_gc_allowed_here() || objspace->params.stress_incremental) return false;
    if (objspace->incremental.catch_ups >= MOSAIC_MARK_CATCH_UPS) return false;
    objspace->incremental.catch_ups++;
    objspace->stats.incremental_catch_up_steps++;
    size_t budget = (size_t)(objspace->incremental.live_estimate / MOSAIC_MARK_CATCH_UP_DIV);
    if (budget < objspace->params.mark_step_min) budget = objspace->params.mark_step_min;
    incremental_step_of(objspace, budget);
    return true;
}

/* One step of `budget` newly marked slots; the final pause follows if the stack emptied. */
static void
incremental_step_of(mosaic_objspace_t *objspace, size_t budget)
{
    unsigned int lev;
    mosaic_gc_enter(objspace, &lev, true);
#if MOSAIC_CHECK
    if (mosaic_verify_retrace_queue(objspace)) rb_bug("Mosaic: the re-grey queue is inconsistent (see above)");
#endif
    uint64_t t = objspace->measure_time ? mosaic_now_ns() : 0;
    bool done = mosaic_mark_incremental_step(objspace, budget);
    objspace->stats.incremental_steps++;
    if (t) objspace->stats.marking_time_ns += mosaic_now_ns() - t;
#if MOSAIC_CHECK
    /* The tri-color invariant between steps (verify.c), checked after a step once a quarter of
     * the live slots were allocated since the latest check (as verify_due amortizes the heap
     * check under GC.stress): each check walks the heap. MOSAIC_VERIFY_STEPS=1: every step. */
    size_t allocated = mosaic_total_allocated(objspace);
    if ((objspace->params.verify_every_step ||
         allocated - objspace->checks.tricolor_checked_at >= mosaic_live_slots(objspace) / 4) &&
        (objspace->checks.tricolor_checked_at = allocated, mosaic_verify_tricolor(objspace))) {
        rb_bug("Mosaic: the tri-color invariant does not hold between incremental steps (see above)");
    }
#endif
    mosaic_gc_exit(objspace, &lev);
    mosaic_race_point();   /* the end of a step: other Ractors write before or after this one */
    if (done) mosaic_incremental_finish(objspace);
}

/* The final pause of a major GC that marks in steps (nothing when none does). */
void
mosaic_incremental_finish(mosaic_objspace_t *objspace)
{
    if (!objspace->incremental.marking || objspace->during_gc || !mosaic_gc_allowed_here()) return;
    mosaic_race_point();   /* another Ractor may finish the mark before this one locks */
    unsigned int lev;
    mosaic_gc_enter(objspace, &lev, true);
    /* Read again under the lock: another Ractor's collection may have finished the mark
     * since the test above; finishing it twice would sweep what was allocated since. */
    if (!objspace->incremental.marking) {
        mosaic_gc_exit(objspace, &lev);
        return;
    }
    uint64_t start_ns = mosaic_now_ns();
    objspace->gc_start_ns = start_ns;
    /* Caches hand their free slots back (sweep_prepare wants none held). */
    mosaic_caches_clear(objspace);
#if MOSAIC_CHECK
    if (mosaic_verify_retrace_queue(objspace)) rb_bug("Mosaic: the re-grey queue is inconsistent (see above)");
#endif
    mosaic_mark_incremental_finish(objspace);
    if (objspace->measure_time) objspace->stats.marking_time_ns += mosaic_now_ns() - start_ns;
    rb_gc_event_hook(0, RUBY_INTERNAL_EVENT_GC_END_MARK);
    objspace->gc_state = MOSAIC_STATE_SWEEPING;
    mosaic_collect_finish_cycle(objspace, objspace->incremental.reason, false, false, start_ns, &lev);
}
