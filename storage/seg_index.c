/* storage/seg_index.c — sparse offset and time indexes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/batch.h"
#include "storage/seg_index.h"

void seg_index_init(struct seg_index *ix)
{
	memset(ix, 0, sizeof(*ix));
	ix->last_ts = INT64_MIN;
}

void seg_index_fini(struct seg_index *ix)
{
	free(ix->off);
	free(ix->time);
	memset(ix, 0, sizeof(*ix));
}

void seg_index_reset(struct seg_index *ix)
{
	ix->n_off = ix->n_time = 0;
	ix->last_pos = 0;
	ix->last_ts = INT64_MIN;
}

static int grow(void **arr, uint32_t *cap, size_t elem)
{
	uint32_t ncap = *cap ? *cap * 2 : 16;
	void *n = realloc(*arr, ncap * elem); /* style: allow doubling, O(log n) per segment */

	if (!n)
		return -ENOMEM;
	*arr = n;
	*cap = ncap;
	return 0;
}

int seg_index_add(struct seg_index *ix, uint32_t rel_offset, uint32_t position,
		  int64_t max_timestamp, uint32_t interval, int force)
{
	if (!force && ix->n_off && position - ix->last_pos < interval) {
		/* between entries: only the time index may need the new maximum
		 * when it arrives later, at the next entry. */
		return 0;
	}
	if (ix->n_off == ix->cap_off && grow((void **)&ix->off, &ix->cap_off, sizeof(*ix->off)))
		return -ENOMEM;
	ix->off[ix->n_off++] = (struct offset_entry){ rel_offset, position };
	ix->last_pos = position;
	if (max_timestamp > ix->last_ts) {
		if (ix->n_time == ix->cap_time &&
		    grow((void **)&ix->time, &ix->cap_time, sizeof(*ix->time)))
			return -ENOMEM;
		ix->time[ix->n_time++] = (struct time_entry){ max_timestamp, rel_offset, position };
		ix->last_ts = max_timestamp;
	}
	return 0;
}

