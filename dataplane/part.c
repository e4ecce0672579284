/* dataplane/part.c — partitions on their owner shard: acks after
 * durability, waking long-polls when the high watermark moves. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/part.h"
#include "dataplane/shard.h"

#define ACK_RING 4096

static void part_durable(struct plog *pl, int64_t durable, int err, void *arg)
{
	(void)pl;
	(void)durable;
	(void)err;
	part_progress(arg);
}

int part_open(struct shard *sh, const char *dir, const char *topic, int32_t index,
	      const struct plog_config *cfg, struct part **out)
{
	struct part *p = calloc(1, sizeof(*p)); /* style: allow partition setup */
	int rc;

	if (!p)
		return -ENOMEM;
	p->acks = calloc(ACK_RING, sizeof(*p->acks)); /* style: allow partition setup */
	if (!p->acks) {
		free(p);
		return -ENOMEM;
	}
	p->ack_cap = ACK_RING;
	if ((rc = plog_open(&sh->st, dir, cfg, &p->pl)) < 0) {
		free(p->acks);
		free(p);
		return rc;
	}
	p->sh = sh;
	p->index = index;
	snprintf(p->topic, sizeof(p->topic), "%s", topic);
	p->last_hw = p->pl->high_watermark;
	plog_set_durable_cb(p->pl, part_durable, p);
	*out = p;
	return 0;
}

void part_close(struct part *p)
{
	/* answer whoever still waits: the log is going away */
	p->pl->err = p->pl->err ? p->pl->err : -ESHUTDOWN;
	part_progress(p);
	plog_close(p->pl);
	free(p->acks);
	free(p);
}

void part_retire(struct part *p)
{
	p->pl->err = p->pl->err ? p->pl->err : -ESHUTDOWN;
	part_progress(p);
	plog_close(p->pl);
	p->pl = NULL;
	p->deleted = 1;
	free(p->acks);
	p->acks = NULL;
	p->ack_cap = 0;
}

int part_wait_ack(struct part *p, const struct ack_wait *w)
{
	if (p->deleted)
		return -ENOENT;
	if (p->ack_tail - p->ack_head == p->ack_cap)
		return -ENOBUFS;
	p->acks[p->ack_tail++ % p->ack_cap] = *w;
	return 0;
}

/* Deliver one completed produce to the connection's shard. */
extern void produce_ack(struct shard *sh, struct kafka_ctx *ctx, void *slot, int64_t base, int err);
extern void produce_ack_msg(void *self, struct shard_msg *m);
extern void fetch_wake_msg(void *self, struct shard_msg *m);

void part_progress(struct part *p)
{
	struct shard *sh = p->sh;
	int64_t hw = p->pl->high_watermark;
	int err = p->pl->err;

	while (p->ack_head != p->ack_tail) {
		struct ack_wait *w = &p->acks[p->ack_head % p->ack_cap];

		if (!err && w->need > hw)
			break;
		if (w->notify) {
			struct shard_msg m = { .fn = w->notify, .p = { w->ctx }, .v = { w->base_offset, err } };

			shard_send(sh, w->from, &m);
		} else if (w->from == sh->id) {
			produce_ack(sh, w->ctx, w->slot, w->base_offset, err);
		} else {
			struct shard_msg m = { .fn = produce_ack_msg, .p = { w->ctx, w->slot },
					       .v = { w->base_offset, err } };

			shard_send(sh, w->from, &m);
		}
		p->ack_head++;
	}
	if (hw != p->last_hw && p->watchers) {
		uint64_t wmask = p->watchers;

		p->watchers = 0;
		for (int i = 0; wmask; i++, wmask >>= 1) {
			if (!(wmask & 1))
				continue;
			if (i == sh->id) {
				shard_wake_parked(sh);
			} else {
				struct shard_msg m = { .fn = fetch_wake_msg };

				shard_send(sh, i, &m);
			}
		}
	}
	p->last_hw = hw;
}
