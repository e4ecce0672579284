/* control/txn.c — the transaction coordinator's requests, state writes,
 * registrations, markers and timers (see txn.h; its table: txn_table.h). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_homes.h"
#include "control/config.h"
#include "control/coord_load.h"
#include "control/ctl.h"
#include "control/cutil.h"
#include "control/hmap.h"
#include "control/peer_kafka.h"
#include "control/txn_table.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part_proxy.h"
#include "storage/batch.h"
#include "storage/controls.h"
#include "storage/slog.h"

/* the coordinator's state and its helpers: control/txn_table.h */

/* ---- helpers ----------------------------------------------------------------- */

/* tp's partition in the published metadata, or NULL; *addr: it by value
 * (what part_proxy_* name it by). */
static const struct md_partition *tp_md(struct txn_coord *tc, const struct txn_tp *tp, struct part_addr *addr)
{
	const struct md_snapshot *md = tc->b->md;
	const struct md_topic *mt = md ? md_find(md, tp->topic, (int32_t)strlen(tp->topic)) : NULL;

	if (!mt || tp->part < 0 || tp->part >= mt->nparts)
		return NULL;
	if (addr)
		*addr = part_addr_of(mt->id, tp->part);
	return &mt->parts[tp->part];
}

/* Whether this node leads mp and has it open: its owner shard takes the
 * registrations and markers; another node's partition gets its markers
 * through WriteTxnMarkers and registers on a transactional produce
 * (KIP-890's verification). */
static int tp_here(const struct txn_coord *tc, const struct md_partition *mp, struct part_addr addr)
{
	return ctl_part_open_on(tc->ctl, addr.topic_id, addr.index) >= 0 && mp->leader == tc->b->set.node_id;
}

static void reply(struct txn_coord *tc, struct txn *t)
{
	struct kafka_ctx *ctx = t->ctx;

	t->ctx = NULL;
	if (ctx)
		ctl_reply(tc->ctl, ctx, t->from);
}

/* ---- the state log -------------------------------------------------------------- */

static void state_written(struct ctl *ctl, void *cookie, int64_t base, int err);

/* Write t's state (or, with tombstone, its removal) to __transaction_state;
 * t->then runs once durable (unless tombstone). */
static int state_write(struct txn_coord *tc, struct txn *t, int tombstone, int notify)
{
	const struct md_topic *st = txn_state_topic(tc);
	int32_t idx = txn_state_partition(tc, t->id);
	size_t cap = 256 + 2 * strlen(t->id), kl = 0, vl = 0;
	struct batch_builder bb;
	uint8_t *batch, *k, *v;
	ssize_t len;
	int ntopics = 0;

	if (!st || ctl_part_open_on(tc->ctl, st->id, idx) < 0)
		return -ENOENT;
	for (int i = 0; i < t->ntp; i++)
		cap += 16 + strlen(t->tp[i].topic);
	batch = xcalloc(1, cap * 2);
	k = xcalloc(1, cap);
	v = k + 4 + strlen(t->id);
	kl += put16(k, 0);
	kl += putstr(k + kl, t->id);
	if (!tombstone) {
		vl += put16(v + vl, 0);
		vl += put64(v + vl, t->pid);
		vl += put16(v + vl, t->epoch);
		vl += put32(v + vl, t->timeout_ms);
		v[vl++] = (uint8_t)t->state;
		/* partitions grouped by topic, in the order they were added */
		{
			size_t at_count = vl;

			vl += put32(v + vl, 0);
			for (int i = 0; i < t->ntp; i++) {
				int first = 1, n = 0;
				size_t at_n;

				for (int j = 0; j < i; j++)
					if (!strcmp(t->tp[j].topic, t->tp[i].topic))
						first = 0;
				if (!first)
					continue;
				ntopics++;
				vl += putstr(v + vl, t->tp[i].topic);
				at_n = vl;
				vl += put32(v + vl, 0);
				for (int j = i; j < t->ntp; j++)
					if (!strcmp(t->tp[j].topic, t->tp[i].topic)) {
						vl += put32(v + vl, t->tp[j].part);
						n++;
					}
				put32(v + at_n, n);
			}
			put32(v + at_count, ntopics);
		}
		vl += put64(v + vl, t->last_wall);
		vl += put64(v + vl, t->start_wall);
	}
	batch_builder_init(&bb, batch, cap * 2, ctl_wall_ms(tc->ctl));
	if (batch_builder_add(&bb, 0, ctl_wall_ms(tc->ctl), k, (int32_t)kl, tombstone ? NULL : v, tombstone ? -1 : (int32_t)vl,
			      NULL, 0, 0) < 0 ||
	    (len = batch_builder_finish(&bb, 0, -1, -1, -1, -1)) < 0)
		abort();   /* cap is an upper bound */
	free(k);
	return ctl_log_append(tc->ctl, st, idx, st->min_insync, batch, (uint32_t)len, state_written,
			      tombstone || !notify ? NULL : t);
}

static void state_written(struct ctl *ctl, void *cookie, int64_t base, int err)
{
	struct txn_coord *tc = ctl_txns(ctl);
	struct txn *t = cookie;
	void (*then)(struct txn_coord *, struct txn *);

	(void)base;
	if (!t) {
		/* a tombstone or a Complete state: nothing waits for it (a
		 * restart that misses it writes the markers again) */
		if (err)
			slog(SLOG_WARN, "writing to %s failed: %s", TXN_STATE_TOPIC, strerror(-err));
		return;
	}
	if (err) {
		slog(SLOG_WARN, "transactional id %s: writing its state (%s) to %s failed: %s", t->id,
			tstate_names[t->state], TXN_STATE_TOPIC, strerror(-err));
		t->err = KERR_COORDINATOR_NOT_AVAILABLE;
	}
	then = t->then;
	t->then = NULL;
	if (then)
		then(tc, t);
}

/* ---- registrations on the partitions' owner shards ------------------------------ */

static void registrations_done(struct txn_coord *tc, struct txn *t);

