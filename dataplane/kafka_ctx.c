/* dataplane/kafka_ctx.c — a request in progress: its memory, dispatch
 * through the ApiKey table, the pipeline of one connection (which request
 * may follow which), its end, holds, long-poll parking, its response's
 * encoding; and the table through which its connection calls it
 * (kafka_ctx_conn_ops). See dataplane/kafka_ctx.h. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/sasl.h"
#include "storage/batch_format.h"
#include "storage/slog.h"

#define CONN_ARENA_MIN (1u << 20)
#define CONN_ARENA_PIPE (64u * 1024)   /* a pipelined produce's, beyond its frame */
#define CONN_ARENA_KEEP (8u << 20)     /* a larger arena is freed when its request ends */
#define UNSUPPORTED_LOG_EVERY_NS (60ull * 1000000000ull)

static void unsupported_said(struct kafka_ctx *ctx);

struct ctx_more {
	struct ctx_more *next;
	size_t size;
	max_align_t mem[];
};

void *kafka_ctx_alloc_more(struct kafka_ctx *ctx, size_t n)
{
	size_t size = n + 64 > CONN_ARENA_MIN ? n + 64 : CONN_ARENA_MIN;
	struct ctx_more *m;

	if (n > KAFKA_CTX_MORE_MAX || ctx->more_bytes + size > KAFKA_CTX_MORE_MAX)
		return NULL;
	m = malloc(sizeof(*m) + size); /* style: allow a response larger than its request's arena */
	if (!m)
		return NULL;
	m->next = ctx->more;
	m->size = size;
	ctx->more = m;
	ctx->more_bytes += size;
	kafka_arena_init(&ctx->arena, m->mem, size);
	return kafka_arena_alloc(&ctx->arena, n);
}

static void ctx_more_free(struct kafka_ctx *ctx)
{
	while (ctx->more) {
		struct ctx_more *m = ctx->more;

		ctx->more = m->next;
		free(m);
	}
	ctx->more_bytes = 0;
}

static int ctx_arena(struct kafka_ctx *ctx, size_t want)
{
	if (ctx->arena_cap >= want)
		return 0;
	free(ctx->arena_mem);
	ctx->arena_mem = malloc(want); /* style: allow growth to a larger request */
	ctx->arena_cap = ctx->arena_mem ? want : 0;
	return ctx->arena_mem ? 0 : -ENOMEM;
}

static struct kafka_ctx *ctx_of(const struct conn_req *r)
{
	return (struct kafka_ctx *)((char *)r - offsetof(struct kafka_ctx, cr));
}

/* A new request slot of the pipeline (made once per slot and connection,
 * kept until the connection goes). */
static struct conn_req *ctx_slot_new(struct conn *c)
{
	struct kafka_ctx *ctx = calloc(1, sizeof(*ctx)); /* style: allow per connection */

	if (!ctx)
		return NULL;
	ctx->sh = c->sh;
	ctx->c = c;
	return &ctx->cr;
}

