/* tests/integration/test_groups.c — consumer groups against a real
 * build/sluiced (issue 5): librdkafka high-level consumers joining,
 * leaving and dying under steady production, cooperative-sticky against
 * eager rebalancing, static membership, and broker restarts with a group
 * active. The two invariants of the design (an offset is the next record
 * to read; a stale owner's commit is refused) are tested in
 * test_groups_fencing.c.
 *
 * Each test starts its own broker (harness.h) with (groups_common.h)
 * group.initial.rebalance.delay.ms=0 and a low group.min.session.timeout.ms
 * so that groups form at once and a dead member is noticed in ~2 s.
 *
 * Group members that a test kills (SIGKILL) or restarts are separate
 * processes ("member processes"): forked before the test process makes any
 * librdkafka handle, idle until told to run, each with one consumer. They
 * report into shared memory (struct member): every record they process
 * (partition, offset, monotonic time, whether a commit covering it
 * succeeded) and every assignment the rebalance callback sees, with the
 * generation from rd_kafka_consumer_group_metadata. The test process
 * produces at a steady rate (struct feeder) and checks the reports:
 * every acknowledged record processed (no loss), every duplicate explained
 * by a commit that never happened (the uncommitted window), one owner per
 * partition per generation.
 *
 * Each fault test has a labelled control that must observe the fault
 * (commits before processing lose records; eager rebalancing stalls the
 * partitions that stay put), so a checker that cannot fail is caught.
 */
#include <errno.h>
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
#include <criterion/logging.h>

#include "tests/integration/groups_common.h"
#include "tests/integration/harness.h"

/* ---- member processes ------------------------------------------------ */

#define MAX_PARTS   12
#define MEMBER_RECS (1 << 16)
#define MEMBER_EVS  256

enum member_cmd { CMD_IDLE, CMD_RUN, CMD_STOP, CMD_EXIT };
enum member_state { ST_IDLE, ST_RUNNING, ST_CLOSED, ST_FAILED };
enum commit_mode {
	COMMIT_AFTER,    /* process a batch, then commit it synchronously */
	COMMIT_BEFORE,   /* control: commit a batch, then process it */
	COMMIT_ON_REVOKE,   /* process; commit only what is given up, in the
			     * revoke callback (and at close). For measuring
			     * flow: a commit sent while the member's own
			     * JoinGroup is pending waits behind it on the
			     * coordinator connection (one request at a time,
			     * as in Kafka) and then fails (REBALANCE_IN_PROGRESS,
			     * ILLEGAL_GENERATION); synchronous, it stalls the
			     * poll loop; asynchronous, librdkafka takes
			     * ILLEGAL_GENERATION as a lost membership and the
			     * group rebalances again and again */
};
enum ev_kind { EV_ASSIGN = 1, EV_REVOKE, EV_LOST };

struct rec {
	int32_t partition;
	int32_t committed;       /* a commit covering this record succeeded */
	int64_t offset;
	int64_t t_us;            /* when processed (CLOCK_MONOTONIC) */
};

struct asg_ev {
	int32_t gen, kind;
	uint32_t mask;           /* partitions in the callback's list */
	uint32_t after;          /* the member's assignment after it */
	int64_t t_us;
};

/* One member, in memory shared between the test process (writes the
 * configuration and cmd/hold) and the member process (writes the rest;
 * counters are published with release stores after the entries). */
struct member {
	/* set by the test process */
	int cmd, hold;
	char name[32], group[64], topic[64], bootstrap[64], instance[64], strategy[64];
	int session_ms, heartbeat_ms, work_ms, mode;
	/* set by the member process */
	pid_t pid;
	int state, held, cur_gen, nrebalance, runs;
	uint32_t cur_mask;
	int64_t work_start_us;   /* last time a slow member started "working" */
	long nrec;
	int nev;
	long commit_failures;
	int commit_last_err;                         /* librdkafka error of the last failed commit */
	int64_t commit_max_us, commit_max_at_us;    /* slowest synchronous commit, and when it started */
	int64_t cb_max_us, cb_max_at_us;            /* slowest rebalance callback, and when */
	char err[256];
	struct rec recs[MEMBER_RECS];
	struct asg_ev ev[MEMBER_EVS];
};

#define LOAD(x)     __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

static struct member *members_map(int n)
{
	void *p = mmap(NULL, sizeof(struct member) * (size_t)n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);

	cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
	return p;
}

/* The member process: no Criterion calls in here (they belong to the
 * test process); failures go to m->err and the exit status. */
static struct member *self;

/* records polled and not yet processed */
static rd_kafka_message_t *pending[1000];
static int npending;
/* COMMIT_ON_REVOKE: the next offset to read of each processed partition */
static int64_t next_off[MAX_PARTS];

static _Noreturn void member_fail(struct member *m, const char *what, const char *detail)
{
	snprintf(m->err, sizeof(m->err), "%s: %s: %s", m->name, what, detail);
	STORE(m->state, ST_FAILED);
	_exit(2);
}

static int group_generation(rd_kafka_t *rk)
{
	rd_kafka_consumer_group_metadata_t *g = rd_kafka_consumer_group_metadata(rk);
	rd_kafka_error_t *e;
	void *buf;
	size_t n;
	int32_t gen = -1;

	if (!g)
		return -1;
	e = rd_kafka_consumer_group_metadata_write(g, &buf, &n);
	rd_kafka_consumer_group_metadata_destroy(g);
	if (e) {
		rd_kafka_error_destroy(e);
		return -1;
	}
	/* librdkafka 2.0.2: "CGMDv2:" then the generation id, host order */
	if (n >= 11 && !memcmp(buf, "CGMDv2:", 7))
		memcpy(&gen, (char *)buf + 7, 4);
	else
		member_fail(self, "group metadata", "unknown serialisation (not librdkafka 2.0.2?)");
	rd_kafka_mem_free(NULL, buf);
	return gen;
}

static void member_event(struct member *m, int gen, int kind, uint32_t mask)
{
	int i = m->nev;

	if (i >= MEMBER_EVS)
		member_fail(m, "rebalance", "too many rebalance events");
	m->ev[i] = (struct asg_ev){ gen, kind, mask, m->cur_mask, now_us() };
	STORE(m->nev, i + 1);
}

static void record_processed(struct member *m, const rd_kafka_message_t *msg, int committed)
{
	long i = m->nrec;

	if (i >= MEMBER_RECS)
		member_fail(m, "records", "more records than the report holds");
	m->recs[i] = (struct rec){ msg->partition, committed, msg->offset, now_us() };
	STORE(m->nrec, i + 1);
}

/* Commit, for each partition in pending[from..], the offset after the
 * last record (the next one to read). 0 or the librdkafka error. */
