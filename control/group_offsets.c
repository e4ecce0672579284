/* control/group_offsets.c — committed offsets (see group.h): OffsetCommit,
 * TxnOffsetCommit, OffsetFetch, OffsetDelete and DeleteGroups, the
 * __consumer_offsets records they append on the owner shards, and offsets
 * expiry. @thread ctl unless tagged. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_homes.h"
#include "control/ctl.h"
#include "control/cutil.h"
#include "control/group_table.h"
#include "dataplane/part_proxy.h"
#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/controls.h"
#include "storage/slog.h"

/* ---- offsets: persistence ---------------------------------------------------- */

const struct md_topic *group_offsets_topic(const struct group_coord *gc)
{
	const struct md_snapshot *md = gc->b->md;

	return md ? md_find(md, GROUP_OFFSETS_TOPIC, (int32_t)strlen(GROUP_OFFSETS_TOPIC)) : NULL;
}

/* Java's String.hashCode over the group id, as Kafka picks the partition. */
static int32_t offsets_partition(const struct group_coord *gc, const char *group)
{
	const struct md_topic *t = group_offsets_topic(gc);

	return java_key_partition(group, t ? t->nparts : 1);
}

int16_t group_key_err(const struct group_coord *gc, struct kafka_str id)
{
	char gid[512];

	if (id.len <= 0 || id.len >= (int32_t)sizeof(gid))
		return 0;
	memcpy(gid, id.ptr, (size_t)id.len);
	gid[id.len] = 0;
	return coord_load_err(&gc->load, offsets_partition(gc, gid));
}


static void offsets_appended(void *self, void *cookie, int64_t base, int err);

/* A transaction's offset, durable in the log, waiting for the marker. */
void group_txn_pending_set(struct group *g, int64_t pid, struct gentry *e)
{
	struct gtxn *x;

	for (x = g->txn; x; x = x->next)
		if (x->pid == pid && x->part == e->part && !strcmp(x->topic, e->topic))
			break;
	if (x) {
		free(x->topic);
		free(x->meta);
	} else {
		x = xcalloc(1, sizeof(*x));
		x->next = g->txn;
		g->txn = x;
	}
	x->pid = pid;
	x->topic = e->topic;
	x->part = e->part;
	x->offset = e->offset;
	x->epoch = e->epoch;
	x->meta = e->meta;
	x->ts = e->ts;
}

static void call_write_done(struct group_coord *gc, struct kafka_ctx *ctx);

/* On the control thread: an offsets batch is durable (or failed). */
static void offsets_appended(void *self, void *cookie, int64_t base, int err)
{
	struct gwrite *gw = cookie;
	struct group_coord *gc = gw->gc;
	struct group *g = gw->g;

	(void)self;
	(void)base;
	for (int i = 0; i < gw->n; i++) {
		struct gentry *e = &gw->e[i];

		if (err) {
			if (e->err)
				*e->err = KERR_COORDINATOR_NOT_AVAILABLE;
		} else if (!g->dead && gw->txn_pid >= 0) {
			group_txn_pending_set(g, gw->txn_pid, e);   /* takes topic and meta */
			e->topic = e->meta = NULL;
		} else if (!g->dead) {
			if (e->del)
				group_offset_del(g, e->topic, e->part);
			else
				group_offset_set(g, e->topic, e->part, e->offset, e->epoch, e->meta, e->ts);
		}
		if (!err && !e->del)
			gc->st.commits++;
		if (!err && e->del && !e->err)
			gc->st.offsets_expired++;
		free(e->topic);
		free(e->meta);
	}
	if (err)
		slog(SLOG_WARN, "group %s: writing %d offset record(s) to %s failed: %s", g->id, gw->n,
			GROUP_OFFSETS_TOPIC, strerror(-err));
	free(gw->e);
	free(gw->batch);
	g->writes--;
	if (!err && gw->remove_group && !g->dead)
		group_remove(gc, g);
	else if (g->dead && !g->writes)
		group_free(g);
	else if (!err && !gw->ctx && g->state == G_EMPTY && !g->members && !g->offsets.n && !g->writes)
		group_remove(gc, g);   /* expiry took the last offset of an empty group */
	if (gw->ctx)
		call_write_done(gc, gw->ctx);
	free(gw);
}

/* Write entries e[0..n) of group g as one batch; the call (if any) is
 * answered when every write it started is durable. Takes e. */
