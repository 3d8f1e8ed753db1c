/*
 * debug.h: the checking build's tools. The heap checker (verify.c) and the race mode
 * (stress_races.c: MOSAIC_STRESS_RACES delays each hand-over between the GC threads and
 * the mutator). And, in every build, the reference-update probe (ref_update_probe.c:
 * MOSAIC_REF_UPDATE_PROBE=1).
 */
#ifndef MOSAIC_DEBUG_H
#define MOSAIC_DEBUG_H

#include "core/defs.h"

#pragma GCC visibility push(hidden)

/* stress_races.c: MOSAIC_STRESS_RACES=N (checking build) delays a thread that reaches a race
 * point, a hand-over between the GC threads and the mutator, by a random 0..N us or a yield. */
extern unsigned int mosaic_stress_races_us;
void mosaic_race_delay(void);
size_t mosaic_race_delays(void);

static inline void
mosaic_race_point(void)
{
#if MOSAIC_CHECK
    if (RB_UNLIKELY(__atomic_load_n(&mosaic_stress_races_us, __ATOMIC_RELAXED))) mosaic_race_delay();
#endif
}

/* verify.c: the heap checker */
size_t mosaic_verify_heap(mosaic_objspace_t *objspace, bool raise_on_error);
size_t mosaic_verify_roots(mosaic_objspace_t *objspace);
void mosaic_verify_edge(mosaic_objspace_t *objspace, VALUE child, bool weak);
void mosaic_define_verify(void);

/* The checking build's own state: forced collections, when the heap and the tri-color
 * invariant were last checked, and what the heap checker is walking. */
struct mosaic_checks {
    size_t stress_minor_countdown;   /* allocations left before a forced GC (MOSAIC_STRESS_MINOR) */
    size_t stress_compactions;       /* MOSAIC_STRESS_COMPACT's compactions so far */
    size_t stress_verified_at;       /* total allocations at the last verification */
    size_t tricolor_checked_at;      /* total allocations at the latest tri-color check */
    bool verify_roots_due;           /* objects moved since the latest heap check: check the roots too (verify.c) */
    void *verify_ctx;                /* set while the heap checker walks edges (verify.c) */
    /* Set while something walks edges outside the mark phase (the heap checker): marking's
     * entry points hand each edge to it instead of marking (mark.c). */
    void (*edge_visitor)(mosaic_objspace_t *objspace, VALUE child, bool weak);
};

/* ref_update_probe.c: MOSAIC_REF_UPDATE_PROBE=1 times, at every minor GC, the walk of CRuby's
 * VM-wide tables that an evacuating young space would add (nothing moves). */
struct mosaic_ref_probe {
    size_t minors;                   /* minor GCs probed */
    uint64_t walk_ns;                /* rb_gc_update_vm_references, all minors */
    uint64_t walk_max_ns;            /* ... the longest */
    uint64_t pause_ns;               /* the minors' pauses from their start to the probe */
    size_t rescanned;                /* remembered objects the minors rescanned */
    size_t survivors;                /* young objects the minors traced */
    size_t allocated;                /* objects allocated before those minors, since the GC before each */
    size_t allocated_at_gc;          /* the allocation count at the latest GC's end */
#define MOSAIC_PROBE_CATEGORIES 16
    const char *category[MOSAIC_PROBE_CATEGORIES];  /* root categories seen (CRuby's static names) */
    size_t root_young[MOSAIC_PROBE_CATEGORIES];     /* root references to young objects not pinned, by category */
    size_t root_young_pinned;        /* root references to young objects the minor pinned */
    size_t table_survivors;          /* young survivors the VM's tables can hold */
    size_t table_unpinned_survivors; /* ... that the minor did not pin */
    size_t pinned_survivors;         /* young survivors the minor pinned */
    size_t allocated_pages;          /* pages holding a young object, dead or alive, all minors */
    size_t survivor_pages;           /* pages holding a young survivor, all minors */
    size_t unmovable_pages;          /* ... holding one that could not move (pinned or table-held) */
};
void mosaic_ref_update_probe(mosaic_objspace_t *objspace, uint64_t gc_start_ns);
void mosaic_ref_update_probe_gc_end(mosaic_objspace_t *objspace);
void mosaic_ref_update_probe_roots(mosaic_objspace_t *objspace);
void mosaic_ref_update_probe_report(mosaic_objspace_t *objspace);

#pragma GCC visibility pop

#endif /* MOSAIC_DEBUG_H */
