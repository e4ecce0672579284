/* control/sluicectl_admin.c — sluicectl's client of the broker's HTTP admin
 * endpoint (control/admin_http.c): a minimal HTTP/1.1 GET over one plain
 * socket per request (Connection: close; the body by Content-Length or read
 * to close; the status line checked; one deadline for the whole exchange),
 * a lookup of flat keys in its JSON answers, and the once-per-run note when
 * the endpoint cannot be reached. See sluicectl.h. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "control/sluicectl.h"

#define HTTP_MAX_BODY (64u << 20)   /* a /v1 answer is small; refuse runaway ones */

static int connect_to(const char *host, int port, int64_t deadline, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai = NULL, *it;
	char ports[16];
	int rc, fd = -1, last = -ECONNREFUSED;

	snprintf(ports, sizeof ports, "%d", port);
	rc = getaddrinfo(host, ports, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	for (it = ai; it; it = it->ai_next) {
		int soerr = 0;
		socklen_t sl = sizeof soerr;

		fd = socket(it->ai_family, it->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, it->ai_protocol);
		if (fd < 0) {
			last = -errno;
			continue;
		}
		if (connect(fd, it->ai_addr, it->ai_addrlen) < 0 && errno != EINPROGRESS) {
			last = -errno;
		} else if ((rc = ctl_wait_fd(fd, POLLOUT, deadline)) < 0) {
			last = rc;
		} else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
			last = soerr ? -soerr : -errno;
		} else {
			break;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		snprintf(err, errlen, "connect: %s", strerror(-last));
	return fd < 0 ? last : fd;
}

/* send() and recv(), through TLS when ssl: > 0 bytes; 0 (recv) the end;
 * -1 with errno EAGAIN (wait and call again) or another. */
static ssize_t h_send(int fd, SSL *ssl, const char *p, size_t n)
{
	int w, e;

	if (!ssl)
		return send(fd, p, n, MSG_NOSIGNAL);
	if ((w = SSL_write(ssl, p, (int)n)) > 0)
		return w;
	e = SSL_get_error(ssl, w);
	errno = e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? EAGAIN : EPROTO;
	return -1;
}

static ssize_t h_recv(int fd, SSL *ssl, char *p, size_t n)
{
	int r, e;

	if (!ssl)
		return recv(fd, p, n, 0);
	if ((r = SSL_read(ssl, p, (int)n)) > 0)
		return r;
	e = SSL_get_error(ssl, r);
	if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && !ERR_peek_error()))
		return 0;   /* closed (with or without close_notify: Content-Length says if it is whole) */
	errno = e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? EAGAIN : EPROTO;
	return -1;
}

