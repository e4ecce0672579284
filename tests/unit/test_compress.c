/* tests/unit/test_compress.c — storage/compress: round trips, cross-checks
 * against independent encoders/decoders (zlib, snappy, LZ4F, zstd), corrupt
 * and truncated input, and output bounds (buffers are malloc'd to their
 * exact size so the ASan build catches any write past out_cap).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "storage/compress.h"

static struct compress_ctx *ctx;

static void suite_init(void)
{
	cr_assert_eq(compress_ctx_create(&ctx), 0);
	cr_assert_not_null(ctx);
}

static void suite_fini(void)
{
	compress_ctx_destroy(ctx);
	ctx = NULL;
}

TestSuite(compress, .init = suite_init, .fini = suite_fini);

static const int codecs[] = {
	COMPRESS_NONE, COMPRESS_GZIP, COMPRESS_SNAPPY, COMPRESS_LZ4, COMPRESS_ZSTD,
};
#define NCODECS (sizeof(codecs) / sizeof(codecs[0]))

/* ---- inputs ---- */

static uint8_t *make_random(size_t n, uint64_t seed)
{
	uint8_t *p = malloc(n ? n : 1);
	uint64_t x = seed | 1;

	cr_assert_not_null(p);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)(x >> 32);
	}
	return p;
}

static uint8_t *make_text(size_t n)
{
	uint8_t *p = malloc(n);
	size_t off = 0;
	unsigned i = 0;

	cr_assert_not_null(p);
	while (off < n) {
		char line[128];
		int k = snprintf(line, sizeof(line),
				 "{\"offset\":%u,\"key\":\"user-%u\",\"event\":\"page_view\",\"path\":\"/item/%u\"}\n",
				 i, i % 977, (i * 31) % 10007);
		size_t take = (size_t)k < n - off ? (size_t)k : n - off;

		memcpy(p + off, line, take);
		off += take;
		i++;
	}
	return p;
}

/* A copy in an exactly sized heap block, so ASan sees any over-read. */
static uint8_t *dup_exact(const void *p, size_t n)
{
	uint8_t *q = malloc(n ? n : 1);

	cr_assert_not_null(q);
	if (n)
		memcpy(q, p, n);
	return q;
}

/* Encode with our encoder into a buffer of exactly compress_bound bytes,
 * then shrink to an exactly sized copy. */
static uint8_t *encode_exact(int codec, const void *in, size_t n, size_t *out_len)
{
	size_t bound = compress_bound(codec, n);
	uint8_t *buf = malloc(bound ? bound : 1);
	ssize_t r;
	uint8_t *exact;

	cr_assert_not_null(buf);
	r = compress_encode(ctx, codec, in, n, buf, bound);
	cr_assert_geq(r, 0, "%s encode of %zu bytes: %zd", compress_codec_name(codec), n, r);
	cr_assert_leq((size_t)r, bound);
	exact = dup_exact(buf, (size_t)r);
	free(buf);
	*out_len = (size_t)r;
	return exact;
}

static void check_decodes_to(int codec, const void *enc, size_t enc_len,
			     const void *want, size_t want_len)
{
	uint8_t *in = dup_exact(enc, enc_len);
	uint8_t *out = malloc(want_len ? want_len : 1);
	size_t big_cap = want_len + 4096;
	uint8_t *big = malloc(big_cap);
	ssize_t r;

	cr_assert_not_null(out);
	cr_assert_not_null(big);
	/* exact fit */
	r = compress_decode(ctx, codec, in, enc_len, out, want_len);
	cr_assert_eq(r, (ssize_t)want_len, "%s decode exact: %zd want %zu",
		     compress_codec_name(codec), r, want_len);
	cr_assert(want_len == 0 || memcmp(out, want, want_len) == 0);
	/* room to spare */
	r = compress_decode(ctx, codec, in, enc_len, big, big_cap);
	cr_assert_eq(r, (ssize_t)want_len, "%s decode big: %zd", compress_codec_name(codec), r);
	cr_assert(want_len == 0 || memcmp(big, want, want_len) == 0);
	/* one byte short */
	if (want_len > 0) {
		uint8_t *shortbuf = malloc(want_len - 1 ? want_len - 1 : 1);

		r = compress_decode(ctx, codec, in, enc_len, shortbuf, want_len - 1);
		cr_assert_eq(r, -ENOBUFS, "%s decode short: %zd", compress_codec_name(codec), r);
		free(shortbuf);
	}
	free(big);
	free(out);
	free(in);
}

static void roundtrip(int codec, const uint8_t *data, size_t n)
{
	size_t enc_len;
	uint8_t *enc = encode_exact(codec, data, n, &enc_len);

	check_decodes_to(codec, enc, enc_len, data, n);
	free(enc);
}

static void roundtrip_all_inputs(int codec)
{
	static const uint8_t one = 'k';
	uint8_t *rnd = make_random(100 * 1024, 42);
	uint8_t *txt = make_text(1024 * 1024);

	roundtrip(codec, &one, 0);
	roundtrip(codec, &one, 1);
	roundtrip(codec, rnd, 100 * 1024);
	roundtrip(codec, txt, 1024 * 1024);
	free(txt);
	free(rnd);
}

