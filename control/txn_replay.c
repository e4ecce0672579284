/* control/txn_replay.c — reading __transaction_state back when this node
 * becomes the leader of one of its partitions (at start, the partitions
 * alone here), and finishing what the last coordinator left: markers of a
 * decided transaction, registrations of an ongoing one; dropping a
 * partition's transactions when leadership goes (see txn.h,
 * txn_internal.h). Thread: the control thread. */

#include <stdint.h>
#include <stdlib.h>

#include "control/ctl_homes.h"
#include "control/coord_load.h"
#include "control/ctl.h"
#include "control/cutil.h"
#include "control/hmap.h"
#include "control/txn_table.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part_proxy.h"
#include "storage/batch.h"
#include "storage/batch_format.h"

/* ---- replay ---------------------------------------------------------------------- */

static int rd_str(const uint8_t **p, const uint8_t *end, struct kafka_str *out)
{
	int16_t n;

	if (end - *p < 2)
		return -1;
	n = (int16_t)be16_load(*p);
	*p += 2;
	if (n < 0 || end - *p < n)
		return -1;
	*out = (struct kafka_str){ (const char *)*p, n };
	*p += n;
	return 0;
}

static void replay_record(struct txn_coord *tc, const struct record_view *rv)
{
	const uint8_t *k = rv->key, *kend = k + (rv->key_len > 0 ? rv->key_len : 0);
	const uint8_t *v = rv->value, *vend = v + (rv->value_len > 0 ? rv->value_len : 0);
	struct kafka_str id;
	struct txn *t;
	int32_t ntopics;

	if (!k || kend - k < 2 || be16_load(k) != 0)
		return;
	k += 2;
	if (rd_str(&k, kend, &id) < 0 || id.len <= 0)
		return;
	t = txn_find(tc, id);
	if (!v || rv->value_len < 0) {
		if (t) {
			txn_unlink(tc, t);
			txn_free(t);
		}
		return;
	}
	if (vend - v < 2 + 8 + 2 + 4 + 1 + 4 || be16_load(v) != 0)
		return;
	if (!t)
		t = txn_new(tc, id);
	tc->st.replayed_records++;
	v += 2;
	t->pid = (int64_t)be64_load(v);
	t->epoch = (int16_t)be16_load(v + 8);
	t->timeout_ms = (int32_t)be32_load(v + 10);
	t->state = v[14] <= TS_DEAD ? (enum tstate)v[14] : TS_EMPTY;
	ntopics = (int32_t)be32_load(v + 15);
	v += 19;
	txn_tp_clear(t);
	for (int32_t i = 0; i < ntopics; i++) {
		struct kafka_str topic;
		int32_t np;

		if (rd_str(&v, vend, &topic) < 0 || vend - v < 4)
			return;
		np = (int32_t)be32_load(v);
		v += 4;
		for (int32_t j = 0; j < np && vend - v >= 4; j++, v += 4)
			txn_tp_add(t, topic.ptr, (size_t)topic.len, (int32_t)be32_load(v));
	}
	if (vend - v >= 16) {
		t->last_wall = (int64_t)be64_load(v);
		t->start_wall = (int64_t)be64_load(v + 8);
	}
}

static void replay_chunk(void *self, void *cookie, const uint8_t *buf, uint32_t len, int32_t part)
{
	struct txn_coord *tc = ctl_txns(self);
	uint32_t at = 0;

	(void)part;
	if (!coord_load_current(&tc->load, coord_cookie_part(cookie), coord_cookie_gen(cookie)))
		return;   /* a load a leadership change overtook */
	while (at + BATCH_LOG_OVERHEAD <= len) {
		const uint8_t *b = buf + at;
		uint32_t size = batch_size(b);
		struct record_iter it;
		struct record_view rv;

		if (size > len - at || size < BATCH_HEADER_SIZE)
			break;
		if (!(batch_attributes(b) & (BATCH_ATTR_CODEC_MASK | BATCH_ATTR_CONTROL))) {
			record_iter_init(&it, b + BATCH_HEADER_SIZE, size - BATCH_HEADER_SIZE, batch_records_count(b));
			while (record_iter_next(&it, &rv) == 1)
				replay_record(tc, &rv);
		}
		at += size;
	}
}

/* The transactions of partition p, dropped (this node stopped leading
 * it): an idle one is freed; one with a write, registration or marker in
 * flight leaves the table for the orphans, freed once idle (its
 * completions still name it; what it writes where this node no longer
 * leads fails). Its waiting request is answered NOT_COORDINATOR then. */
