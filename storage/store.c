/* storage/store.c — per-shard storage engine: group commit and completion
 * dispatch. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/plog.h"
#include "storage/store.h"

int store_init(struct store *st, struct io_uring *ring, size_t tail_budget)
{
	memset(st, 0, sizeof(*st));
	tail_pool_init(&st->tail, tail_budget);
	if (ring) {
		st->ring = ring;
		return 0;
	}
	struct io_uring_params p;
	int rc;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	p.cq_entries = 8192;
	rc = io_uring_queue_init_params(1024, &st->own_ring, &p);
	if (rc == -EINVAL) {
		/* older kernels: no SINGLE_ISSUER / DEFER_TASKRUN */
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE;
		p.cq_entries = 8192;
		rc = io_uring_queue_init_params(1024, &st->own_ring, &p);
	}
	if (rc < 0)
		return rc;
	st->ring = &st->own_ring;
	st->owns_ring = 1;
	return 0;
}

void store_fini(struct store *st)
{
	free(st->foreign);
	st->foreign = NULL;
	st->nforeign = st->foreign_cap = 0;
	tail_pool_fini(&st->tail);
	if (st->owns_ring)
		io_uring_queue_exit(&st->own_ring);
	st->owns_ring = 0;
}

void store_mark_dirty(struct store *st, struct plog *pl)
{
	if (pl->dirty)
		return;
	pl->dirty = 1;
	pl->dirty_next = NULL;
	if (st->dirty_tail)
		st->dirty_tail->dirty_next = pl;
	else
		st->dirty_head = pl;
	st->dirty_tail = pl;
}

struct io_uring_sqe *store_sqe(struct store *st)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(st->ring);

	if (!sqe) {
		io_uring_submit(st->ring);
		sqe = io_uring_get_sqe(st->ring);
	}
	return sqe;
}

void store_call_submit(struct store *st, struct io_uring_sqe *sqe, struct store_call *call)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)call | STORE_OP_CALL);
	st->inflight++;
	io_uring_submit(st->ring);
}

int store_flush(struct store *st)
{
	struct plog *pl = st->dirty_head, *keep_head = NULL, *keep_tail = NULL, *next;
	int n = 0;

	st->dirty_head = st->dirty_tail = NULL;
	for (; pl; pl = next) {
		next = pl->dirty_next;
		pl->dirty_next = NULL;
		pl->dirty = 0;
		n += plog_flush_prepare(pl);
		if (!pl->dirty && plog_has_unsubmitted(pl)) {
			/* ring full, or its partial block still in flight: retry
			 * (first) once a write completes */
			pl->dirty = 1;
			if (keep_tail)
				keep_tail->dirty_next = pl;
			else
				keep_head = pl;
			keep_tail = pl;
		}
	}
	/* partitions still waiting go first next time */
	if (keep_head) {
		keep_tail->dirty_next = st->dirty_head;
		st->dirty_head = keep_head;
		if (!st->dirty_tail)
			st->dirty_tail = keep_tail;
	}
	if (n) {
		store_stat_add(&st->stats.flushes, 1);
		io_uring_submit(st->ring);
	}
	return n;
}

void store_complete(struct store *st, struct io_uring_cqe *cqe)
{
	void *ptr = (void *)(uintptr_t)(cqe->user_data & ~STORE_OP_MASK);

	st->inflight--;
	switch (cqe->user_data & STORE_OP_MASK) {
	case STORE_OP_WRITE:
		plog_write_slot_done(ptr, cqe->res);
		break;
	case STORE_OP_FALLOC:
		segment_falloc_done(ptr, cqe->res);
		break;
	case STORE_OP_READ:
		plog_read_done(ptr, cqe->res);
		break;
	case STORE_OP_PREP:
		plog_prep_done(ptr, cqe->res);
		break;
	case STORE_OP_CALL:
		((struct store_call *)ptr)->done(ptr, cqe->res);
		break;
	}
}

int store_poll(struct store *st, int wait)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	store_flush(st);
	if (wait && st->inflight)
		io_uring_submit_and_wait(st->ring, 1);
	else
		io_uring_submit_and_get_events(st->ring);
	(void)head;
	/* one at a time, each marked seen before it is handled: a handler may
	 * poll again (a log closing waits for its writes) */
	while (io_uring_peek_cqe(st->ring, &cqe) == 0) {
		struct io_uring_cqe c = *cqe;

		io_uring_cqe_seen(st->ring, cqe);
		n++;
		if (store_owns_cqe(c.user_data)) {
			store_complete(st, &c);
		} else if (c.user_data) {
			/* the shard's own (a receive, a send...): its loop handles
			 * it at the next turn, in order */
			if (st->nforeign == st->foreign_cap) {
				unsigned cap = st->foreign_cap ? st->foreign_cap * 2 : 64;
				struct store_cqe *f = realloc(st->foreign, cap * sizeof(*f)); /* style: allow rare nested poll */

				if (!f)
					abort();
				st->foreign = f;
				st->foreign_cap = cap;
			}
			st->foreign[st->nforeign++] = (struct store_cqe){ c.user_data, c.res, c.flags };
		}
	}
	return (int)n;
}

void store_drain(struct store *st)
{
	while (st->inflight || st->dirty_head)
		store_poll(st, 1);
}
