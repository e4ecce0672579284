/* tests/unit/test_native_client.c — libsluice_native against an in-memory
 * broker: a transport (native_client.h) whose other end is a small model
 * of the native protocol's broker side, built on the core's own pieces
 * (native_parse and writers, batch_validate, the idempotent producer
 * table of dataplane/producer.c), with the client's fault-injecting
 * transport in between. No sockets, no threads: the model answers each
 * datagram as it is sent, and hands its answers back one poll late (so
 * that batches are really in flight).
 *
 * What is checked: records come back exactly once and in order per
 * partition (read back through the client's own FETCH), delivery reports
 * carry the offsets they landed at, under loss, duplication, reordering,
 * truncation and bit flips in both directions; the control run (resends
 * renumbered) shows duplicates under the same faults; fragmentation;
 * credits never exceeded; a refused topic fails its records and no
 * others; a forgotten session is reopened without duplicates; the
 * record codec round-trips keys, values, nulls and headers. The DPDK
 * transport's configuration (addresses, their errors naming the key, EAL
 * arguments refused before the EAL starts) without an EAL: its traffic is
 * tests/integration/test_native_dpdk.c's. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dataplane/kafka_errors.h"
#include "dataplane/native/native_client.h"
#include "dataplane/native/sluice_native.h"
#include "dataplane/producer.h"
#include "storage/batch.h"

/* ---- the model broker ----------------------------------------------------------------- */

struct mpart {
	char topic[64];
	int32_t partition;
	uint8_t *log;
	size_t len, cap;
	int64_t next;                 /* next offset */
	size_t *starts;               /* byte offset of each batch */
	size_t nb, nbcap;
	struct producer_table pt;
};

struct mitem {
	uint8_t *p;
	uint32_t len;
	uint32_t credit;              /* batch bytes the broker frees when this ack leaves */
};

struct reasm {
	int used;
	int32_t partition;
	int64_t pid;
	int16_t epoch;
	int32_t seq;
	uint32_t total, got_bytes;
	uint16_t count, got;
	uint8_t seen[4096];
	uint8_t *buf;
};

struct mock {
	struct native_transport t;
	uint32_t credits;
	uint16_t max_dg;
	int delay;                    /* answers leave one poll late */
	int forget_after;             /* forget the session at this PRODUCE datagram (0: never) */
	int blackhole;                /* PRODUCE datagrams vanish */
	uint32_t session;
	int64_t pid, next_pid;
	struct mpart parts[8];
	int nparts;
	struct reasm ra[32];
	struct mitem q[1 << 16];
	unsigned qhead, qtail, qmark;
	unsigned lent;
	uint8_t stage[9216];
	uint64_t in_flight, max_in_flight;
	long produces, appended, duplicates, refused, hellos, errors;
};

static struct mock *mock_of(struct native_transport *t)
{
	return (struct mock *)t;
}

static void reply(struct mock *k, const uint8_t *p, int len, uint32_t credit)
{
	struct mitem *it;

	cr_assert_gt(len, 0, "the model could not write its answer (%d)", len);
	cr_assert_lt(k->qtail - k->qhead, (unsigned)(1 << 16), "model queue full");
	it = &k->q[k->qtail++ % (1 << 16)];
	it->p = malloc((size_t)len);
	memcpy(it->p, p, (size_t)len);
	it->len = (uint32_t)len;
	it->credit = credit;
}

static struct mpart *mock_part(struct mock *k, const char *topic, size_t tl, int32_t partition)
{
	for (int i = 0; i < k->nparts; i++)
		if (k->parts[i].partition == partition && strlen(k->parts[i].topic) == tl &&
		    !memcmp(k->parts[i].topic, topic, tl))
			return &k->parts[i];
	return NULL;
}

static void mock_topic(struct mock *k, const char *topic, int partitions)
{
	for (int i = 0; i < partitions; i++) {
		struct mpart *p = &k->parts[k->nparts++];

		snprintf(p->topic, sizeof(p->topic), "%s", topic);
		p->partition = i;
	}
}

static void mock_append(struct mpart *p, uint8_t *batch, uint32_t len)
{
	if (p->len + len > p->cap) {
		p->cap = (p->len + len) * 2;
		p->log = realloc(p->log, p->cap);
	}
	if (p->nb == p->nbcap) {
		p->nbcap = p->nbcap ? p->nbcap * 2 : 64;
		p->starts = realloc(p->starts, p->nbcap * sizeof(*p->starts));
	}
	batch_set_base_offset(batch, p->next);
	memcpy(p->log + p->len, batch, len);
	p->starts[p->nb++] = p->len;
	p->len += len;
	p->next += batch_records_count(batch);
}

static void mock_batch(struct mock *k, const struct native_msg *m, uint8_t *batch, uint32_t len)
{
	uint8_t tx[9216];
	struct mpart *p = mock_part(k, m->topic, m->topic_len, m->partition);
	struct batch_info bi;
	struct producer_batch dup;
	int16_t err = 0;
	int64_t base = -1;
	int v;

	if (!p) {
		err = 3;
	} else if (batch_validate(batch, len, 0, BATCH_V_PRODUCE, &bi) < 0 || bi.size != len ||
		   batch_producer_id(batch) != m->producer_id || batch_base_sequence(batch) != m->base_sequence) {
		err = 2;
	} else {
		int32_t last = producer_seq_add(m->base_sequence, bi.last_offset_delta);

		v = producer_check(&p->pt, m->producer_id, m->producer_epoch, m->base_sequence, last, &dup);
		if (v == PRODUCER_APPEND) {
			base = p->next;
			mock_append(p, batch, len);
			cr_assert_eq(producer_record(&p->pt, m->producer_id, m->producer_epoch, m->base_sequence, last, base,
						     p->next - 1, 0),
				     0);
			k->appended++;
		} else if (v == PRODUCER_DUPLICATE) {
			base = dup.base_offset;
			k->duplicates++;
		} else {
			/* the broker's edge: a verdict as its Kafka code */
			err = v == PRODUCER_OUT_OF_ORDER ? KERR_OUT_OF_ORDER_SEQUENCE_NUMBER : KERR_INVALID_PRODUCER_EPOCH;
		}
	}
	if (err)
		k->refused++;
	else
		k->in_flight += len;
	if (k->in_flight > k->max_in_flight)
		k->max_in_flight = k->in_flight;
	if (m->acks != 0)
		reply(k, tx,
		      native_write_produce_ack(tx, sizeof(tx), k->session, m->request, m->topic, m->topic_len, m->partition,
					       err, m->producer_id, m->base_sequence, base, 0, len),
		      err ? 0 : len);
	else if (!err)
		k->in_flight -= len;
}

