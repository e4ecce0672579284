/* control/sluicectl_client.c — a blocking Kafka client over one TCP socket,
 * framing requests with the repository's own codec; see sluicectl.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/ssl.h>

#include "control/sluicectl.h"
#include "dataplane/sasl.h"
#include "dataplane/scram_client.h"

/* One decoded response's memory: its frame and its arena. */
struct kclient_mem {
	struct kclient_mem *next;
	uint8_t *frame;
	uint8_t *arena;
};

/* Wait until fd is ready for events or the deadline passes. With a
 * label (kclient.waiting) and a terminal on stderr, a long wait shows how
 * long it has lasted, once a second: one request can be long work (a topic
 * of 10,000 partitions deleted). */
static int wait_fd_label(int fd, short events, int64_t deadline, const char *label)
{
	int64_t start = mono_ms(), shown = 0;
	int tty = label && isatty(2);

	for (;;) {
		int64_t now = mono_ms();
		int rc = ctl_wait_fd(fd, events, tty && deadline - now > 1000 ? now + 1000 : deadline);

		if (rc == 0 && shown)
			fprintf(stderr, "\r%s: done after %lld s\n", label, (long long)((mono_ms() - start) / 1000));
		if (rc != -ETIMEDOUT || mono_ms() >= deadline) {
			if (rc < 0 && shown)
				fprintf(stderr, "\n");
			return rc;
		}
		if (mono_ms() - start >= 1000) {
			shown = 1;
			fprintf(stderr, "\r%s: waiting for the broker, %lld s", label,
				(long long)((mono_ms() - start) / 1000));
		}
	}
}

static int wait_fd(int fd, short events, int64_t deadline)
{
	return wait_fd_label(fd, events, deadline, NULL);
}

