/* control/group_table.h — shared between control/group*.c only: the
 * coordinator's state (groups, members, committed offsets, writes in
 * flight) and the helpers the membership, offsets, replay and lag files
 * call on it.
 *
 * Thread: the control thread (@thread ctl) unless a function says
 * otherwise; everything here is the coordinator's own, touched by no
 * other thread (a shard sees only a request's struct group_call and the
 * response memory it frees, see group.h).
 *
 * Errors: Kafka error codes (int16_t) into responses; -errno elsewhere;
 * out of memory aborts (control-thread bookkeeping, as xcalloc).
 */
#ifndef SLUICE_GROUP_TABLE_H
#define SLUICE_GROUP_TABLE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control/coord_load.h"
#include "control/cutil.h"
#include "control/group.h"
#include "control/hmap.h"
#include "dataplane/kafka/kafka_msgs.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part_proxy.h"

enum gstate { G_EMPTY, G_PREPARING, G_COMPLETING, G_STABLE, G_DEAD };
/* Kafka's names of the states (ListGroups, DescribeGroups). */
extern const char *const group_state_names[];
/* ---- state ----------------------------------------------------------------- */

struct goffset {
	char *topic;
	int32_t part;
	int64_t offset;
	int32_t epoch;
	char *meta;
	int64_t commit_ts;
	/* from the last lag scan (group_report) */
	int64_t hw;                   /* -1: unknown */
	int64_t oldest_ts;            /* timestamp of the record at `offset`; -1: none (caught up) */
};

struct gowner {               /* who owns a partition in the current assignment */
	char *topic;
	int32_t part;
	struct gmember *m;
};

struct gmember {
	char *id, *instance, *client_id, *host;
	int32_t session_ms, rebalance_ms;
	int nprot;
	char **pname;
	uint8_t **pmeta;
	int32_t *pmeta_len;
	uint8_t *assign;
	int32_t assign_len;
	struct kafka_ctx *join;       /* a JoinGroup waiting for the rebalance */
	struct kafka_ctx *sync;       /* a SyncGroup waiting for the leader */
	int64_t deadline;             /* session expiry (monotonic ms) */
	struct gmember *next;
};

struct gpending {             /* a member id handed out with MEMBER_ID_REQUIRED */
	char *id;
	int64_t deadline;
	struct gpending *next;
};

/* The last rebalances of a group, for the web console's timeline: each
 * start (with its cause and the member that caused it) and each generation
 * completed. */
#define GROUP_EVENTS 8
#define GROUP_EVENT_GENERATION GROUP_REBALANCE_CAUSES   /* a kind: the generation completed */
struct group_event {
	int64_t wall_ms;
	int32_t generation;           /* the generation ending (a start) or begun (completed) */
	int16_t kind;                 /* enum group_rebalance_cause, or GROUP_EVENT_GENERATION */
	int16_t members;
	char who[48];                 /* the member's client id ("" none), cut to fit */
};

/* A group's total lag over the last minutes (the console's chart opens
 * with them): sampled every GROUP_LAG_SAMPLE_MS from the high watermarks
 * the owner shards publish, for the partitions held on this node. */
#define GROUP_LAG_HIST 60
#define GROUP_LAG_SAMPLE_MS 5000
struct group_lag_sample {
	int64_t wall_ms;
	int64_t lag;
};

struct group {
	char *id;
	enum gstate state;
	int32_t generation;
	char *ptype, *protocol, *leader;
	struct gmember *members;
	int nmembers;
	struct gpending *pending;
	int64_t rebalance_deadline;   /* PREPARING: complete by then at the latest */
	int64_t delay_deadline;       /* PREPARING from empty: wait this long for more joins */
	int64_t empty_since;          /* wall ms */
	struct hmap offsets;          /* struct goffset */
	struct hmap owners;           /* struct gowner, from the consumer assignment */
	int writes;                   /* appends in flight */
	int dead;                     /* deleted: freed when no write is in flight */
	struct gtxn *txn;             /* offsets of open transactions (TxnOffsetCommit) */
	struct group_event events[GROUP_EVENTS];   /* ring: the newest at (nevents - 1) % GROUP_EVENTS */
	uint32_t nevents;
	struct group_lag_sample lag_hist[GROUP_LAG_HIST];   /* ring, as events */
	uint32_t nlag;
};

