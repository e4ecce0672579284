/* tests/unit/test_kafka_codec.c — the generated Kafka codec: round trip of
 * every message at every generated version, the ApiKey table, frames, and
 * the allocation bound. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "dataplane/kafka/kafka_codec.h"
#include "tests/kafka/kafka_sample.h"
#include "tests/kafka/kafka_sample.c"

#define ROUNDS 60
#define MEM (1u << 20)

static uint8_t sample_mem[MEM], decode_mem[MEM], buf1[MEM], buf2[MEM], flat[MEM];

/* Encode m (measure first, then flat); returns the exact size. */
static size_t encode_flat(const struct kafka_msg_desc *d, int16_t v, const void *m, uint8_t *out)
{
	struct kafka_writer w;
	size_t need;

	kafka_writer_init_measure(&w, false);
	d->encode(&w, v, m);
	cr_assert_eq(w.err, 0, "%s v%d: measure err %d", d->name, v, w.err);
	need = w.total;
	cr_assert_eq(w.len, need);
	kafka_writer_init(&w, out, need);
	d->encode(&w, v, m);
	cr_assert_eq(w.err, 0, "%s v%d: encode err %d", d->name, v, w.err);
	cr_assert_eq(w.len, need, "%s v%d: measured %zu, wrote %zu", d->name, v, need, w.len);
	return need;
}

static void round_trip(size_t i, int16_t v, uint64_t seed)
{
	const struct kafka_msg_desc *d = &kafka_msg_descs[i];
	const struct kafka_sample_desc *sd = &kafka_sample_descs[i];
	struct kafka_sample s = { .rng = seed * 0x9E3779B97F4A7C15ull + 1 };
	struct kafka_arena a;
	struct kafka_cursor c;
	void *m1, *m2;
	size_t n1, n2;
	int rc;

	cr_assert_str_eq(d->name, sd->name);
	kafka_arena_init(&s.arena, sample_mem, sizeof sample_mem);
	kafka_arena_init(&a, decode_mem, sizeof decode_mem);
	m1 = sd->sample(&s, v);
	n1 = encode_flat(d, v, m1, buf1);

	m2 = kafka_arena_alloc(&a, d->size);
	kafka_cursor_init(&c, buf1, n1);
	rc = d->decode(&c, &a, v, m2);
	cr_assert_eq(rc, 0, "%s v%d seed %llu: decode %d", d->name, v, (unsigned long long)seed, rc);
	cr_assert_eq(kafka_cursor_left(&c), 0, "%s v%d: %zu bytes left", d->name, v, kafka_cursor_left(&c));
	cr_assert(sd->equal(m1, m2), "%s v%d seed %llu: decoded %s differs", d->name, v,
		  (unsigned long long)seed, kafka_sample_last_difference);
	cr_assert_leq(a.used, kafka_arena_bound(n1));

	n2 = encode_flat(d, v, m2, buf2);
	cr_assert_eq(n1, n2);
	cr_assert(!memcmp(buf1, buf2, n1), "%s v%d: re-encode differs", d->name, v);
}

Test(kafka_codec, round_trip_every_message_and_version)
{
	size_t cases = 0;

	cr_assert_eq(kafka_msg_desc_count, sizeof kafka_sample_descs / sizeof kafka_sample_descs[0]);
	for (size_t i = 0; i < kafka_msg_desc_count; i++)
		for (int16_t v = kafka_msg_descs[i].min_version; v <= kafka_msg_descs[i].max_version; v++)
			for (uint64_t seed = 1; seed <= ROUNDS; seed++, cases++)
				round_trip(i, v, seed);
	cr_log_info("%zu round trips", cases);
}

/* Defaults: a default-initialised message survives encode/decode at every
 * version (null strings where nullable, empty arrays, untouched tags). */
