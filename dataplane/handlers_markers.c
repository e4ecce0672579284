/* dataplane/handlers_markers.c — WriteTxnMarkers (ApiKey 27): a transaction
 * coordinator on another node has this node write the COMMIT or ABORT
 * markers of its transactions into the partitions this node leads (Kafka's
 * inter-broker request; this release has no security, so any client may
 * send it, where Kafka requires CLUSTER_ACTION). Each marker goes to the
 * partition's owner shard and is written as the coordinator's local
 * markers are (part_proxy_txn_marker: refused where this node does not
 * lead, or for an epoch older than the producer's, answered once the high
 * watermark passes it); a marker of __consumer_offsets then has this node's
 * group coordinator commit or drop the producer's pending transactional
 * offsets (coord_ops.submit_txn_offsets_end) before the answer.
 * @thread shard */
#include <errno.h>
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part_err.h"
#include "dataplane/part_proxy.h"
#include "dataplane/shard_core.h"

#define OFFSETS_TOPIC "__consumer_offsets"

/* One partition's marker while it is written: the request, its answer slot. */
struct marker_item {
	struct kafka_ctx *ctx;
	struct kafka_write_txn_markers_response_writable_txn_marker_partition_result *pr;
	struct part_marker_req req;
	int32_t opart;               /* the __consumer_offsets partition, -1: another topic */
};

/* On this shard, the owner's answer (part_proxy's completion). */
static void marker_written(void *self, void *cookie, int64_t off, int err)
{
	struct marker_item *it = cookie;
	const struct coord_ops *co = it->ctx->sh->b->coord;

	(void)self;
	(void)off;
	if (err) {
		/* -EREMOTE: the owner follows it now */
		it->pr->ErrorCode = err == -EREMOTE ? KERR_NOT_LEADER_OR_FOLLOWER : part_err_to_kafka(err);
		kafka_ctx_sub_done(it->ctx);
		return;
	}
	if (it->opart >= 0 && co->submit_txn_offsets_end) {
		co->submit_txn_offsets_end(it->ctx, it->opart, it->req.pid, it->req.commit);   /* sub_done there */
		return;
	}
	kafka_ctx_sub_done(it->ctx);
}

static int markers_finish(struct kafka_ctx *ctx)
{
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_write_txn_markers(struct kafka_ctx *ctx)
{
	struct kafka_write_txn_markers_request *q = ctx->req.body;
	struct kafka_write_txn_markers_response *r = ALLOC(ctx, struct kafka_write_txn_markers_response, 1);
	struct shard *sh = ctx->sh;
	struct md_snapshot *md = broker_md(sh->b);
	int nm = q->Markers.count > 0 ? q->Markers.count : 0;
	struct part_proxy px;

	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_write_txn_markers_response_init(r);
	r->Markers.items = ALLOC(ctx, struct kafka_write_txn_markers_response_writable_txn_marker_result, nm);
	if (nm && !r->Markers.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	r->Markers.count = nm;
	ctx->resp = r;
	ctx->resume = markers_finish;
	ctx->pending = 1;   /* held until every marker is dispatched */
	part_proxy_init_shard(&px, sh);
	/* the authorizer: CLUSTER_ACTION on the cluster, else every
	 * partition CLUSTER_AUTHORIZATION_FAILED */
	int16_t deny = authz_cluster(ctx, ACL_CLUSTER_ACTION) ? 0 : KERR_CLUSTER_AUTHORIZATION_FAILED;

	for (int i = 0; i < nm; i++) {
		struct kafka_write_txn_markers_request_writable_txn_marker *mq = &q->Markers.items[i];
		struct kafka_write_txn_markers_response_writable_txn_marker_result *mr = &r->Markers.items[i];
		int nt = mq->Topics.count > 0 ? mq->Topics.count : 0;

		mr->ProducerId = mq->ProducerId;
		mr->Topics.count = nt;
		mr->Topics.items = ALLOC(ctx, struct kafka_write_txn_markers_response_writable_txn_marker_topic_result, nt);
		if (nt && !mr->Topics.items) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		for (int j = 0; j < nt; j++) {
			struct kafka_write_txn_markers_request_writable_txn_marker_topic *tq = &mq->Topics.items[j];
			struct kafka_write_txn_markers_response_writable_txn_marker_topic_result *tr = &mr->Topics.items[j];
			const struct md_topic *t = tq->Name.len > 0 ? md_find(md, tq->Name.ptr, tq->Name.len) : NULL;
			int offsets = t && t->internal && kafka_str_eq(tq->Name, OFFSETS_TOPIC);
			int np = tq->PartitionIndexes.count > 0 ? tq->PartitionIndexes.count : 0;

			tr->Name = tq->Name;
			tr->Partitions.count = np;
			tr->Partitions.items =
				ALLOC(ctx, struct kafka_write_txn_markers_response_writable_txn_marker_partition_result, np);
			if (np && !tr->Partitions.items) {
				kafka_ctx_abort(ctx);
				return 0;
			}
			for (int k = 0; k < np; k++) {
				int32_t idx = tq->PartitionIndexes.items[k];
				const struct md_partition *mp = NULL;
				int16_t err = deny ? deny : md_part_led(t, idx, sh->b->set.node_id, &mp);
				struct marker_item *it;

				tr->Partitions.items[k].PartitionIndex = idx;
				tr->Partitions.items[k].ErrorCode = err;
				if (!err && mq->ProducerId < 0)
					tr->Partitions.items[k].ErrorCode = KERR_INVALID_PRODUCER_ID_MAPPING;
				if (tr->Partitions.items[k].ErrorCode)
					continue;
				if (!(it = ALLOC(ctx, struct marker_item, 1))) {
					kafka_ctx_abort(ctx);
					return 0;
				}
				*it = (struct marker_item){
					.ctx = ctx, .pr = &tr->Partitions.items[k], .opart = offsets ? idx : -1,
					.req = { .pid = mq->ProducerId, .epoch = mq->ProducerEpoch,
						 .commit = mq->TransactionResult ? 1 : 0, .done = marker_written, .cookie = NULL },
				};
				it->req.cookie = it;
				ctx->pending++;
				part_proxy_txn_marker_at(&px, mp->owner_shard, md_part_owner(mp), &it->req);
			}
		}
	}
	kafka_ctx_sub_done(ctx);
	return 0;
}
