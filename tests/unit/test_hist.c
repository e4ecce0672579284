/* tests/unit/test_hist.c — bench/hist: percentiles of known distributions
 * are within the stated precision (exact / 256) of the nearest-rank
 * percentile of the sorted samples; exact below 256; bucket ranges tile the
 * value space. The histogram lives in bench/, outside the core library, so
 * the suite compiles it in. */
#include <math.h>
#include <stdlib.h>

#include "bench/hist.c"
#include "tests/unit/helpers.h"

static struct hist h;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* p in thousandths of a percent: 50000 = p50, 99900 = p99.9 */
static uint64_t exact_rank(const uint64_t *sorted, size_t n, uint64_t p_milli)
{
	uint64_t rank = (p_milli * n + 99999) / 100000;

	if (rank < 1)
		rank = 1;
	return sorted[rank - 1];
}

static void check_all(uint64_t *v, size_t n, const char *what)
{
	static const uint64_t ps[] = { 1, 10000, 50000, 90000, 99000, 99900, 99990, 100000 };

	hist_init(&h);
	for (size_t i = 0; i < n; i++)
		hist_add(&h, v[i]);
	qsort(v, n, sizeof(*v), cmp_u64);
	cr_assert_eq(h.count, n);
	cr_assert_eq(h.min, v[0]);
	cr_assert_eq(h.max, v[n - 1]);
	for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
		uint64_t want = exact_rank(v, n, ps[k]);
		uint64_t got = hist_percentile(&h, (double)ps[k] / 1000.0);
		uint64_t err = got > want ? got - want : want - got;

		cr_assert_leq(err, want / 256, "%s: p%.3f = %lu, exact %lu (error %lu > %lu)", what,
			      (double)ps[k] / 1000.0, (unsigned long)got, (unsigned long)want,
			      (unsigned long)err, (unsigned long)(want / 256));
	}
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_u64(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double next_unit(void)
{
	return (double)(next_u64() >> 11) / 9007199254740992.0; /* [0, 1) */
}

Test(hist, small_values_are_exact)
{
	hist_init(&h);
	for (uint64_t v = 1; v <= 200; v++)
		hist_add(&h, v);
	cr_assert_eq(hist_percentile(&h, 50), 100);
	cr_assert_eq(hist_percentile(&h, 99), 198);
	cr_assert_eq(hist_percentile(&h, 99.9), 200);
	cr_assert_eq(hist_percentile(&h, 0.5), 1);
	cr_assert_eq(hist_percentile(&h, 100), 200);
}

Test(hist, uniform_1000)
{
	/* 1..1000 once each: p50 is 500, p99 990, p99.9 999 */
	uint64_t v[1000];

	for (int i = 0; i < 1000; i++)
		v[i] = (uint64_t)i + 1;
	check_all(v, 1000, "1..1000");
}

Test(hist, uniform_microseconds)
{
	size_t n = 1000000;
	uint64_t *v = malloc(n * sizeof(*v));

	for (size_t i = 0; i < n; i++)
		v[i] = 1000 + next_u64() % 10000000; /* 1 us .. 10 ms in ns */
	check_all(v, n, "uniform 1us..10ms");
	free(v);
}

Test(hist, lognormal_tail)
{
	size_t n = 500000;
	uint64_t *v = malloc(n * sizeof(*v));

	for (size_t i = 0; i < n; i++) {
		/* Box-Muller, median 1 ms, sigma 1.5: a long tail to seconds */
		double u1 = next_unit(), u2 = next_unit();
		double z = sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(2 * M_PI * u2);

		v[i] = (uint64_t)(1e6 * exp(1.5 * z)) + 1;
	}
	check_all(v, n, "lognormal");
	free(v);
}

Test(hist, bimodal_and_huge)
{
	size_t n = 100000;
	uint64_t *v = malloc(n * sizeof(*v));

	for (size_t i = 0; i < n; i++)
		v[i] = i % 100 == 0 ? (1ull << 62) + next_u64() % (1ull << 60) : 300 + next_u64() % 50;
	check_all(v, n, "bimodal");
	free(v);
}

Test(hist, merge_equals_single)
{
	static struct hist a, b;
	uint64_t x;

	hist_init(&a);
	hist_init(&b);
	hist_init(&h);
	for (int i = 0; i < 100000; i++) {
		x = next_u64() % 50000000;
		hist_add(i & 1 ? &a : &b, x);
		hist_add(&h, x);
	}
	hist_merge(&a, &b);
	cr_assert_eq(a.count, h.count);
	cr_assert_eq(a.min, h.min);
	cr_assert_eq(a.max, h.max);
	for (int p = 1; p < 100; p++)
		cr_assert_eq(hist_percentile(&a, p), hist_percentile(&h, p));
	cr_assert_eq(hist_percentile(&a, 99.9), hist_percentile(&h, 99.9));
}

Test(hist, buckets_tile_the_value_space)
{
	uint64_t prev_hi = 0;

	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		uint64_t lo, hi;

		hist_bucket_range(i, &lo, &hi);
		if (i)
			cr_assert_eq(lo, prev_hi + 1, "bucket %u starts at %lu", i, (unsigned long)lo);
		cr_assert_geq(hi, lo);
		cr_assert_eq(hist_bucket(lo), i);
		cr_assert_eq(hist_bucket(hi), i);
		cr_assert_leq(hi - lo + 1, lo < 256 ? 1 : lo / 128, "bucket %u too wide", i);
		prev_hi = hi;
	}
	cr_assert_eq(prev_hi, UINT64_MAX);
	cr_assert_eq(hist_bucket(UINT64_MAX), HIST_BUCKETS - 1);
}
