/* control/ctl_reassign.c — partition reassignments (Kafka's KIP-455, as
 * KRaft's controller runs them), every step a PARTITION_REASSIGN record
 * through the metadata quorum (control/reassign.h has the steps):
 *
 * - AlterPartitionReassignments (from a shard, any node): a target
 *   starts or replaces a partition's reassignment, null cancels it. The
 *   record is built against this node's image at the partition's epoch,
 *   and proposed through the quorum's leader; one that meets a newer
 *   epoch there is refused and built again (three times at most). The
 *   request is answered once its records are applied here.
 * - ListPartitionReassignments (any node): the image's reassignments in
 *   progress, with their adding and removing replicas.
 * - The active controller, each turn partition records were applied,
 *   completes every reassignment whose adding replicas are all in the ISR
 *   (they joined it as any follower does: control/ctl_roles.c).
 * - Every node opens the partitions the image made it a replica of (an
 *   adding replica: it fetches from the leader from offset 0) and retires
 *   those it is no longer a replica of (a completed reassignment removed
 *   it): closed on their shard, published without them, their directory
 *   removed.
 *
 * @thread ctl
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/config.h"
#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/meta_brokers.h"
#include "control/meta_parts.h"
#include "control/metalog.h"
#include "control/quorum.h"
#include "control/reassign.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part_proxy.h"
#include "storage/slog.h"

#define ALTER_TRIES 3                /* a record refused for a newer epoch: built again */

struct ctl_reassign {
	int throttle_read;           /* the throttle was read from the image once */
	int inflight;                /* completions proposed, not applied */
	int scan_wanted;
	int host_wanted;             /* replicas this node gains or loses: look */
	uint64_t completed;
};

static struct ctl_reassign *cr_of(struct ctl *ctl)
{
	if (!ctl->reassign)
		ctl->reassign = xcalloc(1, sizeof(*ctl->reassign));
	return ctl->reassign;
}

void ctl_reassign_fini(struct ctl *ctl)
{
	free(ctl->reassign);
	ctl->reassign = NULL;
}

static void state_of(const struct meta_part *p, struct reassign_state *s)
{
	s->replicas = p->replicas;
	s->nreplicas = p->nreplicas;
	s->isr = p->isr;
	s->nisr = p->nisr;
	s->adding = p->moving;
	s->nadding = p->nadding;
	s->removing = p->moving ? p->moving + p->nadding : NULL;
	s->nremoving = p->nremoving;
	s->leader = p->leader;
}

static int build(struct ctl *ctl, const char *name, int32_t idx, const struct reassign_plan *pl,
		 struct metalog_rec *r)
{
	return metalog_build_partition_reassign(ctl->ml, name, idx, pl->leader, pl->nisr < 0 ? NULL : pl->isr,
						pl->nisr, pl->replicas, pl->nreplicas, pl->adding, pl->nadding,
						pl->removing, pl->nremoving, r);
}

static const char *fmt_rate(int64_t r)
{
	static char buf[96];

	snprintf(buf, sizeof(buf), "%lld bytes/s for the throttled replicas", (long long)r);
	return buf;
}

/* ---- the active controller: completions --------------------------------- */

static void completed(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct ctl_reassign *cr = cr_of(ctl);

	(void)a;
	(void)cookie;
	cr->inflight--;
	cr->scan_wanted = 1;         /* refused (a newer change): look again */
	if (err == 0)
		cr->completed++;
}

static void complete_scan(struct ctl *ctl)
{
	struct ctl_reassign *cr = cr_of(ctl);

	for (int i = 0; i < metalog_topic_count(ctl->ml); i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);

		for (int32_t j = 0; j < mt->partitions; j++) {
			const struct meta_part *p = &mt->parts[j];
			struct reassign_state s;
			struct reassign_plan pl;
			struct metalog_rec r;

			if (p->legacy || !meta_part_reassigning(p))
				continue;
			state_of(p, &s);
			if (!reassign_complete(&s, &pl))
				continue;
			if (build(ctl, mt->name, j, &pl, &r) < 0) {
				metalog_rec_free(&r);
				continue;
			}
			slog(SLOG_NOTICE, "partition %s-%d: reassignment complete (%d replicas%s)", mt->name, j,
				pl.nreplicas, pl.leader >= 0 ? ", a new leader" : "");
			cr->inflight++;
			ctl_meta_propose(ctl, &r, completed, NULL);
		}
	}
}

