/* tests/integration/groups_common.h — what the two consumer-group suites
 * (test_groups.c: members joining, leaving and dying under production;
 * test_groups_fencing.c: the offset invariant and a stale owner's commit
 * refused) share: the broker settings that make groups form at once and
 * notice a dead member in ~2 s, the Kafka error codes they expect, and the
 * clock. Test process only; single-threaded use. */
#ifndef SLUICE_TESTS_GROUPS_COMMON_H
#define SLUICE_TESTS_GROUPS_COMMON_H

#include <stdint.h>
#include <time.h>
#include <unistd.h>

/* Kafka error codes the tests expect */
#define ERR_ILLEGAL_GENERATION    22
#define ERR_UNKNOWN_MEMBER_ID     25
#define ERR_REBALANCE_IN_PROGRESS 27
#define ERR_MEMBER_ID_REQUIRED    79

static const char *const group_broker_args[] = {
	"--set", "group.initial.rebalance.delay.ms=0",
	"--set", "group.min.session.timeout.ms=1000",
	NULL
};

static inline int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline void sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

#endif
