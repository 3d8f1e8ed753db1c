/*
 * pace.c: when the next collection runs, and how much memory the heap may take meanwhile.
 *
 * The rule is collect before grow: fresh pages are mapped only within a budget the pacer
 * sets after each GC; when a class has no free slot, no queued page, nothing left to sweep
 * and no empty page in the pool, and no budget, allocation collects (alloc.c). Budgets are
 * set afresh by every GC (an unused budget does not carry over).
 *
 * Slots, per size class, decided right after marking (all figures of that class):
 *   live = marked slots (+ zombies), free = total - live (what the sweep hands out)
 *   if free < total * free_slots_min_ratio (0.20), the class asks for
 *       grow = total * (f - 1) slots, f = clamp((live / total) / (1 - free_slots_goal_ratio), 1, growth_factor)
 *     so that after growing, free / total = goal (0.40), and never more than growth_factor
 *     (1.8) times the class; growth_max_slots caps it; at least one page. Pages the mark's
 *     catch-up steps added to the class (catch_up_slots, alloc.c) are growth taken early: the
 *     ask is computed on total less them, then reduced by them, so it may be none at all
 *     (DESIGN.md, "Catch-up steps").
 *   The asks of all classes, in page bytes, form the shared budget (allocatable_bytes) that
 *   any class may map fresh pages from -- the asks of classes allocation runs through in full,
 *   the others' only up to the whole heap's ask (the same rule on the slot bytes of all
 *   classes; mosaic_pm_shared_budget): a class of old data that nothing allocates in does not
 *   run dry, and its ask would only let the allocating classes grow instead of collecting.
 *   A class below its init slots always keeps its own budget up to them
 *   (RUBY_GC_HEAP_<i>_INIT_SLOTS: no GC before that many objects).
 * Collect before grow, per class: a major GC measures each class's live slots and sets the
 *   class's target for the minor GCs that follow, major_target_slots = live / (1 - goal)
 *   (with a goal of 0: live * growth_factor), at least its init slots. A minor GC marks every
 *   old object, dead or alive: when a short class has marked more than its target, what fills
 *   it is largely old garbage (or the live data grew by 1/(1-goal) since the major), so it
 *   does not grow; the next GC is major (:nofree). A minor GC that runs MOSAIC_OLD_AGE (3) or
 *   more GCs after the latest major does not grow either and asks for a major (the default
 *   GC's rule: by then the young garbage of that time has aged into old garbage), if
 *   allocation churns the class (mosaic_pm_churning: allocation runs through it and used up
 *   its free slots, or found more garbage than it had free); a class it does not churn stays
 *   as it is, neither growing nor asking for a major that would free nothing in it. Otherwise
 *   the class grows by its ask; a major GC always does (it has just measured the live data).
 *   Why per class and in marked slots: a whole-heap target in pages stopped a class whose
 *   objects were all live from growing while other classes were sparse (gcbench: a major
 *   every other GC); cutting each ask at the target made every minor of a build-up ask for a
 *   major (hash-heavy: 18 majors in 40 GCs, +15% wall; 12 in 42 with this rule); a target on
 *   the whole heap's marked bytes let the class filling with old garbage grow (redblack).
 * Shrinking: after a major GC a class keeps max(init, live / (1 - free_slots_max_ratio))
 *   slots (0.65: 2.86x live, the default GC's rule); the sweep returns its empty pages
 *   beyond that to the OS at once (freeable_pages). Its other empty pages leave the class for
 *   the empty-page pool; any class takes them back before mapping fresh ones, with no budget
 *   needed (they are resident already). Pages idle in the pool for a whole cycle go back to
 *   the OS too (page.c, mosaic_pool_trim, with a reserve against oscillation). Why both: a
 *   heap that grew for a burst (gcbench: 57 MiB of pages for 11 MiB live) is refilled with
 *   garbage every cycle, its empty pages reused from the pool before they can sit idle.
 * The room scale (MOSAIC_GC_TIME_MAX / _MIN): the three free-slot ratios above are applied with
 *   their room per live slot, r / (1 - r), times room_scale (pace_min_ratio and the others). At a major
 *   closing 2+ GCs, and after MOSAIC_ROOM_CYCLE_GCS GCs without one, the scale follows the GC
 *   time share since it was last set: above gc_time_max while the heap held steady it grows, below
 *   gc_time_min it shrinks, by share / bound, and between the two it goes back toward 1
 *   (mosaic_pm_room_scale: a GC's cost is set by the live data, the room sets how often GCs
 *   come, so the share goes as 1 / room). Under a held soft limit it is at most 1. DESIGN.md,
 *   "Pacing", says why, and why only a steady heap gets more.
 * Growth in steps, slots and malloc in one budget: however large the budget, once fresh pages
 *   mapped plus the malloc increase since the latest GC (net of frees but a sweep's) reach the
 *   growth step (1/8 of the
 *   pages in use or of the latest major's live malloc, whichever is more, at least 4 MiB),
 *   fresh pages wait for a GC (mosaic_pace_grown_enough, below).
 * The floor (RUBY_GC_HEAP_FREE_SLOTS, 4096; the default GC's "prepare at least this amount of
 *   slots after GC"): after marking, the room the heap has for new objects -- free slots of
 *   every class, pooled pages and the growth just asked, in bytes --
 *   is at least heap_free_slots * (live Ractors, at most 8) 40-byte slots; the shared budget
 *   takes the pages missing (first keeping pages a major's shrink would give back), after a
 *   minor GC as after a major, and fresh pages up to it, with malloc, do not wait for the
 *   growth step (at most the pages in use or 32 MiB per GC). The default value hardly ever
 *   decides anything (a class short of 20% free asks already); a user who sets it high gets
 *   about that many allocations between GCs, for the memory.
 * heap_target_bytes = (pages in use + pages the budgets allow) * MOSAIC_PAGE_SIZE: the page
 * memory the heap may reach before the next GC (GC.stat :mosaic_heap_target_bytes).
 *
 * Generations: after a major GC, old_objects_limit = old + (oldobject_limit_factor (2.0) - 1) *
 * live, the old objects and the objects the major marked (mosaic_pm_old_objects_limit), and
 * the limit for old wb-unprotected objects (traced by every minor GC) is
 * max(their count * factor, old_objects * wb_unprotected_limit_ratio (0.01)). Any GC that
 * leaves more old objects than a limit asks for a major GC next (major_by :oldgen / :shady).
 *
 * Malloc, as in the default GC (sizes are malloc_usable_size, malloc.c):
 *   malloc_increase counts bytes malloc'd since the last GC minus bytes freed other than by
 *   a sweep (malloc.c: a sweep frees the last cycle's garbage, not this one's); crossing
 *   malloc_limit triggers a GC. At each GC the limit becomes increase * growth_factor (1.4)
 *   if crossed, else decays by 2%, within [malloc_limit_min, malloc_limit_max]. Malloc also
 *   counts in the slots' budget: a GC runs from malloc too when fresh pages plus the malloc
 *   increase pass growth_trigger_bytes = max(malloc_limit, growth step), set at each GC; so
 *   a program that takes both collects after one step's worth of memory, not after a step of
 *   pages plus a malloc_limit of malloc.
 * Old malloc, by what survivors hold: when a minor GC's sweep ends, the malloc its survivors
 *   hold (malloc_bytes at the GC's start less what the sweep freed) beyond a baseline
 *   (oldmalloc_held_bytes) is malloc that only a major GC frees once its owners die. The
 *   baseline is the live malloc of the latest major, lowered to the survivors' figure whenever
 *   that is lower (memory freed since the major must not become room for old garbage). Above
 *   oldmalloc_limit it asks for a major (:oldmalloc). That major raises the limit by
 *   oldmalloc_limit_growth_factor (1.2), capped by oldmalloc_limit_max, only if it found more
 *   than half of the old malloc that triggered it live (the default GC raises it at every
 *   oldmalloc major, so a program whose only majors are for old malloc ratchets the limit to
 *   its maximum while every major frees most of it); a major GC that did not run for oldmalloc
 *   lets the limit decay toward its minimum. (The default GC compares
 *   oldmalloc_increase, all malloc since the latest major net of frees, at the start of a minor:
 *   that includes the malloc of the young garbage the minor is about to free, up to a whole
 *   malloc_limit, so its majors come early. oldmalloc_increase is still counted for GC.stat.)
 *   (A limit of 1.2x the whole accumulated increase at each major reaches the 128 MiB cap
 *   within a few cycles and lets old garbage hold that much malloc.)
 *
 * Soft memory limit (memory_limit, MOSAIC_MEMORY_LIMIT): "used" = pages in use + pooled
 * pages + malloc_bytes + the rest of RSS measured at the latest GC (mosaic_pace_used_bytes:
 * the process's resident memory, estimated between GCs). While used + one page is above the limit, no fresh page is mapped
 * without a collection first (mosaic_pace_over_limit); after marking, the budget is cut to
 * what fits and a minor GC that had to cut it asks for a major; within 10% of the limit the
 * pool is emptied at every GC and majors trim malloc's arenas (memory.c); the malloc limit is
 * at most half the headroom (at least 256 KiB). The limit is set aside (normal pacing, one
 * warning) when a major finds live data above 95% of it (live = slot bytes marked + malloc
 * bytes at the GC's start less what its sweep freed), or when GC takes more than half of the
 * time while it is held (mosaic_pace_gc_time); it is taken up again when a major finds live
 * below 85% of it. So it never raises, and cannot turn a program into a GC loop.
 *
 * Arithmetic: every size * factor goes through mosaic_scale and sums through mosaic_add_sat,
 * which saturate at MOSAIC_SIZE_MAX: a huge factor means "as much as can be", never a wrapped
 * or undefined value. The formulas themselves are pure functions of plain numbers in
 * policy/pace_math.h (mosaic_pm_*), which the C unit tests run (test/c/test_pace.c); this file
 * reads the objspace, calls them, and stores what they return.
 */
