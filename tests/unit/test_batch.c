/* tests/unit/test_batch.c — RecordBatch v2 validation: every error code. */
#include "tests/unit/helpers.h"

static uint8_t buf[1 << 20];

static void recrc(uint8_t *b)
{
	be32_store(b + OF_Crc, batch_compute_crc(b, batch_size(b)));
}

Test(batch, crc32c_known_vector)
{
	cr_assert_eq(batch_crc32c((const uint8_t *)"123456789", 9), 0xe3069283u);
}

Test(batch, valid_batch_passes)
{
	struct batch_info bi;
	uint32_t n = test_batch(buf, sizeof(buf), 0, 10, 50, 3, 1000);

	cr_assert_eq(batch_validate(buf, n, 0, BATCH_V_PRODUCE, &bi), 0);
	cr_assert_eq(bi.size, n);
	cr_assert_eq(bi.records, 10);
	cr_assert_eq(bi.last_offset_delta, 9);
	cr_assert_eq(bi.max_timestamp, 1009);
}

Test(batch, truncated)
{
	uint32_t n = test_batch(buf, sizeof(buf), 0, 3, 10, 1, 1);

	cr_assert_eq(batch_validate(buf, n - 1, 0, 0, NULL), -BATCH_ERR_TRUNCATED);
	cr_assert_eq(batch_validate(buf, 10, 0, 0, NULL), -BATCH_ERR_TRUNCATED);
}

Test(batch, length_below_header)
{
	uint32_t n = test_batch(buf, sizeof(buf), 0, 3, 10, 1, 1);

	be32_store(buf + OF_BatchLength, 20);
	cr_assert_eq(batch_validate(buf, n, 0, 0, NULL), -BATCH_ERR_LENGTH);
	be32_store(buf + OF_BatchLength, (uint32_t)-5);
	cr_assert_eq(batch_validate(buf, n, 0, 0, NULL), -BATCH_ERR_LENGTH);
}

Test(batch, too_large)
{
	uint32_t n = test_batch(buf, sizeof(buf), 0, 30, 100, 1, 1);

	cr_assert_eq(batch_validate(buf, n, n - 1, 0, NULL), -BATCH_ERR_TOO_LARGE);
	cr_assert_eq(batch_validate(buf, n, n, 0, NULL), 0);
}

Test(batch, legacy_magic)
{
	uint32_t n = test_batch(buf, sizeof(buf), 0, 3, 10, 1, 1);

	buf[OF_Magic] = 1;
	cr_assert_eq(batch_validate(buf, n, 0, 0, NULL), -BATCH_ERR_MAGIC);
	buf[OF_Magic] = 0;
	cr_assert_eq(batch_validate(buf, n, 0, 0, NULL), -BATCH_ERR_MAGIC);
}

Test(batch, bad_crc_every_covered_byte)
{
	uint32_t n = test_batch(buf, sizeof(buf), 0, 3, 10, 1, 1);

	for (uint32_t i = OF_Attributes; i < n; i++) {
		buf[i] ^= 0x10;
		cr_assert_eq(batch_validate(buf, n, 0, 0, NULL), -BATCH_ERR_CRC, "byte %u", i);
		buf[i] ^= 0x10;
	}
	/* BaseOffset and leader epoch are outside the CRC: stamping keeps it valid */
	batch_set_base_offset(buf, 123456);
	batch_set_leader_epoch(buf, 7);
	cr_assert_eq(batch_validate(buf, n, 0, 0, NULL), 0);
}

Test(batch, count_inconsistent)
{
	uint32_t n = test_batch(buf, sizeof(buf), 0, 3, 10, 1, 1);

	be32_store(buf + OF_RecordsCount, 4);
	recrc(buf);
	cr_assert_eq(batch_validate(buf, n, 0, BATCH_V_PRODUCE, NULL), -BATCH_ERR_COUNT);
	be32_store(buf + OF_RecordsCount, 0);
	recrc(buf);
	cr_assert_eq(batch_validate(buf, n, 0, BATCH_V_PRODUCE, NULL), -BATCH_ERR_COUNT);
	be32_store(buf + OF_RecordsCount, 3);
	be32_store(buf + OF_LastOffsetDelta, 5);
	recrc(buf);
	cr_assert_eq(batch_validate(buf, n, 0, BATCH_V_PRODUCE, NULL), -BATCH_ERR_COUNT);
}

