/*
 * api.c: the Modular GC entry points (gc/gc_impl.h), as thin glue.
 *
 * Each rb_gc_impl_* function here forwards to the module that owns the logic (see the file
 * list in docs/DESIGN.md). The only logic kept here is boot order and the Ruby-visible
 * constants CRuby's tests read.
 */
#include <stdlib.h>

#include "core/mosaic.h"

/* ================================================================ boot */

void *
rb_gc_impl_objspace_alloc(void)
{
    mosaic_objspace_t *objspace = calloc(1, sizeof(mosaic_objspace_t));
    if (!objspace) {
        fprintf(stderr, "[mosaic] cannot allocate the object space\n");
        abort();
    }
    return objspace;
}

void
rb_gc_impl_objspace_init(void *objspace_ptr)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    objspace->measure_time = true;
    objspace->gc_stress_mode = Qfalse;
    clock_gettime(CLOCK_MONOTONIC, &objspace->stats.boot_time);

    mosaic_size_classes_from_env();
    mosaic_params_defaults(&objspace->params);
    mosaic_heap_init(objspace);
    mosaic_pace_init(objspace);
    mosaic_objid_init(objspace);
    mosaic_finalize_init(objspace);
}

void
rb_gc_impl_objspace_free(void *objspace_ptr)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    mosaic_bg_sweep_free(objspace);
    mosaic_idle_trim_free();
    mosaic_free_handoff_free(objspace);
    mosaic_heap_free_all(objspace);
    mosaic_mark_workers_stop(objspace);
    mosaic_mark_stack_free(&objspace->mark.main_marker.stack);
    mosaic_ptr_vec_free(&objspace->mark.weak_refs);
    mosaic_weak_index_reset(&objspace->mark.weak_index);
    if (objspace->finalize.table) st_free_table(objspace->finalize.table);
    st_free_table(objspace->objid.obj_to_id);
    st_free_table(objspace->objid.id_to_obj);
    free(objspace->stats.records);
    free(objspace);
}

void *
rb_gc_impl_ractor_cache_alloc(void *objspace_ptr, void *ractor)
{
    return mosaic_cache_new(objspace_ptr);
}

void
rb_gc_impl_ractor_cache_free(void *objspace_ptr, void *cache)
{
    mosaic_cache_free(objspace_ptr, cache);
}

void
rb_gc_impl_set_params(void *objspace_ptr)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    mosaic_params_from_env(&objspace->params);
    mosaic_pace_init(objspace);
    mosaic_bg_sweep_init(objspace);
    mosaic_idle_trim_init(objspace);
}