static void mock_produce(struct mock *k, const struct native_msg *m)
{
	uint8_t tx[9216];
	struct reasm *r = NULL;

	if (k->blackhole)
		return;
	k->produces++;
	if (k->forget_after && k->produces == k->forget_after)
		k->session = 0;   /* the broker forgets the session (restart, expiry) */
	if (!k->session || m->session != k->session) {
		reply(k, tx,
		      native_write_error(tx, sizeof(tx), m->session, m->request, 59, NATIVE_PRODUCE,
					 "unknown or expired session: send HELLO again"),
		      0);
		return;
	}
	if (m->producer_id != k->pid) {
		reply(k, tx,
		      native_write_produce_ack(tx, sizeof(tx), k->session, m->request, m->topic, m->topic_len, m->partition,
					       59, m->producer_id, m->base_sequence, -1, -1, 0),
		      0);
		return;
	}
	if (k->in_flight + m->total_len > k->credits) {
		k->errors++;
		reply(k, tx,
		      native_write_error(tx, sizeof(tx), k->session, m->request, 89, NATIVE_PRODUCE, "beyond credits"), 0);
		return;
	}
	if (m->frag_count == 1) {
		uint8_t *b = malloc(m->data_len);

		memcpy(b, m->data, m->data_len);
		mock_batch(k, m, b, m->data_len);
		free(b);
		return;
	}
	for (int i = 0; i < 32 && !r; i++)
		if (k->ra[i].used && k->ra[i].partition == m->partition && k->ra[i].pid == m->producer_id &&
		    k->ra[i].epoch == m->producer_epoch && k->ra[i].seq == m->base_sequence)
			r = &k->ra[i];
	if (!r) {
		for (int i = 0; i < 32 && !r; i++)
			if (!k->ra[i].used)
				r = &k->ra[i];
		cr_assert_not_null(r, "model: reassembly slots full");
		memset(r, 0, sizeof(*r));
		r->used = 1;
		r->partition = m->partition;
		r->pid = m->producer_id;
		r->epoch = m->producer_epoch;
		r->seq = m->base_sequence;
		r->total = m->total_len;
		r->count = m->frag_count;
		r->buf = malloc(r->total);
	}
	cr_assert_eq(r->total, m->total_len, "fragments of one batch disagree on its length");
	cr_assert_eq(r->count, m->frag_count, "fragments of one batch disagree on their count");
	if (r->seen[m->frag_index])
		return;
	/* every fragment but the last has the same size */
	cr_assert(m->frag_index + 1 == m->frag_count ||
			  m->data_len == native_produce_room(k->max_dg, m->topic_len),
		  "fragment %u of %u: %u bytes", m->frag_index, m->frag_count, m->data_len);
	r->seen[m->frag_index] = 1;
	memcpy(r->buf + m->frag_offset, m->data, m->data_len);
	r->got++;
	r->got_bytes += m->data_len;
	if (r->got == r->count) {
		cr_assert_eq(r->got_bytes, r->total);
		mock_batch(k, m, r->buf, r->total);
		free(r->buf);
		r->used = 0;
	}
}

static void mock_fetch(struct mock *k, const struct native_msg *m)
{
	uint8_t tx[9216];
	struct mpart *p = mock_part(k, m->topic, m->topic_len, m->partition);
	size_t first = 0, end, total;
	uint32_t room = native_fetch_data_room(k->max_dg, m->topic_len);
	uint16_t count;

	if (!p || m->offset > p->next) {
		reply(k, tx,
		      native_write_fetch_data(tx, sizeof(tx), k->session, m->request, m->topic, m->topic_len, m->partition,
					      p ? 1 : 3, p ? p->next : -1, 0, p ? p->next : -1, 0, 0, 0, 0, NULL, 0),
		      0);
		return;
	}
	while (first < p->nb) {
		const uint8_t *b = p->log + p->starts[first];

		if (batch_last_offset(b) >= m->offset)
			break;
		first++;
	}
	end = first;
	total = 0;
	while (end < p->nb) {
		size_t sz = batch_size(p->log + p->starts[end]);

		if (total && total + sz > m->max_bytes)
			break;
		total += sz;
		end++;
	}
	count = (uint16_t)((total + room - 1) / room);
	if (!total) {
		reply(k, tx,
		      native_write_fetch_data(tx, sizeof(tx), k->session, m->request, m->topic, m->topic_len, m->partition,
					      0, p->next, 0, p->next, 0, 0, 0, 0, NULL, 0),
		      0);
		return;
	}
	for (uint16_t i = 0; i < count; i++) {
		size_t off = (size_t)i * room, n = total - off < room ? total - off : room;

		reply(k, tx,
		      native_write_fetch_data(tx, sizeof(tx), k->session, m->request, m->topic, m->topic_len, m->partition,
					      0, p->next, 0, p->next, (uint32_t)total, (uint32_t)off, i, count,
					      p->log + p->starts[first] + off, (uint32_t)n),
		      0);
	}
}

