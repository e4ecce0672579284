/* control/admin_http.c — the HTTP admin endpoint on libmicrohttpd, run
 * from the control thread's loop (see admin_http.h). */
#include "control/admin_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "control/admin_basic.h"
#include "control/admin_tls.h"
#include "control/listeners.h"
#include "control/admin_token.h"
#include "control/config.h"
#include "control/console_api.h"
#include "control/console_assets.h"
#include "control/console_records.h"
#include "control/hw_profile.h"
#include "control/ctl.h"
#include "control/ctl_internal.h"
#include "control/meta_scram.h"
#include "control/metalog.h"
#include "control/metrics.h"
#include "control/quorum_tls.h"
#include "control/rate_hist.h"
#include "control/textbuf.h"
#include "dataplane/broker.h"
#include "dataplane/sasl.h"
#include "dataplane/scram.h"
#include "dataplane/tls.h"
#include "storage/slog.h"

/* Limits against misbehaving clients: a request's headers must fit in the
 * connection's memory (else 431), a silent connection is closed after the
 * timeout, and only so many connections are served at once. */
#define ADMIN_CONN_MEMORY (32u * 1024)
#define ADMIN_CONN_TIMEOUT_S 10u
#define ADMIN_CONN_LIMIT 64u
/* Live streams (GET /v1/stream) at once: each costs one connection and a
 * few hundred bytes a second; the next is refused with 503. */
#define ADMIN_SSE_MAX 16u

/* A request refused for its credentials waits this long before its 401
 * (connection.failed.authentication.delay.ms, as SASL's), suspended: the
 * control thread serves everything else meanwhile. */
struct admin_req;
struct sse_viewer;
struct admin_wait {
	struct MHD_Connection *conn;
	struct admin_req *q;
	int64_t due_ms;               /* CLOCK_MONOTONIC */
};

struct admin_http {
	struct MHD_Daemon *d;
	struct ctl *ctl;
	struct broker *b;
	const struct config *cfg;
	int port;
	uint64_t requests;            /* answered, by status class: metrics */
	int require_auth;             /* admin.require.auth */
	int metrics_open;             /* admin.metrics.open: GET /metrics needs no credentials */
	int tls;                      /* admin.ssl.enabled */
	const char *principal_rules;  /* ssl.principal.mapping.rules: a client certificate's principal */
	const char *token_file;       /* admin.auth.token.file; "" none */
	struct admin_tokens *tokens;  /* its tokens (hashes), NULL without a file */
	uint64_t auth_failures;       /* requests refused for their credentials: metrics */
	int64_t delay_ms;             /* connection.failed.authentication.delay.ms */
	struct admin_basic basic;     /* Basic credentials verified lately (keyed digests) */
	struct admin_wait waits[ADMIN_CONN_LIMIT];   /* suspended refusals; conn NULL: free */
	struct rate_hist hist;        /* the last minutes' rates (/v1/history, /v1/stream) */
	struct hw_profile profile;    /* hardware.profile, loaded at the start */
	const char *profile_path;     /* "" none */
	struct sse_viewer *viewers[ADMIN_SSE_MAX];   /* live streams; NULL: free */
	struct admin_req *pages[ADMIN_CONN_LIMIT];   /* record pages being read; NULL: free */
	uint64_t streams_refused;     /* GET /v1/stream refused for ADMIN_SSE_MAX */
};

/* One GET /v1/stream: it sends every sample from `next` on, and waits
 * (suspended) while it has sent the newest. A viewer that reads slower
 * than the samples come skips to the oldest still kept: what it holds is
 * MHD's buffer of one connection and the one event being sent, never
 * more. */
struct sse_viewer {
	struct admin_http *a;
	struct MHD_Connection *conn;
	unsigned slot;
	uint64_t next;                /* the next sample to send */
	int suspended;
	int ending;                   /* the endpoint stops: end the stream */
	struct textbuf pend;          /* the event being sent, from pend_off on */
	size_t pend_off;
};

/* One request's state (MHD's req_cls), freed when MHD completes it. */
struct admin_req {
	int refused;                  /* 1: suspended for its 401; 2: resumed, answer it */
	/* a record page (/v1/records): suspended while the owner shard reads */
	struct console_call *call;    /* in flight; NULL: none, or answered */
	struct MHD_Connection *conn;
	struct admin_http *a;
	int slot;                     /* in a->pages while in flight, else -1 */
	unsigned status;              /* answered: the status and body to send */
	struct textbuf body;
	int answered;
};

/* Queue t (its buffer goes to the response) with the Content-Type type
 * and the NULL-ended name, value pairs of headers (may be NULL). */
static enum MHD_Result reply_headers(struct MHD_Connection *conn, unsigned status, const char *type, struct textbuf *t,
				     const char *const *headers)
{
	struct MHD_Response *r;
	enum MHD_Result rc;

	if (t->oom) {
		textbuf_fini(t);
		return MHD_NO;   /* closes the connection */
	}
	r = MHD_create_response_from_buffer_with_free_callback(t->len, t->p, free);
	if (!r) {
		textbuf_fini(t);
		return MHD_NO;
	}
	t->p = NULL;   /* the response owns it */
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	for (; headers && *headers; headers += 2)
		MHD_add_response_header(r, headers[0], headers[1]);
	rc = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type, struct textbuf *t)
{
	return reply_headers(conn, status, type, t, NULL);
}

