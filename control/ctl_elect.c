/* control/ctl_elect.c — leader elections (Kafka's KRaft controller,
 * without KIP-966): the active controller keeps every partition led by a
 * live broker (registered, unfenced, not shutting down), by the rules of
 * control/election.h, through PARTITION_CHANGE records; and every node's
 * published snapshot follows the partition records applied.
 *
 * - When a broker is fenced, unfenced or unregistered (its record
 *   applied), and when this node becomes the active controller (the
 *   previous one may have left a fencing half-followed), the controller
 *   looks at every partition: a broker that is not live leaves the ISR
 *   (unless it is the last member), a partition whose leader is not live
 *   takes the first live ISR member in replicas order, or with
 *   unclean.leader.election.enable the first live replica; else it is
 *   offline (leader -1) until a member of its ISR comes back. One record
 *   per partition changed; the next look waits until they are applied, so
 *   every record is built against an image that has the previous ones.
 * - This node, the active controller, counts as live unless it is
 *   shutting down: it is fenced only for the moment its own registration
 *   takes at start (BROKER_RESTARTED then moves its leaderships, or gives
 *   its partitions their new epoch: control/ctl_brokers.c).
 * - Every node: a PARTITION_CHANGE, BROKER_RESTARTED or LEADER_RESTARTED
 *   applied makes the
 *   published snapshot follow the image (each topic whose leaders, epochs
 *   or ISR differ is rebuilt and replaced; it waits while a topic
 *   operation is in flight, as that operation holds the topics it
 *   replaces), and a partition this node now leads takes its new leader
 *   epoch on its shard (part_proxy_set_leader_epoch). Both are decided
 *   from the image and the control thread's book (ctl_homes.h: the epoch
 *   last told), never by reading the published entry's partitions back
 *   (whether it still follows the image is the builder's query,
 *   ctl_topic_follows).
 * - ElectLeaders (bottom): the active controller's elections for the
 *   partitions a client names; every other node forwards the request to
 *   it over the controller channel and relays its answer.
 *
 * @thread ctl
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/config.h"
#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/election.h"
#include "control/meta_brokers.h"
#include "control/meta_parts.h"
#include "control/metalog.h"
#include "control/quorum.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part_proxy.h"
#include "storage/slog.h"

/* A controlled shutdown stops waiting for its moves once no quorum leader
 * has been known this long (twice libraft's default election timeout). */
#define CE_SHUT_LEADERLESS_MS 2000

enum shutdown_phase {
	SHUT_NONE,                   /* not asked */
	SHUT_MOVING,                 /* this node is fenced: its leaderships move */
	SHUT_TRANSFER,               /* the metadata quorum's leadership to move */
	SHUT_TRANSFERRING,           /* ... moving */
	SHUT_DONE,
};

struct ctl_elect {
	enum shutdown_phase shut;
	int64_t shut_logged;         /* partitions last said to be waited for */
	int64_t shut_leaderless_ms;  /* moving: since when no quorum leader is known (0: one is) */
	int scan_wanted;             /* brokers changed, or this node leads now */
	int inflight;                /* PARTITION_CHANGE records proposed, not applied */
	int dirty;                   /* partition records applied: the snapshot follows */
	int32_t *shutting;           /* brokers shutting down (not live) */
	int nshutting, cap_shutting;
	uint64_t elections, unclean;
	int serving;                 /* forwarded ElectLeaders served (the channel's) */
};

static struct ctl_elect *ce_of(struct ctl *ctl)
{
	if (!ctl->elect && !(ctl->elect = calloc(1, sizeof(*ctl->elect))))
		abort();   /* the control thread's own bookkeeping */
	return ctl->elect;
}

void ctl_elect_fini(struct ctl *ctl)
{
	if (!ctl->elect)
		return;
	free(ctl->elect->shutting);
	free(ctl->elect);
	ctl->elect = NULL;
}

