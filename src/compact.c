/*
 * compact.c: compaction (GC.compact, GC.verify_compaction_references, GC.auto_compact).
 *
 * Owns: choosing what moves and where (per size class, two fingers over the class's pages
 * ordered by how full they are), moving one object (its slot bytes, its GC bits, the
 * address-keyed tables that name it), forwarding slots (T_MOVED), updating every reference
 * after the moves, freeing the forwarding slots and the pages the moves emptied; the counters
 * behind GC.latest_compact_info and GC.stat's compact_count / total_moved_objects; the Ruby
 * methods.
 *
 * When: inside a major collection asked to compact (collect.c), after its full mark AND its
 * complete sweep. The heap then holds only marked live objects, zombies and free slots.
 *
 * Invariants:
 *  - Pins are complete only after a full mark: every object reached through rb_gc_mark,
 *    rb_gc_mark_and_pin, a conservative root, a finalizer table value or an object-id Bignum
 *    has its pinned bit (mark.c clears pins only at the start of a major mark). A minor
 *    mark does not trace old objects, so it never compacts.
 *  - An object moves only within its size class, and never when pinned, a zombie, or a
 *    T_SYMBOL (the default GC does not move symbols either).
 *  - T_MOVED slots exist only while `compacting` is set, inside one collection with the world
 *    stopped. While it is set, mosaic_location follows them; before it is cleared, every live
 *    object and the VM were updated (rb_gc_update_object_references,
 *    rb_gc_update_vm_references) and every T_MOVED slot became T_NONE on its page's freelist,
 *    without rb_gc_obj_free (its object lives on at the destination).
 *  - The address-keyed tables are re-keyed at the moment an object moves: object ids (both
 *    directions, objid.c), finalizers (finalize.c), CRuby's generic ivar table. Nothing Mosaic
 *    keeps across collections names a slot that moved: caches are empty (collect.c), the weak
 *    list and the mark stack are empty after marking, zombies never move, and the freelists
 *    and free-page queues of every class where something moved are rebuilt here.
 *  - No compaction while a heap walk is live (it holds a page snapshot and object addresses).
 */
#include <stdlib.h>

#include "mosaic.h"

/* CRuby (variable.c) re-keys an object's generic ivars; exported, not declared in gc/gc.h. */
void rb_mv_generic_ivar(VALUE src, VALUE dst);

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
    MOSAIC_ASSERT(objspace->compacting);
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

/* Moves `src` into the free slot `dest` of the same class, leaves a forwarding slot. */
static void
move_object(mosaic_objspace_t *objspace, VALUE src, VALUE dest)
{
    struct mosaic_page *sp = mosaic_page_of(src), *dp = mosaic_page_of(dest);
    size_t sb = mosaic_bit_index(src), db = mosaic_bit_index(dest);
    MOSAIC_ASSERT(RBASIC(dest)->flags == 0);
    MOSAIC_ASSERT(sp->slot_size == dp->slot_size);

    /* Tables keyed by the address (st_insert may malloc; never a Ruby object). */
    if (RB_FL_TEST_RAW(src, RUBY_FL_EXIVAR)) rb_mv_generic_ivar(src, dest);
    if (RB_FL_TEST_RAW(src, RUBY_FL_SEEN_OBJ_ID)) mosaic_objid_move(objspace, src, dest);
    if (RB_FL_TEST_RAW(src, RUBY_FL_FINALIZE)) mosaic_finalize_move(objspace, src, dest);

    memcpy((void *)dest, (void *)src, sp->slot_size);

    MOVE_BIT(mark_bits);
    MOVE_BIT(wb_unprotected_bits);
    MOVE_BIT(age0_bits);
    MOVE_BIT(age1_bits);
    MOVE_BIT(old_bits);
    MOVE_BIT(remembered_bits);
    mosaic_bit_clear(dp->pinned_bits, db);   /* a pinned object never moves */

    memset((void *)src, 0, sp->slot_size);
    struct mosaic_moved *fwd = (struct mosaic_moved *)src;
    fwd->flags = T_MOVED;
    fwd->dummy = Qundef;
    fwd->destination = dest;
}

