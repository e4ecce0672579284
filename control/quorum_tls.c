/* control/quorum_tls.c — a TLS tunnel between a controller-port TCP
 * connection and a socketpair (see quorum_tls.h).
 *
 * The pump, after every event: decrypt what OpenSSL has into the outer
 * end (one write in flight, from plain[]), send what OpenSSL has to send
 * (one write in flight, straight from tls_conn_tx's buffer, which stays
 * until tls_conn_sent), then read from the TCP socket only while no
 * plaintext waits for the outer end, and from the outer end only once
 * the handshake is over and no ciphertext is in flight.
 *
 * @thread ctl (the quorum's libuv loop)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <raft.h>

#include "control/quorum_tls.h"
#include "dataplane/tls.h"
#include "storage/slog.h"

#define QTLS_LOG_EVERY_MS 5000   /* one failure logged per 5 s, the rest counted */

static void pump(struct qtls *t);

static void tun_closed(uv_handle_t *h)
{
	struct qtls *t = h->data;

	if (--t->closes)
		return;
	tls_conn_free(t->tls);
	raft_free(t->tcp);
	if (t->closed)
		t->closed(t->closed_arg, t);
	free(t);
}

static void tell(struct qtls *t, int status)
{
	qtls_ready_fn ready = t->ready;

	t->ready = NULL;
	if (ready)
		ready(t->ready_arg, status);
}

static void tun_close(struct qtls *t)
{
	if (t->closing)
		return;
	t->closing = 1;
	tell(t, -ECANCELED);
	t->closes = 2;
	uv_close((uv_handle_t *)t->tcp, tun_closed);
	uv_close((uv_handle_t *)&t->outer, tun_closed);
}

/* The handshake failed or the connection ended before it was over:
 * counted, logged (at most one line per QTLS_LOG_EVERY_MS each way: the
 * connections made say why this node refused the other's certificate, the
 * accepted ones why the other side did), closed. */
static void tun_fail(struct qtls *t, const char *why)
{
	struct qtls_sec *s = t->sec;
	uint64_t now = uv_now(t->tcp->loop);

	if (t->closing)
		return;
	if (!t->up) {
		s->failures++;
		if (!s->logged_ms[t->client] || now - s->logged_ms[t->client] >= QTLS_LOG_EVERY_MS) {
			slog(SLOG_WARN, "controller port: TLS %s failed: %s (refused; %llu more not logged)",
				t->peer, why && *why ? why : "the connection closed during the handshake",
				(unsigned long long)s->unlogged[t->client]);
			s->logged_ms[t->client] = now;
			s->unlogged[t->client] = 0;
		} else {
			s->unlogged[t->client]++;
		}
		tell(t, -EPROTO);
	}
	tun_close(t);
}

static void tcp_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct qtls *t = h->data;

	(void)suggested;
	buf->base = (char *)tls_conn_rx(t->tls);
	buf->len = TLS_RX_SIZE;
}

static void tcp_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct qtls *t = s->data;

	(void)buf;
	if (n == 0 || t->closing)
		return;
	if (n < 0) {
		if (!t->up) {
			tun_fail(t, NULL);
			return;
		}
		t->tcp_eof = 1;
		uv_read_stop(s);
		t->tcp_reading = 0;
		pump(t);
		return;
	}
	if (tls_conn_feed(t->tls, (uint32_t)n) < 0) {
		tun_fail(t, "out of memory");
		return;
	}
	pump(t);
}

static void outer_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct qtls *t = h->data;

	(void)suggested;
	buf->base = (char *)t->in;
	buf->len = sizeof(t->in);
}

static void outer_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct qtls *t = s->data;
	struct iovec v = { t->in, (size_t)(n > 0 ? n : 0) };
	struct msghdr msg = { .msg_iov = &v, .msg_iovlen = 1 };
	size_t left = v.iov_len;

	(void)buf;
	if (n == 0 || t->closing)
		return;
	if (n < 0) {   /* the inner end closed: its owner is done */
		tun_close(t);
		return;
	}
	while (left)
		if (tls_conn_write(t->tls, &msg, &left, left) <= 0) {
			slog(SLOG_WARN, "controller port: TLS %s: %s", t->peer, tls_conn_error(t->tls));
			tun_close(t);
			return;
		}
	pump(t);
}

static void outer_written(uv_write_t *w, int status)
{
	struct qtls *t = w->data;

	t->outer_writing = 0;
	if (t->closing)
		return;
	if (status < 0) {
		tun_close(t);
		return;
	}
	pump(t);
}

static void tcp_written(uv_write_t *w, int status)
{
	struct qtls *t = w->data;

	t->tcp_writing = 0;
	if (t->closing)
		return;
	if (status < 0) {
		tun_fail(t, uv_strerror(status));
		return;
	}
	tls_conn_sent(t->tls, t->tcp_wlen);
	pump(t);
}

