/* control/ctl_msg.c — the control thread's way out to the shards: messages
 * parked on a full ring, the partition proxy, answers to requests, the
 * internal logs' appends and reads, and the turn's clock
 * (see control/ctl_internal.h for how the control thread is split). */

#include <stdlib.h>
#include <string.h>

#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "dataplane/kafka_ctx.h"


/* ---- messages --------------------------------------------------------- */

/* Send to a shard; a full ring (or earlier messages still parked for that
 * shard) parks the message, and the loop sends it later (ctl_flush_parked).
 * Never waits: the shard's answers come back over the other ring, which
 * only this thread drains. */
static void ctl_send(struct ctl *ctl, int to, const struct shard_msg *m)
{
	struct ctl_park *pk = &ctl->park[to];

	if (pk->len == 0 && broker_send(ctl->b, broker_ctl_index(ctl->b), to, m) == 0)
		return;
	if (pk->len == pk->cap) {
		uint32_t ncap = pk->cap ? pk->cap * 2 : 256;
		struct shard_msg *nq = xcalloc(ncap, sizeof(*nq));

		for (uint32_t i = 0; i < pk->len; i++)
			nq[i] = pk->q[(pk->head + i) & (pk->cap - 1)];
		free(pk->q);
		pk->q = nq;
		pk->head = 0;
		pk->cap = ncap;
	}
	pk->q[(pk->head + pk->len) & (pk->cap - 1)] = *m;
	pk->len++;
	ctl->parked++;
}

/* Retry parked messages, oldest first, until a ring is full again.
 * Returns how many went out; *left is how many still wait. */
int ctl_flush_parked(struct ctl *ctl, uint32_t *left)
{
	struct broker *b = ctl->b;
	int n = 0;

	*left = 0;
	for (int to = 0; to < b->set.nshards; to++) {
		struct ctl_park *pk = &ctl->park[to];

		while (pk->len && broker_send(b, broker_ctl_index(b), to, &pk->q[pk->head]) == 0) {
			pk->head = (pk->head + 1) & (pk->cap - 1);
			pk->len--;
			n++;
		}
		*left += pk->len;
	}
	return n;
}

void ctl_send_msg(struct ctl *ctl, int to, const struct shard_msg *m)
{
	ctl_send(ctl, to, m);
}

static void ctl_proxy_send(void *ctx, int to, const struct shard_msg *m)
{
	ctl_send(ctx, to, m);
}

struct part_proxy *ctl_part_proxy(struct ctl *ctl, struct part_proxy *px)
{
	px->from = broker_ctl_index(ctl->b);
	px->send = ctl_proxy_send;
	px->ctx = ctl;
	return px;
}

struct txn_coord *ctl_txns(struct ctl *ctl)
{
	return ctl->tc;
}

struct peer_kafka *ctl_peers(struct ctl *ctl)
{
	return ctl->peers;
}

struct group_coord *ctl_groups(struct ctl *ctl)
{
	return ctl->gc;
}

static void shard_ctl_reply(void *self, struct shard_msg *m)
{
	(void)self;
	kafka_ctx_sub_done(m->p[0]);
}

void ctl_reply(struct ctl *ctl, struct kafka_ctx *ctx, int from)
{
	struct shard_msg m = { .fn = shard_ctl_reply, .p = { ctx } };

	ctl_send(ctl, from, &m);
}

/* ---- internal logs: appends and start-up reads ------------------------ */

struct ctl_append {
	struct part_append_req req;  /* the proxy's request: batch, done, cookie */
	void (*done)(struct ctl *ctl, void *cookie, int64_t base, int err);
	void *cookie;
	uint8_t *batch;
};

static void ctl_appended(void *self, void *cookie, int64_t base, int err)
{
	struct ctl_append *ca = cookie;

	ca->done(self, ca->cookie, base, err);
	free(ca->batch);
	free(ca);
}

int ctl_log_append(struct ctl *ctl, const struct md_topic *t, int32_t idx, int32_t min_insync, uint8_t *batch,
		   uint32_t len, void (*done)(struct ctl *ctl, void *cookie, int64_t base, int err), void *cookie)
{
	int32_t shard = t && idx >= 0 && idx < t->nparts ? ctl_part_open_on(ctl, t->id, idx) : -1;
	struct ctl_append *ca = shard >= 0 ? calloc(1, sizeof(*ca)) : NULL;
	struct part_proxy px;

	if (!ca) {
		free(batch);
		return shard >= 0 ? -ENOMEM : -ENOENT;
	}
	ca->done = done;
	ca->cookie = cookie;
	ca->batch = batch;
	ca->req = (struct part_append_req){ .batch = batch, .len = len, .done = ctl_appended, .cookie = ca,
					    .min_insync = min_insync };
	part_proxy_append(ctl_part_proxy(ctl, &px), shard, part_addr_of(t->id, idx), &ca->req);
	return 0;
}

struct ctl_read {
	void (*chunk)(struct ctl *ctl, const uint8_t *buf, uint32_t len, int32_t part);
	void (*end)(struct ctl *ctl);
	int left;
};

static void ctl_read_chunk(void *self, void *cookie, const uint8_t *buf, uint32_t len, int32_t index)
{
	struct ctl_read *cr = cookie;

	cr->chunk(self, buf, len, index);
}

static void ctl_read_end(void *self, void *cookie)
{
	struct ctl_read *cr = cookie;

	if (--cr->left == 0) {
		cr->end(self);
		free(cr);
	}
}

int ctl_read_topic(struct ctl *ctl, const struct md_topic *t,
		   void (*chunk)(struct ctl *ctl, const uint8_t *buf, uint32_t len, int32_t part),
		   void (*end)(struct ctl *ctl))
{
	struct ctl_read *cr;
	int n = 0;

	for (int32_t i = 0; t && i < t->nparts; i++)
		n += ctl_part_open_on(ctl, t->id, i) >= 0;
	if (!n)
		return 0;
	cr = calloc(1, sizeof(*cr));
	if (!cr)
		abort();   /* start-up */
	cr->chunk = chunk;
	cr->end = end;
	cr->left = n;
	for (int32_t i = 0; i < t->nparts; i++) {
		int32_t shard = ctl_part_open_on(ctl, t->id, i);
		struct part_proxy px;

		if (shard >= 0)
			part_proxy_read(ctl_part_proxy(ctl, &px), shard, part_addr_of(t->id, i), 0, INT64_MAX,
					ctl_read_chunk, ctl_read_end, cr);
	}
	return n;
}

int ctl_is_ready(const struct ctl *ctl)
{
	return ctl->ready && !ctl->init_err;
}

int ctl_admin_port(const struct ctl *ctl)
{
	return ctl->admin_port;
}

int64_t ctl_started_ms(const struct ctl *ctl)
{
	return ctl->started_ms;
}

int64_t ctl_now_ms(const struct ctl *ctl)
{
	return ctl->now_ms;
}

int64_t ctl_wall_ms(const struct ctl *ctl)
{
	return ctl->wall;
}
