/*
 * page.c: the page lifecycle and the empty-page pool.
 *
 * Owns: the per-class page arrays, making a page (a body from an arena, its layout for the
 * class, its freelist), pooling, retiring and releasing empty pages.
 *
 * Invariants:
 *  - A new page's slots are all T_NONE (a body comes zeroed) and all of them are on its
 *    freelist; its bitmaps are all clear.
 *  - A descriptor's side bitmaps fit its class's slot count: a pooled page taken by a class
 *    with another count gets a descriptor of that size first (pool_head_fit_descriptor).
 *  - A page is only released or pooled when it has no live object, no zombie and no walk
 *    (heap_walk_depth) holds a snapshot of it.
 *  - The empty-page pool: a page no class uses. It is in no heap->pages array and not in the
 *    page table (so no lookup, walk, mark or sweep sees it), its body stays mapped and
 *    resident, every slot is T_NONE. Any class may take it (its slots are laid out again
 *    when the slot size differs). Pages idle in the pool for a whole cycle are released,
 *    except a reserve as large as what the latest cycle drew (hysteresis: a program that
 *    oscillates reuses its pages instead of faulting fresh ones in every cycle).
 */
#include <sys/mman.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/mosaic.h"

/* ============================================================ pages */

static void
page_build_freelist(struct mosaic_page *page)
{
    struct mosaic_free_slot *head = NULL;
    /* Build it backwards so allocation walks the page upwards (better locality). */
    for (size_t i = page->total_slots; i-- > 0;) {
        struct mosaic_free_slot *slot = (struct mosaic_free_slot *)(page->start + i * page->slot_size);
        slot->flags = 0;
        slot->next = head;
        head = slot;
    }
    page->freelist = head;
}

/* Points the side bitmaps' fields into side_bits, each `words` long (mosaic_bitmap_words of
 * the page's slots), and clears them. */
static void
page_lay_out_side_bitmaps(struct mosaic_page *page, size_t words)
{
    MOSAIC_ASSERT(words == mosaic_bitmap_words(page->total_slots) && words <= page->descriptor_words);
    mosaic_bits_t **fields[MOSAIC_PAGE_SIDE_BITMAPS];
    mosaic_page_side_bitmap_fields(page, fields);
    for (size_t k = 0; k < MOSAIC_PAGE_SIDE_BITMAPS; k++) *fields[k] = page->side_bits + k * words;
    memset(page->side_bits, 0, MOSAIC_PAGE_SIDE_BITMAPS * words * sizeof(mosaic_bits_t));
}

/* Makes the descriptor of the pool's first page, objspace->pool.head, the size `heap`'s pages
 * need: realloc'd (so moved) when its bitmaps have room for another word count, with the
 * pool's head and the body's header following it (nothing else names a pooled page). Its
 * size is descriptor_words, not total_slots: the page keeps its old layout until page_layout,
 * and stays pooled, resized, if the caller fails after this. False, the page untouched, when
 * no memory is left. */
static bool
pool_head_fit_descriptor(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    struct mosaic_page *page = objspace->pool.head;
    size_t have = page->descriptor_words, need = mosaic_bitmap_words(heap->slots_per_page);
    if (have == need) return true;
    struct mosaic_page *moved = realloc(page, mosaic_page_descriptor_size(need));
    if (!moved) return false;
    objspace->pages.descriptor_bytes -= mosaic_page_descriptor_size(have);
    objspace->pages.descriptor_bytes += mosaic_page_descriptor_size(need);
    moved->descriptor_words = (uint32_t)need;
    objspace->pool.head = moved;
    ((struct mosaic_page_header *)moved->body)->page = moved;
    return true;
}

/* Lays out `page` for `heap`'s slot size: every slot free and on its freelist, every bitmap
 * clear. The body must be all T_NONE (fresh, zeroed, or an empty page from the pool). */