static int offsets_write(struct group_coord *gc, struct group *g, struct kafka_ctx *ctx, struct gentry *e, int n,
			 int remove_group, int64_t txn_pid, int16_t txn_epoch)
{
	const struct md_topic *t = group_offsets_topic(gc);
	int32_t idx = offsets_partition(gc, g->id);
	const struct md_partition *mp;
	struct batch_builder bb;
	struct gwrite *gw;
	size_t cap = 128;
	int64_t now = ctl_wall_ms(gc->ctl);
	ssize_t len;
	uint8_t *kv;

	if (!t || ctl_part_open_on(gc->ctl, t->id, idx) < 0) {
		for (int i = 0; i < n; i++) {
			if (e[i].err)
				*e[i].err = KERR_COORDINATOR_NOT_AVAILABLE;
			free(e[i].topic);
			free(e[i].meta);
		}
		free(e);
		return -ENOENT;
	}
	mp = &t->parts[idx];
	for (int i = 0; i < n; i++)
		cap += 64 + 2 * (strlen(g->id) + strlen(e[i].topic) + (e[i].meta ? strlen(e[i].meta) : 0)) + 64;
	gw = xcalloc(1, sizeof(*gw));
	gw->gc = gc;
	gw->g = g;
	gw->ctx = ctx;
	gw->e = e;
	gw->n = n;
	gw->remove_group = remove_group;
	gw->txn_pid = txn_pid;
	gw->batch = xcalloc(1, cap);
	kv = xcalloc(1, cap);
	batch_builder_init(&bb, gw->batch, cap, now);
	for (int i = 0; i < n; i++) {
		size_t kl = 0, vl = 0;
		uint8_t *k = kv, *v;

		kl += put16(k + kl, 1);
		kl += putstr(k + kl, g->id);
		kl += putstr(k + kl, e[i].topic);
		kl += put32(k + kl, e[i].part);
		v = k + kl;
		if (!e[i].del) {
			vl += put16(v + vl, 3);
			vl += put64(v + vl, e[i].offset);
			vl += put32(v + vl, e[i].epoch);
			vl += putstr(v + vl, e[i].meta ? e[i].meta : "");
			vl += put64(v + vl, e[i].ts);
		}
		if (batch_builder_add(&bb, i, now, k, (int32_t)kl, e[i].del ? NULL : v, e[i].del ? -1 : (int32_t)vl,
				      NULL, 0, 0) < 0)
			abort();   /* cap is an upper bound */
	}
	free(kv);
	/* a transaction's offsets: its producer's transactional batch, decided
	 * by the marker the transaction coordinator writes after it */
	len = txn_pid >= 0 ? batch_builder_finish(&bb, BATCH_ATTR_TRANSACTIONAL, -1, txn_pid, txn_epoch, -1)
			   : batch_builder_finish(&bb, 0, -1, -1, -1, -1);
	if (len < 0)
		abort();
	if (ctx)
		group_call_of(ctx)->writes++;
	g->writes++;
	{
		struct part_proxy px;

		gw->req = (struct part_append_req){ .batch = gw->batch, .len = (uint32_t)len,
						    .done = offsets_appended, .cookie = gw,
						    .min_insync = t->min_insync };
		part_proxy_append(ctl_part_proxy(gc->ctl, &px), ctl_part_open_on(gc->ctl, t->id, mp->index),
				  part_addr_of(t->id, mp->index), &gw->req);
	}
	return 0;
}

/* ---- offsets: the calls ------------------------------------------------------ */

static const struct md_topic *topic_of(struct group_coord *gc, struct kafka_str name)
{
	const struct md_snapshot *md = gc->b->md;

	return md && name.len > 0 ? md_find(md, name.ptr, name.len) : NULL;
}

static void call_write_done(struct group_coord *gc, struct kafka_ctx *ctx)
{
	if (--group_call_of(ctx)->writes == 0)
		group_reply(gc, ctx);
}