int ctl_elect_shutting_down(const struct ctl *ctl, int32_t id)
{
	const struct ctl_elect *ce = ctl->elect;

	return ce && election_has(ce->shutting, ce->nshutting, id);
}

/* The live brokers (*out malloc()ed, the count returned). */
static int live_brokers(struct ctl *ctl, int32_t **out)
{
	int n = metalog_broker_count(ctl->ml), k = 0;
	int32_t self = ctl->b->set.node_id, *ids = malloc(((size_t)n + 1) * sizeof(*ids));

	if (!ids)
		abort();   /* the control thread's own bookkeeping */
	for (int i = 0; i < n; i++) {
		const struct meta_broker *mb = metalog_broker_at(ctl->ml, i);

		if ((mb->fenced && mb->id != self) || ctl_elect_shutting_down(ctl, mb->id))
			continue;
		ids[k++] = mb->id;
	}
	if (!metalog_broker(ctl->ml, self) && !ctl_elect_shutting_down(ctl, self) && !ctl->b->set.controller_only)
		ids[k++] = self;   /* not registered yet: at start, before its record */
	*out = ids;
	return k;
}

#define UNCLEAN_KEY "unclean.leader.election.enable"

int ctl_elect_unclean_enabled(const struct ctl *ctl, const struct meta_topic *mt)
{
	int32_t scope;
	const char *k, *v;
	int on = config_int(ctl->cfg, UNCLEAN_KEY) != 0;

	for (int i = 0; i < mt->nconfigs; i++)
		if (!strcmp(mt->config_keys[i], UNCLEAN_KEY) && mt->config_values[i])
			return !strcasecmp(mt->config_values[i], "true");
	/* the broker's: static, then the image's run-time changes (cluster-wide,
	 * then this node's), read from the image itself, which a change reaches
	 * before the broker config in effect is rebuilt */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; metalog_broker_config_at(ctl->ml, i, &scope, &k, &v) == 0; i++)
			if ((pass == 0 ? scope == META_SCOPE_CLUSTER : scope == ctl->b->set.node_id) &&
			    !strcmp(k, UNCLEAN_KEY) && v)
				on = !strcasecmp(v, "true");
	return on;
}

static void elect_in(struct ctl *ctl, const struct meta_topic *mt, int32_t idx, const int32_t *live, int nlive,
		  struct election_in *in)
{
	const struct meta_part *p = &mt->parts[idx];

	in->replicas = p->replicas;
	in->nreplicas = p->nreplicas;
	in->isr = p->isr;
	in->nisr = p->nisr;
	in->leader = p->leader;
	in->live = live;
	in->nlive = nlive;
	in->unclean = ctl_elect_unclean_enabled(ctl, mt);
}

/* cookie: bit 0 the leader changes, bit 1 an unclean election */
static void change_done(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct ctl_elect *ce = ce_of(ctl);
	intptr_t how = (intptr_t)cookie;

	(void)a;
	ce->inflight--;
	if (err < 0) {
		/* the image moved on (a topic deleted, a newer change): look again */
		ce->scan_wanted = 1;
		return;
	}
	if (how & 1)
		ce->elections++;
	if (how & 2)
		ce->unclean++;
}

static int elect_propose(struct ctl *ctl, const struct meta_topic *mt, int32_t idx, const struct election_out *out,
		      ctl_meta_done_fn done, void *cookie)
{
	struct metalog_rec r;
	int rc = metalog_build_partition_change(ctl->ml, mt->name, idx, out->leader_changed ? out->leader : -2,
						out->isr_changed ? out->isr : NULL, out->nisr, NULL, 0, &r);

	if (rc < 0 || !r.len) {
		metalog_rec_free(&r);
		return rc < 0 ? rc : -EALREADY;
	}
	if (out->leader_changed)
		slog(SLOG_NOTICE, "partition %s-%d: leader %d -> %d%s", mt->name, idx,
			mt->parts[idx].leader, out->leader,
			out->unclean ? " (unclean: out of sync)" : out->leader < 0 ? " (offline: no live replica in sync)"
			: "");
	ctl_meta_propose(ctl, &r, done, cookie);
	return 0;
}

