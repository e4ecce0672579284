/* tests/unit/test_epoch_cache.c — the leader-epoch cache on its own: assign,
 * Kafka's end offset for an epoch, truncation from either end and the
 * checkpoint file's text. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "storage/epoch_cache.h"

static struct epoch_cache c;

static void setup(void)
{
	epoch_cache_init(&c);
}

static void teardown(void)
{
	epoch_cache_fini(&c);
}

TestSuite(epoch_cache, .init = setup, .fini = teardown);

static void expect_entries(const int32_t *ep, const int64_t *st, uint32_t n)
{
	cr_assert_eq(c.n, n, "entries: %u, want %u", c.n, n);
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(c.e[i].epoch, ep[i], "entry %u epoch %d, want %d", i, c.e[i].epoch, ep[i]);
		cr_assert_eq(c.e[i].start, st[i], "entry %u start %lld, want %lld", i, (long long)c.e[i].start,
			     (long long)st[i]);
	}
}

static void end_for(int32_t req, int64_t leo, int32_t want_epoch, int64_t want_end)
{
	int32_t e;
	int64_t o;

	epoch_cache_end_offset(&c, req, leo, &e, &o);
	cr_assert_eq(e, want_epoch, "epoch %d: got epoch %d, want %d", req, e, want_epoch);
	cr_assert_eq(o, want_end, "epoch %d: got end %lld, want %lld", req, (long long)o, (long long)want_end);
}

Test(epoch_cache, assign_appends_only_on_change)
{
	cr_assert_eq(epoch_cache_latest(&c), EPOCH_UNDEFINED);
	cr_assert_eq(epoch_cache_assign(&c, 0, 0), 1);
	cr_assert_eq(epoch_cache_assign(&c, 0, 10), 0);     /* same epoch, later batch */
	cr_assert_eq(epoch_cache_assign(&c, 2, 10), 1);
	cr_assert_eq(epoch_cache_assign(&c, 2, 25), 0);
	cr_assert_eq(epoch_cache_assign(&c, 5, 30), 1);
	cr_assert_eq(epoch_cache_assign(&c, -1, 40), 0);    /* undefined: ignored */
	cr_assert_eq(epoch_cache_assign(&c, 6, -1), 0);
	expect_entries((int32_t[]){ 0, 2, 5 }, (int64_t[]){ 0, 10, 30 }, 3);
	cr_assert_eq(epoch_cache_latest(&c), 5);
}

Test(epoch_cache, assign_cuts_non_monotonic_history)
{
	epoch_cache_assign(&c, 1, 0);
	epoch_cache_assign(&c, 3, 10);
	epoch_cache_assign(&c, 4, 20);
	/* an older epoch with a later offset: the newer epochs go */
	cr_assert_eq(epoch_cache_assign(&c, 2, 25), 1);
	expect_entries((int32_t[]){ 1, 2 }, (int64_t[]){ 0, 25 }, 2);
	/* a newer epoch starting before an entry: that entry goes */
	cr_assert_eq(epoch_cache_assign(&c, 7, 5), 1);
	expect_entries((int32_t[]){ 1, 7 }, (int64_t[]){ 0, 5 }, 2);
	/* the latest epoch again, earlier: moved back */
	cr_assert_eq(epoch_cache_assign(&c, 7, 3), 1);
	expect_entries((int32_t[]){ 1, 7 }, (int64_t[]){ 0, 3 }, 2);
}

Test(epoch_cache, end_offset_kafka_semantics)
{
	end_for(0, 100, EPOCH_UNDEFINED, EPOCH_UNDEFINED_OFFSET);   /* empty */
	epoch_cache_assign(&c, 2, 10);
	epoch_cache_assign(&c, 4, 30);
	epoch_cache_assign(&c, 7, 55);
	end_for(7, 100, 7, 100);                 /* latest: the log end */
	end_for(4, 100, 4, 55);                  /* known: the next epoch's start */
	end_for(2, 100, 2, 30);
	end_for(5, 100, 4, 55);                  /* unknown between: the largest below */
	end_for(6, 100, 4, 55);
	end_for(3, 100, 2, 30);
	end_for(1, 100, 1, 10);                  /* below the first: its start (Kafka 3.x) */
	end_for(0, 100, 0, 10);
	end_for(8, 100, EPOCH_UNDEFINED, EPOCH_UNDEFINED_OFFSET);   /* above every epoch */
	end_for(EPOCH_UNDEFINED, 100, EPOCH_UNDEFINED, EPOCH_UNDEFINED_OFFSET);
}

