/* dataplane/handlers_reassign.c — AlterPartitionReassignments (ApiKey 45)
 * and ListPartitionReassignments (ApiKey 46), KIP-455: what
 * `kafka-reassign-partitions` and `sluicectl partition reassign` send.
 * Both go to the control thread through coord->submit_reassign
 * (control/ctl_reassign.c) and resume here: Alter once the records that
 * start or cancel each reassignment are applied (the reassignment then
 * runs on its own: the adding replicas catch up, join the ISR, the
 * removed ones leave), List with the reassignments in progress.
 *
 * Alter, per partition, Kafka's codes: 0; UNKNOWN_TOPIC_OR_PARTITION (3);
 * INVALID_REPLICA_ASSIGNMENT (39) an empty list, a broker twice or one not
 * registered; NO_REASSIGNMENT_IN_PROGRESS (85) a cancel (null replicas)
 * with none; NOT_CONTROLLER (41) the metadata quorum did not take the
 * record. List leaves out what does not exist or is not being reassigned,
 * as Kafka's controller does; null topics lists every reassignment.
 *
 * @thread shard (the results are filled on the control thread).
 */
#include <stdlib.h>
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/broker.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/shard.h"

struct reassign_state {
	void *r;
	struct coord_reassign req;
	int32_t *per_topic;          /* alter: how many parts each result topic has */
};

static struct kafka_str kstr(const char *s)
{
	return (struct kafka_str){ s, s ? (int32_t)strlen(s) : -1 };
}

/* A copy of s (len bytes) in the request's memory. */
static const char *copy(struct kafka_ctx *ctx, const char *s, int32_t len)
{
	char *c = ALLOC(ctx, char, len + 1);

	if (c) {
		if (len)
			memcpy(c, s, (size_t)len);
		c[len] = '\0';
	}
	return c;
}

/* ---- Alter ---------------------------------------------------------------- */

