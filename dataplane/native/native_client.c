/* dataplane/native/native_client.c — libsluice_native's engine (API in
 * sluice_native.h, transports in native_client.h): the session (HELLO),
 * the idempotent producer (batches per partition, sequences, resends,
 * credits, delivery reports) and sluice_fetch; the client's state is in
 * native_client_state.h, a fetch answer's reassembly and records in
 * native_client_fetch.c.
 *
 * Producing. sluice_produce appends a record to its partition's open
 * batch (pool buffers, no allocation per record). A batch is sealed when
 * full, after linger, or by flush, and queued on its partition in order.
 * A queued batch is sent when its partition has fewer than max_in_flight
 * batches out (1 until the partition's first acknowledgement in the
 * current producer epoch: a broker accepts any first sequence from a
 * producer it does not know, so the first batch must land first) and the
 * credits allow. Its producer id, epoch and base sequence are stamped at
 * that first send and never change while the batch may be in the log. A
 * batch is sent again when its timer fires (exponential backoff from the
 * measured round trip), with the same identity: the broker acknowledges a
 * duplicate with the first append's offset. Acknowledgements complete
 * batches in partition order; reports go out from sluice_poll.
 *
 * Identity resets. When the broker refuses a batch for good (unknown
 * topic, too large, ...) or a batch times out, the batches after it that
 * cannot be in the log (never sent, or every send refused — the broker
 * appends nothing after a sequence gap) are given the next epoch and
 * sequences from 0, and those that may be are reported failed. A session
 * the broker forgot (ERROR UNKNOWN_PRODUCER_ID) is reopened with HELLO; the
 * new producer id applies the same rule.
 *
 * Thread: the caller's, one at a time. Errors: -errno; reports carry 0,
 * a Kafka error code (positive) or -errno.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataplane/kafka_errors.h"
#include "dataplane/native/native_client.h"
#include "dataplane/native/native_client_state.h"
#include "storage/batch_format.h"
#include "storage/compress.h"

#define WINDOW_MAX 5                  /* the broker keeps 5 batches per producer for dedup */
#define HELLO_RTO_NS 100000000ull     /* first HELLO resend after 100 ms, then doubling */
#define INITIAL_RTO_NS 50000000ull    /* resend timer before any round trip was measured */

/* ---- small helpers ---------------------------------------------------------------------- */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int64_t client_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint32_t next_req(struct sluice_client *c)
{
	if (++c->next_request == 0)
		c->next_request = 1;
	return c->next_request;
}

static void wake_at(struct sluice_client *c, uint64_t at)
{
	if (at < c->next_wake)
		c->next_wake = at;
}

static void set_error(struct sluice_client *c, const char *what, const uint8_t *msg, size_t n)
{
	snprintf(c->last_error, sizeof(c->last_error), "%s%.*s", what, (int)n, msg ? (const char *)msg : "");
}

static uint64_t rto_ns(const struct sluice_client *c)
{
	uint64_t rto = c->have_rtt ? c->srtt_ns + 4 * c->rttvar_ns : INITIAL_RTO_NS;
	uint64_t lo = (uint64_t)c->cfg.retry_min_ms * 1000000ull, hi = (uint64_t)c->cfg.retry_max_ms * 1000000ull;

	return rto < lo ? lo : rto > hi ? hi : rto;
}

static uint64_t backoff_ns(const struct sluice_client *c, uint32_t sends)
{
	uint64_t hi = (uint64_t)c->cfg.retry_max_ms * 1000000ull, r = rto_ns(c);

	for (uint32_t i = 1; i < sends && r < hi; i++)
		r *= 2;
	return r > hi ? hi : r;
}

static void rtt_sample(struct sluice_client *c, uint64_t sample)
{
	if (!c->have_rtt) {
		c->srtt_ns = sample;
		c->rttvar_ns = sample / 2;
		c->have_rtt = 1;
		return;
	}
	uint64_t d = sample > c->srtt_ns ? sample - c->srtt_ns : c->srtt_ns - sample;

	c->rttvar_ns = (3 * c->rttvar_ns + d) / 4;
	c->srtt_ns = (7 * c->srtt_ns + sample) / 8;
}

/* ---- partitions ---------------------------------------------------------------------------- */

static uint32_t part_hash(const char *topic, size_t n, int32_t partition)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)topic[i]) * 16777619u;
	return (h ^ (uint32_t)partition) * 16777619u;
}

static struct npart *part_find(struct sluice_client *c, const char *topic, size_t n, int32_t partition)
{
	uint32_t h;
	struct npart *p = c->recent[partition & 63];

	/* a producer spreading records over partitions hits here without
	 * hashing the topic */
	if (p && p->partition == partition && p->topic_len == n && !memcmp(p->topic, topic, n))
		return p;
	if (!c->hcap)
		return NULL;
	h = part_hash(topic, n, partition);
	for (p = c->htab[h & (c->hcap - 1)]; p; p = p->hnext)
		if (p->hash == h && p->partition == partition && p->topic_len == n && !memcmp(p->topic, topic, n))
			return c->recent[partition & 63] = p;
	return NULL;
}

/* Per partition, on first use (not per record). */
static struct npart *part_get(struct sluice_client *c, const char *topic, size_t n, int32_t partition)
{
	struct npart *p = part_find(c, topic, n, partition);

