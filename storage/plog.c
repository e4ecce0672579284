/* storage/plog.c — partition log: its segment list, append, group-commit
 * writes (a flusher of the store), tail chunks (an owner of the pool),
 * free. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/batch.h"
#include "storage/plog.h"
#include "storage/plog_internal.h"
#include "storage/slog.h"

void plog_config_defaults(struct plog_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->segment_bytes = 1ull << 30;
	cfg->index_interval = 4096;
	cfg->max_batch = 1048588;
	cfg->initial_extent = 64 * 1024;
	cfg->retention_ms = 7 * 24 * 3600 * 1000ll;
	cfg->retention_bytes = -1;
	cfg->compact = 0;
	cfg->delete_retention_ms = 24 * 3600 * 1000ll;
	cfg->durability = PLOG_DUR_WRITE;
	cfg->compression = -1;
}

/* ---- preallocation ---------------------------------------------------- */

static void segment_falloc_done(struct store_call *call, int res);

static void segment_maybe_falloc(struct plog *pl, struct segment *seg)
{
	struct store *st = pl->st;
	struct io_uring_sqe *sqe;
	uint64_t len;

	if (seg->falloc_inflight || seg->sealed || seg->alloc >= pl->cfg.segment_bytes)
		return;
	/* the next extent is asked for once less than half of the last one
	 * is left ahead of the writer: a fast partition's fallocate runs while
	 * it still has room (extents double with the rate, below), and a slow
	 * one's first write does not already double what it holds (10,000
	 * partitions written once each held 128 KiB, not 64, and their second
	 * fallocates ran beside their writes, which then found the inode
	 * locked and went to an io_uring worker) */
	if (seg->alloc - (seg->end < seg->alloc ? seg->end : seg->alloc) >= seg->extent / 2)
		return;
	/* extents grow with the write rate: doubling while the previous one
	 * was used up within a second, shrinking back when the partition idles */
	if (seg->last_falloc_ns && st->now_ns - seg->last_falloc_ns < 1000000000ull)
		seg->extent *= 2;
	else if (seg->last_falloc_ns && seg->extent > pl->cfg.initial_extent)
		seg->extent /= 2;
	if (seg->extent > pl->cfg.segment_bytes)
		seg->extent = pl->cfg.segment_bytes;
	len = seg->extent;
	if (seg->alloc + len > pl->cfg.segment_bytes)
		len = pl->cfg.segment_bytes - seg->alloc;
	if (!len || !(sqe = store_sqe(st)))
		return;
	io_uring_prep_fallocate(sqe, seg->fd, 0, seg->alloc, len);
	seg->falloc_call.done = segment_falloc_done;
	store_call_prep(st, sqe, &seg->falloc_call);
	seg->falloc_inflight = 1;
	seg->last_falloc_ns = st->now_ns;
	seg->extent = len;
	st->stats.fallocs++;
}

static void segment_falloc_done(struct store_call *call, int res)
{
	struct segment *seg = (struct segment *)((char *)call - offsetof(struct segment, falloc_call));
	struct plog *pl = seg->owner;

	seg->falloc_inflight = 0;
	if (res < 0)
		seg->st->stats.falloc_errors++;
	if (seg->dead) {
		/* taken off its log (retention, DeleteRecords, close) while the
		 * fallocate ran: the log may be gone, the segment goes now */
		segment_free(seg);
		return;
	}
	if (res < 0) {
		/* Not fatal: writes still extend the file. ENOSPC shows up on
		 * the write itself. */
		seg->extent = 0;   /* stop trying on this segment */
		seg->alloc = pl->cfg.segment_bytes;
		return;
	}
	seg->alloc += seg->extent;
}

/* Prepare the next segment's file while the current one fills, so a roll
 * never waits for the filesystem. */
