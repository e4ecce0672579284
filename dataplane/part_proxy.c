/* dataplane/part_proxy.c — the typed operations on a partition's owner
 * (see part_proxy.h): each request is one ring message to the owner, which
 * runs the owner-side function below and answers with a trampoline that
 * calls the sender's typed completion on the sender's thread.
 *
 * Message layouts (fixed-size {fn, p[4], v[4]}): a request carries the
 * sender's index, its completion and cookie; function pointers and cookies
 * travel as pointers or as intptr_t in v[] when p[] is full. A request on
 * one partition (all but open) names it the same way everywhere:
 *   v[0]  bits 0-15 the sender's thread index, 16-31 a 16-bit argument
 *         (txn_begin's epoch), 32-63 the partition index;
 *   v[2], v[3]  the topic id (16 bytes);
 *   p[0]  NULL, or a shard's handle (the *_at requests), used as it is
 *         (a read, only ever by value, carries its end there instead).
 * The owner resolves it with owner_find: the handle, else its own
 * part_table; NULL means the partition is not (or no longer) here.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dataplane/broker.h"
#include "dataplane/part.h"
#include "dataplane/part_proxy.h"
#include "dataplane/part_role.h"
#include "dataplane/part_table.h"
#include "dataplane/producer.h"
#include "dataplane/shard_core.h"
#include "storage/batch.h"
#include "storage/batch_format.h"
#include "storage/controls.h"
#include "storage/slog.h"

static void shard_proxy_send(void *ctx, int to, const struct shard_msg *m)
{
	shard_send(ctx, to, m);   /* parks when the ring is full */
}

void part_proxy_init_shard(struct part_proxy *px, struct shard *sh)
{
	px->from = sh->id;
	px->send = shard_proxy_send;
	px->ctx = sh;
}

static void *fn_ptr(void (*fn)(void))
{
	return (void *)fn;
}

#define FN(f) fn_ptr((void (*)(void))(f))

_Static_assert(sizeof(((struct shard_msg *)0)->v[2]) * 2 == sizeof(((struct part_addr *)0)->topic_id),
	       "a topic id fills v[2] and v[3]");
_Static_assert(BROKER_MAX_SHARDS + 1 <= 0xffff, "a sender's thread index fits v[0]'s 16 bits");

/* A request on partition a from thread `from` (and a 16-bit argument). */
static void msg_addr(struct shard_msg *m, int from, int16_t aux, struct part_addr a)
{
	m->v[0] = (int64_t)(((uint64_t)(uint32_t)a.index << 32) | ((uint64_t)(uint16_t)aux << 16) |
			    (uint64_t)(uint16_t)from);
	memcpy(&m->v[2], a.topic_id, sizeof(a.topic_id));
}

static int msg_from(const struct shard_msg *m)
{
	return (int)((uint64_t)m->v[0] & 0xffff);
}

static int16_t msg_aux(const struct shard_msg *m)
{
	return (int16_t)(((uint64_t)m->v[0] >> 16) & 0xffff);
}

/* On the owner: the partition a request names, or NULL (deleted, moved
 * away, never opened here). The table lookup is O(1) and allocates
 * nothing. */
static struct part *owner_lookup(struct shard *sh, const struct shard_msg *m)
{
	uint8_t id[16];

	memcpy(id, &m->v[2], sizeof(id));
	return part_table_find(&sh->part_tab, id, (int32_t)((uint64_t)m->v[0] >> 32));
}

static struct part *owner_find(struct shard *sh, const struct shard_msg *m)
{
	if (m->p[0])
		return m->p[0];   /* a shard's handle: retired structs stay until exit */
	return owner_lookup(sh, m);
}

/* ---- open ------------------------------------------------------------- */

/* On the sender: p[0] done, p[1] cookie, p[3] the report; v[0] the
 * result. */
static void open_answered(void *self, struct shard_msg *m)
{
	part_open_done done = (part_open_done)m->p[0];

	done(self, m->p[1], (int)m->v[0], m->p[3]);
}

/* On the owner: p[0] dir, p[1] topic, p[2] md_partition, p[3] report;
 * v[0] sender, v[1] done, v[2] cookie, v[3] the part_pub to publish in. */
