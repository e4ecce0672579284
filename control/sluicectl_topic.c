/* control/sluicectl_topic.c — the topic commands: list, describe (per
 * partition: leader, replicas, ISR, offsets, size on disk, owning shard;
 * under-replicated and under-min-ISR partitions marked and counted),
 * create, delete, alter-config, describe-config, add-partitions (with its
 * key sampling). See sluicectl.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/sluicectl.h"
#include "control/sluicectl_rules.h"

/* The topic named `name` in a Metadata answer, or exit 1 naming its error. */
static const struct kafka_metadata_response_metadata_response_topic *
md_topic(struct ctl *c, const struct kafka_metadata_response *md, const char *name, int *rc)
{
	for (int32_t i = 0; i < md->Topics.count; i++) {
		const struct kafka_metadata_response_metadata_response_topic *t = &md->Topics.items[i];

		if (!kafka_str_eq(t->Name, name))
			continue;
		if (t->ErrorCode) {
			*rc = ctl_kafka_error(c, t->ErrorCode, (struct kafka_str){ NULL, -1 }, "topic '%s'", name);
			return NULL;
		}
		return t;
	}
	*rc = ctl_kafka_error(c, KERR_UNKNOWN_TOPIC_OR_PARTITION, (struct kafka_str){ NULL, -1 }, "topic '%s'", name);
	return NULL;
}

static int cmp_topic_name(const void *a, const void *b)
{
	const struct kafka_metadata_response_metadata_response_topic *x = a, *y = b;
	int32_t n = x->Name.len < y->Name.len ? x->Name.len : y->Name.len;
	int r = memcmp(x->Name.ptr, y->Name.ptr, (size_t)n);

	return r ? r : x->Name.len - y->Name.len;
}

static int cmp_partition(const void *a, const void *b)
{
	const struct kafka_metadata_response_metadata_response_partition *x = a, *y = b;

	return x->PartitionIndex - y->PartitionIndex;
}

static const char *int_list(const int32_t *v, int32_t n)
{
	char buf[256];
	size_t l = 0;

	buf[0] = 0;
	for (int32_t i = 0; i < n && l < sizeof buf - 16; i++)
		l += (size_t)snprintf(buf + l, sizeof buf - l, "%s%d", i ? "," : "", v[i]);
	return fmt("%s", buf);
}

static void json_int_list(const char *key, const int32_t *v, int32_t n)
{
	json_arr_begin(key);
	for (int32_t i = 0; i < n; i++)
		json_int(NULL, v[i]);
	json_arr_end();
}

/* ---- topic commands ---------------------------------------------------------- */

static int cmd_topic_list(struct ctl *c, const struct args *a)
{
	struct kafka_metadata_response *md = ctl_metadata(c, NULL, 0);
	bool internal = opt_has(a, "internal");

	if (md->Topics.count > 0)   /* items is NULL when there is none */
		qsort(md->Topics.items, (size_t)md->Topics.count, sizeof md->Topics.items[0], cmp_topic_name);
	if (c->json) {
		json_obj_begin(NULL);
		json_arr_begin("topics");
	}
	struct table t;
	static const char *heads[] = { "TOPIC", "PARTITIONS", "REPLICATION", "INTERNAL" };

	table_init(&t, 4, heads);
	table_right(&t, 1);
	table_right(&t, 2);
	for (int32_t i = 0; i < md->Topics.count; i++) {
		const struct kafka_metadata_response_metadata_response_topic *tp = &md->Topics.items[i];
		int32_t rf = tp->Partitions.count ? tp->Partitions.items[0].ReplicaNodes.count : 0;

		if (tp->IsInternal && !internal)
			continue;
		if (c->json) {
			json_obj_begin(NULL);
			json_strn("name", tp->Name.ptr, tp->Name.len);
			json_int("partitions", tp->Partitions.count);
			json_int("replication_factor", rf);
			json_bool("internal", tp->IsInternal);
			json_obj_end();
		} else {
			table_add(&t, kstr(tp->Name), fmt("%d", tp->Partitions.count), fmt("%d", rf),
				  tp->IsInternal ? "yes" : "no");
		}
	}
	if (c->json) {
		json_arr_end();
		json_obj_end();
		json_end();
	} else {
		table_print(&t);
	}
	table_fini(&t);
	return 0;
}

/* Size on disk per partition of t, from DescribeLogDirs (one request per
 * leader; the sizes of every log directory added up, future logs left
 * out): size[j] for the j-th partition, -1 when unknown. 0, or -ENOTSUP
 * when a leader does not serve DescribeLogDirs. */
