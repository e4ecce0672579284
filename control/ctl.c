/* control/ctl.c — the control thread: start-up (the metadata log, the
 * coordinators, the replay that opens every partition), its loop and idle
 * policy, producer ids, and what the shards reach of it (ctl_coord_ops).
 * The rest of it: control/ctl_internal.h. */

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "control/config.h"
#include "control/ctl_internal.h"
#include "control/admin_http.h"
#include "control/cutil.h"
#include "control/group.h"
#include "control/listeners.h"
#include "control/txn.h"
#include "control/metalog.h"
#include "control/peer_kafka.h"
#include "control/placement.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/topic_name.h"
#include "storage/slog.h"

static void ctl_set_ready(struct ctl *ctl, int err, const char *msg)
{
	pthread_mutex_lock(&ctl->lock);
	ctl->ready = 1;
	if (err) {
		ctl->init_err = err;
		snprintf(ctl->init_msg, sizeof(ctl->init_msg), "%s", msg);
	}
	pthread_cond_broadcast(&ctl->cond);
	pthread_mutex_unlock(&ctl->lock);
}

/* Transactions are back: serve. */
static void ctl_txns_replayed(struct ctl *ctl)
{
	/* from now on the coordinators follow their partitions' leaders */
	ctl->coord_started = 1;
	ctl_coord_refresh(ctl);
	ctl_set_ready(ctl, 0, NULL);
}

/* Committed offsets are back in the group coordinator; transactions next
 * (completing one may commit offsets). */
static void ctl_replayed(struct ctl *ctl)
{
	txn_replay(ctl->tc, ctl_txns_replayed);
}

/* Start-up: every partition of the metadata log answered its open
 * (ctl_op_step calls this once, then frees op). */
static void ctl_started(struct ctl *ctl, struct ctl_op *op)
{
	/* start-up: say what recovery cut or found damaged, partition
	 * by partition, and what it read (the shards handed the logs
	 * over through the ring: safe to read) */
	/* start-up: the per-partition lines went out as the opens
	 * answered (ctl_part_opened); now the sum */
	const struct ctl_recovery_sum sum = op->rec;
	int nparts = op->rec_parts;

	slog(SLOG_INFO, "recovery: %d partitions, %d segments, %d taken from checkpoints "
		"unread (%llu bytes), %llu bytes scanned, %d damaged ranges moved aside",
		nparts, sum.segments, sum.segments_trusted, (unsigned long long)sum.bytes_trusted,
		(unsigned long long)sum.bytes_scanned, sum.damaged);
	if (op->failed) {
		ctl_set_ready(ctl, -EIO, op->fail_msg);
	} else if (group_replay(ctl->gc, ctl_replayed) == 0) {
		ctl_replayed(ctl);
	}
}



/* ---- the thread ------------------------------------------------------- */

/* SIGUSR1: the shards' busy cycles so far, one line on stdout (where a
 * program that started the broker reads its "listening on" line: the
 * benchmarks take a reading before and after a run). A shard's counter
 * is its own; reading it here is a relaxed load of a 64-bit word. */
static void ctl_report_cycles(struct broker *b)
{
	uint64_t total = 0;
	char line[1024];
	size_t at = 0;

	for (int i = 0; i < b->set.nshards; i++) {
		uint64_t c = broker_shard_busy_cycles(b, i);

		total += c;
		if (at < sizeof(line))
			at += (size_t)snprintf(line + at, sizeof(line) - at, "%s shard %d %llu", i ? "," : "", i,
					       (unsigned long long)c);
	}
	printf("sluiced: busy cycles %llu (%s)\n", (unsigned long long)total, line);
	fflush(stdout);
}

static void ctl_init_serve(struct ctl *ctl);

static void ctl_init_registered(struct ctl *ctl, int err, const char *msg)
{
	if (err < 0) {
		ctl_set_ready(ctl, err, msg);
		return;
	}
	ctl_init_serve(ctl);
}

/* Start-up, once the metadata log is open: the internal topics it lacks,
 * then the first producer id block, then ctl_init_serve. Each step is a
 * proposal; `left` counts those in flight. */
struct ctl_init_step {
	int left;
	int err;
	const char *what;
};

