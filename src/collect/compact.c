/*
 * compact.c: compaction (GC.compact, GC.verify_compaction_references, GC.auto_compact).
 *
 * Owns: choosing what moves where (each object to the size class CRuby's
 * rb_gc_obj_optimal_size asks for, as the default GC's gc_compact_destination_pool; per class,
 * the pages it keeps, planned from what every class holds and sends, and the pages it
 * empties), moving one object (its slot bytes, its GC bits, the address-keyed tables that name it,
 * a T_OBJECT's shape when it changes class), forwarding slots (T_MOVED), updating every
 * reference after the moves, freeing the forwarding slots and the pages the moves emptied; the
 * counters behind GC.latest_compact_info (moved_up / moved_down: across classes) and GC.stat's
 * compact_count / total_moved_objects; the Ruby methods.
 *
 * When: inside a major collection asked to compact (collect.c), after its full mark AND its
 * complete sweep. The heap then holds only marked live objects, zombies and free slots.
 *
 * Invariants:
 *  - Pins are complete only after a full mark: every object reached through rb_gc_mark,
 *    rb_gc_mark_and_pin, a conservative root, a finalizer table value or an object-id Bignum
 *    has its pinned bit (mark.c clears pins only at the start of a major mark). A minor
 *    mark does not trace old objects, so it never compacts.
 *  - Never moved: pinned objects, zombies, T_SYMBOL (the default GC does not move symbols
 *    either). An object moves at most once per compaction: objects arrive only on kept pages,
 *    bound for the class they arrive in; only objects bound elsewhere leave a kept page; the
 *    meeting page is emptied only if nothing arrived on it, and closed to arrivals first.
 *  - An object moves to another class only when CRuby names a size for it
 *    (rb_gc_obj_optimal_size: strings, arrays, T_OBJECTs, hashes) that another class fits
 *    best, and only within the quota of that class's free slots; a T_OBJECT only when CRuby
 *    rebuilds its shape under that class's root shape (the shape fixes its ivar capacity), set
 *    before any reference is updated. Compaction never adds a page (but for
 *    verify_compaction_references' expand_heap). After the move, the content CRuby keeps inside the slot fits it: a
 *    move down copies the smaller slot's bytes, which hold all of that content (that is what the
 *    optimal size measures); content kept outside the slot is re-embedded by CRuby's own
 *    update functions (rb_gc_update_object_references reads the new slot size through
 *    rb_gc_obj_slot_size). The checker verifies that embedded content fits (verify.c).
 *  - A class holds allocated + moved_in - freed - moved_out objects (mosaic_heap_used_slots);
 *    a move across classes also moves one marked slot between the classes' counts.
 *  - T_MOVED slots exist only while `compacting` is set, inside one collection with the world
 *    stopped. While it is set, mosaic_location follows them; before it is cleared, every live
 *    object and the VM were updated (rb_gc_update_object_references,
 *    rb_gc_update_vm_references) and every T_MOVED slot became T_NONE on its page's freelist,
 *    without rb_gc_obj_free (its object lives on at the destination).
 *  - The address-keyed tables are re-keyed at the moment an object moves: object ids (both
 *    directions, objid.c), finalizers (finalize.c), CRuby's generic ivar table. Nothing Mosaic
 *    keeps across collections names a slot that moved: caches are empty (collect.c), the weak
 *    list and the mark stack are empty after marking, zombies never move, and the freelists
 *    and free-page queues of every class where something moved out or in are rebuilt here.
 *  - No compaction while a heap walk is live (it holds a page snapshot and object addresses).
 */
#include <stdlib.h>

#include "core/mosaic.h"

/* A forwarding slot. Only `flags` and `destination` are read. */
struct mosaic_moved {
    VALUE flags;                     /* T_MOVED */
    VALUE dummy;                     /* Qundef */
    VALUE destination;
};

bool
mosaic_moved_p(VALUE obj)
{
    return !RB_SPECIAL_CONST_P(obj) && RB_BUILTIN_TYPE(obj) == T_MOVED;
}

VALUE
mosaic_location(mosaic_objspace_t *objspace, VALUE obj)
{
    if (RB_SPECIAL_CONST_P(obj) || RB_BUILTIN_TYPE(obj) != T_MOVED) return obj;
    MOSAIC_ASSERT(objspace->compact.compacting);
    return ((struct mosaic_moved *)obj)->destination;
}

/* ============================================================ moving */

static bool
movable_p(struct mosaic_page *page, size_t bit, VALUE obj)
{
    switch (RB_BUILTIN_TYPE(obj)) {
      case T_NONE:
      case T_ZOMBIE:
      case T_MOVED:
      case T_SYMBOL:
        return false;
      default:
        break;
    }
    if (mosaic_bit_test(page->pinned_bits, bit)) return false;
    /* After the full mark and the complete sweep, whatever is left is marked. */
    MOSAIC_ASSERT(mosaic_bit_test(page->mark_bits, bit));
    return true;
}

