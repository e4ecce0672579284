/* control/peer_kafka.c — the inter-broker Kafka client (see peer_kafka.h).
 *
 * A connection goes CONNECTING (resolving the registered host, then the
 * TCP connect) -> READY (frames written as requests come) -> gone (closed
 * on a read error, EOF, a frame it cannot read or a request past its
 * deadline: every request on it fails with -ECONNRESET or -ETIMEDOUT, and
 * the next request to that broker connects again). Requests wait in the
 * connection's list, oldest first, until answered; Kafka answers in order
 * on one connection, but the correlation id is what is matched.
 *
 * @thread ctl
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "control/ctl.h"
#include "control/ctl_internal.h"
#include "control/inbuf.h"
#include "control/peer_kafka.h"
#include "dataplane/broker.h"
#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/peer_session.h"
#include "storage/batch_format.h"
#include "storage/slog.h"

#define REQUEST_TIMEOUT_MS 30000   /* Kafka's request.timeout.ms default */
#define FRAME_MAX (64u << 20)

struct pk_req {
	struct pk_req *next;
	int32_t corr;
	int16_t api_key, version;
	uint8_t *frame;                 /* NULL once written */
	size_t len;
	int64_t deadline_ms;
	peer_kafka_done done;
	void *cookie;
};

enum pk_state { PK_RESOLVING, PK_CONNECTING, PK_HANDSHAKE, PK_READY, PK_CLOSING };

struct pk_conn {
	struct peer_kafka *pk;
	struct pk_conn *next;
	int32_t node;
	enum pk_state state;
	int err;                        /* set: fail everything at the next tick */
	uv_tcp_t tcp;
	uv_connect_t connect;
	uv_getaddrinfo_t resolve;
	int tcp_open;                   /* tcp initialised (closed by uv_close) */
	int resolving;                  /* a resolve in flight (holds the struct) */
	struct pk_req *reqs, **tail;
	struct inbuf in;                /* frames read, when the session is not in between */
	/* a secured inter-broker listener (b->peer_sec): TLS and/or SASL
	 * first (PK_HANDSHAKE), then frames through it; NULL on PLAINTEXT */
	struct peer_session *sess;
	/* KIP-368: when to authenticate again (ctl_now_ms; 0: the session
	 * never ends), at 85-95% of the lifetime the other broker gave from
	 * when the authentication began; reauth: the handshakes under way are
	 * a re-authentication (requests wait unwritten meanwhile) */
	int64_t auth_start_ms, reauth_ms;
	int reauth;
	char host[256];                 /* the address the broker registered */
};

struct peer_kafka {
	struct ctl *ctl;
	struct pk_conn *conns;
	int32_t next_corr;
	int closed;
	char client_id[32];
	struct peer_kafka_stats st;
	char auth_err[200];             /* the last handshake failure logged, and when */
	int64_t auth_logged_ms;
};

struct pk_write {
	uv_write_t w;
	uint8_t *frame;
};

static void req_free(struct pk_req *r)
{
	free(r->frame);
	free(r);
}

static void conn_fail(struct pk_conn *c, int err);

/* Every request of c completes with err (none after close). */
static void fail_all(struct pk_conn *c, int err)
{
	struct peer_kafka *pk = c->pk;

	while (c->reqs) {
		struct pk_req *r = c->reqs;

		c->reqs = r->next;
		if (!c->reqs)
			c->tail = &c->reqs;
		if (!pk->closed) {
			pk->st.failed++;
			r->done(pk->ctl, r->cookie, err, NULL);
		}
		req_free(r);
	}
}

static void conn_unlink(struct pk_conn *c)
{
	struct pk_conn **pp = &c->pk->conns;

	while (*pp && *pp != c)
		pp = &(*pp)->next;
	if (*pp)
		*pp = c->next;
}

static void conn_maybe_free(struct pk_conn *c)
{
	if (c->tcp_open || c->resolving)
		return;
	peer_session_destroy(c->sess);
	inbuf_fini(&c->in);
	free(c);
}

