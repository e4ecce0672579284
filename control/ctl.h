/* control/ctl.h — the control thread: the metadata log, topic
 * administration, partition placement over shards, publication of the
 * metadata snapshot. The slow path: it never touches record data.
 *
 * Thread: its own (@thread ctl); shards reach it only through the rings
 * (ctl_submit and the rest of dataplane/coord.h). Errors: 0 or -errno; Kafka errors in the request results.
 */
#ifndef SLUICE_CTL_H
#define SLUICE_CTL_H

#include <stdint.h>

#include "dataplane/broker.h"
#include "dataplane/coord.h"

struct config;
struct kafka_ctx;

struct ctl;

/* @thread main. Start the control thread: it opens the metadata log,
 * replays it, opens every partition on its shard and publishes the first
 * snapshot; ctl_wait_ready returns 0 then, or -errno with err filled
 * (-EINVAL: the configuration contradicts the data directory, and err
 * names the key).
 * ctl_stop (once the shards have stopped) ends the thread and frees. */
int ctl_start(struct broker *b, struct config *cfg, struct ctl **out);
int ctl_wait_ready(struct ctl *ctl, char *err, size_t errlen);
/* The same, waiting at most timeout_ms: -ETIMEDOUT when the control
 * thread is not ready yet (ctl_stop may then end it: a stop asked for
 * during start-up). */
int ctl_wait_ready_ms(struct ctl *ctl, int timeout_ms, char *err, size_t errlen);
void ctl_stop(struct ctl *ctl);

/* The control thread's state without its thread, for a caller that runs
 * the loop itself (the unit tests, several loops in one OS thread, as
 * Aeron tests its conductor). ctl_create registers it with the broker
 * (its wake eventfd and sleeping word, b->ctl); cfg is borrowed until
 * ctl_destroy. @thread main. */
int ctl_create(struct broker *b, struct config *cfg, struct ctl **out);
void ctl_destroy(struct ctl *ctl);
/* @thread ctl. Start-up: the metadata log, the coordinators, the admin
 * endpoint (off when admin.listen is ""), and the replay started; it ends
 * in later turns (ctl_is_ready). 0, or -errno (ctl_wait_ready has the
 * message). now_ns: monotonic ns; now_ms: wall-clock ms. */
int ctl_init(struct ctl *ctl, uint64_t now_ns, int64_t now_ms);
/* @thread ctl. One turn of the loop with the given clock: parked
 * messages, the shards' rings, the coordinators' timers, the admin
 * endpoint. Returns the work done; 0 means the idle policy may sleep. */
int ctl_poll(struct ctl *ctl, uint64_t now_ns, int64_t now_ms);
/* @thread ctl. The thread's idle policy after a turn with no work: poll()
 * on the wake eventfd and the admin socket until the next timer is due. */
void ctl_idle(struct ctl *ctl);
/* @thread ctl. Teardown after the last turn, once the shards stopped. */
void ctl_fini(struct ctl *ctl);
/* @thread ctl. The turn's clock, as given to ctl_poll (or ctl_init):
 * monotonic ms, for deadlines; wall-clock ms, for timestamps and
 * expiry. Everything on the control thread that compares times uses
 * these, never the system clock, so a test can move time. */
int64_t ctl_now_ms(const struct ctl *ctl);
int64_t ctl_wall_ms(const struct ctl *ctl);

/* @thread ctl. Send a message to thread `to`; a full ring parks it and
 * the control thread's loop sends it later, in order (never dropped,
 * never waited for). */
void ctl_send_msg(struct ctl *ctl, int to, const struct shard_msg *m);
/* @thread ctl. Hand a request back to shard `from`: it resumes ctx. */
void ctl_reply(struct ctl *ctl, struct kafka_ctx *ctx, int from);
/* @thread ctl. The metadata is replayed and every partition open (the
 * broker serves); 0 while recovering. */
int ctl_is_ready(const struct ctl *ctl);
/* @thread main, once ctl_wait_ready returned 0: the admin endpoint's
 * port, 0 when it is off. */