/* Start-up on a quorum of several: another node's start changed the same
 * metadata first (its internal topics, its producer id block, applied
 * before ours), or the leader was lost with our record: the step runs
 * again against the image as it is now. */
#define CTL_INIT_RETRIES 5

static void ctl_init_pid_block(struct ctl *ctl);

static void ctl_init_pids(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	(void)cookie;
	ctl->pid_reserving = 0;
	if (err < 0 && err != -ENOMEM && ctl_quorum_channel(ctl) && ctl->init_retries++ < CTL_INIT_RETRIES) {
		ctl_init_pid_block(ctl);
		return;
	}
	if (err < 0) {
		char msg[256];

		snprintf(msg, sizeof(msg), "cannot reserve producer ids in the metadata log: %s", strerror(-err));
		ctl_set_ready(ctl, err, msg);
		return;
	}
	ctl->pid_next = a->pid_start;
	ctl->pid_end = a->pid_end;
	/* registered and unfenced as a broker, then serve */
	ctl_brokers_start(ctl, ctl_init_registered);
}

static void ctl_init_topics(struct ctl *ctl);

static void ctl_init_pid_block(struct ctl *ctl)
{
	struct metalog_rec r;
	int err;

	/* producer ids come in blocks reserved ahead (ctl_pid.c): the first */
	if ((err = metalog_build_producer_ids(ctl->ml, CTL_PID_BLOCK, &r)) < 0) {
		ctl_init_pids(ctl, NULL, err, NULL);
		return;
	}
	ctl->pid_reserving = 1;
	ctl_meta_propose(ctl, &r, ctl_init_pids, NULL);
}

static void ctl_init_topic_done(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct ctl_init_step *st = cookie;

	(void)a;
	if (err < 0 && !st->err) {
		st->err = err;
		st->what = a && a->topic ? a->topic->name : st->what;
	}
	if (--st->left)
		return;
	err = st->err;
	free(st);
	if (err < 0 && err != -ENOMEM && ctl_quorum_channel(ctl) && ctl->init_retries++ < CTL_INIT_RETRIES) {
		ctl_init_topics(ctl);   /* what is there now is skipped */
		return;
	}
	if (err < 0) {
		ctl_set_ready(ctl, err, "cannot create the internal topics in the metadata log");
		return;
	}
	ctl_init_pid_block(ctl);
}

static void ctl_init_meta(struct ctl *ctl, int err, const char *msg);

/* The metadata image and the two coordinators freed (ctl_fini, and
 * ctl_init when the quorum does not open). */
static void ctl_image_coords_free(struct ctl *ctl)
{
	metalog_close(ctl->ml);
	ctl->ml = NULL;
	txn_coord_destroy(ctl->tc);
	ctl->tc = NULL;
	group_coord_destroy(ctl->gc);
	ctl->gc = NULL;
}

/* Start-up: the metadata quorum opened (its log replayed into the image);
 * the rest runs once this node leads it (ctl_init_meta). 0, or -errno
 * with the start-up error set (ctl_wait_ready reports it). */
int ctl_init(struct ctl *ctl, uint64_t now_ns, int64_t now_ms)
{
	char err[1024] = "";
	int rc;

	ctl->now_ms = (int64_t)(now_ns / 1000000);
	ctl->wall = now_ms;
	ctl->started_ms = mono_ms();   /* uptime: the real monotonic clock, not the injected one nor the wall clock */
	ctl->pid_spare = -1;
	/* the coordinators: their timers run in every turn from now on */
	if (group_coord_create(ctl, ctl->b, ctl->cfg, &ctl->gc) < 0 ||
	    txn_coord_create(ctl, ctl->b, ctl->cfg, ctl->gc, &ctl->tc) < 0)
		abort();
	ctl->peers = peer_kafka_new(ctl);
	rc = ctl_quorum_open(ctl, ctl_init_meta, err, sizeof(err));
	if (rc < 0) {
		char msg[5400];

		snprintf(msg, sizeof(msg), "cannot open the metadata log in %s: %s", ctl->b->set.data_dir,
			 err[0] ? err : strerror(-rc));
		/* what was made, undone (the thread ends without ctl_fini):
		 * a node.id or cluster.id that contradicts the data directory
		 * is a configuration error, exit 2 with nothing left behind */
		ctl_quorum_close(ctl);
		peer_kafka_free(ctl->peers);
		ctl->peers = NULL;
		ctl_image_coords_free(ctl);
		ctl_set_ready(ctl, rc, msg);
		return rc;
	}
	return 0;
}