Test(kafka_codec, defaults_round_trip)
{
	for (size_t i = 0; i < kafka_msg_desc_count; i++) {
		const struct kafka_msg_desc *d = &kafka_msg_descs[i];

		for (int16_t v = d->min_version; v <= d->max_version; v++) {
			struct kafka_arena a;
			struct kafka_cursor c;
			struct kafka_writer w;
			void *m1, *m2;

			kafka_arena_init(&a, decode_mem, sizeof decode_mem);
			m1 = kafka_arena_alloc(&a, d->size);
			m2 = kafka_arena_alloc(&a, d->size);
			d->init(m1);
			kafka_writer_init(&w, buf1, sizeof buf1);
			d->encode(&w, v, m1);
			if (w.err == -EINVAL)
				continue; /* a non-nullable field defaults to null */
			cr_assert_eq(w.err, 0);
			kafka_cursor_init(&c, buf1, w.len);
			cr_assert_eq(d->decode(&c, &a, v, m2), 0, "%s v%d", d->name, v);
			cr_assert_eq(kafka_cursor_left(&c), 0);
			cr_assert(kafka_sample_descs[i].equal(m1, m2), "%s v%d: %s", d->name, v,
				  kafka_sample_last_difference);
		}
	}
}

/* Every strict prefix of a valid message is refused cleanly. */
Test(kafka_codec, truncated_messages_are_refused)
{
	for (size_t i = 0; i < kafka_msg_desc_count; i++) {
		const struct kafka_msg_desc *d = &kafka_msg_descs[i];

		for (int16_t v = d->min_version; v <= d->max_version; v++) {
			struct kafka_sample s = { .rng = 77 + i * 31 + (uint64_t)v };
			struct kafka_arena a;
			size_t n;
			void *m;

			kafka_arena_init(&s.arena, sample_mem, sizeof sample_mem);
			n = encode_flat(d, v, kafka_sample_descs[i].sample(&s, v), buf1);
			for (size_t cut = 0; cut < n; cut++) {
				struct kafka_cursor c;
				int rc;

				kafka_arena_init(&a, decode_mem, sizeof decode_mem);
				m = kafka_arena_alloc(&a, d->size);
				kafka_cursor_init(&c, buf1, cut);
				rc = d->decode(&c, &a, v, m);
				/* Every field is needed, so every prefix fails. */
				cr_assert(rc == -EBADMSG, "%s v%d cut %zu/%zu: rc %d", d->name, v, cut, n, rc);
			}
		}
	}
}

Test(kafka_codec, iovec_encode_references_records)
{
	static uint8_t records[4096];
	struct kafka_produce_request req;
	struct kafka_produce_request_topic_produce_data topic;
	struct kafka_produce_request_partition_produce_data parts[3];
	struct kafka_writer w;
	struct iovec iov[16];
	size_t n_flat, off = 0;
	int cnt;

	for (size_t i = 0; i < sizeof records; i++)
		records[i] = (uint8_t)i;
	kafka_produce_request_init(&req);
	req.Acks = -1;
	req.TimeoutMs = 30000;
	req.TopicData.items = &topic;
	req.TopicData.count = 1;
	topic.Name = (struct kafka_str){ "t", 1 };
	topic.PartitionData.items = parts;
	topic.PartitionData.count = 3;
	for (int i = 0; i < 3; i++) {
		parts[i].Index = i;
		parts[i].Records = (struct kafka_bytes){ records, i == 1 ? 100 : (int32_t)sizeof records };
	}
	n_flat = encode_flat(&kafka_msg_descs[0], 7, &req, flat);

	kafka_writer_init_measure(&w, true);
	kafka_produce_request_encode(&w, 7, &req);
	cnt = kafka_writer_finish(&w);
	cr_assert_eq(w.total, n_flat);
	cr_assert_eq(cnt, 4); /* head, records, mid (small records copied), records */
	cr_assert_eq(w.len, n_flat - 2 * sizeof records);

	kafka_writer_init_iov(&w, buf1, sizeof buf1, iov, 16);
	kafka_produce_request_encode(&w, 7, &req);
	cr_assert_eq(kafka_writer_finish(&w), 4);
	cr_assert_eq(iov[1].iov_base, records);
	for (int i = 0; i < 4; i++) {
		cr_assert(!memcmp(flat + off, iov[i].iov_base, iov[i].iov_len));
		off += iov[i].iov_len;
	}
	cr_assert_eq(off, n_flat);
}

