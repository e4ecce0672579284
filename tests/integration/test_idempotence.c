/* tests/integration/test_idempotence.c — the idempotent producer (issue 6)
 * with librdkafka 2.0.2 against a real build/sluiced, under faults:
 *
 *   - lost Produce responses and cut connections, injected by
 *     build/itests/faultproxy (tests/integration/faultproxy.c) between the
 *     producer and the broker (the broker advertises the proxy, so every
 *     connection goes through it): with enable.idempotence=true every
 *     record lands exactly once and in order per partition; the same run
 *     without idempotence shows duplicates (the control: the faults are
 *     real and the check can fail);
 *   - the broker SIGKILLed and restarted in the middle of an idempotent
 *     run while the producer keeps retrying: no duplicates, nothing
 *     acknowledged is lost.
 *
 * Records are sequence-numbered: record i goes to partition i % parts with
 * the value {partition, i / parts} (two native uint32), so each partition
 * must read back 0, 1, 2, ... The read-back uses the simple consumer (no
 * group) from the beginning to EOF, through the proxy with its faults off
 * (the proxy only ever touches Produce responses).
 *
 * The proxy's seed is SLUICE_FAULT_SEED when set (else the test's own
 * default), printed with its stats, so a failing run can be repeated with
 * the same fault decisions (their timing still varies).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tests/integration/harness.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- producing ------------------------------------------------------- */

struct dr_state {
	long ok, failed;
	rd_kafka_resp_err_t first_err;
	uint8_t *acked;          /* acked[global index] = 1 on a successful report */
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct dr_state *s = opaque;

	(void)rk;
	if (m->err) {
		if (!s->failed++)
			s->first_err = m->err;
		return;
	}
	s->ok++;
	s->acked[(uintptr_t)m->_private] = 1;
}

/* Fail the test on a fatal producer error (idempotence: the producer is
 * unusable after one). */
static void assert_not_fatal(rd_kafka_t *rk, const char *when)
{
	char why[512];
	rd_kafka_resp_err_t err = rd_kafka_fatal_error(rk, why, sizeof(why));

	cr_assert_eq(err, 0, "%s: fatal producer error %s: %s", when, rd_kafka_err2name(err), why);
}

static void produce_seq(rd_kafka_t *rk, const char *topic, int parts, uint32_t i)
{
	uint32_t v[2] = { i % (uint32_t)parts, i / (uint32_t)parts };
	rd_kafka_resp_err_t err;

	for (;;) {
		err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION((int32_t)v[0]),
					RD_KAFKA_V_VALUE(v, sizeof(v)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
					RD_KAFKA_V_OPAQUE((void *)(uintptr_t)i), RD_KAFKA_V_END);
		if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			break;
		rd_kafka_poll(rk, 10);   /* serve delivery reports to make room */
	}
	if (err == RD_KAFKA_RESP_ERR__FATAL)
		assert_not_fatal(rk, "producev");
	cr_assert_eq(err, 0, "producev: %s", rd_kafka_err2str(err));
}

/* Flush until nothing is left or timeout_s passed (then fail). */
static void flush_within(rd_kafka_t *rk, const struct dr_state *dr, double timeout_s)
{
	double end = now_s() + timeout_s;

	while (rd_kafka_outq_len(rk) > 0) {
		rd_kafka_flush(rk, 1000);
		assert_not_fatal(rk, "flush");
		cr_assert_lt(now_s(), end, "%d records still unacknowledged after %.0f s (%ld acked, %ld failed)",
			     rd_kafka_outq_len(rk), timeout_s, dr->ok, dr->failed);
	}
}

/* ---- reading back ---------------------------------------------------- */

struct part_check {
	int32_t partition;
	uint32_t expect;         /* records sent to this partition */
	uint8_t *seen;           /* seen[seq]: times read (saturates at 255) */
	int64_t max_seq;         /* highest seq read so far, -1 none */
	long records, dups, reordered, bad;
	char first_problem[200];
};

static void part_problem(struct part_check *c, const char *fmt, long a, long b)
{
	if (!c->first_problem[0])
		snprintf(c->first_problem, sizeof(c->first_problem), fmt, (long)c->partition, a, b);
}