static void tcp_closed(uv_handle_t *h)
{
	struct pk_conn *c = h->data;

	c->tcp_open = 0;
	conn_maybe_free(c);
}

/* c leaves the table: its requests fail with err; it is freed once libuv
 * is done with it. */
static void conn_fail(struct pk_conn *c, int err)
{
	if (c->state == PK_CLOSING)
		return;
	c->state = PK_CLOSING;
	conn_unlink(c);
	fail_all(c, err);
	if (c->tcp_open && !uv_is_closing((uv_handle_t *)&c->tcp))
		uv_close((uv_handle_t *)&c->tcp, tcp_closed);
	else
		conn_maybe_free(c);
}

/* ---- writing ------------------------------------------------------------ */

static void written(uv_write_t *w, int status)
{
	struct pk_write *pw = w->data;

	(void)status;   /* a failed write shows as a read error too */
	free(pw->frame);
	free(pw);
}

/* What the session has to send (ciphertext, SASL's frames), copied out. */
static void sess_flush(struct pk_conn *c)
{
	const uint8_t *b;
	uint32_t n;

	while (!c->err && (n = peer_session_tx(c->sess, &b)) > 0) {
		struct pk_write *pw = malloc(sizeof(*pw));
		uv_buf_t ub;

		if (!pw || !(pw->frame = malloc(n)))
			abort();   /* the control thread's own bookkeeping */
		memcpy(pw->frame, b, n);
		peer_session_sent(c->sess, n);
		pw->w.data = pw;
		ub = uv_buf_init((char *)pw->frame, n);
		if (uv_write(&pw->w, (uv_stream_t *)&c->tcp, &ub, 1, written) < 0) {
			free(pw->frame);
			free(pw);
			c->err = -ECONNRESET;
		}
	}
}

static void req_write(struct pk_conn *c, struct pk_req *r)
{
	if (peer_session_tls(c->sess)) {
		/* through OpenSSL's record layer */
		if (peer_session_write(c->sess, r->frame, (uint32_t)r->len) < 0)
			c->err = -ECONNRESET;
		free(r->frame);
		r->frame = NULL;
		sess_flush(c);
		return;
	}
	{
	struct pk_write *pw = malloc(sizeof(*pw));
	uv_buf_t b;

	if (!pw)
		abort();   /* the control thread's own bookkeeping */
	pw->frame = r->frame;
	r->frame = NULL;
	pw->w.data = pw;
	b = uv_buf_init((char *)pw->frame, (unsigned)r->len);
	if (uv_write(&pw->w, (uv_stream_t *)&c->tcp, &b, 1, written) < 0) {
		free(pw->frame);
		free(pw);
		c->err = -ECONNRESET;
	}
	}
}

/* ---- reading ------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct pk_conn *c = h->data;

	(void)suggested;
	if (c->sess && (c->state == PK_HANDSHAKE || peer_session_tls(c->sess))) {
		uint32_t cap;

		buf->base = (char *)peer_session_rx(c->sess, &cap);   /* ciphertext, or SASL's answers */
		buf->len = cap;
		return;
	}
	inbuf_room(&c->in);
	buf->base = (char *)c->in.p + c->in.len;
	buf->len = c->in.cap - c->in.len;
}

/* One response message (after its size): its request completes (with
 * the decode's error when it does not decode). -EPROTO: it answers nothing
 * asked on this connection. */
