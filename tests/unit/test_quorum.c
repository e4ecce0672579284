/* tests/unit/test_quorum.c — the Raft quorum that keeps the metadata log.
 *
 * quorum_fixture: the state machine adapter (control/quorum_fsm.c) given
 * to libraft's deterministic fixture (in-memory disk and network,
 * simulated time): three nodes apply one sequence, through a leader kill,
 * a re-election and a snapshot installed on the node that lagged.
 *
 * quorum: the real backend (raft_uv files in temporary directories, TCP on
 * loopback), several quorums in this one process, each on its own loop,
 * driven by a test loop that polls their fds as the control thread would:
 * three voters replicate 200 records, fail over, take the old leader back
 * and hand leadership over; a quorum of one commits and replays (log, or
 * snapshot then log) after a restart; what quorum_open refuses; one
 * voter port carrying raft and the controller channel (its handshake).
 *
 * Each node's "state" here is the list of records it applied, with their
 * indexes; a snapshot is that whole list. Checks compare the lists record
 * by record (seq_diff), never only their lengths. Waits have deadlines. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <endian.h>
#include <netinet/in.h>
#include <poll.h>
#include <raft.h>
#include <raft/fixture.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <time.h>

#include "control/quorum.h"
#include "control/quorum_fsm.h"
#include "control/quorum_transport.h"
#include "helpers.h"

/* ------------------------------------------------------ a node's state */

struct rec {
	uint64_t index;
	size_t len;
	char *data;
};

struct state {
	struct rec *v;
	int n, cap;
	int restores;
	uint64_t restored_last; /* the last record's index in the last snapshot restored */
	int32_t leader;         /* as leader_changed last said */
	int am_leader, leader_calls;
};

static void state_clear(struct state *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->v[i].data);
	s->n = 0;
}

static void state_free(struct state *s)
{
	state_clear(s);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static void state_push(struct state *s, uint64_t index, const void *buf, size_t len)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = realloc(s->v, (size_t)s->cap * sizeof(*s->v));
		cr_assert(s->v);
	}
	s->v[s->n].index = index;
	s->v[s->n].len = len;
	s->v[s->n].data = malloc(len + 1);
	memcpy(s->v[s->n].data, buf, len);
	s->v[s->n].data[len] = 0;
	s->n++;
}

static void rec_apply(void *arg, uint64_t index, const void *buf, size_t len)
{
	state_push(arg, index, buf, len);
}

/* n, then n x (index, len, bytes), host order: the test's own format */
static int rec_snapshot(void *arg, void **buf, size_t *len)
{
	struct state *s = arg;
	size_t sz = sizeof(int), off = 0;
	char *p;

	for (int i = 0; i < s->n; i++)
		sz += sizeof(uint64_t) + sizeof(size_t) + s->v[i].len;
	p = malloc(sz);
	if (!p)
		return -ENOMEM;
	memcpy(p, &s->n, sizeof(int));
	off = sizeof(int);
	for (int i = 0; i < s->n; i++) {
		memcpy(p + off, &s->v[i].index, sizeof(uint64_t));
		off += sizeof(uint64_t);
		memcpy(p + off, &s->v[i].len, sizeof(size_t));
		off += sizeof(size_t);
		memcpy(p + off, s->v[i].data, s->v[i].len);
		off += s->v[i].len;
	}
	*buf = p;
	*len = sz;
	return 0;
}

static int rec_restore(void *arg, const void *buf, size_t len)
{
	struct state *s = arg;
	const char *p = buf;
	size_t off = sizeof(int);
	int n;

	if (len < sizeof(int))
		return -EPROTO;
	memcpy(&n, p, sizeof(int));
	state_clear(s);
	for (int i = 0; i < n; i++) {
		uint64_t index;
		size_t l;

		cr_assert_leq(off + sizeof(uint64_t) + sizeof(size_t), len);
		memcpy(&index, p + off, sizeof(uint64_t));
		off += sizeof(uint64_t);
		memcpy(&l, p + off, sizeof(size_t));
		off += sizeof(size_t);
		cr_assert_leq(off + l, len);
		state_push(s, index, p + off, l);
		off += l;
	}
	s->restores++;
	s->restored_last = s->n ? s->v[s->n - 1].index : 0;
	return 0;
}

static void rec_leader(void *arg, int32_t leader, int am_leader)
{
	struct state *s = arg;

	s->leader = leader;
	s->am_leader = am_leader;
	s->leader_calls++;
}

static const struct quorum_ops rec_ops = {
	.apply = rec_apply,
	.snapshot = rec_snapshot,
	.restore = rec_restore,
	.leader_changed = rec_leader,
};

/* The first position where a and b differ (record bytes or index), or
 * where one ends before the other; -1 when they are the same sequence. */
static int seq_diff(const struct state *a, const struct state *b)
{
	int n = a->n < b->n ? a->n : b->n;

	for (int i = 0; i < n; i++)
		if (a->v[i].index != b->v[i].index || a->v[i].len != b->v[i].len ||
		    memcmp(a->v[i].data, b->v[i].data, a->v[i].len))
			return i;
	return a->n == b->n ? -1 : n;
}

/* s holds exactly "rec-000".."rec-<n-1>", in order, at increasing indexes. */
static void assert_records(const struct state *s, int n, const char *who)
{
	char want[32];

	cr_assert_eq(s->n, n, "%s applied %d records, not %d", who, s->n, n);
	for (int i = 0; i < n; i++) {
		snprintf(want, sizeof(want), "rec-%03d", i);
		cr_assert_str_eq(s->v[i].data, want, "%s: record %d is %s, not %s", who, i,
				 s->v[i].data, want);
		if (i)
			cr_assert_gt(s->v[i].index, s->v[i - 1].index, "%s: index %d not increasing", who, i);
	}
}

