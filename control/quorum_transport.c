/* control/quorum_transport.c — the controller port: libraft's connections
 * and the controller channel's on one listener (see quorum_transport.h).
 *
 * The libraft side follows raft_uv_tcp 0.15 (uv_tcp_listen.c,
 * uv_tcp_connect.c): the same handshake bytes, the same ownership (a
 * connect's stream goes to its callback, an accepted one to the accept
 * callback, both raft_malloc'ed; libraft closes them and frees them with
 * raft_free), the same close (stop listening, abort what is still in its
 * handshake, cancel the connects, then tell).
 *
 * A connection in its handshake reads into a buffer exactly as long as
 * what is still missing of the handshake: libuv reads at most the buffer
 * it is given, so nothing of what the peer sends next is consumed here.
 *
 * Every connection still in its set-up (in t->in, t->out) has a start
 * time; one sweep timer (t->sweep, running while there are any) closes
 * those older than QT_SETUP_DEADLINE_MS: an accepted one whose TLS
 * handshake or transport handshake never came, a connect that never
 * completed. Closing an accepted TLS connection aborts its tunnel too
 * (before its handshake is over the tunnel does not read its outer end,
 * so closing the inner end alone would leave the socket open).
 *
 * @thread ctl (the quorum's libuv loop)
 */
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "control/quorum_tls.h"
#include "control/quorum_transport.h"
#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/kafka/kafka_msgs.h"
#include "storage/slog.h"

#define QT_ADDRESS_MAX 1024
#define QT_BACKLOG 128
#define QT_SASL_HANDSHAKE 17            /* Kafka's api keys */
#define QT_SASL_AUTHENTICATE 36
#define QT_SASL_AUTH_FAILED 58          /* Kafka's SASL_AUTHENTICATION_FAILED */
#define QT_SASL_OUT 1024                /* a SASL answer's frame */

struct qt;

/* A connection accepted, its handshake being read. */
struct qt_in {
	struct qt *t;
	struct qt_in *prev, *next;
	uv_stream_t *tcp;               /* raft_malloc'ed: handed over as is (TLS:
					 * a tunnel's inner end, a uv_pipe_t) */
	uint64_t pre[3];                /* the first u64s, little-endian */
	size_t got, want;               /* bytes of pre read, and needed */
	char *addr;                     /* raft's address (raft_malloc'ed) */
	size_t addr_len, addr_got;      /* addr != NULL: reading it */
	int closing;
	uint64_t started;               /* uv_now at the accept */
	struct qtls *tun;               /* TLS: its tunnel, until it closes */
	char peer[64];                  /* "host:port" of the other end, for logs */
	/* a SASL controller listener: the exchange before the handshake */
	int sasl;                       /* still to do */
	struct sasl_conn *sc;           /* its state (heap while sasl) */
	uint8_t hdr[4];                 /* a request's size, big-endian */
	uint32_t hgot;
	uint8_t *frame;                 /* the request (heap), once its size is read */
	uint32_t flen, fgot;
	uint64_t fail_at;               /* refused: closed by the sweep at this uv_now */
	int authed;                     /* SASL: authenticated at authed_at (uv_now) */
	uint64_t authed_at;
};

/* An accepted connection handed over whose SASL session has a lifetime
 * (qt_sasl.lifetime_ms): its socket, known by descriptor and inode (the
 * stream is its owner's), shut down by the sweep at end_at. */
struct qt_sess {
	struct qt_sess *next;
	int fd;
	dev_t dev;
	ino_t ino;
	uint64_t end_at;                /* uv_now */
	char peer[64];
};

/* A connect in flight: resolve, connect, write the handshake. */
struct qt_out {
	struct qt *t;
	struct qt_out *prev, *next;
	uv_getaddrinfo_t gai;
	uv_connect_t conn;
	uv_write_t wr;
	uv_stream_t *tcp;               /* NULL while resolving; TLS: the
					 * tunnel's inner end once connected */
	struct qtls *tun;               /* TLS: its handshake still going on */
	struct peer_session *ps;        /* SASL: the exchange going on */
	int sasl_writing;               /* SASL: a frame of ps's in flight (o->wr) */
	int sasl_reading;
	uint32_t sasl_wlen;
	char host[QT_ADDRESS_MAX];      /* TLS: the name the certificate must have */
	uv_buf_t hs;                    /* the handshake (raft_malloc'ed) */
	int resolving;
	int aborted;                    /* closing its tcp (or cancelling the
					 * resolve): the close finishes it */
	int status;                     /* what done will be told */
	uint64_t started;               /* uv_now at the start */
	struct raft_uv_connect *req;    /* libraft's, or: */
	qt_connect_fn done;             /* the channel's */
	void *arg;
};

