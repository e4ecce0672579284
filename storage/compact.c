/* storage/compact.c — log cleaner: newest record per key wins. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/batch.h"
#include "storage/compact.h"
#include "storage/compress.h"
#include "storage/plog.h"
#include "storage/plog_internal.h"

#define SCRATCH_CAP COMPRESS_INFLATE_MAX   /* largest decompressed batch the cleaner handles (Produce refuses larger) */

struct key_slot {
	uint64_t h1, h2;          /* 128-bit key hash; h1 == 0 && h2 == 0: empty */
	int64_t offset;           /* newest offset of the key */
};

struct compactor {
	struct key_slot *map;
	size_t cap, used;
	struct plog *pl;          /* the partition of the pass in progress */
	int64_t upto;             /* segments with base < upto are in the pass */
	int64_t next_base;        /* next segment to rewrite */
	uint8_t *scratch;         /* decompressed records */
	uint8_t *build;           /* the rebuilt batch, uncompressed */
	uint8_t *out;             /* the rebuilt batch, final */
	struct compact_stats stats;
};

int compactor_create(struct compactor **out)
{
	struct compactor *cp = calloc(1, sizeof(*cp)); /* style: allow cleaner setup */

	if (!cp)
		return -ENOMEM;
	*out = cp;
	return 0;
}

static void pass_end(struct compactor *cp)
{
	free(cp->map);
	free(cp->scratch);
	free(cp->build);
	free(cp->out);
	cp->map = NULL;
	cp->scratch = cp->build = cp->out = NULL;
	cp->cap = cp->used = 0;
	cp->pl = NULL;
}

void compactor_destroy(struct compactor *cp)
{
	if (!cp)
		return;
	pass_end(cp);
	free(cp);
}

const struct compact_stats *compactor_stats(const struct compactor *cp)
{
	return &cp->stats;
}

static void key_hash(const uint8_t *k, int32_t len, uint64_t *h1, uint64_t *h2)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (int32_t i = 0; i < len; i++)
		h = (h ^ k[i]) * 0x100000001b3ull;
	*h1 = h | 1;    /* never the empty marker */
	*h2 = ((uint64_t)batch_crc32c(k, (size_t)len) << 32) | (uint32_t)len;
}

static struct key_slot *map_find(struct compactor *cp, uint64_t h1, uint64_t h2)
{
	size_t i = (size_t)(h1 ^ (h2 >> 7)) & (cp->cap - 1);

	for (;; i = (i + 1) & (cp->cap - 1)) {
		struct key_slot *s = &cp->map[i];

		if ((s->h1 == h1 && s->h2 == h2) || (!s->h1 && !s->h2))
			return s;
	}
}

static int map_put(struct compactor *cp, const uint8_t *k, int32_t len, int64_t offset)
{
	uint64_t h1, h2;
	struct key_slot *s;

	if ((cp->used + 1) * 10 > cp->cap * 7) {
		struct key_slot *old = cp->map;
		size_t ocap = cp->cap;

		cp->cap = ocap ? ocap * 2 : 4096;
		cp->map = calloc(cp->cap, sizeof(*cp->map)); /* style: allow cleaner map growth */
		if (!cp->map) {
			cp->map = old;
			cp->cap = ocap;
			return -ENOMEM;
		}
		for (size_t i = 0; i < ocap; i++)
			if (old[i].h1 || old[i].h2)
				*map_find(cp, old[i].h1, old[i].h2) = old[i];
		free(old);
	}
	key_hash(k, len, &h1, &h2);
	s = map_find(cp, h1, h2);
	if (!s->h1 && !s->h2) {
		s->h1 = h1;
		s->h2 = h2;
		cp->used++;
	}
	if (offset > s->offset)
		s->offset = offset;
	return 0;
}

