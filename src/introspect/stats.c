/*
 * stats.c: what the collector reports: GC.stat, GC.stat_heap, GC.latest_gc_info, GC::Profiler.
 *
 * Key names are the default GC's wherever the concept exists, so that tools written against
 * it (gc_tracer, autotuner, Rails' GC timing) keep working. Derived figures are computed from
 * the counters, never tracked twice, so these identities hold at every call:
 *   heap_live_slots      = total_allocated_objects - total_freed_objects - heap_final_slots
 *   heap_free_slots      = heap_available_slots - heap_live_slots - heap_final_slots
 *   total_allocated_pages = heap_allocated_pages + total_freed_pages
 *     (pages entering a class, fresh or from the pool = pages in the classes + pages that left
 *     one, to the pool or the OS; heap_allocated_pages == heap_eden_pages == the sum over the
 *     classes, as CRuby's test_gc.rb asserts. The pool is heap_empty_pages, apart; pages
 *     returned to the OS are :mosaic_pages_returned.)
 *   count                = major_gc_count + minor_gc_count
 */
#include <stdlib.h>

#include "core/mosaic.h"

/* Every Symbol these answers use, interned once at boot (mosaic_stats_init). Why: gc_tracer
 * and other tools call GC.stat and GC.latest_gc_info from GC event hooks, inside a collection,
 * where interning a new name could allocate a String (and allocation there is a bug). With
 * the table, answering allocates no Ruby object: Symbols are looked up, counts are Fixnums
 * (MOSAIC_SIZE_MAX), and a Hash given by the caller only gets existing keys updated or new
 * st entries (malloc, not Ruby objects). (GC.stat_heap(nil, hash) creates the per-class Hashes
 * the caller's Hash lacks, as the default GC does.) */
#define MOSAIC_STAT_SYMBOLS(X) \
    X(GC_FLAGS) X(GC_INVOKE_TIME) X(GC_IS_MARKED) X(GC_TIME) X(HEAP_TOTAL_OBJECTS) \
    X(HEAP_TOTAL_SIZE) X(HEAP_USE_SIZE) X(MOVED_OBJECTS) X(capi) X(compact_count) X(count) \
    X(force) X(force_incremental_marking_finish_count) X(force_major_gc_count) X(gc_by) \
    X(have_finalizer) X(heap_allocatable_slots) X(heap_allocated_pages) X(heap_available_slots) \
    X(heap_eden_pages) X(heap_eden_slots) X(heap_empty_pages) X(heap_final_slots) \
    X(heap_free_slots) X(heap_live_slots) X(heap_marked_slots) X(immediate_sweep) X(major_by) \
    X(major_gc_count) X(malloc) X(malloc_increase_bytes) X(malloc_increase_bytes_limit) \
    X(marking) X(marking_time) X(method) X(minor_gc_count) X(need_major_by) X(newobj) X(nofree) \
    X(none) X(old_objects) X(old_objects_limit) X(oldgen) X(oldmalloc) \
    X(oldmalloc_increase_bytes) X(oldmalloc_increase_bytes_limit) X(read_barrier_faults) \
    X(remembered_wb_unprotected_objects) X(remembered_wb_unprotected_objects_limit) \
    X(retained_weak_references_count) X(shady) X(slot_size) X(state) X(stress) X(sweeping) \
    X(sweeping_time) X(time) X(total_allocated_objects) X(total_allocated_pages) \
    X(total_freed_objects) X(total_freed_pages) X(total_moved_objects) X(weak_references_count) \
    X(mosaic_heap_target_bytes) X(mosaic_live_bytes) X(mosaic_malloc_live_bytes) \
    X(mosaic_pool_pages) X(mosaic_pages_returned) X(mosaic_malloc_trim_count) X(mosaic_malloc_trim_time) \
    X(mosaic_idle_trim_count) X(mosaic_idle_trim_returned_bytes) X(mosaic_idle_trim_time) \
    X(mosaic_memory_limit_bytes) X(mosaic_memory_limit_set_aside) X(mosaic_memory_used_bytes) \
    X(mosaic_growth_step_bytes) X(mosaic_growth_trigger_bytes) X(mosaic_grown_bytes) X(mosaic_room_scale_percent) \
    X(mosaic_gc_wall_time) X(mosaic_gc_cpu_time) X(mosaic_pause_max_minor_us) X(mosaic_pause_max_major_us) \
    X(mosaic_fragmentation_compact_count) X(mosaic_compact_freed_pages) \
    X(mosaic_nursery_pages) X(mosaic_nursery_evacuations) X(mosaic_nursery_moved_objects) X(mosaic_nursery_stayed_objects) \
    X(mosaic_gc_threads) X(mosaic_parallel_marks) X(mosaic_parallel_mark_offers) X(mosaic_parallel_marked_by_threads) \
    X(mosaic_incremental_marks) X(mosaic_incremental_steps) X(mosaic_incremental_forced_finishes) \
    X(mosaic_incremental_parallel_steps) X(mosaic_incremental_catch_up_steps) X(mosaic_incremental_retraced_objects) X(mosaic_incremental_retrace_queue_max) X(mosaic_race_delays) X(mosaic_peak_mark_stack_bytes) X(mosaic_mark_overflow_rescans) X(mosaic_weak_slots_unregistered) X(mosaic_held_back_slots) X(mosaic_background_sweeps) X(mosaic_background_swept_pages) X(mosaic_background_handed_over_blocks) \
    X(mosaic_background_freed_objects) X(mosaic_background_sweep_cpu_time)

