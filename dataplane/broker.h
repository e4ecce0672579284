/* dataplane/broker.h — what the shards and the control thread share:
 * the broker-wide settings, the SPSC ring matrix, the published metadata
 * snapshot and the connection budget.
 *
 * Thread: created by main before any thread starts. Afterwards these are
 * written, and nothing else:
 * - set.cluster_id: once, by the control thread when the metadata log is
 *   open, before main publishes `serving` (release store; shards read it
 *   with an acquire load before they accept, so no shard reads the id
 *   before it is written); every other field of `set` is read-only;
 * - md: the metadata pointer, published by the control thread with a
 *   release store and read by shards with an acquire load;
 * - serving, stopping, report_groups, reload_admin, drained: flags (see each field);
 * - conns: atomics shared by every shard (struct broker_conns);
 * - each thread's own `md_seen` and `sleeping` words (and a shard's busy
 *   cycles), which live in the thread's struct, reached here through
 *   `sleeping[]`, `md_seen[]` and `busy_cycles[]` (set when the shard is
 *   created).
 *
 * Metadata snapshots are immutable: the control thread builds a new one for
 * every change and swaps the pointer. A shard records the version it last
 * loaded in its md_seen at the top of each loop turn and never keeps a
 * pointer across turns; the control thread frees an old snapshot only when
 * every shard has seen a newer version (quiescent-state reclamation).
 */
#ifndef SLUICE_BROKER_H
#define SLUICE_BROKER_H

#include <stdint.h>

#include "dataplane/acl.h"
#include "dataplane/spsc.h"
#include "storage/plog.h"

#define BROKER_MAX_SHARDS 64
#define RING_SLOTS 4096

struct tls_server;
struct peer_sec;
struct qtls_sec;
struct qt_counters;
struct qt_sasl;
struct sasl_scram_cred;
struct sasl_plain_users;
struct part;   /* a partition as its owner shard holds it (dataplane/part.h) */
/* What the owner shard publishes of a partition for the control thread.
 * Written only by the owner shard with relaxed atomic stores
 * (part_publish, the produce path, the role's tick), read by the control
 * thread with relaxed loads: its metrics (control/metrics.c), the log's
 * failure (err: control/ctl_offline.c's look at the log directory) and
 * the shards (owner_part, below). Each 64-bit word is a value the shard
 * wrote, the set is not one snapshot (a scrape never stops a shard). Not
 * a message: these are gauges and counters moved by every produce and
 * fetch, read on a scrape or a 500 ms look; a message per change would
 * put a ring send on the hot path. The control thread allocates it, keeps
 * it in its book of partition homes (control/ctl_homes.h, whence it
 * reads it) and frees it only at exit, after the shards have stopped;
 * one cache line of its own. The shards find it in md_partition.pub. */
struct part_pub {
	int64_t log_start;
	int64_t log_end;
	int64_t high_watermark;
	int64_t last_stable;
	int64_t size_bytes;
	int64_t segments;
	int64_t err;                 /* the log's -errno, 0: healthy; -ENOSPC: its filesystem is
				      * full (it takes appends again once space returns) */
	uint64_t produce_batches;
	uint64_t produce_records;
	uint64_t produce_bytes;
	uint64_t fetch_bytes;        /* read for fetches, consumers' and followers' (by the owner) */
	/* replication (dataplane/part_role.h): the ISR and replicas the
	 * owner's role says (0 before the open), and on a leader the largest
	 * gap between its log end and a follower's fetch offset, and the
	 * longest a follower behind it has not been caught up (ms, Kafka's
	 * lastCaughtUpTimeMs; refreshed on progress and the role's tick) */
	int64_t isr_size;
	int64_t replicas;
	int64_t follower_lag;
	int64_t follower_lag_ms;
	/* The owner shard's struct part, for the other shards to route a
	 * client's request to it (md_part_owner): stored by the owner with a
	 * release store when it opens the partition (cleared only by a close,
	 * of a partition never published); read by shards with an acquire
	 * load. Only shards read it, and only the owner dereferences what they
	 * read; the control thread never reads it (scripts/check-layers). A
	 * retired partition (topic deleted, replica moved away) stays here:
	 * its struct is kept, marked deleted, until the owner exits, so a
	 * handle read from an older snapshot never dangles. */
	struct part *owner_part;
} __attribute__((aligned(64)));