#include <stdio.h>

#include "core/mosaic.h"
#include "policy/pace_math.h"

/* The free-slot ratios the pacer applies: the params' (RUBY_GC_HEAP_FREE_SLOTS_*_RATIO, which
 * GC.config may change at any time, so read at each use) with their room scaled by room_scale. */
static double
pace_min_ratio(const mosaic_objspace_t *objspace)
{
    return mosaic_pm_scaled_ratio(objspace->params.free_slots_min_ratio, objspace->pace.room_scale);
}

static double
pace_goal_ratio(const mosaic_objspace_t *objspace)
{
    return mosaic_pm_scaled_ratio(objspace->params.free_slots_goal_ratio, objspace->pace.room_scale);
}

static double
pace_max_ratio(const mosaic_objspace_t *objspace)
{
    return mosaic_pm_scaled_ratio(objspace->params.free_slots_max_ratio, objspace->pace.room_scale);
}

/* Right after marking, one pass over the classes: the slot bytes the mark found live (marked +
 * zombies), which the room scale and the budgets use, and the build-up rule's step
 * (mosaic_pm_survival_step) from the bytes allocated since the GC before and those found dead.
 * When this GC follows a build-up's end, mosaic_pace_after_mark lets a class short of room after
 * this minor GC ask for a major GC at once, rather than after MOSAIC_OLD_AGE GCs since the
 * latest major: the structure the build-up made is old, and may be dead (binary-trees' stretch
 * tree: with the wait, two minor GCs grew the heap by 14 MiB while 40 MiB of it lay dead, or
 * not, by where the latest major fell). */
