/* control/ctl_internal.h — the control thread's own state, shared by
 * the files that make it up and by nothing else:
 *   ctl_homes.c  its book of this node's partition copies (owner shard,
 *                opened, published block, role told), which every file
 *                below consults to decide what to send where (ctl_homes.h)
 *   ctl_msg.c    its way out: messages to the shards (parked on a full
 *                ring), the partition proxy, the internal logs, the clock
 *   ctl_channel.c the controller channel: proposals and heartbeats of a
 *                node that does not lead the quorum, sent to the one that
 *                does, and served there; a broker-only node's fetches of
 *                the committed records
 *   ctl_quorum.c the metadata log on the Raft quorum: the image follows
 *                the committed records; start-up, import, proposals
 *   ctl_quorum_describe.c DescribeQuorum: this node's view of the quorum,
 *                or the leader's, asked over the controller channel
 *   ctl_meta.c   changes to the metadata: a record proposed, its
 *                continuation run once it was applied (or refused)
 *   ctl_brokers.c this node as a broker (registration, heartbeats) and
 *                the active controller's fencing of brokers
 *   ctl_elect.c  leader elections (the active controller's), and the
 *                snapshot following the partition records applied
 *   ctl_offline.c a partition whose log failed here: this node leaves its
 *                ISR and leadership
 *   ctl_roles.c  what this node is for each partition it hosts (leader,
 *                follower), told to the owner shards; the leaders' ISR
 *                changes proposed
 *   ctl_topic.c  the metadata snapshot and the operations that open,
 *                close and reconfigure partitions on their owner shards;
 *                the one writer of the snapshot's partition homes
 *                (md_partition owner_shard, pub), from ctl_homes.c's book
 *   ctl_admin.c  the topic and config requests of the Kafka API
 *   ctl_follow.c the topic and config changes other nodes made, served
 *                here too
 *   ctl_reassign.c partition reassignments (KIP-455): started, listed,
 *                completed by the active controller; replicas this node
 *                gains opened, those it loses removed
 *   ctl.c        the thread: start-up, the loop, producer ids
 * Each builds only on those listed above it.
 *
 * Thread: everything here is the control thread's (@thread ctl), except
 * the start-up handshake (lock, cond, ready, init_err, init_msg), which
 * the main thread reads under lock. Shards never see these structs.
 */
#ifndef SLUICE_CTL_INTERNAL_H
#define SLUICE_CTL_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "control/ctl.h"
#include "control/ctl_homes.h"
#include "dataplane/part_proxy.h"

struct config;
struct metalog;
struct meta_topic;
struct ctl_req;
struct ctl_topic;
struct metalog_rec;
struct metalog_applied;
struct ctl_meta_done;
struct ctl_quorum;
struct ctl_prop;
struct ctl_brokers;
struct ctl_elect;
struct election_in;
struct election_out;

/* An operation in progress: waiting for shards to open or close
 * partitions. */
struct ctl_op {
	struct ctl_req *req;         /* NULL at start-up */
	int pending;
	int failed;
	char fail_msg[200];
	struct md_topic **created;
	struct ctl_topic **created_for;  /* the request's entry of each */
	uint8_t *drop;               /* of each: drop it although it opened */
	int ncreated;
	struct md_topic **deleted;
	int ndeleted;
	struct md_topic **replaced;  /* superseded by a new struct; logs stay */
	int nreplaced;
	int64_t fd_free;             /* descriptors this request may still claim; INT64_MIN: not counted yet */
	int64_t fd_limit;            /* RLIMIT_NOFILE when counted */
	int64_t fd_claimed;          /* descriptors claimed, whose opens are not sent yet */
	/* directories this request's opens made (they did not exist before),
	 * each with the topic it is for: removed if that topic is dropped */
	char **made;
	struct md_topic **made_for;
	uint8_t *made_rm;
	int nmade, made_cap;
	int dropping;                /* failed: the opened partitions are closing */
	int committed;               /* CreatePartitions: the new counts are proposed */
	/* start-up: what recovery read of the partitions opened (their open
	 * reports, summed as they answer) */
	struct ctl_recovery_sum {
		int segments, segments_trusted, damaged;
		uint64_t bytes_scanned, bytes_trusted;
	} rec;
	int rec_parts;
	/* ctl_admin.c: entries whose records are proposed and not all
	 * applied, and (AlterConfigs) those applied, held until every one is */
	int props_open;
	struct ctl_prop *held;
	/* start-up (req NULL): called once every open answered, before op
	 * is freed */
	void (*started)(struct ctl *ctl, struct ctl_op *op);
	struct ctl_op *next;
};