Test(compress, roundtrip_none) { roundtrip_all_inputs(COMPRESS_NONE); }
Test(compress, roundtrip_gzip) { roundtrip_all_inputs(COMPRESS_GZIP); }
Test(compress, roundtrip_snappy) { roundtrip_all_inputs(COMPRESS_SNAPPY); }
Test(compress, roundtrip_lz4) { roundtrip_all_inputs(COMPRESS_LZ4); }
Test(compress, roundtrip_zstd) { roundtrip_all_inputs(COMPRESS_ZSTD); }

Test(compress, text_actually_compresses)
{
	uint8_t *txt = make_text(1024 * 1024);

	for (size_t c = 1; c < NCODECS; c++) {
		size_t enc_len;
		uint8_t *enc = encode_exact(codecs[c], txt, 1024 * 1024, &enc_len);

		cr_expect_lt(enc_len, 1024 * 1024 / 4, "%s: %zu", compress_codec_name(codecs[c]), enc_len);
		free(enc);
	}
	free(txt);
}

/* Incompressible input at block-size edges must fit compress_bound. */
Test(compress, bound_holds_for_incompressible)
{
	static const size_t sizes[] = { 0, 1, 7, 100, 32767, 32768, 32769, 65535, 65536,
					65537, 131072, 300000 };

	for (size_t c = 0; c < NCODECS; c++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			uint8_t *rnd = make_random(sizes[i], 7 + i);

			roundtrip(codecs[c], rnd, sizes[i]);
			free(rnd);
		}
}

Test(compress, unknown_codec)
{
	uint8_t in[4] = { 1, 2, 3, 4 }, out[64];

	cr_assert_eq(compress_encode(ctx, 5, in, 4, out, sizeof(out)), -EINVAL);
	cr_assert_eq(compress_encode(ctx, -1, in, 4, out, sizeof(out)), -EINVAL);
	cr_assert_eq(compress_decode(ctx, 5, in, 4, out, sizeof(out)), -EINVAL);
	cr_assert_eq(compress_decode(ctx, 7, in, 4, out, sizeof(out)), -EINVAL);
	cr_assert_eq(compress_bound(5, 10), 0);
	cr_assert_str_eq(compress_codec_name(5), "unknown");
	cr_assert_str_eq(compress_codec_name(COMPRESS_NONE), "none");
	cr_assert_str_eq(compress_codec_name(COMPRESS_GZIP), "gzip");
	cr_assert_str_eq(compress_codec_name(COMPRESS_SNAPPY), "snappy");
	cr_assert_str_eq(compress_codec_name(COMPRESS_LZ4), "lz4");
	cr_assert_str_eq(compress_codec_name(COMPRESS_ZSTD), "zstd");
}

/* ---- gzip vs zlib ---- */