/* Plus, for every field of the memory breakdown (mosaic.h), mosaic_<name>_bytes (now) and
 * mosaic_peak_<name>_bytes (at the GC with the highest RSS). */
enum mosaic_stat_symbol {
#define MOSAIC_SYM_ENUM(name) MOSAIC_SYM_##name,
    MOSAIC_STAT_SYMBOLS(MOSAIC_SYM_ENUM)
#undef MOSAIC_SYM_ENUM
#define MOSAIC_SYM_MEMORY_ENUM(name) MOSAIC_SYM_mosaic_##name##_bytes, MOSAIC_SYM_mosaic_peak_##name##_bytes,
    MOSAIC_MEMORY_FIELDS(MOSAIC_SYM_MEMORY_ENUM)
#undef MOSAIC_SYM_MEMORY_ENUM
    MOSAIC_SYM_COUNT
};
static VALUE stat_symbols[MOSAIC_SYM_COUNT];
#define SYM(name) (stat_symbols[MOSAIC_SYM_##name])

static const char *const stat_names[MOSAIC_SYM_COUNT] = {
#define MOSAIC_SYM_NAME(name) #name,
    MOSAIC_STAT_SYMBOLS(MOSAIC_SYM_NAME)
#undef MOSAIC_SYM_NAME
#define MOSAIC_SYM_MEMORY_NAME(name) "mosaic_" #name "_bytes", "mosaic_peak_" #name "_bytes",
    MOSAIC_MEMORY_FIELDS(MOSAIC_SYM_MEMORY_NAME)
#undef MOSAIC_SYM_MEMORY_NAME
};

void
mosaic_stats_init(void)
{
    /* A loop over a table of names: rb_intern of a literal inlines a cached lookup per call
     * site (7.5 KB of code for these 117 names). */
    for (int i = 0; i < MOSAIC_SYM_COUNT; i++) stat_symbols[i] = ID2SYM(rb_intern(stat_names[i]));
}

/* Sum of one size_t field of struct mosaic_heap over all size classes. */
static size_t
sum_heaps(mosaic_objspace_t *objspace, size_t offset)
{
    size_t n = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) n += *(size_t *)((char *)&objspace->heaps[i] + offset);
    return n;
}
#define SUM_HEAPS(field) sum_heaps(objspace, offsetof(struct mosaic_heap, field))

