/* bench/kafka_fetch.c — a raw Fetch reader: the light consumer of
 * `sluice-bench e2e --client wide`. librdkafka's consumer costs the
 * machine about as much CPU a record as the broker does (docs/benchmarks.md,
 * "What the linger.ms=0 tail is made of"); on two shared cores that cost
 * is queueing in the end-to-end tail. This reader does what a consumer
 * must and nothing else, so that the tail left is the broker's.
 *
 * One blocking TCP connection to the bootstrap broker, one Fetch v4 in
 * flight (every partition of the topic from its next offset, min_bytes 1,
 * max_wait RAW_WAIT_MS), record batches v2 walked with storage/batch.h's
 * iterator (CRCs not checked: librdkafka's check.crcs defaults to false
 * too). Every record is checked: offsets contiguous from 0 in each
 * partition, the value's length, its index (bytes 0..7) belonging to the
 * partition (index % partitions). Its latency is from the time it was due
 * (bytes 8..15, written by the producer) to the arrival of the response
 * that carried it, counted once the due time is past warm_until.
 *
 * Thread: raw_reader_start starts one reader thread, which owns the
 * connection and everything below "the reader's"; got, rc and warm_until
 * are shared through __atomic builtins; raw_reader_stop (the starting
 * thread) joins it, after which lat, counted and err are the caller's.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/kafka.h"
#include "storage/batch.h"

#define RAW_FETCH_V   4
#define RAW_WAIT_MS   100              /* so that a stop is seen within it */
#define RAW_MAX_BYTES (8u << 20)
#define RAW_PART_MAX  (1u << 20)

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)(v >> 16)); put16(p + 2, (uint16_t)v); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)(v >> 32)); put32(p + 4, (uint32_t)v); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

static int fail(struct raw_reader *rd, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct raw_reader *rd, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rd->err, sizeof(rd->err), fmt, ap);
	va_end(ap);
	return rc;
}

/* Fetch v4 of every partition from its next offset into rd->req: its size. */
static size_t raw_build(struct raw_reader *rd, int32_t corr)
{
	uint8_t *b = rd->req;
	size_t tlen = strlen(rd->topic), at = 4;

	put16(b + at, 1);                       /* Fetch */
	put16(b + at + 2, RAW_FETCH_V);
	put32(b + at + 4, (uint32_t)corr);
	put16(b + at + 8, 17);
	memcpy(b + at + 10, "sluice-bench-read", 17);
	at += 27;
	put32(b + at, (uint32_t)-1);            /* replica_id: a consumer */
	put32(b + at + 4, RAW_WAIT_MS);
	put32(b + at + 8, 1);                   /* min_bytes */
	put32(b + at + 12, RAW_MAX_BYTES);
	b[at + 16] = 0;                         /* read_uncommitted */
	put32(b + at + 17, 1);                  /* one topic */
	put16(b + at + 21, (uint16_t)tlen);
	memcpy(b + at + 23, rd->topic, tlen);
	at += 23 + tlen;
	put32(b + at, (uint32_t)rd->partitions);
	at += 4;
	for (int p = 0; p < rd->partitions; p++, at += 16) {
		put32(b + at, (uint32_t)p);
		put64(b + at + 4, (uint64_t)rd->next_off[p]);
		put32(b + at + 12, RAW_PART_MAX);
	}
	put32(b, (uint32_t)(at - 4));
	return at;
}

static int raw_send(struct raw_reader *rd, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = send(rd->fd, rd->req + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail(rd, -errno, "send: %s", strerror(errno));
		off += (size_t)n;
	}
	return 0;
}

