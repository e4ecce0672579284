/* control/txn.h — the transaction coordinator: transactional ids, their
 * producer id and epoch, the partitions of each ongoing transaction, and
 * its end: COMMIT or ABORT markers written into every partition.
 *
 * Thread: the control thread (@thread ctl) except txn_submit, which a
 * shard calls. A shard hands the decoded request over with its response
 * already shaped (the connection is muted while it is in progress); the
 * coordinator fills in error codes, ids and epochs and hands it back.
 *
 * State lives in the compacted internal topic __transaction_state, in
 * Kafka's record format (key version 0: transactional id; value version 0:
 * producer id, epoch, timeout, status, partitions, timestamps), partition
 * chosen by the Java hash of the transactional id. A transaction goes
 * Empty -> Ongoing (AddPartitionsToTxn / AddOffsetsToTxn: the state is
 * durable before the owner shards of the partitions this node leads are
 * told to take the producer's transactional batches; a partition another
 * node leads asks when the producer writes there: txn_verify_submit, or
 * AddPartitionsToTxn v4 VerifyOnly from that node) -> PrepareCommit/
 * PrepareAbort (durable before any marker) -> markers durable in every
 * partition (written by the owner shard here, or by the leader on another
 * node through WriteTxnMarkers, control/peer_kafka.h) -> EndTxn answered
 * -> CompleteCommit/CompleteAbort. The coordinator of an id is
 * the leader of its partition: the partition is read back when this node
 * becomes its leader (at start when alone here): a Prepare* transaction
 * gets its markers again, an Ongoing one has its partitions registered
 * again (and is aborted when it times out); every state write waits for
 * the partition's high watermark (acks=all), so the epoch a fenced
 * producer lost to is on every in-sync replica before InitProducerId
 * answers.
 *
 * Fencing. InitProducerId bumps the epoch of a transactional id (its older
 * producer gets INVALID_PRODUCER_EPOCH from then on, in every partition
 * once a marker of the new epoch is there); a transaction open longer than
 * its timeout is aborted with a bumped epoch. A late request of an earlier
 * transaction never acts on the current one (KIP-890's guarantee, for
 * clients that do not bump the epoch per transaction): every request
 * carries the monotonic time its shard took it up (kafka_ctx.recv_ns) and
 * the time its connection was accepted (conn_ns); each transaction keeps
 * the time the request that began it was taken up and the newest
 * connection its coordinator requests came on. An EndTxn, AddPartitionsToTxn
 * or transactional Produce taken up before the transaction began, or an
 * EndTxn on an older connection than one the transaction already used (a
 * request delayed on a connection its client gave up), is refused with
 * INVALID_TXN_STATE.
 *
 * Files: txn_table.c (the transactions by id), txn.c (requests, state
 * writes, registrations, markers, timers), txn_verify.c (verification),
 * txn_replay.c (reading the state back); what they share: txn_table.h.
 *
 * Errors: Kafka error codes in the responses; -errno elsewhere.
 */
#ifndef SLUICE_TXN_H
#define SLUICE_TXN_H

#include <stdint.h>

#include "dataplane/kafka/kafka_wire.h"

struct broker;
struct config;
struct ctl;
struct group_coord;
struct kafka_ctx;
struct md_topic;

#define TXN_STATE_TOPIC "__transaction_state"

struct txn_coord;

struct txn_stats {
	uint64_t inits, fenced_by_init;
	uint64_t begun, committed, aborted, timed_out;
	uint64_t markers, marker_retries;
	uint64_t remote_markers;           /* of them, written by other nodes (WriteTxnMarkers) */
	uint64_t remote_marker_requests;   /* WriteTxnMarkers requests sent (one per leader and decision) */
	uint64_t verifies;                 /* partitions verified here for a leader (KIP-890) */
	uint64_t remote_verifies;          /* verifications asked of another node's coordinator */
	uint64_t late_refused;             /* requests of an earlier transaction */
	uint64_t replayed_records;
	uint64_t partitions_loaded;        /* partitions read back (start-up and leadership gained) */
};

/* @thread ctl */
int txn_coord_create(struct ctl *ctl, struct broker *b, const struct config *cfg, struct group_coord *gc,
		     struct txn_coord **out);
