/* control/sluicectl_cluster.c — the cluster commands: info (brokers, the
 * controller, the metadata quorum from DescribeQuorum, health from the
 * admin endpoint) and check (the live configuration read over the Kafka
 * protocol, judged by the rules of sluicectl_rules.c). See sluicectl.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/sluicectl.h"
#include "control/sluicectl_rules.h"

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

/* Another broker's view from its own endpoint (the default address only:
 * ctl_admin_get_node); unknown fields stay unknown. */
static void admin_view_node(struct ctl *c, int32_t node, struct admin_view *v)
{
	static const char unknown[] = "its shards and health shown as unknown";
	struct http_reply r;
	int st;

	v->node = -1;
	v->shards = -1;
	v->health[0] = v->reasons[0] = 0;
	st = ctl_admin_get_node(c, node, "/v1/shards", unknown, &r);
	if (st == 200) {
		int64_t n = 0;

		for (const char *p = strstr(r.body, "\"shard\":"); p; p = strstr(p + 1, "\"shard\":"))
			n++;
		v->shards = n;
		v->node = node;
	}
	http_reply_fini(&r);
	st = ctl_admin_get_node(c, node, "/v1/health", unknown, &r);
	if (st == 200 || st == 503) {
		json_get_str(r.body, r.body + r.len, "status", v->health, sizeof v->health);
		v->node = node;
	}
	http_reply_fini(&r);
}

/* The metadata quorum (DescribeQuorum, asked of the bootstrap broker,
 * which answers or forwards to the active controller): NULL when the
 * broker does not advertise it; borrowed from the client's memory. */
static const struct kafka_describe_quorum_response_partition_data *quorum_get(struct ctl *c, int16_t *err)
{
	struct kclient *k = ctl_client(c);
	const struct kafka_describe_quorum_response_partition_data *q;
	int rc = ctl_describe_quorum(k, &q, err);

	if (rc < 0)
		ctl_call_failed(c, k, rc);
	return q;
}

/* The leader's log end in q, -1 when not known. */
static int64_t quorum_leader_end(const struct kafka_describe_quorum_response_partition_data *q)
{
	for (int32_t i = 0; i < q->CurrentVoters.count; i++)
		if (q->CurrentVoters.items[i].ReplicaId == q->LeaderId)
			return q->CurrentVoters.items[i].LogEndOffset;
	return -1;
}

static void quorum_json(const char *key, const struct kafka_describe_quorum_response_partition_data *q,
			bool voters)
{
	int64_t end = quorum_leader_end(q);
	int32_t n = voters ? q->CurrentVoters.count : q->Observers.count;

	json_arr_begin(key);
	for (int32_t i = 0; i < n; i++) {
		const struct kafka_describe_quorum_response_replica_state *r =
			voters ? &q->CurrentVoters.items[i] : &q->Observers.items[i];

		json_obj_begin(NULL);
		json_int("node_id", r->ReplicaId);
		json_int_or_null("log_end_offset", r->LogEndOffset);
		json_int_or_null("lag", end >= 0 && r->LogEndOffset >= 0 ? end - r->LogEndOffset : -1);
		json_int_or_null("last_caught_up_timestamp", r->LastCaughtUpTimestamp);
		json_obj_end();
	}
	json_arr_end();
}

static void quorum_table(const struct kafka_describe_quorum_response_partition_data *q)
{
	static const char *heads[] = { "NODE", "ROLE", "LOG-END", "LAG", "CAUGHT-UP" };
	int64_t end = quorum_leader_end(q), now = now_ms();
	struct table t;

	table_init(&t, 5, heads);
	table_right(&t, 0);
	table_right(&t, 2);
	table_right(&t, 3);
	table_right(&t, 4);
	for (int side = 0; side < 2; side++) {
		int32_t n = side ? q->Observers.count : q->CurrentVoters.count;

		for (int32_t i = 0; i < n; i++) {
			const struct kafka_describe_quorum_response_replica_state *r =
				side ? &q->Observers.items[i] : &q->CurrentVoters.items[i];
			int64_t lag = end >= 0 && r->LogEndOffset >= 0 ? end - r->LogEndOffset : -1;

			table_add(&t, fmt("%d", r->ReplicaId),
				  side ? "observer" : r->ReplicaId == q->LeaderId ? "leader" : "voter",
				  r->LogEndOffset >= 0 ? fmt("%lld", (long long)r->LogEndOffset) : "?",
				  lag >= 0 ? fmt("%lld", (long long)lag) : "?",
				  r->LastCaughtUpTimestamp >= 0
				  ? fmt("%.1fs ago", (double)(now - r->LastCaughtUpTimestamp) / 1000.0) : "?");
		}
	}
	table_print(&t);
	table_fini(&t);
}