static void assert_same(const struct state *a, const struct state *b, const char *what)
{
	int d = seq_diff(a, b);

	cr_assert_eq(d, -1, "%s: the applied sequences differ at record %d (%d vs %d records: %s@%llu vs %s@%llu)",
		     what, d, a->n, b->n, d < a->n ? a->v[d].data : "(end)",
		     d < a->n ? (unsigned long long)a->v[d].index : 0ull, d < b->n ? b->v[d].data : "(end)",
		     d < b->n ? (unsigned long long)b->v[d].index : 0ull);
}

/* The check above can fail: a swapped pair, a changed index, a missing
 * tail are each seen. */
Test(quorum_check, seq_diff_sees_a_swap_an_index_and_a_missing_record)
{
	struct state a = { 0 }, b = { 0 };

	state_push(&a, 2, "rec-000", 7);
	state_push(&a, 3, "rec-001", 7);
	state_push(&a, 4, "rec-002", 7);
	state_push(&b, 2, "rec-000", 7);
	state_push(&b, 3, "rec-002", 7);
	state_push(&b, 4, "rec-001", 7);
	cr_assert_eq(seq_diff(&a, &b), 1);
	state_clear(&b);
	state_push(&b, 2, "rec-000", 7);
	state_push(&b, 3, "rec-001", 7);
	state_push(&b, 5, "rec-002", 7);
	cr_assert_eq(seq_diff(&a, &b), 2);
	state_clear(&b);
	state_push(&b, 2, "rec-000", 7);
	state_push(&b, 3, "rec-001", 7);
	cr_assert_eq(seq_diff(&a, &b), 2);
	state_push(&b, 4, "rec-002", 7);
	cr_assert_eq(seq_diff(&a, &b), -1);
	state_free(&a);
	state_free(&b);
}

/* ------------------------------------------- the adapter in the fixture */

struct fixture_apply {
	struct raft_apply req;
	int *ok, *lost;
};

static void fixture_apply_cb(struct raft_apply *req, int status, void *result)
{
	struct fixture_apply *fa = (struct fixture_apply *)req;

	(void)result;
	if (status == 0)
		(*fa->ok)++;
	else
		(*fa->lost)++;
	free(fa);
}

/* One entry on server i, as the quorum proposes it (framed). */
static void fixture_propose_raw(struct raft_fixture *f, unsigned i, struct raft_buffer b, int *ok, int *lost)
{
	struct fixture_apply *fa = calloc(1, sizeof(*fa));

	fa->ok = ok;
	fa->lost = lost;
	cr_assert_eq(raft_apply(raft_fixture_get(f, i), &fa->req, &b, 1, fixture_apply_cb), 0);
}

/* "rec-<first>".."rec-<first+n-1>" proposed on server i */
static void fixture_propose(struct raft_fixture *f, unsigned i, int first, int n, int *ok, int *lost)
{
	for (int k = first; k < first + n; k++) {
		struct raft_buffer b;
		char rec[16];
		int len = snprintf(rec, sizeof(rec), "rec-%03d", k % 1000);

		cr_assert_eq(quorum_fsm_frame(rec, (size_t)len, &b), 0);
		cr_assert_eq(b.len % 8, 0);
		fixture_propose_raw(f, i, b, ok, lost);
	}
}

struct want_counts {
	struct state *st;
	int n[3];               /* -1: not checked */
};

static bool counts_reached(struct raft_fixture *f, void *arg)
{
	struct want_counts *w = arg;

	(void)f;
	for (int i = 0; i < 3; i++)
		if (w->n[i] >= 0 && w->st[i].n < w->n[i])
			return false;
	return true;
}

Test(quorum_fixture, three_nodes_apply_one_sequence_through_a_kill_and_a_snapshot_install)
{
	static struct raft_fixture f;
	struct state st[3] = { { 0 } };
	struct quorum_fsm qf[3];
	struct raft_configuration conf;
	struct want_counts w = { .st = st };
	unsigned l1, l2;
	int ok = 0, lost = 0;

	cr_assert_eq(raft_fixture_initialize(&f), 0);
	for (int i = 0; i < 3; i++) {
		quorum_fsm_init(&qf[i], &rec_ops, &st[i]);
		cr_assert_eq(raft_fixture_grow(&f, &qf[i].fsm), 0);
		quorum_fsm_bind(&qf[i], raft_fixture_get(&f, (unsigned)i));
		/* snapshot often and keep little: a node that misses 30
		 * entries can only catch up by an InstallSnapshot */
		raft_set_snapshot_threshold(raft_fixture_get(&f, (unsigned)i), 16);
		raft_set_snapshot_trailing(raft_fixture_get(&f, (unsigned)i), 4);
	}
	cr_assert_eq(raft_fixture_configuration(&f, 3, &conf), 0);
	cr_assert_eq(raft_fixture_bootstrap(&f, &conf), 0);
	raft_configuration_close(&conf);
	cr_assert_eq(raft_fixture_start(&f), 0);

	cr_assert(raft_fixture_step_until_has_leader(&f, 10000));
	l1 = raft_fixture_leader_index(&f);
	fixture_propose(&f, l1, 0, 30, &ok, &lost);
	w.n[0] = w.n[1] = w.n[2] = 30;
	cr_assert(raft_fixture_step_until(&f, counts_reached, &w, 10000), "30 records not applied everywhere");
	cr_assert_eq(ok, 30);

	/* the leader dies; the other two elect one of them */
	raft_fixture_kill(&f, l1);
	cr_assert(raft_fixture_step_until_has_no_leader(&f, 10000));
	cr_assert(raft_fixture_step_until_has_leader(&f, 10000));
	l2 = raft_fixture_leader_index(&f);
	cr_assert_neq(l2, l1);
	fixture_propose(&f, l2, 30, 30, &ok, &lost);
	w.n[0] = w.n[1] = w.n[2] = 60;
	w.n[l1] = -1;
	cr_assert(raft_fixture_step_until(&f, counts_reached, &w, 10000), "60 records not applied on the two");
	cr_assert_eq(ok, 60);
	cr_assert_eq(st[l1].n, 30, "the dead node applied %d", st[l1].n);
	cr_assert_eq(st[l1].restores, 0);

	/* it comes back 30 entries behind a log trimmed to 4: the leader
	 * sends its snapshot, the adapter restores it, then the rest */
	raft_fixture_revive(&f, l1);
	w.n[l1] = 60;
	cr_assert(raft_fixture_step_until(&f, counts_reached, &w, 20000), "the revived node did not catch up (%d)",
		  st[l1].n);
	cr_assert_geq(st[l1].restores, 1, "the revived node caught up without a snapshot install");
	for (int i = 0; i < 3; i++) {
		assert_records(&st[i], 60, i == (int)l1 ? "revived node" : "node");
		cr_assert_eq(qf[i].restored, (uint64_t)st[i].restores);
		/* apply's index is raft's: the last record is its last entry */
		cr_assert_eq(st[i].v[59].index, raft_last_applied(raft_fixture_get(&f, (unsigned)i)));
	}
	assert_same(&st[0], &st[1], "nodes 0 and 1");
	assert_same(&st[0], &st[2], "nodes 0 and 2");
	cr_assert_eq(lost, 0);
	raft_fixture_close(&f);
	for (int i = 0; i < 3; i++)
		state_free(&st[i]);
}

