/* control/group.c — the group coordinator (see group.h): membership (the
 * JoinGroup/SyncGroup/Heartbeat/LeaveGroup state machine and its
 * rebalances), ListGroups and DescribeGroups, the response memory, request
 * dispatch, timers and life. Committed offsets: group_offsets.c; start-up
 * replay: group_replay.c; lag scan and report: group_lag.c; shared state:
 * group_table.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "control/config.h"
#include "control/ctl.h"
#include "control/cutil.h"
#include "control/group.h"
#include "control/group_table.h"
#include "control/hmap.h"
#include "control/txn.h"
#include "dataplane/acl_ops.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_errors.h"
#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/slog.h"

/* ---- answers to the membership calls ------------------------------------- */

static void join_error(struct group_coord *gc, struct kafka_ctx *ctx, int16_t err, const char *member)
{
	struct group_call *call = group_call_of(ctx);
	struct kafka_join_group_response *r = GALLOC(call, struct kafka_join_group_response, 1);

	kafka_join_group_response_init(r);
	r->ErrorCode = err;
	r->GenerationId = -1;
	r->ProtocolName = group_str(call, "");
	r->Leader = group_str(call, "");
	r->MemberId = group_str(call, member ? member : "");
	r->Members.count = 0;
	r->Members.items = GALLOC(call, struct kafka_join_group_response_join_group_response_member, 0);
	ctx->resp = r;
	group_reply(gc, ctx);
}

/* Answer m's waiting JoinGroup with the current generation; the leader
 * gets every member's metadata for the chosen protocol. */
static void join_answer(struct group_coord *gc, struct group *g, struct gmember *m)
{
	struct kafka_ctx *ctx = m->join;
	struct group_call *call = group_call_of(ctx);
	struct kafka_join_group_response *r = GALLOC(call, struct kafka_join_group_response, 1);
	int leader = g->leader && !strcmp(g->leader, m->id);

	m->join = NULL;
	kafka_join_group_response_init(r);
	r->ErrorCode = 0;
	r->GenerationId = g->generation;
	r->ProtocolName = group_str(call, g->protocol ? g->protocol : "");
	r->Leader = group_str(call, g->leader ? g->leader : "");
	r->MemberId = group_str(call, m->id);
	r->Members.count = leader ? g->nmembers : 0;
	r->Members.items = GALLOC(call, struct kafka_join_group_response_join_group_response_member, r->Members.count);
	if (leader) {
		int i = 0;

		for (struct gmember *x = g->members; x; x = x->next, i++) {
			int pi = g->protocol ? group_member_supports(x, g->protocol) : -1;

			r->Members.items[i].MemberId = group_str(call, x->id);
			r->Members.items[i].GroupInstanceId = group_str(call, x->instance);
			r->Members.items[i].Metadata = pi >= 0 ? group_bytes_ref(call, x->pmeta[pi], x->pmeta_len[pi])
							       : (struct kafka_bytes){ NULL, 0 };
		}
	}
	ctx->resp = r;
	group_reply(gc, ctx);
}

static void sync_answer(struct group_coord *gc, struct kafka_ctx *ctx, int16_t err, const uint8_t *a, int32_t alen)
{
	struct group_call *call = group_call_of(ctx);
	struct kafka_sync_group_response *r = GALLOC(call, struct kafka_sync_group_response, 1);

	kafka_sync_group_response_init(r);
	r->ErrorCode = err;
	r->Assignment = err ? (struct kafka_bytes){ NULL, 0 } : group_bytes(call, a, a ? alen : 0);
	if (!r->Assignment.ptr)
		r->Assignment = (struct kafka_bytes){ (const uint8_t *)"", 0 };
	ctx->resp = r;
	group_reply(gc, ctx);
}

/* ---- the rebalance state machine ------------------------------------------ */

static void member_remove(struct group_coord *gc, struct group *g, struct gmember *m, int16_t err);

static void prepare_rebalance(struct group_coord *gc, struct group *g, enum group_rebalance_cause cause,
			      const char *who)
{
	int64_t now = ctl_now_ms(gc->ctl);
	int32_t rt = 0;

	if (g->state == G_COMPLETING) {
		/* the leader's assignment will not come for this generation */
		for (struct gmember *m = g->members; m; m = m->next)
			if (m->sync) {
				sync_answer(gc, m->sync, KERR_REBALANCE_IN_PROGRESS, NULL, 0);
				m->sync = NULL;
			}
	}
	if (g->state == G_PREPARING)
		return;
	for (struct gmember *m = g->members; m; m = m->next)
		rt = m->rebalance_ms > rt ? m->rebalance_ms : rt;
	g->rebalance_deadline = now + rt;
	g->delay_deadline = g->state == G_EMPTY ? now + gc->initial_delay : 0;
	if (g->delay_deadline > g->rebalance_deadline)
		g->delay_deadline = g->rebalance_deadline;
	g->state = G_PREPARING;
	gc->st.rebalance_causes[cause]++;
	group_event_add(gc, g, (int)cause, who);
}

