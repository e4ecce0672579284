/* tests/integration/test_native.c — libsluice_native (sluice_native.h)
 * against a real build/sluiced started with native.listen (each test its
 * own broker, 2 shards, kernel UDP):
 *
 *   - a million records produced natively over 4 partitions, every
 *     delivery report at the offset it landed at, read back natively and
 *     with librdkafka over TCP: the same records (offset, key, value,
 *     timestamp), per-partition order kept. Both paths' produce rates are
 *     printed (informational, "native:" lines);
 *   - fetch at the edges (max_bytes below a batch, from inside a batch,
 *     the end, past it, read_committed) and a client of 1,472-byte
 *     datagrams (batches of 100-200 KB in ~100 fragments);
 *   - a session the broker forgot (idle) is reopened without losing or
 *     doubling anything; across a broker SIGKILL and restart nothing is
 *     in the log twice and every record reported appended is there;
 *   - compressed batches both ways: librdkafka's gzip, snappy, lz4 and
 *     zstd batches read natively, the native producer's read by
 *     librdkafka;
 *   - through the client's fault-injecting transport (1% loss, 1%
 *     duplication, reordering, truncated datagrams, both directions):
 *     every record appended exactly once and in order, read back through
 *     a clean client and through the faulty one; and the control: the
 *     same faults with the client's deduplication defeated (a resend gets
 *     a fresh identity) leave duplicates in the log, so the check can
 *     fail;
 *   - bad datagrams from a raw UDP socket (short, foreign magic, bad
 *     version, bad CRC, truncated, unknown type, unknown session, unknown
 *     topic and partition, a producer id the broker never issued,
 *     fragments that do not add up, a corrupt batch, a flood beyond
 *     credits): each answered with its ERROR / error code or dropped, the
 *     broker keeps serving, nothing written changes (the flood: the log
 *     holds exactly the batches acknowledged), and the broker's counters
 *     (printed at exit) saw them.
 *
 * SLUICE_FAULT_SEED changes the fault seed (default 11); the seed and the
 * fault counters are printed.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "dataplane/native/native_client.h"
#include "dataplane/native/native_format.h"
#include "dataplane/native/sluice_native.h"
#include "storage/batch.h"
#include "tests/integration/harness.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- a broker with the native listener ---------------------------------------------------- */

struct nbroker {
	struct broker_proc b;
	int uport;
	char native[64];              /* "127.0.0.1:PORT" */
	char listen_kv[96];           /* "native.listen=127.0.0.1:PORT" */
	const char *extra[BROKER_MAX_ARGS];
};

static int free_udp_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), port;

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* more: further "--set", "k=v" pairs (NULL-ended) or NULL */
static void nbroker_launch(struct nbroker *nb, const char *const *more)
{
	int n = 0;

	memset(nb, 0, sizeof(*nb));
	nb->uport = free_udp_port();
	snprintf(nb->native, sizeof(nb->native), "127.0.0.1:%d", nb->uport);
	snprintf(nb->listen_kv, sizeof(nb->listen_kv), "native.listen=%s", nb->native);
	nb->extra[n++] = "--set";
	nb->extra[n++] = nb->listen_kv;
	for (int i = 0; more && more[i]; i++)
		nb->extra[n++] = more[i];
	nb->extra[n] = NULL;
	broker_launch(&nb->b, nb->extra);
}

static void create_topic(struct nbroker *nb, const char *topic, int parts)
{
	rd_kafka_t *rk = harness_producer(&nb->b, NULL, NULL, NULL);

	harness_create_topic(rk, topic, parts);
	rd_kafka_destroy(rk);
}

static void base_config(struct sluice_config *cfg)
{
	sluice_config_init(cfg);
	cfg->client_id = "test_native";
	cfg->connect_timeout_ms = 5000;
	cfg->delivery_timeout_ms = 30000;
}

static struct sluice_client *connect_native(struct nbroker *nb, const struct sluice_config *cfg)
{
	struct sluice_client *c = NULL;
	char err[256];
	int rc = sluice_connect(nb->native, cfg, &c, err, sizeof(err));

	if (rc < 0)
		broker_dump_log(&nb->b);
	cr_assert_eq(rc, 0, "sluice_connect %s: %s (%d)", nb->native, err, rc);
	return c;
}

/* Until a native FETCH of every partition answers without error (the
 * topic just created reached every shard's metadata). */
static void wait_topic_native(struct sluice_client *c, const char *topic, int parts)
{
	struct sluice_fetch_result res;
	double end = now_s() + 10;

	for (int p = 0; p < parts; p++)
		for (;;) {
			int rc = sluice_fetch(c, topic, p, 0, 1024, 0, 2000, &res);

			cr_assert_geq(rc, 0, "fetch %s/%d: %d (%s)", topic, p, rc, sluice_last_error(c));
			if (res.err == 0)
				break;
			cr_assert_lt(now_s(), end, "%s/%d not visible natively: error %d", topic, p, res.err);
			usleep(20000);
		}
}

/* ---- the workload ------------------------------------------------------------------------- */

/* Record i: partition i % parts, value {partition, i / parts} (two native
 * uint32), key "k<i>". A partition must read 0, 1, 2, ... */
struct run {
	long n;
	int parts;
	int64_t *offset;              /* reported offset by record */
	int *err;                     /* 1: not reported yet */
	int64_t *ts;                  /* timestamp read natively, by record */
	long reports, failed;
	int first_err;
};

static void on_delivery(void *ctx, void *opaque, int err, int64_t offset)
{
	struct run *r = ctx;
	long i = (long)(uintptr_t)opaque;

	if (i < 0 || i >= r->n || r->err[i] != 1) {
		r->failed++;   /* a foreign or second report: counted as a failure */
		return;
	}
	r->err[i] = err;
	r->offset[i] = offset;
	r->reports++;
	if (err && !r->failed++)
		r->first_err = err;
}

static void run_init(struct run *r, long n, int parts)
{
	memset(r, 0, sizeof(*r));
	r->n = n;
	r->parts = parts;
	r->offset = calloc((size_t)n, sizeof(*r->offset));
	r->ts = calloc((size_t)n, sizeof(*r->ts));
	r->err = malloc((size_t)n * sizeof(*r->err));
	cr_assert(r->offset && r->ts && r->err);
	for (long i = 0; i < n; i++)
		r->err[i] = 1;
}

static void run_free(struct run *r)
{
	free(r->offset);
	free(r->ts);
	free(r->err);
}

/* Produce every record, flush; returns the seconds it took. */
static double produce_all(struct sluice_client *c, struct run *r, const char *topic)
{
	double t0 = now_s();

	for (long i = 0; i < r->n; i++) {
		uint32_t v[2] = { (uint32_t)(i % r->parts), (uint32_t)(i / r->parts) };
		char key[24];
		int kl = snprintf(key, sizeof(key), "k%ld", i), rc;

		while ((rc = sluice_produce(c, topic, (int32_t)v[0], key, (size_t)kl, v, sizeof(v),
					    (void *)(uintptr_t)i)) == -ENOBUFS)
			cr_assert_geq(sluice_poll(c, 5), 0, "poll: %s", sluice_last_error(c));
		cr_assert_eq(rc, 0, "produce %ld: %d", i, rc);
		if ((i & 1023) == 0)
			sluice_poll(c, 0);
	}
	cr_assert_eq(sluice_flush(c, 60000), 0, "flush: %zu records still out (%s)", sluice_outq_len(c),
		     sluice_last_error(c));
	cr_assert_eq(r->reports, r->n, "%ld reports for %ld records", r->reports, r->n);
	cr_assert_eq(r->failed, 0, "%ld records failed, the first with %d (%s)", r->failed, r->first_err,
		     sluice_err_name(r->first_err));
	return now_s() - t0;
}