/* An entry whose frame does not parse is applied nowhere, and nothing
 * after it either: every node stops at the same index rather than skip
 * it; quorum_error's fields say where. */
Test(quorum_fixture, an_entry_that_does_not_parse_stops_every_node_at_it)
{
	static struct raft_fixture f;
	struct state st[3] = { { 0 } };
	struct quorum_fsm qf[3];
	struct raft_configuration conf;
	struct raft_buffer bad = { .len = 16, .base = raft_malloc(16) };
	unsigned l;
	int ok = 0, lost = 0;

	cr_assert_eq(raft_fixture_initialize(&f), 0);
	for (int i = 0; i < 3; i++) {
		quorum_fsm_init(&qf[i], &rec_ops, &st[i]);
		cr_assert_eq(raft_fixture_grow(&f, &qf[i].fsm), 0);
		quorum_fsm_bind(&qf[i], raft_fixture_get(&f, (unsigned)i));
	}
	cr_assert_eq(raft_fixture_configuration(&f, 3, &conf), 0);
	cr_assert_eq(raft_fixture_bootstrap(&f, &conf), 0);
	raft_configuration_close(&conf);
	cr_assert_eq(raft_fixture_start(&f), 0);
	cr_assert(raft_fixture_step_until_has_leader(&f, 10000));
	l = raft_fixture_leader_index(&f);

	fixture_propose(&f, l, 0, 5, &ok, &lost);
	memset(bad.base, 0, bad.len);           /* frame version 0: not ours */
	fixture_propose_raw(&f, l, bad, &ok, &lost);
	fixture_propose(&f, l, 5, 5, &ok, &lost);
	raft_fixture_step_until_elapsed(&f, 5000);
	for (int i = 0; i < 3; i++) {
		assert_records(&st[i], 5, "a node past the bad entry");
		cr_assert_eq(qf[i].failed, -EPROTO);
		cr_assert_eq(qf[i].failed_index, st[i].v[4].index + 1, "stopped at %llu",
			     (unsigned long long)qf[i].failed_index);
	}
	cr_assert_eq(ok, 5);
	raft_fixture_close(&f);
	cr_assert_eq(ok + lost, 11, "every proposal's callback ran once the fixture closed");
	for (int i = 0; i < 3; i++)
		state_free(&st[i]);
}

/* ------------------------------------------------ the real backend */

#define MAXN 3
#define WAIT_MS 30000

struct member {
	struct quorum *q;       /* NULL when not open (or once closed) */
	struct state st;
	int closing;
};

struct cluster {
	int n;
	char *base;
	char dirs[MAXN][512];
	struct quorum_voter voters[MAXN];
	struct member m[MAXN];
	const char *cluster_id;
	unsigned snapshot_threshold, snapshot_trailing;
};

static struct cluster C;

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A loopback port nobody listens on now (bound to 0, read, closed). */
static uint16_t free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void cluster_init(int n)
{
	memset(&C, 0, sizeof(C));
	C.n = n;
	C.base = test_tmpdir();
	C.cluster_id = "q-test-cluster";
	C.snapshot_threshold = 64;
	C.snapshot_trailing = 16;
	for (int i = 0; i < n; i++) {
		snprintf(C.dirs[i], sizeof(C.dirs[i]), "%s/n%d", C.base, i);
		C.voters[i].node_id = i;        /* node.id 0 is raft id 1 */
		C.voters[i].host = "127.0.0.1";
		C.voters[i].port = free_port();
	}
}

static void member_closed(void *arg);
static int turn(void);

/* After a failed check, quorums may still be open (and writing): close
 * them before their directories go. */
