/* storage/plog_files.c — the small files of a running log, written on the
 * shard's ring (storage/file_save.h) one at a time, in this order of
 * priority:
 *   0. "leader-epoch-checkpoint" when the leader-epoch cache changed
 *      (plog_epochs.h), ahead of any index that could vouch for the batch
 *      that changed it;
 *   1. the index of each sealed segment wholly on disk, oldest first, after
 *      the fdatasync of its data (a recovery point: the next open trusts the
 *      segment unread);
 *   2. "log-start-offset" for DeleteRecords, then the segments wholly below
 *      the new start go;
 *   3. files others keep beside the log (plog_save_file);
 *   4. the checkpoint: the fdatasync of the active segment and its index
 *      for the written prefix, then "recovery-checkpoint" with the durable
 *      high watermark.
 * One at a time in file order keeps the promises the blocking code gave:
 * a segment's index appears only after its data is durable and after every
 * earlier segment's index (recovery's floor: a later checkpointed segment
 * vouches for all before it); "recovery-checkpoint" never claims an offset
 * whose data has not been synced: its watermark is taken before the active
 * segment's fdatasync is issued and is capped at the first earlier segment
 * whose index (and so its sync) is not in place.
 * The shard never waits: each step is issued from the completion of the
 * one before. Closing waits for the work queued (plog_close).
 * @thread shard */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/plog.h"
#include "storage/plog_internal.h"

enum { JOB_NONE, JOB_SEAL, JOB_CKPT_TAIL, JOB_CKPT_FILE, JOB_LOG_START, JOB_FILE, JOB_EPOCHS };

/* A file saved beside the log, queued (plog_save_file). */
struct plog_file {
	struct plog_file *next;
	char name[40];
	size_t len;
	uint8_t data[];
};

static struct plog *files_log(struct file_save *fs)
{
	return (struct plog *)((char *)fs - offsetof(struct plog, files.fs));
}

static void files_done(struct file_save *fs, int err);

static int save(struct plog *pl, int job, const char *name, const void *buf, size_t len, int sync_fd, int flags)
{
	int rc = file_save_start(&pl->files.fs, pl->st, pl->dir, name, buf, len, sync_fd, flags, files_done);

	if (rc == 0)
		pl->files.job = (uint8_t)job;
	return rc;
}

/* ---- 0. the leader epochs ------------------------------------------- */

/* Write "leader-epoch-checkpoint" (synced, and its directory: it is in
 * place before any later file is). 0: started; 1: not (tried again with
 * the next checkpoint). */
static int epochs_begin(struct plog *pl)
{
	size_t len;
	int rc;

	pl->epochs.due = 0;
	if ((rc = plog_epochs_image(pl, &len)) == 0)
		rc = save(pl, JOB_EPOCHS, EPOCH_CACHE_FILE, pl->epochs.img, len, -1, FILE_SAVE_SYNC_DIR);
	if (rc < 0) {
		plog_epochs_saved(pl, rc);
		return 1;
	}
	return 0;
}

/* ---- 1. segment indexes ----------------------------------------------- */

/* The oldest sealed segment wholly on disk whose index is not written. */
static struct segment *seal_next(const struct plog *pl)
{
	for (struct segment *s = pl->seg_head; s; s = s->next)
		if (plog_index_due(s) && !s->saving)
			return s;
	return NULL;
}

/* Write the index of seg (after its data's fdatasync unless every write
 * already was synchronous). 0: started. */
static int seal_start(struct plog *pl, struct segment *seg, int job, uint64_t upto)
{
	struct plog_files *f = &pl->files;
	char name[48];
	uint8_t *buf;
	size_t len;
	int whole, rc, sync_fd = pl->cfg.durability != PLOG_DUR_SYNC ? seg->fd : -1;

	if ((rc = segment_index_image(seg, upto, &buf, &len, &whole)) < 0)
		return rc;
	if (!buf && sync_fd < 0)
		return 1;              /* nothing to write, nothing to sync */
	segment_index_path(seg, name, sizeof(name));
	if ((rc = save(pl, job, buf ? name : NULL, buf, len, sync_fd, 0)) < 0) {
		free(buf);
		return rc;
	}
	f->buf = buf;
	f->seg = seg;
	f->seg_end = seg->end;
	f->whole = buf && whole;
	seg->saving = 1;
	return 0;
}