/* ---- every node: replicas gained and lost -------------------------------- */

static void hosting_done(struct ctl *ctl, struct ctl_op *op)
{
	(void)ctl;
	if (op->failed) {
		/* not again until the next partition record: no loop of failing opens */
		slog(SLOG_NOTICE, "a partition this node became a replica of: %s", op->fail_msg);
		return;
	}
	cr_of(ctl)->host_wanted = 1;   /* the image may have moved on meanwhile */
}

/* The partitions of served topic t this node must open (image replica,
 * not open) or retire (open, no longer a replica): how many. */
static int hosting_changes(struct ctl *ctl, const struct md_topic *t, const struct meta_topic *mt)
{
	int32_t self = ctl->b->set.node_id;
	int n = 0;

	if (t->nparts != mt->partitions)
		return 0;                /* partitions being added: their operation's */
	for (int32_t j = 0; j < mt->partitions; j++) {
		const struct meta_part *p = &mt->parts[j];
		int want = meta_part_has(p->replicas, p->nreplicas, self);

		n += want != (ctl_part_open_on(ctl, mt->id, j) >= 0);
	}
	return n;
}

static void rehost(struct ctl *ctl, struct md_topic *t, const struct meta_topic *mt)
{
	int32_t self = ctl->b->set.node_id;
	struct ctl_op *op = xcalloc(1, sizeof(*op));
	struct md_topic *nt = ctl_topic_build(ctl, mt);

	op->created = xcalloc(1, sizeof(*op->created));
	op->created_for = xcalloc(1, sizeof(*op->created_for));
	op->replaced = xcalloc(1, sizeof(*op->replaced));
	ctl->ops_open++;             /* ctl_op_step's end counts it out */
	op->started = hosting_done;
	op->created[op->ncreated++] = nt;
	op->replaced[op->nreplaced++] = t;
	for (int32_t j = 0; j < nt->nparts; j++) {
		const struct meta_part *p = &mt->parts[j];
		int32_t shard;
		struct part_proxy px;
		char *dir;

		if (ctl_part_open_on(ctl, mt->id, j) < 0 || meta_part_has(p->replicas, p->nreplicas, self))
			continue;
		/* no longer a replica: its log closes and its directory goes */
		if (asprintf(&dir, "%s/%s-%d", ctl->b->set.data_dir, mt->name, j) < 0)
			abort();
		if (op->nmade == op->made_cap) {
			op->made_cap = op->made_cap ? op->made_cap * 2 : 8;
			op->made = realloc(op->made, (size_t)op->made_cap * sizeof(*op->made));
			op->made_for = realloc(op->made_for, (size_t)op->made_cap * sizeof(*op->made_for));
			op->made_rm = realloc(op->made_rm, (size_t)op->made_cap);
			if (!op->made || !op->made_for || !op->made_rm)
				abort();   /* the control thread's own bookkeeping */
		}
		op->made[op->nmade] = dir;
		op->made_for[op->nmade] = nt;
		op->made_rm[op->nmade++] = 1;
		slog(SLOG_NOTICE, "partition %s-%d: no longer a replica here: its log is removed", mt->name,
			j);
		shard = ctl_home_take(ctl->homes, mt->id, j);   /* out of the book: nt publishes no block */
		op->pending++;
		part_proxy_retire(ctl_part_proxy(ctl, &px), shard, part_addr_of(mt->id, j), ctl_part_done, op);
	}
	/* the partitions this node became a replica of (those open are kept) */
	ctl_topic_open_parts(ctl, op, nt, 0);
	if (op->pending == 0)
		ctl_op_step(ctl, op);
}

