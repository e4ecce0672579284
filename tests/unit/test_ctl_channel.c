/* tests/unit/test_ctl_channel.c — the controller channel (control/
 * ctl_channel.c) between three real quorums (raft_uv in temporary
 * directories, each voter's controller port on loopback) in this process,
 * driven by a test loop as the control threads would drive them:
 *
 * - a record proposed on a node that does not lead goes to the leader,
 *   which proposes it; the proposer's continuation runs once its own node
 *   applied that index, with what applying it did there;
 * - a heartbeat from a node that does not lead is served by the leader's
 *   handler and answered (0 and unfenced, or ESTALE); so is a DESCRIBE
 *   (DescribeQuorum forwarded), with the bytes the leader's handler made;
 * - an ELECT (ElectLeaders forwarded) waits while the leader does not
 *   serve it yet, is handed to the leader's handler and answered when
 *   that handler answers, later; one whose leader goes before it answers
 *   ends with -ENOTCONN (and the late answer goes nowhere);
 * - a proposal made while the leader is gone waits for the next leader and
 *   is applied once, on every node;
 * - an observer (not a voter: a broker-only node) fetches the committed
 *   records, a snapshot of the state first when the voters no longer keep
 *   the records it lacks, follows the leader and proposes through it.
 *
 * The state machine here is the list of records each node applied; the
 * "what applying it did" is the index it was applied at. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <time.h>

#include "control/ctl_internal.h"
#include "control/meta_features.h"
#include "control/metalog.h"
#include "control/quorum.h"
#include "helpers.h"

#define N 3                             /* voters 0..N-1 */
#define OBS N                           /* nodes[OBS]: the observer, opened by its test */
#define NT (N + 1)
#define WAIT_MS 30000

struct node {
	struct quorum *q;
	struct ctl *ctl;                /* a stub: the channel reads its clock */
	struct ctl_channel *ch;
	char dir[512];
	uint16_t port;
	char *applied[256];             /* what it applied, by index */
	int closed;
	const char *unseen;             /* a record applied without the channel told
					 * (as a snapshot's records are) */
};

static struct node nodes[NT];
static char *base;
static struct quorum_voter voters[N];
static struct ctl_channel_voter cvoters[N];

/* what the leader's heartbeat handler saw, and answers */
static int32_t hb_id = -1;
static int64_t hb_epoch = -1;
static int16_t hb_mv = -1;
static int hb_answer;

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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

static void node_apply(void *arg, uint64_t index, const void *buf, size_t len)
{
	struct node *n = arg;
	struct metalog_applied a = { .type = META_REC_PRODUCER_IDS, .pid_start = (int64_t)index };

	cr_assert_lt(index, 256);
	n->applied[index] = strndup(buf, len);
	if (n->unseen && strlen(n->unseen) == len && !memcmp(n->unseen, buf, len))
		return;
	ctl_channel_keep(n->ch, index, buf, len);
	ctl_channel_applied(n->ch, index, 0, &a);
}

/* The state: every record applied, as "index record\n" lines. */
static int node_snapshot(void *arg, void **buf, size_t *len)
{
	struct node *n = arg;
	char *b = malloc(65536);
	size_t off = 0;

	cr_assert(b);
	for (int k = 1; k < 256; k++)
		if (n->applied[k])
			off += (size_t)snprintf(b + off, 65536 - off, "%d %s\n", k, n->applied[k]);
	*buf = b;
	*len = off;
	return 0;
}

static int node_restore(void *arg, const void *buf, size_t len)
{
	struct node *n = arg;
	char *text = strndup(buf, len), *save = NULL;

	for (int k = 0; k < 256; k++) {
		free(n->applied[k]);
		n->applied[k] = NULL;
	}
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		int k = atoi(l);

		cr_assert(k > 0 && k < 256 && strchr(l, ' '));
		n->applied[k] = strdup(strchr(l, ' ') + 1);
	}
	free(text);
	if (n->ch)
		ctl_channel_restored(n->ch);
	return 0;
}

static const struct quorum_ops ops = { .apply = node_apply, .snapshot = node_snapshot, .restore = node_restore };

