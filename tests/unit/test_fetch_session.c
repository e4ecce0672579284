/* tests/unit/test_fetch_session.c — a shard's fetch session cache
 * (dataplane/fetch_session.c): ids, partitions by name and by topic id,
 * forgetting, and Kafka's eviction order (stale first, then privileged,
 * then size), on the test's clock. */
#include <criterion/criterion.h>
#include <string.h>

#include "dataplane/fetch_session.h"

#define S 1000000000ull

static const uint8_t ID_A[16] = { 1 }, ID_B[16] = { 2 };

Test(fetch_session, ids_partitions_and_forget)
{
	struct fsess_cache c;
	struct fsess *s, *t;
	int32_t sid;

	fsess_cache_init(&c, 4, 7);
	s = fsess_create(&c, 0, 3, 0, 1);
	t = fsess_create(&c, 0, 1, 1, 1);
	cr_assert(s && t && s->id > 0 && t->id > 0 && s->id != t->id);
	cr_assert_eq(s->epoch, 1);
	cr_assert_eq(fsess_find(&c, s->id), s);
	cr_assert_null(fsess_find(&c, 0));
	/* by name: one copy of a name for its partitions */
	cr_assert_eq(fsess_part_upsert(s, ID_A, "a", 1, 0), 0);
	cr_assert_eq(fsess_part_upsert(s, ID_A, "bb", 2, 0), 1);
	cr_assert_eq(fsess_part_upsert(s, ID_A, "a", 1, 1), 2);
	cr_assert_eq(fsess_part_upsert(s, ID_B, "a", 1, 0), 0, "a name session ignores the id");
	cr_assert_eq(s->parts[2].name_off, s->parts[0].name_off);
	cr_assert_str_eq(fsess_part_name(s, &s->parts[1]), "bb");
	cr_assert_eq(s->parts[2].hw_sent, -1);
	fsess_part_forget(s, NULL, "a", 1, 0);
	cr_assert_eq(s->nparts, 2);
	cr_assert_eq(s->parts[0].partition, 0);
	cr_assert_str_eq(fsess_part_name(s, &s->parts[0]), "bb");
	cr_assert_eq(fsess_part_find(s, NULL, "a", 1, 1), 1);
	/* by id: the name does not count */
	cr_assert_eq(fsess_part_upsert(t, ID_A, NULL, -1, 0), 0);
	cr_assert_eq(fsess_part_upsert(t, ID_B, NULL, -1, 0), 1);
	cr_assert_eq(fsess_part_find(t, ID_A, "x", 1, 0), 0);
	sid = s->id;
	fsess_remove(&c, s);
	cr_assert_null(fsess_find(&c, sid));
	cr_assert_eq(fsess_find(&c, t->id), t);
	cr_assert_eq(c.used, 1);
	cr_assert_eq(fsess_next_epoch(INT32_MAX), 1);
	fsess_cache_free(&c);
}

/* A session of n partitions, as the fetch handler makes one. */
static struct fsess *made(struct fsess_cache *c, int privileged, int n, uint64_t now)
{
	struct fsess *s = fsess_create(c, privileged, n, 0, now);

	for (int i = 0; s && i < n; i++)
		cr_assert_eq(fsess_part_upsert(s, ID_A, "t", 1, i), i);
	return s;
}

Test(fetch_session, eviction_as_kafka)
{
	struct fsess_cache c;
	struct fsess *a, *b, *p, *n;
	int32_t aid, bid, pid, nid;

	fsess_cache_init(&c, 2, 9);
	a = made(&c, 0, 5, 1 * S);
	b = made(&c, 0, 2, 1 * S);
	aid = a->id;
	bid = b->id;
	/* full, nothing stale, a consumer's sessions are young: no room */
	cr_assert_null(made(&c, 0, 100, 2 * S));
	/* a follower's evicts the least valuable consumer's (fewer partitions) */
	p = made(&c, 1, 1, 3 * S);
	cr_assert_not_null(p);
	cr_assert_null(fsess_find(&c, bid));
	cr_assert_not_null(fsess_find(&c, aid));
	cr_assert_eq(c.evictions, 1);
	/* the follower's is not evicted by another follower's while young,
	 * the consumer's is: it goes first (unprivileged before privileged) */
	n = made(&c, 1, 1, 4 * S);
	cr_assert_not_null(n);
	cr_assert_null(fsess_find(&c, aid));
	cr_assert_null(made(&c, 1, 50, 5 * S), "two young followers' sessions stay");
	/* unused for more than 120 s: the least recently used goes for anyone */
	pid = p->id;
	nid = n->id;
	fsess_touch(n, 100 * S);
	cr_assert_not_null(made(&c, 0, 1, 125 * S));
	cr_assert_null(fsess_find(&c, pid));
	cr_assert_not_null(fsess_find(&c, nid));
	cr_assert_eq(c.evictions, 3);
	fsess_cache_free(&c);
}

Test(fetch_session, no_slots_no_sessions)
{
	struct fsess_cache c;

	fsess_cache_init(&c, 0, 1);
	cr_assert_null(fsess_create(&c, 1, 1, 0, 1));
	cr_assert_null(fsess_find(&c, 1));
	fsess_cache_free(&c);
}
