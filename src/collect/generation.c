/*
 * generation.c: generations, ages and write barriers.
 *
 * Model (docs/DESIGN.md, "Generations and write barriers"): every slot has a 2-bit age and an old bit in its page's
 * side bitmaps. A GC that marks a young object ages it; at MOSAIC_OLD_AGE it becomes old.
 * A minor GC starts with mark = old (old objects count as reached and are not traced) and
 * traces from the roots and the remembered set; a major GC clears the marks and traces all.
 *
 * Invariants:
 *  - Remembered-set invariant (what makes a minor GC correct): between collections, an old
 *    object that refers to a young one is remembered, or is write-barrier-unprotected (old
 *    wb-unprotected objects are traced by every minor GC). The write barrier keeps it for
 *    writes; marking keeps it for promotions (an old parent whose child stays young is
 *    remembered again, see mosaic_mark).
 *  - An old heap environment whose WB_REQUIRED flag is clear is remembered: the VM writes to
 *    it without a write barrier (vm_env_write). The VM keeps this when it clears the flag;
 *    a GC that traces the environment sets the flag; making objects old without tracing
 *    them (mosaic_promote_all) remembers every environment.
 *  - An old iseq CRuby is still loading from binary stays remembered whenever a GC traces it
 *    (mark.c): its literals are announced before its code holds them (DESIGN.md, "Loading iseqs").
 *  - Only mark.c and sweep.c change old/age bits; the mutator only sets remembered and
 *    wb-unprotected bits (atomically: several Ractors may run write barriers at once).
 *  - A freed slot has all of its bits cleared (sweep.c).
 */
#include "core/mosaic.h"

void
mosaic_remember(mosaic_objspace_t *objspace, VALUE obj)
{
    struct mosaic_page *page = mosaic_page_of(obj);
    size_t bit = mosaic_bit_index(obj);
    if (!mosaic_bit_test(page->remembered_bits, bit)) mosaic_bit_set_atomic(page->remembered_bits, bit);
}

/* While a major GC marks in steps (DESIGN.md, "Tri-color invariant and the write barrier"): a marked `a` that now refers to an
 * unmarked `b` greys `b` (mark.c), so the tri-color invariant holds between steps. The common
 * cases (`a` white, or `b` marked already) are decided without the lock: a step cannot run
 * while this thread is inside the barrier (steps stop every Ractor at a safepoint), and a bit
 * another Ractor's barrier sets meanwhile only makes `b` marked or `a` grey (then traced with
 * `b` in it). Greying takes the VM lock without the barrier: several Ractors run write
 * barriers, and the mark stack is one; the state is read again under the lock (another
 * Ractor's step may have ended the marking before this thread got it). */
static __attribute__((noinline, cold)) void
writebarrier_incremental(mosaic_objspace_t *objspace, VALUE a, VALUE b)
{
    if (!mosaic_marked_p(a) || mosaic_marked_p(b)) return;
    mosaic_race_point();   /* between the unlocked test and the lock: another Ractor may grey b */
    unsigned int lev = rb_gc_vm_lock_no_barrier();
    if (objspace->incremental.marking && mosaic_marked_p(a) && !mosaic_marked_p(b)) mosaic_mark_grey(objspace, b);
    rb_gc_vm_unlock_no_barrier(lev);
}

/* rb_gc_impl_writebarrier: `a` now refers to `b`. */
void
mosaic_writebarrier(mosaic_objspace_t *objspace, VALUE a, VALUE b)
{
    if (RB_SPECIAL_CONST_P(b)) return;
    if (RB_UNLIKELY(objspace->incremental.marking)) writebarrier_incremental(objspace, a, b);
    if (!objspace->params.generational) return;
    if (!mosaic_old_p(a) || mosaic_old_p(b)) return;
    mosaic_remember(objspace, a);
}

/* rb_gc_impl_writebarrier_unprotect: writes to obj will no longer be reported. */
void
mosaic_writebarrier_unprotect(mosaic_objspace_t *objspace, VALUE obj)
{
    if (RB_SPECIAL_CONST_P(obj)) return;
    struct mosaic_page *page = mosaic_page_of(obj);
    size_t bit = mosaic_bit_index(obj);
    if (!mosaic_bit_test(page->wb_unprotected_bits, bit)) mosaic_bit_set_atomic(page->wb_unprotected_bits, bit);
}

