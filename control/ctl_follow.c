/* control/ctl_follow.c — a node serves the topics other nodes created and
 * retires those they deleted: the metadata image follows every record
 * applied (ctl_quorum.c), but the snapshot the shards serve and the
 * partitions this node hosts change only through an operation
 * (ctl_topic.c). A TOPIC record another node proposed (ctl_quorum.c notes
 * its id in ctl->follow) gets one here once its PARTITION records are
 * applied too: the snapshot entry, and the partitions placed on this node
 * opening on their shards; then it is published, as at start-up. A
 * REMOVE_TOPIC record another node proposed retires the topic's
 * partitions on their shards, then the topic leaves the snapshot and its
 * directories go, as a DeleteTopics here does.
 *
 * Not followed yet (docs/cluster.md): another node's partition additions,
 * topic and broker config changes and partitions' leader epochs (each node
 * serves them after its next restart, which rebuilds everything from the
 * image).
 *
 * @thread ctl
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_internal.h"
#include "control/meta_parts.h"
#include "control/metalog.h"
#include "dataplane/broker.h"

static void ctl_follow_opened(struct ctl *ctl, struct ctl_op *op)
{
	(void)ctl;
	if (op->failed)
		fprintf(stderr, "sluiced: serving a topic another node created: %s\n", op->fail_msg);
}

/* 1: mt is placed by its PARTITION records (not only its TOPIC record). */
static int placed(const struct meta_topic *mt)
{
	for (int32_t i = 0; i < mt->partitions; i++)
		if (mt->parts[i].legacy || mt->parts[i].nreplicas < 1)
			return 0;
	return 1;
}

static void serve(struct ctl *ctl, const struct meta_topic *mt)
{
	struct ctl_op *op = calloc(1, sizeof(*op));
	struct md_topic *t;

	if (!op || !(op->created = calloc(1, sizeof(*op->created))) ||
	    !(op->created_for = calloc(1, sizeof(*op->created_for))))
		abort();   /* the control thread's own bookkeeping */
	ctl->ops_open++;   /* ctl_op_step's end counts it out */
	op->started = ctl_follow_opened;
	t = ctl_topic_build(ctl, mt);
	op->created[op->ncreated++] = t;
	ctl_topic_open_parts(ctl, op, t, 0);
	if (op->pending == 0)
		ctl_op_step(ctl, op);
}

/* The served topic with this id, or NULL. */
static struct md_topic *served(struct ctl *ctl, const uint8_t id[16])
{
	const struct md_snapshot *md = ctl->b->md;

	for (int i = 0; md && i < md->ntopics; i++)
		if (!memcmp(md->topics[i]->id, id, 16))
			return md->topics[i];
	return NULL;
}

static void retire(struct ctl *ctl, struct md_topic *t)
{
	struct ctl_op *op = calloc(1, sizeof(*op));

	if (!op || !(op->deleted = calloc(1, sizeof(*op->deleted))))
		abort();   /* the control thread's own bookkeeping */
	ctl->ops_open++;   /* ctl_op_step's end counts it out */
	op->started = ctl_follow_opened;
	op->deleted[op->ndeleted++] = t;
	for (int32_t j = 0; j < t->nparts; j++) {
		struct md_partition *mp = &t->parts[j];
		struct part_proxy px;

		if (!mp->part)
			continue;
		op->pending++;
		part_proxy_retire(ctl_part_proxy(ctl, &px), mp->shard, mp->part, ctl_part_done, op);
	}
	if (op->pending == 0)
		ctl_op_step(ctl, op);
}

int ctl_follow_poll(struct ctl *ctl)
{
	int work = 0, keep = 0;

	/* after start-up, which built every topic of the image it had */
	if (!ctl->nfollow || !ctl->ready || ctl->init_err)
		return 0;
	for (int i = 0; i < ctl->nfollow; i++) {
		const struct meta_topic *mt = metalog_topic_by_id(ctl->ml, ctl->follow[i]);
		struct md_topic *t;

		if (ctl->follow_gone[i]) {
			if ((t = served(ctl, ctl->follow[i])) && (!mt || mt->deleted)) {
				retire(ctl, t);
				work++;
			}
			continue;
		}
		if (!mt || mt->deleted || served(ctl, mt->id))
			continue;   /* gone again, or served already */
		if (!placed(mt) || md_find(ctl->b->md, mt->name, (int32_t)strlen(mt->name))) {
			/* its PARTITION records to come, or the topic of that
			 * name it replaces still being retired */
			ctl->follow_gone[keep] = 0;
			memmove(ctl->follow[keep++], ctl->follow[i], 16);
			continue;
		}
		serve(ctl, mt);
		work++;
	}
	ctl->nfollow = keep;
	return work;
}

void ctl_follow_fini(struct ctl *ctl)
{
	free(ctl->follow);
	free(ctl->follow_gone);
	ctl->follow = NULL;
	ctl->follow_gone = NULL;
	ctl->nfollow = ctl->cap_follow = 0;
}