static int turn(void)
{
	struct pollfd p[NT];
	int np = 0, timeout = 50, work = 0;

	for (int i = 0; i < NT; i++) {
		int t;

		if (!nodes[i].q)
			continue;
		t = quorum_timeout_ms(nodes[i].q);
		if (t >= 0 && t < timeout)
			timeout = t;
		p[np].fd = quorum_fd(nodes[i].q);
		p[np++].events = POLLIN;
	}
	if (np)
		poll(p, (nfds_t)np, timeout);
	for (int i = 0; i < NT; i++) {
		if (!nodes[i].q)
			continue;
		nodes[i].ctl->now_ms = (int64_t)mono_ms();
		work += quorum_poll(nodes[i].q);
		if (nodes[i].q && !nodes[i].closed)
			work += ctl_channel_tick(nodes[i].ch);
	}
	return work;
}

static bool run_until(bool (*cond)(void *), void *arg)
{
	uint64_t end = mono_ms() + WAIT_MS;

	while (!cond(arg)) {
		if (mono_ms() > end)
			return false;
		turn();
	}
	return true;
}

static void node_closed(void *arg)
{
	((struct node *)arg)->q = NULL;
}

static bool is_closed(void *arg)
{
	return ((struct node *)arg)->q == NULL;
}

static void node_close(struct node *n)
{
	if (!n->q)
		return;
	n->closed = 1;
	ctl_channel_close(n->ch);
	quorum_close(n->q, node_closed, n);
	cr_assert(run_until(is_closed, n), "a node did not close");
}

static void setup(void)
{
	struct quorum_voter *v = voters;
	struct ctl_channel_voter *cv = cvoters;

	signal(SIGPIPE, SIG_IGN);
	memset(nodes, 0, sizeof(nodes));
	base = test_tmpdir();
	for (int i = 0; i < N; i++) {
		nodes[i].port = free_port();
		snprintf(nodes[i].dir, sizeof(nodes[i].dir), "%s/n%d", base, i);
		v[i] = (struct quorum_voter){ .node_id = i, .host = "127.0.0.1", .port = nodes[i].port };
		cv[i].id = i;
		snprintf(cv[i].address, sizeof(cv[i].address), "127.0.0.1:%u", nodes[i].port);
	}
	for (int i = 0; i < N; i++) {
		struct quorum_config cfg = {
			.node_id = i, .dir = nodes[i].dir, .voters = v, .nvoters = N, .cluster_id = "chan-test",
			.election_timeout_ms = 1000, .heartbeat_timeout_ms = 100, .connect_retry_ms = 100,
			.pre_vote = 1, .channel_accept = ctl_channel_accept,
		};
		char err[512] = "";

		nodes[i].ctl = calloc(1, sizeof(*nodes[i].ctl));
		nodes[i].ctl->now_ms = (int64_t)mono_ms();
		cr_assert_eq(ctl_channel_create(nodes[i].ctl, i, cv, N, &nodes[i].ch), 0);
		cfg.channel_arg = nodes[i].ch;
		cr_assert_eq(quorum_open(&cfg, &ops, &nodes[i], &nodes[i].q, err, sizeof(err)), 0, "%s", err);
		ctl_channel_bind(nodes[i].ch, nodes[i].q);
	}
}

static void teardown(void)
{
	for (int i = 0; i < NT; i++)
		node_close(&nodes[i]);
	for (int i = 0; i < NT; i++) {
		ctl_channel_free(nodes[i].ch);
		free(nodes[i].ctl);
		for (int k = 0; k < 256; k++)
			free(nodes[i].applied[k]);
	}
	test_rmrf(base);
	free(base);
}

TestSuite(ctl_channel, .init = setup, .fini = teardown, .timeout = 120);

/* Every open node names the same leader, which knows it leads. */
static bool agreed(void *arg)
{
	int *leader = arg, l = -2;

	for (int i = 0; i < N; i++) {
		if (!nodes[i].q)
			continue;
		if (quorum_leader(nodes[i].q) < 0 || (l != -2 && quorum_leader(nodes[i].q) != l))
			return false;
		l = quorum_leader(nodes[i].q);
	}
	if (l < 0 || !nodes[l].q || !quorum_is_leader(nodes[l].q))
		return false;
	*leader = l;
	return true;
}