static void
mark_totals(mosaic_objspace_t *objspace)
{
    size_t live_bytes = 0, allocated = 0, garbage = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        const struct mosaic_heap *heap = &objspace->heaps[i];
        size_t live = heap->marked_slots + heap->final_slots;
        live_bytes = mosaic_add_sat(live_bytes, live * heap->slot_size);
        allocated = mosaic_add_sat(allocated, heap->allocated_in_cycle * heap->slot_size);
        if (heap->used_slots_at_gc > live) garbage = mosaic_add_sat(garbage, (heap->used_slots_at_gc - live) * heap->slot_size);
    }
    objspace->live_bytes = live_bytes;
    objspace->pace.build_up_ended = mosaic_pm_survival_step(&objspace->pace.survival, allocated, garbage);
}

/* After marking, at a major GC that closes a cycle of 2 GCs or more, or after
 * MOSAIC_ROOM_CYCLE_GCS GCs: the room scale from the GC time share of the GCs since it was last
 * set, and whether the heap held steady meanwhile. (A cycle of one GC measures nothing; its
 * time counts in the next. Where every GC is a major -- MOSAIC_GENERATIONAL=0, GC.start in a
 * loop -- the scale is set at every second.) */
static void
pace_room_scale(mosaic_objspace_t *objspace, bool major)
{
    struct mosaic_pacer *pace = &objspace->pace;
    /* Steady: the pages in use held within 1/8 since the scale was last set, and at a major the
     * live data within 1/8 of the major that set it before (a build-up grows both). */
    size_t pages = objspace->pages.sorted_count;
    bool steady = mosaic_pm_held_steady(pages, pace->room_pages);
    if (major) {
        size_t live = objspace->live_bytes;
        steady = steady && mosaic_pm_held_steady(live, pace->major_live_bytes);
        pace->major_live_bytes = live;
    }
    pace->room_pages = pages;
    double share = pace->cycle_all_ns ? (double)pace->cycle_gc_ns / (double)pace->cycle_all_ns : 0.0;
    pace->room_scale = mosaic_pm_room_scale(pace->room_scale, share, pace->cycle_gcs, steady,
                                            objspace->params.gc_time_max, objspace->params.gc_time_min);
    /* Under a soft limit that is held, the limit decides what the heap may take: no more room
     * than the ratios give. */
    if (objspace->params.memory_limit && !pace->limit_set_aside && pace->room_scale > 1.0) pace->room_scale = 1.0;
    pace->cycle_gc_ns = pace->cycle_all_ns = 0;
    pace->cycle_gcs = 0;
}

/* Right after marking, before anything measures with the ratios (the fragmentation policy,
 * compact.c; mosaic_pace_after_mark): the mark's totals, then the room scale, at a major GC
 * that closes a cycle of 2 GCs or more and after MOSAIC_ROOM_CYCLE_GCS GCs without one. */