/* The class `obj` belongs in, as the default GC decides (gc_compact_destination_pool): the
 * smallest class that holds rb_gc_obj_optimal_size(obj), the size CRuby would embed its
 * content in (strings, arrays, T_OBJECTs, hashes). 0 (every other type) means no opinion: its
 * own class, `h`. A size no class holds means the content cannot be embedded, and the header
 * (40 bytes at most) belongs in the smallest class. */
static int
destination_class(int h, VALUE obj)
{
    size_t size = rb_gc_obj_optimal_size(obj);
    if (size == 0) return h;
    if (size > mosaic_heap_sizes[MOSAIC_HEAP_COUNT - 1]) return 0;
    return (int)mosaic_heap_index_for_size(size);
}

/* Moves one GC bit of the slot at (sp, sb) to the slot at (dp, db), clearing the source. */
#define MOVE_BIT(field) do { \
    if (mosaic_bit_test(sp->field, sb)) { \
        mosaic_bit_set(dp->field, db); \
        mosaic_bit_clear(sp->field, sb); \
    } \
    else { \
        mosaic_bit_clear(dp->field, db); \
    } \
} while (0)

/* Moves `src` into the free slot `dest`, of its own class or another, and leaves a forwarding
 * slot. Across classes only the smaller slot's bytes are copied: going down, the content CRuby
 * keeps in the slot fits (destination_class); going up, the rest of `dest` is zeroed (a new
 * object's is not, alloc.c; zeros here cost little and leave no stale bytes in a slot CRuby
 * may re-embed into). Content CRuby keeps outside the slot is re-embedded later, by
 * rb_gc_update_object_references, once it fits. */
void
mosaic_move_object(mosaic_objspace_t *objspace, VALUE src, VALUE dest)
{
    struct mosaic_page *sp = mosaic_page_of(src), *dp = mosaic_page_of(dest);
    size_t sb = mosaic_bit_index(src), db = mosaic_bit_index(dest);
    size_t src_size = sp->slot_size, dest_size = dp->slot_size;
    MOSAIC_ASSERT(RBASIC(dest)->flags == 0);

    /* Tables keyed by the address (st_insert may malloc; never a Ruby object). */
    if (RB_FL_TEST_RAW(src, RUBY_FL_EXIVAR)) rb_mv_generic_ivar(src, dest);
    if (RB_FL_TEST_RAW(src, RUBY_FL_SEEN_OBJ_ID)) mosaic_objid_move(objspace, src, dest);
    if (RB_FL_TEST_RAW(src, RUBY_FL_FINALIZE)) mosaic_finalize_move(objspace, src, dest);

    memcpy((void *)dest, (void *)src, src_size < dest_size ? src_size : dest_size);
    if (dest_size > src_size) memset((char *)dest + src_size, 0, dest_size - src_size);

    MOVE_BIT(mark_bits);
    MOVE_BIT(wb_unprotected_bits);
    MOVE_BIT(age0_bits);
    MOVE_BIT(age1_bits);
    MOVE_BIT(old_bits);
    MOVE_BIT(remembered_bits);
    mosaic_bit_clear(dp->pinned_bits, db);   /* a pinned object never moves */

    memset((void *)src, 0, src_size);
    struct mosaic_moved *fwd = (struct mosaic_moved *)src;
    fwd->flags = T_MOVED;
    fwd->dummy = Qundef;
    fwd->destination = dest;
}

/* ======================================================= choosing moves */

struct page_fill {
    struct mosaic_page *page;
    uint32_t used;                   /* slots holding an object or a zombie */
    uint32_t staying;                /* movable objects bound for the page's own class */
    uint32_t leaving[MOSAIC_HEAP_MAX];  /* movable objects bound for each other class */
    bool fixed;                      /* an object on it never moves (movable_p): it cannot empty */
};

/* GC.compact's order: pages that cannot empty first, then the others; densest first among
 * each. *Why fixed pages first*: whatever moves, such a page stays (often a sparse one, holding
 * a few objects pinned since boot, or Symbols), so its free slots are the best destinations;
 * ordered by fill alone it was taken for a page to empty, and the pages that could empty found
 * no room in the dense ones. */
static int
order_compact(const void *a, const void *b)
{
    const struct page_fill *x = a, *y = b;
    if (x->fixed != y->fixed) return x->fixed ? -1 : 1;
    return x->used < y->used ? 1 : x->used > y->used ? -1 : 0;
}

/* verify_compaction_references(toward: :empty): emptiest first, so that objects leave the
 * densest pages (and, with expand_heap, every movable object moves). */
static int
order_toward_empty(const void *a, const void *b)
{
    const struct page_fill *x = a, *y = b;
    return x->used < y->used ? -1 : x->used > y->used ? 1 : 0;
}

/* One class during a compaction. Its pages are in order (order_compact, or order_toward_empty);
 * order[0..keep-1] are kept: they take objects, their own class's and other classes', and lose
 * only objects bound for another class; order[keep..] are emptied: every movable object on
 * them moves. Free slots are taken in order from the kept pages (page d, from slot `cursor` on);
 * once d reaches keep the class is full and takes no more. quota[to] is how many more of its
 * objects may move to class `to` (plan_quotas). */
