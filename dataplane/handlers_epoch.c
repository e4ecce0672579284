/* dataplane/handlers_epoch.c — OffsetForLeaderEpoch (api key 23, v0-4;
 * KIP-101/279/320): for each partition, the end offset of a leader epoch
 * in its log, answered by the owner shard from the partition's
 * leader-epoch cache (storage/plog_epochs.h). Followers ask it before they
 * fetch, to truncate a divergent tail; consumers ask it to check a
 * position they kept (after a leader change) before they fetch from it.
 * The authorizer: CLUSTER_ACTION on the cluster (a follower), else
 * DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED per partition), as
 * Kafka since KIP-320.
 * @thread shard */
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part.h"
#include "dataplane/shard_core.h"

/* One partition's question, in the request's arena. */
struct ofle_item {
	struct kafka_offset_for_leader_epoch_response_epoch_end_offset *pr;
	struct part *part;
	int32_t current_epoch;           /* v2+: the client's, -1: no check */
	int32_t epoch;                   /* the epoch asked about */
	struct kafka_ctx *ctx;
};

static void ofle_done_msg(void *self, struct shard_msg *m)
{
	struct ofle_item *it = m->p[0];

	(void)self;
	kafka_ctx_sub_done(it->ctx);
}

/* On the owner: Kafka's Partition.lastOffsetForLeaderEpoch on a leader. */
static void ofle_on_owner(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct ofle_item *it = m->p[0];
	struct plog *pl = it->part->pl;
	int err;

	if (it->part->deleted || !pl) {
		it->pr->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
	} else if ((err = part_epoch_check(it->current_epoch, pl->leader_epoch)) != 0) {
		it->pr->ErrorCode = part_err_to_kafka(err);
	} else {
		/* an epoch this log does not know: no error, -1 / -1 */
		plog_epoch_end_offset(pl, it->epoch, &it->pr->LeaderEpoch, &it->pr->EndOffset);
	}
	if (it->ctx->sh == sh) {
		kafka_ctx_sub_done(it->ctx);
	} else {
		struct shard_msg r = { .fn = ofle_done_msg, .p = { it } };

		shard_send(sh, it->ctx->sh->id, &r);
	}
}

static int ofle_finish(struct kafka_ctx *ctx)
{
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_offset_for_leader_epoch(struct kafka_ctx *ctx)
{
	struct kafka_offset_for_leader_epoch_request *q = ctx->req.body;
	struct shard *sh = ctx->sh;
	struct md_snapshot *md = broker_md(sh->b);
	struct kafka_offset_for_leader_epoch_response *r = ALLOC(ctx, struct kafka_offset_for_leader_epoch_response, 1);

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_offset_for_leader_epoch_response_init(r);
	r->Topics.count = q->Topics.count < 0 ? 0 : q->Topics.count;
	r->Topics.items = ALLOC(ctx, struct kafka_offset_for_leader_epoch_response_offset_for_leader_topic_result,
				r->Topics.count);
	if (!r->Topics.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	ctx->resp = r;
	ctx->resume = ofle_finish;
	ctx->pending = 1;   /* held until every partition is dispatched */
	int cluster = authz_cluster(ctx, ACL_CLUSTER_ACTION);

	for (int i = 0; i < r->Topics.count; i++) {
		struct kafka_offset_for_leader_epoch_request_offset_for_leader_topic *qt = &q->Topics.items[i];
		struct kafka_offset_for_leader_epoch_response_offset_for_leader_topic_result *rt = &r->Topics.items[i];
		int allowed = cluster || authz_str(ctx, ACL_DESCRIBE, ACL_RES_TOPIC, qt->Topic);
		const struct md_topic *t = allowed && qt->Topic.len > 0 ? md_find(md, qt->Topic.ptr, qt->Topic.len) : NULL;
		int np = qt->Partitions.count < 0 ? 0 : qt->Partitions.count;

		rt->Topic = qt->Topic;
		rt->Partitions.count = np;
		rt->Partitions.items = ALLOC(ctx, struct kafka_offset_for_leader_epoch_response_epoch_end_offset, np);
		if (!rt->Partitions.items) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		for (int j = 0; j < np; j++) {
			struct kafka_offset_for_leader_epoch_request_offset_for_leader_partition *qp = &qt->Partitions.items[j];
			struct kafka_offset_for_leader_epoch_response_epoch_end_offset *pr = &rt->Partitions.items[j];
			int32_t idx = qp->Partition;
			struct ofle_item *it;

			*pr = (struct kafka_offset_for_leader_epoch_response_epoch_end_offset){
				.ErrorCode = 0, .Partition = idx, .LeaderEpoch = -1, .EndOffset = -1 };
			if (!t || idx < 0 || idx >= t->nparts || !md_part_owner(&t->parts[idx])) {
				pr->ErrorCode = allowed ? KERR_UNKNOWN_TOPIC_OR_PARTITION : KERR_TOPIC_AUTHORIZATION_FAILED;
				continue;
			}
			it = ALLOC(ctx, struct ofle_item, 1);
			if (!it) {
				kafka_ctx_abort(ctx);
				return 0;
			}
			*it = (struct ofle_item){ .pr = pr, .part = md_part_owner(&t->parts[idx]),
						  .current_epoch = qp->CurrentLeaderEpoch,   /* -1 before v2 */
						  .epoch = qp->LeaderEpoch, .ctx = ctx };
			ctx->pending++;
			struct shard_msg m = { .fn = ofle_on_owner, .p = { it } };
			shard_send(sh, t->parts[idx].owner_shard, &m);
		}
	}
	kafka_ctx_sub_done(ctx);
	return 0;
}
