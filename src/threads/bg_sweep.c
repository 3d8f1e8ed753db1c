/*
 * bg_sweep.c: the background sweeper.
 *
 * Owns: one thread that sweeps pages while the mutator runs, from the end of a collection
 * until every page of the cycle is swept or the mutator needs the heap to itself; the list of
 * pages it may take; who owns which page.
 *
 * What it does (docs/DESIGN.md, "Background sweeping"): after a collection that leaves a lazy sweep, the
 * thread walks the cycle's pages in the lazy sweep's order and sweeps each one it takes in
 * background mode (sweep.c): it frees only the objects whose freeing touches nothing but the
 * object and its malloc'd buffers (background_safe_p in sweep.c), and leaves the others, marked in the
 * page's leftover bits, for the mutator. The mutator's lazy sweep then finds most pages done,
 * and only queues them (and frees their leftovers). A cycle of fewer than
 * MOSAIC_BACKGROUND_SWEEP_MIN_PAGES listed pages is left to the mutator: the thread does not start.
 *
 * Invariants:
 *  - Each page of the cycle is swept by exactly one thread. Its slot in `pages` is taken by an
 *    atomic exchange with NULL, by the thread (to sweep it) or by the mutator (to sweep it
 *    itself); whoever gets the pointer owns the page. A mutator that gets NULL waits for the
 *    page's bg_done flag (set with release by the thread once the page is consistent) and then
 *    only reads what the thread wrote.
 *  - Pages with zombies at the start of the cycle are never listed (finalize.c pushes slots
 *    onto their freelists from the mutator); no page the thread may take gains one (zombies
 *    are made only by sweeping, and the thread frees no object that becomes one).
 *  - The thread never touches heap->pages, the free-page queues, the pool or any count the
 *    mutator keeps: the page's own freelist, free_slots, bg_freed and bitmaps only (bitmap
 *    words the write barrier may set are changed atomically, sweep.c).
 *  - It runs only between collections: mosaic_bg_sweep_stop waits for it to be idle, and
 *    whatever needs every page swept, or the heap unchanging, calls that first (the rest of a
 *    sweep, heap walks, event hooks, exit). A fork stops it (pthread_atfork, so a fork from C
 *    too): the child has no such thread, and starts a new one at its second collection (its
 *    first sweeps on the mutator: mosaic_gc_threads_allowed).
 *  - The page list is rebuilt only while the thread is idle (mosaic_sweep_prepare, inside a
 *    collection).
 */
#define _GNU_SOURCE 1 /* pthread_setname_np */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "core/mosaic.h"

/* Whether the thread hands its frees of large blocks to the mutator (free_handoff.c). A
 * benchmark variant may build without: -DMOSAIC_FREE_HANDOFF_DEFAULT=0. */
#ifndef MOSAIC_FREE_HANDOFF_DEFAULT
# define MOSAIC_FREE_HANDOFF_DEFAULT 1
#endif

struct mosaic_bg_sweep {
    pthread_mutex_t lock;
    pthread_cond_t cond;             /* the thread waits for a cycle; the mutator for it to stop */
    pthread_t thread;
    bool started;                    /* the thread exists (in this process) */
    bool quit;
    bool running;                    /* the thread works on the current cycle */
    bool forking;                    /* between the fork handlers: no start */
    bool hooked;                     /* a FREEOBJ event hook is set: no start (frees must be reported) */
    int stop;                        /* asked to stop: read by the thread without the lock */
    unsigned long cycle;             /* incremented by every start */
    mosaic_objspace_t *objspace;
    struct mosaic_page **pages;      /* the cycle's pages; a slot is NULL once taken */
    size_t count, capa;
    uint64_t cpu_ns;                 /* the thread's CPU time, all cycles */
    size_t swept_pages;              /* pages it swept, all cycles */
};

/* The one background sweeper of the process (fork handlers reach it through this). */
static struct mosaic_bg_sweep *the_sweeper;

