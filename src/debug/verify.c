/*
 * verify.c: the heap checker behind GC.verify_internal_consistency (and, in the checking
 * build, run after every collection).
 *
 * Checks, with the world stopped and every page swept:
 *  - every page is in the sorted index and its page pointer leads back to it; it is laid out
 *    for its class (slot size, slot count, reciprocal) and no side-bitmap bit beyond its
 *    slots is set (bits are slot numbers, mosaic_bit_index);
 *  - every slot on a page's freelist is T_NONE and belongs to that page; no slot twice; and
 *    every T_NONE slot is on it (caches hand their slots back first, which is always valid);
 *  - zombies counted per page match T_ZOMBIE slots;
 *  - live slots (not T_NONE, not T_ZOMBIE) == total_allocated - total_freed - final slots;
 *  - every reference held by a live object, strong or weak, points to the start of a live
 *    slot (edges come from rb_gc_mark_children with mark.c's entry points routed here);
 *  - generations: an old, write-barrier-protected object that refers, strongly or weakly, to
 *    a young object is remembered (the invariant minor GCs rely on; a miss means a missing
 *    write barrier, or marking that forgot to re-remember a parent).
 *  - compaction (compact.c): no T_MOVED slot is left once a collection ended, so no live
 *    object refers to one (the edge check above reports a reference to a T_MOVED or to a
 *    freed forwarding slot), and every address-keyed table agrees with the heap, both ways:
 *      . Mosaic's object-id tables (obj -> id, id -> obj) and finalizer table: every key names
 *        a live object or a zombie with the table's flag (FL_SEEN_OBJ_ID, FL_FINALIZE); every
 *        object with the flag is found by a lookup of its address (so an entry re-keyed
 *        without re-hashing is caught too); entries and flagged objects are equal in number;
 *      . CRuby's generic ivar table: its keys are exactly the live objects with FL_EXIVAR;
 *      . CRuby's VM weak tables (call infos, overloaded method entries, dynamic symbols,
 *        interned strings): every entry names a live object of the table's type;
 *      . every ObjectSpace::WeakMap (hashed by its keys' addresses, re-hashed by its dcompact
 *        when a key moves): each live entry is found by a lookup of its key;
 *    and, in the checking build after a collection that moved objects (and in
 *    GC.verify_compaction_references), every root names a live object (mosaic_verify_roots).
 *  - the free-page queues: every queued page belongs to the class, is in the page index, is
 *    swept, and is queued once (a page retired to the pool or the OS while queued would
 *    give its slots out again).
 *  - every object's content that CRuby keeps inside the slot fits the slot (compaction moves
 *    objects across size classes): an embedded string, array or T_OBJECT, and every hash
 *    (whose table lives in its slot), needs at most its slot size (rb_gc_obj_optimal_size).
 * Returns the number of problems; each is printed to stderr. With raise_on_error it calls
 * rb_bug on the first inconsistent heap, so a core file shows the state.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/mosaic.h"

struct verify_ctx {
    mosaic_objspace_t *objspace;
    VALUE parent;
    bool parent_needs_barrier;       /* old, wb-protected and not remembered */
    size_t errors;
    /* Address-keyed tables against the heap. */
    size_t seen_obj_id;              /* live objects and zombies with FL_SEEN_OBJ_ID */
    size_t finalizable;              /* ... with FL_FINALIZE */
    size_t exivar;                   /* live objects with FL_EXIVAR */
    struct mosaic_ptr_vec exivar_keys;   /* CRuby's generic ivar table's keys, sorted */
    st_table *wmap_table;            /* the WeakMap table being checked */
    VALUE wmap;
    /* mosaic_verify_tricolor: first pass, a black iseq's unmarked strong children are collected
     * as (parent, child) pairs (any other black parent's are reported at once); second pass
     * (`closure`), the unmarked objects reachable from the grey ones through unmarked objects
     * are collected. */
    bool tricolor;
    struct mosaic_ptr_vec black_to_white;
    bool closure;
    st_table *reached;
    struct mosaic_ptr_vec frontier;
};