static size_t zlib_gunzip(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
	z_stream z;
	int rc;

	memset(&z, 0, sizeof(z));
	cr_assert_eq(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	rc = inflate(&z, Z_FINISH);
	cr_assert_eq(rc, Z_STREAM_END, "zlib inflate rc %d", rc);
	cr_assert_eq(z.avail_in, 0);
	inflateEnd(&z);
	return cap - z.avail_out;
}

static uint8_t *zlib_gzip(const uint8_t *in, size_t n, int level, size_t *out_len)
{
	z_stream z;
	size_t cap;
	uint8_t *out;

	memset(&z, 0, sizeof(z));
	cr_assert_eq(deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
	cap = deflateBound(&z, n);
	out = malloc(cap);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
	*out_len = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

Test(compress, gzip_ours_decoded_by_zlib)
{
	uint8_t *txt = make_text(1024 * 1024);
	uint8_t *rnd = make_random(100 * 1024, 3);
	const uint8_t *ins[] = { txt, rnd, txt };
	const size_t lens[] = { 1024 * 1024, 100 * 1024, 0 };
	uint8_t *out = malloc(1024 * 1024);

	for (int i = 0; i < 3; i++) {
		size_t enc_len;
		uint8_t *enc = encode_exact(COMPRESS_GZIP, ins[i], lens[i], &enc_len);

		/* RFC 1952 member: magic 1f 8b, method 8 (deflate). */
		cr_assert_eq(enc[0], 0x1f);
		cr_assert_eq(enc[1], 0x8b);
		cr_assert_eq(enc[2], 8);
		cr_assert_eq(zlib_gunzip(enc, enc_len, out, 1024 * 1024), lens[i]);
		cr_assert(lens[i] == 0 || memcmp(out, ins[i], lens[i]) == 0);
		free(enc);
	}
	free(out);
	free(rnd);
	free(txt);
}

Test(compress, gzip_zlib_decoded_by_ours)
{
	uint8_t *txt = make_text(1024 * 1024);
	uint8_t *rnd = make_random(100 * 1024, 5);
	static const int levels[] = { 1, 6, 9 };

	for (int l = 0; l < 3; l++) {
		size_t enc_len;
		uint8_t *enc = zlib_gzip(txt, 1024 * 1024, levels[l], &enc_len);

		check_decodes_to(COMPRESS_GZIP, enc, enc_len, txt, 1024 * 1024);
		free(enc);
		enc = zlib_gzip(rnd, 100 * 1024, levels[l], &enc_len);
		check_decodes_to(COMPRESS_GZIP, enc, enc_len, rnd, 100 * 1024);
		free(enc);
	}
	free(rnd);
	free(txt);
}

/* RFC 1952: a gzip file may be several members; Java's GZIPInputStream
 * reads them all. One from zlib, one from us. */
Test(compress, gzip_concatenated_members)
{
	uint8_t *txt = make_text(200000);
	size_t a_len, b_len;
	uint8_t *a = zlib_gzip(txt, 120000, 6, &a_len);
	uint8_t *b = encode_exact(COMPRESS_GZIP, txt + 120000, 80000, &b_len);
	uint8_t *cat = malloc(a_len + b_len);

	memcpy(cat, a, a_len);
	memcpy(cat + a_len, b, b_len);
	check_decodes_to(COMPRESS_GZIP, cat, a_len + b_len, txt, 200000);
	free(cat);
	free(b);
	free(a);
	free(txt);
}

/* gzip header with FNAME and FCOMMENT set (zlib's gzip header API). */
Test(compress, gzip_header_with_name_and_comment)
{
	uint8_t *txt = make_text(50000);
	z_stream z;
	gz_header h;
	uint8_t *out = malloc(100000);
	size_t n;

	memset(&z, 0, sizeof(z));
	memset(&h, 0, sizeof(h));
	h.name = (Bytef *)"batch.bin";
	h.comment = (Bytef *)"from zlib";
	h.hcrc = 1;
	cr_assert_eq(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
	cr_assert_eq(deflateSetHeader(&z, &h), Z_OK);
	z.next_in = txt;
	z.avail_in = 50000;
	z.next_out = out;
	z.avail_out = 100000;
	cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
	n = 100000 - z.avail_out;
	deflateEnd(&z);
	check_decodes_to(COMPRESS_GZIP, out, n, txt, 50000);
	free(out);
	free(txt);
}

/* ---- snappy ---- */

Test(compress, snappy_raw_block_decoded)
{
	uint8_t *txt = make_text(300000);
	size_t cap = snappy_max_compressed_length(300000), n = cap;
	char *raw = malloc(cap);

	cr_assert_eq(snappy_compress((const char *)txt, 300000, raw, &n), SNAPPY_OK);
	check_decodes_to(COMPRESS_SNAPPY, raw, n, txt, 300000);
	free(raw);
	free(txt);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Append a snappy-java stream header (magic, version 1, compat 1). */
static size_t xerial_header(uint8_t *p)
{
	memcpy(p, "\x82SNAPPY\0", 8);
	put_be32(p + 8, 1);
	put_be32(p + 12, 1);
	return 16;
}

/* Append one [int32 BE length][raw snappy block]. */
static size_t xerial_block(uint8_t *p, const uint8_t *in, size_t n)
{
	size_t clen = snappy_max_compressed_length(n);

	cr_assert_eq(snappy_compress((const char *)in, n, (char *)p + 4, &clen), SNAPPY_OK);
	put_be32(p, (uint32_t)clen);
	return 4 + clen;
}

Test(compress, snappy_xerial_by_hand_decoded)
{
	uint8_t *txt = make_text(100000);
	uint8_t *buf = malloc(200000);
	size_t n = 0;

	/* Uneven block sizes, as another writer (or a flush) may produce. */
	n += xerial_header(buf + n);
	n += xerial_block(buf + n, txt, 10000);
	n += xerial_block(buf + n, txt + 10000, 65536);
	n += xerial_block(buf + n, txt + 75536, 24464);
	check_decodes_to(COMPRESS_SNAPPY, buf, n, txt, 100000);

	/* Two concatenated xerial streams (snappy-java reads them as one). */
	n = 0;
	n += xerial_header(buf + n);
	n += xerial_block(buf + n, txt, 40000);
	n += xerial_header(buf + n);
	n += xerial_block(buf + n, txt + 40000, 60000);
	check_decodes_to(COMPRESS_SNAPPY, buf, n, txt, 100000);

	/* Header only: empty payload. */
	n = xerial_header(buf);
	check_decodes_to(COMPRESS_SNAPPY, buf, n, txt, 0);
	free(buf);
	free(txt);
}

/* Our snappy output parsed with the framing rules and libsnappy alone. */
Test(compress, snappy_ours_is_xerial_framed)
{
	uint8_t *txt = make_text(100000);
	size_t enc_len, pos = 16, got = 0;
	uint8_t *enc = encode_exact(COMPRESS_SNAPPY, txt, 100000, &enc_len);
	char *out = malloc(100000);
	int blocks = 0;

	cr_assert_eq(memcmp(enc, "\x82SNAPPY\0", 8), 0);
	cr_assert_eq(get_be32(enc + 8), 1);
	cr_assert_eq(get_be32(enc + 12), 1);
	while (pos < enc_len) {
		uint32_t blen = get_be32(enc + pos);
		size_t ulen;

		cr_assert_leq(pos + 4 + blen, enc_len);
		cr_assert_eq(snappy_uncompressed_length((const char *)enc + pos + 4, blen, &ulen), SNAPPY_OK);
		cr_assert_leq(ulen, 32768, "snappy-java block is 32 KiB");
		cr_assert_leq(got + ulen, 100000);
		cr_assert_eq(snappy_uncompress((const char *)enc + pos + 4, blen, out + got, &ulen), SNAPPY_OK);
		got += ulen;
		pos += 4 + blen;
		blocks++;
	}
	cr_assert_eq(got, 100000);
	cr_assert_eq(blocks, 4);
	cr_assert_eq(memcmp(out, txt, 100000), 0);
	free(out);
	free(enc);
	free(txt);
}

/* ---- lz4 ---- */

static uint8_t *lz4f_frame(const uint8_t *in, size_t n, const LZ4F_preferences_t *p, size_t *out_len)
{
	size_t cap = LZ4F_compressFrameBound(n, p);
	uint8_t *out = malloc(cap);
	size_t r = LZ4F_compressFrame(out, cap, in, n, p);

	cr_assert(!LZ4F_isError(r), "%s", LZ4F_getErrorName(r));
	*out_len = r;
	return out;
}

Test(compress, lz4_frames_from_lz4f_decoded)
{
	uint8_t *txt = make_text(1024 * 1024);
	uint8_t *rnd = make_random(100 * 1024, 9);
	LZ4F_preferences_t p;
	size_t n;
	uint8_t *f;

	/* Library defaults: linked blocks, 64 KiB. */
	f = lz4f_frame(txt, 1024 * 1024, NULL, &n);
	check_decodes_to(COMPRESS_LZ4, f, n, txt, 1024 * 1024);
	free(f);

	/* Every optional field: checksums, content size, 4 MiB blocks, HC. */
	memset(&p, 0, sizeof(p));
	p.frameInfo.blockSizeID = LZ4F_max4MB;
	p.frameInfo.blockMode = LZ4F_blockLinked;
	p.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
	p.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
	p.frameInfo.contentSize = 1024 * 1024;
	p.compressionLevel = 9;
	f = lz4f_frame(txt, 1024 * 1024, &p, &n);
	check_decodes_to(COMPRESS_LZ4, f, n, txt, 1024 * 1024);
	free(f);

	/* Incompressible data: uncompressed blocks. */
	f = lz4f_frame(rnd, 100 * 1024, NULL, &n);
	check_decodes_to(COMPRESS_LZ4, f, n, rnd, 100 * 1024);
	free(f);
	free(rnd);
	free(txt);
}

Test(compress, lz4_ours_decoded_by_lz4f_with_kafka_flags)
{
	uint8_t *txt = make_text(1024 * 1024);
	size_t enc_len, s, d;
	uint8_t *enc = encode_exact(COMPRESS_LZ4, txt, 1024 * 1024, &enc_len);
	uint8_t *out = malloc(1024 * 1024);
	LZ4F_dctx *dctx;
	LZ4F_frameInfo_t fi;

	/* Magic 0x184D2204 (LE); FLG 0x60 = version 01 + block independence,
	 * no checksums or content size; BD 0x40 = 64 KiB, as KafkaLZ4Block*
	 * streams write and read. */
	cr_assert_eq(enc[0], 0x04);
	cr_assert_eq(enc[1], 0x22);
	cr_assert_eq(enc[2], 0x4d);
	cr_assert_eq(enc[3], 0x18);
	cr_assert_eq(enc[4], 0x60);
	cr_assert_eq(enc[5], 0x40);

	cr_assert(!LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)));
	s = enc_len;
	cr_assert(!LZ4F_isError(LZ4F_getFrameInfo(dctx, &fi, enc, &s)));
	cr_assert_eq(fi.blockMode, LZ4F_blockIndependent);
	d = 1024 * 1024;
	{
		size_t s2 = enc_len - s;
		size_t r = LZ4F_decompress(dctx, out, &d, enc + s, &s2, NULL);

		cr_assert_eq(r, 0, "frame not complete: %zu", r);
	}
	cr_assert_eq(d, 1024 * 1024);
	cr_assert_eq(memcmp(out, txt, d), 0);
	LZ4F_freeDecompressionContext(dctx);
	free(out);
	free(enc);
	free(txt);
}

Test(compress, lz4_concatenated_frames)
{
	uint8_t *txt = make_text(200000);
	size_t a_len, b_len;
	uint8_t *a = lz4f_frame(txt, 150000, NULL, &a_len);
	uint8_t *b = encode_exact(COMPRESS_LZ4, txt + 150000, 50000, &b_len);
	uint8_t *cat = malloc(a_len + b_len);

	memcpy(cat, a, a_len);
	memcpy(cat + a_len, b, b_len);
	check_decodes_to(COMPRESS_LZ4, cat, a_len + b_len, txt, 200000);
	free(cat);
	free(b);
	free(a);
	free(txt);
}

/* ---- zstd ---- */

/* zstd frame made by the streaming API: no content size in the header. */
static uint8_t *zstd_stream_frame(const uint8_t *in, size_t n, size_t *out_len)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();
	size_t cap = ZSTD_compressBound(n) + 64;
	uint8_t *out = malloc(cap);
	ZSTD_inBuffer ib = { in, 0, 0 };
	ZSTD_outBuffer ob = { out, cap, 0 };
	size_t r, pos = 0;

	cr_assert_not_null(c);
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	/* Feed in 7 KiB pieces, like a stream writer would. */
	while (pos < n) {
		ib.src = in + pos;
		ib.size = n - pos < 7168 ? n - pos : 7168;
		ib.pos = 0;
		while (ib.pos < ib.size) {
			r = ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_continue);
			cr_assert(!ZSTD_isError(r));
		}
		pos += ib.size;
	}
	ib.src = in;
	ib.size = ib.pos = 0;
	do {
		r = ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_end);
		cr_assert(!ZSTD_isError(r));
	} while (r != 0);
	ZSTD_freeCCtx(c);
	if (n > 0) /* an empty e_end-only stream knows its size is 0 */
		cr_assert_eq(ZSTD_getFrameContentSize(out, ob.pos), ZSTD_CONTENTSIZE_UNKNOWN);
	*out_len = ob.pos;
	return out;
}