static void teardown(void)
{
	uint64_t end = mono_ms() + 10000;

	for (int i = 0; i < MAXN; i++)
		if (C.m[i].q && !C.m[i].closing) {
			C.m[i].closing = 1;
			quorum_close(C.m[i].q, member_closed, &C.m[i]);
		}
	for (bool open = true; open && mono_ms() < end;) {
		turn();
		open = false;
		for (int i = 0; i < MAXN; i++)
			open = open || C.m[i].q;
	}
	if (C.base) {
		test_rmrf(C.base);
		free(C.base);
	}
	for (int i = 0; i < MAXN; i++)
		state_free(&C.m[i].st);
	C.base = NULL;
}

/* libuv writes to TCP with plain write(): a peer that closed gives
 * SIGPIPE, which sluiced blocks in every thread (quorum.c's note). */
static void setup(void)
{
	signal(SIGPIPE, SIG_IGN);
}

TestSuite(quorum, .init = setup, .fini = teardown, .timeout = 180);

static struct quorum_config config_of(int i)
{
	struct quorum_config cfg = {
		.node_id = C.voters[i].node_id,
		.dir = C.dirs[i],
		.voters = C.voters,
		.nvoters = C.n,
		.cluster_id = C.cluster_id,
		.election_timeout_ms = 1000,
		.heartbeat_timeout_ms = 100,
		.install_snapshot_timeout_ms = 2000,
		.connect_retry_ms = 100,
		.snapshot_threshold = C.snapshot_threshold,
		.snapshot_trailing = C.snapshot_trailing,
		.pre_vote = 1,
	};
	return cfg;
}

/* Open member i on a fresh state. */
static void member_open(int i)
{
	struct quorum_config cfg = config_of(i);
	char err[512] = "";
	int rc;

	state_free(&C.m[i].st);
	C.m[i].st.leader = -1;
	C.m[i].closing = 0;
	rc = quorum_open(&cfg, &rec_ops, &C.m[i].st, &C.m[i].q, err, sizeof(err));
	cr_assert_eq(rc, 0, "quorum_open node %d: %s (%s)", i, strerror(-rc), err);
	cr_assert_eq(quorum_node_id(C.m[i].q), C.voters[i].node_id);
}

static void member_closed(void *arg)
{
	struct member *m = arg;

	m->q = NULL;
	m->closing = 0;
}

/* One turn of the test's loop: poll() every open quorum's fd with the
 * smallest of their timeouts (100 ms at most), then run each one. */
static int turn(void)
{
	struct pollfd p[MAXN];
	int np = 0, timeout = 100, work = 0;

	for (int i = 0; i < C.n; i++) {
		int t;

		if (!C.m[i].q)
			continue;
		t = quorum_timeout_ms(C.m[i].q);
		if (t >= 0 && t < timeout)
			timeout = t;
		p[np].fd = quorum_fd(C.m[i].q);
		p[np].events = POLLIN;
		np++;
	}
	if (np)
		poll(p, (nfds_t)np, timeout);
	for (int i = 0; i < C.n; i++)
		if (C.m[i].q)
			work += quorum_poll(C.m[i].q);
	return work;
}

/* Turn until cond holds; false after ms. */
static bool run_until(bool (*cond)(void *), void *arg, int ms)
{
	uint64_t end = mono_ms() + (uint64_t)ms;

	while (!cond(arg)) {
		if (mono_ms() > end)
			return false;
		turn();
	}
	return true;
}

static bool member_is_closed(void *arg)
{
	return ((struct member *)arg)->q == NULL;
}

static void member_close(int i)
{
	C.m[i].closing = 1;
	quorum_close(C.m[i].q, member_closed, &C.m[i]);
	cr_assert(run_until(member_is_closed, &C.m[i], WAIT_MS), "node %d did not close", i);
}

/* Every open member knows the same leader, an open member other than
 * `not`, which knows it leads (and was told so); leader is its index. */
struct agreed {
	int leader;
	int not;                /* a member that may not be the leader, or -1 */
};

static bool leader_agreed(void *arg)
{
	struct agreed *a = arg;
	int32_t id = -2;

	for (int i = 0; i < C.n; i++) {
		int32_t l;

		if (!C.m[i].q)
			continue;
		l = quorum_leader(C.m[i].q);
		if (l < 0 || (id != -2 && l != id))
			return false;
		id = l;
	}
	for (int i = 0; i < C.n; i++)
		if (C.m[i].q && C.voters[i].node_id == id && i != a->not && quorum_is_leader(C.m[i].q) &&
		    C.m[i].st.am_leader && C.m[i].st.leader == id) {
			a->leader = i;
			return true;
		}
	return false;
}

static int wait_leader(int not)
{
	struct agreed a = { .leader = -1, .not = not };

	cr_assert(run_until(leader_agreed, &a, WAIT_MS), "no leader agreed on within %d ms", WAIT_MS);
	return a.leader;
}

struct pending {
	int done, err;
	uint64_t index;
};

static void pending_done(void *cookie, uint64_t index, int err)
{
	struct pending *p = cookie;

	cr_assert_eq(p->done, 0, "done ran twice");
	p->done = 1;
	p->err = err;
	p->index = index;
}

static bool pending_is_done(void *arg)
{
	return ((struct pending *)arg)->done;
}

struct all_done {
	struct pending *p;
	int n;
};

static bool all_done(void *arg)
{
	struct all_done *a = arg;

	for (int i = 0; i < a->n; i++)
		if (!a->p[i].done)
			return false;
	return true;
}

