/* dataplane/part.h — a partition as its owner shard holds it: the log, its
 * whole produce (part_produce: the checks, the append, the wait for
 * durability) and its reads (part_read, with the shard's read buffers),
 * and who to wake when its high watermark moves.
 *
 * Thread: the owner shard only. Other shards reach it through messages;
 * each caller routes the answer back to its own shard from the callback
 * it gives.
 * Errors: -errno, or a partition's own reason (enum part_err, positive);
 * never a Kafka code: the handlers choose those at their edge.
 */
#ifndef SLUICE_PART_H
#define SLUICE_PART_H

#include <stdint.h>

#include "dataplane/broker.h"
#include "dataplane/part_err.h"
#include "dataplane/part_txn.h"
#include "dataplane/producer.h"
#include "storage/plog.h"

struct shard;
struct shard_msg;
struct kafka_ctx;

/* Why a partition refuses a produce, beside -errno: enum part_err
 * (dataplane/part_err.h), positive, so that one int carries either. No
 * Kafka codes on the owner: the handlers map these at their edge
 * (part_err_to_kafka, beside the enum). */

/* A produce is done, on the owner: at base (err 0; a batch sent again: its
 * first offset), or refused (base -1) with an enum part_err or -errno;
 * log_start for the answer. Whoever asked routes it back to its own shard
 * (a message): the partition knows no Kafka request nor native session.
 * @thread owner shard */
typedef void (*part_produce_done)(struct shard *owner, void *cookie, int64_t base, int64_t log_start, int err);

/* A produce waiting until the high watermark (acks=all, internal
 * appends), or only the leader's own durable log end (acks=1:
 * durable_only), reaches need. */
struct ack_wait {
	int64_t need;
	int64_t base_offset;
	part_produce_done done;     /* with cookie: part_produce's callers */
	void *cookie;
	/* Internal appends (control/: the coordinators' records), done NULL:
	 * the completion goes to thread `from` (any thread, the control
	 * thread included) as this message, p[0] = ctx, v = { base_offset,
	 * err, log_start }. */
	int16_t from;
	uint8_t durable_only;       /* acks=1; 2: answered already (with a role: it was durable
				     * before an acks=all ahead of it had the ISR) */
	uint8_t min_isr;            /* acks=all with followers: min.insync.replicas (255 at most)
				     * the ISR must still have when the high watermark passes */
	uint32_t deadline_ms;       /* acks=all with followers: fails with PART_ERR_TIMED_OUT from
				     * this shard-clock ms on (wrapping: compared as a difference);
				     * 0: none. (All four in what was padding: the ring's size
				     * per partition stays.) */
	struct kafka_ctx *ctx;
	void (*notify)(void *self, struct shard_msg *m);
};

struct part {
	struct plog *pl;
	struct part_pub *pub;       /* NULL when nobody reads it (tests, tools) */
	struct shard *sh;
	int32_t index;
	char topic[256];
	uint8_t topic_id[16];       /* its topic's id: with index, its key in the owner's
				     * part_table (dataplane/part_table.h) */
	struct ack_wait *acks;      /* ring, oldest first */
	uint32_t ack_head, ack_tail, ack_cap;
	uint32_t ack_durable;       /* with a role: the acks below it were looked at for their
				     * durability (acks=1 answered then, out of queue order) */
	uint64_t watchers;          /* shards with long-polls on this partition */
	int64_t last_hw;
	int deleted;                /* its topic was deleted: the log is closed */
	int64_t compact_upto;       /* cleanup.policy=compact: the active segment's base at the last
				     * cleaner pass (a new pass when a later segment was sealed) */
	struct producer_table producers;   /* idempotent producers' last batches */
	int64_t snap_covered;       /* log offset the last producer snapshot covers, -1: none */
	struct producer_snap snap;  /* the snapshot being saved on the ring (snap.busy) */
	struct part_txn txn;        /* its transactions (dataplane/part_txn.h) */
	struct part_role *role;     /* leader with followers, or follower (dataplane/part_role.h);
				     * NULL: alone, the one-node broker's way */
	int64_t hw_ckpt;            /* "high-watermark" as the open found it, for the first role
				     * (part_hw_load); -1: none, or taken */
	int64_t hw_saved;           /* the high watermark last queued to "high-watermark", -1 none */
	struct plog_delete ls_follow;   /* follower: its log start moving to the leader's
					 * (part_follow_log_start), while ls_following */
	int ls_following;
	struct part *next;          /* the owner shard's list */
};

int part_open(struct shard *sh, const char *dir, const char *topic, int32_t index,
	      const struct plog_config *cfg, struct part **out);
void part_close(struct part *p);
/* Close the log of a deleted partition but keep the struct: requests
 * parked on other shards may still name it; they see `deleted`. */