void group_handle_commit(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_offset_commit_request *q = ctx->req.body;
	int16_t ver = ctx->req.header.RequestApiVersion;
	struct group_call *call = group_call_of(ctx);
	struct kafka_offset_commit_response *r = GALLOC(call, struct kafka_offset_commit_response, 1);
	struct group *g = group_findk(gc, q->GroupId);
	struct gmember *m = NULL;
	int16_t gerr = 0;
	int total = 0, n = 0;
	struct gentry *e;
	int64_t now = ctl_wall_ms(gc->ctl);

	kafka_offset_commit_response_init(r);
	ctx->resp = r;
	r->Topics.count = q->Topics.count > 0 ? q->Topics.count : 0;
	r->Topics.items = GALLOC(call, struct kafka_offset_commit_response_offset_commit_response_topic, r->Topics.count);
	for (int32_t i = 0; i < r->Topics.count; i++)
		total += q->Topics.items[i].Partitions.count > 0 ? q->Topics.items[i].Partitions.count : 0;

	/* the group-level checks, in Kafka's order (validateOffsetCommit:
	 * the member, then its generation, then the group's state) */
	if (kempty(q->GroupId) || q->GroupId.len >= 512) {
		gerr = KERR_INVALID_GROUP_ID;
	} else if ((gerr = group_key_err(gc, q->GroupId))) {
		g = NULL;   /* not coordinated here (or still loading) */
	} else if (!g) {
		if (q->GenerationIdOrMemberEpoch < 0) {
			char gid[512];

			memcpy(gid, q->GroupId.ptr, (size_t)q->GroupId.len);
			gid[q->GroupId.len] = 0;
			g = group_new(gc, gid);   /* offsets only: no member ever joins it */
		} else {
			gerr = KERR_ILLEGAL_GENERATION;
			gc->st.commit_refused_generation++;
		}
	}
	if (!gerr && g) {
		struct gmember *si = ver >= 7 ? group_member_by_instance(g, q->GroupInstanceId) : NULL;

		int as_member = q->GenerationIdOrMemberEpoch >= 0 || !kempty(q->MemberId) ||
				(ver >= 7 && q->GroupInstanceId.len >= 0);

		m = group_member_find(g, q->MemberId);
		if (!as_member) {
			/* a simple commit: only to a group without members */
			m = NULL;
			if (g->members || g->state != G_EMPTY) {
				gerr = KERR_UNKNOWN_MEMBER_ID;
				gc->st.commit_refused_member++;
			}
		} else if (si && !keq(q->MemberId, si->id)) {
			gerr = KERR_FENCED_INSTANCE_ID;
			gc->st.commit_refused_fenced++;
		} else if (!m && !SLUICE_CONTROL_OFF(no_generation_check)) {
			gerr = KERR_UNKNOWN_MEMBER_ID;
			gc->st.commit_refused_member++;
		} else if (m && q->GenerationIdOrMemberEpoch != g->generation && !SLUICE_CONTROL_OFF(no_generation_check)) {
			gerr = KERR_ILLEGAL_GENERATION;
			gc->st.commit_refused_generation++;
		} else if (g->state == G_COMPLETING) {
			/* its generation is current but the leader's assignment
			 * has not come: which partitions it owns is not known */
			gerr = KERR_REBALANCE_IN_PROGRESS;
			gc->st.commit_refused_rebalance++;
		}
		if (m && !gerr)
			m->deadline = ctl_now_ms(gc->ctl) + m->session_ms;
	}
	if (gerr && gerr != KERR_INVALID_GROUP_ID)
		gc->st.commit_refused += (uint64_t)total;
	e = xcalloc((size_t)total, sizeof(*e));
	for (int32_t i = 0; i < r->Topics.count; i++) {
		const struct kafka_offset_commit_request_offset_commit_request_topic *qt = &q->Topics.items[i];
		struct kafka_offset_commit_response_offset_commit_response_topic *rt = &r->Topics.items[i];
		const struct md_topic *t = topic_of(gc, qt->Name);

		rt->Name = group_kcopy(call, qt->Name.len >= 0 ? qt->Name : (struct kafka_str){ "", 0 });
		rt->Partitions.count = qt->Partitions.count > 0 ? qt->Partitions.count : 0;
		rt->Partitions.items = GALLOC(call, struct kafka_offset_commit_response_offset_commit_response_partition,
					      rt->Partitions.count);
		for (int32_t j = 0; j < rt->Partitions.count; j++) {
			const struct kafka_offset_commit_request_offset_commit_request_partition *qp =
				&qt->Partitions.items[j];
			struct kafka_offset_commit_response_offset_commit_response_partition *rp = &rt->Partitions.items[j];
			char *topic;

			rp->PartitionIndex = qp->PartitionIndex;
			if (gerr) {
				rp->ErrorCode = gerr;
				continue;
			}
			if (!t || qp->PartitionIndex < 0 || qp->PartitionIndex >= t->nparts) {
				rp->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
				continue;
			}
			if (qp->CommittedMetadata.len > gc->max_meta) {
				rp->ErrorCode = KERR_OFFSET_METADATA_TOO_LARGE;
				continue;
			}
			topic = kdup(qt->Name);
			if (m && g->owners.n && !SLUICE_CONTROL_OFF(no_generation_check)) {
				struct gmember *owner = group_owner_of(g, topic, qp->PartitionIndex);

				if (owner && owner != m) {
					/* Sluice: the partition belongs to another member of
					 * this generation: a late commit of a stale owner
					 * must not move the new owner's position */
					rp->ErrorCode = KERR_ILLEGAL_GENERATION;
					gc->st.commit_refused_owner++;
					gc->st.commit_refused++;
					free(topic);
					continue;
				}
			}
			e[n].topic = topic;
			e[n].part = qp->PartitionIndex;
			e[n].offset = qp->CommittedOffset;
			e[n].epoch = ver >= 6 ? qp->CommittedLeaderEpoch : -1;
			e[n].meta = kdup(qp->CommittedMetadata);
			/* v1 carries the commit's time (Kafka takes it when set,
			 * and offsets expire from it); v0 and v2+ commit now */
			e[n].ts = ver == 1 && qp->CommitTimestamp >= 0 ? qp->CommitTimestamp : now;
			e[n].err = &rp->ErrorCode;
			n++;
		}
	}
	if (n == 0 || offsets_write(gc, g, ctx, e, n, 0, -1, -1) < 0) {
		if (n == 0)
			free(e);
		group_reply(gc, ctx);
	}
}

