/*
 * arena.c: page bodies, carved out of mmap'd arenas.
 *
 * Invariants:
 *  - Bodies come from arenas of MOSAIC_ARENA_PAGES bodies, one mapping each: the heap costs
 *    one kernel mapping per arena, not per page. An arena is unmapped when none of its
 *    bodies is in use; a released body's memory goes back to the OS at once (DONTNEED).
 *  - A body handed out reads as zeros (fresh from mmap, or after MADV_DONTNEED).
 *  - An arena also holds, packed, the per-cycle state and the mark bits of its bodies' pages
 *    (struct mosaic_page_cycle, mark_bits): what a collection in a forked child writes for
 *    every page lands in a few memory pages, not in every page's struct.
 */
#include <sys/mman.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/mosaic.h"

/* ===================================================== page bodies */

/* Page bodies are carved out of arenas: one mapping of MOSAIC_ARENA_PAGES aligned bodies.
 * Why: a mapping per page would cost one kernel VMA per 64 KiB (the heap would stop near
 * vm.max_map_count, ~4 GiB, and every fork would copy that many VMAs). A released body goes
 * back to the OS with madvise(MADV_DONTNEED), which keeps the mapping whole and makes the
 * body read as zeros when it is handed out again; an arena with no body in use is unmapped. */
struct mosaic_arena {
    char *base;                      /* MOSAIC_PAGE_SIZE-aligned, MOSAIC_ARENA_PAGES bodies */
    uint64_t used;                   /* bit i: body i is a page's */
    struct mosaic_arena *next;
    /* Entry i: the per-cycle state and the mark bits of body i's page (mosaic.h, struct
     * mosaic_page_cycle and mark_bits). */
    struct mosaic_page_cycle cycles[MOSAIC_ARENA_PAGES];
    mosaic_bits_t mark_bits[MOSAIC_ARENA_PAGES][MOSAIC_BITMAP_WORDS];
};

static struct mosaic_arena *
arena_new(mosaic_objspace_t *objspace)
{
    struct mosaic_arena *arena = calloc(1, sizeof(*arena));
    if (!arena) return NULL;
    /* Map one body more than needed and trim, so the arena is aligned to a body. */
    size_t len = MOSAIC_ARENA_SIZE + MOSAIC_PAGE_SIZE;
    char *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        free(arena);
        return NULL;
    }
    uintptr_t aligned = ((uintptr_t)raw + MOSAIC_PAGE_SIZE - 1) & MOSAIC_PAGE_MASK;
    size_t head = aligned - (uintptr_t)raw;
    size_t tail = len - head - MOSAIC_ARENA_SIZE;
    if (head) munmap(raw, head);
    if (tail) munmap((char *)aligned + MOSAIC_ARENA_SIZE, tail);
    arena->base = (char *)aligned;
    arena->next = objspace->pages.arenas;
    objspace->pages.arenas = arena;
    return arena;
}

/* The arenas' own structs (their pages' per-cycle state and mark bits), for the memory
 * breakdown's page metadata (memory.c). */
size_t
mosaic_arena_metadata_bytes(mosaic_objspace_t *objspace)
{
    size_t n = 0;
    for (struct mosaic_arena *arena = objspace->pages.arenas; arena; arena = arena->next) n += sizeof(*arena);
    return n;
}

/* A zeroed, aligned body for `page`, from the first arena with room (a new one if none has):
 * sets page->body, page->arena, page->cycle (cleared) and page->mark_bits (cleared by
 * page_layout). False when no memory is left. */
bool
mosaic_arena_take_body(mosaic_objspace_t *objspace, struct mosaic_page *page)
{
    struct mosaic_arena *arena = objspace->pages.arenas;
    while (arena && arena->used == MOSAIC_ARENA_FULL) arena = arena->next;
    if (!arena && !(arena = arena_new(objspace))) return false;
    int i = __builtin_ctzll(~arena->used);
    arena->used |= (uint64_t)1 << i;
    page->arena = arena;
    page->body = arena->base + (size_t)i * MOSAIC_PAGE_SIZE;
    page->cycle = &arena->cycles[i];
    memset(page->cycle, 0, sizeof(*page->cycle));
    page->mark_bits = arena->mark_bits[i];
    return true;
}

void
mosaic_arena_return_body(mosaic_objspace_t *objspace, struct mosaic_arena *arena, char *body)
{
    size_t i = (size_t)(body - arena->base) / MOSAIC_PAGE_SIZE;
    arena->used &= ~((uint64_t)1 << i);
    if (arena->used == 0) {
        struct mosaic_arena **link = &objspace->pages.arenas;
        while (*link != arena) link = &(*link)->next;
        *link = arena->next;
        munmap(arena->base, MOSAIC_ARENA_SIZE);
        free(arena);
        return;
    }
    /* The memory goes back to the OS now; the next page here starts from zeros. */
    madvise(body, MOSAIC_PAGE_SIZE, MADV_DONTNEED);
}

/* At shutdown, after every page is freed: every arena unmapped. */
void
mosaic_arenas_free(mosaic_objspace_t *objspace)
{
    while (objspace->pages.arenas) {
        struct mosaic_arena *arena = objspace->pages.arenas;
        objspace->pages.arenas = arena->next;
        munmap(arena->base, MOSAIC_ARENA_SIZE);
        free(arena);
    }
}
