/* bench/kafka_wide.c — `sluice-bench produce --client wide`: the produce
 * load from a client that packs every partition it has records for into
 * one ProduceRequest, as the Java client, kafka-python and Sarama do.
 * librdkafka (2.0.2 here) sends one partition a ProduceRequest, so with
 * thousands of partitions its broker thread, not the broker, sets the pace
 * (docs/benchmarks.md, "10,000 partitions"); this client shows the
 * broker's own limit on the same load.
 *
 * Raw Kafka protocol over one TCP connection to the bootstrap broker:
 * Produce v7, record batches v2 built with storage/batch.h's builder
 * (uncompressed, no producer id), up to WIDE_IN_FLIGHT requests pipelined
 * (the Java client's max.in.flight.requests.per.connection), a partition's
 * records sent once its oldest waited linger.ms (the Java client's "ready"
 * rule; its batch.size is never reached here), at most WIDE_REQ_MAX bytes
 * a request (max.request.size). Partition = record index % partitions, as
 * kafka_produce. Partitions that have records wait in one FIFO, oldest
 * first, so a request is built without looking at the idle ones. One
 * broker only: every partition must be led by the bootstrap broker (a
 * one-node broker, or --bootstrap to a partition's leader); any partition
 * error ends the run naming the partition and the Kafka error code.
 *
 * Ack latency is a record's: from the moment it was due (queued) to the
 * response of the request that carried it.
 *
 * `sluice-bench e2e --client wide` (kafka_e2e_wide) runs the same producer
 * paced at --rate, waiting for the next record's due time rather than a
 * poll tick (at linger.ms=0 a record goes in a request of its own as soon
 * as it is due, as librdkafka's would), each value
 * carrying its due time, against kafka_fetch.c's raw reader.
 *
 * Thread: the caller's (the benchmark's main thread) only.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/kafka.h"
#include "storage/batch.h"

#define WIDE_IN_FLIGHT 5
#define WIDE_REQ_MAX   (1u << 20)
#define WIDE_OUT_CAP   (8u << 20)
#define WIDE_QUEUE_MAX 2000000ull      /* records queued and not acknowledged (librdkafka's
					* queue.buffering.max.messages in kafka_produce) */
#define WIDE_PRODUCE_V 7
#define WIDE_TIMEOUT_MS 30000

struct wide_slot {
	int32_t corr;
	int n;                          /* partitions in the request */
	int32_t *part;
	uint64_t *first;                /* the first record index sent for it */
	uint32_t *count;
};

struct wide {
	const struct opts *o;
	int fd;
	uint32_t np;
	uint64_t *enq_ns;               /* record index -> when it was due */
	uint64_t *first;                /* partition -> its oldest record not sent */
	uint32_t *pending;              /* partition -> records not sent */
	int32_t *fifo;                  /* partitions with records not sent, oldest first */
	uint32_t fhead, flen;
	struct wide_slot slot[WIDE_IN_FLIGHT];
	int shead, sn;                  /* requests in flight, oldest at shead */
	int32_t next_corr;
	uint8_t *out;
	size_t out_off, out_len;
	uint8_t *in;
	size_t in_len, in_cap;
	uint8_t *value;
	uint64_t acked, requests, batches;
	uint64_t t0, rate;              /* e2e (stamp): record i was due at t0 + i / rate */
	int stamp;                      /* e2e: value bytes 8..15 carry the record's due time */
	struct hist late;               /* e2e: from a record's due time to its queueing (ns) */
	const char *topic;
	char err[512];
};

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)(v >> 16)); put16(p + 2, (uint16_t)v); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }

int kafka_connect(const char *bootstrap, int nonblock, char *err, size_t errlen)
{
	char host[320], *colon;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	int fd = -1, one = 1, rc;

	snprintf(host, sizeof(host), "%s", bootstrap);
	host[strcspn(host, ",")] = '\0';
	if (!(colon = strrchr(host, ':'))) {
		snprintf(err, errlen, "bootstrap %s: expects HOST:PORT", bootstrap);
		return -EINVAL;
	}
	*colon = '\0';
	if ((rc = getaddrinfo(host, colon + 1, &hints, &ai)) != 0) {
		snprintf(err, errlen, "bootstrap %s: %s", bootstrap, gai_strerror(rc));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		rc = -errno;
		snprintf(err, errlen, "connect to %s: %s", bootstrap, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return rc;
	}
	freeaddrinfo(ai);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (nonblock)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/* Records up to `upto` are due at now: each joins its partition's pending
 * records (the partition the FIFO's tail when it had none). */
static void wide_queue(struct wide *w, uint64_t *queued, uint64_t upto, uint64_t now)
{
	for (uint64_t i = *queued; i < upto; i++) {
		uint32_t p = (uint32_t)(i % w->np);

		w->enq_ns[i] = now;
		if (w->stamp) {
			uint64_t due = w->t0 + (uint64_t)((double)i * 1e9 / (double)w->rate);

			hist_add(&w->late, now > due ? now - due : 0);
		}
		if (!w->pending[p]++) {
			w->first[p] = i;
			w->fifo[(w->fhead + w->flen++) % w->np] = (int32_t)p;
		}
	}
	*queued = upto;
}

/* One ProduceRequest of every partition whose oldest record waited
 * linger (FIFO order), at most WIDE_REQ_MAX bytes: 1 built, 0 nothing
 * ready (or no room), -errno. */
static int wide_build(struct wide *w, uint64_t now)
{
	const struct opts *o = w->o;
	uint64_t linger = (uint64_t)(o->linger_ms >= 0 ? o->linger_ms : 5) * 1000000ull;
	size_t rec_max = (size_t)o->size + 32, start, at;
	struct wide_slot *s;
	uint8_t *b;
	int64_t now_ms = (int64_t)(now / 1000000);
	size_t tlen = strlen(w->topic);
	int n = 0;

	if (w->sn == WIDE_IN_FLIGHT || !w->flen || w->enq_ns[w->first[w->fifo[w->fhead]]] + linger > now)
		return 0;
	if (w->out_off == w->out_len)
		w->out_off = w->out_len = 0;
	if (WIDE_OUT_CAP - w->out_len < WIDE_REQ_MAX + 256)
		return 0;   /* the socket is behind: send what is built first */
	s = &w->slot[(w->shead + w->sn) % WIDE_IN_FLIGHT];
	start = w->out_len;
	b = w->out + start;
	at = 4;
	put16(b + at, 0);                       /* Produce */
	put16(b + at + 2, WIDE_PRODUCE_V);
	put32(b + at + 4, (uint32_t)w->next_corr);
	put16(b + at + 8, 17);
	memcpy(b + at + 10, "sluice-bench-wide", 17);
	at += 27;
	put16(b + at, 0xffff);                  /* transactional_id: null */
	put16(b + at + 2, (uint16_t)(int16_t)o->acks);
	put32(b + at + 4, WIDE_TIMEOUT_MS);
	put32(b + at + 8, 1);                   /* one topic */
	put16(b + at + 12, (uint16_t)tlen);
	memcpy(b + at + 14, w->topic, tlen);
	at += 14 + tlen;
	size_t count_at = at;

	at += 4;
	while (w->flen) {
		int32_t p = w->fifo[w->fhead];
		uint64_t first = w->first[p];
		uint32_t k = w->pending[p];
		struct batch_builder bb;
		ssize_t blen;

		if (w->enq_ns[first] + linger > now)
			break;
		if (k > (WIDE_REQ_MAX - 512) / rec_max)
			k = (uint32_t)((WIDE_REQ_MAX - 512) / rec_max);
		if (n && at + 8 + BATCH_HEADER_SIZE + (size_t)k * rec_max > WIDE_REQ_MAX)
			break;
		put32(b + at, (uint32_t)p);
		batch_builder_init(&bb, b + at + 8, WIDE_REQ_MAX - at - 8, now_ms);
		for (uint32_t j = 0; j < k; j++) {
			uint64_t idx = first + (uint64_t)j * w->np;

			memcpy(w->value, &idx, sizeof(idx));
			if (w->stamp) {
				uint64_t due = w->t0 + (uint64_t)((double)idx * 1e9 / (double)w->rate);

				memcpy(w->value + 8, &due, sizeof(due));
			}
			if (batch_builder_add(&bb, (int32_t)j, now_ms, NULL, -1, w->value, o->size, NULL, 0, 0) < 0)
				return -ENOBUFS;
		}
		if ((blen = batch_builder_finish(&bb, 0, -1, -1, -1, -1)) < 0)
			return -ENOBUFS;
		put32(b + at + 4, (uint32_t)blen);
		at += 8 + (size_t)blen;
		s->part[n] = p;
		s->first[n] = first;
		s->count[n++] = k;
		w->first[p] = first + (uint64_t)k * w->np;
		w->pending[p] -= k;
		w->fhead = (w->fhead + 1) % w->np;
		w->flen--;
		if (w->pending[p])   /* more than a request holds: again, last */
			w->fifo[(w->fhead + w->flen++) % w->np] = p;
		if ((uint32_t)n == w->np)
			break;
	}
	put32(b + count_at, (uint32_t)n);
	put32(b, (uint32_t)(at - 4));
	s->corr = w->next_corr++;
	s->n = n;
	w->sn++;
	w->out_len += at;
	w->requests++;
	w->batches += (uint64_t)n;
	return 1;
}

/* One response frame (body after the correlation id) for the oldest
 * request: its records' latencies; a partition's error ends the run. */
static int wide_answered(struct wide *w, struct run *r, const uint8_t *p, size_t len, uint64_t now)
{
	struct wide_slot *s = &w->slot[w->shead];
	const uint8_t *end = p + len;
	uint32_t nt;

	if (len < 4)
		return -EBADMSG;
	nt = get32(p);
	p += 4;
	for (uint32_t t = 0; t < nt; t++) {
		uint32_t npart;

		if (end - p < 2 || end - p < 2 + get16(p) + 4)
			return -EBADMSG;
		p += 2 + get16(p);
		npart = get32(p);
		p += 4;
		for (uint32_t i = 0; i < npart; i++) {
			int16_t code;

			if (end - p < 4 + 2 + 8 + 8 + 8)
				return -EBADMSG;
			code = (int16_t)get16(p + 4);
			if (code) {
				snprintf(w->err, sizeof(w->err), "partition %d: Kafka error code %d",
					 (int)(int32_t)get32(p), code);
				return -EIO;
			}
			p += 30;
		}
	}
	for (int i = 0; i < s->n; i++)
		for (uint32_t j = 0; j < s->count[i]; j++) {
			uint64_t idx = s->first[i] + (uint64_t)j * w->np;

			hist_add(&r->lat, now - w->enq_ns[idx]);
		}
	for (int i = 0; i < s->n; i++)
		w->acked += s->count[i];
	w->shead = (w->shead + 1) % WIDE_IN_FLIGHT;
	w->sn--;
	return 0;
}

/* Send what is built, read what came, waiting at most timeout_ns for
 * either: 0, or -errno (w->err says). */
static int wide_io(struct wide *w, struct run *r, uint64_t timeout_ns)
{
	struct pollfd pf = { .fd = w->fd, .events = POLLIN | (w->out_off < w->out_len ? POLLOUT : 0) };
	struct timespec ts = { (time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull) };
	uint64_t now;
	size_t off = 0;

	if (ppoll(&pf, 1, &ts, NULL) < 0 && errno != EINTR)
		return -errno;
	if (pf.revents & (POLLERR | POLLHUP)) {
		snprintf(w->err, sizeof(w->err), "the broker closed the connection");
		return -ECONNRESET;
	}
	while (w->out_off < w->out_len) {
		ssize_t n = send(w->fd, w->out + w->out_off, w->out_len - w->out_off, MSG_NOSIGNAL);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n < 0) {
			snprintf(w->err, sizeof(w->err), "send: %s", strerror(errno));
			return -errno;
		}
		w->out_off += (size_t)n;
	}
	for (;;) {
		ssize_t n;

		if (w->in_cap - w->in_len < 65536) {
			uint8_t *g = realloc(w->in, w->in_cap * 2);

			if (!g)
				return -ENOMEM;
			w->in = g;
			w->in_cap *= 2;
		}
		n = recv(w->fd, w->in + w->in_len, w->in_cap - w->in_len, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			snprintf(w->err, sizeof(w->err), "the broker closed the connection%s%s",
				 n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
			return n < 0 ? -errno : -ECONNRESET;
		}
		w->in_len += (size_t)n;
	}
	now = bench_now_ns();
	while (w->in_len - off >= 4) {
		uint32_t flen = get32(w->in + off);
		int rc;

		if (w->in_len - off - 4 < flen)
			break;
		if (flen < 4 || !w->sn || (int32_t)get32(w->in + off + 4) != w->slot[w->shead].corr) {
			snprintf(w->err, sizeof(w->err), "a response out of order or unasked (correlation id %d)",
				 flen >= 4 ? (int)(int32_t)get32(w->in + off + 4) : -1);
			return -EBADMSG;
		}
		if ((rc = wide_answered(w, r, w->in + off + 8, flen - 4, now)) < 0) {
			if (rc == -EBADMSG)
				snprintf(w->err, sizeof(w->err), "a Produce response that does not read");
			return rc;
		}
		off += 4 + flen;
	}
	memmove(w->in, w->in + off, w->in_len - off);
	w->in_len -= off;
	return 0;
}

static void wide_free(struct wide *w)
{
	if (w->fd >= 0)
		close(w->fd);
	for (int i = 0; i < WIDE_IN_FLIGHT; i++) {
		free(w->slot[i].part);
		free(w->slot[i].first);
		free(w->slot[i].count);
	}
	free(w->enq_ns);
	free(w->first);
	free(w->pending);
	free(w->fifo);
	free(w->out);
	free(w->in);
	free(w->value);
}

/* The load, paced at rate records/s (0: as fast as the queue allows);
 * rd: an e2e run, whose reader is running: records carry their due time,
 * progress says what it received, its failure ends the run. */
static int wide_run(const struct opts *o, struct broker *br, const char *topic, uint64_t records,
		    uint64_t rate, struct run *r, const char *label, struct raw_reader *rd)
{
	struct wide w = { .o = o, .fd = -1, .np = (uint32_t)o->partitions, .topic = topic,
			  .rate = rate, .stamp = rd != NULL };
	uint64_t t0, queued = 0, last_acked = 0, last_t, next_tick, stall_t, last_done = 0;
	uint64_t deadline = o->seconds > 0 && !rd ? (uint64_t)(o->seconds * 1e9) : UINT64_MAX;
	volatile int *stop = r->stop;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	r->stop = stop;
	hist_init(&r->lat);
	hist_init(&r->commit);
	w.enq_ns = malloc(records * sizeof(*w.enq_ns));
	w.first = calloc(w.np, sizeof(*w.first));
	w.pending = calloc(w.np, sizeof(*w.pending));
	w.fifo = calloc(w.np, sizeof(*w.fifo));
	w.out = malloc(WIDE_OUT_CAP);
	w.in_cap = 1u << 20;
	w.in = malloc(w.in_cap);
	w.value = calloc(1, (size_t)o->size + 16);
	int nomem = !w.enq_ns || !w.first || !w.pending || !w.fifo || !w.out || !w.in || !w.value;

	for (int i = 0; i < WIDE_IN_FLIGHT; i++) {
		w.slot[i].part = calloc(w.np, sizeof(int32_t));
		w.slot[i].first = calloc(w.np, sizeof(uint64_t));
		w.slot[i].count = calloc(w.np, sizeof(uint32_t));
		nomem |= !w.slot[i].part || !w.slot[i].first || !w.slot[i].count;
	}
	if (nomem) {
		fprintf(stderr, "%s: out of memory for %" PRIu64 " records\n", label, records);
		wide_free(&w);
		return -ENOMEM;
	}
	for (int i = rd ? 16 : 8; i < o->size; i++)
		w.value[i] = (uint8_t)('a' + i % 26);
	if ((w.fd = kafka_connect(br->bootstrap, 1, w.err, sizeof(w.err))) < 0) {
		fprintf(stderr, "%s: %s\n", label, w.err);
		rc = w.fd;
		wide_free(&w);
		return rc;
	}
	fprintf(stderr, "%s: %" PRIu64 " records x %d bytes to %s (%d partitions), acks=%d, linger.ms=%d, "
		"client wide (Produce v%d, every ready partition in one request, %d in flight)\n", label,
		records, o->size, topic, o->partitions, o->acks, o->linger_ms >= 0 ? o->linger_ms : 5,
		WIDE_PRODUCE_V, WIDE_IN_FLIGHT);
	hist_init(&w.late);
	t0 = last_t = stall_t = w.t0 = bench_now_ns();
	next_tick = t0 + 1000000000ull;
	if (rd)
		__atomic_store_n(&rd->warm_until, t0 + 1000000000ull, __ATOMIC_RELEASE);
	deadline = deadline == UINT64_MAX ? UINT64_MAX : t0 + deadline;
	while (w.acked < records) {
		uint64_t now = bench_now_ns(), due, wait = 1000000;
		int built;

		if ((stop && *stop) || now >= deadline)
			records = queued;   /* the caller ends the run (or --seconds): drain what was queued */
		due = rate ? (uint64_t)((double)(now - t0) * (double)rate / 1e9) + 1 : records;
		if (due > records)
			due = records;
		if (due > w.acked + WIDE_QUEUE_MAX)
			due = w.acked + WIDE_QUEUE_MAX;
		if (due > queued)
			wide_queue(&w, &queued, due, now);
		while ((built = wide_build(&w, now)) == 1)
			;
		if (built < 0) {
			fprintf(stderr, "%s: a batch did not fit its request\n", label);
			rc = built;
			break;
		}
		/* until the next record is due, 1 ms at most (the next linger
		 * passed) */
		if (rate && queued < records) {
			uint64_t next = t0 + (uint64_t)((double)queued * 1e9 / (double)rate);

			now = bench_now_ns();
			wait = next <= now ? 0 : next - now < wait ? next - now : wait;
		}
		if ((rc = wide_io(&w, r, wait)) < 0) {
			fprintf(stderr, "%s: %s\n", label, w.err);
			break;
		}
		now = bench_now_ns();
		r->live = w.acked;
		if (w.acked != last_acked) {
			last_acked = w.acked;
			stall_t = now;
		}
		if (now >= next_tick) {
			uint64_t rss = proc_rss_kb(br->pid);

			if (rss > r->peak_rss_kb)
				r->peak_rss_kb = rss;
			char got[48] = "";

			if (rd)
				snprintf(got, sizeof(got), ", %" PRIu64 " received",
					 __atomic_load_n(&rd->got, __ATOMIC_ACQUIRE));
			fprintf(stderr, "%s: %.0f s  %" PRIu64 "/%" PRIu64 "  %.0f records/s now, %.0f avg  "
				"(%" PRIu64 " queued, %" PRIu64 " requests, %.1f partitions a request%s)\n", label,
				(double)(now - t0) / 1e9, w.acked, records,
				(double)(w.acked - last_done) * 1e9 / (double)(now - last_t),
				(double)w.acked * 1e9 / (double)(now - t0), queued, w.requests,
				w.requests ? (double)w.batches / (double)w.requests : 0.0, got);
			last_done = w.acked;
			last_t = now;
			next_tick += 1000000000ull;
			if (!broker_alive(br)) {
				rc = -ECHILD;
				break;
			}
		}
		if (now - stall_t > STALL_TIMEOUT * 1000000000ull && (w.sn || queued > w.acked)) {
			fprintf(stderr, "%s: no Produce response for %d s (%" PRIu64 " queued, %" PRIu64
				" acknowledged): broker stalled\n", label, STALL_TIMEOUT, queued, w.acked);
			rc = -ETIMEDOUT;
			break;
		}
		if (bench_interrupted) {
			rc = -EINTR;
			break;
		}
		if (rd && (rc = __atomic_load_n(&rd->rc, __ATOMIC_ACQUIRE)) < 0) {
			fprintf(stderr, "%s: reader: %s\n", label, rd->err);
			break;
		}
	}
	r->seconds = (double)(bench_now_ns() - t0) / 1e9;
	r->records = w.acked;
	r->bytes = w.acked * (uint64_t)o->size;
	if (rd)
		fprintf(stderr, "%s: the producer queued records p50 %.3f ms, p99 %.3f ms after they were due "
			"(the client's own lateness: counted in the end-to-end latency)\n", label,
			(double)hist_percentile(&w.late, 50) / 1e6, (double)hist_percentile(&w.late, 99) / 1e6);
	if (proc_rss_kb(br->pid) > r->peak_rss_kb)
		r->peak_rss_kb = proc_rss_kb(br->pid);
	if (!rc)
		fprintf(stderr, "%s: %" PRIu64 " records acknowledged in %.2f s, %" PRIu64 " requests, %.1f "
			"partitions a request\n", label, w.acked, r->seconds, w.requests,
			w.requests ? (double)w.batches / (double)w.requests : 0.0);
	wide_free(&w);
	return rc;
}

int kafka_produce_wide(const struct opts *o, struct broker *br, const char *topic, uint64_t records,
		       struct run *r, const char *label)
{
	return wide_run(o, br, topic, records, o->produce_rate, r, label, NULL);
}

/* e2e: the raw reader from offset 0 of the (new) topic, the wide producer
 * at o->rate for o->seconds + 1 s (the first second not timed), then up to
 * 10 s for the reader to have every record. r->lat: end-to-end latency. */
int kafka_e2e_wide(const struct opts *o, struct broker *br, const char *topic, struct run *r)
{
	struct raw_reader rd = { .bootstrap = br->bootstrap, .topic = topic, .partitions = o->partitions,
				 .size = o->size, .warm_until = UINT64_MAX };
	struct run pr = { 0 };
	struct opts po = *o;
	double secs = o->seconds > 0 ? o->seconds : 10;
	uint64_t total = (uint64_t)((secs + 1) * (double)o->rate), end_wait, got;
	int rc, rc2;

	memset(r, 0, sizeof(*r));
	hist_init(&r->lat);
	po.linger_ms = o->linger_ms >= 0 ? o->linger_ms : 1;   /* e2e's default, as kafka_e2e */
	if ((rc = raw_reader_start(&rd)) < 0) {
		fprintf(stderr, "e2e: reader: %s\n", rd.err);
		return rc;
	}
	fprintf(stderr, "e2e: %" PRIu64 " records/s for %.0f s (+1 s warm-up), %d bytes, %d partitions, "
		"acks=%d, linger.ms=%d; light clients: the wide producer and a raw Fetch v4 reader\n",
		o->rate, secs, o->size, o->partitions, o->acks, po.linger_ms);
	rc = wide_run(&po, br, topic, total, o->rate, &pr, "e2e", &rd);
	end_wait = bench_now_ns() + 10000000000ull;
	while (!rc && (got = __atomic_load_n(&rd.got, __ATOMIC_ACQUIRE)) < pr.records &&
	       bench_now_ns() < end_wait && !__atomic_load_n(&rd.rc, __ATOMIC_ACQUIRE)) {
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
	}
	got = __atomic_load_n(&rd.got, __ATOMIC_ACQUIRE);
	if ((rc2 = raw_reader_stop(&rd)) < 0 && !rc) {
		fprintf(stderr, "e2e: reader: %s\n", rd.err);
		rc = rc2;
	}
	if (!rc && got != pr.records) {
		fprintf(stderr, "e2e: %" PRIu64 " acknowledged, %" PRIu64 " received after 10 s\n",
			pr.records, got);
		rc = -EIO;
	}
	r->records = got;
	r->bytes = got * (uint64_t)o->size;
	r->seconds = pr.seconds;
	r->peak_rss_kb = pr.peak_rss_kb;
	hist_merge(&r->lat, &rd.lat);
	if (!rc)
		fprintf(stderr, "e2e: %" PRIu64 " records sent and received (every one checked), %" PRIu64
			" after warm-up timed, %" PRIu64 " fetches; producer ack p50 %.3f ms, p99 %.3f ms\n",
			got, rd.counted, rd.fetches, (double)hist_percentile(&pr.lat, 50) / 1e6,
			(double)hist_percentile(&pr.lat, 99) / 1e6);
	return rc;
}