/* Start-up, the metadata image caught up with the quorum: the
 * coordinators, the internal topics in the metadata log, the admin
 * endpoint, and the replay started (every topic's partitions opening on
 * their shards). The internal topics and the replay finish in later
 * turns; ctl_is_ready says when. */
static void ctl_init_meta(struct ctl *ctl, int err, const char *msg)
{
	struct broker *b = ctl->b;
	int rc;

	if (err < 0) {
		ctl_set_ready(ctl, err, msg);
		return;
	}
	snprintf(b->set.cluster_id, sizeof(b->set.cluster_id), "%s", metalog_cluster_id(ctl->ml));
	/* the broker configs changed at run time, before any topic is built */
	if ((rc = ctl_build_cfg(ctl, &ctl->eff)) < 0) {
		ctl_set_ready(ctl, rc, "out of memory building the broker config");
		return;
	}
	/* and the listeners' stores changed at run time, before the broker
	 * says it is ready (until here a listener served the file's) */
	ctl_listeners_follow(ctl, NULL);
	ctl_init_topics(ctl);
}

/* Start-up: the internal topics the image lacks (a node alone; a
 * cluster's wait for its brokers: ctl_internal_topics_tick). */
static void ctl_init_topics(struct ctl *ctl)
{
	struct ctl_init_step *st;
	int rc;

	if (!(st = calloc(1, sizeof(*st))))
		abort();
	st->left = 1;   /* this function's own, released below */
	if (!ctl_quorum_channel(ctl)) {
		/* the internal topics' logs: compacted, Kafka's defaults (the
		 * transaction coordinator's first, then the group coordinator's) */
		static const char *const k[] = { "cleanup.policy", "segment.bytes" };
		static const char *const v[] = { "compact", "104857600" };
		const char *names[2] = { TXN_STATE_TOPIC, GROUP_OFFSETS_TOPIC };
		const char *counts[2] = { "transaction.state.log.num.partitions", "offsets.topic.num.partitions" };

		for (int i = 0; i < 2; i++) {
			struct placement_broker *pb;
			struct metalog_rec *recs = NULL;
			int32_t np = (int32_t)config_int(ctl->cfg, counts[i]), *placed = NULL;
			int nrecs = 0, avail, nb = ctl_place_brokers(ctl, &pb);

			free(pb);
			if (metalog_topic(ctl->ml, names[i]))
				continue;
			st->what = names[i];
			/* Kafka: min(3, brokers) replicas; this node leads them
			 * all (the coordinators live here) */
			rc = ctl_place(ctl, names[i], 0, np, nb < 3 ? nb : 3, 1, &placed, &avail);
			if (rc == 0)
				rc = metalog_build_topic_placed(ctl->ml, names[i], np, k, v, 2, nb < 3 ? nb : 3, placed,
								&recs, &nrecs);
			free(placed);
			if (rc < 0) {
				st->left++;
				ctl_meta_refuse(ctl, rc, ctl_init_topic_done, st);
				continue;
			}
			st->left += nrecs;
			for (int j = 0; j < nrecs; j++)
				ctl_meta_propose(ctl, &recs[j], ctl_init_topic_done, st);
			free(recs);
		}
	}
	ctl_init_topic_done(ctl, st, 0, NULL);
}

/* ---- a cluster's internal topics ---------------------------------------- */

static void internal_applied(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	(void)cookie;
	if (err < 0)
		slog(SLOG_WARN, "creating the internal topic %s: %s (tried again)",
			a && a->topic ? a->topic->name : "", strerror(-err));
	else if (a && a->type == META_REC_TOPIC && a->topic)
		ctl_follow_note(ctl, a->topic->id, CTL_FOLLOW_CREATED);   /* served here as on the other nodes (once) */
	ctl->internal_inflight--;
}