static void
page_layout(struct mosaic_page *page, struct mosaic_heap *heap)
{
    bool same = page->heap == heap && page->slot_size == heap->slot_size && page->freelist;
    page->heap = heap;
    page->slot_size = (uint32_t)heap->slot_size;
    page->slot_recip = mosaic_slot_recip(heap->slot_size);
    page->total_slots = (uint32_t)heap->slots_per_page;
    page->free_slots = page->total_slots;
    page->start = (uintptr_t)page->body + heap->start_offset;
    /* Written only when they change (a page of another class): a pooled page of the same
     * class keeps its body untouched until a slot is allocated. */
    struct mosaic_page_header *header = (struct mosaic_page_header *)page->body;
    if (header->slot_recip != page->slot_recip) header->slot_recip = page->slot_recip;
    if (header->start_offset != heap->start_offset) header->start_offset = (uint32_t)heap->start_offset;
    size_t words = mosaic_bitmap_words(page->total_slots);
    if (header->bitmap_words != words) header->bitmap_words = (uint32_t)words;
    page->final_slots = 0;
    page->free_next = NULL;
    /* A page created during lazy sweeping counts as swept: the sweeper skips it. */
    page->cycle->before_sweep = false;
    memset(page->mark_bits, 0, MOSAIC_BITMAP_WORDS * sizeof(mosaic_bits_t));
    page_lay_out_side_bitmaps(page, words);
    /* An empty page of the same class already has every slot on its freelist: leave the
     * slots untouched (a forked child then keeps them shared). */
    if (!same) page_build_freelist(page);
}

static bool
heap_pages_reserve(struct mosaic_heap *heap)
{
    if (heap->page_count < heap->page_capa) return true;
    size_t capa = heap->page_capa ? heap->page_capa * 2 : 64;
    struct mosaic_page **pages = realloc(heap->pages, capa * sizeof(*pages));
    if (!pages) return false;
    heap->pages = pages;
    heap->page_capa = capa;
    return true;
}

static void
heap_add_page(struct mosaic_heap *heap, struct mosaic_page *page)
{
    heap->pages[heap->page_count++] = page;
    heap->total_slots += page->total_slots;
}

/* Takes a page from the empty-page pool for `heap`, or returns NULL when the pool is empty. */
struct mosaic_page *
mosaic_pool_take(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    if (!objspace->pool.head || !heap_pages_reserve(heap)) return NULL;
    if (!pool_head_fit_descriptor(objspace, heap)) return NULL;
    struct mosaic_page *page = objspace->pool.head;
    if (!mosaic_page_table_add(objspace, page)) return NULL;
    objspace->pool.head = page->free_next;
    objspace->pool.count--;
    objspace->pool.taken++;
    page_layout(page, heap);
    heap_add_page(heap, page);
    heap->total_allocated_pages++;
    return page;
}

/* Slots the pooled pages hold, each laid out for the class it last served: the pool counts in
 * GC.stat's heap_allocatable_slots (any class takes a pooled page without collecting). */
size_t
mosaic_pool_slots(mosaic_objspace_t *objspace)
{
    size_t n = 0;
    for (struct mosaic_page *page = objspace->pool.head; page; page = page->free_next) n += page->total_slots;
    return n;
}

struct mosaic_page *
mosaic_page_new(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    if (!heap_pages_reserve(heap)) return NULL;

    size_t words = mosaic_bitmap_words(heap->slots_per_page);
    size_t descriptor = mosaic_page_descriptor_size(words);
    struct mosaic_page *page = calloc(1, descriptor);
    if (!page) return NULL;
    page->descriptor_words = (uint32_t)words;
    if (!mosaic_arena_take_body(objspace, page)) {
        free(page);
        return NULL;
    }
    if (!mosaic_page_table_add(objspace, page)) {
        mosaic_arena_return_body(objspace, page->arena, page->body);
        free(page);
        return NULL;
    }

    ((struct mosaic_page_header *)page->body)->page = page;
    page_layout(page, heap);
    heap_add_page(heap, page);
    heap->total_allocated_pages++;
    objspace->pages.descriptor_bytes += descriptor;
    return page;
}

