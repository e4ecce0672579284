/* tests/integration/test_groups_fencing.c — the two invariants of the
 * consumer-group design against a real build/sluiced (issue 5): an offset
 * is the next record to read (a librdkafka consumer commits after offset 9,
 * the committed offset is 10, a restarted consumer replays from 10), and a
 * stale owner's commit is refused (raw classic-protocol JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup and OffsetCommit frames walk a group
 * through its generations; a commit from an older generation, an unknown
 * member or a member mid-rebalance gets Kafka's error and changes
 * nothing; a commit to a group with no members, as the simple consumer
 * API makes, is kept).
 *
 * Each test starts its own broker (harness.h) with the settings of
 * groups_common.h. The member-process suites (joining, leaving and dying
 * under production) are in test_groups.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "tests/integration/groups_common.h"
#include "tests/integration/harness.h"

/* ---- librdkafka in the test process ---------------------------------- */

static void produce_n(rd_kafka_t *rk, const char *topic, int32_t partition, int n)
{
	for (int i = 0; i < n; i++) {
		char v[32];
		int len = snprintf(v, sizeof(v), "p%d-r%d", partition, i);
		rd_kafka_resp_err_t err;

		err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
					RD_KAFKA_V_VALUE(v, (size_t)len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
					RD_KAFKA_V_END);
		cr_assert_eq(err, 0, "producev: %s", rd_kafka_err2str(err));
	}
}

static void flush_ok(rd_kafka_t *rk)
{
	while (rd_kafka_outq_len(rk) > 0)
		rd_kafka_flush(rk, 1000);
}

/* ---- 1. the design invariant: offset = next record to read ------------ */

Test(groups, commit_after_offset_9_is_10_and_restart_replays_from_10, .timeout = 60)
{
	struct broker_proc b;
	rd_kafka_t *prod, *rk;
	rd_kafka_topic_partition_list_t *l;
	rd_kafka_message_t *last = NULL;
	int64_t expect = 0, first_p0 = -1, first_p1 = -1, end = now_us() + 30000000;

	broker_launch(&b, group_broker_args);
	prod = harness_producer(&b, NULL, NULL, NULL);
	harness_create_topic(prod, "inv", 2);
	produce_n(prod, "inv", 0, 12);
	produce_n(prod, "inv", 1, 12);
	flush_ok(prod);
	rd_kafka_destroy(prod);

	/* process partition 1 in order up to and including offset 9, then
	 * commit after processing (librdkafka commits offset + 1) */
	rk = harness_group_consumer(&b, "g-invariant", "inv", NULL);
	while (expect <= 9) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);

		cr_assert_lt(now_us(), end, "partition 1 offsets 0..9 not consumed in 30 s");
		if (!m)
			continue;
		cr_assert_eq(m->err, 0, "consume: %s", rd_kafka_message_errstr(m));
		if (m->partition == 1) {
			cr_assert_eq(m->offset, expect, "partition 1: offset %lld where %lld was next",
				     (long long)m->offset, (long long)expect);
			expect++;
			if (m->offset == 9) {
				last = m;
				break;
			}
		}
		rd_kafka_message_destroy(m);
	}
	cr_assert_eq(rd_kafka_commit_message(rk, last, 0), 0, "commit after processing offset 9");
	rd_kafka_message_destroy(last);

	l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, "inv", 1);
	cr_assert_eq(rd_kafka_committed(rk, l, 10000), 0);
	cr_assert_eq(l->elems[0].err, 0, "committed: %s", rd_kafka_err2str(l->elems[0].err));
	cr_assert_eq(l->elems[0].offset, 10, "committed offset after processing 7, 8 and 9 is %lld, not 10",
		     (long long)l->elems[0].offset);
	rd_kafka_topic_partition_list_destroy(l);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);

	/* a restarted consumer of the group replays from 10 (and partition
	 * 0, never committed, from the earliest offset) */
	rk = harness_group_consumer(&b, "g-invariant", "inv", NULL);
	end = now_us() + 30000000;
	while (first_p1 < 0 || first_p0 < 0) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);

		cr_assert_lt(now_us(), end, "the restarted consumer got nothing in 30 s");
		if (!m)
			continue;
		cr_assert_eq(m->err, 0, "consume: %s", rd_kafka_message_errstr(m));
		if (m->partition == 1 && first_p1 < 0)
			first_p1 = m->offset;
		if (m->partition == 0 && first_p0 < 0)
			first_p0 = m->offset;
		rd_kafka_message_destroy(m);
	}
	cr_assert_eq(first_p1, 10, "the restarted consumer replays partition 1 from %lld, not 10",
		     (long long)first_p1);
	cr_assert_eq(first_p0, 0, "partition 0 (never committed) starts at %lld", (long long)first_p0);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	broker_cleanup(&b);
}