void
mosaic_pace_measure_mark(mosaic_objspace_t *objspace)
{
    mark_totals(objspace);
    bool minor = !objspace->full_mark && objspace->params.generational;
    unsigned int cycle_gcs = objspace->pace.cycle_gcs;
    if ((!minor && cycle_gcs >= 2) || cycle_gcs >= MOSAIC_ROOM_CYCLE_GCS) pace_room_scale(objspace, !minor);
}

void
mosaic_pace_init(mosaic_objspace_t *objspace)
{
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        objspace->heaps[i].allocatable_slots = objspace->params.heap_init_slots[i];
    }
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        objspace->heaps[i].major_target_slots = objspace->params.heap_init_slots[i];
    }
    objspace->pace.room_scale = 1.0;
    objspace->pace.survival = 1.0;
    objspace->malloc.limit = objspace->params.malloc_limit_min;
    objspace->pace.growth_trigger_bytes = mosaic_pm_growth_trigger(MOSAIC_GROWTH_STEP_MIN, objspace->malloc.limit);
    objspace->malloc.old_limit = objspace->params.oldmalloc_limit_min;
    /* The GC time share counts from here: the first GC's interval is the boot before it. */
    objspace->pace.last_gc_end_ns = mosaic_now_ns();
    /* RSS and the overhead from the start (GC.stat's Hash reads them; memory.c). */
    mosaic_memory_measure_overhead(objspace);
    objspace->checks.stress_minor_countdown = objspace->params.stress_minor_every;
}

/* Page memory in use or held, plus what Ruby has malloc'd: what the soft limit bounds. */
size_t
mosaic_pace_counted_bytes(mosaic_objspace_t *objspace)
{
    size_t pages = objspace->pages.sorted_count + objspace->pool.count;
    return mosaic_add_sat(pages * MOSAIC_PAGE_SIZE, __atomic_load_n(&objspace->malloc.bytes, __ATOMIC_RELAXED));
}

/* What the soft limit bounds: the resident memory of the process, estimated between GCs as
 * the bytes counted above plus the rest of RSS measured at the latest GC (memory.c: code,
 * stacks, and the free memory malloc keeps in its arenas). */
size_t
mosaic_pace_used_bytes(mosaic_objspace_t *objspace)
{
    return mosaic_add_sat(mosaic_pace_counted_bytes(objspace), objspace->memory.rss_overhead_bytes);
}

/* True when a fresh page must not be mapped without collecting first (the soft limit). */
bool
mosaic_pace_over_limit(mosaic_objspace_t *objspace)
{
    size_t limit = objspace->params.memory_limit;
    if (!limit || objspace->pace.limit_set_aside) return false;
    return mosaic_add_sat(mosaic_pace_used_bytes(objspace), MOSAIC_PAGE_SIZE) > limit;
}

/* Growth in steps: however large the budget, once the heap has taken an eighth of its pages,
 * or of the malloc the latest major found live if that is more (at least
 * MOSAIC_GROWTH_STEP_MIN), since the latest GC, in fresh pages and malloc together
 * (mosaic_pace_grown_bytes), the next fresh page waits for a GC. (By pages alone, a program
 * holding 400 MB of malloc over 4 MiB of pages collected every 4 MiB of malloc.)
 * Why: a budget is sized from what was live at the GC; when the program stops building up
 * (a temporary structure completes, then dies), the rest of the budget would only be filled
 * with garbage (gcbench: a 22 MiB step taken whole, 56 MiB of pages for a 40 MiB peak of live
 * data). A GC halfway learns that; if the build-up goes on, the next GC asks again. */
size_t
mosaic_pace_growth_step(mosaic_objspace_t *objspace)
{
    return mosaic_pm_growth_step(objspace->pages.sorted_count, objspace->malloc.live_bytes);
}


bool
mosaic_pace_grown_enough(mosaic_objspace_t *objspace)
{
    return mosaic_pm_grown_enough(mosaic_pace_grown_bytes(objspace), mosaic_pace_growth_step(objspace),
                                  objspace->pace.free_slots_floor_bytes);
}

/* A class's live-data target after a major GC, per live slot: 1 / (1 - free_slots_goal_ratio)
 * (with a goal of 0: growth_factor). Used after a major GC and after a fork. */
static double
major_target_factor(const mosaic_objspace_t *objspace)
{
    return mosaic_pm_major_target_factor(pace_goal_ratio(objspace), objspace->params.growth_factor);
}

/* The slots class h keeps after a major GC that found `live` of them live:
 * max(init, live / (1 - free_slots_max_ratio)), the default GC's shrink rule. Only meaningful
 * while free_slots_max_ratio < 1 (callers check). Used by the shrink below and by compact.c's
 * fragmentation measure, so that both agree on what a class keeps. */
size_t
mosaic_pace_keep_slots(mosaic_objspace_t *objspace, int h, size_t live)
{
    return mosaic_pm_keep_slots(live, pace_max_ratio(objspace), objspace->params.heap_init_slots[h]);
}