static void pump(struct qtls *t)
{
	const uint8_t *c;
	uint32_t len;
	int n;

	/* 1. plaintext out of OpenSSL (the handshake goes on in here) */
	while (!t->closing && !t->outer_writing) {
		uv_buf_t b;

		n = tls_conn_read(t->tls, t->plain, sizeof(t->plain));
		if (!t->up && tls_conn_established(t->tls)) {
			t->up = 1;
			t->sec->handshakes++;
			tell(t, 0);
			if (t->closing)
				return;
		}
		if (n == 0)
			break;
		if (n < 0) {
			if (n == -EPIPE && t->up) {
				t->tcp_eof = 1;   /* close_notify: done */
				break;
			}
			tun_fail(t, n == -EPIPE ? "the other side closed the TLS session" : tls_conn_error(t->tls));
			if (t->up)
				slog(SLOG_WARN, "controller port: TLS %s: %s", t->peer, tls_conn_error(t->tls));
			return;
		}
		b = uv_buf_init((char *)t->plain, (unsigned)n);
		t->outer_wr.data = t;
		if (uv_write(&t->outer_wr, (uv_stream_t *)&t->outer, &b, 1, outer_written) < 0) {
			tun_close(t);
			return;
		}
		t->outer_writing = 1;
	}
	/* 2. ciphertext to the peer */
	if (!t->tcp_writing && (len = tls_conn_tx(t->tls, &c)) > 0) {
		uv_buf_t b = uv_buf_init((char *)(uintptr_t)c, len);

		t->tcp_wr.data = t;
		if (uv_write(&t->tcp_wr, (uv_stream_t *)t->tcp, &b, 1, tcp_written) < 0) {
			tun_fail(t, "a write to the socket failed");
			return;
		}
		t->tcp_writing = 1;
		t->tcp_wlen = len;
	}
	/* 3. the peer is gone and everything it sent is passed on */
	if (t->tcp_eof && !t->outer_writing) {
		tun_close(t);
		return;
	}
	/* 4. reading: each side only while the other's write is done */
	if (!t->tcp_eof && !t->outer_writing && !t->tcp_reading) {
		if (uv_read_start((uv_stream_t *)t->tcp, tcp_alloc, tcp_read) < 0) {
			tun_fail(t, "cannot read the socket");
			return;
		}
		t->tcp_reading = 1;
	} else if ((t->tcp_eof || t->outer_writing) && t->tcp_reading) {
		uv_read_stop((uv_stream_t *)t->tcp);
		t->tcp_reading = 0;
	}
	if (t->up && !t->tcp_writing && !t->outer_reading) {
		if (uv_read_start((uv_stream_t *)&t->outer, outer_alloc, outer_read) < 0) {
			tun_close(t);
			return;
		}
		t->outer_reading = 1;
	} else if (t->tcp_writing && t->outer_reading) {
		uv_read_stop((uv_stream_t *)&t->outer);
		t->outer_reading = 0;
	}
}

/* qtls_start's own failure: the handles never carried anything */
static void free_inner(uv_handle_t *h)
{
	raft_free(h);
}

static void free_unstarted(uv_handle_t *h)
{
	free(h->data);
}

int qtls_start(struct qtls_sec *sec, uv_loop_t *loop, uv_tcp_t *tcp, const char *host, const char *peer,
	       qtls_ready_fn ready, void *ready_arg, qtls_closed_fn closed, void *closed_arg, uv_stream_t **inner,
	       struct qtls **out)
{
	struct qtls *t;
	uv_pipe_t *in;
	int fds[2], rc;

	*out = NULL;
	*inner = NULL;
	if (!(t = calloc(1, sizeof(*t))))
		return -ENOMEM;
	if (!(in = raft_malloc(sizeof(*in)))) {
		free(t);
		return -ENOMEM;
	}
	t->tls = host ? tls_conn_new_client(sec->client, host) : tls_conn_new(sec->server);
	if (!t->tls) {
		raft_free(in);
		free(t);
		return -ENOMEM;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) < 0) {
		rc = -errno;
		tls_conn_free(t->tls);
		raft_free(in);
		free(t);
		return rc;
	}
	uv_pipe_init(loop, in, 0);
	uv_pipe_init(loop, &t->outer, 0);
	t->outer.data = t;
	if ((rc = uv_pipe_open(in, fds[0])) < 0 || (rc = uv_pipe_open(&t->outer, fds[1])) < 0) {
		close(fds[0]);
		close(fds[1]);
		tls_conn_free(t->tls);
		uv_close((uv_handle_t *)in, free_inner);
		uv_close((uv_handle_t *)&t->outer, free_unstarted);
		return rc;
	}
	t->sec = sec;
	t->client = host != NULL;
	t->tcp = tcp;
	tcp->data = t;
	t->outer.data = t;
	in->data = NULL;
	snprintf(t->peer, sizeof(t->peer), "%s %s", host ? "to" : "from", peer);
	t->ready = ready;
	t->ready_arg = ready_arg;
	t->closed = closed;
	t->closed_arg = closed_arg;
	*inner = (uv_stream_t *)in;
	*out = t;
	return 0;
}

void qtls_go(struct qtls *t)
{
	pump(t);   /* a client's ClientHello; the server starts reading */
}

void qtls_detach(struct qtls *t)
{
	t->ready = NULL;
}

void qtls_abort(struct qtls *t)
{
	tun_close(t);
}
