/* control/sluicectl_cmd.c — what every sluicectl command uses: small
 * parsers and the murmur2 partitioner, messages and exit codes, the
 * connection to the cluster and its lookups (metadata, leaders, versions,
 * offsets), and the parsed options. The commands (sluicectl.c and
 * sluicectl_*.c) build on it. See sluicectl.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "control/sluicectl.h"

/* ---- small utilities ---------------------------------------------------- */

bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool parse_time_ms(const char *s, int64_t *out)
{
	struct tm tm;
	const char *end;

	if (parse_i64(s, 0, INT64_MAX, out))
		return true;
	memset(&tm, 0, sizeof tm);
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		end = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
	if (!end || (*end && strcmp(end, "Z")))
		return false;
	*out = (int64_t)timegm(&tm) * 1000;
	return true;
}

uint32_t murmur2(const void *key, size_t len)
{
	const uint8_t *p = key;
	const uint32_t m = 0x5bd1e995;
	uint32_t h = 0x9747b28c ^ (uint32_t)len;
	size_t i = 0;

	for (; i + 4 <= len; i += 4) {
		uint32_t k = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 | (uint32_t)p[i + 2] << 16 |
			     (uint32_t)p[i + 3] << 24;

		k *= m;
		k ^= k >> 24;
		k *= m;
		h *= m;
		h ^= k;
	}
	switch (len - i) {
	case 3: h ^= (uint32_t)p[i + 2] << 16; /* fall through */
	case 2: h ^= (uint32_t)p[i + 1] << 8;  /* fall through */
	case 1: h ^= p[i]; h *= m;
	}
	h ^= h >> 13;
	h *= m;
	h ^= h >> 15;
	return h;
}

/* Print text from column col, wrapped at 80 columns; later lines start at
 * column indent. Ends the line. */
void wrap(FILE *f, int col, int indent, const char *text)
{
	while (*text) {
		int room = 80 - col, n = (int)strlen(text);

		if (n > room) {
			int cut = room;

			while (cut > 0 && text[cut] != ' ')
				cut--;
			n = cut > 0 ? cut : room;
		}
		fprintf(f, "%.*s\n", n, text);
		text += n;
		while (*text == ' ')
			text++;
		if (*text)
			fprintf(f, "%*s", indent, "");
		col = indent;
	}
}

/* ---- messages and exit codes ----------------------------------------------- */

int ctl_kafka_error(struct ctl *c, int16_t code, struct kafka_str msg, const char *what, ...)
{
	char line[2048];
	size_t l;
	va_list ap;

	l = (size_t)snprintf(line, sizeof line, "sluicectl: %s: ", c->cmd);
	va_start(ap, what);
	if (l < sizeof line)
		l += (size_t)vsnprintf(line + l, sizeof line - l, what, ap);
	va_end(ap);
	if (l < sizeof line)
		l += (size_t)snprintf(line + l, sizeof line - l, ": %s (%d)", kerr_name(code), code);
	if (msg.len > 0 && l < sizeof line)
		snprintf(line + l, sizeof line - l, ": %.*s", (int)msg.len, msg.ptr);
	wrap(stderr, 0, 4, line);
	fprintf(stderr, "  what to do: ");
	wrap(stderr, 14, 4, kerr_advice(code));
	return EXIT_KAFKA;
}

int ctl_usage(struct ctl *c, const char *f, ...)
{
	va_list ap;

	fprintf(stderr, "sluicectl: %s: ", c->cmd ? c->cmd : "usage");
	va_start(ap, f);
	vfprintf(stderr, f, ap);
	va_end(ap);
	fprintf(stderr, "\n  see: sluicectl %s --help\n", c->cmd ? c->cmd : "");
	return EXIT_USAGE;
}