/* Each group's total lag now, into its lag_hist (group_lag.c). */
void group_lag_sample(struct group_coord *gc);
/* Note a rebalance event of g (kind: a cause or GROUP_EVENT_GENERATION). */
void group_event_add(struct group_coord *gc, struct group *g, int kind, const char *who);

struct gtxn {                 /* an offset committed inside a transaction, not yet decided */
	int64_t pid;
	char *topic;
	int32_t part;
	int64_t offset;
	int32_t epoch;
	char *meta;
	int64_t ts;
	struct gtxn *next;
};

struct gmem {
	struct gmem *next;
	size_t used, cap;
	uint8_t *blob;                /* or a reference to a member's metadata (cap 0) */
	_Alignas(16) unsigned char data[];
};

struct gentry {               /* one record of an offsets append */
	char *topic;
	int32_t part;
	int64_t offset;
	int32_t epoch;
	char *meta;
	int64_t ts;
	int del;
	int16_t *err;                 /* the response slot, or NULL */
};

struct gwrite {
	struct group_coord *gc;
	struct group *g;
	struct kafka_ctx *ctx;        /* NULL: expiry */
	uint8_t *batch;
	int n;
	struct gentry *e;
	int remove_group;             /* DeleteGroups: drop the group once durable */
	int64_t txn_pid;              /* TxnOffsetCommit: the producer; -1: plain offsets */
	struct part_append_req req;   /* the append on the owner (batch borrowed until done) */
};

struct group_coord {
	struct ctl *ctl;
	struct broker *b;
	const struct config *cfg;
	struct hmap groups;           /* struct group: only those of partitions loaded here
				       * (or loading: read back so far) */
	struct coord_load load;       /* which __consumer_offsets partitions this node
				       * coordinates (control/coord_load.h) */
	int32_t min_session, max_session, max_size, initial_delay;
	int64_t retention_ms, retention_check_ms, next_expiry;
	int32_t max_meta;
	int stopping;
	int dirty;                    /* membership changed: deadlines may be earlier */
	int64_t next_due;             /* the earliest deadline at the last scan */
	int64_t next_lag_sample;      /* monotonic ms: the groups' lag sampled next (group_lag.c) */
	int replays;                  /* start-up reads outstanding */
	void (*replay_done)(struct ctl *ctl);
	int lag_queries;              /* outstanding in the current lag scan */
	int report_wanted;            /* print the report when the scan completes (SIGUSR1) */
	int64_t lag_scan_ms;          /* when the last scan began (ctl_now_ms), for group_lag_scan_every */
	int lag_scanned;              /* a scan has begun */
	struct group_stats st;
	group_txn_check_fn *txn_check;  /* the transaction coordinator's (group_set_txn_check) */
	void *txn_check_arg;
};

static inline char *sdup(const char *s)
{
	return s ? kdup((struct kafka_str){ s, (int32_t)strlen(s) }) : NULL;
}

static inline int keq(struct kafka_str s, const char *c)
{
	if (s.len < 0 || !c)
		return s.len < 0 && !c;
	return strlen(c) == (size_t)s.len && !memcmp(s.ptr, c, (size_t)s.len);
}

static inline int kempty(struct kafka_str s)
{
	return s.len <= 0;
}

struct tpkey {
	const char *topic;
	int32_t part;
};

static inline uint64_t group_hash_tp(const char *topic, int32_t part)
{
	return hmap_hash_bytes(hmap_hash_str(topic), &part, sizeof(part));
}

/* ---- response memory (group.c): the coordinator's, freed by the shard
 * that encodes the response (group_mem_free) ---- */
/* n zeroed bytes, 16-aligned, in call's response memory. */
void *group_alloc(struct group_call *call, size_t n);
#define GALLOC(call, type, n) ((type *)group_alloc((call), sizeof(type) * (size_t)((n) > 0 ? (n) : 1)))
/* s copied into the response memory (NULL: a null string). */
struct kafka_str group_str(struct group_call *call, const char *s);
/* A wire string copied into the response memory (null stays null). */
struct kafka_str group_kcopy(struct group_call *call, struct kafka_str s);
/* Hand the request back to its shard: it encodes ctx->resp. */
void group_reply(struct group_coord *gc, struct kafka_ctx *ctx);