static int topic_sizes(struct ctl *c, const struct kafka_metadata_response_metadata_response_topic *t,
		       int64_t *size)
{
	int32_t n = t->Partitions.count;
	bool *done = calloc((size_t)n + 1, sizeof *done);
	int rc = 0;

	for (int32_t i = 0; i < n; i++)
		size[i] = -1;
	for (int32_t i = 0; i < n; i++) {
		int32_t leader = t->Partitions.items[i].LeaderId, m = 0;
		struct kafka_describe_log_dirs_request req;
		struct kafka_describe_log_dirs_request_describable_log_dir_topic rt;
		struct kafka_describe_log_dirs_response *resp;
		struct kclient *k;
		struct kclient_mem *mark;
		int32_t *rp;
		int v;

		if (done[i] || leader < 0)
			continue;
		rp = calloc((size_t)n, sizeof *rp);
		for (int32_t j = i; j < n; j++) {
			if (done[j] || t->Partitions.items[j].LeaderId != leader)
				continue;
			done[j] = true;
			rp[m++] = t->Partitions.items[j].PartitionIndex;
		}
		k = ctl_leader(c, leader);
		v = kclient_version(k, KAFKA_DESCRIBE_LOG_DIRS_KEY, 4);
		if (v < 0) {
			free(rp);
			rc = -ENOTSUP;
			continue;
		}
		mark = k->mem;   /* the answer is copied out, then freed */
		kafka_describe_log_dirs_request_init(&req);
		rt.Topic = t->Name;
		rt.Partitions.items = rp;
		rt.Partitions.count = m;
		req.Topics.items = &rt;
		req.Topics.count = 1;
		resp = ctl_call(c, k, KAFKA_DESCRIBE_LOG_DIRS_KEY, (int16_t)v, &req);
		free(rp);
		for (int32_t d = 0; d < resp->Results.count; d++) {
			const struct kafka_describe_log_dirs_response_describe_log_dirs_result *r = &resp->Results.items[d];

			for (int32_t a = 0; !r->ErrorCode && a < r->Topics.count; a++) {
				const struct kafka_describe_log_dirs_response_describe_log_dirs_topic *rt2 = &r->Topics.items[a];

				if (rt2->Name.len != t->Name.len || memcmp(rt2->Name.ptr, t->Name.ptr, (size_t)t->Name.len))
					continue;
				for (int32_t b = 0; b < rt2->Partitions.count; b++) {
					const struct kafka_describe_log_dirs_response_describe_log_dirs_partition *p =
						&rt2->Partitions.items[b];

					if (p->IsFutureKey)
						continue;
					for (int32_t j = 0; j < n; j++)
						if (t->Partitions.items[j].PartitionIndex == p->PartitionIndex &&
						    t->Partitions.items[j].LeaderId == leader)
							size[j] = (size[j] < 0 ? 0 : size[j]) + p->PartitionSize;
				}
			}
		}
		kclient_release_to(k, mark);
	}
	free(done);
	return rc;
}

/* Owning shard and log end offset of each partition of t from the admin
 * endpoint (GET /v1/partitions/TOPIC/N, one per partition the endpoint's
 * broker leads: /v1/shards does not list partitions): shard[j] and
 * log_end[j], -1 when unknown. */
static void topic_admin(struct ctl *c, const struct kafka_metadata_response_metadata_response_topic *t,
			int32_t *shard, int64_t *log_end)
{
	static const char unknown[] = "log end and owning shard shown as unknown";
	int32_t n = t->Partitions.count, node = -1;

	for (int32_t j = 0; j < n; j++) {
		shard[j] = -1;
		log_end[j] = -1;
	}
	if (n)
		node = ctl_admin_node(c, unknown);
	for (int32_t j = 0; j < n && !(node < 0 && c->admin_down); j++) {
		const struct kafka_metadata_response_metadata_response_partition *p = &t->Partitions.items[j];
		struct http_reply r;
		char path[400];
		int64_t v;
		int st;

		snprintf(path, sizeof path, "/v1/partitions/%s/%d", kstr(t->Name), p->PartitionIndex);
		/* the leader's endpoint (another broker's is asked only with the
		 * default address: each broker's own admin.listen) */
		st = node >= 0 ? ctl_admin_get_node(c, p->LeaderId, path, unknown, &r)
			: ctl_admin_get(c, path, unknown, &r);
		if (st == 200) {
			if (json_get_i64(r.body, r.body + r.len, "shard", &v) && v >= 0 && v <= INT32_MAX)
				shard[j] = (int32_t)v;
			if (json_get_i64(r.body, r.body + r.len, "log_end_offset", &v) && v >= 0)
				log_end[j] = v;
		}
		http_reply_fini(&r);
		if (j % 100 == 99)
			progress("partitions asked of the admin endpoint", j + 1, n);
	}
}

/* "512 B", "41.2 KiB", "1.5 GiB": a size for a table cell. */
static const char *human_bytes(int64_t v)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double d = (double)v;
	int u = 0;

	if (v < 0)
		return "?";
	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	return u ? fmt("%.1f %s", d, unit[u]) : fmt("%lld B", (long long)v);
}

