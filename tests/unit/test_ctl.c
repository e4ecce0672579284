/* tests/unit/test_ctl.c — the control thread polled as a plain struct:
 * a broker of one shard and the control thread's state, no thread
 * started, both loops driven turn by turn from the test's thread with an
 * injected clock (as Aeron tests its conductor). Requests arrive as raw
 * Kafka frames on a socketpair connection to the shard; the admin ones
 * and the group's cross the rings to the control thread and back. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "control/config.h"
#include "control/ctl.h"
#include "control/ctl_internal.h"
#include "control/meta_brokers.h"
#include "control/meta_parts.h"
#include "control/metalog.h"
#include "control/group.h"
#include "dataplane/conn.h"
#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/part.h"
#include "dataplane/part_role.h"
#include "dataplane/shard.h"
#include "broker_fixture.h"
#include "helpers.h"

#define T0 1000000000ull              /* the injected monotonic clock's start (ns) */
#define WALL0 1700000000000ll         /* the injected wall clock at T0 (ms) */
#define MS 1000000ull

static struct broker b;
static struct config *cfg;
static struct shard *sh;
static struct ctl *ctl;
static struct spsc ring_to_shard, ring_to_ctl;
static struct shard_msg to_shard_slots[RING_SLOTS], to_ctl_slots[RING_SLOTS];
static char *dir;
static uint64_t now = T0;
static int peer = -1;
static int short_retention;   /* the ctl_expiry suite: offsets kept 1 minute */

static int64_t wall_at(uint64_t t)
{
	return WALL0 + (int64_t)((t - T0) / MS);
}

/* One turn of the broker at `t`: the shard, then the control thread,
 * again until neither has work. The clock does not move. */
static int turn(uint64_t t)
{
	int total = 0;

	for (int i = 0; i < 100000; i++) {
		int w = shard_poll(sh, t, wall_at(t)) + ctl_poll(ctl, t, wall_at(t));

		if (!w)
			break;
		total += w;
	}
	return total;
}

/* Turns at the current clock until `done` holds or 10 s of real time
 * pass. The clock the broker sees stays put; when neither loop has work
 * the shard's idle policy waits for its I/O (the disk and the socket
 * complete in real time), as the thread would. */
static int run_until(int (*done)(void))
{
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int w = turn(now);

		if (done())
			return 1;
		if (!w)
			shard_idle(sh);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (t1.tv_sec - t0.tv_sec > 10)
			return done();
	}
}

/* Move the clock and turn once at the new time. */
static void advance_ms(uint64_t ms)
{
	now += ms * MS;
	turn(now);
}

static int is_ready(void)
{
	return ctl_is_ready(ctl);
}

static void set(const char *k, const char *v)
{
	char err[256];

	cr_assert_eq(config_set(cfg, k, v, "test", err, sizeof(err)), 0, "%s: %s", k, err);
}

static void setup(void)
{
	char err[256];

	memset(&b, 0, sizeof(b));
	now = T0;
	dir = test_tmpdir();
	cr_assert_eq(config_create(&cfg), 0);
	set("log.dirs", dir);
	set("admin.listen", "");                        /* no admin endpoint */
	set("offsets.topic.num.partitions", "1");
	set("transaction.state.log.num.partitions", "1");
	if (short_retention) {
		set("offsets.retention.minutes", "1");
		set("offsets.retention.check.interval.ms", "1000");
	}
	b.cfg = cfg;
	test_broker_settings(&b.set, dir, -1);
	spsc_init(&ring_to_shard, to_shard_slots, RING_SLOTS);
	spsc_init(&ring_to_ctl, to_ctl_slots, RING_SLOTS);
	b.rings[1][0] = &ring_to_shard;
	b.rings[0][1] = &ring_to_ctl;

	cr_assert_eq(shard_create(&b, 0, &sh, err, sizeof(err)), 0, "shard_create: %s", err);
	b.shards[0] = sh;
	cr_assert_eq(shard_thread_init(sh), 0);
	cr_assert_eq(ctl_create(&b, cfg, &ctl), 0);
	cr_assert_eq(ctl_init(ctl, now, wall_at(now)), 0);
	cr_assert(run_until(is_ready), "the control thread never became ready");
	__atomic_store_n(&b.serving, 1, __ATOMIC_RELEASE);
}

static void teardown(void)
{
	if (peer >= 0)
		close(peer);
	peer = -1;
	if (sh) {
		/* as sluiced stops: the shards first, then the control thread */
		__atomic_store_n(&b.stopping, 1, __ATOMIC_RELAXED);
		for (int i = 0; i < 100000 && !shard_done(sh); i++) {
			now += MS;
			if (turn(now) == 0)
				shard_idle(sh);
		}
		shard_thread_fini(sh);
		ctl_fini(ctl);
		shard_destroy(sh);
		ctl_destroy(ctl);
		sh = NULL;
		ctl = NULL;
	}
	config_destroy(cfg);
	test_rmrf(dir);
	free(dir);
}

TestSuite(ctl, .init = setup, .fini = teardown, .timeout = 60);

/* ---- raw frames over a connection ------------------------------------ */

static uint8_t resp[1 << 16];
static size_t resp_len;
static uint8_t arena_mem[1 << 16];
static struct kafka_arena arena;
static int32_t next_corr = 1;

static void connect_client(void)
{
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	peer = sv[1];
	conn_on_accept(sh, 0, sv[0], IORING_CQE_F_MORE);
	cr_assert_not_null(sh->conns);
}

static void send_request(int16_t key, int16_t version, const void *body)
{
	static uint8_t frame[1 << 16];
	struct kafka_request req;
	struct kafka_writer w;

	memset(&req, 0, sizeof(req));
	req.header.RequestApiKey = key;
	req.header.RequestApiVersion = version;
	req.header.CorrelationId = next_corr++;
	req.header.ClientId = (struct kafka_str){ "unit", 4 };
	req.api = kafka_api_find(key);
	req.header_version = kafka_request_header_version(req.api, version);
	req.body = (void *)body;
	kafka_writer_init(&w, frame, sizeof(frame));
	cr_assert_eq(kafka_request_encode(&w, &req), 0);
	cr_assert_eq(write(peer, frame, w.len), (ssize_t)w.len);
	resp_len = 0;
}

static int response_arrived(void)
{
	ssize_t n = recv(peer, resp + resp_len, sizeof(resp) - resp_len, MSG_DONTWAIT);

	if (n > 0)
		resp_len += (size_t)n;
	return resp_len >= 4 && resp_len >= 4 + (size_t)be32_load(resp);
}

/* The answer to the last request, decoded (its body in the arena). */
static const void *response(int16_t key, int16_t version)
{
	struct kafka_response out;

	cr_assert(run_until(response_arrived), "no response to api %d", key);
	cr_assert_eq((int32_t)be32_load(resp + 4), next_corr - 1, "correlation id");
	kafka_arena_init(&arena, arena_mem, sizeof(arena_mem));
	cr_assert_eq(kafka_response_decode(resp + 4, resp_len - 4, key, version, &arena, &out), 0);
	return out.body;
}

