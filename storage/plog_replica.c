/* storage/plog_replica.c — the follower's path of a partition log (see
 * plog_replica.h): the leader's batches appended as they are, and the cut
 * of a divergent tail on the shard's ring, with its redo at open.
 *
 * The cut's order on disk, and why a crash leaves the log either before
 * or after it, never a mix:
 *   1. "truncate-to" is saved: "truncate-to.tmp" written, fsync'ed,
 *      renamed, the directory fsync'ed. Until that rename is durable
 *      nothing of the log changed on disk: a crash leaves it as it was.
 *      Once it is, the next open finishes the cut before recovery looks
 *      at the log (plog_truncate_redo): each step below is idempotent and
 *      the redo does them all again, from the file names alone.
 *   2. the index file of the segment cut and, newest first, the index and
 *      data files of every later segment are unlinked (an index left
 *      without its data would make the open refuse the log: indexes go
 *      first; the redo removes any leftover);
 *   3. the segment cut is truncated at the cut (IORING_OP_FTRUNCATE) and
 *      fsync'ed (its size is durable);
 *   4. "recovery-checkpoint" comes down to the cut when it was above it
 *      (recovery takes a log ending below it for damage, and would skip
 *      its next offsets past the hole);
 *   5. the directory is fsync'ed (the unlinks are durable), "truncate-to"
 *      is unlinked and the directory fsync'ed again.
 * Appends wait (-EBUSY) until 5 is durable: a "truncate-to" a crash could
 * bring back never lies under a record appended after the cut.
 * In memory the cut is made at once (before 1), once the log is quiet:
 * no write in flight and every byte written, no disk read of it in
 * flight, its file work over (an index written after 2 would come back
 * without its data). The file work then holds (files.held) until 5.
 * @thread shard */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/batch.h"
#include "storage/plog.h"
#include "storage/plog_internal.h"
#include "storage/plog_epochs.h"
#include "storage/plog_replica.h"

/* liburing 2.3 knows neither the opcode (Linux 6.9) nor its prep helper:
 * the SQE is built by hand (the kernel takes the length in `off`). */
#define PLOG_OP_FTRUNCATE 55
static_assert(IORING_OP_SENDMSG_ZC == 48, "io_uring opcodes as the kernel numbers them");

/* ---- the leader-epoch cache's place ----------------------------------- */

/* The batch at start_offset opens leader epoch `epoch`, above every
 * epoch the log held: the leader-epoch cache is told (Kafka's
 * LeaderEpochFileCache.assign; storage/plog_epochs.h). -ENOMEM there: the
 * next batch of that epoch tries again (still above the cache's latest). */
static void replica_epoch_opened(struct plog *pl, int32_t epoch, int64_t start_offset)
{
	if (epoch > pl->leader_epoch)
		pl->leader_epoch = epoch;
	plog_epochs_assign(pl, epoch, start_offset);
}

/* The log was cut back to `offset` (in memory; on disk
 * it follows): the cache drops the epochs that start at or after it
 * (Kafka's truncateFromEnd). pl->leader_epoch stays: the newest epoch
 * seen, and a follower's next batches come from a leader of that epoch or
 * a later one. */
static void replica_epoch_truncated(struct plog *pl, int64_t offset)
{
	plog_epochs_truncate_end(pl, offset);
}

/* ---- append ----------------------------------------------------------- */

int plog_append_replica(struct plog *pl, const uint8_t *batches, uint32_t len, uint32_t *appended)
{
	int64_t expect = pl->next_offset, base;
	int32_t epoch = INT32_MIN;
	uint32_t at = 0;
	int rc;

	*appended = 0;
	if (pl->err)
		return -EROFS;
	if (pl->trunc)
		return -EBUSY;
	/* the whole set first: nothing is appended from a set that is not
	 * whole, valid and contiguous */
	while (at < len) {
		const uint8_t *b = batches + at;
		struct batch_info bi;

		/* whole and as the leader wrote it (its CRC): the leader
		 * checked its records at produce, so they are not walked
		 * here again (per record), as Kafka's follower does not */
		rc = batch_validate(b, len - at, pl->cfg.max_batch, BATCH_V_NO_RECORDS, &bi);
		if (rc == -BATCH_ERR_TOO_LARGE)
			return -EMSGSIZE;
		if (rc < 0)
			return -EBADMSG;
		base = batch_base_offset(b);
		if (at == 0 && base < expect)
			return -EEXIST;
		if (at == 0 && base > expect && !pl->cfg.compact)
			return -ENODATA;
		if (base < expect || (base > expect && !pl->cfg.compact) || batch_leader_epoch(b) < epoch)
			return -EILSEQ;
		epoch = batch_leader_epoch(b);
		expect = batch_last_offset(b) + 1;
		at += bi.size;
	}
	/* an epoch assigned at this log's end holds no record here (this
	 * node's own leadership that wrote nothing, or the metadata's epoch
	 * set at the open): the leader's batches say which epoch follows,
	 * as a Kafka follower's cache takes epochs only from what it appends */
	{
		const struct epoch_cache *c = &pl->epochs.c;

		if (c->n && c->e[c->n - 1].start >= pl->next_offset)
			plog_epochs_truncate_end(pl, pl->next_offset);
	}
	for (at = 0; at < len;) {
		const uint8_t *b = batches + at;
		uint32_t size = batch_size(b);

		if ((rc = plog_append_bytes(pl, b, size, 0, &base)) < 0)
			return rc;
		/* above the cache's latest: pl->leader_epoch may be higher
		 * (the metadata's, set at the open) with no batch of it */
		if (batch_leader_epoch(b) > pl->epochs.latest)
			replica_epoch_opened(pl, batch_leader_epoch(b), base);
		at += size;
		*appended = at;
	}
	return 0;
}