static int all_joined(const struct group *g)
{
	if (g->pending)
		return 0;
	for (const struct gmember *m = g->members; m; m = m->next)
		if (!m->join)
			return 0;
	return 1;
}

static char *select_protocol(const struct group *g)
{
	const struct gmember *first = g->members;
	int best = -1, best_votes = -1;

	if (!first)
		return NULL;
	/* candidates: the first member's protocols every member supports;
	 * each member votes for the first candidate in its own order */
	for (int i = 0; i < first->nprot; i++) {
		const char *cand = first->pname[i];
		int ok = 1, votes = 0;

		for (const struct gmember *m = g->members; m && ok; m = m->next)
			ok = group_member_supports(m, cand) >= 0;
		if (!ok)
			continue;
		for (const struct gmember *m = g->members; m; m = m->next)
			for (int j = 0; j < m->nprot; j++) {
				int all = 1;

				for (const struct gmember *x = g->members; x && all; x = x->next)
					all = group_member_supports(x, m->pname[j]) >= 0;
				if (!all)
					continue;
				votes += !strcmp(m->pname[j], cand);
				break;
			}
		if (votes > best_votes) {
			best = i;
			best_votes = votes;
		}
	}
	return best >= 0 ? sdup(first->pname[best]) : NULL;
}

static void complete_join(struct group_coord *gc, struct group *g)
{
	int64_t now = ctl_now_ms(gc->ctl);

	/* members that did not rejoin in time are out; so are ids handed out
	 * with MEMBER_ID_REQUIRED that never came back */
	for (struct gmember *m = g->members, *nx; m; m = nx) {
		nx = m->next;
		if (!m->join)
			member_remove(gc, g, m, 0);
	}
	while (g->pending) {
		struct gpending *p = g->pending;

		g->pending = p->next;
		free(p->id);
		free(p);
	}
	g->generation++;
	gc->st.rebalances++;
	group_event_add(gc, g, GROUP_EVENT_GENERATION, NULL);
	free(g->protocol);
	g->protocol = NULL;
	if (!g->members) {
		g->state = G_EMPTY;
		g->empty_since = ctl_wall_ms(gc->ctl);
		free(g->leader);
		g->leader = NULL;
		group_owners_clear(g);
		return;
	}
	g->protocol = select_protocol(g);
	if (!g->leader || !group_member_find(g, (struct kafka_str){ g->leader, (int32_t)strlen(g->leader) })) {
		free(g->leader);
		g->leader = sdup(g->members->id);
	}
	g->state = G_COMPLETING;
	for (struct gmember *m = g->members; m; m = m->next) {
		m->deadline = now + m->session_ms;
		join_answer(gc, g, m);
	}
}

static void maybe_complete_join(struct group_coord *gc, struct group *g)
{
	int64_t now = ctl_now_ms(gc->ctl);

	if (g->state != G_PREPARING)
		return;
	if (now >= g->rebalance_deadline || (all_joined(g) && now >= g->delay_deadline))
		complete_join(gc, g);
}

/* Take m out of the group; a call it has waiting gets err (0: it has
 * none, or it is answered elsewhere). */
static void member_remove(struct group_coord *gc, struct group *g, struct gmember *m, int16_t err)
{
	struct gmember **pp;

	for (pp = &g->members; *pp && *pp != m; pp = &(*pp)->next)
		;
	if (!*pp)
		return;
	*pp = m->next;
	g->nmembers--;
	if (m->join)
		join_error(gc, m->join, err ? err : KERR_UNKNOWN_MEMBER_ID, m->id);
	if (m->sync)
		sync_answer(gc, m->sync, err ? err : KERR_UNKNOWN_MEMBER_ID, NULL, 0);
	group_owners_drop_member(g, m);
	if (g->leader && !strcmp(g->leader, m->id)) {
		free(g->leader);
		g->leader = NULL;
	}
	group_member_free(m);
}

/* A member left or timed out: the others rebalance. */
static void member_gone(struct group_coord *gc, struct group *g, struct gmember *m, int16_t err,
			enum group_rebalance_cause cause)
{
	char who[48];

	snprintf(who, sizeof(who), "%s", m->client_id ? m->client_id : "");   /* m goes now */
	member_remove(gc, g, m, err);
	if (g->state == G_STABLE || g->state == G_COMPLETING)
		prepare_rebalance(gc, g, cause, who);
	if (g->state == G_EMPTY && !g->members)
		return;
	maybe_complete_join(gc, g);
}

static char *new_member_id(const struct kafka_ctx *ctx, struct kafka_str instance)
{
	static uint64_t seq;
	const struct kafka_str cid = instance.len > 0 ? instance : ctx->req.header.ClientId;
	char *id;
	uint8_t r[16];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		uint64_t x = ++seq ^ (uint64_t)wall_ms();

		memcpy(r, &x, 8);
		memset(r + 8, 0, 8);
	}
	if (asprintf(&id, "%.*s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		     cid.len > 0 ? (cid.len > 200 ? 200 : cid.len) : 0, cid.len > 0 ? cid.ptr : "",
		     r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14],
		     r[15]) < 0)
		abort();
	return id;
}

