/* control/sluicectl_reassign.c — moving replicas (KIP-455):
 *
 *   sluicectl partition reassign --topic T --partition N --replicas 2,3
 *       [--throttle BYTES_PER_S] [--no-wait]
 *   sluicectl partition reassign --topic T --partition N --cancel
 *   sluicectl partition reassignments
 *   sluicectl broker decommission ID [--throttle BYTES_PER_S] [--no-wait]
 *
 * reassign sends AlterPartitionReassignments (ApiKey 45), then (unless
 * --no-wait) polls ListPartitionReassignments (46) until the partition is
 * no longer being reassigned, and reports its replicas from Metadata.
 * --throttle sets leader. and follower.replication.throttled.rate
 * cluster-wide (IncrementalAlterConfigs on the default broker resource)
 * before, and removes them once the moves are done (with --no-wait they
 * stay: remove them with `sluicectl partition reassign --unthrottle`).
 * decommission moves every replica off broker ID: each partition
 * holding it gets a replacement among the other registered brokers, the
 * least loaded first (replicas per broker, across every partition), a
 * rack the partition does not use yet preferred (Kafka's placement's
 * spread: control/placement.c), the replacement taking ID's place in
 * the list (so the preferred leader stays where it was); refused when the
 * other brokers are fewer than a partition's replication factor.
 * Exit 0 when done, 1 for a Kafka error, a refusal or a wait that ran
 * out, 2 for bad usage.
 * @thread main */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/sluicectl.h"

#define MAX_RF 64
#define POLL_MS 500

static const char *const THROTTLE_KEYS[2] = { "leader.replication.throttled.rate",
					      "follower.replication.throttled.rate" };

/* Set (value) or remove (NULL) the throttle keys cluster-wide: 0, or the
 * exit code after saying why. */
static int throttle_set(struct ctl *c, const char *value)
{
	struct kclient *k = ctl_client(c);
	struct kafka_incremental_alter_configs_request req;
	struct kafka_incremental_alter_configs_request_alter_configs_resource res;
	struct kafka_incremental_alter_configs_request_alterable_config cfg[2];
	struct kafka_incremental_alter_configs_response *resp;

	for (int i = 0; i < 2; i++) {
		cfg[i].Name = (struct kafka_str){ THROTTLE_KEYS[i], (int32_t)strlen(THROTTLE_KEYS[i]) };
		cfg[i].ConfigOperation = value ? 0 : 1;   /* SET, DELETE */
		cfg[i].Value = value ? (struct kafka_str){ value, (int32_t)strlen(value) } : (struct kafka_str){ NULL, -1 };
	}
	kafka_incremental_alter_configs_request_init(&req);
	memset(&res, 0, sizeof res);
	res.ResourceType = 4;   /* BROKER; "" is the cluster-wide default */
	res.ResourceName = (struct kafka_str){ "", 0 };
	res.Configs.items = cfg;
	res.Configs.count = 2;
	req.Resources.items = &res;
	req.Resources.count = 1;
	resp = ctl_call(c, k, KAFKA_INCREMENTAL_ALTER_CONFIGS_KEY,
			ctl_version(c, k, KAFKA_INCREMENTAL_ALTER_CONFIGS_KEY, 1), &req);
	for (int32_t i = 0; i < resp->Responses.count; i++)
		if (resp->Responses.items[i].ErrorCode)
			return ctl_kafka_error(c, resp->Responses.items[i].ErrorCode, resp->Responses.items[i].ErrorMessage,
					       "%s the replication throttle", value ? "setting" : "removing");
	return 0;
}

/* One partition to move: its topic, index, replicas now and target. */
struct move {
	const char *topic;
	int32_t partition;
	int32_t before[MAX_RF], target[MAX_RF];
	int nbefore, ntarget;
	int16_t err;
	char msg[200];
};

/* AlterPartitionReassignments for moves[0..n) (cancel: null replicas):
 * each move's err and msg filled; the top-level error returned. */