int http_get(const char *host, int port, const char *path, const char *auth, const struct ctl_sec *tls,
	     int timeout_ms, struct http_reply *r)
{
	SSL *ssl = NULL;
	int64_t deadline = mono_ms() + timeout_ms;
	char req[8192];
	size_t len = 0, cap = 4096, sent = 0, reqlen;
	char *buf = NULL, *hend, *p;
	long long clen = -1;
	int fd, rc;

	memset(r, 0, sizeof *r);
	reqlen = (size_t)snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: sluicectl\r\n"
				  "Accept: application/json\r\n%s%s%sConnection: close\r\n\r\n", path, host, port,
				  auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
	if (reqlen >= sizeof req) {
		snprintf(r->err, sizeof r->err, "path too long");
		return -ENAMETOOLONG;
	}
	fd = connect_to(host, port, deadline, r->err, sizeof r->err);
	if (fd < 0)
		return fd;
	if (tls) {
		void *s = NULL;

		rc = ctl_sec_tls_connect(tls, fd, host, (int)(deadline - mono_ms()), &s, r->err, sizeof r->err);
		if (rc < 0) {
			close(fd);
			return rc;
		}
		ssl = s;
	}
	while (sent < reqlen) {
		ssize_t n = h_send(fd, ssl, req + sent, reqlen - sent);

		if (n > 0) {
			sent += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			rc = -errno;
			snprintf(r->err, sizeof r->err, "send: %s", strerror(errno));
			goto fail;
		}
		if ((rc = ctl_wait_fd(fd, POLLOUT, deadline)) < 0) {
			snprintf(r->err, sizeof r->err, "send: %s", strerror(-rc));
			goto fail;
		}
	}
	buf = malloc(cap + 1);
	if (!buf) {
		rc = -ENOMEM;
		snprintf(r->err, sizeof r->err, "out of memory");
		goto fail;
	}
	for (;;) {   /* read to close, or until Content-Length is met */
		ssize_t n;

		if (len == cap) {
			char *nb;

			if (cap >= HTTP_MAX_BODY) {
				rc = -EMSGSIZE;
				snprintf(r->err, sizeof r->err, "answer larger than %u bytes", HTTP_MAX_BODY);
				goto fail;
			}
			nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				rc = -ENOMEM;
				snprintf(r->err, sizeof r->err, "out of memory");
				goto fail;
			}
			buf = nb;
			cap *= 2;
		}
		n = h_recv(fd, ssl, buf + len, cap - len);
		if (n == 0)
			break;
		if (n > 0) {
			len += (size_t)n;
			buf[len] = 0;
			hend = strstr(buf, "\r\n\r\n");
			if (hend && clen >= 0 && len - (size_t)(hend + 4 - buf) >= (size_t)clen)
				break;
			if (hend && clen < 0) {
				for (p = strstr(buf, "\r\n"); p && p < hend; p = strstr(p + 2, "\r\n"))
					if (!strncasecmp(p + 2, "Content-Length:", 15))
						clen = strtoll(p + 17, NULL, 10);
				if (clen >= 0 && len - (size_t)(hend + 4 - buf) >= (size_t)clen)
					break;
			}
			continue;
		}
		if (errno != EAGAIN && errno != EINTR) {
			rc = -errno;
			snprintf(r->err, sizeof r->err, "receive: %s", strerror(errno));
			goto fail;
		}
		if ((rc = ctl_wait_fd(fd, POLLIN, deadline)) < 0) {
			snprintf(r->err, sizeof r->err, "no answer within %d ms", timeout_ms);
			goto fail;
		}
	}
	ctl_sec_tls_close(ssl);
	ssl = NULL;
	close(fd);
	fd = -1;
	buf[len] = 0;
	hend = strstr(buf, "\r\n\r\n");
	if (!hend || strncmp(buf, "HTTP/1.", 7) || buf[8] != ' ' || sscanf(buf + 9, "%3d", &r->status) != 1 ||
	    r->status < 100 || r->status > 599) {
		rc = -EPROTO;
		snprintf(r->err, sizeof r->err, "not an HTTP answer (%s)", len ? "malformed status line or headers"
										: "connection closed without an answer");
		goto fail;
	}
	if (clen >= 0 && len - (size_t)(hend + 4 - buf) < (size_t)clen) {
		rc = -EPROTO;
		snprintf(r->err, sizeof r->err, "answer cut short (%zu of %lld body bytes)",
			 len - (size_t)(hend + 4 - buf), clen);
		goto fail;
	}
	r->len = len - (size_t)(hend + 4 - buf);
	memmove(buf, hend + 4, r->len);
	buf[r->len] = 0;
	r->body = buf;
	return 0;
fail:
	free(buf);
	ctl_sec_tls_close(ssl);
	if (fd >= 0)
		close(fd);
	return rc;
}

void http_reply_fini(struct http_reply *r)
{
	free(r->body);
	r->body = NULL;
}

/* ---- flat JSON lookups ------------------------------------------------- */

/* The text right after `"key":` (spaces skipped) in [s, end), or NULL. The
 * endpoint's answers are flat objects written by control/metrics.c; keys
 * are looked up within the object the caller delimits. */
static const char *json_value(const char *s, const char *end, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = s; p && p + kl + 2 < end; p++) {
		p = memchr(p, '"', (size_t)(end - p));
		if (!p || p + kl + 2 >= end)
			return NULL;
		if (!strncmp(p + 1, key, kl) && p[kl + 1] == '"') {
			const char *v = p + kl + 2;

			while (v < end && (*v == ' ' || *v == '\n'))
				v++;
			if (v < end && *v == ':') {
				v++;
				while (v < end && (*v == ' ' || *v == '\n'))
					v++;
				return v < end ? v : NULL;
			}
		}
	}
	return NULL;
}