/* A forked child (mosaic_generation_after_fork): what it inherited is old now, as if a major GC
 * had just found it live, so each class's live-data target follows it (never lower than it
 * was). Why: a parent whose latest major was long ago (a Rails app booted, then served; a
 * parent that never runs Process.warmup) hands its children classes far above the targets of
 * that major; the child's first GC short of room would then be a major by over_target,
 * marking and sweeping every page it shares (prefork --no-warmup: the second GC of each
 * worker was such a major). The cost: garbage the child inherited (young or old) stays until
 * a class passes its raised target; promoting everything already took that cost (generation.c). */
void
mosaic_pace_after_fork(mosaic_objspace_t *objspace)
{
    double target_factor = major_target_factor(objspace);
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        size_t target = mosaic_scale(mosaic_heap_used_slots(heap, heap->total_allocated_objects), target_factor);
        if (target > heap->major_target_slots) heap->major_target_slots = target;
    }
    /* Majors the parent's pacer asked for are answered by the same reasoning: the targets
     * were just raised, the old-object limits follow the promotion (mosaic_promote_all), and
     * the malloc the child inherited is its old-malloc baseline. */
    objspace->gen.need_major &= ~(unsigned int)(MOSAIC_REASON_MAJOR_NOFREE | MOSAIC_REASON_MAJOR_OLDGEN |
                                            MOSAIC_REASON_MAJOR_SHADY | MOSAIC_REASON_MAJOR_OLDMALLOC);
    /* Pages the parent's sweep was holding back for such a major (sweep.c) would stay off the
     * queues until the child's first GC, no major coming to release them: they join the
     * queues now, and the sweep holds nothing back any more. (The major the parent wanted
     * still comes in the parent, whose state this does not touch.) */
    if (!objspace->gen.need_major) mosaic_heap_release_reserves(objspace);
    objspace->malloc.live_bytes = __atomic_load_n(&objspace->malloc.bytes, __ATOMIC_RELAXED);
    objspace->pace.oldmalloc_held_bytes = 0;
    objspace->pace.oldmalloc_trigger_bytes = 0;
    /* The parent's RSS is not the child's (GC.stat's Hash reads it until the child's first GC). */
    mosaic_memory_measure_overhead(objspace);
}

/* The old-object limits, from the old objects counted now and the `live` objects: after a major
 * GC (what it marked), and after Process.warmup or a fork has made every survivor old (else the
 * first GC after it, in each forked child, would be a major for :oldgen). */
void
mosaic_pace_old_limits(mosaic_objspace_t *objspace, size_t live)
{
    const struct mosaic_params *params = &objspace->params;
    objspace->gen.old_objects_limit = mosaic_pm_old_objects_limit(objspace->gen.old_objects, live,
                                                                  params->oldobject_limit_factor);
    objspace->gen.old_wb_unprotected_limit =
        mosaic_pm_wb_unprotected_limit(objspace->gen.old_objects, objspace->gen.old_wb_unprotected_objects,
                                       params->oldobject_limit_factor, params->wb_unprotected_limit_ratio);
}

static void
pace_generations(mosaic_objspace_t *objspace)
{
    if (!objspace->params.generational) return;

    if (objspace->full_mark) mosaic_pace_old_limits(objspace, objspace->stats.marked_slots);
    /* Checked after every GC, majors included: a factor below 1 makes every GC a major GC. */
    if (objspace->gen.old_objects > objspace->gen.old_objects_limit) {
        objspace->gen.need_major |= MOSAIC_REASON_MAJOR_OLDGEN;
    }
    if (objspace->gen.old_wb_unprotected_objects > objspace->gen.old_wb_unprotected_limit) {
        objspace->gen.need_major |= MOSAIC_REASON_MAJOR_SHADY;
    }
}

/* RUBY_GC_HEAP_FREE_SLOTS (see the top of this file): the page bytes the shared budget needs
 * beyond `asked` so that the heap has room for heap_free_slots 40-byte slots per live Ractor
 * (at most 8), counting `room` (the free slot bytes the classes keep), the pooled pages and
 * `asked`. (A class's init-slot budget is its own: not counted.) What is missing is covered
 * first by keeping pages a major's shrink would give back (freeable_pages: giving them back to
 * map them again would be churn), then by fresh pages. Returns their bytes, 0 when none. */
static size_t
free_slots_floor_grow(mosaic_objspace_t *objspace, size_t room, size_t asked)
{
    size_t floor = mosaic_pm_floor_bytes(objspace->params.heap_free_slots, objspace->live_ractor_cache_count);
    size_t missing = mosaic_pm_floor_missing(floor, room, objspace->pool.count, asked);
    if (missing == 0) return 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT && missing > 0; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        size_t page_room = heap->slots_per_page * heap->slot_size;
        size_t kept = mosaic_pm_floor_kept_pages(missing, page_room, heap->freeable_pages);
        heap->freeable_pages -= kept;
        missing = missing > kept * page_room ? missing - kept * page_room : 0;
    }
    return mosaic_pm_floor_grow(missing, objspace->pages.sorted_count);
}

