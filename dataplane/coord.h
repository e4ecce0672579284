/* dataplane/coord.h — what the shards ask of the layer above them: the
 * entry points a Kafka handler calls to hand a whole request to the group
 * or the transaction coordinator or the control thread, and the config key
 * table's lookups DescribeConfigs needs. The layer above hands them down
 * as a table of callbacks (struct coord_ops, in struct broker, set before
 * any shard serves), so dataplane/ neither includes a control/ header nor
 * calls a function only control/ defines: layers call down, and a layer
 * that must reach the one above uses the callbacks it was given.
 * control/ctl.c fills the table (ctl_coord_ops) from control/group.c,
 * control/txn.c, control/ctl_admin.c, control/ctl_pid.c and control/config.c.
 *
 * Thread: each function is called on the shard that owns the connection
 * (@thread shard) and sends the request to the control thread through the
 * ring; the coordinator answers through the request's resume, on that
 * shard again.
 * The control thread's part is implemented in control/ctl_admin.c
 * (ctl_submit) and control/ctl_pid.c (producer ids); the shard's own
 * helpers below (building an admin request, auto-creation) in
 * dataplane/coord.c.
 * Owns: nothing. The request (ctx and its arena) stays the shard's; the
 * connection is muted until the answer comes back.
 * Errors: return 0 (the request is taken, or already answered with a
 * Kafka error code in its response); never a partial state.
 */
#ifndef SLUICE_COORD_H
#define SLUICE_COORD_H

#include <stdint.h>

#include "dataplane/kafka/kafka_wire.h"
#include "dataplane/acl.h"
#include "dataplane/sasl.h"

struct kafka_ctx;
struct shard_msg;

/* ---- the control thread: topic administration and producer ids (control/ctl_admin.c, control/ctl_pid.c) ---- */

enum ctl_kind { CTL_CREATE = 1, CTL_DELETE, CTL_AUTO_CREATE, CTL_CREATE_PARTITIONS, CTL_ALTER_CONFIGS };

/* AlterConfigs operations (IncrementalAlterConfigs' numbering). */
enum ctl_config_op { CTL_CFG_SET = 0, CTL_CFG_DELETE = 1 };

/* One topic of an admin request; lives in the requesting shard's arena
 * until the reply. */
struct ctl_topic {
	struct kafka_str name;
	int32_t partitions;          /* -1: num.partitions */
	int16_t replication;         /* -1: default.replication.factor */
	const int32_t *assign;       /* explicit replicas (CreateTopics' and CreatePartitions'
				      * Assignments), assign_rf per partition in partition
				      * order (the request's arena); NULL: the controller places */
	int32_t nassign;             /* partitions assigned */
	int32_t assign_rf;
	int nconfigs;
	struct kafka_str *keys;
	struct kafka_str *values;
	int8_t *ops;                 /* CTL_ALTER_CONFIGS: per key; NULL = all SET */
	int replace;                 /* CTL_ALTER_CONFIGS: overrides not named are removed */
	int broker;                  /* CTL_ALTER_CONFIGS: the broker resource, name "" (the
				      * cluster-wide default) or this node's id */
	int16_t preset;              /* refused by the shard already: the answer */
	int16_t error;               /* out */
	char message[400];           /* out (a TLS file that does not load: key, path and why) */
};

struct ctl_req {
	int kind;
	int validate_only;
	int n;
	struct ctl_topic *topics;
	struct kafka_ctx *ctx;       /* on shard `from` */
	int from;
	struct ctl_req *next_waiting; /* the control thread's: queued behind a topic operation */
};

struct config;

/* DescribeQuorum's answer, filled by the control thread for a shard: the
 * metadata quorum's leader, its epoch (raft's term), high watermark (the
 * commit index) and each voter's log end offset (-1: unknown). */
#define COORD_QUORUM_MAX_VOTERS 64
struct coord_quorum {
	int err;                     /* 0, or -errno (the quorum is not open) */
	int32_t leader;              /* -1: none known */
	int32_t epoch;
	int64_t high_watermark;
	int64_t now_ms;              /* the leader's wall clock, for LastCaughtUpTimestamp */
	int nvoters;
	struct {
		int32_t id;
		int64_t log_end;
	} voters[COORD_QUORUM_MAX_VOTERS];
	/* observers (broker-only nodes, not voters): those fetching the
	 * metadata from the leader (a node that does not lead asks it) */
	int nobservers;
	struct {
		int32_t id;
		int64_t log_end;
	} observers[COORD_QUORUM_MAX_VOTERS];
};

/* ElectLeaders, for the control thread: each partition named (the shard
 * lists every partition for a request naming none), its result filled
 * there (a Kafka error code, 0: elected). The arrays are the shard's,
 * borrowed until ctx gets kafka_ctx_sub_done; names are copies. */