static inline struct group_call *group_call_of(struct kafka_ctx *ctx)
{
	return ctx->state;
}

/* ---- groups, members, committed offsets (group.c) ---- */
/* Answer g's waiting JoinGroup and SyncGroup calls with err. */
void group_answer_waiting(struct group_coord *gc, struct group *g, int16_t err);
/* The group of that id, or NULL; group_findk takes a wire string. */
struct group *group_find(struct group_coord *gc, const char *id);
struct group *group_findk(struct group_coord *gc, struct kafka_str id);
/* A new empty group, in the coordinator's map. */
struct group *group_new(struct group_coord *gc, const char *id);
/* Out of the map and Dead; freed now, or by the last write in flight. */
void group_remove(struct group_coord *gc, struct group *g);
void group_free(struct group *g);
struct gmember *group_member_find(struct group *g, struct kafka_str id);
struct gmember *group_member_by_instance(struct group *g, struct kafka_str inst);
/* The index of protocol in m's protocols, or -1. */
int group_member_supports(const struct gmember *m, const char *protocol);
/* The member the current assignment gives the partition, or NULL. */
struct gmember *group_owner_of(struct group *g, const char *topic, int32_t part);
struct goffset *group_offset_find(struct group *g, const char *topic, int32_t part);
void group_offset_set(struct group *g, const char *topic, int32_t part, int64_t off, int32_t epoch,
		      const char *meta, int64_t ts);
void group_offset_del(struct group *g, const char *topic, int32_t part);
/* qsort order of struct goffset pointers: topic, then partition. */
static inline int group_offset_cmp(const void *a, const void *b)
{
	const struct goffset *x = *(const struct goffset *const *)a, *y = *(const struct goffset *const *)b;
	int c = strcmp(x->topic, y->topic);

	return c ? c : (x->part > y->part) - (x->part < y->part);
}

/* ---- the offsets topic and its partitions' keys (group_offsets.c) ---- */
/* The offsets topic in the published snapshot (looked up each time: a
 * leader change republishes it), or NULL before it exists. */
const struct md_topic *group_offsets_topic(const struct group_coord *gc);
/* 0 when the group's partition is coordinated here, else the Kafka error
 * for its requests (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
 * COORDINATOR_NOT_AVAILABLE); 0 for an empty or overlong id (the handler
 * refuses it as it did). */
int16_t group_key_err(const struct group_coord *gc, struct kafka_str id);

/* ---- committed offsets (group_offsets.c) ---- */
void group_handle_commit(struct group_coord *gc, struct kafka_ctx *ctx);
void group_handle_txn_commit(struct group_coord *gc, struct kafka_ctx *ctx);
void group_handle_fetch(struct group_coord *gc, struct kafka_ctx *ctx);
void group_handle_delete_groups(struct group_coord *gc, struct kafka_ctx *ctx);
void group_handle_offset_delete(struct group_coord *gc, struct kafka_ctx *ctx);
/* Producer pid committed e inside a transaction: held until its marker. */
void group_txn_pending_set(struct group *g, int64_t pid, struct gentry *e);
/* Tombstones for the offsets of empty groups older than
 * offsets.retention.minutes. */
void group_offsets_expire(struct group_coord *gc);

/* group_table.c: what the membership state machine (group.c) does to
 * the tables besides finding and adding. */
void group_owners_clear(struct group *g);
void group_owners_add(struct group *g, struct gmember *m);
void group_owners_drop_member(struct group *g, struct gmember *m);
void group_member_free(struct gmember *m);
void group_member_set_protocols(struct gmember *m, const struct kafka_join_group_request *q);
int group_member_same_protocols(const struct gmember *m, const struct kafka_join_group_request *q);
struct kafka_bytes group_bytes(struct group_call *call, const uint8_t *b, int32_t n);
struct kafka_bytes group_bytes_ref(struct group_call *call, uint8_t *blob, int32_t n);

#endif
