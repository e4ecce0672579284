/* dataplane/handlers_fetch.c — Fetch: each partition's read runs on its
 * owner shard, locally or through the ring; the response leaves when every
 * partition has answered, or parks (long-poll) until data, a high
 * watermark a follower was not told, or MaxWaitMs. @thread shard */
#include <errno.h>
#include <string.h>

#include "dataplane/authz.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part.h"
#include "dataplane/part_role.h"
#include "dataplane/repl_quota.h"
#include "dataplane/shard_core.h"
#include "storage/batch.h"
#include "storage/controls.h"

struct fetch_item {
	struct kafka_fetch_response_partition_data *pd;
	struct part *part;
	int owner;
	int64_t offset;
	int32_t max_bytes;
	struct part_read_req rq;         /* the read on the owner (its data: rq.rd) */
	struct kafka_ctx *ctx;
	int16_t err;
	int64_t hw, log_start, lso;
	int isolation;                   /* 1: read_committed */
	int64_t *ab_pid, *ab_first;      /* aborted transactions of the range (filled on the owner) */
	int ab_cap, ab_n;
	int32_t current_epoch;           /* v9+: the client's leader epoch, -1: none (KIP-320) */
	int32_t last_fetched_epoch;      /* v12+: the epoch of the last batch it has, -1: none */
	int32_t div_epoch;               /* the log diverges from the fetcher's after this epoch... */
	int64_t div_end;                 /* ...at this offset; div_epoch -1: it does not */
	int urgent;                      /* an epoch error or a divergence: answer without waiting */
	int32_t replica;                 /* a follower's replica fetch: its broker id; -1: a consumer */
	int hw_news;                     /* replica: a high watermark it was not told yet */
	int throttled;                   /* replica: over the leader's throttle, nothing read (repl_quota.h) */
	const uint8_t *topic_id;         /* the topic as asked (for a new session) */
	struct kafka_str topic;
};

struct fetch_state {
	int n;
	struct fetch_item *items;
	int refused;                     /* a replica fetch refused before any read: answer now */
	uint64_t news_ns;                /* replica: when a high watermark it was not told was
					  * first seen (0: none); the answer goes by then + FETCH_HW_NEWS_NS */
	int16_t version;
	int32_t replica;                 /* ReplicaId (v15+: ReplicaState.ReplicaId); -1: a consumer */
	int sess;                        /* FETCH_SESS_*: what the answer does with a session */
	int32_t sess_id;                 /* FETCH_SESS_INCREMENTAL: the session, items[i] its part i... */
	uint32_t sess_gen;               /* ...while its gen is this */
};

enum {
	FETCH_SESS_NONE,                 /* sessionless (epoch -1, or before v7) */
	FETCH_SESS_NEW,                  /* epoch 0: a full fetch that makes a session */
	FETCH_SESS_INCREMENTAL,          /* epoch > 0: the session's partitions, the changed ones answered */
};

/* A follower not told the latest high watermark gets it with the next
 * records, or alone this long after the watermark moved: not at once, which
 * would cost every follower an empty round trip each time the watermark
 * moves (twice per produce with two followers) while records come anyway. */
#define FETCH_HW_NEWS_NS 100000000ull

/* On the owner shard: drop a tail chunk reference and return a read
 * buffer. The message carries the values themselves: the plog_read they
 * came from lives in the requesting connection's arena, which is reused as
 * soon as the response is out. */
static void fetch_release_on_owner(void *self, struct shard_msg *m)
{
	struct shard *sh = self;

	if (m->p[0])
		tail_chunk_unref(&sh->st.tail, m->p[0]);
	part_rbuf_put(sh, m->p[1]);
}

/* A fetch response's hold (kafka_ctx_hold): its data goes back to the
 * owner. */
static void fetch_release_hold(struct shard *sh, struct data_hold *h)
{
	struct plog_read *rd = h->rd;
	struct shard_msg m = { .fn = fetch_release_on_owner, .p = { rd->chunk, rd->buf } };

	rd->chunk = NULL;
	rd->buf = NULL;
	rd->bytes = 0;
	shard_send(sh, h->shard, &m);
}

static void fetch_item_done_msg(void *self, struct shard_msg *m);
static void fetch_watch_msg(void *self, struct shard_msg *m);