static struct gmember *member_add(struct group *g, struct kafka_ctx *ctx, const struct kafka_join_group_request *q,
				  char *id)
{
	struct gmember *m = xcalloc(1, sizeof(*m)), **pp;

	m->id = id;
	m->instance = kdup(q->GroupInstanceId);
	m->client_id = kdup(ctx->req.header.ClientId);
	if (!m->client_id)
		m->client_id = sdup("");
	m->host = sdup(group_call_of(ctx)->host);
	group_member_set_protocols(m, q);
	for (pp = &g->members; *pp; pp = &(*pp)->next)
		;
	*pp = m;   /* in join order: the first is the leader of a new group */
	g->nmembers++;
	return m;
}

/* The protocol type and protocols fit the group's members. */
static int group_accepts(const struct group *g, const struct kafka_join_group_request *q)
{
	if (kempty(q->ProtocolType) || q->Protocols.count <= 0)
		return 0;
	if (!g->members)
		return 1;
	if (!g->ptype || !keq(q->ProtocolType, g->ptype))
		return 0;
	for (int i = 0; i < q->Protocols.count; i++) {
		char *name = kdup(q->Protocols.items[i].Name);
		int all = name != NULL;

		for (const struct gmember *m = g->members; m && all; m = m->next)
			all = group_member_supports(m, name) >= 0;
		free(name);
		if (all)
			return 1;
	}
	return 0;
}

static void handle_join(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_join_group_request *q = ctx->req.body;
	int16_t ver = ctx->req.header.RequestApiVersion;
	int32_t rebalance_ms = q->RebalanceTimeoutMs > 0 ? q->RebalanceTimeoutMs : q->SessionTimeoutMs;
	struct group *g;
	struct gmember *m;
	char gid[512];
	int16_t err = 0;

	gc->st.joins++;
	if (gc->stopping || (err = group_key_err(gc, q->GroupId))) {
		join_error(gc, ctx, gc->stopping ? KERR_NOT_COORDINATOR : err, NULL);
		return;
	}
	if (kempty(q->GroupId) || q->GroupId.len >= (int32_t)sizeof(gid)) {
		join_error(gc, ctx, KERR_INVALID_GROUP_ID, NULL);
		return;
	}
	if (q->SessionTimeoutMs < gc->min_session || q->SessionTimeoutMs > gc->max_session) {
		join_error(gc, ctx, KERR_INVALID_SESSION_TIMEOUT, NULL);
		return;
	}
	memcpy(gid, q->GroupId.ptr, (size_t)q->GroupId.len);
	gid[q->GroupId.len] = 0;
	g = group_find(gc, gid);
	if (!g && !kempty(q->MemberId)) {
		join_error(gc, ctx, KERR_UNKNOWN_MEMBER_ID, NULL);
		return;
	}
	if (!g)
		g = group_new(gc, gid);
	if (!group_accepts(g, q)) {
		join_error(gc, ctx, KERR_INCONSISTENT_GROUP_PROTOCOL, NULL);
		return;
	}
	if (kempty(q->MemberId)) {
		struct gmember *old = group_member_by_instance(g, q->GroupInstanceId);

		if (old) {
			/* a static member is back (a restart): it takes over its old
			 * membership under a new id, the old id is fenced */
			int same = group_member_same_protocols(old, q);

			if (old->join)
				join_error(gc, old->join, KERR_FENCED_INSTANCE_ID, old->id);
			old->join = NULL;
			if (old->sync)
				sync_answer(gc, old->sync, KERR_FENCED_INSTANCE_ID, NULL, 0);
			old->sync = NULL;
			if (g->leader && !strcmp(g->leader, old->id)) {
				free(g->leader);
				g->leader = NULL;
			}
			free(old->id);
			old->id = new_member_id(ctx, q->GroupInstanceId);
			if (!g->leader)
				g->leader = sdup(old->id);
			old->session_ms = q->SessionTimeoutMs;
			old->rebalance_ms = rebalance_ms;
			old->deadline = ctl_now_ms(gc->ctl) + old->session_ms;
			free(old->client_id);
			old->client_id = kdup(ctx->req.header.ClientId);
			if (!old->client_id)
				old->client_id = sdup("");
			old->join = ctx;
			if (g->state == G_STABLE && same) {
				/* nothing changed: no rebalance; it syncs and gets its
				 * assignment back */
				join_answer(gc, g, old);
				return;
			}
			group_member_set_protocols(old, q);
			prepare_rebalance(gc, g, GROUP_REBALANCE_REJOIN, old->client_id);
			maybe_complete_join(gc, g);
			return;
		}
		if (g->nmembers >= gc->max_size) {
			join_error(gc, ctx, KERR_GROUP_MAX_SIZE_REACHED, NULL);
			return;
		}
		if (ver >= 4 && q->GroupInstanceId.len < 0) {
			/* KIP-394: hand out the id first, so a client that times
			 * out and retries does not leave a ghost member behind */
			struct gpending *p = xcalloc(1, sizeof(*p));

			p->id = new_member_id(ctx, q->GroupInstanceId);
			p->deadline = ctl_now_ms(gc->ctl) + q->SessionTimeoutMs;
			p->next = g->pending;
			g->pending = p;
			join_error(gc, ctx, KERR_MEMBER_ID_REQUIRED, p->id);
			return;
		}
		m = member_add(g, ctx, q, new_member_id(ctx, q->GroupInstanceId));
	} else {
		struct gpending **pp;

		for (pp = &g->pending; *pp && !keq(q->MemberId, (*pp)->id); pp = &(*pp)->next)
			;
		if (*pp) {
			struct gpending *p = *pp;

			*pp = p->next;
			m = member_add(g, ctx, q, p->id);
			free(p);
		} else {
			m = group_member_find(g, q->MemberId);
			if (!m) {
				struct gmember *si = group_member_by_instance(g, q->GroupInstanceId);

				join_error(gc, ctx, si ? KERR_FENCED_INSTANCE_ID : KERR_UNKNOWN_MEMBER_ID, NULL);
				return;
			}
			if (q->GroupInstanceId.len >= 0 && !keq(q->GroupInstanceId, m->instance)) {
				join_error(gc, ctx, KERR_FENCED_INSTANCE_ID, NULL);
				return;
			}
			if (m->join) /* a retry on another connection replaces it */
				join_error(gc, m->join, KERR_REBALANCE_IN_PROGRESS, m->id);
			m->join = ctx;
			m->session_ms = q->SessionTimeoutMs;
			m->rebalance_ms = rebalance_ms;
			m->deadline = ctl_now_ms(gc->ctl) + m->session_ms;
			if ((g->state == G_STABLE || g->state == G_COMPLETING) && group_member_same_protocols(m, q) &&
			    !(g->state == G_STABLE && g->leader && !strcmp(g->leader, m->id))) {
				/* a follower rejoining with nothing changed: current
				 * generation, no rebalance */
				join_answer(gc, g, m);
				return;
			}
			group_member_set_protocols(m, q);
			prepare_rebalance(gc, g, GROUP_REBALANCE_REJOIN, m->client_id);
			maybe_complete_join(gc, g);
			return;
		}
	}
	m->session_ms = q->SessionTimeoutMs;
	m->rebalance_ms = rebalance_ms;
	m->deadline = ctl_now_ms(gc->ctl) + m->session_ms;
	m->join = ctx;
	if (!g->ptype)
		g->ptype = kdup(q->ProtocolType);
	else if (g->nmembers == 1 && !keq(q->ProtocolType, g->ptype)) {
		free(g->ptype);
		g->ptype = kdup(q->ProtocolType);
	}
	if (g->state == G_PREPARING && g->delay_deadline) {
		/* the first rebalance of an empty group waits a little longer
		 * for each newcomer (group.initial.rebalance.delay.ms) */
		int64_t d = ctl_now_ms(gc->ctl) + gc->initial_delay;

		g->delay_deadline = d < g->rebalance_deadline ? d : g->rebalance_deadline;
	}
	prepare_rebalance(gc, g, GROUP_REBALANCE_JOIN, m->client_id);
	maybe_complete_join(gc, g);
}