/* "rec-<first>".. proposed on member i; every done waited for and 0. */
static void propose_records(int i, int first, int n)
{
	struct pending *p = calloc((size_t)n, sizeof(*p));
	struct all_done a = { p, n };
	char rec[16];

	for (int k = 0; k < n; k++) {
		int len = snprintf(rec, sizeof(rec), "rec-%03d", first + k);
		int rc = quorum_propose(C.m[i].q, rec, (size_t)len, pending_done, &p[k]);

		cr_assert_eq(rc, 0, "propose %d on node %d: %s", first + k, i, strerror(-rc));
	}
	cr_assert(run_until(all_done, &a, WAIT_MS), "proposals not done within %d ms", WAIT_MS);
	for (int k = 0; k < n; k++) {
		cr_assert_eq(p[k].err, 0, "record %d: %s", first + k, strerror(-p[k].err));
		if (k)
			cr_assert_gt(p[k].index, p[k - 1].index);
	}
	/* done runs after this node applied the record, at that index */
	cr_assert_geq(C.m[i].st.n, first + n);
	for (int k = 0; k < n; k++) {
		bool found = false;

		for (int j = 0; j < C.m[i].st.n && !found; j++)
			found = C.m[i].st.v[j].index == p[k].index;
		cr_assert(found, "record %d's index %llu was not applied on its leader", first + k,
			  (unsigned long long)p[k].index);
	}
	free(p);
}

struct counts {
	int n;
};

static bool open_members_have(void *arg)
{
	int n = ((struct counts *)arg)->n;

	for (int i = 0; i < C.n; i++)
		if (C.m[i].q && C.m[i].st.n < n)
			return false;
	return true;
}

static void wait_applied(int n)
{
	struct counts c = { n };

	cr_assert(run_until(open_members_have, &c, WAIT_MS), "not every open node applied %d records", n);
}

struct transfer_wait {
	int done;
	int32_t leader;
};

static void transfer_done(void *cookie, int32_t leader)
{
	struct transfer_wait *t = cookie;

	t->done = 1;
	t->leader = leader;
}

static bool transfer_is_done(void *arg)
{
	return ((struct transfer_wait *)arg)->done;
}

/* raft_uv has written a snapshot in dir (a "snapshot-T-I-S.meta" file).
 * Taking one is asynchronous: it waits for the open segment to be closed
 * and is written by the threadpool, and a close before then drops it. */
static bool snapshot_written(void *arg)
{
	DIR *d = opendir(arg);
	struct dirent *e;
	bool found = false;

	cr_assert(d);
	while ((e = readdir(d)) && !found)
		found = !strncmp(e->d_name, "snapshot-", 9) && strstr(e->d_name, ".meta");
	closedir(d);
	return found;
}

/* raft_uv has written a snapshot of index >= min in dir
 * ("snapshot-TERM-INDEX-MSECS.meta"). */
struct snap_past {
	const char *dir;
	uint64_t min;
};

static bool snapshot_past(void *arg)
{
	struct snap_past *sp = arg;
	DIR *d = opendir(sp->dir);
	struct dirent *e;
	bool found = false;

	cr_assert(d);
	while ((e = readdir(d)) && !found) {
		unsigned long long term, index, ms;

		found = strstr(e->d_name, ".meta") &&
			sscanf(e->d_name, "snapshot-%llu-%llu-%llu", &term, &index, &ms) == 3 && index >= sp->min;
	}
	closedir(d);
	return found;
}

Test(quorum, three_voters_replicate_fail_over_take_a_node_back_and_hand_over)
{
	struct pending bar = { 0 };
	char name[32];
	int l1, l2, l3, f, rc;
	struct transfer_wait tw = { 0 };
	uint64_t l1_last;

	cluster_init(3);
	for (int i = 0; i < 3; i++)
		member_open(i);
	l1 = wait_leader(-1);

	/* a follower refuses, and says so */
	f = (l1 + 1) % 3;
	rc = quorum_propose(C.m[f].q, "x", 1, pending_done, &bar);
	cr_assert_eq(rc, -QUORUM_ENOTLEADER, "a follower's propose returned %d", rc);
	cr_assert_eq(quorum_barrier(C.m[f].q, pending_done, &bar), -QUORUM_ENOTLEADER);
	cr_assert_eq(quorum_transfer(C.m[f].q, -1, transfer_done, &tw), -QUORUM_ENOTLEADER);
	cr_assert_eq(bar.done, 0);

	/* the new leader's barrier, then 200 records through it */
	cr_assert_eq(quorum_barrier(C.m[l1].q, pending_done, &bar), 0);
	cr_assert(run_until(pending_is_done, &bar, WAIT_MS));
	cr_assert_eq(bar.err, 0);
	cr_assert_gt(bar.index, 0);
	propose_records(l1, 0, 200);
	wait_applied(200);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "node %d", i);
		assert_records(&C.m[i].st, 200, name);
	}
	assert_same(&C.m[l1].st, &C.m[(l1 + 1) % 3].st, "leader and a follower");
	assert_same(&C.m[l1].st, &C.m[(l1 + 2) % 3].st, "leader and the other follower");

	/* the leader closes: the other two elect one of them, which commits */
	l1_last = C.m[l1].st.v[199].index;
	member_close(l1);
	l2 = wait_leader(l1);
	cr_assert_neq(l2, l1);
	memset(&bar, 0, sizeof(bar));
	cr_assert_eq(quorum_barrier(C.m[l2].q, pending_done, &bar), 0);
	cr_assert(run_until(pending_is_done, &bar, WAIT_MS));
	cr_assert_eq(bar.err, 0);
	propose_records(l2, 200, 100);
	wait_applied(300);

	/* the old leader comes back on its directory, 100 entries behind a
	 * leader whose log was cut after a snapshot (threshold 64, trailing
	 * 16): it catches up through an InstallSnapshot over TCP, then the
	 * entries after it. A snapshot at index S keeps S-15..S: past
	 * l1_last + 16, l1_last + 1 (what the old leader needs next) is gone;
	 * at exactly l1_last + 16 the leader would still send it entries.
	 * Both the others: on a loaded machine the follower may win an
	 * election meanwhile and be the one that brings the old leader up to
	 * date, which it must then do with its own snapshot too */
	cr_assert(run_until(snapshot_past, &(struct snap_past){ C.dirs[l2], l1_last + 17 }, WAIT_MS),
		  "the leader wrote no snapshot past index %llu", (unsigned long long)l1_last + 16);
	cr_assert(run_until(snapshot_past, &(struct snap_past){ C.dirs[3 - l1 - l2], l1_last + 17 }, WAIT_MS),
		  "the follower wrote no snapshot past index %llu", (unsigned long long)l1_last + 16);
	member_open(l1);
	wait_applied(300);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), i == l1 ? "reopened node %d" : "node %d", i);
		assert_records(&C.m[i].st, 300, name);
	}
	cr_assert_gt(C.m[l1].st.restored_last, l1_last,
		     "the reopened node restored no snapshot of the leader's (last restored index %llu, its own "
		     "last %llu)", (unsigned long long)C.m[l1].st.restored_last, (unsigned long long)l1_last);
	assert_same(&C.m[l2].st, &C.m[l1].st, "the leader and the reopened node");
	assert_same(&C.m[l2].st, &C.m[3 - l1 - l2].st, "the leader and the follower");

	/* controlled shutdown: the leader hands over first */
	cr_assert_eq(quorum_transfer(C.m[l2].q, -1, transfer_done, &tw), 0);
	cr_assert(run_until(transfer_is_done, &tw, WAIT_MS));
	cr_assert_neq(tw.leader, C.voters[l2].node_id, "leadership did not move away");
	l3 = wait_leader(l2);
	cr_assert_neq(l3, l2);
	propose_records(l3, 300, 1);
	wait_applied(301);
	for (int i = 0; i < 3; i++)
		assert_records(&C.m[i].st, 301, "after the transfer");
	for (int i = 0; i < 3; i++)
		member_close(i);
}

