/* dataplane/part_proxy.h — the doorway to a partition's owner: the typed
 * operations another thread (the control thread, another shard) asks of the
 * shard that owns a partition. Each request goes to the owner as one ring
 * message; the owner runs it (the code lives in part_proxy.c, beside the
 * partition, using part.c) and answers with a message whose fn is a
 * trampoline here, which unpacks the result and calls the typed completion
 * on the sender's thread, with self = that thread's object (struct ctl,
 * struct shard).
 *
 * A request names its partition by value, a struct part_addr (topic id,
 * partition index): the owner looks its own struct part up in its own
 * table (sh->part_tab, dataplane/part_table.h) when the message arrives.
 * A partition deleted or moved away between the send and the arrival is
 * not found there, and the sender gets the error answer each operation
 * lists (-ENOENT mostly), never an operation on a freed struct. The
 * control thread never sees a struct part: it knows a partition as its
 * address and its entry in its own book of partition homes (owner shard,
 * opened or not: control/ctl_homes.h).
 *
 * Shard to shard, two requests (txn_begin_at, txn_marker_at) also take a
 * handle, the struct part * a shard read from the published metadata
 * (md_part_owner, dataplane/broker.h): the owner published it there
 * itself, the sending shard only carries it back, and the owner keeps a
 * retired partition's struct until it exits, so such a handle never
 * dangles. Only dataplane/ uses them (scripts/check-layers).
 *
 * Thread: part_proxy_* run on the sender's thread (@thread sender); the
 * completions run there too, from its loop. The owner-side code runs on the
 * owner shard (@thread owner).
 * Owns: nothing. Arguments marked "borrowed until done" must stay valid
 * until the completion has run.
 * Errors: completions carry 0 or -errno; requests never fail once taken
 * (a full ring parks the message on the sender's side, never drops it).
 */
#ifndef SLUICE_PART_PROXY_H
#define SLUICE_PART_PROXY_H

#include <stdint.h>

#include "dataplane/part.h"
#include "storage/plog.h"

struct part;
struct shard;
struct shard_msg;
struct md_topic;
struct md_partition;

/* A partition by value: what a request names (the owner resolves it in its
 * own part_table when the request arrives). */
struct part_addr {
	uint8_t topic_id[16];
	int32_t index;
};

static inline struct part_addr part_addr_of(const uint8_t topic_id[16], int32_t index)
{
	struct part_addr a = { .index = index };

	for (int i = 0; i < 16; i++)
		a.topic_id[i] = topic_id[i];
	return a;
}

/* The sender's side: its thread index (broker_ctl_index for the control
 * thread, the shard id for a shard) and how it sends. send parks the
 * message when the ring is full and never drops it (the control thread's
 * ctl_send, a shard's shard_send). */
struct part_proxy {
	int from;
	void (*send)(void *ctx, int to, const struct shard_msg *m);
	void *ctx;
};

/* A proxy for shard sh as the sender. @thread shard sh */
void part_proxy_init_shard(struct part_proxy *px, struct shard *sh);

/* ---- open ---- */

/* What the control thread needs of the open: whether the directory was
 * made, and the recovery counts and describe line of the log (filled on the
 * owner, so the sender never reads the plog). */
struct part_open_report {
	int made;                    /* the directory did not exist before */
	int noteworthy;              /* recovery cut or moved something aside: see line */
	int segments, segments_trusted, damaged;
	uint64_t bytes_scanned, bytes_trusted;
	int32_t leader_epoch;        /* the epoch the partition runs at: the metadata
				      * entry's, or its log's when that is higher */
	char line[1024];             /* plog_recovery_describe, when noteworthy */
};

/* err 0: the partition is open, in the owner's list and its part_table
 * under (t->id, mp->index), and its handle stored in pub->owner_part for
 * the shards (md_part_owner, once the sender publishes pub in a snapshot);
 * the sender records that it is open in its own book. */
typedef void (*part_open_done)(void *self, void *cookie, int err, const struct part_open_report *rep);

/* Open partition mp of topic t in dir on shard owner (t->cfg), leading at
 * mp->leader_epoch (or the log's latest epoch, if higher), publishing into
 * pub (struct part_pub: the sender allocated it and keeps it until the
 * owner has stopped). dir, t, mp and rep are borrowed until done and only
 * read on the owner, except rep, which it fills. @thread sender */
void part_proxy_open(struct part_proxy *px, int owner, const char *dir, struct md_topic *t,
		     struct md_partition *mp, struct part_pub *pub, struct part_open_report *rep,
		     part_open_done done, void *cookie);

/* ---- close, config ---- */

typedef void (*part_done)(void *self, void *cookie, int err);

