/* storage/epoch_cache.h — a partition's leader-epoch cache (Kafka's
 * LeaderEpochFileCache, KIP-101/279): the ordered list of (epoch, start
 * offset) pairs, one per leader epoch that wrote to the log, and its text
 * file "leader-epoch-checkpoint" (Kafka's format: a version line "0", a
 * count line, then one "<epoch> <startOffset>" line per entry).
 *
 * Invariants: epochs strictly increase and start offsets never decrease
 * from one entry to the next; no epoch and no start offset is negative.
 *
 * Thread: whoever owns the partition's log (the owner shard, @thread
 * shard); a pure data structure, no I/O. The list grows only when the
 * epoch changes (an allocation then, never per batch).
 * Owns: its entries (heap).
 * Errors: 0/1 (unchanged/changed) or -errno.
 */
#ifndef SLUICE_EPOCH_CACHE_H
#define SLUICE_EPOCH_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define EPOCH_UNDEFINED (-1)         /* Kafka's UNDEFINED_EPOCH */
#define EPOCH_UNDEFINED_OFFSET (-1)  /* Kafka's UNDEFINED_EPOCH_OFFSET */
#define EPOCH_CACHE_FILE "leader-epoch-checkpoint"

struct epoch_entry {
	int32_t epoch;
	int64_t start;               /* the first offset written in this epoch */
};

struct epoch_cache {
	struct epoch_entry *e;       /* oldest first */
	uint32_t n, cap;
};

void epoch_cache_init(struct epoch_cache *c);
void epoch_cache_fini(struct epoch_cache *c);
void epoch_cache_clear(struct epoch_cache *c);

/* The newest epoch, EPOCH_UNDEFINED when empty. */
static inline int32_t epoch_cache_latest(const struct epoch_cache *c)
{
	return c->n ? c->e[c->n - 1].epoch : EPOCH_UNDEFINED;
}

/* Epoch `epoch` starts at offset `start` (Kafka's assign): nothing when it
 * is the latest epoch already at or before start; otherwise every entry
 * with an epoch >= epoch or a start >= start goes (a non-monotonic history
 * is cut back, as Kafka does) and the pair is appended. 1: changed; 0:
 * unchanged (also for a negative epoch or offset, which are ignored);
 * -ENOMEM. */
int epoch_cache_assign(struct epoch_cache *c, int32_t epoch, int64_t start);

/* OffsetForLeaderEpoch's answer for `requested`, given the log end offset
 * (Kafka's endOffsetFor):
 *  - the latest epoch: (requested, log_end);
 *  - an earlier one: (the largest epoch <= requested, the start offset of
 *    the first epoch above requested); when requested is below the first
 *    entry: (requested, the first entry's start), Kafka 3.x's answer;
 *  - EPOCH_UNDEFINED, or above every epoch (an empty cache too):
 *    (EPOCH_UNDEFINED, EPOCH_UNDEFINED_OFFSET). */
void epoch_cache_end_offset(const struct epoch_cache *c, int32_t requested, int64_t log_end, int32_t *epoch,
			    int64_t *end);

/* The epoch of the entry covering `offset` (the last one starting at or
 * before it), EPOCH_UNDEFINED when none does. */
int32_t epoch_cache_epoch_for(const struct epoch_cache *c, int64_t offset);

/* The log was cut back to end at `end` (a follower dropping a divergent
 * tail, recovery cutting a torn one): every entry starting at or after it
 * goes. 1: changed; 0: unchanged. */
int epoch_cache_truncate_end(struct epoch_cache *c, int64_t end);

/* The log now starts at `start` (retention, DeleteRecords): the entries
 * starting at or before it collapse into the last of them, which now starts
 * at `start`. 1: changed; 0: unchanged. */
int epoch_cache_truncate_start(struct epoch_cache *c, int64_t start);

/* The file's text: at most cap bytes; returns the length the whole text
 * needs (like snprintf, without a NUL). */
size_t epoch_cache_format(const struct epoch_cache *c, char *buf, size_t cap);
/* Replace the entries with the file's text (len bytes). 0; -EINVAL when it
 * is not a well-formed version-0 file holding entries that keep the
 * invariants (the cache is then empty); -ENOMEM. */
int epoch_cache_parse(struct epoch_cache *c, const char *buf, size_t len);

#endif