static void registered(void *self, void *cookie, int err)
{
	struct txn_coord *tc = ctl_txns(self);
	struct txn *t = cookie;

	if (err && !t->err)
		t->err = part_err_to_kafka(err);   /* the partition's reason, as Kafka says it */
	if (--t->pending == 0)
		registrations_done(tc, t);
}

/* Tell the owners of tp[nregistered..ntp) to take t's transactional
 * batches; registrations_done when all have answered. */
void txn_register_new(struct txn_coord *tc, struct txn *t)
{
	int from = t->nregistered;

	t->pending = 1;
	for (int i = from; i < t->ntp; i++) {
		struct part_addr addr;
		const struct md_partition *mp = tp_md(tc, &t->tp[i], &addr);
		struct part_proxy px;

		if (!mp || !tp_here(tc, mp, addr))
			continue;   /* deleted meanwhile, or led by another node: its leader asks
				     * this coordinator when the producer writes there */
		t->pending++;
		part_proxy_txn_begin(ctl_part_proxy(tc->ctl, &px), ctl_part_open_on(tc->ctl, addr.topic_id, addr.index), addr, t->pid, t->epoch, t->begin_ns,
				     registered, t);
	}
	t->nregistered = t->ntp;
	if (--t->pending == 0)
		registrations_done(tc, t);
}

/* ---- markers -------------------------------------------------------------------- */

static void marker_done(void *self, void *cookie, int64_t off, int err);

static void markers_done(struct txn_coord *tc, struct txn *t);

static void marker_done(void *self, void *cookie, int64_t off, int err)
{
	struct txn_coord *tc = ctl_txns(self);
	struct txn_tp *tp = cookie;
	struct txn *t = tp->t;

	(void)off;

	if (err == PART_ERR_OLD_EPOCH) {
		/* the partition knows a newer epoch of the producer: this
		 * decision is stale there (Kafka stops sending it) */
		slog(SLOG_WARN, "transactional id %s: %s-%d refused the %s marker of epoch %d (it knows a "
			"newer one): not written", t->id, tp->topic, tp->part, t->commit ? "COMMIT" : "ABORT",
			t->epoch);
		tp->marked = 1;
	} else if (err) {
		slog(SLOG_WARN, "transactional id %s: writing the %s marker to %s-%d failed: %s (retried)",
			t->id, t->commit ? "COMMIT" : "ABORT", tp->topic, tp->part,
			err > 0 ? "refused by the partition" : strerror(-err));
	} else {
		tp->marked = 1;
		tc->st.markers++;
		if (!strcmp(tp->topic, GROUP_OFFSETS_TOPIC))
			group_txn_end(tc->gc, tp->part, t->pid, t->commit);
	}
	if (--t->pending == 0)
		markers_done(tc, t);
}

/* One WriteTxnMarkers request to one leader on another node: t's
 * partitions it leads (t->tp indexes), in one request as Kafka's
 * TransactionMarkerChannelManager sends them per broker. */
struct remote_markers {
	struct txn *t;
	int n;
	int idx[];
};

/* Partition (topic, part)'s error in a WriteTxnMarkers answer of one
 * marker; UNKNOWN_SERVER_ERROR when the answer leaves it out. */
static int16_t marker_answer(const struct kafka_write_txn_markers_response *r, const char *topic, int32_t part)
{
	size_t tlen = strlen(topic);

	if (!r || r->Markers.count != 1)
		return KERR_UNKNOWN_SERVER_ERROR;
	for (int i = 0; i < r->Markers.items[0].Topics.count; i++) {
		const struct kafka_write_txn_markers_response_writable_txn_marker_topic_result *rt =
			&r->Markers.items[0].Topics.items[i];

		if ((size_t)rt->Name.len != tlen || memcmp(rt->Name.ptr, topic, tlen))
			continue;
		for (int j = 0; j < rt->Partitions.count; j++)
			if (rt->Partitions.items[j].PartitionIndex == part)
				return rt->Partitions.items[j].ErrorCode;
	}
	return KERR_UNKNOWN_SERVER_ERROR;
}

/* The answer of the leader on another node to the markers of its
 * partitions: each partition's error settles that partition alone. */
static void remote_markers_done(struct ctl *ctl, void *cookie, int err, const void *body)
{
	struct txn_coord *tc = ctl_txns(ctl);
	struct remote_markers *rm = cookie;
	struct txn *t = rm->t;

	for (int k = 0; k < rm->n; k++) {
		struct txn_tp *tp = &t->tp[rm->idx[k]];
		int16_t kerr = err ? KERR_UNKNOWN_SERVER_ERROR : marker_answer(body, tp->topic, tp->part);

		if (!err && kerr == KERR_NONE) {
			tp->marked = 1;
			tc->st.markers++;
			tc->st.remote_markers++;
		} else if (!err && (kerr == KERR_INVALID_PRODUCER_EPOCH || kerr == KERR_PRODUCER_FENCED)) {
			slog(SLOG_WARN, "transactional id %s: %s-%d refused the %s marker of epoch %d (it "
				"knows a newer one): not written", t->id, tp->topic, tp->part,
				t->commit ? "COMMIT" : "ABORT", t->epoch);
			tp->marked = 1;
		} else if (err && SLUICE_CONTROL_OFF(unanswered_marker_taken)) {
			slog(SLOG_WARN, "transactional id %s: the %s marker to %s-%d: no answer from its "
				"leader: %s (taken as written: control)", t->id, t->commit ? "COMMIT" : "ABORT", tp->topic,
				tp->part, strerror(-err));
			tp->marked = 1;
		} else if (err) {
			/* the connection lost, ...: the leader is looked up
			 * again at the retry */
			slog(SLOG_WARN, "transactional id %s: the %s marker to %s-%d: no answer from its "
				"leader: %s (retried)", t->id, t->commit ? "COMMIT" : "ABORT", tp->topic, tp->part,
				strerror(-err));
		} else {
			/* NOT_LEADER_OR_FOLLOWER, ...: likewise */
			slog(SLOG_WARN, "transactional id %s: the %s marker to %s-%d: its leader answered "
				"error %d (retried)", t->id, t->commit ? "COMMIT" : "ABORT", tp->topic, tp->part,
				kerr);
		}
	}
	free(rm);
	if (--t->pending == 0)
		markers_done(tc, t);
}

