/* control/txn_table.c — the transaction coordinator's table: transactions
 * by transactional id, each one's partitions, which __transaction_state
 * partition an id belongs to and whether it is coordinated here (see
 * txn_table.h). Thread: the control thread. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control/coord_load.h"
#include "control/ctl.h"
#include "control/cutil.h"
#include "control/hmap.h"
#include "control/txn_table.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"

const char *const tstate_names[] = { "Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
				     "CompleteCommit", "CompleteAbort", "Dead" };

static int txn_eq(const void *item, const void *key)
{
	const struct txn *t = item;
	const struct kafka_str *id = key;

	return strlen(t->id) == (size_t)id->len && !memcmp(t->id, id->ptr, (size_t)id->len);
}

static int txn_is(const void *item, const void *key)
{
	return item == key;
}

struct txn *txn_find(struct txn_coord *tc, struct kafka_str id)
{
	int64_t i;

	if (id.len <= 0)
		return NULL;
	i = hmap_find(&tc->txns, hmap_hash_mem(id.ptr, (size_t)id.len), txn_eq, &id);
	return i < 0 ? NULL : tc->txns.v[i];
}

struct txn *txn_new(struct txn_coord *tc, struct kafka_str id)
{
	struct txn *t = xcalloc(1, sizeof(*t));

	t->id = kdup(id);
	t->pid = -1;
	t->epoch = -1;
	t->last_epoch = -1;
	hmap_put(&tc->txns, hmap_hash_mem(id.ptr, (size_t)id.len), t);
	return t;
}

void txn_tp_clear(struct txn *t)
{
	for (int i = 0; i < t->ntp; i++)
		free(t->tp[i].topic);
	t->ntp = 0;
	t->nregistered = 0;
}

void txn_free(struct txn *t)
{
	txn_tp_clear(t);
	free(t->tp);
	free(t->id);
	free(t);
}

void txn_unlink(struct txn_coord *tc, struct txn *t)
{
	int64_t i = hmap_find(&tc->txns, hmap_hash_str(t->id), txn_is, t);

	if (i >= 0)
		hmap_del_at(&tc->txns, (uint32_t)i);
}

int txn_tp_index(const struct txn *t, const char *topic, size_t tlen, int32_t part)
{
	for (int i = 0; i < t->ntp; i++)
		if (t->tp[i].part == part && strlen(t->tp[i].topic) == tlen && !memcmp(t->tp[i].topic, topic, tlen))
			return i;
	return -1;
}

void txn_tp_add(struct txn *t, const char *topic, size_t tlen, int32_t part)
{
	if (txn_tp_index(t, topic, tlen, part) >= 0)
		return;
	if (t->ntp == t->tp_cap) {
		t->tp_cap = t->tp_cap ? t->tp_cap * 2 : 8;
		t->tp = realloc(t->tp, sizeof(*t->tp) * (size_t)t->tp_cap);
		if (!t->tp)
			abort();
	}
	t->tp[t->ntp++] = (struct txn_tp){ .topic = kdup((struct kafka_str){ topic, (int32_t)tlen }), .part = part };
}

/* __transaction_state in the published snapshot (looked up each time: a
 * leader change republishes it), or NULL before it exists. */
const struct md_topic *txn_state_topic(const struct txn_coord *tc)
{
	const struct md_snapshot *md = tc->b->md;

	return md ? md_find(md, TXN_STATE_TOPIC, (int32_t)strlen(TXN_STATE_TOPIC)) : NULL;
}

/* Java's String.hashCode over the id, as Kafka picks the partition. */
int32_t txn_state_partition(const struct txn_coord *tc, const char *id)
{
	const struct md_topic *st = txn_state_topic(tc);

	return java_key_partition(id, st ? st->nparts : 1);
}

/* 0 when id's partition is coordinated here, else the Kafka error. */
int16_t txn_key_err(const struct txn_coord *tc, struct kafka_str id)
{
	char buf[512];

	if (id.len <= 0 || id.len >= (int32_t)sizeof(buf))
		return 0;   /* the handler answers as it did */
	memcpy(buf, id.ptr, (size_t)id.len);
	buf[id.len] = 0;
	return coord_load_err(&tc->load, txn_state_partition(tc, buf));
}

void txn_answer_now(struct txn_coord *tc, struct kafka_ctx *ctx)
{
	struct txn_req *rq = ctx->state;

	ctl_reply(tc->ctl, ctx, rq->from);
}

/* The producer named by a request: 0 or the Kafka error. */
int16_t txn_check_producer(struct txn_coord *tc, const struct txn *t, int64_t pid, int16_t epoch)
{
	(void)tc;
	if (!t || t->pid != pid)
		return KERR_INVALID_PRODUCER_ID_MAPPING;
	if (epoch != t->epoch)
		return KERR_INVALID_PRODUCER_EPOCH;   /* v0-1 spell PRODUCER_FENCED so */
	if (t->busy)
		return KERR_CONCURRENT_TRANSACTIONS;
	return 0;
}

int txn_open_count(const struct txn_coord *tc)
{
	int n = 0;

	for (uint32_t i = 0; i < tc->txns.cap; i++) {
		const struct txn *t = tc->txns.v[i];

		n += t && (t->state == TS_ONGOING || t->state == TS_PREPARE_COMMIT || t->state == TS_PREPARE_ABORT);
	}
	return n;
}

void txn_foreach(const struct txn_coord *tc, txn_visit_fn *fn, void *arg)
{
	for (uint32_t i = 0; i < tc->txns.cap; i++) {
		const struct txn *t = tc->txns.v[i];
		struct txn_view v;

		if (!t)
			continue;
		v.id = t->id;
		v.pid = t->pid;
		v.epoch = t->epoch;
		v.state = tstate_names[t->state];
		v.open = t->state == TS_ONGOING || t->state == TS_PREPARE_COMMIT || t->state == TS_PREPARE_ABORT;
		v.timeout_ms = t->timeout_ms;
		v.start_ms = t->start_wall;
		v.last_ms = t->last_wall;
		fn(&v, NULL, -1, arg);
		for (int j = 0; j < t->ntp; j++)
			fn(&v, t->tp[j].topic, t->tp[j].part, arg);
	}
}