/* A partition in the published snapshot. Written only by the control
 * thread while it builds a topic's entry, before publishing it; read-only
 * once published. owner_shard and pub are the partition's home on this
 * node, read by the shards: the control thread writes them from its own
 * book (control/ctl_homes.h) as it publishes (control/ctl_topic.c) and
 * never reads them back (scripts/check-layers). */
struct md_partition {
	int32_t index;
	int32_t owner_shard;      /* owner shard (on this node) */
	int32_t leader_epoch;
	int32_t leader;           /* the broker id leading it, -1: none */
	int32_t nreplicas, nisr;
	const int32_t *replicas;  /* broker ids, the preferred leader first; and the ISR: */
	const int32_t *isr;       /* both in the topic's md_topic.ids */
	struct part_pub *pub;     /* its published block once its owner answered the open,
				   * NULL: not open on this node (md_part_owner) */
};

/* @thread shard. The owner shard's struct part of mp, as the owner
 * published it (part_pub.owner_part), or NULL: not open on this node.
 * A shard uses it to hand a request to the owner (dataplane only: the
 * control thread may not call this, scripts/check-layers). */
static inline struct part *md_part_owner(const struct md_partition *mp)
{
	return mp->pub ? __atomic_load_n(&mp->pub->owner_part, __ATOMIC_ACQUIRE) : NULL;
}

/* The in-sync replicas of a partition (the metadata log's ISR; on one
 * node, this broker). acks=all is refused below the topic's min_insync. */
static inline int32_t md_part_isr_size(const struct md_partition *mp)
{
	return mp->nisr;
}

struct md_topic {
	char *name;
	int32_t name_len;
	uint8_t id[16];
	int32_t nparts;
	struct md_partition *parts;
	int32_t *ids;             /* every partition's replicas and ISR (parts[i].replicas) */
	struct plog_config cfg;   /* effective storage config */
	uint32_t max_message_bytes;
	int log_append_time;      /* message.timestamp.type=LogAppendTime */
	int32_t min_insync;       /* min.insync.replicas in effect (the topic's, or the broker's) */
	int internal;
	int nconfigs;             /* overrides, for DescribeConfigs */
	char **config_keys;
	char **config_values;
};

/* A listener of another broker, as it advertises it. */
struct md_endpoint {
	char name[64];            /* the listener name */
	char host[256];
	int32_t port;
};

/* A registered, unfenced broker as clients reach it (the metadata log's
 * REGISTER_BROKER / REGISTER_BROKER_ENDPOINTS record). */
struct md_broker {
	int32_t id;
	int32_t port;             /* its inter-broker listener: peers and fetchers */
	char host[256];
	char rack[256];           /* "" = none */
	int nendpoints;           /* 0: registered with host/port only (REGISTER_BROKER), */
	struct md_endpoint endpoints[8];   /* told to the clients of every listener */
};

struct md_snapshot {
	uint64_t version;
	int ntopics;
	struct md_topic **topics; /* sorted by name */
	struct md_topic **by_id;  /* the same, sorted by topic id (memcmp), for md_find_id; NULL: not
				   * built (md_find_id scans topics) */
	int nbrokers;
	struct md_broker *brokers;/* the unfenced registered brokers, by id (this node too once
				   * registered); freed with the snapshot */
	int nscram;
	struct sasl_scram_cred *scram;  /* the SCRAM users (the metadata log's SCRAM records), by name
					 * then type (md_scram_find); freed with the snapshot, names
					 * pointing into the same allocation */
	struct acl_set acls;      /* the ACL bindings (the metadata log's ACL records, dataplane/acl.h),
				   * sorted; one allocation with their strings, freed with the snapshot */
	int16_t mv;               /* the finalized metadata.version (the metadata log's FEATURE_LEVEL;
				   * 1 without one), for ApiVersions v3+ */
	int64_t mv_epoch;         /* the log index of its FEATURE_LEVEL record (0: none) */
	int16_t mv_min, mv_max;   /* the levels this node supports (control/meta_features.h) */
	const struct config *cfg; /* the broker config in effect: static, then the cluster-wide
				   * defaults changed at run time; read-only, retired with the
				   * snapshot (NULL: broker->cfg) */
	struct md_snapshot *older;/* retired list, control thread only */
};