struct qt {
	struct raft_uv_transport *tr;
	uv_loop_t *loop;
	const struct qt_ops *ops;       /* borrowed */
	raft_id id;
	char address[QT_ADDRESS_MAX];
	uv_tcp_t listener;
	int listener_open;              /* listener initialised, not closed */
	int listen_err;                 /* the listen's failure (-errno), or 0 */
	raft_uv_accept_cb accept_cb;
	int closing;
	raft_uv_transport_close_cb close_cb;
	int closes;                     /* uv_close callbacks to come */
	struct qt_in *in;               /* handshakes being read */
	struct qt_out *out;             /* connects in flight */
	struct qtls *tuns;              /* TLS tunnels open (each counted in closes) */
	uv_timer_t sweep;               /* the set-up deadline's (see the top), and
					 * the sessions' ends */
	struct qt_sess *sess;           /* sessions with an end, handed over */
	int sweep_open;                 /* sweep initialised, not closed */
};

static void sweep_start(struct qt *t);

static void qt_maybe_closed(struct qt *t)
{
	raft_uv_transport_close_cb cb = t->close_cb;

	if (!t->closing || !cb || t->closes || t->in || t->out)
		return;
	t->close_cb = NULL;
	cb(t->tr);
}

int qt_split(const char *address, char *host, size_t hostcap, char *port, size_t portcap)
{
	const char *c = strrchr(address, ':');
	size_t hl;

	if (!c || c == address || !c[1] || strlen(c + 1) >= portcap)
		return -EINVAL;
	hl = (size_t)(c - address);
	if (hl >= hostcap)
		return -EINVAL;
	memcpy(host, address, hl);
	host[hl] = 0;
	snprintf(port, portcap, "%s", c + 1);
	return 0;
}

/* "ip:port" of tcp's other end into buf ("?" if unknown). */
static void peer_name(uv_tcp_t *tcp, char *buf, size_t cap)
{
	struct sockaddr_storage sa;
	int len = sizeof(sa);

	snprintf(buf, cap, "?");
	if (uv_tcp_getpeername(tcp, (struct sockaddr *)&sa, &len) == 0 && sa.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&sa;
		char ip[INET_ADDRSTRLEN] = "?";

		uv_ip4_name(a, ip, sizeof(ip));
		snprintf(buf, cap, "%s:%u", ip, ntohs(a->sin_port));
	}
}

/* ---- accepting --------------------------------------------------------- */

static void in_unlink(struct qt_in *in)
{
	struct qt *t = in->t;

	if (in->prev)
		in->prev->next = in->next;
	else
		t->in = in->next;
	if (in->next)
		in->next->prev = in->prev;
	in->prev = in->next = NULL;
}

static void in_closed(uv_handle_t *h)
{
	struct qt_in *in = h->data;
	struct qt *t = in->t;

	raft_free(in->tcp);
	raft_free(in->addr);
	in_unlink(in);
	free(in->sc);
	free(in->frame);
	free(in);
	t->closes--;
	qt_maybe_closed(t);
}

static void in_abort(struct qt_in *in)
{
	if (in->closing)
		return;
	in->closing = 1;
	in->t->closes++;
	uv_close((uv_handle_t *)in->tcp, in_closed);
}

static void in_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct qt_in *in = h->data;

	(void)suggested;
	if (in->sasl && !in->frame) {
		buf->base = (char *)in->hdr + in->hgot;
		buf->len = 4 - in->hgot;
	} else if (in->sasl) {
		buf->base = (char *)in->frame + in->fgot;
		buf->len = in->flen - in->fgot;
	} else if (in->addr) {
		buf->base = in->addr + in->addr_got;
		buf->len = in->addr_len - in->addr_got;
	} else {
		buf->base = (char *)in->pre + in->got;
		buf->len = in->want - in->got;
	}
}

/* A SASL session with a lifetime, about to be handed over on s: its
 * socket remembered for the sweep (heap: one per connection accepted,
 * rare). Without memory, or a descriptor, the session does not end. */
static void sess_track(struct qt_in *in, uv_stream_t *s)
{
	struct qt *t = in->t;
	struct qt_sess *e;
	uv_os_fd_t fd;
	struct stat st;

	if (uv_fileno((uv_handle_t *)s, &fd) < 0 || fstat(fd, &st) < 0 || !(e = calloc(1, sizeof(*e))))
		return;
	e->fd = fd;
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->end_at = in->authed_at + (uint64_t)t->ops->sasl->lifetime_ms;
	snprintf(e->peer, sizeof(e->peer), "%s", in->peer);
	e->next = t->sess;
	t->sess = e;
	sweep_start(t);
}

/* The handshake is read: hand the stream over. */
static void in_handover(struct qt_in *in, int channel)
{
	struct qt *t = in->t;
	uv_stream_t *s = (uv_stream_t *)in->tcp;

	uv_read_stop(s);
	if (in->authed && t->ops->sasl && t->ops->sasl->lifetime_ms > 0)
		sess_track(in, s);
	in_unlink(in);
	s->data = NULL;
	free(in->sc);
	free(in->frame);
	if (channel) {
		t->ops->channel_accept(t->ops->arg, s, (int32_t)le64toh(in->pre[1]));
	} else {
		t->accept_cb(t->tr, le64toh(in->pre[1]), in->addr, s);
		raft_free(in->addr);
	}
	free(in);
}

static void in_sasl_read(struct qt_in *in, size_t n);