static void hosting_scan(struct ctl *ctl)
{
	for (int i = 0; i < metalog_topic_count(ctl->ml) && !ctl->ops_open; i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);
		struct md_topic *t = ctl_topic_served_of(ctl, mt);   /* the handle rehost gives back */

		if (!t || mt->deleted || !hosting_changes(ctl, t, mt))
			continue;
		rehost(ctl, t, mt);      /* one operation at a time: it replaces the snapshot's topic */
	}
}

/* A rate key of this node: static, then the image's run-time changes
 * (cluster-wide, then this node's), read from the image itself: every
 * node follows a change as its record is applied. */
static int64_t rate_of(struct ctl *ctl, const char *key)
{
	int64_t rate = config_int(ctl->cfg, key);
	int32_t scope;
	const char *k, *v;

	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; metalog_broker_config_at(ctl->ml, i, &scope, &k, &v) == 0; i++)
			if ((pass == 0 ? scope == META_SCOPE_CLUSTER : scope == ctl->b->set.node_id) && !strcmp(k, key) &&
			    v)
				rate = strtoll(v, NULL, 10);
	return rate;
}

/* The replication throttles the shards apply: the follower's rate to
 * their fetchers' throttled partitions, the leader's to their answers to
 * throttled followers outside the ISR (dataplane/repl_quota.h). */
static void throttle_publish(struct ctl *ctl)
{
	static const char *const side[2] = { "follower", "leader" };
	int64_t *to[2] = { &ctl->b->repl_throttle_bps, &ctl->b->repl_leader_throttle_bps };

	for (int i = 0; i < 2; i++) {
		char key[64];
		int64_t r;

		snprintf(key, sizeof(key), "%s.replication.throttled.rate", side[i]);
		r = rate_of(ctl, key);
		if (r <= 0 || r == INT64_MAX)
			r = 0;
		if (__atomic_load_n(to[i], __ATOMIC_RELAXED) != r)
			slog(SLOG_NOTICE, "%s replication throttle: %s", side[i], r ? fmt_rate(r) : "none");
		__atomic_store_n(to[i], r, __ATOMIC_RELAXED);
	}
}

void ctl_reassign_tick(struct ctl *ctl)
{
	struct ctl_reassign *cr = cr_of(ctl);

	if (!cr->throttle_read && ctl->ml) {
		cr->throttle_read = 1;
		throttle_publish(ctl);
	}
	if (ctl->reassign_due) {
		throttle_publish(ctl);
		ctl->reassign_due = 0;
		cr->scan_wanted = 1;
		cr->host_wanted = 1;
	}
	if (cr->scan_wanted && !cr->inflight && ctl->brokers && ctl_quorum_leads(ctl)) {
		cr->scan_wanted = 0;
		complete_scan(ctl);
	}
	if (cr->host_wanted && !ctl->ops_open && ctl->ready && !ctl->init_err) {
		cr->host_wanted = 0;
		hosting_scan(ctl);
	}
}

void ctl_reassign_state(const struct ctl *ctl, struct ctl_reassign_state *st)
{
	memset(st, 0, sizeof(*st));
	if (ctl->reassign)
		st->completed_total = ctl->reassign->completed;
	for (int i = 0; ctl->ml && i < metalog_topic_count(ctl->ml); i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);

		for (int32_t j = 0; j < mt->partitions; j++)
			st->reassigning += !mt->parts[j].legacy && meta_part_reassigning(&mt->parts[j]);
	}
}

/* ---- AlterPartitionReassignments ---------------------------------------- */

struct alter_req {
	struct kafka_ctx *ctx;
	int from;
	int pending;
};

struct alter_one {
	struct alter_req *ar;
	struct coord_reassign_part *part;
	char name[META_TOPIC_NAME_MAX + 1];
	int tries;
};

static void alter_finish(struct ctl *ctl, struct alter_req *ar)
{
	if (--ar->pending == 0) {
		ctl_reply(ctl, ar->ctx, ar->from);
		free(ar);
	}
}

