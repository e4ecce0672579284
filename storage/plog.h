/* storage/plog.h — a partition's log: segments, in-memory tail, appends,
 * reads, recovery, retention and compaction.
 *
 * Thread: the shard that owns the partition; every function here runs on it
 * (@thread shard) unless marked otherwise. No locks, no threads.
 * Owns: its segments (files, indexes) and the tail chunks it holds.
 * Errors: 0/count or -errno. After a write error (EIO, EROFS, ...) the log
 * is failed: appends return -EROFS until it is reopened; what was
 * acknowledged stays readable (STYLE 7). A full filesystem (ENOSPC, EDQUOT,
 * a short write) is not a failure: the log stops writing (nospace), appends
 * return -ENOSPC, and the next append once the writes in flight retired
 * submits the unwritten bytes again (from the last block written) — so the
 * log takes appends again once space returns, without a reopen.
 *
 * Every partition carries, from the first line, the three numbers
 * replication needs: leader_epoch (stamped into each batch), next_offset
 * (log end offset, LEO) and high_watermark. On one node the high watermark
 * is the durable offset: consumers never see a record that a crash could
 * take back.
 */
#ifndef SLUICE_PLOG_H
#define SLUICE_PLOG_H

#include <stdint.h>
#include <sys/uio.h>

#include "storage/file_save.h"
#include "storage/plog_epochs.h"
#include "storage/segment.h"
#include "storage/store.h"
#include "storage/tail.h"

enum plog_durability {
	PLOG_DUR_WRITE = 0,   /* ack when the O_DIRECT write completed (default) */
	PLOG_DUR_SYNC = 1,    /* ack when written with RWF_DSYNC (power-loss safe) */
	PLOG_DUR_MEMORY = 2,  /* ack when buffered in memory (lost on a crash) */
};

struct plog_config {
	uint64_t segment_bytes;      /* log.segment.bytes (1 GiB) */
	uint32_t index_interval;     /* log.index.interval.bytes (4096) */
	uint32_t max_batch;          /* message.max.bytes (1 MiB + overhead) */
	uint64_t initial_extent;     /* first preallocation of a segment (64 KiB) */
	int64_t retention_ms;        /* retention.ms, -1 = forever */
	int64_t retention_bytes;     /* retention.bytes, -1 = unlimited */
	int compact;                 /* cleanup.policy=compact */
	int64_t delete_retention_ms; /* delete.retention.ms */
	int durability;              /* enum plog_durability */
	int compression;             /* compression.type: the codec batches are stored in (the
				      * produce path recompresses, storage/recompress.h); -1 =
				      * producer: as sent */
	int damage_refuses;          /* damage below the durable high watermark fails
				      * the open (-EUCLEAN) and changes nothing, instead
				      * of keeping the rest (the metadata log) */
};

void plog_config_defaults(struct plog_config *cfg);

#define PLOG_MAX_IOV 64

/* Writes in flight per partition, and the size of each. A hot partition
 * keeps up to PLOG_MAX_WRITES writes of whole 4 KiB blocks queued, so one
 * partition alone keeps the device busy. */
#define PLOG_MAX_WRITES 4
#define PLOG_WRITE_IOV (PLOG_MAX_IOV / PLOG_MAX_WRITES)   /* iovecs per write */
#define PLOG_WRITE_MAX (2u << 20)    /* bytes per write */
/* Pending bytes up to which an idle partition writes its partial last
 * block at once (lowest latency); above it the partition is hot and writes
 * whole blocks only, leaving the partial block for when nothing covers it. */
#define PLOG_HOT_BYTES (128u << 10)

/* log.durability=memory: records are acknowledged (and served) once
 * appended, so nothing waits for their write; a log writes once it has
 * PLOG_MEMORY_WRITE_BYTES not written (whole blocks), or once the oldest
 * of them waited PLOG_MEMORY_HOLD_NS (everything, its partial last block
 * too); a sealed segment at once, and everything on a flush of all (a
 * clean stop, a checkpoint, a full tail memory). Each write on a virtual
 * disk costs a VM exit: one a record cost the shard more than half its
 * CPU at linger.ms=0, one a 64 KiB native batch an eighth of it
 * (docs/benchmarks.md). A crash loses at most this much more than the
 * records not yet written, which `memory` already gives up. */
#define PLOG_MEMORY_HOLD_NS 10000000ull
#define PLOG_MEMORY_WRITE_BYTES (1u << 20)