bool json_get_i64(const char *s, const char *end, const char *key, int64_t *out)
{
	const char *v = json_value(s, end, key);
	char *e;

	if (!v || !(*v == '-' || (*v >= '0' && *v <= '9')))
		return false;
	*out = strtoll(v, &e, 10);
	return e > v && e <= end;
}

bool json_get_str(const char *s, const char *end, const char *key, char *out, size_t cap)
{
	const char *v = json_value(s, end, key);
	size_t n = 0;

	if (!v || *v != '"' || !cap)
		return false;
	for (v++; v < end && *v != '"' && n + 1 < cap; v++)
		out[n++] = *v == '\\' && v + 1 < end ? *++v : *v;
	out[n] = 0;
	return v < end && *v == '"';
}

/* ---- the endpoint as sluicectl uses it ------------------------------------ */

#define ADMIN_DEFAULT_PORT 9644

/* The bootstrap broker's node id from a Metadata answer: the broker whose
 * host and port are the ones connected to, else the only one on that port;
 * -1 when none is. */
static int32_t boot_node_id(const struct kclient *k, const struct kafka_metadata_response *md)
{
	int32_t id = -1, on_port = 0;

	for (int32_t i = 0; i < md->Brokers.count; i++) {
		const struct kafka_metadata_response_metadata_response_broker *b = &md->Brokers.items[i];

		if (b->Port != k->port)
			continue;
		if (kafka_str_eq(b->Host, k->host))
			return b->NodeId;
		id = b->NodeId;
		on_port++;
	}
	return on_port == 1 ? id : -1;
}

/* The admin.listen broker node reports of itself (DescribeConfigs of its
 * BROKER resource, asked of it on k, as Kafka answers a broker's resource
 * only there) into *out; false when it reports none (not a Sluice broker,
 * or the request fails). */
static bool admin_listen_of(struct kclient *k, int32_t node, char *out, size_t cap, bool *tls)
{
	static const struct kafka_str keys[] = { { "admin.listen", 12 }, { "admin.ssl.enabled", 17 } };
	struct kclient_mem *mark = k->mem;   /* the answer is copied out, then freed */
	struct kafka_describe_configs_request req;
	struct kafka_describe_configs_request_describe_configs_resource res;
	struct kafka_describe_configs_response *resp;
	int vd = kclient_version(k, KAFKA_DESCRIBE_CONFIGS_KEY, 2);
	char name[16];
	bool found = false;

	if (vd < 0)
		return false;
	snprintf(name, sizeof name, "%d", node);
	memset(&res, 0, sizeof res);
	res.ResourceType = 4;   /* BROKER */
	res.ResourceName = (struct kafka_str){ name, (int32_t)strlen(name) };
	res.ConfigurationKeys.items = (struct kafka_str *)keys;
	res.ConfigurationKeys.count = 2;
	*tls = false;
	kafka_describe_configs_request_init(&req);
	req.Resources.items = &res;
	req.Resources.count = 1;
	if (!kclient_call(k, KAFKA_DESCRIBE_CONFIGS_KEY, (int16_t)vd, &req, false, (void **)&resp) &&
	    resp->Results.count == 1 && !resp->Results.items[0].ErrorCode) {
		for (int32_t j = 0; j < resp->Results.items[0].Configs.count; j++) {
			const struct kafka_describe_configs_response_describe_configs_resource_result *e =
				&resp->Results.items[0].Configs.items[j];

			if (kafka_str_eq(e->Name, "admin.listen") && e->Value.len >= 0 &&
			    (size_t)e->Value.len < cap) {
				memcpy(out, e->Value.ptr, (size_t)e->Value.len);
				out[e->Value.len] = 0;
				found = true;
			}
			if (kafka_str_eq(e->Name, "admin.ssl.enabled") && kafka_str_eq(e->Value, "true"))
				*tls = true;
		}
	}
	kclient_release_to(k, mark);
	return found;
}