struct readback {
	long records, dups, out_of_order, foreign;
	char problem[256];
};

static void rb_problem(struct readback *rb, const char *fmt, int p, long a, long b)
{
	if (!rb->problem[0])
		snprintf(rb->problem, sizeof(rb->problem), fmt, p, a, b);
}

/* Every partition from 0 to its end through c; with exact, every record
 * must be at the offset of its sequence number and where its report said
 * (and its timestamp is kept for the TCP comparison). */
static void read_native(struct sluice_client *c, struct run *r, const char *topic, int exact, struct readback *rb)
{
	struct sluice_fetch_result res;

	memset(rb, 0, sizeof(*rb));
	for (int p = 0; p < r->parts; p++) {
		long want = (r->n - p + r->parts - 1) / r->parts, next = 0;
		uint8_t *seen = calloc((size_t)want + 1, 1);
		int64_t off = 0, prev = -1;
		int rc;

		for (;;) {
			rc = sluice_fetch(c, topic, p, off, 1 << 20, 0, 10000, &res);
			cr_assert_geq(rc, 0, "native fetch %s/%d at %lld: %d (%s)", topic, p, (long long)off, rc,
				      sluice_last_error(c));
			cr_assert_eq(res.err, 0, "native fetch %s/%d at %lld: error %d", topic, p, (long long)off, res.err);
			if (res.count == 0)
				break;
			for (size_t i = 0; i < res.count; i++) {
				const struct sluice_record *rec = &res.records[i];
				uint32_t v[2];
				long idx;

				cr_assert_eq(rec->offset, off + (int64_t)i, "%s/%d: offsets not contiguous at %lld", topic, p,
					     (long long)rec->offset);
				rb->records++;
				if (rec->value_len != 8) {
					rb->foreign++;
					continue;
				}
				memcpy(v, rec->value, 8);
				if (v[0] != (uint32_t)p || v[1] >= (uint32_t)want) {
					rb->foreign++;
					continue;
				}
				if (seen[v[1]]) {
					rb->dups++;
					rb_problem(rb, "partition %d: seq %ld again at offset %ld", p, (long)v[1],
						   (long)rec->offset);
					continue;
				}
				seen[v[1]] = 1;
				if ((int64_t)v[1] < prev) {
					rb->out_of_order++;
					rb_problem(rb, "partition %d: seq %ld after %ld", p, (long)v[1], (long)prev);
				}
				prev = v[1];
				idx = (long)v[1] * r->parts + p;
				if (exact) {
					char key[24];
					int kl = snprintf(key, sizeof(key), "k%ld", idx);

					cr_assert_eq((long)v[1], next, "%s/%d: seq %u at offset %lld, expected %ld", topic, p,
						     v[1], (long long)rec->offset, next);
					cr_assert_eq(rec->offset, (int64_t)v[1]);
					cr_assert(rec->key_len == kl && !memcmp(rec->key, key, (size_t)kl),
						  "%s/%d offset %lld: wrong key", topic, p, (long long)rec->offset);
					cr_assert_eq(r->offset[idx], rec->offset, "record %ld reported at %lld, read at %lld",
						     idx, (long long)r->offset[idx], (long long)rec->offset);
					r->ts[idx] = rec->timestamp;
				}
				next++;
			}
			off = res.next_offset;
		}
		cr_assert_eq(res.high_watermark, off, "%s/%d: read to %lld, high watermark %lld", topic, p,
			     (long long)off, (long long)res.high_watermark);
		if (exact)
			cr_assert_eq(next, want, "%s/%d: %ld records read, %ld produced", topic, p, next, want);
		for (long s = 0; s < want; s++)
			if (!seen[s]) {
				rb_problem(rb, "partition %d: seq %ld missing (of %ld)", p, s, want);
				cr_assert_fail("%s/%d: %s", topic, p, rb->problem);
			}
		free(seen);
	}
}

/* The same over Kafka's TCP with librdkafka: offset, key, value and the
 * timestamp read natively. */
static void read_rdkafka(struct nbroker *nb, struct run *r, const char *topic)
{
	const char *kv[] = { "queued.min.messages", "500000", "fetch.message.max.bytes", "4194304",
			     "fetch.wait.max.ms", "10", NULL };
	rd_kafka_t *rk = harness_consumer(&nb->b, kv);
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
	static rd_kafka_message_t *msgs[10000];

	cr_assert_not_null(rkt);
	for (int p = 0; p < r->parts; p++) {
		long want = (r->n - p + r->parts - 1) / r->parts, got = 0;
		int done = 0;

		cr_assert_eq(rd_kafka_consume_start(rkt, p, RD_KAFKA_OFFSET_BEGINNING), 0);
		while (!done) {
			ssize_t n = rd_kafka_consume_batch(rkt, p, 100, msgs, 10000);

			cr_assert_geq(n, 0);
			for (ssize_t i = 0; i < n; i++) {
				rd_kafka_message_t *m = msgs[i];

				if (done) {
					rd_kafka_message_destroy(m);
					continue;
				}
				if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
					done = 1;
				} else {
					uint32_t v[2];
					long idx = (long)m->offset * r->parts + p;
					char key[24];
					int kl = snprintf(key, sizeof(key), "k%ld", idx);
					rd_kafka_timestamp_type_t tt;

					cr_assert_eq(m->err, 0, "rdkafka %s/%d: %s", topic, p, rd_kafka_message_errstr(m));
					cr_assert_eq(m->offset, got, "rdkafka %s/%d: offset %lld, expected %ld", topic, p,
						     (long long)m->offset, got);
					cr_assert_eq(m->len, 8);
					memcpy(v, m->payload, 8);
					cr_assert(v[0] == (uint32_t)p && v[1] == (uint32_t)m->offset,
						  "rdkafka %s/%d offset %lld: value {%u, %u}", topic, p, (long long)m->offset,
						  v[0], v[1]);
					cr_assert(m->key_len == (size_t)kl && !memcmp(m->key, key, (size_t)kl),
						  "rdkafka %s/%d offset %lld: key differs", topic, p, (long long)m->offset);
					cr_assert_eq(rd_kafka_message_timestamp(m, &tt), r->ts[idx],
						     "rdkafka %s/%d offset %lld: timestamp differs from the native read", topic,
						     p, (long long)m->offset);
					got++;
				}
				rd_kafka_message_destroy(m);
			}
		}
		rd_kafka_consume_stop(rkt, p);
		cr_assert_eq(got, want, "rdkafka %s/%d: %ld records, %ld produced", topic, p, got, want);
	}
	rd_kafka_topic_destroy(rkt);
	rd_kafka_destroy(rk);
}

/* ---- a million records --------------------------------------------------------------------- */

struct rdk_dr {
	long ok, failed;
};

static void rdk_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct rdk_dr *d = opaque;

	(void)rk;
	if (m->err)
		d->failed++;
	else
		d->ok++;
}

/* The same records with librdkafka over TCP (idempotent, acks=all) into
 * another topic (created here): the rate beside the native one
 * (informational). codec: librdkafka's compression.codec. */
