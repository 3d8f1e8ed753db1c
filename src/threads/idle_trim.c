/*
 * idle_trim.c: the idle trim: malloc_trim(0) once the program has gone quiet.
 *
 * Owns: one thread, started at the first GC that finds memory idle in glibc's bins, that
 * returns that memory to the OS once no GC has run for the quiet time; the figures of what it
 * returned (GC.stat :mosaic_idle_trim_*).
 *
 * Why: the trim after a major GC (policy/memory.c, trim_malloc) leaves glibc's idle memory in
 * place while the program is expected to take it back within its next cycle (expected_refill:
 * trimming memory the next cycle faults in again costs page faults and saves nothing). A program
 * that then stops collecting -- a build-up that ended, a server between bursts of requests --
 * holds that memory for as long as it runs, since only a GC looks at it again. Go's scavenger
 * returns such memory in the background; this is the same idea for glibc's bins, in its simplest
 * form: no GC for the quiet time, then one trim.
 *
 * The quiet time: the longest of MOSAIC_IDLE_TRIM_MS (1000), four times the recent interval
 * between GC ends (a moving average of the intervals shorter than the quiet time: a quiet spell
 * is idleness, not the program's pace), and 100 times what the thread's latest trim took. A
 * program that collects steadily never looks quiet, so what its next cycle takes back stays; and
 * the trims take at most about 1% of a core (a trim walks every free chunk in glibc's bins: 20 ms
 * with 100k of them). While the trim walks an arena it holds that arena's lock: a malloc of the
 * Ruby thread in the same arena waits for it, once per quiet spell.
 *
 * What "idle" means here: the RSS beyond what Mosaic counts (rss_overhead_bytes, measured at
 * each GC's end and after a major's sweep) has grown by MOSAIC_IDLE_TRIM_MIN since the latest
 * trim, the after-major rule's or this thread's (or since the first GC, before any): what Ruby
 * freed into glibc's bins shows there, since freeing moves bytes out of the counted malloc
 * figure while they stay resident.
 *
 * Invariants:
 *  - The thread reads nothing of the objspace: the Ruby thread hands it, at each GC's end, when
 *    that GC ended, the quiet time, whether memory was idle and the overhead (relaxed atomics),
 *    and it hands back its figures under `lock`. The fields marked "Ruby thread" are that
 *    thread's only, read and written with the VM lock held (inside a GC).
 *  - One trim per quiet spell: after a trim, or a quiet spell whose GC left nothing idle, the
 *    thread waits until a GC arms it again. (A GC during a trim may arm it against the old
 *    baseline: at most one more trim, after another quiet time.)
 *  - A fork stops nothing (the thread holds no lock of ours while it trims, and glibc's fork
 *    takes its arenas' locks, so a trim in progress finishes first); the child has no thread, and
 *    its record starts over (pthread_atfork, registered at boot); a GC of the child's starts one
 *    again, not its first (mosaic_gc_threads_allowed).
 *  - The quiet spell is measured between GC ends: the steps of a major marking incrementally
 *    are not GC ends, so a long incremental major may look quiet (a trim then is harmless).
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#ifdef __GLIBC__
# include <malloc.h>
#endif

#include "core/mosaic.h"

/* The overhead growth that counts as idle memory: the after-major rule's own threshold. */
#define MOSAIC_IDLE_TRIM_MIN ((size_t)1 << 20)

struct mosaic_idle_trim {
    pthread_mutex_t lock;
    pthread_cond_t cond;             /* CLOCK_MONOTONIC: the thread waits to be armed, or for the quiet time */
    pthread_t thread;
    bool initialized;                /* mosaic_idle_trim_init ran (MOSAIC_IDLE_TRIM_MS is not 0) */
    bool started;                    /* the thread exists (in this process) */
    bool quit;
    bool armed;                      /* a GC left memory idle: the thread waits for the quiet time */
    /* Handed to the thread, relaxed atomics: */
    uint64_t latest_gc_ns;           /* when the latest GC ended (monotonic) */
    uint64_t quiet_ns;               /* the quiet time as of then */
    bool idle;                       /* the latest measure found memory idle */
    size_t overhead_at_gc;           /* the overhead it measured */
    /* The thread's figures, under lock: */
    size_t trims;                    /* trims done */
    size_t returned_bytes;           /* RSS they gave back, all trims */
    uint64_t time_ns;                /* wall time they took, all trims */
    uint64_t latest_trim_ns;         /* the latest trim's time (the quiet time's third bound) */
    size_t overhead_after_trim;      /* the overhead its GC measured, less what the latest trim returned */
    /* Ruby thread: */
    uint64_t interval_ns;            /* moving average of the intervals between GC ends */
    size_t baseline;                 /* the overhead after the latest trim (or at the first GC) */
    bool baseline_set;
    size_t rule_trims_seen;          /* the after-major rule's trims, as of the baseline */
    size_t trims_seen;               /* this thread's trims, as of the baseline */
};

