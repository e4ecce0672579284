/* control/ctl_brokers.c — brokers and the active controller, Kafka's way
 * (KIP-631): at every start this node registers as a broker (a
 * REGISTER_BROKER record with a new incarnation; its broker epoch is the
 * record's log index, so a restart gets a larger one) and starts fenced;
 * it heartbeats every broker.heartbeat.interval.ms; the active controller
 * unfences a broker whose heartbeat finds its registration applied (and
 * the broker proposes BROKER_RESTARTED: it leaves the ISRs and its
 * leaderships move to other in-sync replicas, where there are), and
 * fences (BROKER_FENCE) one whose heartbeats stopped for
 * broker.session.timeout.ms. Fencing and unfencing are records, so every
 * node sees the same brokers; heartbeats are not (the controller keeps
 * them in memory, and a new active controller gives every broker a full
 * session from its election).
 *
 * On a combined node (broker and controller) that leads the quorum the
 * broker's heartbeat reaches its own controller by a call here; on the
 * others, and on broker-only nodes, it travels on the controller channel
 * (ctl_channel.c) to the active controller, which serves it with the same
 * call. Only the active controller fences. A broker serves once it is
 * unfenced. A controller-only node (process.roles=controller) never
 * registers: it is the active controller's half only.
 *
 * @thread ctl
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "control/config.h"
#include "control/ctl_internal.h"
#include "control/meta_brokers.h"
#include "control/meta_features.h"
#include "control/metalog.h"
#include "control/quorum.h"
#include "storage/slog.h"

/* The active controller's memory of one broker's heartbeats. */
struct ctl_hb {
	int32_t id;
	int64_t epoch;
	int64_t last_ms;                /* monotonic ms of its last heartbeat */
	int64_t grace_ms;               /* > 0: fenced after this long, not a session (took_over) */
	int changing;                   /* a fence or unfence of it in flight */
	int16_t mv_max;                 /* highest metadata.version its heartbeats at epoch say (0: none) */
};

struct ctl_brokers {
	/* this node as a broker */
	uint8_t incarnation[16];
	int64_t epoch;                  /* 0 until registered */
	int proposing;                  /* a record of ours is in flight */
	int restarting;                 /* BROKER_RESTARTED proposed, not applied */
	int retries;                    /* registrations whose outcome was lost */
	void (*ready)(struct ctl *ctl, int err, const char *msg);
	int64_t next_hb_ms;
	int64_t interval_ms, session_ms;   /* broker.heartbeat.interval.ms, broker.session.timeout.ms */
	/* this node as the active controller */
	struct ctl_hb *hb;
	int nhb, cap_hb;
	int fencing;                    /* fence records in flight */
	int was_leader;                 /* led the quorum at the last tick */
	uint64_t fenced_total, unfenced_total;
};

static struct ctl_hb *hb_of(struct ctl_brokers *cb, int32_t id, int64_t now_ms)
{
	for (int i = 0; i < cb->nhb; i++)
		if (cb->hb[i].id == id)
			return &cb->hb[i];
	if (cb->nhb == cb->cap_hb) {
		int cap = cb->cap_hb ? cb->cap_hb * 2 : 8;
		struct ctl_hb *n = realloc(cb->hb, (size_t)cap * sizeof(*n));

		if (!n)
			abort();   /* the control thread's own bookkeeping */
		cb->hb = n;
		cb->cap_hb = cap;
	}
	cb->hb[cb->nhb] = (struct ctl_hb){ .id = id, .epoch = -1, .last_ms = now_ms };
	return &cb->hb[cb->nhb++];
}

/* ---- the active controller ------------------------------------------------ */

static void leaders_restart(struct ctl *ctl);

static void fence_done(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct ctl_brokers *cb = ctl->brokers;
	int fenced = (int)((intptr_t)cookie & 1);
	int32_t id = (int32_t)((intptr_t)cookie >> 1);

	(void)a;
	cb->fencing--;
	hb_of(cb, id, ctl->now_ms)->changing = 0;
	if (err == 0) {
		if (fenced)
			cb->fenced_total++;
		else
			cb->unfenced_total++;
	}
	if (!fenced && cb->ready && cb->epoch > 0 && !cb->restarting) {
		const struct meta_broker *me = metalog_broker(ctl->ml, ctl->b->set.node_id);

		if (me && me->epoch == cb->epoch && !me->fenced)
			leaders_restart(ctl);
	}
}

