/* dataplane/authz.c — the authorizer on the shard. See dataplane/authz.h.
 * @thread shard */
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/broker.h"
#include "dataplane/conn.h"
#include "dataplane/kafka_ctx.h"

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