Test(batch, record_framing)
{
	uint32_t n = test_batch(buf, sizeof(buf), 0, 3, 10, 1, 1);

	/* first record's length varint says more than the batch holds */
	buf[OF_Records] = 0x7e;
	recrc(buf);
	cr_assert_eq(batch_validate(buf, n, 0, 0, NULL), -BATCH_ERR_RECORD);
	/* a follower's check (the leader walked the records): the header
	 * and the CRC, which these bytes pass */
	cr_assert_eq(batch_validate(buf, n, 0, BATCH_V_NO_RECORDS, NULL), 0);
	buf[n - 1] ^= 0x40;
	cr_assert_eq(batch_validate(buf, n, 0, BATCH_V_NO_RECORDS, NULL), -BATCH_ERR_CRC);
	buf[n - 1] ^= 0x40;
	n = test_batch(buf, sizeof(buf), 0, 3, 10, 1, 1);
	/* trailing garbage after the last record */
	be32_store(buf + OF_BatchLength, (uint32_t)batch_length(buf) + 1);
	buf[n] = 0;
	recrc(buf);
	cr_assert_eq(batch_validate(buf, n + 1, 0, 0, NULL), -BATCH_ERR_INNER);
}

Test(batch, offset_delta_out_of_sequence)
{
	struct batch_builder bb;

	batch_builder_init(&bb, buf, sizeof(buf), 1);
	cr_assert_eq(batch_builder_add(&bb, 0, 1, "a", 1, "x", 1, NULL, 0, 0), 0);
	cr_assert_eq(batch_builder_add(&bb, 2, 1, "a", 1, "x", 1, NULL, 0, 0), 0);
	ssize_t n = batch_builder_finish(&bb, 0, 1, -1, -1, -1);
	cr_assert_gt(n, 0);
	cr_assert_eq(batch_validate(buf, (size_t)n, 0, BATCH_V_PRODUCE, NULL), -BATCH_ERR_INNER);
}

Test(batch, codec_and_attributes)
{
	uint32_t n = test_batch(buf, sizeof(buf), 0, 3, 10, 1, 1);

	be16_store(buf + OF_Attributes, 5);
	recrc(buf);
	cr_assert_eq(batch_validate(buf, n, 0, 0, NULL), -BATCH_ERR_CODEC);
	be16_store(buf + OF_Attributes, 0x100);
	recrc(buf);
	cr_assert_eq(batch_validate(buf, n, 0, 0, NULL), -BATCH_ERR_ATTRIBUTES);
}

Test(batch, headers_and_nulls_iterate)
{
	struct batch_builder bb;
	struct record_iter it;
	struct record_view rv;
	uint8_t hdr[64];
	size_t hl = 0;

	hl += varint_encode(hdr + hl, 2);
	memcpy(hdr + hl, "h1", 2);
	hl += 2;
	hl += varint_encode(hdr + hl, -1);
	batch_builder_init(&bb, buf, sizeof(buf), 100);
	cr_assert_eq(batch_builder_add(&bb, 0, 100, NULL, 0, NULL, 0, hdr, hl, 1), 0);
	ssize_t n = batch_builder_finish(&bb, 0, -1, -1, -1, -1);
	cr_assert_eq(batch_validate(buf, (size_t)n, 0, BATCH_V_PRODUCE, NULL), 0);
	record_iter_init(&it, buf + OF_Records, (size_t)n - OF_Records, 1);
	cr_assert_eq(record_iter_next(&it, &rv), 1);
	cr_assert_null(rv.key);
	cr_assert_null(rv.value);
	cr_assert_eq(rv.headers_count, 1);
	cr_assert_eq(record_iter_next(&it, &rv), 0);
}