static void owner_open(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	const char *dir = m->p[0];
	struct md_topic *t = m->p[1];
	struct md_partition *mp = m->p[2];
	struct part_open_report *rep = m->p[3];
	struct part *p = NULL;
	struct stat st;
	int rc;

	memset(rep, 0, sizeof(*rep));
	rep->made = stat(dir, &st) < 0 && errno == ENOENT;
	rc = part_open(sh, dir, t->name, mp->index, &t->cfg, &p);
	if (rc == 0) {
		memcpy(p->topic_id, t->id, sizeof(p->topic_id));
		rc = part_table_add(&sh->part_tab, p);
		if (rc < 0) {
			part_close(p);
			p = NULL;
		}
	}
	if (rc == -EUCLEAN && sh->st.problem[0])
		slog(SLOG_WARN, "partition %s-%d cannot be opened: %s", t->name, /* style: allow open failure */
			mp->index, sh->st.problem);
	if (rc == 0) {
		const struct plog_recovery *r = &p->pl->recovery;

		/* nothing here writes the sender's memory but the report it
		 * lent: the shards find the partition through the handle this
		 * shard publishes in pub (md_part_owner), the control thread
		 * only learns that it is open */
		p->pub = (struct part_pub *)(intptr_t)m->v[3];
		if (p->pub) {
			/* what the metadata says until a role says more */
			__atomic_store_n(&p->pub->isr_size, (int64_t)mp->nisr, __ATOMIC_RELAXED);
			__atomic_store_n(&p->pub->replicas, (int64_t)mp->nreplicas, __ATOMIC_RELAXED);
		}
		/* the metadata's epoch, unless the log already holds a later one */
		plog_set_leader_epoch(p->pl, mp->leader_epoch);
		rep->leader_epoch = p->pl->leader_epoch;
		part_publish(p);
		if (p->pub)
			__atomic_store_n(&p->pub->owner_part, p, __ATOMIC_RELEASE);
		p->next = sh->parts;
		sh->parts = p;
		rep->segments = r->segments;
		rep->segments_trusted = r->segments_trusted;
		rep->bytes_scanned = r->bytes_scanned;
		rep->bytes_trusted = r->bytes_trusted;
		rep->damaged = r->damaged;
		rep->noteworthy = r->truncated_reason || r->damaged || r->epochs_rebuilt;
		if (rep->noteworthy)
			plog_recovery_describe(p->pl, rep->line, sizeof(rep->line));
	}
	{
		struct shard_msg r = { .fn = open_answered,
				       .p = { (void *)(intptr_t)m->v[1], (void *)(intptr_t)m->v[2], NULL, rep },
				       .v = { rc } };

		shard_send(sh, (int)m->v[0], &r);
	}
}

void part_proxy_open(struct part_proxy *px, int owner, const char *dir, struct md_topic *t,
		     struct md_partition *mp, struct part_pub *pub, struct part_open_report *rep,
		     part_open_done done, void *cookie)
{
	struct shard_msg m = { .fn = owner_open,
			       .p = { (void *)dir, t, mp, rep },
			       .v = { px->from, (intptr_t)FN(done), (intptr_t)cookie, (intptr_t)pub } };

	px->send(px->ctx, owner, &m);
}

/* ---- close, config ---------------------------------------------------- */

/* On the sender: p[0] done, p[1] cookie; v[0] the result. */
static void done_answered(void *self, struct shard_msg *m)
{
	part_done done = (part_done)m->p[0];

	done(self, m->p[1], (int)m->v[0]);
}

/* On the owner: answer a request whose p[1] is done, p[2] the cookie. */
static void owner_answer(struct shard *sh, struct shard_msg *m, int err)
{
	struct shard_msg r = { .fn = done_answered, .p = { m->p[1], m->p[2] }, .v = { err } };

	shard_send(sh, msg_from(m), &r);   /* parks when the ring is full */
}

/* Out of the owner's list and table (messages by value find it no more).
 * A retired struct stays published in its pub: shards holding an older
 * snapshot still route to it and see `deleted`, as before. */
static void owner_unlink(struct shard *sh, struct part *p)
{
	for (struct part **pp = &sh->parts; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			sh->roles_changed = 1;   /* the fetchers' lists name it no more */
			break;
		}
	part_table_remove(&sh->part_tab, p);
}

static void owner_retire(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct part *p = owner_find(sh, m);

	if (!p || p->deleted) {
		owner_answer(sh, m, -ENOENT);
		return;
	}
	owner_unlink(sh, p);
	part_retire(p);
	p->next = sh->retired_parts;   /* freed when the shard exits */
	sh->retired_parts = p;
	owner_answer(sh, m, 0);
}