static int16_t alter(struct ctl *c, struct move *moves, int n, int cancel)
{
	struct kclient *k = ctl_client(c);
	struct kafka_alter_partition_reassignments_request req;
	struct kafka_alter_partition_reassignments_request_reassignable_topic *ts = calloc((size_t)n + 1, sizeof *ts);
	struct kafka_alter_partition_reassignments_request_reassignable_partition *ps =
		calloc((size_t)n + 1, sizeof *ps);
	struct kafka_alter_partition_reassignments_response *resp;

	if (!ts || !ps) {
		fprintf(stderr, "sluicectl: out of memory\n");
		exit(EXIT_KAFKA);
	}
	kafka_alter_partition_reassignments_request_init(&req);
	req.TimeoutMs = c->timeout_ms;
	for (int i = 0; i < n; i++) {   /* one topic entry per partition: the request allows it */
		ps[i].PartitionIndex = moves[i].partition;
		ps[i].Replicas.items = cancel ? NULL : moves[i].target;
		ps[i].Replicas.count = cancel ? -1 : moves[i].ntarget;
		ts[i].Name = (struct kafka_str){ moves[i].topic, (int32_t)strlen(moves[i].topic) };
		ts[i].Partitions.items = &ps[i];
		ts[i].Partitions.count = 1;
	}
	req.Topics.items = ts;
	req.Topics.count = n;
	resp = ctl_call(c, k, KAFKA_ALTER_PARTITION_REASSIGNMENTS_KEY,
			ctl_version(c, k, KAFKA_ALTER_PARTITION_REASSIGNMENTS_KEY, 0), &req);
	free(ts);
	free(ps);
	for (int32_t i = 0; i < resp->Responses.count; i++) {
		const struct kafka_alter_partition_reassignments_response_reassignable_topic_response *t =
			&resp->Responses.items[i];

		for (int32_t j = 0; j < t->Partitions.count; j++)
			for (int m = 0; m < n; m++)
				if ((int32_t)strlen(moves[m].topic) == t->Name.len &&
				    !memcmp(moves[m].topic, t->Name.ptr, (size_t)t->Name.len) &&
				    moves[m].partition == t->Partitions.items[j].PartitionIndex) {
					moves[m].err = t->Partitions.items[j].ErrorCode;
					snprintf(moves[m].msg, sizeof moves[m].msg, "%s",
						 kstr(t->Partitions.items[j].ErrorMessage));
				}
	}
	return resp->ErrorCode;
}

/* The reassignments in progress (ListPartitionReassignments, every one). */
static struct kafka_list_partition_reassignments_response *list(struct ctl *c)
{
	struct kclient *k = ctl_client(c);
	struct kafka_list_partition_reassignments_request req;

	kafka_list_partition_reassignments_request_init(&req);
	req.TimeoutMs = c->timeout_ms;
	req.Topics.count = -1;
	return ctl_call(c, k, KAFKA_LIST_PARTITION_REASSIGNMENTS_KEY,
			ctl_version(c, k, KAFKA_LIST_PARTITION_REASSIGNMENTS_KEY, 0), &req);
}