struct retired {
	uint64_t version;            /* free once every shard has seen it */
	struct md_snapshot *snap;    /* the old snapshot (its topics array) */
	struct md_topic *topic;      /* a deleted topic */
	struct config *cfg;          /* a broker config replaced at run time */
	struct retired *next;
};

/* Messages the control thread could not put on a full ring, oldest
 * first (a FIFO per destination, so a shard sees the control thread's
 * messages in the order they were sent). The loop retries them before
 * anything else each turn; nothing is ever dropped. Control thread only. */
struct ctl_park {
	struct shard_msg *q;         /* cap slots, a power of two; NULL when cap is 0 */
	uint32_t head, len, cap;
};

struct ctl {
	struct broker *b;
	struct ctl_park park[BROKER_MAX_SHARDS];
	uint64_t parked;             /* messages parked so far (a full ring) */
	int64_t fd_opening;          /* partition opens sent, not answered yet */
	int64_t fd_claimed;          /* claimed by requests whose opens are not sent yet (their
				      * records are still being applied): counted as used */
	struct config *cfg;          /* static: the file and --set */
	struct config *eff;          /* in effect: cfg, then the run-time changes (metalog) */
	struct metalog *ml;
	pthread_t thread;
	int wake_fd;
	int sleeping;
	int stop;
	uint64_t version;
	struct retired *retired;
	struct group_coord *gc;
	struct txn_coord *tc;
	struct peer_kafka *peers;    /* control/peer_kafka.h: Kafka requests to other brokers */
	int64_t pid_next, pid_end;   /* producer ids reserved in the metadata log, not handed out */
	int64_t pid_spare, pid_spare_end; /* a spare block reserved ahead (pid_spare -1: none) */
	int pid_reserving;           /* a block's record is proposed, not applied yet */
	/* ctl_meta.c: completions of proposed records, oldest first */
	struct ctl_meta_done *meta_head, *meta_tail;
	/* ctl_quorum.c: the metadata log's quorum (NULL after ctl_fini) */
	struct ctl_quorum *cq;
	/* ctl_brokers.c: registration, heartbeats, fencing (NULL until start-up
	 * reaches it) */
	struct ctl_brokers *brokers;
	int init_retries;            /* start-up steps run again (ctl.c) */
	/* ctl_quorum.c: ids of topics other nodes created, deleted, grew or
	 * reconfigured (their TOPIC, REMOVE_TOPIC, PARTITIONS or CONFIG
	 * records applied here; follow_kind[i] a CTL_FOLLOW_*), for
	 * ctl_follow.c to serve, retire or rebuild; follow_broker: another
	 * node's BROKER_CONFIG record applied (the broker config in effect and
	 * every topic rebuilt) */
	uint8_t (*follow)[16];
	uint8_t *follow_kind;
	int nfollow, cap_follow;
	int follow_broker;
	int brokers_changed;         /* a broker record was applied: publish the brokers */
	/* ctl_elect.c: elections, the snapshot following partition records;
	 * elect_due is set by ctl_quorum.c as records are applied */
	struct ctl_elect *elect;
	unsigned elect_due;          /* CTL_ELECT_PUBLISH | CTL_ELECT_SCAN */
	int ops_open;                /* topic operations (struct ctl_op) in flight */
	/* Kafka admin requests (ctl_submit) that came while an operation was
	 * in flight, in order: each starts once none is (ctl_admin_tick), so
	 * no two operations ever hold the same topic */
	struct ctl_req *admin_waiting, *admin_waiting_tail;
	/* ctl_reassign.c: reassignments, and replicas this node gains or
	 * loses; reassign_due is set by ctl_quorum.c as records are applied */
	struct ctl_reassign *reassign;
	int reassign_due;
	/* controlled shutdown: asked by the main thread, settled by this one */
	int shutdown_asked, shutdown_settled;
	int64_t shutdown_waiting;    /* partitions whose leadership is still to move */
	/* ctl_offline.c: the partition logs failed here at the last look
	 * (when monotonic ms reaches logdir_next), and whether that halted */
	int64_t logdir_failed_seen, logdir_next;
	int logdir_halted;
	int roles_changed;           /* a partition record was applied: roles (ctl_roles.c) */
	int roles_pending;           /* opened before their records: roles once published */
	struct ctl_role_out *roles_out;   /* role messages no owner answered yet (ctl_roles.c) */
	int internal_inflight;       /* a cluster's internal topics: records in flight */
	int64_t internal_next;       /* monotonic ms: look again for their creation then */
	int coord_started;           /* the coordinators' start-up replay is done: they follow
				      * the internal partitions' leaders (ctl_coord_refresh) */
	/* the test knob SLUICE_TEST_START_HOLD (ctl.c): the start-up op,
	 * one pending more, held while that file is absent */
	struct ctl_op *start_hold;
	const char *start_hold_path;
	int start_hold_said;
	/* start-up handshake */
	pthread_mutex_t lock;        /* start-up only, never on the data path */
	pthread_cond_t cond;
	int ready;
	int init_err;
	char init_msg[8192];
	/* the admin endpoint (control/admin_http.c), NULL when off */
	struct admin_http *admin;
	int admin_port;              /* its port (0: off), set before ready */
	struct ctl_homes *homes;     /* this node's partition copies (ctl_homes.h) */
	int64_t started_ms;          /* CLOCK_MONOTONIC at start (uptime: a wall-clock step moves it not) */
	/* the loop: the turn's clock (ctl_poll's), what the idle policy needs */
	int64_t now_ms;              /* monotonic ms of this turn */
	int64_t wall;                /* wall-clock ms of this turn */
	int timeout;                 /* ms to the next timer, after the turn */
	uint32_t parked_left;        /* messages still parked after the turn */
};