static int raw_recv_all(struct raw_reader *rd, uint8_t *p, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = recv(rd->fd, p + off, len - off, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return fail(rd, n < 0 ? -errno : -ECONNRESET, "the broker closed the connection%s%s",
				    n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
		off += (size_t)n;
	}
	return 0;
}

/* One response frame (after its length): 0, or -errno (rd->err says). */
static int raw_recv(struct raw_reader *rd, size_t *len)
{
	uint8_t hdr[4];
	uint32_t flen;
	int rc;

	if ((rc = raw_recv_all(rd, hdr, 4)) < 0)
		return rc;
	flen = get32(hdr);
	if (flen < 8 || flen > RAW_MAX_BYTES + (64u << 10) + 64u * (uint32_t)rd->partitions)
		return fail(rd, -EBADMSG, "a Fetch response of %u bytes", flen);
	if (flen > rd->in_cap) {
		uint8_t *g = realloc(rd->in, flen);

		if (!g)
			return fail(rd, -ENOMEM, "out of memory for a response of %u bytes", flen);
		rd->in = g;
		rd->in_cap = flen;
	}
	*len = flen;
	return raw_recv_all(rd, rd->in, flen);
}

/* The records of partition p in one response's record set: each checked
 * and timed. A batch cut short at the end (KIP-74) is left for the next
 * Fetch. */
static int raw_records(struct raw_reader *rd, int32_t p, const uint8_t *s, size_t len, uint64_t now)
{
	uint64_t warm = __atomic_load_n(&rd->warm_until, __ATOMIC_ACQUIRE);

	while (len >= 12) {
		int64_t base = (int64_t)get64(s);
		uint32_t blen = get32(s + OF_BatchLength);
		struct record_iter it;
		struct record_view rv;
		int more;

		if (blen > len - 12)
			break;
		if (blen + 12 < BATCH_HEADER_SIZE || s[OF_Magic] != 2)
			return fail(rd, -EBADMSG, "partition %d: a batch at offset %" PRId64 " that does not "
				    "read (magic %d, %u bytes)", p, base, s[OF_Magic], blen + 12);
		if (get16(s + OF_Attributes) & 0x7)
			return fail(rd, -EBADMSG, "partition %d: a compressed batch (the producer sends none)", p);
		record_iter_init(&it, s + BATCH_HEADER_SIZE, blen + 12 - BATCH_HEADER_SIZE,
				 (int32_t)get32(s + OF_RecordsCount));
		while ((more = record_iter_next(&it, &rv)) == 1) {
			int64_t off = base + rv.offset_delta;
			uint64_t idx, ts;

			if (off < rd->next_off[p])
				continue;   /* the start of a batch read before */
			if (off != rd->next_off[p])
				return fail(rd, -EBADMSG, "partition %d: offset %" PRId64 " after %" PRId64
					    " (not contiguous)", p, off, rd->next_off[p] - 1);
			if (rv.value_len != rd->size)
				return fail(rd, -EBADMSG, "partition %d offset %" PRId64 ": %d bytes, not %d", p,
					    off, rv.value_len, rd->size);
			memcpy(&idx, rv.value, 8);
			memcpy(&ts, rv.value + 8, 8);
			if (idx % (uint64_t)rd->partitions != (uint64_t)p)
				return fail(rd, -EBADMSG, "partition %d offset %" PRId64 ": record %" PRIu64
					    " belongs to partition %" PRIu64, p, off, idx,
					    idx % (uint64_t)rd->partitions);
			rd->next_off[p] = off + 1;
			if (ts >= warm) {
				hist_add(&rd->lat, now > ts ? now - ts : 0);
				rd->counted++;
			}
			__atomic_add_fetch(&rd->got, 1, __ATOMIC_RELEASE);
		}
		if (more < 0)
			return fail(rd, -EBADMSG, "partition %d: records of the batch at offset %" PRId64
				    " do not read", p, base);
		s += blen + 12;
		len -= blen + 12;
	}
	return 0;
}

/* A Fetch v4 response body (after the correlation id). */
static int raw_parse(struct raw_reader *rd, const uint8_t *p, size_t len, uint64_t now)
{
	const uint8_t *end = p + len;
	uint32_t nt;

	if (len < 8)
		return fail(rd, -EBADMSG, "a Fetch response too short");
	nt = get32(p + 4);
	p += 8;
	for (uint32_t t = 0; t < nt; t++) {
		uint32_t np;

		if (end - p < 2 || end - p < 2 + get16(p) + 4)
			return fail(rd, -EBADMSG, "a Fetch response cut short");
		p += 2 + get16(p);
		np = get32(p);
		p += 4;
		for (uint32_t i = 0; i < np; i++) {
			int32_t part, naborted, rlen;
			int16_t code;
			int rc;

			if (end - p < 4 + 2 + 8 + 8 + 4)
				return fail(rd, -EBADMSG, "a Fetch response cut short");
			part = (int32_t)get32(p);
			code = (int16_t)get16(p + 4);
			naborted = (int32_t)get32(p + 22);
			p += 26;
			if (naborted > 0) {
				if (end - p < (ptrdiff_t)naborted * 16)
					return fail(rd, -EBADMSG, "a Fetch response cut short");
				p += (size_t)naborted * 16;
			}
			if (end - p < 4)
				return fail(rd, -EBADMSG, "a Fetch response cut short");
			rlen = (int32_t)get32(p);
			p += 4;
			if (rlen < 0)
				rlen = 0;
			if (end - p < rlen)
				return fail(rd, -EBADMSG, "a Fetch response cut short");
			if (code)
				return fail(rd, -EIO, "partition %d: Kafka error code %d", part, code);
			if (part < 0 || part >= rd->partitions)
				return fail(rd, -EBADMSG, "partition %d was not asked for", part);
			if ((rc = raw_records(rd, part, p, (size_t)rlen, now)) < 0)
				return rc;
			p += rlen;
		}
	}
	return 0;
}

static void *raw_reader_main(void *arg)
{
	struct raw_reader *rd = arg;
	int32_t corr = 0;
	int rc = 0;

	while (!rc && !__atomic_load_n(&rd->stop, __ATOMIC_ACQUIRE)) {
		size_t len = 0;

		if ((rc = raw_send(rd, raw_build(rd, corr))) < 0 || (rc = raw_recv(rd, &len)) < 0)
			break;
		if ((int32_t)get32(rd->in) != corr) {
			rc = fail(rd, -EBADMSG, "a response to correlation id %d, not %d",
				  (int)(int32_t)get32(rd->in), (int)corr);
			break;
		}
		corr++;
		rd->fetches++;
		rc = raw_parse(rd, rd->in + 4, len - 4, bench_now_ns());
	}
	__atomic_store_n(&rd->rc, rc, __ATOMIC_RELEASE);
	return NULL;
}

int raw_reader_start(struct raw_reader *rd)
{
	hist_init(&rd->lat);
	rd->got = rd->counted = rd->fetches = 0;
	rd->rc = rd->stop = 0;
	rd->err[0] = '\0';
	rd->in_cap = 1u << 20;
	rd->next_off = calloc((size_t)rd->partitions, sizeof(*rd->next_off));
	rd->req = malloc(64 + strlen(rd->topic) + 16 * (size_t)rd->partitions);
	rd->in = malloc(rd->in_cap);
	if (!rd->next_off || !rd->req || !rd->in) {
		fail(rd, -ENOMEM, "out of memory");
		goto bad;
	}
	if ((rd->fd = kafka_connect(rd->bootstrap, 0, rd->err, sizeof(rd->err))) < 0)
		goto bad;
	if (pthread_create(&rd->th, NULL, raw_reader_main, rd)) {
		fail(rd, -EAGAIN, "no reader thread");
		close(rd->fd);
		goto bad;
	}
	pthread_setname_np(rd->th, "bench-reader");   /* apart from the producer's in profiles */
	return 0;
bad:
	free(rd->next_off);
	free(rd->req);
	free(rd->in);
	rd->next_off = NULL;
	rd->req = rd->in = NULL;
	return -EIO;
}

int raw_reader_stop(struct raw_reader *rd)
{
	__atomic_store_n(&rd->stop, 1, __ATOMIC_RELEASE);
	pthread_join(rd->th, NULL);
	close(rd->fd);
	free(rd->next_off);
	free(rd->req);
	free(rd->in);
	rd->next_off = NULL;
	rd->req = rd->in = NULL;
	return rd->rc;
}
