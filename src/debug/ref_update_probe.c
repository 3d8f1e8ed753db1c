/*
 * ref_update_probe.c: MOSAIC_REF_UPDATE_PROBE=1, what an evacuating young space would add to
 * every minor GC (issue 37; docs/decisions/0027-reference-updates-per-minor-measured.md).
 *
 * A young space whose survivors move must, after every minor GC's mark, update every
 * reference to a moved object. Most of that work follows what moved: the survivors' own
 * fields, the remembered old objects that point at them, the object-id and generic-ivar
 * entries of moved objects. One part does not: CRuby's VM-wide tables
 * (rb_gc_update_vm_references: the frozen-string table, the call-info table, global
 * variables, the symbol table) are walked whole whatever moved. This probe runs that walk at
 * every minor GC, after marking and before the sweep, with nothing moved (every entry is
 * looked up and left as it is, so the program is unchanged), and times it against the
 * minor's pause up to that point (its mark). It also counts what would move: the young
 * objects each minor traced, and what share they are of the objects allocated since the GC
 * before (the survival rate a nursery's size is chosen by); of those, the ones the VM's tables
 * can hold (which such a space would keep in place, decision 0027) or the mark pinned, and the
 * pages they lie on (pages such a space could not hand back whole); and the root references that
 * name young objects this minor did not pin (what pinning the roots' direct referents would pin).
 * At exit it prints the totals on stderr.
 *
 * Owns: the probe's counters (struct mosaic_ref_probe in debug.h). Off, it costs a test or two
 * per GC (collect.c).
 *
 * Invariants: the walk runs inside the collection, with every page of the previous cycle swept
 * and the background sweeper idle (collect.c, step 2), so every table entry names a whole
 * object; no object is T_MOVED, so mosaic_location answers each object itself. The roots are
 * walked after the minor has left (CRuby walks them only outside a collection) and before the
 * background sweeper takes the new cycle's pages, so the bits read are this minor's; other
 * Ractors run meanwhile, as they do under ObjectSpace.reachable_objects_from_root, so the root
 * counts are for single-Ractor programs.
 */
#include <stdio.h>

#include "core/mosaic.h"

/* Whether a young survivor is of a kind the VM's tables can hold, which a moving young space
 * would keep where it is (decision 0027): frozen strings, Symbols, and the imemos the
 * call-info and overloaded-method tables key (callinfo, ment). */
static bool
table_held_p(VALUE obj)
{
    switch (RB_BUILTIN_TYPE(obj)) {
      case T_STRING: return (RBASIC(obj)->flags & RSTRING_FSTR) != 0;
      case T_SYMBOL: return true;
      case T_IMEMO:
        return mosaic_imemo_kind(obj) == MOSAIC_IMEMO_MENT || mosaic_imemo_kind(obj) == MOSAIC_IMEMO_CALLINFO;
      default: return false;
    }
}

/* Whether an unmarked slot of `page` holds an object (free slots have flags 0). */
static bool
page_has_dead_object(const struct mosaic_page *page)
{
    size_t words = mosaic_page_bitmap_words(page);
    for (size_t w = 0; w < words && w * 64 < page->total_slots; w++) {
        mosaic_bits_t unmarked = ~page->mark_bits[w];
        while (unmarked) {
            size_t b = (size_t)__builtin_ctzll(unmarked);
            unmarked &= unmarked - 1;
            if (w * 64 + b >= page->total_slots) break;
            if (RBASIC(mosaic_slot_at(page, w * 64 + b))->flags != 0) return true;
        }
    }
    return false;
}

/* The young survivors (marked, not old) a moving young space could not move: those the VM's
 * tables can hold, and those this minor pinned (rb_gc_mark rather than rb_gc_mark_movable, the
 * VM stacks, conservative references; pins are cleared at every mark's start). And the pages
 * they lie on, against the pages holding any young object, dead or alive: a page with one
 * unmovable survivor cannot be handed back whole (issue 37). A cycle's young objects fill free
 * slots on every page the lazy sweep hands out, so they spread over more pages than a nursery's
 * would (decision 0028 says how the two compare). */
static void
count_unmovable_survivors(mosaic_objspace_t *objspace, struct mosaic_ref_probe *probe)
{
    for (size_t p = 0; p < objspace->pages.sorted_count; p++) {
        struct mosaic_page *page = objspace->pages.sorted[p];
        size_t words = mosaic_page_bitmap_words(page);
        bool any_young = false, any_unmovable = false;
        for (size_t w = 0; w < words; w++) {
            mosaic_bits_t young = page->mark_bits[w] & ~page->old_bits[w];   /* clear past total_slots */
            any_young |= young != 0;
            mosaic_bits_t pinned = young & page->pinned_bits[w];
            probe->pinned_survivors += (size_t)__builtin_popcountll(pinned);
            any_unmovable |= pinned != 0;
            while (young) {
                size_t b = (size_t)__builtin_ctzll(young);
                young &= young - 1;
                if (!table_held_p(mosaic_slot_at(page, w * 64 + b))) continue;
                probe->table_survivors++;
                probe->table_unpinned_survivors += !((pinned >> b) & 1);
                any_unmovable = true;
            }
        }
        probe->survivor_pages += any_young;
        probe->unmovable_pages += any_unmovable;
        /* A page this cycle allocated into: a young survivor, or a dead young object (unmarked,
         * not free: the previous cycle's sweep freed every earlier dead object). */
        probe->allocated_pages += any_young || page_has_dead_object(page);
    }
}