/* TxnOffsetCommit: offsets inside a producer's transaction. Written now
 * (a transactional batch of the producer in __consumer_offsets), visible
 * to OffsetFetch once the transaction commits (group_txn_end). */
static void txn_commit_checked(struct group_coord *gc, void *cookie, int16_t err);

void group_handle_txn_commit(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_txn_offset_commit_request *q = ctx->req.body;
	int16_t gerr = 0;
	char gid[512];

	if (kempty(q->GroupId) || q->GroupId.len >= (int32_t)sizeof(gid)) {
		gerr = KERR_INVALID_GROUP_ID;
	} else if (!(gerr = group_key_err(gc, q->GroupId))) {
		if (!gc->txn_check) {
			gerr = KERR_COORDINATOR_NOT_AVAILABLE;
		} else {
			/* the transaction coordinator answers, perhaps from another
			 * node (txn_commit_checked goes on) */
			memcpy(gid, q->GroupId.ptr, (size_t)q->GroupId.len);
			gid[q->GroupId.len] = 0;
			gc->txn_check(gc->txn_check_arg, q->TransactionalId, q->ProducerId, q->ProducerEpoch,
				      offsets_partition(gc, gid), ctx->recv_ns, txn_commit_checked, ctx);
			return;
		}
	}
	txn_commit_checked(gc, ctx, gerr);
}

/* TxnOffsetCommit once its transaction is checked (gerr: the group's or
 * the transaction's refusal, 0: go on). */
