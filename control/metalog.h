/* control/metalog.h — the metadata log (__cluster_metadata, DESIGN 6):
 * topics, partition counts, leader epochs, topic configs, producer id
 * blocks and the cluster id. Every change is one record; the in-memory
 * image is the replay of the log.
 *
 * Thread: the control thread only (@thread control); nothing here locks.
 * Owns: the image; and for a log opened with metalog_open (the local file
 * of brokers before the metadata quorum, read today only to import it:
 * control/ctl_quorum.c) its own struct store (a private io_uring) and the
 * plog in "<data dir>/__cluster_metadata-0/" (durability sync). The broker
 * keeps its image with metalog_image_new, built by the quorum's records.
 * Durability: every mutating call (and metalog_commit) returns only after
 * its record is durable (written with RWF_DSYNC) and changes the image only
 * after that; on any error the image is unchanged. The builders and
 * metalog_apply below split a change so that a quorum can carry it. After an I/O error the metalog is failed:
 * every later mutation returns the same -errno (STYLE 7) until reopened.
 * Errors: 0 or -errno. -EEXIST, -ENOENT (no such topic), -EINVAL (bad name,
 * count or config), -EMSGSIZE (record too large), -EPROTO (the log holds a
 * record this version cannot understand or that contradicts the image),
 * -EROFS/-EIO (storage failed).
 * Pointers returned (meta_topic, cluster id) are borrowed until
 * metalog_close(); a deleted topic's struct stays valid (deleted = 1) but
 * is no longer found or iterated. The config arrays of a topic are
 * replaced by metalog_set_config on it.
 *
 * On-disk format: each change is one RecordBatch v2 (uncompressed, no
 * producer id) holding one record. Key = int16 record type (big-endian).
 * Value = version byte (1), then the fields in order; integers big-endian;
 * string = int16 length + bytes (-1 = null); id = 16 raw bytes.
 *   1 TOPIC         name, id, int32 partitions, int32 leader epoch,
 *                   int32 nconfigs, then nconfigs x (key, value)
 *   2 PARTITIONS    id, int32 new count (the leader epoch is bumped by one)
 *   3 CONFIG        id, key, value (null = delete the override)
 *   4 REMOVE_TOPIC  id
 *   5 PRODUCER_IDS  int64 next block start (ids below it were handed out)
 *   6 NODE          int32 node id, cluster id (written once, on first start)
 *   7 BROKER_CONFIG int32 scope (-1: the cluster-wide default, else a node
 *                   id), key, value (null = delete): a broker config
 *                   changed at run time (AlterConfigs on the broker
 *                   resource)
 *   8 REGISTER_BROKER   int32 broker id, id incarnation (random per process
 *                   start), int64 broker epoch (-1 as proposed: the
 *                   record's own log index; a snapshot writes the
 *                   epoch), host, int32 port (the inter-broker listener;
 *                   clients of every listener are told it), rack
 *                   (null: none), then optionally int32 native replication ip,
 *                   int32 its port. A broker starts fenced. Written by
 *                   brokers before REGISTER_BROKER_ENDPOINTS (20), and by
 *                   a node with no listener list (the unit tests').
 *   9 BROKER_FENCE  int32 broker id, int64 epoch, int8 fenced (1) or
 *                   unfenced (0)
 *  10 UNREGISTER_BROKER int32 broker id, int64 epoch
 *  11 PARTITION     id, int32 first partition, int32 count, then count x
 *                   (int32 leader (-1: none), int32 leader epoch, int32
 *                   partition epoch, replicas, ISR), where a list of
 *                   brokers is int16 n + n x int32 id; the first replica
 *                   is the preferred leader. The placement of partitions
 *                   [first, first + count) of the topic, as created
 *                   (Kafka's PartitionRecord, for a run of partitions: a
 *                   topic's partitions take as many records as keep each
 *                   under the 1 MiB record limit, 100,000 partitions of 3
 *                   replicas four). Written after the TOPIC record (or
 *                   the PARTITIONS record) that made them.
 *  12 PARTITION_CHANGE id, int32 partition, int32 leader (-2: unchanged),
 *                   ISR (n -1: unchanged), replicas (n -1: unchanged):
 *                   bumps the partition epoch; a new leader bumps the
 *                   leader epoch (Kafka's PartitionChangeRecord)
 *  13 LEADER_RESTARTED int32 broker id, int64 broker epoch (its new
 *                   registration's): every partition the broker leads
 *                   takes a new leader epoch and partition epoch, its
 *                   legacy topics a new topic epoch. Kafka's controller
 *                   fences the old incarnation (leader none, a new epoch)
 *                   and elects the new one (another): one record here,
 *                   whatever the number of partitions, so a restart of a
 *                   broker with 100,000 partitions costs one record.
 *  14 PARTITION_REASSIGN id, int32 partition, int32 partition epoch
 *                   it was built at (-1: any; another is refused,
 *                   -ESTALE), int32 leader (-2: unchanged), ISR and
 *                   replicas (n -1: unchanged), adding replicas, removing
 *                   replicas: a reassignment (KIP-455) started, replaced,
 *                   completed or cancelled (adding and removing empty: none
 *                   in progress). Bumps the epochs as PARTITION_CHANGE,
 *                   unless leader, ISR and replicas are all unchanged (a
 *                   snapshot's note of a reassignment in progress).
 *  15 SCRAM       a user's SCRAM credential (control/meta_scram.h)
 *  16 REMOVE_SCRAM  its removal
 *  17 BROKER_RESTARTED int32 broker id, int64 broker epoch (its new
 *                   registration's): what a broker proposes at start,
 *                   once unfenced, instead of LEADER_RESTARTED (which
 *                   keeps its meaning for the logs that hold it). In each
 *                   partition whose ISR holds the broker and another
 *                   registered, unfenced member, the broker leaves the
 *                   ISR and, where it led, the first such member in
 *                   replicas order leads (a new leader epoch); every
 *                   change bumps the partition epoch. Where no other such
 *                   member is in the ISR it stays as it was, and where it
 *                   leads takes a new leader epoch as LEADER_RESTARTED
 *                   gives (legacy topics a new topic epoch). A restarted
 *                   broker may have lost what it had (an empty or cut
 *                   log): it catches up as a follower and rejoins the ISR
 *                   (Kafka's controller fences a re-registered broker:
 *                   KIP-841). One record, whatever the number of
 *                   partitions; the image alone decides.
 *  18 ACL         an ACL binding added (control/meta_acl.h)
 *  19 REMOVE_ACL  its removal
 *  20 REGISTER_BROKER_ENDPOINTS int32 broker id, id incarnation, int64
 *                   broker epoch (as REGISTER_BROKER), rack (null: none),
 *                   int32 native replication ip, int32 its port (0:
 *                   none), the inter-broker listener's name, int16 n, then
 *                   n x (listener name, host, int32 port, int16 security
 *                   protocol: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3
 *                   SASL_SSL), n <= 8, names distinct, the inter-broker
 *                   one among them (Kafka's RegisterBrokerRecord's
 *                   endpoints, from advertised.listeners): a registration
 *                   as REGISTER_BROKER, with an endpoint per listener.
 *                   Clients are told of each broker at the endpoint named
 *                   as the listener they came through; peers and replica
 *                   fetchers reach it at the inter-broker one. A broker
 *                   registered by a REGISTER_BROKER record (the logs before
 *                   this one) has that one endpoint, told to the clients
 *                   of every listener. Written only at metadata.version 2
 *                   and above (below, a broker registers with
 *                   REGISTER_BROKER: control/meta_features.h).
 *  21 FEATURE_LEVEL name (only "metadata.version" so far), int16 level,
 *                   int64 epoch (-1 as proposed: the record's own log
 *                   index; a snapshot writes the epoch): the finalized
 *                   level of a feature (Kafka's FeatureLevelRecord). The
 *                   levels are Sluice's own (control/meta_features.h);
 *                   a log without one is at level 1; a level below the
 *                   image's is refused (-EINVAL: never lowered), one
 *                   above this build's is -EPROTO. Written at a new
 *                   cluster's start (its bootstrap node's highest level,
 *                   when above 1) and by UpdateFeatures.
 * (control/meta_brokers.h keeps the brokers, control/meta_parts.h the
 * partitions, control/meta_scram.h the SCRAM users, control/meta_acl.h the
 * ACL bindings.) A TOPIC record with no PARTITION record after it, as
 * brokers before these records wrote them, has every partition on the node
 * the NODE record names (replicas and ISR that node, its leader), at the
 * topic's leader epoch; partitions a PARTITIONS record adds with no
 * PARTITION record likewise.
 * A reader refuses (-EPROTO) a version byte or record type it does not know.
 */
