/* tests/unit/test_spsc.c — the SPSC ring between threads: order, bounds,
 * back-pressure, and a real producer/consumer pair on two threads. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

#include "dataplane/broker.h"
#include "dataplane/spsc.h"

Test(spsc, fifo_and_full_ring)
{
	static struct shard_msg slots[8];
	struct spsc r;
	struct shard_msg m = { 0 }, out;

	spsc_init(&r, slots, 8);
	cr_assert(spsc_empty(&r));
	cr_assert_eq(spsc_pop(&r, &out), 0);
	for (int i = 0; i < 8; i++) {
		m.v[0] = i;
		cr_assert_eq(spsc_push(&r, &m), 0);
	}
	cr_assert_eq(spsc_push(&r, &m), -ENOBUFS, "a full ring refuses, never overwrites");
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(spsc_pop(&r, &out), 1);
		cr_assert_eq(out.v[0], i);
	}
	cr_assert(spsc_empty(&r));
	/* wrap around many times */
	for (int i = 0; i < 1000; i++) {
		m.v[0] = i;
		cr_assert_eq(spsc_push(&r, &m), 0);
		cr_assert_eq(spsc_pop(&r, &out), 1);
		cr_assert_eq(out.v[0], i);
	}
}

#define N 5000000
static struct spsc ring;
static struct shard_msg ring_slots[1024];

static void *producer(void *arg)
{
	(void)arg;
	for (int64_t i = 0; i < N; i++) {
		struct shard_msg m = { .v = { i, i * 3 } };

		while (spsc_push(&ring, &m) == -ENOBUFS)
			;   /* the test's own back-pressure: retry */
	}
	return NULL;
}

Test(spsc, two_threads_every_message_once_in_order, .timeout = 60)
{
	pthread_t t;
	int64_t next = 0;

	spsc_init(&ring, ring_slots, 1024);
	cr_assert_eq(pthread_create(&t, NULL, producer, NULL), 0);
	while (next < N) {
		struct shard_msg m;

		if (spsc_pop(&ring, &m)) {
			cr_assert_eq(m.v[0], next, "message %lld out of order", (long long)next);
			cr_assert_eq(m.v[1], next * 3, "message %lld torn", (long long)next);
			next++;
		}
	}
	pthread_join(t, NULL);
	cr_assert(spsc_empty(&ring));
}

Test(md, find_by_name_in_sorted_snapshot)
{
	struct md_topic a = { .name = "alpha", .name_len = 5 }, b = { .name = "beta", .name_len = 4 },
			c = { .name = "beta2", .name_len = 5 };
	struct md_topic *arr[] = { &a, &b, &c };
	struct md_snapshot md = { .ntopics = 3, .topics = arr };

	cr_assert_eq(md_find(&md, "alpha", 5), &a);
	cr_assert_eq(md_find(&md, "beta", 4), &b);
	cr_assert_eq(md_find(&md, "beta2", 5), &c);
	cr_assert_null(md_find(&md, "bet", 3));
	cr_assert_null(md_find(&md, "gamma", 5));
	cr_assert_null(md_find(NULL, "alpha", 5));
}
