/* storage/plog_internal.h — shared between plog*.c only. @thread shard */
#ifndef SLUICE_PLOG_INTERNAL_H
#define SLUICE_PLOG_INTERNAL_H

#include "storage/plog.h"

#define PLOG_NEXT_NAME ".next.log"
#define PLOG_LOG_START_FILE "log-start-offset"
/* "recovery-checkpoint": the durable high watermark, Kafka's recovery-point
 * checkpoint. One line: "sluice-checkpoint 1 hw <offset>". Every offset
 * below hw was acknowledged (or could have been) and written power-safe
 * before the file was: recovery never lets the log end fall below it. */
#define PLOG_CHECKPOINT_FILE "recovery-checkpoint"
#define PLOG_CHECKPOINT_TAG "sluice-checkpoint 1 hw "

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* Failed (an I/O error): nothing more is written. A log marked closing
 * (-ESHUTDOWN) refuses appends but still writes what it holds and
 * checkpoints. */
static inline int plog_failed(const struct plog *pl)
{
	return pl->err && pl->err != -ESHUTDOWN;
}

/* The partition directory, opened when a slow path needs it and closed
 * again by plog_dir_release (so an idle partition holds one descriptor:
 * its active segment). */
static inline int plog_dirfd(struct plog *pl)
{
	if (pl->dirfd < 0)
		pl->dirfd = open(pl->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return pl->dirfd;
}

static inline void plog_dir_release(struct plog *pl)
{
	if (pl->dirfd >= 0) {
		close(pl->dirfd);
		pl->dirfd = -1;
	}
}

/* "truncate-to": a truncation's commit point (storage/plog_replica.c).
 * One line: "sluice-truncate 1 to <offset>". While it exists the next
 * open first cuts the log back to that offset (plog_truncate_redo). */
#define PLOG_TRUNCATE_FILE "truncate-to"
#define PLOG_TRUNCATE_TAG "sluice-truncate 1 to "
/* "start-at": a restart of the whole log at an offset (plog_start_at), its
 * commit point. One line: "sluice-start-at 1 at <offset>". While it
 * exists the next open first empties the log and starts it there
 * (plog_start_redo). */
#define PLOG_START_FILE "start-at"
#define PLOG_START_TAG "sluice-start-at 1 at "

/* Append one batch of size bytes at the log end (plog_append's body):
 * stamp: the leader's append, the base offset and leader epoch are set in
 * the stored copy; else the bytes are kept as they are, the batch's own
 * base offset (at or after the log end, checked by the caller) is where
 * it lands (plog_append_replica). *base_offset: where. */
int plog_append_bytes(struct plog *pl, const uint8_t *batch, uint32_t size, int stamp, int64_t *base_offset);
/* At open, before recovery: finish a truncation whose "truncate-to" a
 * crash left (blocking file work, as recovery's). 0 or -errno. */
int plog_truncate_redo(struct plog *pl);
/* At open, before the truncation's redo and recovery: finish a restart of
 * the log whose "start-at" a crash left. 0 or -errno. */
int plog_start_redo(struct plog *pl);

/* Set the callbacks the store and the tail pool call (group commit,
 * completions, chunk eviction): once, before the log is used. */
void plog_init_callbacks(struct plog *pl);
/* A new segment at the end of the log (segment_create, linked, its first
 * extent asked for): fd >= 0 && prepared: the prepared ".next.log",
 * renamed to its segment name; fd >= 0 && !prepared: an existing segment
 * file (recovery); fd < 0: create the file. */
int plog_segment_add(struct plog *pl, int64_t base, int fd, uint64_t alloc, int prepared, struct segment **out);
/* Take a segment off the log's list (it is not freed). */
void plog_segment_unlink(struct plog *pl, struct segment *seg);
/* seg is sealed and wholly on disk: its index file is written by the log's
 * file work (plog_files.c), on the ring, after the fdatasync of its data
 * (unless every write already was synchronous); what it holds and what
 * follows is acknowledged after that (files.seal_gate). Through the log's hook: plog.c is below
 * plog_files.c. Before the log is open (recovery) the work waits for
 * plog_files_start. */
static inline void plog_seal_segment(struct plog *pl, struct segment *seg)
{
	/* (the file work finds it by its state: sealed, flushed, no index) */
	if (seg->base_offset < pl->files.seal_gate)
		pl->files.seal_gate = seg->base_offset;
	if (pl->files.kick)
		pl->files.kick(pl);
}
/* Acknowledge what retired writes reached (durable_offset, the high
 * watermark, the callback), up to the first sealed segment whose index is
 * due. */
void plog_durable_advance(struct plog *pl);
/* Free the log, or, with an operation still in flight (a write, the next
 * segment's preparation, a disk read...), leave it to the last completion
 * (pl->closed says it is closed). */
void plog_free(struct plog *pl);
/* The segment's index is due: sealed, wholly written, its index not (yet)
 * written, and the last try did not fail. */
static inline int plog_index_due(const struct segment *seg)
{
	return seg->sealed && seg->flushed >= seg->end && !seg->index_saved && !seg->save_failed;
}

/* Something still uses the segment: a response points into its tail
 * memory, a disk read of it is in flight, or its index is due or being
 * written (acknowledgements wait for it). Retention, DeleteRecords and the
 * cleaner leave it for a later pass. */
static inline int plog_segment_busy(const struct plog *pl, const struct segment *seg)
{
	if (seg->reads || seg->saving || plog_index_due(seg))
		return 1;
	for (const struct tail_chunk *c = pl->chunk_head; c; c = c->next)
		if (c->seg == seg && c->refs)
			return 1;
	return 0;
}
int plog_chunk_start(struct plog *pl, uint32_t need);
void plog_chunks_reclaim(struct plog *pl);
void plog_chunks_drop(struct plog *pl, struct segment *only);

/* The log's file work (plog_files.c). */
/* Start it once the log is open (what recovery left to write goes first). */
void plog_files_start(struct plog *pl);
/* Begin the next piece of work if none runs. */
void plog_files_run(struct plog *pl);
/* Poll the store until no work is left (closing, opening). */
void plog_files_wait(struct plog *pl);
/* Delete the segments wholly below the log start that nothing uses. */
void plog_drop_below_start(struct plog *pl);

/* Synchronous sequential reader over a segment file (recovery, time
 * lookups, the cleaner): large aligned preads on the O_DIRECT fd. */
struct seg_scan {
	int fd;
	uint8_t *buf;
	size_t cap;
	uint64_t buf_pos;    /* file position of buf[0] */
	size_t buf_len;      /* valid bytes in buf */
	uint64_t pos;        /* position of the next batch */
	uint64_t limit;      /* stop at this position */
};

int seg_scan_init(struct seg_scan *sc, int fd, uint64_t pos, uint64_t limit, size_t cap);
void seg_scan_fini(struct seg_scan *sc);
/* Make `need` bytes at sc->pos readable; returns a pointer or NULL at EOF
 * / limit / read error (*err set to -errno or 0). */
const uint8_t *seg_scan_peek(struct seg_scan *sc, size_t need, int *err);

#endif
