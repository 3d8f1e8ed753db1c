/*
 * mosaic.h: Mosaic's internal types and the small inline helpers every module shares.
 *
 * Owns: the objspace (the collector's whole state), the page and size-class (heap)
 * structures, the per-Ractor allocation cache, and the bit helpers for side bitmaps.
 *
 * Invariants kept here (see docs/DESIGN.md for the why):
 *  - A page body is MOSAIC_PAGE_SIZE bytes, aligned to MOSAIC_PAGE_SIZE. It starts with a
 *    struct mosaic_page_header: a pointer to its struct mosaic_page, so page_of(obj) is a mask
 *    and a load, and copies of the page's slot_recip and start offset (page->start - body).
 *  - A slot's bit in a side bitmap is its slot number on its page, (addr - page->start) /
 *    page->slot_size, computed with the page's reciprocal (mosaic_bit_index): exact for every
 *    offset inside a page, so a slot size need not divide anything (any multiple of 8 bytes,
 *    at least MOSAIC_BASE_SLOT_SIZE). Bits at or beyond page->total_slots stay clear.
 *    mosaic_bit_index reads the body's header, not the page struct: the line page_of loads
 *    anyway, so a bit test touches two cache lines (header, bitmap word), not three.
 *  - GC state (mark, pin, wb-unprotected, ...) lives only in the page's side bitmaps, which
 *    are malloc'd apart from the body: a collection never writes to an object header except
 *    to free the object.
 *  - A free slot has flags == 0 (T_NONE); when it is on a freelist its second word is the
 *    next free slot.
 */
#ifndef MOSAIC_H
#define MOSAIC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "ruby/ruby.h"
#include "ruby/atomic.h"
#include "ruby/debug.h"
#include "ruby/st.h"
#include "gc/gc.h"
#include "gc/gc_impl.h"

/* Everything declared below is internal to the library: hidden, so calls between Mosaic's files
 * are direct (no PLT stub, no GOT load) and only the rb_gc_impl_* entry points, declared above
 * by gc/gc_impl.h, are exported. */
#pragma GCC visibility push(hidden)

#ifndef RBOOL
# define RBOOL(v) ((v) ? Qtrue : Qfalse)
#endif

/* ------------------------------------------------------------------ checks */

#ifndef MOSAIC_CHECK
# define MOSAIC_CHECK 0
#endif

#if MOSAIC_CHECK
# define MOSAIC_ASSERT(expr) do { \
    if (RB_UNLIKELY(!(expr))) rb_bug("Mosaic assertion failed: %s (%s:%d)", #expr, __FILE__, __LINE__); \
} while (0)
#else
# define MOSAIC_ASSERT(expr) ((void)0)
#endif

/* The size-histogram variant (make HISTOGRAM=1): records requested and optimal sizes
 * (size_histogram.c). 0 in every other build, where its hooks compile to nothing. */
#ifndef MOSAIC_SIZE_HISTOGRAM
# define MOSAIC_SIZE_HISTOGRAM 0
#endif

/* -------------------------------------------------------------- constants */

#define MOSAIC_PAGE_SIZE        (64 * 1024)
#define MOSAIC_PAGE_MASK        (~((uintptr_t)MOSAIC_PAGE_SIZE - 1))
/* Page bodies are carved out of arenas, one mapping of 64 bodies (4 MiB) each (heap.c). */
#define MOSAIC_ARENA_PAGES      64
#define MOSAIC_ARENA_SIZE       ((size_t)MOSAIC_ARENA_PAGES * MOSAIC_PAGE_SIZE)
#define MOSAIC_ARENA_FULL       UINT64_MAX
/* The smallest slot: an RBasic and three words (CRuby's RVALUE; a free slot's freelist link,
 * a T_MOVED's forwarding address and a zombie fit in it). Side bitmaps hold one bit per slot,
 * so they are sized for a page of slots this small. */
#define MOSAIC_BASE_SLOT_SIZE   40
/* Size classes: a table chosen at boot (heap.c, MOSAIC_SIZE_CLASSES) of MOSAIC_HEAP_COUNT
 * classes, at most MOSAIC_HEAP_MAX (arrays per class are sized for that many). */
#define MOSAIC_HEAP_MAX         16
extern int mosaic_heap_count;
#define MOSAIC_HEAP_COUNT       mosaic_heap_count
/* The largest slot: CRuby keeps an embedded array's length in 7 flag bits
 * (RARRAY_EMBED_LEN_MAX, 127), and embeds an array whenever its slot holds its capacity, so a
 * slot above offsetof(struct RArray, as.ary) + 127 * 8 = 1032 bytes would overflow that field. */
#define MOSAIC_MAX_SLOT_SIZE    1032
/* The first slot starts one base slot into the body, after the body's header (struct
 * mosaic_page_header: the page pointer, and copies of the slot reciprocal and start offset).
 * A class whose slot size is a multiple of a cache line starts at MOSAIC_LINE_SIZE instead, so
 * that none of its slots straddles a line (heap.c, heap_start_offset). */
#define MOSAIC_PAGE_HEADER_SIZE MOSAIC_BASE_SLOT_SIZE
#define MOSAIC_LINE_SIZE        64
#define MOSAIC_BITMAP_BITS      ((MOSAIC_PAGE_SIZE - MOSAIC_PAGE_HEADER_SIZE) / MOSAIC_BASE_SLOT_SIZE)
#define MOSAIC_BITMAP_WORDS     ((MOSAIC_BITMAP_BITS + 63) / 64)
/* Swept pages wait for allocation in buckets by free ratio (quarters). */
#define MOSAIC_FREE_BUCKETS     4

/* Why a collection ran, and how: recorded for GC.latest_gc_info and the profiler. */
enum mosaic_reason {
    MOSAIC_REASON_NEWOBJ          = 1 << 0,
    MOSAIC_REASON_MALLOC          = 1 << 1,
    MOSAIC_REASON_METHOD          = 1 << 2,
    MOSAIC_REASON_CAPI            = 1 << 3,
    MOSAIC_REASON_STRESS          = 1 << 4,
    MOSAIC_REASON_IMMEDIATE_SWEEP = 1 << 5,
    MOSAIC_REASON_IMMEDIATE_MARK  = 1 << 6,
    MOSAIC_REASON_FULL_MARK       = 1 << 7,
    MOSAIC_REASON_HAVE_FINALIZE   = 1 << 8,
    MOSAIC_REASON_MAJOR_NOFREE    = 1 << 9,
    MOSAIC_REASON_MAJOR_FORCE     = 1 << 10,
    MOSAIC_REASON_MAJOR_OLDGEN    = 1 << 11,
    MOSAIC_REASON_MAJOR_SHADY     = 1 << 12,
    MOSAIC_REASON_MAJOR_OLDMALLOC = 1 << 13,
    /* The collection runs inside rb_gc_impl_malloc & co (malloc.c): the caller may be in the
     * middle of editing an st table (its resize is that malloc), so nothing may move. */
    MOSAIC_REASON_INSIDE_MALLOC   = 1 << 14,
    /* This collection compacts (GC.compact, verify_compaction_references, the stress gate's
     * compacting GCs): a bit of the request, not a flag in the objspace, so a collection
     * another Ractor starts meanwhile (from inside its malloc, say) does not take it up. */
    MOSAIC_REASON_COMPACT         = 1 << 15,
    /* GC.start(immediate_mark: false): a major GC that marks in steps, as in the default GC. */
    MOSAIC_REASON_STEPS           = 1 << 16,
};
#define MOSAIC_REASON_MAJOR_MASK (MOSAIC_REASON_MAJOR_NOFREE | MOSAIC_REASON_MAJOR_FORCE | \
                                  MOSAIC_REASON_MAJOR_OLDGEN | MOSAIC_REASON_MAJOR_SHADY | \
                                  MOSAIC_REASON_MAJOR_OLDMALLOC)

