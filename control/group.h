/* control/group.h — the group coordinator: consumer groups (the classic
 * protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, static
 * membership) and committed offsets (OffsetCommit, OffsetFetch,
 * OffsetDelete, DeleteGroups, ListGroups, DescribeGroups).
 *
 * Thread: the control thread (@thread ctl) except group_submit, which a
 * shard calls. A shard hands the whole decoded request over (the
 * connection is muted while it is in progress, so nothing else touches
 * its arena); the coordinator builds the response in memory of its own
 * (struct group_call) and hands the request back; the shard encodes and
 * frees. A JoinGroup or SyncGroup may stay with the coordinator until the
 * rebalance completes; nothing on a shard waits for it.
 *
 * Offsets are records of the compacted internal topic __consumer_offsets
 * in Kafka's own format (key version 1: group, topic, partition; value
 * version 3: offset, leader epoch, metadata, commit timestamp; a null value
 * deletes), partition chosen by the Java hash of the group id as Kafka
 * does. A commit is answered once its batch is past the partition's high
 * watermark (acks=all: every in-sync replica has it; durable here on one
 * node); the in-memory cache the coordinator answers OffsetFetch from is
 * updated then. The coordinator of a group is the leader of its partition:
 * a partition is read back when this node becomes its leader (or at start,
 * alone here) and dropped when it stops (group_lead, group_replay).
 *
 * Errors: Kafka error codes in the responses; -errno elsewhere.
 */
#ifndef SLUICE_GROUP_H
#define SLUICE_GROUP_H

#include <stdint.h>

struct broker;
struct config;
struct ctl;
struct kafka_ctx;
struct md_topic;
struct shard_msg;

#define GROUP_OFFSETS_TOPIC "__consumer_offsets"

struct group_coord;
struct gmem;

/* Counters, read by the control thread (and later the metrics endpoint). */
/* What started a rebalance (a group entering PreparingRebalance). */
enum group_rebalance_cause {
	GROUP_REBALANCE_JOIN,         /* a new member joined */
	GROUP_REBALANCE_REJOIN,       /* a member joined again with other protocols, or the leader did */
	GROUP_REBALANCE_LEAVE,        /* a member left (LeaveGroup) */
	GROUP_REBALANCE_EXPIRED,      /* a member's session timed out */
	GROUP_REBALANCE_ASSIGNMENT,   /* the leader's assignment was too large to store */
	GROUP_REBALANCE_CAUSES
};

struct group_stats {
	uint64_t joins, syncs, heartbeats, leaves;
	uint64_t rebalances;              /* generations completed */
	uint64_t rebalance_causes[GROUP_REBALANCE_CAUSES];   /* rebalances started, by cause */
	uint64_t commits;                 /* partitions committed */
	uint64_t commit_refused;          /* partitions refused: stale generation, unknown member,
					   * rebalance in progress, owned by another member, fenced */
	uint64_t commit_refused_generation, commit_refused_member, commit_refused_rebalance,
		 commit_refused_owner, commit_refused_fenced;
	uint64_t members_expired;         /* session timeouts */
	uint64_t offsets_expired;
	uint64_t replayed_records;
	uint64_t partitions_loaded;       /* __consumer_offsets partitions read back (start-up and
					   * leadership gained) */
	uint64_t groups_unloaded;         /* groups dropped with a partition this node stopped leading */
};

/* What a request holds while the coordinator has it; in the request's
 * arena, allocated by the shard. */
struct group_call {
	struct gmem *mem;                 /* response memory (coordinator's), freed by the shard */
	int from;                         /* the connection's shard */
	int writes;                       /* offset appends outstanding */
	char host[56];                    /* JoinGroup: the client's address, "/1.2.3.4" */
};

/* @thread ctl */
int group_coord_create(struct ctl *ctl, struct broker *b, const struct config *cfg, struct group_coord **out);
void group_coord_destroy(struct group_coord *gc);
/* Start-up: read back the offsets partitions alone on this node (the
 * one-node broker's: every one) on their owner shards; `done` runs on the
 * control thread when all are in. Returns how many are outstanding (0:
 * done is not called). Partitions with replicas wait for group_lead. */
int group_replay(struct group_coord *gc, void (*done)(struct ctl *ctl));
/* Whether this node leads offsets partition idx now (the metadata image;
 * control/ctl_roles.c tells, after the partition's role went to its shard):
 * gained, the partition's groups and offsets are read back up to its log
 * end (requests for them get COORDINATOR_LOAD_IN_PROGRESS meanwhile); lost,
 * they are dropped (NOT_COORDINATOR from then on). Group requests for a
 * partition not loaded here are refused so; clients find the coordinator
 * again. */
void group_lead(struct group_coord *gc, int32_t idx, int leads);
/* Partitions of __consumer_offsets coordinated here (loaded). */
int32_t group_partitions_loaded(const struct group_coord *gc);
/* Timers: session timeouts, rebalance completion, offsets expiry, at
 * now_ms (the turn's monotonic clock, ctl_now_ms). Returns the
 * milliseconds until the next deadline (at most max_ms). */