	if (p)
		return p;
	if (c->nparts + 1 > c->hcap / 2) {
		uint32_t cap = c->hcap ? c->hcap * 2 : 64;
		struct npart **t = calloc(cap, sizeof(*t)); /* style: allow per partition, amortized */

		if (!t)
			return NULL;
		for (uint32_t i = 0; i < c->hcap; i++)
			for (struct npart *q = c->htab[i], *nx; q; q = nx) {
				nx = q->hnext;
				q->hnext = t[q->hash & (cap - 1)];
				t[q->hash & (cap - 1)] = q;
			}
		free(c->htab);
		c->htab = t;
		c->hcap = cap;
	}
	p = calloc(1, sizeof(*p)); /* style: allow per partition */
	if (!p)
		return NULL;
	memcpy(p->topic, topic, n);
	p->topic_len = (uint8_t)n;
	p->partition = partition;
	p->hash = part_hash(topic, n, partition);
	p->pid = c->pid;
	p->hnext = c->htab[p->hash & (c->hcap - 1)];
	c->htab[p->hash & (c->hcap - 1)] = p;
	c->nparts++;
	return c->recent[partition & 63] = p;
}

static void part_activate(struct sluice_client *c, struct npart *p)
{
	if (!p->active) {
		p->active = 1;
		p->anext = c->active;
		c->active = p;
	}
}

/* ---- batches ------------------------------------------------------------------------------ */

static struct nbatch *batch_get(struct sluice_client *c)
{
	struct nbatch *b = c->free_batches;
	size_t sz;

	if (b) {
		c->free_batches = b->next;
	} else {
		sz = sizeof(*b) + (size_t)c->batch_records * sizeof(void *) + c->batch_cap;
		if (c->batch_mem + sz > c->batch_mem_max)
			return NULL;
		b = malloc(sz); /* style: allow pooled batch buffer, reused through free_batches */
		if (!b)
			return NULL;
		c->batch_mem += sz;
		b->opaque = (void **)(b + 1);
		b->buf = (uint8_t *)(b->opaque + c->batch_records);
		b->cap = c->batch_cap;
		b->max_records = c->batch_records;
	}
	b->next = NULL;
	b->len = BATCH_HEADER_SIZE;
	b->count = 0;
	b->sends = 0;
	b->refused = 0;
	b->credited = b->ooo = b->acked = b->failed = b->codec = 0;
	b->err = 0;
	b->base_offset = -1;
	return b;
}

static void batch_put(struct sluice_client *c, struct nbatch *b)
{
	b->next = c->free_batches;
	c->free_batches = b;
}

/* Header fields known at seal; identity and CRC come at the first send. */
static void batch_seal_header(struct nbatch *b)
{
	uint8_t *h = b->buf;

	be64_store(h + OF_BaseOffset, 0);
	be32_store(h + OF_BatchLength, b->len - BATCH_LOG_OVERHEAD);
	be32_store(h + OF_PartitionLeaderEpoch, (uint32_t)-1);
	h[OF_Magic] = BATCH_MAGIC_V2;
	be16_store(h + OF_Attributes, b->codec);
	be32_store(h + OF_LastOffsetDelta, (uint32_t)(b->count - 1));
	be64_store(h + OF_BaseTimestamp, (uint64_t)b->base_ts);
	be64_store(h + OF_MaxTimestamp, (uint64_t)b->max_ts);
	be32_store(h + OF_RecordsCount, (uint32_t)b->count);
}

static void batch_stamp(struct nbatch *b, int64_t pid, int16_t epoch, int32_t seq)
{
	uint8_t *h = b->buf;

	b->pid = pid;
	b->epoch = epoch;
	b->base_seq = seq;
	be64_store(h + OF_ProducerId, (uint64_t)pid);
	be16_store(h + OF_ProducerEpoch, (uint16_t)epoch);
	be32_store(h + OF_BaseSequence, (uint32_t)seq);
	be32_store(h + OF_Crc, crc32c(h + OF_Attributes, b->len - OF_Attributes));
}

static int32_t seq_add(int32_t seq, int32_t n)
{
	int64_t s = (int64_t)seq + n;

	return (int32_t)(s > INT32_MAX ? s - INT32_MAX - 1 : s);
}

/* The batch may be in the log: one of its sends was not refused. */
static int batch_maybe_appended(const struct nbatch *b)
{
	uint32_t kept = b->sends < REQS_KEPT ? b->sends : REQS_KEPT;

	if (b->sends > REQS_KEPT)
		return 1;
	return b->refused != (uint8_t)((1u << kept) - 1);
}

static void batch_refused(struct nbatch *b, uint32_t request)
{
	for (uint32_t i = 0; i < b->sends && i < REQS_KEPT; i++)
		if (b->reqs[i] == request)
			b->refused |= (uint8_t)(1u << i);
}

static void credits_release(struct sluice_client *c, struct nbatch *b)
{
	if (b->credited) {
		c->credits_used -= b->len;
		b->credited = 0;
	}
}

static void batch_fail(struct sluice_client *c, struct nbatch *b, int err)
{
	credits_release(c, b);
	b->failed = 1;
	b->err = err;
	c->st.batches_failed++;
}

/* Forget b's identity: it is sent again, later, under a new one. Only for
 * a batch that cannot be in the log. */
static void batch_unsend(struct sluice_client *c, struct nbatch *b)
{
	credits_release(c, b);
	b->sends = 0;
	b->refused = 0;
	b->ooo = 0;
}

/* Move completed batches at the head of p's list to the done list (in
 * order: a partition's reports keep its order). */