/* A young object becomes old when a collection marks it for the MOSAIC_OLD_AGE-th time. */
#define MOSAIC_OLD_AGE 3

/* ------------------------------------------------------------------ types */

typedef uint64_t mosaic_bits_t;

struct mosaic_free_slot {
    VALUE flags;                     /* always 0: T_NONE */
    struct mosaic_free_slot *next;
};

/* A slot whose free was deferred (T_DATA without FREE_IMMEDIATELY, or with a finalizer). */
struct mosaic_zombie {
    struct RBasic basic;
    VALUE next;
    void (*dfree)(void *);
    void *data;
};

struct mosaic_heap;
struct mosaic_arena;

/* What every collection writes for every page, whatever the page holds: kept apart from
 * struct mosaic_page, packed by arena (heap.c, page_body_take), so that a GC in a forked child
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
    /* The mark bits: MOSAIC_BITMAP_WORDS words in the page's arena (heap.c), packed with the
     * other pages' mark bits, which every major GC clears and sets again for every live
     * object: a major GC in a forked child copies those, not every page's struct. Beside
     * `heap`, which marking reads too: one cache line for both. */
    mosaic_bits_t *mark_bits;
    char *body;                      /* MOSAIC_PAGE_SIZE bytes, aligned */
    struct mosaic_arena *arena;      /* the mapping the body was carved from (heap.c) */
    uintptr_t start;                 /* first slot */
    uint32_t slot_size;
    uint32_t slot_recip;             /* mosaic_slot_recip(slot_size): slot numbers by multiplying */
    uint32_t total_slots;
    uint32_t final_slots;            /* zombies on this page */
    uint32_t free_slots;             /* counted by the latest sweep of this page */
    struct mosaic_page_cycle *cycle; /* in the page's arena (heap.c) */
    struct mosaic_free_slot *freelist;
    struct mosaic_page *free_next;   /* link in a heap->free_pages bucket, or in the pool */
    size_t pooled_at;                /* stats.count when it entered the empty-page pool */

    /* Side bitmaps, one bit per slot, by slot number (mosaic_bit_index). The mark bits are
     * pointed to by mark_bits, above; the others are here, written only where a bit changes. */
    mosaic_bits_t pinned_bits[MOSAIC_BITMAP_WORDS];
    mosaic_bits_t wb_unprotected_bits[MOSAIC_BITMAP_WORDS];
    /* Generations (generation.c): age = age1:age0, old once age reaches MOSAIC_OLD_AGE. */
    mosaic_bits_t age0_bits[MOSAIC_BITMAP_WORDS];
    mosaic_bits_t age1_bits[MOSAIC_BITMAP_WORDS];
    mosaic_bits_t old_bits[MOSAIC_BITMAP_WORDS];
    mosaic_bits_t remembered_bits[MOSAIC_BITMAP_WORDS];
    /* Objects queued on objspace->retrace (mark.c, mosaic_mark_grey_again): set when one is
     * queued, cleared when it is traced again, so one is queued at most once between steps.
     * All clear outside an incremental mark. */
    mosaic_bits_t retrace_bits[MOSAIC_BITMAP_WORDS];
    /* Dead objects the background sweeper left for the mutator (sweep.c, background_safe_p). */
    mosaic_bits_t leftover_bits[MOSAIC_BITMAP_WORDS];
};
#define MOSAIC_BG_UNLISTED UINT32_MAX

/* Stores `value` in the page field `field` only when it differs. A store of the same value
 * still dirties the memory page it lands on, so in a forked child it would copy the parent's
 * page: what a collection leaves as it was must be read, not rewritten. */
#define MOSAIC_STORE_CHANGED(field, value) do { \
    __typeof__(field) mosaic_value_ = (value); \
    if ((field) != mosaic_value_) (field) = mosaic_value_; \
} while (0)

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
    /* Swept pages held back for the next major GC to allocate from while it marks in steps
     * (sweep.c; linked through free_next), and how many free slots they hold / should hold. */
    struct mosaic_page *reserve;
    size_t reserve_slots;
    size_t reserve_target;
    /* Swept pages whose freelist is not handed out, by how full they are: bucket 0 holds the
     * fullest (under 1/4 free); allocation takes from the fullest bucket first (sweep.c). */
    struct mosaic_page *free_pages[MOSAIC_FREE_BUCKETS];
    mosaic_bits_t slot_bits[MOSAIC_BITMAP_WORDS];  /* bits 0 .. slots_per_page-1: the slots a page has */

    size_t total_slots;
    size_t allocatable_slots;        /* this class's own growth budget (pace.c) */
    size_t major_target_slots;       /* pace.c: what minor GCs may grow the class to */
    size_t catch_up_slots;           /* slots the current mark's catch-up steps added (alloc.c);
                                      * the growth that mark grants counts them (pace.c) */
    size_t freeable_pages;           /* pace.c: empty pages this sweep returns to the OS, not the pool */
    size_t used_slots_at_gc;         /* allocated and not freed when the latest GC started */
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

/* Explicit mark stack: chunks of VALUEs, so depth is bounded by memory, not the C stack. */
#define MOSAIC_MARK_CHUNK 4094
/* How many in-place scans may nest before newly marked objects go on the mark stack (mark.c,
 * scan_in_place). Each level costs a few C frames: rb_gc_mark_children, the type's mark
 * function, mosaic_mark. */
#ifndef MOSAIC_MARK_EAGER_DEPTH
#define MOSAIC_MARK_EAGER_DEPTH 4
#endif
struct mosaic_mark_chunk {
    struct mosaic_mark_chunk *prev;
    size_t used;
    VALUE items[MOSAIC_MARK_CHUNK];
};

struct mosaic_mark_stack {
    struct mosaic_mark_chunk *top;
    struct mosaic_mark_chunk *spare;
};

/* Newly marked objects wait here, prefetched, before they are scanned (mark.c). */
#ifndef MOSAIC_MARK_QUEUE
# define MOSAIC_MARK_QUEUE 16  /* a power of two; 0 turns the queue off */
#endif
struct mosaic_mark_queue {
    VALUE items[MOSAIC_MARK_QUEUE ? MOSAIC_MARK_QUEUE : 1];
    unsigned char depths[MOSAIC_MARK_QUEUE ? MOSAIC_MARK_QUEUE : 1];  /* mark_depth when queued */
    unsigned int head, count;
};
/* Scans nested on the C stack at most (mark.c): a queued object is scanned at the depth it was
 * marked at, which can be less than the nesting at the time it leaves the queue. */
#define MOSAIC_MARK_NEST_MAX (MOSAIC_MARK_EAGER_DEPTH + 1)
_Static_assert((MOSAIC_MARK_QUEUE & (MOSAIC_MARK_QUEUE - 1)) == 0, "MOSAIC_MARK_QUEUE must be 0 or a power of two");

/* A growable array of pointers, malloc'd outside Ruby's accounting. */
struct mosaic_ptr_vec {
    void **items;
    size_t size;
    size_t capa;
};

/* weak_index.c: slot address -> position in the weak list, built on the first removal. */
struct mosaic_weak_entry {
    VALUE *ptr;                      /* NULL: empty; (VALUE *)1: removed */
    size_t pos;
};
struct mosaic_weak_index {
    struct mosaic_weak_entry *entries;
    size_t capa;                     /* a power of two, or 0 */
    size_t count;                    /* slots in the table */
    size_t used;                     /* entries not empty: slots + tombstones */
    bool built;
};

