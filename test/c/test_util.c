/*
 * test_util.c: unit tests of src/core/util.h, compiled without any Ruby header (the test
 * proves util.h needs none). Owns the checks of the slot-number reciprocal's exactness for
 * every slot size and offset, the side-bitmap bit helpers (plain and atomic) at word
 * boundaries, and the saturating size arithmetic (mosaic_scale, mosaic_add_sat).
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/util.h"
#include "check.h"

/* -------------------------------------------------------- slot reciprocal */

/* util.h's claim: for every slot size Mosaic can use (multiples of 8 from 40 to
 * MOSAIC_MAX_SLOT_SIZE: size_class.c's size_table_valid_p) and every offset n in a page,
 * (n * recip) >> 32 == n / size, computed as mosaic_bit_index does (a 32-bit reciprocal, a
 * 64-bit product). One check per size; a failure names the first offset that breaks. */
static void
test_slot_recip_exact_for_every_size_and_offset(void)
{
    for (size_t size = MOSAIC_BASE_SLOT_SIZE; size <= MOSAIC_MAX_SLOT_SIZE; size += 8) {
        uint32_t recip = mosaic_slot_recip(size);
        uint64_t bad = UINT64_MAX, got = 0;
        for (uint64_t n = 0; n < MOSAIC_PAGE_SIZE; n++) {
            uint64_t q = (n * recip) >> 32;
            if (q != n / size) {
                bad = n;
                got = q;
                break;
            }
        }
        CHECKF(bad == UINT64_MAX, "size %zu, offset %" PRIu64 ": %" PRIu64 " instead of %" PRIu64,
               size, bad, got, bad / size);
    }
}

/* The reciprocal is ceil(2^32 / size): recip * size - 2^32 is in [0, size), the bound the
 * exactness argument rests on; and it fits the 32 bits a page header keeps. */
static void
test_slot_recip_is_the_ceiling(void)
{
    for (size_t size = MOSAIC_BASE_SLOT_SIZE; size <= MOSAIC_MAX_SLOT_SIZE; size += 8) {
        uint64_t r = mosaic_slot_recip(size);
        uint64_t prod = r * size, two32 = (uint64_t)1 << 32;
        CHECKF(prod >= two32 && prod - two32 < size, "size %zu: recip %" PRIu64 ", recip * size %" PRIu64, size, r, prod);
        CHECKF(r == (two32 + size - 1) / size && r <= UINT32_MAX, "size %zu", size);
    }
}

/* ----------------------------------------------------------------- bits */

#define WORDS 4
#define NBITS (WORDS * 64)

/* Sets and clears each bit of a 4-word bitmap, with the plain and the atomic helpers, and
 * compares the whole bitmap with the expected words after each: exactly the bit asked for
 * changes, bit 63 (the sign bit of a word) and bit 64 (the next word's first) included. */
static void
test_bits_each_bit_alone(void)
{
    for (int atomic = 0; atomic < 2; atomic++) {
        for (size_t i = 0; i < NBITS; i++) {
            mosaic_bits_t bits[WORDS] = { 0 }, want[WORDS] = { 0 };
            want[i / 64] = (mosaic_bits_t)1 << (i % 64);
            if (atomic) mosaic_bit_set_atomic(bits, i);
            else mosaic_bit_set(bits, i);
            CHECKF(memcmp(bits, want, sizeof(bits)) == 0, "set bit %zu (%s)", i, atomic ? "atomic" : "plain");
            CHECKF(mosaic_bit_test(bits, i), "bit %zu", i);
            bool others_clear = true;
            for (size_t j = 0; j < NBITS; j++) {
                if (j != i && mosaic_bit_test(bits, j)) others_clear = false;
            }
            CHECKF(others_clear, "bit %zu set another bit", i);

            /* Clear it from a full bitmap: only it goes. */
            for (size_t w = 0; w < WORDS; w++) bits[w] = want[w] = ~(mosaic_bits_t)0;
            want[i / 64] &= ~((mosaic_bits_t)1 << (i % 64));
            if (atomic) mosaic_bit_clear_atomic(bits, i);
            else mosaic_bit_clear(bits, i);
            CHECKF(memcmp(bits, want, sizeof(bits)) == 0, "clear bit %zu (%s)", i, atomic ? "atomic" : "plain");
            CHECKF(!mosaic_bit_test(bits, i), "bit %zu", i);
        }
    }
}

