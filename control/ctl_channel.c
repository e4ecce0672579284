/* control/ctl_channel.c — the controller channel: what a node's control
 * thread asks of the active controller (the quorum's leader) over the
 * controller port (control/quorum_transport.h tells its connections from
 * raft's), on the quorum's libuv loop, never blocking:
 *
 *   PROPOSE   a metadata record from a node that does not lead the
 *             quorum; the leader proposes it and answers with its log
 *             index (or an error: "not leader", nothing was appended, and
 *             the sender retries on the next leader). The proposer's
 *             continuation runs once its own node has applied that index,
 *             with what applying it did there (the same on every node:
 *             metalog_apply re-validates in log order).
 *   HEARTBEAT a broker's heartbeat (ctl_controller_heartbeat on the
 *             leader), answered: 0 or ESTALE, and whether it is fenced.
 *             It carries the sender's last raft log index: the leader's
 *             watch for libraft 0.15's stuck follower (below).
 *   DESCRIBE  DescribeQuorum asked of a node that does not lead: the
 *             leader's view of the quorum (its voters' log ends, every
 *             observer fetching from it), as Kafka's brokers forward
 *             DescribeQuorum to the active controller; bytes the leader's
 *             handler makes (ctl_quorum.c), answered or "not leader".
 *   FETCH     an observer's (a broker-only node, not a voter: Kafka's
 *             process.roles=broker) pull of the committed metadata
 *             records from index N on, as Kafka's brokers fetch the
 *             metadata log from the quorum's leader. Any voter answers
 *             with what it applied (committed records only, so every
 *             voter's answer is a prefix of the same log) and names the
 *             leader it knows; the observer moves to that leader. A voter
 *             keeps the records it applied lately (CH_KEEP of them, at
 *             most CH_KEEP_BYTES) with their bytes; an observer that asks
 *             for an older index, or one before a snapshot this voter
 *             restored, gets the voter's image as a snapshot (the
 *             quorum's state snapshot, at the voter's last applied index)
 *             instead. A fetch with nothing new waits on the voter
 *             (CH_FETCH_WAIT_MS at most) for the next record.
 *   ELECT     ElectLeaders asked of a node that is not the active
 *             controller (a voter that does not lead, or a broker-only
 *             node), as Kafka's brokers forward it to the active
 *             controller: the leader runs the elections as for its own
 *             client (ctl_elect.c) and answers once their records are
 *             applied there, each partition's Kafka error code; "not
 *             leader" (nothing was done) sends it again to the next
 *             leader. Bytes ctl_elect.c makes and reads.
 *
 * A frame: u32 length of what follows, u8 type, u64 request id, then
 *   PROPOSE        the record
 *   PROPOSE_RESP   i32 errno (0, or positive), u64 log index (0: none)
 *   HEARTBEAT      i32 broker id, i64 broker epoch, u64 last log index,
 *                  i16 the highest metadata.version the broker supports
 *                  (control/meta_features.h; absent from older builds'
 *                  heartbeats: level 1)
 *   HEARTBEAT_RESP i32 errno, u8 fenced
 *   FETCH          u64 the first index wanted
 *   DESCRIBE       (nothing)
 *   DESCRIBE_RESP  i32 errno, then the leader's view (ctl_quorum.c's bytes)
 *   ELECT          ctl_elect.c's request: u8 election type (0 preferred,
 *                  1 unclean), u32 count, that many of (u16 topic name
 *                  length, the name, i32 partition)
 *   ELECT_RESP     i32 errno (0, QUORUM_ENOTLEADER, EAGAIN: not serving
 *                  yet, EPROTO: the request does not read), then with 0
 *                  ctl_elect.c's answer: u32 count, that many i16 Kafka
 *                  error codes in the request's order
 *   FETCH_RESP     i32 errno, i32 the leader the voter knows (-1: none),
 *                  u64 its term, u64 upto (every record up to it is in
 *                  the answer or before the index asked), u64 the voter's
 *                  last applied index, u8 kind, then kind 0: u32 count,
 *                  that many of (u64 index, u32 length, the record);
 *                  kind 1: the snapshot, taken at index upto
 * all little-endian. A node keeps one connection to the leader it knows
 * (reconnecting when the leader changes or the connection breaks) and
 * answers the requests of every node that connected to it.
 *
 * Outcomes: a proposal not yet sent waits (at most CH_QUEUE_MS) for a
 * leader; one sent whose answer is lost with its connection or with the
 * leadership is QUORUM_ELOST for its proposer, as on a leader that lost its
 * leadership: the record may still be committed, and then every node
 * applies it (the callers treat it so already). An ELECT waits likewise
 * for a leader and gets its answer within its client's TimeoutMs of being
 * asked (CH_ELECT_MS when that is not above 0, CH_ELECT_MAX_MS at most), else
 * -ETIMEDOUT; one whose connection is lost is -ENOTCONN (the elections
 * may have been done: asking again finds them not needed). A proposal
 * answered at an index this node passed over, taking a snapshot instead
 * of the records (a voter's InstallSnapshot, an observer's fetched
 * snapshot), is -ESTALE as soon as its node's applied index is past it:
 * committed, its outcome unknown here.
 *
 * The stuck follower (docs/dependencies.md, libraft's caveats): libraft
 * 0.15 can take a follower's stale answer for its match index and never
 * send it the entries it lacks while one leader lasts. The leader compares
 * each node's last index, as its heartbeat says, with the match index it
 * believed one heartbeat earlier: a node below it twice in a row is stuck,
 * and the leader hands its leadership over (quorum_transfer), which ends
 * it, as the simulation's watchdog does.
 *
 * @thread ctl
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>
#include <uv.h>

#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/inbuf.h"
#include "control/meta_features.h"
#include "control/metalog.h"
#include "control/quorum.h"
#include "storage/slog.h"

#define CH_PROPOSE 1
#define CH_PROPOSE_RESP 2
#define CH_HEARTBEAT 3
#define CH_HEARTBEAT_RESP 4
#define CH_FETCH 5
#define CH_FETCH_RESP 6
#define CH_DESCRIBE 7
#define CH_DESCRIBE_RESP 8
#define CH_ELECT 9
#define CH_ELECT_RESP 10

#define CH_HDR 13                       /* u32 length, u8 type, u64 id */
#define CH_FRAME_MAX (64u << 20)        /* a record is at most 1 MiB; a
					 * fetched snapshot is the image */