static bool am_leader(void *arg)
{
	struct member *m = arg;

	return m->q && m->st.am_leader && quorum_is_leader(m->q);
}

/* A quorum of one: commits alone, and after a restart applies the same
 * records again, from the log (threshold not reached) or from a
 * snapshot and the entries after it. */
static void one_voter_restart(unsigned threshold, unsigned trailing, int want_restore)
{
	cluster_init(1);
	C.snapshot_threshold = threshold;
	C.snapshot_trailing = trailing;
	member_open(0);
	cr_assert(run_until(am_leader, &C.m[0], WAIT_MS), "a quorum of one did not elect itself");
	cr_assert_eq(C.m[0].st.leader, 0);
	propose_records(0, 0, 50);
	assert_records(&C.m[0].st, 50, "before the restart");
	if (want_restore)
		cr_assert(run_until(snapshot_written, C.dirs[0], WAIT_MS), "no snapshot written in %s", C.dirs[0]);
	member_close(0);

	member_open(0);
	cr_assert(run_until(am_leader, &C.m[0], WAIT_MS), "the restarted quorum of one did not lead");
	assert_records(&C.m[0].st, 50, "after the restart");
	if (want_restore)
		cr_assert_geq(C.m[0].st.restores, 1, "no snapshot was restored");
	else
		cr_assert_eq(C.m[0].st.restores, 0, "a snapshot was restored");
	propose_records(0, 50, 1);
	assert_records(&C.m[0].st, 51, "after the restart and one more");
	member_close(0);
}

Test(quorum, one_voter_commits_and_replays_its_log_after_a_restart)
{
	one_voter_restart(1024, 2048, 0);
}

Test(quorum, one_voter_restores_a_snapshot_then_the_rest_after_a_restart)
{
	one_voter_restart(16, 4, 1);
}

static bool replayed(void *arg)
{
	return C.m[0].st.n >= *(int *)arg;
}

/* A quorum of one closed right after proposals, their log writes still
 * in flight (as sluiced stops while the control thread proposes): the
 * close completes, every proposal's callback runs once, and a reopen
 * replays what was acknowledged. libraft closed in the middle of a write
 * (or its backend freed inside its close callback) crashed here under
 * load; 20 rounds. */
Test(quorum, a_close_with_writes_in_flight_finishes_them_and_answers_every_proposal)
{
	int acked = 0;

	cluster_init(1);
	for (int round = 0; round < 20; round++) {
		struct pending p[8];
		char rec[16];

		memset(p, 0, sizeof(p));
		member_open(0);
		cr_assert(run_until(am_leader, &C.m[0], WAIT_MS), "round %d: no leader", round);
		cr_assert(run_until(replayed, &acked, WAIT_MS), "round %d: %d of %d acknowledged records replayed",
			  round, C.m[0].st.n, acked);
		for (int k = 0; k < 8; k++) {
			int len = snprintf(rec, sizeof(rec), "r%02d-%d", round, k);

			cr_assert_eq(quorum_propose(C.m[0].q, rec, (size_t)len, pending_done, &p[k]), 0);
		}
		quorum_poll(C.m[0].q);      /* the appends start */
		member_close(0);
		for (int k = 0; k < 8; k++) {
			cr_assert(p[k].done, "round %d: proposal %d never answered", round, k);
			acked += p[k].err == 0;
		}
	}
}

Test(quorum, a_locked_directory_refuses_a_second_open)
{
	struct quorum_config cfg;
	struct quorum *q2 = NULL;
	char err[512] = "";
	int rc;

	cluster_init(1);
	member_open(0);
	cfg = config_of(0);
	rc = quorum_open(&cfg, &rec_ops, &C.m[1].st, &q2, err, sizeof(err));
	cr_assert_eq(rc, -EBUSY, "second open: %d (%s)", rc, err);
	cr_assert_null(q2);
	cr_assert(strstr(err, C.dirs[0]), "the message names no directory: %s", err);
	member_close(0);
	member_open(0);     /* the lock went with the close */
	member_close(0);
}

