/* dataplane/part_replica.h — a partition as a follower holds it: the
 * leader's batches appended as they are (storage/plog_replica.h) with
 * what the partition keeps beside its log brought along (idempotent
 * producers' last sequences, open transactions, the aborted index), and
 * the cut of a divergent tail after an election with that state brought
 * back to the cut. The fetcher (replication) is built on these.
 *
 * Thread: the owner shard only, as dataplane/part.h.
 * Errors: -errno (plog_append_replica's, plog_truncate_to's), -ENOENT
 * when the partition was deleted.
 */
#ifndef SLUICE_PART_REPLICA_H
#define SLUICE_PART_REPLICA_H

#include <stdint.h>

#include "dataplane/part.h"
#include "storage/plog_replica.h"

/* Append the leader's batches rec[0, len) (plog_append_replica: kept as
 * they are, checked whole first); when the tail memory is full, write what
 * is buffered (store_flush) and go on once. For each batch appended, as
 * the leader's produce and markers did: an idempotent producer's sequence
 * (producer_record), a transactional batch's transaction, a marker's
 * close and abort (part_txn_replicated). *appended: bytes appended, also
 * on an error part way. Nothing allocated per batch; an abort writes
 * "aborted.txns" (once per transaction, as on the leader). @thread owner */
int part_append_replica(struct part *p, const uint8_t *rec, uint32_t len, uint32_t *appended);

/* The leader's log start, as its fetch answers give it (Kafka's
 * ReplicaFetcherThread: maybeIncrementLogStartOffset(leaderLogStartOffset,
 * LeaderOffsetIncremented) on every answer): p's log start moves up to
 * it, never past p's high watermark (Kafka refuses a start above the
 * high watermark; a follower's is the least of the leader's and its
 * own durable end, so this holds once what it fetched is durable),
 * through DeleteRecords' own path (plog_delete_records: "log-start-offset"
 * saved on the shard's ring, then the segments wholly below it go). One
 * move at a time per partition; nothing when the start is there, a
 * move is in flight, or the log is being cut. 1: a move started; 0:
 * none. @thread owner */
int part_follow_log_start(struct part *p, int64_t leader_start);

/* A follower's cut (the caller's until done). */
struct part_truncate {
	/* in */
	int64_t offset;              /* the new log end: a batch boundary */
	int64_t committed;           /* nothing below it is cut */
	uint8_t *buf;                /* 4 KiB aligned, buf_cap: plog_truncate's */
	uint32_t buf_cap;
	void (*done)(struct part_truncate *pt);   /* once, when part_truncate_to returned 0 */
	void *arg;
	/* out */
	int err;
	/* internal */
	struct part *p;
	struct plog_truncate t;
};

/* Cut p's log back to pt->offset and bring the partition's state back:
 *  1. "producers.snapshot" is removed (it may cover offsets the cut takes
 *     away; the cut's directory fsync makes the removal durable before
 *     anything is appended after the cut), waiting first for a save in
 *     flight (a nested poll of the store: the one wait, milliseconds, once
 *     per election at most);
 *  2. the aborts at or after the cut leave the index and "aborted.txns"
 *     is rewritten, queued before the cut (which lets it finish first);
 *  3. plog_truncate_to, on the shard's ring;
 *  4. the producer table and open transactions are rebuilt from the log
 *     as at open (part_rebuild_producers: blocking reads of the newest
 *     batches, or of the whole log once the partition had transactions).
 * 1: done now (pt->err, as plog_truncate_to's); 0: pt->done runs once
 * the cut is durable and the state rebuilt (pt->err). @thread owner */
int part_truncate_to(struct part *p, struct part_truncate *pt);
/* The same, waiting (tests, tools): 0 or -errno. */
int part_truncate_to_sync(struct part *p, int64_t offset, int64_t committed);

/* Empty p's log and start it at pt->offset (a follower below its leader's
 * log start: Kafka's truncateFullyAndStartAt; plog_start_at), and
 * reset the partition's state with it: "producers.snapshot" removed (as
 * for a cut), every abort dropped and "aborted.txns" rewritten empty
 * (queued before the restart, which lets it finish first), then
 * plog_start_at (storage/plog_replica.h) and the producer table and
 * transactions rebuilt from the empty log. A crash part way opens the
 * log as it was or empty at the offset; a snapshot or abort records left
 * from the old log lie below the new log start, which the open ignores
 * (part_rebuild_producers). pt->committed, buf and buf_cap are not used.
 * 1: done now (pt->err: plog_start_at's); 0: pt->done runs once the log
 * starts there durably (pt->err). @thread owner */
int part_start_at(struct part *p, struct part_truncate *pt);
/* The same, waiting (the fetcher, once per fall below the leader's log
 * start; tests): 0 or -errno. */
int part_start_at_sync(struct part *p, int64_t offset);

#endif
