/*
 * malloc.c: accounting of the memory CRuby mallocs through the GC (xmalloc and friends).
 *
 * Owns: rb_gc_impl_malloc/calloc/realloc/free/adjust_memory_usage's logic: the system
 * allocator does the work; every byte is added to (or taken from) malloc_increase (since the
 * latest GC; a sweep's frees are not taken from it: mosaic_malloc_decrease), oldmalloc_increase
 * (since the latest major GC) and malloc_bytes (outstanding: what Ruby holds through these
 * functions now); crossing malloc_limit triggers a collection,
 * crossing oldmalloc_limit makes the next one major (pace.c).
 *
 * Sizes are the allocator's usable sizes (malloc_usable_size), as in the default GC, not the
 * caller's hint: a free whose caller does not know the size (plain xfree) is still taken off,
 * so malloc_bytes is exact, not an ever-growing over-estimate that would trigger GCs for
 * memory already given back. (Under jemalloc via LD_PRELOAD, malloc_usable_size is jemalloc's.)
 *
 * Invariants:
 *  - These functions may run without the GVL, on any thread: malloc_increase is updated
 *    atomically, and a collection is only run here by a Ruby thread holding the GVL outside a
 *    collection; otherwise the request is left in malloc_gc_pending for the next allocation.
 *  - Only a fresh allocation (malloc, calloc) may start a collection. A successful realloc has
 *    already freed the old block while its owner still points to it (e.g. an Array's buffer
 *    until ary_resize_capa returns), so marking then would read freed memory; realloc and
 *    adjust_memory_usage only flag malloc_gc_pending. A *failed* realloc leaves the old block
 *    valid, so it may collect and retry.
 *  - When malloc fails, one full collection is tried before giving up; giving up returns NULL
 *    and CRuby raises NoMemoryError.
 *  - Under GC.stress, malloc, calloc and realloc collect *before* calling the allocator.
 *  - While GC is disabled no malloc GC is flagged.
 */
#include <stdlib.h>
#include <errno.h>
#include <malloc.h>

#include "core/mosaic.h"

/* *counter -= size, stopping at 0 (frees may be reported for bytes counted before a reset). */
static void
atomic_sub_to_zero(size_t *counter, size_t size)
{
    size_t cur = __atomic_load_n(counter, __ATOMIC_RELAXED);
    for (;;) {
        size_t next = cur > size ? cur - size : 0;
        if (__atomic_compare_exchange_n(counter, &cur, next, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
    }
}

/* While this thread sweeps a page or runs a zombie's dfree, the bytes given back meanwhile
 * (sweep.c, finalize.c): the malloc'd memory dead objects held, for the pacer, whether freed
 * (xfree), shrunk, or reported by a dfree (rb_gc_adjust_memory_usage). Per thread: the
 * background sweeper and the mutator sweep at the same time, and other threads free without
 * the GVL. The end of a tally adds it to the cycle's malloc.freed_by_sweep. */
static __thread bool tallying;
static __thread size_t tally_bytes;

void
mosaic_malloc_tally_begin(void)
{
    tallying = true;
    tally_bytes = 0;
}

void
mosaic_malloc_tally_end(mosaic_objspace_t *objspace)
{
    tallying = false;
    __atomic_add_fetch(&objspace->malloc.freed_by_sweep, tally_bytes, __ATOMIC_RELAXED);
}

void
mosaic_malloc_decrease(mosaic_objspace_t *objspace, size_t size)
{
    if (!objspace || size == 0) return;
    /* What a sweep frees was garbage of the GC before: it leaves malloc_increase alone, which
     * measures what was malloc'd since, the garbage the next GC looks for. Netted against it,
     * a lazy sweep's frees hid the cycle's new mallocs: each cycle began with the last one's
     * garbage still unswept, and malloc held about three limits of it (a heap below
     * MOSAIC_BACKGROUND_SWEEP_MIN_PAGES mallocing 4-64 KB strings: 89 MiB at every GC against a
     * limit of 32, peak RSS 1.47 of the default GC's). */
    if (tallying) tally_bytes += size;
    else atomic_sub_to_zero(&objspace->malloc.increase, size);
    atomic_sub_to_zero(&objspace->malloc.old_increase, size);
    atomic_sub_to_zero(&objspace->malloc.bytes, size);
}

static bool
can_collect_here(mosaic_objspace_t *objspace)
{
    /* No lock here: other Ractors change dont_gc (GC.enable, with no lock) and sorted_count
     * (under the VM lock) meanwhile. */
    return !objspace->during_gc && !mosaic_dont_gc(objspace) &&
        __atomic_load_n(&objspace->pages.sorted_count, __ATOMIC_RELAXED) > 0 &&
        ruby_native_thread_p() && ruby_thread_has_gvl_p();
}

void
mosaic_malloc_increase(mosaic_objspace_t *objspace, size_t size, bool may_collect)
{
    if (!objspace || size == 0) return;
    size_t now = __atomic_add_fetch(&objspace->malloc.increase, size, __ATOMIC_RELAXED);
    __atomic_add_fetch(&objspace->malloc.old_increase, size, __ATOMIC_RELAXED);
    __atomic_add_fetch(&objspace->malloc.bytes, size, __ATOMIC_RELAXED);
    /* While GC is disabled nothing is flagged: a pending flag would send every allocation to
     * the slow path for nothing. The increase stays counted; the first malloc after
     * GC.enable crosses the limit again. */
    /* grown_since_gc atomically: another Ractor may be adding a page under the VM lock (alloc.c). */
    size_t grown = __atomic_load_n(&objspace->pace.grown_since_gc, __ATOMIC_RELAXED);
    if ((now > objspace->malloc.limit || mosaic_add_sat(now, grown) > objspace->pace.growth_trigger_bytes) &&
        !objspace->during_gc && !mosaic_dont_gc(objspace)) {
        if (may_collect && can_collect_here(objspace)) {
            mosaic_collect(objspace, MOSAIC_REASON_MALLOC | MOSAIC_REASON_INSIDE_MALLOC);
        }
        else {
            /* Any thread, no lock: read by every Ractor's allocation (alloc.c). */
            __atomic_store_n(&objspace->malloc_gc_pending, true, __ATOMIC_RELAXED);
        }
    }
}

/* A failed allocation: one full collection (old garbage may hold the big buffers) before
 * giving up, major_by :force as in the default GC. */
static bool
collect_for_retry(mosaic_objspace_t *objspace)
{
    if (!objspace || !can_collect_here(objspace)) return false;
    return mosaic_collect(objspace, MOSAIC_REASON_MALLOC | MOSAIC_REASON_INSIDE_MALLOC | MOSAIC_REASON_FULL_MARK |
                          MOSAIC_REASON_MAJOR_FORCE | MOSAIC_REASON_IMMEDIATE_SWEEP);
}

/* GC.stress collects before every malloc, calloc and realloc too, as the default GC does.
 * Before, not after: until the call returns, the old block of a realloc is still valid. */
static inline void
collect_for_stress(mosaic_objspace_t *objspace)
{
    if (RB_LIKELY(!objspace || !objspace->gc_stress)) return;
    if (!can_collect_here(objspace)) return;
    mosaic_collect(objspace, MOSAIC_REASON_STRESS | MOSAIC_REASON_MALLOC | MOSAIC_REASON_INSIDE_MALLOC |
                   MOSAIC_REASON_IMMEDIATE_SWEEP);
}

/* A chunk of `size` usable bytes went back to malloc: the bytes of whole pages it holds, all
 * that malloc_trim can return from it, for the after-major trim rule (memory.c). A chunk of
 * S bytes at a random offset spans S/4096 - 1 whole pages on average, none below 4 KiB (the
 * bytes of neighbours freed together and merged by glibc are not seen here). Chunks of 128
 * KiB or more are left out: at glibc's default threshold they were mmapped on their own and
 * free() unmapped them at once. An approximate count: a relaxed atomic, any thread. */
static void
count_freed_pages(mosaic_objspace_t *objspace, size_t size)
{
    if (objspace && size > 4096 && size < ((size_t)128 << 10)) {
        __atomic_fetch_add(&objspace->memory.libc_freed_page_bytes, size - 4096, __ATOMIC_RELAXED);
    }
}

void *
rb_gc_impl_malloc(void *objspace_ptr, size_t size)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    if (objspace) mosaic_free_handoff_drain_some(objspace);
    collect_for_stress(objspace);
    void *mem = malloc(size ? size : 1);
    if (RB_UNLIKELY(!mem) && collect_for_retry(objspace)) mem = malloc(size ? size : 1);
    if (!mem) return NULL;
    mosaic_malloc_increase(objspace, malloc_usable_size(mem), true);
    return mem;
}

void *
rb_gc_impl_calloc(void *objspace_ptr, size_t size)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    if (objspace) mosaic_free_handoff_drain_some(objspace);
    collect_for_stress(objspace);
    void *mem = calloc(1, size ? size : 1);
    if (RB_UNLIKELY(!mem) && collect_for_retry(objspace)) mem = calloc(1, size ? size : 1);
    if (!mem) return NULL;
    mosaic_malloc_increase(objspace, malloc_usable_size(mem), true);
    return mem;
}

