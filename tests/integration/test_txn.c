/* tests/integration/test_txn.c — transactions (issue 6, /work/notes
 * txn-spec) with librdkafka 2.0.2 against a real build/sluiced:
 *
 *   1. consume-transform-produce exactly once: a copier process (consumer
 *      group, read_committed, manual offsets; transactional producer with
 *      send_offsets_to_transaction) copies sequence-numbered records from
 *      `in` to `out` and is SIGKILLed at random points (seeded, printed)
 *      and restarted with the same transactional.id until it is done. A
 *      read_committed reader of `out` sees every input record exactly
 *      once; a read_uncommitted reader sees the records of the aborted
 *      transactions too (one aborted on purpose, the rest those of the
 *      killed copiers), and the same exactly-once check reports them as
 *      duplicates there (the control: the check can fail);
 *   2. zombie fencing: a second producer with the same transactional.id
 *      fences the first, whose produce (same partition, new partition) or
 *      commit then fails fatally (fenced); only the new one's committed
 *      records are visible;
 *   3. the transaction timeout: a stalled transaction is aborted by the
 *      broker after transaction.timeout.ms, the last stable offset moves
 *      past it, and the late producer's commit fails (fenced);
 *   4. read_committed stops at the last stable offset: an open transaction
 *      hides the later non-transactional records of its partition until
 *      it commits or aborts, while read_uncommitted sees them at once;
 *   5. the broker SIGKILLed with transactions open and a commit in
 *      flight: committed transactions survive, each transaction is all or
 *      nothing, an abandoned one is aborted by the broker after restart.
 *
 * Each test starts its own broker (harness.h). Processes that the tests
 * SIGKILL (the copiers of 1, and the feeder that writes its input) are
 * forked before the test process makes any librdkafka handle, report into
 * shared memory, and never call Criterion. Waits are for conditions
 * (records seen, offsets moved) with deadlines; the only fixed waits are
 * the random kill points and the "nothing arrives for a while" checks.
 *
 * SLUICE_TXN_SEED repeats the copier kill points of test 1 (their timing
 * still varies); SLUICE_RDK_DEBUG turns on librdkafka debug logs.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tests/integration/harness.h"

static const char *const txn_broker_args[] = {
	"--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
	"--set", "group.initial.rebalance.delay.ms=0",
	"--set", "group.min.session.timeout.ms=1000",
	NULL
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

static const char *quiet_level(void)
{
	return getenv("SLUICE_RDK_DEBUG") ? "7" : "0";
}

#define LOAD(x)     __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

/* ---- librdkafka in the test process ---------------------------------- */

struct dr_count {
	long ok, failed;
	rd_kafka_resp_err_t first_err;
};

static void dr_count_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct dr_count *d = opaque;

	(void)rk;
	if (!d)
		return;
	if (m->err) {
		if (!d->failed++)
			d->first_err = m->err;
	} else {
		d->ok++;
	}
}

/* Fail the test on a transactional API error, naming it. */
static void txn_ok(rd_kafka_error_t *e, const char *what)
{
	char msg[600];

	if (!e)
		return;
	snprintf(msg, sizeof(msg), "%s (%s%s%s)", rd_kafka_error_string(e), rd_kafka_error_name(e),
		 rd_kafka_error_is_fatal(e) ? ", fatal" : "",
		 rd_kafka_error_txn_requires_abort(e) ? ", abortable" : "");
	rd_kafka_error_destroy(e);
	cr_assert_fail("%s: %s", what, msg);
}

static int fenced_code(rd_kafka_resp_err_t err)
{
	return err == RD_KAFKA_RESP_ERR__FENCED || err == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

/* A transactional producer (not yet initialised); kv may add settings
 * (NULL-ended pairs, applied after the defaults). */
static rd_kafka_t *txn_producer(const struct broker_proc *b, const char *txnid, const char *const *kv,
				struct dr_count *dr)
{
	const char *base[] = { "transactional.id", txnid, "linger.ms", "5", "log_level", quiet_level(), NULL };
	rd_kafka_conf_t *conf = harness_conf(b, base);
	char err[512];
	rd_kafka_t *rk;

	for (int i = 0; kv && kv[i]; i += 2)
		cr_assert_eq(rd_kafka_conf_set(conf, kv[i], kv[i + 1], err, sizeof(err)), RD_KAFKA_CONF_OK, "%s=%s: %s",
			     kv[i], kv[i + 1], err);
	rd_kafka_conf_set_dr_msg_cb(conf, dr_count_cb);
	rd_kafka_conf_set_opaque(conf, dr);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	cr_assert_not_null(rk, "rd_kafka_new(transactional producer %s): %s", txnid, err);
	return rk;
}

static rd_kafka_t *plain_producer(const struct broker_proc *b, struct dr_count *dr)
{
	const char *kv[] = { "enable.idempotence", "true", "linger.ms", "5", NULL };

	return harness_producer(b, kv, dr_count_cb, dr);
}

/* A simple (no group) consumer with the given isolation.level. */
static rd_kafka_t *iso_consumer(const struct broker_proc *b, int committed)
{
	const char *kv[] = { "isolation.level", committed ? "read_committed" : "read_uncommitted",
			     "fetch.wait.max.ms", "50", "fetch.error.backoff.ms", "50",
			     "queued.min.messages", "100000", NULL };

	return harness_consumer(b, kv);
}

static rd_kafka_resp_err_t produce_raw(rd_kafka_t *rk, const char *topic, int32_t part, const void *v, size_t n)
{
	rd_kafka_resp_err_t err;

	for (;;) {
		err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
					RD_KAFKA_V_VALUE((void *)v, n), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
					RD_KAFKA_V_END);
		if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			return err;
		rd_kafka_poll(rk, 10);
	}
}

static void produce_str(rd_kafka_t *rk, const char *topic, int32_t part, const char *v)
{
	rd_kafka_resp_err_t err = produce_raw(rk, topic, part, v, strlen(v));

	cr_assert_eq(err, 0, "producev %s [%d] '%s': %s", topic, part, v, rd_kafka_err2str(err));
}

/* Wait until dr has want successful deliveries (a failure or the deadline
 * fails the test). */
static void delivered(rd_kafka_t *rk, const struct dr_count *dr, long want, int timeout_ms, const char *what)
{
	int64_t end = now_ms() + timeout_ms;

	while (dr->ok < want) {
		rd_kafka_poll(rk, 20);
		cr_assert_eq(dr->failed, 0, "%s: a delivery failed: %s", what, rd_kafka_err2str(dr->first_err));
		cr_assert_lt(now_ms(), end, "%s: %ld of %ld delivered after %d ms", what, dr->ok, want, timeout_ms);
	}
}

/* (low, high) watermarks through rk: with a read_committed consumer the
 * high one is the last stable offset (ListOffsets with IsolationLevel 1). */
static int64_t high_mark(rd_kafka_t *rk, const char *topic, int32_t part)
{
	int64_t lo = -1, hi = -1;
	rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(rk, topic, part, &lo, &hi, 10000);

	cr_assert_eq(err, 0, "query_watermark_offsets %s [%d]: %s", topic, part, rd_kafka_err2str(err));
	return hi;
}

/* Wait until every partition's last stable offset (rc: a read_committed
 * consumer) equals its high watermark (ru: read_uncommitted), i.e. no
 * transaction is open there. */
static void wait_lso_caught_up(rd_kafka_t *rc, rd_kafka_t *ru, const char *topic, int parts, int timeout_ms,
			       const char *what)
{
	int64_t end = now_ms() + timeout_ms;

	for (;;) {
		int stuck = -1;
		int64_t lso = 0, hw = 0;

		for (int p = 0; p < parts && stuck < 0; p++) {
			lso = high_mark(rc, topic, p);
			hw = high_mark(ru, topic, p);
			if (lso != hw)
				stuck = p;
		}
		if (stuck < 0)
			return;
		cr_assert_lt(now_ms(), end,
			     "%s: %s [%d]: last stable offset %lld, high watermark %lld after %d ms: a transaction "
			     "there was never ended",
			     what, topic, stuck, (long long)lso, (long long)hw, timeout_ms);
		sleep_ms(50);
	}
}