static void owner_close(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct part *p = owner_find(sh, m);

	if (!p || p->deleted) {
		owner_answer(sh, m, -ENOENT);
		return;
	}
	owner_unlink(sh, p);
	/* never published (a topic that did not get created), but leave no
	 * handle to freed memory behind in its pub */
	if (p->pub)
		__atomic_store_n(&p->pub->owner_part, NULL, __ATOMIC_RELEASE);
	part_close(p);
	owner_answer(sh, m, 0);
}

/* On the owner: p[3] the config. */
static void owner_set_config(void *self, struct shard_msg *m)
{
	struct part *p = owner_find(self, m);
	const struct plog_config *cfg = m->p[3];

	if (!p || p->deleted || !p->pl) {
		owner_answer(self, m, -ENOENT);
		return;
	}

	if (p && p->pl) {
		/* segment size applies from the next segment on */
		p->pl->cfg = *cfg;
		if (p->pl->cfg.initial_extent > p->pl->cfg.segment_bytes)
			p->pl->cfg.initial_extent = p->pl->cfg.segment_bytes;
	}
	owner_answer(self, m, 0);
}

/* p[1] done, p[2] cookie, p[3] the argument; v[1] a second one. */
static void send_part_op(struct part_proxy *px, int owner, void (*fn)(void *, struct shard_msg *), struct part_addr a,
			 void *arg, int64_t arg2, part_done done, void *cookie)
{
	struct shard_msg m = { .fn = fn, .p = { NULL, FN(done), cookie, arg }, .v = { 0, arg2 } };

	msg_addr(&m, px->from, 0, a);
	px->send(px->ctx, owner, &m);
}

/* On the owner: v[1] the epoch. */
static void owner_set_leader_epoch(void *self, struct shard_msg *m)
{
	struct part *p = owner_find(self, m);

	owner_answer(self, m, !p || p->deleted || !p->pl ? -ENOENT : plog_set_leader_epoch(p->pl, (int32_t)m->v[1]));
}

void part_proxy_set_leader_epoch(struct part_proxy *px, int owner, struct part_addr a, int32_t epoch,
				 part_done done, void *cookie)
{
	send_part_op(px, owner, owner_set_leader_epoch, a, NULL, epoch, done, cookie);
}

/* On the owner: p[3] the role. */
static void owner_set_role(void *self, struct shard_msg *m)
{
	struct part *p = owner_find(self, m);

	owner_answer(self, m, !p || p->deleted ? -ENOENT : part_role_set(p, m->p[3]));
}

void part_proxy_set_role(struct part_proxy *px, int owner, struct part_addr a, const struct part_role_msg *m,
			 part_done done, void *cookie)
{
	send_part_op(px, owner, owner_set_role, a, (void *)m, 0, done, cookie);
}

void part_proxy_retire(struct part_proxy *px, int owner, struct part_addr a, part_done done, void *cookie)
{
	send_part_op(px, owner, owner_retire, a, NULL, 0, done, cookie);
}

void part_proxy_close(struct part_proxy *px, int owner, struct part_addr a, part_done done, void *cookie)
{
	send_part_op(px, owner, owner_close, a, NULL, 0, done, cookie);
}

void part_proxy_set_config(struct part_proxy *px, int owner, struct part_addr a, const struct plog_config *cfg,
			   part_done done, void *cookie)
{
	send_part_op(px, owner, owner_set_config, a, (void *)cfg, 0, done, cookie);
}

/* ---- internal records ------------------------------------------------- */

/* On the sender (from the owner's durability or at once on failure):
 * p[0] the request, v[0] the base offset, v[1] the result. */
static void append_answered(void *self, struct shard_msg *m)
{
	struct part_append_req *req = m->p[0];

	req->done(self, req->cookie, m->v[0], (int)m->v[1]);
}

/* On the owner: p[1] the request. */
static void owner_append(void *self, struct shard_msg *m)
{
	struct part *p = owner_find(self, m);
	struct part_append_req *req = m->p[1];

	if (!p) {
		struct shard_msg r = { .fn = append_answered, .p = { req }, .v = { -1, -ENOENT } };

		shard_send(self, msg_from(m), &r);
		return;
	}
	part_append_internal(p, req->batch, req->len, req->min_insync, msg_from(m), req, append_answered);
}