/* Total bytes of what the leader assigns, against what one record of the
 * offsets topic may hold (Kafka stores the assignment there too). */
static int64_t assignment_bytes(const struct kafka_sync_group_request *q)
{
	int64_t n = 0;

	for (int32_t i = 0; i < q->Assignments.count; i++)
		n += q->Assignments.items[i].Assignment.len > 0 ? q->Assignments.items[i].Assignment.len : 0;
	return n;
}

static void handle_sync(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_sync_group_request *q = ctx->req.body;
	struct group *g = group_findk(gc, q->GroupId);
	struct gmember *m;

	gc->st.syncs++;
	if (gc->stopping || group_key_err(gc, q->GroupId)) {
		sync_answer(gc, ctx, gc->stopping ? KERR_NOT_COORDINATOR : group_key_err(gc, q->GroupId), NULL, 0);
		return;
	}
	if (kempty(q->GroupId)) {
		sync_answer(gc, ctx, KERR_INVALID_GROUP_ID, NULL, 0);
		return;
	}
	m = g ? group_member_find(g, q->MemberId) : NULL;
	if (!m) {
		struct gmember *si = g ? group_member_by_instance(g, q->GroupInstanceId) : NULL;

		sync_answer(gc, ctx, si ? KERR_FENCED_INSTANCE_ID : KERR_UNKNOWN_MEMBER_ID, NULL, 0);
		return;
	}
	if (q->GroupInstanceId.len >= 0 && !keq(q->GroupInstanceId, m->instance)) {
		sync_answer(gc, ctx, KERR_FENCED_INSTANCE_ID, NULL, 0);
		return;
	}
	if (q->GenerationId != g->generation) {
		sync_answer(gc, ctx, KERR_ILLEGAL_GENERATION, NULL, 0);
		return;
	}
	m->deadline = ctl_now_ms(gc->ctl) + m->session_ms;
	switch (g->state) {
	case G_PREPARING:
		sync_answer(gc, ctx, KERR_REBALANCE_IN_PROGRESS, NULL, 0);
		return;
	case G_STABLE:
		sync_answer(gc, ctx, 0, m->assign, m->assign_len);
		return;
	case G_COMPLETING:
		break;
	default:
		sync_answer(gc, ctx, KERR_UNKNOWN_MEMBER_ID, NULL, 0);
		return;
	}
	if (m->sync)
		sync_answer(gc, m->sync, KERR_REBALANCE_IN_PROGRESS, NULL, 0);
	m->sync = ctx;
	if (!g->leader || strcmp(g->leader, m->id))
		return;   /* a follower waits for the leader's assignment */
	if (assignment_bytes(q) > (int64_t)(group_offsets_topic(gc) ? group_offsets_topic(gc)->max_message_bytes
								     : 1048588)) {
		/* Kafka keeps the assignment in one record of the offsets topic
		 * and answers a too-large one with UNKNOWN_SERVER_ERROR to
		 * everyone, then rebalances */
		slog(SLOG_WARN, "group %s: the assignment of generation %d is %lld bytes, more than "
			"max.message.bytes of %s; members are told UNKNOWN_SERVER_ERROR",
			g->id, g->generation, (long long)assignment_bytes(q), GROUP_OFFSETS_TOPIC);
		for (struct gmember *x = g->members; x; x = x->next)
			if (x->sync) {
				sync_answer(gc, x->sync, KERR_UNKNOWN_SERVER_ERROR, NULL, 0);
				x->sync = NULL;
			}
		prepare_rebalance(gc, g, GROUP_REBALANCE_ASSIGNMENT, NULL);
		return;
	}
	group_owners_clear(g);
	for (struct gmember *x = g->members; x; x = x->next) {
		free(x->assign);
		x->assign = NULL;
		x->assign_len = 0;
		for (int32_t i = 0; i < q->Assignments.count; i++) {
			const struct kafka_sync_group_request_sync_group_request_assignment *a = &q->Assignments.items[i];

			if (!keq(a->MemberId, x->id))
				continue;
			x->assign_len = a->Assignment.len > 0 ? a->Assignment.len : 0;
			x->assign = xcalloc(1, (size_t)x->assign_len + 1);
			if (x->assign_len)
				memcpy(x->assign, a->Assignment.ptr, (size_t)x->assign_len);
			break;
		}
		if (g->ptype && !strcmp(g->ptype, "consumer"))
			group_owners_add(g, x);
	}
	g->state = G_STABLE;
	for (struct gmember *x = g->members; x; x = x->next)
		if (x->sync) {
			struct kafka_ctx *s = x->sync;

			x->sync = NULL;
			sync_answer(gc, s, 0, x->assign, x->assign_len);
		}
}