struct class_plan {
    struct page_fill *order;
    size_t n, keep, d, cursor;
    size_t bound[MOSAIC_HEAP_MAX]; /* movable objects bound for each other class, all pages */
    size_t quota[MOSAIC_HEAP_MAX];
    size_t free_slots;
    size_t accepted;                 /* objects the other classes may send it (plan_quotas) */
    bool touched;                    /* something moved out or in: its freelists are rebuilt */
};

/* The class obj moves to, from class h: destination_class, unless it is a T_OBJECT for which
 * CRuby has no shape under that class's root shape (rb_gc_rebuild_shape; the shape fixes the ivar
 * capacity): then its own. The rebuilt shape, if any, goes to *shape. */
static int
move_class(int h, VALUE obj, uint32_t *shape)
{
    int to = destination_class(h, obj);
    *shape = 0;
    if (to != h && RB_BUILTIN_TYPE(obj) == T_OBJECT && (*shape = rb_gc_rebuild_shape(obj, (size_t)to)) == 0) return h;
    return to;
}

/* Measures the class's pages (objects, free slots, the movable objects bound for the class
 * itself and for each other class) and orders them; counts the movable objects as considered.
 * A class whose order cannot be malloc'd takes part in nothing (n = 0): compaction is optional. */
static void
plan_measure(mosaic_objspace_t *objspace, struct class_plan *plan, int h)
{
    struct mosaic_heap *heap = &objspace->heaps[h];
    memset(plan, 0, sizeof(*plan));
    if (!(objspace->compact.classes & (1u << h))) return;   /* not chosen by the policy */
    if (heap->page_count == 0 || !(plan->order = malloc(heap->page_count * sizeof(*plan->order)))) return;
    plan->n = heap->page_count;
    for (size_t j = 0; j < plan->n; j++) {
        struct mosaic_page *page = heap->pages[j];
        struct page_fill fill = { .page = page };
        for (size_t i = 0; i < page->total_slots; i++) {
            VALUE obj = (VALUE)(page->start + i * page->slot_size);
            if (RBASIC(obj)->flags == 0) continue;
            fill.used++;
            if (!movable_p(page, i, obj)) {
                fill.fixed = true;
                continue;
            }
            objspace->compact.considered[RB_BUILTIN_TYPE(obj)]++;
            uint32_t shape;
            int to = move_class(h, obj, &shape);
            if (to == h) {
                fill.staying++;
            }
            else {
                fill.leaving[to]++;
                plan->bound[to]++;
            }
        }
        plan->free_slots += page->total_slots - fill.used;
        plan->order[j] = fill;
    }
    qsort(plan->order, plan->n, sizeof(*plan->order),
          objspace->compact.toward_empty ? order_toward_empty : order_compact);
}

/* How many objects each class may send to each other: a class takes from the others as many as
 * its free slots hold, from the larger classes first (a move down saves slot memory; a move up
 * trades a larger slot for the malloc'd buffer it embeds). An object beyond the quota moves
 * within its own class when its page is emptied, else stays. */
static void
plan_quotas(struct class_plan *plans)
{
    for (int to = 0; to < MOSAIC_HEAP_COUNT; to++) {
        size_t room = plans[to].free_slots;
        for (int h = MOSAIC_HEAP_COUNT - 1; h >= 0; h--) {
            if (h == to) continue;
            size_t q = plans[h].bound[to] < room ? plans[h].bound[to] : room;
            plans[h].quota[to] = q;
            room -= q;
            plans[to].accepted += q;
        }
    }
}

/* How many pages the class keeps: the fewest, in order, whose free slots take what the pages
 * after them send to the class itself (the objects staying in it, and those bound elsewhere
 * beyond the quota: the pages to empty use the quota first, mosaic_compact) and what the other
 * classes send (`accepted`). This is where a class's two fingers would meet, rounded up to a
 * whole page: the last kept page is emptied as far as the room left allows once everything
 * else moved (mosaic_compact). */
static void
plan_keep(struct class_plan *plan)
{
    size_t after = 0, room = 0, keep = 0, leaving[MOSAIC_HEAP_MAX] = { 0 };
    for (size_t j = 0; j < plan->n; j++) {
        after += plan->order[j].staying;
        for (int to = 0; to < MOSAIC_HEAP_COUNT; to++) leaving[to] += plan->order[j].leaving[to];
    }
    for (;; keep++) {
        size_t excess = 0;
        for (int to = 0; to < MOSAIC_HEAP_COUNT; to++) {
            if (leaving[to] > plan->quota[to]) excess += leaving[to] - plan->quota[to];
        }
        if (keep == plan->n || room >= after + excess + plan->accepted) break;
        struct page_fill *fill = &plan->order[keep];
        room += fill->page->total_slots - fill->used;
        after -= fill->staying;
        for (int to = 0; to < MOSAIC_HEAP_COUNT; to++) leaving[to] -= fill->leaving[to];
    }
    plan->keep = keep;
}

/* The next free slot of the class's kept pages, or 0 when they are full. */
static VALUE
take_free_slot(struct class_plan *plan)
{
    while (plan->d < plan->keep) {
        struct mosaic_page *page = plan->order[plan->d].page;
        while (plan->cursor < page->total_slots) {
            VALUE v = (VALUE)(page->start + plan->cursor++ * page->slot_size);
            if (RBASIC(v)->flags == 0) return v;
        }
        plan->d++;
        plan->cursor = 0;
    }
    return 0;
}

