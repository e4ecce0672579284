/* dataplane/part_replica.c — a partition as a follower holds it (see
 * part_replica.h): the leader's batches appended with their producer and
 * transaction state, and the cut of a divergent tail with that state
 * brought back. @thread owner shard */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "dataplane/part_replica.h"
#include "dataplane/shard_core.h"
#include "storage/batch_format.h"

#define PRODUCER_SNAPSHOT "producers.snapshot"

/* What the leader's produce did beside its append, for the batches
 * rec[0, len) now in the log. */
static void replica_effects(struct part *p, const uint8_t *rec, uint32_t len)
{
	int64_t now_ms = p->sh->now_ms;

	for (uint32_t at = 0; at < len; at += batch_size(rec + at)) {
		const uint8_t *b = rec + at;
		int64_t pid = batch_producer_id(b);

		if (pid < 0)
			continue;
		if (!(batch_attributes(b) & BATCH_ATTR_CONTROL) && batch_base_sequence(b) >= 0 &&
		    producer_record(&p->producers, pid, batch_producer_epoch(b), batch_base_sequence(b),
				    producer_seq_add(batch_base_sequence(b), batch_last_offset_delta(b)),
				    batch_base_offset(b), batch_last_offset(b), now_ms) < 0)
			shard_stat_add(&p->sh->stats.producer_state_full, 1);
		part_txn_replicated(&p->txn, b, now_ms);
	}
}

int part_append_replica(struct part *p, const uint8_t *rec, uint32_t len, uint32_t *appended)
{
	uint32_t at = 0, got;
	int rc, retried = 0;

	*appended = 0;
	if (p->deleted)
		return -ENOENT;
	for (;;) {
		rc = plog_append_replica(p->pl, rec + at, len - at, &got);
		replica_effects(p, rec + at, got);
		at += got;
		if (rc != -ENOBUFS || retried)
			break;
		/* tail memory full: write what is buffered and go on once */
		store_flush_all(&p->sh->st);
		retried = 1;
	}
	*appended = at;
	if (at)
		part_progress(p);
	return rc;
}

static void log_start_followed(struct plog_delete *d)
{
	struct part *p = d->arg;

	p->ls_following = 0;
	if (!d->err)
		part_publish(p);     /* the scrape's log start and size */
}

int part_follow_log_start(struct part *p, int64_t leader_start)
{
	struct plog *pl = p->pl;
	int64_t to = leader_start;

	if (p->deleted || !pl || p->ls_following || pl->trunc || pl->err)
		return 0;
	if (to > pl->high_watermark)
		to = pl->high_watermark;
	if (to <= pl->log_start)
		return 0;
	p->ls_follow = (struct plog_delete){ .offset = to, .done = log_start_followed, .arg = p };
	if (plog_delete_records(pl, &p->ls_follow) != 0)
		return 0;            /* refused, or nothing to do (it says) */
	p->ls_following = 1;
	return 1;
}

static void part_truncated(struct plog_truncate *t)
{
	struct part_truncate *pt = t->arg;
	struct part *p = pt->p;

	pt->err = t->err;
	if (!t->err) {
		/* the state as an open would find it over the cut log */
		producer_table_free(&p->producers);
		part_txn_free(&p->txn);
		part_rebuild_producers(p);
		part_progress(p);
	}
	pt->done(pt);
}

/* Before a cut of the log: the producer snapshot goes (it may hold state
 * past the cut), after any save in flight, and the aborts whose marker is
 * at or after `from` (INT64_MIN: all) are forgotten (part_txn_truncated). */
static void snapshot_drop(struct part *p, int64_t from)
{
	int dfd;

	while (p->snap.busy)       /* a snapshot save in flight would rename over the removal */
		store_poll(&p->sh->st, 1);
	dfd = open(p->pl->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		unlinkat(dfd, PRODUCER_SNAPSHOT, 0);
		close(dfd);
	}
	p->snap_covered = -1;
	part_txn_truncated(&p->txn, from);
}

int part_truncate_to(struct part *p, struct part_truncate *pt)
{
	struct plog *pl = p->pl;
	int rc;

	pt->err = 0;
	pt->p = p;
	if (p->deleted) {
		pt->err = -ENOENT;
		return 1;
	}
	if (pt->offset >= pl->next_offset || pt->offset < pl->log_start || pt->offset < pt->committed ||
	    pl->trunc || pl->err) {
		/* nothing to cut, or refused: plog_truncate_to says which */
		pt->t = (struct plog_truncate){ .offset = pt->offset, .committed = pt->committed, .buf = pt->buf,
						.buf_cap = pt->buf_cap };
		plog_truncate_to(pl, &pt->t);
		pt->err = pt->t.err;
		return 1;
	}
	snapshot_drop(p, pt->offset);
	pt->t = (struct plog_truncate){ .offset = pt->offset, .committed = pt->committed, .buf = pt->buf,
					.buf_cap = pt->buf_cap, .done = part_truncated, .arg = pt };
	rc = plog_truncate_to(pl, &pt->t);
	if (rc)
		pt->err = pt->t.err;
	return rc;
}

static void part_trunc_sync_done(struct part_truncate *pt)
{
	*(int *)pt->arg = 1;
}

int part_truncate_to_sync(struct part *p, int64_t offset, int64_t committed)
{
	int finished = 0;
	uint32_t cap = SHARD_RBUF_SIZE;
	struct part_truncate pt = { .offset = offset, .committed = committed, .done = part_trunc_sync_done,
				    .arg = &finished };

	pt.buf = aligned_alloc(4096, cap); /* style: allow tests and tools: once per call */
	pt.buf_cap = cap;
	if (!pt.buf)
		return -ENOMEM;
	if (part_truncate_to(p, &pt) == 0)
		while (!finished)
			store_poll(&p->sh->st, 1);
	free(pt.buf);
	return pt.err;
}

int part_start_at(struct part *p, struct part_truncate *pt)
{
	struct plog *pl = p->pl;
	int rc;

	pt->err = 0;
	pt->p = p;
	if (p->deleted) {
		pt->err = -ENOENT;
		return 1;
	}
	pt->t = (struct plog_truncate){ .offset = pt->offset, .done = part_truncated, .arg = pt };
	if (pt->offset < 0 || (pt->offset == pl->log_start && pl->next_offset == pl->log_start) || pl->trunc ||
	    pl->err) {
		plog_start_at(pl, &pt->t);   /* refused: it says why */
		pt->err = pt->t.err;
		return 1;
	}
	snapshot_drop(p, INT64_MIN);
	rc = plog_start_at(pl, &pt->t);
	if (rc)
		pt->err = pt->t.err;
	return rc;
}

int part_start_at_sync(struct part *p, int64_t offset)
{
	int finished = 0;
	struct part_truncate pt = { .offset = offset, .done = part_trunc_sync_done, .arg = &finished };

	if (part_start_at(p, &pt) == 0)
		while (!finished)
			store_poll(&p->sh->st, 1);
	return pt.err;
}