static int cmd_topic_describe(struct ctl *c, const struct args *a)
{
	struct kafka_metadata_response *md;
	struct kafka_str *names;
	struct topic_repl *repl;
	int rc = 0;

	if (a->npos < 1)
		return ctl_usage(c, "name at least one topic");
	md = ctl_metadata(c, (const char *const *)a->pos, a->npos);
	for (int i = 0; i < a->npos; i++)   /* every topic known before anything is printed */
		if (!md_topic(c, md, a->pos[i], &rc))
			return rc;
	names = calloc((unsigned)a->npos, sizeof *names);
	repl = calloc((unsigned)a->npos, sizeof *repl);
	for (int i = 0; i < a->npos; i++)
		names[i] = (struct kafka_str){ a->pos[i], (int32_t)strlen(a->pos[i]) };
	ctl_topic_repl(c, names, a->npos, repl);   /* min.insync.replicas; -1 when not read */
	if (c->json) {
		json_obj_begin(NULL);
		json_arr_begin("topics");
	}
	for (int i = 0; i < a->npos; i++) {
		const struct kafka_metadata_response_metadata_response_topic *t = md_topic(c, md, a->pos[i], &rc);
		int32_t n;
		int64_t *start, *hw, *size, *log_end;
		int32_t *shard;
		int16_t err1, err2;
		int szrc;
		int32_t min_isr = repl[i].min_isr, n_under = 0, n_under_min = 0;

		if (!t)
			break;
		n = t->Partitions.count;
		qsort(t->Partitions.items, (size_t)n, sizeof t->Partitions.items[0], cmp_partition);
		start = calloc((size_t)n + 1, sizeof *start);
		hw = calloc((size_t)n + 1, sizeof *hw);
		size = calloc((size_t)n + 1, sizeof *size);
		log_end = calloc((size_t)n + 1, sizeof *log_end);
		shard = calloc((size_t)n + 1, sizeof *shard);
		ctl_list_offsets(c, t, -2, start, &err1);
		ctl_list_offsets(c, t, -1, hw, &err2);
		szrc = topic_sizes(c, t, size);
		topic_admin(c, t, shard, log_end);
		for (int32_t j = 0; j < n; j++) {
			const struct kafka_metadata_response_metadata_response_partition *p = &t->Partitions.items[j];
			struct cc_partition cp = { p->PartitionIndex, p->LeaderId, p->ReplicaNodes.items,
						   p->ReplicaNodes.count, p->IsrNodes.items, p->IsrNodes.count };

			n_under += cc_under_replicated(&cp);
			n_under_min += cc_under_min_isr(&cp, min_isr);
		}
		if (c->json) {
			json_obj_begin(NULL);
			json_strn("name", t->Name.ptr, t->Name.len);
			json_bool("internal", t->IsInternal);
			json_int_or_null("min_insync_replicas", min_isr);
			json_int("under_replicated_partitions", n_under);
			if (min_isr >= 0)
				json_int("under_min_isr_partitions", n_under_min);
			else
				json_null("under_min_isr_partitions");
			json_arr_begin("partitions");
		} else {
			printf("%stopic %s: %d partition(s), replication factor %d%s\n", i ? "\n" : "",
			       kstr(t->Name), n, n ? t->Partitions.items[0].ReplicaNodes.count : 0,
			       t->IsInternal ? ", internal" : "");
		}
		struct table tb;
		static const char *heads[] = { "PART", "LEADER", "REPLICAS", "ISR", "LOG-START", "HIGH-WM",
					       "LOG-END", "SIZE", "SHARD" };

		table_init(&tb, 9, heads);
		for (int col = 0; col < 9; col++)
			if (col != 2 && col != 3)
				table_right(&tb, col);
		for (int32_t j = 0; j < n; j++) {
			const struct kafka_metadata_response_metadata_response_partition *p = &t->Partitions.items[j];
			struct cc_partition cp = { p->PartitionIndex, p->LeaderId, p->ReplicaNodes.items,
						   p->ReplicaNodes.count, p->IsrNodes.items, p->IsrNodes.count };
			bool under = cc_under_replicated(&cp), under_min = cc_under_min_isr(&cp, min_isr);

			if (c->json) {
				json_obj_begin(NULL);
				json_int("partition", p->PartitionIndex);
				json_int("leader", p->LeaderId);
				json_int_list("replicas", p->ReplicaNodes.items, p->ReplicaNodes.count);
				json_int_list("isr", p->IsrNodes.items, p->IsrNodes.count);
				json_bool("under_replicated", under);
				json_bool("under_min_isr", under_min);
				json_int_list("offline_replicas", p->OfflineReplicas.items,
					      p->OfflineReplicas.count > 0 ? p->OfflineReplicas.count : 0);
				json_int_or_null("log_start_offset", start[j]);
				json_int_or_null("high_watermark", hw[j]);
				json_int_or_null("log_end_offset", log_end[j]);
				json_int_or_null("size_bytes", size[j]);
				json_int_or_null("shard", shard[j]);
				if (p->ErrorCode)
					json_str("error", kerr_name(p->ErrorCode));
				else
					json_null("error");
				json_obj_end();
			} else {
				table_add(&tb, fmt("%d", p->PartitionIndex), fmt("%d", p->LeaderId),
					  int_list(p->ReplicaNodes.items, p->ReplicaNodes.count),
					  fmt("%s%s%s", int_list(p->IsrNodes.items, p->IsrNodes.count), under ? "*" : "",
					      under_min ? "!" : ""),
					  start[j] >= 0 ? fmt("%lld", (long long)start[j]) : "?",
					  hw[j] >= 0 ? fmt("%lld", (long long)hw[j]) : "?",
					  log_end[j] >= 0 ? fmt("%lld", (long long)log_end[j]) : "?",
					  human_bytes(size[j]), shard[j] >= 0 ? fmt("%d", shard[j]) : "?");
			}
		}
		if (c->json) {
			json_arr_end();
			json_obj_end();
		} else {
			table_print(&tb);
			printf("under-replicated: %d (ISR*), under min.insync.replicas", n_under);
			if (min_isr >= 0)
				printf(" %d: %d (ISR!)\n", min_isr, n_under_min);
			else
				printf(": ? (min.insync.replicas not read)\n");
		}
		table_fini(&tb);
		if ((err1 || err2) && !c->json)
			fprintf(stderr, "sluicectl: %s: offsets of some partitions: %s\n", c->cmd,
				kerr_name(err1 ? err1 : err2));
		if (szrc == -ENOTSUP && !c->json)
			fprintf(stderr, "sluicectl: %s: a leader does not serve DescribeLogDirs: size on disk "
				"unknown\n", c->cmd);
		free(start);
		free(hw);
		free(size);
		free(log_end);
		free(shard);
	}
	free(names);
	free(repl);
	if (c->json && !rc) {
		json_arr_end();
		json_obj_end();
		json_end();
	}
	if (!rc && !c->json && c->admin_down)
		printf("(?: unknown; log end and shard come from the admin endpoint, which did not answer)\n");
	return rc;
}