/* Retire partition a (its topic was deleted, or it moved to other
 * brokers): take it out of the owner's table, close the log but keep the
 * struct until the owner exits, since handles parked on other shards may
 * still name it. done's err: 0, or -ENOENT when the owner has no such
 * partition (nothing to do). @thread sender */
void part_proxy_retire(struct part_proxy *px, int owner, struct part_addr a, part_done done, void *cookie);
/* Close partition a and free it (a topic that was never published, so no
 * shard holds its handle). done's err: 0, or -ENOENT (none). @thread sender */
void part_proxy_close(struct part_proxy *px, int owner, struct part_addr a, part_done done, void *cookie);
/* New storage settings for partition a (segment size applies from the
 * next segment). cfg is borrowed until done. done's err: 0, -ENOENT (none
 * there any more). @thread sender */
void part_proxy_set_config(struct part_proxy *px, int owner, struct part_addr a, const struct plog_config *cfg,
			   part_done done, void *cookie);

/* The partition's leader epoch moves to `epoch` (every leader change): the
 * batches appended after carry it, and its leader-epoch cache records
 * where it began (plog_set_leader_epoch). done's err: 0; -ESTALE: lower
 * than the partition's epoch (nothing changed); -EINVAL: negative;
 * -ENOENT: the partition was deleted (or is not on the owner). @thread sender */
void part_proxy_set_leader_epoch(struct part_proxy *px, int owner, struct part_addr a, int32_t epoch,
				 part_done done, void *cookie);

/* What this node is for partition a (dataplane/part_role.h): leader with
 * its replicas and ISR, or follower of a leader at its address, at an
 * epoch. m is borrowed until done. done's err: part_role_set's, or -ENOENT
 * when the owner has no such partition. @thread sender */
struct part_role_msg;
void part_proxy_set_role(struct part_proxy *px, int owner, struct part_addr a, const struct part_role_msg *m,
			 part_done done, void *cookie);

/* ---- internal records ---- */

/* base: the first offset of the appended batch, -1 on error. */
typedef void (*part_append_done)(void *self, void *cookie, int64_t base, int err);

/* One append of internal records (a coordinator's own log), in the
 * sender's memory, borrowed until done runs. */
struct part_append_req {
	const uint8_t *batch;        /* a whole record batch */
	uint32_t len;
	part_append_done done;
	void *cookie;
	int32_t min_insync;          /* the topic's min.insync.replicas (0: none): acknowledged
				      * only while the ISR has that many, as acks=all */
};

/* Append req->batch to partition a and call req->done once the high
 * watermark passes it (or the append failed: -ENOENT for a deleted
 * partition or one the owner does not have,
 * -EREMOTE where this node follows, the log's -errno; an enum part_err:
 * this node stopped leading first, or PART_ERR_AFTER_APPEND when the ISR
 * shrank below req->min_insync).
 * @thread sender */
void part_proxy_append(struct part_proxy *px, int owner, struct part_addr a, struct part_append_req *req);

/* ---- transactions ---- */

/* The coordinator added partition a to producer pid's transaction (epoch, begun at
 * since_ns, the coordinator's clock): the owner takes its transactional
 * batches from now on. done's err is 0, -errno or an enum part_err
 * (part_txn_begin's; -ENOENT: the owner has no such partition); the
 * coordinator chooses the Kafka code
 * (part_err_to_kafka, dataplane/part_err.h).
 * @thread sender */
void part_proxy_txn_begin(struct part_proxy *px, int owner, struct part_addr a, int64_t pid, int16_t epoch,
			  uint64_t since_ns, part_done done, void *cookie);
/* The same from a shard holding the owner's handle (see the top). @thread shard */
void part_proxy_txn_begin_at(struct part_proxy *px, int owner, struct part *p, int64_t pid, int16_t epoch,
			     uint64_t since_ns, part_done done, void *cookie);

/* One transaction marker, in the sender's memory, borrowed until done. */
struct part_marker_req {
	int64_t pid;
	int16_t epoch;
	int commit;                  /* COMMIT, else ABORT */
	part_append_done done;       /* base: the marker's offset; err 0 also when the partition
				      * was deleted or is not on the owner (nothing to mark) */
	void *cookie;
};

/* Write pid's COMMIT or ABORT marker to partition a and call req->done
 * once it is durable. @thread sender */
void part_proxy_txn_marker(struct part_proxy *px, int owner, struct part_addr a, struct part_marker_req *req);
/* The same from a shard holding the owner's handle (see the top). @thread shard */
void part_proxy_txn_marker_at(struct part_proxy *px, int owner, struct part *p, struct part_marker_req *req);

/* ---- lag ---- */

/* hw: the high watermark (-1: the partition is gone); oldest_ts: the
 * timestamp of the first record at or after the committed offset (-1:
 * caught up, or no read buffer was free this time). */