void part_proxy_append(struct part_proxy *px, int owner, struct part_addr a, struct part_append_req *req)
{
	struct shard_msg m = { .fn = owner_append, .p = { NULL, req } };

	msg_addr(&m, px->from, 0, a);
	px->send(px->ctx, owner, &m);
}

/* ---- transactions ----------------------------------------------------- */

/* On the owner: p[1] done, p[2] cookie, p[3] since_ns; v[1] pid, the
 * 16-bit argument the epoch. */
static void owner_txn_begin(void *self, struct shard_msg *m)
{
	struct part *p = owner_find(self, m);

	owner_answer(self, m, !p ? -ENOENT : part_begin_txn(p, m->v[1], msg_aux(m), (uint64_t)(uintptr_t)m->p[3]));
}

static void send_txn_begin(struct part_proxy *px, int owner, struct part *p, struct part_addr a, int64_t pid,
			   int16_t epoch, uint64_t since_ns, part_done done, void *cookie)
{
	struct shard_msg m = { .fn = owner_txn_begin, .p = { p, FN(done), cookie, (void *)(uintptr_t)since_ns },
			       .v = { 0, pid } };

	_Static_assert(sizeof(void *) >= sizeof(uint64_t), "since_ns travels in a pointer slot");
	msg_addr(&m, px->from, epoch, a);
	px->send(px->ctx, owner, &m);
}

void part_proxy_txn_begin(struct part_proxy *px, int owner, struct part_addr a, int64_t pid, int16_t epoch,
			  uint64_t since_ns, part_done done, void *cookie)
{
	send_txn_begin(px, owner, NULL, a, pid, epoch, since_ns, done, cookie);
}

void part_proxy_txn_begin_at(struct part_proxy *px, int owner, struct part *p, int64_t pid, int16_t epoch,
			     uint64_t since_ns, part_done done, void *cookie)
{
	send_txn_begin(px, owner, p, (struct part_addr){ .index = 0 }, pid, epoch, since_ns, done, cookie);
}

/* On the sender: p[0] the request; v[0] the marker's offset, v[1] the
 * result. */
static void marker_answered(void *self, struct shard_msg *m)
{
	struct part_marker_req *req = m->p[0];

	req->done(self, req->cookie, m->v[0], (int)m->v[1]);
}

/* On the owner: p[1] the request. Nothing to mark where the partition
 * is not (any more): answered as a deleted one is. */
static void owner_txn_marker(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct part *p = owner_find(sh, m);
	struct part_marker_req *req = m->p[1];
	int to = msg_from(m);
	int64_t off = -1;
	int rc = !p ? -ENOENT
		 : p->role && !p->role->leading ? -EREMOTE
		 : part_append_marker(p, req->pid, req->epoch, req->commit, 0, &off);

	if (rc == 0) {
		struct ack_wait w = { .need = p->pl->next_offset, .base_offset = off, .from = (int16_t)to,
				      .durable_only = SLUICE_CONTROL_OFF(ack_before_isr),
				      .ctx = (struct kafka_ctx *)req, .notify = marker_answered };

		if (part_wait_ack(p, &w) == 0) {
			part_progress(p);
			return;
		}
		rc = -ENOBUFS;
	}
	{
		struct shard_msg r = { .fn = marker_answered, .p = { req }, .v = { -1, rc == -ENOENT ? 0 : rc } };

		shard_send(sh, to, &r);
	}
}

static void send_txn_marker(struct part_proxy *px, int owner, struct part *p, struct part_addr a,
			    struct part_marker_req *req)
{
	struct shard_msg m = { .fn = owner_txn_marker, .p = { p, req } };

	msg_addr(&m, px->from, 0, a);
	px->send(px->ctx, owner, &m);
}

void part_proxy_txn_marker(struct part_proxy *px, int owner, struct part_addr a, struct part_marker_req *req)
{
	send_txn_marker(px, owner, NULL, a, req);
}

void part_proxy_txn_marker_at(struct part_proxy *px, int owner, struct part *p, struct part_marker_req *req)
{
	send_txn_marker(px, owner, p, (struct part_addr){ .index = 0 }, req);
}

/* ---- lag -------------------------------------------------------------- */

