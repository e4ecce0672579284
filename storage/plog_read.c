/* storage/plog_read.c — reads by offset (tail or O_DIRECT disk reads) and
 * lookups by timestamp. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/batch.h"
#include "storage/controls.h"
#include "storage/plog.h"
#include "storage/plog_internal.h"

static struct segment *segment_for_offset(struct plog *pl, int64_t offset)
{
	struct segment *s = pl->seg_tail;

	while (s && s->base_offset > offset)
		s = s->prev;
	return s;
}

/* From `p` (a batch boundary) pick whole batches for the read: skip those
 * before rd->offset, keep those below max_offset within max_bytes (the
 * first one always). Returns bytes chosen; *skip is where they start. */
static uint32_t pick_batches(const struct plog_read *rd, const uint8_t *p, size_t avail,
			     uint32_t *skip, int *incomplete, uint32_t *need)
{
	size_t at = 0, start = 0;
	uint32_t bytes = 0;
	int started = 0;

	*incomplete = 0;
	while (at + BATCH_LOG_OVERHEAD + 5 <= avail) {
		const uint8_t *b = p + at;
		uint32_t size;

		if (batch_length(b) < BATCH_HEADER_SIZE - BATCH_LOG_OVERHEAD)
			break;
		size = batch_size(b);
		if (at + size > avail) {
			if (!started && batch_last_offset(b) >= rd->offset &&
			    batch_base_offset(b) < rd->max_offset &&
			    !(SLUICE_CONTROL_OFF(next_batch) && batch_base_offset(b) < rd->offset)) {
				*incomplete = 1;
				*need = (uint32_t)(at + size);
				start = at;
			}
			break;
		}
		if (!started) {
			if (batch_last_offset(b) < rd->offset ||
			    (SLUICE_CONTROL_OFF(next_batch) && batch_base_offset(b) < rd->offset)) {
				at += size;
				continue;
			}
			started = 1;
			start = at;
		}
		if (batch_last_offset(b) >= rd->max_offset)
			break;
		if (bytes && bytes + size > rd->max_bytes)
			break;
		bytes += size;
		at += size;
		if (bytes >= rd->max_bytes)
			break;
	}
	*skip = (uint32_t)start;
	return bytes;
}

static int read_from_tail(struct plog *pl, struct plog_read *rd)
{
	struct tail_chunk *c;

	for (c = pl->chunk_tail; c; c = c->prev)
		if (c->first_offset <= rd->offset && rd->offset < c->end_offset &&
		    c->data_start < c->len)
			break;
	if (!c)
		return 0;
	{
		struct segment *seg = c->seg;
		uint64_t pos = seg_index_lookup(&seg->ix, (uint32_t)(rd->offset - seg->base_offset));
		uint64_t lo = c->file_base + c->data_start;
		uint32_t skip, need;
		int incomplete;

		if (pos < lo || pos >= c->file_base + c->len)
			pos = lo;
		rd->bytes = pick_batches(rd, c->mem + (pos - c->file_base),
					 c->file_base + c->len - pos, &skip, &incomplete, &need);
		if (!rd->bytes)
			return 0;
		rd->data = c->mem + (pos - c->file_base) + skip;
		rd->chunk = c;
		rd->tail = &pl->st->tail;
		rd->from_tail = 1;
		tail_chunk_ref(&pl->st->tail, c);
		store_stat_add(&pl->st->tail.hits, 1);
		return 1;
	}
}

static void plog_read_done(struct store_call *call, int res);

/* A disk read in flight holds its segment (retention and the cleaner's
 * swap wait for seg->reads) and its log (plog_free waits for pl->reads). */
static int submit_disk_read(struct plog *pl, struct plog_read *rd)
{
	struct io_uring_sqe *sqe = store_sqe(pl->st);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_read(sqe, rd->seg->fd, rd->buf, rd->rd_len, rd->rd_pos);
	rd->call.done = plog_read_done;
	rd->seg->reads++;
	pl->reads++;
	store_stat_add(&pl->st->stats.reads, 1);
	store_call_submit(pl->st, sqe, &rd->call);
	return 0;
}

