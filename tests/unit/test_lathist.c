/* tests/unit/test_lathist.c — storage/lathist.h: bucket bounds and the
 * stated precision (a percentile read as its bucket's middle is within
 * 1/16 of the exact nearest-rank value between 1.024 us and 68.7 s). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "storage/lathist.h"

static uint64_t bucket_lower(unsigned i)
{
	return i == 0 ? 0 : lathist_upper(i - 1);
}

Test(lathist, buckets_tile_the_range)
{
	/* every bucket is [upper(i-1), upper(i)), contiguous and increasing */
	for (unsigned i = 1; i < LATHIST_BUCKETS - 1; i++) {
		cr_assert_lt(bucket_lower(i), lathist_upper(i), "bucket %u", i);
		cr_assert_eq(lathist_bucket(bucket_lower(i)), i, "lower bound of %u", i);
		cr_assert_eq(lathist_bucket(lathist_upper(i) - 1), i, "last value of %u", i);
		/* width at most 1/8 of the lower bound */
		cr_assert_leq((lathist_upper(i) - bucket_lower(i)) * 8, bucket_lower(i), "bucket %u too wide", i);
	}
	cr_assert_eq(lathist_bucket(0), 0);
	cr_assert_eq(lathist_bucket(1023), 0);
	cr_assert_eq(lathist_bucket(1024), 1);
	cr_assert_eq(lathist_bucket(1ull << 36), LATHIST_BUCKETS - 1);
	cr_assert_eq(lathist_bucket(UINT64_MAX), LATHIST_BUCKETS - 1);
	cr_assert_eq(lathist_upper(LATHIST_BUCKETS - 1), UINT64_MAX);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

Test(lathist, percentiles_within_one_sixteenth)
{
	static struct lathist h;
	enum { N = 100000 };
	static uint64_t v[N];
	const double ps[] = { 50, 90, 99, 99.9 };

	srand(7);
	for (int i = 0; i < N; i++) {
		/* log-uniform over 2 us .. 10 s */
		double e = 11 + (double)rand() / RAND_MAX * 22.2;

		v[i] = (uint64_t)__builtin_exp2(e);
		lathist_add(&h, v[i]);
	}
	qsort(v, N, sizeof(v[0]), cmp_u64);
	cr_assert_eq(h.count, N);
	for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
		uint64_t rank = (uint64_t)((ps[k] / 100.0) * N + 0.999999), cum = 0;
		uint64_t exact = v[rank - 1];
		unsigned i = 0;
		double mid, err;

		while (cum + h.b[i] < rank)
			cum += h.b[i++];
		mid = ((double)bucket_lower(i) + (double)lathist_upper(i)) / 2;
		err = mid > (double)exact ? mid - (double)exact : (double)exact - mid;
		cr_assert_leq(err * 16, (double)exact, "p%g: %.0f vs exact %llu", ps[k], mid,
			      (unsigned long long)exact);
	}
}