#define CH_QUEUE_MS 30000               /* a proposal waits this long for a leader */
#define CH_HB_MS 5000                   /* a heartbeat's answer, at most */
#define CH_ELECT_MS 30000               /* an ELECT's answer (a leader found, its records
					 * applied) when its TimeoutMs is not above 0 */
#define CH_ELECT_MAX_MS 300000          /* and at most, whatever its TimeoutMs */
#define CH_RETRY_MS 200                 /* reconnect, or resend after "not leader" */
#define CH_RING 512                     /* applied outcomes kept for late answers */
#define CH_STUCK 2                      /* heartbeats below the match index: stuck */
#define CH_KEEP 4096                    /* records a voter keeps for observers */
#define CH_KEEP_BYTES (16u << 20)       /* ... and their bytes, at most */
#define CH_FETCH_BYTES (1u << 20)       /* records in one fetch's answer (one at least) */
#define CH_FETCH_WAIT_MS 500            /* a fetch with nothing new waits this long */
#define CH_FETCH_HDR 33                 /* FETCH_RESP's fields before the payload */
#define CH_WRITE_MAX (8u << 20)         /* answers queued to a peer that does not
					 * read them: above this, its frames wait
					 * (reading stops) until they drain */

enum ch_state { RQ_QUEUED, RQ_SENT, RQ_WAIT };

/* A request of this node to the leader. */
struct ch_req {
	struct ch_req *next;
	uint64_t id;
	int type;
	enum ch_state state;
	void *rec;                      /* PROPOSE: the record, ELECT: the request (kept to resend) */
	size_t len;
	int32_t hb_id;
	int64_t hb_epoch;
	uint64_t conn;                  /* RQ_SENT: on which connection */
	uint64_t index;                 /* RQ_WAIT: applied here at */
	int64_t not_before_ms, deadline_ms;
	ctl_quorum_done_fn done;
	ctl_channel_hb_fn hb_done;
	ctl_channel_describe_fn ds_done;
	ctl_channel_elect_fn el_done;
	int sent;                       /* ELECT: sent once (counted) */
	void *cookie;
};

struct ch_conn {
	struct ctl_channel *ch;
	struct ch_conn *next;
	uv_stream_t *s;                 /* raft_malloc'ed (the transport's) */
	uint64_t id;
	int32_t peer;                   /* node id */
	int closing;
	int fetcher;                    /* an observer fetched on it (DescribeQuorum) */
	int paused;                     /* reading stopped: CH_WRITE_MAX queued */
	uint64_t fetched;               /* the index before its last fetch's first */
	struct inbuf in;                /* frames read */
};

struct ch_write {
	struct ch_conn *c;              /* valid in written: a close cancels the
					 * writes before its callback frees c */
	uv_write_t w;
	uv_buf_t b;
	char data[];
};

struct ch_outcome {
	uint64_t index;
	int rc;
	struct metalog_applied a;
};

/* A record applied here, kept for observers' fetches. */
struct ch_kept {
	uint64_t index;
	size_t len;
	char *buf;
};

/* A fetch waiting for a record to be applied here. */
struct ch_park {
	struct ch_park *next;
	uint64_t conn, id, from;
	int64_t deadline_ms;
};

/* The leader's view of one node's log, from its heartbeats. */
struct ch_peer {
	int32_t node;
	uint64_t match;                 /* the match index at its last heartbeat */
	int below;                      /* heartbeats in a row below the one before */
};

struct ctl_channel {
	struct ctl *ctl;
	struct ch_peer *peers;          /* nvoters of them */
	uint64_t stuck_transfers;
	uint64_t paused;                /* reading stopped at CH_WRITE_MAX queued */
	struct quorum *q;               /* NULL until bound */
	int32_t self;
	struct ctl_channel_voter *voters;
	int nvoters;
	struct ch_conn *conns;
	uint64_t next_conn, next_req;
	struct ch_conn *out;            /* to the leader, NULL: none */
	int32_t out_peer;
	int connecting;
	int32_t connect_peer;
	int64_t retry_at_ms;
	struct ch_req *reqs;
	struct ch_outcome ring[CH_RING];
	uint64_t applied_max;
	int (*serve_hb)(struct ctl *ctl, int32_t id, int64_t epoch, int16_t mv_max, int *fenced);
	int (*serve_ds)(struct ctl *ctl, void **buf, size_t *len);
	int (*serve_el)(struct ctl *ctl, const void *req, size_t len, void *token);
	int closed;
	uint64_t forwarded, served, lost, elect_forwarded;
	/* a voter: the records applied lately (a ring, oldest at kept_head);
	 * every record applied past kept_base is in it, unless kept_fresh (a
	 * snapshot was restored and no record applied since) */
	struct ch_kept kept[CH_KEEP];
	uint32_t kept_head, kept_len, keep_max;
	size_t kept_bytes;
	uint64_t kept_base;
	int kept_fresh;
	struct ch_park *parked;
	uint64_t snapshots_sent;
	/* an observer (not among the voters): its one fetch in flight */
	int observer;
	int fetching;
	uint64_t fetch_id;
	int probe;                      /* the voter tried next while no leader is known */
	uint64_t fetches, snapshots_got;
};

/* ---- connections ---------------------------------------------------------- */

static void conn_close(struct ch_conn *c);

static struct ch_conn *conn_by_id(struct ctl_channel *ch, uint64_t id)
{
	for (struct ch_conn *c = ch->conns; c; c = c->next)
		if (c->id == id && !c->closing)
			return c;
	return NULL;
}

static void conn_serve(struct ch_conn *c);
static void conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void written(uv_write_t *w, int status)
{
	struct ch_write *cw = w->data;
	struct ch_conn *c = cw->c;

	(void)status;   /* a failed write shows as a read error or EOF too */
	free(cw);
	if (c->closing || !c->paused || c->s->write_queue_size > CH_WRITE_MAX / 2)
		return;
	/* what it queued has drained: serve the frames that waited, read on */
	c->paused = 0;
	conn_serve(c);
	if (!c->closing && !c->paused && uv_read_start(c->s, conn_alloc, conn_read) < 0)
		conn_close(c);
}

