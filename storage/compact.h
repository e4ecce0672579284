/* storage/compact.h — the log cleaner for cleanup.policy=compact.
 *
 * Thread: the shard owning the partition, from a slow-path timer. The work
 * is cut into steps: step 0 builds the key map over the sealed segments,
 * each later step rewrites one sealed segment, so appends wait at most one
 * step (bounded by log.segment.bytes of reading; compacted topics should
 * use moderate segment sizes).
 * Owns: its key map (a hash table of 128-bit key hashes -> latest offset)
 * and scratch buffers, allocated when a pass starts and freed at its end.
 * Semantics: the newest record per key wins; tombstones (null values) are
 * dropped once older than delete.retention.ms; offsets never change or
 * reorder (a rewritten batch keeps its BaseOffset, LastOffsetDelta,
 * producer fields and codec); records with a null key are kept; control
 * batches are kept; compressed batches are decompressed and recompressed
 * with their own codec.
 * Errors: 0/1 (more work) or -errno; a failed step leaves the segment as it
 * was.
 */
#ifndef SLUICE_COMPACT_H
#define SLUICE_COMPACT_H

#include <stdint.h>

struct plog;
struct compress_ctx;

struct compact_stats {
	uint64_t passes;
	uint64_t segments_cleaned;
	uint64_t records_kept;
	uint64_t records_removed;
	uint64_t tombstones_removed;
	uint64_t bytes_before;
	uint64_t bytes_after;
};

struct compactor;

int compactor_create(struct compactor **out);
void compactor_destroy(struct compactor *cp);

/* One step of a pass over pl. Returns 1 while the pass has more steps,
 * 0 when it is done (call again later for a new pass), or -errno. */
int compactor_step(struct compactor *cp, struct plog *pl, struct compress_ctx *cc, int64_t now_ms);

/* Abandon the pass in progress (its log is closing); frees its buffers.
 * The next step starts a new pass. */
void compactor_reset(struct compactor *cp);
/* Run whole passes until done (tests and tools). */
int compactor_run(struct compactor *cp, struct plog *pl, struct compress_ctx *cc, int64_t now_ms);

const struct compact_stats *compactor_stats(const struct compactor *cp);

#endif