static void in_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct qt_in *in = s->data;

	(void)buf;
	if (n == 0 || in->fail_at)
		return;
	if (n < 0 || in->t->closing) {
		in_abort(in);
		return;
	}
	if (in->sasl) {
		in_sasl_read(in, (size_t)n);
		return;
	}
	if (in->addr) {
		in->addr_got += (size_t)n;
		if (in->addr_got < in->addr_len)
			return;
		in->addr[in->addr_len - 1] = 0;
		in_handover(in, 0);
		return;
	}
	in->got += (size_t)n;
	if (in->got < in->want)
		return;
	if (in->want == 8) {
		uint64_t kind = le64toh(in->pre[0]);

		if (kind == QT_RAFT_PROTOCOL && in->t->accept_cb) {
			in->want = 24;
		} else if (kind == QT_CHANNEL_MAGIC && in->t->ops && in->t->ops->channel_accept) {
			in->want = 16;
		} else {
			in_abort(in);   /* not ours, or nobody to take it */
		}
		return;
	}
	if (in->want == 16) {
		in_handover(in, 1);
		return;
	}
	in->addr_len = (size_t)le64toh(in->pre[2]);
	if (in->addr_len == 0 || in->addr_len > QT_ADDRESS_MAX || !(in->addr = raft_malloc(in->addr_len))) {
		in_abort(in);
		return;
	}
}

/* ---- SASL, accepting (quorum_transport.h: struct qt_sasl) --------------- */

static int rate_ok(uint64_t *logged_ms, uint64_t *unlogged, uint64_t now)
{
	if (*logged_ms && now - *logged_ms < 5000) {
		(*unlogged)++;
		return 0;
	}
	*logged_ms = now;
	return 1;
}

/* Refused: counted, logged (the first each 5 s), closed by the sweep
 * once connection.failed.authentication.delay.ms is over (reading stops
 * now: nothing it sends is read). */
static void in_sasl_refuse(struct qt_in *in, const char *why)
{
	struct qt *t = in->t;
	struct qt_counters *c = t->ops->counters;
	uint64_t now = uv_now(t->loop);

	if (c) {
		c->sasl[0][1]++;
		if (rate_ok(&c->sasl_logged_ms, &c->sasl_unlogged, now)) {
			slog(SLOG_WARN, "controller port: SASL authentication from %s failed: %s (closed; "
				"%llu more not logged)", in->peer, why, (unsigned long long)c->sasl_unlogged);
			c->sasl_unlogged = 0;
		}
	}
	uv_read_stop(in->tcp);
	in->fail_at = now + (t->ops->sasl->fail_delay_ms ? t->ops->sasl->fail_delay_ms : 1);
}

static void in_sent(uv_write_t *w, int status)
{
	(void)status;
	free(w);
}

/* A response frame to in's peer. 0 or -1 (in aborted). */
static int in_send(struct qt_in *in, int16_t key, int16_t version, int32_t corr, const void *body)
{
	uv_write_t *w = malloc(sizeof(*w) + QT_SASL_OUT);
	struct kafka_writer kw;
	uv_buf_t b;

	if (!w) {
		in_abort(in);
		return -1;
	}
	kafka_writer_init(&kw, (uint8_t *)(w + 1), QT_SASL_OUT);
	if (kafka_response_encode(&kw, key, version, corr, body) < 0 || kw.len > QT_SASL_OUT) {
		free(w);
		in_abort(in);
		return -1;
	}
	b = uv_buf_init((char *)(w + 1), (unsigned)kw.len);
	if (uv_write(w, in->tcp, &b, 1, in_sent) < 0) {
		free(w);
		in_abort(in);
		return -1;
	}
	return 0;
}