static rd_kafka_resp_err_t commit_pending(rd_kafka_t *rk, int from, int async)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(MAX_PARTS);
	rd_kafka_resp_err_t err = 0;

	for (int i = from; i < npending; i++) {
		rd_kafka_message_t *msg = pending[i];
		rd_kafka_topic_partition_t *tp =
			rd_kafka_topic_partition_list_find(l, rd_kafka_topic_name(msg->rkt), msg->partition);

		if (!tp)
			tp = rd_kafka_topic_partition_list_add(l, rd_kafka_topic_name(msg->rkt), msg->partition);
		tp->offset = msg->offset + 1;
	}
	if (l->cnt) {
		int64_t t0 = now_us();

		err = rd_kafka_commit(rk, l, async);
		if (now_us() - t0 > self->commit_max_us) {
			self->commit_max_us = now_us() - t0;
			self->commit_max_at_us = t0;
		}
		for (int i = 0; !err && i < l->cnt; i++)
			if (l->elems[i].err)
				err = l->elems[i].err;
		if (err)
			self->commit_last_err = err;
	}
	rd_kafka_topic_partition_list_destroy(l);
	return err;
}

/* Process (record) the pending batch and commit it, in the member's order;
 * with hold set, stop for good inside the window (the test kills us). */
static void flush_pending(rd_kafka_t *rk, struct member *m, int may_hold)
{
	long first = m->nrec;
	rd_kafka_resp_err_t err;

	if (!npending)
		return;
	if (m->mode == COMMIT_ON_REVOKE) {
		for (int i = 0; i < npending; i++) {
			record_processed(m, pending[i], 0);
			if (pending[i]->partition >= 0 && pending[i]->partition < MAX_PARTS)
				next_off[pending[i]->partition] = pending[i]->offset + 1;
		}
	} else if (m->mode == COMMIT_BEFORE) {
		err = commit_pending(rk, 0, 0);
		if (err)
			m->commit_failures++;
		if (may_hold && LOAD(m->hold)) {
			STORE(m->held, npending);   /* committed, not processed */
			for (;;)
				pause();
		}
		for (int i = 0; i < npending; i++)
			record_processed(m, pending[i], !err);
	} else {
		for (int i = 0; i < npending; i++)
			record_processed(m, pending[i], 0);
		if (may_hold && LOAD(m->hold)) {
			STORE(m->held, npending);   /* processed, not committed */
			for (;;)
				pause();
		}
		err = commit_pending(rk, 0, 0);
		if (err)
			m->commit_failures++;
		else
			for (long i = first; i < m->nrec; i++)
				m->recs[i].committed = 1;
	}
	for (int i = 0; i < npending; i++)
		rd_kafka_message_destroy(pending[i]);
	npending = 0;
}

/* COMMIT_ON_REVOKE: commit the processed position of the partitions in
 * mask (synchronously) and forget them. */
static void commit_processed(rd_kafka_t *rk, struct member *m, uint32_t mask)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(MAX_PARTS);
	rd_kafka_resp_err_t err;

	for (int p = 0; p < MAX_PARTS; p++)
		if ((mask & (1u << p)) && next_off[p] > 0)
			rd_kafka_topic_partition_list_add(l, m->topic, p)->offset = next_off[p];
	if (l->cnt) {
		err = rd_kafka_commit(rk, l, 0);
		for (int i = 0; !err && i < l->cnt; i++)
			err = l->elems[i].err;
		if (err) {
			m->commit_failures++;
			m->commit_last_err = err;
		}
	}
	for (int p = 0; p < MAX_PARTS; p++)
		if (mask & (1u << p))
			next_off[p] = 0;
	rd_kafka_topic_partition_list_destroy(l);
}

static uint32_t parts_mask(const rd_kafka_topic_partition_list_t *l)
{
	uint32_t mask = 0;

	for (int i = 0; i < l->cnt; i++)
		if (l->elems[i].partition >= 0 && l->elems[i].partition < 32)
			mask |= 1u << l->elems[i].partition;
	return mask;
}

static void member_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
			     void *opaque)
{
	struct member *m = opaque;
	/* NULL once the group handle is terminated: librdkafka 2.0.2 can
	 * still serve a revoke queued before rd_kafka_consumer_close from
	 * inside it, after the group's op queue is disabled (the member
	 * then died in strcmp); the configured strategy says the same */
	const char *proto = rd_kafka_rebalance_protocol(rk);
	int coop = proto ? !strcmp(proto, "COOPERATIVE") : !strcmp(m->strategy, "cooperative-sticky");
	uint32_t mask = parts_mask(parts);
	int gen = group_generation(rk);
	rd_kafka_error_t *e = NULL;
	int64_t t0 = now_us();

	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		if (coop)
			e = rd_kafka_incremental_assign(rk, parts);
		else
			rd_kafka_assign(rk, parts);
		STORE(m->cur_mask, coop ? m->cur_mask | mask : mask);
		member_event(m, gen, EV_ASSIGN, mask);
	} else {
		int lost = rd_kafka_assignment_lost(rk);
		/* a revoke served from inside rd_kafka_consumer_close after the
		 * group handle terminated (proto NULL): there is no coordinator
		 * any more, and a synchronous commit there waits for one that
		 * never comes (the "did not close" hang of the eager test);
		 * member_run committed everything processed before closing */
		int closing = !proto || rd_kafka_consumer_closed(rk);

		/* commit what was processed before giving the partitions up */
		if (!lost && !closing)
			flush_pending(rk, m, 0);
		if (!lost && !closing && m->mode == COMMIT_ON_REVOKE)
			commit_processed(rk, m, mask);
		if (coop)
			e = rd_kafka_incremental_unassign(rk, parts);
		else
			rd_kafka_assign(rk, NULL);
		STORE(m->cur_mask, coop ? m->cur_mask & ~mask : 0);
		member_event(m, gen, lost ? EV_LOST : EV_REVOKE, mask);
	}
	if (e)
		member_fail(m, "assign", rd_kafka_error_string(e));
	STORE(m->cur_gen, gen);
	STORE(m->nrebalance, m->nrebalance + 1);
	if (now_us() - t0 > m->cb_max_us) {
		m->cb_max_us = now_us() - t0;
		m->cb_max_at_us = t0;
	}
}

static void member_set(struct member *m, rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[256];

	if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK)
		member_fail(m, k, err);
}

/* One consumer's life: subscribe, poll/process/commit until told to stop,
 * close (LeaveGroup unless static). */