static const void *call(int16_t key, int16_t version, const void *body)
{
	send_request(key, version, body);
	return response(key, version);
}

static struct kafka_str kstr(const char *s)
{
	return (struct kafka_str){ s, (int32_t)strlen(s) };
}

static int parts_on_shard(void)
{
	int n = 0;

	for (struct part *p = sh->parts; p; p = p->next)
		n++;
	return n;
}

/* ---- (a) start-up ---------------------------------------------------- */

Test(ctl, starts_up_with_the_metadata_log_and_the_internal_topics)
{
	struct md_snapshot *md = broker_md(&b);
	const struct md_topic *off, *txn;

	cr_assert(ctl_is_ready(ctl));
	cr_assert_neq(b.set.cluster_id[0], 0, "the metadata log gave the cluster id");
	cr_assert_not_null(md);
	off = md_find(md, "__consumer_offsets", 18);
	txn = md_find(md, "__transaction_state", 19);
	cr_assert_not_null(off);
	cr_assert_not_null(txn);
	cr_assert_eq(off->nparts, 1);
	cr_assert_not_null(md_part_owner(&off->parts[0]), "opened on its shard");
	cr_assert_not_null(md_part_owner(&txn->parts[0]), "opened on its shard");
	cr_assert_eq(parts_on_shard(), 2);
	cr_assert_eq(ctl_now_ms(ctl), (int64_t)(now / MS), "the turn's clock is the injected one");
	cr_assert_eq(ctl_wall_ms(ctl), wall_at(now));
}

/* ---- (b) CreateTopics and DeleteTopics through the control thread ---- */

static void create_topic(const char *name, int32_t nparts)
{
	struct kafka_create_topics_request q;
	struct kafka_create_topics_request_creatable_topic t;
	const struct kafka_create_topics_response *r;

	kafka_create_topics_request_init(&q);
	memset(&t, 0, sizeof(t));
	t.Name = kstr(name);
	t.NumPartitions = nparts;
	t.ReplicationFactor = 1;
	q.Topics.items = &t;
	q.Topics.count = 1;
	q.timeoutMs = 30000;
	r = call(KAFKA_CREATE_TOPICS_KEY, 2, &q);
	cr_assert_eq(r->Topics.count, 1);
	cr_assert_eq(r->Topics.items[0].ErrorCode, 0, "CreateTopics: %d %.*s", r->Topics.items[0].ErrorCode,
		     r->Topics.items[0].ErrorMessage.len > 0 ? r->Topics.items[0].ErrorMessage.len : 0,
		     r->Topics.items[0].ErrorMessage.ptr);
}

Test(ctl, create_and_delete_topics_open_and_close_partitions)
{
	struct kafka_delete_topics_request dq;
	struct kafka_str name = kstr("t");
	const struct kafka_delete_topics_response *dr;
	const struct md_topic *t;

	connect_client();
	create_topic("t", 3);
	t = md_find(broker_md(&b), "t", 1);
	cr_assert_not_null(t, "published in the snapshot");
	cr_assert_eq(t->nparts, 3);
	for (int i = 0; i < 3; i++)
		cr_assert_not_null(md_part_owner(&t->parts[i]), "partition %d opened on the shard", i);
	cr_assert_eq(parts_on_shard(), 2 + 3);
	/* every published topic is found by its id too (Fetch v13+, Metadata
	 * v12), through the snapshot's index by id */
	cr_assert_not_null(broker_md(&b)->by_id, "the snapshot has its index by id");
	for (int i = 0; i < broker_md(&b)->ntopics; i++) {
		const struct md_topic *x = broker_md(&b)->topics[i];

		cr_assert_eq(md_find_id(broker_md(&b), x->id), x, "topic %s by its id", x->name);
	}
	{
		uint8_t other[16];

		memcpy(other, t->id, 16);
		other[15] ^= 0x5a;
		cr_assert_null(md_find_id(broker_md(&b), other), "an id no topic has");
	}

	kafka_delete_topics_request_init(&dq);
	dq.TopicNames.items = &name;
	dq.TopicNames.count = 1;
	dq.TimeoutMs = 30000;
	dr = call(KAFKA_DELETE_TOPICS_KEY, 1, &dq);
	cr_assert_eq(dr->Responses.count, 1);
	cr_assert_eq(dr->Responses.items[0].ErrorCode, 0);
	cr_assert_null(md_find(broker_md(&b), "t", 1), "gone from the snapshot");
	for (int i = 0; i < broker_md(&b)->ntopics; i++)
		cr_assert_eq(md_find_id(broker_md(&b), broker_md(&b)->topics[i]->id), broker_md(&b)->topics[i]);
	cr_assert_eq(parts_on_shard(), 2, "its partitions closed on the shard");
}

/* ---- (c) a produce and its acknowledgement --------------------------- */

Test(ctl, produce_to_a_created_topic_is_acknowledged)
{
	static uint8_t batch[4096];
	struct kafka_produce_request q;
	struct kafka_produce_request_topic_produce_data td;
	struct kafka_produce_request_partition_produce_data pd;
	const struct kafka_produce_response *r;
	uint32_t blen;

	connect_client();
	create_topic("t", 1);
	blen = test_batch(batch, sizeof(batch), 0, 3, 20, 0, WALL0);
	kafka_produce_request_init(&q);
	q.Acks = -1;
	q.TimeoutMs = 30000;
	pd.Index = 0;
	pd.Records = (struct kafka_bytes){ batch, (int32_t)blen };
	td.Name = kstr("t");
	td.PartitionData.items = &pd;
	td.PartitionData.count = 1;
	q.TopicData.items = &td;
	q.TopicData.count = 1;
	r = call(KAFKA_PRODUCE_KEY, 7, &q);
	cr_assert_eq(r->Responses.count, 1);
	cr_assert_eq(r->Responses.items[0].PartitionResponses.count, 1);
	cr_assert_eq(r->Responses.items[0].PartitionResponses.items[0].ErrorCode, 0);
	cr_assert_eq(r->Responses.items[0].PartitionResponses.items[0].BaseOffset, 0);
	cr_assert_eq(md_part_owner(&md_find(broker_md(&b), "t", 1)->parts[0])->pl->next_offset, 3);
}

/* ---- (d) a group: join, sync, commit, fetch -------------------------- */

static char member[256];
static int32_t generation;
static uint64_t joins_before;

static int join_arrived(void)
{
	return group_coord_stats(ctl_groups(ctl))->joins > joins_before;
}