/* ---- 2. fencing, with raw classic-protocol frames --------------------- */

/* One member of the classic protocol on its own connection. */
struct rawmember {
	const char *name;
	int fd;
	char id[256];
	int32_t gen;
	char leader[256];
	uint32_t mask;           /* the partitions of "orders" it was assigned */
};

/* JoinGroup v5 for "orders" with the range protocol; sends only (the
 * response may wait for the other members). Returns the correlation id. */
static int32_t join_send(struct rawmember *m, const char *group)
{
	struct rawbuf r, meta;
	int32_t corr;

	/* ConsumerProtocolSubscription v0: topics, user data */
	rb_init(&meta);
	rb_i16(&meta, 0);
	rb_i32(&meta, 1);
	rb_str(&meta, "orders");
	rb_blob(&meta, NULL, -1);

	corr = raw_begin(&r, 11, 5);
	rb_str(&r, group);
	rb_i32(&r, 10000);       /* session timeout */
	rb_i32(&r, 10000);       /* rebalance timeout */
	rb_str(&r, m->id);
	rb_str(&r, NULL);        /* group instance id: dynamic member */
	rb_str(&r, "consumer");
	rb_i32(&r, 1);
	rb_str(&r, "range");
	rb_blob(&r, meta.p, (int32_t)meta.len);
	rb_free(&meta);
	raw_send_req(m->fd, &r);
	return corr;
}

static int16_t join_recv(struct rawmember *m, int32_t corr, int *nmembers)
{
	uint8_t *buf;
	struct rawcur c = raw_recv_answer(m->fd, corr, &buf, "JoinGroup");
	char proto[64];
	int16_t err;
	int32_t n;

	rc_i32(&c);              /* throttle */
	err = rc_i16(&c);
	m->gen = rc_i32(&c);
	rc_str(&c, proto, sizeof(proto));
	rc_str(&c, m->leader, sizeof(m->leader));
	rc_str(&c, m->id, sizeof(m->id));
	n = rc_i32(&c);
	for (int32_t i = 0; i < n && !c.bad; i++) {
		int32_t ml;

		rc_skip_str(&c); /* member id */
		rc_skip_str(&c); /* group instance id */
		ml = rc_i32(&c);
		rc_take(&c, ml > 0 ? (size_t)ml : 0);
	}
	raw_end(&c, buf, "JoinGroup v5");
	if (!err)
		cr_assert_str_eq(proto, "range", "%s: protocol %s chosen", m->name, proto);
	if (nmembers)
		*nmembers = n;
	return err;
}

/* Join alone or into a stable group: MEMBER_ID_REQUIRED first (v4+), then
 * join with the id it gave. Sends the second JoinGroup and returns its
 * correlation id (the response comes when the group has rejoined). */
static int32_t join_new_member(struct rawmember *m, const char *group)
{
	int32_t corr = join_send(m, group);
	int16_t err = join_recv(m, corr, NULL);

	cr_assert_eq(err, ERR_MEMBER_ID_REQUIRED, "%s: first JoinGroup v5 answered %d, not MEMBER_ID_REQUIRED",
		     m->name, err);
	cr_assert_gt(strlen(m->id), 0, "%s: MEMBER_ID_REQUIRED without a member id", m->name);
	return join_send(m, group);
}

