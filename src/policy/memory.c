/*
 * memory.c: where the process's memory goes, as the collector sees it, and what Mosaic says
 * about it: the breakdown (GC.stat :mosaic_*_bytes, stats.c), its snapshot at the peak,
 * MOSAIC_TRACE=1 (one line per GC on stderr, like Go's GODEBUG=gctrace=1),
 * MOSAIC_MEMORY_REPORT=1 (the breakdown at exit and at the peak), and malloc_trim after major
 * GCs (a program that has stopped collecting is trimmed by threads/idle_trim.c, told at each GC's
 * end what the overhead is).
 *
 * The breakdown (struct mosaic_memory, fields in mosaic.h) mixes exact figures (pages, slots,
 * Ruby's malloc accounting) with the allocator's and the kernel's views (mallinfo2, VmRSS),
 * so only these identities hold exactly: heap_pages = heap_live + heap_free + per-page
 * overhead (the header slot and the tail a slot size leaves); "other" is what RSS holds
 * beyond heap pages, pooled pages and malloc's arenas (code, stacks, other mappings), clamped
 * at 0 (malloc's free memory is not all resident).
 *
 * The peak snapshot: at the end of each GC, RSS is read (one read of /proc/self/statm); when
 * it is 2% or more above the snapshot's, the whole breakdown is taken again. It is the
 * breakdown at the GC when RSS was highest, within 2%: RSS may peak between GCs.
 *
 * Walks of glibc's bins: mallinfo2 and malloc_trim both visit every free chunk in malloc's
 * bins (20 ms with 100k of them). The collector's own walks that need not happen now (the
 * peak snapshot's glibc figures, the trim rule's idle check and a trim the rule cannot expect
 * to pay) wait for the walk budget: 100 times the next walk's estimated cost since the
 * collector's latest walk (libc_walk_due), so that they take at most about 1% of the time.
 * Walks a user asks for (GC.stat with one memory key, the report, Process.warmup's trim),
 * a trim near the soft limit and a trim expected to pay do not wait.
 *
 * glibc's figures between walks are estimates: the latest walk's, moved by what Ruby's
 * malloc accounting changed since (bytes Ruby freed are free in glibc's arenas; bytes it
 * malloc'd are in use, taken from the free ones first). GC.stat with one memory key measures
 * now; GC.stat's Hash reads nothing: RSS as of its latest read (a GC's end, a measured
 * breakdown), glibc's figures estimated so, which makes one keyed call followed by the Hash
 * one consistent measured breakdown for one walk (what bench/lib/probe.rb does at exit).
 *
 * Invariants: nothing here allocates a Ruby object or takes the VM lock; it may run inside a
 * collection (GC.stat from an event hook).
 */
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <unistd.h>

#include "core/mosaic.h"
#include "policy/pace_math.h"

/* malloc_trim after a major GC needs the RSS beyond what Mosaic counts to have grown by this
 * much since the latest trim (trim_malloc). */
#ifndef MOSAIC_TRIM_IDLE
# define MOSAIC_TRIM_IDLE ((size_t)1 << 20)
#endif

/* The process's resident bytes now (one read of /proc/self/statm; 0 if it cannot be read).
 * Any thread (the idle trim's too). */
size_t
mosaic_memory_rss_bytes(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    unsigned long size, resident;
    if (sscanf(buf, "%lu %lu", &size, &resident) != 2) return 0;
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static size_t
metadata_bytes(mosaic_objspace_t *objspace)
{
    size_t n = objspace->pages.descriptor_bytes;
    n += mosaic_arena_metadata_bytes(objspace);
    n += objspace->pages.sorted_capa * sizeof(struct mosaic_page *);
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) n += objspace->heaps[i].page_capa * sizeof(struct mosaic_page *);
    return n;
}

#ifdef __GLIBC__
/* Bytes of a typical freed chunk, to estimate how many chunks the bytes Ruby freed since a
 * walk add to the next one (malloc-fragmented's 1-3 KB strings; most of Ruby's small frees
 * go to glibc's tcache, which no walk visits). */