/* msg and a newline as text/plain, with headers as for reply_headers. */
static enum MHD_Result reply_text_headers(struct MHD_Connection *conn, unsigned status, const char *msg,
					  const char *const *headers)
{
	struct textbuf t = { 0 };

	textbuf_printf(&t, "%s\n", msg);
	return reply_headers(conn, status, "text/plain; charset=utf-8", &t, headers);
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	return reply_text_headers(conn, status, msg, NULL);
}

struct config_walk {
	struct textbuf *t;
	int n;
};

static void config_one(const char *key, const char *value, const char *source, int is_default, void *arg)
{
	struct config_walk *w = arg;

	textbuf_printf(w->t, "%s\n  {\"name\": \"", w->n++ ? "," : "");
	textbuf_escaped(w->t, key);
	textbuf_printf(w->t, "\", \"value\": \"");
	textbuf_escaped(w->t, value ? value : "");
	textbuf_printf(w->t, "\", \"source\": \"");
	textbuf_escaped(w->t, source ? source : "default");
	textbuf_printf(w->t, "\", \"default\": %s}", is_default ? "true" : "false");
}

static enum MHD_Result serve_config(struct admin_http *a, struct MHD_Connection *conn)
{
	struct textbuf t = { 0 };
	struct config_walk w = { &t, 0 };

	textbuf_printf(&t, "{\"configs\": [");
	config_foreach(a->cfg, config_one, &w);
	textbuf_printf(&t, "\n]}\n");
	return reply(conn, MHD_HTTP_OK, "application/json", &t);
}

static enum MHD_Result serve_health(struct admin_http *a, struct MHD_Connection *conn)
{
	struct textbuf t = { 0 };
	int ok = metrics_health(a->ctl, a->b, &t);

	return reply(conn, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "application/json", &t);
}

static enum MHD_Result serve_metrics(struct admin_http *a, struct MHD_Connection *conn)
{
	struct textbuf t = { 0 };

	metrics_render(a->ctl, a->b, &t);
	/* the endpoint's own counter: it lives here, on this thread */
	textbuf_printf(&t, "# HELP sluice_admin_auth_failures_total Admin endpoint requests refused for their "
		       "credentials (401: none, a wrong password, an unknown bearer token, an untrusted client "
		       "certificate).\n"
		       "# TYPE sluice_admin_auth_failures_total counter\nsluice_admin_auth_failures_total %llu\n",
		       (unsigned long long)a->auth_failures);
	textbuf_printf(&t, "# HELP sluice_admin_basic_cache_hits_total Admin endpoint HTTP Basic checks answered "
		       "from the credentials it verified in the last minute (a keyed digest of the user and "
		       "password, bound to the user's SCRAM credential), without the PBKDF2 check.\n"
		       "# TYPE sluice_admin_basic_cache_hits_total counter\nsluice_admin_basic_cache_hits_total %llu\n",
		       (unsigned long long)a->basic.hits);
	return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", &t);
}

static enum MHD_Result serve_shards(struct admin_http *a, struct MHD_Connection *conn)
{
	struct textbuf t = { 0 };

	metrics_shards_json(a->ctl, a->b, &t);
	return reply(conn, MHD_HTTP_OK, "application/json", &t);
}

/* /v1/partitions/<topic>/<n> */
static enum MHD_Result serve_partition(struct admin_http *a, struct MHD_Connection *conn, const char *rest)
{
	struct textbuf t = { 0 };
	const char *slash = strrchr(rest, '/');
	char topic[256], *end;
	long n;
	int rc;

	if (!slash || slash == rest || (size_t)(slash - rest) >= sizeof(topic) || !slash[1])
		return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: /v1/partitions/<topic>/<partition>");
	memcpy(topic, rest, (size_t)(slash - rest));
	topic[slash - rest] = 0;
	errno = 0;
	n = strtol(slash + 1, &end, 10);
	if (*end || errno || n < 0 || n > INT32_MAX)
		return reply_text(conn, MHD_HTTP_BAD_REQUEST, "bad partition number");
	rc = metrics_partition_json(a->ctl, a->b, topic, (int32_t)n, &t);
	if (rc < 0) {
		textbuf_fini(&t);
		return reply_text(conn, MHD_HTTP_NOT_FOUND, "no such topic or partition");
	}
	return reply(conn, MHD_HTTP_OK, "application/json", &t);
}

/* ---- the web console: its files, its JSON, its stream ------------------- */

/* /ui/... from the files compiled in; / and /ui go to /ui/ */
static enum MHD_Result serve_asset(struct MHD_Connection *conn, const char *url)
{
	static const char *const to_ui[] = { MHD_HTTP_HEADER_LOCATION, "/ui/", NULL };
	const char *path = !strcmp(url, "/ui/") ? "/ui/index.html" : url;
	struct MHD_Response *r;
	enum MHD_Result rc;

