/* control/group_replay.c — reading __consumer_offsets back at start (see
 * group.h, group_replay): each record sets or deletes a committed offset,
 * or holds a transactional one until its marker. @thread ctl. */
#include <stdlib.h>
#include <string.h>

#include "control/ctl.h"
#include "control/cutil.h"
#include "control/group_table.h"
#include "storage/batch.h"
#include "storage/batch_format.h"

/* ---- replay ---------------------------------------------------------------- */

static int rd_str(const uint8_t **p, const uint8_t *end, char **out)
{
	int16_t n;

	if (end - *p < 2)
		return -1;
	n = (int16_t)be16_load(*p);
	*p += 2;
	if (n < 0) {
		*out = NULL;
		return 0;
	}
	if (end - *p < n)
		return -1;
	*out = xcalloc(1, (size_t)n + 1);
	memcpy(*out, *p, (size_t)n);
	*p += n;
	return 0;
}

/* One record of __consumer_offsets, in Kafka's formats. */
static void replay_record(struct group_coord *gc, const struct record_view *rv, int64_t txn_pid)
{
	const uint8_t *k = rv->key, *kend = rv->key + (rv->key_len > 0 ? rv->key_len : 0);
	char *group = NULL, *topic = NULL, *meta = NULL;
	int16_t kver;
	int32_t part;
	struct group *g;

	if (!k || kend - k < 2)
		return;
	kver = (int16_t)be16_load(k);
	k += 2;
	if (kver > 1)
		return;   /* group metadata (version 2): membership is not kept across restarts */
	if (rd_str(&k, kend, &group) < 0 || !group || rd_str(&k, kend, &topic) < 0 || !topic || kend - k < 4)
		goto out;
	part = (int32_t)be32_load(k);
	g = group_find(gc, group);
	if (!rv->value || rv->value_len < 0) {
		if (g)
			group_offset_del(g, topic, part);
		goto out;
	}
	{
		const uint8_t *v = rv->value, *vend = rv->value + rv->value_len;
		int16_t vver;
		int64_t off, ts = 0;
		int32_t epoch = -1;

		if (vend - v < 10)
			goto out;
		vver = (int16_t)be16_load(v);
		v += 2;
		off = (int64_t)be64_load(v);
		v += 8;
		if (vver >= 3) {
			if (vend - v < 4)
				goto out;
			epoch = (int32_t)be32_load(v);
			v += 4;
		}
		if (rd_str(&v, vend, &meta) < 0 || vend - v < 8)
			goto out;
		ts = (int64_t)be64_load(v);
		if (!g)
			g = group_new(gc, group);
		if (txn_pid >= 0) {
			struct gentry e = { .topic = topic, .part = part, .offset = off, .epoch = epoch, .meta = meta,
					    .ts = ts };

			group_txn_pending_set(g, txn_pid, &e);   /* takes topic and meta */
			topic = meta = NULL;
		} else {
			group_offset_set(g, topic, part, off, epoch, meta, ts);
		}
		gc->st.replayed_records++;
	}
out:
	free(group);
	free(topic);
	free(meta);
}

/* On the control thread: a chunk of whole batches of offsets partition
 * `part` read back. A transaction's offsets wait for its marker. */
static void replay_chunk(struct ctl *ctl, const uint8_t *buf, uint32_t len, int32_t part)
{
	struct group_coord *gc = ctl_groups(ctl);
	uint32_t at = 0;

	while (at + BATCH_LOG_OVERHEAD <= len) {
		const uint8_t *b = buf + at;
		uint32_t size = batch_size(b);
		uint16_t attrs;
		struct record_iter it;
		struct record_view rv;

		if (size > len - at || size < BATCH_HEADER_SIZE)
			break;
		attrs = batch_attributes(b);
		if (!(attrs & BATCH_ATTR_CODEC_MASK)) {
			record_iter_init(&it, b + BATCH_HEADER_SIZE, size - BATCH_HEADER_SIZE, batch_records_count(b));
			if (attrs & BATCH_ATTR_CONTROL) {
				if (record_iter_next(&it, &rv) == 1 && rv.key && rv.key_len >= 4)
					group_txn_end(gc, part, batch_producer_id(b), be16_load(rv.key + 2) == 1);
			} else {
				int64_t pid = attrs & BATCH_ATTR_TRANSACTIONAL ? batch_producer_id(b) : -1;

				while (record_iter_next(&it, &rv) == 1)
					replay_record(gc, &rv, pid);
			}
		}
		at += size;
	}
}

static void replay_end(struct ctl *ctl)
{
	struct group_coord *gc = ctl_groups(ctl);

	if (gc->replay_done)
		gc->replay_done(ctl);
}

int group_replay(struct group_coord *gc, void (*done)(struct ctl *ctl))
{
	gc->replay_done = done;
	return ctl_read_topic(gc->ctl, gc->otopic, replay_chunk, replay_end);
}