#define MOSAIC_FREED_CHUNK_BYTES 2048

/* The free chunks the next walk will visit, estimated: those the latest walk visited plus
 * those the bytes Ruby freed since, net of what it malloc'd, would add. */
static size_t
libc_chunks_estimate(const mosaic_objspace_t *objspace)
{
    size_t malloc_now = __atomic_load_n(&objspace->malloc.bytes, __ATOMIC_RELAXED);
    size_t freed = objspace->memory.libc_walked_malloc > malloc_now ? objspace->memory.libc_walked_malloc - malloc_now : 0;
    return mosaic_add_sat(objspace->memory.libc_walked_chunks, freed / MOSAIC_FREED_CHUNK_BYTES);
}

/* The walk budget (header): true when at least 100 times the next walk's estimated cost has
 * passed since the collector's latest walk ended (wall clock). The estimate: the latest walk's
 * cost, scaled from the chunks it visited to those the next will (libc_chunks_estimate).
 * Scaled, because the walk that matters is the one right after a sweep freed 100k chunks:
 * 100 times the cost of the latest walk before it. Net of mallocs, so that a program freeing
 * and reusing memory at a steady rate does come due. */
static bool
libc_walk_due(const mosaic_objspace_t *objspace)
{
    if (!objspace->memory.libc_walked_at_ns) return true;
    double then = (double)objspace->memory.libc_walked_chunks + 1.0;
    double next = (double)libc_chunks_estimate(objspace) + 1.0;
    double cost_ns = (double)objspace->memory.libc_walk_ns * next / then;
    return (double)(mosaic_now_ns() - objspace->memory.libc_walked_at_ns) >= cost_ns * 100.0;
}

/* A walk of `chunks` free chunks, started at start_ns, has ended: its cost and what the
 * estimates start from. A user's walk (`by_collector` false) does not restart the budget. */
static void
libc_walk_done(mosaic_objspace_t *objspace, uint64_t start_ns, size_t chunks, bool by_collector)
{
    uint64_t end = mosaic_now_ns();
    objspace->memory.libc_walk_ns = end - start_ns;
    if (by_collector) objspace->memory.libc_walked_at_ns = end;
    objspace->memory.libc_walked_chunks = chunks;
    objspace->memory.libc_walked_malloc = __atomic_load_n(&objspace->malloc.bytes, __ATOMIC_RELAXED);
}

/* glibc's figures now (mallinfo2's walk), kept in libc_measured. */
static struct mallinfo2
libc_measure(mosaic_objspace_t *objspace, bool by_collector)
{
    uint64_t start = mosaic_now_ns();
    struct mallinfo2 mi = mallinfo2();
    libc_walk_done(objspace, start, mi.ordblks + mi.smblks, by_collector);
    objspace->memory.libc_measured.libc_in_use = mi.uordblks + mi.hblkhd;
    objspace->memory.libc_measured.libc_free = mi.fordblks;
    objspace->memory.libc_measured.libc_mmap = mi.hblkhd;
    objspace->memory.libc_measured_malloc = objspace->memory.libc_walked_malloc;
    return mi;
}

/* glibc's figures without a walk (header): the latest walk's, moved by Ruby's malloc since. */
static void
libc_estimate(const mosaic_objspace_t *objspace, struct mosaic_memory *m)
{
    const struct mosaic_memory *w = &objspace->memory.libc_measured;
    size_t now = m->malloc, then = objspace->memory.libc_measured_malloc;
    m->libc_mmap = w->libc_mmap;
    if (now >= then) {
        size_t grew = now - then;
        m->libc_in_use = mosaic_add_sat(w->libc_in_use, grew);
        m->libc_free = w->libc_free > grew ? w->libc_free - grew : 0;
    }
    else {
        size_t freed = then - now;
        m->libc_in_use = w->libc_in_use > freed ? w->libc_in_use - freed : 0;
        m->libc_free = mosaic_add_sat(w->libc_free, freed);
    }
}
#endif