void
mosaic_ref_update_probe(mosaic_objspace_t *objspace, uint64_t gc_start_ns)
{
    struct mosaic_ref_probe *probe = &objspace->ref_probe;
    uint64_t start = mosaic_now_ns();
    rb_gc_update_vm_references(objspace);
    uint64_t walk = mosaic_now_ns() - start;
    probe->minors++;
    probe->walk_ns += walk;
    if (walk > probe->walk_max_ns) probe->walk_max_ns = walk;
    probe->pause_ns += start > gc_start_ns ? start - gc_start_ns : 0;
    /* What would move: the young objects this minor traced (every object it traced, less the
     * remembered old ones it rescanned), against what was allocated since the previous GC. */
    size_t rescanned = objspace->stats.remembered_rescanned;
    probe->rescanned += rescanned;
    size_t traced = objspace->mark.last_traced[0] - 1;
    probe->survivors += traced > rescanned ? traced - rescanned : 0;
    count_unmovable_survivors(objspace, probe);
    size_t allocated = mosaic_total_allocated(objspace);
    probe->allocated += allocated - probe->allocated_at_gc;
    probe->allocated_at_gc = allocated;
}

/* One root reference (rb_objspace_reachable_objects_from_root): counted when it names a young
 * object, by category, and whether this minor pinned that object already (the VM stacks and
 * conservative references pin). */
static void
count_root_reference_i(const char *category, VALUE obj, void *data)
{
    mosaic_objspace_t *objspace = data;
    struct mosaic_ref_probe *probe = &objspace->ref_probe;
    if (RB_SPECIAL_CONST_P(obj) || !mosaic_pointer_to_slot_p(objspace, (void *)obj)) return;
    if (RB_BUILTIN_TYPE(obj) == T_NONE || mosaic_old_p(obj)) return;
    if (mosaic_bit_test(mosaic_page_of(obj)->pinned_bits, mosaic_bit_index(obj))) {
        probe->root_young_pinned++;
        return;
    }
    int c = 0;
    while (c < MOSAIC_PROBE_CATEGORIES && probe->category[c] && probe->category[c] != category) c++;
    if (c == MOSAIC_PROBE_CATEGORIES) c--;      /* the last row takes the rest */
    probe->category[c] = category;
    probe->root_young[c]++;
}

/* After a minor GC has left (the world no longer stopped for it, its sweep not yet handed to
 * the background sweeper): the root references that name young objects, which a moving young
 * space would have to pin or update (decision 0027). CRuby walks the roots only outside a
 * collection. */
void
mosaic_ref_update_probe_roots(mosaic_objspace_t *objspace)
{
    rb_objspace_reachable_objects_from_root(count_root_reference_i, objspace);
}

/* Any GC: the allocation count the next minor's survival is measured against. */
void
mosaic_ref_update_probe_gc_end(mosaic_objspace_t *objspace)
{
    objspace->ref_probe.allocated_at_gc = mosaic_total_allocated(objspace);
}

void
mosaic_ref_update_probe_report(mosaic_objspace_t *objspace)
{
    const struct mosaic_ref_probe *probe = &objspace->ref_probe;
    double n = probe->minors ? (double)probe->minors : 1.0;
    fprintf(stderr, "[mosaic] ref-update probe: %zu minor GCs; VM tables' update walk %.3f ms mean, %.3f ms max, "
            "%.1f ms total; the minors' pause before the sweep %.3f ms mean, %.1f ms total; "
            "%.0f remembered objects rescanned and %.0f young survivors per minor, %.1f%% of what was "
            "allocated since the GC before\n",
            probe->minors, (double)probe->walk_ns / n / 1e6, (double)probe->walk_max_ns / 1e6,
            (double)probe->walk_ns / 1e6, (double)probe->pause_ns / n / 1e6, (double)probe->pause_ns / 1e6,
            (double)probe->rescanned / n, (double)probe->survivors / n,
            probe->allocated ? 100.0 * (double)probe->survivors / (double)probe->allocated : 0.0);
    size_t unpinned = 0;
    for (int c = 0; c < MOSAIC_PROBE_CATEGORIES; c++) unpinned += probe->root_young[c];
    fprintf(stderr, "[mosaic] ref-update probe: young survivors the VM's tables can hold (frozen strings, "
            "Symbols, callinfo and ment imemos) %zu, %.1f per minor; root references to young objects %zu "
            "not pinned (%.2f per minor), %zu pinned already (%.1f per minor); not pinned, by root:",
            probe->table_survivors, (double)probe->table_survivors / n, unpinned, (double)unpinned / n,
            probe->root_young_pinned, (double)probe->root_young_pinned / n);
    for (int c = 0; c < MOSAIC_PROBE_CATEGORIES && probe->category[c]; c++) {
        fprintf(stderr, " %s %zu", probe->category[c], probe->root_young[c]);
    }
    fprintf(stderr, "\n");
    size_t unmovable = probe->pinned_survivors + probe->table_unpinned_survivors;
    fprintf(stderr, "[mosaic] ref-update probe: young survivors that could not move %zu (%.1f per minor: "
            "%zu pinned by the mark, %zu more the tables can hold); pages holding young objects %.1f per minor, "
            "young survivors %.1f, one that could not move %.1f (%.0f%% of those holding young objects)\n",
            unmovable, (double)unmovable / n, probe->pinned_survivors, probe->table_unpinned_survivors,
            (double)probe->allocated_pages / n, (double)probe->survivor_pages / n, (double)probe->unmovable_pages / n,
            probe->allocated_pages ? 100.0 * (double)probe->unmovable_pages / (double)probe->allocated_pages : 0.0);
}
