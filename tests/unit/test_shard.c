/* tests/unit/test_shard.c — a shard polled as a plain struct: one shard of
 * a broker, no thread started, its loop driven turn by turn (shard_poll)
 * with an injected clock; the test thread stands in for the control
 * thread at the other end of the rings. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dataplane/conn.h"
#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/part.h"
#include "dataplane/shard.h"
#include "broker_fixture.h"
#include "helpers.h"

static struct broker b;
static struct shard *sh;
static struct spsc to_shard, to_ctl;
static struct shard_msg to_shard_slots[RING_SLOTS], to_ctl_slots[RING_SLOTS];
static int ctl_sleeping;
static char *dir;

/* the metadata the control thread would publish: topic "t", one partition */
static const int32_t node1[1] = { 1 };   /* the fixture's node id: it leads the partition */
static struct part_pub mpub;
static struct md_partition mpart = { .index = 0, .owner_shard = 0, .leader = 1, .nreplicas = 1, .nisr = 1,
				     .replicas = node1, .isr = node1 };
static struct md_topic *topics[1];
static struct md_topic topic;
static struct md_snapshot md = { .version = 1, .ntopics = 1, .topics = topics };

#define T0 1000000000ull   /* the injected clock's start */

static int64_t idle_ms = -1;   /* connections.max.idle.ms of the suite */

static void setup(void)
{
	dir = test_broker_init(&b, idle_ms);
	spsc_init(&to_shard, to_shard_slots, RING_SLOTS);
	spsc_init(&to_ctl, to_ctl_slots, RING_SLOTS);
	b.rings[1][0] = &to_shard;
	b.rings[0][1] = &to_ctl;
	b.sleeping[1] = &ctl_sleeping;

	topic.name = "t";
	topic.name_len = 1;
	topic.nparts = 1;
	topic.parts = &mpart;
	topic.max_message_bytes = 1u << 20;
	plog_config_defaults(&topic.cfg);
	topics[0] = &topic;
	memset(&mpub, 0, sizeof(mpub));
	mpart.pub = &mpub;
	b.md = &md;

	sh = test_shard_start(&b);
}

static void teardown(void)
{
	test_shard_stop(&b, sh, 1, T0, dir);
	sh = NULL;
}

TestSuite(shard, .init = setup, .fini = teardown, .timeout = 60);

static int fired;
static uint64_t fired_at[8];

static void count_tick(struct shard *s)
{
	fired_at[fired++ & 7] = s->now_ns;
}

Test(shard, timer_fires_at_the_injected_times_and_not_before)
{
	cr_assert_geq(shard_timer_add(sh, T0 + 1000, 500, SHARD_TIMER_WAKE, count_tick), 0);
	fired = 0;
	shard_poll(sh, T0, 0);
	shard_poll(sh, T0 + 999, 0);
	cr_assert_eq(fired, 0, "a timer ran before it was due");
	shard_poll(sh, T0 + 1000, 0);
	cr_assert_eq(fired, 1);
	cr_assert_eq(fired_at[0], T0 + 1000, "it saw the turn's clock");
	shard_poll(sh, T0 + 1499, 0);
	cr_assert_eq(fired, 1, "its period runs from the turn it ran");
	shard_poll(sh, T0 + 1500, 0);
	cr_assert_eq(fired, 2);
	/* a late turn runs it once, and the period restarts from there */
	shard_poll(sh, T0 + 9000, 0);
	cr_assert_eq(fired, 3);
	shard_poll(sh, T0 + 9499, 0);
	cr_assert_eq(fired, 3);
	shard_poll(sh, T0 + 9500, 0);
	cr_assert_eq(fired, 4);
}

Test(shard, timer_table_is_bounded)
{
	int rc = 0;

	for (int i = 0; i < SHARD_TIMERS + 1 && rc >= 0; i++)
		rc = shard_timer_add(sh, 0, 1, SHARD_TIMER_NO_WAKE, count_tick);
	cr_assert_eq(rc, -ENOSPC);
}

/* ---- the control thread's side: a partition opened by a ring message -- */

static int opened = -1000;

/* on the shard, as part_proxy_open's owner side does (dataplane/part_proxy.c) */
static void open_part_msg(void *self, struct shard_msg *m)
{
	struct shard *s = self;
	struct part *p = NULL;
	char pdir[4200];
	int rc;

	(void)m;
	snprintf(pdir, sizeof(pdir), "%s/t-0", dir);
	rc = part_open(s, pdir, "t", 0, &topic.cfg, &p);
	if (rc == 0) {
		mpub.owner_part = p;   /* published for the shards, as the owner does */
		p->next = s->parts;
		s->parts = p;
	}
	struct shard_msg r = { .v = { rc } };

	r.fn = NULL;
	shard_send(s, broker_ctl_index(s->b), &r);
}

/* Turns until `done` holds (or 5 s of real time); the clock moves 1 ms a
 * turn. Idle turns sleep in io_uring, as the thread would. */