/* Fills `m`. The counted figures (pages, slots, metadata, Ruby's malloc) are exact now
 * whatever `measure` says. RSS is read now unless MOSAIC_MEASURE_NONE (then: its latest
 * read, at a GC's end or a measured breakdown). glibc's figures are taken now (a walk) with
 * MOSAIC_MEASURE_NOW, or with MOSAIC_MEASURE_PACED when the walk budget allows; else they are
 * estimated from the latest walk (libc_estimate; 0 before any). With MOSAIC_MEASURE_NONE
 * nothing is read or walked, so GC.stat without a key costs what the default GC's does. */
void
mosaic_memory_breakdown(mosaic_objspace_t *objspace, struct mosaic_memory *m, enum mosaic_measure measure)
{
    memset(m, 0, sizeof(*m));
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        const struct mosaic_heap *heap = &objspace->heaps[i];
        size_t allocated = mosaic_heap_total_allocated(objspace, i);
        size_t used = mosaic_heap_used_slots(heap, allocated);  /* live + zombies */
        if (used > heap->total_slots) used = heap->total_slots;
        m->heap_live += used * heap->slot_size;
        m->heap_free += (heap->total_slots - used) * heap->slot_size;
    }
    m->heap_pages = objspace->pages.sorted_count * MOSAIC_PAGE_SIZE;
    m->heap_pooled = objspace->pool.count * MOSAIC_PAGE_SIZE;
    m->metadata = metadata_bytes(objspace);
    m->malloc = __atomic_load_n(&objspace->malloc.bytes, __ATOMIC_RELAXED);
#ifdef __GLIBC__
    if (measure == MOSAIC_MEASURE_NOW) libc_measure(objspace, false);
    else if (measure == MOSAIC_MEASURE_PACED && libc_walk_due(objspace)) libc_measure(objspace, true);
    libc_estimate(objspace, m);  /* after a walk just now: its figures exactly */
#endif  /* not glibc: no mallinfo2, the libc figures stay 0 */
    if (measure != MOSAIC_MEASURE_NONE) objspace->memory.rss_measured = mosaic_memory_rss_bytes();
    m->rss = objspace->memory.rss_measured;
    size_t accounted = m->heap_pages + m->heap_pooled + m->libc_in_use + m->libc_free;
    m->other = m->rss > accounted ? m->rss - accounted : 0;
}