Test(epoch_cache, epoch_for_offset)
{
	cr_assert_eq(epoch_cache_epoch_for(&c, 0), EPOCH_UNDEFINED);
	epoch_cache_assign(&c, 2, 10);
	epoch_cache_assign(&c, 4, 30);
	cr_assert_eq(epoch_cache_epoch_for(&c, 9), EPOCH_UNDEFINED);
	cr_assert_eq(epoch_cache_epoch_for(&c, 10), 2);
	cr_assert_eq(epoch_cache_epoch_for(&c, 29), 2);
	cr_assert_eq(epoch_cache_epoch_for(&c, 30), 4);
	cr_assert_eq(epoch_cache_epoch_for(&c, 1000), 4);
}

Test(epoch_cache, truncate_end)
{
	epoch_cache_assign(&c, 1, 0);
	epoch_cache_assign(&c, 3, 10);
	epoch_cache_assign(&c, 4, 20);
	cr_assert_eq(epoch_cache_truncate_end(&c, 25), 0);   /* inside the last epoch */
	cr_assert_eq(epoch_cache_truncate_end(&c, 20), 1);   /* at its start: it goes */
	expect_entries((int32_t[]){ 1, 3 }, (int64_t[]){ 0, 10 }, 2);
	cr_assert_eq(epoch_cache_truncate_end(&c, 5), 1);
	expect_entries((int32_t[]){ 1 }, (int64_t[]){ 0 }, 1);
	cr_assert_eq(epoch_cache_truncate_end(&c, 0), 1);
	cr_assert_eq(c.n, 0);
}

Test(epoch_cache, truncate_start)
{
	epoch_cache_assign(&c, 1, 0);
	epoch_cache_assign(&c, 3, 10);
	epoch_cache_assign(&c, 4, 20);
	cr_assert_eq(epoch_cache_truncate_start(&c, 0), 0);  /* where it starts already */
	cr_assert_eq(epoch_cache_truncate_start(&c, 15), 1);
	expect_entries((int32_t[]){ 3, 4 }, (int64_t[]){ 15, 20 }, 2);
	cr_assert_eq(epoch_cache_truncate_start(&c, 20), 1); /* at an entry's start */
	expect_entries((int32_t[]){ 4 }, (int64_t[]){ 20 }, 1);
	cr_assert_eq(epoch_cache_truncate_start(&c, 50), 1);
	expect_entries((int32_t[]){ 4 }, (int64_t[]){ 50 }, 1);
}

Test(epoch_cache, file_round_trip)
{
	char buf[256];
	size_t n;

	epoch_cache_assign(&c, 0, 0);
	epoch_cache_assign(&c, 3, 1234);
	epoch_cache_assign(&c, 12, 99999999999ll);
	n = epoch_cache_format(&c, buf, sizeof(buf));
	cr_assert_lt(n, sizeof(buf));
	buf[n] = 0;
	cr_assert_str_eq(buf, "0\n3\n0 0\n3 1234\n12 99999999999\n");
	cr_assert_eq(epoch_cache_format(&c, buf, 4), n);     /* the length it needs */
	epoch_cache_clear(&c);
	cr_assert_eq(epoch_cache_parse(&c, "0\n3\n0 0\n3 1234\n12 99999999999\n", n), 0);
	expect_entries((int32_t[]){ 0, 3, 12 }, (int64_t[]){ 0, 1234, 99999999999ll }, 3);
	cr_assert_eq(epoch_cache_parse(&c, "0\n0\n", 4), 0);
	cr_assert_eq(c.n, 0);
}

Test(epoch_cache, damaged_files_are_refused)
{
	static const char *bad[] = {
		"",                              /* empty */
		"1\n1\n0 0\n",                   /* another version */
		"0\n2\n0 0\n",                   /* fewer lines than counted */
		"0\n1\n0 0\n3 10\n",             /* more */
		"0\n1\n0 x\n",                   /* not a number */
		"0\n2\n3 10\n2 20\n",            /* epochs going down */
		"0\n2\n2 20\n3 10\n",            /* offsets going down */
		"0\n1\n-1 0\n",                  /* negative */
		"0\n1\n0 0",                     /* torn: no last newline */
		"0\n1\n0  0\n",                  /* not Kafka's spacing */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		epoch_cache_assign(&c, 9, 9);
		cr_assert_eq(epoch_cache_parse(&c, bad[i], strlen(bad[i])), -EINVAL, "accepted: \"%s\"", bad[i]);
		cr_assert_eq(c.n, 0, "left entries after \"%s\"", bad[i]);
	}
}