/* The boundaries by name: the first bit, the last of a word, the first of the next, the last
 * of the bitmap; setting twice and clearing a clear bit change nothing; the plain and atomic
 * helpers combine on one word. */
static void
test_bits_word_boundaries(void)
{
    static const size_t edges[] = { 0, 63, 64, NBITS - 1 };
    mosaic_bits_t bits[WORDS] = { 0 };
    for (size_t k = 0; k < sizeof(edges) / sizeof(edges[0]); k++) {
        mosaic_bit_set(bits, edges[k]);
        mosaic_bit_set_atomic(bits, edges[k]);
    }
    CHECK_EQ(bits[0], (mosaic_bits_t)1 | (mosaic_bits_t)1 << 63);
    CHECK_EQ(bits[1], 1);
    CHECK_EQ(bits[2], 0);
    CHECK_EQ(bits[3], (mosaic_bits_t)1 << 63);
    for (size_t k = 0; k < sizeof(edges) / sizeof(edges[0]); k++) CHECK(mosaic_bit_test(bits, edges[k]));
    CHECK(!mosaic_bit_test(bits, 1));
    CHECK(!mosaic_bit_test(bits, 62));
    CHECK(!mosaic_bit_test(bits, 65));
    CHECK(!mosaic_bit_test(bits, NBITS - 2));

    mosaic_bit_clear_atomic(bits, 63);
    CHECK_EQ(bits[0], 1);
    mosaic_bit_clear(bits, 63);            /* clear again: nothing changes */
    CHECK_EQ(bits[0], 1);
    mosaic_bit_clear(bits, 0);
    mosaic_bit_clear_atomic(bits, 64);
    mosaic_bit_clear(bits, NBITS - 1);
    for (size_t w = 0; w < WORDS; w++) CHECKF(bits[w] == 0, "word %zu: 0x%016" PRIx64, w, (uint64_t)bits[w]);
}

/* ------------------------------------------------------------ saturation */

/* mosaic_scale: n * factor truncated, 0 for a NaN, a negative or a zero product, and
 * MOSAIC_SIZE_MAX (a Fixnum) for anything at or above it, never a wrapped value. */
static void
test_scale_edges(void)
{
    CHECK_EQ(MOSAIC_SIZE_MAX, (size_t)(LONG_MAX >> 1));
    /* NaN and non-positive products */
    CHECK_EQ(mosaic_scale(1000, NAN), 0);
    CHECK_EQ(mosaic_scale(1000, -NAN), 0);
    CHECK_EQ(mosaic_scale(1000, -1.0), 0);
    CHECK_EQ(mosaic_scale(1000, -0.0), 0);
    CHECK_EQ(mosaic_scale(1000, 0.0), 0);
    CHECK_EQ(mosaic_scale(1000, -INFINITY), 0);
    CHECK_EQ(mosaic_scale(0, 2.0), 0);
    CHECK_EQ(mosaic_scale(0, INFINITY), 0);     /* 0 * inf is NaN */
    CHECK_EQ(mosaic_scale(MOSAIC_SIZE_MAX, -1e-300), 0);
    /* huge */
    CHECK_EQ(mosaic_scale(1, INFINITY), MOSAIC_SIZE_MAX);
    CHECK_EQ(mosaic_scale(1, 1e300), MOSAIC_SIZE_MAX);
    CHECK_EQ(mosaic_scale(1, DBL_MAX), MOSAIC_SIZE_MAX);
    CHECK_EQ(mosaic_scale(MOSAIC_SIZE_MAX, 2.0), MOSAIC_SIZE_MAX);
    CHECK_EQ(mosaic_scale(MOSAIC_SIZE_MAX, 1.0), MOSAIC_SIZE_MAX);
    CHECK_EQ(mosaic_scale(SIZE_MAX, 0.5), MOSAIC_SIZE_MAX);
    CHECK_EQ(mosaic_scale((size_t)1 << 61, 2.0), MOSAIC_SIZE_MAX);       /* 2^62 > the maximum */
    /* exact, and truncated toward zero */
    CHECK_EQ(mosaic_scale((size_t)1 << 61, 1.5), ((size_t)3 << 60));
    CHECK_EQ(mosaic_scale((size_t)1 << 40, 1.0), (size_t)1 << 40);
    CHECK_EQ(mosaic_scale(((size_t)1 << 53) - 1, 1.0), ((size_t)1 << 53) - 1);
    CHECK_EQ(mosaic_scale(1000, 1.4), 1400);
    CHECK_EQ(mosaic_scale(1000, 0.98), 980);
    CHECK_EQ(mosaic_scale(10, 0.99), 9);
    CHECK_EQ(mosaic_scale(3, 0.5), 1);
    CHECK_EQ(mosaic_scale(1, 0.999999), 0);
    CHECK_EQ(mosaic_scale(1000, DBL_MIN), 0);
    CHECK_EQ(mosaic_scale(16 << 20, 1.4), 23488102);   /* malloc_limit_min * 1.4 */
}