static uint64_t now = T0;
static void run_until(int (*done)(void))
{
	for (int i = 0; i < 5000 && !done(); i++) {
		now += 1000000;
		if (shard_poll(sh, now, 1700000000000 + (int64_t)(now / 1000000)) == 0)
			shard_idle(sh);
	}
}

static int reply_arrived(void)
{
	struct shard_msg m;

	if (!spsc_pop(&to_ctl, &m))
		return 0;
	opened = (int)m.v[0];
	return 1;
}

static void open_partition(void)
{
	struct shard_msg m = { .fn = open_part_msg };

	cr_assert_eq(broker_send(&b, broker_ctl_index(&b), 0, &m), 0);
	run_until(reply_arrived);
	cr_assert_eq(opened, 0, "part_open: %d", opened);
	cr_assert_not_null(md_part_owner(&mpart));
	cr_assert_eq(sh->parts, md_part_owner(&mpart));
}

Test(shard, partition_opens_through_the_ring)
{
	open_partition();
}

/* ---- a produce over a connection, and its acknowledgement ------------- */

static int peer = -1;
static uint8_t resp[65536];
static size_t resp_len;

static int response_arrived(void)
{
	ssize_t n = recv(peer, resp + resp_len, sizeof(resp) - resp_len, MSG_DONTWAIT);

	if (n > 0)
		resp_len += (size_t)n;
	return resp_len >= 4 && resp_len >= 4 + (size_t)be32_load(resp);
}

Test(shard, produce_is_acknowledged)
{
	static uint8_t batch[4096], frame[8192], arena_mem[65536];
	struct kafka_produce_request q;
	struct kafka_produce_request_topic_produce_data td;
	struct kafka_produce_request_partition_produce_data pd;
	struct kafka_request req;
	struct kafka_response out;
	struct kafka_arena a;
	struct kafka_writer w;
	const struct kafka_produce_response *r;
	int sv[2];
	uint32_t blen;

	open_partition();
	/* a client connected: the shard takes one end as if accepted */
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	peer = sv[1];
	conn_on_accept(sh, 0, sv[0], IORING_CQE_F_MORE);
	cr_assert_not_null(sh->conns);

	blen = test_batch(batch, sizeof(batch), 0, 3, 20, 0, 1700000000000);
	kafka_produce_request_init(&q);
	q.Acks = 1;
	q.TimeoutMs = 30000;
	pd.Index = 0;
	pd.Records = (struct kafka_bytes){ batch, (int32_t)blen };
	td.Name = (struct kafka_str){ "t", 1 };
	td.PartitionData.items = &pd;
	td.PartitionData.count = 1;
	q.TopicData.items = &td;
	q.TopicData.count = 1;
	memset(&req, 0, sizeof(req));
	req.header.RequestApiKey = KAFKA_PRODUCE_KEY;
	req.header.RequestApiVersion = 7;
	req.header.CorrelationId = 42;
	req.header.ClientId = (struct kafka_str){ "unit", 4 };
	req.api = kafka_api_find(KAFKA_PRODUCE_KEY);
	req.header_version = kafka_request_header_version(req.api, 7);
	req.body = &q;
	kafka_writer_init(&w, frame, sizeof(frame));
	cr_assert_eq(kafka_request_encode(&w, &req), 0);
	cr_assert_eq(write(peer, frame, w.len), (ssize_t)w.len);

	run_until(response_arrived);
	cr_assert(response_arrived(), "no response");
	cr_assert_eq(be32_load(resp + 4), 42, "correlation id");
	kafka_arena_init(&a, arena_mem, sizeof(arena_mem));
	cr_assert_eq(kafka_response_decode(resp + 4, resp_len - 4, KAFKA_PRODUCE_KEY, 7, &a, &out), 0);
	r = out.body;
	cr_assert_eq(r->Responses.count, 1);
	cr_assert_eq(r->Responses.items[0].PartitionResponses.count, 1);
	cr_assert_eq(r->Responses.items[0].PartitionResponses.items[0].ErrorCode, 0);
	cr_assert_eq(r->Responses.items[0].PartitionResponses.items[0].BaseOffset, 0);
	cr_assert_eq(md_part_owner(&mpart)->pl->next_offset, 3, "three records appended");
	cr_assert_eq(sh->stats.produce_records, 3);
	close(peer);
	peer = -1;
}

/* ---- connections.max.idle.ms: a timer on the injected clock ----------- */

static void setup_idle(void)
{
	idle_ms = 1000;
	setup();
}

TestSuite(shard_idle, .init = setup_idle, .fini = teardown, .timeout = 60);