/* On the sender: p[0] the request. */
static void lag_answered(void *self, struct shard_msg *m)
{
	struct part_lag_req *q = m->p[0];

	q->done(self, q->cookie, q->hw, q->ts);
}

/* @thread owner */
static void lag_reply(struct part_lag_req *q)
{
	struct shard_msg r = { .fn = lag_answered, .p = { q } };

	shard_send(q->sh, q->from, &r);
}

/* The first batch at the committed offset is in: its timestamp is the
 * oldest unconsumed record's (the batch's first record's for CreateTime,
 * the broker's for LogAppendTime). Nothing read (-EAGAIN: no read buffer
 * was free for a disk read; an error): no age this time. @thread owner */
static void lag_read_done(void *cookie, struct part_read_req *rq, int err)
{
	struct part_lag_req *q = cookie;

	if (!err && rq->rd.bytes >= BATCH_HEADER_SIZE)
		q->ts = (batch_attributes(rq->rd.data) & BATCH_ATTR_LOG_APPEND_TIME) ? batch_max_timestamp(rq->rd.data)
										      : batch_base_timestamp(rq->rd.data);
	part_read_release(rq);   /* and start the reads waiting for a read buffer */
	lag_reply(q);
}

/* On the owner: the partition's high watermark, and the timestamp of the
 * first record not consumed (part_read of one batch, from the tail or
 * asynchronously from disk). p[1] the request. */
static void owner_lag(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct part *p = owner_find(sh, m);
	struct part_lag_req *q = m->p[1];

	q->sh = sh;
	q->from = msg_from(m);
	q->hw = -1;
	q->ts = -1;
	if (!p || p->deleted || !p->pl) {
		lag_reply(q);
		return;
	}
	q->hw = p->pl->high_watermark;
	q->rq.offset = q->committed < p->pl->log_start ? p->pl->log_start : q->committed;
	if (q->rq.offset >= q->hw) {
		lag_reply(q);   /* caught up */
		return;
	}
	q->rq.max_bytes = 0;        /* one batch: the first is always whole */
	q->rq.isolation = 0;        /* up to the high watermark */
	part_read(p, &q->rq, lag_read_done, q);
}

void part_proxy_lag(struct part_proxy *px, int owner, struct part_addr a, struct part_lag_req *req)
{
	struct shard_msg m = { .fn = owner_lag, .p = { NULL, req } };

	msg_addr(&m, px->from, 0, a);
	px->send(px->ctx, owner, &m);
}

/* ---- a page of records ------------------------------------------------- */

/* On the sender: p[0] the request. */
static void peek_answered(void *self, struct shard_msg *m)
{
	struct part_peek_req *q = m->p[0];

	q->done(self, q->cookie);
}

/* @thread owner */
static void peek_reply(struct part_peek_req *q)
{
	struct shard_msg r = { .fn = peek_answered, .p = { q } };

	shard_send(q->sh, q->sender, &r);
}

/* The read is in: the whole batches that fit go into the sender's buffer.
 * @thread owner */
static void peek_read_done(void *cookie, struct part_read_req *rq, int err)
{
	struct part_peek_req *q = cookie;
	uint32_t at = 0;

	if (err) {
		q->err = err;
	} else {
		while (at + BATCH_LOG_OVERHEAD <= rq->rd.bytes && batch_size(rq->rd.data + at) <= rq->rd.bytes - at &&
		       batch_size(rq->rd.data + at) <= q->cap - at)
			at += batch_size(rq->rd.data + at);
		if (!at && rq->rd.bytes >= BATCH_LOG_OVERHEAD)
			q->err = -EFBIG;    /* its first batch alone is larger than the page */
		memcpy(q->buf, rq->rd.data, at);
		q->len = at;
	}
	part_read_release(rq);   /* and start the reads waiting for a read buffer */
	peek_reply(q);
}

static void peek_read(struct part_peek_req *q)
{
	struct part *p = q->p;

	if (p->deleted || !p->pl) {
		q->err = -ENOENT;
		peek_reply(q);
		return;
	}
	q->log_start = p->pl->log_start;
	q->hw = p->pl->high_watermark;
	if (q->back > 0)
		q->from = q->hw - q->back;   /* the newest: once, before any read */
	q->back = 0;
	q->from = q->from < q->log_start ? q->log_start : q->from;
	if (q->from >= q->hw) {
		peek_reply(q);           /* nothing at or after it yet */
		return;
	}
	q->rq.offset = q->from;
	q->rq.max_bytes = q->cap;
	q->rq.isolation = 0;         /* up to the high watermark */
	part_read(p, &q->rq, peek_read_done, q);
}

