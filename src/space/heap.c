/*
 * heap.c: size classes and pages.
 *
 * Owns: the size-class table, page bodies (carved out of mmap'd arenas, MOSAIC_PAGE_SIZE-
 * aligned), the per-class page arrays, the address-sorted array of every page, and the page
 * address index (a hash table of the same pages) that answers conservative lookups.
 *
 * Invariants:
 *  - The size-class table (mosaic_heap_sizes, MOSAIC_HEAP_COUNT classes) is chosen once at
 *    boot, before any page exists (MOSAIC_SIZE_CLASSES), and never changes: sizes are
 *    multiples of 8 from MOSAIC_BASE_SLOT_SIZE to MOSAIC_MAX_SLOT_SIZE, strictly ascending.
 *  - A page of a class has heap->slots_per_page slots starting heap->start_offset into its
 *    body, and its slot_recip makes mosaic_bit_index exact (checked for every offset at boot).
 *  - sorted_pages holds every live page exactly once, ordered by body address; lomem/himem
 *    bound all of them. The address index (page_index) holds exactly the same pages.
 *  - A new page's slots are all T_NONE (a body comes zeroed: fresh from mmap, or after
 *    madvise(MADV_DONTNEED)) and all of them are on its freelist; its bitmaps are all clear.
 *  - Bodies come from arenas of MOSAIC_ARENA_PAGES bodies, one mapping each: the heap costs
 *    one kernel mapping per arena, not per page. An arena is unmapped when none of its
 *    bodies is in use; a released body's memory goes back to the OS at once (DONTNEED).
 *  - A page is only released or pooled when it has no live object, no zombie and no walk
 *    (heap_walk_depth) holds a snapshot of it.
 *  - The empty-page pool: a page no class uses. It is in no heap->pages array and not in
 *    sorted_pages (so no lookup, walk, mark or sweep sees it), its body stays mapped and
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

/* The size-class table. Everything that depends on slot sizes follows it. Each size is a
 * multiple of 8 bytes (a VALUE), from MOSAIC_BASE_SLOT_SIZE to MOSAIC_MAX_SLOT_SIZE, strictly
 * ascending, and a 0 ends it (rb_gc_impl_heap_sizes hands it to CRuby, which derives
 * embedding capacities and T_OBJECT shapes from it). Chosen once at boot, before any page
 * exists (mosaic_size_classes_from_env); never changed after. */
size_t mosaic_heap_sizes[MOSAIC_HEAP_MAX + 1] = { 40, 80, 160, 320, 640, 0 };
int mosaic_heap_count = 5;

/* The class of a request of `size` bytes, by (size + 7) / 8: a load instead of a search. */
static uint8_t size_to_heap[MOSAIC_MAX_SLOT_SIZE / 8 + 1];

/* Named tables for MOSAIC_SIZE_CLASSES (docs/DESIGN.md, "Size classes", has the measurements
 * behind each). The first is the default. */
static const struct {
    const char *name;
    size_t sizes[MOSAIC_HEAP_MAX];
} size_class_tables[] = {
    { "default",   { 40, 80, 160, 320, 640 } },
    { "fine",      { 40, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 640 } },
    { "large",     { 40, 80, 160, 320, 640, 1024 } },
    { "cacheline", { 64, 128, 256, 512, 640 } },
};

/* Checks a table of `n` sizes (the rules above); on failure writes why into `why`. */
static bool
size_table_valid_p(const size_t *sizes, int n, char *why, size_t why_len)
{
    if (n < 1 || n > MOSAIC_HEAP_MAX) {
        snprintf(why, why_len, "it must have 1 to %d sizes", MOSAIC_HEAP_MAX);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (sizes[i] < MOSAIC_BASE_SLOT_SIZE || sizes[i] > MOSAIC_MAX_SLOT_SIZE || sizes[i] % sizeof(VALUE) != 0) {
            snprintf(why, why_len, "%zu is not a multiple of 8 from %d to %d", sizes[i],
                     MOSAIC_BASE_SLOT_SIZE, MOSAIC_MAX_SLOT_SIZE);
            return false;
        }
        if (i > 0 && sizes[i] <= sizes[i - 1]) {
            snprintf(why, why_len, "sizes must ascend (%zu after %zu)", sizes[i], sizes[i - 1]);
            return false;
        }
    }
    return true;
}