static void member_run(struct member *m)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	rd_kafka_topic_partition_list_t *sub;
	char num[32], err[256];
	rd_kafka_t *rk;
	int64_t last_gen_check = 0;

	member_set(m, conf, "bootstrap.servers", m->bootstrap);
	member_set(m, conf, "client.id", m->name);
	member_set(m, conf, "group.id", m->group);
	member_set(m, conf, "enable.auto.commit", "false");
	member_set(m, conf, "enable.auto.offset.store", "false");
	member_set(m, conf, "auto.offset.reset", "earliest");
	member_set(m, conf, "fetch.wait.max.ms", "100");
	member_set(m, conf, "fetch.error.backoff.ms", "50");
	member_set(m, conf, "log_level", getenv("SLUICE_RDK_DEBUG") ? "7" : "0");
	if (getenv("SLUICE_RDK_DEBUG"))
		member_set(m, conf, "debug", getenv("SLUICE_RDK_DEBUG"));
	snprintf(num, sizeof(num), "%d", m->session_ms);
	member_set(m, conf, "session.timeout.ms", num);
	snprintf(num, sizeof(num), "%d", m->heartbeat_ms);
	member_set(m, conf, "heartbeat.interval.ms", num);
	if (m->strategy[0])
		member_set(m, conf, "partition.assignment.strategy", m->strategy);
	if (m->instance[0])
		member_set(m, conf, "group.instance.id", m->instance);
	rd_kafka_conf_set_rebalance_cb(conf, member_rebalance);
	rd_kafka_conf_set_opaque(conf, m);
	rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!rk)
		member_fail(m, "rd_kafka_new", err);
	rd_kafka_poll_set_consumer(rk);
	sub = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(sub, m->topic, RD_KAFKA_PARTITION_UA);
	if (rd_kafka_subscribe(rk, sub))
		member_fail(m, "subscribe", m->topic);
	rd_kafka_topic_partition_list_destroy(sub);
	STORE(m->cur_mask, 0);
	STORE(m->runs, m->runs + 1);
	STORE(m->state, ST_RUNNING);

	while (LOAD(m->cmd) == CMD_RUN) {
		int64_t t0 = now_us();

		/* a batch: what arrives within 20 ms (or 500 records) */
		while (npending < 500 && now_us() - t0 < 20000) {
			rd_kafka_message_t *msg = rd_kafka_consumer_poll(rk, 10);

			if (!msg)
				continue;
			if (msg->err) {
				if (msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
					fprintf(stderr, "groups: %s: consume: %s\n", m->name,
						rd_kafka_message_errstr(msg));
				rd_kafka_message_destroy(msg);
				continue;
			}
			pending[npending++] = msg;
		}
		if (npending) {
			flush_pending(rk, m, 1);
			if (m->work_ms) {
				/* a slow member: works on each batch away from poll */
				STORE(m->work_start_us, now_us());
				sleep_ms(m->work_ms);
			}
		}
		if (now_us() - last_gen_check > 50000) {
			STORE(m->cur_gen, group_generation(rk));
			last_gen_check = now_us();
		}
	}
	flush_pending(rk, m, 0);
	if (m->mode == COMMIT_ON_REVOKE)
		commit_processed(rk, m, ~0u);
	rd_kafka_consumer_close(rk);
	/* out of the group: what the tests wait for. librdkafka 2.0.2's
	 * rd_kafka_destroy has been seen (about 1 run in 20 of the eager test,
	 * after the group sub-system had terminated and the broker had
	 * answered every request) not to return; members_exit bounds that */
	STORE(m->cur_mask, 0);
	STORE(m->state, ST_CLOSED);
	rd_kafka_destroy(rk);
}

static _Noreturn void member_main(struct member *m)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	self = m;
	for (;;) {
		int cmd = LOAD(m->cmd);

		if (cmd == CMD_EXIT)
			_exit(0);
		if (cmd == CMD_RUN && LOAD(m->state) != ST_RUNNING)
			member_run(m);
		else
			sleep_ms(2);
	}
}

/* Configure and fork a member process (idle until member_start). Call
 * only before the test process makes a librdkafka handle. */
static void member_spawn(struct member *m, const struct broker_proc *b, const char *name, const char *group,
			 const char *topic)
{
	pid_t pid;

	snprintf(m->name, sizeof(m->name), "%s", name);
	snprintf(m->group, sizeof(m->group), "%s", group);
	snprintf(m->topic, sizeof(m->topic), "%s", topic);
	snprintf(m->bootstrap, sizeof(m->bootstrap), "%s", b->bootstrap);
	if (!m->session_ms)
		m->session_ms = 2000;
	if (!m->heartbeat_ms)
		m->heartbeat_ms = 300;
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0)
		member_main(m);
	m->pid = pid;
}

static void member_start(struct member *m)
{
	STORE(m->cmd, CMD_RUN);
}

/* Fail the test at once if the member reported a failure or its process
 * is gone (a crash must not look like a hang: without this, a member
 * that dies leaves its state as it was and the test waits it out). The
 * process is reaped here (pid 0 afterwards); m is shared memory the test
 * process may write. */
static void member_check(const struct member *m)
{
	struct member *w = (struct member *)m;
	pid_t pid = m->pid;
	int st;

	if (LOAD(m->state) == ST_FAILED)
		cr_assert_fail("member process failed: %s", m->err);
	if (pid <= 0 || waitpid(pid, &st, WNOHANG) != pid)
		return;
	w->pid = 0;
	if (LOAD(m->state) == ST_FAILED)
		cr_assert_fail("member process failed: %s", m->err);
	if (WIFSIGNALED(st))
		cr_assert_fail("member %s died: signal %d (%s)%s", m->name, WTERMSIG(st), strsignal(WTERMSIG(st)),
			       WCOREDUMP(st) ? ", core dumped" : "");
	/* status 0 is only the exit it was told to make (CMD_EXIT) */
	if (WEXITSTATUS(st) != 0)
		cr_assert_fail("member %s exited with status %d", m->name, WEXITSTATUS(st));
}

/* Close the consumer (CMD_STOP) and wait for it. */
static void member_stop(struct member *m, int timeout_ms)
{
	int64_t end = now_us() + (int64_t)timeout_ms * 1000;

	STORE(m->cmd, CMD_STOP);
	while (LOAD(m->state) == ST_RUNNING) {
		member_check(m);
		cr_assert_lt(now_us(), end, "%s did not close within %d ms", m->name, timeout_ms);
		sleep_ms(5);
	}
	member_check(m);
}

static void member_kill(struct member *m)
{
	int st;

	kill(m->pid, SIGKILL);
	waitpid(m->pid, &st, 0);
	m->pid = 0;
}

/* Tell every member process to exit (closing any consumer) and reap it. */
static void members_exit(struct member *ms, int n)
{
	for (int i = 0; i < n; i++)
		if (ms[i].pid)
			STORE(ms[i].cmd, CMD_EXIT);
	for (int i = 0; i < n; i++) {
		int st;

		if (!ms[i].pid)
			continue;
		if (LOAD(ms[i].state) == ST_RUNNING) {
			/* teardown, after every check: a consumer whose close does
			 * not return is reported and killed, as a stuck
			 * rd_kafka_destroy is below. Seen about once in five full
			 * runs on the eager control test's slow member (issue 18's
			 * closing note); the tests that check a close use
			 * member_stop, which still fails on it. */
			int64_t end = now_us() + 30 * 1000000ll;

			STORE(ms[i].cmd, CMD_STOP);
			while (LOAD(ms[i].state) == ST_RUNNING && ms[i].pid && now_us() < end) {
				member_check(&ms[i]);
				sleep_ms(5);
			}
			if (ms[i].pid && LOAD(ms[i].state) == ST_RUNNING) {
				fprintf(stderr, "groups: %s: rd_kafka_consumer_close did not return within 30 s at "
					"teardown; killed (after every check)\n", ms[i].name);
				member_kill(&ms[i]);
				continue;
			}
			member_check(&ms[i]);
		}
		if (!ms[i].pid)
			continue;   /* exited cleanly, reaped by member_check */
		STORE(ms[i].cmd, CMD_EXIT);
		{
			int64_t end = now_us() + 15 * 1000000ll;
			pid_t r;

			while ((r = waitpid(ms[i].pid, &st, WNOHANG)) == 0 && now_us() < end)
				sleep_ms(5);
			if (r == 0) {
				/* closed (left the group) but stuck in rd_kafka_destroy:
				 * a client-side hang at teardown, after every check */
				fprintf(stderr, "groups: %s left the group but its rd_kafka_destroy did not return "
					"within 15 s (librdkafka); killed\n", ms[i].name);
				kill(ms[i].pid, SIGKILL);
				r = waitpid(ms[i].pid, &st, 0);
				st = 0;
			}
			cr_assert_eq(r, ms[i].pid, "waitpid %s: %s", ms[i].name, strerror(errno));
		}
		ms[i].pid = 0;
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "member %s %s %d while exiting%s%s", ms[i].name,
			  WIFSIGNALED(st) ? "died: signal" : "exited with status",
			  WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), LOAD(ms[i].state) == ST_FAILED ? ": " : "",
			  LOAD(ms[i].state) == ST_FAILED ? ms[i].err : "");
	}
	munmap(ms, sizeof(struct member) * (size_t)n);
}