/* A follower's channel holds its connection to the leader. */
static bool connected(void *arg)
{
	struct ctl_channel_stats st;

	ctl_channel_stats(((struct node *)arg)->ch, &st);
	return st.connected;
}

struct outcome {
	int done, err;
	int64_t index;                  /* pid_start: the index it was applied at */
	struct node *at;                /* the proposer */
	char *seen;                     /* what its node had applied there, when done ran */
};

static void proposed(void *cookie, int err, const struct metalog_applied *a)
{
	struct outcome *o = cookie;

	o->done++;
	o->err = err;
	o->index = a ? a->pid_start : -1;
	if (a && a->pid_start > 0 && a->pid_start < 256 && o->at->applied[a->pid_start])
		o->seen = strdup(o->at->applied[a->pid_start]);
}

static bool is_done(void *arg)
{
	return ((struct outcome *)arg)->done > 0;
}

struct hb {
	int done, err, fenced;
};

static void hb_answered(void *cookie, int err, int fenced)
{
	struct hb *h = cookie;

	h->done++;
	h->err = err;
	h->fenced = fenced;
}

static bool hb_done(void *arg)
{
	return ((struct hb *)arg)->done > 0;
}

static int serve_hb(struct ctl *ctl, int32_t id, int64_t epoch, int16_t mv_max, int *fenced)
{
	(void)ctl;
	hb_id = id;
	hb_epoch = epoch;
	hb_mv = mv_max;
	*fenced = 0;
	return hb_answer;
}

struct ds {
	int done, err;
	char view[64];
};

static void ds_answered(void *cookie, int err, const void *buf, size_t len)
{
	struct ds *d = cookie;

	d->done++;
	d->err = err;
	snprintf(d->view, sizeof(d->view), "%.*s", (int)len, (const char *)buf);
}

static bool ds_done(void *arg)
{
	return ((struct ds *)arg)->done > 0;
}

static int serve_ds(struct ctl *ctl, void **buf, size_t *len)
{
	(void)ctl;
	*buf = strdup("the leader's view");
	*len = strlen(*buf);
	return 0;
}

/* what the leader's ELECT handler was handed, its answer owed */
static void *el_token;
static char el_req[64];

static int serve_el(struct ctl *ctl, const void *req, size_t len, void *token)
{
	(void)ctl;
	snprintf(el_req, sizeof(el_req), "%.*s", (int)len, (const char *)req);
	el_token = token;
	return 0;
}

static bool el_handed(void *arg)
{
	(void)arg;
	return el_token != NULL;
}

struct el {
	int done, err;
	char answer[64];
};

static void el_answered(void *cookie, int err, const void *buf, size_t len)
{
	struct el *e = cookie;

	e->done++;
	e->err = err;
	snprintf(e->answer, sizeof(e->answer), "%.*s", (int)len, buf ? (const char *)buf : "");
}

static bool el_done(void *arg)
{
	return ((struct el *)arg)->done > 0;
}

/* How many nodes applied rec, and at one index on all of them. */
static int applied_on(const char *rec, int64_t *index)
{
	int count = 0;

	for (int i = 0; i < N; i++)
		for (int k = 1; k < 256; k++)
			if (nodes[i].applied[k] && !strcmp(nodes[i].applied[k], rec)) {
				if (count && *index != k)
					return -1;
				*index = k;
				count++;
			}
	return count;
}