Test(batch, every_error_has_a_name)
{
	for (int e = 1; e < BATCH_ERR__COUNT; e++)
		cr_assert_str_neq(batch_strerror(-e), "unknown batch error");
}

/* ---- record_check and compressed batches ---------------------------- */

#include "storage/compress.h"

static uint8_t cbuf[8 << 20];

/* A valid batch fed one byte at a time, and in pieces of every size up to
 * 64, checks as it does whole. */
Test(batch, record_check_in_pieces)
{
	uint32_t n = test_batch(buf, sizeof(buf), 0, 20, 300, 3, 1000);
	const uint8_t *rec = buf + OF_Records;
	size_t len = n - OF_Records;

	for (size_t piece = 1; piece <= 64; piece++) {
		struct record_check rc;

		record_check_init(&rc, 20, 19, BATCH_V_PRODUCE);
		for (size_t at = 0; at < len; at += piece)
			cr_assert_eq(record_check_feed(&rc, rec + at, len - at < piece ? len - at : piece), 0);
		cr_assert_eq(record_check_end(&rc), 0, "pieces of %zu", piece);
	}
}

/* Records with headers and null keys/values, and a header value of
 * length 0 ending a record exactly at a piece boundary. */
Test(batch, record_check_headers_and_nulls)
{
	struct batch_builder bb;
	struct record_check rc;
	uint8_t hdr[16];
	size_t hl = 0;

	hl += varint_encode(hdr + hl, 1);
	hdr[hl++] = 'h';
	hl += varint_encode(hdr + hl, 0);          /* empty header value */
	batch_builder_init(&bb, buf, sizeof(buf), 5);
	cr_assert_eq(batch_builder_add(&bb, 0, 5, NULL, 0, NULL, 0, hdr, hl, 1), 0);
	cr_assert_eq(batch_builder_add(&bb, 1, 6, "k", 1, "v", 1, hdr, hl, 1), 0);
	ssize_t n = batch_builder_finish(&bb, 0, -1, -1, -1, -1);
	cr_assert_gt(n, 0);
	cr_assert_eq(batch_validate(buf, (size_t)n, 0, BATCH_V_PRODUCE, NULL), 0);
	for (size_t cut = 0; cut <= (size_t)n - OF_Records; cut++) {
		record_check_init(&rc, 2, 1, BATCH_V_PRODUCE);
		cr_assert_eq(record_check_feed(&rc, buf + OF_Records, cut), 0);
		cr_assert_eq(record_check_feed(&rc, buf + OF_Records + cut, (size_t)n - OF_Records - cut), 0);
		cr_assert_eq(record_check_end(&rc), 0, "cut at %zu", cut);
	}
}

/* The batch in buf (n bytes, uncompressed) compressed with codec into
 * cbuf, header kept, count and last offset delta as given. */
static uint32_t compress_batch(struct compress_ctx *cc, int codec, uint32_t n, int32_t count, int32_t lod)
{
	ssize_t r;

	memcpy(cbuf, buf, OF_Records);
	r = compress_encode(cc, codec, buf + OF_Records, n - OF_Records, cbuf + OF_Records,
			    sizeof(cbuf) - OF_Records);
	cr_assert_gt(r, 0);
	be32_store(cbuf + OF_BatchLength, (uint32_t)(OF_Records + r - BATCH_LOG_OVERHEAD));
	be16_store(cbuf + OF_Attributes, (uint16_t)codec);
	be32_store(cbuf + OF_RecordsCount, (uint32_t)count);
	be32_store(cbuf + OF_LastOffsetDelta, (uint32_t)lod);
	be32_store(cbuf + OF_Crc, batch_compute_crc(cbuf, batch_size(cbuf)));
	return batch_size(cbuf);
}

static int check_compressed(struct compress_ctx *cc, uint32_t size)
{
	struct batch_info bi;
	int rc = batch_validate(cbuf, size, 0, BATCH_V_PRODUCE, &bi);

	cr_assert_eq(rc, 0, "header: %s", batch_strerror(rc));
	return batch_check_records(cc, cbuf, &bi, BATCH_V_PRODUCE);
}