static void handle_heartbeat(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_heartbeat_request *q = ctx->req.body;
	struct group_call *call = group_call_of(ctx);
	struct kafka_heartbeat_response *r = GALLOC(call, struct kafka_heartbeat_response, 1);
	struct group *g = group_findk(gc, q->GroupId);
	struct gmember *m = g ? group_member_find(g, q->MemberId) : NULL;

	gc->st.heartbeats++;
	kafka_heartbeat_response_init(r);
	ctx->resp = r;
	if (kempty(q->GroupId))
		r->ErrorCode = KERR_INVALID_GROUP_ID;
	else if ((r->ErrorCode = group_key_err(gc, q->GroupId)))
		;   /* not coordinated here */
	else if (!m)
		r->ErrorCode = g && group_member_by_instance(g, q->GroupInstanceId) ? KERR_FENCED_INSTANCE_ID
									       : KERR_UNKNOWN_MEMBER_ID;
	else if (q->GroupInstanceId.len >= 0 && !keq(q->GroupInstanceId, m->instance))
		r->ErrorCode = KERR_FENCED_INSTANCE_ID;
	else if (q->GenerationId != g->generation)
		r->ErrorCode = KERR_ILLEGAL_GENERATION;
	else {
		m->deadline = ctl_now_ms(gc->ctl) + m->session_ms;
		r->ErrorCode = g->state == G_PREPARING ? KERR_REBALANCE_IN_PROGRESS : 0;
	}
	group_reply(gc, ctx);
}