static double rdkafka_produce(struct nbroker *nb, const char *topic, int parts, long n, const char *codec)
{
	struct rdk_dr d = { 0 };
	const char *kv[] = { "enable.idempotence", "true", "linger.ms", "5", "batch.size", "1000000",
			     "queue.buffering.max.messages", "1000000", "compression.codec", codec, NULL };
	rd_kafka_conf_t *conf = harness_conf(&nb->b, kv);
	rd_kafka_t *rk;
	char err[256];
	double t0;

	rd_kafka_conf_set_dr_msg_cb(conf, rdk_dr_cb);
	rd_kafka_conf_set_opaque(conf, &d);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	cr_assert_not_null(rk, "%s", err);
	harness_create_topic(rk, topic, parts);
	t0 = now_s();
	for (long i = 0; i < n; i++) {
		uint32_t v[2] = { (uint32_t)(i % parts), (uint32_t)(i / parts) };
		char key[24];
		int kl = snprintf(key, sizeof(key), "k%ld", i);
		rd_kafka_resp_err_t e;

		while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION((int32_t)v[0]),
					      RD_KAFKA_V_KEY(key, (size_t)kl), RD_KAFKA_V_VALUE(v, sizeof(v)),
					      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
		       RD_KAFKA_RESP_ERR__QUEUE_FULL)
			rd_kafka_poll(rk, 5);
		cr_assert_eq(e, 0, "producev: %s", rd_kafka_err2str(e));
	}
	while (rd_kafka_outq_len(rk) > 0 && now_s() - t0 < 60)
		rd_kafka_flush(rk, 1000);
	t0 = now_s() - t0;
	cr_assert_eq(d.ok, n, "librdkafka: %ld acknowledged, %ld failed", d.ok, d.failed);
	rd_kafka_destroy(rk);
	return (double)n / t0;
}

Test(native, million_records_native_and_rdkafka, .timeout = 120)
{
	const long n = 1000000;
	const int parts = 4;
	struct nbroker nb;
	struct sluice_config cfg;
	struct sluice_client *c;
	struct sluice_stats st;
	struct readback rb;
	struct run r;
	double secs, rdk_rate;

	nbroker_launch(&nb, NULL);
	create_topic(&nb, "native-m", parts);
	run_init(&r, n, parts);
	base_config(&cfg);
	cfg.delivery = on_delivery;
	cfg.delivery_ctx = &r;
	c = connect_native(&nb, &cfg);
	wait_topic_native(c, "native-m", parts);
	secs = produce_all(c, &r, "native-m");
	sluice_stats(c, &st);
	read_native(c, &r, "native-m", 1, &rb);
	cr_assert_eq(rb.records, n);
	read_rdkafka(&nb, &r, "native-m");
	rdk_rate = rdkafka_produce(&nb, "rdk-m", parts, n, "none");
	fprintf(stderr,
		"native: %ld records (16 B key+value) in %.2f s: %.0f records/s natively (batches of %u B, %llu sent, "
		"%llu resent, rtt %u us, %u datagram bytes); librdkafka over TCP (idempotent, acks=all) in the same "
		"run: %.0f records/s\n",
		n, secs, (double)n / secs, cfg.batch_bytes, (unsigned long long)st.batches_sent,
		(unsigned long long)st.batch_resends, st.rtt_us, st.max_datagram, rdk_rate);
	sluice_close(c);
	broker_cleanup(&nb.b);
	run_free(&r);
}

/* ---- compression both ways ------------------------------------------------------------------ */

Test(native, compressed_batches_both_ways, .timeout = 60)
{
	static const char *const codecs[] = { "none", "gzip", "snappy", "lz4", "zstd" };
	const long n = 20000;
	const int parts = 2;
	struct nbroker nb;
	struct sluice_config cfg;
	struct sluice_client *c;
	struct readback rb;
	char topic[64];

	nbroker_launch(&nb, NULL);
	base_config(&cfg);
	c = connect_native(&nb, &cfg);
	for (int codec = 1; codec <= 4; codec++) {
		struct run r;
		struct sluice_client *z;
		struct sluice_config zc;

		/* librdkafka compresses, the native reader decodes */
		snprintf(topic, sizeof(topic), "rdk-%s", codecs[codec]);
		run_init(&r, n, parts);
		rdkafka_produce(&nb, topic, parts, n, codecs[codec]);
		for (long i = 0; i < n; i++)
			r.offset[i] = i / parts;   /* one idempotent producer: offset = sequence */
		wait_topic_native(c, topic, parts);
		read_native(c, &r, topic, 1, &rb);
		cr_assert_eq(rb.records, n, "%s: %ld records read natively", topic, rb.records);
		read_rdkafka(&nb, &r, topic);
		run_free(&r);

		/* the native producer compresses, librdkafka decodes */
		snprintf(topic, sizeof(topic), "native-%s", codecs[codec]);
		create_topic(&nb, topic, parts);
		run_init(&r, n, parts);
		zc = cfg;
		zc.compression = codec;
		zc.delivery = on_delivery;
		zc.delivery_ctx = &r;
		z = connect_native(&nb, &zc);
		wait_topic_native(z, topic, parts);
		produce_all(z, &r, topic);
		read_native(c, &r, topic, 1, &rb);
		read_rdkafka(&nb, &r, topic);
		sluice_close(z);
		run_free(&r);
	}
	sluice_close(c);
	broker_cleanup(&nb.b);
}

/* ---- fetch at the edges -------------------------------------------------------------------- */

/* max_bytes below one batch still answers that whole batch; an offset
 * inside a batch starts there; the end of the log answers empty with the
 * high watermark; past it OFFSET_OUT_OF_RANGE; read_committed stops at
 * the last stable offset (no transactions: the high watermark); a client
 * of 1,472-byte datagrams reads the same records in smaller fragments,
 * batches of 100-200 KB produced in ~100 fragments each included. */
Test(native, fetch_edges_and_small_datagrams, .timeout = 60)
{
	struct nbroker nb;
	struct sluice_config cfg, small;
	struct sluice_client *c, *s;
	struct sluice_fetch_result res;
	struct sluice_stats st;
	struct run r;
	struct readback rb;
	int rc;

	nbroker_launch(&nb, NULL);
	create_topic(&nb, "native-e", 1);
	run_init(&r, 100000, 1);
	base_config(&small);
	small.max_datagram = NATIVE_MIN_DATAGRAM;
	small.batch_bytes = 200 << 10;
	small.linger_us = 20000;
	small.max_in_flight = 2;      /* 16 reassembly buffers per shard at the broker */
	small.delivery = on_delivery;
	small.delivery_ctx = &r;
	s = connect_native(&nb, &small);
	sluice_stats(s, &st);
	cr_assert_eq(st.max_datagram, NATIVE_MIN_DATAGRAM);
	wait_topic_native(s, "native-e", 1);
	produce_all(s, &r, "native-e");
	sluice_stats(s, &st);
	cr_assert_gt(st.datagrams_sent, st.batches_sent * 50, "batches of 100-200 KB in 1,472-byte datagrams: %llu datagrams for %llu batches", (unsigned long long)st.datagrams_sent, (unsigned long long)st.batches_sent);
	base_config(&cfg);
	c = connect_native(&nb, &cfg);
	read_native(c, &r, "native-e", 1, &rb);
	read_native(s, &r, "native-e", 1, &rb);

	rc = sluice_fetch(c, "native-e", 0, 0, 1, 0, 5000, &res);
	cr_assert_gt(rc, 1000, "max_bytes 1: %d records (one whole batch expected)", rc);
	cr_assert_eq(res.records[0].offset, 0);
	cr_assert_eq(res.next_offset, (int64_t)rc);
	rc = sluice_fetch(c, "native-e", 0, 12345, 1, 0, 5000, &res);
	cr_assert_gt(rc, 0);
	cr_assert_eq(res.records[0].offset, 12345, "from inside a batch");
	rc = sluice_fetch(c, "native-e", 0, 100000, 1 << 20, 0, 5000, &res);
	cr_assert(rc == 0 && res.err == 0 && res.high_watermark == 100000 && res.next_offset == 100000,
		  "at the end: %d records, error %d, high watermark %lld", rc, res.err, (long long)res.high_watermark);
	rc = sluice_fetch(c, "native-e", 0, 100001, 1 << 20, 0, 5000, &res);
	cr_assert(rc == 0 && res.err == 1, "past the end: %d records, error %d", rc, res.err);
	rc = sluice_fetch(c, "native-e", 0, 99990, 1 << 20, SLUICE_READ_COMMITTED, 5000, &res);
	cr_assert(rc == 10 && res.last_stable == 100000, "read_committed: %d records, LSO %lld", rc,
		  (long long)res.last_stable);
	sluice_close(c);
	sluice_close(s);
	broker_cleanup(&nb.b);
	run_free(&r);
}

