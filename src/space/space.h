/*
 * space.h: where objects live. Size classes (struct mosaic_heap), pages and their side
 * bitmaps, arenas, the page table, the empty-page pool (size_class.c, arena.c, page_table.c, page.c), and the per-Ractor
 * allocation caches (alloc.c).
 *
 * Invariants kept here (docs/DESIGN.md, "space"):
 *  - A page body is MOSAIC_PAGE_SIZE bytes, aligned to MOSAIC_PAGE_SIZE. It starts with a
 *    struct mosaic_page_header: a pointer to its struct mosaic_page, so page_of(obj) is a mask
 *    and a load, and copies of the page's slot_recip and start offset (page->start - body).
 *  - A slot's bit in a side bitmap is its slot number on its page, (addr - page->start) /
 *    page->slot_size, computed with the page's reciprocal (mosaic_bit_index): exact for every
 *    offset inside a page, so a slot size need not divide anything (any multiple of 8 bytes,
 *    at least MOSAIC_BASE_SLOT_SIZE). Bits at or beyond page->total_slots stay clear.
 *    mosaic_bit_index reads the body's header, not the page struct: the line page_of loads
 *    anyway. A mark-bit test then reads mark_bits beside `heap` and the word; a side-bitmap
 *    test reads the bitmap's pointer from the descriptor and the word.
 *  - GC state (mark, pin, wb-unprotected, ...) lives only in the page's side bitmaps, which
 *    are malloc'd apart from the body: a collection never writes to an object header except
 *    to free the object. The descriptor's side bitmaps are mosaic_bitmap_words(total_slots)
 *    words each (sized for the class; the mark bits in the arena are MOSAIC_BITMAP_WORDS).
 *  - A free slot has flags == 0 (T_NONE); when it is on a freelist its second word is the
 *    next free slot.
 */
#ifndef MOSAIC_SPACE_H
#define MOSAIC_SPACE_H

#include "core/defs.h"

#pragma GCC visibility push(hidden)

struct mosaic_free_slot {
    VALUE flags;                     /* always 0: T_NONE */
    struct mosaic_free_slot *next;
};

struct mosaic_heap;
struct mosaic_arena;

/* What every collection writes for every page, whatever the page holds: kept apart from
 * struct mosaic_page, packed by arena (arena.c, mosaic_arena_take_body), so that a GC in a forked child
 * writes these few bytes per page and not each page's struct (bitmaps included), which it
 * writes only where a bit or a count changes. A page's entry lives as long as its body. */
struct mosaic_page_cycle {
    bool before_sweep;               /* marked this cycle, not swept yet */
    /* The background sweeper (bg_sweep.c): the page's slot in its list (MOSAIC_BG_UNLISTED:
     * the mutator sweeps it), set with release once the thread swept it, and its result. */
    bool bg_done;
    bool bg_leftovers;               /* leftover_bits has a bit set */
    uint32_t bg_slot;
    uint32_t bg_freed;               /* objects the thread freed */
};

struct mosaic_page {
    struct mosaic_heap *heap;
    /* The mark bits: MOSAIC_BITMAP_WORDS words in the page's arena (arena.c), packed with the
     * other pages' mark bits, which every major GC clears and sets again for every live
     * object: a major GC in a forked child copies those, not every page's struct. Beside
     * `heap`, which marking reads too: one cache line for both. */
    mosaic_bits_t *mark_bits;
    char *body;                      /* MOSAIC_PAGE_SIZE bytes, aligned */
    struct mosaic_arena *arena;      /* the mapping the body was carved from (arena.c) */
    uintptr_t start;                 /* first slot */
    uint32_t slot_size;
    uint32_t slot_recip;             /* mosaic_slot_recip(slot_size): slot numbers by multiplying */
    uint32_t total_slots;
    uint32_t final_slots;            /* zombies on this page */
    uint32_t free_slots;             /* counted by the latest sweep of this page */
    uint32_t descriptor_words;       /* words each side bitmap has room for: the allocation's size
                                      * (page.c; mosaic_page_bitmap_words at most) */
    struct mosaic_page_cycle *cycle; /* in the page's arena (arena.c) */
    struct mosaic_free_slot *freelist;
    struct mosaic_page *free_next;   /* link in a heap->free_pages bucket, or in the pool */
    size_t pooled_at;                /* stats.count when it entered the empty-page pool */
    bool nursery;                    /* a nursery page (alloc.c): allocation takes it first, and
                                      * every evacuating minor GC moves its survivors out (nursery.c) */