/* The members in set (indexes) are one generation with disjoint, non-empty
 * assignments covering every partition. */
static int members_settled(const struct member *ms, const int *set, int n, int nparts)
{
	uint32_t all = 0;
	int gen = LOAD(ms[set[0]].cur_gen);

	for (int i = 0; i < n; i++) {
		const struct member *m = &ms[set[i]];
		uint32_t mask = LOAD(m->cur_mask);

		member_check(m);
		if (LOAD(m->state) != ST_RUNNING || LOAD(m->cur_gen) != gen || gen <= 0 || !mask ||
		    (all & mask))
			return 0;
		all |= mask;
	}
	return all == (1u << nparts) - 1;
}

static void members_print(const char *what, const struct member *ms, const int *set, int n)
{
	fprintf(stderr, "groups: %s:", what);
	for (int i = 0; i < n; i++)
		fprintf(stderr, " %s gen %d mask 0x%03x;", ms[set[i]].name, LOAD(ms[set[i]].cur_gen),
			LOAD(ms[set[i]].cur_mask));
	fprintf(stderr, "\n");
}

/* ---- steady production ----------------------------------------------- */

#define ACK_CAP (1 << 16)

struct feeder {
	rd_kafka_t *rk;
	const char *topic;
	int nparts;
	int period_us;           /* one record every period_us, round robin */
	int64_t next_us;
	long sent;
	long ok, failed;
	rd_kafka_resp_err_t first_err;
	uint8_t *acked[MAX_PARTS];   /* acked[p][offset] */
	int64_t end[MAX_PARTS];      /* highest acked offset + 1 */
};

static void feeder_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct feeder *f = opaque;

	(void)rk;
	if (m->err) {
		if (!f->failed++)
			f->first_err = m->err;
		return;
	}
	f->ok++;
	if (m->partition >= 0 && m->partition < f->nparts && m->offset >= 0 && m->offset < ACK_CAP) {
		f->acked[m->partition][m->offset] = 1;
		if (m->offset + 1 > f->end[m->partition])
			f->end[m->partition] = m->offset + 1;
	}
}

static void feeder_init(struct feeder *f, const struct broker_proc *b, const char *topic, int nparts,
			int period_us)
{
	/* quiet: the restart tests make every client log its reconnects */
	const char *kv[] = { "linger.ms", "1", "acks", "all", "log_level", getenv("SLUICE_RDK_DEBUG") ? "7" : "0", NULL };

	memset(f, 0, sizeof(*f));
	f->topic = topic;
	f->nparts = nparts;
	f->period_us = period_us;
	for (int p = 0; p < nparts; p++) {
		f->acked[p] = calloc(ACK_CAP, 1);
		cr_assert_not_null(f->acked[p]);
	}
	f->rk = harness_producer(b, kv, feeder_dr, f);
	harness_create_topic(f->rk, topic, nparts);
}