static void mock_datagram(struct mock *k, const uint8_t *dg, uint32_t len)
{
	uint8_t tx[9216];
	struct native_msg m;
	int rc = native_parse(dg, len, 1, &m);

	if (rc < 0) {
		k->errors++;
		if (rc != -NATIVE_E_MAGIC && rc != -NATIVE_E_SHORT)
			reply(k, tx,
			      native_write_error(tx, sizeof(tx), 0, len >= NATIVE_HEADER ? be32_load(dg + NH_REQUEST) : 0,
						 (int16_t)rc, len > NH_TYPE ? dg[NH_TYPE] : 0, native_reject_name(rc)),
			      0);
		return;
	}
	switch (m.type) {
	case NATIVE_HELLO:
		k->hellos++;
		k->session = 0x01000000u + (uint32_t)k->hellos;
		k->pid = k->next_pid++;
		reply(k, tx,
		      native_write_hello_ack(tx, sizeof(tx), m.request, k->session,
					     m.credits < k->credits ? m.credits : k->credits,
					     m.max_datagram < k->max_dg ? m.max_datagram : k->max_dg, 1, k->pid),
		      0);
		break;
	case NATIVE_PRODUCE:
		mock_produce(k, &m);
		break;
	case NATIVE_FETCH:
		mock_fetch(k, &m);
		break;
	default:
		cr_assert_fail("the client sent a %s", native_type_name(m.type));
	}
}

static int mock_tx_get(struct native_transport *t, struct native_dgram *d)
{
	*d = (struct native_dgram){ .data = mock_of(t)->stage, .cap = sizeof(mock_of(t)->stage) };
	return 0;
}

static void mock_tx_put(struct native_transport *t, struct native_dgram *d)
{
	mock_datagram(mock_of(t), d->data, d->len);
}

static int mock_tx_flush(struct native_transport *t)
{
	(void)t;
	return 0;
}

static int mock_rx_burst(struct native_transport *t, struct native_dgram *d, unsigned n)
{
	struct mock *k = mock_of(t);
	unsigned end = k->delay ? k->qmark : k->qtail, got = 0;

	while (got < n && k->qhead + got != end) {
		struct mitem *it = &k->q[(k->qhead + got) % (1 << 16)];

		d[got++] = (struct native_dgram){ .data = it->p, .len = it->len, .cap = it->len };
	}
	k->lent = got;
	if (k->qhead + got == end)
		k->qmark = k->qtail;   /* what was answered so far leaves at the next burst */
	return (int)got;
}

static void mock_rx_done(struct native_transport *t, struct native_dgram *d, unsigned n)
{
	struct mock *k = mock_of(t);

	(void)d;
	cr_assert_eq(n, k->lent);
	for (unsigned i = 0; i < n; i++) {
		struct mitem *it = &k->q[k->qhead++ % (1 << 16)];

		k->in_flight -= it->credit;
		free(it->p);
	}
	k->lent = 0;
}

static int mock_wait(struct native_transport *t, int timeout_ms)
{
	struct mock *k = mock_of(t);

	if (k->qhead != k->qtail)
		return 1;
	if (timeout_ms > 0)
		usleep(200);
	return 0;
}

static int mock_path_mtu(struct native_transport *t)
{
	return mock_of(t)->max_dg;
}

static int mock_fd(struct native_transport *t)
{
	(void)t;
	return -1;
}

static void mock_stats(struct native_transport *t, struct sluice_stats *st)
{
	(void)t;
	(void)st;
}

static void mock_destroy(struct native_transport *t)
{
	(void)t;   /* the test owns the model; mock_free */
}

static const struct native_transport_ops mock_ops = {
	.name = "model", .tx_get = mock_tx_get, .tx_put = mock_tx_put, .tx_flush = mock_tx_flush,
	.rx_burst = mock_rx_burst, .rx_done = mock_rx_done, .wait = mock_wait, .path_mtu = mock_path_mtu,
	.fd = mock_fd, .stats = mock_stats, .destroy = mock_destroy,
};

static struct mock *mock_new(uint32_t credits, uint16_t max_dg)
{
	struct mock *k = calloc(1, sizeof(*k));

	k->t.ops = &mock_ops;
	k->credits = credits;
	k->max_dg = max_dg;
	k->delay = 1;
	k->next_pid = 1000;
	return k;
}

static void mock_free(struct mock *k)
{
	for (int i = 0; i < k->nparts; i++) {
		free(k->parts[i].log);
		free(k->parts[i].starts);
		producer_table_free(&k->parts[i].pt);
	}
	for (int i = 0; i < 32; i++)
		if (k->ra[i].used)
			free(k->ra[i].buf);
	while (k->qhead != k->qtail)
		free(k->q[k->qhead++ % (1 << 16)].p);
	free(k);
}

/* ---- the workload ---------------------------------------------------------------------- */

struct run {
	long n;
	int parts;
	int64_t *offset;              /* by record index: the reported offset */
	int *err;
	long reports, failed;
};

static void on_delivery(void *ctx, void *opaque, int err, int64_t offset)
{
	struct run *r = ctx;
	long i = (long)(uintptr_t)opaque;

	cr_assert_lt(i, r->n);
	cr_assert_eq(r->err[i], 1, "record %ld reported twice", i);
	r->err[i] = err;
	r->offset[i] = offset;
	r->reports++;
	if (err)
		r->failed++;
}

static struct sluice_client *open_client(struct mock *k, struct sluice_config *cfg, const struct sluice_fault *f)
{
	struct native_transport *t = &k->t;
	struct sluice_client *c = NULL;
	char err[256];

	if (f)
		cr_assert_eq(native_fault_create(t, f, &t), 0);
	cr_assert_eq(native_client_open(t, cfg, &c, err, sizeof(err)), 0, "open: %s", err);
	return c;
}

/* Record i: partition i % parts, value {partition, i / parts}, key "k<i>". */
static void produce_all(struct sluice_client *c, struct run *r, const char *topic)
{
	r->offset = calloc((size_t)r->n, sizeof(*r->offset));
	r->err = malloc((size_t)r->n * sizeof(*r->err));
	for (long i = 0; i < r->n; i++)
		r->err[i] = 1;   /* not reported */
	for (long i = 0; i < r->n; i++) {
		uint32_t v[2] = { (uint32_t)(i % r->parts), (uint32_t)(i / r->parts) };
		char key[24];
		int kl = snprintf(key, sizeof(key), "k%ld", i), rc;

		while ((rc = sluice_produce(c, topic, (int32_t)v[0], key, (size_t)kl, v, sizeof(v),
					    (void *)(uintptr_t)i)) == -ENOBUFS)
			cr_assert_geq(sluice_poll(c, 10), 0);
		cr_assert_eq(rc, 0, "produce %ld: %d", i, rc);
	}
	cr_assert_eq(sluice_flush(c, 30000), 0, "flush: %zu records still out", sluice_outq_len(c));
	cr_assert_eq(r->reports, r->n);
}