static int cmd_topic_create(struct ctl *c, const struct args *a)
{
	struct kclient *k;
	struct kafka_create_topics_request req;
	struct kafka_create_topics_request_creatable_topic t;
	struct kafka_create_topics_request_creatable_topic_config cfg[64];
	struct kafka_create_topics_response *resp;
	const char *vals[64];
	int64_t parts = -1, rf = -1;
	int16_t v;
	int n;

	if (a->npos != 1)
		return ctl_usage(c, "name exactly one topic");
	if (opt_get(a, "partitions") && !parse_i64(opt_get(a, "partitions"), 1, INT32_MAX, &parts))
		return ctl_usage(c, "--partitions wants an integer >= 1, not '%s'", opt_get(a, "partitions"));
	if (opt_get(a, "replication-factor") &&
	    !parse_i64(opt_get(a, "replication-factor"), 1, INT16_MAX, &rf))
		return ctl_usage(c, "--replication-factor wants an integer >= 1, not '%s'",
				 opt_get(a, "replication-factor"));
	n = opt_all(a, "config", vals, 64);
	for (int i = 0; i < n; i++) {
		const char *eq = strchr(vals[i], '=');

		if (!eq || eq == vals[i])
			return ctl_usage(c, "--config wants KEY=VALUE, not '%s'", vals[i]);
		cfg[i].Name = (struct kafka_str){ vals[i], (int32_t)(eq - vals[i]) };
		cfg[i].Value = (struct kafka_str){ eq + 1, (int32_t)strlen(eq + 1) };
	}
	k = ctl_client(c);
	v = ctl_version(c, k, KAFKA_CREATE_TOPICS_KEY, 4);
	if (v < 4 && (parts < 0 || rf < 0)) {   /* defaults (-1) need v4 */
		parts = parts < 0 ? 1 : parts;
		rf = rf < 0 ? 1 : rf;
	}
	kafka_create_topics_request_init(&req);
	memset(&t, 0, sizeof t);
	t.Name = (struct kafka_str){ a->pos[0], (int32_t)strlen(a->pos[0]) };
	t.NumPartitions = (int32_t)parts;
	t.ReplicationFactor = (int16_t)rf;
	t.Assignments.count = 0;
	t.Configs.items = cfg;
	t.Configs.count = n;
	req.Topics.items = &t;
	req.Topics.count = 1;
	req.timeoutMs = c->timeout_ms;
	req.validateOnly = opt_has(a, "validate-only");
	resp = ctl_call(c, k, KAFKA_CREATE_TOPICS_KEY, v, &req);
	for (int32_t i = 0; i < resp->Topics.count; i++) {
		const struct kafka_create_topics_response_creatable_topic_result *r = &resp->Topics.items[i];

		if (r->ErrorCode == KERR_TOPIC_ALREADY_EXISTS && opt_has(a, "if-not-exists"))
			continue;
		if (r->ErrorCode)
			return ctl_kafka_error(c, r->ErrorCode, r->ErrorMessage, "creating topic '%s'", a->pos[0]);
	}
	if (c->json) {
		json_obj_begin(NULL);
		json_str("name", a->pos[0]);
		json_bool("created", !req.validateOnly && !(resp->Topics.count && resp->Topics.items[0].ErrorCode));
		json_bool("validate_only", req.validateOnly);
		json_obj_end();
		json_end();
	} else if (resp->Topics.count && resp->Topics.items[0].ErrorCode == KERR_TOPIC_ALREADY_EXISTS) {
		printf("topic %s already exists\n", a->pos[0]);
	} else {
		printf("%s topic %s\n", req.validateOnly ? "would create" : "created", a->pos[0]);
	}
	return 0;
}