/* A figure of GC.stat or GC.stat_heap: its key and value. The figures are gathered in a
 * table, then answered in one loop (answer_figures): a store per figure in the code, not an
 * inlined compare, Fixnum check and rb_hash_aset per key (that form, for GC.stat's 84 keys,
 * was 28 KB of the library's 114 KB of code, and code is resident memory in every process:
 * DESIGN.md, "Code size"). So a single key gathers every figure too; what would make
 * that slow is read only for the figures that need it (the slot counts, the background
 * sweeper's totals under its lock, the memory breakdown). */
struct stat_figure {
    enum mosaic_stat_symbol sym;
    size_t value;
};
#define FIGURE(name, v) do { \
    MOSAIC_ASSERT(n < sizeof(figures) / sizeof(figures[0])); \
    figures[n++] = (struct stat_figure){ MOSAIC_SYM_##name, (size_t)(v) }; \
} while (0)

/* The value of `key` among the figures (Qundef when none is it: GC.stat raises ArgumentError),
 * or, without a key, `hash` with every figure stored in it. */
static VALUE
answer_figures(const struct stat_figure *figures, size_t n, VALUE hash, VALUE key)
{
    if (!NIL_P(key)) {
        for (size_t i = 0; i < n; i++) {
            if (stat_symbols[figures[i].sym] == key) return SIZET2NUM(figures[i].value);
        }
        return Qundef;
    }
    for (size_t i = 0; i < n; i++) rb_hash_aset(hash, stat_symbols[figures[i].sym], SIZET2NUM(figures[i].value));
    return hash;
}

/* ============================================================== GC.stat */