/* Send one frame: type, id, then a and b (either may be empty). */
static void conn_send(struct ch_conn *c, int type, uint64_t id, const void *a, size_t alen, const void *b,
		      size_t blen)
{
	size_t n = CH_HDR + alen + blen;
	struct ch_write *w;

	if (c->closing)
		return;
	if (!(w = malloc(sizeof(*w) + n)))
		abort();   /* the control thread's own bookkeeping */
	le32_store(w->data, (uint32_t)(n - 4));
	w->data[4] = (char)type;
	le64_store(w->data + 5, id);
	if (alen)
		memcpy(w->data + CH_HDR, a, alen);
	if (blen)
		memcpy(w->data + CH_HDR + alen, b, blen);
	w->w.data = w;
	w->c = c;
	w->b = uv_buf_init(w->data, (unsigned)n);
	if (uv_write(&w->w, c->s, &w->b, 1, written) < 0) {
		free(w);
		conn_close(c);
	}
}

static void req_complete(struct ctl_channel *ch, struct ch_req *r, int err, const struct metalog_applied *a);

/* The connection to the leader is gone: what was sent on it has no answer. */
static void out_lost(struct ctl_channel *ch, struct ch_conn *c)
{
	struct ch_req **pp = &ch->reqs;

	if (ch->out == c) {
		ch->out = NULL;
		if (ch->observer) {
			/* its fetch has no answer; a leader that went away is
			 * forgotten, the next voter tried */
			ch->fetching = 0;
			ch->probe++;
			if (ch->q && c->peer == quorum_leader(ch->q))
				quorum_observe_leader(ch->q, -1, 0);
		}
	}
	ch->retry_at_ms = ch->ctl->now_ms + CH_RETRY_MS;
	while (*pp) {
		struct ch_req *r = *pp;

		if (r->state == RQ_SENT && r->conn == c->id) {
			*pp = r->next;
			if (r->type == CH_PROPOSE)
				ch->lost++;
			req_complete(ch, r, r->type == CH_PROPOSE ? -QUORUM_ELOST : -ENOTCONN, NULL);
			continue;
		}
		pp = &r->next;
	}
}

static void conn_closed(uv_handle_t *h)
{
	struct ch_conn *c = h->data;
	struct ctl_channel *ch = c->ch;
	struct ch_conn **pp = &ch->conns;

	while (*pp && *pp != c)
		pp = &(*pp)->next;
	if (*pp)
		*pp = c->next;
	raft_free(c->s);
	inbuf_fini(&c->in);
	free(c);
}

static void conn_close(struct ch_conn *c)
{
	if (c->closing)
		return;
	c->closing = 1;
	out_lost(c->ch, c);
	uv_close((uv_handle_t *)c->s, conn_closed);
}

static void conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct ch_conn *c = h->data;

	(void)suggested;
	inbuf_room(&c->in);
	buf->base = (char *)c->in.p + c->in.len;
	buf->len = c->in.cap - c->in.len;
}

static void serve_frame(struct ch_conn *c, int type, uint64_t id, const char *p, size_t len);
static void answer_frame(struct ctl_channel *ch, int type, uint64_t id, const char *p, size_t len);

/* Serve (or take the answers of) the whole frames read, in order, until
 * CH_WRITE_MAX of answers wait to be written to a peer that does not read
 * them: then reading stops (the rest stays in c->in) and written() goes
 * on once half of it drained. Without it, a peer that sends FETCHes and
 * never reads the answers would have them all queued here. */
static void conn_serve(struct ch_conn *c)
{
	size_t off = 0;

	while (!c->closing && c->in.len - off >= 4) {
		uint32_t len = le32_load(c->in.p + off);

		if (c->s->write_queue_size > CH_WRITE_MAX) {
			c->paused = 1;
			c->ch->paused++;
			uv_read_stop(c->s);
			break;
		}

		if (len < CH_HDR - 4 || len > CH_FRAME_MAX) {
			conn_close(c);
			return;
		}
		if (c->in.len - off < 4 + (size_t)len)
			break;
		if (c == c->ch->out)
			answer_frame(c->ch, (uint8_t)c->in.p[off + 4], le64_load(c->in.p + off + 5),
				     (const char *)c->in.p + off + CH_HDR, len + 4 - CH_HDR);
		else
			serve_frame(c, (uint8_t)c->in.p[off + 4], le64_load(c->in.p + off + 5),
				    (const char *)c->in.p + off + CH_HDR, len + 4 - CH_HDR);
		off += 4 + (size_t)len;
	}
	if (c->closing)
		return;
	inbuf_consume(&c->in, off);   /* conn_alloc grows the buffer for a longer frame */
}

static void conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct ch_conn *c = s->data;

	(void)buf;
	if (n == 0)
		return;
	if (n < 0) {
		conn_close(c);
		return;
	}
	c->in.len += (size_t)n;
	conn_serve(c);
}

static struct ch_conn *conn_new(struct ctl_channel *ch, uv_stream_t *s, int32_t peer)
{
	struct ch_conn *c = calloc(1, sizeof(*c));

	if (!c)
		abort();   /* the control thread's own bookkeeping */
	c->ch = ch;
	c->s = s;
	c->id = ++ch->next_conn;
	c->peer = peer;
	s->data = c;
	c->next = ch->conns;
	ch->conns = c;
	if (uv_read_start(s, conn_alloc, conn_read) < 0)
		conn_close(c);
	return c;
}

static void stream_freed(uv_handle_t *h)
{
	raft_free(h);
}

void ctl_channel_accept(void *arg, struct uv_stream_s *s, int32_t node)
{
	struct ctl_channel *ch = arg;

	if (ch->closed) {
		uv_close((uv_handle_t *)s, stream_freed);
		return;
	}
	conn_new(ch, s, node);
}

/* ---- the leader's side ----------------------------------------------------- */

struct ch_serving {
	struct ctl_channel *ch;
	uint64_t conn, id;
};

static void answer_propose(struct ch_conn *c, uint64_t id, int err, uint64_t index)
{
	char b[12];

	le32_store(b, (uint32_t)(err < 0 ? -err : err));
	le64_store(b + 4, index);
	conn_send(c, CH_PROPOSE_RESP, id, b, sizeof(b), NULL, 0);
}

static void served(void *cookie, uint64_t index, int err)
{
	struct ch_serving *sv = cookie;
	struct ch_conn *c = conn_by_id(sv->ch, sv->conn);

	if (c)
		answer_propose(c, sv->id, err, err == 0 ? index : 0);
	free(sv);
}