/* One whole request in in->frame: SaslHandshake, then SaslAuthenticate. */
static void in_sasl_frame(struct qt_in *in)
{
	const struct qt_sasl *sa = in->t->ops->sasl;
	size_t cap = kafka_arena_bound(in->flen);
	struct kafka_request req;
	struct kafka_arena a;
	void *mem = malloc(cap);
	int16_t key, ver;
	int32_t corr;

	if (!mem) {
		in_abort(in);
		return;
	}
	kafka_arena_init(&a, mem, cap);
	if (kafka_request_decode(in->frame, in->flen, &a, &req) < 0 || !req.api) {
		in_sasl_refuse(in, "a request that does not decode (not SASL)");
		free(mem);
		return;
	}
	key = req.header.RequestApiKey;
	ver = req.header.RequestApiVersion;
	corr = req.header.CorrelationId;
	if (key == QT_SASL_HANDSHAKE && ver >= 1 && in->sc->state == SASL_WANT_HANDSHAKE) {
		const struct kafka_sasl_handshake_request *q = req.body;
		struct kafka_sasl_handshake_response r;
		struct kafka_str plain = { "PLAIN", 5 };

		kafka_sasl_handshake_response_init(&r);
		r.Mechanisms.items = &plain;
		r.Mechanisms.count = 1;
		r.ErrorCode = (int16_t)sasl_handshake(in->sc, q->Mechanism.ptr ? q->Mechanism.ptr : "",
						      q->Mechanism.len > 0 ? (size_t)q->Mechanism.len : 0,
						      SASL_MECH_PLAIN, ver);
		if (in_send(in, key, ver, corr, &r) == 0 && r.ErrorCode)
			in_sasl_refuse(in, "a mechanism other than PLAIN (sasl.mechanism.controller.protocol)");
	} else if (key == QT_SASL_AUTHENTICATE && in->sc->state == SASL_WANT_AUTH) {
		const struct kafka_sasl_authenticate_request *q = req.body;
		struct kafka_sasl_authenticate_response r;
		struct sasl_creds cr = { .plain = &sa->users };
		uint8_t out[256];
		size_t outlen = 0;
		char why[200] = "";
		int rc;

		rc = sasl_step(in->sc, &cr, q->AuthBytes.ptr ? q->AuthBytes.ptr : (const uint8_t *)"",
			       q->AuthBytes.len > 0 ? (size_t)q->AuthBytes.len : 0, out, sizeof(out), &outlen, why,
			       sizeof(why));
		kafka_sasl_authenticate_response_init(&r);
		if (rc == 0) {
			r.AuthBytes = (struct kafka_bytes){ out, (int32_t)outlen };
			/* KIP-368: the session's lifetime, told as Kafka does;
			 * this node closes the connection at its end */
			r.SessionLifetimeMs = sa->lifetime_ms;
			if (in_send(in, key, ver, corr, &r) == 0) {
				if (in->t->ops->counters)
					in->t->ops->counters->sasl[0][0]++;
				in->sasl = 0;   /* the transport's handshake comes next */
				in->authed = 1;
				in->authed_at = uv_now(in->t->loop);
			}
		} else {
			r.ErrorCode = QT_SASL_AUTH_FAILED;
			r.ErrorMessage = (struct kafka_str){ "Authentication failed: Invalid username or password",
							     51 };
			if (in_send(in, key, ver, corr, &r) == 0)
				in_sasl_refuse(in, why[0] ? why : "invalid username or password");
		}
	} else {
		in_sasl_refuse(in, "a request other than SaslHandshake v1+ then SaslAuthenticate (authentication "
			       "skipped?)");
	}
	free(mem);
}

static void in_sasl_read(struct qt_in *in, size_t n)
{
	if (!in->frame) {
		in->hgot += (uint32_t)n;
		if (in->hgot < 4)
			return;
		in->flen = (uint32_t)in->hdr[0] << 24 | (uint32_t)in->hdr[1] << 16 | (uint32_t)in->hdr[2] << 8 |
			   in->hdr[3];
		if (in->flen < 8 || in->flen > SASL_PREAUTH_FRAME_MAX) {
			in_sasl_refuse(in, "a frame that is not a SASL request (authentication skipped?)");
			return;
		}
		if (!(in->frame = malloc(in->flen))) {
			in_abort(in);
			return;
		}
		in->fgot = 0;
		return;
	}
	in->fgot += (uint32_t)n;
	if (in->fgot < in->flen)
		return;
	in_sasl_frame(in);
	free(in->frame);
	in->frame = NULL;
	in->hgot = 0;
}

/* ---- TLS tunnels (control/quorum_tls.h) ------------------------------- */

static void tun_closed(void *arg, struct qtls *tun)
{
	struct qt *t = arg;

	if (tun->prev)
		tun->prev->next = tun->next;
	else
		t->tuns = tun->next;
	if (tun->next)
		tun->next->prev = tun->prev;
	for (struct qt_in *in = t->in; in; in = in->next)
		if (in->tun == tun)
			in->tun = NULL;
	t->closes--;
	qt_maybe_closed(t);
}

static void handle_freed(uv_handle_t *h)
{
	struct qt *t = h->data;

	raft_free(h);
	t->closes--;
	qt_maybe_closed(t);
}

/* Wrap tcp (raft_malloc'ed, connected or accepted) in a tunnel: *s its
 * plaintext end. On failure tcp is closed and freed here. */
static int tun_open(struct qt *t, uv_tcp_t *tcp, const char *host, qtls_ready_fn ready, void *arg,
		    uv_stream_t **s, struct qtls **out)
{
	char ip[64], peer[300];
	int rc;

	peer_name(tcp, ip, sizeof(ip));
	snprintf(peer, sizeof(peer), "%s%s%s%s", host ? host : "", host ? " (" : "", ip, host ? ")" : "");
	rc = qtls_start(t->ops->sec, t->loop, tcp, host, peer, ready, arg, tun_closed, t, s, out);
	if (rc < 0) {
		tcp->data = t;
		t->closes++;
		uv_close((uv_handle_t *)tcp, handle_freed);
		return rc;
	}
	t->closes++;
	(*out)->next = t->tuns;
	if (t->tuns)
		t->tuns->prev = *out;
	t->tuns = *out;
	return 0;
}