static int cmd_cluster_info(struct ctl *c, const struct args *a)
{
	const struct kafka_describe_quorum_response_partition_data *q;
	int16_t qerr;
	struct kafka_metadata_response *md;
	struct kclient *k;
	int64_t parts = 0, under = 0, offline = 0, internal = 0;
	struct admin_view av, *views;
	int32_t others_known = 0;

	(void)a;
	md = ctl_metadata(c, NULL, 0);
	k = ctl_client(c);
	q = quorum_get(c, &qerr);
	admin_view_get(c, md, &av);
	views = calloc((size_t)md->Brokers.count + 1, sizeof *views);
	for (int32_t i = 0; i < md->Brokers.count; i++) {
		int32_t id = md->Brokers.items[i].NodeId;

		if (id == av.node)
			views[i] = av;
		else if (av.node >= 0 && c->admin_default)
			admin_view_node(c, id, &views[i]);   /* its own endpoint */
		else
			views[i] = (struct admin_view){ .node = -1, .shards = -1 };
		others_known += id != av.node && views[i].node == id;
	}
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
			json_bool("controller", b->NodeId == md->ControllerId);
			if (b->NodeId == views[i].node && views[i].shards >= 0)
				json_int("shards", views[i].shards);
			else
				json_null("shards");
			json_str("health", b->NodeId == views[i].node && views[i].health[0] ? views[i].health : NULL);
			json_obj_end();
		}
		json_arr_end();
		json_int("topics", md->Topics.count);
		json_int("internal_topics", internal);
		json_int("partitions", parts);
		json_int("under_replicated_partitions", under);
		json_int("offline_partitions", offline);
		if (q) {
			json_obj_begin("quorum");
			json_int("leader_id", q->LeaderId);
			json_int("leader_epoch", q->LeaderEpoch);
			json_int("high_watermark", q->HighWatermark);
			quorum_json("voters", q, true);
			quorum_json("observers", q, false);
			json_obj_end();
		} else {
			json_null("quorum");
		}
		json_str("quorum_error", k->vmax[KAFKA_DESCRIBE_QUORUM_KEY] < 0 ? "DescribeQuorum not served by this broker"
			 : qerr ? kerr_name(qerr) : NULL);
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
		free(views);
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
			const struct admin_view *v = &views[i];
			bool mine = b->NodeId == v->node;

			table_add(&t, fmt("%d%s", b->NodeId, b->NodeId == md->ControllerId ? "*" : ""),
				  kstr(b->Host), fmt("%d", b->Port), b->Rack.len >= 0 ? kstr(b->Rack) : "-",
				  mine && v->shards >= 0 ? fmt("%lld", (long long)v->shards) : "?",
				  mine && v->health[0] ? v->health : "?");
		}
		table_print(&t);
		table_fini(&t);
		if (md->Brokers.count > 1 && av.node >= 0 && c->admin_default)
			printf("(* controller; shards and health from each broker's admin endpoint (its admin.listen)%s)\n",
			       others_known < md->Brokers.count - 1 ? "; ?: it did not answer" : "");
		else if (md->Brokers.count > 1 && av.node >= 0)
			printf("(* controller; shards and health from the admin endpoint %s:%d, broker %d's; "
			       "? for the others)\n", c->admin_host, c->admin_port, av.node);
		else
			printf("(* controller%s)\n", av.shards < 0 ? "; ?: the admin endpoint did not answer" : "");
		if (av.reasons[0])
			printf("health: %s\n", av.reasons);
	}
	putchar('\n');
	if (q) {
		printf("quorum: leader %d, epoch %d, high watermark %lld\n", q->LeaderId, q->LeaderEpoch,
		       (long long)q->HighWatermark);
		quorum_table(q);
	} else if (k->vmax[KAFKA_DESCRIBE_QUORUM_KEY] < 0) {
		printf("quorum: DescribeQuorum not served by this broker (%s:%d)\n", k->host, k->port);
	} else {
		printf("quorum: DescribeQuorum answered %s\n", kerr_name(qerr));
	}
	free(views);
	return 0;
}

