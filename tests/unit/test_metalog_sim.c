/* tests/unit/test_metalog_sim.c — the controller's state machine (the
 * metadata image of control/metalog.h behind the adapter of
 * control/quorum_fsm.c) under libraft 0.15's deterministic fixture
 * (raft/fixture.h: in-memory disk and network, simulated time), many
 * seeds of a random schedule each, on 3 and on 5 servers.
 *
 * Each server's state is a real image (metalog_image_new): apply is
 * metalog_apply, snapshot metalog_snapshot, restore metalog_restore, as
 * control/ctl_quorum.c gives them to the quorum. Proposals are built with
 * the metalog builders against the image of a server that is leader (the
 * stable one mostly, sometimes a stale one cut off in a minority), framed
 * with quorum_fsm_frame as quorum_propose does, and handed to raft_apply:
 * topics created (from a small pool of names, so creates race creates and
 * deletes) and deleted, partitions grown, topic and broker configs set and
 * removed, producer id blocks, the NODE record.
 *
 * The schedule, one random action at a time (40 per seed), with simulated
 * time passing between them (10..600 ms):
 *   - a server killed (raft_fixture_kill: paused, its messages dropped) and
 *     later revived, or restarted on its simulated disk (below);
 *   - one-way links cut and healed (raft_fixture_saturate/desaturate), a
 *     server isolated, the network healed;
 *   - message loss: for a window of 0.2-2 s every link drops what arrives
 *     on it at a step with probability 10-50% (links re-drawn before every
 *     raft_fixture_step);
 *   - delay and reordering: per-server network latency (5-200 ms, at times
 *     400-900 ms, near the election timeout), changed mid-flight; disk
 *     latency 1-50 ms per server, fixed for the seed (the fixture completes
 *     requests by time: a latency changed mid-flight would reorder one
 *     server's appends, which no disk does);
 *   - elections: randomized election timeouts re-drawn (1000-2000 ms),
 *     raft_fixture_depose of the stable leader and raft_fixture_elect of a
 *     chosen server, each only when its preconditions hold (their checks
 *     are assert()s, compiled out in Debian's build, and both write
 *     followers' fields blind);
 *   - snapshots at small thresholds (3-20 entries, 2-6 trailing), so a
 *     server that was away catches up by InstallSnapshot (restore).
 * Then the network heals, every server comes back, a stable leader commits
 * two more records and every server must apply all its log.
 *
 * Restarts: the fixture has no restart of its own (kill/revive only pause
 * a server: its memory stays). A restart here closes the server's raft
 * (raft_close), replaces its image with an empty one and starts a new raft
 * on the same in-memory raft_io (raft_init, raft_start): it loads term,
 * vote, last snapshot and log from that "disk", which loses nothing, and
 * restores the snapshot into the new image. Pending disk and network
 * requests must be gone first (the fixture can flush only all servers at
 * once), so a server is restarted only after 3 s of simulated time dead.
 * The fixture's raft_io keeps its log as if it began at index 1, which
 * its own snapshot_put breaks; a shim between raft and three of its
 * methods (io_truncate, io_snapshot_put, io_load) keeps the log's real
 * first index (see there). Without it, a truncate after an InstallSnapshot
 * reads past the fixture's array (ASan) and a load after a snapshot hands
 * raft a misaligned log.
 *
 * libraft 0.15 itself: a follower can be left behind for as long as its
 * leader leads (see heal()); after healing, a leader is deposed (at most 5
 * times) when the servers do not converge within 10 s, and the runs count
 * it. Not fixed upstream either (a follower still answers with its
 * last_stored, and commits up to it on a heartbeat).
 *
 * Invariants, checked as the run goes and at its end:
 *   - at most one leader per term: after every fixture step, every server
 *     in the leader state (alive or not) is noted against its term; a
 *     second id for one term fails (the fixture checks only two leaders at
 *     the same instant);
 *   - each server applies increasing indexes (apply's index, and raft's
 *     last applied after every step, reset only by a restart);
 *   - state machine safety: every server that applies index i applies the
 *     same bytes, with the same outcome (metalog_apply's return, the
 *     producer id block it reserved) and reaches the same image (a 64-bit
 *     hash of metalog_snapshot's bytes after the apply);
 *   - no committed metadata lost: a proposal whose callback said 0 was
 *     applied, at its index, with its bytes; at the end the image of every
 *     server (metalog_snapshot's bytes) equals the replay, into a new image,
 *     of the records applied at each index, in index order;
 *   - producer id blocks of that replay never overlap (each starts at or
 *     after the previous one's end); topic ids it creates never repeat.
 * A run stops at the first violation and the test prints the seed.
 * SLUICE_SIM_SEED=N replays seed N alone (SLUICE_SIM_SERVERS=3 or 5 to run
 * only that size; SLUICE_SIM_TRACE=1 prints the schedule's actions).
 *
 * The checker can fail: metalog_sim_check runs the same seeds with one
 * server's image corrupted (a record it skips, a change of its own, an
 * image rolled back at the end) and each must be reported; the term, pid
 * block, topic id and index checks are fed bad input directly. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <raft.h>
#include <raft/fixture.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/election.h"
#include "control/meta_parts.h"
#include "control/metalog.h"
#include "control/quorum_fsm.h"

#define MAXS 5
#define ACTIONS 40
#define SEEDS 200
#define DEAD_BEFORE_RESTART 3000   /* ms dead before a restart: nothing of it in flight */
#define HEAL_MS 60000              /* simulated time to converge once healed */

enum sim_fault {
	FAULT_NONE,
	FAULT_SKIP,        /* the first server to apply a final record skips it */
	FAULT_CORRUPT,     /* ... makes a change of its own after applying it */
	FAULT_ROLLBACK,    /* server 2's image loses the last committed record at the end */
};

/* What the servers applied at one log index. */
struct entry {
	bool set;
	int by;                 /* the first server that applied it */
	uint8_t *rec;
	size_t len;
	int rc;
	int64_t pid_start, pid_end;
	uint64_t digest;        /* of the image after it */
};

struct server {
	struct sim *sim;
	int idx;
	struct metalog *ml;
	struct quorum_fsm qf;
	bool alive, restart_pending;
	raft_time dead_since;
	uint64_t last_apply_index;
	raft_index last_applied_seen;
	bool in_final;          /* applying the final records */
	/* the raft_io shim (see io_truncate): the index of the first entry
	 * the fixture's log holds, and the snapshot an install is writing */
	raft_index io_base, io_install;
	int (*orig_truncate)(struct raft_io *io, raft_index index);
	int (*orig_load)(struct raft_io *io, raft_term *term, raft_id *voted_for, struct raft_snapshot **snapshot,
			 raft_index *start_index, struct raft_entry **entries, size_t *n_entries);
	int (*orig_snapshot_put)(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
				 const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb);
};

struct sim_stats {
	unsigned long proposals, acked, lost, notleader, applies, restores, restarts, pauses;
	unsigned long deposes, elects, terms, snapshots, stuck;
};

