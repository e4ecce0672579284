/* control/txn.c — the transaction coordinator (see txn.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/config.h"
#include "control/coord_load.h"
#include "control/ctl.h"
#include "control/cutil.h"
#include "control/group.h"
#include "control/hmap.h"
#include "control/peer_kafka.h"
#include "control/txn.h"
#include "dataplane/coord.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part_err.h"
#include "dataplane/part_proxy.h"
#include "storage/batch.h"
#include "storage/batch_format.h"

/* Kafka's TransactionState numbering, as written in the log. */
enum tstate { TS_EMPTY = 0, TS_ONGOING = 1, TS_PREPARE_COMMIT = 2, TS_PREPARE_ABORT = 3, TS_COMPLETE_COMMIT = 4,
	      TS_COMPLETE_ABORT = 5, TS_DEAD = 6 };
static const char *const tstate_names[] = { "Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
					    "CompleteCommit", "CompleteAbort", "Dead" };

#define MARKER_RETRY_MS 1000

struct txn;

struct txn_tp {
	char *topic;
	int32_t part;
	uint8_t marked;               /* this transaction's marker is durable here */
	struct txn *t;                /* back pointer while a marker is in flight */
	struct part_marker_req marker;   /* the marker on the owner (cookie: this) */
};

struct txn {
	char *id;
	int64_t pid;
	int16_t epoch;
	int16_t last_epoch;           /* the epoch before the last bump a producer asked for (KIP-360
				       * retries), -1: none */
	int32_t timeout_ms;
	enum tstate state;
	struct txn_tp *tp;
	int ntp, tp_cap;
	int nregistered;              /* tp[0..nregistered) are registered on their shards */
	int64_t start_wall, last_wall; /* wall ms: the log's timestamps */
	int64_t start_mono;           /* monotonic ms: the timeout */
	uint64_t begin_ns;            /* recv_ns of the request that began the transaction */
	uint64_t end_ns;              /* recv_ns of the EndTxn that ended the previous one */
	uint64_t conn_ns;             /* newest connection (accept time) the coordinator requests
				       * of the current transaction came on */
	int busy;                     /* a state write, registrations or markers in flight */
	int pending;                  /* acknowledgements outstanding */
	int16_t err;                  /* the first error among them */
	int commit;                   /* the decision being carried out */
	int64_t retry_at;             /* monotonic ms: markers to write again */
	struct kafka_ctx *ctx;        /* the request waiting, or NULL */
	int from;                     /* its shard */
	void (*then)(struct txn_coord *tc, struct txn *t);   /* after the state write */
	struct txn *orphan_next;      /* unloaded while busy: on tc->orphans until idle */
};

struct txn_coord {
	struct ctl *ctl;
	struct broker *b;
	const struct config *cfg;
	struct group_coord *gc;
	struct hmap txns;             /* struct txn, by transactional id: those of the
				       * __transaction_state partitions loaded here (or loading) */
	struct coord_load load;       /* which partitions this node coordinates
				       * (control/coord_load.h) */
	struct txn *orphans;          /* of partitions unloaded while a write, registration
				       * or marker was in flight: freed once idle */
	int32_t max_timeout_ms;
	int64_t expiration_ms, check_ms, next_check;
	int replays, registering;     /* start-up: partitions being read, Ongoing transactions
				       * registering again (plus one hold while reading) */
	void (*replay_done)(struct ctl *ctl);
	struct txn_stats st;
};

struct txn_req {                      /* what a request holds while the coordinator has it */
	int from;
};

/* ---- helpers ----------------------------------------------------------------- */

static int txn_eq(const void *item, const void *key)
{
	const struct txn *t = item;
	const struct kafka_str *id = key;

	return strlen(t->id) == (size_t)id->len && !memcmp(t->id, id->ptr, (size_t)id->len);
}

static int txn_is(const void *item, const void *key)
{
	return item == key;
}

static struct txn *txn_find(struct txn_coord *tc, struct kafka_str id)
{
	int64_t i;

	if (id.len <= 0)
		return NULL;
	i = hmap_find(&tc->txns, hmap_hash_mem(id.ptr, (size_t)id.len), txn_eq, &id);
	return i < 0 ? NULL : tc->txns.v[i];
}

static struct txn *txn_new(struct txn_coord *tc, struct kafka_str id)
{
	struct txn *t = xcalloc(1, sizeof(*t));

	t->id = kdup(id);
	t->pid = -1;
	t->epoch = -1;
	t->last_epoch = -1;
	hmap_put(&tc->txns, hmap_hash_mem(id.ptr, (size_t)id.len), t);
	return t;
}

static void tp_clear(struct txn *t)
{
	for (int i = 0; i < t->ntp; i++)
		free(t->tp[i].topic);
	t->ntp = 0;
	t->nregistered = 0;
}

static void txn_free(struct txn *t)
{
	tp_clear(t);
	free(t->tp);
	free(t->id);
	free(t);
}

static void txn_unlink(struct txn_coord *tc, struct txn *t)
{
	int64_t i = hmap_find(&tc->txns, hmap_hash_str(t->id), txn_is, t);

	if (i >= 0)
		hmap_del_at(&tc->txns, (uint32_t)i);
}

static int tp_index(const struct txn *t, const char *topic, size_t tlen, int32_t part)
{
	for (int i = 0; i < t->ntp; i++)
		if (t->tp[i].part == part && strlen(t->tp[i].topic) == tlen && !memcmp(t->tp[i].topic, topic, tlen))
			return i;
	return -1;
}

