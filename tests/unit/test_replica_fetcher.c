/* tests/unit/test_replica_fetcher.c — a follower's fetcher against a real
 * leader: one shard polled in the test's thread (its clock injected) holds
 * the leader's partition "t-0", published in the metadata with replicas
 * {1, 2}, and broker 2's copy of it in another directory; the fetcher
 * connects over TCP to the shard's own client listener, as it would to
 * another node's. Checked: the Fetch it builds (ReplicaId, epochs, offsets
 * of durable log ends), the records copied, the high watermarks of both
 * sides and an acks=all produce answered only once the follower has the
 * records durable; a follower whose tail diverges (an older epoch's
 * records the leader never had) cuts it from the leader's DivergingEpoch
 * and then copies the leader's log; a leader address nothing listens on
 * is tried again after a back-off, and a new address in a new role is
 * followed; a high watermark alone rides on the next records; a
 * partition closed while its fetch waits is not read by the answer; a
 * partition whose follower log failed does not stop the others'
 * replication from the same leader. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/kafka/kafka_msgs.h"
#include "dataplane/native/native_format.h"
#include "dataplane/native/native_repl.h"
#include "dataplane/part.h"
#include "dataplane/part_replica.h"
#include "dataplane/part_proxy.h"
#include "dataplane/part_table.h"
#include "dataplane/part_role.h"
#include "dataplane/replica_fetcher.h"
#include "dataplane/shard.h"
#include "dataplane/shard_core.h"
#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/plog_epochs.h"
#include "broker_fixture.h"
#include "helpers.h"

static struct broker b;
static struct shard *sh;
static struct spsc to_shard, to_ctl;
static struct shard_msg to_shard_slots[RING_SLOTS], to_ctl_slots[RING_SLOTS];
static int ctl_sleeping;
static char *dir;

static const int32_t both[2] = { 1, 2 };
static struct part_pub mpub;
static struct md_partition mpart = { .index = 0, .owner_shard = 0, .leader = 1, .nreplicas = 2, .nisr = 2,
				     .replicas = both, .isr = both };
static struct md_topic *topics[1];
static struct md_topic topic;
static struct md_snapshot md = { .version = 1, .ntopics = 1, .topics = topics };
static struct part *leader, *follower;
static int port;

#define T0 1000000000ull
static uint64_t now = T0;

static struct part *open_part(const char *sub)
{
	char path[4300];
	struct part *p;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	cr_assert_eq(part_open(sh, path, "t", 0, &topic.cfg, &p), 0);
	p->next = sh->parts;
	sh->parts = p;
	return p;
}

static void setup(void)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);

	dir = test_broker_init(&b, -1);
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
	b.md = &md;
	sh = test_shard_start(&b);
	cr_assert_eq(getsockname(sh->listen_fd[0], (struct sockaddr *)&a, &alen), 0);
	port = ntohs(a.sin_port);
	b.serving = 1;
	now = T0;
	sh->now_ns = now;
	leader = open_part("t-0");
	{
		char d2[4200];

		snprintf(d2, sizeof(d2), "%s/node2", dir);
		cr_assert_eq(mkdir(d2, 0755), 0);
	}
	follower = open_part("node2/t-0");
	memset(&mpub, 0, sizeof(mpub));
	mpart.pub = &mpub;
	mpub.owner_part = leader;   /* published for the shards, as the owner does */
}

static void teardown(void)
{
	test_shard_stop(&b, sh, 1, now, dir);
	sh = NULL;
}

TestSuite(replica_fetcher, .init = setup, .fini = teardown, .timeout = 60);

static void role(struct part *p, int32_t self, int32_t epoch)
{
	struct part_role_msg m = { .self = self, .leader = 1, .leader_epoch = epoch, .nreplicas = 2, .nisr = 2,
				   .replicas = { 1, 2 }, .isr = { 1, 2 }, .isr_to = 1 };

	snprintf(m.leader_host, sizeof(m.leader_host), "127.0.0.1");
	m.leader_port = port;
	cr_assert_eq(part_role_set(p, &m), 0);
}

static int answered, answer_err;
static int64_t answer_base;

static void produced(struct shard *owner, void *cookie, int64_t base, int64_t log_start, int err)
{
	(void)owner;
	(void)cookie;
	(void)log_start;
	answered++;
	answer_err = err;
	answer_base = base;
}

static void produce(struct part *p, int acks, const char *value)
{
	uint8_t buf[512];
	struct batch_builder bb;
	ssize_t len;
	struct part_produce_req req = { .rec = buf, .acks = acks, .recv_ns = now, .timeout_ms = 30000 };

	batch_builder_init(&bb, buf, sizeof(buf), 1000);
	cr_assert_eq(batch_builder_add(&bb, 0, 1000, "k", 1, value, strlen(value), NULL, 0, 0), 0);
	len = batch_builder_finish(&bb, 0, -1, -1, -1, -1);
	cr_assert_gt(len, 0);
	req.len = (uint32_t)len;
	part_produce(p, &req, produced, NULL);
}

/* Turns until done() holds or 5 s of real time; 1 ms of clock a turn. */
static void run_until(int (*done)(void))
{
	for (int i = 0; i < 5000 && !done(); i++) {
		now += 1000000;
		if (shard_poll(sh, now, 1700000000000 + (int64_t)(now / 1000000)) == 0)
			shard_idle(sh);
	}
}

static int caught_up(void)
{
	return answered == 3 && follower->pl->high_watermark == 3;
}

