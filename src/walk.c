/*
 * walk.c: heap walking (ObjectSpace.each_object, count_objects, dump_all, ...).
 *
 * Invariants:
 *  - A walk works on a snapshot of the page list taken when it starts; pages added during
 *    the walk are not visited, and no page is released while any walk is running
 *    (heap_walk_depth > 0 stops the sweeper from returning pages to the OS).
 *  - each_objects finishes any lazy sweep first, so it never yields garbage.
 *  - The callback may allocate, collect or raise: the depth is restored by rb_ensure.
 */
#include <stdlib.h>

#include "mosaic.h"

struct walk {
    mosaic_objspace_t *objspace;
    struct mosaic_page **pages;
    size_t count;
    int (*range_cb)(void *, void *, size_t, void *);
    void (*obj_cb)(VALUE, void *);
    void *data;
};

static void
walk_snapshot(struct walk *w)
{
    mosaic_objspace_t *objspace = w->objspace;
    w->count = objspace->sorted_count;
    w->pages = malloc((w->count ? w->count : 1) * sizeof(struct mosaic_page *));
    if (!w->pages) rb_memerror();
    memcpy(w->pages, objspace->sorted_pages, w->count * sizeof(struct mosaic_page *));
    objspace->heap_walk_depth++;
}

static VALUE
walk_ensure(VALUE arg)
{
    struct walk *w = (struct walk *)arg;
    w->objspace->heap_walk_depth--;
    free(w->pages);
    w->pages = NULL;
    return Qnil;
}

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

void
mosaic_each_objects(mosaic_objspace_t *objspace, int (*callback)(void *, void *, size_t, void *), void *data)
{
    mosaic_gc_rest(objspace);
    struct walk w = { objspace, NULL, 0, callback, NULL, data };
    walk_snapshot(&w);
    rb_ensure(walk_ranges, (VALUE)&w, walk_ensure, (VALUE)&w);
}

void
mosaic_each_object(mosaic_objspace_t *objspace, void (*func)(VALUE, void *), void *data)
{
    struct walk w = { objspace, NULL, 0, NULL, func, data };
    walk_snapshot(&w);
    walk_objects((VALUE)&w);
    walk_ensure((VALUE)&w);
}