Test(compress, zstd_one_shot_and_streaming_decoded)
{
	uint8_t *txt = make_text(1024 * 1024);
	uint8_t *rnd = make_random(100 * 1024, 11);
	size_t n, cap = ZSTD_compressBound(1024 * 1024);
	uint8_t *f = malloc(cap);

	n = ZSTD_compress(f, cap, txt, 1024 * 1024, 19);
	cr_assert(!ZSTD_isError(n));
	check_decodes_to(COMPRESS_ZSTD, f, n, txt, 1024 * 1024);
	free(f);

	f = zstd_stream_frame(txt, 1024 * 1024, &n);
	check_decodes_to(COMPRESS_ZSTD, f, n, txt, 1024 * 1024);
	free(f);
	f = zstd_stream_frame(rnd, 100 * 1024, &n);
	check_decodes_to(COMPRESS_ZSTD, f, n, rnd, 100 * 1024);
	free(f);
	f = zstd_stream_frame(txt, 0, &n);
	check_decodes_to(COMPRESS_ZSTD, f, n, txt, 0);
	free(f);
	free(rnd);
	free(txt);
}

Test(compress, zstd_ours_decoded_by_libzstd)
{
	uint8_t *txt = make_text(1024 * 1024);
	size_t enc_len;
	uint8_t *enc = encode_exact(COMPRESS_ZSTD, txt, 1024 * 1024, &enc_len);
	uint8_t *out = malloc(1024 * 1024);

	cr_assert_eq(ZSTD_decompress(out, 1024 * 1024, enc, enc_len), 1024 * 1024);
	cr_assert_eq(memcmp(out, txt, 1024 * 1024), 0);
	free(out);
	free(enc);
	free(txt);
}