static int alter_resume(struct kafka_ctx *ctx)
{
	struct reassign_state *st = ctx->state;
	struct kafka_alter_partition_reassignments_response *r = st->r;
	int at = 0;

	for (int32_t t = 0; t < r->Responses.count; t++) {
		struct kafka_alter_partition_reassignments_response_reassignable_topic_response *res =
			&r->Responses.items[t];
		struct kafka_alter_partition_reassignments_response_reassignable_partition_response *pr =
			ALLOC(ctx, struct kafka_alter_partition_reassignments_response_reassignable_partition_response,
			      st->per_topic[t] + 1);

		if (!pr) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		for (int32_t i = 0; i < st->per_topic[t]; i++, at++) {
			const struct coord_reassign_part *p = &st->req.parts[at];

			memset(&pr[i], 0, sizeof(pr[i]));
			pr[i].PartitionIndex = p->partition;
			pr[i].ErrorCode = p->err;
			pr[i].ErrorMessage = p->err && p->msg[0] ? kstr(copy(ctx, p->msg, (int32_t)strlen(p->msg)))
						   : kstr(NULL);
		}
		res->Partitions.items = pr;
		res->Partitions.count = st->per_topic[t];
	}
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_alter_partition_reassignments(struct kafka_ctx *ctx)
{
	struct kafka_alter_partition_reassignments_request *q = ctx->req.body;
	struct kafka_alter_partition_reassignments_response *r;
	struct reassign_state *st;
	int32_t ntopics = q->Topics.count > 0 ? q->Topics.count : 0;
	int n = 0, at = 0;

	if (authz_cluster_or_refuse(ctx, ACL_ALTER))   /* the authorizer */
		return 0;
	r = ALLOC(ctx, struct kafka_alter_partition_reassignments_response, 1);
	st = ALLOC(ctx, struct reassign_state, 1);

	if (!r || !st) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_alter_partition_reassignments_response_init(r);
	memset(st, 0, sizeof(*st));
	ctx->resp = r;
	st->r = r;
	for (int32_t t = 0; t < ntopics; t++)
		n += q->Topics.items[t].Partitions.count > 0 ? q->Topics.items[t].Partitions.count : 0;
	r->Responses.items = ALLOC(ctx, struct kafka_alter_partition_reassignments_response_reassignable_topic_response,
				   ntopics + 1);
	st->per_topic = ALLOC(ctx, int32_t, ntopics + 1);
	st->req.parts = ALLOC(ctx, struct coord_reassign_part, n + 1);
	if (!r->Responses.items || !st->per_topic || !st->req.parts) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	st->req.n = n;
	for (int32_t t = 0; t < ntopics; t++) {
		const struct kafka_alter_partition_reassignments_request_reassignable_topic *qt = &q->Topics.items[t];
		int32_t len = qt->Name.len > 0 ? qt->Name.len : 0, np = qt->Partitions.count > 0 ? qt->Partitions.count : 0;
		const char *name = copy(ctx, qt->Name.ptr ? qt->Name.ptr : "", len);

		if (!name) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		memset(&r->Responses.items[t], 0, sizeof(r->Responses.items[t]));
		r->Responses.items[t].Name = (struct kafka_str){ name, len };
		st->per_topic[t] = np;
		for (int32_t i = 0; i < np; i++, at++) {
			const struct kafka_alter_partition_reassignments_request_reassignable_partition *qp =
				&qt->Partitions.items[i];
			struct coord_reassign_part *p = &st->req.parts[at];

			memset(p, 0, sizeof(*p));
			p->topic = name;
			p->topic_len = len;
			p->partition = qp->PartitionIndex;
			p->target = qp->Replicas.items;
			p->ntarget = qp->Replicas.count;   /* -1: null, a cancel */
		}
	}
	r->Responses.count = ntopics;
	ctx->state = st;
	ctx->pending = 1;
	ctx->resume = alter_resume;
	ctx->sh->b->coord->submit_reassign(ctx, &st->req);
	return 0;
}

/* ---- List ----------------------------------------------------------------- */

static int32_t *ids(struct kafka_ctx *ctx, const int32_t *from, int n)
{
	int32_t *c = ALLOC(ctx, int32_t, n + 1);

	if (c && n)
		memcpy(c, from, (size_t)n * sizeof(*c));
	return c;
}

static int list_resume(struct kafka_ctx *ctx)
{
	struct reassign_state *st = ctx->state;
	struct kafka_list_partition_reassignments_response *r = st->r;
	struct coord_reassign_found *f = st->req.found;
	int nf = st->req.nfound, nt = 0;

	/* found is grouped by topic as the control thread walked the image */
	r->Topics.items = ALLOC(ctx, struct kafka_list_partition_reassignments_response_ongoing_topic_reassignment,
				nf + 1);
	if (!r->Topics.items)
		goto fail;
	for (int i = 0; i < nf;) {
		struct kafka_list_partition_reassignments_response_ongoing_topic_reassignment *t = &r->Topics.items[nt++];
		int j = i;

		while (j < nf && !strcmp(f[j].topic, f[i].topic))
			j++;
		memset(t, 0, sizeof(*t));
		t->Name = kstr(copy(ctx, f[i].topic, (int32_t)strlen(f[i].topic)));
		t->Partitions.items =
			ALLOC(ctx, struct kafka_list_partition_reassignments_response_ongoing_partition_reassignment, j - i);
		if (!t->Name.ptr || !t->Partitions.items)
			goto fail;
		t->Partitions.count = j - i;
		for (int k = i; k < j; k++) {
			struct kafka_list_partition_reassignments_response_ongoing_partition_reassignment *p =
				&t->Partitions.items[k - i];

			memset(p, 0, sizeof(*p));
			p->PartitionIndex = f[k].partition;
			p->Replicas.items = ids(ctx, f[k].replicas, f[k].nreplicas);
			p->Replicas.count = f[k].nreplicas;
			p->AddingReplicas.items = ids(ctx, f[k].adding, f[k].nadding);
			p->AddingReplicas.count = f[k].nadding;
			p->RemovingReplicas.items = ids(ctx, f[k].removing, f[k].nremoving);
			p->RemovingReplicas.count = f[k].nremoving;
			if (!p->Replicas.items || !p->AddingReplicas.items || !p->RemovingReplicas.items)
				goto fail;
		}
		i = j;
	}
	r->Topics.count = nt;
	free(st->req.found);   /* the control thread's answer, copied */
	kafka_ctx_respond(ctx);
	return 0;
fail:
	free(st->req.found);
	kafka_ctx_abort(ctx);
	return 0;
}

int kafka_handle_list_partition_reassignments(struct kafka_ctx *ctx)
{
	struct kafka_list_partition_reassignments_request *q = ctx->req.body;
	struct kafka_list_partition_reassignments_response *r;
	struct reassign_state *st;
	int n = 0, at = 0;

	if (authz_cluster_or_refuse(ctx, ACL_DESCRIBE))   /* the authorizer */
		return 0;
	r = ALLOC(ctx, struct kafka_list_partition_reassignments_response, 1);
	st = ALLOC(ctx, struct reassign_state, 1);

	if (!r || !st) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_list_partition_reassignments_response_init(r);
	memset(st, 0, sizeof(*st));
	ctx->resp = r;
	st->r = r;
	st->req.list = 1;
	st->req.all = q->Topics.count < 0;
	for (int32_t t = 0; t < q->Topics.count; t++)
		n += q->Topics.items[t].PartitionIndexes.count > 0 ? q->Topics.items[t].PartitionIndexes.count : 0;
	st->req.parts = ALLOC(ctx, struct coord_reassign_part, n + 1);
	if (!st->req.parts) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	for (int32_t t = 0; t < q->Topics.count; t++) {
		const struct kafka_list_partition_reassignments_request_list_partition_reassignments_topics *qt =
			&q->Topics.items[t];
		int32_t len = qt->Name.len > 0 ? qt->Name.len : 0;
		const char *name = copy(ctx, qt->Name.ptr ? qt->Name.ptr : "", len);

		if (!name) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		for (int32_t i = 0; i < qt->PartitionIndexes.count; i++, at++) {
			struct coord_reassign_part *p = &st->req.parts[at];

			memset(p, 0, sizeof(*p));
			p->topic = name;
			p->topic_len = len;
			p->partition = qt->PartitionIndexes.items[i];
			p->ntarget = -1;
		}
	}
	st->req.n = n;
	ctx->state = st;
	ctx->pending = 1;
	ctx->resume = list_resume;
	ctx->sh->b->coord->submit_reassign(ctx, &st->req);
	return 0;
}