/* This broker's start, registered and unfenced: BROKER_RESTARTED. A crash
 * may have cut what the old incarnation had not made durable, a replaced
 * disk all of it, so as Kafka's controller fences a re-registered broker
 * (KIP-841) it leaves every ISR with another registered, unfenced member
 * and its leaderships move to the first such member, at a new leader
 * epoch; it rejoins once caught up. Where it is the last such member it
 * keeps leading at a new leader epoch (KIP-101/320: a client or follower
 * that read from the previous incarnation tells the two apart). Then it
 * serves. (LEADER_RESTARTED, which kept it leading everywhere, is what
 * older logs hold.) */
static void leaders_restarted(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct ctl_brokers *cb = ctl->brokers;
	void (*ready)(struct ctl *, int, const char *) = cb->ready;
	char msg[256];

	(void)cookie;
	(void)a;
	cb->restarting = 0;
	if ((err == -QUORUM_ELOST || err == -ETIMEDOUT || err == -ESTALE) && ready && ctl_quorum_channel(ctl) &&
	    cb->retries++ < 5) {
		/* a cluster's leader went with the answer, or a snapshot this
		 * node installed passed over the record (ctl_channel.c: its
		 * outcome unknown here), or the record was built against
		 * leaderships since changed (a no-op): again, from the image
		 * as it is now */
		leaders_restart(ctl);
		return;
	}
	cb->ready = NULL;
	if (!ready)
		return;
	if (err < 0) {
		snprintf(msg, sizeof(msg), "cannot write this broker's restart (BROKER_RESTARTED: its partitions' new "
			 "leaders and epochs) in the metadata log: %s", strerror(-err));
		ready(ctl, err, msg);
		return;
	}
	ready(ctl, 0, NULL);
}

static void leaders_restart(struct ctl *ctl)
{
	struct ctl_brokers *cb = ctl->brokers;
	struct metalog_rec r;
	int rc = metalog_build_broker_restarted(ctl->ml, ctl->b->set.node_id, cb->epoch, &r);

	cb->restarting = 1;
	if (rc < 0)
		ctl_meta_refuse(ctl, rc, leaders_restarted, NULL);
	else
		ctl_meta_propose(ctl, &r, leaders_restarted, NULL);
}

static void propose_fence(struct ctl *ctl, int32_t id, int64_t epoch, int fenced)
{
	struct ctl_hb *h = hb_of(ctl->brokers, id, ctl->now_ms);
	struct metalog_rec r;

	if (h->changing)
		return;   /* one change of a broker at a time */
	if (metalog_build_broker_fence(ctl->ml, id, epoch, fenced, &r) < 0 || !r.len) {
		metalog_rec_free(&r);
		return;
	}
	h->changing = 1;
	ctl->brokers->fencing++;
	ctl_meta_propose(ctl, &r, fence_done, (void *)((intptr_t)id << 1 | (fenced ? 1 : 0)));
}

int16_t ctl_brokers_supported_max(const struct ctl *ctl, int32_t id)
{
	const struct ctl_brokers *cb = ctl->brokers;
	const struct meta_broker *b = metalog_broker(ctl->ml, id);

	for (int i = 0; cb && b && i < cb->nhb; i++)
		if (cb->hb[i].id == id)
			return cb->hb[i].epoch == b->epoch ? cb->hb[i].mv_max : 0;
	return 0;
}

int ctl_controller_heartbeat(struct ctl *ctl, int32_t id, int64_t epoch, int16_t mv_max)
{
	struct ctl_brokers *cb = ctl->brokers;
	const struct meta_broker *b = metalog_broker(ctl->ml, id);
	struct ctl_hb *h;

	if (!b || b->epoch != epoch)
		return -ESTALE;
	h = hb_of(cb, id, ctl->now_ms);
	h->epoch = epoch;
	h->last_ms = ctl->now_ms;
	h->grace_ms = 0;
	h->mv_max = mv_max;
	if (b->fenced)
		propose_fence(ctl, id, epoch, 0);
	return 0;
}