static void part_complete(struct sluice_client *c, struct npart *p)
{
	while (p->head && (p->head->acked || p->head->failed)) {
		struct nbatch *b = p->head;

		p->head = b->next;
		if (!p->head)
			p->tail = NULL;
		b->next = NULL;
		if (c->done_tail)
			c->done_tail->next = b;
		else
			c->done_head = b;
		c->done_tail = b;
	}
}

/* From batch `from` (in p's list) on: batches that may be in the log fail
 * with err, the others lose their identity; the partition starts a new
 * epoch (sequence 0, one batch in flight until acknowledged). */
static void part_reset(struct sluice_client *c, struct npart *p, struct nbatch *from, int err)
{
	int on = 0;

	for (struct nbatch *b = p->head; b; b = b->next) {
		if (b == from)
			on = 1;
		if (!on || b->acked || b->failed)
			continue;
		if (b->sends && batch_maybe_appended(b))
			batch_fail(c, b, err);
		else
			batch_unsend(c, b);
	}
	if (p->epoch == INT16_MAX)
		p->epoch = 0;   /* wraps as Kafka's does (the broker then needs sequence 0) */
	else
		p->epoch++;
	p->next_seq = 0;
	p->pid = c->pid;
	p->confirmed = 0;
	part_complete(c, p);
}

/* The records section in the configured codec, when that is smaller. */
static void batch_compress(struct sluice_client *c, struct nbatch *b)
{
	size_t raw = b->len - BATCH_HEADER_SIZE;
	ssize_t n;

	if (!c->zbuf || raw < 64)
		return;
	n = compress_encode(c->zctx, c->cfg.compression, b->buf + BATCH_HEADER_SIZE, raw, c->zbuf, c->zbuf_cap);
	if (n <= 0 || (size_t)n >= raw)
		return;   /* sent as it is */
	memcpy(b->buf + BATCH_HEADER_SIZE, c->zbuf, (size_t)n);
	b->len = BATCH_HEADER_SIZE + (uint32_t)n;
	b->codec = (uint8_t)c->cfg.compression;
}

static void batch_seal(struct sluice_client *c, struct npart *p)
{
	struct nbatch *b = p->open;

	if (!b)
		return;
	p->open = NULL;
	batch_compress(c, b);
	batch_seal_header(b);
	if (p->tail)
		p->tail->next = b;
	else
		p->head = b;
	p->tail = b;
}

/* ---- sending ------------------------------------------------------------------------------ */

static void flush_tx(struct sluice_client *c)
{
	int n = c->t->ops->tx_flush(c->t);

	if (n < 0 && !c->failed) {
		c->failed = n;
		snprintf(c->last_error, sizeof(c->last_error), "transport %s: %s", c->t->ops->name, strerror(-n));
	}
}

static int put_dgram(struct sluice_client *c, struct native_dgram *d, int len)
{
	if (len < 0) {
		d->len = 0;
		return len;
	}
	d->len = (uint32_t)len;
	c->t->ops->tx_put(c->t, d);
	c->st.datagrams_sent++;
	c->st.bytes_sent += (uint64_t)len;
	return 0;
}

static void send_hello(struct sluice_client *c)
{
	struct native_dgram d;

	if (c->t->ops->tx_get(c->t, &d) < 0)
		return;
	c->hello_request = next_req(c);
	put_dgram(c, &d,
		  native_write_hello(d.data, d.cap, c->hello_request, c->cfg.credits, c->max_dg, c->client_id));
	c->hello_due = c->now + c->hello_rto;
	if (c->hello_rto < 1000000000ull)
		c->hello_rto *= 2;
	flush_tx(c);
}

/* Every fragment of b under a new request number. */
static void batch_send(struct sluice_client *c, struct nbatch *b)
{
	struct npart *p = b->part;
	uint32_t room = native_produce_room(c->max_dg, p->topic_len), off = 0;
	uint16_t count = (uint16_t)((b->len + room - 1) / room);
	uint32_t req = next_req(c);
	int8_t acks = (int8_t)c->cfg.acks;
	struct native_dgram d;

	for (uint16_t i = 0; i < count; i++, off += room) {
		uint32_t n = b->len - off < room ? b->len - off : room;

		if (c->t->ops->tx_get(c->t, &d) < 0)
			break;
		put_dgram(c, &d,
			  native_write_produce(d.data, d.cap, c->session, req, p->topic, p->partition, acks, b->pid,
					       b->epoch, b->base_seq, b->len, off, i, count, b->buf + off, n));
	}
	if (b->sends < REQS_KEPT)
		b->reqs[b->sends] = req;
	if (b->sends)
		c->st.batch_resends++;
	else
		c->st.batches_sent++;
	b->sends++;
	b->sent_ns = c->now;
	b->due_ns = c->now + backoff_ns(c, b->sends);
	b->ooo = 0;
}

/* The first send of b: its identity, its credits. */
static void batch_first_send(struct sluice_client *c, struct npart *p, struct nbatch *b)
{
	if (p->pid != c->pid) {
		p->pid = c->pid;
		p->epoch = 0;
		p->next_seq = 0;
		p->confirmed = 0;
	}
	batch_stamp(b, c->pid, p->epoch, p->next_seq);
	p->next_seq = seq_add(p->next_seq, b->count);
	if (c->cfg.acks != 0) {
		c->credits_used += b->len;
		b->credited = 1;
	}
	batch_send(c, b);
	if (c->cfg.acks == 0) {
		/* fire and forget: reported as sent, never resent */
		b->acked = 1;
		c->st.batches_acked++;
	}
}

