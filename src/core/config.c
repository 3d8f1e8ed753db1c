/*
 * config.c: Mosaic's tunables, in one place: defaults, environment variables, GC.config.
 *
 * Environment variables are read once at boot (rb_gc_impl_set_params). Each one has a row in
 * options.def, the one table of options (name, default, range, build, GC.config key, a line
 * for users), which this file expands into the defaults and the parsing, and from which
 * scripts/options-table.rb renders the README's table. RUBY_GC_* names are honoured where they
 * mean what they mean in CRuby's default GC; MOSAIC_* names are Mosaic's own. A value that
 * does not parse, is not finite, or is out of range, is reported on stderr and the default is
 * kept; a size above MOSAIC_SIZE_MAX (that still parses) is taken as MOSAIC_SIZE_MAX. With -w
 * (verbose), every accepted RUBY_GC_* value is echoed in the default GC's format. GC.config
 * raises instead (TypeError for a key that is not a Symbol or a value that is not a number,
 * ArgumentError for a value out of range) and then changes nothing.
 *
 * RUBY_GC_HEAP_FREE_SLOTS_MAX_RATIO applies after major GCs only: a class keeps
 * live / (1 - ratio) slots and returns its empty pages beyond that; other empty pages go to
 * the empty-page pool, from which pages idle for a whole cycle are returned (pace.c).
 */
#include <ctype.h>
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <unistd.h>

#include "core/mosaic.h"
#include "core/cpus.h"

/* Benchmark variants may build with other thread defaults (docs/decisions/0008-background-sweeper.md, "Measured
 * against the mutator"): -DMOSAIC_GC_THREADS_DEFAULT=1, -DMOSAIC_BACKGROUND_SWEEP_DEFAULT=0. */
#ifndef MOSAIC_GC_THREADS_DEFAULT
# define MOSAIC_GC_THREADS_DEFAULT 0   /* 0: one per core, at most 8 */
#endif
#ifndef MOSAIC_BACKGROUND_SWEEP_DEFAULT
# define MOSAIC_BACKGROUND_SWEEP_DEFAULT 1
#endif
/* The auto-compaction policy when MOSAIC_AUTO_COMPACT is not set: off, by benchmark (docs/decisions/0007-auto-compaction-off-by-default.md,
 * "Deciding the default"). A benchmark variant may build with another:
 * make variant NAME=x OPT='-O3 -g -DMOSAIC_CHECK=0 -DMOSAIC_AUTO_COMPACT_DEFAULT=MOSAIC_AUTO_COMPACT_FRAGMENTATION'. */
#ifndef MOSAIC_AUTO_COMPACT_DEFAULT
# define MOSAIC_AUTO_COMPACT_DEFAULT MOSAIC_AUTO_COMPACT_OFF
#endif

/* The table's terms (options.def) in C. */
#define MIB(n)        ((size_t)(n) << 20)
#define PARAM(field)  (params->field)
#define NO_UPPER      0.0     /* env_double: no upper bound */
#define ZERO_OK       true
#define NO_ZERO       false
/* Whether this build honours a row's BUILD, and what to tell the user when it does not. */
#define OPTION_BUILT_ALL        1
#define OPTION_BUILT_CHECKING   MOSAIC_CHECK
#define OPTION_BUILT_HISTOGRAM  MOSAIC_SIZE_HISTOGRAM
#define OPTION_NEEDS_ALL        ""
#define OPTION_NEEDS_CHECKING   "the checking build (make CHECK=1)"
#define OPTION_NEEDS_HISTOGRAM  "the size-histogram build (make HISTOGRAM=1)"