/* The read finished on the owner: tell the requesting shard. */
static void fetch_read_finished(struct fetch_item *it)
{
	struct shard *owner = it->part->sh;
	struct kafka_ctx *ctx = it->ctx;

	if (it->part->pl && !it->urgent) {
		it->hw = it->part->pl->high_watermark;
		it->log_start = it->part->pl->log_start;
		it->lso = part_lso(it->part);
	}
	it->ab_n = 0;
	if (it->urgent && it->div_epoch >= 0 && it->part->pl) {
		it->hw = it->part->pl->high_watermark;
		it->log_start = it->part->pl->log_start;
		it->lso = part_lso(it->part);
	}
	if (it->replica >= 0 && it->part->pl && !it->urgent) {
		/* the follower learns the high watermark (its own is the
		 * least of that and its log end) */
		it->hw_news = part_role_fetch_ready(it->part, it->replica, INT64_MAX);
		part_role_note_sent(it->part, it->replica, it->hw);
		repl_quota_spend(it->part, it->replica, it->rq.rd.bytes);
	}
	if (it->isolation && it->rq.rd.bytes && it->part->txn.naborted) {
		/* the aborted transactions whose records the data may hold */
		int64_t end = it->offset;

		for (uint32_t at = 0; at + BATCH_HEADER_SIZE <= it->rq.rd.bytes; at += batch_size(it->rq.rd.data + at))
			end = batch_last_offset(it->rq.rd.data + at);
		it->ab_n = part_txn_aborted(&it->part->txn, it->offset, end, it->ab_pid, it->ab_first, it->ab_cap);
	}
	if (ctx->sh == owner) {
		struct shard_msg m = { .p = { it } };

		fetch_item_done_msg(ctx->sh, &m);
	} else {
		struct shard_msg m = { .fn = fetch_item_done_msg, .p = { it } };

		shard_send(owner, ctx->sh->id, &m);
	}
}

/* The owner's read ended: its outcome as the partition's Kafka error. */
static void fetch_read_done(void *cookie, struct part_read_req *rq, int err)
{
	struct fetch_item *it = cookie;

	switch (err) {
	case 0:
		/* the partition's fetched bytes (the console's out rate): read
		 * here, on the owner, which alone writes its part_pub */
		if (it->part->pub && rq->rd.bytes)
			part_pub_add(&it->part->pub->fetch_bytes, rq->rd.bytes);
		break;
	case -ENOENT:
		it->err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		it->hw = it->log_start = -1;
		break;
	case -ERANGE:
		it->err = KERR_OFFSET_OUT_OF_RANGE;
		if (it->replica >= 0 && it->part->pl)
			it->div_end = it->part->pl->next_offset;   /* the log end, for the follower */
		break;
	case -EAGAIN:
		break;                      /* nothing this time: the consumer asks again */
	default:
		it->err = KERR_KAFKA_STORAGE_ERROR;
	}
	fetch_read_finished(it);
}

/* On the owner, before the read: the client's leader epoch (KIP-320) and,
 * from a fetcher that says which epoch its last batch carried, whether its
 * log diverges from this one (Kafka's Partition.fetchRecords): the epoch's
 * end offset here is below the fetch offset, or this log knows only an
 * older epoch. Then no records: the error, or the diverging epoch and its
 * end offset, for the fetcher to truncate to (KIP-595's fetch path for
 * followers, and KIP-320's check). 1: answered so. */
static int fetch_epoch_check(struct fetch_item *it)
{
	it->urgent = 0;
	if (!part_fetch_epoch_check(it->part, it->current_epoch, it->last_fetched_epoch, it->offset, &it->err,
				    &it->div_epoch, &it->div_end))
		return 0;
	it->hw = it->log_start = it->lso = -1;
	if (it->err == KERR_OFFSET_OUT_OF_RANGE && it->replica >= 0) {
		/* a follower below the log start, or past the end: it starts
		 * its log at the log start, or cuts to the high watermark
		 * (Kafka's follower asks ListOffsets for them) */
		it->hw = it->part->pl->high_watermark;
		it->log_start = it->part->pl->log_start;
		it->div_end = it->part->pl->next_offset;   /* with no epoch: the log end */
	}
	it->urgent = 1;
	return 1;
}

/* On the owner: the read (part_read: from the tail, or from the disk into
 * one of the shard's read buffers). */