/* ---- truncation ------------------------------------------------------- */

enum {
	TR_WAIT,           /* the log gets quiet (t->wait on the store's list) */
	TR_LOCATE,         /* the read that finds the cut */
	TR_INTENT,         /* "truncate-to" saved: the commit point */
	TR_OPENDIR,
	TR_UNLINK_INDEX,   /* the cut segment's index */
	TR_GONE_INDEX,     /* a later segment's index, newest first */
	TR_GONE_LOG,       /* and its data */
	TR_FTRUNCATE,
	TR_FSYNC_SEG,
	TR_CKPT,           /* "recovery-checkpoint" lowered */
	TR_FSYNC_DIR,
	TR_UNLINK_INTENT,
	TR_FSYNC_DIR2,
	TR_CLOSEDIR,
	TR_DONE,
	TR_END,            /* a NOP on the ring: the op ends from its completion */
	/* plog_start_at: the whole log goes, it starts again at t->offset */
	SA_INTENT,         /* "start-at" saved: the commit point */
	SA_OPENDIR,
	SA_GONE_INDEX,     /* each old segment's index, newest first */
	SA_GONE_LOG,       /* and its data */
	SA_RENAME,         /* ".next.log" becomes the new segment */
	SA_UNLINK_EPOCHS,  /* "leader-epoch-checkpoint" */
	SA_UNLINK_CKPT,    /* "recovery-checkpoint" */
	SA_LOG_START,      /* "log-start-offset" saved */
	SA_FSYNC_DIR,
	SA_UNLINK_INTENT,
	SA_FSYNC_DIR2,
	SA_CLOSEDIR,
	SA_DONE,
};

static struct plog_truncate *tr_of_wait(const struct store_flusher *f)
{
	return (struct plog_truncate *)((const char *)f - offsetof(struct plog_truncate, wait));
}

/* Nothing of the log moves: no write in flight and every byte written, no
 * partial block read back, no disk read or preallocation in flight, no
 * file work running or queued, no index due. */
static int tr_quiet(const struct plog *pl)
{
	const struct plog_files *f = &pl->files;

	if (pl->inflight || pl->reload_inflight || f->job || f->file_head || f->del_head || f->ckpt_wanted)
		return 0;
	if (pl->trunc && pl->trunc->full && pl->prep_inflight)
		return 0;          /* a restart takes the prepared next segment */
	for (const struct segment *s = pl->seg_head; s; s = s->next)
		if (s->reads || s->saving || s->falloc_inflight || s->flushed < s->end || plog_index_due(s))
			return 0;
	return 1;
}

static void tr_finish(struct plog_truncate *t)
{
	struct plog *pl = t->pl;

	while (t->gone) {           /* after a failure: the next open removes their files */
		struct segment *g = t->gone;

		t->gone = g->next;
		segment_free(g);
	}
	if (t->dirfd >= 0)
		close(t->dirfd);    /* after a failure only: the chain closes it on the ring */
	t->dirfd = -1;
	t->step = TR_DONE;
	store_unmark_dirty(pl->st, &t->wait);
	pl->trunc = NULL;
	pl->files.held = 0;
	if (pl->files.running)
		plog_files_run(pl);
	t->done(t);
}

/* End the op from a completion: a NOP whose CQE calls tr_finish (the
 * store's flush, which runs the wait, must not see the op end under it). */
static void tr_end_later(struct plog_truncate *t, int err)
{
	struct io_uring_sqe *sqe = store_sqe(t->pl->st);

	t->err = err;
	t->step = TR_END;
	if (!sqe) {
		tr_finish(t);       /* no SQE at all: the ring is broken */
		return;
	}
	io_uring_prep_nop(sqe);
	store_call_submit(t->pl->st, sqe, &t->call);
}

/* A step on disk failed: the log fails (appends -EROFS until it is
 * reopened, as after a failed write). Once "truncate-to" is durable the
 * next open finishes the cut; before, it finds the log as it was. */
static void tr_fail(struct plog_truncate *t, int err)
{
	struct plog *pl = t->pl;

	t->err = err;
	store_stat_add(&pl->st->stats.io_errors, 1);
	if (!plog_failed(pl)) {
		pl->err = err;
		if (pl->on_durable)
			pl->on_durable(pl, pl->durable_offset, err, pl->durable_arg);
	}
	tr_finish(t);
}