void
mosaic_params_defaults(struct mosaic_params *params)
{
    /* The defaults of the table's sizes, numbers and switches. */
#define MOSAIC_OPTION_SIZE(name, field, def, min, build, key, doc) params->field = (def);
#define MOSAIC_OPTION_NUMBER(name, field, def, lower, upper, zero, build, key, doc) params->field = (def);
#define MOSAIC_OPTION_SWITCH(name, field, def, build, key, doc) params->field = (def) != 0;
#define MOSAIC_OPTION_CUSTOM(name, reader, def, accepts, build, key, doc)
#define MOSAIC_OPTION_ELSEWHERE(name, file, def, accepts, build, key, doc)
#include "core/options.def"
#undef MOSAIC_OPTION_SIZE
#undef MOSAIC_OPTION_NUMBER
#undef MOSAIC_OPTION_SWITCH
#undef MOSAIC_OPTION_CUSTOM
#undef MOSAIC_OPTION_ELSEWHERE

    /* The defaults of the table's custom rows, and of what no variable sets. */
    for (int i = 0; i < MOSAIC_HEAP_MAX; i++) params->heap_init_slots[i] = 10000;
    params->malloc_limit_max = MIB(32);
    params->oldmalloc_limit_max = MIB(128);
    params->allow_full_mark = true;
    params->auto_compact_policy = MOSAIC_AUTO_COMPACT_DEFAULT;
    /* Every CPU the process may use marks, up to 8 (a marker per CPU; past a few, the
     * hand-offs cost more than they bring on the heaps measured). Which CPUs it may use: its
     * affinity and its cgroups' CPU quota bound those online (cpus.c). */
    unsigned int cpus = mosaic_usable_cpus();
    params->gc_threads = cpus > 8 ? 8 : cpus;
    if (MOSAIC_GC_THREADS_DEFAULT > 0) params->gc_threads = MOSAIC_GC_THREADS_DEFAULT;
    params->background_sweep = MOSAIC_BACKGROUND_SWEEP_DEFAULT;
    /* MOSAIC_INCREMENTAL is on: measured, pauses down, memory a little up (docs/decisions/0009-incremental-marking.md). */
}

static const char *const auto_compact_policies[] = { "off", "fragmentation", "always" };

/* -w echoes accepted RUBY_GC_* values as the default GC does; Mosaic's own variables (debug
 * switches such as MOSAIC_STRESS_MINOR) stay quiet, so they can be set for a whole test run. */
static bool
echo_p(const char *name)
{
    return RTEST(ruby_verbose) && strncmp(name, "RUBY_GC_", 8) == 0;
}

/* Reads a size (accepts k/m/g suffixes). Returns true when the value was accepted. */
static bool
env_size(const char *name, size_t *value, size_t lower_bound)
{
    const char *s = getenv(name);
    if (!s || !*s) return false;

    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    size_t unit = 1;
    switch (*end) {
      case 'k': case 'K': unit = 1024; end++; break;
      case 'm': case 'M': unit = 1024 * 1024; end++; break;
      case 'g': case 'G': unit = 1024 * 1024 * 1024; end++; break;
    }
    while (*end && isspace((unsigned char)*end)) end++;
    if (*end || errno || v < 0 || (unsigned long long)v > SIZE_MAX / unit) {
        fprintf(stderr, "[mosaic] invalid value for %s: %s (keeping %zu)\n", name, s, *value);
        return false;
    }
    size_t val = (size_t)v * unit;
    if (val > MOSAIC_SIZE_MAX) val = MOSAIC_SIZE_MAX;  /* as large as GC.stat reports a size */
    if (val < lower_bound) {
        fprintf(stderr, "[mosaic] %s=%zu is ignored because it must be at least %zu (keeping %zu)\n",
                name, val, lower_bound, *value);
        return false;
    }
    if (echo_p(name)) fprintf(stderr, "%s=%zu (default value: %zu)\n", name, val, *value);
    *value = val;
    return true;
}

/* Reads a double within (lower, upper]; upper 0 means no upper bound. */
static bool
env_double(const char *name, double *value, double lower, double upper, bool accept_zero)
{
    const char *s = getenv(name);
    if (!s || !*s) return false;

    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || !isfinite(v)) {
        fprintf(stderr, "[mosaic] invalid value for %s: %s (keeping %f)\n", name, s, *value);
        return false;
    }
    if (!(accept_zero && v == 0.0)) {
        if (v <= lower || (upper != 0.0 && v > upper)) {
            char range[96];
            if (upper != 0.0) snprintf(range, sizeof(range), "(%f, %f]", lower, upper);
            else snprintf(range, sizeof(range), "(%f, inf)", lower);
            fprintf(stderr, "[mosaic] %s=%f is ignored because it must be %s%s (keeping %f)\n",
                    name, v, accept_zero ? "0 or in " : "in ", range, *value);
            return false;
        }
    }
    if (echo_p(name)) fprintf(stderr, "%s=%f (default value: %f)\n", name, v, *value);
    *value = v;
    return true;
}