/* The active controller's look at every partition. */
static void elect_scan(struct ctl *ctl)
{
	struct ctl_elect *ce = ce_of(ctl);
	int32_t *live;
	int nlive = live_brokers(ctl, &live);

	for (int i = 0; i < metalog_topic_count(ctl->ml); i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);

		for (int32_t j = 0; j < mt->partitions; j++) {
			struct election_in in;
			struct election_out out;

			elect_in(ctl, mt, j, live, nlive, &in);
			if (!election_on_brokers(&in, &out))
				continue;
			if (out.leader < 0 && in.leader >= 0 && ctl_elect_shutting_down(ctl, in.leader))
				continue;   /* nowhere to move: it leads until it is gone */
			if (elect_propose(ctl, mt, j, &out, change_done,
					      (void *)(intptr_t)((out.leader_changed && out.leader >= 0) |
								 (out.unclean ? 2 : 0))) == 0)
				ce->inflight++;
		}
	}
	free(live);
}

/* Not once this node's metadata log failed: every record it proposes is
 * refused at once, and a refused change asks for another look
 * (change_done), so the look would go round without end, proposing (and
 * printing) the same leader changes until the node is gone. */
int ctl_elect_active(const struct ctl *ctl)
{
	return ctl_quorum_leads(ctl) && !ctl_quorum_failed(ctl);
}

static void epoch_set(void *self, void *cookie, int err)
{
	(void)self;
	(void)cookie;
	(void)err;   /* -ESTALE: the log was there already; -ENOENT: deleted since */
}

/* The snapshot follows the image: every topic that differs, rebuilt (the
 * builder's query, ctl_topic_stale). A partition this node leads and
 * has open takes the image's epoch when that is above the one the book
 * says its owner was last told (ctl_homes.h), and the book notes it as
 * the message goes. */
static void elect_republish(struct ctl *ctl)
{
	const struct meta_topic **due;
	int32_t self = ctl->b->set.node_id;
	int n = 0, ntopics = metalog_topic_count(ctl->ml);

	if (!ntopics)
		return;
	due = xcalloc((size_t)ntopics, sizeof(*due));
	for (int i = 0; i < ntopics; i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);

		if (!ctl_topic_stale(ctl, mt))
			continue;   /* not served as this topic, or says what the image says */
		for (int32_t j = 0; j < mt->partitions; j++) {
			const struct meta_part *p = &mt->parts[j];
			struct ctl_home *h = ctl_home_find(ctl->homes, mt->id, j);
			int32_t epoch;
			struct part_proxy px;

			if (!h || h->opened != 1 || !h->told || p->leader != self)
				continue;   /* not open here, or not led here */
			epoch = ctl_home_epoch(h, p->leader, p->leader_epoch);
			if (epoch <= h->told_epoch)
				continue;   /* told already (or its log's is later) */
			part_proxy_set_leader_epoch(ctl_part_proxy(ctl, &px), h->shard, part_addr_of(mt->id, j), epoch,
						    epoch_set, NULL);
			h->told_leader = p->leader;
			h->told_epoch = epoch;
		}
		due[n++] = mt;
	}
	ctl_republish(ctl, due, n);   /* (each built with the epochs just told) */
	free(due);
}

/* ---- controlled shutdown ------------------------------------------------ */

/* Partitions whose ISR this node is in with another live member: the
 * controller's look takes it out of them once it is fenced (election.h:
 * a broker that is not live leaves the ISR unless no live member is left),
 * and moves the leadership of those it leads to that member. *leads: how
 * many of them it leads. */
