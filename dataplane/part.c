/* dataplane/part.c — partitions on their owner shard: acks after
 * durability, waking long-polls when the high watermark moves. */
#include <errno.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "dataplane/part.h"
#include "dataplane/part_role.h"
#include "dataplane/shard_core.h"
#include "storage/batch_format.h"
#include "storage/controls.h"
#include "storage/recompress.h"

#define ACK_RING 4096
#define PART_PRODUCER_SCAN (16ull << 20)   /* bytes of the newest batches read at open */

static void part_durable(struct plog *pl, int64_t durable, int err, void *arg)
{
	(void)pl;
	(void)durable;
	(void)err;
	part_progress(arg);   /* (a failed log leaves the ISR there: part_hw.c) */
}

/* Idempotent producer state from the newest batches of the log (the last
 * PART_PRODUCER_SCAN bytes of the active segment): what a producer resends
 * after a restart is then still recognised. A one-time read while the
 * partition opens. */
void part_rebuild_producers(struct part *p)
{
	struct plog *pl = p->pl;
	int64_t off = plog_offset_near_end(pl, PART_PRODUCER_SCAN), covered = -1;
	int dfd = open(pl->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int txn = part_txn_load(&p->txn, pl->log_start, pl->next_offset);
	uint32_t had = p->txn.naborted;
	uint8_t *buf;
	/* A rebuilt producer counts as active now, as an append counts it at
	 * the broker's clock (not the batch's CreateTime, which a client sets:
	 * with old timestamps the first retention tick after the restart
	 * expired the producer, and its resend was appended a second time). */
	struct timespec ts;
	int64_t now_ms;

	clock_gettime(CLOCK_REALTIME, &ts);
	now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;

	if (dfd >= 0) {
		covered = producer_snapshot_load(&p->producers, dfd);
		close(dfd);
	}
	if (covered >= 0 && (covered > pl->next_offset || covered < pl->log_start || (!txn && covered < off))) {
		/* the log ends before the snapshot (a crash lost what it
		 * covered), it is of a log restarted above it (plog_start_at:
		 * a crash before its removal was durable), or more was
		 * written after it than the scan reads: the scan alone is
		 * exact for the producers it sees */
		producer_table_free(&p->producers);
		covered = -1;
	}
	if (covered >= 0)
		off = covered;
	else if (txn)
		off = pl->log_start;   /* transactions: every open one must be found */
	if (off >= pl->next_offset) {
		part_txn_relso(&p->txn);
		return;
	}
	buf = aligned_alloc(4096, SHARD_RBUF_SIZE); /* style: allow partition setup */
	while (buf && off < pl->next_offset) {
		struct plog_read rd = { .offset = off, .max_offset = pl->next_offset, .max_bytes = SHARD_RBUF_SIZE / 2,
					.buf = buf, .buf_cap = SHARD_RBUF_SIZE };
		uint32_t at = 0;
		int64_t next = off;

		if (plog_read_sync(pl, &rd) < 0 || !rd.bytes) {
			plog_read_release(&rd);
			break;
		}
		while (at + BATCH_HEADER_SIZE <= rd.bytes && batch_size(rd.data + at) <= rd.bytes - at) {
			const uint8_t *b = rd.data + at;

			part_txn_scan(&p->txn, b);
			if (batch_producer_id(b) >= 0 && !(batch_attributes(b) & BATCH_ATTR_CONTROL) &&
			    batch_base_sequence(b) >= 0)
				producer_record(&p->producers, batch_producer_id(b), batch_producer_epoch(b),
						batch_base_sequence(b),
						producer_seq_add(batch_base_sequence(b), batch_last_offset_delta(b)),
						batch_base_offset(b), batch_last_offset(b), now_ms);
			next = batch_last_offset(b) + 1;
			at += batch_size(b);
		}
		plog_read_release(&rd);
		if (next <= off)
			break;
		off = next;
	}
	free(buf);
	part_txn_scanned(&p->txn, had);
}

int part_open(struct shard *sh, const char *dir, const char *topic, int32_t index,
	      const struct plog_config *cfg, struct part **out)
{
	struct part *p = calloc(1, sizeof(*p)); /* style: allow partition setup */
	int rc;

	if (!p)
		return -ENOMEM;
	/* not zeroed: an entry is written before it is read (between head
	 * and tail only), and a page of the ring is touched only once the
	 * ring reaches it. calloc zeroed 4,096 entries (192 KiB) a partition
	 * at open: 10,000 partitions reopened on one shard spent a third of
	 * their start in memset and held 1.9 GiB more resident */
	p->acks = malloc(ACK_RING * sizeof(*p->acks)); /* style: allow partition setup */
	if (!p->acks) {
		free(p);
		return -ENOMEM;
	}
	p->ack_cap = ACK_RING;
	if ((rc = plog_open(&sh->st, dir, cfg, &p->pl)) < 0) {
		free(p->acks);
		free(p);
		return rc;
	}
	p->sh = sh;
	p->index = index;
	snprintf(p->topic, sizeof(p->topic), "%s", topic);
	p->last_hw = p->pl->high_watermark;
	p->snap_covered = -1;
	p->hw_saved = -1;
	p->hw_ckpt = part_hw_load(p);   /* for the first role (part_role.h) */
	part_txn_init(&p->txn, &p->producers, p->pl, p->topic, index);
	plog_set_durable_cb(p->pl, part_durable, p);
	part_rebuild_producers(p);
	*out = p;
	return 0;
}

static void part_snap_done(struct producer_snap *s)
{
	struct part *p = s->arg;

	close(s->dirfd);
	if (!s->err)
		p->snap_covered = s->covered;
}

/* Write the producer state next to the log (a small file, synced, on the
 * ring): a restart then starts from it instead of scanning. */
void part_snapshot_producers(struct part *p)
{
	int dfd;

	if (!p->pl || p->deleted || p->snap.busy || p->pl->next_offset == p->snap_covered)
		return;   /* nothing appended since the last snapshot, or one is being saved */
	part_txn_trim(&p->txn, p->pl->log_start);
	dfd = open(p->pl->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	if (!p->producers.n) {
		unlinkat(dfd, "producers.snapshot", 0);
		close(dfd);
		return;
	}
	p->snap.done = part_snap_done;
	p->snap.arg = p;
	if (producer_snapshot_start(&p->snap, &p->producers, &p->sh->st, dfd, p->pl->next_offset) < 0)
		close(dfd);
}

/* Closing: let a save in flight end (the close of a log waits for its
 * writes the same way). */
static void part_snap_wait(struct part *p)
{
	while (p->snap.busy)
		store_poll(&p->sh->st, 1);
}

void part_close(struct part *p)
{
	int healthy = !p->pl->err;

	/* answer whoever still waits: the log is going away */
	p->pl->err = p->pl->err ? p->pl->err : -ESHUTDOWN;
	part_progress(p);
	part_snap_wait(p);
	if (healthy) {
		part_snapshot_producers(p);   /* nothing is appended any more: next_offset is final */
		part_snap_wait(p);
		part_hw_checkpoint(p);        /* written by the close's file work */
	}
	plog_close(p->pl);
	producer_table_free(&p->producers);
	part_txn_free(&p->txn);
	part_role_free(p);
	free(p->acks);
	free(p);
}

void part_retire(struct part *p)
{
	p->pl->err = p->pl->err ? p->pl->err : -ESHUTDOWN;
	part_progress(p);
	part_snap_wait(p);
	plog_close(p->pl);
	producer_table_free(&p->producers);
	part_txn_free(&p->txn);
	part_role_free(p);
	p->pl = NULL;
	p->deleted = 1;
	free(p->acks);
	p->acks = NULL;
	p->ack_cap = 0;
}

/* Append the (validated) batches of one partition on its owner shard.
 * Returns the base offset or -errno; *need is the offset that must become
 * durable. */
static int64_t part_append_all(struct shard *sh, struct part *p, const uint8_t *rec, uint32_t len,
			       int64_t *need, int64_t *log_start)
{
	int64_t first = -1, base;
	uint32_t at = 0;
	int rc;

	while (at < len) {
		uint32_t size = batch_size(rec + at), stored;
		const uint8_t *b;

		/* compression.type: the batch in the topic's codec (as sent
		 * unless the topic asks for another one) */
		rc = recompress_batch(sh->recompress, p->pl->cfg.compression, p->pl->cfg.max_batch, rec + at, size,
				      &b, &stored);
		if (rc < 0)
			return rc;
		rc = part_append_flush(p, b, stored, &base);
		/* A later batch that cannot be appended fails the whole request:
		 * the batches before it are in the log, and the client, told
		 * of the failure, sends them again (at least once, as a Kafka
		 * broker's own partial failures are) — never a success for
		 * batches that are not in the log. */
		if (rc < 0)
			return rc;
		if (first < 0)
			first = base;
		at += size;
		shard_stat_add(&sh->stats.produce_batches, 1);
		shard_stat_add(&sh->stats.produce_records, (uint64_t)batch_records_count(rec + at - size));
		if (p->pub) {
			part_pub_add(&p->pub->produce_batches, 1);
			part_pub_add(&p->pub->produce_records, (uint64_t)batch_records_count(rec + at - size));
		}
	}
	shard_stat_add(&sh->stats.produce_bytes, (uint64_t)(len));
	if (p->pub)
		part_pub_add(&p->pub->produce_bytes, len);
	*need = p->pl->next_offset;
	*log_start = p->pl->log_start;
	return first;
}

void part_produce(struct part *p, const struct part_produce_req *req, part_produce_done done, void *cookie)
{
	struct shard *sh = p->sh;
	const uint8_t *rec = req->rec;
	uint32_t len = req->len;
	int64_t need = 0, log_start = 0, base;
	int64_t pid = len >= BATCH_HEADER_SIZE ? batch_producer_id(rec) : -1;
	int perr = 0;

	if (p->deleted) {
		base = -ENOENT;
	} else if (p->role && !p->role->leading) {
		/* this node follows the partition now (Kafka's
		 * appendRecordsToLeader checks the leader under the partition's
		 * lock): the connection's shard asked its metadata, which the
		 * owner's role can be ahead of. A batch appended here would
		 * carry the deposed leader's epoch, be cut as divergent, and its
		 * acks=all wait be answered by the follower's high watermark
		 * passing what the new leader wrote at those offsets. */
		perr = PART_ERR_NOT_LEADER;
		base = -1;
	} else if (p->pl->err) {
		/* the log failed here (offline until a restart): every batch is
		 * refused as the append would refuse it (KAFKA_STORAGE_ERROR),
		 * before the sequence check. Kafka's offline partition answers
		 * so too. A sequence check here would answer the batch after a
		 * refused one OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka
		 * takes as "the earlier batches were not persisted": it bumps
		 * its epoch and numbers them again, and those that were
		 * appended before the failure (answered KAFKA_STORAGE_ERROR or
		 * NOT_LEADER_OR_FOLLOWER, and kept by a replica or the disk)
		 * were then appended a second time (issue 20). */
		base = -EROFS;
	} else if (req->acks != 0 && p->ack_tail - p->ack_head == p->ack_cap) {
		/* as many answers waiting as the ring holds (a follower far
		 * behind, thousands of producers): refused before the append,
		 * never answered before what acks asked for (REQUEST_TIMED_OUT:
		 * the client sends it again) */
		base = -ENOBUFS;
	} else if (pid >= 0) {
		/* an idempotent producer (one batch: checked on the
		 * connection's shard): a batch sent again is acknowledged again
		 * with its first offset, not appended twice */
		int16_t epoch = batch_producer_epoch(rec);
		int32_t first = batch_base_sequence(rec);
		int32_t last = producer_seq_add(first, batch_last_offset_delta(rec));
		struct producer_batch dup;
		int txn = (batch_attributes(rec) & BATCH_ATTR_TRANSACTIONAL) != 0;
		/* a transactional batch: the partition must be in the producer's
		 * ongoing transaction (KIP-890's verification), asked before
		 * anything else so a fenced or late write is never taken */
		int v = txn ? part_txn_check(&p->txn, pid, epoch, req->recv_ns) : 0;

		if (!v)
			v = producer_check(&p->producers, pid, epoch, first, last, &dup);
		if (v == PRODUCER_DUPLICATE) {
			base = dup.base_offset;
			need = dup.last_offset + 1;
			log_start = p->pl->log_start;
			shard_stat_add(&sh->stats.produce_duplicates, 1);
		} else if (v > 0) {
			perr = v;
			base = -1;
			shard_stat_add(&sh->stats.produce_rejected[v == PART_ERR_OUT_OF_ORDER ? SHARD_REJECT_SEQUENCE
								   : v == PART_ERR_OLD_EPOCH ? SHARD_REJECT_EPOCH
								   : SHARD_REJECT_TXN], 1);
		} else {
			base = part_append_all(sh, p, rec, len, &need, &log_start);
			if (base >= 0 && producer_record(&p->producers, pid, epoch, first, last, base,
							 base + batch_last_offset_delta(rec), sh->now_ms) < 0)
				shard_stat_add(&sh->stats.producer_state_full, 1);   /* appended; a resend would append again */
			if (base >= 0 && txn)
				part_txn_appended(&p->txn, pid, base);
		}
	} else {
		base = part_append_all(sh, p, rec, len, &need, &log_start);
	}
	struct ack_wait w = { .need = need, .base_offset = base, .done = done, .cookie = cookie,
			      .durable_only = req->acks == 1 || (req->acks == -1 && SLUICE_CONTROL_OFF(ack_before_isr)),
			      .min_isr = req->acks == -1 && p->role && !SLUICE_CONTROL_OFF(ack_before_isr)
					 ? (uint8_t)(req->min_insync > 255 ? 255 : req->min_insync < 0 ? 0 : req->min_insync)
					 : 0,
			      .deadline_ms = req->acks == -1 && req->timeout_ms > 0 && p->role
					     ? (uint32_t)((req->recv_ns + (uint64_t)req->timeout_ms * 1000000ull) / 1000000)
					     : 0 };

	if (w.deadline_ms == 0 && req->acks == -1 && req->timeout_ms > 0 && p->role)
		w.deadline_ms = 1;   /* (0 is "none") */
	if (base < 0) {
		/* nothing appended: answer now (a partition's refusal as itself) */
		done(sh, cookie, -1, -1, perr ? perr : (int)base);
		return;
	}
	if (req->acks == 0) {
		/* acks=0: the data is copied, the frame may go */
		done(sh, cookie, base, log_start, 0);
		part_progress(p);
		return;
	}
	if (part_wait_ack(p, &w) < 0) {
		/* (checked above: not reached) in the log, but never called
		 * acknowledged before acks is met */
		done(sh, cookie, -1, -1, -ENOBUFS);
		part_progress(p);
		return;
	}
	part_progress(p);   /* memory durability: already there */
}

int part_append_flush(struct part *p, const uint8_t *batch, uint32_t len, int64_t *base)
{
	int rc;

	if (p->deleted)
		return -ENOENT;
	rc = plog_append(p->pl, batch, len, base);
	if (rc == -ENOBUFS) {
		/* tail memory full: write what is buffered and retry once */
		store_flush_all(&p->sh->st);
		rc = plog_append(p->pl, batch, len, base);
	}
	return rc;
}

/* ---- transactions ---------------------------------------------------- */

int part_begin_txn(struct part *p, int64_t pid, int16_t epoch, uint64_t since_ns)
{
	if (p->deleted)
		return -ENOENT;
	return part_txn_begin(&p->txn, pid, epoch, since_ns, p->sh->now_ms);
}

int part_append_marker(struct part *p, int64_t pid, int16_t epoch, int commit, int32_t coordinator_epoch,
		       int64_t *offset)
{
	uint8_t buf[128];
	ssize_t len;
	int rc;

	const struct producer_entry *e;

	if (p->deleted)
		return -ENOENT;
	/* a marker of an epoch older than the producer's current one is
	 * refused, as Kafka's producer state refuses it (a stale coordinator) */
	e = producer_entry(&p->producers, pid, epoch, 0);
	if (e && epoch < e->epoch)
		return PART_ERR_OLD_EPOCH;
	len = part_txn_marker_build(buf, sizeof(buf), pid, epoch, commit, coordinator_epoch, p->sh->now_ms);
	if (len < 0)
		return (int)len;
	rc = part_append_flush(p, buf, (uint32_t)len, offset);
	if (rc < 0)
		return rc;
	part_txn_marked(&p->txn, pid, epoch, commit, *offset, p->sh->now_ms);
	return 0;
}

/* ---- reads ------------------------------------------------------------ */

uint8_t *part_rbuf_take(struct shard *sh)
{
	return sh->nrbufs ? sh->rbufs[--sh->nrbufs] : NULL;
}

void part_rbuf_put(struct shard *sh, uint8_t *buf)
{
	if (!buf)
		return;
	sh->rbufs[sh->nrbufs++] = buf;
	if (sh->rbuf_waking)
		return;   /* the loop below, further up the stack, goes on */
	sh->rbuf_waking = 1;
	while (sh->nrbufs && sh->rbuf_wait) {
		struct rbuf_wait *w = sh->rbuf_wait;

		sh->rbuf_wait = w->next;
		if (!sh->rbuf_wait)
			sh->rbuf_wait_tail = NULL;
		w->ready(sh, w);
	}
	sh->rbuf_waking = 0;
}

void part_rbuf_wait(struct shard *sh, struct rbuf_wait *w)
{
	w->next = NULL;
	if (sh->rbuf_wait_tail)
		sh->rbuf_wait_tail->next = w;
	else
		sh->rbuf_wait = w;
	sh->rbuf_wait_tail = w;
}

static void part_read_disk_done(struct plog_read *rd)
{
	struct part_read_req *rq = rd->arg;

	if (rd->err)
		rd->bytes = 0;
	rq->done(rq->cookie, rq, rd->err == -EAGAIN ? -EIO : rd->err);
}

void part_read(struct part *p, struct part_read_req *rq, part_read_done done, void *cookie)
{
	struct shard *sh = p->sh;
	struct plog *pl = p->pl;
	int rc;

	memset(&rq->rd, 0, sizeof(rq->rd));
	rq->p = p;
	rq->done = done;
	rq->cookie = cookie;
	if (p->deleted || !pl) {
		done(cookie, rq, -ENOENT);
		return;
	}
	rq->rd.offset = rq->offset;
	/* 2: a follower's replica fetch, up to the log end (Kafka's
	 * FetchLogEnd); 1: read_committed; 0: the high watermark */
	rq->rd.max_offset = rq->isolation == 2 ? pl->next_offset : rq->isolation ? part_lso(p) : pl->high_watermark;
	rq->rd.max_bytes = rq->max_bytes ? rq->max_bytes : 1;
	if (rq->rd.max_bytes > SHARD_RBUF_SIZE - 128 * 1024)
		rq->rd.max_bytes = SHARD_RBUF_SIZE - 128 * 1024;
	rq->rd.done = part_read_disk_done;
	rq->rd.arg = rq;
	/* a fetch at the log end is in range: nothing yet, the fetcher waits
	 * (the control answers a consumer's with OFFSET_OUT_OF_RANGE) */
	if (rq->offset < pl->log_start || rq->offset > pl->next_offset ||
	    (SLUICE_CONTROL_OFF(end_out_of_range) && rq->isolation != 2 && rq->offset == pl->next_offset)) {
		done(cookie, rq, -ERANGE);
		return;
	}
	if ((rq->rd.buf = part_rbuf_take(sh)))
		rq->rd.buf_cap = SHARD_RBUF_SIZE;
	rc = plog_read(pl, &rq->rd);
	if (rc == 0)
		return;                     /* disk read in flight: part_read_disk_done */
	if (rc < 0)
		rq->rd.bytes = 0;
	if (rq->rd.from_tail || rc != 1 || !rq->rd.bytes) {
		/* the buffer was not needed */
		part_rbuf_put(sh, rq->rd.buf);
		rq->rd.buf = NULL;
	}
	done(cookie, rq, rc >= 0 ? 0 : rc == -ERANGE ? -ERANGE : -EAGAIN);
}

void part_read_release(struct part_read_req *rq)
{
	plog_read_release(&rq->rd);
	part_rbuf_put(rq->p->sh, rq->rd.buf);
	rq->rd.buf = NULL;
}

int part_wait_ack(struct part *p, const struct ack_wait *w)
{
	if (p->deleted)
		return -ENOENT;
	if (p->ack_tail - p->ack_head == p->ack_cap)
		return -ENOBUFS;
	p->acks[p->ack_tail++ % p->ack_cap] = *w;
	return 0;
}

static void ack_answer(struct part *p, const struct ack_wait *w, int err)
{
	struct shard *sh = p->sh;

	if (w->done) {
		w->done(sh, w->cookie, err > 0 ? -1 : w->base_offset, p->pl->log_start, err);
	} else {
		/* an internal append (control/): its message to thread `from` */
		struct shard_msg m = { .fn = w->notify, .p = { w->ctx },
				       .v = { err > 0 ? -1 : w->base_offset, err, p->pl->log_start } };

		if (w->from == sh->id)
			w->notify(sh, &m);
		else
			shard_send(sh, w->from, &m);
	}
}

void part_fail_acks(struct part *p, int err, int all, uint64_t now_ns)
{
	while (p->ack_head != p->ack_tail) {
		struct ack_wait *w = &p->acks[p->ack_head % p->ack_cap];

		if (w->durable_only == 2) {
			p->ack_head++;   /* answered already */
			continue;
		}
		if (!all && !(w->deadline_ms && (int32_t)((uint32_t)(now_ns / 1000000) - w->deadline_ms) >= 0))
			break;
		p->ack_head++;
		ack_answer(p, w, err);
	}
}

void part_progress(struct part *p)
{
	struct shard *sh = p->sh;
	int64_t hw, durable;
	/* a full filesystem (storage/plog.h nospace) answers the waiters as
	 * a failed log does, but the log takes appends again later */
	int err = p->pl->err ? p->pl->err : p->pl->nospace ? -ENOSPC : 0;

	if (p->role)
		part_role_hw(p);   /* the ISR's, or the leader's as a follower knows it */
	hw = p->pl->high_watermark;
	durable = p->pl->durable_offset;
	if (p->role && !p->role->leading && p->ack_head != p->ack_tail)
		/* a follower acknowledges nothing: its high watermark is the
		 * leader's, over records the leader wrote (none wait here:
		 * part_role_set answers them, part_produce refuses) */
		part_fail_acks(p, PART_ERR_NOT_LEADER, 1, 0);
	if (p->role && !err) {
		/* acks=1 behind an acks=all still waiting for the ISR: answered
		 * once durable (the needs grow along the queue: a prefix) */
		if ((int32_t)(p->ack_durable - p->ack_head) < 0)
			p->ack_durable = p->ack_head;
		while (p->ack_durable != p->ack_tail) {
			struct ack_wait *w = &p->acks[p->ack_durable % p->ack_cap];

			if (w->need > durable)
				break;
			p->ack_durable++;
			if (w->durable_only == 1) {
				w->durable_only = 2;
				ack_answer(p, w, 0);
			}
		}
	}
	while (p->ack_head != p->ack_tail) {
		struct ack_wait *w = &p->acks[p->ack_head % p->ack_cap];

		if (w->durable_only == 2) {
			p->ack_head++;   /* answered already */
			continue;
		}
		if (!err && w->need > (w->durable_only ? durable : hw))
			break;
		p->ack_head++;
		/* Kafka's DelayedProduce: the ISR had it, but a leader whose ISR
		 * shrank below min.insync.replicas meanwhile (it alone, cut off)
		 * does not call that acknowledged */
		ack_answer(p, w, err ? err : w->min_isr && p->role && p->role->nisr < w->min_isr
						? PART_ERR_AFTER_APPEND : 0);
	}
	if (hw != p->last_hw && p->watchers) {
		uint64_t wmask = p->watchers;

		p->watchers = 0;
		for (int i = 0; wmask; i++, wmask >>= 1) {
			if (!(wmask & 1))
				continue;
			if (i == sh->id) {
				shard_wake_parked(sh);
			} else {
				struct shard_msg m = { .fn = shard_wake_parked_msg };

				shard_send(sh, i, &m);
			}
		}
	}
	p->last_hw = hw;
	if (p->role)
		part_role_wake(p);   /* replica fetches: the log end moved */
	part_publish(p);
}

/* ---- internal records (the coordinators' own logs, through part_proxy.c) ---- */

void part_append_internal(struct part *p, const uint8_t *batch, uint32_t len, int32_t min_insync, int from,
			  void *ctx, void (*notify)(void *self, struct shard_msg *m))
{
	struct shard *sh = p->sh;
	int64_t base = -1;
	/* a coordinator writes only where this node leads: a follower's log
	 * is its leader's batches as they are (-EREMOTE: led elsewhere) */
	int rc = p->role && !p->role->leading ? -EREMOTE : part_append_flush(p, batch, len, &base);

	if (rc == 0) {
		struct ack_wait w = { .need = p->pl->next_offset, .base_offset = base, .from = (int16_t)from,
				      .durable_only = SLUICE_CONTROL_OFF(ack_before_isr),
				      .min_isr = p->role && !SLUICE_CONTROL_OFF(ack_before_isr)
						 ? (uint8_t)(min_insync > 255 ? 255 : min_insync < 0 ? 0 : min_insync)
						 : 0,
				      .ctx = ctx, .notify = notify };

		if (part_wait_ack(p, &w) == 0) {
			part_progress(p);
			return;
		}
		rc = -ENOBUFS;
	}
	{
		struct shard_msg r = { .fn = notify, .p = { ctx }, .v = { -1, rc } };

		shard_send(sh, from, &r);
	}
}