struct sim {
	struct raft_fixture f;
	int n;
	unsigned seed;
	uint64_t rng;
	enum sim_fault fault;
	struct metalog_rec next;        /* a placed topic's PARTITION record, proposed next */
	bool fault_done, trace;
	unsigned threshold, trailing;
	bool pre_vote;
	struct server s[MAXS];
	bool cut[MAXS][MAXS];           /* link i -> j cut by the schedule */
	unsigned loss_pct;
	raft_time loss_until;
	struct entry *log;
	size_t logcap;
	raft_id *term_leader;           /* by term */
	size_t termcap;
	bool final;
	uint64_t final_index;
	int final_acked;
	char fail[1024];
	struct sim_stats st;
};

static struct sim *S;   /* the fixture's hook knows only the fixture */

static void sim_fail(struct sim *sim, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sim_fail(struct sim *sim, const char *fmt, ...)
{
	va_list ap;

	if (sim->fail[0])
		return;
	va_start(ap, fmt);
	vsnprintf(sim->fail, sizeof(sim->fail), fmt, ap);
	va_end(ap);
}

/* xorshift64*: the schedule's only source of randomness */
static uint64_t rnd64(struct sim *sim)
{
	sim->rng ^= sim->rng >> 12;
	sim->rng ^= sim->rng << 25;
	sim->rng ^= sim->rng >> 27;
	return sim->rng * 0x2545F4914F6CDD1Dull;
}

static unsigned rnd(struct sim *sim, unsigned n)
{
	return (unsigned)(rnd64(sim) % n);
}

static unsigned rnd_range(struct sim *sim, unsigned lo, unsigned hi)
{
	return lo + rnd(sim, hi - lo + 1);
}

static void trace(struct sim *sim, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void trace(struct sim *sim, const char *fmt, ...)
{
	va_list ap;

	if (!sim->trace)
		return;
	fprintf(stderr, "[%6llu ms] ", (unsigned long long)raft_fixture_time(&sim->f));
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* FNV-1a 64 of the image's snapshot bytes */
static uint64_t image_digest(const struct metalog *ml)
{
	void *buf = NULL;
	size_t len = 0;
	uint64_t h = 0xcbf29ce484222325ull;

	if (metalog_snapshot(ml, &buf, &len) < 0)
		return 0;
	for (size_t i = 0; i < len; i++)
		h = (h ^ ((const uint8_t *)buf)[i]) * 0x100000001b3ull;
	free(buf);
	return h;
}

/* ------------------------------------------------------------ checks */

/* At most one leader per term. */
static void term_note(struct sim *sim, raft_term term, raft_id id)
{
	if (term >= sim->termcap) {
		size_t cap = sim->termcap ? sim->termcap : 64;

		while (cap <= term)
			cap *= 2;
		sim->term_leader = realloc(sim->term_leader, cap * sizeof(*sim->term_leader));
		cr_assert(sim->term_leader);
		memset(sim->term_leader + sim->termcap, 0, (cap - sim->termcap) * sizeof(*sim->term_leader));
		sim->termcap = cap;
	}
	if (!sim->term_leader[term]) {
		sim->term_leader[term] = id;
		sim->st.terms++;
	} else if (sim->term_leader[term] != id) {
		sim_fail(sim, "two leaders in term %llu: servers %llu and %llu", (unsigned long long)term,
			 (unsigned long long)sim->term_leader[term] - 1, (unsigned long long)id - 1);
	}
}

/* Producer id blocks [start, end), in log order: each non-empty and at or
 * after the previous one's end. */
static void pid_blocks_check(struct sim *sim, const int64_t (*b)[2], int n)
{
	for (int i = 0; i < n; i++) {
		if (b[i][1] <= b[i][0])
			sim_fail(sim, "producer id block %d is empty: [%lld, %lld)", i, (long long)b[i][0],
				 (long long)b[i][1]);
		else if (i && b[i][0] < b[i - 1][1])
			sim_fail(sim, "producer id blocks overlap: [%lld, %lld) then [%lld, %lld)",
				 (long long)b[i - 1][0], (long long)b[i - 1][1], (long long)b[i][0],
				 (long long)b[i][1]);
	}
}

/* The ids of the topics created, in log order: none twice. */
static void topic_ids_check(struct sim *sim, const uint8_t (*ids)[16], int n)
{
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			if (!memcmp(ids[i], ids[j], 16))
				sim_fail(sim, "topic id of creation %d repeats creation %d's", i, j);
}

/* One server applied index: the same bytes, outcome and image as every
 * other server that applied it. */
static void entry_note(struct sim *sim, int by, uint64_t index, const void *rec, size_t len, int rc,
		       const struct metalog_applied *a, uint64_t digest)
{
	struct entry *e;

	if (index >= sim->logcap) {
		size_t cap = sim->logcap ? sim->logcap : 256;

		while (cap <= index)
			cap *= 2;
		sim->log = realloc(sim->log, cap * sizeof(*sim->log));
		cr_assert(sim->log);
		memset(sim->log + sim->logcap, 0, (cap - sim->logcap) * sizeof(*sim->log));
		sim->logcap = cap;
	}
	e = &sim->log[index];
	if (!e->set) {
		e->set = true;
		e->by = by;
		e->rec = malloc(len ? len : 1);
		cr_assert(e->rec);
		memcpy(e->rec, rec, len);
		e->len = len;
		e->rc = rc;
		e->pid_start = a->pid_start;
		e->pid_end = a->pid_end;
		e->digest = digest;
		return;
	}
	if (e->len != len || memcmp(e->rec, rec, len))
		sim_fail(sim, "diverged at index %llu: server %d applied other bytes than server %d",
			 (unsigned long long)index, by, e->by);
	else if (e->rc != rc || e->pid_start != a->pid_start || e->pid_end != a->pid_end)
		sim_fail(sim, "diverged at index %llu: server %d's apply said %d (pids %lld..%lld), server %d's %d "
			 "(%lld..%lld)",
			 (unsigned long long)index, by, rc, (long long)a->pid_start, (long long)a->pid_end, e->by,
			 e->rc, (long long)e->pid_start, (long long)e->pid_end);
	else if (e->digest != digest)
		sim_fail(sim, "diverged at index %llu: server %d's image after it differs from server %d's",
			 (unsigned long long)index, by, e->by);
}

/* ------------------------------------------------- the state machine */

static void sv_apply(void *arg, uint64_t index, const void *buf, size_t len)
{
	struct server *sv = arg;
	struct sim *sim = sv->sim;
	struct metalog_applied a = { .pid_start = -1, .pid_end = -1 };
	int rc = 0;

	if (index <= sv->last_apply_index)
		sim_fail(sim, "server %d applied index %llu after %llu", sv->idx, (unsigned long long)index,
			 (unsigned long long)sv->last_apply_index);
	sv->last_apply_index = index;
	sim->st.applies++;
	if (sim->fault == FAULT_SKIP && sv->in_final && !sim->fault_done &&
	    metalog_check(sv->ml, buf, len) == 0) {
		sim->fault_done = true;         /* as if this record never came */
		entry_note(sim, sv->idx, index, buf, len, 0, &a, image_digest(sv->ml));
		return;
	}
	rc = metalog_apply(sv->ml, buf, len, &a);
	if (rc == -EPROTO || rc == -ENOMEM)
		sim_fail(sim, "server %d: index %llu does not apply: %s", sv->idx, (unsigned long long)index,
			 strerror(-rc));
	if (sim->fault == FAULT_CORRUPT && sv->in_final && !sim->fault_done) {
		struct metalog_rec r = { 0 };

		sim->fault_done = true;         /* a change nobody proposed */
		cr_assert_eq(metalog_build_broker_config(sv->ml, 1, "log.retention.ms", "1", &r), 0);
		cr_assert_eq(metalog_apply(sv->ml, r.buf, r.len, NULL), 0);
		metalog_rec_free(&r);
	}
	entry_note(sim, sv->idx, index, buf, len, rc, &a, image_digest(sv->ml));
}

static int sv_snapshot(void *arg, void **buf, size_t *len)
{
	struct server *sv = arg;

	sv->sim->st.snapshots++;
	return metalog_snapshot(sv->ml, buf, len);
}

static int sv_restore(void *arg, const void *buf, size_t len)
{
	struct server *sv = arg;
	int rc = metalog_restore(sv->ml, buf, len);

	sv->sim->st.restores++;
	if (rc < 0)
		sim_fail(sv->sim, "server %d: a snapshot does not restore: %s", sv->idx, strerror(-rc));
	return rc;
}

static const struct quorum_ops sim_ops = {
	.apply = sv_apply,
	.snapshot = sv_snapshot,
	.restore = sv_restore,
};

/* After every fixture step: leaders by term, applied indexes. */
static void sim_hook(struct raft_fixture *f, struct raft_fixture_event *ev)
{
	struct sim *sim = S;

	(void)ev;
	for (int i = 0; i < sim->n; i++) {
		struct raft *r = raft_fixture_get(f, (unsigned)i);
		raft_index la = raft_last_applied(r);

		if (raft_state(r) == RAFT_LEADER)
			term_note(sim, r->current_term, r->id);
		if (la < sim->s[i].last_applied_seen)
			sim_fail(sim, "server %d's last applied index went back from %llu to %llu", i,
				 (unsigned long long)sim->s[i].last_applied_seen, (unsigned long long)la);
		sim->s[i].last_applied_seen = la;
	}
}

/* ---------------------------------------------------------- network */

/* Make the fixture's links what the schedule says: a link carries
 * messages when both ends are alive, it is not cut, and (in a loss
 * window) the draw keeps it. */
static void links_apply(struct sim *sim, bool lossy)
{
	for (int i = 0; i < sim->n; i++)
		for (int j = 0; j < sim->n; j++) {
			bool sat;

			if (i == j)
				continue;
			sat = !sim->s[i].alive || !sim->s[j].alive || sim->cut[i][j] ||
			      (lossy && rnd(sim, 100) < sim->loss_pct);
			if (sat != raft_fixture_saturated(&sim->f, (unsigned)i, (unsigned)j)) {
				if (sat)
					raft_fixture_saturate(&sim->f, (unsigned)i, (unsigned)j);
				else
					raft_fixture_desaturate(&sim->f, (unsigned)i, (unsigned)j);
			}
		}
}

/* Let ms of simulated time pass, drawing the lossy links before each step. */
static void sim_step(struct sim *sim, unsigned ms)
{
	raft_time end = raft_fixture_time(&sim->f) + ms;

	while (raft_fixture_time(&sim->f) < end && !sim->fail[0]) {
		bool lossy = sim->loss_pct && raft_fixture_time(&sim->f) < sim->loss_until;

		if (sim->loss_pct && !lossy)
			sim->loss_pct = 0;
		links_apply(sim, lossy);
		raft_fixture_step(&sim->f);
	}
	links_apply(sim, false);
}

/* ---------------------------------------------------------- the disk */

/* The fixture's raft_io keeps its log in an array it takes to start at
 * index 1. Two of its methods break that: after an InstallSnapshot
 * (snapshot_put with no trailing entries) it empties the log, and the
 * entries appended next start after the snapshot, yet truncate still
 * counts from index 1 (it copies past the end of its array: ASan saw it);
 * and load says the log starts after the last snapshot while the array
 * still holds the entries before it (a snapshot with trailing entries
 * drops none). This shim, between raft and the fixture's methods, keeps
 * the index of the array's first entry: truncate is given the position
 * the fixture expects, and load drops what lies before the snapshot. */
static struct server *server_of_io(struct raft_io *io)
{
	for (int i = 0; i < S->n; i++)
		if (&S->f.servers[i].io == io)
			return &S->s[i];
	cr_assert_fail("an unknown raft_io");
	return NULL;
}

static int io_truncate(struct raft_io *io, raft_index index)
{
	struct server *sv = server_of_io(io);
	int rc;

	if (index == 1 && sv->io_install) {
		/* the fixture writing an installed snapshot: all goes */
		rc = sv->orig_truncate(io, 1);
		sv->io_base = sv->io_install + 1;
		sv->io_install = 0;
		return rc;
	}
	if (index < sv->io_base) {
		sim_fail(S, "server %d: truncate at %llu, before its log's start %llu", sv->idx,
			 (unsigned long long)index, (unsigned long long)sv->io_base);
		return RAFT_IOERR;
	}
	return sv->orig_truncate(io, index - sv->io_base + 1);
}

static int io_snapshot_put(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
			   const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb)
{
	struct server *sv = server_of_io(io);

	if (trailing == 0)
		sv->io_install = snapshot->index;
	return sv->orig_snapshot_put(io, trailing, req, snapshot, cb);
}

static int io_load(struct raft_io *io, raft_term *term, raft_id *voted_for, struct raft_snapshot **snapshot,
		   raft_index *start_index, struct raft_entry **entries, size_t *n_entries)
{
	struct server *sv = server_of_io(io);
	int rc = sv->orig_load(io, term, voted_for, snapshot, start_index, entries, n_entries);
	size_t drop;

	if (rc || !*snapshot)
		return rc;
	if (sv->io_base > (*snapshot)->index + 1) {
		sim_fail(S, "server %d: its log starts at %llu, after its snapshot's %llu", sv->idx,
			 (unsigned long long)sv->io_base, (unsigned long long)(*snapshot)->index);
		return rc;
	}
	drop = (size_t)((*snapshot)->index + 1 - sv->io_base);
	if (drop >= *n_entries) {
		if (*n_entries)
			raft_free((*entries)[0].batch);     /* one batch holds them all */
		*n_entries = 0;
	} else {
		memmove(*entries, *entries + drop, (*n_entries - drop) * sizeof(**entries));
		*n_entries -= drop;
	}
	*start_index = (*snapshot)->index + 1;
	return rc;
}

static void io_shim(struct sim *sim, int i)
{
	struct raft_io *io = &sim->f.servers[i].io;
	struct server *sv = &sim->s[i];

	sv->io_base = 1;
	sv->orig_truncate = io->truncate;
	sv->orig_load = io->load;
	sv->orig_snapshot_put = io->snapshot_put;
	io->truncate = io_truncate;
	io->load = io_load;
	io->snapshot_put = io_snapshot_put;
}

/* ---------------------------------------------------------- servers */

static void raft_settings(struct sim *sim, struct raft *r)
{
	raft_set_snapshot_threshold(r, sim->threshold);
	raft_set_snapshot_trailing(r, sim->trailing);
	raft_set_pre_vote(r, sim->pre_vote);
}

static void kill_server(struct sim *sim, int i)
{
	raft_fixture_kill(&sim->f, (unsigned)i);
	sim->s[i].alive = false;
	sim->s[i].dead_since = raft_fixture_time(&sim->f);
	links_apply(sim, false);
}

/* A new process on the same disk: raft closed, an empty image, raft
 * started again on the server's raft_io (term, vote, snapshot, log). */
static void restart_server(struct sim *sim, int i)
{
	struct raft_fixture_server *fs = &sim->f.servers[i];
	struct server *sv = &sim->s[i];
	int rc;

	raft_close(&fs->raft, NULL);            /* the fixture's close completes at once */
	metalog_close(sv->ml);
	cr_assert_eq(metalog_image_new(i, &sv->ml), 0);
	quorum_fsm_init(&sv->qf, &sim_ops, sv);
	cr_assert_eq(raft_init(&fs->raft, &fs->io, &sv->qf.fsm, fs->id, fs->address), 0);
	quorum_fsm_bind(&sv->qf, &fs->raft);
	fs->raft.tracer = &fs->tracer;
	raft_set_election_timeout(&fs->raft, 1000);     /* the fixture's settings */
	raft_set_heartbeat_timeout(&fs->raft, 100);
	raft_set_install_snapshot_timeout(&fs->raft, 30000);
	raft_settings(sim, &fs->raft);
	rc = raft_start(&fs->raft);
	if (rc)
		sim_fail(sim, "server %d does not restart: %s", i, raft_strerror(rc));
	sv->last_apply_index = 0;
	sv->last_applied_seen = 0;
	sim->st.restarts++;
}

static void revive_server(struct sim *sim, int i)
{
	struct server *sv = &sim->s[i];

	if (sv->restart_pending && raft_fixture_time(&sim->f) - sv->dead_since >= DEAD_BEFORE_RESTART) {
		trace(sim, "restart %d", i);
		restart_server(sim, i);
	} else {
		trace(sim, "revive %d", i);
		sim->st.pauses++;
	}
	sv->restart_pending = false;
	raft_fixture_revive(&sim->f, (unsigned)i);
	sv->alive = true;
	links_apply(sim, false);
}

/* ---------------------------------------------------------- proposals */

struct prop {
	struct raft_apply req;  /* first: the callback gets it */
	struct sim *sim;
	uint8_t *rec;
	size_t len;
	bool final;
};

static void prop_done(struct raft_apply *req, int status, void *result)
{
	struct prop *p = (struct prop *)req;
	struct sim *sim = p->sim;
	uint64_t index = req->index;

	(void)result;
	if (status == 0) {
		/* the leader applied it before telling: it is at its index */
		sim->st.acked++;
		if (index >= sim->logcap || !sim->log[index].set)
			sim_fail(sim, "a record acknowledged at index %llu was applied nowhere",
				 (unsigned long long)index);
		else if (sim->log[index].len != p->len || memcmp(sim->log[index].rec, p->rec, p->len))
			sim_fail(sim, "the record acknowledged at index %llu is not the one applied there",
				 (unsigned long long)index);
		if (p->final) {
			sim->final_acked++;
			if (index > sim->final_index)
				sim->final_index = index;
		}
	} else {
		sim->st.lost++;
	}
	free(p->rec);
	free(p);
}

/* Propose rec on server i: 0, or raft's error (nothing appended). */
static int propose(struct sim *sim, int i, const struct metalog_rec *r, bool final)
{
	struct prop *p = calloc(1, sizeof(*p));
	struct raft_buffer b;
	int rc;

	cr_assert(p);
	p->sim = sim;
	p->final = final;
	p->len = r->len;
	p->rec = malloc(r->len);
	cr_assert(p->rec);
	memcpy(p->rec, r->buf, r->len);
	cr_assert_eq(quorum_fsm_frame(r->buf, r->len, &b), 0);
	rc = raft_apply(raft_fixture_get(&sim->f, (unsigned)i), &p->req, &b, 1, prop_done);
	if (rc) {
		raft_free(b.base);
		free(p->rec);
		free(p);
		return rc;
	}
	sim->st.proposals++;
	return 0;
}

static const char *const topic_keys[] = { "retention.ms", "cleanup.policy", "durability" };

static const char *topic_value(struct sim *sim, const char *key, char *buf, size_t cap)
{
	if (!strcmp(key, "retention.ms")) {
		snprintf(buf, cap, "%u", rnd_range(sim, 1000, 999999));
		return buf;
	}
	if (!strcmp(key, "cleanup.policy"))
		return rnd(sim, 2) ? "compact" : "delete";
	return rnd(sim, 2) ? "sync" : "write";
}

/* One record of a random kind, built against image ml (len 0: nothing to
 * propose, e.g. no live topic to change). */
static void build_random(struct sim *sim, const struct metalog *ml, struct metalog_rec *r)
{
	char name[16], val[32];
	int live = metalog_topic_count(ml);
	const struct meta_topic *t = live ? metalog_topic_at(ml, (int)rnd(sim, (unsigned)live)) : NULL;
	unsigned kind = rnd(sim, 100);

	memset(r, 0, sizeof(*r));
	if (sim->next.len) {
		*r = sim->next;
		memset(&sim->next, 0, sizeof(sim->next));
		return;
	}
	if (kind < 30 || !t) {
		const char *k[1], *v[1];
		int n = 0;

		snprintf(name, sizeof(name), "t%u", rnd(sim, 12));
		if (rnd(sim, 2)) {
			k[0] = topic_keys[rnd(sim, 3)];
			v[0] = topic_value(sim, k[0], val, sizeof(val));
			n = 1;
		}
		if (rnd(sim, 2)) {
			(void)metalog_build_topic(ml, name, (int32_t)rnd_range(sim, 1, 4), k, v, n, r);
		} else {
			/* placed: the TOPIC record, then its PARTITION record */
			int32_t nparts = (int32_t)rnd_range(sim, 1, 4), ids[4 * MAXS];
			int rf = (int)rnd_range(sim, 1, (unsigned)sim->n), nrecs = 0;
			struct metalog_rec *recs = NULL;

			for (int32_t q = 0; q < nparts; q++) {
				int32_t *x = &ids[q * rf], perm[MAXS];

				for (int i = 0; i < sim->n; i++)
					perm[i] = i;
				for (int i = sim->n - 1; i > 0; i--) {
					int j = (int)rnd(sim, (unsigned)i + 1);
					int32_t y = perm[i];

					perm[i] = perm[j];
					perm[j] = y;
				}
				memcpy(x, perm, (size_t)rf * sizeof(*x));
			}
			if (metalog_build_topic_placed(ml, name, nparts, k, v, n, rf, ids, &recs, &nrecs) == 0 &&
			    nrecs == 2) {
				*r = recs[0];
				sim->next = recs[1];
				memset(recs, 0, 2 * sizeof(*recs));
			}
			metalog_recs_free(recs, nrecs);
		}
	} else if (kind < 42) {
		(void)metalog_build_delete_topic(ml, t->name, r);
	} else if (kind < 54) {
		(void)metalog_build_partitions(ml, t->name, t->partitions + (int32_t)rnd_range(sim, 1, 3), r);
	} else if (kind < 70) {
		const char *key = topic_keys[rnd(sim, 3)];

		(void)metalog_build_config(ml, t->name, key, rnd(sim, 4) ? topic_value(sim, key, val, sizeof(val)) : NULL,
					   r);
	} else if (kind < 82) {
		int32_t scope = rnd(sim, 2) ? META_SCOPE_CLUSTER : (int32_t)rnd(sim, (unsigned)sim->n);

		if (rnd(sim, 2)) {
			snprintf(val, sizeof(val), "%u", rnd_range(sim, 1000, 999999));
			(void)metalog_build_broker_config(ml, scope, "log.retention.ms", rnd(sim, 4) ? val : NULL, r);
		} else {
			(void)metalog_build_broker_config(ml, scope, "compression.type",
							  rnd(sim, 4) ? (rnd(sim, 2) ? "gzip" : "lz4") : NULL, r);
		}
	} else if (kind < 91) {
		(void)metalog_build_producer_ids(ml, (int32_t)rnd_range(sim, 1, 1000), r);
	} else {
		/* an election, as the active controller makes one: some brokers
		 * live, the partition's leader and ISR chosen by the rules */
		const struct meta_part *p = &t->parts[rnd(sim, (unsigned)t->partitions)];
		int32_t live[MAXS + 1];
		int nlive = 0;
		struct election_in in;
		struct election_out out;

		if (p->legacy)
			return;   /* on each image's own node until a record places it */
		for (int i = 0; i < sim->n; i++)
			if (rnd(sim, 2))
				live[nlive++] = i;
		in = (struct election_in){ .replicas = p->replicas, .nreplicas = p->nreplicas, .isr = p->isr,
					   .nisr = p->nisr, .leader = p->leader, .live = live, .nlive = nlive,
					   .unclean = (int)rnd(sim, 2) };
		if (election_on_brokers(&in, &out))
			(void)metalog_build_partition_change(ml, t->name, (int32_t)(p - t->parts),
							     out.leader_changed ? out.leader : -2,
							     out.isr_changed ? out.isr : NULL, out.nisr, NULL, 0, r);
	}
}

/* The server proposals go to: a leader (the stable one mostly), or -1. */
static int pick_leader(struct sim *sim)
{
	int cand[MAXS], nc = 0;
	unsigned l = raft_fixture_leader_index(&sim->f);

	if (l < (unsigned)sim->n && sim->s[l].alive && rnd(sim, 10) < 7)
		return (int)l;
	for (int i = 0; i < sim->n; i++)
		if (sim->s[i].alive && raft_state(raft_fixture_get(&sim->f, (unsigned)i)) == RAFT_LEADER)
			cand[nc++] = i;
	return nc ? cand[rnd(sim, (unsigned)nc)] : -1;
}

static void propose_some(struct sim *sim)
{
	int l = pick_leader(sim);
	unsigned n = rnd_range(sim, 1, 4);

	if (l < 0)
		return;
	trace(sim, "propose %u on %d", n, l);
	for (unsigned k = 0; k < n; k++) {
		struct metalog_rec r;
		int rc;

		build_random(sim, sim->s[l].ml, &r);
		if (r.len) {
			rc = propose(sim, l, &r, false);
			if (rc && rc != RAFT_NOTLEADER)
				sim_fail(sim, "raft_apply on leader %d: %s", l, raft_strerror(rc));
		}
		metalog_rec_free(&r);
	}
}

/* A follower refuses, and appends nothing. */
static void propose_on_follower(struct sim *sim)
{
	struct metalog_rec r;
	int i = (int)rnd(sim, (unsigned)sim->n), rc;

	if (raft_state(raft_fixture_get(&sim->f, (unsigned)i)) == RAFT_LEADER)
		return;
	cr_assert_eq(metalog_build_producer_ids(sim->s[i].ml, 10, &r), 0);
	rc = propose(sim, i, &r, false);
	if (rc != RAFT_NOTLEADER)
		sim_fail(sim, "a proposal on follower %d returned %d, not RAFT_NOTLEADER", i, rc);
	sim->st.notleader++;
	metalog_rec_free(&r);
}

/* ---------------------------------------------------------- the run */

static bool all_followers(struct sim *sim)
{
	for (int i = 0; i < sim->n; i++)
		if (raft_state(raft_fixture_get(&sim->f, (unsigned)i)) != RAFT_FOLLOWER)
			return false;
	return true;
}

/* Every server but l is a follower (depose's precondition). */
static bool all_followers_but(struct sim *sim, unsigned l)
{
	for (int k = 0; k < sim->n; k++)
		if ((unsigned)k != l && raft_state(raft_fixture_get(&sim->f, (unsigned)k)) != RAFT_FOLLOWER)
			return false;
	return raft_state(raft_fixture_get(&sim->f, l)) == RAFT_LEADER;
}

/* Server i reaches a majority over links that carry both ways. */
static bool reaches_majority(struct sim *sim, int i)
{
	int n = 1;

	for (int j = 0; j < sim->n; j++)
		n += j != i && sim->s[j].alive && !sim->cut[i][j] && !sim->cut[j][i];
	return n > sim->n / 2;
}

static void action(struct sim *sim)
{
	unsigned a = rnd(sim, 100);
	int i = (int)rnd(sim, (unsigned)sim->n), j = (int)rnd(sim, (unsigned)sim->n);
	struct server *sv = &sim->s[i];

	if (a < 34) {
		propose_some(sim);
	} else if (a < 38) {
		propose_on_follower(sim);
	} else if (a < 46) {
		if (sv->alive) {
			trace(sim, "kill %d", i);
			kill_server(sim, i);
			sv->restart_pending = rnd(sim, 2);
		}
	} else if (a < 56) {
		for (int k = 0; k < sim->n; k++) {
			int d = (i + k) % sim->n;

			if (!sim->s[d].alive) {
				revive_server(sim, d);
				break;
			}
		}
	} else if (a < 61) {
		if (i != j) {
			trace(sim, "cut %d -> %d", i, j);
			sim->cut[i][j] = true;
		}
	} else if (a < 64) {
		trace(sim, "isolate %d", i);
		for (int k = 0; k < sim->n; k++)
			sim->cut[i][k] = sim->cut[k][i] = k != i;
	} else if (a < 70) {
		trace(sim, "heal the links");
		memset(sim->cut, 0, sizeof(sim->cut));
	} else if (a < 76) {
		sim->loss_pct = rnd_range(sim, 10, 50);
		sim->loss_until = raft_fixture_time(&sim->f) + rnd_range(sim, 200, 2000);
		trace(sim, "lose %u%% until %llu", sim->loss_pct, (unsigned long long)sim->loss_until);
	} else if (a < 82) {
		unsigned lat = rnd(sim, 5) ? rnd_range(sim, 5, 200) : rnd_range(sim, 400, 900);

		trace(sim, "latency %d: network %u ms", i, lat);
		raft_fixture_set_network_latency(&sim->f, (unsigned)i, lat);
	} else if (a < 87) {
		trace(sim, "election timeouts re-drawn");
		for (int k = 0; k < sim->n; k++)
			raft_fixture_set_randomized_election_timeout(&sim->f, (unsigned)k, rnd_range(sim, 1000, 2000));
	} else if (a < 91) {
		unsigned l = raft_fixture_leader_index(&sim->f);

		/* depose's preconditions: a stable leader, every other a follower */
		if (l < (unsigned)sim->n && all_followers_but(sim, l)) {
			trace(sim, "depose %u", l);
			sim->st.deposes++;
			raft_fixture_depose(&sim->f);
		}
	} else if (a < 95) {
		/* elect's: no leader, all followers, i alive with a majority */
		if (raft_fixture_leader_index(&sim->f) >= (unsigned)sim->n && all_followers(sim) && sv->alive &&
		    reaches_majority(sim, i)) {
			trace(sim, "elect %d", i);
			sim->st.elects++;
			raft_fixture_elect(&sim->f, (unsigned)i);
		}
	} else {
		if (sv->alive) {
			trace(sim, "kill %d to restart it", i);
			kill_server(sim, i);
			sv->restart_pending = true;
		}
	}
	links_apply(sim, false);
	sim_step(sim, rnd_range(sim, 10, 600));
}

static bool converged(struct raft_fixture *f, void *arg)
{
	struct sim *sim = arg;
	raft_index last;
	unsigned l;

	if (sim->fail[0])
		return true;
	if (sim->final_acked < 2)
		return false;
	l = raft_fixture_leader_index(f);
	if (l >= (unsigned)sim->n)
		return false;
	last = raft_last_index(raft_fixture_get(f, l));
	for (int i = 0; i < sim->n; i++) {
		struct raft *r = raft_fixture_get(f, (unsigned)i);

		if (raft_last_applied(r) < sim->final_index || raft_last_applied(r) != last)
			return false;
	}
	return true;
}

/* The servers as raft sees them, for a report. */
static const char *servers_text(struct sim *sim, char *buf, size_t cap)
{
	static const char *const names[] = { "unavailable", "follower", "candidate", "leader" };
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < sim->n && off < cap; i++) {
		struct raft *r = raft_fixture_get(&sim->f, (unsigned)i);

		off += (size_t)snprintf(buf + off, cap - off, "%s%d: %s term %llu last %llu commit %llu applied %llu",
					i ? "; " : "", i, names[raft_state(r) & 3],
					(unsigned long long)r->current_term, (unsigned long long)raft_last_index(r),
					(unsigned long long)r->commit_index, (unsigned long long)raft_last_applied(r));
	}
	return buf;
}

/* Everyone back, links healed, a stable leader commits two more records
 * and every server applies them. */
static void heal(struct sim *sim)
{
	raft_time end;

	sim->loss_pct = 0;
	memset(sim->cut, 0, sizeof(sim->cut));
	for (int i = 0; i < sim->n; i++) {
		raft_fixture_set_network_latency(&sim->f, (unsigned)i, 15);
		raft_fixture_set_randomized_election_timeout(&sim->f, (unsigned)i, 1000 + (unsigned)i * 100);
		if (!sim->s[i].alive)
			revive_server(sim, i);
	}
	links_apply(sim, false);
	sim->final = true;
	for (int i = 0; i < sim->n; i++)
		sim->s[i].in_final = false;
	end = raft_fixture_time(&sim->f) + HEAL_MS;
	while (sim->final_acked < 2 && raft_fixture_time(&sim->f) < end && !sim->fail[0]) {
		unsigned l;

		if (!raft_fixture_step_until_has_leader(&sim->f, 10000))
			continue;
		l = raft_fixture_leader_index(&sim->f);
		/* the final records: always apply, on every server */
		for (int k = sim->final_acked; k < 2; k++) {
			struct metalog_rec r;

			cr_assert_eq(metalog_build_producer_ids(sim->s[l].ml, 7 * (k + 1), &r), 0);
			for (int s = 0; s < sim->n; s++)
				sim->s[s].in_final = true;
			if (propose(sim, (int)l, &r, true))
				k = 2;
			metalog_rec_free(&r);
		}
		raft_fixture_step_until(&sim->f, converged, sim, 5000);
	}
	/* libraft 0.15 can leave a follower behind for as long as its leader
	 * leads: a follower whose log has a stale tail (entries of an older
	 * term, past the new leader's last index) answers a heartbeat it
	 * accepts with its own last index, not the heartbeat's; a leader that
	 * appended meanwhile takes that for the follower's match index and
	 * never sends it the entries it lacks (replicationUpdate clamps the
	 * answer only to its own last index). A new leader probes again. */
	for (int k = 0; k < 5 && !sim->fail[0] && sim->final_acked >= 2 &&
			!raft_fixture_step_until(&sim->f, converged, sim, 10000);
	     k++) {
		unsigned l = raft_fixture_leader_index(&sim->f);

		if (l < (unsigned)sim->n && all_followers_but(sim, l)) {
			trace(sim, "depose %u: a follower is stuck", l);
			sim->st.stuck++;
			raft_fixture_depose(&sim->f);
		}
	}
	if (!sim->fail[0] && !raft_fixture_step_until(&sim->f, converged, sim, HEAL_MS)) {
		char text[700];

		sim_fail(sim, "not converged %d s after healing (final records acknowledged: %d, at %llu): %s",
			 HEAL_MS / 1000, sim->final_acked, (unsigned long long)sim->final_index,
			 servers_text(sim, text, sizeof(text)));
	}
}

/* The committed log replayed into a new image: what every server must
 * hold; its producer id blocks and topic ids checked. */
static void final_check(struct sim *sim)
{
	struct metalog *oracle;
	int64_t (*blocks)[2] = calloc(sim->logcap + 1, sizeof(*blocks));
	uint8_t (*ids)[16] = calloc(sim->logcap + 1, sizeof(*ids));
	struct leadership {
		uint8_t id[16];
		int32_t partition, epoch, leader;
	} *led = calloc(sim->logcap + 1, sizeof(*led));
	int nb = 0, ni = 0, nl = 0;
	void *want = NULL;
	size_t wlen = 0;

	cr_assert(blocks && ids);
	cr_assert_eq(metalog_image_new(0, &oracle), 0);
	for (uint64_t x = 1; x <= sim->final_index && !sim->fail[0]; x++) {
		struct entry *e = x < sim->logcap ? &sim->log[x] : NULL;
		struct metalog_applied a;
		int rc;

		if (!e || !e->set)
			continue;       /* raft's own entry (configuration, barrier) */
		rc = metalog_apply(oracle, e->rec, e->len, &a);
		if (rc != e->rc)
			sim_fail(sim, "the replay of index %llu says %d, the servers said %d", (unsigned long long)x,
				 rc, e->rc);
		if (rc == 0 && a.type == META_REC_PRODUCER_IDS) {
			blocks[nb][0] = a.pid_start;
			blocks[nb][1] = a.pid_end;
			nb++;
		}
		if (rc == 0 && a.type == META_REC_TOPIC)
			memcpy(ids[ni++], a.topic->id, 16);
		if (rc == 0 && a.type == META_REC_PARTITION_CHANGE) {
			/* one leader per partition and leader epoch, whatever the
			 * elections: every change of leader bumps it (the record:
			 * type, version, topic id, int32 partition) */
			const uint8_t *b = e->rec;
			int32_t p = (int32_t)((uint32_t)b[19] << 24 | (uint32_t)b[20] << 16 | (uint32_t)b[21] << 8 | b[22]);
			const struct meta_part *mp = &a.topic->parts[p];

			for (int k = 0; k < nl; k++)
				if (!memcmp(led[k].id, a.topic->id, 16) && led[k].partition == p &&
				    led[k].epoch == mp->leader_epoch && led[k].leader != mp->leader)
					sim_fail(sim, "partition %d of %s at leader epoch %d led by %d and by %d", p,
						 a.topic->name, mp->leader_epoch, led[k].leader, mp->leader);
			memcpy(led[nl].id, a.topic->id, 16);
			led[nl].partition = p;
			led[nl].epoch = mp->leader_epoch;
			led[nl].leader = mp->leader;
			nl++;
		}
	}
	pid_blocks_check(sim, (const int64_t (*)[2])blocks, nb);
	topic_ids_check(sim, (const uint8_t (*)[16])ids, ni);
	cr_assert_eq(metalog_snapshot(oracle, &want, &wlen), 0);
	for (int i = 0; i < sim->n && !sim->fail[0]; i++) {
		void *got = NULL;
		size_t glen = 0;

		cr_assert_eq(metalog_snapshot(sim->s[i].ml, &got, &glen), 0);
		if (glen != wlen || memcmp(got, want, wlen))
			sim_fail(sim, "server %d's image (%zu bytes) differs from the replay of the committed log "
				 "(%zu bytes): committed metadata lost", i, glen, wlen);
		free(got);
	}
	free(want);
	metalog_close(oracle);
	free(blocks);
	free(ids);
	free(led);
}

/* FAULT_ROLLBACK: server i's image becomes the replay of the log up to
 * its last record that changed the image, not included. */
static void roll_back(struct sim *sim, int i)
{
	struct metalog *ml;
	void *buf = NULL;
	size_t len = 0;

	uint64_t last = sim->final_index;

	while (last && !(last < sim->logcap && sim->log[last].set && sim->log[last].rc == 0))
		last--;
	cr_assert_eq(metalog_image_new(i, &ml), 0);
	for (uint64_t x = 1; x < last; x++)
		if (x < sim->logcap && sim->log[x].set)
			(void)metalog_apply(ml, sim->log[x].rec, sim->log[x].len, NULL);
	cr_assert_eq(metalog_snapshot(ml, &buf, &len), 0);
	cr_assert_eq(metalog_restore(sim->s[i].ml, buf, len), 0);
	free(buf);
	metalog_close(ml);
}

/* One seed on n servers: 0, or -1 with sim->fail saying what broke. */
static int sim_run(struct sim *sim, int n, unsigned seed, enum sim_fault fault)
{
	struct raft_configuration conf;
	struct metalog_rec r;

	memset(sim, 0, sizeof(*sim));
	S = sim;
	sim->n = n;
	sim->seed = seed;
	sim->fault = fault;
	sim->rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed << 8 | (uint64_t)n);
	sim->trace = getenv("SLUICE_SIM_TRACE") != NULL;
	for (int k = 0; k < 4; k++)
		rnd64(sim);
	sim->threshold = rnd_range(sim, 3, 20);
	sim->trailing = rnd_range(sim, 2, 6);
	sim->pre_vote = rnd(sim, 2);
	cr_assert_eq(raft_fixture_initialize(&sim->f), 0);
	for (int i = 0; i < n; i++) {
		struct server *sv = &sim->s[i];

		sv->sim = sim;
		sv->idx = i;
		sv->alive = true;
		cr_assert_eq(metalog_image_new(i, &sv->ml), 0);
		quorum_fsm_init(&sv->qf, &sim_ops, sv);
		cr_assert_eq(raft_fixture_grow(&sim->f, &sv->qf.fsm), 0);
		io_shim(sim, i);
		raft_fixture_set_disk_latency(&sim->f, (unsigned)i, rnd_range(sim, 1, 50));
		quorum_fsm_bind(&sv->qf, raft_fixture_get(&sim->f, (unsigned)i));
		raft_settings(sim, raft_fixture_get(&sim->f, (unsigned)i));
	}
	cr_assert_eq(raft_fixture_configuration(&sim->f, (unsigned)n, &conf), 0);
	cr_assert_eq(raft_fixture_bootstrap(&sim->f, &conf), 0);
	raft_configuration_close(&conf);
	cr_assert_eq(raft_fixture_start(&sim->f), 0);
	raft_fixture_hook(&sim->f, sim_hook);
	trace(sim, "seed %u, %d servers, snapshot every %u keeping %u, pre-vote %d", seed, n, sim->threshold,
	      sim->trailing, sim->pre_vote);

	/* a new cluster's first record: its id */
	if (raft_fixture_step_until_has_leader(&sim->f, 10000)) {
		unsigned l = raft_fixture_leader_index(&sim->f);

		cr_assert_eq(metalog_build_node(sim->s[l].ml, &r), 0);
		(void)propose(sim, (int)l, &r, false);
		metalog_rec_free(&r);
	}
	for (int k = 0; k < ACTIONS && !sim->fail[0]; k++)
		action(sim);
	if (!sim->fail[0])
		heal(sim);
	if (fault == FAULT_ROLLBACK && !sim->fail[0])
		roll_back(sim, 2);
	if (!sim->fail[0])
		final_check(sim);
	return sim->fail[0] ? -1 : 0;
}

/* Close the fixture (pending proposals' callbacks run) and free. */
static void sim_free(struct sim *sim)
{
	metalog_rec_free(&sim->next);
	raft_fixture_close(&sim->f);
	for (int i = 0; i < sim->n; i++)
		metalog_close(sim->s[i].ml);
	for (size_t x = 0; x < sim->logcap; x++)
		free(sim->log[x].rec);
	free(sim->log);
	free(sim->term_leader);
}

static void stats_add(struct sim_stats *t, const struct sim_stats *s)
{
	t->proposals += s->proposals;
	t->acked += s->acked;
	t->lost += s->lost;
	t->notleader += s->notleader;
	t->applies += s->applies;
	t->restores += s->restores;
	t->restarts += s->restarts;
	t->pauses += s->pauses;
	t->deposes += s->deposes;
	t->elects += s->elects;
	t->terms += s->terms;
	t->snapshots += s->snapshots;
	t->stuck += s->stuck;
}

static struct sim sim_mem;

/* SEEDS seeds on n servers (SLUICE_SIM_SEEDS of them from SLUICE_SIM_FIRST,
 * as `make test` and `make sim` ask; or the one SLUICE_SIM_SEED names):
 * each must pass; every kind of event must have happened somewhere. */
static void seeds(int n)
{
	const char *one = getenv("SLUICE_SIM_SEED"), *size = getenv("SLUICE_SIM_SERVERS");
	const char *count = getenv("SLUICE_SIM_SEEDS"), *from = getenv("SLUICE_SIM_FIRST");
	unsigned first = from && *from ? (unsigned)strtoul(from, NULL, 10) : 1, last;
	struct sim_stats tot = { 0 };
	int failed = 0;

	if (size && atoi(size) != n)
		cr_skip_test("SLUICE_SIM_SERVERS=%s", size);
	if (count && *count && strtoul(count, NULL, 10) < 40)
		cr_assert_fail("SLUICE_SIM_SEEDS=%s: at least 40 seeds, so that every kind of event happens", count);
	last = first + (count && *count ? (unsigned)strtoul(count, NULL, 10) : SEEDS) - 1;
	if (one)
		first = last = (unsigned)strtoul(one, NULL, 10);
	for (unsigned seed = first; seed <= last; seed++) {
		int rc = sim_run(&sim_mem, n, seed, FAULT_NONE);

		if (rc) {
			fprintf(stderr,
				"metalog_sim: seed %u on %d servers failed: %s\n  replay: SLUICE_SIM_SEED=%u "
				"SLUICE_SIM_SERVERS=%d SLUICE_SIM_TRACE=1 build/san/tests/test_metalog_sim\n",
				seed, n, sim_mem.fail, seed, n);
			failed++;
		}
		stats_add(&tot, &sim_mem.st);
		sim_free(&sim_mem);
	}
	fprintf(stderr,
		"metalog_sim: %d servers, seeds %u..%u: %lu proposals (%lu committed and acknowledged, %lu lost "
		"with their leader, %lu refused by followers), %lu applies, %lu terms with a leader, %lu deposed, "
		"%lu elected, %lu snapshots taken, %lu installed, %lu restarts, %lu pauses; %lu leaders deposed "
		"after healing to unstick a follower\n",
		n, first, last, tot.proposals, tot.acked, tot.lost, tot.notleader, tot.applies, tot.terms, tot.deposes,
		tot.elects, tot.snapshots, tot.restores, tot.restarts, tot.pauses, tot.stuck);
	cr_assert_eq(failed, 0, "%d of the seeds failed (printed above)", failed);
	if (!one) {
		/* the schedule did what it is for */
		cr_assert_gt(tot.acked, 5ul * (last - first + 1));
		cr_assert_gt(tot.lost, 0ul, "no proposal was ever lost with its leader");
		cr_assert_gt(tot.terms, 2ul * (last - first + 1), "few elections");
		cr_assert_gt(tot.restores, 0ul, "no snapshot was ever installed");
		cr_assert_gt(tot.restarts, 0ul, "no server was ever restarted");
		cr_assert_gt(tot.deposes, 0ul);
		cr_assert_gt(tot.elects, 0ul);
	}
}

TestSuite(metalog_sim, .timeout = 300);

Test(metalog_sim, three_servers_many_seeds)
{
	seeds(3);
}

Test(metalog_sim, five_servers_many_seeds)
{
	seeds(5);
}

/* ---------------------------------------------------- the checker fails */

#define CHECK_SEEDS 10

static void fault_seen(enum sim_fault fault, int n, const char *want)
{
	for (unsigned seed = 1; seed <= CHECK_SEEDS; seed++) {
		int rc = sim_run(&sim_mem, n, seed, fault);

		cr_assert_eq(rc, -1, "seed %u on %d servers: the fault was not reported", seed, n);
		cr_assert(strstr(sim_mem.fail, want), "seed %u: reported as \"%s\", not \"%s\"", seed, sim_mem.fail,
			  want);
		cr_assert(sim_mem.fault_done || fault == FAULT_ROLLBACK, "seed %u: the fault was not injected", seed);
		sim_free(&sim_mem);
	}
}

TestSuite(metalog_sim_check, .timeout = 300);

Test(metalog_sim_check, a_skipped_apply_is_reported)
{
	fault_seen(FAULT_SKIP, 3, "diverged at index");
	fault_seen(FAULT_SKIP, 5, "diverged at index");
}

Test(metalog_sim_check, a_change_of_one_servers_own_is_reported)
{
	fault_seen(FAULT_CORRUPT, 3, "diverged at index");
	fault_seen(FAULT_CORRUPT, 5, "diverged at index");
}

Test(metalog_sim_check, an_image_rolled_back_is_reported_as_lost_metadata)
{
	fault_seen(FAULT_ROLLBACK, 3, "committed metadata lost");
	fault_seen(FAULT_ROLLBACK, 5, "committed metadata lost");
}

Test(metalog_sim_check, two_leaders_in_one_term_are_reported)
{
	struct sim *sim = calloc(1, sizeof(*sim));

	term_note(sim, 1, 1);
	term_note(sim, 2, 2);
	term_note(sim, 2, 2);
	term_note(sim, 200, 3);
	cr_assert_eq(sim->fail[0], 0, "%s", sim->fail);
	term_note(sim, 2, 3);
	cr_assert(strstr(sim->fail, "two leaders in term 2: servers 1 and 2"), "%s", sim->fail);
	free(sim->term_leader);
	free(sim);
}

Test(metalog_sim_check, overlapping_producer_id_blocks_are_reported)
{
	struct sim *sim = calloc(1, sizeof(*sim));
	const int64_t good[][2] = { { 0, 10 }, { 10, 20 }, { 25, 30 } };
	const int64_t bad[][2] = { { 0, 10 }, { 10, 20 }, { 19, 30 } };
	const int64_t empty[][2] = { { 0, 10 }, { 10, 10 } };

	pid_blocks_check(sim, good, 3);
	cr_assert_eq(sim->fail[0], 0, "%s", sim->fail);
	pid_blocks_check(sim, bad, 3);
	cr_assert(strstr(sim->fail, "overlap: [10, 20) then [19, 30)"), "%s", sim->fail);
	sim->fail[0] = 0;
	pid_blocks_check(sim, empty, 2);
	cr_assert(strstr(sim->fail, "empty"), "%s", sim->fail);
	free(sim);
}

Test(metalog_sim_check, a_repeated_topic_id_is_reported)
{
	struct sim *sim = calloc(1, sizeof(*sim));
	uint8_t ids[3][16] = { { 1 }, { 2 }, { 3 } };

	topic_ids_check(sim, (const uint8_t (*)[16])ids, 3);
	cr_assert_eq(sim->fail[0], 0, "%s", sim->fail);
	ids[2][0] = 1;
	topic_ids_check(sim, (const uint8_t (*)[16])ids, 3);
	cr_assert(strstr(sim->fail, "creation 2 repeats creation 0"), "%s", sim->fail);
	free(sim);
}

/* The apply callback's own checks: an index applied again, other bytes
 * at an index another server applied. */
Test(metalog_sim_check, an_index_applied_twice_or_differently_is_reported)
{
	struct sim *sim = calloc(1, sizeof(*sim));
	struct metalog_rec a, b;

	sim->n = 2;
	for (int i = 0; i < 2; i++) {
		sim->s[i].sim = sim;
		sim->s[i].idx = i;
		cr_assert_eq(metalog_image_new(i, &sim->s[i].ml), 0);
	}
	cr_assert_eq(metalog_build_producer_ids(sim->s[0].ml, 5, &a), 0);
	cr_assert_eq(metalog_build_producer_ids(sim->s[0].ml, 6, &b), 0);
	sv_apply(&sim->s[0], 4, a.buf, a.len);
	sv_apply(&sim->s[1], 4, a.buf, a.len);
	cr_assert_eq(sim->fail[0], 0, "%s", sim->fail);
	sv_apply(&sim->s[1], 4, a.buf, a.len);
	cr_assert(strstr(sim->fail, "server 1 applied index 4 after 4"), "%s", sim->fail);
	sim->fail[0] = 0;
	sv_apply(&sim->s[0], 5, a.buf, a.len);
	sv_apply(&sim->s[1], 5, b.buf, b.len);
	cr_assert(strstr(sim->fail, "diverged at index 5: server 1 applied other bytes than server 0"), "%s", sim->fail);
	metalog_rec_free(&a);
	metalog_rec_free(&b);
	for (int i = 0; i < 2; i++)
		metalog_close(sim->s[i].ml);
	for (size_t x = 0; x < sim->logcap; x++)
		free(sim->log[x].rec);
	free(sim->log);
	free(sim);
}
