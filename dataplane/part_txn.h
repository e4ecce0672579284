/* dataplane/part_txn.h — a partition's side of transactions, on its owner
 * shard: which producers have a transaction open here and since which
 * offset (the last stable offset follows from it), the COMMIT/ABORT markers
 * the coordinator has written, and the index of aborted transactions that
 * read_committed fetches return. The partition (dataplane/part.h) holds
 * one in part.txn and builds on it: it checks and records transactional
 * batches here, and appends the markers this builds.
 *
 * The index lives in memory and in "aborted.txns" next to the log: one
 * 24-byte record (pid, first offset, marker offset; big-endian) per abort,
 * appended when the marker is appended. At open the file is read, entries
 * the log no longer holds are dropped, and the scan of the batches after
 * the producer snapshot adds the aborts the file missed (a crash between
 * the marker and the file write). The file's presence also says that the
 * partition has had transactions: its open scan then reads everything
 * after the snapshot, so no open transaction is missed.
 *
 * Thread: the owner shard. Aborts and the first transaction of a partition
 * write a small file (slow path: once per transaction, never per batch).
 * Owns: the aborted index (aborted[]); it borrows the partition's producer
 * table and the log's directory name.
 * Errors: 0, -errno, or an enum part_err (dataplane/part_err.h); never a
 * Kafka code.
 */
#ifndef SLUICE_PART_TXN_H
#define SLUICE_PART_TXN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dataplane/producer.h"

/* An aborted transaction of one producer: its records lie in
 * [first, last) and its ABORT marker is at `last`. */
struct part_aborted {
	int64_t pid, first, last;
};

struct plog;

struct part_txn {
	struct producer_table *producers;   /* the partition's: its entries carry the open transactions */
	struct plog *pl;            /* the partition's log: its file saves go on the ring */
	const char *dir;            /* the log's directory ("aborted.txns" is there) */
	const char *topic;          /* the partition's name, for messages */
	int32_t index;
	struct part_aborted *aborted;   /* aborted transactions, in marker order */
	uint32_t naborted, cap;
	int64_t lso;                /* first offset of the oldest open transaction, INT64_MAX: none */
	int seen;                   /* the partition has had transactions ("aborted.txns" exists) */
	uint64_t markers;           /* markers written */
};

/* Before the log's open scan: the producer table, the log (its directory
 * holds "aborted.txns") and the name (borrowed for the partition's life);
 * nothing open, nothing aborted. */
void part_txn_init(struct part_txn *t, struct producer_table *producers, struct plog *pl, const char *topic,
		   int32_t index);
/* Give back the index (the log is closed); nothing open. */
void part_txn_free(struct part_txn *t);

/* Load "aborted.txns" (partition open, before the producer scan), keeping
 * the aborts whose marker the log [log_start, next_offset) holds: returns 1
 * when the partition has had transactions (then the scan must read every
 * batch after the snapshot). */
int part_txn_load(struct part_txn *t, int64_t log_start, int64_t next_offset);
/* The scan at open saw batch b: track open transactions and aborts. */
void part_txn_scan(struct part_txn *t, const uint8_t *b);
/* The open scan is over: persist the aborts it found beyond the first
 * `had` (those the file missed) and compute the LSO. */
void part_txn_scanned(struct part_txn *t, uint32_t had);
/* Recompute the LSO cache from the producer table. */
void part_txn_relso(struct part_txn *t);

/* The coordinator added the partition to producer pid's transaction
 * (epoch, begun at since_ns): its transactional batches are taken from now
 * on (now_ms: the producer's activity). 0, PART_ERR_OLD_EPOCH (a newer
 * epoch of pid is known) or PART_ERR_PRODUCERS_FULL. */
int part_txn_begin(struct part_txn *t, int64_t pid, int16_t epoch, uint64_t since_ns, int64_t now_ms);
/* May a transactional batch of (pid, epoch) received at recv_ns be
 * appended? 0 or an enum part_err: PART_ERR_OLD_EPOCH (fenced),
 * PART_ERR_TXN_UNKNOWN (no transaction of pid at epoch is open here: not
 * begun here yet, or ended), PART_ERR_TXN_STATE (sent before the open
 * transaction began: a late write of an earlier one). */
int part_txn_check(const struct part_txn *t, int64_t pid, int16_t epoch, uint64_t recv_ns);
/* A transactional batch of pid was appended at base. */
void part_txn_appended(struct part_txn *t, int64_t pid, int64_t base);

/* The COMMIT or ABORT marker batch of pid's transaction, built in buf
 * (cap bytes; 128 are enough): its length, or -EINVAL. */
ssize_t part_txn_marker_build(uint8_t *buf, size_t cap, int64_t pid, int16_t epoch, int commit,
			      int32_t coordinator_epoch, int64_t now_ms);
/* The marker was appended at `offset`: pid's transaction is closed here
 * (an abort goes into the index and the file). */
void part_txn_marked(struct part_txn *t, int64_t pid, int16_t epoch, int commit, int64_t offset, int64_t now_ms);

/* A follower appended batch b as its leader wrote it: a transactional
 * batch opens its producer's transaction here, a COMMIT or ABORT marker
 * closes it (an abort goes into the index and "aborted.txns", as
 * part_txn_marked does on the leader). now_ms: the producer's activity. */
void part_txn_replicated(struct part_txn *t, const uint8_t *b, int64_t now_ms);
/* The log is about to be cut back to `offset`: the aborts whose marker is
 * at or after it are forgotten and the file rewritten with the rest, once
 * the partition has had transactions (queued on the log's
 * file work, which the cut lets finish first). Open transactions are
 * found again by the rebuild after the cut. */
void part_txn_truncated(struct part_txn *t, int64_t offset);

/* Aborted transactions a read_committed fetch of [from, to] must know:
 * marker at or after `from`, first offset at or before `to`. Fills up to
 * cap into pid[]/first[] and returns how many there are. */
int part_txn_aborted(const struct part_txn *t, int64_t from, int64_t to, int64_t *pid, int64_t *first, int cap);
/* Retention moved the log start: forget aborts wholly before it (and
 * rewrite the file). Slow path. */
void part_txn_trim(struct part_txn *t, int64_t log_start);

#endif