/* Read every partition back through the client; count what is out of
 * place. Returns the duplicates seen (records whose index was seen
 * before); asserts nothing is missing when expect_exact. */
static long read_back(struct sluice_client *c, struct run *r, const char *topic, int expect_exact)
{
	struct sluice_fetch_result res;
	long dups = 0;

	for (int p = 0; p < r->parts; p++) {
		long want = (r->n - p + r->parts - 1) / r->parts, got = 0;
		uint8_t *seen = calloc((size_t)want + 1, 1);
		int64_t off = 0;
		int rc;

		for (;;) {
			rc = sluice_fetch(c, topic, p, off, 256 << 10, 0, 5000, &res);
			cr_assert_geq(rc, 0, "fetch %s/%d at %lld: %d", topic, p, (long long)off, rc);
			cr_assert_eq(res.err, 0);
			if (res.count == 0)
				break;
			for (size_t i = 0; i < res.count; i++) {
				const struct sluice_record *rec = &res.records[i];
				uint32_t v[2];

				cr_assert_eq(rec->offset, off + (int64_t)i, "offsets not contiguous");
				cr_assert_eq(rec->value_len, 8);
				memcpy(v, rec->value, 8);
				cr_assert_eq(v[0], (uint32_t)p);
				cr_assert_lt(v[1], (uint32_t)want);
				if (seen[v[1]]) {
					dups++;
					continue;
				}
				seen[v[1]] = 1;
				if (expect_exact) {
					long idx = (long)v[1] * r->parts + p;
					char key[24];
					int kl = snprintf(key, sizeof(key), "k%ld", idx);

					cr_assert_eq(v[1], (uint32_t)got, "partition %d: record %u at offset %lld, expected %ld",
						     p, v[1], (long long)rec->offset, got);
					cr_assert(rec->key_len == kl && !memcmp(rec->key, key, (size_t)kl));
					cr_assert_eq(r->offset[idx], rec->offset, "record %ld reported at %lld, read at %lld",
						     idx, (long long)r->offset[idx], (long long)rec->offset);
				}
				got++;
			}
			off = res.next_offset;
		}
		cr_assert_eq(res.high_watermark, off);
		if (expect_exact)
			cr_assert_eq(got, want, "partition %d: %ld records, expected %ld", p, got, want);
		free(seen);
	}
	return dups;
}

static void run_free(struct run *r)
{
	free(r->offset);
	free(r->err);
}

static void base_config(struct sluice_config *cfg, struct run *r)
{
	sluice_config_init(cfg);
	cfg->delivery = on_delivery;
	cfg->delivery_ctx = r;
	cfg->connect_timeout_ms = 2000;
	cfg->retry_min_ms = 1;
	cfg->retry_max_ms = 20;
}

/* A run with no faults: nothing is lost, so nothing may be sent twice.
 * The resend timer (1-20 ms above) would fire on a test preempted that
 * long between a send and the model's answer (the machine loaded), a
 * resend the test would then count against the client: 2-5 s here, so
 * that only a client that resends without cause fails it. */
static void calm_config(struct sluice_config *cfg, struct run *r)
{
	base_config(cfg, r);
	cfg->retry_min_ms = 2000;
	cfg->retry_max_ms = 5000;
}

/* ---- tests -------------------------------------------------------------------------------- */

Test(native_client, round_trip)
{
	struct mock *k = mock_new(1 << 20, NATIVE_MAX_DATAGRAM);
	struct run r = { .n = 20000, .parts = 3 };
	struct sluice_config cfg;
	struct sluice_stats st;
	struct sluice_client *c;

	mock_topic(k, "t", 3);
	calm_config(&cfg, &r);
	c = open_client(k, &cfg, NULL);
	produce_all(c, &r, "t");
	cr_assert_eq(r.failed, 0);
	cr_assert_eq(read_back(c, &r, "t", 1), 0);
	sluice_stats(c, &st);
	cr_assert_eq(st.producer_id, 1000);
	cr_assert_eq(st.batch_resends, 0, "no faults, yet %llu resends", (unsigned long long)st.batch_resends);
	cr_assert_eq(k->duplicates, 0);
	cr_assert_leq(k->max_in_flight, k->credits);
	sluice_close(c);
	run_free(&r);
	mock_free(k);
}

static void fault_run(int defeat, long *dups_out, struct sluice_stats *st)
{
	struct mock *k = mock_new(1 << 20, NATIVE_MAX_DATAGRAM);
	struct run r = { .n = 30000, .parts = 4 };
	struct sluice_config cfg;
	struct sluice_fault f = { .loss_pct = 3, .dup_pct = 3, .truncate_pct = 1, .corrupt_pct = 1, .reorder_pct = 5,
				  .reorder_window = 8, .seed = 42 };
	struct sluice_client *c;

	mock_topic(k, "f", 4);
	base_config(&cfg, &r);
	cfg.batch_bytes = 4096;   /* many batches, so that many are hit */
	c = open_client(k, &cfg, &f);
	if (defeat)
		native_client_defeat_dedup(c);
	produce_all(c, &r, "f");
	cr_assert_eq(r.failed, 0, "%ld records failed", r.failed);
	*dups_out = read_back(c, &r, "f", !defeat);
	sluice_stats(c, st);
	cr_assert_leq(k->max_in_flight, k->credits);
	sluice_close(c);
	run_free(&r);
	mock_free(k);
}