static void tp_add(struct txn *t, const char *topic, size_t tlen, int32_t part)
{
	if (tp_index(t, topic, tlen, part) >= 0)
		return;
	if (t->ntp == t->tp_cap) {
		t->tp_cap = t->tp_cap ? t->tp_cap * 2 : 8;
		t->tp = realloc(t->tp, sizeof(*t->tp) * (size_t)t->tp_cap);
		if (!t->tp)
			abort();
	}
	t->tp[t->ntp++] = (struct txn_tp){ .topic = kdup((struct kafka_str){ topic, (int32_t)tlen }), .part = part };
}

static const struct md_partition *tp_md(struct txn_coord *tc, const struct txn_tp *tp)
{
	const struct md_snapshot *md = tc->b->md;
	const struct md_topic *mt = md ? md_find(md, tp->topic, (int32_t)strlen(tp->topic)) : NULL;

	if (!mt || tp->part < 0 || tp->part >= mt->nparts)
		return NULL;
	return &mt->parts[tp->part];
}

/* Whether this node leads mp and has it open: its owner shard takes the
 * registrations and markers; another node's partition gets its markers
 * through WriteTxnMarkers and registers on a transactional produce
 * (KIP-890's verification). */
static int tp_here(const struct txn_coord *tc, const struct md_partition *mp)
{
	return mp->part && mp->leader == tc->b->set.node_id;
}

/* __transaction_state in the published snapshot (looked up each time: a
 * leader change republishes it), or NULL before it exists. */
static const struct md_topic *state_topic(const struct txn_coord *tc)
{
	const struct md_snapshot *md = tc->b->md;

	return md ? md_find(md, TXN_STATE_TOPIC, (int32_t)strlen(TXN_STATE_TOPIC)) : NULL;
}

/* Java's String.hashCode over the id, as Kafka picks the partition. */
static int32_t state_partition(const struct txn_coord *tc, const char *id)
{
	const struct md_topic *st = state_topic(tc);

	return java_key_partition(id, st ? st->nparts : 1);
}

/* 0 when id's partition is coordinated here, else the Kafka error. */
static int16_t key_err(const struct txn_coord *tc, struct kafka_str id)
{
	char buf[512];

	if (id.len <= 0 || id.len >= (int32_t)sizeof(buf))
		return 0;   /* the handler answers as it did */
	memcpy(buf, id.ptr, (size_t)id.len);
	buf[id.len] = 0;
	return coord_load_err(&tc->load, state_partition(tc, buf));
}

static void reply(struct txn_coord *tc, struct txn *t)
{
	struct kafka_ctx *ctx = t->ctx;

	t->ctx = NULL;
	if (ctx)
		ctl_reply(tc->ctl, ctx, t->from);
}

static void answer_now(struct txn_coord *tc, struct kafka_ctx *ctx)
{
	struct txn_req *rq = ctx->state;

	ctl_reply(tc->ctl, ctx, rq->from);
}

/* ---- the state log -------------------------------------------------------------- */


static void state_written(struct ctl *ctl, void *cookie, int64_t base, int err);

/* Write t's state (or, with tombstone, its removal) to __transaction_state;
 * t->then runs once durable (unless tombstone). */
