/*
 * cpus.c: how many CPUs this process may use, which sets how many GC threads it starts
 * (MOSAIC_GC_THREADS' default, config.c).
 *
 * Owns: the count (mosaic_usable_cpus): the CPUs online, bounded by the process's affinity
 * mask (taskset, a container's cpuset) and by the CPU bandwidth quota of its cgroup and of
 * every cgroup above it that its mount shows (cgroup v2's cpu.max; v1's cpu.cfs_quota_us over
 * cpu.cfs_period_us), rounded up to whole CPUs as Go's GOMAXPROCS does since 1.25. It is read
 * once, at boot, and never fails: a file it cannot read or parse bounds nothing.
 *
 * *Why*: threads beyond the CPUs a process may run on do not mark or sweep beside the Ruby
 * thread; they take turns with it, and under a quota they spend it: a container limited to one
 * CPU on a 64-core host started 8 GC threads, and the kernel throttles a process that used its
 * quota for the rest of the period (100 ms by default), a stall the program sees. The JVM
 * (active processor count) and Go read the same limits for the same reason.
 */
#define _GNU_SOURCE 1 /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cpus.h"

#define CGROUP_PATH_MAX 4096
#define CGROUP_LINE_MAX 8192

unsigned int
mosaic_cpus_from_quota(long long quota_us, long long period_us)
{
    if (quota_us <= 0 || period_us <= 0) return 0;
    long long cpus = quota_us / period_us + (quota_us % period_us != 0);
    return cpus > (long long)UINT_MAX ? UINT_MAX : (unsigned int)cpus;
}

unsigned int
mosaic_cpus_from_cpu_max(const char *text)
{
    char *end;
    errno = 0;
    long long quota = strtoll(text, &end, 10);
    if (end == text || errno) return 0;   /* "max", or nothing that parses */
    long long period = 100000;
    if (*end == ' ') {
        const char *p = end + 1;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno) return 0;
        period = v;
    }
    return mosaic_cpus_from_quota(quota, period);
}

/* Reads the first line of prefix + dir + "/" + name into buf; false if it cannot. */
static bool
read_first_line(const char *prefix, const char *dir, const char *name, char *buf, size_t size)
{
    char path[CGROUP_PATH_MAX * 2];
    int n = snprintf(path, sizeof(path), "%s%s/%s", prefix, dir, name);
    if (n < 0 || (size_t)n >= sizeof(path)) return false;
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    return ok;
}

/* The quota of the cgroup directory dir (a path under prefix), v2 or v1; 0 when none. */
static unsigned int
dir_limit(const char *prefix, const char *dir, bool v2)
{
    char line[128];
    if (v2) {
        return read_first_line(prefix, dir, "cpu.max", line, sizeof(line)) ? mosaic_cpus_from_cpu_max(line) : 0;
    }
    if (!read_first_line(prefix, dir, "cpu.cfs_quota_us", line, sizeof(line))) return 0;
    long long quota = strtoll(line, NULL, 10);
    if (!read_first_line(prefix, dir, "cpu.cfs_period_us", line, sizeof(line))) return 0;
    return mosaic_cpus_from_quota(quota, strtoll(line, NULL, 10));
}

/* Whether the comma-separated list has the item word. */
static bool
list_has(const char *list, const char *word)
{
    size_t len = strlen(word);
    for (const char *p = list; *p; ) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == len && strncmp(p, word, len) == 0) return true;
        if (!comma) break;
        p = comma + 1;
    }
    return false;
}

/* The tightest quota from the cgroup path (as /proc/self/cgroup gives it) up to the top of the
 * mount whose root (the cgroup shown at its mount point) and mount point mountinfo gives. */
static unsigned int
hierarchy_limit(const char *prefix, const char *path, const char *root, const char *point, bool v2)
{
    /* The process's cgroup below the mount's root; a cgroup outside it (a namespace that hides
     * the path) is read at the mount point only. */
    const char *below = "";
    size_t root_len = strlen(root);
    if (strcmp(root, "/") == 0) below = path;
    else if (strncmp(path, root, root_len) == 0 && (path[root_len] == '/' || path[root_len] == '\0')) below = path + root_len;
    char dir[CGROUP_PATH_MAX];
    int n = snprintf(dir, sizeof(dir), "%s%s", strcmp(point, "/") == 0 ? "" : point, below);
    if (n < 0 || (size_t)n >= sizeof(dir)) return 0;
    /* dir[0 .. top) is the mount point ("" for "/"); each step reads dir, then cuts its last
     * component, until the mount point itself has been read. */
    size_t top = strcmp(point, "/") == 0 ? 0 : strlen(point);
    size_t len = strlen(dir);
    unsigned int limit = 0;
    for (;;) {
        while (len > top && dir[len - 1] == '/') dir[--len] = '\0';
        unsigned int here = dir_limit(prefix, len ? dir : "/", v2);
        if (here && (!limit || here < limit)) limit = here;
        if (len <= top) break;
        char *slash = strrchr(dir + top, '/');
        if (!slash) break;
        *slash = '\0';
        len = (size_t)(slash - dir);
    }
    return limit;
}