static void fetch_on_owner_buf(void *self, struct shard_msg *m)
{
	struct fetch_item *it = m->p[0];

	(void)self;
	if (fetch_epoch_check(it)) {
		it->rq.rd.bytes = 0;
		fetch_read_finished(it);
		return;
	}
	it->rq.offset = it->offset;
	it->rq.max_bytes = it->max_bytes > 0 ? (uint32_t)it->max_bytes : 0;
	it->rq.isolation = it->isolation;
	if (it->replica >= 0) {
		/* a follower's fetch: its offset is its durable log end (the
		 * high watermark follows); it reads up to the log end */
		if (part_role_replica_fetch(it->part, it->replica, it->offset, it->part->sh->now_ns) < 0) {
			/* not a follower of this leader (yet): Kafka's answer */
			it->err = it->current_epoch >= 0 ? KERR_UNKNOWN_LEADER_EPOCH : KERR_NOT_LEADER_OR_FOLLOWER;
			it->hw = it->log_start = it->lso = -1;
			it->urgent = 1;
			it->rq.rd.bytes = 0;
			fetch_read_finished(it);
			return;
		}
		it->rq.isolation = 2;
		if ((it->throttled = repl_quota_take(it->part, it->replica, &it->rq.max_bytes))) {
			it->rq.rd.bytes = 0;     /* over the leader's throttle: no records */
			fetch_read_finished(it);
			return;
		}
	}
	part_read(it->part, &it->rq, fetch_read_done, it);
}

static int fetch_round(struct kafka_ctx *ctx);
static int fetch_session_answer(struct kafka_ctx *ctx, struct fetch_state *fs);

/* The whole batches at the front of a partition's read that fit in `room`
 * bytes of the response (the request's max_bytes less what earlier
 * partitions took); the first batch of the response always goes, however
 * large (KIP-74), so a consumer is never stuck behind a large batch. */
static uint32_t fetch_fit(const uint8_t *data, uint32_t bytes, int64_t room, int first)
{
	uint32_t at = 0;

	while (at + BATCH_LOG_OVERHEAD <= bytes) {
		uint32_t size = batch_size(data + at);

		if (size > bytes - at)
			break;
		if ((int64_t)at + size > room && !(first && at == 0))
			break;
		at += size;
	}
	return at;
}

static int fetch_complete(struct kafka_ctx *ctx)
{
	struct kafka_fetch_request *q = ctx->req.body;
	struct fetch_state *fs = ctx->state;
	struct shard *sh = ctx->sh;
	int64_t total = 0;
	int again = 0, urgent = fs->refused, news = 0;

	for (int i = 0; i < fs->n; i++) {
		struct fetch_item *it = &fs->items[i];

		if (it->part && it->ab_n > it->ab_cap) {
			/* more aborted transactions than room: read again with room */
			it->ab_pid = ALLOC(ctx, int64_t, it->ab_n);
			it->ab_first = ALLOC(ctx, int64_t, it->ab_n);
			if (!it->ab_pid || !it->ab_first) {
				kafka_ctx_abort(ctx);
				return 0;
			}
			it->ab_cap = it->ab_n;
			again = 1;
		}
	}
	if (again) {
		for (int i = 0; i < fs->n; i++) {
			struct fetch_item *it = &fs->items[i];
			struct data_hold h = { it->owner, &it->rq.rd, fetch_release_hold };

			if (it->part && (it->rq.rd.bytes || it->rq.rd.buf || it->rq.rd.chunk))
				fetch_release_hold(sh, &h);
		}
		return fetch_round(ctx);
	}
	for (int i = 0; i < fs->n; i++) {
		struct fetch_item *it = &fs->items[i];

		if (!it->part)
			continue;
		it->pd->ErrorCode = it->err;
		if (it->div_epoch >= 0 || it->div_end >= 0) {
			/* a divergence; or, epoch -1, a replica's out of range: the log end */
			it->pd->DivergingEpoch.Epoch = it->div_epoch;
			it->pd->DivergingEpoch.EndOffset = it->div_end;
		}
		urgent |= it->urgent;
		news |= it->hw_news;
		it->pd->HighWatermark = it->hw;
		it->pd->LastStableOffset = it->lso;
		it->pd->LogStartOffset = it->log_start;
		if (it->isolation) {
			struct kafka_fetch_response_aborted_transaction *a =
				ALLOC(ctx, struct kafka_fetch_response_aborted_transaction, it->ab_n);

			if (!a) {
				kafka_ctx_abort(ctx);
				return 0;
			}
			for (int j = 0; j < it->ab_n; j++) {
				a[j].ProducerId = it->ab_pid[j];
				a[j].FirstOffset = it->ab_first[j];
			}
			it->pd->AbortedTransactions.items = a;
			it->pd->AbortedTransactions.count = it->ab_n;
		}
		it->pd->Records = (struct kafka_bytes){ NULL, 0 };
		if (it->rq.rd.bytes) {
			uint32_t n = fetch_fit(it->rq.rd.data, it->rq.rd.bytes, (int64_t)q->MaxBytes - total, total == 0);

			if (n) {
				it->pd->Records = (struct kafka_bytes){ it->rq.rd.data, (int32_t)n };
				total += n;
				if (it->replica >= 0)
					shard_stat_add(&sh->stats.repl_bytes_out, n);
			}
		}
		if (it->rq.rd.bytes || it->rq.rd.buf)
			kafka_ctx_hold(ctx, it->owner, &it->rq.rd, fetch_release_hold);
	}
	/* (an epoch error or a divergence is answered at once, as Kafka does) */
	if (!ctx->final && !urgent && total < (q->MinBytes > 0 ? q->MinBytes : 1) && q->MaxWaitMs > 0) {
		/* long-poll: let go of the data, watch the partitions, wait */
		uint64_t deadline = ctx->started_ns + (uint64_t)q->MaxWaitMs * 1000000ull;

		if (news && !fs->news_ns)
			fs->news_ns = sh->now_ns;
		if (fs->news_ns && fs->news_ns + FETCH_HW_NEWS_NS < deadline)
			deadline = fs->news_ns + FETCH_HW_NEWS_NS;
		kafka_ctx_release_holds(ctx);
		if (deadline > sh->now_ns) {
			for (int i = 0; i < fs->n; i++) {
				struct fetch_item *it = &fs->items[i];
				struct shard_msg m = { .fn = fetch_watch_msg, .p = { it->part },
						       .v = { sh->id, it->offset, it->isolation, it->replica } };

				if (it->part && !it->throttled)   /* throttled: its wait out */
					shard_send(sh, it->owner, &m);
			}
			ctx->resume = fetch_round;
			ctx->parked_once = 1;
			kafka_ctx_park(ctx, deadline);
			return 0;
		}
		ctx->final = 1;
		return fetch_round(ctx);
	}
	shard_stat_add(&sh->stats.fetch_bytes, (uint64_t)total);
	if (ctx->parked_once)
		shard_stat_add(&sh->stats.fetch_waits, 1);
	if (fs->sess != FETCH_SESS_NONE && fetch_session_answer(ctx, fs) < 0) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_ctx_respond(ctx);
	return 0;
}