/* ---- ctl_msg.c ---------------------------------------------------------- */

/* Retry parked messages, oldest first, until a ring is full again.
 * Returns how many went out; *left is how many still wait. */
int ctl_flush_parked(struct ctl *ctl, uint32_t *left);

/* ---- ctl_pid.c (producer ids) -------------------------------------------- */
#define CTL_PID_BLOCK 1000   /* ids a PRODUCER_IDS record reserves */

/* A proposal's continuation: err 0 once applied here (a: what it did), or
 * the record no longer applied (metalog_apply's error), or the quorum's
 * error (QUORUM_ELOST, -ESHUTDOWN, ...). Runs from ctl_quorum_poll or
 * ctl_quorum_close. */
typedef void (*ctl_quorum_done_fn)(void *cookie, int err, const struct metalog_applied *a);

/* ---- ctl_channel.c -------------------------------------------------------- */
struct ctl_channel;
struct quorum;
struct uv_stream_s;

struct ctl_channel_voter {
	int32_t id;
	char address[300];           /* "host:port": its controller port */
};
/* A heartbeat's answer: err 0, -ESTALE (another registration is the
 * controller's), -ENOTCONN/-ETIMEDOUT/QUORUM_ELOST (no answer: send the
 * next one), -EAGAIN (the controller does not serve yet); fenced as the
 * controller's image says. */
typedef void (*ctl_channel_hb_fn)(void *cookie, int err, int fenced);

/* Made before the quorum opens (its accepts need it), bound once it has. */
int ctl_channel_create(struct ctl *ctl, int32_t self, const struct ctl_channel_voter *v, int n,
		       struct ctl_channel **out);
void ctl_channel_bind(struct ctl_channel *ch, struct quorum *q);
/* The quorum's channel_accept (arg: the channel). */
void ctl_channel_accept(void *arg, struct uv_stream_s *s, int32_t node);
/* Forward a record to the leader: done runs once this node applied it
 * (ctl_quorum_done_fn's errors), or with QUORUM_ELOST (sent, the answer
 * lost with the connection or the leadership), -ETIMEDOUT (no leader for
 * 30 s), -ESHUTDOWN. 0, or -ESHUTDOWN and done never runs. */