/* The soft limit, after marking: how many page bytes may still be asked for. */
static size_t
limit_headroom(mosaic_objspace_t *objspace)
{
    size_t limit = objspace->params.memory_limit;
    if (!limit || objspace->pace.limit_set_aside) return MOSAIC_SIZE_MAX;
    return mosaic_pm_headroom(limit, mosaic_pace_used_bytes(objspace));
}

void
mosaic_pace_after_mark(mosaic_objspace_t *objspace)
{
    const struct mosaic_params *params = &objspace->params;
    size_t shared_grow_bytes = 0, others_ask_bytes = 0, room_bytes = 0, slot_bytes = 0;
    size_t live_bytes = objspace->live_bytes;   /* mark_totals */
    size_t target_pages = objspace->pages.sorted_count;
    bool minor = !objspace->full_mark && params->generational;
    bool grow_minor = minor && params->allow_full_mark;
    bool major_due = grow_minor && (objspace->stats.count - objspace->gen.last_major_count >= MOSAIC_OLD_AGE ||
                                    objspace->pace.build_up_ended);
    double min_ratio = pace_min_ratio(objspace), goal_ratio = pace_goal_ratio(objspace);
    double max_ratio = pace_max_ratio(objspace);
    double target_factor = major_target_factor(objspace);
    pace_generations(objspace);

    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        size_t total = heap->total_slots;
        size_t live = heap->marked_slots + heap->final_slots;
        size_t free = total > live ? total - live : 0;
        slot_bytes = mosaic_add_sat(slot_bytes, total * heap->slot_size);

        /* A class below its init slots may always grow up to them without collecting. */
        size_t init = params->heap_init_slots[i];
        heap->allocatable_slots = total < init ? init - total : 0;
        target_pages += heap->allocatable_slots / heap->slots_per_page;

        /* A major GC measures what is live: the class's target for minor GCs. */
        if (!minor) heap->major_target_slots = mosaic_pm_major_target(live, target_factor, init);
        /* Shrink, after a major GC: empty pages beyond what the class should keep go back to
         * the OS as the sweep finds them (the default GC's free_slots_max_ratio rule). */
        heap->freeable_pages = 0;
        if (!minor && max_ratio < 1.0) {
            size_t keep = mosaic_pace_keep_slots(objspace, i, live);
            heap->freeable_pages = mosaic_pm_freeable_pages(total, keep, heap->slots_per_page);
        }
        /* Room for new objects, for the floor below: the free slots this sweep does not give
         * back to the OS with the pages beyond what the class keeps. */
        size_t released = heap->freeable_pages * heap->slots_per_page;
        room_bytes = mosaic_add_sat(room_bytes, (free > released ? free - released : 0) * heap->slot_size);

        /* Pages the mark's catch-up steps added (alloc.c) were growth taken ahead of this
         * decision: the class asks as if it had not taken them, less what it took. */
        size_t caught_up = heap->catch_up_slots < total ? heap->catch_up_slots : total;
        heap->catch_up_slots = 0;
        if (!mosaic_pm_short_of_free(free, total, min_ratio)) continue;
        size_t grow = mosaic_pm_class_ask(total, live, caught_up, heap->slots_per_page, goal_ratio,
                                          params->growth_factor, params->growth_max_slots);
        if (grow == 0) continue;
        if (grow_minor) {
            /* Collect before grow (see the top of this file). */
            bool over_target = live > heap->major_target_slots;
            if (over_target || major_due) {
                /* A class that allocation does not churn neither grows nor asks for a major
                 * GC that would free nothing in it (it asked every fourth GC in gcbench). */
                if (over_target || mosaic_pm_churning(heap->total_slots, heap->used_slots_at_gc, live, heap->allocated_in_cycle)) {
                    objspace->gen.need_major |= MOSAIC_REASON_MAJOR_NOFREE;
                    heap->force_major_gc_count++;   /* GC.stat_heap: the class asked for it */
                }
                continue;
            }
        }
        /* Classes allocation hardly touches (old data) ask only as part of the whole heap. */
        size_t ask_bytes = mosaic_pm_slots_page_bytes(grow, heap->slots_per_page);
        if (mosaic_pm_class_allocating(heap->allocated_in_cycle, free)) {
            shared_grow_bytes = mosaic_add_sat(shared_grow_bytes, ask_bytes);
        }
        else {
            others_ask_bytes = mosaic_add_sat(others_ask_bytes, ask_bytes);
        }
    }
    size_t heap_ask = mosaic_pm_heap_ask(slot_bytes, live_bytes, min_ratio, goal_ratio,
                                         params->growth_factor);
    shared_grow_bytes = mosaic_pm_shared_budget(shared_grow_bytes, others_ask_bytes, heap_ask);

    /* The floor, then the soft limit: ask for no more than fits, and collect old garbage
     * before growing. */
    size_t floor_grow = free_slots_floor_grow(objspace, room_bytes, shared_grow_bytes);
    size_t headroom = limit_headroom(objspace);
    /* Only the classes' own asks make a minor GC that cannot have them ask for a major: the
     * floor is cut to what fits, whatever it is. */
    if (shared_grow_bytes > headroom && minor && params->allow_full_mark) {
        objspace->gen.need_major |= MOSAIC_REASON_MAJOR_NOFREE;
    }
    shared_grow_bytes = mosaic_add_sat(shared_grow_bytes, floor_grow);
    shared_grow_bytes = mosaic_pm_cut_to_headroom(shared_grow_bytes, headroom);
    objspace->pace.allocatable_bytes = shared_grow_bytes;
    /* The floor's budget may be taken whole before a GC, whatever the growth step; malloc
     * meanwhile counts in it as in the step (the growth trigger), so a program that mallocs
     * as it allocates keeps the floor too. (malloc_limit still collects as ever.) Under the
     * soft limit the trigger stays as the limit set it. */
    objspace->pace.free_slots_floor_bytes = floor_grow ? shared_grow_bytes : 0;
    if (objspace->pace.free_slots_floor_bytes > objspace->pace.growth_trigger_bytes && headroom == MOSAIC_SIZE_MAX) {
        objspace->pace.growth_trigger_bytes = objspace->pace.free_slots_floor_bytes;
    }
    objspace->pace.grown_since_gc = 0;
    objspace->pace.heap_target_bytes = mosaic_pm_heap_target(target_pages, shared_grow_bytes);
}