static void say(struct coord_reassign_part *p, int16_t err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(struct coord_reassign_part *p, int16_t err, const char *fmt, ...)
{
	va_list ap;

	p->err = err;
	va_start(ap, fmt);
	vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
	va_end(ap);
}

static int alter_one_propose(struct ctl *ctl, struct alter_one *o);

static void alter_applied(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct alter_one *o = cookie;
	struct alter_req *ar = o->ar;

	(void)a;
	if (err == -ESTALE && ++o->tries < ALTER_TRIES && alter_one_propose(ctl, o) == 1)
		return;                  /* built again against the image as it is now */
	if (err == -ENOENT || err == -EINVAL)
		say(o->part, KERR_UNKNOWN_TOPIC_OR_PARTITION, "The partition changed meanwhile.");
	else if (err == -ESTALE)
		say(o->part, KERR_REQUEST_TIMED_OUT, "The partition kept changing: try again.");
	else if (err < 0)
		say(o->part, KERR_NOT_CONTROLLER, "The metadata quorum did not take the change: %s.", strerror(-err));
	free(o);
	alter_finish(ctl, ar);
}

/* Check and propose o's change against the image: 1 proposed (alter_applied
 * runs), 0 answered (o->part says how). */
static int alter_one_propose(struct ctl *ctl, struct alter_one *o)
{
	struct coord_reassign_part *p = o->part;
	const struct meta_topic *mt = metalog_topic(ctl->ml, o->name);
	const struct meta_part *mp;
	struct reassign_state s;
	struct reassign_plan pl;
	struct metalog_rec r;
	int rc;

	if (!mt || mt->deleted || p->partition < 0 || p->partition >= mt->partitions) {
		say(p, KERR_UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.");
		return 0;
	}
	mp = &mt->parts[p->partition];
	state_of(mp, &s);
	if (p->ntarget < 0) {
		if (!reassign_cancel(&s, &pl)) {
			say(p, KERR_NO_REASSIGNMENT_IN_PROGRESS, "No reassignment is in progress for topic %s partition %d",
			    o->name, p->partition);
			return 0;
		}
	} else {
		int32_t known[META_MAX_REPLICAS * 4], bad = -1;
		int nknown = 0;
		enum reassign_check c;

		for (int i = 0; i < metalog_broker_count(ctl->ml) && nknown < (int)(sizeof known / sizeof known[0]);
		     i++)
			known[nknown++] = metalog_broker_at(ctl->ml, i)->id;
		c = reassign_check_target(p->target, p->ntarget, known, nknown, &bad);
		if (c == REASSIGN_EMPTY) {
			say(p, KERR_INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty "
			    "replica list.");
			return 0;
		}
		if (c == REASSIGN_DUPLICATE) {
			say(p, KERR_INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes the broker %d "
			    "more than once.", bad);
			return 0;
		}
		if (c == REASSIGN_UNKNOWN_BROKER) {
			say(p, KERR_INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker %d, "
			    "but no such broker is registered.", bad);
			return 0;
		}
		if (c != REASSIGN_OK) {
			say(p, KERR_INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment names more than %d "
			    "replicas.", REASSIGN_MAX);
			return 0;
		}
		if (!reassign_start(&s, p->target, p->ntarget, &pl))
			return 0;        /* the replicas are the target already */
	}
	if ((rc = build(ctl, o->name, p->partition, &pl, &r)) < 0) {
		metalog_rec_free(&r);
		say(p, KERR_INVALID_REPLICA_ASSIGNMENT, "The reassignment cannot be recorded: %s.", strerror(-rc));
		return 0;
	}
	slog(SLOG_NOTICE, "partition %s-%d: reassignment %s (%d adding, %d removing)", o->name,
		p->partition, p->ntarget < 0 ? "cancelled" : "started", pl.nadding, pl.nremoving);
	ctl_meta_propose(ctl, &r, alter_applied, o);
	return 1;
}

static void alter_msg(struct ctl *ctl, struct coord_reassign *req, struct kafka_ctx *ctx, int from)
{
	struct alter_req *ar = xcalloc(1, sizeof(*ar));

	ar->ctx = ctx;
	ar->from = from;
	ar->pending = 1;             /* until every part is looked at */
	for (int i = 0; i < req->n; i++) {
		struct coord_reassign_part *p = &req->parts[i];
		struct alter_one *o = xcalloc(1, sizeof(*o));

		p->err = 0;
		p->msg[0] = '\0';
		o->ar = ar;
		o->part = p;
		if (p->topic_len > 0 && p->topic_len <= META_TOPIC_NAME_MAX)
			memcpy(o->name, p->topic, (size_t)p->topic_len);
		if (alter_one_propose(ctl, o) == 1) {
			ar->pending++;
			continue;
		}
		free(o);
	}
	alter_finish(ctl, ar);
}

/* ---- ListPartitionReassignments ------------------------------------------ */

static void found_add(struct coord_reassign *req, int *cap, const struct meta_topic *mt, int32_t j)
{
	const struct meta_part *p = &mt->parts[j];
	struct coord_reassign_found *f;

	if (req->nfound == *cap) {
		*cap = *cap ? *cap * 2 : 8;
		req->found = realloc(req->found, (size_t)*cap * sizeof(*req->found));
		if (!req->found)
			abort();   /* the control thread's own bookkeeping */
	}
	f = &req->found[req->nfound++];
	memset(f, 0, sizeof(*f));
	snprintf(f->topic, sizeof(f->topic), "%s", mt->name);
	f->partition = j;
	f->nreplicas = p->nreplicas < COORD_REASSIGN_MAX ? p->nreplicas : COORD_REASSIGN_MAX;
	f->nadding = p->nadding < COORD_REASSIGN_MAX ? p->nadding : COORD_REASSIGN_MAX;
	f->nremoving = p->nremoving < COORD_REASSIGN_MAX ? p->nremoving : COORD_REASSIGN_MAX;
	memcpy(f->replicas, p->replicas, (size_t)f->nreplicas * sizeof(*f->replicas));
	memcpy(f->adding, p->moving, (size_t)f->nadding * sizeof(*f->adding));
	memcpy(f->removing, p->moving + p->nadding, (size_t)f->nremoving * sizeof(*f->removing));
}

static void list_msg(struct ctl *ctl, struct coord_reassign *req)
{
	int cap = 0;

	req->found = NULL;
	req->nfound = 0;
	if (req->all) {
		for (int i = 0; i < metalog_topic_count(ctl->ml); i++) {
			const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);

			for (int32_t j = 0; j < mt->partitions; j++)
				if (!mt->parts[j].legacy && meta_part_reassigning(&mt->parts[j]))
					found_add(req, &cap, mt, j);
		}
		return;
	}
	for (int i = 0; i < req->n; i++) {
		const struct coord_reassign_part *p = &req->parts[i];
		char name[META_TOPIC_NAME_MAX + 1] = { 0 };
		const struct meta_topic *mt;

		if (p->topic_len <= 0 || p->topic_len > META_TOPIC_NAME_MAX)
			continue;
		memcpy(name, p->topic, (size_t)p->topic_len);
		/* as Kafka: a topic or partition that does not exist is left out */
		mt = metalog_topic(ctl->ml, name);
		if (mt && p->partition >= 0 && p->partition < mt->partitions && !mt->parts[p->partition].legacy &&
		    meta_part_reassigning(&mt->parts[p->partition]))
			found_add(req, &cap, mt, p->partition);
	}
}

static void reassign_msg(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	struct coord_reassign *req = m->p[1];

	if (req->list) {
		list_msg(ctl, req);
		ctl_reply(ctl, m->p[0], (int)m->v[0]);
		return;
	}
	alter_msg(ctl, req, m->p[0], (int)m->v[0]);
}

void ctl_reassign_submit(struct kafka_ctx *ctx, struct coord_reassign *req)
{
	struct shard_msg m = { .fn = reassign_msg, .p = { ctx, req }, .v = { kafka_ctx_shard_id(ctx) } };

	kafka_ctx_send_ctl(ctx, &m);
}