Test(native_client, faults_exactly_once_in_order, .timeout = 60)
{
	struct sluice_stats st;
	long dups;

	fault_run(0, &dups, &st);
	cr_assert_eq(dups, 0);
	cr_assert_gt(st.fault_dropped, 0);
	cr_assert_gt(st.fault_duplicated, 0);
	cr_assert_gt(st.fault_truncated, 0);
	cr_assert_gt(st.fault_reordered, 0);
	cr_assert_gt(st.batch_resends, 0);
	cr_assert_gt(st.rx_unreadable, 0, "truncated/corrupted answers are refused by native_parse");
	cr_log_info("faults: %llu dropped, %llu duplicated, %llu truncated, %llu corrupted, %llu reordered; %llu "
		    "resends, %llu out of order, %llu duplicate acks, %llu fetch retries",
		    (unsigned long long)st.fault_dropped, (unsigned long long)st.fault_duplicated,
		    (unsigned long long)st.fault_truncated, (unsigned long long)st.fault_corrupted,
		    (unsigned long long)st.fault_reordered, (unsigned long long)st.batch_resends,
		    (unsigned long long)st.acks_out_of_order, (unsigned long long)st.acks_duplicate,
		    (unsigned long long)st.fetch_retries);
}

Test(native_client, control_renumbered_resends_duplicate, .timeout = 60)
{
	struct sluice_stats st;
	long dups;

	fault_run(1, &dups, &st);
	cr_assert_gt(dups, 0, "the control run must show duplicates (else the fault test proves nothing)");
	cr_log_info("control: %ld duplicates after %llu resends", dups, (unsigned long long)st.batch_resends);
}

Test(native_client, fragments_small_datagrams, .timeout = 60)
{
	struct mock *k = mock_new(4 << 20, NATIVE_MIN_DATAGRAM);
	struct run r = { .n = 20000, .parts = 2 };
	struct sluice_config cfg;
	struct sluice_fault f = { .loss_pct = 1, .dup_pct = 1, .reorder_pct = 2, .seed = 7 };
	struct sluice_stats st;
	struct sluice_client *c;

	mock_topic(k, "frag", 2);
	base_config(&cfg, &r);
	cfg.batch_bytes = 200 << 10;   /* ~150 fragments per batch */
	cfg.linger_us = 100000;
	c = open_client(k, &cfg, &f);
	sluice_stats(c, &st);
	cr_assert_eq(st.max_datagram, NATIVE_MIN_DATAGRAM);
	produce_all(c, &r, "frag");
	cr_assert_eq(r.failed, 0);
	cr_assert_eq(read_back(c, &r, "frag", 1), 0);
	sluice_close(c);
	run_free(&r);
	mock_free(k);
}

Test(native_client, credits_never_exceeded)
{
	struct mock *k = mock_new(64 << 10, NATIVE_MAX_DATAGRAM);
	struct run r = { .n = 50000, .parts = 8 };
	struct sluice_config cfg;
	struct sluice_stats st;
	struct sluice_client *c;

	mock_topic(k, "cr", 8);
	base_config(&cfg, &r);
	cfg.batch_bytes = 16 << 10;
	c = open_client(k, &cfg, NULL);
	sluice_stats(c, &st);
	cr_assert_eq(st.credits, 64 << 10, "the broker granted 64 KiB of the 8 MiB asked");
	produce_all(c, &r, "cr");
	cr_assert_eq(r.failed, 0);
	cr_assert_leq(k->max_in_flight, 64 << 10);
	cr_assert_gt(k->max_in_flight, 32 << 10, "the credits were used");
	sluice_stats(c, &st);
	cr_assert_eq(st.throttled, 0);
	cr_assert_eq(read_back(c, &r, "cr", 1), 0);
	sluice_close(c);
	run_free(&r);
	mock_free(k);
}

Test(native_client, unknown_topic_fails_its_records_only)
{
	struct mock *k = mock_new(1 << 20, NATIVE_MAX_DATAGRAM);
	struct run r = { .n = 1000, .parts = 1 };
	struct sluice_config cfg;
	struct sluice_client *c;
	int ok = 0;

	mock_topic(k, "good", 1);
	base_config(&cfg, &r);
	c = open_client(k, &cfg, NULL);
	r.offset = calloc(2000, sizeof(*r.offset));
	r.err = malloc(2000 * sizeof(int));
	r.n = 2000;
	for (int i = 0; i < 2000; i++)
		r.err[i] = 1;
	for (int i = 0; i < 2000; i++) {
		uint32_t v[2] = { 0, (uint32_t)(i / 2) };

		cr_assert_eq(sluice_produce(c, i % 2 ? "nosuch" : "good", 0, NULL, 0, v, 8, (void *)(uintptr_t)i), 0);
	}
	cr_assert_eq(sluice_flush(c, 10000), 0);
	for (int i = 0; i < 2000; i++) {
		if (i % 2)
			cr_assert_eq(r.err[i], 3, "record %d: %d", i, r.err[i]);
		else
			ok += r.err[i] == 0 && r.offset[i] == i / 2;
	}
	cr_assert_eq(ok, 1000);
	{
		struct sluice_fetch_result res;

		cr_assert_eq(sluice_fetch(c, "nosuch", 0, 0, 1 << 20, 0, 2000, &res), 0);
		cr_assert_eq(res.err, 3);
	}
	sluice_close(c);
	run_free(&r);
	mock_free(k);
}

Test(native_client, forgotten_session_reopened_without_duplicates)
{
	struct mock *k = mock_new(1 << 20, NATIVE_MAX_DATAGRAM);
	struct run r = { .n = 20000, .parts = 2 };
	struct sluice_config cfg;
	struct sluice_stats st;
	struct sluice_client *c;

	mock_topic(k, "s", 2);
	k->forget_after = 20;
	base_config(&cfg, &r);
	cfg.batch_bytes = 4096;
	c = open_client(k, &cfg, NULL);
	produce_all(c, &r, "s");
	sluice_stats(c, &st);
	cr_assert_eq(st.sessions_opened, 2);
	cr_assert_eq(st.producer_id, 1001, "the new session's producer id");
	/* refused batches were renumbered under the new producer id: none
	 * failed, none twice */
	cr_assert_eq(r.failed, 0, "%ld failed", r.failed);
	cr_assert_eq(read_back(c, &r, "s", 1), 0);
	sluice_close(c);
	run_free(&r);
	mock_free(k);
}

