/* dataplane/handlers_group.c — the group and transaction APIs: decoded on the shard, carried
 * out by the group or transaction coordinator on the control thread (reached
 * through coord_ops, dataplane/coord.h),
 * encoded back on the shard. FindCoordinator is in handlers_data.c: on one
 * node this broker coordinates every group and transaction.
 *
 * The authorizer (dataplane/authz.h) is asked here, on the shard, as
 * Kafka's KafkaApis does:
 *   JoinGroup, SyncGroup, Heartbeat, LeaveGroup   READ on the group
 *   OffsetCommit        READ on the group; READ on each topic
 *   TxnOffsetCommit     WRITE on the transactional id, READ on the group;
 *                       READ on each topic
 *   OffsetFetch         DESCRIBE on the group; DESCRIBE on each topic
 *   OffsetDelete        DELETE on the group; READ on each topic
 *   DescribeGroups      DESCRIBE on each group
 *   ListGroups          DESCRIBE on the cluster, else the groups it may DESCRIBE
 *   DeleteGroups        DELETE on each group
 *   AddOffsetsToTxn, EndTxn   WRITE on the transactional id
 *   AddPartitionsToTxn  WRITE on the transactional id and on each topic
 * A refusal of the whole request answers before the coordinator is asked.
 * Per item, the coordinator answers item i of the request at index i of
 * its response (or a group-wide error with no items): an item refused is
 * taken out of the request it sees (a topic with no partitions, a group
 * with an empty name) and given its refusal in the response here, by
 * ctx->edit, before the response is encoded.
 * @thread shard */
#include <limits.h>
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/broker.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/topic_name.h"

/* Refused with err in the response's top-level ErrorCode. */
static int refuse(struct kafka_ctx *ctx, int16_t err)
{
	ctx->only_error = err;
	kafka_ctx_respond(ctx);
	return 0;
}

#define GROUP_READ(ctx, type)                                                                    \
	(authz_str((ctx), ACL_READ, ACL_RES_GROUP, ((const struct type *)(ctx)->req.body)->GroupId) \
	 ? (ctx)->sh->b->coord->submit_group(ctx) : refuse((ctx), KERR_GROUP_AUTHORIZATION_FAILED))
#define TXN_WRITE(ctx, type)                                                                      \
	(authz_str((ctx), ACL_WRITE, ACL_RES_TRANSACTIONAL_ID,                                     \
		   ((const struct type *)(ctx)->req.body)->TransactionalId)                            \
	 ? (ctx)->sh->b->coord->submit_txn(ctx) : refuse((ctx), KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED))

/* ---- per-topic refusals (OffsetCommit, TxnOffsetCommit, OffsetDelete) ---- */

/* Per topic of the request: 0, or the error its partitions answer; np its
 * partitions (the request the coordinator sees has none for a refused
 * topic). In the request's arena; ctx->edit_arg. */
struct topic_refusals {
	int n, any;
	int16_t *err;
	int32_t *np;
};

/* ctx->edit_arg: the refusals of q's topics (every one err0 when set, else
 * those the principal may not do op on, TOPIC_AUTHORIZATION_FAILED), taken
 * out of q; ctx->edit: `edit` when any is refused. Out of memory: the
 * request is aborted and the handler returns. */
#define TOPICS_CHECK(ctx, q, op, err0, edit_fn)                                                  \
	do {                                                                                     \
		int n_ = (q)->Topics.count > 0 ? (q)->Topics.count : 0;                          \
		struct topic_refusals *tr_ = ALLOC((ctx), struct topic_refusals, 1);             \
		int16_t *e_ = ALLOC((ctx), int16_t, n_);                                         \
		int32_t *np_ = ALLOC((ctx), int32_t, n_);                                        \
		if (!tr_ || !e_ || !np_) {                                                       \
			kafka_ctx_abort(ctx);                                                    \
			return 0;                                                                \
		}                                                                                \
		*tr_ = (struct topic_refusals){ .n = n_, .err = e_, .np = np_ };                 \
		for (int i_ = 0; i_ < n_; i_++) {                                                \
			np_[i_] = (q)->Topics.items[i_].Partitions.count > 0                     \
				  ? (q)->Topics.items[i_].Partitions.count : 0;                  \
			e_[i_] = (err0) ? (err0)                                                 \
				 : authz_str((ctx), (op), ACL_RES_TOPIC, (q)->Topics.items[i_].Name) \
				 ? 0 : KERR_TOPIC_AUTHORIZATION_FAILED;                          \
			if (e_[i_]) {                                                            \
				tr_->any = 1;                                                    \
				(q)->Topics.items[i_].Partitions.count = 0;                      \
			}                                                                        \
		}                                                                                \
		(ctx)->edit_arg = tr_;                                                           \
		(ctx)->edit = tr_->any ? (edit_fn) : NULL;                                       \
	} while (0)