Test(kafka_codec, api_table_is_consistent)
{
	for (size_t i = 0; i < KAFKA_API_COUNT; i++) {
		const struct kafka_api *api = &kafka_apis[i];

		cr_assert(i == 0 || kafka_apis[i - 1].api_key < api->api_key);
		cr_assert_eq(kafka_api_find(api->api_key), api);
		cr_assert_leq(api->min_version, api->adv_min, "%s", api->name);
		cr_assert_geq(api->max_version, api->adv_max, "%s", api->name);
		cr_assert_eq(api->request->api_key, api->api_key);
		cr_assert_eq(api->response->api_key, api->api_key);
		cr_assert_eq(api->request->min_version, api->min_version);
		cr_assert_eq(api->request->max_version, api->max_version);
		/* a handler exists only for what is advertised */
		cr_assert(!api->handler || api->advertised, "%s has a handler but is not advertised", api->name);
	}
	cr_assert_not_null(kafka_api_find(0)->handler, "Produce is implemented");
	cr_assert_not_null(kafka_api_find(18)->handler, "ApiVersions is implemented");
	cr_assert_null(kafka_api_find(4));
	cr_assert_null(kafka_api_find(-1));
	cr_assert(kafka_api_find(17)->advertised);   /* SASL listeners; ILLEGAL_SASL_STATE elsewhere, as Kafka */
	cr_assert(kafka_api_find(29)->advertised && kafka_api_find(29)->handler);   /* ACLs (docs/security.md) */
	cr_assert_eq(kafka_api_find(22)->max_version, 4);
	cr_assert_eq(kafka_api_find(22)->adv_max, 4);   /* flexible from 2: KIP-360's epoch bump */
	cr_assert_eq(kafka_api_find(22)->first_flexible, 2);
	cr_assert_eq(kafka_api_find(18)->first_flexible, 3);
	cr_assert_eq(kafka_api_find(0)->first_flexible, 9);
}

Test(kafka_codec, api_versions_response_comes_from_the_table)
{
	struct kafka_api_versions_response r;
	struct kafka_api_versions_response_api_version keys[KAFKA_API_COUNT];
	int n;

	kafka_api_versions_response_init(&r);
	int implemented = 0;

	for (size_t i = 0; i < KAFKA_API_COUNT; i++)
		implemented += kafka_apis[i].advertised && kafka_apis[i].handler;
	n = kafka_api_versions_fill(&r, keys, KAFKA_API_COUNT);
	cr_assert_eq(n, implemented, "exactly the implemented APIs are advertised");
	cr_assert_gt(n, 5);
	cr_assert_eq(kafka_api_versions_fill(&r, keys, 3), -ENOBUFS);
	n = kafka_api_versions_fill(&r, keys, KAFKA_API_COUNT);
	for (int i = 0; i < n; i++) {
		const struct kafka_api *api = kafka_api_find(keys[i].ApiKey);

		cr_assert(api && api->advertised && api->handler);
		cr_assert_eq(keys[i].MinVersion, api->adv_min);
		cr_assert_eq(keys[i].MaxVersion, api->adv_max);
	}
	/* Produce 0-7 (librdkafka <= 2.11 compresses only for a broker whose
	 * Produce minimum is 0) and Fetch 4-15 (MsgVer2 needs 4 and ZSTD 10 in
	 * the range; 12 brings the last fetched epoch, KIP-320; 13 topic ids,
	 * KIP-516; 15 ReplicaState, KIP-903). */
	cr_assert_eq(keys[0].ApiKey, 0);
	cr_assert_eq(keys[0].MinVersion, 0);
	cr_assert_eq(keys[0].MaxVersion, 7);
	cr_assert_eq(keys[1].MinVersion, 4);
	cr_assert_eq(keys[1].MaxVersion, 15);
}