int ctl_channel_propose(struct ctl_channel *ch, const void *rec, size_t len, ctl_quorum_done_fn done,
			void *cookie);
/* A broker heartbeat to the leader: 0 (done runs once), or -ENOTCONN (not
 * connected to a leader now) / -ESHUTDOWN and done never runs. */
int ctl_channel_heartbeat(struct ctl_channel *ch, int32_t id, int64_t epoch, ctl_channel_hb_fn done, void *cookie);
/* DescribeQuorum's view from the leader: err 0 and its bytes (borrowed
 * for the call), or -ENOTCONN/-ETIMEDOUT (no answer), QUORUM_ENOTLEADER,
 * -ESHUTDOWN. */
typedef void (*ctl_channel_describe_fn)(void *cookie, int err, const void *buf, size_t len);
/* Ask the leader for it: 0 (done runs once), or -ENOTCONN (not connected
 * to a leader now) / -ESHUTDOWN and done never runs. */
int ctl_channel_describe(struct ctl_channel *ch, ctl_channel_describe_fn done, void *cookie);
/* What makes that view while this node leads (ctl_quorum.c's: malloc()ed
 * bytes, 0 or -errno). */
void ctl_channel_serve_describe(struct ctl_channel *ch, int (*fn)(struct ctl *ctl, void **buf, size_t *len));
/* ElectLeaders forwarded to the leader (ctl_elect.c's request bytes):
 * err 0 and the leader's answer (borrowed for the call), or -ENOTCONN (the
 * connection was lost after it was sent: the elections may have been
 * done), -ETIMEDOUT (no leader found, or no answer, within timeout_ms: the
 * request's TimeoutMs, at most 5 minutes; 30 s when it is not above 0),
 * QUORUM_ENOTLEADER (this node leads now: nothing was done), -EPROTO (the
 * leader could not read it), -ESHUTDOWN. It waits for a leader and is sent
 * again to the next one when a node answers that it does not lead. 0 (done
 * runs once), or -ESHUTDOWN and done never runs. */
typedef void (*ctl_channel_elect_fn)(void *cookie, int err, const void *buf, size_t len);
int ctl_channel_elect(struct ctl_channel *ch, const void *req, size_t len, int32_t timeout_ms,
		      ctl_channel_elect_fn done, void *cookie);
/* What runs a forwarded ElectLeaders while this node leads (ctl_elect.c's):
 * 0, and it calls ctl_channel_elect_answer(ch, token, ...) once (ch: the
 * channel then, NULL once it is gone), or -errno and never does. */
void ctl_channel_serve_elect(struct ctl_channel *ch,
			     int (*fn)(struct ctl *ctl, const void *req, size_t len, void *token));
void ctl_channel_elect_answer(struct ctl_channel *ch, void *token, int err, const void *buf, size_t len);
/* What serves heartbeats here while this node leads (ctl_brokers.c's). */
void ctl_channel_serve_heartbeats(struct ctl_channel *ch,
				  int (*fn)(struct ctl *ctl, int32_t id, int64_t epoch, int16_t mv_max, int *fenced));
/* Every record applied here, in log order (from the quorum's apply). */
void ctl_channel_applied(struct ctl_channel *ch, uint64_t index, int rc, const struct metalog_applied *a);
/* A voter: the bytes of every record applied here, in log order (kept,
 * copied, for observers' fetches); a snapshot restored here (what is kept
 * is dropped). Nothing on an observer. */
void ctl_channel_keep(struct ctl_channel *ch, uint64_t index, const void *buf, size_t len);
void ctl_channel_restored(struct ctl_channel *ch);
/* Keep at most `records` (1 up to the default, 4096): fewer make an
 * observer that is further behind get a snapshot. */
void ctl_channel_keep_max(struct ctl_channel *ch, uint32_t records);
/* The observers fetching from this voter (DescribeQuorum): their node ids
 * and log ends (the index before their last fetch), at most max. */
int ctl_channel_observers(const struct ctl_channel *ch, int32_t *ids, int64_t *log_end, int max);
/* Each turn: follow the leader (connect, resend, expire). Work done. */
int ctl_channel_tick(struct ctl_channel *ch);
void ctl_channel_stats(const struct ctl_channel *ch, struct ctl_channel_stats *st);
/* Close its connections, end its requests (before the quorum closes);
 * free once the quorum has closed (its loop ran the closes). */
