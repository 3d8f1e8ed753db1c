/*
 * pace_math.h: the pacer's arithmetic, as pure functions of plain numbers (the "pm" of their
 * names): no objspace, no Ruby header, no side effect but on the arguments they are given.
 * pace.c reads the figures, calls these and stores what they return; the formulas live here
 * so that the C unit tests (test/c/test_pace.c) run the very code the collector runs. What
 * each one is for, and why: the top of pace.c and docs/DESIGN.md, "Pacing".
 *
 * Owns: the growth step, the free-slot goals (a class's ask, the major's target, the shrink),
 * the free-slot floor, the soft limit's headroom and the heap target, the malloc and old
 * malloc limits, the old-object limits, the GC-time share's decaying sums, and the room scale
 * that bounds that share.
 *
 * Invariants: every size * factor goes through mosaic_scale and every sum through
 * mosaic_add_sat (core/util.h), so a result saturates at MOSAIC_SIZE_MAX and never wraps;
 * doubles are combined in the order pace.c has always used (changing it changes results).
 */
#ifndef MOSAIC_PACE_MATH_H
#define MOSAIC_PACE_MATH_H

#include "core/util.h"

#pragma GCC visibility push(hidden)

/* The growth step (mosaic_pace_grown_enough): 1/8 of what the heap holds, at least 4 MiB. */
#define MOSAIC_GROWTH_STEP_MIN ((size_t)4 << 20)
#ifndef MOSAIC_GROWTH_STEP_DIVISOR
# define MOSAIC_GROWTH_STEP_DIVISOR 8
#endif

/* The floor's budget in one GC is at most the pages in use or this, whichever is more: a huge
 * RUBY_GC_HEAP_FREE_SLOTS grows the heap geometrically, a GC between steps, instead of letting
 * a program allocate until memory runs out without ever collecting. */
#define MOSAIC_FLOOR_GROW_MIN ((size_t)32 << 20)

/* Near the soft limit the malloc limit is half the headroom, but never below this: a smaller
 * one would collect for every few mallocs (the GC time cap would then set the limit aside). */
#define MOSAIC_LIMIT_MALLOC_FLOOR ((size_t)256 << 10)

/* ------------------------------------------------------------ growth step */

/* The growth step from `pages` in use and the latest major's live malloc: an eighth of the
 * larger, at least MOSAIC_GROWTH_STEP_MIN. */
static inline size_t
mosaic_pm_growth_step(size_t pages, size_t malloc_live_bytes)
{
    size_t step = pages * MOSAIC_PAGE_SIZE / MOSAIC_GROWTH_STEP_DIVISOR;
    size_t by_malloc = malloc_live_bytes / MOSAIC_GROWTH_STEP_DIVISOR;
    if (by_malloc > step) step = by_malloc;
    return step < MOSAIC_GROWTH_STEP_MIN ? MOSAIC_GROWTH_STEP_MIN : step;
}

/* Whether fresh pages wait for a GC: `grown` (fresh pages and malloc since the latest GC) has
 * reached the step and the floor's budget. */
static inline bool
mosaic_pm_grown_enough(size_t grown, size_t step, size_t floor_bytes)
{
    return grown >= step && grown >= floor_bytes;
}

/* The growth trigger: fresh pages plus malloc past it run a GC from malloc. */
static inline size_t
mosaic_pm_growth_trigger(size_t step, size_t malloc_limit)
{
    return step > malloc_limit ? step : malloc_limit;
}

/* ------------------------------------------------------- free-slot goals */

/* A class's live-data target after a major GC, per live slot: 1 / (1 - goal_ratio) (with a
 * goal of 0, or of 1 or more: growth_factor). */
static inline double
mosaic_pm_major_target_factor(double goal_ratio, double growth_factor)
{
    return goal_ratio > 0.0 && goal_ratio < 1.0 ? 1.0 / (1.0 - goal_ratio) : growth_factor;
}

/* A class's target for the minor GCs after a major that found `live` slots live: live * factor
 * (mosaic_pm_major_target_factor), at least its init slots. */
static inline size_t
mosaic_pm_major_target(size_t live, double target_factor, size_t init)
{
    size_t target = mosaic_scale(live, target_factor);
    return target > init ? target : init;
}