static void answer_elect(struct ch_conn *c, uint64_t id, int err, const void *buf, size_t len)
{
	char b[4];

	le32_store(b, (uint32_t)(err < 0 ? -err : err));
	conn_send(c, CH_ELECT_RESP, id, b, sizeof(b), buf, err ? 0 : len);
}

void ctl_channel_elect_answer(struct ctl_channel *ch, void *token, int err, const void *buf, size_t len)
{
	struct ch_serving *sv = token;
	struct ch_conn *c = ch && sv->ch == ch ? conn_by_id(ch, sv->conn) : NULL;

	if (c)
		answer_elect(c, sv->id, err, buf, len);   /* else the asker is gone: its client was told */
	free(sv);
}

static void stuck_transferred(void *cookie, int32_t leader)
{
	(void)cookie;
	slog(SLOG_NOTICE, "metadata quorum: leadership handed over (now %d)", leader);
}

/* A node's heartbeat says its log ends at `last`: is it the stuck follower? */
static void watch_follower(struct ctl_channel *ch, int32_t node, uint64_t last)
{
	struct ch_peer *p = NULL;
	uint64_t match;

	for (int i = 0; i < ch->nvoters; i++)
		if (ch->peers[i].node == node)
			p = &ch->peers[i];
	if (!p || quorum_follower_match(ch->q, node, &match) < 0)
		return;
	p->below = p->match && last < p->match ? p->below + 1 : 0;
	p->match = match;
	if (p->below < CH_STUCK)
		return;
	slog(SLOG_WARN, "metadata quorum: node %d's log ends at %llu, below the %llu this leader "
		"believes it has (libraft 0.15's stuck follower): handing leadership over",
		node, (unsigned long long)last, (unsigned long long)p->match);
	for (int i = 0; i < ch->nvoters; i++)
		ch->peers[i].below = 0;
	if (quorum_transfer(ch->q, -1, stuck_transferred, NULL) == 0)
		ch->stuck_transfers++;
}

/* ---- a voter's side of an observer's fetch ---------------------------------- */

static void kept_drop_oldest(struct ctl_channel *ch)
{
	struct ch_kept *k = &ch->kept[ch->kept_head];

	ch->kept_base = k->index;
	ch->kept_bytes -= k->len;
	free(k->buf);
	k->buf = NULL;
	ch->kept_head = (ch->kept_head + 1) % CH_KEEP;
	ch->kept_len--;
}

void ctl_channel_keep(struct ctl_channel *ch, uint64_t index, const void *buf, size_t len)
{
	struct ch_kept *k;

	if (ch->observer)
		return;
	if (ch->kept_fresh) {
		/* the first record after a snapshot: what lies between is raft's own */
		ch->kept_base = index - 1;
		ch->kept_fresh = 0;
	}
	while (ch->kept_len && (ch->kept_len >= ch->keep_max || ch->kept_bytes + len > CH_KEEP_BYTES))
		kept_drop_oldest(ch);
	k = &ch->kept[(ch->kept_head + ch->kept_len) % CH_KEEP];
	if (!(k->buf = malloc(len ? len : 1)))
		abort();   /* the control thread's own bookkeeping */
	memcpy(k->buf, buf, len);
	k->len = len;
	k->index = index;
	ch->kept_len++;
	ch->kept_bytes += len;
}

void ctl_channel_keep_max(struct ctl_channel *ch, uint32_t records)
{
	ch->keep_max = records < 1 ? 1 : records > CH_KEEP ? CH_KEEP : records;
}

void ctl_channel_restored(struct ctl_channel *ch)
{
	while (ch->kept_len)
		kept_drop_oldest(ch);
	ch->kept_fresh = 1;
}

/* Answer a fetch from index `from` with what this voter applied. */
static void fetch_answer(struct ctl_channel *ch, struct ch_conn *c, uint64_t id, uint64_t from)
{
	struct quorum_view v;
	char h[CH_FETCH_HDR];
	char *body = NULL;
	size_t blen = 0, cap = 0;
	uint64_t upto;
	int kind = 0;

	quorum_describe(ch->q, &v);
	upto = v.last_applied;
	c->fetcher = 1;
	c->fetched = from ? from - 1 : 0;
	if (from <= v.last_applied && (ch->kept_fresh || from <= ch->kept_base)) {
		/* older than what is kept: the image, as a snapshot */
		void *snap;
		size_t slen;

		if (quorum_state_snapshot(ch->q, &snap, &slen) < 0) {
			conn_close(c);   /* out of memory: the observer asks again */
			return;
		}
		body = snap;
		blen = slen;
		kind = 1;
		ch->snapshots_sent++;
	} else {
		uint32_t n = 0;

		cap = 4096;
		if (!(body = malloc(cap)))
			abort();
		blen = 4;
		for (uint32_t i = 0; i < ch->kept_len; i++) {
			const struct ch_kept *k = &ch->kept[(ch->kept_head + i) % CH_KEEP];

			if (k->index < from || k->index > v.last_applied)
				continue;
			if (n && blen + 12 + k->len > CH_FETCH_BYTES) {
				upto = k->index - 1;   /* the rest in the next fetch */
				break;
			}
			while (blen + 12 + k->len > cap) {
				cap *= 2;
				if (!(body = realloc(body, cap)))
					abort();
			}
			le64_store(body + blen, k->index);
			le32_store(body + blen + 8, (uint32_t)k->len);
			memcpy(body + blen + 12, k->buf, k->len);
			blen += 12 + k->len;
			n++;
		}
		le32_store(body, n);
	}
	le32_store(h, 0);
	le32_store(h + 4, (uint32_t)v.leader);
	le64_store(h + 8, v.term);
	le64_store(h + 16, upto);
	le64_store(h + 24, v.last_applied);
	h[32] = (char)kind;
	conn_send(c, CH_FETCH_RESP, id, h, sizeof(h), body, blen);
	free(body);
}

/* Answer the parked fetches that have something now, or waited long
 * enough (then with nothing: the answer still names the leader). */
static int fetch_unpark(struct ctl_channel *ch)
{
	struct ch_park **pp = &ch->parked;
	uint64_t applied = 0;
	int work = 0;

	if (ch->parked && ch->q) {
		struct quorum_view v;

		quorum_describe(ch->q, &v);
		applied = v.last_applied;
	}
	while (*pp) {
		struct ch_park *k = *pp;
		struct ch_conn *c = conn_by_id(ch, k->conn);

		if (c && ch->q && applied < k->from && ch->ctl->now_ms < k->deadline_ms) {
			pp = &k->next;
			continue;
		}
		*pp = k->next;
		if (c && ch->q) {
			fetch_answer(ch, c, k->id, k->from);
			work++;
		}
		free(k);
	}
	return work;
}