void ctl_channel_close(struct ctl_channel *ch);
void ctl_channel_free(struct ctl_channel *ch);

/* ---- ctl_quorum.c --------------------------------------------------------- */
/* Open the metadata quorum (<log.dirs>/__cluster_metadata-raft) and replay
 * its log into a new image (ctl->ml). ready(ctl, 0, NULL) runs from a later
 * ctl_quorum_poll once this node leads, every earlier record is applied,
 * an older broker's log is imported and the cluster id is in the image;
 * ready(ctl, -errno, msg) if that fails. 0, or -errno with err filled:
 * -EINVAL when the configuration contradicts the directory (the message
 * names the key). */
int ctl_quorum_open(struct ctl *ctl, void (*ready)(struct ctl *ctl, int err, const char *msg), char *err,
		    size_t errlen);
/* 0 (done will run exactly once), or -errno and done never runs. On a
 * node that does not lead a quorum of several, the record goes to the
 * leader over the controller channel (ctl_channel_propose). */
int ctl_quorum_propose(struct ctl *ctl, const void *rec, size_t len, ctl_quorum_done_fn done, void *cookie);
/* The loop's part: run the quorum once (work done); its fd for poll() and
 * the timeout given (ms, -1 none) shortened to the quorum's next timer. */
int ctl_quorum_poll(struct ctl *ctl);
int ctl_quorum_fd(const struct ctl *ctl);
/* The quorum's libuv loop (quorum_loop), NULL without an open quorum. */
struct uv_loop_s *ctl_quorum_loop(struct ctl *ctl);
int ctl_quorum_timeout(const struct ctl *ctl, int timeout);
/* Whether this node leads the quorum and has started serving (its first
 * barrier applied). */
int ctl_quorum_leads(const struct ctl *ctl);
/* Whether this node's copy of the metadata log failed (it halts): every
 * proposal is refused at once from then on. */
int ctl_quorum_failed(const struct ctl *ctl);
/* Hand the quorum's leadership to another voter (controlled shutdown):
 * quorum_transfer's answer; done(cookie, leader) runs once it moved. */
int ctl_quorum_transfer(struct ctl *ctl, void (*done)(void *cookie, int32_t leader), void *cookie);
/* Close the quorum (its pending proposals end with QUORUM_ELOST), waiting
 * for its disk writes; frees ctl->cq. */
void ctl_quorum_close(struct ctl *ctl);
/* Whether this node leads the quorum (a one-node broker: once started). */
int ctl_quorum_is_leader(const struct ctl *ctl);
/* The quorum's leader as this node knows it (node id; -1: none known, as
 * during an election or with a majority of the voters gone). */
int32_t ctl_quorum_leader(const struct ctl *ctl);
/* The node whose leadership of the quorum this node's last election
 * ended (-1: none seen, or this node itself led last). */
int32_t ctl_quorum_took_over(const struct ctl *ctl);
/* The controller channel (NULL for a quorum of one). */
struct ctl_channel *ctl_quorum_channel(const struct ctl *ctl);
/* controller.quorum.voters' count (0 or 1: this node alone). */
int ctl_quorum_voters(const struct ctl *ctl);
/* A record of topic id was applied that no operation here serves:
 * ctl_follow.c serves the topic (opens the partitions placed here),
 * retires it, or rebuilds it (opens its new partitions placed here, tells
 * its partitions the new config). */
enum {
	CTL_FOLLOW_CREATED,          /* TOPIC */
	CTL_FOLLOW_DELETED,          /* REMOVE_TOPIC */
	CTL_FOLLOW_CHANGED,          /* PARTITIONS, CONFIG */
};
void ctl_follow_note(struct ctl *ctl, const uint8_t id[16], int kind);

/* ---- ctl_meta.c --------------------------------------------------------- */
/* The continuation of a proposed record: err 0 once it is applied (a says
 * what it did), or -errno: the record no longer applied to the image when
 * its turn came (metalog_apply's -EEXIST, -ENOENT, -EINVAL), or the log
 * failed (-EIO, ...): the image is unchanged. */