struct plog;
struct plog_truncate;
typedef void plog_durable_fn(struct plog *pl, int64_t durable_offset, int err, void *arg);

/* One O_DIRECT write in flight; a slot of the partition's write ring. Its
 * completion comes back through `call`.
 * Invariants (the ordering hazard of O_DIRECT: two writes in flight over
 * the same 4 KiB block may land in either order):
 *  - the ring holds writes in submission order, which is file order
 *    (segment by segment, position by position); each write adds the bytes
 *    [previous write's end, end) of its segment;
 *  - no two writes in flight cover the same block: a write that ends in a
 *    partial block is the only one allowed to cover that block until it
 *    completes, and the next write starts in that block;
 *  - a write is retired (flushed, durable_offset advanced) only when it and
 *    every write before it completed, so durable offsets advance in order
 *    even though completions arrive in any order. */
struct plog_write {
	struct store_call call;      /* the write's completion */
	struct plog *pl;             /* borrowed: the owner */
	struct segment *seg;         /* borrowed: stays alive while in the ring */
	uint64_t pos;                /* file position, 4 KiB aligned */
	uint64_t bytes;              /* length of the write */
	uint64_t end;                /* logical end of the segment's data it covers */
	int64_t next_offset;         /* durable once this and all earlier writes completed */
	int res;                     /* cqe->res once done */
	uint8_t done;
	uint64_t queued_ns;          /* st->now_ns when it was queued (durable-write latency) */
	struct iovec *iov;           /* PLOG_WRITE_IOV entries of plog.iov */
};

struct plog_recovery {
	uint64_t bytes_scanned;
	uint64_t bytes_truncated;    /* garbage cut at the tail */
	int64_t batches;
	int segments;
	int segments_dropped;        /* torn tail after a roll: never-acknowledged segments */
	int truncated_reason;        /* -BATCH_ERR_* that stopped the scan, 0 = clean end */
	uint64_t truncated_at;       /* file position of the cut in the last kept segment */
	/* recovery points: a segment whose index file is valid is taken from
	 * it without reading its data (the checkpoint vouches for it) */
	int segments_trusted;
	uint64_t bytes_trusted;
	int64_t checkpoint_hw;       /* durable high watermark of "recovery-checkpoint", -1 none */
	/* damage below the durable high watermark (not a torn tail): the bytes
	 * from the damage to the segment's end went to "<segment>.damaged",
	 * offsets [lost_from, lost_to) are gone, later segments are kept */
	int damaged;
	int damaged_reason;          /* -BATCH_ERR_* at the damage, 0 = data missing */
	char damaged_file[32];       /* the first damaged segment's name */
	uint64_t damaged_pos;        /* its byte range moved aside */
	uint64_t damaged_end;
	int64_t lost_from, lost_to;
	int truncate_redone;         /* a cut a crash interrupted was finished first, */
	int64_t truncate_to;         /* back to this offset */
	int start_redone;            /* a restart of the log at an offset (plog_start_at) a crash
				      * interrupted was finished first, */
	int64_t start_at;            /* at this offset */
	/* "leader-epoch-checkpoint" was missing (1) or damaged (2) and was
	 * rebuilt from the batches of every segment (epochs_batches read) */
	int epochs_rebuilt;
	int64_t epochs_batches;
};

/* DeleteRecords (plog_delete_records): the caller's, until done. */
struct plog_delete {
	/* in */
	int64_t offset;              /* the new log start; -1: the high watermark */
	void (*done)(struct plog_delete *d);   /* when the call returned 0 */
	void *arg;
	/* out */
	int err;                     /* 0, -ERANGE, -ENOENT (closed), or the save's -errno */
	/* internal */
	struct plog_delete *next;
};

struct plog;
struct plog_file;

/* The log's small files, written on the shard's ring one at a time
 * (storage/plog_files.c): segment indexes, "recovery-checkpoint",
 * "log-start-offset", files saved beside the log. */
struct plog_files {
	struct file_save fs;         /* the save in flight */
	uint8_t job;                 /* what it is for; 0: none runs */
	uint8_t running;             /* started once the log is open */
	uint8_t ckpt_wanted;         /* a checkpoint was asked for */
	uint8_t held;                /* a truncation cuts the log: no work starts */