Test(replica_fetcher, the_fetch_names_the_followers_durable_log_end_and_epoch)
{
	static uint8_t frame[4096], arena[65536];
	struct kafka_writer w;
	struct kafka_request req;
	struct kafka_arena a;
	const struct kafka_fetch_request *q;

	role(follower, 1, 0);               /* it led at epoch 0 (a follower refuses produces) */
	produce(follower, 0, "mine");       /* appended, not durable yet */
	role(follower, 2, 3);               /* and follows broker 1 at 3 */
	kafka_writer_init(&w, frame, sizeof(frame));
	cr_assert_eq(replica_fetch_build(sh, 1, 7, &w), 0, "nothing while an append is not durable");
	store_drain(&sh->st);
	kafka_writer_init(&w, frame, sizeof(frame));
	cr_assert_eq(replica_fetch_build(sh, 1, 7, &w), 1);
	cr_assert_eq(replica_fetch_build(sh, 9, 7, &w), 0, "nothing is followed from broker 9");
	kafka_arena_init(&a, arena, sizeof(arena));
	cr_assert_eq(kafka_request_decode(frame + 4, w.len - 4, &a, &req), 0);
	cr_assert_eq(req.header.RequestApiKey, KAFKA_FETCH_KEY);
	cr_assert_eq(req.header.RequestApiVersion, REPLICA_FETCH_VERSION);
	cr_assert_eq(req.header.CorrelationId, 7);
	q = req.body;
	cr_assert_eq(q->ReplicaId, 2);
	cr_assert_eq(q->Topics.count, 1);
	cr_assert_eq(q->Topics.items[0].Partitions.items[0].FetchOffset, 1, "its durable log end");
	cr_assert_eq(q->Topics.items[0].Partitions.items[0].CurrentLeaderEpoch, 3);
	cr_assert_eq(q->Topics.items[0].Partitions.items[0].LastFetchedEpoch, 0, "its last batch's epoch");
}

Test(replica_fetcher, acks_all_is_answered_once_the_follower_has_it_durable)
{
	role(leader, 1, 0);
	role(follower, 2, 0);
	for (int i = 0; i < 3; i++)
		produce(leader, i == 2 ? -1 : 1, "value");
	run_until(caught_up);
	cr_assert_eq(answered, 3);
	cr_assert_eq(answer_err, 0);
	cr_assert_eq(answer_base, 2);
	cr_assert_eq(follower->pl->next_offset, 3, "the three records copied");
	cr_assert_geq(follower->pl->durable_offset, 3);
	cr_assert_eq(leader->pl->high_watermark, 3, "the follower fetched from 3: it has 0-2 durable");
	cr_assert_eq(follower->pl->high_watermark, 3, "the leader's, told in its answer");
	cr_assert_eq(leader->role->f[0].leo, 3);
	cr_assert_gt(sh->stats.repl_bytes_in, 0);
	cr_assert_eq(sh->stats.repl_bytes_in, sh->stats.repl_bytes_out);
}

static int first_acked(void)
{
	return answered == 1;
}

/* A second partition, u-0, led and followed on the same shard as t-0
 * (broker 1's and broker 2's copies), published beside t in the
 * metadata. */
static struct part_pub mpub_u;
static struct md_partition mpart_u = { .index = 0, .owner_shard = 0, .leader = 1, .nreplicas = 2, .nisr = 2,
				       .replicas = both, .isr = both };
static struct md_topic topic_u;
static struct md_topic *topics_tu[2];

static struct part *open_u(const char *sub)
{
	char path[4300];
	struct part *p;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	cr_assert_eq(part_open(sh, path, "u", 0, &topic_u.cfg, &p), 0);
	p->next = sh->parts;
	sh->parts = p;
	return p;
}

static struct part *follower_u;

static int u_copied(void)
{
	return follower_u->pl->durable_offset == 1;
}

/* One partition's log failed on the follower (what a write error leaves:
 * storage/plog.h, err set, never durable again): the fetcher leaves it out
 * and goes on asking for the others from the same leader. Until
 * 2026-12-02 it waited for the failed one to become durable, and asked
 * nothing more of that leader. */
Test(replica_fetcher, a_partition_whose_log_failed_does_not_stop_the_others_from_its_leader)
{
	struct part *leader_u;

	topic_u = topic;
	topic_u.name = "u";
	topic_u.parts = &mpart_u;
	topics_tu[0] = &topic;
	topics_tu[1] = &topic_u;
	md.topics = topics_tu;
	md.ntopics = 2;
	leader_u = open_u("u-0");
	follower_u = open_u("node2/u-0");
	memset(&mpub_u, 0, sizeof(mpub_u));
	mpart_u.pub = &mpub_u;
	mpub_u.owner_part = leader_u;   /* published for the shards, as the owner does */
	role(leader, 1, 0);
	role(follower, 2, 0);
	role(leader_u, 1, 0);
	role(follower_u, 2, 0);
	produce(leader_u, 1, "u");
	run_until(u_copied);
	cr_assert_eq(follower_u->pl->durable_offset, 1, "u-0 replicated before its log fails");
	answered = 0;
	follower_u->pl->err = -EIO;
	produce(leader, -1, "a");
	run_until(first_acked);
	cr_assert_eq(answered, 1, "acks=all on t-0 answered: its follower fetched it");
	cr_assert_eq(answer_err, 0);
	cr_assert_geq(follower->pl->durable_offset, 1);
	cr_assert_eq(leader->pl->high_watermark, 1);
	cr_assert_eq(sh->stats.repl_skipped[SHARD_REPL_SKIP_LOG_FAILED], 1,
		     "u-0 counted once as left out for its failed log, not once a turn");
}

