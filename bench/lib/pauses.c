/*
 * bench/lib/pauses.c: GC pauses as the mutator sees them, the same way under every GC library.
 *
 * A tiny C extension that bench/run.rb builds with the measured Ruby and bench/lib/probe.rb
 * loads (-r, before the workload) when $MOSAIC_BENCH_PAUSES names it. It hooks the internal
 * events RUBY_INTERNAL_EVENT_GC_ENTER and GC_EXIT, which every GC fires around every stay
 * inside the collector: a collection, a lazy-sweep step, an incremental-marking step, the
 * rest of a cycle finished at once. One stay is one pause. It does not ask the GC for its own
 * timing: the default GC's GC::Profiler and GC.stat(:time) are process CPU time and cover
 * only gc_start's own part of a cycle (not its later incremental or lazy steps), Mosaic's are
 * wall time; here both are measured with the same clocks:
 *   wall  CLOCK_MONOTONIC from GC_ENTER to GC_EXIT
 *   cpu   CLOCK_THREAD_CPUTIME_ID of the thread that stays in the GC (a GC's own worker
 *         threads are not seen; Mosaic reports those in GC.stat :mosaic_gc_cpu_time)
 * A pause is minor or major by the latest collection started: GC.latest_gc_info(:major_by)
 * non-nil at GC_EXIT, so the lazy-sweep steps of a major GC count as major pauses.
 *
 * The pauses in which a collection started (GC.count changed across them) are also counted
 * apart, per kind ("minor_gc", "major_gc"): the collections themselves, without the later
 * lazy-sweep and incremental-marking steps, comparable to GC::Profiler's per-GC records.
 *
 * Cost and footprint: four clock reads, two GC.count and one GC.latest_gc_info(:major_by)
 * lookup (which allocate nothing in either GC) per pause; the pauses are counted in fixed
 * histograms (4 x 2048 buckets, 32 per power of two: within 3.1% of the true value), so memory
 * does not grow with the number of pauses. Maxima and sums are exact.
 *
 * Ruby side: MosaicBenchPauses.result (disables the hook) returns
 *   { "minor" => { "count", "p50_ms", "p99_ms", "max_ms", "sum_ms" }, "major" => {...},
 *     "minor_gc" => {...}, "major_gc" => {...}, "gc_wall_ms", "gc_cpu_ms" }
 */
#include <stdint.h>
#include <time.h>

#include "ruby/ruby.h"
#include "ruby/debug.h"

#define SUB_BITS 5
#define SUB (1 << SUB_BITS)
#define BUCKETS (64 * SUB)

struct kind {
    uint32_t counts[BUCKETS];
    uint64_t count, sum_ns, max_ns;
};

/* 0 minor, 1 major: every pause; 2 minor_gc, 3 major_gc: the pauses in which a collection
 * started (GC.count changed), i.e. without the lazy-sweep and incremental steps. */
static struct kind kinds[4];
static uint64_t enter_wall, enter_cpu, total_cpu_ns;
static size_t enter_count;
static int inside;
static VALUE tracepoint = Qnil, sym_major_by;