/* One thread's marking state (mark.c). The collecting thread's is objspace->main_marker; each
 * parallel marking thread has its own (mark_workers.c). Nothing in it is shared. */
struct mosaic_marker {
    struct mosaic_mark_stack stack;
    struct mosaic_mark_queue queue;
    VALUE parent;                    /* object whose children are being marked (or Qfalse) */
    bool parent_old;
    bool shared;                     /* other markers run: set bits atomically, share work */
    unsigned int depth;              /* depth of the object being scanned, as marked (MOSAIC_MARK_EAGER_DEPTH) */
    unsigned int nest;               /* scans nested on the C stack (MOSAIC_MARK_NEST_MAX) */
    unsigned int base_depth;         /* depth of roots and popped objects: 0, or MOSAIC_MARK_EAGER_DEPTH
                                        (incremental steps: nothing in place, every child pushed) */
    unsigned int pushes;             /* pushes since work was last offered to idle markers */
    size_t weak_count;               /* weak slots it registered */
    size_t marked_by_heap[MOSAIC_HEAP_MAX]; /* slots this marker marked in this phase, by class */
    struct mosaic_ptr_vec *weak_refs; /* where it registers weak slots */
    struct mosaic_weak_index *weak_index; /* their index, built by a remove_weak (weak_index.c) */
};


/* Tunables, read once at boot (config.c). */
struct mosaic_params {
    size_t heap_init_slots[MOSAIC_HEAP_MAX];
    size_t heap_free_slots;          /* RUBY_GC_HEAP_FREE_SLOTS: free slots a GC leaves at least, per Ractor (pace.c) */
    double growth_factor;
    size_t growth_max_slots;
    double free_slots_min_ratio;
    double free_slots_goal_ratio;
    double free_slots_max_ratio;
    size_t malloc_limit_min;
    size_t malloc_limit_max;
    double malloc_limit_growth_factor;
    size_t oldmalloc_limit_min;
    size_t oldmalloc_limit_max;
    double oldmalloc_limit_growth_factor;
    bool allow_full_mark;            /* GC.config(rgengc_allow_full_mark:); stored, see config.c */
    bool verify_after_gc;            /* MOSAIC_VERIFY=1: run the heap checker after every GC */
    bool verify_every_step;          /* MOSAIC_VERIFY_STEPS=1 (checking build): the tri-color check after every incremental step */
    bool generational;               /* MOSAIC_GENERATIONAL=0 turns minor GCs off (boot only) */
    double oldobject_limit_factor;
    double wb_unprotected_limit_ratio;
    size_t stress_minor_every;       /* checking build: MOSAIC_STRESS_MINOR=N, a GC every N allocations */
    bool stress_compact;             /* checking build: MOSAIC_STRESS_COMPACT=1, those GCs compact (alloc.c) */
    bool trace;                      /* MOSAIC_TRACE=1: one line per GC on stderr (memory.c) */
    bool memory_report;              /* MOSAIC_MEMORY_REPORT=1: breakdown at exit and at peak */
    size_t memory_limit;             /* MOSAIC_MEMORY_LIMIT / GC.config(memory_limit:); 0: none */
    /* Auto-compaction policy (compact.c, DESIGN 5b): MOSAIC_AUTO_COMPACT / GC.config. */
    int auto_compact_policy;         /* MOSAIC_AUTO_COMPACT_OFF / _FRAGMENTATION / _ALWAYS */
    double compact_occupancy;        /* a class compacts when its occupied pages are at most this full */
    double compact_pause_fraction;   /* move budget: this fraction of the mark time */
    unsigned int gc_threads;         /* MOSAIC_GC_THREADS: threads that mark, the collector's included */
    size_t parallel_mark_min;        /* MOSAIC_PARALLEL_MARK_MIN: slots in use below which marking stays on one thread */
    bool incremental;                /* MOSAIC_INCREMENTAL=0 turns off marking in steps for pacer-started majors (DESIGN section 10) */
    bool background_sweep;           /* MOSAIC_BACKGROUND_SWEEP=0 turns off the background sweeper (bg_sweep.c; on with 2+ GC threads) */
    size_t incremental_min;          /* MOSAIC_INCREMENTAL_MIN: live slots below which a major marks at once */
    double incremental_ratio;        /* MOSAIC_INCREMENTAL_RATIO: a major marks in steps only if marking it at once would
                                      * take more than this many times the longest recent minor mark (0: always) */
    double incremental_long_minor_ms; /* MOSAIC_INCREMENTAL_LONG_MINOR: ... and only once that minor took this long (ms) */
    size_t mark_step_min;            /* MOSAIC_MARK_STEP_MIN: slots a step marks at least */
    size_t stress_incremental;       /* MOSAIC_STRESS_INCREMENTAL=N: every pacer major marks in steps, of N slots (implies MOSAIC_INCREMENTAL=1) */
};

/* What a major GC does about compaction when GC.auto_compact is false (GC.auto_compact = true
 * is ALWAYS). */
enum mosaic_auto_compact_policy {
    MOSAIC_AUTO_COMPACT_OFF,
    MOSAIC_AUTO_COMPACT_FRAGMENTATION,
    MOSAIC_AUTO_COMPACT_ALWAYS,
};

/* Why the latest compaction ran (GC.latest_compact_info[:mosaic_trigger]). */
enum mosaic_compact_trigger {
    MOSAIC_COMPACT_BY_METHOD,        /* GC.compact, verify_compaction_references, Process.warmup, stress */
    MOSAIC_COMPACT_BY_AUTO_COMPACT,  /* GC.auto_compact = true: every major GC */
    MOSAIC_COMPACT_BY_ALWAYS,        /* MOSAIC_AUTO_COMPACT=always: every major GC */
    MOSAIC_COMPACT_BY_FRAGMENTATION, /* the fragmentation policy chose some classes */
};

/* Where the memory goes, in bytes (memory.c). One X-macro so that the struct, GC.stat's keys
 * (mosaic_<name>_bytes, mosaic_peak_<name>_bytes) and the report never disagree. */
#define MOSAIC_MEMORY_FIELDS(X) \
    X(rss)            /* resident set size (VmRSS) */ \
    X(heap_pages)     /* pages in use by a size class, whole (MOSAIC_PAGE_SIZE each) */ \
    X(heap_live)      /* bytes of slots holding an object (live, or garbage not swept yet) */ \
    X(heap_free)      /* bytes of free slots in pages in use */ \
    X(heap_pooled)    /* empty pages held in the pool, resident, for any class */ \
    X(metadata)       /* page descriptors with their side bitmaps, page arrays, index */ \
    X(malloc)         /* bytes malloc'd through Ruby's accounting (usable sizes), now */ \
    X(libc_in_use)    /* glibc mallinfo2: uordblks + hblkhd, the whole process */ \
    X(libc_free)      /* glibc mallinfo2: fordblks, free inside malloc's arenas */ \
    X(libc_mmap)      /* glibc mallinfo2: hblkhd, blocks malloc mmapped directly */ \
    X(other)          /* rss - heap_pages - heap_pooled - libc_in_use - libc_free, >= 0 */

struct mosaic_memory {
#define MOSAIC_MEMORY_MEMBER(name) size_t name;
    MOSAIC_MEMORY_FIELDS(MOSAIC_MEMORY_MEMBER)
#undef MOSAIC_MEMORY_MEMBER
};

#define MOSAIC_PROFILE_MAX 100000
struct mosaic_profile_record {
    unsigned int reason;
    double gc_time;                  /* seconds */
    double invoke_time;              /* seconds since boot */
    size_t heap_use_size;
    size_t heap_total_size;
    size_t heap_total_objects;
};

