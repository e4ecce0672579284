/* control/sluicectl_group.c — the group commands: list, describe (members,
 * committed offsets, lag, oldest unconsumed age), reset-offsets, delete,
 * delete-offsets. See sluicectl.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/sluicectl.h"

static const struct kafka_str null_str = { NULL, -1 };

/* Partitions per OffsetCommit when resetting (progress between requests). */
#define COMMIT_CHUNK 1000

static struct kafka_str wstr(const char *s)
{
	return (struct kafka_str){ s, (int32_t)strlen(s) };
}

/* The group's coordinator, or exit 1 naming the error. */
static struct kclient *coordinator(struct ctl *c, const char *group, int32_t *node)
{
	struct kclient *k = ctl_client(c);
	struct kafka_find_coordinator_request req;
	struct kafka_find_coordinator_response *resp;

	kafka_find_coordinator_request_init(&req);
	req.Key = wstr(group);
	req.KeyType = 0;
	resp = ctl_call(c, k, KAFKA_FIND_COORDINATOR_KEY, ctl_version(c, k, KAFKA_FIND_COORDINATOR_KEY, 2), &req);
	if (resp->ErrorCode) {
		ctl_kafka_error(c, resp->ErrorCode, resp->ErrorMessage, "finding the coordinator of group '%s'",
				group);
		exit(EXIT_KAFKA);
	}
	if (node)
		*node = resp->NodeId;
	return ctl_node(c, resp->NodeId, resp->Host, resp->Port);
}

static struct kafka_describe_groups_response_described_group *
describe_group(struct ctl *c, struct kclient *k, const char *group)
{
	struct kafka_describe_groups_request req;
	struct kafka_describe_groups_response *resp;
	struct kafka_str g = wstr(group);

	kafka_describe_groups_request_init(&req);
	req.Groups.items = &g;
	req.Groups.count = 1;
	resp = ctl_call(c, k, KAFKA_DESCRIBE_GROUPS_KEY, ctl_version(c, k, KAFKA_DESCRIBE_GROUPS_KEY, 4), &req);
	if (resp->Groups.count != 1) {
		ctl_fail(c, "the broker described %d groups for one asked", resp->Groups.count);
		exit(EXIT_KAFKA);
	}
	if (resp->Groups.items[0].ErrorCode) {
		ctl_kafka_error(c, resp->Groups.items[0].ErrorCode, null_str, "group '%s'", group);
		exit(EXIT_KAFKA);
	}
	return &resp->Groups.items[0];
}

/* Committed offsets of the group (topics NULL: every topic). */
static struct kafka_offset_fetch_response *offset_fetch(struct ctl *c, struct kclient *k, const char *group)
{
	struct kafka_offset_fetch_request req;
	struct kafka_offset_fetch_response *resp;
	int16_t v = ctl_version(c, k, KAFKA_OFFSET_FETCH_KEY, 5);

	if (v < 2) {
		ctl_fail(c, "the broker's OffsetFetch is older than v2 (cannot list a group's topics)");
		exit(EXIT_KAFKA);
	}
	kafka_offset_fetch_request_init(&req);
	req.GroupId = wstr(group);
	req.Topics.count = -1;
	resp = ctl_call(c, k, KAFKA_OFFSET_FETCH_KEY, v, &req);
	if (resp->ErrorCode) {
		ctl_kafka_error(c, resp->ErrorCode, null_str, "committed offsets of group '%s'", group);
		exit(EXIT_KAFKA);
	}
	return resp;
}

/* Decode a consumer-protocol assignment into "topic:p,p topic:p". */
static const char *assignment_str(struct kafka_bytes b, struct kafka_consumer_protocol_assignment *out,
				  void **mem)
{
	struct kafka_cursor cur;
	struct kafka_arena ar;
	int16_t ver;
	char buf[400];
	size_t l = 0;

	kafka_consumer_protocol_assignment_init(out);
	out->AssignedPartitions.count = 0;
	if (b.len < 2)
		return "";
	*mem = malloc(kafka_arena_bound((size_t)b.len));
	kafka_arena_init(&ar, *mem, kafka_arena_bound((size_t)b.len));
	kafka_cursor_init(&cur, b.ptr, (size_t)b.len);
	ver = kafka_cursor_int16(&cur);
	if (ver > 3)
		ver = 3;   /* later versions add fields after these */
	if (ver < 0 || kafka_consumer_protocol_assignment_decode(&cur, &ar, ver, out)) {
		out->AssignedPartitions.count = 0;
		return "(not a consumer assignment)";
	}
	buf[0] = 0;
	for (int32_t i = 0; i < out->AssignedPartitions.count && l < sizeof buf - 40; i++) {
		const struct kafka_consumer_protocol_assignment_topic_partition *tp = &out->AssignedPartitions.items[i];

		l += (size_t)snprintf(buf + l, sizeof buf - l, "%s%.*s:", i ? " " : "", (int)tp->Topic.len,
				      tp->Topic.ptr);
		for (int32_t j = 0; j < tp->Partitions.count && l < sizeof buf - 16; j++)
			l += (size_t)snprintf(buf + l, sizeof buf - l, "%s%d", j ? "," : "", tp->Partitions.items[j]);
	}
	return fmt("%s", buf);
}