#ifndef SLUICE_METALOG_H
#define SLUICE_METALOG_H

#include <stddef.h>
#include <stdint.h>

enum metalog_record {
	META_REC_TOPIC = 1,
	META_REC_PARTITIONS = 2,
	META_REC_CONFIG = 3,
	META_REC_REMOVE_TOPIC = 4,
	META_REC_PRODUCER_IDS = 5,
	META_REC_NODE = 6,
	META_REC_BROKER_CONFIG = 7,
	META_REC_REGISTER_BROKER = 8,
	META_REC_BROKER_FENCE = 9,
	META_REC_UNREGISTER_BROKER = 10,
	META_REC_PARTITION = 11,
	META_REC_PARTITION_CHANGE = 12,
	META_REC_LEADER_RESTARTED = 13,
	META_REC_PARTITION_REASSIGN = 14,
	META_REC_SCRAM = 15,
	META_REC_REMOVE_SCRAM = 16,
	META_REC_BROKER_RESTARTED = 17,
	META_REC_ACL = 18,
	META_REC_REMOVE_ACL = 19,
	META_REC_REGISTER_BROKER_ENDPOINTS = 20,
	META_REC_FEATURE_LEVEL = 21,
};
struct meta_broker;
struct meta_part;
#define META_SCOPE_CLUSTER (-1)
#define META_FORMAT_VERSION 1
#define META_TOPIC_NAME_MAX 249