static int connect_addr(struct kclient *k, const struct addrinfo *ai, int64_t deadline)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	int one = 1, rc, soerr = 0;
	socklen_t sl = sizeof soerr;

	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		rc = -errno;
		close(fd);
		return rc;
	}
	rc = wait_fd(fd, POLLOUT, deadline);
	if (!rc && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		rc = -errno;
	if (!rc && soerr)
		rc = -soerr;
	if (rc) {
		close(fd);
		return rc;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	k->fd = fd;
	return 0;
}

static int send_all(struct kclient *k, const uint8_t *p, size_t n)
{
	int64_t deadline = mono_ms() + k->timeout_ms;

	while (n) {
		ssize_t w;

		if (k->ssl) {
			int rc = SSL_write(k->ssl, p, (int)(n > (1u << 30) ? 1u << 30 : n));

			if (rc <= 0) {
				rc = ctl_sec_wait(k->ssl, k->fd, rc, deadline);
				if (rc)
					return rc;
				continue;
			}
			w = rc;
			p += w;
			n -= (size_t)w;
			continue;
		}
		w = send(k->fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			int rc = wait_fd(k->fd, POLLOUT, deadline);

			if (rc)
				return rc;
			continue;
		}
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int recv_all(struct kclient *k, uint8_t *p, size_t n, int64_t deadline)
{
	while (n) {
		ssize_t r;

		if (k->ssl) {
			int rc = SSL_read(k->ssl, p, (int)(n > (1u << 30) ? 1u << 30 : n));

			if (rc <= 0) {
				int e = SSL_get_error(k->ssl, rc);

				/* a wait shown on a terminal, as for plaintext */
				if (e == SSL_ERROR_WANT_READ)
					rc = wait_fd_label(k->fd, POLLIN, deadline, k->waiting);
				else
					rc = ctl_sec_wait(k->ssl, k->fd, rc, deadline);
				if (rc)
					return rc;
				continue;
			}
			p += rc;
			n -= (size_t)rc;
			continue;
		}
		r = recv(k->fd, p, n, 0);

		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			int rc = wait_fd_label(k->fd, POLLIN, deadline, k->waiting);

			if (rc)
				return rc;
			continue;
		}
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ECONNRESET;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void fail_conn(struct kclient *k, int rc, const char *what)
{
	snprintf(k->err, sizeof k->err, "%s %s:%d: %s", what, k->host, k->port,
		 rc == -ETIMEDOUT ? "timed out" : strerror(-rc));
	ctl_sec_tls_close(k->ssl);
	k->ssl = NULL;
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;   /* failed until reopened (STYLE 7) */
}

int kclient_version(const struct kclient *k, int16_t api_key, int16_t want_max)
{
	const struct kafka_api *api = kafka_api_find(api_key);
	int16_t lo, hi;

	if (!api || api_key < 0 || api_key >= KCLIENT_MAX_KEY || k->vmax[api_key] < 0)
		return -ENOTSUP;
	hi = api->max_version < k->vmax[api_key] ? api->max_version : k->vmax[api_key];
	if (want_max >= 0 && want_max < hi)
		hi = want_max;
	lo = api->min_version > k->vmin[api_key] ? api->min_version : k->vmin[api_key];
	return hi >= lo ? hi : -ENOTSUP;
}

int kclient_call(struct kclient *k, int16_t api_key, int16_t version, const void *body,
		 bool no_response, void **resp)
{
	struct kafka_request req;
	struct kafka_response r;
	struct kafka_writer w;
	struct kafka_arena ar;
	struct kclient_mem *m;
	uint8_t *buf, sz[4];
	size_t len;
	int64_t deadline;
	int rc;

	*resp = NULL;
	if (k->fd < 0) {
		if (!k->err[0])
			snprintf(k->err, sizeof k->err, "not connected to %s:%d", k->host, k->port);
		return -ENOTCONN;
	}
	memset(&req, 0, sizeof req);
	req.api = kafka_api_find(api_key);
	if (!req.api)
		return -ENOTSUP;
	kafka_request_header_init(&req.header);
	req.header.RequestApiKey = api_key;
	req.header.RequestApiVersion = version;
	req.header.CorrelationId = ++k->corr;
	req.header.ClientId = (struct kafka_str){ "sluicectl", 9 };
	req.header_version = kafka_request_header_version(req.api, version);
	req.body = (void *)body;

	kafka_writer_init_measure(&w, false);
	rc = kafka_request_encode(&w, &req);
	if (rc)
		return rc;
	len = w.len;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	kafka_writer_init(&w, buf, len);
	rc = kafka_request_encode(&w, &req);
	if (!rc)
		rc = send_all(k, buf, len);
	free(buf);
	if (rc) {
		fail_conn(k, rc, "sending to");
		return rc;
	}
	if (no_response)
		return 0;

	deadline = mono_ms() + k->timeout_ms;
	rc = recv_all(k, sz, 4, deadline);
	if (rc) {
		fail_conn(k, rc, "waiting for an answer from");
		return rc;
	}
	len = kafka_load_be(sz, 4);
	if (len < 4 || len > (1u << 30)) {
		fail_conn(k, -EBADMSG, "a bad frame from");
		return -EBADMSG;
	}
	m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	m->frame = malloc(len);
	m->arena = malloc(kafka_arena_bound(len));
	m->next = k->mem;
	k->mem = m;
	if (!m->frame || !m->arena)
		return -ENOMEM;
	rc = recv_all(k, m->frame, len, deadline);
	if (rc) {
		fail_conn(k, rc, "reading an answer from");
		return rc;
	}
	kafka_arena_init(&ar, m->arena, kafka_arena_bound(len));
	rc = kafka_response_decode(m->frame, len, api_key, version, &ar, &r);
	if (rc) {
		snprintf(k->err, sizeof k->err, "%s:%d: cannot decode the %s v%d answer (%s)",
			 k->host, k->port, req.api->name, version, strerror(-rc));
		return rc;
	}
	if (r.header.CorrelationId != req.header.CorrelationId) {
		fail_conn(k, -EBADMSG, "an answer out of order from");
		return -EBADMSG;
	}
	*resp = r.body;
	return 0;
}

/* SaslHandshake v1 and SaslAuthenticate (PLAIN: one token; SCRAM:
 * client-first, client-final, and the server's signature checked).
 * 0, or -EACCES / -errno with k->err. */
static int sasl_login(struct kclient *k, const struct ctl_sec *sec)
{
	struct kafka_sasl_handshake_request hq;
	struct kafka_sasl_handshake_response *hr;
	struct kafka_sasl_authenticate_request aq;
	struct kafka_sasl_authenticate_response *ar;
	const char *mech = sasl_mech_name(sec->mech);
	int16_t av = (int16_t)kclient_version(k, KAFKA_SASL_AUTHENTICATE_KEY, 2);
	struct scram_client sc;
	char msg[2048], why[200];
	size_t n;
	int rc, type = sec->mech == SASL_MECH_SCRAM_SHA_256 ? SASL_SCRAM_SHA_256 : SASL_SCRAM_SHA_512;

	if (kclient_version(k, KAFKA_SASL_HANDSHAKE_KEY, 1) < 1 || av < 0) {
		snprintf(k->err, sizeof k->err, "%s:%d does not serve SaslHandshake v1 and SaslAuthenticate: is it a "
			 "SASL listener?", k->host, k->port);
		return -EPROTO;
	}
	kafka_sasl_handshake_request_init(&hq);
	hq.Mechanism = (struct kafka_str){ mech, (int32_t)strlen(mech) };
	rc = kclient_call(k, KAFKA_SASL_HANDSHAKE_KEY, 1, &hq, false, (void **)&hr);
	if (rc)
		return rc;
	if (hr->ErrorCode) {
		size_t l = 0;

		l += (size_t)snprintf(k->err, sizeof k->err, "%s:%d: SaslHandshake %s: %s", k->host, k->port, mech,
				      kerr_name(hr->ErrorCode));
		for (int32_t i = 0; i < hr->Mechanisms.count && l < sizeof k->err; i++)
			l += (size_t)snprintf(k->err + l, sizeof k->err - l, "%s%s", i ? ", " : " (the listener enables ",
					      kstr(hr->Mechanisms.items[i]));
		if (hr->Mechanisms.count > 0 && l < sizeof k->err)
			snprintf(k->err + l, sizeof k->err - l, ")");
		kclient_release(k);
		return -EACCES;
	}
	kclient_release(k);
	if (sec->mech == SASL_MECH_PLAIN) {
		int m = snprintf(msg, sizeof msg, "%c%s%c%s", 0, sec->user, 0, sec->password);

		/* snprintf stops at neither NUL: m counts all of it */
		if (m < 0 || (size_t)m >= sizeof msg)
			return -EINVAL;
		n = (size_t)m;
	} else if ((rc = scram_client_first(&sc, type, sec->user, NULL, msg, sizeof msg, &n)) < 0) {
		snprintf(k->err, sizeof k->err, "SCRAM: cannot make the first message (%s)", strerror(-rc));
		return rc;
	}
	for (int step = 0;; step++) {
		kafka_sasl_authenticate_request_init(&aq);
		aq.AuthBytes = (struct kafka_bytes){ (const uint8_t *)msg, (int32_t)n };
		rc = kclient_call(k, KAFKA_SASL_AUTHENTICATE_KEY, av, &aq, false, (void **)&ar);
		OPENSSL_cleanse(msg, sizeof msg);
		if (rc)
			break;
		if (ar->ErrorCode) {
			snprintf(k->err, sizeof k->err, "%.100s:%d refused the credentials of '%.64s' (%s): %s: %.150s", k->host,
				 k->port, sec->user, mech, kerr_name(ar->ErrorCode),
				 ar->ErrorMessage.len > 0 ? kstr(ar->ErrorMessage) : "no message");
			rc = -EACCES;
			break;
		}
		if (sec->mech == SASL_MECH_PLAIN)
			break;
		if (step == 0) {
			rc = scram_client_final(&sc, sec->password, strlen(sec->password), (const char *)ar->AuthBytes.ptr,
						ar->AuthBytes.len > 0 ? (size_t)ar->AuthBytes.len : 0, msg, sizeof msg,
						&n, why, sizeof why);
		} else {
			rc = scram_client_verify(&sc, (const char *)ar->AuthBytes.ptr,
						 ar->AuthBytes.len > 0 ? (size_t)ar->AuthBytes.len : 0, why, sizeof why);
			if (!rc)
				break;
		}
		kclient_release(k);
		if (rc) {
			snprintf(k->err, sizeof k->err, "%.100s:%d: SCRAM as '%.64s': %.200s", k->host, k->port, sec->user, why);
			rc = rc == -EACCES ? -EACCES : -EPROTO;
			break;
		}
	}
	if (sec->mech != SASL_MECH_PLAIN)
		scram_client_fini(&sc);
	kclient_release(k);
	return rc;
}

int kclient_open(struct kclient *k, const char *host, int port, int timeout_ms, const struct ctl_sec *sec)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL, *ai;
	struct kafka_api_versions_request req;
	struct kafka_api_versions_response *resp;
	char ports[16];
	int64_t deadline = mono_ms() + timeout_ms;
	int rc;

	memset(k, 0, sizeof *k);
	k->fd = -1;
	k->sec = sec;
	snprintf(k->host, sizeof k->host, "%s", host);
	k->port = port;
	k->timeout_ms = timeout_ms;
	snprintf(ports, sizeof ports, "%d", port);
	rc = getaddrinfo(host, ports, &hints, &res);
	if (rc) {
		snprintf(k->err, sizeof k->err, "cannot resolve %s: %s", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	rc = -ECONNREFUSED;
	for (ai = res; ai && k->fd < 0; ai = ai->ai_next)
		rc = connect_addr(k, ai, deadline);
	freeaddrinfo(res);
	if (k->fd < 0) {
		fail_conn(k, rc, "cannot connect to");
		return rc;
	}
	if (sec && (sec->protocol == SEC_SSL || sec->protocol == SEC_SASL_SSL)) {
		char why[400];

		rc = ctl_sec_tls_connect(sec, k->fd, host, (int)(deadline - mono_ms()), &k->ssl, why, sizeof why);
		if (rc) {
			snprintf(k->err, sizeof k->err, "%s:%d: %s", host, port, why);
			close(k->fd);
			k->fd = -1;
			return rc;
		}
	}
	/* ApiVersions v0: every broker answers it, and it says what to use. */
	for (int i = 0; i < KCLIENT_MAX_KEY; i++)
		k->vmin[i] = k->vmax[i] = -1;
	k->vmin[KAFKA_API_VERSIONS_KEY] = k->vmax[KAFKA_API_VERSIONS_KEY] = 0;
	kafka_api_versions_request_init(&req);
	rc = kclient_call(k, KAFKA_API_VERSIONS_KEY, 0, &req, false, (void **)&resp);
	if (rc)
		return rc;
	if (resp->ErrorCode) {
		snprintf(k->err, sizeof k->err, "%s:%d answered ApiVersions with error %d", host, port,
			 resp->ErrorCode);
		kclient_close(k);
		return -EPROTO;
	}
	for (int32_t i = 0; i < resp->ApiKeys.count; i++) {
		const struct kafka_api_versions_response_api_version *v = &resp->ApiKeys.items[i];

		if (v->ApiKey >= 0 && v->ApiKey < KCLIENT_MAX_KEY) {
			k->vmin[v->ApiKey] = v->MinVersion;
			k->vmax[v->ApiKey] = v->MaxVersion;
		}
	}
	kclient_release(k);
	if (sec && (sec->protocol == SEC_SASL_PLAINTEXT || sec->protocol == SEC_SASL_SSL)) {
		rc = sasl_login(k, sec);
		if (rc) {
			kclient_release(k);
			ctl_sec_tls_close(k->ssl);
			k->ssl = NULL;
			if (k->fd >= 0)
				close(k->fd);
			k->fd = -1;
			return rc;
		}
	}
	return 0;
}

void kclient_release(struct kclient *k)
{
	kclient_release_to(k, NULL);
}

void kclient_release_to(struct kclient *k, struct kclient_mem *mark)
{
	while (k->mem && k->mem != mark) {
		struct kclient_mem *m = k->mem;

		k->mem = m->next;
		free(m->frame);
		free(m->arena);
		free(m);
	}
}

void kclient_close(struct kclient *k)
{
	kclient_release(k);
	ctl_sec_tls_close(k->ssl);
	k->ssl = NULL;
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
}