/* The timestamp walk ended: read from what it found. @thread owner */
static void peek_time_end(struct part_peek_req *q)
{
	uint8_t *buf = q->tq.buf;

	if (q->tq.err == 0)
		q->from = q->tq.offset;
	else if (q->tq.err == -ENOENT)
		q->from = q->p->pl ? q->p->pl->high_watermark : 0;   /* none so late */
	else
		q->err = q->tq.err;
	q->tq.buf = NULL;
	part_rbuf_put(q->sh, buf);
	if (q->err)
		peek_reply(q);
	else
		peek_read(q);
}

static void peek_time_done(struct plog_time *tq)
{
	peek_time_end(tq->arg);
}

static void peek_time_start(struct shard *sh, struct part_peek_req *q);

static void peek_buf_ready(struct shard *sh, struct rbuf_wait *w)
{
	peek_time_start(sh, (struct part_peek_req *)((char *)w - offsetof(struct part_peek_req, wait)));
}

/* By time: a walk of reads into one of the owner's read buffers (none
 * free: wait for the next, as ListOffsets does). @thread owner */
static void peek_time_start(struct shard *sh, struct part_peek_req *q)
{
	uint8_t *buf;

	if (q->p->deleted || !q->p->pl) {
		q->err = -ENOENT;
		peek_reply(q);
		return;
	}
	if (!(buf = part_rbuf_take(sh))) {
		q->wait.ready = peek_buf_ready;
		part_rbuf_wait(sh, &q->wait);
		return;
	}
	q->tq = (struct plog_time){ .ts = q->ts, .buf = buf, .buf_cap = SHARD_RBUF_SIZE, .done = peek_time_done,
				    .arg = q };
	if (plog_find_time(q->p->pl, &q->tq) == 0)
		return;                  /* a disk read in flight */
	peek_time_end(q);
}

/* On the owner: p[1] the request. */
static void owner_peek(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct part *p = owner_find(sh, m);
	struct part_peek_req *q = m->p[1];

	q->sh = sh;
	q->sender = msg_from(m);
	q->p = p;
	q->len = 0;
	q->err = 0;
	q->log_start = q->hw = -1;
	q->from = q->offset;
	if (q->cap > PART_PEEK_MAX)
		q->cap = PART_PEEK_MAX;
	if (!p || p->deleted || !p->pl) {
		q->err = -ENOENT;
		peek_reply(q);
		return;
	}
	q->log_start = p->pl->log_start;
	q->hw = p->pl->high_watermark;
	if (q->ts >= 0)
		peek_time_start(sh, q);
	else
		peek_read(q);
}

void part_proxy_peek(struct part_proxy *px, int owner, struct part_addr a, struct part_peek_req *req)
{
	struct shard_msg m = { .fn = owner_peek, .p = { NULL, req } };

	msg_addr(&m, px->from, 0, a);
	px->send(px->ctx, owner, &m);
}

/* ---- a partition's producers ------------------------------------------------ */

static void producers_answered(void *self, struct shard_msg *m)
{
	struct part_producers_req *q = m->p[0];

	q->done(self, q->cookie);
}

/* On the owner: its producer table, copied. p[1] the request. */
static void owner_producers(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct part *p = owner_find(sh, m);
	struct part_producers_req *q = m->p[1];
	struct shard_msg r = { .fn = producers_answered, .p = { q } };

	q->n = q->total = 0;
	q->err = !p || p->deleted || !p->pl ? -ENOENT : 0;
	for (uint32_t i = 0; !q->err && i < p->producers.cap; i++) {
		const struct producer_entry *e = &p->producers.e[i];
		const struct producer_batch *last;

		if (e->pid < 0)
			continue;
		q->total++;
		if (q->n == q->cap)
			continue;
		last = e->n ? &e->b[(e->head + e->n - 1) % PRODUCER_BATCHES] : NULL;
		q->out[q->n++] = (struct part_producer_view){ .pid = e->pid, .epoch = e->epoch,
							      .last_seq = last ? last->last_seq : -1,
							      .last_offset = last ? last->last_offset : -1,
							      .last_ms = e->last_ms, .txn_first = e->txn_first };
	}
	shard_send(sh, msg_from(m), &r);
}