/* ---- sessions lost --------------------------------------------------------------------------- */

/* The broker forgets an idle session (native.session.timeout.ms): the
 * next PRODUCE gets ERROR UNKNOWN_PRODUCER_ID, the client says HELLO
 * again and sends the refused batch under its new producer id: nothing
 * fails, nothing twice. Then the broker is SIGKILLed and restarted under
 * a steady stream: records sent before the kill and not acknowledged are
 * reported -ECONNRESET (they may be in the log: never sent again),
 * the others succeed; a record reported appended is in the log exactly
 * once at its offset; no record is in the log twice. */
Test(native, session_expiry_and_broker_restart, .timeout = 60)
{
	const char *more[] = { "--set", "native.session.timeout.ms=1000", NULL };
	const long n = 60000;
	struct nbroker nb;
	struct sluice_config cfg;
	struct sluice_client *c;
	struct sluice_stats st;
	struct sluice_fetch_result res;
	struct run r;
	long ok = 0, reset = 0, other = 0, in_log = 0;
	uint8_t *seen;
	int64_t off = 0;

	nbroker_launch(&nb, more);
	create_topic(&nb, "native-s", 1);
	run_init(&r, n, 1);
	base_config(&cfg);
	cfg.delivery = on_delivery;
	cfg.delivery_ctx = &r;
	cfg.batch_bytes = 4096;
	c = connect_native(&nb, &cfg);
	wait_topic_native(c, "native-s", 1);
	for (long i = 0; i < 100; i++) {
		uint32_t v[2] = { 0, (uint32_t)i };

		cr_assert_eq(sluice_produce(c, "native-s", 0, NULL, 0, v, 8, (void *)(uintptr_t)i), 0);
	}
	cr_assert_eq(sluice_flush(c, 10000), 0);
	sluice_stats(c, &st);
	cr_assert_eq(st.sessions_opened, 1);
	usleep(1600 * 1000);   /* the broker forgets the idle session */
	for (long i = 100; i < 200; i++) {
		uint32_t v[2] = { 0, (uint32_t)i };

		cr_assert_eq(sluice_produce(c, "native-s", 0, NULL, 0, v, 8, (void *)(uintptr_t)i), 0);
	}
	cr_assert_eq(sluice_flush(c, 10000), 0, "%s", sluice_last_error(c));
	sluice_stats(c, &st);
	cr_assert_eq(st.sessions_opened, 2, "the expired session was not reopened");
	cr_assert_eq(r.failed, 0, "after the session expired: %ld failed (first %s)", r.failed,
		     sluice_err_name(r.first_err));

	/* a steady stream across a SIGKILL and restart */
	for (long i = 200; i < n; i++) {
		uint32_t v[2] = { 0, (uint32_t)i };
		int rc;

		if (i == n / 2)
			broker_restart(&nb.b, SIGKILL);
		while ((rc = sluice_produce(c, "native-s", 0, NULL, 0, v, 8, (void *)(uintptr_t)i)) == -ENOBUFS)
			sluice_poll(c, 5);
		cr_assert_eq(rc, 0);
		if (i % 64 == 0)
			sluice_poll(c, 0);
		if (i % 2000 == 0)
			usleep(5000);
	}
	cr_assert_eq(sluice_flush(c, 30000), 0, "flush: %s", sluice_last_error(c));
	sluice_stats(c, &st);
	cr_assert_geq(st.sessions_opened, 3);
	for (long i = 0; i < n; i++) {
		if (r.err[i] == 0)
			ok++;
		else if (r.err[i] == -ECONNRESET)
			reset++;
		else
			other++;
	}
	seen = calloc((size_t)n, 1);
	for (;;) {
		cr_assert_geq(sluice_fetch(c, "native-s", 0, off, 1 << 20, 0, 5000, &res), 0);
		cr_assert_eq(res.err, 0);
		if (!res.count)
			break;
		for (size_t k = 0; k < res.count; k++) {
			uint32_t v[2];

			memcpy(v, res.records[k].value, 8);
			cr_assert_lt(v[1], (uint32_t)n);
			cr_assert_eq(seen[v[1]], 0, "record %u twice in the log (offset %lld)", v[1],
				     (long long)res.records[k].offset);
			seen[v[1]] = 1;
			if (r.err[v[1]] == 0)
				cr_assert_eq(r.offset[v[1]], res.records[k].offset, "record %u reported at %lld, at %lld", v[1],
					     (long long)r.offset[v[1]], (long long)res.records[k].offset);
			in_log++;
		}
		off = res.next_offset;
	}
	for (long i = 0; i < n; i++)
		if (r.err[i] == 0)
			cr_assert(seen[i], "record %ld was reported appended at %lld but is not in the log", i,
				  (long long)r.offset[i]);
	fprintf(stderr,
		"native: broker SIGKILLed under %ld records: %ld appended, %ld reported -ECONNRESET (unknown "
		"outcome), %ld other; %ld in the log, none twice; %llu sessions\n",
		n, ok, reset, other, in_log, (unsigned long long)st.sessions_opened);
	cr_assert_eq(other, 0, "records failed otherwise than -ECONNRESET");
	free(seen);
	sluice_close(c);
	broker_cleanup(&nb.b);
	run_free(&r);
}

/* ---- faults -------------------------------------------------------------------------------- */

static uint64_t fault_seed(void)
{
	const char *s = getenv("SLUICE_FAULT_SEED");

	return s && *s ? strtoull(s, NULL, 10) : 11;
}

/* n records through the faulty transport; returns the duplicates found
 * in the log by a clean client. */
static long fault_run(int defeat, struct sluice_stats *st)
{
	const long n = 200000;
	const int parts = 4;
	struct nbroker nb;
	struct sluice_config cfg, clean;
	struct sluice_client *c, *cc;
	struct readback rb;
	struct run r;
	const char *topic = defeat ? "native-control" : "native-faults";

	nbroker_launch(&nb, NULL);
	create_topic(&nb, topic, parts);
	run_init(&r, n, parts);
	base_config(&cfg);
	cfg.delivery = on_delivery;
	cfg.delivery_ctx = &r;
	cfg.batch_bytes = 4096;       /* ~160 records a batch: ~1,250 batches */
	cfg.fault = (struct sluice_fault){ .loss_pct = 1, .dup_pct = 1, .reorder_pct = 2, .reorder_window = 8,
					   .truncate_pct = 0.5, .seed = fault_seed() };
	base_config(&clean);
	cc = connect_native(&nb, &clean);
	wait_topic_native(cc, topic, parts);
	c = connect_native(&nb, &cfg);
	if (defeat)
		native_client_defeat_dedup(c);
	double t0 = now_s(), tp;

	tp = produce_all(c, &r, topic);
	sluice_stats(c, st);
	fprintf(stderr,
		"native: %s seed %llu (produced in %.2f s): %llu datagrams sent, faults %llu dropped, %llu duplicated, %llu truncated, "
		"%llu reordered; %llu batches, %llu resends, %llu out-of-order answers, %llu duplicate acks, %llu "
		"unreadable answers, %llu ERRORs\n",
		defeat ? "control (dedup defeated)" : "faults", (unsigned long long)cfg.fault.seed, tp,
		(unsigned long long)st->datagrams_sent, (unsigned long long)st->fault_dropped,
		(unsigned long long)st->fault_duplicated, (unsigned long long)st->fault_truncated,
		(unsigned long long)st->fault_reordered, (unsigned long long)st->batches_sent,
		(unsigned long long)st->batch_resends, (unsigned long long)st->acks_out_of_order,
		(unsigned long long)st->acks_duplicate, (unsigned long long)st->rx_unreadable,
		(unsigned long long)st->errors_received);
	/* the log, read by a client without faults */
	read_native(cc, &r, topic, !defeat, &rb);
	if (!defeat) {
		struct readback rb2;

		cr_assert_eq(rb.records, n, "%ld records in the log, %ld produced (%ld duplicates): %s", rb.records, n,
			     rb.dups, rb.problem);
		/* and through the faults: fetches asked again until whole */
		t0 = now_s();
		read_native(c, &r, topic, 1, &rb2);
		cr_assert_eq(rb2.records, n);
		fprintf(stderr, "native: read back through the faults in %.2f s\n", now_s() - t0);
		read_rdkafka(&nb, &r, topic);
	} else {
		fprintf(stderr, "native: control: %ld records in the log for %ld produced: %ld duplicates%s%s\n",
			rb.records, n, rb.dups, rb.problem[0] ? ", first: " : "", rb.problem);
	}
	sluice_stats(c, st);
	sluice_close(c);
	sluice_close(cc);
	broker_cleanup(&nb.b);
	run_free(&r);
	return rb.dups;
}