void part_retire(struct part *p);

/* Idempotent producer state, open transactions and the aborted index from
 * the log, as the partition's open does: "producers.snapshot" if it still
 * fits the log, then a scan of the newest batches (all of them once the
 * partition has had transactions). On an empty table and index (open, or
 * after a truncation: dataplane/part_replica.c). Blocking reads, as at
 * open. @thread owner shard */
void part_rebuild_producers(struct part *p);

/* Start saving the idempotent producer state next to the log, on the
 * shard's ring (producer_snapshot_start); snap_covered moves when the
 * snapshot is renamed into place. Nothing if a save is in flight or
 * nothing was appended since the last. @thread owner shard */
void part_snapshot_producers(struct part *p);

/* One partition's records to append, validated on the connection's shard
 * (batch_validate, the records of compressed batches; an idempotent
 * producer's one batch with its sequence). */
struct part_produce_req {
	const uint8_t *rec;          /* valid during the call: the append copies it */
	uint32_t len;
	int acks;                    /* 0: done once appended, without waiting for durability;
				      * 1: the leader's own write; -1: the ISR's (the high watermark) */
	uint64_t recv_ns;            /* when the request came (a transaction's late write) */
	int32_t timeout_ms;          /* acks=all: REQUEST_TIMED_OUT after it (<= 0: none) */
	int32_t min_insync;          /* acks=all: the topic's min.insync.replicas; with followers,
				      * answered NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR has
				      * shrunk below it by the time the high watermark passes the
				      * batch (Kafka's DelayedProduce); 0: no check */
};

/* A produce on the owner: refused (PART_ERR_NOT_LEADER) when this node
 * follows the partition, whatever the connection's shard read in its
 * metadata; the idempotent producer's sequence and epoch
 * (producer.c; a batch sent again is answered with its first offset, not
 * appended twice), a transactional batch's transaction (part_txn_check),
 * the topic's compression.type (recompress, in the shard's scratch), the
 * append (part_append_flush), then the wait for durability unless acks is
 * 0. A later batch that cannot be appended fails the whole request. done
 * runs once, on the owner: from inside part_produce when settled at once,
 * else from part_progress. The one produce of Produce and the native
 * PRODUCE. @thread owner shard */
void part_produce(struct part *p, const struct part_produce_req *req, part_produce_done done, void *cookie);

/* Append one batch of len bytes to p's log; when the tail memory is full
 * (-ENOBUFS), write what is buffered (store_flush) and retry once. *base
 * is where it landed. 0 or -errno (plog_append's). The one append of the
 * produce paths, the transaction markers and the coordinators' internal
 * records. @thread owner */
int part_append_flush(struct part *p, const uint8_t *batch, uint32_t len, int64_t *base);

/* Register a produce waiting for durability. -ENOBUFS if the queue is full. */
int part_wait_ack(struct part *p, const struct ack_wait *w);
/* Complete what durability allows and wake watchers; called after appends
 * and from the durability callback. */
void part_progress(struct part *p);
/* Answer the waiting produces from the oldest while `all` or their
 * deadline passed (now_ns), with err (an enum part_err): a leader that
 * stopped leading, acks=all out of time. @thread owner */
void part_fail_acks(struct part *p, int err, int all, uint64_t now_ns);

/* ---- internal records (the coordinators' own logs) ---- */

/* Append a batch of internal records and have `notify` run on thread
 * `from` once the high watermark passes it (acks=all: every ISR member
 * has it; durable here for a partition alone): m->p[0] = ctx, m->v =
 * { base offset, 0 }; with m->v[1] an enum part_err when this node stopped
 * leading first; or at once with m->v = { -1, -errno } when the append
 * fails (-ENOENT: the partition was deleted; -EREMOTE: this node follows
 * it; a full store is flushed and tried once more). min_insync (0: none):
 * with followers, PART_ERR_AFTER_APPEND when the ISR shrank below it
 * before the high watermark passed, as an acks=all produce's.
 * batch is borrowed until notify has run. @thread owner */
void part_append_internal(struct part *p, const uint8_t *batch, uint32_t len, int32_t min_insync, int from,
			  void *ctx, void (*notify)(void *self, struct shard_msg *m));

/* ---- reads on the owner ---- */

/* The shard's read buffers (SHARD_RBUF_SIZE, 4 KiB aligned, made at shard
 * start): one pool for every read that may go to the disk (Fetch, the
 * native FETCH, ListOffsets by time, the lag scan). @thread owner shard */