/* A leader's answer whose batches are not contiguous (offset 0, then 5
 * of a topic that is not compacted) appends nothing, as before, and is
 * now counted as such; an answer to a fetch of an older epoch is counted
 * as dropped. */
Test(replica_fetcher, an_answer_not_contiguous_or_stale_is_counted_as_dropped)
{
	uint8_t rec[1024];
	size_t len = 0;
	struct kafka_fetch_response_partition_data d;
	struct kafka_fetch_response_fetchable_topic_response t;
	struct kafka_fetch_response r;

	for (int i = 0; i < 2; i++) {
		struct batch_builder bb;
		ssize_t n;

		batch_builder_init(&bb, rec + len, sizeof(rec) - len, 1000);
		cr_assert_eq(batch_builder_add(&bb, 0, 1000, "k", 1, "v", 1, NULL, 0, 0), 0);
		n = batch_builder_finish(&bb, 0, -1, -1, -1, -1);
		cr_assert_gt(n, 0);
		batch_set_base_offset(rec + len, i ? 5 : 0);
		len += (size_t)n;
	}
	role(follower, 2, 0);
	follower->role->fetch_epoch = follower->role->leader_epoch;   /* as the fetch sent */
	memset(&d, 0, sizeof(d));
	d.PartitionIndex = 0;
	d.HighWatermark = 6;
	d.LogStartOffset = 0;
	d.DivergingEpoch.Epoch = -1;
	d.DivergingEpoch.EndOffset = -1;
	d.Records = (struct kafka_bytes){ rec, (int32_t)len };
	memset(&t, 0, sizeof(t));
	t.Topic = (struct kafka_str){ "t", 1 };
	t.Partitions.items = &d;
	t.Partitions.count = 1;
	memset(&r, 0, sizeof(r));
	r.Responses.items = &t;
	r.Responses.count = 1;
	cr_assert_eq(replica_fetch_apply(sh, 1, &r), 0, "nothing appended");
	cr_assert_eq(follower->pl->next_offset, 0);
	cr_assert_eq(sh->stats.repl_errors, 0, "not an error, as before");
	cr_assert_eq(sh->stats.repl_skipped[SHARD_REPL_DROP_NON_CONTIGUOUS], 1, "the set dropped is counted");
	/* a new epoch since the fetch was sent: its answer is dropped */
	follower->role->fetch_epoch = -1;
	cr_assert_eq(replica_fetch_apply(sh, 1, &r), 0);
	cr_assert_eq(sh->stats.repl_skipped[SHARD_REPL_DROP_STALE], 1, "the stale answer is counted");
	cr_assert_eq(sh->stats.repl_skipped[SHARD_REPL_DROP_NON_CONTIGUOUS], 1, "and not taken");
	/* an answer for a partition nobody follows from that leader */
	cr_assert_eq(replica_fetch_apply(sh, 3, &r), 0);
	cr_assert_eq(sh->stats.repl_skipped[SHARD_REPL_DROP_NOT_FOLLOWED], 1);
}

static int second_acked(void)
{
	return answered == 2;
}

static int follower_told_2(void)
{
	return follower->pl->high_watermark == 2;
}

/* The follower's fetch that moved the high watermark is not answered at
 * once with that news alone (an empty round trip per move): it waits for
 * the next records, which carry it, or answers it alone a little later. */
Test(replica_fetcher, a_high_watermark_alone_rides_on_the_next_records)
{
	uint64_t fetches;

	role(leader, 1, 0);
	role(follower, 2, 0);
	produce(leader, -1, "a");
	run_until(first_acked);
	cr_assert_eq(answered, 1);
	cr_assert_eq(leader->pl->high_watermark, 1);
	fetches = sh->stats.fetch_requests;
	produce(leader, -1, "b");
	run_until(second_acked);
	cr_assert_eq(answered, 2);
	cr_assert_eq(answer_err, 0);
	cr_assert_eq(sh->stats.fetch_requests - fetches, 1,
		     "one fetch from the follower after the first ack (its next records' answer carried the "
		     "high watermark), not %llu", (unsigned long long)(sh->stats.fetch_requests - fetches));
	cr_assert_eq(follower->pl->high_watermark, 1, "told with the records of \"b\"");
	run_until(follower_told_2);
	cr_assert_eq(follower->pl->high_watermark, 2, "told alone once nothing more came");
	cr_assert_eq(leader->pl->high_watermark, 2);
}

static int copied_a(void)
{
	return follower->pl->durable_offset == 1 && follower->pl->high_watermark == 1;
}

static int closed_err = 1;

static void closed(void *self, void *cookie, int err)
{
	(void)self;
	(void)cookie;
	closed_err = err;
}

/* The fetcher finds an answer's partition by its place in the request; a
 * partition closed (freed) while its fetch waits at the leader is not that
 * place any more: the answer that then comes is taken by name, and finds
 * nothing followed (ASan: nothing of the freed partition is read). */