/* MOSAIC_SIZE_CLASSES: a table's name (size_class_tables) or sizes separated by commas
 * ("40,64,128,256,640"). A bad value warns and keeps the default table. Called once, before
 * mosaic_heap_init. */
void
mosaic_size_classes_from_env(void)
{
    const char *s = getenv("MOSAIC_SIZE_CLASSES");
    if (!s || !*s) return;
    size_t sizes[MOSAIC_HEAP_MAX] = { 0 };
    int n = 0;
    char why[128] = "";
    bool ok = false;
    for (size_t t = 0; t < sizeof(size_class_tables) / sizeof(size_class_tables[0]); t++) {
        if (strcmp(s, size_class_tables[t].name) == 0) {
            while (n < MOSAIC_HEAP_MAX && size_class_tables[t].sizes[n]) n++;
            memcpy(sizes, size_class_tables[t].sizes, sizeof(sizes));
            ok = true;
            break;
        }
    }
    if (!ok) {
        const char *p = s;
        ok = true;
        while (ok) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(p, &end, 10);
            if (end == p || errno || *p == '-' || *p == '+' || (*end != ',' && *end != '\0') || n == MOSAIC_HEAP_MAX) {
                snprintf(why, sizeof(why), n == MOSAIC_HEAP_MAX ? "more than %d sizes" : "not a table name nor sizes separated by commas",
                         MOSAIC_HEAP_MAX);
                ok = false;
                break;
            }
            sizes[n++] = (size_t)(v > MOSAIC_SIZE_MAX ? MOSAIC_SIZE_MAX : v);
            if (*end == '\0') break;
            p = end + 1;
        }
        if (ok) ok = size_table_valid_p(sizes, n, why, sizeof(why));
    }
    if (!ok) {
        fprintf(stderr, "[mosaic] invalid value for MOSAIC_SIZE_CLASSES: %s (%s; keeping", s, why);
        for (int i = 0; i < mosaic_heap_count; i++) fprintf(stderr, "%c%zu", i ? ',' : ' ', mosaic_heap_sizes[i]);
        fprintf(stderr, ")\n");
        return;
    }
    for (int i = 0; i <= MOSAIC_HEAP_MAX; i++) mosaic_heap_sizes[i] = i < n ? sizes[i] : 0;
    mosaic_heap_count = n;
}

/* ====================================================== size classes */

/* mosaic_bit_index divides by multiplying with mosaic_slot_recip: check that it is exact for
 * every offset a slot may have in a page (a cheap loop, once per class at boot). */
static void
slot_recip_check(size_t slot_size)
{
    uint64_t recip = mosaic_slot_recip(slot_size), q = 0, next = slot_size;
    for (uint64_t n = 0; n < MOSAIC_PAGE_SIZE; n++) {
        if (n == next) {
            q++;
            next += slot_size;
        }
        if (((n * recip) >> 32) != q) {
            rb_bug("Mosaic: the reciprocal of %zu is not exact at %llu", slot_size, (unsigned long long)n);
        }
    }
}

/* Where a page's first slot starts: after the page pointer, one base slot in; for a slot size
 * that is a multiple of a cache line, at the first line boundary after it, so that every slot
 * starts on a line and none straddles two. */
static size_t
heap_start_offset(size_t slot_size)
{
    return slot_size % MOSAIC_LINE_SIZE == 0 ? MOSAIC_LINE_SIZE : MOSAIC_PAGE_HEADER_SIZE;
}

void
mosaic_heap_init(mosaic_objspace_t *objspace)
{
    char why[128];
    if (!size_table_valid_p(mosaic_heap_sizes, mosaic_heap_count, why, sizeof(why)) || mosaic_heap_sizes[mosaic_heap_count]) {
        rb_bug("Mosaic: bad size-class table (%s)", why);
    }
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        struct mosaic_heap *heap = &objspace->heaps[i];
        size_t slot_size = mosaic_heap_sizes[i];
        heap->slot_size = slot_size;
        heap->start_offset = heap_start_offset(slot_size);
        heap->slots_per_page = (MOSAIC_PAGE_SIZE - heap->start_offset) / slot_size;
        if (heap->slots_per_page > MOSAIC_BITMAP_BITS) rb_bug("Mosaic: %zu-byte slots overflow the bitmaps", slot_size);
        slot_recip_check(slot_size);
        /* The bits of the slots a page has, for the sweep's word-at-a-time loop. */
        memset(heap->slot_bits, 0, sizeof(heap->slot_bits));
        for (size_t j = 0; j < heap->slots_per_page; j++) mosaic_bit_set(heap->slot_bits, j);
    }
    for (size_t b = 0, h = 0; b <= MOSAIC_MAX_SLOT_SIZE / 8; b++) {
        while (h < (size_t)MOSAIC_HEAP_COUNT - 1 && b * 8 > mosaic_heap_sizes[h]) h++;
        size_to_heap[b] = (uint8_t)h;
    }
}

