/*
 * test_cpus.c: unit tests of src/core/cpus.c, the count of CPUs the process may use that sets
 * how many GC threads Mosaic starts. Owns the checks of the quota arithmetic, of cpu.max's
 * text, and of the cgroup walk on made-up trees: cgroup v2 as a container sees it, a v2
 * hierarchy whose parent holds the tighter quota, v1 under Docker and under Kubernetes, a
 * hybrid system, cgroup files that are missing or garbled. Each tree is a temporary directory
 * holding proc/self/cgroup, proc/self/mountinfo and the cgroup files, which
 * mosaic_cpus_cgroup_limit reads under that prefix.
 *
 * cpus.c is compiled with the library's flags and linked alone; it calls no Ruby function.
 */
#define _GNU_SOURCE 1
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cpus.h"
#include "check.h"

static char tree[256];

/* Writes text to tree/rel, making the directories on the way. */
static void
put(const char *rel, const char *text)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", tree, rel);
    for (char *p = path + strlen(tree) + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        abort();
    }
    fputs(text, f);
    fclose(f);
}

static void
new_tree(void)
{
    snprintf(tree, sizeof(tree), "/tmp/mosaic-test-cpus-XXXXXX");
    if (!mkdtemp(tree)) {
        perror("mkdtemp");
        abort();
    }
}

static void
drop_tree(void)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tree);
    if (system(cmd) != 0) fprintf(stderr, "test_cpus: could not remove %s\n", tree);
}

#define CHECK_LIMIT(expected) CHECK_EQ(mosaic_cpus_cgroup_limit(tree), (expected))

static void
test_quota_arithmetic(void)
{
    CHECK_EQ(mosaic_cpus_from_quota(-1, 100000), 0);         /* v1: no quota */
    CHECK_EQ(mosaic_cpus_from_quota(0, 100000), 0);
    CHECK_EQ(mosaic_cpus_from_quota(100000, 0), 0);
    CHECK_EQ(mosaic_cpus_from_quota(100000, 100000), 1);
    CHECK_EQ(mosaic_cpus_from_quota(50000, 100000), 1);      /* half a CPU rounds up */
    CHECK_EQ(mosaic_cpus_from_quota(150000, 100000), 2);
    CHECK_EQ(mosaic_cpus_from_quota(200000, 100000), 2);
    CHECK_EQ(mosaic_cpus_from_quota(200001, 100000), 3);
    CHECK_EQ(mosaic_cpus_from_quota(LLONG_MAX, 1), UINT_MAX);
}

static void
test_cpu_max_text(void)
{
    CHECK_EQ(mosaic_cpus_from_cpu_max("max 100000\n"), 0);
    CHECK_EQ(mosaic_cpus_from_cpu_max("max\n"), 0);
    CHECK_EQ(mosaic_cpus_from_cpu_max("200000 100000\n"), 2);
    CHECK_EQ(mosaic_cpus_from_cpu_max("250000 100000\n"), 3);
    CHECK_EQ(mosaic_cpus_from_cpu_max("50000 50000\n"), 1);
    CHECK_EQ(mosaic_cpus_from_cpu_max("300000\n"), 3);         /* the default period */
    CHECK_EQ(mosaic_cpus_from_cpu_max(""), 0);
    CHECK_EQ(mosaic_cpus_from_cpu_max("junk\n"), 0);
    CHECK_EQ(mosaic_cpus_from_cpu_max("100000 junk\n"), 0);
}

static const char *const v2_mount =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

/* A container's view: its own cgroup is the root of the mount. */
static void
test_v2_container(void)
{
    new_tree();
    put("proc/self/cgroup", "0::/\n");
    put("proc/self/mountinfo", v2_mount);
    CHECK_LIMIT(0);                                   /* no cpu.max: no quota */
    put("sys/fs/cgroup/cpu.max", "max 100000\n");
    CHECK_LIMIT(0);
    put("sys/fs/cgroup/cpu.max", "200000 100000\n");
    CHECK_LIMIT(2);
    put("sys/fs/cgroup/cpu.max", "50000 100000\n");
    CHECK_LIMIT(1);
    drop_tree();
}

/* A process in a leaf whose parent holds the tighter quota, and the reverse. */
static void
test_v2_ancestors(void)
{
    new_tree();
    put("proc/self/cgroup", "0::/kubepods.slice/pod1/ctr\n");
    put("proc/self/mountinfo", v2_mount);
    put("sys/fs/cgroup/kubepods.slice/pod1/ctr/cpu.max", "max 100000\n");
    put("sys/fs/cgroup/kubepods.slice/pod1/cpu.max", "300000 100000\n");
    put("sys/fs/cgroup/kubepods.slice/cpu.max", "max 100000\n");
    CHECK_LIMIT(3);
    put("sys/fs/cgroup/kubepods.slice/pod1/ctr/cpu.max", "100000 100000\n");
    CHECK_LIMIT(1);
    put("sys/fs/cgroup/cpu.max", "800000 1000000\n");  /* the mount point is read too */
    put("sys/fs/cgroup/kubepods.slice/pod1/ctr/cpu.max", "max 100000\n");
    CHECK_LIMIT(1);
    drop_tree();
}

