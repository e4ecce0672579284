/* control/ctl_follow.c — a node serves the topic and config changes other
 * nodes made: the metadata image follows every record applied
 * (ctl_quorum.c), but the snapshot the shards serve and the partitions
 * this node hosts change only through an operation (ctl_topic.c), and
 * another node's operation runs there. ctl_quorum.c notes here which
 * records applied were another node's (not this node's own proposals):
 * - TOPIC: once its PARTITION records are applied too, the snapshot
 *   entry, and the partitions placed on this node opening on their
 *   shards; then it is published, as at start-up.
 * - REMOVE_TOPIC: the topic's partitions retired on their shards, then
 *   the topic leaves the snapshot and its directories go, as a
 *   DeleteTopics here does.
 * - PARTITIONS (CreatePartitions) and CONFIG (AlterConfigs of a topic):
 *   once the PARTITION records placing the new partitions are applied,
 *   the topic rebuilt from the image: its new partitions placed on this
 *   node open on their shards (leader or follower, ctl_roles.c), every
 *   partition open here is told the topic's config
 *   (part_proxy_set_config), and the new entry replaces the old one.
 * - BROKER_CONFIG of the cluster-wide defaults (AlterConfigs of the
 *   broker ""; a node's own scope is set through that node alone): the
 *   broker config in effect rebuilt (ctl_build_cfg) and every topic with
 *   it, so the topics without an override follow.
 * A rebuild waits while any operation is in flight (ctl->ops_open), as
 * ctl_elect.c's does: that operation holds the topics it replaces.
 * Leader epochs need nothing here: ctl_elect.c and ctl_roles.c follow
 * every PARTITION_CHANGE and BROKER_RESTARTED (LEADER_RESTARTED) record
 * on every node.
 *
 * @thread ctl
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/config.h"
#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/meta_parts.h"
#include "control/metalog.h"
#include "dataplane/broker.h"
#include "storage/slog.h"

static void ctl_follow_opened(struct ctl *ctl, struct ctl_op *op)
{
	(void)ctl;
	if (op->failed)
		slog(SLOG_NOTICE, "serving a topic another node created or grew: %s", op->fail_msg);
}

/* 1: the partitions of mt from `from` on are placed (their PARTITION
 * records applied). */
static int placed_from(const struct meta_topic *mt, int32_t from)
{
	for (int32_t i = from; i < mt->partitions; i++)
		if (mt->parts[i].legacy || mt->parts[i].nreplicas < 1)
			return 0;
	return 1;
}

/* 1: mt is placed by its PARTITION records (not only its TOPIC record). */
static int placed(const struct meta_topic *mt)
{
	return placed_from(mt, 0);
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
	return ctl_topic_served_id(ctl, id);
}

static void retire(struct ctl *ctl, struct md_topic *t)
{
	struct ctl_op *op = calloc(1, sizeof(*op));

	if (!op || !(op->deleted = calloc(1, sizeof(*op->deleted))))
		abort();   /* the control thread's own bookkeeping */
	ctl->ops_open++;   /* ctl_op_step's end counts it out */
	op->started = ctl_follow_opened;
	op->deleted[op->ndeleted++] = t;
	ctl_topic_retire_parts(ctl, op, t);
	if (op->pending == 0)
		ctl_op_step(ctl, op);
}

/* The CHANGED entry of topic id, or -1. */
static int changed_at(const struct ctl *ctl, const uint8_t id[16])
{
	for (int i = 0; i < ctl->nfollow; i++)
		if (ctl->follow_kind[i] == CTL_FOLLOW_CHANGED && !memcmp(ctl->follow[i], id, 16))
			return i;
	return -1;
}

static void drop_entry(struct ctl *ctl, int i)
{
	ctl->nfollow--;
	memmove(ctl->follow[i], ctl->follow[ctl->nfollow], 16);
	ctl->follow_kind[i] = ctl->follow_kind[ctl->nfollow];
}

/* Whether served topic t is to be rebuilt now (all: every topic), with
 * mt its image. */
static int due(struct ctl *ctl, const struct md_topic *t, int all, const struct meta_topic **mt)
{
	*mt = metalog_topic_by_id(ctl->ml, t->id);
	if ((!all && changed_at(ctl, t->id) < 0) || !*mt || (*mt)->deleted || (*mt)->partitions < t->nparts)
		return 0;   /* unchanged, or being deleted (a REMOVE_TOPIC to follow) */
	return placed_from(*mt, t->nparts);   /* else its new partitions' PARTITION records to come */
}

/* Rebuild the served topics other nodes grew or reconfigured (all of them
 * after a broker config change): one operation, published once the new
 * partitions opened and the old ones took the config. */
