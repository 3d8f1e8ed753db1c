/*
 * vec.c: struct mosaic_ptr_vec, a growable array of pointers malloc'd outside Ruby's
 * accounting (a collection may grow one: the weak slots a mark finds). Running out of memory
 * here is a [BUG]: no Ruby exception can be raised from inside a collection.
 */
#include <stdlib.h>

#include "core/mosaic.h"

void
mosaic_ptr_vec_push(struct mosaic_ptr_vec *vec, void *item)
{
    if (vec->size == vec->capa) {
        size_t capa = vec->capa ? vec->capa * 2 : 64;
        void **items = realloc(vec->items, capa * sizeof(void *));
        if (!items) rb_bug("Mosaic: out of memory growing an internal vector");
        vec->items = items;
        vec->capa = capa;
    }
    vec->items[vec->size++] = item;
}

void
mosaic_ptr_vec_free(struct mosaic_ptr_vec *vec)
{
    free(vec->items);
    vec->items = NULL;
    vec->size = vec->capa = 0;
}