/* Takes the empty heap->pages[index] out of its class (the last page takes its place) and out
 * of the page index; it counts as a page the class freed. The caller guarantees it holds no
 * live object, no zombie, is on no freelist chain (a free_pages bucket or a cache) and that no
 * heap walk is live. */
static struct mosaic_page *
heap_unlink_empty_page(mosaic_objspace_t *objspace, struct mosaic_heap *heap, size_t index)
{
    struct mosaic_page *page = heap->pages[index];
    MOSAIC_ASSERT(page->final_slots == 0);
    MOSAIC_ASSERT(objspace->heap_walk_depth == 0);
    if (page->nursery) {
        /* The nursery stays a prefix of the class's pages: the last nursery page takes this
         * one's place, and the page leaves from there (a page from a higher index moves into
         * `index`, as below, so a caller's ascending walk that does not advance still sees it). */
        size_t last = --heap->nursery_pages;
        heap->pages[index] = heap->pages[last];
        heap->pages[last] = page;
        index = last;
        page->nursery = false;
    }
    heap->pages[index] = heap->pages[heap->page_count - 1];
    heap->page_count--;
    if (heap->sweep_index > heap->page_count) heap->sweep_index = heap->page_count;
    heap->total_slots -= page->total_slots;
    heap->total_freed_pages++;
    mosaic_page_table_remove(objspace, page);
    return page;
}

/* `page`, of this class and not a nursery page, becomes one: it moves to the end of the
 * nursery, which is the prefix heap->pages[0 .. nursery_pages-1], so that the lazy sweep and
 * the background sweeper, which take a class's pages in order, sweep the nursery first. The
 * page it swaps with keeps its sweep state: one at or past sweep_index moves to a higher index
 * and is still swept; one swept already is skipped wherever it is. */
void
mosaic_page_make_nursery(struct mosaic_heap *heap, struct mosaic_page *page)
{
    size_t at = heap->nursery_pages;
    for (size_t j = at; j < heap->page_count; j++) {
        if (heap->pages[j] != page) continue;
        heap->pages[j] = heap->pages[at];
        heap->pages[at] = page;
        page->nursery = true;
        heap->nursery_pages++;
        return;
    }
    MOSAIC_ASSERT(!"a page made a nursery page is in its class");
}

/* Moves the empty heap->pages[index] into the pool (conditions: heap_unlink_empty_page). */
void
mosaic_pool_put(mosaic_objspace_t *objspace, struct mosaic_heap *heap, size_t index)
{
    struct mosaic_page *page = heap_unlink_empty_page(objspace, heap, index);
    page->cycle->before_sweep = false;
    page->pooled_at = objspace->stats.count;
    page->free_next = objspace->pool.head;
    objspace->pool.head = page;
    objspace->pool.count++;
}

static void
page_free(mosaic_objspace_t *objspace, struct mosaic_page *page)
{
    objspace->pool.pages_returned++;
    objspace->pages.descriptor_bytes -= mosaic_page_descriptor_size(page->descriptor_words);
    mosaic_arena_return_body(objspace, page->arena, page->body);
    free(page);
}

/* Returns pool pages to the OS: every page when `all`, else those idle since before the
 * latest GC (pooled_at < count) beyond the reserve. Called at the start of a GC, before the
 * count moves on: a page pooled by the previous cycle's sweep and not taken since has sat
 * through one whole cycle of allocation. The reserve is what the previous cycle drew from
 * the pool, decaying by half each cycle. With `credit`, each released page's slots go back
 * into the budget of the class it last served (Process.warmup). Returns the pages released. */
