/* dataplane/handlers_sasl.c — SaslHandshake (17) and SaslAuthenticate
 * (36) on SASL listeners, and DescribeUserScramCredentials (50) from the
 * published snapshot's SCRAM users (dataplane/sasl.h, docs/security.md).
 *
 * A connection of a SASL listener sends SaslHandshake (v1) naming a
 * mechanism, then SaslAuthenticate tokens until the mechanism is done;
 * conn.c takes up nothing else before that. A failure is answered
 * SASL_AUTHENTICATION_FAILED after connection.failed.authentication.delay.ms
 * (the request parks on the shard's timer: the shard serves others
 * meanwhile), counted, logged with the client's address (never the
 * password), and the connection is closed once the answer is sent, as
 * Kafka does.
 *
 * Thread: the connection's shard (@thread shard). The credentials are the
 * published snapshot's (read-only) and the listener's PLAIN users
 * (read-only once the shards serve): nothing here blocks.
 */
#include <stdio.h>
#include <string.h>

#include "dataplane/broker.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/sasl.h"

#define SASL_OUT_MAX 512   /* a challenge or SCRAM's server-final */

static struct kafka_str kstr(const char *s)
{
	return (struct kafka_str){ s, (int32_t)strlen(s) };
}

/* A copy in the request's memory: the snapshot may be retired before the
 * response is encoded. */
static struct kafka_str kstr_copy(struct kafka_ctx *ctx, const char *s)
{
	size_t n = strlen(s);
	char *p = ALLOC(ctx, char, n + 1);

	if (!p)
		return (struct kafka_str){ "", 0 };
	memcpy(p, s, n + 1);
	return (struct kafka_str){ p, (int32_t)n };
}

static const struct broker_listener *ctx_listener(const struct kafka_ctx *ctx)
{
	const struct broker *b = ctx->sh->b;

	return ctx->c->listener < b->set.nlisteners ? &b->set.listeners[ctx->c->listener] : NULL;
}

int kafka_handle_sasl_handshake(struct kafka_ctx *ctx)
{
	const struct kafka_sasl_handshake_request *q = ctx->req.body;
	struct kafka_sasl_handshake_response *r = ALLOC(ctx, struct kafka_sasl_handshake_response, 1);
	struct kafka_str *names = ALLOC(ctx, struct kafka_str, 3);
	const struct broker_listener *l = ctx_listener(ctx);
	struct sasl_conn *s = ctx->c->sasl;
	int n = 0, mech;

	if (!r || !names) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_sasl_handshake_response_init(r);
	ctx->resp = r;
	for (int m = 1; l && m <= SASL_MECH_ALL; m <<= 1)
		if (l->sasl_mechs & (unsigned)m)
			names[n++] = kstr(sasl_mech_name(m));
	r->Mechanisms.items = names;
	r->Mechanisms.count = n;
	mech = sasl_mech_from_name(q->Mechanism.ptr ? q->Mechanism.ptr : "", q->Mechanism.len > 0 ?
				   (size_t)q->Mechanism.len : 0);
	if (!s || s->state != SASL_WANT_HANDSHAKE) {
		/* a listener without SASL (Kafka answers the same), or a second
		 * handshake (re-authentication, KIP-368, is not implemented) */
		r->ErrorCode = KERR_ILLEGAL_SASL_STATE;
	} else if (ctx->req.header.RequestApiVersion < 1) {
		/* v0 goes on with raw SASL tokens outside Kafka's framing: no
		 * client Sluice supports needs it */
		r->ErrorCode = KERR_UNSUPPORTED_VERSION;
		ctx->c->close_after = 1;
	} else if (!mech || !(l->sasl_mechs & (unsigned)mech)) {
		r->ErrorCode = KERR_UNSUPPORTED_SASL_MECHANISM;
		ctx->c->close_after = 1;
	} else {
		s->mech = mech;
		s->state = SASL_WANT_AUTH;
	}
	kafka_ctx_respond(ctx);
	return 0;
}

static const struct sasl_scram_cred *scram_lookup(const void *arg, const char *name, int type)
{
	return md_scram_find(arg, name, type);
}