struct metalog;

struct meta_topic {
	char name[256];
	uint8_t id[16];                /* random UUID, v4 */
	int32_t partitions;
	int32_t leader_epoch;          /* bumped when partitions are added */
	struct meta_part *parts;       /* partitions entries (control/meta_parts.h) */
	int32_t parts_cap;
	int nconfigs;
	char **config_keys, **config_values;   /* overrides only */
	int deleted;
};

/* ---- records: build, then apply ------------------------------------------
 * A change is made in two steps, so the same bytes can go to the local
 * file or to the quorum (control/quorum.h) and be applied on every node:
 * a builder validates it against the image and encodes its record; then
 * metalog_commit (the local file) or the quorum's apply callback
 * (metalog_apply) applies it, in log order. A record's bytes: int16 type
 * (big-endian), then the value as above. Applying re-validates against the
 * image (the same on every node): a record that no longer applies (a topic
 * created twice by racing proposals, a topic deleted meanwhile) changes
 * nothing and says why. */
struct metalog_rec {
	uint8_t *buf;              /* malloc()ed; metalog_rec_free */
	size_t len;                /* 0 (buf NULL): nothing to write, the image already says it */
};
void metalog_rec_free(struct metalog_rec *r);

/* What an applied record did: its type, the topic it made or changed (or
 * NULL), and for PRODUCER_IDS the block it reserved (the ids from the
 * previous block's end to the record's, whoever built it; else -1). */
struct metalog_applied {
	int16_t type;
	const struct meta_topic *topic;
	int64_t pid_start, pid_end;   /* the block is [pid_start, pid_end) */
	int32_t broker;               /* broker records: its id and epoch (else -1) */
	int64_t broker_epoch;
};

/* Builders: the record of one change, validated against the image as the
 * mutators below say (the same errors); 0 with out->len == 0 when there
 * is nothing to write. @thread control */
int metalog_build_topic(const struct metalog *ml, const char *name, int32_t partitions,
			const char *const *keys, const char *const *values, int n, struct metalog_rec *out);
int metalog_build_delete_topic(const struct metalog *ml, const char *name, struct metalog_rec *out);
int metalog_build_partitions(const struct metalog *ml, const char *name, int32_t new_total,
			     struct metalog_rec *out);