static void part_record(struct part_check *c, const rd_kafka_message_t *m)
{
	uint32_t v[2];

	c->records++;
	if (m->len != sizeof(v)) {
		c->bad++;
		part_problem(c, "partition %ld: offset %ld: value of %ld bytes", (long)m->offset, (long)m->len);
		return;
	}
	memcpy(v, m->payload, sizeof(v));
	if ((int32_t)v[0] != c->partition || v[1] >= c->expect) {
		c->bad++;
		part_problem(c, "partition %ld: offset %ld: foreign record (partition field %ld)", (long)m->offset,
			     (long)v[0]);
		return;
	}
	if (c->seen[v[1]]) {
		c->dups++;
		part_problem(c, "partition %ld: offset %ld: duplicate of seq %ld", (long)m->offset, (long)v[1]);
	} else if ((int64_t)v[1] < c->max_seq) {
		c->reordered++;
		part_problem(c, "partition %ld: offset %ld: seq %ld after a higher one", (long)m->offset,
			     (long)v[1]);
	}
	if (c->seen[v[1]] < 255)
		c->seen[v[1]]++;
	if ((int64_t)v[1] > c->max_seq)
		c->max_seq = v[1];
}

/* Read partition c->partition of topic from the beginning to EOF. */
static void read_partition(rd_kafka_t *rk, const char *topic, struct part_check *c)
{
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
	static rd_kafka_message_t *msgs[10000];
	int done = 0;

	cr_assert_not_null(rkt);
	cr_assert_eq(rd_kafka_consume_start(rkt, c->partition, RD_KAFKA_OFFSET_BEGINNING), 0, "consume_start: %s",
		     rd_kafka_err2str(rd_kafka_last_error()));
	while (!done) {
		ssize_t n = rd_kafka_consume_batch(rkt, c->partition, 500, msgs, 10000);

		cr_assert_geq(n, 0, "consume_batch: %s", rd_kafka_err2str(rd_kafka_last_error()));
		for (ssize_t i = 0; i < n; i++) {
			rd_kafka_message_t *m = msgs[i];

			if (!done) {
				if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
					done = 1;
				else if (m->err)
					cr_assert_fail("consume %s [%d]: %s", topic, c->partition,
						       rd_kafka_message_errstr(m));
				else
					part_record(c, m);
			}
			rd_kafka_message_destroy(m);
		}
	}
	rd_kafka_consume_stop(rkt, c->partition);
	rd_kafka_topic_destroy(rkt);
}

/* Read every partition back into checks[parts] (allocated here). */
static struct part_check *read_back(const struct broker_proc *b, const char *bootstrap, const char *topic,
				    int parts, uint32_t records)
{
	const char *ckv[] = { "bootstrap.servers", bootstrap, "queued.min.messages", "200000", NULL };
	struct part_check *checks = calloc((size_t)parts, sizeof(*checks));
	rd_kafka_t *rk = harness_consumer(b, ckv);

	cr_assert_not_null(checks);
	for (int p = 0; p < parts; p++) {
		struct part_check *c = &checks[p];

		c->partition = p;
		c->expect = records / (uint32_t)parts + ((uint32_t)p < records % (uint32_t)parts);
		c->seen = calloc(c->expect, 1);
		c->max_seq = -1;
		cr_assert_not_null(c->seen);
		read_partition(rk, topic, c);
	}
	rd_kafka_destroy(rk);
	return checks;
}

static void free_checks(struct part_check *checks, int parts)
{
	for (int p = 0; p < parts; p++)
		free(checks[p].seen);
	free(checks);
}

/* ---- lost responses -------------------------------------------------- */

#define LR_PARTS   4
#define LR_RECORDS 1000000

struct lr_result {
	long read, dups, reordered, bad, missing, failed;
	char first_problem[200];
	char proxy_stats[1024];
	long dropped, cut;
	double produce_s;
};

/* Produce LR_RECORDS sequence-numbered records through a faultproxy that
 * drops drop_pct % of the Produce responses and cuts the connection on
 * cut_pct % of them, then read everything back. */