static void
limit_set_aside(mosaic_objspace_t *objspace, const char *why, size_t a, size_t b)
{
    objspace->pace.limit_set_aside = true;
    if (objspace->pace.limit_warned) return;
    objspace->pace.limit_warned = true;
    fprintf(stderr, "[mosaic] warning: ");
    fprintf(stderr, why, a, b);
    fprintf(stderr, "; the heap grows past the limit\n");
}

/* End of every collection: the share of time spent in GC recently, as the ratio of two
 * decaying sums (each GC multiplies both by 15/16, then adds the GC time since the previous
 * GC's end, and the whole time since then): time-weighted, so a burst of short GCs close
 * together does not outweigh a long stretch of running. The GC time is GC.stat(:time)'s
 * (marking and sweeping on the Ruby thread: this pause, and the incremental steps and lazy
 * sweeping since the previous GC), or this pause alone while GC.measure_total_time is off;
 * MOSAIC_TRACE prints the share. While the soft limit is held and GC takes more than half of
 * the time, the limit is set aside (Go caps GC CPU at 50% under GOMEMLIMIT for the same
 * reason): a heap that fragmentation keeps at the limit must not turn the program into a GC
 * loop. (Before the steps and the lazy sweep were counted, a program whose GC time went into
 * them showed a share below the cap however much of its time they took.) */
void
mosaic_pace_gc_time(mosaic_objspace_t *objspace, uint64_t start_ns, uint64_t end_ns)
{
    uint64_t since = mosaic_pm_gc_interval(objspace->pace.last_gc_end_ns, start_ns, end_ns);
    /* The snapshot follows the counters whether or not they advance now, so time measured
     * before GC.measure_total_time was switched off is not charged to a later interval. */
    uint64_t total = objspace->stats.marking_time_ns + objspace->stats.sweeping_time_ns;
    uint64_t gc_ns = mosaic_pm_gc_time(start_ns, end_ns, objspace->measure_time, total,
                                       objspace->pace.gc_ns_at_last_end, since);
    objspace->pace.gc_ns_at_last_end = total;
    double share = mosaic_pm_gc_share(&objspace->pace.gc_ns_recent, &objspace->pace.all_ns_recent, gc_ns, since);
    objspace->pace.last_gc_end_ns = end_ns;
    objspace->pace.gc_time_share = share;
    objspace->pace.cycle_gc_ns += gc_ns;
    objspace->pace.cycle_all_ns += since;
    objspace->pace.cycle_gcs++;
    size_t limit = objspace->params.memory_limit;
    if (!limit || objspace->pace.limit_set_aside || objspace->stats.count < 16) return;
    if (share > 0.5) {
        limit_set_aside(objspace, "GC takes %zu%% of the time at the memory limit (%zu MiB)",
                        (size_t)(share * 100), limit >> 20);
    }
}

/* A sweep has ended (every object this GC found dead is freed). What malloc held when the GC
 * started, less what its sweep freed, is what the objects that survived it hold: the mutator
 * has run between lazy sweep steps, and its newer mallocs are not what this GC found live.
 * After a major GC that is the live malloc (malloc_live_bytes), and the soft limit is checked.
 * After a minor GC, the survivors' malloc beyond the latest major's live malloc is what only
 * a major GC can free once its owners die: old malloc (see the top of this file). */