/* A Kafka client listener (listeners, with listener.security.protocol.map
 * and advertised.listeners): where it binds, whether it speaks TLS, and
 * what Metadata tells a client that connected to it. */
#define BROKER_MAX_LISTENERS 8
struct broker_listener {
	char name[64];                /* the listener name (PLAINTEXT, SSL, CLIENT, ...) */
	int tls;                      /* its security protocol is SSL or SASL_SSL */
	int sasl;                     /* SASL_PLAINTEXT or SASL_SSL: SASL before anything else */
	unsigned sasl_mechs;          /* its enabled mechanisms (enum sasl_mech bits) */
	struct sasl_plain_users *plain;   /* PLAIN's users (its plain.sasl.jaas.config), or NULL;
					   * read-only once the shards serve */
	int64_t reauth_ms[3];         /* connections.max.reauth.ms by sasl_mech_index(); 0: none */
	char host[256];               /* bound */
	int port;
	char adv_host[256];           /* advertised to its clients */
	int adv_port;
};

struct broker_settings {
	char listen_host[256];
	int listen_port;              /* unused by a controller-only node (no Kafka listener) */
	/* Every client listener, the inter-broker one first (listen_host/port,
	 * adv_host/port below are its copy). 0: the one of listen_host/port,
	 * plaintext (the unit tests' shards). */
	int nlisteners;
	struct broker_listener listeners[BROKER_MAX_LISTENERS];
	/* process.roles: both 0 for a combined node (the default) */
	int controller_only;          /* a voter that is no broker: never registered, hosts
				       * nothing, no Kafka listener */
	int broker_only;              /* no voter: follows the quorum's log as an observer */
	char adv_host[256];           /* the inter-broker listener's advertised address: what the */
	int adv_port;                 /* metadata log registers, so what other brokers reach */
	int32_t node_id;
	char rack[256];               /* broker.rack; "" = none */
	char data_dir[4096];
	int nshards;
	int32_t num_partitions;
	int auto_create;
	int32_t fetch_session_slots;  /* max.incremental.fetch.session.cache.slots, shared out
				       * among the shards (dataplane/fetch_session.h); 0: none */
	uint32_t max_request_bytes;   /* socket.request.max.bytes */
	uint32_t message_max_bytes;   /* message.max.bytes */
	int64_t queued_max_request_bytes;   /* frame memory, broker-wide; -1: unbounded */
	int32_t max_connections;      /* max.connections, broker-wide */
	int32_t max_connections_per_ip;
	int64_t connections_max_idle_ms;    /* -1: never closed for idleness */
	int32_t sasl_fail_delay_ms;   /* connection.failed.authentication.delay.ms */
	int authz;                    /* authorizer.class.name is StandardAuthorizer (dataplane/authz.h) */
	int authz_allow_if_none;      /* allow.everyone.if.no.acl.found */
	char **super_users;           /* super.users, split; nsuper_users of them (main's) */
	int nsuper_users;
	size_t tail_budget;           /* per shard */
	int64_t retention_check_ms;
	int64_t producer_ttl_ms;      /* producer.id.expiration.ms */
	int64_t replica_lag_ms;       /* replica.lag.time.max.ms: a follower that long behind leaves the ISR */
	char native_host[64];         /* native.listen: the native protocol over UDP; "" = off */
	int native_port;
	uint32_t native_credits;      /* native.session.credits.bytes */
	int64_t native_session_timeout_ms;
	int64_t native_reassembly_timeout_ms;
	uint64_t native_reassembly_bytes;   /* native.reassembly.memory.bytes, per shard */
	/* dpdk.*: the native protocol on a DPDK port as well (kernel bypass) */
	int dpdk_enable;
	uint32_t dpdk_ip;             /* dpdk.listen's address, network order */
	uint16_t dpdk_udp_port;       /* dpdk.listen's port */
	uint32_t dpdk_netmask;        /* dpdk.prefix.length, network order */
	uint32_t dpdk_gateway;        /* network order; 0: none */
	uint32_t dpdk_poll_sleep_us;  /* an idle shard's longest sleep; 0: busy-poll */
	char cluster_id[64];
};