static int cmd_topic_delete(struct ctl *c, const struct args *a)
{
	struct kclient *k;
	int rc = 0;

	if (a->npos < 1)
		return ctl_usage(c, "name at least one topic");
	k = ctl_client(c);
	if (c->json) {
		json_obj_begin(NULL);
		json_arr_begin("topics");
	}
	/* One topic per request, so that many topics show progress. */
	for (int i = 0; i < a->npos; i++) {
		struct kafka_delete_topics_request req;
		struct kafka_delete_topics_response *resp;
		struct kafka_str name = { a->pos[i], (int32_t)strlen(a->pos[i]) };
		struct kclient_mem *mark = k->mem;
		char label[300];

		kafka_delete_topics_request_init(&req);
		req.TopicNames.items = &name;
		req.TopicNames.count = 1;
		req.TimeoutMs = c->timeout_ms;
		/* one topic can be long work (10,000 partitions): its wait shows */
		snprintf(label, sizeof(label), "deleting topic %s", a->pos[i]);
		k->waiting = label;
		resp = ctl_call(c, k, KAFKA_DELETE_TOPICS_KEY, ctl_version(c, k, KAFKA_DELETE_TOPICS_KEY, 3), &req);
		k->waiting = NULL;
		for (int32_t j = 0; j < resp->Responses.count; j++) {
			const struct kafka_delete_topics_response_deletable_topic_result *r = &resp->Responses.items[j];
			bool ignore = r->ErrorCode == KERR_UNKNOWN_TOPIC_OR_PARTITION && opt_has(a, "if-exists");

			if (r->ErrorCode && !ignore)
				rc = ctl_kafka_error(c, r->ErrorCode, (struct kafka_str){ NULL, -1 },
						     "deleting topic '%s'", kstr(r->Name));
			if (c->json) {
				json_obj_begin(NULL);
				json_strn("name", r->Name.ptr, r->Name.len);
				json_bool("deleted", !r->ErrorCode);
				if (r->ErrorCode)
					json_str("error", kerr_name(r->ErrorCode));
				else
					json_null("error");
				json_obj_end();
			} else if (!r->ErrorCode) {
				printf("deleted topic %s\n", kstr(r->Name));
			}
		}
		kclient_release_to(k, mark);
		if (a->npos > 1)
			progress("deleting topics", i + 1, a->npos);
	}
	if (c->json) {
		json_arr_end();
		json_obj_end();
		json_end();
	}
	return rc;
}

static int cmd_topic_alter_config(struct ctl *c, const struct args *a)
{
	struct kclient *k;
	struct kafka_incremental_alter_configs_request req;
	struct kafka_incremental_alter_configs_request_alter_configs_resource res;
	struct kafka_incremental_alter_configs_request_alterable_config cfg[128];
	struct kafka_incremental_alter_configs_response *resp;
	const char *sets[64], *dels[64];
	int ns, nd, n = 0;

	if (a->npos != 1)
		return ctl_usage(c, "name exactly one topic");
	ns = opt_all(a, "set", sets, 64);
	nd = opt_all(a, "delete", dels, 64);
	if (!ns && !nd)
		return ctl_usage(c, "nothing to change: give --set KEY=VALUE or --delete KEY");
	for (int i = 0; i < ns; i++) {
		const char *eq = strchr(sets[i], '=');

		if (!eq || eq == sets[i])
			return ctl_usage(c, "--set wants KEY=VALUE, not '%s'", sets[i]);
		cfg[n].Name = (struct kafka_str){ sets[i], (int32_t)(eq - sets[i]) };
		cfg[n].ConfigOperation = 0;   /* SET */
		cfg[n].Value = (struct kafka_str){ eq + 1, (int32_t)strlen(eq + 1) };
		n++;
	}
	for (int i = 0; i < nd; i++) {
		cfg[n].Name = (struct kafka_str){ dels[i], (int32_t)strlen(dels[i]) };
		cfg[n].ConfigOperation = 1;   /* DELETE */
		cfg[n].Value = (struct kafka_str){ NULL, -1 };
		n++;
	}
	k = ctl_client(c);
	kafka_incremental_alter_configs_request_init(&req);
	memset(&res, 0, sizeof res);
	res.ResourceType = 2;   /* TOPIC */
	res.ResourceName = (struct kafka_str){ a->pos[0], (int32_t)strlen(a->pos[0]) };
	res.Configs.items = cfg;
	res.Configs.count = n;
	req.Resources.items = &res;
	req.Resources.count = 1;
	req.ValidateOnly = opt_has(a, "validate-only");
	resp = ctl_call(c, k, KAFKA_INCREMENTAL_ALTER_CONFIGS_KEY, ctl_version(c, k, KAFKA_INCREMENTAL_ALTER_CONFIGS_KEY, 1), &req);
	for (int32_t i = 0; i < resp->Responses.count; i++)
		if (resp->Responses.items[i].ErrorCode)
			return ctl_kafka_error(c, resp->Responses.items[i].ErrorCode,
					       resp->Responses.items[i].ErrorMessage,
					       "changing the configuration of topic '%s'", a->pos[0]);
	if (c->json) {
		json_obj_begin(NULL);
		json_str("topic", a->pos[0]);
		json_bool("validate_only", req.ValidateOnly);
		json_arr_begin("set");
		for (int i = 0; i < ns; i++)
			json_str(NULL, sets[i]);
		json_arr_end();
		json_arr_begin("deleted");
		for (int i = 0; i < nd; i++)
			json_str(NULL, dels[i]);
		json_arr_end();
		json_obj_end();
		json_end();
	} else {
		for (int i = 0; i < ns; i++)
			printf("topic %s: %sset %s\n", a->pos[0], req.ValidateOnly ? "would " : "", sets[i]);
		for (int i = 0; i < nd; i++)
			printf("topic %s: %sreset %s to its default\n", a->pos[0],
			       req.ValidateOnly ? "would " : "", dels[i]);
	}
	return 0;
}