void
mosaic_pace_after_sweep(mosaic_objspace_t *objspace)
{
    size_t survivors = mosaic_pm_survivors(objspace->malloc.bytes_at_gc, objspace->malloc.freed_by_sweep);
    if (!objspace->full_mark) {
        const struct mosaic_params *params = &objspace->params;
        /* Malloc freed since the major (a buffer cleared, young owners that died) is no
         * credit for old garbage: the baseline follows the survivors down, never up. */
        if (survivors < objspace->malloc.live_bytes) objspace->malloc.live_bytes = survivors;
        size_t grown = survivors - objspace->malloc.live_bytes;
        objspace->pace.oldmalloc_held_bytes = grown;
        if (params->generational && grown > objspace->malloc.old_limit) {
            objspace->gen.need_major |= MOSAIC_REASON_MAJOR_OLDMALLOC;
            objspace->pace.oldmalloc_trigger_bytes = grown;
        }
        return;
    }
    /* A major GC run for old malloc raises the limit only when it found most of that malloc
     * live (the live data grew: majors at the old limit would find little to free); when it
     * freed most of it, the limit was right. */
    if ((objspace->stats.latest_reason & MOSAIC_REASON_MAJOR_OLDMALLOC) && objspace->pace.oldmalloc_trigger_bytes) {
        const struct mosaic_params *params = &objspace->params;
        if (mosaic_pm_oldmalloc_live_grew(survivors, objspace->malloc.live_bytes, objspace->pace.oldmalloc_trigger_bytes)) {
            objspace->malloc.old_limit = mosaic_pm_oldmalloc_raise(objspace->malloc.old_limit, params->oldmalloc_limit_growth_factor,
                                                                   params->oldmalloc_limit_max);
        }
    }
    objspace->pace.oldmalloc_trigger_bytes = 0;
    objspace->malloc.live_bytes = survivors;
    objspace->pace.oldmalloc_held_bytes = 0;
    size_t limit = objspace->params.memory_limit;
    if (!limit) return;

    size_t live = mosaic_add_sat(mosaic_add_sat(objspace->live_bytes, survivors), objspace->memory.rss_overhead_bytes);
    if (!objspace->pace.limit_set_aside && mosaic_pm_limit_unfit(live, limit)) {
        limit_set_aside(objspace, "live memory (%zu MiB) does not fit the memory limit (%zu MiB)", live >> 20, limit >> 20);
    }
    else if (objspace->pace.limit_set_aside && mosaic_pm_limit_fits_again(live, limit)) {
        objspace->pace.limit_set_aside = false;
    }
}

/* True while the soft limit is close: what is used now is within 10% of it. */
bool
mosaic_pace_near_limit(mosaic_objspace_t *objspace)
{
    size_t limit = objspace->params.memory_limit;
    if (!limit || objspace->pace.limit_set_aside) return false;
    return mosaic_pm_near_limit(mosaic_pace_used_bytes(objspace), limit);
}

/* Called at the start of each collection, once it is known to be minor or major. */
void
mosaic_pace_malloc_limit(mosaic_objspace_t *objspace)
{
    const struct mosaic_params *params = &objspace->params;
    if (objspace->params.generational) {
        if (objspace->full_mark) {
            if (!(objspace->stats.latest_reason & MOSAIC_REASON_MAJOR_OLDMALLOC)) {
                objspace->malloc.old_limit = mosaic_pm_oldmalloc_decay(objspace->malloc.old_limit, params->oldmalloc_limit_growth_factor,
                                                                       params->oldmalloc_limit_min);
            }
            __atomic_store_n(&objspace->malloc.old_increase, 0, __ATOMIC_RELAXED);
        }
    }

    size_t inc = __atomic_exchange_n(&objspace->malloc.increase, 0, __ATOMIC_RELAXED);

    objspace->malloc.limit = mosaic_pm_malloc_limit(objspace->malloc.limit, inc, params->malloc_limit_growth_factor,
                                                    params->malloc_limit_min, params->malloc_limit_max);
    objspace->pace.growth_trigger_bytes = mosaic_pm_growth_trigger(mosaic_pace_growth_step(objspace), objspace->malloc.limit);
    /* Near the soft limit, a GC comes before malloc takes half of what is left. */
    size_t headroom = limit_headroom(objspace);
    if (headroom != MOSAIC_SIZE_MAX) {
        size_t cap = mosaic_pm_malloc_cap(headroom);
        if (objspace->malloc.limit > cap) objspace->malloc.limit = cap;
        if (objspace->pace.growth_trigger_bytes > cap) objspace->pace.growth_trigger_bytes = cap;
    }
    objspace->malloc_gc_pending = false;
}