void ctl_internal_topics_tick(struct ctl *ctl)
{
	static const char *const k[] = { "cleanup.policy", "segment.bytes" };
	static const char *const v[] = { "compact", "104857600" };
	static const char *const names[2] = { TXN_STATE_TOPIC, GROUP_OFFSETS_TOPIC };
	static const char *const counts[2] = { "transaction.state.log.num.partitions", "offsets.topic.num.partitions" };
	static const char *const rfs[2] = { "transaction.state.log.replication.factor",
					    "offsets.topic.replication.factor" };
	int nvoters, want = 1, nb, cap;
	struct placement_broker *pb;

	if (!ctl->coord_started || ctl->internal_inflight || ctl->now_ms < ctl->internal_next ||
	    !ctl_quorum_channel(ctl) || (metalog_topic(ctl->ml, names[0]) && metalog_topic(ctl->ml, names[1])) ||
	    !ctl_elect_active(ctl))
		return;
	ctl->internal_next = ctl->now_ms + 500;
	nvoters = ctl_quorum_voters(ctl);
	/* combined nodes: up to the voters, each a broker; an active
	 * controller that is no broker cannot tell how many brokers are
	 * coming, so it waits for offsets.topic.replication.factor of them
	 * (Kafka's rule) */
	cap = ctl->b->set.controller_only ? INT32_MAX : nvoters;
	for (int i = 0; i < 2; i++) {
		int rf = (int)config_int(ctl->cfg, rfs[i]);

		if (rf > cap)
			rf = cap;
		if (rf > want)
			want = rf;
	}
	nb = ctl_place_brokers(ctl, &pb);
	free(pb);
	if (nb < want)
		return;   /* Kafka: not below offsets.topic.replication.factor's brokers */
	for (int i = 0; i < 2; i++) {
		struct metalog_rec *recs = NULL;
		int32_t np = (int32_t)config_int(ctl->cfg, counts[i]), *placed = NULL;
		int nrecs = 0, avail, rf = (int)config_int(ctl->cfg, rfs[i]), rc;

		if (metalog_topic(ctl->ml, names[i]))
			continue;
		if (rf > nb)
			rf = nb;             /* offsets.topic.replication.factor, up to the brokers */
		/* leaders spread over the brokers, as Kafka places them: the
		 * coordinators follow (ctl_coord_refresh) */
		rc = ctl_place(ctl, names[i], 0, np, rf, 0, &placed, &avail);
		if (rc == 0)
			rc = metalog_build_topic_placed(ctl->ml, names[i], np, k, v, 2, rf, placed, &recs, &nrecs);
		free(placed);
		if (rc < 0) {
			slog(SLOG_WARN, "cannot place the internal topic %s: %s", names[i], strerror(-rc));
			continue;
		}
		slog(SLOG_NOTICE, "creating the internal topic %s: %d partitions, %d replicas each", names[i],
			np, rf);
		ctl->internal_inflight += nrecs;
		for (int j = 0; j < nrecs; j++)
			ctl_meta_propose(ctl, &recs[j], internal_applied, NULL);
		free(recs);
	}
}

/* Start-up, the metadata in place: the admin endpoint, then every topic's
 * partitions opening on their shards (ctl_started once they have). */
static void ctl_init_serve(struct ctl *ctl)
{
	struct broker *b = ctl->b;
	struct ctl_op *op;
	int rc, n;

	/* the admin endpoint, once the metadata log is open: /v1/health says
	 * "recovering" while the partitions open */
	{
		char aerr[512] = "";

		rc = admin_http_start(ctl, b, ctl->cfg, &ctl->admin, aerr, sizeof(aerr));
		if (rc < 0) {
			ctl_set_ready(ctl, rc, aerr);
			return;
		}
		if (aerr[0])
			slog(SLOG_WARN, "%s", aerr);
		ctl->admin_port = ctl->admin ? admin_http_port(ctl->admin) : 0;
	}
	/* replay: every topic's partitions open on their shards */
	op = calloc(1, sizeof(*op));
	ctl->ops_open++;
	op->started = ctl_started;
	{
		/* the test knob SLUICE_TEST_START_HOLD=<path> (docs/cluster.md):
		 * once every partition opened (their roles sent), the start-up
		 * publishes nothing while <path> is absent, so that a test can
		 * apply metadata records in that window (ctl_start_hold_poll) */
		const char *hold = getenv("SLUICE_TEST_START_HOLD");

		if (hold && hold[0] && access(hold, F_OK) != 0) {
			op->pending++;
			ctl->start_hold = op;
			ctl->start_hold_path = hold;
		}
	}
	n = metalog_topic_count(ctl->ml);
	op->created = calloc((size_t)n + 1, sizeof(*op->created));
	op->created_for = calloc((size_t)n + 1, sizeof(*op->created_for));
	for (int i = 0; i < n; i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);
		struct md_topic *t;

		if (!strcmp(mt->name, TOPIC_CLUSTER_METADATA)) {
			/* recorded by a broker before 2026-12 that let a client
			 * create it: its directory is the metadata log's own, so it
			 * is never opened as a topic */
			slog(SLOG_WARN, "ignoring the topic %s recorded in the metadata log by an older "
					"broker: its directory would be the metadata log's own",
				mt->name);
			continue;
		}
		t = ctl_topic_build(ctl, mt);

		op->created[op->ncreated++] = t;
		ctl_topic_open_parts(ctl, op, t, 0);
	}
	if (op->pending == 0)
		ctl_op_step(ctl, op);
}