/* Splits line at single spaces into at most max fields; returns how many. */
static int
split_fields(char *line, char **fields, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(line, " \n", &save); tok && n < max; tok = strtok_r(NULL, " \n", &save)) {
        fields[n++] = tok;
    }
    return n;
}

/* Decodes mountinfo's escapes in place: the kernel writes a space, tab, newline and backslash
 * in a path as a backslash and three octal digits (\040, \011, \012, \134). */
static void
unescape_octal(char *s)
{
    char *out = s;
    for (const char *in = s; *in;) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' && in[3] >= '0' && in[3] <= '7') {
            *out++ = (char)(((in[1] - '0') << 6) | ((in[2] - '0') << 3) | (in[3] - '0'));
            in += 4;
        }
        else {
            *out++ = *in++;
        }
    }
    *out = '\0';
}

unsigned int
mosaic_cpus_cgroup_limit(const char *prefix)
{
    char path[CGROUP_PATH_MAX * 2];
    char line[CGROUP_LINE_MAX];
    /* /proc/self/cgroup: "ID:CONTROLLERS:PATH"; v2's line is "0::PATH", v1's cpu hierarchy the
     * one whose controllers include "cpu" (the path may hold colons: split at the first two). */
    char v2_path[CGROUP_PATH_MAX] = "", v1_path[CGROUP_PATH_MAX] = "";
    bool have_v2 = false, have_v1 = false;
    snprintf(path, sizeof(path), "%s/proc/self/cgroup", prefix);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = '\0';
        const char *controllers = c1 + 1, *cg = c2 + 1;
        if (strlen(cg) >= CGROUP_PATH_MAX) continue;
        if (strcmp(line, "0") == 0 && *controllers == '\0') {
            strcpy(v2_path, cg);
            have_v2 = true;
        }
        else if (list_has(controllers, "cpu")) {
            strcpy(v1_path, cg);
            have_v1 = true;
        }
    }
    fclose(f);
    if (!have_v2 && !have_v1) return 0;

    /* /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE
     * SUPER_OPTIONS". The first mount of each kind is the one read. */
    snprintf(path, sizeof(path), "%s/proc/self/mountinfo", prefix);
    f = fopen(path, "r");
    if (!f) return 0;
    unsigned int limit = 0;
    bool done_v2 = !have_v2, done_v1 = !have_v1;
    while ((!done_v2 || !done_v1) && fgets(line, sizeof(line), f)) {
        char *fields[64];
        int n = split_fields(line, fields, 64);
        int dash = 6;
        while (dash < n && strcmp(fields[dash], "-") != 0) dash++;
        if (dash + 3 >= n) continue;
        const char *type = fields[dash + 1], *super = fields[dash + 3];
        bool v2 = !done_v2 && strcmp(type, "cgroup2") == 0;
        bool v1 = !done_v1 && strcmp(type, "cgroup") == 0 && list_has(super, "cpu");
        if (!v2 && !v1) continue;
        unescape_octal(fields[3]);   /* the root and the mount point; /proc/self/cgroup's path is not escaped */
        unescape_octal(fields[4]);
        unsigned int here = hierarchy_limit(prefix, v2 ? v2_path : v1_path, fields[3], fields[4], v2);
        if (here && (!limit || here < limit)) limit = here;
        if (v2) done_v2 = true;
        else done_v1 = true;
    }
    fclose(f);
    return limit;
}

unsigned int
mosaic_usable_cpus(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    cpu_set_t set;
    CPU_ZERO(&set);
    /* Fails past CPU_SETSIZE (1024) CPUs; the count online stands then. */
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        long allowed = CPU_COUNT(&set);
        if (allowed >= 1 && allowed < cpus) cpus = allowed;
    }
    unsigned int quota = mosaic_cpus_cgroup_limit("");
    if (quota && quota < cpus) cpus = quota;
    return (unsigned int)cpus;
}
