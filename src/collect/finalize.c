/*
 * finalize.c: zombies and finalizers.
 *
 * Owns: the finalizer table (object -> hidden Array of callables), zombies (slots whose
 * free was deferred: T_DATA dfree that may not run inside the GC, or objects with a
 * finalizer), the postponed job that runs them outside the GC, and the finalization
 * done at VM shutdown.
 *
 * Invariants:
 *  - The finalizer table's keys are weak, its values strong (marked as roots, pinned). A key
 *    that compaction moves is re-keyed as it moves (mosaic_finalize_move); zombies never move.
 *  - A zombie keeps its slot (counted in page/heap final_slots) until finalize_list has run
 *    its dfree and its finalizers exactly once; then the slot becomes T_NONE and counts as
 *    freed. The zombie list is pushed with CAS (sweep) and taken whole with an exchange.
 *  - Finalizers run outside the GC, with the GVL, from a postponed job (or at shutdown).
 *  - A dfree's frees are tallied as a sweep's (malloc.c): they leave malloc_increase alone.
 */
#include <stdlib.h>

#include "core/mosaic.h"

static void finalize_deferred_job(void *data);

void
mosaic_finalize_init(mosaic_objspace_t *objspace)
{
    objspace->finalize.table = st_init_numtable();
    objspace->finalize.job = rb_postponed_job_preregister(0, finalize_deferred_job, objspace);
    if (objspace->finalize.job == POSTPONED_JOB_HANDLE_INVALID) {
        rb_bug("Mosaic: could not register the finalizer job");
    }
}

static int
mark_finalizer_table_value(st_data_t key, st_data_t value, st_data_t data)
{
    mosaic_mark((mosaic_objspace_t *)data, (VALUE)value, true);
    return ST_CONTINUE;
}

void
mosaic_finalize_mark_roots(mosaic_objspace_t *objspace)
{
    if (objspace->finalize.table) {
        st_foreach(objspace->finalize.table, mark_finalizer_table_value, (st_data_t)objspace);
    }
}

/* Compaction moved `src` (FL_FINALIZE set) to `dest`: its finalizers follow it. Inside the GC;
 * st_insert may malloc (never a Ruby object). */
void
mosaic_finalize_move(mosaic_objspace_t *objspace, VALUE src, VALUE dest)
{
    st_data_t key = (st_data_t)src, table;
    if (!st_delete(objspace->finalize.table, &key, &table)) {
        rb_bug("Mosaic: moving %p, which has FL_FINALIZE but no finalizer", (void *)src);
    }
    st_insert(objspace->finalize.table, (st_data_t)dest, table);
}

/* ============================================================ zombies */

#define ZOMBIE_KEPT_FLAGS (RUBY_FL_SEEN_OBJ_ID | RUBY_FL_FINALIZE)

void
mosaic_zombie_push(mosaic_objspace_t *objspace, VALUE obj, void (*dfree)(void *), void *data)
{
    struct mosaic_zombie *zombie = (struct mosaic_zombie *)obj;
    zombie->basic.flags = T_ZOMBIE | (zombie->basic.flags & ZOMBIE_KEPT_FLAGS);
    zombie->dfree = dfree;
    zombie->data = data;

    struct mosaic_page *page = mosaic_page_of(obj);
    page->final_slots++;
    page->heap->final_slots++;

    VALUE prev, next = objspace->finalize.zombies;
    do {
        zombie->next = prev = next;
        next = RUBY_ATOMIC_VALUE_CAS(objspace->finalize.zombies, prev, obj);
    } while (next != prev);
}

static VALUE
finalizer_at(long i, void *data)
{
    return RARRAY_AREF((VALUE)data, i);
}