/* ---- cluster check ------------------------------------------------------- */

/* A broker's defaults from DescribeConfigs on its BROKER resource, asked of
 * that broker (Kafka answers a broker's resource only there): false when it
 * cannot be reached or answers with an error. A key the broker leaves out
 * keeps Kafka's default (unclean election off). */
static bool broker_repl(struct ctl *c, const struct kafka_metadata_response_metadata_response_broker *b,
			struct cc_broker *out)
{
	static const struct kafka_str keys[] = { { "min.insync.replicas", 19 },
						 { "unclean.leader.election.enable", 30 } };
	struct kafka_describe_configs_request req;
	struct kafka_describe_configs_request_describe_configs_resource res;
	struct kafka_describe_configs_response *resp;
	struct kclient *k = ctl_node_try(c, b->NodeId, b->Host, b->Port);
	char name[16];
	int v;

	out->min_isr = out->unclean = -1;
	if (!k || (v = kclient_version(k, KAFKA_DESCRIBE_CONFIGS_KEY, 2)) < 0)
		return false;
	snprintf(name, sizeof name, "%d", b->NodeId);
	memset(&res, 0, sizeof res);
	res.ResourceType = 4;   /* BROKER */
	res.ResourceName = (struct kafka_str){ name, (int32_t)strlen(name) };
	res.ConfigurationKeys.items = (struct kafka_str *)keys;
	res.ConfigurationKeys.count = 2;
	kafka_describe_configs_request_init(&req);
	req.Resources.items = &res;
	req.Resources.count = 1;
	if (kclient_call(k, KAFKA_DESCRIBE_CONFIGS_KEY, (int16_t)v, &req, false, (void **)&resp) ||
	    resp->Results.count != 1 || resp->Results.items[0].ErrorCode)
		return false;
	out->unclean = 0;
	for (int32_t j = 0; j < resp->Results.items[0].Configs.count; j++) {
		const struct kafka_describe_configs_response_describe_configs_resource_result *e =
			&resp->Results.items[0].Configs.items[j];
		int64_t x;

		if (kafka_str_eq(e->Name, "min.insync.replicas") && e->Value.len > 0 &&
		    parse_i64(kstr(e->Value), 0, INT32_MAX, &x))
			out->min_isr = (int32_t)x;
		else if (kafka_str_eq(e->Name, "unclean.leader.election.enable") && e->Value.len > 0)
			out->unclean = kafka_str_eq(e->Value, "true");
	}
	return true;
}

/* "topic t, partitions 0,2,5" / "broker 3" / "cluster" */
static const char *finding_where(const struct cc_finding *f)
{
	char buf[600];
	size_t l = 0;

	if (!f->topic[0])
		return f->broker >= 0 ? fmt("broker %d", f->broker) : "cluster";
	l = (size_t)snprintf(buf, sizeof buf, "topic %s", f->topic);
	for (int32_t i = 0; i < f->nparts && l < sizeof buf - 40; i++) {
		if (i == 24) {
			l += (size_t)snprintf(buf + l, sizeof buf - l, ",... (%d partitions)", f->nparts);
			break;
		}
		l += (size_t)snprintf(buf + l, sizeof buf - l, "%s%d", i ? "," : ", partitions ", f->parts[i]);
	}
	return fmt("%s", buf);
}