static void txn_commit_checked(struct group_coord *gc, void *cookie, int16_t gerr)
{
	struct kafka_ctx *ctx = cookie;
	const struct kafka_txn_offset_commit_request *q = ctx->req.body;
	int16_t ver = ctx->req.header.RequestApiVersion;
	struct group_call *call = group_call_of(ctx);
	struct kafka_txn_offset_commit_response *r = GALLOC(call, struct kafka_txn_offset_commit_response, 1);
	struct group *g = NULL;
	int total = 0, n = 0;
	struct gentry *e;
	int64_t now = ctl_wall_ms(gc->ctl);
	char gid[512];

	kafka_txn_offset_commit_response_init(r);
	ctx->resp = r;
	r->Topics.count = q->Topics.count > 0 ? q->Topics.count : 0;
	r->Topics.items = GALLOC(call, struct kafka_txn_offset_commit_response_txn_offset_commit_response_topic,
				 r->Topics.count);
	for (int32_t i = 0; i < r->Topics.count; i++)
		total += q->Topics.items[i].Partitions.count > 0 ? q->Topics.items[i].Partitions.count : 0;
	if (!gerr)
		gerr = group_key_err(gc, q->GroupId);   /* (the check may have taken a while) */
	if (!gerr) {
		memcpy(gid, q->GroupId.ptr, (size_t)q->GroupId.len);
		gid[q->GroupId.len] = 0;
	}
	if (!gerr && ver >= 3 && (g = group_find(gc, gid))) {
		/* KIP-447: the consumer's group metadata travels with the
		 * offsets; a zombie consumer of an older generation is refused
		 * as its plain commit would be */
		struct gmember *si = q->GroupInstanceId.len >= 0 ? group_member_by_instance(g, q->GroupInstanceId) : NULL;

		if (si && !keq(q->MemberId, si->id))
			gerr = KERR_FENCED_INSTANCE_ID;
		else if (!kempty(q->MemberId) && !group_member_find(g, q->MemberId))
			gerr = KERR_UNKNOWN_MEMBER_ID;
		else if (q->GenerationId >= 0 && q->GenerationId != g->generation)
			gerr = KERR_ILLEGAL_GENERATION;
		if (gerr)
			gc->st.commit_refused += (uint64_t)total;
	} else if (!gerr && ver >= 3 && (!kempty(q->MemberId) || q->GenerationId >= 0)) {
		gerr = KERR_ILLEGAL_GENERATION;   /* a member of a group that does not exist */
	}
	if (!gerr && !(g = group_find(gc, gid)))
		g = group_new(gc, gid);
	e = xcalloc((size_t)total, sizeof(*e));
	for (int32_t i = 0; i < r->Topics.count; i++) {
		const struct kafka_txn_offset_commit_request_txn_offset_commit_request_topic *qt = &q->Topics.items[i];
		struct kafka_txn_offset_commit_response_txn_offset_commit_response_topic *rt = &r->Topics.items[i];
		const struct md_topic *t = topic_of(gc, qt->Name);

		rt->Name = group_kcopy(call, qt->Name.len >= 0 ? qt->Name : (struct kafka_str){ "", 0 });
		rt->Partitions.count = qt->Partitions.count > 0 ? qt->Partitions.count : 0;
		rt->Partitions.items = GALLOC(call, struct kafka_txn_offset_commit_response_txn_offset_commit_response_partition,
					      rt->Partitions.count);
		for (int32_t j = 0; j < rt->Partitions.count; j++) {
			const struct kafka_txn_offset_commit_request_txn_offset_commit_request_partition *qp =
				&qt->Partitions.items[j];
			struct kafka_txn_offset_commit_response_txn_offset_commit_response_partition *rp =
				&rt->Partitions.items[j];

			rp->PartitionIndex = qp->PartitionIndex;
			if (gerr) {
				rp->ErrorCode = gerr;
				continue;
			}
			if (!t || qp->PartitionIndex < 0 || qp->PartitionIndex >= t->nparts) {
				rp->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
				continue;
			}
			if (qp->CommittedMetadata.len > gc->max_meta) {
				rp->ErrorCode = KERR_OFFSET_METADATA_TOO_LARGE;
				continue;
			}
			e[n].topic = kdup(qt->Name);
			e[n].part = qp->PartitionIndex;
			e[n].offset = qp->CommittedOffset;
			e[n].epoch = ver >= 2 ? qp->CommittedLeaderEpoch : -1;
			e[n].meta = kdup(qp->CommittedMetadata);
			e[n].ts = now;
			e[n].err = &rp->ErrorCode;
			n++;
		}
	}
	if (n == 0 || offsets_write(gc, g, ctx, e, n, 0, q->ProducerId, q->ProducerEpoch) < 0) {
		if (n == 0)
			free(e);
		group_reply(gc, ctx);
	}
}

void group_set_txn_check(struct group_coord *gc, group_txn_check_fn *fn, void *arg)
{
	gc->txn_check = fn;
	gc->txn_check_arg = arg;
}

int32_t group_offsets_partition(const struct group_coord *gc, const char *group)
{
	return offsets_partition(gc, group);
}

void group_txn_end(struct group_coord *gc, int32_t opart, int64_t pid, int commit)
{
	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];
		struct gtxn **pp;

		if (!g || !g->txn || offsets_partition(gc, g->id) != opart)
			continue;
		pp = &g->txn;
		while (*pp) {
			struct gtxn *x = *pp;

			if (x->pid != pid) {
				pp = &x->next;
				continue;
			}
			*pp = x->next;
			if (commit) {
				group_offset_set(g, x->topic, x->part, x->offset, x->epoch, x->meta, x->ts);
				gc->st.commits++;
			}
			free(x->topic);
			free(x->meta);
			free(x);
		}
	}
}

