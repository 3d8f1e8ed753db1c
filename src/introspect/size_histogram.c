/*
 * size_histogram.c: what Ruby asks for, measured (issue 9, "Size classes chosen by
 * measurement"). Only in the histogram variant (make HISTOGRAM=1, MOSAIC_SIZE_HISTOGRAM=1);
 * in every other build this file compiles to nothing and the hooks in alloc.c and sweep.c
 * are absent.
 *
 * Owns: two per-type histograms and their report.
 *  - alloc: the alloc_size CRuby passes to rb_gc_impl_new_obj, by the new object's type
 *    (flags & T_MASK), recorded by mosaic_new_obj;
 *  - death: rb_gc_obj_optimal_size(obj) of each object the sweep frees, by type, taken just
 *    before rb_gc_obj_free (the object is still whole), plus the slot size it occupied.
 * Buckets are 8 bytes wide: bucket b (1..80) holds sizes in (8b - 8, 8b], bucket 0 holds
 * size 0 (rb_gc_obj_optimal_size answers 0 for types it has no opinion on), and the last
 * bucket holds everything above 640. Each bucket keeps a count and the exact byte sum, so
 * rounding waste under any table of 8-byte-multiple slot sizes is exact:
 * count * slot(8b) - bytes.
 *
 * The report: at VM shutdown (finalize.c) the histograms go, as JSON, to the file named by
 * MOSAIC_SIZE_HISTOGRAM_OUT (nothing is written when it is unset). A forked child inherits
 * its parent's counts, so it writes to "<file>.<pid>" instead of overwriting the parent's.
 * Objects still alive at exit never die, so they appear only in the alloc histogram.
 *
 * Invariants: counters are updated with relaxed atomic adds (several Ractors may allocate at
 * once); nothing here allocates a Ruby object.
 */
#include "core/mosaic.h"

#if MOSAIC_SIZE_HISTOGRAM

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define TYPES        (RUBY_T_MASK + 1)
#define LAST_SMALL   80                 /* bucket 80 ends at 640 bytes */
#define BUCKETS      (LAST_SMALL + 2)   /* 0, 1..80, and > 640 */

struct histogram {
    uint64_t count[TYPES][BUCKETS];
    uint64_t bytes[TYPES][BUCKETS];
};

static struct histogram alloc_hist, death_hist;
/* Deaths by type and the size class the object occupied. */
static uint64_t death_slot[TYPES][MOSAIC_HEAP_MAX];
static pid_t parent_pid;
static bool written;

__attribute__((constructor)) static void
remember_pid(void)
{
    parent_pid = getpid();
}

static inline size_t
bucket_of(size_t size)
{
    size_t b = (size + 7) / 8;
    return b <= LAST_SMALL ? b : LAST_SMALL + 1;
}

static inline void
record(struct histogram *h, unsigned int type, size_t size)
{
    size_t b = bucket_of(size);
    __atomic_fetch_add(&h->count[type][b], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h->bytes[type][b], size, __ATOMIC_RELAXED);
}

void
mosaic_size_histogram_alloc(VALUE flags, size_t alloc_size)
{
    record(&alloc_hist, (unsigned int)(flags & RUBY_T_MASK), alloc_size);
}

void
mosaic_size_histogram_death(VALUE obj)
{
    unsigned int type = RB_BUILTIN_TYPE(obj);
    record(&death_hist, type, rb_gc_obj_optimal_size(obj));
    size_t slot_size = mosaic_page_of(obj)->heap->slot_size;
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
        if (mosaic_heap_sizes[i] == slot_size) {
            __atomic_fetch_add(&death_slot[type][i], 1, __ATOMIC_RELAXED);
            break;
        }
    }
}