typedef void (*ctl_meta_done_fn)(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a);
/* Propose rec (taken: freed here). done runs exactly once, from a later
 * ctl_meta_poll, never inside this call. rec->len 0 (nothing to write):
 * done runs with 0. */
void ctl_meta_propose(struct ctl *ctl, struct metalog_rec *rec, ctl_meta_done_fn done, void *cookie);
/* done with err, from a later ctl_meta_poll (a record that could not be
 * built: the caller's continuation runs as for a refused one). */
void ctl_meta_refuse(struct ctl *ctl, int err, ctl_meta_done_fn done, void *cookie);
/* Each turn: the continuations due; returns how many ran. */
int ctl_meta_poll(struct ctl *ctl);
/* Continuations wait for the next turn (the loop must not sleep). */
int ctl_meta_waiting(const struct ctl *ctl);
void ctl_meta_fini(struct ctl *ctl);

/* ---- ctl_offline.c ------------------------------------------------------ */
/* From an owner shard (the role's isr_change with v[2] 2): this node's log
 * of the partition failed; it leaves the ISR and the leadership. */
struct shard_msg;
void ctl_offline_leave(struct ctl *ctl, const struct shard_msg *m);
/* Each turn (every 500 ms at most): when a partition log failed since the
 * last look and a write into log.dirs fails too, or every partition log
 * held here failed, the node halts (b->fatal, SIGTERM: the controlled
 * shutdown first), as Kafka's broker with all its log directories
 * offline. */
void ctl_offline_tick(struct ctl *ctl);

/* ---- ctl_brokers.c ------------------------------------------------------ */
/* Start-up: register this node as a broker; ready(ctl, 0, NULL) once it is
 * registered and unfenced (from a later turn), or ready(ctl, -errno, msg). */
void ctl_brokers_start(struct ctl *ctl, void (*ready)(struct ctl *ctl, int err, const char *msg));
/* Each turn: heartbeats due, sessions expired; returns timeout shortened
 * to the next heartbeat. */
int ctl_brokers_tick(struct ctl *ctl, int timeout);
void ctl_brokers_fini(struct ctl *ctl);
/* A heartbeat from broker id at epoch, on the active controller (what
 * Kafka's BrokerHeartbeat carries): its session starts again, and a
 * registered, fenced broker is unfenced (a record). mv_max: the highest
 * metadata.version it supports (what its heartbeats say: a REGISTER_BROKER
 * record cannot). -ESTALE: id is not registered at that epoch (it
 * registered again since, or never). */
int ctl_controller_heartbeat(struct ctl *ctl, int32_t id, int64_t epoch, int16_t mv_max);
/* On the active controller: the highest metadata.version broker id's
 * current registration supports, as its heartbeats to this controller
 * said (0: none since it registered or since this node took over). */
int16_t ctl_brokers_supported_max(const struct ctl *ctl, int32_t id);

/* ---- ctl_elect.c -------------------------------------------------------- */
/* What ctl_quorum.c notes in ctl->elect_due for the next turn (data, not
 * a call: the quorum is below the elections). PUBLISH: partition records
 * were applied (every node): the snapshot follows the image. SCAN: a
 * broker's fencing changed, a topic or broker config changed (unclean
 * leader election may be on now), this node became the active
 * controller, or a snapshot was installed: the active controller looks at
 * every partition. */
#define CTL_ELECT_PUBLISH 1u
#define CTL_ELECT_SCAN 2u
/* Each turn, after the records applied: the snapshot follows the image,
 * and the active controller's elections. */
void ctl_elect_tick(struct ctl *ctl);
void ctl_elect_fini(struct ctl *ctl);
/* Whether broker id is shutting down (controlled shutdown: not live). */
int ctl_elect_shutting_down(const struct ctl *ctl, int32_t id);
/* unclean.leader.election.enable for mt: its override, else the broker's. */
int ctl_elect_unclean_enabled(const struct ctl *ctl, const struct meta_topic *mt);
/* Whether this node is the active controller (leads the metadata quorum,
 * started). */
int ctl_elect_active(const struct ctl *ctl);
/* ---- ctl_reassign.c ----------------------------------------------------- */
/* Each turn, after the elections: the active controller completes the
 * reassignments whose adding replicas are all in the ISR; every node
 * opens the partitions it became a replica of and removes those it no
 * longer is one of. */