/* The process's one record (the fork handlers reach it through this). */
static struct mosaic_idle_trim the_idle_trim = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
};

/* The condition variable waits on the monotonic clock, mosaic_now_ns's. */
static void
init_cond(struct mosaic_idle_trim *t)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cond, &attr);
    pthread_condattr_destroy(&attr);
}

#ifdef __GLIBC__
static void *
idle_trim_main(void *arg)
{
    struct mosaic_idle_trim *t = arg;
    mosaic_gc_thread_begin("mosaic-trim");
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (!t->quit && !t->armed) pthread_cond_wait(&t->cond, &t->lock);
        if (t->quit) break;
        /* Wait until the quiet time has passed since the latest GC; a GC meanwhile moves the
         * deadline (re-read at every wake-up). */
        for (;;) {
            uint64_t deadline = mosaic_add_sat(__atomic_load_n(&t->latest_gc_ns, __ATOMIC_RELAXED),
                                               __atomic_load_n(&t->quiet_ns, __ATOMIC_RELAXED));
            if (t->quit || mosaic_now_ns() >= deadline) break;
            struct timespec until = { .tv_sec = (time_t)(deadline / 1000000000u), .tv_nsec = (long)(deadline % 1000000000u) };
            pthread_cond_timedwait(&t->cond, &t->lock, &until);
        }
        if (t->quit) break;
        t->armed = false;
        if (!__atomic_load_n(&t->idle, __ATOMIC_RELAXED)) continue;
        pthread_mutex_unlock(&t->lock);

        size_t before = mosaic_memory_rss_bytes();
        uint64_t start = mosaic_now_ns();
        malloc_trim(0);
        uint64_t took = mosaic_now_ns() - start;
        size_t after = mosaic_memory_rss_bytes();
        size_t returned = before > after ? before - after : 0;
        /* No GC ran since the overhead was measured, so the overhead now is about that less
         * what went back: the baseline from here (the Ruby thread takes it at its next GC). */
        size_t overhead = __atomic_load_n(&t->overhead_at_gc, __ATOMIC_RELAXED);

        pthread_mutex_lock(&t->lock);
        t->trims++;
        t->returned_bytes += returned;
        t->overhead_after_trim = overhead > returned ? overhead - returned : 0;
        t->time_ns += took;
        t->latest_trim_ns = took;
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}
#endif

/* Before any fork: the lock is held across it, so that the child's copy of the record is
 * consistent (no thread of ours is in the middle of updating it). */
static void
fork_prepare(void)
{
    pthread_mutex_lock(&the_idle_trim.lock);
}

static void
fork_parent(void)
{
    pthread_mutex_unlock(&the_idle_trim.lock);
}

/* The child has no thread: its record starts over (the forking thread holds the lock in the
 * child too: released, not initialized again), its figures and the Ruby thread's state kept
 * (they describe this process's memory as well). No thread waits on the condition variable. */
static void
fork_child(void)
{
    struct mosaic_idle_trim *t = &the_idle_trim;
    t->started = false;
    t->armed = false;
    t->quit = false;
    init_cond(t);
    pthread_mutex_unlock(&t->lock);
}

/* Called once, at boot (rb_gc_impl_set_params): the fork handlers are registered then, outside
 * any collection, as the background sweeper's are. */
void
mosaic_idle_trim_init(mosaic_objspace_t *objspace)
{
#ifdef __GLIBC__
    struct mosaic_idle_trim *t = &the_idle_trim;
    if (!objspace->params.idle_trim_ms || t->initialized) return;
    init_cond(t);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    t->initialized = true;
#else
    (void)objspace;
#endif
}

#ifdef __GLIBC__
/* Judges whether memory is idle from the overhead just measured, and arms the thread (starting
 * it the first time) if it is. The baseline: the overhead right after the latest trim, the
 * rule's (memory.c measures it) or this thread's (its estimate); before any, the first measure's;
 * never above what a GC measured since. */