static void join_and_sync(const char *group, int32_t session_ms)
{
	struct kafka_join_group_request jq;
	struct kafka_join_group_request_join_group_request_protocol proto;
	const struct kafka_join_group_response *jr;
	struct kafka_sync_group_request sq;
	struct kafka_sync_group_request_sync_group_request_assignment as;
	const struct kafka_sync_group_response *sr;
	static const uint8_t meta[] = { 0, 0, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 0 };

	kafka_join_group_request_init(&jq);
	jq.GroupId = kstr(group);
	jq.SessionTimeoutMs = session_ms;
	jq.RebalanceTimeoutMs = 10000;
	jq.MemberId = kstr("");
	jq.ProtocolType = kstr("consumer");
	proto.Name = kstr("range");
	proto.Metadata = (struct kafka_bytes){ meta, (int32_t)sizeof(meta) };
	jq.Protocols.items = &proto;
	jq.Protocols.count = 1;
	joins_before = group_coord_stats(ctl_groups(ctl))->joins;
	send_request(KAFKA_JOIN_GROUP_KEY, 2, &jq);
	cr_assert(run_until(join_arrived), "the JoinGroup never reached the coordinator");
	/* the first rebalance of an empty group waits for
	 * group.initial.rebalance.delay.ms (3 s) of the injected clock */
	advance_ms(2999);
	cr_assert_not(response_arrived(), "joined before the initial delay");
	advance_ms(2);
	jr = response(KAFKA_JOIN_GROUP_KEY, 2);
	cr_assert_eq(jr->ErrorCode, 0, "JoinGroup: %d", jr->ErrorCode);
	cr_assert_gt(jr->MemberId.len, 0);
	cr_assert_eq(jr->Leader.len, jr->MemberId.len);
	snprintf(member, sizeof(member), "%.*s", jr->MemberId.len, jr->MemberId.ptr);
	generation = jr->GenerationId;

	kafka_sync_group_request_init(&sq);
	sq.GroupId = kstr(group);
	sq.GenerationId = generation;
	sq.MemberId = kstr(member);
	as.MemberId = kstr(member);
	as.Assignment = (struct kafka_bytes){ meta, (int32_t)sizeof(meta) };
	sq.Assignments.items = &as;
	sq.Assignments.count = 1;
	sr = call(KAFKA_SYNC_GROUP_KEY, 1, &sq);
	cr_assert_eq(sr->ErrorCode, 0, "SyncGroup: %d", sr->ErrorCode);
	cr_assert_eq(sr->Assignment.len, (int32_t)sizeof(meta));
}

static int16_t commit(int64_t offset)
{
	struct kafka_offset_commit_request cq;
	struct kafka_offset_commit_request_offset_commit_request_topic ct;
	struct kafka_offset_commit_request_offset_commit_request_partition cp;
	const struct kafka_offset_commit_response *cr;

	kafka_offset_commit_request_init(&cq);
	cq.GroupId = kstr("g");
	cq.GenerationIdOrMemberEpoch = generation;
	cq.MemberId = kstr(member);
	cq.RetentionTimeMs = -1;
	cp.PartitionIndex = 0;
	cp.CommittedOffset = offset;
	cp.CommittedLeaderEpoch = -1;
	cp.CommittedMetadata = kstr("m");
	ct.Name = kstr("t");
	ct.Partitions.items = &cp;
	ct.Partitions.count = 1;
	cq.Topics.items = &ct;
	cq.Topics.count = 1;
	cr = call(KAFKA_OFFSET_COMMIT_KEY, 2, &cq);
	cr_assert_eq(cr->Topics.count, 1);
	cr_assert_eq(cr->Topics.items[0].Partitions.count, 1);
	return cr->Topics.items[0].Partitions.items[0].ErrorCode;
}

/* The group's committed offset of t-0 (-1: none). */
static int64_t committed(void)
{
	struct kafka_offset_fetch_request fq;
	struct kafka_offset_fetch_request_offset_fetch_request_topic ft;
	int32_t part0 = 0;
	const struct kafka_offset_fetch_response *fr;

	kafka_offset_fetch_request_init(&fq);
	fq.GroupId = kstr("g");
	ft.Name = kstr("t");
	ft.PartitionIndexes.items = &part0;
	ft.PartitionIndexes.count = 1;
	fq.Topics.items = &ft;
	fq.Topics.count = 1;
	fr = call(KAFKA_OFFSET_FETCH_KEY, 1, &fq);
	cr_assert_eq(fr->Topics.count, 1);
	cr_assert_eq(fr->Topics.items[0].Partitions.count, 1);
	cr_assert_eq(fr->Topics.items[0].Partitions.items[0].ErrorCode, 0);
	return fr->Topics.items[0].Partitions.items[0].CommittedOffset;
}

Test(ctl, group_join_sync_commit_and_fetch)
{
	connect_client();
	create_topic("t", 1);
	join_and_sync("g", 30000);
	cr_assert_eq(commit(42), 0, "OffsetCommit");
	cr_assert_eq(committed(), 42);
	cr_assert_eq(group_coord_stats(ctl_groups(ctl))->commits, 1);
}

/* ---- (e) a member's session timeout, on the injected clock only ------- */

static int16_t heartbeat(void)
{
	struct kafka_heartbeat_request hq;
	const struct kafka_heartbeat_response *hr;

	kafka_heartbeat_request_init(&hq);
	hq.GroupId = kstr("g");
	hq.GenerationId = generation;
	hq.MemberId = kstr(member);
	hr = call(KAFKA_HEARTBEAT_KEY, 1, &hq);
	return hr->ErrorCode;
}

Test(ctl, session_timeout_expires_a_member_when_the_clock_moves)
{
	connect_client();
	join_and_sync("g", 6000);
	/* 5 s later (within the session) a heartbeat keeps it */
	advance_ms(5000);
	cr_assert_eq(heartbeat(), 0, "the member is alive within its session");
	/* 5.9 s after that heartbeat: still in */
	advance_ms(5900);
	cr_assert_eq(heartbeat(), 0, "expired before its session timeout");
	/* 7 s with no heartbeat: the tick of that turn removes it */
	advance_ms(7000);
	cr_assert_eq(group_coord_stats(ctl_groups(ctl))->members_expired, 1, "expired by that turn's tick");
	cr_assert_eq(heartbeat(), 25, "UNKNOWN_MEMBER_ID after the session timed out");
}

/* ---- brokers: registration, heartbeats, fencing ----------------------- */

static int proposed_done, proposed_err;

static void proposed(struct ctl *c, void *cookie, int err, const struct metalog_applied *a)
{
	(void)c;
	(void)cookie;
	(void)a;
	proposed_err = err;
	proposed_done = 1;
}

static int is_proposed(void)
{
	return proposed_done;
}

/* Register broker id with a new incarnation (what BrokerRegistration
 * will carry to the active controller): its epoch, or -errno. */