struct shard;
struct ctl;
struct coord_ops;
struct dpdk_port;

/* What every shard shares about its connections: written by all shards,
 * with atomics only (no lock; an atomic read-modify-write at accept, close
 * and large-frame time, never per request), read by the control thread
 * for /metrics.
 * - open: Kafka connections open broker-wide. max.connections is one
 *   broker-wide budget, not a per-shard share: SO_REUSEPORT spreads
 *   connections by a hash of their addresses, so a share would refuse
 *   clients on one shard while another has room. A shard adds 1 at accept
 *   and takes it back if that went over the limit (the count may pass the
 *   limit for that instant; no connection is ever kept over it).
 * - req_mem: bytes reserved for frames larger than a connection's initial
 *   buffer, from when their size is read until they are handled
 *   (queued.max.request.bytes, Kafka's memory pool); reserved by a
 *   compare-and-swap that never lets it pass the limit.
 * - ip_slots: max.connections.per.ip, an open-addressed table of 64-bit
 *   words (address key << 32 | count), claimed and counted by
 *   compare-and-swap; a word whose count is 0 is free for another
 *   address. NULL when the limit is off. */
#define BROKER_IP_SLOTS 65536
struct broker_conns {
	int64_t open;
	int64_t req_mem;
	int64_t accept_logged_ns;     /* the last "too many open files" log line */
	uint64_t *ip_slots;           /* set by main before the shards start */
} __attribute__((aligned(64)));

struct config;

struct broker {
	struct broker_settings set;
	const struct config *cfg;     /* read-only after start: any thread may read */
	struct shard *shards[BROKER_MAX_SHARDS];
	struct ctl *ctl;
	struct dpdk_port *dpdk;       /* dpdk.enable: the started port (queue pair per shard), else NULL */
	/* each SSL listener's certificates (dataplane/tls.h), by its index in
	 * set.listeners, else NULL; main's, made before the threads start,
	 * reloaded through tls_server_reload only */
	struct tls_server *tls[BROKER_MAX_LISTENERS];
	const struct peer_sec *peer_sec;  /* a secured inter-broker listener: how to reach other
				       * brokers (dataplane/peer_session.h), else NULL; main's,
				       * read-only once the threads start */
	struct qtls_sec *quorum_tls;  /* an SSL controller listener: the controller
				       * port's TLS (control/quorum_tls.h), else NULL;
				       * main's; the control thread alone uses it, but
				       * for listeners_tls_reload's swap of its contexts */
	struct qt_sasl *quorum_sasl;  /* a SASL controller listener: its PLAIN login and
				       * users (control/quorum_transport.h), else NULL;
				       * main's until the threads start, then the control
				       * thread's alone (it swaps the login and the users
				       * on a reload: listeners_controller_sasl_reload) */
	int argc;                     /* sluiced's command line, main's, read-only: the */
	char **argv;                  /* control thread reads --config and --set again for
				       * that reload */
	struct qt_counters *quorum_port; /* the controller port's counters
				       * (control/quorum_transport.h): main's, the
				       * control thread's alone */
	/* sluiced --add-scram: credentials the metadata log gets when this
	 * node first leads it with no SCRAM user (control/ctl_quorum.c); main
	 * sets them before the control thread starts, which reads them */
	struct sasl_scram_cred *boot_scram;
	int nboot_scram;
	/* rings[from][to]; index nshards is the control thread */
	struct spsc *rings[BROKER_MAX_SHARDS + 1][BROKER_MAX_SHARDS + 1];
	int wake_fd[BROKER_MAX_SHARDS + 1];      /* eventfd of each thread */
	int *sleeping[BROKER_MAX_SHARDS + 1];    /* each thread's sleeping word */
	const uint64_t *md_seen[BROKER_MAX_SHARDS];     /* each shard's md_seen word */
	const uint64_t *busy_cycles[BROKER_MAX_SHARDS]; /* each shard's stats.busy_cycles */
	struct md_snapshot *md;       /* published snapshot */
	volatile int stopping;        /* set by the signal handler path */
	int report_groups;            /* SIGUSR1: the control thread prints the groups */
	int reload_admin;             /* SIGHUP: the control thread rereads the admin endpoint's tokens
				       * and the controller listener's JAAS config */
	int fatal;                    /* the control thread stops the node (it raised
				       * SIGTERM): sluiced exits 1 */
	int serving;                  /* set once the metadata is replayed: shards accept */
	int drained;                  /* shards stopped with no connection left */
	struct broker_conns conns;    /* see struct broker_conns */
	const struct coord_ops *coord;/* the layer above's callbacks (dataplane/coord.h): set by
				       * the control thread's creation, before the shards serve */
	int32_t controller_id;        /* the active controller (the metadata quorum's leader), -1:
				       * not known; the control thread stores it (relaxed) on each
				       * leader change, the shards read it (Metadata's ControllerId) */
	int64_t repl_throttle_bps;    /* the follower's replication throttle of this node (bytes/s,
				       * follower.replication.throttled.rate; 0: none), for the
				       * throttled replicas it fetches: written by the control
				       * thread, read by the shards' fetchers (relaxed) */
	int64_t repl_leader_throttle_bps; /* the leader's (leader.replication.throttled.rate; 0:
				       * none), for what it sends throttled followers outside the
				       * ISR: written by the control thread, read by the shards
				       * answering replica fetches (relaxed; dataplane/repl_quota.h) */
};