	if (!strcmp(url, "/") || !strcmp(url, "/ui"))
		return reply_text_headers(conn, MHD_HTTP_FOUND, "the console is at /ui/", to_ui);
	for (const struct console_asset *f = console_assets; f->path; f++) {
		if (strcmp(f->path, path))
			continue;
		r = MHD_create_response_from_buffer(f->len, (void *)f->data, MHD_RESPMEM_PERSISTENT);
		if (!r)
			return MHD_NO;
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, f->type);
		/* the same URL serves another file after an upgrade */
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
		MHD_add_response_header(r, "Content-Security-Policy",
					"default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'");
		rc = MHD_queue_response(conn, MHD_HTTP_OK, r);
		MHD_destroy_response(r);
		return rc;
	}
	return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: the console's pages start at /ui/");
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse_viewer *v = cls;
	const struct rate_hist *h = &v->a->hist;
	size_t n = 0;

	(void)pos;
	if (v->ending)
		return MHD_CONTENT_READER_END_OF_STREAM;
	while (n < max) {
		size_t k;

		if (v->pend_off == v->pend.len) {
			/* the last event is out: the next sample, if there is one */
			v->pend.len = v->pend_off = 0;
			if (v->next < rate_hist_oldest(h))
				v->next = rate_hist_oldest(h);   /* too slow: what scrolled away is skipped */
			if (!h->seq || v->next > h->seq)
				break;
			textbuf_printf(&v->pend, "id: %llu\nevent: sample\ndata: ", (unsigned long long)v->next);
			rate_hist_sample_json(h, v->next, &v->pend);
			textbuf_printf(&v->pend, "\n\n");
			if (v->pend.oom)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			v->next++;
		}
		/* as much of it as fits; the rest at the next call */
		k = v->pend.len - v->pend_off < max - n ? v->pend.len - v->pend_off : max - n;
		memcpy(buf + n, v->pend.p + v->pend_off, k);
		v->pend_off += k;
		n += k;
	}
	if (!n) {
		/* nothing new: wait for the next sample (admin_http_run resumes) */
		v->suspended = 1;
		MHD_suspend_connection(v->conn);
	}
	return (ssize_t)n;
}

static void sse_free(void *cls)
{
	struct sse_viewer *v = cls;

	v->a->viewers[v->slot] = NULL;
	textbuf_fini(&v->pend);
	free(v);
}

/* GET /v1/stream[?from=SEQ]: Server-Sent Events, one "sample" event a
 * second (the rate_hist sample, its seq as the event id); from (or the
 * Last-Event-ID a reconnecting browser sends) picks up after a sample
 * still kept, else the stream starts with the newest. */
static enum MHD_Result serve_stream(struct admin_http *a, struct MHD_Connection *conn)
{
	static const char *const retry[] = { "Retry-After", "5", NULL };
	const char *from = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "from");
	const char *last = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Last-Event-ID");
	struct sse_viewer *v;
	struct MHD_Response *r;
	enum MHD_Result rc;
	unsigned slot;
	char *end;

	for (slot = 0; slot < ADMIN_SSE_MAX && a->viewers[slot]; slot++)
		;
	if (slot == ADMIN_SSE_MAX) {
		a->streams_refused++;
		return reply_text_headers(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
					  "too many live streams (16 at once): close one, or poll /v1/history", retry);
	}
	if (!(v = calloc(1, sizeof(*v))))
		return MHD_NO;
	v->a = a;
	v->conn = conn;
	v->slot = slot;
	v->next = a->hist.seq ? a->hist.seq : 1;
	if (from || last) {
		unsigned long long q;

		errno = 0;
		q = strtoull(from ? from : last, &end, 10);
		if (errno || *end || end == (from ? from : last)) {
			free(v);
			return reply_text(conn, MHD_HTTP_BAD_REQUEST, "bad from: a sample number (the events' id)");
		}
		v->next = last && !from ? q + 1 : q;
	}
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, v, sse_free);
	if (!r) {
		free(v);
		return MHD_NO;
	}
	a->viewers[slot] = v;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	rc = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return rc;
}

/* A record page is in (console_records.c): the suspended request goes on
 * and is answered with it. */
static void records_done(void *cookie, unsigned status, struct textbuf *body)
{
	struct admin_req *q = cookie;

	q->call = NULL;
	q->a->pages[q->slot] = NULL;
	q->slot = -1;
	q->answered = 1;
	q->status = status;
	q->body = *body;              /* the buffer is ours now */
	memset(body, 0, sizeof(*body));
	MHD_resume_connection(q->conn);
}

/* GET /v1/records/<topic>/<partition>?offset=|timestamp=&order=&limit=, or
 * (producers) GET /v1/producers/<topic>/<partition> */
static enum MHD_Result serve_records(struct admin_http *a, struct MHD_Connection *conn, struct admin_req *q,
				     const char *path, int producers)
{
	struct console_records_args args = {
		.offset = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "offset"),
		.timestamp = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "timestamp"),
		.order = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "order"),
		.limit = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "limit"),
	};
	struct textbuf t = { 0 };
	unsigned st;

	if (__atomic_load_n(&a->b->stopping, __ATOMIC_RELAXED))
		return reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "the broker is stopping");
	q->conn = conn;
	q->a = a;
	for (q->slot = 0; q->slot < (int)ADMIN_CONN_LIMIT && a->pages[q->slot]; q->slot++)
		;
	if (q->slot == (int)ADMIN_CONN_LIMIT) {   /* cannot be: one per connection */
		q->slot = -1;
		return reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "too many record pages at once");
	}
	st = producers ? console_producers_start(a->ctl, a->b, path, records_done, q, &q->call, &t)
		       : console_records_start(a->ctl, a->b, path, &args, records_done, q, &q->call, &t);
	if (st) {
		q->slot = -1;
		return reply(conn, st, "text/plain; charset=utf-8", &t);
	}
	a->pages[q->slot] = q;
	MHD_suspend_connection(conn);   /* records_done resumes it */
	return MHD_YES;
}

