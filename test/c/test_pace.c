/*
 * test_pace.c: unit tests of the pacer's formulas (src/policy/pace_math.h, the functions
 * pace.c calls), compiled without any Ruby header. Owns two kinds of checks:
 *
 *  - each formula alone, at its edges: zero live, empty classes, huge sizes and factors that
 *    must saturate, ratios and factors at the bounds config.c accepts (ratios 0 and 1,
 *    factors 1 and infinity), NaN where a product can be one;
 *  - a simulation in the spirit of Go's mgcpacer_test.go: a program (live slots, allocation
 *    and malloc per tick) run through the formulas composed as pace.c composes them, GC after
 *    GC, with properties asserted over the whole run: a steady program converges to a heap
 *    target between what the free-slot ratios allow and stays there; a program whose live
 *    data doubles doubles its target, growing by at most the growth factor per GC; one whose
 *    live data falls gives pages back; the malloc limit rises with malloc and decays without
 *    it, within its bounds; the GC time share follows the time spent in GC.
 *
 * The simulation models one size class and majors only (MOSAIC_GENERATIONAL=0's pacing):
 * the minor GCs' collect-before-grow rule is tested through Ruby (test/test_memory.rb). The
 * program's malloc is garbage that the GC frees at once (as an immediate sweep, or the
 * background sweeper, does: frees that come before the cycle's new malloc do not offset it).
 */
#include <math.h>
#include <string.h>

#include "policy/pace_math.h"
#include "check.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE ((size_t)MOSAIC_PAGE_SIZE)
#define SMAX MOSAIC_SIZE_MAX

/* The defaults of config.c (mosaic_params_defaults). */
#define GROWTH_FACTOR 1.8
#define MIN_RATIO 0.20
#define GOAL_RATIO 0.40
#define MAX_RATIO 0.65
#define INIT_SLOTS ((size_t)10000)
#define MALLOC_MIN (16 * MiB)
#define MALLOC_MAX (32 * MiB)
#define MALLOC_GROWTH 1.4
#define OLDMALLOC_MIN (16 * MiB)
#define OLDMALLOC_MAX (128 * MiB)
#define OLDMALLOC_GROWTH 1.2

/* ======================================================== formulas alone */

static void
test_growth_step(void)
{
    /* An eighth of the pages or of the live malloc, at least 4 MiB. */
    CHECK_EQ(MOSAIC_GROWTH_STEP_MIN, 4 * MiB);
    CHECK_EQ(mosaic_pm_growth_step(0, 0), 4 * MiB);
    CHECK_EQ(mosaic_pm_growth_step(64, 0), 4 * MiB);                 /* 4 MiB of pages */
    CHECK_EQ(mosaic_pm_growth_step(512, 0), 4 * MiB);                /* 32 MiB: exactly the minimum */
    CHECK_EQ(mosaic_pm_growth_step(513, 0), 4 * MiB + PAGE / 8);
    CHECK_EQ(mosaic_pm_growth_step(1024, 0), 8 * MiB);
    CHECK_EQ(mosaic_pm_growth_step(64, 400 * MiB), 50 * MiB);        /* malloc-heavy: the malloc decides */
    CHECK_EQ(mosaic_pm_growth_step(1024, 40 * MiB), 8 * MiB);        /* the larger of the two, not the sum */
    CHECK_EQ(mosaic_pm_growth_step(0, SMAX), SMAX / 8);

    /* Fresh pages wait once the step and the floor's budget are both reached. */
    CHECK(!mosaic_pm_grown_enough(4 * MiB - 1, 4 * MiB, 0));
    CHECK(mosaic_pm_grown_enough(4 * MiB, 4 * MiB, 0));
    CHECK(!mosaic_pm_grown_enough(4 * MiB, 4 * MiB, 8 * MiB));
    CHECK(mosaic_pm_grown_enough(8 * MiB, 4 * MiB, 8 * MiB));
    CHECK(mosaic_pm_grown_enough(SMAX, SMAX, SMAX));

    CHECK_EQ(mosaic_pm_growth_trigger(4 * MiB, 16 * MiB), 16 * MiB);
    CHECK_EQ(mosaic_pm_growth_trigger(50 * MiB, 16 * MiB), 50 * MiB);
    CHECK_EQ(mosaic_pm_growth_trigger(16 * MiB, 16 * MiB), 16 * MiB);
}

static void
test_major_target(void)
{
    /* live / (1 - goal); the growth factor for a goal of 0 or 1 (or one config.c would refuse) */
    CHECK_DOP(mosaic_pm_major_target_factor(0.5, GROWTH_FACTOR), ==, 2.0);
    CHECK_NEAR(mosaic_pm_major_target_factor(GOAL_RATIO, GROWTH_FACTOR), 1.0 / 0.6, 1e-15);
    CHECK_DOP(mosaic_pm_major_target_factor(0.0, GROWTH_FACTOR), ==, GROWTH_FACTOR);
    CHECK_DOP(mosaic_pm_major_target_factor(1.0, GROWTH_FACTOR), ==, GROWTH_FACTOR);
    CHECK_DOP(mosaic_pm_major_target_factor(-0.1, GROWTH_FACTOR), ==, GROWTH_FACTOR);
    CHECK_DOP(mosaic_pm_major_target_factor(NAN, GROWTH_FACTOR), ==, GROWTH_FACTOR);
    CHECK_DOP(mosaic_pm_major_target_factor(0.999, GROWTH_FACTOR), >, 999.0);

    CHECK_EQ(mosaic_pm_major_target(0, 2.0, INIT_SLOTS), INIT_SLOTS);           /* zero live: the init slots */
    CHECK_EQ(mosaic_pm_major_target(4000, 2.0, INIT_SLOTS), INIT_SLOTS);
    CHECK_EQ(mosaic_pm_major_target(6000, 2.0, INIT_SLOTS), 12000);
    CHECK_EQ(mosaic_pm_major_target(6000, 2.0, 0), 12000);
    CHECK_EQ(mosaic_pm_major_target(SMAX, 2.0, 0), SMAX);                      /* saturates */
    CHECK_EQ(mosaic_pm_major_target(1, INFINITY, 0), SMAX);
    CHECK_EQ(mosaic_pm_major_target(1000, NAN, 7), 7);
}

static void
test_keep_slots_and_shrink(void)
{
    /* max(init, live / (1 - max_ratio)) */
    CHECK_EQ(mosaic_pm_keep_slots(35000, 0.5, INIT_SLOTS), 70000);
    CHECK_EQ(mosaic_pm_keep_slots(35000, 0.75, INIT_SLOTS), 140000);
    CHECK_EQ(mosaic_pm_keep_slots(0, 0.5, INIT_SLOTS), INIT_SLOTS);             /* zero live */
    CHECK_EQ(mosaic_pm_keep_slots(0, 0.5, 0), 0);
    CHECK_EQ(mosaic_pm_keep_slots(1000, 0.5, INIT_SLOTS), INIT_SLOTS);
    CHECK_EQ(mosaic_pm_keep_slots(35000, 0.0, 0), 35000);                      /* ratio 0: what is live */
    CHECK_EQ(mosaic_pm_keep_slots(35000, 1.0, 0), SMAX);                       /* ratio 1: everything */
    CHECK_EQ(mosaic_pm_keep_slots(SMAX, 0.5, 0), SMAX);                        /* saturates */
    size_t keep = mosaic_pm_keep_slots(35000, MAX_RATIO, 0);                   /* 2.86x live */
    CHECK_OP(keep, >=, 99999);
    CHECK_OP(keep, <=, 100000);

    /* Whole pages beyond the keep. */
    CHECK_EQ(mosaic_pm_freeable_pages(1000, 1000, 100), 0);
    CHECK_EQ(mosaic_pm_freeable_pages(900, 1000, 100), 0);
    CHECK_EQ(mosaic_pm_freeable_pages(1350, 1000, 100), 3);
    CHECK_EQ(mosaic_pm_freeable_pages(1400, 1000, 100), 4);
    CHECK_EQ(mosaic_pm_freeable_pages(SMAX, 0, 1), SMAX);
}

static void
test_short_of_free(void)
{
    CHECK(!mosaic_pm_short_of_free(20, 100, MIN_RATIO));     /* exactly the ratio: not short */
    CHECK(mosaic_pm_short_of_free(19, 100, MIN_RATIO));
    CHECK(mosaic_pm_short_of_free(0, 0, MIN_RATIO));         /* an empty class is short */
    CHECK(mosaic_pm_short_of_free(0, 0, 0.0));
    CHECK(!mosaic_pm_short_of_free(0, 100, 0.0));            /* ratio 0: never short */
    CHECK(mosaic_pm_short_of_free(99, 100, 1.0));            /* ratio 1: short unless all free */
    CHECK(!mosaic_pm_short_of_free(100, 100, 1.0));
    CHECK(!mosaic_pm_short_of_free(SMAX / 2 + 1, SMAX, 0.5));       /* (double)SMAX is 2^62 */
    CHECK(mosaic_pm_short_of_free(SMAX / 2 - 1024, SMAX, 0.5));
}