/* One WriteTxnMarkers to node leader for t's partitions idx[0..n): 0, or
 * -errno (not sent: retried with the others). */
static int send_remote_markers(struct txn_coord *tc, struct txn *t, const int *idx, int n, int32_t leader)
{
	struct kafka_write_txn_markers_request q;
	struct kafka_write_txn_markers_request_writable_txn_marker mk;
	struct kafka_write_txn_markers_request_writable_txn_marker_topic *mt;
	struct peer_kafka *pk = ctl_peers(tc->ctl);
	struct remote_markers *rm;
	int32_t *parts;
	int *topic_of, ntopics = 0, rc;

	if (!pk)
		return -ENOTCONN;
	mt = xcalloc((size_t)n, sizeof(*mt));
	parts = xcalloc((size_t)n, sizeof(*parts));
	topic_of = xcalloc((size_t)n, sizeof(*topic_of));
	/* the partitions grouped by topic: count, then place */
	for (int k = 0; k < n; k++) {
		const char *name = t->tp[idx[k]].topic;
		int j = 0;

		while (j < ntopics && strcmp(mt[j].Name.ptr, name))
			j++;
		if (j == ntopics)
			mt[ntopics++].Name = (struct kafka_str){ name, (int32_t)strlen(name) };
		mt[j].PartitionIndexes.count++;
		topic_of[k] = j;
	}
	for (int j = 0, at = 0; j < ntopics; at += mt[j].PartitionIndexes.count, j++) {
		mt[j].PartitionIndexes.items = parts + at;
		mt[j].PartitionIndexes.count = 0;
	}
	for (int k = 0; k < n; k++) {
		struct kafka_write_txn_markers_request_writable_txn_marker_topic *tt = &mt[topic_of[k]];

		tt->PartitionIndexes.items[tt->PartitionIndexes.count++] = t->tp[idx[k]].part;
	}
	kafka_write_txn_markers_request_init(&q);
	memset(&mk, 0, sizeof(mk));
	mk.ProducerId = t->pid;
	mk.ProducerEpoch = t->epoch;
	mk.TransactionResult = t->commit != 0;
	mk.Topics.items = mt;
	mk.Topics.count = ntopics;
	mk.CoordinatorEpoch = 0;
	q.Markers.items = &mk;
	q.Markers.count = 1;
	rm = xcalloc(1, sizeof(*rm) + (size_t)n * sizeof(rm->idx[0]));
	rm->t = t;
	rm->n = n;
	memcpy(rm->idx, idx, (size_t)n * sizeof(rm->idx[0]));
	rc = peer_kafka_send(pk, leader, KAFKA_WRITE_TXN_MARKERS_KEY, 1, &q, remote_markers_done, rm);
	if (rc < 0)
		free(rm);
	else
		tc->st.remote_marker_requests++;
	free(mt);
	free(parts);
	free(topic_of);
	return rc;
}

void txn_send_markers(struct txn_coord *tc, struct txn *t)
{
	int32_t *remote = NULL;   /* per partition: the other node leading it, -1: none */
	int *idx = NULL;

	t->pending = 1;
	for (int i = 0; i < t->ntp; i++) {
		struct txn_tp *tp = &t->tp[i];
		const struct md_partition *mp;
		struct part_addr addr;

		if (tp->marked)
			continue;
		if (!(mp = tp_md(tc, tp, &addr))) {
			tp->marked = 1;   /* the topic is gone */
			continue;
		}
		tp->t = t;
		if (!tp_here(tc, mp, addr)) {
			/* another node leads it (none: the retry looks again):
			 * sent below, one request per leader */
			if (mp->leader >= 0 && mp->leader != tc->b->set.node_id) {
				if (!remote) {
					remote = xcalloc((size_t)t->ntp, sizeof(*remote));
					idx = xcalloc((size_t)t->ntp, sizeof(*idx));
					for (int j = 0; j < t->ntp; j++)
						remote[j] = -1;
				}
				remote[i] = mp->leader;
			}
			continue;
		}
		t->pending++;
		{
			struct part_proxy px;

			tp->marker = (struct part_marker_req){ .pid = t->pid, .epoch = t->epoch, .commit = t->commit,
							       .done = marker_done, .cookie = tp };
			part_proxy_txn_marker(ctl_part_proxy(tc->ctl, &px), ctl_part_open_on(tc->ctl, addr.topic_id, addr.index),
					      addr, &tp->marker);
		}
	}
	for (int i = 0; remote && i < t->ntp; i++) {
		int32_t leader = remote[i];
		int n = 0;

		if (leader < 0)
			continue;
		for (int j = i; j < t->ntp; j++)
			if (remote[j] == leader) {
				idx[n++] = j;
				remote[j] = -1;
			}
		if (send_remote_markers(tc, t, idx, n, leader) == 0)
			t->pending++;
	}
	free(remote);
	free(idx);
	if (--t->pending == 0)
		markers_done(tc, t);
}

static void markers_done(struct txn_coord *tc, struct txn *t)
{
	for (int i = 0; i < t->ntp; i++)
		if (!t->tp[i].marked) {
			t->retry_at = ctl_now_ms(tc->ctl) + MARKER_RETRY_MS;   /* txn_tick writes them again */
			tc->st.marker_retries++;
			return;
		}
	t->retry_at = 0;
	if (t->commit)
		tc->st.committed++;
	else
		tc->st.aborted++;
	t->state = t->commit ? TS_COMPLETE_COMMIT : TS_COMPLETE_ABORT;
	t->last_wall = ctl_wall_ms(tc->ctl);
	txn_tp_clear(t);
	t->busy = 0;
	t->err = 0;
	state_write(tc, t, 0, 0);   /* the next state write follows it in the same log */
	reply(tc, t);            /* EndTxn: every marker is durable */
}