/* Read partition part of topic from the beginning to EOF (for
 * read_committed: to the last stable offset) with a fresh consumer of the
 * given isolation, calling fn on each record. */
static void read_partition(const struct broker_proc *b, int committed, const char *topic, int32_t part,
			   void (*fn)(void *ctx, const rd_kafka_message_t *m), void *ctx)
{
	rd_kafka_t *rk = iso_consumer(b, committed);
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
	static rd_kafka_message_t *msgs[10000];
	int64_t end = now_ms() + 30000;
	int done = 0;

	cr_assert_not_null(rkt);
	cr_assert_eq(rd_kafka_consume_start(rkt, part, RD_KAFKA_OFFSET_BEGINNING), 0, "consume_start: %s",
		     rd_kafka_err2str(rd_kafka_last_error()));
	while (!done) {
		ssize_t n = rd_kafka_consume_batch(rkt, part, 200, msgs, 10000);

		cr_assert_geq(n, 0, "consume_batch: %s", rd_kafka_err2str(rd_kafka_last_error()));
		for (ssize_t i = 0; i < n; i++) {
			rd_kafka_message_t *m = msgs[i];

			if (!done) {
				if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
					done = 1;
				else if (m->err)
					cr_assert_fail("consume %s [%d] (%s): %s", topic, part,
						       committed ? "read_committed" : "read_uncommitted",
						       rd_kafka_message_errstr(m));
				else
					fn(ctx, m);
			}
			rd_kafka_message_destroy(m);
		}
		cr_assert_lt(now_ms(), end, "no EOF reading %s [%d] after 30 s", topic, part);
	}
	rd_kafka_consume_stop(rkt, part);
	rd_kafka_topic_destroy(rkt);
	rd_kafka_destroy(rk);
}

/* String records of one partition, in offset order. */
#define STRS_MAX 64

struct strs {
	int n;
	char v[STRS_MAX][32];
	int64_t off[STRS_MAX];
};

static void strs_add(void *ctx, const rd_kafka_message_t *m)
{
	struct strs *s = ctx;
	size_t len = m->len < 31 ? m->len : 31;

	cr_assert_lt(s->n, STRS_MAX, "more records than expected");
	memcpy(s->v[s->n], m->payload, len);
	s->v[s->n][len] = 0;
	s->off[s->n] = m->offset;
	s->n++;
}

static void strs_join(const struct strs *s, char *out, size_t cap)
{
	size_t k = 0;

	out[0] = 0;
	for (int i = 0; i < s->n && k + 1 < cap; i++)
		k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? " " : "", s->v[i]);
}

/* The records of s joined by spaces must be exactly want. */
static void strs_expect(const struct strs *s, const char *want, const char *what)
{
	char got[2048];

	strs_join(s, got, sizeof(got));
	cr_assert_str_eq(got, want, "%s: read '%s', want '%s'", what, got, want);
}

static void read_strs(const struct broker_proc *b, int committed, const char *topic, int32_t part,
		      struct strs *s)
{
	memset(s, 0, sizeof(*s));
	read_partition(b, committed, topic, part, strs_add, s);
}

/* ---- 2. zombie fencing ------------------------------------------------- */

enum zombie_act {
	ZOMBIE_PRODUCE_SAME,     /* produce again to the partition it had added */
	ZOMBIE_PRODUCE_NEW,      /* produce to a new partition (AddPartitionsToTxn) */
	ZOMBIE_COMMIT,           /* commit straight away (EndTxn) */
};