static void feeder_produce(struct feeder *f, int32_t partition)
{
	int64_t v[2] = { now_us(), f->sent };
	rd_kafka_resp_err_t err;

	err = rd_kafka_producev(f->rk, RD_KAFKA_V_TOPIC(f->topic), RD_KAFKA_V_PARTITION(partition),
				RD_KAFKA_V_VALUE(v, sizeof(v)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
				RD_KAFKA_V_END);
	cr_assert_eq(err, 0, "producev: %s", rd_kafka_err2str(err));
	f->sent++;
}

/* Produce at the steady rate for a while (a late caller does not get a
 * burst: the schedule restarts when it fell 50 ms behind). */
static void feeder_step(struct feeder *f)
{
	int64_t t = now_us();

	if (!f->next_us || t - f->next_us > 50000)
		f->next_us = t;
	while (f->next_us <= t) {
		feeder_produce(f, (int32_t)(f->sent % f->nparts));
		f->next_us += f->period_us;
	}
	rd_kafka_poll(f->rk, 0);
}

static void feeder_run(struct feeder *f, int ms)
{
	int64_t end = now_us() + (int64_t)ms * 1000;

	while (now_us() < end) {
		feeder_step(f);
		usleep(500);
	}
}

/* Feed until cond(ctx) holds; fail the test after timeout_ms. */
static void feeder_until(struct feeder *f, int (*cond)(void *), void *ctx, int timeout_ms, const char *what)
{
	int64_t end = now_us() + (int64_t)timeout_ms * 1000;

	while (!cond(ctx)) {
		cr_assert_lt(now_us(), end, "timed out (%d ms) waiting until %s", timeout_ms, what);
		if (f)
			feeder_step(f);
		usleep(500);
	}
}

static void feeder_finish(struct feeder *f)
{
	while (rd_kafka_outq_len(f->rk) > 0)
		rd_kafka_flush(f->rk, 1000);
	cr_assert_eq(f->failed, 0, "%ld deliveries failed, first: %s", f->failed, rd_kafka_err2str(f->first_err));
	cr_assert_eq(f->ok, f->sent);
}

static void feeder_destroy(struct feeder *f)
{
	rd_kafka_destroy(f->rk);
	for (int p = 0; p < f->nparts; p++)
		free(f->acked[p]);
}

struct settled_ctx {
	const struct member *ms;
	const int *set;
	int n, nparts;
};

static int settled_cond(void *ctx)
{
	struct settled_ctx *s = ctx;

	return members_settled(s->ms, s->set, s->n, s->nparts);
}

static void feed_until_settled(struct feeder *f, const struct member *ms, const int *set, int n, int timeout_ms,
			       const char *what)
{
	struct settled_ctx s = { ms, set, n, f->nparts };

	feeder_until(f, settled_cond, &s, timeout_ms, what);
	members_print(what, ms, set, n);
}

/* Every member in set has processed everything acknowledged so far on
 * its partitions (caught up). */
struct caught_ctx {
	const struct member *ms;
	const int *set;
	int n;
	const struct feeder *f;
};

static int caught_up_cond(void *ctx)
{
	struct caught_ctx *c = ctx;
	int64_t seen[MAX_PARTS];

	for (int p = 0; p < c->f->nparts; p++)
		seen[p] = -1;
	for (int i = 0; i < c->n; i++) {
		const struct member *m = &c->ms[c->set[i]];
		long n = LOAD(m->nrec);

		member_check(m);
		for (long k = n > 4096 ? n - 4096 : 0; k < n; k++)
			if (m->recs[k].offset > seen[m->recs[k].partition])
				seen[m->recs[k].partition] = m->recs[k].offset;
	}
	for (int p = 0; p < c->f->nparts; p++)
		if (seen[p] + 1 < c->f->end[p])
			return 0;
	return 1;
}

/* ---- checking what the members processed ------------------------------ */

struct tally {
	long processed, lost, dups, dups_unexplained;
	char first_lost[96], first_unexplained[160];
};

struct occ {
	int64_t t_us;
	int committed, member;
};

static int occ_cmp(const void *a, const void *b)
{
	const struct occ *x = a, *y = b;

	return x->t_us < y->t_us ? -1 : x->t_us > y->t_us;
}

/* No loss: every acknowledged record was processed by some member.
 * Duplicates: a record processed again is explained only if no earlier
 * processing of it had a successful commit covering it. */
static void tally_records(const struct feeder *f, const struct member *ms, int nmembers, struct tally *t)
{
	memset(t, 0, sizeof(*t));
	for (int p = 0; p < f->nparts; p++) {
		int64_t n = f->end[p];
		int *cnt = calloc((size_t)n + 1, sizeof(int));
		struct occ **occ = calloc((size_t)n + 1, sizeof(*occ));

		cr_assert(cnt && occ);
		for (int i = 0; i < nmembers; i++)
			for (long k = 0; k < LOAD(ms[i].nrec); k++) {
				const struct rec *r = &ms[i].recs[k];

				if (r->partition != p || r->offset >= n)
					continue;
				occ[r->offset] = realloc(occ[r->offset], sizeof(struct occ) * (size_t)(cnt[r->offset] + 1));
				occ[r->offset][cnt[r->offset]++] = (struct occ){ r->t_us, r->committed, i };
				t->processed++;
			}
		for (int64_t o = 0; o < n; o++) {
			if (f->acked[p][o] && !cnt[o]) {
				if (!t->lost++)
					snprintf(t->first_lost, sizeof(t->first_lost), "partition %d offset %lld", p,
						 (long long)o);
			}
			if (cnt[o] > 1) {
				qsort(occ[o], (size_t)cnt[o], sizeof(struct occ), occ_cmp);
				t->dups += cnt[o] - 1;
				for (int k = 0; k + 1 < cnt[o]; k++)
					if (occ[o][k].committed && !t->dups_unexplained++)
						snprintf(t->first_unexplained, sizeof(t->first_unexplained),
							 "partition %d offset %lld processed by %s after %s had committed it",
							 p, (long long)o, ms[occ[o][k + 1].member].name,
							 ms[occ[o][k].member].name);
			}
			free(occ[o]);
		}
		free(cnt);
		free(occ);
	}
}

/* Within each generation, the assignments the members were given are
 * disjoint (one owner per partition). Returns the number of generations
 * seen; *full gets how many of them covered every partition. */
static int check_generations(const struct member *ms, int nmembers, int nparts, int *full)
{
	int gens = 0;
	int maxgen = 0;

	*full = 0;
	for (int i = 0; i < nmembers; i++)
		for (int k = 0; k < LOAD(ms[i].nev); k++)
			if (ms[i].ev[k].gen > maxgen)
				maxgen = ms[i].ev[k].gen;
	for (int g = 1; g <= maxgen; g++) {
		uint32_t owned[8] = { 0 };
		uint32_t all = 0;
		int any = 0;

		for (int i = 0; i < nmembers && i < 8; i++)
			for (int k = 0; k < LOAD(ms[i].nev); k++)
				if (ms[i].ev[k].gen == g && ms[i].ev[k].kind == EV_ASSIGN) {
					owned[i] = ms[i].ev[k].after;
					any = 1;
				}
		if (!any)
			continue;
		gens++;
		for (int i = 0; i < nmembers && i < 8; i++) {
			for (int j = 0; j < i; j++)
				cr_assert_eq(owned[i] & owned[j], 0,
					     "generation %d: partitions 0x%03x owned by both %s and %s", g,
					     owned[i] & owned[j], ms[i].name, ms[j].name);
			all |= owned[i];
		}
		fprintf(stderr, "groups: generation %d:", g);
		for (int i = 0; i < nmembers && i < 8; i++)
			if (owned[i])
				fprintf(stderr, " %s 0x%03x", ms[i].name, owned[i]);
		fprintf(stderr, "%s\n", all == (1u << nparts) - 1 ? " (all partitions)" : "");
		*full += all == (1u << nparts) - 1;
	}
	return gens;
}

/* ---- librdkafka in the test process ---------------------------------- */

/* The group's committed offset of each partition 0..n-1 (OffsetFetch
 * through rk, which has group.id set), asserting no error. */
static void committed_offsets(rd_kafka_t *rk, const char *topic, int n, int64_t *out)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
	rd_kafka_resp_err_t err;

	for (int p = 0; p < n; p++)
		rd_kafka_topic_partition_list_add(l, topic, p);
	err = rd_kafka_committed(rk, l, 20000);
	cr_assert_eq(err, 0, "rd_kafka_committed: %s", rd_kafka_err2str(err));
	for (int p = 0; p < n; p++) {
		cr_assert_eq(l->elems[p].err, 0, "committed %s [%d]: %s", topic, p, rd_kafka_err2str(l->elems[p].err));
		out[p] = l->elems[p].offset;
	}
	rd_kafka_topic_partition_list_destroy(l);
}

/* A consumer with only group.id, to ask for the committed offsets. */
static rd_kafka_t *offsets_reader(const struct broker_proc *b, const char *group)
{
	const char *kv[] = { "group.id", group, "log_level", getenv("SLUICE_RDK_DEBUG") ? "7" : "0", NULL };
	char err[512];
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, harness_conf(b, kv), err, sizeof(err));

	cr_assert_not_null(rk, "%s", err);
	return rk;
}

/* ---- 1. 1 -> 3 -> 2 members under production; a member SIGKILLed ----- */

#define CH_PARTS 12

struct held_ctx {
	const struct member *m;
};

static int held_cond(void *ctx)
{
	const struct member *m = ((struct held_ctx *)ctx)->m;

	member_check(m);
	return LOAD(m->held) > 0;
}

/* mode COMMIT_AFTER: the real check (no loss; duplicates only from the
 * uncommitted window). COMMIT_BEFORE: the control, which must lose the
 * records the victim committed and never processed. In both, the victim
 * is killed inside its window (after processing and before the commit,
 * or after the commit and before processing), so the window is never
 * empty and the outcome does not depend on luck. */
