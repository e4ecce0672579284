/* bench/hist.c — see hist.h. */
#include <string.h>

#include "bench/hist.h"

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

void hist_merge(struct hist *into, const struct hist *from)
{
	if (!from->count)
		return;
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		into->b[i] += from->b[i];
	if (!into->count || from->min < into->min)
		into->min = from->min;
	if (from->max > into->max)
		into->max = from->max;
	into->count += from->count;
	into->sum += from->sum;
}

void hist_bucket_range(unsigned bucket, uint64_t *lo, uint64_t *hi)
{
	unsigned shift;

	if (bucket < 2 * HIST_SUB) {
		*lo = *hi = bucket;
		return;
	}
	shift = bucket / HIST_SUB - 1;
	*lo = (uint64_t)(bucket - shift * HIST_SUB) << shift;
	*hi = *lo + ((1ull << shift) - 1);
}

uint64_t hist_percentile(const struct hist *h, double p)
{
	uint64_t rank, cum = 0;

	if (!h->count)
		return 0;
	if (p <= 0)
		return h->min;
	if (p >= 100)
		return h->max;
	/* ceil(p / 100 * count), where a product that is an integer up to
	 * rounding error (99.9 % of 1000) counts as that integer */
	{
		long double x = (long double)p * (long double)h->count / 100.0L;

		rank = (uint64_t)x;
		if (x - (long double)rank > 1e-9L * (x > 1 ? x : 1))
			rank++;
	}
	if (rank < 1)
		rank = 1;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		cum += h->b[i];
		if (cum >= rank) {
			uint64_t lo, hi, mid;

			hist_bucket_range(i, &lo, &hi);
			mid = lo + (hi - lo) / 2;
			if (mid < h->min)
				mid = h->min;
			if (mid > h->max)
				mid = h->max;
			return mid;
		}
	}
	return h->max;
}

double hist_mean(const struct hist *h)
{
	return h->count ? (double)(h->sum / (long double)h->count) : 0;
}