static void lost_responses_run(int idempotent, const char *drop_pct, const char *cut_pct, const char *topic,
			       struct lr_result *r)
{
	const char *seed = getenv("SLUICE_FAULT_SEED") ? getenv("SLUICE_FAULT_SEED") : "20240601";
	const char *proxy_args[] = { "--drop-pct", drop_pct, "--cut-pct", cut_pct, "--seed", seed, NULL };
	struct broker_proc b;
	struct proxy_proc px;
	struct dr_state dr = { 0 };
	struct part_check *checks;
	rd_kafka_t *rk;
	double t0;

	memset(r, 0, sizeof(*r));
	broker_launch_proxied(&b, &px, NULL, proxy_args);
	{
		/* a request whose response was dropped times out after
		 * socket.timeout.ms (librdkafka then closes the connection,
		 * socket.max.fails=1, and retries everything in flight): keep it
		 * short, the broker answers in milliseconds here */
		const char *pkv[] = { "bootstrap.servers", px.bootstrap,
				      "enable.idempotence", idempotent ? "true" : "false",
				      "acks", "all",
				      "max.in.flight.requests.per.connection", "5",
				      "message.send.max.retries", "1000000",
				      "retry.backoff.ms", "10",
				      "socket.timeout.ms", "1000",
				      "request.timeout.ms", "1000",
				      "message.timeout.ms", "300000",
				      "reconnect.backoff.ms", "10",
				      "reconnect.backoff.max.ms", "100",
				      "linger.ms", "5",
				      "batch.num.messages", "2000",
				      "queue.buffering.max.messages", "500000",
				      "compression.codec", "none",
				      /* the errors of every cut and timeout are expected */
				      "log_level", getenv("SLUICE_RDK_DEBUG") ? "7" : "2",
				      NULL };

		dr.acked = calloc(LR_RECORDS, 1);
		cr_assert_not_null(dr.acked);
		rk = harness_producer(&b, pkv, dr_cb, &dr);
	}
	harness_create_topic(rk, topic, LR_PARTS);
	t0 = now_s();
	for (uint32_t i = 0; i < LR_RECORDS; i++) {
		produce_seq(rk, topic, LR_PARTS, i);
		if ((i & 0xffff) == 0) {
			rd_kafka_poll(rk, 0);
			assert_not_fatal(rk, "produce");
		}
	}
	flush_within(rk, &dr, 240);
	r->produce_s = now_s() - t0;
	r->failed = dr.failed;
	cr_assert_eq(dr.failed, 0, "%ld deliveries failed, first: %s", dr.failed, rd_kafka_err2str(dr.first_err));
	cr_assert_eq(dr.ok, LR_RECORDS);
	rd_kafka_destroy(rk);

	proxy_faults(&px, 0);
	checks = read_back(&b, px.bootstrap, topic, LR_PARTS, LR_RECORDS);
	for (int p = 0; p < LR_PARTS; p++) {
		struct part_check *c = &checks[p];

		r->read += c->records;
		r->dups += c->dups;
		r->reordered += c->reordered;
		r->bad += c->bad;
		for (uint32_t s = 0; s < c->expect; s++)
			r->missing += !c->seen[s];
		if (!r->first_problem[0] && c->first_problem[0])
			snprintf(r->first_problem, sizeof(r->first_problem), "%s", c->first_problem);
	}
	free_checks(checks, LR_PARTS);
	proxy_stop(&px);
	snprintf(r->proxy_stats, sizeof(r->proxy_stats), "%s", px.stats);
	r->dropped = proxy_stat(&px, "dropped");
	r->cut = proxy_stat(&px, "cut");
	fprintf(stderr,
		"idempotence: %s: %d records produced in %.1f s through the proxy (%ld responses dropped, %ld "
		"connections cut); read back %ld: %ld duplicates, %ld reordered, %ld missing, %ld foreign\n  %s",
		idempotent ? "enable.idempotence=true" : "enable.idempotence=false", LR_RECORDS, r->produce_s,
		r->dropped, r->cut, r->read, r->dups, r->reordered, r->missing, r->bad, r->proxy_stats);
	free(dr.acked);
	broker_cleanup(&b);
	/* the faults really happened (else this run proves nothing) */
	cr_assert_gt(r->dropped, 0, "the proxy dropped no Produce response");
	cr_assert_gt(r->cut, 0, "the proxy cut no connection");
}