static int in_progress(const struct kafka_list_partition_reassignments_response *r, const struct move *m)
{
	for (int32_t i = 0; i < r->Topics.count; i++)
		if (r->Topics.items[i].Name.len == (int32_t)strlen(m->topic) &&
		    !memcmp(r->Topics.items[i].Name.ptr, m->topic, (size_t)r->Topics.items[i].Name.len))
			for (int32_t j = 0; j < r->Topics.items[i].Partitions.count; j++)
				if (r->Topics.items[i].Partitions.items[j].PartitionIndex == m->partition)
					return 1;
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The replicas of topic/partition in a Metadata answer (n, or -1). */
static int md_replicas(const struct kafka_metadata_response *md, const char *topic, int32_t partition, int32_t *out,
		       int32_t *leader)
{
	for (int32_t i = 0; i < md->Topics.count; i++) {
		const struct kafka_metadata_response_metadata_response_topic *t = &md->Topics.items[i];

		if (t->Name.len != (int32_t)strlen(topic) || memcmp(t->Name.ptr, topic, (size_t)t->Name.len))
			continue;
		for (int32_t j = 0; j < t->Partitions.count; j++) {
			const struct kafka_metadata_response_metadata_response_partition *p = &t->Partitions.items[j];
			int n = p->ReplicaNodes.count < MAX_RF ? p->ReplicaNodes.count : MAX_RF;

			if (p->PartitionIndex != partition)
				continue;
			memcpy(out, p->ReplicaNodes.items, (size_t)n * sizeof(*out));
			if (leader)
				*leader = p->LeaderId;
			return n;
		}
	}
	return -1;
}

/* Wait until none of the moves (those started: err 0) is in progress, at
 * most max_s seconds, saying on stderr how many are left as it changes.
 * 0 done, 1 the wait ran out. */
static int wait_moves(struct ctl *c, const struct move *moves, int n, int64_t max_s)
{
	int64_t t0 = now_ms();
	int last = -1;

	for (;;) {
		struct kclient_mem *mark = ctl_client(c)->mem;
		struct kafka_list_partition_reassignments_response *r = list(c);
		int left = 0, started = 0;

		for (int i = 0; i < n; i++)
			if (!moves[i].err) {
				started++;
				left += in_progress(r, &moves[i]);
			}
		kclient_release_to(ctl_client(c), mark);
		if (left != last && !c->json)
			fprintf(stderr, "sluicectl: %d of %d partitions moved, %d still catching up (%.1f s)\n",
				started - left, started, left, (double)(now_ms() - t0) / 1000.0);
		last = left;
		if (!left) {
			/* the broker's Metadata follows the records it applied
			 * a turn later: the report shows the replicas as moved */
			for (int tries = 0; tries < 20; tries++) {
				struct kafka_metadata_response *md = ctl_metadata(c, NULL, 0);
				int stale = 0;

				for (int i = 0; i < n; i++) {
					int32_t now[MAX_RF];
					int nn = md_replicas(md, moves[i].topic, moves[i].partition, now, NULL);

					stale |= !moves[i].err && (nn != moves[i].ntarget ||
								   memcmp(now, moves[i].target, (size_t)nn * sizeof(*now)));
				}
				if (!stale)
					break;
				sleep_ms(100);
			}
			return 0;
		}
		if (now_ms() - t0 > max_s * 1000)
			return 1;
		sleep_ms(POLL_MS);
	}
}

static void json_ids(const char *key, const int32_t *ids, int n)
{
	json_arr_begin(key);
	for (int i = 0; i < n; i++)
		json_int(NULL, ids[i]);
	json_arr_end();
}

static const char *ids_text(const int32_t *ids, int n)
{
	char buf[400];
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && at < sizeof buf - 16; i++)
		at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%d", i ? "," : "", ids[i]);
	return fmt("%s", buf);
}

/* The moves' outcome: each with its replicas now (Metadata), as a table or
 * JSON; the exit code (1 when one failed or the wait ran out). */