Test(native_client, codec_nulls_headers_and_mid_batch_offsets)
{
	struct mock *k = mock_new(1 << 20, NATIVE_MAX_DATAGRAM);
	struct run r = { .n = 5 };
	struct sluice_config cfg;
	struct sluice_fetch_result res;
	struct sluice_client *c;
	struct sluice_record out[2];
	uint8_t rec[128], hdr[64];
	size_t n, hn = 0;

	mock_topic(k, "c", 1);
	base_config(&cfg, &r);
	c = open_client(k, &cfg, NULL);
	r.offset = calloc(5, sizeof(*r.offset));
	r.err = malloc(5 * sizeof(int));
	for (int i = 0; i < 5; i++)
		r.err[i] = 1;
	cr_assert_eq(sluice_produce(c, "c", 0, NULL, 0, "v0", 2, (void *)0), 0);
	cr_assert_eq(sluice_produce(c, "c", 0, "k1", 2, NULL, 0, (void *)1), 0);
	cr_assert_eq(sluice_produce(c, "c", 0, "", 0, "", 0, (void *)2), 0);
	cr_assert_eq(sluice_produce(c, "c", 0, "k3", 2, "v3", 2, (void *)3), 0);
	cr_assert_eq(sluice_produce(c, "c", 0, "k4", 2, "v4", 2, (void *)4), 0);
	cr_assert_eq(sluice_flush(c, 5000), 0);
	for (int i = 0; i < 5; i++)
		cr_assert(r.err[i] == 0 && r.offset[i] == i);
	/* from the middle of the (single) batch */
	cr_assert_eq(sluice_fetch(c, "c", 0, 1, 1 << 20, 0, 2000, &res), 4);
	cr_assert_eq(res.next_offset, 5);
	cr_assert(res.records[0].offset == 1 && res.records[0].value == NULL && res.records[0].value_len == -1 &&
		  res.records[0].key_len == 2 && !memcmp(res.records[0].key, "k1", 2));
	cr_assert(res.records[1].key_len == 0 && res.records[1].key != NULL && res.records[1].value_len == 0);
	cr_assert(res.records[3].offset == 4 && !memcmp(res.records[3].value, "v4", 2));
	cr_assert_lt(llabs(res.records[0].timestamp - (int64_t)time(NULL) * 1000), 10000);
	/* at the end: empty, the high watermark */
	cr_assert_eq(sluice_fetch(c, "c", 0, 5, 1 << 20, 0, 2000, &res), 0);
	cr_assert_eq(res.high_watermark, 5);
	/* out of range */
	cr_assert_eq(sluice_fetch(c, "c", 0, 9, 1 << 20, 0, 2000, &res), 0);
	cr_assert_eq(res.err, 1);
	sluice_close(c);
	run_free(&r);
	mock_free(k);

	/* a record with headers parses (the producer writes none) */
	hdr[hn++] = 2 * 1;   /* key length 1 */
	hdr[hn++] = 'h';
	hdr[hn++] = 2 * 2;   /* value length 2 */
	hdr[hn++] = 'x';
	hdr[hn++] = 'y';
	n = 0;
	rec[n++] = (uint8_t)(2 * (1 + 1 + 1 + 1 + 1 + 1 + 1 + hn));   /* length */
	rec[n++] = 0;      /* attributes */
	rec[n++] = 2 * 3;  /* timestamp delta 3 */
	rec[n++] = 0;      /* offset delta 0 */
	rec[n++] = 1;      /* key: null (-1) */
	rec[n++] = 2 * 1;  /* value length 1 */
	rec[n++] = 'v';
	rec[n++] = 2 * 1;  /* one header */
	memcpy(rec + n, hdr, hn);
	n += hn;
	cr_assert_eq(native_records_parse(rec, n, 1, 100, 1000, 2000, 0, out), 1);
	cr_assert(out[0].offset == 100 && out[0].timestamp == 1003 && out[0].key == NULL && out[0].value_len == 1 &&
		  out[0].header_count == 1 && out[0].headers_len == hn);
	cr_assert_eq(native_records_parse(rec, n - 1, 1, 100, 1000, 2000, 0, out), -EPROTO);
}

Test(native_client, record_size_matches_writer)
{
	uint8_t buf[4096];
	static const int32_t lens[] = { -1, 0, 1, 63, 64, 127, 128, 8191, 8192 };
	static uint8_t data[8192];

	for (size_t a = 0; a < sizeof(lens) / sizeof(lens[0]); a++)
		for (size_t b = 0; b < sizeof(lens) / sizeof(lens[0]); b++) {
			int32_t kl = lens[a] > 1000 ? 100 : lens[a], vl = lens[b] > 2000 ? 1000 : lens[b];
			size_t sz = native_record_size(-70, 300, kl, vl);

			cr_assert_eq(native_record_put(buf, -70, 300, data, kl, data, vl), sz);
		}
}

/* Every codec: batches compressed by the producer (smaller on the wire),
 * decoded by the fetcher, same records. */
Test(native_client, compressed_batches_every_codec)
{
	for (int codec = 1; codec <= 4; codec++) {
		struct mock *k = mock_new(1 << 20, NATIVE_MAX_DATAGRAM);
		struct run r = { .n = 20000, .parts = 2 };
		struct sluice_config cfg;
		struct sluice_stats st;
		struct sluice_client *c;

		mock_topic(k, "z", 2);
		calm_config(&cfg, &r);
		cfg.compression = codec;
		c = open_client(k, &cfg, NULL);
		produce_all(c, &r, "z");
		cr_assert_eq(r.failed, 0);
		for (int p = 0; p < 2; p++)
			for (size_t b = 0; b < k->parts[p].nb; b++)
				cr_assert_eq(batch_attributes(k->parts[p].log + k->parts[p].starts[b]) & 7, codec,
					     "codec %d: batch %zu stored with attributes %#x", codec, b,
					     batch_attributes(k->parts[p].log + k->parts[p].starts[b]));
		cr_assert_eq(read_back(c, &r, "z", 1), 0);
		sluice_stats(c, &st);
		cr_assert_lt(st.bytes_sent, 20000ull * 20, "codec %d: %llu bytes sent for 20,000 records", codec,
			     (unsigned long long)st.bytes_sent);
		sluice_close(c);
		run_free(&r);
		mock_free(k);
	}
}