static void zombie_run(enum zombie_act act, const char *txnid)
{
	struct broker_proc b;
	struct dr_count dra = { 0 }, drb = { 0 }, drp = { 0 };
	rd_kafka_t *a, *bb, *adm;
	rd_kafka_error_t *e;
	rd_kafka_resp_err_t fatal = 0;
	struct strs s0, s1;
	char why[512] = "";

	broker_launch(&b, txn_broker_args);
	adm = plain_producer(&b, &drp);
	harness_create_topic(adm, "fence", 2);

	/* A: an ongoing transaction with records in partition 0 */
	a = txn_producer(&b, txnid, NULL, &dra);
	txn_ok(rd_kafka_init_transactions(a, 30000), "A: init_transactions");
	txn_ok(rd_kafka_begin_transaction(a), "A: begin_transaction");
	produce_str(a, "fence", 0, "A0");
	produce_str(a, "fence", 0, "A1");
	produce_str(a, "fence", 0, "A2");
	delivered(a, &dra, 3, 15000, "A's records");

	/* B: the same transactional.id; its InitProducerId aborts A's
	 * transaction and bumps the epoch */
	bb = txn_producer(&b, txnid, NULL, &drb);
	txn_ok(rd_kafka_init_transactions(bb, 30000), "B: init_transactions (fences A)");

	/* A, the zombie, tries to go on */
	if (act == ZOMBIE_COMMIT) {
		e = rd_kafka_commit_transaction(a, 15000);
		cr_assert_not_null(e, "the fenced producer A committed its transaction");
		cr_log_info("A's commit: %s (%s)", rd_kafka_error_string(e), rd_kafka_error_name(e));
		cr_assert(rd_kafka_error_is_fatal(e) && fenced_code(rd_kafka_error_code(e)),
			  "A's commit after B's init_transactions: %s (%s%s), want a fatal fenced error",
			  rd_kafka_error_string(e), rd_kafka_error_name(e), rd_kafka_error_is_fatal(e) ? ", fatal" : "");
		rd_kafka_error_destroy(e);
	} else {
		int32_t part = act == ZOMBIE_PRODUCE_SAME ? 0 : 1;
		rd_kafka_resp_err_t err = produce_raw(a, "fence", part, "A3", 2);
		int64_t end = now_ms() + 15000;

		/* the produce is refused (queued locally first, or refused at
		 * once if the fatal error is already known) */
		cr_assert(err == 0 || err == RD_KAFKA_RESP_ERR__FATAL, "A: producev: %s", rd_kafka_err2str(err));
		while (!(fatal = rd_kafka_fatal_error(a, why, sizeof(why))) && now_ms() < end)
			rd_kafka_poll(a, 20);
		cr_assert(fenced_code(fatal), "A's produce to partition %d after B's init_transactions: fatal error "
			  "'%s' (%s), want fenced; %ld delivered, %ld failed", part, rd_kafka_err2name(fatal), why,
			  dra.ok, dra.failed);
		fprintf(stderr, "txn: zombie: A's produce to partition %d after B's init_transactions: %s\n", part,
			why);
		/* which request refused it (librdkafka 2.0.2's wording): a new
		 * partition is refused by the coordinator (AddPartitionsToTxn;
		 * the Produce is never sent), a partition already in the
		 * transaction by the partition (Produce) */
		if (act == ZOMBIE_PRODUCE_NEW)
			cr_assert(strstr(why, "Failed to add partition"), "A was not refused at AddPartitionsToTxn: %s",
				  why);
		else
			cr_assert(strstr(why, "ProduceRequest"), "A was not refused at Produce: %s", why);
		rd_kafka_flush(a, 5000);
		cr_assert_eq(dra.ok, 3, "A3 was delivered after A was fenced");
		e = rd_kafka_commit_transaction(a, 15000);
		cr_assert_not_null(e, "the fenced producer A committed its transaction");
		cr_assert(rd_kafka_error_is_fatal(e), "A's commit after being fenced: %s, not fatal",
			  rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
	}

	/* B goes on normally */
	txn_ok(rd_kafka_begin_transaction(bb), "B: begin_transaction");
	produce_str(bb, "fence", 0, "B0");
	produce_str(bb, "fence", 0, "B1");
	produce_str(bb, "fence", 1, "B2");
	txn_ok(rd_kafka_commit_transaction(bb, 30000), "B: commit_transaction");
	rd_kafka_destroy(a);
	rd_kafka_destroy(bb);

	read_strs(&b, 1, "fence", 0, &s0);
	read_strs(&b, 1, "fence", 1, &s1);
	strs_expect(&s0, "B0 B1", "read_committed, partition 0");
	strs_expect(&s1, "B2", "read_committed, partition 1");
	/* the control: A's records are in the log (read_committed hid them) */
	read_strs(&b, 0, "fence", 0, &s0);
	read_strs(&b, 0, "fence", 1, &s1);
	strs_expect(&s0, "A0 A1 A2 B0 B1", "read_uncommitted, partition 0");
	strs_expect(&s1, "B2", "read_uncommitted, partition 1");
	rd_kafka_destroy(adm);
	broker_cleanup(&b);
}

Test(txn, zombie_produce_same_partition_is_fenced, .timeout = 60)
{
	zombie_run(ZOMBIE_PRODUCE_SAME, "z-same");
}

Test(txn, zombie_produce_new_partition_is_fenced, .timeout = 60)
{
	zombie_run(ZOMBIE_PRODUCE_NEW, "z-new");
}

Test(txn, zombie_commit_is_fenced, .timeout = 60)
{
	zombie_run(ZOMBIE_COMMIT, "z-commit");
}

/* ---- 3. transaction timeout -------------------------------------------- */

Test(txn, stalled_transaction_is_aborted_after_its_timeout, .timeout = 60)
{
	const char *kv[] = { "transaction.timeout.ms", "2000", "log_level", quiet_level(), NULL };
	struct broker_proc b;
	struct dr_count drs = { 0 }, drp = { 0 };
	rd_kafka_t *slow, *plain, *rc, *ru;
	rd_kafka_topic_t *rkt;
	rd_kafka_error_t *e;
	struct strs seen = { 0 }, all;
	int64_t t_begin, t_moved = 0, end, lso, hw;
	char got[2048];

	broker_launch(&b, txn_broker_args);
	plain = plain_producer(&b, &drp);
	harness_create_topic(plain, "stall", 1);
	slow = txn_producer(&b, "stalled", kv, &drs);
	txn_ok(rd_kafka_init_transactions(slow, 30000), "init_transactions");
	/* the producer knows the topic before the transaction begins (else
	 * its first record waits for librdkafka's 1 s metadata refresh), so
	 * that the broker's transaction starts right after t_begin */
	{
		rd_kafka_topic_t *t = rd_kafka_topic_new(slow, "stall", NULL);
		const struct rd_kafka_metadata *md;
		rd_kafka_resp_err_t err = rd_kafka_metadata(slow, 0, t, &md, 10000);

		cr_assert_eq(err, 0, "metadata: %s", rd_kafka_err2str(err));
		rd_kafka_metadata_destroy(md);
		rd_kafka_topic_destroy(t);
	}

	t_begin = now_ms();
	txn_ok(rd_kafka_begin_transaction(slow), "begin_transaction");
	for (int i = 0; i < 5; i++) {
		char v[16];

		snprintf(v, sizeof(v), "S%d", i);
		produce_str(slow, "stall", 0, v);
	}
	delivered(slow, &drs, 5, 10000, "the stalled transaction's records");
	/* after them, non-transactional records */
	produce_str(plain, "stall", 0, "N0");
	produce_str(plain, "stall", 0, "N1");
	produce_str(plain, "stall", 0, "N2");
	delivered(plain, &drp, 3, 10000, "the plain records");

	/* the producer stalls; a read_committed consumer waits for the plain
	 * records, which it gets only once the broker aborted the
	 * transaction (the last stable offset moves past it) */
	rc = iso_consumer(&b, 1);
	rkt = rd_kafka_topic_new(rc, "stall", NULL);
	cr_assert_eq(rd_kafka_consume_start(rkt, 0, RD_KAFKA_OFFSET_BEGINNING), 0);
	end = now_ms() + 20000;
	while (seen.n < 3) {
		rd_kafka_message_t *m = rd_kafka_consume(rkt, 0, 100);

		if (m && !m->err)
			strs_add(&seen, m);
		else if (m && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
			cr_assert_fail("consume: %s", rd_kafka_message_errstr(m));
		if (m)
			rd_kafka_message_destroy(m);
		cr_assert_lt(now_ms(), end,
			     "the stalled transaction (transaction.timeout.ms=2000, cleanup every 200 ms) was not "
			     "aborted within 20 s: read_committed got %d records, last stable offset %lld",
			     seen.n, (long long)high_mark(rc, "stall", 0));
	}
	t_moved = now_ms();
	rd_kafka_consume_stop(rkt, 0);
	rd_kafka_topic_destroy(rkt);
	strs_join(&seen, got, sizeof(got));
	fprintf(stderr, "txn: timeout: the stalled transaction was aborted %lld ms after begin_transaction "
		"(transaction.timeout.ms=2000); read_committed: %s\n", (long long)(t_moved - t_begin), got);
	strs_expect(&seen, "N0 N1 N2", "read_committed after the timeout");
	/* not aborted before its time */
	cr_assert_geq(t_moved - t_begin, 1900, "the transaction was aborted %lld ms after it began (timeout 2000 ms)",
		      (long long)(t_moved - t_begin));

	/* the last stable offset is the high watermark again */
	ru = iso_consumer(&b, 0);
	lso = high_mark(rc, "stall", 0);
	hw = high_mark(ru, "stall", 0);
	cr_assert_eq(lso, hw, "last stable offset %lld, high watermark %lld after the abort", (long long)lso,
		     (long long)hw);
	cr_assert_geq(hw, 9, "high watermark %lld: 5 + 3 records and the abort marker", (long long)hw);

	/* the late producer cannot commit */
	e = rd_kafka_commit_transaction(slow, 15000);
	cr_assert_not_null(e, "the stalled producer committed a transaction the broker had aborted");
	fprintf(stderr, "txn: timeout: the late commit failed: %s (%s%s)\n", rd_kafka_error_string(e),
		rd_kafka_error_name(e), rd_kafka_error_is_fatal(e) ? ", fatal" : "");
	cr_assert(rd_kafka_error_is_fatal(e) && fenced_code(rd_kafka_error_code(e)),
		  "the late commit: %s (%s), want fatal fenced (the abort bumped the epoch)", rd_kafka_error_string(e),
		  rd_kafka_error_name(e));
	rd_kafka_error_destroy(e);

	/* after all that, still nothing of the transaction is visible; the
	 * control: read_uncommitted has its records */
	read_strs(&b, 1, "stall", 0, &all);
	strs_expect(&all, "N0 N1 N2", "read_committed after the late commit");
	read_strs(&b, 0, "stall", 0, &all);
	strs_expect(&all, "S0 S1 S2 S3 S4 N0 N1 N2", "read_uncommitted");

	rd_kafka_destroy(slow);
	rd_kafka_destroy(plain);
	rd_kafka_destroy(rc);
	rd_kafka_destroy(ru);
	broker_cleanup(&b);
}

/* ---- 4. read_committed stops at the last stable offset ----------------- */

/* Take what rkt (partition 0) delivers within ms into s (records only). */
static void take_for(rd_kafka_topic_t *rkt, struct strs *s, int ms)
{
	int64_t end = now_ms() + ms;

	while (now_ms() < end) {
		rd_kafka_message_t *m = rd_kafka_consume(rkt, 0, 50);

		if (!m)
			continue;
		if (!m->err)
			strs_add(s, m);
		else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
			cr_assert_fail("consume: %s", rd_kafka_message_errstr(m));
		rd_kafka_message_destroy(m);
	}
}

/* Take from rkt until s holds want records (deadline ms). */
static void take_until(rd_kafka_topic_t *rkt, struct strs *s, int want, int ms, const char *what)
{
	int64_t end = now_ms() + ms;

	while (s->n < want) {
		rd_kafka_message_t *m = rd_kafka_consume(rkt, 0, 50);

		if (m && !m->err)
			strs_add(s, m);
		else if (m && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
			cr_assert_fail("consume: %s", rd_kafka_message_errstr(m));
		if (m)
			rd_kafka_message_destroy(m);
		cr_assert_lt(now_ms(), end, "%s: %d of %d records after %d ms", what, s->n, want, ms);
	}
}

static void lso_run(int commit)
{
	struct broker_proc b;
	struct dr_count drt = { 0 }, drp = { 0 };
	rd_kafka_t *t, *plain, *rc, *ru;
	rd_kafka_topic_t *rct, *rut;
	struct strs c = { 0 }, u = { 0 }, all;
	int64_t lso, hw;
	const char *topic = commit ? "lso-commit" : "lso-abort";

	broker_launch(&b, txn_broker_args);
	plain = plain_producer(&b, &drp);
	harness_create_topic(plain, topic, 1);
	produce_str(plain, topic, 0, "P0");
	produce_str(plain, topic, 0, "P1");
	delivered(plain, &drp, 2, 10000, "P0 P1");               /* offsets 0, 1 */
	t = txn_producer(&b, commit ? "lso-c" : "lso-a", NULL, &drt);
	txn_ok(rd_kafka_init_transactions(t, 30000), "init_transactions");
	txn_ok(rd_kafka_begin_transaction(t), "begin_transaction");
	for (int i = 0; i < 5; i++) {
		char v[16];

		snprintf(v, sizeof(v), "T%d", i);
		produce_str(t, topic, 0, v);
	}
	delivered(t, &drt, 5, 10000, "the transaction's records");   /* 2..6 */
	produce_str(plain, topic, 0, "Q0");
	produce_str(plain, topic, 0, "Q1");
	produce_str(plain, topic, 0, "Q2");
	delivered(plain, &drp, 5, 10000, "Q0 Q1 Q2");            /* 7..9 */

	rc = iso_consumer(&b, 1);
	ru = iso_consumer(&b, 0);
	lso = high_mark(rc, topic, 0);
	hw = high_mark(ru, topic, 0);
	cr_assert_eq(hw, 10, "high watermark %lld, want 10", (long long)hw);
	cr_assert_eq(lso, 2, "ListOffsets latest, read_committed, with a transaction open from offset 2: %lld "
		     "(want the last stable offset 2)", (long long)lso);

	rut = rd_kafka_topic_new(ru, topic, NULL);
	rct = rd_kafka_topic_new(rc, topic, NULL);
	cr_assert_eq(rd_kafka_consume_start(rut, 0, RD_KAFKA_OFFSET_BEGINNING), 0);
	cr_assert_eq(rd_kafka_consume_start(rct, 0, RD_KAFKA_OFFSET_BEGINNING), 0);
	/* read_uncommitted: everything at once */
	take_until(rut, &u, 10, 10000, "read_uncommitted with the transaction open");
	strs_expect(&u, "P0 P1 T0 T1 T2 T3 T4 Q0 Q1 Q2", "read_uncommitted with the transaction open");
	/* read_committed: what is below the last stable offset, then nothing
	 * while the transaction stays open */
	take_until(rct, &c, 2, 10000, "read_committed with the transaction open");
	take_for(rct, &c, 1500);
	strs_expect(&c, "P0 P1", "read_committed with the transaction open (1.5 s)");
	cr_assert_eq(high_mark(rc, topic, 0), 2, "the last stable offset moved with the transaction open");

	if (commit)
		txn_ok(rd_kafka_commit_transaction(t, 30000), "commit_transaction");
	else
		txn_ok(rd_kafka_abort_transaction(t, 30000), "abort_transaction");
	take_until(rct, &c, commit ? 10 : 5, 10000, "read_committed after the transaction ended");
	take_for(rct, &c, 300);
	strs_expect(&c, commit ? "P0 P1 T0 T1 T2 T3 T4 Q0 Q1 Q2" : "P0 P1 Q0 Q1 Q2",
		    commit ? "read_committed after the commit" : "read_committed after the abort");
	lso = high_mark(rc, topic, 0);
	hw = high_mark(ru, topic, 0);
	cr_assert_eq(hw, 11, "high watermark %lld after the marker, want 11", (long long)hw);
	cr_assert_eq(lso, 11, "last stable offset %lld after the transaction ended, want 11", (long long)lso);
	/* the marker took offset 10 and is not delivered as a record; the
	 * offsets of what read_committed delivered are those written */
	cr_assert_eq(c.off[c.n - 1], 9, "the last record read_committed delivered is at offset %lld, want 9",
		     (long long)c.off[c.n - 1]);
	rd_kafka_consume_stop(rct, 0);
	rd_kafka_consume_stop(rut, 0);
	rd_kafka_topic_destroy(rct);
	rd_kafka_topic_destroy(rut);

	/* a fresh read_committed reader agrees */
	read_strs(&b, 1, topic, 0, &all);
	strs_expect(&all, commit ? "P0 P1 T0 T1 T2 T3 T4 Q0 Q1 Q2" : "P0 P1 Q0 Q1 Q2", "a fresh read_committed reader");
	rd_kafka_destroy(t);
	rd_kafka_destroy(plain);
	rd_kafka_destroy(rc);
	rd_kafka_destroy(ru);
	broker_cleanup(&b);
}

Test(txn, read_committed_stops_at_lso_until_commit, .timeout = 60)
{
	lso_run(1);
}

Test(txn, read_committed_stops_at_lso_until_abort, .timeout = 60)
{
	lso_run(0);
}

/* ---- 5. broker SIGKILL with transactions open ---------------------------- */

#define K5_TOPIC   "k5"
#define K5_PARTS   4
#define K5_PER_TXN 40
#define K5_TXNS    20
#define K5_ORPHAN  K5_TXNS       /* the abandoned producer's "transaction number" */
#define K5_MAGIC   0x4b355458u

enum k5_outcome { K5_NONE, K5_COMMITTED, K5_ABORTED, K5_UNKNOWN };

struct k5_rec {
	uint32_t magic, txn, idx, pad;
};

static void k5_produce(rd_kafka_t *rk, uint32_t txn, int n)
{
	for (int i = 0; i < n; i++) {
		struct k5_rec r = { K5_MAGIC, txn, (uint32_t)i, 0 };
		rd_kafka_resp_err_t err = produce_raw(rk, K5_TOPIC, i % K5_PARTS, &r, sizeof(r));

		cr_assert_eq(err, 0, "producev (txn %u): %s", txn, rd_kafka_err2str(err));
	}
}

struct k5_commit {
	rd_kafka_t *rk;
	rd_kafka_error_t *e;
};

static void *k5_commit_thread(void *arg)
{
	struct k5_commit *c = arg;

	c->e = rd_kafka_commit_transaction(c->rk, 60000);
	return NULL;
}

/* The end of a commit that a broker kill may have interrupted (e: its
 * error). Abortable: abort; fatal: a new producer instance (its
 * InitProducerId ends whatever was open). Returns the outcome the client
 * knows for sure. */
static enum k5_outcome k5_settle(rd_kafka_t **rk, rd_kafka_error_t *e, const struct broker_proc *b,
				 struct dr_count *dr, uint32_t txn)
{
	enum k5_outcome o;

	for (int retry = 0; e && rd_kafka_error_is_retriable(e) && retry < 5; retry++) {
		fprintf(stderr, "txn: sigkill: commit of txn %u: %s (retriable): again\n", txn,
			rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		e = rd_kafka_commit_transaction(*rk, 60000);
	}
	if (!e)
		return K5_COMMITTED;
	fprintf(stderr, "txn: sigkill: commit of txn %u failed: %s (%s%s%s)\n", txn, rd_kafka_error_string(e),
		rd_kafka_error_name(e), rd_kafka_error_is_fatal(e) ? ", fatal" : "",
		rd_kafka_error_txn_requires_abort(e) ? ", abortable" : "");
	o = K5_UNKNOWN;
	if (rd_kafka_error_txn_requires_abort(e)) {
		rd_kafka_error_t *ae = rd_kafka_abort_transaction(*rk, 60000);

		if (!ae) {
			o = K5_ABORTED;
		} else {
			/* e.g. an abort that needs an epoch bump (KIP-360,
			 * InitProducerId v3+) the broker cannot give: a new
			 * instance instead; the data decides */
			fprintf(stderr, "txn: sigkill: abort of txn %u failed too: %s (%s%s)\n", txn,
				rd_kafka_error_string(ae), rd_kafka_error_name(ae),
				rd_kafka_error_is_fatal(ae) ? ", fatal" : "");
			cr_assert(rd_kafka_error_is_fatal(ae), "abort of txn %u: %s, not fatal", txn,
				  rd_kafka_error_string(ae));
			rd_kafka_error_destroy(ae);
		}
	} else {
		cr_assert(rd_kafka_error_is_fatal(e), "commit of txn %u: %s: neither retriable, abortable nor fatal",
			  txn, rd_kafka_error_string(e));
	}
	if (o == K5_UNKNOWN) {
		rd_kafka_destroy(*rk);
		*rk = txn_producer(b, "k5-main", NULL, dr);
		txn_ok(rd_kafka_init_transactions(*rk, 60000), "init_transactions of the new instance");
	}
	rd_kafka_error_destroy(e);
	return o;
}

static void k5_txn(rd_kafka_t *rk, uint32_t txn)
{
	char what[64];

	txn_ok(rd_kafka_begin_transaction(rk), "begin_transaction");
	k5_produce(rk, txn, K5_PER_TXN);
	snprintf(what, sizeof(what), "commit of txn %u", txn);
	txn_ok(rd_kafka_commit_transaction(rk, 60000), what);
}

struct k5_tally {
	long count[K5_TXNS + 1];
	uint8_t seen[K5_TXNS + 1][K5_PER_TXN];
	long dups, bad;
};

static void k5_add(void *ctx, const rd_kafka_message_t *m)
{
	struct k5_tally *t = ctx;
	struct k5_rec r;

	if (m->len != sizeof(r)) {
		t->bad++;
		return;
	}
	memcpy(&r, m->payload, sizeof(r));
	if (r.magic != K5_MAGIC || r.txn > K5_ORPHAN || r.idx >= K5_PER_TXN ||
	    (int32_t)(r.idx % K5_PARTS) != m->partition) {
		t->bad++;
		return;
	}
	t->count[r.txn]++;
	if (t->seen[r.txn][r.idx]++)
		t->dups++;
}

Test(txn, broker_sigkill_keeps_committed_and_ends_open_transactions, .timeout = 120)
{
	const char *okv[] = { "transaction.timeout.ms", "3000", "log_level", quiet_level(), NULL };
	struct broker_proc b;
	struct dr_count drm = { 0 }, dro = { 0 }, drp = { 0 };
	enum k5_outcome out[K5_TXNS] = { 0 };
	struct k5_tally rc = { 0 }, ru = { 0 };
	struct k5_commit kc;
	pthread_t th;
	rd_kafka_t *m, *orphan, *plain, *crc, *cru;
	unsigned seed = (unsigned)now_ms();
	int delay;

	broker_launch(&b, txn_broker_args);
	plain = plain_producer(&b, &drp);
	harness_create_topic(plain, K5_TOPIC, K5_PARTS);
	m = txn_producer(&b, "k5-main", NULL, &drm);
	txn_ok(rd_kafka_init_transactions(m, 30000), "init_transactions");
	for (uint32_t t = 0; t < 10; t++) {
		k5_txn(m, t);
		out[t] = K5_COMMITTED;
	}

	/* an orphan: a transaction whose producer goes away with the broker */
	orphan = txn_producer(&b, "k5-orphan", okv, &dro);
	txn_ok(rd_kafka_init_transactions(orphan, 30000), "orphan: init_transactions");
	txn_ok(rd_kafka_begin_transaction(orphan), "orphan: begin_transaction");
	k5_produce(orphan, K5_ORPHAN, K5_PER_TXN);
	delivered(orphan, &dro, K5_PER_TXN, 15000, "the orphan's records");

	/* kill 1: txn 10 open, its records acknowledged */
	txn_ok(rd_kafka_begin_transaction(m), "begin_transaction 10");
	k5_produce(m, 10, K5_PER_TXN);
	delivered(m, &drm, 11 * K5_PER_TXN, 15000, "txn 10's records");
	broker_restart(&b, SIGKILL);
	rd_kafka_destroy(orphan);   /* abandoned: only the broker can end it */
	out[10] = k5_settle(&m, rd_kafka_commit_transaction(m, 60000), &b, &drm, 10);
	fprintf(stderr, "txn: sigkill: kill 1 with txn 10 open (records acknowledged); its commit after the "
		"restart: %s\n", out[10] == K5_COMMITTED ? "committed" : out[10] == K5_ABORTED ? "aborted" : "unknown");

	for (uint32_t t = 11; t < 15; t++) {
		k5_txn(m, t);
		out[t] = K5_COMMITTED;
	}

	/* kill 2: during txn 15's commit */
	txn_ok(rd_kafka_begin_transaction(m), "begin_transaction 15");
	k5_produce(m, 15, K5_PER_TXN);
	rd_kafka_flush(m, 15000);
	kc = (struct k5_commit){ m, NULL };
	delay = (int)(rand_r(&seed) % 20);
	cr_assert_eq(pthread_create(&th, NULL, k5_commit_thread, &kc), 0);
	sleep_ms(delay);   /* a random point in the commit */
	broker_restart(&b, SIGKILL);
	pthread_join(th, NULL);
	out[15] = k5_settle(&m, kc.e, &b, &drm, 15);
	fprintf(stderr, "txn: sigkill: kill 2 %d ms into txn 15's commit: %s\n", delay,
		out[15] == K5_COMMITTED ? "committed" : out[15] == K5_ABORTED ? "aborted" : "unknown");

	for (uint32_t t = 16; t < K5_TXNS; t++) {
		k5_txn(m, t);
		out[t] = K5_COMMITTED;
	}
	rd_kafka_destroy(m);

	/* the orphan (transaction.timeout.ms=3000) must be aborted by the
	 * restarted broker: the last stable offset reaches the end */
	crc = iso_consumer(&b, 1);
	cru = iso_consumer(&b, 0);
	wait_lso_caught_up(crc, cru, K5_TOPIC, K5_PARTS, 30000, "after the kills");
	rd_kafka_destroy(crc);
	rd_kafka_destroy(cru);
	for (int p = 0; p < K5_PARTS; p++) {
		read_partition(&b, 1, K5_TOPIC, p, k5_add, &rc);
		read_partition(&b, 0, K5_TOPIC, p, k5_add, &ru);
	}
	fprintf(stderr, "txn: sigkill: read_committed: orphan %ld, txn 10 %ld, txn 15 %ld records; "
		"read_uncommitted: orphan %ld, txn 10 %ld, txn 15 %ld\n", rc.count[K5_ORPHAN], rc.count[10],
		rc.count[15], ru.count[K5_ORPHAN], ru.count[10], ru.count[15]);
	cr_assert_eq(rc.bad, 0, "%ld foreign records", rc.bad);
	cr_assert_eq(rc.dups, 0, "read_committed: %ld duplicates", rc.dups);
	for (int t = 0; t < K5_TXNS; t++) {
		if (out[t] == K5_COMMITTED)
			cr_assert_eq(rc.count[t], K5_PER_TXN, "committed txn %d: %ld of %d records read_committed", t,
				     rc.count[t], K5_PER_TXN);
		else if (out[t] == K5_ABORTED)
			cr_assert_eq(rc.count[t], 0, "aborted txn %d: %ld records read_committed", t, rc.count[t]);
		else
			cr_assert(rc.count[t] == 0 || rc.count[t] == K5_PER_TXN,
				  "txn %d (outcome unknown to the client): %ld of %d records read_committed: not "
				  "atomic", t, rc.count[t], K5_PER_TXN);
	}
	cr_assert_eq(rc.count[K5_ORPHAN], 0, "the abandoned transaction: %ld records read_committed",
		     rc.count[K5_ORPHAN]);
	/* the control: the orphan's and txn 10's records are in the log */
	cr_assert_eq(ru.count[K5_ORPHAN], K5_PER_TXN, "read_uncommitted: the orphan's acknowledged records: %ld",
		     ru.count[K5_ORPHAN]);
	cr_assert_geq(ru.count[10], K5_PER_TXN, "read_uncommitted: txn 10's acknowledged records: %ld",
		      ru.count[10]);
	rd_kafka_destroy(plain);
	broker_cleanup(&b);
}

/* ---- 1. consume-transform-produce, the copier SIGKILLed --------------- */

#define CP_PARTS      4
#define CP_RECORDS    20000
#define CP_KILLS      5
#define CP_BATCH      100
#define CP_ABORT_AT   2          /* the first copier aborts its 2nd batch's first attempt */
#define CP_IN_MAGIC   0x494e5054u
#define CP_OUT_MAGIC  0x4f555431u
#define CP_GROUP      "copier-group"
#define CP_TXNID      "copier"

struct in_rec {
	uint32_t magic, seq;
};

/* a transformed record: seq and a function of it, where it came from, and
 * whether it was written in a transaction the copier aborts on purpose */
struct out_rec {
	uint32_t magic, seq, xform, doomed;
	int32_t in_part, pad;
	int64_t in_offset;
};

static uint32_t cp_xform(uint32_t seq)
{
	return seq * 2654435761u ^ 0x5a5a5a5au;
}

static int32_t cp_out_part(uint32_t seq)
{
	return (int32_t)((seq / 5) % CP_PARTS);
}

enum cp_state { CP_STARTING, CP_RUNNING, CP_DONE, CP_FAILED };

/* Shared between the test process (configuration, incarnation) and the
 * feeder / copier processes (the rest). */
struct cp_shared {
	char bootstrap[64];
	int incarnation;             /* 1, 2, ...: which copier this is */
	int state;
	long txns;                   /* committed by this incarnation */
	long txns_total, copied;     /* all incarnations */
	int in_txn;                  /* a transaction is open */
	int committing;              /* inside commit_transaction */
	long txn_records;            /* records produced in it */
	long doomed_delivered;       /* records of the deliberately aborted transaction */
	int aborted_on_purpose;
	char err[400];
};

static struct cp_shared *cp;

static _Noreturn void cp_fail(int status, const char *what, const char *detail)
{
	snprintf(cp->err, sizeof(cp->err), "copier %d: %s: %s", cp->incarnation, what, detail);
	STORE(cp->state, CP_FAILED);
	_exit(status);
}

static void cp_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[256];

	if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK)
		cp_fail(2, k, err);
}

static rd_kafka_conf_t *cp_conf(void)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();

	cp_set(conf, "bootstrap.servers", cp->bootstrap);
	cp_set(conf, "client.id", "sluice-itest-copier");
	cp_set(conf, "log_level", getenv("SLUICE_RDK_DEBUG") ? "7" : "2");
	if (getenv("SLUICE_RDK_DEBUG"))
		cp_set(conf, "debug", getenv("SLUICE_RDK_DEBUG"));
	return conf;
}

/* The feeder: CP_RECORDS sequence-numbered records into `in` (seq i to
 * partition i % CP_PARTS, so at offset i / CP_PARTS), idempotent. */
static void feeder_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	long *ok = opaque;

	(void)rk;
	if (m->err)
		cp_fail(2, "feeder delivery", rd_kafka_err2str(m->err));
	(*ok)++;
}