    /* Side bitmaps, one bit per slot, by slot number (mosaic_bit_index). The mark bits are
     * pointed to by mark_bits, above; the others follow the struct in the same allocation
     * (side_bits), mosaic_bitmap_words(total_slots) words each, so a page of 640-byte slots
     * carries 2 words per bitmap, not the 26 of a 40-byte class (page.c lays them out and
     * moves the descriptor when a pooled page changes to a class with another count). Written
     * only where a bit changes. */
    mosaic_bits_t *pinned_bits;
    mosaic_bits_t *wb_unprotected_bits;
    /* Generations (generation.c): age = age1:age0, old once age reaches MOSAIC_OLD_AGE. */
    mosaic_bits_t *age0_bits;
    mosaic_bits_t *age1_bits;
    mosaic_bits_t *old_bits;
    mosaic_bits_t *remembered_bits;
    /* Objects queued on objspace->incremental.retrace (mark.c, mosaic_mark_grey_again): set when one is
     * queued, cleared when it is traced again, so one is queued at most once between steps.
     * All clear outside an incremental mark. */
    mosaic_bits_t *retrace_bits;
    /* Dead objects the background sweeper left for the mutator (sweep.c, background_safe_p). */
    mosaic_bits_t *leftover_bits;
    mosaic_bits_t side_bits[];       /* MOSAIC_PAGE_SIDE_BITMAPS bitmaps, the ones above */
};
#define MOSAIC_BG_UNLISTED UINT32_MAX

/* The side bitmaps' places in side_bits, in their fields' order. */
enum mosaic_side_bitmap {
    MOSAIC_SIDE_PINNED, MOSAIC_SIDE_WB_UNPROTECTED, MOSAIC_SIDE_AGE0, MOSAIC_SIDE_AGE1,
    MOSAIC_SIDE_OLD, MOSAIC_SIDE_REMEMBERED, MOSAIC_SIDE_RETRACE, MOSAIC_SIDE_LEFTOVER,
    MOSAIC_PAGE_SIDE_BITMAPS
};

/* Words in each bitmap of a page with `slots` slots (bits at or beyond `slots` stay clear). */
static inline size_t
mosaic_bitmap_words(size_t slots)
{
    return (slots + 63) / 64;
}

/* Words in each side bitmap of `page` (its mark bits in the arena have MOSAIC_BITMAP_WORDS). */
static inline size_t
mosaic_page_bitmap_words(const struct mosaic_page *page)
{
    return mosaic_bitmap_words(page->total_slots);
}

/* The fields of `page`'s side bitmaps, in their order in side_bits: the one list that page.c's
 * layout and the heap checker (verify.c) both walk. */
static inline void
mosaic_page_side_bitmap_fields(struct mosaic_page *page, mosaic_bits_t **fields[MOSAIC_PAGE_SIDE_BITMAPS])
{
    fields[MOSAIC_SIDE_PINNED] = &page->pinned_bits;
    fields[MOSAIC_SIDE_WB_UNPROTECTED] = &page->wb_unprotected_bits;
    fields[MOSAIC_SIDE_AGE0] = &page->age0_bits;
    fields[MOSAIC_SIDE_AGE1] = &page->age1_bits;
    fields[MOSAIC_SIDE_OLD] = &page->old_bits;
    fields[MOSAIC_SIDE_REMEMBERED] = &page->remembered_bits;
    fields[MOSAIC_SIDE_RETRACE] = &page->retrace_bits;
    fields[MOSAIC_SIDE_LEFTOVER] = &page->leftover_bits;
}

/* Bytes of a descriptor (struct and side bitmaps) whose bitmaps have `words` words each. */
static inline size_t
mosaic_page_descriptor_size(size_t words)
{
    return sizeof(struct mosaic_page) + MOSAIC_PAGE_SIDE_BITMAPS * words * sizeof(mosaic_bits_t);
}