/* Moves the movable objects of `page`, of class h, to free slots of the kept pages of the class
 * each moves to (move_class): on a kept page, only those bound for another class; on a page to
 * empty, all of them. An object bound for another class beyond the quota (or, never expected,
 * finding no slot there) moves within its own class if its page is emptied, else stays. *Why
 * within its class* (the default GC leaves it in place when the other class is full): its page
 * can still empty; the next compaction may find room where it belongs. An object never moves
 * twice: objects only arrive on kept pages, where they are bound for the class they arrive in,
 * and only objects bound elsewhere leave a kept page. */
static void
move_page(mosaic_objspace_t *objspace, struct class_plan *plans, int h, struct mosaic_page *page, bool emptying,
          size_t *budget)
{
    for (size_t i = 0; i < page->total_slots && *budget > 0; i++) {
        VALUE obj = (VALUE)(page->start + i * page->slot_size);
        if (RBASIC(obj)->flags == 0) continue;
        if (!movable_p(page, i, obj)) continue;

        int type = RB_BUILTIN_TYPE(obj);
        uint32_t shape;
        int to = move_class(h, obj, &shape);
        if (to == h && !emptying) continue;
        VALUE dest = 0;
        if (to != h && plans[h].quota[to] > 0 && (dest = take_free_slot(&plans[to])) != 0) {
            plans[h].quota[to]--;
        }
        if (!dest) {
            if (!emptying) continue;
            to = h;
            shape = 0;
            if (!(dest = take_free_slot(&plans[h]))) continue;
        }
        mosaic_move_object(objspace, obj, dest);
        if (shape) rb_gc_set_shape(dest, shape);
        (*budget)--;

        objspace->compact.moved[type]++;
        plans[h].touched = plans[to].touched = true;
        if (to != h) {
            struct mosaic_heap *from = &objspace->heaps[h], *into = &objspace->heaps[to];
            if (into->slot_size > from->slot_size) objspace->compact.moved_up[type]++;
            else objspace->compact.moved_down[type]++;
            from->moved_out_objects++;
            into->moved_in_objects++;
            /* It was marked by this cycle, and is counted where it lives now. */
            from->marked_slots--;
            into->marked_slots++;
        }
    }
}

/* verify_compaction_references(expand_heap: true): enough empty pages in every class that
 * every movable object moves, as the default GC does: each class gets empty pages for every
 * object bound for it (destination_class), and two more. Pages come from the pool first. */
static void
expand_heaps(mosaic_objspace_t *objspace)
{
    size_t belong[MOSAIC_HEAP_MAX] = { 0 }, empty[MOSAIC_HEAP_MAX] = { 0 };
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        struct mosaic_heap *heap = &objspace->heaps[h];
        for (size_t j = 0; j < heap->page_count; j++) {
            struct mosaic_page *page = heap->pages[j];
            size_t used = 0;
            for (size_t i = 0; i < page->total_slots; i++) {
                VALUE obj = (VALUE)(page->start + i * page->slot_size);
                if (RBASIC(obj)->flags == 0) continue;
                used++;
                belong[destination_class(h, obj)]++;
            }
            if (!used) empty[h]++;
        }
    }
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        struct mosaic_heap *heap = &objspace->heaps[h];
        size_t want = belong[h] / heap->slots_per_page + 2;
        while (empty[h] < want) {
            struct mosaic_page *page = mosaic_pool_take(objspace, heap);
            if (!page) page = mosaic_page_new(objspace, heap);
            if (!page) break;        /* out of memory: compact with what there is */
            empty[h]++;
        }
    }
}

/* ==================================================== after the moves */

static void
update_references(mosaic_objspace_t *objspace)
{
    objspace->compact.updating_references = true;
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        struct mosaic_heap *heap = &objspace->heaps[h];
        for (size_t j = 0; j < heap->page_count; j++) {
            struct mosaic_page *page = heap->pages[j];
            for (size_t i = 0; i < page->total_slots; i++) {
                VALUE obj = (VALUE)(page->start + i * page->slot_size);
                switch (RB_BUILTIN_TYPE(obj)) {
                  case T_NONE:
                  case T_ZOMBIE:
                  case T_MOVED:
                    break;
                  default:
                    /* Also re-embeds a string, array or T_OBJECT whose content now fits
                     * its slot (CRuby reads the slot size through rb_gc_obj_slot_size). */
                    rb_gc_update_object_references(objspace, obj);
                }
            }
        }
    }
    rb_gc_update_vm_references(objspace);
    objspace->compact.updating_references = false;
}

/* Every forwarding slot of the class becomes free (no rb_gc_obj_free: its object lives at the
 * destination); every page's freelist is rebuilt (destination slots were taken from them);
 * pages left empty leave the class, to the OS while the class is above what it keeps
 * (pace.c's freeable_pages, as the sweep does), else to the pool; the queues are rebuilt. */
