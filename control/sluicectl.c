/* control/sluicectl.c — the operator's CLI: argument parsing, --help and
 * bash completion from one command table, the shared Kafka lookups, and the
 * cluster command. Topics: sluicectl_topic.c; groups: sluicectl_group.c;
 * records: sluicectl_record.c. See sluicectl.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/sluicectl.h"

#define DEFAULT_BOOTSTRAP "127.0.0.1:9092"
#define DEFAULT_TIMEOUT_MS 10000

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
			if (!kclient_open(&c->boot, host, port, c->timeout_ms))
				return &c->boot;
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
	wrap(stderr, 14, 4, "check that sluiced is running and listening there (its log says "
	     "'listening on HOST:PORT'); pass -b HOST:PORT or set SLUICE_BROKERS");
	exit(EXIT_KAFKA);
}

struct kclient *ctl_node(struct ctl *c, int32_t node_id, struct kafka_str host, int32_t port)
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
	if (kclient_open(&c->nodes[c->nnodes], h, port, c->timeout_ms)) {
		fprintf(stderr, "sluicectl: %s: broker %d: %s\n  what to do: ", c->cmd, node_id,
			c->nodes[c->nnodes].err);
		wrap(stderr, 14, 4, fmt("check that broker %d is up and that its advertised.listeners are "
					"reachable from here", node_id));
		exit(EXIT_KAFKA);
	}
	c->node_ids[c->nnodes] = node_id;
	return &c->nodes[c->nnodes++];
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

void *ctl_call(struct ctl *c, struct kclient *k, int16_t api_key, int16_t version, const void *body)
{
	void *resp;
	int rc = kclient_call(k, api_key, version, body, false, &resp);

	if (rc) {
		fprintf(stderr, "sluicectl: %s: %s\n  what to do: check the broker (its log), or raise "
			"--timeout for a slow operation\n", c->cmd, k->err[0] ? k->err : strerror(-rc));
		exit(EXIT_KAFKA);
	}
	return resp;
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

/* ---- cluster info -------------------------------------------------------- */

/* What the admin endpoint says about the broker it serves: its shard count
 * (/v1/shards) and health (/v1/health), and which node that is. */
struct admin_view {
	int32_t node;               /* -1: the endpoint answered for no known node */
	int64_t shards;             /* -1 unknown */
	char health[32];            /* "" unknown */
	char reasons[512];          /* /v1/health's first reason, when not ready */
};

static void admin_view_get(struct ctl *c, const struct kafka_metadata_response *md, struct admin_view *v)
{
	static const char unknown[] = "shards and health shown as unknown";
	struct http_reply r;
	int st;

	v->node = -1;
	v->shards = -1;
	v->health[0] = v->reasons[0] = 0;
	st = ctl_admin_get(c, "/v1/shards", unknown, &r);
	if (st == 200) {
		int64_t n = 0;

		for (const char *p = strstr(r.body, "\"shard\":"); p; p = strstr(p + 1, "\"shard\":"))
			n++;
		v->shards = n;
	}
	http_reply_fini(&r);
	st = ctl_admin_get(c, "/v1/health", unknown, &r);
	if (st == 200 || st == 503) {
		const char *rs = strstr(r.body, "\"reasons\"");
		size_t n = 0;

		json_get_str(r.body, r.body + r.len, "status", v->health, sizeof v->health);
		if (rs && (rs = strchr(rs, '[')) && rs[1] == '"')   /* the first reason */
			for (rs += 2; *rs && *rs != '"' && n + 1 < sizeof v->reasons; rs++)
				v->reasons[n++] = *rs == '\\' && rs[1] ? *++rs : *rs;
		v->reasons[n] = 0;
	}
	http_reply_fini(&r);
	v->node = ctl_admin_node(c, unknown);
	if (v->node < 0 && !c->admin_down && md->Brokers.count == 1)
		v->node = md->Brokers.items[0].NodeId;   /* no node.id in /v1/config: the only broker */
}