/* The edit: each refused topic of q answers its partitions with its
 * refusal in r (whose topics are q's, index for index, unless a
 * group-wide error left them out). */
#define TOPICS_ANSWER(ctx, q, r, tr, ptype)                                                      \
	do {                                                                                     \
		if ((r)->Topics.count != (tr)->n)                                                \
			return 0;                                                                \
		for (int i_ = 0; i_ < (tr)->n; i_++) {                                           \
			ptype *p_;                                                               \
			if (!(tr)->err[i_])                                                      \
				continue;                                                        \
			if (!(p_ = ALLOC((ctx), ptype, (tr)->np[i_])))                           \
				return -1;                                                       \
			memset(p_, 0, sizeof(*p_) * (size_t)(tr)->np[i_]);                       \
			for (int j_ = 0; j_ < (tr)->np[i_]; j_++) {                              \
				p_[j_].PartitionIndex = (q)->Topics.items[i_].Partitions.items[j_].PartitionIndex; \
				p_[j_].ErrorCode = (tr)->err[i_];                                \
			}                                                                        \
			(r)->Topics.items[i_].Name = (q)->Topics.items[i_].Name;                 \
			(r)->Topics.items[i_].Partitions.items = p_;                             \
			(r)->Topics.items[i_].Partitions.count = (tr)->np[i_];                   \
		}                                                                                \
		return 0;                                                                        \
	} while (0)

/* A request refused whole (err on every partition): a response of q's
 * topics, each answered by the edit. */
#define TOPICS_ALL_REFUSED(ctx, q, rtype, ttype)                                                 \
	do {                                                                                     \
		rtype *r_ = ALLOC((ctx), rtype, 1);                                              \
		struct topic_refusals *tr_ = (ctx)->edit_arg;                                    \
		ttype *t_ = ALLOC((ctx), ttype, tr_->n);                                         \
		if (!r_ || !t_) {                                                                \
			kafka_ctx_abort(ctx);                                                    \
			return 0;                                                                \
		}                                                                                \
		memset(r_, 0, sizeof(*r_));                                                      \
		memset(t_, 0, sizeof(*t_) * (size_t)tr_->n);                                     \
		r_->Topics.items = t_;                                                           \
		r_->Topics.count = tr_->n;                                                       \
		(ctx)->resp = r_;                                                                \
		kafka_ctx_respond(ctx);                                                          \
		return 0;                                                                        \
	} while (0)

