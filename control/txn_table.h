/* control/txn_table.h — the transaction coordinator's state, shared by
 * its files and no one else: txn_table.c (the table of transactions and
 * the helpers below), txn.c (requests, state writes, registrations,
 * markers, timers), txn_verify.c (KIP-890 verification for partition
 * leaders and TxnOffsetCommit) and txn_replay.c (reading
 * __transaction_state back when this node becomes a partition's leader).
 *
 * Thread: the control thread (@thread ctl) owns everything here; no shard
 * reads it. Include only from control/txn*.c.
 */
#ifndef SLUICE_TXN_TABLE_H
#define SLUICE_TXN_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "control/coord_load.h"
#include "control/group.h"
#include "control/hmap.h"
#include "control/txn.h"
#include "dataplane/kafka/kafka_wire.h"
#include "dataplane/part_proxy.h"

struct broker;
struct config;
struct ctl;
struct group_coord;
struct kafka_ctx;
struct md_partition;

/* Kafka's TransactionState numbering, as written in the log. */
enum tstate { TS_EMPTY = 0, TS_ONGOING = 1, TS_PREPARE_COMMIT = 2, TS_PREPARE_ABORT = 3, TS_COMPLETE_COMMIT = 4,
	      TS_COMPLETE_ABORT = 5, TS_DEAD = 6 };

#define MARKER_RETRY_MS 1000

extern const char *const tstate_names[];   /* by enum tstate, as Kafka names them */

struct txn;

struct txn_tp {
	char *topic;
	int32_t part;
	uint8_t marked;               /* this transaction's marker is durable here */
	struct txn *t;                /* back pointer while a marker is in flight */
	struct part_marker_req marker;   /* the marker on the owner (cookie: this) */
};

struct txn {
	char *id;
	int64_t pid;
	int16_t epoch;
	int16_t last_epoch;           /* the epoch before the last bump a producer asked for (KIP-360
				       * retries), -1: none */
	int32_t timeout_ms;
	enum tstate state;
	struct txn_tp *tp;
	int ntp, tp_cap;
	int nregistered;              /* tp[0..nregistered) are registered on their shards */
	int64_t start_wall, last_wall; /* wall ms: the log's timestamps */
	int64_t start_mono;           /* monotonic ms: the timeout */
	uint64_t begin_ns;            /* recv_ns of the request that began the transaction */
	uint64_t end_ns;              /* recv_ns of the EndTxn that ended the previous one */
	uint64_t conn_ns;             /* newest connection (accept time) the coordinator requests
				       * of the current transaction came on */
	int busy;                     /* a state write, registrations or markers in flight */
	int pending;                  /* acknowledgements outstanding */
	int16_t err;                  /* the first error among them */
	int commit;                   /* the decision being carried out */
	int64_t retry_at;             /* monotonic ms: markers to write again */
	struct kafka_ctx *ctx;        /* the request waiting, or NULL */
	int from;                     /* its shard */
	void (*then)(struct txn_coord *tc, struct txn *t);   /* after the state write */
	struct txn *orphan_next;      /* unloaded while busy: on tc->orphans until idle */
};

struct txn_coord {
	struct ctl *ctl;
	struct broker *b;
	const struct config *cfg;
	struct group_coord *gc;
	struct hmap txns;             /* struct txn, by transactional id: those of the
				       * __transaction_state partitions loaded here (or loading) */
	struct coord_load load;       /* which partitions this node coordinates
				       * (control/coord_load.h) */
	struct txn *orphans;          /* of partitions unloaded while a write, registration
				       * or marker was in flight: freed once idle */
	int32_t max_timeout_ms;
	int64_t expiration_ms, check_ms, next_check;
	int replays, registering;     /* start-up: partitions being read, Ongoing transactions
				       * registering again (plus one hold while reading) */
	void (*replay_done)(struct ctl *ctl);
	struct txn_stats st;
};

struct txn_req {                      /* what a request holds while the coordinator has it */
	int from;
};

/* ---- txn_table.c -------------------------------------------------------------- */

/* the transaction of id here, or NULL */
struct txn *txn_find(struct txn_coord *tc, struct kafka_str id);
/* a new Empty transaction of id, in the table */
struct txn *txn_new(struct txn_coord *tc, struct kafka_str id);
void txn_free(struct txn *t);
/* out of the table (not freed) */
void txn_unlink(struct txn_coord *tc, struct txn *t);
/* t's partitions: forget them all; find one (-1: not there); add one
 * (nothing if there) */
void txn_tp_clear(struct txn *t);
int txn_tp_index(const struct txn *t, const char *topic, size_t tlen, int32_t part);
void txn_tp_add(struct txn *t, const char *topic, size_t tlen, int32_t part);
/* __transaction_state in the published snapshot, or NULL before it exists */
const struct md_topic *txn_state_topic(const struct txn_coord *tc);
/* the __transaction_state partition of id (Java's String.hashCode) */
int32_t txn_state_partition(const struct txn_coord *tc, const char *id);
/* 0 when id's partition is coordinated here, else the Kafka error */
int16_t txn_key_err(const struct txn_coord *tc, struct kafka_str id);
/* hand ctx back to its shard as it is */
void txn_answer_now(struct txn_coord *tc, struct kafka_ctx *ctx);
/* the producer named by a request (t may be NULL): 0 or the Kafka error */
int16_t txn_check_producer(struct txn_coord *tc, const struct txn *t, int64_t pid, int16_t epoch);

/* ---- txn.c -------------------------------------------------------------------- */

/* register t's partitions from tp[nregistered] on (registrations_done after) */
void txn_register_new(struct txn_coord *tc, struct txn *t);
/* write t's markers (t->commit) into every partition not yet marked */
void txn_send_markers(struct txn_coord *tc, struct txn *t);

/* ---- txn_verify.c ------------------------------------------------------------- */

/* group_set_txn_check's callback (arg: the txn_coord) */
void txn_offsets_check(void *arg, struct kafka_str id, int64_t pid, int16_t epoch, int32_t opart, uint64_t recv_ns,
		       group_txn_checked_fn *done, void *cookie);
/* AddPartitionsToTxn v4+ from a partition leader: VerifyOnly answered here */
void txn_handle_verify_only(struct txn_coord *tc, struct kafka_ctx *ctx);

#endif