static void
test_growth_ask(void)
{
    const size_t T = 100000;
    /* Nothing to grow from, or enough free already. */
    CHECK_EQ(mosaic_pm_growth_ask(0, 0, GOAL_RATIO, GROWTH_FACTOR, 0), 0);
    CHECK_EQ(mosaic_pm_growth_ask(0, 500, GOAL_RATIO, GROWTH_FACTOR, 0), 0);
    CHECK_EQ(mosaic_pm_growth_ask(T, 0, GOAL_RATIO, GROWTH_FACTOR, 0), 0);     /* zero live */
    CHECK_EQ(mosaic_pm_growth_ask(T, 60000, GOAL_RATIO, GROWTH_FACTOR, 0), 0); /* 40% free: the goal */
    /* After growing, free / total is the goal: 85% live -> +42%, 90% -> +50%, all -> +67%. */
    size_t g85 = mosaic_pm_growth_ask(T, 85000, GOAL_RATIO, GROWTH_FACTOR, 0);
    CHECK_OP(g85, >=, 41665);
    CHECK_OP(g85, <=, 41667);
    CHECK_EQ(mosaic_pm_growth_ask(T, 90000, 0.5, GROWTH_FACTOR, 0), 80000);    /* f = 1.8 exactly */
    size_t g100 = mosaic_pm_growth_ask(T, T, GOAL_RATIO, GROWTH_FACTOR, 0);
    CHECK_OP(g100, >=, 66665);
    CHECK_OP(g100, <=, 66667);
    /* Never more than the growth factor: f clamps at it. */
    CHECK_EQ(mosaic_pm_growth_ask(T, T, 0.5, 1.5, 0), 50000);
    CHECK_EQ(mosaic_pm_growth_ask(T, 3 * T, GOAL_RATIO, GROWTH_FACTOR, 0), 80000);
    /* A goal of 0 (or 1): total * (factor - 1) whatever is live. */
    CHECK_EQ(mosaic_pm_growth_ask(T, 0, 0.0, GROWTH_FACTOR, 0), 80000);
    CHECK_EQ(mosaic_pm_growth_ask(T, T, 1.0, 2.0, 0), T);
    CHECK_EQ(mosaic_pm_growth_ask(T, T, 0.0, 1.0, 0), 0);                     /* factor 1: no growth */
    /* Factors at their bound: infinity saturates, then max_slots caps. */
    CHECK_EQ(mosaic_pm_growth_ask(T, T, 0.0, INFINITY, 0), SMAX);
    CHECK_EQ(mosaic_pm_growth_ask(T, T, 0.0, 1e300, 0), SMAX);
    CHECK_EQ(mosaic_pm_growth_ask(T, T, 0.0, INFINITY, 5000), 5000);
    CHECK_EQ(mosaic_pm_growth_ask(SMAX, SMAX, 0.0, INFINITY, 0), SMAX);
    CHECK_EQ(mosaic_pm_growth_ask(T, T, 0.5, 1.5, 70000), 50000);            /* the cap only lowers */

    /* A class's ask: at least a page, less what catch-up steps took. */
    const size_t spp = 1637;
    CHECK_EQ(mosaic_pm_class_ask(T, 60000, 0, spp, GOAL_RATIO, GROWTH_FACTOR, 0), spp);
    CHECK_EQ(mosaic_pm_class_ask(T, 90000, 0, spp, 0.5, GROWTH_FACTOR, 0), 80000);
    CHECK_EQ(mosaic_pm_class_ask(T, 90000, 30000, spp, 0.5, GROWTH_FACTOR, 0), 56000 - 30000);
    CHECK_EQ(mosaic_pm_class_ask(T, 90000, 90000, spp, 0.5, GROWTH_FACTOR, 0), 0);  /* took all it would ask */
    CHECK_EQ(mosaic_pm_class_ask(1000, 1000, 1000, spp, GOAL_RATIO, GROWTH_FACTOR, 0), spp - 1000);
    CHECK_EQ(mosaic_pm_class_ask(0, 0, 0, spp, GOAL_RATIO, GROWTH_FACTOR, 0), spp);  /* an empty class: a page */
}

static void
test_churning(void)
{
    CHECK(mosaic_pm_churning(1600, 1590, 1500, 1000));     /* free slots used up: 10 < 1600 / 16 */
    CHECK(!mosaic_pm_churning(1600, 1000, 990, 1000));     /* 600 free unused, little garbage */
    CHECK(mosaic_pm_churning(1600, 1000, 300, 1000));      /* garbage 700 > 600 free at the start */
    CHECK(!mosaic_pm_churning(1600, 1000, 400, 1000));     /* garbage 600 = 600: not more */
    CHECK(mosaic_pm_churning(1600, 2000, 2000, 1000));     /* used past total: none free */
    CHECK(!mosaic_pm_churning(0, 0, 0, 1000));
    CHECK(!mosaic_pm_churning(1600, 1500, 1500, 1000));    /* 100 free = 1600 / 16: not under */
    CHECK(mosaic_pm_churning(1600, 1501, 1501, 1000));
    /* A full class of old data that nothing (or hardly anything) allocates in. */
    CHECK(!mosaic_pm_churning(1600, 1590, 1590, 0));
    CHECK(!mosaic_pm_churning(1600, 1590, 1500, 11));   /* 11 < 100 free / 8 = 12 */
    CHECK(mosaic_pm_churning(1600, 1590, 1500, 12));    /* 12 >= 100 free / 8 */
}

/* Which classes' asks count in full, and the whole heap's ask that bounds the others'. */
static void
test_shared_budget(void)
{
    CHECK(!mosaic_pm_class_allocating(0, 0));            /* nothing allocated: not allocating */
    CHECK(!mosaic_pm_class_allocating(0, 1000));
    CHECK(!mosaic_pm_class_allocating(124, 1000));       /* 124 < 1000 / 8 */
    CHECK(mosaic_pm_class_allocating(125, 1000));
    CHECK(mosaic_pm_class_allocating(1, 0));             /* full and allocated into */
    /* The whole heap: none while 20% is free, else to the 40% goal. */
    CHECK_EQ(mosaic_pm_heap_ask(1000, 800, MIN_RATIO, GOAL_RATIO, GROWTH_FACTOR), 0);
    CHECK_EQ(mosaic_pm_heap_ask(1000, 900, MIN_RATIO, GOAL_RATIO, GROWTH_FACTOR), 500);  /* 900 / 0.6 = 1500 */
    CHECK_EQ(mosaic_pm_heap_ask(1000, 1000, MIN_RATIO, GOAL_RATIO, GROWTH_FACTOR), 666); /* 1000 / 0.6 = 1666 */
    CHECK_EQ(mosaic_pm_heap_ask(0, 0, MIN_RATIO, GOAL_RATIO, GROWTH_FACTOR), 0);
    /* Allocating classes' asks in full; the others' up to the heap's ask. */
    CHECK_EQ(mosaic_pm_shared_budget(100, 500, 0), 100);
    CHECK_EQ(mosaic_pm_shared_budget(100, 500, 200), 300);
    CHECK_EQ(mosaic_pm_shared_budget(100, 50, 200), 150);
    CHECK_EQ(mosaic_pm_shared_budget(SMAX, 50, 200), SMAX);
}

static void
test_page_bytes(void)
{
    CHECK_EQ(mosaic_pm_page_bytes(0), 0);
    CHECK_EQ(mosaic_pm_page_bytes(1), PAGE);
    CHECK_EQ(mosaic_pm_page_bytes(SMAX / PAGE), SMAX / PAGE * PAGE);
    CHECK_EQ(mosaic_pm_page_bytes(SMAX / PAGE + 1), SMAX);
    CHECK_EQ(mosaic_pm_page_bytes(SIZE_MAX), SMAX);
    CHECK_EQ(mosaic_pm_slots_page_bytes(0, 1637), 0);
    CHECK_EQ(mosaic_pm_slots_page_bytes(1, 1637), PAGE);
    CHECK_EQ(mosaic_pm_slots_page_bytes(1637, 1637), PAGE);
    CHECK_EQ(mosaic_pm_slots_page_bytes(1638, 1637), 2 * PAGE);
    CHECK_EQ(mosaic_pm_slots_page_bytes(SMAX, 1), SMAX);
    CHECK_EQ(mosaic_pm_slots_page_bytes(SIZE_MAX, 1), SMAX);
}

