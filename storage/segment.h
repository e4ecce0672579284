/* storage/segment.h — one segment file of a partition log.
 *
 * Thread: the shard owning the partition. Owns: its file descriptor (opened
 * O_DIRECT) and its index. File "<dir>/<20-digit base offset>.log"; the
 * space after `end` is preallocated zeros, so the true end is found by
 * reading (recovery), never by the file size.
 */
#ifndef SLUICE_SEGMENT_H
#define SLUICE_SEGMENT_H

#include <stdint.h>

#include "storage/seg_index.h"
#include "storage/store.h"

struct segment {
	int64_t base_offset;
	int64_t next_offset;       /* offset after its last batch */
	int64_t max_timestamp;     /* largest batch MaxTimestamp, INT64_MIN if empty */
	uint64_t end;              /* bytes of batches (logical end) */
	uint64_t flushed;          /* bytes written per the durability mode */
	uint64_t alloc;            /* bytes preallocated (the file size) */
	uint64_t extent;           /* size of the next preallocation */
	uint64_t last_falloc_ns;
	int fd;
	uint8_t sealed;            /* no more appends; rolled */
	uint8_t index_saved;       /* "<base>.index" matches this segment */
	uint8_t falloc_inflight;
	uint8_t dead;              /* removed from the log, freed when idle */
	struct store_call falloc_call;   /* the preallocation in flight */
	struct seg_index ix;
	struct segment *next, *prev;
	struct plog *owner;
	char name[32];             /* "<20 digits>.log" */
};

static inline uint64_t align_down4k(uint64_t v) { return v & ~4095ull; }
static inline uint64_t align_up4k(uint64_t v) { return (v + 4095) & ~4095ull; }

#endif