void txn_coord_destroy(struct txn_coord *tc);
/* Start-up: read back the __transaction_state partitions alone on this
 * node (the one-node broker's: every one), re-register their ongoing
 * transactions on their partitions and restart the markers of prepared
 * ones; `done` runs on the control thread when the broker may serve.
 * Partitions with replicas wait for txn_lead. */
void txn_replay(struct txn_coord *tc, void (*done)(struct ctl *ctl));
/* Whether this node leads __transaction_state partition idx now (the
 * metadata image, told by control/ctl_roles.c): gained, its transactional
 * ids are read back up to the log end and their transactions finished as
 * at start (Prepare* rolled forward, Ongoing registered again); requests
 * for them get COORDINATOR_LOAD_IN_PROGRESS meanwhile. Lost, they are
 * dropped and get NOT_COORDINATOR. */
void txn_lead(struct txn_coord *tc, int32_t idx, int leads);
/* Partitions of __transaction_state coordinated here (loaded). */
int32_t txn_partitions_loaded(const struct txn_coord *tc);
/* Timers: timed-out transactions, marker retries, expired ids, at now_ms
 * (monotonic) and wall (wall-clock ms), the turn's clock. Returns the
 * milliseconds until the next one (at most max_ms). */
int txn_tick(struct txn_coord *tc, int64_t now_ms, int64_t wall, int max_ms);
const struct txn_stats *txn_coord_stats(const struct txn_coord *tc);
/* Transactions open now (Ongoing, PrepareCommit, PrepareAbort) among the
 * ids coordinated here. */
int txn_open_count(const struct txn_coord *tc);
/* Every transactional id coordinated here: fn(view, NULL, -1, arg), then
 * fn(view, topic, partition, arg) per partition of its transaction (the
 * web console's /v1/transactions). Views are borrowed for the call. */
struct txn_view {
	const char *id;
	int64_t pid;
	int16_t epoch;
	const char *state;
	int open;                     /* Ongoing, PrepareCommit or PrepareAbort */
	int32_t timeout_ms;
	int64_t start_ms, last_ms;    /* wall: the transaction's start, its last change */
};
typedef void txn_visit_fn(const struct txn_view *t, const char *topic, int32_t partition, void *arg);
void txn_foreach(const struct txn_coord *tc, txn_visit_fn *fn, void *arg);
/* Print the counters and every open transaction (id, state, producer,
 * age, partitions) to stderr; sluiced does this on SIGUSR1. */
void txn_report(struct txn_coord *tc);
/* TxnOffsetCommit's check: 0, or the Kafka error for the transactional id,
 * producer and the group's offsets partition `opart` (it must be in the
 * ongoing transaction: AddOffsetsToTxn). */
int16_t txn_check_offsets(struct txn_coord *tc, struct kafka_str id, int64_t pid, int16_t epoch, int32_t opart,
			  uint64_t recv_ns);

struct kafka_ctx;
/* @thread shard: InitProducerId with a transactional id,
 * AddPartitionsToTxn, AddOffsetsToTxn, EndTxn. The shards reach it as
 * coord_ops.txn_submit (dataplane/coord.h), never by name. */
int txn_submit(struct kafka_ctx *ctx);

/* @thread shard: WriteTxnMarkers wrote producer pid's COMMIT/ABORT marker
 * into __consumer_offsets partition opart here: this node's group
 * coordinator commits or drops its pending transactional offsets there
 * (coord_ops.submit_txn_offsets_end); ctx gets kafka_ctx_sub_done after. */
void txn_offsets_end_submit(struct kafka_ctx *ctx, int32_t opart, int64_t pid, int commit);

struct coord_txn_verify;
/* @thread shard: a transactional produce found no transaction of its
 * producer open on a partition this node leads: is the partition in the
 * producer's ongoing transaction (KIP-890 part 1)? Answered from this
 * node's state when the id is coordinated here (a request taken up before
 * the transaction began is refused, as late), else by the id's
 * coordinator with AddPartitionsToTxn v4 VerifyOnly
 * (coord_ops.submit_txn_verify). */
void txn_verify_submit(struct kafka_ctx *ctx, struct coord_txn_verify *v);

#endif