uint32_t seg_index_lookup(const struct seg_index *ix, uint32_t rel)
{
	uint32_t lo = 0, hi = ix->n_off;

	/* last entry with rel_offset <= rel */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (ix->off[mid].rel_offset <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? ix->off[lo - 1].position : 0;
}

uint32_t seg_index_lookup_time(const struct seg_index *ix, int64_t ts)
{
	uint32_t lo = 0, hi = ix->n_time;

	/* The time index holds running maxima at sparse points: every batch
	 * before entry i has max timestamp <= time[i-1].timestamp. Start from
	 * the last entry whose running maximum is still < ts; batches before
	 * it cannot qualify. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (ix->time[mid].timestamp < ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? ix->time[lo - 1].position : 0;
}

void seg_index_truncate(struct seg_index *ix, uint32_t pos)
{
	while (ix->n_off && ix->off[ix->n_off - 1].position >= pos)
		ix->n_off--;
	while (ix->n_time && ix->time[ix->n_time - 1].position >= pos)
		ix->n_time--;
	ix->last_pos = ix->n_off ? ix->off[ix->n_off - 1].position : 0;
	ix->last_ts = ix->n_time ? ix->time[ix->n_time - 1].timestamp : INT64_MIN;
}

int seg_index_encode(const struct seg_index *ix, const struct seg_index_trailer *tr, uint8_t **out, size_t *len)
{
	size_t size = SEG_INDEX_HEADER_SIZE + (size_t)ix->n_off * SEG_INDEX_OFF_ENTRY_SIZE +
		      (size_t)ix->n_time * SEG_INDEX_TIME_ENTRY_SIZE;
	uint8_t *buf = calloc(1, size); /* style: allow once per segment */
	uint8_t *p;
	uint32_t crc;

	if (!buf)
		return -ENOMEM;
	be32_store(buf + OF_IDX_Magic, SEG_INDEX_MAGIC);
	be16_store(buf + OF_IDX_Version, SEG_INDEX_VERSION);
	be64_store(buf + OF_IDX_BaseOffset, (uint64_t)tr->base_offset);
	be64_store(buf + OF_IDX_NextOffset, (uint64_t)tr->next_offset);
	be64_store(buf + OF_IDX_EndPos, tr->end_pos);
	be64_store(buf + OF_IDX_MaxTimestamp, (uint64_t)tr->max_timestamp);
	be32_store(buf + OF_IDX_NOff, ix->n_off);
	be32_store(buf + OF_IDX_NTime, ix->n_time);
	p = buf + SEG_INDEX_HEADER_SIZE;
	for (uint32_t i = 0; i < ix->n_off; i++, p += 8) {
		be32_store(p, ix->off[i].rel_offset);
		be32_store(p + 4, ix->off[i].position);
	}
	for (uint32_t i = 0; i < ix->n_time; i++, p += 16) {
		be64_store(p, (uint64_t)ix->time[i].timestamp);
		be32_store(p + 8, ix->time[i].rel_offset);
		be32_store(p + 12, ix->time[i].position);
	}
	crc = batch_crc32c(buf, OF_IDX_Crc);
	crc = crc32_iscsi(buf + SEG_INDEX_HEADER_SIZE, (int)(size - SEG_INDEX_HEADER_SIZE), crc ^ 0xffffffffu) ^ 0xffffffffu;
	be32_store(buf + OF_IDX_Crc, crc);
	*out = buf;
	*len = size;
	return 0;
}

int seg_index_load(struct seg_index *ix, const char *path, int64_t base_offset,
		   struct seg_index_trailer *tr)
{
	uint8_t hdr[SEG_INDEX_HEADER_SIZE], *body = NULL;
	uint32_t n_off, n_time, crc;
	size_t blen;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (pread(fd, hdr, sizeof(hdr), 0) != sizeof(hdr) || /* style: allow start-up: the log opens */
	    be32_load(hdr + OF_IDX_Magic) != SEG_INDEX_MAGIC ||
	    be16_load(hdr + OF_IDX_Version) != SEG_INDEX_VERSION ||
	    (int64_t)be64_load(hdr + OF_IDX_BaseOffset) != base_offset) {
		rc = -EBADMSG;
		goto out;
	}
	n_off = be32_load(hdr + OF_IDX_NOff);
	n_time = be32_load(hdr + OF_IDX_NTime);
	if (n_off > (1u << 28) || n_time > (1u << 28)) {
		rc = -EBADMSG;
		goto out;
	}
	blen = (size_t)n_off * 8 + (size_t)n_time * 16;
	body = malloc(blen ? blen : 1); /* style: allow recovery path */
	if (!body) {
		rc = -ENOMEM;
		goto out;
	}
	if (pread(fd, body, blen, SEG_INDEX_HEADER_SIZE) != (ssize_t)blen) { /* style: allow start-up: the log opens */
		rc = -EBADMSG;
		goto out;
	}
	crc = batch_crc32c(hdr, OF_IDX_Crc);
	crc = crc32_iscsi(body, (int)blen, crc ^ 0xffffffffu) ^ 0xffffffffu;
	if (crc != be32_load(hdr + OF_IDX_Crc)) {
		rc = -EBADMSG;
		goto out;
	}
	seg_index_reset(ix);
	for (uint32_t i = 0; i < n_off; i++) {
		const uint8_t *p = body + (size_t)i * 8;

		if ((rc = seg_index_add(ix, be32_load(p), be32_load(p + 4), INT64_MIN, 0, 1)))
			goto out;
	}
	for (uint32_t i = 0; i < n_time; i++) {
		const uint8_t *p = body + (size_t)n_off * 8 + (size_t)i * 16;

		if (ix->n_time == ix->cap_time &&
		    (rc = grow((void **)&ix->time, &ix->cap_time, sizeof(*ix->time))))
			goto out;
		ix->time[ix->n_time++] = (struct time_entry){
			(int64_t)be64_load(p), be32_load(p + 8), be32_load(p + 12) };
		ix->last_ts = (int64_t)be64_load(p);
	}
	tr->base_offset = base_offset;
	tr->next_offset = (int64_t)be64_load(hdr + OF_IDX_NextOffset);
	tr->end_pos = be64_load(hdr + OF_IDX_EndPos);
	tr->max_timestamp = (int64_t)be64_load(hdr + OF_IDX_MaxTimestamp);
out:
	free(body);
	close(fd);
	return rc;
}
