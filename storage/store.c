/* storage/store.c — per-shard storage engine: group commit over its
 * flushers and completion dispatch to each op's own callback. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

void store_mark_dirty(struct store *st, struct store_flusher *f)
{
	if (f->dirty)
		return;
	f->dirty = 1;
	f->dirty_next = NULL;
	if (st->dirty_tail)
		st->dirty_tail->dirty_next = f;
	else
		st->dirty_head = f;
	st->dirty_tail = f;
}

void store_unmark_dirty(struct store *st, struct store_flusher *f)
{
	struct store_flusher **pp = &st->dirty_head, *prev = NULL;

	if (f->held) {
		struct store_flusher **hp = &st->held_head, *hprev = NULL;

		while (*hp && *hp != f) {
			hprev = *hp;
			hp = &(*hp)->held_next;
		}
		if (*hp) {
			*hp = f->held_next;
			if (st->held_tail == f)
				st->held_tail = hprev;
		}
		f->held = 0;
		f->hold_until = 0;
	}
	if (!f->dirty)
		return;
	while (*pp && *pp != f) {
		prev = *pp;
		pp = &(*pp)->dirty_next;
	}
	if (*pp) {
		*pp = f->dirty_next;
		if (st->dirty_tail == f)
			st->dirty_tail = prev;
	}
	f->dirty = 0;
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
	store_call_prep(st, sqe, call);
	io_uring_submit(st->ring);
}

int store_slot_take(struct store *st, struct store_slot_wait *w)
{
	if (st->slow_slots < STORE_SLOW_SLOTS && !st->slot_head) {
		st->slow_slots++;
		return 1;
	}
	w->next = NULL;
	if (st->slot_tail)
		st->slot_tail->next = w;
	else
		st->slot_head = w;
	st->slot_tail = w;
	return 0;
}

void store_slot_give(struct store *st)
{
	struct store_slot_wait *w = st->slot_head;

	if (!w) {
		st->slow_slots--;
		return;
	}
	/* the slot goes straight to the oldest waiter */
	st->slot_head = w->next;
	if (!st->slot_head)
		st->slot_tail = NULL;
	w->ready(w);
}

int store_flush(struct store *st)
{
	struct store_flusher *f, *keep_head = NULL, *keep_tail = NULL, *next;
	int n = 0;

	/* held flushers whose time came (all, in a flush of everything) are
	 * asked again with the dirty ones */
	while ((f = st->held_head) && (st->flush_all || f->hold_until <= st->now_ns)) {
		st->held_head = f->held_next;
		if (!st->held_head)
			st->held_tail = NULL;
		f->held = 0;
		f->hold_until = 0;
		store_mark_dirty(st, f);
	}
	f = st->dirty_head;
	st->dirty_head = st->dirty_tail = NULL;
	for (; f; f = next) {
		next = f->dirty_next;
		f->dirty_next = NULL;
		f->dirty = 0;
		f->hold_until = 0;
		n += f->prepare(f);
		if (f->hold_until && !st->flush_all) {
			/* holding on purpose: asked again when due */
			if (!f->held) {
				f->held = 1;
				f->held_next = NULL;
				if (st->held_tail)
					st->held_tail->held_next = f;
				else
					st->held_head = f;
				st->held_tail = f;
			}
			continue;
		}
		if (!f->dirty && f->pending(f)) {
			/* ring full, or its partial block still in flight: retry
			 * (first) once a write completes */
			f->dirty = 1;
			if (keep_tail)
				keep_tail->dirty_next = f;
			else
				keep_head = f;
			keep_tail = f;
		}
	}
	/* flushers still waiting go first next time */
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
	struct store_call *call = (struct store_call *)(uintptr_t)(cqe->user_data & ~STORE_OP_MASK);

	st->inflight--;
	call->done(call, cqe->res);
}

int store_flush_all(struct store *st)
{
	int n;

	st->flush_all = 1;
	n = store_flush(st);
	st->flush_all = 0;
	return n;
}

int store_poll(struct store *st, int wait)
{
	store_flush_all(st);
	return store_reap(st, wait);
}

int store_reap(struct store *st, int wait)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

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
	while (st->inflight || st->dirty_head || st->held_head)
		store_poll(st, 1);
}
