/* storage/compress.c — Kafka record-batch codecs over isa-l, snappy, LZ4F
 * and zstd. See compress.h for the framing each codec uses on the wire.
 */
#include "storage/compress.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/igzip_lib.h>
#include <lz4frame.h>
#include <snappy-c.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_initStatic*: fixed workspaces */
#include <zstd.h>
#include <zstd_errors.h>

/* xerial snappy-java stream header: magic, int32 BE version, int32 BE
 * minimum compatible version. */
#define XERIAL_MAGIC "\x82SNAPPY\0"
#define XERIAL_MAGIC_LEN 8
#define XERIAL_HDR_LEN 16
#define XERIAL_VERSION 1
#define XERIAL_COMPAT 1
#define XERIAL_BLOCK (32 * 1024) /* snappy-java DEFAULT_BLOCK_SIZE */

/* gzip deflate worst case (isa-l falls back to stored blocks): 10-byte
 * header, 8-byte trailer, 5 bytes per stored block of up to 65535. */
#define GZIP_WRAP_LEN 18
#define DEFLATE_STORED_MAX 65535
#define DEFLATE_STORED_HDR 5

#define ZSTD_LEVEL 3

/* LZ4 frame as Kafka's Java KafkaLZ4BlockOutputStream writes it and its
 * KafkaLZ4BlockInputStream requires: 64 KiB independent blocks, no
 * checksums, no content size. autoFlush: each update emits whole blocks, so
 * the cctx never buffers input. */
static const LZ4F_preferences_t lz4_kafka_prefs = {
	.frameInfo = {
		.blockSizeID = LZ4F_max64KB,
		.blockMode = LZ4F_blockIndependent,
		.contentChecksumFlag = LZ4F_noContentChecksum,
		.blockChecksumFlag = LZ4F_noBlockChecksum,
	},
	.autoFlush = 1,
};
#define LZ4_KAFKA_BLOCK (64 * 1024)

struct compress_ctx {
	/* Everything below is touched only by the owning shard thread. */
	struct isal_zstream gz_enc;   /* reinitialised per call */
	struct inflate_state gz_dec;  /* reinitialised per call */
	uint8_t *gz_level_buf;        /* isa-l level 1 working memory */
	uint32_t gz_level_buf_size;

	LZ4F_cctx *lz4_enc;           /* tmp buffers grown once at create */
	LZ4F_dctx *lz4_dec;           /* grown to 4 MiB linked blocks at create */

	ZSTD_CCtx *zstd_enc;          /* static: lives inside zstd_enc_mem */
	ZSTD_DCtx *zstd_dec;          /* static: lives inside zstd_dec_mem */
	void *zstd_enc_mem;
	void *zstd_dec_mem;

	/* One encoded block (snappy or lz4) when out has less room than the
	 * block's bound; also the 1-byte probe when a decoder fills out. */
	uint8_t *scratch;
	size_t scratch_cap;

	/* compress_decode_stream: a static streaming zstd decoder (window up
	 * to 2^COMPRESS_ZSTD_WLOG) and the output window, SNAPPY_HIST bytes
	 * longer than COMPRESS_WINDOW for the snappy history. */
	ZSTD_DStream *zstd_stream;   /* static: lives inside zstd_stream_mem */
	void *zstd_stream_mem;
	uint8_t *win;
};

#define SNAPPY_HIST (64u << 10)
#define WIN_CAP (COMPRESS_WINDOW + SNAPPY_HIST)
/* gzip, lz4 and zstd hand out pieces of at most 128 KiB, so that what the
 * decoder just wrote is still in cache when the sink reads it; snappy's
 * blocks use the whole window */
#define STREAM_PIECE (128u << 10)

static inline void store_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint32_t load_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

const char *compress_codec_name(int codec)
{
	switch (codec) {
	case COMPRESS_NONE: return "none";
	case COMPRESS_GZIP: return "gzip";
	case COMPRESS_SNAPPY: return "snappy";
	case COMPRESS_LZ4: return "lz4";
	case COMPRESS_ZSTD: return "zstd";
	default: return "unknown";
	}
}

static size_t snappy_frame_bound(size_t in_len)
{
	size_t full = in_len / XERIAL_BLOCK, tail = in_len % XERIAL_BLOCK;
	size_t n = XERIAL_HDR_LEN + full * (4 + snappy_max_compressed_length(XERIAL_BLOCK));

	if (tail)
		n += 4 + snappy_max_compressed_length(tail);
	return n;
}