/* SLUICE_TEST_START_HOLD: say once that every partition opened, and let
 * the start-up go on once the file exists. Work done. */
static int ctl_start_hold_poll(struct ctl *ctl)
{
	struct ctl_op *op = ctl->start_hold;

	if (!op)
		return 0;
	if (op->pending == 1 && !ctl->start_hold_said) {
		ctl->start_hold_said = 1;
		slog(SLOG_INFO, "SLUICE_TEST_START_HOLD: every partition opened; start-up holds until %s "
			"exists", ctl->start_hold_path);
	}
	if (access(ctl->start_hold_path, F_OK) != 0)
		return 0;
	ctl->start_hold = NULL;
	if (--op->pending == 0)
		ctl_op_step(ctl, op);
	return 1;
}

/* One turn with the given clock: parked messages first (they are older
 * than anything sent below), the shards' rings, reclamation, the
 * coordinators' timers and the admin endpoint's requests. Returns the
 * work done (messages sent or handled); 0 lets the idle policy sleep
 * until ctl->timeout. */
int ctl_poll(struct ctl *ctl, uint64_t now_ns, int64_t now_ms)
{
	struct broker *b = ctl->b;
	struct shard_msg m;
	int work = 0, timeout;

	ctl->now_ms = (int64_t)(now_ns / 1000000);
	ctl->wall = now_ms;
	work += ctl_flush_parked(ctl, &ctl->parked_left);
	/* the metadata quorum: records committed and applied, then the
	 * continuations of those this node proposed */
	work += ctl_quorum_poll(ctl);
	if (ctl->brokers_changed) {
		ctl->brokers_changed = 0;
		ctl_publish_brokers(ctl);
	}
	ctl_elect_tick(ctl);
	ctl_reassign_tick(ctl);
	ctl_offline_tick(ctl);
	if (ctl->roles_changed) {
		ctl->roles_changed = 0;
		ctl_roles_refresh(ctl);
	}
	ctl_internal_topics_tick(ctl);
	ctl_coord_refresh(ctl);
	ctl_admin_tick(ctl);   /* after the elections' and reassignments' turn */
	work += ctl_meta_poll(ctl);
	/* after the continuations: what this node proposed it serves itself */
	work += ctl_follow_poll(ctl);
	work += ctl_start_hold_poll(ctl);
	for (int from = 0; from < b->set.nshards; from++)
		while (spsc_pop(b->rings[from][broker_ctl_index(b)], &m)) {
			m.fn(ctl, &m);
			work++;
		}
	ctl_reclaim(ctl);
	if (b->stopping)
		group_stopping(ctl->gc);
	if (__atomic_exchange_n(&b->report_groups, 0, __ATOMIC_ACQ_REL)) {
		txn_report(ctl->tc);
		group_report(ctl->gc);
		ctl_report_cycles(b);
	}
	if (__atomic_exchange_n(&b->reload_admin, 0, __ATOMIC_ACQ_REL)) {
		/* SIGHUP: the admin endpoint's tokens, and a SASL controller
		 * listener's logins (this thread's to replace) */
		char err[768];
		int rc;

		admin_http_reload(ctl->admin);
		rc = listeners_controller_sasl_reload(b, err, sizeof(err));
		if (rc > 0)
			slog(SLOG_NOTICE, "SIGHUP: the controller listener's logins reloaded: %s", err);
		else if (rc != -ENOENT)
			slog(SLOG_WARN, "SIGHUP: the controller listener's logins not reloaded, the previous "
				"ones stay: %s", err);
	}
	timeout = group_tick(ctl->gc, ctl->now_ms, 100);
	work += peer_kafka_tick(ctl->peers);
	timeout = txn_tick(ctl->tc, ctl->now_ms, ctl->wall, timeout);
	timeout = ctl_brokers_tick(ctl, timeout);
	if (ctl->admin) {
		/* the admin endpoint's requests run here, on this thread */
		admin_http_run(ctl->admin);
		timeout = admin_http_timeout(ctl->admin, timeout);
	}
	if (ctl->start_hold && (timeout < 0 || timeout > 50))
		timeout = 50;   /* the test knob's file looked at again */
	ctl->timeout = timeout;
	return work;
}