static void churn_and_kill(int mode)
{
	struct broker_proc b;
	struct member *ms;
	struct feeder f;
	struct tally t;
	const char *group = mode == COMMIT_AFTER ? "g-churn" : "g-churn-control";
	const int one[] = { 0 }, three[] = { 0, 1, 2 }, two[] = { 0, 2 };
	int held, gens, full;
	struct caught_ctx cc;
	int64_t t_kill;

	broker_launch(&b, group_broker_args);
	ms = members_map(3);
	for (int i = 0; i < 3; i++) {
		char name[24];

		snprintf(name, sizeof(name), "member-%d", i);
		ms[i].mode = mode;
		ms[i].session_ms = 2000;
		ms[i].heartbeat_ms = 300;
		member_spawn(&ms[i], &b, name, group, "churn");
	}
	/* only now librdkafka in this process */
	feeder_init(&f, &b, "churn", CH_PARTS, 1000);   /* 1000 records/s */

	member_start(&ms[0]);
	feed_until_settled(&f, ms, one, 1, 20000, "member-0 owns all 12 partitions");
	feeder_run(&f, 1000);
	member_start(&ms[1]);
	member_start(&ms[2]);
	feed_until_settled(&f, ms, three, 3, 30000, "three members share the 12 partitions");
	feeder_run(&f, 1000);

	/* member-1 stops inside its window and is SIGKILLed there */
	STORE(ms[1].hold, 1);
	feeder_until(&f, held_cond, &(struct held_ctx){ &ms[1] }, 10000, "member-1 is inside its window");
	held = LOAD(ms[1].held);
	member_kill(&ms[1]);
	t_kill = now_us();
	feed_until_settled(&f, ms, two, 2, 30000, "the two survivors share the 12 partitions");
	fprintf(stderr, "groups: churn: survivors own everything %lld ms after the SIGKILL\n",
		(long long)(now_us() - t_kill) / 1000);
	feeder_run(&f, 1000);
	feeder_finish(&f);
	cc = (struct caught_ctx){ ms, two, 2, &f };
	feeder_until(NULL, caught_up_cond, &cc, 20000, "the survivors have processed everything produced");
	member_stop(&ms[0], 20000);
	member_stop(&ms[2], 20000);

	tally_records(&f, ms, 3, &t);
	gens = check_generations(ms, 3, CH_PARTS, &full);
	fprintf(stderr,
		"groups: churn (%s): %ld produced, %ld processed, %ld lost, %ld duplicates "
		"(%ld unexplained), victim's window %d records, %d generations (%d with every partition owned), "
		"commit failures %ld/%ld/%ld\n",
		mode == COMMIT_AFTER ? "commit after processing" : "CONTROL: commit before processing", f.ok,
		t.processed, t.lost, t.dups, t.dups_unexplained, held, gens, full, ms[0].commit_failures,
		ms[1].commit_failures, ms[2].commit_failures);
	cr_assert_geq(full, 3, "expected at least 3 generations with every partition owned (1, 3 and 2 members)");
	if (mode == COMMIT_AFTER) {
		cr_assert_eq(t.lost, 0, "%ld acknowledged records never processed; first: %s", t.lost, t.first_lost);
		cr_assert_eq(t.dups_unexplained, 0, "%ld duplicates outside the uncommitted window; first: %s",
			     t.dups_unexplained, t.first_unexplained);
		cr_assert_geq(t.dups, held, "the victim's uncommitted window (%d records) was not replayed (%ld "
			      "duplicates)", held, t.dups);
	} else {
		/* the control: the same checker must see the fault */
		cr_assert_gt(t.lost, 0, "CONTROL: committing before processing lost nothing; the loss check is blind");
		cr_assert_leq(t.lost, held, "CONTROL: lost %ld records, more than the victim's window (%d)", t.lost,
			      held);
	}
	feeder_destroy(&f);
	members_exit(ms, 3);
	broker_cleanup(&b);
}

Test(groups, churn_1_3_2_sigkill_commit_after_processing_loses_nothing, .timeout = 120)
{
	churn_and_kill(COMMIT_AFTER);
}

Test(groups, control_churn_sigkill_commit_before_processing_loses_records, .timeout = 120)
{
	churn_and_kill(COMMIT_BEFORE);
}

/* ---- 2. cooperative-sticky: partitions that stay put keep flowing ----- */

#define CO_PARTS     6
#define CO_HEARTBEAT 1200    /* heartbeat.interval.ms: the bound */
/* About one run in four F's unmoved partitions stop for 0.4-0.9 s from
 * its revoke callback on. That is librdkafka 2.0.2, not the broker: at the
 * SyncGroup response it pauses every fetcher ("incremental rebalance"),
 * the broker thread finds nothing fetchable and blocks for up to
 * rd_kafka_max_block_ms (1000 ms), and the resume after the callback
 * does not wake it; no Fetch is in flight during the gap (debug
 * cgrp,fetch,protocol: last FetchResponse before the pause, next
 * FetchRequest up to 1 s later, every rtt a few ms). The bound leaves
 * room for that second. */
#define CO_WORK      3500    /* the slow member works this long per batch */

static int tcmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The longest gap between consecutive consumptions of partition p by any
 * of the members, over [from, to] (a partition that stops and does not
 * resume by `to` counts up to `to`). */
static int64_t partition_gap_us(const struct member *ms, int n, int p, int64_t from, int64_t to, int64_t *at)
{
	int64_t *ts = NULL, gap = 0, prev = from;
	long cnt = 0;

	for (int i = 0; i < n; i++)
		for (long k = 0; k < LOAD(ms[i].nrec); k++)
			if (ms[i].recs[k].partition == p && ms[i].recs[k].t_us >= from && ms[i].recs[k].t_us <= to) {
				ts = realloc(ts, sizeof(int64_t) * (size_t)(cnt + 1));
				ts[cnt++] = ms[i].recs[k].t_us;
			}
	qsort(ts, (size_t)cnt, sizeof(int64_t), tcmp);
	*at = from;
	for (long k = 0; k < cnt; k++) {
		if (ts[k] - prev > gap) {
			gap = ts[k] - prev;
			*at = prev;
		}
		prev = ts[k];
	}
	if (to - prev > gap) {
		gap = to - prev;
		*at = prev;
	}
	free(ts);
	return gap;
}

struct work_ctx {
	const struct member *m;
	int64_t after;
};

static int work_started_cond(void *ctx)
{
	struct work_ctx *w = ctx;

	member_check(w->m);
	return LOAD(w->m->work_start_us) > w->after;
}

/* Members F (fast), S (slow: works CO_WORK ms per batch, away from poll)
 * share 6 partitions under steady production; J joins just as S starts
 * working. Eager rebalancing stops every partition until S comes back to
 * poll and rejoins; cooperative-sticky keeps F's unmoved partitions
 * flowing. Returns the longest gap on F's unmoved partitions (or, when
 * F kept none, on F's partitions from before the join), in ms. */