static void
free_forwarding_slots(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    for (size_t j = 0; j < heap->page_count;) {
        struct mosaic_page *page = heap->pages[j];
        struct mosaic_free_slot *head = NULL;
        size_t free_slots = 0;
        for (size_t i = page->total_slots; i-- > 0;) {
            VALUE obj = (VALUE)(page->start + i * page->slot_size);
            if (RBASIC(obj)->flags != 0 && RB_BUILTIN_TYPE(obj) != T_MOVED) continue;
            struct mosaic_free_slot *slot = (struct mosaic_free_slot *)obj;
            slot->flags = 0;
            slot->next = head;
            head = slot;
            free_slots++;
        }
        page->freelist = head;
        page->free_slots = (uint32_t)free_slots;
        page->free_next = NULL;
        if (free_slots == page->total_slots && page->final_slots == 0) {
            mosaic_heap_retire_empty_page(objspace, heap, j);
            continue;                /* the last page moved into j */
        }
        j++;
    }
    mosaic_heap_requeue_free_pages(heap);
}

/* ============================================ the fragmentation policy */

/* A class is compacted by the policy only if at least this many of its pages would empty:
 * fewer do not pay for the reference-update pass every compaction makes over the whole heap. */
#define MOSAIC_COMPACT_MIN_FREEABLE 2
/* The move budget is never below this many objects, so a short mark still frees pages. */
#define MOSAIC_COMPACT_MIN_MOVES 2048
/* A class whose compaction emptied no page is skipped for 1, 2, 4, ... up to this many majors. */
#define MOSAIC_COMPACT_MAX_BACKOFF 32
/* The cost of one move before any was measured, ns (the order of what a release build measures:
 * docs/decisions/0007-auto-compaction-off-by-default.md). */
#define MOSAIC_COMPACT_MOVE_NS_GUESS 150.0

/* Measures every class from the mark bits of a major GC (before or after its sweep: the marked
 * slots are the live objects either way) and the zombies: its occupied pages (holding a live
 * object or a zombie), how full they are (occupancy = used / (occupied * slots per page)), and
 * how many of them would empty if its objects were packed (freeable = occupied - needed, where
 * needed = max(ceil(used / slots per page), pages with a pinned object)). Pins are complete
 * after a full mark only, so this is meaningful only then. */
static void
measure_classes(mosaic_objspace_t *objspace)
{
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        struct mosaic_heap *heap = &objspace->heaps[h];
        size_t occupied = 0, fixed = 0, used = 0;
        for (size_t j = 0; j < heap->page_count; j++) {
            struct mosaic_page *page = heap->pages[j];
            size_t words = mosaic_page_bitmap_words(page);
            size_t marked = 0;
            bool pinned = false;
            for (size_t w = 0; w < words; w++) {
                marked += (size_t)__builtin_popcountll(page->mark_bits[w]);
                pinned |= page->pinned_bits[w] != 0;
            }
            size_t u = marked + page->final_slots;
            if (u == 0) continue;
            occupied++;
            used += u;
            if (pinned || page->final_slots) fixed++;   /* zombies never move either */
        }
        size_t needed = (used + heap->slots_per_page - 1) / heap->slots_per_page;
        if (fixed > needed) needed = fixed;
        /* What the class keeps after a major GC anyway (mosaic_pace_keep_slots, pace.c: max(init, live / (1 -
         * free_slots_max_ratio)) slots): free slots within that are room the next cycle
         * allocates into, not pages to give back. */
        if (objspace->params.free_slots_max_ratio < 1.0) {
            size_t keep = mosaic_pace_keep_slots(objspace, h, used);
            size_t keep_pages = (keep + heap->slots_per_page - 1) / heap->slots_per_page;
            if (keep_pages > needed) needed = keep_pages;
        }
        objspace->compact.freeable[h] = occupied > needed ? occupied - needed : 0;
        objspace->compact.occupancy[h] = occupied ? (double)used / ((double)occupied * (double)heap->slots_per_page) : 1.0;
        objspace->compact.freed[h] = 0;
    }
}

/* The fragmentation policy, after the full mark of a major GC (collect.c): chooses the classes
 * to compact, those whose occupied pages are at most params.compact_occupancy full and of
 * which at least MOSAIC_COMPACT_MIN_FREEABLE pages would empty (measure_classes), less those
 * backing off after a fruitless compaction; and the move budget, the pause bound:
 *     budget = max(MOSAIC_COMPACT_MIN_MOVES, compact_pause_fraction * mark_ns / move_ns)
 * where mark_ns is this cycle's mark time and move_ns the measured cost of one move. Returns
 * whether any class was chosen (then the caller sweeps at once and compacts). */
bool
mosaic_compact_select(mosaic_objspace_t *objspace)
{
    measure_classes(objspace);
    unsigned int classes = 0;
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        if (objspace->compact.skip[h] > 0) {
            objspace->compact.skip[h]--;
            continue;
        }
        if (objspace->compact.freeable[h] >= MOSAIC_COMPACT_MIN_FREEABLE &&
            objspace->compact.occupancy[h] <= objspace->params.compact_occupancy) {
            classes |= 1u << h;
        }
    }
    if (!classes) return false;
    double move_ns = objspace->compact.move_ns > 0 ? objspace->compact.move_ns : MOSAIC_COMPACT_MOVE_NS_GUESS;
    double budget = objspace->params.compact_pause_fraction * (double)objspace->mark.latest_ns / move_ns;
    objspace->compact.classes = classes;
    objspace->compact.budget = budget < MOSAIC_COMPACT_MIN_MOVES ? MOSAIC_COMPACT_MIN_MOVES
        : budget >= (double)MOSAIC_SIZE_MAX ? MOSAIC_SIZE_MAX : (size_t)budget;
    return true;
}