static void handle_leave(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_leave_group_request *q = ctx->req.body;
	int16_t ver = ctx->req.header.RequestApiVersion;
	struct group_call *call = group_call_of(ctx);
	struct kafka_leave_group_response *r = GALLOC(call, struct kafka_leave_group_response, 1);
	struct group *g = group_findk(gc, q->GroupId);
	int32_t n = ver >= 3 ? q->Members.count : 1;

	gc->st.leaves++;
	kafka_leave_group_response_init(r);
	ctx->resp = r;
	r->Members.count = ver >= 3 ? (n > 0 ? n : 0) : 0;
	r->Members.items = GALLOC(call, struct kafka_leave_group_response_member_response, r->Members.count);
	if (kempty(q->GroupId) || group_key_err(gc, q->GroupId)) {
		r->ErrorCode = kempty(q->GroupId) ? KERR_INVALID_GROUP_ID : group_key_err(gc, q->GroupId);
		r->Members.count = 0;
		group_reply(gc, ctx);
		return;
	}
	for (int32_t i = 0; i < n; i++) {
		struct kafka_str id = ver >= 3 ? q->Members.items[i].MemberId : q->MemberId;
		struct kafka_str inst = ver >= 3 ? q->Members.items[i].GroupInstanceId : (struct kafka_str){ NULL, -1 };
		struct gmember *m = NULL;
		int16_t err = 0;

		if (g && inst.len >= 0) {
			m = group_member_by_instance(g, inst);
			if (m && !kempty(id) && !keq(id, m->id))
				err = KERR_FENCED_INSTANCE_ID;
		} else if (g) {
			m = group_member_find(g, id);
		}
		if (!err && !m && g) {
			/* an id handed out with MEMBER_ID_REQUIRED: forget it */
			for (struct gpending **pp = &g->pending; *pp; pp = &(*pp)->next)
				if (keq(id, (*pp)->id)) {
					struct gpending *p = *pp;

					*pp = p->next;
					free(p->id);
					free(p);
					err = -2;
					break;
				}
			if (err == -2) {
				err = 0;
				maybe_complete_join(gc, g);
			} else {
				err = KERR_UNKNOWN_MEMBER_ID;
			}
		} else if (!err && !m) {
			err = KERR_UNKNOWN_MEMBER_ID;
		}
		if (!err && m)
			member_gone(gc, g, m, 0, GROUP_REBALANCE_LEAVE);
		if (ver >= 3) {
			r->Members.items[i].MemberId = group_kcopy(call, id.len >= 0 ? id : (struct kafka_str){ "", 0 });
			r->Members.items[i].GroupInstanceId = group_kcopy(call, inst);
			r->Members.items[i].ErrorCode = err;
		} else {
			r->ErrorCode = err;
		}
	}
	group_reply(gc, ctx);
}

static int state_wanted(const struct kafka_list_groups_request *q, const char *state)
{
	if (q->StatesFilter.count <= 0)
		return 1;
	for (int32_t i = 0; i < q->StatesFilter.count; i++) {
		struct kafka_str f = q->StatesFilter.items[i];

		if (f.len == (int32_t)strlen(state) && !strncasecmp(f.ptr, state, (size_t)f.len))
			return 1;
	}
	return 0;
}

static void handle_list(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_list_groups_request *q = ctx->req.body;
	struct group_call *call = group_call_of(ctx);
	struct kafka_list_groups_response *r = GALLOC(call, struct kafka_list_groups_response, 1);
	int k = 0;

	kafka_list_groups_response_init(r);
	ctx->resp = r;
	r->Groups.items = GALLOC(call, struct kafka_list_groups_response_listed_group, gc->groups.n);
	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];

		if (!g || !state_wanted(q, group_state_names[g->state]))
			continue;
		r->Groups.items[k].GroupId = group_str(call, g->id);
		r->Groups.items[k].ProtocolType = group_str(call, g->ptype ? g->ptype : "");
		r->Groups.items[k].GroupState = group_str(call, group_state_names[g->state]);
		k++;
	}
	r->Groups.count = k;
	group_reply(gc, ctx);
}