struct rbuf_wait {
	struct rbuf_wait *next;
	/* a buffer is free: ready takes it (part_rbuf_take) */
	void (*ready)(struct shard *sh, struct rbuf_wait *w);
};
/* A free buffer, or NULL when none is. */
uint8_t *part_rbuf_take(struct shard *sh);
/* Give a buffer back (NULL: nothing) and start the waiters it lets run. */
void part_rbuf_put(struct shard *sh, uint8_t *buf);
/* Wait for a buffer (FIFO): w->ready runs from a later part_rbuf_put. */
void part_rbuf_wait(struct shard *sh, struct rbuf_wait *w);

struct part_read_req;
/* A read ended: err 0 (rq->rd.data, rq->rd.bytes: whole batches, maybe
 * none), -ENOENT (the partition was deleted), -ERANGE (offset outside
 * [log_start, next_offset]), -EAGAIN (the read could not start: a disk
 * read without a free buffer, or the ring full; nothing this time) or the
 * disk's -errno (rq->rd.err). */
typedef void (*part_read_done)(void *cookie, struct part_read_req *rq, int err);

struct part_read_req {
	/* in */
	int64_t offset;
	uint32_t max_bytes;          /* 0 reads one batch; at most SHARD_RBUF_SIZE - 128 KiB */
	int isolation;               /* 1: read_committed, up to the last stable offset;
				      * 2: a follower's, up to the log end */
	/* out: the read; its data is held by rd.chunk (a tail chunk) or rd.buf
	 * (a read buffer) until part_read_release, or the caller's own release
	 * on the owner (tail_chunk_unref, part_rbuf_put) */
	struct plog_read rd;
	/* internal */
	struct part *p;
	part_read_done done;
	void *cookie;
};

/* Read from p's log on its owner: from the tail, or from the disk into a
 * read buffer taken from the shard's pool (none free: from the tail only).
 * done(cookie, rq, err) runs once, from inside part_read when the read
 * completes at once, else from the disk read's completion; rq must stay
 * valid until then. Used by Fetch, the native FETCH and the lag scan.
 * @thread owner shard */
void part_read(struct part *p, struct part_read_req *rq, part_read_done done, void *cookie);
/* Drop what a completed read holds (the tail reference, the read buffer).
 * @thread owner shard */
void part_read_release(struct part_read_req *rq);

/* ---- transactions (the state: p->txn, dataplane/part_txn.h) ---- */

/* Last stable offset: below it no transaction is open. */
static inline int64_t part_lso(const struct part *p)
{
	int64_t hw = p->pl ? p->pl->high_watermark : 0;

	return p->txn.lso < hw ? p->txn.lso : hw;
}

/* A counter of the published block: the owner's plain add, stored so that
 * the control thread's relaxed load sees a whole word. @thread owner */
static inline void part_pub_add(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, *c + n, __ATOMIC_RELAXED);
}

/* Publish the partition's offsets and size (after appends, durability,
 * retention). A few stores and a walk of its segment list (a handful).
 * @thread owner */
static inline void part_publish(struct part *p)
{
	struct part_pub *u = p->pub;
	const struct plog *pl = p->pl;

	if (!u || !pl)
		return;
	__atomic_store_n(&u->log_start, pl->log_start, __ATOMIC_RELAXED);
	__atomic_store_n(&u->log_end, pl->next_offset, __ATOMIC_RELAXED);
	__atomic_store_n(&u->high_watermark, pl->high_watermark, __ATOMIC_RELAXED);
	__atomic_store_n(&u->last_stable, part_lso(p), __ATOMIC_RELAXED);
	__atomic_store_n(&u->size_bytes, (int64_t)plog_size(pl), __ATOMIC_RELAXED);
	__atomic_store_n(&u->segments, (int64_t)plog_segment_count(pl), __ATOMIC_RELAXED);
	/* (a full filesystem, storage/plog.h nospace, shows as -ENOSPC) */
	__atomic_store_n(&u->err, (int64_t)(pl->err ? pl->err : pl->nospace ? -ENOSPC : 0), __ATOMIC_RELAXED);
}
/* The coordinator added this partition to producer pid's transaction
 * (epoch, begun at since_ns): its transactional batches are taken from now
 * on. 0, -ENOENT (the partition was deleted), PART_ERR_OLD_EPOCH (a newer
 * epoch of pid is known) or PART_ERR_PRODUCERS_FULL. @thread owner */
int part_begin_txn(struct part *p, int64_t pid, int16_t epoch, uint64_t since_ns);
/* Append the COMMIT or ABORT marker of pid's transaction; *offset is where.
 * 0, PART_ERR_OLD_EPOCH (the partition knows a newer epoch of pid: a stale
 * coordinator's marker, refused as Kafka refuses it) or -errno (-ENOENT:
 * deleted; plog_append's). @thread owner */
int part_append_marker(struct part *p, int64_t pid, int16_t epoch, int commit, int32_t coordinator_epoch,
		       int64_t *offset);

#endif