/* ConsumerProtocolAssignment v0 of "orders" partitions in mask. */
static void assignment_bytes(struct rawbuf *a, uint32_t mask)
{
	int n = __builtin_popcount(mask);

	rb_init(a);
	rb_i16(a, 0);
	rb_i32(a, n ? 1 : 0);
	if (n) {
		rb_str(a, "orders");
		rb_i32(a, n);
		for (int p = 0; p < 32; p++)
			if (mask & (1u << p))
				rb_i32(a, p);
	}
	rb_blob(a, NULL, -1);
}

/* SyncGroup v3; the leader (whichever member the coordinator chose) sends
 * every member's assignment, the others none. Sends only. */
static int32_t sync_send(struct rawmember *m, const char *group, struct rawmember **all, const uint32_t *masks,
			 int n)
{
	struct rawbuf r;
	int32_t corr = raw_begin(&r, 14, 3);
	int leader = !strcmp(m->leader, m->id);

	rb_str(&r, group);
	rb_i32(&r, m->gen);
	rb_str(&r, m->id);
	rb_str(&r, NULL);
	rb_i32(&r, leader ? n : 0);
	for (int i = 0; leader && i < n; i++) {
		struct rawbuf a;

		assignment_bytes(&a, masks[i]);
		rb_str(&r, all[i]->id);
		rb_blob(&r, a.p, (int32_t)a.len);
		rb_free(&a);
	}
	raw_send_req(m->fd, &r);
	return corr;
}

static int16_t sync_recv(struct rawmember *m, int32_t corr)
{
	uint8_t *buf;
	struct rawcur c = raw_recv_answer(m->fd, corr, &buf, "SyncGroup");
	int16_t err;
	int32_t alen;

	rc_i32(&c);
	err = rc_i16(&c);
	alen = rc_i32(&c);
	m->mask = 0;
	if (alen > 0) {
		struct rawcur a = { rc_take(&c, (size_t)alen), NULL, 0 };
		int32_t nt;

		cr_assert_not_null(a.p, "%s: SyncGroup assignment past the frame", m->name);
		a.end = a.p + alen;
		rc_i16(&a);      /* version */
		nt = rc_i32(&a);
		for (int32_t t = 0; t < nt && !a.bad; t++) {
			char topic[64];
			int32_t np;

			rc_str(&a, topic, sizeof(topic));
			np = rc_i32(&a);
			for (int32_t i = 0; i < np && !a.bad; i++) {
				int32_t p = rc_i32(&a);

				if (!strcmp(topic, "orders") && p >= 0 && p < 32)
					m->mask |= 1u << p;
			}
		}
		cr_assert(!a.bad, "%s: malformed assignment in SyncGroup", m->name);
	}
	raw_end(&c, buf, "SyncGroup v3");
	return err;
}

static int16_t heartbeat(struct rawmember *m, const char *group)
{
	struct rawbuf r;
	int32_t corr = raw_begin(&r, 12, 3);

	rb_str(&r, group);
	rb_i32(&r, m->gen);
	rb_str(&r, m->id);
	rb_str(&r, NULL);
	return raw_error_call(m->fd, &r, corr, "Heartbeat v3");
}

static int16_t leave(struct rawmember *m, const char *group)
{
	struct rawbuf r;
	int32_t corr = raw_begin(&r, 13, 1);

	rb_str(&r, group);
	rb_str(&r, m->id);
	return raw_error_call(m->fd, &r, corr, "LeaveGroup v1");
}

/* OffsetCommit v7 of one partition; returns the partition's error. */
static int16_t commit_raw(int fd, const char *group, int32_t gen, const char *member, const char *topic,
			  int32_t partition, int64_t offset, const char *metadata)
{
	struct rawbuf r;
	int32_t corr = raw_begin(&r, 8, 7);
	uint8_t *buf;
	struct rawcur c;
	int16_t err;

	rb_str(&r, group);
	rb_i32(&r, gen);
	rb_str(&r, member);
	rb_str(&r, NULL);        /* group instance id */
	rb_i32(&r, 1);
	rb_str(&r, topic);
	rb_i32(&r, 1);
	rb_i32(&r, partition);
	rb_i64(&r, offset);
	rb_i32(&r, -1);          /* leader epoch */
	rb_str(&r, metadata);
	raw_send_req(fd, &r);
	c = raw_recv_answer(fd, corr, &buf, "OffsetCommit");
	raw_one_partition(&c, "OffsetCommit", topic, partition);
	err = rc_i16(&c);
	raw_end(&c, buf, "OffsetCommit v7");
	return err;
}