/* ApiVersions v3: request header v2 (tags) but response header v0. */
Test(kafka_codec, frames_and_header_versions)
{
	static const uint8_t apiv3[] = {
		0, 18, 0, 3, 0, 0, 0, 7, 0, 3, 'c', 'l', 'i', 0, /* header v2, no tags */
		4, 'l', 'i', 'b', 4, '2', '.', '0', 0,             /* compact strings, tags */
	};
	struct kafka_api_versions_response_api_version keys[KAFKA_API_COUNT];
	struct kafka_api_versions_response resp;
	struct kafka_api_versions_request *body;
	struct kafka_request req;
	struct kafka_response out;
	struct kafka_arena a;
	struct kafka_writer w;

	kafka_arena_init(&a, decode_mem, sizeof decode_mem);
	cr_assert_eq(kafka_request_decode(apiv3, sizeof apiv3, &a, &req), 0);
	cr_assert_eq(req.header_version, 2);
	cr_assert_eq(req.header.CorrelationId, 7);
	cr_assert(kafka_str_eq(req.header.ClientId, "cli"));
	body = req.body;
	cr_assert(kafka_str_eq(body->ClientSoftwareName, "lib"));
	cr_assert(kafka_str_eq(body->ClientSoftwareVersion, "2.0"));

	kafka_writer_init(&w, buf1, sizeof buf1);
	cr_assert_eq(kafka_request_encode(&w, &req), 0);
	cr_assert_eq(w.len, sizeof apiv3 + 4);
	cr_assert_eq(kafka_load_be(buf1, 4), sizeof apiv3);
	cr_assert(!memcmp(buf1 + 4, apiv3, sizeof apiv3));

	kafka_api_versions_response_init(&resp);
	kafka_api_versions_fill(&resp, keys, KAFKA_API_COUNT);
	kafka_writer_init(&w, buf2, sizeof buf2);
	cr_assert_eq(kafka_response_encode(&w, 18, 3, 7, &resp), 0);
	cr_assert_eq(kafka_load_be(buf2 + 4, 4), 7);   /* correlation id */
	cr_assert_eq(kafka_load_be(buf2 + 8, 2), 0);   /* error code: no header tags */
	cr_assert_eq(kafka_response_decode(buf2 + 4, w.len - 4, 18, 3, &a, &out), 0);
	cr_assert_eq(out.header_version, 0);
	cr_assert_eq(((struct kafka_api_versions_response *)out.body)->ApiKeys.count, resp.ApiKeys.count);
}

Test(kafka_codec, unsupported_version_still_yields_the_header)
{
	static const uint8_t apiv9[] = { 0, 18, 0, 9, 0, 0, 1, 0, 0xff, 0xff, 1, 2, 3 };
	static const uint8_t unknown_key[] = { 0, 99, 0, 0, 0, 0, 0, 5, 0, 0 };
	struct kafka_request req;
	struct kafka_arena a;

	kafka_arena_init(&a, decode_mem, sizeof decode_mem);
	cr_assert_eq(kafka_request_decode(apiv9, sizeof apiv9, &a, &req), -ENOTSUP);
	cr_assert_eq(req.header.CorrelationId, 256);
	cr_assert_eq(req.header.ClientId.len, -1);
	cr_assert_eq(kafka_request_decode(unknown_key, sizeof unknown_key, &a, &req), -ENOTSUP);
	cr_assert_null(req.api);
	cr_assert_eq(req.header.CorrelationId, 5);
}

