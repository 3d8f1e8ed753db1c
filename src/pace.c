/*
 * pace.c: when the next collection runs, and how the heap grows and shrinks.
 *
 * Object pacing, per size class, decided once per cycle right after marking:
 *   live  = slots marked this cycle (plus zombies waiting for their finalizer)
 *   free  = total - live                         (what the sweep will hand out)
 *   if free < total * free_slots_min_ratio:      the class asks for
 *       max(total * (growth_factor - 1), total * goal_ratio - free) slots, capped by
 *       growth_max_slots; the bytes asked for by all classes form one shared budget
 *       (allocatable_bytes) that any class may draw pages from, so a small class that runs
 *       dry does not force a collection of the whole heap while the heap may still grow
 *   if free > total * free_slots_max_ratio:      let the sweep return the surplus of empty
 *       pages to the OS (freeable_pages), never below the class's init slots
 * A class that runs out of free slots and of budget triggers the next collection. A class
 * below its init slots always keeps the budget to reach them, and never shrinks below them,
 * so a small program never collects before it has allocated that many objects of the class
 * (RUBY_GC_HEAP_<i>_INIT_SLOTS).
 *
 * Generations: after a major GC, old_objects_limit = old_objects * oldobject_limit_factor (2.0)
 * and the limit for old wb-unprotected objects (traced by every minor GC) is
 * max(their count * factor, old_objects * wb_unprotected_limit_ratio (0.01)). Any GC that
 * leaves more old objects than a limit asks for a major GC next (major_by :oldgen / :shady). A
 * minor GC after which a class has too little free room asks for one too (:nofree), unless a
 * major GC ran within the last MOSAIC_OLD_AGE collections (then the class just grows).
 *
 * Old malloc pacing (generations): oldmalloc_increase counts bytes malloc'd since the latest
 * major GC (minus bytes freed): mostly buffers that only a major GC can free once their old
 * owners die. A minor GC that finds it above oldmalloc_limit asks for a major GC
 * (:oldmalloc). At each major GC the limit becomes the increase * 1.2 if it was crossed, else
 * decays, within [16 MiB, 128 MiB] (RUBY_GC_OLDMALLOC_LIMIT*), as in the default GC.
 *
 * Arithmetic: every size * factor goes through mosaic_scale and sums through mosaic_add_sat,
 * which saturate at MOSAIC_SIZE_MAX: a huge factor means "as much as can be", never a wrapped
 * or undefined value (a factor of 1e300 once made every GC major, a huge growth factor 0).
 *
 * Malloc pacing: malloc_increase counts bytes malloc'd since the last GC (minus bytes freed);
 * crossing malloc_limit triggers a GC. At each GC the limit grows by
 * malloc_limit_growth_factor if it was crossed, else decays by 2%, within [min, max].
 */
#include "mosaic.h"

void
mosaic_pace_init(mosaic_objspace_t *objspace)
{
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        objspace->heaps[i].allocatable_slots = objspace->params.heap_init_slots[i];
    }
    objspace->malloc_limit = objspace->params.malloc_limit_min;
    objspace->oldmalloc_limit = objspace->params.oldmalloc_limit_min;
    objspace->stress_minor_countdown = objspace->params.stress_minor_every;
}

static void
pace_generations(mosaic_objspace_t *objspace)
{
    const struct mosaic_params *params = &objspace->params;
    if (!objspace->params.generational) return;

    if (objspace->full_mark) {
        objspace->old_objects_limit = mosaic_scale(objspace->old_objects, params->oldobject_limit_factor);
        size_t by_count = mosaic_scale(objspace->old_wb_unprotected_objects, params->oldobject_limit_factor);
        size_t by_ratio = mosaic_scale(objspace->old_objects, params->wb_unprotected_limit_ratio);
        objspace->old_wb_unprotected_limit = by_count > by_ratio ? by_count : by_ratio;
    }
    /* Checked after every GC, majors included: a factor below 1 makes every GC a major GC. */
    if (objspace->old_objects > objspace->old_objects_limit) {
        objspace->need_major |= MOSAIC_REASON_MAJOR_OLDGEN;
    }
    if (objspace->old_wb_unprotected_objects > objspace->old_wb_unprotected_limit) {
        objspace->need_major |= MOSAIC_REASON_MAJOR_SHADY;
    }
}

