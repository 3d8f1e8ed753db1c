/*
 * page_queue.c: each class's queues of pages with free slots, and the pages held back.
 *
 * Owns: heap->free_pages (swept pages whose freelist no cache holds, in MOSAIC_FREE_BUCKETS
 * buckets by how full they are; allocation takes the fullest first, so that nearly empty
 * pages empty out and can go back to the OS) and heap->reserve (swept pages held back for a
 * major GC that will mark in steps: its room to allocate from while it marks).
 *
 * Invariants: a page is in at most one of them, linked through free_next; every page in a
 * bucket has free slots; a page's bucket is its fullness when it was queued.
 */
#include "core/mosaic.h"

/* A queued nursery page, else the fullest queued page of the class, dequeued; or NULL. */
struct mosaic_page *
mosaic_heap_dequeue_free_page(struct mosaic_heap *heap)
{
    struct mosaic_page *nursery = heap->nursery_free;
    if (nursery) {
        heap->nursery_free = nursery->free_next;
        nursery->free_next = NULL;
        return nursery;
    }
    for (int b = 0; b < MOSAIC_FREE_BUCKETS; b++) {
        struct mosaic_page *page = heap->free_pages[b];
        if (page) {
            heap->free_pages[b] = page->free_next;
            page->free_next = NULL;
            return page;
        }
    }
    return NULL;
}

/* Rebuilds the class's queues from its pages' freelists (all pages swept, no cache holds a
 * slot). */
void
mosaic_heap_requeue_free_pages(struct mosaic_heap *heap)
{
    for (int b = 0; b < MOSAIC_FREE_BUCKETS; b++) heap->free_pages[b] = NULL;
    heap->nursery_free = NULL;
    /* Held-back pages are among them (their free_next links are rewritten here). */
    heap->reserve = NULL;
    heap->reserve_slots = 0;
    for (size_t j = 0; j < heap->page_count; j++) {
        struct mosaic_page *page = heap->pages[j];
        MOSAIC_STORE_CHANGED(page->free_next, NULL);
        if (!page->freelist) continue;
        size_t n = 0;
        for (struct mosaic_free_slot *s = page->freelist; s; s = s->next) n++;
        MOSAIC_STORE_CHANGED(page->free_slots, (uint32_t)n);
        mosaic_heap_queue_free_page(heap, page);
    }
}

/* No page is held back any more: what rebuilds the queues from every page's freelist, or may
 * retire pages (compaction, Process.warmup), calls this first; the pages keep their
 * freelists, and the queues are rebuilt from them (mosaic_heap_requeue_free_pages). */
void
mosaic_heap_drop_reserves(mosaic_objspace_t *objspace)
{
    objspace->incremental.reserving = false;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        objspace->heaps[i].reserve = NULL;
        objspace->heaps[i].reserve_slots = 0;
    }
}

/* The held-back pages join the class's queues (the major GC they were kept for has started,
 * or, in a forked child, will not come). */
static void
heap_release_reserve(struct mosaic_heap *heap)
{
    struct mosaic_page *page = heap->reserve;
    while (page) {
        struct mosaic_page *next = page->free_next;
        mosaic_heap_queue_free_page(heap, page);
        page = next;
    }
    heap->reserve = NULL;
    heap->reserve_slots = 0;
}

/* Every class's held-back pages join its queues, and the sweep holds nothing back any more. */
void
mosaic_heap_release_reserves(mosaic_objspace_t *objspace)
{
    objspace->incremental.reserving = false;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) heap_release_reserve(&objspace->heaps[i]);
}