static void plog_maybe_prepare(struct plog *pl)
{
	struct segment *seg = pl->seg_tail;
	struct io_uring_sqe *sqe;
	int fd;

	if (pl->next_fd >= 0 || pl->prep_inflight || pl->err ||
	    seg->end < pl->cfg.segment_bytes / 2)
		return;
	fd = openat(plog_dirfd(pl), PLOG_NEXT_NAME, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	plog_dir_release(pl);
	pl->next_fd = fd;
	pl->next_alloc = 0;
	if (!(sqe = store_sqe(pl->st)))
		return;
	io_uring_prep_fallocate(sqe, fd, 0, 0, pl->cfg.initial_extent);
	store_call_prep(pl->st, sqe, &pl->prep_call);
	pl->prep_inflight = 1;
}

static void plog_prep_done(struct store_call *call, int res)
{
	struct plog *pl = (struct plog *)((char *)call - offsetof(struct plog, prep_call));

	pl->prep_inflight = 0;
	if (res >= 0)
		pl->next_alloc = pl->cfg.initial_extent;
	if (pl->closed)          /* closed meanwhile */
		plog_free(pl);
}

/* ---- segments --------------------------------------------------------- */

int plog_segment_add(struct plog *pl, int64_t base, int fd, uint64_t alloc, int prepared, struct segment **out)
{
	struct segment *seg;
	int rc = segment_create(plog_dirfd(pl), base, fd, prepared ? PLOG_NEXT_NAME : NULL, alloc,
				pl->cfg.initial_extent, &seg);

	if (rc < 0)
		return rc;
	seg->owner = pl;
	seg->st = pl->st;
	seg->prev = pl->seg_tail;
	if (pl->seg_tail)
		pl->seg_tail->next = seg;
	else
		pl->seg_head = seg;
	pl->seg_tail = seg;
	if (!seg->alloc)
		segment_maybe_falloc(pl, seg);
	*out = seg;
	return 0;
}

void plog_segment_unlink(struct plog *pl, struct segment *seg)
{
	if (seg->prev)
		seg->prev->next = seg->next;
	else
		pl->seg_head = seg->next;
	if (seg->next)
		seg->next->prev = seg->prev;
	else
		pl->seg_tail = seg->prev;
	seg->next = seg->prev = NULL;
}

/* ---- tail chunks ------------------------------------------------------ */

static void chunk_link(struct plog *pl, struct tail_chunk *c)
{
	c->owner = &pl->chunk_owner;
	c->prev = pl->chunk_tail;
	c->next = NULL;
	if (pl->chunk_tail)
		pl->chunk_tail->next = c;
	else
		pl->chunk_head = c;
	pl->chunk_tail = c;
}

static void chunk_unlink(struct plog *pl, struct tail_chunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		pl->chunk_head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		pl->chunk_tail = c->prev;
	c->next = c->prev = NULL;
}

/* A chunk is clean when all its bytes are on disk. The last chunk of the
 * log also needs the partition quiet (no write in flight: its partial block
 * may be in one); it then stays clean until the next append takes it off
 * the FIFO again. Letting the last chunk be evicted is what keeps idle
 * partitions from holding the budget: each kept its last chunk (up to
 * 16 MiB after a burst of large batches) forever, and once those filled
 * the pool no partition could append at all (-ENOBUFS on every produce).
 * The next append to an evicted partition reads its partial block back
 * from the file, on the ring (plog_chunk_start). */
static int chunk_clean(const struct plog *pl, const struct tail_chunk *c)
{
	if (c->seg->flushed < c->file_base + c->len)
		return 0;
	return c != pl->chunk_tail || (!pl->inflight && !pl->err);
}

static struct plog *chunk_owner_log(struct tail_owner *o)
{
	return (struct plog *)((char *)o - offsetof(struct plog, chunk_owner));
}

/* The pool evicts c: it leaves the log's list. */
static void chunk_evict(struct tail_owner *o, struct tail_chunk *c)
{
	chunk_unlink(chunk_owner_log(o), c);
}

/* The last read reference of c went: evictable once clean. */
static void chunk_released(struct tail_owner *o, struct tail_pool *tp, struct tail_chunk *c)
{
	if (chunk_clean(chunk_owner_log(o), c))
		tail_fifo_add(tp, c);
}

void plog_chunks_reclaim(struct plog *pl)
{
	for (struct tail_chunk *c = pl->chunk_head; c; c = c->next)
		if (!c->on_fifo && !c->refs && chunk_clean(pl, c))
			tail_fifo_add(&pl->st->tail, c);
}

/* Drop every chunk of the log (close, truncate). Referenced chunks are
 * detached and freed by the last release. */
void plog_chunks_drop(struct plog *pl, struct segment *only)
{
	struct tail_chunk *c = pl->chunk_head, *n;

	for (; c; c = n) {
		n = c->next;
		if (only && c->seg != only)
			continue;
		tail_fifo_del(&pl->st->tail, c);
		chunk_unlink(pl, c);
		if (c->refs) {
			c->owner = NULL;
			c->seg = NULL;
		} else {
			tail_chunk_put(&pl->st->tail, c);
		}
	}
}

static void plog_reload_done(struct store_call *call, int res);

/* Bytes of c appends may fill: all of it, but the last page while the
 * partial block is read back into it. */
static inline uint32_t chunk_room(const struct plog *pl, const struct tail_chunk *c)
{
	return pl->reload_room == c ? c->cap - 4096 : c->cap;
}

/* Read the active segment's partial block [base, base + head) back for c:
 * the chunk that held it was evicted, which only happens once it is on
 * disk and no write of the log is in flight. The read goes on the ring
 * into a page of its own: the last 4 KiB of c, kept free of appends until
 * the block is back, or a page from the pool when c has no room for it.
 * Its completion copies the block into every chunk that starts with it.
 * Meanwhile appends go on after the block, and the log submits no write.
 * 0, or -errno with nothing started. */
static int reload_start(struct plog *pl, struct segment *seg, struct tail_chunk *c, uint64_t base, uint32_t head,
			uint32_t need)
{
	struct io_uring_sqe *sqe;
	uint8_t *page;

	if (seg->flushed < seg->end || pl->reload_inflight)
		return -EIO;           /* cannot be: an evicted chunk was on disk, and the log idle */
	if (c->cap >= (uint64_t)head + need + 4096) {
		page = c->mem + c->cap - 4096;
		pl->reload_room = c;
	} else {
		pl->reload_page = tail_chunk_get(&pl->st->tail, TAIL_CHUNK_MIN_SHIFT, 4096);
		if (!pl->reload_page)
			return -ENOBUFS;
		page = pl->reload_page->mem;
	}
	if (!(sqe = store_sqe(pl->st))) {
		if (pl->reload_page)
			tail_chunk_put(&pl->st->tail, pl->reload_page);
		pl->reload_page = NULL;
		pl->reload_room = NULL;
		return -ENOBUFS;
	}
	io_uring_prep_read(sqe, seg->fd, page, 4096, base);
	pl->reload_seg = seg;
	pl->reload_base = base;
	pl->reload_head = head;
	pl->reload_inflight = 1;
	store_stat_add(&pl->st->tail.reloads, 1);
	store_call_submit(pl->st, sqe, &pl->reload_call);
	return 0;
}

/* Start a new chunk for the active segment at its logical end. The bytes of
 * the partial block before the end are copied in (or read back, when the
 * chunk that held them was evicted), so every chunk maps a 4 KiB-aligned
 * file range and is written with O_DIRECT as it is. */
int plog_chunk_start(struct plog *pl, uint32_t need)
{
	struct segment *seg = pl->seg_tail;
	struct tail_chunk *prev = pl->chunk_tail, *c;
	uint64_t base = align_down4k(seg->end);
	uint32_t head = (uint32_t)(seg->end - base);
	unsigned shift = pl->chunk_shift;
	/* the previous chunk holds the partial block, unless it was evicted */
	int copy = head && prev && prev->seg == seg && prev->file_base + prev->len == seg->end;
	/* evicted: the block is read back into the chunk's last page */
	size_t page = head && !copy && (uint64_t)head + need + 4096 <= (1u << TAIL_CHUNK_MAX_SHIFT) ? 4096 : 0;
	int rc;

	/* grow the chunk size while the previous one filled within a second */
	if (prev && prev->seg == seg && pl->st->now_ns - prev->born_ns < 1000000000ull)
		shift = prev->shift + 1;
	else if (prev && prev->seg == seg && shift > TAIL_CHUNK_MIN_SHIFT)
		shift--;
	if (shift > TAIL_CHUNK_MAX_SHIFT)
		shift = TAIL_CHUNK_MAX_SHIFT;
	/* no single partition takes more than a quarter of the shard's budget */
	while (shift > TAIL_CHUNK_MIN_SHIFT && ((size_t)4 << shift) > pl->st->tail.budget)
		shift--;
	c = tail_chunk_get(&pl->st->tail, shift, (size_t)head + need + page);
	if (!c && shift > TAIL_CHUNK_MIN_SHIFT)   /* the smallest chunk that fits */
		c = tail_chunk_get(&pl->st->tail, TAIL_CHUNK_MIN_SHIFT, (size_t)head + need + page);
	if (!c)
		return -ENOBUFS;
	pl->chunk_shift = c->shift;
	c->seg = seg;
	c->file_base = base;
	c->len = head;
	c->data_start = head;
	c->first_offset = c->end_offset = pl->next_offset;
	c->born_ns = pl->st->now_ns;
	/* tail_chunk_get may have evicted prev itself (clean, on the FIFO):
	 * eviction unlinks it, so it is still ours iff it is still the last */
	if (pl->chunk_tail != prev)
		prev = NULL;
	if (copy && prev) {
		/* (while prev's own block is being read back, the bytes before
		 * its data are not there yet: the read's completion fills both) */
		memcpy(c->mem, prev->mem + (base - prev->file_base), head);
	} else if (head && (rc = reload_start(pl, seg, c, base, head, need)) < 0) {
		tail_chunk_put(&pl->st->tail, c);
		return rc;
	}
	chunk_link(pl, c);
	/* the previous chunk stops being the last one: it may become clean */
	if (prev && !prev->refs && chunk_clean(pl, prev))
		tail_fifo_add(&pl->st->tail, prev);
	return 0;
}

/* ---- append ----------------------------------------------------------- */

static int plog_roll(struct plog *pl)
{
	struct segment *old = pl->seg_tail, *seg;
	int fd = pl->next_fd, rc;
	uint64_t alloc = pl->next_alloc;

	if (fd < 0) {
		pl->st->stats.sync_opens++;
		alloc = 0;
	} else if (pl->prep_inflight) {
		/* the file is open, its fallocate still running: take it now
		 * (appends never wait for the filesystem; refusing them here
		 * failed produces once small segments rolled faster than their
		 * successor was prepared). Counted as unallocated: the segment
		 * asks for its own extent as it fills, and the late fallocate
		 * only reserves space early. */
		alloc = 0;
	}
	rc = plog_segment_add(pl, pl->next_offset, fd, alloc, fd >= 0, &seg);
	if (rc < 0)
		return rc;
	pl->next_fd = -1;
	pl->next_alloc = 0;
	old->sealed = 1;
	/* rolled after its last write landed: no completion will seal it */
	if (old->flushed >= old->end && !old->index_saved)
		plog_seal_segment(pl, old);
	plog_dir_release(pl);
	/* the old segment's last chunk may become clean once written */
	return 0;
}

void plog_space_retry(struct plog *pl)
{
	if (pl->nospace && !pl->inflight && !pl->reload_inflight && !plog_failed(pl)) {
		pl->nospace = 0;
		store_mark_dirty(pl->st, &pl->flush);
	}
}

int plog_append_bytes(struct plog *pl, const uint8_t *batch, uint32_t size, int stamp, int64_t *base_offset)
{
	struct segment *seg = pl->seg_tail;
	struct tail_chunk *c = pl->chunk_tail;
	int64_t max_ts = batch_max_timestamp(batch);
	/* a leader's batch lands at the log end; a follower's where the
	 * leader put it (its set was checked to start at or after the end) */
	int64_t base = stamp ? pl->next_offset : batch_base_offset(batch);
	int64_t next = base + batch_last_offset_delta(batch) + 1;
	uint64_t pos;
	uint8_t *dst;
	int rc;

	if (pl->err)
		return -EROFS;
	if (pl->nospace) {
		/* the filesystem was full: once the writes of then retired,
		 * this append (refused still: its client retries) has the
		 * unwritten bytes submitted again; when they land, appends
		 * are taken again, and when they fail, nospace again */
		plog_space_retry(pl);
		return -ENOSPC;
	}
	if (pl->trunc)
		return -EBUSY;
	/* a batch no chunk can hold — beyond the largest chunk, or more than
	 * the shard's whole tail memory (with the partial block before it) —
	 * can never be appended: refused for good, not "retry later" */
	if (size > pl->cfg.segment_bytes || size + 4096ull > (1ull << TAIL_CHUNK_MAX_SHIFT) ||
	    size + 4096ull > pl->st->tail.budget)
		return -EMSGSIZE;
	if (seg->end && seg->end + size > pl->cfg.segment_bytes) {
		if ((rc = plog_roll(pl)) < 0)
			return rc == -EAGAIN ? -ENOBUFS : rc;
		seg = pl->seg_tail;
		c = pl->chunk_tail;
	}
	if (!c || c->seg != seg || c->file_base + c->len != seg->end ||
	    c->len + size > chunk_room(pl, c)) {
		if ((rc = plog_chunk_start(pl, size)) < 0)
			return rc;
		c = pl->chunk_tail;
	}
	/* a quiet partition's last chunk waits on the FIFO (chunk_clean):
	 * it is about to be dirty, so it must not be evicted now */
	tail_fifo_del(&pl->st->tail, c);
	pos = seg->end;
	dst = c->mem + (pos - c->file_base);
	memcpy(dst, batch, size);
	if (stamp) {
		batch_set_base_offset(dst, base);
		batch_set_leader_epoch(dst, pl->leader_epoch);
	}
	*base_offset = base;
	/* the first batch of an epoch, the leader's (stamped) only: a
	 * follower's replica append assigns the epochs its batches carry
	 * (plog_replica.c), never pl->leader_epoch, which may be above them
	 * (the metadata's, set at the open): that would mark the leader's
	 * batches with an epoch the leader never had, and each fetch after
	 * would be answered a divergence at them, cut and fetched again */
	if (__builtin_expect(stamp && pl->leader_epoch != pl->epochs.latest, 0))
		plog_epochs_note(pl, base);

	if (max_ts > seg->max_timestamp)
		seg->max_timestamp = max_ts;
	rc = seg_index_add(&seg->ix, (uint32_t)(base - seg->base_offset), (uint32_t)pos,
			   seg->max_timestamp, pl->cfg.index_interval, 0);
	(void)rc; /* a missing sparse entry only costs a longer scan */
	c->len += size;
	seg->end += size;
	seg->index_saved = 0;   /* an index file on disk is now only a prefix checkpoint */
	pl->next_offset = next;
	seg->next_offset = pl->next_offset;
	c->end_offset = pl->next_offset;
	pl->bytes_appended += size;
	pl->batches_appended++;

	if (pl->cfg.durability == PLOG_DUR_MEMORY) {
		pl->durable_offset = pl->next_offset;
		pl->high_watermark = pl->next_offset;
	}
	segment_maybe_falloc(pl, seg);
	plog_maybe_prepare(pl);
	store_mark_dirty(pl->st, &pl->flush);
	return 0;
}

int plog_append(struct plog *pl, const uint8_t *batch, uint32_t size, int64_t *base_offset)
{
	return plog_append_bytes(pl, batch, size, 1, base_offset);
}

/* ---- group commit writes ---------------------------------------------- */

static inline struct plog_write *wr_at(struct plog *pl, unsigned k)
{
	return &pl->wr[(pl->wr_head + k) % PLOG_MAX_WRITES];
}

/* How far writes have been submitted in seg: flushed, or the end of the
 * newest write of the ring for it. */
static uint64_t seg_submitted(struct plog *pl, const struct segment *seg)
{
	uint64_t v = seg->flushed;

	for (unsigned k = 0; k < pl->inflight; k++) {
		const struct plog_write *w = wr_at(pl, k);

		if (w->seg == seg && w->end > v)
			v = w->end;
	}
	return v;
}

/* 1 if a write still in flight covers the block at file position blk. */
static int block_busy(struct plog *pl, const struct segment *seg, uint64_t blk)
{
	for (unsigned k = 0; k < pl->inflight; k++) {
		const struct plog_write *w = wr_at(pl, k);

		if (!w->done && w->seg == seg && w->pos <= blk && blk < w->pos + w->bytes)
			return 1;
	}
	return 0;
}

/* The oldest segment with bytes not yet submitted, or NULL. Only the last
 * few segments can have unwritten bytes: walk back from the active one. */
static struct segment *seg_unsubmitted(struct plog *pl)
{
	struct segment *s = pl->seg_tail;

	if (!s)
		return NULL;
	while (s->prev && s->prev->flushed < s->prev->end)
		s = s->prev;
	for (; s; s = s->next)
		if (seg_submitted(pl, s) < s->end)
			return s;
	return NULL;
}

static int plog_has_unsubmitted(const struct plog *pl)
{
	return !plog_failed(pl) && !pl->nospace && seg_unsubmitted((struct plog *)pl) != NULL;
}

/* The offset after the last batch that ends at or before position `end`
 * of seg, conservatively from the sparse index (exact at the end). */
static int64_t seg_offset_at(const struct segment *seg, uint64_t end)
{
	const struct seg_index *ix = &seg->ix;
	uint32_t lo = 0, hi = ix->n_off;

	if (end >= seg->end)
		return seg->next_offset;
	while (lo < hi) {          /* the last entry with position <= end */
		uint32_t mid = lo + (hi - lo) / 2;

		if (ix->off[mid].position <= end)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the batch indexed there starts at or before end: all before it are whole */
	return lo ? seg->base_offset + ix->off[lo - 1].rel_offset : seg->base_offset;
}

/* Queue one write of seg's bytes [from, stop) (from block aligned, sub
 * the submitted end it starts from). 1: queued; 0: nothing to write, or
 * no SQE. */
static int plog_queue_range(struct plog *pl, struct segment *seg, uint64_t sub, uint64_t from, uint64_t stop)
{
	struct plog_write *w = wr_at(pl, pl->inflight);
	struct io_uring_sqe *sqe;
	struct tail_chunk *c;
	uint64_t pos;
	int n = 0;

	w->iov = pl->iov + ((w - pl->wr) * PLOG_WRITE_IOV);
	pos = from;
	for (c = pl->chunk_head; c && n < PLOG_WRITE_IOV && pos < stop; c = c->next) {
		uint64_t cs, ce, dend;

		if (c->seg != seg)
			continue;
		cs = c->file_base;
		dend = c->file_base + c->len;
		/* a chunk followed by another of the same segment ends where
		 * the next one (holding a copy of the partial block) begins */
		if (c->next && c->next->seg == seg)
			ce = c->next->file_base;
		else
			ce = align_up4k(dend);
		if (ce <= pos)
			continue;
		if (cs > pos)
			break;          /* a gap: cannot happen, dirty chunks are never evicted */
		if (ce > stop)
			ce = stop;
		if (ce > dend)          /* zero the padding of the last block: "no batch" */
			memset(c->mem + (dend - c->file_base), 0, ce - dend);
		w->iov[n].iov_base = c->mem + (pos - cs);
		w->iov[n].iov_len = ce - pos;
		n++;
		pos = ce;
	}
	if (!n || (pos < seg->end ? pos : seg->end) <= sub)
		return 0;
	sqe = store_sqe(pl->st);
	if (!sqe)
		return 0;
	io_uring_prep_writev2(sqe, seg->fd, w->iov, (unsigned)n, from,
			      pl->cfg.durability == PLOG_DUR_SYNC ? RWF_DSYNC : 0);
	store_call_prep(pl->st, sqe, &w->call);
	w->pl = pl;
	w->seg = seg;
	w->pos = from;
	w->bytes = pos - from;
	w->end = pos < seg->end ? pos : seg->end;
	w->next_offset = seg_offset_at(seg, w->end);
	w->res = 0;
	w->done = 0;
	w->queued_ns = pl->st->now_ns;
	pl->inflight++;
	if (pl->inflight > pl->inflight_max)
		pl->inflight_max = pl->inflight;
	if (pl->inflight > pl->st->stats.max_inflight_writes)
		pl->st->stats.max_inflight_writes = pl->inflight;
	pl->inflight_seg = seg;
	pl->inflight_end = w->end;
	pl->inflight_bytes = w->bytes;
	pl->inflight_next_offset = w->next_offset;
	store_stat_add(&pl->st->stats.writes, 1);
	store_stat_add(&pl->st->stats.write_bytes, w->bytes);
	return 1;
}

/* Prepare the next write of seg from its submitted end (two when it is
 * split, below). Returns the writes queued: 0 if nothing may be written
 * now (ordering hazard, or no SQE). */
static int plog_queue_write(struct plog *pl, struct segment *seg, int first)
{
	uint64_t sub = seg_submitted(pl, seg), from = align_down4k(sub);
	uint64_t whole = align_down4k(seg->end), stop;
	int tail_now;

	/* the block holding `sub` is partial: whoever wrote it last must have
	 * landed before it is written again */
	if ((sub & 4095) && block_busy(pl, seg, from))
		return 0;
	/* The partial last block is written now if it is all that is new
	 * since the last flush (the burst ended), if the segment is sealed (it
	 * will not grow), or if the partition is idle (nothing in flight,
	 * little pending: lowest latency). A hot partition writes whole blocks
	 * only, so its writes never overlap and up to PLOG_MAX_WRITES of them
	 * stream; its partial block follows when the burst ends. */
	tail_now = (whole <= from && first) || seg->sealed ||
		   (pl->inflight == 0 && seg->end - from <= PLOG_HOT_BYTES);
	if (pl->cfg.durability == PLOG_DUR_MEMORY && !seg->sealed && !pl->st->flush_all) {
		/* acknowledged from memory: whole blocks once there is
		 * PLOG_MEMORY_WRITE_BYTES to write; everything once the oldest
		 * byte not written waited PLOG_MEMORY_HOLD_NS */
		if (!pl->held_since_ns)
			pl->held_since_ns = pl->st->now_ns ? pl->st->now_ns : 1;
		tail_now = pl->st->now_ns >= pl->held_since_ns + PLOG_MEMORY_HOLD_NS;
		if (!tail_now && (whole <= from || seg->end - sub < PLOG_MEMORY_WRITE_BYTES)) {
			pl->flush.hold_until = pl->held_since_ns + PLOG_MEMORY_HOLD_NS;
			return 0;
		}
	}
	stop = tail_now ? align_up4k(seg->end) : whole;
	if (tail_now)
		pl->held_since_ns = 0;   /* (cut short at PLOG_WRITE_MAX below: the rest is asked for next) */
	if (stop > from + PLOG_WRITE_MAX)
		stop = from + PLOG_WRITE_MAX;
	/* A write that rewrites the partial block an earlier write left and
	 * goes on past it is split at that block's end. Past it the segment is
	 * preallocated (fallocate: unwritten extents), and a direct write that
	 * covers both a written and an unwritten extent is not a plain
	 * overwrite to ext4: it wants the inode lock exclusively, so io_uring's
	 * non-blocking attempt fails and the write goes to an io-wq worker
	 * thread (a wake-up and a context switch, every write of a partition
	 * that writes its partial block each time: a quiet or idle one). The
	 * block alone, and the rest starting on a block boundary, each go
	 * inline. They retire in ring order like any two writes. */
	if ((sub & 4095) && stop > from + 4096 && pl->inflight + 2 <= PLOG_MAX_WRITES) {
		if (!plog_queue_range(pl, seg, sub, from, from + 4096))
			return 0;
		store_stat_add(&pl->st->stats.split_writes, 1);
		return 1 + plog_queue_range(pl, seg, from + 4096, from + 4096, stop);
	}
	return plog_queue_range(pl, seg, sub, from, stop);
}

/* The log as a flusher of the store: queue its next writes (up to the free
 * ring slots); returns the number of write SQEs prepared. */
static int plog_flush_prepare(struct store_flusher *f)
{
	struct plog *pl = (struct plog *)((char *)f - offsetof(struct plog, flush));
	struct segment *seg;
	int n = 0;

	if (plog_failed(pl) || pl->reload_inflight || pl->nospace)
		return 0;              /* (the block read back marks the log dirty) */
	while (pl->inflight < PLOG_MAX_WRITES && (seg = seg_unsubmitted(pl))) {
		int k = plog_queue_write(pl, seg, n == 0);

		if (!k)
			break;
		n += k;
	}
	return n;
}

/* The log failed: said once, with the file (seg's, or the log's
 * directory) and the error, and nothing more is written. */
static void plog_fail(struct plog *pl, int err, const struct segment *seg)
{
	if (plog_failed(pl))
		return;
	slog(SLOG_ERR, /* style: allow slow path: once per failed log */
		"%s/%s: %s: the log is offline on this node until the broker restarts", pl->dir,
		seg ? seg->name : "", strerror(-err));
	pl->err = err;
	if (pl->on_durable)
		pl->on_durable(pl, pl->durable_offset, err, pl->durable_arg);
}

/* A write found the filesystem full (ENOSPC, EDQUOT, or it wrote less
 * than asked, as a filling filesystem does): not a failure of the log.
 * Nothing more is submitted, and the writes still in flight count for
 * nothing when they retire (a later one landing cannot make bytes after
 * the hole durable); the unwritten bytes stay in the tail and are
 * submitted again, from the last block written, when an append asks
 * (plog_append_bytes). The waiters are told (on_durable with -ENOSPC:
 * their produce is answered KAFKA_STORAGE_ERROR, which clients retry). */
static void plog_nospace(struct plog *pl)
{
	if (pl->nospace)
		return;
	pl->nospace = 1;
	pl->nospace_errors++;
	if (pl->on_durable)
		pl->on_durable(pl, pl->durable_offset, -ENOSPC, pl->durable_arg);
}

void plog_durable_advance(struct plog *pl)
{
	/* A sealed segment's index is written before what it holds, and what
	 * follows, is acknowledged (the blocking seal this replaces ran before
	 * the acknowledgement): a crash after an acknowledgement then finds
	 * every sealed segment below it checkpointed and reads only what
	 * follows. The segments before it are acknowledged meanwhile. */
	int64_t to = pl->written_offset < pl->files.seal_gate ? pl->written_offset : pl->files.seal_gate;

	if (plog_failed(pl) || to <= pl->durable_offset)
		return;
	pl->durable_offset = to;
	if (pl->cfg.durability != PLOG_DUR_MEMORY)
		pl->high_watermark = pl->durable_offset;
	if (pl->on_durable)
		pl->on_durable(pl, pl->durable_offset, 0, pl->durable_arg);
}

/* The write in ring slot w completed with res. */
static void plog_write_slot_done(struct plog_write *w, int res)
{
	struct plog *pl = w->pl;

	w->done = 1;
	w->res = res;
	/* retire in ring order: bytes count as written only when every write
	 * before them has landed too */
	while (pl->inflight && pl->wr[pl->wr_head].done) {
		struct plog_write *h = &pl->wr[pl->wr_head];
		struct segment *seg = h->seg;

		pl->wr_head = (uint8_t)((pl->wr_head + 1) % PLOG_MAX_WRITES);
		pl->inflight--;
		h->seg = NULL;
		if (h->res < 0 || (uint64_t)h->res != h->bytes) {
			int e = h->res < 0 ? h->res : -ENOSPC;   /* short: the filesystem filled */

			store_stat_add(&pl->st->stats.io_errors, 1);
			if ((e == -ENOSPC || e == -EDQUOT) && !pl->nospace_fatal)
				plog_nospace(pl);
			else
				plog_fail(pl, e, seg);
			continue;
		}
		if (plog_failed(pl) || pl->nospace)
			continue;       /* nothing advances after a failed write */
		lathist_add(&pl->st->write_lat, pl->st->now_ns > h->queued_ns ? pl->st->now_ns - h->queued_ns : 0);
		if (h->end > seg->flushed)
			seg->flushed = h->end;
		if (h->next_offset > pl->written_offset)
			pl->written_offset = h->next_offset;
		/* the segment's last write retired: its index is a checkpoint */
		if (seg->sealed && seg->flushed >= seg->end && !seg->index_saved)
			plog_seal_segment(pl, seg);
	}
	plog_durable_advance(pl);
	if (pl->closed) {           /* closed while writes were in flight */
		if (!pl->inflight)
			plog_free(pl);
		return;
	}
	plog_chunks_reclaim(pl);
	if (plog_has_unsubmitted(pl))
		store_mark_dirty(pl->st, &pl->flush);
}

static void plog_write_call_done(struct store_call *call, int res)
{
	plog_write_slot_done((struct plog_write *)((char *)call - offsetof(struct plog_write, call)), res);
}

/* The partial block came back (reload_start): into every chunk that starts
 * with it, then the log's writes may go. A failed read fails the log: the
 * bytes appended after the block cannot be written without it. */
static void plog_reload_done(struct store_call *call, int res)
{
	struct plog *pl = (struct plog *)((char *)call - offsetof(struct plog, reload_call));
	const uint8_t *page = pl->reload_page ? pl->reload_page->mem
					       : pl->reload_room->mem + pl->reload_room->cap - 4096;
	const struct segment *seg = pl->reload_seg;

	pl->reload_inflight = 0;
	if (res >= (int)pl->reload_head)
		for (struct tail_chunk *c = pl->chunk_head; c; c = c->next)
			if (c->seg == pl->reload_seg && c->file_base == pl->reload_base)
				memcpy(c->mem, page, pl->reload_head);
	if (pl->reload_page)
		tail_chunk_put(&pl->st->tail, pl->reload_page);
	pl->reload_page = NULL;
	pl->reload_room = NULL;
	pl->reload_seg = NULL;
	if (res < (int)pl->reload_head) {
		store_stat_add(&pl->st->stats.io_errors, 1);
		plog_fail(pl, res < 0 ? res : -EIO, seg);
	}
	if (pl->closed) {          /* closed (failed) while the block was read */
		plog_free(pl);
		return;
	}
	if (plog_has_unsubmitted(pl))
		store_mark_dirty(pl->st, &pl->flush);
}

/* 1 if the log has bytes no write has been submitted for yet (and may
 * submit them: not while its partial block is read back). */
static int plog_flush_pending(const struct store_flusher *f)
{
	const struct plog *pl = (const struct plog *)((const char *)f - offsetof(struct plog, flush));

	return !pl->reload_inflight && plog_has_unsubmitted(pl);
}

void plog_init_callbacks(struct plog *pl)
{
	pl->flush.prepare = plog_flush_prepare;
	pl->flush.pending = plog_flush_pending;
	pl->chunk_owner.evict = chunk_evict;
	pl->chunk_owner.released = chunk_released;
	pl->prep_call.done = plog_prep_done;
	pl->reload_call.done = plog_reload_done;
	for (unsigned k = 0; k < PLOG_MAX_WRITES; k++)
		pl->wr[k].call.done = plog_write_call_done;
}

void plog_write_done(struct plog *pl, int res)
{
	for (unsigned k = 0; k < pl->inflight; k++) {
		struct plog_write *w = wr_at(pl, k);

		if (!w->done) {
			plog_write_slot_done(w, res);
			return;
		}
	}
}

uint64_t plog_size(const struct plog *pl)
{
	uint64_t n = 0;

	for (struct segment *s = pl->seg_head; s; s = s->next)
		n += s->end;
	return n;
}

int plog_segment_count(const struct plog *pl)
{
	int n = 0;

	for (struct segment *s = pl->seg_head; s; s = s->next)
		n++;
	return n;
}

/* ---- free ------------------------------------------------------------- */

void plog_free(struct plog *pl)
{
	if (pl->inflight || pl->prep_inflight || pl->reload_inflight || pl->reads || pl->files.job)
		return;                /* the last completion frees it */
	plog_chunks_drop(pl, NULL);
	while (pl->seg_head) {
		struct segment *s = pl->seg_head;

		plog_segment_unlink(pl, s);
		segment_free(s);
	}
	if (pl->next_fd >= 0) {
		close(pl->next_fd);
		if (!pl->closed || plog_dirfd(pl) >= 0)
			unlinkat(plog_dirfd(pl), PLOG_NEXT_NAME, 0);
	}
	plog_dir_release(pl);
	epoch_cache_fini(&pl->epochs.c);
	free(pl->epochs.img);
	free(pl->dir);
	free(pl);
}
