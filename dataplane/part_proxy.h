/* dataplane/part_proxy.h — the doorway to a partition's owner: the typed
 * operations another thread (the control thread, another shard) asks of the
 * shard that owns a partition. Each request goes to the owner as one ring
 * message; the owner runs it (the code lives in part_proxy.c, beside the
 * partition, using part.c) and answers with a message whose fn is a
 * trampoline here, which unpacks the result and calls the typed completion
 * on the sender's thread, with self = that thread's object (struct ctl,
 * struct shard). The sender never dereferences the partition.
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

/* p: the opened partition (NULL on error), for the sender to keep in its
 * md_partition (md_part_set_handle); it is already linked into the owner's
 * list. */
typedef void (*part_open_done)(void *self, void *cookie, struct part *p, int err,
			       const struct part_open_report *rep);

/* Open partition mp of topic t in dir on shard owner (t->cfg, mp->pub),
 * leading at mp->leader_epoch (or the log's latest epoch, if higher).
 * dir, t, mp and rep are borrowed until done and only read on the owner,
 * except rep, which it fills; the opened partition comes back as done's
 * `p`, a handle the sender stores in its own md_partition.
 * @thread sender */
void part_proxy_open(struct part_proxy *px, int owner, const char *dir, struct md_topic *t,
		     struct md_partition *mp, struct part_open_report *rep, part_open_done done, void *cookie);

/* ---- close, config ---- */

typedef void (*part_done)(void *self, void *cookie, int err);

/* Retire p (its topic was deleted): close the log but keep the struct
 * until the owner exits, since requests parked elsewhere may still name
 * it. @thread sender */
void part_proxy_retire(struct part_proxy *px, int owner, struct part *p, part_done done, void *cookie);
/* Close p and free it (a topic that was never published). @thread sender */
void part_proxy_close(struct part_proxy *px, int owner, struct part *p, part_done done, void *cookie);
/* New storage settings for p (segment size applies from the next
 * segment). cfg is borrowed until done. @thread sender */
void part_proxy_set_config(struct part_proxy *px, int owner, struct part *p, const struct plog_config *cfg,
			   part_done done, void *cookie);

/* The partition's leader epoch moves to `epoch` (every leader change): the
 * batches appended after carry it, and its leader-epoch cache records
 * where it began (plog_set_leader_epoch). done's err: 0; -ESTALE: lower
 * than the partition's epoch (nothing changed); -EINVAL: negative;
 * -ENOENT: the partition was deleted. @thread sender */
void part_proxy_set_leader_epoch(struct part_proxy *px, int owner, struct part *p, int32_t epoch,
				 part_done done, void *cookie);

/* What this node is for p (dataplane/part_role.h): leader with its
 * replicas and ISR, or follower of a leader at its address, at an epoch.
 * m is borrowed until done. done's err: part_role_set's. @thread sender */
struct part_role_msg;
void part_proxy_set_role(struct part_proxy *px, int owner, struct part *p, const struct part_role_msg *m,
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

/* Append req->batch to p and call req->done once the high watermark
 * passes it (or the append failed: -ENOENT for a deleted partition,
 * -EREMOTE where this node follows, the log's -errno; an enum part_err:
 * this node stopped leading first, or PART_ERR_AFTER_APPEND when the ISR
 * shrank below req->min_insync).
 * @thread sender */
void part_proxy_append(struct part_proxy *px, int owner, struct part *p, struct part_append_req *req);

/* ---- transactions ---- */

/* The coordinator added p to producer pid's transaction (epoch, begun at
 * since_ns, the coordinator's clock): the owner takes its transactional
 * batches from now on. done's err is 0, -errno or an enum part_err
 * (part_txn_begin's); the coordinator chooses the Kafka code
 * (part_err_to_kafka, dataplane/part_err.h).
 * @thread sender */
void part_proxy_txn_begin(struct part_proxy *px, int owner, struct part *p, int64_t pid, int16_t epoch,
			  uint64_t since_ns, part_done done, void *cookie);

/* One transaction marker, in the sender's memory, borrowed until done. */
struct part_marker_req {
	int64_t pid;
	int16_t epoch;
	int commit;                  /* COMMIT, else ABORT */
	part_append_done done;       /* base: the marker's offset; err 0 also when p was deleted */
	void *cookie;
};

/* Write pid's COMMIT or ABORT marker to p and call req->done once it is
 * durable. @thread sender */
void part_proxy_txn_marker(struct part_proxy *px, int owner, struct part *p, struct part_marker_req *req);

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

/* p's high watermark and the age of its first record at req->committed
 * (one batch read by the owner's one read path, part_read: from the tail,
 * or from disk into one of its read buffers). @thread sender */
void part_proxy_lag(struct part_proxy *px, int owner, struct part *p, struct part_lag_req *req);

/* ---- reading back ---- */

/* A chunk of whole batches of partition `index` (buf valid during the
 * call only), then one end per request. */
typedef void (*part_range_chunk)(void *self, void *cookie, const uint8_t *buf, uint32_t len, int32_t index);
typedef void (*part_range_end)(void *self, void *cookie);

/* Read p's batches covering [from, to), clamped to [log start, high
 * watermark), in chunks of whole batches, with a synchronous read (the
 * replay of an internal topic: at start-up before the broker is ready, or
 * by a coordinator when this node takes over one of its partitions).
 * to = PART_READ_LOG_END: up to the log end, past the high watermark (a
 * new leader's own log: what its predecessor acknowledged is there, while
 * its high watermark may not have caught up yet). @thread sender */
#define PART_READ_LOG_END (-1)
void part_proxy_read(struct part_proxy *px, int owner, struct part *p, int64_t from, int64_t to,
		     part_range_chunk chunk, part_range_end end, void *cookie);

#endif