size_t compress_bound(int codec, size_t in_len)
{
	if (in_len > COMPRESS_MAX_LEN)
		return 0;
	switch (codec) {
	case COMPRESS_NONE:
		return in_len;
	case COMPRESS_GZIP: {
		size_t blocks = in_len ? (in_len + DEFLATE_STORED_MAX - 1) / DEFLATE_STORED_MAX : 1;

		return in_len + blocks * DEFLATE_STORED_HDR + GZIP_WRAP_LEN;
	}
	case COMPRESS_SNAPPY:
		return snappy_frame_bound(in_len);
	case COMPRESS_LZ4:
		return LZ4F_compressFrameBound(in_len, &lz4_kafka_prefs);
	case COMPRESS_ZSTD:
		return ZSTD_compressBound(in_len);
	default:
		return 0;
	}
}

/* ---- none ---- */

static ssize_t copy_plain(const void *in, size_t in_len, void *out, size_t out_cap)
{
	if (in_len > out_cap)
		return -ENOBUFS;
	if (in_len)
		memcpy(out, in, in_len);
	return (ssize_t)in_len;
}

/* ---- gzip (isa-l igzip) ---- */

static ssize_t gzip_encode(struct compress_ctx *ctx, const void *in, size_t in_len,
			   void *out, size_t out_cap)
{
	struct isal_zstream *s = &ctx->gz_enc;
	size_t cap = out_cap > UINT32_MAX ? UINT32_MAX : out_cap;
	int rc;

	isal_deflate_stateless_init(s);
	s->level = 1;
	s->level_buf = ctx->gz_level_buf;
	s->level_buf_size = ctx->gz_level_buf_size;
	s->gzip_flag = IGZIP_GZIP;
	s->flush = NO_FLUSH;
	s->end_of_stream = 1;
	s->next_in = (uint8_t *)in; /* isa-l takes non-const; it only reads */
	s->avail_in = (uint32_t)in_len;
	s->next_out = out;
	s->avail_out = (uint32_t)cap;
	rc = isal_deflate_stateless(s);
	if (rc == STATELESS_OVERFLOW)
		return -ENOBUFS;
	if (rc != COMP_OK || s->avail_in != 0)
		return -EIO; /* isa-l refused its arguments: not expected */
	return (ssize_t)(cap - s->avail_out);
}

static void gzip_dec_start(struct inflate_state *st)
{
	isal_inflate_init(st);
	st->crc_flag = ISAL_GZIP; /* parse RFC 1952 header, verify CRC32 */
}

static ssize_t gzip_decode(struct compress_ctx *ctx, const void *in, size_t in_len,
			   void *out, size_t out_cap)
{
	struct inflate_state *st = &ctx->gz_dec;
	size_t cap = out_cap > UINT32_MAX ? UINT32_MAX : out_cap;
	bool probing = false; /* out is full; decoding into ctx->scratch[0] */
	size_t produced = 0;

	gzip_dec_start(st);
	st->next_in = (uint8_t *)in; /* isa-l takes non-const; it only reads */
	st->avail_in = (uint32_t)in_len;
	st->next_out = out;
	st->avail_out = (uint32_t)cap;

	for (;;) {
		uint32_t in_before = st->avail_in, out_before = st->avail_out;
		int rc;

		if (!probing && st->avail_out == 0) {
			probing = true;
			st->next_out = ctx->scratch;
			st->avail_out = 1;
			continue;
		}
		rc = isal_inflate(st);
		if (rc < 0)
			return -EBADMSG;
		if (probing && st->avail_out == 0)
			return -ENOBUFS; /* a byte beyond out_cap exists */
		if (!probing)
			produced = cap - st->avail_out;

		if (st->block_state == ISAL_BLOCK_FINISH) {
			uint8_t *next_in = st->next_in, *next_out = st->next_out;
			uint32_t avail_in = st->avail_in, avail_out = st->avail_out;

			if (avail_in == 0)
				return (ssize_t)produced;
			/* Another member follows (RFC 1952 allows a series);
			 * anything else is trailing garbage and fails its header. */
			gzip_dec_start(st);
			st->next_in = next_in;
			st->avail_in = avail_in;
			st->next_out = next_out;
			st->avail_out = avail_out;
			continue;
		}
		/* No progress with room to write: the member is truncated. */
		if (st->avail_in == in_before && st->avail_out == out_before)
			return -EBADMSG;
	}
}

/* ---- snappy (xerial framing out; xerial or raw in) ---- */

