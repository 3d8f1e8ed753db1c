/*
 * test_weak_index.c: unit tests of src/collect/weak_index.c, the open-addressing table from a
 * weak slot's address to its position in the weak list. Owns the checks of insert, remove,
 * build and reset against a reference model, tombstones (probe chains that survive a removal,
 * their reuse), growth, a table that may not grow (out of memory), and the table's invariants
 * read from its struct.
 *
 * weak_index.c is compiled with the library's flags and include paths (Ruby's headers) and
 * linked alone into this binary: no libruby, no Ruby process. It calls no Ruby function (a
 * table that cannot grow is reported to the caller); rb_bug is defined here to fail the test
 * loudly should that change.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/mosaic.h"
#include "check.h"

/* The one Ruby function weak_index.c may call. Reaching it is a failure of the test run. */
void
rb_bug(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "test_weak_index: rb_bug called: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

#define TOMBSTONE ((VALUE *)1)

/* Slot-like addresses: 8-aligned, 40 bytes apart from a page-aligned base, never dereferenced
 * (neither the table nor these tests read through them). */
static VALUE *
slot(size_t k)
{
    return (VALUE *)(uintptr_t)(0x7f3a5c000000ull + 40 * (uint64_t)k);
}

/* --------------------------------------------------------------- invariants */

/* The table's struct as weak_index.c promises it: capa 0 or a power of two, count live
 * entries, used = live + tombstones, at most half full. Returns false (and checks fail) when
 * it is not. */
static bool
index_consistent(const struct mosaic_weak_index *index)
{
    size_t live = 0, tombs = 0;
    for (size_t i = 0; i < index->capa; i++) {
        if (index->entries[i].ptr == TOMBSTONE) tombs++;
        else if (index->entries[i].ptr) live++;
    }
    bool ok = true;
    ok &= CHECKF(index->capa == 0 || (index->capa & (index->capa - 1)) == 0, "capa %zu", index->capa);
    ok &= CHECKF(live == index->count, "%zu live entries, count %zu", live, index->count);
    ok &= CHECKF(live + tombs == index->used, "%zu live + %zu tombstones, used %zu", live, tombs, index->used);
    ok &= CHECKF(index->used * 2 <= index->capa, "used %zu of %zu", index->used, index->capa);
    return ok;
}

/* The position the table holds for ptr, read from its entries; SIZE_MAX when absent, and a
 * failed check when it holds ptr more than once. */
static size_t
entry_pos(const struct mosaic_weak_index *index, VALUE *ptr)
{
    size_t pos = SIZE_MAX, seen = 0;
    for (size_t i = 0; i < index->capa; i++) {
        if (index->entries[i].ptr == ptr) {
            pos = index->entries[i].pos;
            seen++;
        }
    }
    CHECKF(seen <= 1, "a slot held %zu times", seen);
    return pos;
}

/* The entry slot_hash puts ptr at first in a table of capa entries: a copy of weak_index.c's
 * hash, used only to pick addresses that collide. If the hash changes, those tests still pass;
 * they only collide less (test_collisions_share_one_chain checks that they do collide). */
static size_t
hash_of(VALUE *ptr, size_t capa)
{
    return (size_t)((((uintptr_t)ptr >> 3) * 0x9E3779B97F4A7C15ull) >> 17) & (capa - 1);
}

static size_t
entry_index(const struct mosaic_weak_index *index, VALUE *ptr)
{
    for (size_t i = 0; i < index->capa; i++) {
        if (index->entries[i].ptr == ptr) return i;
    }
    return SIZE_MAX;
}

/* Inserts with no limit: true when added, false when ptr was there (the table cannot run out
 * of memory here short of calloc failing, which the checks would report). */
static bool
ins(struct mosaic_weak_index *index, VALUE *ptr, size_t pos)
{
    enum mosaic_weak_add added = mosaic_weak_index_insert(index, ptr, pos, 0);
    CHECKF(added != MOSAIC_WEAK_NO_MEMORY, "no memory at %zu entries", index->count);
    return added == MOSAIC_WEAK_ADDED;
}

/* ------------------------------------------------------------------- tests */

static void
test_empty_index(void)
{
    struct mosaic_weak_index index = { 0 };
    size_t pos = 12345;
    CHECK(!mosaic_weak_index_remove(&index, slot(1), &pos));
    CHECK_EQ(pos, 12345);
    CHECK(index.entries == NULL);
    CHECK(index_consistent(&index));
    mosaic_weak_index_reset(&index);
    CHECK(index.entries == NULL && index.capa == 0 && !index.built);
}

static void
test_insert_remove_reinsert(void)
{
    struct mosaic_weak_index index = { 0 };
    VALUE *p = slot(7), *q = slot(8);
    size_t pos = 0;

    CHECK(ins(&index, p, 5));
    CHECK_EQ(index.count, 1);
    CHECK_EQ(index.capa, 64);
    /* A second registration of the same slot: refused, the first position kept. */
    CHECK(!ins(&index, p, 7));
    CHECK_EQ(index.count, 1);
    CHECK_EQ(entry_pos(&index, p), 5);

    /* An absent slot: not removed, pos untouched. */
    pos = 999;
    CHECK(!mosaic_weak_index_remove(&index, q, &pos));
    CHECK_EQ(pos, 999);

    CHECK(mosaic_weak_index_remove(&index, p, &pos));
    CHECK_EQ(pos, 5);
    CHECK_EQ(index.count, 0);
    CHECK_EQ(index.used, 1);                  /* its entry is a tombstone now */
    CHECK(!mosaic_weak_index_remove(&index, p, &pos));
    CHECK(index_consistent(&index));

    /* Reinserted at another position: the tombstone is reused, nothing else taken. */
    CHECK(ins(&index, p, 9));
    CHECK_EQ(index.count, 1);
    CHECK_EQ(index.used, 1);
    CHECK(mosaic_weak_index_remove(&index, p, &pos));
    CHECK_EQ(pos, 9);
    CHECK(index_consistent(&index));
    mosaic_weak_index_reset(&index);
}

/* Slots that hash to one entry near the end of the table form one probe chain, wrapping past
 * the last entry. A removal in the middle leaves a tombstone that later probes step over (the
 * slots after it are still found), an insert of a new slot reuses it, and an insert of a slot
 * further down the chain is still refused as a duplicate (the probe goes on past the
 * tombstone before deciding it is absent). */
static void
test_collisions_share_one_chain(void)
{
    enum { N = 20 };
    const size_t capa = 64, home = 60;
    VALUE *chain[N + 1];
    size_t found = 0;
    for (size_t k = 0; found < N + 1 && k < 10000000; k++) {
        if (hash_of(slot(k), capa) == home) chain[found++] = slot(k);
    }
    if (!CHECK_EQ(found, N + 1)) return;

    struct mosaic_weak_index index = { 0 };
    for (size_t i = 0; i < N; i++) CHECK(ins(&index, chain[i], 100 + i));
    if (!CHECK_EQ(index.capa, capa)) goto done;   /* the positions below assume no resize */
    for (size_t i = 0; i < N; i++) CHECKF(entry_index(&index, chain[i]) == (home + i) % capa, "chain member %zu", i);

    size_t pos;
    CHECK(mosaic_weak_index_remove(&index, chain[2], &pos));
    CHECK_EQ(pos, 102);
    CHECK(index.entries[home + 2].ptr == TOMBSTONE);
    /* Past the tombstone, and past the end of the table. */
    CHECK(mosaic_weak_index_remove(&index, chain[10], &pos));
    CHECK_EQ(pos, 110);
    CHECK(!ins(&index, chain[15], 0));
    CHECK_EQ(entry_pos(&index, chain[15]), 115);
    /* A new member takes the first tombstone of its chain. */
    CHECK(ins(&index, chain[N], 200));
    CHECK_EQ(entry_index(&index, chain[N]), home + 2);
    for (size_t i = 0; i < N; i++) {
        if (i == 2 || i == 10) continue;
        CHECKF(mosaic_weak_index_remove(&index, chain[i], &pos) && pos == 100 + i, "chain member %zu", i);
    }
    CHECK(mosaic_weak_index_remove(&index, chain[N], &pos));
    CHECK_EQ(pos, 200);
    CHECK_EQ(index.count, 0);
    CHECK(index_consistent(&index));
done:
    mosaic_weak_index_reset(&index);
}

/* Many slots: the table grows (a power of two, at most half full), keeps every position, and
 * gives each back once, in any order. */
static void
test_growth_many_entries(void)
{
    enum { N = 100000 };
    struct mosaic_weak_index index = { 0 };
    size_t capa_seen = 0;
    bool grew_in_order = true;
    for (size_t i = 0; i < N; i++) {
        if (!ins(&index, slot(i), i)) {
            CHECKF(false, "insert %zu refused", i);
            break;
        }
        if (index.capa < capa_seen) grew_in_order = false;
        capa_seen = index.capa;
    }
    CHECK(grew_in_order);
    CHECK_EQ(index.count, N);
    CHECK_OP(index.capa, >=, 2 * N);
    CHECK_OP(index.capa, <=, 8 * (size_t)N);
    CHECK(index_consistent(&index));

    /* Every third one, then the rest backwards. */
    size_t pos, wrong = 0;
    for (size_t i = 0; i < N; i += 3) {
        if (!mosaic_weak_index_remove(&index, slot(i), &pos) || pos != i) wrong++;
    }
    CHECK_EQ(wrong, 0);
    for (size_t i = 0; i < N; i += 3) {
        if (mosaic_weak_index_remove(&index, slot(i), &pos)) wrong++;   /* removed already */
    }
    CHECK_EQ(wrong, 0);
    CHECK(index_consistent(&index));
    for (size_t i = N; i-- > 0;) {
        if (i % 3 == 0) continue;
        if (!mosaic_weak_index_remove(&index, slot(i), &pos) || pos != i) wrong++;
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(index.count, 0);
    CHECK(index_consistent(&index));
    mosaic_weak_index_reset(&index);
}

/* Tombstones do not grow the table: a million slots inserted and removed one at a time keep
 * the first 64 entries (the table is rebuilt in place once half of it is tombstones), and a
 * steady population of 1000 with churn stays within the capacity 1000 needs. */
static void
test_tombstones_do_not_grow_the_table(void)
{
    struct mosaic_weak_index index = { 0 };
    size_t pos, wrong = 0, max_capa = 0;
    for (size_t i = 0; i < 1000000; i++) {
        if (!ins(&index, slot(i), i)) wrong++;
        if (!mosaic_weak_index_remove(&index, slot(i), &pos) || pos != i) wrong++;
        if (index.capa > max_capa) max_capa = index.capa;
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(max_capa, 64);
    CHECK(index_consistent(&index));
    mosaic_weak_index_reset(&index);

    enum { POP = 1000 };
    for (size_t i = 0; i < POP; i++) ins(&index, slot(i), i);
    max_capa = 0;
    for (size_t i = POP; i < 500000; i++) {
        if (!mosaic_weak_index_remove(&index, slot(i - POP), &pos) || pos != i - POP) wrong++;
        if (!ins(&index, slot(i), i)) wrong++;
        if (index.capa > max_capa) max_capa = index.capa;
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(index.count, POP);
    CHECK_OP(max_capa, <=, 8 * POP);
    CHECK(index_consistent(&index));
    mosaic_weak_index_reset(&index);
}

/* Random inserts and removals over 4096 slots against a model (position per slot, or none):
 * every answer and every position agrees, and the invariants hold throughout. */
static void
test_random_against_model(void)
{
    enum { K = 4096, OPS = 400000 };
    static size_t model[K];
    for (size_t k = 0; k < K; k++) model[k] = SIZE_MAX;
    size_t in_model = 0, disagree = 0;
    struct mosaic_weak_index index = { 0 };
    uint64_t x = 0x243F6A8885A308D3ull;
    for (size_t op = 0; op < OPS; op++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t k = (x >> 8) % K;
        /* Phases of mostly inserts and mostly removals, so the count sweeps up and down. */
        bool insert = ((op / 50000) % 2 == 0) ? (x & 7) < 6 : (x & 7) < 2;
        if (insert) {
            bool added = ins(&index, slot(k), op);
            if (added != (model[k] == SIZE_MAX)) disagree++;
            if (added) {
                model[k] = op;
                in_model++;
            }
        }
        else {
            size_t pos = SIZE_MAX;
            bool removed = mosaic_weak_index_remove(&index, slot(k), &pos);
            if (removed != (model[k] != SIZE_MAX) || (removed && pos != model[k])) disagree++;
            if (removed) {
                model[k] = SIZE_MAX;
                in_model--;
            }
        }
        if (index.count != in_model) disagree++;
        if (op % 5000 == 0) {
            CHECK(index_consistent(&index));
            /* Every entry is a slot of the model, at its position, once; as many as the model
             * holds. */
            static bool seen[K];
            memset(seen, 0, sizeof(seen));
            size_t wrong = 0, live = 0;
            for (size_t i = 0; i < index.capa; i++) {
                VALUE *ptr = index.entries[i].ptr;
                if (!ptr || ptr == TOMBSTONE) continue;
                size_t j = (size_t)((uintptr_t)ptr - (uintptr_t)slot(0)) / 40;
                live++;
                if (j >= K || slot(j) != ptr || seen[j] || model[j] != index.entries[i].pos) wrong++;
                else seen[j] = true;
            }
            CHECKF(wrong == 0 && live == in_model, "op %zu: %zu entries wrong, %zu live, %zu in the model",
                   op, wrong, live, in_model);
        }
    }
    CHECKF(disagree == 0, "%zu answers differ from the model", disagree);
    CHECK(index_consistent(&index));
    mosaic_weak_index_reset(&index);
}

/* build: every non-NULL registration of the list goes in at its position; a second
 * registration of a slot is dropped from the list (set to NULL), so a removal drops every
 * registration of its slot. Then the list grows as mark.c's weak_list_add does it. */
static void
test_build_drops_duplicates(void)
{
    VALUE *a = slot(1), *b = slot(2), *c = slot(3), *d = slot(4), *e = slot(5);
    void *items[] = { a, b, NULL, a, c, b, d, a, NULL };
    const size_t n = sizeof(items) / sizeof(items[0]);
    struct mosaic_ptr_vec list = { items, n, n };
    struct mosaic_weak_index index = { 0 };

    CHECK(mosaic_weak_index_build(&index, &list, 0));
    CHECK(index.built);
    CHECK_EQ(index.count, 4);
    void *want[] = { a, b, NULL, NULL, c, NULL, d, NULL, NULL };
    for (size_t i = 0; i < n; i++) CHECKF(list.items[i] == want[i], "list item %zu", i);
    CHECK_EQ(entry_pos(&index, a), 0);
    CHECK_EQ(entry_pos(&index, b), 1);
    CHECK_EQ(entry_pos(&index, c), 4);
    CHECK_EQ(entry_pos(&index, d), 6);
    CHECK(index_consistent(&index));

    /* mark.c: a slot already there is not pushed; a new one goes in at the list's end. */
    CHECK(!ins(&index, c, list.size));
    CHECK(ins(&index, e, list.size));
    size_t pos;
    CHECK(mosaic_weak_index_remove(&index, e, &pos));
    CHECK_EQ(pos, n);
    CHECK(mosaic_weak_index_remove(&index, b, &pos));
    CHECK_EQ(pos, 1);
    CHECK(!mosaic_weak_index_remove(&index, b, &pos));

    /* reset: empty, unbuilt, no memory held (ASan's leak check), usable again. */
    mosaic_weak_index_reset(&index);
    CHECK(index.entries == NULL && index.capa == 0 && index.count == 0 && index.used == 0 && !index.built);
    CHECK(!mosaic_weak_index_remove(&index, a, &pos));
    CHECK(ins(&index, a, 3));
    CHECK(mosaic_weak_index_remove(&index, a, &pos));
    CHECK_EQ(pos, 3);
    mosaic_weak_index_reset(&index);

    /* An empty list builds an empty index. */
    struct mosaic_ptr_vec empty = { NULL, 0, 0 };
    CHECK(mosaic_weak_index_build(&index, &empty, 0));
    CHECK(index.built);
    CHECK_EQ(index.count, 0);
    CHECK(!mosaic_weak_index_remove(&index, a, &pos));
    mosaic_weak_index_reset(&index);
}

/* A large list with every slot registered twice: build keeps the first of each. */
static void
test_build_large_list(void)
{
    enum { N = 50000 };
    void **items = malloc(2 * N * sizeof(void *));
    if (!CHECK(items != NULL)) return;
    for (size_t i = 0; i < N; i++) {
        items[i] = slot(i);
        items[N + i] = slot(N - 1 - i);
    }
    struct mosaic_ptr_vec list = { items, 2 * N, 2 * N };
    struct mosaic_weak_index index = { 0 };
    CHECK(mosaic_weak_index_build(&index, &list, 0));
    CHECK_EQ(index.count, N);
    size_t kept = 0, dropped = 0, pos, wrong = 0;
    for (size_t i = 0; i < 2 * N; i++) {
        if (i < N && list.items[i] == slot(i)) kept++;
        if (i >= N && list.items[i] == NULL) dropped++;
    }
    CHECK_EQ(kept, N);
    CHECK_EQ(dropped, N);
    for (size_t i = 0; i < N; i++) {
        if (!mosaic_weak_index_remove(&index, slot(i), &pos) || pos != i) wrong++;
    }
    CHECK_EQ(wrong, 0);
    CHECK(index_consistent(&index));
    mosaic_weak_index_reset(&index);
    free(items);
}

/* A table that may not grow past `limit` entries' worth (the checking build's
 * MOSAIC_STRESS_MARK_MEMORY, or calloc failing): the insert that would need a larger table
 * reports MOSAIC_WEAK_NO_MEMORY and changes nothing; what it held is still found, at its
 * position, and removals and inserts that fit still work. */
static void
test_insert_past_the_limit_changes_nothing(void)
{
    enum { LIMIT = 64 };
    struct mosaic_weak_index index = { 0 };
    size_t n = 0;
    enum mosaic_weak_add added;
    while ((added = mosaic_weak_index_insert(&index, slot(n), n, LIMIT)) == MOSAIC_WEAK_ADDED) n++;
    CHECK_EQ(added, MOSAIC_WEAK_NO_MEMORY);
    CHECK(n > 0 && index.capa <= LIMIT);
    CHECK_EQ(index.count, n);
    CHECK_EQ(entry_pos(&index, slot(n)), SIZE_MAX);
    CHECK(index_consistent(&index));
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += entry_pos(&index, slot(i)) != i;
    CHECK_EQ(wrong, 0);
    /* A slot already there is found as such, not refused for memory. */
    CHECK_EQ(mosaic_weak_index_insert(&index, slot(0), 99, LIMIT), MOSAIC_WEAK_PRESENT);
    size_t pos;
    CHECK(mosaic_weak_index_remove(&index, slot(1), &pos) && pos == 1);
    CHECK(index_consistent(&index));
    mosaic_weak_index_reset(&index);
}

/* A list longer than the limit: build reports false and leaves the table empty and unbuilt, so
 * the caller scans the list (mark.c); the list loses nothing but second registrations. */
static void
test_build_past_the_limit_leaves_it_unbuilt(void)
{
    enum { N = 200, LIMIT = 64 };
    void *items[N];
    for (size_t i = 0; i < N; i++) items[i] = slot(i % 150);   /* 50 second registrations */
    struct mosaic_ptr_vec list = { items, N, N };
    struct mosaic_weak_index index = { 0 };
    CHECK(!mosaic_weak_index_build(&index, &list, LIMIT));
    CHECK(!index.built && index.entries == NULL && index.capa == 0 && index.count == 0 && index.used == 0);
    size_t kept = 0;
    for (size_t i = 0; i < 150; i++) kept += list.items[i] == slot(i);
    CHECK_EQ(kept, 150);
    /* With room, the same list builds. */
    CHECK(mosaic_weak_index_build(&index, &list, 0));
    CHECK_EQ(index.count, 150);
    CHECK(index_consistent(&index));
    mosaic_weak_index_reset(&index);
}

int
main(void)
{
    RUN(test_empty_index);
    RUN(test_insert_remove_reinsert);
    RUN(test_collisions_share_one_chain);
    RUN(test_growth_many_entries);
    RUN(test_tombstones_do_not_grow_the_table);
    RUN(test_random_against_model);
    RUN(test_build_drops_duplicates);
    RUN(test_insert_past_the_limit_changes_nothing);
    RUN(test_build_past_the_limit_leaves_it_unbuilt);
    RUN(test_build_large_list);
    return check_summary("test/c/test_weak_index.c");
}
