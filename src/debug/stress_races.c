/*
 * stress_races.c: the race-provoking mode (MOSAIC_STRESS_RACES=N, checking build only).
 *
 * Owns: the delays injected at the points where the GC threads (markers, the background
 * sweeper) and the mutator hand work to each other, and their count.
 *
 * *Why*: on 2 cores a GC thread and the mutator seldom reach a hand-over at the same moment,
 * so an interleaving that breaks an invariant may never happen in a test run; production
 * machines have 8 to 64 cores. At each race point (mosaic_race_point, named in the code where
 * it stands: page claims, list and pool swaps, the end of a step, the mark-stack hand-offs,
 * the fork stop, the write barrier between its unlocked test and its lock) a thread in race
 * mode, by a per-thread pseudo-random draw, goes on (1/2), yields its core (1/4), or waits
 * 0..N microseconds (1/4: spinning below 20 us, sleeping above), so that the other side
 * runs first in some runs and second in others. Outputs must not change; the checking
 * build's verifier and assertions hold the invariants.
 *
 * Invariants: a race point only delays the thread that reaches it; it takes no lock, calls
 * nothing of Ruby's, and allocates nothing, so it may stand anywhere, with any lock held.
 * In the release build mosaic_race_point compiles to nothing.
 */
#include <sched.h>
#include <unistd.h>

#include "core/mosaic.h"

unsigned int mosaic_stress_races_us;
static size_t race_delays;          /* delays and yields injected, all threads (relaxed atomics) */

/* xorshift64*, one state per thread, seeded from the thread's address space and the clock. */
static __thread uint64_t race_state;

static uint64_t
race_next(void)
{
    uint64_t x = race_state;
    if (RB_UNLIKELY(x == 0)) {
        x = (uint64_t)(uintptr_t)&race_state ^ mosaic_now_ns() ^ ((uint64_t)getpid() << 32);
        if (x == 0) x = 0x9e3779b97f4a7c15ULL;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    race_state = x;
    return x * 0x2545f4914f6cdd1dULL;
}

void
mosaic_race_delay(void)
{
    uint64_t r = race_next();
    switch (r & 3) {
      case 0:
      case 1:
        return;
      case 2:
        sched_yield();
        break;
      default: {
        uint64_t us = (r >> 8) % ((uint64_t)mosaic_stress_races_us + 1);
        if (us < 20) {
            uint64_t until = mosaic_now_ns() + us * 1000;
            while (mosaic_now_ns() < until) __asm__ __volatile__("" ::: "memory");
        }
        else {
            struct timespec ts = { 0, (long)(us * 1000) };
            nanosleep(&ts, NULL);
        }
        break;
      }
    }
    __atomic_fetch_add(&race_delays, 1, __ATOMIC_RELAXED);
}

/* GC.stat(:mosaic_race_delays): 0 unless the mode is on. */
size_t
mosaic_race_delays(void)
{
    return __atomic_load_n(&race_delays, __ATOMIC_RELAXED);
}