size_t
mosaic_heap_index_for_size(size_t size)
{
    if (RB_LIKELY(size <= mosaic_heap_sizes[MOSAIC_HEAP_COUNT - 1])) return size_to_heap[(size + 7) / 8];
    rb_bug("Mosaic: no size class holds %zu bytes (largest is %zu)", size,
           mosaic_heap_sizes[MOSAIC_HEAP_COUNT - 1]);
}

size_t
mosaic_heap_available_slots(mosaic_objspace_t *objspace)
{
    size_t total = 0;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) total += objspace->heaps[i].total_slots;
    return total;
}

/* Pages in use by a class (the pool is apart: GC.stat's heap_empty_pages). */
size_t
mosaic_heap_allocated_pages(mosaic_objspace_t *objspace)
{
    return objspace->pages.sorted_count;
}

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
static bool
page_body_take(mosaic_objspace_t *objspace, struct mosaic_page *page)
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

static void
page_body_return(mosaic_objspace_t *objspace, struct mosaic_arena *arena, char *body)
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

static bool
sorted_add(mosaic_objspace_t *objspace, struct mosaic_page *page)
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

static void
sorted_remove(mosaic_objspace_t *objspace, struct mosaic_page *page)
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
    page->final_slots = 0;
    page->free_next = NULL;
    /* A page created during lazy sweeping counts as swept: the sweeper skips it. */
    page->cycle->before_sweep = false;
    memset(page->mark_bits, 0, MOSAIC_BITMAP_WORDS * sizeof(mosaic_bits_t));
    memset(page->pinned_bits, 0, sizeof(page->pinned_bits));
    memset(page->wb_unprotected_bits, 0, sizeof(page->wb_unprotected_bits));
    memset(page->age0_bits, 0, sizeof(page->age0_bits));
    memset(page->age1_bits, 0, sizeof(page->age1_bits));
    memset(page->old_bits, 0, sizeof(page->old_bits));
    memset(page->remembered_bits, 0, sizeof(page->remembered_bits));
    memset(page->retrace_bits, 0, sizeof(page->retrace_bits));
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
    struct mosaic_page *page = objspace->pool.head;
    if (!page || !heap_pages_reserve(heap)) return NULL;
    if (!sorted_add(objspace, page)) return NULL;
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

    struct mosaic_page *page = calloc(1, sizeof(struct mosaic_page));
    if (!page) return NULL;
    if (!page_body_take(objspace, page)) {
        free(page);
        return NULL;
    }
    if (!sorted_add(objspace, page)) {
        page_body_return(objspace, page->arena, page->body);
        free(page);
        return NULL;
    }

    ((struct mosaic_page_header *)page->body)->page = page;
    page_layout(page, heap);
    heap_add_page(heap, page);
    heap->total_allocated_pages++;
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
    heap->pages[index] = heap->pages[heap->page_count - 1];
    heap->page_count--;
    if (heap->sweep_index > heap->page_count) heap->sweep_index = heap->page_count;
    heap->total_slots -= page->total_slots;
    heap->total_freed_pages++;
    sorted_remove(objspace, page);
    return page;
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
    page_body_return(objspace, page->arena, page->body);
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
    free(objspace->pages.sorted);
    objspace->pages.sorted = NULL;
    free(objspace->pages.index);
    objspace->pages.index = NULL;
    objspace->pages.index_mask = 0;
    objspace->pages.sorted_count = objspace->pages.sorted_capa = 0;
    while (objspace->pool.head) {
        struct mosaic_page *page = objspace->pool.head;
        objspace->pool.head = page->free_next;
        free(page);
    }
    objspace->pool.count = 0;
    while (objspace->pages.arenas) {
        struct mosaic_arena *arena = objspace->pages.arenas;
        objspace->pages.arenas = arena->next;
        munmap(arena->base, MOSAIC_ARENA_SIZE);
        free(arena);
    }
}