static void unload_partition(struct txn_coord *tc, int32_t p)
{
	for (uint32_t i = 0; i < tc->txns.cap;) {
		struct txn *t = tc->txns.v[i];

		if (!t || txn_state_partition(tc, t->id) != p) {
			i++;
			continue;
		}
		hmap_del_at(&tc->txns, i);   /* slot i now holds a shifted entry: look again */
		if (t->busy || t->pending || t->then || t->ctx) {
			t->orphan_next = tc->orphans;
			tc->orphans = t;
		} else {
			txn_free(t);
		}
	}
}

/* Partition p is read back: finish what its last coordinator left, as
 * Kafka's coordinator does on load: a PrepareCommit/PrepareAbort
 * transaction gets its markers (rolled forward), an Ongoing one has its
 * partitions take its batches again (it is aborted if it times out). */
static void load_finish(struct txn_coord *tc, int32_t p)
{
	int64_t now = ctl_now_ms(tc->ctl);

	for (uint32_t i = 0; i < tc->txns.cap; i++) {
		struct txn *t = tc->txns.v[i];

		if (!t || t->busy || txn_state_partition(tc, t->id) != p)
			continue;
		if (t->state == TS_PREPARE_COMMIT || t->state == TS_PREPARE_ABORT) {
			/* decided, markers perhaps not all written: write them */
			t->commit = t->state == TS_PREPARE_COMMIT;
			t->busy = 1;
			for (int j = 0; j < t->ntp; j++)
				t->tp[j].marked = 0;
			txn_send_markers(tc, t);
		} else if (t->state == TS_ONGOING) {
			/* the producer may go on: its partitions take its
			 * batches again; the timeout counts from now */
			t->start_mono = now;
			t->begin_ns = 0;
			t->busy = 1;
			t->nregistered = 0;
			if (tc->replays)
				tc->registering++;   /* start-up waits for it */
			txn_register_new(tc, t);
		}
	}
}

static void replay_end(void *self, void *cookie)
{
	struct txn_coord *tc = ctl_txns(self);
	int32_t p = coord_cookie_part(cookie);

	if (coord_load_done(&tc->load, p, coord_cookie_gen(cookie))) {
		tc->st.partitions_loaded++;
		load_finish(tc, p);
	} else if (coord_load_err(&tc->load, p) == KERR_NOT_COORDINATOR) {
		unload_partition(tc, p);   /* overtaken: what it read goes */
	}
	if (tc->replays && --tc->replays == 0 && --tc->registering == 0 && tc->replay_done)
		tc->replay_done(tc->ctl);
}

static void load_partition(struct txn_coord *tc, const struct md_topic *t, int32_t idx, uint32_t gen,
			   int64_t to)
{
	struct part_proxy px;

	/* open here: its callers looked (ctl_part_open_on) */
	part_proxy_read(ctl_part_proxy(tc->ctl, &px), ctl_part_open_on(tc->ctl, t->id, idx), part_addr_of(t->id, idx), 0, to,
			replay_chunk, replay_end,
			coord_load_cookie(idx, gen));
}

void txn_replay(struct txn_coord *tc, void (*done)(struct ctl *ctl))
{
	const struct md_topic *st = txn_state_topic(tc);
	int32_t self = tc->b->set.node_id;

	tc->replay_done = done;
	/* at start only the partitions alone here (the one-node broker's
	 * way, where serving waits for them); those with replicas load when
	 * this node is their leader (txn_lead) */
	tc->registering = 1;   /* held until every start-up partition is in */
	tc->replays = 1;
	if (st && coord_load_resize(&tc->load, st->nparts) == 0)
		for (int32_t i = 0; i < st->nparts; i++) {
			const struct md_partition *mp = &st->parts[i];
			uint32_t gen;

			if (ctl_part_open_on(tc->ctl, st->id, i) < 0 || mp->leader != self || mp->nreplicas != 1 ||
			    coord_load_lead(&tc->load, i, 1, &gen) != COORD_LOAD)
				continue;
			tc->replays++;
			load_partition(tc, st, i, gen, INT64_MAX);
		}
	if (--tc->replays == 0 && --tc->registering == 0 && tc->replay_done)
		tc->replay_done(tc->ctl);
}

void txn_lead(struct txn_coord *tc, int32_t idx, int leads)
{
	const struct md_topic *st = txn_state_topic(tc);
	uint32_t gen;

	if (!st || coord_load_resize(&tc->load, st->nparts) < 0 || idx >= st->nparts)
		return;
	if (leads && ctl_part_open_on(tc->ctl, st->id, idx) < 0)
		return;   /* not open here yet: once it is */
	switch (coord_load_lead(&tc->load, idx, leads, &gen)) {
	case COORD_LOAD:
		load_partition(tc, st, idx, gen, PART_READ_LOG_END);
		break;
	case COORD_UNLOAD:
		unload_partition(tc, idx);
		break;
	default:
		break;
	}
}

int32_t txn_partitions_loaded(const struct txn_coord *tc)
{
	return tc->load.loaded;
}