static ssize_t snappy_encode(struct compress_ctx *ctx, const void *in, size_t in_len,
			     void *out, size_t out_cap)
{
	const char *src = in;
	uint8_t *dst = out;
	size_t pos = 0, used = XERIAL_HDR_LEN;

	if (out_cap < XERIAL_HDR_LEN)
		return -ENOBUFS;
	memcpy(dst, XERIAL_MAGIC, XERIAL_MAGIC_LEN);
	store_be32(dst + 8, XERIAL_VERSION);
	store_be32(dst + 12, XERIAL_COMPAT);

	while (pos < in_len) {
		size_t chunk = in_len - pos < XERIAL_BLOCK ? in_len - pos : XERIAL_BLOCK;
		size_t need = snappy_max_compressed_length(chunk);
		size_t room = out_cap - used;
		size_t clen = need;
		char *blk;

		if (room < 4)
			return -ENOBUFS;
		/* Compress in place when the block's bound fits, else via scratch. */
		blk = room - 4 >= need ? (char *)dst + used + 4 : (char *)ctx->scratch;
		if (snappy_compress(src + pos, chunk, blk, &clen) != SNAPPY_OK)
			return -ENOBUFS;
		if (clen > room - 4)
			return -ENOBUFS;
		if (blk == (char *)ctx->scratch)
			memcpy(dst + used + 4, blk, clen);
		store_be32(dst + used, (uint32_t)clen);
		used += 4 + clen;
		pos += chunk;
	}
	return (ssize_t)used;
}

/* One raw snappy block into out[0..out_cap). */
static ssize_t snappy_raw_decode(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap)
{
	size_t n;

	if (snappy_uncompressed_length((const char *)in, in_len, &n) != SNAPPY_OK)
		return -EBADMSG;
	if (n > out_cap) {
		/* Tell a bomb from garbage claiming a huge length: validation
		 * writes nothing, and runs only on this rejecting path. */
		if (snappy_validate_compressed_buffer((const char *)in, in_len) != SNAPPY_OK)
			return -EBADMSG;
		return -ENOBUFS;
	}
	if (snappy_uncompress((const char *)in, in_len, (char *)out, &n) != SNAPPY_OK)
		return -EBADMSG;
	return (ssize_t)n;
}

static bool xerial_header_at(const uint8_t *p, size_t len)
{
	return len >= XERIAL_MAGIC_LEN && memcmp(p, XERIAL_MAGIC, XERIAL_MAGIC_LEN) == 0;
}

/* The next snappy block of a xerial stream (snappy-java's framing) from
 * *pos: 1 with *block and *blen set and *pos past it, 0 at the end,
 * -EBADMSG when the framing lies. A concatenated stream's header where a
 * length should be is skipped, as snappy-java reads it (its first byte 0x82
 * makes the int32 negative). *pos starts past the first header. */
static int xerial_next(const uint8_t *src, size_t in_len, size_t *pos, const uint8_t **block, uint32_t *blen)
{
	while (*pos < in_len) {
		if (in_len - *pos < 4)
			return -EBADMSG;
		if (xerial_header_at(src + *pos, in_len - *pos)) {
			if (in_len - *pos < XERIAL_HDR_LEN)
				return -EBADMSG;
			*pos += XERIAL_HDR_LEN;
			continue;
		}
		*blen = load_be32(src + *pos);
		*pos += 4;
		if (*blen == 0 || *blen > in_len - *pos)
			return -EBADMSG;
		*block = src + *pos;
		*pos += *blen;
		return 1;
	}
	return 0;
}

static ssize_t snappy_decode(const void *in, size_t in_len, void *out, size_t out_cap)
{
	const uint8_t *src = in, *block;
	uint8_t *dst = out;
	size_t pos = XERIAL_HDR_LEN, used = 0;
	uint32_t blen;
	int rc;

	/* As snappy-java and librdkafka: no magic means one raw snappy block. */
	if (!xerial_header_at(src, in_len))
		return snappy_raw_decode(src, in_len, dst, out_cap);
	if (in_len < XERIAL_HDR_LEN)
		return -EBADMSG;
	while ((rc = xerial_next(src, in_len, &pos, &block, &blen)) > 0) {
		ssize_t n = snappy_raw_decode(block, blen, dst + used, out_cap - used);

		if (n < 0)
			return n;
		used += (size_t)n;
	}
	return rc < 0 ? rc : (ssize_t)used;
}

/* ---- lz4 (LZ4 frame) ---- */

/* Copy an encoded piece from scratch to out+*used if it fits. */
static int put_piece(uint8_t *out, size_t out_cap, size_t *used, const void *p, size_t n)
{
	if (n > out_cap - *used)
		return -ENOBUFS;
	memcpy(out + *used, p, n);
	*used += n;
	return 0;
}