static void fetch_item_done_msg(void *self, struct shard_msg *m)
{
	struct fetch_item *it = m->p[0];

	(void)self;
	kafka_ctx_sub_done(it->ctx);
}

/* One round of reads over every partition of the request. */
static int fetch_round(struct kafka_ctx *ctx)
{
	struct fetch_state *fs = ctx->state;
	struct shard *sh = ctx->sh;

	if (ctx->park.deadline_ns && sh->now_ns >= ctx->park.deadline_ns)
		ctx->final = 1;
	ctx->pending = 1;
	ctx->resume = fetch_complete;
	for (int i = 0; i < fs->n; i++) {
		struct fetch_item *it = &fs->items[i];
		struct shard_msg m = { .fn = fetch_on_owner_buf, .p = { it } };

		if (!it->part)
			continue;
		it->err = 0;
		ctx->pending++;
		shard_send(sh, it->owner, &m);
	}
	kafka_ctx_sub_done(ctx);
	return 0;
}

static void fetch_watch_msg(void *self, struct shard_msg *m)
{
	struct shard *sh = self;
	struct part *p = m->p[0];
	int from = (int)m->v[0];

	if (p->deleted) {
		/* nothing to watch: let the long-poll answer now */
		if (from == sh->id) {
			shard_wake_parked(sh);
		} else {
			struct shard_msg w = { .fn = shard_wake_parked_msg };

			shard_send(sh, from, &w);
		}
		return;
	}
	if (m->v[3] >= 0 && p->role) {
		/* a follower's: woken when the log end moves (a high watermark
		 * alone waits for records or FETCH_HW_NEWS_NS) */
		p->role->fetch_watchers |= 1ull << from;
		if (!p->pl || p->pl->next_offset > m->v[1])
			part_role_wake_now(p);
		return;
	}
	p->watchers |= 1ull << from;
	if ((m->v[2] ? part_lso(p) : p->pl->high_watermark) > m->v[1]) {
		/* data arrived meanwhile: wake now */
		p->last_hw = -1;
		part_progress(p);
	}
	(void)sh;
}

/* ---- building the fetch: its partitions, from the request or a session -- */

/* One partition to read, as asked: by the request, or kept by a session. */
struct fetch_want {
	int32_t partition;
	int64_t offset;
	int32_t max_bytes;
	int32_t current_epoch;           /* -1 before v9 */
	int32_t last_fetched_epoch;      /* -1 before v12 */
};

/* A response partition and its read. t NULL: the topic is unknown (err
 * says how). 0, or -1 when the arena is out. */