static int cmd_cluster_info(struct ctl *c, const struct args *a)
{
	struct kafka_metadata_response *md;
	struct kclient *k;
	int64_t parts = 0, under = 0, offline = 0, internal = 0;
	struct admin_view av;

	(void)a;
	md = ctl_metadata(c, NULL, 0);
	k = ctl_client(c);
	admin_view_get(c, md, &av);
	for (int32_t i = 0; i < md->Topics.count; i++) {
		const struct kafka_metadata_response_metadata_response_topic *t = &md->Topics.items[i];

		internal += t->IsInternal;
		for (int32_t j = 0; j < t->Partitions.count; j++) {
			const struct kafka_metadata_response_metadata_response_partition *p = &t->Partitions.items[j];

			parts++;
			under += p->IsrNodes.count < p->ReplicaNodes.count;
			offline += p->LeaderId < 0;
		}
	}
	if (c->json) {
		json_obj_begin(NULL);
		json_strn("cluster_id", md->ClusterId.ptr, md->ClusterId.len);
		json_int("controller_id", md->ControllerId);
		json_arr_begin("brokers");
		for (int32_t i = 0; i < md->Brokers.count; i++) {
			const struct kafka_metadata_response_metadata_response_broker *b = &md->Brokers.items[i];

			json_obj_begin(NULL);
			json_int("node_id", b->NodeId);
			json_strn("host", b->Host.ptr, b->Host.len);
			json_int("port", b->Port);
			json_strn("rack", b->Rack.ptr, b->Rack.len);
			if (b->NodeId == av.node && av.shards >= 0)
				json_int("shards", av.shards);
			else
				json_null("shards");
			json_str("health", b->NodeId == av.node && av.health[0] ? av.health : NULL);
			json_obj_end();
		}
		json_arr_end();
		json_int("topics", md->Topics.count);
		json_int("internal_topics", internal);
		json_int("partitions", parts);
		json_int("under_replicated_partitions", under);
		json_int("offline_partitions", offline);
		json_arr_begin("api_versions");
		for (int i = 0; i < KCLIENT_MAX_KEY; i++) {
			const struct kafka_api *api = kafka_api_find((int16_t)i);

			if (k->vmax[i] < 0)
				continue;
			json_obj_begin(NULL);
			json_int("api_key", i);
			json_str("name", api ? api->name : NULL);
			json_int("min_version", k->vmin[i]);
			json_int("max_version", k->vmax[i]);
			json_obj_end();
		}
		json_arr_end();
		json_obj_end();
		json_end();
		return 0;
	}
	{
		struct table t;
		static const char *heads[] = { "FIELD", "VALUE" };
		int napis = 0;

		for (int i = 0; i < KCLIENT_MAX_KEY; i++)
			napis += k->vmax[i] >= 0;
		table_init(&t, 2, heads);
		table_add(&t, "cluster id", kstr(md->ClusterId));
		table_add(&t, "controller", fmt("%d", md->ControllerId));
		table_add(&t, "brokers", fmt("%d", md->Brokers.count));
		table_add(&t, "topics", fmt("%d (%lld internal)", md->Topics.count, (long long)internal));
		table_add(&t, "partitions", fmt("%lld", (long long)parts));
		table_add(&t, "under-replicated partitions", fmt("%lld", (long long)under));
		table_add(&t, "offline partitions", fmt("%lld", (long long)offline));
		table_add(&t, "Kafka APIs served", fmt("%d (bootstrap %s:%d)", napis, k->host, k->port));
		table_print(&t);
		table_fini(&t);
	}
	{
		struct table t;
		static const char *heads[] = { "BROKER", "HOST", "PORT", "RACK", "SHARDS", "HEALTH" };

		putchar('\n');
		table_init(&t, 6, heads);
		table_right(&t, 0);
		table_right(&t, 2);
		table_right(&t, 4);
		for (int32_t i = 0; i < md->Brokers.count; i++) {
			const struct kafka_metadata_response_metadata_response_broker *b = &md->Brokers.items[i];
			bool mine = b->NodeId == av.node;

			table_add(&t, fmt("%d%s", b->NodeId, b->NodeId == md->ControllerId ? "*" : ""),
				  kstr(b->Host), fmt("%d", b->Port), b->Rack.len >= 0 ? kstr(b->Rack) : "-",
				  mine && av.shards >= 0 ? fmt("%lld", (long long)av.shards) : "?",
				  mine && av.health[0] ? av.health : "?");
		}
		table_print(&t);
		table_fini(&t);
		if (md->Brokers.count > 1 && av.node >= 0)
			printf("(* controller; shards and health from the admin endpoint %s:%d, broker %d's; "
			       "? for the others)\n", c->admin_host, c->admin_port, av.node);
		else
			printf("(* controller%s)\n", av.shards < 0 ? "; ?: the admin endpoint did not answer" : "");
		if (av.reasons[0])
			printf("health: %s\n", av.reasons);
	}
	return 0;
}