static ssize_t lz4_encode(struct compress_ctx *ctx, const void *in, size_t in_len,
			  void *out, size_t out_cap)
{
	const uint8_t *src = in;
	uint8_t *dst = out;
	size_t pos = 0, used = 0, r;
	size_t end_bound = LZ4F_compressBound(0, &lz4_kafka_prefs);

	/* Header: at most LZ4F_HEADER_SIZE_MAX bytes. */
	if (out_cap >= LZ4F_HEADER_SIZE_MAX) {
		r = LZ4F_compressBegin(ctx->lz4_enc, dst, out_cap, &lz4_kafka_prefs);
		if (LZ4F_isError(r))
			return -ENOBUFS;
		used = r;
	} else {
		r = LZ4F_compressBegin(ctx->lz4_enc, ctx->scratch, ctx->scratch_cap, &lz4_kafka_prefs);
		if (LZ4F_isError(r) || put_piece(dst, out_cap, &used, ctx->scratch, r) < 0)
			return -ENOBUFS;
	}

	/* One block per update (autoFlush), each written straight into out when
	 * its bound fits, else staged in scratch. */
	while (pos < in_len) {
		size_t chunk = in_len - pos < LZ4_KAFKA_BLOCK ? in_len - pos : LZ4_KAFKA_BLOCK;
		size_t need = LZ4F_compressBound(chunk, &lz4_kafka_prefs);

		if (out_cap - used >= need) {
			r = LZ4F_compressUpdate(ctx->lz4_enc, dst + used, out_cap - used,
						src + pos, chunk, NULL);
			if (LZ4F_isError(r))
				return -ENOBUFS;
			used += r;
		} else {
			r = LZ4F_compressUpdate(ctx->lz4_enc, ctx->scratch, ctx->scratch_cap,
						src + pos, chunk, NULL);
			if (LZ4F_isError(r) || put_piece(dst, out_cap, &used, ctx->scratch, r) < 0)
				return -ENOBUFS;
		}
		pos += chunk;
	}

	if (out_cap - used >= end_bound) {
		r = LZ4F_compressEnd(ctx->lz4_enc, dst + used, out_cap - used, NULL);
		if (LZ4F_isError(r))
			return -ENOBUFS;
		used += r;
	} else {
		r = LZ4F_compressEnd(ctx->lz4_enc, ctx->scratch, ctx->scratch_cap, NULL);
		if (LZ4F_isError(r) || put_piece(dst, out_cap, &used, ctx->scratch, r) < 0)
			return -ENOBUFS;
	}
	return (ssize_t)used;
}

static ssize_t lz4_decode(struct compress_ctx *ctx, const void *in, size_t in_len,
			  void *out, size_t out_cap)
{
	const uint8_t *src = in;
	uint8_t *dst = out;
	size_t src_left = in_len, used = 0;
	bool probing = false; /* out is full; decoding into ctx->scratch[0] */
	ssize_t ret;

	LZ4F_resetDecompressionContext(ctx->lz4_dec);
	for (;;) {
		size_t s = src_left;
		size_t d = probing ? 1 : out_cap - used;
		uint8_t *to = probing ? ctx->scratch : dst + used;
		size_t hint;

		if (d == 0) {
			probing = true;
			continue;
		}
		hint = LZ4F_decompress(ctx->lz4_dec, to, &d, src, &s, NULL);
		if (LZ4F_isError(hint)) {
			ret = -EBADMSG;
			break;
		}
		if (probing && d > 0) {
			ret = -ENOBUFS; /* a byte beyond out_cap exists */
			break;
		}
		src += s;
		src_left -= s;
		used += d;
		/* hint 0: the frame is decoded and flushed; more input must be
		 * another frame (LZ4F starts one by itself). */
		if (hint == 0 && src_left == 0)
			return (ssize_t)used;
		if (s == 0 && d == 0 && hint != 0) {
			ret = -EBADMSG; /* truncated: the frame wants more input */
			break;
		}
	}
	LZ4F_resetDecompressionContext(ctx->lz4_dec);
	return ret;
}

/* ---- zstd ---- */

static ssize_t zstd_encode(struct compress_ctx *ctx, const void *in, size_t in_len,
			   void *out, size_t out_cap)
{
	size_t r = ZSTD_compressCCtx(ctx->zstd_enc, out, out_cap, in, in_len, ZSTD_LEVEL);

	if (ZSTD_isError(r))
		return ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ? -ENOBUFS : -EIO; /* not expected */
	return (ssize_t)r;
}

/* One-shot decode into out: it needs no content size (it stops at the end
 * of the last block) and no window buffer (the window is out itself), so it
 * handles frames from the streaming API without allocating anything sized
 * by the frame header. Concatenated and skippable frames are accepted. */