/* The thread index of the control thread in rings[][]. */
static inline int broker_ctl_index(const struct broker *b)
{
	return b->set.nshards;
}

static inline struct md_snapshot *broker_md(struct broker *b)
{
	return __atomic_load_n(&b->md, __ATOMIC_ACQUIRE);
}

/* Lookup by name in a snapshot (binary search). */
const struct md_topic *md_find(const struct md_snapshot *md, const char *name, int32_t len);
/* Lookup by topic id (KIP-516; Fetch v13+, Metadata v10+): a linear scan,
 * the snapshot keeps no index by id. NULL for the zero id. */
const struct md_topic *md_find_id(const struct md_snapshot *md, const uint8_t id[16]);
/* @thread any reader of md. The SCRAM credential of user `name` for
 * `type` (enum sasl_scram_type), or NULL: a binary search. */
const struct sasl_scram_cred *md_scram_find(const struct md_snapshot *md, const char *name, int type);

/* Whether node `self` holds a replica of mp. */
static inline int md_part_hosted(const struct md_partition *mp, int32_t self)
{
	for (int32_t i = 0; i < mp->nreplicas; i++)
		if (mp->replicas[i] == self)
			return 1;
	return 0;
}

/* Partition idx of t for a client's request on node `self`: 0 and *out
 * when this node leads it and has it open; else the Kafka error:
 * UNKNOWN_TOPIC_OR_PARTITION (3: no such partition, or its log is not
 * open), NOT_LEADER_OR_FOLLOWER (6: another broker leads it, or none
 * does: the client refreshes its metadata and goes there). Reads the
 * snapshot only: no lock, no allocation. */
static inline int16_t md_part_led(const struct md_topic *t, int32_t idx, int32_t self,
				  const struct md_partition **out)
{
	*out = NULL;
	if (!t || idx < 0 || idx >= t->nparts)
		return 3;
	if (t->parts[idx].leader != self)
		return 6;
	if (!md_part_owner(&t->parts[idx]))
		return 3;
	*out = &t->parts[idx];
	return 0;
}

/* Send a message from thread `from` to thread `to` and wake it if it
 * sleeps. -ENOBUFS if the ring is full: the caller parks the message on
 * its own side, in order, and retries from its loop (shard_send,
 * control/ctl_msg.c ctl_send); a message between threads is never dropped,
 * hence warn_unused_result. */
__attribute__((warn_unused_result))
int broker_send(struct broker *b, int from, int to, const struct shard_msg *m);
/* @thread any: wake thread `to`'s loop (its eventfd) whether or not it
 * sleeps: after a word it reads at its next turn (b->stopping, b->serving)
 * changed. */
void broker_wake(struct broker *b, int to);

/* @thread any (the control thread). What the control thread reads of
 * shard i, a word the shard writes: the metadata version it last loaded
 * (acquire: quiescent-state reclamation) and its busy cycles so far
 * (relaxed: a report). */
uint64_t broker_shard_md_seen(const struct broker *b, int i);
uint64_t broker_shard_busy_cycles(const struct broker *b, int i);

#endif
