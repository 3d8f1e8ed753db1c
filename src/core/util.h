/*
 * util.h: the pure helpers: side-bitmap bits, the slot-number reciprocal, saturating size
 * arithmetic, clocks. Plain C and POSIX, no Ruby header: the C unit tests (test/c/) compile it
 * alone.
 *
 * Invariants: a bitmap word other threads may write at the same time is read with a relaxed
 * atomic load and written with the _atomic variants; sizes never exceed MOSAIC_SIZE_MAX (a
 * Fixnum) and never wrap.
 */
#ifndef MOSAIC_UTIL_H
#define MOSAIC_UTIL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#pragma GCC visibility push(hidden)

typedef uint64_t mosaic_bits_t;

/* The page geometry's base numbers (core/defs.h derives the rest of it from them). */
#define MOSAIC_PAGE_SIZE        (64 * 1024)
/* The smallest slot: an RBasic and three words (CRuby's RVALUE; a free slot's freelist link,
 * a T_MOVED's forwarding address and a zombie fit in it). Side bitmaps hold one bit per slot,
 * so they are sized for a page of slots this small. */
#define MOSAIC_BASE_SLOT_SIZE   40
/* The largest slot: CRuby keeps an embedded array's length in 7 flag bits
 * (RARRAY_EMBED_LEN_MAX, 127), and embeds an array whenever its slot holds its capacity, so a
 * slot above offsetof(struct RArray, as.ary) + 127 * 8 = 1032 bytes would overflow that field. */
#define MOSAIC_MAX_SLOT_SIZE    1032

/* ceil(2^32 / slot_size). Why it is exact: with r = this and e = r * d - 2^32 (0 <= e < d),
 * n * r / 2^32 = n / d + n * e / (d * 2^32), and for n, d < 2^16 the error term n * e / 2^32
 * stays under 1, less than the gap from n mod d to d: (n * r) >> 32 == n / d for every offset
 * n in a page (size_class.c checks every one at boot). A multiply and a shift instead of a division
 * by a slot size the compiler does not know. */
static inline uint32_t
mosaic_slot_recip(size_t slot_size)
{
    return (uint32_t)((((uint64_t)1 << 32) + slot_size - 1) / slot_size);
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

/* The largest count or byte size Mosaic keeps: a Fixnum (RUBY_FIXNUM_MAX, LONG_MAX >> 1;
 * core/mosaic.h checks they agree), so that GC.stat and friends never allocate a Bignum
 * (they may be called from inside a collection, by event hooks). */
#define MOSAIC_SIZE_MAX ((size_t)(LONG_MAX >> 1))

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

static inline uint64_t
mosaic_thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#pragma GCC visibility pop

#endif /* MOSAIC_UTIL_H */