static void *
sweeper_main(void *arg)
{
    struct mosaic_bg_sweep *bg = arg;
    unsigned long seen = 0;
    mosaic_gc_thread_begin("mosaic-sweep");
#if MOSAIC_FREE_HANDOFF_DEFAULT
    mosaic_free_handoff_thread_begin();
#endif

    pthread_mutex_lock(&bg->lock);
    for (;;) {
        while (!bg->quit && bg->cycle == seen) pthread_cond_wait(&bg->cond, &bg->lock);
        if (bg->quit) break;
        seen = bg->cycle;
        pthread_mutex_unlock(&bg->lock);

        uint64_t cpu_start = mosaic_thread_cpu_ns();
        size_t swept = 0;
        for (size_t i = 0; i < bg->count; i++) {
            if (__atomic_load_n(&bg->stop, __ATOMIC_RELAXED)) break;
            mosaic_race_point();   /* the page claim: the mutator may take this page first */
            struct mosaic_page *page = __atomic_exchange_n(&bg->pages[i], NULL, __ATOMIC_ACQ_REL);
            if (!page) continue;
            mosaic_sweep_page_background(bg->objspace, page);
            mosaic_free_handoff_publish(bg->objspace);
            mosaic_race_point();   /* a mutator that claimed it spins on bg_done meanwhile */
            __atomic_store_n(&page->cycle->bg_done, true, __ATOMIC_RELEASE);
            swept++;
        }
        uint64_t cpu = mosaic_thread_cpu_ns() - cpu_start;

        pthread_mutex_lock(&bg->lock);
        /* GC.measure_total_time = false stops the time keys, this thread's share included.
         * Atomic: the mutator sets the flag without this lock (api.c). */
        if (__atomic_load_n(&bg->objspace->measure_time, __ATOMIC_RELAXED)) bg->cpu_ns += cpu;
        bg->swept_pages += swept;
        bg->running = false;
        pthread_cond_broadcast(&bg->cond);
    }
    pthread_mutex_unlock(&bg->lock);
    return NULL;
}

/* Before any fork (Ruby's, or C's fork()): the thread stops, and no collection starts it
 * until the fork is done (a thread without the GVL may fork while a Ruby thread collects). */
static void
fork_prepare(void)
{
    struct mosaic_bg_sweep *bg = the_sweeper;
    if (!bg) return;
    /* The flag first: a start between the stop and the flag would leave it running. */
    pthread_mutex_lock(&bg->lock);
    bg->forking = true;
    pthread_mutex_unlock(&bg->lock);
    mosaic_bg_sweep_stop(bg->objspace);
}

/* The parent goes on; its thread is idle (rb_gc_impl_after_fork restarts it). */
static void
fork_parent(void)
{
    struct mosaic_bg_sweep *bg = the_sweeper;
    if (!bg) return;
    pthread_mutex_lock(&bg->lock);
    bg->forking = false;
    pthread_mutex_unlock(&bg->lock);
}

/* The child has no sweeper thread: its record starts over (the parent's thread is idle, so
 * the lock is free, but it is initialized again rather than trusted). */
static void
fork_child(void)
{
    struct mosaic_bg_sweep *bg = the_sweeper;
    if (!bg) return;
    pthread_mutex_init(&bg->lock, NULL);
    pthread_cond_init(&bg->cond, NULL);
    bg->started = false;
    bg->running = false;
    bg->quit = false;
    bg->forking = false;
}