static void
test_free_slot_floor(void)
{
    /* heap_free_slots 40-byte slots per Ractor, 1 to 8 of them */
    CHECK_EQ(mosaic_pm_floor_bytes(4096, 1), 4096 * 40);
    CHECK_EQ(mosaic_pm_floor_bytes(4096, 0), 4096 * 40);
    CHECK_EQ(mosaic_pm_floor_bytes(4096, 3), 3 * 4096 * 40);
    CHECK_EQ(mosaic_pm_floor_bytes(4096, 8), 8 * 4096 * 40);
    CHECK_EQ(mosaic_pm_floor_bytes(4096, 100), 8 * 4096 * 40);
    CHECK_EQ(mosaic_pm_floor_bytes(0, 4), 0);
    CHECK_EQ(mosaic_pm_floor_bytes(SMAX, 1), SMAX);

    /* What is missing: free slot bytes, pooled pages and the growth asked count as room. */
    const size_t floor = 4096 * 40;
    CHECK_EQ(mosaic_pm_floor_missing(floor, 0, 0, 0), floor);
    CHECK_EQ(mosaic_pm_floor_missing(floor, floor, 0, 0), 0);
    CHECK_EQ(mosaic_pm_floor_missing(floor, 1000, 1, 0), floor - 1000 - PAGE);
    CHECK_EQ(mosaic_pm_floor_missing(floor, 1000, 1, 2 * PAGE), 0);
    CHECK_EQ(mosaic_pm_floor_missing(floor, SMAX, SMAX / PAGE, SMAX), 0);  /* the room saturates, no wrap */
    CHECK_EQ(mosaic_pm_floor_missing(SMAX, SMAX - 1, 0, 0), 1);
    CHECK_EQ(mosaic_pm_floor_missing(0, 0, 0, 0), 0);

    /* Pages kept of the freeable ones: enough to cover what is missing, at most those. */
    CHECK_EQ(mosaic_pm_floor_kept_pages(0, 65480, 10), 0);
    CHECK_EQ(mosaic_pm_floor_kept_pages(1, 65480, 10), 1);
    CHECK_EQ(mosaic_pm_floor_kept_pages(65480, 65480, 10), 1);
    CHECK_EQ(mosaic_pm_floor_kept_pages(65481, 65480, 10), 2);
    CHECK_EQ(mosaic_pm_floor_kept_pages(100 * 65480, 65480, 10), 10);
    CHECK_EQ(mosaic_pm_floor_kept_pages(1, 65480, 0), 0);

    /* Fresh pages for the rest: whole pages, at most the pages in use or 32 MiB. */
    CHECK_EQ(mosaic_pm_floor_grow(0, 100), 0);
    CHECK_EQ(mosaic_pm_floor_grow(1, 100), PAGE);
    CHECK_EQ(mosaic_pm_floor_grow(PAGE, 100), PAGE);
    CHECK_EQ(mosaic_pm_floor_grow(PAGE + 1, 100), 2 * PAGE);
    CHECK_EQ(mosaic_pm_floor_grow(SMAX, 0), MOSAIC_FLOOR_GROW_MIN);
    CHECK_EQ(mosaic_pm_floor_grow(SMAX, 100), MOSAIC_FLOOR_GROW_MIN);
    CHECK_EQ(mosaic_pm_floor_grow(SMAX, 1000), 1000 * PAGE);
    CHECK_EQ(mosaic_pm_floor_grow(100 * MiB, 10000), 100 * MiB);
}

static void
test_soft_limit(void)
{
    CHECK_EQ(mosaic_pm_headroom(100 * MiB, 60 * MiB), 40 * MiB);
    CHECK_EQ(mosaic_pm_headroom(100 * MiB, 100 * MiB), 0);
    CHECK_EQ(mosaic_pm_headroom(100 * MiB, SMAX), 0);
    CHECK_EQ(mosaic_pm_cut_to_headroom(3 * PAGE, 3 * PAGE), 3 * PAGE);
    CHECK_EQ(mosaic_pm_cut_to_headroom(3 * PAGE, 100000), PAGE);          /* whole pages of it */
    CHECK_EQ(mosaic_pm_cut_to_headroom(PAGE, PAGE - 1), 0);
    CHECK_EQ(mosaic_pm_cut_to_headroom(SMAX, SMAX), SMAX);
    CHECK_EQ(mosaic_pm_cut_to_headroom(SMAX, SMAX - 1), (SMAX - 1) / PAGE * PAGE);

    /* Hysteresis: set aside above 95%, taken up below 85%, nothing between. */
    const size_t L = 100 * MiB;
    CHECK(mosaic_pm_limit_unfit(96 * MiB, L));
    CHECK(!mosaic_pm_limit_unfit(95 * MiB, L));
    CHECK(!mosaic_pm_limit_fits_again(85 * MiB, L));
    CHECK(mosaic_pm_limit_fits_again(84 * MiB, L));
    for (size_t live = 85 * MiB; live <= 95 * MiB; live += MiB / 2) {
        CHECKF(!mosaic_pm_limit_unfit(live, L) && !mosaic_pm_limit_fits_again(live, L), "live %zu MiB", live >> 20);
    }
    CHECK(mosaic_pm_limit_unfit(SMAX, SMAX - 1));
    CHECK(!mosaic_pm_limit_unfit(0, 0));
    CHECK(mosaic_pm_near_limit(91 * MiB, L));
    CHECK(!mosaic_pm_near_limit(90 * MiB, L));
}

static void
test_heap_target(void)
{
    CHECK_EQ(mosaic_pm_heap_target(0, 0), 0);
    CHECK_EQ(mosaic_pm_heap_target(100, 0), 100 * PAGE);
    CHECK_EQ(mosaic_pm_heap_target(100, 3 * PAGE), 103 * PAGE);
    CHECK_EQ(mosaic_pm_heap_target(100, SMAX), SMAX);
    CHECK_EQ(mosaic_pm_heap_target(SMAX / PAGE, SMAX), SMAX);
}

static void
test_malloc_limit(void)
{
    /* Crossed: increase * 1.4, at most the maximum. */
    CHECK_EQ(mosaic_pm_malloc_limit(16 * MiB, 20 * MiB, 1.5, MALLOC_MIN, MALLOC_MAX), 30 * MiB);
    CHECK_EQ(mosaic_pm_malloc_limit(16 * MiB, 20 * MiB, MALLOC_GROWTH, MALLOC_MIN, MALLOC_MAX), mosaic_scale(20 * MiB, MALLOC_GROWTH));
    CHECK_EQ(mosaic_pm_malloc_limit(16 * MiB, 30 * MiB, MALLOC_GROWTH, MALLOC_MIN, MALLOC_MAX), MALLOC_MAX);
    CHECK_EQ(mosaic_pm_malloc_limit(16 * MiB, SMAX, MALLOC_GROWTH, MALLOC_MIN, MALLOC_MAX), MALLOC_MAX);
    CHECK_EQ(mosaic_pm_malloc_limit(16 * MiB, 20 * MiB, INFINITY, MALLOC_MIN, MALLOC_MAX), MALLOC_MAX);
    CHECK_EQ(mosaic_pm_malloc_limit(16 * MiB, 20 * MiB, 1.0, MALLOC_MIN, MALLOC_MAX), 20 * MiB);
    CHECK_EQ(mosaic_pm_malloc_limit(16 * MiB, 20 * MiB, 1.5, MALLOC_MIN, SMAX), 30 * MiB);
    /* Not crossed (equal is not crossed): decays 2%, at least the minimum. */
    CHECK_EQ(mosaic_pm_malloc_limit(32 * MiB, 32 * MiB, MALLOC_GROWTH, MALLOC_MIN, MALLOC_MAX), mosaic_scale(32 * MiB, 0.98));
    CHECK_EQ(mosaic_pm_malloc_limit(100 * MiB, 0, MALLOC_GROWTH, 0, SMAX), 98 * MiB);
    CHECK_EQ(mosaic_pm_malloc_limit(16 * MiB, 0, MALLOC_GROWTH, MALLOC_MIN, MALLOC_MAX), MALLOC_MIN);
    CHECK_EQ(mosaic_pm_malloc_limit(0, 0, MALLOC_GROWTH, MALLOC_MIN, MALLOC_MAX), MALLOC_MIN);
    CHECK_EQ(mosaic_pm_malloc_limit(SMAX, SMAX, MALLOC_GROWTH, 0, SMAX), mosaic_scale(SMAX, 0.98));

    /* Near the soft limit: half the headroom, at least 256 KiB. */
    CHECK_EQ(mosaic_pm_malloc_cap(0), 256 * KiB);
    CHECK_EQ(mosaic_pm_malloc_cap(512 * KiB), 256 * KiB);
    CHECK_EQ(mosaic_pm_malloc_cap(512 * KiB + 2), 256 * KiB + 1);
    CHECK_EQ(mosaic_pm_malloc_cap(10 * MiB), 5 * MiB);
    CHECK_EQ(mosaic_pm_malloc_cap(SMAX), SMAX / 2);
}