static uint64_t
clock_ns(clockid_t clock)
{
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Values below 2^SUB_BITS ns have their own buckets; above, 32 buckets per power of two. */
static int
bucket_of(uint64_t v)
{
    if (v < SUB) return (int)v;
    int e = 63 - __builtin_clzll(v);
    return (e - SUB_BITS + 1) * SUB + (int)((v >> (e - SUB_BITS)) & (SUB - 1));
}

/* The middle of a bucket's range. */
static double
bucket_value(int b)
{
    if (b < SUB) return b;
    int e = b / SUB - 1 + SUB_BITS, sub = b % SUB;
    double lo = (double)((uint64_t)(SUB + sub) << (e - SUB_BITS));
    double width = (double)(1ull << (e - SUB_BITS));
    return lo + width / 2;
}

static void
add(struct kind *k, uint64_t wall)
{
    k->counts[bucket_of(wall)]++;
    k->count++;
    k->sum_ns += wall;
    if (wall > k->max_ns) k->max_ns = wall;
}

static void
hook(VALUE tpval, void *data)
{
    rb_event_flag_t ev = rb_tracearg_event_flag(rb_tracearg_from_tracepoint(tpval));
    if (ev == RUBY_INTERNAL_EVENT_GC_ENTER) {
        inside = 1;
        enter_wall = clock_ns(CLOCK_MONOTONIC);
        enter_cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        enter_count = rb_gc_count();
    }
    else if (ev == RUBY_INTERNAL_EVENT_GC_EXIT && inside) {
        uint64_t wall = clock_ns(CLOCK_MONOTONIC) - enter_wall;
        uint64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        inside = 0;
        if (cpu > enter_cpu) total_cpu_ns += cpu - enter_cpu;
        int major = !NIL_P(rb_gc_latest_gc_info(sym_major_by));
        add(&kinds[major], wall);
        if (rb_gc_count() != enter_count) add(&kinds[2 + major], wall);
    }
}

/* Nearest-rank percentile in ms, never above the exact maximum. */
static double
percentile_ms(const struct kind *k, double p)
{
    if (k->count == 0) return 0;
    uint64_t rank = (uint64_t)(p / 100.0 * (double)k->count + 0.999999999);
    if (rank < 1) rank = 1;
    uint64_t seen = 0;
    for (int b = 0; b < BUCKETS; b++) {
        seen += k->counts[b];
        if (seen >= rank) {
            double v = bucket_value(b);
            if (v > (double)k->max_ns) v = (double)k->max_ns;
            return v / 1e6;
        }
    }
    return (double)k->max_ns / 1e6;
}

static VALUE
kind_hash(const struct kind *k)
{
    VALUE h = rb_hash_new();
    rb_hash_aset(h, rb_str_new_cstr("count"), ULL2NUM(k->count));
    rb_hash_aset(h, rb_str_new_cstr("p50_ms"), DBL2NUM(percentile_ms(k, 50)));
    rb_hash_aset(h, rb_str_new_cstr("p99_ms"), DBL2NUM(percentile_ms(k, 99)));
    rb_hash_aset(h, rb_str_new_cstr("max_ms"), DBL2NUM((double)k->max_ns / 1e6));
    rb_hash_aset(h, rb_str_new_cstr("sum_ms"), DBL2NUM((double)k->sum_ns / 1e6));
    return h;
}

static VALUE
result(VALUE self)
{
    if (!NIL_P(tracepoint)) rb_tracepoint_disable(tracepoint);
    VALUE h = rb_hash_new();
    rb_hash_aset(h, rb_str_new_cstr("minor"), kind_hash(&kinds[0]));
    rb_hash_aset(h, rb_str_new_cstr("major"), kind_hash(&kinds[1]));
    rb_hash_aset(h, rb_str_new_cstr("minor_gc"), kind_hash(&kinds[2]));
    rb_hash_aset(h, rb_str_new_cstr("major_gc"), kind_hash(&kinds[3]));
    rb_hash_aset(h, rb_str_new_cstr("gc_wall_ms"), DBL2NUM((double)(kinds[0].sum_ns + kinds[1].sum_ns) / 1e6));
    rb_hash_aset(h, rb_str_new_cstr("gc_cpu_ms"), DBL2NUM((double)total_cpu_ns / 1e6));
    return h;
}

void
Init_mosaic_bench_pauses(void)
{
    VALUE mod = rb_define_module("MosaicBenchPauses");
    rb_define_module_function(mod, "result", result, 0);
    sym_major_by = ID2SYM(rb_intern("major_by"));
    /* Asked once here, outside any GC: the default GC interns its answer Symbols on the
     * first call, which inside a GC would be an allocation during GC. */
    rb_gc_latest_gc_info(sym_major_by);
    tracepoint = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_GC_ENTER | RUBY_INTERNAL_EVENT_GC_EXIT, hook, NULL);
    rb_gc_register_mark_object(tracepoint);
    rb_tracepoint_enable(tracepoint);
}