Test(native_client, acks_zero_fire_and_forget)
{
	struct mock *k = mock_new(1 << 20, NATIVE_MAX_DATAGRAM);
	struct run r = { .n = 10000, .parts = 2 };
	struct sluice_config cfg;
	struct sluice_stats st;
	struct sluice_client *c;

	mock_topic(k, "a0", 2);
	base_config(&cfg, &r);
	cfg.acks = 0;
	c = open_client(k, &cfg, NULL);
	produce_all(c, &r, "a0");
	cr_assert_eq(r.failed, 0);
	for (long i = 0; i < r.n; i++)
		cr_assert_eq(r.offset[i], -1, "acks=0 reports no offset");
	sluice_stats(c, &st);
	cr_assert_eq(st.credits_used, 0);
	cr_assert_eq(k->parts[0].next + k->parts[1].next, 10000);
	sluice_close(c);
	run_free(&r);
	mock_free(k);
}

/* Nothing comes back: records fail with -ETIMEDOUT at the delivery
 * timeout; once the broker answers again, the next records go out under
 * the next epoch from sequence 0 (the broker has no gap to refuse) and
 * succeed. */
Test(native_client, delivery_timeout_then_new_epoch)
{
	struct mock *k = mock_new(1 << 20, NATIVE_MAX_DATAGRAM);
	struct run r = { .n = 200, .parts = 1 };
	struct sluice_config cfg;
	struct sluice_client *c;
	int rc;

	mock_topic(k, "dt", 1);
	base_config(&cfg, &r);
	cfg.delivery_timeout_ms = 300;
	c = open_client(k, &cfg, NULL);
	r.offset = calloc(200, sizeof(*r.offset));
	r.err = malloc(200 * sizeof(int));
	for (int i = 0; i < 200; i++)
		r.err[i] = 1;
	k->blackhole = 1;
	for (int i = 0; i < 100; i++)
		cr_assert_eq(sluice_produce(c, "dt", 0, NULL, 0, &i, sizeof(i), (void *)(uintptr_t)i), 0);
	rc = sluice_flush(c, 5000);
	cr_assert_eq(rc, 0, "flush %d", rc);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(r.err[i], -ETIMEDOUT, "record %d: %d", i, r.err[i]);
	k->blackhole = 0;
	for (int i = 100; i < 200; i++)
		cr_assert_eq(sluice_produce(c, "dt", 0, NULL, 0, &i, sizeof(i), (void *)(uintptr_t)i), 0);
	cr_assert_eq(sluice_flush(c, 5000), 0);
	for (int i = 100; i < 200; i++)
		cr_assert(r.err[i] == 0 && r.offset[i] == i - 100, "record %d: %d at %lld", i, r.err[i],
			  (long long)r.offset[i]);
	sluice_close(c);
	run_free(&r);
	mock_free(k);
}

/* sluice_close reports what is still out with -ECANCELED. */
Test(native_client, close_cancels_what_is_left)
{
	struct mock *k = mock_new(1 << 20, NATIVE_MAX_DATAGRAM);
	struct run r = { .n = 50, .parts = 1 };
	struct sluice_config cfg;
	struct sluice_client *c;

	mock_topic(k, "cl", 1);
	base_config(&cfg, &r);
	c = open_client(k, &cfg, NULL);
	r.offset = calloc(50, sizeof(*r.offset));
	r.err = malloc(50 * sizeof(int));
	for (int i = 0; i < 50; i++)
		r.err[i] = 1;
	for (int i = 0; i < 50; i++)
		cr_assert_eq(sluice_produce(c, "cl", 0, NULL, 0, &i, sizeof(i), (void *)(uintptr_t)i), 0);
	cr_assert_eq(sluice_outq_len(c), 50);
	sluice_close(c);
	cr_assert_eq(r.reports, 50);
	for (int i = 0; i < 50; i++)
		cr_assert_eq(r.err[i], -ECANCELED);
	run_free(&r);
	mock_free(k);
}

/* ---- the DPDK transport's configuration, no EAL ------------------------------------------ */

static uint32_t ip4(const char *s)
{
	return inet_addr(s);
}

Test(native_client, dpdk_address_with_prefix)
{
	static const struct {
		const char *s;
		const char *why;              /* NULL: valid */
	} cases[] = {
		{ "10.7.0.2/24", NULL },
		{ "192.168.1.77/16", NULL },
		{ "10.7.0.255/31", NULL },    /* /31 and /32: no network or broadcast address */
		{ "10.7.0.0/32", NULL },
		{ "10.7.0.2/0", NULL },
		{ NULL, "is missing" },
		{ "", "is missing" },
		{ "10.7.0.2", "has no prefix" },
		{ "10.7.0.2/", "prefix '' is not 0-32" },
		{ "10.7.0.2/33", "prefix '33' is not 0-32" },
		{ "10.7.0.2/2x", "prefix '2x' is not 0-32" },
		{ "10.7.0.2/-1", "prefix '-1' is not 0-32" },
		{ "10.7.0/24", "'10.7.0' is not a unicast IPv4 address" },
		{ "300.7.0.2/24", "'300.7.0.2' is not a unicast" },
		{ "host/24", "'host' is not a unicast" },
		{ "224.0.0.5/24", "'224.0.0.5' is not a unicast" },
		{ "0.0.0.0/8", "'0.0.0.0' is not a unicast" },
		{ "10.7.0.0/24", "network address" },
		{ "10.7.0.255/24", "broadcast address" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256] = "";
		uint32_t ip = 0, mask = 0;
		int rc = native_dpdk_parse_cidr("dpdk_address", cases[i].s, &ip, &mask, err, sizeof(err));

		if (!cases[i].why) {
			cr_assert_eq(rc, 0, "%s: %s", cases[i].s, err);
			continue;
		}
		cr_assert_eq(rc, -EINVAL, "%s accepted", cases[i].s);
		cr_assert(strstr(err, "dpdk_address") && strstr(err, cases[i].why), "%s: '%s'",
			  cases[i].s ? cases[i].s : "NULL", err);
	}
	{
		char err[64];
		uint32_t ip, mask;

		cr_assert_eq(native_dpdk_parse_cidr("k", "10.7.0.2/24", &ip, &mask, err, sizeof(err)), 0);
		cr_assert(ip == ip4("10.7.0.2") && mask == ip4("255.255.255.0"));
		cr_assert_eq(native_dpdk_parse_cidr("k", "172.16.9.1/20", &ip, &mask, err, sizeof(err)), 0);
		cr_assert(ip == ip4("172.16.9.1") && mask == ip4("255.255.240.0"));
		cr_assert_eq(native_dpdk_parse_cidr("k", "10.1.2.3/0", &ip, &mask, err, sizeof(err)), 0);
		cr_assert_eq(mask, 0);
		cr_assert_eq(native_dpdk_parse_cidr("k", "10.1.2.3/32", &ip, &mask, err, sizeof(err)), 0);
		cr_assert_eq(mask, 0xffffffffu);
	}
}