VALUE
mosaic_stat(mosaic_objspace_t *objspace, VALUE hash_or_sym)
{
    VALUE hash = Qnil, key = Qnil;
    if (RB_TYPE_P(hash_or_sym, T_HASH)) hash = hash_or_sym;
    else if (SYMBOL_P(hash_or_sym)) key = hash_or_sym;
    else rb_bug("Mosaic: GC.stat given neither a Hash nor a Symbol");

    /* The slot counts, read once so that the identities at the top hold within one answer;
     * skipped when the one key asked for is none of theirs (the caches' counts are a walk over
     * every Ractor's cache). */
    size_t allocated = 0, freed = 0, final = 0, available = 0, live = 0;
    if (NIL_P(key) || key == SYM(heap_available_slots) || key == SYM(heap_live_slots) ||
        key == SYM(heap_free_slots) || key == SYM(heap_final_slots) ||
        key == SYM(total_allocated_objects) || key == SYM(total_freed_objects)) {
        allocated = mosaic_total_allocated(objspace);
        freed = SUM_HEAPS(total_freed_objects);
        final = SUM_HEAPS(final_slots);
        available = mosaic_heap_available_slots(objspace);
        live = allocated - freed - final;
    }
    const struct mosaic_stats *st = &objspace->stats;
    struct stat_figure figures[MOSAIC_SYM_COUNT];
    size_t n = 0;

    FIGURE(count, st->count);
    FIGURE(time, (st->marking_time_ns + st->sweeping_time_ns) / 1000000);
    FIGURE(marking_time, st->marking_time_ns / 1000000);
    FIGURE(sweeping_time, st->sweeping_time_ns / 1000000);
    FIGURE(heap_allocated_pages, mosaic_heap_allocated_pages(objspace));
    FIGURE(heap_empty_pages, objspace->pool.count);
    FIGURE(heap_allocatable_slots, mosaic_add_sat(mosaic_add_sat(SUM_HEAPS(allocatable_slots), objspace->pace.allocatable_bytes / MOSAIC_BASE_SLOT_SIZE),
                                               mosaic_pool_slots(objspace)));
    FIGURE(heap_available_slots, available);
    FIGURE(heap_live_slots, live);
    FIGURE(heap_free_slots, available - live - final);
    FIGURE(heap_final_slots, final);
    FIGURE(heap_marked_slots, st->marked_slots);
    FIGURE(heap_eden_pages, objspace->pages.sorted_count);
    FIGURE(total_allocated_pages, SUM_HEAPS(total_allocated_pages));
    FIGURE(total_freed_pages, SUM_HEAPS(total_freed_pages));
    FIGURE(total_allocated_objects, allocated);
    FIGURE(total_freed_objects, freed);
    /* Atomic counters: the background sweeper's frees and other threads' mallocs change them
     * meanwhile (malloc.c). */
    FIGURE(malloc_increase_bytes, __atomic_load_n(&objspace->malloc.increase, __ATOMIC_RELAXED));
    FIGURE(malloc_increase_bytes_limit, objspace->malloc.limit);
    FIGURE(minor_gc_count, st->minor_gc_count);
    FIGURE(major_gc_count, st->major_gc_count);
    FIGURE(compact_count, st->compact_count);
    FIGURE(read_barrier_faults, 0);
    FIGURE(total_moved_objects, st->total_moved_objects);
    FIGURE(remembered_wb_unprotected_objects, objspace->gen.old_wb_unprotected_objects);
    FIGURE(remembered_wb_unprotected_objects_limit, objspace->gen.old_wb_unprotected_limit);
    FIGURE(old_objects, objspace->gen.old_objects);
    FIGURE(old_objects_limit, objspace->gen.old_objects_limit);
    FIGURE(oldmalloc_increase_bytes, __atomic_load_n(&objspace->malloc.old_increase, __ATOMIC_RELAXED));
    FIGURE(oldmalloc_increase_bytes_limit, objspace->malloc.old_limit);

    /* Mosaic's own figures: each has a row in docs/STATS.md (test/test_stats_doc.rb). */
    FIGURE(mosaic_heap_target_bytes, objspace->pace.heap_target_bytes);
    FIGURE(mosaic_live_bytes, objspace->live_bytes);
    FIGURE(mosaic_malloc_live_bytes, objspace->malloc.live_bytes);
    FIGURE(mosaic_pool_pages, objspace->pool.count);
    FIGURE(mosaic_pages_returned, objspace->pool.pages_returned);
    FIGURE(mosaic_malloc_trim_count, st->malloc_trim_count);
    FIGURE(mosaic_malloc_trim_time, st->malloc_trim_time_ns / 1000000);
    /* The idle trim's figures take its lock: read only when a figure needs them. */
    size_t idle_trims = 0, idle_trim_returned = 0;
    uint64_t idle_trim_ns = 0;
    if (NIL_P(key) || key == SYM(mosaic_idle_trim_count) || key == SYM(mosaic_idle_trim_returned_bytes) ||
        key == SYM(mosaic_idle_trim_time)) {
        mosaic_idle_trim_totals(&idle_trims, &idle_trim_returned, &idle_trim_ns);
    }
    FIGURE(mosaic_idle_trim_count, idle_trims);
    FIGURE(mosaic_idle_trim_returned_bytes, idle_trim_returned);
    FIGURE(mosaic_idle_trim_time, idle_trim_ns / 1000000);
    FIGURE(mosaic_memory_limit_bytes, objspace->params.memory_limit);
    FIGURE(mosaic_memory_limit_set_aside, objspace->pace.limit_set_aside);
    FIGURE(mosaic_memory_used_bytes, mosaic_pace_used_bytes(objspace));
    FIGURE(mosaic_growth_step_bytes, mosaic_pace_growth_step(objspace));
    FIGURE(mosaic_growth_trigger_bytes, objspace->pace.growth_trigger_bytes);
    FIGURE(mosaic_grown_bytes, mosaic_pace_grown_bytes(objspace));
    FIGURE(mosaic_room_scale_percent, (size_t)(objspace->pace.room_scale * 100 + 0.5));
    FIGURE(mosaic_gc_wall_time, st->gc_wall_ns / 1000000);
    /* The background sweeper's totals take its lock: read only when a figure needs them. */
    uint64_t bg_cpu_ns = 0;
    size_t bg_pages = 0;
    if (NIL_P(key) || key == SYM(mosaic_gc_cpu_time) || key == SYM(mosaic_background_swept_pages) ||
        key == SYM(mosaic_background_sweep_cpu_time)) {
        mosaic_bg_sweep_totals(objspace, &bg_cpu_ns, &bg_pages);
    }
    size_t held_back_slots = 0;   /* free slots of pages the sweep holds back for a major (sweep.c) */
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) held_back_slots += objspace->heaps[i].reserve_slots;
    FIGURE(mosaic_gc_cpu_time, (st->gc_cpu_ns + bg_cpu_ns) / 1000000);
    FIGURE(mosaic_pause_max_minor_us, st->pause_max_minor_ns / 1000);
    FIGURE(mosaic_pause_max_major_us, st->pause_max_major_ns / 1000);
    FIGURE(mosaic_fragmentation_compact_count, st->fragmentation_compact_count);
    FIGURE(mosaic_compact_freed_pages, st->compact_freed_pages);
    size_t nursery_pages = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) nursery_pages += objspace->heaps[i].nursery_pages;
    FIGURE(mosaic_nursery_pages, nursery_pages);
    FIGURE(mosaic_nursery_evacuations, objspace->nursery.evacuations);
    FIGURE(mosaic_nursery_moved_objects, objspace->nursery.moved_objects);
    FIGURE(mosaic_nursery_stayed_objects, objspace->nursery.stayed_objects);
    FIGURE(mosaic_gc_threads, objspace->params.gc_threads);
    FIGURE(mosaic_parallel_marks, st->parallel_marks);
    FIGURE(mosaic_parallel_mark_offers, st->parallel_mark_offers);
    FIGURE(mosaic_parallel_marked_by_threads, st->parallel_marked_by_threads);
    FIGURE(mosaic_incremental_marks, st->incremental_marks);
    FIGURE(mosaic_incremental_steps, st->incremental_steps);
    FIGURE(mosaic_incremental_forced_finishes, st->incremental_forced_finishes);
    FIGURE(mosaic_incremental_parallel_steps, st->incremental_parallel_steps);
    FIGURE(mosaic_incremental_catch_up_steps, st->incremental_catch_up_steps);
    FIGURE(mosaic_incremental_retraced_objects, st->incremental_retraced_objects);
    FIGURE(mosaic_incremental_retrace_queue_max, st->incremental_retrace_queue_max);
    FIGURE(mosaic_race_delays, mosaic_race_delays());
    FIGURE(mosaic_peak_mark_stack_bytes, mosaic_peak_mark_stack_bytes());
    FIGURE(mosaic_mark_overflow_rescans, st->mark_overflow_rescans);
    FIGURE(mosaic_weak_slots_unregistered, st->weak_slots_unregistered);
    FIGURE(mosaic_held_back_slots, held_back_slots);
    FIGURE(mosaic_background_sweeps, st->background_sweeps);
    FIGURE(mosaic_background_swept_pages, bg_pages);
    FIGURE(mosaic_background_handed_over_blocks,
           __atomic_load_n(&objspace->threads.free_handoff.deferred_blocks, __ATOMIC_RELAXED));
    FIGURE(mosaic_background_freed_objects, st->background_freed_objects);
    FIGURE(mosaic_background_sweep_cpu_time, bg_cpu_ns / 1000000);
    /* The breakdown: measured now for a single key of it (RSS read, mallinfo2's walk of
     * malloc's bins); for the whole Hash, RSS as of its latest read and glibc's figures
     * estimated from the latest walk, so that GC.stat costs no system call and no walk
     * (memory.c, mosaic_memory_breakdown). */
    {
        bool wanted = !NIL_P(hash);
        for (int i = MOSAIC_SYM_mosaic_rss_bytes; !wanted && i < MOSAIC_SYM_COUNT; i++) wanted = key == stat_symbols[i];
        if (wanted) {
            struct mosaic_memory now;
            mosaic_memory_breakdown(objspace, &now, NIL_P(hash) ? MOSAIC_MEASURE_NOW : MOSAIC_MEASURE_NONE);
            const struct mosaic_memory *peak = &objspace->memory.peak;
#define MOSAIC_SET_MEMORY(name) FIGURE(mosaic_##name##_bytes, now.name); FIGURE(mosaic_peak_##name##_bytes, peak->name);
            MOSAIC_MEMORY_FIELDS(MOSAIC_SET_MEMORY)
#undef MOSAIC_SET_MEMORY
        }
    }

    return answer_figures(figures, n, hash, key);
}