static double
mib(size_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

static const char *
reason_name(unsigned int reason)
{
    if (reason & MOSAIC_REASON_MAJOR_FORCE) return "force";
    if (reason & MOSAIC_REASON_MAJOR_NOFREE) return "nofree";
    if (reason & MOSAIC_REASON_MAJOR_OLDGEN) return "oldgen";
    if (reason & MOSAIC_REASON_MAJOR_SHADY) return "shady";
    if (reason & MOSAIC_REASON_MAJOR_OLDMALLOC) return "oldmalloc";
    if (reason & MOSAIC_REASON_STRESS) return "stress";
    if (reason & MOSAIC_REASON_METHOD) return "method";
    if (reason & MOSAIC_REASON_CAPI) return "capi";
    if (reason & MOSAIC_REASON_MALLOC) return "malloc";
    return "newobj";
}

/* rss_overhead_bytes: RSS beyond the page and malloc bytes Mosaic counts (what the soft limit
 * adds to them, pace.c), and rss_measured. Read at each GC's end, after a major's sweep, at boot
 * and in a forked child (pace.c). Returns RSS. */
size_t
mosaic_memory_measure_overhead(mosaic_objspace_t *objspace)
{
    size_t rss = mosaic_memory_rss_bytes();
    size_t counted = mosaic_pace_counted_bytes(objspace);
    objspace->memory.rss_overhead_bytes = rss > counted ? rss - counted : 0;
    objspace->memory.rss_measured = rss;
    return rss;
}

/* End of a collection (VM lock held): the trace line, the peak snapshot, and the overhead for
 * the idle trim. */
void
mosaic_memory_after_gc(mosaic_objspace_t *objspace, unsigned int reason)
{
    const struct mosaic_params *params = &objspace->params;
    if (params->trace) {
        size_t pause_us = (size_t)((mosaic_now_ns() - objspace->gc_start_ns) / 1000);
        /* A major GC marked in steps ends at its final pause: how many steps it took. */
        char steps[80] = "";
        if (objspace->incremental.marked_in_steps) {
            snprintf(steps, sizeof(steps), ", %zu steps",
                     objspace->stats.incremental_steps - objspace->incremental.steps_at_start);
        }
        else if (objspace->mark.latest_ns) {
            /* Marked at once: the mark's share of the pause, and for a minor GC the objects it
             * traced from the remembered set (remembered, or old and wb-unprotected). */
            size_t mark_us = (size_t)(objspace->mark.latest_ns / 1000);
            int n = snprintf(steps, sizeof(steps), ", mark %zu.%03zu ms", mark_us / 1000, mark_us % 1000);
            if (!(reason & MOSAIC_REASON_FULL_MARK) && n > 0 && (size_t)n < sizeof(steps)) {
                snprintf(steps + n, sizeof(steps) - (size_t)n, ", %zuk rescanned",
                         objspace->stats.remembered_rescanned / 1000);
            }
        }
        fprintf(stderr,
                "[mosaic] gc %zu %s (%s%s): heap %.1f -> %.1f MiB live, %zuk old, %.1f MiB pages, target %.1f, pool %.1f, step %.1f | "
                "malloc %.1f MiB, limit %.1f, oldmalloc %.1f/%.1f | %zu.%03zu ms, gc %.0f%% of time, room x%.2f\n",
                objspace->stats.count, (reason & MOSAIC_REASON_FULL_MARK) ? "major" : "minor",
                reason_name(reason), steps, mib(objspace->heap_bytes_at_gc), mib(objspace->live_bytes),
                objspace->gen.old_objects / 1000,
                mib(objspace->pages.sorted_count * MOSAIC_PAGE_SIZE), mib(objspace->pace.heap_target_bytes),
                mib(objspace->pool.count * MOSAIC_PAGE_SIZE), mib(mosaic_pace_growth_step(objspace)),
                mib(objspace->malloc.bytes_at_gc),
                mib(objspace->malloc.limit), mib(objspace->pace.oldmalloc_held_bytes), mib(objspace->malloc.old_limit),
                pause_us / 1000, pause_us % 1000, objspace->pace.gc_time_share * 100, objspace->pace.room_scale);
    }
    size_t rss = mosaic_memory_measure_overhead(objspace);
    mosaic_idle_trim_after_gc(objspace, objspace->memory.rss_overhead_bytes);
    if (rss > objspace->memory.peak.rss + objspace->memory.peak.rss / 50) {
        mosaic_memory_breakdown(objspace, &objspace->memory.peak, MOSAIC_MEASURE_PACED);
    }
}

#ifdef __GLIBC__
/* What the overhead cannot see: memory a C extension malloc'd outside Ruby's accounting (a
 * database client's result) is in the overhead while in use and stays there once freed into
 * glibc's bins. glibc's own idle figure (mallinfo2: fordblks - keepcost) sees it; it is read
 * at a major within the walk budget. True when it grew by MOSAIC_TRIM_IDLE since the first
 * walk after the latest trim (a trim leaves its chunks counted as free, so the figure after a
 * trim is the new baseline: idle_at_trim is MOSAIC_SIZE_MAX until a walk sets it). */
static bool
libc_idle_grew(mosaic_objspace_t *objspace, size_t least)
{
    struct mallinfo2 mi = libc_measure(objspace, true);
    size_t idle = mi.fordblks > mi.keepcost ? mi.fordblks - mi.keepcost : 0;
    if (idle < objspace->memory.idle_at_trim) objspace->memory.idle_at_trim = idle;
    return idle >= MOSAIC_TRIM_IDLE && idle >= mosaic_add_sat(objspace->memory.idle_at_trim, least);
}

/* How much of what glibc holds idle the program is expected to take back before the next
 * major: the draw (malloc held above what a major found live, at its most at a GC's start in
 * the cycle that major ended) of the cycle just ended, or of the two before it when the larger
 * of those was less. A program that mallocs and frees about the same each cycle (a request's
 * buffers, a round of strings) draws as much as a major frees: trimming that returns pages it
 * faults in again at once (string-malloc-pressure: 31 trims, 190k page faults against 48k
 * without them, the same peak RSS). A transient that died once draws only in the cycle it
 * lived: its memory goes back at the major that freed it. Two cycles before, not one: a major
 * the pacer starts in the middle of a round ends a cycle that drew nothing (the round's
 * buffers all still live), and the next major would take that for a transient. */
static size_t
expected_refill(const mosaic_objspace_t *objspace)
{
    const size_t *draw = objspace->memory.draw_bytes;
    size_t before = draw[1] > draw[2] ? draw[1] : draw[2];
    return draw[0] < before ? draw[0] : before;
}

/* malloc_trim(0) when `always`, else by the rule below (mosaic_memory_after_sweep); the trim
 * counts in GC.stat :mosaic_malloc_trim_time. Called with the overhead just measured. */
static void
trim_malloc(mosaic_objspace_t *objspace, bool always)
{
    uint64_t t = objspace->measure_time ? mosaic_now_ns() : 0;
    /* What glibc holds free and resident shows in the overhead (RSS beyond pages and Ruby's
     * malloc): memory a sweep frees moves from the counted bytes into it. Trim when it grew by
     * MOSAIC_TRIM_IDLE plus twice the expected refill since the latest trim's result and the
     * trim is likely to pay: chunks Ruby freed since hold MOSAIC_TRIM_IDLE of whole pages
     * (malloc.c, count_freed_pages), or the latest trim returned that much; or when the walk
     * budget allows one (small chunks freed together merge into whole pages, which the count
     * does not see). Or, within the budget, when glibc's idle figure grew (libc_idle_grew). A
     * trim that returns little walks every free chunk for nothing: 20 ms with the 100k 1-3 KB
     * chunks of every other string of an array dropped, where every major that found 1 MiB
     * more overhead did it again. */
    size_t overhead = objspace->memory.rss_overhead_bytes;
    if (overhead < objspace->memory.overhead_at_trim) objspace->memory.overhead_at_trim = overhead;
    /* The idle memory must outgrow twice what the next cycle is expected to take back
     * (expected_refill): at least half of what the trim returns then stays returned. */
    size_t least = mosaic_add_sat(mosaic_scale(expected_refill(objspace), 2.0), MOSAIC_TRIM_IDLE);
    bool grew = overhead >= mosaic_add_sat(objspace->memory.overhead_at_trim, least);
    bool pages_freed = __atomic_load_n(&objspace->memory.libc_freed_page_bytes, __ATOMIC_RELAXED) >= MOSAIC_TRIM_IDLE;
    bool paid = objspace->memory.trim_returned_bytes >= MOSAIC_TRIM_IDLE;
    bool due = libc_walk_due(objspace);
    if (always || mosaic_pace_near_limit(objspace) || (grew && (pages_freed || paid || due)) ||
        (due && libc_idle_grew(objspace, least))) {
        uint64_t start = mosaic_now_ns();
        malloc_trim(0);
        /* The chunks it walked are not known: the estimate's, so that the budget counts a
         * 20 ms trim as a 20 ms walk. */
        libc_walk_done(objspace, start, libc_chunks_estimate(objspace), !always);
        __atomic_store_n(&objspace->memory.libc_freed_page_bytes, 0, __ATOMIC_RELAXED);
        mosaic_memory_measure_overhead(objspace);
        objspace->memory.trim_returned_bytes = overhead > objspace->memory.rss_overhead_bytes ? overhead - objspace->memory.rss_overhead_bytes : 0;
        objspace->memory.overhead_at_trim = objspace->memory.rss_overhead_bytes;
        objspace->memory.idle_at_trim = MOSAIC_SIZE_MAX;
        objspace->stats.malloc_trim_count++;
    }
    if (objspace->measure_time) objspace->stats.malloc_trim_time_ns += mosaic_now_ns() - t;
}
#endif

/* malloc_trim(0) now, whatever glibc holds: Process.warmup (api.c), which Ruby documents as
 * trimming malloc's free pages and the default GC's does; a parent about to fork then holds
 * no idle malloc memory for its children to inherit. (Whether it changes where a child's
 * first mallocs land was probed and not seen: docs/decisions/0003-page-metadata-for-copy-on-write.md.) */
void
mosaic_memory_trim_now(mosaic_objspace_t *objspace)
{
#ifdef __GLIBC__
    mosaic_memory_measure_overhead(objspace);
    trim_malloc(objspace, true);
#else
    (void)objspace;
#endif
}

/* The sweep of a cycle has ended: every dead object of it is freed. The overhead is measured
 * (RSS read). After a major, malloc's free memory may go back to the OS (trim_malloc: when
 * the overhead grew by MOSAIC_TRIM_IDLE since the latest trim, whatever freed it -- this
 * cycle's sweep, or st_table and array buffers outgrown by realloc since -- and the trim is
 * likely to pay): glibc gives back only the free top of the main arena by itself; only
 * malloc_trim returns the whole pages among the chunks below it. The trim walks the free
 * lists; its time counts as sweep time (GC.stat :mosaic_malloc_trim_time), VM lock held.
 * Then the pacer is told what the survivors hold (pace.c: old malloc; after a major, live
 * malloc and the soft limit's check). */
void
mosaic_memory_after_sweep(mosaic_objspace_t *objspace)
{
    /* The rest of RSS, now that this cycle's frees are done: after a major (the trim rule and
     * the live figure below read it), or under the soft limit (which adds it to what it
     * bounds). It is also measured at each GC's end; after a trim, again. A minor's sweep
     * without a limit has no reader: one /proc read (6 us) fewer per GC, and small heaps
     * run thousands of GCs (arrays: 17818). */
    if (objspace->full_mark || objspace->params.memory_limit) mosaic_memory_measure_overhead(objspace);
    if (!objspace->full_mark) return;
#ifdef __GLIBC__
    /* The draw of the cycle this major ends (expected_refill). */
    size_t survivors = mosaic_pm_survivors(objspace->malloc.bytes_at_gc, objspace->malloc.freed_by_sweep);
    size_t *draw = objspace->memory.draw_bytes;
    draw[2] = draw[1];
    draw[1] = draw[0];
    draw[0] = objspace->malloc.high_at_gc > survivors ? objspace->malloc.high_at_gc - survivors : 0;
    objspace->malloc.high_at_gc = 0;
    trim_malloc(objspace, false);
    /* What the rule left, now that the sweep's frees show (the idle trim judged at the GC's end). */
    mosaic_idle_trim_after_sweep(objspace, objspace->memory.rss_overhead_bytes);
#endif
}

/* MOSAIC_MEMORY_REPORT=1: the breakdown now and at the peak, on stderr. */
void
mosaic_memory_report(mosaic_objspace_t *objspace, const char *when)
{
    struct mosaic_memory now;
    mosaic_memory_breakdown(objspace, &now, MOSAIC_MEASURE_NOW);
    const struct mosaic_memory *peak = &objspace->memory.peak;
    fprintf(stderr, "[mosaic] memory (MiB)     %10s %10s\n", when, "at peak");
#define MOSAIC_MEMORY_LINE(name) \
    fprintf(stderr, "[mosaic]   %-18s %10.1f %10.1f\n", #name, mib(now.name), mib(peak->name));
    MOSAIC_MEMORY_FIELDS(MOSAIC_MEMORY_LINE)
#undef MOSAIC_MEMORY_LINE
    fprintf(stderr, "[mosaic]   GCs %zu (%zu major), malloc_trim %zu times, %.1f ms\n",
            objspace->stats.count, objspace->stats.major_gc_count, objspace->stats.malloc_trim_count,
            (double)objspace->stats.malloc_trim_time_ns / 1e6);
}