void
rb_gc_impl_init(void)
{
    VALUE constants = rb_hash_new();
    rb_hash_aset(constants, ID2SYM(rb_intern("DEBUG")), RBOOL(MOSAIC_CHECK));
    rb_hash_aset(constants, ID2SYM(rb_intern("BASE_SLOT_SIZE")), SIZET2NUM(mosaic_heap_sizes[0]));
    rb_hash_aset(constants, ID2SYM(rb_intern("RVALUE_OVERHEAD")), SIZET2NUM(0));
    rb_hash_aset(constants, ID2SYM(rb_intern("HEAP_PAGE_OBJ_LIMIT")),
                 SIZET2NUM((MOSAIC_PAGE_SIZE - MOSAIC_PAGE_HEADER_SIZE) / MOSAIC_BASE_SLOT_SIZE));
    rb_hash_aset(constants, ID2SYM(rb_intern("HEAP_PAGE_BITMAP_SIZE")), SIZET2NUM(sizeof(mosaic_bits_t) * MOSAIC_BITMAP_WORDS));
    rb_hash_aset(constants, ID2SYM(rb_intern("HEAP_PAGE_SIZE")), SIZET2NUM(MOSAIC_PAGE_SIZE));
    rb_hash_aset(constants, ID2SYM(rb_intern("HEAP_COUNT")), LONG2FIX(MOSAIC_HEAP_COUNT));
    rb_hash_aset(constants, ID2SYM(rb_intern("SIZE_POOL_COUNT")), LONG2FIX(MOSAIC_HEAP_COUNT));
    rb_hash_aset(constants, ID2SYM(rb_intern("RVARGC_MAX_ALLOCATE_SIZE")),
                 SIZET2NUM(mosaic_heap_sizes[MOSAIC_HEAP_COUNT - 1]));
    rb_hash_aset(constants, ID2SYM(rb_intern("RVALUE_OLD_AGE")), LONG2FIX(MOSAIC_OLD_AGE));
    OBJ_FREEZE(constants);
    rb_define_const(rb_mGC, "INTERNAL_CONSTANTS", constants);

    VALUE opts = rb_ary_new();
    rb_ary_push(opts, rb_interned_str_cstr("MOSAIC"));
    /* Generational (minor GCs, write barriers); MOSAIC_GENERATIONAL=0 turns it off at run time. */
    rb_ary_push(opts, rb_interned_str_cstr("USE_RGENGC"));
    /* Old malloc is estimated (pace.c: what survivors hold), and GC.compact works (compact.c):
     * the default GC's names for both, which tools read. */
    rb_ary_push(opts, rb_interned_str_cstr("RGENGC_ESTIMATE_OLDMALLOC"));
    rb_ary_push(opts, rb_interned_str_cstr("GC_ENABLE_LAZY_SWEEP"));
    rb_ary_push(opts, rb_interned_str_cstr("GC_COMPACTION_SUPPORTED"));
    if (MOSAIC_CHECK) rb_ary_push(opts, rb_interned_str_cstr("MOSAIC_CHECK"));
#ifdef __SANITIZE_ADDRESS__
    /* make ASAN=1: tests that ask malloc for terabytes, or time the collector, know it. */
    rb_ary_push(opts, rb_interned_str_cstr("MOSAIC_ASAN"));
#endif
#ifdef __SANITIZE_THREAD__
    /* make TSAN=1: the tsan gate checks it runs this build; tests that time the collector know it. */
    rb_ary_push(opts, rb_interned_str_cstr("MOSAIC_TSAN"));
#endif
    OBJ_FREEZE(opts);
    rb_define_const(rb_mGC, "OPTS", opts);

    mosaic_stats_init();
    mosaic_define_verify();
    mosaic_define_profiler();

    mosaic_define_compact();
}

size_t *
rb_gc_impl_heap_sizes(void *objspace_ptr)
{
    return mosaic_heap_sizes;
}

/* ============================================================ shutdown */

void
rb_gc_impl_shutdown_free_objects(void *objspace_ptr)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    mosaic_bg_sweep_free(objspace);
    mosaic_idle_trim_free();
    for (size_t p = 0; p < objspace->pages.sorted_count; p++) {
        struct mosaic_page *page = objspace->pages.sorted[p];
        for (size_t i = 0; i < page->total_slots; i++) {
            VALUE obj = (VALUE)(page->start + i * page->slot_size);
            if (RB_BUILTIN_TYPE(obj) != T_NONE && RB_BUILTIN_TYPE(obj) != T_ZOMBIE) {
                rb_gc_obj_free_vm_weak_references(obj);
                if (rb_gc_obj_free(objspace, obj)) RBASIC(obj)->flags = 0;
            }
        }
    }
}

/* ================================================================== GC */

void
rb_gc_impl_start(void *objspace_ptr, bool full_mark, bool immediate_mark, bool immediate_sweep, bool compact)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    unsigned int reason = MOSAIC_REASON_METHOD;
    if (full_mark || compact) reason |= MOSAIC_REASON_FULL_MARK | MOSAIC_REASON_MAJOR_FORCE;
    if (immediate_sweep || compact) reason |= MOSAIC_REASON_IMMEDIATE_SWEEP;
    if (compact) reason |= MOSAIC_REASON_COMPACT;
    if (!immediate_mark && full_mark && !compact) reason |= MOSAIC_REASON_STEPS;
    mosaic_collect(objspace, reason);
    mosaic_finalize_deferred(objspace);
}

bool
rb_gc_impl_during_gc_p(void *objspace_ptr)
{
    return ((mosaic_objspace_t *)objspace_ptr)->during_gc;
}

static void
prepare_heap_i(VALUE obj, void *data)
{
    switch (RB_BUILTIN_TYPE(obj)) {
      case T_NONE:
      case T_ZOMBIE:
        return;
      default:
        rb_gc_prepare_heap_process_object(obj);
    }
}

