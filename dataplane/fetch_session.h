/* dataplane/fetch_session.h — incremental fetch sessions (KIP-227): a
 * shard's cache of them, as Kafka's FetchSessionCache keeps them.
 *
 * Thread: shard (@thread shard). Each shard owns one cache (struct
 * shard.fsess); a session belongs to the shard of the connection whose
 * full fetch made it, and only that shard reads or writes it: no locks. A
 * client that reconnects onto another shard asks a session that shard does
 * not have, gets FETCH_SESSION_ID_NOT_FOUND, and starts a new one with a
 * full fetch, as after a broker restart.
 *
 * Owns: the slots (allocated once, at the first session), each session's
 * partition list and its topic names (grown when partitions are added, not
 * per fetch). */
#ifndef SLUICE_FETCH_SESSION_H
#define SLUICE_FETCH_SESSION_H

#include <stddef.h>
#include <stdint.h>

/* A session unused this long may be evicted by any new one; a session this
 * old may be evicted by a larger one (Kafka's
 * MinIncrementalFetchSessionEvictionMs). */
#define FSESS_EVICT_NS (120ull * 1000000000ull)

/* One partition of a session: what the client asked last, and what it was
 * last told (an incremental answer leaves out a partition whose high
 * watermark and log start it knows and that has no records or error). */
struct fsess_part {
	uint8_t topic_id[16];     /* v13+ sessions */
	uint32_t name_off;        /* earlier sessions: the name, in the session's names */
	int32_t name_len;
	int32_t partition;
	int64_t fetch_offset;
	int32_t max_bytes;
	int32_t current_epoch;
	int32_t last_fetched_epoch;
	int64_t hw_sent;          /* -1: answer it next time */
	int64_t log_start_sent;
};

struct fsess {
	int32_t id;               /* 0: a free slot */
	int32_t epoch;            /* the epoch the next incremental fetch must carry */
	uint32_t gen;             /* changes with every update and removal: a parked
				   * fetch finds whether its session is still the same */
	int privileged;           /* a follower's (ReplicaId >= 0) */
	int topic_ids;            /* made by Fetch v13+: addressed by topic id */
	uint64_t created_ns, used_ns;
	struct fsess_part *parts;
	int nparts, cap;
	char *names;
	uint32_t names_len, names_cap;
};

struct fsess_cache {
	struct fsess *slots;      /* NULL until the first session */
	int nslots;               /* this shard's share of max.incremental.fetch.session.cache.slots */
	int used;
	uint32_t rng;
	uint64_t evictions;
};

/* Set the cache's size (no allocation yet). nslots 0: no sessions. */
void fsess_cache_init(struct fsess_cache *c, int nslots, uint32_t seed);
void fsess_cache_free(struct fsess_cache *c);

/* The live session with this id, or NULL. */
struct fsess *fsess_find(struct fsess_cache *c, int32_t id);

/* A new, empty session with a fresh id and epoch 1, in a free slot or in
 * the slot of the session Kafka would evict for it (the least recently used
 * one if unused for FSESS_EVICT_NS; else the least valuable evictable one,
 * ordered by privileged, then partition count, if the new one is worth
 * more); NULL when there is no room (the fetch is answered without a
 * session, SessionId 0). */
struct fsess *fsess_create(struct fsess_cache *c, int privileged, int nparts, int topic_ids, uint64_t now_ns);

void fsess_remove(struct fsess_cache *c, struct fsess *s);

/* The session was used now (the eviction order). */
static inline void fsess_touch(struct fsess *s, uint64_t now_ns)
{
	s->used_ns = now_ns;
}

/* Kafka's next epoch: +1, wrapping to 1. */
static inline int32_t fsess_next_epoch(int32_t e)
{
	return e == INT32_MAX ? 1 : e + 1;
}

/* The partition of the session named so (by id in a topic-id session, else
 * by name), or -1. */
int fsess_part_find(const struct fsess *s, const uint8_t id[16], const char *name, int32_t len, int32_t partition);

/* Add the partition, or update it if present: its index, -1 on ENOMEM. */
int fsess_part_upsert(struct fsess *s, const uint8_t id[16], const char *name, int32_t len, int32_t partition);

/* Drop a partition (ForgottenTopicsData). */
void fsess_part_forget(struct fsess *s, const uint8_t id[16], const char *name, int32_t len, int32_t partition);

static inline const char *fsess_part_name(const struct fsess *s, const struct fsess_part *p)
{
	return s->names + p->name_off;
}

#endif
