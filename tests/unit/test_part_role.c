/* tests/unit/test_part_role.c — a partition's leader and follower state
 * (dataplane/part_role.h) on a real shard and a real disk, polled in the
 * test's thread: the high watermark of a leader is the least of the ISR's
 * log ends (its own durable one included) and never moves back; acks=all
 * waits for it and acks=1 only for the leader's own write; a replica
 * fetch from a broker that is not a follower is refused; a follower that
 * does not catch up is asked out of the ISR and one that caught up back
 * in, not before it has the current epoch's start, nor once it stopped
 * fetching; acks=all fails when its time is out and when the leader becomes a
 * follower; a follower takes no produce and acknowledges nothing; a
 * follower's high watermark is the least of its leader's and
 * its own log end; a partition alone keeps the one-node way. */
#include <criterion/criterion.h>
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dataplane/part.h"
#include "dataplane/part_role.h"
#include "dataplane/shard.h"
#include "dataplane/shard_core.h"
#include "storage/batch.h"
#include "broker_fixture.h"
#include "helpers.h"

static struct broker b;
static struct shard *sh;
static char *dir;
static struct plog_config cfg;

static void setup(void)
{
	dir = test_broker_init(&b, -1);
	sh = test_shard_start(&b);
	plog_config_defaults(&cfg);
	sh->now_ns = 1000000000ull;
}

static void teardown(void)
{
	test_shard_stop(&b, sh, 0, 0, dir);
	sh = NULL;
}

TestSuite(part_role, .init = setup, .fini = teardown, .timeout = 120);

static struct part *open_part(const char *name)
{
	char path[4300];
	struct part *p;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	cr_assert_eq(part_open(sh, path, name, 0, &cfg, &p), 0);
	p->next = sh->parts;
	sh->parts = p;
	return p;
}

/* The answers of the produces, by slot. */
#define SLOTS 16
static int answered[SLOTS], answer_err[SLOTS];
static int64_t answer_base[SLOTS];

static void produced(struct shard *owner, void *cookie, int64_t base, int64_t log_start, int err)
{
	int i = (int)(intptr_t)cookie;

	(void)owner;
	(void)log_start;
	answered[i]++;
	answer_err[i] = err;
	answer_base[i] = base;
}

/* One record with acks and min.insync.replicas, answered into slot i. */
static void produce_min(struct part *p, int acks, int32_t timeout_ms, int32_t min_insync, int i)
{
	uint8_t buf[512];
	struct batch_builder bb;
	ssize_t len;
	struct part_produce_req req = { .rec = buf, .acks = acks, .recv_ns = sh->now_ns, .timeout_ms = timeout_ms,
					.min_insync = min_insync };

	batch_builder_init(&bb, buf, sizeof(buf), 1000);
	cr_assert_eq(batch_builder_add(&bb, 0, 1000, "k", 1, "value", 5, NULL, 0, 0), 0);
	len = batch_builder_finish(&bb, 0, -1, -1, -1, -1);
	cr_assert_gt(len, 0);
	req.len = (uint32_t)len;
	answered[i] = 0;
	part_produce(p, &req, produced, (void *)(intptr_t)i);
}

/* One record with acks (no min.insync.replicas check), into slot i. */
static void produce(struct part *p, int acks, int32_t timeout_ms, int i)
{
	produce_min(p, acks, timeout_ms, 0, i);
}

/* ISR changes the leader asked for (its isr_change, run inline: the
 * test's shard is its own receiver). */
static int asks, ask_join;
static int32_t ask_broker, ask_epoch;

static void isr_asked(void *self, struct shard_msg *m)
{
	(void)self;
	asks++;
	ask_broker = (int32_t)m->v[1];
	ask_join = (int)m->v[2];
	ask_epoch = (int32_t)m->v[3];
}

static void set_role(struct part *p, int32_t leader, int32_t epoch, const int32_t *replicas, int nr,
		     const int32_t *isr, int ni)
{
	struct part_role_msg m = { .self = 1, .leader = leader, .leader_epoch = epoch, .nreplicas = nr,
				   .nisr = ni, .isr_change = isr_asked, .isr_to = 0 };

	memcpy(m.replicas, replicas, (size_t)nr * sizeof(*replicas));
	memcpy(m.isr, isr, (size_t)ni * sizeof(*isr));
	snprintf(m.leader_host, sizeof(m.leader_host), "127.0.0.1");
	m.leader_port = 9093;
	cr_assert_eq(part_role_set(p, &m), 0);
}