/* /v1/cluster, /v1/topics[/<name>], /v1/groups[/<id>], /v1/history, /v1/stream */
static enum MHD_Result serve_console(struct admin_http *a, struct MHD_Connection *conn, struct admin_req *q,
				     const char *rest)
{
	struct textbuf t = { 0 };

	if (!strcmp(rest, "stream"))
		return serve_stream(a, conn);
	if (!strncmp(rest, "records/", 8))
		return serve_records(a, conn, q, rest + 8, 0);
	if (!strncmp(rest, "producers/", 10))
		return serve_records(a, conn, q, rest + 10, 1);
	if (!strcmp(rest, "cluster")) {
		console_cluster_json(a->ctl, a->b, &a->hist, *a->profile_path ? &a->profile : NULL, a->profile_path, &t);
	} else if (!strcmp(rest, "history")) {
		rate_hist_json(&a->hist, &t);
	} else if (!strcmp(rest, "topics")) {
		console_topics_json(a->ctl, a->b, &t);
	} else if (!strncmp(rest, "topics/", 7) && rest[7]) {
		if (console_topic_json(a->ctl, a->b, rest + 7, &t) < 0) {
			textbuf_fini(&t);
			return reply_text(conn, MHD_HTTP_NOT_FOUND, "no such topic");
		}
	} else if (!strcmp(rest, "groups")) {
		console_groups_json(a->ctl, a->b, &t);
	} else if (!strcmp(rest, "transactions")) {
		console_transactions_json(a->ctl, a->b, &t);
	} else if (!strncmp(rest, "groups/", 7) && rest[7]) {
		if (console_group_json(a->ctl, a->b, rest + 7, &t) < 0) {
			textbuf_fini(&t);
			return reply_text(conn, MHD_HTTP_NOT_FOUND, "no such consumer group");
		}
	} else {
		return reply_text(conn, MHD_HTTP_NOT_FOUND,
				  "not found: try /v1/cluster, /v1/topics, /v1/topics/<name>, /v1/groups, "
				  "/v1/groups/<id>, /v1/records/<topic>/<partition>, /v1/producers/<topic>/<partition>, "
				  "/v1/transactions, /v1/history, /v1/stream");
	}
	return reply(conn, MHD_HTTP_OK, "application/json", &t);
}

/* POST /v1/tls/reload: the SSL listeners' certificates, keys and trusted
 * CAs, the inter-broker client's, the controller listener's (both sides)
 * and the admin endpoint's read again, as
 * SIGHUP does (a few milliseconds of this thread: files and key parsing);
 * and a SASL controller listener's JAAS config (its logins), this thread's
 * to replace. Each stands alone: one that fails keeps its previous one. */
static enum MHD_Result serve_tls_reload(struct admin_http *a, struct MHD_Connection *conn)
{
	struct textbuf t = { 0 };
	char err[512], jerr[768];
	int rc = listeners_tls_reload(a->b, err, sizeof(err));
	int jrc = listeners_controller_sasl_reload(a->b, jerr, sizeof(jerr));
	uint64_t reloads = 0;

	if (jrc > 0)
		slog(SLOG_NOTICE, "admin: the controller listener's logins reloaded: %s", jerr);
	else if (jrc != -ENOENT)
		slog(SLOG_WARN, "admin: the controller listener's logins not reloaded, the previous ones "
			"stay: %s", jerr);
	if (rc == -ENOENT && !a->tls && jrc == -ENOENT)
		return reply_text(conn, MHD_HTTP_CONFLICT, "no SSL listener: nothing to reload");
	if (rc < 0 && rc != -ENOENT) {
		textbuf_printf(&t, "{\"reloaded\": false, \"error\": \"");
		textbuf_escaped(&t, err);
		textbuf_printf(&t, "\"}\n");
		slog(SLOG_WARN, "admin: TLS reload failed, the previous certificates stay: %s", err);
		return reply(conn, MHD_HTTP_UNPROCESSABLE_CONTENT, "application/json", &t);
	}
	if (jrc < 0 && jrc != -ENOENT) {
		textbuf_printf(&t, "{\"reloaded\": false, \"error\": \"");
		textbuf_escaped(&t, jerr);
		textbuf_printf(&t, "\"}\n");
		return reply(conn, MHD_HTTP_UNPROCESSABLE_CONTENT, "application/json", &t);
	}
	if (rc == -ENOENT && !a->tls) {   /* the controller listener's logins alone */
		textbuf_printf(&t, "{\"reloaded\": true, \"reloads\": 0, \"controller_logins\": true}\n");
		return reply(conn, MHD_HTTP_OK, "application/json", &t);
	}
	if (a->tls && admin_tls_reload(a->cfg, err, sizeof(err)) < 0)
		slog(SLOG_WARN, "admin: the endpoint's certificate not reloaded, the previous one stays: %s",
			err);
	slog(SLOG_NOTICE, "admin: TLS certificates reloaded");
	for (int i = 0; i < a->b->set.nlisteners; i++)
		reloads += a->b->tls[i] ? tls_server_reloads(a->b->tls[i]) : 0;
	if (a->b->quorum_tls)
		reloads += tls_server_reloads(a->b->quorum_tls->server);
	textbuf_printf(&t, "{\"reloaded\": true, \"reloads\": %llu%s}\n", (unsigned long long)reloads,
		       jrc > 0 ? ", \"controller_logins\": true" : "");
	return reply(conn, MHD_HTTP_OK, "application/json", &t);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *peer_addr(struct MHD_Connection *conn, char *buf, size_t cap)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	snprintf(buf, cap, "?");
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)cap);
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)cap);
	return buf;
}