static int64_t leavable(struct ctl *ctl, int64_t *leads)
{
	int32_t self = ctl->b->set.node_id, *live;
	int nlive = live_brokers(ctl, &live);
	int64_t n = 0;

	*leads = 0;
	for (int i = 0; i < metalog_topic_count(ctl->ml); i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);

		for (int32_t j = 0; j < mt->partitions; j++) {
			const struct meta_part *p = &mt->parts[j];

			if (!election_has(p->isr, p->nisr, self))
				continue;
			for (int k = 0; k < p->nisr; k++)
				if (p->isr[k] != self && election_has(live, nlive, p->isr[k])) {
					n++;
					*leads += p->leader == self;
					break;
				}
		}
	}
	free(live);
	return n;
}

static void shutdown_fenced(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	(void)cookie;
	(void)a;
	if (err < 0) {
		slog(SLOG_WARN, "controlled shutdown: cannot fence this broker in the metadata log (%s): "
			"its partitions keep their leader until its session ends", strerror(-err));
		ce_of(ctl)->shut = SHUT_TRANSFER;
	}
}

static void transferred(void *cookie, int32_t leader)
{
	struct ctl *ctl = cookie;

	slog(SLOG_NOTICE, "controlled shutdown: the metadata quorum's leader is now %d", leader);
	ce_of(ctl)->shut = SHUT_DONE;
}

/* The steps of a controlled shutdown, each turn once asked. */
static void shutdown_step(struct ctl *ctl)
{
	struct ctl_elect *ce = ce_of(ctl);
	int32_t self = ctl->b->set.node_id;

	if (ce->shut == SHUT_NONE) {
		const struct meta_broker *me = metalog_broker(ctl->ml, self);
		int32_t *live;
		int nlive = live_brokers(ctl, &live), others = nlive - election_has(live, nlive, self);
		int64_t leads, n = leavable(ctl, &leads);
		struct metalog_rec r;

		free(live);
		ce->shut = SHUT_TRANSFER;
		if (!me || !others || !n)
			return;   /* in no ISR another live broker is in (one node): exit as before */
		/* not live from now: no heartbeat unfences it again */
		if (ce->nshutting == ce->cap_shutting) {
			ce->cap_shutting = ce->cap_shutting ? 2 * ce->cap_shutting : 4;
			if (!(ce->shutting = realloc(ce->shutting, (size_t)ce->cap_shutting * sizeof(*ce->shutting))))
				abort();   /* the control thread's own bookkeeping */
		}
		ce->shutting[ce->nshutting++] = self;
		/* Kafka's controlled shutdown: fenced, this broker leaves every
		 * ISR (so that no acks=all waits for it until
		 * replica.lag.time.max.ms) and its leaderships move, each one
		 * PARTITION_CHANGE of the controller's; a leader asking it back
		 * in is refused while it is fenced (control/ctl_roles.c) */
		slog(SLOG_NOTICE, "controlled shutdown: leaving the ISR of %lld partitions, moving the "
			"leadership of %lld of them to other in-sync replicas", (long long)n, (long long)leads);
		ce->shut = SHUT_MOVING;
		ce->shut_logged = n;
		__atomic_store_n(&ctl->shutdown_waiting, n, __ATOMIC_RELAXED);
		ce->scan_wanted = 1;
		if (metalog_build_broker_fence(ctl->ml, self, me->epoch, 1, &r) < 0)
			metalog_rec_free(&r);
		else
			ctl_meta_propose(ctl, &r, shutdown_fenced, NULL);
		return;
	}
	if (ce->shut == SHUT_MOVING) {
		int64_t leads, n = leavable(ctl, &leads);

		__atomic_store_n(&ctl->shutdown_waiting, n, __ATOMIC_RELAXED);
		if (n && ctl_quorum_leader(ctl) < 0) {
			/* Nothing moves without an active controller: with a
			 * majority of the voters gone (a whole cluster stopped
			 * at once) none is elected, and waiting out the 5 s bound
			 * only delays the stop. An election takes an election
			 * timeout or two: past CE_SHUT_LEADERLESS_MS without a
			 * leader, stop waiting. */
			if (!ce->shut_leaderless_ms)
				ce->shut_leaderless_ms = ctl->now_ms;
			else if (ctl->now_ms - ce->shut_leaderless_ms >= CE_SHUT_LEADERLESS_MS) {
				slog(SLOG_WARN, "controlled shutdown: no metadata quorum leader for %d ms (a "
					"majority of the voters is down?): stopping without waiting for %lld partitions "
					"to leave the ISR", CE_SHUT_LEADERLESS_MS, (long long)n);
				ce->shut = SHUT_DONE;
				__atomic_store_n(&ctl->shutdown_settled, 1, __ATOMIC_RELEASE);
				return;
			}
		} else {
			ce->shut_leaderless_ms = 0;
		}
		if (n && n != ce->shut_logged) {
			slog(SLOG_NOTICE, "controlled shutdown: waiting for %lld partitions to leave the ISR "
				"(%lld to change leader)", (long long)n, (long long)leads);
			ce->shut_logged = n;
		}
		if (!n && !ce->inflight)
			ce->shut = SHUT_TRANSFER;
		return;
	}
	if (ce->shut == SHUT_TRANSFER) {
		int rc = ctl_quorum_leads(ctl) ? ctl_quorum_transfer(ctl, transferred, ctl) : -ENOENT;

		if (rc == 0) {
			slog(SLOG_NOTICE, "controlled shutdown: handing the metadata quorum's leadership to "
				"another voter");
			ce->shut = SHUT_TRANSFERRING;   /* until transferred runs */
			return;
		}
		ce->shut = SHUT_DONE;   /* -ENOENT: no other voter */
	}
	if (ce->shut == SHUT_DONE)
		__atomic_store_n(&ctl->shutdown_settled, 1, __ATOMIC_RELEASE);
}