/* Called once, at boot. */
void
mosaic_bg_sweep_init(mosaic_objspace_t *objspace)
{
    if (!objspace->params.background_sweep || the_sweeper) return;
    struct mosaic_bg_sweep *bg = calloc(1, sizeof(*bg));
    if (!bg) {
        objspace->params.background_sweep = false;
        return;
    }
    pthread_mutex_init(&bg->lock, NULL);
    pthread_cond_init(&bg->cond, NULL);
    bg->objspace = objspace;
    objspace->threads.bg_sweep = bg;
    the_sweeper = bg;
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* Lists `page` for the thread, unless it has zombies (or the list cannot grow: then the
 * mutator sweeps it). */
static void
list_page(struct mosaic_bg_sweep *bg, struct mosaic_page *page)
{
    page->cycle->bg_slot = MOSAIC_BG_UNLISTED;
    page->cycle->bg_done = false;
    if (page->final_slots > 0) return;
    if (bg->count == bg->capa) {
        size_t capa = bg->capa ? bg->capa * 2 : 1024;
        struct mosaic_page **pages = realloc(bg->pages, capa * sizeof(*pages));
        if (!pages) return;
        bg->pages = pages;
        bg->capa = capa;
    }
    page->cycle->bg_slot = (uint32_t)bg->count;
    bg->pages[bg->count++] = page;
}

/* The cycle's page list (mosaic_sweep_prepare, inside the GC, thread idle). Each class's pages
 * in its lazy sweep's order, the classes interleaved by how far into each the page is: the
 * thread stays ahead of the mutator in every class at once, not in the first class only. */
void
mosaic_bg_sweep_list(mosaic_objspace_t *objspace)
{
    struct mosaic_bg_sweep *bg = objspace->threads.bg_sweep;
    size_t next[MOSAIC_HEAP_MAX] = { 0 };
    if (!bg) {
        for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
            struct mosaic_heap *heap = &objspace->heaps[i];
            for (size_t j = 0; j < heap->page_count; j++) heap->pages[j]->cycle->bg_slot = MOSAIC_BG_UNLISTED;
        }
        return;
    }
    bg->count = 0;
    for (;;) {
        /* The class whose next page is the least far into it (next / page_count smallest). */
        int best = -1;
        for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
            const struct mosaic_heap *heap = &objspace->heaps[i];
            if (next[i] >= heap->page_count) continue;
            if (best < 0 || next[i] * objspace->heaps[best].page_count < next[best] * heap->page_count) best = i;
        }
        if (best < 0) break;
        list_page(bg, objspace->heaps[best].pages[next[best]++]);
    }
}

/* The thread starts on the cycle's pages (end of a collection that left a lazy sweep). */
void
mosaic_bg_sweep_start(mosaic_objspace_t *objspace)
{
    struct mosaic_bg_sweep *bg = objspace->threads.bg_sweep;
    if (!bg || bg->count == 0 || !objspace->params.background_sweep) return;
    /* A small sweep stays on the Ruby thread: waking the thread and handing the pages between
     * two cores' caches costs more CPU than the sweep it takes off the mutator (decision 0008). */
    if (bg->count < objspace->params.background_sweep_min_pages) return;
    if (!bg->started && !mosaic_gc_threads_allowed(objspace)) return;  /* a forked child's first GC */
    pthread_mutex_lock(&bg->lock);
    /* An event hook on freed objects wants every free reported on a Ruby thread. */
    if (bg->hooked || bg->forking || bg->running) {
        pthread_mutex_unlock(&bg->lock);
        return;
    }
    if (!bg->started) {
        bg->started = mosaic_gc_thread_create(&bg->thread, sweeper_main, bg);
        if (!bg->started) {
            pthread_mutex_unlock(&bg->lock);
            return;
        }
    }
    bg->stop = 0;
    bg->running = true;
    bg->cycle++;
    objspace->stats.background_sweeps++;
    pthread_cond_broadcast(&bg->cond);
    pthread_mutex_unlock(&bg->lock);
    mosaic_race_point();   /* the mutator goes on while the thread starts, or before it does */
}

/* Waits until the thread is idle (the pages it did not take stay listed: the mutator takes
 * them). Any thread, any time. */
void
mosaic_bg_sweep_stop(mosaic_objspace_t *objspace)
{
    struct mosaic_bg_sweep *bg = objspace->threads.bg_sweep;
    if (!bg) return;
    mosaic_race_point();   /* the stop: the thread may be between pages, in one, or done */
    pthread_mutex_lock(&bg->lock);
    if (bg->running) {
        __atomic_store_n(&bg->stop, 1, __ATOMIC_RELAXED);
        while (bg->running) pthread_cond_wait(&bg->cond, &bg->lock);
    }
    pthread_mutex_unlock(&bg->lock);
}