struct coord_elect_part {
	const char *topic;
	int32_t topic_len;
	int32_t partition;
	int16_t err;
};
struct coord_elect {
	int type;                    /* 0: preferred, 1: unclean */
	int32_t timeout_ms;          /* the request's TimeoutMs: how long a node
				      * that forwards it waits for the answer */
	int n;
	struct coord_elect_part *parts;
};

/* UpdateFeatures, for the control thread: each update named (a copy of
 * the feature's name), its result filled there (err, a Kafka code, and
 * msg, NUL-terminated, empty for none); err at the top for the whole
 * request (NOT_CONTROLLER). The arrays are the shard's, borrowed until ctx
 * gets kafka_ctx_sub_done. */
struct coord_feature_update {
	const char *name;
	int16_t level;               /* the new MaxVersionLevel */
	int8_t upgrade_type;         /* 1 upgrade, 2 safe downgrade, 3 unsafe downgrade */
	int16_t err;
	char msg[256];
};
struct coord_features {
	int validate_only;
	int n;
	struct coord_feature_update *items;
	int16_t err;
	char msg[256];
};

/* AlterPartitionReassignments and ListPartitionReassignments, for the
 * control thread. Alter: each partition named with its target replicas
 * (ntarget -1: cancel), its result filled there (err, a Kafka code, and
 * msg, NUL-terminated, empty for none). List: each partition named (all:
 * every one), and the control thread sets found to an array (its malloc) of
 * nfound reassignments in progress, which the shard frees once copied.
 * The arrays are the shard's, borrowed until ctx gets kafka_ctx_sub_done;
 * names are copies. */
#define COORD_REASSIGN_MAX 64        /* replicas of a partition */
struct coord_reassign_part {
	const char *topic;
	int32_t topic_len;
	int32_t partition;
	const int32_t *target;
	int32_t ntarget;             /* -1: cancel */
	int16_t err;
	char msg[120];
};
struct coord_reassign_found {
	char topic[256];
	int32_t partition;
	int16_t nreplicas, nadding, nremoving;
	int32_t replicas[COORD_REASSIGN_MAX], adding[COORD_REASSIGN_MAX], removing[COORD_REASSIGN_MAX];
};
struct coord_reassign {
	int list;                    /* 0: alter, 1: list */
	int all;                     /* list: every partition (parts unused) */
	int n;
	struct coord_reassign_part *parts;
	struct coord_reassign_found *found;
	int nfound;
};

/* AlterUserScramCredentials, for the control thread: each change, its
 * result (a Kafka code and message) filled there once its record is
 * applied or refused; items with err set already (refused on the shard)
 * are left alone. The array is the shard's, borrowed until ctx gets
 * kafka_ctx_sub_done. */
struct coord_scram_item {
	char name[256];
	int del;                     /* 1: remove name's credential of cred.type */
	struct sasl_scram_cred cred; /* an upsert's (name points at the name above) */
	int16_t err;
	char msg[120];
};
struct coord_scram {
	int n;
	struct coord_scram_item *items;
};

/* An item (coord_scram_item, coord_acl_item) refused on the shard: its
 * err and msg; a second refusal leaves the first. */
#define COORD_REFUSE(it, code, text) coord_refuse(&(it)->err, (it)->msg, sizeof((it)->msg), (code), (text))
void coord_refuse(int16_t *err, char *msg, size_t cap, int16_t code, const char *text);

/* CreateAcls and DeleteAcls, for the control thread: each binding to add
 * or remove (its strings in the shard's arena), its result filled there
 * once its record is applied or refused; items with err set already are
 * left alone. Borrowed until ctx gets kafka_ctx_sub_done. */
struct coord_acl_item {
	struct acl_binding b;
	int del;                     /* 1: remove b */
	int16_t err;
	char msg[120];
};
struct coord_acl {
	int n;
	struct coord_acl_item *items;
};

/* KIP-890's verification: a transactional batch reached a partition
 * leader with no transaction of its producer open there; the transaction
 * coordinator (this node's, or through AddPartitionsToTxn VerifyOnly the
 * one on the id's node) says whether the partition is in the producer's
 * ongoing transaction. In the shard's arena, borrowed until done runs. */
struct coord_txn_verify {
	struct kafka_str id;         /* the transactional id (the request's frame) */
	struct kafka_str topic;
	int32_t partition;
	int64_t pid;
	int16_t epoch;
	uint64_t recv_ns;            /* when the produce was taken up */
	int from;                    /* the shard */
	/* @thread shard from: m->p[0] is this request, err and since_ns filled */
	void (*done)(void *self, struct shard_msg *m);
	void *cookie;
	int16_t err;                 /* out: 0 in the transaction, else the Kafka code for the
				      * producer (retriable ones as NOT_ENOUGH_REPLICAS, Kafka's) */
	uint64_t since_ns;           /* out: when the transaction began, on this node's clock (0:
				      * coordinated on another node) */
};