struct mosaic_stats {
    size_t count;
    uint64_t marking_time_ns;
    uint64_t sweeping_time_ns;
    size_t marked_slots;
    size_t weak_references_count;
    size_t retained_weak_references_count;
    size_t remembered_rescanned;     /* objects a minor GC traced from the remembered set */
    size_t malloc_trim_count;        /* memory.c */
    uint64_t malloc_trim_time_ns;
    size_t minor_gc_count;
    size_t major_gc_count;
    unsigned int latest_reason;
    size_t compact_count;            /* compact.c: compactions run */
    /* collect.c: every stay inside the collector (a collection, a lazy-sweep step, the
     * shutdown frees), from after entering (VM lock, barrier, GC_ENTER hook) to before
     * leaving (GC_EXIT hook). Wall time is CLOCK_MONOTONIC; CPU time is the collecting
     * thread's CLOCK_THREAD_CPUTIME_ID (GC worker threads, when there are any, add theirs).
     * A pause is one stay; its kind is the kind of the latest collection (full_mark), so a
     * lazy-sweep step after a major GC counts as a major pause. Only while measure_time. */
    uint64_t gc_wall_ns;
    uint64_t gc_cpu_ns;
    uint64_t pause_max_minor_ns;
    uint64_t pause_max_major_ns;
    uint64_t enter_wall_ns;          /* 0 when the current stay is not measured */
    uint64_t enter_cpu_ns;
    size_t total_moved_objects;      /* compact.c: objects ever moved */
    size_t fragmentation_compact_count;  /* compact.c: compactions the fragmentation policy ran */
    size_t parallel_marks;           /* mark phases run on several threads (mark_workers.c) */
    size_t incremental_marks;        /* major GCs that marked in steps */
    size_t incremental_steps;        /* their steps, start and final pauses excluded */
    size_t incremental_forced_finishes; /* marks finished early: allocation outran them, or a GC was asked for */
    size_t incremental_parallel_steps; /* steps shared with the GC threads */
    size_t incremental_catch_up_steps; /* steps of L / MOSAIC_MARK_CATCH_UP_DIV when allocation outran a mark */
    size_t incremental_retraced_objects; /* marked objects traced again after a bulk write (mark.c) */
    size_t incremental_retrace_queue_max; /* the most entries the re-grey queue has held at once */
    size_t background_sweeps;        /* cycles the background sweeper was started on */
    size_t background_freed_objects; /* objects it freed (its CPU time and pages: bg_sweep.c) */
    size_t parallel_mark_offers;     /* chunks of mark work handed from one marker to another */
    size_t parallel_marked_by_threads; /* slots the GC threads (not the collecting one) marked */
    size_t compact_freed_pages;      /* compact.c: pages compactions emptied, ever */

    bool profiler_enabled;
    struct mosaic_profile_record *records;
    size_t record_count;
    size_t record_capa;
    struct timespec boot_time;
};

