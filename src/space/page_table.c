/*
 * page_table.c: every page of every class, findable by address.
 *
 * Owns: objspace->pages: the address-sorted array of every page (sorted, for walks and the
 * heap checker) and the address index (index, open addressing) that answers conservative
 * lookups (mosaic_pointer_to_slot_p).
 *
 * Invariants: sorted holds every page a class uses exactly once, ordered by body address;
 * lomem/himem bound all of them. The index holds exactly the same pages. Pages in the
 * empty-page pool are in neither.
 */
#include <sys/mman.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/mosaic.h"

/* ==================================================== sorted index */

static size_t
sorted_insert_position(mosaic_objspace_t *objspace, uintptr_t body)
{
    size_t lo = 0, hi = objspace->pages.sorted_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((uintptr_t)objspace->pages.sorted[mid]->body < body) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The address index: every page of sorted_pages, in an open-addressing table keyed by body
 * address (linear probing, capacity a power of two at least twice the page count), so that
 * asking whether an address is a slot (conservative roots, the checking build's edge checks)
 * costs one probe, not a binary search whose every step misses the cache on a page struct. */
static size_t
page_index_home(uintptr_t body, size_t mask)
{
    return (size_t)(((uint64_t)(body / MOSAIC_PAGE_SIZE) * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

/* Puts `page` in the first free entry of its probe run (the table has one). */
static void
page_index_place(struct mosaic_page **table, size_t mask, struct mosaic_page *page)
{
    size_t i = page_index_home((uintptr_t)page->body, mask);
    while (table[i]) i = (i + 1) & mask;
    table[i] = page;
}

/* A table twice as large (512 entries at first), holding every page of sorted_pages. */
static bool
page_index_grow(mosaic_objspace_t *objspace)
{
    size_t capa = objspace->pages.index_mask ? (objspace->pages.index_mask + 1) * 2 : 512;
    struct mosaic_page **table = calloc(capa, sizeof(*table));
    if (!table) return false;
    for (size_t i = 0; i < objspace->pages.sorted_count; i++) page_index_place(table, capa - 1, objspace->pages.sorted[i]);
    free(objspace->pages.index);
    objspace->pages.index = table;
    objspace->pages.index_mask = capa - 1;
    return true;
}

static void
page_index_remove(mosaic_objspace_t *objspace, struct mosaic_page *page)
{
    size_t mask = objspace->pages.index_mask;
    size_t i = page_index_home((uintptr_t)page->body, mask);
    while (objspace->pages.index[i] != page) {
        if (!objspace->pages.index[i]) rb_bug("Mosaic: page %p missing from the page address index", (void *)page->body);
        i = (i + 1) & mask;
    }
    /* Backward-shift deletion: move up each later entry of the run whose home is not in
     * (i, j], so that no lookup meets a hole before its entry. */
    for (size_t j = (i + 1) & mask; objspace->pages.index[j]; j = (j + 1) & mask) {
        size_t home = page_index_home((uintptr_t)objspace->pages.index[j]->body, mask);
        bool home_in_gap = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!home_in_gap) {
            objspace->pages.index[i] = objspace->pages.index[j];
            i = j;
        }
    }
    objspace->pages.index[i] = NULL;
}

bool
mosaic_page_table_add(mosaic_objspace_t *objspace, struct mosaic_page *page)
{
    /* At most half full after this page (no table yet: the mask is 0, so it grows). */
    if ((objspace->pages.sorted_count + 1) * 2 > objspace->pages.index_mask + 1) {
        if (!page_index_grow(objspace)) return false;
    }
    if (objspace->pages.sorted_count == objspace->pages.sorted_capa) {
        size_t capa = objspace->pages.sorted_capa ? objspace->pages.sorted_capa * 2 : 256;
        struct mosaic_page **pages = realloc(objspace->pages.sorted, capa * sizeof(*pages));
        if (!pages) return false;
        objspace->pages.sorted = pages;
        objspace->pages.sorted_capa = capa;
    }
    size_t pos = sorted_insert_position(objspace, (uintptr_t)page->body);
    memmove(&objspace->pages.sorted[pos + 1], &objspace->pages.sorted[pos],
            (objspace->pages.sorted_count - pos) * sizeof(struct mosaic_page *));
    objspace->pages.sorted[pos] = page;
    /* Atomic: read without the VM lock by mosaic_collect's and malloc's guards (heap ready?). */
    __atomic_store_n(&objspace->pages.sorted_count, objspace->pages.sorted_count + 1, __ATOMIC_RELAXED);
    page_index_place(objspace->pages.index, objspace->pages.index_mask, page);

    uintptr_t lo = (uintptr_t)page->body, hi = lo + MOSAIC_PAGE_SIZE;
    if (objspace->pages.lomem == 0 || lo < objspace->pages.lomem) objspace->pages.lomem = lo;
    if (hi > objspace->pages.himem) objspace->pages.himem = hi;
    return true;
}

void
mosaic_page_table_remove(mosaic_objspace_t *objspace, struct mosaic_page *page)
{
    size_t pos = sorted_insert_position(objspace, (uintptr_t)page->body);
    if (pos >= objspace->pages.sorted_count || objspace->pages.sorted[pos] != page) {
        rb_bug("Mosaic: page %p missing from the sorted page index", (void *)page->body);
    }
    memmove(&objspace->pages.sorted[pos], &objspace->pages.sorted[pos + 1],
            (objspace->pages.sorted_count - pos - 1) * sizeof(struct mosaic_page *));
    __atomic_store_n(&objspace->pages.sorted_count, objspace->pages.sorted_count - 1, __ATOMIC_RELAXED);
    page_index_remove(objspace, page);
    if (objspace->pages.sorted_count) {
        objspace->pages.lomem = (uintptr_t)objspace->pages.sorted[0]->body;
        objspace->pages.himem = (uintptr_t)objspace->pages.sorted[objspace->pages.sorted_count - 1]->body + MOSAIC_PAGE_SIZE;
    }
    else {
        objspace->pages.lomem = objspace->pages.himem = 0;
    }
}

static struct mosaic_page *
sorted_find(mosaic_objspace_t *objspace, uintptr_t addr)
{
    if (addr < objspace->pages.lomem || addr >= objspace->pages.himem) return NULL;
    uintptr_t body = addr & MOSAIC_PAGE_MASK;
    size_t mask = objspace->pages.index_mask;
    for (size_t i = page_index_home(body, mask); objspace->pages.index[i]; i = (i + 1) & mask) {
        if ((uintptr_t)objspace->pages.index[i]->body == body) return objspace->pages.index[i];
    }
    return NULL;
}

/* Is ptr the exact start of a slot of one of our pages? (Says nothing about liveness.) */
bool
mosaic_pointer_to_slot_p(mosaic_objspace_t *objspace, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (p % sizeof(VALUE) != 0) return false;
    struct mosaic_page *page = sorted_find(objspace, p);
    if (!page) return false;
    if (p < page->start) return false;
    /* Divide by multiplying: exact for every offset inside a page (slot_recip_check). */
    size_t i = mosaic_bit_index((VALUE)p);
    return i < page->total_slots && mosaic_slot_at(page, i) == (VALUE)p;
}

/* At shutdown, after every page is freed. */
void
mosaic_page_table_free(mosaic_objspace_t *objspace)
{
    free(objspace->pages.sorted);
    objspace->pages.sorted = NULL;
    free(objspace->pages.index);
    objspace->pages.index = NULL;
    objspace->pages.index_mask = 0;
    objspace->pages.sorted_count = objspace->pages.sorted_capa = 0;
}