static const char *
type_name(unsigned int type)
{
    switch (type) {
      case RUBY_T_NONE: return "T_NONE";
      case RUBY_T_OBJECT: return "T_OBJECT";
      case RUBY_T_CLASS: return "T_CLASS";
      case RUBY_T_MODULE: return "T_MODULE";
      case RUBY_T_FLOAT: return "T_FLOAT";
      case RUBY_T_STRING: return "T_STRING";
      case RUBY_T_REGEXP: return "T_REGEXP";
      case RUBY_T_ARRAY: return "T_ARRAY";
      case RUBY_T_HASH: return "T_HASH";
      case RUBY_T_STRUCT: return "T_STRUCT";
      case RUBY_T_BIGNUM: return "T_BIGNUM";
      case RUBY_T_FILE: return "T_FILE";
      case RUBY_T_DATA: return "T_DATA";
      case RUBY_T_MATCH: return "T_MATCH";
      case RUBY_T_COMPLEX: return "T_COMPLEX";
      case RUBY_T_RATIONAL: return "T_RATIONAL";
      case RUBY_T_NIL: return "T_NIL";
      case RUBY_T_TRUE: return "T_TRUE";
      case RUBY_T_FALSE: return "T_FALSE";
      case RUBY_T_SYMBOL: return "T_SYMBOL";
      case RUBY_T_FIXNUM: return "T_FIXNUM";
      case RUBY_T_UNDEF: return "T_UNDEF";
      case RUBY_T_IMEMO: return "T_IMEMO";
      case RUBY_T_NODE: return "T_NODE";
      case RUBY_T_ICLASS: return "T_ICLASS";
      case RUBY_T_ZOMBIE: return "T_ZOMBIE";
      case RUBY_T_MOVED: return "T_MOVED";
      default: return "T_UNKNOWN";
    }
}

/* One histogram as {"T_STRING": {"total": N, "buckets": [[upper, count, bytes], ...]}, ...};
 * upper is the bucket's largest size (0 for size 0, -1 for "above 640"); empty buckets and
 * types are left out. */
static void
write_histogram(FILE *f, const struct histogram *h, const char *key)
{
    fprintf(f, "  \"%s\": {", key);
    bool first_type = true;
    for (unsigned int t = 0; t < TYPES; t++) {
        uint64_t total = 0;
        for (size_t b = 0; b < BUCKETS; b++) total += h->count[t][b];
        if (!total) continue;
        fprintf(f, "%s\n    \"%s\": {\"total\": %llu, \"buckets\": [", first_type ? "" : ",",
                type_name(t), (unsigned long long)total);
        first_type = false;
        bool first = true;
        for (size_t b = 0; b < BUCKETS; b++) {
            if (!h->count[t][b]) continue;
            long upper = b <= LAST_SMALL ? (long)(b * 8) : -1;
            fprintf(f, "%s[%ld, %llu, %llu]", first ? "" : ", ", upper,
                    (unsigned long long)h->count[t][b], (unsigned long long)h->bytes[t][b]);
            first = false;
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n  }");
}

/* At VM shutdown: the JSON report, once per process. */
void
mosaic_size_histogram_write(void)
{
    const char *out = getenv("MOSAIC_SIZE_HISTOGRAM_OUT");
    if (written || !out || !*out) return;
    written = true;

    char path[4096];
    pid_t pid = getpid();
    if (pid != parent_pid) snprintf(path, sizeof(path), "%s.%ld", out, (long)pid);
    else snprintf(path, sizeof(path), "%s", out);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "[mosaic] size histogram: cannot write %s\n", path);
        return;
    }
    fprintf(f, "{\n  \"format\": \"mosaic-size-histogram-1\",\n  \"pid\": %ld,\n  \"bucket_width\": 8,\n",
            (long)pid);
    fprintf(f, "  \"slot_sizes\": [");
    for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) fprintf(f, "%s%zu", i ? ", " : "", mosaic_heap_sizes[i]);
    fprintf(f, "],\n");
    write_histogram(f, &alloc_hist, "alloc");
    fprintf(f, ",\n");
    write_histogram(f, &death_hist, "death_optimal");
    fprintf(f, ",\n  \"death_slot\": {");
    bool first_type = true;
    for (unsigned int t = 0; t < TYPES; t++) {
        uint64_t total = 0;
        for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) total += death_slot[t][i];
        if (!total) continue;
        fprintf(f, "%s\n    \"%s\": [", first_type ? "" : ",", type_name(t));
        first_type = false;
        for (int i = 0; i < MOSAIC_HEAP_COUNT; i++) {
            fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)death_slot[t][i]);
        }
        fprintf(f, "]");
    }
    fprintf(f, "\n  }\n}\n");
    fclose(f);
}

#endif /* MOSAIC_SIZE_HISTOGRAM */