static const int32_t three[] = { 1, 2, 3 };

Test(part_role, the_high_watermark_is_the_least_of_the_isr_log_ends)
{
	struct part *p = open_part("t-0");

	set_role(p, 1, 0, three, 3, three, 3);
	cr_assert_not_null(p->role);
	cr_assert_eq(sh->repl_parts, 1);
	for (int i = 0; i < 4; i++)
		produce(p, -1, 30000, i);
	produce(p, 1, 30000, 4);            /* acks=1 behind them */
	store_drain(&sh->st);
	cr_assert_eq(p->pl->durable_offset, 5, "the leader's own write is done");
	cr_assert_eq(p->pl->high_watermark, 0, "no follower has fetched yet");
	for (int i = 0; i < 4; i++)
		cr_assert_eq(answered[i], 0, "acks=all waits for the ISR (%d)", i);
	cr_assert_eq(answered[4], 1, "acks=1 behind them: answered once durable");
	cr_assert_eq(answer_base[4], 4);

	cr_assert_eq(part_role_replica_fetch(p, 2, 3, sh->now_ns), 0);
	cr_assert_eq(p->pl->high_watermark, 0, "broker 3 has not fetched");
	cr_assert_eq(part_role_replica_fetch(p, 3, 5, sh->now_ns), 0);
	cr_assert_eq(p->pl->high_watermark, 3, "min(5 durable, 3, 5)");
	for (int i = 0; i < 3; i++)
		cr_assert_eq(answered[i], 1, "offsets below 3 are on every ISR member (%d)", i);
	cr_assert_eq(answer_base[2], 2);
	cr_assert_eq(answered[3], 0);

	cr_assert_eq(part_role_replica_fetch(p, 2, 5, sh->now_ns), 0);
	cr_assert_eq(p->pl->high_watermark, 5);
	cr_assert_eq(answered[3], 1);
	cr_assert_eq(answered[4], 1, "answered once, not again when the queue reached it");
	cr_assert_eq(answer_err[3], 0);

	/* a follower that went back (it cut its log) moves nothing back */
	cr_assert_eq(part_role_replica_fetch(p, 2, 4, sh->now_ns), 0);
	cr_assert_eq(p->pl->high_watermark, 5, "never back");
	/* a fetch past the log end teaches nothing */
	cr_assert_eq(part_role_replica_fetch(p, 3, 99, sh->now_ns), 0);
	cr_assert_eq(p->role->f[1].leo, 5);
}

/* Kafka's DelayedProduce: an acks=all batch the high watermark passed
 * while the ISR had shrunk below min.insync.replicas is not acknowledged
 * (the leader alone, cut off from its followers, shrank it to itself). */
Test(part_role, acks_all_past_the_high_watermark_with_an_isr_below_min_insync_is_not_enough_replicas)
{
	struct part *p = open_part("t-0");
	const int32_t alone[1] = { 1 };

	set_role(p, 1, 0, three, 3, three, 3);
	produce_min(p, -1, 30000, 2, 0);
	store_drain(&sh->st);
	cr_assert_eq(answered[0], 0, "waits for the ISR");
	/* the ISR shrinks to the leader: the high watermark is its own log end */
	set_role(p, 1, 0, three, 3, alone, 1);
	store_drain(&sh->st);
	cr_assert_eq(p->pl->high_watermark, 1);
	cr_assert_eq(answered[0], 1);
	cr_assert_eq(answer_err[0], PART_ERR_AFTER_APPEND, "acknowledged by the leader alone (%d)", answer_err[0]);
	cr_assert_eq(part_err_to_kafka(PART_ERR_AFTER_APPEND), KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND);
	/* min.insync.replicas 1: the leader alone is enough */
	produce_min(p, -1, 30000, 1, 1);
	store_drain(&sh->st);
	cr_assert_eq(answered[1], 1);
	cr_assert_eq(answer_err[1], 0);
	cr_assert_eq(answer_base[1], 1);
}

Test(part_role, acks_1_waits_only_for_the_leaders_own_write)
{
	struct part *p = open_part("t-0");

	set_role(p, 1, 0, three, 3, three, 3);
	produce(p, 1, 30000, 0);
	store_drain(&sh->st);
	cr_assert_eq(answered[0], 1);
	cr_assert_eq(answer_base[0], 0);
	cr_assert_eq(p->pl->high_watermark, 0, "consumers still see only what the ISR has");
}