/* A commit's edit (TOPICS_ANSWER), from its types' stem. */
#define COMMIT_EDIT(fn, stem)                                                                    \
	static int fn(struct kafka_ctx *ctx)                                                     \
	{                                                                                        \
		const struct kafka_##stem##_request *q = ctx->req.body;                          \
		struct kafka_##stem##_response *r = ctx->resp;                                   \
		TOPICS_ANSWER(ctx, q, r, (struct topic_refusals *)ctx->edit_arg,                 \
			      struct kafka_##stem##_response_##stem##_response_partition);       \
	}
COMMIT_EDIT(offset_commit_edit, offset_commit)
COMMIT_EDIT(txn_offset_commit_edit, txn_offset_commit)

/* A commit refused whole (err) answered here, else sent to the group
 * coordinator. */
#define COMMIT_SUBMIT(ctx, q, err, stem)                                                         \
	do {                                                                                     \
		if (err)                                                                         \
			TOPICS_ALL_REFUSED(ctx, q, struct kafka_##stem##_response,               \
					   struct kafka_##stem##_response_##stem##_response_topic);      \
		return (ctx)->sh->b->coord->submit_group(ctx);                                   \
	} while (0)

/* OffsetCommit: the group's READ (else every partition
 * GROUP_AUTHORIZATION_FAILED), then each topic's (its partitions
 * TOPIC_AUTHORIZATION_FAILED, the others committed). */
int kafka_handle_offset_commit(struct kafka_ctx *ctx)
{
	struct kafka_offset_commit_request *q = ctx->req.body;
	int16_t err = authz_str(ctx, ACL_READ, ACL_RES_GROUP, q->GroupId) ? 0 : KERR_GROUP_AUTHORIZATION_FAILED;

	TOPICS_CHECK(ctx, q, ACL_READ, err, offset_commit_edit);
	COMMIT_SUBMIT(ctx, q, err, offset_commit);
}


/* TxnOffsetCommit: WRITE on the transactional id, READ on the group
 * (else every partition TRANSACTIONAL_ID_ or GROUP_AUTHORIZATION_FAILED),
 * READ on each topic. */
int kafka_handle_txn_offset_commit(struct kafka_ctx *ctx)
{
	struct kafka_txn_offset_commit_request *q = ctx->req.body;
	int16_t err = !authz_str(ctx, ACL_WRITE, ACL_RES_TRANSACTIONAL_ID, q->TransactionalId)
		      ? KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
		      : !authz_str(ctx, ACL_READ, ACL_RES_GROUP, q->GroupId) ? KERR_GROUP_AUTHORIZATION_FAILED : 0;

	TOPICS_CHECK(ctx, q, ACL_READ, err, txn_offset_commit_edit);
	COMMIT_SUBMIT(ctx, q, err, txn_offset_commit);
}

static int offset_delete_edit(struct kafka_ctx *ctx)
{
	const struct kafka_offset_delete_request *q = ctx->req.body;
	struct kafka_offset_delete_response *r = ctx->resp;

	if (r->ErrorCode)
		return 0;   /* the group's error: no topics */
	TOPICS_ANSWER(ctx, q, r, (struct topic_refusals *)ctx->edit_arg,
		      struct kafka_offset_delete_response_offset_delete_response_partition);
}

/* OffsetDelete: DELETE on the group (else GROUP_AUTHORIZATION_FAILED),
 * READ on each topic. */
int kafka_handle_offset_delete(struct kafka_ctx *ctx)
{
	struct kafka_offset_delete_request *q = ctx->req.body;

	if (!authz_str(ctx, ACL_DELETE, ACL_RES_GROUP, q->GroupId))
		return refuse(ctx, KERR_GROUP_AUTHORIZATION_FAILED);
	TOPICS_CHECK(ctx, q, ACL_READ, 0, offset_delete_edit);
	return ctx->sh->b->coord->submit_group(ctx);
}

/* ---- reads: the answer edited ------------------------------------------------ */

/* OffsetFetch's topics: one the principal may not DESCRIBE answers
 * TOPIC_AUTHORIZATION_FAILED on each partition named, and is left out of
 * a request for every topic (Kafka's). */
static int offset_fetch_edit(struct kafka_ctx *ctx)
{
	const struct kafka_offset_fetch_request *q = ctx->req.body;
	struct kafka_offset_fetch_response *r = ctx->resp;
	int k = 0;

	if (r->ErrorCode)
		return 0;
	for (int i = 0; i < r->Topics.count; i++) {
		struct kafka_offset_fetch_response_offset_fetch_response_topic *rt = &r->Topics.items[i];

		if (!authz_str(ctx, ACL_DESCRIBE, ACL_RES_TOPIC, rt->Name)) {
			if (q->Topics.count < 0)
				continue;
			for (int j = 0; j < rt->Partitions.count; j++) {
				rt->Partitions.items[j].CommittedOffset = -1;
				rt->Partitions.items[j].CommittedLeaderEpoch = -1;
				rt->Partitions.items[j].Metadata = (struct kafka_str){ "", 0 };
				rt->Partitions.items[j].ErrorCode = KERR_TOPIC_AUTHORIZATION_FAILED;
			}
		}
		r->Topics.items[k++] = *rt;
	}
	r->Topics.count = k;
	return 0;
}

/* OffsetFetch refused whole: v2+ in its ErrorCode; v1 has none, so on
 * each partition named (as Kafka's error response). */
static int offset_fetch_refuse(struct kafka_ctx *ctx)
{
	const struct kafka_offset_fetch_request *q = ctx->req.body;
	struct kafka_offset_fetch_response *r;
	struct kafka_offset_fetch_response_offset_fetch_response_topic *t;
	int nt = q->Topics.count > 0 ? q->Topics.count : 0;

	if (ctx->req.header.RequestApiVersion >= 2)
		return refuse(ctx, KERR_GROUP_AUTHORIZATION_FAILED);
	r = ALLOC(ctx, struct kafka_offset_fetch_response, 1);
	t = ALLOC(ctx, struct kafka_offset_fetch_response_offset_fetch_response_topic, nt);
	if (!r || !t) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_offset_fetch_response_init(r);
	r->Topics.items = t;
	r->Topics.count = nt;
	for (int i = 0; i < nt; i++) {
		struct kafka_offset_fetch_response_offset_fetch_response_topic *rt = &r->Topics.items[i];
		int np = q->Topics.items[i].PartitionIndexes.count > 0 ? q->Topics.items[i].PartitionIndexes.count : 0;

		rt->Name = q->Topics.items[i].Name;
		rt->Partitions.count = np;
		if (!(rt->Partitions.items = ALLOC(ctx, struct kafka_offset_fetch_response_offset_fetch_response_partition,
						   np))) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		for (int j = 0; j < np; j++)
			rt->Partitions.items[j] = (struct kafka_offset_fetch_response_offset_fetch_response_partition){
				.PartitionIndex = q->Topics.items[i].PartitionIndexes.items[j], .CommittedOffset = -1,
				.CommittedLeaderEpoch = -1, .Metadata = { "", 0 },
				.ErrorCode = KERR_GROUP_AUTHORIZATION_FAILED };
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_offset_fetch(struct kafka_ctx *ctx)
{
	const struct kafka_offset_fetch_request *q = ctx->req.body;

	if (!authz_str(ctx, ACL_DESCRIBE, ACL_RES_GROUP, q->GroupId))
		return offset_fetch_refuse(ctx);
	ctx->edit = offset_fetch_edit;
	return ctx->sh->b->coord->submit_group(ctx);
}

/* DescribeGroups: a group the principal may not DESCRIBE answers
 * GROUP_AUTHORIZATION_FAILED and nothing else; the others their
 * authorized operations when asked. */
static int describe_groups_edit(struct kafka_ctx *ctx)
{
	const struct kafka_describe_groups_request *q = ctx->req.body;
	struct kafka_describe_groups_response *r = ctx->resp;
	static const struct kafka_str empty = { "", 0 };

	for (int i = 0; i < r->Groups.count; i++) {
		struct kafka_describe_groups_response_described_group *g = &r->Groups.items[i];

		if (authz_str(ctx, ACL_DESCRIBE, ACL_RES_GROUP, g->GroupId)) {
			if (q->IncludeAuthorizedOperations)
				g->AuthorizedOperations = authz_ops(ctx, ACL_RES_GROUP, g->GroupId, ACL_GROUP_OPS);
			continue;
		}
		g->ErrorCode = KERR_GROUP_AUTHORIZATION_FAILED;
		g->GroupState = g->ProtocolType = g->ProtocolData = empty;
		g->Members.count = 0;
		g->AuthorizedOperations = INT32_MIN;
	}
	return 0;
}

int kafka_handle_describe_groups(struct kafka_ctx *ctx)
{
	ctx->edit = describe_groups_edit;
	return ctx->sh->b->coord->submit_group(ctx);
}

/* ListGroups: every group with DESCRIBE on the cluster, else those the
 * principal may DESCRIBE. */
static int list_groups_edit(struct kafka_ctx *ctx)
{
	struct kafka_list_groups_response *r = ctx->resp;
	int k = 0;

	if (authz_cluster(ctx, ACL_DESCRIBE))
		return 0;
	for (int i = 0; i < r->Groups.count; i++)
		if (authz_str(ctx, ACL_DESCRIBE, ACL_RES_GROUP, r->Groups.items[i].GroupId))
			r->Groups.items[k++] = r->Groups.items[i];
	r->Groups.count = k;
	return 0;
}

int kafka_handle_list_groups(struct kafka_ctx *ctx)
{
	ctx->edit = list_groups_edit;
	return ctx->sh->b->coord->submit_group(ctx);
}

/* DeleteGroups: a group the principal may not DELETE is sent to the
 * coordinator with an empty name (which it answers INVALID_GROUP_ID,
 * touching nothing) and answered GROUP_AUTHORIZATION_FAILED under its
 * own. edit_arg: the names as asked (NULL ptr: allowed). */
static int delete_groups_edit(struct kafka_ctx *ctx)
{
	const struct kafka_str *asked = ctx->edit_arg;
	struct kafka_delete_groups_response *r = ctx->resp;
	const struct kafka_delete_groups_request *q = ctx->req.body;

	if (r->Results.count != q->GroupsNames.count)
		return 0;
	for (int i = 0; i < r->Results.count; i++)
		if (asked[i].ptr) {
			r->Results.items[i].GroupId = asked[i];
			r->Results.items[i].ErrorCode = KERR_GROUP_AUTHORIZATION_FAILED;
		}
	return 0;
}

int kafka_handle_delete_groups(struct kafka_ctx *ctx)
{
	struct kafka_delete_groups_request *q = ctx->req.body;
	int n = q->GroupsNames.count > 0 ? q->GroupsNames.count : 0;
	struct kafka_str *asked = ALLOC(ctx, struct kafka_str, n);

	if (!asked) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		asked[i] = (struct kafka_str){ NULL, -1 };
		if (authz_str(ctx, ACL_DELETE, ACL_RES_GROUP, q->GroupsNames.items[i]))
			continue;
		asked[i] = q->GroupsNames.items[i].ptr ? q->GroupsNames.items[i] : (struct kafka_str){ "", 0 };
		q->GroupsNames.items[i] = (struct kafka_str){ "", 0 };
		ctx->edit = delete_groups_edit;
	}
	ctx->edit_arg = asked;
	return ctx->sh->b->coord->submit_group(ctx);
}

/* ---- the transaction APIs: carried out by the transaction coordinator
 * (InitProducerId, which may need no coordinator, is in handlers_admin.c) ---- */

/* Whether a client may add topic t to a transaction: WRITE on it, and
 * never an internal topic (Kafka's). */
static int txn_topic_allowed(struct kafka_ctx *ctx, struct kafka_str t)
{
	return !topic_name_internal(t.ptr, t.len) && authz_str(ctx, ACL_WRITE, ACL_RES_TOPIC, t);
}

/* AddPartitionsToTxn v0-3 (a client's): WRITE on the transactional id
 * (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on
 * each topic: one refused answers TOPIC_AUTHORIZATION_FAILED and, as
 * Kafka, the others OPERATION_NOT_ATTEMPTED (nothing is added). v4+
 * (VerifyOnly, between brokers): CLUSTER_ACTION on the cluster. */
int kafka_handle_add_partitions_to_txn(struct kafka_ctx *ctx)
{
	const struct kafka_add_partitions_to_txn_request *q = ctx->req.body;
	struct kafka_add_partitions_to_txn_response *r;
	struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *res;
	int16_t err = 0;
	int nt = q->V3AndBelowTopics.count > 0 ? q->V3AndBelowTopics.count : 0;

	if (ctx->req.header.RequestApiVersion >= 4)
		return authz_cluster_or_refuse(ctx, ACL_CLUSTER_ACTION) ? 0 : ctx->sh->b->coord->submit_txn(ctx);
	if (!authz_str(ctx, ACL_WRITE, ACL_RES_TRANSACTIONAL_ID, q->V3AndBelowTransactionalId))
		err = KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	for (int i = 0; !err && i < nt; i++)
		if (!txn_topic_allowed(ctx, q->V3AndBelowTopics.items[i].Name))
			err = KERR_TOPIC_AUTHORIZATION_FAILED;
	if (!err)
		return ctx->sh->b->coord->submit_txn(ctx);
	r = ALLOC(ctx, struct kafka_add_partitions_to_txn_response, 1);
	res = ALLOC(ctx, struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result, nt);
	if (!r || !res) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_add_partitions_to_txn_response_init(r);
	r->ResultsByTopicV3AndBelow.items = res;
	r->ResultsByTopicV3AndBelow.count = nt;
	for (int i = 0; i < nt; i++) {
		const struct kafka_add_partitions_to_txn_request_add_partitions_to_txn_topic *t =
			&q->V3AndBelowTopics.items[i];
		struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *rt = &res[i];
		int np = t->Partitions.count > 0 ? t->Partitions.count : 0;
		int16_t perr = err != KERR_TOPIC_AUTHORIZATION_FAILED ? err
			       : txn_topic_allowed(ctx, t->Name) ? KERR_OPERATION_NOT_ATTEMPTED : err;

		memset(rt, 0, sizeof(*rt));
		rt->Name = t->Name;
		rt->ResultsByPartition.count = np;
		if (!(rt->ResultsByPartition.items =
			      ALLOC(ctx, struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_partition_result, np))) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		for (int j = 0; j < np; j++) {
			rt->ResultsByPartition.items[j].PartitionIndex = t->Partitions.items[j];
			rt->ResultsByPartition.items[j].PartitionErrorCode = perr;
		}
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_join_group(struct kafka_ctx *ctx) { return GROUP_READ(ctx, kafka_join_group_request); }
int kafka_handle_heartbeat(struct kafka_ctx *ctx) { return GROUP_READ(ctx, kafka_heartbeat_request); }
int kafka_handle_leave_group(struct kafka_ctx *ctx) { return GROUP_READ(ctx, kafka_leave_group_request); }
int kafka_handle_sync_group(struct kafka_ctx *ctx) { return GROUP_READ(ctx, kafka_sync_group_request); }
int kafka_handle_add_offsets_to_txn(struct kafka_ctx *ctx) { return TXN_WRITE(ctx, kafka_add_offsets_to_txn_request); }
int kafka_handle_end_txn(struct kafka_ctx *ctx) { return TXN_WRITE(ctx, kafka_end_txn_request); }