/* Resend b; the control run of the tests gives it a new identity first. */
static void batch_resend(struct sluice_client *c, struct npart *p, struct nbatch *b)
{
	if (c->defeat_dedup) {
		p->epoch = p->epoch == INT16_MAX ? 0 : (int16_t)(p->epoch + 1);
		batch_stamp(b, c->pid, p->epoch, 0);
		p->next_seq = b->count;
		b->sends = 1;   /* keep the backoff; the refusals of old sends no longer matter */
		b->refused = 0;
	}
	batch_send(c, b);
}

/* Send what p may send now: new batches within its window and credits,
 * resends whose timers fired. */
static void part_send(struct sluice_client *c, struct npart *p)
{
	unsigned out = 0, window = p->confirmed && !c->defeat_dedup ? c->cfg.max_in_flight : 1;

	for (struct nbatch *b = p->head; b; b = b->next) {
		if (b->acked || b->failed) {
			out++;
			continue;
		}
		if (b->sends) {
			out++;
			if (c->state != S_OPEN)
				continue;   /* resent once the session is back */
			if (b->due_ns <= c->now)
				batch_resend(c, p, b);
			wake_at(c, b->due_ns);
			continue;
		}
		if (out >= window || c->state != S_OPEN)
			break;
		if (c->cfg.acks != 0 && c->credits_used + b->len > c->credits)
			break;
		batch_first_send(c, p, b);
		out++;
		if (!b->acked)
			wake_at(c, b->due_ns);
	}
	part_complete(c, p);
}

/* ---- receiving ------------------------------------------------------------------------------ */

static struct nbatch *batch_by_request(struct sluice_client *c, uint32_t request, struct npart **pp)
{
	for (struct npart *p = c->active; p; p = p->anext)
		for (struct nbatch *b = p->head; b; b = b->next)
			if (b->sends && !b->acked && !b->failed)
				for (uint32_t i = 0; i < b->sends && i < REQS_KEPT; i++)
					if (b->reqs[i] == request) {
						*pp = p;
						return b;
					}
	/* beyond REQS_KEPT sends only the last is known */
	return NULL;
}

static int retriable(int16_t err)
{
	switch (err) {
	case KERR_UNKNOWN_TOPIC_OR_PARTITION:
	case KERR_MESSAGE_TOO_LARGE:
	case 17:   /* INVALID_TOPIC_EXCEPTION */
	case 18:   /* RECORD_LIST_TOO_LARGE */
	case 35:   /* UNSUPPORTED_VERSION */
	case 43:   /* UNSUPPORTED_FOR_MESSAGE_FORMAT */
	case KERR_INVALID_PRODUCER_EPOCH:
	case 76:   /* UNSUPPORTED_COMPRESSION_TYPE */
	case 87:   /* INVALID_RECORD */
	case 90:   /* PRODUCER_FENCED */
		return 0;
	default:
		return 1;
	}
}

static void on_produce_ack(struct sluice_client *c, const struct native_msg *m)
{
	struct npart *p = part_find(c, m->topic, m->topic_len, m->partition);
	struct nbatch *b = NULL;

	if (p)
		for (b = p->head; b; b = b->next)
			if (b->sends && b->pid == m->producer_id && b->base_seq == m->base_sequence)
				break;
	if (!b) {
		c->st.rx_stale++;
		return;
	}
	if (b->acked || b->failed) {
		c->st.acks_duplicate++;
		return;
	}
	if (b->sends <= REQS_KEPT) {
		/* an answer to a send made before the batch's identity changed */
		int mine = 0;

		for (uint32_t i = 0; i < b->sends; i++)
			mine |= b->reqs[i] == m->request;
		if (!mine) {
			c->st.rx_stale++;
			return;
		}
	}
	if (m->error == 0) {
		if (b->sends == 1 && c->now > b->sent_ns)
			rtt_sample(c, c->now - b->sent_ns);
		b->acked = 1;
		b->base_offset = m->offset;
		credits_release(c, b);
		c->st.batches_acked++;
		p->confirmed = 1;
		/* acknowledgements of a partition come in order: the batches
		 * behind this one are moving, so their timers restart from now
		 * (as TCP's on new data, RFC 6298 5.3) instead of running from
		 * their send — under load an acknowledgement waits behind the
		 * writes before it, and a timer from the send fires for nothing */
		for (struct nbatch *q = b->next; q; q = q->next)
			if (q->sends && !q->acked && !q->failed && !q->ooo) {
				uint64_t due = c->now + backoff_ns(c, q->sends);

				if (q->due_ns < due)
					q->due_ns = due;
			}
		/* the batch after it was refused as out of order: due now */
		if (b->next && b->next->ooo && b->next->sends)
			b->next->due_ns = c->now;
		part_complete(c, p);
		return;
	}
	batch_refused(b, m->request);
	if (m->error == KERR_OUT_OF_ORDER_SEQUENCE_NUMBER) {
		/* a batch ahead of a lost one: sent again after it */
		c->st.acks_out_of_order++;
		b->ooo = 1;
		{
			/* the one before was acknowledged meanwhile: now */
			struct nbatch *q = p->head;

			while (q && q != b && (q->acked || q->failed))
				q = q->next;
			if (q == b)
				b->due_ns = c->now;
		}
		return;
	}
	if (retriable(m->error)) {
		if (m->error == KERR_THROTTLING_QUOTA_EXCEEDED)
			c->st.throttled++;
		return;   /* its timer resends it */
	}
	/* refused for good: it is not in the log, nor is anything after it */
	batch_fail(c, b, m->error);
	part_reset(c, p, b->next, -ECONNRESET);
}