Test(part_role, a_fetch_from_a_broker_that_is_no_follower_is_refused)
{
	struct part *p = open_part("t-0"), *alone = open_part("u-0");
	const int32_t two[] = { 1, 2 }, me[] = { 1 };

	set_role(p, 1, 0, two, 2, two, 2);
	cr_assert_eq(part_role_replica_fetch(p, 9, 0, sh->now_ns), -ENOENT, "not a replica");
	cr_assert_eq(part_role_replica_fetch(p, 1, 0, sh->now_ns), -ENOENT, "the leader itself");
	cr_assert_eq(part_role_replica_fetch(alone, 2, 0, sh->now_ns), -ENOENT, "a partition alone has none");
	set_role(alone, 1, 0, me, 1, me, 1);
	cr_assert_null(alone->role, "alone: the one-node way");
	cr_assert_eq(sh->repl_parts, 1);
	produce(alone, -1, 30000, 0);
	store_drain(&sh->st);
	cr_assert_eq(answered[0], 1, "acks=all alone: its own durable write");
	cr_assert_eq(alone->pl->high_watermark, 1);
	/* a follower's partition answers no replica fetch */
	set_role(p, 2, 1, two, 2, two, 2);
	cr_assert_eq(part_role_replica_fetch(p, 2, 0, sh->now_ns), -ENOENT);
}

Test(part_role, a_lagging_follower_is_asked_out_of_the_isr_and_back_in)
{
	struct part *p = open_part("t-0");
	const int32_t isr_less_3[] = { 1, 2 };
	uint64_t lag = 30000ull * 1000000ull;
	static struct part_pub pub;

	p->pub = &pub;                      /* the scrape's words */
	set_role(p, 1, 4, three, 3, three, 3);
	cr_assert_eq(p->pl->leader_epoch, 4, "a leader's epoch moves the log's");
	produce(p, -1, 120000, 0);          /* (its timeout outlasts the lag time) */
	store_drain(&sh->st);
	asks = 0;
	sh->now_ns += lag / 2;
	cr_assert_eq(part_role_replica_fetch(p, 2, 1, sh->now_ns), 0);   /* 2 caught up */
	cr_assert_eq(part_role_replica_fetch(p, 3, 0, sh->now_ns), 0);   /* 3 behind */
	part_role_tick(p, sh->now_ns, lag);
	cr_assert_eq(asks, 0, "within replica.lag.time.max.ms");
	sh->now_ns += lag / 2 + 1000000;
	part_role_tick(p, sh->now_ns, lag);
	cr_assert_eq(asks, 1, "3 has not caught up for the lag time");
	cr_assert_eq(pub.follower_lag, 1, "3 lacks one record");
	cr_assert_eq(pub.follower_lag_ms, 30001, "3 not caught up since the role began: %lld ms",
		     (long long)pub.follower_lag_ms);
	cr_assert_eq(ask_broker, 3);
	cr_assert_eq(ask_join, 0);
	cr_assert_eq(ask_epoch, 4);
	cr_assert_eq(answered[0], 0, "still waiting for 3");
	part_role_tick(p, sh->now_ns + 1000000, lag);
	cr_assert_eq(asks, 1, "asked once, not every tick");

	/* the control thread applied it: the new ISR comes back as a role */
	set_role(p, 1, 4, three, 3, isr_less_3, 2);
	cr_assert_eq(p->pl->high_watermark, 1, "without 3: what 1 and 2 have");
	cr_assert_eq(answered[0], 1);
	cr_assert_eq(answer_err[0], 0);
	cr_assert_eq(p->role->f[0].leo, 1, "the same leadership keeps the followers' progress");

	/* 3 catches up to the high watermark: asked back in */
	cr_assert_eq(part_role_replica_fetch(p, 3, 1, sh->now_ns), 0);
	cr_assert_eq(asks, 2);
	cr_assert_eq(ask_broker, 3);
	cr_assert_eq(ask_join, 1);
	part_role_tick(p, sh->now_ns + 1000000, lag);
	cr_assert_eq(pub.follower_lag_ms, 0, "every follower has the log end");
	cr_assert_eq(asks, 2, "the join is in flight");
	/* no role came back (refused: a fenced broker): asked again after a
	 * second, not after the lag time */
	sh->now_ns += 1100000000ull;
	cr_assert_eq(part_role_replica_fetch(p, 3, 1, sh->now_ns), 0);
	part_role_tick(p, sh->now_ns, lag);
	cr_assert_eq(asks, 3);
	cr_assert_eq(ask_join, 1);
	p->pub = NULL;
}