static ssize_t zstd_decode(struct compress_ctx *ctx, const void *in, size_t in_len,
			   void *out, size_t out_cap)
{
	size_t r = ZSTD_decompressDCtx(ctx->zstd_dec, out, out_cap, in, in_len);

	if (ZSTD_isError(r))
		return ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ? -ENOBUFS : -EBADMSG;
	return (ssize_t)r;
}

/* ---- streaming decode (compress_decode_stream) ---- */

struct dstream {
	compress_sink_fn sink;
	void *arg;
	size_t total;
	size_t limit;
};

static int emit(struct dstream *ds, const uint8_t *p, size_t n)
{
	if (n > ds->limit - ds->total)
		return -ENOBUFS;
	ds->total += n;
	return ds->sink(ds->arg, p, n);
}

static int gzip_stream(struct compress_ctx *ctx, const uint8_t *in, size_t in_len, struct dstream *ds)
{
	struct inflate_state *st = &ctx->gz_dec;
	int rc;

	gzip_dec_start(st);
	st->next_in = (uint8_t *)in; /* isa-l takes non-const; it only reads */
	st->avail_in = (uint32_t)in_len;
	for (;;) {
		uint32_t in_before = st->avail_in;
		size_t produced;

		st->next_out = ctx->win; /* isa-l keeps its own 32 KiB history */
		st->avail_out = STREAM_PIECE;
		if (isal_inflate(st) < 0)
			return -EBADMSG;
		produced = STREAM_PIECE - st->avail_out;
		if (produced && (rc = emit(ds, ctx->win, produced)) < 0)
			return rc;
		if (st->block_state == ISAL_BLOCK_FINISH) {
			uint8_t *next_in = st->next_in;
			uint32_t avail_in = st->avail_in;

			if (avail_in == 0)
				return 0;
			gzip_dec_start(st); /* another member, or garbage */
			st->next_in = next_in;
			st->avail_in = avail_in;
			continue;
		}
		if (!produced && st->avail_in == in_before)
			return -EBADMSG; /* truncated */
	}
}

static int lz4_stream(struct compress_ctx *ctx, const uint8_t *src, size_t src_left, struct dstream *ds)
{
	int rc = 0;

	LZ4F_resetDecompressionContext(ctx->lz4_dec);
	for (;;) {
		size_t s = src_left, d = STREAM_PIECE;
		size_t hint = LZ4F_decompress(ctx->lz4_dec, ctx->win, &d, src, &s, NULL);

		if (LZ4F_isError(hint)) {
			rc = -EBADMSG;
			break;
		}
		src += s;
		src_left -= s;
		if (d && (rc = emit(ds, ctx->win, d)) < 0)
			break;
		if (hint == 0 && src_left == 0)
			return 0;
		if (s == 0 && d == 0) {
			rc = -EBADMSG; /* truncated */
			break;
		}
	}
	LZ4F_resetDecompressionContext(ctx->lz4_dec);
	return rc;
}

static int zstd_stream(struct compress_ctx *ctx, const uint8_t *in, size_t in_len, struct dstream *ds)
{
	ZSTD_inBuffer ib = { in, in_len, 0 };
	int rc;

	ZSTD_DCtx_reset(ctx->zstd_stream, ZSTD_reset_session_only);
	for (;;) {
		ZSTD_outBuffer ob = { ctx->win, STREAM_PIECE, 0 };
		size_t before = ib.pos;
		size_t r = ZSTD_decompressStream(ctx->zstd_stream, &ob, &ib);

		if (ZSTD_isError(r)) {
			ZSTD_ErrorCode e = ZSTD_getErrorCode(r);

			ZSTD_DCtx_reset(ctx->zstd_stream, ZSTD_reset_session_only);
			return e == ZSTD_error_frameParameter_windowTooLarge ||
			       e == ZSTD_error_memory_allocation ? -ENOBUFS : -EBADMSG;
		}
		if (ob.pos && (rc = emit(ds, ctx->win, ob.pos)) < 0) {
			ZSTD_DCtx_reset(ctx->zstd_stream, ZSTD_reset_session_only);
			return rc;
		}
		if (r == 0 && ib.pos == ib.size)
			return 0;
		if (ob.pos == 0 && ib.pos == before) {
			ZSTD_DCtx_reset(ctx->zstd_stream, ZSTD_reset_session_only);
			return -EBADMSG; /* truncated */
		}
	}
}

static inline uint32_t load_le(const uint8_t *p, unsigned n)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