/* ---- corrupt and truncated input ---- */

static void expect_bad(int codec, const uint8_t *in, size_t n, size_t out_cap, const char *what)
{
	uint8_t *copy = dup_exact(in, n);
	uint8_t *out = malloc(out_cap ? out_cap : 1);
	ssize_t r = compress_decode(ctx, codec, copy, n, out, out_cap);

	cr_assert_eq(r, -EBADMSG, "%s %s: got %zd", compress_codec_name(codec), what, r);
	free(out);
	free(copy);
}

Test(compress, truncated_input_is_ebadmsg)
{
	uint8_t *txt = make_text(100 * 1024);
	uint8_t *rnd = make_random(100 * 1024, 13);

	for (size_t c = 1; c < NCODECS; c++) {
		const uint8_t *ins[] = { txt, rnd };

		for (int k = 0; k < 2; k++) {
			size_t n;
			uint8_t *enc = encode_exact(codecs[c], ins[k], 100 * 1024, &n);
			const size_t cuts[] = { 0, 1, 3, 10, n / 2 + 1, n - 5, n - 1 };

			for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
				char what[64];

				snprintf(what, sizeof(what), "input %d cut to %zu of %zu", k, cuts[i], n);
				expect_bad(codecs[c], enc, cuts[i], 200 * 1024, what);
			}
			free(enc);
		}
	}
	free(rnd);
	free(txt);
}

Test(compress, garbage_is_ebadmsg)
{
	uint8_t junk[256];

	memset(junk, 0xab, sizeof(junk));
	for (size_t c = 1; c < NCODECS; c++) {
		expect_bad(codecs[c], junk, sizeof(junk), 1 << 20, "0xab junk");
		/* out_cap smaller than any length the junk might claim */
		expect_bad(codecs[c], junk, sizeof(junk), 16, "0xab junk, small out");
	}
}