static const char *config_source(int8_t s)
{
	static const char *names[] = { "unknown", "topic", "dynamic-broker", "dynamic-default-broker",
				       "static-broker", "default", "dynamic-broker-logger" };

	return s >= 0 && s < 7 ? names[s] : "unknown";
}

static int cmd_topic_describe_config(struct ctl *c, const struct args *a)
{
	struct kclient *k;
	struct kafka_describe_configs_request req;
	struct kafka_describe_configs_request_describe_configs_resource res;
	struct kafka_describe_configs_response *resp;
	bool all = opt_has(a, "all");
	int16_t v;
	int shown = 0;

	if (a->npos != 1)
		return ctl_usage(c, "name exactly one topic");
	k = ctl_client(c);
	v = ctl_version(c, k, KAFKA_DESCRIBE_CONFIGS_KEY, 2);
	kafka_describe_configs_request_init(&req);
	memset(&res, 0, sizeof res);
	res.ResourceType = 2;
	res.ResourceName = (struct kafka_str){ a->pos[0], (int32_t)strlen(a->pos[0]) };
	res.ConfigurationKeys.count = -1;
	req.Resources.items = &res;
	req.Resources.count = 1;
	resp = ctl_call(c, k, KAFKA_DESCRIBE_CONFIGS_KEY, v, &req);
	for (int32_t i = 0; i < resp->Results.count; i++)
		if (resp->Results.items[i].ErrorCode)
			return ctl_kafka_error(c, resp->Results.items[i].ErrorCode,
					       resp->Results.items[i].ErrorMessage, "topic '%s'", a->pos[0]);
	struct table t;
	static const char *heads[] = { "KEY", "VALUE", "SOURCE" };

	table_init(&t, 3, heads);
	if (c->json) {
		json_obj_begin(NULL);
		json_str("topic", a->pos[0]);
		json_bool("all", all);
		json_arr_begin("configs");
	}
	for (int32_t i = 0; i < resp->Results.count; i++) {
		const struct kafka_describe_configs_response_describe_configs_result *r = &resp->Results.items[i];

		for (int32_t j = 0; j < r->Configs.count; j++) {
			const struct kafka_describe_configs_response_describe_configs_resource_result *e =
				&r->Configs.items[j];
			int8_t src = v >= 1 ? e->ConfigSource : (e->IsDefault ? 5 : 1);

			if (!all && src != 1)
				continue;   /* only what is set on the topic */
			shown++;
			if (c->json) {
				json_obj_begin(NULL);
				json_strn("name", e->Name.ptr, e->Name.len);
				json_strn("value", e->Value.ptr, e->IsSensitive ? -1 : e->Value.len);
				json_str("source", config_source(src));
				json_bool("read_only", e->ReadOnly);
				json_bool("sensitive", e->IsSensitive);
				json_obj_end();
			} else {
				table_add(&t, kstr(e->Name),
					  e->IsSensitive ? "(sensitive)" : e->Value.len < 0 ? "(null)" : kstr(e->Value),
					  config_source(src));
			}
		}
	}
	if (c->json) {
		json_arr_end();
		json_obj_end();
		json_end();
	} else if (shown) {
		table_print(&t);
	} else {
		printf("topic %s: no values set on the topic (--all lists every value and its source)\n",
		       a->pos[0]);
	}
	table_fini(&t);
	return 0;
}

/* add-partitions: sample recent keys and say how many would move. */
struct key_sample {
	int64_t records, keyed, moved, per_part_left;
	int32_t old_n, new_n, partition;
	int64_t *per_part_moved;
};