Test(part_role, a_follower_that_stopped_fetching_is_not_asked_back_in)
{
	struct part *p = open_part("t-0");
	const int32_t isr13[] = { 1, 3 };
	uint64_t lag = 3000ull * 1000000ull;

	set_role(p, 1, 4, three, 3, three, 3);
	cr_assert_eq(part_role_replica_fetch(p, 2, 0, sh->now_ns), 0);
	cr_assert_eq(part_role_replica_fetch(p, 3, 0, sh->now_ns), 0);
	/* 2 is cut off; 3 fetches on */
	asks = 0;
	for (int i = 0; i < 2; i++) {
		sh->now_ns += lag / 2 + 1000000;
		cr_assert_eq(part_role_replica_fetch(p, 3, 0, sh->now_ns), 0);
		part_role_tick(p, sh->now_ns, lag);
	}
	cr_assert_eq(asks, 1);
	cr_assert_eq(ask_broker, 2);
	cr_assert_eq(ask_join, 0);
	set_role(p, 1, 4, three, 3, isr13, 2);
	/* its log end is still the high watermark, but it fetches no more */
	for (int i = 0; i < 4; i++) {
		sh->now_ns += lag / 2 + 1000000;
		cr_assert_eq(part_role_replica_fetch(p, 3, 0, sh->now_ns), 0);
		part_role_tick(p, sh->now_ns, lag);
	}
	cr_assert_eq(asks, 1, "a follower cut off is not asked back in (asked %d, last broker %d join %d)",
		     asks, ask_broker, ask_join);
	/* it fetches again: in */
	cr_assert_eq(part_role_replica_fetch(p, 2, 0, sh->now_ns), 0);
	cr_assert_eq(asks, 2);
	cr_assert_eq(ask_broker, 2);
	cr_assert_eq(ask_join, 1);
}

Test(part_role, acks_all_fails_on_time_out_and_when_leadership_goes)
{
	struct part *p = open_part("t-0");

	set_role(p, 1, 0, three, 3, three, 3);
	produce(p, -1, 100, 0);
	produce(p, -1, 30000, 1);
	store_drain(&sh->st);
	part_role_tick(p, sh->now_ns + 50000000ull, 30000ull * 1000000ull);
	cr_assert_eq(answered[0], 0);
	part_role_tick(p, sh->now_ns + 100000000ull, 30000ull * 1000000ull);
	cr_assert_eq(answered[0], 1, "past its timeout");
	cr_assert_eq(answer_err[0], PART_ERR_TIMED_OUT);
	cr_assert_eq(answered[1], 0);
	/* broker 2 leads now: what waits is answered NOT_LEADER_OR_FOLLOWER */
	set_role(p, 2, 1, three, 3, three, 3);
	cr_assert_eq(answered[1], 1);
	cr_assert_eq(answer_err[1], PART_ERR_NOT_LEADER);
	cr_assert_eq(part_err_to_kafka(PART_ERR_NOT_LEADER), KERR_NOT_LEADER_OR_FOLLOWER);
	cr_assert_eq(part_err_to_kafka(PART_ERR_TIMED_OUT), KERR_REQUEST_TIMED_OUT);
}

/* The deposed leader, resumed from a pause: the connection's shard still
 * read "led here" in its metadata while the owner already followed the
 * new leader. The produce is refused (NOT_LEADER_OR_FOLLOWER), nothing is
 * appended; before, it was appended with the old epoch, cut as divergent,
 * and acknowledged when the follower's high watermark passed what the new
 * leader had written at the same offsets: an acknowledged record lost. */
Test(part_role, a_produce_reaching_a_follower_is_refused_and_never_acknowledged)
{
	struct part *p = open_part("t-0");

	set_role(p, 1, 4, three, 3, three, 3);
	produce(p, -1, 30000, 0);
	set_role(p, 2, 5, three, 3, three, 3);   /* deposed: the waiting one fails */
	cr_assert_eq(answered[0], 1);
	cr_assert_eq(answer_err[0], PART_ERR_NOT_LEADER);
	for (int i = 1; i < 4; i++)
		produce(p, i == 1 ? -1 : i == 2 ? 1 : 0, 30000, i);   /* acks=all, 1, 0 */
	store_drain(&sh->st);
	for (int i = 1; i < 4; i++) {
		cr_assert_eq(answered[i], 1, "answered at once (%d)", i);
		cr_assert_eq(answer_err[i], PART_ERR_NOT_LEADER, "refused (%d): %d", i, answer_err[i]);
		cr_assert_eq(answer_base[i], -1);
	}
	cr_assert_eq(p->pl->next_offset, 1, "nothing appended on the follower");
	/* the leader's high watermark passing those offsets answers nothing */
	p->role->hw = 100;
	part_progress(p);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(answered[i], 1, "answered once (%d)", i);

	/* and a wait that reached a follower anyway is never called done */
	struct ack_wait w = { .need = 1, .base_offset = 0, .done = produced, .cookie = (void *)(intptr_t)4 };

	answered[4] = 0;
	cr_assert_eq(part_wait_ack(p, &w), 0);
	part_progress(p);
	cr_assert_eq(answered[4], 1);
	cr_assert_eq(answer_err[4], PART_ERR_NOT_LEADER);
}