/* ========================================================= GC.stat_heap */

static VALUE
stat_one_heap(mosaic_objspace_t *objspace, int i, VALUE hash, VALUE key)
{
    struct mosaic_heap *heap = &objspace->heaps[i];
    struct stat_figure figures[8];
    size_t n = 0;
    FIGURE(slot_size, heap->slot_size);
    FIGURE(heap_eden_pages, heap->page_count);
    FIGURE(heap_eden_slots, heap->total_slots);
    FIGURE(total_allocated_pages, heap->total_allocated_pages);
    FIGURE(force_major_gc_count, heap->force_major_gc_count);
    FIGURE(force_incremental_marking_finish_count, heap->force_incremental_finishes);
    FIGURE(total_allocated_objects, mosaic_heap_total_allocated(objspace, i));
    FIGURE(total_freed_objects, heap->total_freed_objects);
    return answer_figures(figures, n, hash, key);
}

VALUE
mosaic_stat_heap(mosaic_objspace_t *objspace, VALUE heap_name, VALUE hash_or_sym)
{
    if (NIL_P(heap_name)) {
        if (!RB_TYPE_P(hash_or_sym, T_HASH)) rb_bug("Mosaic: GC.stat_heap(nil) given a non-Hash");
        for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
            VALUE hash = rb_hash_aref(hash_or_sym, INT2FIX(i));
            if (NIL_P(hash)) {
                hash = rb_hash_new();
                rb_hash_aset(hash_or_sym, INT2FIX(i), hash);
            }
            stat_one_heap(objspace, i, hash, Qnil);
        }
        return hash_or_sym;
    }
    if (!FIXNUM_P(heap_name)) rb_bug("Mosaic: heap_name must be nil or an Integer");

    int i = FIX2INT(heap_name);
    if (i < 0 || i >= MOSAIC_HEAP_COUNT) rb_raise(rb_eArgError, "size pool index out of range");
    if (SYMBOL_P(hash_or_sym)) return stat_one_heap(objspace, i, Qnil, hash_or_sym);
    if (RB_TYPE_P(hash_or_sym, T_HASH)) return stat_one_heap(objspace, i, hash_or_sym, Qnil);
    rb_bug("Mosaic: GC.stat_heap given neither a Hash nor a Symbol");
}