static int report(struct ctl *c, const char *what, int32_t broker, struct move *moves, int n, int waited,
		  int timed_out, const char *throttle, int64_t t0)
{
	struct kafka_metadata_response *md = ctl_metadata(c, NULL, 0);
	int rc = 0, failed = 0;
	struct table t;
	static const char *heads[] = { "TOPIC", "PARTITION", "BEFORE", "TARGET", "NOW", "RESULT" };

	for (int i = 0; i < n; i++)
		if (moves[i].err) {
			failed++;
			rc = ctl_kafka_error(c, moves[i].err, (struct kafka_str){ moves[i].msg, (int32_t)strlen(moves[i].msg) },
					     "reassigning %s-%d", moves[i].topic, moves[i].partition);
		}
	if (timed_out)
		rc = ctl_fail(c, "the reassignments did not complete in time: see `sluicectl partition reassignments`");
	if (c->json) {
		json_obj_begin(NULL);
		json_str("action", what);
		if (broker >= 0)
			json_int("broker", broker);
		json_str("throttle", throttle);
		json_bool("waited", waited);
		json_bool("complete", waited && !timed_out && !failed);
		json_int("elapsed_ms", now_ms() - t0);
		json_arr_begin("partitions");
	} else {
		table_init(&t, 6, heads);
		table_right(&t, 1);
	}
	for (int i = 0; i < n; i++) {
		int32_t now[MAX_RF], leader = -1;
		int nn = md_replicas(md, moves[i].topic, moves[i].partition, now, &leader);
		const char *res = moves[i].err ? kerr_name(moves[i].err) : !waited ? "started"
				  : timed_out ? "in progress" : "moved";

		if (c->json) {
			json_obj_begin(NULL);
			json_str("topic", moves[i].topic);
			json_int("partition", moves[i].partition);
			json_ids("before", moves[i].before, moves[i].nbefore);
			json_ids("target", moves[i].target, moves[i].ntarget);
			json_ids("replicas", now, nn > 0 ? nn : 0);
			json_int("leader", leader);
			json_str("result", res);
			json_str("error", moves[i].err ? kerr_name(moves[i].err) : NULL);
			json_int("error_code", moves[i].err);
			json_obj_end();
		} else {
			table_add(&t, moves[i].topic, fmt("%d", moves[i].partition), ids_text(moves[i].before, moves[i].nbefore),
				  ids_text(moves[i].target, moves[i].ntarget), ids_text(now, nn > 0 ? nn : 0), res);
		}
	}
	if (c->json) {
		json_arr_end();
		json_int("moved", n - failed);
		json_int("failed", failed);
		json_obj_end();
		json_end();
	} else {
		table_sort(&t);
		table_print(&t);
		table_fini(&t);
		printf("%d partitions %s, %d failed\n", n - failed, waited && !timed_out ? "moved" : "started", failed);
	}
	return rc;
}

static int parse_ids(const char *s, int32_t *out, int cap)
{
	int n = 0;

	while (*s) {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || v < 0 || v > INT32_MAX || n == cap || (*end && *end != ','))
			return -1;
		out[n++] = (int32_t)v;
		s = *end ? end + 1 : end;
	}
	return n;
}

/* --throttle's value, checked: NULL (none) or the text; *bad on error. */
static const char *throttle_opt(struct ctl *c, const struct args *a, int *bad)
{
	const char *v = opt_get(a, "throttle");
	int64_t n;

	*bad = 0;
	if (v && !parse_i64(v, 1, INT64_MAX, &n)) {
		*bad = ctl_usage(c, "--throttle wants bytes per second (a positive integer), not '%s'", v);
		return NULL;
	}
	return v;
}

static int64_t max_wait(const struct args *a)
{
	int64_t s = 3600;

	if (opt_get(a, "max-wait"))
		parse_i64(opt_get(a, "max-wait"), 1, INT32_MAX, &s);
	return s;
}

/* Set the throttle, start the moves, wait, remove the throttle, report. */
static int run_moves(struct ctl *c, const struct args *a, const char *what, int32_t broker, struct move *moves,
		     int n, const char *throttle)
{
	int wait = !opt_has(a, "no-wait"), timed_out = 0, started = 0, rc;
	int64_t t0 = now_ms();
	int16_t top;

	if (throttle && (rc = throttle_set(c, throttle)))
		return rc;
	top = alter(c, moves, n, 0);
	if (top)
		return ctl_kafka_error(c, top, (struct kafka_str){ NULL, -1 }, "reassigning partitions");
	for (int i = 0; i < n; i++)
		started += !moves[i].err;
	if (wait && started)
		timed_out = wait_moves(c, moves, n, max_wait(a));
	if (throttle && wait && !timed_out && (rc = throttle_set(c, NULL)))
		return rc;
	return report(c, what, broker, moves, n, wait, timed_out, throttle, t0);
}