static void
report(struct verify_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    if (ctx->errors < 20) {
        fprintf(stderr, "[mosaic verify] ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
    ctx->errors++;
}

/* ", imemo <kind>" for a T_IMEMO (its kind is kept in the flags above the user shift, as
 * CRuby's internal/imemo.h lays them out), else "": the kind names the CRuby code at fault. */
static const char *
imemo_kind(VALUE obj)
{
    static const char *const kinds[] = {
        "env", "cref", "svar", "throw_data", "ifunc", "memo", "ment", "iseq", "tmpbuf", "ast",
        "parser_strterm", "callinfo", "callcache", "constcache",
    };
    static char buf[40];
    if (RB_BUILTIN_TYPE(obj) != T_IMEMO) return "";
    unsigned kind = mosaic_imemo_kind(obj);
    snprintf(buf, sizeof buf, ", imemo %s", kind < sizeof kinds / sizeof kinds[0] ? kinds[kind] : "?");
    return buf;
}

/* An instruction sequence (imemo_iseq, internal/imemo.h): the one kind of parent the tri-color
 * check holds to the weak invariant only (mosaic_verify_tricolor). */
static bool
imemo_iseq_p(VALUE obj)
{
    return RB_BUILTIN_TYPE(obj) == T_IMEMO && mosaic_imemo_kind(obj) == MOSAIC_IMEMO_ISEQ;
}

/* One edge of ctx->parent, strong or weak, as rb_gc_mark_children reports it (mark.c routes
 * its entry points here: checks.edge_visitor). A weak edge that survived a collection must
 * point to a live object exactly like a strong one: a dead referent is cleared (Qundef) by the
 * collection that found it dead. */
void
mosaic_verify_edge(mosaic_objspace_t *objspace, VALUE child, bool weak)
{
    struct verify_ctx *ctx = objspace->checks.verify_ctx;
    const char *kind = weak ? "weakly " : "";
    if (RB_SPECIAL_CONST_P(child)) return;
    if (ctx->closure) {
        /* Only strong edges keep an object alive; a marked object ends the path (a black one
         * will not be traced again, a grey one is a source already). */
        if (weak || !mosaic_pointer_to_slot_p(ctx->objspace, (void *)child) || mosaic_marked_p(child)) return;
        switch (RB_BUILTIN_TYPE(child)) {
          case T_NONE: case T_ZOMBIE: case T_MOVED: return;   /* not an object to reach through */
          default: break;
        }
        if (st_insert(ctx->reached, (st_data_t)child, 0) == 0) mosaic_ptr_vec_push(&ctx->frontier, (void *)child);
        return;
    }
    if (!mosaic_pointer_to_slot_p(ctx->objspace, (void *)child)) {
        report(ctx, "%p (type 0x%x) %srefers to %p, which is not a heap slot",
               (void *)ctx->parent, (unsigned)RB_BUILTIN_TYPE(ctx->parent), kind, (void *)child);
        return;
    }
    switch (RB_BUILTIN_TYPE(child)) {
      case T_NONE:
      case T_ZOMBIE:
      case T_MOVED:
      {
        /* The parent's side bits say how it escaped: traced this cycle or not (marked), old,
         * without write barriers (unprotected), remembered. */
        const struct mosaic_page *pp = mosaic_page_of(ctx->parent);
        size_t pb = mosaic_bit_index(ctx->parent);
        report(ctx, "%p (type 0x%x%s; bits:%s%s%s%s) %srefers to %p, a dead slot (type 0x%x)",
               (void *)ctx->parent, (unsigned)RB_BUILTIN_TYPE(ctx->parent), imemo_kind(ctx->parent),
               mosaic_bit_test(pp->mark_bits, pb) ? " marked" : "", mosaic_bit_test(pp->old_bits, pb) ? " old" : "",
               mosaic_bit_test(pp->wb_unprotected_bits, pb) ? " unprotected" : "",
               mosaic_bit_test(pp->remembered_bits, pb) ? " remembered" : "", kind, (void *)child,
               (unsigned)RB_BUILTIN_TYPE(child));
        break;
      }
      default:
        if (ctx->tricolor && !weak && !mosaic_marked_p(child)) {
            if (imemo_iseq_p(ctx->parent)) {
                /* Decided once the closure is known (mosaic_verify_tricolor). */
                mosaic_ptr_vec_push(&ctx->black_to_white, (void *)ctx->parent);
                mosaic_ptr_vec_push(&ctx->black_to_white, (void *)child);
            }
            else {
                report(ctx, "marked %p (type 0x%x%s), not grey, refers to unmarked %p (type 0x%x) between incremental steps",
                       (void *)ctx->parent, (unsigned)RB_BUILTIN_TYPE(ctx->parent), imemo_kind(ctx->parent),
                       (void *)child, (unsigned)RB_BUILTIN_TYPE(child));
            }
        }
        if (ctx->parent_needs_barrier && !mosaic_old_p(child)) {
            report(ctx, "old %p (type 0x%x) %srefers to young %p (type 0x%x) but is not remembered",
                   (void *)ctx->parent, (unsigned)RB_BUILTIN_TYPE(ctx->parent), kind, (void *)child,
                   (unsigned)RB_BUILTIN_TYPE(child));
        }
        break;
    }
}

/* Whether what CRuby keeps inside `obj`'s slot fits it. Content kept outside (a string, array
 * or T_OBJECT that is not embedded) is not asked about: its optimal size may be larger. */
static bool
content_fits_slot(VALUE obj, size_t slot_size)
{
    switch (RB_BUILTIN_TYPE(obj)) {
      case T_STRING:
        if (RB_FL_TEST_RAW(obj, RSTRING_NOEMBED)) return true;
        break;
      case T_ARRAY:
        if (!RB_FL_TEST_RAW(obj, RARRAY_EMBED_FLAG)) return true;
        break;
      case T_OBJECT:
        if (!RB_FL_TEST_RAW(obj, ROBJECT_EMBED)) return true;
        break;
      case T_HASH:
        break;
      default:
        return true;
    }
    return rb_gc_obj_optimal_size(obj) <= slot_size;
}

static int
value_cmp(const void *a, const void *b)
{
    VALUE x = *(const VALUE *)a, y = *(const VALUE *)b;
    return x < y ? -1 : x > y;
}

/* A live object's or a zombie's entries in the address-keyed tables: its flags say which
 * tables hold it, and a lookup of its address must find it there. */
static void
verify_object_tables(struct verify_ctx *ctx, VALUE obj, bool zombie)
{
    mosaic_objspace_t *objspace = ctx->objspace;
    VALUE flags = RBASIC(obj)->flags;
    if (flags & RUBY_FL_SEEN_OBJ_ID) {
        ctx->seen_obj_id++;
        if (!st_lookup(objspace->objid.obj_to_id, (st_data_t)obj, NULL)) {
            report(ctx, "%p (type 0x%x) has FL_SEEN_OBJ_ID but obj_to_id does not find it", (void *)obj,
                   (unsigned)RB_BUILTIN_TYPE(obj));
        }
    }
    if (flags & RUBY_FL_FINALIZE) {
        ctx->finalizable++;
        if (!objspace->finalize.table || !st_lookup(objspace->finalize.table, (st_data_t)obj, NULL)) {
            report(ctx, "%p (type 0x%x) has FL_FINALIZE but the finalizer table does not find it", (void *)obj,
                   (unsigned)RB_BUILTIN_TYPE(obj));
        }
    }
    if (!zombie && (flags & RUBY_FL_EXIVAR)) {
        ctx->exivar++;
        if (!bsearch(&obj, ctx->exivar_keys.items, ctx->exivar_keys.size, sizeof(VALUE), value_cmp)) {
            report(ctx, "%p (type 0x%x) has FL_EXIVAR but CRuby's generic ivar table has no entry for it",
                   (void *)obj, (unsigned)RB_BUILTIN_TYPE(obj));
        }
    }
}

/* CRuby's ObjectSpace::WeakMap (weakmap.c, Ruby 3.4): a typed T_DATA named "weakmap" whose data
 * is { st_table *table; }, the table keyed by pointers to { key, value } pairs and hashed by the
 * key's address (wmap_hash), so a key that moves must be re-inserted (wmap_compact). A lookup
 * of every live entry's key must find that entry. The hash and compare functions only read the
 * pair: no Ruby code runs. (WeakKeyMap hashes its keys by #hash, which does not change when a
 * key moves: nothing to check beyond its weak edges.) */
struct mosaic_cruby_weakmap {
    st_table *table;
};

static int
verify_wmap_entry_i(st_data_t key, st_data_t val, st_data_t data)
{
    struct verify_ctx *ctx = (struct verify_ctx *)data;
    VALUE k = *(VALUE *)key, v = *(VALUE *)val;
    if (k == Qundef || v == Qundef) return ST_CONTINUE;   /* dead: removed at its next iteration */
    st_data_t found;
    if (!st_lookup(ctx->wmap_table, key, &found)) {
        report(ctx, "WeakMap %p: a lookup of key %p does not find its entry (moved and not re-hashed?)",
               (void *)ctx->wmap, (void *)k);
    }
    else if (found != val) {
        report(ctx, "WeakMap %p: key %p has two entries", (void *)ctx->wmap, (void *)k);
    }
    return ST_CONTINUE;
}

static void
verify_weakmap(struct verify_ctx *ctx, VALUE obj)
{
    if (!RTYPEDDATA_P(obj)) return;
    const rb_data_type_t *type = RTYPEDDATA_TYPE(obj);
    if (!type || !type->wrap_struct_name || strcmp(type->wrap_struct_name, "weakmap") != 0) return;
    struct mosaic_cruby_weakmap *w = RTYPEDDATA_GET_DATA(obj);
    if (!w || !w->table) return;
    ctx->wmap_table = w->table;
    ctx->wmap = obj;
    st_foreach(w->table, verify_wmap_entry_i, (st_data_t)ctx);
    ctx->wmap_table = NULL;
}

static void
verify_page(struct verify_ctx *ctx, struct mosaic_page *page, size_t *live, size_t *zombies)
{
    size_t words = mosaic_page_bitmap_words(page);
    const struct mosaic_page_header *header = mosaic_page_header_of((VALUE)page->start);
    if (mosaic_page_of((VALUE)page->start) != page) {
        report(ctx, "page %p: body header does not point back to the page", (void *)page->body);
    }
    if (page->slot_size != page->heap->slot_size || page->total_slots != page->heap->slots_per_page ||
            page->slot_recip != mosaic_slot_recip(page->slot_size) ||
            page->start != (uintptr_t)page->body + page->heap->start_offset ||
            header->slot_recip != page->slot_recip ||
            header->start_offset != page->start - (uintptr_t)page->body ||
            header->bitmap_words != words) {
        report(ctx, "page %p: laid out for %u-byte slots (%u of them), its class has %zu-byte slots",
               (void *)page->body, page->slot_size, page->total_slots, page->heap->slot_size);
        return;
    }
    /* The side bitmaps follow the struct, `words` words each, in their field order, in a
     * descriptor sized for exactly that (page.c). */
    if (page->descriptor_words != words) {
        report(ctx, "page %p: its descriptor has room for %u words a bitmap, its %u slots need %zu",
               (void *)page->body, page->descriptor_words, page->total_slots, words);
        return;
    }
    mosaic_bits_t **side[MOSAIC_PAGE_SIDE_BITMAPS];
    mosaic_page_side_bitmap_fields(page, side);
    for (size_t k = 0; k < MOSAIC_PAGE_SIDE_BITMAPS; k++) {
        if (*side[k] != page->side_bits + k * words) {
            report(ctx, "page %p: side bitmap %zu is not laid out for %u slots", (void *)page->body, k, page->total_slots);
            return;
        }
    }
    /* Bitmaps hold one bit per slot: no bit beyond the page's slots may be set, in the side
     * bitmaps nor in the mark bits (in the arena, MOSAIC_BITMAP_WORDS words whatever the class). */
    for (size_t w = 0; w < MOSAIC_BITMAP_WORDS; w++) {
        if (page->mark_bits[w] & ~page->heap->slot_bits[w]) {
            report(ctx, "page %p: a mark bit beyond its %u slots (word %zu: 0x%llx)",
                   (void *)page->body, page->total_slots, w, (unsigned long long)page->mark_bits[w]);
        }
    }
    for (size_t k = 0; k < MOSAIC_PAGE_SIDE_BITMAPS; k++) {
        for (size_t w = 0; w < words; w++) {
            if ((*side[k])[w] & ~page->heap->slot_bits[w]) {
                report(ctx, "page %p: side bitmap %zu has a bit beyond its %u slots (word %zu: 0x%llx)",
                       (void *)page->body, k, page->total_slots, w, (unsigned long long)(*side[k])[w]);
            }
        }
    }

    /* Outside an incremental mark nothing waits for a retrace (mark.c, retrace_regreyed). */
    if (!ctx->objspace->incremental.marking) {
        for (size_t w = 0; w < words; w++) {
            if (page->retrace_bits[w]) {
                report(ctx, "page %p: a retrace bit is set outside an incremental mark (word %zu: 0x%llx)",
                       (void *)page->body, w, (unsigned long long)page->retrace_bits[w]);
            }
        }
    }

    /* A swept page has nothing left over from the background sweeper (bg_sweep.c). */
    for (size_t w = 0; w < words; w++) {
        if (page->leftover_bits[w]) {
            report(ctx, "page %p: swept, but the background sweeper's leftovers are still marked (word %zu: 0x%llx)",
                   (void *)page->body, w, (unsigned long long)page->leftover_bits[w]);
        }
    }

    size_t on_freelist = 0, free_slots = 0, page_zombies = 0;
    for (struct mosaic_free_slot *s = page->freelist; s; s = s->next) {
        if ((uintptr_t)s < page->start || (uintptr_t)s >= page->start + page->total_slots * page->slot_size ||
                ((uintptr_t)s - page->start) % page->slot_size) {
            report(ctx, "page %p: freelist entry %p is not a slot of the page", (void *)page->body, (void *)s);
            return;
        }
        if (s->flags != 0) {
            report(ctx, "page %p: freelist entry %p is not free (flags 0x%lx)", (void *)page->body, (void *)s,
                   (unsigned long)s->flags);
        }
        if (++on_freelist > page->total_slots) {
            report(ctx, "page %p: freelist has a cycle", (void *)page->body);
            return;
        }
    }

    for (size_t i = 0; i < page->total_slots; i++) {
        VALUE obj = (VALUE)(page->start + i * page->slot_size);
        if (RBASIC(obj)->flags == 0) {
            free_slots++;
            continue;
        }
        if (RB_BUILTIN_TYPE(obj) == T_ZOMBIE) {
            page_zombies++;
            verify_object_tables(ctx, obj, true);
            continue;
        }
        if (RB_BUILTIN_TYPE(obj) == T_MOVED) {
            report(ctx, "page %p: forwarding slot %p (to %p) left after the collection", (void *)page->body,
                   (void *)obj, (void *)((VALUE *)obj)[2]);
            continue;
        }
        (*live)++;
        if (!content_fits_slot(obj, page->slot_size)) {
            report(ctx, "%p (type 0x%x) needs %zu bytes in its %u-byte slot", (void *)obj,
                   (unsigned)RB_BUILTIN_TYPE(obj), rb_gc_obj_optimal_size(obj), page->slot_size);
        }
        verify_object_tables(ctx, obj, false);
        if (RB_BUILTIN_TYPE(obj) == T_DATA) verify_weakmap(ctx, obj);
        size_t bit = mosaic_bit_index(obj);
        ctx->parent = obj;
        ctx->parent_needs_barrier = ctx->objspace->params.generational &&
            mosaic_bit_test(page->old_bits, bit) &&
            !mosaic_bit_test(page->wb_unprotected_bits, bit) &&
            !mosaic_bit_test(page->remembered_bits, bit);
        rb_gc_mark_children(ctx->objspace, obj);
    }
    if (on_freelist != free_slots) {
        report(ctx, "page %p: %zu slots on the freelist but %zu free", (void *)page->body, on_freelist, free_slots);
    }
    if (page_zombies != page->final_slots) {
        report(ctx, "page %p: %zu zombies but final_slots says %u", (void *)page->body, page_zombies, page->final_slots);
    }
    *zombies += page_zombies;
}

/* An address-keyed table entry must name the start of a live object or a zombie that still has
 * `flag` (compaction re-keys these tables as objects move; the sweep removes dead keys). */
static void
verify_table_object(struct verify_ctx *ctx, const char *table, VALUE obj, VALUE flag)
{
    if (!mosaic_pointer_to_slot_p(ctx->objspace, (void *)obj)) {
        report(ctx, "%s names %p, which is not a heap slot", table, (void *)obj);
        return;
    }
    switch (RB_BUILTIN_TYPE(obj)) {
      case T_NONE:
      case T_MOVED:
        report(ctx, "%s names %p, a dead slot (type 0x%x)", table, (void *)obj, (unsigned)RB_BUILTIN_TYPE(obj));
        return;
      default:
        break;
    }
    if (!RB_FL_TEST_RAW(obj, flag)) {
        report(ctx, "%s names %p (type 0x%x), which lacks the table's flag", table, (void *)obj,
               (unsigned)RB_BUILTIN_TYPE(obj));
    }
}

static int
verify_obj_to_id_i(st_data_t key, st_data_t value, st_data_t data)
{
    struct verify_ctx *ctx = (struct verify_ctx *)data;
    verify_table_object(ctx, "obj_to_id", (VALUE)key, RUBY_FL_SEEN_OBJ_ID);
    st_data_t back;
    if (!st_lookup(ctx->objspace->objid.id_to_obj, value, &back) || back != key) {
        report(ctx, "obj_to_id: %p's id does not lead back to it in id_to_obj", (void *)key);
    }
    return ST_CONTINUE;
}

static int
verify_id_to_obj_i(st_data_t key, st_data_t value, st_data_t data)
{
    verify_table_object((struct verify_ctx *)data, "id_to_obj", (VALUE)value, RUBY_FL_SEEN_OBJ_ID);
    return ST_CONTINUE;
}

static int
verify_finalizer_i(st_data_t key, st_data_t value, st_data_t data)
{
    verify_table_object((struct verify_ctx *)data, "finalizer table", (VALUE)key, RUBY_FL_FINALIZE);
    return ST_CONTINUE;
}

/* CRuby's VM weak tables (rb_gc_vm_weak_table_foreach): their entries must name live objects
 * of the table's type. The sweep removes a dying object's entries
 * (rb_gc_obj_free_vm_weak_references) and compaction updates them (rb_gc_update_vm_references,
 * rb_mv_generic_ivar): an entry naming a free or forwarding slot is a dangling pointer. */
struct weak_table_check {
    struct verify_ctx *ctx;
    const char *name;
    int type;                        /* the entries' type, or -1 for any */
    VALUE flag;                      /* a flag every entry has, or 0 */
    bool generic_ivars;              /* collect the keys (CRuby's generic ivar table) */
};

static int
verify_vm_weak_entry_i(VALUE obj, void *data)
{
    struct weak_table_check *check = data;
    struct verify_ctx *ctx = check->ctx;
    if (RB_SPECIAL_CONST_P(obj)) return ST_CONTINUE;
    if (!mosaic_pointer_to_slot_p(ctx->objspace, (void *)obj)) {
        report(ctx, "CRuby's %s names %p, which is not a heap slot", check->name, (void *)obj);
        return ST_CONTINUE;
    }
    switch (RB_BUILTIN_TYPE(obj)) {
      case T_NONE:
      case T_MOVED:
      case T_ZOMBIE:
        report(ctx, "CRuby's %s names %p, a dead slot (type 0x%x)", check->name, (void *)obj,
               (unsigned)RB_BUILTIN_TYPE(obj));
        return ST_CONTINUE;
      default:
        break;
    }
    if (check->type >= 0 && RB_BUILTIN_TYPE(obj) != check->type) {
        report(ctx, "CRuby's %s names %p of type 0x%x, not 0x%x", check->name, (void *)obj,
               (unsigned)RB_BUILTIN_TYPE(obj), (unsigned)check->type);
    }
    else if (check->flag && !RB_FL_TEST_RAW(obj, check->flag)) {
        report(ctx, "CRuby's %s names %p (type 0x%x), which lacks the table's flag", check->name, (void *)obj,
               (unsigned)RB_BUILTIN_TYPE(obj));
    }
    if (check->generic_ivars) mosaic_ptr_vec_push(&ctx->exivar_keys, (void *)obj);
    return ST_CONTINUE;
}

static int
verify_vm_weak_update_i(VALUE *ptr, void *data)
{
    return ST_CONTINUE;              /* never called: the check never asks for a replacement */
}

static void
verify_vm_weak_table(struct verify_ctx *ctx, enum rb_gc_vm_weak_tables table, const char *name, int type,
                     VALUE flag)
{
    struct weak_table_check check = { ctx, name, type, flag, table == RB_GC_VM_GENERIC_IV_TABLE };
    rb_gc_vm_weak_table_foreach(verify_vm_weak_entry_i, verify_vm_weak_update_i, &check, table);
}

struct root_check {
    mosaic_objspace_t *objspace;
    size_t errors;
};

static void
root_check_i(const char *category, VALUE obj, void *data)
{
    struct root_check *check = data;
    bool bad = !mosaic_pointer_to_slot_p(check->objspace, (void *)obj);
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

/* Every root (rb_objspace_reachable_objects_from_root: the VM, the machine stacks, globals)
 * names a live object. After a compaction a missed root update would name a freed forwarding
 * slot. Not inside a collection (CRuby walks the roots with its own mark function). Returns the
 * problems, each printed to stderr. */
size_t
mosaic_verify_roots(mosaic_objspace_t *objspace)
{
    struct root_check check = { objspace, 0 };
    rb_objspace_reachable_objects_from_root(root_check_i, &check);
    return check.errors;
}

/* One queued page: the class's, indexed, swept; a nursery page only on the nursery's queue.
 * False when the queues hold more pages than the class (a cycle). */
static bool
verify_queued_page(struct verify_ctx *ctx, int h, struct mosaic_heap *heap, struct mosaic_page *page, bool nursery,
                   size_t *queued)
{
    if (++*queued > heap->page_count) {
        report(ctx, "heap %d: the free-page queues hold more pages than the class (%zu), or a cycle", h, heap->page_count);
        return false;
    }
    if (page->heap != heap) report(ctx, "heap %d: queued page %p belongs to another class", h, (void *)page->body);
    if (!mosaic_pointer_to_slot_p(ctx->objspace, (void *)page->start)) {
        report(ctx, "heap %d: queued page %p is not in the page index (pooled or released?)", h, (void *)page->body);
    }
    if (page->cycle->before_sweep) report(ctx, "heap %d: queued page %p is not swept", h, (void *)page->body);
    if (page->nursery != nursery) {
        report(ctx, "heap %d: page %p is queued as %s page but is %s", h, (void *)page->body,
               nursery ? "a nursery" : "an old-space", page->nursery ? "a nursery page" : "not");
    }
    return true;
}

/* The free-page queues of every class: each queued page is the class's, indexed, swept, and
 * queued once (the queues hold at most page_count pages), on the nursery's queue if and only if
 * it is a nursery page; the nursery pages are the class's first pages, as many as it counts. */
static void
verify_free_queues(struct verify_ctx *ctx, int h, struct mosaic_heap *heap)
{
    size_t queued = 0, nursery = 0;
    for (struct mosaic_page *page = heap->nursery_free; page; page = page->free_next) {
        if (!verify_queued_page(ctx, h, heap, page, true, &queued)) return;
    }
    for (int b = 0; b < MOSAIC_FREE_BUCKETS; b++) {
        for (struct mosaic_page *page = heap->free_pages[b]; page; page = page->free_next) {
            if (!verify_queued_page(ctx, h, heap, page, false, &queued)) return;
        }
    }
    for (size_t j = 0; j < heap->page_count; j++) {
        nursery += heap->pages[j]->nursery;
        if (heap->pages[j]->nursery != (j < heap->nursery_pages)) {
            report(ctx, "heap %d: page %zu is %sa nursery page; the nursery is pages 0..%zu", h, j,
                   heap->pages[j]->nursery ? "" : "not ", heap->nursery_pages);
        }
    }
    if (nursery != heap->nursery_pages) {
        report(ctx, "heap %d: %zu nursery pages, the class counts %zu", h, nursery, heap->nursery_pages);
    }
}

size_t
mosaic_verify_heap(mosaic_objspace_t *objspace, bool raise_on_error)
{
    struct verify_ctx ctx = { objspace, Qnil, false, 0 };
    size_t live = 0, zombies = 0, pages = 0;
    unsigned int lev = rb_gc_vm_lock();
    rb_gc_vm_barrier();
    /* Finish the sweep only now: before the barrier, another Ractor could start a new cycle
     * between the sweep and the check (seen under MOSAIC_STRESS_MINOR with Ractors). */
    mosaic_gc_rest(objspace);
    mosaic_caches_clear(objspace);
    /* Edges are walked with rb_gc_mark_children, which reports weak edges too (CRuby's
     * rb_objspace_reachable_objects_from does not). during_gc makes any allocation by a mark
     * function stop with rb_bug, as it would in a real collection. */
    /* After a collection that moved objects, the roots too (not during_gc: CRuby walks them
     * with its own mark function, world stopped by the barrier above). */
    if (objspace->checks.verify_roots_due) {
        objspace->checks.verify_roots_due = false;
        size_t bad_roots = mosaic_verify_roots(objspace);
        if (bad_roots) report(&ctx, "%zu roots name dead slots after objects moved (see above)", bad_roots);
    }
    bool was_during_gc = objspace->during_gc;
    objspace->during_gc = true;
    objspace->checks.verify_ctx = &ctx;
    objspace->checks.edge_visitor = mosaic_verify_edge;

    /* CRuby's weak tables; the generic ivar table's keys are kept (sorted) for the page walk. */
    verify_vm_weak_table(&ctx, RB_GC_VM_CI_TABLE, "call info table", T_IMEMO, 0);
    verify_vm_weak_table(&ctx, RB_GC_VM_OVERLOADED_CME_TABLE, "overloaded method entry table", T_IMEMO, 0);
    verify_vm_weak_table(&ctx, RB_GC_VM_GLOBAL_SYMBOLS_TABLE, "symbol table", T_SYMBOL, 0);
    verify_vm_weak_table(&ctx, RB_GC_VM_FROZEN_STRINGS_TABLE, "interned string table", T_STRING, RSTRING_FSTR);
    verify_vm_weak_table(&ctx, RB_GC_VM_GENERIC_IV_TABLE, "generic ivar table", -1, RUBY_FL_EXIVAR);
    if (ctx.exivar_keys.size) qsort(ctx.exivar_keys.items, ctx.exivar_keys.size, sizeof(VALUE), value_cmp);

    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        struct mosaic_heap *heap = &objspace->heaps[h];
        size_t slots = 0;
        for (size_t j = 0; j < heap->page_count; j++) {
            struct mosaic_page *page = heap->pages[j];
            if (page->heap != heap) report(&ctx, "page %p is in heap %d but says otherwise", (void *)page->body, h);
            if (page->cycle->before_sweep) report(&ctx, "page %p is not swept after the sweep finished", (void *)page->body);
            slots += page->total_slots;
            verify_page(&ctx, page, &live, &zombies);
            pages++;
        }
        verify_free_queues(&ctx, h, heap);
        if (slots != heap->total_slots) {
            report(&ctx, "heap %d: pages hold %zu slots, total_slots says %zu", h, slots, heap->total_slots);
        }
    }
    /* The empty-page pool: pages out of every class and out of the index, every slot free and
     * on the page's freelist (page.c reuses that list as is for the same class). */
    size_t pooled = 0, descriptor_bytes = 0;
    for (struct mosaic_page *page = objspace->pool.head; page; page = page->free_next) {
        if (++pooled > objspace->pool.count) {
            report(&ctx, "the pool holds more pages than pool_count (%zu), or a cycle", objspace->pool.count);
            break;
        }
        descriptor_bytes += mosaic_page_descriptor_size(page->descriptor_words);
        if (((struct mosaic_page_header *)page->body)->page != page) {
            report(&ctx, "pooled page %p: its body's header does not point back to it", (void *)page->body);
        }
        if (mosaic_pointer_to_slot_p(objspace, (void *)page->start)) {
            report(&ctx, "pooled page %p is still in the page index", (void *)page->body);
        }
        if (page->final_slots) report(&ctx, "pooled page %p has %u zombies", (void *)page->body, page->final_slots);
        size_t on_freelist = 0;
        for (struct mosaic_free_slot *slot = page->freelist; slot && on_freelist <= page->total_slots; slot = slot->next) {
            on_freelist++;
        }
        if (on_freelist != page->total_slots) {
            report(&ctx, "pooled page %p: %zu of %u slots on its freelist", (void *)page->body, on_freelist, page->total_slots);
        }
        for (size_t i = 0; i < page->total_slots; i++) {
            if (((VALUE *)(page->start + i * page->slot_size))[0] != 0) {
                report(&ctx, "pooled page %p: slot %zu is not free", (void *)page->body, i);
                break;
            }
        }
    }
    if (pooled != objspace->pool.count) {
        report(&ctx, "%zu pages in the pool, pool_count says %zu", pooled, objspace->pool.count);
    }
    /* The descriptors' bytes the memory breakdown counts: every page's, pooled ones too. */
    for (size_t p = 0; p < objspace->pages.sorted_count; p++) {
        descriptor_bytes += mosaic_page_descriptor_size(objspace->pages.sorted[p]->descriptor_words);
    }
    if (descriptor_bytes != objspace->pages.descriptor_bytes) {
        report(&ctx, "page descriptors hold %zu bytes, descriptor_bytes says %zu", descriptor_bytes,
               objspace->pages.descriptor_bytes);
    }
    if (pages != objspace->pages.sorted_count) {
        report(&ctx, "%zu pages in the heaps, %zu in the sorted index", pages, objspace->pages.sorted_count);
    }
    /* The address index holds the same pages: a lookup of each page's first slot finds it, and
     * it has no other entry. */
    size_t indexed = 0;
    for (size_t i = 0; objspace->pages.index && i <= objspace->pages.index_mask; i++) indexed += objspace->pages.index[i] != NULL;
    if (indexed != objspace->pages.sorted_count) {
        report(&ctx, "%zu pages in the address index, %zu in the sorted index", indexed, objspace->pages.sorted_count);
    }
    for (size_t i = 0; i < objspace->pages.sorted_count; i++) {
        struct mosaic_page *page = objspace->pages.sorted[i];
        if (page->total_slots && !mosaic_pointer_to_slot_p(objspace, (void *)page->start)) {
            report(&ctx, "page %p: the address index does not find its first slot", (void *)page->body);
        }
    }
    st_foreach(objspace->objid.obj_to_id, verify_obj_to_id_i, (st_data_t)&ctx);
    st_foreach(objspace->objid.id_to_obj, verify_id_to_obj_i, (st_data_t)&ctx);
    if (objspace->finalize.table) st_foreach(objspace->finalize.table, verify_finalizer_i, (st_data_t)&ctx);
    /* Both ways: as many entries as flagged objects (each flagged object was found above). */
    if (objspace->objid.obj_to_id->num_entries != ctx.seen_obj_id || objspace->objid.id_to_obj->num_entries != ctx.seen_obj_id) {
        report(&ctx, "obj_to_id has %zu entries and id_to_obj %zu, but %zu objects have FL_SEEN_OBJ_ID",
               (size_t)objspace->objid.obj_to_id->num_entries, (size_t)objspace->objid.id_to_obj->num_entries, ctx.seen_obj_id);
    }
    size_t finalizers = objspace->finalize.table ? objspace->finalize.table->num_entries : 0;
    if (finalizers != ctx.finalizable) {
        report(&ctx, "the finalizer table has %zu entries, but %zu objects have FL_FINALIZE", finalizers, ctx.finalizable);
    }
    if (ctx.exivar_keys.size != ctx.exivar) {
        report(&ctx, "CRuby's generic ivar table has %zu entries, but %zu live objects have FL_EXIVAR",
               ctx.exivar_keys.size, ctx.exivar);
    }
    mosaic_ptr_vec_free(&ctx.exivar_keys);
    if (objspace->compact.compacting) report(&ctx, "compaction did not finish (compacting is still set)");

    size_t counted_live = mosaic_live_slots(objspace);
    if (live != counted_live) {
        report(&ctx, "%zu live slots found, counters say %zu", live, counted_live);
    }

    objspace->checks.edge_visitor = NULL;
    objspace->checks.verify_ctx = NULL;
    objspace->during_gc = was_during_gc;
    rb_gc_vm_unlock(lev);

    if (ctx.errors && raise_on_error) {
        rb_bug("Mosaic: heap verification found %zu problems (see above)", ctx.errors);
    }
    return ctx.errors;
}

static void
grey_add_i(VALUE obj, void *data)
{
    st_insert((st_table *)data, (st_data_t)obj, 0);
}

static void
closure_seed_i(VALUE obj, void *data)
{
    struct verify_ctx *ctx = data;
    mosaic_ptr_vec_push(&ctx->frontier, (void *)obj);
}

/* The unmarked objects reachable from the grey ones (the mark stacks, and the marked
 * wb-unprotected objects the final pause traces again) through unmarked objects, into
 * ctx->reached. */
static void
tricolor_closure(mosaic_objspace_t *objspace, struct verify_ctx *ctx)
{
    ctx->closure = true;
    ctx->reached = st_init_numtable();
    mosaic_mark_stack_each(objspace, closure_seed_i, ctx);
    mosaic_marked_wb_unprotected_each(objspace, closure_seed_i, ctx);
    while (ctx->frontier.size > 0) {
        VALUE obj = (VALUE)ctx->frontier.items[--ctx->frontier.size];
        ctx->parent = obj;
        rb_gc_mark_children(objspace, obj);
    }
    ctx->closure = false;
}

/* Between the steps of an incremental mark (checking build, collect.c): the tri-color
 * invariant of DESIGN.md, "Tri-color invariant and the write barrier". A marked, write-barrier-protected object that is not on the
 * mark stack (black) refers strongly only to marked objects; a miss is a write the barrier did
 * not grey, or a newborn a black object refers to without a barrier.
 * Except an instruction sequence, held to the weak form: it may refer to an unmarked (white)
 * object that some grey object reaches through white objects (a later step marks it). CRuby
 * announces an iseq's literals before it publishes them: loading from binary (compile.c,
 * ibf_load_code) calls RB_OBJ_WRITTEN(iseq, ...) for each literal as it builds the code in a
 * malloc'd buffer, and sets the iseq's code and mark bits only once the sequence, its child
 * sequences included, is loaded. A step in between traces the iseq without those literals
 * (and marks its loader, aux.loader.obj, while ISEQ_NOT_LOADED_YET is set); once the code is
 * published the iseq is black and its literals white, held by the loader's object list, which
 * is grey (or black, and then its barrier greyed them when they were added), and whose path to
 * them never changes. Found by the stress gate on a child of TestGc#test_gc_parameter, while
 * boot loaded the builtin rjit_c. Every other parent keeps the strong form, which catches a
 * missing barrier even while the white object happens to be reachable from a grey one (the
 * path a later deletion would cut). The closure is computed only when an iseq edge needs it.
 * Called inside a pause, between steps. Returns the number of problems (printed). */
/* The re-grey queue holds each object at most once, each marked and with its retrace bit set,
 * and no other object has one: what bounds the queue by the heap, not by the number of bulk
 * writes (mark.c, mosaic_mark_grey_again). */
static void
verify_retrace_queue(struct verify_ctx *ctx, mosaic_objspace_t *objspace)
{
    st_table *queued = st_init_numtable();
    size_t entries = 0;
    for (const struct mosaic_mark_chunk *c = objspace->incremental.retrace.top; c; c = c->prev) {
        for (size_t i = 0; i < c->used; i++) {
            VALUE obj = c->items[i];
            entries++;
            if (st_insert(queued, (st_data_t)obj, 0)) {
                report(ctx, "%p is on the re-grey queue twice", (void *)obj);
            }
            if (!mosaic_marked_p(obj) || !mosaic_bit_test(mosaic_page_of(obj)->retrace_bits, mosaic_bit_index(obj))) {
                report(ctx, "%p is on the re-grey queue but is unmarked or has no retrace bit", (void *)obj);
            }
        }
    }
    size_t bits = 0;
    for (size_t p = 0; p < objspace->pages.sorted_count; p++) {
        const struct mosaic_page *page = objspace->pages.sorted[p];
        size_t words = mosaic_page_bitmap_words(page);
        for (size_t w = 0; w < words; w++) bits += __builtin_popcountll(page->retrace_bits[w]);
    }
    if (bits != entries || entries != objspace->incremental.retrace_queued) {
        report(ctx, "the re-grey queue has %zu entries (counted %zu) but %zu retrace bits are set",
               entries, objspace->incremental.retrace_queued, bits);
    }
    st_free_table(queued);
}

/* Checking build, at the start of every step and of the final pause, while the queue holds
 * what the mutator's bulk writes put on it (collect.c). Returns the number of problems. */
size_t
mosaic_verify_retrace_queue(mosaic_objspace_t *objspace)
{
    struct verify_ctx ctx = { .objspace = objspace };
    verify_retrace_queue(&ctx, objspace);
    return ctx.errors;
}

size_t
mosaic_verify_tricolor(mosaic_objspace_t *objspace)
{
    /* After an overflow, marked objects wait for the final pause's rescan on no stack (mark.c,
     * mark_overflow_rescan): until then the invariant is the rescan's to restore. */
    if (objspace->mark.overflowed) return 0;
    struct verify_ctx ctx = { .objspace = objspace, .tricolor = true };
    st_table *grey = st_init_numtable();
    mosaic_mark_stack_each(objspace, grey_add_i, grey);
    objspace->checks.verify_ctx = &ctx;
    objspace->checks.edge_visitor = mosaic_verify_edge;
    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        struct mosaic_heap *heap = &objspace->heaps[h];
        for (size_t j = 0; j < heap->page_count; j++) {
            struct mosaic_page *page = heap->pages[j];
            size_t words = mosaic_page_bitmap_words(page);
            for (size_t w = 0; w < words; w++) {
                mosaic_bits_t bits = page->mark_bits[w] & ~page->wb_unprotected_bits[w];
                while (bits) {
                    int b = __builtin_ctzll(bits);
                    bits &= bits - 1;
                    VALUE obj = mosaic_slot_at(page, w * 64 + (size_t)b);
                    switch (RB_BUILTIN_TYPE(obj)) {
                      case T_NONE: case T_ZOMBIE: case T_MOVED:
                        report(&ctx, "%p is marked but free (type 0x%x) during an incremental mark",
                               (void *)obj, (unsigned)RB_BUILTIN_TYPE(obj));
                        continue;
                      default:
                        break;
                    }
                    if (st_lookup(grey, (st_data_t)obj, NULL)) continue;
                    ctx.parent = obj;
                    rb_gc_mark_children(objspace, obj);
                }
            }
        }
    }
    if (ctx.black_to_white.size > 0) {
        tricolor_closure(objspace, &ctx);
        for (size_t i = 0; i < ctx.black_to_white.size; i += 2) {
            VALUE parent = (VALUE)ctx.black_to_white.items[i], child = (VALUE)ctx.black_to_white.items[i + 1];
            if (st_lookup(ctx.reached, (st_data_t)child, NULL)) continue;
            report(&ctx, "marked %p (type 0x%x%s), not grey, refers to unmarked %p (type 0x%x), which no grey "
                   "object reaches, between incremental steps", (void *)parent, (unsigned)RB_BUILTIN_TYPE(parent),
                   imemo_kind(parent), (void *)child, (unsigned)RB_BUILTIN_TYPE(child));
        }
        st_free_table(ctx.reached);
        mosaic_ptr_vec_free(&ctx.frontier);
    }
    mosaic_ptr_vec_free(&ctx.black_to_white);
    objspace->checks.edge_visitor = NULL;
    objspace->checks.verify_ctx = NULL;
    st_free_table(grey);
    return ctx.errors;
}

static VALUE
verify_internal_consistency_m(VALUE self)
{
    mosaic_verify_heap(rb_gc_get_objspace(), true);
    return Qnil;
}

void
mosaic_define_verify(void)
{
    rb_define_singleton_method(rb_mGC, "verify_internal_consistency", verify_internal_consistency_m, 0);
}