Test(replica_fetcher, a_partition_closed_while_its_fetch_waits_is_not_read_by_the_answer)
{
	struct part_proxy px;
	uint64_t in, out;

	role(leader, 1, 0);
	role(follower, 2, 0);
	produce(leader, 1, "a");
	run_until(copied_a);
	cr_assert_eq(follower->pl->durable_offset, 1);
	for (int i = 0; i < 20; i++) {       /* its next fetch, from 1, waits at the leader */
		now += 1000000;
		(void)shard_poll(sh, now, 1700000000000 + (int64_t)(now / 1000000));
	}
	in = sh->stats.repl_bytes_in;
	out = sh->stats.repl_bytes_out;
	/* the follower (the same partition, another node's copy in this
	 * test) under a key of its own in the shard's table: closed by value */
	memset(follower->topic_id, 0xf0, sizeof(follower->topic_id));
	cr_assert_eq(part_table_add(&sh->part_tab, follower), 0);
	part_proxy_init_shard(&px, sh);
	part_proxy_close(&px, 0, part_addr_of(follower->topic_id, 0), closed, NULL);
	cr_assert_eq(closed_err, 0);
	follower = NULL;
	produce(leader, 1, "b");             /* wakes it: answered with "b" */
	for (int i = 0; i < 300 && answered < 2; i++) {
		now += 1000000;
		if (shard_poll(sh, now, 1700000000000 + (int64_t)(now / 1000000)) == 0)
			shard_idle(sh);
	}
	for (int i = 0; i < 50; i++) {
		now += 1000000;
		(void)shard_poll(sh, now, 1700000000000 + (int64_t)(now / 1000000));
	}
	cr_assert_eq(answered, 2);
	cr_assert_eq(leader->pl->next_offset, 2);
	cr_assert_gt(sh->stats.repl_bytes_out, out, "\"b\" went out to the fetch that waited");
	cr_assert_eq(sh->stats.repl_bytes_in, in, "and nothing was appended for the closed partition");
}

static int diverged_and_copied(void)
{
	return follower->pl->next_offset == 2 && follower->pl->durable_offset == 2 &&
	       follower->pl->high_watermark == 2;
}

Test(replica_fetcher, a_divergent_tail_is_cut_and_the_leaders_log_copied)
{
	int32_t e;
	int64_t end;

	/* broker 2 led at epoch 0 and wrote a record nobody else has */
	produce(follower, 1, "lost");
	store_drain(&sh->st);
	cr_assert_eq(follower->pl->next_offset, 1);
	/* broker 1 leads at epoch 1 and writes two */
	role(leader, 1, 1);
	produce(leader, 1, "a");
	produce(leader, 1, "b");
	store_drain(&sh->st);
	answered = 0;
	role(follower, 2, 1);
	run_until(diverged_and_copied);
	cr_assert_eq(sh->stats.repl_truncations, 1, "the epoch-0 record was cut");
	cr_assert_eq(follower->pl->next_offset, 2);
	plog_epoch_end_offset(follower->pl, 0, &e, &end);
	cr_assert_eq(plog_epoch_for_offset(follower->pl, 0), 1, "offset 0 is the leader's epoch-1 record");
	cr_assert_eq(end, 0, "epoch 0 ends where epoch 1 starts: nothing of it is left");
	cr_assert_eq(leader->pl->high_watermark, 2);
}

static int reconnected_twice(void)
{
	return sh->stats.repl_reconnects >= 2;
}

static int copied_one(void)
{
	return follower->pl->next_offset == 1 && follower->pl->durable_offset == 1;
}

Test(replica_fetcher, a_leader_that_is_not_there_is_tried_again_then_followed_at_its_new_address)
{
	struct part_role_msg m = { .self = 2, .leader = 1, .leader_epoch = 0, .nreplicas = 2, .nisr = 2,
				   .replicas = { 1, 2 }, .isr = { 1, 2 }, .isr_to = 1 };
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);

	/* a port nothing listens on: taken, then given back */
	cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &alen), 0);
	close(s);
	role(leader, 1, 0);
	produce(leader, 1, "x");
	snprintf(m.leader_host, sizeof(m.leader_host), "localhost");
	m.leader_port = ntohs(a.sin_port);
	cr_assert_eq(part_role_set(follower, &m), 0);
	run_until(reconnected_twice);
	cr_assert_geq(sh->stats.repl_reconnects, 2, "refused, and tried again after its back-off");
	cr_assert_eq(follower->pl->next_offset, 0);
	/* the leader's registration moved: the new role's address is used */
	role(follower, 2, 0);
	run_until(copied_one);
	cr_assert_eq(follower->pl->next_offset, 1);
}

/* ---- the native transport (REPLICA_FETCH / REPLICA_DATA) ----------------
 * The shard's native replication state on a wire of the test's: what it
 * sends is queued whole, as datagrams, and delivered to the same shard on
 * the next turn (both ends of a DPDK queue pair joined, as net_memif and
 * net_ring do; the port itself runs in test_dpdk_replication.py). Every
 * datagram goes through the real writer and parser. */

static uint8_t wire[512][NATIVE_MAX_DATAGRAM];
static int wire_len[512], nwire, wire_sent, wire_drop_every;
static int lost;

static int wire_send(struct shard *s, const struct native_repl_peer *to, const uint8_t *dg, int len)
{
	(void)s;
	cr_assert_eq(to->q, 1, "replication leaves by the replication pair");
	if (len <= 0 || nwire == 512)
		return -ENOBUFS;
	memcpy(wire[nwire], dg, (size_t)len);
	wire_len[nwire++] = len;
	return 0;
}

