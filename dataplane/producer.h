/* dataplane/producer.h — idempotent producer state of one partition: for
 * each producer id its epoch and its last PRODUCER_BATCHES batches (first
 * and last sequence, base and last offset), so that a batch the producer
 * sends again (its acknowledgement was lost) is acknowledged again with its
 * first offset instead of being appended twice, and a gap or a stale epoch
 * is refused.
 *
 * Thread: the partition's owner shard only. Owns: its table (allocated
 * per producer id, never per batch). Errors: producer_check's verdicts
 * (enum producer_verdict, no Kafka codes: the handlers map them at their
 * edge through the partition's enum part_err); -errno elsewhere.
 */
#ifndef SLUICE_PRODUCER_H
#define SLUICE_PRODUCER_H

#include <stdint.h>

#include "storage/store.h"

#define PRODUCER_BATCHES 5          /* what librdkafka and Kafka keep in flight */

struct producer_batch {
	int32_t first_seq, last_seq;
	int64_t base_offset, last_offset;
};

struct producer_entry {
	int64_t pid;                    /* -1: free slot */
	int16_t epoch;
	uint8_t n;                      /* batches kept, newest at b[(head + n - 1) % 5] */
	uint8_t head;
	uint8_t txn_open;               /* the coordinator added this partition to the producer's
					 * ongoing transaction: transactional batches are taken */
	int64_t last_ms;                /* last append: for expiry */
	int64_t txn_first;              /* first offset of the producer's open transaction here, -1: none */
	uint64_t txn_since_ns;          /* when the request that opened it was received (CLOCK_MONOTONIC) */
	struct producer_batch b[PRODUCER_BATCHES];
};

struct producer_table {
	struct producer_entry *e;
	uint32_t cap, n;                /* cap: power of two or 0 */
};

enum producer_verdict {
	PRODUCER_APPEND = 0,
	PRODUCER_DUPLICATE = -1,
	PRODUCER_OUT_OF_ORDER = 1,   /* a gap in the sequence, or a new epoch not from 0 */
	PRODUCER_OLD_EPOCH = 2,      /* a zombie of an older epoch */
};

/* Judge a batch of producer `pid`: PRODUCER_APPEND, PRODUCER_DUPLICATE (the
 * batch was appended before: *dup says where), PRODUCER_OUT_OF_ORDER or
 * PRODUCER_OLD_EPOCH (refused). A producer id
 * the table does not know is accepted (its state expired or predates
 * what recovery read back). */
int producer_check(const struct producer_table *t, int64_t pid, int16_t epoch, int32_t first_seq,
		   int32_t last_seq, struct producer_batch *dup);
/* Remember an appended batch. -ENOMEM leaves the table as it was. */
int producer_record(struct producer_table *t, int64_t pid, int16_t epoch, int32_t first_seq, int32_t last_seq,
		    int64_t base_offset, int64_t last_offset, int64_t now_ms);
/* The entry of `pid`, created (epoch `epoch`, no batches) when absent and
 * `create`; NULL when absent (or -ENOMEM). */
struct producer_entry *producer_entry(struct producer_table *t, int64_t pid, int16_t epoch, int create);
/* Forget producers idle for ttl_ms (never one with an open transaction). */
void producer_expire(struct producer_table *t, int64_t now_ms, int64_t ttl_ms);
void producer_table_free(struct producer_table *t);

/* Snapshots: the table as of log offset `covered` in "<dir>/producers.snapshot".
 * A save runs on the shard's ring, one step per completion: open the
 * temporary name, write, fdatasync, close, rename over the snapshot. The
 * rename comes only after the data is durable, so a crash at any step
 * leaves the previous snapshot whole (or none): a restart reads a snapshot
 * only if every byte of it reached the disk. Nothing acknowledged depends
 * on a snapshot: it only spares a restart the scan of the log, and a
 * restart without it scans. */
struct producer_snap {
	struct store_call call;      /* the step in flight completes here */
	struct store *st;            /* borrowed: the shard's */
	int dirfd;                   /* borrowed: the log's directory, open until done */
	int fd;                      /* the temporary file, -1 when closed */
	int step;
	int busy;                    /* a save in flight: another must wait for done */
	int err;                     /* 0, or the -errno of the step that failed */
	int64_t covered;
	uint8_t *buf;                /* the serialized table, heap, freed before done */
	size_t len, at;
	void (*done)(struct producer_snap *s);   /* the save ended (err says how) */
	void *arg;
};

/* Serialize t and start saving it (t may change from then on). 0: done
 * will run; -errno: nothing started, done will not run. @thread shard */
int producer_snapshot_start(struct producer_snap *s, const struct producer_table *t, struct store *st,
			    int dirfd, int64_t covered);
/* Start, then poll the store until the save ends (closing, tests): 0 or
 * -errno. @thread shard */
int producer_snapshot_save(const struct producer_table *t, struct store *st, int dirfd, int64_t covered);
/* Fill an empty table from the snapshot and return the offset it covers,
 * or -1 (none, or unreadable: the caller scans the log instead). Start-up
 * only (the partition opens): blocking file I/O. */
int64_t producer_snapshot_load(struct producer_table *t, int dirfd);

/* The last sequence of a batch whose first is `first` and that holds
 * `count` records (sequences wrap from INT32_MAX to 0). */
static inline int32_t producer_seq_add(int32_t first, int32_t delta)
{
	int64_t s = (int64_t)first + delta;

	return (int32_t)(s > INT32_MAX ? s - INT32_MAX - 1 : s);
}

#endif