static void fetch_partition(struct group_call *call, struct group *g, const char *topic, int32_t part,
			    struct kafka_offset_fetch_response_offset_fetch_response_partition *rp)
{
	const struct goffset *o = g && topic ? group_offset_find(g, topic, part) : NULL;

	rp->PartitionIndex = part;
	rp->CommittedOffset = o ? o->offset : -1;
	rp->CommittedLeaderEpoch = o ? o->epoch : -1;
	rp->Metadata = group_str(call, o && o->meta ? o->meta : "");
	rp->ErrorCode = 0;
}

void group_handle_fetch(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_offset_fetch_request *q = ctx->req.body;
	struct group_call *call = group_call_of(ctx);
	struct kafka_offset_fetch_response *r = GALLOC(call, struct kafka_offset_fetch_response, 1);
	int16_t kerr = group_key_err(gc, q->GroupId);
	struct group *g = kerr ? NULL : group_findk(gc, q->GroupId);

	kafka_offset_fetch_response_init(r);
	ctx->resp = r;
	if (kerr) {
		/* not coordinated here, or loading: the top-level error (v2+)
		 * and every partition's (v0-1 have only those) */
		r->ErrorCode = kerr;
		r->Topics.count = q->Topics.count > 0 ? q->Topics.count : 0;
		r->Topics.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_topic,
					 r->Topics.count);
		for (int32_t i = 0; i < r->Topics.count; i++) {
			const struct kafka_offset_fetch_request_offset_fetch_request_topic *qt = &q->Topics.items[i];
			struct kafka_offset_fetch_response_offset_fetch_response_topic *rt = &r->Topics.items[i];
			int32_t np = qt->PartitionIndexes.count > 0 ? qt->PartitionIndexes.count : 0;

			rt->Name = group_kcopy(call, qt->Name.len >= 0 ? qt->Name : (struct kafka_str){ "", 0 });
			rt->Partitions.count = np;
			rt->Partitions.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_partition,
						      np);
			for (int32_t j = 0; j < np; j++) {
				fetch_partition(call, NULL, NULL, qt->PartitionIndexes.items[j], &rt->Partitions.items[j]);
				rt->Partitions.items[j].ErrorCode = kerr;
			}
		}
		group_reply(gc, ctx);
		return;
	}
	if (kempty(q->GroupId)) {
		r->ErrorCode = KERR_INVALID_GROUP_ID;
		r->Topics.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_topic, 0);
		group_reply(gc, ctx);
		return;
	}
	if (q->Topics.count < 0) {
		/* every offset of the group, by topic */
		int n = g ? (int)g->offsets.n : 0, k = 0, nt = 0;
		struct goffset **all = xcalloc((size_t)n, sizeof(*all));

		for (uint32_t i = 0; g && i < g->offsets.cap; i++)
			if (g->offsets.v[i])
				all[k++] = g->offsets.v[i];
		qsort(all, (size_t)n, sizeof(*all), group_offset_cmp);
		for (int i = 0; i < n; i++)
			nt += i == 0 || strcmp(all[i]->topic, all[i - 1]->topic);
		r->Topics.count = nt;
		r->Topics.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_topic, nt);
		for (int i = 0, t = -1; i < n; i++) {
			struct kafka_offset_fetch_response_offset_fetch_response_topic *rt;
			int j = i;

			if (i && !strcmp(all[i]->topic, all[i - 1]->topic))
				continue;
			rt = &r->Topics.items[++t];
			while (j < n && !strcmp(all[j]->topic, all[i]->topic))
				j++;
			rt->Name = group_str(call, all[i]->topic);
			rt->Partitions.count = j - i;
			rt->Partitions.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_partition,
						      j - i);
			for (int x = i; x < j; x++)
				fetch_partition(call, g, all[x]->topic, all[x]->part, &rt->Partitions.items[x - i]);
		}
		free(all);
		group_reply(gc, ctx);
		return;
	}
	r->Topics.count = q->Topics.count;
	r->Topics.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_topic, q->Topics.count);
	for (int32_t i = 0; i < q->Topics.count; i++) {
		const struct kafka_offset_fetch_request_offset_fetch_request_topic *qt = &q->Topics.items[i];
		struct kafka_offset_fetch_response_offset_fetch_response_topic *rt = &r->Topics.items[i];
		char *topic = kdup(qt->Name);
		int32_t np = qt->PartitionIndexes.count > 0 ? qt->PartitionIndexes.count : 0;

		rt->Name = group_str(call, topic ? topic : "");
		rt->Partitions.count = np;
		rt->Partitions.items = GALLOC(call, struct kafka_offset_fetch_response_offset_fetch_response_partition, np);
		for (int32_t j = 0; j < np; j++)
			fetch_partition(call, g, topic, qt->PartitionIndexes.items[j], &rt->Partitions.items[j]);
		free(topic);
	}
	group_reply(gc, ctx);
}