/* ---- the command table -------------------------------------------------- */

static const struct opt_spec no_opts[] = { { NULL, 0, NULL, NULL } };

static const struct cmd base_cmds[] = {
	{ "cluster", "info", "", "brokers, controller, topic and partition counts, health", no_opts,
	  "sluicectl cluster info\nsluicectl -b 10.0.0.5:9092 cluster info --format json", cmd_cluster_info },
};

static const struct opt_spec global_opts[] = {
	{ "brokers", 'b', "HOST:PORT,...", "bootstrap brokers (default: $SLUICE_BROKERS, then 127.0.0.1:9092)" },
	{ "format", 0, "table|json", "output format (default table)" },
	{ "admin", 0, "HOST:PORT", "the broker's HTTP admin endpoint, for shards, log end and health "
	  "(default: $SLUICE_ADMIN, then the bootstrap broker's host, port 9644)" },
	{ "timeout", 0, "MS", "per-request timeout in milliseconds (default 10000)" },
	{ "help", 'h', NULL, "help for sluicectl, a noun, or a command" },
	{ NULL, 0, NULL, NULL }
};

/* Every command, in help order. */
static const struct cmd *all_cmds[64];
static int n_cmds;

static void cmds_init(void)
{
	for (size_t i = 0; i < sizeof base_cmds / sizeof base_cmds[0]; i++)
		all_cmds[n_cmds++] = &base_cmds[i];
	for (int i = 0; i < topic_ncmds; i++)
		all_cmds[n_cmds++] = &topic_cmds[i];
	for (int i = 0; i < group_ncmds; i++)
		all_cmds[n_cmds++] = &group_cmds[i];
	for (int i = 0; i < record_ncmds; i++)
		all_cmds[n_cmds++] = &record_cmds[i];
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

static const struct opt_spec *find_opt(const struct opt_spec *o, const char *name, char shrt)
{
	for (; o && o->name; o++)
		if ((name && !strcmp(o->name, name)) || (shrt && o->shrt == shrt))
			return o;
	return NULL;
}

/* ---- help and completion -------------------------------------------------- */

static void print_opts(const struct opt_spec *o)
{
	for (; o->name; o++) {
		char left[64];

		if (o->shrt)
			snprintf(left, sizeof left, "-%c, --%s%s%s", o->shrt, o->name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		else
			snprintf(left, sizeof left, "    --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		if (strlen(left) > 26)
			printf("  %s\n%30s", left, "");
		else
			printf("  %-26s  ", left);
		wrap(stdout, 30, 30, o->help);
	}
}

static void help_top(void)
{
	const char *last = "";

	printf("sluicectl — operate a Sluice (or any Kafka) cluster over the Kafka protocol\n\n"
	       "usage: sluicectl [-b HOST:PORT,...] [--admin HOST:PORT] [--format table|json]\n"
	       "                 NOUN VERB [ARGS]\n\n"
	       "commands:\n");
	for (int i = 0; i < n_cmds; i++) {
		const struct cmd *m = all_cmds[i];
		char left[64];

		if (strcmp(m->noun, last))
			last = m->noun;
		snprintf(left, sizeof left, "%s %s", m->noun, m->verb);
		printf("  %-22s ", left);
		wrap(stdout, 25, 25, m->summary);
	}
	printf("  %-22s %s\n", "completion bash", "print the bash completion script");
	printf("\nglobal options (anywhere on the line):\n");
	print_opts(global_opts);
	printf("\nexit status: 0 success; 1 a Kafka error (named, with what to do), an unreachable\n"
	       "broker or a refused operation; 2 bad usage.\n\n"
	       "Shard placement, log end offsets and health come from the broker's HTTP admin\n"
	       "endpoint (admin.listen, see --admin); when it cannot be reached those fields\n"
	       "show as unknown, with one note on stderr, and the command still succeeds.\n\n"
	       "examples:\n  sluicectl cluster info\n  sluicectl topic create orders -p 6\n"
	       "  sluicectl group describe orders-app\n  sluicectl topic --help\n"
	       "  source <(sluicectl completion bash)\n");
}

static void help_noun(const char *noun)
{
	printf("usage: sluicectl %s VERB [ARGS] [OPTIONS]\n\nverbs:\n", noun);
	for (int i = 0; i < n_cmds; i++) {
		const struct cmd *m = all_cmds[i];
		char left[64];

		if (strcmp(m->noun, noun))
			continue;
		snprintf(left, sizeof left, "%s %s", m->verb, m->synopsis);
		printf("  %-22s ", left);
		wrap(stdout, 25, 25, m->summary);
	}
	printf("\nsluicectl %s VERB --help shows a verb's options and examples.\n", noun);
}

static void help_cmd(const struct cmd *m)
{
	const char *e = m->examples;

	printf("usage: sluicectl %s %s%s%s [OPTIONS]\n\n%s\n", m->noun, m->verb, *m->synopsis ? " " : "",
	       m->synopsis, m->summary);
	if (m->opts->name) {
		printf("\noptions:\n");
		print_opts(m->opts);
	}
	printf("\nglobal options:\n");
	print_opts(global_opts);
	printf("\nexamples:\n");
	while (*e) {
		size_t n = strcspn(e, "\n");

		printf("  %.*s\n", (int)n, e);
		e += n + (e[n] == '\n');
	}
}

static void completion_bash(void)
{
	const char *last = "";

	printf("# bash completion for sluicectl: source <(sluicectl completion bash)\n"
	       "_sluicectl() {\n"
	       "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
	       "  local noun= verb= i w b=()\n"
	       "  for ((i=1; i<COMP_CWORD; i++)); do\n"
	       "    w=${COMP_WORDS[i]}\n"
	       "    case $w in\n"
	       "      -b|--brokers) b=(-b \"${COMP_WORDS[i+1]}\"); ((i++));;\n"
	       "      --format|--timeout|--admin) ((i++));;\n"
	       "      -*) ;;\n"
	       "      *) if [[ -z $noun ]]; then noun=$w; elif [[ -z $verb ]]; then verb=$w; fi;;\n"
	       "    esac\n"
	       "  done\n"
	       "  case $prev in\n"
	       "    --format) COMPREPLY=($(compgen -W 'table json' -- \"$cur\")); return;;\n"
	       "    -b|--brokers|--timeout|--admin) return;;\n"
	       "    --group|-g) COMPREPLY=($(compgen -W \"$(sluicectl \"${b[@]}\" __names group 2>/dev/null)\" -- \"$cur\")); return;;\n"
	       "    --topic|-t) COMPREPLY=($(compgen -W \"$(sluicectl \"${b[@]}\" __names topic 2>/dev/null)\" -- \"$cur\")); return;;\n"
	       "  esac\n"
	       "  local g='--brokers --format --admin --timeout --help'\n"
	       "  if [[ -z $noun ]]; then\n"
	       "    COMPREPLY=($(compgen -W \"");
	for (int i = 0; i < n_cmds; i++)
		if (strcmp(all_cmds[i]->noun, last))
			printf("%s ", last = all_cmds[i]->noun);
	printf("completion $g\" -- \"$cur\")); return\n  fi\n"
	       "  if [[ -z $verb ]]; then\n    case $noun in\n");
	last = "";
	for (int i = 0; i < n_cmds; i++) {
		if (!strcmp(all_cmds[i]->noun, last))
			continue;
		last = all_cmds[i]->noun;
		printf("      %s) COMPREPLY=($(compgen -W \"", last);
		for (int j = i; j < n_cmds; j++)
			if (!strcmp(all_cmds[j]->noun, last))
				printf("%s ", all_cmds[j]->verb);
		printf("--help\" -- \"$cur\"));;\n");
	}
	printf("      completion) COMPREPLY=($(compgen -W bash -- \"$cur\"));;\n"
	       "    esac\n    return\n  fi\n"
	       "  local opts\n  case \"$noun $verb\" in\n");
	for (int i = 0; i < n_cmds; i++) {
		const struct opt_spec *o;

		printf("    '%s %s') opts='", all_cmds[i]->noun, all_cmds[i]->verb);
		for (o = all_cmds[i]->opts; o->name; o++)
			printf("--%s ", o->name);
		printf("';;\n");
	}
	printf("  esac\n"
	       "  if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"$opts $g\" -- \"$cur\")); return; fi\n"
	       "  case $noun in\n"
	       "    topic|record) COMPREPLY=($(compgen -W \"$(sluicectl \"${b[@]}\" __names topic 2>/dev/null)\" -- \"$cur\"));;\n"
	       "    group) COMPREPLY=($(compgen -W \"$(sluicectl \"${b[@]}\" __names group 2>/dev/null)\" -- \"$cur\"));;\n"
	       "  esac\n"
	       "}\n"
	       "complete -F _sluicectl sluicectl\n");
}



/* `__names topic|group`: names one per line, for completion. */
static int cmd_names(struct ctl *c, const char *what)
{
	if (!strcmp(what, "topic")) {
		struct kafka_metadata_response *md = ctl_metadata(c, NULL, 0);

		for (int32_t i = 0; i < md->Topics.count; i++)
			if (!md->Topics.items[i].IsInternal)
				printf("%s\n", kstr(md->Topics.items[i].Name));
		return 0;
	}
	if (!strcmp(what, "group"))
		return group_names(c);
	return EXIT_USAGE;
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	struct ctl c;
	struct args a;
	const struct cmd *m = NULL;
	const char *noun = NULL, *verb = NULL, *format = "table";
	bool help = false, opts_done = false;
	char cmdname[64];
	int64_t timeout = DEFAULT_TIMEOUT_MS;
	char *pos_store[argc], *val_store[argc];
	const struct opt_spec *spec_store[argc];
	int rc;

	cmds_init();
	memset(&c, 0, sizeof c);
	memset(&a, 0, sizeof a);
	c.boot.fd = -1;
	c.cmd = "usage";
	c.bootstrap = getenv("SLUICE_BROKERS");
	if (!c.bootstrap || !*c.bootstrap)
		c.bootstrap = DEFAULT_BOOTSTRAP;
	c.admin = getenv("SLUICE_ADMIN");
	c.admin_src = "SLUICE_ADMIN";
	if (c.admin && !*c.admin)
		c.admin = NULL;
	a.pos = pos_store;
	a.spec = spec_store;
	a.val = val_store;

	for (int i = 1; i < argc; i++) {
		char *arg = argv[i], *eq = NULL;
		const struct opt_spec *o;
		bool global;

		if (opts_done || arg[0] != '-' || !arg[1]) {
			if (!noun) {
				noun = arg;
			} else if (!verb && (m == NULL)) {
				verb = arg;
				for (int j = 0; j < n_cmds; j++)
					if (!strcmp(all_cmds[j]->noun, noun) && !strcmp(all_cmds[j]->verb, verb))
						m = all_cmds[j];
				if (!m && strcmp(noun, "completion") && strcmp(noun, "__names")) {
					snprintf(cmdname, sizeof cmdname, "%s", noun);
					c.cmd = cmdname;
					for (int j = 0; j < n_cmds; j++)
						if (!strcmp(all_cmds[j]->noun, noun))
							return ctl_usage(&c, "unknown verb '%s'", verb);
					c.cmd = NULL;
					return ctl_usage(&c, "unknown noun '%s'", noun);
				}
			} else {
				a.pos[a.npos++] = arg;
			}
			continue;
		}
		if (!strcmp(arg, "--")) {
			opts_done = true;
			continue;
		}
		if (arg[1] == '-') {
			eq = strchr(arg, '=');
			if (eq)
				*eq = 0;
			o = find_opt(global_opts, arg + 2, 0);
			global = o != NULL;
			if (!o && m)
				o = find_opt(m->opts, arg + 2, 0);
		} else {
			o = find_opt(global_opts, NULL, arg[1]);
			global = o != NULL;
			if (!o && m)
				o = find_opt(m->opts, NULL, arg[1]);
			if (o && arg[2])
				eq = arg + 1;   /* -n10 */
		}
		if (!o) {
			if (m) {
				snprintf(cmdname, sizeof cmdname, "%s %s", m->noun, m->verb);
				c.cmd = cmdname;
			}
			return ctl_usage(&c, "unknown option '%s'", arg);
		}
		const char *val = "";

		if (o->arg) {
			if (eq)
				val = eq + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else
				return ctl_usage(&c, "option --%s needs %s", o->name, o->arg);
		} else if (eq && arg[1] == '-') {
			return ctl_usage(&c, "option --%s takes no value", o->name);
		}
		if (global) {
			if (!strcmp(o->name, "brokers")) {
				c.bootstrap = val;
			} else if (!strcmp(o->name, "admin")) {
				c.admin = val;
				c.admin_src = "--admin";
			} else if (!strcmp(o->name, "format")) {
				format = val;
			} else if (!strcmp(o->name, "help")) {
				help = true;
			} else if (!strcmp(o->name, "timeout") && !parse_i64(val, 1, 3600000, &timeout)) {
				return ctl_usage(&c, "--timeout wants milliseconds, not '%s'", val);
			}
			continue;
		}
		a.spec[a.nopt] = o;
		a.val[a.nopt++] = (char *)val;
	}
	if (strcmp(format, "table") && strcmp(format, "json"))
		return ctl_usage(&c, "--format is table or json, not '%s'", format);
	c.json = !strcmp(format, "json");
	c.timeout_ms = (int)timeout;

	if (!noun) {
		help_top();
		return help ? 0 : EXIT_USAGE;
	}
	if (!strcmp(noun, "completion")) {
		if (help || !verb || strcmp(verb, "bash")) {
			printf("usage: sluicectl completion bash\n\nprints the bash completion script:\n"
			       "  source <(sluicectl completion bash)\n"
			       "  sluicectl completion bash > /etc/bash_completion.d/sluicectl\n");
			return help ? 0 : EXIT_USAGE;
		}
		completion_bash();
		return 0;
	}
	if (!strcmp(noun, "__names")) {
		c.cmd = "__names";
		rc = verb ? cmd_names(&c, verb) : EXIT_USAGE;
		kclient_close(&c.boot);
		return rc;
	}
	if (!m) {
		bool known = false;

		for (int j = 0; j < n_cmds; j++)
			known |= !strcmp(all_cmds[j]->noun, noun);
		if (!known) {
			c.cmd = NULL;
			return ctl_usage(&c, "unknown noun '%s'", noun);
		}
		help_noun(noun);
		return help ? 0 : EXIT_USAGE;
	}
	if (help) {
		help_cmd(m);
		return 0;
	}
	snprintf(cmdname, sizeof cmdname, "%s %s", m->noun, m->verb);
	c.cmd = cmdname;
	rc = m->run(&c, &a);
	fflush(stdout);
	kclient_close(&c.boot);
	for (int i = 0; i < c.nnodes; i++)
		kclient_close(&c.nodes[i]);
	return rc;
}