static void serve_fetch(struct ch_conn *c, uint64_t id, uint64_t from)
{
	struct ctl_channel *ch = c->ch;
	struct quorum_view v;
	struct ch_park *k;

	quorum_describe(ch->q, &v);
	if (from <= v.last_applied) {
		fetch_answer(ch, c, id, from);
		return;
	}
	c->fetcher = 1;
	c->fetched = from - 1;
	/* an observer has one fetch out at a time: an earlier one still
	 * parked on this connection is answered now (with what there is),
	 * so a peer that sends FETCHes for the future without end holds one
	 * parked fetch, not one per frame */
	for (struct ch_park **pp = &ch->parked; *pp; pp = &(*pp)->next)
		if ((*pp)->conn == c->id) {
			struct ch_park *old = *pp;

			*pp = old->next;
			fetch_answer(ch, c, old->id, old->from);
			free(old);
			break;
		}
	if (!(k = calloc(1, sizeof(*k))))
		abort();
	*k = (struct ch_park){ ch->parked, c->id, id, from, ch->ctl->now_ms + CH_FETCH_WAIT_MS };
	ch->parked = k;
}

int ctl_channel_observers(const struct ctl_channel *ch, int32_t *ids, int64_t *log_end, int max)
{
	int n = 0;

	for (const struct ch_conn *c = ch ? ch->conns : NULL; c && n < max; c = c->next)
		if (c->fetcher && !c->closing) {
			ids[n] = c->peer;
			log_end[n++] = (int64_t)c->fetched;
		}
	return n;
}

static void serve_frame(struct ch_conn *c, int type, uint64_t id, const char *p, size_t len)
{
	struct ctl_channel *ch = c->ch;

	if (type == CH_FETCH && len >= 8 && ch->q && !ch->observer) {
		serve_fetch(c, id, le64_load(p));   /* not counted: an observer's long poll */
		return;
	}
	ch->served++;
	if (type == CH_PROPOSE) {
		struct ch_serving *sv;
		int rc;

		if (!ch->q || !quorum_is_leader(ch->q)) {
			answer_propose(c, id, -QUORUM_ENOTLEADER, 0);
			return;
		}
		if (!(sv = malloc(sizeof(*sv))))
			abort();
		*sv = (struct ch_serving){ ch, c->id, id };
		rc = quorum_propose(ch->q, p, len, served, sv);
		if (rc < 0) {
			free(sv);
			answer_propose(c, id, rc, 0);
		}
	} else if (type == CH_HEARTBEAT && len >= 12) {
		int fenced = 1, rc;
		char b[5];

		if (!ch->q || !quorum_is_leader(ch->q))
			rc = -QUORUM_ENOTLEADER;
		else if (!ch->serve_hb)
			rc = -EAGAIN;   /* this node's controller is not serving yet */
		else
			rc = ch->serve_hb(ch->ctl, (int32_t)le32_load(p), (int64_t)le64_load(p + 4),
					  len >= 22 ? (int16_t)(p[20] | p[21] << 8) : META_MV_1, &fenced);
		if (len >= 20 && ch->q && quorum_is_leader(ch->q))
			watch_follower(ch, c->peer, le64_load(p + 12));
		le32_store(b, (uint32_t)(rc < 0 ? -rc : rc));
		b[4] = (char)(fenced != 0);
		conn_send(c, CH_HEARTBEAT_RESP, id, b, sizeof(b), NULL, 0);
	} else if (type == CH_DESCRIBE) {
		void *view = NULL;
		size_t vlen = 0;
		int rc;
		char b[4];

		if (!ch->q || !quorum_is_leader(ch->q))
			rc = -QUORUM_ENOTLEADER;
		else if (!ch->serve_ds)
			rc = -EAGAIN;
		else
			rc = ch->serve_ds(ch->ctl, &view, &vlen);
		le32_store(b, (uint32_t)(rc < 0 ? -rc : 0));
		conn_send(c, CH_DESCRIBE_RESP, id, b, sizeof(b), rc < 0 ? NULL : view, rc < 0 ? 0 : vlen);
		free(view);
	} else if (type == CH_ELECT) {
		struct ch_serving *sv;
		int rc;

		if (!ch->q || !quorum_is_leader(ch->q)) {
			answer_elect(c, id, -QUORUM_ENOTLEADER, NULL, 0);
			return;
		}
		if (!ch->serve_el) {
			answer_elect(c, id, -EAGAIN, NULL, 0);
			return;
		}
		if (!(sv = malloc(sizeof(*sv))))
			abort();   /* the control thread's own bookkeeping */
		*sv = (struct ch_serving){ ch, c->id, id };
		rc = ch->serve_el(ch->ctl, p, len, sv);   /* answered through ctl_channel_elect_answer */
		if (rc < 0) {
			free(sv);
			answer_elect(c, id, rc, NULL, 0);
		}
	} else {
		conn_close(c);   /* not a request this version knows */
	}
}

/* ---- this node's requests --------------------------------------------------- */

static void req_free(struct ch_req *r)
{
	free(r->rec);
	free(r);
}

static void req_unlink(struct ctl_channel *ch, struct ch_req *r)
{
	struct ch_req **pp = &ch->reqs;

	while (*pp && *pp != r)
		pp = &(*pp)->next;
	if (*pp)
		*pp = r->next;
}

/* r is unlinked already. */
static void req_complete(struct ctl_channel *ch, struct ch_req *r, int err, const struct metalog_applied *a)
{
	(void)ch;
	if (r->type == CH_PROPOSE)
		r->done(r->cookie, err, a);
	else if (r->type == CH_DESCRIBE)
		r->ds_done(r->cookie, err < 0 ? err : -EIO, NULL, 0);
	else if (r->type == CH_ELECT)
		r->el_done(r->cookie, err < 0 ? err : -EIO, NULL, 0);
	else
		r->hb_done(r->cookie, err, 1);
	req_free(r);
}