/* Structural corruptions each codec must detect. */
Test(compress, corrupt_input_is_ebadmsg)
{
	uint8_t *txt = make_text(100 * 1024);

	for (size_t c = 1; c < NCODECS; c++) {
		int codec = codecs[c];
		size_t n;
		uint8_t *enc = encode_exact(codec, txt, 100 * 1024, &n);
		uint8_t *bad = dup_exact(enc, n);

		/* Trailing garbage after a complete stream. */
		{
			uint8_t *longer = malloc(n + 3);

			memcpy(longer, enc, n);
			memcpy(longer + n, "xyz", 3);
			expect_bad(codec, longer, n + 3, 200 * 1024, "trailing garbage");
			free(longer);
		}

		switch (codec) {
		case COMPRESS_GZIP:
			/* bad magic; bad method; flipped payload byte (CRC32);
			 * flipped CRC; flipped ISIZE */
			bad[0] ^= 0xff;
			expect_bad(codec, bad, n, 200 * 1024, "magic");
			memcpy(bad, enc, n);
			bad[2] = 7;
			expect_bad(codec, bad, n, 200 * 1024, "method");
			memcpy(bad, enc, n);
			bad[n / 2] ^= 0x10;
			expect_bad(codec, bad, n, 200 * 1024, "payload bit");
			memcpy(bad, enc, n);
			bad[n - 6] ^= 0x01;
			expect_bad(codec, bad, n, 200 * 1024, "crc32");
			memcpy(bad, enc, n);
			bad[n - 2] ^= 0x01;
			expect_bad(codec, bad, n, 200 * 1024, "isize");
			break;
		case COMPRESS_SNAPPY:
			/* first block length beyond the input; zero length;
			 * block payload cut by a shrunk length */
			put_be32(bad + 16, 0x7ffffff0);
			expect_bad(codec, bad, n, 200 * 1024, "block length too big");
			put_be32(bad + 16, 0);
			expect_bad(codec, bad, n, 200 * 1024, "zero block length");
			memcpy(bad, enc, n);
			put_be32(bad + 16, get_be32(enc + 16) - 1);
			expect_bad(codec, bad, n, 200 * 1024, "block length short by one");
			memcpy(bad, enc, n);
			bad[9] ^= 0; /* version bytes are not checked, like snappy-java */
			bad[3] ^= 0x20; /* magic broken -> read as raw snappy -> invalid */
			expect_bad(codec, bad, n, 200 * 1024, "magic");
			break;
		case COMPRESS_LZ4:
			/* magic; FLG version bits; header checksum; block size */
			bad[0] ^= 0x01;
			expect_bad(codec, bad, n, 200 * 1024, "magic");
			memcpy(bad, enc, n);
			bad[4] ^= 0x80;
			expect_bad(codec, bad, n, 200 * 1024, "version");
			memcpy(bad, enc, n);
			bad[6] ^= 0x01;
			expect_bad(codec, bad, n, 200 * 1024, "header checksum");
			memcpy(bad, enc, n);
			bad[10] ^= 0x40; /* block size high byte: beyond 64 KiB */
			expect_bad(codec, bad, n, 200 * 1024, "block size");
			break;
		case COMPRESS_ZSTD:
			/* magic; reserved frame header bit */
			bad[0] ^= 0x01;
			expect_bad(codec, bad, n, 200 * 1024, "magic");
			memcpy(bad, enc, n);
			bad[4] |= 0x08;
			expect_bad(codec, bad, n, 200 * 1024, "reserved bit");
			break;
		}
		free(bad);
		free(enc);
	}
	free(txt);
}

/* zstd with a checksum catches a flipped payload bit too. */
Test(compress, zstd_checksum_mismatch_is_ebadmsg)
{
	uint8_t *txt = make_text(100 * 1024);
	size_t n;
	uint8_t *f = zstd_stream_frame(txt, 100 * 1024, &n);

	f[n - 2] ^= 0x40; /* inside the XXH64 checksum */
	expect_bad(COMPRESS_ZSTD, f, n, 200 * 1024, "checksum");
	free(f);
	free(txt);
}

/* ---- output bounds ---- */

/* 1 MiB of zeros decoded into 4 KiB: -ENOBUFS, no write past 4 KiB. */
Test(compress, zero_run_bomb_is_bounded)
{
	uint8_t *zeros = calloc(1, 1024 * 1024);

	for (size_t c = 0; c < NCODECS; c++) {
		size_t n;
		uint8_t *enc = encode_exact(codecs[c], zeros, 1024 * 1024, &n);
		uint8_t *small = malloc(4096);
		ssize_t r = compress_decode(ctx, codecs[c], enc, n, small, 4096);

		cr_assert_eq(r, -ENOBUFS, "%s: %zd", compress_codec_name(codecs[c]), r);
		r = compress_decode(ctx, codecs[c], enc, n, small, 0);
		cr_assert_eq(r, -ENOBUFS, "%s cap 0: %zd", compress_codec_name(codecs[c]), r);
		free(small);
		free(enc);
	}
	free(zeros);
}

/* Bombs from the other encoders, where the frame carries no size hint. */
Test(compress, foreign_bombs_are_bounded)
{
	uint8_t *zeros = calloc(1, 4 * 1024 * 1024);
	uint8_t *small = malloc(4096);
	size_t n;
	uint8_t *f;

	f = zlib_gzip(zeros, 4 * 1024 * 1024, 9, &n);
	cr_assert_eq(compress_decode(ctx, COMPRESS_GZIP, f, n, small, 4096), -ENOBUFS);
	free(f);
	f = zstd_stream_frame(zeros, 4 * 1024 * 1024, &n);
	cr_assert_eq(compress_decode(ctx, COMPRESS_ZSTD, f, n, small, 4096), -ENOBUFS);
	free(f);
	f = lz4f_frame(zeros, 4 * 1024 * 1024, NULL, &n);
	cr_assert_eq(compress_decode(ctx, COMPRESS_LZ4, f, n, small, 4096), -ENOBUFS);
	free(f);
	{
		size_t cap = snappy_max_compressed_length(4 * 1024 * 1024);

		f = malloc(cap);
		n = cap;
		cr_assert_eq(snappy_compress((const char *)zeros, 4 * 1024 * 1024, (char *)f, &n), SNAPPY_OK);
		cr_assert_eq(compress_decode(ctx, COMPRESS_SNAPPY, f, n, small, 4096), -ENOBUFS);
		free(f);
	}
	free(small);
	free(zeros);
}

/* Encoding into any buffer smaller than the result: -ENOBUFS and no write
 * past out_cap (each buffer is exactly out_cap bytes on the heap). */