/* Hand win[*flushed..*pos) to the sink and keep the last SNAPPY_HIST bytes
 * at the start of the window as the history of later copies. */
static int snappy_slide(struct compress_ctx *ctx, size_t *pos, size_t *flushed, struct dstream *ds)
{
	int rc = emit(ds, ctx->win + *flushed, *pos - *flushed);

	if (rc < 0)
		return rc;
	memmove(ctx->win, ctx->win + *pos - SNAPPY_HIST, SNAPPY_HIST);
	*pos = *flushed = SNAPPY_HIST;
	return 0;
}

/* The elements of one raw snappy block of n decoded bytes (preamble read),
 * larger than the window: decoded here, through the window. */
static int snappy_block_big(struct compress_ctx *ctx, const uint8_t *p, const uint8_t *end,
			    size_t n, struct dstream *ds)
{
	uint8_t *w = ctx->win;
	size_t pos = 0, flushed = 0, done = 0;
	int rc;

	while (p < end) {
		uint8_t tag = *p++;
		size_t len, off;

		if ((tag & 3) == 0) {
			len = tag >> 2;
			if (len >= 60) {
				unsigned nb = (unsigned)len - 59;

				if ((size_t)(end - p) < nb)
					return -EBADMSG;
				len = load_le(p, nb);
				p += nb;
			}
			len++;
			if (len > (size_t)(end - p) || len > n - done)
				return -EBADMSG;
			done += len;
			while (len) {
				size_t m;

				if (pos == WIN_CAP && (rc = snappy_slide(ctx, &pos, &flushed, ds)) < 0)
					return rc;
				m = WIN_CAP - pos < len ? WIN_CAP - pos : len;
				memcpy(w + pos, p, m);
				pos += m;
				p += m;
				len -= m;
			}
			continue;
		}
		switch (tag & 3) {
		case 1:
			if (p >= end)
				return -EBADMSG;
			len = 4 + ((tag >> 2) & 7);
			off = (size_t)(tag >> 5) << 8 | *p++;
			break;
		case 2:
			if (end - p < 2)
				return -EBADMSG;
			len = 1 + (tag >> 2);
			off = load_le(p, 2);
			p += 2;
			break;
		default:
			if (end - p < 4)
				return -EBADMSG;
			len = 1 + (tag >> 2);
			off = load_le(p, 4);
			p += 4;
			break;
		}
		if (off == 0 || off > done || off > SNAPPY_HIST || len > n - done)
			return -EBADMSG;
		if (WIN_CAP - pos < len && (rc = snappy_slide(ctx, &pos, &flushed, ds)) < 0)
			return rc;
		for (size_t i = 0; i < len; i++) /* may overlap: byte by byte */
			w[pos + i] = w[pos + i - off];
		pos += len;
		done += len;
	}
	if (done != n)
		return -EBADMSG;
	return pos > flushed ? emit(ds, w + flushed, pos - flushed) : 0;
}

static int snappy_block_stream(struct compress_ctx *ctx, const uint8_t *in, size_t in_len,
			       struct dstream *ds)
{
	size_t n, hlen;

	if (snappy_uncompressed_length((const char *)in, in_len, &n) != SNAPPY_OK)
		return -EBADMSG;
	if (n > ds->limit - ds->total) {
		/* a bomb, or garbage claiming a huge length */
		if (snappy_validate_compressed_buffer((const char *)in, in_len) != SNAPPY_OK)
			return -EBADMSG;
		return -ENOBUFS;
	}
	if (n <= WIN_CAP) {
		if (snappy_uncompress((const char *)in, in_len, (char *)ctx->win, &n) != SNAPPY_OK)
			return -EBADMSG;
		return n ? emit(ds, ctx->win, n) : 0;
	}
	/* the preamble: a plain base-128 varint of at most 5 bytes */
	for (hlen = 0; hlen < in_len && hlen < 5 && (in[hlen] & 0x80); hlen++)
		;
	hlen++;
	return snappy_block_big(ctx, in + hlen, in + in_len, n, ds);
}

static int snappy_stream(struct compress_ctx *ctx, const uint8_t *src, size_t in_len, struct dstream *ds)
{
	const uint8_t *block;
	size_t pos = XERIAL_HDR_LEN;
	uint32_t blen;
	int rc;

	if (!xerial_header_at(src, in_len))
		return snappy_block_stream(ctx, src, in_len, ds);
	if (in_len < XERIAL_HDR_LEN)
		return -EBADMSG;
	while ((rc = xerial_next(src, in_len, &pos, &block, &blen)) > 0)
		if ((rc = snappy_block_stream(ctx, block, blen, ds)) < 0)
			return rc;
	return rc;
}