static int cmd_partition_reassign(struct ctl *c, const struct args *a)
{
	const char *topic = opt_get(a, "topic"), *part = opt_get(a, "partition"), *reps = opt_get(a, "replicas");
	int cancel = opt_has(a, "cancel"), bad;
	const char *throttle = throttle_opt(c, a, &bad);
	struct move m;
	int64_t v;

	if (bad)
		return bad;
	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	if (opt_has(a, "unthrottle")) {
		if (topic || reps || cancel)
			return ctl_usage(c, "--unthrottle takes no other option");
		if ((bad = throttle_set(c, NULL)))
			return bad;
		if (c->json) {
			json_obj_begin(NULL);
			json_str("throttle", NULL);
			json_obj_end();
			json_end();
		} else {
			printf("replication throttle removed\n");
		}
		return 0;
	}
	if (!topic || !part)
		return ctl_usage(c, "name the partition: --topic T --partition N");
	if (!parse_i64(part, 0, INT32_MAX, &v))
		return ctl_usage(c, "--partition wants a partition number, not '%s'", part);
	if (cancel == (reps != NULL))
		return ctl_usage(c, "give either --replicas IDS (the target) or --cancel");
	memset(&m, 0, sizeof m);
	m.topic = topic;
	m.partition = (int32_t)v;
	if (reps && (m.ntarget = parse_ids(reps, m.target, MAX_RF)) < 1)
		return ctl_usage(c, "--replicas wants broker ids separated by commas (2,3), not '%s'", reps);
	{
		const char *names[1] = { topic };
		struct kafka_metadata_response *md = ctl_metadata(c, names, 1);

		m.nbefore = md_replicas(md, topic, m.partition, m.before, NULL);
		if (m.nbefore < 0)
			m.nbefore = 0;   /* the broker names it (UNKNOWN_TOPIC_OR_PARTITION) */
	}
	if (cancel) {
		int16_t top = alter(c, &m, 1, 1);

		if (top)
			return ctl_kafka_error(c, top, (struct kafka_str){ NULL, -1 }, "cancelling a reassignment");
		return report(c, "cancel", -1, &m, 1, 0, 0, NULL, now_ms());
	}
	return run_moves(c, a, "reassign", -1, &m, 1, throttle);
}

static int cmd_partition_reassignments(struct ctl *c, const struct args *a)
{
	struct kafka_list_partition_reassignments_response *r;
	struct table t;
	int n = 0;
	static const char *heads[] = { "TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING" };

	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	r = list(c);
	if (r->ErrorCode)
		return ctl_kafka_error(c, r->ErrorCode, r->ErrorMessage, "listing reassignments");
	if (c->json) {
		json_obj_begin(NULL);
		json_arr_begin("reassignments");
	} else {
		table_init(&t, 5, heads);
		table_right(&t, 1);
	}
	for (int32_t i = 0; i < r->Topics.count; i++)
		for (int32_t j = 0; j < r->Topics.items[i].Partitions.count; j++) {
			const struct kafka_list_partition_reassignments_response_ongoing_partition_reassignment *p =
				&r->Topics.items[i].Partitions.items[j];

			n++;
			if (c->json) {
				json_obj_begin(NULL);
				json_strn("topic", r->Topics.items[i].Name.ptr, r->Topics.items[i].Name.len);
				json_int("partition", p->PartitionIndex);
				json_ids("replicas", p->Replicas.items, p->Replicas.count);
				json_ids("adding", p->AddingReplicas.items, p->AddingReplicas.count);
				json_ids("removing", p->RemovingReplicas.items, p->RemovingReplicas.count);
				json_obj_end();
			} else {
				table_add(&t, kstr(r->Topics.items[i].Name), fmt("%d", p->PartitionIndex),
					  ids_text(p->Replicas.items, p->Replicas.count),
					  ids_text(p->AddingReplicas.items, p->AddingReplicas.count),
					  ids_text(p->RemovingReplicas.items, p->RemovingReplicas.count));
			}
		}
	if (c->json) {
		json_arr_end();
		json_int("count", n);
		json_obj_end();
		json_end();
	} else {
		table_sort(&t);
		table_print(&t);
		table_fini(&t);
		printf("%d reassignments in progress\n", n);
	}
	return 0;
}

