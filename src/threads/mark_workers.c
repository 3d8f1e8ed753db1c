/*
 * mark_workers.c: parallel marking threads and the work they share.
 *
 * Owns: the GC threads (MOSAIC_GC_THREADS - 1 of them; the collecting thread is the other
 * marker), the pool of mark-stack chunks markers hand to each other, and the end of a
 * parallel mark (every marker idle, no chunk left).
 *
 * A parallel mark phase (docs/DESIGN.md, "Parallel marking"):
 *  1. The collecting thread begins it (mosaic_mark_workers_begin): the threads wake, each with
 *     its own marker (mark.c) and the VM context of the collecting thread, and wait for work.
 *  2. The collecting thread marks the roots as in a serial mark. Whenever a marker waits, any
 *     marker with work hands it half of its mark stack (mosaic_mark_workers_offer, called
 *     every 64 stack operations while a marker waits: an atomic load otherwise).
 *  3. After the roots, the collecting thread drains its stack and joins the waiting
 *     (mosaic_mark_workers_finish). When every marker, it included, waits and the pool is
 *     empty, nothing is left to mark: no marker holds work, and only a marker with work can
 *     create more. The threads' counts and weak slots are merged after all have stopped.
 *
 * An incremental step shared with the threads (mosaic_mark_workers_step) is the same with a
 * budget per marker: a GC thread that used its part up hands its whole stack to the pool and
 * stops (the collecting thread keeps its own); the step ends when every marker used its part
 * or waits with nothing to take, and the collecting thread puts the pool back on its stack, so
 * between steps the grey set is that one stack (and the re-greyed objects, which the
 * collecting thread traces alone before a step starts the threads: no object is traced by two
 * markers at once, mark.c).
 *
 * Invariants:
 *  - The GC threads only run during a mark phase, with the world stopped, and only call
 *    rb_gc_mark_children (through their marker) and the allocator (xfree from mark functions).
 *  - They block every signal but the synchronous faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
 *    SIGABRT), so a signal meant for Ruby never lands on them and a crash still reports.
 *  - They are stopped (joined) before fork and started again at the next parallel mark (in a
 *    forked child, not in its first collection: mosaic_gc_threads_after_fork): a
 *    forked child has only the thread that forked, and Process.daemon's child has no extra
 *    thread (TestProcess#test_daemon_no_threads). A child forked behind Ruby's back (fork(2)
 *    from C) notices by its pid and abandons the parent's record instead of waiting for
 *    threads it does not have.
 *  - idle counts markers that wait in take_work, exhausted those of a step that used their
 *    budget up (0 in a whole mark); the phase is over exactly when idle + exhausted ==
 *    threads + 1 with the pool empty (or, in a step, with no one idle to take it); after that
 *    no marker marks again.
 */
#define _GNU_SOURCE 1 /* pthread_setname_np */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/mosaic.h"

struct mosaic_mark_worker {
    struct mosaic_mark_workers *workers;
    mosaic_objspace_t *objspace;
    struct mosaic_marker marker;
    struct mosaic_ptr_vec weak_refs;
    struct mosaic_weak_index weak_index;
    struct rb_gc_vm_context vm_context;
    pthread_t thread;
    uint64_t cpu_ns;                 /* thread CPU time spent marking in the current phase */
};

struct mosaic_mark_workers {
    pthread_mutex_t lock;
    pthread_cond_t work_cond;        /* threads wait here for a phase, or for work */
    pthread_cond_t done_cond;        /* the collecting thread waits here for the threads to stop */
    unsigned int count;              /* threads running */
    struct mosaic_mark_worker *workers;
    struct mosaic_mark_chunk *pool;  /* chunks of work handed over, linked through prev */
    unsigned long phase;             /* incremented by every parallel mark */
    unsigned int idle;               /* markers waiting in take_work */
    size_t step_budget;              /* an incremental step: slots each marker marks (0: a whole mark) */
    unsigned int exhausted;          /* markers of the step that used their budget up */
    int hungry;                      /* idle > 0 during a phase: read without the lock */
    unsigned int finished;           /* threads done with the current phase */
    bool done;                       /* the current phase has nothing left to mark */
    bool quit;
    size_t offers;                   /* chunks handed over in the current phase */
    pid_t pid;                       /* the process that started the threads */
};

/* Waits until a chunk of work is in the pool (returns it) or every marker waits with the pool
 * empty (returns NULL: the phase's marking is complete). */