static void qt_listen_cb(uv_stream_t *server, int status)
{
	struct qt *t = server->data;
	struct qt_in *in;
	struct qtls *tun = NULL;
	uv_tcp_t *tcp;

	if (status < 0 || t->closing)
		return;
	if (!(in = calloc(1, sizeof(*in))))
		return;
	if (t->ops && t->ops->sasl && !(in->sc = calloc(1, sizeof(*in->sc)))) {
		free(in);
		return;
	}
	if (!(tcp = raft_malloc(sizeof(*tcp)))) {
		free(in->sc);
		free(in);
		return;
	}
	uv_tcp_init(t->loop, tcp);
	if (uv_accept(server, (uv_stream_t *)tcp) < 0) {
		tcp->data = t;
		t->closes++;
		uv_close((uv_handle_t *)tcp, handle_freed);
		free(in->sc);
		free(in);
		return;
	}
	peer_name(tcp, in->peer, sizeof(in->peer));
	if (t->ops && t->ops->sec) {
		/* TLS: the handshake below is read from the tunnel's inner end */
		if (tun_open(t, tcp, NULL, NULL, NULL, &in->tcp, &tun) < 0) {
			free(in->sc);
			free(in);
			return;
		}
	} else {
		in->tcp = (uv_stream_t *)tcp;
	}
	in->t = t;
	in->tun = tun;
	in->started = uv_now(t->loop);
	in->want = 8;
	in->sasl = in->sc != NULL;
	in->tcp->data = in;
	in->next = t->in;
	if (t->in)
		t->in->prev = in;
	t->in = in;
	sweep_start(t);
	if (uv_read_start(in->tcp, in_alloc, in_read) < 0)
		in_abort(in);
	if (tun)
		qtls_go(tun);
}

/* ---- connecting -------------------------------------------------------- */

static void out_finish(struct qt_out *o, uv_stream_t *s)
{
	struct qt *t = o->t;

	if (o->prev)
		o->prev->next = o->next;
	else
		t->out = o->next;
	if (o->next)
		o->next->prev = o->prev;
	raft_free(o->hs.base);
	peer_session_destroy(o->ps);
	if (o->req)
		o->req->cb(o->req, s, s ? 0 : t->closing ? RAFT_CANCELED : RAFT_NOCONNECTION);
	else
		o->done(o->arg, s, s ? 0 : t->closing ? -ECANCELED : (o->status < 0 ? o->status : -EIO));
	free(o);
	qt_maybe_closed(t);
}

static void out_closed(uv_handle_t *h)
{
	struct qt_out *o = h->data;

	raft_free(o->tcp);
	o->tcp = NULL;
	o->t->closes--;
	out_finish(o, NULL);
}

static void out_fail(struct qt_out *o, int status)
{
	if (o->aborted)
		return;
	o->aborted = 1;
	if (!o->status)
		o->status = status;
	if (o->tun) {
		qtls_detach(o->tun);   /* closing o->tcp, its inner end, closes it */
		o->tun = NULL;
	}
	if (o->resolving) {
		uv_cancel((uv_req_t *)&o->gai);   /* its callback finishes o */
		return;
	}
	o->t->closes++;
	uv_close((uv_handle_t *)o->tcp, out_closed);
}

static void out_written(uv_write_t *w, int status)
{
	struct qt_out *o = w->data;
	uv_stream_t *s = (uv_stream_t *)o->tcp;

	if (o->aborted)
		return;   /* out_closed finishes it */
	if (status < 0) {
		out_fail(o, status);
		return;
	}
	o->tcp = NULL;
	s->data = NULL;
	out_finish(o, s);
}

static void out_send_handshake(struct qt_out *o)
{
	int rc;

	o->wr.data = o;
	rc = uv_write(&o->wr, o->tcp, &o->hs, 1, out_written);
	if (rc < 0)
		out_fail(o, rc);
}

/* ---- SASL, connecting: peer_session (dataplane/peer_session.h) on the
 * stream, then the transport's handshake ---------------------------------- */

static void out_sasl_pump(struct qt_out *o);

static void out_sasl_failed(struct qt_out *o, const char *why)
{
	struct qt_counters *c = o->t->ops->counters;

	if (c) {
		c->sasl[1][1]++;
		if (rate_ok(&c->sasl_logged_ms, &c->sasl_unlogged, uv_now(o->t->loop))) {
			slog(SLOG_WARN, "controller port: SASL authentication to %s as %s failed: %s (%llu more "
				"not logged)", o->host, o->t->ops->sasl->login.user, why,
				(unsigned long long)c->sasl_unlogged);
			c->sasl_unlogged = 0;
		}
	}
	out_fail(o, -EACCES);
}

static void out_sasl_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct qt_out *o = h->data;
	uint32_t cap = 0;

	(void)suggested;
	buf->base = (char *)peer_session_rx(o->ps, &cap);
	buf->len = cap;
}

static void out_sasl_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct qt_out *o = s->data;

	(void)buf;
	if (n == 0 || o->aborted)
		return;
	if (n < 0) {
		out_sasl_failed(o, "the connection closed during the SASL exchange");
		return;
	}
	if (peer_session_feed(o->ps, (uint32_t)n) < 0) {
		out_sasl_failed(o, peer_session_error(o->ps));
		return;
	}
	out_sasl_pump(o);
}

static void out_sasl_written(uv_write_t *w, int status)
{
	struct qt_out *o = w->data;

	o->sasl_writing = 0;
	if (o->aborted)
		return;
	if (status < 0) {
		out_fail(o, status);
		return;
	}
	peer_session_sent(o->ps, o->sasl_wlen);
	out_sasl_pump(o);
}

