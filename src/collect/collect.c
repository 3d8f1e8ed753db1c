/*
 * collect.c: one collection cycle, and entering and leaving the collector.
 *
 * A cycle (mosaic_collect), in order:
 *   1. enter: take the VM lock, stop other Ractors (barrier), set during_gc, GC_ENTER event.
 *   2. finish the previous cycle's lazy sweep, so every page is swept.
 *   3. every Ractor's allocation cache hands its free slots back to their page.
 *   4. choose minor or major (generation.c's model); GC_START event; mark from the roots, and
 *      in a minor GC from the remembered set (mark.c); clear dead weak references; GC_END_MARK.
 *   5. pace: decide the growth budgets from what survived (pace.c).
 *   6. prepare the sweep: every page before_sweep. Sweep now if immediate (asked for, stress,
 *      compaction, or a heap walk is running), else lazily as allocation needs pages;
 *      GC_END_SWEEP when the last page is swept.
 *   4b. a major GC under the fragmentation policy (MOSAIC_AUTO_COMPACT=fragmentation) measures
 *      each class from the mark bits and may choose classes to compact (compact.c); then it
 *      sweeps at once.
 *   6b. compact (compact.c), only after a full mark and a complete sweep: GC.compact,
 *      verify_compaction_references, any major GC while GC.auto_compact is on (or
 *      MOSAIC_AUTO_COMPACT=always), or the classes step 4b chose.
 *   7. leave: trace line and peak snapshot (memory.c), GC_EXIT event, clear during_gc,
 *      release the lock; schedule finalizers.
 * Pages that sat in the empty-page pool through the whole previous cycle are released at
 * step 2 (page.c).
 *
 * Incremental marking (DESIGN section 10): a major GC the pacer starts (MOSAIC_INCREMENTAL)
 * stops at step 4 once the roots are marked (the start pause) and leaves; steps (pauses of
 * their own) trace a bounded amount at cache refills (alloc.c); the final pause
 * (mosaic_incremental_finish) marks the roots again, traces the marked wb-unprotected
 * objects again, and runs steps 4-7. Any collection asked for meanwhile finishes that cycle
 * first; one that is not GC.start or a compaction is then done (the finished major GC did
 * more than it asked).
 *
 * Time (GC.stat, docs/DESIGN.md section 7): :time is marking + sweeping (compaction counted
 * with sweeping), wall clock; every stay between enter and leave also adds to
 * :mosaic_gc_wall_time, :mosaic_gc_cpu_time and its kind's longest pause (account_stay).
 *
 * Invariants:
 *  - during_gc is true exactly between enter and leave; entering twice is a bug (rb_bug),
 *    never a silent corruption.
 *  - No allocation happens while during_gc (alloc.c reports it).
 */
#include "core/mosaic.h"

void
mosaic_gc_enter(mosaic_objspace_t *objspace, unsigned int *lock_lev, bool barrier)
{
    *lock_lev = rb_gc_vm_lock();
    if (barrier) rb_gc_vm_barrier();
    if (RB_UNLIKELY(objspace->during_gc)) {
        objspace->dont_gc = true;
        rb_bug("Mosaic: the collector was entered from inside a collection");
    }
    objspace->during_gc = true;
    rb_gc_event_hook(0, RUBY_INTERNAL_EVENT_GC_ENTER);
    struct mosaic_stats *st = &objspace->stats;
    st->enter_wall_ns = objspace->measure_time ? mosaic_now_ns() : 0;
    if (st->enter_wall_ns) st->enter_cpu_ns = mosaic_thread_cpu_ns();
}

/* Adds the stay that ends now to the GC wall and CPU time and to its kind's longest pause. */
static void
account_stay(mosaic_objspace_t *objspace)
{
    struct mosaic_stats *st = &objspace->stats;
    if (!st->enter_wall_ns) return;
    uint64_t wall = mosaic_now_ns() - st->enter_wall_ns;
    uint64_t cpu = mosaic_thread_cpu_ns();
    st->gc_wall_ns += wall;
    if (cpu > st->enter_cpu_ns) st->gc_cpu_ns += cpu - st->enter_cpu_ns;
    uint64_t *max = objspace->full_mark ? &st->pause_max_major_ns : &st->pause_max_minor_ns;
    if (wall > *max) *max = wall;
    st->enter_wall_ns = 0;
}

void
mosaic_gc_exit(mosaic_objspace_t *objspace, unsigned int *lock_lev)
{
    account_stay(objspace);
    rb_gc_event_hook(0, RUBY_INTERNAL_EVENT_GC_EXIT);
    objspace->during_gc = false;
    rb_gc_vm_unlock(*lock_lev);
}