void *
rb_gc_impl_realloc(void *objspace_ptr, void *ptr, size_t new_size, size_t old_size)
{
    mosaic_objspace_t *objspace = objspace_ptr;
    if (!ptr) return rb_gc_impl_malloc(objspace_ptr, new_size);

    collect_for_stress(objspace);
    old_size = malloc_usable_size(ptr);
    /* Whether the chunk moved (the old one was then freed), compared as a number taken
     * before the call: ptr itself is indeterminate once realloc has freed it. The empty asm
     * keeps the compiler from computing the number after the call (-Wuse-after-free). */
    uintptr_t old_address = (uintptr_t)ptr;
    __asm__ volatile("" : "+r"(old_address));
    void *mem = realloc(ptr, new_size ? new_size : 1);
    if (RB_UNLIKELY(!mem) && collect_for_retry(objspace)) mem = realloc(ptr, new_size ? new_size : 1);
    if (!mem) return NULL;
    new_size = malloc_usable_size(mem);
    if ((uintptr_t)mem != old_address) count_freed_pages(objspace, old_size);
    if (new_size > old_size) mosaic_malloc_increase(objspace, new_size - old_size, false);
    else mosaic_malloc_decrease(objspace, old_size - new_size);
    return mem;
}

void
rb_gc_impl_free(void *objspace_ptr, void *ptr, size_t old_size)
{
    if (!ptr) return;
    old_size = malloc_usable_size(ptr);
    /* On the background sweeper, a large block waits for the mutator (free_handoff.c). */
    if (!objspace_ptr || !mosaic_free_handoff_defer(objspace_ptr, ptr, old_size)) free(ptr);
    mosaic_malloc_decrease(objspace_ptr, old_size);
    count_freed_pages(objspace_ptr, old_size);
}

void
rb_gc_impl_adjust_memory_usage(void *objspace_ptr, ssize_t diff)
{
    if (diff > 0) mosaic_malloc_increase(objspace_ptr, (size_t)diff, false);
    else if (diff < 0) mosaic_malloc_decrease(objspace_ptr, (size_t)-diff);
}