static void session_lost(struct sluice_client *c)
{
	if (c->state != S_OPEN)
		return;
	c->state = S_HELLO;
	c->hello_rto = HELLO_RTO_NS;
	send_hello(c);
}

static void on_error(struct sluice_client *c, const struct native_msg *m)
{
	struct npart *p;
	struct nbatch *b;

	c->st.errors_received++;
	set_error(c, "broker: ", m->data, m->data_len);
	if (m->about == NATIVE_HELLO) {
		if (c->state == S_HELLO && m->request == c->hello_request)
			c->hello_due = c->now + c->hello_rto;
		return;
	}
	if (m->error == KERR_UNKNOWN_PRODUCER_ID) {
		/* the broker does not know this session (expired, restarted,
		 * another address) */
		if (m->session == c->session && c->state == S_OPEN)
			session_lost(c);
		if (m->about == NATIVE_PRODUCE && (b = batch_by_request(c, m->request, &p)))
			batch_refused(b, m->request);
		return;
	}
	if (m->about == NATIVE_PRODUCE && (b = batch_by_request(c, m->request, &p))) {
		batch_refused(b, m->request);
		if (m->error == KERR_THROTTLING_QUOTA_EXCEEDED) {
			c->st.throttled++;
		} else if (m->error < 0) {
			/* the datagram arrived damaged: send again soon */
			uint64_t soon = c->now + (uint64_t)c->cfg.retry_min_ms * 1000000ull;

			if (b->due_ns > soon)
				b->due_ns = soon;
		}
		return;
	}
	if (m->about == NATIVE_FETCH && c->fetch.active && !req_before(m->request, c->fetch.first_request)) {
		/* the fetch asks again at its next timer */
		return;
	}
	c->st.rx_stale++;
}

/* Pids, epochs and sequences of batches sent under the old session mean
 * nothing to the new one. */
static void on_new_pid(struct sluice_client *c)
{
	for (struct npart *p = c->active; p; p = p->anext)
		if (p->pid != c->pid && p->head)
			part_reset(c, p, p->head, -ECONNRESET);
}

static void on_hello_ack(struct sluice_client *c, const struct native_msg *m)
{
	int64_t old = c->pid;

	if (c->state != S_HELLO || m->request != c->hello_request) {
		c->st.rx_stale++;
		return;
	}
	c->state = S_OPEN;
	c->session = m->session;
	c->pid = m->producer_id;
	c->credits = m->credits;
	c->max_dg = m->max_datagram;
	c->shards = m->shards;
	c->st.sessions_opened++;
	if (old >= 0 && old != c->pid)
		on_new_pid(c);
}

static void on_datagram(struct sluice_client *c, const uint8_t *dg, uint32_t len)
{
	struct native_msg m;

	c->st.datagrams_received++;
	c->st.bytes_received += len;
	if (native_parse(dg, len, 1, &m) < 0) {
		c->st.rx_unreadable++;
		return;
	}
	switch (m.type) {
	case NATIVE_HELLO_ACK:
		on_hello_ack(c, &m);
		break;
	case NATIVE_PRODUCE_ACK:
		on_produce_ack(c, &m);
		break;
	case NATIVE_FETCH_DATA:
		native_client_on_fetch_data(c, &m);
		break;
	case NATIVE_ERROR:
		on_error(c, &m);
		break;
	default:
		c->st.rx_stale++;
	}
}

/* ---- the loop ------------------------------------------------------------------------------- */

static void receive(struct sluice_client *c)
{
	for (int round = 0; round < 64; round++) {
		int n = c->t->ops->rx_burst(c->t, c->rx, RX_BURST);

		if (n < 0) {
			if (!c->failed) {
				c->failed = n;
				snprintf(c->last_error, sizeof(c->last_error), "transport %s: %s", c->t->ops->name,
					 strerror(-n));
			}
			return;
		}
		for (int i = 0; i < n; i++)
			on_datagram(c, c->rx[i].data, c->rx[i].len);
		if (n)
			c->t->ops->rx_done(c->t, c->rx, (unsigned)n);
		if (n < RX_BURST)
			return;
	}
}

/* Delivery timeouts of p: the oldest unreported batch too old fails, with
 * what comes after it handled as by part_reset. */
static void part_timeouts(struct sluice_client *c, struct npart *p)
{
	uint64_t limit = (uint64_t)c->cfg.delivery_timeout_ms * 1000000ull;

	for (struct nbatch *b = p->head; b; b = b->next) {
		if (b->acked || b->failed)
			continue;
		if (c->now - b->open_ns >= limit) {
			part_reset(c, p, b, -ETIMEDOUT);
			/* part_reset kept b's identity unless it cannot be in the log */
			if (!b->failed)
				batch_fail(c, b, -ETIMEDOUT);
			part_complete(c, p);
		} else {
			wake_at(c, b->open_ns + limit);
		}
		return;
	}
}

/* One round of work: receive, seal lingering batches, send, resend. */
static void pump(struct sluice_client *c)
{
	struct npart **pp;
	uint64_t linger = (uint64_t)c->cfg.linger_us * 1000ull;

	c->now = mono_ns();
	c->next_wake = UINT64_MAX;
	receive(c);
	c->now = mono_ns();
	if (c->state == S_HELLO && c->now >= c->hello_due)
		send_hello(c);
	if (c->state == S_HELLO)
		wake_at(c, c->hello_due);
	for (pp = &c->active; *pp;) {
		struct npart *p = *pp;

		if (p->open && p->open->count) {
			if (c->now - p->open->open_ns >= linger)
				batch_seal(c, p);
			else
				wake_at(c, p->open->open_ns + linger);
		}
		if (p->head && c->cfg.acks != 0)
			part_timeouts(c, p);
		part_send(c, p);
		if (!p->open && !p->head) {
			*pp = p->anext;
			p->active = 0;
			continue;
		}
		pp = &p->anext;
	}
	/* the first partition to take credits changes every round */
	if (c->active && c->active->anext) {
		struct npart *first = c->active, *last = first;

		while (last->anext)
			last = last->anext;
		c->active = first->anext;
		first->anext = NULL;
		last->anext = first;
	}
	flush_tx(c);
}

