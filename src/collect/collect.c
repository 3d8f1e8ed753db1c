/*
 * collect.c: one collection cycle, from the request to the end of its mark and sweep.
 *
 * A cycle (mosaic_collect), in order:
 *   1. enter (enter.c): take the VM lock, stop other Ractors (barrier), set during_gc,
 *      GC_ENTER event.
 *   2. finish the previous cycle's lazy sweep, so every page is swept.
 *   3. every Ractor's allocation cache hands its free slots back to their page.
 *   4. choose minor or major, and whether to compact (trigger.c, from what the pacer and the
 *      caller asked); GC_START event; mark from the roots, and
 *      in a minor GC from the remembered set (mark.c); clear dead weak references; GC_END_MARK.
 *   5. pace (pace.c): the room scale, from the GC time share since it was last set; then a
 *      major GC under the fragmentation policy (MOSAIC_AUTO_COMPACT=fragmentation) measures
 *      each class from the mark bits, with the free-slot ratios this GC applies, and may
 *      choose classes to compact (compact.c; then it sweeps at once); then the growth
 *      budgets from what survived.
 *   6. prepare the sweep: every page before_sweep. Sweep now if immediate (asked for, stress,
 *      compaction, or a heap walk is running), else lazily as allocation needs pages;
 *      GC_END_SWEEP when the last page is swept.
 *   6b. compact (compact.c), only after a full mark and a complete sweep: GC.compact,
 *      verify_compaction_references, any major GC while GC.auto_compact is on (or
 *      MOSAIC_AUTO_COMPACT=always), or the classes step 5 chose.
 *   7. leave: trace line and peak snapshot (memory.c), GC_EXIT event, clear during_gc,
 *      release the lock; schedule finalizers.
 * Pages that sat in the empty-page pool through the whole previous cycle are released at
 * step 2 (page.c).
 *
 * Incremental marking (incremental.c): a major GC that trigger.c sends to steps stops at
 * step 4 once the roots are marked (the start pause) and leaves; steps trace a bounded amount
 * at cache refills; the final pause marks the roots again, traces again what was re-greyed,
 * and runs steps 5-7 here (mosaic_collect_finish_cycle). Any collection asked for meanwhile
 * finishes that cycle first; one that is not GC.start or a compaction is then done (the
 * finished major GC did more than it asked).
 *
 * Time (GC.stat, docs/DESIGN.md, "Time and pauses"): :time is marking + sweeping (compaction counted
 * with sweeping), wall clock; every stay between enter and leave also adds to
 * :mosaic_gc_wall_time, :mosaic_gc_cpu_time and its kind's longest pause (enter.c).
 *
 * Invariants:
 *  - No allocation happens while during_gc (alloc.c reports it).
 *  - Every page is swept before a mark starts (step 2), so a mark never meets a page
 *    holding garbage of the cycle before.
 */
#include "core/mosaic.h"

/* Every collection is verified in the checking build (and with MOSAIC_VERIFY=1), including
 * MOSAIC_STRESS_MINOR's, except while GC.stress is on: a GC per allocation, each followed by
 * an O(heap) check, is quadratic, so under GC.stress a collection is checked once a quarter
 * of the live slots were allocated since the last check. Called with the VM lock held (the
 * counters walk every Ractor's cache). */
static bool
verify_due(mosaic_objspace_t *objspace)
{
#ifdef __SANITIZE_THREAD__
    /* make TSAN=1: only with MOSAIC_VERIFY=1. The check waits for the background sweeper and
     * finishes the sweep after every GC, so the sweeper would never run beside the mutator,
     * which is what ThreadSanitizer is there to watch (scripts/tsan-gate.sh). */
    if (!objspace->params.verify_after_gc) return false;
#else
    if (!(MOSAIC_CHECK || objspace->params.verify_after_gc)) return false;
#endif
    size_t allocated = mosaic_total_allocated(objspace);
    if (objspace->gc_stress && allocated - objspace->checks.stress_verified_at < mosaic_live_slots(objspace) / 4) {
        return false;
    }
    objspace->checks.stress_verified_at = allocated;
    return true;
}