Test(ctl_channel, a_follower_proposes_through_the_leader_and_heartbeats_to_it)
{
	struct outcome o = { 0 };
	struct hb h = { 0 };
	int leader = -1, f;
	int64_t at = 0;

	cr_assert(run_until(agreed, &leader), "no leader");
	f = (leader + 1) % N;
	cr_assert(run_until(connected, &nodes[f]), "node %d did not connect to the leader's channel", f);

	o.at = &nodes[f];
	cr_assert_eq(ctl_channel_propose(nodes[f].ch, "forwarded-1", 11, proposed, &o), 0);
	cr_assert(run_until(is_done, &o), "the forwarded proposal never completed");
	cr_assert_eq(o.err, 0, "err %d", o.err);
	cr_assert_gt(o.index, 0);
	/* the continuation ran once the proposer's own node had applied it */
	cr_assert(o.seen && !strcmp(o.seen, "forwarded-1"), "applied at %lld on the proposer: %s",
		  (long long)o.index, o.seen ? o.seen : "(nothing yet)");
	free(o.seen);
	cr_assert_geq(applied_on("forwarded-1", &at), 2);
	cr_assert_eq(at, o.index);

	/* heartbeats: the leader's handler, then its answer */
	ctl_channel_serve_heartbeats(nodes[leader].ch, serve_hb);
	hb_answer = 0;
	cr_assert_eq(ctl_channel_heartbeat(nodes[f].ch, 5, 77, hb_answered, &h), 0);
	cr_assert(run_until(hb_done, &h), "no heartbeat answer");
	cr_assert_eq(h.err, 0);
	cr_assert_eq(h.fenced, 0);
	cr_assert_eq(hb_id, 5);
	cr_assert_eq(hb_epoch, 77);
	cr_assert_eq(hb_mv, META_MV_MAX, "the heartbeat says the highest metadata.version the broker supports");
	memset(&h, 0, sizeof(h));
	hb_answer = -ESTALE;
	cr_assert_eq(ctl_channel_heartbeat(nodes[f].ch, 5, 76, hb_answered, &h), 0);
	cr_assert(run_until(hb_done, &h), "no heartbeat answer");
	cr_assert_eq(h.err, -ESTALE);

	/* DescribeQuorum forwarded: answered with the leader's view */
	{
		struct ds d = { 0 };

		for (int i = 0; i < N; i++)
			ctl_channel_serve_describe(nodes[i].ch, serve_ds);
		cr_assert_eq(ctl_channel_describe(nodes[f].ch, ds_answered, &d), 0);
		cr_assert(run_until(ds_done, &d), "no DESCRIBE answer");
		cr_assert_eq(d.err, 0, "err %d", d.err);
		cr_assert_str_eq(d.view, "the leader's view");
		cr_assert_eq(d.done, 1);
	}
}

/* A voter that installs the leader's snapshot (libraft's InstallSnapshot)
 * takes every record in it without ctl_channel_applied: the node's
 * applied index moves past them at once. A proposal of its own answered at
 * such an index ends then (passed over: -ESTALE, its outcome unknown
 * here), not when a later record is applied, which an idle cluster may
 * never write: a restarted node waited forever on its registration (CI,
 * test_disk_failures.py). Here the proposer's state machine takes its
 * record without telling the channel, as an install does, and nothing is
 * proposed after it. */
Test(ctl_channel, a_proposal_a_snapshot_passed_over_ends_without_a_later_record)
{
	struct outcome o = { 0 };
	int leader = -1, f;
	int64_t at = 0;

	cr_assert(run_until(agreed, &leader), "no leader");
	f = (leader + 1) % N;
	cr_assert(run_until(connected, &nodes[f]), "node %d did not connect to the leader's channel", f);
	nodes[f].unseen = "in-a-snapshot";
	o.at = &nodes[f];
	cr_assert_eq(ctl_channel_propose(nodes[f].ch, "in-a-snapshot", 13, proposed, &o), 0);
	cr_assert(run_until(is_done, &o), "the proposal its node passed over never ended");
	cr_assert_eq(o.done, 1);
	cr_assert_eq(o.err, -ESTALE, "err %d: passed over, its outcome unknown here", o.err);
	/* it was committed, on every node: the proposer's end says only that
	 * its own node applied it; the third learns the commit index with the
	 * leader's next append or heartbeat */
	for (uint64_t end = mono_ms() + 5000; applied_on("in-a-snapshot", &at) < N && mono_ms() < end;)
		turn();
	cr_assert_eq(applied_on("in-a-snapshot", &at), N);
	free(o.seen);
}

Test(ctl_channel, a_proposal_made_without_a_leader_goes_to_the_next_one)
{
	struct outcome o = { 0 };
	int leader = -1, f, next = -1;
	int64_t at = 0;

	cr_assert(run_until(agreed, &leader), "no leader");
	f = (leader + 1) % N;
	node_close(&nodes[leader]);
	/* the leader is gone: the follower's proposal waits for the next */
	o.at = &nodes[f];
	cr_assert_eq(ctl_channel_propose(nodes[f].ch, "after-the-leader", 16, proposed, &o), 0);
	cr_assert(run_until(is_done, &o), "the proposal never completed");
	cr_assert_eq(o.err, 0, "err %d", o.err);
	cr_assert(o.seen && !strcmp(o.seen, "after-the-leader"));
	free(o.seen);
	cr_assert(run_until(agreed, &next), "no next leader");
	cr_assert_neq(next, leader);
	/* once, at one index, on both nodes left */
	for (uint64_t end = mono_ms() + 5000; applied_on("after-the-leader", &at) < 2 && mono_ms() < end;)
		turn();
	cr_assert_eq(applied_on("after-the-leader", &at), 2);
	cr_assert_eq(at, o.index);
}