static int64_t register_broker(int32_t id, uint8_t tag)
{
	uint8_t inc[16] = { tag, (uint8_t)id };
	struct metalog_rec r;
	const struct meta_broker *mb;

	cr_assert_eq(metalog_build_register_broker(ctl->ml, id, inc, "127.0.0.1", 9000 + id, "r2", &r), 0);
	proposed_done = 0;
	ctl_meta_propose(ctl, &r, proposed, NULL);
	cr_assert(run_until(is_proposed), "the registration was never applied");
	if (proposed_err < 0)
		return proposed_err;
	mb = metalog_broker(ctl->ml, id);
	cr_assert_not_null(mb);
	return mb->epoch;
}

static int32_t watched;

static int watched_unfenced(void)
{
	const struct meta_broker *mb = metalog_broker(ctl->ml, watched);

	return mb && !mb->fenced;
}

static int watched_fenced(void)
{
	const struct meta_broker *mb = metalog_broker(ctl->ml, watched);

	return mb && mb->fenced;
}

Test(ctl, brokers_register_heartbeat_and_are_fenced_after_a_missed_session)
{
	struct ctl_broker_state st;
	int64_t e2, e2b;

	/* this node registered at start and is unfenced: it serves */
	ctl_brokers_state(ctl, &st);
	cr_assert_gt(st.epoch, 0);
	cr_assert_eq(st.self_fenced, 0);
	cr_assert_eq(st.registered, 1);
	/* a second broker registers: fenced until its first heartbeat */
	e2 = register_broker(2, 1);
	cr_assert_gt(e2, st.epoch, "the broker epoch is the registration's log index");
	watched = 2;
	cr_assert(watched_fenced());
	cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	cr_assert(run_until(watched_unfenced), "a heartbeat did not unfence the registered broker");
	/* heartbeats within the session (9 s) keep it; this node heartbeats
	 * itself every 2 s as the clock moves */
	for (int i = 0; i < 4; i++) {
		advance_ms(2000);
		cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	}
	advance_ms(100);
	cr_assert(watched_unfenced(), "fenced within its session");
	/* 10 s without one: fenced, by a record; this node is not */
	for (int i = 0; i < 5; i++)
		advance_ms(2000);
	cr_assert(run_until(watched_fenced), "a broker silent for a whole session was not fenced");
	ctl_brokers_state(ctl, &st);
	cr_assert_eq(st.self_fenced, 0, "this node heartbeats itself and stays unfenced");
	cr_assert_eq(st.fenced, 1);
	cr_assert_geq(st.fenced_total, 1);
	/* a heartbeat unfences it again */
	cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	cr_assert(run_until(watched_unfenced));
	/* a restart of broker 2 registers again: a larger epoch, fenced, and
	 * the old epoch's heartbeats are stale */
	e2b = register_broker(2, 2);
	cr_assert_gt(e2b, e2);
	cr_assert(watched_fenced());
	cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), -ESTALE);
	cr_assert_eq(ctl_controller_heartbeat(ctl, 7, 1, 2), -ESTALE, "an unknown broker");
	/* the same incarnation twice is refused */
	cr_assert_eq(register_broker(2, 2), -EEXIST);
}

/* ---- placement across brokers ------------------------------------------ */

/* CreateTopics of name: its error code (the message in msg). rf -1 with
 * assign: an explicit assignment, one broker per partition. */
static int16_t create_topic_rf(const char *name, int32_t nparts, int16_t rf, const int32_t *assign, char *msg,
			       size_t msglen)
{
	struct kafka_create_topics_request q;
	struct kafka_create_topics_request_creatable_topic t;
	struct kafka_create_topics_request_creatable_replica_assignment as[8];
	const struct kafka_create_topics_response *r;

	kafka_create_topics_request_init(&q);
	memset(&t, 0, sizeof(t));
	t.Name = kstr(name);
	t.NumPartitions = assign ? -1 : nparts;
	t.ReplicationFactor = rf;
	for (int i = 0; assign && i < nparts; i++) {
		as[i].PartitionIndex = i;
		as[i].BrokerIds.items = (int32_t *)&assign[i];
		as[i].BrokerIds.count = 1;
	}
	t.Assignments.items = assign ? as : NULL;
	t.Assignments.count = assign ? nparts : 0;
	q.Topics.items = &t;
	q.Topics.count = 1;
	q.timeoutMs = 30000;
	r = call(KAFKA_CREATE_TOPICS_KEY, 2, &q);
	cr_assert_eq(r->Topics.count, 1);
	snprintf(msg, msglen, "%.*s", r->Topics.items[0].ErrorMessage.len > 0 ? r->Topics.items[0].ErrorMessage.len : 0,
		 r->Topics.items[0].ErrorMessage.ptr ? r->Topics.items[0].ErrorMessage.ptr : "");
	return r->Topics.items[0].ErrorCode;
}

/* A produce of one batch to name-idx: its error code. */
static int16_t produce_to(const char *name, int32_t idx)
{
	static uint8_t batch[4096];
	struct kafka_produce_request q;
	struct kafka_produce_request_topic_produce_data td;
	struct kafka_produce_request_partition_produce_data pd;
	const struct kafka_produce_response *r;
	uint32_t blen = test_batch(batch, sizeof(batch), 0, 1, 20, 0, WALL0);

	kafka_produce_request_init(&q);
	q.Acks = 1;
	q.TimeoutMs = 30000;
	pd.Index = idx;
	pd.Records = (struct kafka_bytes){ batch, (int32_t)blen };
	td.Name = kstr(name);
	td.PartitionData.items = &pd;
	td.PartitionData.count = 1;
	q.TopicData.items = &td;
	q.TopicData.count = 1;
	r = call(KAFKA_PRODUCE_KEY, 7, &q);
	cr_assert_eq(r->Responses.count, 1);
	cr_assert_eq(r->Responses.items[0].PartitionResponses.count, 1);
	return r->Responses.items[0].PartitionResponses.items[0].ErrorCode;
}

/* A fetch of name-idx from offset 0: its error code. */
static int16_t fetch_from(const char *name, int32_t idx)
{
	struct kafka_fetch_request q;
	struct kafka_fetch_request_fetch_topic ft;
	struct kafka_fetch_request_fetch_partition fp;
	const struct kafka_fetch_response *r;

	kafka_fetch_request_init(&q);
	q.ReplicaId = -1;
	q.MaxWaitMs = 0;
	q.MinBytes = 0;
	q.MaxBytes = 1 << 20;
	memset(&fp, 0, sizeof(fp));
	fp.Partition = idx;
	fp.FetchOffset = 0;
	fp.PartitionMaxBytes = 1 << 16;
	fp.CurrentLeaderEpoch = -1;
	fp.LogStartOffset = -1;
	memset(&ft, 0, sizeof(ft));
	ft.Topic = kstr(name);
	ft.Partitions.items = &fp;
	ft.Partitions.count = 1;
	q.Topics.items = &ft;
	q.Topics.count = 1;
	r = call(KAFKA_FETCH_KEY, 4, &q);
	cr_assert_eq(r->Responses.count, 1);
	cr_assert_eq(r->Responses.items[0].Partitions.count, 1);
	return r->Responses.items[0].Partitions.items[0].ErrorCode;
}

