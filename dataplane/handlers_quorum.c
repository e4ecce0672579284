/* dataplane/handlers_quorum.c — DescribeQuorum (KIP-595, v1 KIP-836, v2
 * KIP-853): the metadata quorum's leader, epoch, high watermark and voters,
 * what `kafka-metadata-quorum describe --status/--replication` and
 * `sluicectl cluster info` show. The answer is the control thread's (it
 * runs the quorum): the request goes there through coord->submit_quorum
 * and resumes here.
 *
 * Kafka's rules: the request names the one partition __cluster_metadata-0;
 * anything else gets that partition with UNKNOWN_TOPIC_OR_PARTITION. Raft
 * indexes start at 1, so the commit index is the high watermark and a
 * voter's last index its log end offset. A voter whose progress this node
 * does not know says -1 (libraft 0.15 keeps the leader's view of its
 * followers private). Observers are the broker-only nodes (not voters)
 * that fetch the metadata from the leader, with the log end their last
 * fetch said. As Kafka's brokers forward DescribeQuorum to the active
 * controller, a node that does not lead answers with the leader's view,
 * asked over the controller channel (control/ctl_quorum.c), or
 * NOT_LEADER_OR_FOLLOWER when no leader answers.
 * v2's nodes list each voter with its controller listeners: none for a
 * quorum of one, which opens no socket.
 *
 * @thread shard (the answer is filled on the control thread).
 */
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"

#define QUORUM_TOPIC "__cluster_metadata"

struct quorum_req {
	struct kafka_describe_quorum_response *r;
	struct coord_quorum q;
};

static struct kafka_str kstr(const char *s)
{
	return (struct kafka_str){ s, (int32_t)strlen(s) };
}

/* The one partition's answer: the quorum, or an error alone. */
static int fill(struct kafka_ctx *ctx, struct kafka_describe_quorum_response *r, const struct coord_quorum *q,
		int16_t err)
{
	struct kafka_describe_quorum_response_topic_data *t =
		ALLOC(ctx, struct kafka_describe_quorum_response_topic_data, 1);
	struct kafka_describe_quorum_response_partition_data *p =
		ALLOC(ctx, struct kafka_describe_quorum_response_partition_data, 1);
	struct kafka_describe_quorum_response_replica_state *v = NULL;
	struct kafka_describe_quorum_response_node *n = NULL;

	if (!t || !p)
		return -1;
	memset(t, 0, sizeof(*t));
	memset(p, 0, sizeof(*p));
	t->TopicName = kstr(QUORUM_TOPIC);
	t->Partitions.items = p;
	t->Partitions.count = 1;
	r->Topics.items = t;
	r->Topics.count = 1;
	r->Nodes.count = 0;
	p->PartitionIndex = 0;
	p->ErrorCode = err;
	p->ErrorMessage.len = -1;
	p->LeaderId = -1;
	p->LeaderEpoch = -1;
	p->HighWatermark = -1;
	p->CurrentVoters.count = 0;
	p->Observers.count = 0;
	if (err || !q)
		return 0;
	p->LeaderId = q->leader;
	p->LeaderEpoch = q->epoch;
	p->HighWatermark = q->high_watermark;
	if (q->nvoters) {
		v = ALLOC(ctx, struct kafka_describe_quorum_response_replica_state, (size_t)q->nvoters);
		n = ALLOC(ctx, struct kafka_describe_quorum_response_node, (size_t)q->nvoters);
		if (!v || !n)
			return -1;
	}
	for (int i = 0; i < q->nvoters; i++) {
		int leader = q->voters[i].id == q->leader;

		memset(&v[i], 0, sizeof(v[i]));
		v[i].ReplicaId = q->voters[i].id;
		v[i].LogEndOffset = q->voters[i].log_end;
		/* Kafka: -1 for the leader's own fetch; its caught-up time is now */
		v[i].LastFetchTimestamp = -1;
		v[i].LastCaughtUpTimestamp = leader ? q->now_ms : -1;
		memset(&n[i], 0, sizeof(n[i]));
		n[i].NodeId = q->voters[i].id;
		n[i].Listeners.count = 0;
	}
	p->CurrentVoters.items = v;
	p->CurrentVoters.count = q->nvoters;
	if (q->nobservers) {
		struct kafka_describe_quorum_response_replica_state *o =
			ALLOC(ctx, struct kafka_describe_quorum_response_replica_state, (size_t)q->nobservers);

		if (!o)
			return -1;
		for (int i = 0; i < q->nobservers; i++) {
			memset(&o[i], 0, sizeof(o[i]));
			o[i].ReplicaId = q->observers[i].id;
			o[i].LogEndOffset = q->observers[i].log_end;
			o[i].LastFetchTimestamp = -1;
			o[i].LastCaughtUpTimestamp = -1;
		}
		p->Observers.items = o;
		p->Observers.count = q->nobservers;
	}
	r->Nodes.items = n;
	r->Nodes.count = q->nvoters;
	return 0;
}

static int describe_quorum_resume(struct kafka_ctx *ctx)
{
	struct quorum_req *st = ctx->state;

	if (fill(ctx, st->r, &st->q, st->q.err ? KERR_NOT_LEADER_OR_FOLLOWER : 0) < 0) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_describe_quorum(struct kafka_ctx *ctx)
{
	struct kafka_describe_quorum_request *req = ctx->req.body;
	struct kafka_describe_quorum_response *r;
	struct quorum_req *st;
	int ok;

	if (authz_cluster_or_refuse(ctx, ACL_DESCRIBE))   /* the authorizer */
		return 0;
	r = ALLOC(ctx, struct kafka_describe_quorum_response, 1);
	st = ALLOC(ctx, struct quorum_req, 1);

	if (!r || !st) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_describe_quorum_response_init(r);
	ctx->resp = r;
	ok = req->Topics.count == 1 && req->Topics.items[0].Partitions.count == 1 &&
	     req->Topics.items[0].TopicName.len == (int32_t)strlen(QUORUM_TOPIC) &&
	     !memcmp(req->Topics.items[0].TopicName.ptr, QUORUM_TOPIC, strlen(QUORUM_TOPIC)) &&
	     req->Topics.items[0].Partitions.items[0].PartitionIndex == 0;
	if (!ok) {
		if (fill(ctx, r, NULL, KERR_UNKNOWN_TOPIC_OR_PARTITION) < 0)
			kafka_ctx_abort(ctx);
		else
			kafka_ctx_respond(ctx);
		return 0;
	}
	st->r = r;
	ctx->state = st;
	ctx->pending = 1;
	ctx->resume = describe_quorum_resume;
	ctx->sh->b->coord->submit_quorum(ctx, &st->q);
	return 0;
}