	int whole;                   /* the index being written covers its whole segment */
	struct segment *seg;         /* the segment whose index is written (seg->saving) */
	uint64_t seg_end;            /* its end when the index was taken */
	uint8_t *buf;                /* the index image being written: heap, freed at the end */
	char text[96];               /* a small file's line */
	int64_t hw;                  /* the checkpoint's durable high watermark */
	int64_t seal_gate;           /* base of the oldest sealed segment whose index is due
				      * or being written, INT64_MAX: none; nothing at or
				      * above it is acknowledged (plog_durable_advance) */
	uint64_t ckpt_asked, ckpt_started, ckpt_done;   /* checkpoints asked, begun, ended */
	int ckpt_err;                /* how the last one ended */
	struct plog_delete *del_head, *del_tail;   /* DeleteRecords waiting */
	int64_t del_target;          /* the start being saved */
	struct plog_file *file_head, *file_tail, *file_cur;   /* queued, being saved */
	void (*kick)(struct plog *pl);   /* more work may be ready (set once open) */
};

struct plog {
	struct store *st;            /* borrowed: the owning shard's store */
	struct plog_config cfg;
	int dirfd;                   /* -1 unless a slow path has it open */
	int closed;
	char *dir;

	struct segment *seg_head;    /* oldest */
	struct segment *seg_tail;    /* active */
	struct tail_chunk *chunk_head;
	struct tail_chunk *chunk_tail;
	unsigned chunk_shift;        /* size class of the next chunk */

	int64_t log_start;           /* first offset still in the log */
	int64_t next_offset;         /* log end offset (LEO) */
	int64_t durable_offset;      /* everything below is durable per cfg.durability */
	int64_t written_offset;      /* what retired writes reached; durable_offset follows
				      * it up to files.seal_gate */
	int64_t high_watermark;      /* visible to consumers */
	int32_t leader_epoch;        /* stamped into each batch appended (plog_epochs.h) */
	int err;                     /* 0, or the -errno that failed the log */
	uint8_t nospace;             /* a write found the filesystem full: nothing is
				      * submitted until an append asks again (plog_append_bytes) */
	uint8_t nospace_fatal;       /* closing: a full filesystem fails the log */
	uint64_t nospace_errors;     /* writes refused for space (each a retry later) */

	/* group commit: up to PLOG_MAX_WRITES writes in flight, ring wr[] */
	struct store_flusher flush;  /* on the store's dirty list while it has bytes to write */
	uint64_t held_since_ns;      /* durability memory: when its partial block began to wait (0: not) */
	struct tail_owner chunk_owner;   /* what the tail pool calls back for its chunks */
	struct store_call prep_call; /* the next segment's first extent */
	struct store_call reload_call;   /* the partial block read back (plog_chunk_start) */
	struct tail_chunk *reload_room;  /* the chunk whose last page it is read into, or */
	struct tail_chunk *reload_page;  /* a page of the pool it is read into */
	struct segment *reload_seg;  /* where it lives */
	uint64_t reload_base;
	uint32_t reload_head;        /* its bytes before the segment's end then */
	uint8_t inflight;            /* writes in the ring (in flight or done, not retired) */
	uint8_t prep_inflight;
	uint8_t reload_inflight;     /* the partial block of an evicted tail is read back:
				      * no write is submitted until it is in */
	uint8_t wr_head;             /* oldest write of the ring */
	uint8_t inflight_max;        /* most writes ever in flight at once */
	uint32_t reads;              /* disk reads in flight (plog_read): a closed log is
				      * freed after the last */
	/* the newest write submitted (kept for tools that looked at them) */
	struct segment *inflight_seg;
	uint64_t inflight_end;       /* logical end covered by the write */
	uint64_t inflight_bytes;
	int64_t inflight_next_offset;
	struct iovec iov[PLOG_MAX_IOV];   /* PLOG_WRITE_IOV per ring slot */
	struct plog_write wr[PLOG_MAX_WRITES];

	int next_fd;                 /* prepared next segment, -1 if none */
	uint64_t next_alloc;

	plog_durable_fn *on_durable;
	void *durable_arg;
	struct plog_truncate *trunc; /* a truncation in progress (storage/plog_replica.h):
				      * appends wait (-EBUSY) */

	uint64_t bytes_appended;
	uint64_t batches_appended;
	int64_t checkpointed;        /* hw last written to "recovery-checkpoint", -1 none */
	struct plog_files files;
	struct plog_epochs epochs;   /* the leader-epoch cache and its file (plog_epochs.h) */
	struct plog_recovery recovery;
};

