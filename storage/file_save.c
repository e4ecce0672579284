/* storage/file_save.c — a small file written whole and durably, one step
 * per completion on the shard's ring. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "storage/file_save.h"

enum { FS_SYNC_DATA, FS_OPEN_DIR, FS_OPEN, FS_WRITE, FS_SYNC, FS_CLOSE, FS_RENAME, FS_SYNC_DIR, FS_DONE };

static void finish(struct file_save *fs, int err)
{
	if (fs->fd >= 0)
		close(fs->fd);     /* only after a failure: the close step cleared it */
	fs->fd = -1;
	if (err < 0 && fs->created && fs->dirfd >= 0)
		unlinkat(fs->dirfd, fs->tmp, 0);
	if (fs->dirfd >= 0)
		close(fs->dirfd);
	fs->dirfd = -1;
	store_slot_give(fs->st);   /* (a save waiting for it starts now) */
	fs->done(fs, err);
}

/* The first step at or after fs->step that has something to do. */
static int next_step(const struct file_save *fs, int step)
{
	if (step == FS_SYNC_DATA && fs->sync_fd < 0)
		step = FS_OPEN_DIR;
	if (step == FS_OPEN_DIR && !fs->name[0])
		step = FS_DONE;
	if (step == FS_WRITE && fs->at >= fs->len)
		step = FS_SYNC;
	if (step == FS_SYNC_DIR && !(fs->flags & FILE_SAVE_SYNC_DIR))
		step = FS_DONE;
	return step;
}

/* Submit fs->step: 0; 1 when there is none left (the save is over); or
 * -errno (nothing submitted). */
static int submit(struct file_save *fs)
{
	struct io_uring_sqe *sqe;

	if (fs->step == FS_DONE)
		return 1;
	if (!(sqe = store_sqe(fs->st)))
		return -EBUSY;
	switch (fs->step) {
	case FS_SYNC_DATA:
		io_uring_prep_fsync(sqe, fs->sync_fd, IORING_FSYNC_DATASYNC);
		break;
	case FS_OPEN_DIR:
		io_uring_prep_openat(sqe, AT_FDCWD, fs->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
		break;
	case FS_OPEN:
		io_uring_prep_openat(sqe, fs->dirfd, fs->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		break;
	case FS_WRITE:
		io_uring_prep_write(sqe, fs->fd, fs->buf + fs->at, (unsigned)(fs->len - fs->at), fs->at);
		break;
	case FS_SYNC:
		io_uring_prep_fsync(sqe, fs->fd, fs->flags & FILE_SAVE_FSYNC ? 0 : IORING_FSYNC_DATASYNC);
		break;
	case FS_CLOSE:
		io_uring_prep_close(sqe, fs->fd);
		break;
	case FS_RENAME:
		io_uring_prep_renameat(sqe, fs->dirfd, fs->tmp, fs->dirfd, fs->name, 0);
		break;
	case FS_SYNC_DIR:
		io_uring_prep_fsync(sqe, fs->dirfd, 0);
		break;
	}
	store_call_submit(fs->st, sqe, &fs->call);
	return 0;
}

static void step_done(struct store_call *call, int res)
{
	struct file_save *fs = (struct file_save *)((char *)call - offsetof(struct file_save, call));
	int next = fs->step + 1, rc;

	if (res < 0 && fs->step != FS_SYNC_DIR) {
		if (fs->step == FS_CLOSE)
			fs->fd = -1;   /* a failed close still released it */
		finish(fs, res);
		return;
	}
	/* (the directory's fsync: the file is in place and durable; as in the
	 * blocking code this replaces, its failure is not the save's) */
	switch (fs->step) {
	case FS_OPEN_DIR:
		fs->dirfd = res;
		break;
	case FS_OPEN:
		fs->fd = res;
		fs->created = 1;
		break;
	case FS_WRITE:
		if (res == 0) {
			finish(fs, -EIO);
			return;
		}
		fs->at += (size_t)res;
		next = FS_WRITE;   /* the rest of a short write, or on to the sync */
		break;
	case FS_CLOSE:
		fs->fd = -1;
		break;
	case FS_RENAME:
		fs->created = 0;
		break;
	}
	fs->step = next_step(fs, next);
	if ((rc = submit(fs)) != 0)
		finish(fs, rc > 0 ? 0 : rc);
}

/* A slow-path slot came free for a save that waited: its first step. */
static void slot_ready(struct store_slot_wait *w)
{
	struct file_save *fs = (struct file_save *)((char *)w - offsetof(struct file_save, slot));
	int rc = submit(fs);

	if (rc < 0)
		finish(fs, rc);
}

int file_save_start(struct file_save *fs, struct store *st, const char *dir, const char *name,
		    const void *buf, size_t len, int sync_fd, int flags,
		    void (*done)(struct file_save *fs, int err))
{
	int rc;

	if (name && (strlen(name) >= sizeof(fs->name) || strlen(name) + 4 >= sizeof(fs->tmp)))
		return -ENAMETOOLONG;
	fs->call.done = step_done;
	fs->st = st;
	fs->dir = dir;
	fs->buf = buf;
	fs->len = len;
	fs->at = 0;
	fs->dirfd = fs->fd = -1;
	fs->sync_fd = sync_fd;
	fs->flags = flags;
	fs->created = 0;
	fs->done = done;
	fs->name[0] = fs->tmp[0] = 0;
	if (name) {
		snprintf(fs->name, sizeof(fs->name), "%s", name);
		snprintf(fs->tmp, sizeof(fs->tmp), "%s.tmp", name);
	}
	fs->step = next_step(fs, FS_SYNC_DATA);
	if (fs->step == FS_DONE)
		return -EINVAL;        /* nothing to do */
	fs->slot.ready = slot_ready;
	if (!store_slot_take(st, &fs->slot))
		return 0;              /* slot_ready starts it */
	if ((rc = submit(fs)) < 0)
		store_slot_give(st);
	return rc < 0 ? rc : 0;
}