/* Properties over many values: never above the maximum, 1.0 is the identity below 2^53, and
 * monotonic in n and in the factor. */
static void
test_scale_properties(void)
{
    static const double factors[] = { 0.0, 0.02, 0.35, 0.5, 0.98, 1.0, 1.2, 1.4, 1.8, 2.0, 2.857142857142857, 100.0, 1e18 };
    uint64_t x = 0x9E3779B97F4A7C15ull;
    bool within = true, identity = true, mono_n = true, mono_f = true;
    for (int it = 0; it < 200000; it++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t n = (size_t)(x >> (x % 64)) & MOSAIC_SIZE_MAX;
        size_t n2 = n + (x & 0xffff) > MOSAIC_SIZE_MAX ? MOSAIC_SIZE_MAX : n + (x & 0xffff);
        size_t prev = 0;
        for (size_t k = 0; k < sizeof(factors) / sizeof(factors[0]); k++) {
            size_t r = mosaic_scale(n, factors[k]);
            if (r > MOSAIC_SIZE_MAX) within = false;
            if (r < prev) mono_f = false;
            if (mosaic_scale(n2, factors[k]) < r) mono_n = false;
            prev = r;
        }
        if (n < ((size_t)1 << 53) && mosaic_scale(n, 1.0) != n) identity = false;
    }
    CHECK(within);
    CHECK(identity);
    CHECK(mono_n);
    CHECK(mono_f);
}

/* mosaic_add_sat: a + b, or MOSAIC_SIZE_MAX when that passes it (for a, b at most the
 * maximum, which every size Mosaic keeps is). */
static void
test_add_sat_edges(void)
{
    const size_t M = MOSAIC_SIZE_MAX;
    CHECK_EQ(mosaic_add_sat(0, 0), 0);
    CHECK_EQ(mosaic_add_sat(1, 2), 3);
    CHECK_EQ(mosaic_add_sat(M, 0), M);
    CHECK_EQ(mosaic_add_sat(0, M), M);
    CHECK_EQ(mosaic_add_sat(M - 1, 1), M);       /* exactly the maximum: not saturated, equal */
    CHECK_EQ(mosaic_add_sat(M - 5, 4), M - 1);
    CHECK_EQ(mosaic_add_sat(M - 5, 5), M);
    CHECK_EQ(mosaic_add_sat(M - 5, 6), M);
    CHECK_EQ(mosaic_add_sat(M, 1), M);
    CHECK_EQ(mosaic_add_sat(1, M), M);
    CHECK_EQ(mosaic_add_sat(M, M), M);
    CHECK_EQ(mosaic_add_sat(M / 2, M / 2 + 1), M);
    CHECK_EQ(mosaic_add_sat(M / 2 + 1, M / 2 + 1), M);
    /* a + b never wraps: the sum of two maxima fits a size_t, and it is cut */
    CHECK_OP(mosaic_add_sat(M, M), <, (size_t)M + M);
}

/* ---------------------------------------------------------------- clocks */

static void
test_clocks_advance(void)
{
    uint64_t a = mosaic_now_ns(), b = mosaic_now_ns();
    CHECK_OP(b, >=, a);
    CHECK_OP(a, >, 0);
    uint64_t c0 = mosaic_thread_cpu_ns();
    volatile uint64_t sink = 0;
    for (int i = 0; i < 1000000; i++) sink += (uint64_t)i * i;
    uint64_t c1 = mosaic_thread_cpu_ns();
    CHECK_OP(c1, >=, c0);
}

int
main(void)
{
    RUN(test_slot_recip_exact_for_every_size_and_offset);
    RUN(test_slot_recip_is_the_ceiling);
    RUN(test_bits_each_bit_alone);
    RUN(test_bits_word_boundaries);
    RUN(test_scale_edges);
    RUN(test_scale_properties);
    RUN(test_add_sat_edges);
    RUN(test_clocks_advance);
    return check_summary("test/c/test_util.c");
}
