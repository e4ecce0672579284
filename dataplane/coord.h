/* dataplane/coord.h — what the shards ask of the coordinators: the entry
 * points a Kafka handler calls to hand a whole request to the group or the
 * transaction coordinator on the control thread. Declared here, on the
 * shards' side, so that a handler needs no control/ header (layers call
 * down: dataplane never includes control/); control/group.c and
 * control/txn.c implement them.
 *
 * Thread: each function is called on the shard that owns the connection
 * (@thread shard) and sends the request to the control thread through the
 * ring; the coordinator answers through the request's resume, on that
 * shard again.
 * Owns: nothing. The request (ctx and its arena) stays the shard's; the
 * connection is muted until the answer comes back.
 * Errors: return 0 (the request is taken, or already answered with a
 * Kafka error code in its response); never a partial state.
 */
#ifndef SLUICE_COORD_H
#define SLUICE_COORD_H

struct kafka_ctx;

/* @thread shard: OffsetCommit, OffsetFetch, JoinGroup, Heartbeat,
 * LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups,
 * OffsetDelete, TxnOffsetCommit: to the group coordinator (control/group.c). */
int group_submit(struct kafka_ctx *ctx);

/* @thread shard: InitProducerId with a transactional id, AddPartitionsToTxn,
 * AddOffsetsToTxn, EndTxn: to the transaction coordinator (control/txn.c). */
int txn_submit(struct kafka_ctx *ctx);

#endif