static int respond_later(struct kafka_ctx *ctx)
{
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_sasl_authenticate(struct kafka_ctx *ctx)
{
	const struct kafka_sasl_authenticate_request *q = ctx->req.body;
	struct kafka_sasl_authenticate_response *r = ALLOC(ctx, struct kafka_sasl_authenticate_response, 1);
	uint8_t *out = ALLOC(ctx, uint8_t, SASL_OUT_MAX);
	const struct broker_listener *l = ctx_listener(ctx);
	struct sasl_conn *s = ctx->c->sasl;
	struct shard *sh = ctx->sh;
	struct sasl_creds cr = { scram_lookup, broker_md(sh->b), l ? l->plain : NULL };
	char why[160], host[64];
	size_t outlen = 0;
	int rc, mech;

	if (!r || !out) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_sasl_authenticate_response_init(r);
	ctx->resp = r;
	if (!s || (s->state != SASL_WANT_AUTH && s->state != SASL_SCRAM_FINAL)) {
		/* no handshake before it, or after the authentication */
		r->ErrorCode = KERR_ILLEGAL_SASL_STATE;
		r->ErrorMessage = kstr(s && s->state == SASL_DONE ? "SaslAuthenticate after the authentication "
				       "(re-authentication is not implemented)" : "SaslAuthenticate before SaslHandshake");
		if (s && s->state != SASL_DONE)
			ctx->c->close_after = 1;
		kafka_ctx_respond(ctx);
		return 0;
	}
	mech = s->mech;
	rc = sasl_step(s, &cr, q->AuthBytes.ptr ? q->AuthBytes.ptr : (const uint8_t *)"",
		       q->AuthBytes.len > 0 ? (size_t)q->AuthBytes.len : 0, out, SASL_OUT_MAX, &outlen, why,
		       sizeof(why));
	if (rc >= 0) {
		r->AuthBytes = (struct kafka_bytes){ out, (int32_t)outlen };
		if (rc == 0)
			shard_stat_add(&sh->stats.sasl_auth_ok, 1);
		kafka_ctx_respond(ctx);
		return 0;
	}
	/* failed: Kafka's message, which says no more than this */
	r->ErrorCode = KERR_SASL_AUTHENTICATION_FAILED;
	r->ErrorMessage = kstr(mech == SASL_MECH_PLAIN ? "Authentication failed: Invalid username or password"
				: mech == SASL_MECH_SCRAM_SHA_256
				? "Authentication failed during authentication due to invalid credentials with SASL "
				  "mechanism SCRAM-SHA-256"
				: "Authentication failed during authentication due to invalid credentials with SASL "
				  "mechanism SCRAM-SHA-512");
	shard_stat_add(&sh->stats.sasl_auth_failed, 1);
	kafka_ctx_peer_host(ctx, host, sizeof(host));
	fprintf(stderr, /* style: allow slow path: a failed authentication, each delayed */
		"sluiced: SASL authentication failed from %s on listener %s (%s, user '%.64s'): %s\n", host,
		l ? l->name : "?", sasl_mech_name(mech), s->user, why);
	ctx->c->close_after = 1;
	if (sh->b->set.sasl_fail_delay_ms > 0) {
		ctx->resume = respond_later;
		kafka_ctx_park(ctx, sh->now_ns + (uint64_t)sh->b->set.sasl_fail_delay_ms * 1000000ull);
		return 0;
	}
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_describe_user_scram_credentials(struct kafka_ctx *ctx)
{
	const struct kafka_describe_user_scram_credentials_request *q = ctx->req.body;
	struct kafka_describe_user_scram_credentials_response *r =
		ALLOC(ctx, struct kafka_describe_user_scram_credentials_response, 1);
	const struct md_snapshot *md = broker_md(ctx->sh->b);
	int nscram = md ? md->nscram : 0, all = q->Users.count <= 0, cap = all ? nscram : q->Users.count, n = 0;
	struct kafka_describe_user_scram_credentials_response_describe_user_scram_credentials_result *res =
		ALLOC(ctx, struct kafka_describe_user_scram_credentials_response_describe_user_scram_credentials_result,
		      cap);
	struct kafka_describe_user_scram_credentials_response_credential_info *info =
		ALLOC(ctx, struct kafka_describe_user_scram_credentials_response_credential_info,
		      all ? nscram : q->Users.count * 2);
	int ni = 0;

	if (!r || !res || !info) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_describe_user_scram_credentials_response_init(r);
	ctx->resp = r;
	if (all) {
		/* every user, its credentials together (md->scram is by name) */
		for (int i = 0; i < nscram; i++) {
			const struct sasl_scram_cred *c = &md->scram[i];

			if (!n || strcmp(md->scram[i - 1].name, c->name)) {
				memset(&res[n], 0, sizeof(res[n]));
				res[n].User = kstr_copy(ctx, c->name);
				res[n].ErrorMessage = (struct kafka_str){ NULL, -1 };
				res[n].CredentialInfos.items = &info[ni];
				n++;
			}
			info[ni].Mechanism = c->type;
			info[ni].Iterations = c->iterations;
			ni++;
			res[n - 1].CredentialInfos.count++;
		}
	} else {
		for (int i = 0; i < q->Users.count; i++) {
			const struct kafka_str *u = &q->Users.items[i].Name;
			char name[SASL_USER_MAX];
			int dup = 0;

			memset(&res[n], 0, sizeof(res[n]));
			res[n].User = *u;
			res[n].ErrorMessage = (struct kafka_str){ NULL, -1 };
			res[n].CredentialInfos.items = &info[ni];
			for (int j = 0; j < q->Users.count; j++)
				dup |= j != i && q->Users.items[j].Name.len == u->len &&
				       !memcmp(q->Users.items[j].Name.ptr, u->ptr, (size_t)(u->len > 0 ? u->len : 0));
			if (dup) {
				res[n].ErrorCode = KERR_DUPLICATE_RESOURCE;
				res[n].ErrorMessage = kstr("Cannot describe SCRAM credentials for the same user twice "
							   "in a single request");
				n++;
				continue;
			}
			snprintf(name, sizeof(name), "%.*s", u->len > 0 ? u->len : 0, u->ptr ? u->ptr : "");
			for (int t = SASL_SCRAM_SHA_256; t <= SASL_SCRAM_SHA_512; t++) {
				const struct sasl_scram_cred *c = md_scram_find(md, name, t);

				if (!c)
					continue;
				info[ni].Mechanism = c->type;
				info[ni].Iterations = c->iterations;
				ni++;
				res[n].CredentialInfos.count++;
			}
			if (!res[n].CredentialInfos.count) {
				res[n].ErrorCode = KERR_RESOURCE_NOT_FOUND;
				res[n].ErrorMessage = kstr("Attempt to describe a user credential that does not exist");
			}
			n++;
		}
	}
	r->Results.items = res;
	r->Results.count = n;
	kafka_ctx_respond(ctx);
	return 0;
}