/* Fence every unfenced broker whose heartbeats stopped for a session. */
static void controller_check_sessions(struct ctl *ctl, int64_t session_ms)
{
	struct ctl_brokers *cb = ctl->brokers;

	for (int i = 0; i < metalog_broker_count(ctl->ml); i++) {
		const struct meta_broker *b = metalog_broker_at(ctl->ml, i);
		struct ctl_hb *h;

		if (b->fenced)
			continue;
		h = hb_of(cb, b->id, ctl->now_ms);   /* new: a full session from now */
		if (h->changing)
			continue;
		if (h->epoch != b->epoch) {
			h->epoch = b->epoch;
			h->last_ms = ctl->now_ms;
			h->mv_max = 0;   /* a new registration: what its heartbeats say next */
			continue;
		}
		if (h->grace_ms > 0 && ctl->now_ms - h->last_ms >= h->grace_ms) {
			slog(SLOG_WARN, "broker %d (epoch %lld), whose node led the metadata quorum before "
				"this one, sent no heartbeat within %lld ms of this node's election: fenced",
				b->id, (long long)b->epoch, (long long)h->grace_ms);
			h->grace_ms = 0;
			propose_fence(ctl, b->id, b->epoch, 1);
		} else if (ctl->now_ms - h->last_ms >= session_ms) {
			slog(SLOG_WARN, "broker %d (epoch %lld) sent no heartbeat for %lld ms "
				"(broker.session.timeout.ms %lld): fenced",
				b->id, (long long)b->epoch, (long long)(ctl->now_ms - h->last_ms), (long long)session_ms);
			propose_fence(ctl, b->id, b->epoch, 1);
		}
	}
}

/* This node became the active controller: a full session for every
 * broker (it cannot know when they last reached the one before), except
 * the broker of the controller it replaced. An election means the voters
 * stopped hearing that node: it is most likely gone, and waiting a whole
 * session more would make the loss of a leader that was also the active
 * controller cost an election plus a session. It gets a grace of two
 * heartbeat intervals and a second (at most the session) to heartbeat
 * here; alive, it does (it heartbeats every interval to the leader it
 * finds), and if it does not it is fenced then. */
static void took_over(struct ctl *ctl)
{
	struct ctl_brokers *cb = ctl->brokers;
	int32_t x = ctl_quorum_took_over(ctl);
	const struct meta_broker *b = x >= 0 && x != ctl->b->set.node_id ? metalog_broker(ctl->ml, x) : NULL;
	int64_t grace = 2 * cb->interval_ms + 1000;
	struct ctl_hb *h;

	cb->nhb = 0;
	if (!b || b->fenced)
		return;
	if (grace > cb->session_ms)
		grace = cb->session_ms;
	h = hb_of(cb, x, ctl->now_ms);
	h->epoch = b->epoch;
	h->last_ms = ctl->now_ms;
	h->grace_ms = grace;
	slog(SLOG_NOTICE, "active controller now, after node %d: broker %d is fenced unless it heartbeats "
		"within %lld ms", x, x, (long long)grace);
}

/* ---- this node as a broker ------------------------------------------------- */

static void heartbeat_stale(const struct ctl_brokers *cb)
{
	slog(SLOG_NOTICE, "this broker's registration (epoch %lld) is no longer the controller's",
		(long long)cb->epoch);
}

static void heartbeat_answered(void *cookie, int err, int fenced)
{
	struct ctl *ctl = cookie;

	(void)fenced;
	if (err == -ESTALE && ctl->brokers)
		heartbeat_stale(ctl->brokers);
}

/* The active controller here serves another node's heartbeat. */
static int heartbeat_serve(struct ctl *ctl, int32_t id, int64_t epoch, int16_t mv_max, int *fenced)
{
	const struct meta_broker *b;
	int rc = ctl_controller_heartbeat(ctl, id, epoch, mv_max);

	b = metalog_broker(ctl->ml, id);
	*fenced = !b || b->fenced;
	return rc;
}

/* 0, or -ENOTCONN: no controller to send it to now. */
static int heartbeat(struct ctl *ctl)
{
	struct ctl_brokers *cb = ctl->brokers;
	struct ctl_channel *ch = ctl_quorum_channel(ctl);

	if (cb->epoch <= 0 || ctl_elect_shutting_down(ctl, ctl->b->set.node_id))
		return 0;   /* a controlled shutdown fenced it: no heartbeat unfences it */
	if (ch && !ctl_quorum_is_leader(ctl))
		return ctl_channel_heartbeat(ch, ctl->b->set.node_id, cb->epoch, heartbeat_answered, ctl);
	if (ctl_controller_heartbeat(ctl, ctl->b->set.node_id, cb->epoch, meta_features_local_max()) == -ESTALE)
		heartbeat_stale(cb);
	return 0;
}

static void register_propose(struct ctl *ctl);