Test(native, faults_every_record_once_in_order, .timeout = 120)
{
	struct sluice_stats st;
	long dups = fault_run(0, &st);

	cr_assert_eq(dups, 0);
	cr_assert_gt(st.fault_dropped, 0, "no datagram was dropped: the test proves nothing");
	cr_assert_gt(st.fault_duplicated, 0);
	cr_assert_gt(st.fault_truncated, 0);
	cr_assert_gt(st.fault_reordered, 0);
	cr_assert_gt(st.batch_resends, 0, "nothing was resent");
}

Test(native, control_dedup_defeated_duplicates, .timeout = 120)
{
	struct sluice_stats st;
	long dups = fault_run(1, &st);

	cr_assert_gt(st.batch_resends, 0);
	cr_assert_gt(dups, 0, "the same faults with renumbered resends must leave duplicates (else the fault test "
			      "could not fail)");
}

/* ---- bad datagrams ------------------------------------------------------------------------- */

struct raw {
	int fd;
	uint8_t buf[NATIVE_MAX_DATAGRAM + 64];
	uint32_t session, request;
	int64_t pid;
};

/* A plain UDP socket connected to the broker's native address. */
static void raw_open(struct raw *w, const struct nbroker *nb)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	char host[64];
	const char *colon = strrchr(nb->native, ':');
	int sz = 8 << 20;

	cr_assert_not_null(colon);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - nb->native), nb->native);
	cr_assert_eq(inet_pton(AF_INET, host, &a.sin_addr), 1, "%s", nb->native);
	a.sin_port = htons((uint16_t)atoi(colon + 1));

	memset(w, 0, sizeof(*w));
	w->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(w->fd, 0);
	setsockopt(w->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	cr_assert_eq(connect(w->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	w->request = 100;
}

static void raw_send_dg(struct raw *w, const void *p, size_t n)
{
	cr_assert_eq(send(w->fd, p, n, 0), (ssize_t)n, "send: %s", strerror(errno));
}

/* The next answer within ms (parsed into m, bytes in w->buf); 0 when
 * none came. */
static int raw_recv(struct raw *w, int ms, struct native_msg *m)
{
	struct pollfd p = { .fd = w->fd, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, ms) <= 0)
		return 0;
	n = recv(w->fd, w->buf, sizeof(w->buf), 0);
	cr_assert_gt(n, 0);
	cr_assert_eq(native_parse(w->buf, (size_t)n, 1, m), 0, "the broker sent an unreadable datagram");
	return 1;
}

/* Send, then expect an ERROR with `error` about `about` echoing the
 * request (expect_error 0: expect silence). */
static void expect_error(struct raw *w, const uint8_t *dg, size_t n, int16_t error, uint8_t about, uint32_t request,
			 const char *what)
{
	struct native_msg m;

	raw_send_dg(w, dg, n);
	if (!error) {
		cr_assert_eq(raw_recv(w, 300, &m), 0, "%s: the broker answered (%s %d) where it should stay silent",
			     what, native_type_name(m.type), m.error);
		return;
	}
	cr_assert_eq(raw_recv(w, 2000, &m), 1, "%s: no answer (expected ERROR %d)", what, error);
	cr_assert_eq(m.type, NATIVE_ERROR, "%s: a %s (error %d) instead of ERROR %d", what, native_type_name(m.type),
		     m.error, error);
	cr_assert_eq(m.error, error, "%s: ERROR %d (%.*s), expected %d", what, m.error, (int)m.data_len,
		     (const char *)m.data, error);
	cr_assert_eq(m.about, about, "%s: ERROR about %s", what, native_type_name(m.about));
	cr_assert_eq(m.request, request, "%s: ERROR echoes request %u, sent %u", what, m.request, request);
}

static void raw_hello(struct raw *w, uint32_t credits)
{
	struct native_msg m;
	int n = native_write_hello(w->buf, sizeof(w->buf), ++w->request, credits, NATIVE_MAX_DATAGRAM, "raw");

	raw_send_dg(w, w->buf, (size_t)n);
	cr_assert_eq(raw_recv(w, 3000, &m), 1, "no HELLO_ACK");
	cr_assert_eq(m.type, NATIVE_HELLO_ACK, "HELLO answered with %s %d", native_type_name(m.type), m.error);
	w->session = m.session;
	w->pid = m.producer_id;
}

/* A batch of count records (value {tag, i}) with the given identity. */
static uint32_t make_batch(uint8_t *buf, size_t cap, int count, uint32_t tag, int64_t pid, int32_t seq, int pad)
{
	struct batch_builder bb;
	static uint8_t val[2048];
	ssize_t n;

	batch_builder_init(&bb, buf, cap, 1700000000000);
	for (int i = 0; i < count; i++) {
		uint32_t v[2] = { tag, (uint32_t)i };

		memcpy(val, v, 8);
		cr_assert_eq(batch_builder_add(&bb, i, 1700000000000 + i, NULL, -1, val, 8 + pad, NULL, 0, 0), 0);
	}
	n = batch_builder_finish(&bb, 0, -1, pid, 0, seq);
	cr_assert_gt(n, 0);
	return (uint32_t)n;
}

/* What a partition holds: its high watermark and a hash of every record. */
struct snapshot {
	int64_t hw;
	uint64_t hash;
};

static struct snapshot snap(struct sluice_client *c, const char *topic, int32_t p)
{
	struct sluice_fetch_result res;
	struct snapshot s = { 0, 1469598103934665603ull };
	int64_t off = 0;

	for (;;) {
		int rc = sluice_fetch(c, topic, p, off, 1 << 20, 0, 5000, &res);

		cr_assert_geq(rc, 0, "snapshot fetch: %d", rc);
		cr_assert_eq(res.err, 0);
		for (size_t i = 0; i < res.count; i++) {
			const uint8_t *v = res.records[i].value;

			s.hash = (s.hash ^ (uint64_t)res.records[i].offset) * 1099511628211ull;
			for (int32_t j = 0; j < res.records[i].value_len; j++)
				s.hash = (s.hash ^ v[j]) * 1099511628211ull;
		}
		if (!res.count)
			break;
		off = res.next_offset;
	}
	s.hw = off;
	return s;
}

static long broker_counter_sum(const struct nbroker *nb, const char *what)
{
	char line[2048];
	FILE *f = fopen(nb->b.log_path, "r");
	long sum = 0;

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		const char *at = strstr(line, "native shard"), *w;

		if (!at || !(w = strstr(at, what)))
			continue;
		/* "<number> <what>" */
		while (w > at && w[-1] == ' ')
			w--;
		while (w > at && w[-1] >= '0' && w[-1] <= '9')
			w--;
		sum += strtol(w, NULL, 10);
	}
	fclose(f);
	return sum;
}