/* A size class: every page in it has the same slot size. */
struct mosaic_heap {
    size_t slot_size;
    size_t slots_per_page;
    size_t start_offset;             /* where a page's first slot starts in its body */

    struct mosaic_page **pages;      /* all pages of this class, in allocation order */
    size_t page_count;
    size_t page_capa;
    size_t sweep_index;              /* pages[sweep_index..] are not swept yet */
    size_t force_incremental_finishes; /* incremental marks this class's allocation had to finish */
    size_t force_major_gc_count;     /* minor GCs after which this class, short of room, asked for a major */
    /* Swept pages held back for the next major GC to allocate from while it marks in steps
     * (sweep.c; linked through free_next), and how many free slots they hold / should hold. */
    struct mosaic_page *reserve;
    size_t reserve_slots;
    size_t reserve_target;
    /* Swept pages whose freelist is not handed out, by how full they are: bucket 0 holds the
     * fullest (under 1/4 free); allocation takes from the fullest bucket first (sweep.c). */
    struct mosaic_page *free_pages[MOSAIC_FREE_BUCKETS];
    /* Swept nursery pages with free slots, linked through free_next: allocation takes them
     * before any bucket above (page_queue.c). */
    struct mosaic_page *nursery_free;
    size_t nursery_pages;            /* pages of this class with page->nursery set: pages[0 .. nursery_pages-1] */
    mosaic_bits_t slot_bits[MOSAIC_BITMAP_WORDS];  /* bits 0 .. slots_per_page-1: the slots a page has */

    size_t total_slots;
    size_t allocatable_slots;        /* this class's own growth budget (pace.c) */
    size_t major_target_slots;       /* pace.c: what minor GCs may grow the class to */
    size_t catch_up_slots;           /* slots the current mark's catch-up steps added (alloc.c);
                                      * the growth that mark grants counts them (pace.c) */
    size_t freeable_pages;           /* pace.c: empty pages this sweep returns to the OS, not the pool */
    size_t used_slots_at_gc;         /* allocated and not freed when the latest GC started */
    size_t allocated_at_gc;          /* total_allocated_objects when the latest GC started */
    size_t allocated_in_cycle;       /* objects allocated between the two latest GCs' starts (pace.c) */
    size_t marked_slots;             /* marked in the latest cycle */
    size_t final_slots;

    size_t total_allocated_objects;  /* flushed from caches */
    size_t total_freed_objects;
    /* Compaction across classes (compact.c): objects that moved into / out of this class. The
     * class holds allocated + moved_in - freed - moved_out objects (mosaic_heap_used_slots);
     * the sums over all classes are equal, so whole-heap figures need neither. */
    size_t moved_in_objects;
    size_t moved_out_objects;
    size_t total_allocated_pages;
    size_t total_freed_pages;
};

/* Per-Ractor allocation cache: a private freelist per size class. */
struct mosaic_cache {
    struct {
        struct mosaic_free_slot *freelist;
        size_t allocated;            /* not yet flushed into heap->total_allocated_objects */
    } heaps[MOSAIC_HEAP_MAX];
};

/* The first bytes of every page body (within MOSAIC_PAGE_HEADER_SIZE; page.c writes it when it
 * creates a page and when it lays one out for a class). The copies equal the page struct's
 * slot_recip, start - body and side-bitmap word count (verify.c checks): finding an object's
 * page, its slot number and its old bit's word then reads this one cache line. */
struct mosaic_page_header {
    struct mosaic_page *page;
    uint32_t slot_recip;
    uint32_t start_offset;
    uint32_t bitmap_words;           /* mosaic_page_bitmap_words(page) */
};

_Static_assert(sizeof(struct mosaic_page_header) <= MOSAIC_PAGE_HEADER_SIZE, "the page header must fit before the first slot");

static inline const struct mosaic_page_header *
mosaic_page_header_of(VALUE obj)
{
    return (const struct mosaic_page_header *)((uintptr_t)obj & MOSAIC_PAGE_MASK);
}

