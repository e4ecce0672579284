/* storage/tail.c — per-shard chunk pool with a byte budget and FIFO
 * eviction of clean chunks. Chunk memory is allocated on first use of a size
 * class and then recycled through free lists; steady state allocates
 * nothing. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "storage/tail.h"

void tail_pool_init(struct tail_pool *tp, size_t budget)
{
	memset(tp, 0, sizeof(*tp));
	tp->budget = budget;
}

void tail_pool_fini(struct tail_pool *tp)
{
	for (int i = 0; i < TAIL_NCLASS; i++) {
		struct tail_chunk *c = tp->free[i], *n;

		for (; c; c = n) {
			n = c->next;
			free(c->mem);
			free(c);
		}
		tp->free[i] = NULL;
	}
	tp->cached = 0;
}

void tail_fifo_add(struct tail_pool *tp, struct tail_chunk *c)
{
	if (c->on_fifo || c->refs)
		return;
	c->fifo_next = NULL;
	c->fifo_prev = tp->fifo_tail;
	if (tp->fifo_tail)
		tp->fifo_tail->fifo_next = c;
	else
		tp->fifo_head = c;
	tp->fifo_tail = c;
	c->on_fifo = 1;
}

void tail_fifo_del(struct tail_pool *tp, struct tail_chunk *c)
{
	if (!c->on_fifo)
		return;
	if (c->fifo_prev)
		c->fifo_prev->fifo_next = c->fifo_next;
	else
		tp->fifo_head = c->fifo_next;
	if (c->fifo_next)
		c->fifo_next->fifo_prev = c->fifo_prev;
	else
		tp->fifo_tail = c->fifo_prev;
	c->fifo_next = c->fifo_prev = NULL;
	c->on_fifo = 0;
}

/* Free cached memory of other classes first, then evict clean chunks.
 * An evicted chunk of class k (the size wanted) is kept on its free list
 * and ends the search: the caller reuses it, memory stays mapped (freeing
 * and allocating 16 MiB again would cost the kernel a page fault per 4 KiB
 * touched, a large part of an append's cost once the budget is full).
 * Returns 1 when such a chunk waits in free[k], 0 when bytes fit, -1. */
static int tail_make_room(struct tail_pool *tp, size_t bytes, int k)
{
	for (int i = TAIL_NCLASS - 1; i >= 0 && tp->used + tp->cached + bytes > tp->budget; i--) {
		while (tp->free[i] && tp->used + tp->cached + bytes > tp->budget) {
			struct tail_chunk *c = tp->free[i];

			tp->free[i] = c->next;
			tp->cached -= c->cap;
			free(c->mem);
			free(c);
		}
	}
	while (tp->used + tp->cached + bytes > tp->budget && tp->fifo_head) {
		struct tail_chunk *c = tp->fifo_head;

		tail_fifo_del(tp, c);
		c->owner->evict(c->owner, c);
		__atomic_store_n(&tp->evictions, tp->evictions + 1, __ATOMIC_RELAXED);   /* read by /metrics */
		tail_chunk_put(tp, c);
		if (c->shift - TAIL_CHUNK_MIN_SHIFT == k)
			return 1;   /* the size wanted: reused as it is */
		/* put moved it to a free list: release its memory if still short */
		if (tp->used + tp->cached + bytes > tp->budget) {
			int ck = c->shift - TAIL_CHUNK_MIN_SHIFT;

			tp->free[ck] = c->next;
			tp->cached -= c->cap;
			free(c->mem);
			free(c);
		}
	}
	return tp->used + tp->cached + bytes <= tp->budget ? 0 : -1;
}

struct tail_chunk *tail_chunk_get(struct tail_pool *tp, unsigned shift, size_t min_bytes)
{
	struct tail_chunk *c;
	int k;

	while (shift < TAIL_CHUNK_MAX_SHIFT && ((size_t)1 << shift) < min_bytes)
		shift++;
	if (shift < TAIL_CHUNK_MIN_SHIFT)
		shift = TAIL_CHUNK_MIN_SHIFT;
	if (((size_t)1 << shift) < min_bytes)
		return NULL;
	k = (int)shift - TAIL_CHUNK_MIN_SHIFT;
	c = tp->free[k];
	if (!c && tp->used + tp->cached + ((size_t)1 << shift) > tp->budget) {
		int r = tail_make_room(tp, (size_t)1 << shift, k);

		if (r < 0)
			return NULL;
		c = tp->free[k];   /* an evicted chunk of this size, or room for a new one */
	}
	if (c) {
		tp->free[k] = c->next;
		tp->cached -= c->cap;
	} else {
		c = calloc(1, sizeof(*c)); /* style: allow first use of a size class */
		if (!c)
			return NULL;
		if (posix_memalign((void **)&c->mem, shift >= TAIL_HUGE_SHIFT ? (size_t)1 << TAIL_HUGE_SHIFT : 4096,
				   (size_t)1 << shift)) {
			free(c);
			return NULL;
		}
		/* a chunk of 2 MiB or more is filled front to back and kept:
		 * transparent huge pages fault it in 2 MiB at a time instead of
		 * a fault per 4 KiB page (where THP is "madvise"; advice only) */
		if (shift >= TAIL_HUGE_SHIFT)
			(void)madvise(c->mem, (size_t)1 << shift, MADV_HUGEPAGE);
		c->cap = 1u << shift;
		c->shift = (uint8_t)shift;
		__atomic_store_n(&tp->allocations, tp->allocations + 1, __ATOMIC_RELAXED);   /* read by /metrics */
	}
	__atomic_store_n(&tp->used, tp->used + c->cap, __ATOMIC_RELAXED);   /* read by /metrics */
	c->next = c->prev = NULL;
	c->fifo_next = c->fifo_prev = NULL;
	c->on_fifo = 0;
	c->refs = 0;
	c->len = c->data_start = 0;
	c->seg = NULL;
	c->owner = NULL;
	return c;
}

void tail_chunk_put(struct tail_pool *tp, struct tail_chunk *c)
{
	int k = c->shift - TAIL_CHUNK_MIN_SHIFT;

	__atomic_store_n(&tp->used, tp->used - c->cap, __ATOMIC_RELAXED);
	c->owner = NULL;
	c->seg = NULL;
	c->next = tp->free[k];
	tp->free[k] = c;
	tp->cached += c->cap;
}

void tail_chunk_unref(struct tail_pool *tp, struct tail_chunk *c)
{
	if (--c->refs)
		return;
	if (!c->owner)                 /* detached while referenced */
		tail_chunk_put(tp, c);
	else
		c->owner->released(c->owner, tp, c);
}
