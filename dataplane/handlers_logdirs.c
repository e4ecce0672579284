/* dataplane/handlers_logdirs.c — DescribeLogDirs: the one log directory
 * (log.dirs) with every partition's size on disk, so Kafka tools
 * (kafka-log-dirs.sh, admin clients) see what the broker holds.
 *
 * @thread shard (any shard answers for every partition: the sizes come
 * from the partitions' published blocks, struct part_pub, read with
 * relaxed loads; the owners are never asked).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "dataplane/authz.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part.h"

static void fill_partition(struct kafka_describe_log_dirs_response_describe_log_dirs_partition *p,
			   const struct md_partition *mp)
{
	const struct part_pub *u = mp->pub;

	p->PartitionIndex = mp->index;
	p->PartitionSize = u ? __atomic_load_n(&u->size_bytes, __ATOMIC_RELAXED) : 0;
	p->OffsetLag = 0;      /* Kafka: max(HW - LEO, 0) for the current log; the leader's is 0 */
	p->IsFutureKey = false;
}

/* The topic's partitions: all of them (want NULL) or those listed that
 * exist. 0, or -ENOMEM when the arena is full. */
static int fill_topic(struct kafka_ctx *ctx, struct kafka_describe_log_dirs_response_describe_log_dirs_topic *rt,
		      const struct md_topic *t, const int32_t *want, int nwant)
{
	int n = want ? nwant : t->nparts;

	rt->Name = (struct kafka_str){ t->name, t->name_len };
	rt->Partitions.items = ALLOC(ctx, struct kafka_describe_log_dirs_response_describe_log_dirs_partition, n);
	if (!rt->Partitions.items)
		return -ENOMEM;
	rt->Partitions.count = 0;
	for (int i = 0; i < n; i++) {
		int32_t idx = want ? want[i] : i;

		if (idx < 0 || idx >= t->nparts || !md_part_hosted(&t->parts[idx], ctx->sh->b->set.node_id))
			continue;   /* Kafka leaves out partitions it does not hold */
		fill_partition(&rt->Partitions.items[rt->Partitions.count++], &t->parts[idx]);
	}
	return 0;
}

int kafka_handle_describe_log_dirs(struct kafka_ctx *ctx)
{
	struct kafka_describe_log_dirs_request *q = ctx->req.body;
	struct shard *sh = ctx->sh;
	struct md_snapshot *md = broker_md(sh->b);
	struct kafka_describe_log_dirs_response *r = ALLOC(ctx, struct kafka_describe_log_dirs_response, 1);
	struct kafka_describe_log_dirs_response_describe_log_dirs_result *res;
	int all = q->Topics.count < 0, n = all ? md->ntopics : q->Topics.count;
	char *dir = ALLOC(ctx, char, PATH_MAX);
	struct statvfs vfs;

	if (!r || !dir) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_describe_log_dirs_response_init(r);
	ctx->resp = r;
	if (!authz_cluster(ctx, ACL_DESCRIBE)) {
		/* the authorizer: no directory (v3+ says why in its ErrorCode) */
		r->ErrorCode = KERR_CLUSTER_AUTHORIZATION_FAILED;
		r->Results.count = 0;
		kafka_ctx_respond(ctx);
		return 0;
	}
	res = ALLOC(ctx, struct kafka_describe_log_dirs_response_describe_log_dirs_result, 1);
	if (!res) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	memset(res, 0, sizeof(*res));
	r->Results.items = res;
	r->Results.count = 1;
	/* the absolute path, as Kafka reports it (an admin request: the
	 * syscalls here are not on the data path) */
	if (!realpath(sh->b->set.data_dir, dir))
		snprintf(dir, PATH_MAX, "%s", sh->b->set.data_dir);
	res->LogDir = (struct kafka_str){ dir, (int32_t)strlen(dir) };
	res->TotalBytes = -1;
	res->UsableBytes = -1;
	if (statvfs(dir, &vfs) == 0) {
		res->TotalBytes = (int64_t)vfs.f_blocks * (int64_t)vfs.f_frsize;
		res->UsableBytes = (int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize;
	}
	res->Topics.items = ALLOC(ctx, struct kafka_describe_log_dirs_response_describe_log_dirs_topic, n);
	if (!res->Topics.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	res->Topics.count = 0;
	for (int i = 0; i < n; i++) {
		const struct md_topic *t;
		const struct kafka_describe_log_dirs_request_describable_log_dir_topic *qt = all ? NULL
			: &q->Topics.items[i];

		t = all ? md->topics[i] : qt->Topic.len > 0 ? md_find(md, qt->Topic.ptr, qt->Topic.len) : NULL;
		if (!t)
			continue;   /* Kafka leaves out topics it does not hold */
		if (fill_topic(ctx, &res->Topics.items[res->Topics.count++], t, qt ? qt->Partitions.items : NULL,
			       qt ? (qt->Partitions.count < 0 ? 0 : qt->Partitions.count) : 0) < 0) {
			kafka_ctx_abort(ctx);
			return 0;
		}
	}
	ctx->resp = r;
	kafka_ctx_respond(ctx);
	return 0;
}
