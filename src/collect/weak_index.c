/*
 * weak_index.c: where each registered weak slot is in the weak list, so that
 * rb_gc_remove_weak is O(1) expected instead of a scan of the list.
 *
 * The weak list (objspace->mark.weak_refs, mark.c) is a vector of slot addresses (VALUE *) filled by
 * rb_gc_mark_weak during a mark phase and read once at its end (update_weak_references).
 * rb_gc_remove_weak(parent, ptr) must drop ptr from it: the caller (WeakMap and WeakKeyMap
 * delete, clear, replace) frees the memory at ptr next, so a registration left behind would
 * make the end of marking write Qundef into freed memory. That can only happen while marking
 * runs between mutator steps (incremental marking, docs/DESIGN.md, "Incremental marking") or from a dmark
 * function; a scan per removal would make deleting from a large WeakMap while a major GC marks
 * quadratic.
 *
 * This file owns an open-addressing hash table, slot address -> position in the list, built
 * only when the first removal of a mark phase comes (O(list) once), then kept up to date by
 * every registration; registration without a removal stays a plain vector push.
 *
 * Invariants (while built):
 *  - Every non-NULL entry of the list is in the table with its position, exactly once: build
 *    drops (sets to NULL) a second registration of the same slot, and mark.c does not push a
 *    slot the table already holds. So a removal drops every registration of its slot.
 *  - The table is empty and unbuilt outside a mark phase (mosaic_weak_index_reset at its end).
 *  - Plain malloc: marking never calls Ruby's allocator. Running out of it is no [BUG]: a table
 *    that cannot be built stays unbuilt (removals scan the list), and a slot the table cannot
 *    take is not registered at all (its referent is then marked as if strongly: mark.c).
 */
#include <stdlib.h>

#include "core/mosaic.h"

#define TOMBSTONE ((VALUE *)1)

static size_t
slot_hash(VALUE *ptr, size_t mask)
{
    return (size_t)((((uintptr_t)ptr >> 3) * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

/* The entry holding ptr, or the free entry where it would go (the first tombstone seen,
 * else the empty one that ends the probe). */
static struct mosaic_weak_entry *
find(struct mosaic_weak_index *index, VALUE *ptr, bool *found)
{
    size_t mask = index->capa - 1;
    struct mosaic_weak_entry *reuse = NULL;
    for (size_t i = slot_hash(ptr, mask);; i = (i + 1) & mask) {
        struct mosaic_weak_entry *e = &index->entries[i];
        if (e->ptr == ptr) {
            *found = true;
            return e;
        }
        if (e->ptr == TOMBSTONE) {
            if (!reuse) reuse = e;
        }
        else if (!e->ptr) {
            *found = false;
            return reuse ? reuse : e;
        }
    }
}

/* False, the table unchanged, when there is no memory for the larger one (or it would pass the
 * checking build's limit, `limit` entries). */
static bool
resize(struct mosaic_weak_index *index, size_t capa, size_t limit)
{
    if (limit && capa > limit) return false;
    struct mosaic_weak_entry *old = index->entries;
    size_t old_capa = index->capa;
    struct mosaic_weak_entry *entries = calloc(capa, sizeof(*entries));
    if (!entries) return false;
    index->entries = entries;
    index->capa = capa;
    index->used = index->count;
    for (size_t i = 0; i < old_capa; i++) {
        if (old[i].ptr && old[i].ptr != TOMBSTONE) {
            bool found;
            *find(index, old[i].ptr, &found) = old[i];
        }
    }
    free(old);
    return true;
}

/* Adds ptr at position pos: MOSAIC_WEAK_ADDED, MOSAIC_WEAK_PRESENT (ptr is there already), or
 * MOSAIC_WEAK_NO_MEMORY (the table could not grow); nothing changes but on ADDED. */
enum mosaic_weak_add
mosaic_weak_index_insert(struct mosaic_weak_index *index, VALUE *ptr, size_t pos, size_t limit)
{
    bool found = false;
    struct mosaic_weak_entry *e = index->capa ? find(index, ptr, &found) : NULL;
    if (found) return MOSAIC_WEAK_PRESENT;     /* before growing: a full table still knows it */
    /* At most half full, tombstones included. */
    if ((index->used + 1) * 2 > index->capa) {
        size_t capa = index->capa ? index->capa : 64;
        while ((index->count + 1) * 2 > capa / 2) capa *= 2;
        if (!resize(index, capa, limit)) return MOSAIC_WEAK_NO_MEMORY;
        e = find(index, ptr, &found);
    }
    if (!e->ptr) index->used++;
    e->ptr = ptr;
    e->pos = pos;
    index->count++;
    return MOSAIC_WEAK_ADDED;
}

/* Removes ptr; its position in *pos. False when ptr is not there. */
bool
mosaic_weak_index_remove(struct mosaic_weak_index *index, VALUE *ptr, size_t *pos)
{
    if (index->count == 0) return false;
    bool found;
    struct mosaic_weak_entry *e = find(index, ptr, &found);
    if (!found) return false;
    *pos = e->pos;
    e->ptr = TOMBSTONE;
    index->count--;
    return true;
}

/* Builds the table from the list; a second registration of a slot is dropped from the list.
 * False, the table left unbuilt and empty, when there is no memory for it: the caller then
 * removes by scanning the list (mark.c). */
bool
mosaic_weak_index_build(struct mosaic_weak_index *index, struct mosaic_ptr_vec *list, size_t limit)
{
    index->built = true;
    for (size_t i = 0; i < list->size; i++) {
        VALUE *ptr = list->items[i];
        if (!ptr) continue;
        switch (mosaic_weak_index_insert(index, ptr, i, limit)) {
          case MOSAIC_WEAK_ADDED: break;
          case MOSAIC_WEAK_PRESENT: list->items[i] = NULL; break;
          case MOSAIC_WEAK_NO_MEMORY:
            mosaic_weak_index_reset(index);
            index->unbuildable = true;   /* until the mark's end resets it */
            return false;
        }
    }
    return true;
}

void
mosaic_weak_index_reset(struct mosaic_weak_index *index)
{
    free(index->entries);
    memset(index, 0, sizeof(*index));
}