void ctl_shutdown_ask(struct ctl *ctl)
{
	uint64_t one = 1;

	__atomic_store_n(&ctl->shutdown_asked, 1, __ATOMIC_RELEASE);
	if (write(ctl->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: it wakes anyway */
	}
}

int ctl_shutdown_settled(struct ctl *ctl)
{
	return __atomic_load_n(&ctl->shutdown_settled, __ATOMIC_ACQUIRE);
}

void ctl_shutdown_controlled(struct ctl *ctl, int timeout_ms)
{
	struct timespec t0, t;

	ctl_shutdown_ask(ctl);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int64_t ms;

		if (ctl_shutdown_settled(ctl))
			return;
		clock_gettime(CLOCK_MONOTONIC, &t);
		ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= timeout_ms) {
			slog(SLOG_WARN, "controlled shutdown: stopped waiting after %d ms (%lld partitions "
				"still have this broker in their ISR: it leaves them, and those it leads get a new "
				"leader, once its session ends)", timeout_ms,
				(long long)__atomic_load_n(&ctl->shutdown_waiting, __ATOMIC_RELAXED));
			return;
		}
		usleep(5000);
	}
}

static int elect_serve(struct ctl *ctl, const void *buf, size_t len, void *token);

void ctl_elect_tick(struct ctl *ctl)
{
	struct ctl_elect *ce = ce_of(ctl);

	if (ctl->elect_due & CTL_ELECT_PUBLISH)
		ce->dirty = 1;
	if (ctl->elect_due & CTL_ELECT_SCAN)
		ce->scan_wanted = 1;
	ctl->elect_due = 0;
	if (!ce->serving && ctl_quorum_channel(ctl)) {
		/* the leader's side of forwarded ElectLeaders (below) */
		ctl_channel_serve_elect(ctl_quorum_channel(ctl), elect_serve);
		ce->serving = 1;
	}

	if (ce->dirty && !ctl->ops_open) {
		ce->dirty = 0;
		elect_republish(ctl);
	}
	if (ce->scan_wanted && !ce->inflight && ctl->brokers && ctl_elect_active(ctl)) {
		ce->scan_wanted = 0;
		elect_scan(ctl);
	}
	while (__atomic_load_n(&ctl->shutdown_asked, __ATOMIC_ACQUIRE) && !ctl_shutdown_settled(ctl)) {
		enum shutdown_phase was = ce->shut;

		shutdown_step(ctl);
		if (ce->shut == was)
			break;   /* waiting: a later turn goes on */
	}
}