/* The bootstrap broker's admin.listen (its node id from a Metadata of no
 * topic); false as admin_listen_of. */
static bool boot_admin_listen(struct ctl *c, char *out, size_t cap, int32_t *node, bool *tls)
{
	struct kclient *k = ctl_client(c);
	struct kclient_mem *mark = k->mem;
	struct kafka_metadata_request mreq;
	struct kafka_metadata_request_metadata_request_topic none;
	struct kafka_metadata_response *md;
	int vm = kclient_version(k, KAFKA_METADATA_KEY, 6);

	*node = -1;
	if (vm < 1)
		return false;
	kafka_metadata_request_init(&mreq);
	mreq.Topics.items = &none;   /* no topic: the brokers only */
	mreq.Topics.count = 0;
	mreq.AllowAutoTopicCreation = false;
	if (!kclient_call(k, KAFKA_METADATA_KEY, (int16_t)vm, &mreq, false, (void **)&md))
		*node = boot_node_id(k, md);
	kclient_release_to(k, mark);
	return *node >= 0 && admin_listen_of(k, *node, out, cap, tls);
}

/* admin.listen's HOST:PORT into host (a wildcard or no host: dflt) and
 * *port; false when it is off or not HOST:PORT. */
static bool admin_listen_split(char *listen, const char *dflt, char *host, size_t cap, int *port)
{
	char *colon = strrchr(listen, ':');
	int64_t p;

	if (!listen[0] || !colon || !parse_i64(colon + 1, 1, 65535, &p))
		return false;
	*colon = 0;
	if (listen[0] == '[' && colon[-1] == ']') {
		colon[-1] = 0;
		memmove(listen, listen + 1, strlen(listen));
	}
	snprintf(host, cap, "%s", listen[0] && strcmp(listen, "0.0.0.0") && strcmp(listen, "::") ? listen : dflt);
	*port = (int)p;
	return true;
}

/* Resolve the address once: --admin, else $SLUICE_ADMIN, else the
 * admin.listen the bootstrap broker that answered reports of itself (a
 * wildcard host: the bootstrap host), else (a broker that reports none)
 * that broker's host, port 9644. false: bad HOST:PORT (a usage error,
 * reported). */
static bool admin_resolve(struct ctl *c)
{
	const char *s = c->admin;
	const char *colon;
	int64_t port;

	if (c->admin_port)
		return true;
	if (!s) {
		struct kclient *k = ctl_client(c);
		char listen[300];
		int32_t node;

		snprintf(c->admin_host, sizeof c->admin_host, "%s", k->host);
		c->admin_port = ADMIN_DEFAULT_PORT;
		if (!boot_admin_listen(c, listen, sizeof listen, &node, &c->admin_tls))
			return true;
		c->admin_default = true;
		c->admin_node = node;   /* the endpoint's node: the bootstrap broker */
		c->admin_node_known = true;
		if (!admin_listen_split(listen, k->host, c->admin_host, sizeof c->admin_host, &c->admin_port)) {
			c->admin_down = true;   /* the endpoint is off there: nothing to ask */
			snprintf(c->admin_err, sizeof c->admin_err, "broker %d's admin.listen is '%s' (off)", node,
				 listen);
		}
		return true;
	}
	/* https://HOST:PORT: the endpoint serves TLS (admin.ssl.enabled) */
	if (!strncmp(s, "https://", 8)) {
		c->admin_tls = true;
		s += 8;
	} else if (!strncmp(s, "http://", 7)) {
		s += 7;
	}
	colon = strrchr(s, ':');
	if (!colon || colon == s || (size_t)(colon - s) >= sizeof c->admin_host ||
	    !parse_i64(colon + 1, 1, 65535, &port)) {
		fprintf(stderr, "sluicectl: bad admin address '%s' (want HOST:PORT, from %s)\n", s, c->admin_src);
		exit(EXIT_USAGE);
	}
	memcpy(c->admin_host, s, (size_t)(colon - s));
	c->admin_host[colon - s] = 0;
	if (c->admin_host[0] == '[' && colon[-1] == ']') {   /* [::1]:9644 */
		memmove(c->admin_host, c->admin_host + 1, strlen(c->admin_host));
		c->admin_host[strlen(c->admin_host) - 1] = 0;
	}
	c->admin_port = (int)port;
	return true;
}