static inline struct mosaic_page *
mosaic_page_of(VALUE obj)
{
    return mosaic_page_header_of(obj)->page;
}

/* The slot number of obj on its page: its bit in every side bitmap. obj is a slot's start. */
static inline size_t
mosaic_bit_index(VALUE obj)
{
    const struct mosaic_page_header *header = mosaic_page_header_of(obj);
    uintptr_t offset = (uintptr_t)obj - (uintptr_t)header - header->start_offset;
    return (size_t)(((uint64_t)offset * header->slot_recip) >> 32);
}

/* The slot with number (bit) i on page. */
static inline VALUE
mosaic_slot_at(const struct mosaic_page *page, size_t i)
{
    return (VALUE)(page->start + i * page->slot_size);
}

static inline bool
mosaic_marked_p(VALUE obj)
{
    const struct mosaic_page *page = mosaic_page_of(obj);
    return mosaic_bit_test(page->mark_bits, mosaic_bit_index(obj));
}

/* The old bit's word is found from the header alone (the side bitmaps' order and the header's
 * word count), not through page->old_bits: one dependent load fewer, for the write barrier,
 * which tests two objects per reference written (generation.c). */
static inline bool
mosaic_old_p(VALUE obj)
{
    const struct mosaic_page_header *header = mosaic_page_header_of(obj);
    const mosaic_bits_t *old = header->page->side_bits + (size_t)MOSAIC_SIDE_OLD * header->bitmap_words;
    return mosaic_bit_test(old, mosaic_bit_index(obj));
}

/* Objects (live, zombies, garbage not swept yet) in the class, given the objects ever
 * allocated in it (`allocated`: heap->total_allocated_objects, plus what caches hold when they
 * were not flushed). Objects compaction moved across classes count where they are now. */
static inline size_t
mosaic_heap_used_slots(const struct mosaic_heap *heap, size_t allocated)
{
    return (allocated + heap->moved_in_objects) - (heap->total_freed_objects + heap->moved_out_objects);
}

/* Every page of every class, findable by address (page_table.c): for conservative stack scans
 * (mosaic_pointer_to_slot_p) and for the heap checker. */
struct mosaic_page_table {
    /* All pages of all classes, sorted by body address, for conservative lookups. */
    struct mosaic_page **sorted;
    size_t sorted_count;
    size_t sorted_capa;
    /* The same pages by body address, open addressing (page_table.c); mask = capacity - 1. */
    struct mosaic_page **index;
    size_t index_mask;
    uintptr_t lomem, himem;
    struct mosaic_arena *arenas;     /* every mapping that holds page bodies (arena.c) */
    size_t descriptor_bytes;         /* page.c: the descriptors of all pages, pooled ones too */
};

/* The empty-page pool (page.c): pages no class uses, resident, linked through free_next. */
struct mosaic_page_pool {
    struct mosaic_page *head;
    size_t count;
    size_t taken;                    /* pages taken from the pool since the latest GC */
    size_t reserve;                  /* pages the pool keeps however long idle (hysteresis) */
    size_t pages_returned;           /* pages ever given back to the OS (GC.stat :mosaic_pages_returned) */
};


/* size_class.c: the size-class table and the classes' geometry */
extern size_t mosaic_heap_sizes[MOSAIC_HEAP_MAX + 1];
void mosaic_size_classes_from_env(void);
void mosaic_heap_init(mosaic_objspace_t *objspace);
extern uint8_t mosaic_size_to_heap[MOSAIC_MAX_SLOT_SIZE / 8 + 1];
void mosaic_size_too_large(size_t size) __attribute__((noreturn, cold));

/* The class for `size` bytes; inline: every allocation asks. */
static inline size_t
mosaic_heap_index_for_size(size_t size)
{
    if (RB_UNLIKELY(size > mosaic_heap_sizes[MOSAIC_HEAP_COUNT - 1])) mosaic_size_too_large(size);
    return mosaic_size_to_heap[(size + 7) / 8];
}
size_t mosaic_heap_available_slots(mosaic_objspace_t *objspace);
size_t mosaic_heap_allocated_pages(mosaic_objspace_t *objspace);