static void
run_zombie(mosaic_objspace_t *objspace, VALUE obj)
{
    struct mosaic_zombie *zombie = (struct mosaic_zombie *)obj;
    if (zombie->dfree) {
        /* What a dfree frees was garbage a GC found, as a sweep's frees are: tallied like
         * them, it leaves malloc_increase alone and counts as freed by the current sweep
         * (malloc.c, mosaic_malloc_decrease). Netted against the increase, it hid the new
         * malloc of the cycle the zombies were finalized in. */
        mosaic_malloc_tally_begin();
        zombie->dfree(zombie->data);
        mosaic_malloc_tally_end(objspace);
    }

    if (RB_FL_TEST_RAW(obj, RUBY_FL_FINALIZE)) {
        RB_FL_UNSET_RAW(obj, RUBY_FL_FINALIZE);
        st_data_t key = (st_data_t)obj, table;
        if (st_delete(objspace->finalize.table, &key, &table)) {
            VALUE id = mosaic_objid_for_finalizer(objspace, obj);
            rb_gc_run_obj_finalizer(id, RARRAY_LEN((VALUE)table), finalizer_at, (void *)table);
            RB_GC_GUARD(id);
        }
        else {
            rb_bug("Mosaic: FL_FINALIZE is set but %p has no finalizer", (void *)obj);
        }
    }
}

static void
finalize_list(mosaic_objspace_t *objspace, VALUE list)
{
    while (list) {
        VALUE obj = list;
        list = ((struct mosaic_zombie *)obj)->next;

        run_zombie(objspace, obj);

        unsigned int lev = rb_gc_vm_lock();
        {
            MOSAIC_ASSERT(RB_BUILTIN_TYPE(obj) == T_ZOMBIE);
            if (RB_FL_TEST_RAW(obj, RUBY_FL_SEEN_OBJ_ID)) mosaic_objid_free(objspace, obj);
            struct mosaic_page *page = mosaic_page_of(obj);
            page->final_slots--;
            page->heap->final_slots--;
            page->heap->total_freed_objects++;
            /* Free, and on its page's freelist (the invariant alloc.c keeps). If the page is
             * not queued in free_pages, the next sweep queues it. */
            struct mosaic_free_slot *slot = (struct mosaic_free_slot *)obj;
            slot->flags = 0;
            slot->next = page->freelist;
            page->freelist = slot;
        }
        rb_gc_vm_unlock(lev);
    }
}

void
mosaic_finalize_deferred(mosaic_objspace_t *objspace)
{
    if (RUBY_ATOMIC_EXCHANGE(objspace->finalize.running, 1)) return;
    rb_gc_set_pending_interrupt();
    VALUE list;
    while ((list = RUBY_ATOMIC_VALUE_EXCHANGE(objspace->finalize.zombies, 0)) != 0) {
        finalize_list(objspace, list);
    }
    rb_gc_unset_pending_interrupt();
    RUBY_ATOMIC_SET(objspace->finalize.running, 0);
}

static void
finalize_deferred_job(void *data)
{
    mosaic_finalize_deferred((mosaic_objspace_t *)data);
}

/* ======================================================== the API */

void
rb_gc_impl_make_zombie(void *objspace_ptr, VALUE obj, void (*dfree)(void *), void *data)
{
    mosaic_zombie_push((mosaic_objspace_t *)objspace_ptr, obj, dfree, data);
}

VALUE
rb_gc_impl_define_finalizer(void *objspace_ptr, VALUE obj, VALUE block)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    st_data_t data;

    /* FL_FINALIZE is set only once the table has the entry: a collection in between (the
     * Array's allocation, st's malloc) may move obj, and compaction re-keys by that flag. */
    if (st_lookup(objspace->finalize.table, obj, &data)) {
        VALUE table = (VALUE)data;
        long len = RARRAY_LEN(table);
        for (long i = 0; i < len; i++) {
            VALUE recv = RARRAY_AREF(table, i);
            if (rb_equal(recv, block)) return recv;  /* no duplicates */
        }
        rb_ary_push(table, block);
    }
    else {
        VALUE table = rb_ary_new3(1, block);
        rb_obj_hide(table);
        bool held = mosaic_gc_hold(objspace);
        st_add_direct(objspace->finalize.table, obj, table);
        mosaic_gc_release(objspace, held);
        RB_GC_GUARD(table);
    }
    RBASIC(obj)->flags |= RUBY_FL_FINALIZE;
    return block;
}

void
rb_gc_impl_undefine_finalizer(void *objspace_ptr, VALUE obj)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    st_data_t key = obj;
    if (objspace->finalize.table) st_delete(objspace->finalize.table, &key, 0);
    RB_FL_UNSET(obj, RUBY_FL_FINALIZE);
}

