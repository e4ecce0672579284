/* storage/lathist.h — a latency histogram in fixed memory with
 * log-linear buckets, written by one shard and read by the control thread.
 *
 * Values are nanoseconds. Below 2^10 ns (1.024 us) everything shares
 * bucket 0; from 2^10 to 2^36 ns (68.7 s) each power of two [2^e, 2^(e+1))
 * is split into 2^LATHIST_SUB_BITS = 8 equal buckets; at and above 2^36
 * ns is the last bucket. A bucket is at most 1/8 of its lower bound wide,
 * so a percentile read as the middle of the bucket holding the sample of
 * that rank is within 1/16 (6.25 %) of the exact nearest-rank value, for
 * values between 1.024 us and 68.7 s. 210 counters: 1.7 KiB.
 *
 * Lives in storage/ because the store keeps one (durable-write latency)
 * and storage includes nothing above it.
 *
 * Thread: written only by its owner shard (lathist_add: relaxed atomic
 * stores of its own value plus one, plain adds on x86-64), read by the
 * control thread with relaxed loads (a scrape never stops the shard; a
 * scrape may see a bucket count one sample ahead of `count`). Header only.
 */
#ifndef SLUICE_LATHIST_H
#define SLUICE_LATHIST_H

#include <stdint.h>

#define LATHIST_SUB_BITS 3
#define LATHIST_SUB      (1u << LATHIST_SUB_BITS)
#define LATHIST_MIN_EXP  10
#define LATHIST_MAX_EXP  36
#define LATHIST_BUCKETS  (2 + (LATHIST_MAX_EXP - LATHIST_MIN_EXP) * LATHIST_SUB)

struct lathist {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t b[LATHIST_BUCKETS];
} __attribute__((aligned(64)));

static inline unsigned lathist_bucket(uint64_t ns)
{
	unsigned e;

	if (ns < (1ull << LATHIST_MIN_EXP))
		return 0;
	e = 63u - (unsigned)__builtin_clzll(ns);
	if (e >= LATHIST_MAX_EXP)
		return LATHIST_BUCKETS - 1;
	return 1 + (e - LATHIST_MIN_EXP) * LATHIST_SUB + (unsigned)((ns >> (e - LATHIST_SUB_BITS)) & (LATHIST_SUB - 1));
}

/* The exclusive upper bound of bucket i in ns (UINT64_MAX: the last). */
static inline uint64_t lathist_upper(unsigned i)
{
	unsigned e, k;

	if (i == 0)
		return 1ull << LATHIST_MIN_EXP;
	if (i >= LATHIST_BUCKETS - 1)
		return UINT64_MAX;
	e = LATHIST_MIN_EXP + (i - 1) / LATHIST_SUB;
	k = (i - 1) % LATHIST_SUB;
	return (uint64_t)(LATHIST_SUB + k + 1) << (e - LATHIST_SUB_BITS);
}

/* @thread owner */
static inline void lathist_add(struct lathist *h, uint64_t ns)
{
	unsigned i = lathist_bucket(ns);

	__atomic_store_n(&h->b[i], h->b[i] + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->sum_ns, h->sum_ns + ns, __ATOMIC_RELAXED);
	__atomic_store_n(&h->count, h->count + 1, __ATOMIC_RELAXED);
}

#endif