/* OffsetFetch v5 of one partition: the committed offset (-1 none), its
 * metadata into meta. Asserts no error. */
static int64_t fetch_committed(int fd, const char *group, const char *topic, int32_t partition, char *meta,
			       size_t metacap)
{
	struct rawbuf r;
	int32_t corr = raw_begin(&r, 9, 5);
	uint8_t *buf;
	struct rawcur c;
	int64_t off;
	int16_t perr, err;

	rb_str(&r, group);
	rb_i32(&r, 1);
	rb_str(&r, topic);
	rb_i32(&r, 1);
	rb_i32(&r, partition);
	raw_send_req(fd, &r);
	c = raw_recv_answer(fd, corr, &buf, "OffsetFetch");
	raw_one_partition(&c, "OffsetFetch", topic, partition);
	off = rc_i64(&c);
	rc_i32(&c);              /* leader epoch */
	rc_str(&c, meta, metacap);
	perr = rc_i16(&c);
	err = rc_i16(&c);
	raw_end(&c, buf, "OffsetFetch v5");
	cr_assert_eq(err, 0, "OffsetFetch %s: error %d", group, err);
	cr_assert_eq(perr, 0, "OffsetFetch %s %s-%d: error %d", group, topic, partition, perr);
	return off;
}

static int refusal(int16_t err)
{
	return err == ERR_ILLEGAL_GENERATION || err == ERR_UNKNOWN_MEMBER_ID || err == ERR_REBALANCE_IN_PROGRESS;
}

/* A rebalance of the members in all[] (each already sent its JoinGroup,
 * corr[i]); then SyncGroup with masks[i] for all[i]. */
static void rebalance_to(struct rawmember **all, const int32_t *corr, const uint32_t *masks, int n,
			 const char *group, int32_t want_gen)
{
	int32_t sc[4];

	for (int i = 0; i < n; i++) {
		int nm;
		int16_t err = join_recv(all[i], corr[i], &nm);

		cr_assert_eq(err, 0, "%s: JoinGroup for generation %d: error %d", all[i]->name, want_gen, err);
		cr_assert_eq(all[i]->gen, want_gen, "%s: joined generation %d, expected %d", all[i]->name,
			     all[i]->gen, want_gen);
		if (!strcmp(all[i]->leader, all[i]->id))
			cr_assert_eq(nm, n, "the leader's JoinGroup lists %d members, not %d", nm, n);
	}
	for (int i = 0; i < n; i++)
		cr_assert_str_eq(all[i]->leader, all[0]->leader, "members disagree on the leader");
	/* followers first: their SyncGroup waits for the leader's */
	for (int i = 0; i < n; i++)
		if (strcmp(all[i]->leader, all[i]->id))
			sc[i] = sync_send(all[i], group, all, masks, n);
	for (int i = 0; i < n; i++)
		if (!strcmp(all[i]->leader, all[i]->id))
			sc[i] = sync_send(all[i], group, all, masks, n);
	for (int i = 0; i < n; i++) {
		int16_t err = sync_recv(all[i], sc[i]);

		cr_assert_eq(err, 0, "%s: SyncGroup generation %d: error %d", all[i]->name, want_gen, err);
		cr_assert_eq(all[i]->mask, masks[i], "%s: assigned 0x%x in generation %d, the leader gave 0x%x",
			     all[i]->name, all[i]->mask, want_gen, masks[i]);
	}
}