/* The idle policy, after a turn that did no work: sleep in poll() on the
 * wake eventfd and the admin endpoint's socket until the next timer
 * (ctl->timeout), or 1 ms while messages are parked (a shard frees ring
 * slots without waking us). The sleeping word is set first and the rings
 * looked at again, so a shard that sends after that wakes us. */
void ctl_idle(struct ctl *ctl)
{
	struct broker *b = ctl->b;
	int timeout = ctl->timeout, work = 0;
	struct pollfd pfd[3] = { { .fd = ctl->wake_fd, .events = POLLIN },
				 { .fd = ctl->admin ? admin_http_fd(ctl->admin) : -1, .events = POLLIN },
				 { .fd = ctl_quorum_fd(ctl), .events = POLLIN } };

	timeout = ctl_quorum_timeout(ctl, timeout);
	if (ctl->parked_left && (timeout > 1 || timeout < 0))
		timeout = 1;
	if (ctl_meta_waiting(ctl))
		timeout = 0;
	__atomic_store_n(&ctl->sleeping, 1, __ATOMIC_SEQ_CST);
	for (int from = 0; from < b->set.nshards; from++)
		if (!spsc_empty(b->rings[from][broker_ctl_index(b)]))
			work = 1;
	if (!work && poll(pfd, 3, timeout) > 0 && (pfd[0].revents & POLLIN)) {
		uint64_t v;

		if (read(ctl->wake_fd, &v, sizeof(v)) < 0) {
			/* EAGAIN: raced with another reader; nothing to do */
		}
	}
	__atomic_store_n(&ctl->sleeping, 0, __ATOMIC_SEQ_CST);
}

/* After the last turn, the shards stopped: the admin endpoint, the
 * metadata log and the coordinators closed; the snapshot, its topics and
 * what is retired freed (their partitions were closed by the shards). */
void ctl_fini(struct ctl *ctl)
{
	struct broker *b = ctl->b;

	admin_http_stop(ctl->admin);
	ctl->admin = NULL;
	peer_kafka_close(ctl->peers);   /* its connections are on the quorum's loop */
	ctl_quorum_close(ctl);
	peer_kafka_free(ctl->peers);
	ctl->peers = NULL;
	ctl_meta_fini(ctl);
	ctl_brokers_fini(ctl);
	ctl_elect_fini(ctl);
	ctl_reassign_fini(ctl);
	ctl_follow_fini(ctl);
	ctl_image_coords_free(ctl);
	ctl_topics_fini(ctl);
	ctl_roles_fini(ctl);
	/* the shards have stopped: nobody is left to take these */
	for (int i = 0; i < b->set.nshards; i++) {
		free(ctl->park[i].q);
		ctl->park[i].q = NULL;
		ctl->park[i].len = ctl->park[i].cap = 0;
	}
}

static uint64_t ctl_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The thread: start-up, then one clock per turn, a turn, and the idle
 * policy when the turn found nothing to do; teardown once stopped. */
static void *ctl_main(void *arg)
{
	struct ctl *ctl = arg;

	pthread_setname_np(pthread_self(), "sluice-ctl");
	if (ctl_init(ctl, ctl_mono_ns(), wall_ms()) < 0)
		return NULL;
	while (!ctl->stop)
		if (ctl_poll(ctl, ctl_mono_ns(), wall_ms()) == 0)
			ctl_idle(ctl);
	ctl_fini(ctl);
	return NULL;
}

