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
	n = test_batch(buf, sizeof(buf), 0, 3, 10, 1, 1);
	/* trailing garbage after the last record */
	be32_store(buf + OF_BatchLength, (uint32_t)batch_length(buf) + 1);
	buf[n] = 0;
	recrc(buf);
	cr_assert_eq(batch_validate(buf, n + 1, 0, 0, NULL), -BATCH_ERR_RECORD);
}

Test(batch, offset_delta_out_of_sequence)
{
	struct batch_builder bb;

	batch_builder_init(&bb, buf, sizeof(buf), 1);
	cr_assert_eq(batch_builder_add(&bb, 0, 1, "a", 1, "x", 1, NULL, 0, 0), 0);
	cr_assert_eq(batch_builder_add(&bb, 2, 1, "a", 1, "x", 1, NULL, 0, 0), 0);
	ssize_t n = batch_builder_finish(&bb, 0, 1, -1, -1, -1);
	cr_assert_gt(n, 0);
	cr_assert_eq(batch_validate(buf, (size_t)n, 0, BATCH_V_PRODUCE, NULL), -BATCH_ERR_RECORD);
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