static void
test_old_malloc(void)
{
    CHECK_EQ(mosaic_pm_survivors(100, 30), 70);
    CHECK_EQ(mosaic_pm_survivors(100, 100), 0);
    CHECK_EQ(mosaic_pm_survivors(100, 130), 0);      /* freed more than there was: none */

    /* Decay by the factor's tenth (1.2: / 1.02), at least the minimum. */
    size_t d = mosaic_pm_oldmalloc_decay(102 * MiB, OLDMALLOC_GROWTH, OLDMALLOC_MIN);
    CHECK_OP(d, >=, 100 * MiB - 1);
    CHECK_OP(d, <=, 100 * MiB);
    CHECK_EQ(mosaic_pm_oldmalloc_decay(OLDMALLOC_MIN, OLDMALLOC_GROWTH, OLDMALLOC_MIN), OLDMALLOC_MIN);
    CHECK_EQ(mosaic_pm_oldmalloc_decay(64 * MiB, 1.0, OLDMALLOC_MIN), 64 * MiB);   /* factor 1: none */
    CHECK_EQ(mosaic_pm_oldmalloc_decay(64 * MiB, INFINITY, OLDMALLOC_MIN), OLDMALLOC_MIN);
    d = mosaic_pm_oldmalloc_decay(SMAX, OLDMALLOC_GROWTH, 0);
    CHECK_OP(d, <, SMAX);
    CHECK_OP(d, >, (size_t)((double)SMAX / 1.021));
    size_t l = OLDMALLOC_MAX;
    int decays = 0;
    while (l > OLDMALLOC_MIN && decays < 1000) {
        size_t next = mosaic_pm_oldmalloc_decay(l, OLDMALLOC_GROWTH, OLDMALLOC_MIN);
        if (!CHECK_OP(next, <, l)) break;
        l = next;
        decays++;
    }
    CHECK_EQ(l, OLDMALLOC_MIN);
    CHECK_OP(decays, >=, 100);                        /* ln 8 / ln 1.02 = 105 majors */
    CHECK_OP(decays, <=, 106);

    /* Raised only when the major found more than half of its trigger live. */
    CHECK(mosaic_pm_oldmalloc_live_grew(100 * MiB, 80 * MiB, 30 * MiB));        /* 20 > 15 */
    CHECK(!mosaic_pm_oldmalloc_live_grew(100 * MiB, 85 * MiB, 30 * MiB));       /* 15 = 15 */
    CHECK(!mosaic_pm_oldmalloc_live_grew(60 * MiB, 80 * MiB, 30 * MiB));        /* shrank */
    CHECK(mosaic_pm_oldmalloc_live_grew(1, 0, 0));
    CHECK(!mosaic_pm_oldmalloc_live_grew(0, 0, 0));
    CHECK_EQ(mosaic_pm_oldmalloc_raise(100 * MiB, 1.25, OLDMALLOC_MAX), 125 * MiB);
    CHECK_EQ(mosaic_pm_oldmalloc_raise(120 * MiB, OLDMALLOC_GROWTH, OLDMALLOC_MAX), OLDMALLOC_MAX);
    CHECK_EQ(mosaic_pm_oldmalloc_raise(SMAX, INFINITY, SMAX), SMAX);
}

static void
test_old_object_limits(void)
{
    CHECK_EQ(mosaic_pm_wb_unprotected_limit(100000, 2000, 2.0, 0.01), 4000);   /* by count */
    CHECK_EQ(mosaic_pm_wb_unprotected_limit(100000, 100, 2.0, 0.01), 1000);    /* by ratio */
    CHECK_EQ(mosaic_pm_wb_unprotected_limit(0, 0, 2.0, 0.01), 0);
    CHECK_EQ(mosaic_pm_wb_unprotected_limit(SMAX, 1, 2.0, 1.0), SMAX);
    CHECK_EQ(mosaic_pm_wb_unprotected_limit(1, SMAX, 1e300, 0.01), SMAX);       /* a huge factor saturates */
    CHECK_EQ(mosaic_pm_wb_unprotected_limit(100, 100, NAN, NAN), 0);

    /* Old objects: old + (factor - 1) * live. Where all that is live is old, the default GC's
     * old * factor, at every factor. */
    CHECK_EQ(mosaic_pm_old_objects_limit(100000, 100000, 2.0), 200000);
    CHECK_EQ(mosaic_pm_old_objects_limit(100000, 100000, 1.0), 100000);
    CHECK_EQ(mosaic_pm_old_objects_limit(100000, 100000, 0.4), 40000);
    CHECK_EQ(mosaic_pm_old_objects_limit(100000, 100000, 0.0), 0);
    /* A major that found a large structure still young: room for its promotion (fluentd's
     * shape: 104k old of 954k live, then 854k old two GCs later). */
    CHECK_EQ(mosaic_pm_old_objects_limit(104000, 954000, 2.0), 1058000);
    CHECK(mosaic_pm_old_objects_limit(104000, 954000, 2.0) > 854000);
    CHECK(mosaic_pm_old_objects_limit(104000, 954000, 2.0) > mosaic_scale(104000, 2.0));
    /* Below 1, promotions ask for a major GC still; at 0 every GC is one. */
    CHECK_EQ(mosaic_pm_old_objects_limit(50000, 100000, 0.5), 0);
    CHECK_EQ(mosaic_pm_old_objects_limit(80000, 100000, 0.5), 30000);
    CHECK_EQ(mosaic_pm_old_objects_limit(80000, 100000, 0.0), 0);
    /* live below old (a count taken apart from the mark): old is live. */
    CHECK_EQ(mosaic_pm_old_objects_limit(100000, 10, 2.0), 200000);
    /* Saturates: a huge factor or huge counts never wrap. */
    CHECK_EQ(mosaic_pm_old_objects_limit(1, 1000, 1e300), SMAX);
    CHECK_EQ(mosaic_pm_old_objects_limit(SMAX, SMAX, 2.0), SMAX);
    CHECK_EQ(mosaic_pm_old_objects_limit(0, 0, 2.0), 0);
}

static void
test_gc_time_formulas(void)
{
    /* The interval: since the previous GC's end, or the GC itself when there was none (or the
     * clock did not advance past it). */
    CHECK_EQ(mosaic_pm_gc_interval(0, 1000, 1500), 500);
    CHECK_EQ(mosaic_pm_gc_interval(200, 1000, 1500), 1300);
    CHECK_EQ(mosaic_pm_gc_interval(1500, 1000, 1500), 500);
    CHECK_EQ(mosaic_pm_gc_interval(2000, 1000, 1500), 500);

    /* The GC time: the pause, or the counters' advance when measured and larger, at most the
     * interval. */
    CHECK_EQ(mosaic_pm_gc_time(1000, 1500, false, 9000, 1000, 10000), 500);
    CHECK_EQ(mosaic_pm_gc_time(1000, 1500, true, 9000, 1000, 10000), 8000);
    CHECK_EQ(mosaic_pm_gc_time(1000, 1500, true, 1300, 1000, 10000), 500);    /* counters advanced less */
    CHECK_EQ(mosaic_pm_gc_time(1000, 1500, true, 900, 1000, 10000), 500);     /* counters went back */
    CHECK_EQ(mosaic_pm_gc_time(1000, 1500, true, 90000, 1000, 10000), 10000); /* clipped to the interval */
    CHECK_EQ(mosaic_pm_gc_time(1000, 1500, false, 0, 0, 300), 300);

    /* The decaying sums: 15/16 of each, plus the interval. */
    double gc = 0, all = 0;
    CHECK_DOP(mosaic_pm_gc_share(&gc, &all, 0, 0), ==, 0.0);                 /* no time yet */
    CHECK_DOP(mosaic_pm_gc_share(&gc, &all, 100, 1000), ==, 0.1);
    CHECK_DOP(gc, ==, 100.0);
    CHECK_DOP(all, ==, 1000.0);
    CHECK_DOP(mosaic_pm_gc_share(&gc, &all, 0, 0), ==, 0.1);                 /* decay alone keeps the ratio */
    CHECK_DOP(gc, ==, 93.75);
    CHECK_DOP(all, ==, 937.5);
    CHECK_DOP(mosaic_pm_gc_share(&gc, &all, 1000, 1000), ==, (93.75 * 15 / 16 + 1000) / (937.5 * 15 / 16 + 1000));
}