typedef struct mosaic_objspace {
    struct mosaic_heap heaps[MOSAIC_HEAP_MAX];

    /* All pages of all classes, sorted by body address, for conservative lookups. */
    struct mosaic_page **sorted_pages;
    size_t sorted_count;
    size_t sorted_capa;
    /* The same pages by body address, open addressing (heap.c); mask = capacity - 1. */
    struct mosaic_page **page_index;
    size_t page_index_mask;
    uintptr_t lomem, himem;
    struct mosaic_arena *arenas;     /* every mapping that holds page bodies (heap.c) */

    /* Cycle state. */
    bool during_gc;
    bool dont_gc;
    bool gc_stress;
    VALUE gc_stress_mode;
    bool measure_time;
    bool lazy_sweeping;              /* some heap has pages before_sweep */
    bool marking;
    /* GC.latest_gc_info(:state), the default GC's gc_mode: MARKING from just after the
     * GC_START hook through the GC_END_MARK hook, SWEEPING from then through the GC_END_SWEEP
     * hook (compaction included; lazy sweeping keeps it between collections), else NONE. */
    enum { MOSAIC_STATE_NONE, MOSAIC_STATE_MARKING, MOSAIC_STATE_SWEEPING } gc_state;
    bool full_mark;                  /* the running (or latest) collection is a major GC */
    int heap_walk_depth;             /* > 0: pages must not be freed (a walk holds a snapshot) */
    bool malloc_gc_pending;          /* malloc limit crossed without the GVL */
    size_t stress_minor_countdown;   /* checking build: allocations left before a forced GC */
    size_t stress_compactions;       /* checking build: MOSAIC_STRESS_COMPACT's compactions so far */
    size_t stress_verified_at;       /* total allocations at the last verification (checking build) */
    rb_event_flag_t hook_events;

    struct mosaic_marker main_marker; /* the collecting thread's marking state (mark.c) */
    struct mosaic_ptr_vec weak_refs;  /* weak slots registered this mark phase, all markers' */
    struct mosaic_weak_index weak_index; /* weak_index.c; built only after a remove_weak */
    bool aging;                      /* this mark phase ages and promotes what it marks */
    struct mosaic_mark_workers *workers; /* parallel marking threads (mark_workers.c), or NULL */
    size_t threads_held_until_count; /* no GC thread starts while stats.count <= this (mosaic_gc_threads_allowed) */
    struct mosaic_bg_sweep *bg_sweep; /* the background sweeper (bg_sweep.c), or NULL */
    size_t last_traced[2];           /* ... by the latest minor [0] and major [1] mark phase, plus one (0: none yet) */
    /* Incremental marking (DESIGN section 10, collect.c and mark.c). */
    bool incremental_marking;        /* a major GC is marking in steps: between its pauses too */
    unsigned int incremental_reason; /* its MOSAIC_REASON_* (the sweep and reports read them at its end) */
    double mark_per_slot;            /* slots a step marks per slot a cache takes */
    double mark_live_estimate;       /* L, the slots this mark in steps expects to trace */
    size_t mark_catch_ups;           /* catch-up steps this mark took (collect.c) */
    bool marked_in_steps;            /* the latest cycle's major marked in steps (MOSAIC_TRACE) */
    size_t incremental_steps_at_start; /* stats.incremental_steps when it started */
    size_t incremental_traced_by_threads; /* slots the GC threads marked in this mark's steps */
    struct mosaic_mark_stack retrace; /* objects re-greyed between steps, traced again by the collecting thread alone (mark.c) */
    size_t retrace_queued;           /* entries on it now: at most one per object (page->retrace_bits) */
    bool reserving;                  /* this sweep holds pages back for an incremental major (sweep.c) */
    size_t tricolor_checked_at;      /* checking build: total allocations at the latest tri-color check */
    void *verify_ctx;                /* set while the heap checker walks edges (verify.c) */

    /* Generations (generation.c, pace.c); whether they are on is params.generational. */
    unsigned int need_major;         /* MOSAIC_REASON_MAJOR_* for the next collection */
    size_t old_objects;
    size_t old_objects_limit;
    size_t old_wb_unprotected_objects;
    size_t old_wb_unprotected_limit;
    size_t last_major_count;         /* stats.count at the latest major GC */

    /* Compaction (compact.c). */
    bool auto_compact;               /* GC.auto_compact: every major GC compacts */
    bool compact_toward_empty;       /* verify_compaction_references(toward: :empty): move dense pages into empty ones */
    bool compact_expand;             /* verify_compaction_references(expand_heap/double_heap): add empty pages first */
    bool compacting;                 /* objects are moving; T_MOVED slots exist */
    bool updating_references;        /* rb_gc_impl_mark_and_move updates instead of marking */
    bool verify_roots_due;           /* objects moved since the latest heap check: check the roots too (verify.c) */
    size_t compact_considered[RUBY_T_MASK + 1];  /* latest compaction, per type */
    size_t compact_moved[RUBY_T_MASK + 1];
    size_t compact_moved_up[RUBY_T_MASK + 1];    /* ... of which into a larger class */
    size_t compact_moved_down[RUBY_T_MASK + 1];  /* ... of which into a smaller class */
    /* The fragmentation policy (compact.c, mosaic_compact_select) and the latest compaction. */
    int compact_trigger;             /* enum mosaic_compact_trigger */
    unsigned int compact_classes;    /* bit h: class h takes part (all for every trigger but fragmentation) */
    size_t compact_budget;           /* most objects the compaction may move; SIZE_MAX: no bound */
    uint64_t latest_mark_ns;         /* the latest mark done at once: MOSAIC_TRACE, the fragmentation policy's
                                      * move budget, the mark cost below (measured even with GC time off) */
    /* What a mark done at once costs (collect.c, mark_cost_observe): for the choice between
     * marking a major in steps and at once (incremental_p). */
    double mark_ns_per_slot;         /* ns per slot traced, moving average over marks done at once (0: none yet) */
    uint64_t minor_mark_peak_ns;     /* the longest recent minor mark: each minor's, or the peak less 1/8 per mark done at once */
    double compact_move_ns;          /* measured cost of one move, ns (moving average) */
    uint64_t compact_update_ns;      /* the latest compaction's reference-update pass, ns */
    double compact_occupancy[MOSAIC_HEAP_MAX];     /* per class, as measured after the mark */
    size_t compact_freeable[MOSAIC_HEAP_MAX];      /* per class: occupied pages - pages needed */
    size_t compact_freed[MOSAIC_HEAP_MAX];         /* per class: pages the compaction emptied */
    unsigned int compact_skip[MOSAIC_HEAP_MAX];    /* majors the policy skips the class for */
    unsigned int compact_backoff[MOSAIC_HEAP_MAX]; /* the next skip after a fruitless compaction */

    /* Finalization. */
    st_table *finalizer_table;       /* obj -> hidden Array of finalizer procs */
    VALUE zombies;                   /* atomic singly linked list through mosaic_zombie.next */
    rb_postponed_job_handle_t finalize_job;
    rb_atomic_t finalizing;

    /* Object ids. */
    st_table *obj_to_id;
    st_table *id_to_obj;
    unsigned long long next_object_id;

    /* Growth budget shared by all classes, in bytes of page (pace.c). */
    size_t allocatable_bytes;
    size_t grown_since_gc;           /* fresh page bytes mapped since the latest GC (pace.c) */
    size_t free_slots_floor_bytes;   /* what the latest GC granted for RUBY_GC_HEAP_FREE_SLOTS (pace.c) */

    /* The empty-page pool (heap.c): pages no class uses, resident, linked through free_next. */
    struct mosaic_page *pool;
    size_t pool_count;
    size_t pool_taken;               /* pages taken from the pool since the latest GC */
    size_t pool_reserve;             /* pages the pool keeps however long idle (hysteresis) */
    size_t pages_returned;           /* pages ever given back to the OS (GC.stat :mosaic_pages_returned) */

    /* Memory figures (memory.c). */
    struct mosaic_memory memory_peak;   /* the breakdown at the GC with the highest RSS */
    size_t heap_target_bytes;        /* pace.c: the page bytes the heap may reach before the next GC */
    size_t live_bytes;               /* slot bytes marked by the latest GC */
    size_t malloc_live_bytes;        /* malloc_bytes when the latest major GC's sweep ended */
    size_t oldmalloc_held_bytes;     /* pace.c: survivors' malloc beyond the latest major's live malloc */
    size_t oldmalloc_trigger_bytes;  /* pace.c: oldmalloc_held_bytes when a minor asked for a major */
    size_t overhead_at_trim;         /* memory.c: rss_overhead_bytes after the latest malloc_trim */
    size_t idle_at_trim;             /* memory.c: glibc's idle bytes at the first walk after the latest trim */
    size_t trim_returned_bytes;      /* memory.c: how far the latest malloc_trim lowered the overhead */
    uint64_t libc_walk_ns;           /* memory.c: what the latest walk of glibc's bins took (mallinfo2, malloc_trim) */
    uint64_t libc_walked_at_ns;      /* when the collector's latest walk ended (the walk budget) */
    size_t libc_walked_chunks;       /* the free chunks it visited (mallinfo2's count; after a trim, an estimate) */
    size_t libc_walked_malloc;       /* malloc_bytes then */
    size_t libc_measured_malloc;     /* malloc_bytes at the latest mallinfo2 walk (libc_measured's baseline) */
    size_t libc_freed_page_bytes;    /* malloc.c: whole-page bytes in chunks Ruby freed since the latest trim, estimated */
    size_t rss_overhead_bytes;       /* RSS beyond pages + malloc_bytes at the latest GC's end */
    size_t rss_measured;             /* RSS at its latest read: a GC's end, a measured breakdown (memory.c) */
    struct mosaic_memory libc_measured; /* memory.c: glibc's figures (libc_*) at the latest mallinfo2 walk */
    size_t malloc_bytes_at_gc;       /* malloc_bytes when the latest GC started */
    size_t malloc_freed_by_sweep;    /* malloc_bytes the current cycle's sweep freed (sweep.c) */
    size_t heap_bytes_at_gc;         /* slot bytes holding objects when the latest GC started */
    uint64_t gc_start_ns;            /* when the latest GC started (MOSAIC_TRACE) */
    bool limit_set_aside;            /* pace.c: live memory does not fit memory_limit */
    double gc_ns_recent;             /* pace.c: GC time and all time, decaying sums */
    double all_ns_recent;
    uint64_t last_gc_end_ns;
    uint64_t gc_ns_at_last_end;      /* pace.c: marking + sweeping time when the latest GC ended */
    double gc_time_share;            /* pace.c: gc_ns_recent / all_ns_recent at the latest GC's end */
    bool limit_warned;

    /* Malloc accounting. */
    size_t malloc_bytes;             /* atomic; outstanding, usable sizes (malloc.c) */
    size_t malloc_increase;          /* atomic */
    size_t malloc_limit;
    size_t growth_trigger_bytes;     /* fresh pages + malloc since the latest GC that run a GC from malloc (pace.c) */
    size_t oldmalloc_increase;       /* atomic; bytes malloc'd since the latest major GC */
    size_t oldmalloc_limit;

    struct mosaic_params params;
    struct mosaic_stats stats;
    unsigned long live_ractor_cache_count;
} mosaic_objspace_t;

/* ------------------------------------------------------------ bit helpers */

/* The first bytes of every page body (within MOSAIC_PAGE_HEADER_SIZE; heap.c writes it when it
 * creates a page and when it lays one out for a class). The two copies equal the page struct's
 * slot_recip and start - body (verify.c checks): finding an object's page and its slot number
 * then reads this one cache line. */