static int fetch_item_setup(struct kafka_ctx *ctx, struct fetch_state *fs, struct fetch_item *it,
			    struct kafka_fetch_response_partition_data *pd, const struct md_topic *t, int16_t unknown,
			    const struct fetch_want *w)
{
	struct kafka_fetch_request *q = ctx->req.body;
	const struct md_partition *mp = NULL;
	int32_t self = ctx->sh->b->set.node_id;
	int16_t led = t ? md_part_led(t, w->partition, self, &mp) : unknown;

	memset(pd, 0, sizeof(*pd));
	pd->PartitionIndex = w->partition;
	pd->HighWatermark = -1;
	pd->LastStableOffset = -1;
	pd->LogStartOffset = -1;
	pd->AbortedTransactions.count = q->IsolationLevel ? 0 : -1;
	pd->PreferredReadReplica = -1;
	/* v12's tagged fields: written only when they differ from these */
	pd->DivergingEpoch.Epoch = pd->CurrentLeader.LeaderId = pd->CurrentLeader.LeaderEpoch = -1;
	pd->DivergingEpoch.EndOffset = pd->SnapshotId.EndOffset = -1;
	pd->SnapshotId.Epoch = -1;
	pd->Records = (struct kafka_bytes){ NULL, 0 };
	it->pd = pd;
	it->ctx = ctx;
	it->offset = w->offset;
	it->max_bytes = w->max_bytes;
	it->current_epoch = w->current_epoch;
	it->last_fetched_epoch = w->last_fetched_epoch;
	it->div_epoch = -1;
	it->div_end = -1;
	if (!mp) {
		pd->ErrorCode = led;
		return 0;
	}
	if (fs->replica >= 0 && (fs->replica == self || !md_part_hosted(mp, fs->replica))) {
		/* Kafka's Partition.followerReplicaOrThrow: not one of its
		 * replicas (yet, when it names the current epoch) */
		pd->ErrorCode = w->current_epoch >= 0 ? KERR_UNKNOWN_LEADER_EPOCH : KERR_NOT_LEADER_OR_FOLLOWER;
		fs->refused = 1;   /* as Kafka: an error answers at once */
		return 0;
	}
	it->part = md_part_owner(mp);
	it->owner = mp->owner_shard;
	it->replica = fs->replica;
	it->isolation = q->IsolationLevel == 1 && it->replica < 0 && !SLUICE_CONTROL_OFF(lso_ignored);
	if (it->isolation) {
		it->ab_cap = 16;
		it->ab_pid = ALLOC(ctx, int64_t, it->ab_cap);
		it->ab_first = ALLOC(ctx, int64_t, it->ab_cap);
		if (!it->ab_pid || !it->ab_first)
			return -1;
	}
	return 0;
}

/* The topic a request or session names: by id from v13 (KIP-516; an
 * unknown id is UNKNOWN_TOPIC_ID, as Kafka answers), else by name. */
static const struct md_topic *fetch_topic_find(const struct fetch_state *fs, const struct md_snapshot *md,
					       const uint8_t id[16], struct kafka_str name, int16_t *unknown)
{
	if (fs->version >= 13) {
		*unknown = KERR_UNKNOWN_TOPIC_ID;
		return md_find_id(md, id);
	}
	*unknown = KERR_UNKNOWN_TOPIC_OR_PARTITION;
	return name.len > 0 ? md_find(md, name.ptr, name.len) : NULL;
}

/* ... and the authorizer's word: a consumer needs READ on the topic, a
 * follower CLUSTER_ACTION on the cluster; refused: no topic, the error
 * TOPIC_AUTHORIZATION_FAILED (CLUSTER_AUTHORIZATION_FAILED). An id no
 * topic has is UNKNOWN_TOPIC_ID before any check (Kafka's order: it names
 * nothing to authorize). */
static const struct md_topic *fetch_topic(struct kafka_ctx *ctx, const struct fetch_state *fs,
					  const struct md_snapshot *md, const uint8_t id[16], struct kafka_str name,
					  int16_t *unknown)
{
	const struct md_topic *t = fetch_topic_find(fs, md, id, name, unknown);

	if (!t && fs->version >= 13)
		return NULL;
	if (fs->replica >= 0 ? !authz_cluster(ctx, ACL_CLUSTER_ACTION)
			     : !authz_allow(ctx, ACL_READ, ACL_RES_TOPIC, t ? t->name : name.ptr,
					    t ? (size_t)t->name_len : name.len > 0 ? (size_t)name.len : 0)) {
		*unknown = fs->replica >= 0 ? KERR_CLUSTER_AUTHORIZATION_FAILED : KERR_TOPIC_AUTHORIZATION_FAILED;
		return NULL;
	}
	return t;
}

