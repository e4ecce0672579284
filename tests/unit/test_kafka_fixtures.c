/* tests/unit/test_kafka_fixtures.c — request frames captured from real
 * clients (kcat/librdkafka 2.0.2, kafka-python 2.0.2) by
 * tests/kafka/capture-clients.py, decoded by the codec and re-encoded byte
 * for byte. Run from the repository root (make unit-test does). */
#include <criterion/criterion.h>
#include <stdio.h>

#include "dataplane/kafka/kafka_codec.h"

static uint8_t frame[1 << 16], out[1 << 16], arena_mem[1 << 20];

/* Decode fixture NAME, check its ApiKey/version, re-encode it. */
static void *decode_fixture(const char *name, int16_t key, int16_t version, struct kafka_request *req)
{
	static struct kafka_arena a;
	char path[256];
	struct kafka_writer w;
	size_t len;
	FILE *f;
	int rc;

	snprintf(path, sizeof path, "tests/fixtures/kafka/%s.bin", name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s missing (run tests/kafka/capture-clients.py)", path);
	len = fread(frame, 1, sizeof frame, f);
	fclose(f);
	cr_assert_geq(len, 12);
	cr_assert_eq(kafka_load_be(frame, 4), len - 4, "%s: size prefix", name);

	kafka_arena_init(&a, arena_mem, sizeof arena_mem);
	rc = kafka_request_decode(frame + 4, len - 4, &a, req);
	cr_assert_eq(rc, 0, "%s: decode %d", name, rc);
	cr_assert_eq(req->header.RequestApiKey, key);
	cr_assert_eq(req->header.RequestApiVersion, version);
	cr_assert_leq(a.used, kafka_arena_bound(len - 4));

	kafka_writer_init(&w, out, sizeof out);
	cr_assert_eq(kafka_request_encode(&w, req), 0);
	cr_assert_eq(w.len, len, "%s: re-encoded %zu of %zu bytes", name, w.len, len);
	cr_assert(!memcmp(out, frame, len), "%s: re-encode differs", name);
	return req->body;
}

/* A produced batch: RecordBatch v2 (magic 2) with one record. */
static void check_batch(struct kafka_bytes records)
{
	cr_assert_gt(records.len, 61);
	cr_assert_eq(kafka_load_be(records.ptr + 8, 4) + 12, (uint64_t)records.len); /* batchLength */
	cr_assert_eq(records.ptr[16], 2);                                            /* magic */
	cr_assert_eq(kafka_load_be(records.ptr + 57, 4), 1);                         /* recordsCount */
	cr_assert(records.ptr >= frame && records.ptr < frame + sizeof frame);     /* zero copy */
}

static void check_produce(struct kafka_produce_request *p)
{
	cr_assert_eq(p->TransactionalId.len, -1);
	cr_assert_eq(p->TopicData.count, 1);
	cr_assert(kafka_str_eq(p->TopicData.items[0].Name, "t"));
	cr_assert_eq(p->TopicData.items[0].PartitionData.count, 1);
	cr_assert_eq(p->TopicData.items[0].PartitionData.items[0].Index, 0);
	check_batch(p->TopicData.items[0].PartitionData.items[0].Records);
}

Test(kafka_fixtures, kcat_api_versions_v3_is_flexible)
{
	struct kafka_request req;
	struct kafka_api_versions_request *b = decode_fixture("kcat-apiversions-v3", 18, 3, &req);

	cr_assert_eq(req.header_version, 2);
	cr_assert(kafka_str_eq(req.header.ClientId, "rdkafka"));
	cr_assert(kafka_str_eq(b->ClientSoftwareName, "librdkafka"));
	cr_assert(kafka_str_eq(b->ClientSoftwareVersion, "2.0.2"));
}

Test(kafka_fixtures, kcat_metadata_v4)
{
	struct kafka_request req;
	struct kafka_metadata_request *b = decode_fixture("kcat-metadata-v4", 3, 4, &req);

	cr_assert_eq(req.header_version, 1);
	cr_assert_geq(b->Topics.count, 1);
	cr_assert(kafka_str_eq(b->Topics.items[0].Name, "t"));
}

Test(kafka_fixtures, kcat_produce_v7)
{
	struct kafka_request req;
	struct kafka_produce_request *b = decode_fixture("kcat-produce-v7", 0, 7, &req);

	check_produce(b);
}

Test(kafka_fixtures, kafka_python_api_versions_v0)
{
	struct kafka_request req;

	decode_fixture("kpy-apiversions-v0", 18, 0, &req);
	cr_assert(kafka_str_eq(req.header.ClientId, "kafka-python-producer-1"));
}

Test(kafka_fixtures, kafka_python_metadata_v0_probe_and_v1)
{
	struct kafka_request req;
	struct kafka_metadata_request *b = decode_fixture("kpy-metadata-v0", 3, 0, &req);

	cr_assert_geq(b->Topics.count, 0);
	b = decode_fixture("kpy-metadata-v1", 3, 1, &req);
	cr_assert_eq(b->Topics.count, -1); /* v1: null means all topics */
}

Test(kafka_fixtures, kafka_python_produce_v7)
{
	struct kafka_request req;
	struct kafka_produce_request *b = decode_fixture("kpy-produce-v7", 0, 7, &req);

	check_produce(b);
}