Test(idempotence, lost_responses_idempotent_exactly_once, .timeout = 300)
{
	struct lr_result r;

	lost_responses_run(1, "2", "1", "lost-idem", &r);
	cr_assert_eq(r.dups + r.reordered + r.missing + r.bad, 0,
		     "idempotent producer: %ld duplicates, %ld reordered, %ld missing, %ld foreign of %d records; "
		     "first: %s",
		     r.dups, r.reordered, r.missing, r.bad, LR_RECORDS, r.first_problem);
	cr_assert_eq(r.read, LR_RECORDS);
}

/* The control: the same faults without idempotence must duplicate
 * records (a retried batch whose first attempt was appended). */
Test(idempotence, control_lost_responses_without_idempotence_duplicates, .timeout = 300)
{
	struct lr_result r;

	lost_responses_run(0, "2", "1", "lost-plain", &r);
	cr_assert_eq(r.missing + r.bad, 0, "%ld missing, %ld foreign; first: %s", r.missing, r.bad,
		     r.first_problem);
	cr_assert_gt(r.dups, 0, "no duplicates without idempotence: the faults did not bite (%s)", r.proxy_stats);
	cr_assert_eq(r.read, LR_RECORDS + r.dups);
}

/* ---- SIGKILL in the middle ------------------------------------------- */

#define SK_PARTS   4
#define SK_RECORDS 300000
#define SK_KILLS   3

struct sk_result {
	long read, dups, reordered, bad, lost, acked, failed;
	long dropped;
	char first_problem[200];
};

/* Produce SK_RECORDS sequence-numbered records through a faultproxy (no
 * faults, except just before each kill) and SIGKILL + restart the broker
 * SK_KILLS times in the middle while the producer keeps running. Before
 * each kill the proxy drops every Produce response for a moment, so that
 * each kill finds batches that were appended (and made durable) but never
 * acknowledged: the producer resends them to the restarted broker, whose
 * producer state must come back from the log to recognise them. */