static int answer(struct pk_conn *c, const uint8_t *msg, size_t len)
{
	struct peer_kafka *pk = c->pk;
	struct pk_req **pp = &c->reqs, *r;
	struct kafka_response resp;
	struct kafka_arena a;
	void *mem;
	size_t cap;
	int32_t corr;
	int rc;

	if (len < 4)
		return -EPROTO;
	corr = (int32_t)be32_load(msg);
	while (*pp && (*pp)->corr != corr)
		pp = &(*pp)->next;
	if (!(r = *pp))
		return -EPROTO;
	*pp = r->next;
	if (!*pp)
		c->tail = pp;
	cap = kafka_arena_bound(len);
	if (!(mem = malloc(cap)))
		abort();   /* the control thread's own bookkeeping */
	kafka_arena_init(&a, mem, cap);
	rc = kafka_response_decode(msg, len, r->api_key, r->version, &a, &resp);
	if (rc == 0) {
		pk->st.answered++;
		r->done(pk->ctl, r->cookie, 0, resp.body);
	} else {
		pk->st.failed++;
		r->done(pk->ctl, r->cookie, rc, NULL);
	}
	free(mem);
	req_free(r);
	return rc;
}

static void sess_step(struct pk_conn *c);
static int maybe_reauth(struct pk_conn *c);

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct pk_conn *c = s->data;
	size_t off = 0;

	(void)buf;
	if (n == 0)
		return;
	if (n < 0) {
		conn_fail(c, -ECONNRESET);
		return;
	}
	if (c->sess && (c->state == PK_HANDSHAKE || peer_session_tls(c->sess))) {
		int k;

		if (peer_session_feed(c->sess, (uint32_t)n) < 0) {
			conn_fail(c, -EPROTO);
			return;
		}
		if (c->state == PK_HANDSHAKE) {
			sess_step(c);
			return;
		}
		n = 0;
		for (;;) {
			inbuf_room(&c->in);
			k = peer_session_read(c->sess, c->in.p + c->in.len, (uint32_t)(c->in.cap - c->in.len));
			if (k <= 0)
				break;
			c->in.len += (size_t)k;
		}
		if (k < 0) {
			conn_fail(c, -ECONNRESET);
			return;
		}
	}
	c->in.len += (size_t)n;
	while (c->state == PK_READY && c->in.len - off >= 4) {
		const uint8_t *p = c->in.p + off;
		uint32_t len = be32_load(p);

		if (len > FRAME_MAX) {
			conn_fail(c, -EBADMSG);
			return;
		}
		if (c->in.len - off < 4 + (size_t)len)
			break;
		if (answer(c, p + 4, len) == -EPROTO) {
			conn_fail(c, -EPROTO);   /* out of step with the peer */
			return;
		}
		off += 4 + (size_t)len;
	}
	if (c->state != PK_READY)
		return;
	inbuf_consume(&c->in, off);
	if (!c->in.len)
		maybe_reauth(c);   /* its last answer in: the session renewed if due */
}

/* ---- connecting --------------------------------------------------------- */

/* No request written and not answered: a re-authentication may begin. */
static int idle_between(const struct pk_conn *c)
{
	for (const struct pk_req *r = c->reqs; r; r = r->next)
		if (!r->frame)
			return 0;
	return 1;
}

/* KIP-368: the session ends soon (or has ended: a SaslHandshake is still
 * taken then) and nothing is in flight: SaslHandshake and SaslAuthenticate
 * again on this connection; the requests waiting are written once it is
 * done. 1 when it began. */
static int maybe_reauth(struct pk_conn *c)
{
	int64_t now;

	if (c->state != PK_READY || c->err || !c->reauth_ms || !c->sess)
		return 0;
	now = ctl_now_ms(c->pk->ctl);
	if (now < c->reauth_ms || !idle_between(c))
		return 0;
	c->reauth_ms = 0;
	if (peer_session_reauth(c->sess) < 0)
		return 0;
	c->reauth = 1;
	c->auth_start_ms = now;
	c->state = PK_HANDSHAKE;
	sess_step(c);
	return 1;
}

/* The handshakes go on: what the session sends is written; once it is
 * done, the requests waiting are. A failure is logged with why (at most
 * once a minute for the same one) and fails the requests. */