/* ======================================================= choosing moves */

struct page_fill {
    struct mosaic_page *page;
    size_t used;                     /* slots holding an object or a zombie */
};

static int
fill_desc(const void *a, const void *b)
{
    size_t x = ((const struct page_fill *)a)->used, y = ((const struct page_fill *)b)->used;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int
fill_asc(const void *a, const void *b)
{
    return -fill_desc(a, b);
}

static size_t
page_used(struct mosaic_page *page)
{
    size_t used = 0;
    for (size_t i = 0; i < page->total_slots; i++) {
        if (RBASIC(page->start + i * page->slot_size)->flags != 0) used++;
    }
    return used;
}

/* verify_compaction_references(expand_heap: true): enough empty pages in the class to take
 * every object it holds, from the pool first. */
static void
expand_heap(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    size_t used = 0, empty = 0;
    for (size_t j = 0; j < heap->page_count; j++) {
        size_t u = page_used(heap->pages[j]);
        used += u;
        if (u == 0) empty++;
    }
    size_t want = used / heap->slots_per_page + 2;
    while (empty < want) {
        struct mosaic_page *page = mosaic_pool_take(objspace, heap);
        if (!page) page = mosaic_page_new(objspace, heap);
        if (!page) break;            /* out of memory: compact with what there is */
        empty++;
    }
}

/* The next free slot of the destination pages order[*d .. limit-1], or 0. */
static VALUE
next_free_slot(struct page_fill *order, size_t *d, size_t limit, size_t *cursor)
{
    while (*d < limit) {
        struct mosaic_page *page = order[*d].page;
        while (*cursor < page->total_slots) {
            VALUE v = (VALUE)(page->start + (*cursor)++ * page->slot_size);
            if (RBASIC(v)->flags == 0) return v;
        }
        (*d)++;
        *cursor = 0;
    }
    return 0;
}

/* Two fingers over the class's pages ordered densest first (toward: :empty, emptiest first):
 * objects of the page at the back finger move into free slots of pages at the front finger,
 * until the fingers meet. Returns the objects moved. */
static size_t
compact_heap(mosaic_objspace_t *objspace, struct mosaic_heap *heap)
{
    if (objspace->compact_expand) expand_heap(objspace, heap);
    size_t n = heap->page_count;
    if (n < 2) return 0;
    struct page_fill *order = malloc(n * sizeof(*order));
    if (!order) return 0;            /* compaction is optional: skip the class */
    for (size_t j = 0; j < n; j++) {
        order[j].page = heap->pages[j];
        order[j].used = page_used(heap->pages[j]);
    }
    qsort(order, n, sizeof(*order), objspace->compact_toward_empty ? fill_asc : fill_desc);

    size_t moved = 0, d = 0, cursor = 0, s = n - 1;
    bool full = false;
    while (d < s && !full) {
        struct mosaic_page *page = order[s].page;
        for (size_t i = 0; i < page->total_slots; i++) {
            VALUE obj = (VALUE)(page->start + i * page->slot_size);
            if (RBASIC(obj)->flags == 0) continue;
            int type = RB_BUILTIN_TYPE(obj);
            objspace->compact_considered[type]++;
            if (!movable_p(page, mosaic_bit_index(obj), obj)) continue;
            VALUE dest = next_free_slot(order, &d, s, &cursor);
            if (!dest) {
                full = true;
                break;
            }
            move_object(objspace, obj, dest);
            objspace->compact_moved[type]++;
            moved++;
        }
        s--;
    }
    free(order);
    return moved;
}

/* ==================================================== after the moves */

static void
update_references(mosaic_objspace_t *objspace)
{
    objspace->updating_references = true;
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
                    rb_gc_update_object_references(objspace, obj);
                }
            }
        }
    }
    rb_gc_update_vm_references(objspace);
    objspace->updating_references = false;
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