struct empty_order {
    int h;
    struct mosaic_page *page;
    double fill;                     /* used / total_slots */
};

static int
order_sparsest(const void *a, const void *b)
{
    const struct empty_order *x = a, *y = b;
    return x->fill < y->fill ? -1 : x->fill > y->fill ? 1 : 0;
}

/* Bounded emptying (the fragmentation policy): the pages to empty of every chosen class,
 * sparsest first across classes (the fewest moves per page freed), at most the class's
 * freeable pages (what it keeps anyway stays), until the budget is spent. */
static void
empty_pages_bounded(mosaic_objspace_t *objspace, struct class_plan *plans, size_t *budget)
{
    size_t n = 0;
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) n += plans[h].n - plans[h].keep;
    struct empty_order *order = n ? malloc(n * sizeof(*order)) : NULL;
    if (!order) return;              /* compaction is optional */
    size_t k = 0;
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        for (size_t j = plans[h].keep; j < plans[h].n; j++) {
            struct page_fill *f = &plans[h].order[j];
            order[k++] = (struct empty_order){ h, f->page, (double)f->used / f->page->total_slots };
        }
    }
    qsort(order, n, sizeof(*order), order_sparsest);
    size_t left[MOSAIC_HEAP_MAX];   /* pages each class may still empty: what it measured */
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) left[h] = objspace->compact.freeable[h];
    for (size_t i = 0; i < n && *budget > 0; i++) {
        if (left[order[i].h] == 0) continue;
        left[order[i].h]--;
        move_page(objspace, plans, order[i].h, order[i].page, true, budget);
    }
    free(order);
}

/* Compacts the heap. Inside a major collection (world stopped, during_gc), after its
 * complete sweep; no cache holds a slot. Planned first, then moved:
 *  1. every class's pages are measured and ordered, the quotas between classes set
 *     (plan_quotas) and the kept pages chosen knowing what the other classes send (plan_keep);
 *  2. every page after the kept ones is emptied, sparsest first; then the objects bound for
 *     another class leave the kept pages, within what is left of the quotas;
 *  3. the last kept page of each class (where its fingers meet) is emptied into the pages
 *     before it, as far as their free slots allow: only while nothing arrived on it, that is
 *     while the class's front finger has not reached it, and with every such page closed to
 *     arrivals first. So no object moves twice.
 * Under the fragmentation policy (compact_trigger), only the chosen classes take part (as
 * sources and destinations), at most compact_budget objects move, the pages to empty are taken
 * sparsest first across those classes, at most each class's freeable pages, and objects on kept
 * pages and meeting pages stay (moving them frees no page the class does not keep anyway).
 * *Why planned* (the default GC advances every class's cursors a page at a time): a small
 * class's cursors met after a few rounds, and the objects bound for it from a large class
 * stayed where they were (hashes whose table became an st_table: 77 of 5000 moved down in a
 * smoke run, 3641 planned). */