/* The index write of f->seg ended: it is the segment's checkpoint if it
 * covered the whole segment and nothing was appended since. */
static int seal_end(struct plog *pl, int job, int err)
{
	struct plog_files *f = &pl->files;
	struct segment *seg = f->seg;

	f->seg = NULL;
	seg->saving = 0;
	if (err && job == JOB_SEAL)
		seg->save_failed = 1;  /* not again before the next checkpoint */
	else if (!err && f->whole && seg->end == f->seg_end)
		seg->index_saved = 1;
	return err;
}

/* ---- 2. the log start (DeleteRecords) --------------------------------- */

/* The segments wholly below the log start go (not the active one, nor one
 * still in use: the next retention pass takes those). */
void plog_drop_below_start(struct plog *pl)
{
	while (pl->seg_head != pl->seg_tail && pl->seg_head->next_offset <= pl->log_start &&
	       pl->seg_head->flushed >= pl->seg_head->end) {
		struct segment *seg = pl->seg_head;

		if (plog_segment_busy(pl, seg))
			break;
		plog_chunks_drop(pl, seg);
		segment_remove_files(plog_dirfd(pl), seg);
		plog_segment_unlink(pl, seg);
		segment_free(seg);
	}
	plog_dir_release(pl);
}

/* End the DeleteRecords waiting for a start at or below `upto` (all: upto
 * INT64_MAX) with err. */
static void log_start_answer(struct plog *pl, int64_t upto, int err)
{
	struct plog_files *f = &pl->files;
	struct plog_delete *d = f->del_head, *keep = NULL, *keep_tail = NULL, *next;

	f->del_head = f->del_tail = NULL;
	for (; d; d = next) {
		next = d->next;
		d->next = NULL;
		if (d->offset > upto) {     /* asked after the save began: the next one */
			if (keep_tail)
				keep_tail->next = d;
			else
				keep = d;
			keep_tail = d;
			continue;
		}
		d->err = err;
		d->done(d);
	}
	/* requests queued by a done above come after those kept */
	if (keep) {
		keep_tail->next = f->del_head;
		f->del_head = keep;
		if (!f->del_tail)
			f->del_tail = keep_tail;
	}
}

/* Save the largest start asked for. 0: started; 1: nothing to save. */
static int log_start_begin(struct plog *pl)
{
	struct plog_files *f = &pl->files;
	int64_t target = pl->log_start;
	int n, rc;

	for (struct plog_delete *d = f->del_head; d; d = d->next)
		if (d->offset > target)
			target = d->offset;
	if (target <= pl->log_start) {
		log_start_answer(pl, INT64_MAX, 0);
		return 1;
	}
	n = snprintf(f->text, sizeof(f->text), "%" PRId64 "\n", target);
	if ((rc = save(pl, JOB_LOG_START, PLOG_LOG_START_FILE, f->text, (size_t)n, -1,
		       FILE_SAVE_FSYNC | FILE_SAVE_SYNC_DIR)) < 0) {
		log_start_answer(pl, INT64_MAX, rc);
		return 1;
	}
	f->del_target = target;
	return 0;
}

static void log_start_end(struct plog *pl, int err)
{
	int64_t target = pl->files.del_target;

	if (!err && target > pl->log_start) {
		pl->log_start = target;
		plog_epochs_truncate_start(pl, target);
		plog_drop_below_start(pl);
	}
	log_start_answer(pl, target, err);
}

int plog_delete_records(struct plog *pl, struct plog_delete *d)
{
	struct plog_files *f = &pl->files;
	int64_t offset = d->offset;

	d->err = 0;
	d->next = NULL;
	if (pl->closed) {
		d->err = -ENOENT;
		return 1;
	}
	/* only -1 means the high watermark; anything else outside [log start,
	 * high watermark] deletes nothing (-1001 used to delete everything) */
	if (offset == -1)
		offset = pl->high_watermark;
	if (offset < pl->log_start || offset > pl->high_watermark) {
		d->err = -ERANGE;
		return 1;
	}
	if (offset == pl->log_start)
		return 1;
	d->offset = offset;
	if (f->del_tail)
		f->del_tail->next = d;
	else
		f->del_head = d;
	f->del_tail = d;
	plog_files_run(pl);
	return 0;
}

static void delete_sync_done(struct plog_delete *d)
{
	*(int *)d->arg = 1;
}

