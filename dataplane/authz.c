/* dataplane/authz.c — the authorizer on the shard. See dataplane/authz.h.
 * @thread shard */
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/broker.h"
#include "dataplane/conn.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/shard.h"

static int super_user(const struct broker *b, const char *principal)
{
	for (int i = 0; i < b->set.nsuper_users; i++)
		if (!strcmp(b->set.super_users[i], principal))
			return 1;
	return 0;
}

/* The peer's address when some binding names a host, else "*". */
static const char *peer_host(struct kafka_ctx *ctx, const struct md_snapshot *md, char *buf, size_t cap)
{
	if (!md || !md->acls.hosts)
		return ACL_WILDCARD;
	kafka_ctx_peer_host(ctx, buf, cap);
	return buf[0] == '/' ? buf + 1 : buf;
}

/* The connection's remembered decision of (res, op, name): 1 or 0, or
 * -1 when there is none. A table of another generation is emptied. */
static int cache_find(struct authz_cache *ac, uint64_t gen, int res, int op, const char *name, size_t len)
{
	if (ac->gen != gen) {
		authz_cache_reset(ac);
		ac->gen = gen;
		return -1;
	}
	for (int i = 0; i < AUTHZ_CACHE_WAYS; i++) {
		const struct authz_cache_ent *e = &ac->e[i];

		if (e->res == res && e->op == op && e->len == len && (!len || !memcmp(e->name, name, len)))
			return e->allowed;
	}
	return -1;
}

static void cache_put(struct authz_cache *ac, int res, int op, const char *name, size_t len, int allowed)
{
	struct authz_cache_ent *e = &ac->e[ac->next];

	ac->next = (ac->next + 1) % AUTHZ_CACHE_WAYS;
	e->res = (uint8_t)res;
	e->op = (uint8_t)op;
	e->len = (uint8_t)len;
	e->allowed = (uint8_t)allowed;
	if (len)   /* (a null name has no bytes, nor a pointer) */
		memcpy(e->name, name, len);
}

/* Whether decisions under md's bindings may be remembered for a name of
 * len bytes: a published generation, a name that fits. */
static int cacheable(const struct md_snapshot *md, size_t len)
{
	return md && md->acls.gen && len <= AUTHZ_CACHE_NAME;
}

int authz_allow(struct kafka_ctx *ctx, int op, int res, const char *name, size_t len)
{
	const struct broker *b = ctx->sh->b;
	const struct md_snapshot *md;
	struct authz_cache *ac = &ctx->c->authz;
	const char *principal;
	char peer[64];
	int got;

	if (!b->set.authz)
		return 1;
	principal = conn_principal(ctx->c);
	if (super_user(b, principal))
		return 1;
	md = broker_md(ctx->sh->b);
	if (cacheable(md, len) && (got = cache_find(ac, md->acls.gen, res, op, name, len)) >= 0) {
		shard_stat_add(&ctx->sh->stats.authz_cache_hits, 1);
		return got;
	}
	got = acl_authorize_n(md ? &md->acls : NULL, principal, peer_host(ctx, md, peer, sizeof(peer)), op, res,
			      name, len, b->set.authz_allow_if_none);
	shard_stat_add(&ctx->sh->stats.authz_checks, 1);
	if (cacheable(md, len))
		cache_put(ac, res, op, name, len, got);
	return got;
}

int authz_write_any_topic(struct kafka_ctx *ctx)
{
	const struct broker *b = ctx->sh->b;
	const struct md_snapshot *md;
	struct authz_cache *ac = &ctx->c->authz;
	char peer[64];
	int got;

	if (!b->set.authz)
		return 1;
	/* Kafka's authorizeByResourceType first asks about a topic named
	 * "hardcode": a super user, a LITERAL "*" ALLOW, or no binding that
	 * applies with allow.everyone.if.no.acl.found allow it */
	if (authz_allow(ctx, ACL_WRITE, ACL_RES_TOPIC, "hardcode", 8))
		return 1;
	md = broker_md(ctx->sh->b);
	if (cacheable(md, 0) && (got = cache_find(ac, md->acls.gen, ACL_RES_TOPIC, AUTHZ_OP_WRITE_ANY, "", 0)) >= 0) {
		shard_stat_add(&ctx->sh->stats.authz_cache_hits, 1);
		return got;
	}
	got = md ? acl_write_any_topic(&md->acls, conn_principal(ctx->c), peer_host(ctx, md, peer, sizeof(peer)))
		 : 0;
	shard_stat_add(&ctx->sh->stats.authz_checks, 1);
	if (cacheable(md, 0))
		cache_put(ac, ACL_RES_TOPIC, AUTHZ_OP_WRITE_ANY, "", 0, got);
	return got;
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