static void sess_step(struct pk_conn *c)
{
	int rc = peer_session_step(c->sess);

	sess_flush(c);
	if (rc < 0) {
		struct peer_kafka *pk = c->pk;
		const char *why = peer_session_error(c->sess);
		int64_t now = ctl_now_ms(pk->ctl);

		if (strcmp(pk->auth_err, why) || now - pk->auth_logged_ms > 60000) {
			snprintf(pk->auth_err, sizeof(pk->auth_err), "%s", why);
			pk->auth_logged_ms = now;
			slog(SLOG_WARN, "inter-broker connection to broker %d at %s: %s failed: %s",
				c->node, c->host, c->reauth ? "SASL re-authentication" : "handshake", why);
		}
		c->pk->st.auth_failures++;
		if (c->reauth)
			c->pk->st.reauths_failed++;
		conn_fail(c, -EACCES);
		return;
	}
	if (rc == 0)
		return;
	c->state = PK_READY;
	if (c->reauth)
		c->pk->st.reauths_ok++;
	c->reauth = 0;
	c->reauth_ms = 0;
	{
		int64_t life = peer_session_lifetime_ms(c->sess);

		if (life > 0)   /* a point between 85% and 95% of it, as Kafka's clients */
			c->reauth_ms = c->auth_start_ms + life * 85 / 100 + (int64_t)(random() % (life / 10 + 1));
	}
	for (struct pk_req *r = c->reqs; r; r = r->next)
		if (r->frame)
			req_write(c, r);
}

static void on_connect(uv_connect_t *req, int status)
{
	struct pk_conn *c = req->data;
	const struct peer_sec *sec = c->pk->ctl->b->peer_sec;

	if (c->state == PK_CLOSING)
		return;
	if (status < 0) {
		conn_fail(c, -ECONNREFUSED);
		return;
	}
	c->state = sec ? PK_HANDSHAKE : PK_READY;
	if (sec && !(c->sess = peer_session_create(sec, c->host)))
		abort();   /* the control thread's own bookkeeping */
	c->auth_start_ms = ctl_now_ms(c->pk->ctl);
	if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
		conn_fail(c, -ECONNRESET);
		return;
	}
	if (sec) {
		sess_step(c);
		return;
	}
	for (struct pk_req *r = c->reqs; r; r = r->next)
		if (r->frame)
			req_write(c, r);
}

static void connect_to(struct pk_conn *c, const struct sockaddr *sa)
{
	uv_loop_t *loop = ctl_quorum_loop(c->pk->ctl);

	if (!loop || uv_tcp_init(loop, &c->tcp) < 0) {
		c->err = -ENOTCONN;
		return;
	}
	c->tcp.data = c;
	c->tcp_open = 1;
	uv_tcp_nodelay(&c->tcp, 1);
	c->state = PK_CONNECTING;
	c->connect.data = c;
	c->pk->st.connects++;
	if (uv_tcp_connect(&c->connect, &c->tcp, sa, on_connect) < 0)
		c->err = -ECONNREFUSED;
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *ai)
{
	struct pk_conn *c = req->data;

	c->resolving = 0;
	if (c->state == PK_CLOSING || c->pk->closed) {
		uv_freeaddrinfo(ai);
		conn_maybe_free(c);
		return;
	}
	if (status < 0 || !ai)
		conn_fail(c, -EHOSTUNREACH);
	else
		connect_to(c, ai->ai_addr);
	uv_freeaddrinfo(ai);
}

static struct pk_conn *conn_new(struct peer_kafka *pk, int32_t node)
{
	const struct md_broker *mb = ctl_broker_served(pk->ctl, node);
	uv_loop_t *loop = ctl_quorum_loop(pk->ctl);
	struct pk_conn *c;
	struct sockaddr_in6 sa6;
	struct sockaddr_in sa4;