Test(ctl_channel, an_elect_is_answered_when_the_leaders_handler_answers)
{
	struct el e = { 0 };
	int leader = -1, f;

	cr_assert(run_until(agreed, &leader), "no leader");
	f = (leader + 1) % N;
	cr_assert(run_until(connected, &nodes[f]), "node %d did not connect to the leader's channel", f);

	/* no handler on the leader yet ("not serving": EAGAIN): it waits */
	cr_assert_eq(ctl_channel_elect(nodes[f].ch, "elect-1", 7, 30000, el_answered, &e), 0);
	for (uint64_t end = mono_ms() + 1000; mono_ms() < end;)
		turn();
	cr_assert_eq(e.done, 0, "answered (err %d) before the leader served it", e.err);
	for (int i = 0; i < N; i++)
		ctl_channel_serve_elect(nodes[i].ch, serve_el);
	cr_assert(run_until(el_handed, NULL), "the leader's handler never got it");
	cr_assert_str_eq(el_req, "elect-1");
	/* the answer is the handler's, when it comes */
	for (int i = 0; i < 20; i++)
		turn();
	cr_assert_eq(e.done, 0);
	ctl_channel_elect_answer(nodes[leader].ch, el_token, 0, "codes", 5);
	el_token = NULL;
	cr_assert(run_until(el_done, &e), "no ELECT answer");
	cr_assert_eq(e.err, 0, "err %d", e.err);
	cr_assert_str_eq(e.answer, "codes");
	cr_assert_eq(e.done, 1);
	{
		struct ctl_channel_stats st;

		ctl_channel_stats(nodes[f].ch, &st);
		cr_assert_eq(st.elect_forwarded, 1, "sent again after EAGAIN, counted once: %llu",
			     (unsigned long long)st.elect_forwarded);
	}

	/* the leader goes before it answers: the asker hears -ENOTCONN */
	memset(&e, 0, sizeof(e));
	cr_assert_eq(ctl_channel_elect(nodes[f].ch, "elect-2", 7, 30000, el_answered, &e), 0);
	cr_assert(run_until(el_handed, NULL), "the leader's handler never got the second");
	node_close(&nodes[leader]);
	cr_assert(run_until(el_done, &e), "no end for an ELECT whose leader went");
	cr_assert_eq(e.err, -ENOTCONN, "err %d", e.err);
	ctl_channel_elect_answer(nodes[leader].ch, el_token, 0, "late", 4);   /* to no one */
	el_token = NULL;
	cr_assert_eq(e.done, 1);
}

Test(ctl_channel, an_elect_unanswered_within_its_timeout_is_timed_out)
{
	struct el e = { 0 };
	int leader = -1, f;
	uint64_t t0;

	cr_assert(run_until(agreed, &leader), "no leader");
	f = (leader + 1) % N;
	cr_assert(run_until(connected, &nodes[f]), "node %d did not connect to the leader's channel", f);
	/* no handler on the leader ("not serving"): it waits, until the
	 * client's TimeoutMs (300 ms here), not the 30 s default */
	t0 = mono_ms();
	cr_assert_eq(ctl_channel_elect(nodes[f].ch, "elect-3", 7, 300, el_answered, &e), 0);
	cr_assert(run_until(el_done, &e), "no end for an ELECT past its timeout");
	cr_assert_eq(e.err, -ETIMEDOUT, "err %d", e.err);
	cr_assert_lt(mono_ms() - t0, 25000, "timed out after %llu ms", (unsigned long long)(mono_ms() - t0));
	cr_assert_eq(e.done, 1);
}