static int rebuild(struct ctl *ctl)
{
	const struct config *cfg_served = ctl_cfg_served(ctl);
	const struct meta_topic *mt;
	struct ctl_op *op;
	int all = ctl->follow_broker, n = 0, any = all;

	/* changes of topics not served (deleted since, or whose TOPIC record
	 * is followed still: served as the image has them) need nothing */
	for (int i = 0; i < ctl->nfollow; i++) {
		mt = metalog_topic_by_id(ctl->ml, ctl->follow[i]);
		if (ctl->follow_kind[i] == CTL_FOLLOW_CHANGED && (!served(ctl, ctl->follow[i]) || !mt || mt->deleted))
			drop_entry(ctl, i--);
	}
	for (int i = 0; i < metalog_topic_count(ctl->ml) && !any; i++) {
		const struct md_topic *t = ctl_topic_served_id(ctl, metalog_topic_at(ctl->ml, i)->id);

		any = t && due(ctl, t, 0, &mt);
	}
	if (!any)
		return 0;
	if (all) {
		struct config *eff;

		if (ctl_build_cfg(ctl, &eff) < 0)
			return 0;   /* no memory: again at the next turn */
		ctl->follow_broker = 0;
		/* an effective config no snapshot has carried yet is nobody's */
		if (cfg_served && ctl->eff != cfg_served)
			config_destroy(ctl->eff);
		ctl->eff = eff;
	}
	op = xcalloc(1, sizeof(*op));
	op->created = xcalloc((size_t)metalog_topic_count(ctl->ml) + 1, sizeof(*op->created));
	op->created_for = xcalloc((size_t)metalog_topic_count(ctl->ml) + 1, sizeof(*op->created_for));
	op->replaced = xcalloc((size_t)metalog_topic_count(ctl->ml) + 1, sizeof(*op->replaced));
	ctl->ops_open++;   /* ctl_op_step's end counts it out */
	op->started = ctl_follow_opened;
	/* the image's topics, each with the handle of its served entry */
	for (int i = 0; i < metalog_topic_count(ctl->ml); i++) {
		struct md_topic *t = ctl_topic_served_id(ctl, metalog_topic_at(ctl->ml, i)->id), *nt;
		int at;

		if (!t || !due(ctl, t, all, &mt))
			continue;
		at = changed_at(ctl, t->id);
		if (at >= 0)
			drop_entry(ctl, at);
		nt = ctl_topic_build(ctl, mt);   /* (the epochs the book says were told kept) */
		ctl_topic_tell_config(ctl, op, nt);   /* (its new partitions open after, with it) */
		op->replaced[op->nreplaced++] = t;
		op->created[op->ncreated++] = nt;
		ctl_topic_open_parts(ctl, op, nt, t->nparts);
		n++;
	}
	if (op->pending == 0)
		ctl_op_step(ctl, op);   /* publishes (the new broker config too) */
	return n + all;
}

int ctl_follow_poll(struct ctl *ctl)
{
	int work = 0, keep = 0, changed = 0;

	/* after start-up, which built every topic of the image it had */
	if ((!ctl->nfollow && !ctl->follow_broker) || !ctl->ready || ctl->init_err)
		return 0;
	for (int i = 0; i < ctl->nfollow; i++) {
		const struct meta_topic *mt = metalog_topic_by_id(ctl->ml, ctl->follow[i]);
		struct md_topic *t;

		if (ctl->follow_kind[i] == CTL_FOLLOW_CHANGED) {
			/* rebuilt below */
			changed = 1;
			ctl->follow_kind[keep] = CTL_FOLLOW_CHANGED;
			memmove(ctl->follow[keep++], ctl->follow[i], 16);
			continue;
		}
		if (ctl->follow_kind[i] == CTL_FOLLOW_DELETED) {
			if ((t = served(ctl, ctl->follow[i])) && (!mt || mt->deleted)) {
				retire(ctl, t);
				work++;
			}
			continue;
		}
		if (!mt || mt->deleted || served(ctl, mt->id))
			continue;   /* gone again, or served already */
		if (!placed(mt) || ctl_topic_served(ctl, mt->name, (int32_t)strlen(mt->name))) {
			/* its PARTITION records to come, or the topic of that
			 * name it replaces still being retired */
			ctl->follow_kind[keep] = CTL_FOLLOW_CREATED;
			memmove(ctl->follow[keep++], ctl->follow[i], 16);
			continue;
		}
		serve(ctl, mt);
		work++;
	}
	ctl->nfollow = keep;
	if ((changed || ctl->follow_broker) && !ctl->ops_open)
		work += rebuild(ctl);
	return work;
}

void ctl_follow_fini(struct ctl *ctl)
{
	free(ctl->follow);
	free(ctl->follow_kind);
	ctl->follow = NULL;
	ctl->follow_kind = NULL;
	ctl->nfollow = ctl->cap_follow = 0;
}