static _Noreturn void feeder_main(void)
{
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	char err[256];
	long ok = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	conf = cp_conf();
	cp_set(conf, "enable.idempotence", "true");
	cp_set(conf, "linger.ms", "5");
	rd_kafka_conf_set_dr_msg_cb(conf, feeder_dr);
	rd_kafka_conf_set_opaque(conf, &ok);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!rk)
		cp_fail(2, "feeder rd_kafka_new", err);
	for (uint32_t i = 0; i < CP_RECORDS; i++) {
		struct in_rec r = { CP_IN_MAGIC, i };
		rd_kafka_resp_err_t e;

		while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC("in"), RD_KAFKA_V_PARTITION((int32_t)(i % CP_PARTS)),
					      RD_KAFKA_V_VALUE(&r, sizeof(r)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
					      RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
			rd_kafka_poll(rk, 10);
		if (e)
			cp_fail(2, "feeder producev", rd_kafka_err2str(e));
	}
	for (int i = 0; i < 60 && rd_kafka_outq_len(rk) > 0; i++)
		rd_kafka_flush(rk, 1000);
	if (ok != CP_RECORDS)
		cp_fail(2, "feeder", "not every record was delivered within 60 s");
	rd_kafka_destroy(rk);
	STORE(cp->state, CP_DONE);
	_exit(0);
}

