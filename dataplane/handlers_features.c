/* dataplane/handlers_features.c — UpdateFeatures (KIP-584), what
 * `kafka-features upgrade --metadata N` and `sluicectl features upgrade`
 * send: the active controller raises the finalized metadata.version
 * (control/ctl_features.c). The request goes to the control thread
 * through coord->submit_features and resumes here once its record is
 * applied (or refused). v0's AllowDowngrade is v1's safe downgrade.
 *
 * Codes: per feature 0, INVALID_UPDATE_VERSION (95), FEATURE_UPDATE_FAILED
 * (96); at the top CLUSTER_AUTHORIZATION_FAILED (ALTER on the cluster),
 * NOT_CONTROLLER (41) on a node that is not the active controller,
 * INVALID_REQUEST for a feature named twice.
 *
 * @thread shard (the results are filled on the control thread).
 */
#include <stdio.h>
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/broker.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/shard.h"

struct features_state {
	struct kafka_update_features_response *r;
	struct coord_features req;
};

static struct kafka_str kstr(const char *s)
{
	return (struct kafka_str){ s, s ? (int32_t)strlen(s) : -1 };
}

static int features_resume(struct kafka_ctx *ctx)
{
	struct features_state *st = ctx->state;
	struct kafka_update_features_response *r = st->r;

	if (st->req.err) {
		r->ErrorCode = st->req.err;
		r->ErrorMessage = kstr(st->req.msg[0] ? st->req.msg : NULL);
	}
	for (int i = 0; i < st->req.n; i++) {
		struct kafka_update_features_response_updatable_feature_result *res = &r->Results.items[i];
		struct coord_feature_update *it = &st->req.items[i];

		const char *msg = st->req.err ? st->req.msg : it->msg;

		res->ErrorCode = st->req.err ? st->req.err : it->err;
		res->ErrorMessage = kstr(res->ErrorCode && msg[0] ? msg : NULL);
	}
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_update_features(struct kafka_ctx *ctx)
{
	struct kafka_update_features_request *q = ctx->req.body;
	struct kafka_update_features_response *r = ALLOC(ctx, struct kafka_update_features_response, 1);
	struct features_state *st = ALLOC(ctx, struct features_state, 1);
	int n = q->FeatureUpdates.count > 0 ? q->FeatureUpdates.count : 0;
	int16_t version = ctx->req.header.RequestApiVersion;

	if (!r || !st) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_update_features_response_init(r);
	memset(st, 0, sizeof(*st));
	ctx->resp = r;
	st->r = r;
	st->req.items = ALLOC(ctx, struct coord_feature_update, n ? n : 1);
	r->Results.items = ALLOC(ctx, struct kafka_update_features_response_updatable_feature_result, n ? n : 1);
	if (!st->req.items || !r->Results.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	r->Results.count = n;
	st->req.n = n;
	st->req.validate_only = version >= 1 && q->ValidateOnly;
	for (int i = 0; i < n; i++) {
		const struct kafka_update_features_request_feature_update_key *k = &q->FeatureUpdates.items[i];
		struct coord_feature_update *it = &st->req.items[i];
		int32_t len = k->Feature.len > 0 ? k->Feature.len : 0;
		char *name = ALLOC(ctx, char, len + 1);

		if (!name) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		memcpy(name, len ? k->Feature.ptr : "", (size_t)len);
		name[len] = '\0';
		memset(it, 0, sizeof(*it));
		it->name = name;
		it->level = k->MaxVersionLevel;
		it->upgrade_type = version >= 1 ? k->UpgradeType : (k->AllowDowngrade ? 2 : 1);
		memset(&r->Results.items[i], 0, sizeof(r->Results.items[i]));
		r->Results.items[i].Feature = (struct kafka_str){ name, len };
		for (int j = 0; j < i; j++)
			if (!strcmp(st->req.items[j].name, name))
				st->req.err = KERR_INVALID_REQUEST;   /* Kafka's: a feature named twice */
	}
	ctx->state = st;
	if (!authz_cluster(ctx, ACL_ALTER))
		st->req.err = KERR_CLUSTER_AUTHORIZATION_FAILED;
	if (st->req.err) {
		snprintf(st->req.msg, sizeof(st->req.msg), "%s",
			 st->req.err == KERR_INVALID_REQUEST ? "a feature is named twice" : "");
		return features_resume(ctx);
	}
	ctx->pending = 1;
	ctx->resume = features_resume;
	ctx->sh->b->coord->submit_features(ctx, &st->req);
	return 0;
}