/* Every kind of bad datagram against *nbp (running, no topics yet), its
 * fragments fs bytes (8000 on loopback; 1000 where the path MTU is
 * Ethernet's: the DPDK stack never reassembles IP fragments); stops the
 * broker to read its counters, leaves the cleanup to the caller. */
static void bad_datagrams(struct nbroker *nbp, uint32_t fs)
{
	struct nbroker nb = *nbp;
	uint32_t pad = fs / 8;        /* a ~20-record batch of ~2.5 fragments */
	int nflood = (int)(1024000 / fs);   /* about 1 MiB, at most 1024 batches */
	struct sluice_config cfg;
	struct sluice_client *c;
	struct snapshot before[2], after;
	struct raw w;
	struct native_msg m;
	static uint8_t batch[64 << 10], dg[NATIVE_MAX_DATAGRAM];
	uint32_t blen, req;
	int n, acked = 0, throttled = 0, gaps = 0, other = 0;
	int64_t flood_records = 0;

	create_topic(&nb, "native-bad", 2);
	create_topic(&nb, "native-flood", 1);
	base_config(&cfg);
	c = connect_native(&nb, &cfg);
	wait_topic_native(c, "native-bad", 2);
	wait_topic_native(c, "native-flood", 1);
	/* something written first */
	for (int i = 0; i < 1000; i++) {
		uint32_t v[2] = { 7, (uint32_t)i };

		cr_assert_eq(sluice_produce(c, "native-bad", i % 2, NULL, 0, v, 8, NULL), 0);
	}
	cr_assert_eq(sluice_flush(c, 10000), 0);
	before[0] = snap(c, "native-bad", 0);
	before[1] = snap(c, "native-bad", 1);
	cr_assert_eq(before[0].hw + before[1].hw, 1000);

	raw_open(&w, &nb);
	/* short, foreign magic: silence */
	expect_error(&w, (const uint8_t *)"SLx", 3, 0, 0, 0, "3-byte datagram");
	n = native_write_fetch(dg, sizeof(dg), 0, ++w.request, "native-bad", 0, 0, 1024, 0);
	dg[0] = 'X';
	expect_error(&w, dg, (size_t)n, 0, 0, 0, "foreign magic");
	/* bad version */
	n = native_write_fetch(dg, sizeof(dg), 0, ++w.request, "native-bad", 0, 0, 1024, 0);
	dg[NH_VERSION] = 2;
	expect_error(&w, dg, (size_t)n, -NATIVE_E_VERSION, NATIVE_FETCH, w.request, "version 2");
	/* bad CRC */
	n = native_write_fetch(dg, sizeof(dg), 0, ++w.request, "native-bad", 0, 0, 1024, 0);
	dg[n - 1] ^= 1;
	expect_error(&w, dg, (size_t)n, -NATIVE_E_CRC, NATIVE_FETCH, w.request, "bad CRC");
	/* truncated: shorter than its length field */
	n = native_write_hello(dg, sizeof(dg), ++w.request, 1 << 20, NATIVE_MAX_DATAGRAM, "truncated");
	expect_error(&w, dg, (size_t)n - 3, -NATIVE_E_LENGTH, NATIVE_HELLO, w.request, "truncated HELLO");
	/* unknown type (a valid CRC over it) */
	n = native_write_fetch(dg, sizeof(dg), 0, ++w.request, "native-bad", 0, 0, 1024, 0);
	dg[NH_TYPE] = 42;
	be32_store(dg + NH_CRC, native_crc(dg, (size_t)n));
	expect_error(&w, dg, (size_t)n, -NATIVE_E_TYPE, 42, w.request, "type 42");
	/* a type only the broker sends */
	n = native_write_hello_ack(dg, sizeof(dg), ++w.request, 5, 1 << 20, 1472, 1, 99);
	expect_error(&w, dg, (size_t)n, -NATIVE_E_TYPE, NATIVE_HELLO_ACK, w.request, "HELLO_ACK to the broker");
	/* a session it never opened */
	blen = make_batch(batch, sizeof(batch), 3, 9, 1, 0, 0);
	n = native_write_produce(dg, sizeof(dg), 0x7fff1234, ++w.request, "native-bad", 0, 1, 1, 0, 0, blen, 0, 0, 1,
				 batch, blen);
	expect_error(&w, dg, (size_t)n, 59, NATIVE_PRODUCE, w.request, "unknown session");

	raw_hello(&w, 65536);
	/* unknown topic, unknown partition: PRODUCE_ACK with error 3 */
	blen = make_batch(batch, sizeof(batch), 3, 9, w.pid, 0, 0);
	n = native_write_produce(dg, sizeof(dg), w.session, ++w.request, "native-nosuch", 0, 1, w.pid, 0, 0, blen, 0,
				 0, 1, batch, blen);
	raw_send_dg(&w, dg, (size_t)n);
	cr_assert(raw_recv(&w, 2000, &m) && m.type == NATIVE_PRODUCE_ACK && m.error == 3 && m.offset == -1,
		  "unknown topic: %s error %d", native_type_name(m.type), m.error);
	n = native_write_produce(dg, sizeof(dg), w.session, ++w.request, "native-bad", 99, 1, w.pid, 0, 0, blen, 0, 0,
				 1, batch, blen);
	raw_send_dg(&w, dg, (size_t)n);
	cr_assert(raw_recv(&w, 2000, &m) && m.type == NATIVE_PRODUCE_ACK && m.error == 3,
		  "unknown partition: %s error %d", native_type_name(m.type), m.error);
	n = native_write_fetch(dg, sizeof(dg), w.session, ++w.request, "native-bad", 99, 0, 1024, 0);
	raw_send_dg(&w, dg, (size_t)n);
	cr_assert(raw_recv(&w, 2000, &m) && m.type == NATIVE_FETCH_DATA && m.error == 3,
		  "FETCH of an unknown partition: %s error %d", native_type_name(m.type), m.error);
	/* a producer id the broker never issued (nor gave this session) */
	blen = make_batch(batch, sizeof(batch), 3, 9, w.pid + 1000000, 0, 0);
	n = native_write_produce(dg, sizeof(dg), w.session, ++w.request, "native-bad", 0, 1, w.pid + 1000000, 0, 0,
				 blen, 0, 0, 1, batch, blen);
	raw_send_dg(&w, dg, (size_t)n);
	cr_assert(raw_recv(&w, 2000, &m) && m.type == NATIVE_PRODUCE_ACK && m.error == 59,
		  "foreign producer id: %s error %d", native_type_name(m.type), m.error);
	/* a corrupt batch in a sound datagram: CORRUPT_MESSAGE */
	blen = make_batch(batch, sizeof(batch), 3, 9, w.pid, 0, 0);
	batch[blen - 1] ^= 0x55;
	n = native_write_produce(dg, sizeof(dg), w.session, ++w.request, "native-bad", 0, 1, w.pid, 0, 0, blen, 0, 0,
				 1, batch, blen);
	raw_send_dg(&w, dg, (size_t)n);
	cr_assert(raw_recv(&w, 2000, &m) && m.type == NATIVE_PRODUCE_ACK && m.error == 2,
		  "corrupt batch: %s error %d", native_type_name(m.type), m.error);
	/* fragments that do not add up */
	blen = make_batch(batch, sizeof(batch), 20, 9, w.pid, 0, (int)pad);   /* 3 fragments */
	req = ++w.request;
	n = native_write_produce(dg, sizeof(dg), w.session, req, "native-bad", 0, 1, w.pid, 0, 0, blen, 0, 3, 3,
				 batch, 1000);
	expect_error(&w, dg, (size_t)n, -NATIVE_E_FRAGMENT, NATIVE_PRODUCE, req, "fragment index 3 of 3");
	req = ++w.request;
	n = native_write_produce(dg, sizeof(dg), w.session, req, "native-bad", 0, 1, w.pid, 0, 0, blen, 0, 0, 2,
				 batch, fs);
	raw_send_dg(&w, dg, (size_t)n);
	cr_assert_eq(raw_recv(&w, 200, &m), 0, "a first fragment is not answered");
	/* the second and last starts past the end of the first (a gap) */
	n = native_write_produce(dg, sizeof(dg), w.session, req, "native-bad", 0, 1, w.pid, 0, 0, blen, blen - fs / 8, 1,
				 2, batch + blen - fs / 8, fs / 8);
	expect_error(&w, dg, (size_t)n, -NATIVE_E_FRAGMENT, NATIVE_PRODUCE, req, "fragments with a gap");
	req = ++w.request;
	n = native_write_produce(dg, sizeof(dg), w.session, req, "native-bad", 0, 1, w.pid, 0, 0, blen, 0, 0, 3,
				 batch, fs);
	raw_send_dg(&w, dg, (size_t)n);
	/* the same batch, another fragment count */
	n = native_write_produce(dg, sizeof(dg), w.session, req, "native-bad", 0, 1, w.pid, 0, 0, blen, fs, 1, 4,
				 batch + fs, fs);
	expect_error(&w, dg, (size_t)n, -NATIVE_E_FRAGMENT, NATIVE_PRODUCE, req, "fragment counts disagree");
	/* a batch whose length disagrees with the datagram's batch_len */
	req = ++w.request;
	n = native_write_produce(dg, sizeof(dg), w.session, req, "native-bad", 0, 1, w.pid, 0, 0, blen, 0, 0, 3,
				 batch, fs);
	raw_send_dg(&w, dg, (size_t)n);
	n = native_write_produce(dg, sizeof(dg), w.session, req, "native-bad", 0, 1, w.pid, 0, 0, blen + 8, fs, 1, 3,
				 batch + fs, fs);
	expect_error(&w, dg, (size_t)n, -NATIVE_E_FRAGMENT, NATIVE_PRODUCE, req, "batch lengths disagree");
	/* an incomplete batch (only its first fragment) is never appended */
	n = native_write_produce(dg, sizeof(dg), w.session, ++w.request, "native-bad", 1, 1, w.pid, 0, 0, blen, 0, 0, 3,
				 batch, fs);
	raw_send_dg(&w, dg, (size_t)n);
	cr_assert_eq(raw_recv(&w, 200, &m), 0);

	/* nothing written changed, and the broker serves */
	after = snap(c, "native-bad", 0);
	cr_assert(after.hw == before[0].hw && after.hash == before[0].hash, "partition 0 changed: hw %lld -> %lld",
		  (long long)before[0].hw, (long long)after.hw);
	after = snap(c, "native-bad", 1);
	cr_assert(after.hw == before[1].hw && after.hash == before[1].hash, "partition 1 changed: hw %lld -> %lld",
		  (long long)before[1].hw, (long long)after.hw);

	/* a flood beyond credits: 1 MiB in batches of about fs bytes back to back
	 * on a session granted 64 KiB */
	for (int i = 0; i < nflood; i++) {
		uint32_t bl = make_batch(batch, sizeof(batch), 8, (uint32_t)i, w.pid, i * 8, (int)fs / 8);

		n = native_write_produce(dg, sizeof(dg), w.session, 10000 + (uint32_t)i, "native-flood", 0, 1, w.pid, 0,
					 i * 8, bl, 0, 0, 1, batch, bl);
		cr_assert_gt(n, 0);
		raw_send_dg(&w, dg, (size_t)n);
	}
	{
		int64_t base[1024];
		int state[1024] = { 0 };   /* 1 acked, 2 refused */

		for (int got = 0; got < nflood && raw_recv(&w, 3000, &m);) {
			int i = (int)m.request - 10000;

			if (i < 0 || i >= nflood)
				continue;
			got++;
			if (m.type == NATIVE_PRODUCE_ACK && m.error == 0) {
				acked++;
				state[i] = 1;
				base[i] = m.offset;
			} else if (m.type == NATIVE_ERROR && m.error == 89) {
				throttled++;
				state[i] = 2;
			} else if (m.type == NATIVE_PRODUCE_ACK && m.error == 45) {
				gaps++;
				state[i] = 2;
			} else {
				other++;
				fprintf(stderr, "native: flood: batch %d answered %s error %d\n", i, native_type_name(m.type),
					m.error);
			}
		}
		fprintf(stderr, "native: flood of %d x %u B on 64 KiB of credits: %d acknowledged, %d throttled, %d "
				"out of order after a throttled one, %d other\n",
			nflood, fs, acked, throttled, gaps, other);
		cr_assert_gt(throttled, 0, "1 MiB sent at once on 64 KiB of credits, and nothing was throttled");
		cr_assert_gt(acked, 0);
		cr_assert_eq(other, 0);
		/* the log holds exactly the acknowledged batches, in order */
		{
			struct sluice_fetch_result res;
			int64_t off = 0;
			int next = 0;

			for (;;) {
				cr_assert_geq(sluice_fetch(c, "native-flood", 0, off, 1 << 20, 0, 5000, &res), 0);
				if (!res.count)
					break;
				for (size_t k = 0; k < res.count; k++) {
					uint32_t v[2];

					memcpy(v, res.records[k].value, 8);
					while (next < nflood && state[next] != 1)
						next++;
					cr_assert_lt(next, nflood, "the log holds more than what was acknowledged");
					cr_assert(v[0] == (uint32_t)next && res.records[k].offset == base[next] + v[1],
						  "offset %lld holds {%u, %u}, expected batch %d", (long long)res.records[k].offset,
						  v[0], v[1], next);
					if (v[1] == 7)
						next++;
					flood_records++;
				}
				off = res.next_offset;
			}
			cr_assert_eq(flood_records, (int64_t)acked * 8);
		}
	}

	/* still serving: the library produces and reads */
	for (int i = 0; i < 100; i++) {
		uint32_t v[2] = { 8, (uint32_t)i };

		cr_assert_eq(sluice_produce(c, "native-bad", 0, NULL, 0, v, 8, NULL), 0);
	}
	cr_assert_eq(sluice_flush(c, 10000), 0);
	after = snap(c, "native-bad", 0);
	cr_assert_eq(after.hw, before[0].hw + 100);
	sluice_close(c);
	close(w.fd);

	/* the broker counted them (its counters at exit) */
	broker_stop(&nb.b);
	cr_assert_geq(broker_counter_sum(&nb, "unreadable"), 5, "unreadable datagrams not counted");
	cr_assert_geq(broker_counter_sum(&nb, "unknown session"), 1);
	cr_assert_geq(broker_counter_sum(&nb, "unknown producer"), 1);
	cr_assert_geq(broker_counter_sum(&nb, "beyond credits"), throttled);
	cr_assert_geq(broker_counter_sum(&nb, "bad fragments"), 3);
	*nbp = nb;
}