static bool
gc_allowed_here(void)
{
    /* Only a Ruby thread holding the GVL may collect. */
    return ruby_native_thread_p();
}

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

static bool incremental_p(mosaic_objspace_t *objspace, unsigned int reason);
static void mark_cost_observe(mosaic_objspace_t *objspace, bool full, uint64_t mark_ns);
static void set_mark_pace(mosaic_objspace_t *objspace);
static void finish_cycle(mosaic_objspace_t *objspace, unsigned int reason, bool compact, uint64_t start_ns, unsigned int *lev);

/* Runs one full collection. Returns false when the GC did not run (disabled, not ready). */
bool
mosaic_collect(mosaic_objspace_t *objspace, unsigned int reason)
{
    /* These guards run before the VM lock: another Ractor may be changing dont_gc
     * (mosaic_gc_hold) or adding a page (sorted_count, page_table.c) under it. Relaxed atomic loads;
     * a stale answer only decides whether to go for the lock. */
    if (__atomic_load_n(&objspace->dont_gc, __ATOMIC_RELAXED) && !(reason & MOSAIC_REASON_METHOD)) return false;
    if (!gc_allowed_here()) return false;
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

    /* Minor or major. A major GC is asked for by the caller (GC.start's full_mark), by the
     * pacer (need_major: too many old objects, or no room after a minor GC), or by GC.stress
     * (unless its mode has bit 0, as in the default GC). rgengc_allow_full_mark: false turns
     * all of them into minors, except GC.start. Without generations every GC is major. */
    bool full = (reason & MOSAIC_REASON_FULL_MARK) != 0;
    if (objspace->gen.need_major) {
        reason |= objspace->gen.need_major;
        full = true;
    }
    if (objspace->gc_stress) {
        int mode = FIXNUM_P(objspace->gc_stress_mode) ? FIX2INT(objspace->gc_stress_mode) : 0;
        if (!(mode & 1)) full = true;
        /* Bit 1 asks for lazy sweeping (the default GC's gc_stress_no_immediate_sweep). */
        if (!(mode & 2)) reason |= MOSAIC_REASON_IMMEDIATE_SWEEP;
    }
    if (!objspace->params.allow_full_mark && !(reason & MOSAIC_REASON_METHOD)) full = false;
    if (!objspace->params.generational) full = true;

    /* A heap walk (each_objects) must never see unswept garbage: sweep now. */
    if (objspace->heap_walk_depth > 0) reason |= MOSAIC_REASON_IMMEDIATE_SWEEP;

    /* Compaction needs the pins of a full mark and a swept heap (compact.c). GC.auto_compact
     * does not compact a collection run from inside malloc: its caller may be resizing an st
     * table keyed by address (CRuby's generic ivar table) that moving would edit. */
    bool may_compact = full && objspace->heap_walk_depth == 0;
    bool auto_ok = may_compact && !(reason & MOSAIC_REASON_INSIDE_MALLOC);
    int policy = objspace->params.auto_compact_policy;
    bool asked = (reason & MOSAIC_REASON_COMPACT) != 0;
    bool compact = may_compact && (asked || (auto_ok && (objspace->compact.auto_compact || policy == MOSAIC_AUTO_COMPACT_ALWAYS)));
    if (compact) {
        /* Compaction sweeps at once; latest_gc_info(:immediate_sweep) still says what the cycle
         * was asked, as the default GC does under GC.auto_compact (test_start_immediate_sweep). */
        objspace->compact.trigger = asked ? MOSAIC_COMPACT_BY_METHOD
            : objspace->compact.auto_compact ? MOSAIC_COMPACT_BY_AUTO_COMPACT : MOSAIC_COMPACT_BY_ALWAYS;
    }
    /* Otherwise the fragmentation policy decides after the mark, from the mark bits. */
    bool by_fragmentation = !compact && auto_ok && policy == MOSAIC_AUTO_COMPACT_FRAGMENTATION &&
        /* GC.start(immediate_sweep: false) asked for a lazy sweep: the policy leaves it so. */
        !((reason & MOSAIC_REASON_METHOD) && !(reason & MOSAIC_REASON_IMMEDIATE_SWEEP));

    if (full) {
        reason |= MOSAIC_REASON_FULL_MARK;
        if (!(reason & MOSAIC_REASON_MAJOR_MASK)) {
            reason |= (reason & (MOSAIC_REASON_NEWOBJ | MOSAIC_REASON_MALLOC))
                ? MOSAIC_REASON_MAJOR_NOFREE : MOSAIC_REASON_MAJOR_FORCE;
        }
        objspace->gen.need_major = 0;
    }
    else {
        reason &= ~(MOSAIC_REASON_FULL_MARK | MOSAIC_REASON_MAJOR_MASK);
    }
    reason |= MOSAIC_REASON_IMMEDIATE_MARK;
    if (objspace->finalize.table && objspace->finalize.table->num_entries) {
        reason |= MOSAIC_REASON_HAVE_FINALIZE;
    }

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
    objspace->heap_bytes_at_gc = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        heap->used_slots_at_gc = mosaic_heap_used_slots(heap, heap->total_allocated_objects);
        objspace->heap_bytes_at_gc += heap->used_slots_at_gc * heap->slot_size;
    }
    mosaic_pace_malloc_limit(objspace);

    rb_gc_event_hook(0, RUBY_INTERNAL_EVENT_GC_START);
    objspace->gc_state = MOSAIC_STATE_MARKING;

    /* 4. Mark: at once, or (a major GC the pacer started) its start pause only. */
    if (full && !compact && incremental_p(objspace, reason)) {
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
        mosaic_gc_exit(objspace, &lev);
        return true;
    }
    uint64_t mark_start = mosaic_now_ns();
    objspace->incremental.marked_in_steps = false;
    mosaic_mark_phase(objspace, full);
    uint64_t mark_ns = mosaic_now_ns() - mark_start;
    if (measure) objspace->stats.marking_time_ns += mark_ns;
    objspace->mark.latest_ns = mark_ns;
    mark_cost_observe(objspace, full, mark_ns);
    rb_gc_event_hook(0, RUBY_INTERNAL_EVENT_GC_END_MARK);
    objspace->gc_state = MOSAIC_STATE_SWEEPING;

    /* 4b. The fragmentation policy (compact.c): compact the classes a packing would free
     *     pages of, with a move budget derived from this mark's time. */
    if (by_fragmentation) {
        if (mosaic_compact_select(objspace)) {
            compact = true;
            objspace->compact.trigger = MOSAIC_COMPACT_BY_FRAGMENTATION;
        }
    }

    finish_cycle(objspace, reason, compact, start_ns, &lev);
    return true;
}