/* Runs one full collection. Returns false when the GC did not run (disabled, not ready). */
bool
mosaic_collect(mosaic_objspace_t *objspace, unsigned int reason)
{
    /* These guards run before the VM lock: another Ractor may be changing dont_gc
     * (GC.disable, mosaic_gc_hold) or adding a page (sorted_count, page_table.c). Relaxed atomic loads;
     * a stale answer only decides whether to go for the lock. */
    if (mosaic_dont_gc(objspace) && !(reason & MOSAIC_REASON_METHOD)) return false;
    if (!mosaic_gc_allowed_here()) return false;
    if (__atomic_load_n(&objspace->pages.sorted_count, __ATOMIC_RELAXED) == 0) return false;  /* heap not ready */

    unsigned int lev;
    for (;;) {
        if (objspace->incremental.marking) {
            /* A major GC marks in steps: it ends now. What a minor GC, the pacer or the malloc
             * limit asked for is done by it; GC.start and compaction then run their own. */
            objspace->stats.incremental_forced_finishes++;
            mosaic_incremental_finish(objspace);
            if (!(reason & (MOSAIC_REASON_METHOD | MOSAIC_REASON_COMPACT))) return true;
        }
        mosaic_race_point();   /* another Ractor may start a mark in steps before this one locks */
        mosaic_gc_enter(objspace, &lev, true);
        /* Read again under the lock: another Ractor may have started a mark in steps between
         * the test above and the lock (GC.start from two Ractors). Collecting on top of it
         * would set up a new mark under it (a minor's mark bits = old bits), and its final
         * pause would then take old objects for traced and free their young children
         * (test_a_collection_does_not_run_over_a_mark_another_ractor_started). */
        if (!objspace->incremental.marking) break;
        mosaic_gc_exit(objspace, &lev);
    }

    uint64_t start_ns = mosaic_now_ns();
    bool measure = objspace->measure_time;
    objspace->gc_start_ns = start_ns;

    /* 2. Finish the previous cycle; pooled pages idle since then go back to the OS (all of
     *    them near the soft limit). */
    if (objspace->lazy_sweeping) {
        uint64_t t = measure ? mosaic_now_ns() : 0;
        mosaic_sweep_rest(objspace);
        if (measure) objspace->stats.sweeping_time_ns += mosaic_now_ns() - t;
    }
    if (objspace->heap_walk_depth == 0) mosaic_pool_trim(objspace, mosaic_pace_near_limit(objspace), false);

    /* 3. Caches hand their free slots back to their pages. */
    mosaic_caches_clear(objspace);

    /* Minor or major, compact or not (trigger.c). */
    struct mosaic_collection_plan plan;
    mosaic_trigger_plan(objspace, reason, &plan);
    reason = plan.reason;
    bool full = plan.full, compact = plan.compact, by_fragmentation = plan.by_fragmentation;
    objspace->nursery.evacuating = plan.evacuate;   /* marking records and pins for it (mark.c) */

    objspace->stats.count++;
    if (full) {
        objspace->stats.major_gc_count++;
        objspace->gen.last_major_count = objspace->stats.count;
    }
    else {
        objspace->stats.minor_gc_count++;
    }
    objspace->full_mark = full;
    objspace->stats.latest_reason = reason;
    objspace->malloc.bytes_at_gc = __atomic_load_n(&objspace->malloc.bytes, __ATOMIC_RELAXED);
    /* The cycle's most, for the draw that malloc_trim's rule reads (memory.c, expected_refill). */
    if (objspace->malloc.bytes_at_gc > objspace->malloc.high_at_gc) objspace->malloc.high_at_gc = objspace->malloc.bytes_at_gc;
    objspace->heap_bytes_at_gc = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        heap->used_slots_at_gc = mosaic_heap_used_slots(heap, heap->total_allocated_objects);
        heap->allocated_in_cycle = heap->total_allocated_objects - heap->allocated_at_gc;
        heap->allocated_at_gc = heap->total_allocated_objects;
        objspace->heap_bytes_at_gc += heap->used_slots_at_gc * heap->slot_size;
    }
    mosaic_pace_malloc_limit(objspace);

    rb_gc_event_hook(0, RUBY_INTERNAL_EVENT_GC_START);
    objspace->gc_state = MOSAIC_STATE_MARKING;

    /* 4. Mark: at once, or (a major GC the pacer started) its start pause only. */
    if (full && !compact && mosaic_trigger_in_steps(objspace, reason)) {
        mosaic_incremental_start(objspace, reason, &lev);
        return true;
    }
    uint64_t mark_start = mosaic_now_ns();
    objspace->incremental.marked_in_steps = false;
    mosaic_mark_phase(objspace, full);
    uint64_t mark_ns = mosaic_now_ns() - mark_start;
    if (measure) objspace->stats.marking_time_ns += mark_ns;
    objspace->mark.latest_ns = mark_ns;
    mosaic_trigger_observe_mark(objspace, full, mark_ns);
    rb_gc_event_hook(0, RUBY_INTERNAL_EVENT_GC_END_MARK);
    objspace->gc_state = MOSAIC_STATE_SWEEPING;

    mosaic_collect_finish_cycle(objspace, reason, compact, by_fragmentation, start_ns, &lev);
    return true;
}

