/* dataplane/handlers_elect.c — ElectLeaders (KIP-183, v1 KIP-460: the
 * election type), what `kafka-leader-election` and `sluicectl leader
 * elect` send: type 0 moves each partition's leadership to its preferred
 * replica (the first) when that one is live and in sync, type 1 elects a
 * live replica out of sync for a partition without a live leader. The
 * elections are the active controller's (control/ctl_elect.c): the
 * request goes to the control thread through coord->submit_elect and
 * resumes here once its records are applied. A request naming no topics
 * (null) asks for every partition of the snapshot.
 *
 * Per partition, Kafka's codes: 0 elected; ELECTION_NOT_NEEDED (84) the
 * preferred replica leads already, or (unclean) a live leader exists;
 * PREFERRED_LEADER_NOT_AVAILABLE (80); ELIGIBLE_LEADERS_NOT_AVAILABLE
 * (83); UNKNOWN_TOPIC_OR_PARTITION (3); NOT_CONTROLLER (41). An election
 * type other than 0 and 1 is INVALID_REQUEST at the top (v1+).
 *
 * @thread shard (the results are filled on the control thread).
 */
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/broker.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/shard.h"

struct elect_state {
	struct kafka_elect_leaders_response *r;
	struct coord_elect req;
	int32_t *per_topic;          /* how many parts each result topic has */
};

static struct kafka_str kstr(const char *s)
{
	return (struct kafka_str){ s, s ? (int32_t)strlen(s) : -1 };
}

/* Kafka's message of each code (Errors' default), null for success. */
static struct kafka_str message(int16_t err)
{
	switch (err) {
	case 0:
		return kstr(NULL);
	case KERR_ELECTION_NOT_NEEDED:
		return kstr("Leader election not needed for topic partition.");
	case KERR_PREFERRED_LEADER_NOT_AVAILABLE:
		return kstr("The preferred leader was not available.");
	case KERR_ELIGIBLE_LEADERS_NOT_AVAILABLE:
		return kstr("Eligible topic partition leaders are not available.");
	case KERR_UNKNOWN_TOPIC_OR_PARTITION:
		return kstr("This server does not host this topic-partition.");
	case KERR_NOT_CONTROLLER:
		return kstr("This is not the correct controller for this cluster.");
	default:
		return kstr("Leader election failed.");
	}
}

static int elect_resume(struct kafka_ctx *ctx)
{
	struct elect_state *st = ctx->state;
	struct kafka_elect_leaders_response *r = st->r;
	int at = 0;

	for (int32_t t = 0; t < r->ReplicaElectionResults.count; t++) {
		struct kafka_elect_leaders_response_replica_election_result *res = &r->ReplicaElectionResults.items[t];
		struct kafka_elect_leaders_response_partition_result *pr =
			ALLOC(ctx, struct kafka_elect_leaders_response_partition_result, st->per_topic[t]);

		if (!pr) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		for (int32_t i = 0; i < st->per_topic[t]; i++, at++) {
			const struct coord_elect_part *p = &st->req.parts[at];

			memset(&pr[i], 0, sizeof(pr[i]));
			pr[i].PartitionId = p->partition;
			pr[i].ErrorCode = p->err;
			pr[i].ErrorMessage = message(p->err);
		}
		res->PartitionResult.items = pr;
		res->PartitionResult.count = st->per_topic[t];
	}
	kafka_ctx_respond(ctx);
	return 0;
}

/* A copy of s in the request's memory. */
static const char *copy(struct kafka_ctx *ctx, const char *s, int32_t len)
{
	char *c = ALLOC(ctx, char, len + 1);

	if (c) {
		memcpy(c, s, (size_t)len);
		c[len] = '\0';
	}
	return c;
}

int kafka_handle_elect_leaders(struct kafka_ctx *ctx)
{
	struct kafka_elect_leaders_request *q = ctx->req.body;
	struct kafka_elect_leaders_response *r = ALLOC(ctx, struct kafka_elect_leaders_response, 1);
	struct elect_state *st = ALLOC(ctx, struct elect_state, 1);
	const struct md_snapshot *md = broker_md(ctx->sh->b);
	int all = q->TopicPartitions.count < 0, ntopics, n = 0, at = 0;
	int16_t deny = 0;

	if (!r || !st) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_elect_leaders_response_init(r);
	memset(st, 0, sizeof(*st));
	ctx->resp = r;
	st->r = r;
	/* the authorizer first (Kafka's): ALTER on the cluster, else every
	 * partition named (none for all) and the request
	 * CLUSTER_AUTHORIZATION_FAILED */
	if (!authz_cluster(ctx, ACL_ALTER)) {
		deny = r->ErrorCode = KERR_CLUSTER_AUTHORIZATION_FAILED;
		all = 0;
	} else if (q->ElectionType != 0 && q->ElectionType != 1) {
		r->ErrorCode = KERR_INVALID_REQUEST;
		r->ReplicaElectionResults.count = 0;
		kafka_ctx_respond(ctx);
		return 0;
	}
	ntopics = all ? (md ? md->ntopics : 0) : q->TopicPartitions.count > 0 ? q->TopicPartitions.count : 0;
	for (int t = 0; t < ntopics; t++)
		n += all ? md->topics[t]->nparts : q->TopicPartitions.items[t].Partitions.count;
	r->ReplicaElectionResults.items = ALLOC(ctx, struct kafka_elect_leaders_response_replica_election_result,
						ntopics);
	st->per_topic = ALLOC(ctx, int32_t, ntopics);
	st->req.parts = ALLOC(ctx, struct coord_elect_part, n);
	if (!r->ReplicaElectionResults.items || !st->per_topic || !st->req.parts) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	st->req.type = q->ElectionType;
	st->req.timeout_ms = q->TimeoutMs;
	st->req.n = n;
	for (int t = 0; t < ntopics; t++) {
		struct kafka_elect_leaders_response_replica_election_result *res = &r->ReplicaElectionResults.items[t];
		const char *name = all ? md->topics[t]->name : q->TopicPartitions.items[t].Topic.ptr;
		int32_t len = all ? md->topics[t]->name_len : q->TopicPartitions.items[t].Topic.len;
		int32_t np = all ? md->topics[t]->nparts : q->TopicPartitions.items[t].Partitions.count;

		memset(res, 0, sizeof(*res));
		if (len < 0)
			len = 0;
		if (!(name = copy(ctx, name ? name : "", len))) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		res->Topic = (struct kafka_str){ name, len };
		st->per_topic[t] = np;
		for (int32_t i = 0; i < np; i++, at++) {
			struct coord_elect_part *p = &st->req.parts[at];

			p->topic = name;
			p->topic_len = len;
			p->partition = all ? i : q->TopicPartitions.items[t].Partitions.items[i];
			p->err = deny;
		}
	}
	r->ReplicaElectionResults.count = ntopics;
	ctx->state = st;
	if (deny)
		return elect_resume(ctx);
	ctx->pending = 1;
	ctx->resume = elect_resume;
	ctx->sh->b->coord->submit_elect(ctx, &st->req);
	return 0;
}