/* ... placed: the TOPIC (or PARTITIONS) record, then the PARTITION
 * records placing each new partition i (0 for the first new one) on
 * replicas[i * rf .. i * rf + rf) (the first its leader, all in sync,
 * epochs 0): *recs (malloc()ed, metalog_recs_free) has *nrecs records,
 * to propose in order. -EINVAL: rf outside 1..META_MAX_REPLICAS, a
 * negative or repeated broker in a partition. */
int metalog_build_topic_placed(const struct metalog *ml, const char *name, int32_t partitions,
			       const char *const *keys, const char *const *values, int n, int rf,
			       const int32_t *replicas, struct metalog_rec **recs, int *nrecs);
int metalog_build_partitions_placed(const struct metalog *ml, const char *name, int32_t new_total, int rf,
				    const int32_t *replicas, struct metalog_rec **recs, int *nrecs);
void metalog_recs_free(struct metalog_rec *recs, int n);
/* A PARTITION_CHANGE: leader -2 unchanged; isr / replicas NULL unchanged.
 * It carries the partition's leader, leader epoch and partition epoch in
 * this image as its guard: applied where they differ, it is refused
 * (-ESTALE, a no-op). 0 with out->len 0 when it changes nothing; -ENOENT (no topic),
 * -EINVAL (no such partition, or a state that does not hold: an ISR
 * member or leader that is not a replica). */
int metalog_build_partition_change(const struct metalog *ml, const char *name, int32_t partition, int32_t leader,
				   const int32_t *isr, int nisr, const int32_t *replicas, int nreplicas,
				   struct metalog_rec *out);
/* A PARTITION_REASSIGN built at the partition's epoch now: leader -2
 * unchanged, isr NULL unchanged, replicas required; adding and removing
 * (n 0: none) among the replicas. -ENOENT, -EINVAL as above. */
int metalog_build_partition_reassign(const struct metalog *ml, const char *name, int32_t partition, int32_t leader,
				     const int32_t *isr, int nisr, const int32_t *replicas, int nreplicas,
				     const int32_t *adding, int nadding, const int32_t *removing, int nremoving,
				     struct metalog_rec *out);
int metalog_build_config(const struct metalog *ml, const char *name, const char *key, const char *value,
			 struct metalog_rec *out);
int metalog_build_broker_config(const struct metalog *ml, int32_t scope, const char *key, const char *value,
				struct metalog_rec *out);
int metalog_build_producer_ids(const struct metalog *ml, int32_t block, struct metalog_rec *out);
/* The NODE record with a new cluster id; -EEXIST once the image has one. */
int metalog_build_node(const struct metalog *ml, struct metalog_rec *out);
/* FEATURE_LEVEL: the finalized level of feature `name` (only
 * "metadata.version"; else -ENOENT) raised to `level`: 0 with out->len 0
 * when the image is at that level already; -EINVAL below the image's
 * level (never lowered); -ERANGE above this build's (META_MV_MAX). */
int metalog_build_feature_level(const struct metalog *ml, const char *name, int16_t level, struct metalog_rec *out);
/* The finalized metadata.version (1 when the log holds no FEATURE_LEVEL
 * record), and the log index of the record that set it (0: none). */
int16_t metalog_metadata_version(const struct metalog *ml);
int64_t metalog_features_epoch(const struct metalog *ml);
/* ... with the given one (22 characters, as metalog_new_cluster_id makes:
 * else -EINVAL). */
int metalog_build_node_for(const struct metalog *ml, const char *cluster_id, struct metalog_rec *out);
/* A new cluster id: 22-char base64url of a random uuid, NUL-terminated.
 * @thread any */
void metalog_new_cluster_id(char out[23]);

/* Broker records (control/meta_brokers.h): a registration (epoch: the
 * record's log index once applied), a change of fencing (0 with out->len
 * 0 when the broker is in that state already; -ENOENT for another epoch),
 * a removal. */
int metalog_build_register_broker(const struct metalog *ml, int32_t id, const uint8_t incarnation[16],
				  const char *host, int32_t port, const char *rack, struct metalog_rec *out);
/* The same with the broker's native replication address (repl_ip network
 * order, repl_port 0: none, the record as above). */