static void prepared(struct txn_coord *tc, struct txn *t)
{
	if (t->err) {
		/* not durable: the transaction stays open, the client retries */
		t->state = TS_ONGOING;
		t->busy = 0;
		if (t->ctx)
			((struct kafka_end_txn_response *)t->ctx->resp)->ErrorCode = t->err;
		t->err = 0;
		reply(tc, t);
		return;
	}
	for (int i = 0; i < t->ntp; i++)
		t->tp[i].marked = 0;
	txn_send_markers(tc, t);
}

/* Decide t's ongoing transaction: PrepareCommit/PrepareAbort durable,
 * then the markers, then the answer to ctx (if any). */
static void txn_end(struct txn_coord *tc, struct txn *t, int commit)
{
	t->busy = 1;
	t->commit = commit;
	t->state = commit ? TS_PREPARE_COMMIT : TS_PREPARE_ABORT;
	t->last_wall = ctl_wall_ms(tc->ctl);
	t->err = 0;
	t->then = prepared;
	if (state_write(tc, t, 0, 1) < 0) {
		t->err = KERR_COORDINATOR_NOT_AVAILABLE;
		t->then = NULL;
		prepared(tc, t);
	}
}

/* A new epoch for t (fencing its older producer): the same producer id
 * while epochs last, then a new one. */
static int bump_epoch(struct txn_coord *tc, struct txn *t)
{
	t->last_epoch = -1;
	if (t->pid < 0 || t->epoch >= INT16_MAX - 1) {
		int64_t pid = ctl_new_producer_id(tc->ctl);

		if (pid < 0)
			return -1;
		t->pid = pid;
		t->epoch = 0;
		return 0;
	}
	t->epoch++;
	return 0;
}

/* ---- the requests ------------------------------------------------------------- */

static void init_written(struct txn_coord *tc, struct txn *t)
{
	struct kafka_init_producer_id_response *r = t->ctx->resp;

	t->busy = 0;
	if (t->err) {
		r->ErrorCode = t->err;
		r->ProducerId = -1;
		r->ProducerEpoch = -1;
	} else {
		r->ProducerId = t->pid;
		r->ProducerEpoch = t->epoch;
	}
	t->err = 0;
	reply(tc, t);
}

static void handle_init(struct txn_coord *tc, struct kafka_ctx *ctx)
{
	struct kafka_init_producer_id_request *q = ctx->req.body;
	struct kafka_init_producer_id_response *r = ctx->resp;
	struct txn_req *rq = ctx->state;
	struct txn *t = txn_find(tc, q->TransactionalId);

	r->ProducerId = -1;
	r->ProducerEpoch = -1;
	tc->st.inits++;
	if (q->TransactionTimeoutMs <= 0 || q->TransactionTimeoutMs > tc->max_timeout_ms) {
		r->ErrorCode = KERR_INVALID_TRANSACTION_TIMEOUT;
		txn_answer_now(tc, ctx);
		return;
	}
	if (t && t->busy) {
		r->ErrorCode = KERR_CONCURRENT_TRANSACTIONS;
		txn_answer_now(tc, ctx);
		return;
	}
	if (ctx->req.header.RequestApiVersion >= 3 && q->ProducerId >= 0 && t && t->epoch >= 0) {
		/* KIP-360: a producer asks for its own epoch to be bumped (after
		 * an abortable error); it must be the current producer, or the
		 * retry of a bump it did not hear about */
		int16_t fenced = ctx->req.header.RequestApiVersion >= 4 ? KERR_PRODUCER_FENCED
									: KERR_INVALID_PRODUCER_EPOCH;

		if (q->ProducerId != t->pid ||
		    (q->ProducerEpoch != t->epoch && q->ProducerEpoch != t->last_epoch)) {
			r->ErrorCode = fenced;
			txn_answer_now(tc, ctx);
			return;
		}
		if (q->ProducerEpoch == t->last_epoch && t->state != TS_ONGOING) {
			/* a retry: the bump happened, answer it again */
			r->ProducerId = t->pid;
			r->ProducerEpoch = t->epoch;
			txn_answer_now(tc, ctx);
			return;
		}
	}
	if (!t)
		t = txn_new(tc, q->TransactionalId);
	if (t->state == TS_ONGOING) {
		/* a producer starts over with a transaction open: fence the old
		 * epoch and abort it; the client retries and gets the next one */
		if (bump_epoch(tc, t) < 0) {
			r->ErrorCode = KERR_COORDINATOR_NOT_AVAILABLE;
			txn_answer_now(tc, ctx);
			return;
		}
		tc->st.fenced_by_init++;
		txn_end(tc, t, 0);
		r->ErrorCode = KERR_CONCURRENT_TRANSACTIONS;
		txn_answer_now(tc, ctx);
		return;
	}
	{
		int16_t before = t->epoch;
		int64_t pid_before = t->pid;

		if (bump_epoch(tc, t) < 0) {
			r->ErrorCode = KERR_COORDINATOR_NOT_AVAILABLE;
			txn_answer_now(tc, ctx);
			return;
		}
		/* a bump the producer asked for can be retried (KIP-360) */
		t->last_epoch = ctx->req.header.RequestApiVersion >= 3 && q->ProducerId >= 0 && t->pid == pid_before
					? before : -1;
	}
	t->timeout_ms = q->TransactionTimeoutMs;
	t->state = TS_EMPTY;
	txn_tp_clear(t);
	t->last_wall = ctl_wall_ms(tc->ctl);
	t->busy = 1;
	t->err = 0;
	t->ctx = ctx;
	t->from = rq->from;
	t->then = init_written;
	if (state_write(tc, t, 0, 1) < 0) {
		t->err = KERR_COORDINATOR_NOT_AVAILABLE;
		init_written(tc, t);
	}
}

/* Begin a transaction on t if none is open; late requests (taken up
 * before the current transaction began) are refused. 0 or the error. */