/* Steps 5-7 of a cycle whose mark is complete (GC_END_MARK fired): pace (and, with
 * `by_fragmentation`, let the fragmentation policy choose whether to compact), sweep (at once,
 * or lazily), compact, leave. */
void
mosaic_collect_finish_cycle(mosaic_objspace_t *objspace, unsigned int reason, bool compact, bool by_fragmentation,
                            uint64_t start_ns, unsigned int *lev)
{
    bool measure = objspace->measure_time;

    /* 5. Pace: the mark's totals and the room scale first, which the fragmentation policy's
     *    measure and the pacing both apply to the free-slot ratios; then the fragmentation policy (compact.c):
     *    compact the classes a packing would free pages of, with a move budget derived from
     *    this mark's time; then the budgets. */
    mosaic_pace_measure_mark(objspace);
    if (by_fragmentation && mosaic_compact_select(objspace)) {
        compact = true;
        objspace->compact.trigger = MOSAIC_COMPACT_BY_FRAGMENTATION;
    }
    mosaic_pace_after_mark(objspace);
    if (RB_UNLIKELY(objspace->params.ref_update_probe) && !objspace->full_mark) {
        mosaic_ref_update_probe(objspace, start_ns);
    }

    /* 6. Sweep; an evacuating minor GC moves the nursery's survivors out first (nursery.c). */
    mosaic_sweep_prepare(objspace);
    if (objspace->nursery.evacuating) {
        uint64_t t = measure ? mosaic_now_ns() : 0;
        mosaic_nursery_evacuate(objspace);
        objspace->nursery.evacuating = false;
        if (measure) objspace->stats.sweeping_time_ns += mosaic_now_ns() - t;
    }
    if ((reason & MOSAIC_REASON_IMMEDIATE_SWEEP) || compact) {
        uint64_t t = measure ? mosaic_now_ns() : 0;
        mosaic_sweep_rest(objspace);
        if (measure) objspace->stats.sweeping_time_ns += mosaic_now_ns() - t;
    }
    if (compact) {
        /* Counted as sweeping time, as the default GC counts its compaction (GC.stat :time). */
        uint64_t t = measure ? mosaic_now_ns() : 0;
        mosaic_compact(objspace);
        if (measure) objspace->stats.sweeping_time_ns += mosaic_now_ns() - t;
    }

    uint64_t end_ns = mosaic_now_ns();
    mosaic_pace_gc_time(objspace, start_ns, end_ns);
    if (objspace->stats.profiler_enabled) mosaic_profile_record(objspace, reason, start_ns, end_ns);

    /* 7. Leave. */
    mosaic_memory_after_gc(objspace, reason);
    if (RB_UNLIKELY(objspace->params.ref_update_probe)) mosaic_ref_update_probe_gc_end(objspace);
    bool verify = verify_due(objspace);
    mosaic_gc_exit(objspace, lev);
    if (RB_UNLIKELY(objspace->params.ref_update_probe) && !objspace->full_mark) mosaic_ref_update_probe_roots(objspace);
    /* The lazy sweep left: the background sweeper takes pages ahead of it (bg_sweep.c). */
    if (objspace->lazy_sweeping && objspace->heap_walk_depth == 0) mosaic_bg_sweep_start(objspace);

    if (objspace->finalize.zombies && !ruby_free_at_exit_p()) {
        rb_postponed_job_trigger(objspace->finalize.job);
    }

    if (verify) {
        /* The checker finishes a lazy sweep first; it stops with rb_bug on a broken heap. It
         * lets the background sweeper go through its pages first, so that what the thread
         * swept is checked too. */
        mosaic_bg_sweep_wait(objspace);
        mosaic_verify_heap(objspace, true);
    }
}

/* Finishes any work of the current cycle (an incremental mark, the lazy sweep). */
void
mosaic_gc_rest(mosaic_objspace_t *objspace)
{
    mosaic_incremental_finish(objspace);
    mosaic_sweep_finish_now(objspace);
}