Test(ctl, partitions_are_placed_across_unfenced_brokers_and_only_this_nodes_open)
{
	int32_t self = b.set.node_id, lead[2] = { 0, 0 }, other = -1, mine = -1;
	const struct kafka_metadata_response *mr;
	struct kafka_metadata_request mq;
	struct kafka_metadata_request_metadata_request_topic mt;
	const struct md_topic *t;
	char msg[256];
	int64_t e2;
	static const int32_t nine[2] = { 1, 9 };

	cr_assert_neq(self, 2);
	connect_client();
	/* one broker: a second replica is refused, as Kafka refuses it */
	cr_assert_eq(create_topic_rf("two", 1, 2, NULL, msg, sizeof(msg)), KERR_INVALID_REPLICATION_FACTOR);
	cr_assert(strstr(msg, "larger than available brokers: 1"), "%s", msg);
	/* broker 2 registers; fenced, it takes no replica */
	e2 = register_broker(2, 1);
	watched = 2;
	cr_assert_eq(create_topic_rf("two", 1, 2, NULL, msg, sizeof(msg)), KERR_INVALID_REPLICATION_FACTOR);
	cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	cr_assert(run_until(watched_unfenced));
	/* 4 partitions, 1 replica: 2 on each broker */
	create_topic("t", 4);
	t = md_find(broker_md(&b), "t", 1);
	cr_assert_not_null(t);
	for (int i = 0; i < 4; i++) {
		const struct md_partition *mp = &t->parts[i];

		cr_assert_eq(mp->nreplicas, 1);
		cr_assert_eq(mp->nisr, 1);
		cr_assert_eq(mp->replicas[0], mp->leader);
		cr_assert_eq(mp->isr[0], mp->leader);
		cr_assert(mp->leader == self || mp->leader == 2, "partition %d led by %d", i, mp->leader);
		lead[mp->leader == 2]++;
		if (mp->leader == self) {
			cr_assert_not_null(md_part_owner(mp), "partition %d is this node's: opened", i);
			mine = i;
		} else {
			cr_assert_null(md_part_owner(mp), "partition %d is broker 2's: not opened here", i);
			other = i;
		}
	}
	cr_assert_eq(lead[0], 2, "this node leads %d of 4", lead[0]);
	cr_assert_eq(lead[1], 2, "broker 2 leads %d of 4", lead[1]);
	cr_assert_eq(parts_on_shard(), 2 + 2, "only this node's partitions open on the shard");
	/* the data path: this node's partition served, broker 2's sent away */
	cr_assert_eq(produce_to("t", mine), 0);
	cr_assert_eq(produce_to("t", other), KERR_NOT_LEADER_OR_FOLLOWER);
	cr_assert_eq(fetch_from("t", mine), 0);
	cr_assert_eq(fetch_from("t", other), KERR_NOT_LEADER_OR_FOLLOWER);
	cr_assert_eq(produce_to("t", 4), KERR_UNKNOWN_TOPIC_OR_PARTITION);
	/* Metadata: both brokers, each partition's leader, replicas, ISR */
	kafka_metadata_request_init(&mq);
	memset(&mt, 0, sizeof(mt));
	mt.Name = kstr("t");
	mq.Topics.items = &mt;
	mq.Topics.count = 1;
	mr = call(KAFKA_METADATA_KEY, 6, &mq);
	cr_assert_eq(mr->Brokers.count, 2);
	cr_assert_eq(mr->Brokers.items[0].NodeId, self);
	cr_assert_eq(mr->Brokers.items[1].NodeId, 2);
	cr_assert_eq(mr->Brokers.items[1].Port, 9002);
	cr_assert_eq(mr->Brokers.items[1].Rack.len, 2);
	cr_assert_eq(memcmp(mr->Brokers.items[1].Rack.ptr, "r2", 2), 0);
	cr_assert_eq(mr->Topics.count, 1);
	cr_assert_eq(mr->Topics.items[0].Partitions.count, 4);
	for (int i = 0; i < 4; i++) {
		const struct kafka_metadata_response_metadata_response_partition *p =
			&mr->Topics.items[0].Partitions.items[i];

		cr_assert_eq(p->LeaderId, t->parts[p->PartitionIndex].leader, "partition %d", p->PartitionIndex);
		cr_assert_eq(p->ReplicaNodes.count, 1);
		cr_assert_eq(p->ReplicaNodes.items[0], p->LeaderId);
		cr_assert_eq(p->IsrNodes.count, 1);
	}
	/* two brokers now take two replicas; a third is refused */
	cr_assert_eq(create_topic_rf("two", 2, 2, NULL, msg, sizeof(msg)), 0, "%s", msg);
	t = md_find(broker_md(&b), "two", 3);
	cr_assert_eq(t->parts[0].nreplicas, 2);
	cr_assert_not_null(md_part_owner(&t->parts[0]), "a follower replica is opened too");
	cr_assert_not_null(md_part_owner(&t->parts[1]));
	cr_assert_eq(create_topic_rf("three", 1, 3, NULL, msg, sizeof(msg)), KERR_INVALID_REPLICATION_FACTOR);
	/* an explicit assignment naming an unknown broker */
	cr_assert_eq(create_topic_rf("nine", 2, -1, nine, msg, sizeof(msg)), KERR_INVALID_REPLICA_ASSIGNMENT);
	cr_assert(strstr(msg, "broker 9"), "%s", msg);
	/* fenced again: broker 2 leaves the Metadata's brokers */
	for (int i = 0; i < 5; i++)
		advance_ms(2000);
	cr_assert(run_until(watched_fenced));
	mr = call(KAFKA_METADATA_KEY, 6, &mq);
	cr_assert_eq(mr->Brokers.count, 1);
}

/* ---- leader elections ---------------------------------------------------- */

/* CreateTopics of name with an explicit assignment: nparts partitions of rf
 * replicas (ids[p * rf ..]), an optional config; its error code. */
static int16_t create_assigned(const char *name, int32_t nparts, int rf, const int32_t *ids, const char *key,
			       const char *value)
{
	struct kafka_create_topics_request q;
	struct kafka_create_topics_request_creatable_topic t;
	struct kafka_create_topics_request_creatable_replica_assignment as[8];
	struct kafka_create_topics_request_creatable_topic_config c;
	const struct kafka_create_topics_response *r;

	kafka_create_topics_request_init(&q);
	memset(&t, 0, sizeof(t));
	t.Name = kstr(name);
	t.NumPartitions = -1;
	t.ReplicationFactor = -1;
	for (int i = 0; i < nparts; i++) {
		as[i].PartitionIndex = i;
		as[i].BrokerIds.items = (int32_t *)&ids[i * rf];
		as[i].BrokerIds.count = rf;
	}
	t.Assignments.items = as;
	t.Assignments.count = nparts;
	if (key) {
		c.Name = kstr(key);
		c.Value = kstr(value);
		t.Configs.items = &c;
		t.Configs.count = 1;
	}
	q.Topics.items = &t;
	q.Topics.count = 1;
	q.timeoutMs = 30000;
	r = call(KAFKA_CREATE_TOPICS_KEY, 2, &q);
	cr_assert_eq(r->Topics.count, 1);
	return r->Topics.items[0].ErrorCode;
}