void
mosaic_compact(mosaic_objspace_t *objspace)
{
    MOSAIC_ASSERT(objspace->during_gc && !objspace->lazy_sweeping);
    if (objspace->heap_walk_depth > 0) return;
    /* Compaction empties and retires pages, the sparse ones the sweep may have held back for
     * an incremental major among them (sweep.c), and rebuilds every queue at its end. */
    mosaic_heap_drop_reserves(objspace);

    bool bounded = objspace->compact.trigger == MOSAIC_COMPACT_BY_FRAGMENTATION;
    if (!bounded) {
        measure_classes(objspace);   /* for GC.latest_compact_info */
        objspace->compact.classes = (1u << MOSAIC_HEAP_COUNT) - 1;
        objspace->compact.budget = SIZE_MAX;
    }
    else {
        objspace->stats.fragmentation_compact_count++;
    }
    memset(objspace->compact.considered, 0, sizeof(objspace->compact.considered));
    memset(objspace->compact.moved, 0, sizeof(objspace->compact.moved));
    memset(objspace->compact.moved_up, 0, sizeof(objspace->compact.moved_up));
    memset(objspace->compact.moved_down, 0, sizeof(objspace->compact.moved_down));
    objspace->stats.compact_count++;
    objspace->compact.compacting = true;

    if (objspace->compact.expand) expand_heaps(objspace);
    size_t pages_before[MOSAIC_HEAP_MAX];
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) pages_before[h] = objspace->heaps[h].page_count;
    struct class_plan plans[MOSAIC_HEAP_MAX];
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) plan_measure(objspace, &plans[h], h);
    plan_quotas(plans);
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) plan_keep(&plans[h]);

    size_t budget = objspace->compact.budget;
    uint64_t move_start = mosaic_now_ns();
    if (bounded) {
        empty_pages_bounded(objspace, plans, &budget);
    }
    else {
        for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
            for (size_t j = plans[h].n; j-- > plans[h].keep;) move_page(objspace, plans, h, plans[h].order[j].page, true, &budget);
        }
        for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
            for (size_t j = 0; j < plans[h].keep; j++) move_page(objspace, plans, h, plans[h].order[j].page, false, &budget);
        }
    }
    bool meet[MOSAIC_HEAP_MAX];
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        meet[h] = !bounded && plans[h].keep >= 2 && plans[h].d < plans[h].keep - 1;
        if (meet[h]) plans[h].keep--;
    }
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        if (meet[h]) move_page(objspace, plans, h, plans[h].order[plans[h].keep].page, true, &budget);
    }
    size_t total = 0;
    for (int t = 0; t <= RUBY_T_MASK; t++) total += objspace->compact.moved[t];
    /* The measured cost of one move (moving average), from compactions that moved enough for
     * the clock to resolve it. */
    if (total >= 256) {
        double ns = (double)(mosaic_now_ns() - move_start) / (double)total;
        objspace->compact.move_ns = objspace->compact.move_ns > 0 ? 0.75 * objspace->compact.move_ns + 0.25 * ns : ns;
    }

    objspace->compact.update_ns = 0;
    if (total > 0) {
        uint64_t t = mosaic_now_ns();
        update_references(objspace);
        objspace->compact.update_ns = mosaic_now_ns() - t;
        objspace->checks.verify_roots_due = true;   /* the next heap check looks at the roots too */
    }
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        if (plans[h].touched || objspace->compact.expand) free_forwarding_slots(objspace, &objspace->heaps[h]);
        free(plans[h].order);
        size_t after = objspace->heaps[h].page_count;
        objspace->compact.freed[h] = pages_before[h] > after ? pages_before[h] - after : 0;
        objspace->stats.compact_freed_pages += objspace->compact.freed[h];
        /* A class the policy compacted without emptying a page (pins, Symbols, zombies it
         * could not see) is skipped for 1, 2, 4, ... majors. */
        if (bounded && (objspace->compact.classes & (1u << h))) {
            if (objspace->compact.freed[h] == 0) {
                unsigned int b = objspace->compact.backoff[h];
                b = b == 0 ? 1 : b * 2 > MOSAIC_COMPACT_MAX_BACKOFF ? MOSAIC_COMPACT_MAX_BACKOFF : b * 2;
                objspace->compact.backoff[h] = objspace->compact.skip[h] = b;
            }
            else {
                objspace->compact.backoff[h] = 0;
            }
        }
    }

    objspace->compact.compacting = false;
    objspace->stats.total_moved_objects += total;
}

/* ====================================================== Ruby methods */

static VALUE
type_symbol(int type)
{
    const char *name;
    switch (type) {
#define TYPE_NAME(t) case t: name = #t; break;
      TYPE_NAME(T_NONE) TYPE_NAME(T_OBJECT) TYPE_NAME(T_CLASS) TYPE_NAME(T_MODULE)
      TYPE_NAME(T_FLOAT) TYPE_NAME(T_STRING) TYPE_NAME(T_REGEXP) TYPE_NAME(T_ARRAY)
      TYPE_NAME(T_HASH) TYPE_NAME(T_STRUCT) TYPE_NAME(T_BIGNUM) TYPE_NAME(T_FILE)
      TYPE_NAME(T_DATA) TYPE_NAME(T_MATCH) TYPE_NAME(T_COMPLEX) TYPE_NAME(T_RATIONAL)
      TYPE_NAME(T_NIL) TYPE_NAME(T_TRUE) TYPE_NAME(T_FALSE) TYPE_NAME(T_SYMBOL)
      TYPE_NAME(T_FIXNUM) TYPE_NAME(T_UNDEF) TYPE_NAME(T_IMEMO) TYPE_NAME(T_NODE)
      TYPE_NAME(T_ICLASS) TYPE_NAME(T_ZOMBIE) TYPE_NAME(T_MOVED)
#undef TYPE_NAME
      default: name = "unknown";
    }
    return ID2SYM(rb_intern(name));
}

/* One figure per type that has one (a type with none is absent, as in the default GC). */
static VALUE
counts_by_type(const size_t *counts)
{
    VALUE hash = rb_hash_new();
    for (int t = 0; t <= RUBY_T_MASK; t++) {
        if (counts[t]) rb_hash_aset(hash, type_symbol(t), SIZET2NUM(counts[t]));
    }
    return hash;
}

/* GC.latest_compact_info: per type, the objects the latest compaction considered, moved, and,
 * of those moved, moved into a larger class (moved_up) and into a smaller one (moved_down). */