/* arena.c: page bodies */
bool mosaic_arena_take_body(mosaic_objspace_t *objspace, struct mosaic_page *page);
void mosaic_arena_return_body(mosaic_objspace_t *objspace, struct mosaic_arena *arena, char *body);
size_t mosaic_arena_metadata_bytes(mosaic_objspace_t *objspace);
void mosaic_arenas_free(mosaic_objspace_t *objspace);

/* page_table.c: pages by address */
bool mosaic_page_table_add(mosaic_objspace_t *objspace, struct mosaic_page *page);
void mosaic_page_table_remove(mosaic_objspace_t *objspace, struct mosaic_page *page);
bool mosaic_pointer_to_slot_p(mosaic_objspace_t *objspace, const void *ptr);
void mosaic_page_table_free(mosaic_objspace_t *objspace);

/* page.c: the page lifecycle */
struct mosaic_page *mosaic_page_new(mosaic_objspace_t *objspace, struct mosaic_heap *heap);
void mosaic_page_release(mosaic_objspace_t *objspace, struct mosaic_heap *heap, size_t index);
void mosaic_heap_retire_empty_page(mosaic_objspace_t *objspace, struct mosaic_heap *heap, size_t index);
void mosaic_page_make_nursery(struct mosaic_heap *heap, struct mosaic_page *page);
size_t mosaic_heap_release_empty_pages(mosaic_objspace_t *objspace);
void mosaic_heap_free_all(mosaic_objspace_t *objspace);

/* Bucket of a page with free slots: 0 for the fullest (under 1/4 free) to 3 (3/4 or more). */
static inline int
mosaic_free_bucket(const struct mosaic_page *page)
{
    int b = (int)((size_t)page->free_slots * MOSAIC_FREE_BUCKETS / page->total_slots);
    return b < MOSAIC_FREE_BUCKETS ? b : MOSAIC_FREE_BUCKETS - 1;
}

/* Queues a swept page with free slots in its class (page_queue.c): a nursery page on the
 * nursery's queue, any other by fullness. */
static inline void
mosaic_heap_queue_free_page(struct mosaic_heap *heap, struct mosaic_page *page)
{
    if (page->nursery) {
        page->free_next = heap->nursery_free;
        heap->nursery_free = page;
        return;
    }
    int b = mosaic_free_bucket(page);
    page->free_next = heap->free_pages[b];
    heap->free_pages[b] = page;
}

/* page_queue.c: pages with free slots, by fullness, and pages held back */
struct mosaic_page *mosaic_heap_dequeue_free_page(struct mosaic_heap *heap);
void mosaic_heap_requeue_free_pages(struct mosaic_heap *heap);
void mosaic_heap_drop_reserves(mosaic_objspace_t *objspace);
void mosaic_heap_release_reserves(mosaic_objspace_t *objspace);

/* page.c: the empty-page pool */
struct mosaic_page *mosaic_pool_take(mosaic_objspace_t *objspace, struct mosaic_heap *heap);
void mosaic_pool_put(mosaic_objspace_t *objspace, struct mosaic_heap *heap, size_t index);
size_t mosaic_pool_slots(mosaic_objspace_t *objspace);
size_t mosaic_pool_trim(mosaic_objspace_t *objspace, bool all, bool credit);

/* alloc.c: caches and the allocation paths */
struct mosaic_cache *mosaic_cache_new(mosaic_objspace_t *objspace);
void mosaic_cache_free(mosaic_objspace_t *objspace, struct mosaic_cache *cache);
void mosaic_caches_clear(mosaic_objspace_t *objspace);
size_t mosaic_heap_total_allocated(mosaic_objspace_t *objspace, int heap_index);
size_t mosaic_total_allocated(mosaic_objspace_t *objspace);
size_t mosaic_live_slots(mosaic_objspace_t *objspace);
VALUE mosaic_new_obj(mosaic_objspace_t *objspace, struct mosaic_cache *cache, VALUE klass, VALUE flags,
                     VALUE v1, VALUE v2, VALUE v3, bool wb_protected, size_t alloc_size);

#pragma GCC visibility pop

#endif /* MOSAIC_SPACE_H */