static int64_t join_gap(const char *strategy, const char *group, int64_t *moved_gap_ms, uint32_t *unmoved_out)
{
	struct broker_proc b;
	struct member *ms;
	struct feeder f;
	const int two[] = { 0, 1 }, three[] = { 0, 1, 2 };
	const char *names[] = { "a-fast", "b-slow", "c-joiner" };
	uint32_t before, after, unmoved, measured;
	int64_t t_join, t_settled, t_end, gap = 0, mgap = 0;
	struct timespec wall_join;

	broker_launch(&b, group_broker_args);
	ms = members_map(3);
	for (int i = 0; i < 3; i++) {
		snprintf(ms[i].strategy, sizeof(ms[i].strategy), "%s", strategy);
		ms[i].session_ms = 10000;
		ms[i].heartbeat_ms = CO_HEARTBEAT;
		ms[i].work_ms = i == 1 ? CO_WORK : 0;
		ms[i].mode = COMMIT_ON_REVOKE;
		member_spawn(&ms[i], &b, names[i], group, "flow");
	}
	feeder_init(&f, &b, "flow", CO_PARTS, 1000);    /* 1000 records/s: each partition every 6 ms */

	member_start(&ms[0]);
	member_start(&ms[1]);
	feed_until_settled(&f, ms, two, 2, 30000, "F and S share the partitions");
	feeder_run(&f, 1000);
	before = LOAD(ms[0].cur_mask);
	/* J joins as S starts a batch of work */
	feeder_until(&f, work_started_cond, &(struct work_ctx){ &ms[1], now_us() }, 10000, "S starts working");
	t_join = now_us();
	clock_gettime(CLOCK_REALTIME, &wall_join);   /* to line up with librdkafka's debug log */
	member_start(&ms[2]);
	feed_until_settled(&f, ms, three, 3, 30000, "F, S and J share the partitions");
	t_settled = now_us();
	feeder_run(&f, 1500);
	t_end = now_us();
	after = LOAD(ms[0].cur_mask);
	unmoved = before & after;
	measured = unmoved ? unmoved : before;
	for (int p = 0; p < CO_PARTS; p++) {
		int64_t at, g = partition_gap_us(ms, 3, p, t_join, t_end, &at);

		fprintf(stderr, "groups: %s: partition %d: longest gap %lld ms from +%lld ms\n", strategy, p,
			(long long)g / 1000, (long long)(at - t_join) / 1000);

		if (measured & (1u << p))
			gap = g > gap ? g : gap;
		else if ((LOAD(ms[1].cur_mask) & (1u << p)) == 0)
			mgap = g > mgap ? g : mgap;   /* not S's: S is slow by design */
	}
	for (int i = 0; i < 3; i++)
		fprintf(stderr, "groups: %s: %s: slowest commit %lld ms at +%lld ms, slowest rebalance callback %lld ms "
			"at +%lld ms, %ld commit failures (last: %s)\n", strategy, ms[i].name, (long long)ms[i].commit_max_us / 1000,
			(long long)(ms[i].commit_max_at_us - t_join) / 1000, (long long)ms[i].cb_max_us / 1000,
			(long long)(ms[i].cb_max_at_us - t_join) / 1000, ms[i].commit_failures,
			rd_kafka_err2str(ms[i].commit_last_err));
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < LOAD(ms[i].nev); k++)
			if (ms[i].ev[k].t_us >= t_join - 100000)
				fprintf(stderr, "groups: %s: +%lld ms %s gen %d %s 0x%02x -> 0x%02x\n", strategy,
					(long long)(ms[i].ev[k].t_us - t_join) / 1000, ms[i].name, ms[i].ev[k].gen,
					ms[i].ev[k].kind == EV_ASSIGN ? "assign" : "revoke", ms[i].ev[k].mask,
					ms[i].ev[k].after);
	fprintf(stderr,
		"groups: %s: J joined at %lld.%03ld (wall clock), group settled in %lld ms; F had 0x%02x, has 0x%02x; longest gap on F's %s "
		"partitions 0x%02x: %lld ms; on moved partitions: %lld ms (heartbeat %d ms, S works %d ms)\n",
		strategy, (long long)wall_join.tv_sec, wall_join.tv_nsec / 1000000, (long long)(t_settled - t_join) / 1000, before, after, unmoved ? "unmoved" : "former",
		measured, (long long)gap / 1000, (long long)mgap / 1000, CO_HEARTBEAT, CO_WORK);
	members_exit(ms, 3);
	feeder_finish(&f);
	feeder_destroy(&f);
	broker_cleanup(&b);
	*moved_gap_ms = mgap / 1000;
	*unmoved_out = unmoved;
	return gap / 1000;
}

Test(groups, cooperative_sticky_join_leaves_unmoved_partitions_flowing, .timeout = 120)
{
	int64_t moved;
	uint32_t unmoved;
	int64_t gap = join_gap("cooperative-sticky", "g-coop", &moved, &unmoved);

	cr_assert_neq(unmoved, 0, "cooperative-sticky moved every partition of the fast member");
	cr_assert_leq(gap, CO_HEARTBEAT,
		      "cooperative-sticky: a partition that stayed put stopped for %lld ms (bound: one heartbeat "
		      "interval, %d ms)", (long long)gap, CO_HEARTBEAT);
}

/* Eager (range) side by side: printed; and the control of the gap
 * measure, which must see the stop-the-world rebalance (a slower machine
 * only makes the gap longer). */
Test(groups, control_eager_join_stops_every_partition, .timeout = 120)
{
	int64_t moved;
	uint32_t unmoved;
	int64_t gap = join_gap("range", "g-eager", &moved, &unmoved);

	cr_assert_gt(gap, CO_HEARTBEAT,
		     "CONTROL: eager rebalancing showed a gap of only %lld ms (<= %d): the gap measure is blind",
		     (long long)gap, CO_HEARTBEAT);
}

/* ---- 3. static membership: a restart within the session timeout ------- */

struct closed_ctx {
	const struct member *m;
};

static int closed_cond(void *ctx)
{
	const struct member *m = ((struct closed_ctx *)ctx)->m;

	member_check(m);
	return LOAD(m->state) == ST_CLOSED;
}

struct back_ctx {
	const struct member *m;
	int runs;
};

static int back_cond(void *ctx)
{
	struct back_ctx *c = ctx;

	member_check(c->m);
	return LOAD(c->m->runs) == c->runs && LOAD(c->m->state) == ST_RUNNING && LOAD(c->m->cur_mask) != 0;
}

