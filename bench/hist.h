/* bench/hist.h — a latency histogram with log-linear buckets in fixed
 * memory (HdrHistogram-like, no allocation after hist_init).
 *
 * Values are unsigned 64-bit integers (the benchmarks record nanoseconds).
 * Values below 2^(HIST_SUB_BITS+1) = 256 have a bucket each (exact); above,
 * every power of two [2^e, 2^(e+1)) is split into 2^HIST_SUB_BITS = 128
 * equal buckets, so a bucket is at most 1/128 of its lower bound wide. A
 * percentile is reported as the middle of the bucket holding the sample of
 * that rank, clamped to the exact minimum and maximum:
 *
 *   |hist_percentile(h, p) - exact| <= exact / 256      (0.39 %)
 *
 * where exact is the nearest-rank percentile: the sample of rank
 * ceil(p / 100 * count) (1-based) in sorted order.
 *
 * Memory: HIST_BUCKETS (7424) counters, 58 KiB, inside struct hist.
 * Thread: not synchronised; give each thread its own and hist_merge them.
 */
#ifndef SLUICE_BENCH_HIST_H
#define SLUICE_BENCH_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 7
#define HIST_SUB      (1u << HIST_SUB_BITS)
/* exact buckets 0..255 (two "octaves" of 128), then 56 octaves 2^8 .. 2^63 */
#define HIST_BUCKETS  ((65 - HIST_SUB_BITS) * HIST_SUB)

struct hist {
	uint64_t count;
	uint64_t min, max;
	long double sum;
	uint64_t b[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_merge(struct hist *into, const struct hist *from);
/* p in [0, 100]; 0 with no samples. */
uint64_t hist_percentile(const struct hist *h, double p);
double hist_mean(const struct hist *h);

/* The bucket of v, and the range [lo, hi] of values it holds. */
static inline unsigned hist_bucket(uint64_t v)
{
	unsigned e, shift;

	if (v < (2u * HIST_SUB))
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	shift = e - HIST_SUB_BITS;
	return shift * HIST_SUB + (unsigned)(v >> shift);
}

void hist_bucket_range(unsigned bucket, uint64_t *lo, uint64_t *hi);

static inline void hist_add(struct hist *h, uint64_t v)
{
	h->b[hist_bucket(v)]++;
	if (!h->count || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->count++;
	h->sum += (long double)v;
}

#endif
