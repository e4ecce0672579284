/* storage/store.h — one shard's storage engine: its io_uring (borrowed from
 * the shard, or owned in tests and tools), its tail memory, and group commit.
 *
 * Thread: the owning shard only. The module creates no threads and takes
 * no locks.
 * Owns: the tail pool and the list of dirty partitions.
 * Group commit: store_flush() turns every dirty partition of the shard into
 * O_DIRECT write SQEs (up to PLOG_MAX_WRITES in flight per partition, never
 * two over the same 4 KiB block) and submits them all with one
 * io_uring_submit.
 * Completions come back through store_complete(), called by the shard loop
 * for every CQE whose user_data carries a storage op (store_owns_cqe).
 * Errors: 0/count or -errno.
 */
#ifndef SLUICE_STORE_H
#define SLUICE_STORE_H

#include <liburing.h>
#include <stdint.h>

#include "storage/lathist.h"
#include "storage/tail.h"

/* user_data = pointer | op. Pointers are 8-byte aligned, so ops 1..7 fit in
 * the low bits; 1..4 and 6 are storage's, 5 and 7 are left to the shard. */
enum store_op {
	STORE_OP_WRITE = 1,     /* struct plog_write: O_DIRECT segment write */
	STORE_OP_FALLOC = 2,    /* struct segment: extent preallocation */
	STORE_OP_READ = 3,      /* struct plog_read: O_DIRECT read */
	STORE_OP_PREP = 4,      /* struct plog: next segment's first extent */
	STORE_OP_CALL = 6,      /* struct store_call: an op with its own completion */
};
#define STORE_OP_MASK 7ull

/* A storage operation of the slow path on the shard's ring (a producer
 * snapshot's write, its fdatasync, its rename; a compaction's): the
 * completion calls done(call, cqe->res) on the shard. The struct is the
 * caller's and must live until done runs; one SQE in flight per call. */
struct store_call {
	void (*done)(struct store_call *call, int res);
} __attribute__((aligned(8)));

struct plog;

/* Counters of the store, written by the owner shard only; those the
 * control thread reads for /metrics (writes, write_bytes, reads,
 * read_bytes, io_errors, flushes, and the tail pool's hits, misses, used)
 * are stored whole with store_stat_add, a relaxed atomic store of the
 * owner's own value plus n (a plain add on x86-64). */
static inline void store_stat_add(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, *c + n, __ATOMIC_RELAXED);
}

struct store_stats {
	uint64_t flushes;          /* store_flush calls that submitted work */
	uint64_t writes;           /* write SQEs */
	uint64_t write_bytes;
	uint64_t reads;
	uint64_t read_bytes;
	uint64_t fallocs;
	uint64_t falloc_errors;
	uint64_t io_errors;
	uint64_t sync_opens;       /* rolls that had no prepared segment */
	uint64_t max_inflight_writes; /* most writes one partition had in flight at once */
};

/* A completion of the ring's owner (not the store's) that a nested
 * store_poll took off the ring: kept for the owner's loop. */
struct store_cqe {
	uint64_t user_data;
	int32_t res;
	uint32_t flags;
};

struct store {
	struct io_uring *ring;     /* borrowed from the shard, or &own_ring */
	struct io_uring own_ring;
	int owns_ring;
	struct tail_pool tail;
	struct plog *dirty_head;   /* partitions with unwritten data */
	struct plog *dirty_tail;
	unsigned inflight;         /* storage SQEs not yet completed */
	struct store_cqe *foreign; /* the shard's completions seen by store_poll */
	unsigned nforeign, foreign_cap;
	uint64_t now_ns;           /* set by the loop; handlers never read the clock */
	struct store_stats stats;
	/* a write queued to retired (its bytes durable per log.durability,
	 * every earlier write of the log landed): written by the owner only,
	 * read by the control thread (storage/lathist.h) */
	struct lathist write_lat;
	/* why the last plog_open refused (-EUCLEAN): the file and what to do,
	 * for the caller's message; "" otherwise. Owner thread only. */
	char problem[512];
};

/* ring NULL: create a private ring (tests, tools). @thread shard (setup) */
int store_init(struct store *st, struct io_uring *ring, size_t tail_budget);
void store_fini(struct store *st);

static inline int store_owns_cqe(uint64_t user_data)
{
	uint64_t op = user_data & STORE_OP_MASK;

	return (op >= STORE_OP_WRITE && op <= STORE_OP_PREP) || op == STORE_OP_CALL;
}

/* Queue a partition for the next group commit. @thread shard */
void store_mark_dirty(struct store *st, struct plog *pl);

/* Group commit: prepare the writes of every dirty partition (as many as
 * its ring of PLOG_MAX_WRITES and the block-overlap rule allow) and submit
 * them all at once. Returns the number of writes submitted.
 * @thread shard */
int store_flush(struct store *st);

/* Handle one storage CQE. @thread shard */
void store_complete(struct store *st, struct io_uring_cqe *cqe);

/* For tests and tools with a private ring: flush, then reap completions;
 * wait for at least one if wait != 0 and anything is in flight. Returns the
 * number of completions handled. */
int store_poll(struct store *st, int wait);

/* Run store_poll until nothing is in flight or dirty. */
void store_drain(struct store *st);

/* Get an SQE, submitting pending ones if the SQ is full. */
struct io_uring_sqe *store_sqe(struct store *st);

/* Tag a prepared SQE with `call` and submit it: its completion calls
 * call->done. @thread shard */
void store_call_submit(struct store *st, struct io_uring_sqe *sqe, struct store_call *call);

#endif