/* The slots a class keeps after a major GC that found `live` of them live:
 * max(init, live / (1 - max_ratio)), the default GC's shrink rule. Only meaningful while
 * max_ratio < 1. */
static inline size_t
mosaic_pm_keep_slots(size_t live, double max_ratio, size_t init)
{
    size_t keep = mosaic_scale(live, 1.0 / (1.0 - max_ratio));
    return keep < init ? init : keep;
}

/* Whole pages of a class of `total` slots beyond the `keep` it keeps. */
static inline size_t
mosaic_pm_freeable_pages(size_t total, size_t keep, size_t slots_per_page)
{
    return total > keep ? (total - keep) / slots_per_page : 0;
}

/* Whether a class of `total` slots, `free` of them free after marking, is short of room:
 * fewer than total * min_ratio free, or no slot at all. */
static inline bool
mosaic_pm_short_of_free(size_t free, size_t total, double min_ratio)
{
    return !(free >= mosaic_scale(total, min_ratio) && total > 0);
}

/* Slots a class short of free room asks for: total * (f - 1),
 * f = clamp((live / total) / (1 - goal_ratio), 1, growth_factor), so that after growing
 * free / total is the goal; with a goal of 0 (or of 1 or more), total * (growth_factor - 1).
 * At most max_slots when that is not 0. */
static inline size_t
mosaic_pm_growth_ask(size_t total, size_t live, double goal_ratio, double growth_factor, size_t max_slots)
{
    size_t grow;
    if (total == 0) return 0;
    if (goal_ratio > 0.0 && goal_ratio < 1.0) {
        double f = ((double)live / (double)total) / (1.0 - goal_ratio);
        if (f > growth_factor) f = growth_factor;
        grow = f > 1.0 ? mosaic_scale(total, f - 1.0) : 0;
    }
    else {
        grow = mosaic_scale(total, growth_factor - 1.0);
    }
    if (max_slots > 0 && grow > max_slots) grow = max_slots;
    return grow;
}

/* A short class's ask, less the `caught_up` slots the mark's catch-up steps added to it
 * already (at most `total`): the ask as if it had not taken them (at least a page), less what
 * it took. 0: no ask. */
static inline size_t
mosaic_pm_class_ask(size_t total, size_t live, size_t caught_up, size_t slots_per_page,
                    double goal_ratio, double growth_factor, size_t max_slots)
{
    size_t grow = mosaic_pm_growth_ask(total - caught_up, live, goal_ratio, growth_factor, max_slots);
    if (grow < slots_per_page) grow = slots_per_page;
    return grow > caught_up ? grow - caught_up : 0;
}

/* Whether allocation runs through a class: between the two latest GCs it took (`allocated`)
 * at least an eighth of the free slots the class has now, so that eight cycles like the
 * latest would use them up. (A margin, not "at least its free slots": back-to-back GCs make a
 * short cycle, and a class running dry must not be taken for one that does not.) */
static inline bool
mosaic_pm_class_allocating(size_t allocated, size_t free)
{
    return allocated > 0 && allocated >= free / 8;
}

/* Whether allocation churns a class: allocation runs through it (mosaic_pm_class_allocating,
 * with `allocated` since the previous GC), and its free slots at the GC's start (total -
 * used_at_gc) were used up (all but 1/16 of the class), or were fewer than the garbage this GC
 * found in it (used_at_gc - live). A class below its free ratio that holds stable data and
 * free slots it does not use (gcbench's 40-byte class: 18% free, nothing dying) is not: a
 * major GC would free nothing in it. Nor is a class of old data that nothing allocates in,
 * however full (a large old heap asked for a major every fourth GC). */
static inline bool
mosaic_pm_churning(size_t total, size_t used_at_gc, size_t live, size_t allocated)
{
    size_t empty_at_gc = total > used_at_gc ? total - used_at_gc : 0;
    size_t garbage = used_at_gc > live ? used_at_gc - live : 0;
    if (!mosaic_pm_class_allocating(allocated, total > live ? total - live : 0)) return false;
    return empty_at_gc < total / 16 || garbage > empty_at_gc;
}

