/* storage/compact.h — the log cleaner for cleanup.policy=compact.
 *
 * Thread: the shard owning the partition, from a slow-path timer. The work
 * is cut into steps: the first steps build the key map over the sealed
 * segments, the later ones rewrite them one by one; each step handles what
 * one read buffer holds and leaves its I/O (O_DIRECT reads of the segment,
 * writes and fdatasync of "<segment>.cleaned", the rename over the
 * segment) in flight on the shard's ring, so the shard never blocks on the
 * cleaner's disk traffic.
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

/* A step's read, write, fdatasync or rename is in flight on the shard's
 * ring: call compactor_step again once its completion came back (it wakes
 * the loop); until then a step returns COMPACT_WAIT and does nothing. */
#define COMPACT_WAIT 2

/* One step of a pass over pl: it works on what rbuf holds (at most about
 * 2 * message.max.bytes of the segment) and submits the next I/O. Returns
 * 1 while the pass has more steps, COMPACT_WAIT, 0 when it is done (call
 * again later for a new pass), or -errno (the segment stays as it was).
 * Call it with no SQE prepared and not submitted: the last step of a
 * segment replaces its file descriptor. @thread shard */
int compactor_step(struct compactor *cp, struct plog *pl, struct compress_ctx *cc, int64_t now_ms);

/* Abandon the pass in progress (its log is closing or gone: it is not
 * touched again); frees its buffers, once an I/O in flight came back. The
 * next step starts a new pass. */
void compactor_reset(struct compactor *cp);
/* Run whole passes until done, polling the store while I/O is in flight
 * (tests and tools). */
int compactor_run(struct compactor *cp, struct plog *pl, struct compress_ctx *cc, int64_t now_ms);

const struct compact_stats *compactor_stats(const struct compactor *cp);

#endif
