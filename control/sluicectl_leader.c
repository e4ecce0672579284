/* control/sluicectl_leader.c — `sluicectl leader elect`: ElectLeaders
 * (ApiKey 43) for one partition, one topic's partitions, or every
 * partition; preferred (the first replica leads again, when it is live and
 * in sync) or, with --unclean, a live replica for partitions without a
 * live leader. A partition whose election was not needed is not an error.
 * Exit 0 when every partition was elected or needed none, 1 when one
 * could not be (named, with what to do), 2 for bad usage.
 * @thread main */
#include <stdlib.h>
#include <string.h>

#include "control/sluicectl.h"

#define ELECT_TYPE_PREFERRED 0
#define ELECT_TYPE_UNCLEAN 1

static int cmd_leader_elect(struct ctl *c, const struct args *a)
{
	const char *topic = opt_get(a, "topic"), *part = opt_get(a, "partition");
	int unclean = opt_has(a, "unclean"), rc = 0, elected = 0;
	struct kafka_elect_leaders_request req;
	struct kafka_elect_leaders_request_topic_partitions tp;
	struct kafka_elect_leaders_response *resp;
	int32_t *ids = NULL, one;
	int16_t ver;
	struct kclient *k;
	struct table t;
	static const char *heads[] = { "TOPIC", "PARTITION", "RESULT" };

	if (a->npos)
		return ctl_usage(c, "unexpected argument '%s'", a->pos[0]);
	if (part && !topic)
		return ctl_usage(c, "--partition needs --topic");
	kafka_elect_leaders_request_init(&req);
	req.ElectionType = unclean ? ELECT_TYPE_UNCLEAN : ELECT_TYPE_PREFERRED;
	req.TimeoutMs = c->timeout_ms;
	req.TopicPartitions.count = -1;   /* every partition */
	if (topic) {
		memset(&tp, 0, sizeof(tp));
		tp.Topic = (struct kafka_str){ topic, (int32_t)strlen(topic) };
		if (part) {
			int64_t v;

			if (!parse_i64(part, 0, INT32_MAX, &v))
				return ctl_usage(c, "--partition wants a partition number, not '%s'", part);
			one = (int32_t)v;
			tp.Partitions.items = &one;
			tp.Partitions.count = 1;
		} else {
			const char *names[1] = { topic };
			struct kafka_metadata_response *md = ctl_metadata(c, names, 1);
			const struct kafka_metadata_response_metadata_response_topic *mt =
				md->Topics.count == 1 ? &md->Topics.items[0] : NULL;

			if (!mt || mt->ErrorCode)
				return ctl_kafka_error(c, mt ? mt->ErrorCode : KERR_UNKNOWN_TOPIC_OR_PARTITION,
						       (struct kafka_str){ NULL, -1 }, "topic '%s'", topic);
			ids = calloc((size_t)mt->Partitions.count + 1, sizeof(*ids));
			if (!ids)
				return ctl_fail(c, "out of memory");
			for (int32_t i = 0; i < mt->Partitions.count; i++)
				ids[i] = mt->Partitions.items[i].PartitionIndex;
			tp.Partitions.items = ids;
			tp.Partitions.count = mt->Partitions.count;
		}
		req.TopicPartitions.items = &tp;
		req.TopicPartitions.count = 1;
	}
	/* to the node bootstrapped: one that is not the active controller
	 * forwards it there (as Kafka's brokers do) */
	k = ctl_client(c);
	ver = ctl_version(c, k, KAFKA_ELECT_LEADERS_KEY, 2);
	if (unclean && ver < 1) {
		free(ids);
		return ctl_fail(c, "the broker serves ElectLeaders v0 only: no unclean elections");
	}
	resp = ctl_call(c, k, KAFKA_ELECT_LEADERS_KEY, ver, &req);
	free(ids);
	if (resp->ErrorCode) {
		return ctl_kafka_error(c, resp->ErrorCode, (struct kafka_str){ NULL, -1 }, "electing leaders");
	}
	if (c->json) {
		json_obj_begin(NULL);
		json_str("election", unclean ? "unclean" : "preferred");
		json_arr_begin("partitions");
	} else {
		table_init(&t, 3, heads);
		table_right(&t, 1);
	}
	for (int32_t i = 0; i < resp->ReplicaElectionResults.count; i++) {
		const struct kafka_elect_leaders_response_replica_election_result *r =
			&resp->ReplicaElectionResults.items[i];

		for (int32_t j = 0; j < r->PartitionResult.count; j++) {
			const struct kafka_elect_leaders_response_partition_result *p = &r->PartitionResult.items[j];
			int ok = p->ErrorCode == 0 || p->ErrorCode == KERR_ELECTION_NOT_NEEDED;

			elected += p->ErrorCode == 0;
			if (!ok)
				rc = ctl_kafka_error(c, p->ErrorCode, p->ErrorMessage, "electing a leader for %s-%d",
						     kstr(r->Topic), p->PartitionId);
			if (c->json) {
				json_obj_begin(NULL);
				json_strn("topic", r->Topic.ptr, r->Topic.len);
				json_int("partition", p->PartitionId);
				json_str("error", p->ErrorCode ? kerr_name(p->ErrorCode) : NULL);
				json_int("error_code", p->ErrorCode);
				json_strn("message", p->ErrorMessage.ptr, p->ErrorMessage.len);
				json_obj_end();
			} else {
				table_add(&t, kstr(r->Topic), fmt("%d", p->PartitionId),
					  p->ErrorCode == 0 ? "elected"
					  : p->ErrorCode == KERR_ELECTION_NOT_NEEDED ? "not needed" : kerr_name(p->ErrorCode));
			}
		}
	}
	if (c->json) {
		json_arr_end();
		json_int("elected", elected);
		json_obj_end();
		json_end();
	} else {
		table_sort(&t);
		table_print(&t);
		table_fini(&t);
		printf("%d elected\n", elected);
	}
	return rc;
}

static const struct opt_spec elect_opts[] = {
	{ "topic", 't', "TOPIC", "only this topic's partitions (default: every partition)" },
	{ "partition", 'p', "N", "only this partition of --topic" },
	{ "unclean", 0, NULL, "elect a live replica, even out of sync, for partitions without a live leader "
	  "(records the ISR had may be lost)" },
	{ NULL, 0, NULL, NULL },
};

const struct cmd leader_cmds[] = {
	{ "leader", "elect", "", "move leadership back to preferred replicas, or elect unclean leaders (ElectLeaders)",
	  elect_opts,
	  "sluicectl leader elect\nsluicectl leader elect --topic orders --partition 3\n"
	  "sluicectl leader elect --topic orders --unclean --format json",
	  cmd_leader_elect },
};

const int leader_ncmds = sizeof leader_cmds / sizeof leader_cmds[0];
