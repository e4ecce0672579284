/* dataplane/part_role.h — what this node is for a partition in the
 * cluster (Kafka's Partition leader and follower state), on its owner:
 * - a leader with followers keeps each follower's log end offset (its
 *   replica fetch offset, which it sends only once everything below is
 *   durable on it) and when it was last caught up; the high watermark is
 *   the least of the ISR's log ends, the leader's own being its durable
 *   log end, so an acks=all produce is answered once every ISR member has
 *   written its records (O_DIRECT completed);
 * - a follower keeps its leader (broker, address, epoch) and the leader's
 *   high watermark: its own is the least of that and its durable log end.
 * A partition alone (this node its only replica, leading) has no role
 * (p->role NULL) and runs as the one-node broker always did: the high
 * watermark is the durable log end.
 *
 * The control thread sends the role (part_proxy_set_role) when the image
 * says what this node is; the leader tells it (a message whose fn the role
 * carries: a callback it was given) when a follower should leave or join
 * the ISR; the new ISR comes back as a role once the metadata log has it.
 *
 * The code: part_role.c (the role taken, the followers' fetches, the ISR
 * asked for) and part_hw.c (the high watermark and the wakes part.c runs
 * on every progress, below part.c).
 *
 * Thread: the owner shard only (@thread owner); struct part_role_msg is the
 * sender's, read on the owner until the proxy's done runs.
 * Allocates: one struct part_role per role change (never per batch or
 * fetch). Errors: -errno.
 */
#ifndef SLUICE_PART_ROLE_H
#define SLUICE_PART_ROLE_H

#include <stdint.h>

struct part;
struct shard;
struct shard_msg;

#define PART_ROLE_MAX_REPLICAS 64    /* replicas of one partition (the metadata log's bound) */

/* What the control thread says this node is for a partition. */
struct part_role_msg {
	int32_t self;                /* this node's id */
	int32_t leader;              /* the leading broker, -1: none */
	int32_t leader_epoch;
	int32_t nreplicas, nisr;
	int32_t replicas[PART_ROLE_MAX_REPLICAS];
	int32_t isr[PART_ROLE_MAX_REPLICAS];
	char leader_host[256];       /* a follower's leader's client listener */
	int32_t leader_port;
	uint32_t leader_repl_ip;     /* its native replication address (network order), */
	int32_t leader_repl_port;    /* port 0: none (the leader runs no DPDK) */
	/* The leader's ISR proposal to the control thread: sent there as
	 * { .fn = isr_change, .p = { topic id: 16 bytes in p[0], p[1] },
	 * .v = { index, broker, join, leader_epoch } }: the partition by value,
	 * never a pointer to it (join 1: add broker, 0: remove it; 2: the broker is
	 * this node, whose log of the partition failed: it leaves the ISR and
	 * the leadership, control/ctl_offline.c). */
	void (*isr_change)(void *self, struct shard_msg *m);
	int isr_to;                  /* the thread that receives it */
	/* a follower that is an adding replica of a reassignment, or that
	 * the topic's follower.replication.throttled.replicas names: its
	 * fetches take the follower's throttle (replica_fetcher.c) */
	int throttled;
	/* a leader of a partition being reassigned (adding replicas), or
	 * that the topic's leader.replication.throttled.replicas names:
	 * what it sends followers outside the ISR takes the leader's
	 * throttle (repl_quota.h) */
	int leader_throttled;
};

/* One follower as its leader sees it (Kafka's Replica). */
struct part_follower {
	int32_t id;
	uint8_t in_isr;
	uint8_t reported;            /* an ISR change was asked for it, not yet applied */
	int64_t leo;                 /* its last fetch offset: its durable log end (-1: unknown) */
	int64_t hw_sent;             /* the high watermark its last answer carried */
	int64_t fetch_leader_leo;    /* the leader's log end at its previous fetch */
	uint64_t fetch_ns;           /* its previous fetch */
	uint64_t caught_up_ns;       /* the last time it had everything the leader had */
	uint64_t reported_ns;
};

struct part_role {
	int leading;                 /* 1: this node leads; 0: it follows `leader` */
	int32_t self, leader, leader_epoch;
	char leader_host[256];
	int32_t leader_port;
	uint32_t leader_repl_ip;
	int32_t leader_repl_port;
	int64_t hw;                  /* leader: its high watermark (never moves back);
				      * follower: the leader's, as its last answer said */
	int64_t last_leo, last_hw;   /* leader: the log end and high watermark the replica
				      * fetches were last woken for */
	uint64_t fetch_watchers;     /* shards with replica fetches parked on it */
	void (*isr_change)(void *self, struct shard_msg *m);
	int isr_to;
	int32_t fetch_epoch;         /* follower: the epoch its fetch in flight was sent at */
	uint64_t retry_ns;           /* follower: the leader refused it; asked again after */
	int throttled;               /* follower: a throttled replica (part_role_msg's) */
	uint8_t fetch_skip;          /* follower: why it was last left out of a fetch
				      * (enum shard_repl_skip + 1; 0: asked since) */
	uint64_t skip_logged_ns;     /* follower: a reason it was skipped or its answer
				      * dropped was last logged (once a minute at most) */
	int leader_throttled;        /* leader: its followers outside the ISR are throttled */
	int nisr;                    /* ISR members, this node included */
	int offline_asked;           /* its log failed: leaving the ISR was asked (part_role_log_failed) */
	int nf;
	struct part_follower f[];    /* the other replicas */
};

/* Take the role m says (on the owner): a partition alone has none; a
 * leader's followers keep what they had when its epoch stays; a leader's
 * epoch moves the log's (plog_set_leader_epoch). Then the high watermark
 * follows (part_progress). 0, -ENOENT (deleted), -ENOMEM, -EINVAL (a
 * message that names no replica). @thread owner */
