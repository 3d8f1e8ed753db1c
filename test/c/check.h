/*
 * check.h: the C unit tests' harness (test/c/, make test-c). Owns the CHECK macros, the
 * counts of checks and failures, and the one line each test binary ends with, which
 * scripts/test-c.sh adds up:
 *
 *     test/c/test_util.c: 1234 checks, 0 failed
 *
 * A failed check prints its file:line, the expression and the values, and the test goes on
 * (so one run shows every failure); the binary exits 1 if any check failed. No framework:
 * a test file includes this header, defines static void test_*(void) functions and a main
 * that RUNs them and returns check_summary().
 */
#ifndef MOSAIC_TEST_CHECK_H
#define MOSAIC_TEST_CHECK_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

static unsigned long check_count;
static unsigned long check_failed;
static const char *check_test = "";

/* Records one check; on failure prints where, what, and the details fmt formats. */
static bool __attribute__((format(printf, 5, 6), unused))
check_record(bool ok, const char *file, int line, const char *expr, const char *fmt, ...)
{
    check_count++;
    if (ok) return true;
    check_failed++;
    fprintf(stderr, "%s:%d: %s: CHECK failed: %s", file, line, check_test, expr);
    if (fmt && *fmt) {
        va_list ap;
        va_start(ap, fmt);
        fputs(" (", stderr);
        vfprintf(stderr, fmt, ap);
        fputs(")", stderr);
        va_end(ap);
    }
    fputc('\n', stderr);
    return false;
}

/* CHECK(cond): cond holds. CHECKF(cond, fmt, ...): the same, with details printed on failure
 * (for checks inside loops: which size, which offset). */
#define CHECK(cond) check_record(!!(cond), __FILE__, __LINE__, #cond, NULL)
#define CHECKF(cond, ...) check_record(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)

/* Integers (any integer type up to 64 bits, compared as uintmax_t: use them for sizes and
 * counts, which are never negative): a op b, both values printed on failure. Like CHECK, they
 * are expressions whose value is whether the check passed. */
#define CHECK_OP(a, op, b) CHECK_OP_(a, op, b, #a " " #op " " #b)
#define CHECK_EQ(a, b) CHECK_OP_(a, ==, b, #a " == " #b)
#define CHECK_OP_(a, op, b, text) ({ \
    uintmax_t check_a_ = (uintmax_t)(a), check_b_ = (uintmax_t)(b); \
    check_record(check_a_ op check_b_, __FILE__, __LINE__, text, \
                 "%ju %s %ju, 0x%jx vs 0x%jx", check_a_, #op, check_b_, check_a_, check_b_); \
})

/* Doubles: a op b, printed with all their digits on failure. CHECK_NEAR: |a - b| <= eps. */
#define CHECK_DOP(a, op, b) ({ \
    double check_a_ = (a), check_b_ = (b); \
    check_record(check_a_ op check_b_, __FILE__, __LINE__, #a " " #op " " #b, \
                 "%.17g %s %.17g", check_a_, #op, check_b_); \
})
#define CHECK_NEAR(a, b, eps) ({ \
    double check_a_ = (a), check_b_ = (b), check_e_ = (eps); \
    double check_d_ = check_a_ > check_b_ ? check_a_ - check_b_ : check_b_ - check_a_; \
    check_record(check_d_ <= check_e_, __FILE__, __LINE__, #a " ~ " #b, \
                 "%.17g vs %.17g, off by %.3g > %.3g", check_a_, check_b_, check_d_, check_e_); \
})

/* Runs one test function, naming it in the failures it reports. */
#define RUN(fn) do { check_test = #fn; fn(); check_test = ""; } while (0)

/* The binary's last line, and its exit status: 0 when every check passed. */
static int __attribute__((unused))
check_summary(const char *file)
{
    printf("%s: %lu checks, %lu failed\n", file, check_count, check_failed);
    return check_failed ? 1 : 0;
}

#endif /* MOSAIC_TEST_CHECK_H */
