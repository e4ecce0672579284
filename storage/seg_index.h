/* storage/seg_index.h — a segment's sparse offset index and time index.
 *
 * Thread: the shard that owns the partition.
 * Owns: two growable arrays (entries every index.interval.bytes of log).
 * Memory grows by doubling, so a segment reallocates O(log n) times in its
 * life, never per batch in steady state.
 * On disk (seg_index_format): "<base>.index" holds both arrays and a
 * trailer with the valid end of the segment; it is written (by the log, on
 * the shard's ring) when a sealed segment is fully on disk and at clean
 * shutdown, and is a recovery checkpoint: everything before
 * trailer.end_pos is complete and valid.
 * Errors: 0 or -errno.
 */
#ifndef SLUICE_SEG_INDEX_H
#define SLUICE_SEG_INDEX_H

#include <stdint.h>
#include <stddef.h>

struct offset_entry {
	uint32_t rel_offset;   /* offset - segment base */
	uint32_t position;     /* byte position of the batch in the segment */
};

struct time_entry {
	int64_t timestamp;     /* largest batch max timestamp so far */
	uint32_t rel_offset;   /* base offset (relative) of the batch holding it */
	uint32_t position;
};

struct seg_index {
	struct offset_entry *off;
	struct time_entry *time;
	uint32_t n_off, cap_off;
	uint32_t n_time, cap_time;
	uint32_t last_pos;     /* position of the last offset entry */
	int64_t last_ts;
};

/* Disk format of "<base>.index" (little-endian host order is not used:
 * all fields big-endian, like the log). */
#define SEG_INDEX_MAGIC   0x534c4958u  /* "SLIX" */
#define SEG_INDEX_VERSION 1
enum {
	OF_IDX_Magic = 0,        /* u32 */
	OF_IDX_Version = 4,      /* u16 */
	OF_IDX_Reserved = 6,     /* u16, 0 */
	OF_IDX_BaseOffset = 8,   /* i64 */
	OF_IDX_NextOffset = 16,  /* i64: offset after the last batch */
	OF_IDX_EndPos = 24,      /* u64: bytes of valid batches */
	OF_IDX_MaxTimestamp = 32,/* i64 */
	OF_IDX_NOff = 40,        /* u32 */
	OF_IDX_NTime = 44,       /* u32 */
	OF_IDX_Reserved2 = 48,   /* 12 bytes, 0 */
	OF_IDX_Crc = 60,         /* u32: CRC-32C of the header [0,60) and the entries */
	SEG_INDEX_HEADER_SIZE = 64,
};
#define SEG_INDEX_OFF_ENTRY_SIZE 8
#define SEG_INDEX_TIME_ENTRY_SIZE 16

void seg_index_init(struct seg_index *ix);
void seg_index_fini(struct seg_index *ix);
void seg_index_reset(struct seg_index *ix);

/* Record the batch at `position` with relative base offset and max
 * timestamp if `interval` bytes passed since the last entry (or forced).
 * Returns 0 or -ENOMEM. @thread shard */
int seg_index_add(struct seg_index *ix, uint32_t rel_offset, uint32_t position,
		  int64_t max_timestamp, uint32_t interval, int force);

/* Position of the last indexed batch with rel_offset <= rel (0 if none). */
uint32_t seg_index_lookup(const struct seg_index *ix, uint32_t rel);
/* Position to start scanning for the first batch with max timestamp >= ts. */
uint32_t seg_index_lookup_time(const struct seg_index *ix, int64_t ts);
/* Drop entries at or after position pos (truncation). */
void seg_index_truncate(struct seg_index *ix, uint32_t pos);

struct seg_index_trailer {
	int64_t base_offset;
	int64_t next_offset;
	uint64_t end_pos;
	int64_t max_timestamp;
};

/* The file image of the index with its trailer, in a buffer allocated
 * here (once per segment) that the caller frees; it is written on the
 * shard's ring (storage/file_save.h). 0 or -ENOMEM. @thread shard */
int seg_index_encode(const struct seg_index *ix, const struct seg_index_trailer *tr, uint8_t **out, size_t *len);
/* Load and verify; -EBADMSG if the file is damaged, -ENOENT if absent. */
int seg_index_load(struct seg_index *ix, const char *path, int64_t base_offset,
		   struct seg_index_trailer *tr);

#endif