/* The whole heap's ask, in bytes, from the slot bytes of all classes (`total`, `live`): none
 * while at least min_ratio of them is free, else growth to the free goal as for a class
 * (mosaic_pm_growth_ask): the default GC's rule, on bytes. */
static inline size_t
mosaic_pm_heap_ask(size_t total, size_t live, double min_ratio, double goal_ratio, double growth_factor)
{
    size_t free = total > live ? total - live : 0;
    if (!mosaic_pm_short_of_free(free, total, min_ratio)) return 0;
    return mosaic_pm_growth_ask(total, live, goal_ratio, growth_factor, 0);
}

/* The shared budget from the classes' asks: the asks of classes allocation runs through
 * (`allocating`), plus the asks of the others up to the whole heap's ask (`heap_ask`). A class
 * short of free room that allocation hardly touches (old data) does not run dry: its ask is
 * room for the heap as a whole, which the allocating classes would take instead of collecting
 * although they have room of their own. (A large old heap of fully live classes let the
 * young classes grow by a growth step at every minor GC: pages from 104 to 255 MiB while 67
 * MiB stayed live.) While the whole heap is short of room it grows as before. */
static inline size_t
mosaic_pm_shared_budget(size_t allocating, size_t others, size_t heap_ask)
{
    return mosaic_add_sat(allocating, others < heap_ask ? others : heap_ask);
}

/* ------------------------------------------------------------ page bytes */

/* `pages` whole pages in bytes, saturating. */
static inline size_t
mosaic_pm_page_bytes(size_t pages)
{
    return pages > MOSAIC_SIZE_MAX / MOSAIC_PAGE_SIZE ? MOSAIC_SIZE_MAX : pages * MOSAIC_PAGE_SIZE;
}

/* The bytes of the whole pages `slots` slots take, `slots_per_page` to a page. */
static inline size_t
mosaic_pm_slots_page_bytes(size_t slots, size_t slots_per_page)
{
    size_t pages = slots / slots_per_page + (slots % slots_per_page != 0);
    return mosaic_pm_page_bytes(pages);
}

/* ------------------------------------------------------- free-slot floor */

/* The room the floor asks for: heap_free_slots 40-byte slots per live Ractor, counting 1 to
 * 8 of them. */
static inline size_t
mosaic_pm_floor_bytes(size_t heap_free_slots, unsigned long ractors)
{
    if (ractors < 1) ractors = 1;
    if (ractors > 8) ractors = 8;
    return mosaic_scale(heap_free_slots, (double)ractors * MOSAIC_BASE_SLOT_SIZE);
}

/* What the heap lacks of `floor`: the free slot bytes the classes keep (`room`), the pooled
 * pages and the growth just `asked` count as room. 0 when none. */
static inline size_t
mosaic_pm_floor_missing(size_t floor, size_t room, size_t pool_pages, size_t asked)
{
    room = mosaic_add_sat(room, mosaic_add_sat(pool_pages * MOSAIC_PAGE_SIZE, asked));
    return room >= floor ? 0 : floor - room;
}

/* Pages a class keeps of its `freeable` ones (those a major's shrink would give back) toward
 * `missing` bytes, `page_room` free bytes each. */
static inline size_t
mosaic_pm_floor_kept_pages(size_t missing, size_t page_room, size_t freeable)
{
    size_t kept = missing / page_room + (missing % page_room != 0);
    return kept > freeable ? freeable : kept;
}

/* The fresh page bytes for what is still `missing` once kept pages are counted: whole pages,
 * at most the pages in use or MOSAIC_FLOOR_GROW_MIN, whichever is more. */
static inline size_t
mosaic_pm_floor_grow(size_t missing, size_t pages_in_use)
{
    size_t pages = missing / MOSAIC_PAGE_SIZE + (missing % MOSAIC_PAGE_SIZE != 0);
    size_t bytes = mosaic_pm_page_bytes(pages);
    size_t cap = pages_in_use * MOSAIC_PAGE_SIZE;
    if (cap < MOSAIC_FLOOR_GROW_MIN) cap = MOSAIC_FLOOR_GROW_MIN;
    return bytes < cap ? bytes : cap;
}

/* ------------------------------------------- soft limit and heap target */

/* Page bytes that may still be asked for under a soft limit (`limit` > 0) with `used` bytes
 * in use. */