static int sample_cb(void *arg, const struct fetched *r)
{
	struct key_sample *s = arg;

	s->records++;
	if (r->key) {
		int32_t now = murmur2_partition(r->key, (size_t)r->key_len, s->old_n);
		int32_t then = murmur2_partition(r->key, (size_t)r->key_len, s->new_n);

		s->keyed++;
		if (now != then)
			s->moved++;
	}
	return 0;
}

static int cmd_topic_add_partitions(struct ctl *c, const struct args *a)
{
	struct kafka_metadata_response *md;
	const struct kafka_metadata_response_metadata_response_topic *t;
	struct kafka_create_partitions_request req;
	struct kafka_create_partitions_request_create_partitions_topic rt;
	struct kafka_create_partitions_response *resp;
	struct key_sample s;
	struct kclient *k;
	int64_t count, sample = 1000, *start, *hw;
	int16_t err;
	int rc = 0;

	if (a->npos != 1)
		return ctl_usage(c, "name exactly one topic");
	if (!opt_get(a, "count") || !parse_i64(opt_get(a, "count"), 1, INT32_MAX, &count))
		return ctl_usage(c, "--count N (the new total partition count) is required");
	if (opt_get(a, "sample") && !parse_i64(opt_get(a, "sample"), 0, 100000000, &sample))
		return ctl_usage(c, "--sample wants a record count >= 0");
	md = ctl_metadata(c, (const char *const *)a->pos, 1);
	t = md_topic(c, md, a->pos[0], &rc);
	if (!t)
		return rc;
	if (count <= t->Partitions.count)
		return ctl_usage(c, "topic %s has %d partitions; --count must be larger (partitions cannot "
				 "be removed)", a->pos[0], t->Partitions.count);

	/* Sample the newest records of every partition (sample in all). */
	memset(&s, 0, sizeof s);
	s.old_n = t->Partitions.count;
	s.new_n = (int32_t)count;
	start = calloc((size_t)s.old_n, sizeof *start);
	hw = calloc((size_t)s.old_n, sizeof *hw);
	ctl_list_offsets(c, t, -2, start, &err);
	ctl_list_offsets(c, t, -1, hw, &err);
	for (int32_t j = 0; j < s.old_n && sample > 0; j++) {
		int64_t want = sample / s.old_n + 1;
		int64_t from = hw[j] - want > start[j] ? hw[j] - want : start[j];
		int16_t kerr = 0;

		if (start[j] < 0 || hw[j] <= from)
			continue;
		progress("sampling keys, partition", j + 1, s.old_n);
		if (ctl_fetch_range(c, t, t->Partitions.items[j].PartitionIndex, &from, hw[j], sample_cb, &s,
				    &kerr) < 0 || kerr) {
			free(start);
			free(hw);
			return kerr ? ctl_kafka_error(c, kerr, (struct kafka_str){ NULL, -1 },
						      "sampling keys of %s-%d", a->pos[0], j)
				    : ctl_fail(c, "sampling keys of %s-%d failed", a->pos[0], j);
		}
	}
	free(start);
	free(hw);
	if (s.moved && !opt_has(a, "force")) {
		wrap(stderr, 0, 4, fmt("sluicectl: %s: refusing to add partitions to %s (%d -> %lld) without "
				       "--force:", c->cmd, a->pos[0], s.old_n, (long long)count));
		fputs("  ", stderr);
		wrap(stderr, 2, 2, fmt("of %lld recent records sampled, %lld have keys, and %lld of those "
				       "(%.1f%%) would go to another partition under murmur2 for %lld partitions. "
				       "Per-key order breaks across the change: a consumer can see a key's new "
				       "records before its old ones. Treat it as a data migration. Other ways "
				       "forward: create a new topic with the partition count you want and move "
				       "producers and consumers over, or carry a logical sequence number per key "
				       "so consumers can reorder. To go ahead anyway: --force.",
				       (long long)s.records, (long long)s.keyed, (long long)s.moved,
				       100.0 * (double)s.moved / (double)s.keyed, (long long)count));
		if (c->json) {
			json_obj_begin(NULL);
			json_str("topic", a->pos[0]);
			json_int("old_partitions", s.old_n);
			json_int("new_partitions", count);
			json_int("sampled_records", s.records);
			json_int("keyed_records", s.keyed);
			json_int("moved_keys", s.moved);
			json_bool("added", false);
			json_obj_end();
			json_end();
		}
		return EXIT_KAFKA;
	}
	k = ctl_leader(c, md->ControllerId);
	kafka_create_partitions_request_init(&req);
	memset(&rt, 0, sizeof rt);
	rt.Name = t->Name;
	rt.Count = (int32_t)count;
	rt.Assignments.count = -1;
	req.Topics.items = &rt;
	req.Topics.count = 1;
	req.TimeoutMs = c->timeout_ms;
	req.ValidateOnly = opt_has(a, "validate-only");
	resp = ctl_call(c, k, KAFKA_CREATE_PARTITIONS_KEY, ctl_version(c, k, KAFKA_CREATE_PARTITIONS_KEY, 1), &req);
	for (int32_t i = 0; i < resp->Results.count; i++)
		if (resp->Results.items[i].ErrorCode)
			return ctl_kafka_error(c, resp->Results.items[i].ErrorCode,
					       resp->Results.items[i].ErrorMessage, "adding partitions to '%s'",
					       a->pos[0]);
	if (c->json) {
		json_obj_begin(NULL);
		json_str("topic", a->pos[0]);
		json_int("old_partitions", s.old_n);
		json_int("new_partitions", count);
		json_int("sampled_records", s.records);
		json_int("keyed_records", s.keyed);
		json_int("moved_keys", s.moved);
		json_bool("added", !req.ValidateOnly);
		json_obj_end();
		json_end();
	} else {
		printf("topic %s: %s %d -> %lld partitions (sampled %lld records, %lld keyed, %lld keys "
		       "move)\n", a->pos[0], req.ValidateOnly ? "would go from" : "went from", s.old_n,
		       (long long)count, (long long)s.records, (long long)s.keyed, (long long)s.moved);
	}
	return 0;
}