void
rb_gc_impl_prepare_heap(void *objspace_ptr)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    /* Warmup gives memory back but does not change how far the heap may grow without a
     * collection: the budgets its full GC resets are restored (pace.c sets them afresh at
     * every GC), and released pages are credited to them (page.c). */
    size_t own[MOSAIC_HEAP_MAX], shared = objspace->pace.allocatable_bytes;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) own[i] = objspace->heaps[i].allocatable_slots;
    /* Compacting too (as the default GC's warmup does): the forked children share fewer,
     * fuller pages. */
    rb_gc_impl_start(objspace, true, true, true, true);
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        if (objspace->heaps[i].allocatable_slots < own[i]) objspace->heaps[i].allocatable_slots = own[i];
    }
    if (objspace->pace.allocatable_bytes < shared) objspace->pace.allocatable_bytes = shared;
    mosaic_each_object(objspace, prepare_heap_i, NULL);

    /* Process.warmup: what survived is long-lived: make it old, so the forked children's
     * minor GCs neither trace it nor write to its pages; give empty pages back, and malloc's
     * free memory (memory.c). */
    /* The barrier, not just the lock: other Ractors allocate from their caches without the
     * lock, so only stopping them makes it safe to take their caches' slots back. */
    unsigned int lev = rb_gc_vm_lock();
    rb_gc_vm_barrier();
    mosaic_caches_clear(objspace);
    mosaic_promote_all(objspace);
    mosaic_heap_release_empty_pages(objspace);
    mosaic_memory_trim_now(objspace);
    rb_gc_vm_unlock(lev);
}

void
rb_gc_impl_gc_enable(void *objspace_ptr)
{
    mosaic_set_dont_gc((mosaic_objspace_t *)objspace_ptr, false);
}

void
rb_gc_impl_gc_disable(void *objspace_ptr, bool finish_current_gc)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    if (finish_current_gc) mosaic_gc_rest(objspace);
    mosaic_set_dont_gc(objspace, true);
}

bool
rb_gc_impl_gc_enabled_p(void *objspace_ptr)
{
    return !mosaic_dont_gc((mosaic_objspace_t *)objspace_ptr);
}

void
rb_gc_impl_stress_set(void *objspace_ptr, VALUE flag)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    objspace->gc_stress = RTEST(flag);
    objspace->gc_stress_mode = flag;
}

VALUE
rb_gc_impl_stress_get(void *objspace_ptr)
{
    return ((mosaic_objspace_t *)objspace_ptr)->gc_stress_mode;
}

VALUE
rb_gc_impl_config_get(void *objspace_ptr)
{
    return mosaic_config_get(objspace_ptr);
}

void
rb_gc_impl_config_set(void *objspace_ptr, VALUE hash)
{
    mosaic_config_set(objspace_ptr, hash);
}

/* ========================================================== allocation */

VALUE
rb_gc_impl_new_obj(void *objspace_ptr, void *cache_ptr, VALUE klass, VALUE flags, VALUE v1, VALUE v2, VALUE v3,
                   bool wb_protected, size_t alloc_size)
{
    return mosaic_new_obj(objspace_ptr, cache_ptr, klass, flags, v1, v2, v3, wb_protected, alloc_size);
}

size_t
rb_gc_impl_obj_slot_size(VALUE obj)
{
    return mosaic_page_of(obj)->slot_size;
}

size_t
rb_gc_impl_heap_id_for_size(void *objspace_ptr, size_t size)
{
    return mosaic_heap_index_for_size(size);
}

bool
rb_gc_impl_size_allocatable_p(size_t size)
{
    return size <= mosaic_heap_sizes[MOSAIC_HEAP_COUNT - 1];
}

/* ============================================================= marking */

void
rb_gc_impl_mark(void *objspace_ptr, VALUE obj)
{
    mosaic_mark(objspace_ptr, obj, false);
}

void
rb_gc_impl_mark_and_move(void *objspace_ptr, VALUE *ptr)
{
    mosaic_mark_and_move(objspace_ptr, ptr);
}

void
rb_gc_impl_mark_and_pin(void *objspace_ptr, VALUE obj)
{
    mosaic_mark(objspace_ptr, obj, true);
}

void
rb_gc_impl_mark_maybe(void *objspace_ptr, VALUE obj)
{
    mosaic_mark_maybe(objspace_ptr, obj);
}

void
rb_gc_impl_mark_weak(void *objspace_ptr, VALUE *ptr)
{
    mosaic_mark_weak(objspace_ptr, ptr);
}

