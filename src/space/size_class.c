/*
 * size_class.c: the size-class table and the classes built from it.
 *
 * Owns: mosaic_heap_sizes (MOSAIC_HEAP_COUNT classes; MOSAIC_SIZE_CLASSES chooses a named
 * table at boot), the request-size -> class lookup, each class's geometry (slot size, slots
 * per page, where the first slot starts) and the slot reciprocal check.
 *
 * Invariants:
 *  - The table is chosen once at boot, before any page exists, and never changes: sizes are
 *    multiples of 8 from MOSAIC_BASE_SLOT_SIZE to MOSAIC_MAX_SLOT_SIZE, strictly ascending.
 *  - A page of a class has heap->slots_per_page slots starting heap->start_offset into its
 *    body, and its slot_recip makes mosaic_bit_index exact (checked for every offset at boot).
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
uint8_t mosaic_size_to_heap[MOSAIC_MAX_SLOT_SIZE / 8 + 1];   /* read inline: space.h */

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
        mosaic_size_to_heap[b] = (uint8_t)h;
    }
}

void
mosaic_size_too_large(size_t size)
{
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