int metalog_build_register_broker_repl(const struct metalog *ml, int32_t id, const uint8_t incarnation[16],
				       const char *host, int32_t port, const char *rack, uint32_t repl_ip,
				       int32_t repl_port, struct metalog_rec *out);
/* The same with every listener the broker advertises (a
 * REGISTER_BROKER_ENDPOINTS record): eps[0..nep) (1 <= nep <= 8, distinct
 * names), inter the inter-broker listener's name, one of them. -EINVAL
 * otherwise; -EOPNOTSUPP while the finalized metadata.version is below 2
 * (nodes of older builds could not read it: register with
 * metalog_build_register_broker_repl). */
struct meta_endpoint;
int metalog_build_register_endpoints(const struct metalog *ml, int32_t id, const uint8_t incarnation[16],
				     const char *rack, uint32_t repl_ip, int32_t repl_port, const char *inter,
				     const struct meta_endpoint *eps, int nep, struct metalog_rec *out);
int metalog_build_broker_fence(const struct metalog *ml, int32_t id, int64_t epoch, int fenced,
			       struct metalog_rec *out);
int metalog_build_unregister_broker(const struct metalog *ml, int32_t id, int64_t epoch, struct metalog_rec *out);
/* LEADER_RESTARTED for broker id at its registration `epoch`: -ENOENT
 * when that is not its registration in the image. */
int metalog_build_leader_restarted(const struct metalog *ml, int32_t id, int64_t epoch, struct metalog_rec *out);
/* BROKER_RESTARTED for broker id at its registration `epoch` (what a
 * broker proposes at start): -ENOENT as above. */
int metalog_build_broker_restarted(const struct metalog *ml, int32_t id, int64_t epoch, struct metalog_rec *out);
/* The registered brokers, by id (NULL: none). */
const struct meta_broker *metalog_broker(const struct metalog *ml, int32_t id);
int metalog_broker_count(const struct metalog *ml);
const struct meta_broker *metalog_broker_at(const struct metalog *ml, int i);

/* Apply one record to the image: 0 (out, if not NULL, says what it did),
 * or -errno and the image is unchanged: -EPROTO a record this version
 * cannot read (the caller stops: the nodes would diverge), or a record
 * that no longer applies: -EEXIST (the topic's name or id is live, a
 * second NODE record), -ENOENT (no live topic with that id), -EINVAL
 * (partitions not more than now, producer ids not beyond the last block);
 * -ENOMEM. */
int metalog_apply(struct metalog *ml, const void *rec, size_t len, struct metalog_applied *out);
/* ... at log index `index` (> 0: a REGISTER_BROKER proposed with epoch -1
 * takes it as its broker epoch; metalog_apply passes 0, and such a record
 * is then -EINVAL). What the quorum's apply calls. */
int metalog_apply_at(struct metalog *ml, int64_t index, const void *rec, size_t len, struct metalog_applied *out);
/* Whether it would apply (the same answer, nothing changed). */
int metalog_check(const struct metalog *ml, const void *rec, size_t len);
/* The local file: a record that applies is appended, made durable, then
 * applied (returns once it is); one that does not apply is not written
 * (metalog_check's error). -EOPNOTSUPP on an image without a file. */
int metalog_commit(struct metalog *ml, const void *rec, size_t len, struct metalog_applied *out);

/* Open "<data_dir>/__cluster_metadata-0" (creating data_dir and the log if
 * needed) and replay it. On first start writes the NODE record with a new
 * cluster id. -EINVAL if the log belongs to another node id. @thread control */
int metalog_open(const char *data_dir, int32_t node_id, struct metalog **out);
/* An empty image without a file, for records a quorum carries (applied
 * with metalog_apply, restored with metalog_restore; metalog_commit says
 * -EOPNOTSUPP). Its cluster id is "" until a NODE record is applied. */
int metalog_image_new(int32_t node_id, struct metalog **out);
void metalog_close(struct metalog *ml);

/* 22-char base64url of a random uuid, like Kafka. */
const char *metalog_cluster_id(const struct metalog *ml);
int32_t metalog_node_id(const struct metalog *ml);