static void
test_room_scale_formulas(void)
{
    /* A ratio with its room scaled: room per live byte q = r / (1 - r), times the scale. */
    CHECK_DOP(mosaic_pm_scaled_ratio(GOAL_RATIO, 1.0), ==, GOAL_RATIO);           /* exactly */
    CHECK_NEAR(mosaic_pm_scaled_ratio(GOAL_RATIO, 2.0), 4.0 / 7.0, 1e-12);     /* q 2/3 -> 4/3 */
    CHECK_NEAR(mosaic_pm_scaled_ratio(0.5, 0.5), 1.0 / 3.0, 1e-12);            /* q 1 -> 1/2 */
    CHECK_DOP(mosaic_pm_scaled_ratio(0.0, 4.0), ==, 0.0);                       /* 0 stays 0 */
    CHECK_DOP(mosaic_pm_scaled_ratio(1.0, 0.5), ==, 1.0);                       /* no bound stays */
    CHECK_DOP(mosaic_pm_scaled_ratio(MAX_RATIO, MOSAIC_ROOM_SCALE_MAX), <, 1.0);
    CHECK_DOP(mosaic_pm_scaled_ratio(MIN_RATIO, 2.0), <, mosaic_pm_scaled_ratio(GOAL_RATIO, 2.0));  /* order kept */
    CHECK_DOP(mosaic_pm_scaled_ratio(GOAL_RATIO, 2.0), <, mosaic_pm_scaled_ratio(MAX_RATIO, 2.0));

    /* The scale: up by share / max while steady, down by share / min, at most 2x per update. */
    CHECK_DOP(mosaic_pm_room_scale(1.0, 0.30, 8, true, 0.25, 0.05), ==, 0.30 / 0.25);
    CHECK_DOP(mosaic_pm_room_scale(1.0, 0.90, 8, true, 0.25, 0.05), ==, 2.0);
    CHECK_DOP(mosaic_pm_room_scale(1.0, 0.90, 8, false, 0.25, 0.05), ==, 1.0); /* a build-up: no more room */
    CHECK_DOP(mosaic_pm_room_scale(1.0, 0.04, 8, false, 0.25, 0.05), ==, 0.04 / 0.05);
    CHECK_DOP(mosaic_pm_room_scale(1.0, 0.0, 8, true, 0.25, 0.05), ==, 0.5);
    CHECK_DOP(mosaic_pm_room_scale(1.0, 0.10, 8, true, 0.25, 0.05), ==, 1.0);  /* within the band at 1: kept */
    /* Within the band away from 1: back toward the ratios' room, never past it. */
    CHECK_DOP(mosaic_pm_room_scale(0.6, 0.06, 8, false, 0.25, 0.05), ==, 0.6 * 0.06 / 0.05);
    CHECK_DOP(mosaic_pm_room_scale(0.6, 0.20, 8, false, 0.25, 0.05), ==, 1.0);
    CHECK_DOP(mosaic_pm_room_scale(3.0, 0.20, 8, false, 0.25, 0.05), ==, 3.0 * 0.20 / 0.25);
    CHECK_DOP(mosaic_pm_room_scale(1.5, 0.06, 8, true, 0.25, 0.05), ==, 1.0);
    CHECK_DOP(mosaic_pm_room_scale(3.0, 0.20, 8, true, 0.0, 0.05), ==, 1.5);   /* upper bound off: back toward 1, 2x at most */
    CHECK_DOP(mosaic_pm_room_scale(0.5, 0.20, 8, true, 0.25, 0.0), ==, 1.0);   /* lower bound off: back to 1 */
    CHECK_DOP(mosaic_pm_room_scale(3.0, 0.90, 8, true, 0.25, 0.05), ==, MOSAIC_ROOM_SCALE_MAX);
    CHECK_DOP(mosaic_pm_room_scale(0.6, 0.0, 8, true, 0.25, 0.05), ==, MOSAIC_ROOM_SCALE_MIN);
    CHECK_DOP(mosaic_pm_room_scale(1.0, 0.90, 1, true, 0.25, 0.05), ==, 1.0);  /* one GC measures nothing */
    CHECK_DOP(mosaic_pm_room_scale(1.0, 0.90, 8, true, 0.0, 0.0), ==, 1.0);    /* both bounds off */
    CHECK_DOP(mosaic_pm_room_scale(1.0, 0.0, 8, true, 0.0, 0.0), ==, 1.0);

    /* Steady: within 1/8 either way; nothing to compare with is not steady. */
    CHECK(!mosaic_pm_held_steady(100, 0));
    CHECK(mosaic_pm_held_steady(800, 800));
    CHECK(mosaic_pm_held_steady(900, 800));
    CHECK(!mosaic_pm_held_steady(901, 800));
    CHECK(mosaic_pm_held_steady(700, 800));
    CHECK(!mosaic_pm_held_steady(699, 800));
    CHECK(mosaic_pm_held_steady(SMAX, SMAX));
}

static void
test_build_up_end_formulas(void)
{
    /* Survival: the share of what was allocated since the GC before that a GC kept. */
    CHECK_DOP(mosaic_pm_survival(0, 0), ==, 1.0);            /* nothing allocated: nothing died */
    CHECK_DOP(mosaic_pm_survival(0, 100), ==, 1.0);
    CHECK_DOP(mosaic_pm_survival(1000, 0), ==, 1.0);
    CHECK_DOP(mosaic_pm_survival(1000, 250), ==, 0.75);
    CHECK_DOP(mosaic_pm_survival(1000, 1000), ==, 0.0);
    CHECK_DOP(mosaic_pm_survival(1000, 5000), ==, 0.0);      /* older garbage too: at least none kept */
    CHECK_DOP(mosaic_pm_survival(SMAX, SMAX / 2), >, 0.49);  /* no overflow on huge figures */

    /* A build-up ends when a GC that kept at least 7/8 is followed by one that keeps at most half. */
    CHECK(mosaic_pm_build_up_ended(1.0, 0.0));
    CHECK(mosaic_pm_build_up_ended(0.875, 0.5));
    CHECK(!mosaic_pm_build_up_ended(0.87, 0.5));    /* no build-up before */
    CHECK(!mosaic_pm_build_up_ended(1.0, 0.51));    /* still keeping most */
    CHECK(!mosaic_pm_build_up_ended(0.3, 0.0));     /* a steady program whose young die */
    CHECK(!mosaic_pm_build_up_ended(1.0, 1.0));     /* a build-up going on */

    /* The step a GC takes: it records its survival, and ends a build-up by the rule above. */
    double survival = 0.3;
    CHECK(!mosaic_pm_survival_step(&survival, 1 << 20, 0));           /* kept all: builds up */
    CHECK_DOP(survival, ==, 1.0);
    CHECK(mosaic_pm_survival_step(&survival, 1 << 20, 1 << 20));      /* then kept none: ended */
    CHECK_DOP(survival, ==, 0.0);
    /* A GC after too little allocation to measure (GC.start twice in a row) keeps the survival
     * from before: it neither ends a build-up nor reads as one that kept everything. */
    survival = 0.3;
    CHECK(!mosaic_pm_survival_step(&survival, 0, 4096));
    CHECK_DOP(survival, ==, 0.3);
    CHECK(!mosaic_pm_survival_step(&survival, MOSAIC_PM_SURVIVAL_MIN_BYTES - 1, 0));
    CHECK_DOP(survival, ==, 0.3);
    CHECK(!mosaic_pm_survival_step(&survival, 1 << 20, 1 << 20));    /* so a churned minor ends nothing */
    CHECK_DOP(survival, ==, 0.0);
    survival = 1.0;                                                   /* after a build-up, an empty */
    CHECK(!mosaic_pm_survival_step(&survival, 0, 0));                 /* GC leaves its end to the next */
    CHECK(mosaic_pm_survival_step(&survival, MOSAIC_PM_SURVIVAL_MIN_BYTES, MOSAIC_PM_SURVIVAL_MIN_BYTES));
}

/* A steady program under the room scale, in units of its live data and of the time it takes to
 * allocate that much: a GC comes when the room the goal ratio leaves (q / (1 - q) of live, q the
 * scaled goal) is used up, so the mutator runs that long between GCs, and each GC takes
 * `gc_time` (its cost is set by what it marks and sweeps, not by the room). The scale is set
 * every MOSAIC_ROOM_CYCLE_GCS GCs from the share of that cycle, as pace.c does. Returns the
 * share of the last cycle; *scale_out the scale. */