/* HTTP Basic against the SCRAM users of the metadata log: the password
 * is checked by recomputing the salted key from the credential's salt and
 * iteration count (a few milliseconds of this thread), and wiped after;
 * a user and password that passed in the last minute, for the same
 * credential, are known by their keyed digest instead (admin_basic.h). 0 with the principal ("User:<name>") in principal; -EACCES
 * with why and the user name (for the log; never the password). */
static int check_basic(struct admin_http *a, struct MHD_Connection *conn, char *principal, size_t plen, char *user,
		       size_t ulen, const char **why)
{
	const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	uint8_t raw[SASL_USER_MAX + 1024 + 4];
	const struct meta_scram *ms = metalog_scram(a->ctl->ml);
	const struct sasl_scram_cred *cred;
	const uint8_t *colon;
	int n, ok;
	size_t pwlen;

	user[0] = 0;
	if (!h || strncasecmp(h, "Basic ", 6)) {
		*why = h ? "not HTTP Basic" : "no credentials";
		return -EACCES;
	}
	h += 6;
	while (*h == ' ')
		h++;
	n = scram_b64_dec(h, strlen(h), raw, sizeof(raw) - 1);
	if (n < 0 || !(colon = memchr(raw, ':', (size_t)n)) || colon == raw || (size_t)(colon - raw) >= ulen) {
		OPENSSL_cleanse(raw, sizeof(raw));
		*why = "credentials that are not base64 of user:password";
		return -EACCES;
	}
	memcpy(user, raw, (size_t)(colon - raw));
	user[colon - raw] = 0;
	pwlen = (size_t)n - (size_t)(colon + 1 - raw);
	cred = ms ? meta_scram_find(ms, user, SASL_SCRAM_SHA_512) : NULL;
	if (!cred && ms)
		cred = meta_scram_find(ms, user, SASL_SCRAM_SHA_256);
	if (cred) {
		uint8_t digest[32];
		int64_t now = mono_ms();

		ok = admin_basic_lookup(&a->basic, cred, user, (const char *)colon + 1, pwlen, now, digest);
		if (!ok && (ok = sasl_scram_check_password(cred, (const char *)colon + 1, pwlen)) == 1)
			admin_basic_remember(&a->basic, digest, now);
		OPENSSL_cleanse(digest, sizeof(digest));
	} else {
		ok = 0;
	}
	OPENSSL_cleanse(raw, sizeof(raw));
	if (ok != 1) {
		*why = !cred ? "unknown user" : "wrong password";
		return -EACCES;
	}
	snprintf(principal, plen, "User:%s", user);
	return 0;
}

/* Authorization: Bearer <token> against admin.auth.token.file: 0 with
 * the token's principal, -EACCES with why. */
static int check_bearer(struct admin_http *a, const char *h, char *principal, size_t plen, const char **why)
{
	const char *p;
	size_t n;

	h += 7;
	while (*h == ' ')
		h++;
	for (n = 0; h[n] && h[n] != ' ' && h[n] != '\t'; n++)
		;
	if (!a->tokens) {
		*why = "a bearer token, but admin.auth.token.file is not set";
		return -EACCES;
	}
	if (!(p = admin_tokens_find(a->tokens, h, n))) {
		*why = "unknown bearer token";
		return -EACCES;
	}
	snprintf(principal, plen, "%s", p);
	return 0;
}

static int is_super_user(const struct admin_http *a, const char *principal)
{
	for (int i = 0; i < a->b->set.nsuper_users; i++)
		if (!strcmp(a->b->set.super_users[i], principal))
			return 1;
	return 0;
}

static enum MHD_Result reply_401(struct MHD_Connection *conn)
{
	static const char *const challenge[] = {
		MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Basic realm=\"sluice\", charset=\"UTF-8\"",
		MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"sluice\"", NULL,
	};

	return reply_text_headers(conn, MHD_HTTP_UNAUTHORIZED,
				  "authentication required: HTTP Basic with a SCRAM user of the cluster, a bearer "
				  "token of admin.auth.token.file or a client certificate (admin.require.auth=true)",
				  challenge);
}

/* s for the log: at most 100 bytes, anything unprintable as '?' (a user
 * name or path may carry a newline). */