static void registered(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct ctl_brokers *cb = ctl->brokers;
	char msg[256];

	(void)cookie;
	cb->proposing = 0;
	if ((err == -QUORUM_ELOST || err == -ETIMEDOUT || err == -ESTALE) && ctl_quorum_channel(ctl) &&
	    cb->retries++ < 5) {
		/* a cluster's leader went with the answer, or a snapshot this
		 * node installed passed over the record (ctl_channel.c: its
		 * outcome unknown here): register again, as a new incarnation
		 * (the lost one, if applied, is superseded) */
		register_propose(ctl);
		return;
	}
	if (err < 0) {
		void (*ready)(struct ctl *, int, const char *) = cb->ready;

		snprintf(msg, sizeof(msg), "cannot register this broker in the metadata log: %s", strerror(-err));
		cb->ready = NULL;
		if (ready)
			ready(ctl, err, msg);
		return;
	}
	cb->epoch = a->broker_epoch;
	cb->next_hb_ms = ctl->now_ms;
	heartbeat(ctl);   /* unfences it: ready runs once that is applied */
}

void ctl_brokers_start(struct ctl *ctl, void (*ready)(struct ctl *ctl, int err, const char *msg))
{
	struct ctl_brokers *cb = calloc(1, sizeof(*cb));

	if (!cb)
		abort();   /* the control thread's own bookkeeping */
	ctl->brokers = cb;
	cb->ready = ready;
	cb->was_leader = ctl_quorum_is_leader(ctl);
	if (ctl_quorum_channel(ctl))
		ctl_channel_serve_heartbeats(ctl_quorum_channel(ctl), heartbeat_serve);
	cb->interval_ms = config_int(ctl->cfg, "broker.heartbeat.interval.ms");
	cb->session_ms = config_int(ctl->cfg, "broker.session.timeout.ms");
	if (metalog_metadata_version(ctl->ml) > meta_features_local_max()) {
		/* Kafka's controller refuses such a registration: this node
		 * could not read what the cluster writes */
		char msg[256];

		cb->ready = NULL;
		snprintf(msg, sizeof(msg), "the cluster's metadata.version is %d and this node supports %d at most "
			 "(a node of an older build cannot join once the level was raised)",
			 metalog_metadata_version(ctl->ml), meta_features_local_max());
		ready(ctl, -EOPNOTSUPP, msg);
		return;
	}
	if (ctl->b->set.controller_only) {
		/* never a broker: nothing to register, serve at once */
		cb->ready = NULL;
		ready(ctl, 0, NULL);
		return;
	}
	register_propose(ctl);
}

/* A REGISTER_BROKER record with a new incarnation: REGISTER_BROKER_ENDPOINTS
 * (every listener) from metadata.version 2, REGISTER_BROKER below. */
static void register_propose(struct ctl *ctl)
{
	struct ctl_brokers *cb = ctl->brokers;
	struct broker *b = ctl->b;
	struct metalog_rec r;
	int rc;

	if (getrandom(cb->incarnation, sizeof(cb->incarnation), 0) != (ssize_t)sizeof(cb->incarnation)) {
		/* no entropy: the clock still makes each start's differ */
		int64_t t = ctl->wall;

		memcpy(cb->incarnation, &t, sizeof(t));
	}
	/* with DPDK, followers fetch from this node's shards' replication
	 * queue pairs at dpdk.listen (native REPLICA_FETCH) */
	if (b->set.nlisteners > 0 && metalog_metadata_version(ctl->ml) < META_MV_ENDPOINTS) {
		/* metadata.version 1: nodes of older builds cannot read a
		 * REGISTER_BROKER_ENDPOINTS record, so the inter-broker
		 * listener alone is registered and clients of every listener
		 * are told it (control/meta_features.h) */
		const struct broker_listener *l = &b->set.listeners[0];

		if (b->set.nlisteners > 1)
			slog(SLOG_INFO, "the cluster's metadata.version is %d: this broker registers its "
				"inter-broker listener %s (%s:%d) only, and clients of its %d other listeners are told "
				"that address until the level is 2 (sluicectl features upgrade --metadata 2, once every "
				"node runs a build that supports it)", metalog_metadata_version(ctl->ml), l->name,
				l->adv_host, l->adv_port, b->set.nlisteners - 1);
		rc = metalog_build_register_broker_repl(ctl->ml, b->set.node_id, cb->incarnation, l->adv_host,
							l->adv_port, b->set.rack, b->dpdk ? b->set.dpdk_ip : 0,
							b->dpdk ? b->set.dpdk_udp_port : 0, &r);
	} else if (b->set.nlisteners > 0) {
		/* every listener at its advertised address, the inter-broker
		 * one (listeners[0]) named: clients are told of this broker
		 * at the one they came through */
		struct meta_endpoint eps[META_BROKER_MAX_ENDPOINTS];
		int n = b->set.nlisteners < META_BROKER_MAX_ENDPOINTS ? b->set.nlisteners : META_BROKER_MAX_ENDPOINTS;

		memset(eps, 0, sizeof(eps));
		for (int i = 0; i < n; i++) {
			const struct broker_listener *l = &b->set.listeners[i];

			snprintf(eps[i].name, sizeof(eps[i].name), "%s", l->name);
			snprintf(eps[i].host, sizeof(eps[i].host), "%s", l->adv_host);
			eps[i].port = l->adv_port;
			eps[i].protocol = (int16_t)((l->sasl ? 2 : 0) + (l->tls ? 1 : 0));
		}
		rc = metalog_build_register_endpoints(ctl->ml, b->set.node_id, cb->incarnation, b->set.rack,
						      b->dpdk ? b->set.dpdk_ip : 0, b->dpdk ? b->set.dpdk_udp_port : 0,
						      eps[0].name, eps, n, &r);
	} else {
		rc = metalog_build_register_broker_repl(ctl->ml, b->set.node_id, cb->incarnation, b->set.adv_host,
							b->set.adv_port, b->set.rack, b->dpdk ? b->set.dpdk_ip : 0,
							b->dpdk ? b->set.dpdk_udp_port : 0, &r);
	}
	if (rc < 0) {
		ctl_meta_refuse(ctl, rc, registered, NULL);
		return;
	}
	cb->proposing = 1;
	ctl_meta_propose(ctl, &r, registered, NULL);
}