ssize_t compress_decode_stream(struct compress_ctx *ctx, int codec, const void *in, size_t in_len,
			       size_t limit, compress_sink_fn sink, void *arg)
{
	struct dstream ds = { .sink = sink, .arg = arg, .total = 0,
			      .limit = limit < COMPRESS_INFLATE_MAX ? limit : COMPRESS_INFLATE_MAX };
	int rc;

	if (codec <= COMPRESS_NONE || codec >= COMPRESS__COUNT)
		return -EINVAL;
	if (in_len > COMPRESS_MAX_LEN)
		return -EMSGSIZE;
	if (in_len == 0)
		return -EBADMSG;
	switch (codec) {
	case COMPRESS_GZIP: rc = gzip_stream(ctx, in, in_len, &ds); break;
	case COMPRESS_SNAPPY: rc = snappy_stream(ctx, in, in_len, &ds); break;
	case COMPRESS_LZ4: rc = lz4_stream(ctx, in, in_len, &ds); break;
	default: rc = zstd_stream(ctx, in, in_len, &ds); break;
	}
	return rc < 0 ? rc : (ssize_t)ds.total;
}

/* ---- dispatch ---- */

ssize_t compress_encode(struct compress_ctx *ctx, int codec, const void *in,
			size_t in_len, void *out, size_t out_cap)
{
	if (codec < COMPRESS_NONE || codec >= COMPRESS__COUNT)
		return -EINVAL;
	if (in_len > COMPRESS_MAX_LEN)
		return -EMSGSIZE;
	if (out_cap > COMPRESS_MAX_LEN + COMPRESS_MAX_LEN / 8)
		out_cap = COMPRESS_MAX_LEN + COMPRESS_MAX_LEN / 8; /* > every bound */
	switch (codec) {
	case COMPRESS_NONE: return copy_plain(in, in_len, out, out_cap);
	case COMPRESS_GZIP: return gzip_encode(ctx, in, in_len, out, out_cap);
	case COMPRESS_SNAPPY: return snappy_encode(ctx, in, in_len, out, out_cap);
	case COMPRESS_LZ4: return lz4_encode(ctx, in, in_len, out, out_cap);
	default: return zstd_encode(ctx, in, in_len, out, out_cap);
	}
}

ssize_t compress_decode(struct compress_ctx *ctx, int codec, const void *in,
			size_t in_len, void *out, size_t out_cap)
{
	if (codec < COMPRESS_NONE || codec >= COMPRESS__COUNT)
		return -EINVAL;
	if (in_len > COMPRESS_MAX_LEN)
		return -EMSGSIZE;
	if (out_cap > COMPRESS_MAX_LEN)
		out_cap = COMPRESS_MAX_LEN; /* more output is -ENOBUFS */
	if (codec != COMPRESS_NONE && in_len == 0)
		return -EBADMSG; /* every codec frames even empty data */
	switch (codec) {
	case COMPRESS_NONE: return copy_plain(in, in_len, out, out_cap);
	case COMPRESS_GZIP: return gzip_decode(ctx, in, in_len, out, out_cap);
	case COMPRESS_SNAPPY: return snappy_decode(in, in_len, out, out_cap);
	case COMPRESS_LZ4: return lz4_decode(ctx, in, in_len, out, out_cap);
	default: return zstd_decode(ctx, in, in_len, out, out_cap);
	}
}

/* ---- lifecycle ---- */

/* Grow LZ4F's lazily allocated buffers to their maximum now, so that no
 * later call allocates: encode one block with the Kafka prefs, and decode a
 * frame declaring 4 MiB linked blocks (the largest decode buffers). */
static int lz4_warm(struct compress_ctx *ctx)
{
	static const uint8_t sample[64] = "warm-up";
	uint8_t back[sizeof(sample)];
	LZ4F_preferences_t big;
	size_t n, r, s, d;
	ssize_t rc;

	rc = lz4_encode(ctx, sample, sizeof(sample), ctx->scratch, ctx->scratch_cap);
	if (rc < 0)
		return -ENOMEM;
	if (lz4_decode(ctx, ctx->scratch, (size_t)rc, back, sizeof(back)) != (ssize_t)sizeof(sample))
		return -ENOMEM;

	/* An empty frame declaring 4 MiB linked blocks: decoding its header
	 * sizes LZ4F's tmpIn/tmpOut for the largest frames. */
	memset(&big, 0, sizeof(big));
	big.frameInfo.blockSizeID = LZ4F_max4MB;
	big.frameInfo.blockMode = LZ4F_blockLinked;
	big.autoFlush = 1;
	n = LZ4F_compressBegin(ctx->lz4_enc, ctx->scratch, ctx->scratch_cap, &big);
	if (LZ4F_isError(n))
		return -ENOMEM;
	r = LZ4F_compressEnd(ctx->lz4_enc, ctx->scratch + n, ctx->scratch_cap - n, NULL);
	if (LZ4F_isError(r))
		return -ENOMEM;
	LZ4F_resetDecompressionContext(ctx->lz4_dec);
	s = n + r;
	d = sizeof(back);
	r = LZ4F_decompress(ctx->lz4_dec, back, &d, ctx->scratch, &s, NULL);
	LZ4F_resetDecompressionContext(ctx->lz4_dec);
	return LZ4F_isError(r) || r != 0 ? -ENOMEM : 0;
}

