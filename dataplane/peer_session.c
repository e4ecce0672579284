/* dataplane/peer_session.c — TLS and SASL on a connection to another
 * broker (see dataplane/peer_session.h). @thread the connection's */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "dataplane/kafka/kafka_codec.h"
#include "dataplane/kafka/kafka_msgs.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/peer_session.h"
#include "dataplane/tls.h"

#define SASL_HANDSHAKE_KEY 17
#define SASL_AUTHENTICATE_KEY 36
#define SASL_AUTHENTICATE_VERSION 2

struct peer_session *peer_session_create(const struct peer_sec *sec, const char *host)
{
	struct peer_session *s = calloc(1, sizeof(*s)); /* style: allow per connection made */

	if (!s)
		return NULL;
	s->sec = sec;
	if (sec->tls && !(s->tls = tls_conn_new_client(sec->tls_client, host))) {
		free(s);
		return NULL;
	}
	if (sec->sasl)
		sasl_client_init(&s->sasl, sec->mech, sec->user, sec->password);
	s->state = sec->tls ? PEER_SESSION_TLS : PEER_SESSION_SASL_START;
	return s;
}

void peer_session_destroy(struct peer_session *s)
{
	if (!s)
		return;
	tls_conn_free(s->tls);
	sasl_client_fini(&s->sasl);
	free(s);
}

static int failed(struct peer_session *s, int rc, const char *why)
{
	if (s->state != PEER_SESSION_FAILED)
		snprintf(s->error, sizeof(s->error), "%.199s", why);
	s->state = PEER_SESSION_FAILED;
	return rc;
}

uint8_t *peer_session_rx(struct peer_session *s, uint32_t *cap)
{
	if (s->tls) {
		*cap = TLS_RX_SIZE;
		return tls_conn_rx(s->tls);
	}
	*cap = (uint32_t)sizeof(s->in) - s->in_len;
	return s->in + s->in_len;
}

int peer_session_feed(struct peer_session *s, uint32_t n)
{
	if (s->tls)
		return tls_conn_feed(s->tls, n) < 0 ? failed(s, -EPROTO, "out of memory") : 0;
	s->in_len += n;
	return 0;
}

/* A SASL request frame, out in plaintext (encrypted with TLS). */
static int send_frame(struct peer_session *s, int16_t key, int16_t version, void *body)
{
	struct kafka_request req;
	struct kafka_writer w;
	uint8_t frame[PEER_SESSION_FRAME_MAX];

	memset(&req, 0, sizeof(req));
	req.api = kafka_api_find(key);
	req.header.RequestApiKey = key;
	req.header.RequestApiVersion = version;
	req.header.CorrelationId = ++s->corr;
	req.header.ClientId = (struct kafka_str){ "sluice-broker", 13 };
	req.header_version = kafka_request_header_version(req.api, version);
	req.body = body;
	kafka_writer_init(&w, frame, sizeof(frame));
	if (!req.api || kafka_request_encode(&w, &req) < 0 || w.len > sizeof(frame))
		return failed(s, -EPROTO, "a SASL request that does not encode");
	if (s->tls)
		return peer_session_write(s, frame, (uint32_t)w.len) < 0 ? -EPROTO : 0;
	if (s->out_len + w.len > sizeof(s->out))
		return failed(s, -EPROTO, "SASL frames pile up");
	memcpy(s->out + s->out_len, frame, w.len);
	s->out_len += (uint32_t)w.len;
	return 0;
}

/* The answer in s->in, once whole: decoded into resp (its arena in mem).
 * 1 taken, 0 not whole yet, -EPROTO. */
static int take_answer(struct peer_session *s, int16_t key, int16_t version, uint8_t *mem, size_t cap,
		       struct kafka_response *resp)
{
	struct kafka_arena a;
	uint32_t len;

	if (s->in_len < 4)
		return 0;
	len = (uint32_t)kafka_load_be(s->in, 4);
	if (len > sizeof(s->in) - 4)
		return failed(s, -EPROTO, "an overlong SASL answer");
	if (s->in_len < len + 4)
		return 0;
	kafka_arena_init(&a, mem, cap);
	if (kafka_response_decode(s->in + 4, len, key, version, &a, resp) < 0 || resp->header.CorrelationId != s->corr)
		return failed(s, -EPROTO, "a SASL answer that does not decode");
	/* nothing else comes unasked: the frame is all of it */
	s->in_len -= len + 4;
	memmove(s->in, s->in + len + 4, s->in_len);
	return 1;
}

static int send_token(struct peer_session *s, const uint8_t *in, size_t len)
{
	struct kafka_sasl_authenticate_request q;
	uint8_t tok[1024];
	char why[160];
	size_t n;
	int rc;

	rc = sasl_client_step(&s->sasl, in, len, tok, sizeof(tok), &n, why, sizeof(why));
	if (rc < 0)
		return failed(s, rc, why);
	if (rc == 0) {
		s->state = PEER_SESSION_READY;
		return 0;
	}
	kafka_sasl_authenticate_request_init(&q);
	q.AuthBytes = (struct kafka_bytes){ tok, (int32_t)n };
	s->state = PEER_SESSION_SASL_AUTH;
	return send_frame(s, SASL_AUTHENTICATE_KEY, SASL_AUTHENTICATE_VERSION, &q);
}