Test(compress, encode_small_out_is_enobufs)
{
	uint8_t *rnd = make_random(100 * 1024, 17);
	uint8_t *txt = make_text(100 * 1024);
	const uint8_t *ins[] = { rnd, txt };

	for (size_t c = 0; c < NCODECS; c++)
		for (int k = 0; k < 2; k++) {
			size_t n;
			uint8_t *enc = encode_exact(codecs[c], ins[k], 100 * 1024, &n);
			const size_t caps[] = { 0, 1, 5, 16, 17, 100, 4096, n / 2, n - 4, n - 1 };

			for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
				uint8_t *out = malloc(caps[i] ? caps[i] : 1);
				ssize_t r = compress_encode(ctx, codecs[c], ins[k], 100 * 1024, out, caps[i]);

				cr_assert_eq(r, -ENOBUFS, "%s input %d cap %zu of %zu: %zd",
					     compress_codec_name(codecs[c]), k, caps[i], n, r);
				free(out);
			}
			/* exactly n fits (zstd only promises this from
			 * compress_bound up: its block checks are conservative) */
			if (codecs[c] != COMPRESS_ZSTD) {
				uint8_t *out = malloc(n);
				ssize_t r = compress_encode(ctx, codecs[c], ins[k], 100 * 1024, out, n);

				cr_assert_eq(r, (ssize_t)n, "%s input %d exact: %zd",
					     compress_codec_name(codecs[c]), k, r);
				free(out);
			}
			free(enc);
		}
	free(txt);
	free(rnd);
}

/* The context is reused: interleaving codecs and failures leaves no state
 * behind (a failed lz4/gzip decode must not poison the next call). */
Test(compress, ctx_reuse_after_errors)
{
	uint8_t *txt = make_text(64 * 1024);

	for (int round = 0; round < 3; round++)
		for (size_t c = 1; c < NCODECS; c++) {
			size_t n;
			uint8_t *enc = encode_exact(codecs[c], txt, 64 * 1024, &n);
			uint8_t *small = malloc(100);

			cr_assert_eq(compress_decode(ctx, codecs[c], enc, n, small, 100), -ENOBUFS);
			expect_bad(codecs[c], enc, n / 2, 64 * 1024, "half");
			check_decodes_to(codecs[c], enc, n, txt, 64 * 1024);
			free(small);
			free(enc);
		}
	free(txt);
}

/* ---- compress_decode_stream ---- */

struct collect {
	uint8_t *buf;
	size_t cap, len;
	size_t pieces, max_piece;
};

static int collect_sink(void *arg, const uint8_t *p, size_t n)
{
	struct collect *c = arg;

	cr_assert_gt(n, 0, "empty piece");
	if (n > c->max_piece)
		c->max_piece = n;
	c->pieces++;
	if (n > c->cap - c->len)
		return -E2BIG;
	memcpy(c->buf + c->len, p, n);
	c->len += n;
	return 0;
}

static void check_streams_to(int codec, const uint8_t *enc, size_t enc_len, const uint8_t *want, size_t n)
{
	struct collect c = { .buf = malloc(n + 1), .cap = n + 1 };
	uint8_t *in = dup_exact(enc, enc_len);
	ssize_t r = compress_decode_stream(ctx, codec, in, enc_len, COMPRESS_INFLATE_MAX, collect_sink, &c);

	cr_assert_eq(r, (ssize_t)n, "%s stream of %zu: %zd", compress_codec_name(codec), n, r);
	cr_assert_eq(c.len, n);
	cr_assert(n == 0 || memcmp(c.buf, want, n) == 0, "%s stream differs", compress_codec_name(codec));
	/* the window bounds every piece: snappy's is 64 KiB longer */
	cr_assert_leq(c.max_piece, (size_t)COMPRESS_WINDOW + 64 * 1024);
	if (n > 0) {
		/* one byte below the bound: -ENOBUFS */
		c.len = 0;
		r = compress_decode_stream(ctx, codec, in, enc_len, n - 1, collect_sink, &c);
		cr_assert_eq(r, -ENOBUFS, "%s stream limit n-1: %zd", compress_codec_name(codec), r);
	}
	free(in);
	free(c.buf);
}

/* Every codec, sizes from 1 byte to 5 MiB (several windows): the stream
 * gives what compress_decode gives. */