static int64_t map_get(struct compactor *cp, const uint8_t *k, int32_t len)
{
	uint64_t h1, h2;
	struct key_slot *s;

	key_hash(k, len, &h1, &h2);
	s = map_find(cp, h1, h2);
	return (s->h1 || s->h2) ? s->offset : -1;
}

/* The records section of a batch, decompressed if needed. */
static int batch_records(struct compactor *cp, struct compress_ctx *cc, const uint8_t *b,
			 const uint8_t **rec, size_t *len)
{
	int codec = batch_attributes(b) & BATCH_ATTR_CODEC_MASK;
	ssize_t n;

	if (!codec) {
		*rec = b + OF_Records;
		*len = batch_size(b) - OF_Records;
		return 0;
	}
	n = compress_decode(cc, codec, b + OF_Records, batch_size(b) - OF_Records, cp->scratch, SCRATCH_CAP);
	if (n < 0)
		return (int)n;
	*rec = cp->scratch;
	*len = (size_t)n;
	return 0;
}

static int segment_cleanable(const struct plog *pl, const struct segment *s, int64_t upto)
{
	if (!s->sealed || s->flushed < s->end || s->base_offset >= upto || s == pl->seg_tail)
		return 0;
	/* a response still points into its tail memory: next pass */
	for (const struct tail_chunk *c = pl->chunk_head; c; c = c->next)
		if (c->seg == s && c->refs)
			return 0;
	return 1;
}

static int build_map(struct compactor *cp, struct plog *pl, struct compress_ctx *cc)
{
	for (struct segment *s = pl->seg_head; s; s = s->next) {
		struct seg_scan sc;
		const uint8_t *b;
		int err, rc;

		if (!segment_cleanable(pl, s, cp->upto))
			continue;
		if ((rc = seg_scan_init(&sc, s->fd, 0, s->end, align_up4k(pl->cfg.max_batch * 2ull + 8192))) < 0)
			return rc;
		while ((b = seg_scan_peek(&sc, BATCH_HEADER_SIZE, &err)) &&
		       (b = seg_scan_peek(&sc, batch_size(b), &err))) {
			const uint8_t *rec;
			size_t len;
			struct record_iter it;
			struct record_view rv;

			sc.pos += batch_size(b);
			/* markers, and transactional records (which may yet be or
			 * have been aborted), never supersede a key */
			if (batch_attributes(b) & (BATCH_ATTR_CONTROL | BATCH_ATTR_TRANSACTIONAL))
				continue;
			if (batch_records(cp, cc, b, &rec, &len) < 0)
				continue;     /* undecodable: left as it is */
			record_iter_init(&it, rec, len, batch_records_count(b));
			while (record_iter_next(&it, &rv) == 1)
				if (rv.key && (rc = map_put(cp, rv.key, rv.key_len,
							    batch_base_offset(b) + rv.offset_delta)) < 0) {
					seg_scan_fini(&sc);
					return rc;
				}
		}
		seg_scan_fini(&sc);
		if (err)
			return err;
	}
	return 0;
}

/* Rebuild batch b with only the records to keep. Returns the new size, 0 to
 * drop it entirely, or -errno (the batch is then kept as it is). */