static inline size_t
mosaic_pm_headroom(size_t limit, size_t used)
{
    return used < limit ? limit - used : 0;
}

/* The shared budget cut to whole pages of the headroom when it asks for more. */
static inline size_t
mosaic_pm_cut_to_headroom(size_t grow_bytes, size_t headroom)
{
    return grow_bytes > headroom ? headroom / MOSAIC_PAGE_SIZE * MOSAIC_PAGE_SIZE : grow_bytes;
}

/* The soft limit's hysteresis, on the live memory a major GC's sweep measured (slot bytes
 * marked, survivors' malloc, the RSS overhead): above 95% of the limit the program does not
 * fit and the limit is set aside; below 85% it is taken up again; between, nothing changes. */
static inline bool
mosaic_pm_limit_unfit(size_t live, size_t limit)
{
    return live > mosaic_scale(limit, 0.95);
}

static inline bool
mosaic_pm_limit_fits_again(size_t live, size_t limit)
{
    return live < mosaic_scale(limit, 0.85);
}

/* Whether the memory `used` is within 10% of the soft limit. */
static inline bool
mosaic_pm_near_limit(size_t used, size_t limit)
{
    return used > mosaic_scale(limit, 0.9);
}

/* The page memory the heap may reach before the next GC: the pages in use and those the
 * classes' own init-slot budgets allow (`target_pages`), plus the shared budget. */
static inline size_t
mosaic_pm_heap_target(size_t target_pages, size_t allocatable_bytes)
{
    return mosaic_add_sat(target_pages * MOSAIC_PAGE_SIZE, allocatable_bytes);
}

/* ---------------------------------------------------------------- malloc */

/* The malloc limit at a GC that saw `increase` bytes malloc'd (net) since the previous one:
 * increase * growth_factor if it crossed `limit`, else limit decayed by 2%; within
 * [min, max]. */
static inline size_t
mosaic_pm_malloc_limit(size_t limit, size_t increase, double growth_factor, size_t min, size_t max)
{
    if (increase > limit) {
        size_t next = mosaic_scale(increase, growth_factor);
        return next > max ? max : next;
    }
    size_t next = mosaic_scale(limit, 0.98);
    return next < min ? min : next;
}

/* Near the soft limit: the malloc limit and the growth trigger are at most half the headroom,
 * at least MOSAIC_LIMIT_MALLOC_FLOOR. */
static inline size_t
mosaic_pm_malloc_cap(size_t headroom)
{
    return headroom / 2 > MOSAIC_LIMIT_MALLOC_FLOOR ? headroom / 2 : MOSAIC_LIMIT_MALLOC_FLOOR;
}

/* What the survivors of a GC hold: malloc when it started less what its sweep freed. */
static inline size_t
mosaic_pm_survivors(size_t bytes_at_gc, size_t freed_by_sweep)
{
    return bytes_at_gc > freed_by_sweep ? bytes_at_gc - freed_by_sweep : 0;
}

/* The old malloc limit after a major GC that did not run for old malloc: decays toward `min`
 * by the growth factor's tenth (1.2: 2%). */
static inline size_t
mosaic_pm_oldmalloc_decay(size_t old_limit, double growth_factor, size_t min)
{
    size_t next = (size_t)(old_limit / ((growth_factor - 1) / 10 + 1));
    return next < min ? min : next;
}

/* Whether a major GC run for old malloc (`trigger` bytes of it) found most of it live: the
 * live malloc (survivors over the previous live_bytes) grew by more than half of the trigger.
 * Then the old malloc limit rises (mosaic_pm_oldmalloc_raise); when the major freed most of
 * it, the limit was right. */
static inline bool
mosaic_pm_oldmalloc_live_grew(size_t survivors, size_t live_bytes, size_t trigger)
{
    size_t live_growth = survivors > live_bytes ? survivors - live_bytes : 0;
    return live_growth > trigger / 2;
}

/* The old malloc limit raised by growth_factor, at most `max`. */
static inline size_t
mosaic_pm_oldmalloc_raise(size_t old_limit, double growth_factor, size_t max)
{
    size_t next = mosaic_scale(old_limit, growth_factor);
    return next > max ? max : next;
}

/* ----------------------------------------------------------- generations */