Test(compress, stream_decodes_every_codec)
{
	static const size_t sizes[] = { 1, 1000, 100 * 1024, 5 << 20 };
	uint8_t *txt = make_text(5 << 20);
	uint8_t *rnd = make_random(5 << 20, 9);

	for (size_t c = 1; c < NCODECS; c++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
			for (int k = 0; k < 2; k++) {
				const uint8_t *in = k ? rnd : txt;
				size_t n;
				uint8_t *enc = encode_exact(codecs[c], in, sizes[s], &n);

				check_streams_to(codecs[c], enc, n, in, sizes[s]);
				free(enc);
			}
	free(rnd);
	free(txt);
}

/* Encodings from the codecs' own libraries: one raw snappy block larger
 * than the window (librdkafka's framing; the streaming snappy decoder),
 * a streamed zstd frame, LZ4F linked 4 MiB blocks, zlib gzip. */
Test(compress, stream_decodes_foreign_frames)
{
	size_t n = 5 << 20, len;
	uint8_t *txt = make_text(n);
	uint8_t *f;
	LZ4F_preferences_t big = { .frameInfo = { .blockSizeID = LZ4F_max4MB, .blockMode = LZ4F_blockLinked,
						  .contentChecksumFlag = LZ4F_contentChecksumEnabled } };

	len = snappy_max_compressed_length(n);
	f = malloc(len);
	cr_assert_eq(snappy_compress((const char *)txt, n, (char *)f, &len), SNAPPY_OK);
	check_streams_to(COMPRESS_SNAPPY, f, len, txt, n);
	free(f);
	f = zstd_stream_frame(txt, n, &len);
	check_streams_to(COMPRESS_ZSTD, f, len, txt, n);
	free(f);
	f = lz4f_frame(txt, n, &big, &len);
	check_streams_to(COMPRESS_LZ4, f, len, txt, n);
	free(f);
	f = zlib_gzip(txt, n, 6, &len);
	check_streams_to(COMPRESS_GZIP, f, len, txt, n);
	free(f);
	free(txt);
}

static int count_sink(void *arg, const uint8_t *p, size_t n)
{
	(void)p;
	*(size_t *)arg += n;
	return 0;
}

/* 100 MiB of zeros: stopped at the bound (COMPRESS_INFLATE_MAX, 64 MiB),
 * -ENOBUFS, with no more than the bound handed to the sink. */
Test(compress, stream_bomb_is_bounded)
{
	size_t n = 100 << 20;
	uint8_t *zeros = calloc(1, n);

	for (size_t k = 1; k < NCODECS; k++) {
		size_t len, seen = 0;
		uint8_t *enc = encode_exact(codecs[k], zeros, n, &len);
		ssize_t r = compress_decode_stream(ctx, codecs[k], enc, len, SIZE_MAX, count_sink, &seen);

		cr_assert_eq(r, -ENOBUFS, "%s: %zd", compress_codec_name(codecs[k]), r);
		cr_assert_leq(seen, COMPRESS_INFLATE_MAX, "%s: %zu bytes passed the bound",
			      compress_codec_name(codecs[k]), seen);
		free(enc);
	}
	free(zeros);
}

Test(compress, stream_garbage_and_truncation_are_ebadmsg)
{
	uint8_t *rnd = make_random(4096, 3);
	uint8_t *txt = make_text(300 * 1024);
	size_t seen = 0;

	for (size_t k = 1; k < NCODECS; k++) {
		size_t len;
		uint8_t *enc = encode_exact(codecs[k], txt, 300 * 1024, &len);
		uint8_t *cut = dup_exact(enc, len - 3);
		ssize_t r;

		r = compress_decode_stream(ctx, codecs[k], rnd, 4096, SIZE_MAX, count_sink, &seen);
		cr_assert_eq(r, -EBADMSG, "%s garbage: %zd", compress_codec_name(codecs[k]), r);
		r = compress_decode_stream(ctx, codecs[k], cut, len - 3, SIZE_MAX, count_sink, &seen);
		cr_assert_eq(r, -EBADMSG, "%s truncated: %zd", compress_codec_name(codecs[k]), r);
		r = compress_decode_stream(ctx, codecs[k], rnd, 0, SIZE_MAX, count_sink, &seen);
		cr_assert_eq(r, -EBADMSG, "%s empty: %zd", compress_codec_name(codecs[k]), r);
		/* the ctx still works after the errors */
		check_streams_to(codecs[k], enc, len, txt, 300 * 1024);
		free(cut);
		free(enc);
	}
	cr_assert_eq(compress_decode_stream(ctx, COMPRESS_NONE, txt, 10, SIZE_MAX, count_sink, &seen), -EINVAL);
	free(txt);
	free(rnd);
}

/* A snappy copy reaching further back than what was decoded, and one
 * further than 64 KiB (no snappy compressor writes it): -EBADMSG, in a
 * block larger than the window (the streaming decoder). */
Test(compress, stream_snappy_far_copy_is_ebadmsg)
{
	static const uint8_t pre[] = { 0x80, 0x80, 0x80, 0x01 };   /* 2 MiB */
	size_t lit = 100000, len = 0, seen = 0;
	uint8_t *f = malloc(16 + lit);

	memcpy(f, pre, sizeof(pre));
	len = sizeof(pre);
	f[len++] = 59 << 2;                   /* a literal of 60 bytes */
	memset(f + len, 'a', 60);
	len += 60;
	f[len++] = (uint8_t)(2 | (63 << 2));  /* copy 64 bytes from offset 61 */
	f[len++] = 61;
	f[len++] = 0;
	cr_assert_eq(compress_decode_stream(ctx, COMPRESS_SNAPPY, f, len, SIZE_MAX, count_sink, &seen), -EBADMSG);

	len = sizeof(pre);
	f[len++] = 62 << 2;                   /* a literal of 100000 bytes */
	f[len++] = (uint8_t)((lit - 1) & 0xff);
	f[len++] = (uint8_t)((lit - 1) >> 8 & 0xff);
	f[len++] = (uint8_t)((lit - 1) >> 16);
	memset(f + len, 'b', lit);
	len += lit;
	f[len++] = (uint8_t)(3 | (63 << 2));  /* copy 64 bytes from offset 70000 */
	f[len++] = 70000 & 0xff;
	f[len++] = 70000 >> 8 & 0xff;
	f[len++] = 70000 >> 16;
	f[len++] = 0;
	cr_assert_eq(compress_decode_stream(ctx, COMPRESS_SNAPPY, f, len, SIZE_MAX, count_sink, &seen), -EBADMSG);
	free(f);
}