static int cmp_finding(const void *a, const void *b)
{
	const struct cc_finding *x = *(const struct cc_finding *const *)a, *y = *(const struct cc_finding *const *)b;

	if (x->severity != y->severity)
		return (int)y->severity - (int)x->severity;
	return x < y ? -1 : x > y;   /* as found */
}

static void check_print(struct ctl *c, const struct cc_report *r, int32_t nbrokers, int32_t ntopics, int64_t nparts)
{
	const struct cc_finding **order = calloc((size_t)r->n + 1, sizeof *order);
	int counts[3] = { 0, 0, 0 };

	for (int i = 0; i < r->n; i++) {
		order[i] = &r->f[i];
		counts[r->f[i].severity]++;
	}
	qsort(order, (size_t)r->n, sizeof *order, cmp_finding);
	if (c->json) {
		json_obj_begin(NULL);
		json_int("brokers", nbrokers);
		json_int("topics", ntopics);
		json_int("partitions", nparts);
		json_int("data_loss", counts[CC_DATA_LOSS]);
		json_int("availability", counts[CC_AVAILABILITY]);
		json_int("warning", counts[CC_WARNING]);
		json_int("exit_status", cc_exit_status(r));
		json_arr_begin("findings");
		for (int i = 0; i < r->n; i++) {
			const struct cc_finding *f = order[i];

			json_obj_begin(NULL);
			json_str("severity", cc_severity_name(f->severity));
			json_str("finding", f->code);
			json_str("topic", f->topic[0] ? f->topic : NULL);
			if (f->topic[0] && f->nparts) {
				json_arr_begin("partitions");
				for (int32_t j = 0; j < f->nparts; j++)
					json_int(NULL, f->parts[j]);
				json_arr_end();
			} else {
				json_null("partitions");   /* the whole topic, or not a topic's */
			}
			json_int_or_null("broker", f->broker);
			json_str("what", f->what);
			json_str("risk", f->risk);
			json_str("setting", f->setting[0] ? f->setting : NULL);
			json_str("value", f->setting[0] ? f->value : NULL);
			json_str("fix", f->fix);
			json_obj_end();
		}
		json_arr_end();
		json_obj_end();
		json_end();
		free(order);
		return;
	}
	printf("cluster check: %d broker(s), %d topic(s), %lld partition(s): %d finding(s)\n", nbrokers, ntopics,
	       (long long)nparts, r->n);
	for (int i = 0; i < r->n; i++) {
		const struct cc_finding *f = order[i];
		const char *head = fmt("[%s] %s: %s", cc_severity_name(f->severity), finding_where(f), f->what);

		putchar('\n');
		wrap(stdout, 0, 4, head);
		fputs("  finding: ", stdout);
		wrap(stdout, 11, 11, f->code);
		fputs("  at risk: ", stdout);
		wrap(stdout, 11, 11, f->risk);
		if (f->setting[0]) {
			fputs("  setting: ", stdout);
			wrap(stdout, 11, 11, fmt("%s=%s", f->setting, f->value));
		}
		fputs("  change:  ", stdout);
		wrap(stdout, 11, 11, f->fix);
	}
	printf("\n%d data-loss, %d availability, %d warning: exit %d\n", counts[CC_DATA_LOSS],
	       counts[CC_AVAILABILITY], counts[CC_WARNING], cc_exit_status(r));
	free(order);
}