/* CVE-2022-34917: a count claims more elements than the frame can hold. */
Test(kafka_codec, huge_counts_are_refused_before_allocation)
{
	/* Metadata v1: header v1, then Topics count 0x7fffffff and 2 bytes. */
	static const uint8_t meta[] = { 0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff,
					0x7f, 0xff, 0xff, 0xff, 0, 1 };
	/* Produce v3 with a records length of 1 GiB. */
	static const uint8_t produce[] = { 0, 0, 0, 3, 0, 0, 0, 1, 0xff, 0xff,
					   0xff, 0xff, 0, 1, 0, 0, 0, 100,
					   0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1,
					   0, 0, 0, 0, 0x40, 0, 0, 0, 1, 2 };
	struct kafka_request req;
	struct kafka_arena a;

	kafka_arena_init(&a, decode_mem, sizeof decode_mem);
	cr_assert_eq(kafka_request_decode(meta, sizeof meta, &a, &req), -EBADMSG);
	cr_assert_leq(a.used, kafka_arena_bound(sizeof meta));
	kafka_arena_reset(&a);
	cr_assert_eq(kafka_request_decode(produce, sizeof produce, &a, &req), -EBADMSG);
	cr_assert_leq(a.used, kafka_arena_bound(sizeof produce));
}

Test(kafka_codec, arena_full_is_enobufs)
{
	static const uint8_t meta[] = { 0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff,
					0, 0, 0, 3, 0, 1, 'a', 0, 1, 'b', 0, 1, 'c' };
	static uint8_t tiny[64];
	struct kafka_request req;
	struct kafka_arena a;

	kafka_arena_init(&a, tiny, sizeof tiny);
	cr_assert_eq(kafka_request_decode(meta, sizeof meta, &a, &req), -ENOBUFS);
	kafka_arena_init(&a, decode_mem, sizeof decode_mem);
	cr_assert_eq(kafka_request_decode(meta, sizeof meta, &a, &req), 0);
	cr_assert_eq(((struct kafka_metadata_request *)req.body)->Topics.count, 3);
}

/* The generator's record of every array: allocated bytes per element never
 * exceed KAFKA_ARENA_PER_BYTE times the element's minimum wire size. */
Test(kafka_codec, allocation_ratio_is_bounded)
{
	size_t worst = 0;
	const char *which = "";

	for (size_t i = 0; i < kafka_array_bound_count; i++) {
		const struct kafka_array_bound *b = &kafka_array_bounds[i];
		size_t r = (b->elem_size + b->min_wire - 1) / b->min_wire;

		cr_assert_geq(b->min_wire, 1);
		if (r > worst) {
			worst = r;
			which = b->field;
		}
	}
	cr_log_info("worst arena bytes per wire byte: %zu (%s)", worst, which);
	cr_assert_leq(worst, KAFKA_ARENA_PER_BYTE, "%s: %zu", which, worst);
}

/* Flexible versions: unknown tags are skipped on read, known ones decoded
 * (ApiVersionsResponse v3 tag 1 is FinalizedFeaturesEpoch). */
Test(kafka_codec, tagged_fields_known_decoded_unknown_skipped)
{
	static const uint8_t req[] = {
		0, 18, 0, 3, 0, 0, 0, 9, 0xff, 0xff,   /* header v2: null client id */
		1, 0x07, 3, 0xaa, 0xbb, 0xcc,          /* header tags: unknown tag 7 */
		2, 'x', 2, 'y',                         /* ClientSoftwareName/Version */
		2, 0x09, 0, 0x40, 1, 0xee,              /* body tags: unknown 9 (empty), 64 */
	};
	static const uint8_t resp_body[] = {
		0, 0, 1, 0, 0, 0, 0,                    /* ErrorCode 0, ApiKeys [], throttle 0 */
		2, 1, 8, 0, 0, 0, 0, 0, 0, 0, 5,        /* tag 1 (epoch 5) */
		0x63, 0,                                /* unknown tag 99, empty */
	};
	struct kafka_api_versions_response r;
	struct kafka_request out;
	struct kafka_arena a;
	struct kafka_cursor c;

	kafka_arena_init(&a, decode_mem, sizeof decode_mem);
	cr_assert_eq(kafka_request_decode(req, sizeof req, &a, &out), 0);
	cr_assert(kafka_str_eq(((struct kafka_api_versions_request *)out.body)->ClientSoftwareName, "x"));
	kafka_cursor_init(&c, resp_body, sizeof resp_body);
	cr_assert_eq(kafka_api_versions_response_decode(&c, &a, 3, &r), 0);
	cr_assert_eq(kafka_cursor_left(&c), 0);
	cr_assert_eq(r.FinalizedFeaturesEpoch, 5);
	cr_assert_eq(r.SupportedFeatures.count, 0);
	/* A known tag whose payload is not exactly its field is refused. */
	static const uint8_t bad[] = { 0, 0, 1, 0, 0, 0, 0, 1, 1, 9, 0, 0, 0, 0, 0, 0, 0, 5, 0 };
	kafka_cursor_init(&c, bad, sizeof bad);
	cr_assert_eq(kafka_api_versions_response_decode(&c, &a, 3, &r), -EBADMSG);
}