/* The thread goes on with the cycle's pages it has not taken (after a heap walk, a fork, an
 * event hook change), if a lazy sweep is still pending. */
void
mosaic_bg_sweep_resume(mosaic_objspace_t *objspace)
{
    if (objspace->lazy_sweeping && objspace->heap_walk_depth == 0 && !objspace->during_gc) {
        mosaic_bg_sweep_start(objspace);
    }
}

/* The event hooks change (rb_gc_impl_set_event_hook, before hook_events is set): while one
 * on freed objects is set, the thread stays stopped and the mutator sweeps (and reports). */
void
mosaic_bg_sweep_hooks_changed(mosaic_objspace_t *objspace, rb_event_flag_t events)
{
    struct mosaic_bg_sweep *bg = objspace->threads.bg_sweep;
    if (!bg) return;
    bool hooked = (events & RUBY_INTERNAL_EVENT_FREEOBJ) != 0;
    if (hooked) mosaic_bg_sweep_stop(objspace);
    pthread_mutex_lock(&bg->lock);
    bg->hooked = hooked;
    pthread_mutex_unlock(&bg->lock);
}

/* The thread's totals for GC.stat: CPU time and pages swept, all cycles. */
void
mosaic_bg_sweep_totals(mosaic_objspace_t *objspace, uint64_t *cpu_ns, size_t *pages)
{
    struct mosaic_bg_sweep *bg = objspace->threads.bg_sweep;
    *cpu_ns = 0;
    *pages = 0;
    if (!bg) return;
    pthread_mutex_lock(&bg->lock);
    *cpu_ns = bg->cpu_ns;
    *pages = bg->swept_pages;
    pthread_mutex_unlock(&bg->lock);
}

/* Waits until the thread has been through every listed page (the checking build, before it
 * verifies the heap: the check then covers what the thread swept, not only the mutator). */
void
mosaic_bg_sweep_wait(mosaic_objspace_t *objspace)
{
    struct mosaic_bg_sweep *bg = objspace->threads.bg_sweep;
    if (!bg) return;
    pthread_mutex_lock(&bg->lock);
    while (bg->running) pthread_cond_wait(&bg->cond, &bg->lock);
    pthread_mutex_unlock(&bg->lock);
}

/* The mutator is about to sweep `page` (before_sweep). True: it owns the page and sweeps it.
 * False: the thread swept it (waited for, if it was still at it); the page's freelist,
 * free_slots, bg_freed and leftover bits are the thread's result. */
bool
mosaic_bg_sweep_claim(mosaic_objspace_t *objspace, struct mosaic_page *page)
{
    struct mosaic_bg_sweep *bg = objspace->threads.bg_sweep;
    if (!bg || page->cycle->bg_slot == MOSAIC_BG_UNLISTED) return true;
    mosaic_race_point();   /* the page claim: the thread may take this page first */
    if (__atomic_exchange_n(&bg->pages[page->cycle->bg_slot], NULL, __ATOMIC_ACQ_REL)) return true;
    /* The thread has it: one page's work, so wait without sleeping. */
    unsigned int spins = 0;
    while (!__atomic_load_n(&page->cycle->bg_done, __ATOMIC_ACQUIRE)) {
        if (++spins % 64 == 0) sched_yield();
    }
    return false;
}

/* Ends the thread (exit, objspace free). */
void
mosaic_bg_sweep_free(mosaic_objspace_t *objspace)
{
    struct mosaic_bg_sweep *bg = objspace->threads.bg_sweep;
    if (!bg) return;
    mosaic_bg_sweep_stop(objspace);
    pthread_mutex_lock(&bg->lock);
    bool started = bg->started;
    bg->quit = true;
    pthread_cond_broadcast(&bg->cond);
    pthread_mutex_unlock(&bg->lock);
    if (started) pthread_join(bg->thread, NULL);
    /* The fork handlers stay registered (they cannot be removed): they find no sweeper. */
    the_sweeper = NULL;
    objspace->threads.bg_sweep = NULL;
    free(bg->pages);
    free(bg);
}