/* ---- broker decommission ------------------------------------------------ */

struct brk {
	int32_t id;
	char rack[256];
	int64_t load;                /* replicas it holds */
};

static int has(const int32_t *ids, int n, int32_t id)
{
	for (int i = 0; i < n; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

/* The replacement for a partition of replicas r (n) among brokers bs: not
 * in r, a rack r does not use preferred, then the least loaded, then the
 * lowest id. NULL when none is left. */
static struct brk *replacement(struct brk *bs, int nb, int32_t gone, const int32_t *r, int n)
{
	struct brk *best = NULL;
	int best_new_rack = 0;

	for (int i = 0; i < nb; i++) {
		struct brk *b = &bs[i];
		int new_rack = 1;

		if (b->id == gone || has(r, n, b->id))
			continue;
		for (int j = 0; j < n; j++)
			for (int k = 0; k < nb; k++)
				if (bs[k].id == r[j] && r[j] != gone && bs[k].rack[0] && !strcmp(bs[k].rack, b->rack))
					new_rack = 0;
		if (!best || new_rack > best_new_rack ||
		    (new_rack == best_new_rack && (b->load < best->load || (b->load == best->load && b->id < best->id)))) {
			best = b;
			best_new_rack = new_rack;
		}
	}
	return best;
}

static int cmd_broker_decommission(struct ctl *c, const struct args *a)
{
	struct kafka_metadata_response *md;
	struct brk *bs;
	struct move *moves;
	int nb = 0, n = 0, cap = 0, known = 0, self_listed = 0, bad, rc;
	const char *throttle = throttle_opt(c, a, &bad);
	int64_t id;

	if (bad)
		return bad;
	if (a->npos != 1 || !parse_i64(a->pos[0], 0, INT32_MAX, &id))
		return ctl_usage(c, "name the broker to decommission: its node id");
	md = ctl_metadata(c, NULL, 0);
	bs = calloc((size_t)md->Brokers.count + 1, sizeof *bs);
	if (!bs)
		return ctl_fail(c, "out of memory");
	for (int32_t i = 0; i < md->Brokers.count; i++) {
		const struct kafka_metadata_response_metadata_response_broker *b = &md->Brokers.items[i];

		known |= b->NodeId == (int32_t)id;
		self_listed |= b->NodeId == (int32_t)id;   /* a fenced broker is not listed */
		bs[nb].id = b->NodeId;
		snprintf(bs[nb].rack, sizeof bs[nb].rack, "%s", b->Rack.len > 0 ? kstr(b->Rack) : "");
		nb++;
	}
	for (int32_t i = 0; i < md->Topics.count; i++)
		for (int32_t j = 0; j < md->Topics.items[i].Partitions.count; j++) {
			const struct kafka_metadata_response_metadata_response_partition *p =
				&md->Topics.items[i].Partitions.items[j];

			for (int32_t k = 0; k < p->ReplicaNodes.count; k++)
				for (int b = 0; b < nb; b++)
					bs[b].load += bs[b].id == p->ReplicaNodes.items[k];
		}
	moves = NULL;
	for (int32_t i = 0; i < md->Topics.count; i++) {
		const struct kafka_metadata_response_metadata_response_topic *t = &md->Topics.items[i];

		for (int32_t j = 0; j < t->Partitions.count; j++) {
			const struct kafka_metadata_response_metadata_response_partition *p = &t->Partitions.items[j];
			struct move *m;
			int nr = p->ReplicaNodes.count < MAX_RF ? p->ReplicaNodes.count : MAX_RF;

			if (!has(p->ReplicaNodes.items, nr, (int32_t)id))
				continue;
			known = 1;
			if (nr > nb - self_listed) {
				free(bs);
				free(moves);
				return ctl_fail(c, "broker %lld cannot be decommissioned: %s-%d has %d replicas and only %d "
						"other brokers are live: add a broker or lower the replication factor first",
						(long long)id, kstr(t->Name), p->PartitionIndex, nr, nb - self_listed);
			}
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				moves = realloc(moves, (size_t)cap * sizeof *moves);
				if (!moves)
					return ctl_fail(c, "out of memory");
			}
			m = &moves[n++];
			memset(m, 0, sizeof *m);
			m->topic = strdup(kstr(t->Name));
			m->partition = p->PartitionIndex;
			m->nbefore = m->ntarget = nr;
			memcpy(m->before, p->ReplicaNodes.items, (size_t)nr * sizeof(int32_t));
			memcpy(m->target, p->ReplicaNodes.items, (size_t)nr * sizeof(int32_t));
			for (int k = 0; k < nr; k++) {
				struct brk *r;

				if (m->target[k] != (int32_t)id)
					continue;
				r = replacement(bs, nb, (int32_t)id, m->target, nr);
				if (!r) {
					free(bs);
					return ctl_fail(c, "no broker left to take %s-%d's replica", m->topic, m->partition);
				}
				m->target[k] = r->id;
				r->load++;
			}
		}
	}
	free(bs);
	if (!known) {
		free(moves);
		return ctl_fail(c, "broker %lld is not in the cluster's metadata (not registered, or fenced)",
				(long long)id);
	}
	if (!c->json)
		fprintf(stderr, "sluicectl: moving %d partition replicas off broker %lld\n", n, (long long)id);
	rc = run_moves(c, a, "decommission", (int32_t)id, moves, n, throttle);
	for (int i = 0; i < n; i++)
		free((char *)moves[i].topic);
	free(moves);
	return rc;
}

static const struct opt_spec reassign_opts[] = {
	{ "topic", 't', "TOPIC", "the partition's topic" },
	{ "partition", 'p', "N", "the partition" },
	{ "replicas", 'r', "IDS", "the target replicas, the preferred leader first (2,3)" },
	{ "cancel", 0, NULL, "cancel the partition's reassignment in progress (its replicas as before)" },
	{ "throttle", 0, "BYTES_PER_S", "replication throttle while the new replicas catch up (removed once done)" },
	{ "unthrottle", 0, NULL, "remove the replication throttle (after --no-wait)" },
	{ "no-wait", 0, NULL, "start the reassignment and return" },
	{ "max-wait", 0, "SECONDS", "give up waiting after this long (default 3600; exit 1)" },
	{ NULL, 0, NULL, NULL },
};

static const struct opt_spec list_opts[] = {
	{ NULL, 0, NULL, NULL },
};

static const struct opt_spec decommission_opts[] = {
	{ "throttle", 0, "BYTES_PER_S", "replication throttle while the new replicas catch up (removed once done)" },
	{ "no-wait", 0, NULL, "start the reassignments and return" },
	{ "max-wait", 0, "SECONDS", "give up waiting after this long (default 3600; exit 1)" },
	{ NULL, 0, NULL, NULL },
};

const struct cmd reassign_cmds[] = {
	{ "partition", "reassign", "", "move a partition's replicas (AlterPartitionReassignments), wait until done",
	  reassign_opts,
	  "sluicectl partition reassign --topic orders --partition 0 --replicas 2,3\n"
	  "sluicectl partition reassign --topic orders --partition 0 --replicas 2,3 --throttle 10000000\n"
	  "sluicectl partition reassign --topic orders --partition 0 --cancel",
	  cmd_partition_reassign },
	{ "partition", "reassignments", "", "the reassignments in progress (ListPartitionReassignments)", list_opts,
	  "sluicectl partition reassignments --format json", cmd_partition_reassignments },
	{ "broker", "decommission", "ID", "move every replica off a broker, wait until done", decommission_opts,
	  "sluicectl broker decommission 3\nsluicectl broker decommission 3 --throttle 50000000 --format json",
	  cmd_broker_decommission },
};

const int reassign_ncmds = sizeof reassign_cmds / sizeof reassign_cmds[0];