static int16_t open_txn(struct txn_coord *tc, struct txn *t, const struct kafka_ctx *ctx)
{
	if (t->state == TS_ONGOING) {
		if (ctx->recv_ns < t->begin_ns) {
			tc->st.late_refused++;
			return KERR_INVALID_TXN_STATE;
		}
		if (ctx->conn_ns > t->conn_ns)
			t->conn_ns = ctx->conn_ns;
		return 0;
	}
	if (t->state != TS_EMPTY && t->state != TS_COMPLETE_COMMIT && t->state != TS_COMPLETE_ABORT)
		return KERR_CONCURRENT_TRANSACTIONS;
	if (ctx->recv_ns < t->end_ns) {
		/* taken up before the previous transaction was ended: one of
		 * its requests, late; it must not begin another */
		tc->st.late_refused++;
		return KERR_INVALID_TXN_STATE;
	}
	txn_tp_clear(t);
	t->state = TS_ONGOING;
	t->start_wall = t->last_wall = ctl_wall_ms(tc->ctl);
	t->start_mono = ctl_now_ms(tc->ctl);
	t->begin_ns = ctx->recv_ns;
	t->conn_ns = ctx->conn_ns;
	tc->st.begun++;
	return 0;
}

static void add_written(struct txn_coord *tc, struct txn *t)
{
	if (t->err) {
		registrations_done(tc, t);
		return;
	}
	txn_register_new(tc, t);
}

static void registrations_done(struct txn_coord *tc, struct txn *t)
{
	struct kafka_ctx *ctx = t->ctx;

	t->busy = 0;
	if (ctx && t->err) {
		if (ctx->req.header.RequestApiKey == KAFKA_ADD_PARTITIONS_TO_TXN_KEY) {
			struct kafka_add_partitions_to_txn_response *r = ctx->resp;

			for (int i = 0; i < r->ResultsByTopicV3AndBelow.count; i++)
				for (int j = 0; j < r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.count; j++)
					r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.items[j].PartitionErrorCode =
						t->err;
		} else {
			((struct kafka_add_offsets_to_txn_response *)ctx->resp)->ErrorCode = t->err;
		}
	}
	t->err = 0;
	if (ctx)
		reply(tc, t);
	else if (tc->registering && --tc->registering == 0 && tc->replay_done)
		tc->replay_done(tc->ctl);
}

/* Record the new partitions durably, then register them; the request is
 * answered when the owners have. */
static void add_and_register(struct txn_coord *tc, struct txn *t, struct kafka_ctx *ctx)
{
	struct txn_req *rq = ctx->state;

	t->busy = 1;
	t->err = 0;
	t->ctx = ctx;
	t->from = rq->from;
	t->last_wall = ctl_wall_ms(tc->ctl);
	t->then = add_written;
	if (state_write(tc, t, 0, 1) < 0) {
		t->err = KERR_COORDINATOR_NOT_AVAILABLE;
		t->then = NULL;
		registrations_done(tc, t);
	}
}

static void handle_add_partitions(struct txn_coord *tc, struct kafka_ctx *ctx)
{
	struct kafka_add_partitions_to_txn_request *q = ctx->req.body;
	struct kafka_add_partitions_to_txn_response *r = ctx->resp;
	struct txn *t = txn_find(tc, q->V3AndBelowTransactionalId);
	const struct md_snapshot *md = tc->b->md;
	int16_t err = txn_check_producer(tc, t, q->V3AndBelowProducerId, q->V3AndBelowProducerEpoch);
	int bad = 0, added = 0;

	/* partitions first: one unknown fails the request (Kafka's rule) */
	for (int i = 0; !err && i < r->ResultsByTopicV3AndBelow.count; i++) {
		struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *rt =
			&r->ResultsByTopicV3AndBelow.items[i];
		const struct md_topic *mt = md && rt->Name.len > 0 ? md_find(md, rt->Name.ptr, rt->Name.len) : NULL;

		for (int j = 0; j < rt->ResultsByPartition.count; j++) {
			int32_t part = rt->ResultsByPartition.items[j].PartitionIndex;

			if (!mt || mt->internal || part < 0 || part >= mt->nparts) {
				rt->ResultsByPartition.items[j].PartitionErrorCode =
					mt && mt->internal ? KERR_INVALID_TOPIC_EXCEPTION : KERR_UNKNOWN_TOPIC_OR_PARTITION;
				bad = 1;
			}
		}
	}
	if (!err && bad) {
		for (int i = 0; i < r->ResultsByTopicV3AndBelow.count; i++)
			for (int j = 0; j < r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.count; j++) {
				int16_t *e = &r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.items[j]
						      .PartitionErrorCode;

				if (!*e)
					*e = KERR_OPERATION_NOT_ATTEMPTED;
			}
		txn_answer_now(tc, ctx);
		return;
	}
	if (!err)
		err = open_txn(tc, t, ctx);
	if (err) {
		for (int i = 0; i < r->ResultsByTopicV3AndBelow.count; i++)
			for (int j = 0; j < r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.count; j++)
				r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.items[j].PartitionErrorCode = err;
		txn_answer_now(tc, ctx);
		return;
	}
	for (int i = 0; i < r->ResultsByTopicV3AndBelow.count; i++) {
		struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *rt =
			&r->ResultsByTopicV3AndBelow.items[i];

		for (int j = 0; j < rt->ResultsByPartition.count; j++) {
			int before = t->ntp;

			txn_tp_add(t, rt->Name.ptr, (size_t)rt->Name.len, rt->ResultsByPartition.items[j].PartitionIndex);
			added += t->ntp > before;
		}
	}
	if (!added) {
		txn_answer_now(tc, ctx);   /* all in the transaction already */
		return;
	}
	add_and_register(tc, t, ctx);
}