size_t
mosaic_pool_trim(mosaic_objspace_t *objspace, bool all, bool credit)
{
    size_t reserve = objspace->pool.reserve / 2;
    if (objspace->pool.taken > reserve) reserve = objspace->pool.taken;
    objspace->pool.reserve = reserve;
    objspace->pool.taken = 0;
    if (all) reserve = 0;

    size_t released = 0, kept = 0;
    struct mosaic_page **link = &objspace->pool.head;
    while (*link) {
        struct mosaic_page *page = *link;
        /* The pool is a stack: the most recently pooled (warm) pages are kept first. */
        if (kept < reserve || (!all && page->pooled_at >= objspace->stats.count)) {
            kept++;
            link = &page->free_next;
            continue;
        }
        *link = page->free_next;
        objspace->pool.count--;
        /* Emptied on request (Process.warmup): the class it last served may grow back to the
         * same size without a collection. (Idle pages are not credited: that is shrinking.) */
        if (credit) page->heap->allocatable_slots = mosaic_add_sat(page->heap->allocatable_slots, page->total_slots);
        page_free(objspace, page);
        released++;
    }
    return released;
}

/* Returns the empty heap->pages[index] to the OS at once (conditions: heap_unlink_empty_page). */
void
mosaic_page_release(mosaic_objspace_t *objspace, struct mosaic_heap *heap, size_t index)
{
    page_free(objspace, heap_unlink_empty_page(objspace, heap, index));
}

/* The empty heap->pages[index] leaves its class: back to the OS while the class is above what
 * it should keep (freeable_pages, set by the pacer after a major GC), else into the pool. The
 * last page of the class moves into `index`. (Conditions: heap_unlink_empty_page.) */
void
mosaic_heap_retire_empty_page(mosaic_objspace_t *objspace, struct mosaic_heap *heap, size_t index)
{
    if (heap->freeable_pages > 0) {
        heap->freeable_pages--;
        mosaic_page_release(objspace, heap, index);
    }
    else {
        mosaic_pool_put(objspace, heap, index);
    }
}

/* Returns every page with no live object and no zombie to the OS, pooled ones included
 * (Process.warmup). Caller holds the VM lock, every page is swept and no cache holds a slot
 * (mosaic_caches_clear). */
size_t
mosaic_heap_release_empty_pages(mosaic_objspace_t *objspace)
{
    size_t released = 0;
    if (objspace->heap_walk_depth > 0 || objspace->lazy_sweeping) return 0;
    mosaic_heap_drop_reserves(objspace);   /* pages are released and the queues rebuilt below */

    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        struct mosaic_heap *heap = &objspace->heaps[h];
        for (size_t j = 0; j < heap->page_count;) {
            struct mosaic_page *page = heap->pages[j];
            size_t free_slots = 0;
            for (size_t i = 0; i < page->total_slots; i++) {
                if (((VALUE *)(page->start + i * page->slot_size))[0] == 0) free_slots++;
            }
            if (free_slots == page->total_slots && page->final_slots == 0) {
                /* Its slots go back into the class's budget: the heap may grow back to the
                 * same size without a collection (what the default GC does). */
                heap->allocatable_slots = mosaic_add_sat(heap->allocatable_slots, page->total_slots);
                mosaic_page_release(objspace, heap, j);
                released++;
                continue;  /* the last page moved into j */
            }
            j++;
        }
        /* Rebuild the queues of pages with free slots from what is left. */
        mosaic_heap_requeue_free_pages(heap);
    }
    return released + mosaic_pool_trim(objspace, true, true);
}

void
mosaic_heap_free_all(mosaic_objspace_t *objspace)
{
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        for (size_t j = 0; j < heap->page_count; j++) free(heap->pages[j]);
        free(heap->pages);
        heap->pages = NULL;
        heap->page_count = heap->page_capa = 0;
    }
    mosaic_page_table_free(objspace);
    while (objspace->pool.head) {
        struct mosaic_page *page = objspace->pool.head;
        objspace->pool.head = page->free_next;
        free(page);
    }
    objspace->pool.count = 0;
    objspace->pages.descriptor_bytes = 0;
    mosaic_arenas_free(objspace);
}