int ctl_admin_port(const struct ctl *ctl);
/* @thread ctl. This node as a broker (control/ctl_brokers.c): its broker
 * epoch (-1 before it registered), whether it is fenced, the brokers
 * registered and fenced in the metadata, and the fencing changes this
 * node made as the active controller. */
struct ctl_broker_state {
	int64_t epoch;
	int self_fenced;
	int registered, fenced;
	uint64_t fenced_total, unfenced_total;
};
void ctl_brokers_state(const struct ctl *ctl, struct ctl_broker_state *st);
/* @thread ctl. Every broker registered in the metadata, fenced or not
 * (the web console's broker list): fn(id, host, port, rack, fenced, arg). */
typedef void ctl_broker_fn(int32_t id, const char *host, int32_t port, const char *rack, int fenced, void *arg);
void ctl_brokers_foreach(const struct ctl *ctl, ctl_broker_fn *fn, void *arg);
/* @thread ctl. Leader elections (control/ctl_elect.c): those this node
 * made as the active controller since it started (a partition given a
 * leader; unclean: one out of sync), and the partitions without a leader
 * in the metadata image now (offline). */
struct ctl_elect_state {
	uint64_t elections_total, unclean_total;
	int64_t offline;
};
void ctl_elect_state(const struct ctl *ctl, struct ctl_elect_state *st);
/* @thread main. Controlled shutdown, before the shards stop: this broker
 * is fenced in the metadata (no heartbeat unfences it again), the active
 * controller moves the leadership of every partition it leads to another
 * live ISR member, and once those records are applied here (or after
 * timeout_ms, saying what is left) the metadata quorum's leadership goes
 * to another voter if this node has it. Returns at once when no other
 * broker is live (one node). ctl_shutdown_controlled is ask, then wait
 * for settled. */
void ctl_shutdown_controlled(struct ctl *ctl, int timeout_ms);
void ctl_shutdown_ask(struct ctl *ctl);
int ctl_shutdown_settled(struct ctl *ctl);
/* @thread shard. DescribeQuorum: the control thread fills *out, then ctx
 * resumes (dataplane/coord.h submit_quorum). */
void ctl_quorum_submit(struct kafka_ctx *ctx, struct coord_quorum *out);
/* @thread shard. ElectLeaders: the control thread elects (the active
 * controller; another node forwards the request to it) and fills each
 * part's result, then ctx resumes (dataplane/coord.h submit_elect). */
struct coord_elect;
void ctl_elect_submit(struct kafka_ctx *ctx, struct coord_elect *req);
/* @thread shard. UpdateFeatures (control/ctl_features.c): the active
 * controller checks each update and proposes its FEATURE_LEVEL record,
 * fills its result, then ctx resumes (dataplane/coord.h submit_features). */
struct coord_features;
void ctl_features_submit(struct kafka_ctx *ctx, struct coord_features *req);
/* @thread shard. Partition reassignments (control/ctl_reassign.c): the
 * control thread starts, cancels or lists them and fills req, then ctx
 * resumes (dataplane/coord.h submit_reassign). */
struct coord_reassign;
void ctl_reassign_submit(struct kafka_ctx *ctx, struct coord_reassign *req);
/* @thread shard. AlterUserScramCredentials (control/ctl_scram.c): the
 * control thread proposes each change's record and fills its result, then
 * ctx resumes (dataplane/coord.h submit_scram). */
struct coord_scram;
void ctl_scram_submit(struct kafka_ctx *ctx, struct coord_scram *req);
/* @thread shard. CreateAcls and DeleteAcls (control/ctl_acl.c): the
 * control thread proposes each binding's ACL or REMOVE_ACL record and
 * fills its result, then ctx resumes (dataplane/coord.h submit_acl). */
struct coord_acl;
void ctl_acl_submit(struct kafka_ctx *ctx, struct coord_acl *req);
/* @thread ctl. Partitions with a reassignment in progress in the image,
 * and reassignments this node completed as the active controller. */
struct ctl_reassign_state {
	int64_t reassigning;
	uint64_t completed_total;
};
void ctl_reassign_state(const struct ctl *ctl, struct ctl_reassign_state *st);
/* @thread ctl. Metadata records' latency from proposed to applied on this
 * node (NULL before the quorum opened). */