Test(native, bad_datagrams_refused_nothing_written_changes, .timeout = 60)
{
	struct nbroker nb;

	nbroker_launch(&nb, NULL);
	bad_datagrams(&nb, 8000);
	broker_cleanup(&nb.b);
}

/* kcat (librdkafka's command line) over TCP, one partition at a time:
 * every record at its offset with its key, none missing, none more. */
static void kcat_compare(struct nbroker *nb, struct run *r, const char *topic)
{
	for (int p = 0; p < r->parts; p++) {
		long want = (r->n - p + r->parts - 1) / r->parts, got = 0;
		char cmd[512], line[128];
		FILE *f;

		snprintf(cmd, sizeof(cmd), "kcat -C -q -b %s -t %s -p %d -o beginning -e -f '%%o %%k\\n'", nb->b.bootstrap,
			 topic, p);
		f = popen(cmd, "r");
		cr_assert_not_null(f, "%s", cmd);
		while (fgets(line, sizeof(line), f)) {
			long off, idx;
			char key[32];

			cr_assert_eq(sscanf(line, "%ld %31s", &off, key), 2, "kcat %s/%d: '%s'", topic, p, line);
			cr_assert_eq(off, got, "kcat %s/%d: offset %ld, expected %ld", topic, p, off, got);
			idx = off * r->parts + p;
			cr_assert(key[0] == 'k' && strtol(key + 1, NULL, 10) == idx, "kcat %s/%d offset %ld: key %s", topic,
				  p, off, key);
			got++;
		}
		cr_assert_eq(pclose(f), 0, "%s failed", cmd);
		cr_assert_eq(got, want, "kcat %s/%d: %ld records, %ld produced", topic, p, got, want);
	}
}