/* Steps 5-7 of a cycle whose mark is complete (GC_END_MARK fired): pace, sweep (at once, or
 * lazily), compact, leave. */
static void
finish_cycle(mosaic_objspace_t *objspace, unsigned int reason, bool compact, uint64_t start_ns, unsigned int *lev)
{
    bool measure = objspace->measure_time;

    /* 5. Pace. */
    mosaic_pace_after_mark(objspace);

    /* 6. Sweep. */
    mosaic_sweep_prepare(objspace);
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
    bool verify = verify_due(objspace);
    mosaic_gc_exit(objspace, lev);
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

/* ================================================== incremental marking */

/* Marks done at once are timed (two clock reads, whether or not GC.measure_total_time is on):
 * their cost per traced slot, and the longest recent minor mark, decide which majors mark in
 * steps (below). Marks of fewer than MARK_COST_MIN_SLOTS slots are too short to time. */
#define MARK_COST_MIN_SLOTS 10000

static void
mark_cost_observe(mosaic_objspace_t *objspace, bool full, uint64_t mark_ns)
{
    size_t traced = mosaic_expected_traced(objspace, full);   /* this mark's count, just stored */
    if (traced >= MARK_COST_MIN_SLOTS) {
        double rate = (double)mark_ns / (double)traced;
        double avg = objspace->mark.ns_per_slot;
        objspace->mark.ns_per_slot = avg > 0 ? (avg * 3 + rate) / 4 : rate;
    }
    /* Decays at every mark done at once, so that one slow minor long ago does not keep every
     * major at once where nearly every GC is a major (an old-object limit factor below 1). */
    uint64_t decayed = objspace->mark.minor_peak_ns - objspace->mark.minor_peak_ns / 8;
    objspace->mark.minor_peak_ns = !full && mark_ns > decayed ? mark_ns : decayed;
}

/* The slots the coming major will trace, L in set_mark_pace: the latest major's count, or the
 * old objects now if there are more (set_mark_pace says why). */
static double
major_slots_to_trace(mosaic_objspace_t *objspace)
{
    double live = (double)mosaic_expected_traced(objspace, true);
    return (double)objspace->gen.old_objects > live ? (double)objspace->gen.old_objects : live;
}

/* Whether marking a major at once would not be a pause that stands out: the program's minor
 * marks have been long lately (the longest recent one at least MOSAIC_INCREMENTAL_LONG_MINOR,
 * 16 ms), and the major's estimated time (the slots it would trace, as set_mark_pace counts
 * them, times the measured cost per slot) is at most MOSAIC_INCREMENTAL_RATIO (2) times that
 * minor. Then steps would not shorten the program's long pauses by much, while they cost
 * memory (what is live when the mark starts stays to the next major; the room the steps
 * allocate from is held back from the cycle before) and time (barriers, many short stays in
 * the GC): hash-heavy, whose minors trace a build-up of young data (20-130 ms), kept 436 MB
 * peak with steps against 384 with its late majors marked at once. A program whose minors are
 * short keeps steps whatever the ratio: a Rails process's boot majors of 60k slots, marked at
 * once beside 6 ms minors, paused 12-14 ms, above the default GC's longest pause (DESIGN
 * section 10). Before any mark was timed, steps. */
static bool
mark_at_once_is_short(mosaic_objspace_t *objspace)
{
    double ratio = objspace->params.incremental_ratio;
    if (ratio <= 0 || objspace->mark.ns_per_slot <= 0) return false;
    if ((double)objspace->mark.minor_peak_ns < objspace->params.incremental_long_minor_ms * 1e6) return false;
    return major_slots_to_trace(objspace) * objspace->mark.ns_per_slot <= ratio * (double)objspace->mark.minor_peak_ns;
}

/* Which major GCs mark in steps: those the pacer starts (a refill found no room, or the malloc
 * limit), on a heap large enough for a whole mark to be a long pause, unless the program's
 * minors pause about as long (mark_at_once_is_short), and GC.start(immediate_mark: false)
 * whatever the size. Not any other GC.start, GC.stress, compaction, or during a heap walk.
 * MOSAIC_STRESS_INCREMENTAL drops both bounds. */
static bool
incremental_p(mosaic_objspace_t *objspace, unsigned int reason)
{
    bool on = objspace->params.incremental || objspace->params.stress_incremental;
    if (!on || objspace->gc_stress || objspace->heap_walk_depth > 0) return false;
    if (reason & MOSAIC_REASON_STEPS) return !(reason & (MOSAIC_REASON_COMPACT | MOSAIC_REASON_STRESS));
    /* The stress gate's forced collections (MOSAIC_STRESS_MINOR) that the pacer made major. */
    if ((reason & MOSAIC_REASON_STRESS) && objspace->params.stress_incremental) return !(reason & MOSAIC_REASON_COMPACT);
    if (reason & (MOSAIC_REASON_METHOD | MOSAIC_REASON_STRESS | MOSAIC_REASON_IMMEDIATE_SWEEP)) return false;
    if (!(reason & (MOSAIC_REASON_NEWOBJ | MOSAIC_REASON_MALLOC))) return false;
    if (objspace->params.stress_incremental) return true;
    if (mosaic_expected_traced(objspace, true) < objspace->params.incremental_min) return false;
    return !mark_at_once_is_short(objspace);
}

/* The next collection is a major GC that will mark in steps (the pacer asked for a major; the
 * heap is large enough): the sweep then holds pages back for it (sweep.c). */
bool
mosaic_incremental_wanted(mosaic_objspace_t *objspace)
{
    /* With full marks disabled a need_major stays set (its collections are minors): no major
     * comes to use held-back pages. */
    return objspace->gen.need_major && objspace->params.allow_full_mark && !objspace->incremental.marking &&
        incremental_p(objspace, MOSAIC_REASON_NEWOBJ);
}

/* That major GC starts as soon as the sweep has held its pages back (the sweep has ended), not
 * when the heap is full: the held-back pages are its room (alloc.c, at a cache refill). */
bool
mosaic_incremental_start_due(mosaic_objspace_t *objspace)
{
    return !objspace->lazy_sweeping && !objspace->dont_gc && !objspace->during_gc &&
        mosaic_incremental_wanted(objspace);
}

/* How much a step marks (DESIGN section 10, "Pacing by allocation"): L slots to mark (the
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
    double live = major_slots_to_trace(objspace);
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
    if (!objspace->incremental.marking || objspace->dont_gc || objspace->during_gc) return;
    if (!gc_allowed_here()) return;
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
    if (!objspace->incremental.marking || objspace->dont_gc || objspace->during_gc) return false;
    if (!gc_allowed_here() || objspace->params.stress_incremental) return false;
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
    if (!objspace->incremental.marking || objspace->during_gc || !gc_allowed_here()) return;
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
    finish_cycle(objspace, objspace->incremental.reason, false, start_ns, &lev);
}

/* Finishes any work of the current cycle (an incremental mark, the lazy sweep). */
void
mosaic_gc_rest(mosaic_objspace_t *objspace)
{
    mosaic_incremental_finish(objspace);
    mosaic_sweep_finish_now(objspace);
}