int plog_read(struct plog *pl, struct plog_read *rd)
{
	struct segment *seg;
	uint64_t pos, end;

	rd->pl = pl;
	rd->data = NULL;
	rd->bytes = 0;
	rd->err = 0;
	rd->chunk = NULL;
	rd->from_tail = 0;
	rd->retried = 0;
	if (pl->closed)
		return -ENOENT;        /* closed, freed once its reads are over */
	if (rd->offset < pl->log_start || rd->offset > pl->next_offset)
		return -ERANGE;
	if (rd->max_offset > pl->next_offset)
		rd->max_offset = pl->next_offset;
	if (rd->offset >= rd->max_offset)
		return 1;
	if (read_from_tail(pl, rd))
		return 1;
	store_stat_add(&pl->st->tail.misses, 1);
	seg = segment_for_offset(pl, rd->offset);
	/* Batches past the durable end of a segment are in the tail; a miss
	 * there means the offset is in a later segment or a compaction gap. */
	while (seg && rd->offset >= seg->next_offset)
		seg = seg->next;
	if (!seg)
		return 1;
	pos = seg_index_lookup(&seg->ix, (uint32_t)(rd->offset - seg->base_offset));
	end = seg->flushed;
	if (pos >= end) {
		/* Nothing from this segment: an empty (compacted) segment goes
		 * on to the next one; else the data is not on disk yet and not
		 * in the tail, so there is nothing. */
		if (seg->end == 0 && seg->next) {
			if (rd->offset < seg->next->base_offset)
				rd->offset = seg->next->base_offset;
			return plog_read(pl, rd);
		}
		return 1;
	}
	rd->seg = seg;
	rd->rd_pos = align_down4k(pos);
	rd->skip = (uint32_t)(pos - rd->rd_pos);
	{
		uint64_t want = (uint64_t)rd->skip + rd->max_bytes + 65536;

		if (want > rd->buf_cap)
			want = rd->buf_cap;
		if (rd->rd_pos + want > align_up4k(end))
			want = align_up4k(end) - rd->rd_pos;
		rd->rd_len = (uint32_t)align_down4k(want);
		if (!rd->rd_len)
			return -ENOBUFS;
	}
	return submit_disk_read(pl, rd) < 0 ? -EBUSY : 0;
}

/* The read is over: its completion runs, then the log lets go of it (a
 * log closed meanwhile is freed after its last read). */
static void read_end(struct plog *pl, struct plog_read *rd)
{
	if (rd->done)
		rd->done(rd);
	if (!--pl->reads && pl->closed)
		plog_free(pl);
}

/* A disk read landed. Until read_end the log holds it in pl->reads, also
 * across a read submitted again from here (which holds its own). */
static void plog_read_done(struct store_call *call, int res)
{
	struct plog_read *rd = (struct plog_read *)((char *)call - offsetof(struct plog_read, call));
	struct plog *pl = rd->pl;
	struct segment *seg = rd->seg;
	uint32_t skip, need, avail;
	int incomplete;

	seg->reads--;
	if (pl->closed) {
		/* the log was closed (its partition deleted) while the read was
		 * in flight: nothing is served from it */
		rd->err = -ENOENT;
		rd->bytes = 0;
		goto done;
	}
	if (res < 0) {
		rd->err = res;
		goto done;
	}
	store_stat_add(&pl->st->stats.read_bytes, (uint64_t)res);
	avail = (uint32_t)res;
	if (rd->rd_pos + avail > seg->flushed)
		avail = seg->flushed > rd->rd_pos ? (uint32_t)(seg->flushed - rd->rd_pos) : 0;
	if (avail <= rd->skip) {
		rd->bytes = 0;
		goto done;
	}
	rd->bytes = pick_batches(rd, rd->buf + rd->skip, avail - rd->skip, &skip, &incomplete, &need);
	if (!rd->bytes && incomplete && !rd->retried) {
		/* the first batch is larger than what was read: read it whole */
		uint64_t start = rd->rd_pos + rd->skip + skip;
		uint32_t len = (uint32_t)align_up4k(start - align_down4k(start) + (need - skip));

		if (len > rd->buf_cap) {
			rd->err = -ENOBUFS;
			goto done;
		}
		rd->retried = 1;
		rd->skip = (uint32_t)(start - align_down4k(start));
		rd->rd_pos = align_down4k(start);
		rd->rd_len = len;
		if (submit_disk_read(pl, rd) == 0) {
			pl->reads--;       /* the new read holds the log */
			return;
		}
		rd->err = -EBUSY;
		goto done;
	}
	if (!rd->bytes && !incomplete && rd->rd_pos + (uint64_t)res >= seg->end && seg->next) {
		/* nothing at or after the offset in this segment (a compacted
		 * log has gaps): go on with the next segment */
		int rc;

		if (rd->offset < seg->next->base_offset)
			rd->offset = seg->next->base_offset;
		rc = plog_read(pl, rd);
		if (rc == 0) {
			pl->reads--;       /* the new read holds the log */
			return;
		}
		if (rc < 0)
			rd->err = rc;
		goto done;
	}
	rd->data = rd->buf + rd->skip + skip;
done:
	read_end(pl, rd);
}