/* rb_gc_impl_writebarrier_remember: obj was written in bulk; rescan it at the next minor GC. */
void
mosaic_writebarrier_remember(mosaic_objspace_t *objspace, VALUE obj)
{
    if (RB_SPECIAL_CONST_P(obj)) return;
    if (RB_UNLIKELY(objspace->incremental.marking) && mosaic_mark_needs_regrey(obj)) {
        /* Marked already: traced again, its new contents included (mark.c); queued at most
         * once until then, so the lock is taken once per object, not once per bulk write. */
        mosaic_race_point();   /* another Ractor may queue obj, or a step trace it, first */
        unsigned int lev = rb_gc_vm_lock_no_barrier();
        if (objspace->incremental.marking) mosaic_mark_grey_again(objspace, obj);
        rb_gc_vm_unlock_no_barrier(lev);
    }
    if (!objspace->params.generational) return;
    if (mosaic_old_p(obj)) mosaic_remember(objspace, obj);
}

/* Minor GC setup, world stopped, all pages swept: mark = old on every page, and push every
 * object to rescan (remembered, or old and wb-unprotected) on the mark stack. Remembered bits
 * are cleared: marking sets them again where an old -> young edge remains. */
void
mosaic_minor_mark_start(mosaic_objspace_t *objspace, void (*push)(mosaic_objspace_t *, VALUE))
{
    size_t rescanned = 0;
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        struct mosaic_heap *heap = &objspace->heaps[h];
        size_t marked = 0;
        for (size_t j = 0; j < heap->page_count; j++) {
            struct mosaic_page *page = heap->pages[j];
            size_t words = mosaic_page_bitmap_words(page);
            for (size_t w = 0; w < words; w++) {
                /* Written only where they change (MOSAIC_STORE_CHANGED): after Process.warmup
                 * a forked child's minor GC finds most pages' bits as they are to be. */
                mosaic_bits_t old = page->old_bits[w];
                MOSAIC_STORE_CHANGED(page->mark_bits[w], old);
                MOSAIC_STORE_CHANGED(page->pinned_bits[w], 0);
                marked += __builtin_popcountll(old);

                mosaic_bits_t rescan = page->remembered_bits[w] | (old & page->wb_unprotected_bits[w]);
                MOSAIC_STORE_CHANGED(page->remembered_bits[w], 0);
                while (rescan) {
                    int b = __builtin_ctzll(rescan);
                    rescan &= rescan - 1;
                    VALUE obj = mosaic_slot_at(page, w * 64 + (size_t)b);
                    push(objspace, obj);
                    rescanned++;
                }
            }
        }
        heap->marked_slots = marked;
        objspace->stats.marked_slots += marked;
    }
    objspace->stats.remembered_rescanned = rescanned;
}

/* After marking: count old objects and old wb-unprotected ones (for GC.stat and pacing). */
void
mosaic_generation_count(mosaic_objspace_t *objspace)
{
    size_t old = 0, old_unprotected = 0;
    for (size_t p = 0; p < objspace->pages.sorted_count; p++) {
        struct mosaic_page *page = objspace->pages.sorted[p];
        size_t words = mosaic_page_bitmap_words(page);
        for (size_t w = 0; w < words; w++) {
            mosaic_bits_t live_old = page->old_bits[w] & page->mark_bits[w];
            old += __builtin_popcountll(live_old);
            old_unprotected += __builtin_popcountll(live_old & page->wb_unprotected_bits[w]);
        }
    }
    objspace->gen.old_objects = old;
    objspace->gen.old_wb_unprotected_objects = old_unprotected;
}

/* Sets `bits` in `*word`, writing only when one is missing: the metadata of a page whose bits
 * are already set is not written (in a forked child, not copied). */
static inline void
bits_set_if_missing(mosaic_bits_t *word, mosaic_bits_t bits)
{
    if ((*word & bits) != bits) *word |= bits;
}