int plog_delete_records_sync(struct plog *pl, int64_t offset)
{
	int finished = 0;
	struct plog_delete d = { .offset = offset, .done = delete_sync_done, .arg = &finished };

	if (plog_delete_records(pl, &d) == 0)
		while (!finished)
			store_poll(pl->st, 1);
	return d.err;
}

/* ---- 3. files beside the log ------------------------------------------ */

int plog_save_file(struct plog *pl, const char *name, const void *data, size_t len)
{
	struct plog_files *f = &pl->files;
	struct plog_file *e;

	if (strlen(name) >= sizeof(e->name))
		return -ENAMETOOLONG;
	if (pl->closed)
		return -ENOENT;
	e = malloc(sizeof(*e) + len); /* style: allow slow path: a file saved beside the log */
	if (!e)
		return -ENOMEM;
	e->next = NULL;
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->len = len;
	if (len)
		memcpy(e->data, data, len);
	if (f->file_tail)
		f->file_tail->next = e;
	else
		f->file_head = e;
	f->file_tail = e;
	plog_files_run(pl);
	return 0;
}

int plog_saving_file(const struct plog *pl, const char *name)
{
	const struct plog_files *f = &pl->files;

	if (f->job == JOB_FILE && !strcmp(f->file_cur->name, name))
		return 1;
	for (const struct plog_file *e = f->file_head; e; e = e->next)
		if (!strcmp(e->name, name))
			return 1;
	return 0;
}

/* 0: started; 1: that one could not be (dropped: the file stays as it
 * was, as after a failed write). */
static int file_begin(struct plog *pl)
{
	struct plog_files *f = &pl->files;
	struct plog_file *e = f->file_head;

	f->file_head = e->next;
	if (!f->file_head)
		f->file_tail = NULL;
	if (save(pl, JOB_FILE, e->name, e->data, e->len, -1, 0) < 0) {
		free(e);
		return 1;
	}
	f->file_cur = e;
	return 0;
}

/* ---- 4. the checkpoint ------------------------------------------------ */

static void ckpt_end(struct plog *pl, int err)
{
	pl->files.ckpt_err = err;
	pl->files.ckpt_done = pl->files.ckpt_started;
}

/* "recovery-checkpoint" with f->hw, if it moves. 0: started; 1: over. */
static int ckpt_file(struct plog *pl)
{
	struct plog_files *f = &pl->files;
	int64_t hw = f->hw;
	int n, rc;

	if (hw < pl->checkpointed)
		hw = pl->checkpointed;   /* never lower it */
	if (!(hw > pl->checkpointed || (hw > 0 && pl->checkpointed < 0))) {
		ckpt_end(pl, 0);
		return 1;
	}
	f->hw = hw;
	n = snprintf(f->text, sizeof(f->text), PLOG_CHECKPOINT_TAG "%" PRId64 "\n", hw);
	if ((rc = save(pl, JOB_CKPT_FILE, PLOG_CHECKPOINT_FILE, f->text, (size_t)n, -1,
		       FILE_SAVE_FSYNC | FILE_SAVE_SYNC_DIR)) < 0) {
		ckpt_end(pl, rc);
		return 1;
	}
	return 0;
}

/* Take the durable high watermark, then sync the active segment and write
 * its index for the written prefix. 0: started; 1: over. */
static int ckpt_begin(struct plog *pl)
{
	struct plog_files *f = &pl->files;
	struct segment *tail = pl->seg_tail;
	int64_t hw, cap = INT64_MAX;
	int rc;

	f->ckpt_started = f->ckpt_asked;
	if (plog_failed(pl) || !tail) {
		ckpt_end(pl, plog_failed(pl) ? pl->err : 0);
		return 1;
	}
	/* below every earlier segment whose index (after its data's sync) is
	 * not in place: its bytes may not be durable yet */
	for (struct segment *s = pl->seg_head; s && s != tail; s = s->next)
		if (!s->index_saved) {
			cap = s->base_offset;
			break;
		}
	/* what is written now (synced below), never what only memory holds */
	if (pl->cfg.durability == PLOG_DUR_MEMORY)
		hw = tail->flushed >= tail->end ? tail->next_offset : tail->base_offset;
	else
		hw = pl->durable_offset;
	f->hw = hw < cap ? hw : cap;
	if (!tail->index_saved && tail->flushed) {
		rc = seal_start(pl, tail, JOB_CKPT_TAIL, tail->flushed);
		if (rc == 0)
			return 0;
		if (rc < 0) {
			ckpt_end(pl, rc);
			return 1;
		}
	}
	return ckpt_file(pl);
}