static void handle_add_offsets(struct txn_coord *tc, struct kafka_ctx *ctx)
{
	struct kafka_add_offsets_to_txn_request *q = ctx->req.body;
	struct kafka_add_offsets_to_txn_response *r = ctx->resp;
	struct txn *t = txn_find(tc, q->TransactionalId);
	int16_t err = txn_check_producer(tc, t, q->ProducerId, q->ProducerEpoch);
	char group[256];
	int32_t opart;
	int before;

	if (!err && (q->GroupId.len <= 0 || q->GroupId.len >= (int32_t)sizeof(group)))
		err = KERR_INVALID_GROUP_ID;
	if (!err)
		err = open_txn(tc, t, ctx);
	if (err) {
		r->ErrorCode = err;
		txn_answer_now(tc, ctx);
		return;
	}
	memcpy(group, q->GroupId.ptr, (size_t)q->GroupId.len);
	group[q->GroupId.len] = 0;
	opart = group_offsets_partition(tc->gc, group);
	before = t->ntp;
	txn_tp_add(t, GROUP_OFFSETS_TOPIC, strlen(GROUP_OFFSETS_TOPIC), opart);
	if (t->ntp == before) {
		txn_answer_now(tc, ctx);
		return;
	}
	add_and_register(tc, t, ctx);
}

static void handle_end(struct txn_coord *tc, struct kafka_ctx *ctx)
{
	struct kafka_end_txn_request *q = ctx->req.body;
	struct kafka_end_txn_response *r = ctx->resp;
	struct txn_req *rq = ctx->state;
	struct txn *t = txn_find(tc, q->TransactionalId);
	int16_t err = txn_check_producer(tc, t, q->ProducerId, q->ProducerEpoch);
	int commit = q->Committed ? 1 : 0;

	if (!err && t->state == TS_ONGOING && (ctx->recv_ns < t->begin_ns || ctx->conn_ns < t->conn_ns)) {
		/* taken up before this transaction began, or come on a
		 * connection older than one this transaction's requests already
		 * came on (a request delayed on a connection the client gave
		 * up): an earlier transaction's EndTxn arriving late. It never
		 * ends this one. Its sender has had its answer through a retry;
		 * whoever else sent it gets an error, never a false success. */
		tc->st.late_refused++;
		r->ErrorCode = KERR_INVALID_TXN_STATE;
		txn_answer_now(tc, ctx);
		return;
	}
	if (!err) {
		switch (t->state) {
		case TS_ONGOING:
			t->ctx = ctx;
			t->from = rq->from;
			t->end_ns = ctx->recv_ns;
			txn_end(tc, t, commit);
			return;
		case TS_COMPLETE_COMMIT:
		case TS_COMPLETE_ABORT:
			/* a retry of the decision already carried out is answered
			 * again; the other decision is refused */
			err = (t->state == TS_COMPLETE_COMMIT) == commit ? 0 : KERR_INVALID_TXN_STATE;
			break;
		default:
			err = KERR_INVALID_TXN_STATE;   /* nothing ongoing */
			break;
		}
	}
	r->ErrorCode = err;
	txn_answer_now(tc, ctx);
}

/* ---- dispatch ------------------------------------------------------------------- */

static void txn_msg(void *self, struct shard_msg *m)
{
	struct txn_coord *tc = ctl_txns(self);
	struct kafka_ctx *ctx = m->p[0];
	int16_t err = 0;

	if (ctx->req.header.RequestApiKey == KAFKA_ADD_PARTITIONS_TO_TXN_KEY && ctx->req.header.RequestApiVersion >= 4) {
		txn_handle_verify_only(tc, ctx);
		return;
	}
	/* the transactional id's partition of __transaction_state must be
	 * coordinated here (led and loaded): else NOT_COORDINATOR or
	 * COORDINATOR_LOAD_IN_PROGRESS, and the client finds it again */
	switch (ctx->req.header.RequestApiKey) {
	case KAFKA_INIT_PRODUCER_ID_KEY:
		if ((err = txn_key_err(tc, ((struct kafka_init_producer_id_request *)ctx->req.body)->TransactionalId))) {
			struct kafka_init_producer_id_response *r = ctx->resp;

			r->ErrorCode = err;
			r->ProducerId = -1;
			r->ProducerEpoch = -1;
		}
		break;
	case KAFKA_ADD_PARTITIONS_TO_TXN_KEY:
		if ((err = txn_key_err(tc, ((struct kafka_add_partitions_to_txn_request *)ctx->req.body)
					       ->V3AndBelowTransactionalId))) {
			struct kafka_add_partitions_to_txn_response *r = ctx->resp;

			for (int i = 0; i < r->ResultsByTopicV3AndBelow.count; i++)
				for (int j = 0; j < r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.count; j++)
					r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.items[j].PartitionErrorCode =
						err;
		}
		break;
	case KAFKA_ADD_OFFSETS_TO_TXN_KEY:
		if ((err = txn_key_err(tc, ((struct kafka_add_offsets_to_txn_request *)ctx->req.body)->TransactionalId)))
			((struct kafka_add_offsets_to_txn_response *)ctx->resp)->ErrorCode = err;
		break;
	case KAFKA_END_TXN_KEY:
		if ((err = txn_key_err(tc, ((struct kafka_end_txn_request *)ctx->req.body)->TransactionalId)))
			((struct kafka_end_txn_response *)ctx->resp)->ErrorCode = err;
		break;
	}
	if (err) {
		txn_answer_now(tc, ctx);
		return;
	}
	switch (ctx->req.header.RequestApiKey) {
	case KAFKA_INIT_PRODUCER_ID_KEY: handle_init(tc, ctx); break;
	case KAFKA_ADD_PARTITIONS_TO_TXN_KEY: handle_add_partitions(tc, ctx); break;
	case KAFKA_ADD_OFFSETS_TO_TXN_KEY: handle_add_offsets(tc, ctx); break;
	case KAFKA_END_TXN_KEY: handle_end(tc, ctx); break;
	default:
		ctx->resp = NULL;
		txn_answer_now(tc, ctx);
		break;
	}
}

static int txn_resume(struct kafka_ctx *ctx)
{
	if (!ctx->resp) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_ctx_respond(ctx);
	return 0;
}

/* AddPartitionsToTxn v4+'s response: per transaction, per topic, per
 * partition, as asked. -1 when the arena is full. */