static void ctx_dispatch(struct conn_req *r, const uint8_t *frame, uint32_t len)
{
	struct kafka_ctx *ctx = ctx_of(r);
	struct conn *c = ctx->c;
	struct shard *sh = c->sh;
	int rc;

	memset(&ctx->req, 0, sizeof(ctx->req));
	ctx->frame = frame;
	ctx->frame_len = len;
	ctx->pending = 0;
	ctx->resume = NULL;
	ctx->resp = NULL;
	ctx->state = NULL;
	ctx->nholds = 0;
	ctx->holds = NULL;
	ctx->holds_cap = 0;
	ctx->park.parked = 0;
	ctx->final = 0;
	ctx->parked_once = 0;
	ctx->only_error = 0;
	ctx->raw = 0;
	ctx->cr.ready = 0;
	ctx->cr.no_response = 0;
	ctx->cleanup = NULL;
	ctx->cleanup_arg = NULL;
	ctx->edit = NULL;
	ctx->edit_arg = NULL;
	ctx->started_ns = sh->now_ns;
	c->active_ns = sh->now_ns;
	ctx->recv_ns = shard_mono_ns();
	ctx->conn_ns = c->accept_ns;
	/* the first slot takes any request; the others only produces; before
	 * a SASL authentication, the three small requests allowed then (a
	 * client that never authenticates holds 64 KiB, not 1 MiB) */
	if (ctx_arena(ctx, (size_t)len * 4 + (&ctx->cr == c->pipe[0] && !(c->sasl && c->sasl->state != SASL_DONE)
					      ? CONN_ARENA_MIN : CONN_ARENA_PIPE)) < 0) {
		kafka_ctx_abort(ctx);
		return;
	}
	ctx_more_free(ctx);
	kafka_arena_init(&ctx->arena, ctx->arena_mem, ctx->arena_cap);
	if (c->sasl && sasl_raw_expected(c->sasl)) {
		/* after a v0 SaslHandshake the tokens come bare (kafka-python) */
		ctx->raw = 1;
		ctx->req.header.RequestApiKey = KAFKA_SASL_AUTHENTICATE_KEY;
		ctx->req.header.RequestApiVersion = -1;   /* none: a bare token (ctx->frame) */
		ctx->req.api = kafka_api_find(KAFKA_SASL_AUTHENTICATE_KEY);
		shard_stat_add(&sh->stats.requests, 1);
		ctx->req.api->handler(ctx);
		return;
	}
	rc = kafka_request_decode(frame, len, &ctx->arena, &ctx->req);
	if (rc == -ENOBUFS) {
		/* the worst case the codec guarantees; rare */
		if (ctx_arena(ctx, kafka_arena_bound(len)) < 0) {
			kafka_ctx_abort(ctx);
			return;
		}
		kafka_arena_init(&ctx->arena, ctx->arena_mem, ctx->arena_cap);
		rc = kafka_request_decode(frame, len, &ctx->arena, &ctx->req);
	}
	shard_stat_add(&sh->stats.requests, 1);
	if (rc == -ENOTSUP && ctx->req.header.RequestApiKey == KAFKA_API_VERSIONS_KEY) {
		/* an ApiVersions version we do not know: answer v0 with error 35
		 * and our range, never close (clients retry with a lower one) */
		ctx->req.api = kafka_api_find(KAFKA_API_VERSIONS_KEY);
		ctx->req.header.RequestApiVersion = 0;
		ctx->req.body = NULL;
		rc = 0;
	}
	if (rc == -ENOTSUP || (rc == 0 && (!ctx->req.api || !ctx->req.api->handler))) {
		/* an API or version we do not serve: UNSUPPORTED_VERSION where
		 * the response has a top-level error code to carry it, else
		 * the connection is closed, as Kafka does */
		ctx->only_error = KERR_UNSUPPORTED_VERSION;
		shard_stat_add(&sh->stats.unsupported, 1);
		unsupported_said(ctx);
		kafka_ctx_respond(ctx);
		return;
	}
	if (rc < 0) {
		kafka_ctx_abort(ctx);
		return;
	}
	ctx->req.api->handler(ctx);
}

/* A request of an API or version Sluice does not serve, said on stderr
 * once a minute per shard at most (the count is sluice_unsupported_requests_total):
 * where the response has no error code the client sees only its connection
 * closed, and may not say so (Sarama 1.22's OffsetCommit v1 commits failed
 * that way, unseen, before v0-1 were served). */
static void unsupported_said(struct kafka_ctx *ctx)
{
	struct shard *sh = ctx->sh;
	const struct kafka_api *api = kafka_api_find(ctx->req.header.RequestApiKey);
	const struct kafka_str *cid = &ctx->req.header.ClientId;
	char host[64], range[32];

	if (sh->unsupported_logged_ns && sh->unsupported_logged_ns + UNSUPPORTED_LOG_EVERY_NS > sh->now_ns)
		return;
	sh->unsupported_logged_ns = sh->now_ns ? sh->now_ns : 1;
	kafka_ctx_peer_host(ctx, host, sizeof(host));
	if (api && api->handler)
		snprintf(range, sizeof(range), "serves %d-%d", api->min_version, api->max_version);
	else
		snprintf(range, sizeof(range), "does not serve this API");
	slog(SLOG_WARN, /* style: allow slow path: once a minute per shard at most */
	     "shard %d: %s (ApiKey %d) v%d from %s (client id '%.*s') is not served: Sluice %s "
	     "(docs/kafka-protocol.md, \"Versions against Kafka\"); answered UNSUPPORTED_VERSION, or the "
	     "connection closed where that version's response has no error code; %llu such requests "
	     "on this shard (sluice_unsupported_requests_total)",
	     sh->id, api ? api->name : "unknown API", ctx->req.header.RequestApiKey,
	     ctx->req.header.RequestApiVersion, host, cid->len > 0 ? (int)(cid->len > 64 ? 64 : cid->len) : 0,
	     cid->len > 0 ? cid->ptr : "", range, (unsigned long long)sh->stats.unsupported);
}