/* ==================================================== GC.latest_gc_info */

static VALUE
major_reason_sym(unsigned int flags)
{
    return (flags & MOSAIC_REASON_MAJOR_NOFREE) ? SYM(nofree)
         : (flags & MOSAIC_REASON_MAJOR_OLDGEN) ? SYM(oldgen)
         : (flags & MOSAIC_REASON_MAJOR_SHADY) ? SYM(shady)
         : (flags & MOSAIC_REASON_MAJOR_OLDMALLOC) ? SYM(oldmalloc)
         : (flags & MOSAIC_REASON_MAJOR_FORCE) ? SYM(force) : Qnil;
}

static VALUE
gc_info_decode(mosaic_objspace_t *objspace, VALUE hash_or_key, unsigned int flags, bool current)
{
    VALUE hash = Qnil, key = Qnil;
    if (SYMBOL_P(hash_or_key)) key = hash_or_key;
    else if (RB_TYPE_P(hash_or_key, T_HASH)) hash = hash_or_key;
    else rb_bug("Mosaic: gc_info_decode given neither a Hash nor a Symbol");

#define SET(name, value) do { \
    VALUE s_ = SYM(name); \
    if (key == s_) return (value); \
    if (!NIL_P(hash)) rb_hash_aset(hash, s_, (value)); \
} while (0)

    SET(major_by, major_reason_sym(flags));
    if (current) SET(need_major_by, major_reason_sym(objspace->gen.need_major));
    VALUE gc_by = (flags & MOSAIC_REASON_NEWOBJ) ? SYM(newobj)
                : (flags & MOSAIC_REASON_MALLOC) ? SYM(malloc)
                : (flags & MOSAIC_REASON_METHOD) ? SYM(method)
                : (flags & MOSAIC_REASON_CAPI) ? SYM(capi)
                : (flags & MOSAIC_REASON_STRESS) ? SYM(stress) : Qnil;
    SET(gc_by, gc_by);
    SET(have_finalizer, RBOOL(flags & MOSAIC_REASON_HAVE_FINALIZE));
    SET(immediate_sweep, RBOOL(flags & MOSAIC_REASON_IMMEDIATE_SWEEP));
    if (current) {
        SET(state, objspace->gc_state == MOSAIC_STATE_MARKING ? SYM(marking)
                   : objspace->gc_state == MOSAIC_STATE_SWEEPING ? SYM(sweeping) : SYM(none));
    }
    SET(weak_references_count, SIZET2NUM(objspace->stats.weak_references_count));
    SET(retained_weak_references_count, SIZET2NUM(objspace->stats.retained_weak_references_count));
