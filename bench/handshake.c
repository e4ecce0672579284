/* bench/handshake.c — the handshake-rate client (bench/handshake.h).
 *
 * Each thread loops until the deadline: a blocking connect to 127.0.0.1,
 * SSL_connect on a fresh SSL (no session kept, so every handshake is a
 * full one), for SASL SaslHandshake "SCRAM-SHA-512" and the two
 * SaslAuthenticate rounds with the server's signature checked, then
 * ApiVersions v0 and its answer (error code 0), then close with SO_LINGER
 * 0 (an RST: no TIME_WAIT, so thousands of connections a second do not
 * run out of ephemeral ports). Thread: see the header.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/handshake.h"
#include "dataplane/scram_client.h"

#define MAX_THREADS 64

SSL_CTX *handshake_ctx(const char *ca_file)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
		fprintf(stderr, "handshake: client context with CA %s: %s\n", ca_file,
			ERR_reason_error_string(ERR_get_error()));
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	return ctx;
}

struct conn {
	int fd;
	SSL *ssl;
	int32_t corr;
};

static int io_all(struct conn *c, void *buf, size_t len, int wr)
{
	uint8_t *p = buf;

	while (len) {
		int n;

		if (c->ssl)
			n = wr ? SSL_write(c->ssl, p, (int)len) : SSL_read(c->ssl, p, (int)len);
		else
			n = (int)(wr ? write(c->fd, p, len) : read(c->fd, p, len));
		if (n <= 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One request (header v1, client id "hs") with body, and its response
 * body (after the correlation id) into resp; its length or -errno. */
static int rpc(struct conn *c, int16_t key, int16_t ver, const uint8_t *body, size_t blen, uint8_t *resp,
	       size_t cap)
{
	uint8_t req[1200], hdr[8];
	size_t n = 4;
	uint32_t len;

	if (blen + 16 > sizeof(req))
		return -EINVAL;
	be16(req + n, (uint16_t)key);
	be16(req + n + 2, (uint16_t)ver);
	be32(req + n + 4, (uint32_t)++c->corr);
	be16(req + n + 8, 2);
	memcpy(req + n + 10, "hs", 2);
	n += 12;
	memcpy(req + n, body, blen);
	n += blen;
	be32(req, (uint32_t)(n - 4));
	if (io_all(c, req, n, 1) < 0 || io_all(c, hdr, 8, 0) < 0)
		return -EIO;
	len = ld32(hdr);
	if (len < 4 || len - 4 > cap || (int32_t)ld32(hdr + 4) != c->corr)
		return -EPROTO;
	if (io_all(c, resp, len - 4, 0) < 0)
		return -EIO;
	return (int)(len - 4);
}

/* SaslAuthenticate v0: auth bytes out, the server's auth bytes back. */
static int sasl_step(struct conn *c, const char *msg, size_t len, char *out, size_t cap, size_t *outlen)
{
	uint8_t body[1100], resp[1200];
	int n;
	size_t off;
	int16_t em;

	if (len + 4 > sizeof(body))
		return -EINVAL;
	be32(body, (uint32_t)len);
	memcpy(body + 4, msg, len);
	n = rpc(c, 36, 0, body, len + 4, resp, sizeof(resp));
	if (n < 8 || resp[0] || resp[1])
		return n < 0 ? n : -EACCES;
	em = (int16_t)(resp[2] << 8 | resp[3]);
	off = 4 + (em > 0 ? (size_t)em : 0);
	if (off + 4 > (size_t)n || ld32(resp + off) > (size_t)n - off - 4 || ld32(resp + off) >= cap)
		return -EPROTO;
	*outlen = ld32(resp + off);
	memcpy(out, resp + off + 4, *outlen);
	out[*outlen] = 0;
	return 0;
}