typedef void (*part_lag_done)(void *self, void *cookie, int64_t hw, int64_t oldest_ts);

/* One lag query, in the sender's memory, borrowed until done runs; the
 * owner keeps its read in it (the fields after "owner's"). */
struct part_lag_req {
	int64_t committed;
	part_lag_done done;
	void *cookie;
	/* owner's */
	int64_t hw, ts;
	int from;
	struct shard *sh;
	struct part_read_req rq;     /* the read (part_read) */
};

/* Partition a's high watermark (-1: the owner has no such partition) and
 * the age of its first record at req->committed
 * (one batch read by the owner's one read path, part_read: from the tail,
 * or from disk into one of its read buffers). @thread sender */
void part_proxy_lag(struct part_proxy *px, int owner, struct part_addr a, struct part_lag_req *req);

/* ---- a page of records (the web console's record browser) ---- */

#define PART_PEEK_MAX (256u << 10)
typedef void (*part_peek_done)(void *self, void *cookie);

struct part_peek_req {
	/* in */
	int64_t offset;              /* the first offset wanted (clamped to the log start) */
	int64_t ts;                  /* >= 0: from the first record at or after this time (ms) */
	int64_t back;                /* > 0: from this many offsets before the high watermark */
	uint8_t *buf;                /* the sender's, cap bytes: the owner copies whole batches in */
	uint32_t cap;                /* at most PART_PEEK_MAX */
	part_peek_done done;
	void *cookie;
	/* out */
	uint32_t len;                /* bytes of whole batches in buf (0: none at or after) */
	int64_t log_start, hw;       /* -1: the owner has no such partition */
	int64_t from;                /* the offset the read began at (ts resolved) */
	int err;                     /* 0; -ENOENT no such partition; -EFBIG a batch larger than
				      * cap; -EAGAIN no read could start (again later); -errno */
	/* owner's */
	int sender;
	struct shard *sh;
	struct part *p;
	struct part_read_req rq;
	struct plog_time tq;
	struct rbuf_wait wait;
};

/* Partition a's whole batches from req->offset (or req->ts) up to its high
 * watermark, at most req->cap bytes, copied into req->buf: one read on the
 * owner's one read path (part_read: the tail, or an asynchronous disk read
 * into one of its read buffers), after a timestamp walk (plog_find_time)
 * when asked by time. Nothing blocks the owner. @thread sender */
void part_proxy_peek(struct part_proxy *px, int owner, struct part_addr a, struct part_peek_req *req);

/* ---- a partition's idempotent producers (the web console) ---- */

#define PART_PRODUCERS_MAX 200
struct part_producer_view {
	int64_t pid;
	int16_t epoch;
	int32_t last_seq;            /* of its newest batch kept, -1: none */
	int64_t last_offset;         /* -1: none */
	int64_t last_ms;             /* its last append (wall ms) */
	int64_t txn_first;           /* first offset of its open transaction here, -1: none */
};
typedef void (*part_producers_done)(void *self, void *cookie);

struct part_producers_req {
	/* in */
	struct part_producer_view *out;   /* the sender's, cap entries */
	uint32_t cap;
	part_producers_done done;
	void *cookie;
	/* out */
	uint32_t n;                  /* filled */
	uint32_t total;              /* the producers the partition knows (n < total: cut) */
	int err;                     /* 0, -ENOENT no such partition on the owner */
	/* owner's */
	int sender;
	struct shard *sh;
};

/* Partition a's idempotent producers as its owner's table has them (those
 * not yet expired), at most req->cap, copied into req->out. @thread sender */
void part_proxy_producers(struct part_proxy *px, int owner, struct part_addr a, struct part_producers_req *req);

/* ---- reading back ---- */

/* A chunk of whole batches of partition `index` (buf valid during the
 * call only), then one end per request. */
typedef void (*part_range_chunk)(void *self, void *cookie, const uint8_t *buf, uint32_t len, int32_t index);
typedef void (*part_range_end)(void *self, void *cookie);

/* Read partition a's batches covering [from, to) (none, only the end,
 * when the owner has no such partition), clamped to [log start, high
 * watermark), in chunks of whole batches, with a synchronous read (the
 * replay of an internal topic: at start-up before the broker is ready, or
 * by a coordinator when this node takes over one of its partitions).
 * to = PART_READ_LOG_END: up to the log end, past the high watermark (a
 * new leader's own log: what its predecessor acknowledged is there, while
 * its high watermark may not have caught up yet). @thread sender */
#define PART_READ_LOG_END (-1)
void part_proxy_read(struct part_proxy *px, int owner, struct part_addr a, int64_t from, int64_t to,
		     part_range_chunk chunk, part_range_end end, void *cookie);

#endif