static void tr_saved(struct file_save *fs, int err);

/* Submit the current step's operation, skipping those with nothing to do. */
static void tr_run(struct plog_truncate *t)
{
	struct plog *pl = t->pl;
	struct segment *seg = pl->seg_tail;   /* the segment cut: the active one now */
	struct io_uring_sqe *sqe;
	int n, rc;

	for (;;) {
		switch (t->step) {
		case TR_INTENT:
			n = snprintf(t->text, sizeof(t->text), PLOG_TRUNCATE_TAG "%" PRId64 "\n", t->offset);
			rc = file_save_start(&t->fs, pl->st, pl->dir, PLOG_TRUNCATE_FILE, t->text, (size_t)n, -1,
					     FILE_SAVE_FSYNC | FILE_SAVE_SYNC_DIR, tr_saved);
			if (rc < 0)
				tr_fail(t, rc);
			return;
		case TR_CKPT:
			if (pl->checkpointed <= t->offset) {
				t->step = TR_FSYNC_DIR;
				continue;
			}
			n = snprintf(t->text, sizeof(t->text), PLOG_CHECKPOINT_TAG "%" PRId64 "\n", t->offset);
			rc = file_save_start(&t->fs, pl->st, pl->dir, PLOG_CHECKPOINT_FILE, t->text, (size_t)n, -1,
					     FILE_SAVE_FSYNC | FILE_SAVE_SYNC_DIR, tr_saved);
			if (rc < 0)
				tr_fail(t, rc);
			return;
		case TR_GONE_INDEX:
		case TR_GONE_LOG:
			if (!t->gone) {
				t->step = TR_FTRUNCATE;
				continue;
			}
			break;
		case TR_DONE:
			t->err = 0;
			tr_finish(t);
			return;
		default:
			break;
		}
		break;
	}
	if (!(sqe = store_sqe(pl->st))) {
		tr_fail(t, -EBUSY);
		return;
	}
	switch (t->step) {
	case TR_OPENDIR:
		io_uring_prep_openat(sqe, AT_FDCWD, pl->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
		break;
	case TR_UNLINK_INDEX:
		segment_index_path(seg, t->name, sizeof(t->name));
		io_uring_prep_unlinkat(sqe, t->dirfd, t->name, 0);
		break;
	case TR_GONE_INDEX:
		segment_index_path(t->gone, t->name, sizeof(t->name));
		io_uring_prep_unlinkat(sqe, t->dirfd, t->name, 0);
		break;
	case TR_GONE_LOG:
		io_uring_prep_unlinkat(sqe, t->dirfd, t->gone->name, 0);
		break;
	case TR_FTRUNCATE:
		io_uring_prep_rw(PLOG_OP_FTRUNCATE, sqe, seg->fd, NULL, 0, t->pos);
		break;
	case TR_FSYNC_SEG:
		io_uring_prep_fsync(sqe, seg->fd, 0);
		break;
	case TR_FSYNC_DIR:
	case TR_FSYNC_DIR2:
		io_uring_prep_fsync(sqe, t->dirfd, 0);
		break;
	case TR_UNLINK_INTENT:
		io_uring_prep_unlinkat(sqe, t->dirfd, PLOG_TRUNCATE_FILE, 0);
		break;
	case TR_CLOSEDIR:
		io_uring_prep_close(sqe, t->dirfd);
		break;
	}
	store_call_submit(pl->st, sqe, &t->call);
}

/* The step done: the next one. */
static void tr_advance(struct plog_truncate *t)
{
	if (t->on_step)
		t->on_step(t, t->step);
	if (t->step == TR_GONE_LOG) {
		struct segment *g = t->gone;

		t->gone = g->next;
		g->next = NULL;
		segment_free(g);
		t->step = TR_GONE_INDEX;   /* the next later segment, or on */
	} else {
		t->step++;
	}
	tr_run(t);
}

static void sa_advance(struct plog_truncate *t);

static void tr_saved(struct file_save *fs, int err)
{
	struct plog_truncate *t = (struct plog_truncate *)((char *)fs - offsetof(struct plog_truncate, fs));

	if (err) {
		tr_fail(t, err);
		return;
	}
	if (t->full) {
		sa_advance(t);
		return;
	}
	if (t->step == TR_CKPT)
		t->pl->checkpointed = t->offset;
	tr_advance(t);
}

static void tr_call_done(struct store_call *call, int res)
{
	struct plog_truncate *t = (struct plog_truncate *)((char *)call - offsetof(struct plog_truncate, call));
	struct plog *pl = t->pl;

	switch (t->step) {
	case TR_END:
		tr_finish(t);
		return;
	case TR_OPENDIR:
		if (res >= 0)
			t->dirfd = res;
		break;
	case TR_UNLINK_INDEX:
	case TR_GONE_INDEX:
	case TR_GONE_LOG:
	case TR_UNLINK_INTENT:
		if (res == -ENOENT)
			res = 0;     /* not there (an index never written): as wanted */
		break;
	case TR_FTRUNCATE:
		if (res == -EINVAL || res == -EOPNOTSUPP) {
			/* a kernel before 6.9: the one blocking call of the cut,
			 * a metadata update of one file (microseconds to a few
			 * milliseconds), once per election at most */
			res = ftruncate(pl->seg_tail->fd, (off_t)t->pos) < 0 ? -errno : 0;
		}
		break;
	case TR_CLOSEDIR:
		t->dirfd = -1;   /* released whatever the result */
		res = 0;
		break;
	default:
		break;
	}
	if (res < 0) {
		tr_fail(t, res);
		return;
	}
	tr_advance(t);
}

/* The log is quiet and the read found the cut in segment seg at t->pos:
 * cut in memory, then on disk (tr_run). */
static void tr_apply(struct plog_truncate *t, struct segment *seg)
{
	struct plog *pl = t->pl;
	struct segment **gone_end = &t->gone, *s;
	int64_t to = t->offset;

	/* the later segments leave the log, newest first; their files go on
	 * the ring, their structs after their unlinks */
	while (pl->seg_tail != seg) {
		struct segment *g = pl->seg_tail;

		plog_chunks_drop(pl, g);
		plog_segment_unlink(pl, g);
		*gone_end = g;
		gone_end = &g->next;
	}
	/* its chunks go too: the next append reads its partial block back
	 * (plog_chunk_start), which is on disk */
	plog_chunks_drop(pl, seg);
	seg->end = seg->flushed = seg->alloc = t->pos;
	seg->next_offset = to;
	seg->sealed = 0;
	seg->index_saved = 0;
	seg->save_failed = 0;
	/* (max_timestamp stays: an overestimate keeps retention and time
	 * lookups on the safe side; the next open's scan makes it exact) */
	seg_index_truncate(&seg->ix, (uint32_t)t->pos);
	pl->next_offset = to;
	if (pl->written_offset > to)
		pl->written_offset = to;
	if (pl->durable_offset > to)
		pl->durable_offset = to;
	if (pl->high_watermark > to)
		pl->high_watermark = to;
	for (s = pl->seg_head; s && !plog_index_due(s); s = s->next)
		;
	pl->files.seal_gate = s ? s->base_offset : INT64_MAX;
	pl->files.held = 1;
	replica_epoch_truncated(pl, to);
	t->step = TR_INTENT;
	tr_run(t);
}

static void tr_located(struct plog_read *rd)
{
	struct plog_truncate *t = rd->arg;
	struct plog *pl = t->pl;
	const uint8_t *b = rd->data;
	struct segment *seg;
	uint64_t pos;
	int err = rd->err;

	if (!err && (!rd->bytes || !b))
		err = -EIO;          /* the log is quiet: every offset below its end is readable */
	if (!err && batch_base_offset(b) < t->offset)
		err = -EINVAL;       /* the offset is inside that batch */
	if (err) {
		plog_read_release(rd);
		tr_end_later(t, err);
		return;
	}
	if (rd->from_tail) {
		seg = rd->chunk->seg;
		pos = rd->chunk->file_base + (uint64_t)(b - rd->chunk->mem);
	} else {
		seg = rd->seg;
		pos = rd->rd_pos + (uint64_t)(b - rd->buf);
	}
	plog_read_release(rd);
	t->seg_base = seg->base_offset;
	t->pos = pos;
	if (!tr_quiet(pl)) {
		/* a reader came meanwhile: wait again, and look again (the
		 * cleaner may have rewritten the segment by then) */
		t->step = TR_WAIT;
		store_mark_dirty(pl->st, &t->wait);
		return;
	}
	tr_apply(t, seg);
}

static void sa_apply(struct plog_truncate *t);

static int tr_prepare(struct store_flusher *f)
{
	struct plog_truncate *t = tr_of_wait(f);
	struct plog *pl = t->pl;
	int rc;

	if (t->step != TR_WAIT)
		return 0;
	if (plog_failed(pl)) {
		tr_end_later(t, -EROFS);
		return 0;
	}
	if (!tr_quiet(pl))
		return 0;       /* pending: asked again at the next flush */
	if (t->full) {
		sa_apply(t);
		return 0;
	}
	t->step = TR_LOCATE;
	memset(&t->rd, 0, sizeof(t->rd));
	t->rd.offset = t->offset;
	t->rd.max_offset = pl->next_offset;
	t->rd.max_bytes = 1;
	t->rd.buf = t->buf;
	t->rd.buf_cap = t->buf_cap;
	t->rd.done = tr_located;
	t->rd.arg = t;
	rc = plog_read(pl, &t->rd);
	if (rc == 0)
		return 0;       /* from the disk: tr_located runs from its completion */
	if (rc == -EBUSY) {
		t->step = TR_WAIT;   /* no SQE free: next time */
		return 0;
	}
	if (rc < 0)
		t->rd.err = rc;
	tr_located(&t->rd);
	return 0;
}

static int tr_pending(const struct store_flusher *f)
{
	return tr_of_wait(f)->step == TR_WAIT;
}

int plog_truncate_to(struct plog *pl, struct plog_truncate *t)
{
	int64_t floor = pl->log_start > t->committed ? pl->log_start : t->committed;

	t->err = 0;
	t->pl = pl;
	t->full = 0;
	t->gone = NULL;
	t->dirfd = -1;
	t->step = TR_DONE;
	if (pl->closed || pl->err) {
		t->err = -EROFS;
		return 1;
	}
	if (pl->trunc) {
		t->err = -EBUSY;
		return 1;
	}
	if (t->offset < floor || t->offset > pl->next_offset) {
		t->err = -ERANGE;
		return 1;
	}
	if (t->offset == pl->next_offset)
		return 1;
	if (!t->buf || t->buf_cap < 8192 || ((uintptr_t)t->buf & 4095)) {
		t->err = -EINVAL;
		return 1;
	}
	pl->trunc = t;
	t->step = TR_WAIT;
	t->wait.prepare = tr_prepare;
	t->wait.pending = tr_pending;
	t->wait.dirty = 0;
	t->wait.dirty_next = NULL;
	t->call.done = tr_call_done;
	store_mark_dirty(pl->st, &pl->flush);   /* what is buffered is written first */
	store_mark_dirty(pl->st, &t->wait);
	return 0;
}

static void trunc_sync_done(struct plog_truncate *t)
{
	*(int *)t->arg = 1;
}

int plog_truncate_to_sync(struct plog *pl, int64_t offset, int64_t committed)
{
	int finished = 0;
	uint32_t cap = (uint32_t)align_up4k((uint64_t)pl->cfg.max_batch * 2 + 65536);
	struct plog_truncate t = { .offset = offset, .committed = committed, .done = trunc_sync_done,
				   .arg = &finished };

	t.buf = aligned_alloc(4096, cap); /* style: allow tests and tools: once per call */
	t.buf_cap = cap;
	if (!t.buf)
		return -ENOMEM;
	if (plog_truncate_to(pl, &t) == 0)
		while (!finished)
			store_poll(pl->st, 1);
	free(t.buf);
	return t.err;
}

/* ---- a restart of the whole log at an offset ---------------------------- */

/* Submit the current step of a restart, skipping those with nothing to do. */
static void sa_run(struct plog_truncate *t)
{
	struct plog *pl = t->pl;
	struct io_uring_sqe *sqe;
	int n, rc;

	for (;;) {
		switch (t->step) {
		case SA_INTENT:
			n = snprintf(t->text, sizeof(t->text), PLOG_START_TAG "%" PRId64 "\n", t->offset);
			rc = file_save_start(&t->fs, pl->st, pl->dir, PLOG_START_FILE, t->text, (size_t)n, -1,
					     FILE_SAVE_FSYNC | FILE_SAVE_SYNC_DIR, tr_saved);
			if (rc < 0)
				tr_fail(t, rc);
			return;
		case SA_LOG_START:
			n = snprintf(t->text, sizeof(t->text), "%" PRId64 "\n", t->offset);
			rc = file_save_start(&t->fs, pl->st, pl->dir, PLOG_LOG_START_FILE, t->text, (size_t)n, -1,
					     FILE_SAVE_FSYNC | FILE_SAVE_SYNC_DIR, tr_saved);
			if (rc < 0)
				tr_fail(t, rc);
			return;
		case SA_GONE_INDEX:
		case SA_GONE_LOG:
			if (!t->gone) {
				t->step = SA_RENAME;
				continue;
			}
			break;
		case SA_DONE:
			t->err = 0;
			tr_finish(t);
			return;
		default:
			break;
		}
		break;
	}
	if (!(sqe = store_sqe(pl->st))) {
		tr_fail(t, -EBUSY);
		return;
	}
	switch (t->step) {
	case SA_OPENDIR:
		io_uring_prep_openat(sqe, AT_FDCWD, pl->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
		break;
	case SA_GONE_INDEX:
		segment_index_path(t->gone, t->name, sizeof(t->name));
		io_uring_prep_unlinkat(sqe, t->dirfd, t->name, 0);
		break;
	case SA_GONE_LOG:
		io_uring_prep_unlinkat(sqe, t->dirfd, t->gone->name, 0);
		break;
	case SA_RENAME:
		io_uring_prep_renameat(sqe, t->dirfd, PLOG_NEXT_NAME, t->dirfd, pl->seg_head->name, 0);
		break;
	case SA_UNLINK_EPOCHS:
		io_uring_prep_unlinkat(sqe, t->dirfd, EPOCH_CACHE_FILE, 0);
		break;
	case SA_UNLINK_CKPT:
		io_uring_prep_unlinkat(sqe, t->dirfd, PLOG_CHECKPOINT_FILE, 0);
		break;
	case SA_FSYNC_DIR:
	case SA_FSYNC_DIR2:
		io_uring_prep_fsync(sqe, t->dirfd, 0);
		break;
	case SA_UNLINK_INTENT:
		io_uring_prep_unlinkat(sqe, t->dirfd, PLOG_START_FILE, 0);
		break;
	case SA_CLOSEDIR:
		io_uring_prep_close(sqe, t->dirfd);
		break;
	}
	store_call_submit(pl->st, sqe, &t->call);
}

static void sa_advance(struct plog_truncate *t)
{
	if (t->on_step)
		t->on_step(t, t->step);
	if (t->step == SA_GONE_LOG) {
		struct segment *g = t->gone;

		t->gone = g->next;
		g->next = NULL;
		segment_free(g);
		t->step = SA_GONE_INDEX;   /* the next older segment, or on */
	} else {
		t->step++;
	}
	sa_run(t);
}

static void sa_call_done(struct store_call *call, int res)
{
	struct plog_truncate *t = (struct plog_truncate *)((char *)call - offsetof(struct plog_truncate, call));

	switch (t->step) {
	case TR_END:
		tr_finish(t);
		return;
	case SA_OPENDIR:
		if (res >= 0)
			t->dirfd = res;
		break;
	case SA_GONE_INDEX:
	case SA_GONE_LOG:
	case SA_UNLINK_EPOCHS:
	case SA_UNLINK_CKPT:
	case SA_UNLINK_INTENT:
		if (res == -ENOENT)
			res = 0;     /* not there (an index never written, no epochs yet) */
		break;
	case SA_CLOSEDIR:
		t->dirfd = -1;
		res = 0;
		break;
	default:
		break;
	}
	if (res < 0) {
		tr_fail(t, res);
		return;
	}
	sa_advance(t);
}

/* The log is quiet: in memory, every segment leaves it and an empty one
 * at t->offset takes its place (its file ".next.log" until the commit
 * point is durable: a crash before it finds an empty prepared segment,
 * which recovery removes, beside the log as it was); then on disk. */
static void sa_apply(struct plog_truncate *t)
{
	struct plog *pl = t->pl;
	struct segment **gone_end = &t->gone, *seg;
	uint64_t alloc = 0;
	int64_t to = t->offset;
	int fd = pl->next_fd, rc;

	if (fd >= 0) {
		alloc = pl->next_alloc;  /* the prepared next segment: empty, preallocated */
	} else {
		/* a metadata call, as the preparation of a next segment makes */
		fd = openat(plog_dirfd(pl), PLOG_NEXT_NAME, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
		plog_dir_release(pl);
		if (fd < 0) {
			tr_end_later(t, -errno);
			return;
		}
	}
	pl->next_fd = -1;
	pl->next_alloc = 0;
	while (pl->seg_tail) {
		struct segment *g = pl->seg_tail;

		plog_chunks_drop(pl, g);
		plog_segment_unlink(pl, g);
		*gone_end = g;
		gone_end = &g->next;
	}
	if ((rc = plog_segment_add(pl, to, fd, alloc, 0, &seg)) < 0) {
		/* nothing changed on disk: the old segments come back */
		close(fd);
		while (t->gone) {
			struct segment *g = t->gone;

			t->gone = g->next;
			g->next = pl->seg_head;
			if (pl->seg_head)
				pl->seg_head->prev = g;
			else
				pl->seg_tail = g;
			pl->seg_head = g;
		}
		tr_end_later(t, rc);
		return;
	}
	pl->log_start = pl->next_offset = pl->written_offset = pl->durable_offset = pl->high_watermark = to;
	pl->files.seal_gate = INT64_MAX;
	pl->files.held = 1;
	pl->checkpointed = -1;
	/* the leader's batches fill the cache again from their own epochs
	 * (replica_epoch_opened: the first one opens its epoch) */
	epoch_cache_clear(&pl->epochs.c);
	pl->epochs.latest = EPOCH_UNDEFINED;
	pl->epochs.due = 0;
	pl->leader_epoch = -1;
	t->step = SA_INTENT;
	sa_run(t);
}

int plog_start_at(struct plog *pl, struct plog_truncate *t)
{
	t->err = 0;
	t->pl = pl;
	t->gone = NULL;
	t->dirfd = -1;
	t->full = 1;
	t->step = TR_DONE;
	if (pl->closed || pl->err) {
		t->err = -EROFS;
		return 1;
	}
	if (pl->trunc) {
		t->err = -EBUSY;
		return 1;
	}
	if (t->offset < 0) {
		t->err = -ERANGE;
		return 1;
	}
	if (pl->next_offset == pl->log_start && t->offset == pl->log_start)
		return 1;           /* empty and there already */
	pl->trunc = t;
	t->step = TR_WAIT;
	t->wait.prepare = tr_prepare;
	t->wait.pending = tr_pending;
	t->wait.dirty = 0;
	t->wait.dirty_next = NULL;
	t->call.done = sa_call_done;
	store_mark_dirty(pl->st, &pl->flush);   /* what is buffered is written first */
	store_mark_dirty(pl->st, &t->wait);
	return 0;
}

int plog_start_at_sync(struct plog *pl, int64_t offset)
{
	int finished = 0;
	struct plog_truncate t = { .offset = offset, .done = trunc_sync_done, .arg = &finished };

	if (plog_start_at(pl, &t) == 0)
		while (!finished)
			store_poll(pl->st, 1);
	return t.err;
}

/* ---- the redo at open ------------------------------------------------- */

static int cmp_base(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The byte position in the segment file fd (size bytes) of the first
 * batch at or after offset `to`, or the end of its whole batches: a walk
 * of the batch headers (buffered reads at open; the kept prefix is
 * validated by recovery's scan after). */
static int redo_find_cut(int fd, uint64_t size, int64_t to, uint64_t *cut)
{
	uint64_t pos = 0;
	uint8_t h[BATCH_HEADER_SIZE];

	for (;;) {
		ssize_t r = pread(fd, h, sizeof(h), (off_t)pos); /* style: allow start-up: the open finishes a cut */

		if (r < 0)
			return -errno;
		if (r < (ssize_t)sizeof(h) || (batch_length(h) == 0 && batch_base_offset(h) == 0) ||
		    batch_length(h) < BATCH_HEADER_SIZE - BATCH_LOG_OVERHEAD)
			break;          /* the end, or zeros: cut no further */
		/* a batch holding `to` cannot be (the cut was checked on a
		 * boundary): were it there, it goes too */
		if (batch_base_offset(h) >= to || batch_last_offset(h) >= to || pos + batch_size(h) > size)
			break;
		pos += batch_size(h);
	}
	*cut = pos;
	return 0;
}

/* Read an intent file `name` ("<tag><offset>\n"): 1 and *to, 0 none,
 * -EUCLEAN unreadable (st->problem says so, `what` naming the operation). */
static int redo_read(struct plog *pl, const char *name, const char *tagstr, const char *what, int64_t *to)
{
	char buf[96], *end;
	int fd = openat(plog_dirfd(pl), name, O_RDONLY | O_CLOEXEC);
	size_t tag = strlen(tagstr);
	ssize_t n;
	long long v;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > (ssize_t)tag) {
		buf[n] = 0;
		v = strtoll(buf + tag, &end, 10);
		if (!strncmp(buf, tagstr, tag) && end != buf + tag && *end == '\n' && v >= 0) {
			*to = v;
			return 1;
		}
	}
	/* renamed into place only once whole and synced: never partial */
	snprintf(pl->st->problem, sizeof(pl->st->problem),
		 "%s/%s cannot be read: %s of the log was begun and its "
		 "offset is unknown. Move the partition's directory aside to start it empty (a follower "
		 "fetches it again)", pl->dir, name, what);
	return -EUCLEAN;
}

/* Read "truncate-to": 1 and *to, 0 none, -EUCLEAN unreadable. */
static int redo_read_intent(struct plog *pl, int64_t *to)
{
	return redo_read(pl, PLOG_TRUNCATE_FILE, PLOG_TRUNCATE_TAG, "a truncation", to);
}

/* Lower "recovery-checkpoint" to `to` if it is above it: written whole and
 * synced under a temporary name, then renamed (the directory is synced by
 * the caller). */
static int redo_lower_checkpoint(struct plog *pl, int64_t to)
{
	int dfd = plog_dirfd(pl), fd, n;
	char buf[96], *end;
	size_t tag = strlen(PLOG_CHECKPOINT_TAG);
	ssize_t r;
	long long v;

	fd = openat(dfd, PLOG_CHECKPOINT_FILE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= (ssize_t)tag)
		return 0;
	buf[r] = 0;
	v = strtoll(buf + tag, &end, 10);
	if (strncmp(buf, PLOG_CHECKPOINT_TAG, tag) || end == buf + tag || v <= to)
		return 0;
	n = snprintf(buf, sizeof(buf), PLOG_CHECKPOINT_TAG "%" PRId64 "\n", to);
	fd = openat(dfd, PLOG_CHECKPOINT_FILE ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)n) != n || fsync(fd) < 0) { /* style: allow start-up: the open finishes a cut */
		close(fd);
		return -EIO;
	}
	close(fd);
	if (renameat(dfd, PLOG_CHECKPOINT_FILE ".tmp", dfd, PLOG_CHECKPOINT_FILE) < 0)
		return -errno;
	return 0;
}

int plog_truncate_redo(struct plog *pl)
{
	int dfd = plog_dirfd(pl), rc, fd;
	int64_t to = 0, *bases = NULL;
	size_t n = 0, cap = 0, s;
	DIR *d;
	struct dirent *de;
	char name[48];

	if ((rc = redo_read_intent(pl, &to)) <= 0)
		return rc;
	if (!(d = fdopendir(dup(dfd))))
		return -errno;
	/* (the copy shares the directory's position with dfd: back to the
	 * start before and after, for recovery's own listing) */
	rewinddir(d);
	while ((de = readdir(d))) {
		char *end;
		long long v;

		if (strlen(de->d_name) != 24 || strcmp(de->d_name + 20, ".log"))
			continue;
		v = strtoll(de->d_name, &end, 10);
		if (end != de->d_name + 20 || v < 0)
			continue;
		if (n == cap) {
			int64_t *nb = realloc(bases, (cap = cap ? cap * 2 : 16) * sizeof(*bases)); /* style: allow start-up: the open finishes a cut */

			if (!nb) {
				closedir(d);
				free(bases);
				return -ENOMEM;
			}
			bases = nb;
		}
		bases[n++] = v;
	}
	rewinddir(d);
	closedir(d);
	if (n)
		qsort(bases, n, sizeof(*bases), cmp_base);
	/* the later segments, newest first, each index before its data */
	for (s = n; s > 0 && bases[s - 1] > to; s--) {
		snprintf(name, sizeof(name), "%020" PRId64 ".index", bases[s - 1]);
		if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
			goto fail;
		snprintf(name, sizeof(name), "%020" PRId64 ".log", bases[s - 1]);
		if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
			goto fail;
	}
	/* a prepared next segment is empty, or holds what a crash caught
	 * during a roll: past the cut either way */
	unlinkat(dfd, PLOG_NEXT_NAME, 0);
	if (s > 0) {
		/* the segment holding the cut: its index, then its bytes */
		struct stat stb;
		uint64_t cut = 0;

		snprintf(name, sizeof(name), "%020" PRId64 ".index", bases[s - 1]);
		if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
			goto fail;
		snprintf(name, sizeof(name), "%020" PRId64 ".log", bases[s - 1]);
		fd = openat(dfd, name, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			goto fail;
		if (fstat(fd, &stb) < 0 || (rc = redo_find_cut(fd, (uint64_t)stb.st_size, to, &cut)) < 0 ||
		    (cut < (uint64_t)stb.st_size && ftruncate(fd, (off_t)cut) < 0) ||
		    fsync(fd) < 0) { /* style: allow start-up: the open finishes a cut */
			rc = rc < 0 ? rc : -errno;
			close(fd);
			free(bases);
			return rc;
		}
		close(fd);
	}
	free(bases);
	bases = NULL;
	if ((rc = redo_lower_checkpoint(pl, to)) < 0)
		return rc;
	if (fsync(dfd) < 0 || (unlinkat(dfd, PLOG_TRUNCATE_FILE, 0) < 0 && errno != ENOENT) || /* style: allow start-up: the open finishes a cut */
	    fsync(dfd) < 0) /* style: allow start-up: the open finishes a cut */
		return -errno;
	pl->recovery.truncate_redone = 1;
	pl->recovery.truncate_to = to;
	return 0;
fail:
	rc = -errno;
	free(bases);
	return rc;
}

/* Write `text` durably as `name` in dfd: "<name>.tmp" written, fsync'ed,
 * renamed (the caller fsyncs the directory). */
static int redo_write_file(int dfd, const char *name, const char *text, size_t len)
{
	char tmp[64];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len || fsync(fd) < 0) { /* style: allow start-up: the open finishes a restart of the log */
		close(fd);
		return -EIO;
	}
	close(fd);
	return renameat(dfd, tmp, dfd, name) < 0 ? -errno : 0;
}

int plog_start_redo(struct plog *pl)
{
	int dfd = plog_dirfd(pl), rc;
	int64_t at = 0;
	DIR *d;
	struct dirent *de;
	char text[32];
	static const char *const others[] = { PLOG_NEXT_NAME, EPOCH_CACHE_FILE, PLOG_CHECKPOINT_FILE,
					      PLOG_TRUNCATE_FILE };

	if ((rc = redo_read(pl, PLOG_START_FILE, PLOG_START_TAG, "a restart at an offset", &at)) <= 0)
		return rc;
	if (!(d = fdopendir(dup(dfd))))
		return -errno;
	/* every segment and index, whatever its base (the new segment is
	 * empty: appends wait for the end), then the files that describe
	 * the old log's contents */
	rewinddir(d);
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (!((len == 24 && !strcmp(de->d_name + 20, ".log")) ||
		      (len == 26 && !strcmp(de->d_name + 20, ".index"))) ||
		    strspn(de->d_name, "0123456789") != 20)
			continue;
		if (unlinkat(dfd, de->d_name, 0) < 0 && errno != ENOENT) {
			rc = -errno;
			closedir(d);
			return rc;
		}
	}
	rewinddir(d);
	closedir(d);
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		if (unlinkat(dfd, others[i], 0) < 0 && errno != ENOENT)
			return -errno;
	rc = snprintf(text, sizeof(text), "%" PRId64 "\n", at);
	if ((rc = redo_write_file(dfd, PLOG_LOG_START_FILE, text, (size_t)rc)) < 0)
		return rc;
	if (fsync(dfd) < 0 || (unlinkat(dfd, PLOG_START_FILE, 0) < 0 && errno != ENOENT) || /* style: allow start-up: the open finishes a restart of the log */
	    fsync(dfd) < 0) /* style: allow start-up: the open finishes a restart of the log */
		return -errno;
	pl->recovery.start_redone = 1;
	pl->recovery.start_at = at;
	return 0;
}
