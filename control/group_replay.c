/* control/group_replay.c — reading __consumer_offsets back (see group.h,
 * group_replay and group_lead): each record sets or deletes a committed
 * offset, or holds a transactional one until its marker; and the groups of
 * a partition this node stopped leading dropped. Partition by partition,
 * under the generations of control/coord_load.h. @thread ctl. */
#include <stdlib.h>
#include <string.h>

#include "control/ctl_homes.h"
#include "control/ctl.h"
#include "control/cutil.h"
#include "control/group_table.h"
#include "dataplane/part_proxy.h"
#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/controls.h"

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
		} else if (SLUICE_CONTROL_OFF(replay_first_wins) && group_offset_find(g, topic, part)) {
			/* control: a key's later commits ignored, the first kept */
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
 * `part` read back. A transaction's offsets wait for its marker. A chunk
 * of a load a leadership change overtook is dropped. */
static void replay_chunk(void *self, void *cookie, const uint8_t *buf, uint32_t len, int32_t part)
{
	struct group_coord *gc = ctl_groups(self);
	uint32_t at = 0;

	if (!coord_load_current(&gc->load, coord_cookie_part(cookie), coord_cookie_gen(cookie)))
		return;
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

/* The groups of offsets partition p, dropped (not led here any more, or a
 * load overtaken): waiting JoinGroup/SyncGroup calls are answered with
 * NOT_COORDINATOR (the clients find the new coordinator), the groups leave
 * the table (freed once no write is in flight). */
static void unload_partition(struct group_coord *gc, int32_t p)
{
	struct group **drop = xcalloc(gc->groups.n + 1, sizeof(*drop));
	uint32_t n = 0;

	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];

		if (g && group_offsets_partition(gc, g->id) == p)
			drop[n++] = g;
	}
	for (uint32_t i = 0; i < n; i++) {
		group_answer_waiting(gc, drop[i], KERR_NOT_COORDINATOR);
		group_remove(gc, drop[i]);
	}
	gc->st.groups_unloaded += n;
	free(drop);
}

static void replay_end(void *self, void *cookie)
{
	struct group_coord *gc = ctl_groups(self);
	int32_t p = coord_cookie_part(cookie);
	int startup = gc->replays > 0;

	if (!coord_load_done(&gc->load, p, coord_cookie_gen(cookie))) {
		/* overtaken: what it read goes unless a newer load has the
		 * partition (its own chunks come after this end) */
		if (coord_load_err(&gc->load, p) == KERR_NOT_COORDINATOR)
			unload_partition(gc, p);
	} else {
		gc->st.partitions_loaded++;
	}
	if (startup && --gc->replays == 0 && gc->replay_done)
		gc->replay_done(gc->ctl);
}

/* Start reading partition idx back (up to its high watermark at start-up,
 * to its log end when this node has just been elected its leader). */
static void load_partition(struct group_coord *gc, const struct md_topic *t, int32_t idx, uint32_t gen,
			   int64_t to)
{
	struct part_proxy px;

	/* open here: its callers looked (ctl_part_open_on) */
	part_proxy_read(ctl_part_proxy(gc->ctl, &px), ctl_part_open_on(gc->ctl, t->id, idx), part_addr_of(t->id, idx), 0, to,
			replay_chunk, replay_end,
			coord_load_cookie(idx, gen));
}

int group_replay(struct group_coord *gc, void (*done)(struct ctl *ctl))
{
	const struct md_topic *t = group_offsets_topic(gc);
	int32_t self = gc->b->set.node_id;
	int n = 0;

	gc->replay_done = done;
	if (!t || coord_load_resize(&gc->load, t->nparts) < 0)
		return 0;
	/* at start only the partitions alone here (the one-node broker's
	 * way, where serving waits for them); those with replicas load when
	 * this node is their leader (group_lead) */
	gc->replays = 1;
	for (int32_t i = 0; i < t->nparts; i++) {
		const struct md_partition *mp = &t->parts[i];
		uint32_t gen;

		if (ctl_part_open_on(gc->ctl, t->id, i) < 0 || mp->leader != self || mp->nreplicas != 1 ||
		    coord_load_lead(&gc->load, i, 1, &gen) != COORD_LOAD)
			continue;
		gc->replays++;
		n++;
		load_partition(gc, t, i, gen, INT64_MAX);
	}
	gc->replays--;
	return n;
}

void group_lead(struct group_coord *gc, int32_t idx, int leads)
{
	const struct md_topic *t = group_offsets_topic(gc);
	uint32_t gen;

	if (!t || coord_load_resize(&gc->load, t->nparts) < 0 || idx >= t->nparts)
		return;
	if (leads && ctl_part_open_on(gc->ctl, t->id, idx) < 0)
		return;   /* not open here yet: once it is */
	switch (coord_load_lead(&gc->load, idx, leads, &gen)) {
	case COORD_LOAD:
		load_partition(gc, t, idx, gen, PART_READ_LOG_END);
		break;
	case COORD_UNLOAD:
		unload_partition(gc, idx);
		break;
	default:
		break;
	}
}