/* A full fetch: the request's partitions, in its order. */
static int fetch_from_request(struct kafka_ctx *ctx, struct fetch_state *fs, struct kafka_fetch_response *r)
{
	struct kafka_fetch_request *q = ctx->req.body;
	struct md_snapshot *md = broker_md(ctx->sh->b);
	int total = 0, k = 0;

	for (int i = 0; i < q->Topics.count; i++)
		total += q->Topics.items[i].Partitions.count > 0 ? q->Topics.items[i].Partitions.count : 0;
	fs->items = ALLOC(ctx, struct fetch_item, total);
	r->Responses.items = ALLOC(ctx, struct kafka_fetch_response_fetchable_topic_response, q->Topics.count);
	if (!fs->items || !r->Responses.items)
		return -1;
	memset(fs->items, 0, sizeof(*fs->items) * (size_t)(total ? total : 1));
	fs->n = total;
	r->Responses.count = q->Topics.count < 0 ? 0 : q->Topics.count;
	for (int i = 0; i < r->Responses.count; i++) {
		struct kafka_fetch_request_fetch_topic *ft = &q->Topics.items[i];
		struct kafka_fetch_response_fetchable_topic_response *rt = &r->Responses.items[i];
		int16_t unknown;
		const struct md_topic *t = fetch_topic(ctx, fs, md, ft->TopicId.b, ft->Topic, &unknown);
		int np = ft->Partitions.count < 0 ? 0 : ft->Partitions.count;

		rt->Topic = ft->Topic;
		rt->TopicId = ft->TopicId;
		rt->Partitions.items = ALLOC(ctx, struct kafka_fetch_response_partition_data, np);
		if (!rt->Partitions.items)
			return -1;
		rt->Partitions.count = np;
		for (int j = 0; j < np; j++, k++) {
			struct kafka_fetch_request_fetch_partition *fp = &ft->Partitions.items[j];
			struct fetch_want w = { fp->Partition, fp->FetchOffset, fp->PartitionMaxBytes,
						fp->CurrentLeaderEpoch, fp->LastFetchedEpoch };

			fs->items[k].topic_id = ft->TopicId.b;
			fs->items[k].topic = ft->Topic;
			if (fetch_item_setup(ctx, fs, &fs->items[k], &rt->Partitions.items[j], t, unknown, &w) < 0)
				return -1;
		}
	}
	return 0;
}

/* An incremental fetch: every partition of the session, in its order,
 * consecutive partitions of one topic under one topic entry, as Kafka's
 * response groups them. */
static int fetch_from_session(struct kafka_ctx *ctx, struct fetch_state *fs, struct kafka_fetch_response *r,
			      const struct fsess *s)
{
	struct md_snapshot *md = broker_md(ctx->sh->b);
	struct kafka_fetch_response_fetchable_topic_response *rt = NULL;
	const struct md_topic *t = NULL;
	int16_t unknown = 0;

	fs->items = ALLOC(ctx, struct fetch_item, s->nparts);
	r->Responses.items = ALLOC(ctx, struct kafka_fetch_response_fetchable_topic_response, s->nparts);
	if (!fs->items || !r->Responses.items)
		return -1;
	memset(fs->items, 0, sizeof(*fs->items) * (size_t)(s->nparts ? s->nparts : 1));
	fs->n = s->nparts;
	r->Responses.count = 0;
	for (int i = 0; i < s->nparts; i++) {
		const struct fsess_part *sp = &s->parts[i];
		struct fetch_want w = { sp->partition, sp->fetch_offset, sp->max_bytes, sp->current_epoch,
					sp->last_fetched_epoch };

		if (!i || (s->topic_ids ? memcmp(sp->topic_id, s->parts[i - 1].topic_id, 16)
					: sp->name_off != s->parts[i - 1].name_off)) {
			struct kafka_str name = { NULL, 0 };
			int n = 1;

			while (i + n < s->nparts && (s->topic_ids ? !memcmp(s->parts[i + n].topic_id, sp->topic_id, 16)
								  : s->parts[i + n].name_off == sp->name_off))
				n++;
			if (!s->topic_ids) {
				/* the name, copied: the session may change while this fetch waits */
				char *c = ALLOC(ctx, char, sp->name_len + 1);

				if (!c)
					return -1;
				memcpy(c, fsess_part_name(s, sp), (size_t)sp->name_len);
				name = (struct kafka_str){ c, sp->name_len };
			}
			rt = &r->Responses.items[r->Responses.count++];
			memset(rt, 0, sizeof(*rt));
			rt->Topic = name;
			memcpy(rt->TopicId.b, sp->topic_id, 16);
			rt->Partitions.items = ALLOC(ctx, struct kafka_fetch_response_partition_data, n);
			if (!rt->Partitions.items)
				return -1;
			t = fetch_topic(ctx, fs, md, sp->topic_id, name, &unknown);
		}
		if (fetch_item_setup(ctx, fs, &fs->items[i], &rt->Partitions.items[rt->Partitions.count++], t,
				     unknown, &w) < 0)
			return -1;
	}
	return 0;
}