static void out_sasl_pump(struct qt_out *o)
{
	const uint8_t *b;
	uint32_t len;
	int rc = peer_session_step(o->ps);

	if (rc < 0) {
		out_sasl_failed(o, peer_session_error(o->ps));
		return;
	}
	if (!o->sasl_writing && (len = peer_session_tx(o->ps, &b)) > 0) {
		uv_buf_t ub = uv_buf_init((char *)(uintptr_t)b, len);

		o->wr.data = o;
		o->sasl_wlen = len;
		if (uv_write(&o->wr, o->tcp, &ub, 1, out_sasl_written) < 0) {
			out_fail(o, -EIO);
			return;
		}
		o->sasl_writing = 1;
		return;
	}
	if (rc == 1 && !o->sasl_writing) {   /* authenticated: nothing more of SASL comes */
		uv_read_stop(o->tcp);
		peer_session_destroy(o->ps);
		o->ps = NULL;
		if (o->t->ops->counters)
			o->t->ops->counters->sasl[1][0]++;
		out_send_handshake(o);
		return;
	}
	if (!o->sasl_reading) {
		if (uv_read_start(o->tcp, out_sasl_alloc, out_sasl_read) < 0) {
			out_fail(o, -EIO);
			return;
		}
		o->sasl_reading = 1;
	}
}

/* SASL first (a SASL controller listener), then the transport's handshake. */
static void out_ready(struct qt_out *o)
{
	if (!o->t->ops || !o->t->ops->sasl) {
		out_send_handshake(o);
		return;
	}
	if (!(o->ps = peer_session_create(&o->t->ops->sasl->login, o->host))) {
		out_fail(o, -ENOMEM);
		return;
	}
	o->tcp->data = o;
	out_sasl_pump(o);
}

/* TLS: the tunnel's handshake is over (0) or failed (logged, counted). */
static void out_tls_ready(void *arg, int status)
{
	struct qt_out *o = arg;

	o->tun = NULL;
	if (o->aborted)
		return;
	if (status < 0) {
		out_fail(o, -ECONNREFUSED);
		return;
	}
	out_ready(o);
}

static void out_connected(uv_connect_t *c, int status)
{
	struct qt_out *o = c->data;
	struct qt *t = o->t;
	uv_tcp_t *tcp = (uv_tcp_t *)o->tcp;
	struct qtls *tun;
	uv_stream_t *s;

	if (o->aborted)
		return;
	if (status < 0) {
		out_fail(o, status);
		return;
	}
	if (!t->ops || !t->ops->sec) {
		out_ready(o);
		return;
	}
	/* TLS: the tunnel takes the socket; o goes on with its inner end
	 * once the handshake is over */
	o->tcp = NULL;
	if (tun_open(t, tcp, o->host, out_tls_ready, o, &s, &tun) < 0) {
		o->status = -ENOMEM;
		out_finish(o, NULL);
		return;
	}
	o->tcp = s;
	s->data = o;
	o->tun = tun;
	qtls_go(tun);
}

static void out_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
	struct qt_out *o = g->data;
	struct qt *t = o->t;
	uv_tcp_t *tcp;
	int rc;

	o->resolving = 0;
	if (o->aborted || t->closing || status < 0 || !res) {
		if (res)
			uv_freeaddrinfo(res);
		if (!o->status)
			o->status = status < 0 ? status : -ECANCELED;
		out_finish(o, NULL);
		return;
	}
	tcp = raft_malloc(sizeof(*tcp));
	if (!tcp) {
		uv_freeaddrinfo(res);
		o->status = -ENOMEM;
		out_finish(o, NULL);
		return;
	}
	uv_tcp_init(t->loop, tcp);
	o->tcp = (uv_stream_t *)tcp;
	tcp->data = o;
	o->conn.data = o;
	uv_tcp_nodelay(tcp, 1);
	rc = uv_tcp_connect(&o->conn, tcp, res->ai_addr, out_connected);
	uv_freeaddrinfo(res);
	if (rc < 0)
		out_fail(o, rc);
}

/* Start a connect with the handshake hs (raft_malloc'ed, taken). */
static int out_start(struct qt *t, const char *address, uv_buf_t hs, struct qt_out **out)
{
	static const struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	char host[QT_ADDRESS_MAX], port[16];
	struct qt_out *o;
	int rc;

	if (qt_split(address, host, sizeof(host), port, sizeof(port)) < 0) {
		raft_free(hs.base);
		return -EINVAL;
	}
	if (!(o = calloc(1, sizeof(*o)))) {
		raft_free(hs.base);
		return -ENOMEM;
	}
	o->t = t;
	o->hs = hs;
	snprintf(o->host, sizeof(o->host), "%s", host);
	o->gai.data = o;
	rc = uv_getaddrinfo(t->loop, &o->gai, out_resolved, host, port, &hints);
	if (rc < 0) {
		raft_free(hs.base);
		free(o);
		return rc;
	}
	o->resolving = 1;
	o->started = uv_now(t->loop);
	o->next = t->out;
	if (t->out)
		t->out->prev = o;
	t->out = o;
	*out = o;
	sweep_start(t);
	return 0;
}