struct mosaic_page_header {
    struct mosaic_page *page;
    uint32_t slot_recip;
    uint32_t start_offset;
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

/* ceil(2^32 / slot_size). Why it is exact: with r = this and e = r * d - 2^32 (0 <= e < d),
 * n * r / 2^32 = n / d + n * e / (d * 2^32), and for n, d < 2^16 the error term n * e / 2^32
 * stays under 1, less than the gap from n mod d to d: (n * r) >> 32 == n / d for every offset
 * n in a page (heap.c checks every one at boot). A multiply and a shift instead of a division
 * by a slot size the compiler does not know. */
static inline uint32_t
mosaic_slot_recip(size_t slot_size)
{
    return (uint32_t)((((uint64_t)1 << 32) + slot_size - 1) / slot_size);
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

/* A relaxed atomic load (the same plain load on x86-64 and arm64): other threads may change
 * other bits of the word meanwhile (markers age and pin the slots they claimed, the write
 * barrier remembers objects while the background sweeper clears dead slots' bits), and a
 * plain read concurrent with their atomic writes is a data race in C11 (and a ThreadSanitizer
 * report), even though the bit read is not one they change. */
static inline bool
mosaic_bit_test(const mosaic_bits_t *bits, size_t i)
{
    return (__atomic_load_n(&bits[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1;
}

static inline void
mosaic_bit_set(mosaic_bits_t *bits, size_t i)
{
    bits[i / 64] |= (mosaic_bits_t)1 << (i % 64);
}

static inline void
mosaic_bit_clear(mosaic_bits_t *bits, size_t i)
{
    bits[i / 64] &= ~((mosaic_bits_t)1 << (i % 64));
}

/* For bitmap words other threads may write at the same time (write barriers of other Ractors,
 * other markers). */
static inline void
mosaic_bit_set_atomic(mosaic_bits_t *bits, size_t i)
{
    __atomic_fetch_or(&bits[i / 64], (mosaic_bits_t)1 << (i % 64), __ATOMIC_RELAXED);
}

static inline void
mosaic_bit_clear_atomic(mosaic_bits_t *bits, size_t i)
{
    __atomic_fetch_and(&bits[i / 64], ~((mosaic_bits_t)1 << (i % 64)), __ATOMIC_RELAXED);
}

static inline bool
mosaic_marked_p(VALUE obj)
{
    const struct mosaic_page *page = mosaic_page_of(obj);
    return mosaic_bit_test(page->mark_bits, mosaic_bit_index(obj));
}

static inline bool
mosaic_old_p(VALUE obj)
{
    const struct mosaic_page *page = mosaic_page_of(obj);
    return mosaic_bit_test(page->old_bits, mosaic_bit_index(obj));
}

/* CRuby's imemo kind of a T_IMEMO: bits RUBY_FL_USHIFT.. of its flags (internal/imemo.h's
 * imemo_type, IMEMO_MASK 0x0f). Mosaic reads it for instruction sequences (mark.c), heap
 * environments (generation.c) and the kinds the background sweeper may free (sweep.c). */
enum {
    MOSAIC_IMEMO_ENV = 0, MOSAIC_IMEMO_CREF = 1, MOSAIC_IMEMO_SVAR = 2, MOSAIC_IMEMO_THROW_DATA = 3,
    MOSAIC_IMEMO_IFUNC = 4, MOSAIC_IMEMO_MEMO = 5, MOSAIC_IMEMO_ISEQ = 7,
};
static inline unsigned int
mosaic_imemo_kind(VALUE obj)
{
    return (unsigned int)((RBASIC(obj)->flags >> RUBY_FL_USHIFT) & 0x0f);
}

/* An instruction sequence CRuby is still loading from binary: ISEQ_NOT_LOADED_YET (iseq.h:
 * IMEMO_FL_USER1, which is RUBY_FL_USER5) is set from its allocation until compile.c's
 * ibf_load_iseq_complete, and meanwhile its literals are announced (RB_OBJ_WRITTEN) before
 * the code that holds them is published (DESIGN section 4, "Loading iseqs"). */
static inline bool
mosaic_iseq_loading_p(VALUE obj)
{
    return RB_BUILTIN_TYPE(obj) == T_IMEMO && mosaic_imemo_kind(obj) == MOSAIC_IMEMO_ISEQ &&
        (RBASIC(obj)->flags & RUBY_FL_USER5);
}

/* Objects (live, zombies, garbage not swept yet) in the class, given the objects ever
 * allocated in it (`allocated`: heap->total_allocated_objects, plus what caches hold when they
 * were not flushed). Objects compaction moved across classes count where they are now. */
static inline size_t
mosaic_heap_used_slots(const struct mosaic_heap *heap, size_t allocated)
{
    return (allocated + heap->moved_in_objects) - (heap->total_freed_objects + heap->moved_out_objects);
}

/* The largest count or byte size Mosaic keeps: a Fixnum, so that GC.stat and friends never
 * allocate a Bignum (they may be called from inside a collection, by event hooks). */
#define MOSAIC_SIZE_MAX ((size_t)RUBY_FIXNUM_MAX)

/* n * factor for the pacer, saturating: never negative, never above MOSAIC_SIZE_MAX, 0 for a
 * NaN. (A plain size_t conversion of an out-of-range double is undefined.) */
static inline size_t
mosaic_scale(size_t n, double factor)
{
    double r = (double)n * factor;
    if (!(r > 0.0)) return 0;
    if (r >= (double)MOSAIC_SIZE_MAX) return MOSAIC_SIZE_MAX;
    return (size_t)r;
}

static inline size_t
mosaic_add_sat(size_t a, size_t b)
{
    return a > MOSAIC_SIZE_MAX - b ? MOSAIC_SIZE_MAX : a + b;
}

static inline uint64_t
mosaic_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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

static inline uint64_t
mosaic_thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Holds collections off around an update of an address-keyed st table (object ids,
 * finalizers) outside the GC: st_insert may malloc, malloc may collect, and a collection
 * deletes dead keys from (sweep) and re-keys moved objects in (compaction) the very same
 * tables; st is not reentrant. Returns the state to give back to mosaic_gc_release. */
static inline bool
mosaic_gc_hold(mosaic_objspace_t *objspace)
{
    bool prev = objspace->dont_gc;
    /* Atomic: other Ractors read dont_gc without the VM lock this thread holds (the guards of
     * mosaic_collect and of malloc's collections). */
    __atomic_store_n(&objspace->dont_gc, true, __ATOMIC_RELAXED);
    return prev;
}

static inline void
mosaic_gc_release(mosaic_objspace_t *objspace, bool prev)
{
    __atomic_store_n(&objspace->dont_gc, prev, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------ module interfaces */

/* heap.c: size classes, pages, page lookup */
void mosaic_size_classes_from_env(void);
void mosaic_heap_init(mosaic_objspace_t *objspace);
void mosaic_heap_free_all(mosaic_objspace_t *objspace);
size_t mosaic_heap_index_for_size(size_t size);
struct mosaic_page *mosaic_page_new(mosaic_objspace_t *objspace, struct mosaic_heap *heap);
void mosaic_page_release(mosaic_objspace_t *objspace, struct mosaic_heap *heap, size_t index);
void mosaic_heap_retire_empty_page(mosaic_objspace_t *objspace, struct mosaic_heap *heap, size_t index);
size_t mosaic_heap_release_empty_pages(mosaic_objspace_t *objspace);
bool mosaic_pointer_to_slot_p(mosaic_objspace_t *objspace, const void *ptr);
size_t mosaic_heap_available_slots(mosaic_objspace_t *objspace);
size_t mosaic_heap_allocated_pages(mosaic_objspace_t *objspace);
size_t mosaic_arena_metadata_bytes(mosaic_objspace_t *objspace);
extern size_t mosaic_heap_sizes[MOSAIC_HEAP_MAX + 1];

/* alloc.c: caches and the allocation paths */
struct mosaic_cache *mosaic_cache_new(mosaic_objspace_t *objspace);
void mosaic_cache_free(mosaic_objspace_t *objspace, struct mosaic_cache *cache);
void mosaic_caches_clear(mosaic_objspace_t *objspace);
size_t mosaic_heap_total_allocated(mosaic_objspace_t *objspace, int heap_index);
size_t mosaic_total_allocated(mosaic_objspace_t *objspace);
VALUE mosaic_new_obj(mosaic_objspace_t *objspace, struct mosaic_cache *cache, VALUE klass, VALUE flags,
                     VALUE v1, VALUE v2, VALUE v3, bool wb_protected, size_t alloc_size);

/* mark.c: marking and weak references */
void mosaic_mark(mosaic_objspace_t *objspace, VALUE obj, bool pin);
void mosaic_mark_maybe(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_mark_and_move(mosaic_objspace_t *objspace, VALUE *ptr);
void mosaic_mark_weak(mosaic_objspace_t *objspace, VALUE *ptr);
void mosaic_remove_weak(mosaic_objspace_t *objspace, VALUE parent, VALUE *ptr);
void mosaic_mark_phase(mosaic_objspace_t *objspace, bool full);
size_t mosaic_expected_traced(mosaic_objspace_t *objspace, bool full);
void mosaic_mark_incremental_start(mosaic_objspace_t *objspace);
bool mosaic_mark_incremental_step(mosaic_objspace_t *objspace, size_t budget);
void mosaic_mark_incremental_finish(mosaic_objspace_t *objspace);
void mosaic_mark_grey(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_mark_grey_again(mosaic_objspace_t *objspace, VALUE obj);
bool mosaic_mark_needs_regrey(VALUE obj);
size_t mosaic_peak_mark_stack_bytes(void);
void mosaic_mark_stack_each(mosaic_objspace_t *objspace, void (*func)(VALUE obj, void *data), void *data);
void mosaic_marked_wb_unprotected_each(mosaic_objspace_t *objspace, void (*func)(VALUE obj, void *data), void *data);
size_t mosaic_verify_retrace_queue(mosaic_objspace_t *objspace);
size_t mosaic_verify_tricolor(mosaic_objspace_t *objspace);
void mosaic_mark_stack_free(struct mosaic_mark_stack *stack);
void mosaic_marker_begin(mosaic_objspace_t *objspace, struct mosaic_marker *marker, bool shared);
void mosaic_marker_drain(mosaic_objspace_t *objspace, struct mosaic_marker *marker);
size_t mosaic_marker_end(mosaic_objspace_t *objspace, struct mosaic_marker *marker);
void mosaic_mark_stack_push_chunk(struct mosaic_mark_stack *stack, struct mosaic_mark_chunk *chunk);
struct mosaic_mark_chunk *mosaic_mark_stack_split(struct mosaic_mark_stack *stack);
struct mosaic_mark_chunk *mosaic_mark_stack_take_chunk(struct mosaic_mark_stack *stack);
bool mosaic_marker_trace(mosaic_objspace_t *objspace, struct mosaic_marker *marker, size_t budget);
size_t mosaic_marker_marked(const struct mosaic_marker *marker);

/* mark_workers.c: parallel marking threads and the work they share */
/* Whether a GC thread (marker, background sweeper) may start now: not in a forked child's
 * first collection (mark_workers.c, mosaic_gc_threads_after_fork). */
static inline bool
mosaic_gc_threads_allowed(const mosaic_objspace_t *objspace)
{
    return objspace->stats.count > objspace->threads_held_until_count;
}
void mosaic_gc_threads_after_fork(mosaic_objspace_t *objspace);
bool mosaic_mark_workers_begin(mosaic_objspace_t *objspace, size_t step_budget);
void mosaic_mark_workers_step(mosaic_objspace_t *objspace, struct mosaic_marker *marker);
bool mosaic_mark_workers_hungry(mosaic_objspace_t *objspace);
void mosaic_mark_workers_offer(mosaic_objspace_t *objspace, struct mosaic_marker *marker);
size_t mosaic_mark_workers_finish(mosaic_objspace_t *objspace, struct mosaic_marker *marker);
void mosaic_mark_workers_stop(mosaic_objspace_t *objspace);
bool mosaic_gc_thread_create(pthread_t *thread, void *(*main)(void *), void *arg);
void mosaic_gc_thread_begin(const char *name);

/* heap.c: the empty-page pool */
struct mosaic_page *mosaic_pool_take(mosaic_objspace_t *objspace, struct mosaic_heap *heap);
void mosaic_pool_put(mosaic_objspace_t *objspace, struct mosaic_heap *heap, size_t index);
size_t mosaic_pool_slots(mosaic_objspace_t *objspace);
size_t mosaic_pool_trim(mosaic_objspace_t *objspace, bool all, bool credit);

/* sweep.c: sweeping and page reuse */
struct mosaic_page *mosaic_heap_dequeue_free_page(struct mosaic_heap *heap);
void mosaic_heap_requeue_free_pages(struct mosaic_heap *heap);
void mosaic_sweep_prepare(mosaic_objspace_t *objspace);
struct mosaic_page *mosaic_sweep_for_free_page(mosaic_objspace_t *objspace, struct mosaic_heap *heap);
void mosaic_sweep_help(mosaic_objspace_t *objspace);
void mosaic_sweep_rest(mosaic_objspace_t *objspace);
void mosaic_sweep_finish_now(mosaic_objspace_t *objspace);
void mosaic_sweep_page_background(mosaic_objspace_t *objspace, struct mosaic_page *page);

/* bg_sweep.c: the background sweeper */
void mosaic_bg_sweep_init(mosaic_objspace_t *objspace);
void mosaic_bg_sweep_list(mosaic_objspace_t *objspace);
void mosaic_bg_sweep_start(mosaic_objspace_t *objspace);
void mosaic_bg_sweep_stop(mosaic_objspace_t *objspace);
void mosaic_bg_sweep_resume(mosaic_objspace_t *objspace);
void mosaic_bg_sweep_hooks_changed(mosaic_objspace_t *objspace, rb_event_flag_t events);
void mosaic_bg_sweep_totals(mosaic_objspace_t *objspace, uint64_t *cpu_ns, size_t *pages);
void mosaic_bg_sweep_wait(mosaic_objspace_t *objspace);
bool mosaic_bg_sweep_claim(mosaic_objspace_t *objspace, struct mosaic_page *page);
void mosaic_bg_sweep_free(mosaic_objspace_t *objspace);

/* collect.c: the cycle, entering and leaving GC */
bool mosaic_collect(mosaic_objspace_t *objspace, unsigned int reason);
void mosaic_incremental_step(mosaic_objspace_t *objspace, size_t slots_taken);
/* Catch-up steps (collect.c): how many a mark in steps may take, and the share of L each marks. */
#define MOSAIC_MARK_CATCH_UPS 16
#define MOSAIC_MARK_CATCH_UP_DIV 8
bool mosaic_incremental_catch_up(mosaic_objspace_t *objspace);
void mosaic_incremental_finish(mosaic_objspace_t *objspace);
bool mosaic_incremental_start_due(mosaic_objspace_t *objspace);
bool mosaic_incremental_wanted(mosaic_objspace_t *objspace);
void mosaic_heap_release_reserves(mosaic_objspace_t *objspace);
void mosaic_heap_drop_reserves(mosaic_objspace_t *objspace);
void mosaic_gc_rest(mosaic_objspace_t *objspace);
void mosaic_gc_enter(mosaic_objspace_t *objspace, unsigned int *lock_lev, bool barrier);
void mosaic_gc_exit(mosaic_objspace_t *objspace, unsigned int *lock_lev);

/* pace.c: when the next GC runs, how the heap grows and shrinks */
void mosaic_pace_init(mosaic_objspace_t *objspace);
void mosaic_pace_after_mark(mosaic_objspace_t *objspace);
void mosaic_pace_after_sweep(mosaic_objspace_t *objspace);
void mosaic_pace_old_limits(mosaic_objspace_t *objspace);
void mosaic_pace_gc_time(mosaic_objspace_t *objspace, uint64_t start_ns, uint64_t end_ns);
void mosaic_pace_malloc_limit(mosaic_objspace_t *objspace);
size_t mosaic_pace_counted_bytes(mosaic_objspace_t *objspace);
size_t mosaic_pace_used_bytes(mosaic_objspace_t *objspace);
bool mosaic_pace_over_limit(mosaic_objspace_t *objspace);
bool mosaic_pace_grown_enough(mosaic_objspace_t *objspace);
size_t mosaic_pace_growth_step(mosaic_objspace_t *objspace);
/* Memory taken since the latest GC, slots and malloc in one budget: fresh page bytes mapped
 * plus the net malloc increase. */
static inline size_t
mosaic_pace_grown_bytes(mosaic_objspace_t *objspace)
{
    return mosaic_add_sat(objspace->grown_since_gc, __atomic_load_n(&objspace->malloc_increase, __ATOMIC_RELAXED));
}
bool mosaic_pace_near_limit(mosaic_objspace_t *objspace);
void mosaic_pace_after_fork(mosaic_objspace_t *objspace);
size_t mosaic_pace_keep_slots(const struct mosaic_params *params, int h, size_t live);

/* memory.c: where the memory goes; MOSAIC_TRACE, MOSAIC_MEMORY_REPORT, malloc_trim */
/* How fresh mosaic_memory_breakdown's measured figures (RSS, glibc's) are. */
enum mosaic_measure {
    MOSAIC_MEASURE_NONE,   /* RSS as of its latest read, glibc's figures estimated: no system call, no walk */
    MOSAIC_MEASURE_PACED,  /* RSS now; glibc's figures now if the walk budget allows */
    MOSAIC_MEASURE_NOW,    /* both now, whatever the walk costs */
};
void mosaic_memory_breakdown(mosaic_objspace_t *objspace, struct mosaic_memory *m, enum mosaic_measure measure);
size_t mosaic_memory_measure_overhead(mosaic_objspace_t *objspace);
void mosaic_memory_after_gc(mosaic_objspace_t *objspace, unsigned int reason);
void mosaic_memory_after_sweep(mosaic_objspace_t *objspace);
void mosaic_memory_trim_now(mosaic_objspace_t *objspace);
void mosaic_memory_report(mosaic_objspace_t *objspace, const char *when);

#if MOSAIC_SIZE_HISTOGRAM
/* size_histogram.c: requested sizes at allocation, optimal sizes at death, JSON at exit */
void mosaic_size_histogram_alloc(VALUE flags, size_t alloc_size);
void mosaic_size_histogram_death(VALUE obj);
void mosaic_size_histogram_write(void);
#endif

/* malloc.c: accounting of malloc'd bytes */
void mosaic_malloc_increase(mosaic_objspace_t *objspace, size_t size, bool may_collect);
void mosaic_malloc_decrease(mosaic_objspace_t *objspace, size_t size);
void mosaic_malloc_tally_begin(size_t *tally);
void mosaic_malloc_tally_end(void);

/* finalize.c: zombies, finalizers */
void mosaic_finalize_init(mosaic_objspace_t *objspace);
void mosaic_zombie_push(mosaic_objspace_t *objspace, VALUE obj, void (*dfree)(void *), void *data);
void mosaic_finalize_deferred(mosaic_objspace_t *objspace);
void mosaic_finalize_mark_roots(mosaic_objspace_t *objspace);
void mosaic_finalize_move(mosaic_objspace_t *objspace, VALUE src, VALUE dest);

/* compact.c: moving objects, forwarding, reference updating */
void mosaic_compact(mosaic_objspace_t *objspace);
bool mosaic_compact_select(mosaic_objspace_t *objspace);
VALUE mosaic_location(mosaic_objspace_t *objspace, VALUE obj);
bool mosaic_moved_p(VALUE obj);
void mosaic_define_compact(void);

/* objid.c: object ids */
void mosaic_objid_init(mosaic_objspace_t *objspace);
void mosaic_objid_free(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_objid_mark_roots(mosaic_objspace_t *objspace);
VALUE mosaic_object_id(mosaic_objspace_t *objspace, VALUE obj);
VALUE mosaic_object_id_to_ref(mosaic_objspace_t *objspace, VALUE id);
VALUE mosaic_objid_for_finalizer(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_objid_move(mosaic_objspace_t *objspace, VALUE src, VALUE dest);

/* generation.c: ages, old objects, the remembered set, write barriers */
void mosaic_remember(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_writebarrier(mosaic_objspace_t *objspace, VALUE a, VALUE b);
void mosaic_writebarrier_unprotect(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_writebarrier_remember(mosaic_objspace_t *objspace, VALUE obj);
void mosaic_minor_mark_start(mosaic_objspace_t *objspace, void (*push)(mosaic_objspace_t *, VALUE));
void mosaic_generation_count(mosaic_objspace_t *objspace);
void mosaic_promote_all(mosaic_objspace_t *objspace);
void mosaic_generation_after_fork(mosaic_objspace_t *objspace);

/* config.c: tunables and GC.config */
void mosaic_params_defaults(struct mosaic_params *params);
void mosaic_params_from_env(struct mosaic_params *params);
VALUE mosaic_config_get(mosaic_objspace_t *objspace);
void mosaic_config_set(mosaic_objspace_t *objspace, VALUE hash);

/* stats.c: GC.stat, GC.stat_heap, GC.latest_gc_info, GC::Profiler */
void mosaic_stats_init(void);
VALUE mosaic_stat(mosaic_objspace_t *objspace, VALUE hash_or_sym);
VALUE mosaic_stat_heap(mosaic_objspace_t *objspace, VALUE heap_name, VALUE hash_or_sym);
VALUE mosaic_latest_gc_info(mosaic_objspace_t *objspace, VALUE hash_or_key);
void mosaic_profile_record(mosaic_objspace_t *objspace, unsigned int reason, uint64_t start_ns, uint64_t end_ns);
void mosaic_define_profiler(void);
size_t mosaic_live_slots(mosaic_objspace_t *objspace);

/* walk.c: heap walking */
void mosaic_each_object(mosaic_objspace_t *objspace, void (*func)(VALUE, void *), void *data);
void mosaic_each_objects(mosaic_objspace_t *objspace, int (*callback)(void *, void *, size_t, void *), void *data);

/* verify.c: the heap checker */
size_t mosaic_verify_heap(mosaic_objspace_t *objspace, bool raise_on_error);
size_t mosaic_verify_roots(mosaic_objspace_t *objspace);
void mosaic_verify_edge(mosaic_objspace_t *objspace, VALUE child, bool weak);
void mosaic_define_verify(void);

/* vec helper (heap.c) */
void mosaic_ptr_vec_push(struct mosaic_ptr_vec *vec, void *item);
void mosaic_ptr_vec_free(struct mosaic_ptr_vec *vec);

/* weak_index.c */
bool mosaic_weak_index_insert(struct mosaic_weak_index *index, VALUE *ptr, size_t pos);
bool mosaic_weak_index_remove(struct mosaic_weak_index *index, VALUE *ptr, size_t *pos);
void mosaic_weak_index_build(struct mosaic_weak_index *index, struct mosaic_ptr_vec *list);
void mosaic_weak_index_reset(struct mosaic_weak_index *index);

#pragma GCC visibility pop

#endif /* MOSAIC_H */