static struct ch_req *req_by_id(struct ctl_channel *ch, uint64_t id)
{
	for (struct ch_req *r = ch->reqs; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

static const struct ch_outcome *outcome_of(const struct ctl_channel *ch, uint64_t index)
{
	const struct ch_outcome *o = &ch->ring[index % CH_RING];

	return o->index == index ? o : NULL;
}

/* The leader answered a proposal (or this node, leading now, proposed it). */
static void req_answered(struct ctl_channel *ch, struct ch_req *r, int err, uint64_t index)
{
	const struct ch_outcome *o;

	if (err == -QUORUM_ENOTLEADER || err == -ESHUTDOWN) {
		/* nothing was appended: again, on the next leader */
		r->state = RQ_QUEUED;
		r->not_before_ms = ch->ctl->now_ms + CH_RETRY_MS;
		return;
	}
	if (err < 0 || index == 0) {
		req_unlink(ch, r);
		req_complete(ch, r, err < 0 ? err : -EIO, NULL);
		return;
	}
	if ((o = outcome_of(ch, index))) {
		req_unlink(ch, r);
		req_complete(ch, r, o->rc, o->rc == 0 ? &o->a : NULL);
		return;
	}
	if (index <= ch->applied_max) {
		/* applied here so long ago that its outcome is forgotten, or
		 * through a snapshot */
		req_unlink(ch, r);
		req_complete(ch, r, -ESTALE, NULL);
		return;
	}
	r->state = RQ_WAIT;
	r->index = index;
}

/* ---- an observer's fetches ---------------------------------------------------- */

static void fetch_send(struct ctl_channel *ch)
{
	char b[8];

	ch->fetching = 1;
	ch->fetch_id = ++ch->next_req;
	ch->fetches++;
	le64_store(b, quorum_last_index(ch->q) + 1);
	conn_send(ch->out, CH_FETCH, ch->fetch_id, b, sizeof(b), NULL, 0);
}

/* A snapshot at `upto` was restored: this node's proposals applied at or
 * before it were passed over (their outcome is the snapshot's, unknown
 * here): -ESTALE for them now, and for answers naming such an index. */
static void passed_over(struct ctl_channel *ch, uint64_t upto)
{
	struct ch_req **pp = &ch->reqs;

	if (upto > ch->applied_max)
		ch->applied_max = upto;
	while (*pp) {
		struct ch_req *r = *pp;

		if (r->state == RQ_WAIT && r->index <= upto) {
			*pp = r->next;
			req_complete(ch, r, -ESTALE, NULL);
			continue;
		}
		pp = &r->next;
	}
}

/* A voter answered: apply the records (or the snapshot) in order. */
static void fetch_answered(struct ctl_channel *ch, const char *p, size_t len)
{
	uint64_t upto, hw;
	int32_t leader;

	ch->fetching = 0;
	if (len < CH_FETCH_HDR || le32_load(p) != 0) {
		conn_close(ch->out);
		return;
	}
	leader = (int32_t)le32_load(p + 4);
	upto = le64_load(p + 16);
	hw = le64_load(p + 24);
	if (p[32] == 1) {
		int rc = quorum_observe_restore(ch->q, upto, p + CH_FETCH_HDR, len - CH_FETCH_HDR);

		if (rc < 0) {
			slog(SLOG_WARN, "the metadata snapshot node %d sent (index %llu) does not read: %s",
				ch->out_peer, (unsigned long long)upto, strerror(-rc));
			conn_close(ch->out);
			return;
		}
		ch->snapshots_got++;
		passed_over(ch, upto);
	} else {
		size_t off = CH_FETCH_HDR + 4;
		uint32_t n = len >= off ? le32_load(p + CH_FETCH_HDR) : 0;

		for (uint32_t i = 0; i < n; i++) {
			uint64_t index;
			uint32_t rl;

			if (len - off < 12 || len - off - 12 < (rl = le32_load(p + off + 8))) {
				conn_close(ch->out);
				return;
			}
			index = le64_load(p + off);
			quorum_observe_apply(ch->q, index, p + off + 12, rl);
			off += 12 + rl;
			if (!ch->q || ch->closed)
				return;
		}
	}
	quorum_observe_advance(ch->q, upto, hw);
	quorum_observe_leader(ch->q, leader, le64_load(p + 8));
}

static void answer_frame(struct ctl_channel *ch, int type, uint64_t id, const char *p, size_t len)
{
	struct ch_req *r;

	if (type == CH_FETCH_RESP) {
		if (ch->observer && ch->fetching && id == ch->fetch_id)
			fetch_answered(ch, p, len);
		return;
	}
	r = req_by_id(ch, id);

	if (!r || r->state != RQ_SENT)
		return;   /* timed out meanwhile */
	if (type == CH_PROPOSE_RESP && len >= 12 && r->type == CH_PROPOSE) {
		req_answered(ch, r, -(int)le32_load(p), le64_load(p + 4));
	} else if (type == CH_HEARTBEAT_RESP && len >= 5 && r->type == CH_HEARTBEAT) {
		req_unlink(ch, r);
		r->hb_done(r->cookie, -(int)le32_load(p), p[4] != 0);
		req_free(r);
	} else if (type == CH_DESCRIBE_RESP && len >= 4 && r->type == CH_DESCRIBE) {
		int err = -(int)le32_load(p);

		req_unlink(ch, r);
		r->ds_done(r->cookie, err, err ? NULL : p + 4, err ? 0 : len - 4);
		req_free(r);
	} else if (type == CH_ELECT_RESP && len >= 4 && r->type == CH_ELECT) {
		int err = -(int)le32_load(p);

		if (err == -QUORUM_ENOTLEADER || err == -EAGAIN) {
			/* nothing was done: again, on the next leader (or this
			 * one once it serves), until its deadline */
			r->state = RQ_QUEUED;
			r->not_before_ms = ch->ctl->now_ms + CH_RETRY_MS;
			return;
		}
		req_unlink(ch, r);
		r->el_done(r->cookie, err, err ? NULL : p + 4, err ? 0 : len - 4);
		req_free(r);
	}
}

static void req_send(struct ctl_channel *ch, struct ch_req *r)
{
	r->state = RQ_SENT;
	r->conn = ch->out->id;
	if (r->type == CH_PROPOSE) {
		ch->forwarded++;
		conn_send(ch->out, CH_PROPOSE, r->id, r->rec, r->len, NULL, 0);
	} else if (r->type == CH_DESCRIBE) {
		conn_send(ch->out, CH_DESCRIBE, r->id, NULL, 0, NULL, 0);
	} else if (r->type == CH_ELECT) {
		if (!r->sent)
			ch->elect_forwarded++;
		r->sent = 1;
		conn_send(ch->out, CH_ELECT, r->id, r->rec, r->len, NULL, 0);
	} else {
		char b[22];
		int16_t mv = meta_features_local_max();

		le32_store(b, (uint32_t)r->hb_id);
		le64_store(b + 4, (uint64_t)r->hb_epoch);
		le64_store(b + 12, quorum_last_index(ch->q));
		b[20] = (char)(mv & 0xff);
		b[21] = (char)((uint16_t)mv >> 8);
		conn_send(ch->out, CH_HEARTBEAT, r->id, b, sizeof(b), NULL, 0);
	}
}

struct ch_local {
	struct ctl_channel *ch;
	uint64_t id;
};

static void local_done(void *cookie, uint64_t index, int err)
{
	struct ch_local *l = cookie;
	struct ch_req *r = req_by_id(l->ch, l->id);

	if (r && r->state == RQ_SENT)
		req_answered(l->ch, r, err, index);
	free(l);
}

/* This node leads now: propose what waited for a leader here. */
static void req_propose_here(struct ctl_channel *ch, struct ch_req *r)
{
	struct ch_local *l = malloc(sizeof(*l));
	int rc;

	if (!l)
		abort();
	*l = (struct ch_local){ ch, r->id };
	r->state = RQ_SENT;
	r->conn = 0;
	rc = quorum_propose(ch->q, r->rec, r->len, local_done, l);
	if (rc < 0) {
		free(l);
		req_answered(ch, r, rc, 0);
	}
}

static struct ch_req *req_new(struct ctl_channel *ch, int type)
{
	struct ch_req *r = calloc(1, sizeof(*r)), **pp = &ch->reqs;

	if (!r)
		abort();
	r->id = ++ch->next_req;
	r->type = type;
	while (*pp)
		pp = &(*pp)->next;   /* in order: oldest first */
	*pp = r;
	return r;
}

int ctl_channel_propose(struct ctl_channel *ch, const void *rec, size_t len, ctl_quorum_done_fn done,
			void *cookie)
{
	struct ch_req *r;

	if (ch->closed)
		return -ESHUTDOWN;
	r = req_new(ch, CH_PROPOSE);
	if (!(r->rec = malloc(len ? len : 1)))
		abort();
	memcpy(r->rec, rec, len);
	r->len = len;
	r->done = done;
	r->cookie = cookie;
	r->state = RQ_QUEUED;
	r->deadline_ms = ch->ctl->now_ms + CH_QUEUE_MS;
	if (ch->out)
		req_send(ch, r);
	return 0;
}

int ctl_channel_heartbeat(struct ctl_channel *ch, int32_t id, int64_t epoch, ctl_channel_hb_fn done, void *cookie)
{
	struct ch_req *r;

	if (ch->closed)
		return -ESHUTDOWN;
	if (!ch->out)
		return -ENOTCONN;
	r = req_new(ch, CH_HEARTBEAT);
	r->hb_id = id;
	r->hb_epoch = epoch;
	r->hb_done = done;
	r->cookie = cookie;
	r->deadline_ms = ch->ctl->now_ms + CH_HB_MS;
	req_send(ch, r);
	return 0;
}

int ctl_channel_describe(struct ctl_channel *ch, ctl_channel_describe_fn done, void *cookie)
{
	struct ch_req *r;

	if (ch->closed)
		return -ESHUTDOWN;
	if (!ch->out)
		return -ENOTCONN;
	r = req_new(ch, CH_DESCRIBE);
	r->ds_done = done;
	r->cookie = cookie;
	r->deadline_ms = ch->ctl->now_ms + CH_HB_MS;
	req_send(ch, r);
	return 0;
}

void ctl_channel_serve_describe(struct ctl_channel *ch, int (*fn)(struct ctl *ctl, void **buf, size_t *len))
{
	ch->serve_ds = fn;
}

int ctl_channel_elect(struct ctl_channel *ch, const void *req, size_t len, int32_t timeout_ms,
		      ctl_channel_elect_fn done, void *cookie)
{
	struct ch_req *r;

	if (ch->closed || !ch->q)
		return -ESHUTDOWN;
	r = req_new(ch, CH_ELECT);
	if (!(r->rec = malloc(len ? len : 1)))
		abort();   /* the control thread's own bookkeeping */
	memcpy(r->rec, req, len);
	r->len = len;
	r->el_done = done;
	r->cookie = cookie;
	r->state = RQ_QUEUED;
	r->deadline_ms = ch->ctl->now_ms + (timeout_ms <= 0 ? CH_ELECT_MS
					    : timeout_ms < CH_ELECT_MAX_MS ? timeout_ms : CH_ELECT_MAX_MS);
	if (ch->out && !quorum_is_leader(ch->q))
		req_send(ch, r);
	return 0;
}

void ctl_channel_serve_elect(struct ctl_channel *ch,
			     int (*fn)(struct ctl *ctl, const void *req, size_t len, void *token))
{
	ch->serve_el = fn;
}

void ctl_channel_serve_heartbeats(struct ctl_channel *ch,
				  int (*fn)(struct ctl *ctl, int32_t id, int64_t epoch, int16_t mv_max, int *fenced))
{
	ch->serve_hb = fn;
}

void ctl_channel_applied(struct ctl_channel *ch, uint64_t index, int rc, const struct metalog_applied *a)
{
	struct ch_outcome *o = &ch->ring[index % CH_RING];
	struct ch_req **pp = &ch->reqs;

	o->index = index;
	o->rc = rc;
	if (a)
		o->a = *a;
	else
		memset(&o->a, 0, sizeof(o->a));
	if (index > ch->applied_max)
		ch->applied_max = index;
	while (*pp) {
		struct ch_req *r = *pp;

		if (r->state == RQ_WAIT && r->index <= index) {
			*pp = r->next;
			/* below index: passed over (a snapshot restored) */
			req_complete(ch, r, r->index == index ? rc : -ESTALE, r->index == index && rc == 0 ? a : NULL);
			continue;
		}
		pp = &r->next;
	}
}

/* ---- the connection to the leader ------------------------------------------ */

static void out_connected(void *arg, struct uv_stream_s *s, int status)
{
	struct ctl_channel *ch = arg;
	int32_t leader;

	ch->connecting = 0;
	if (status < 0 || !s) {
		ch->retry_at_ms = ch->ctl->now_ms + CH_RETRY_MS;
		if (ch->observer && ch->q && !ch->closed) {
			/* that voter is down: the next one, and its leader forgotten */
			ch->probe++;
			if (quorum_leader(ch->q) == ch->connect_peer)
				quorum_observe_leader(ch->q, -1, 0);
		}
		return;
	}
	leader = ch->q && !ch->closed ? quorum_leader(ch->q) : -1;
	if (ch->closed || (leader != ch->connect_peer && !(ch->observer && leader < 0)) || ch->out) {
		uv_close((uv_handle_t *)s, stream_freed);
		return;
	}
	ch->out = conn_new(ch, s, ch->connect_peer);
	ch->out_peer = ch->connect_peer;
}

static const char *address_of(const struct ctl_channel *ch, int32_t node)
{
	for (int i = 0; i < ch->nvoters; i++)
		if (ch->voters[i].id == node)
			return ch->voters[i].address;
	return NULL;
}

int ctl_channel_tick(struct ctl_channel *ch)
{
	int64_t now = ch->ctl->now_ms;
	int32_t leader;
	int am, work = 0;
	struct ch_req **pp;

	if (!ch->q || ch->closed)
		return 0;
	leader = quorum_leader(ch->q);
	am = quorum_is_leader(ch->q);
	for (int i = 0; !am && i < ch->nvoters; i++) {
		/* a later leadership of this node starts its watch afresh */
		ch->peers[i].match = 0;
		ch->peers[i].below = 0;
	}
	if (ch->out && (am || (leader != ch->out_peer && !(ch->observer && leader < 0)))) {
		/* the leader moved: what was sent there has no answer (an
		 * observer that knows no leader stays with the voter it has) */
		conn_close(ch->out);
		work++;
	}
	if (ch->observer && leader < 0 && ch->nvoters)
		leader = ch->voters[ch->probe % ch->nvoters].id;   /* ask a voter which one leads */
	if (!am && leader >= 0 && !ch->out && !ch->connecting && now >= ch->retry_at_ms) {
		const char *addr = address_of(ch, leader);

		if (addr && quorum_channel_connect(ch->q, addr, out_connected, ch) == 0) {
			ch->connecting = 1;
			ch->connect_peer = leader;
			work++;
		}
	}
	if (ch->observer && ch->out && !ch->fetching) {
		fetch_send(ch);
		work++;
	}
	if (quorum_last_applied(ch->q) > ch->applied_max) {
		/* a voter's InstallSnapshot: libraft restored the leader's
		 * snapshot (ops->restore) and moved its applied index past the
		 * records it holds, none of which went through
		 * ctl_channel_applied. A proposal of this node's answered at
		 * such an index would otherwise wait for the next record
		 * applied here, which an idle cluster may not write: a node
		 * starting up waited forever on its registration. (Raft's own
		 * entries move the index too: what waits at or below it was
		 * applied, or passed over.) */
		passed_over(ch, quorum_last_applied(ch->q));
		work++;
	}
	if (ch->parked)
		work += fetch_unpark(ch);
	pp = &ch->reqs;
	while (*pp) {
		struct ch_req *r = *pp;

		if ((r->state == RQ_QUEUED || (r->type != CH_PROPOSE && r->state == RQ_SENT)) &&
		    now >= r->deadline_ms) {
			*pp = r->next;
			req_complete(ch, r, -ETIMEDOUT, NULL);
			work++;
			continue;
		}
		if (r->state == RQ_QUEUED && r->type == CH_ELECT && am) {
			/* this node leads now: its own elections (ctl_elect.c) */
			*pp = r->next;
			req_complete(ch, r, -QUORUM_ENOTLEADER, NULL);
			work++;
			continue;
		}
		if (r->state == RQ_QUEUED && now >= r->not_before_ms) {
			if (am) {
				req_propose_here(ch, r);
				work++;
			} else if (ch->out) {
				req_send(ch, r);
				work++;
			}
		}
		pp = &r->next;
	}
	return work;
}

/* ---- life ------------------------------------------------------------------ */

int ctl_channel_create(struct ctl *ctl, int32_t self, const struct ctl_channel_voter *v, int n,
		       struct ctl_channel **out)
{
	struct ctl_channel *ch = calloc(1, sizeof(*ch));

	if (!ch || !(ch->voters = calloc((size_t)n, sizeof(*v))) || !(ch->peers = calloc((size_t)n, sizeof(*ch->peers)))) {
		if (ch)
			free(ch->voters);
		free(ch);
		return -ENOMEM;
	}
	memcpy(ch->voters, v, (size_t)n * sizeof(*v));
	ch->observer = 1;
	for (int i = 0; i < n; i++) {
		ch->peers[i].node = v[i].id;
		if (v[i].id == self)
			ch->observer = 0;
	}
	ch->nvoters = n;
	ch->keep_max = CH_KEEP;
	ch->ctl = ctl;
	ch->self = self;
	*out = ch;
	return 0;
}

void ctl_channel_bind(struct ctl_channel *ch, struct quorum *q)
{
	ch->q = q;
}

void ctl_channel_stats(const struct ctl_channel *ch, struct ctl_channel_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!ch)
		return;
	st->forwarded = ch->forwarded;
	st->served = ch->served;
	st->lost = ch->lost;
	st->elect_forwarded = ch->elect_forwarded;
	st->stuck_transfers = ch->stuck_transfers;
	st->paused = ch->paused;
	st->connected = ch->out != NULL;
	st->fetches = ch->fetches;
	st->snapshots_sent = ch->snapshots_sent;
	st->snapshots_got = ch->snapshots_got;
}

void ctl_channel_close(struct ctl_channel *ch)
{
	if (ch->closed)
		return;
	ch->closed = 1;
	for (struct ch_conn *c = ch->conns; c; c = c->next)
		conn_close(c);
	while (ch->parked) {
		struct ch_park *k = ch->parked;

		ch->parked = k->next;
		free(k);
	}
	while (ch->reqs) {
		struct ch_req *r = ch->reqs;

		ch->reqs = r->next;
		req_complete(ch, r, r->state == RQ_SENT ? -QUORUM_ELOST : -ESHUTDOWN, NULL);
	}
	ch->q = NULL;
}

void ctl_channel_free(struct ctl_channel *ch)
{
	if (!ch)
		return;
	while (ch->kept_len)
		kept_drop_oldest(ch);
	free(ch->voters);
	free(ch->peers);
	free(ch);
}
