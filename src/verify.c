/*
 * verify.c: the heap checker behind GC.verify_internal_consistency (and, in the checking
 * build, run after every collection).
 *
 * Checks, with the world stopped and every page swept:
 *  - every page is in the sorted index and its page pointer leads back to it;
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
 *    freed forwarding slot), and every key of the address-keyed tables (object ids both
 *    ways, finalizers) names a live object or a zombie with the matching flag;
 *  - every object's content that CRuby keeps inside the slot fits the slot (compaction moves
 *    objects across size classes): an embedded string, array or T_OBJECT, and every hash
 *    (whose table lives in its slot), needs at most its slot size (rb_gc_obj_optimal_size).
 * Returns the number of problems; each is printed to stderr. With raise_on_error it calls
 * rb_bug on the first inconsistent heap, so a core file shows the state.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mosaic.h"

struct verify_ctx {
    mosaic_objspace_t *objspace;
    VALUE parent;
    bool parent_needs_barrier;       /* old, wb-protected and not remembered */
    size_t errors;
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

/* One edge of ctx->parent, strong or weak, as rb_gc_mark_children reports it (mark.c routes
 * its entry points here while verify_ctx is set). A weak edge that survived a collection must
 * point to a live object exactly like a strong one: a dead referent is cleared (Qundef) by the
 * collection that found it dead. */
void
mosaic_verify_edge(mosaic_objspace_t *objspace, VALUE child, bool weak)
{
    struct verify_ctx *ctx = objspace->verify_ctx;
    const char *kind = weak ? "weakly " : "";
    if (RB_SPECIAL_CONST_P(child)) return;
    if (!mosaic_pointer_to_slot_p(ctx->objspace, (void *)child)) {
        report(ctx, "%p (type 0x%x) %srefers to %p, which is not a heap slot",
               (void *)ctx->parent, (unsigned)RB_BUILTIN_TYPE(ctx->parent), kind, (void *)child);
        return;
    }
    switch (RB_BUILTIN_TYPE(child)) {
      case T_NONE:
      case T_ZOMBIE:
      case T_MOVED:
        report(ctx, "%p (type 0x%x) %srefers to %p, a dead slot (type 0x%x)",
               (void *)ctx->parent, (unsigned)RB_BUILTIN_TYPE(ctx->parent), kind, (void *)child,
               (unsigned)RB_BUILTIN_TYPE(child));
        break;
      default:
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

static void
verify_page(struct verify_ctx *ctx, struct mosaic_page *page, size_t *live, size_t *zombies)
{
    if (mosaic_page_of((VALUE)page->start) != page) {
        report(ctx, "page %p: body header does not point back to the page", (void *)page->body);
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
    if (!st_lookup(ctx->objspace->id_to_obj, value, &back) || back != key) {
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
    bool was_during_gc = objspace->during_gc;
    objspace->during_gc = true;
    objspace->verify_ctx = &ctx;

    for (int h = 0; h < MOSAIC_HEAP_COUNT; h++) {
        struct mosaic_heap *heap = &objspace->heaps[h];
        size_t slots = 0;
        for (size_t j = 0; j < heap->page_count; j++) {
            struct mosaic_page *page = heap->pages[j];
            if (page->heap != heap) report(&ctx, "page %p is in heap %d but says otherwise", (void *)page->body, h);
            if (page->before_sweep) report(&ctx, "page %p is not swept after the sweep finished", (void *)page->body);
            slots += page->total_slots;
            verify_page(&ctx, page, &live, &zombies);
            pages++;
        }
        if (slots != heap->total_slots) {
            report(&ctx, "heap %d: pages hold %zu slots, total_slots says %zu", h, slots, heap->total_slots);
        }
    }
    /* The empty-page pool: pages out of every class and out of the index, every slot free and
     * on the page's freelist (heap.c reuses that list as is for the same class). */
    size_t pooled = 0;
    for (struct mosaic_page *page = objspace->pool; page; page = page->free_next) {
        if (++pooled > objspace->pool_count) {
            report(&ctx, "the pool holds more pages than pool_count (%zu), or a cycle", objspace->pool_count);
            break;
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
    if (pooled != objspace->pool_count) {
        report(&ctx, "%zu pages in the pool, pool_count says %zu", pooled, objspace->pool_count);
    }
    if (pages != objspace->sorted_count) {
        report(&ctx, "%zu pages in the heaps, %zu in the sorted index", pages, objspace->sorted_count);
    }
    st_foreach(objspace->obj_to_id, verify_obj_to_id_i, (st_data_t)&ctx);
    st_foreach(objspace->id_to_obj, verify_id_to_obj_i, (st_data_t)&ctx);
    if (objspace->finalizer_table) st_foreach(objspace->finalizer_table, verify_finalizer_i, (st_data_t)&ctx);
    if (objspace->compacting) report(&ctx, "compaction did not finish (compacting is still set)");

    size_t counted_live = mosaic_live_slots(objspace);
    if (live != counted_live) {
        report(&ctx, "%zu live slots found, counters say %zu", live, counted_live);
    }

    objspace->verify_ctx = NULL;
    objspace->during_gc = was_during_gc;
    rb_gc_vm_unlock(lev);

    if (ctx.errors && raise_on_error) {
        rb_bug("Mosaic: heap verification found %zu problems (see above)", ctx.errors);
    }
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
