/* storage/store.h — one shard's storage engine: its io_uring (borrowed from
 * the shard, or owned in tests and tools), its tail memory, and group commit.
 * It knows nothing of what it writes: the partition logs above it hand it
 * their operations with a completion each (struct store_call) and join
 * group commit as flush participants (struct store_flusher).
 *
 * Thread: the owning shard only. The module creates no threads and takes
 * no locks.
 * Owns: the tail pool and the list of dirty flushers (each borrowed: it is
 * embedded in its partition log, which takes itself off the list before it
 * is freed).
 * Group commit: store_flush() asks every dirty flusher to turn its unwritten
 * bytes into O_DIRECT write SQEs (a partition log: up to PLOG_MAX_WRITES in
 * flight, never two over the same 4 KiB block) and submits them all with
 * one io_uring_submit.
 * Completions come back through store_complete(), called by the shard loop
 * for every CQE whose user_data carries a storage op (store_owns_cqe); each
 * calls the completion its op carries.
 * Errors: 0/count or -errno.
 */
#ifndef SLUICE_STORE_H
#define SLUICE_STORE_H

#include <liburing.h>
#include <stdint.h>

#include "storage/lathist.h"
#include "storage/tail.h"

/* user_data = pointer | op. Pointers are 8-byte aligned, so ops 1..7 fit in
 * the low bits; 6 is storage's, 5 and 7 are left to the shard. */
enum store_op {
	STORE_OP_CALL = 6,      /* struct store_call: an op with its own completion */
};
#define STORE_OP_MASK 7ull

/* A storage operation on the shard's ring, with its completion: the CQE
 * calls done(call, cqe->res) on the shard, and done finds its op as the
 * struct that embeds `call` (a partition log's write slot or next segment's
 * preallocation, a segment's extent, a read, the read-back of an evicted
 * partial block; on the slow path a small file's save step (file_save: a
 * segment index, a checkpoint), a producer snapshot's write, fdatasync or
 * rename, a compaction's step). The struct
 * is the caller's and must live until done runs; one SQE in flight per
 * call. Nothing is allocated per operation. */
struct store_call {
	void (*done)(struct store_call *call, int res);
} __attribute__((aligned(8)));

/* A participant of group commit (a partition log): embedded in its owner,
 * which sets both functions before its first store_mark_dirty.
 * store_flush takes each dirty flusher off the list and calls prepare:
 * queue its next writes (store_sqe, store_call_prep; the flush submits
 * them) and return how many SQEs it prepared. One that prepare did not
 * mark dirty again but that is still pending (bytes no write was submitted
 * for: its writes in flight are at their limit, or a partial block is
 * still being written) stays on the list and goes first next time. */
struct store_flusher {
	int (*prepare)(struct store_flusher *f);
	int (*pending)(const struct store_flusher *f);
	struct store_flusher *dirty_next;
	struct store_flusher *held_next;
	/* set by prepare when it writes nothing yet on purpose (a log whose
	 * records are acknowledged from memory lets its partial block wait
	 * for more): asked again at this time (st->now_ns), or at once by a
	 * flush of everything (store_flush_all, store_poll); 0: not held */
	uint64_t hold_until;
	uint8_t dirty;             /* on the store's list */
	uint8_t held;              /* on its held list */
};

/* Slow-path chains of operations (a small file's save: storage/file_save.h)
 * each hold one of a few slots from their first step to their last, so a
 * burst of them (every partition's checkpoint on the retention tick) keeps
 * a bounded number of files open and of syncs in flight; the others wait
 * their turn, oldest first. */