int ctl_fail(struct ctl *c, const char *f, ...)
{
	va_list ap;

	fprintf(stderr, "sluicectl: %s: ", c->cmd);
	va_start(ap, f);
	vfprintf(stderr, f, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_KAFKA;
}

/* ---- connections ---------------------------------------------------------- */

static bool split_hostport(const char *s, size_t n, char *host, size_t hcap, int *port)
{
	const char *colon = NULL;
	int64_t p;
	char ports[16];

	for (size_t i = 0; i < n; i++)
		if (s[i] == ':')
			colon = s + i;
	if (!colon || colon == s || (size_t)(colon - s) >= hcap || s + n - colon - 1 >= (long)sizeof ports)
		return false;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {   /* [::1]:9092 */
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = 0;
	}
	memcpy(ports, colon + 1, (size_t)(s + n - colon - 1));
	ports[s + n - colon - 1] = 0;
	if (!parse_i64(ports, 1, 65535, &p))
		return false;
	*port = (int)p;
	return true;
}

struct kclient *ctl_client(struct ctl *c)
{
	const char *s = c->bootstrap;
	char tried[1024] = "";
	size_t tl = 0;

	if (c->boot.fd >= 0)
		return &c->boot;
	while (*s) {
		size_t n = strcspn(s, ",");
		char host[256];
		int port;

		if (n && split_hostport(s, n, host, sizeof host, &port)) {
			int rc = kclient_open(&c->boot, host, port, c->timeout_ms, &c->sec);

			if (!rc)
				return &c->boot;
			if (rc == -EACCES) {
				/* the broker answered: another one would refuse the same credentials */
				fprintf(stderr, "sluicectl: %s: authentication failed: %s\n  what to do: ", c->cmd, c->boot.err);
				wrap(stderr, 14, 4, "check the user name and password of --command-config (sasl.jaas.config, "
				     "or sasl.username and sasl.password) and sasl.mechanism; `sluicectl user list` on a "
				     "listener you may use shows the users and their mechanisms");
				exit(EXIT_KAFKA);
			}
			tl += (size_t)snprintf(tried + tl, tl < sizeof tried ? sizeof tried - tl : 0,
					       "\n  %s", c->boot.err);
			kclient_close(&c->boot);
		} else if (n) {
			fprintf(stderr, "sluicectl: bad broker address '%.*s' (want HOST:PORT)\n", (int)n, s);
			exit(EXIT_USAGE);
		}
		s += n + (s[n] == ',');
	}
	fprintf(stderr, "sluicectl: %s: no broker reachable (bootstrap %s):%s\n  what to do: ",
		c->cmd, c->bootstrap, tried);
	wrap(stderr, 14, 4, c->sec.protocol != SEC_PLAINTEXT
	     ? "check that sluiced is running and listening there with the security protocol of "
	       "--command-config (TLS: ssl.truststore.location names the CA that signed the broker's "
	       "certificate); pass -b HOST:PORT or set SLUICE_BROKERS"
	     : "check that sluiced is running and listening there (its log says "
	       "'listening on HOST:PORT'); pass -b HOST:PORT or set SLUICE_BROKERS; a TLS or SASL listener "
	       "needs --command-config");
	exit(EXIT_KAFKA);
}

struct kclient *ctl_node_try(struct ctl *c, int32_t node_id, struct kafka_str host, int32_t port)
{
	struct kclient *boot = ctl_client(c);
	const char *h = kstr(host);

	if (port == boot->port && !strcmp(h, boot->host))
		return boot;
	for (int i = 0; i < c->nnodes; i++)
		if (c->node_ids[i] == node_id && c->nodes[i].fd >= 0)
			return &c->nodes[i];
	if (c->nnodes == (int)(sizeof c->nodes / sizeof c->nodes[0]))
		return boot;
	if (kclient_open(&c->nodes[c->nnodes], h, port, c->timeout_ms, &c->sec)) {
		snprintf(c->node_err, sizeof c->node_err, "%s", c->nodes[c->nnodes].err);
		return NULL;
	}
	c->node_ids[c->nnodes] = node_id;
	return &c->nodes[c->nnodes++];
}

const char *ctl_node_err(struct ctl *c)
{
	return c->node_err;
}

struct kclient *ctl_node(struct ctl *c, int32_t node_id, struct kafka_str host, int32_t port)
{
	struct kclient *k = ctl_node_try(c, node_id, host, port);

	if (!k) {
		fprintf(stderr, "sluicectl: %s: broker %d: %s\n  what to do: ", c->cmd, node_id, c->node_err);
		wrap(stderr, 14, 4, fmt("check that broker %d is up and that its advertised.listeners are "
					"reachable from here", node_id));
		exit(EXIT_KAFKA);
	}
	return k;
}

int16_t ctl_version(struct ctl *c, struct kclient *k, int16_t api_key, int16_t want_max)
{
	int v = kclient_version(k, api_key, want_max);
	const struct kafka_api *api = kafka_api_find(api_key);

	if (v < 0) {
		fprintf(stderr, "sluicectl: %s: %s:%d does not serve %s in a version sluicectl speaks\n"
			"  what to do: upgrade the broker, or use a broker that serves it\n",
			c->cmd, k->host, k->port, api ? api->name : "this API");
		exit(EXIT_KAFKA);
	}
	return (int16_t)v;
}

void ctl_call_failed(struct ctl *c, struct kclient *k, int rc)
{
	fprintf(stderr, "sluicectl: %s: %s\n  what to do: check the broker (its log), or raise "
		"--timeout for a slow operation\n", c->cmd, k->err[0] ? k->err : strerror(-rc));
	exit(EXIT_KAFKA);
}

void *ctl_call(struct ctl *c, struct kclient *k, int16_t api_key, int16_t version, const void *body)
{
	void *resp;
	int rc = kclient_call(k, api_key, version, body, false, &resp);

	if (rc)
		ctl_call_failed(c, k, rc);
	return resp;
}

int ctl_describe_quorum(struct kclient *k, const struct kafka_describe_quorum_response_partition_data **out,
			int16_t *err)
{
	struct kafka_describe_quorum_request req;
	struct kafka_describe_quorum_request_topic_data t;
	struct kafka_describe_quorum_request_partition_data p = { 0 };
	struct kafka_describe_quorum_response *resp;
	int v = kclient_version(k, KAFKA_DESCRIBE_QUORUM_KEY, 2);
	int rc;

	*out = NULL;
	*err = 0;
	if (v < 0)
		return 1;
	kafka_describe_quorum_request_init(&req);
	t.TopicName = (struct kafka_str){ "__cluster_metadata", 18 };
	t.Partitions.items = &p;
	t.Partitions.count = 1;
	req.Topics.items = &t;
	req.Topics.count = 1;
	if ((rc = kclient_call(k, KAFKA_DESCRIBE_QUORUM_KEY, (int16_t)v, &req, false, (void **)&resp)))
		return rc;
	*err = resp->ErrorCode;
	if (resp->ErrorCode || resp->Topics.count < 1 || resp->Topics.items[0].Partitions.count < 1) {
		*err = *err ? *err : KERR_UNKNOWN_SERVER_ERROR;
		return 0;
	}
	*err = resp->Topics.items[0].Partitions.items[0].ErrorCode;
	if (!*err)
		*out = &resp->Topics.items[0].Partitions.items[0];
	return 0;
}

/* The last Metadata answer, for leader lookups. */
static struct kafka_metadata_response *last_md;

struct kafka_metadata_response *ctl_metadata(struct ctl *c, const char *const *topics, int n)
{
	struct kclient *k = ctl_client(c);
	struct kafka_metadata_request req;
	struct kafka_metadata_request_metadata_request_topic *t = NULL;
	int16_t v = ctl_version(c, k, KAFKA_METADATA_KEY, 6);

	kafka_metadata_request_init(&req);
	if (topics) {
		t = calloc((size_t)n + 1, sizeof *t);
		for (int i = 0; i < n; i++)
			t[i].Name = (struct kafka_str){ topics[i], (int32_t)strlen(topics[i]) };
		req.Topics.items = t;
		req.Topics.count = n;
	} else {
		req.Topics.count = v >= 1 ? -1 : 0;   /* null: every topic */
	}
	req.AllowAutoTopicCreation = false;   /* v4+; below it a lookup could create the topic */
	last_md = ctl_call(c, k, KAFKA_METADATA_KEY, v, &req);
	free(t);
	return last_md;
}

struct kclient *ctl_leader(struct ctl *c, int32_t leader)
{
	for (int32_t i = 0; last_md && i < last_md->Brokers.count; i++) {
		const struct kafka_metadata_response_metadata_response_broker *b = &last_md->Brokers.items[i];

		if (b->NodeId == leader)
			return ctl_node(c, b->NodeId, b->Host, b->Port);
	}
	return ctl_client(c);
}

struct kclient *ctl_node_of(struct ctl *c, int32_t id)
{
	for (int32_t i = 0; last_md && i < last_md->Brokers.count; i++) {
		const struct kafka_metadata_response_metadata_response_broker *b = &last_md->Brokers.items[i];

		if (b->NodeId == id)
			return ctl_node_try(c, b->NodeId, b->Host, b->Port);
	}
	return NULL;
}

int ctl_list_offsets(struct ctl *c, const struct kafka_metadata_response_metadata_response_topic *t,
		     int64_t timestamp, int64_t *out, int16_t *err)
{
	int32_t n = t->Partitions.count;
	bool *done = calloc((size_t)n + 1, sizeof *done);

	*err = 0;
	for (int32_t i = 0; i < n; i++)
		out[i] = -1;
	/* One request per leader. */
	for (int32_t i = 0; i < n; i++) {
		int32_t leader = t->Partitions.items[i].LeaderId;
		struct kafka_list_offsets_request req;
		struct kafka_list_offsets_request_list_offsets_topic rt;
		struct kafka_list_offsets_request_list_offsets_partition *rp;
		struct kafka_list_offsets_response *resp;
		struct kclient *k;
		struct kclient_mem *mark;
		int32_t m = 0;

		if (done[i])
			continue;
		rp = calloc((size_t)n, sizeof *rp);
		for (int32_t j = i; j < n; j++) {
			if (done[j] || t->Partitions.items[j].LeaderId != leader)
				continue;
			done[j] = true;
			rp[m].PartitionIndex = t->Partitions.items[j].PartitionIndex;
			rp[m].Timestamp = timestamp;
			m++;
		}
		k = ctl_leader(c, leader);
		mark = k->mem;   /* the answer is copied out, then freed */
		kafka_list_offsets_request_init(&req);
		req.ReplicaId = -1;
		rt.Name = t->Name;
		rt.Partitions.items = rp;
		rt.Partitions.count = m;
		req.Topics.items = &rt;
		req.Topics.count = 1;
		resp = ctl_call(c, k, KAFKA_LIST_OFFSETS_KEY, ctl_version(c, k, KAFKA_LIST_OFFSETS_KEY, 3), &req);
		free(rp);
		for (int32_t a = 0; a < resp->Topics.count; a++) {
			for (int32_t b = 0; b < resp->Topics.items[a].Partitions.count; b++) {
				const struct kafka_list_offsets_response_list_offsets_partition_response *pr =
					&resp->Topics.items[a].Partitions.items[b];

				for (int32_t j = 0; j < n; j++) {
					if (t->Partitions.items[j].PartitionIndex != pr->PartitionIndex)
						continue;
					if (pr->ErrorCode && !*err)
						*err = pr->ErrorCode;
					out[j] = pr->ErrorCode ? -1 : pr->Offset;
				}
			}
		}
		kclient_release_to(k, mark);
	}
	free(done);
	return *err ? -EIO : 0;
}

int ctl_topic_repl(struct ctl *c, const struct kafka_str *names, int n, struct topic_repl *out)
{
	return ctl_topic_repl_on(ctl_client(c), names, n, out);
}

int ctl_topic_repl_on(struct kclient *k, const struct kafka_str *names, int n, struct topic_repl *out)
{
	static const struct kafka_str keys[] = { { "min.insync.replicas", 19 },
						 { "unclean.leader.election.enable", 30 } };
	struct kafka_describe_configs_request req;
	struct kafka_describe_configs_request_describe_configs_resource *res;
	struct kafka_describe_configs_response *resp;
	int v = kclient_version(k, KAFKA_DESCRIBE_CONFIGS_KEY, 2);

	for (int i = 0; i < n; i++)
		out[i] = (struct topic_repl){ -1, false, -1, false };
	if (v < 0)
		return -ENOTSUP;
	if (n <= 0)
		return 0;
	res = calloc((size_t)n, sizeof *res);
	if (!res)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		res[i].ResourceType = 2;   /* TOPIC */
		res[i].ResourceName = names[i];
		res[i].ConfigurationKeys.items = (struct kafka_str *)keys;
		res[i].ConfigurationKeys.count = 2;
	}
	kafka_describe_configs_request_init(&req);
	req.Resources.items = res;
	req.Resources.count = n;
	if (kclient_call(k, KAFKA_DESCRIBE_CONFIGS_KEY, (int16_t)v, &req, false, (void **)&resp)) {
		free(res);
		return -EIO;
	}
	free(res);
	for (int32_t i = 0; i < resp->Results.count; i++) {
		const struct kafka_describe_configs_response_describe_configs_result *r = &resp->Results.items[i];
		struct topic_repl *o = NULL;

		for (int j = 0; j < n && !o; j++)
			if (r->ResourceName.len == names[j].len &&
			    !memcmp(r->ResourceName.ptr, names[j].ptr, (size_t)names[j].len))
				o = &out[j];
		if (!o || r->ErrorCode)
			continue;
		o->unclean = 0;   /* absent: not set (Kafka's default, false) */
		for (int32_t j = 0; j < r->Configs.count; j++) {
			const struct kafka_describe_configs_response_describe_configs_resource_result *e =
				&r->Configs.items[j];
			bool on_topic = v >= 1 ? e->ConfigSource == 1 : !e->IsDefault;
			int64_t x;

			if (kafka_str_eq(e->Name, "min.insync.replicas") && e->Value.len > 0 &&
			    parse_i64(kstr(e->Value), 0, INT32_MAX, &x)) {
				o->min_isr = (int32_t)x;
				o->min_isr_on_topic = on_topic;
			} else if (kafka_str_eq(e->Name, "unclean.leader.election.enable") && e->Value.len > 0) {
				o->unclean = kafka_str_eq(e->Value, "true");
				o->unclean_on_topic = on_topic;
			}
		}
	}
	return 0;
}

/* ---- options ------------------------------------------------------------- */

const char *opt_get(const struct args *a, const char *name)
{
	const char *v = NULL;

	for (int i = 0; i < a->nopt; i++)
		if (!strcmp(a->spec[i]->name, name))
			v = a->val[i];
	return v;
}

bool opt_has(const struct args *a, const char *name)
{
	return opt_get(a, name) != NULL;
}

int opt_all(const struct args *a, const char *name, const char **out, int cap)
{
	int n = 0;

	for (int i = 0; i < a->nopt && n < cap; i++)
		if (!strcmp(a->spec[i]->name, name))
			out[n++] = a->val[i];
	return n;
}
