/*
 * cpus.h: how many CPUs this process may use (cpus.c), which sets how many GC threads Mosaic
 * starts by default. Plain C, no Ruby header: the C unit tests (test/c/test_cpus.c) link
 * cpus.c alone.
 */
#ifndef MOSAIC_CPUS_H
#define MOSAIC_CPUS_H

/* The CPUs this process may run on: those online, bounded by its affinity mask and by the CPU
 * quota of its cgroups (mosaic_cpus_cgroup_limit with the real /proc and /sys). At least 1. */
unsigned int mosaic_usable_cpus(void);

/* The whole CPUs a quota of quota_us per period_us grants, rounded up; 0 when there is no
 * quota (a negative or zero quota or period: cgroup v1 writes -1 for none). */
unsigned int mosaic_cpus_from_quota(long long quota_us, long long period_us);

/* The same from the text of a cgroup v2 `cpu.max` file ("150000 100000", "max 100000"; a
 * quota alone means the default period of 100000 us); 0 for "max" or text that does not
 * parse. */
unsigned int mosaic_cpus_from_cpu_max(const char *text);

/* The tightest CPU quota of this process's cgroup and of every cgroup above it in the same
 * mount, under cgroup v2 (`cpu.max`) and v1 (`cpu.cfs_quota_us`, `cpu.cfs_period_us`), as
 * whole CPUs rounded up; 0 when none is set or nothing could be read. Paths are read under
 * prefix ("" for the system; a test gives a directory holding proc/self/cgroup,
 * proc/self/mountinfo and the cgroup files). */
unsigned int mosaic_cpus_cgroup_limit(const char *prefix);

#endif