void plog_read_release(struct plog_read *rd)
{
	if (rd->chunk) {
		tail_chunk_unref(rd->tail, rd->chunk);   /* not through rd->pl: the log may be gone */
		rd->chunk = NULL;
	}
}

static void sync_done(struct plog_read *rd)
{
	*(int *)rd->arg = 1;
}

int plog_read_sync(struct plog *pl, struct plog_read *rd)
{
	int finished = 0, rc;
	void (*done)(struct plog_read *) = rd->done;
	void *arg = rd->arg;

	rd->done = sync_done;
	rd->arg = &finished;
	rc = plog_read(pl, rd);
	while (rc == 0 && !finished)
		store_poll(pl->st, 1);
	rd->done = done;
	rd->arg = arg;
	if (rc < 0)
		return rc;
	return rd->err ? rd->err : 1;
}

/* ---- by timestamp ----------------------------------------------------- */

/* The first record with timestamp >= ts in the batch, or -1. */
static int64_t record_for_time(const uint8_t *b, int64_t ts, int64_t *rts)
{
	struct record_iter it;
	struct record_view rv;
	int64_t base_ts = batch_base_timestamp(b);

	if ((batch_attributes(b) & BATCH_ATTR_CODEC_MASK) || (batch_attributes(b) & BATCH_ATTR_LOG_APPEND_TIME)) {
		/* compressed or broker-timestamped: the batch's own timestamp */
		*rts = batch_max_timestamp(b);
		return batch_base_offset(b);
	}
	record_iter_init(&it, b + OF_Records, batch_size(b) - OF_Records, batch_records_count(b));
	while (record_iter_next(&it, &rv) == 1)
		if (base_ts + rv.timestamp_delta >= ts) {
			*rts = base_ts + rv.timestamp_delta;
			return batch_base_offset(b) + rv.offset_delta;
		}
	return -1;
}

/* The offset to start a segment's walk from: the last indexed batch at or
 * before the time index's position for ts (every batch before that
 * position has max timestamp < ts). */