/* The cache's size and evictions, for the scrape. */
static void fetch_session_stats(struct shard *sh)
{
	__atomic_store_n(&sh->stats.fetch_sessions, (uint64_t)sh->fsess.used, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->stats.fetch_session_evictions, sh->fsess.evictions, __ATOMIC_RELAXED);
}

/* KIP-227 on the request: a full fetch closes the session it names and,
 * at epoch 0, will make one; an incremental one updates its session
 * (partitions added or changed, ForgottenTopicsData dropped) and fetches
 * all of its partitions. Kafka's FetchManager.newContext. Returns the
 * session to fetch from, or NULL for the request's partitions; *err a
 * top-level error to answer with at once. */
static struct fsess *fetch_session_open(struct kafka_ctx *ctx, struct fetch_state *fs, int16_t *err)
{
	struct kafka_fetch_request *q = ctx->req.body;
	struct fsess_cache *c = &ctx->sh->fsess;
	struct fsess *s;

	*err = 0;
	fs->sess = FETCH_SESS_NONE;
	if (fs->version < 7)
		return NULL;
	if (q->SessionEpoch == 0 || q->SessionEpoch == -1) {
		if (q->SessionId)
			fsess_remove(c, fsess_find(c, q->SessionId));
		if (q->SessionEpoch == 0)
			fs->sess = FETCH_SESS_NEW;
		return NULL;
	}
	s = fsess_find(c, q->SessionId);
	if (!s) {
		*err = KERR_FETCH_SESSION_ID_NOT_FOUND;
		return NULL;
	}
	if (s->epoch != q->SessionEpoch) {
		*err = KERR_INVALID_FETCH_SESSION_EPOCH;
		return NULL;
	}
	if (s->topic_ids != (fs->version >= 13)) {
		*err = KERR_FETCH_SESSION_TOPIC_ID_ERROR;
		return NULL;
	}
	for (int i = 0; i < q->Topics.count; i++) {
		struct kafka_fetch_request_fetch_topic *ft = &q->Topics.items[i];

		for (int j = 0; j < ft->Partitions.count; j++) {
			struct kafka_fetch_request_fetch_partition *fp = &ft->Partitions.items[j];
			int k = fsess_part_upsert(s, ft->TopicId.b, ft->Topic.ptr, ft->Topic.len, fp->Partition);
			struct fsess_part *sp;

			if (k < 0) {
				/* out of memory: the session goes, the client starts anew */
				fsess_remove(c, s);
				*err = KERR_FETCH_SESSION_ID_NOT_FOUND;
				return NULL;
			}
			sp = &s->parts[k];
			sp->fetch_offset = fp->FetchOffset;
			sp->max_bytes = fp->PartitionMaxBytes;
			sp->current_epoch = fp->CurrentLeaderEpoch;
			sp->last_fetched_epoch = fp->LastFetchedEpoch;
		}
	}
	for (int i = 0; i < q->ForgottenTopicsData.count; i++) {
		struct kafka_fetch_request_forgotten_topic *ft = &q->ForgottenTopicsData.items[i];

		for (int j = 0; j < ft->Partitions.count; j++)
			fsess_part_forget(s, ft->TopicId.b, ft->Topic.ptr, ft->Topic.len, ft->Partitions.items[j]);
	}
	if (!s->nparts) {
		/* nothing left: the session closes, the fetch is sessionless */
		fsess_remove(c, s);
		return NULL;
	}
	fsess_touch(s, ctx->sh->now_ns);
	s->epoch = fsess_next_epoch(s->epoch);
	fs->sess = FETCH_SESS_INCREMENTAL;
	fs->sess_id = s->id;
	fs->sess_gen = s->gen;
	return s;
}

/* KIP-227 on the answer, once every read is in. A full fetch at epoch 0
 * makes its session now (SessionId 0 when the cache has no room for it);
 * an incremental one answers only the partitions with records, an error,
 * a diverging epoch, or a high watermark or log start the client was not
 * told (Kafka's CachedPartition.maybeUpdateResponseData), and moves those
 * with records to the end of the session's order so that the next
 * fetches serve the others first. -1: the arena is out. */