/* Compacts the heap. Inside a major collection (world stopped, during_gc), after its
 * complete sweep; no cache holds a slot. */
void
mosaic_compact(mosaic_objspace_t *objspace)
{
    MOSAIC_ASSERT(objspace->during_gc && !objspace->lazy_sweeping);
    if (objspace->heap_walk_depth > 0) return;

    memset(objspace->compact_considered, 0, sizeof(objspace->compact_considered));
    memset(objspace->compact_moved, 0, sizeof(objspace->compact_moved));
    objspace->stats.compact_count++;
    objspace->compacting = true;

    size_t moved[MOSAIC_HEAP_COUNT], total = 0;
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        moved[h] = compact_heap(objspace, &objspace->heaps[h]);
        total += moved[h];
    }
    if (total > 0) {
        update_references(objspace);
        objspace->verify_roots_due = true;   /* the next heap check looks at the roots too */
    }
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        if (moved[h] > 0 || objspace->compact_expand) free_forwarding_slots(objspace, &objspace->heaps[h]);
    }

    objspace->compacting = false;
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

/* GC.latest_compact_info: per type, objects considered and moved. Objects never change size
 * class here, so moved_up and moved_down stay empty. */
static VALUE
latest_compact_info_m(VALUE self)
{
    mosaic_objspace_t *objspace = rb_gc_get_objspace();
    VALUE considered = rb_hash_new(), moved = rb_hash_new();
    for (int t = 0; t <= RUBY_T_MASK; t++) {
        if (objspace->compact_considered[t]) rb_hash_aset(considered, type_symbol(t), SIZET2NUM(objspace->compact_considered[t]));
        if (objspace->compact_moved[t]) rb_hash_aset(moved, type_symbol(t), SIZET2NUM(objspace->compact_moved[t]));
    }
    VALUE h = rb_hash_new();
    rb_hash_aset(h, ID2SYM(rb_intern("considered")), considered);
    rb_hash_aset(h, ID2SYM(rb_intern("moved")), moved);
    rb_hash_aset(h, ID2SYM(rb_intern("moved_up")), rb_hash_new());
    rb_hash_aset(h, ID2SYM(rb_intern("moved_down")), rb_hash_new());
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
    return RBOOL(((mosaic_objspace_t *)rb_gc_get_objspace())->auto_compact);
}

static VALUE
auto_compact_set_m(VALUE self, VALUE flag)
{
    ((mosaic_objspace_t *)rb_gc_get_objspace())->auto_compact = RTEST(flag);
    return flag;
}

struct root_check {
    size_t errors;
};

static void
root_check_i(const char *category, VALUE obj, void *data)
{
    struct root_check *check = data;
    mosaic_objspace_t *objspace = rb_gc_get_objspace();
    bool bad = !mosaic_pointer_to_slot_p(objspace, (void *)obj);
    if (!bad) {
        switch (RB_BUILTIN_TYPE(obj)) {
          case T_NONE:
          case T_MOVED:
          case T_ZOMBIE:
            bad = true;
          default:
            break;
        }
    }
    if (bad) {
        if (check->errors < 20) {
            fprintf(stderr, "[mosaic verify] root (%s) refers to %p, which is not a live object\n",
                    category ? category : "?", (void *)obj);
        }
        check->errors++;
    }
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

    objspace->compact_toward_empty = SYMBOL_P(args[0]) && SYM2ID(args[0]) == rb_intern("empty");
    objspace->compact_expand = RTEST(args[1]) || RTEST(args[2]);
    rb_gc_impl_start(objspace, true, true, true, true);
    objspace->compact_toward_empty = false;
    objspace->compact_expand = false;

    struct root_check check = { 0 };
    rb_objspace_reachable_objects_from_root(root_check_i, &check);
    size_t errors = check.errors + mosaic_verify_heap(objspace, false);
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