static void cp_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	if (!m->err && m->_private)
		STORE(cp->doomed_delivered, cp->doomed_delivered + 1);
}

/* A transactional call failed: retry what is retriable (the caller loops),
 * otherwise end this copier: abortable -> abort and exit 4 (the test
 * process starts another one), fatal or other -> exit 2 (a failure). */
static int cp_txn_check(rd_kafka_t *p, rd_kafka_error_t *e, const char *what)
{
	char detail[300];

	if (!e)
		return 0;
	snprintf(detail, sizeof(detail), "%s (%s%s%s%s)", rd_kafka_error_string(e), rd_kafka_error_name(e),
		 rd_kafka_error_is_fatal(e) ? ", fatal" : "", rd_kafka_error_is_retriable(e) ? ", retriable" : "",
		 rd_kafka_error_txn_requires_abort(e) ? ", abortable" : "");
	if (rd_kafka_error_is_retriable(e) && !rd_kafka_error_is_fatal(e)) {
		rd_kafka_error_destroy(e);
		return 1;
	}
	if (rd_kafka_error_txn_requires_abort(e)) {
		rd_kafka_error_destroy(e);
		e = rd_kafka_abort_transaction(p, 30000);
		if (e)
			cp_fail(2, "abort_transaction after an abortable error", rd_kafka_error_string(e));
		cp_fail(4, what, detail);
	}
	rd_kafka_error_destroy(e);
	cp_fail(2, what, detail);
}