static ssize_t clean_batch(struct compactor *cp, struct plog *pl, struct compress_ctx *cc,
			   const uint8_t *b, int64_t now_ms, const uint8_t **res)
{
	int codec = batch_attributes(b) & BATCH_ATTR_CODEC_MASK;
	const uint8_t *rec;
	size_t len;
	struct record_iter it;
	struct record_view rv;
	struct batch_builder bb;
	int32_t kept = 0, total = 0;
	ssize_t n;
	int rc;

	*res = b;
	if (batch_attributes(b) & (BATCH_ATTR_CONTROL | BATCH_ATTR_TRANSACTIONAL))
		return batch_size(b);   /* kept whole: markers and transactions stay consistent */
	if ((rc = batch_records(cp, cc, b, &rec, &len)) < 0)
		return rc;
	batch_builder_init(&bb, cp->build, SCRATCH_CAP + BATCH_HEADER_SIZE, batch_base_timestamp(b));
	record_iter_init(&it, rec, len, batch_records_count(b));
	while ((rc = record_iter_next(&it, &rv)) == 1) {
		int64_t off = batch_base_offset(b) + rv.offset_delta;
		int keep = 1;

		total++;
		if (rv.key && map_get(cp, rv.key, rv.key_len) > off)
			keep = 0;             /* a newer record of the key exists */
		else if (rv.key && !rv.value &&
			 batch_base_timestamp(b) + rv.timestamp_delta < now_ms - pl->cfg.delete_retention_ms) {
			keep = 0;             /* an old enough tombstone */
			cp->stats.tombstones_removed++;
		}
		if (keep) {
			if (batch_builder_add_raw(&bb, &rv) < 0)
				return -ENOBUFS;
			kept++;
		}
	}
	if (rc < 0)
		return rc;
	cp->stats.records_kept += (uint64_t)kept;
	cp->stats.records_removed += (uint64_t)(total - kept);
	if (kept == total)
		return batch_size(b);
	if (!kept)
		return 0;
	n = batch_builder_finish(&bb, batch_attributes(b), batch_last_offset_delta(b), batch_producer_id(b),
				 batch_producer_epoch(b), batch_base_sequence(b));
	if (n < 0)
		return n;
	be64_store(cp->build + OF_MaxTimestamp, (uint64_t)batch_max_timestamp(b));
	if (codec) {
		ssize_t c = compress_encode(cc, codec, cp->build + OF_Records, (size_t)n - OF_Records,
					    cp->out + OF_Records, SCRATCH_CAP);

		if (c < 0)
			return c;
		memcpy(cp->out, cp->build, OF_Records);
		n = OF_Records + c;
		be32_store(cp->out + OF_BatchLength, (uint32_t)(n - BATCH_LOG_OVERHEAD));
		*res = cp->out;
	} else {
		*res = cp->build;
	}
	{
		uint8_t *o = (uint8_t *)*res;

		batch_set_base_offset(o, batch_base_offset(b));
		batch_set_leader_epoch(o, batch_leader_epoch(b));
		be32_store(o + OF_Crc, batch_compute_crc(o, (uint32_t)n));
	}
	return n;
}

/* Rewrite one sealed segment into "<name>.cleaned" and swap it in. */
static int clean_segment(struct compactor *cp, struct plog *pl, struct segment *s,
			 struct compress_ctx *cc, int64_t now_ms)
{
	char tmp[64];
	struct seg_scan sc;
	struct seg_index ix;
	const uint8_t *b;
	uint64_t pos = 0;
	int64_t next = s->base_offset;
	int64_t max_ts = INT64_MIN;
	int fd, nfd, err = 0, rc;