static struct mosaic_mark_chunk *
take_work(struct mosaic_mark_workers *w)
{
    mosaic_race_point();   /* another marker may offer, finish, or take the pool first */
    pthread_mutex_lock(&w->lock);
    w->idle++;
    __atomic_store_n(&w->hungry, 1, __ATOMIC_RELAXED);
    struct mosaic_mark_chunk *chunk = NULL;
    for (;;) {
        if (w->pool) {
            chunk = w->pool;
            w->pool = chunk->prev;
            chunk->prev = NULL;
            w->idle--;
            __atomic_store_n(&w->hungry, w->idle > 0, __ATOMIC_RELAXED);
            break;
        }
        if (w->done) break;
        if (w->idle + w->exhausted == w->count + 1) {
            w->done = true;
            __atomic_store_n(&w->hungry, 0, __ATOMIC_RELAXED);
            pthread_cond_broadcast(&w->work_cond);
            break;
        }
        pthread_cond_wait(&w->work_cond, &w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return chunk;
}

/* A marker of an incremental step used its budget up: a GC thread's marker hands its whole
 * stack to the pool (the collecting thread takes the pool back when the step ends: it is the
 * grey set the next step starts from); the collecting thread's keeps its own. When every
 * marker has used its budget or waits with nothing to take, the step is over. */
static void
step_exhausted(struct mosaic_mark_workers *w, struct mosaic_marker *marker, bool collecting)
{
    mosaic_race_point();   /* the end of a step: others may still take or hand back work */
    pthread_mutex_lock(&w->lock);
    if (!collecting) {
        struct mosaic_mark_chunk *chunk;
        while ((chunk = mosaic_mark_stack_take_chunk(&marker->stack)) != NULL) {
            chunk->prev = w->pool;
            w->pool = chunk;
        }
    }
    w->exhausted++;
    if (w->idle + w->exhausted == w->count + 1 && (w->idle == 0 || !w->pool)) {
        w->done = true;
        __atomic_store_n(&w->hungry, 0, __ATOMIC_RELAXED);
    }
    pthread_cond_broadcast(&w->work_cond);
    pthread_mutex_unlock(&w->lock);
}

/* Marks until the phase has nothing left (a whole mark), or, in an incremental step, until
 * this marker has marked its part of the step's budget. */
static void
mark_until_done(mosaic_objspace_t *objspace, struct mosaic_marker *marker, bool collecting)
{
    struct mosaic_mark_workers *w = objspace->threads.workers;
    size_t until = w->step_budget ? mosaic_add_sat(mosaic_marker_marked(marker), w->step_budget) : SIZE_MAX;
    for (;;) {
        if (until == SIZE_MAX) {
            mosaic_marker_drain(objspace, marker);
        }
        else {
            size_t marked = mosaic_marker_marked(marker);
            if (marked >= until || !mosaic_marker_trace(objspace, marker, until - marked)) {
                step_exhausted(w, marker, collecting);
                return;
            }
        }
        struct mosaic_mark_chunk *chunk = take_work(w);
        if (!chunk) return;
        mosaic_mark_stack_push_chunk(&marker->stack, chunk);
    }
}

/* Starts a GC thread (a marker here, the background sweeper in bg_sweep.c) with every signal
 * blocked, so that a signal meant for Ruby never lands on it. */
bool
mosaic_gc_thread_create(pthread_t *thread, void *(*main)(void *), void *arg)
{
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    bool started = pthread_create(thread, NULL, main, arg) == 0;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return started;
}

/* First thing a GC thread does: its name, and the synchronous faults unblocked, so that a
 * crash in a mark function or a free still reaches Ruby's handler (a [BUG] report with a
 * backtrace) instead of killing the process silently. */
void
mosaic_gc_thread_begin(const char *name)
{
    pthread_setname_np(pthread_self(), name);
    sigset_t faults;
    sigemptyset(&faults);
    sigaddset(&faults, SIGSEGV);
    sigaddset(&faults, SIGBUS);
    sigaddset(&faults, SIGILL);
    sigaddset(&faults, SIGFPE);
    sigaddset(&faults, SIGABRT);
    pthread_sigmask(SIG_UNBLOCK, &faults, NULL);
}

static void *
worker_main(void *arg)
{
    struct mosaic_mark_worker *self = arg;
    struct mosaic_mark_workers *w = self->workers;
    /* Phases are counted from the threads' start (0): a phase begun before this thread first
     * takes the lock is still its to join. */
    unsigned long seen = 0;
    mosaic_gc_thread_begin("mosaic-mark");
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->quit && w->phase == seen) pthread_cond_wait(&w->work_cond, &w->lock);
        if (w->quit) break;
        seen = w->phase;
        pthread_mutex_unlock(&w->lock);
        mosaic_race_point();   /* a thread joins its phase late: the others may be done */

        uint64_t cpu_start = mosaic_thread_cpu_ns();
        rb_gc_worker_thread_set_vm_context(&self->vm_context);
        mosaic_marker_begin(self->objspace, &self->marker, true);
        /* A step scans nothing in place: its budget is checked after every object. */
        if (w->step_budget) self->marker.base_depth = self->marker.depth = MOSAIC_MARK_EAGER_DEPTH;
        mark_until_done(self->objspace, &self->marker, false);
        rb_gc_worker_thread_unset_vm_context(&self->vm_context);
        self->cpu_ns = mosaic_thread_cpu_ns() - cpu_start;

        pthread_mutex_lock(&w->lock);
        if (++w->finished == w->count) pthread_cond_signal(&w->done_cond);
    }
    pthread_mutex_unlock(&w->lock);
    mosaic_mark_stack_free(&self->marker.stack);
    return NULL;
}