Test(part_role, a_followers_high_watermark_is_its_leaders_within_its_own_log)
{
	struct part *p = open_part("t-0");

	set_role(p, 2, 3, three, 3, three, 3);
	cr_assert_eq(p->role->leading, 0);
	cr_assert_str_eq(p->role->leader_host, "127.0.0.1");
	cr_assert_eq(p->role->leader_port, 9093);
	/* what the fetcher does with an answer: the leader's high watermark */
	p->role->hw = 100;
	part_progress(p);
	cr_assert_eq(p->pl->high_watermark, 0, "nothing of its own yet");
}

Test(part_role, a_follower_joins_the_isr_only_with_what_the_leadership_began_with)
{
	struct part *p = open_part("t-0");
	const int32_t isr12[] = { 1, 2 };

	/* a follower (of 2) with three records its leader never said were
	 * committed (written while it led, at the same epoch): its high
	 * watermark stays 0 */
	set_role(p, 1, 0, three, 3, three, 3);
	for (int i = 0; i < 3; i++)
		produce(p, 0, 30000, i);
	set_role(p, 2, 0, three, 3, three, 3);
	store_drain(&sh->st);
	cr_assert_eq(p->pl->high_watermark, 0);
	/* elected at epoch 5 (it starts at offset 3), broker 3 out of the ISR */
	set_role(p, 1, 5, three, 3, isr12, 2);
	cr_assert_eq(p->pl->leader_epoch, 5);
	asks = 0;
	cr_assert_eq(part_role_replica_fetch(p, 3, 1, sh->now_ns), 0);
	cr_assert_eq(asks, 0, "at the high watermark but below the epoch's start: not in sync");
	part_role_tick(p, sh->now_ns, 30000ull * 1000000ull);
	cr_assert_eq(asks, 0);
	cr_assert_eq(part_role_replica_fetch(p, 3, 3, sh->now_ns), 0);
	cr_assert_eq(asks, 1, "it has the epoch's start: asked in");
	cr_assert_eq(ask_join, 1);
}

/* Answers counted by outcome (for many produces). */
static int many_ok, many_err, many_last_err;

static void produced_many(struct shard *owner, void *cookie, int64_t base, int64_t log_start, int err)
{
	(void)owner;
	(void)cookie;
	(void)base;
	(void)log_start;
	if (err)
		many_err++, many_last_err = err;
	else
		many_ok++;
}

/* More acks=all produces waiting than the partition's answer ring holds:
 * the one past it is refused before its append (REQUEST_TIMED_OUT), and
 * none is called acknowledged before the ISR has it (the ring's overflow
 * used to answer as acks=0 did: success, unreplicated). */
Test(part_role, acks_all_past_the_answer_ring_is_refused_not_acknowledged)
{
	struct part *p = open_part("t-0");
	uint8_t buf[512];
	struct batch_builder bb;
	ssize_t len;
	int64_t end;

	set_role(p, 1, 0, three, 3, three, 3);
	batch_builder_init(&bb, buf, sizeof(buf), 1000);
	cr_assert_eq(batch_builder_add(&bb, 0, 1000, "k", 1, "value", 5, NULL, 0, 0), 0);
	len = batch_builder_finish(&bb, 0, -1, -1, -1, -1);
	cr_assert_gt(len, 0);
	many_ok = many_err = 0;
	for (uint32_t i = 0; i <= p->ack_cap; i++) {
		struct part_produce_req req = { .rec = buf, .len = (uint32_t)len, .acks = -1, .recv_ns = sh->now_ns,
						.timeout_ms = 30000 };

		part_produce(p, &req, produced_many, NULL);
		if (i % 256 == 0)
			store_drain(&sh->st);
	}
	store_drain(&sh->st);
	cr_assert_eq(many_ok, 0, "%d answered as acknowledged before the ISR had them", many_ok);
	cr_assert_eq(many_err, 1, "the one past the ring");
	cr_assert_eq(kafka_append_error(many_last_err), KERR_REQUEST_TIMED_OUT);
	end = p->pl->next_offset;
	cr_assert_eq(end, (int64_t)p->ack_cap, "the refused one was not appended");
	/* the followers catch up: every waiting one is acknowledged */
	cr_assert_eq(part_role_replica_fetch(p, 2, end, sh->now_ns), 0);
	cr_assert_eq(part_role_replica_fetch(p, 3, end, sh->now_ns), 0);
	store_drain(&sh->st);
	cr_assert_eq(many_ok, (int)p->ack_cap);
}