/* Reports of completed batches. */
static int deliver(struct sluice_client *c)
{
	int n = 0;

	while (c->done_head) {
		struct nbatch *b = c->done_head;

		c->done_head = b->next;
		if (!c->done_head)
			c->done_tail = NULL;
		if (b->failed)
			c->st.records_failed += (uint64_t)b->count;
		else
			c->st.records_acked += (uint64_t)b->count;
		c->outq -= (size_t)b->count;
		if (c->cfg.delivery)
			for (int32_t i = 0; i < b->count; i++)
				c->cfg.delivery(c->cfg.delivery_ctx, b->opaque[i], b->failed ? b->err : 0,
						b->failed || b->base_offset < 0 ? -1 : b->base_offset + i);
		n += b->count;
		batch_put(c, b);
	}
	return n;
}

static int wait_until(struct sluice_client *c, uint64_t deadline)
{
	uint64_t now = mono_ns(), until = deadline < c->next_wake ? deadline : c->next_wake;
	int ms;

	if (until <= now)
		return c->t->ops->wait(c->t, 0);
	ms = (int)((until - now + 999999) / 1000000);
	return c->t->ops->wait(c->t, ms);
}

/* ---- API ------------------------------------------------------------------------------------ */

void sluice_config_init(struct sluice_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->client_id = "sluice-native";
	cfg->transport = SLUICE_TRANSPORT_UDP;
	cfg->acks = -1;
	cfg->credits = 8u << 20;
	cfg->batch_bytes = 64u << 10;
	cfg->linger_us = 1000;
	cfg->queue_bytes = 64ull << 20;
	cfg->max_in_flight = WINDOW_MAX;
	cfg->retry_min_ms = 10;
	cfg->retry_max_ms = 500;
	cfg->delivery_timeout_ms = 60000;
	cfg->connect_timeout_ms = 5000;
	cfg->socket_buffer = 8u << 20;
}

static int fault_on(const struct sluice_fault *f)
{
	return f->loss_pct > 0 || f->dup_pct > 0 || f->truncate_pct > 0 || f->corrupt_pct > 0 || f->reorder_pct > 0;
}

int native_client_open(struct native_transport *t, const struct sluice_config *cfg, struct sluice_client **out,
		       char *err, size_t errlen)
{
	struct sluice_client *c;
	struct sluice_config dflt;
	uint64_t deadline;
	int mtu;

	if (!cfg) {
		sluice_config_init(&dflt);
		cfg = &dflt;
	}
	if ((cfg->acks != 0 && cfg->acks != 1 && cfg->acks != -1) || cfg->batch_bytes < BATCH_HEADER_SIZE + 64 ||
	    cfg->batch_bytes > NATIVE_MAX_BATCH || cfg->max_in_flight < 1 || cfg->max_in_flight > WINDOW_MAX ||
	    (cfg->max_datagram && (cfg->max_datagram < NATIVE_MIN_DATAGRAM || cfg->max_datagram > NATIVE_MAX_DATAGRAM)) ||
	    cfg->credits < BATCH_HEADER_SIZE + 64 || cfg->retry_min_ms == 0 || cfg->retry_max_ms < cfg->retry_min_ms ||
	    cfg->compression < 0 || cfg->compression >= COMPRESS__COUNT) {
		snprintf(err, errlen,
			 "bad configuration (acks, batch_bytes, max_in_flight, max_datagram, credits, retry, compression)");
		t->ops->destroy(t);
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c)); /* style: allow setup */
	if (!c) {
		t->ops->destroy(t);
		return -ENOMEM;
	}
	c->t = t;
	c->cfg = *cfg;
	snprintf(c->client_id, sizeof(c->client_id), "%s", cfg->client_id ? cfg->client_id : "sluice-native");
	c->cfg.client_id = c->client_id;
	c->pid = -1;
	c->batch_cap = cfg->batch_bytes;
	c->batch_records = cfg->batch_bytes / 32 + 64;
	c->batch_mem_max = cfg->queue_bytes ? cfg->queue_bytes : 64ull << 20;
	if (cfg->compression) {
		if (compress_ctx_create(&c->zctx) < 0 ||
		    !(c->zbuf = malloc(c->zbuf_cap = compress_bound(cfg->compression, c->batch_cap)))) { /* style: allow setup */
			snprintf(err, errlen, "no memory for compression");
			sluice_close(c);
			return -ENOMEM;
		}
	}
	mtu = t->ops->path_mtu(t);
	c->max_dg = cfg->max_datagram ? cfg->max_datagram
		    : mtu >= NATIVE_MAX_DATAGRAM ? NATIVE_MAX_DATAGRAM
		    : mtu > NATIVE_MIN_DATAGRAM ? (uint16_t)mtu : NATIVE_MIN_DATAGRAM;
	c->state = S_HELLO;
	c->hello_rto = HELLO_RTO_NS;
	c->now = mono_ns();
	deadline = c->now + (uint64_t)cfg->connect_timeout_ms * 1000000ull;
	send_hello(c);
	while (c->state != S_OPEN) {
		pump(c);
		if (c->state == S_OPEN || c->failed)
			break;
		if (mono_ns() >= deadline) {
			snprintf(err, errlen, "no HELLO_ACK within %u ms%s%s", cfg->connect_timeout_ms,
				 c->last_error[0] ? ": " : "", c->last_error);
			sluice_close(c);
			return -ETIMEDOUT;
		}
		wait_until(c, deadline);
	}
	if (c->failed) {
		int rc = c->failed;

		snprintf(err, errlen, "%s", c->last_error);
		sluice_close(c);
		return rc;
	}
	/* a batch must fit the credits and the fragment count */
	c->batch_limit = c->batch_cap;
	if (c->batch_limit > c->credits)
		c->batch_limit = c->credits;
	{
		uint64_t frag_max = (uint64_t)native_produce_room(c->max_dg, NATIVE_MAX_TOPIC) * NATIVE_MAX_FRAGMENTS;

		if (c->batch_limit > frag_max)
			c->batch_limit = (uint32_t)frag_max;
	}
	*out = c;
	return 0;
}

