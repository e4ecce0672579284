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
 * KIP-368: with connections.max.reauth.ms (the listener's, per mechanism)
 * above 0 a session lasts that long: SaslAuthenticate v1+ says so
 * (SessionLifetimeMs), the client re-authenticates on the same connection
 * (SaslHandshake v1 + SaslAuthenticate, the same mechanism and principal,
 * else closed), and conn.c closes a connection whose session is over at
 * its next other request. A re-authentication may not begin within a
 * second of the one before (Kafka's limit): such a SaslHandshake is
 * answered ILLEGAL_SASL_STATE and the session goes on.
 *
 * Thread: the connection's shard (@thread shard). The credentials are the
 * published snapshot's (read-only) and the listener's PLAIN users
 * (read-only once the shards serve): nothing here blocks.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/broker.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/sasl.h"
#include "storage/slog.h"

#define SASL_OUT_MAX 512   /* a challenge or SCRAM's server-final */

static struct kafka_str kstr(const char *s)
{
	return (struct kafka_str){ s, (int32_t)strlen(s) };
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
	int n = 0;

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
	if (!s) {
		r->ErrorCode = KERR_ILLEGAL_SASL_STATE;   /* a listener without SASL: Kafka's answer */
	} else if (s->state == SASL_DONE && s->expire_ns == UINT64_MAX) {
		/* sessions that never end (connections.max.reauth.ms 0): no
		 * re-authentication; Kafka takes the handshake as an ordinary
		 * request on an authenticated connection (KafkaChannel's
		 * maybeBeginServerReauthentication without a session
		 * expiration): ILLEGAL_SASL_STATE, the connection goes on */
		r->ErrorCode = KERR_ILLEGAL_SASL_STATE;
	} else if (sasl_reauth_too_soon(s, ctx->req.header.RequestApiVersion, ctx->sh->now_ns)) {
		/* KIP-368: a second re-authentication within a second of the
		 * one before: Kafka takes the handshake as an ordinary request
		 * on an authenticated connection (ILLEGAL_SASL_STATE); the
		 * session and the connection go on */
		r->ErrorCode = KERR_ILLEGAL_SASL_STATE;
	} else {
		r->ErrorCode = (int16_t)sasl_handshake(s, q->Mechanism.ptr ? q->Mechanism.ptr : "",
						      q->Mechanism.len > 0 ? (size_t)q->Mechanism.len : 0,
						      l ? l->sasl_mechs : 0, ctx->req.header.RequestApiVersion);
		/* a second handshake that begins no re-authentication, or a
		 * mechanism not enabled (or not the session's): answered, closed */
		if (r->ErrorCode)
			ctx->c->close_after = 1;
	}
	kafka_ctx_respond(ctx);
	return 0;
}

static const struct sasl_scram_cred *scram_lookup(const void *arg, const char *name, int type)
{
	return md_scram_find(arg, name, type);
}

/* An authentication done: its session's end (KIP-368), the lifetime for
 * SaslAuthenticate v1+ to say (0: none), a re-authentication counted. */
static int64_t session_start(struct kafka_ctx *ctx, struct sasl_conn *s, int was_reauth)
{
	const struct broker_listener *l = ctx_listener(ctx);
	int64_t ms = l ? l->reauth_ms[sasl_mech_index(s->mech)] : 0;

	/* PLAIN and SCRAM credentials have no lifetime of their own */
	s->expire_ns = ms > 0 ? ctx->sh->now_ns + (uint64_t)ms * 1000000ull : UINT64_MAX;
	/* decisions remembered for the principal before are not its own */
	authz_cache_reset(&ctx->c->authz);
	s->reauth_ok = !ctx->raw && ctx->req.header.RequestApiVersion >= 1;
	shard_stat_add(was_reauth ? &ctx->sh->stats.sasl_reauth_ok : &ctx->sh->stats.sasl_auth_ok, 1);
	return ms > 0 ? ms : 0;
}

static int respond_later(struct kafka_ctx *ctx)
{
	kafka_ctx_respond(ctx);
	return 0;
}

/* A bare token that failed: no answer, the connection closes (Kafka). */
static int close_later(struct kafka_ctx *ctx)
{
	conn_close(ctx->c);
	kafka_ctx_done(ctx);
	return 0;
}

/* A failed authentication: counted, logged (the address, never the
 * password), answered after connection.failed.authentication.delay.ms,
 * then the connection closes. A bare token (v0) gets no answer. */
static void auth_failed(struct kafka_ctx *ctx, int mech, const char *why)
{
	struct shard *sh = ctx->sh;
	const struct broker_listener *l = ctx_listener(ctx);
	char host[64];

	shard_stat_add(&sh->stats.sasl_auth_failed, 1);
	kafka_ctx_peer_host(ctx, host, sizeof(host));
	slog(SLOG_WARN, /* style: allow slow path: a failed authentication, each delayed */
		"SASL authentication failed from %s on listener %s (%s, user '%.64s'): %s", host,
		l ? l->name : "?", sasl_mech_name(mech), ctx->c->sasl->user, why);
	ctx->c->close_after = 1;
	ctx->resume = ctx->raw ? close_later : respond_later;
	if (sh->b->set.sasl_fail_delay_ms > 0) {
		kafka_ctx_park(ctx, sh->now_ns + (uint64_t)sh->b->set.sasl_fail_delay_ms * 1000000ull);
		return;
	}
	ctx->resume(ctx);
}

/* A bare token after a v0 handshake (kafka_ctx.c dispatches it here with
 * ctx->raw set, the token in ctx->frame): the answer is a bare token. */
static int sasl_raw_token(struct kafka_ctx *ctx, const uint8_t *frame, uint32_t len)
{
	const struct broker_listener *l = ctx_listener(ctx);
	struct sasl_conn *s = ctx->c->sasl;
	struct sasl_creds cr = { scram_lookup, broker_md(ctx->sh->b), l ? l->plain : NULL };
	uint8_t *out = ALLOC(ctx, uint8_t, SASL_OUT_MAX);
	char why[160];
	size_t outlen = 0;
	int rc, mech = s->mech, was_reauth = s->reauth;

	if (!out) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	rc = sasl_step(s, &cr, frame, len, out, SASL_OUT_MAX, &outlen, why, sizeof(why));
	if (rc < 0) {
		auth_failed(ctx, mech, why);
		return 0;
	}
	if (rc == 0)
		session_start(ctx, s, was_reauth);
	ctx->raw_out = (struct kafka_bytes){ out, (int32_t)outlen };
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
	char why[160];
	size_t outlen = 0;
	int rc, mech, was_reauth;

	if (ctx->raw)
		return sasl_raw_token(ctx, ctx->frame, ctx->frame_len);
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
				       "(a re-authentication begins with SaslHandshake)" : "SaslAuthenticate before SaslHandshake");
		if (s && s->state != SASL_DONE)
			ctx->c->close_after = 1;
		kafka_ctx_respond(ctx);
		return 0;
	}
	mech = s->mech;
	was_reauth = s->reauth;
	rc = sasl_step(s, &cr, q->AuthBytes.ptr ? q->AuthBytes.ptr : (const uint8_t *)"",
		       q->AuthBytes.len > 0 ? (size_t)q->AuthBytes.len : 0, out, SASL_OUT_MAX, &outlen, why,
		       sizeof(why));
	if (rc >= 0) {
		r->AuthBytes = (struct kafka_bytes){ out, (int32_t)outlen };
		if (rc == 0)
			r->SessionLifetimeMs = session_start(ctx, s, was_reauth);
		kafka_ctx_respond(ctx);
		return 0;
	}
	/* failed: Kafka's message, which says no more than this (a
	 * re-authentication as another principal: Kafka's, naming both) */
	r->ErrorCode = KERR_SASL_AUTHENTICATION_FAILED;
	r->ErrorMessage = kstr(mech == SASL_MECH_PLAIN ? "Authentication failed: Invalid username or password"
				: mech == SASL_MECH_SCRAM_SHA_256
				? "Authentication failed during authentication due to invalid credentials with SASL "
				  "mechanism SCRAM-SHA-256"
				: "Authentication failed during authentication due to invalid credentials with SASL "
				  "mechanism SCRAM-SHA-512");
	if (rc == -EPERM)
		r->ErrorMessage = kafka_ctx_strdup(ctx, why);
	auth_failed(ctx, mech, why);
	return 0;
}