/* The limit of old objects after a major GC that found `live` objects live, `old` of them old:
 * old + (factor - 1) * live, at least 0. The default GC's is old * factor; the two agree where
 * everything live is old, and at factors of 1 (any promotion asks for a major) and 0 (every GC
 * is one). Why live: a major that falls while a large structure is still young (a temporary the
 * program builds, promotes and drops in every round of its work) counted few old objects, so
 * the structure's promotion two GCs later passed old * factor and ran an :oldgen major that
 * found it all still live (fluentd: 27 of its 71 majors, 19-30 ms each, and the wait before the
 * next useful major restarted). */
static inline size_t
mosaic_pm_old_objects_limit(size_t old, size_t live, double factor)
{
    if (live < old) live = old;
    if (factor >= 1.0) return mosaic_add_sat(old, mosaic_scale(live, factor - 1.0));
    size_t cut = mosaic_scale(live, 1.0 - factor);
    return old > cut ? old - cut : 0;
}

/* The limit of old wb-unprotected objects: max(their count * factor, old * ratio). */
static inline size_t
mosaic_pm_wb_unprotected_limit(size_t old, size_t old_wb_unprotected, double factor, double ratio)
{
    size_t by_count = mosaic_scale(old_wb_unprotected, factor);
    size_t by_ratio = mosaic_scale(old, ratio);
    return by_count > by_ratio ? by_count : by_ratio;
}

/* -------------------------------------------------------- GC time share */

/* The interval a GC ending at end_ns closes: since the previous GC's end (last_end_ns, 0 for
 * none), or the GC itself. */
static inline uint64_t
mosaic_pm_gc_interval(uint64_t last_end_ns, uint64_t start_ns, uint64_t end_ns)
{
    return last_end_ns && end_ns > last_end_ns ? end_ns - last_end_ns : end_ns - start_ns;
}

/* The GC time in that interval (`since`): the pause, or what the marking and sweeping
 * counters (`counted_ns`, `counted_at_last_end` at the previous GC's end) advanced by when
 * they are `measured` and that is more; never more than the interval. */
static inline uint64_t
mosaic_pm_gc_time(uint64_t start_ns, uint64_t end_ns, bool measured, uint64_t counted_ns,
                  uint64_t counted_at_last_end, uint64_t since)
{
    uint64_t gc_ns = end_ns - start_ns;
    if (measured && counted_ns > counted_at_last_end && counted_ns - counted_at_last_end > gc_ns) {
        gc_ns = counted_ns - counted_at_last_end;
    }
    if (gc_ns > since) gc_ns = since;
    return gc_ns;
}

/* Adds one interval to the decaying sums (each multiplied by 15/16 first) and returns the GC
 * time share, *gc_recent / *all_recent (0 while there is no time). */
static inline double
mosaic_pm_gc_share(double *gc_recent, double *all_recent, uint64_t gc_ns, uint64_t since)
{
    *gc_recent = *gc_recent * (15.0 / 16.0) + (double)gc_ns;
    *all_recent = *all_recent * (15.0 / 16.0) + (double)since;
    return *all_recent > 0 ? *gc_recent / *all_recent : 0.0;
}

/* ------------------------------------------------------------ room scale */

/* The room scale's bounds: the free-slot ratios' room is never scaled below half or above four
 * times what they give. */
#define MOSAIC_ROOM_SCALE_MIN 0.5
#define MOSAIC_ROOM_SCALE_MAX 4.0
/* The scale is set again at a major GC that closes a cycle of 2 GCs or more, and after this
 * many GCs without one. */
#define MOSAIC_ROOM_CYCLE_GCS 8

/* A free-slot ratio r (the free share of a class) with its room scaled: r is room / (live +
 * room), so room per live byte is q = r / (1 - r); the scaled ratio is s*q / (1 + s*q). 0 stays
 * 0, a ratio of 1 or more (no bound) stays as it is, and a scale of 1 returns r unchanged (not
 * r rounded through q). */
static inline double
mosaic_pm_scaled_ratio(double ratio, double scale)
{
    if (ratio <= 0.0 || ratio >= 1.0 || scale == 1.0) return ratio;  /* 1: the ratio itself, exactly */
    double q = ratio / (1.0 - ratio) * scale;
    return q / (1.0 + q);
}