Test(shard_idle, idle_connection_closes_after_the_injected_idle_time)
{
	int sv[2];
	uint64_t t0, t;

	shard_poll(sh, T0, 0);   /* the idle timer's first run */
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	conn_on_accept(sh, 0, sv[0], IORING_CQE_F_MORE);
	t0 = sh->now_ns;   /* its last activity: the turn it was accepted in */
	for (t = T0; t < T0 + 2000000000ull && !sh->stats.conns_idle_closed; t += 10000000ull) {
		shard_poll(sh, t, 0);
		if (t - t0 < 1000000000ull)
			cr_assert_eq(sh->stats.conns_idle_closed, 0, "closed at %llu ms",
				     (unsigned long long)((t - t0) / 1000000));
	}
	cr_assert_eq(sh->stats.conns_idle_closed, 1);
	/* looked at every idle.ms / 4: closed within 250 ms of its deadline */
	cr_assert_leq(t - t0, 1000000000ull + 250000000ull + 10000000ull);
	close(sv[1]);
}

/* ---- parking: wakes that change the list under the walk ---------------- */

/* Long-polling requests parked on a bare shard (no loop, no broker): each
 * wake counts itself and does what its test says. */
static struct shard psh;
static struct shard_park pks[4];
static int woken[4];
static int nest_from = -1;   /* this entry's wake wakes the shard's parked work (a self-sent message) */
static int free_from = -1;   /* this entry's wake unparks and poisons entry free_victim (a closed connection) */
static int free_victim = -1;
static int repark_from = -1; /* this entry's wake parks it again, due at once */

static void count_wake(struct shard_park *pk, int final)
{
	int i = (int)(pk - pks);

	(void)final;
	cr_assert_neq(pk->next, (void *)0xdead, "entry %d woken after its memory was freed", i);
	woken[i]++;
	if (i == nest_from)
		shard_wake_parked(&psh);
	if (i == free_from) {
		shard_unpark(&psh, &pks[free_victim]);
		pks[free_victim].next = (void *)0xdead;   /* as freed memory would read */
		pks[free_victim].wake = NULL;
	}
	if (i == repark_from)
		shard_park(&psh, pk, psh.now_ns);
}

static void park_all(int n, uint64_t deadline)
{
	memset(&psh, 0, sizeof(psh));
	memset(pks, 0, sizeof(pks));
	memset(woken, 0, sizeof(woken));
	psh.now_ns = 100;
	/* parked in reverse: the walk meets pks[0] first */
	for (int i = n - 1; i >= 0; i--) {
		pks[i].wake = count_wake;
		shard_park(&psh, &pks[i], deadline);
	}
}

Test(shard_park, a_wake_that_wakes_the_shard_again_wakes_each_entry_once)
{
	/* pks[0]'s wake wakes everything parked (its own fetch sent itself a
	 * watch message that found the partition deleted): the outer walk
	 * must not wake pks[1..2] a second time (a second answer to one
	 * request) */
	nest_from = 0;
	free_from = repark_from = -1;
	park_all(3, 50);
	shard_run_parked(&psh, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(woken[i], 1, "entry %d woken %d times", i, woken[i]);
	cr_assert_null(psh.parked);
	nest_from = -1;
}

Test(shard_park, a_wake_that_frees_the_next_entry_does_not_touch_it)
{
	/* pks[0]'s answer closes its connection, whose other parked request
	 * (pks[1], next in the walk) is unparked and freed */
	free_from = 0;
	free_victim = 1;
	nest_from = repark_from = -1;
	park_all(3, 50);
	shard_run_parked(&psh, 0);
	cr_assert_eq(woken[0], 1);
	cr_assert_eq(woken[1], 0);
	cr_assert_eq(woken[2], 1);
	cr_assert_null(psh.parked);
	free_from = -1;
}

Test(shard_park, an_entry_parked_again_by_its_wake_waits_for_the_next_pass_and_counts_as_due)
{
	/* pks[1] parks again, due at once: not woken twice in one pass (no
	 * loop), and the deadline returned says to come back now */
	repark_from = 1;
	nest_from = free_from = -1;
	park_all(3, 50);
	cr_assert_eq(shard_run_parked(&psh, 0), 100);
	cr_assert_eq(woken[0], 1);
	cr_assert_eq(woken[1], 1);
	cr_assert_eq(woken[2], 1);
	cr_assert_eq(psh.parked, &pks[1]);
	repark_from = -1;
	shard_stop_parked(&psh);
	cr_assert_eq(woken[1], 2);
	cr_assert_null(psh.parked);
}

Test(shard_park, only_due_entries_wake_and_the_nearest_deadline_is_returned)
{
	nest_from = free_from = repark_from = -1;
	park_all(3, 50);
	pks[1].deadline_ns = 300;
	pks[2].deadline_ns = 200;
	cr_assert_eq(shard_run_parked(&psh, 0), 200);
	cr_assert_eq(woken[0], 1);
	cr_assert_eq(woken[1] + woken[2], 0);
	psh.now_ns = 250;
	cr_assert_eq(shard_run_parked(&psh, 0), 300);
	cr_assert_eq(woken[2], 1);
	cr_assert_eq(shard_run_parked(&psh, 1), 0);
	cr_assert_eq(woken[1], 1);
}