static double
sim_room_scale_from(double scale, double gc_time, double time_max, double time_min, double *scale_out)
{
    double share = 0.0;
    for (int update = 0; update < 40; update++) {
        double q = mosaic_pm_scaled_ratio(GOAL_RATIO, scale);
        double between = q / (1.0 - q);
        share = MOSAIC_ROOM_CYCLE_GCS * gc_time / (MOSAIC_ROOM_CYCLE_GCS * (between + gc_time));
        scale = mosaic_pm_room_scale(scale, share, MOSAIC_ROOM_CYCLE_GCS, true, time_max, time_min);
    }
    *scale_out = scale;
    return share;
}

static double
sim_room_scale(double gc_time, double time_max, double time_min, double *scale_out)
{
    return sim_room_scale_from(1.0, gc_time, time_max, time_min, scale_out);
}

/* The GC time per GC that gives `share` at the goal ratio's own room (2/3 of live). */
static double
sim_gc_time_for(double share)
{
    return share / (1.0 - share) * (GOAL_RATIO / (1.0 - GOAL_RATIO));
}

static void
test_sim_room_scale_keeps_the_gc_time_bounds(void)
{
    double scale, share;
    /* No bounds: the ratios' own room, whatever GC costs. */
    share = sim_room_scale(sim_gc_time_for(0.4), 0.0, 0.0, &scale);
    CHECK_DOP(scale, ==, 1.0);
    CHECK_NEAR(share, 0.4, 1e-9);
    /* Expensive GCs (a 40% share at the ratios' room): the room grows until the share is at the
     * upper bound. */
    share = sim_room_scale(sim_gc_time_for(0.4), 0.25, 0.05, &scale);
    CHECK_NEAR(share, 0.25, 0.005);
    CHECK_NEAR(scale, 2.0, 0.05);                    /* share ~ 1 / room: (0.6 / 0.4) / (0.75 / 0.25) */
    /* So expensive that even four times the room is not enough: the scale stops at its bound. */
    share = sim_room_scale(sim_gc_time_for(0.8), 0.25, 0.05, &scale);
    CHECK_DOP(scale, ==, MOSAIC_ROOM_SCALE_MAX);
    CHECK_DOP(share, >, 0.25);
    /* Cheap GCs (4%): the room shrinks until the share is at the lower bound. */
    share = sim_room_scale(sim_gc_time_for(0.04), 0.25, 0.05, &scale);
    CHECK_NEAR(share, 0.05, 0.0025);
    CHECK_DOP(scale, <, 1.0);
    /* Very cheap (1%): down to the scale's floor. */
    share = sim_room_scale(sim_gc_time_for(0.01), 0.25, 0.05, &scale);
    CHECK_DOP(scale, ==, MOSAIC_ROOM_SCALE_MIN);
    CHECK_DOP(share, <, 0.05);
    /* Within the band: nothing moves. */
    share = sim_room_scale(sim_gc_time_for(0.1), 0.25, 0.05, &scale);
    CHECK_DOP(scale, ==, 1.0);
    CHECK_NEAR(share, 0.1, 1e-9);
    /* A program whose GCs were cheap at first (the scale at its floor) and then cost 10% at the
     * ratios' room: the scale comes back to 1, the share to 10%. */
    share = sim_room_scale_from(MOSAIC_ROOM_SCALE_MIN, sim_gc_time_for(0.1), 0.25, 0.05, &scale);
    CHECK_DOP(scale, ==, 1.0);
    CHECK_NEAR(share, 0.1, 1e-9);
    /* ... and one that was given room (the scale at its ceiling) and then cost 10%: the same. */
    share = sim_room_scale_from(MOSAIC_ROOM_SCALE_MAX, sim_gc_time_for(0.1), 0.25, 0.05, &scale);
    CHECK_DOP(scale, ==, 1.0);
    CHECK_NEAR(share, 0.1, 1e-9);
}

/* ============================================================== simulation */

/* One size class of 40-byte slots, and malloc: the state pace.c keeps, and the program's. */
struct sim {
    /* the pacer's parameters (config.c's defaults unless a test changes them) */
    double growth_factor, min_ratio, goal_ratio, max_ratio;
    size_t init_slots, max_slots, heap_free_slots;
    size_t slot_size, slots_per_page;
    size_t malloc_min, malloc_max;
    double malloc_growth;

    /* the heap */
    size_t total;              /* slots in the class's pages */
    size_t used;               /* slots holding an object, live or garbage */
    size_t allocatable_bytes;  /* the shared budget */
    size_t floor_bytes;        /* free_slots_floor_bytes */
    size_t grown;              /* fresh page bytes since the latest GC */
    size_t major_target;
    size_t heap_target;
    /* malloc */
    size_t malloc_increase, malloc_limit, malloc_live, growth_trigger;

    /* the program: live slots and malloc it holds now and wants to hold */
    size_t live, live_goal, live_malloc;
    size_t alloc_per_tick, malloc_per_tick;

    /* what happened */
    size_t gcs, ticks, gc_by_malloc, gc_by_slots;
    size_t max_grown_between;  /* the most fresh page bytes + malloc taken between two GCs */
    bool stuck;                /* a cycle ran SIM_MAX_TICKS without a GC: the run stops */
    double max_growth_ratio;   /* the largest total(before a GC) / total(after the previous one) */
    double max_growth_excess;  /* the largest such ratio less (growth_factor + a page's share) */
};

static void
sim_init(struct sim *s, size_t live_goal, size_t alloc_per_tick, size_t malloc_per_tick)
{
    memset(s, 0, sizeof(*s));
    s->growth_factor = GROWTH_FACTOR;
    s->min_ratio = MIN_RATIO;
    s->goal_ratio = GOAL_RATIO;
    s->max_ratio = MAX_RATIO;
    s->init_slots = INIT_SLOTS;
    s->heap_free_slots = 4096;
    s->slot_size = 40;
    s->slots_per_page = (PAGE - 40) / 40;
    s->malloc_min = MALLOC_MIN;
    s->malloc_max = MALLOC_MAX;
    s->malloc_growth = MALLOC_GROWTH;
    /* mosaic_pace_init */
    s->major_target = s->init_slots;
    s->malloc_limit = s->malloc_min;
    s->growth_trigger = mosaic_pm_growth_trigger(MOSAIC_GROWTH_STEP_MIN, s->malloc_limit);
    s->live_goal = live_goal;
    s->alloc_per_tick = alloc_per_tick;
    s->malloc_per_tick = malloc_per_tick;
    s->max_growth_excess = -INFINITY;
}

static size_t
sim_pages(const struct sim *s)
{
    return s->total / s->slots_per_page;
}

/* A major GC, as collect.c runs one without generations: the malloc limit at its start
 * (mosaic_pace_malloc_limit), the decisions after marking (mosaic_pace_after_mark, one class,
 * no pool, no soft limit), the sweep (garbage freed, the pages beyond the keep returned), and
 * the live malloc at its end (mosaic_pace_after_sweep). */
static void
sim_gc(struct sim *s)
{
    s->gcs++;
    size_t grown_total = mosaic_add_sat(s->grown, s->malloc_increase);
    if (grown_total > s->max_grown_between) s->max_grown_between = grown_total;

    /* mosaic_pace_malloc_limit */
    s->malloc_limit = mosaic_pm_malloc_limit(s->malloc_limit, s->malloc_increase, s->malloc_growth,
                                             s->malloc_min, s->malloc_max);
    s->malloc_increase = 0;
    s->growth_trigger = mosaic_pm_growth_trigger(mosaic_pm_growth_step(sim_pages(s), s->malloc_live), s->malloc_limit);

    /* mosaic_pace_after_mark */
    size_t total = s->total, live = s->live, spp = s->slots_per_page;
    size_t free = total > live ? total - live : 0;
    size_t own = total < s->init_slots ? s->init_slots - total : 0;
    size_t target_pages = sim_pages(s) + own / spp;
    s->major_target = mosaic_pm_major_target(live, mosaic_pm_major_target_factor(s->goal_ratio, s->growth_factor), s->init_slots);
    size_t freeable = 0;
    if (s->max_ratio < 1.0) {
        freeable = mosaic_pm_freeable_pages(total, mosaic_pm_keep_slots(live, s->max_ratio, s->init_slots), spp);
    }
    size_t released = freeable * spp;
    size_t room = (free > released ? free - released : 0) * s->slot_size;
    size_t shared = 0;
    if (mosaic_pm_short_of_free(free, total, s->min_ratio)) {
        size_t grow = mosaic_pm_class_ask(total, live, 0, spp, s->goal_ratio, s->growth_factor, s->max_slots);
        if (grow) shared = mosaic_pm_slots_page_bytes(grow, spp);
    }
    size_t floor_grow = 0;
    size_t missing = mosaic_pm_floor_missing(mosaic_pm_floor_bytes(s->heap_free_slots, 1), room, 0, shared);
    if (missing) {
        size_t page_room = spp * s->slot_size;
        size_t kept = mosaic_pm_floor_kept_pages(missing, page_room, freeable);
        freeable -= kept;
        missing = missing > kept * page_room ? missing - kept * page_room : 0;
        floor_grow = mosaic_pm_floor_grow(missing, sim_pages(s));
    }
    shared = mosaic_add_sat(shared, floor_grow);
    s->allocatable_bytes = shared;
    s->floor_bytes = floor_grow ? shared : 0;
    if (s->floor_bytes > s->growth_trigger) s->growth_trigger = s->floor_bytes;
    s->grown = 0;
    s->heap_target = mosaic_pm_heap_target(target_pages, shared);

    /* The sweep: every dead slot freed; the pages beyond the keep go back (the program's
     * garbage is spread over the pages, but the model counts slots only). */
    s->used = live;
    s->total -= freeable * spp;

    /* mosaic_pace_after_sweep, after a major: the live malloc */
    s->malloc_live = s->live_malloc;
}