static void wire_deliver(void)
{
	static uint8_t cur[NATIVE_MAX_DATAGRAM];
	int n = nwire;

	for (int i = 0; i < n; i++) {
		struct native_msg m;
		struct native_repl_peer from = { .ip = htonl(0x0a4d0002), .port = 9095, .q = 1 };
		int len = wire_len[i];

		memcpy(cur, wire[i], (size_t)len);
		if (wire_drop_every && ++wire_sent % wire_drop_every == 0) {
			lost++;
			continue;                /* lost on the way */
		}
		cr_assert_eq(native_parse(cur, (size_t)len, 1, &m), 0);
		native_repl_datagram(sh, &m, &from);
	}
	memmove(wire, wire[n], (size_t)(nwire - n) * sizeof(wire[0]));
	memmove(wire_len, wire_len + n, (size_t)(nwire - n) * sizeof(wire_len[0]));
	nwire -= n;
}

static void native_on(void)
{
	nwire = wire_sent = wire_drop_every = lost = 0;
	sh->native_repl = native_repl_new(sh, wire_send, 1472);
	cr_assert_not_null(sh->native_repl);
}

static void native_off(void)
{
	replica_fetchers_fini(sh);
	native_repl_free(sh->native_repl);
	sh->native_repl = NULL;
}

static void native_role(struct part *p, int32_t self, int32_t epoch)
{
	struct part_role_msg m = { .self = self, .leader = 1, .leader_epoch = epoch, .nreplicas = 2, .nisr = 2,
				   .replicas = { 1, 2 }, .isr = { 1, 2 }, .isr_to = 1 };

	snprintf(m.leader_host, sizeof(m.leader_host), "127.0.0.1");
	m.leader_port = port;
	m.leader_repl_ip = htonl(0x0a4d0001);
	m.leader_repl_port = 9095;
	cr_assert_eq(part_role_set(p, &m), 0);
}

/* Turns until done() holds or 8 s of the injected clock; 1 ms of clock a
 * turn; the shard's idle wait only while a write is in flight (else it
 * sleeps to its next deadline: the leader's 500 ms hold and the
 * fetcher's 750 ms loss timeout would cost real time turn after turn). */
static void run_native_until(int (*done)(void))
{
	for (int i = 0; i < 8000 && !done(); i++) {
		now += 1000000;
		wire_deliver();
		if (shard_poll(sh, now, 1700000000000 + (int64_t)(now / 1000000)) != 0)
			continue;
		if (leader->pl->durable_offset < leader->pl->next_offset ||
		    follower->pl->durable_offset < follower->pl->next_offset || sh->st.inflight)
			shard_idle(sh);   /* a write or read in flight: its completion wakes it
					   * (not counted in turns, however long a loaded disk takes) */
		else
			usleep(200);
	}
}

/* A batch of one record of `size` bytes (larger than a datagram: the
 * answer comes in fragments). */
static void produce_big(struct part *p, int acks, size_t size)
{
	static uint8_t buf[16384], value[12000];
	struct batch_builder bb;
	ssize_t len;
	struct part_produce_req req = { .rec = buf, .acks = acks, .recv_ns = now, .timeout_ms = 30000 };

	memset(value, 'a' + (int)(now % 26), sizeof(value));
	batch_builder_init(&bb, buf, sizeof(buf), 1000);
	cr_assert_eq(batch_builder_add(&bb, 0, 1000, "k", 1, value, size, NULL, 0, 0), 0);
	len = batch_builder_finish(&bb, 0, -1, -1, -1, -1);
	cr_assert_gt(len, 0);
	req.len = (uint32_t)len;
	part_produce(p, &req, produced, NULL);
}

static void read_done(void *cookie, struct part_read_req *rq, int err)
{
	(void)rq;
	cr_assert_eq(err, 0);
	*(int *)cookie = 1;
}

/* The batches of both logs from `from` on, byte for byte (read from each
 * owner). */
static void same_logs_from(int64_t from)
{
	struct part_read_req a = { .offset = from, .max_bytes = 1u << 20, .isolation = 2 };
	struct part_read_req c = { .offset = from, .max_bytes = 1u << 20, .isolation = 2 };
	int done_a = 0, done_c = 0;

	part_read(leader, &a, read_done, &done_a);
	part_read(follower, &c, read_done, &done_c);
	for (int i = 0; i < 2000 && (!done_a || !done_c); i++)
		if (shard_poll(sh, now, 1700000000000) == 0)
			shard_idle(sh);
	cr_assert(done_a && done_c);
	cr_assert_gt(a.rd.bytes, 0);
	cr_assert_eq(a.rd.bytes, c.rd.bytes);
	cr_assert_eq(memcmp(a.rd.data, c.rd.data, a.rd.bytes), 0, "the follower's log is the leader's batches");
	part_read_release(&a);
	part_read_release(&c);
}

static int caught_up_big(void)
{
	return answered == 3 && follower->pl->high_watermark == 3 && follower->pl->durable_offset == 3;
}

