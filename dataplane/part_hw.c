/* dataplane/part_hw.c — a partition's high watermark under its role (see
 * part_role.h): the ISR's least log end on a leader, the leader's within
 * its own durable log end on a follower, and the replica fetches woken
 * when it or the log end moves. What part.c calls on every progress;
 * below part_role.c, which calls part.c. And its checkpoint,
 * "high-watermark" (see part_role.h). @thread owner shard */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataplane/part.h"
#include "dataplane/part_role.h"
#include "dataplane/shard_core.h"

void part_role_free(struct part *p)
{
	if (!p->role)
		return;
	free(p->role);
	p->role = NULL;
	p->sh->repl_parts--;
}

/* This node's log of p failed (an I/O error, not a full filesystem): ask
 * the control thread to take this node out of the partition's ISR, and
 * out of its leadership when it leads (v[2] 2: control/ctl_offline.c), so
 * an in-sync replica takes over (Kafka's offline log directory). Once per
 * role: each new role asks again (the control thread ignores it once this
 * node is out of the ISR). Runs from part_role_hw, at every progress. */
void part_role_log_failed(struct part *p)
{
	struct part_role *r = p->role;
	struct shard_msg m;

	if (!r || !r->isr_change || r->offline_asked)
		return;
	r->offline_asked = 1;
	m = (struct shard_msg){ .fn = r->isr_change, .v = { p->index, r->self, 2, r->leader_epoch } };
	memcpy(&m.p[0], p->topic_id, sizeof(p->topic_id));   /* the partition by value */
	shard_send(p->sh, r->isr_to, &m);   /* parks when the ring is full */
}

void part_role_hw(struct part *p)
{
	struct part_role *r = p->role;
	struct plog *pl = p->pl;
	int64_t hw = pl->durable_offset;

	if (pl->err && pl->err != -ESHUTDOWN)
		part_role_log_failed(p);

	if (r->leading) {
		int64_t lag = 0;

		for (int i = 0; i < r->nf; i++) {
			int64_t behind = pl->next_offset - (r->f[i].leo > 0 ? r->f[i].leo : 0);

			if (r->f[i].in_isr && r->f[i].leo < hw)
				hw = r->f[i].leo;
			if (behind > lag)
				lag = behind;
		}
		if (p->pub) {
			__atomic_store_n(&p->pub->follower_lag, lag, __ATOMIC_RELAXED);
			part_role_publish_lag_ms(p, p->sh->now_ns);
		}
		if (hw < r->hw)
			hw = r->hw;          /* never back: consumers may have read below it */
		if (hw > pl->next_offset)
			hw = pl->next_offset;
		r->hw = hw;
	} else if (r->hw < hw) {
		hw = r->hw;
	}
	pl->high_watermark = hw;
}

void part_role_publish_lag_ms(struct part *p, uint64_t now_ns)
{
	const struct part_role *r = p->role;
	int64_t ms = 0;

	if (!p->pub || !r || !r->leading || !p->pl)
		return;
	for (int i = 0; i < r->nf; i++) {
		const struct part_follower *f = &r->f[i];
		int64_t behind;

		if (f->leo >= p->pl->next_offset || now_ns <= f->caught_up_ns)
			continue;            /* it has everything: no lag */
		behind = (int64_t)((now_ns - f->caught_up_ns) / 1000000u);
		if (behind > ms)
			ms = behind;
	}
	__atomic_store_n(&p->pub->follower_lag_ms, ms, __ATOMIC_RELAXED);
}

static void wake_shards(struct shard *sh, uint64_t mask)
{
	for (int i = 0; mask; i++, mask >>= 1) {
		if (!(mask & 1))
			continue;
		if (i == sh->id) {
			shard_wake_parked(sh);
		} else {
			struct shard_msg m = { .fn = shard_wake_parked_msg };

			shard_send(sh, i, &m);
		}
	}
}

void part_role_wake_now(struct part *p)
{
	uint64_t mask = p->role ? p->role->fetch_watchers : 0;

	if (mask) {
		p->role->fetch_watchers = 0;
		wake_shards(p->sh, mask);
	}
}

void part_role_wake(struct part *p)
{
	struct part_role *r = p->role;

	if (!r->leading || (r->last_leo == p->pl->next_offset && r->last_hw == p->pl->high_watermark))
		return;
	r->last_leo = p->pl->next_offset;
	r->last_hw = p->pl->high_watermark;
	if (r->fetch_watchers) {
		uint64_t mask = r->fetch_watchers;

		r->fetch_watchers = 0;
		wake_shards(p->sh, mask);
	}
}

/* ---- the checkpoint ---------------------------------------------------- */

int64_t part_hw_load(const struct part *p)
{
	char path[4300], buf[64], *end;
	size_t tag = strlen(PART_HW_TAG);
	ssize_t n;
	long long v;
	int fd;

	snprintf(path, sizeof(path), "%s/" PART_HW_FILE, p->pl->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= (ssize_t)tag)
		return -1;
	buf[n] = 0;
	if (strncmp(buf, PART_HW_TAG, tag))
		return -1;
	v = strtoll(buf + tag, &end, 10);
	if (end == buf + tag || *end != '\n' || v < 0)
		return -1;     /* renamed into place whole: never partial; unreadable is none */
	return v;
}

void part_hw_checkpoint(struct part *p)
{
	struct plog *pl = p->pl;
	char text[48];
	int n;

	if (!p->role || !pl || p->deleted || (pl->err && pl->err != -ESHUTDOWN) ||
	    pl->high_watermark == p->hw_saved || plog_saving_file(pl, PART_HW_FILE))
		return;
	n = snprintf(text, sizeof(text), PART_HW_TAG "%" PRId64 "\n", pl->high_watermark);
	if (plog_save_file(pl, PART_HW_FILE, text, (size_t)n) == 0)
		p->hw_saved = pl->high_watermark;
}

void part_hw_role_taken(struct part *p, int alone)
{
	struct plog *pl = p->pl;
	int64_t hw = p->hw_ckpt;

	p->hw_ckpt = -1;
	if (alone) {
		if (p->hw_saved >= 0 || hw >= 0) {
			/* a metadata call, once as the partition goes alone */
			char path[4300];

			snprintf(path, sizeof(path), "%s/" PART_HW_FILE, pl->dir);
			unlink(path);
			p->hw_saved = -1;
		}
		if (pl->high_watermark < pl->durable_offset)
			pl->high_watermark = pl->durable_offset;   /* the one-node way */
		return;
	}
	if (hw < 0)
		return;
	/* Kafka's: the least of the checkpoint and the log end, not below
	 * the log start */
	if (hw > pl->high_watermark)
		hw = pl->high_watermark;
	if (hw < pl->log_start)
		hw = pl->log_start;
	pl->high_watermark = hw;
	p->hw_saved = hw;
}