	snprintf(tmp, sizeof(tmp), "%s.cleaned", s->name);
	fd = openat(plog_dirfd(pl), tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	seg_index_init(&ix);
	if ((rc = seg_scan_init(&sc, s->fd, 0, s->end, align_up4k(pl->cfg.max_batch * 2ull + 8192))) < 0)
		goto fail;
	while ((b = seg_scan_peek(&sc, BATCH_HEADER_SIZE, &err)) &&
	       (b = seg_scan_peek(&sc, batch_size(b), &err))) {
		const uint8_t *res;
		ssize_t n = clean_batch(cp, pl, cc, b, now_ms, &res);

		sc.pos += batch_size(b);
		if (n < 0) {               /* cannot clean it: keep it whole */
			res = b;
			n = batch_size(b);
		}
		if (n == 0)
			continue;
		if (pwrite(fd, res, (size_t)n, (off_t)pos) != n) { /* style: allow blocking: the cleaner, not yet on the ring */
			rc = -EIO;
			goto fail_scan;
		}
		if (batch_max_timestamp(res) > max_ts)
			max_ts = batch_max_timestamp(res);
		seg_index_add(&ix, (uint32_t)(batch_base_offset(res) - s->base_offset), (uint32_t)pos,
			      max_ts, pl->cfg.index_interval, 0);
		pos += (uint64_t)n;
		next = batch_last_offset(res) + 1;
	}
	if (err) {
		rc = err;
		goto fail_scan;
	}
	seg_scan_fini(&sc);
	if (fdatasync(fd) < 0) { /* style: allow blocking: the cleaner, not yet on the ring */
		rc = -errno;
		goto fail;
	}
	close(fd);
	fd = -1;
	/* Swap: the old index goes first, so a crash anywhere leaves either the
	 * old or the new segment, each recovered by a scan if its index is
	 * missing. */
	{
		char idx[48];

		snprintf(idx, sizeof(idx), "%020" PRId64 ".index", s->base_offset);
		unlinkat(plog_dirfd(pl), idx, 0);
	}
	if (renameat(plog_dirfd(pl), tmp, plog_dirfd(pl), s->name) < 0) {
		rc = -errno;
		goto fail;
	}
	nfd = openat(plog_dirfd(pl), s->name, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (nfd < 0)
		return -errno;
	cp->stats.bytes_before += s->end;
	cp->stats.bytes_after += pos;
	plog_chunks_drop(pl, s);
	close(s->fd);
	s->fd = nfd;
	seg_index_fini(&s->ix);
	s->ix = ix;
	s->end = s->flushed = s->alloc = pos;
	if (next > s->next_offset)
		s->next_offset = next;    /* never moves back: offsets are not reused */
	s->max_timestamp = max_ts;
	s->index_saved = 0;
	segment_seal_index(pl, s);
	cp->stats.segments_cleaned++;
	plog_dir_release(pl);
	return 0;
fail_scan:
	seg_scan_fini(&sc);
fail:
	seg_index_fini(&ix);
	if (fd >= 0)
		close(fd);
	unlinkat(plog_dirfd(pl), tmp, 0);
	return rc;
}

int compactor_step(struct compactor *cp, struct plog *pl, struct compress_ctx *cc, int64_t now_ms)
{
	struct segment *s;
	int rc;

	if (!pl->cfg.compact || pl->err)
		return 0;
	if (cp->pl != pl) {
		/* a new pass: the map over every sealed segment */
		pass_end(cp);
		cp->pl = pl;
		cp->upto = pl->seg_tail->base_offset;
		cp->next_base = pl->log_start;
		cp->scratch = malloc(SCRATCH_CAP);                       /* style: allow cleaner pass */
		cp->build = malloc(SCRATCH_CAP + BATCH_HEADER_SIZE);     /* style: allow cleaner pass */
		cp->out = malloc(SCRATCH_CAP + BATCH_HEADER_SIZE);       /* style: allow cleaner pass */
		if (!cp->scratch || !cp->build || !cp->out) {
			pass_end(cp);
			return -ENOMEM;
		}
		cp->stats.passes++;
		if ((rc = build_map(cp, pl, cc)) < 0) {
			pass_end(cp);
			return rc;
		}
		return 1;
	}
	for (s = pl->seg_head; s && (s->base_offset < cp->next_base || !segment_cleanable(pl, s, cp->upto));
	     s = s->next)
		;
	if (!s || s->base_offset >= cp->upto) {
		pass_end(cp);
		return 0;
	}
	cp->next_base = s->base_offset + 1;
	rc = clean_segment(cp, pl, s, cc, now_ms);
	if (rc < 0) {
		pass_end(cp);
		return rc;
	}
	return 1;
}

void compactor_reset(struct compactor *cp)
{
	pass_end(cp);
}

int compactor_run(struct compactor *cp, struct plog *pl, struct compress_ctx *cc, int64_t now_ms)
{
	int rc;

	while ((rc = compactor_step(cp, pl, cc, now_ms)) == 1)
		;
	return rc;
}