/* The Authorization header's value: a bearer token (admin.token of
 * --command-config, or --admin-token-file) first, else HTTP Basic with
 * the SASL user and password of --command-config; NULL without either. */
static const char *admin_basic(struct ctl *c)
{
	static char v[7 + (sizeof(c->sec.user) + sizeof(c->sec.password) + 4) / 3 * 4 + sizeof(c->sec.token)];

	if (c->sec.token[0]) {
		snprintf(v, sizeof v, "Bearer %s", c->sec.token);
		return v;
	}
	memcpy(v, "Basic ", 6);
	return ctl_sec_basic(&c->sec, v + 6, sizeof v - 6) > 0 ? v : NULL;
}

static void admin_note(struct ctl *c, const char *what)
{
	if (c->admin_noted)
		return;
	c->admin_noted = true;
	fprintf(stderr, "sluicectl: %s: ", c->cmd);
	wrap(stderr, 13 + (int)strlen(c->cmd), 4, fmt("admin endpoint %s:%d: %s; %s", c->admin_host, c->admin_port,
						       c->admin_err, what));
	fprintf(stderr, "  what to do: ");
	if (c->admin_auth_refused)
		wrap(stderr, 14, 4, c->sec.token[0]
		     ? "the endpoint did not take the bearer token (admin.token or --admin-token-file): check it "
		       "against the broker's admin.auth.token.file"
		     : c->sec.user[0]
		     ? "the endpoint wants a SCRAM user of the cluster (admin.require.auth): check the user and "
		       "password of --command-config"
		     : "the endpoint wants credentials (admin.require.auth): give --command-config with a user "
		       "and password (sasl.jaas.config, or sasl.username and sasl.password), or a bearer token "
		       "(--admin-token-file)");
	else if (c->admin_tls)
		wrap(stderr, 14, 4, "the endpoint serves HTTPS (admin.ssl.enabled): ssl.truststore.location in "
		     "--command-config names the CA that signed the broker's certificate");
	else
		wrap(stderr, 14, 4, "is admin.listen set on the broker (default 127.0.0.1:9644)? pass --admin "
		     "HOST:PORT (https://HOST:PORT for HTTPS) or set SLUICE_ADMIN");
}

int ctl_admin_get(struct ctl *c, const char *path, const char *unknown, struct http_reply *r)
{
	int rc;

	memset(r, 0, sizeof *r);
	if (c->admin_down) {
		admin_note(c, unknown);
		return -EHOSTUNREACH;
	}
	admin_resolve(c);
	if (c->admin_down) {         /* the broker says its endpoint is off */
		admin_note(c, unknown);
		return -EHOSTUNREACH;
	}
	if (c->admin_tls)
		ctl_sec_default_ctx(&c->sec);
	rc = http_get(c->admin_host, c->admin_port, path, admin_basic(c), c->admin_tls ? &c->sec : NULL,
		      c->timeout_ms, r);
	if (rc < 0) {
		c->admin_down = true;
		snprintf(c->admin_err, sizeof c->admin_err, "GET %s: %s", path, r->err);
		admin_note(c, unknown);
		return rc;
	}
	if (r->status != 200 && r->status != 503 && r->status != 404) {
		/* not the admin endpoint we know (or a proxy in the way) */
		c->admin_down = true;
		c->admin_auth_refused = r->status == 401 || r->status == 403;
		snprintf(c->admin_err, sizeof c->admin_err, "GET %s: HTTP %d%s", path, r->status,
			 r->status == 401 ? " (authentication required)" : r->status == 403 ? " (forbidden)" : "");
		http_reply_fini(r);
		admin_note(c, unknown);
		return -EPROTO;
	}
	return r->status;
}