static const struct meta_part *image_part(const char *name, int32_t idx)
{
	const struct meta_topic *mt = metalog_topic(ctl->ml, name);

	cr_assert_not_null(mt, "%s", name);
	return &mt->parts[idx];
}

/* what run_until waits for: partition want_topic-want_idx led by want_leader */
static const char *want_topic;
static int32_t want_idx, want_leader;

static int part_led(void)
{
	const struct meta_part *p = image_part(want_topic, want_idx);
	const struct md_topic *t = md_find(broker_md(&b), want_topic, (int32_t)strlen(want_topic));

	/* the image, and the snapshot the shards read, both say it */
	return p->leader == want_leader && t && t->parts[want_idx].leader == want_leader &&
	       t->parts[want_idx].leader_epoch == p->leader_epoch;
}

static void wait_led(const char *name, int32_t idx, int32_t leader)
{
	want_topic = name;
	want_idx = idx;
	want_leader = leader;
	cr_assert(run_until(part_led), "%s-%d never led by %d (leader %d)", name, idx, leader,
		  image_part(name, idx)->leader);
}

static void assert_isr(const char *name, int32_t idx, int n, const int32_t *ids)
{
	const struct meta_part *p = image_part(name, idx);

	cr_assert_eq(p->nisr, n, "%s-%d: ISR of %d, want %d", name, idx, p->nisr, n);
	for (int i = 0; i < n; i++)
		cr_assert_eq(p->isr[i], ids[i], "%s-%d: ISR[%d] %d, want %d", name, idx, i, p->isr[i], ids[i]);
}

/* ISR of name-idx set to ids by a record (what a leader asks for). */
static void set_isr(const char *name, int32_t idx, int n, const int32_t *ids)
{
	struct metalog_rec r;

	cr_assert_eq(metalog_build_partition_change(ctl->ml, name, idx, -2, ids, n, NULL, 0, &r), 0);
	proposed_done = 0;
	ctl_meta_propose(ctl, &r, proposed, NULL);
	cr_assert(run_until(is_proposed));
	cr_assert_eq(proposed_err, 0);
}

/* A topic config set by a record (what AlterConfigs proposes). */
static void set_config(const char *name, const char *key, const char *value)
{
	struct metalog_rec r;

	cr_assert_eq(metalog_build_config(ctl->ml, name, key, value, &r), 0);
	proposed_done = 0;
	ctl_meta_propose(ctl, &r, proposed, NULL);
	cr_assert(run_until(is_proposed));
	cr_assert_eq(proposed_err, 0);
}

Test(ctl, fencing_a_broker_moves_its_leaderships_and_unfencing_brings_offline_partitions_back)
{
	int32_t s = b.set.node_id;
	const int32_t e[9] = { 2, s, 3, /* */ 2, 3, s, /* */ 3, 2, s }, solo[1] = { 2 }, two[2] = { 2, 3 };
	const int32_t only2[1] = { 2 }, only3[1] = { 3 }, s3[2] = { s, 3 }, s_3[2] = { 3, s };
	struct ctl_elect_state st;
	int64_t e2, e3;

	cr_assert(s != 2 && s != 3);
	connect_client();
	e2 = register_broker(2, 1);
	e3 = register_broker(3, 1);
	cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	cr_assert_eq(ctl_controller_heartbeat(ctl, 3, e3, 2), 0);
	watched = 2;
	cr_assert(run_until(watched_unfenced));
	watched = 3;
	cr_assert(run_until(watched_unfenced));
	cr_assert_eq(create_assigned("e", 3, 3, e, NULL, NULL), 0);
	cr_assert_eq(create_assigned("solo", 1, 1, solo, NULL, NULL), 0);
	cr_assert_eq(create_assigned("u", 1, 2, two, "unclean.leader.election.enable", "true"), 0);
	cr_assert_eq(create_assigned("c", 1, 2, two, NULL, NULL), 0);
	cr_assert_eq(create_assigned("late", 1, 2, two, NULL, NULL), 0);
	/* u-0, c-0 and late-0: broker 3 fell out of sync (the leader's ISR change) */
	set_isr("u", 0, 1, only2);
	set_isr("c", 0, 1, only2);
	set_isr("late", 0, 1, only2);
	cr_assert_eq(image_part("e", 0)->leader, 2);
	cr_assert_eq(image_part("e", 0)->leader_epoch, 0);
	cr_assert_eq(produce_to("e", 0), KERR_NOT_LEADER_OR_FOLLOWER, "broker 2 leads e-0");
	ctl_elect_state(ctl, &st);
	cr_assert_eq(st.offline, 0);
	/* broker 2 goes silent for a session; 3 and this node heartbeat */
	for (int i = 0; i < 5; i++) {
		advance_ms(2000);
		cr_assert_eq(ctl_controller_heartbeat(ctl, 3, e3, 2), 0);
	}
	watched = 2;
	cr_assert(run_until(watched_fenced), "broker 2 was not fenced");
	/* e-0: the next replica in the ISR, this node, leads at epoch 1 */
	wait_led("e", 0, s);
	cr_assert_eq(image_part("e", 0)->leader_epoch, 1);
	cr_assert_eq(image_part("e", 0)->partition_epoch, 1);
	assert_isr("e", 0, 2, s3);
	cr_assert_eq(produce_to("e", 0), 0, "this node leads e-0 now: it takes writes");
	/* e-1: replicas order (3 before this node) */
	wait_led("e", 1, 3);
	cr_assert_eq(image_part("e", 1)->leader_epoch, 1);
	assert_isr("e", 1, 2, s_3);
	/* e-2: 3 leads still; 2 leaves its ISR: the partition epoch only */
	wait_led("e", 2, 3);
	cr_assert_eq(image_part("e", 2)->leader_epoch, 0);
	cr_assert_eq(image_part("e", 2)->partition_epoch, 1);
	assert_isr("e", 2, 2, s_3);
	/* solo-0 and c-0: no live replica in sync, unclean off: offline, the
	 * last ISR member kept */
	wait_led("solo", 0, -1);
	assert_isr("solo", 0, 1, only2);
	wait_led("c", 0, -1);
	assert_isr("c", 0, 1, only2);
	cr_assert_eq(image_part("c", 0)->leader_epoch, 1);
	/* u-0: unclean on the topic: broker 3, out of sync, leads alone */
	wait_led("u", 0, 3);
	assert_isr("u", 0, 1, only3);
	wait_led("late", 0, -1);
	ctl_elect_state(ctl, &st);
	cr_assert_eq(st.offline, 3);
	cr_assert_eq(st.elections_total, 3, "e-0, e-1, u-0");
	cr_assert_eq(st.unclean_total, 1);
	/* unclean turned on for an offline partition's topic: elected then */
	set_config("late", "unclean.leader.election.enable", "true");
	wait_led("late", 0, 3);
	assert_isr("late", 0, 1, only3);
	/* broker 2 back: the offline partitions it is in sync for come back */
	cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	cr_assert(run_until(watched_unfenced));
	wait_led("solo", 0, 2);
	cr_assert_eq(image_part("solo", 0)->leader_epoch, 2);
	wait_led("c", 0, 2);
	cr_assert_eq(image_part("c", 0)->leader_epoch, 2);
	/* nothing moves back on its own: that is a preferred election */
	cr_assert_eq(image_part("e", 0)->leader, s);
	ctl_elect_state(ctl, &st);
	cr_assert_eq(st.offline, 0);
	cr_assert_eq(st.elections_total, 6);
	cr_assert_eq(st.unclean_total, 2);
}