static int open_fails(const struct quorum_config *cfg, char *err, size_t errlen)
{
	struct quorum *q = NULL;
	struct state s = { 0 };
	int rc = quorum_open(cfg, &rec_ops, &s, &q, err, errlen);

	cr_assert_null(q);
	cr_assert_neq(err[0], 0, "no message");
	state_free(&s);
	return rc;
}

Test(quorum, a_node_not_among_the_voters_is_refused)
{
	struct quorum_config cfg;
	char err[512] = "";

	cluster_init(3);
	cfg = config_of(0);
	cfg.node_id = 7;
	cr_assert_eq(open_fails(&cfg, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "7") && strstr(err, "voters"), "message: %s", err);
}

Test(quorum, a_heartbeat_not_below_the_election_timeout_is_refused)
{
	struct quorum_config cfg;
	char err[512] = "";

	cluster_init(1);
	cfg = config_of(0);
	cfg.election_timeout_ms = 0;            /* the default, 1000 */
	cfg.heartbeat_timeout_ms = 1000;
	cr_assert_eq(open_fails(&cfg, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "heartbeat"), "message: %s", err);
}

Test(quorum, a_voter_that_is_not_ipv4_is_refused)
{
	const char *bad[] = { "localhost", "::1", "10.0.0", "" };
	struct quorum_config cfg;
	char err[512];

	cluster_init(3);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		C.voters[2].host = bad[k];
		cfg = config_of(0);
		err[0] = 0;
		cr_assert_eq(open_fails(&cfg, err, sizeof(err)), -EINVAL, "host '%s' accepted", bad[k]);
		cr_assert(strstr(err, "voter 2") && strstr(err, bad[k]) && strstr(err, "IPv4"),
			  "message: %s", err);
	}
}

Test(quorum, a_directory_of_another_cluster_or_voter_set_is_refused)
{
	struct quorum_config cfg;
	char err[512] = "";

	cluster_init(1);
	member_open(0);
	cr_assert(run_until(am_leader, &C.m[0], WAIT_MS));
	propose_records(0, 0, 3);
	member_close(0);

	C.cluster_id = "another-cluster";
	cfg = config_of(0);
	cr_assert_eq(open_fails(&cfg, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "q-test-cluster") && strstr(err, "another-cluster"), "message: %s", err);

	C.cluster_id = "q-test-cluster";
	C.n = 2;
	C.voters[1].node_id = 1;
	C.voters[1].host = "127.0.0.1";
	C.voters[1].port = free_port();
	cfg = config_of(0);
	err[0] = 0;
	cr_assert_eq(open_fails(&cfg, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "voters"), "message: %s", err);

	/* nothing was changed by the refusals: the right config opens it */
	C.n = 1;
	member_open(0);
	cr_assert(run_until(am_leader, &C.m[0], WAIT_MS));
	assert_records(&C.m[0].st, 3, "after the refusals");
	member_close(0);
}

/* A quorum of one may open its port (a combined node given its controller
 * listener, which broker-only nodes join) or no longer: the same node id
 * on the same directory, its identity file rewritten, its records kept.
 * Another node id is still refused. */
Test(quorum, a_quorum_of_one_opens_its_port_or_not_on_the_same_directory)
{
	struct quorum_config cfg;
	char err[512] = "", cid[64], vs[256], want[256];
	uint16_t port;

	cluster_init(1);
	port = C.voters[0].port;
	C.voters[0].port = 0;                /* no socket */
	member_open(0);
	cr_assert(run_until(am_leader, &C.m[0], WAIT_MS));
	propose_records(0, 0, 3);
	member_close(0);
	cr_assert_eq(quorum_identity_read(C.dirs[0], cid, sizeof(cid), vs, sizeof(vs)), 0);
	cr_assert_str_eq(vs, "0@127.0.0.1:0");

	C.voters[0].port = port;             /* its controller port */
	member_open(0);
	cr_assert(run_until(am_leader, &C.m[0], WAIT_MS));
	assert_records(&C.m[0].st, 3, "with its port");
	propose_records(0, 3, 1);
	member_close(0);
	cr_assert_eq(quorum_identity_read(C.dirs[0], cid, sizeof(cid), vs, sizeof(vs)), 0);
	snprintf(want, sizeof(want), "0@127.0.0.1:%u", port);
	cr_assert_str_eq(vs, want);

	C.voters[0].port = 0;                /* and back */
	member_open(0);
	cr_assert(run_until(am_leader, &C.m[0], WAIT_MS));
	assert_records(&C.m[0].st, 4, "without its port again");
	member_close(0);

	C.voters[0].node_id = 7;
	cfg = config_of(0);
	cr_assert_eq(open_fails(&cfg, err, sizeof(err)), -EINVAL, "another node id on the directory");
	cr_assert(!quorum_same_lone_voter("0@127.0.0.1:0", "7@127.0.0.1:0"));
	cr_assert(!quorum_same_lone_voter("0@127.0.0.1:0", "0@127.0.0.1:9,1@127.0.0.1:8"));
	cr_assert(quorum_same_lone_voter("10@127.0.0.1:0", "10@10.0.0.1:9093"));
	cr_assert(!quorum_same_lone_voter("10@127.0.0.1:0", "1@127.0.0.1:0"));
}

/* A port another socket holds: raft_start fails (libraft says only "I/O
 * error", the transport kept why): -EADDRINUSE, a message that names the
 * address and says it is in use, not a damaged log; and the half-started
 * raft is closed without a leak (the suite runs under ASan's leak
 * check). */