	if (!mb)
		return NULL;
	if (!(c = calloc(1, sizeof(*c))))
		abort();   /* the control thread's own bookkeeping */
	c->pk = pk;
	c->node = node;
	snprintf(c->host, sizeof(c->host), "%s", mb->host);
	c->tail = &c->reqs;
	c->state = PK_RESOLVING;
	c->next = pk->conns;
	pk->conns = c;
	if (uv_ip4_addr(mb->host, mb->port, &sa4) == 0) {
		connect_to(c, (const struct sockaddr *)&sa4);
	} else if (uv_ip6_addr(mb->host, mb->port, &sa6) == 0) {
		connect_to(c, (const struct sockaddr *)&sa6);
	} else {
		static const struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
		char port[16];

		snprintf(port, sizeof(port), "%d", mb->port);
		c->resolve.data = c;
		if (loop && uv_getaddrinfo(loop, &c->resolve, on_resolved, mb->host, port, &hints) == 0)
			c->resolving = 1;
		else
			c->err = -EHOSTUNREACH;
	}
	return c;
}

/* ---- the interface ------------------------------------------------------ */

struct peer_kafka *peer_kafka_new(struct ctl *ctl)
{
	struct peer_kafka *pk = calloc(1, sizeof(*pk));

	if (!pk)
		abort();
	pk->ctl = ctl;
	snprintf(pk->client_id, sizeof(pk->client_id), "sluice-broker-%d", ctl->b->set.node_id);
	return pk;
}

int peer_kafka_send(struct peer_kafka *pk, int32_t node, int16_t api_key, int16_t version, const void *body,
		    peer_kafka_done done, void *cookie)
{
	struct kafka_request req = { 0 };
	struct kafka_writer w;
	struct pk_conn *c;
	struct pk_req *r;

	if (pk->closed || !ctl_quorum_loop(pk->ctl))
		return -ENOTCONN;
	req.api = kafka_api_find(api_key);
	if (!req.api)
		return -EINVAL;
	req.header.RequestApiKey = api_key;
	req.header.RequestApiVersion = version;
	req.header.CorrelationId = ++pk->next_corr;
	req.header.ClientId = (struct kafka_str){ pk->client_id, (int32_t)strlen(pk->client_id) };
	req.header_version = kafka_request_header_version(req.api, version);
	req.body = (void *)body;
	kafka_writer_init_measure(&w, false);
	if (kafka_request_encode(&w, &req) < 0)
		return -EINVAL;
	if (!(r = calloc(1, sizeof(*r))) || !(r->frame = malloc(w.len)))
		abort();   /* the control thread's own bookkeeping */
	r->len = w.len;
	kafka_writer_init(&w, r->frame, r->len);
	if (kafka_request_encode(&w, &req) < 0 || w.len != r->len) {
		req_free(r);
		return -EINVAL;
	}
	for (c = pk->conns; c && c->node != node; c = c->next)
		;
	if (!c && !(c = conn_new(pk, node))) {
		req_free(r);
		return -ENOENT;
	}
	r->corr = req.header.CorrelationId;
	r->api_key = api_key;
	r->version = version;
	r->deadline_ms = ctl_now_ms(pk->ctl) + REQUEST_TIMEOUT_MS;
	r->done = done;
	r->cookie = cookie;
	*c->tail = r;
	c->tail = &r->next;
	pk->st.sent++;
	if (c->state == PK_READY && !c->err && !maybe_reauth(c))
		req_write(c, r);
	return 0;
}

int peer_kafka_tick(struct peer_kafka *pk)
{
	int64_t now;
	int work = 0;

	if (!pk)
		return 0;
	now = ctl_now_ms(pk->ctl);

	for (struct pk_conn *c = pk->conns, *next; c; c = next) {
		next = c->next;
		if (c->err) {
			conn_fail(c, c->err);
			work++;
		} else if (c->reqs && now >= c->reqs->deadline_ms) {
			conn_fail(c, -ETIMEDOUT);
			work++;
		}
	}
	return work;
}

void peer_kafka_close(struct peer_kafka *pk)
{
	if (!pk)
		return;
	pk->closed = 1;
	while (pk->conns)
		conn_fail(pk->conns, -ESHUTDOWN);
}

void peer_kafka_free(struct peer_kafka *pk)
{
	free(pk);
}

const struct peer_kafka_stats *peer_kafka_stats(const struct peer_kafka *pk)
{
	return &pk->st;
}