static int cmd_cluster_check(struct ctl *c, const struct args *a)
{
	struct kafka_metadata_response *md;
	struct cc_broker *brokers;
	struct cc_topic *topics;
	struct cc_partition *parts;
	struct topic_repl *repl;
	struct kafka_str *names;
	struct cc_cluster cl;
	struct cc_report rep = { 0 };
	int64_t nparts = 0, at = 0;
	int rc;
	bool any_unclean = false;

	(void)a;
	md = ctl_metadata(c, NULL, 0);
	for (int32_t i = 0; i < md->Topics.count; i++)
		nparts += md->Topics.items[i].ErrorCode ? 0 : md->Topics.items[i].Partitions.count;
	brokers = calloc((size_t)md->Brokers.count + 1, sizeof *brokers);
	topics = calloc((size_t)md->Topics.count + 1, sizeof *topics);
	repl = calloc((size_t)md->Topics.count + 1, sizeof *repl);
	names = calloc((size_t)md->Topics.count + 1, sizeof *names);
	parts = calloc((size_t)nparts + 1, sizeof *parts);
	if (!brokers || !topics || !repl || !names || !parts) {
		rc = ctl_fail(c, "out of memory");
		goto out;
	}
	for (int32_t i = 0; i < md->Brokers.count; i++) {
		const struct kafka_metadata_response_metadata_response_broker *b = &md->Brokers.items[i];

		brokers[i].id = b->NodeId;
		brokers[i].rack = b->Rack.len >= 0 ? strndup(b->Rack.ptr, (size_t)b->Rack.len) : NULL;
		brokers[i].configs_read = broker_repl(c, b, &brokers[i]);
		any_unclean |= brokers[i].unclean == 1;
	}
	cl = (struct cc_cluster){ brokers, md->Brokers.count, topics, 0 };
	for (int32_t i = 0; i < md->Topics.count; i++)
		names[i] = md->Topics.items[i].Name;
	ctl_topic_repl(c, names, md->Topics.count, repl);
	for (int32_t i = 0; i < md->Topics.count; i++) {
		const struct kafka_metadata_response_metadata_response_topic *t = &md->Topics.items[i];
		struct cc_topic *ct = &topics[cl.ntopics];

		if (t->ErrorCode)
			continue;   /* being created or deleted: nothing to judge yet */
		ct->name = t->Name.len > 0 ? strndup(t->Name.ptr, (size_t)t->Name.len) : strdup("");
		ct->internal = t->IsInternal;
		ct->min_isr = repl[i].min_isr;
		ct->min_isr_on_topic = repl[i].min_isr_on_topic;
		ct->unclean = repl[i].unclean;
		ct->unclean_on_topic = repl[i].unclean_on_topic;
		if (ct->unclean == 0 && !ct->unclean_on_topic && any_unclean)
			ct->unclean = 1;   /* the brokers' default applies */
		ct->parts = &parts[at];
		ct->nparts = t->Partitions.count;
		for (int32_t j = 0; j < t->Partitions.count; j++) {
			const struct kafka_metadata_response_metadata_response_partition *p = &t->Partitions.items[j];

			parts[at++] = (struct cc_partition){ p->PartitionIndex, p->LeaderId, p->ReplicaNodes.items,
							     p->ReplicaNodes.count, p->IsrNodes.items,
							     p->IsrNodes.count };
		}
		cl.ntopics++;
	}
	if (cc_check(&cl, &rep) < 0) {
		rc = ctl_fail(c, "out of memory");
	} else {
		check_print(c, &rep, cl.nbrokers, cl.ntopics, nparts);
		rc = cc_exit_status(&rep);
	}
	cc_report_fini(&rep);
	for (int32_t i = 0; i < cl.ntopics; i++)
		free((char *)topics[i].name);
	for (int32_t i = 0; i < md->Brokers.count; i++)
		free((char *)brokers[i].rack);
out:
	free(brokers);
	free(topics);
	free(repl);
	free(names);
	free(parts);
	return rc;
}

/* ---- the command table -------------------------------------------------- */

static const struct opt_spec no_opts[] = { { NULL, 0, NULL, NULL } };

const struct cmd cluster_cmds[] = {
	{ "cluster", "info", "", "brokers, controller, metadata quorum, topic and partition counts, health",
	  no_opts, "sluicectl cluster info\nsluicectl -b 10.0.0.5:9092 cluster info --format json",
	  cmd_cluster_info },
	{ "cluster", "check", "", "settings and placement that can lose acknowledged records or availability", no_opts,
	  "sluicectl cluster check\nsluicectl cluster check --format json && ./deploy", cmd_cluster_check },
};

const int cluster_ncmds = sizeof cluster_cmds / sizeof cluster_cmds[0];