static const char *printable(const char *s, char *buf, size_t cap)
{
	size_t n = 0;

	for (; *s && n + 1 < cap && n < 100; s++)
		buf[n++] = (unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f ? *s : '?';
	buf[n] = 0;
	return buf;
}

/* A refusal for the credentials: logged, then answered 401
 * after the delay (suspended meanwhile; answered at once when no slot
 * is free or there is no delay). */
static enum MHD_Result refuse(struct admin_http *a, struct MHD_Connection *conn, struct admin_req *q,
			      const char *method, const char *url, const char *user, const char *why)
{
	char addr[INET6_ADDRSTRLEN + 1], u[104], m[16], p[104];

	a->auth_failures++;
	slog(SLOG_WARN, "admin: authentication failed from %s (%s %s%s%s%s): %s",
		peer_addr(conn, addr, sizeof(addr)), printable(method, m, sizeof(m)), printable(url, p, sizeof(p)),
		*user ? ", user '" : "", printable(user, u, sizeof(u)), *user ? "'" : "", why);
	if (a->delay_ms > 0)
		for (unsigned i = 0; i < ADMIN_CONN_LIMIT; i++)
			if (!a->waits[i].conn) {
				a->waits[i].conn = conn;
				a->waits[i].q = q;
				a->waits[i].due_ms = mono_ms() + a->delay_ms;
				q->refused = 1;
				MHD_suspend_connection(conn);
				return MHD_YES;
			}
	return reply_401(conn);
}

static void completed(void *cls, struct MHD_Connection *conn, void **req_cls, enum MHD_RequestTerminationCode toe)
{
	struct admin_req *q = *req_cls;
	struct admin_http *a = cls;

	(void)conn;
	(void)toe;
	if (q && q->call)
		console_call_cancel(q->call);   /* its answer comes to nobody */
	if (q && q->slot >= 0)
		a->pages[q->slot] = NULL;
	if (q)
		textbuf_fini(&q->body);
	free(q);
	*req_cls = NULL;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_len, void **req_cls)
{
	struct admin_http *a = cls;
	struct admin_req *q = *req_cls;

	(void)version;
	(void)upload;
	if (!q) {
		/* first call: headers only; answer on the next call, once any
		 * body has been read (and discarded) */
		if (!(q = calloc(1, sizeof(*q))))
			return MHD_NO;
		q->slot = -1;
		*req_cls = q;
		return MHD_YES;
	}
	if (*upload_len) {
		*upload_len = 0;   /* no endpoint takes a body: drop it */
		return MHD_YES;
	}
	if (q->refused == 2)
		return reply_401(conn);   /* resumed after the delay */
	if (q->answered) {
		/* a record page, resumed with its answer */
		struct textbuf body = q->body;

		memset(&q->body, 0, sizeof(q->body));
		q->answered = 0;
		return reply(conn, q->status, q->status == MHD_HTTP_OK ? "application/json" : "text/plain; charset=utf-8",
			     &body);
	}
	if (q->call)
		return MHD_YES;           /* still reading (a spurious call) */
	if (q->refused)
		return MHD_YES;
	a->requests++;
	if (a->require_auth && !(a->metrics_open && !strcmp(url, "/metrics") &&
				 (!strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD)))) {
		char principal[5 + SASL_USER_MAX], user[SASL_USER_MAX];
		const char *why = "";
		const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
		int rc;

		/* credentials in the request win; without them a client
		 * certificate (verified, mapped) stands for its principal */
		user[0] = 0;
		rc = a->tls && !h ? admin_tls_peer(conn, a->principal_rules, principal, sizeof(principal), &why) : 0;
		if (rc < 0)
			return refuse(a, conn, q, method, url, user, why);
		if (rc > 0) {
			/* a verified client certificate: its principal */
		} else if (h && !strncasecmp(h, "Bearer ", 7)) {
			if (check_bearer(a, h, principal, sizeof(principal), &why) < 0)
				return refuse(a, conn, q, method, url, user, why);
		} else if (check_basic(a, conn, principal, sizeof(principal), user, sizeof(user), &why) < 0) {
			return refuse(a, conn, q, method, url, user, why);
		}
		/* reading is for any user of the cluster; what changes the
		 * broker (POST) is for super.users */
		if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD) &&
		    !is_super_user(a, principal)) {
			char addr[INET6_ADDRSTRLEN + 1], u[104], p[104], m[16];

			slog(SLOG_WARN, "admin: %s %s refused to %s from %s: not in super.users",
				printable(method, m, sizeof(m)), printable(url, p, sizeof(p)),
				printable(principal, u, sizeof(u)), peer_addr(conn, addr, sizeof(addr)));
			return reply_text(conn, MHD_HTTP_FORBIDDEN, "forbidden: only super.users may do this");
		}
	}
	if (!strcmp(url, "/v1/tls/reload") && !strcmp(method, MHD_HTTP_METHOD_POST))
		return serve_tls_reload(a, conn);
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
		static const char *const allow[] = { MHD_HTTP_HEADER_ALLOW, "GET, HEAD", NULL };

		return reply_text_headers(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: only GET and HEAD",
					  allow);
	}
	if (!strcmp(url, "/metrics"))
		return serve_metrics(a, conn);
	if (!strcmp(url, "/v1/health"))
		return serve_health(a, conn);
	if (!strcmp(url, "/v1/config"))
		return serve_config(a, conn);
	if (!strcmp(url, "/v1/shards"))
		return serve_shards(a, conn);
	if (!strncmp(url, "/v1/partitions/", 15))
		return serve_partition(a, conn, url + 15);
	if (!strncmp(url, "/ui", 3) || !strcmp(url, "/"))
		return serve_asset(conn, url);
	if (!strncmp(url, "/v1/", 4))
		return serve_console(a, conn, q, url + 4);
	return reply_text(conn, MHD_HTTP_NOT_FOUND,
			  "not found: try /ui/ (the console), /metrics, /v1/health, /v1/config, /v1/shards, "
			  "/v1/partitions/<topic>/<n>, /v1/cluster, /v1/topics, /v1/groups, /v1/records, "
			  "/v1/transactions, /v1/history, /v1/stream");
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	slog(SLOG_WARN, "admin http: %s", msg);
}