/* The callbacks the layer above gives the shards. Read-only once set. */
struct coord_ops {
	/* @thread shard: OffsetCommit, OffsetFetch, JoinGroup, Heartbeat,
	 * LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups,
	 * OffsetDelete, TxnOffsetCommit: to the group coordinator. */
	int (*submit_group)(struct kafka_ctx *ctx);
	/* @thread shard: InitProducerId with a transactional id,
	 * AddPartitionsToTxn, AddOffsetsToTxn, EndTxn: to the transaction
	 * coordinator. */
	int (*submit_txn)(struct kafka_ctx *ctx);
	/* @thread shard. Hand an admin request to the control thread; the
	 * shard's ctx gets kafka_ctx_sub_done when it is answered. */
	void (*submit_admin)(struct kafka_ctx *ctx, struct ctl_req *req);
	/* @thread shard. WriteTxnMarkers wrote a COMMIT (commit 1) or ABORT
	 * marker of producer pid into partition opart of __consumer_offsets:
	 * the group coordinator materialises or drops the producer's pending
	 * transactional offsets of that partition; ctx gets
	 * kafka_ctx_sub_done once it has. */
	void (*submit_txn_offsets_end)(struct kafka_ctx *ctx, int32_t opart, int64_t pid, int commit);
	/* @thread shard. Verify a transactional produce (struct
	 * coord_txn_verify); v->done runs on v->from once answered. */
	void (*submit_txn_verify)(struct kafka_ctx *ctx, struct coord_txn_verify *v);
	/* @thread shard. A new producer id for an idempotent producer (unique
	 * across restarts: handed out from blocks reserved in the metadata
	 * log); *out is filled (-1 on failure) before ctx gets
	 * kafka_ctx_sub_done. */
	void (*submit_producer_id)(struct kafka_ctx *ctx, int64_t *out);
	/* @thread shard. DescribeQuorum: *out is filled before ctx gets
	 * kafka_ctx_sub_done. */
	void (*submit_quorum)(struct kafka_ctx *ctx, struct coord_quorum *out);
	/* @thread shard. ElectLeaders: each part's err is filled (the records
	 * applied) before ctx gets kafka_ctx_sub_done. */
	void (*submit_elect)(struct kafka_ctx *ctx, struct coord_elect *req);
	/* @thread shard. UpdateFeatures: each update's err is filled (its
	 * record applied, or refused) before ctx gets kafka_ctx_sub_done. */
	void (*submit_features)(struct kafka_ctx *ctx, struct coord_features *req);
	/* @thread shard. AlterPartitionReassignments and
	 * ListPartitionReassignments: req is filled (the records applied)
	 * before ctx gets kafka_ctx_sub_done. */
	void (*submit_reassign)(struct kafka_ctx *ctx, struct coord_reassign *req);
	/* @thread shard. AlterUserScramCredentials: each item's err is filled
	 * (its record applied) before ctx gets kafka_ctx_sub_done. */
	void (*submit_scram)(struct kafka_ctx *ctx, struct coord_scram *req);
	/* @thread shard. CreateAcls, DeleteAcls: each item's err is filled
	 * (its record applied) before ctx gets kafka_ctx_sub_done. */
	void (*submit_acl)(struct kafka_ctx *ctx, struct coord_acl *req);
	/* @thread ctl. The message fn a shard sends to the control thread (with
	 * its parking shard_send) for a new producer id outside a request (the
	 * native protocol's sessions): m->p[0] a cookie, m->p[1] the
	 * completion, a void (*)(void *self, struct shard_msg *m), m->v[0] the
	 * shard. The completion runs on that shard with m->p[0] = cookie,
	 * m->v[0] = the id or -errno. */
	void (*producer_id_msg)(void *self, struct shard_msg *m);

	/* The config key table, for DescribeConfigs on the shards (pure
	 * lookups, any thread; the config itself comes from the snapshot). */
	int (*key_dynamic)(const char *key);
	const char *(*topic_key_at)(int i);
	const char *(*topic_broker_key)(const char *key);
	const char *(*topic_default)(const struct config *c, const char *key);
	const char *(*key_source)(const struct config *c, const char *key);
	void (*foreach_key)(const struct config *c,
			       void (*fn)(const char *key, const char *value, const char *source, int is_default,
					  void *arg),
			       void *arg);
};

/* @thread shard: an admin request of `kind` for n topics, zeroed, in the
 * request's arena; NULL when the arena is full. */
struct ctl_req *ctl_req_new(struct kafka_ctx *ctx, int kind, int n);

/* @thread shard: Metadata named topics that do not exist: ask the control
 * thread to create them (auto.create.topics.enable) through submit_admin;
 * the request resumes (ctx->resume, set by the caller) when it has. */
void ctl_request_auto_create(struct kafka_ctx *ctx, struct kafka_str *names, int n);

#endif