/* Starts the threads (collecting thread, first parallel mark or first after a fork). False if
 * none could be started: marking then stays on one thread. */
static bool
workers_start(mosaic_objspace_t *objspace)
{
    unsigned int want = objspace->params.gc_threads - 1;
    struct mosaic_mark_workers *w = calloc(1, sizeof(*w));
    if (!w) return false;
    w->workers = calloc(want, sizeof(*w->workers));
    if (!w->workers) {
        free(w);
        return false;
    }
    w->pid = getpid();
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->work_cond, NULL);
    pthread_cond_init(&w->done_cond, NULL);

    for (unsigned int i = 0; i < want; i++) {
        struct mosaic_mark_worker *self = &w->workers[i];
        self->workers = w;
        self->objspace = objspace;
        self->marker.weak_refs = &self->weak_refs;
        self->marker.weak_index = &self->weak_index;
        rb_gc_initialize_vm_context(&self->vm_context);
        if (!mosaic_gc_thread_create(&self->thread, worker_main, self)) {
            rb_native_mutex_destroy(&self->vm_context.lock);
            break;
        }
        w->count++;
    }

    objspace->threads.workers = w;
    if (w->count == 0) {
        mosaic_mark_workers_stop(objspace);
        return false;
    }
    return true;
}

/* A forked child (rb_gc_impl_after_fork): its first collection starts no GC thread, neither
 * markers nor the background sweeper; they start from its second. *Why*: a child that
 * collects once right after the fork (Process.daemon's, then a few allocations) would show
 * threads the program did not make: CRuby's TestProcess#test_daemon_no_threads counts
 * /proc/self/task in such a child and failed when its allocations happened to reach a GC. */
void
mosaic_gc_threads_after_fork(mosaic_objspace_t *objspace)
{
    objspace->threads.held_until_count = objspace->stats.count + 1;
}

/* A parallel mark phase begins (collecting thread, world stopped): a whole mark
 * (step_budget 0), or an incremental step in which each marker marks step_budget slots. */
bool
mosaic_mark_workers_begin(mosaic_objspace_t *objspace, size_t step_budget)
{
    if (!mosaic_gc_threads_allowed(objspace)) return false;
    /* A fork that bypassed rb_gc_impl_before_fork (fork(2) called by C code) left the threads
     * behind in the parent: their record is abandoned, never waited for. */
    if (objspace->threads.workers && objspace->threads.workers->pid != getpid()) objspace->threads.workers = NULL;
    if (!objspace->threads.workers && !workers_start(objspace)) return false;
    struct mosaic_mark_workers *w = objspace->threads.workers;

    /* The threads act for the collecting thread: GET_EC() in a mark function is its EC. */
    struct rb_gc_vm_context here;
    rb_gc_initialize_vm_context(&here);
    rb_native_mutex_destroy(&here.lock);

    pthread_mutex_lock(&w->lock);
    for (unsigned int i = 0; i < w->count; i++) w->workers[i].vm_context.ec = here.ec;
    w->pool = NULL;
    w->idle = 0;
    w->step_budget = step_budget;
    w->exhausted = 0;
    w->finished = 0;
    w->done = false;
    w->offers = 0;
    __atomic_store_n(&w->hungry, 0, __ATOMIC_RELAXED);
    w->phase++;
    pthread_cond_broadcast(&w->work_cond);
    pthread_mutex_unlock(&w->lock);
    mosaic_race_point();   /* the collecting thread marks roots before or after the threads wake */
    return true;
}