/* Each connection's start and end: which certificates an HTTPS session
 * may hold (admin_tls.h). */
static void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
			enum MHD_ConnectionNotificationCode toe)
{
	(void)c;
	if (!((struct admin_http *)cls)->tls)
		return;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		*socket_context = admin_tls_conn_start();
	else
		admin_tls_conn_end(*socket_context);
}

/* 127.0.0.0/8 or ::1 */
static int addr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return 0;
}

int admin_http_start(struct ctl *ctl, struct broker *b, const struct config *cfg, struct admin_http **out,
		     char *err, size_t errlen)
{
	int tls = (int)config_int(cfg, "admin.ssl.enabled");
	const char *spec = config_str(cfg, "admin.listen");
	const char *src = config_source(cfg, "admin.listen");
	int explicit_ = src && strcmp(src, "default");
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	struct admin_http *a;
	char host[256], port_s[16];
	const union MHD_DaemonInfo *info;
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
	int port, rc;

	*out = NULL;
	if (!*spec)
		return 0;
	if (config_hostport(spec, host, sizeof(host), &port) < 0) {
		snprintf(err, errlen, "admin.listen: cannot parse '%s'", spec);
		return -EINVAL;
	}
	snprintf(port_s, sizeof(port_s), "%d", port);
	rc = getaddrinfo(host, port_s, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "admin.listen: %s: %s", host, gai_strerror(rc));
		return -EINVAL;
	}
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (!tls && strcmp(config_str(cfg, "admin.ssl.client.auth"), "none")) {
		snprintf(err, errlen, "admin.ssl.client.auth=%s needs admin.ssl.enabled=true",
			 config_str(cfg, "admin.ssl.client.auth"));
		freeaddrinfo(ai);
		return -EINVAL;
	}
	if (tls) {
		/* the certificate goes to each handshake from admin_tls.c,
		 * which checks client certificates against its trusted CAs
		 * (SIGHUP renews both) */
		if ((rc = admin_tls_load(cfg, err, errlen)) < 0) {
			admin_tls_fini();
			freeaddrinfo(ai);
			return rc;
		}
		flags |= MHD_USE_TLS;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		admin_tls_fini();
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	a->ctl = ctl;
	a->b = b;
	a->cfg = cfg;
	rate_hist_init(&a->hist);
	if (admin_basic_init(&a->basic) < 0)
		slog(SLOG_WARN, "admin: no random bytes: HTTP Basic passwords are checked in full each "
			"request");
	a->require_auth = (int)config_int(cfg, "admin.require.auth");
	a->metrics_open = (int)config_int(cfg, "admin.metrics.open");
	a->token_file = config_str(cfg, "admin.auth.token.file");
	a->tls = tls;
	a->principal_rules = config_str(cfg, "ssl.principal.mapping.rules");
	a->profile_path = config_str(cfg, "hardware.profile");
	if (*a->profile_path && (rc = hw_profile_load(a->profile_path, &a->profile, err, errlen)) < 0) {
		size_t n = strlen(err);

		snprintf(err + n, errlen - n, " (hardware.profile: fix the file, or unset the key)");
		freeaddrinfo(ai);
		admin_tls_fini();
		free(a);
		return rc == -EINVAL ? rc : -EINVAL;
	}
	if (*a->token_file && (rc = admin_tokens_load(a->token_file, &a->tokens, err, errlen)) < 0) {
		freeaddrinfo(ai);
		admin_tls_fini();
		free(a);
		return rc;
	}
	if (!a->require_auth && !addr_is_loopback(ai->ai_addr))
		slog(SLOG_WARN, "admin: WARNING: the admin endpoint listens on %s, beyond loopback, with "
			"admin.require.auth=false: anyone who reaches it reads the configuration and metrics and may "
			"POST (reload certificates); set admin.require.auth=true, or admin.listen to 127.0.0.1", spec);
	a->delay_ms = config_int(cfg, "connection.failed.authentication.delay.ms");
	a->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handle, a,
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				MHD_OPTION_NOTIFY_COMPLETED, completed, a,
				MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)ADMIN_CONN_MEMORY,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ADMIN_CONN_TIMEOUT_S,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)ADMIN_CONN_LIMIT,
				MHD_OPTION_NOTIFY_CONNECTION, conn_notify, a,
				/* with TLS only: MHD_OPTION_END ends the list here otherwise */
				tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, admin_tls_cert_callback(),
				MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!a->d)
		admin_tls_fini();
	if (!a->d && tls) {
		admin_tokens_free(a->tokens);
		free(a);
		snprintf(err, errlen, "admin.ssl.enabled: cannot serve HTTPS on %s: the port is taken, or the "
			 "certificate or key (ssl.keystore.*) does not load (the log above says which)", spec);
		return -EINVAL;
	}
	if (!a->d) {
		admin_tokens_free(a->tokens);
		free(a);
		snprintf(err, errlen, "admin.listen: cannot listen on %s (in use?)%s", spec,
			 explicit_ ? "" : ": the admin endpoint is off");
		return explicit_ ? -EADDRINUSE : 0;
	}
	info = MHD_get_daemon_info(a->d, MHD_DAEMON_INFO_BIND_PORT);
	a->port = info ? info->port : port;
	*out = a;
	return 0;
}

