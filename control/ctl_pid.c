/* control/ctl_pid.c — producer ids: blocks reserved in the metadata log,
 * handed out one by one, never twice (a restart continues after the last
 * reserved block); asked for by the transaction coordinator and, through
 * the ring, by the shards (InitProducerId of an idempotent producer).
 * A block is reserved ahead: start-up reserves the first (ctl.c), and once
 * half of the current one is handed out the next is proposed, so a caller
 * never waits for a record to be applied (-EAGAIN only if a whole block
 * went out before the next was applied).
 * @thread ctl, except ctl_producer_id_submit (@thread shard). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "control/ctl_internal.h"
#include "control/metalog.h"
#include "dataplane/kafka_ctx.h"
#include "storage/slog.h"

static void ctl_pid_reserved(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	(void)cookie;
	ctl->pid_reserving = 0;
	if (err < 0) {
		slog(SLOG_WARN, "cannot reserve producer ids in the metadata log: %s", strerror(-err));
		return;
	}
	if (ctl->pid_next == ctl->pid_end) {
		ctl->pid_next = a->pid_start;
		ctl->pid_end = a->pid_end;
	} else {
		ctl->pid_spare = a->pid_start;
		ctl->pid_spare_end = a->pid_end;
	}
}

/* Propose the next block unless one is reserved or on its way. */
static void ctl_pid_reserve(struct ctl *ctl)
{
	struct metalog_rec r;
	int rc;

	if (ctl->pid_reserving || ctl->pid_spare >= 0)
		return;
	if ((rc = metalog_build_producer_ids(ctl->ml, CTL_PID_BLOCK, &r)) < 0) {
		slog(SLOG_WARN, "cannot reserve producer ids in the metadata log: %s", strerror(-rc));
		return;
	}
	ctl->pid_reserving = 1;
	ctl_meta_propose(ctl, &r, ctl_pid_reserved, NULL);
}

int64_t ctl_new_producer_id(struct ctl *ctl)
{
	if (ctl->pid_next == ctl->pid_end && ctl->pid_spare >= 0) {
		ctl->pid_next = ctl->pid_spare;
		ctl->pid_end = ctl->pid_spare_end;
		ctl->pid_spare = -1;
	}
	if (ctl->pid_end - ctl->pid_next <= CTL_PID_BLOCK / 2)
		ctl_pid_reserve(ctl);
	if (ctl->pid_next == ctl->pid_end)
		return -EAGAIN;   /* the next block is not applied yet */
	return ctl->pid_next++;
}

static void ctl_producer_id(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	int64_t *out = m->p[1];
	int64_t pid = ctl_new_producer_id(ctl);

	*out = pid < 0 ? -1 : pid;
	ctl_reply(ctl, m->p[0], (int)m->v[0]);
}

void ctl_producer_id_msg(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	struct shard_msg r = { .fn = (void (*)(void *, struct shard_msg *))m->p[1], .p = { m->p[0] },
			       .v = { ctl_new_producer_id(ctl) } };

	ctl_send_msg(ctl, (int)m->v[0], &r);
}

void ctl_producer_id_submit(struct kafka_ctx *ctx, int64_t *out)
{
	struct shard_msg m = { .fn = ctl_producer_id, .p = { ctx, out }, .v = { kafka_ctx_shard_id(ctx) } };

	kafka_ctx_send_ctl(ctx, &m);
}
