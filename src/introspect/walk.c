/*
 * walk.c: heap walking (ObjectSpace.each_object, count_objects, dump_all, ...).
 *
 * Invariants:
 *  - A walk works on a snapshot of the page list taken when it starts; pages added during
 *    the walk are not visited, and no page is released while a walk is live
 *    (heap_walk_depth > 0 stops the sweeper from returning pages to the OS, and makes every
 *    collection sweep at once, so the walk never yields garbage).
 *  - each_objects finishes any lazy sweep first, so it never yields garbage.
 *  - A walk that calls back into Ruby (each_objects) is owned by a hidden T_DATA object on
 *    its C stack. It ends when the walk returns or raises (rb_ensure), or, for a walk that
 *    never returns (suspended in a Fiber that is dropped: an Enumerator's `next` not run to
 *    the end), when that object is freed with the Fiber's stack. So heap_walk_depth counts
 *    only walks that can still resume, and one abandoned walk does not stop page release
 *    and lazy sweeping for the rest of the process.
 */
#include <stdlib.h>

#include "core/mosaic.h"

struct walk {
    mosaic_objspace_t *objspace;
    struct mosaic_page **pages;      /* the snapshot; NULL once the walk has ended */
    size_t count;
    int (*range_cb)(void *, void *, size_t, void *);
    void (*obj_cb)(VALUE, void *);
    void *data;
};

static void
walk_snapshot(struct walk *w)
{
    mosaic_objspace_t *objspace = w->objspace;
    w->count = objspace->pages.sorted_count;
    w->pages = malloc((w->count ? w->count : 1) * sizeof(struct mosaic_page *));
    if (!w->pages) rb_memerror();
    memcpy(w->pages, objspace->pages.sorted, w->count * sizeof(struct mosaic_page *));
    __atomic_add_fetch(&objspace->heap_walk_depth, 1, __ATOMIC_SEQ_CST);
}

/* Ends a walk once, whichever way comes first. */
static void
walk_end(struct walk *w)
{
    if (!w->pages) return;
    __atomic_sub_fetch(&w->objspace->heap_walk_depth, 1, __ATOMIC_SEQ_CST);
    free(w->pages);
    w->pages = NULL;
}

static VALUE
walk_ensure(VALUE arg)
{
    walk_end((struct walk *)arg);
    return Qnil;
}

static void
walk_owner_free(void *ptr)
{
    walk_end(ptr);
    free(ptr);
}

static size_t
walk_owner_memsize(const void *ptr)
{
    const struct walk *w = ptr;
    return sizeof(*w) + (w->pages ? w->count * sizeof(struct mosaic_page *) : 0);
}

static const rb_data_type_t walk_owner_type = {
    "mosaic/heap_walk",
    { NULL, walk_owner_free, walk_owner_memsize, },
    0, 0, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE
walk_ranges(VALUE arg)
{
    struct walk *w = (struct walk *)arg;
    for (size_t i = 0; i < w->count; i++) {
        struct mosaic_page *page = w->pages[i];
        uintptr_t start = page->start;
        uintptr_t end = start + (uintptr_t)page->total_slots * page->slot_size;
        if (w->range_cb((void *)start, (void *)end, page->slot_size, w->data)) break;
    }
    return Qnil;
}

static VALUE
walk_objects(VALUE arg)
{
    struct walk *w = (struct walk *)arg;
    for (size_t i = 0; i < w->count; i++) {
        struct mosaic_page *page = w->pages[i];
        for (size_t j = 0; j < page->total_slots; j++) {
            w->obj_cb((VALUE)(page->start + j * page->slot_size), w->data);
        }
    }
    return Qnil;
}

static VALUE
walk_owner_new(VALUE w)
{
    return TypedData_Wrap_Struct(0, &walk_owner_type, (void *)w);
}

void
mosaic_each_objects(mosaic_objspace_t *objspace, int (*callback)(void *, void *, size_t, void *), void *data)
{
    /* The owner is allocated with collections held off (and the walk with plain calloc), so
     * starting a walk is no GC point, as in the default GC: CRuby walks the heap from places
     * that do not expect a collection (YJIT, TracePoint, refinements). */
    struct walk *w = calloc(1, sizeof(*w));
    if (!w) rb_memerror();
    bool held = mosaic_gc_hold(objspace);
    int state = 0;
    VALUE owner = rb_protect(walk_owner_new, (VALUE)w, &state);
    mosaic_gc_release(objspace, held);
    if (state) {
        free(w);
        rb_jump_tag(state);
    }
    w->objspace = objspace;
    w->range_cb = callback;
    w->data = data;
    /* Snapshot first, then finish the sweep: once the walk is live every collection sweeps
     * at once, so no cycle (another Ractor's included) can leave garbage unswept after this
     * gc_rest. The sweep releases no page while the walk is live. */
    walk_snapshot(w);
    mosaic_gc_rest(objspace);
    rb_ensure(walk_ranges, (VALUE)w, walk_ensure, (VALUE)w);
    RB_GC_GUARD(owner);
}

void
mosaic_each_object(mosaic_objspace_t *objspace, void (*func)(VALUE, void *), void *data)
{
    struct walk w = { objspace, NULL, 0, NULL, func, data };
    /* Every slot is read: the background sweeper must not be freeing some meanwhile (an
     * object it already freed reads as free, which it is). It stays stopped for the rest of
     * the cycle, so that the next count, with nothing allocated in between, is the same (as
     * under the default GC, whose lazy sweep moves only when Ruby allocates). */
    mosaic_bg_sweep_stop(objspace);
    walk_snapshot(&w);
    walk_objects((VALUE)&w);
    walk_ensure((VALUE)&w);
}