/* A frame's ApiKey (the first field of every request header). */
static int16_t frame_api_key(const uint8_t *frame)
{
	return (int16_t)be16_load(frame);
}

/* May a request with ApiKey `next` start while the connection's head
 * request (`head`) is still in progress? Responses go out in order either
 * way. Produces after a produce: their appends share a group commit. Group
 * calls (OffsetCommit, OffsetFetch, Heartbeat, LeaveGroup) after a
 * JoinGroup or SyncGroup that waits for the rebalance: a commit the member
 * sent while its generation was current is judged then, not after the
 * rebalance it waits behind has made it stale (Kafka judges it late and
 * refuses it, and librdkafka then drops the member's partitions), and a
 * LeaveGroup of a closing member takes effect at once. */
static int ctx_may_follow(const struct conn_req *r, const uint8_t *frame)
{
	int16_t head = ctx_of(r)->req.header.RequestApiKey, next = frame_api_key(frame);

	if (head == KAFKA_PRODUCE_KEY)
		return next == KAFKA_PRODUCE_KEY;
	if (head == KAFKA_JOIN_GROUP_KEY || head == KAFKA_SYNC_GROUP_KEY)
		return next == KAFKA_OFFSET_COMMIT_KEY || next == KAFKA_OFFSET_FETCH_KEY || next == KAFKA_HEARTBEAT_KEY ||
		       next == KAFKA_LEAVE_GROUP_KEY;
	return 0;
}

/* The connection goes: the slot's memory with it. */
static void ctx_fini(struct conn_req *r)
{
	struct kafka_ctx *ctx = ctx_of(r);

	ctx_more_free(ctx);
	free(ctx->arena_mem);
	free(ctx);
}

/* ---- responses -------------------------------------------------------- */

void kafka_ctx_release_holds(struct kafka_ctx *ctx)
{
	for (int i = 0; i < ctx->nholds; i++)
		ctx->holds[i].release(ctx->sh, &ctx->holds[i]);
	ctx->nholds = 0;
}

/* The request's turn is over (its response sent, none, or the connection
 * closing): what it holds goes back; its connection lets the next go. */
static void ctx_end(struct conn_req *r)
{
	struct kafka_ctx *ctx = ctx_of(r);

	kafka_ctx_release_holds(ctx);
	if (ctx->cleanup) {
		ctx->cleanup(ctx);
		ctx->cleanup = NULL;
	}
	ctx_more_free(ctx);
	if (ctx->arena_cap > CONN_ARENA_KEEP) {
		/* a large request's arena goes back with it */
		free(ctx->arena_mem);
		ctx->arena_mem = NULL;
		ctx->arena_cap = 0;
	}
}

/* The connection closes: a long poll holds nothing in flight and ends
 * here. */
static int ctx_cancel(struct conn_req *r)
{
	struct kafka_ctx *ctx = ctx_of(r);

	if (!ctx->park.parked)
		return 0;
	shard_unpark(ctx->sh, &ctx->park);
	kafka_ctx_release_holds(ctx);
	return 1;
}

static void ctx_encode(struct conn_req *r, struct kafka_writer *w)
{
	struct kafka_ctx *ctx = ctx_of(r);
	int16_t key = ctx->req.header.RequestApiKey, ver = ctx->req.header.RequestApiVersion;
	int32_t corr = ctx->req.header.CorrelationId;

	if (ctx->raw) {
		kafka_writer_int32(w, ctx->raw_out.len);
		kafka_writer_raw(w, ctx->raw_out.ptr, (size_t)ctx->raw_out.len);
	} else if (ctx->only_error)
		kafka_error_response_encode(w, key, ver, corr, ctx->only_error);
	else
		kafka_response_encode(w, key, ver, corr, ctx->resp);
}

const struct conn_ops kafka_ctx_conn_ops = {
	.slot_new = ctx_slot_new,
	.may_follow = ctx_may_follow,
	.dispatch = ctx_dispatch,
	.encode = ctx_encode,
	.end = ctx_end,
	.cancel = ctx_cancel,
	.fini = ctx_fini,
};