int group_names(struct ctl *c)
{
	struct kclient *k = ctl_client(c);
	struct kafka_list_groups_request req;
	struct kafka_list_groups_response *resp;

	kafka_list_groups_request_init(&req);
	resp = ctl_call(c, k, KAFKA_LIST_GROUPS_KEY, ctl_version(c, k, KAFKA_LIST_GROUPS_KEY, 2), &req);
	for (int32_t i = 0; i < resp->Groups.count; i++)
		printf("%s\n", kstr(resp->Groups.items[i].GroupId));
	return 0;
}

/* ---- group list -------------------------------------------------------------- */

static int cmd_group_list(struct ctl *c, const struct args *a)
{
	struct kafka_metadata_response *md = ctl_metadata(c, NULL, 0);
	struct table t;
	static const char *heads[] = { "GROUP", "STATE", "PROTOCOL-TYPE", "MEMBERS", "COORDINATOR" };
	int rc = 0;

	(void)a;
	table_init(&t, 5, heads);
	table_right(&t, 3);
	table_right(&t, 4);
	if (c->json) {
		json_obj_begin(NULL);
		json_arr_begin("groups");
	}
	/* Every broker lists the groups it coordinates. */
	for (int32_t b = 0; b < md->Brokers.count; b++) {
		const struct kafka_metadata_response_metadata_response_broker *br = &md->Brokers.items[b];
		struct kclient *k = ctl_node(c, br->NodeId, br->Host, br->Port);
		struct kafka_list_groups_request req;
		struct kafka_list_groups_response *resp;
		struct kafka_describe_groups_request dreq;
		struct kafka_describe_groups_response *dresp;

		kafka_list_groups_request_init(&req);
		resp = ctl_call(c, k, KAFKA_LIST_GROUPS_KEY, ctl_version(c, k, KAFKA_LIST_GROUPS_KEY, 2), &req);
		if (resp->ErrorCode) {
			rc = ctl_kafka_error(c, resp->ErrorCode, null_str, "listing the groups of broker %d",
					     br->NodeId);
			continue;
		}
		if (!resp->Groups.count)
			continue;
		kafka_describe_groups_request_init(&dreq);
		dreq.Groups.items = calloc((size_t)resp->Groups.count, sizeof *dreq.Groups.items);
		dreq.Groups.count = resp->Groups.count;
		for (int32_t i = 0; i < resp->Groups.count; i++)
			dreq.Groups.items[i] = resp->Groups.items[i].GroupId;
		dresp = ctl_call(c, k, KAFKA_DESCRIBE_GROUPS_KEY, ctl_version(c, k, KAFKA_DESCRIBE_GROUPS_KEY, 4), &dreq);
		free(dreq.Groups.items);
		for (int32_t i = 0; i < dresp->Groups.count; i++) {
			const struct kafka_describe_groups_response_described_group *g = &dresp->Groups.items[i];

			if (c->json) {
				json_obj_begin(NULL);
				json_strn("group_id", g->GroupId.ptr, g->GroupId.len);
				json_strn("state", g->GroupState.ptr, g->GroupState.len);
				json_strn("protocol_type", g->ProtocolType.ptr, g->ProtocolType.len);
				json_int("members", g->Members.count);
				json_int("coordinator", br->NodeId);
				json_obj_end();
			} else {
				table_add(&t, kstr(g->GroupId), kstr(g->GroupState),
					  g->ProtocolType.len > 0 ? kstr(g->ProtocolType) : "-",
					  fmt("%d", g->Members.count), fmt("%d", br->NodeId));
			}
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
	return rc;
}

/* ---- group describe ---------------------------------------------------------- */

struct first_ts {
	int64_t ts;
};

static int first_ts_cb(void *arg, const struct fetched *r)
{
	((struct first_ts *)arg)->ts = r->timestamp;
	return 1;
}

static const struct kafka_metadata_response_metadata_response_topic *
find_topic(const struct kafka_metadata_response *md, struct kafka_str name)
{
	for (int32_t i = 0; i < md->Topics.count; i++)
		if (md->Topics.items[i].ErrorCode == 0 && md->Topics.items[i].Name.len == name.len &&
		    !memcmp(md->Topics.items[i].Name.ptr, name.ptr, (size_t)name.len))
			return &md->Topics.items[i];
	return NULL;
}

static int32_t part_index(const struct kafka_metadata_response_metadata_response_topic *t, int32_t p)
{
	for (int32_t i = 0; i < t->Partitions.count; i++)
		if (t->Partitions.items[i].PartitionIndex == p)
			return i;
	return -1;
}

static int cmp_offpart(const void *a, const void *b)
{
	const struct kafka_offset_fetch_response_offset_fetch_response_partition *x = a, *y = b;

	return x->PartitionIndex - y->PartitionIndex;
}

static int64_t committed_of(const struct kafka_offset_fetch_response *of, const char *topic, int32_t p);

static int cmd_group_describe(struct ctl *c, const struct args *a)
{
	const char *group;
	struct kclient *k;
	struct kafka_describe_groups_response_described_group *g;
	struct kafka_offset_fetch_response *of;
	struct kafka_consumer_protocol_assignment *asg;
	void **asg_mem;
	int32_t coord;
	int64_t now = now_ms();

	if (a->npos != 1)
		return ctl_usage(c, "name exactly one group");
	group = a->pos[0];
	k = coordinator(c, group, &coord);
	g = describe_group(c, k, group);
	of = offset_fetch(c, k, group);
	if (kafka_str_eq(g->GroupState, "Dead") && of->Topics.count <= 0)
		return ctl_kafka_error(c, KERR_GROUP_ID_NOT_FOUND, null_str, "group '%s'", group);

	asg = calloc((size_t)g->Members.count + 1, sizeof *asg);
	asg_mem = calloc((size_t)g->Members.count + 1, sizeof *asg_mem);
	if (c->json) {
		json_obj_begin(NULL);
		json_str("group_id", group);
		json_strn("state", g->GroupState.ptr, g->GroupState.len);
		json_strn("protocol_type", g->ProtocolType.ptr, g->ProtocolType.len);
		json_strn("protocol", g->ProtocolData.ptr, g->ProtocolData.len);
		json_int("coordinator", coord);
		json_arr_begin("members");
	} else {
		printf("group %s: state %s, protocol %s/%s, %d member(s), coordinator %d\n", group,
		       kstr(g->GroupState), g->ProtocolType.len > 0 ? kstr(g->ProtocolType) : "-",
		       g->ProtocolData.len > 0 ? kstr(g->ProtocolData) : "-", g->Members.count, coord);
	}
	struct table mt;
	static const char *mheads[] = { "MEMBER", "CLIENT-ID", "HOST", "ASSIGNMENT" };

	table_init(&mt, 4, mheads);
	for (int32_t i = 0; i < g->Members.count; i++) {
		const struct kafka_describe_groups_response_described_group_member *m = &g->Members.items[i];
		const char *as = kafka_str_eq(g->ProtocolType, "consumer")
			? assignment_str(m->MemberAssignment, &asg[i], &asg_mem[i]) : "";

		if (c->json) {
			json_obj_begin(NULL);
			json_strn("member_id", m->MemberId.ptr, m->MemberId.len);
			json_strn("group_instance_id", m->GroupInstanceId.ptr, m->GroupInstanceId.len);
			json_strn("client_id", m->ClientId.ptr, m->ClientId.len);
			json_strn("client_host", m->ClientHost.ptr, m->ClientHost.len);
			json_arr_begin("assignment");
			for (int32_t j = 0; j < asg[i].AssignedPartitions.count; j++) {
				json_obj_begin(NULL);
				json_strn("topic", asg[i].AssignedPartitions.items[j].Topic.ptr,
					  asg[i].AssignedPartitions.items[j].Topic.len);
				json_arr_begin("partitions");
				for (int32_t q = 0; q < asg[i].AssignedPartitions.items[j].Partitions.count; q++)
					json_int(NULL, asg[i].AssignedPartitions.items[j].Partitions.items[q]);
				json_arr_end();
				json_obj_end();
			}
			json_arr_end();
			json_obj_end();
		} else {
			table_add(&mt, kstr(m->MemberId), kstr(m->ClientId), kstr(m->ClientHost), as);
		}
	}
	if (c->json) {
		json_arr_end();
		json_arr_begin("offsets");
	} else if (g->Members.count) {
		putchar('\n');
		table_print(&mt);
	}
	table_fini(&mt);

	/* Committed offsets, high watermarks, lag, oldest unconsumed age. */
	struct table ot;
	static const char *oheads[] = { "TOPIC", "PARTITION", "COMMITTED", "HIGH-WATERMARK", "LAG",
					"OLDEST-AGE", "OWNER" };
	int rows = 0;

	table_init(&ot, 7, oheads);
	for (int col = 1; col <= 5; col++)
		table_right(&ot, col);
	for (int32_t i = 0; i < of->Topics.count; i++) {
		const struct kafka_offset_fetch_response_offset_fetch_response_topic *ft = &of->Topics.items[i];
		const char *tn = fmt("%.*s", (int)ft->Name.len, ft->Name.ptr);
		char name[256];
		struct kafka_metadata_response *md;
		const struct kafka_metadata_response_metadata_response_topic *t;
		const char *names[1] = { name };
		int64_t *hw = NULL;
		int16_t err = 0;

		snprintf(name, sizeof name, "%s", tn);
		md = ctl_metadata(c, names, 1);
		t = find_topic(md, wstr(name));
		if (t) {
			hw = calloc((size_t)t->Partitions.count + 1, sizeof *hw);
			ctl_list_offsets(c, t, -1, hw, &err);
		}
		qsort(ft->Partitions.items, (size_t)ft->Partitions.count, sizeof ft->Partitions.items[0],
		      cmp_offpart);
		for (int32_t j = 0; j < ft->Partitions.count; j++) {
			const struct kafka_offset_fetch_response_offset_fetch_response_partition *fp = &ft->Partitions.items[j];
			int32_t pi = t ? part_index(t, fp->PartitionIndex) : -1;
			int64_t h = pi >= 0 ? hw[pi] : -1;
			int64_t lag = h >= 0 && fp->CommittedOffset >= 0 ? h - fp->CommittedOffset : -1;
			int64_t age = -1;
			const char *owner = "-";

			if (fp->CommittedOffset < 0 && !fp->ErrorCode)
				continue;   /* nothing committed */
			if (lag > 0) {
				struct first_ts ft0 = { -1 };
				int64_t off = fp->CommittedOffset;
				int16_t kerr = 0;

				ctl_fetch_range(c, t, fp->PartitionIndex, &off, h, first_ts_cb, &ft0, &kerr);
				if (ft0.ts >= 0)
					age = now - ft0.ts > 0 ? now - ft0.ts : 0;
			}
			for (int32_t m = 0; m < g->Members.count; m++)
				for (int32_t x = 0; x < asg[m].AssignedPartitions.count; x++) {
					const struct kafka_consumer_protocol_assignment_topic_partition *tp =
						&asg[m].AssignedPartitions.items[x];

					if (!kafka_str_eq(tp->Topic, name))
						continue;
					for (int32_t q = 0; q < tp->Partitions.count; q++)
						if (tp->Partitions.items[q] == fp->PartitionIndex)
							owner = kstr(g->Members.items[m].ClientId);
				}
			rows++;
			if (c->json) {
				json_obj_begin(NULL);
				json_str("topic", name);
				json_int("partition", fp->PartitionIndex);
				json_int("committed_offset", fp->CommittedOffset);
				json_int_or_null("high_watermark", h);
				json_int_or_null("lag", lag);
				json_int_or_null("oldest_unconsumed_age_ms", age);
				if (strcmp(owner, "-"))
					json_str("owner", owner);
				else
					json_null("owner");
				json_strn("metadata", fp->Metadata.ptr, fp->Metadata.len);
				if (fp->ErrorCode)
					json_str("error", kerr_name(fp->ErrorCode));
				else
					json_null("error");
				json_obj_end();
			} else {
				table_add(&ot, name, fmt("%d", fp->PartitionIndex),
					  fmt("%lld", (long long)fp->CommittedOffset),
					  h >= 0 ? fmt("%lld", (long long)h) : "?",
					  lag >= 0 ? fmt("%lld", (long long)lag) : "?",
					  age >= 0 ? fmt("%.1fs", (double)age / 1000) : "-", owner);
			}
		}
		free(hw);
	}
	/* Assigned partitions without a commit: their owner, no offset yet. */
	for (int32_t m = 0; m < g->Members.count; m++)
		for (int32_t x = 0; x < asg[m].AssignedPartitions.count; x++) {
			const struct kafka_consumer_protocol_assignment_topic_partition *tp =
				&asg[m].AssignedPartitions.items[x];
			char name[256];
			const char *names[1] = { name };
			struct kafka_metadata_response *md;
			const struct kafka_metadata_response_metadata_response_topic *t;
			int64_t *hw = NULL;
			int16_t err = 0;

			snprintf(name, sizeof name, "%.*s", (int)tp->Topic.len, tp->Topic.ptr);
			md = ctl_metadata(c, names, 1);
			t = find_topic(md, wstr(name));
			if (t) {
				hw = calloc((size_t)t->Partitions.count + 1, sizeof *hw);
				ctl_list_offsets(c, t, -1, hw, &err);
			}
			for (int32_t q = 0; q < tp->Partitions.count; q++) {
				int32_t p = tp->Partitions.items[q];
				int32_t pi = t ? part_index(t, p) : -1;
				int64_t h = pi >= 0 ? hw[pi] : -1;
				const char *owner = kstr(g->Members.items[m].ClientId);

				if (committed_of(of, name, p) >= 0)
					continue;
				rows++;
				if (c->json) {
					json_obj_begin(NULL);
					json_str("topic", name);
					json_int("partition", p);
					json_null("committed_offset");
					json_int_or_null("high_watermark", h);
					json_null("lag");
					json_null("oldest_unconsumed_age_ms");
					json_str("owner", owner);
					json_null("metadata");
					json_null("error");
					json_obj_end();
				} else {
					table_add(&ot, name, fmt("%d", p), "-", h >= 0 ? fmt("%lld", (long long)h) : "?",
						  "-", "-", owner);
				}
			}
			free(hw);
		}
	if (c->json) {
		json_arr_end();
		json_obj_end();
		json_end();
	} else if (rows) {
		putchar('\n');
		table_sort(&ot);
		table_print(&ot);
	} else {
		printf("\nno committed offsets\n");
	}
	table_fini(&ot);
	for (int32_t i = 0; i < g->Members.count; i++)
		free(asg_mem[i]);
	free(asg);
	free(asg_mem);
	return 0;
}

/* ---- reset-offsets ---------------------------------------------------------------- */

struct tp_sel {
	char topic[256];
	int32_t parts[256];
	int nparts;     /* 0: every partition */
};

/* "topic" or "topic:0,1,2". */
static bool parse_tp(const char *s, struct tp_sel *o)
{
	const char *colon = strrchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);

	if (!n || n >= sizeof o->topic)
		return false;
	memcpy(o->topic, s, n);
	o->topic[n] = 0;
	o->nparts = 0;
	if (!colon)
		return true;
	for (const char *p = colon + 1; *p;) {
		char num[16];
		size_t l = strcspn(p, ",");
		int64_t v;

		if (!l || l >= sizeof num || o->nparts == 256)
			return false;
		memcpy(num, p, l);
		num[l] = 0;
		if (!parse_i64(num, 0, INT32_MAX, &v))
			return false;
		o->parts[o->nparts++] = (int32_t)v;
		p += l + (p[l] == ',');
	}
	return o->nparts > 0;
}

static bool sel_has(const struct tp_sel *s, int32_t p)
{
	if (!s->nparts)
		return true;
	for (int i = 0; i < s->nparts; i++)
		if (s->parts[i] == p)
			return true;
	return false;
}

static int64_t committed_of(const struct kafka_offset_fetch_response *of, const char *topic, int32_t p)
{
	for (int32_t i = 0; i < of->Topics.count; i++) {
		if (!kafka_str_eq(of->Topics.items[i].Name, topic))
			continue;
		for (int32_t j = 0; j < of->Topics.items[i].Partitions.count; j++)
			if (of->Topics.items[i].Partitions.items[j].PartitionIndex == p)
				return of->Topics.items[i].Partitions.items[j].CommittedOffset;
	}
	return -1;
}

static int cmd_group_reset_offsets(struct ctl *c, const struct args *a)
{
	const char *group, *tps[64], *mode = NULL;
	struct tp_sel *sel;
	struct kclient *k;
	struct kafka_describe_groups_response_described_group *g;
	struct kafka_offset_fetch_response *of;
	int nsel, modes = 0, rc = 0;
	int64_t arg = 0;
	bool execute = opt_has(a, "execute");
	static const char *mode_names[] = { "to-earliest", "to-latest", "to-offset", "to-datetime", "shift-by" };

	if (a->npos != 1)
		return ctl_usage(c, "name exactly one group");
	group = a->pos[0];
	for (int i = 0; i < 5; i++)
		if (opt_has(a, mode_names[i])) {
			mode = mode_names[i];
			modes++;
		}
	if (modes != 1)
		return ctl_usage(c, "give exactly one of --to-earliest, --to-latest, --to-offset N, "
				 "--to-datetime TIME, --shift-by N");
	if (!strcmp(mode, "to-offset") && !parse_i64(opt_get(a, mode), 0, INT64_MAX, &arg))
		return ctl_usage(c, "--to-offset wants an offset >= 0");
	if (!strcmp(mode, "shift-by") && !parse_i64(opt_get(a, mode), INT64_MIN / 2, INT64_MAX / 2, &arg))
		return ctl_usage(c, "--shift-by wants an integer (negative moves back)");
	if (!strcmp(mode, "to-datetime") && !parse_time_ms(opt_get(a, mode), &arg))
		return ctl_usage(c, "--to-datetime wants YYYY-MM-DDTHH:MM:SS[Z] (UTC) or ms since the epoch");
	nsel = opt_all(a, "topic", tps, 64);
	if (!nsel && !opt_has(a, "all-topics"))
		return ctl_usage(c, "give --topic TOPIC[:P,P...] (repeatable) or --all-topics");

	k = coordinator(c, group, NULL);
	g = describe_group(c, k, group);
	if (g->Members.count > 0) {
		wrap(stderr, 0, 4, fmt("sluicectl: %s: group '%s' has %d active member(s) (state %s): offsets "
				       "can only be reset while the group is empty", c->cmd, group,
				       g->Members.count, kstr(g->GroupState)));
		fprintf(stderr, "  what to do: ");
		wrap(stderr, 14, 4, fmt("stop its consumers (`sluicectl group describe %s` lists them), wait "
					"for their session timeout if one was killed, then run this again", group));
		return EXIT_KAFKA;
	}
	of = offset_fetch(c, k, group);
	if (!nsel) {
		for (int32_t i = 0; i < of->Topics.count && nsel < 64; i++)
			tps[nsel++] = fmt("%.*s", (int)of->Topics.items[i].Name.len, of->Topics.items[i].Name.ptr);
		if (!nsel)
			return ctl_fail(c, "group '%s' has no committed offsets; name the topics with --topic",
					group);
	}
	sel = calloc((size_t)nsel, sizeof *sel);
	for (int i = 0; i < nsel; i++)
		if (!parse_tp(tps[i], &sel[i]))
			return ctl_usage(c, "--topic wants TOPIC or TOPIC:P,P..., not '%s'", tps[i]);

	struct table t;
	static const char *heads[] = { "TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET" };

	table_init(&t, 4, heads);
	for (int col = 1; col < 4; col++)
		table_right(&t, col);
	if (c->json) {
		json_obj_begin(NULL);
		json_str("group_id", group);
		json_bool("executed", execute);
		json_arr_begin("offsets");
	}
	for (int i = 0; i < nsel && !rc; i++) {
		const char *names[1] = { sel[i].topic };
		struct kafka_metadata_response *md = ctl_metadata(c, names, 1);
		const struct kafka_metadata_response_metadata_response_topic *tp = find_topic(md, wstr(sel[i].topic));
		int32_t n;
		int64_t *lo, *hi, *ts = NULL, *nw;
		int16_t err = 0;
		struct kafka_offset_commit_request_offset_commit_request_partition *cp;
		int32_t ncp = 0;

		if (!tp) {
			rc = ctl_kafka_error(c, KERR_UNKNOWN_TOPIC_OR_PARTITION, null_str, "topic '%s'", sel[i].topic);
			break;
		}
		n = tp->Partitions.count;
		for (int j = 0; j < sel[i].nparts; j++)
			if (part_index(tp, sel[i].parts[j]) < 0)
				return ctl_kafka_error(c, KERR_UNKNOWN_TOPIC_OR_PARTITION, null_str, "partition %s-%d", sel[i].topic, sel[i].parts[j]);
		lo = calloc((size_t)n + 1, sizeof *lo);
		hi = calloc((size_t)n + 1, sizeof *hi);
		nw = calloc((size_t)n + 1, sizeof *nw);
		cp = calloc((size_t)n + 1, sizeof *cp);
		if (ctl_list_offsets(c, tp, -2, lo, &err) || ctl_list_offsets(c, tp, -1, hi, &err)) {
			rc = ctl_kafka_error(c, err, null_str, "offsets of topic '%s'", sel[i].topic);
			break;
		}
		if (!strcmp(mode, "to-datetime")) {
			ts = calloc((size_t)n + 1, sizeof *ts);
			ctl_list_offsets(c, tp, arg, ts, &err);
		}
		for (int32_t j = 0; j < n; j++) {
			int32_t p = tp->Partitions.items[j].PartitionIndex;
			int64_t old = committed_of(of, sel[i].topic, p), v;

			if (!sel_has(&sel[i], p))
				continue;
			if (!strcmp(mode, "to-earliest"))
				v = lo[j];
			else if (!strcmp(mode, "to-latest"))
				v = hi[j];
			else if (!strcmp(mode, "to-offset"))
				v = arg;
			else if (!strcmp(mode, "to-datetime"))
				v = ts[j] >= 0 ? ts[j] : hi[j];   /* nothing at or after it: the end */
			else
				v = (old >= 0 ? old : lo[j]) + arg;
			if (v < lo[j])
				v = lo[j];
			if (v > hi[j])
				v = hi[j];
			nw[j] = v;
			cp[ncp].PartitionIndex = p;
			cp[ncp].CommittedOffset = v;
			cp[ncp].CommittedLeaderEpoch = -1;
			cp[ncp].CommittedMetadata = wstr("");
			ncp++;
			if (c->json) {
				json_obj_begin(NULL);
				json_str("topic", sel[i].topic);
				json_int("partition", p);
				json_int_or_null("old_offset", old);
				json_int("new_offset", v);
				json_obj_end();
			} else {
				table_add(&t, sel[i].topic, fmt("%d", p), old >= 0 ? fmt("%lld", (long long)old) : "-",
					  fmt("%lld", (long long)v));
			}
		}
		/* Commit in requests of COMMIT_CHUNK partitions, with progress. */
		for (int32_t from = 0; execute && from < ncp && !rc; from += COMMIT_CHUNK) {
			struct kafka_offset_commit_request req;
			struct kafka_offset_commit_request_offset_commit_request_topic rt;
			struct kafka_offset_commit_response *resp;
			struct kclient_mem *mark = k->mem;
			int32_t cnt = ncp - from < COMMIT_CHUNK ? ncp - from : COMMIT_CHUNK;

			kafka_offset_commit_request_init(&req);
			req.GroupId = wstr(group);
			req.GenerationIdOrMemberEpoch = -1;   /* a group without members */
			req.MemberId = wstr("");
			req.GroupInstanceId = null_str;
			req.RetentionTimeMs = -1;
			rt.Name = wstr(sel[i].topic);
			rt.Partitions.items = cp + from;
			rt.Partitions.count = cnt;
			req.Topics.items = &rt;
			req.Topics.count = 1;
			resp = ctl_call(c, k, KAFKA_OFFSET_COMMIT_KEY, ctl_version(c, k, KAFKA_OFFSET_COMMIT_KEY, 7), &req);
			for (int32_t x = 0; x < resp->Topics.count && !rc; x++)
				for (int32_t y = 0; y < resp->Topics.items[x].Partitions.count && !rc; y++)
					if (resp->Topics.items[x].Partitions.items[y].ErrorCode)
						rc = ctl_kafka_error(c, resp->Topics.items[x].Partitions.items[y].ErrorCode,
								     null_str, "committing %s-%d", sel[i].topic,
								     resp->Topics.items[x].Partitions.items[y].PartitionIndex);
			kclient_release_to(k, mark);
			progress(fmt("committing offsets of %s, partitions", sel[i].topic), from + cnt, ncp);
		}
		free(lo);
		free(hi);
		free(nw);
		free(ts);
		free(cp);
	}
	free(sel);
	if (c->json) {
		json_arr_end();
		json_obj_end();
		json_end();
	} else if (!rc) {
		table_print(&t);
		printf(execute ? "offsets of group %s reset\n"
			       : "dry run: nothing changed (--execute applies these offsets to group %s)\n", group);
	}
	table_fini(&t);
	return rc;
}

/* ---- delete, delete-offsets ---------------------------------------------------------- */

static int cmd_group_delete(struct ctl *c, const struct args *a)
{
	int rc = 0;

	if (a->npos < 1)
		return ctl_usage(c, "name at least one group");
	if (c->json) {
		json_obj_begin(NULL);
		json_arr_begin("groups");
	}
	for (int i = 0; i < a->npos; i++) {
		struct kclient *k = coordinator(c, a->pos[i], NULL);
		struct kafka_delete_groups_request req;
		struct kafka_delete_groups_response *resp;
		struct kafka_str name = wstr(a->pos[i]);
		int16_t err = 0;

		kafka_delete_groups_request_init(&req);
		req.GroupsNames.items = &name;
		req.GroupsNames.count = 1;
		resp = ctl_call(c, k, KAFKA_DELETE_GROUPS_KEY, ctl_version(c, k, KAFKA_DELETE_GROUPS_KEY, 1), &req);
		for (int32_t j = 0; j < resp->Results.count; j++)
			err = err ? err : resp->Results.items[j].ErrorCode;
		if (err)
			rc = ctl_kafka_error(c, err, null_str, "deleting group '%s'", a->pos[i]);
		if (c->json) {
			json_obj_begin(NULL);
			json_str("group_id", a->pos[i]);
			json_bool("deleted", !err);
			if (err)
				json_str("error", kerr_name(err));
			else
				json_null("error");
			json_obj_end();
		} else if (!err) {
			printf("deleted group %s\n", a->pos[i]);
		}
	}
	if (c->json) {
		json_arr_end();
		json_obj_end();
		json_end();
	}
	return rc;
}

static int cmd_group_delete_offsets(struct ctl *c, const struct args *a)
{
	const char *tps[64];
	int nsel, rc = 0;
	struct kclient *k;
	struct kafka_offset_delete_request req;
	struct kafka_offset_delete_request_offset_delete_request_topic *rt;
	struct kafka_offset_delete_response *resp;
	struct tp_sel *sel;

	if (a->npos != 1)
		return ctl_usage(c, "name exactly one group");
	nsel = opt_all(a, "topic", tps, 64);
	if (!nsel)
		return ctl_usage(c, "give --topic TOPIC[:P,P...] (repeatable)");
	sel = calloc((size_t)nsel, sizeof *sel);
	rt = calloc((size_t)nsel, sizeof *rt);
	for (int i = 0; i < nsel; i++) {
		if (!parse_tp(tps[i], &sel[i]))
			return ctl_usage(c, "--topic wants TOPIC or TOPIC:P,P..., not '%s'", tps[i]);
		rt[i].Name = wstr(sel[i].topic);
		if (!sel[i].nparts) {   /* every partition of the topic */
			const char *names[1] = { sel[i].topic };
			struct kafka_metadata_response *md = ctl_metadata(c, names, 1);
			const struct kafka_metadata_response_metadata_response_topic *t = find_topic(md, rt[i].Name);

			if (!t)
				return ctl_kafka_error(c, KERR_UNKNOWN_TOPIC_OR_PARTITION, null_str, "topic '%s'", sel[i].topic);
			for (int32_t j = 0; j < t->Partitions.count && sel[i].nparts < 256; j++)
				sel[i].parts[sel[i].nparts++] = t->Partitions.items[j].PartitionIndex;
		}
		rt[i].Partitions.items = calloc((size_t)sel[i].nparts, sizeof *rt[i].Partitions.items);
		rt[i].Partitions.count = sel[i].nparts;
		for (int j = 0; j < sel[i].nparts; j++)
			rt[i].Partitions.items[j].PartitionIndex = sel[i].parts[j];
	}
	k = coordinator(c, a->pos[0], NULL);
	kafka_offset_delete_request_init(&req);
	req.GroupId = wstr(a->pos[0]);
	req.Topics.items = rt;
	req.Topics.count = nsel;
	resp = ctl_call(c, k, KAFKA_OFFSET_DELETE_KEY, ctl_version(c, k, KAFKA_OFFSET_DELETE_KEY, 0), &req);
	if (resp->ErrorCode)
		return ctl_kafka_error(c, resp->ErrorCode, null_str, "deleting offsets of group '%s'", a->pos[0]);
	if (c->json) {
		json_obj_begin(NULL);
		json_str("group_id", a->pos[0]);
		json_arr_begin("partitions");
	}
	for (int32_t i = 0; i < resp->Topics.count; i++)
		for (int32_t j = 0; j < resp->Topics.items[i].Partitions.count; j++) {
			const struct kafka_offset_delete_response_offset_delete_response_partition *p =
				&resp->Topics.items[i].Partitions.items[j];
			const char *tn = kstr(resp->Topics.items[i].Name);

			if (p->ErrorCode)
				rc = ctl_kafka_error(c, p->ErrorCode, null_str, "deleting the offset of %s-%d", tn,
						     p->PartitionIndex);
			if (c->json) {
				json_obj_begin(NULL);
				json_str("topic", tn);
				json_int("partition", p->PartitionIndex);
				json_bool("deleted", !p->ErrorCode);
				if (p->ErrorCode)
					json_str("error", kerr_name(p->ErrorCode));
				else
					json_null("error");
				json_obj_end();
			} else if (!p->ErrorCode) {
				printf("group %s: deleted the offset of %s-%d\n", a->pos[0], tn, p->PartitionIndex);
			}
		}
	if (c->json) {
		json_arr_end();
		json_obj_end();
		json_end();
	}
	for (int i = 0; i < nsel; i++)
		free(rt[i].Partitions.items);
	free(rt);
	free(sel);
	return rc;
}

/* ---- the group commands' table -------------------------------------------------- */

static const struct opt_spec no_opts[] = { { NULL, 0, NULL, NULL } };

static const struct opt_spec reset_opts[] = {
	{ "topic", 't', "TOPIC[:P,P]", "topic (and partitions) to reset (repeatable)" },
	{ "all-topics", 0, NULL, "every topic the group has committed offsets for" },
	{ "to-earliest", 0, NULL, "to the log start" },
	{ "to-latest", 0, NULL, "to the high watermark (skip everything)" },
	{ "to-offset", 0, "N", "to offset N (clamped to the log)" },
	{ "to-datetime", 0, "TIME", "to the first record at or after TIME (YYYY-MM-DDTHH:MM:SSZ, UTC, or epoch ms)" },
	{ "shift-by", 0, "N", "move the committed offset by N (negative: back)" },
	{ "execute", 0, NULL, "apply (without it: a dry run showing old and new offsets)" },
	{ NULL, 0, NULL, NULL }
};

static const struct opt_spec delete_offsets_opts[] = {
	{ "topic", 't', "TOPIC[:P,P]", "topic (and partitions) whose offsets to delete (repeatable)" },
	{ NULL, 0, NULL, NULL }
};

const struct cmd group_cmds[] = {
	{ "group", "list", "", "consumer groups with state and member count", no_opts,
	  "sluicectl group list\nsluicectl group list --format json", cmd_group_list },
	{ "group", "describe", "GROUP", "members, assignment, committed offsets, lag, oldest unconsumed age",
	  no_opts, "sluicectl group describe orders-app\nsluicectl group describe orders-app --format json",
	  cmd_group_describe },
	{ "group", "reset-offsets", "GROUP", "move committed offsets (dry run unless --execute; group must be empty)",
	  reset_opts, "sluicectl group reset-offsets orders-app --topic orders --to-earliest\n"
	  "sluicectl group reset-offsets app --topic orders:0,1 --shift-by -100 --execute\n"
	  "sluicectl group reset-offsets app -t orders --to-datetime 2026-11-29T12:00:00Z",
	  cmd_group_reset_offsets },
	{ "group", "delete", "GROUP...", "delete empty groups and their committed offsets", no_opts,
	  "sluicectl group delete old-app", cmd_group_delete },
	{ "group", "delete-offsets", "GROUP", "delete a group's committed offsets of some topics",
	  delete_offsets_opts, "sluicectl group delete-offsets orders-app --topic retired-topic",
	  cmd_group_delete_offsets },
};
const int group_ncmds = sizeof group_cmds / sizeof group_cmds[0];

/* ---- helpers for record consume --group ------------------------------------------ */

int group_committed(struct ctl *c, const char *group,
		    const struct kafka_metadata_response_metadata_response_topic *t, int64_t *out)
{
	struct kclient *k = coordinator(c, group, NULL);
	struct kafka_offset_fetch_response *of = offset_fetch(c, k, group);
	char name[256];

	snprintf(name, sizeof name, "%s", kstr(t->Name));
	for (int32_t i = 0; i < t->Partitions.count; i++)
		out[i] = committed_of(of, name, t->Partitions.items[i].PartitionIndex);
	return 0;
}

int group_commit(struct ctl *c, const char *group, const char *topic, const int32_t *parts,
		 const int64_t *offsets, int n)
{
	struct kclient *k = coordinator(c, group, NULL);
	struct kafka_offset_commit_request req;
	struct kafka_offset_commit_request_offset_commit_request_topic rt;
	struct kafka_offset_commit_request_offset_commit_request_partition *cp = calloc((size_t)n + 1, sizeof *cp);
	struct kafka_offset_commit_response *resp;
	int rc = 0;

	for (int i = 0; i < n; i++) {
		cp[i].PartitionIndex = parts[i];
		cp[i].CommittedOffset = offsets[i];
		cp[i].CommittedLeaderEpoch = -1;
		cp[i].CommittedMetadata = wstr("");
	}
	kafka_offset_commit_request_init(&req);
	req.GroupId = wstr(group);
	req.GenerationIdOrMemberEpoch = -1;
	req.MemberId = wstr("");
	req.GroupInstanceId = null_str;
	req.RetentionTimeMs = -1;
	rt.Name = wstr(topic);
	rt.Partitions.items = cp;
	rt.Partitions.count = n;
	req.Topics.items = &rt;
	req.Topics.count = 1;
	resp = ctl_call(c, k, KAFKA_OFFSET_COMMIT_KEY, ctl_version(c, k, KAFKA_OFFSET_COMMIT_KEY, 7), &req);
	for (int32_t x = 0; x < resp->Topics.count && !rc; x++)
		for (int32_t y = 0; y < resp->Topics.items[x].Partitions.count && !rc; y++)
			if (resp->Topics.items[x].Partitions.items[y].ErrorCode)
				rc = ctl_kafka_error(c, resp->Topics.items[x].Partitions.items[y].ErrorCode, null_str,
						     "committing the offset of %s-%d for group '%s'", topic,
						     resp->Topics.items[x].Partitions.items[y].PartitionIndex, group);
	free(cp);
	return rc;
}