void ctl_elect_state(const struct ctl *ctl, struct ctl_elect_state *st)
{
	memset(st, 0, sizeof(*st));
	if (ctl->elect) {
		st->elections_total = ctl->elect->elections;
		st->unclean_total = ctl->elect->unclean;
	}
	for (int i = 0; ctl->ml && i < metalog_topic_count(ctl->ml); i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);

		for (int32_t j = 0; j < mt->partitions; j++)
			st->offline += mt->parts[j].leader < 0;
	}
}

/* ---- ElectLeaders --------------------------------------------------------- */

/* Only the active controller elects. Another node (a voter that does not
 * lead, a broker-only node) forwards the request to it over the
 * controller channel (ELECT, ctl_channel.c), as Kafka's brokers forward
 * ElectLeaders to the active controller, and answers with its per-
 * partition codes; the leader runs them as its own client's. A lost
 * connection or a leadership lost meanwhile answers NOT_CONTROLLER, no
 * leader found (or no answer) within the request's TimeoutMs (30 s when it
 * is not above 0, 5 minutes at most) REQUEST_TIMED_OUT: Kafka's retriable
 * codes (an admin client asks again). */

/* Once every partition of req has its code. */
typedef void (*elect_done_fn)(struct ctl *ctl, struct coord_elect *req, void *cookie);

/* One request in flight: its records proposed, not all applied. */
struct elect_req {
	struct coord_elect *req;
	elect_done_fn done;
	void *cookie;
	int pending;
};

struct elect_one {
	struct elect_req *er;
	struct coord_elect_part *part;
	int how;                     /* bit 1: unclean */
};

static void elect_finish(struct ctl *ctl, struct elect_req *er)
{
	if (--er->pending)
		return;
	er->done(ctl, er->req, er->cookie);
	free(er);
}

static void req_done(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct elect_one *o = cookie;
	struct elect_req *er = o->er;
	struct ctl_elect *ce = ce_of(ctl);

	(void)a;
	if (err == -QUORUM_ELOST || err == -QUORUM_ENOTLEADER || err == -ESHUTDOWN) {
		/* this node's leadership went meanwhile (the record may
		 * still be committed): Kafka's controller that moved */
		o->part->err = KERR_NOT_CONTROLLER;
	} else if (err == -ETIMEDOUT) {
		o->part->err = KERR_REQUEST_TIMED_OUT;
	} else if (err < 0) {
		/* the image moved on since it was built: the client may ask again */
		o->part->err = err == -ENOENT ? KERR_UNKNOWN_TOPIC_OR_PARTITION : KERR_ELIGIBLE_LEADERS_NOT_AVAILABLE;
	} else {
		ce->elections++;
		if (o->how & 2)
			ce->unclean++;
	}
	free(o);
	elect_finish(ctl, er);
}

/* The elections req asks for, on this node: each partition's code, the
 * records of those elected proposed; done runs once they are applied (from
 * a later turn), or at once when none was proposed. NOT_CONTROLLER for
 * every partition when this node is not the active controller. */