void ctl_reassign_tick(struct ctl *ctl);
void ctl_reassign_fini(struct ctl *ctl);
/* ---- ctl_roles.c -------------------------------------------------------- */
/* Partition idx of topic `name` (id) was opened: tell its owner what this
 * node is for it (dataplane/part_role.h), from the image and the book;
 * nothing for a partition alone (alone: the builder's entry it opened
 * with has this node as leader and only replica; the open gave it the
 * one-node way, and no lookup is made). */
void ctl_role_opened(struct ctl *ctl, const char *name, const uint8_t id[16], int32_t idx, int alone);
/* A partition record was applied: every hosted, open partition whose
 * leader, epoch or ISR moved in the image gets its new role. */
void ctl_roles_refresh(struct ctl *ctl);
/* After the shards stopped: the role messages none of them answered freed. */
void ctl_roles_fini(struct ctl *ctl);
/* The group and transaction coordinators follow the leaders of their
 * internal partitions (__consumer_offsets, __transaction_state): each
 * partition open here whose image leader is this node is theirs to load,
 * each other one to drop (group_lead, txn_lead; the role went to the shard
 * first). Every loop turn once they started; cheap when nothing moved. */
void ctl_coord_refresh(struct ctl *ctl);
/* A cluster's internal topics (ctl.c): made by the active controller once
 * min(3, voters) brokers are registered and unfenced (a controller-only
 * active controller: offsets.topic.replication.factor brokers), with
 * min(3, those brokers) replicas (Kafka's offsets.topic.replication.factor);
 * a node alone makes them at its first start instead. Every loop turn. */
void ctl_internal_topics_tick(struct ctl *ctl);

/* ---- ctl_topic.c -------------------------------------------------------- */

/* The brokers new replicas may go to (*out xcalloc()ed, the count
 * returned): the unfenced registered ones, and this node, which serves
 * (registered, or at first start not yet: the internal topics come
 * first). Racks are borrowed from the image until it changes. */
struct placement_broker;
int ctl_place_brokers(struct ctl *ctl, struct placement_broker **out);
/* Place partitions [first, first + n) of topic name with rf replicas each
 * (control/placement.h): 0 and *out (malloc()ed, n x rf ids), or
 * -ENOSPC (more replicas than brokers) / -EINVAL; *avail gets the number
 * of brokers. pin_self: this node is every partition's first replica
 * (the internal topics: their coordinators stay on this node). */
int ctl_place(struct ctl *ctl, const char *name, int32_t first, int32_t n, int rf, int pin_self, int32_t **out,
	      int *avail);
/* Build the snapshot entry of a topic from the metadata log (its
 * partitions placed on shards, none opened yet) and the book
 * (ctl_homes.h): a partition of this node keeps the leader epoch last
 * told while its leader is the same and that epoch is higher than the
 * image's (the epoch its log runs at, as its open reported:
 * ctl_home_epoch). Every rebuild of a served topic goes through it, so
 * none carries a lower epoch than the entry it replaces. */
struct md_topic *ctl_topic_build(struct ctl *ctl, const struct meta_topic *mt);
void ctl_topic_free(struct md_topic *t);
/* A new snapshot with the same topics and the image's brokers now (a
 * broker registered, fenced or unfenced); nothing before the first. */
/* Start the admin requests that waited for the topic operations in
 * flight, in order, once none is (control/ctl_admin.c). */
void ctl_admin_tick(struct ctl *ctl);
void ctl_publish_brokers(struct ctl *ctl);
/* Whether image topic mt is served (ctl_topic_served_of) by an entry that
 * no longer says what mt says (ctl_topic_follows): due for ctl_republish. */
int ctl_topic_stale(const struct ctl *ctl, const struct meta_topic *mt);
/* A new snapshot with each of mts[0, n) rebuilt from the image in place of
 * its served entry (each must be ctl_topic_stale): a topic rebuilt from
 * the image (its partitions' homes come from the book, ctl_homes.h, as it
 * is published). */