/* ElectLeaders v2 of one partition: its error code. */
static int16_t elect_one(const char *name, int32_t idx, int8_t type)
{
	struct kafka_elect_leaders_request q;
	struct kafka_elect_leaders_request_topic_partitions tp;
	const struct kafka_elect_leaders_response *r;

	kafka_elect_leaders_request_init(&q);
	memset(&tp, 0, sizeof(tp));
	tp.Topic = kstr(name);
	tp.Partitions.items = &idx;
	tp.Partitions.count = 1;
	q.ElectionType = type;
	q.TopicPartitions.items = &tp;
	q.TopicPartitions.count = 1;
	q.TimeoutMs = 30000;
	r = call(KAFKA_ELECT_LEADERS_KEY, 2, &q);
	cr_assert_eq(r->ErrorCode, 0);
	cr_assert_eq(r->ReplicaElectionResults.count, 1);
	cr_assert_eq(r->ReplicaElectionResults.items[0].PartitionResult.count, 1);
	cr_assert_eq(r->ReplicaElectionResults.items[0].PartitionResult.items[0].PartitionId, idx);
	return r->ReplicaElectionResults.items[0].PartitionResult.items[0].ErrorCode;
}

Test(ctl, elect_leaders_moves_to_the_preferred_replica_or_elects_an_unclean_one)
{
	int32_t s = b.set.node_id;
	const int32_t pref[2] = { 2, s }, two[2] = { 2, 3 }, both[2] = { 2, s }, only2[1] = { 2 }, only3[1] = { 3 };
	struct ctl_elect_state st;
	int64_t e2, e3;

	connect_client();
	e2 = register_broker(2, 1);
	e3 = register_broker(3, 1);
	cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	cr_assert_eq(ctl_controller_heartbeat(ctl, 3, e3, 2), 0);
	watched = 3;
	cr_assert(run_until(watched_unfenced));
	cr_assert_eq(create_assigned("p", 1, 2, pref, NULL, NULL), 0);
	cr_assert_eq(create_assigned("c", 1, 2, two, NULL, NULL), 0);
	set_isr("c", 0, 1, only2);
	cr_assert_eq(elect_one("p", 0, 0), KERR_ELECTION_NOT_NEEDED, "the preferred replica leads");
	cr_assert_eq(elect_one("c", 0, 1), KERR_ELECTION_NOT_NEEDED, "a live leader: no unclean election");
	cr_assert_eq(elect_one("nope", 0, 0), KERR_UNKNOWN_TOPIC_OR_PARTITION);
	cr_assert_eq(elect_one("p", 5, 0), KERR_UNKNOWN_TOPIC_OR_PARTITION);
	/* broker 2 fenced: p-0 moves to this node, c-0 goes offline */
	for (int i = 0; i < 5; i++) {
		advance_ms(2000);
		cr_assert_eq(ctl_controller_heartbeat(ctl, 3, e3, 2), 0);
	}
	wait_led("p", 0, s);
	wait_led("c", 0, -1);
	cr_assert_eq(elect_one("p", 0, 0), KERR_PREFERRED_LEADER_NOT_AVAILABLE, "broker 2 is fenced");
	/* c-0: an unclean election elects broker 3, out of sync */
	cr_assert_eq(elect_one("c", 0, 1), 0);
	cr_assert_eq(image_part("c", 0)->leader, 3, "answered once applied");
	cr_assert_eq(md_find(broker_md(&b), "c", 1)->parts[0].leader, 3, "... and published");
	assert_isr("c", 0, 1, only3);
	ctl_elect_state(ctl, &st);
	cr_assert_eq(st.unclean_total, 1);
	/* broker 2 back, but out of p-0's ISR: not preferred yet */
	cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	watched = 2;
	cr_assert(run_until(watched_unfenced));
	cr_assert_eq(elect_one("p", 0, 0), KERR_PREFERRED_LEADER_NOT_AVAILABLE, "broker 2 is not in sync");
	/* in sync again (its leader's ISR change): the preferred election
	 * moves p-0 back to broker 2 at a new epoch */
	set_isr("p", 0, 2, both);
	cr_assert_eq(elect_one("p", 0, 0), 0);
	cr_assert_eq(image_part("p", 0)->leader, 2);
	cr_assert_eq(image_part("p", 0)->leader_epoch, 2);
	wait_led("p", 0, 2);
	cr_assert_eq(produce_to("p", 0), KERR_NOT_LEADER_OR_FOLLOWER, "broker 2 leads p-0 again");
	cr_assert_eq(elect_one("p", 0, 0), KERR_ELECTION_NOT_NEEDED);
}

static int shutdown_settled(void)
{
	return ctl_shutdown_settled(ctl);
}

Test(ctl, a_controlled_shutdown_moves_leadership_to_other_isr_members_first)
{
	int32_t s = b.set.node_id;
	const int32_t two[6] = { s, 2, /* */ s, 3, /* */ 2, s }, solo[1] = { s }, only2[1] = { 2 }, only3[1] = { 3 };
	int64_t e2, e3;

	connect_client();
	e2 = register_broker(2, 1);
	e3 = register_broker(3, 1);
	cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	cr_assert_eq(ctl_controller_heartbeat(ctl, 3, e3, 2), 0);
	watched = 3;
	cr_assert(run_until(watched_unfenced));
	cr_assert_eq(create_assigned("m", 3, 2, two, NULL, NULL), 0);
	cr_assert_eq(create_assigned("alone", 1, 1, solo, NULL, NULL), 0);
	cr_assert_eq(image_part("m", 0)->leader, s);
	ctl_shutdown_ask(ctl);
	cr_assert(run_until(shutdown_settled), "the controlled shutdown never settled");
	/* m-0 and m-1 led by this node: moved to their other ISR member, this
	 * node out of the ISR; m-2 (a follower here) keeps its leader */
	wait_led("m", 0, 2);
	cr_assert_eq(image_part("m", 0)->leader_epoch, 1);
	assert_isr("m", 0, 1, only2);
	wait_led("m", 1, 3);
	assert_isr("m", 1, 1, only3);
	wait_led("m", 2, 2);
	assert_isr("m", 2, 1, only2);
	/* alone-0 has nowhere to go: this node leads it until it is gone */
	wait_led("alone", 0, s);
	cr_assert_eq(image_part("alone", 0)->leader_epoch, 0);
	/* this broker is fenced, and its own heartbeats do not unfence it */
	watched = s;
	cr_assert(watched_fenced());
	for (int i = 0; i < 3; i++) {
		advance_ms(2000);
		cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
		cr_assert_eq(ctl_controller_heartbeat(ctl, 3, e3, 2), 0);
	}
	cr_assert(watched_fenced(), "a heartbeat unfenced a broker shutting down");
}