int group_tick(struct group_coord *gc, int64_t now_ms, int max_ms);
/* The broker is stopping: answer every waiting JoinGroup/SyncGroup with
 * NOT_COORDINATOR (clients find the coordinator again) and refuse new
 * membership requests; commits still complete. */
void group_stopping(struct group_coord *gc);
const struct group_stats *group_coord_stats(const struct group_coord *gc);
/* Print every group to stderr (state, members, and per committed
 * partition: committed offset, high watermark, lag, the age of the oldest
 * unconsumed record, owner) once the owner shards have answered the lag
 * queries; sluiced does this on SIGUSR1. */
void group_report(struct group_coord *gc);
/* Ask the owner shards for each committed partition's high watermark and
 * the timestamp of its oldest unconsumed record (what group_report prints);
 * the answers land in the coordinator's state when they come back, for
 * group_foreach. One scan at a time; until it answers, the last scan's
 * values stay. */
void group_lag_scan(struct group_coord *gc);
/* group_lag_scan, unless one began less than min_gap_ms ago (now_ms:
 * ctl_now_ms): for readers that come often (/metrics scrapes, the web
 * console), each scan asking the owner shards for one batch per lagging
 * partition. */
void group_lag_scan_every(struct group_coord *gc, int64_t now_ms, int64_t min_gap_ms);

struct group_view {
	const char *id;
	const char *state;
	int32_t generation;
	int members;
	const char *protocol_type;        /* "" none (a group that only commits offsets) */
	const char *protocol;             /* the assignor chosen, "" none */
	const char *leader;               /* member id, "" none */
};
struct group_offset_view {
	const char *topic;
	int32_t partition;
	int64_t committed;
	int64_t high_watermark;           /* at the last lag scan; -1: unknown */
	int64_t oldest_unconsumed_ts;     /* record timestamp (ms); -1: none (caught up) or unknown */
};
/* fn(group, NULL, arg) once per group, then fn(group, offset, arg) per
 * committed partition. Views are borrowed for the call. */
typedef void group_visit_fn(const struct group_view *g, const struct group_offset_view *o, void *arg);
void group_foreach(const struct group_coord *gc, group_visit_fn *fn, void *arg);

/* One group, whole: fn as group_foreach calls it for that group alone, then
 * member(m, arg) per member with the partitions the current assignment
 * gives it, then its rebalance events. -ENOENT: no such group. */
struct group_member_view {
	const char *id, *instance, *client_id, *host;   /* instance "" none */
	int nassigned;
	const char *const *topics;        /* assigned partitions: topics[i], parts[i] */
	const int32_t *parts;
};
typedef void group_member_fn(const struct group_member_view *m, void *arg);
/* and event(e, arg) per rebalance event kept (the last 8), oldest first */
struct group_event_view {
	int64_t time_ms;                  /* wall */
	int32_t generation;               /* the generation ending (a start) or begun (completed) */
	const char *what;                 /* join, rejoin, leave, session_timeout, assignment_too_large:
					   * a rebalance started for it; generation: one completed */
	int members;
	const char *who;                  /* the member's client id, "" none */
};
typedef void group_event_fn(const struct group_event_view *e, void *arg);
/* and lagf(time_ms, lag, arg) per sample of its total lag kept (every 5 s
 * for the last 5 minutes, oldest first; the partitions held here) */
typedef void group_lag_fn(int64_t time_ms, int64_t lag, void *arg);
int group_view_one(const struct group_coord *gc, const char *id, group_visit_fn *fn, group_member_fn *member,
		   group_event_fn *event, group_lag_fn *lagf, void *arg);

/* The __consumer_offsets partition of a group (Java hash of its id). */
int32_t group_offsets_partition(const struct group_coord *gc, const char *group);
/* The transaction coordinator wrote producer pid's marker into offsets
 * partition opart: its TxnOffsetCommit offsets there become the groups'
 * committed offsets (commit) or are dropped (abort). */
void group_txn_end(struct group_coord *gc, int32_t opart, int64_t pid, int commit);
/* TxnOffsetCommit asks the transaction coordinator, which builds on this
 * one, through the check it registers here (txn_coord_create); the check
 * calls done(gc, cookie, err) once, then or later (the id's coordinator
 * may be on another node): 0, or the Kafka error for the transactional id,
 * producer and offsets partition (see txn_check_offsets). Unset: every
 * TxnOffsetCommit is refused with COORDINATOR_NOT_AVAILABLE. */
typedef void group_txn_checked_fn(struct group_coord *gc, void *cookie, int16_t err);
typedef void group_txn_check_fn(void *arg, struct kafka_str id, int64_t pid, int16_t epoch, int32_t opart,
				uint64_t recv_ns, group_txn_checked_fn *done, void *cookie);
void group_set_txn_check(struct group_coord *gc, group_txn_check_fn *fn, void *arg);

/* @thread shard: free a response's memory once it is encoded. */
void group_mem_free(struct gmem *m);

struct kafka_ctx;
/* @thread shard: hand a decoded group request to the coordinator; the
 * response comes back through the request's resume. The shards reach it
 * as coord_ops.group_submit (dataplane/coord.h), never by name. */
int group_submit(struct kafka_ctx *ctx);

#endif