static void cp_produce(rd_kafka_t *p, rd_kafka_message_t *const *batch, int n, int doomed)
{
	for (int i = 0; i < n; i++) {
		const rd_kafka_message_t *m = batch[i];
		struct in_rec r;
		struct out_rec o;
		rd_kafka_resp_err_t e;

		if (m->len != sizeof(r))
			cp_fail(2, "input", "a record of the wrong size");
		memcpy(&r, m->payload, sizeof(r));
		o = (struct out_rec){ CP_OUT_MAGIC, r.seq, cp_xform(r.seq), (uint32_t)doomed, m->partition, 0,
				      m->offset };
		while ((e = rd_kafka_producev(p, RD_KAFKA_V_TOPIC("out"), RD_KAFKA_V_PARTITION(cp_out_part(r.seq)),
					      RD_KAFKA_V_VALUE(&o, sizeof(o)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
					      RD_KAFKA_V_OPAQUE((void *)(uintptr_t)doomed), RD_KAFKA_V_END)) ==
		       RD_KAFKA_RESP_ERR__QUEUE_FULL)
			rd_kafka_poll(p, 10);
		if (e)
			cp_fail(2, "producev to out", rd_kafka_err2str(e));
		STORE(cp->txn_records, cp->txn_records + 1);
	}
}

/* One input batch in one transaction; the first copier aborts the first
 * attempt of its CP_ABORT_AT-th batch on purpose (after its records were
 * delivered), then does it again. */
static void cp_transaction(rd_kafka_t *p, rd_kafka_t *c, rd_kafka_message_t *const *batch, int n, long batchno)
{
	rd_kafka_topic_partition_list_t *offs = rd_kafka_topic_partition_list_new(CP_PARTS);
	rd_kafka_consumer_group_metadata_t *g;
	rd_kafka_error_t *e;

	if (cp->incarnation == 1 && batchno == CP_ABORT_AT) {
		cp_txn_check(p, rd_kafka_begin_transaction(p), "begin_transaction (to abort)");
		STORE(cp->in_txn, 1);
		cp_produce(p, batch, n, 1);
		for (int i = 0; i < 30 && rd_kafka_outq_len(p) > 0; i++)
			rd_kafka_flush(p, 1000);
		if (rd_kafka_outq_len(p) > 0)
			cp_fail(2, "flush before the deliberate abort", "records still queued after 30 s");
		while (cp_txn_check(p, rd_kafka_abort_transaction(p, 30000), "abort_transaction (on purpose)"))
			;
		STORE(cp->in_txn, 0);
		STORE(cp->txn_records, 0);
		STORE(cp->aborted_on_purpose, 1);
	}
	cp_txn_check(p, rd_kafka_begin_transaction(p), "begin_transaction");
	STORE(cp->in_txn, 1);
	cp_produce(p, batch, n, 0);
	for (int i = 0; i < n; i++) {
		rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_find(offs, "in", batch[i]->partition);

		if (!tp)
			tp = rd_kafka_topic_partition_list_add(offs, "in", batch[i]->partition);
		if (batch[i]->offset + 1 > tp->offset)
			tp->offset = batch[i]->offset + 1;
	}
	g = rd_kafka_consumer_group_metadata(c);
	if (!g)
		cp_fail(2, "consumer_group_metadata", "none");
	while (cp_txn_check(p, rd_kafka_send_offsets_to_transaction(p, offs, g, 30000),
			    "send_offsets_to_transaction"))
		;
	rd_kafka_consumer_group_metadata_destroy(g);
	rd_kafka_topic_partition_list_destroy(offs);
	STORE(cp->committing, 1);
	while ((e = rd_kafka_commit_transaction(p, 30000)) && cp_txn_check(p, e, "commit_transaction"))
		;
	STORE(cp->committing, 0);
	STORE(cp->in_txn, 0);
	STORE(cp->txn_records, 0);
	STORE(cp->txns, cp->txns + 1);
	STORE(cp->txns_total, cp->txns_total + 1);
	STORE(cp->copied, cp->copied + n);
}

static _Noreturn void copier_main(void)
{
	static rd_kafka_message_t *batch[CP_BATCH];
	rd_kafka_conf_t *pc, *cc;
	rd_kafka_topic_partition_list_t *sub;
	rd_kafka_t *p, *c;
	char err[256];
	uint32_t eof = 0;
	long batchno = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	pc = cp_conf();
	cp_set(pc, "transactional.id", CP_TXNID);
	cp_set(pc, "transaction.timeout.ms", "10000");
	cp_set(pc, "linger.ms", "5");
	rd_kafka_conf_set_dr_msg_cb(pc, cp_dr);
	p = rd_kafka_new(RD_KAFKA_PRODUCER, pc, err, sizeof(err));
	if (!p)
		cp_fail(2, "rd_kafka_new(producer)", err);
	/* before joining the group: this fences (and aborts the transaction
	 * of) the copier killed before us, so its offsets are settled */
	while (cp_txn_check(p, rd_kafka_init_transactions(p, 30000), "init_transactions"))
		;

	cc = cp_conf();
	cp_set(cc, "group.id", CP_GROUP);
	cp_set(cc, "enable.auto.commit", "false");
	cp_set(cc, "enable.auto.offset.store", "false");
	cp_set(cc, "auto.offset.reset", "earliest");
	cp_set(cc, "isolation.level", "read_committed");
	cp_set(cc, "enable.partition.eof", "true");
	cp_set(cc, "session.timeout.ms", "2000");
	cp_set(cc, "heartbeat.interval.ms", "300");
	cp_set(cc, "fetch.wait.max.ms", "50");
	c = rd_kafka_new(RD_KAFKA_CONSUMER, cc, err, sizeof(err));
	if (!c)
		cp_fail(2, "rd_kafka_new(consumer)", err);
	rd_kafka_poll_set_consumer(c);
	sub = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(sub, "in", RD_KAFKA_PARTITION_UA);
	if (rd_kafka_subscribe(c, sub))
		cp_fail(2, "subscribe", "in");
	rd_kafka_topic_partition_list_destroy(sub);
	STORE(cp->state, CP_RUNNING);

	for (;;) {
		int64_t t0 = now_ms();
		int n = 0;

		while (n < CP_BATCH && now_ms() - t0 < 50) {
			rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 10);

			if (!m)
				continue;
			if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
				eof |= 1u << m->partition;
			} else if (m->err) {
				if (rd_kafka_fatal_error(c, NULL, 0))
					cp_fail(2, "consumer", rd_kafka_message_errstr(m));
				fprintf(stderr, "txn: copier %d: consume: %s\n", cp->incarnation,
					rd_kafka_message_errstr(m));
			} else {
				eof &= ~(1u << m->partition);
				batch[n++] = m;
				continue;
			}
			rd_kafka_message_destroy(m);
		}
		if (n) {
			cp_transaction(p, c, batch, n, ++batchno);
			for (int i = 0; i < n; i++)
				rd_kafka_message_destroy(batch[i]);
			continue;
		}
		/* done: every partition assigned to us, at its end, and all
		 * that was read before the ends is committed */
		if (eof == (1u << CP_PARTS) - 1) {
			rd_kafka_topic_partition_list_t *a = NULL;
			int all = 0;

			if (!rd_kafka_assignment(c, &a)) {
				all = a->cnt == CP_PARTS;
				rd_kafka_topic_partition_list_destroy(a);
			}
			if (all) {
				STORE(cp->state, CP_DONE);
				/* a clean exit would only add a LeaveGroup */
				_exit(0);
			}
		}
	}
}