int sluice_connect(const char *host_port, const struct sluice_config *cfg, struct sluice_client **out, char *err,
		   size_t errlen)
{
	struct sluice_config dflt;
	struct native_transport *t = NULL, *w;
	int rc;

	if (!cfg) {
		sluice_config_init(&dflt);
		cfg = &dflt;
	}
	if (cfg->transport == SLUICE_TRANSPORT_DPDK)
		rc = native_dpdk_create(host_port, cfg, &t, err, errlen);
	else if (cfg->transport == SLUICE_TRANSPORT_UDP)
		rc = native_udp_create(host_port, cfg->socket_buffer, &t, err, errlen);
	else {
		snprintf(err, errlen, "unknown transport %d", (int)cfg->transport);
		return -EINVAL;
	}
	if (rc < 0)
		return rc;
	if (fault_on(&cfg->fault)) {
		rc = native_fault_create(t, &cfg->fault, &w);
		if (rc < 0) {
			snprintf(err, errlen, "fault transport: %s", strerror(-rc));
			return rc;
		}
		t = w;
	}
	return native_client_open(t, cfg, out, err, errlen);
}

int sluice_produce(struct sluice_client *c, const char *topic, int32_t partition, const void *key, size_t klen,
		   const void *value, size_t vlen, void *opaque)
{
	size_t tl = topic ? strnlen(topic, NATIVE_MAX_TOPIC + 1) : 0;
	int32_t kl = key ? (int32_t)klen : -1, vl = value ? (int32_t)vlen : -1;
	struct npart *p;
	struct nbatch *b;
	int64_t ts;
	size_t need;

	if (c->failed)
		return -EIO;
	if (tl == 0 || tl > NATIVE_MAX_TOPIC || partition < 0)
		return -EINVAL;
	if (klen > INT32_MAX / 2 || vlen > INT32_MAX / 2)
		return -EMSGSIZE;
	p = part_find(c, topic, tl, partition);
	if (!p && !(p = part_get(c, topic, tl, partition)))
		return -ENOMEM;
	ts = client_wall_ms();
	b = p->open;
	if (b) {
		need = native_record_size(ts - b->base_ts, b->count, kl, vl);
		if ((uint32_t)b->count < b->max_records && b->len + need <= c->batch_limit)
			goto append;
		batch_seal(c, p);
		/* a full batch goes out now */
		c->now = mono_ns();
		part_send(c, p);
		flush_tx(c);
	}
	need = native_record_size(0, 0, kl, vl);
	if (BATCH_HEADER_SIZE + need > c->batch_limit)
		return -EMSGSIZE;
	b = batch_get(c);
	if (!b)
		return -ENOBUFS;
	b->part = p;
	b->base_ts = b->max_ts = ts;
	b->open_ns = mono_ns();
	p->open = b;
	part_activate(c, p);
append:
	b->len += (uint32_t)native_record_put(b->buf + b->len, ts - b->base_ts, b->count, key, kl, value, vl);
	if (ts > b->max_ts)
		b->max_ts = ts;
	b->opaque[b->count++] = opaque;
	c->outq++;
	return 0;
}

int sluice_poll(struct sluice_client *c, int timeout_ms)
{
	uint64_t deadline = mono_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
	int n;

	for (;;) {
		pump(c);
		n = deliver(c);
		if (n || c->failed || timeout_ms <= 0 || mono_ns() >= deadline)
			return n ? n : c->failed;
		wait_until(c, deadline);
	}
}

int sluice_flush(struct sluice_client *c, int timeout_ms)
{
	uint64_t deadline = mono_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;

	for (;;) {
		for (struct npart *p = c->active; p; p = p->anext)
			batch_seal(c, p);
		pump(c);
		deliver(c);
		if (!c->outq)
			return 0;
		if (c->failed)
			return c->failed;
		if (mono_ns() >= deadline)
			return -ETIMEDOUT;
		wait_until(c, deadline);
	}
}

size_t sluice_outq_len(const struct sluice_client *c)
{
	return c->outq;
}

/* ---- fetch -------------------------------------------------------------------------------------- */

static int send_fetch(struct sluice_client *c)
{
	struct nfetch *f = &c->fetch;
	struct native_dgram d;
	char topic[NATIVE_MAX_TOPIC + 1];

	if (c->state != S_OPEN || c->t->ops->tx_get(c->t, &d) < 0)
		return 0;
	memcpy(topic, f->topic, f->topic_len);
	topic[f->topic_len] = 0;
	f->request = next_req(c);
	put_dgram(c, &d,
		  native_write_fetch(d.data, d.cap, c->session, f->request, topic, f->partition, f->offset, f->max_bytes,
				     f->isolation));
	flush_tx(c);
	return 1;
}