/* ListGroups v4's StatesFilter (KIP-518): empty or null lists every
 * group; names compare without case, as Kafka's do. */
static struct gentry *all_tombstones(struct group *g, int *n)
{
	struct gentry *e = xcalloc(g->offsets.n, sizeof(*e));
	int k = 0;

	for (uint32_t i = 0; i < g->offsets.cap; i++) {
		struct goffset *o = g->offsets.v[i];

		if (!o)
			continue;
		e[k].topic = sdup(o->topic);
		e[k].part = o->part;
		e[k].del = 1;
		k++;
	}
	*n = k;
	return e;
}

void group_handle_delete_groups(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_delete_groups_request *q = ctx->req.body;
	struct group_call *call = group_call_of(ctx);
	struct kafka_delete_groups_response *r = GALLOC(call, struct kafka_delete_groups_response, 1);
	int32_t n = q->GroupsNames.count > 0 ? q->GroupsNames.count : 0;

	kafka_delete_groups_response_init(r);
	ctx->resp = r;
	r->Results.count = n;
	r->Results.items = GALLOC(call, struct kafka_delete_groups_response_deletable_group_result, n);
	call->writes++;   /* held until every group is handled */
	for (int32_t i = 0; i < n; i++) {
		struct kafka_delete_groups_response_deletable_group_result *rr = &r->Results.items[i];
		struct group *g = group_findk(gc, q->GroupsNames.items[i]);
		char *gid = kdup(q->GroupsNames.items[i]);
		struct gentry *e;
		int ne;

		rr->GroupId = group_str(call, gid ? gid : "");
		free(gid);
		if (kempty(q->GroupsNames.items[i])) {
			rr->ErrorCode = KERR_INVALID_GROUP_ID;
			continue;
		}
		if ((rr->ErrorCode = group_key_err(gc, q->GroupsNames.items[i])))
			continue;   /* not coordinated here */
		if (!g || g->dead) {
			rr->ErrorCode = KERR_GROUP_ID_NOT_FOUND;
			continue;
		}
		if (g->members || g->state != G_EMPTY) {
			rr->ErrorCode = KERR_NON_EMPTY_GROUP;
			continue;
		}
		e = all_tombstones(g, &ne);
		if (ne == 0) {
			free(e);
			group_remove(gc, g);
			continue;
		}
		for (int j = 0; j < ne; j++)
			e[j].err = &rr->ErrorCode;
		offsets_write(gc, g, ctx, e, ne, 1, -1, -1);
	}
	call_write_done(gc, ctx);
}

/* The topics the members subscribe to (consumer protocol metadata). */
static int subscribed(const struct group *g, const char *topic)
{
	for (const struct gmember *m = g->members; m; m = m->next) {
		int pi = g->protocol ? group_member_supports(m, g->protocol) : (m->nprot ? 0 : -1);
		struct kafka_consumer_protocol_subscription s;
		struct kafka_cursor c;
		struct kafka_arena ar;
		void *mem;
		int16_t ver;
		int hit = 0;

		if (pi < 0 || m->pmeta_len[pi] < 2)
			continue;
		mem = malloc(kafka_arena_bound((size_t)m->pmeta_len[pi]));
		if (!mem)
			return 1;
		kafka_arena_init(&ar, mem, kafka_arena_bound((size_t)m->pmeta_len[pi]));
		kafka_cursor_init(&c, m->pmeta[pi], (size_t)m->pmeta_len[pi]);
		ver = kafka_cursor_int16(&c);
		kafka_consumer_protocol_subscription_init(&s);
		if (ver >= 0 && kafka_consumer_protocol_subscription_decode(&c, &ar, ver > 3 ? 3 : ver, &s) == 0)
			for (int32_t i = 0; i < s.Topics.count && !hit; i++)
				hit = keq(s.Topics.items[i], topic);
		free(mem);
		if (hit)
			return 1;
	}
	return 0;
}