/* The growth the pacer's last GC allowed, as a ratio of the class then. */
static void
sim_note_growth(struct sim *s, size_t total_at_gc)
{
    if (total_at_gc == 0) return;
    double r = (double)s->total / (double)total_at_gc;
    double excess = r - (s->growth_factor + (double)s->slots_per_page / (double)total_at_gc);
    if (r > s->max_growth_ratio) s->max_growth_ratio = r;
    if (excess > s->max_growth_excess) s->max_growth_excess = excess;
}

/* The program runs until its next GC: each tick allocates alloc_per_tick slots (live until the
 * live goal is reached, garbage after) and malloc_per_tick bytes of garbage malloc. A slot
 * comes from the free slots, else from a fresh page: within the class's init slots, or within
 * the shared budget until the growth step is reached (alloc.c's order, without the pool). */
#define SIM_MAX_TICKS 20000

static void
sim_run_to_gc(struct sim *s)
{
    size_t total_at_gc = s->total;
    if (s->stuck) return;
    for (size_t ticks = 0;; ticks++) {
        /* A broken formula may never collect (a budget that wrapped, a limit never reached):
         * that fails the test instead of hanging it. */
        if (ticks == SIM_MAX_TICKS) {
            CHECKF(false, "no GC in %d ticks after GC %zu: total %zu slots, budget %zu",
                   SIM_MAX_TICKS, s->gcs, s->total, s->allocatable_bytes);
            s->stuck = true;
            return;
        }
        s->ticks++;
        for (size_t i = 0; i < s->alloc_per_tick; i++) {
            if (s->used == s->total) {
                bool own = s->total < s->init_slots;
                size_t step = mosaic_pm_growth_step(sim_pages(s), s->malloc_live);
                bool budget = s->allocatable_bytes >= PAGE &&
                    !mosaic_pm_grown_enough(mosaic_add_sat(s->grown, s->malloc_increase), step, s->floor_bytes);
                if (!own && !budget) {
                    sim_note_growth(s, total_at_gc);
                    s->gc_by_slots++;
                    sim_gc(s);
                    return;
                }
                if (!own) s->allocatable_bytes -= PAGE;
                s->grown += PAGE;
                s->total += s->slots_per_page;
            }
            s->used++;
            if (s->live < s->live_goal) s->live++;
        }
        /* malloc.c's checks, made when Ruby mallocs */
        if (!s->malloc_per_tick) continue;
        s->malloc_increase += s->malloc_per_tick;
        if (s->malloc_increase > s->malloc_limit || mosaic_add_sat(s->grown, s->malloc_increase) > s->growth_trigger) {
            sim_note_growth(s, total_at_gc);
            s->gc_by_malloc++;
            sim_gc(s);
            return;
        }
    }
}

/* The live data a program shrinks to: what the GC finds from then on. */
static void
sim_drop_live(struct sim *s, size_t live)
{
    s->live_goal = live;
    if (s->live > live) s->live = live;
}

/* Bounds of a class's pages once a steady program's live slots L have settled: after each GC
 * at least min_ratio of it is free (else it would grow), and it never grew past the goal by
 * more than the page a class asks at least, or past the keep (it would shrink). */
static size_t
pages_for(size_t slots, size_t spp)
{
    return slots / spp + (slots % spp != 0);
}

/* A steady program: constant live data, constant allocation. Its heap converges, then every
 * GC sets the same target: the class holds between live / (1 - min_ratio) and
 * live / (1 - goal_ratio) slots (plus the page rounding), not a page more or less from one GC
 * to the next. */
static void
test_sim_steady_program_converges(void)
{
    const size_t L = 1000000;                  /* 40 MB of live 40-byte slots */
    struct sim s;
    sim_init(&s, L, 5000, 0);
    while (s.live < L && s.gcs < 1000) sim_run_to_gc(&s);
    CHECK_EQ(s.live, L);
    CHECK_OP(s.gcs, <, 200);                   /* the build-up took GCs, not thousands */
    for (int i = 0; i < 30; i++) sim_run_to_gc(&s);   /* settle */

    size_t lo = pages_for((size_t)(L / (1 - MIN_RATIO)), s.slots_per_page);
    size_t hi = pages_for((size_t)(L / (1 - GOAL_RATIO)), s.slots_per_page) + 1;
    size_t tmin = SIZE_MAX, tmax = 0, pmin = SIZE_MAX, pmax = 0, gcs0 = s.gcs, ticks0 = s.ticks;
    for (int i = 0; i < 300; i++) {
        sim_run_to_gc(&s);
        size_t pages = sim_pages(&s);
        if (s.heap_target < tmin) tmin = s.heap_target;
        if (s.heap_target > tmax) tmax = s.heap_target;
        if (pages < pmin) pmin = pages;
        if (pages > pmax) pmax = pages;
    }
    CHECKF(pmin >= lo && pmax <= hi, "pages %zu..%zu, expected within %zu..%zu", pmin, pmax, lo, hi);
    CHECKF(tmin >= lo * PAGE && tmax <= hi * PAGE, "target %zu..%zu pages, expected within %zu..%zu",
           tmin / PAGE, tmax / PAGE, lo, hi);
    CHECKF(tmax - tmin == 0 && pmax == pmin, "the target moved by %zu pages, the heap by %zu, in a steady state",
           (tmax - tmin) / PAGE, pmax - pmin);
    /* Room between GCs: each cycle allocates the free slots, at least min_ratio of the heap. */
    size_t per_gc = (s.ticks - ticks0) * s.alloc_per_tick / (s.gcs > gcs0 ? s.gcs - gcs0 : 1);
    CHECK_OP(per_gc, >=, (size_t)(MIN_RATIO * pmin * s.slots_per_page));
    CHECK_EQ(s.gc_by_malloc, 0);
}

/* Live data that doubles: the heap's target doubles too (within the same bounds, for 2L),
 * through GCs that each grow the class by at most the growth factor; and the growth between
 * two GCs, fresh pages and malloc, stays within the growth step (plus a page). */
static void
test_sim_live_doubles_grows_target(void)
{
    const size_t L = 500000;
    struct sim s;
    sim_init(&s, L, 5000, 0);
    for (int i = 0; i < 200; i++) sim_run_to_gc(&s);
    size_t target1 = s.heap_target;
    CHECK_OP(target1, >=, pages_for((size_t)(L / (1 - MIN_RATIO)), s.slots_per_page) * PAGE);

    s.live_goal = 2 * L;
    s.max_growth_ratio = 0;
    s.max_grown_between = 0;
    for (int i = 0; i < 300; i++) sim_run_to_gc(&s);
    CHECK_EQ(s.live, 2 * L);
    size_t target2 = s.heap_target;
    size_t lo = pages_for((size_t)(2 * L / (1 - MIN_RATIO)), s.slots_per_page);
    size_t hi = pages_for((size_t)(2 * L / (1 - GOAL_RATIO)), s.slots_per_page) + 1;
    CHECKF(target2 >= lo * PAGE && target2 <= hi * PAGE, "target %zu pages, expected %zu..%zu", target2 / PAGE, lo, hi);
    CHECK_OP(target2, >, target1);
    CHECK_DOP((double)target2 / (double)target1, >=, 1.6);
    CHECK_DOP((double)target2 / (double)target1, <=, 2.5);
    CHECK_DOP(s.max_growth_excess, <=, 0.0);
    CHECK_DOP(s.max_growth_ratio, >, 1.0);
    /* One growth step between GCs: an eighth of the heap (at least 4 MiB), and the page that
     * passed it. */
    size_t step = mosaic_pm_growth_step(sim_pages(&s), 0);
    CHECK_OP(s.max_grown_between, <=, step + PAGE);
}

/* A build-up whose goal asks for more than the growth factor (goal 0.5: every slot live asks
 * for twice the class): each GC's growth is clamped to the factor (plus the page the ask is
 * rounded up to), and reaches it while the growth step is larger than the ask. */