/* ---- the command table -------------------------------------------------- */

static const struct opt_spec no_opts[] = { { NULL, 0, NULL, NULL } };

static const struct opt_spec topic_list_opts[] = {
	{ "internal", 0, NULL, "also list internal topics (__consumer_offsets, __transaction_state)" },
	{ NULL, 0, NULL, NULL }
};

static const struct opt_spec topic_create_opts[] = {
	{ "partitions", 'p', "N", "partition count (default: the broker's num.partitions)" },
	{ "replication-factor", 'r', "N", "replicas per partition (default: the broker's default.replication.factor)" },
	{ "config", 'c', "KEY=VALUE", "a topic config (repeatable), e.g. retention.ms=3600000" },
	{ "if-not-exists", 0, NULL, "succeed when the topic already exists" },
	{ "validate-only", 0, NULL, "check the request, create nothing" },
	{ NULL, 0, NULL, NULL }
};

static const struct opt_spec topic_delete_opts[] = {
	{ "if-exists", 0, NULL, "succeed when the topic does not exist" },
	{ NULL, 0, NULL, NULL }
};

static const struct opt_spec topic_alter_opts[] = {
	{ "set", 's', "KEY=VALUE", "set a topic config (repeatable)" },
	{ "delete", 'd', "KEY", "remove a topic config, back to the broker's default (repeatable)" },
	{ "validate-only", 0, NULL, "check the change, apply nothing" },
	{ NULL, 0, NULL, NULL }
};

static const struct opt_spec topic_dconf_opts[] = {
	{ "all", 'a', NULL, "every value with its source, not only those set on the topic" },
	{ NULL, 0, NULL, NULL }
};

static const struct opt_spec topic_addp_opts[] = {
	{ "count", 'n', "N", "the new total partition count (required)" },
	{ "sample", 0, "N", "recent records to sample for keys, across partitions (default 1000)" },
	{ "force", 0, NULL, "add the partitions even though keys would move" },
	{ "validate-only", 0, NULL, "sample and check, add nothing" },
	{ NULL, 0, NULL, NULL }
};

const struct cmd topic_cmds[] = {
	{ "topic", "list", "", "every topic with its partition count", topic_list_opts,
	  "sluicectl topic list\nsluicectl topic list --internal --format json", cmd_topic_list },
	{ "topic", "describe", "TOPIC...", "per partition: leader, replicas, ISR (short ones marked), offsets, size, shard",
	  no_opts, "sluicectl topic describe orders\nsluicectl topic describe orders payments --format json",
	  cmd_topic_describe },
	{ "topic", "create", "TOPIC", "create a topic", topic_create_opts,
	  "sluicectl topic create orders -p 12\nsluicectl topic create audit -p 3 -c retention.ms=-1 "
	  "-c cleanup.policy=compact", cmd_topic_create },
	{ "topic", "delete", "TOPIC...", "delete topics and their data", topic_delete_opts,
	  "sluicectl topic delete scratch\nsluicectl topic delete old-1 old-2 --if-exists", cmd_topic_delete },
	{ "topic", "alter-config", "TOPIC", "set or remove topic configs", topic_alter_opts,
	  "sluicectl topic alter-config orders --set retention.ms=86400000\n"
	  "sluicectl topic alter-config orders --delete retention.ms", cmd_topic_alter_config },
	{ "topic", "describe-config", "TOPIC", "configs set on the topic (--all: every value and its source)",
	  topic_dconf_opts, "sluicectl topic describe-config orders\nsluicectl topic describe-config orders --all",
	  cmd_topic_describe_config },
	{ "topic", "add-partitions", "TOPIC", "raise the partition count (samples keys first: keys move)",
	  topic_addp_opts, "sluicectl topic add-partitions orders --count 24\n"
	  "sluicectl topic add-partitions orders --count 24 --force", cmd_topic_add_partitions },
};

const int topic_ncmds = sizeof topic_cmds / sizeof topic_cmds[0];