bool
mosaic_mark_workers_hungry(mosaic_objspace_t *objspace)
{
    return __atomic_load_n(&objspace->threads.workers->hungry, __ATOMIC_RELAXED);
}

/* A marker with work hands about half of it to the pool, for a marker that waits. */
void
mosaic_mark_workers_offer(mosaic_objspace_t *objspace, struct mosaic_marker *marker)
{
    struct mosaic_mark_workers *w = objspace->threads.workers;
    mosaic_race_point();   /* the mark-stack steal: the waiting marker may give up first */
    struct mosaic_mark_chunk *chunk = mosaic_mark_stack_split(&marker->stack);
    if (!chunk) return;
    pthread_mutex_lock(&w->lock);
    chunk->prev = w->pool;
    w->pool = chunk;
    w->offers++;
    /* Whoever takes it clears hungry if no one else waits; until then, no more offers. */
    __atomic_store_n(&w->hungry, 0, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&w->work_cond);
    pthread_mutex_unlock(&w->lock);
}

/* Waits for the threads to stop and merges what they found (counts, weak slots, CPU time).
 * Returns the slots they marked. */
static size_t
threads_end(mosaic_objspace_t *objspace, struct mosaic_mark_workers *w)
{
    mosaic_race_point();
    pthread_mutex_lock(&w->lock);
    while (w->finished < w->count) pthread_cond_wait(&w->done_cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    objspace->stats.parallel_mark_offers += w->offers;
    size_t marked = 0;
    for (unsigned int i = 0; i < w->count; i++) {
        /* GC CPU time counts every thread's (GC.stat :mosaic_gc_cpu_time). */
        if (objspace->stats.enter_wall_ns) objspace->stats.gc_cpu_ns += w->workers[i].cpu_ns;
        marked += mosaic_marker_end(objspace, &w->workers[i].marker);
    }
    objspace->stats.parallel_marked_by_threads += marked;
    return marked;
}

/* The collecting thread has marked the roots: it marks along until nothing is left anywhere,
 * waits for the threads to stop, and merges what they found. Returns the slots the GC threads
 * marked. */
size_t
mosaic_mark_workers_finish(mosaic_objspace_t *objspace, struct mosaic_marker *marker)
{
    struct mosaic_mark_workers *w = objspace->threads.workers;
    mark_until_done(objspace, marker, true);
    objspace->stats.parallel_marks++;
    return threads_end(objspace, w);
}

/* An incremental step begun with mosaic_mark_workers_begin(objspace, budget): the collecting
 * thread marks its part, waits for the threads, merges their counts and weak slots, and puts
 * the work they handed back on its own stack (the grey set between steps is one stack). */
void
mosaic_mark_workers_step(mosaic_objspace_t *objspace, struct mosaic_marker *marker)
{
    struct mosaic_mark_workers *w = objspace->threads.workers;
    mark_until_done(objspace, marker, true);
    objspace->incremental.traced_by_threads += threads_end(objspace, w);
    objspace->stats.incremental_parallel_steps++;
    struct mosaic_mark_chunk *chunk;
    while ((chunk = w->pool) != NULL) {
        w->pool = chunk->prev;
        mosaic_mark_stack_push_chunk(&marker->stack, chunk);
    }
}

/* Stops and joins the threads (before fork, at exit); the next parallel mark starts them. */
void
mosaic_mark_workers_stop(mosaic_objspace_t *objspace)
{
    struct mosaic_mark_workers *w = objspace->threads.workers;
    if (!w) return;
    /* A child forked behind Ruby's back has none of these threads (and their ids may be
     * reused by its own): abandon the record, never join. */
    if (w->pid != getpid()) {
        objspace->threads.workers = NULL;
        return;
    }
    pthread_mutex_lock(&w->lock);
    w->quit = true;
    pthread_cond_broadcast(&w->work_cond);
    pthread_mutex_unlock(&w->lock);
    for (unsigned int i = 0; i < w->count; i++) {
        pthread_join(w->workers[i].thread, NULL);
        rb_native_mutex_destroy(&w->workers[i].vm_context.lock);
        mosaic_ptr_vec_free(&w->workers[i].weak_refs);
        mosaic_weak_index_reset(&w->workers[i].weak_index);
    }
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->work_cond);
    pthread_cond_destroy(&w->done_cond);
    free(w->workers);
    free(w);
    objspace->threads.workers = NULL;
}