/* A heap environment (CRuby's imemo_env: T_IMEMO with type 0 in the flag bits above
 * FL_USHIFT, internal/imemo.h). The VM writes to one without a write barrier while its
 * WB_REQUIRED flag is clear; see mosaic_promote_all. */
static inline bool
imemo_env_p(VALUE obj)
{
    return RB_BUILTIN_TYPE(obj) == T_IMEMO && mosaic_imemo_kind(obj) == MOSAIC_IMEMO_ENV;
}

/* Every object now in the heap becomes old (Process.warmup; a forked child, see
 * mosaic_generation_after_fork), and the remembered set becomes exactly the heap
 * environments. World stopped. An unmarked object on a page not swept yet is garbage and is
 * left alone (the sweep frees it). Bits are written only where they change, so a heap that is
 * already old (a child of a warmed-up parent) has few page descriptors written.
 *
 * *Why the environments stay remembered*: with no young object left, the remembered-set
 * invariant holds now, but it must also hold after the next write, and the VM skips the
 * write barrier on an environment whose WB_REQUIRED flag is clear (vm_env_write). That flag
 * is cleared only by a write that remembers the environment (or while it is young), and set
 * again when a GC traces it (imemo.c). An environment written since its latest trace, made
 * old here with its remembered bit dropped, was old, unremembered and unflagged: the next
 * write put a young object in it unseen, and the next minor GC freed that object (a crash in
 * a forked child; test_forked_child_keeps_what_it_writes_to_an_inherited_environment).
 * Remembered, every environment is traced by the next minor GC, which sets its flag. The
 * flag lives in the VM's environment layout, which the GC does not read; remembering them all
 * costs one trace of each at that minor GC (reads, and a flag write where it was clear). */
void
mosaic_promote_all(mosaic_objspace_t *objspace)
{
    if (!objspace->params.generational) return;
    for (size_t p = 0; p < objspace->pages.sorted_count; p++) {
        struct mosaic_page *page = objspace->pages.sorted[p];
        size_t words = mosaic_page_bitmap_words(page);
        mosaic_bits_t live[MOSAIC_BITMAP_WORDS] = {0};
        mosaic_bits_t envs[MOSAIC_BITMAP_WORDS] = {0};
        for (size_t i = 0; i < page->total_slots; i++) {
            VALUE obj = mosaic_slot_at(page, i);
            if (RBASIC(obj)->flags == 0 || RB_BUILTIN_TYPE(obj) == T_ZOMBIE) continue;
            if (page->cycle->before_sweep && !mosaic_bit_test(page->mark_bits, i)) continue;
            mosaic_bit_set(live, i);
            if (imemo_env_p(obj)) mosaic_bit_set(envs, i);
        }
        for (size_t w = 0; w < words; w++) {
            if (live[w]) {
                bits_set_if_missing(&page->old_bits[w], live[w]);
                bits_set_if_missing(&page->age1_bits[w], live[w]);
                bits_set_if_missing(&page->age0_bits[w], live[w]);
            }
            if (page->remembered_bits[w] != envs[w]) page->remembered_bits[w] = envs[w];
        }
    }
    mosaic_generation_count(objspace);
    mosaic_pace_old_limits(objspace, objspace->gen.old_objects);   /* every survivor is old */
}

/* A forked child (rb_gc_impl_after_fork): what it inherited is taken as long-lived, as
 * Process.warmup would have made it (every object old), and the fork counts as the latest
 * major GC (the pacer's "three GCs after the latest major" rule restarts, and its live-data
 * targets follow what the child inherited: mosaic_pace_after_fork). *Why*: a child's
 * minor GCs then neither trace nor free what it shares with its parent, and its first GCs
 * do not turn major because the parent's last major was long ago (for what it gained and
 * where it does not help, see docs/DESIGN.md, "Fork invariants"). The cost: garbage the child inherited
 * young stays until the child's first major GC. Not while full marks are disabled (nothing
 * ages then). */
void
mosaic_generation_after_fork(mosaic_objspace_t *objspace)
{
    if (!objspace->params.generational || !objspace->params.allow_full_mark) return;
    mosaic_promote_all(objspace);
    objspace->gen.last_major_count = objspace->stats.count;
    mosaic_pace_after_fork(objspace);
}