/* Encode the error-only response for key/version; returns its size, 0 when
 * the encoder declines (-ENOTSUP). */
static size_t error_frame(int16_t key, int16_t v, int16_t err, uint8_t *out)
{
	struct kafka_writer w;
	size_t need;

	kafka_writer_init_measure(&w, false);
	kafka_error_response_encode(&w, key, v, 1234, err);
	if (w.err == -ENOTSUP)
		return 0;
	cr_assert_eq(w.err, 0, "api %d v%d: error response measure err %d", key, v, w.err);
	need = w.total;
	kafka_writer_init(&w, out, need);
	kafka_error_response_encode(&w, key, v, 1234, err);
	cr_assert_eq(w.err, 0);
	cr_assert_eq(w.len, need);
	return need;
}

/* The error-only responses (UNSUPPORTED_VERSION for what Sluice does not
 * serve) are checked against the real codec at every version the codec
 * has: each decodes with nothing left over, re-encodes to the same bytes,
 * and carries the error where the response's ErrorCode is. */
Test(kafka_codec, error_only_responses_match_the_codec)
{
	int checked = 0;

	for (size_t i = 0; i < KAFKA_API_COUNT; i++) {
		const struct kafka_api *api = &kafka_apis[i];
		const struct kafka_error_layout *l = kafka_error_layout_find(api->api_key);

		cr_assert_not_null(l, "%s: no error layout", api->name);
		for (int16_t v = api->min_version; v <= api->max_version; v++) {
			struct kafka_response resp;
			struct kafka_arena a;
			struct kafka_writer w;
			size_t n = error_frame(api->api_key, v, 35, buf1), n0;
			int rc;

			if (!n) {
				cr_assert(!strchr(l->layouts[v - l->min_version] ? l->layouts[v - l->min_version] : "E", 'E'),
					  "%s v%d: declined though it has an ErrorCode", api->name, v);
				continue;
			}
			kafka_arena_init(&a, decode_mem, sizeof decode_mem);
			rc = kafka_response_decode(buf1 + 4, n - 4, api->api_key, v, &a, &resp);
			cr_assert_eq(rc, 0, "%s v%d: error response does not decode (%d)", api->name, v, rc);
			cr_assert_eq(resp.header.CorrelationId, 1234);
			kafka_writer_init(&w, buf2, sizeof buf2);
			kafka_response_encode(&w, api->api_key, v, 1234, resp.body);
			cr_assert_eq(w.err, 0);
			cr_assert(w.len == n && !memcmp(buf1, buf2, n), "%s v%d: re-encoded differs", api->name, v);
			/* the error is in the frame: with error 0 just its low byte differs */
			n0 = error_frame(api->api_key, v, 0, buf2);
			cr_assert_eq(n0, n);
			int diff = 0;
			for (size_t k = 0; k < n; k++)
				diff += buf1[k] != buf2[k];
			cr_assert_eq(diff, 1, "%s v%d: error 35 vs 0 differ in %d bytes", api->name, v, diff);
			checked++;
		}
	}
	cr_assert_gt(checked, 40, "only %d versions checked", checked);
	/* beyond Kafka's versions, or an unknown key: declined */
	cr_assert_eq(error_frame(3, 99, 35, buf1), 0);
	cr_assert_eq(error_frame(9999, 0, 35, buf1), 0);
	/* a response without a top-level ErrorCode: declined */
	cr_assert_eq(error_frame(0, 7, 35, buf1), 0);
}