void
rb_gc_impl_remove_weak(void *objspace_ptr, VALUE parent_obj, VALUE *ptr)
{
    mosaic_remove_weak(objspace_ptr, parent_obj, ptr);
}

/* ========================================================== compaction */

bool
rb_gc_impl_object_moved_p(void *objspace_ptr, VALUE obj)
{
    return mosaic_moved_p(obj);
}

VALUE
rb_gc_impl_location(void *objspace_ptr, VALUE value)
{
    return mosaic_location(objspace_ptr, value);
}

/* ====================================================== write barriers */

void
rb_gc_impl_writebarrier(void *objspace_ptr, VALUE a, VALUE b)
{
    mosaic_writebarrier(objspace_ptr, a, b);
}

void
rb_gc_impl_writebarrier_unprotect(void *objspace_ptr, VALUE obj)
{
    mosaic_writebarrier_unprotect(objspace_ptr, obj);
}

void
rb_gc_impl_writebarrier_remember(void *objspace_ptr, VALUE obj)
{
    mosaic_writebarrier_remember(objspace_ptr, obj);
}

/* ========================================================= heap walking */

void
rb_gc_impl_each_objects(void *objspace_ptr, int (*callback)(void *, void *, size_t, void *), void *data)
{
    mosaic_each_objects(objspace_ptr, callback, data);
}

void
rb_gc_impl_each_object(void *objspace_ptr, void (*func)(VALUE obj, void *data), void *data)
{
    mosaic_each_object(objspace_ptr, func, data);
}

/* =========================================================== object ids */

VALUE
rb_gc_impl_object_id(void *objspace_ptr, VALUE obj)
{
    return mosaic_object_id(objspace_ptr, obj);
}

VALUE
rb_gc_impl_object_id_to_ref(void *objspace_ptr, VALUE object_id)
{
    return mosaic_object_id_to_ref(objspace_ptr, object_id);
}

/* ============================================================== forking */

void
rb_gc_impl_before_fork(void *objspace_ptr)
{
    mosaic_race_point();   /* the fork stop: the sweeper may be mid-page, markers idle or not */
    /* A major GC marking in steps ends first: the child starts from a complete cycle (its
     * after_fork makes what it inherited old, which a half-done mark would not survive). */
    mosaic_incremental_finish(objspace_ptr);
    /* The marking threads stop here and start again at the next parallel mark, in the
     * parent and in the child (mark_workers.c): a fork copies only the forking thread. */
    mosaic_mark_workers_stop(objspace_ptr);
    /* So does the background sweeper (its pthread_atfork handler covers forks from C too). */
    mosaic_bg_sweep_stop(objspace_ptr);
}

void
rb_gc_impl_after_fork(void *objspace_ptr, rb_pid_t pid)
{
    /* In the child only the forking thread survives. Until rb_thread_atfork (which runs
     * after this) makes its Ractor the only one, the other Ractors' caches are still listed:
     * they hand back their free slots and allocation counts now, or those slots would stay
     * off every freelist, uncounted, for the child's whole life. */
    if (pid == 0) {
        mosaic_caches_clear(objspace_ptr);
        /* No GC thread in the child's first collection (mark_workers.c). */
        mosaic_gc_threads_after_fork(objspace_ptr);
        /* Then what the child inherited becomes old (generation.c). */
        mosaic_generation_after_fork(objspace_ptr);
    }
    else {
        /* The parent's background sweeper stopped for the fork: it goes on (bg_sweep.c). */
        mosaic_bg_sweep_resume(objspace_ptr);
    }
}

/* =========================================================== statistics */

void
rb_gc_impl_set_measure_total_time(void *objspace_ptr, VALUE flag)
{
    /* Atomic: the background sweeper reads it as it ends a cycle (bg_sweep.c). */
    __atomic_store_n(&((mosaic_objspace_t *)objspace_ptr)->measure_time, RTEST(flag), __ATOMIC_RELAXED);
}

bool
rb_gc_impl_get_measure_total_time(void *objspace_ptr)
{
    return ((mosaic_objspace_t *)objspace_ptr)->measure_time;
}

unsigned long long
rb_gc_impl_get_total_time(void *objspace_ptr)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    return objspace->stats.marking_time_ns + objspace->stats.sweeping_time_ns;
}

size_t
rb_gc_impl_gc_count(void *objspace_ptr)
{
    return ((mosaic_objspace_t *)objspace_ptr)->stats.count;
}