void
rb_gc_impl_copy_finalizer(void *objspace_ptr, VALUE dest, VALUE obj)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    st_data_t data;

    if (!RB_FL_TEST(obj, RUBY_FL_FINALIZE)) return;
    if (st_lookup(objspace->finalize.table, obj, &data)) {
        bool held = mosaic_gc_hold(objspace);
        st_insert(objspace->finalize.table, dest, data);
        RB_FL_SET(dest, RUBY_FL_FINALIZE);
        mosaic_gc_release(objspace, held);
    }
    else {
        rb_bug("Mosaic: FL_FINALIZE is set but %p has no finalizer", (void *)obj);
    }
}

static int
shutdown_run_finalizer_i(st_data_t key, st_data_t val, st_data_t data)
{
    mosaic_objspace_t *objspace = (mosaic_objspace_t *)data;
    VALUE obj = (VALUE)key;
    VALUE table = (VALUE)val;

    rb_gc_run_obj_finalizer(mosaic_object_id(objspace, obj), RARRAY_LEN(table), finalizer_at, (void *)table);
    RB_FL_UNSET(obj, RUBY_FL_FINALIZE);
    return ST_DELETE;
}

void
rb_gc_impl_shutdown_call_finalizer(void *objspace_ptr)
{
    mosaic_objspace_t *objspace = objspace_ptr;

    /* The breakdown at exit, before exit frees anything (memory.c). */
    if (objspace->params.memory_report) mosaic_memory_report(objspace, "at exit");
    if (objspace->params.ref_update_probe) mosaic_ref_update_probe_report(objspace);

    if (RUBY_ATOMIC_EXCHANGE(objspace->finalize.running, 1)) {
        /* A finalizer is running (we are exiting from inside one): stop collecting. */
        mosaic_set_dont_gc(objspace, true);
#if MOSAIC_SIZE_HISTOGRAM
        mosaic_size_histogram_write();
#endif
        return;
    }

    while (objspace->finalize.table->num_entries) {
        st_foreach(objspace->finalize.table, shutdown_run_finalizer_i, (st_data_t)objspace);
    }

    RUBY_ATOMIC_SET(objspace->finalize.running, 0);
    mosaic_finalize_deferred(objspace);
    RUBY_ATOMIC_SET(objspace->finalize.running, 1);

    /* Finish the cycle so no slot is half-swept, then forbid collections: forcing T_DATA
     * frees below can leave the object graph inconsistent. */
    mosaic_gc_rest(objspace);
    mosaic_set_dont_gc(objspace, true);
#if MOSAIC_SIZE_HISTOGRAM
    /* The histograms (size_histogram.c), now that the last sweep has run: the objects freed
     * below are freed by shutdown, not by a sweep, and are not counted as deaths. */
    mosaic_size_histogram_write();
#endif

    unsigned int lev;
    mosaic_gc_enter(objspace, &lev, false);
    for (size_t p = 0; p < objspace->pages.sorted_count; p++) {
        struct mosaic_page *page = objspace->pages.sorted[p];
        for (size_t i = 0; i < page->total_slots; i++) {
            VALUE obj = (VALUE)(page->start + i * page->slot_size);
            /* Zombies (some made by the sweep just finished) are finalized below, once. */
            if (RB_BUILTIN_TYPE(obj) == T_ZOMBIE) continue;
            if (rb_gc_shutdown_call_finalizer_p(obj)) {
                rb_gc_obj_free_vm_weak_references(obj);
                if (rb_gc_obj_free(objspace, obj)) RBASIC(obj)->flags = 0;
            }
        }
    }
    mosaic_gc_exit(objspace, &lev);

    /* Zombies made just now (non-immediate dfree) run here. */
    VALUE list;
    while ((list = RUBY_ATOMIC_VALUE_EXCHANGE(objspace->finalize.zombies, 0)) != 0) {
        finalize_list(objspace, list);
    }

    st_free_table(objspace->finalize.table);
    objspace->finalize.table = NULL;
    RUBY_ATOMIC_SET(objspace->finalize.running, 0);
}