/* Optional fields before the separator, a cgroup path with a colon in it. */
static void
test_v2_parsing_edges(void)
{
    new_tree();
    put("proc/self/cgroup", "0::/a:b\n");
    put("proc/self/mountinfo",
        "30 22 0:26 / /sys/fs/cgroup rw shared:4 master:7 propagate_from:2 - cgroup2 cgroup2 rw\n");
    put("sys/fs/cgroup/a:b/cpu.max", "400000 100000\n");
    CHECK_LIMIT(4);
    drop_tree();
}

/* mountinfo escapes a space, a tab, a newline and a backslash in the root and the mount point
 * as three octal digits; /proc/self/cgroup does not. */
static void
test_mountinfo_escapes(void)
{
    new_tree();
    put("proc/self/cgroup", "0::/my app/x\\y/leaf\n");
    put("proc/self/mountinfo", "30 22 0:26 /my\\040app /sys/fs/cgroup/un\\134usual\\040place rw - cgroup2 cgroup2 rw\n");
    put("sys/fs/cgroup/un\\usual place/x\\y/leaf/cpu.max", "max 100000\n");
    put("sys/fs/cgroup/un\\usual place/x\\y/cpu.max", "250000 100000\n");
    CHECK_LIMIT(3);
    put("sys/fs/cgroup/un\\usual place/cpu.max", "100000 100000\n");
    CHECK_LIMIT(1);
    drop_tree();
}

/* cgroup v1 under Docker: the mount's root is the container's cgroup. */
static void
test_v1_docker(void)
{
    new_tree();
    put("proc/self/cgroup", "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n3:cpuset:/docker/abc\n");
    put("proc/self/mountinfo",
        "40 30 0:35 /docker/abc /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
        "41 30 0:36 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    CHECK_LIMIT(0);
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "150000\n");
    CHECK_LIMIT(2);
    /* cpuset's directory is not cpu's: a quota file there means nothing. */
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpuset/cpu.cfs_quota_us", "100000\n");
    put("sys/fs/cgroup/cpuset/cpu.cfs_period_us", "100000\n");
    CHECK_LIMIT(0);
    drop_tree();
}

/* cgroup v1 with the host's hierarchy visible: the pod's quota, above the container's. */
static void
test_v1_ancestors(void)
{
    new_tree();
    put("proc/self/cgroup", "2:cpuacct,cpu:/kubepods/pod1/ctr\n");
    put("proc/self/mountinfo", "41 30 0:36 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpuacct,cpu\n");
    put("sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/ctr/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/ctr/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_quota_us", "200000\n");
    put("sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_period_us", "100000\n");
    CHECK_LIMIT(2);
    drop_tree();
}

/* A hybrid system: the unified hierarchy without the cpu controller, cpu under v1. */
static void
test_hybrid(void)
{
    new_tree();
    put("proc/self/cgroup", "0::/user.slice\n2:cpu,cpuacct:/\n");
    put("proc/self/mountinfo",
        "30 22 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
        "41 30 0:36 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    CHECK_LIMIT(1);
    drop_tree();
}

/* Nothing readable, or nothing that parses: no bound. */
static void
test_missing_and_garbled(void)
{
    new_tree();
    CHECK_LIMIT(0);                                       /* no proc/self/cgroup */
    put("proc/self/cgroup", "0::/\n");
    CHECK_LIMIT(0);                                       /* no mountinfo */
    put("proc/self/mountinfo", "garbage\n\n30 22 0:26 / /sys/fs/cgroup rw\n");
    put("sys/fs/cgroup/cpu.max", "100000 100000\n");
    CHECK_LIMIT(0);                                       /* no separator, no type */
    put("proc/self/cgroup", "no colons here\n");
    put("proc/self/mountinfo", v2_mount);
    CHECK_LIMIT(0);
    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/cpu.max", "banana\n");
    CHECK_LIMIT(0);
    drop_tree();
}

static void
test_usable_cpus(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned int cpus = mosaic_usable_cpus();
    CHECK(cpus >= 1);
    CHECK(online < 1 || cpus <= (unsigned long)online);
}

int
main(void)
{
    RUN(test_quota_arithmetic);
    RUN(test_cpu_max_text);
    RUN(test_v2_container);
    RUN(test_v2_ancestors);
    RUN(test_v2_parsing_edges);
    RUN(test_mountinfo_escapes);
    RUN(test_v1_docker);
    RUN(test_v1_ancestors);
    RUN(test_hybrid);
    RUN(test_missing_and_garbled);
    RUN(test_usable_cpus);
    return check_summary(__FILE__);
}
