/* control/ctl_quorum_describe.c — DescribeQuorum on the control thread:
 * this node's view of the metadata quorum (its voters' log ends, the
 * observers fetching from it), served to the shards' DescribeQuorum and,
 * on the leader, to nodes that ask over the controller channel; a node
 * that does not lead forwards a shard's request to the leader and answers
 * with its view. The quorum's state is ctl_quorum.c's (ctl_quorum.h).
 *
 * @thread ctl: everything here.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl.h"
#include "control/ctl_internal.h"
#include "control/ctl_quorum.h"
#include "control/cutil.h"
#include "control/quorum.h"
#include "dataplane/kafka_ctx.h"

int ctl_quorum_describe(const struct ctl *ctl, struct quorum_view *st)
{
	const struct ctl_quorum *cq = ctl->cq;

	if (!cq || !cq->q) {
		memset(st, 0, sizeof(*st));
		st->leader = -1;
		return -ESHUTDOWN;
	}
	quorum_describe(cq->q, st);
	return 0;
}

/* DescribeQuorum as this node sees it: the voters (their log ends where
 * this node knows them: the leader's match indexes), and the observers
 * fetching from it (the leader: every broker-only node that follows it). */
static void cq_view(struct ctl *ctl, struct coord_quorum *out)
{
	struct quorum_view st;

	memset(out, 0, sizeof(*out));
	out->err = ctl_quorum_describe(ctl, &st);
	out->leader = st.leader;
	out->epoch = (int32_t)st.term;
	out->high_watermark = (int64_t)st.commit_index;
	out->now_ms = ctl->wall;
	for (int i = 0; i < st.nvoters && i < COORD_QUORUM_MAX_VOTERS; i++) {
		out->voters[i].id = st.voters[i].node_id;
		out->voters[i].log_end = st.voters[i].log_end;
		out->nvoters++;
	}
	if (out->err == 0) {
		int32_t ids[COORD_QUORUM_MAX_VOTERS];
		int64_t ends[COORD_QUORUM_MAX_VOTERS];

		out->nobservers = ctl_channel_observers(ctl->cq->ch, ids, ends, COORD_QUORUM_MAX_VOTERS);
		for (int i = 0; i < out->nobservers; i++) {
			out->observers[i].id = ids[i];
			out->observers[i].log_end = ends[i];
		}
	}
}

/* The leader's view on the controller channel: i32 leader, i32 epoch, i64
 * high watermark, i64 the leader's clock, i32 n voters then n x (i32 id,
 * i64 log end), i32 n observers likewise; little-endian. */
int ctl_quorum_describe_serve(struct ctl *ctl, void **buf, size_t *len)
{
	struct coord_quorum q;
	uint8_t *b, *p;

	cq_view(ctl, &q);
	if (q.err < 0)
		return q.err;
	if (!(b = malloc(32 + 12 * (size_t)(q.nvoters + q.nobservers))))
		return -ENOMEM;
	p = b;
#define PUT(v, n) do { if ((n) == 4) le32_store(p, (uint32_t)(v)); else le64_store(p, (uint64_t)(v)); p += n; } while (0)
	PUT(q.leader, 4);
	PUT(q.epoch, 4);
	PUT(q.high_watermark, 8);
	PUT(q.now_ms, 8);
	PUT(q.nvoters, 4);
	for (int i = 0; i < q.nvoters; i++) {
		PUT(q.voters[i].id, 4);
		PUT(q.voters[i].log_end, 8);
	}
	PUT(q.nobservers, 4);
	for (int i = 0; i < q.nobservers; i++) {
		PUT(q.observers[i].id, 4);
		PUT(q.observers[i].log_end, 8);
	}
#undef PUT
	*buf = b;
	*len = (size_t)(p - b);
	return 0;
}

/* The next n (4: signed 32-bit, or 8) bytes of [*p, end) little-endian. */
static int take(const uint8_t **p, const uint8_t *end, int n, int64_t *v)
{
	if (end - *p < n)
		return -EPROTO;
	*v = n == 4 ? (int64_t)(int32_t)le32_load(*p) : (int64_t)le64_load(*p);
	*p += n;
	return 0;
}

static int cq_view_parse(const uint8_t *p, size_t len, struct coord_quorum *q)
{
	const uint8_t *end = p + len;
	int64_t f[4], n, id, le;

	memset(q, 0, sizeof(*q));
	for (int i = 0; i < 4; i++)
		if (take(&p, end, i < 2 ? 4 : 8, &f[i]) < 0)
			return -EPROTO;
	q->leader = (int32_t)f[0];
	q->epoch = (int32_t)f[1];
	q->high_watermark = f[2];
	q->now_ms = f[3];
	for (int list = 0; list < 2; list++) {
		if (take(&p, end, 4, &n) < 0 || n < 0 || n > COORD_QUORUM_MAX_VOTERS)
			return -EPROTO;
		for (int i = 0; i < n; i++) {
			if (take(&p, end, 4, &id) < 0 || take(&p, end, 8, &le) < 0)
				return -EPROTO;
			if (list == 0) {
				q->voters[i].id = (int32_t)id;
				q->voters[i].log_end = le;
			} else {
				q->observers[i].id = (int32_t)id;
				q->observers[i].log_end = le;
			}
		}
		if (list == 0)
			q->nvoters = (int)n;
		else
			q->nobservers = (int)n;
	}
	return 0;
}

/* A forwarded DescribeQuorum waiting for the leader's answer. */
struct cq_asked {
	struct ctl *ctl;
	struct kafka_ctx *ctx;
	struct coord_quorum *out;
	int from;
};

static void cq_described(void *cookie, int err, const void *buf, size_t len)
{
	struct cq_asked *a = cookie;

	if (err == 0)
		err = cq_view_parse(buf, len, a->out);
	if (err < 0) {
		/* no leader answered: Kafka's NOT_LEADER_OR_FOLLOWER */
		memset(a->out, 0, sizeof(*a->out));
		a->out->err = err;
		a->out->leader = -1;
	}
	ctl_reply(a->ctl, a->ctx, a->from);
	free(a);
}

/* On the control thread: a shard's DescribeQuorum. As Kafka's brokers
 * forward it to the active controller, and only the active controller
 * answers it, a node that does not lead asks the leader over the
 * controller channel, and answers with the leader's view (every voter's
 * log end, every observer); with no leader to ask, the error Kafka's
 * controller gives (NOT_LEADER_OR_FOLLOWER). The leader, and a quorum of
 * one, answer from their own view. */
static void cq_describe_msg(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	struct coord_quorum *out = m->p[1];
	struct ctl_quorum *cq = ctl->cq;
	struct cq_asked *a;
	int rc;

	if (!cq || !cq->q || !cq->ch || quorum_is_leader(cq->q)) {
		cq_view(ctl, out);
		ctl_reply(ctl, m->p[0], (int)m->v[0]);
		return;
	}
	if (!(a = malloc(sizeof(*a))))
		abort();   /* the control thread's own bookkeeping */
	*a = (struct cq_asked){ ctl, m->p[0], out, (int)m->v[0] };
	rc = ctl_channel_describe(cq->ch, cq_described, a);
	if (rc < 0)
		cq_described(a, rc, NULL, 0);
}

void ctl_quorum_submit(struct kafka_ctx *ctx, struct coord_quorum *out)
{
	struct shard_msg m = { .fn = cq_describe_msg, .p = { ctx, out }, .v = { kafka_ctx_shard_id(ctx) } };

	kafka_ctx_send_ctl(ctx, &m);
}