static int describe_scram(struct kafka_ctx *ctx);

/* the authorizer: DESCRIBE on the cluster */
int kafka_handle_describe_user_scram_credentials(struct kafka_ctx *ctx)
{
	return authz_cluster_or_refuse(ctx, ACL_DESCRIBE) ? 0 : describe_scram(ctx);
}

static int describe_scram(struct kafka_ctx *ctx)
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
				res[n].User = kafka_ctx_strdup(ctx, c->name)   /* the snapshot may be retired first */;
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

/* ---- AlterUserScramCredentials (51) ------------------------------------ */

struct scram_alter {
	struct coord_scram req;
};

static int scram_alter_resume(struct kafka_ctx *ctx)
{
	struct scram_alter *st = ctx->state;
	struct kafka_alter_user_scram_credentials_response *r = ctx->resp;

	for (int i = 0; i < st->req.n; i++) {
		const struct coord_scram_item *it = &st->req.items[i];

		kafka_ctx_result_error(ctx, &r->Results.items[i].ErrorCode, &r->Results.items[i].ErrorMessage, it->err,
				       it->msg);
	}
	kafka_ctx_respond(ctx);
	return 0;
}

int kafka_handle_alter_user_scram_credentials(struct kafka_ctx *ctx)
{
	const struct kafka_alter_user_scram_credentials_request *q = ctx->req.body;
	int nd = q->Deletions.count > 0 ? q->Deletions.count : 0, nu = q->Upsertions.count > 0 ? q->Upsertions.count : 0;
	int n = nd + nu;
	struct kafka_alter_user_scram_credentials_response *r =
		ALLOC(ctx, struct kafka_alter_user_scram_credentials_response, 1);
	struct kafka_alter_user_scram_credentials_response_alter_user_scram_credentials_result *res =
		ALLOC(ctx, struct kafka_alter_user_scram_credentials_response_alter_user_scram_credentials_result, n);
	struct scram_alter *st = ALLOC(ctx, struct scram_alter, 1);
	struct coord_scram_item *items = ALLOC(ctx, struct coord_scram_item, n);
	int allowed = authz_cluster(ctx, ACL_ALTER);   /* the authorizer */

	if (!r || !res || !st || !items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_alter_user_scram_credentials_response_init(r);
	ctx->resp = r;
	ctx->state = st;
	memset(items, 0, sizeof(*items) * (size_t)(n ? n : 1));
	for (int i = 0; i < n; i++) {
		const struct kafka_str *name = i < nd ? &q->Deletions.items[i].Name : &q->Upsertions.items[i - nd].Name;
		int8_t mech = i < nd ? q->Deletions.items[i].Mechanism : q->Upsertions.items[i - nd].Mechanism;
		struct coord_scram_item *it = &items[i];

		memset(&res[i], 0, sizeof(res[i]));
		res[i].User = *name;
		it->del = i < nd;
		it->cred.type = mech;
		if (!allowed)
			COORD_REFUSE(it, KERR_CLUSTER_AUTHORIZATION_FAILED, "AlterUserScramCredentials needs ALTER on "
				     "the cluster");
		if (name->len <= 0 || !name->ptr)
			COORD_REFUSE(it, KERR_UNACCEPTABLE_CREDENTIAL, "Username must not be empty");
		else if (name->len >= (int32_t)sizeof(it->name))
			COORD_REFUSE(it, KERR_UNACCEPTABLE_CREDENTIAL, "Username is too long");
		else
			memcpy(it->name, name->ptr, (size_t)name->len);
		/* Kafka: a user altered twice in one request is refused, each time */
		for (int j = 0; j < n; j++) {
			const struct kafka_str *o = j < nd ? &q->Deletions.items[j].Name : &q->Upsertions.items[j - nd].Name;

			if (j != i && o->len == name->len && name->len > 0 && !memcmp(o->ptr, name->ptr, (size_t)name->len))
				COORD_REFUSE(it, KERR_DUPLICATE_RESOURCE,
					     "A user credential cannot be altered twice in the same request");
		}
		if (!sasl_scram_key_len(mech))
			COORD_REFUSE(it, KERR_UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism");
		if (!it->del) {
			const struct kafka_alter_user_scram_credentials_request_scram_credential_upsertion *u =
				&q->Upsertions.items[i - nd];

			if (u->Iterations < SASL_MIN_ITERATIONS)
				COORD_REFUSE(it, KERR_UNACCEPTABLE_CREDENTIAL, "Too few iterations");
			else if (u->Iterations > SASL_MAX_ITERATIONS)
				COORD_REFUSE(it, KERR_UNACCEPTABLE_CREDENTIAL, "Too many iterations");
			if (!it->err && sasl_scram_from_salted(mech, u->SaltedPassword.ptr,
							       u->SaltedPassword.len > 0 ? (size_t)u->SaltedPassword.len : 0,
							       u->Salt.ptr, u->Salt.len > 0 ? (size_t)u->Salt.len : 0,
							       u->Iterations, &it->cred) < 0)
				COORD_REFUSE(it, KERR_UNACCEPTABLE_CREDENTIAL, "The salt or the salted password is "
					     "not of this mechanism's size");
			it->cred.name = it->name;
		}
	}
	r->Results.items = res;
	r->Results.count = n;
	st->req.n = n;
	st->req.items = items;
	ctx->pending = 1;
	ctx->resume = scram_alter_resume;
	ctx->sh->b->coord->submit_scram(ctx, &st->req);
	return 0;
}