/* ---- over DPDK: the broker's shards on a net_tap port ------------------------------------- */

/* The broker starts the EAL with a net_tap port (the kernel gets an
 * interface facing it); the test puts the other address of a /24 on that
 * interface, so the kernel's UDP (the client) reaches the shards' queues
 * through it. Needs root (a tap interface, the EAL); otherwise skipped,
 * saying why. Addresses and names are unique per test process. */
struct tapbroker {
	struct nbroker nb;
	char iface[16];
	char eal_kv[256], listen_kv[64];
};

static void tap_skip_unless_possible(void)
{
	if (geteuid() != 0)
		cr_skip_test("DPDK over net_tap needs root (a tap interface and the EAL): run make test as root");
	if (access("/dev/net/tun", R_OK | W_OK) < 0)
		cr_skip_test("DPDK over net_tap needs /dev/net/tun: %s", strerror(errno));
}

static void run_cmd(const char *fmt, const char *a, int x)
{
	char cmd[256];
	int rc;

	snprintf(cmd, sizeof(cmd), fmt, a, x, a);
	rc = system(cmd);
	cr_assert_eq(rc, 0, "'%s' failed (%d)", cmd, rc);
}

static void tapbroker_launch(struct tapbroker *t, const char *const *more)
{
	int net = (int)(getpid() % 250) + 1, n = 0;

	memset(t, 0, sizeof(*t));
	snprintf(t->iface, sizeof(t->iface), "slnt%d", (int)getpid());
	snprintf(t->eal_kv, sizeof(t->eal_kv),
		 "dpdk.eal.args=--no-huge -m 256 --no-pci --file-prefix=%s --vdev=net_tap0,iface=%s", t->iface,
		 t->iface);
	snprintf(t->listen_kv, sizeof(t->listen_kv), "dpdk.listen=10.201.%d.1:9093", net);
	t->nb.extra[n++] = "--set";
	t->nb.extra[n++] = "dpdk.enable=true";
	t->nb.extra[n++] = "--set";
	t->nb.extra[n++] = t->eal_kv;
	t->nb.extra[n++] = "--set";
	t->nb.extra[n++] = t->listen_kv;
	/* two shards polling on two cores beside the test: sleep when idle */
	t->nb.extra[n++] = "--set";
	t->nb.extra[n++] = "dpdk.poll.sleep.us=50";
	for (int i = 0; more && more[i]; i++)
		t->nb.extra[n++] = more[i];
	t->nb.extra[n] = NULL;
	broker_launch(&t->nb.b, t->nb.extra);
	/* the kernel's side of the port: our address, up */
	run_cmd("ip addr add 10.201.%2$d.2/24 dev %1$s && ip link set %1$s up", t->iface, net);
	snprintf(t->nb.native, sizeof(t->nb.native), "10.201.%d.1:9093", net);
}

/* After the broker: its EAL's runtime directory (the tap interface left
 * with the process). The tests' .fini, so it runs after a failed
 * assertion too. */
static struct tapbroker tap_current;

static void tapbroker_fini(void)
{
	struct tapbroker *t = &tap_current;
	char cmd[96];

	if (!t->iface[0])
		return;
	if (t->nb.b.pid)
		broker_kill(&t->nb.b);
	broker_cleanup(&t->nb.b);
	snprintf(cmd, sizeof(cmd), "rm -rf /var/run/dpdk/%.15s", t->iface);
	if (system(cmd) != 0)
		fprintf(stderr, "native: '%s' failed\n", cmd);
	t->iface[0] = 0;
}

/* The broker's counters at exit for the DPDK side of every shard. */
static long tap_counter(const struct tapbroker *t, const char *what)
{
	return broker_counter_sum(&t->nb, what);
}

Test(native, million_records_over_dpdk_tap, .timeout = 180, .fini = tapbroker_fini)
{
	const long n = 1000000;
	const int parts = 4;
	struct tapbroker *t = &tap_current;
	struct sluice_config cfg;
	struct sluice_client *c;
	struct sluice_stats st;
	struct readback rb;
	struct run r;
	double secs;

	tap_skip_unless_possible();
	tapbroker_launch(t, NULL);
	create_topic(&t->nb, "tap-m", parts);
	run_init(&r, n, parts);
	base_config(&cfg);
	cfg.delivery = on_delivery;
	cfg.delivery_ctx = &r;
	c = connect_native(&t->nb, &cfg);
	wait_topic_native(c, "tap-m", parts);
	secs = produce_all(c, &r, "tap-m");
	sluice_stats(c, &st);
	read_native(c, &r, "tap-m", 1, &rb);
	cr_assert_eq(rb.records, n);
	read_rdkafka(&t->nb, &r, "tap-m");
	kcat_compare(&t->nb, &r, "tap-m");
	fprintf(stderr,
		"native: over DPDK (net_tap, kernel UDP client): %ld records in %.2f s, %.0f records/s (%u-byte "
		"datagrams, %llu batches, %llu resent)\n",
		n, secs, (double)n / secs, st.max_datagram, (unsigned long long)st.batches_sent,
		(unsigned long long)st.batch_resends);
	sluice_close(c);
	broker_stop(&t->nb.b);
	/* the records came through the DPDK port, not a kernel socket */
	{
		long frames = tap_counter(t, "frames in,"), dgs = tap_counter(t, "datagrams in, "),
		     fwd = tap_counter(t, "passed to their session's"), arp = tap_counter(t, "learned,");

		fprintf(stderr,
			"native: the broker's DPDK port: %ld frames in, %ld datagrams, %ld passed to another shard, "
			"%ld ARP entries learned\n",
			frames, dgs, fwd, arp);
		cr_assert_geq(frames, 1, "the broker's DPDK side saw no datagram");
	}
	run_free(&r);
}

/* The same bad datagrams through the DPDK port (Ethernet's MTU: net_tap
 * takes no jumbo frames): the shards' stacks hand them to the same
 * checks. */
Test(native, bad_datagrams_over_dpdk_tap, .timeout = 90, .fini = tapbroker_fini)
{
	struct tapbroker *t = &tap_current;

	tap_skip_unless_possible();
	/* sync: acknowledgements wait for the disk, so the flood outruns
	 * them over the slower tap path as it does over loopback */
	static const char *const sync[] = { "--set", "log.durability=sync", NULL };

	tapbroker_launch(t, sync);
	bad_datagrams(&t->nb, 1000);
	cr_assert_geq(tap_counter(t, "frames in,"), 1, "the broker's DPDK side saw no datagram");
}