static void sigkill_run(int idempotent, const char *topic, struct sk_result *r)
{
	const char *proxy_args[] = { "--drop-pct", "100", "--faults-off", NULL };
	struct broker_proc b;
	struct proxy_proc px;
	struct dr_state dr = { 0 };
	struct part_check *checks;
	int kills = 0;
	rd_kafka_t *rk;

	memset(r, 0, sizeof(*r));
	broker_launch_proxied(&b, &px, NULL, proxy_args);
	{
		const char *pkv[] = { "bootstrap.servers", px.bootstrap,
				      "enable.idempotence", idempotent ? "true" : "false",
				      "acks", "all",
				      "max.in.flight.requests.per.connection", "5",
				      "message.send.max.retries", "1000000",
				      "message.timeout.ms", "300000",
				      "reconnect.backoff.ms", "10",
				      "reconnect.backoff.max.ms", "100",
				      "retry.backoff.ms", "10",
				      "linger.ms", "5",
				      "batch.num.messages", "2000",
				      "queue.buffering.max.messages", "500000",
				      "compression.codec", "none",
				      /* the errors of every reconnect are expected */
				      "log_level", getenv("SLUICE_RDK_DEBUG") ? "7" : "2",
				      NULL };

		dr.acked = calloc(SK_RECORDS, 1);
		cr_assert_not_null(dr.acked);
		rk = harness_producer(&b, pkv, dr_cb, &dr);
	}
	harness_create_topic(rk, topic, SK_PARTS);
	for (uint32_t i = 0; i < SK_RECORDS; i++) {
		produce_seq(rk, topic, SK_PARTS, i);
		if ((i & 0x3fff) == 0) {
			rd_kafka_poll(rk, 0);
			assert_not_fatal(rk, "produce");
		}
		if (kills < SK_KILLS && i == (uint32_t)((uint64_t)SK_RECORDS * (kills + 1) / (SK_KILLS + 1))) {
			/* wait until the producer is well into what was queued,
			 * lose the responses for a moment, then kill the broker
			 * with requests in flight; the producer keeps running */
			long want = (long)i * 3 / 4, unacked;
			double end = now_s() + 60;

			while (dr.ok < want) {
				rd_kafka_poll(rk, 1);
				assert_not_fatal(rk, "before the kill");
				cr_assert_lt(now_s(), end, "no progress before kill %d: %ld acked", kills + 1, dr.ok);
			}
			proxy_faults(&px, 1);
			usleep(300 * 1000);   /* a window of appended, unacknowledged batches */
			broker_kill(&b);
			proxy_faults(&px, 0);
			unacked = (long)i + 1 - dr.ok - dr.failed;
			broker_wait_port_free(&b, 5000);
			broker_start(&b);
			kills++;
			fprintf(stderr, "idempotence: SIGKILL %d at record %u with %ld unacknowledged\n", kills, i,
				unacked);
		}
	}
	flush_within(rk, &dr, 240);
	assert_not_fatal(rk, "after flush");
	rd_kafka_destroy(rk);
	r->acked = dr.ok;
	r->failed = dr.failed;

	checks = read_back(&b, px.bootstrap, topic, SK_PARTS, SK_RECORDS);
	for (int p = 0; p < SK_PARTS; p++) {
		struct part_check *c = &checks[p];

		r->read += c->records;
		r->dups += c->dups;
		r->reordered += c->reordered;
		r->bad += c->bad;
		for (uint32_t s = 0; s < c->expect; s++) {
			uint32_t i = s * SK_PARTS + (uint32_t)p;

			if (dr.acked[i] && !c->seen[s] && !r->lost++)
				snprintf(r->first_problem, sizeof(r->first_problem),
					 "partition %d seq %u (record %u) acknowledged, not read", p, s, i);
		}
		if (!r->first_problem[0] && c->first_problem[0])
			snprintf(r->first_problem, sizeof(r->first_problem), "%s", c->first_problem);
	}
	free_checks(checks, SK_PARTS);
	proxy_stop(&px);
	r->dropped = proxy_stat(&px, "dropped");
	fprintf(stderr,
		"idempotence: SIGKILL run, %s: %d records, %d kills (%ld responses dropped just before them), %ld "
		"acked, %ld failed (first %s); read back %ld: %ld duplicates, %ld reordered, %ld acknowledged but "
		"lost, %ld foreign\n",
		idempotent ? "enable.idempotence=true" : "enable.idempotence=false", SK_RECORDS, kills, r->dropped,
		dr.ok, dr.failed, dr.failed ? rd_kafka_err2str(dr.first_err) : "-", r->read, r->dups, r->reordered,
		r->lost, r->bad);
	free(dr.acked);
	broker_cleanup(&b);
	cr_assert_eq(kills, SK_KILLS);
	cr_assert_gt(r->dropped, 0, "no response was lost before the kills: the resend path was not exercised");
}

Test(idempotence, sigkill_mid_idempotent_run_no_duplicates_no_loss, .timeout = 300)
{
	struct sk_result r;

	sigkill_run(1, "killed-idem", &r);
	cr_assert_eq(r.dups + r.reordered + r.lost + r.bad, 0,
		     "%ld duplicates, %ld reordered, %ld acknowledged but lost, %ld foreign; first: %s", r.dups,
		     r.reordered, r.lost, r.bad, r.first_problem);
	cr_assert_eq(r.failed, 0, "%ld deliveries failed", r.failed);
	cr_assert_eq(r.read, SK_RECORDS);
}

/* The control: the same kills without idempotence duplicate the batches
 * whose responses were lost (so the test above can fail). */
Test(idempotence, control_sigkill_without_idempotence_duplicates, .timeout = 300)
{
	struct sk_result r;

	sigkill_run(0, "killed-plain", &r);
	cr_assert_eq(r.lost + r.bad, 0, "%ld acknowledged but lost, %ld foreign; first: %s", r.lost, r.bad,
		     r.first_problem);
	cr_assert_gt(r.dups, 0, "no duplicates without idempotence: the kills did not catch a resent batch");
}

/* ---- a restarted broker before its metadata is loaded ----------------- */

