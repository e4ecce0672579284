/* storage/compact.c — log cleaner: newest record per key wins. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
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

	/* The segment being read (building the map, or rewriting), named by
	 * its base offset: between steps retention may delete it. Its batches
	 * come through rbuf, read on the shard's ring. */
	struct store *st;         /* borrowed: the log's store */
	int phase;                /* PH_MAP, PH_CLEAN */
	int64_t seg_base;         /* -1: none yet */
	uint64_t pos, limit;      /* next batch, end of the segment's batches */
	uint8_t *rbuf;            /* 4 KiB aligned (O_DIRECT) */
	size_t rcap, rlen;
	uint64_t rpos;            /* file position of rbuf[0] */
	/* the rewrite: "<name>.cleaned", written through wbuf */
	int wfd;                  /* -1: none */
	int dirfd;                /* the log's directory, ours while the rewrite lasts (the
				   * ring's renameat resolves it when it runs), -1: none */
	char tmp[64];
	char name[32];            /* the segment's file name */
	uint8_t *wbuf;
	size_t wcap, wlen;
	uint64_t wfile;           /* bytes of the new file written */
	const uint8_t *pend;      /* a kept batch that did not fit wbuf (into rbuf, build or out) */
	size_t pend_n;
	struct seg_index ix;      /* the new segment's index */
	uint64_t opos;            /* its size: bytes kept so far */
	int64_t next, max_ts;
	int wstep;                /* W_BATCHES, W_FLUSH, W_SYNC, W_RENAME, W_SWAP */
	/* the one I/O in flight */
	struct store_call call;
	int io;                   /* 0, or the IO_* in flight */
	int io_res;
	int io_landed;            /* its completion came back, not yet looked at */
	int io_len;               /* bytes asked of a read or write */
	int abandoned;            /* reset during an I/O: free when it lands */
};

enum { PH_MAP = 1, PH_CLEAN };
enum { IO_READ = 1, IO_WRITE, IO_SYNC, IO_RENAME };
enum { W_BATCHES = 0, W_FLUSH, W_SYNC, W_RENAME, W_SWAP };

int compactor_create(struct compactor **out)
{
	struct compactor *cp = calloc(1, sizeof(*cp)); /* style: allow cleaner setup */

	if (!cp)
		return -ENOMEM;
	cp->wfd = -1;
	cp->dirfd = -1;
	cp->seg_base = -1;
	seg_index_init(&cp->ix);
	*out = cp;
	return 0;
}

/* Drop the rewrite in progress: its temporary file goes (it touches no
 * plog: the log may be gone). */
static void rewrite_drop(struct compactor *cp)
{
	if (cp->wfd >= 0) {
		close(cp->wfd);
		cp->wfd = -1;
	}
	if (cp->dirfd >= 0) {
		if (cp->tmp[0])
			unlinkat(cp->dirfd, cp->tmp, 0);
		close(cp->dirfd);
		cp->dirfd = -1;
	}
	cp->tmp[0] = 0;
	seg_index_fini(&cp->ix);
	seg_index_init(&cp->ix);
	cp->wlen = 0;
	cp->pend = NULL;
	cp->pend_n = 0;
}

void compactor_reset(struct compactor *cp);

/* Only with no I/O in flight: its buffers are the kernel's until then. */
static void pass_end(struct compactor *cp)
{
	rewrite_drop(cp);
	free(cp->map);
	free(cp->scratch);
	free(cp->build);
	free(cp->out);
	free(cp->rbuf);
	free(cp->wbuf);
	cp->map = NULL;
	cp->scratch = cp->build = cp->out = cp->rbuf = cp->wbuf = NULL;
	cp->cap = cp->used = 0;
	cp->rlen = 0;
	cp->pl = NULL;
	cp->seg_base = -1;
	cp->abandoned = 0;
}

