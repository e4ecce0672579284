/* dataplane/handlers_fetch.c — Fetch: each partition's read runs on its
 * owner shard, locally or through the ring; the response leaves when every
 * partition has answered, or parks (long-poll) until data, a high
 * watermark a follower was not told, or MaxWaitMs. @thread shard */
#include <errno.h>
#include <string.h>

#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/part.h"
#include "dataplane/part_role.h"
#include "dataplane/shard_core.h"
#include "storage/batch.h"

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
};

struct fetch_state {
	int n;
	struct fetch_item *items;
	int refused;                     /* a replica fetch refused before any read: answer now */
	uint64_t news_ns;                /* replica: when a high watermark it was not told was
					  * first seen (0: none); the answer goes by then + FETCH_HW_NEWS_NS */
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

	(void)rq;
	switch (err) {
	case 0:
		break;
	case -ENOENT:
		it->err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		it->hw = it->log_start = -1;
		break;
	case -ERANGE:
		it->err = KERR_OFFSET_OUT_OF_RANGE;
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
	}
	part_read(it->part, &it->rq, fetch_read_done, it);
}

static int fetch_round(struct kafka_ctx *ctx);

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
		if (it->div_epoch >= 0) {
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

				if (it->part)
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

int kafka_handle_fetch(struct kafka_ctx *ctx)
{
	struct kafka_fetch_request *q = ctx->req.body;
	struct shard *sh = ctx->sh;
	struct md_snapshot *md = broker_md(sh->b);
	struct kafka_fetch_response *r = ALLOC(ctx, struct kafka_fetch_response, 1);
	struct fetch_state *fs = ALLOC(ctx, struct fetch_state, 1);
	int total = 0, k = 0;

	shard_stat_add(&sh->stats.fetch_requests, 1);
	if (!r || !fs) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	kafka_fetch_response_init(r);
	r->SessionId = 0;
	for (int i = 0; i < q->Topics.count; i++)
		total += q->Topics.items[i].Partitions.count > 0 ? q->Topics.items[i].Partitions.count : 0;
	fs->items = ALLOC(ctx, struct fetch_item, total);
	r->Responses.items = ALLOC(ctx, struct kafka_fetch_response_fetchable_topic_response,
				   q->Topics.count);
	if (!fs->items || !r->Responses.items) {
		kafka_ctx_abort(ctx);
		return 0;
	}
	memset(fs->items, 0, sizeof(*fs->items) * (size_t)(total ? total : 1));
	fs->n = total;
	fs->refused = 0;
	fs->news_ns = 0;
	r->Responses.count = q->Topics.count < 0 ? 0 : q->Topics.count;
	for (int i = 0; i < r->Responses.count; i++) {
		struct kafka_fetch_request_fetch_topic *ft = &q->Topics.items[i];
		struct kafka_fetch_response_fetchable_topic_response *rt = &r->Responses.items[i];
		const struct md_topic *t = ft->Topic.len > 0 ? md_find(md, ft->Topic.ptr, ft->Topic.len) : NULL;
		int np = ft->Partitions.count < 0 ? 0 : ft->Partitions.count;

		rt->Topic = ft->Topic;
		rt->Partitions.items = ALLOC(ctx, struct kafka_fetch_response_partition_data, np);
		if (!rt->Partitions.items) {
			kafka_ctx_abort(ctx);
			return 0;
		}
		rt->Partitions.count = np;
		for (int j = 0; j < np; j++, k++) {
			struct kafka_fetch_request_fetch_partition *fp = &ft->Partitions.items[j];
			struct kafka_fetch_response_partition_data *pd = &rt->Partitions.items[j];
			const struct md_partition *mp;
			int16_t led = md_part_led(t, fp->Partition, ctx->sh->b->set.node_id, &mp);
			struct fetch_item *it = &fs->items[k];

			memset(pd, 0, sizeof(*pd));
			pd->PartitionIndex = fp->Partition;
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
			if (!mp) {
				pd->ErrorCode = led;
				continue;
			}
			if (q->ReplicaId >= 0 &&
			    (q->ReplicaId == ctx->sh->b->set.node_id || !md_part_hosted(mp, q->ReplicaId))) {
				/* Kafka's Partition.followerReplicaOrThrow: not one of
				 * its replicas (yet, when it names the current epoch) */
				pd->ErrorCode = fp->CurrentLeaderEpoch >= 0 ? KERR_UNKNOWN_LEADER_EPOCH
									   : KERR_NOT_LEADER_OR_FOLLOWER;
				fs->refused = 1;   /* as Kafka: an error answers at once */
				continue;
			}
			it->part = mp->part;
			it->owner = mp->shard;
			it->replica = q->ReplicaId >= 0 ? q->ReplicaId : -1;
			it->offset = fp->FetchOffset;
			it->max_bytes = fp->PartitionMaxBytes;
			it->current_epoch = fp->CurrentLeaderEpoch;   /* -1 before v9 */
			it->last_fetched_epoch = fp->LastFetchedEpoch; /* -1 before v12 */
			it->div_epoch = -1;
			it->isolation = q->IsolationLevel == 1 && it->replica < 0;
			if (it->isolation) {
				it->ab_cap = 16;
				it->ab_pid = ALLOC(ctx, int64_t, it->ab_cap);
				it->ab_first = ALLOC(ctx, int64_t, it->ab_cap);
				if (!it->ab_pid || !it->ab_first) {
					kafka_ctx_abort(ctx);
					return 0;
				}
			}
		}
	}
	ctx->resp = r;
	ctx->state = fs;
	ctx->park.deadline_ns = 0;
	return fetch_round(ctx);
}
