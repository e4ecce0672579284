/* control/metalog.h — the metadata log (__cluster_metadata, DESIGN 6):
 * topics, partition counts, leader epochs, topic configs, producer id
 * blocks and the cluster id. Every change is one record; the in-memory
 * image is the replay of the log.
 *
 * Thread: the control thread only (@thread control); nothing here locks.
 * Owns: its own struct store (a private io_uring), the plog in
 * "<data dir>/__cluster_metadata-0/" (durability sync), and the image.
 * Durability: every mutating call returns only after its record is durable
 * (written with RWF_DSYNC) and changes the image only after that; on any
 * error the image is unchanged. After an I/O error the metalog is failed:
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
 * A reader refuses (-EPROTO) a version byte or record type it does not know.
 */
#ifndef SLUICE_METALOG_H
#define SLUICE_METALOG_H

#include <stdint.h>

enum metalog_record {
	META_REC_TOPIC = 1,
	META_REC_PARTITIONS = 2,
	META_REC_CONFIG = 3,
	META_REC_REMOVE_TOPIC = 4,
	META_REC_PRODUCER_IDS = 5,
	META_REC_NODE = 6,
	META_REC_BROKER_CONFIG = 7,
};
#define META_SCOPE_CLUSTER (-1)
#define META_FORMAT_VERSION 1
#define META_TOPIC_NAME_MAX 249

struct metalog;

struct meta_topic {
	char name[256];
	uint8_t id[16];                /* random UUID, v4 */
	int32_t partitions;
	int32_t leader_epoch;          /* bumped when partitions are added */
	int nconfigs;
	char **config_keys, **config_values;   /* overrides only */
	int deleted;
};

/* Open "<data_dir>/__cluster_metadata-0" (creating data_dir and the log if
 * needed) and replay it. On first start writes the NODE record with a new
 * cluster id. -EINVAL if the log belongs to another node id. @thread control */
int metalog_open(const char *data_dir, int32_t node_id, struct metalog **out);
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

/* Records replayed at open (for logs and tests). */
int64_t metalog_records(const struct metalog *ml);

#endif