Test(groups, static_member_restart_within_session_timeout_no_rebalance, .timeout = 90)
{
	struct broker_proc b;
	struct member *ms;
	struct feeder f;
	const int both[] = { 0, 1 };
	uint32_t mask_l, mask_r;
	int gen, nreb_l, nev_r, restarted_gen = -1;
	int64_t t0;

	broker_launch(&b, group_broker_args);
	ms = members_map(2);
	for (int i = 0; i < 2; i++) {
		snprintf(ms[i].instance, sizeof(ms[i].instance), "static-%d", i);
		ms[i].session_ms = 6000;
		ms[i].heartbeat_ms = 300;
		member_spawn(&ms[i], &b, i ? "static-restarted" : "static-leader", "g-static", "stat");
	}
	feeder_init(&f, &b, "stat", 4, 2000);

	/* the leader first (the member that stays), then the one restarted */
	member_start(&ms[0]);
	feed_until_settled(&f, ms, both, 1, 20000, "the first static member owns everything");
	member_start(&ms[1]);
	feed_until_settled(&f, ms, both, 2, 30000, "two static members share the partitions");
	feeder_run(&f, 1000);
	gen = LOAD(ms[0].cur_gen);
	mask_l = LOAD(ms[0].cur_mask);
	mask_r = LOAD(ms[1].cur_mask);
	nreb_l = LOAD(ms[0].nrebalance);

	/* close without LeaveGroup (a static member's close) and come back */
	t0 = now_us();
	STORE(ms[1].cmd, CMD_STOP);
	feeder_until(&f, closed_cond, &(struct closed_ctx){ &ms[1] }, 10000, "the static member closed");
	nev_r = LOAD(ms[1].nev);
	member_start(&ms[1]);
	feeder_until(&f, back_cond, &(struct back_ctx){ &ms[1], 2 }, 5500, "the static member is back and assigned");
	fprintf(stderr, "groups: static: closed and back with its assignment in %lld ms\n",
		(long long)(now_us() - t0) / 1000);
	/* long enough for the other member to hear of a rebalance (its
	 * heartbeats) had there been one */
	feeder_run(&f, 2000);
	for (int k = nev_r; k < LOAD(ms[1].nev); k++)
		if (ms[1].ev[k].kind == EV_ASSIGN)
			restarted_gen = ms[1].ev[k].gen;
	member_check(&ms[0]);
	member_check(&ms[1]);
	cr_assert_eq(LOAD(ms[0].nrebalance), nreb_l,
		     "the other member's rebalance callback ran %d times during the static member's restart",
		     LOAD(ms[0].nrebalance) - nreb_l);
	cr_assert_eq(LOAD(ms[0].cur_mask), mask_l, "the other member's assignment changed: 0x%x -> 0x%x", mask_l,
		     LOAD(ms[0].cur_mask));
	cr_assert_eq(LOAD(ms[1].cur_mask), mask_r, "the restarted member got 0x%x, had 0x%x", LOAD(ms[1].cur_mask),
		     mask_r);
	cr_assert_eq(LOAD(ms[0].cur_gen), gen, "the generation moved from %d to %d", gen, LOAD(ms[0].cur_gen));
	cr_assert_eq(restarted_gen, gen, "the restarted member was assigned in generation %d, not %d",
		     restarted_gen, gen);
	feeder_finish(&f);
	members_exit(ms, 2);
	feeder_destroy(&f);
	broker_cleanup(&b);
}

/* ---- 4. broker restart with a group active ---------------------------- */

#define RS_PARTS 4
#define RS_BATCH 2000

struct seen {
	uint8_t *hit[RS_PARTS];      /* times each offset was processed */
	long processed;
};

/* Poll rk, processing (marking) records and committing after each batch,
 * until everything acknowledged in f is processed or timeout_ms. */
static void consume_all_acked(rd_kafka_t *rk, const struct feeder *f, struct seen *s, int timeout_ms)
{
	int64_t end = now_us() + (int64_t)timeout_ms * 1000;

	for (;;) {
		rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(RS_PARTS);
		int missing = 0;

		for (int i = 0; i < 200; i++) {
			rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, i ? 0 : 50);

			if (!m)
				break;
			if (!m->err && m->partition < RS_PARTS && m->offset < ACK_CAP) {
				rd_kafka_topic_partition_t *tp;

				s->hit[m->partition][m->offset]++;
				s->processed++;
				tp = rd_kafka_topic_partition_list_find(l, f->topic, m->partition);
				if (!tp)
					tp = rd_kafka_topic_partition_list_add(l, f->topic, m->partition);
				tp->offset = m->offset + 1;
			}
			rd_kafka_message_destroy(m);
		}
		if (l->cnt)
			rd_kafka_commit(rk, l, 0);   /* may fail across the restart: duplicates, counted */
		rd_kafka_topic_partition_list_destroy(l);
		for (int p = 0; p < RS_PARTS; p++)
			for (int64_t o = 0; o < f->end[p]; o++)
				missing += f->acked[p][o] && !s->hit[p][o];
		if (!missing)
			return;
		cr_assert_lt(now_us(), end, "%d acknowledged records not consumed after %d ms", missing, timeout_ms);
	}
}

static void restart_with_group(int sig)
{
	struct broker_proc b;
	struct feeder f;
	struct seen s = { 0 };
	rd_kafka_t *rk, *q;
	int64_t before[RS_PARTS], after[RS_PARTS], final[RS_PARTS];
	long dups = 0;

	broker_launch(&b, group_broker_args);
	feeder_init(&f, &b, "resume", RS_PARTS, 100);
	for (int p = 0; p < RS_PARTS; p++) {
		s.hit[p] = calloc(ACK_CAP, 1);
		cr_assert_not_null(s.hit[p]);
	}
	for (int i = 0; i < RS_BATCH; i++)
		feeder_produce(&f, i % RS_PARTS);
	feeder_finish(&f);

	rk = harness_group_consumer(&b, "g-restart", "resume", NULL);
	consume_all_acked(rk, &f, &s, 30000);
	q = offsets_reader(&b, "g-restart");
	committed_offsets(q, "resume", RS_PARTS, before);
	for (int p = 0; p < RS_PARTS; p++)
		cr_assert_eq(before[p], RS_BATCH / RS_PARTS, "partition %d committed %lld before the restart", p,
			     (long long)before[p]);

	broker_restart(&b, sig);   /* the consumer stays subscribed throughout */

	committed_offsets(q, "resume", RS_PARTS, after);
	for (int p = 0; p < RS_PARTS; p++)
		cr_assert_eq(after[p], before[p], "%s: partition %d committed %lld before the restart, %lld after",
			     strsignal(sig), p, (long long)before[p], (long long)after[p]);
	for (int i = 0; i < RS_BATCH; i++)
		feeder_produce(&f, i % RS_PARTS);
	feeder_finish(&f);
	consume_all_acked(rk, &f, &s, 60000);
	for (int p = 0; p < RS_PARTS; p++)
		for (int64_t o = 0; o < f.end[p]; o++)
			dups += s.hit[p][o] > 1 ? s.hit[p][o] - 1 : 0;
	/* the last commits land; then the group's position is the end */
	committed_offsets(q, "resume", RS_PARTS, final);
	fprintf(stderr, "groups: restart (%s): %ld produced, %ld processed, %ld duplicates; committed after: "
		"%lld %lld %lld %lld\n", strsignal(sig), f.ok, s.processed, dups, (long long)final[0],
		(long long)final[1], (long long)final[2], (long long)final[3]);
	for (int p = 0; p < RS_PARTS; p++)
		cr_assert_eq(final[p], f.end[p], "partition %d: committed %lld, end %lld", p, (long long)final[p],
			     (long long)f.end[p]);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	rd_kafka_destroy(q);
	for (int p = 0; p < RS_PARTS; p++)
		free(s.hit[p]);
	feeder_destroy(&f);
	broker_cleanup(&b);
}

Test(groups, sigterm_restart_keeps_committed_offsets_and_consumer_resumes, .timeout = 120)
{
	restart_with_group(SIGTERM);
}

Test(groups, sigkill_restart_keeps_committed_offsets_and_consumer_resumes, .timeout = 120)
{
	restart_with_group(SIGKILL);
}
