/* control/ctl_pid.c — producer ids: blocks reserved in the metadata log,
 * handed out one by one, never twice (a restart continues after the last
 * reserved block); asked for by the transaction coordinator and, through
 * the ring, by the shards (InitProducerId of an idempotent producer).
 * @thread ctl, except ctl_producer_id_submit (@thread shard). */
#include <stdio.h>
#include <string.h>

#include "control/ctl_internal.h"
#include "control/metalog.h"
#include "dataplane/kafka_ctx.h"

#define CTL_PID_BLOCK 1000

int64_t ctl_new_producer_id(struct ctl *ctl)
{
	if (ctl->pid_next == ctl->pid_end) {
		/* reserve the next block first: an id is never handed out twice,
		 * a restart continues after the last reserved block */
		int64_t start = metalog_next_producer_ids(ctl->ml, CTL_PID_BLOCK);

		if (start < 0) {
			fprintf(stderr, "sluiced: cannot reserve producer ids in the metadata log: %s\n",
				strerror((int)-start));
			return start;
		}
		ctl->pid_next = start;
		ctl->pid_end = start + CTL_PID_BLOCK;
	}
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