/* The room scale at an update, from `scale` before it and `share`, the share of time GC took
 * since the update before (`gcs` GCs). Below `time_min` the room shrinks by share / time_min;
 * above `time_max`, while the heap held `steady`, it grows by share / time_max. Between the
 * two, a scale away from 1 goes back toward the ratios' own room, by share / time_min from
 * below (so the share settles at time_min, or the scale at 1) and by share / time_max from
 * above. Each move is at most 2x, and the scale stays within [MOSAIC_ROOM_SCALE_MIN,
 * MOSAIC_ROOM_SCALE_MAX]. Why that factor: each GC's cost is set by what it marks and sweeps,
 * not by the room, and the room sets how often GCs come (allocation / room), so the share is
 * about proportional to 1 / room: scaling the room by share / bound brings the share to the
 * bound. A bound of 0 is off. Fewer than 2 GCs measure nothing. */
static inline double
mosaic_pm_room_scale(double scale, double share, unsigned int gcs, bool steady, double time_max, double time_min)
{
    if (gcs < 2) return scale;
    double next = scale;
    if (time_min > 0.0 && share < time_min) {
        next = scale * share / time_min;
    }
    else if (time_max > 0.0 && share > time_max) {
        if (steady) next = scale * share / time_max;
    }
    else if (scale < 1.0) {
        next = time_min > 0.0 ? scale * share / time_min : 1.0;
        if (next > 1.0) next = 1.0;
    }
    else if (scale > 1.0) {
        next = time_max > 0.0 ? scale * share / time_max : 1.0;
        if (next < 1.0) next = 1.0;
    }
    if (next > scale * 2.0) next = scale * 2.0;
    if (next < scale * 0.5) next = scale * 0.5;
    if (next < MOSAIC_ROOM_SCALE_MIN) next = MOSAIC_ROOM_SCALE_MIN;
    if (next > MOSAIC_ROOM_SCALE_MAX) next = MOSAIC_ROOM_SCALE_MAX;
    return next;
}

/* Of `allocated` bytes allocated since the GC before, the share a GC found alive, given the
 * `garbage` bytes it found dead (garbage of older cycles counts too, so it may reach 0). */
static inline double
mosaic_pm_survival(size_t allocated, size_t garbage)
{
    if (allocated == 0) return 1.0;
    if (garbage >= allocated) return 0.0;
    return 1.0 - (double)garbage / (double)allocated;
}

/* Whether a build-up just ended: the GC before kept nearly all it had allocated since its own
 * predecessor (at least 7/8), and this one kept at most half. What was built may now be dying
 * old, where no minor GC sees it. */
static inline bool
mosaic_pm_build_up_ended(double survival_before, double survival)
{
    return survival_before >= 0.875 && survival <= 0.5;
}

/* Slot bytes a GC must have seen allocated since the GC before for its survival to count: 16
 * KiB, a few hundred objects. A GC after less (a second GC.start in a row) measures nothing,
 * and would otherwise read as a build-up that kept everything. (Below the ~40 KiB the stress
 * gate's GC every 1000 allocations sees, so the rule runs there too.) */
#define MOSAIC_PM_SURVIVAL_MIN_BYTES (16 * 1024)

/* One GC's step of the build-up rule: whether it follows a build-up's end, given the survival
 * recorded before it (*survival, updated to this GC's). A GC that allocated too little to
 * measure keeps the survival from before and ends nothing. */
static inline bool
mosaic_pm_survival_step(double *survival, size_t allocated, size_t garbage)
{
    if (allocated < MOSAIC_PM_SURVIVAL_MIN_BYTES) return false;
    double now = mosaic_pm_survival(allocated, garbage);
    bool ended = mosaic_pm_build_up_ended(*survival, now);
    *survival = now;
    return ended;
}

/* Whether a figure (pages in use, live bytes) held steady: `now` within 1/8 of `before`, either
 * way (`before` 0: nothing to compare with, not steady). */
static inline bool
mosaic_pm_held_steady(size_t now, size_t before)
{
    if (before == 0) return false;
    size_t diff = now > before ? now - before : before - now;
    return diff <= before / 8;
}

#pragma GCC visibility pop

#endif /* MOSAIC_PACE_MATH_H */
