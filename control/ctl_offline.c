/* control/ctl_offline.c — a partition whose log failed on this node (an
 * I/O error: EIO, EROFS; not a full filesystem, which the log rides out,
 * storage/plog.h): the owner shard asks (part_role_log_failed, the role's
 * isr_change message with v[2] 2) and this node leaves the partition's
 * ISR, and its leadership when it leads, in one PARTITION_CHANGE — so an
 * in-sync follower takes over, as Kafka's controller moves leaders off an
 * offline log directory. The failed log stays offline on this node until
 * the broker restarts (its fetches stop: dataplane/replica_fetcher.c
 * ready(), so it never rejoins the ISR meanwhile).
 *
 * Without another in-sync replica that is registered and unfenced, nothing
 * changes: the partition keeps its leader, which answers
 * KAFKA_STORAGE_ERROR (an election would pick it again).
 *
 * Thread: the control thread (@thread ctl).
 */
#include <stdio.h>
#include <string.h>

#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/meta_brokers.h"
#include "control/meta_parts.h"
#include "control/metalog.h"
#include "dataplane/shard.h"

static void offline_changed(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	(void)ctl;
	(void)cookie;
	(void)a;
	/* refused (a newer change won the race): the owner asks again when
	 * the new role still names this node in the ISR */
	(void)err;
}

static int eligible(struct ctl *ctl, int32_t id)
{
	const struct meta_broker *b = metalog_broker(ctl->ml, id);

	return b && !b->fenced;
}

void ctl_offline_leave(struct ctl *ctl, const struct shard_msg *m)
{
	const struct md_snapshot *md = ctl->b->md;
	int32_t idx = (int32_t)m->v[0], self_id = ctl->b->set.node_id, leader = -2;
	const struct md_topic *t = NULL;
	const struct meta_topic *mt;
	const struct meta_part *p;
	int32_t isr[META_MAX_REPLICAS];
	int n = 0;
	struct metalog_rec rec = { 0 };

	if (md) {
		uint8_t tid[16];

		memcpy(tid, (const void *)&m->p[0], sizeof(tid));   /* the topic by value */
		t = md_find_id(md, tid);
	}
	if (!t || idx < 0 || idx >= t->nparts || !(mt = metalog_topic(ctl->ml, t->name)) || idx >= mt->partitions)
		return;                      /* gone meanwhile */
	p = &mt->parts[idx];
	if ((int32_t)m->v[1] != self_id || p->leader_epoch != (int32_t)m->v[3] ||
	    !meta_part_has(p->isr, p->nisr, self_id))
		return;                      /* an older role's, or out already */
	for (int i = 0; i < p->nisr; i++)
		if (p->isr[i] != self_id)
			isr[n++] = p->isr[i];
	if (p->leader == self_id) {
		/* Kafka's order: the first replica in the ISR that may lead */
		for (int i = 0; i < p->nreplicas && leader < 0; i++)
			if (p->replicas[i] != self_id && meta_part_has(isr, n, p->replicas[i]) &&
			    eligible(ctl, p->replicas[i]))
				leader = p->replicas[i];
		if (leader < 0) {
			fprintf(stderr, "sluiced: partition %s-%d: the log failed here and no other in-sync "
				"replica may lead: it stays (KAFKA_STORAGE_ERROR until a restart)\n", t->name, idx);
			return;
		}
	} else if (n == 0) {
		return;                      /* (the leader is always in its ISR) */
	}
	if (metalog_build_partition_change(ctl->ml, t->name, idx, leader, isr, n, NULL, 0, &rec) < 0 || !rec.len) {
		metalog_rec_free(&rec);
		return;
	}
	if (leader >= 0)
		fprintf(stderr, "sluiced: partition %s-%d: the log failed here: leader %d -> %d, this node leaves "
			"the ISR (offline until a restart)\n", t->name, idx, self_id, leader);
	else
		fprintf(stderr, "sluiced: partition %s-%d: the log failed here: this node leaves the ISR "
			"(offline until a restart)\n", t->name, idx);
	ctl_meta_propose(ctl, &rec, offline_changed, NULL);
}
