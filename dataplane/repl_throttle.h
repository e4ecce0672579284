/* dataplane/repl_throttle.h — the replication throttle's byte budget
 * (Kafka's leader.replication.throttled.rate and
 * follower.replication.throttled.rate, in bytes per second): a token
 * bucket a shard's replica fetcher spends the records its throttled
 * partitions (the replicas a reassignment adds) receive. It fills at the
 * rate, holds at most one second of it, and may go below zero (an answer
 * carries at least one whole batch): a throttled partition is asked only
 * while the budget is above zero, for at most what is left. Nothing is
 * allocated, locked or read but the struct.
 *
 * Thread: one shard owns each (@thread shard); pure, for the tests. */
#ifndef SLUICE_REPL_THROTTLE_H
#define SLUICE_REPL_THROTTLE_H

#include <stdint.h>

#define REPL_THROTTLE_NONE INT64_MAX   /* the keys' default: no throttle */

struct repl_throttle {
	int64_t budget;              /* bytes that may be fetched now (< 0: overspent) */
	int64_t rate;                /* bytes per second it fills at */
	uint64_t last_ns;            /* when it last filled (0: never) */
};

/* The bytes a throttled partition may be asked for now, the budget filled
 * for the time since the last call at `rate` (<= 0 or REPL_THROTTLE_NONE:
 * no throttle, INT64_MAX). A new rate keeps what was saved, up to a
 * second of it. */
static inline int64_t repl_throttle_avail(struct repl_throttle *t, int64_t rate, uint64_t now_ns)
{
	uint64_t dt;

	if (rate <= 0 || rate == REPL_THROTTLE_NONE) {
		t->rate = 0;
		t->budget = 0;
		t->last_ns = now_ns;
		return INT64_MAX;
	}
	if (!t->rate || !t->last_ns) {
		t->budget = 0;           /* a throttle from now: nothing saved */
		t->last_ns = now_ns;
	}
	t->rate = rate;
	dt = now_ns > t->last_ns ? now_ns - t->last_ns : 0;
	if (dt) {
		__int128 add = (__int128)rate * dt / 1000000000;
		__int128 b = (__int128)t->budget + add;

		t->budget = b > rate ? rate : (int64_t)b;
		/* the part of a byte not added yet stays for the next call */
		t->last_ns = add ? now_ns : t->last_ns;
	}
	if (t->budget > rate)
		t->budget = rate;
	return t->budget > 0 ? t->budget : 0;
}

/* bytes of a throttled partition received. */
static inline void repl_throttle_spend(struct repl_throttle *t, int64_t bytes)
{
	if (t->rate)
		t->budget -= bytes;
}

#endif