void
mosaic_pace_after_mark(mosaic_objspace_t *objspace)
{
    const struct mosaic_params *params = &objspace->params;
    size_t shared_grow_bytes = 0;
    pace_generations(objspace);

    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        size_t total = heap->total_slots;
        size_t live = heap->marked_slots + heap->final_slots;
        size_t free = total > live ? total - live : 0;

        heap->freeable_pages = 0;

        /* A class below its init slots may always grow up to them without collecting. */
        size_t init = params->heap_init_slots[i];
        size_t floor_budget = total < init ? init - total : 0;

        size_t min_free = mosaic_scale(total, params->free_slots_min_ratio);
        if (free < min_free && !objspace->full_mark && objspace->params.generational &&
                objspace->stats.count - objspace->last_major_count >= MOSAIC_OLD_AGE) {
            /* Old garbage may be what fills the class: collect it before growing much. */
            objspace->need_major |= MOSAIC_REASON_MAJOR_NOFREE;
        }
        size_t max_free = mosaic_scale(total, params->free_slots_max_ratio);
        if (free < min_free || total == 0) {
            size_t grow = mosaic_scale(total, params->growth_factor - 1.0);
            if (params->free_slots_goal_ratio > 0.0) {
                size_t goal = mosaic_scale(total, params->free_slots_goal_ratio);
                if (goal > free && goal - free > grow) grow = goal - free;
            }
            if (params->growth_max_slots > 0 && grow > params->growth_max_slots) {
                grow = params->growth_max_slots;
            }
            if (grow < heap->slots_per_page) grow = heap->slots_per_page;
            size_t pages = grow / heap->slots_per_page + (grow % heap->slots_per_page != 0);
            size_t bytes = pages > MOSAIC_SIZE_MAX / MOSAIC_PAGE_SIZE ? MOSAIC_SIZE_MAX : pages * MOSAIC_PAGE_SIZE;
            shared_grow_bytes = mosaic_add_sat(shared_grow_bytes, bytes);
        }
        else if (free > max_free) {
            size_t surplus = free - max_free;
            if (total - surplus < init) surplus = total > init ? total - init : 0;
            heap->freeable_pages = surplus / heap->slots_per_page;
            /* Shrinking: no budget of its own beyond the init-slot floor below. */
            heap->allocatable_slots = 0;
        }
        if (heap->allocatable_slots < floor_budget) heap->allocatable_slots = floor_budget;
    }
    if (objspace->allocatable_bytes < shared_grow_bytes) objspace->allocatable_bytes = shared_grow_bytes;
}

/* Called at the start of each collection, once it is known to be minor or major. */
void
mosaic_pace_malloc_limit(mosaic_objspace_t *objspace)
{
    const struct mosaic_params *params = &objspace->params;
    if (objspace->params.generational) {
        size_t old_inc = __atomic_load_n(&objspace->oldmalloc_increase, __ATOMIC_RELAXED);
        if (objspace->full_mark) {
            if (old_inc > objspace->oldmalloc_limit) {
                size_t next = mosaic_scale(old_inc, params->oldmalloc_limit_growth_factor);
                objspace->oldmalloc_limit = next > params->oldmalloc_limit_max ? params->oldmalloc_limit_max : next;
            }
            else {
                size_t next = (size_t)(objspace->oldmalloc_limit /
                                       ((params->oldmalloc_limit_growth_factor - 1) / 10 + 1));
                objspace->oldmalloc_limit = next < params->oldmalloc_limit_min ? params->oldmalloc_limit_min : next;
            }
            __atomic_store_n(&objspace->oldmalloc_increase, 0, __ATOMIC_RELAXED);
        }
        else if (old_inc > objspace->oldmalloc_limit) {
            objspace->need_major |= MOSAIC_REASON_MAJOR_OLDMALLOC;
        }
    }

    size_t inc = __atomic_exchange_n(&objspace->malloc_increase, 0, __ATOMIC_RELAXED);

    if (inc > objspace->malloc_limit) {
        size_t next = mosaic_scale(objspace->malloc_limit, params->malloc_limit_growth_factor);
        objspace->malloc_limit = next > params->malloc_limit_max ? params->malloc_limit_max : next;
    }
    else {
        size_t next = mosaic_scale(objspace->malloc_limit, 0.98);
        objspace->malloc_limit = next < params->malloc_limit_min ? params->malloc_limit_min : next;
    }
    objspace->malloc_gc_pending = false;
}
