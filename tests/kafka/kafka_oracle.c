/* tests/kafka/kafka_oracle.c — build/kafka-oracle, Sluice's side of the
 * kafka-python oracle (tests/kafka/check-oracle runs both sides).
 *
 *   kafka-oracle check DIR   decode every {req,resp}-KEY-VERSION-N.bin body
 *                            kafka-python wrote, re-encode, compare bytes
 *   kafka-oracle emit DIR    write random bodies of every API and version in
 *                            the codec's table, for kafka-python to check
 *   kafka-oracle seed DIR    write fuzz seeds: DIR/fuzz_kafka_request/ (request
 *                            messages) and DIR/fuzz_kafka_message/ (kind, version,
 *                            body) for every message kind and version
 *
 * Thread: main. Test tool, not part of the broker. Exit 0 ok, 1 mismatch,
 * 2 usage.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/kafka/kafka_codec.h"
#include "tests/kafka/kafka_sample.h"
#include "tests/kafka/kafka_sample.c"

#define MEM (8u << 20)

static uint8_t file_buf[MEM], out_buf[MEM], arena_mem[MEM];

static const struct kafka_msg_desc *desc_of(const char *kind, int key, int ver)
{
	const struct kafka_api *api = kafka_api_find((int16_t)key);

	if (!api || ver < api->min_version || ver > api->max_version)
		return NULL;
	return !strcmp(kind, "req") ? api->request : api->response;
}

static size_t sample_index(const struct kafka_msg_desc *d)
{
	for (size_t i = 0; i < kafka_msg_desc_count; i++)
		if (!strcmp(kafka_msg_descs[i].name, d->name))
			return i;
	abort();
}

static int check(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	int ok = 0, bad = 0, skipped = 0;

	if (!dp) {
		perror(dir);
		return 1;
	}
	while ((de = readdir(dp))) {
		char kind[8], path[4096];
		int key, ver, n;
		const struct kafka_msg_desc *d;
		struct kafka_arena a;
		struct kafka_cursor c;
		struct kafka_writer w;
		size_t len;
		FILE *f;
		void *m;
		int rc;

		if (sscanf(de->d_name, "%3[a-z]-%d-%d-%d.bin", kind, &key, &ver, &n) != 4)
			continue;
		d = desc_of(kind, key, ver);
		if (!d) {
			skipped++;
			continue;
		}
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		f = fopen(path, "rb");
		if (!f) {
			perror(path);
			bad++;
			continue;
		}
		len = fread(file_buf, 1, sizeof file_buf, f);
		fclose(f);
		kafka_arena_init(&a, arena_mem, sizeof arena_mem);
		m = kafka_arena_alloc(&a, d->size);
		kafka_cursor_init(&c, file_buf, len);
		rc = d->decode(&c, &a, (int16_t)ver, m);
		if (rc || kafka_cursor_left(&c)) {
			printf("kafka-oracle: %s: %s v%d decode %d, %zu bytes left\n", de->d_name, d->name,
			       ver, rc, kafka_cursor_left(&c));
			bad++;
			continue;
		}
		kafka_writer_init(&w, out_buf, sizeof out_buf);
		d->encode(&w, (int16_t)ver, m);
		if (w.err || w.len != len || memcmp(out_buf, file_buf, len)) {
			printf("kafka-oracle: %s: %s v%d re-encoded %zu bytes (err %d), kafka-python wrote %zu\n",
			       de->d_name, d->name, ver, w.len, w.err, len);
			bad++;
			continue;
		}
		ok++;
	}
	closedir(dp);
	printf("kafka-oracle: Sluice decoded and re-encoded %d kafka-python messages byte for byte, "
	       "%d failed, %d skipped (outside the codec's range)\n", ok, bad, skipped);
	return bad || !ok;
}

static int emit(const char *dir, int per)
{
	int n = 0;

	for (size_t i = 0; i < KAFKA_API_COUNT; i++) {
		const struct kafka_api *api = &kafka_apis[i];

		for (int side = 0; side < 2; side++) {
			const struct kafka_msg_desc *d = side ? api->response : api->request;
			size_t si = sample_index(d);

			for (int v = api->min_version; v <= api->max_version; v++) {
				for (int k = 0; k < per; k++) {
					struct kafka_sample s = { .rng = 1 + (uint64_t)(n * 7919 + k) };
					struct kafka_writer w;
					char path[4096];
					FILE *f;

					kafka_arena_init(&s.arena, arena_mem, sizeof arena_mem);
					kafka_writer_init(&w, out_buf, sizeof out_buf);
					d->encode(&w, (int16_t)v, kafka_sample_descs[si].sample(&s, (int16_t)v));
					if (w.err) {
						printf("kafka-oracle: %s v%d: encode %d\n", d->name, v, w.err);
						return 1;
					}
					snprintf(path, sizeof path, "%s/%s-%d-%d-%d.bin", dir, side ? "resp" : "req",
						 api->api_key, v, k);
					f = fopen(path, "wb");
					if (!f || fwrite(out_buf, 1, w.len, f) != w.len) {
						perror(path);
						return 1;
					}
					fclose(f);
					n++;
				}
			}
		}
	}
	printf("kafka-oracle: Sluice wrote %d messages\n", n);
	return 0;
}

static int write_file(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(a, 1, na, f) != na || fwrite(b, 1, nb, f) != nb) {
		perror(path);
		return 1;
	}
	return fclose(f) ? 1 : 0;
}

static int seed(const char *dir)
{
	char path[4096];
	int n = 0;

	for (size_t i = 0; i < kafka_msg_desc_count; i++) {
		const struct kafka_msg_desc *d = &kafka_msg_descs[i];

		for (int v = d->min_version; v <= d->max_version; v++) {
			struct kafka_sample s = { .rng = 1 + i * 131 + (uint64_t)v };
			const struct kafka_api *api = kafka_api_find(d->api_key);
			uint8_t sel[2] = { (uint8_t)i, (uint8_t)(v - d->min_version) };
			struct kafka_writer w;
			void *m;

			kafka_arena_init(&s.arena, arena_mem, sizeof arena_mem);
			m = kafka_sample_descs[i].sample(&s, (int16_t)v);
			kafka_writer_init(&w, out_buf, sizeof out_buf);
			d->encode(&w, (int16_t)v, m);
			snprintf(path, sizeof path, "%s/fuzz_kafka_message/seed-%s-v%d", dir, d->name, v);
			if (w.err || write_file(path, sel, 2, out_buf, w.len))
				return 1;
			n++;
			if (api && api->request == d) {
				struct kafka_request req = { .api = api, .body = m };

				kafka_request_header_init(&req.header);
				req.header.RequestApiKey = d->api_key;
				req.header.RequestApiVersion = (int16_t)v;
				req.header.CorrelationId = v;
				req.header.ClientId = (struct kafka_str){ "seed", 4 };
				req.header_version = kafka_request_header_version(api, (int16_t)v);
				kafka_writer_init(&w, out_buf, sizeof out_buf);
				snprintf(path, sizeof path, "%s/fuzz_kafka_request/seed-%s-v%d", dir, d->name, v);
				if (kafka_request_encode(&w, &req) || write_file(path, out_buf + 4, w.len - 4, "", 0))
					return 1;
				n++;
			}
		}
	}
	printf("kafka-oracle: wrote %d fuzz seeds\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "check"))
		return check(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "emit"))
		return emit(argv[2], argc > 3 ? atoi(argv[3]) : 4);
	if (argc >= 3 && !strcmp(argv[1], "seed"))
		return seed(argv[2]);
	fprintf(stderr, "usage: kafka-oracle check|emit|seed DIR [PER]\n");
	return 2;
}