Test(ctl, a_controlled_shutdown_of_a_lone_broker_changes_nothing)
{
	int32_t s = b.set.node_id;

	connect_client();
	create_topic("t", 2);
	ctl_shutdown_ask(ctl);
	cr_assert(run_until(shutdown_settled));
	cr_assert_eq(image_part("t", 0)->leader, s);
	cr_assert_eq(image_part("t", 0)->leader_epoch, 0);
	watched = s;
	cr_assert(watched_unfenced(), "nowhere to move: not fenced");
}

/* ---- replication roles and the ISR ------------------------------------ */

static int32_t led_here = -1;

static int shrunk(void)
{
	const struct meta_part *p = image_part("two", led_here);
	const struct md_topic *t = md_find(broker_md(&b), "two", 3);
	const struct part *pt = t ? md_part_owner(&t->parts[led_here]) : NULL;

	return p && p->nisr == 1 && pt && pt->role && pt->role->nisr == 1 && !pt->role->f[0].in_isr;
}

Test(ctl, roles_reach_the_owner_and_a_follower_that_never_fetches_leaves_the_isr)
{
	int32_t self = b.set.node_id;
	const struct md_topic *t;
	char msg[256];
	int64_t e2;

	connect_client();
	e2 = register_broker(2, 1);
	watched = 2;
	cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	cr_assert(run_until(watched_unfenced));
	create_topic("alone", 1);
	t = md_find(broker_md(&b), "alone", 5);
	cr_assert_null(md_part_owner(&t->parts[0])->role, "a partition alone: no role, the one-node way");
	cr_assert_eq(create_topic_rf("two", 2, 2, NULL, msg, sizeof(msg)), 0, "%s", msg);
	turn(now);
	t = md_find(broker_md(&b), "two", 3);
	for (int32_t i = 0; i < 2; i++) {
		const struct part_role *r = md_part_owner(&t->parts[i])->role;

		cr_assert_not_null(r, "partition %d has its role", i);
		cr_assert_eq(r->self, self);
		if (t->parts[i].leader == self) {
			led_here = i;
			cr_assert(r->leading);
			cr_assert_eq(r->nf, 1);
			cr_assert_eq(r->f[0].id, 2);
			cr_assert(r->f[0].in_isr);
			cr_assert_eq(r->nisr, 2);
		} else {
			cr_assert(!r->leading);
			cr_assert_eq(r->leader, 2);
			cr_assert_str_eq(r->leader_host, "127.0.0.1");
			cr_assert_eq(r->leader_port, 9002, "broker 2's registered listener");
		}
	}
	cr_assert_geq(led_here, 0);
	/* a partition CreatePartitions adds (opened before its records are
	 * applied) gets its role once published */
	{
		struct kafka_create_partitions_request q;
		struct kafka_create_partitions_request_create_partitions_topic ct;
		const struct kafka_create_partitions_response *cr;

		kafka_create_partitions_request_init(&q);
		memset(&ct, 0, sizeof(ct));
		ct.Name = kstr("two");
		ct.Count = 3;
		ct.Assignments.count = -1;
		q.Topics.items = &ct;
		q.Topics.count = 1;
		q.TimeoutMs = 30000;
		cr = call(KAFKA_CREATE_PARTITIONS_KEY, 1, &q);
		cr_assert_eq(cr->Results.items[0].ErrorCode, 0);
		turn(now);
		t = md_find(broker_md(&b), "two", 3);
		cr_assert_eq(t->nparts, 3);
		cr_assert_not_null(md_part_owner(&t->parts[2]));
		cr_assert_not_null(md_part_owner(&t->parts[2])->role, "the added partition has its role");
		cr_assert_eq(md_part_owner(&t->parts[2])->role->leading, t->parts[2].leader == self);
	}
	/* broker 2 never fetches: after replica.lag.time.max.ms the leader
	 * asks it out, the control thread proposes the PARTITION_CHANGE, and
	 * the new ISR comes back to the owner as a role. Broker 2 heartbeats
	 * all along: fenced after its session, it would leave the ISR through
	 * the controller's election instead (test_ctl's fencing tests) */
	for (int i = 0; i < 29; i++) {
		advance_ms(1000);
		cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	}
	cr_assert_eq(image_part("two", led_here)->nisr, 2, "within the lag time");
	for (int i = 0; i < 3; i++) {
		advance_ms(1000);
		cr_assert_eq(ctl_controller_heartbeat(ctl, 2, e2, 2), 0);
	}
	cr_assert(run_until(shrunk), "the ISR did not shrink to the leader");
	cr_assert_eq(image_part("two", led_here)->isr[0], self, "the leader stays in its ISR");
}

/* ---- offsets expiry, on the injected wall clock ----------------------- */

static int offset_expired(void)
{
	return group_coord_stats(ctl_groups(ctl))->offsets_expired == 1;
}

static void setup_expiry(void)
{
	short_retention = 1;
	setup();
}

TestSuite(ctl_expiry, .init = setup_expiry, .fini = teardown, .timeout = 60);

Test(ctl_expiry, an_empty_groups_offsets_expire_after_the_retention)
{
	connect_client();
	create_topic("t", 1);
	join_and_sync("g", 6000);
	cr_assert_eq(commit(7), 0, "OffsetCommit");
	/* the member's session ends: the group is empty from now */
	advance_ms(7000);
	cr_assert_eq(group_coord_stats(ctl_groups(ctl))->members_expired, 1);
	cr_assert_eq(committed(), 7);
	/* 50 s empty: kept (offsets.retention.minutes=1) */
	advance_ms(50000);
	cr_assert_eq(committed(), 7, "expired before offsets.retention.minutes");
	/* past a minute empty, at the next check: gone */
	advance_ms(12000);
	/* the tombstone is written to __consumer_offsets; the offset goes
	 * once it is durable (the disk, in real time) */
	cr_assert(run_until(offset_expired), "kept past offsets.retention.minutes");
	cr_assert_eq(committed(), -1);
}