static void handle_describe(struct group_coord *gc, struct kafka_ctx *ctx)
{
	const struct kafka_describe_groups_request *q = ctx->req.body;
	struct group_call *call = group_call_of(ctx);
	struct kafka_describe_groups_response *r = GALLOC(call, struct kafka_describe_groups_response, 1);
	int32_t n = q->Groups.count > 0 ? q->Groups.count : 0;

	kafka_describe_groups_response_init(r);
	ctx->resp = r;
	r->Groups.count = n;
	r->Groups.items = GALLOC(call, struct kafka_describe_groups_response_described_group, n);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_describe_groups_response_described_group *rg = &r->Groups.items[i];
		struct group *g = group_findk(gc, q->Groups.items[i]);
		char *gid = kdup(q->Groups.items[i]);
		int k = 0;

		rg->GroupId = group_str(call, gid ? gid : "");
		free(gid);
		/* every operation a group supports, when asked (the shard answers
		 * the principal's: dataplane/handlers_group.c) */
		rg->AuthorizedOperations = q->IncludeAuthorizedOperations ? ACL_GROUP_OPS : INT32_MIN;
		rg->Members.items = GALLOC(call, struct kafka_describe_groups_response_described_group_member,
					   g ? g->nmembers : 0);
		if (kempty(q->Groups.items[i]) || group_key_err(gc, q->Groups.items[i])) {
			rg->ErrorCode = kempty(q->Groups.items[i]) ? KERR_INVALID_GROUP_ID
								   : group_key_err(gc, q->Groups.items[i]);
			rg->GroupState = group_str(call, "");
			rg->ProtocolType = group_str(call, "");
			rg->ProtocolData = group_str(call, "");
			continue;
		}
		if (!g) {
			/* Kafka describes a group it does not know as Dead */
			rg->GroupState = group_str(call, group_state_names[G_DEAD]);
			rg->ProtocolType = group_str(call, "");
			rg->ProtocolData = group_str(call, "");
			continue;
		}
		rg->GroupState = group_str(call, group_state_names[g->state]);
		rg->ProtocolType = group_str(call, g->ptype ? g->ptype : "");
		rg->ProtocolData = group_str(call, g->state == G_STABLE && g->protocol ? g->protocol : "");
		for (struct gmember *m = g->members; m; m = m->next, k++) {
			struct kafka_describe_groups_response_described_group_member *rm = &rg->Members.items[k];
			int pi = g->protocol ? group_member_supports(m, g->protocol) : -1;

			rm->MemberId = group_str(call, m->id);
			rm->GroupInstanceId = group_str(call, m->instance);
			rm->ClientId = group_str(call, m->client_id);
			rm->ClientHost = group_str(call, m->host);
			/* Kafka sends metadata and assignment only when Stable */
			rm->MemberMetadata = g->state == G_STABLE && pi >= 0 ? group_bytes_ref(call, m->pmeta[pi], m->pmeta_len[pi])
									     : (struct kafka_bytes){ (const uint8_t *)"", 0 };
			rm->MemberAssignment = g->state == G_STABLE && m->assign ? group_bytes(call, m->assign, m->assign_len)
										 : (struct kafka_bytes){ (const uint8_t *)"", 0 };
		}
		rg->Members.count = k;
	}
	group_reply(gc, ctx);
}

/* Tombstones for every offset of g (or those matching topic/partition
 * lists of an OffsetDelete). */
/* ---- dispatch -------------------------------------------------------------- */

static void group_msg(void *self, struct shard_msg *m)
{
	struct group_coord *gc = ctl_groups(self);
	struct kafka_ctx *ctx = m->p[0];

	/* joins, syncs and leaves can bring deadlines nearer: rescan at the
	 * next tick (heartbeats and commits only push them later) */
	gc->dirty |= ctx->req.header.RequestApiKey == KAFKA_JOIN_GROUP_KEY ||
		     ctx->req.header.RequestApiKey == KAFKA_LEAVE_GROUP_KEY ||
		     ctx->req.header.RequestApiKey == KAFKA_SYNC_GROUP_KEY;
	switch (ctx->req.header.RequestApiKey) {
	case KAFKA_OFFSET_COMMIT_KEY: group_handle_commit(gc, ctx); break;
	case KAFKA_OFFSET_FETCH_KEY: group_handle_fetch(gc, ctx); break;
	case KAFKA_JOIN_GROUP_KEY: handle_join(gc, ctx); break;
	case KAFKA_HEARTBEAT_KEY: handle_heartbeat(gc, ctx); break;
	case KAFKA_LEAVE_GROUP_KEY: handle_leave(gc, ctx); break;
	case KAFKA_SYNC_GROUP_KEY: handle_sync(gc, ctx); break;
	case KAFKA_DESCRIBE_GROUPS_KEY: handle_describe(gc, ctx); break;
	case KAFKA_LIST_GROUPS_KEY: handle_list(gc, ctx); break;
	case KAFKA_DELETE_GROUPS_KEY: group_handle_delete_groups(gc, ctx); break;
	case KAFKA_OFFSET_DELETE_KEY: group_handle_offset_delete(gc, ctx); break;
	case KAFKA_TXN_OFFSET_COMMIT_KEY: group_handle_txn_commit(gc, ctx); break;
	default:
		ctx->resp = NULL;
		group_reply(gc, ctx);
		break;
	}
}

static void group_cleanup(struct kafka_ctx *ctx)
{
	group_mem_free(ctx->cleanup_arg);
}

static int group_resume(struct kafka_ctx *ctx)
{
	struct group_call *call = ctx->state;

	/* the response memory lives until the request ends: a pipelined
	 * request's response is encoded only when its turn comes */
	ctx->cleanup = group_cleanup;
	ctx->cleanup_arg = call->mem;
	if (!ctx->resp) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_ctx_respond(ctx);
	return 0;
}

int group_submit(struct kafka_ctx *ctx)
{
	struct group_call *call = ALLOC(ctx, struct group_call, 1);
	struct shard_msg m = { .fn = group_msg, .p = { ctx } };

	if (!call) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	memset(call, 0, sizeof(*call));
	call->from = kafka_ctx_shard_id(ctx);
	if (ctx->req.header.RequestApiKey == KAFKA_JOIN_GROUP_KEY)
		/* the member's host, as DescribeGroups shows it (Kafka's
		 * spelling: "/127.0.0.1"); read here, where the socket lives */
		kafka_ctx_peer_host(ctx, call->host, sizeof(call->host));
	ctx->state = call;
	ctx->pending = 1;
	ctx->resume = group_resume;
	kafka_ctx_send_ctl(ctx, &m);
	return 0;
}