int ctl_brokers_tick(struct ctl *ctl, int timeout)
{
	struct ctl_brokers *cb = ctl->brokers;
	int64_t wait;

	if (!cb || (cb->epoch <= 0 && !ctl->b->set.controller_only))
		return timeout;
	if (ctl->b->set.controller_only) {
		/* no broker here: the active controller's part only */
		if (ctl_quorum_is_leader(ctl)) {
			if (!cb->was_leader)
				cb->nhb = 0;
			controller_check_sessions(ctl, cb->session_ms);
		}
		cb->was_leader = ctl_quorum_is_leader(ctl);
		return timeout;
	}
	if (ctl->now_ms >= cb->next_hb_ms)
		cb->next_hb_ms = ctl->now_ms + (heartbeat(ctl) == -ENOTCONN ? 200 : cb->interval_ms);
	if (cb->ready && !cb->restarting && !cb->proposing) {
		/* unfenced by a controller on another node (on this one,
		 * fence_done got there first) */
		const struct meta_broker *me = metalog_broker(ctl->ml, ctl->b->set.node_id);

		if (me && me->epoch == cb->epoch && !me->fenced)
			leaders_restart(ctl);
	}
	if (ctl_quorum_is_leader(ctl)) {
		if (!cb->was_leader)
			took_over(ctl);
		controller_check_sessions(ctl, cb->session_ms);
	}
	cb->was_leader = ctl_quorum_is_leader(ctl);
	wait = cb->next_hb_ms - ctl->now_ms;
	if (wait < 0)
		wait = 0;
	return timeout < 0 || wait < timeout ? (int)wait : timeout;
}

void ctl_brokers_state(const struct ctl *ctl, struct ctl_broker_state *st)
{
	const struct ctl_brokers *cb = ctl->brokers;

	memset(st, 0, sizeof(*st));
	st->epoch = -1;
	if (!cb)
		return;
	st->epoch = cb->epoch > 0 ? cb->epoch : -1;
	st->fenced_total = cb->fenced_total;
	st->unfenced_total = cb->unfenced_total;
	for (int i = 0; i < metalog_broker_count(ctl->ml); i++) {
		const struct meta_broker *b = metalog_broker_at(ctl->ml, i);

		st->registered++;
		st->fenced += b->fenced;
		if (b->id == ctl->b->set.node_id)
			st->self_fenced = b->fenced;
	}
}

void ctl_brokers_foreach(const struct ctl *ctl, ctl_broker_fn *fn, void *arg)
{
	for (int i = 0; i < metalog_broker_count(ctl->ml); i++) {
		const struct meta_broker *b = metalog_broker_at(ctl->ml, i);

		fn(b->id, b->host, b->port, b->rack, b->fenced, arg);
	}
}

void ctl_brokers_fini(struct ctl *ctl)
{
	if (!ctl->brokers)
		return;
	free(ctl->brokers->hb);
	free(ctl->brokers);
	ctl->brokers = NULL;
}