static int state_write(struct txn_coord *tc, struct txn *t, int tombstone, int notify)
{
	const struct md_topic *st = state_topic(tc);
	int32_t idx = state_partition(tc, t->id);
	size_t cap = 256 + 2 * strlen(t->id), kl = 0, vl = 0;
	struct batch_builder bb;
	uint8_t *batch, *k, *v;
	ssize_t len;
	int ntopics = 0;

	if (!st || !st->parts[idx].part)
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
	return ctl_log_append(tc->ctl, &st->parts[idx], st->min_insync, batch, (uint32_t)len, state_written,
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
			fprintf(stderr, "sluiced: writing to %s failed: %s\n", TXN_STATE_TOPIC, strerror(-err));
		return;
	}
	if (err) {
		fprintf(stderr, "sluiced: transactional id %s: writing its state (%s) to %s failed: %s\n", t->id,
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
static void register_new(struct txn_coord *tc, struct txn *t)
{
	int from = t->nregistered;

	t->pending = 1;
	for (int i = from; i < t->ntp; i++) {
		const struct md_partition *mp = tp_md(tc, &t->tp[i]);
		struct part_proxy px;

		if (!mp || !tp_here(tc, mp))
			continue;   /* deleted meanwhile, or led by another node: its leader asks
				     * this coordinator when the producer writes there */
		t->pending++;
		part_proxy_txn_begin(ctl_part_proxy(tc->ctl, &px), mp->shard, mp->part, t->pid, t->epoch, t->begin_ns,
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
		fprintf(stderr, "sluiced: transactional id %s: %s-%d refused the %s marker of epoch %d (it knows a "
			"newer one): not written\n", t->id, tp->topic, tp->part, t->commit ? "COMMIT" : "ABORT",
			t->epoch);
		tp->marked = 1;
	} else if (err) {
		fprintf(stderr, "sluiced: transactional id %s: writing the %s marker to %s-%d failed: %s (retried)\n",
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

/* The answer of the leader on another node to one marker. */
static void remote_marker_done(struct ctl *ctl, void *cookie, int err, const void *body)
{
	struct txn_coord *tc = ctl_txns(ctl);
	struct txn_tp *tp = cookie;
	struct txn *t = tp->t;
	const struct kafka_write_txn_markers_response *r = body;
	int16_t kerr = KERR_UNKNOWN_SERVER_ERROR;

	if (!err && r && r->Markers.count == 1 && r->Markers.items[0].Topics.count == 1 &&
	    r->Markers.items[0].Topics.items[0].Partitions.count == 1)
		kerr = r->Markers.items[0].Topics.items[0].Partitions.items[0].ErrorCode;
	if (!err && kerr == KERR_NONE) {
		tp->marked = 1;
		tc->st.markers++;
		tc->st.remote_markers++;
	} else if (!err && (kerr == KERR_INVALID_PRODUCER_EPOCH || kerr == KERR_PRODUCER_FENCED)) {
		fprintf(stderr, "sluiced: transactional id %s: %s-%d refused the %s marker of epoch %d (it knows a "
			"newer one): not written\n", t->id, tp->topic, tp->part, t->commit ? "COMMIT" : "ABORT",
			t->epoch);
		tp->marked = 1;
	} else {
		/* NOT_LEADER_OR_FOLLOWER, the connection lost, ...: the leader
		 * is looked up again at the retry */
		if (err)
			fprintf(stderr, "sluiced: transactional id %s: the %s marker to %s-%d: no answer from its "
				"leader: %s (retried)\n", t->id, t->commit ? "COMMIT" : "ABORT", tp->topic, tp->part,
				strerror(-err));
		else
			fprintf(stderr, "sluiced: transactional id %s: the %s marker to %s-%d: its leader answered "
				"error %d (retried)\n", t->id, t->commit ? "COMMIT" : "ABORT", tp->topic, tp->part,
				kerr);
	}
	if (--t->pending == 0)
		markers_done(tc, t);
}

/* WriteTxnMarkers for tp to the node leading it: 0, or -errno (not sent:
 * retried with the others). */
static int send_remote_marker(struct txn_coord *tc, struct txn *t, struct txn_tp *tp, int32_t leader)
{
	struct kafka_write_txn_markers_request q;
	struct kafka_write_txn_markers_request_writable_txn_marker mk;
	struct kafka_write_txn_markers_request_writable_txn_marker_topic mt;
	int32_t part = tp->part;
	struct peer_kafka *pk = ctl_peers(tc->ctl);

	if (!pk)
		return -ENOTCONN;
	kafka_write_txn_markers_request_init(&q);
	memset(&mk, 0, sizeof(mk));
	memset(&mt, 0, sizeof(mt));
	mt.Name = (struct kafka_str){ tp->topic, (int32_t)strlen(tp->topic) };
	mt.PartitionIndexes.items = &part;
	mt.PartitionIndexes.count = 1;
	mk.ProducerId = t->pid;
	mk.ProducerEpoch = t->epoch;
	mk.TransactionResult = t->commit != 0;
	mk.Topics.items = &mt;
	mk.Topics.count = 1;
	mk.CoordinatorEpoch = 0;
	q.Markers.items = &mk;
	q.Markers.count = 1;
	return peer_kafka_send(pk, leader, KAFKA_WRITE_TXN_MARKERS_KEY, 1, &q, remote_marker_done, tp);
}

static void send_markers(struct txn_coord *tc, struct txn *t)
{
	t->pending = 1;
	for (int i = 0; i < t->ntp; i++) {
		struct txn_tp *tp = &t->tp[i];
		const struct md_partition *mp;

		if (tp->marked)
			continue;
		if (!(mp = tp_md(tc, tp))) {
			tp->marked = 1;   /* the topic is gone */
			continue;
		}
		tp->t = t;
		if (!tp_here(tc, mp)) {
			/* another node leads it (none: the retry looks again) */
			if (mp->leader >= 0 && mp->leader != tc->b->set.node_id &&
			    send_remote_marker(tc, t, tp, mp->leader) == 0)
				t->pending++;
			continue;
		}
		t->pending++;
		{
			struct part_proxy px;

			tp->marker = (struct part_marker_req){ .pid = t->pid, .epoch = t->epoch, .commit = t->commit,
							       .done = marker_done, .cookie = tp };
			part_proxy_txn_marker(ctl_part_proxy(tc->ctl, &px), mp->shard, mp->part, &tp->marker);
		}
	}
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
	tp_clear(t);
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
	send_markers(tc, t);
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
		answer_now(tc, ctx);
		return;
	}
	if (t && t->busy) {
		r->ErrorCode = KERR_CONCURRENT_TRANSACTIONS;
		answer_now(tc, ctx);
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
			answer_now(tc, ctx);
			return;
		}
		if (q->ProducerEpoch == t->last_epoch && t->state != TS_ONGOING) {
			/* a retry: the bump happened, answer it again */
			r->ProducerId = t->pid;
			r->ProducerEpoch = t->epoch;
			answer_now(tc, ctx);
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
			answer_now(tc, ctx);
			return;
		}
		tc->st.fenced_by_init++;
		txn_end(tc, t, 0);
		r->ErrorCode = KERR_CONCURRENT_TRANSACTIONS;
		answer_now(tc, ctx);
		return;
	}
	{
		int16_t before = t->epoch;
		int64_t pid_before = t->pid;

		if (bump_epoch(tc, t) < 0) {
			r->ErrorCode = KERR_COORDINATOR_NOT_AVAILABLE;
			answer_now(tc, ctx);
			return;
		}
		/* a bump the producer asked for can be retried (KIP-360) */
		t->last_epoch = ctx->req.header.RequestApiVersion >= 3 && q->ProducerId >= 0 && t->pid == pid_before
					? before : -1;
	}
	t->timeout_ms = q->TransactionTimeoutMs;
	t->state = TS_EMPTY;
	tp_clear(t);
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

/* The producer named by a request: 0 or the Kafka error. */
static int16_t check_producer(struct txn_coord *tc, const struct txn *t, int64_t pid, int16_t epoch)
{
	(void)tc;
	if (!t || t->pid != pid)
		return KERR_INVALID_PRODUCER_ID_MAPPING;
	if (epoch != t->epoch)
		return KERR_INVALID_PRODUCER_EPOCH;   /* v0-1 spell PRODUCER_FENCED so */
	if (t->busy)
		return KERR_CONCURRENT_TRANSACTIONS;
	return 0;
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
	tp_clear(t);
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
	register_new(tc, t);
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
	int16_t err = check_producer(tc, t, q->V3AndBelowProducerId, q->V3AndBelowProducerEpoch);
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
		answer_now(tc, ctx);
		return;
	}
	if (!err)
		err = open_txn(tc, t, ctx);
	if (err) {
		for (int i = 0; i < r->ResultsByTopicV3AndBelow.count; i++)
			for (int j = 0; j < r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.count; j++)
				r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.items[j].PartitionErrorCode = err;
		answer_now(tc, ctx);
		return;
	}
	for (int i = 0; i < r->ResultsByTopicV3AndBelow.count; i++) {
		struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *rt =
			&r->ResultsByTopicV3AndBelow.items[i];

		for (int j = 0; j < rt->ResultsByPartition.count; j++) {
			int before = t->ntp;

			tp_add(t, rt->Name.ptr, (size_t)rt->Name.len, rt->ResultsByPartition.items[j].PartitionIndex);
			added += t->ntp > before;
		}
	}
	if (!added) {
		answer_now(tc, ctx);   /* all in the transaction already */
		return;
	}
	add_and_register(tc, t, ctx);
}

static void handle_add_offsets(struct txn_coord *tc, struct kafka_ctx *ctx)
{
	struct kafka_add_offsets_to_txn_request *q = ctx->req.body;
	struct kafka_add_offsets_to_txn_response *r = ctx->resp;
	struct txn *t = txn_find(tc, q->TransactionalId);
	int16_t err = check_producer(tc, t, q->ProducerId, q->ProducerEpoch);
	char group[256];
	int32_t opart;
	int before;

	if (!err && (q->GroupId.len <= 0 || q->GroupId.len >= (int32_t)sizeof(group)))
		err = KERR_INVALID_GROUP_ID;
	if (!err)
		err = open_txn(tc, t, ctx);
	if (err) {
		r->ErrorCode = err;
		answer_now(tc, ctx);
		return;
	}
	memcpy(group, q->GroupId.ptr, (size_t)q->GroupId.len);
	group[q->GroupId.len] = 0;
	opart = group_offsets_partition(tc->gc, group);
	before = t->ntp;
	tp_add(t, GROUP_OFFSETS_TOPIC, strlen(GROUP_OFFSETS_TOPIC), opart);
	if (t->ntp == before) {
		answer_now(tc, ctx);
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
	int16_t err = check_producer(tc, t, q->ProducerId, q->ProducerEpoch);
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
		answer_now(tc, ctx);
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
	answer_now(tc, ctx);
}

int16_t txn_check_offsets(struct txn_coord *tc, struct kafka_str id, int64_t pid, int16_t epoch, int32_t opart,
			  uint64_t recv_ns)
{
	struct txn *t = txn_find(tc, id);
	int16_t err = key_err(tc, id);

	if (err)
		/* loading here (the id's coordinator on another node is asked
		 * by txn_offsets_check instead): retriable */
		return err == KERR_COORDINATOR_LOAD_IN_PROGRESS ? err : KERR_COORDINATOR_NOT_AVAILABLE;
	err = check_producer(tc, t, pid, epoch);
	if (err == KERR_CONCURRENT_TRANSACTIONS && t->state == TS_ONGOING)
		err = 0;   /* registrations of other partitions in flight */
	if (err)
		return err;
	if (t->state != TS_ONGOING || recv_ns < t->begin_ns ||
	    tp_index(t, GROUP_OFFSETS_TOPIC, strlen(GROUP_OFFSETS_TOPIC), opart) < 0)
		return KERR_INVALID_TXN_STATE;   /* AddOffsetsToTxn first, in this transaction */
	return 0;
}


/* ---- verification (KIP-890 part 1) ---------------------------------------------- */

/* Whether partition topic/part is in t's ongoing transaction of producer
 * pid at epoch: 0 or the Kafka error. recv_ns: when the asking request was
 * taken up on this node's clock (UINT64_MAX: not known, another node's). */
static int16_t verify_here(struct txn_coord *tc, const struct txn *t, int64_t pid, int16_t epoch,
			   struct kafka_str topic, int32_t part, uint64_t recv_ns)
{
	if (!t || t->pid != pid)
		return KERR_INVALID_PRODUCER_ID_MAPPING;
	if (epoch != t->epoch)
		return KERR_INVALID_PRODUCER_EPOCH;
	if (t->state != TS_ONGOING || topic.len <= 0 || tp_index(t, topic.ptr, (size_t)topic.len, part) < 0)
		return KERR_INVALID_TXN_STATE;   /* not added to this transaction */
	if (recv_ns != UINT64_MAX && recv_ns < t->begin_ns) {
		/* taken up before this transaction began: a late write of an
		 * earlier one (docs/transactions.md, Late requests) */
		tc->st.late_refused++;
		return KERR_INVALID_TXN_STATE;
	}
	return 0;
}

typedef void (*txn_verified_fn)(struct txn_coord *tc, void *cookie, int16_t err, uint64_t since_ns);

struct remote_verify {
	txn_verified_fn done;
	void *cookie;
};

/* The coordinator on another node answered AddPartitionsToTxn VerifyOnly. */
static void remote_verified(struct ctl *ctl, void *cookie, int err, const void *body)
{
	struct txn_coord *tc = ctl_txns(ctl);
	struct remote_verify *rv = cookie;
	const struct kafka_add_partitions_to_txn_response *r = body;
	int16_t kerr = KERR_COORDINATOR_NOT_AVAILABLE;   /* no answer: retriable */

	if (!err && r) {
		if (r->ErrorCode)
			kerr = r->ErrorCode;
		else if (r->ResultsByTransaction.count == 1 && r->ResultsByTransaction.items[0].TopicResults.count == 1 &&
			 r->ResultsByTransaction.items[0].TopicResults.items[0].ResultsByPartition.count == 1)
			kerr = r->ResultsByTransaction.items[0].TopicResults.items[0].ResultsByPartition.items[0]
				       .PartitionErrorCode;
	}
	tc->st.remote_verifies++;
	rv->done(tc, rv->cookie, kerr, 0);
	free(rv);
}

/* Kafka's answer to the producer for a coordinator's error (ReplicaManager
 * after AddPartitionsToTxnManager): a coordinator moving or busy is
 * retriable, NOT_ENOUGH_REPLICAS for clients that know no newer code. A
 * producer id that is not the transactional id's is in no transaction of
 * it: INVALID_TXN_STATE, as the partition answered it before it asked. */
static int16_t verify_error_for_producer(int16_t err)
{
	switch (err) {
	case KERR_INVALID_PRODUCER_ID_MAPPING:
		return KERR_INVALID_TXN_STATE;
	case KERR_COORDINATOR_NOT_AVAILABLE:
	case KERR_NOT_COORDINATOR:
	case KERR_COORDINATOR_LOAD_IN_PROGRESS:
	case KERR_CONCURRENT_TRANSACTIONS:
		return KERR_NOT_ENOUGH_REPLICAS;
	case KERR_PRODUCER_FENCED:
		return KERR_INVALID_PRODUCER_EPOCH;
	default:
		return err;
	}
}

/* Is topic/part in the ongoing transaction of id (pid, epoch)? Asked of
 * this node's coordinator state when the id is coordinated here, else of
 * the id's coordinator (the leader of its __transaction_state partition)
 * with AddPartitionsToTxn v4 VerifyOnly. done runs once, with 0 or the
 * Kafka code for the producer. */
static void txn_verify(struct txn_coord *tc, struct kafka_str id, int64_t pid, int16_t epoch, struct kafka_str topic,
		       int32_t part, uint64_t recv_ns, txn_verified_fn done, void *cookie)
{
	char buf[512];
	const struct md_topic *st = state_topic(tc);
	int16_t err;
	int32_t idx, leader;

	if (id.len <= 0 || id.len >= (int32_t)sizeof(buf) || !st) {
		done(tc, cookie, KERR_INVALID_TXN_STATE, 0);
		return;
	}
	memcpy(buf, id.ptr, (size_t)id.len);
	buf[id.len] = 0;
	idx = state_partition(tc, buf);
	err = coord_load_err(&tc->load, idx);
	if (!err) {
		struct txn *t = txn_find(tc, id);

		tc->st.verifies++;
		err = verify_here(tc, t, pid, epoch, topic, part, recv_ns);
		done(tc, cookie, err, err ? 0 : t->begin_ns);
		return;
	}
	leader = st->parts[idx].leader;
	if (err == KERR_NOT_COORDINATOR && leader >= 0 && leader != tc->b->set.node_id) {
		struct kafka_add_partitions_to_txn_request q;
		struct kafka_add_partitions_to_txn_request_add_partitions_to_txn_transaction tx;
		struct kafka_add_partitions_to_txn_request_add_partitions_to_txn_topic tt;
		struct remote_verify *rv = xcalloc(1, sizeof(*rv));
		struct peer_kafka *pk = ctl_peers(tc->ctl);

		kafka_add_partitions_to_txn_request_init(&q);
		memset(&tx, 0, sizeof(tx));
		memset(&tt, 0, sizeof(tt));
		tt.Name = topic;
		tt.Partitions.items = &part;
		tt.Partitions.count = 1;
		tx.TransactionalId = id;
		tx.ProducerId = pid;
		tx.ProducerEpoch = epoch;
		tx.VerifyOnly = true;
		tx.Topics.items = &tt;
		tx.Topics.count = 1;
		q.Transactions.items = &tx;
		q.Transactions.count = 1;
		rv->done = done;
		rv->cookie = cookie;
		if (pk && peer_kafka_send(pk, leader, KAFKA_ADD_PARTITIONS_TO_TXN_KEY, 4, &q, remote_verified, rv) == 0)
			return;
		free(rv);
	}
	/* loading here, or no coordinator now: retriable */
	done(tc, cookie, err == KERR_COORDINATOR_LOAD_IN_PROGRESS ? err : KERR_COORDINATOR_NOT_AVAILABLE, 0);
}

struct offsets_verify {
	struct group_coord *gc;
	group_txn_checked_fn *done;
	void *cookie;
};

static void offsets_verified(struct txn_coord *tc, void *cookie, int16_t err, uint64_t since_ns)
{
	struct offsets_verify *ov = cookie;

	(void)tc;
	(void)since_ns;
	ov->done(ov->gc, ov->cookie, err);
	free(ov);
}

/* TxnOffsetCommit's check (group_set_txn_check): this node's state when
 * it coordinates the id, else the id's coordinator on another node, asked
 * whether the group's offsets partition is in the transaction (as a
 * partition leader asks, AddPartitionsToTxn VerifyOnly). */
static void txn_offsets_check(void *arg, struct kafka_str id, int64_t pid, int16_t epoch, int32_t opart,
			      uint64_t recv_ns, group_txn_checked_fn *done, void *cookie)
{
	struct txn_coord *tc = arg;
	struct offsets_verify *ov;

	if (key_err(tc, id) != KERR_NOT_COORDINATOR) {
		done(tc->gc, cookie, txn_check_offsets(tc, id, pid, epoch, opart, recv_ns));
		return;
	}
	ov = xcalloc(1, sizeof(*ov));
	*ov = (struct offsets_verify){ tc->gc, done, cookie };
	txn_verify(tc, id, pid, epoch, (struct kafka_str){ GROUP_OFFSETS_TOPIC, (int32_t)strlen(GROUP_OFFSETS_TOPIC) },
		   opart, UINT64_MAX, offsets_verified, ov);
}

/* A shard's verification (struct coord_txn_verify), answered to it. */
static void shard_verified(struct txn_coord *tc, void *cookie, int16_t err, uint64_t since_ns)
{
	struct coord_txn_verify *v = cookie;
	struct shard_msg m = { .fn = v->done, .p = { v } };

	v->err = verify_error_for_producer(err);
	v->since_ns = since_ns;
	ctl_send_msg(tc->ctl, v->from, &m);
}

static void verify_msg(void *self, struct shard_msg *m)
{
	struct txn_coord *tc = ctl_txns(self);
	struct coord_txn_verify *v = m->p[0];

	txn_verify(tc, v->id, v->pid, v->epoch, v->topic, v->partition, v->recv_ns, shard_verified, v);
}

void txn_verify_submit(struct kafka_ctx *ctx, struct coord_txn_verify *v)
{
	struct shard_msg m = { .fn = verify_msg, .p = { v } };

	kafka_ctx_send_ctl(ctx, &m);
}

/* AddPartitionsToTxn v4+ (from partition leaders): VerifyOnly answered
 * from the state here, each transaction of the batch on its own. Adding
 * partitions (VerifyOnly false, KIP-890 part 2) is not served:
 * INVALID_REQUEST. */
static void handle_verify_only(struct txn_coord *tc, struct kafka_ctx *ctx)
{
	struct kafka_add_partitions_to_txn_request *q = ctx->req.body;
	struct kafka_add_partitions_to_txn_response *r = ctx->resp;

	for (int i = 0; i < r->ResultsByTransaction.count; i++) {
		struct kafka_add_partitions_to_txn_request_add_partitions_to_txn_transaction *tx = &q->Transactions.items[i];
		struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_result *rr = &r->ResultsByTransaction.items[i];
		int16_t terr = key_err(tc, tx->TransactionalId);
		struct txn *t = terr ? NULL : txn_find(tc, tx->TransactionalId);

		if (!terr && !tx->VerifyOnly)
			terr = KERR_INVALID_REQUEST;
		for (int j = 0; j < rr->TopicResults.count; j++) {
			struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *rt =
				&rr->TopicResults.items[j];

			for (int k = 0; k < rt->ResultsByPartition.count; k++) {
				struct kafka_add_partitions_to_txn_response_add_partitions_to_txn_partition_result *pr =
					&rt->ResultsByPartition.items[k];

				tc->st.verifies++;
				pr->PartitionErrorCode =
					terr ? terr
					     : verify_here(tc, t, tx->ProducerId, tx->ProducerEpoch, rt->Name,
							   pr->PartitionIndex, UINT64_MAX);
			}
		}
	}
	answer_now(tc, ctx);
}

/* ---- dispatch ------------------------------------------------------------------- */

static void txn_msg(void *self, struct shard_msg *m)
{
	struct txn_coord *tc = ctl_txns(self);
	struct kafka_ctx *ctx = m->p[0];
	int16_t err = 0;

	if (ctx->req.header.RequestApiKey == KAFKA_ADD_PARTITIONS_TO_TXN_KEY && ctx->req.header.RequestApiVersion >= 4) {
		handle_verify_only(tc, ctx);
		return;
	}
	/* the transactional id's partition of __transaction_state must be
	 * coordinated here (led and loaded): else NOT_COORDINATOR or
	 * COORDINATOR_LOAD_IN_PROGRESS, and the client finds it again */
	switch (ctx->req.header.RequestApiKey) {
	case KAFKA_INIT_PRODUCER_ID_KEY:
		if ((err = key_err(tc, ((struct kafka_init_producer_id_request *)ctx->req.body)->TransactionalId))) {
			struct kafka_init_producer_id_response *r = ctx->resp;

			r->ErrorCode = err;
			r->ProducerId = -1;
			r->ProducerEpoch = -1;
		}
		break;
	case KAFKA_ADD_PARTITIONS_TO_TXN_KEY:
		if ((err = key_err(tc, ((struct kafka_add_partitions_to_txn_request *)ctx->req.body)
					       ->V3AndBelowTransactionalId))) {
			struct kafka_add_partitions_to_txn_response *r = ctx->resp;

			for (int i = 0; i < r->ResultsByTopicV3AndBelow.count; i++)
				for (int j = 0; j < r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.count; j++)
					r->ResultsByTopicV3AndBelow.items[i].ResultsByPartition.items[j].PartitionErrorCode =
						err;
		}
		break;
	case KAFKA_ADD_OFFSETS_TO_TXN_KEY:
		if ((err = key_err(tc, ((struct kafka_add_offsets_to_txn_request *)ctx->req.body)->TransactionalId)))
			((struct kafka_add_offsets_to_txn_response *)ctx->resp)->ErrorCode = err;
		break;
	case KAFKA_END_TXN_KEY:
		if ((err = key_err(tc, ((struct kafka_end_txn_request *)ctx->req.body)->TransactionalId)))
			((struct kafka_end_txn_response *)ctx->resp)->ErrorCode = err;
		break;
	}
	if (err) {
		answer_now(tc, ctx);
		return;
	}
	switch (ctx->req.header.RequestApiKey) {
	case KAFKA_INIT_PRODUCER_ID_KEY: handle_init(tc, ctx); break;
	case KAFKA_ADD_PARTITIONS_TO_TXN_KEY: handle_add_partitions(tc, ctx); break;
	case KAFKA_ADD_OFFSETS_TO_TXN_KEY: handle_add_offsets(tc, ctx); break;
	case KAFKA_END_TXN_KEY: handle_end(tc, ctx); break;
	default:
		ctx->resp = NULL;
		answer_now(tc, ctx);
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

/* ---- replay ---------------------------------------------------------------------- */

static int rd_str(const uint8_t **p, const uint8_t *end, struct kafka_str *out)
{
	int16_t n;

	if (end - *p < 2)
		return -1;
	n = (int16_t)be16_load(*p);
	*p += 2;
	if (n < 0 || end - *p < n)
		return -1;
	*out = (struct kafka_str){ (const char *)*p, n };
	*p += n;
	return 0;
}

static void replay_record(struct txn_coord *tc, const struct record_view *rv)
{
	const uint8_t *k = rv->key, *kend = k + (rv->key_len > 0 ? rv->key_len : 0);
	const uint8_t *v = rv->value, *vend = v + (rv->value_len > 0 ? rv->value_len : 0);
	struct kafka_str id;
	struct txn *t;
	int32_t ntopics;

	if (!k || kend - k < 2 || be16_load(k) != 0)
		return;
	k += 2;
	if (rd_str(&k, kend, &id) < 0 || id.len <= 0)
		return;
	t = txn_find(tc, id);
	if (!v || rv->value_len < 0) {
		if (t) {
			txn_unlink(tc, t);
			txn_free(t);
		}
		return;
	}
	if (vend - v < 2 + 8 + 2 + 4 + 1 + 4 || be16_load(v) != 0)
		return;
	if (!t)
		t = txn_new(tc, id);
	tc->st.replayed_records++;
	v += 2;
	t->pid = (int64_t)be64_load(v);
	t->epoch = (int16_t)be16_load(v + 8);
	t->timeout_ms = (int32_t)be32_load(v + 10);
	t->state = v[14] <= TS_DEAD ? (enum tstate)v[14] : TS_EMPTY;
	ntopics = (int32_t)be32_load(v + 15);
	v += 19;
	tp_clear(t);
	for (int32_t i = 0; i < ntopics; i++) {
		struct kafka_str topic;
		int32_t np;

		if (rd_str(&v, vend, &topic) < 0 || vend - v < 4)
			return;
		np = (int32_t)be32_load(v);
		v += 4;
		for (int32_t j = 0; j < np && vend - v >= 4; j++, v += 4)
			tp_add(t, topic.ptr, (size_t)topic.len, (int32_t)be32_load(v));
	}
	if (vend - v >= 16) {
		t->last_wall = (int64_t)be64_load(v);
		t->start_wall = (int64_t)be64_load(v + 8);
	}
}

static void replay_chunk(void *self, void *cookie, const uint8_t *buf, uint32_t len, int32_t part)
{
	struct txn_coord *tc = ctl_txns(self);
	uint32_t at = 0;

	(void)part;
	if (!coord_load_current(&tc->load, coord_cookie_part(cookie), coord_cookie_gen(cookie)))
		return;   /* a load a leadership change overtook */
	while (at + BATCH_LOG_OVERHEAD <= len) {
		const uint8_t *b = buf + at;
		uint32_t size = batch_size(b);
		struct record_iter it;
		struct record_view rv;

		if (size > len - at || size < BATCH_HEADER_SIZE)
			break;
		if (!(batch_attributes(b) & (BATCH_ATTR_CODEC_MASK | BATCH_ATTR_CONTROL))) {
			record_iter_init(&it, b + BATCH_HEADER_SIZE, size - BATCH_HEADER_SIZE, batch_records_count(b));
			while (record_iter_next(&it, &rv) == 1)
				replay_record(tc, &rv);
		}
		at += size;
	}
}

/* The transactions of partition p, dropped (this node stopped leading
 * it): an idle one is freed; one with a write, registration or marker in
 * flight leaves the table for the orphans, freed once idle (its
 * completions still name it; what it writes where this node no longer
 * leads fails). Its waiting request is answered NOT_COORDINATOR then. */
static void unload_partition(struct txn_coord *tc, int32_t p)
{
	for (uint32_t i = 0; i < tc->txns.cap;) {
		struct txn *t = tc->txns.v[i];

		if (!t || state_partition(tc, t->id) != p) {
			i++;
			continue;
		}
		hmap_del_at(&tc->txns, i);   /* slot i now holds a shifted entry: look again */
		if (t->busy || t->pending || t->then || t->ctx) {
			t->orphan_next = tc->orphans;
			tc->orphans = t;
		} else {
			txn_free(t);
		}
	}
}

/* Partition p is read back: finish what its last coordinator left, as
 * Kafka's coordinator does on load: a PrepareCommit/PrepareAbort
 * transaction gets its markers (rolled forward), an Ongoing one has its
 * partitions take its batches again (it is aborted if it times out). */
static void load_finish(struct txn_coord *tc, int32_t p)
{
	int64_t now = ctl_now_ms(tc->ctl);

	for (uint32_t i = 0; i < tc->txns.cap; i++) {
		struct txn *t = tc->txns.v[i];

		if (!t || t->busy || state_partition(tc, t->id) != p)
			continue;
		if (t->state == TS_PREPARE_COMMIT || t->state == TS_PREPARE_ABORT) {
			/* decided, markers perhaps not all written: write them */
			t->commit = t->state == TS_PREPARE_COMMIT;
			t->busy = 1;
			for (int j = 0; j < t->ntp; j++)
				t->tp[j].marked = 0;
			send_markers(tc, t);
		} else if (t->state == TS_ONGOING) {
			/* the producer may go on: its partitions take its
			 * batches again; the timeout counts from now */
			t->start_mono = now;
			t->begin_ns = 0;
			t->busy = 1;
			t->nregistered = 0;
			if (tc->replays)
				tc->registering++;   /* start-up waits for it */
			register_new(tc, t);
		}
	}
}

static void replay_end(void *self, void *cookie)
{
	struct txn_coord *tc = ctl_txns(self);
	int32_t p = coord_cookie_part(cookie);

	if (coord_load_done(&tc->load, p, coord_cookie_gen(cookie))) {
		tc->st.partitions_loaded++;
		load_finish(tc, p);
	} else if (coord_load_err(&tc->load, p) == KERR_NOT_COORDINATOR) {
		unload_partition(tc, p);   /* overtaken: what it read goes */
	}
	if (tc->replays && --tc->replays == 0 && --tc->registering == 0 && tc->replay_done)
		tc->replay_done(tc->ctl);
}

static void load_partition(struct txn_coord *tc, const struct md_partition *mp, int32_t idx, uint32_t gen,
			   int64_t to)
{
	struct part_proxy px;

	part_proxy_read(ctl_part_proxy(tc->ctl, &px), mp->shard, mp->part, 0, to, replay_chunk, replay_end,
			coord_load_cookie(idx, gen));
}

void txn_replay(struct txn_coord *tc, void (*done)(struct ctl *ctl))
{
	const struct md_topic *st = state_topic(tc);
	int32_t self = tc->b->set.node_id;

	tc->replay_done = done;
	/* at start only the partitions alone here (the one-node broker's
	 * way, where serving waits for them); those with replicas load when
	 * this node is their leader (txn_lead) */
	tc->registering = 1;   /* held until every start-up partition is in */
	tc->replays = 1;
	if (st && coord_load_resize(&tc->load, st->nparts) == 0)
		for (int32_t i = 0; i < st->nparts; i++) {
			const struct md_partition *mp = &st->parts[i];
			uint32_t gen;

			if (!mp->part || mp->leader != self || mp->nreplicas != 1 ||
			    coord_load_lead(&tc->load, i, 1, &gen) != COORD_LOAD)
				continue;
			tc->replays++;
			load_partition(tc, mp, i, gen, INT64_MAX);
		}
	if (--tc->replays == 0 && --tc->registering == 0 && tc->replay_done)
		tc->replay_done(tc->ctl);
}

void txn_lead(struct txn_coord *tc, int32_t idx, int leads)
{
	const struct md_topic *st = state_topic(tc);
	uint32_t gen;

	if (!st || coord_load_resize(&tc->load, st->nparts) < 0 || idx >= st->nparts)
		return;
	if (leads && !st->parts[idx].part)
		return;   /* not open here yet: once it is */
	switch (coord_load_lead(&tc->load, idx, leads, &gen)) {
	case COORD_LOAD:
		load_partition(tc, &st->parts[idx], idx, gen, PART_READ_LOG_END);
		break;
	case COORD_UNLOAD:
		unload_partition(tc, idx);
		break;
	default:
		break;
	}
}

int32_t txn_partitions_loaded(const struct txn_coord *tc)
{
	return tc->load.loaded;
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

		if (!t || coord_load_err(&tc->load, state_partition(tc, t->id))) {
			i++;   /* (a partition still loading: not all read yet) */
			continue;
		}
		if (t->retry_at && now >= t->retry_at && t->busy && !t->pending) {
			t->retry_at = 0;
			send_markers(tc, t);
		} else if (t->retry_at && t->retry_at < next) {
			next = t->retry_at;
		}
		if (check && !t->busy && t->state == TS_ONGOING && now - t->start_mono > t->timeout_ms) {
			/* a hanging transaction: fence its producer and abort */
			if (bump_epoch(tc, t) == 0) {
				fprintf(stderr, "sluiced: transactional id %s: transaction open for more than "
					"transaction.timeout.ms (%d ms): aborted, producer %lld fenced (epoch %d)\n",
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

	fprintf(stderr, "sluiced: transactions: %llu begun, %llu committed, %llu aborted (%llu timed out), "
		"%llu fenced by InitProducerId, %llu late requests refused, %llu markers\n",
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
		fprintf(stderr, "sluiced:   transactional id %s: %s, producer %lld epoch %d, open %lld ms "
			"(timeout %d ms), %d partition(s):", t->id, tstate_names[t->state], (long long)t->pid,
			t->epoch, (long long)(t->start_mono ? now - t->start_mono : wall - t->start_wall),
			t->timeout_ms, t->ntp);
		for (int i = 0; i < t->ntp && i < 16; i++)
			fprintf(stderr, " %s-%d", t->tp[i].topic, t->tp[i].part);
		fprintf(stderr, "%s\n", t->ntp > 16 ? " ..." : "");
		n++;
	}
	if (!n)
		fprintf(stderr, "sluiced:   no open transaction\n");
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