/* The request's latency into the shard's histograms (its loop clock). */
static void shard_observe(struct kafka_ctx *ctx)
{
	struct shard *sh = ctx->sh;
	int16_t key = ctx->req.header.RequestApiKey;
	uint64_t ns = sh->now_ns > ctx->started_ns ? sh->now_ns - ctx->started_ns : 0;

	if (key < 0 || key >= SHARD_LAT_APIS)
		return;
	lathist_add(&sh->hists.api[key], ns);
	if (key == KAFKA_PRODUCE_KEY && ctx->req.body) {
		int16_t acks = ((const struct kafka_produce_request *)ctx->req.body)->Acks;

		if (acks == 0 || acks == 1 || acks == -1)
			lathist_add(&sh->hists.produce[acks < 0 ? 2 : acks], ns);
	} else if (key == KAFKA_FETCH_KEY) {
		lathist_add(&sh->hists.fetch, ns);
	}
}

void kafka_ctx_done(struct kafka_ctx *ctx)
{
	shard_observe(ctx);
	ctx->cr.ready = 1;
	ctx->cr.no_response = 1;
	conn_pump(ctx->c);
}

void kafka_ctx_abort(struct kafka_ctx *ctx)
{
	kafka_ctx_release_holds(ctx);
	conn_abort(ctx->c, &ctx->cr);
}

struct kafka_str kafka_ctx_strdup(struct kafka_ctx *ctx, const char *s)
{
	size_t n = strlen(s);
	char *p = ALLOC(ctx, char, n + 1);

	if (!p)
		return (struct kafka_str){ "", 0 };
	memcpy(p, s, n + 1);
	return (struct kafka_str){ p, (int32_t)n };
}

void kafka_ctx_respond(struct kafka_ctx *ctx)
{
	int (*edit)(struct kafka_ctx *) = ctx->edit;

	ctx->edit = NULL;
	if (edit && ctx->resp && !ctx->only_error && edit(ctx) < 0) {
		kafka_ctx_abort(ctx);
		return;
	}
	shard_observe(ctx);
	ctx->cr.ready = 1;
	conn_pump(ctx->c);
}

int kafka_ctx_hold(struct kafka_ctx *ctx, int owner, struct plog_read *rd,
		   void (*release)(struct shard *sh, struct data_hold *h))
{
	if (ctx->nholds == ctx->holds_cap) {
		int ncap = ctx->holds_cap ? ctx->holds_cap * 2 : 16;
		struct data_hold *n = kafka_arena_alloc(&ctx->arena, (size_t)ncap * sizeof(*n));

		if (!n)
			return -ENOBUFS;
		if (ctx->nholds)
			memcpy(n, ctx->holds, (size_t)ctx->nholds * sizeof(*n));
		ctx->holds = n;
		ctx->holds_cap = ncap;
	}
	ctx->holds[ctx->nholds++] = (struct data_hold){ owner, rd, release };
	return 0;
}

void kafka_ctx_sub_done(struct kafka_ctx *ctx)
{
	if (--ctx->pending == 0 && ctx->resume)
		ctx->resume(ctx);
}

/* Woken: the deadline passed, a watched partition moved, or the shard
 * stops (final). A request whose connection closed meanwhile just ends. */
static void ctx_wake(struct shard_park *pk, int final)
{
	struct kafka_ctx *ctx = (struct kafka_ctx *)((char *)pk - offsetof(struct kafka_ctx, park));

	if (final)
		ctx->final = 1;
	if (ctx->c->closing) {
		ctx->cr.ready = 1;
		ctx->cr.no_response = 1;
		conn_pump(ctx->c);
		return;
	}
	ctx->resume(ctx);
}

void kafka_ctx_park(struct kafka_ctx *ctx, uint64_t deadline_ns)
{
	ctx->park.wake = ctx_wake;
	shard_park(ctx->sh, &ctx->park, deadline_ns);
}

/* ---- what a coordinator's shard-side half uses ----------------------- */

int kafka_ctx_shard_id(const struct kafka_ctx *ctx)
{
	return ctx->sh->id;
}

void kafka_ctx_send_ctl(struct kafka_ctx *ctx, const struct shard_msg *m)
{
	shard_send(ctx->sh, broker_ctl_index(ctx->sh->b), m);
}

void kafka_ctx_peer_host(const struct kafka_ctx *ctx, char *buf, size_t n)
{
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);

	if (n < 2)
		return;
	buf[0] = 0;
	if (getpeername(ctx->c->fd, (struct sockaddr *)&sa, &sl) < 0)
		return;
	buf[0] = '/';
	buf[1] = 0;
	if (sa.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, buf + 1, (socklen_t)(n - 1));
	else if (sa.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, buf + 1, (socklen_t)(n - 1));
}