static void
judge_and_arm(mosaic_objspace_t *objspace, struct mosaic_idle_trim *t, size_t overhead)
{
    pthread_mutex_lock(&t->lock);
    size_t trims = t->trims, overhead_after_trim = t->overhead_after_trim;
    pthread_mutex_unlock(&t->lock);
    if (objspace->stats.malloc_trim_count != t->rule_trims_seen) t->baseline = objspace->memory.overhead_at_trim;
    else if (trims != t->trims_seen) t->baseline = overhead_after_trim;
    else if (!t->baseline_set) t->baseline = overhead;
    if (overhead < t->baseline) t->baseline = overhead;
    t->baseline_set = true;
    t->rule_trims_seen = objspace->stats.malloc_trim_count;
    t->trims_seen = trims;
    bool idle = overhead >= mosaic_add_sat(t->baseline, MOSAIC_IDLE_TRIM_MIN);
    __atomic_store_n(&t->idle, idle, __ATOMIC_RELAXED);
    __atomic_store_n(&t->overhead_at_gc, overhead, __ATOMIC_RELAXED);
    if (!idle) return;

    pthread_mutex_lock(&t->lock);
    if (!t->armed && !t->quit) {
        if (!t->started && mosaic_gc_threads_allowed(objspace)) {
            t->started = mosaic_gc_thread_create(&t->thread, idle_trim_main, t);
        }
        if (t->started) {
            t->armed = true;
            pthread_cond_signal(&t->cond);
        }
    }
    pthread_mutex_unlock(&t->lock);
}
#endif

/* A GC has ended (VM lock held), with the overhead just measured: the thread is told when, and
 * the quiet time; then judge_and_arm. The interval since the GC before enters the average only
 * when it was shorter than the quiet time: a quiet spell is the program's idleness, not its
 * pace, and counted it would stretch the next quiet time to its own length (a server idle for
 * an hour between bursts would then wait most of an hour for its next trim). */
void
mosaic_idle_trim_after_gc(mosaic_objspace_t *objspace, size_t overhead)
{
#ifdef __GLIBC__
    struct mosaic_idle_trim *t = &the_idle_trim;
    if (!t->initialized) return;

    uint64_t now = mosaic_now_ns();
    uint64_t previous = __atomic_load_n(&t->latest_gc_ns, __ATOMIC_RELAXED);
    uint64_t quiet_before = __atomic_load_n(&t->quiet_ns, __ATOMIC_RELAXED);
    if (previous && now > previous && now - previous < quiet_before) {
        uint64_t interval = now - previous;
        t->interval_ns = t->interval_ns ? (3 * t->interval_ns + interval) / 4 : interval;
    }

    pthread_mutex_lock(&t->lock);
    uint64_t latest_trim_ns = t->latest_trim_ns;
    pthread_mutex_unlock(&t->lock);
    size_t ms = objspace->params.idle_trim_ms;
    uint64_t quiet = ms > UINT64_MAX / 1000000u ? UINT64_MAX : (uint64_t)ms * 1000000u;
    if (t->interval_ns < UINT64_MAX / 4 && quiet < 4 * t->interval_ns) quiet = 4 * t->interval_ns;
    if (latest_trim_ns < UINT64_MAX / 100 && quiet < 100 * latest_trim_ns) quiet = 100 * latest_trim_ns;
    __atomic_store_n(&t->quiet_ns, quiet, __ATOMIC_RELAXED);
    __atomic_store_n(&t->latest_gc_ns, now, __ATOMIC_RELAXED);
    judge_and_arm(objspace, t, overhead);
#else
    (void)objspace;
    (void)overhead;
#endif
}

/* A major GC's sweep has ended (memory.c, after the after-major rule), with the overhead just
 * measured: what a lazy sweep freed shows now, not at its GC's end. The quiet time still counts
 * from that GC's end. */
void
mosaic_idle_trim_after_sweep(mosaic_objspace_t *objspace, size_t overhead)
{
#ifdef __GLIBC__
    struct mosaic_idle_trim *t = &the_idle_trim;
    if (!t->initialized || !__atomic_load_n(&t->latest_gc_ns, __ATOMIC_RELAXED)) return;
    judge_and_arm(objspace, t, overhead);
#else
    (void)objspace;
    (void)overhead;
#endif
}

/* GC.stat's figures: trims done, RSS they returned, and the wall time they took. */
void
mosaic_idle_trim_totals(size_t *trims, size_t *returned_bytes, uint64_t *time_ns)
{
    struct mosaic_idle_trim *t = &the_idle_trim;
    pthread_mutex_lock(&t->lock);
    *trims = t->trims;
    *returned_bytes = t->returned_bytes;
    *time_ns = t->time_ns;
    pthread_mutex_unlock(&t->lock);
}

/* Ends the thread (exit, objspace free). */
void
mosaic_idle_trim_free(void)
{
    struct mosaic_idle_trim *t = &the_idle_trim;
    pthread_mutex_lock(&t->lock);
    bool started = t->started;
    t->quit = true;
    if (started) pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    if (started) pthread_join(t->thread, NULL);
    pthread_mutex_lock(&t->lock);
    t->started = false;
    pthread_mutex_unlock(&t->lock);
}