int part_role_set(struct part *p, const struct part_role_msg *m);

/* Drop the role (the partition closes or is retired). @thread owner */
void part_role_free(struct part *p);
/* p's log failed on this node: ask the control thread (through the role's
 * isr_change, v[2] 2) to take this node out of its ISR and leadership.
 * @thread owner */
void part_role_log_failed(struct part *p);

/* The high watermark the role allows, into p->pl->high_watermark: a
 * leader's, the least of its durable log end and its ISR followers' log
 * ends, never below what it was; a follower's, the least of its leader's
 * and its durable log end. Called at the top of part_progress when p has
 * a role. @thread owner */
void part_role_hw(struct part *p);

/* The high-watermark checkpoint (Kafka's replication-offset-checkpoint),
 * one file per partition, "high-watermark" in its log's directory: one
 * line "sluice-hw 1 <offset>". Written only while the partition has a
 * role (one node writes none), on the owner's ring through the log's
 * file work (plog_save_file: "<name>.tmp" written, fdatasync'ed, renamed;
 * a crash leaves the old value or the new), by the shard's tick every
 * PART_HW_CKPT_NS when it moved, and at a clean close; read at open and
 * taken by the first role: the high watermark starts at the least of it
 * and the log end (never below the log start), not at the log end. A
 * partition alone forgets it (the file is removed: its high watermark is
 * its durable end again). */
#define PART_HW_FILE "high-watermark"
#define PART_HW_TAG "sluice-hw 1 "
#define PART_HW_CKPT_NS 5000000000ull   /* replica.high.watermark.checkpoint.interval.ms */
/* The checkpoint in p's directory, or -1 (none, or unreadable): a
 * blocking read, at open only. @thread owner */
int64_t part_hw_load(const struct part *p);
/* Queue the high watermark to "high-watermark" if p has a role and it
 * moved since the last (nothing is written per record or batch: the
 * shard's tick and the close call it). @thread owner */
void part_hw_checkpoint(struct part *p);
/* The first role after the open (not alone): the high watermark comes
 * down to the checkpoint the open found (p->hw_ckpt). Alone: forgotten,
 * the file removed, the high watermark the durable log end. @thread owner */
void part_hw_role_taken(struct part *p, int alone);

/* After part_progress woke what the high watermark allows: replica
 * fetches parked on the partition wake when its log end or its high
 * watermark moved (a native fetch answers the news at once; the Fetch
 * handler's waits up to 100 ms for records to carry it). @thread owner */
void part_role_wake(struct part *p);

/* The leader's follower lag in milliseconds into p->pub (Kafka's
 * lastCaughtUpTimeMs as a gauge): the longest a follower that has not
 * everything the leader has (its fetch offset below the log end) has not
 * been caught up, at now_ns; 0 when every follower has it all. Run by
 * part_role_hw and part_role_tick. @thread owner */
void part_role_publish_lag_ms(struct part *p, uint64_t now_ns);

/* Wake the replica fetches parked on p now. @thread owner */
void part_role_wake_now(struct part *p);

/* A replica fetch from broker id at offset (its durable log end), at
 * now_ns: its log end and caught-up time move, the high watermark follows
 * (acks waiting are answered), and a follower out of the ISR that reached
 * the high watermark is proposed back in. 0, or -ENOENT when id is not a
 * follower of this leader (not a replica, or this node does not lead).
 * @thread owner */
int part_role_replica_fetch(struct part *p, int32_t id, int64_t offset, uint64_t now_ns);

/* A fetch's leader-epoch check on the owner, before it reads (Kafka's
 * Partition.fetchRecords; one rule for a consumer's Fetch, a follower's
 * Fetch over TCP and its native REPLICA_FETCH): current_epoch (-1: none)
 * against the log's (KIP-320: *err FENCED_LEADER_EPOCH or
 * UNKNOWN_LEADER_EPOCH); then, from last_epoch (the epoch of the fetcher's
 * last batch, -1: none), whether its log diverges from this one (KIP-279):
 * this log knows no such epoch or the offset is below the log start
 * (*err OFFSET_OUT_OF_RANGE), or the epoch's end here is below the fetch
 * offset or only an older epoch is known (*div_epoch, *div_end: where the
 * fetcher cuts). 1: answer so, at once and without records; 0: read
 * (*err 0, *div_epoch -1). @thread owner */
int part_fetch_epoch_check(const struct part *p, int32_t current_epoch, int32_t last_epoch, int64_t offset,
			   int16_t *err, int32_t *div_epoch, int64_t *div_end);

/* Whether a replica fetch parked at offset should answer now: data past
 * offset, or a high watermark newer than its last answer's (the native
 * transport's rule; the Fetch handler answers the latter late, see
 * FETCH_HW_NEWS_NS in handlers_data.c). */
int part_role_fetch_ready(const struct part *p, int32_t id, int64_t offset);

/* The leader's periodic check (every few hundred ms): ISR followers that
 * have not caught up for lag_ns are proposed out of the ISR (asked again
 * after lag_ns if no role answered); a follower out of it that fetches
 * and may join, asked in and not answered for a second (the control
 * thread refuses a fenced broker), is asked again; acks=all produces past
 * their deadline fail with -ETIMEDOUT. @thread owner */
void part_role_tick(struct part *p, uint64_t now_ns, uint64_t lag_ns);

/* The high watermark a follower's replica fetch answer carries, noted
 * as sent. @thread owner */
void part_role_note_sent(struct part *p, int32_t id, int64_t hw);

#endif