/* Fork a feeder or copier process (no librdkafka handle may exist in the
 * test process at this point). */
static pid_t cp_spawn(void (*fn)(void))
{
	pid_t pid;

	STORE(cp->state, CP_STARTING);
	STORE(cp->txns, 0);
	STORE(cp->in_txn, 0);
	STORE(cp->committing, 0);
	STORE(cp->txn_records, 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		fn();
		_exit(0);
	}
	return pid;
}

/* Reap pid if it exited: 1 and *st if so, 0 if still running. */
static int cp_exited(pid_t pid, int *st)
{
	pid_t r;

	while ((r = waitpid(pid, st, WNOHANG)) < 0 && errno == EINTR)
		;
	cr_assert_geq(r, 0, "waitpid: %s", strerror(errno));
	return r == pid;
}

/* Checks of one read of `out`. */
struct cp_tally {
	uint8_t seen[CP_RECORDS];
	long records, doomed, dups, bad;
	char first_problem[200];
};

static void cp_add(void *ctx, const rd_kafka_message_t *m)
{
	struct cp_tally *t = ctx;
	struct out_rec o;

	t->records++;
	if (m->len != sizeof(o)) {
		if (!t->bad++)
			snprintf(t->first_problem, sizeof(t->first_problem), "out [%d] offset %lld: %zu bytes",
				 m->partition, (long long)m->offset, m->len);
		return;
	}
	memcpy(&o, m->payload, sizeof(o));
	if (o.magic != CP_OUT_MAGIC || o.seq >= CP_RECORDS || o.xform != cp_xform(o.seq) ||
	    cp_out_part(o.seq) != m->partition || o.in_part != (int32_t)(o.seq % CP_PARTS) ||
	    o.in_offset != (int64_t)(o.seq / CP_PARTS)) {
		if (!t->bad++)
			snprintf(t->first_problem, sizeof(t->first_problem),
				 "out [%d] offset %lld: a malformed record (seq %u from in [%d] offset %lld)",
				 m->partition, (long long)m->offset, o.seq, o.in_part, (long long)o.in_offset);
		return;
	}
	if (o.doomed)
		t->doomed++;
	if (t->seen[o.seq] && !t->dups++ && !t->first_problem[0])
		snprintf(t->first_problem, sizeof(t->first_problem), "out [%d] offset %lld: seq %u again",
			 m->partition, (long long)m->offset, o.seq);
	if (t->seen[o.seq] < 255)
		t->seen[o.seq]++;
}

static long cp_missing(const struct cp_tally *t)
{
	long n = 0;

	for (long i = 0; i < CP_RECORDS; i++)
		n += !t->seen[i];
	return n;
}