void compactor_destroy(struct compactor *cp)
{
	if (!cp)
		return;
	compactor_reset(cp);      /* its log may be closed already: not touched */
	if (cp->abandoned)
		return;   /* exiting with an I/O in flight: its buffers stay (the process ends) */
	seg_index_fini(&cp->ix);
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

/* The newest offset of key k, -1: none. The map may be empty (never
 * allocated): a segment the map phase found not yet cleanable (its flush
 * or index still on the ring) may be by the clean phase, and is cleaned
 * against the keys of the segments that were mapped, none at all in a
 * first pass. */
static int64_t map_get(struct compactor *cp, const uint8_t *k, int32_t len)
{
	uint64_t h1, h2;
	struct key_slot *s;

	if (!cp->cap)
		return -1;
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
	/* its index written first (the log's file work, on the ring): an
	 * index write of the old file must not land after the swap */
	if (!s->sealed || s->flushed < s->end || !s->index_saved || s->base_offset >= upto || s == pl->seg_tail)
		return 0;
	/* a response still points into its tail memory, or a read is in
	 * flight: next pass */
	return !plog_segment_busy(pl, s);
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


/* ---- I/O on the shard's ring: one operation in flight at a time -------- */

static void io_done(struct store_call *call, int res)
{
	struct compactor *cp = (struct compactor *)((char *)call - offsetof(struct compactor, call));

	cp->io_res = res;
	cp->io_landed = 1;
	if (cp->abandoned) {
		cp->io = 0;
		cp->io_landed = 0;
		pass_end(cp);
	}
}

static int io_submit(struct compactor *cp, int io, struct io_uring_sqe *sqe, int len)
{
	cp->call.done = io_done;
	cp->io = io;
	cp->io_len = len;
	cp->io_landed = 0;
	store_call_submit(cp->st, sqe, &cp->call);
	return COMPACT_WAIT;
}

static struct segment *segment_by_base(struct plog *pl, int64_t base)
{
	for (struct segment *s = pl->seg_head; s; s = s->next)
		if (s->base_offset == base)
			return s;
	return NULL;
}

/* Read from the block of cp->pos on, as much as rbuf holds (to the
 * segment's end at most), so that `need` bytes at cp->pos are in. */
static int read_at(struct compactor *cp, struct segment *s, size_t need)
{
	uint64_t start = align_down4k(cp->pos);
	size_t want = cp->rcap;
	struct io_uring_sqe *sqe;

	if (cp->pos - start + need > cp->rcap)
		return -EMSGSIZE;
	if (start + want > align_up4k(cp->limit))
		want = align_up4k(cp->limit) - start;
	if (!(sqe = store_sqe(cp->st)))
		return -EBUSY;
	io_uring_prep_read(sqe, s->fd, cp->rbuf, (unsigned)want, start);
	cp->rpos = start;
	cp->rlen = 0;
	return io_submit(cp, IO_READ, sqe, (int)want);
}

static int in_rbuf(const struct compactor *cp, size_t need)
{
	return cp->pos >= cp->rpos && cp->pos + need <= cp->rpos + cp->rlen;
}

/* The next whole batch at cp->pos: 1 and *out (in rbuf), 0 at the
 * segment's end, COMPACT_WAIT (a read was submitted) or -errno. */
static int next_batch(struct compactor *cp, struct segment *s, const uint8_t **out)
{
	const uint8_t *b;
	size_t need;

	if (cp->pos + BATCH_HEADER_SIZE > cp->limit)
		return 0;
	if (!in_rbuf(cp, BATCH_HEADER_SIZE))
		return read_at(cp, s, BATCH_HEADER_SIZE);
	b = cp->rbuf + (cp->pos - cp->rpos);
	if (batch_length(b) < BATCH_HEADER_SIZE - BATCH_LOG_OVERHEAD)
		return -EUCLEAN;
	need = batch_size(b);
	if (cp->pos + need > cp->limit)
		return -EUCLEAN;
	if (!in_rbuf(cp, need))
		return read_at(cp, s, need);
	*out = b;
	return 1;
}

/* A read landed: what rbuf now holds. */
static int read_landed(struct compactor *cp)
{
	if (cp->io_res < 0)
		return cp->io_res;
	cp->rlen = (size_t)cp->io_res;
	if (cp->rpos + cp->rlen < cp->limit && cp->rlen < (size_t)cp->io_len)
		return -EIO;             /* the file ends before its batches do */
	return 0;
}

/* Map phase: every key of a segment's batches (markers and transactional
 * records, which may yet be or have been aborted, never supersede a key). */
static int map_segment(struct compactor *cp, struct compress_ctx *cc, struct segment *s)
{
	const uint8_t *b;
	int rc;

	while ((rc = next_batch(cp, s, &b)) == 1) {
		const uint8_t *rec;
		size_t len;
		struct record_iter it;
		struct record_view rv;

		cp->pos += batch_size(b);
		if (batch_attributes(b) & (BATCH_ATTR_CONTROL | BATCH_ATTR_TRANSACTIONAL))
			continue;
		if (batch_records(cp, cc, b, &rec, &len) < 0)
			continue;     /* undecodable: left as it is */
		record_iter_init(&it, rec, len, batch_records_count(b));
		while (record_iter_next(&it, &rv) == 1)
			if (rv.key && (rc = map_put(cp, rv.key, rv.key_len, batch_base_offset(b) + rv.offset_delta)) < 0)
				return rc;
	}
	return rc;
}

/* Write what waits: wbuf first, then a kept batch too large for it. 0 when
 * nothing waits, COMPACT_WAIT, or -errno. */
static int write_out(struct compactor *cp, int all)
{
	struct io_uring_sqe *sqe;

	if (cp->pend && cp->pend_n <= cp->wcap - cp->wlen) {
		memcpy(cp->wbuf + cp->wlen, cp->pend, cp->pend_n);
		cp->wlen += cp->pend_n;
		cp->pend = NULL;
		cp->pend_n = 0;
	}
	if (!cp->pend && !(all && cp->wlen))
		return 0;
	if (!(sqe = store_sqe(cp->st)))
		return -EBUSY;
	if (cp->wlen) {
		io_uring_prep_write(sqe, cp->wfd, cp->wbuf, (unsigned)cp->wlen, cp->wfile);
		return io_submit(cp, IO_WRITE, sqe, (int)cp->wlen);
	}
	io_uring_prep_write(sqe, cp->wfd, cp->pend, (unsigned)cp->pend_n, cp->wfile);
	return io_submit(cp, IO_WRITE, sqe, (int)cp->pend_n);
}

static int write_landed(struct compactor *cp)
{
	size_t n;

	if (cp->io_res <= 0)
		return cp->io_res < 0 ? cp->io_res : -EIO;
	n = (size_t)cp->io_res;
	cp->wfile += n;
	if (cp->wlen) {
		memmove(cp->wbuf, cp->wbuf + n, cp->wlen - n);
		cp->wlen -= n;
	} else {
		cp->pend += n;
		cp->pend_n -= n;
		if (!cp->pend_n)
			cp->pend = NULL;
	}
	return 0;
}

/* Clean phase, the batches: each kept (rebuilt) batch goes to the index
 * and out through wbuf. */
static int clean_batches(struct compactor *cp, struct plog *pl, struct compress_ctx *cc, struct segment *s,
			 int64_t now_ms)
{
	const uint8_t *b;
	int rc;

	for (;;) {
		const uint8_t *res;
		ssize_t n;

		if ((rc = write_out(cp, 0)) != 0)
			return rc;
		if ((rc = next_batch(cp, s, &b)) != 1)
			return rc;
		n = clean_batch(cp, pl, cc, b, now_ms, &res);
		cp->pos += batch_size(b);
		if (n < 0) {               /* cannot clean it: keep it whole */
			res = b;
			n = batch_size(b);
		}
		if (n == 0)
			continue;
		if (batch_max_timestamp(res) > cp->max_ts)
			cp->max_ts = batch_max_timestamp(res);
		seg_index_add(&cp->ix, (uint32_t)(batch_base_offset(res) - s->base_offset), (uint32_t)cp->opos,
			      cp->max_ts, pl->cfg.index_interval, 0);
		cp->opos += (uint64_t)n;
		cp->next = batch_last_offset(res) + 1;
		cp->pend = res;            /* rbuf, build or out: unchanged until the next batch */
		cp->pend_n = (size_t)n;
	}
}

/* The new segment is renamed over the old: take it in. Runs from a step,
 * so no SQE prepared this turn names the old file descriptor. */
static int clean_swap(struct compactor *cp, struct plog *pl, struct segment *s)
{
	int nfd = openat(cp->dirfd, s->name, O_RDWR | O_DIRECT | O_CLOEXEC);
	int err = nfd < 0 ? -errno : 0;

	cp->tmp[0] = 0;              /* renamed: nothing to unlink any more */
	close(cp->dirfd);
	cp->dirfd = -1;
	if (err)
		return err;
	cp->stats.bytes_before += s->end;
	cp->stats.bytes_after += cp->opos;
	plog_chunks_drop(pl, s);
	close(s->fd);
	s->fd = nfd;
	seg_index_fini(&s->ix);
	s->ix = cp->ix;
	seg_index_init(&cp->ix);
	s->end = s->flushed = s->alloc = cp->opos;
	if (cp->next > s->next_offset)
		s->next_offset = cp->next;    /* never moves back: offsets are not reused */
	s->max_timestamp = cp->max_ts;
	s->index_saved = 0;
	plog_seal_segment(pl, s);
	cp->stats.segments_cleaned++;
	plog_dir_release(pl);
	return 0;
}

/* Rewrite one sealed segment into "<name>.cleaned" and swap it in, a step
 * at a time: the batches (read and written on the ring), the last write,
 * fdatasync, the old index's unlink, the rename (on the ring), the swap.
 * A crash anywhere leaves either the old or the new segment whole, each
 * recovered by a scan if its index is missing. 0 when the segment is done,
 * COMPACT_WAIT, 1 (again later) or -errno. */
static int clean_step(struct compactor *cp, struct plog *pl, struct compress_ctx *cc, struct segment *s,
		      int64_t now_ms)
{
	struct io_uring_sqe *sqe;
	int rc;

	switch (cp->wstep) {
	case W_BATCHES:
		if ((rc = clean_batches(cp, pl, cc, s, now_ms)) != 0)
			return rc;
		cp->wstep = W_FLUSH;
		/* fall through */
	case W_FLUSH:
		if ((rc = write_out(cp, 1)) != 0)
			return rc;
		if (!(sqe = store_sqe(cp->st)))
			return -EBUSY;
		io_uring_prep_fsync(sqe, cp->wfd, IORING_FSYNC_DATASYNC);
		cp->wstep = W_SYNC;
		return io_submit(cp, IO_SYNC, sqe, 0);
	case W_SYNC: {
		char idx[48];

		close(cp->wfd);
		cp->wfd = -1;
		/* the old index goes first: the new data is durable, and without
		 * an index either segment is recovered by a scan */
		snprintf(idx, sizeof(idx), "%020" PRId64 ".index", s->base_offset);
		unlinkat(cp->dirfd, idx, 0);
		if (!(sqe = store_sqe(cp->st)))
			return -EBUSY;
		io_uring_prep_renameat(sqe, cp->dirfd, cp->tmp, cp->dirfd, s->name, 0);
		cp->wstep = W_RENAME;
		return io_submit(cp, IO_RENAME, sqe, 0);
	}
	case W_SWAP:
		/* a response still points into its tail memory, or a read of
		 * the old file is in flight: later */
		if (plog_segment_busy(pl, s))
			return 1;
		return clean_swap(cp, pl, s);
	}
	return -EINVAL;
}

/* Look at the I/O that landed; 0 to go on, or -errno. */
static int io_landed(struct compactor *cp)
{
	int io = cp->io, rc = 0;

	cp->io = 0;
	cp->io_landed = 0;
	switch (io) {
	case IO_READ:
		rc = read_landed(cp);
		break;
	case IO_WRITE:
		rc = write_landed(cp);
		break;
	case IO_SYNC:
		rc = cp->io_res;
		break;
	case IO_RENAME:
		rc = cp->io_res;
		if (!rc)
			cp->wstep = W_SWAP;
		break;
	}
	return rc < 0 ? rc : 0;
}

/* Start on segment s in the current phase. */
static int segment_begin(struct compactor *cp, struct plog *pl, struct segment *s)
{
	cp->seg_base = s->base_offset;
	cp->pos = 0;
	cp->limit = s->end;
	cp->rpos = 0;
	cp->rlen = 0;
	if (cp->phase == PH_CLEAN) {
		snprintf(cp->name, sizeof(cp->name), "%s", s->name);
		snprintf(cp->tmp, sizeof(cp->tmp), "%s.cleaned", s->name);
		cp->dirfd = open(pl->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cp->dirfd < 0) {
			cp->tmp[0] = 0;
			return -errno;
		}
		cp->wfd = openat(cp->dirfd, cp->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (cp->wfd < 0) {
			int rc = -errno;

			cp->tmp[0] = 0;
			rewrite_drop(cp);
			return rc;
		}
		seg_index_fini(&cp->ix);
		seg_index_init(&cp->ix);
		cp->wfile = cp->opos = 0;
		cp->wlen = 0;
		cp->pend = NULL;
		cp->pend_n = 0;
		cp->next = s->base_offset;
		cp->max_ts = INT64_MIN;
		cp->wstep = W_BATCHES;
	}
	return 0;
}

static int pass_start(struct compactor *cp, struct plog *pl)
{
	pass_end(cp);
	cp->pl = pl;
	cp->st = pl->st;
	cp->upto = pl->seg_tail->base_offset;
	cp->next_base = pl->log_start;
	cp->phase = PH_MAP;
	cp->seg_base = -1;
	cp->rcap = align_up4k(pl->cfg.max_batch * 2ull + 8192);
	cp->wcap = cp->rcap;
	cp->scratch = malloc(SCRATCH_CAP);                       /* style: allow cleaner pass */
	cp->build = malloc(SCRATCH_CAP + BATCH_HEADER_SIZE);     /* style: allow cleaner pass */
	cp->out = malloc(SCRATCH_CAP + BATCH_HEADER_SIZE);       /* style: allow cleaner pass */
	cp->wbuf = malloc(cp->wcap);                             /* style: allow cleaner pass */
	if (posix_memalign((void **)&cp->rbuf, 4096, cp->rcap))
		cp->rbuf = NULL;
	if (!cp->scratch || !cp->build || !cp->out || !cp->wbuf || !cp->rbuf) {
		pass_end(cp);
		return -ENOMEM;
	}
	cp->stats.passes++;
	return 0;
}

/* The segment after base (> base; -1: the first) that the phase works on. */
static struct segment *next_segment(struct compactor *cp, struct plog *pl, int64_t after)
{
	struct segment *s;

	for (s = pl->seg_head; s; s = s->next)
		if (s->base_offset > after && (cp->phase == PH_MAP || s->base_offset >= cp->next_base) &&
		    segment_cleanable(pl, s, cp->upto))
			return s;
	return NULL;
}

int compactor_step(struct compactor *cp, struct plog *pl, struct compress_ctx *cc, int64_t now_ms)
{
	struct segment *s;
	int rc;

	if (cp->io && !cp->io_landed)
		return COMPACT_WAIT;
	if (cp->abandoned)
		pass_end(cp);
	if (!pl->cfg.compact || pl->err) {
		if (cp->io)
			io_landed(cp);
		if (cp->pl == pl)
			pass_end(cp);
		return 0;
	}
	if (cp->pl != pl) {
		if (cp->io)
			io_landed(cp);    /* another log's, from a pass that was left */
		/* a new pass: first the map over every sealed segment */
		return (rc = pass_start(cp, pl)) < 0 ? rc : 1;
	}
	if (cp->io && (rc = io_landed(cp)) < 0)
		goto fail;
	if (cp->seg_base < 0) {
		s = next_segment(cp, pl, -1);
		if (!s && cp->phase == PH_MAP) {
			cp->phase = PH_CLEAN;
			return 1;
		}
		if (!s || s->base_offset >= cp->upto) {
			pass_end(cp);
			return 0;
		}
		if ((rc = segment_begin(cp, pl, s)) < 0)
			goto fail;
	} else if (!(s = segment_by_base(pl, cp->seg_base))) {
		/* deleted under the pass (retention): on with the next; a
		 * rewrite renamed in after the deletion goes too */
		if (cp->phase == PH_CLEAN && cp->wstep == W_SWAP)
			unlinkat(cp->dirfd, cp->name, 0);
		rewrite_drop(cp);
		s = NULL;
		rc = 0;
		goto next;
	}
	rc = cp->phase == PH_MAP ? map_segment(cp, cc, s) : clean_step(cp, pl, cc, s, now_ms);
	if (rc == COMPACT_WAIT || rc == 1)
		return rc;
	if (rc < 0)
		goto fail;
next:
	/* this segment is done: the next one, or the next phase */
	{
		int64_t done = cp->seg_base;
		struct segment *n;

		if (cp->phase == PH_CLEAN)
			cp->next_base = done + 1;
		n = next_segment(cp, pl, done);
		if (n && n->base_offset < cp->upto) {
			if ((rc = segment_begin(cp, pl, n)) < 0)
				goto fail;
			return 1;
		}
		if (cp->phase == PH_MAP) {
			cp->phase = PH_CLEAN;
			cp->seg_base = -1;
			return 1;
		}
		pass_end(cp);
		return 0;
	}
fail:
	/* the segment stays as it was */
	pass_end(cp);
	return rc;
}

void compactor_reset(struct compactor *cp)
{
	/* its log may be gone already: not touched again (the temporary
	 * file goes through the rewrite's own directory descriptor) */
	cp->pl = NULL;
	if (cp->io && !cp->io_landed) {
		cp->abandoned = 1;   /* freed when the I/O lands */
		return;
	}
	cp->io = 0;
	cp->io_landed = 0;
	pass_end(cp);
}

int compactor_run(struct compactor *cp, struct plog *pl, struct compress_ctx *cc, int64_t now_ms)
{
	int rc;

	while ((rc = compactor_step(cp, pl, cc, now_ms)) == 1 || rc == COMPACT_WAIT)
		if (rc == COMPACT_WAIT)
			store_poll(pl->st, 1);
	return rc;
}
