/* storage/file_save.h — a small file written whole and durably on the
 * shard's io_uring: the recovery checkpoints of storage (a segment's index,
 * "recovery-checkpoint", "log-start-offset") and the small files others
 * keep beside a log.
 *
 * One save is a chain of operations on the ring, each issued from the
 * completion of the one before, so each starts only after the previous
 * one finished:
 *   [fdatasync of another file first: a segment's data under its index]
 *   open the directory, open "<name>.tmp" (created, truncated), write it,
 *   fdatasync it (or fsync), close it, rename it over "<name>",
 *   [fsync the directory].
 * A crash at any step leaves the previous file whole (or none), never a
 * partial one; the new file appears only once its bytes are durable, and
 * a save with a data sync first appears only once that data is durable.
 * A failed step ends the save: the temporary file is removed, done gets
 * the -errno.
 *
 * Thread: the shard that owns the store (or the thread of a private
 * store). No locks; nothing is allocated (the bytes and the directory name
 * are the caller's until done). At most STORE_SLOW_SLOTS saves of a store
 * run at once (each holds two descriptors: the directory, the file); the
 * others wait their turn.
 * Knows nothing of partition logs: whoever embeds it gives it its done.
 */
#ifndef SLUICE_FILE_SAVE_H
#define SLUICE_FILE_SAVE_H

#include <stddef.h>
#include <stdint.h>

#include "storage/store.h"

enum {
	FILE_SAVE_FSYNC = 1,       /* fsync the file (default: fdatasync) */
	FILE_SAVE_SYNC_DIR = 2,    /* fsync the directory after the rename */
};

struct file_save {
	struct store_call call;    /* the step in flight completes here */
	struct store_slot_wait slot;   /* waiting for a slow-path slot of the store */
	struct store *st;          /* borrowed */
	const char *dir;           /* borrowed until done: the directory's path */
	const uint8_t *buf;        /* borrowed until done */
	size_t len, at;
	int dirfd, fd;             /* ours while the save runs, -1 when closed */
	int sync_fd;               /* borrowed: fdatasync'ed before anything else, -1: none */
	int flags;
	int step;
	int created;               /* the temporary file exists (removed on failure) */
	char name[48];             /* "" : only the data sync */
	char tmp[56];
	void (*done)(struct file_save *fs, int err);   /* 0 or -errno, once */
};

/* Start saving len bytes of buf as dir/name. sync_fd >= 0: fdatasync that
 * file first. name NULL: only that sync. The save holds one of the store's
 * slow-path slots from its first step to its last (store_slot_take): with
 * all taken it starts when one is given back. 0: done will run (from a
 * completion, never from inside this call); -errno: nothing started.
 * @thread store owner */
int file_save_start(struct file_save *fs, struct store *st, const char *dir, const char *name,
		    const void *buf, size_t len, int sync_fd, int flags,
		    void (*done)(struct file_save *fs, int err));

#endif
