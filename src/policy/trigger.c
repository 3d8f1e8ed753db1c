/*
 * trigger.c: the collector's decisions about what a collection does.
 *
 * Owns: whether a collection is a minor or a major GC and whether it compacts
 * (mosaic_trigger_plan), whether a major marks at once or in steps (mosaic_trigger_in_steps,
 * with the measured cost of marks done at once behind it), and whether the sweep should hold
 * pages back for a major that will mark in steps (mosaic_incremental_wanted). When a
 * collection runs at all is decided by the pacer (pace.c: budgets, the old-object and malloc
 * limits, need_major) and asked for at the allocation slow path (alloc.c) and by malloc
 * (malloc.c); which classes a compaction by fragmentation moves, by compact.c
 * (mosaic_compact_select).
 *
 * Invariants: deciding changes no heap state: the plan only consumes the pacer's request
 * (need_major) and records the compaction's trigger; the mark cost figures are moving
 * averages of marks done at once.
 */
#include "core/mosaic.h"

/* What the collection asked with `reason` does: minor or major, compact (now, or by the
 * fragmentation policy after the mark), and the reason bits recorded for it. */
void
mosaic_trigger_plan(mosaic_objspace_t *objspace, unsigned int reason, struct mosaic_collection_plan *plan)
{
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

    plan->reason = reason;
    plan->full = full;
    plan->compact = compact;
    plan->by_fragmentation = by_fragmentation;
    /* The nursery's survivors move at a minor GC, under compaction's conditions: no heap walk
     * (it holds addresses), not inside malloc (its caller may be resizing the generic-ivar
     * table that a move edits). Otherwise they stay, and the next minor moves them. */
    plan->evacuate = !full && objspace->params.nursery_pages > 0 && objspace->heap_walk_depth == 0 &&
        !(reason & MOSAIC_REASON_INSIDE_MALLOC);
}

/* Slots a mark phase of this kind is expected to trace: what the latest one of its kind traced,
 * or before the first, the slots in use (major) or young slots in use (minor) at this GC. */
size_t
mosaic_expected_traced(mosaic_objspace_t *objspace, bool full)
{
    if (objspace->mark.last_traced[full]) return objspace->mark.last_traced[full] - 1;   /* stored plus one: 0 is "none yet" */
    size_t expected = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) expected += objspace->heaps[i].used_slots_at_gc;
    if (!full) expected = expected > objspace->gen.old_objects ? expected - objspace->gen.old_objects : 0;
    return expected;
}

/* Marks done at once are timed (two clock reads, whether or not GC.measure_total_time is on):
 * their cost per traced slot, and the longest recent minor mark, decide which majors mark in
 * steps (below). Marks of fewer than MARK_COST_MIN_SLOTS slots are too short to time. */
#define MARK_COST_MIN_SLOTS 10000

void
mosaic_trigger_observe_mark(mosaic_objspace_t *objspace, bool full, uint64_t mark_ns)
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

/* The slots the coming major will trace, L in the steps' pace (incremental.c): the latest major's count, or the
 * old objects now if there are more (incremental.c, set_mark_pace, says why). */
double
mosaic_trigger_major_slots(mosaic_objspace_t *objspace)
{
    double live = (double)mosaic_expected_traced(objspace, true);
    return (double)objspace->gen.old_objects > live ? (double)objspace->gen.old_objects : live;
}

/* Whether marking a major at once would not be a pause that stands out: the program's minor
 * marks have been long lately (the longest recent one at least MOSAIC_INCREMENTAL_LONG_MINOR,
 * 16 ms), and the major's estimated time (the slots it would trace, as set_mark_pace counts
 * them (incremental.c), times the measured cost per slot) is at most MOSAIC_INCREMENTAL_RATIO (2) times that
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
    return mosaic_trigger_major_slots(objspace) * objspace->mark.ns_per_slot <= ratio * (double)objspace->mark.minor_peak_ns;
}

/* Which major GCs mark in steps: those the pacer starts (a refill found no room, or the malloc
 * limit), on a heap large enough for a whole mark to be a long pause, unless the program's
 * minors pause about as long (mark_at_once_is_short), and GC.start(immediate_mark: false)
 * whatever the size. Not any other GC.start, GC.stress, compaction, or during a heap walk.
 * MOSAIC_STRESS_INCREMENTAL drops both bounds. */
bool
mosaic_trigger_in_steps(mosaic_objspace_t *objspace, unsigned int reason)
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
        mosaic_trigger_in_steps(objspace, MOSAIC_REASON_NEWOBJ);
}

/* That major GC starts as soon as the sweep has held its pages back (the sweep has ended), not
 * when the heap is full: the held-back pages are its room (alloc.c, at a cache refill). */
bool
mosaic_incremental_start_due(mosaic_objspace_t *objspace)
{
    return !objspace->lazy_sweeping && !mosaic_dont_gc(objspace) && !objspace->during_gc &&
        mosaic_incremental_wanted(objspace);
}