Test(replica_fetcher, native_acks_all_is_answered_once_the_follower_has_it_durable)
{
	native_on();
	native_role(leader, 1, 0);
	native_role(follower, 2, 0);
	for (int i = 0; i < 3; i++)
		produce_big(leader, i == 2 ? -1 : 1, 3000 + (size_t)i * 4000);   /* 3, 7 and 11 KB: fragments */
	run_native_until(caught_up_big);
	cr_assert_eq(answered, 3, "answered %d; follower %lld/%lld hw %lld; leader %lld/%lld hw %lld; wire %d", answered,
		     (long long)follower->pl->next_offset, (long long)follower->pl->durable_offset,
		     (long long)follower->pl->high_watermark, (long long)leader->pl->next_offset,
		     (long long)leader->pl->durable_offset, (long long)leader->pl->high_watermark, wire_sent);
	cr_assert_eq(answer_err, 0);
	cr_assert_eq(follower->pl->next_offset, 3);
	cr_assert_eq(leader->pl->high_watermark, 3, "the follower's native fetch from 3 moved it");
	cr_assert_eq(follower->pl->high_watermark, 3);
	cr_assert_gt(sh->stats.repl_native_bytes_in, 21000);
	cr_assert_eq(sh->stats.repl_native_bytes_in, sh->stats.repl_bytes_in, "all of it natively");
	cr_assert_eq(sh->stats.repl_native_bytes_out, sh->stats.repl_native_bytes_in);
	cr_assert_eq(sh->stats.repl_bytes_out, 0, "no Fetch over TCP served");
	cr_assert_eq(sh->stats.repl_reconnects, 0, "nothing lost, nothing asked twice");
	same_logs_from(0);
	native_off();
}

static int diverged_and_copied_natively(void)
{
	return follower->pl->next_offset == 2 && follower->pl->durable_offset == 2 &&
	       follower->pl->high_watermark == 2;
}

Test(replica_fetcher, native_a_divergent_tail_is_cut_and_the_leaders_log_copied)
{
	int32_t e;
	int64_t end;

	native_on();
	produce(follower, 1, "lost");
	store_drain(&sh->st);
	native_role(leader, 1, 1);
	produce(leader, 1, "a");
	produce(leader, 1, "b");
	store_drain(&sh->st);
	native_role(follower, 2, 1);
	run_native_until(diverged_and_copied_natively);
	cr_assert_eq(sh->stats.repl_truncations, 1, "the epoch-0 record was cut at REPLICA_DATA's diverging epoch");
	cr_assert_eq(follower->pl->next_offset, 2);
	plog_epoch_end_offset(follower->pl, 0, &e, &end);
	cr_assert_eq(plog_epoch_for_offset(follower->pl, 0), 1);
	cr_assert_eq(end, 0);
	same_logs_from(0);
	native_off();
}

Test(replica_fetcher, native_lost_datagrams_are_asked_for_again)
{
	native_on();
	wire_drop_every = 11;   /* one datagram in 11, either way (an answer of 9 gets through on a later ask) */
	native_role(leader, 1, 0);
	native_role(follower, 2, 0);
	for (int i = 0; i < 3; i++)
		produce_big(leader, i == 2 ? -1 : 1, 3000 + (size_t)i * 4000);
	run_native_until(caught_up_big);
	cr_assert_gt(lost, 0);
	cr_assert_eq(answered, 3);
	cr_assert_eq(answer_err, 0);
	cr_assert_eq(follower->pl->high_watermark, 3);
	cr_assert_gt(sh->stats.repl_reconnects, 0, "an answer lost: the partition asked again after the wait");
	same_logs_from(0);
	native_off();
}

/* One REPLICA_FETCH to the leader, its one answer read back. */
static void ask(struct native_replica_fetch *q, uint32_t request, struct native_msg *m)
{
	nwire = 0;
	cr_assert_eq(native_repl_send(sh, htonl(0x0a4d0001), 9095, request, "t", 1, q), 0);
	cr_assert_eq(nwire, 1);
	cr_assert_eq(native_parse(wire[0], (size_t)wire_len[0], 1, m), 0);
	cr_assert_eq(m->type, NATIVE_REPLICA_FETCH);
	nwire = 0;
	native_repl_datagram(sh, m, &(struct native_repl_peer){ .ip = 1, .port = 2, .q = 1 });
	cr_assert_eq(nwire, 1, "answered at once");
	cr_assert_eq(native_parse(wire[0], (size_t)wire_len[0], 1, m), 0);
	cr_assert_eq(m->type, NATIVE_REPLICA_DATA);
	cr_assert_eq(m->request, request);
	cr_assert_eq(m->total_len, 0);
}

Test(replica_fetcher, native_fetches_refused_as_the_fetch_handler_refuses_them)
{
	struct native_replica_fetch q = { .replica_id = 9, .partition = 0, .leader_epoch = -1, .last_epoch = -1,
					  .offset = 0, .max_bytes = 1024, .max_wait_ms = 0, .max_datagram = 1472 };
	struct native_msg m;

	native_on();
	native_role(leader, 1, 3);
	/* Kafka's followerReplicaOrThrow: a broker that is no replica */
	ask(&q, 0x42, &m);
	cr_assert_eq(m.error, 6, "NOT_LEADER_OR_FOLLOWER without an epoch");
	q.leader_epoch = 3;
	ask(&q, 0x43, &m);
	cr_assert_eq(m.error, 75, "UNKNOWN_LEADER_EPOCH naming one");
	/* the follower's current epoch against the leader's (KIP-320) */
	q.replica_id = 2;
	q.leader_epoch = 1;
	ask(&q, 0x44, &m);
	cr_assert_eq(m.error, 74, "FENCED_LEADER_EPOCH: the follower's is older");
	q.leader_epoch = 7;
	ask(&q, 0x45, &m);
	cr_assert_eq(m.error, 75, "UNKNOWN_LEADER_EPOCH: newer than the leader's");
	/* an epoch this log never had: out of range, as the Fetch handler says */
	q.leader_epoch = 3;
	q.last_epoch = 2;
	q.offset = 0;
	ask(&q, 0x46, &m);
	cr_assert_eq(m.error, 1, "OFFSET_OUT_OF_RANGE, error %d", m.error);
	cr_assert_eq(sh->stats.repl_native_bytes_out, 0);
	native_off();
}

