/* dataplane/authz.c — the authorizer on the shard. See dataplane/authz.h.
 * @thread shard */
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/broker.h"
#include "dataplane/conn.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"

int authz_allow(struct kafka_ctx *ctx, int op, int res, const char *name, size_t len)
{
	const struct broker *b = ctx->sh->b;
	const struct md_snapshot *md;
	const char *principal, *host = ACL_WILDCARD;
	char peer[64];

	if (!b->set.authz)
		return 1;
	principal = conn_principal(ctx->c);
	for (int i = 0; i < b->set.nsuper_users; i++)
		if (!strcmp(b->set.super_users[i], principal))
			return 1;
	md = broker_md(ctx->sh->b);
	if (md && md->acls.hosts) {
		kafka_ctx_peer_host(ctx, peer, sizeof(peer));
		host = peer[0] == '/' ? peer + 1 : peer;
	}
	return acl_authorize_n(md ? &md->acls : NULL, principal, host, op, res, name, len,
			       b->set.authz_allow_if_none);
}

int authz_cluster(struct kafka_ctx *ctx, int op)
{
	return authz_allow(ctx, op, ACL_RES_CLUSTER, ACL_CLUSTER_NAME, sizeof(ACL_CLUSTER_NAME) - 1);
}

int16_t authz_config(struct kafka_ctx *ctx, int op, int8_t type, struct kafka_str name)
{
	if (type == 2)
		return authz_str(ctx, op, ACL_RES_TOPIC, name) ? 0 : KERR_TOPIC_AUTHORIZATION_FAILED;
	if (type == 4 || type == 8)
		return authz_cluster(ctx, op) ? 0 : KERR_CLUSTER_AUTHORIZATION_FAILED;
	return 0;
}

int authz_cluster_or_refuse(struct kafka_ctx *ctx, int op)
{
	if (authz_cluster(ctx, op))
		return 0;
	ctx->only_error = KERR_CLUSTER_AUTHORIZATION_FAILED;
	kafka_ctx_respond(ctx);
	return 1;
}

int32_t authz_ops(struct kafka_ctx *ctx, int res, struct kafka_str name, int32_t ops)
{
	int32_t got = 0;

	for (int op = ACL_READ; op <= ACL_IDEMPOTENT_WRITE; op++)
		if ((ops & (1 << op)) && authz_str(ctx, op, res, name))
			got |= 1 << op;
	return got;
}