/* Heartbeat answers REBALANCE_IN_PROGRESS; then rejoin (sends JoinGroup). */
static int32_t told_to_rejoin(struct rawmember *m, const char *group)
{
	int64_t end = now_us() + 5000000;
	int16_t err;

	/* the JoinGroup that starts the rebalance went out on another
	 * connection: until the coordinator has it, the group is stable */
	while ((err = heartbeat(m, group)) == 0 && now_us() < end)
		sleep_ms(5);
	cr_expect_eq(err, ERR_REBALANCE_IN_PROGRESS,
		     "%s: Heartbeat during a rebalance answered %d, not REBALANCE_IN_PROGRESS", m->name, err);
	return join_send(m, group);
}

/* The design's second invariant, with its figures: consumer-A owns
 * orders-1 through generations 1-3; generation 4 (after consumer-C
 * left) assigns orders-1 to consumer-B; B commits 12; A's late commits
 * are refused and B's position stands. */
Test(groups, generation_4_late_commit_from_consumer_A_is_refused, .timeout = 60)
{
	const char *g = "g-orders";
	struct broker_proc b;
	struct rawmember A = { .name = "consumer-A" }, B = { .name = "consumer-B" }, C = { .name = "consumer-C" };
	struct rawmember *all[3];
	int32_t corr[3];
	char meta[128];
	int16_t err;
	rd_kafka_t *prod;

	broker_launch(&b, group_broker_args);
	prod = harness_producer(&b, NULL, NULL, NULL);
	harness_create_topic(prod, "orders", 2);
	produce_n(prod, "orders", 0, 20);
	produce_n(prod, "orders", 1, 20);
	flush_ok(prod);
	rd_kafka_destroy(prod);
	A.fd = raw_connect(&b);
	B.fd = raw_connect(&b);
	C.fd = raw_connect(&b);
	cr_assert(A.fd >= 0 && B.fd >= 0 && C.fd >= 0);

	/* generation 1: consumer-A alone owns orders-0 and orders-1 */
	all[0] = &A;
	corr[0] = join_new_member(&A, g);
	rebalance_to(all, corr, (uint32_t[]){ 0x3 }, 1, g, 1);
	cr_assert_str_eq(A.leader, A.id);
	cr_assert_eq(commit_raw(A.fd, g, 1, A.id, "orders", 1, 3, "A@1"), 0, "A's commit in generation 1");

	/* generation 2: consumer-B joins; A keeps orders-1 */
	corr[1] = join_new_member(&B, g);
	corr[0] = told_to_rejoin(&A, g);
	all[1] = &B;
	rebalance_to(all, corr, (uint32_t[]){ 0x2, 0x1 }, 2, g, 2);
	cr_assert_eq(commit_raw(A.fd, g, 2, A.id, "orders", 1, 5, "A@2"), 0, "A's commit in generation 2");

	/* generation 3: consumer-C joins with nothing; A keeps orders-1 */
	corr[2] = join_new_member(&C, g);
	corr[0] = told_to_rejoin(&A, g);
	corr[1] = told_to_rejoin(&B, g);
	all[2] = &C;
	rebalance_to(all, corr, (uint32_t[]){ 0x2, 0x1, 0x0 }, 3, g, 3);
	cr_assert_eq(commit_raw(A.fd, g, 3, A.id, "orders", 1, 7, "A@3"), 0, "A's commit in generation 3");
	cr_assert_eq(fetch_committed(A.fd, g, "orders", 1, meta, sizeof(meta)), 7);
	cr_assert_str_eq(meta, "A@3", "commit metadata not kept");

	/* generation 4: C leaves; orders-1 is revoked from A, given to B */
	cr_assert_eq(leave(&C, g), 0, "consumer-C LeaveGroup");
	corr[0] = told_to_rejoin(&A, g);
	corr[1] = told_to_rejoin(&B, g);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(join_recv(all[i], corr[i], NULL), 0, "%s: JoinGroup generation 4", all[i]->name);
	cr_assert_eq(A.gen, 4);
	cr_assert_eq(B.gen, 4);
	/* between JoinGroup and SyncGroup (awaiting the leader's
	 * assignment) nobody's commit may land: A's with generation 3 */
	err = commit_raw(A.fd, g, 3, A.id, "orders", 1, 8, "A@3-late");
	cr_assert(refusal(err), "A's generation-3 commit while generation 4 awaits its assignment: error %d", err);
	fprintf(stderr, "groups: fencing: A gen 3 commit during CompletingRebalance -> %d\n", err);
	{
		int32_t sc[2];
		uint32_t masks[2] = { 0x0, 0x3 };

		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i < 2; i++)
				if ((strcmp(all[i]->leader, all[i]->id) == 0) == pass)
					sc[i] = sync_send(all[i], g, all, masks, 2);
		for (int i = 0; i < 2; i++) {
			cr_assert_eq(sync_recv(all[i], sc[i]), 0, "%s: SyncGroup generation 4", all[i]->name);
			cr_assert_eq(all[i]->mask, masks[i]);
		}
	}
	cr_assert_eq(commit_raw(B.fd, g, 4, B.id, "orders", 1, 12, "B@4"), 0, "B's commit in generation 4");

	/* A's late commit with its old generation: ILLEGAL_GENERATION */
	err = commit_raw(A.fd, g, 3, A.id, "orders", 1, 9, "A@3-late");
	cr_assert_eq(err, ERR_ILLEGAL_GENERATION, "A's late generation-3 commit for orders-1: error %d", err);
	cr_assert_eq(fetch_committed(B.fd, g, "orders", 1, meta, sizeof(meta)), 12, "B's position moved");
	cr_assert_str_eq(meta, "B@4");

	/* A is a member of generation 4 but no longer owns orders-1 */
	err = commit_raw(A.fd, g, 4, A.id, "orders", 1, 9, "A@4");
	fprintf(stderr, "groups: fencing: A gen 4 commit of a partition it does not own -> %d\n", err);
	cr_assert(refusal(err), "A's generation-4 commit for orders-1, which B owns: error %d (accepted)", err);
	cr_assert_eq(fetch_committed(B.fd, g, "orders", 1, meta, sizeof(meta)), 12, "B's position moved");

	/* a simple (generation -1) commit to a group with members */
	err = commit_raw(C.fd, g, -1, "", "orders", 1, 2, "simple");
	fprintf(stderr, "groups: fencing: simple commit to a group with members -> %d\n", err);
	cr_assert(refusal(err), "a generation -1 commit into a group with members: error %d", err);

	/* A leaves; its member id is unknown from then on */
	cr_assert_eq(leave(&A, g), 0, "consumer-A LeaveGroup");
	err = commit_raw(A.fd, g, 4, A.id, "orders", 1, 9, "A@4-gone");
	cr_assert_eq(err, ERR_UNKNOWN_MEMBER_ID, "a commit from A after it left: error %d", err);
	cr_assert_eq(fetch_committed(B.fd, g, "orders", 1, meta, sizeof(meta)), 12, "B's position moved");
	cr_assert_str_eq(meta, "B@4");
	/* orders-0: B's, never committed in this group after A's gen-1 run */
	cr_assert_eq(fetch_committed(B.fd, g, "orders", 0, meta, sizeof(meta)), -1);

	close(A.fd);
	close(B.fd);
	close(C.fd);
	broker_cleanup(&b);
}

Test(groups, simple_commit_to_a_group_with_no_members, .timeout = 30)
{
	struct broker_proc b;
	char meta[64];
	int fd;

	broker_launch(&b, group_broker_args);
	raw_create_topic(&b, "plain");
	fd = raw_connect(&b);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fetch_committed(fd, "g-simple", "plain", 0, meta, sizeof(meta)), -1,
		     "an unknown group has a committed offset");
	cr_assert_eq(commit_raw(fd, "g-simple", -1, "", "plain", 0, 42, "tool"), 0,
		     "a simple (generation -1, no member) commit to a group with no members");
	cr_assert_eq(fetch_committed(fd, "g-simple", "plain", 0, meta, sizeof(meta)), 42);
	cr_assert_str_eq(meta, "tool");
	cr_assert_eq(commit_raw(fd, "g-simple", -1, "", "plain", 0, 17, NULL), 0, "a second simple commit");
	cr_assert_eq(fetch_committed(fd, "g-simple", "plain", 0, meta, sizeof(meta)), 17,
		     "a simple commit may move the offset back");
	close(fd);
	broker_cleanup(&b);
}