void part_proxy_producers(struct part_proxy *px, int owner, struct part_addr a, struct part_producers_req *req)
{
	struct shard_msg m = { .fn = owner_producers, .p = { NULL, req } };

	msg_addr(&m, px->from, 0, a);
	px->send(px->ctx, owner, &m);
}

/* ---- reading back ----------------------------------------------------- */

/* On the sender: p[0] the chunk (the owner's copy, freed here), p[1]
 * chunk fn, p[2] cookie; v[0] length, v[1] partition index. */
static void chunk_answered(void *self, struct shard_msg *m)
{
	part_range_chunk chunk = (part_range_chunk)m->p[1];

	chunk(self, m->p[2], m->p[0], (uint32_t)m->v[0], (int32_t)m->v[1]);
	free(m->p[0]);   /* style: allow start-up replay */
}

/* On the sender: p[0] end fn, p[1] cookie. */
static void end_answered(void *self, struct shard_msg *m)
{
	part_range_end end = (part_range_end)m->p[0];

	end(self, m->p[1]);
}

/* On the owner, at start or when a coordinator takes over an internal
 * partition: read the range and send it over in chunks (a synchronous
 * read: the internal topics are compacted and small). Only by value, so
 * p[0] is free for the range's end: p[0] to, p[1] chunk fn, p[2] end fn,
 * p[3] cookie; v[1] from. */
static void owner_read(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct part *p = owner_lookup(sh, m);
	int to = msg_from(m);
	int gone = !p || p->deleted || !p->pl;
	/* the end: PART_READ_LOG_END, the log end (a coordinator loading the
	 * partition it now leads, as Kafka's does: its own log, acknowledged
	 * or not yet) */
	int64_t want = (int64_t)(intptr_t)m->p[0];
	int64_t end = gone ? 0
		      : want < 0 ? p->pl->next_offset
		      : want < p->pl->high_watermark ? want : p->pl->high_watermark;
	uint32_t cap = 1u << 20;
	uint8_t *rb = end > 0 ? aligned_alloc(4096, cap + 4096) : NULL; /* style: allow start-up replay */
	int64_t off = gone ? 0 : m->v[1] > p->pl->log_start ? m->v[1] : p->pl->log_start;

	while (rb && off < end) {
		struct plog_read rd = { .offset = off, .max_offset = end, .max_bytes = cap,
					.buf = rb, .buf_cap = cap + 4096 };
		int rc = plog_read_sync(p->pl, &rd);
		uint8_t *copy;
		uint32_t at = 0;
		int64_t next = off;

		if (rc < 0 || rd.bytes == 0) {
			if (rc < 0)
				slog(SLOG_WARN, "reading %s-%d at offset %lld back at start: %s", /* style: allow start-up */
					p->topic, p->index, (long long)off, strerror(-rc));
			plog_read_release(&rd);
			break;
		}
		while (at + BATCH_LOG_OVERHEAD <= rd.bytes && batch_size(rd.data + at) <= rd.bytes - at) {
			next = batch_last_offset(rd.data + at) + 1;
			at += batch_size(rd.data + at);
		}
		copy = malloc(at ? at : 1); /* style: allow start-up replay */
		if (!copy) {
			plog_read_release(&rd);
			break;
		}
		memcpy(copy, rd.data, at);
		plog_read_release(&rd);
		{
			struct shard_msg c = { .fn = chunk_answered, .p = { copy, m->p[1], m->p[3] },
					       .v = { at, p->index } };

			shard_send(sh, to, &c);
		}
		if (next <= off)
			break;
		off = next;
	}
	free(rb); /* style: allow start-up replay */
	{
		struct shard_msg e = { .fn = end_answered, .p = { m->p[2], m->p[3] } };

		shard_send(sh, to, &e);
	}
}

void part_proxy_read(struct part_proxy *px, int owner, struct part_addr a, int64_t from, int64_t to,
		     part_range_chunk chunk, part_range_end end, void *cookie)
{
	struct shard_msg m = { .fn = owner_read, .p = { (void *)(intptr_t)to, FN(chunk), FN(end), cookie },
			       .v = { 0, from } };

	msg_addr(&m, px->from, 0, a);
	px->send(px->ctx, owner, &m);
}