/* Open (or create) the log in directory `dir`, recovering it. Segments
 * whose index file is valid are taken from it unread (recovery points);
 * the rest are validated batch by batch. What stops a scan is either
 *  - a torn tail (a crash mid-append): nothing at or above the cut was
 *    ever acknowledged (it is above the durable high watermark of
 *    "recovery-checkpoint" and no later segment was checkpointed): cut
 *    and reported in pl->recovery, as always; or
 *  - damage: the cut is below that watermark or a later checkpointed
 *    segment. The bytes from the damage to the segment's end are moved to
 *    "<segment>.damaged", the hole is skipped (the segment's next_offset
 *    reaches the next segment, or the watermark for the last one, so no
 *    acknowledged offset is ever handed out again), later segments are
 *    kept, and pl->recovery says what and where.
 * -EUCLEAN: the log cannot be opened safely (a segment file is missing
 * between others); st->problem names the file and what to do, and
 * nothing was changed on disk. @thread shard (setup) */
int plog_open(struct store *st, const char *dir, const struct plog_config *cfg, struct plog **out);
/* Recovery point, on the shard's ring (nothing blocks): the index of every
 * sealed segment that lacks one, then the active segment's fdatasync, in
 * write mode, and its index for the written prefix, then
 * "recovery-checkpoint" with the durable high watermark taken before that
 * sync, capped below any earlier segment whose index (written after its
 * own sync) is not in place. The next open scans only what was appended
 * after it. 0: queued (after the log's other file work); -errno: the log
 * failed or is closed. */
int plog_checkpoint(struct plog *pl);
/* plog_checkpoint, then wait for it (reaping completions, flushing no
 * write meanwhile): tests, tools and the metadata log. 0 or -errno. */
int plog_checkpoint_sync(struct plog *pl);
/* Wait for the checkpoints asked so far to end, polling the store (its
 * flush and completions: every log's file work moves on meanwhile, so a
 * caller that asked many logs' checkpoints first waits for them side by
 * side: a shard's stop). Returns early if nothing in the store is left to
 * move it on (plog_close then finishes it). 0 or -errno (the log failed,
 * or the save). */
int plog_checkpoint_wait(struct plog *pl);
/* What recovery found and cut, as one line for the broker's log (no
 * newline): segments and batches kept, bytes scanned, where the last
 * segment was cut and why (batch_strerror), bytes cut after it, segments
 * dropped. Like snprintf: writes at most len bytes including the NUL and
 * returns the length of the whole line; -EINVAL if buf is NULL with len.
 * @thread any (reads pl->recovery and pl->seg_tail only) */
int plog_recovery_describe(const struct plog *pl, char *buf, size_t len);
/* Write all buffered data, checkpoint (plog_checkpoint), close. Blocks
 * (polling the store) until the writes, the checkpoint and the log's other
 * file work complete. A log marked closing (err == -ESHUTDOWN: appends
 * refused, waiters answered) still writes and checkpoints; only a failed
 * log (any other err) skips it. A disk read still in flight ends with
 * -ENOENT, and the log is freed after it (and after its other operations
 * in flight). */
void plog_close(struct plog *pl);

/* Append one validated RecordBatch v2 (size bytes). Stamps BaseOffset and
 * the leader epoch in the stored copy and returns the base offset in
 * *base_offset. -ENOBUFS: tail memory exhausted (retry after a flush);
 * -EROFS: the log failed; -EMSGSIZE: larger than a segment, the largest
 * chunk or the shard's tail memory (shard.tail.memory.bytes); -EBUSY: a
 * truncation runs (storage/plog_replica.h). */
int plog_append(struct plog *pl, const uint8_t *batch, uint32_t size, int64_t *base_offset);
/* A log that found its filesystem full (nospace): once its writes of then
 * retired, submit the unwritten bytes again (appends call it; so does a
 * replica's tick, dataplane/part_role.c, as a follower appends only once
 * its log caught up). */
void plog_space_retry(struct plog *pl);

/* Durability callback: called when durable_offset advances or the log
 * fails. */
static inline void plog_set_durable_cb(struct plog *pl, plog_durable_fn *fn, void *arg)
{
	pl->on_durable = fn;
	pl->durable_arg = arg;
}

/* A read of whole batches from `offset`, at most max_bytes (but always the
 * first batch whole), none at or past max_offset. */