/* The observer (node OBS): no directory, not among the voters. */
static void observer_open(void)
{
	struct node *o = &nodes[OBS];
	struct quorum_config cfg = {
		.node_id = OBS, .voters = voters, .nvoters = N, .cluster_id = "chan-test", .observer = 1,
		.channel_accept = ctl_channel_accept,
	};
	char err[512] = "";

	o->ctl = calloc(1, sizeof(*o->ctl));
	o->ctl->now_ms = (int64_t)mono_ms();
	cr_assert_eq(ctl_channel_create(o->ctl, OBS, cvoters, N, &o->ch), 0);
	cfg.channel_arg = o->ch;
	cr_assert_eq(quorum_open(&cfg, &ops, o, &o->q, err, sizeof(err)), 0, "%s", err);
	ctl_channel_bind(o->ch, o->q);
	cr_assert(quorum_is_observer(o->q));
}

/* The observer applied what voter `of` applied, at the same indexes. */
static bool caught_up(void *arg)
{
	struct node *v = &nodes[*(int *)arg], *o = &nodes[OBS];
	struct quorum_view qv;

	quorum_describe(v->q, &qv);
	if (quorum_last_index(o->q) < qv.last_applied)
		return false;
	for (int k = 1; k < 256; k++)
		if ((v->applied[k] == NULL) != (o->applied[k] == NULL) ||
		    (v->applied[k] && strcmp(v->applied[k], o->applied[k])))
			return false;
	return true;
}

static void leader_done(void *cookie, uint64_t index, int err)
{
	(void)index;
	cr_assert_eq(err, 0);
	(*(int *)cookie)++;
}

static bool count_is(void *arg)
{
	return *(int *)arg == 6;
}

static bool follows(void *arg)
{
	return quorum_leader(nodes[OBS].q) == *(int *)arg && connected(&nodes[OBS]);
}

Test(ctl_channel, an_observer_fetches_a_snapshot_then_the_records_and_proposes_through_the_leader)
{
	struct ctl_channel_stats st;
	struct outcome o = { 0 };
	int leader = -1, done = 0, n;
	int32_t ids[4];
	int64_t ends[4];
	int64_t at = 0;

	cr_assert(run_until(agreed, &leader), "no leader");
	/* the voters keep 3 records: the observer, 6 behind, needs a snapshot */
	for (int i = 0; i < N; i++)
		ctl_channel_keep_max(nodes[i].ch, 3);
	for (int i = 0; i < 6; i++) {
		char rec[32];

		snprintf(rec, sizeof(rec), "before-%d", i);
		cr_assert_eq(quorum_propose(nodes[leader].q, rec, strlen(rec), leader_done, &done), 0);
	}
	cr_assert(run_until(count_is, &done), "the leader's records were not applied");
	observer_open();
	cr_assert(run_until(caught_up, &leader), "the observer did not catch up");
	ctl_channel_stats(nodes[OBS].ch, &st);
	cr_assert_eq(st.snapshots_got, 1, "the observer restored %llu snapshots", (unsigned long long)st.snapshots_got);
	cr_assert_gt(st.fetches, 0);
	/* it follows the leader, which lists it as an observer */
	cr_assert(run_until(follows, &leader), "the observer does not follow the leader");
	n = ctl_channel_observers(nodes[leader].ch, ids, ends, 4);
	cr_assert_eq(n, 1);
	cr_assert_eq(ids[0], OBS);
	/* later records come as records, at the voters' indexes */
	o.at = &nodes[OBS];
	cr_assert_eq(ctl_channel_propose(nodes[OBS].ch, "from-the-observer", 17, proposed, &o), 0);
	cr_assert(run_until(is_done, &o), "the observer's proposal never completed");
	cr_assert_eq(o.err, 0, "err %d", o.err);
	cr_assert(o.seen && !strcmp(o.seen, "from-the-observer"));
	free(o.seen);
	for (uint64_t end = mono_ms() + 5000; applied_on("from-the-observer", &at) < N && mono_ms() < end;)
		turn();
	cr_assert_eq(applied_on("from-the-observer", &at), N);
	cr_assert_eq(at, o.index);
	cr_assert(run_until(caught_up, &leader), "the observer did not follow");
	ctl_channel_stats(nodes[OBS].ch, &st);
	cr_assert_eq(st.snapshots_got, 1, "a snapshot again where records were kept");
}