static VALUE
latest_compact_info_m(VALUE self)
{
    mosaic_objspace_t *objspace = rb_gc_get_objspace();
    VALUE h = rb_hash_new();
    rb_hash_aset(h, ID2SYM(rb_intern("considered")), counts_by_type(objspace->compact.considered));
    rb_hash_aset(h, ID2SYM(rb_intern("moved")), counts_by_type(objspace->compact.moved));
    rb_hash_aset(h, ID2SYM(rb_intern("moved_up")), counts_by_type(objspace->compact.moved_up));
    rb_hash_aset(h, ID2SYM(rb_intern("moved_down")), counts_by_type(objspace->compact.moved_down));
    if (objspace->stats.compact_count == 0) return h;

    /* Mosaic's: why it ran, the move budget (nil: none), the measured cost of one move (moving
     * average, ns) and of the reference-update pass (this compaction, ms), and per class that
     * took part (by slot size) what the policy measured after the mark and the pages the
     * compaction emptied. */
    static const char *const triggers[] = { "method", "auto_compact", "always", "fragmentation" };
    rb_hash_aset(h, ID2SYM(rb_intern("mosaic_trigger")), ID2SYM(rb_intern(triggers[objspace->compact.trigger])));
    rb_hash_aset(h, ID2SYM(rb_intern("mosaic_move_budget")),
                 objspace->compact.budget == SIZE_MAX ? Qnil : SIZET2NUM(objspace->compact.budget));
    rb_hash_aset(h, ID2SYM(rb_intern("mosaic_move_ns")), DBL2NUM(objspace->compact.move_ns));
    rb_hash_aset(h, ID2SYM(rb_intern("mosaic_update_ms")), DBL2NUM((double)objspace->compact.update_ns / 1e6));
    VALUE classes = rb_hash_new();
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        if (!(objspace->compact.classes & (1u << i))) continue;
        VALUE c = rb_hash_new();
        rb_hash_aset(c, ID2SYM(rb_intern("occupancy")), DBL2NUM(objspace->compact.occupancy[i]));
        rb_hash_aset(c, ID2SYM(rb_intern("freeable_pages")), SIZET2NUM(objspace->compact.freeable[i]));
        rb_hash_aset(c, ID2SYM(rb_intern("freed_pages")), SIZET2NUM(objspace->compact.freed[i]));
        rb_hash_aset(classes, SIZET2NUM(objspace->heaps[i].slot_size), c);
    }
    rb_hash_aset(h, ID2SYM(rb_intern("mosaic_classes")), classes);
    return h;
}

static VALUE
compact_m(VALUE self)
{
    rb_gc_impl_start(rb_gc_get_objspace(), true, true, true, true);
    return latest_compact_info_m(self);
}

static VALUE
auto_compact_get_m(VALUE self)
{
    return RBOOL(((mosaic_objspace_t *)rb_gc_get_objspace())->compact.auto_compact);
}

static VALUE
auto_compact_set_m(VALUE self, VALUE flag)
{
    ((mosaic_objspace_t *)rb_gc_get_objspace())->compact.auto_compact = RTEST(flag);
    return flag;
}

/* GC.verify_compaction_references(toward: nil, double_heap: false, expand_heap: false): a
 * compaction that moves as much as it can (toward: :empty: from the densest pages into the
 * emptiest; with expand_heap or double_heap, into empty pages added first, so every movable
 * object moves), then a check that no root and no live object refers to a slot that is not a
 * live object (a missed reference would point to a freed forwarding slot). Raises on a bad
 * reference (each is printed to stderr). */
static VALUE
verify_compaction_references_m(int argc, VALUE *argv, VALUE self)
{
    static ID keywords[3];
    if (!keywords[0]) {
        keywords[0] = rb_intern("toward");
        keywords[1] = rb_intern("double_heap");
        keywords[2] = rb_intern("expand_heap");
    }
    VALUE options, args[3] = { Qnil, Qfalse, Qfalse };
    rb_scan_args_kw(rb_keyword_given_p(), argc, argv, ":", &options);
    if (!NIL_P(options)) rb_get_kwargs(options, keywords, 0, 3, args);

    mosaic_objspace_t *objspace = rb_gc_get_objspace();
    rb_gc_impl_start(objspace, true, true, true, false);   /* garbage out first */

    objspace->compact.toward_empty = SYMBOL_P(args[0]) && SYM2ID(args[0]) == rb_intern("empty");
    objspace->compact.expand = RTEST(args[1]) || RTEST(args[2]);
    rb_gc_impl_start(objspace, true, true, true, true);
    objspace->compact.toward_empty = false;
    objspace->compact.expand = false;

    objspace->checks.verify_roots_due = true;   /* the heap check below checks the roots too */
    size_t errors = mosaic_verify_heap(objspace, false);
    if (errors) {
        rb_raise(rb_eRuntimeError, "GC.verify_compaction_references: %"PRIuSIZE" bad references (see stderr)", errors);
    }
    return latest_compact_info_m(self);
}

void
mosaic_define_compact(void)
{
    rb_define_singleton_method(rb_mGC, "compact", compact_m, 0);
    rb_define_singleton_method(rb_mGC, "auto_compact", auto_compact_get_m, 0);
    rb_define_singleton_method(rb_mGC, "auto_compact=", auto_compact_set_m, 1);
    rb_define_singleton_method(rb_mGC, "latest_compact_info", latest_compact_info_m, 0);
    rb_define_singleton_method(rb_mGC, "verify_compaction_references", verify_compaction_references_m, -1);
}