static int fetch_session_answer(struct kafka_ctx *ctx, struct fetch_state *fs)
{
	struct kafka_fetch_response *r = ctx->resp;
	struct fsess_cache *c = &ctx->sh->fsess;
	struct fsess *s;

	if (fs->sess == FETCH_SESS_NEW) {
		s = fsess_create(c, fs->replica >= 0, fs->n, fs->version >= 13, ctx->sh->now_ns);
		for (int i = 0; s && i < fs->n; i++) {
			struct fetch_item *it = &fs->items[i];
			int k = fsess_part_upsert(s, it->topic_id, it->topic.ptr, it->topic.len, it->pd->PartitionIndex);
			struct fsess_part *sp;

			if (k < 0) {
				fsess_remove(c, s);
				s = NULL;
				break;
			}
			sp = &s->parts[k];
			sp->fetch_offset = it->offset;
			sp->max_bytes = it->max_bytes;
			sp->current_epoch = it->current_epoch;
			sp->last_fetched_epoch = it->last_fetched_epoch;
			sp->hw_sent = it->pd->ErrorCode ? -1 : it->pd->HighWatermark;
			sp->log_start_sent = it->pd->LogStartOffset;
		}
		r->SessionId = s ? s->id : 0;
		fetch_session_stats(ctx->sh);
		return 0;
	}
	s = fsess_find(c, fs->sess_id);
	if (!s || s->gen != fs->sess_gen || s->nparts != fs->n) {
		/* the session changed while this fetch waited: Kafka's answer
		 * to a duplicate request */
		r->ErrorCode = KERR_INVALID_FETCH_SESSION_EPOCH;
		r->SessionId = fs->sess_id;
		r->Responses.count = 0;
		return 0;
	}
	r->SessionId = s->id;
	{
		struct fsess_part *moved = ALLOC(ctx, struct fsess_part, s->nparts);
		int nmoved = 0, kept = 0, k = 0;

		if (!moved)
			return -1;
		for (int ti = 0; ti < r->Responses.count; ti++) {
			struct kafka_fetch_response_fetchable_topic_response *rt = &r->Responses.items[ti];
			int out = 0;

			for (int j = 0; j < rt->Partitions.count; j++, k++) {
				struct kafka_fetch_response_partition_data *pd = &rt->Partitions.items[j];
				struct fsess_part *sp = &s->parts[k];
				int must = pd->Records.len > 0 || pd->ErrorCode || pd->DivergingEpoch.Epoch >= 0;

				if (sp->hw_sent != pd->HighWatermark) {
					must = 1;
					sp->hw_sent = pd->HighWatermark;
				}
				if (sp->log_start_sent != pd->LogStartOffset) {
					must = 1;
					sp->log_start_sent = pd->LogStartOffset;
				}
				if (pd->ErrorCode)
					sp->hw_sent = -1;
				if (pd->Records.len > 0)
					moved[nmoved++] = *sp;
				else
					s->parts[kept++] = *sp;
				if (must)
					rt->Partitions.items[out++] = *pd;
			}
			rt->Partitions.count = out;
		}
		memcpy(&s->parts[kept], moved, (size_t)nmoved * sizeof(*moved));
		/* topics left with no partition leave the answer */
		k = 0;
		for (int ti = 0; ti < r->Responses.count; ti++)
			if (r->Responses.items[ti].Partitions.count)
				r->Responses.items[k++] = r->Responses.items[ti];
		r->Responses.count = k;
	}
	return 0;
}

int kafka_handle_fetch(struct kafka_ctx *ctx)
{
	struct kafka_fetch_request *q = ctx->req.body;
	struct shard *sh = ctx->sh;
	struct kafka_fetch_response *r = ALLOC(ctx, struct kafka_fetch_response, 1);
	struct fetch_state *fs = ALLOC(ctx, struct fetch_state, 1);
	struct fsess *s;
	int16_t err;

	shard_stat_add(&sh->stats.fetch_requests, 1);
	if (!r || !fs) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_fetch_response_init(r);
	memset(fs, 0, sizeof(*fs));
	r->SessionId = 0;
	fs->version = ctx->req.header.RequestApiVersion;
	/* v15 (KIP-903): the follower's id moves into ReplicaState */
	fs->replica = fs->version >= 15 ? q->ReplicaState.ReplicaId : q->ReplicaId;
	if (fs->replica < 0)
		fs->replica = -1;
	ctx->resp = r;
	ctx->state = fs;
	ctx->park.deadline_ns = 0;
	s = fetch_session_open(ctx, fs, &err);
	fetch_session_stats(sh);
	if (err) {
		/* a session error: the top-level code alone, at once */
		r->ErrorCode = err;
		r->Responses.count = 0;
		kafka_ctx_respond(ctx);
		return 0;
	}
	if ((s ? fetch_from_session(ctx, fs, r, s) : fetch_from_request(ctx, fs, r)) < 0) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	return fetch_round(ctx);
}
