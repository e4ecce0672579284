/* bench/bench_codec.c — `sluice-bench codec`: decode and re-encode a
 * Produce v7 request carrying P partitions of B-byte record batches, and a
 * Fetch v11 response of the same shape, on one core.
 *
 * Thread: main. Counts malloc/calloc/realloc calls of the whole process
 * (wrappers below) to show that the codec allocates nothing per request
 * after warm-up; all memory (frame, arena, output buffer, iovecs) is set up
 * before timing. GB/s counts frame bytes (1 GB = 1e9 bytes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "dataplane/kafka/kafka_codec.h"

#ifndef __SANITIZE_ADDRESS__
/* Count every heap allocation (glibc exports the real allocator). */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
static unsigned long bench_mallocs;
void *malloc(size_t n) { bench_mallocs++; return __libc_malloc(n); }
void *calloc(size_t n, size_t m) { bench_mallocs++; return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { bench_mallocs++; return __libc_realloc(p, n); }
#define BENCH_COUNTS_MALLOC 1
#else
static unsigned long bench_mallocs;
#define BENCH_COUNTS_MALLOC 0
#endif

enum codec_mode { DECODE_ONLY, DECODE_ENCODE_IOV, DECODE_ENCODE_FLAT };

static const char *const mode_names[] = {
	[DECODE_ONLY] = "decode",
	[DECODE_ENCODE_IOV] = "decode+encode (iovec, records referenced)",
	[DECODE_ENCODE_FLAT] = "decode+encode (flat, records copied)",
};

struct codec_bench {
	bool response;            /* Fetch response instead of Produce request */
	const uint8_t *msg;       /* frame without the size prefix */
	size_t len;
	struct kafka_arena arena;
	uint8_t *out;
	size_t out_cap;
	struct iovec *iov;
	int iov_cap;
};

/* One request's worth of work; returns 0 or -errno. */
static int codec_once(struct codec_bench *b, enum codec_mode mode)
{
	struct kafka_request req;
	struct kafka_response resp;
	struct kafka_writer w;
	int rc;

	kafka_arena_reset(&b->arena);
	if (b->response)
		rc = kafka_response_decode(b->msg, b->len, 1, 11, &b->arena, &resp);
	else
		rc = kafka_request_decode(b->msg, b->len, &b->arena, &req);
	if (rc || mode == DECODE_ONLY)
		return rc;
	/* Size first, then write into the one buffer. */
	kafka_writer_init_measure(&w, mode == DECODE_ENCODE_IOV);
	if (b->response)
		kafka_response_encode(&w, 1, 11, resp.header.CorrelationId, resp.body);
	else
		kafka_request_encode(&w, &req);
	if (w.err || w.len > b->out_cap || w.iov_cnt > b->iov_cap)
		return w.err ? w.err : -ENOSPC;
	if (mode == DECODE_ENCODE_IOV)
		kafka_writer_init_iov(&w, b->out, b->out_cap, b->iov, b->iov_cap);
	else
		kafka_writer_init(&w, b->out, b->out_cap);
	if (b->response)
		kafka_response_encode(&w, 1, 11, resp.header.CorrelationId, resp.body);
	else
		kafka_request_encode(&w, &req);
	rc = kafka_writer_finish(&w);
	if (rc < 0)
		return rc;
	return w.total == b->len + 4 ? 0 : -EBADMSG;
}

static int codec_run(struct codec_bench *b, enum codec_mode mode, double seconds, const char *what)
{
	uint64_t t0, t1, n = 0;
	unsigned long m0;
	double s;

	for (int i = 0; i < 20; i++)
		if (codec_once(b, mode))
			return fprintf(stderr, "sluice-bench codec: %s failed\n", what), 1;
	m0 = bench_mallocs;
	t0 = bench_now_ns();
	do {
		for (int i = 0; i < 64; i++, n++)
			if (codec_once(b, mode))
				return fprintf(stderr, "sluice-bench codec: %s failed\n", what), 1;
		t1 = bench_now_ns();
	} while (t1 - t0 < (uint64_t)(seconds * 1e9));
	m0 = bench_mallocs - m0; /* before printf, which may allocate */
	s = (double)(t1 - t0) / 1e9;
	printf("%-20s %-42s %9.0f req/s %8.2f GB/s  mallocs %lu in %llu req%s\n", what, mode_names[mode],
	       (double)n / s, (double)n * (double)(b->len + 4) / s / 1e9, m0, (unsigned long long)n,
	       BENCH_COUNTS_MALLOC ? "" : " (not counted under ASan)");
	return m0 != 0;
}

int bench_codec(int argc, char **argv)
{
	int partitions = 100, batch = 16384;
	double seconds = 2.0;
	struct kafka_produce_request preq;
	struct kafka_produce_request_topic_produce_data ptopic;
	struct kafka_produce_request_partition_produce_data *pparts;
	struct kafka_fetch_response fresp;
	struct kafka_fetch_response_fetchable_topic_response ftopic;
	struct kafka_fetch_response_partition_data *fparts;
	struct kafka_request req = { 0 };
	struct kafka_writer w;
	struct codec_bench b = { 0 };
	uint8_t *records, *frame;
	size_t frame_cap;
	int fail = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = strtod(argv[++i], NULL);
		else if (!strcmp(argv[i], "--partitions") && i + 1 < argc)
			partitions = (int)strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--batch-bytes") && i + 1 < argc)
			batch = (int)strtol(argv[++i], NULL, 10);
		else {
			fprintf(i + 1 < argc || strcmp(argv[i], "--help") ? stderr : stdout,
				"usage: sluice-bench codec [--seconds S] [--partitions P] [--batch-bytes B]\n"
				"  decode+re-encode a Produce v7 request and a Fetch v11 response with\n"
				"  P partitions of B-byte record batches (default 100 x 16384, 2 s each)\n");
			return strcmp(argv[i], "--help") ? 2 : 0;
		}
	}
	if (partitions < 1 || batch < 1 || seconds <= 0)
		return 2;

	records = malloc((size_t)partitions * (size_t)batch);
	pparts = calloc((size_t)partitions, sizeof *pparts);
	fparts = calloc((size_t)partitions, sizeof *fparts);
	frame_cap = (size_t)partitions * ((size_t)batch + 256) + 4096;
	frame = malloc(frame_cap);
	b.out_cap = frame_cap;
	b.out = malloc(b.out_cap);
	b.iov_cap = 2 * partitions + 8;
	b.iov = calloc((size_t)b.iov_cap, sizeof *b.iov);
	size_t arena_cap = kafka_arena_bound(frame_cap);
	void *arena_mem = malloc(arena_cap);
	if (!records || !pparts || !fparts || !frame || !b.out || !b.iov || !arena_mem)
		return fprintf(stderr, "sluice-bench codec: out of memory\n"), 1;
	kafka_arena_init(&b.arena, arena_mem, arena_cap);
	for (size_t i = 0; i < (size_t)partitions * (size_t)batch; i++)
		records[i] = (uint8_t)(i * 2654435761u >> 24);

	/* Produce v7: one topic, P partitions, each one B-byte batch. */
	kafka_produce_request_init(&preq);
	preq.Acks = -1;
	preq.TimeoutMs = 30000;
	preq.TopicData.items = &ptopic;
	preq.TopicData.count = 1;
	ptopic.Name = (struct kafka_str){ "bench-topic", 11 };
	ptopic.PartitionData.items = pparts;
	ptopic.PartitionData.count = partitions;
	for (int i = 0; i < partitions; i++) {
		pparts[i].Index = i;
		pparts[i].Records = (struct kafka_bytes){ records + (size_t)i * batch, batch };
	}
	req.api = kafka_api_find(0);
	req.body = &preq;
	kafka_request_header_init(&req.header);
	req.header.RequestApiVersion = 7;
	req.header.CorrelationId = 42;
	req.header.ClientId = (struct kafka_str){ "sluice-bench", 12 };
	req.header_version = 1;
	kafka_writer_init(&w, frame, frame_cap);
	if (kafka_request_encode(&w, &req))
		return fprintf(stderr, "sluice-bench codec: cannot build the produce request\n"), 1;
	b.msg = frame + 4;
	b.len = w.len - 4;
	b.response = false;
	fprintf(stderr, "sluice-bench codec: produce v7 frame %zu bytes (%d x %d B), fetch v11 of the same shape\n",
		w.len, partitions, batch);
	fail |= codec_run(&b, DECODE_ONLY, seconds, "produce v7 request");
	fail |= codec_run(&b, DECODE_ENCODE_IOV, seconds, "produce v7 request");
	fail |= codec_run(&b, DECODE_ENCODE_FLAT, seconds, "produce v7 request");

	/* Fetch v11 response of the same shape (records already in the frame). */
	kafka_fetch_response_init(&fresp);
	fresp.Responses.items = &ftopic;
	fresp.Responses.count = 1;
	memset(&ftopic, 0, sizeof ftopic);
	ftopic.Topic = (struct kafka_str){ "bench-topic", 11 };
	ftopic.Partitions.items = fparts;
	ftopic.Partitions.count = partitions;
	for (int i = 0; i < partitions; i++) {
		memset(&fparts[i], 0, sizeof fparts[i]);
		fparts[i].PartitionIndex = i;
		fparts[i].HighWatermark = 1000;
		fparts[i].LastStableOffset = 1000;
		fparts[i].LogStartOffset = 0;
		fparts[i].AbortedTransactions.count = 0;
		fparts[i].PreferredReadReplica = -1;
		fparts[i].Records = (struct kafka_bytes){ records + (size_t)i * batch, batch };
	}
	kafka_writer_init(&w, frame, frame_cap);
	if (kafka_response_encode(&w, 1, 11, 42, &fresp))
		return fprintf(stderr, "sluice-bench codec: cannot build the fetch response\n"), 1;
	b.msg = frame + 4;
	b.len = w.len - 4;
	b.response = true;
	fail |= codec_run(&b, DECODE_ONLY, seconds, "fetch v11 response");
	fail |= codec_run(&b, DECODE_ENCODE_IOV, seconds, "fetch v11 response");
	fail |= codec_run(&b, DECODE_ENCODE_FLAT, seconds, "fetch v11 response");

	free(arena_mem);
	free(b.iov);
	free(b.out);
	free(frame);
	free(fparts);
	free(pparts);
	free(records);
	return fail;
}