/* ---- timers ------------------------------------------------------------------ */

int group_tick(struct group_coord *gc, int64_t now_ms, int max_ms)
{
	int64_t now = now_ms, next = now + max_ms;

	if (now >= gc->next_lag_sample) {
		gc->next_lag_sample = now + GROUP_LAG_SAMPLE_MS;
		group_lag_sample(gc);
	}
	if (gc->next_lag_sample < next)
		next = gc->next_lag_sample;
	/* heartbeats only move deadlines later: without a membership change
	 * the last scan's earliest deadline still holds */
	if (!gc->dirty && now < gc->next_due && now < gc->next_expiry)
		return (int)((gc->next_due < next ? gc->next_due : next) - now);
	gc->dirty = 0;

	for (uint32_t i = 0; i < gc->groups.cap; i++) {
		struct group *g = gc->groups.v[i];

		if (!g)
			continue;
		for (struct gpending **pp = &g->pending; *pp;) {
			struct gpending *p = *pp;

			if (p->deadline <= now) {
				*pp = p->next;
				free(p->id);
				free(p);
				continue;
			}
			next = p->deadline < next ? p->deadline : next;
			pp = &p->next;
		}
again:
		for (struct gmember *m = g->members; m; m = m->next) {
			if (m->join || m->sync)
				continue;   /* waiting on us: alive */
			if (m->deadline <= now) {
				/* a rebalance it starts may remove others too: rescan */
				gc->st.members_expired++;
				member_gone(gc, g, m, 0, GROUP_REBALANCE_EXPIRED);
				goto again;
			}
			next = m->deadline < next ? m->deadline : next;
		}
		if (g->state == G_PREPARING) {
			maybe_complete_join(gc, g);
			if (g->state == G_PREPARING) {
				int64_t d = all_joined(g) && g->delay_deadline > now ? g->delay_deadline
										     : g->rebalance_deadline;

				next = d < next ? d : next;
			}
		}
	}
	if (now >= gc->next_expiry) {
		group_offsets_expire(gc);
		gc->next_expiry = now + gc->retention_check_ms;
	}
	gc->next_due = next;
	return next > now ? (int)(next - now) : 0;
}

void group_stopping(struct group_coord *gc)
{
	if (gc->stopping)
		return;
	gc->stopping = 1;
	for (uint32_t i = 0; i < gc->groups.cap; i++)
		if (gc->groups.v[i])
			group_answer_waiting(gc, gc->groups.v[i], KERR_NOT_COORDINATOR);
}

void group_answer_waiting(struct group_coord *gc, struct group *g, int16_t err)
{
	for (struct gmember *m = g->members; m; m = m->next) {
		if (m->join)
			join_error(gc, m->join, err, m->id);
		if (m->sync)
			sync_answer(gc, m->sync, err, NULL, 0);
		m->join = NULL;
		m->sync = NULL;
	}
}

/* ---- life -------------------------------------------------------------------- */

int group_coord_create(struct ctl *ctl, struct broker *b, const struct config *cfg, struct group_coord **out)
{
	struct group_coord *gc = calloc(1, sizeof(*gc));

	if (!gc)
		return -ENOMEM;
	gc->ctl = ctl;
	gc->b = b;
	gc->cfg = cfg;
	gc->min_session = (int32_t)config_int(cfg, "group.min.session.timeout.ms");
	gc->max_session = (int32_t)config_int(cfg, "group.max.session.timeout.ms");
	gc->max_size = (int32_t)config_int(cfg, "group.max.size");
	gc->initial_delay = (int32_t)config_int(cfg, "group.initial.rebalance.delay.ms");
	gc->retention_ms = config_int(cfg, "offsets.retention.ms") >= 0 ? config_int(cfg, "offsets.retention.ms")
									 : config_int(cfg, "offsets.retention.minutes") * 60000;
	gc->retention_check_ms = config_int(cfg, "offsets.retention.check.interval.ms");
	gc->max_meta = (int32_t)config_int(cfg, "offset.metadata.max.bytes");
	gc->next_expiry = ctl_now_ms(gc->ctl) + gc->retention_check_ms;
	*out = gc;
	return 0;
}

int32_t group_partitions_loaded(const struct group_coord *gc)
{
	return gc->load.loaded;
}

const struct group_stats *group_coord_stats(const struct group_coord *gc)
{
	return &gc->st;
}

void group_coord_destroy(struct group_coord *gc)
{
	if (!gc)
		return;
	for (uint32_t i = 0; i < gc->groups.cap; i++)
		if (gc->groups.v[i])
			group_free(gc->groups.v[i]);
	hmap_free(&gc->groups);
	coord_load_fini(&gc->load);
	free(gc);
}