int peer_session_step(struct peer_session *s)
{
	uint8_t mem[16384];
	struct kafka_response resp;
	int rc;

	for (;;) {
		if (s->state == PEER_SESSION_FAILED)
			return -EPROTO;
		if (s->state == PEER_SESSION_READY)
			return 1;
		if (s->tls) {
			/* the handshake, then SASL's answers decrypted */
			rc = tls_conn_read(s->tls, s->in + s->in_len, (uint32_t)sizeof(s->in) - s->in_len);
			if (rc < 0)
				return failed(s, -EPROTO, rc == -EPIPE ? "the other broker closed the TLS session"
								       : tls_conn_error(s->tls));
			s->in_len += (uint32_t)rc;
			if (s->state == PEER_SESSION_TLS && tls_conn_established(s->tls))
				s->state = s->sec->sasl ? PEER_SESSION_SASL_START : PEER_SESSION_READY;
			if (s->state == PEER_SESSION_TLS)
				return 0;
		}
		switch (s->state) {
		case PEER_SESSION_READY:
			return 1;   /* SSL without SASL: the handshake was all */
		case PEER_SESSION_SASL_START: {
			struct kafka_sasl_handshake_request q;
			const char *m = sasl_mech_name(s->sec->mech);

			kafka_sasl_handshake_request_init(&q);
			q.Mechanism = (struct kafka_str){ m, (int32_t)strlen(m) };
			s->state = PEER_SESSION_SASL_HANDSHAKE;
			if (send_frame(s, SASL_HANDSHAKE_KEY, 1, &q) < 0)
				return -EPROTO;
			continue;
		}
		case PEER_SESSION_SASL_HANDSHAKE:
			if ((rc = take_answer(s, SASL_HANDSHAKE_KEY, 1, mem, sizeof(mem), &resp)) <= 0)
				return rc;
			if (((struct kafka_sasl_handshake_response *)resp.body)->ErrorCode) {
				int16_t err = ((struct kafka_sasl_handshake_response *)resp.body)->ErrorCode;
				char why[160];

				if (err == KERR_ILLEGAL_SASL_STATE)   /* KIP-368: a re-authentication refused */
					snprintf(why, sizeof(why), "SASL: the other broker refused a re-authentication "
						 "(ILLEGAL_SASL_STATE: within a second of the one before, or its "
						 "sessions never end)");
				else
					snprintf(why, sizeof(why), "SASL: the other broker's listener does not enable %s "
						 "(sasl.mechanism.inter.broker.protocol)", sasl_mech_name(s->sec->mech));
				return failed(s, -EACCES, why);
			}
			if (send_token(s, NULL, 0) < 0)
				return -EPROTO;
			continue;
		case PEER_SESSION_SASL_AUTH: {
			const struct kafka_sasl_authenticate_response *r;

			if ((rc = take_answer(s, SASL_AUTHENTICATE_KEY, SASL_AUTHENTICATE_VERSION, mem, sizeof(mem),
					      &resp)) <= 0)
				return rc;
			r = resp.body;
			if (r->ErrorCode) {
				char why[260];

				snprintf(why, sizeof(why), "SASL authentication as %.40s refused (%d): %.*s", s->sec->user,
					 r->ErrorCode, r->ErrorMessage.len > 0 ? (int)(r->ErrorMessage.len > 120 ? 120 :
					 r->ErrorMessage.len) : 0, r->ErrorMessage.ptr ? r->ErrorMessage.ptr : "");
				return failed(s, -EACCES, why);
			}
			s->lifetime_ms = r->SessionLifetimeMs > 0 ? r->SessionLifetimeMs : 0;
			if (send_token(s, r->AuthBytes.ptr, r->AuthBytes.len > 0 ? (size_t)r->AuthBytes.len : 0) < 0)
				return -EACCES;
			continue;
		}
		default:
			return failed(s, -EPROTO, "a session out of step");
		}
	}
}

int peer_session_reauth(struct peer_session *s)
{
	if (s->state != PEER_SESSION_READY || !s->sec->sasl)
		return -EINVAL;
	sasl_client_fini(&s->sasl);
	sasl_client_init(&s->sasl, s->sec->mech, s->sec->user, s->sec->password);
	s->in_len = 0;
	s->lifetime_ms = 0;
	s->state = PEER_SESSION_SASL_START;
	return 0;
}

uint32_t peer_session_tx(struct peer_session *s, const uint8_t **buf)
{
	if (s->tls)
		return tls_conn_tx(s->tls, buf);
	*buf = s->out + s->out_off;
	return s->out_len - s->out_off;
}

void peer_session_sent(struct peer_session *s, uint32_t n)
{
	if (s->tls) {
		tls_conn_sent(s->tls, n);
		return;
	}
	s->out_off += n;
	if (s->out_off == s->out_len)
		s->out_off = s->out_len = 0;
}

int peer_session_write(struct peer_session *s, const uint8_t *buf, uint32_t len)
{
	struct iovec v = { (void *)buf, len };
	struct msghdr msg = { .msg_iov = &v, .msg_iovlen = 1 };
	size_t left = len;

	while (left) {
		int n = tls_conn_write(s->tls, &msg, &left, left);

		if (n <= 0)
			return failed(s, -EPROTO, tls_conn_error(s->tls));
	}
	if (s->state == PEER_SESSION_READY)
		s->tls_out += len;
	return 0;
}

int peer_session_read(struct peer_session *s, uint8_t *buf, uint32_t cap)
{
	int n = tls_conn_read(s->tls, buf, cap);

	if (n > 0)
		s->tls_in += (uint64_t)n;
	else if (n < 0)
		failed(s, n, n == -EPIPE ? "the other broker closed the TLS session" : tls_conn_error(s->tls));
	return n;
}

const char *peer_session_error(const struct peer_session *s)
{
	return s->error;
}