static int shape_verify_response(struct kafka_ctx *ctx, const struct kafka_add_partitions_to_txn_request *q,
				 struct kafka_add_partitions_to_txn_response *r)
{
	int nx = q->Transactions.count > 0 ? q->Transactions.count : 0;

	r->ResultsByTransaction.count = nx;
	r->ResultsByTransaction.items = ALLOC(ctx, struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_result, nx);
	if (!r->ResultsByTransaction.items)
		return -1;
	for (int i = 0; i < nx; i++) {
		const struct kafka_add_partitions_to_txn_request_add_partitions_to_txn_transaction *tx = &q->Transactions.items[i];
		struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_result *rr = &r->ResultsByTransaction.items[i];
		int nt = tx->Topics.count > 0 ? tx->Topics.count : 0;

		rr->TransactionalId = tx->TransactionalId;
		rr->TopicResults.count = nt;
		rr->TopicResults.items = ALLOC(ctx, struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result, nt);
		if (!rr->TopicResults.items)
			return -1;
		for (int j = 0; j < nt; j++) {
			const struct kafka_add_partitions_to_txn_request_add_partitions_to_txn_topic *qt = &tx->Topics.items[j];
			struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *rt = &rr->TopicResults.items[j];
			int np = qt->Partitions.count > 0 ? qt->Partitions.count : 0;

			rt->Name = qt->Name;
			rt->ResultsByPartition.count = np;
			rt->ResultsByPartition.items =
				ALLOC(ctx, struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_partition_result, np);
			if (!rt->ResultsByPartition.items)
				return -1;
			for (int k = 0; k < np; k++) {
				rt->ResultsByPartition.items[k].PartitionIndex = qt->Partitions.items[k];
				rt->ResultsByPartition.items[k].PartitionErrorCode = 0;
			}
		}
	}
	return 0;
}

/* The response, shaped like the request, in the request's arena: the
 * coordinator only fills it in. */
static void *shape_response(struct kafka_ctx *ctx)
{
	switch (ctx->req.header.RequestApiKey) {
	case KAFKA_INIT_PRODUCER_ID_KEY: {
		struct kafka_init_producer_id_response *r = ALLOC(ctx, struct kafka_init_producer_id_response, 1);

		if (r)
			kafka_init_producer_id_response_init(r);
		return r;
	}
	case KAFKA_ADD_PARTITIONS_TO_TXN_KEY: {
		struct kafka_add_partitions_to_txn_request *q = ctx->req.body;
		struct kafka_add_partitions_to_txn_response *r = ALLOC(ctx, struct kafka_add_partitions_to_txn_response, 1);
		int nt = q->V3AndBelowTopics.count > 0 ? q->V3AndBelowTopics.count : 0;

		if (!r)
			return NULL;
		kafka_add_partitions_to_txn_response_init(r);
		if (ctx->req.header.RequestApiVersion >= 4)
			return shape_verify_response(ctx, q, r) < 0 ? NULL : r;
		r->ResultsByTopicV3AndBelow.count = nt;
		r->ResultsByTopicV3AndBelow.items =
			ALLOC(ctx, struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result, nt);
		if (!r->ResultsByTopicV3AndBelow.items)
			return NULL;
		for (int i = 0; i < nt; i++) {
			struct kafka_add_partitions_to_txn_request_add_partitions_to_txn_topic *qt =
				&q->V3AndBelowTopics.items[i];
			struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *rt =
				&r->ResultsByTopicV3AndBelow.items[i];
			int np = qt->Partitions.count > 0 ? qt->Partitions.count : 0;

			rt->Name = qt->Name;
			rt->ResultsByPartition.count = np;
			rt->ResultsByPartition.items =
				ALLOC(ctx, struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_partition_result,
				      np);
			if (!rt->ResultsByPartition.items)
				return NULL;
			for (int j = 0; j < np; j++) {
				rt->ResultsByPartition.items[j].PartitionIndex = qt->Partitions.items[j];
				rt->ResultsByPartition.items[j].PartitionErrorCode = 0;
			}
		}
		return r;
	}
	case KAFKA_ADD_OFFSETS_TO_TXN_KEY: {
		struct kafka_add_offsets_to_txn_response *r = ALLOC(ctx, struct kafka_add_offsets_to_txn_response, 1);

		if (r)
			kafka_add_offsets_to_txn_response_init(r);
		return r;
	}
	case KAFKA_END_TXN_KEY: {
		struct kafka_end_txn_response *r = ALLOC(ctx, struct kafka_end_txn_response, 1);

		if (r)
			kafka_end_txn_response_init(r);
		return r;
	}
	}
	return NULL;
}

int txn_submit(struct kafka_ctx *ctx)
{
	struct txn_req *rq = ALLOC(ctx, struct txn_req, 1);
	struct shard_msg m = { .fn = txn_msg, .p = { ctx } };

	ctx->resp = shape_response(ctx);
	if (!rq || !ctx->resp) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	rq->from = kafka_ctx_shard_id(ctx);
	ctx->state = rq;
	ctx->pending = 1;
	ctx->resume = txn_resume;
	kafka_ctx_send_ctl(ctx, &m);
	return 0;
}

static void offsets_end_msg(void *self, struct shard_msg *m)
{
	struct txn_coord *tc = ctl_txns(self);

	group_txn_end(tc->gc, (int32_t)m->v[1], m->v[2], (int)m->v[3]);
	ctl_reply(tc->ctl, m->p[0], (int)m->v[0]);
}

void txn_offsets_end_submit(struct kafka_ctx *ctx, int32_t opart, int64_t pid, int commit)
{
	struct shard_msg m = { .fn = offsets_end_msg, .p = { ctx },
			       .v = { kafka_ctx_shard_id(ctx), opart, pid, commit } };

	kafka_ctx_send_ctl(ctx, &m);
}

/* ---- timers ------------------------------------------------------------------------ */