Test(native_client, dpdk_broker_address_and_local_port)
{
	static const char *const bad[] = { NULL, "", "10.7.0.1", "broker:9094", ":9094", "10.7.0.1:",
					   "10.7.0.1:0", "10.7.0.1:65536", "10.7.0.1:90x4", "255.255.255.255:1" };
	char err[256];
	uint32_t ip;
	uint16_t port, seen[64];

	cr_assert_eq(native_dpdk_parse_hostport("broker", "10.7.0.1:9094", &ip, &port, err, sizeof(err)), 0);
	cr_assert(ip == ip4("10.7.0.1") && port == 9094);
	cr_assert_eq(native_dpdk_parse_hostport("broker", "10.7.0.1:65535", &ip, &port, err, sizeof(err)), 0);
	cr_assert_eq(port, 65535);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		cr_assert_eq(native_dpdk_parse_hostport("broker", bad[i], &ip, &port, err, sizeof(err)), -EINVAL,
			     "'%s' accepted", bad[i] ? bad[i] : "NULL");
		cr_assert(strstr(err, "broker"), "%s", err);
	}
	/* ephemeral-like: in the dynamic range, successive clients differ */
	for (uint32_t seq = 0; seq < 64; seq++) {
		seen[seq] = native_dpdk_local_port(12345, seq);
		cr_assert_geq(seen[seq], 49152);
		for (uint32_t j = 0; j < seq; j++)
			cr_assert_neq(seen[j], seen[seq], "seq %u and %u: port %u", j, seq, seen[seq]);
	}
	cr_assert_neq(native_dpdk_local_port(1000, 0), native_dpdk_local_port(1001, 0));
}

/* sluice_connect refuses a bad DPDK configuration before any EAL call,
 * naming the key. */
Test(native_client, dpdk_connect_refuses_bad_config_without_eal)
{
	static const struct {
		const char *broker, *address, *gateway, *eal;
		int rc;
		const char *want;
	} cases[] = {
		{ "10.7.0.1:9094", NULL, NULL, "-l 0", -EINVAL, "dpdk_address is missing" },
		{ "10.7.0.1:9094", "10.7.0.2", NULL, "-l 0", -EINVAL, "dpdk_address '10.7.0.2' has no prefix" },
		{ "localhost:9094", "10.7.0.2/24", NULL, "-l 0", -EINVAL, "the broker address 'localhost:9094'" },
		{ "10.8.0.1:9094", "10.7.0.2/24", NULL, "-l 0", -EINVAL, "outside dpdk_address 10.7.0.2/24's subnet "
		  "10.7.0.0 and dpdk_gateway is not set" },
		{ "10.8.0.1:9094", "10.7.0.2/24", "10.9.0.1", "-l 0", -EINVAL, "dpdk_gateway 10.9.0.1 is not another "
		  "address" },
		{ "10.8.0.1:9094", "10.7.0.2/24", "gw", "-l 0", -EINVAL, "dpdk_gateway 'gw'" },
		{ "10.7.0.2:9094", "10.7.0.2/24", NULL, "-l 0", -EINVAL, "is dpdk_address 10.7.0.2/24 itself" },
		/* the EAL's arguments are checked before rte_eal_init runs */
		{ "10.7.0.1:9094", "10.7.0.2/24", NULL, "-l 0 --frobnicate", -EINVAL, "dpdk_eal_args: " },
		{ "10.7.0.1:9094", "10.7.0.2/24", NULL, "-l 0 'unterminated", -EINVAL, "dpdk_eal_args: " },
		/* no arguments: the application's EAL, which does not run here */
		{ "10.7.0.1:9094", "10.7.0.2/24", NULL, NULL, -ENODEV, "no EAL runs in this process" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sluice_config cfg;
		struct sluice_client *c = NULL;
		char err[512] = "";
		int rc;

		sluice_config_init(&cfg);
		cfg.transport = SLUICE_TRANSPORT_DPDK;
		cfg.dpdk_address = cases[i].address;
		cfg.dpdk_gateway = cases[i].gateway;
		cfg.dpdk_eal_args = cases[i].eal;
		rc = sluice_connect(cases[i].broker, &cfg, &c, err, sizeof(err));
		cr_assert(rc == cases[i].rc && !c, "case %zu: %d, want %d (%s)", i, rc, cases[i].rc, err);
		cr_assert(strstr(err, cases[i].want), "case %zu: '%s' lacks '%s'", i, err, cases[i].want);
	}
	{
		struct sluice_config cfg;
		struct sluice_client *c = NULL;
		char err[512] = "";

		sluice_config_init(&cfg);
		cfg.transport = SLUICE_TRANSPORT_DPDK;
		cfg.dpdk_address = "10.7.0.2/24";
		cfg.dpdk_eal_args = "-l 0 --frobnicate";
		cr_assert_eq(sluice_connect("10.7.0.1:9094", &cfg, &c, err, sizeof(err)), -EINVAL);
		cr_assert(strstr(err, "'--frobnicate'"), "%s", err);
	}
}
