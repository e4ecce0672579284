/* storage/plog_replica.h — the follower's path of a partition log: the
 * leader's batches appended as they are, and the cut of a divergent tail
 * after an election (Kafka's KIP-101/279).
 *
 * Thread: the shard that owns the partition (@thread shard), as the rest
 * of the log (storage/plog.h). Owns nothing: a truncation's state is the
 * caller's struct plog_truncate.
 * What lives above storage (idempotent producer state, the aborted
 * transaction index: dataplane/part_replica.c) is brought along by the
 * partition, which calls these.
 * Errors: 0/1 or -errno, each named below.
 */
#ifndef SLUICE_PLOG_REPLICA_H
#define SLUICE_PLOG_REPLICA_H

#include <stdint.h>

#include "storage/plog.h"

/* Append one or more complete RecordBatch v2 received from the leader,
 * byte for byte: base offsets, partition leader epochs, producer ids,
 * epochs and sequences, attributes and CRCs are kept (nothing is stamped
 * or recompressed). The whole set is checked before anything is appended:
 * each batch whole, magic 2, its CRC, at most message.max.bytes, the
 * first at the log end offset, each following on from the one before,
 * leader epochs never going down. Then each is appended as plog_append
 * appends (segment roll, offset and time index, group commit on the
 * shard's ring; no allocation, nothing blocks), and a batch whose leader
 * epoch is above every one the log held opens that epoch at its base
 * offset (pl->leader_epoch; the leader-epoch cache's hook is in
 * plog_replica.c). *appended: bytes of whole batches appended, also when
 * an error stopped the set part way (-ENOBUFS: flush and append the rest).
 * 0, or:
 *   -EEXIST   the first batch starts below the log end (an overlap: the
 *             offsets are held already; truncate or fetch from the LEO);
 *   -ENODATA  the first batch starts above the log end (a gap; a
 *             compacted topic, cleanup.policy=compact, may have one, as
 *             recovery allows);
 *   -EILSEQ   the set is not contiguous, or a leader epoch goes down;
 *   -EBADMSG  a batch is not whole, not magic 2, or its CRC is wrong;
 *   -EMSGSIZE larger than message.max.bytes or what a chunk holds;
 *   -EBUSY    a truncation runs; -EROFS the log failed; -ENOBUFS. */
int plog_append_replica(struct plog *pl, const uint8_t *batches, uint32_t len, uint32_t *appended);

/* Cut the log back to `offset` (plog_truncate_to): every record at or
 * after it goes, from the segment holding it and whole later segments,
 * with their offset and time indexes; the log end offset, the durable
 * offset, the high watermark and "recovery-checkpoint" come back to it.
 * The caller's, until done. */
struct plog_truncate {
	/* in */
	int64_t offset;              /* the new log end: a batch boundary */
	int64_t committed;           /* the caller's committed point (the replicated high
				      * watermark): nothing below it is cut */
	uint8_t *buf;                /* 4 KiB aligned: the read that finds the cut */
	uint32_t buf_cap;            /* at least message.max.bytes + 64 KiB */
	void (*done)(struct plog_truncate *t);   /* when plog_truncate_to returned 0 */
	void *arg;
	void (*on_step)(struct plog_truncate *t, int step);   /* tests: after each step on disk */
	/* out */
	int err;
	/* internal */
	struct plog *pl;
	struct store_flusher wait;   /* on the store's list until the log is quiet */
	struct store_call call;      /* the step on the ring */
	struct file_save fs;         /* "truncate-to", "recovery-checkpoint" */
	struct plog_read rd;
	struct segment *gone;        /* later segments (all of them: plog_start_at): off the
				      * log, files not yet removed */
	int full;                    /* plog_start_at: the whole log goes */
	int64_t seg_base;            /* the segment cut (found by the read) */
	uint64_t pos;                /* where */
	int step;
	int dirfd;
	char text[64];
	char name[48];
};

/* 1: done now (t->err: -ERANGE outside [max(log start, committed), log
 * end], -EINVAL not a batch boundary, -EBUSY another truncation runs,
 * -EROFS failed or closed; 0 with offset == log end: nothing to cut);
 * 0: t->done runs once the cut is durable, or failed (t->err; a failure
 * on disk fails the log, and the next open finishes the cut).
 * Appends wait (-EBUSY) from now on. The log first gets quiet (writes
 * landed, its file work and disk reads over), then the cut is made in
 * memory at once and on disk on the shard's ring, nothing blocking:
 * "truncate-to" written durably (the commit point: from then on the next
 * open finishes the cut, plog_open), indexes and later segments removed,
 * the segment cut with IORING_OP_FTRUNCATE and fsync'ed,
 * "recovery-checkpoint" lowered, the directory fsync'ed, "truncate-to"
 * removed. A crash leaves the log before the cut or after it. @thread shard */
int plog_truncate_to(struct plog *pl, struct plog_truncate *t);
/* The same, waiting (tests, tools): 0 or -errno. */
int plog_truncate_to_sync(struct plog *pl, int64_t offset, int64_t committed);

/* Empty the log and start it at t->offset (Kafka's
 * truncateFullyAndStartAt: a follower whose log ends below its leader's
 * log start; or one whose leader's log ends below this log's start).
 * t->committed, t->buf and t->buf_cap are not used. Every
 * segment goes, the log start, log end, durable offset and high
 * watermark become t->offset, the leader-epoch cache is emptied (the
 * leader's batches fill it again) and "recovery-checkpoint" removed.
 * 1: done now (t->err: -ERANGE a negative offset, -EBUSY a truncation
 * runs, -EROFS failed or closed; 0: empty and there already); 0: t->done
 * runs once the log starts
 * there durably, or failed (t->err; a failure on disk fails the log, and
 * the next open finishes it). Appends wait (-EBUSY) from now on. As a
 * cut: the log first gets quiet (and no next segment is being
 * prepared); then, in memory at once, the segments leave the log and an
 * empty segment at t->offset takes their place, its file created as
 * ".next.log" (or the prepared one taken); on the shard's ring, nothing
 * blocking: "start-at" saved durably (the commit point: from then on the
 * next open finishes it, plog_start_redo), the old segments' indexes and
 * files unlinked, newest first, ".next.log" renamed to the new segment's
 * name, "leader-epoch-checkpoint" and "recovery-checkpoint" unlinked,
 * "log-start-offset" saved, the directory fsync'ed, "start-at" removed,
 * the directory fsync'ed again. A crash leaves the log as it was or
 * empty at t->offset. @thread shard */
int plog_start_at(struct plog *pl, struct plog_truncate *t);
/* The same, waiting (tests, tools): 0 or -errno. */
int plog_start_at_sync(struct plog *pl, int64_t offset);

#endif