/* The table's sizes, numbers and switches: a row for another build is reported and ignored. */
static void
option_not_built(const char *name, const char *needs)
{
    fprintf(stderr, "[mosaic] %s is ignored: it needs %s\n", name, needs);
}

static void
read_size(const char *name, size_t *field, size_t min, bool built, const char *needs)
{
    size_t v = *field;
    if (!env_size(name, &v, min)) return;
    if (built) *field = v;
    else option_not_built(name, needs);
}

static void
read_number(const char *name, double *field, double lower, double upper, bool zero_ok, bool built, const char *needs)
{
    double v = *field;
    if (!env_double(name, &v, lower, upper, zero_ok)) return;
    if (built) *field = v;
    else option_not_built(name, needs);
}

static void
read_switch(const char *name, bool *field, bool built, const char *needs)
{
    size_t v = *field;
    if (!env_size(name, &v, 0)) return;
    if (built) *field = v != 0;
    else option_not_built(name, needs);
}

/* The table's custom rows. */

/* name is "RUBY_GC_HEAP_<i>_INIT_SLOTS": one variable per size class, i from 0. */
static void
read_init_slots(const char *name, struct mosaic_params *params)
{
    const char *i_at = strstr(name, "<i>");
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        char key[64];
        snprintf(key, sizeof(key), "%.*s%d%s", (int)(i_at - name), name, i, i_at + 3);
        env_size(key, &params->heap_init_slots[i], 0);
    }
}

/* 0 means no ceiling; a ceiling below the minimum is taken as the minimum. */
static void
read_malloc_limit_max(const char *name, struct mosaic_params *params)
{
    env_size(name, &params->malloc_limit_max, 0);
    if (params->malloc_limit_max == 0) params->malloc_limit_max = MOSAIC_SIZE_MAX;
    if (params->malloc_limit_max < params->malloc_limit_min) params->malloc_limit_max = params->malloc_limit_min;
}

static void
read_oldmalloc_limit_max(const char *name, struct mosaic_params *params)
{
    env_size(name, &params->oldmalloc_limit_max, 0);
    if (params->oldmalloc_limit_max == 0) params->oldmalloc_limit_max = MOSAIC_SIZE_MAX;
    if (params->oldmalloc_limit_max < params->oldmalloc_limit_min) params->oldmalloc_limit_max = params->oldmalloc_limit_min;
}

static void
read_stress_races(const char *name, struct mosaic_params *params)
{
    size_t stress_races = 0;
    if (env_size(name, &stress_races, 0)) {
        if (stress_races > 100000) {
            fprintf(stderr, "[mosaic] %s=%zu is taken as 100000 (us)\n", name, stress_races);
            stress_races = 100000;
        }
        if (MOSAIC_CHECK) mosaic_stress_races_us = (unsigned int)stress_races;
        else if (stress_races) option_not_built(name, OPTION_NEEDS_CHECKING);
    }
}

static void
read_auto_compact(const char *name, struct mosaic_params *params)
{
    const char *policy = getenv(name);
    if (policy && *policy) {
        int found = -1;
        for (int i = 0; i < 3; i++) if (strcmp(policy, auto_compact_policies[i]) == 0) found = i;
        if (found < 0) {
            fprintf(stderr, "[mosaic] invalid value for %s: %s (off, fragmentation or always; keeping %s)\n",
                    name, policy, auto_compact_policies[params->auto_compact_policy]);
        }
        else {
            params->auto_compact_policy = found;
        }
    }
}

/* 0 turns the soft limit off; otherwise bytes, at least 1 MiB. */
static void
read_memory_limit(const char *name, struct mosaic_params *params)
{
    size_t limit = params->memory_limit;
    if (getenv(name) && strcmp(getenv(name), "0") == 0) params->memory_limit = 0;
    else if (env_size(name, &limit, MIB(1))) params->memory_limit = limit;
}

static void
read_gc_threads(const char *name, struct mosaic_params *params)
{
    size_t threads = params->gc_threads;
    if (env_size(name, &threads, 1)) {
        if (threads > 64) {
            fprintf(stderr, "[mosaic] %s=%zu is taken as 64\n", name, threads);
            threads = 64;
        }
        params->gc_threads = (unsigned int)threads;
    }
}