/* The issue-17 cases, every codec: a header saying 1 record over 3, an
 * inner offset delta of 1,000,000, a record length overrunning the data,
 * garbage, a 100 MiB bomb; and the valid batch. */
Test(batch, compressed_records_checked)
{
	struct compress_ctx *cc;
	static const int codecs[] = { COMPRESS_GZIP, COMPRESS_SNAPPY, COMPRESS_LZ4, COMPRESS_ZSTD };

	cr_assert_eq(compress_ctx_create(&cc), 0);
	for (size_t k = 0; k < sizeof(codecs) / sizeof(codecs[0]); k++) {
		int c = codecs[k];
		uint32_t n = test_batch(buf, sizeof(buf), 0, 3, 2000, 2, 1000), m;
		struct batch_builder bb;
		ssize_t bn;

		m = compress_batch(cc, c, n, 3, 2);
		cr_assert_eq(check_compressed(cc, m), 0, "%s valid", compress_codec_name(c));
		m = compress_batch(cc, c, n, 1, 0);
		cr_assert_eq(check_compressed(cc, m), -BATCH_ERR_INNER, "%s 1 over 3", compress_codec_name(c));
		m = compress_batch(cc, c, n, 4, 3);
		cr_assert_eq(check_compressed(cc, m), -BATCH_ERR_INNER, "%s 4 over 3", compress_codec_name(c));

		batch_builder_init(&bb, buf, sizeof(buf), 1);
		cr_assert_eq(batch_builder_add(&bb, 1000000, 1, "k", 1, "v", 1, NULL, 0, 0), 0);
		bn = batch_builder_finish(&bb, 0, 0, -1, -1, -1);
		m = compress_batch(cc, c, (uint32_t)bn, 1, 0);
		cr_assert_eq(check_compressed(cc, m), -BATCH_ERR_INNER, "%s delta 1000000", compress_codec_name(c));

		n = test_batch(buf, sizeof(buf), 0, 1, 10, 1, 1);
		buf[OF_Records] = 0x7e;   /* the record's length: 63, more than there is */
		m = compress_batch(cc, c, n, 1, 0);
		cr_assert_eq(check_compressed(cc, m), -BATCH_ERR_RECORD, "%s overrun", compress_codec_name(c));

		n = test_batch(buf, sizeof(buf), 0, 1, 10, 1, 1);
		m = compress_batch(cc, c, n, 1, 0);
		for (uint32_t i = OF_Records; i < m; i++)
			cbuf[i] = (uint8_t)(i * 131 + 7);
		be32_store(cbuf + OF_Crc, batch_compute_crc(cbuf, m));
		cr_assert_eq(check_compressed(cc, m), -BATCH_ERR_DECOMPRESS, "%s garbage", compress_codec_name(c));

		batch_builder_init(&bb, buf, sizeof(buf), 1);
		{
			static uint8_t zeros[100 << 20];
			static uint8_t big[(100 << 20) + 256];

			batch_builder_init(&bb, big, sizeof(big), 1);
			cr_assert_eq(batch_builder_add(&bb, 0, 1, NULL, 0, zeros, sizeof(zeros), NULL, 0, 0), 0);
			bn = batch_builder_finish(&bb, 0, 0, -1, -1, -1);
			memcpy(cbuf, big, OF_Records);
			{
				ssize_t r = compress_encode(cc, c, big + OF_Records, (size_t)bn - OF_Records,
							    cbuf + OF_Records, sizeof(cbuf) - OF_Records);

				cr_assert_gt(r, 0);
				be32_store(cbuf + OF_BatchLength, (uint32_t)(OF_Records + r - BATCH_LOG_OVERHEAD));
				be16_store(cbuf + OF_Attributes, (uint16_t)c);
				be32_store(cbuf + OF_Crc, batch_compute_crc(cbuf, batch_size(cbuf)));
			}
			cr_assert_eq(check_compressed(cc, batch_size(cbuf)), -BATCH_ERR_INFLATE, "%s bomb",
				     compress_codec_name(c));
		}
	}
	compress_ctx_destroy(cc);
}