struct lathist;
const struct lathist *ctl_quorum_commit_latency(const struct ctl *ctl);
/* @thread ctl. The metadata quorum as DescribeQuorum and the metrics show
 * it (control/quorum.h): 0, or -ESHUTDOWN (not open; st says leader -1). */
struct quorum_view;
int ctl_quorum_describe(const struct ctl *ctl, struct quorum_view *st);
/* @thread ctl. The controller channel as the metrics show it (all 0 for a
 * node alone): records forwarded to the quorum's leader, requests served as
 * the leader, forwarded records whose answer was lost, leadership handed
 * over for a stuck follower, and whether this node is connected to the
 * leader now. */
struct ctl_channel_stats {
	uint64_t forwarded, served, lost, stuck_transfers;
	/* connections whose reading stopped: answers queued past 8 MiB */
	uint64_t paused;
	uint64_t elect_forwarded;    /* ElectLeaders requests forwarded to the leader */
	int connected;
	/* observers' metadata fetches: sent by this one (a broker-only node),
	 * snapshots this voter sent, snapshots this observer restored */
	uint64_t fetches, snapshots_sent, snapshots_got;
	/* snapshots this node installed after start-up (a voter or not) */
	uint64_t snapshots_installed;
};
void ctl_quorum_channel_stats(const struct ctl *ctl, struct ctl_channel_stats *st);
/* @thread ctl. CLOCK_MONOTONIC ms when the control thread started (uptime). */
int64_t ctl_started_ms(const struct ctl *ctl);
/* @thread ctl. The group and transaction coordinators. */
struct group_coord *ctl_groups(struct ctl *ctl);
struct txn_coord *ctl_txns(struct ctl *ctl);
/* The inter-broker Kafka client (control/peer_kafka.h), NULL before start-up. */
struct peer_kafka *ctl_peers(struct ctl *ctl);
/* @thread ctl. A producer id never handed out before (blocks reserved
 * ahead in the metadata log), or -errno (-EAGAIN: a whole block went out
 * before the next one was applied). */
int64_t ctl_new_producer_id(struct ctl *ctl);

struct md_topic;
struct part_proxy;
/* @thread ctl. Fill px as the control thread's side of the partition
 * proxy (dataplane/part_proxy.h): it sends with the parking ctl_send and
 * the completions run on this thread with self = ctl. Returns px. */
struct part_proxy *ctl_part_proxy(struct ctl *ctl, struct part_proxy *px);
/* @thread ctl. Append `batch` (len bytes, malloc'd; taken) to partition
 * idx of t on its owner shard (named by value, part_proxy_append);
 * done(ctl, cookie, base offset, 0 or -errno or an enum part_err) runs on
 * the control thread once the high watermark passed it (acks=all, with
 * min_insync as min.insync.replicas; 0: none) or it failed (-ENOENT: the
 * owner no longer has the partition). 0, or -errno (then done is not
 * called and the batch is freed). */
int ctl_log_append(struct ctl *ctl, const struct md_topic *t, int32_t idx, int32_t min_insync, uint8_t *batch,
		   uint32_t len, void (*done)(struct ctl *ctl, void *cookie, int64_t base, int err), void *cookie);
/* @thread ctl. Read every partition of `t` back from its start on the
 * owner shards (start-up replay): chunk(ctl, whole batches, len, partition)
 * for each piece in log order per partition, then end(ctl) once after all.
 * Returns the number of partitions read (0: end is not called). */
int ctl_read_topic(struct ctl *ctl, const struct md_topic *t,
		   void (*chunk)(struct ctl *ctl, const uint8_t *buf, uint32_t len, int32_t part),
		   void (*end)(struct ctl *ctl));


/* The control plane's side of dataplane/coord.h: what the shards reach
 * through coord_ops (ctl_coord_ops, set in struct broker by ctl_create). */
void ctl_submit(struct kafka_ctx *ctx, struct ctl_req *req);
void ctl_producer_id_submit(struct kafka_ctx *ctx, int64_t *out);
void ctl_producer_id_msg(void *self, struct shard_msg *m);
extern const struct coord_ops ctl_coord_ops;

#endif