struct plog_read {
	/* in */
	int64_t offset;
	int64_t max_offset;          /* usually the high watermark */
	uint32_t max_bytes;
	uint8_t *buf;                /* 4 KiB aligned, for disk reads */
	uint32_t buf_cap;
	void (*done)(struct plog_read *rd);   /* disk reads complete here */
	void *arg;
	/* out */
	const uint8_t *data;         /* whole batches, borrowed until release */
	uint32_t bytes;
	int err;
	int from_tail;
	/* internal */
	struct store_call call;      /* a disk read's completion */
	struct plog *pl;
	struct tail_chunk *chunk;    /* referenced while data points into it */
	struct tail_pool *tail;      /* the chunk's pool (the release needs no log) */
	struct segment *seg;
	uint64_t rd_pos;
	uint32_t rd_len;
	uint32_t skip;
	int retried;
};

/* 1: complete now (from the tail, or nothing to read); 0: a disk read was
 * submitted and rd->done will be called; <0: -ERANGE (offset outside
 * [log_start, next_offset]) or another -errno. */
int plog_read(struct plog *pl, struct plog_read *rd);
/* Drop the tail reference a completed read holds. */
void plog_read_release(struct plog_read *rd);
/* Synchronous convenience for tests and tools: submit, poll, wait. */
int plog_read_sync(struct plog *pl, struct plog_read *rd);

/* An offset from which reading to the end covers at least the last
 * `window` bytes of the active segment (its start if smaller). For
 * start-up scans of the newest batches. */
int64_t plog_offset_near_end(const struct plog *pl, uint64_t window);

/* ListOffsets by timestamp: the first record with timestamp >= ts. A walk
 * of plog_reads (the tail, or O_DIRECT reads on the shard's ring into buf):
 * segments whose max timestamp is below ts are skipped, the others are read
 * from their time index's start on, batch by batch, to the log end offset.
 * Nothing blocks: a read that needs the disk returns to the loop and the
 * walk goes on from its completion. */
struct plog_time {
	/* in */
	int64_t ts;
	uint8_t *buf;                /* 4 KiB aligned, for disk reads; borrowed until done */
	uint32_t buf_cap;            /* at least 2 * message.max.bytes + 64 KiB to read any batch */
	void (*done)(struct plog_time *q);   /* a walk that returned 0 ends here */
	void *arg;
	/* out */
	int64_t offset;              /* the record's offset (>= log start) */
	int64_t timestamp;           /* its timestamp */
	int err;                     /* 0 found; -ENOENT none; or -errno of a read */
	/* internal */
	struct plog *pl;
	struct plog_read rd;
	int64_t at;                  /* next offset to read */
	int64_t seg_base;            /* base offset of the segment being walked (not a pointer:
				      * retention may delete it while a read is in flight) */
};

/* 1: complete now (q->err and q->offset say); 0: a disk read is in flight
 * and q->done will be called once. The plog must stay open until then.
 * @thread shard */
int plog_find_time(struct plog *pl, struct plog_time *q);
/* Synchronous convenience for tests and tools (it allocates a read buffer
 * and polls the store until the walk ends): 0 found, -ENOENT, -errno. */
int plog_offset_for_time(struct plog *pl, int64_t ts, int64_t *offset, int64_t *timestamp);

/* DeleteRecords: move the log start offset to d->offset (-1, and only -1:
 * the high watermark), persisted ("log-start-offset", on the shard's
 * ring), then delete the segments wholly below it. 1: done now (d->err:
 * 0, or -ERANGE outside [log start, high watermark]: nothing deleted);
 * 0: d->done runs once the start is durable (d->err 0) or its save failed
 * (the start did not move). */
int plog_delete_records(struct plog *pl, struct plog_delete *d);
/* The same, waiting (tests, tools): 0 or -errno. */
int plog_delete_records_sync(struct plog *pl, int64_t offset);

/* A small file "<dir>/<name>" beside the log (name up to 39 bytes), written
 * whole and durably on the shard's ring after the log's other file work:
 * "<name>.tmp" written, fdatasync'ed, renamed over it; a crash leaves the
 * old file or the new. The bytes are copied. 0: queued; -errno. */
int plog_save_file(struct plog *pl, const char *name, const void *data, size_t len);
/* 1 while a save of `name` is queued or running. */
int plog_saving_file(const struct plog *pl, const char *name);

/* Retention by time and size, whole sealed segments. Returns the number of
 * segments deleted. */
int plog_retain(struct plog *pl, int64_t now_ms);

/* Size on disk (bytes of batches) and segment count. */
uint64_t plog_size(const struct plog *pl);
int plog_segment_count(const struct plog *pl);

/* Internal to storage: */
/* The oldest write in flight completed with res (one write at a time). */
void plog_write_done(struct plog *pl, int res);

#endif