static int64_t time_start_offset(const struct segment *seg, int64_t ts)
{
	uint32_t pos = seg_index_lookup_time(&seg->ix, ts), lo = 0, hi = seg->ix.n_off;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (seg->ix.off[mid].position <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return seg->base_offset + (lo ? seg->ix.off[lo - 1].rel_offset : 0);
}

/* Place q->at in a segment that can hold ts: the one it is in, or on entering
 * a new segment the first from there whose max timestamp reaches ts, from
 * its time index on. 0 if no segment is left. */
static int time_seek(struct plog *pl, struct plog_time *q)
{
	struct segment *seg;

	if (q->at < pl->log_start)
		q->at = pl->log_start;
	if (q->at >= pl->next_offset)
		return 0;
	seg = segment_for_offset(pl, q->at);
	if (!seg)
		seg = pl->seg_head;
	if (seg && seg->base_offset == q->seg_base)
		return 1;
	while (seg && (seg->max_timestamp == INT64_MIN || seg->max_timestamp < q->ts))
		seg = seg->next;
	if (!seg)
		return 0;
	q->seg_base = seg->base_offset;
	if (seg->base_offset > q->at)
		q->at = seg->base_offset;
	{
		int64_t from = time_start_offset(seg, q->ts);

		if (from > q->at)
			q->at = from;
	}
	if (q->at < pl->log_start)
		q->at = pl->log_start;
	return q->at < pl->next_offset;
}

/* Look through the batches a read returned. 1: the walk ended (q->err);
 * 0: go on from q->at. */
static int time_scan(struct plog *pl, struct plog_time *q)
{
	struct plog_read *rd = &q->rd;
	uint32_t at = 0;

	if (rd->err) {
		q->err = rd->err;
		plog_read_release(rd);
		return 1;
	}
	if (!rd->bytes) {
		/* nothing readable from here in this segment: the next one */
		struct segment *seg = segment_for_offset(pl, q->at);

		plog_read_release(rd);
		if (!seg || !seg->next) {
			q->err = -ENOENT;
			return 1;
		}
		q->at = seg->next->base_offset;
		return 0;
	}
	while (at + BATCH_HEADER_SIZE <= rd->bytes) {
		const uint8_t *b = rd->data + at;
		uint32_t size = batch_size(b);

		if (size > rd->bytes - at)
			break;
		if (batch_max_timestamp(b) >= q->ts) {
			int64_t o = record_for_time(b, q->ts, &q->timestamp);

			if (o >= 0) {
				q->offset = o < pl->log_start ? pl->log_start : o;
				q->err = 0;
				plog_read_release(rd);
				return 1;
			}
		}
		if (batch_last_offset(b) + 1 > q->at)
			q->at = batch_last_offset(b) + 1;
		at += size;
	}
	plog_read_release(rd);
	return 0;
}

static void time_read_done(struct plog_read *rd);

/* Read on until a read goes to the disk (0) or the walk ends (1). */
static int time_walk(struct plog *pl, struct plog_time *q)
{
	for (;;) {
		int rc;

		if (!time_seek(pl, q)) {
			q->err = -ENOENT;
			return 1;
		}
		memset(&q->rd, 0, sizeof(q->rd));
		q->rd.offset = q->at;
		q->rd.max_offset = pl->next_offset;
		q->rd.max_bytes = q->buf_cap > (128u << 10) ? q->buf_cap / 2 : 65536;
		q->rd.buf = q->buf;
		q->rd.buf_cap = q->buf_cap;
		q->rd.done = time_read_done;
		q->rd.arg = q;
		rc = plog_read(pl, &q->rd);
		if (rc == 0)
			return 0;
		if (rc < 0) {
			q->err = rc;
			return 1;
		}
		if (time_scan(pl, q))
			return 1;
	}
}

static void time_read_done(struct plog_read *rd)
{
	struct plog_time *q = rd->arg;
	struct plog *pl = q->pl;

	if (time_scan(pl, q) || time_walk(pl, q))
		q->done(q);
}

int plog_find_time(struct plog *pl, struct plog_time *q)
{
	q->pl = pl;
	q->offset = -1;
	q->timestamp = -1;
	q->err = 0;
	q->at = pl->log_start;
	q->seg_base = INT64_MIN;
	return time_walk(pl, q);
}

static void time_sync_done(struct plog_time *q)
{
	*(int *)q->arg = 1;
}

int plog_offset_for_time(struct plog *pl, int64_t ts, int64_t *offset, int64_t *timestamp)
{
	struct plog_time q = { .ts = ts, .done = time_sync_done };
	int finished = 0;
	size_t cap = align_up4k(pl->cfg.max_batch * 2ull + 65536);

	q.arg = &finished;
	if (posix_memalign((void **)&q.buf, 4096, cap))
		return -ENOMEM;
	q.buf_cap = (uint32_t)cap;
	if (plog_find_time(pl, &q) == 0)
		while (!finished)
			store_poll(pl->st, 1);
	free(q.buf);
	if (q.err)
		return q.err;
	*offset = q.offset;
	*timestamp = q.timestamp;
	return 0;
}

int64_t plog_offset_near_end(const struct plog *pl, uint64_t window)
{
	const struct segment *seg = pl->seg_tail;
	uint64_t from;
	int64_t off;

	if (!seg)
		return pl->next_offset;
	from = seg->end > window ? seg->end - window : 0;
	off = seg->base_offset;
	/* the last index entry at or before `from`: reading from there
	 * covers at least the window */
	for (uint32_t i = 0; i < seg->ix.n_off && seg->ix.off[i].position <= from; i++)
		off = seg->base_offset + seg->ix.off[i].rel_offset;
	return off < pl->log_start ? pl->log_start : off;
}