static void elect_run(struct ctl *ctl, struct coord_elect *req, elect_done_fn done, void *cookie)
{
	struct elect_req *er = xcalloc(1, sizeof(*er));
	int32_t *live;
	int nlive = live_brokers(ctl, &live), active = ctl_elect_active(ctl);

	er->req = req;
	er->done = done;
	er->cookie = cookie;
	er->pending = 1;   /* until every part is looked at */
	for (int i = 0; i < req->n; i++) {
		struct coord_elect_part *p = &req->parts[i];
		char name[META_TOPIC_NAME_MAX + 1];
		const struct meta_topic *mt = NULL;
		struct election_in in;
		struct election_out out;
		enum election_result res;
		struct elect_one *o;

		if (!active) {
			p->err = KERR_NOT_CONTROLLER;
			continue;
		}
		if (p->topic_len > 0 && p->topic_len <= META_TOPIC_NAME_MAX) {
			memcpy(name, p->topic, (size_t)p->topic_len);
			name[p->topic_len] = '\0';
			mt = metalog_topic(ctl->ml, name);
		}
		if (!mt || p->partition < 0 || p->partition >= mt->partitions) {
			p->err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
			continue;
		}
		elect_in(ctl, mt, p->partition, live, nlive, &in);
		res = req->type == 1 ? election_unclean(&in, &out) : election_preferred(&in, &out);
		p->err = (int16_t)res;
		if (res != ELECTION_DONE)
			continue;
		o = xcalloc(1, sizeof(*o));
		o->er = er;
		o->part = p;
		o->how = out.unclean ? 2 : 0;
		if (elect_propose(ctl, mt, p->partition, &out, req_done, o) < 0) {
			free(o);
			p->err = KERR_ELECTION_NOT_NEEDED;
			continue;
		}
		er->pending++;
	}
	free(live);
	elect_finish(ctl, er);
}

/* The channel's ELECT request (ctl_channel.c's header): u8 type, u32 n,
 * n x (u16 name length, the name, i32 partition), little-endian. A name
 * no topic can have goes as length 0 (the leader answers
 * UNKNOWN_TOPIC_OR_PARTITION). malloc()ed. */
static void *elect_encode(const struct coord_elect *req, size_t *len)
{
	size_t n = 5;
	uint8_t *b, *p;

	for (int i = 0; i < req->n; i++) {
		int32_t l = req->parts[i].topic_len;

		n += 6 + (l > 0 && l <= META_TOPIC_NAME_MAX ? (size_t)l : 0);
	}
	p = b = xcalloc(1, n);
	*p++ = (uint8_t)req->type;
	le32_store(p, (uint32_t)req->n);
	p += 4;
	for (int i = 0; i < req->n; i++) {
		const struct coord_elect_part *q = &req->parts[i];
		uint16_t l = q->topic_len > 0 && q->topic_len <= META_TOPIC_NAME_MAX ? (uint16_t)q->topic_len : 0;

		le16_store(p, l);
		if (l)
			memcpy(p + 2, q->topic, l);
		p += 2 + l;
		le32_store(p, (uint32_t)q->partition);
		p += 4;
	}
	*len = n;
	return b;
}

/* The request back (one malloc()ed block: the parts, then the names), or
 * NULL when it does not read. */
static struct coord_elect *elect_decode(const uint8_t *b, size_t len)
{
	struct coord_elect *req;
	const uint8_t *p = b + 5, *end = b + len;
	uint32_t n;
	char *names;

	if (len < 5 || b[0] > 1 || (n = le32_load(b + 1)) > (len - 5) / 6)
		return NULL;
	req = xcalloc(1, sizeof(*req) + n * sizeof(*req->parts) + len);
	req->type = b[0];
	req->n = (int)n;
	req->parts = (struct coord_elect_part *)(req + 1);
	names = (char *)(req->parts + n);
	for (uint32_t i = 0; i < n; i++) {
		struct coord_elect_part *q = &req->parts[i];
		uint16_t l;

		if (end - p < 2 || end - p - 2 < (l = le16_load(p)) + 4) {
			free(req);
			return NULL;
		}
		memcpy(names, p + 2, l);
		q->topic = names;
		q->topic_len = l;
		names += l;
		q->partition = (int32_t)le32_load(p + 2 + l);
		p += 6 + l;
	}
	return req;
}