/* ---- a follower below the leader's log start, or past its end ---------- */

/* The leader alone in its ISR (its high watermark its own end). */
static void role_alone_in_isr(struct part *p)
{
	struct part_role_msg m = { .self = 1, .leader = 1, .leader_epoch = 0, .nreplicas = 2, .nisr = 1,
				   .replicas = { 1, 2 }, .isr = { 1 }, .isr_to = 1 };

	snprintf(m.leader_host, sizeof(m.leader_host), "127.0.0.1");
	m.leader_port = port;
	cr_assert_eq(part_role_set(p, &m), 0);
}

static int64_t want_start, want_end;

static int restarted_and_copied(void)
{
	return follower->pl->log_start == want_start && follower->pl->next_offset == want_end &&
	       follower->pl->durable_offset == want_end && follower->pl->high_watermark == want_end;
}

/* The follower has records 0-1; while it is away the leader writes 2-6
 * and DeleteRecords moves its log start to 5. Back, the follower is
 * answered OFFSET_OUT_OF_RANGE with the leader's log start, empties its
 * log, starts it at 5 and copies 5-6 (before, it asked again every
 * 500 ms for ever). */
static void below_the_leaders_log_start(int natively)
{
	if (natively) {
		native_on();
		native_role(leader, 1, 0);
		native_role(follower, 2, 0);
	} else {
		role(leader, 1, 0);
		role(follower, 2, 0);
	}
	produce(leader, 1, "a");
	produce(leader, 1, "b");
	want_start = 0;
	want_end = 2;
	natively ? run_native_until(restarted_and_copied) : run_until(restarted_and_copied);
	cr_assert_eq(follower->pl->next_offset, 2);
	part_role_free(follower);          /* away */
	role_alone_in_isr(leader);
	for (int i = 0; i < 5; i++)
		produce(leader, 1, "later");
	store_drain(&sh->st);
	cr_assert_eq(leader->pl->high_watermark, 7);
	cr_assert_eq(plog_delete_records_sync(leader->pl, 5), 0);
	cr_assert_eq(leader->pl->log_start, 5);
	want_start = 5;
	want_end = 7;
	if (natively)
		native_role(follower, 2, 0);
	else
		role(follower, 2, 0);
	natively ? run_native_until(restarted_and_copied) : run_until(restarted_and_copied);
	cr_assert_eq(follower->pl->log_start, 5, "the follower's log starts at the leader's log start");
	cr_assert_eq(follower->pl->next_offset, 7);
	cr_assert_eq(sh->stats.repl_truncations, 1);
	same_logs_from(5);
	cr_assert_eq(plog_epoch_for_offset(follower->pl, 6), 0, "the epochs came with the batches");
	if (natively)
		native_off();
}

Test(replica_fetcher, a_follower_below_the_leaders_log_start_starts_its_log_there)
{
	below_the_leaders_log_start(0);
}

Test(replica_fetcher, native_a_follower_below_the_leaders_log_start_starts_its_log_there)
{
	below_the_leaders_log_start(1);
}

/* The follower's (empty) log starts at 10, above the leader's end 3 (no
 * epoch to compare): OFFSET_OUT_OF_RANGE with the leader's high
 * watermark, below the follower's start: its log starts again at 3 and
 * follows. */
Test(replica_fetcher, a_follower_past_the_leaders_end_comes_back_to_it)
{
	role_alone_in_isr(leader);
	for (int i = 0; i < 3; i++)
		produce(leader, 1, "x");
	store_drain(&sh->st);
	cr_assert_eq(part_start_at_sync(follower, 10), 0);
	cr_assert_eq(follower->pl->high_watermark, 10);
	role(follower, 2, 0);
	want_start = 3;
	want_end = 3;
	run_until(restarted_and_copied);
	cr_assert_eq(follower->pl->log_start, 3);
	cr_assert_eq(follower->role->hw, 3, "the leader's high watermark, not the one it had at 10");
	produce(leader, 1, "y");
	want_end = 4;
	run_until(restarted_and_copied);
	cr_assert_eq(follower->pl->next_offset, 4);
	same_logs_from(3);
}

/* ---- the follower's log start follows the leader's --------------------- */

static int started_at_3(void)
{
	return follower->pl->log_start == 3 && !follower->ls_following && follower->pl->next_offset == 6 &&
	       follower->pl->high_watermark == 6;
}

/* Both in the ISR with records 0-4; DeleteRecords moves the leader's log
 * start to 3; its next answer (a record more) carries it, and the
 * follower's log start moves there too, durably ("log-start-offset", as
 * DeleteRecords on a leader), never past its high watermark. Before,
 * the follower kept 0-2 until its own retention took them. */