int ctl_create(struct broker *b, struct config *cfg, struct ctl **out)
{
	struct ctl *ctl = calloc(1, sizeof(*ctl));
	int idx = broker_ctl_index(b);

	if (!ctl)
		return -ENOMEM;
	ctl->b = b;
	ctl->cfg = cfg;
	ctl->homes = ctl_homes_new();
	ctl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctl->wake_fd < 0) {
		int err = -errno;

		ctl_homes_free(ctl->homes);
		free(ctl);
		return err;
	}
	pthread_mutex_init(&ctl->lock, NULL);
	pthread_cond_init(&ctl->cond, NULL);
	b->wake_fd[idx] = ctl->wake_fd;
	b->sleeping[idx] = &ctl->sleeping;
	b->ctl = ctl;
	b->coord = &ctl_coord_ops;
	*out = ctl;
	return 0;
}

/* What the shards reach of the control plane (dataplane/coord.h). */
const struct coord_ops ctl_coord_ops = {
	.submit_group = group_submit,
	.submit_txn = txn_submit,
	.submit_txn_offsets_end = txn_offsets_end_submit,
	.submit_txn_verify = txn_verify_submit,
	.submit_admin = ctl_submit,
	.submit_producer_id = ctl_producer_id_submit,
	.submit_quorum = ctl_quorum_submit,
	.submit_elect = ctl_elect_submit,
	.submit_features = ctl_features_submit,
	.submit_reassign = ctl_reassign_submit,
	.submit_scram = ctl_scram_submit,
	.submit_acl = ctl_acl_submit,
	.producer_id_msg = ctl_producer_id_msg,
	.key_dynamic = config_dynamic,
	.topic_key_at = topic_config_key_at,
	.topic_broker_key = topic_config_broker_key,
	.topic_default = topic_config_default,
	.key_source = config_source,
	.foreach_key = config_foreach,
};

void ctl_destroy(struct ctl *ctl)
{
	if (!ctl)
		return;
	if (ctl->b->ctl == ctl)
		ctl->b->ctl = NULL;
	close(ctl->wake_fd);
	ctl_homes_free(ctl->homes);   /* (ctl_topics_fini's, unless the thread never ran) */
	pthread_mutex_destroy(&ctl->lock);
	pthread_cond_destroy(&ctl->cond);
	free(ctl);
}

int ctl_start(struct broker *b, struct config *cfg, struct ctl **out)
{
	struct ctl *ctl;
	int rc = ctl_create(b, cfg, &ctl);

	if (rc < 0)
		return rc;
	if (pthread_create(&ctl->thread, NULL, ctl_main, ctl)) {
		ctl_destroy(ctl);
		return -EAGAIN;
	}
	*out = ctl;
	return 0;
}

int ctl_wait_ready(struct ctl *ctl, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&ctl->lock);
	while (!ctl->ready)
		pthread_cond_wait(&ctl->cond, &ctl->lock);
	rc = ctl->init_err;
	if (rc)
		snprintf(err, errlen, "%s", ctl->init_msg);
	pthread_mutex_unlock(&ctl->lock);
	return rc;
}

int ctl_wait_ready_ms(struct ctl *ctl, int timeout_ms, char *err, size_t errlen)
{
	struct timespec until;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&ctl->lock);
	while (!ctl->ready && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&ctl->cond, &ctl->lock, &until);
	if (!ctl->ready) {
		pthread_mutex_unlock(&ctl->lock);
		return -ETIMEDOUT;
	}
	rc = ctl->init_err;
	if (rc)
		snprintf(err, errlen, "%s", ctl->init_msg);
	pthread_mutex_unlock(&ctl->lock);
	return rc;
}

void ctl_stop(struct ctl *ctl)
{
	ctl->stop = 1;
	{
		uint64_t one = 1;

		if (write(ctl->wake_fd, &one, sizeof(one)) < 0) {
			/* the counter is full: it wakes anyway */
		}
	}
	pthread_join(ctl->thread, NULL);
	ctl_destroy(ctl);
}