Test(quorum, a_port_in_use_fails_the_open_and_names_the_address)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct quorum_config cfg;
	char err[512] = "", want[64];
	int fd, one = 1;

	cluster_init(1);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_port = htons(C.voters[0].port);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(fd, 1), 0);
	cfg = config_of(0);
	cr_assert_eq(open_fails(&cfg, err, sizeof(err)), -EADDRINUSE, "message: %s", err);
	snprintf(want, sizeof(want), "127.0.0.1:%u", C.voters[0].port);
	cr_assert(strstr(err, want), "message: %s", err);
	cr_assert(strstr(err, "already in use"), "message: %s", err);
	close(fd);
	member_open(0);     /* the directory was left usable and unlocked */
	cr_assert(run_until(am_leader, &C.m[0], WAIT_MS));
	member_close(0);
}

/* ------------------------------------------------ the controller port */

/* What the controller channel's side of a voter's port received. */
struct chan_seen {
	int accepted;
	int32_t node;
	uv_stream_t *stream;
	char buf[64];
	size_t got;
	int connected, connect_status;
	uv_stream_t *out;
};

static struct chan_seen seen;

static void chan_accept(void *arg, struct uv_stream_s *stream, int32_t node)
{
	struct chan_seen *s = arg;

	s->accepted++;
	s->node = node;
	s->stream = stream;
}

static void chan_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct chan_seen *s = h->data;

	(void)suggested;
	buf->base = s->buf + s->got;
	buf->len = sizeof(s->buf) - s->got;
}

static void chan_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct chan_seen *s = st->data;

	(void)buf;
	if (n > 0)
		s->got += (size_t)n;
}

static void chan_connected(void *arg, struct uv_stream_s *stream, int status)
{
	struct chan_seen *s = arg;

	s->connected++;
	s->connect_status = status;
	s->out = stream;
}

static void stream_free(uv_handle_t *h)
{
	raft_free(h);
}

static bool chan_accepted(void *arg)
{
	return ((struct chan_seen *)arg)->accepted > 0;
}

static bool chan_read_8(void *arg)
{
	return ((struct chan_seen *)arg)->got >= 8;
}

static bool chan_dialled(void *arg)
{
	struct chan_seen *s = arg;

	return s->connected > 0 && s->accepted > 0;
}

static int raw_connect(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* The peer closed fd (the test loop turning meanwhile). */
static bool raw_closed(void *arg)
{
	int fd = *(int *)arg;
	char c;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

/* One port per voter carries raft and the controller channel: a channel
 * handshake is told from raft's by its first u64, the channel's owner gets
 * the stream with exactly the bytes after the handshake still unread, a
 * first u64 that is neither is closed, quorum_channel_connect reaches
 * another voter's channel side as its node id, and raft elects a leader
 * over the same ports meanwhile. */
Test(quorum, one_port_carries_raft_and_the_controller_channel)
{
	struct quorum_config cfg;
	uint64_t hs[2] = { htole64(QT_CHANNEL_MAGIC), htole64(7) }, junk = htole64(0xdeadbeefull);
	char msg[24], addr[64], err[512] = "";
	int fd, bad;

	memset(&seen, 0, sizeof(seen));
	cluster_init(2);
	for (int i = 0; i < 2; i++) {
		cfg = config_of(i);
		cfg.channel_accept = chan_accept;
		cfg.channel_arg = &seen;
		C.m[i].st.leader = -1;
		cr_assert_eq(quorum_open(&cfg, &rec_ops, &C.m[i].st, &C.m[i].q, err, sizeof(err)), 0, "%s", err);
	}
	/* handshake and the first bytes of the channel in one write */
	fd = raw_connect(C.voters[0].port);
	memcpy(msg, hs, 16);
	memcpy(msg + 16, "hello!!!", 8);
	cr_assert_eq(write(fd, msg, sizeof(msg)), (ssize_t)sizeof(msg));
	cr_assert(run_until(chan_accepted, &seen, WAIT_MS), "the channel connection was not handed over");
	cr_assert_eq(seen.node, 7);
	seen.stream->data = &seen;
	cr_assert_eq(uv_read_start(seen.stream, chan_alloc, chan_read), 0);
	cr_assert(run_until(chan_read_8, &seen, WAIT_MS), "the bytes after the handshake were not there");
	cr_assert_eq(seen.got, 8);
	cr_assert_eq(memcmp(seen.buf, "hello!!!", 8), 0);
	uv_close((uv_handle_t *)seen.stream, stream_free);
	close(fd);

	/* neither raft nor the channel: closed, nobody told */
	bad = raw_connect(C.voters[0].port);
	cr_assert_eq(write(bad, &junk, sizeof(junk)), (ssize_t)sizeof(junk));
	cr_assert(run_until(raw_closed, &bad, WAIT_MS), "a connection of neither kind was kept");
	cr_assert_eq(seen.accepted, 1);
	close(bad);

	/* voter 1 dials voter 0's channel */
	memset(&seen, 0, sizeof(seen));
	snprintf(addr, sizeof(addr), "localhost:%u", C.voters[0].port);
	cr_assert_eq(quorum_channel_connect(C.m[1].q, addr, chan_connected, &seen), 0);
	cr_assert(run_until(chan_dialled, &seen, WAIT_MS), "the channel connect did not complete");
	cr_assert_eq(seen.connect_status, 0);
	cr_assert_eq(seen.node, 1);
	uv_close((uv_handle_t *)seen.stream, stream_free);
	uv_close((uv_handle_t *)seen.out, stream_free);

	/* raft on the same ports */
	wait_leader(-1);
	propose_records(wait_leader(-1), 0, 5);
	wait_applied(5);
	member_close(0);
	member_close(1);
}