void ctl_republish(struct ctl *ctl, const struct meta_topic *const *mts, int n);
/* Whether published entry t says what the image's mt says (leaders,
 * epochs, ISR and replicas: a replica fetch is checked against them), or
 * its partitions are being added (their operation publishes): the one
 * look at a published entry's partitions outside the builder's own code,
 * a query of the builder's. */
int ctl_topic_follows(const struct md_topic *t, const struct meta_topic *mt);
/* control/ctl_served.c: the published snapshot as the rest of control/
 * reaches it. The published entry of topic `name` (NULL: none), as a
 * handle to give back to the builder (replaced or deleted by an
 * operation); its partitions are the builder's to read. */
struct md_topic *ctl_topic_served(const struct ctl *ctl, const char *name, int32_t len);
/* Likewise by topic id (NULL: none): the control thread's other files
 * walk their own metadata image and reach the snapshot it published only
 * through these lookups. */
struct md_topic *ctl_topic_served_id(const struct ctl *ctl, const uint8_t id[16]);
/* The served entry of image topic mt (a handle), when it is that topic's:
 * served under mt's id with a name that is still mt's in the image. NULL
 * when not served, or when its name went to another id (deleted and made
 * again: ctl_follow.c retires the old entry). */
struct md_topic *ctl_topic_served_of(const struct ctl *ctl, const struct meta_topic *mt);
/* The broker config the published snapshot carries (NULL before the
 * first), and the broker of that id it lists (NULL: none). */
const struct config *ctl_cfg_served(const struct ctl *ctl);
const struct md_broker *ctl_broker_served(const struct ctl *ctl, int32_t id);
/* Ask the owner shards to open partitions [from, t->nparts) of t that
 * this node hosts and that are not open already, each counted in
 * op->pending. */
void ctl_topic_open_parts(struct ctl *ctl, struct ctl_op *op, struct md_topic *t, int32_t from);
/* Tell each partition of new entry nt open on this node the config nt
 * carries, each counted in op->pending (AlterConfigs, a broker config
 * change, a change another node made). */
void ctl_topic_tell_config(struct ctl *ctl, struct ctl_op *op, const struct md_topic *nt);
/* Retire each partition of served topic t open on this node (taken out of
 * the book), each counted in op->pending (DeleteTopics, a deletion another
 * node made). */
void ctl_topic_retire_parts(struct ctl *ctl, struct ctl_op *op, const struct md_topic *t);
/* The part_proxy completion of a close, a retire or a config change:
 * one less pending; the op steps on when none is left. */
void ctl_part_done(void *self, void *cookie, int err);
/* Every partition of op answered: commit, drop what failed, publish the
 * new snapshot, remove deleted topics' files, answer (or op->started at
 * start-up), free op. */
void ctl_op_step(struct ctl *ctl, struct ctl_op *op);
/* Claim descriptors for `need` new partitions of ct, or refuse ct
 * (INVALID_PARTITIONS, naming the limit): 0 or -1. */
int ctl_fd_claim(struct ctl *ctl, struct ctl_op *op, struct ctl_topic *ct, int64_t need);
/* The broker config in effect: static, then the metadata log's
 * run-time changes (cluster-wide, then this node's). 0 or -errno. */
int ctl_build_cfg(struct ctl *ctl, struct config **out);
/* This node's SSL listeners take the keystore and truststore ctl->eff
 * gives them (Kafka's dynamic listener configs); ct: the AlterConfigs
 * entry that changed them (the listeners it names rebuilt even with the
 * same values), NULL at start-up. Said on stderr. (ctl_admin.c) */
void ctl_listeners_follow(struct ctl *ctl, struct ctl_topic *ct);
/* Free snapshots and topics no shard can still be looking at. */
void ctl_reclaim(struct ctl *ctl);
/* Teardown, the shards stopped: the snapshot, its topics, what is
 * retired and the published blocks. */
void ctl_topics_fini(struct ctl *ctl);

/* ---- ctl_follow.c ------------------------------------------------------- */
/* Serve the topics other nodes created (ctl->follow), once placed; retire
 * those they deleted; rebuild those they grew or reconfigured, and every
 * topic after their broker config changes (ctl->follow_broker), once no
 * other operation holds the topics. Work done. */
int ctl_follow_poll(struct ctl *ctl);
void ctl_follow_fini(struct ctl *ctl);

#endif
