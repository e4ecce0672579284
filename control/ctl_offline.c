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
 * The log directory (ctl_offline_tick): a failed partition log may be the
 * first sign of a failed disk. When one fails, a write into log.dirs
 * tells which: if that fails too (EIO, EROFS: not a full filesystem,
 * which the logs ride out), or when every partition log this node holds
 * failed, the node halts as Kafka's broker does once all its log
 * directories are offline ("Shutdown broker because all log dirs in ...
 * have failed"): one line on stderr, then the controlled shutdown, which
 * moves its leaderships to in-sync replicas while the metadata log can
 * still be written, and exit 1. A partition directory on a filesystem of
 * its own (a symlink out of log.dirs) that fails takes only that
 * partition offline.
 *
 * Thread: the control thread (@thread ctl).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/meta_brokers.h"
#include "control/meta_parts.h"
#include "control/metalog.h"
#include "dataplane/shard.h"
#include "storage/slog.h"

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
	int32_t idx = (int32_t)m->v[0], self_id = ctl->b->set.node_id, leader = -2;
	const struct md_topic *t = NULL;
	const struct meta_topic *mt;
	const struct meta_part *p;
	int32_t isr[META_MAX_REPLICAS];
	int n = 0;
	struct metalog_rec rec = { 0 };

	{
		uint8_t tid[16];

		memcpy(tid, (const void *)&m->p[0], sizeof(tid));   /* the topic by value */
		t = ctl_topic_served_id(ctl, tid);
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
			slog(SLOG_ERR, "partition %s-%d: the log failed here and no other in-sync "
				"replica may lead: it stays (KAFKA_STORAGE_ERROR until a restart)", t->name, idx);
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
		slog(SLOG_ERR, "partition %s-%d: the log failed here: leader %d -> %d, this node leaves "
			"the ISR (offline until a restart)", t->name, idx, self_id, leader);
	else
		slog(SLOG_ERR, "partition %s-%d: the log failed here: this node leaves the ISR "
			"(offline until a restart)", t->name, idx);
	ctl_meta_propose(ctl, &rec, offline_changed, NULL);
}

/* A partition log failed here (part_pub.err: an I/O error; -ESHUTDOWN is
 * a log closing, -ENOSPC a full filesystem, neither a failure). Read from
 * the block the owner shard publishes (a relaxed load of a word it stores
 * whole, dataplane/broker.h), found through the control thread's book of
 * partition homes: a partition alone on this node has no role, so no
 * message tells its failure (part_role_log_failed is the role's). */
static int pub_failed(const struct part_pub *u, int64_t *err)
{
	*err = u ? __atomic_load_n(&u->err, __ATOMIC_RELAXED) : 0;
	return *err != 0 && *err != -ESHUTDOWN && *err != -ENOSPC;
}

#define LOGDIR_LOOK_MS 500

void ctl_offline_tick(struct ctl *ctl)
{
	struct broker *b = ctl->b;
	int64_t hosted = 0, failed = 0, err, first_err = 0;
	const char *first = NULL;
	int32_t first_idx = -1;
	int probe;

	if (ctl->logdir_halted || ctl->now_ms < ctl->logdir_next || __atomic_load_n(&b->stopping, __ATOMIC_RELAXED))
		return;
	ctl->logdir_next = ctl->now_ms + LOGDIR_LOOK_MS;
	for (int k = 0; k < metalog_topic_count(ctl->ml); k++) {
		const struct md_topic *tp = ctl_topic_served_id(ctl, metalog_topic_at(ctl->ml, k)->id);

		for (int32_t i = 0; tp && i < tp->nparts; i++) {
			const struct ctl_home *h = ctl_part_home(ctl, tp->id, i);

			if (!h)
				continue;            /* not held here */
			hosted++;
			if (!pub_failed(h->part_pub, &err))
				continue;
			if (!failed++) {
				first = tp->name;
				first_idx = i;
				first_err = err;
			}
		}
	}
	if (failed <= ctl->logdir_failed_seen) {
		ctl->logdir_failed_seen = failed;
		return;                      /* no log failed since the last look */
	}
	ctl->logdir_failed_seen = failed;
	probe = dir_write_probe(b->set.data_dir);
	if (failed < hosted && (!probe || probe == -ENOSPC || probe == -EDQUOT))
		return;                      /* the directory takes writes: those partitions alone */
	ctl->logdir_halted = 1;
	slog(SLOG_CRIT, "all log dirs in %s have failed (%lld of %lld partition logs failed, "
		"%s-%d: %s; a write into the directory: %s): halting after this node's leaderships move to "
		"in-sync replicas; repair or replace the disk, then restart the node",
		b->set.data_dir, (long long)failed, (long long)hosted, first, first_idx, strerror((int)-first_err),
		probe ? strerror(-probe) : "succeeded");
	__atomic_store_n(&b->fatal, 1, __ATOMIC_RELEASE);
	kill(getpid(), SIGTERM);            /* sluiced's signal path: the controlled shutdown, exit 1 */
}