int ctl_admin_get_node(struct ctl *c, int32_t node, const char *path, const char *unknown, struct http_reply *r)
{
	int32_t self = ctl_admin_node(c, unknown);
	struct kclient *k;
	char listen[300];
	int i, rc;

	memset(r, 0, sizeof *r);
	if (node < 0 || self < 0 || node == self)
		return self >= 0 && node < 0 ? -ENOENT : ctl_admin_get(c, path, unknown, r);
	if (!c->admin_default)
		return -ENOENT;              /* an address given: that endpoint's node only */
	for (i = 0; i < c->nadmin_others && c->admin_others[i].id != node; i++)
		;
	if (i == c->nadmin_others) {
		if (i == (int)(sizeof c->admin_others / sizeof c->admin_others[0]))
			return -ENOENT;
		c->nadmin_others++;
		c->admin_others[i].id = node;
		c->admin_others[i].port = 0;
		c->admin_others[i].down = true;
		k = ctl_node_of(c, node);
		if (k && admin_listen_of(k, node, listen, sizeof listen, &c->admin_others[i].tls) &&
		    admin_listen_split(listen, k->host, c->admin_others[i].host, sizeof c->admin_others[i].host,
				       &c->admin_others[i].port))
			c->admin_others[i].down = false;
		else
			snprintf(r->err, sizeof r->err, "no admin.listen from broker %d", node);
	}
	if (c->admin_others[i].tls)
		ctl_sec_default_ctx(&c->sec);
	rc = c->admin_others[i].down ? -EHOSTUNREACH
		: http_get(c->admin_others[i].host, c->admin_others[i].port, path, admin_basic(c),
			   c->admin_others[i].tls ? &c->sec : NULL, c->timeout_ms, r);
	if (rc == 0 && r->status != 200 && r->status != 503 && r->status != 404)
		rc = -EPROTO;
	if (rc < 0 && !c->admin_others[i].down) {
		c->admin_others[i].down = true;
		if (!c->admin_others_noted) {
			c->admin_others_noted = true;
			fprintf(stderr, "sluicectl: %s: ", c->cmd);
			wrap(stderr, 13 + (int)strlen(c->cmd), 4,
			     fmt("broker %d's admin endpoint %s:%d: GET %s: %s; %s", node, c->admin_others[i].host,
				 c->admin_others[i].port, path, r->err[0] ? r->err : "not the admin endpoint",
				 unknown));
		}
	}
	if (rc < 0)
		http_reply_fini(r);
	return rc < 0 ? rc : r->status;
}

const char *ctl_admin_auth(struct ctl *c)
{
	return admin_basic(c);
}

int ctl_admin_addr(struct ctl *c, int32_t node, char *host, size_t cap, int *port, bool *tls)
{
	if (c->admin_node_known && node == c->admin_node && c->admin_port > 0 && !c->admin_down) {
		snprintf(host, cap, "%s", c->admin_host);
		*port = c->admin_port;
		*tls = c->admin_tls;
		return 0;
	}
	for (int i = 0; i < c->nadmin_others; i++)
		if (c->admin_others[i].id == node && c->admin_others[i].port > 0 && !c->admin_others[i].down) {
			snprintf(host, cap, "%s", c->admin_others[i].host);
			*port = c->admin_others[i].port;
			*tls = c->admin_others[i].tls;
			return 0;
		}
	return -ENOENT;
}

int32_t ctl_admin_node(struct ctl *c, const char *unknown)
{
	struct http_reply r;
	const char *p;
	char v[32];
	int64_t id;

	if (c->admin_node_known)
		return c->admin_node;
	c->admin_node = -1;
	if (ctl_admin_get(c, "/v1/config", unknown, &r) != 200) {
		http_reply_fini(&r);
		return -1;
	}
	c->admin_node_known = true;
	p = strstr(r.body, "\"name\": \"node.id\"");
	if (p && json_get_str(p, r.body + r.len, "value", v, sizeof v) && parse_i64(v, 0, INT32_MAX, &id))
		c->admin_node = (int32_t)id;
	http_reply_fini(&r);
	return c->admin_node;
}