#undef SET

    if (!NIL_P(key)) return Qundef;
    return hash;
}

VALUE
mosaic_latest_gc_info(mosaic_objspace_t *objspace, VALUE hash_or_key)
{
    return gc_info_decode(objspace, hash_or_key, objspace->stats.latest_reason, true);
}

/* ========================================================= GC::Profiler */

void
mosaic_profile_record(mosaic_objspace_t *objspace, unsigned int reason, uint64_t start_ns, uint64_t end_ns)
{
    struct mosaic_stats *st = &objspace->stats;
    if (st->record_count == st->record_capa) {
        if (st->record_capa >= MOSAIC_PROFILE_MAX) return;
        size_t capa = st->record_capa ? st->record_capa * 2 : 64;
        struct mosaic_profile_record *records = realloc(st->records, capa * sizeof(*records));
        if (!records) return;
        st->records = records;
        st->record_capa = capa;
    }
    struct mosaic_profile_record *r = &st->records[st->record_count++];
    struct timespec boot = st->boot_time;
    uint64_t boot_ns = (uint64_t)boot.tv_sec * 1000000000ull + (uint64_t)boot.tv_nsec;

    size_t live = 0, total = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        live += objspace->heaps[i].marked_slots * objspace->heaps[i].slot_size;
        total += objspace->heaps[i].total_slots * objspace->heaps[i].slot_size;
    }
    r->reason = reason;
    r->gc_time = (end_ns - start_ns) / 1e9;
    r->invoke_time = (start_ns - boot_ns) / 1e9;
    r->heap_use_size = live;
    r->heap_total_size = total;
    r->heap_total_objects = mosaic_heap_available_slots(objspace);
}

static mosaic_objspace_t *
profiler_objspace(void)
{
    return rb_gc_get_objspace();
}

static VALUE
profiler_enabled_p(VALUE self)
{
    return RBOOL(profiler_objspace()->stats.profiler_enabled);
}

static VALUE
profiler_enable(VALUE self)
{
    mosaic_objspace_t *objspace = profiler_objspace();
    mosaic_gc_rest(objspace);
    objspace->stats.profiler_enabled = true;
    return Qnil;
}

static VALUE
profiler_disable(VALUE self)
{
    mosaic_objspace_t *objspace = profiler_objspace();
    mosaic_gc_rest(objspace);
    objspace->stats.profiler_enabled = false;
    return Qnil;
}

static VALUE
profiler_clear(VALUE self)
{
    mosaic_objspace_t *objspace = profiler_objspace();
    free(objspace->stats.records);
    objspace->stats.records = NULL;
    objspace->stats.record_count = objspace->stats.record_capa = 0;
    return Qnil;
}