#define STORE_SLOW_SLOTS 8
struct store_slot_wait {
	void (*ready)(struct store_slot_wait *w);   /* the slot is yours now */
	struct store_slot_wait *next;
};

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
	uint64_t split_writes;     /* writes split at the partial block they rewrite (plog.c) */
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
	struct store_flusher *dirty_head;   /* flushers with unwritten data */
	struct store_flusher *dirty_tail;
	/* flushers holding their writes back until hold_until, oldest first
	 * (each holds for the same time from when it began: the head is due
	 * first) */
	struct store_flusher *held_head, *held_tail;
	int flush_all;             /* in a flush that ignores holds */
	unsigned inflight;         /* storage SQEs not yet completed */
	unsigned slow_slots;       /* slots held (STORE_SLOW_SLOTS at most) */
	struct store_slot_wait *slot_head, *slot_tail;   /* waiting for one, borrowed */
	struct store_cqe *foreign; /* the shard's completions seen by store_poll */
	unsigned nforeign, foreign_cap;
	uint64_t now_ns;           /* set by the loop; handlers never read the clock */
	struct store_stats stats;
	/* a write queued to retired (its bytes durable per log.durability,
	 * every earlier write of the log landed): written by the owner only,
	 * read by the control thread (storage/lathist.h) */
	struct lathist write_lat;
	/* why the last partition log refused to open (-EUCLEAN): the file and what to do,
	 * for the caller's message; "" otherwise. Owner thread only. */
	char problem[512];
};

/* ring NULL: create a private ring (tests, tools). @thread shard (setup) */
int store_init(struct store *st, struct io_uring *ring, size_t tail_budget);
void store_fini(struct store *st);

static inline int store_owns_cqe(uint64_t user_data)
{
	return (user_data & STORE_OP_MASK) == STORE_OP_CALL;
}

/* Queue a flusher for the next group commit (once: a dirty one stays where
 * it is). @thread shard */
void store_mark_dirty(struct store *st, struct store_flusher *f);
/* Take a flusher off the list, if it is on it (its owner closes).
 * @thread shard */
void store_unmark_dirty(struct store *st, struct store_flusher *f);

/* Group commit: let every dirty flusher prepare its writes (as many as it
 * may have in flight) and submit them all at once. Returns the number of
 * writes submitted. @thread shard */
int store_flush(struct store *st);
/* The same, holds ignored: every byte not written is submitted (a full
 * tail memory, a wait for writes). @thread shard */
int store_flush_all(struct store *st);
/* When the oldest held flusher is due (0: none held): the loop wakes for
 * it. @thread shard */
static inline uint64_t store_held_until(const struct store *st)
{
	return st->held_head ? st->held_head->hold_until : 0;
}

/* Handle one storage CQE. @thread shard */
void store_complete(struct store *st, struct io_uring_cqe *cqe);

/* For tests and tools with a private ring, and waits for writes: flush
 * everything (store_flush_all), then reap completions;
 * wait for at least one if wait != 0 and anything is in flight. Returns the
 * number of completions handled. */
int store_poll(struct store *st, int wait);

/* Take a slow-path slot: 1, it is yours; 0, w->ready runs once one is
 * given back (w is the caller's until then). @thread shard */
int store_slot_take(struct store *st, struct store_slot_wait *w);
/* Give a slot back; the oldest waiter gets it (its ready runs now).
 * @thread shard */
void store_slot_give(struct store *st);

/* store_poll without the flush: only what is in flight completes (a wait
 * for one operation that must not write anything new meanwhile). */
int store_reap(struct store *st, int wait);

/* Run store_poll until nothing is in flight or dirty. */
void store_drain(struct store *st);

/* Get an SQE, submitting pending ones if the SQ is full. */
struct io_uring_sqe *store_sqe(struct store *st);

/* Tag a prepared SQE with `call` and count it in flight; it is submitted
 * with the next submission (a group commit's). Its completion calls
 * call->done. @thread shard */
static inline void store_call_prep(struct store *st, struct io_uring_sqe *sqe, struct store_call *call)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)call | STORE_OP_CALL);
	st->inflight++;
}

/* store_call_prep, and submit it now. @thread shard */
void store_call_submit(struct store *st, struct io_uring_sqe *sqe, struct store_call *call);

#endif
