/*
 * vec.c: struct mosaic_ptr_vec, a growable array of pointers malloc'd outside Ruby's
 * accounting (a collection may grow one: the weak slots a mark finds). No Ruby exception can be
 * raised from inside a collection: mosaic_ptr_vec_push makes running out of memory a [BUG],
 * mosaic_ptr_vec_try_push reports it to a caller that has a way around it (the weak list: mark.c).
 */
#include <stdlib.h>

#include "core/mosaic.h"

/* Pushes item; false, and nothing changes, when the vector cannot grow (no memory, or the
 * checking build's MOSAIC_STRESS_MARK_MEMORY limit, which the mark sets: `limit` entries). */
bool
mosaic_ptr_vec_try_push(struct mosaic_ptr_vec *vec, void *item, size_t limit)
{
    if (vec->size == vec->capa) {
        size_t capa = vec->capa ? vec->capa * 2 : 64;
        if (limit && capa > limit) return false;
        void **items = realloc(vec->items, capa * sizeof(void *));
        if (!items) return false;
        vec->items = items;
        vec->capa = capa;
    }
    vec->items[vec->size++] = item;
    return true;
}

void
mosaic_ptr_vec_push(struct mosaic_ptr_vec *vec, void *item)
{
    if (!mosaic_ptr_vec_try_push(vec, item, 0)) rb_bug("Mosaic: out of memory growing an internal vector");
}

void
mosaic_ptr_vec_free(struct mosaic_ptr_vec *vec)
{
    free(vec->items);
    vec->items = NULL;
    vec->size = vec->capa = 0;
}