int sluice_fetch(struct sluice_client *c, const char *topic, int32_t partition, int64_t offset, uint32_t max_bytes,
		 int isolation, int timeout_ms, struct sluice_fetch_result *res)
{
	struct nfetch *f = &c->fetch;
	size_t tl = topic ? strnlen(topic, NATIVE_MAX_TOPIC + 1) : 0;
	uint64_t deadline = mono_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull, due, rto;
	uint32_t sends = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	res->next_offset = offset;
	res->high_watermark = res->log_start = res->last_stable = -1;
	if (c->failed)
		return -EIO;
	if (tl == 0 || tl > NATIVE_MAX_TOPIC || partition < 0 || offset < 0 || (isolation != 0 && isolation != 1))
		return -EINVAL;
	f->active = 1;
	f->complete = 0;
	f->have = 0;
	memcpy(f->topic, topic, tl);
	f->topic_len = (uint8_t)tl;
	f->partition = partition;
	f->offset = offset;
	f->max_bytes = max_bytes;
	f->isolation = (uint8_t)isolation;
	f->first_request = c->next_request + 1;
	if (f->first_request == 0)
		f->first_request = 1;
	c->st.fetches++;
	c->now = mono_ns();
	rto = rto_ns(c) < 20000000ull ? 20000000ull : rto_ns(c);
	sends += (uint32_t)send_fetch(c);
	due = c->now + rto;
	for (;;) {
		pump(c);
		if (f->complete)
			break;
		if (c->failed) {
			f->active = 0;
			return -EIO;
		}
		if (c->now >= deadline) {
			f->active = 0;
			return -ETIMEDOUT;
		}
		if (c->now >= due || (!sends && c->state == S_OPEN)) {
			/* ask again by offset (fragments of every answer to this
			 * fetch count, as long as they are the same answer) */
			if (sends)
				c->st.fetch_retries++;
			sends += (uint32_t)send_fetch(c);
			if (rto < (uint64_t)c->cfg.retry_max_ms * 1000000ull)
				rto *= 2;
			due = c->now + rto;
		}
		wake_at(c, due);
		wait_until(c, deadline);
	}
	f->active = 0;
	res->err = f->err;
	res->high_watermark = f->hw;
	res->log_start = f->log_start;
	res->last_stable = f->lso;
	res->bytes = f->total;
	if (f->err || !f->total) {
		res->next_offset = offset;
		return 0;
	}
	rc = native_client_fetch_records(c, res);
	return rc;
}

/* ---- state, life ---------------------------------------------------------------------------------- */

void sluice_stats(const struct sluice_client *c, struct sluice_stats *out)
{
	*out = c->st;
	out->producer_id = c->pid;
	out->session = c->session;
	out->credits = c->credits;
	out->credits_used = c->credits_used;
	out->max_datagram = c->max_dg;
	out->shards = c->shards;
	out->rtt_us = (uint32_t)(c->srtt_ns / 1000);
	out->rto_us = (uint32_t)(rto_ns(c) / 1000);
	c->t->ops->stats(c->t, out);
}

int sluice_fd(const struct sluice_client *c)
{
	return c->t->ops->fd(c->t);
}

const char *sluice_last_error(const struct sluice_client *c)
{
	return c->last_error;
}

const char *sluice_err_name(int err)
{
	static const struct {
		int err;
		const char *name;
	} names[] = {
		{ -ETIMEDOUT, "timed out (outcome unknown if it was sent)" },
		{ -ECONNRESET, "producer identity lost (outcome unknown if it was sent)" },
		{ -ECANCELED, "client closed before the outcome was known" },
		{ -EPROTO, "a batch that does not parse" },
		{ -EPROTONOSUPPORT, "compressed batch (not decoded by this library)" },
	};
	const char *name;

	if (err == 0)
		return "NO_ERROR";
	if (err >= -1 && err <= INT16_MAX && (name = kafka_error_name((int16_t)err)))
		return name;   /* a Kafka error code (dataplane/kafka_errors.h) */
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].err == err)
			return names[i].name;
	return err < 0 ? "client error" : "Kafka error";
}

void native_client_defeat_dedup(struct sluice_client *c)
{
	c->defeat_dedup = 1;
}

void sluice_close(struct sluice_client *c)
{
	struct nbatch *b, *nx;

	if (!c)
		return;
	/* report what is left */
	for (uint32_t i = 0; i < c->hcap; i++)
		for (struct npart *p = c->htab[i]; p; p = p->hnext) {
			batch_seal(c, p);
			for (b = p->head; b; b = b->next)
				if (!b->acked && !b->failed)
					batch_fail(c, b, -ECANCELED);
			part_complete(c, p);
		}
	deliver(c);
	for (b = c->free_batches; b; b = nx) {
		nx = b->next;
		free(b);
	}
	for (uint32_t i = 0; i < c->hcap; i++)
		for (struct npart *p = c->htab[i], *q; p; p = q) {
			q = p->hnext;
			free(p);
		}
	free(c->htab);
	free(c->fetch.buf);
	free(c->recs);
	free(c->arena);
	free(c->zbuf);
	compress_ctx_destroy(c->zctx);
	if (c->t)
		c->t->ops->destroy(c->t);
	free(c);
}