static int qt_connect(struct raft_uv_transport *tr, struct raft_uv_connect *req, raft_id id, const char *address,
		      raft_uv_connect_cb cb)
{
	struct qt *t = tr->impl;
	size_t alen = (strlen(t->address) + 1 + 7) / 8 * 8;
	uv_buf_t hs = { .len = 24 + alen };
	struct qt_out *o;
	uint64_t *u;
	int rc;

	(void)id;
	if (t->closing)
		return RAFT_CANCELED;
	if (!(hs.base = raft_calloc(1, hs.len)))
		return RAFT_NOMEM;
	u = (uint64_t *)(void *)hs.base;
	u[0] = htole64(QT_RAFT_PROTOCOL);
	u[1] = htole64(t->id);
	u[2] = htole64(alen);
	memcpy(hs.base + 24, t->address, strlen(t->address));
	req->cb = cb;
	rc = out_start(t, address, hs, &o);
	if (rc < 0) {
		snprintf(tr->errmsg, sizeof(tr->errmsg), "connect to %.200s: %s", address,
			 rc == -EINVAL ? "not HOST:PORT" : uv_strerror(rc));
		return rc == -ENOMEM ? RAFT_NOMEM : RAFT_NOCONNECTION;
	}
	o->req = req;
	return 0;
}

int qt_channel_connect(struct raft_uv_transport *tr, const char *address, int32_t from, qt_connect_fn done, void *arg)
{
	struct qt *t = tr->impl;
	uv_buf_t hs = { .len = 16 };
	struct qt_out *o;
	uint64_t *u;
	int rc;

	if (!t || t->closing)
		return -ESHUTDOWN;
	if (!(hs.base = raft_calloc(1, hs.len)))
		return -ENOMEM;
	u = (uint64_t *)(void *)hs.base;
	u[0] = htole64(QT_CHANNEL_MAGIC);
	u[1] = htole64((uint64_t)(int64_t)from);
	rc = out_start(t, address, hs, &o);
	if (rc < 0)
		return rc;
	o->done = done;
	o->arg = arg;
	return 0;
}

/* ---- the set-up deadline ---------------------------------------------- */

static void timed_out(struct qt *t, int made, const char *peer)
{
	struct qt_counters *c = t->ops ? t->ops->counters : NULL;
	uint64_t now = uv_now(t->loop);

	if (!c)
		return;
	c->timeouts[made]++;
	if (c->logged_ms && now - c->logged_ms < 5000) {
		c->unlogged++;
		return;
	}
	slog(SLOG_WARN, "controller port: the connection %s %s was not set up within %u ms (%s "
		"handshake): closed (%llu more not logged)", made ? "to" : "from", peer, QT_SETUP_DEADLINE_MS,
		t->ops->sec ? "TLS or transport" : "transport", (unsigned long long)c->unlogged);
	c->logged_ms = now;
	c->unlogged = 0;
}

/* The sessions whose lifetime is over: their sockets shut down both
 * ways (the stream's owner reads its end and closes it; the other side
 * connects again), counted, the first each 5 s logged. A descriptor that
 * no longer names its socket was closed by its owner: forgotten. */
static void sess_sweep(struct qt *t, uint64_t now)
{
	struct qt_counters *c = t->ops ? t->ops->counters : NULL;

	for (struct qt_sess **pp = &t->sess, *e; (e = *pp);) {
		struct stat st;

		if (fstat(e->fd, &st) == 0 && st.st_dev == e->dev && st.st_ino == e->ino) {
			if (now < e->end_at) {
				pp = &e->next;
				continue;
			}
			shutdown(e->fd, SHUT_RDWR);
			if (c) {
				c->sessions_ended++;
				if (rate_ok(&c->ended_logged_ms, &c->ended_unlogged, now)) {
					slog(SLOG_WARN, "controller port: the SASL session of %s is over "
						"(connections.max.reauth.ms %lld): closed, it connects and authenticates "
						"again (%llu more not logged)", e->peer,
						(long long)t->ops->sasl->lifetime_ms, (unsigned long long)c->ended_unlogged);
					c->ended_unlogged = 0;
				}
			}
		}
		*pp = e->next;
		free(e);
	}
}

static void sess_free(struct qt *t)
{
	while (t->sess) {
		struct qt_sess *e = t->sess;

		t->sess = e->next;
		free(e);
	}
}