int admin_http_fd(const struct admin_http *a)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->d, MHD_DAEMON_INFO_EPOLL_FD);

	return info ? info->epoll_fd : -1;
}

int admin_http_port(const struct admin_http *a)
{
	return a->port;
}

int admin_http_timeout(struct admin_http *a, int max_ms)
{
	MHD_UNSIGNED_LONG_LONG t;
	int64_t now = mono_ms();

	for (unsigned i = 0; i < ADMIN_CONN_LIMIT; i++)
		if (a->waits[i].conn) {
			int64_t left = a->waits[i].due_ms > now ? a->waits[i].due_ms - now : 0;

			if (max_ms < 0 || left < max_ms)
				max_ms = (int)left;
		}
	if (max_ms < 0 || rate_hist_due_in(&a->hist, now) < max_ms)
		max_ms = rate_hist_due_in(&a->hist, now);
	if (MHD_get_timeout(a->d, &t) == MHD_YES && t < (MHD_UNSIGNED_LONG_LONG)max_ms)
		return (int)t;
	return max_ms;
}

void admin_http_run(struct admin_http *a)
{
	int64_t now = mono_ms();

	/* refusals whose delay is over are answered (their 401) */
	for (unsigned i = 0; i < ADMIN_CONN_LIMIT; i++)
		if (a->waits[i].conn && a->waits[i].due_ms <= now) {
			a->waits[i].q->refused = 2;
			MHD_resume_connection(a->waits[i].conn);
			a->waits[i].conn = NULL;
		}
	/* a new sample: the streams waiting for it go on */
	if (rate_hist_tick(&a->hist, a->ctl, a->b, now))
		for (unsigned i = 0; i < ADMIN_SSE_MAX; i++)
			if (a->viewers[i] && a->viewers[i]->suspended) {
				a->viewers[i]->suspended = 0;
				MHD_resume_connection(a->viewers[i]->conn);
			}
	MHD_run(a->d);
}

void admin_http_stop(struct admin_http *a)
{
	if (!a)
		return;
	for (unsigned i = 0; i < ADMIN_CONN_LIMIT; i++)
		if (a->waits[i].conn) {   /* MHD stops no daemon with suspended connections */
			a->waits[i].q->refused = 2;
			MHD_resume_connection(a->waits[i].conn);
		}
	for (unsigned i = 0; i < ADMIN_CONN_LIMIT; i++)
		if (a->pages[i]) {   /* a record page still being read: answered 503 */
			struct admin_req *q = a->pages[i];

			console_call_cancel(q->call);
			q->call = NULL;
			q->answered = 1;
			q->status = MHD_HTTP_SERVICE_UNAVAILABLE;
			textbuf_printf(&q->body, "the broker is stopping\n");
			a->pages[i] = NULL;
			q->slot = -1;
			MHD_resume_connection(q->conn);
		}
	for (unsigned i = 0; i < ADMIN_SSE_MAX; i++)
		if (a->viewers[i]) {
			a->viewers[i]->ending = 1;
			if (a->viewers[i]->suspended)
				MHD_resume_connection(a->viewers[i]->conn);
			a->viewers[i]->suspended = 0;
		}
	MHD_stop_daemon(a->d);
	if (a->tls)
		admin_tls_fini();
	admin_tokens_free(a->tokens);
	admin_basic_clear(&a->basic);
	free(a);
}

void admin_http_reload(struct admin_http *a)
{
	struct admin_tokens *t;
	char err[512];

	if (!a)
		return;
	admin_basic_clear(&a->basic);   /* every password is checked in full again */
	if (a->tls && admin_tls_reload(a->cfg, err, sizeof(err)) < 0)
		slog(SLOG_WARN, "SIGHUP: the admin endpoint's certificate not reloaded, the previous one "
			"stays: %s", err);
	else if (a->tls)
		slog(SLOG_NOTICE, "SIGHUP: the admin endpoint's certificate reloaded");
	if (!*a->token_file)
		return;
	if (admin_tokens_load(a->token_file, &t, err, sizeof(err)) < 0) {
		slog(SLOG_WARN, "SIGHUP: admin tokens not reloaded, the previous ones stay: %s", err);
		return;
	}
	admin_tokens_free(a->tokens);
	a->tokens = t;
	slog(SLOG_NOTICE, "SIGHUP: admin tokens reloaded (%d)", admin_tokens_count(t));
}

uint64_t admin_http_auth_failures(const struct admin_http *a)
{
	return a ? a->auth_failures : 0;
}