int compress_ctx_create(struct compress_ctx **out)
{
	struct compress_ctx *ctx;
	size_t enc_size, dec_size, stream_size;

	*out = NULL;
	ctx = calloc(1, sizeof(*ctx)); /* style: allow setup */
	if (!ctx)
		return -ENOMEM;

	ctx->gz_level_buf_size = ISAL_DEF_LVL1_DEFAULT;
	ctx->gz_level_buf = malloc(ctx->gz_level_buf_size); /* style: allow setup */

	ctx->scratch_cap = LZ4F_compressBound(LZ4_KAFKA_BLOCK, &lz4_kafka_prefs);
	if (ctx->scratch_cap < snappy_max_compressed_length(XERIAL_BLOCK))
		ctx->scratch_cap = snappy_max_compressed_length(XERIAL_BLOCK);
	if (ctx->scratch_cap < 2 * LZ4F_HEADER_SIZE_MAX + 16)
		ctx->scratch_cap = 2 * LZ4F_HEADER_SIZE_MAX + 16;
	ctx->scratch = malloc(ctx->scratch_cap); /* style: allow setup */

	/* zstd in fixed workspaces: a static CCtx never grows or shrinks, and
	 * ZSTD_estimateCCtxSize covers every input size at this level. */
	enc_size = ZSTD_estimateCCtxSize(ZSTD_LEVEL);
	dec_size = ZSTD_estimateDCtxSize();
	ctx->zstd_enc_mem = malloc(enc_size); /* style: allow setup */
	ctx->zstd_dec_mem = malloc(dec_size); /* style: allow setup */
	stream_size = ZSTD_estimateDStreamSize((size_t)1 << COMPRESS_ZSTD_WLOG);
	ctx->zstd_stream_mem = malloc(stream_size); /* style: allow setup */
	ctx->win = malloc(WIN_CAP); /* style: allow setup */

	if (!ctx->gz_level_buf || !ctx->scratch || !ctx->zstd_enc_mem || !ctx->zstd_dec_mem ||
	    !ctx->zstd_stream_mem || !ctx->win)
		goto fail;
	ctx->zstd_enc = ZSTD_initStaticCCtx(ctx->zstd_enc_mem, enc_size);
	ctx->zstd_dec = ZSTD_initStaticDCtx(ctx->zstd_dec_mem, dec_size);
	ctx->zstd_stream = ZSTD_initStaticDStream(ctx->zstd_stream_mem, stream_size);
	if (!ctx->zstd_enc || !ctx->zstd_dec || !ctx->zstd_stream ||
	    ZSTD_isError(ZSTD_DCtx_setParameter(ctx->zstd_stream, ZSTD_d_windowLogMax, COMPRESS_ZSTD_WLOG)))
		goto fail;
	if (LZ4F_isError(LZ4F_createCompressionContext(&ctx->lz4_enc, LZ4F_VERSION)) ||
	    LZ4F_isError(LZ4F_createDecompressionContext(&ctx->lz4_dec, LZ4F_VERSION)))
		goto fail;
	if (lz4_warm(ctx) < 0)
		goto fail;

	*out = ctx;
	return 0;
fail:
	compress_ctx_destroy(ctx);
	return -ENOMEM;
}

void compress_ctx_destroy(struct compress_ctx *ctx)
{
	if (!ctx)
		return;
	if (ctx->lz4_enc)
		LZ4F_freeCompressionContext(ctx->lz4_enc);
	if (ctx->lz4_dec)
		LZ4F_freeDecompressionContext(ctx->lz4_dec);
	free(ctx->zstd_enc_mem); /* static contexts live inside these */
	free(ctx->zstd_dec_mem);
	free(ctx->zstd_stream_mem);
	free(ctx->win);
	free(ctx->scratch);
	free(ctx->gz_level_buf);
	free(ctx);
}