static void
test_sim_build_up_grows_by_at_most_the_factor(void)
{
    struct sim s;
    sim_init(&s, 1000000, 5000, 0);
    s.goal_ratio = 0.5;
    while (s.live < 1000000 && s.gcs < 1000) sim_run_to_gc(&s);
    CHECK_DOP(s.max_growth_excess, <=, 0.0);
    CHECK_DOP(s.max_growth_ratio, >=, GROWTH_FACTOR - 0.05);
}

/* Live data that falls to a quarter: majors give the pages beyond the keep back, so the class
 * ends within live / (1 - max_ratio) and the target within the steady bounds for the new live
 * data. */
static void
test_sim_live_falls_shrinks(void)
{
    const size_t L = 1000000;
    struct sim s;
    sim_init(&s, L, 5000, 0);
    for (int i = 0; i < 200; i++) sim_run_to_gc(&s);
    size_t before = s.heap_target;
    sim_drop_live(&s, L / 4);
    sim_run_to_gc(&s);
    size_t keep_pages = pages_for(mosaic_pm_keep_slots(L / 4, MAX_RATIO, INIT_SLOTS), s.slots_per_page);
    CHECKF(sim_pages(&s) <= keep_pages, "%zu pages after the major, keep %zu", sim_pages(&s), keep_pages);
    for (int i = 0; i < 100; i++) sim_run_to_gc(&s);
    size_t lo = pages_for((size_t)(L / 4 / (1 - MIN_RATIO)), s.slots_per_page);
    CHECKF(s.heap_target < before && s.heap_target <= keep_pages * PAGE && s.heap_target >= lo * PAGE,
           "target %zu pages (was %zu), keep %zu, at least %zu", s.heap_target / PAGE, before / PAGE, keep_pages, lo);
}

/* A small program stays within its init slots and never grows past them: the class's own
 * budget is exempt from the step, and nothing asks beyond it. */
static void
test_sim_small_program_keeps_init_slots(void)
{
    struct sim s;
    sim_init(&s, 2000, 500, 0);
    for (int i = 0; i < 100; i++) sim_run_to_gc(&s);
    CHECK_OP(s.total, <=, INIT_SLOTS + s.slots_per_page);
    CHECK_OP(s.total, >=, INIT_SLOTS);
    CHECK_EQ(s.heap_target, pages_for(s.total, s.slots_per_page) * PAGE);
    CHECK_EQ(s.major_target, INIT_SLOTS);
}

/* The free-slot floor: with heap_free_slots set high, every GC leaves that much room
 * (heap_free_slots 40-byte slots), however little is live. */
static void
test_sim_free_slot_floor_leaves_room(void)
{
    struct sim s;
    sim_init(&s, 2000, 500, 0);
    s.heap_free_slots = 500000;
    size_t worst_room = SIZE_MAX;
    for (int i = 0; i < 50; i++) {
        sim_run_to_gc(&s);
        size_t free = s.total - s.used;
        size_t room = free * s.slot_size + s.allocatable_bytes;
        if (i > 0 && room < worst_room) worst_room = room;
    }
    CHECK_OP(worst_room, >=, mosaic_pm_floor_bytes(500000, 1));
}

/* Malloc: a program that mallocs more than the limit per GC (a small heap, 1 MiB per 100
 * objects) raises it to its maximum (within bounds all along), then collects once per maximum
 * of malloc; when it stops mallocing, the limit decays 2% per GC back to the minimum, in the
 * number of GCs that takes. */
static void
test_sim_malloc_limit_rises_and_decays(void)
{
    struct sim s;
    sim_init(&s, 5000, 100, MiB);
    size_t lmin = SIZE_MAX, lmax = 0;
    for (int i = 0; i < 200; i++) {
        sim_run_to_gc(&s);
        if (s.malloc_limit < lmin) lmin = s.malloc_limit;
        if (s.malloc_limit > lmax) lmax = s.malloc_limit;
    }
    CHECK_OP(lmin, >=, MALLOC_MIN);
    CHECK_EQ(lmax, MALLOC_MAX);
    CHECK_EQ(s.malloc_limit, MALLOC_MAX);
    CHECK_OP(s.gc_by_malloc, >, s.gc_by_slots);
    /* Between two GCs, malloc stays within the limit plus one tick's malloc. */
    CHECK_OP(s.max_grown_between, <=, MALLOC_MAX + MiB);

    s.malloc_per_tick = 0;
    int gcs = 0;
    size_t prev = s.malloc_limit;
    bool decreasing = true;
    while (s.malloc_limit > MALLOC_MIN && gcs < 1000) {
        sim_run_to_gc(&s);
        gcs++;
        if (s.malloc_limit >= prev && s.malloc_limit != MALLOC_MIN) decreasing = false;
        prev = s.malloc_limit;
    }
    CHECK(decreasing);
    CHECK_EQ(s.malloc_limit, MALLOC_MIN);
    CHECK_OP(gcs, >=, 34);                      /* ln 2 / -ln 0.98 = 34.3 */
    CHECK_OP(gcs, <=, 36);
}

/* The GC time share over many GCs: a program that spends a tenth of every interval in GC
 * shows 0.1; a burst of short GCs right after a long stretch of running does not outweigh it
 * (time-weighted); a program that spends nine tenths in GC shows that after a few dozen GCs,
 * past the soft limit's 50% cap. */
static void
test_sim_gc_time_share(void)
{
    double gc = 0, all = 0, share = 0;
    uint64_t now = 1000000, last_end = 0, counted = 0, counted_at_last = 0;
    for (int i = 0; i < 600; i++) {
        uint64_t start = now + 9000000, end = start + 1000000;    /* 9 ms running, 1 ms GC */
        uint64_t since = mosaic_pm_gc_interval(last_end, start, end);
        counted += end - start;
        uint64_t g = mosaic_pm_gc_time(start, end, true, counted, counted_at_last, since);
        counted_at_last = counted;
        share = mosaic_pm_gc_share(&gc, &all, g, since);
        last_end = now = end;
    }
    CHECK_NEAR(share, 0.1, 1e-9);

    /* 10 s of running with 1% in GC, then 20 GCs back to back, all GC. */
    gc = all = 0;
    share = mosaic_pm_gc_share(&gc, &all, 100000000, 10000000000ull);
    for (int i = 0; i < 20; i++) share = mosaic_pm_gc_share(&gc, &all, 1000000, 1000000);
    CHECK_DOP(share, <, 0.05);
    CHECK_DOP(share, >, 0.01);

    /* 90% in GC from a clean start: above the cap at once; from a 10% history, within 30. */
    gc = all = 0;
    share = mosaic_pm_gc_share(&gc, &all, 9000000, 10000000);
    CHECK_NEAR(share, 0.9, 1e-12);
    gc = all = 0;
    for (int i = 0; i < 100; i++) mosaic_pm_gc_share(&gc, &all, 1000000, 10000000);
    int n = 0;
    do {
        share = mosaic_pm_gc_share(&gc, &all, 9000000, 10000000);
        n++;
    } while (share <= 0.5 && n < 1000);
    CHECK_OP(n, >=, 10);                         /* the history weighs: 0.9 - 0.8 (15/16)^n > 0.5 from n = 11 */
    CHECK_OP(n, <=, 12);
    for (int i = 0; i < 400; i++) share = mosaic_pm_gc_share(&gc, &all, 9000000, 10000000);
    CHECK_NEAR(share, 0.9, 1e-9);
}

int
main(void)
{
    RUN(test_growth_step);
    RUN(test_major_target);
    RUN(test_keep_slots_and_shrink);
    RUN(test_short_of_free);
    RUN(test_growth_ask);
    RUN(test_churning);
    RUN(test_shared_budget);
    RUN(test_page_bytes);
    RUN(test_free_slot_floor);
    RUN(test_soft_limit);
    RUN(test_heap_target);
    RUN(test_malloc_limit);
    RUN(test_old_malloc);
    RUN(test_old_object_limits);
    RUN(test_gc_time_formulas);
    RUN(test_room_scale_formulas);
    RUN(test_build_up_end_formulas);
    RUN(test_sim_steady_program_converges);
    RUN(test_sim_live_doubles_grows_target);
    RUN(test_sim_build_up_grows_by_at_most_the_factor);
    RUN(test_sim_live_falls_shrinks);
    RUN(test_sim_small_program_keeps_init_slots);
    RUN(test_sim_free_slot_floor_leaves_room);
    RUN(test_sim_malloc_limit_rises_and_decays);
    RUN(test_sim_gc_time_share);
    RUN(test_sim_room_scale_keeps_the_gc_time_bounds);
    return check_summary("test/c/test_pace.c");
}
