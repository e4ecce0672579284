/* storage/segment.h — one segment file of a partition log.
 *
 * Thread: the shard owning the partition. Owns: its file descriptor (opened
 * O_DIRECT) and its index. File "<dir>/<20-digit base offset>.log"; the
 * space after `end` is preallocated zeros, so the true end is found by
 * reading (recovery), never by the file size.
 * segment.c creates the file, makes the image of its index and frees it,
 * and knows nothing of the log above it: the partition log (plog.c) links
 * its segments into its list, preallocates their extents on the shard's
 * ring (falloc_call) and says where they live; the log's file work
 * (plog_files.c) writes their index files on the ring.
 * Errors: 0 or -errno.
 */
#ifndef SLUICE_SEGMENT_H
#define SLUICE_SEGMENT_H

#include <stddef.h>
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
	uint8_t saving;            /* its data's fdatasync and index write are in flight:
				    * it stays, and its descriptor, until they end */
	uint8_t save_failed;       /* the last try failed: again at the next checkpoint */
	uint8_t falloc_inflight;
	uint8_t dead;              /* removed from the log, freed when idle */
	uint32_t reads;            /* the log's disk reads in flight on it: it is neither
				    * deleted nor swapped (retention, the cleaner) until they end */
	struct store_call falloc_call;   /* the preallocation in flight */
	struct seg_index ix;
	struct segment *next, *prev;
	struct plog *owner;        /* borrowed: the log whose list holds it (the
				    * log's to follow; segment.c never does) */
	struct store *st;          /* borrowed: the shard's store (outlives every log) */
	char name[32];             /* "<20 digits>.log" */
};

static inline uint64_t align_down4k(uint64_t v) { return v & ~4095ull; }
static inline uint64_t align_up4k(uint64_t v) { return (v + 4095) & ~4095ull; }

/* The segment with base offset `base` in the directory dirfd, on no list:
 *  - fd >= 0, from != NULL: the prepared file `from` (open as fd) is renamed
 *    to the segment's name (if that fails, fd is closed and the file created);
 *  - fd >= 0, from == NULL: an existing segment file (recovery);
 *  - fd < 0: create the file (and alloc is 0).
 * extent: the size of its first preallocation. @thread shard */
int segment_create(int dirfd, int64_t base, int fd, const char *from, uint64_t alloc, uint64_t extent,
		   struct segment **out);
/* Close and free; with a preallocation in flight, only marked dead (the
 * completion frees it). @thread shard */
void segment_free(struct segment *seg);
/* The image of the segment's index file ("<base>.index", a recovery
 * checkpoint) for its bytes up to `upto`, which must be on disk: the whole
 * segment when upto >= end (*whole = 1), else the prefix up to the last
 * indexed batch boundary at or below upto. 0 with *buf NULL when there is
 * no such prefix; -ENOMEM. The buffer (allocated here, once per segment)
 * is the caller's to free once written: the log writes it on the shard's
 * ring (storage/file_save.h), after the fdatasync of the data it vouches
 * for. @thread shard */
int segment_index_image(const struct segment *seg, uint64_t upto, uint8_t **buf, size_t *len, int *whole);
/* Remove the segment's files (data, then index) from the directory dirfd
 * (retention, DeleteRecords; the slow path's unlinks). @thread shard */
void segment_remove_files(int dirfd, const struct segment *seg);
/* "<20 digits>.index" of the segment. */
void segment_index_path(const struct segment *seg, char *buf, size_t n);

#endif