/* NULL if none (or deleted). */
const struct meta_topic *metalog_topic(const struct metalog *ml, const char *name);
const struct meta_topic *metalog_topic_by_id(const struct metalog *ml, const uint8_t id[16]);
/* Live topics, in creation order; deleted ones are skipped. */
int metalog_topic_count(const struct metalog *ml);
const struct meta_topic *metalog_topic_at(const struct metalog *ml, int i);

/* Kafka's topic name rule: [a-zA-Z0-9._-], 1..249 chars, not "." or "..".
 * @thread any */
int metalog_topic_name_valid(const char *name);

/* Create a topic with partitions >= 1 and n config overrides (validated
 * with topic_config_validate: -ENOENT unknown key, -EINVAL bad value).
 * -EEXIST, -EINVAL (bad name or count). *out (may be NULL) gets the topic. */
int metalog_create_topic(struct metalog *ml, const char *name, int32_t partitions,
			 const char *const *keys, const char *const *values, int n,
			 const struct meta_topic **out);
/* -ENOENT if no such topic. */
int metalog_delete_topic(struct metalog *ml, const char *name);
/* -EINVAL if new_total is not larger than the current count. */
int metalog_add_partitions(struct metalog *ml, const char *name, int32_t new_total);
/* Set (value != NULL) or delete (NULL) one override. -ENOENT: no topic or
 * an unknown key; -EINVAL: a bad value. Deleting an absent override writes
 * nothing and returns 0. */
int metalog_set_config(struct metalog *ml, const char *name, const char *key, const char *value);
/* Set (value != NULL) or delete (NULL) a broker config changed at run
 * time, for `scope` (META_SCOPE_CLUSTER or a node id). -EPERM: not a
 * dynamic key (config_dynamic_validate); -ENOENT unknown; -EINVAL bad
 * value. Deleting an absent one writes nothing. */
int metalog_set_broker_config(struct metalog *ml, int32_t scope, const char *key, const char *value);
/* The run-time broker configs, in the order first set: i = 0.. until it
 * returns -ENOENT; *key and *value borrowed until the next change. */
int metalog_broker_config_at(const struct metalog *ml, int i, int32_t *scope, const char **key,
			     const char **value);

/* Reserve `block` (>= 1) producer ids; returns the first id of the block
 * (>= 0) once durable, or -errno. Blocks never repeat, across restarts too. */
int64_t metalog_next_producer_ids(struct metalog *ml, int32_t block);

/* The whole image as bytes (*buf malloc()ed): "SLMETA01", then records
 * (uint32 big-endian length, record) that rebuild it: NODE, each live
 * topic as a TOPIC record with its partitions, leader epoch and configs
 * followed by the PARTITION records of its placed partitions, FEATURE_LEVEL
 * (when the log had one), each broker config, each broker, each SCRAM credential, each ACL binding,
 * PRODUCER_IDS. What a quorum keeps instead of the log
 * before it. 0 or -ENOMEM. */
int metalog_snapshot(const struct metalog *ml, void **buf, size_t *len);
/* Replace the image with a snapshot's: -EPROTO for bytes it cannot read
 * (the image is then partial: the caller stops), -ENOMEM. Topics of the
 * old image stay valid as borrowed pointers (deleted = 1). */
int metalog_restore(struct metalog *ml, const void *buf, size_t len);

/* Each record of a snapshot, in order: fn's first error stops the walk
 * and is returned; -EPROTO for bytes that are not a snapshot. @thread any */
int metalog_snapshot_each(const void *buf, size_t len, int (*fn)(void *arg, const void *rec, size_t len),
			  void *arg);

/* The SCRAM users (control/meta_scram.h), borrowed until the next change. */
struct meta_scram;
const struct meta_scram *metalog_scram(const struct metalog *ml);
/* The ACL bindings (control/meta_acl.h), borrowed until the next change. */
struct meta_acl;
const struct meta_acl *metalog_acls(const struct metalog *ml);

/* The first producer id no block has reserved yet. */
int64_t metalog_next_producer_id(const struct metalog *ml);

/* Records replayed at open (for logs and tests). */
int64_t metalog_records(const struct metalog *ml);

#endif