/* Found by sigkill_mid_idempotent_run_no_duplicates_no_loss (one run in
 * three): librdkafka reconnects within milliseconds of a restart, and
 * sluiced accepted connections (its shards listen) before the control
 * thread had replayed the metadata log, so requests in that window saw no
 * topics: Produce got UNKNOWN_TOPIC_OR_PARTITION, and a Metadata answer of
 * UNKNOWN_TOPIC_OR_PARTITION made librdkafka drop the topic and fail every
 * queued record (producev: Local: Unknown topic). A connection that a
 * restarted broker accepts must see the topics it had. */

struct window_probe {
	int port;
	int attempts;
	int sent;                /* the request went out on an accepted connection */
	int16_t err;             /* the topic's error in the Metadata response */
	int32_t partitions;
	int problem;             /* -errno of a socket failure after connecting */
	double t_connected;
};

/* Metadata v4 for "window", allow_auto_topic_creation=false; parse the
 * topic's error and partition count. */
static int window_metadata(int fd, struct window_probe *w)
{
	struct rawbuf r;
	struct rawcur c;
	uint8_t *resp;
	size_t len;
	int32_t n;
	int rc;

	rb_init(&r);
	rb_request(&r, 3, 4, 99);
	rb_i32(&r, 1);
	rb_str(&r, "window");
	rb_i8(&r, 0);
	rb_finish(&r);
	rc = raw_send(fd, r.p, r.len);
	rb_free(&r);
	if (rc < 0)
		return rc;
	w->sent = 1;
	if ((rc = raw_recv_frame(fd, &resp, &len)) < 0)
		return rc;
	c = (struct rawcur){ resp, resp + len, 0 };
	rc_i32(&c);                                /* correlation id */
	rc_i32(&c);                                /* throttle */
	n = rc_i32(&c);                            /* brokers */
	for (int32_t i = 0; i < n && !c.bad; i++) {
		rc_i32(&c);
		rc_skip_str(&c);
		rc_i32(&c);
		rc_skip_str(&c);
	}
	rc_skip_str(&c);                           /* cluster id */
	rc_i32(&c);                                /* controller */
	n = rc_i32(&c);
	if (n != 1)
		c.bad = 1;
	w->err = rc_i16(&c);
	rc_skip_str(&c);
	rc_i8(&c);
	w->partitions = rc_i32(&c);
	free(resp);
	return c.bad ? -EPROTO : 0;
}

static void *window_probe_run(void *arg)
{
	struct window_probe *w = arg;
	struct broker_proc fake = { .port = w->port };
	double end = now_s() + 20;

	/* connect as fast as a reconnecting client does: the first accepted
	 * connection asks for the topic at once */
	while (now_s() < end) {
		int fd = raw_connect(&fake);

		w->attempts++;
		if (fd < 0) {
			usleep(200);
			continue;
		}
		w->t_connected = now_s();
		w->problem = window_metadata(fd, w);
		close(fd);
		return NULL;
	}
	w->problem = -ETIMEDOUT;
	return NULL;
}

Test(idempotence, restarted_broker_answers_with_its_topics_from_the_first_connection, .timeout = 60)
{
	struct broker_proc b;
	struct window_probe w = { 0 };
	pthread_t th;
	double t_ready;

	broker_launch(&b, NULL);
	raw_create_topic(&b, "window");
	broker_kill(&b);
	broker_wait_port_free(&b, 5000);
	w.port = b.port;
	cr_assert_eq(pthread_create(&th, NULL, window_probe_run, &w), 0);
	broker_start(&b);
	t_ready = now_s();
	pthread_join(th, NULL);
	cr_assert_eq(w.problem, 0, "probe: %s", strerror(-w.problem));
	cr_assert(w.sent);
	cr_assert(w.err == 0 && w.partitions == 1,
		  "Metadata v4 for the existing topic 'window' on a connection accepted %.1f ms %s the "
		  "'listening on' line: error %d, %d partitions (want error 0, 1 partition)",
		  1000 * (t_ready > w.t_connected ? t_ready - w.t_connected : w.t_connected - t_ready),
		  t_ready > w.t_connected ? "before" : "after", w.err, w.partitions);
	broker_cleanup(&b);
}