static int scram_login(struct conn *c, const char *user, const char *password)
{
	static const char mech[] = "SCRAM-SHA-512";
	uint8_t body[64], resp[256];
	char msg[1024], in[1024], why[128];
	size_t n, inlen;
	struct scram_client sc;
	int rc;

	be16(body, sizeof(mech) - 1);
	memcpy(body + 2, mech, sizeof(mech) - 1);
	rc = rpc(c, 17, 1, body, 2 + sizeof(mech) - 1, resp, sizeof(resp));
	if (rc < 2 || resp[0] || resp[1])
		return rc < 0 ? rc : -EPROTO;
	if ((rc = scram_client_first(&sc, SASL_SCRAM_SHA_512, user, NULL, msg, sizeof(msg), &n)) < 0)
		return rc;
	if (!(rc = sasl_step(c, msg, n, in, sizeof(in), &inlen)) &&
	    !(rc = scram_client_final(&sc, password, strlen(password), in, inlen, msg, sizeof(msg), &n, why,
				      sizeof(why))) &&
	    !(rc = sasl_step(c, msg, n, in, sizeof(in), &inlen)))
		rc = scram_client_verify(&sc, in, inlen, why, sizeof(why));
	scram_client_fini(&sc);
	return rc;
}

struct worker {
	pthread_t tid;
	const struct handshake_target *t;
	uint64_t deadline;
	uint64_t conns, errors;
	char cipher[64], version[16], first_error[200];
};

static int one_conn(struct worker *w)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)w->t->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct conn c = { .fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) };
	uint8_t resp[4096];
	const char *what = "connect";
	int one = 1, rc = -EIO;

	if (c.fd < 0)
		return -errno;
	setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c.fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		goto out;
	if (w->t->ctx) {
		what = "TLS handshake";
		if (!(c.ssl = SSL_new(w->t->ctx)) || !SSL_set_fd(c.ssl, c.fd) ||
		    !SSL_set1_host(c.ssl, "127.0.0.1") || SSL_connect(c.ssl) != 1)
			goto out;
		snprintf(w->cipher, sizeof(w->cipher), "%s", SSL_get_cipher_name(c.ssl));
		snprintf(w->version, sizeof(w->version), "%s", SSL_get_version(c.ssl));
	}
	if (w->t->user) {
		what = "SCRAM-SHA-512 login";
		if ((rc = scram_login(&c, w->t->user, w->t->password)) < 0)
			goto out;
	}
	what = "ApiVersions";
	rc = rpc(&c, 18, 0, NULL, 0, resp, sizeof(resp));
	rc = rc < 2 ? (rc < 0 ? rc : -EPROTO) : resp[0] || resp[1] ? -EPROTO : 0;
out:
	if (rc < 0 && !w->first_error[0])
		snprintf(w->first_error, sizeof(w->first_error), "%s: %s%s%s", what, strerror(-rc),
			 c.ssl ? ", " : "", c.ssl ? ERR_reason_error_string(ERR_peek_error()) ?: "" : "");
	ERR_clear_error();
	if (c.ssl) {
		if (!rc)
			SSL_shutdown(c.ssl);
		SSL_free(c.ssl);
	}
	setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(c.fd);
	return rc;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	while (bench_now_ns() < w->deadline) {
		if (one_conn(w) == 0)
			w->conns++;
		else if (++w->errors > 1000 && !w->conns)
			break;
	}
	return NULL;
}

int handshake_run(const struct handshake_target *t, int nthreads, double seconds, struct handshake_result *r)
{
	static struct worker w[MAX_THREADS];
	uint64_t t0 = bench_now_ns();
	int started = 0;

	memset(r, 0, sizeof(*r));
	if (nthreads < 1 || nthreads > MAX_THREADS)
		return -EINVAL;
	for (int i = 0; i < nthreads; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].t = t;
		w[i].deadline = t0 + (uint64_t)(seconds * 1e9);
		if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]))
			break;
		started++;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(w[i].tid, NULL);
		r->conns += w[i].conns;
		r->errors += w[i].errors;
		if (w[i].cipher[0])
			snprintf(r->cipher, sizeof(r->cipher), "%s", w[i].cipher);
		if (w[i].version[0])
			snprintf(r->version, sizeof(r->version), "%s", w[i].version);
		if (!r->first_error[0] && w[i].first_error[0])
			snprintf(r->first_error, sizeof(r->first_error), "%s", w[i].first_error);
	}
	r->seconds = (double)(bench_now_ns() - t0) / 1e9;
	return started && r->conns ? 0 : -EIO;
}
