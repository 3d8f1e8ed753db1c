/*
 * enter.c: entering and leaving the collector, and what a stay inside it costs.
 *
 * Every piece of collector work done on a Ruby thread (a collection, an incremental step, a
 * lazy-sweep step, the final pause of a mark in steps) runs between mosaic_gc_enter and
 * mosaic_gc_exit: the VM lock held, other Ractors stopped when asked (the barrier),
 * during_gc set, the GC_ENTER/GC_EXIT events around it. Each stay adds to GC.stat's
 * :mosaic_gc_wall_time and :mosaic_gc_cpu_time and to its kind's longest pause.
 *
 * Invariants:
 *  - during_gc is true exactly between enter and leave; entering twice is a bug (rb_bug),
 *    never a silent corruption.
 *  - Only a Ruby thread collects (mosaic_gc_allowed_here); allocation and GC.start hold the GVL,
 *    and a collection from inside malloc checks that it does (malloc.c, can_collect_here).
 */
#include "core/mosaic.h"

void
mosaic_gc_enter(mosaic_objspace_t *objspace, unsigned int *lock_lev, bool barrier)
{
    *lock_lev = rb_gc_vm_lock();
    if (barrier) rb_gc_vm_barrier();
    if (RB_UNLIKELY(objspace->during_gc)) {
        mosaic_set_dont_gc(objspace, true);
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

bool
mosaic_gc_allowed_here(void)
{
    /* A thread Ruby knows. Not whether it holds the GVL: its callers do (allocation and
     * GC.start run with it; malloc.c's can_collect_here asks ruby_thread_has_gvl_p). */
    return ruby_native_thread_p();
}