int plog_checkpoint(struct plog *pl)
{
	struct plog_files *f = &pl->files;

	if (plog_failed(pl))
		return pl->err;
	if (pl->closed)
		return -ENOENT;
	/* indexes (and the epochs' file) that failed get another try, first */
	for (struct segment *s = pl->seg_head; s; s = s->next)
		s->save_failed = 0;
	pl->epochs.failed = 0;
	f->ckpt_wanted = 1;
	f->ckpt_asked++;
	plog_files_run(pl);
	return 0;
}

int plog_checkpoint_wait(struct plog *pl)
{
	uint64_t want = pl->files.ckpt_asked;

	/* store_poll, not store_reap: a truncation in flight ahead of the
	 * checkpoint may wait on the store's flush to go on */
	while (pl->files.ckpt_done < want && !plog_failed(pl) && pl->files.running)
		if (store_poll(pl->st, 1) == 0 && !pl->st->inflight && !pl->st->dirty_head)
			break;     /* nothing left that moves it on: plog_close finishes it */
	return plog_failed(pl) ? pl->err : pl->files.ckpt_err;
}

int plog_checkpoint_sync(struct plog *pl)
{
	uint64_t want;
	int rc = plog_checkpoint(pl);

	if (rc)
		return rc;
	want = pl->files.ckpt_asked;
	/* only the checkpoint's own I/O: nothing more is written meanwhile,
	 * the checkpoint covers what was written when it was asked */
	while (pl->files.ckpt_done < want)
		store_reap(pl->st, 1);
	return pl->files.ckpt_err;
}

/* ---- the queue -------------------------------------------------------- */

/* A save ended: the job's end, then the next one. */
static void files_done(struct file_save *fs, int err)
{
	struct plog *pl = files_log(fs);
	struct plog_files *f = &pl->files;
	int job = f->job;

	f->job = JOB_NONE;
	free(f->buf);
	f->buf = NULL;
	switch (job) {
	case JOB_SEAL:
		seal_end(pl, job, err);
		break;
	case JOB_CKPT_TAIL:
		if (seal_end(pl, job, err) < 0)
			ckpt_end(pl, err);      /* no checkpoint over an unsynced tail */
		else
			ckpt_file(pl);
		break;
	case JOB_CKPT_FILE:
		if (!err)
			pl->checkpointed = f->hw;
		ckpt_end(pl, err);
		break;
	case JOB_LOG_START:
		log_start_end(pl, err);
		break;
	case JOB_FILE:
		free(f->file_cur);
		f->file_cur = NULL;
		break;
	case JOB_EPOCHS:
		plog_epochs_saved(pl, err);
		break;
	}
	plog_files_run(pl);
	/* what waited for an index goes, up to the next one due */
	{
		struct segment *s = pl->seg_head;

		while (s && !plog_index_due(s))
			s = s->next;
		f->seal_gate = s ? s->base_offset : INT64_MAX;
		plog_durable_advance(pl);
	}
	if (!f->job && pl->closed)
		plog_free(pl);
}

void plog_files_run(struct plog *pl)
{
	struct plog_files *f = &pl->files;

	while (f->job == JOB_NONE && f->running && !f->held) {
		struct segment *s;

		if (pl->epochs.due && !pl->epochs.failed && !plog_failed(pl)) {
			epochs_begin(pl);
			continue;
		}
		if (!plog_failed(pl) && (s = seal_next(pl))) {
			if (seal_start(pl, s, JOB_SEAL, s->end) != 0)
				s->save_failed = 1;
			continue;
		}
		f->seal_gate = INT64_MAX;  /* every due index is written (or failed) */
		if (f->del_head) {
			log_start_begin(pl);
			continue;
		}
		if (f->file_head) {
			file_begin(pl);
			continue;
		}
		if (f->ckpt_wanted) {
			f->ckpt_wanted = 0;
			ckpt_begin(pl);
			continue;
		}
		break;
	}
}

void plog_files_start(struct plog *pl)
{
	pl->files.running = 1;
	pl->files.kick = plog_files_run;
	plog_files_run(pl);
}

void plog_files_wait(struct plog *pl)
{
	while (pl->files.job)
		store_poll(pl->st, 1);
}