int txn_tick(struct txn_coord *tc, int64_t now_ms, int64_t wall, int max_ms)
{
	int64_t now = now_ms;
	int64_t next = now + max_ms;
	int check = now >= tc->next_check;

	if (check)
		tc->next_check = now + tc->check_ms;
	if (tc->next_check < next)
		next = tc->next_check;
	/* transactions of partitions unloaded while busy: freed once idle; a
	 * marker retry is left to the new coordinator (it rolls forward) */
	for (struct txn **pp = &tc->orphans; *pp;) {
		struct txn *t = *pp;

		if (t->retry_at && !t->pending) {
			t->retry_at = 0;
			t->busy = 0;
			if (t->ctx && t->ctx->req.header.RequestApiKey == KAFKA_END_TXN_KEY)
				((struct kafka_end_txn_response *)t->ctx->resp)->ErrorCode = KERR_NOT_COORDINATOR;
			reply(tc, t);
		}
		if (t->busy || t->pending || t->then || t->ctx) {
			pp = &t->orphan_next;
			continue;
		}
		*pp = t->orphan_next;
		txn_free(t);
	}
	for (uint32_t i = 0; i < tc->txns.cap;) {
		struct txn *t = tc->txns.v[i];

		if (!t || coord_load_err(&tc->load, txn_state_partition(tc, t->id))) {
			i++;   /* (a partition still loading: not all read yet) */
			continue;
		}
		if (t->retry_at && now >= t->retry_at && t->busy && !t->pending) {
			t->retry_at = 0;
			txn_send_markers(tc, t);
		} else if (t->retry_at && t->retry_at < next) {
			next = t->retry_at;
		}
		if (check && !t->busy && t->state == TS_ONGOING && now - t->start_mono > t->timeout_ms) {
			/* a hanging transaction: fence its producer and abort */
			if (bump_epoch(tc, t) == 0) {
				slog(SLOG_WARN, "transactional id %s: transaction open for more than "
					"transaction.timeout.ms (%d ms): aborted, producer %lld fenced (epoch %d)",
					t->id, t->timeout_ms, (long long)t->pid, t->epoch);
				tc->st.timed_out++;
				txn_end(tc, t, 0);
			}
		}
		if (check && !t->busy && t->state != TS_ONGOING) {
			if (wall - t->last_wall > tc->expiration_ms) {
				/* idle for transactional.id.expiration.ms: forgotten
				 * (slot i now holds a shifted entry: look again) */
				hmap_del_at(&tc->txns, i);
				state_write(tc, t, 1, 0);
				txn_free(t);
				continue;
			}
		}
		i++;
	}
	return next > now ? (int)(next - now) : 0;
}

/* ---- report ---------------------------------------------------------------------- */

void txn_report(struct txn_coord *tc)
{
	int64_t now = ctl_now_ms(tc->ctl), wall = ctl_wall_ms(tc->ctl);
	int n = 0;

	slog(SLOG_INFO, "transactions: %llu begun, %llu committed, %llu aborted (%llu timed out), "
		"%llu fenced by InitProducerId, %llu late requests refused, %llu markers",
		(unsigned long long)tc->st.begun, (unsigned long long)tc->st.committed,
		(unsigned long long)tc->st.aborted, (unsigned long long)tc->st.timed_out,
		(unsigned long long)tc->st.fenced_by_init, (unsigned long long)tc->st.late_refused,
		(unsigned long long)tc->st.markers);
	for (uint32_t b = 0; b < tc->txns.cap; b++) {
		struct txn *t = tc->txns.v[b];

		if (!t)
			continue;
		if (t->state != TS_ONGOING && t->state != TS_PREPARE_COMMIT && t->state != TS_PREPARE_ABORT)
			continue;
		/* an open transaction holds back read_committed consumers of
		 * its partitions (their LSO): name it and its partitions */
		{
			/* one line: its partitions, the first 16 */
			char parts[1024];
			size_t k = 0;

			parts[0] = '\0';
			for (int i = 0; i < t->ntp && i < 16 && k < sizeof(parts); i++) {
				int w = snprintf(parts + k, sizeof(parts) - k, " %s-%d", t->tp[i].topic, t->tp[i].part);

				k += w > 0 ? (size_t)w : 0;
			}
			slog(SLOG_INFO, "  transactional id %s: %s, producer %lld epoch %d, open %lld ms (timeout %d ms), "
			     "%d partition(s):%s%s", t->id, tstate_names[t->state], (long long)t->pid, t->epoch,
			     (long long)(t->start_mono ? now - t->start_mono : wall - t->start_wall), t->timeout_ms,
			     t->ntp, parts, t->ntp > 16 ? " ..." : "");
		}
		n++;
	}
	if (!n)
		slog(SLOG_INFO, "  no open transaction");
}

/* ---- life ------------------------------------------------------------------------- */

int txn_coord_create(struct ctl *ctl, struct broker *b, const struct config *cfg, struct group_coord *gc,
		     struct txn_coord **out)
{
	struct txn_coord *tc = xcalloc(1, sizeof(*tc));

	tc->ctl = ctl;
	tc->b = b;
	tc->cfg = cfg;
	tc->gc = gc;
	group_set_txn_check(gc, txn_offsets_check, tc);
	tc->max_timeout_ms = (int32_t)config_int(cfg, "transaction.max.timeout.ms");
	tc->expiration_ms = config_int(cfg, "transactional.id.expiration.ms");
	tc->check_ms = config_int(cfg, "transaction.abort.timed.out.transaction.cleanup.interval.ms");
	tc->next_check = ctl_now_ms(tc->ctl) + tc->check_ms;
	*out = tc;
	return 0;
}

const struct txn_stats *txn_coord_stats(const struct txn_coord *tc)
{
	return &tc->st;
}

void txn_coord_destroy(struct txn_coord *tc)
{
	if (!tc)
		return;
	for (uint32_t i = 0; i < tc->txns.cap; i++)
		if (tc->txns.v[i])
			txn_free(tc->txns.v[i]);
	hmap_free(&tc->txns);
	while (tc->orphans) {
		struct txn *t = tc->orphans;

		tc->orphans = t->orphan_next;
		txn_free(t);
	}
	coord_load_fini(&tc->load);
	free(tc);
}