void group_handle_offset_delete(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_offset_delete_request *q = ctx->req.body;
	struct group_call *call = group_call_of(ctx);
	struct kafka_offset_delete_response *r = GALLOC(call, struct kafka_offset_delete_response, 1);
	struct group *g = group_findk(gc, q->GroupId);
	int32_t nt = q->Topics.count > 0 ? q->Topics.count : 0;
	int total = 0, n = 0;
	struct gentry *e;

	kafka_offset_delete_response_init(r);
	ctx->resp = r;
	r->Topics.items = GALLOC(call, struct kafka_offset_delete_response_offset_delete_response_topic, 0);
	if (kempty(q->GroupId)) {
		r->ErrorCode = KERR_INVALID_GROUP_ID;
		group_reply(gc, ctx);
		return;
	}
	if ((r->ErrorCode = group_key_err(gc, q->GroupId))) {
		group_reply(gc, ctx);
		return;
	}
	if (!g) {
		r->ErrorCode = KERR_GROUP_ID_NOT_FOUND;
		group_reply(gc, ctx);
		return;
	}
	if (g->members && (!g->ptype || strcmp(g->ptype, "consumer"))) {
		r->ErrorCode = KERR_NON_EMPTY_GROUP;
		group_reply(gc, ctx);
		return;
	}
	r->Topics.count = nt;
	r->Topics.items = GALLOC(call, struct kafka_offset_delete_response_offset_delete_response_topic, nt);
	for (int32_t i = 0; i < nt; i++)
		total += q->Topics.items[i].Partitions.count > 0 ? q->Topics.items[i].Partitions.count : 0;
	e = xcalloc((size_t)total, sizeof(*e));
	for (int32_t i = 0; i < nt; i++) {
		const struct kafka_offset_delete_request_offset_delete_request_topic *qt = &q->Topics.items[i];
		struct kafka_offset_delete_response_offset_delete_response_topic *rt = &r->Topics.items[i];
		const struct md_topic *t = topic_of(gc, qt->Name);
		char *topic = kdup(qt->Name);
		int sub = topic && g->members ? subscribed(g, topic) : 0;

		rt->Name = group_str(call, topic ? topic : "");
		rt->Partitions.count = qt->Partitions.count > 0 ? qt->Partitions.count : 0;
		rt->Partitions.items = GALLOC(call, struct kafka_offset_delete_response_offset_delete_response_partition,
					      rt->Partitions.count);
		for (int32_t j = 0; j < rt->Partitions.count; j++) {
			int32_t p = qt->Partitions.items[j].PartitionIndex;
			struct kafka_offset_delete_response_offset_delete_response_partition *rp = &rt->Partitions.items[j];

			rp->PartitionIndex = p;
			if (!t || p < 0 || p >= t->nparts) {
				rp->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
			} else if (sub) {
				rp->ErrorCode = KERR_GROUP_SUBSCRIBED_TO_TOPIC;
			} else if (group_offset_find(g, topic, p)) {
				e[n].topic = sdup(topic);
				e[n].part = p;
				e[n].del = 1;
				e[n].err = &rp->ErrorCode;
				n++;
			}
		}
		free(topic);
	}
	if (n == 0 || offsets_write(gc, g, ctx, e, n, 0, -1, -1) < 0) {
		if (n == 0)
			free(e);
		group_reply(gc, ctx);
	}
}

/* ---- timers ------------------------------------------------------------------ */

void group_offsets_expire(struct group_coord *gc)
{
	int64_t now = ctl_wall_ms(gc->ctl);

	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];
		struct gentry *e;
		int n = 0;

		if (!g || g->members || g->state != G_EMPTY || g->writes ||
		    coord_load_err(&gc->load, offsets_partition(gc, g->id)))
			continue;   /* (a partition still loading: not all read yet) */
		e = xcalloc(g->offsets.n, sizeof(*e));
		for (uint32_t j = 0; j < g->offsets.cap; j++) {
			struct goffset *o = g->offsets.v[j];
			int64_t since;

			if (!o)
				continue;
			/* a group that used membership: from when it became
			 * empty or the commit, whichever is later */
			since = g->ptype && g->empty_since > o->commit_ts ? g->empty_since : o->commit_ts;
			if (now - since < gc->retention_ms)
				continue;
			e[n].topic = sdup(o->topic);
			e[n].part = o->part;
			e[n].del = 1;
			n++;
		}
		if (n)
			offsets_write(gc, g, NULL, e, n, 0, -1, -1);
		else
			free(e);
	}
}