Test(txn, copier_sigkilled_copies_exactly_once, .timeout = 150)
{
	const char *args[] = { "--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
			       "--set", "group.initial.rebalance.delay.ms=0",
			       "--set", "group.min.session.timeout.ms=1000",
			       "--set", "num.partitions=4", NULL };
	const char *env = getenv("SLUICE_TXN_SEED");
	unsigned seed = env && *env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)(time(NULL) ^ getpid());
	struct broker_proc b;
	struct cp_tally *rc, *ru;
	int kills = 0, restarts = 0, killed_in_txn = 0, killed_committing = 0, st;
	int64_t t0 = now_ms(), end;
	pid_t pid;

	fprintf(stderr, "txn: copier: kill seed %u (SLUICE_TXN_SEED=%u repeats the kill points)\n", seed, seed);
	broker_launch(&b, args);
	raw_create_topic(&b, "in");     /* num.partitions=4 */
	raw_create_topic(&b, "out");
	cp = mmap(NULL, sizeof(*cp), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(cp, MAP_FAILED);
	memset(cp, 0, sizeof(*cp));
	snprintf(cp->bootstrap, sizeof(cp->bootstrap), "%s", b.bootstrap);

	pid = cp_spawn(feeder_main);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the feeder failed (status 0x%x): %s", st, cp->err);

	/* the copiers: CP_KILLS killed at random points, then one to the end */
	for (int inc = 1;; inc++) {
		int last = kills == CP_KILLS;
		long threshold = (inc == 1 ? CP_ABORT_AT : 1) + (long)(rand_r(&seed) % 3);
		int delay = (int)(rand_r(&seed) % 60), exited = 0;
		long txns, in_txn, committing, txn_records;

		STORE(cp->incarnation, inc);
		pid = cp_spawn(copier_main);
		end = now_ms() + 60000;
		/* let it commit a few transactions (the first one: past its
		 * deliberate abort), unless it is the last */
		while (!(exited = cp_exited(pid, &st))) {
			if (!last && LOAD(cp->txns) >= threshold && (inc > 1 || LOAD(cp->aborted_on_purpose)))
				break;
			cr_assert_lt(now_ms(), end, "copier %d: %ld transactions in 60 s (state %d)", inc,
				     LOAD(cp->txns), LOAD(cp->state));
			sleep_ms(5);
		}
		if (!exited) {
			sleep_ms(delay);   /* the random kill point */
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			txns = LOAD(cp->txns);
			in_txn = LOAD(cp->in_txn);
			committing = LOAD(cp->committing);
			txn_records = LOAD(cp->txn_records);
			kills++;
			killed_in_txn += in_txn && txn_records > 0;
			killed_committing += (int)committing;
			fprintf(stderr, "txn: copier %d SIGKILLed %d ms after its transaction %ld committed (threshold "
				"%ld): %s (%ld records produced in it); %ld copied so far\n", inc, delay, txns, threshold,
				committing ? "inside commit_transaction" : in_txn ? "inside a transaction" :
				"between transactions", txn_records, LOAD(cp->copied));
			continue;
		}
		if (WIFEXITED(st) && WEXITSTATUS(st) == 4) {
			/* an abortable error: it aborted; another copier goes on */
			fprintf(stderr, "txn: copier %d ended on an abortable error: %s\n", inc, cp->err);
			cr_assert_lt(++restarts, 4, "copiers keep failing with abortable errors: %s", cp->err);
			continue;
		}
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "copier %d failed (status 0x%x): %s", inc, st,
			  cp->err);
		cr_assert_eq(kills, CP_KILLS, "copier %d finished before the %d kills (after %d)", inc, CP_KILLS, kills);
		break;
	}
	/* copied counts the commits a copier saw succeed: one killed inside
	 * commit_transaction after its EndTxn reached the broker has its
	 * transaction committed all the same */
	fprintf(stderr, "txn: copier: done after %d kills (%d inside a transaction with records, %d of them inside "
		"commit_transaction), %d abortable restarts, %ld transactions seen committed with %ld records, %ld "
		"records in the deliberately aborted one; %.1f s\n", kills, killed_in_txn, killed_committing, restarts,
		LOAD(cp->txns_total), LOAD(cp->copied), LOAD(cp->doomed_delivered), (double)(now_ms() - t0) / 1000);
	cr_assert(LOAD(cp->aborted_on_purpose), "the first copier never aborted its transaction on purpose");
	cr_assert_gt(LOAD(cp->doomed_delivered), 0, "no record of the deliberately aborted transaction was delivered");

	/* from here on the test process uses librdkafka (no more forks) */
	{
		rd_kafka_t *crc = iso_consumer(&b, 1), *cru = iso_consumer(&b, 0);
		const char *gkv[] = { "group.id", CP_GROUP, "isolation.level", "read_committed", "log_level",
				      quiet_level(), NULL };
		char errstr[256];
		rd_kafka_t *g = rd_kafka_new(RD_KAFKA_CONSUMER, harness_conf(&b, gkv), errstr, sizeof(errstr));
		rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(CP_PARTS);
		rd_kafka_resp_err_t err;

		wait_lso_caught_up(crc, cru, "out", CP_PARTS, 20000, "out, after the last copier");
		/* the group's offsets, committed through the transactions */
		cr_assert_not_null(g, "%s", errstr);
		for (int p = 0; p < CP_PARTS; p++)
			rd_kafka_topic_partition_list_add(l, "in", p);
		err = rd_kafka_committed(g, l, 20000);
		cr_assert_eq(err, 0, "committed: %s", rd_kafka_err2str(err));
		for (int p = 0; p < CP_PARTS; p++)
			cr_assert_eq(l->elems[p].offset, CP_RECORDS / CP_PARTS,
				     "group %s: in [%d] committed offset %lld (error %s), want %d", CP_GROUP, p,
				     (long long)l->elems[p].offset, rd_kafka_err2str(l->elems[p].err),
				     CP_RECORDS / CP_PARTS);
		rd_kafka_topic_partition_list_destroy(l);
		rd_kafka_destroy(g);
		rd_kafka_destroy(crc);
		rd_kafka_destroy(cru);
	}

	rc = calloc(1, sizeof(*rc));
	ru = calloc(1, sizeof(*ru));
	cr_assert(rc && ru);
	for (int p = 0; p < CP_PARTS; p++) {
		read_partition(&b, 1, "out", p, cp_add, rc);
		read_partition(&b, 0, "out", p, cp_add, ru);
	}
	fprintf(stderr, "txn: copier: read_committed: %ld records, %ld duplicates, %ld missing, %ld of the "
		"deliberately aborted, %ld malformed%s%s\n", rc->records, rc->dups, cp_missing(rc), rc->doomed, rc->bad,
		rc->first_problem[0] ? "; first: " : "", rc->first_problem);
	fprintf(stderr, "txn: copier: read_uncommitted: %ld records, %ld duplicates, %ld missing, %ld of the "
		"deliberately aborted, %ld malformed\n", ru->records, ru->dups, cp_missing(ru), ru->doomed, ru->bad);
	cr_assert_eq(rc->bad, 0, "read_committed: %ld malformed records; first: %s", rc->bad, rc->first_problem);
	cr_assert_eq(rc->doomed, 0, "read_committed: %ld records of the aborted transaction", rc->doomed);
	cr_assert_eq(rc->dups + cp_missing(rc), 0, "read_committed: %ld duplicates, %ld missing of %d; first: %s",
		     rc->dups, cp_missing(rc), CP_RECORDS, rc->first_problem);
	cr_assert_eq(rc->records, CP_RECORDS);
	/* the control: the aborted records are in the log, and the same
	 * check finds them as duplicates without isolation */
	cr_assert_eq(ru->bad, 0, "read_uncommitted: %ld malformed records", ru->bad);
	cr_assert_eq(ru->doomed, LOAD(cp->doomed_delivered),
		     "read_uncommitted: %ld records of the deliberately aborted transaction, %ld were delivered",
		     ru->doomed, LOAD(cp->doomed_delivered));
	cr_assert_geq(ru->records, CP_RECORDS + ru->doomed);
	cr_assert_eq(cp_missing(ru), 0);
	cr_assert_gt(ru->dups, 0, "read_uncommitted shows no duplicates: the check could not have failed");
	free(rc);
	free(ru);
	munmap(cp, sizeof(*cp));
	broker_cleanup(&b);
}
