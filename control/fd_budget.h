/* control/fd_budget.h — the process's file descriptors: how many are in
 * use against RLIMIT_NOFILE, and how many a partition create must leave
 * free. The control thread refuses a CreateTopics or CreatePartitions
 * whose partitions do not fit (control/ctl_topic.c); /v1/health says
 * "degraded" when the reserve runs low (control/metrics.c).
 * Thread: any; reads /proc/self/fd and the limit, holds no state. */
#ifndef SLUICE_FD_BUDGET_H
#define SLUICE_FD_BUDGET_H

#include <stdint.h>

/* @thread any. File descriptors in use (/proc/self/fd) and the limit
 * (RLIMIT_NOFILE, soft); 0, or -errno when they cannot be read. */
int fd_usage(int64_t *in_use, int64_t *limit);
/* Descriptors a CreateTopics or CreatePartitions leaves unclaimed for
 * connections, segments and the broker's own files. */
static inline int64_t fd_reserve(int64_t limit)
{
	return 256 + limit / 32;
}

#endif