static void sweep(uv_timer_t *timer)
{
	struct qt *t = timer->data;
	uint64_t now = uv_now(t->loop);

	if (t->closing)
		return;
	for (struct qt_in *in = t->in; in; in = in->next) {
		if (in->closing)
			continue;
		if (in->fail_at) {   /* SASL refused: closed once the delay is over */
			if (now < in->fail_at)
				continue;
			if (in->tun)
				qtls_abort(in->tun);
			in_abort(in);
			continue;
		}
		if (now - in->started < QT_SETUP_DEADLINE_MS)
			continue;
		timed_out(t, 0, in->peer);
		if (in->tun)
			qtls_abort(in->tun);   /* before its handshake it does not see the inner end close */
		in_abort(in);                  /* in stays listed until its close callback */
	}
	for (struct qt_out *o = t->out; o; o = o->next) {
		if (o->aborted || now - o->started < QT_SETUP_DEADLINE_MS)
			continue;
		timed_out(t, 1, o->host);
		o->status = -ETIMEDOUT;
		if (o->tun)
			qtls_abort(o->tun);   /* its ready (-ECANCELED) fails o, which stays listed */
		else
			out_fail(o, -ETIMEDOUT);   /* o stays listed until its callback */
	}
	sess_sweep(t, now);
	if (!t->in && !t->out && !t->sess)
		uv_timer_stop(&t->sweep);
}

/* Run the sweep while connections are in their set-up, or sessions with
 * an end are open. */
static void sweep_start(struct qt *t)
{
	if (!t->sweep_open) {
		uv_timer_init(t->loop, &t->sweep);
		t->sweep.data = t;
		t->sweep_open = 1;
	}
	if (!uv_is_active((uv_handle_t *)&t->sweep))
		uv_timer_start(&t->sweep, sweep, QT_SWEEP_MS, QT_SWEEP_MS);
}

/* ---- the transport's methods ------------------------------------------- */

static int qt_tr_init(struct raft_uv_transport *tr, raft_id id, const char *address)
{
	struct qt *t = tr->impl;

	if (strlen(address) >= sizeof(t->address))
		return RAFT_INVALID;
	t->id = id;
	snprintf(t->address, sizeof(t->address), "%s", address);
	return 0;
}

static void listener_closed(uv_handle_t *h)
{
	struct qt *t = h->data;

	t->closes--;
	qt_maybe_closed(t);
}

static int qt_tr_listen(struct raft_uv_transport *tr, raft_uv_accept_cb cb)
{
	static const struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
					       .ai_flags = AI_PASSIVE };
	struct qt *t = tr->impl;
	char host[QT_ADDRESS_MAX], port[16];
	struct addrinfo *ai = NULL;
	int rc;

	t->accept_cb = cb;
	if (qt_split(t->address, host, sizeof(host), port, sizeof(port)) < 0) {
		snprintf(tr->errmsg, sizeof(tr->errmsg), "%.200s is not HOST:PORT", t->address);
		return RAFT_INVALID;
	}
	/* start-up only (raft_start): a blocking resolve is fine here */
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0 || !ai) {
		snprintf(tr->errmsg, sizeof(tr->errmsg), "cannot resolve %.200s: %s", t->address, gai_strerror(rc));
		return RAFT_IOERR;
	}
	uv_tcp_init(t->loop, &t->listener);
	t->listener.data = t;
	t->listener_open = 1;
	rc = uv_tcp_bind(&t->listener, ai->ai_addr, 0);
	freeaddrinfo(ai);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&t->listener, QT_BACKLOG, qt_listen_cb);
	if (rc < 0) {
		snprintf(tr->errmsg, sizeof(tr->errmsg), "cannot listen on %.200s: %s", t->address, uv_strerror(rc));
		t->listen_err = rc;
		return RAFT_IOERR;
	}
	return 0;
}

int qt_listen_error(const struct raft_uv_transport *tr)
{
	const struct qt *t = tr->impl;

	return t ? t->listen_err : 0;
}

static void qt_tr_close(struct raft_uv_transport *tr, raft_uv_transport_close_cb cb)
{
	struct qt *t = tr->impl;

	t->closing = 1;
	t->close_cb = cb;
	if (t->listener_open) {
		t->listener_open = 0;
		t->closes++;
		uv_close((uv_handle_t *)&t->listener, listener_closed);
	}
	if (t->sweep_open) {
		t->sweep_open = 0;
		t->sweep.data = t;
		t->closes++;
		uv_close((uv_handle_t *)&t->sweep, listener_closed);
	}
	for (struct qt_in *in = t->in; in; in = in->next)
		in_abort(in);
	for (struct qt_out *o = t->out, *next; o; o = next) {
		next = o->next;   /* out_fail may finish o (never: it waits for a callback) */
		out_fail(o, -ECANCELED);
	}
	for (struct qtls *tun = t->tuns; tun; tun = tun->next)
		qtls_abort(tun);   /* its closed callback comes later: the list holds */
	sess_free(t);   /* the streams are their owners', closed by them */
	qt_maybe_closed(t);
}

int qt_init(struct raft_uv_transport *tr, uv_loop_t *loop, const struct qt_ops *ops)
{
	struct qt *t = calloc(1, sizeof(*t));

	if (!t)
		return RAFT_NOMEM;
	memset(tr, 0, sizeof(*tr));
	t->tr = tr;
	t->loop = loop;
	t->ops = ops;
	tr->impl = t;
	tr->init = qt_tr_init;
	tr->listen = qt_tr_listen;
	tr->connect = qt_connect;
	tr->close = qt_tr_close;
	return 0;
}

void qt_fini(struct raft_uv_transport *tr)
{
	if (tr->impl)
		sess_free(tr->impl);
	free(tr->impl);
	tr->impl = NULL;
}