static void
read_background_sweep(const char *name, struct mosaic_params *params)
{
    /* On by default, with one CPU too: the thread does the sweeping the Ruby thread would do
     * lazily (no more of it), and frees the garbage's buffers right after the GC rather than
     * as allocation reaches their pages (docs/DESIGN.md, "Background sweeping"). */
    params->background_sweep = MOSAIC_BACKGROUND_SWEEP_DEFAULT;
    size_t background_sweep = params->background_sweep;
    if (env_size(name, &background_sweep, 0)) params->background_sweep = background_sweep != 0;
#if MOSAIC_SIZE_HISTOGRAM
    params->background_sweep = false;  /* the histogram's death counts are not thread-safe */
#endif
}

static void
read_verify(const char *name, struct mosaic_params *params)
{
    size_t verify = params->verify_after_gc;
    if (env_size(name, &verify, 0)) {
        if (verify > 1) fprintf(stderr, "[mosaic] %s=%zu is taken as 1 (on)\n", name, verify);
        params->verify_after_gc = verify != 0;
    }
}

/* Every row of the table, in its order (a row's bounds may be the value of a row above). */
void
mosaic_params_from_env(struct mosaic_params *params)
{
#define MOSAIC_OPTION_SIZE(name, field, def, min, build, key, doc) \
    read_size(name, &params->field, min, OPTION_BUILT_##build, OPTION_NEEDS_##build);
#define MOSAIC_OPTION_NUMBER(name, field, def, lower, upper, zero, build, key, doc) \
    read_number(name, &params->field, lower, upper, zero, OPTION_BUILT_##build, OPTION_NEEDS_##build);
#define MOSAIC_OPTION_SWITCH(name, field, def, build, key, doc) \
    read_switch(name, &params->field, OPTION_BUILT_##build, OPTION_NEEDS_##build);
#define MOSAIC_OPTION_CUSTOM(name, reader, def, accepts, build, key, doc) reader(name, params);
#define MOSAIC_OPTION_ELSEWHERE(name, file, def, accepts, build, key, doc)
#include "core/options.def"
#undef MOSAIC_OPTION_SIZE
#undef MOSAIC_OPTION_NUMBER
#undef MOSAIC_OPTION_SWITCH
#undef MOSAIC_OPTION_CUSTOM
#undef MOSAIC_OPTION_ELSEWHERE
    /* With only the upper GC-time bound set, below the lower one's default: the lower follows it
     * (an explicit lower bound above the upper was refused above). */
    if (params->gc_time_max > 0.0 && params->gc_time_min > params->gc_time_max) params->gc_time_min = params->gc_time_max;
}

/* ============================================================ GC.config */

#define SYM(name) ID2SYM(rb_intern_const(name))

VALUE
mosaic_config_get(mosaic_objspace_t *objspace)
{
    const struct mosaic_params *p = &objspace->params;
    VALUE hash = rb_hash_new();
    /* The default GC's key: false makes every collection a minor GC except GC.start. */
    rb_hash_aset(hash, SYM("rgengc_allow_full_mark"), RBOOL(p->allow_full_mark));
    rb_hash_aset(hash, SYM("heap_free_slots"), SIZET2NUM(p->heap_free_slots));
    rb_hash_aset(hash, SYM("heap_growth_factor"), DBL2NUM(p->growth_factor));
    rb_hash_aset(hash, SYM("heap_growth_max_slots"), SIZET2NUM(p->growth_max_slots));
    rb_hash_aset(hash, SYM("heap_free_slots_min_ratio"), DBL2NUM(p->free_slots_min_ratio));
    rb_hash_aset(hash, SYM("heap_free_slots_goal_ratio"), DBL2NUM(p->free_slots_goal_ratio));
    rb_hash_aset(hash, SYM("heap_free_slots_max_ratio"), DBL2NUM(p->free_slots_max_ratio));
    rb_hash_aset(hash, SYM("malloc_limit_min"), SIZET2NUM(p->malloc_limit_min));
    rb_hash_aset(hash, SYM("malloc_limit_max"), SIZET2NUM(p->malloc_limit_max));
    rb_hash_aset(hash, SYM("malloc_limit_growth_factor"), DBL2NUM(p->malloc_limit_growth_factor));
    rb_hash_aset(hash, SYM("verify_after_gc"), RBOOL(p->verify_after_gc));
    rb_hash_aset(hash, SYM("generational"), RBOOL(objspace->params.generational));
    rb_hash_aset(hash, SYM("oldobject_limit_factor"), DBL2NUM(p->oldobject_limit_factor));
    rb_hash_aset(hash, SYM("memory_limit"), p->memory_limit ? SIZET2NUM(p->memory_limit) : Qnil);
    rb_hash_aset(hash, SYM("gc_time_max"), DBL2NUM(p->gc_time_max));
    rb_hash_aset(hash, SYM("gc_time_min"), DBL2NUM(p->gc_time_min));
    rb_hash_aset(hash, SYM("auto_compact_policy"), SYM(auto_compact_policies[p->auto_compact_policy]));
    rb_hash_aset(hash, SYM("compact_occupancy"), DBL2NUM(p->compact_occupancy));
    rb_hash_aset(hash, SYM("compact_pause_fraction"), DBL2NUM(p->compact_pause_fraction));
    return hash;
}

/* Values GC.config takes: a value that is not a number raises TypeError (NUM2DBL, rb_to_int);
 * one out of range raises ArgumentError naming the key and the range. */
static double
config_double(VALUE key, VALUE value, double lower, bool lower_inclusive, double upper)
{
    double v = NUM2DBL(value);
    bool low_ok = lower_inclusive ? v >= lower : v > lower;
    if (!(low_ok && v <= upper && isfinite(v))) {
        rb_raise(rb_eArgError, "GC.config: %"PRIsVALUE" must be %s %g%s and finite, got %g", rb_sym2str(key),
                 lower_inclusive ? "at least" : "greater than", lower,
                 upper == 1.0 ? " and at most 1.0" : "", v);
    }
    return v;
}

/* A size: an Integer that is not negative; one above MOSAIC_SIZE_MAX is taken as that. */
static size_t
config_size(VALUE key, VALUE value)
{
    VALUE n = rb_to_int(value);
    if (FIXNUM_P(n) ? FIX2LONG(n) < 0 : RTEST(rb_funcall(n, rb_intern("negative?"), 0))) {
        rb_raise(rb_eArgError, "GC.config: %"PRIsVALUE" must not be negative, got %"PRIsVALUE,
                 rb_sym2str(key), n);
    }
    if (!FIXNUM_P(n)) return MOSAIC_SIZE_MAX;
    size_t v = (size_t)FIX2LONG(n);
    return v > MOSAIC_SIZE_MAX ? MOSAIC_SIZE_MAX : v;
}

struct config_update {
    struct mosaic_params next;       /* the settings as they will be if every key is good */
    bool malloc_max_given;
    bool gc_time_min_given;
};

static int
config_set_i(VALUE key, VALUE value, VALUE data)
{
    struct config_update *u = (struct config_update *)data;
    struct mosaic_params *p = &u->next;
    /* Keys must be Symbols: like the default GC, anything else raises TypeError. */
    ID id = rb_sym2id(key);

    if (id == rb_intern("rgengc_allow_full_mark")) {
        p->allow_full_mark = RTEST(value);
    }
    else if (id == rb_intern("oldobject_limit_factor")) {
        p->oldobject_limit_factor = config_double(key, value, 0.0, true, HUGE_VAL);
    }
    else if (id == rb_intern("heap_growth_factor")) {
        p->growth_factor = config_double(key, value, 1.0, false, HUGE_VAL);
    }
    else if (id == rb_intern("heap_growth_max_slots")) {
        p->growth_max_slots = config_size(key, value);
    }
    else if (id == rb_intern("heap_free_slots")) {
        p->heap_free_slots = config_size(key, value);
    }
    else if (id == rb_intern("heap_free_slots_min_ratio")) {
        p->free_slots_min_ratio = config_double(key, value, 0.0, true, 1.0);
    }
    else if (id == rb_intern("heap_free_slots_goal_ratio")) {
        p->free_slots_goal_ratio = config_double(key, value, 0.0, true, 1.0);
    }
    else if (id == rb_intern("heap_free_slots_max_ratio")) {
        p->free_slots_max_ratio = config_double(key, value, 0.0, true, 1.0);
    }
    else if (id == rb_intern("malloc_limit_min")) {
        p->malloc_limit_min = config_size(key, value);
    }
    else if (id == rb_intern("malloc_limit_max")) {
        p->malloc_limit_max = config_size(key, value);
        u->malloc_max_given = true;
    }
    else if (id == rb_intern("malloc_limit_growth_factor")) {
        p->malloc_limit_growth_factor = config_double(key, value, 1.0, true, HUGE_VAL);
    }
    else if (id == rb_intern("verify_after_gc")) {
        p->verify_after_gc = RTEST(value);
    }
    else if (id == rb_intern("memory_limit")) {
        /* nil, false or 0 turns the soft limit off; otherwise bytes, at least 1 MiB. */
        size_t limit = RTEST(value) ? config_size(key, value) : 0;
        if (limit != 0 && limit < ((size_t)1 << 20)) {
            rb_raise(rb_eArgError, "GC.config: memory_limit must be nil, 0 or at least 1 MiB (1048576), got %zu", limit);
        }
        p->memory_limit = limit;
    }
    else if (id == rb_intern("gc_time_max")) {
        p->gc_time_max = config_double(key, value, 0.0, true, 1.0);
    }
    else if (id == rb_intern("gc_time_min")) {
        p->gc_time_min = config_double(key, value, 0.0, true, 1.0);
        u->gc_time_min_given = true;
    }
    else if (id == rb_intern("auto_compact_policy")) {
        /* :off, :fragmentation or :always (a String is taken too); anything else raises. */
        VALUE name = SYMBOL_P(value) ? rb_sym2str(value) : RB_TYPE_P(value, T_STRING) ? value : Qnil;
        int found = -1;
        for (int i = 0; i < 3 && !NIL_P(name); i++) {
            if (RSTRING_LEN(name) == (long)strlen(auto_compact_policies[i]) &&
                memcmp(RSTRING_PTR(name), auto_compact_policies[i], RSTRING_LEN(name)) == 0) found = i;
        }
        if (found < 0) {
            rb_raise(rb_eArgError, "GC.config: auto_compact_policy must be :off, :fragmentation or :always, got %"PRIsVALUE,
                     rb_inspect(value));
        }
        p->auto_compact_policy = found;
    }
    else if (id == rb_intern("compact_occupancy")) {
        p->compact_occupancy = config_double(key, value, 0.0, true, 1.0);
    }
    else if (id == rb_intern("compact_pause_fraction")) {
        p->compact_pause_fraction = config_double(key, value, 0.0, true, HUGE_VAL);
    }
    /* Unknown keys are ignored, as the default GC does; GC.config then reports them as nil. */
    return ST_CONTINUE;
}

/* Constraints between keys are checked once, on the settings as a whole, so the outcome does
 * not depend on the order of the keys in the Hash. */
static void
config_check(struct config_update *u)
{
    struct mosaic_params *p = &u->next;
    if (p->free_slots_min_ratio > p->free_slots_max_ratio) {
        rb_raise(rb_eArgError, "GC.config: heap_free_slots_min_ratio (%g) must not exceed heap_free_slots_max_ratio (%g)",
                 p->free_slots_min_ratio, p->free_slots_max_ratio);
    }
    if (p->gc_time_max > 0.0 && p->gc_time_min > p->gc_time_max) {
        if (u->gc_time_min_given) {
            rb_raise(rb_eArgError, "GC.config: gc_time_min (%g) must not exceed gc_time_max (%g)",
                     p->gc_time_min, p->gc_time_max);
        }
        p->gc_time_min = p->gc_time_max;  /* lowering only the upper bound lowers the lower */
    }
    if (p->malloc_limit_max < p->malloc_limit_min) {
        if (u->malloc_max_given) {
            rb_raise(rb_eArgError, "GC.config: malloc_limit_max (%zu) must be at least malloc_limit_min (%zu)",
                     p->malloc_limit_max, p->malloc_limit_min);
        }
        p->malloc_limit_max = p->malloc_limit_min;  /* raising only the minimum lifts the maximum */
    }
}

/* Applies every key or none: the keys are applied to a copy of the settings, which replaces
 * them only when all keys are good; a bad key raises and changes nothing. */
void
mosaic_config_set(mosaic_objspace_t *objspace, VALUE hash)
{
    if (!RB_TYPE_P(hash, T_HASH)) rb_raise(rb_eArgError, "expected keyword arguments");
    struct config_update u = { objspace->params, false, false };
    rb_hash_foreach(hash, config_set_i, (VALUE)&u);
    config_check(&u);
    if (u.next.allow_full_mark != objspace->params.allow_full_mark) mosaic_gc_rest(objspace);
    if (u.next.memory_limit != objspace->params.memory_limit) objspace->pace.limit_set_aside = false;
    objspace->params = u.next;
}