/* The leader's answer: u32 n, n x i16 codes, in the request's order. */
static void elect_answered(struct ctl *ctl, struct coord_elect *req, void *token)
{
	size_t len = 4 + 2 * (size_t)req->n;
	uint8_t *b = xcalloc(1, len);

	le32_store(b, (uint32_t)req->n);
	for (int i = 0; i < req->n; i++)
		le16_store(b + 4 + 2 * i, (uint16_t)req->parts[i].err);
	ctl_channel_elect_answer(ctl_quorum_channel(ctl), token, 0, b, len);
	free(b);
	free(req);
}

/* The controller channel's ELECT, on the leader (ctl_channel_serve_elect). */
static int elect_serve(struct ctl *ctl, const void *buf, size_t len, void *token)
{
	struct coord_elect *req = elect_decode(buf, len);

	if (!req)
		return -EPROTO;
	elect_run(ctl, req, elect_answered, token);
	return 0;
}

/* A shard's request, its reply owed. */
struct elect_asked {
	struct ctl *ctl;
	struct kafka_ctx *ctx;
	struct coord_elect *req;
	int from;
};

static void elect_replied(struct ctl *ctl, struct coord_elect *req, void *cookie)
{
	struct elect_asked *a = cookie;

	(void)req;
	ctl_reply(ctl, a->ctx, a->from);
	free(a);
}

static void elect_forwarded(void *cookie, int err, const void *buf, size_t len)
{
	struct elect_asked *a = cookie;
	struct coord_elect *req = a->req;
	const uint8_t *b = buf;
	int16_t code;

	if (err == 0 && len == 4 + 2 * (size_t)req->n && le32_load(b) == (uint32_t)req->n) {
		for (int i = 0; i < req->n; i++) {
			struct coord_elect_part *q = &req->parts[i];

			q->err = (int16_t)le16_load(b + 4 + 2 * i);
		}
		elect_replied(a->ctl, req, a);
		return;
	}
	if (err == -QUORUM_ENOTLEADER && ctl_elect_active(a->ctl)) {
		elect_run(a->ctl, req, elect_replied, a);   /* this node leads now */
		return;
	}
	/* no answer (the connection or the leadership lost, no leader found):
	 * Kafka's retriable codes */
	code = err == -ETIMEDOUT ? KERR_REQUEST_TIMED_OUT : KERR_NOT_CONTROLLER;
	if (err != -ETIMEDOUT && err != -ENOTCONN && err != -QUORUM_ENOTLEADER && err != -QUORUM_ELOST &&
	    err != -ESHUTDOWN)
		slog(SLOG_WARN, "ElectLeaders forwarded to the active controller: %s",
			err ? strerror(-err) : "its answer does not read");
	for (int i = 0; i < req->n; i++) {
		struct coord_elect_part *q = &req->parts[i];

		q->err = code;
	}
	elect_replied(a->ctl, req, a);
}

static void elect_msg(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	struct coord_elect *req = m->p[1];
	struct ctl_channel *ch = ctl_quorum_channel(ctl);
	struct elect_asked *a = xcalloc(1, sizeof(*a));

	*a = (struct elect_asked){ ctl, m->p[0], req, (int)m->v[0] };
	if (ch && !ctl_quorum_leads(ctl)) {
		size_t len;
		void *b = elect_encode(req, &len);
		int rc = ctl_channel_elect(ch, b, len, req->timeout_ms, elect_forwarded, a);

		free(b);
		if (rc < 0)
			elect_forwarded(a, rc, NULL, 0);
		return;
	}
	elect_run(ctl, req, elect_replied, a);
}

void ctl_elect_submit(struct kafka_ctx *ctx, struct coord_elect *req)
{
	struct shard_msg m = { .fn = elect_msg, .p = { ctx, req }, .v = { kafka_ctx_shard_id(ctx) } };

	kafka_ctx_send_ctl(ctx, &m);
}