VALUE
rb_gc_impl_latest_gc_info(void *objspace_ptr, VALUE key)
{
    return mosaic_latest_gc_info(objspace_ptr, key);
}

VALUE
rb_gc_impl_stat(void *objspace_ptr, VALUE hash_or_sym)
{
    return mosaic_stat(objspace_ptr, hash_or_sym);
}

VALUE
rb_gc_impl_stat_heap(void *objspace_ptr, VALUE heap_name, VALUE hash_or_sym)
{
    return mosaic_stat_heap(objspace_ptr, heap_name, hash_or_sym);
}

/* The name GC.config[:implementation] reports (Ruby allows at most 20 characters). `make variant
 * NAME=x` builds the library as librubygc.x.so reporting "x", so that two builds of Mosaic run
 * side by side in one Ruby and each run shows which one it was. */
#ifndef MOSAIC_GC_NAME
# define MOSAIC_GC_NAME "mosaic"
#endif
const char *
rb_gc_impl_active_gc_name(void)
{
    return MOSAIC_GC_NAME;
}

/* ======================================================== miscellaneous */

size_t
rb_gc_impl_obj_flags(void *objspace_ptr, VALUE obj, ID *flags, size_t max)
{
    size_t n = 0;
    static ID id_marked, id_pinned, id_wb_protected, id_old, id_remembered;
    if (!id_marked) {
        id_marked = rb_intern("marked");
        id_pinned = rb_intern("pinned");
        id_wb_protected = rb_intern("wb_protected");
        id_old = rb_intern("old");
        id_remembered = rb_intern("remembered");
    }
    struct mosaic_page *page = mosaic_page_of(obj);
    size_t bit = mosaic_bit_index(obj);
    if (!mosaic_bit_test(page->wb_unprotected_bits, bit) && n < max) flags[n++] = id_wb_protected;
    if (mosaic_bit_test(page->old_bits, bit) && n < max) flags[n++] = id_old;
    if (mosaic_bit_test(page->remembered_bits, bit) && n < max) flags[n++] = id_remembered;
    if (mosaic_bit_test(page->mark_bits, bit) && n < max) flags[n++] = id_marked;
    if (mosaic_bit_test(page->pinned_bits, bit) && n < max) flags[n++] = id_pinned;
    return n;
}

bool
rb_gc_impl_pointer_to_heap_p(void *objspace_ptr, const void *ptr)
{
    return mosaic_pointer_to_slot_p(objspace_ptr, ptr);
}

/* An unmarked object on a page not swept yet is decided by the page's metadata alone, before
 * its header is read: the background sweeper may be freeing it at this moment (writing its
 * flags, bg_sweep.c), and reads nothing else the sweeper writes. ThreadSanitizer reported the
 * header read against free_one's store when the header came first. */
bool
rb_gc_impl_garbage_object_p(void *objspace_ptr, VALUE obj)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    if (objspace->lazy_sweeping) {
        struct mosaic_page *page = mosaic_page_of(obj);
        if (page->cycle->before_sweep && !mosaic_bit_test(page->mark_bits, mosaic_bit_index(obj))) return true;
    }
    switch (RB_BUILTIN_TYPE(obj)) {
      case T_NONE:
      case T_MOVED:
      case T_ZOMBIE:
        return true;
      default:
        return false;
    }
}

void
rb_gc_impl_set_event_hook(void *objspace_ptr, const rb_event_flag_t event)
{
    /* While frees are reported, the background sweeper (which does not report them) stays
     * stopped: the mutator sweeps. */
    mosaic_bg_sweep_hooks_changed(objspace_ptr, event);
    ((mosaic_objspace_t *)objspace_ptr)->hook_events = event & RUBY_INTERNAL_EVENT_OBJSPACE_MASK;
    mosaic_bg_sweep_resume(objspace_ptr);
}

void
rb_gc_impl_copy_attributes(void *objspace_ptr, VALUE dest, VALUE obj)
{
    struct mosaic_page *page = mosaic_page_of(obj);
    if (mosaic_bit_test(page->wb_unprotected_bits, mosaic_bit_index(obj))) {
        rb_gc_impl_writebarrier_unprotect(objspace_ptr, dest);
    }
    rb_gc_impl_copy_finalizer(objspace_ptr, dest, obj);
}
