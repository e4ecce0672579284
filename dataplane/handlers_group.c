/* dataplane/handlers_group.c — the group and transaction APIs: decoded on the shard, carried
 * out by the group or transaction coordinator on the control thread (reached
 * through coord_ops, dataplane/coord.h),
 * encoded back on the shard. FindCoordinator is in handlers_data.c: on one
 * node this broker coordinates every group and transaction. The
 * authorizer (dataplane/authz.h) is asked here, before the coordinator:
 * READ on the group for JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
 * OffsetFetch and OffsetCommit (and READ on each topic committed), WRITE
 * on the transactional id for AddOffsetsToTxn and EndTxn.
 * @thread shard */
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/broker.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"

static int allow_str(struct kafka_ctx *ctx, int op, int res, struct kafka_str s)
{
	return authz_allow(ctx, op, res, s.ptr, s.len > 0 ? (size_t)s.len : 0);
}

/* Refused with err in the response's top-level ErrorCode. */
static int refuse(struct kafka_ctx *ctx, int16_t err)
{
	ctx->only_error = err;
	kafka_ctx_respond(ctx);
	return 0;
}

#define GROUP_READ(ctx, type)                                                                    \
	(allow_str((ctx), ACL_READ, ACL_RES_GROUP, ((const struct type *)(ctx)->req.body)->GroupId) \
	 ? (ctx)->sh->b->coord->submit_group(ctx) : refuse((ctx), KERR_GROUP_AUTHORIZATION_FAILED))
#define TXN_WRITE(ctx, type)                                                                      \
	(allow_str((ctx), ACL_WRITE, ACL_RES_TRANSACTIONAL_ID,                                     \
		   ((const struct type *)(ctx)->req.body)->TransactionalId)                            \
	 ? (ctx)->sh->b->coord->submit_txn(ctx) : refuse((ctx), KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED))

/* OffsetCommit: the group's READ, then each topic's; refused, every
 * partition carries the error (a commit naming a topic the principal may
 * not READ is refused whole, where Kafka commits the others). */
int kafka_handle_offset_commit(struct kafka_ctx *ctx)
{
	const struct kafka_offset_commit_request *q = ctx->req.body;
	int16_t err = allow_str(ctx, ACL_READ, ACL_RES_GROUP, q->GroupId) ? 0 : KERR_GROUP_AUTHORIZATION_FAILED;
	struct kafka_offset_commit_response *r;
	int nt = q->Topics.count > 0 ? q->Topics.count : 0;

	for (int i = 0; !err && i < nt; i++)
		if (!allow_str(ctx, ACL_READ, ACL_RES_TOPIC, q->Topics.items[i].Name))
			err = KERR_TOPIC_AUTHORIZATION_FAILED;
	if (!err)
		return ctx->sh->b->coord->submit_group(ctx);
	r = ALLOC(ctx, struct kafka_offset_commit_response, 1);
	if (!r) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_offset_commit_response_init(r);
	r->Topics.items = ALLOC(ctx, struct kafka_offset_commit_response_offset_commit_response_topic, nt);
	r->Topics.count = nt;
	for (int i = 0; r->Topics.items && i < nt; i++) {
		const struct kafka_offset_commit_request_offset_commit_request_topic *t = &q->Topics.items[i];
		struct kafka_offset_commit_response_offset_commit_response_topic *rt = &r->Topics.items[i];
		int np = t->Partitions.count > 0 ? t->Partitions.count : 0;

		memset(rt, 0, sizeof(*rt));
		rt->Name = t->Name;
		rt->Partitions.items = ALLOC(ctx, struct kafka_offset_commit_response_offset_commit_response_partition, np);
		if (!rt->Partitions.items) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		rt->Partitions.count = np;
		for (int j = 0; j < np; j++) {
			rt->Partitions.items[j].PartitionIndex = t->Partitions.items[j].PartitionIndex;
			rt->Partitions.items[j].ErrorCode = err;
		}
	}
	if (!r->Topics.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_offset_fetch(struct kafka_ctx *ctx) { return GROUP_READ(ctx, kafka_offset_fetch_request); }
int kafka_handle_join_group(struct kafka_ctx *ctx) { return GROUP_READ(ctx, kafka_join_group_request); }
int kafka_handle_heartbeat(struct kafka_ctx *ctx) { return GROUP_READ(ctx, kafka_heartbeat_request); }
int kafka_handle_leave_group(struct kafka_ctx *ctx) { return GROUP_READ(ctx, kafka_leave_group_request); }
int kafka_handle_sync_group(struct kafka_ctx *ctx) { return GROUP_READ(ctx, kafka_sync_group_request); }
int kafka_handle_describe_groups(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_list_groups(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_delete_groups(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_offset_delete(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }
int kafka_handle_txn_offset_commit(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_group(ctx); }

/* the transaction APIs: carried out by the transaction coordinator
 * (InitProducerId, which may need no coordinator, is in handlers_admin.c) */
int kafka_handle_add_partitions_to_txn(struct kafka_ctx *ctx) { return ctx->sh->b->coord->submit_txn(ctx); }
int kafka_handle_add_offsets_to_txn(struct kafka_ctx *ctx) { return TXN_WRITE(ctx, kafka_add_offsets_to_txn_request); }
int kafka_handle_end_txn(struct kafka_ctx *ctx) { return TXN_WRITE(ctx, kafka_end_txn_request); }
