/* control/sluicectl_fetch.c — reading a range of a partition's records
 * from its leader with Fetch, batch by batch (compressed ones inflated,
 * transaction markers skipped): the loop record consume, group commands
 * and topic add-partitions' key sampling share. See sluicectl.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "control/record_walk.h"
#include "control/sluicectl.h"
#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/compress.h"

#define FETCH_MAX_BYTES (4 << 20)
#define PART_MAX_BYTES (1 << 20)

static struct kafka_str wstr(const char *s)
{
	return (struct kafka_str){ s, (int32_t)strlen(s) };
}

int ctl_fetch_range(struct ctl *c, const struct kafka_metadata_response_metadata_response_topic *t,
		    int32_t p, int64_t *offset, int64_t end, fetch_cb cb, void *arg, int16_t *kerr)
{
	struct kafka_metadata_response_metadata_response_partition *mp = NULL;
	struct kclient *k;
	char topic[256];
	int idle = 0;
	int16_t v;

	*kerr = 0;
	for (int32_t i = 0; i < t->Partitions.count; i++)
		if (t->Partitions.items[i].PartitionIndex == p)
			mp = &t->Partitions.items[i];
	if (!mp) {
		*kerr = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		return -EIO;
	}
	snprintf(topic, sizeof topic, "%s", kstr(t->Name));
	k = ctl_leader(c, mp->LeaderId);
	v = ctl_version(c, k, KAFKA_FETCH_KEY, 11);
	if (v < 4)
		return -ENOTSUP;
	while (end < 0 || *offset < end) {
		struct kclient_mem *mark = k->mem;
		struct kafka_fetch_request req;
		struct kafka_fetch_request_fetch_topic ft;
		struct kafka_fetch_request_fetch_partition fp;
		struct kafka_fetch_response *resp;
		int64_t before = *offset, hw = -1;
		int rc = 0;

		kafka_fetch_request_init(&req);
		req.ReplicaId = -1;
		req.MaxWaitMs = end < 0 ? 500 : 100;
		req.MinBytes = 1;
		req.MaxBytes = FETCH_MAX_BYTES;
		req.IsolationLevel = 0;
		req.SessionId = 0;
		req.SessionEpoch = -1;
		memset(&fp, 0, sizeof fp);
		fp.Partition = p;
		fp.CurrentLeaderEpoch = -1;
		fp.FetchOffset = *offset;
		fp.LogStartOffset = -1;
		fp.PartitionMaxBytes = PART_MAX_BYTES;
		ft.Topic = wstr(topic);
		ft.Partitions.items = &fp;
		ft.Partitions.count = 1;
		req.Topics.items = &ft;
		req.Topics.count = 1;
		req.ForgottenTopicsData.count = 0;
		req.RackId = wstr("");
		resp = ctl_call(c, k, KAFKA_FETCH_KEY, v, &req);
		if (resp->ErrorCode)
			*kerr = resp->ErrorCode;
		for (int32_t i = 0; i < resp->Responses.count && !*kerr && !rc; i++)
			for (int32_t j = 0; j < resp->Responses.items[i].Partitions.count && !rc; j++) {
				const struct kafka_fetch_response_partition_data *pd = &resp->Responses.items[i].Partitions.items[j];

				if (pd->PartitionIndex != p)
					continue;
				if (pd->ErrorCode) {
					*kerr = pd->ErrorCode;
					break;
				}
				hw = pd->HighWatermark;
				if (pd->Records.len > 0)
					rc = record_walk(topic, p, pd->Records.ptr, (size_t)pd->Records.len, offset, end,
							  cb, arg);
			}
		kclient_release_to(k, mark);
		if (*kerr)
			return -EIO;
		if (rc)
			return rc;
		if (*offset == before) {
			if (end >= 0 && hw >= 0 && hw <= *offset)
				return 0;   /* the end moved back (truncation) or is here */
			if (end >= 0 && ++idle > 50)
				return -ETIMEDOUT;
		} else {
			idle = 0;
		}
	}
	return 0;
}