static VALUE
profiler_raw_data(VALUE self)
{
    mosaic_objspace_t *objspace = profiler_objspace();
    if (!objspace->stats.profiler_enabled) return Qnil;

    VALUE list = rb_ary_new();
    for (size_t i = 0; i < objspace->stats.record_count; i++) {
        const struct mosaic_profile_record *r = &objspace->stats.records[i];
        VALUE prof = rb_hash_new();
        rb_hash_aset(prof, SYM(GC_FLAGS), gc_info_decode(objspace, rb_hash_new(), r->reason, false));
        rb_hash_aset(prof, SYM(GC_TIME), DBL2NUM(r->gc_time));
        rb_hash_aset(prof, SYM(GC_INVOKE_TIME), DBL2NUM(r->invoke_time));
        rb_hash_aset(prof, SYM(HEAP_USE_SIZE), SIZET2NUM(r->heap_use_size));
        rb_hash_aset(prof, SYM(HEAP_TOTAL_SIZE), SIZET2NUM(r->heap_total_size));
        rb_hash_aset(prof, SYM(HEAP_TOTAL_OBJECTS), SIZET2NUM(r->heap_total_objects));
        rb_hash_aset(prof, SYM(MOVED_OBJECTS), SIZET2NUM(0));
        rb_hash_aset(prof, SYM(GC_IS_MARKED), Qtrue);
        rb_ary_push(list, prof);
    }
    return list;
}

static VALUE
profiler_result(VALUE self)
{
    mosaic_objspace_t *objspace = profiler_objspace();
    VALUE out = rb_str_new(0, 0);
    size_t count = objspace->stats.record_count;
    if (!objspace->stats.profiler_enabled || count == 0) return out;

    rb_str_catf(out, "GC %"PRIuSIZE" invokes.\n", objspace->stats.count);
    rb_str_cat_cstr(out, "Index    Invoke Time(sec)       Use Size(byte)     Total Size(byte)         Total Object                    GC Time(ms)\n");
    for (size_t i = 0; i < count; i++) {
        const struct mosaic_profile_record *r = &objspace->stats.records[i];
        rb_str_catf(out, "%5"PRIuSIZE" %19.3f %20"PRIuSIZE" %20"PRIuSIZE" %20"PRIuSIZE" %30.20f\n",
                    i + 1, r->invoke_time, r->heap_use_size, r->heap_total_size,
                    r->heap_total_objects, r->gc_time * 1000);
    }
    return out;
}

static VALUE
profiler_report(int argc, VALUE *argv, VALUE self)
{
    VALUE out = rb_check_arity(argc, 0, 1) ? argv[0] : rb_stdout;
    rb_io_write(out, profiler_result(self));
    return Qnil;
}

static VALUE
profiler_total_time(VALUE self)
{
    mosaic_objspace_t *objspace = profiler_objspace();
    double total = 0;
    if (objspace->stats.profiler_enabled) {
        for (size_t i = 0; i < objspace->stats.record_count; i++) total += objspace->stats.records[i].gc_time;
    }
    return DBL2NUM(total);
}

void
mosaic_define_profiler(void)
{
    VALUE profiler = rb_define_module_under(rb_mGC, "Profiler");
    rb_define_singleton_method(profiler, "enabled?", profiler_enabled_p, 0);
    rb_define_singleton_method(profiler, "enable", profiler_enable, 0);
    rb_define_singleton_method(profiler, "disable", profiler_disable, 0);
    rb_define_singleton_method(profiler, "clear", profiler_clear, 0);
    rb_define_singleton_method(profiler, "raw_data", profiler_raw_data, 0);
    rb_define_singleton_method(profiler, "result", profiler_result, 0);
    rb_define_singleton_method(profiler, "report", profiler_report, -1);
    rb_define_singleton_method(profiler, "total_time", profiler_total_time, 0);
}