static void close_part(struct part *p)
{
	struct part **pp = &sh->parts;

	while (*pp != p)
		pp = &(*pp)->next;
	*pp = p->next;
	part_close(p);
}

static int file_has(const char *sub, const char *want)
{
	char path[4300], buf[64] = { 0 };
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/" PART_HW_FILE, dir, sub);
	if (!(f = fopen(path, "r")))
		return want == NULL;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return want && !strcmp(buf, want);
}

/* Kafka's replication-offset-checkpoint: a partition with a role writes
 * its high watermark on the shard's tick and at a clean close; reopened,
 * its first role starts the high watermark there (the least of it and
 * the log end), not at the log end: as a follower, and as a leader whose
 * followers have not fetched. Without the file (one node: none is
 * written), the log end as before; a partition alone forgets it. */
Test(part_role, a_restarted_partition_starts_from_its_high_watermark_checkpoint)
{
	struct part *p = open_part("t-0");
	static const int32_t one[] = { 1 };

	for (int i = 0; i < 5; i++)
		produce(p, 1, 30000, i);
	store_drain(&sh->st);
	cr_assert_eq(p->pl->next_offset, 5);
	part_hw_checkpoint(p);
	cr_assert(file_has("t-0", NULL), "no role: nothing written");
	/* a follower that learned its leader's high watermark 3 */
	set_role(p, 2, 3, three, 3, three, 3);
	p->role->hw = 3;
	part_progress(p);
	cr_assert_eq(p->pl->high_watermark, 3);
	part_hw_checkpoint(p);
	store_drain(&sh->st);
	while (plog_saving_file(p->pl, PART_HW_FILE))
		store_poll(&sh->st, 1);
	cr_assert(file_has("t-0", PART_HW_TAG "3\n"));
	close_part(p);

	p = open_part("t-0");
	cr_assert_eq(p->hw_ckpt, 3);
	cr_assert_eq(p->pl->high_watermark, 5, "no role yet: as before");
	set_role(p, 2, 3, three, 3, three, 3);
	cr_assert_eq(p->pl->high_watermark, 3, "a follower starts from the checkpoint, not the log end");
	p->role->hw = 4;                  /* its first fetch's answer */
	part_progress(p);
	cr_assert_eq(p->pl->high_watermark, 4);
	close_part(p);                    /* a clean close writes it */
	cr_assert(file_has("t-0", PART_HW_TAG "4\n"));

	p = open_part("t-0");
	set_role(p, 1, 4, three, 3, three, 3);
	cr_assert_eq(p->pl->high_watermark, 4, "a leader too, until its followers fetch");
	cr_assert_eq(part_role_replica_fetch(p, 2, 5, sh->now_ns), 0);
	cr_assert_eq(part_role_replica_fetch(p, 3, 5, sh->now_ns), 0);
	cr_assert_eq(p->pl->high_watermark, 5);
	/* alone: the file goes, the high watermark is the durable end */
	set_role(p, 1, 5, one, 1, one, 1);
	cr_assert(file_has("t-0", NULL), "a partition alone has no checkpoint");
	cr_assert_eq(p->pl->high_watermark, 5);
	close_part(p);
	cr_assert(file_has("t-0", NULL), "none written without a role");

	/* a checkpoint above the log end (the log was cut since): the log end */
	{
		char path[4300];
		FILE *f;

		snprintf(path, sizeof(path), "%s/t-0/" PART_HW_FILE, dir);
		f = fopen(path, "w");
		fputs(PART_HW_TAG "99\n", f);
		fclose(f);
	}
	p = open_part("t-0");
	set_role(p, 2, 6, three, 3, three, 3);
	cr_assert_eq(p->pl->high_watermark, 5);
	close_part(p);
}