static void follows_the_leaders_log_start(int natively)
{
	if (natively) {
		native_on();
		native_role(leader, 1, 0);
		native_role(follower, 2, 0);
	} else {
		role(leader, 1, 0);
		role(follower, 2, 0);
	}
	for (int i = 0; i < 5; i++)
		produce(leader, 1, "r");
	want_start = 0;
	want_end = 5;
	natively ? run_native_until(restarted_and_copied) : run_until(restarted_and_copied);
	cr_assert_eq(follower->pl->next_offset, 5);
	cr_assert_eq(leader->pl->high_watermark, 5);
	cr_assert_eq(plog_delete_records_sync(leader->pl, 3), 0);
	produce(leader, 1, "s");
	natively ? run_native_until(started_at_3) : run_until(started_at_3);
	cr_assert_eq(follower->pl->log_start, 3, "the follower's log start is the leader's, not %" PRId64,
		     follower->pl->log_start);
	cr_assert_eq(sh->stats.repl_truncations, 0, "moved, not truncated");
	same_logs_from(3);
	/* never past its own high watermark */
	cr_assert_eq(part_follow_log_start(follower, 100), 1);
	while (follower->ls_following)
		store_poll(&sh->st, 1);
	cr_assert_eq(follower->pl->log_start, 6);
	cr_assert_eq(part_follow_log_start(follower, 100), 0, "at its high watermark already");
	if (natively)
		native_off();
}

Test(replica_fetcher, a_followers_log_start_follows_the_leaders)
{
	follows_the_leaders_log_start(0);
}

Test(replica_fetcher, native_a_followers_log_start_follows_the_leaders)
{
	follows_the_leaders_log_start(1);
}

/* ---- past the leader's end: cut to its log end ------------------------- */

/* The leader has records 0-2 that its follower, in its ISR, never
 * fetched: its high watermark 0, its end 3. The follower's (empty) log
 * starts at 10: OFFSET_OUT_OF_RANGE with the leader's log end (3), its
 * log starts again at 3, not at the high watermark (0: then it fetched
 * 0-2 again), and follows. */
static void past_the_end_cuts_to_the_log_end(int natively)
{
	if (natively) {
		native_on();
		native_role(leader, 1, 0);
	} else {
		role(leader, 1, 0);
	}
	for (int i = 0; i < 3; i++)
		produce(leader, 1, "x");
	store_drain(&sh->st);
	cr_assert_eq(leader->pl->next_offset, 3);
	cr_assert_eq(leader->pl->high_watermark, 0, "the follower in the ISR has none of them");
	cr_assert_eq(part_start_at_sync(follower, 10), 0);
	if (natively)
		native_role(follower, 2, 0);
	else
		role(follower, 2, 0);
	want_start = 3;
	want_end = 3;
	natively ? run_native_until(restarted_and_copied) : run_until(restarted_and_copied);
	cr_assert_eq(follower->pl->log_start, 3, "the leader's log end, not its high watermark: %" PRId64,
		     follower->pl->log_start);
	cr_assert_eq(follower->pl->next_offset, 3);
	cr_assert_eq(leader->pl->high_watermark, 3, "its fetch at 3 moved the leader's high watermark");
	produce(leader, 1, "y");
	want_end = 4;
	natively ? run_native_until(restarted_and_copied) : run_until(restarted_and_copied);
	same_logs_from(3);
	if (natively)
		native_off();
}

Test(replica_fetcher, a_follower_past_the_leaders_end_cuts_to_its_log_end)
{
	past_the_end_cuts_to_the_log_end(0);
}

Test(replica_fetcher, native_a_follower_past_the_leaders_end_cuts_to_its_log_end)
{
	past_the_end_cuts_to_the_log_end(1);
}

/* ---- the leader's replication throttle --------------------------------- */

static uint64_t stop_at;

static int clock_passed(void)
{
	return now >= stop_at;
}

static int has_all_five(void)
{
	return follower->pl->next_offset == 5 && follower->pl->durable_offset == 5;
}

/* The leader throttles the partition (leader.replication.throttled.rate
 * 1000 bytes/s; the follower outside its ISR, the follower's own rate
 * none): five batches of ~470 bytes reach the follower at that rate, a
 * batch past the budget at most, not at once; with the rate removed the
 * rest come at once. Over the native transport (the test's wire and
 * clock); the Fetch handler's throttle is tested with real nodes
 * (tests/integration/test_cluster_reassign.py). */
static void leader_throttles(int natively)
{
	struct part_role_msg m = { .self = 1, .leader = 1, .leader_epoch = 0, .nreplicas = 2, .nisr = 1,
				   .replicas = { 1, 2 }, .isr = { 1 }, .isr_to = 1, .leader_throttled = 1 };

	if (natively) {
		native_on();
		m.leader_repl_ip = htonl(0x0a4d0001);
		m.leader_repl_port = 9095;
	}
	snprintf(m.leader_host, sizeof(m.leader_host), "127.0.0.1");
	m.leader_port = port;
	cr_assert_eq(part_role_set(leader, &m), 0);
	for (int i = 0; i < 5; i++)
		produce_big(leader, 1, 400);
	store_drain(&sh->st);
	cr_assert_eq(leader->pl->next_offset, 5);
	b.repl_leader_throttle_bps = 1000;
	if (natively)
		native_role(follower, 2, 0);
	else
		role(follower, 2, 0);
	stop_at = now + 1500000000ull;       /* 1.5 s of the shard's clock */
	run_native_until(clock_passed);   /* (its idle wait suits TCP too) */
	cr_assert_lt(follower->pl->next_offset, 5, "1.5 s at 1000 bytes/s is not 2,350 bytes (%" PRId64 " batches)",
		     follower->pl->next_offset);
	b.repl_leader_throttle_bps = 0;
	run_native_until(has_all_five);

	cr_assert_eq(follower->pl->next_offset, 5, "the rest once the throttle is gone");
	same_logs_from(0);
	if (natively)
		native_off();
}

Test(replica_fetcher, native_the_leader_throttles_a_follower_outside_its_isr)
{
	leader_throttles(1);
}
