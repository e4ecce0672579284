/* storage/tail.h — the in-memory tail: per-shard chunk memory shared by the
 * shard's partitions under one byte budget.
 *
 * Thread: the owning shard only (no locks). One exception: the pool's
 * `used` byte count is stored with a relaxed atomic store by the shard and
 * read by the control thread for /metrics (a gauge; nothing decides on it).
 * Owns: every chunk's memory. A chunk is a 4 KiB-aligned block of 2^k bytes
 * (TAIL_CHUNK_MIN .. TAIL_CHUNK_MAX) that maps a 4 KiB-aligned range of one
 * segment file; the O_DIRECT writes of the log go straight from it and reads
 * of recent data are served from it without a copy.
 * Errors: tail_chunk_get returns NULL when the budget is spent and nothing
 * can be evicted; the caller reports -ENOBUFS (back-pressure).
 * The pool knows nothing of partitions: a chunk's owner (a partition log)
 * links it into its own list and gives the pool, in c->owner, the
 * callbacks it needs (struct tail_owner).
 *
 * Invariants: a chunk is on exactly one of {a size-class free list, its
 * partition's chunk list}. A chunk on a partition list is on the shard's
 * clean FIFO iff it is fully written to disk, nobody holds a read reference
 * (refs == 0) and, for the partition's last chunk, no write of the
 * partition is in flight; only those may be evicted. So all of the budget
 * that is not in dirty or referenced chunks can be reclaimed: idle
 * partitions hold no tail memory once others need it (the next append to
 * one reads its partial last block back from the file).
 */
#ifndef SLUICE_TAIL_H
#define SLUICE_TAIL_H

#include <stddef.h>
#include <stdint.h>

#define TAIL_CHUNK_MIN_SHIFT 14   /* 16 KiB */
#define TAIL_CHUNK_MAX_SHIFT 24   /* 16 MiB: a 1 MiB batch always fits */
#define TAIL_HUGE_SHIFT      21   /* 2 MiB: chunks this large are aligned to it and
				   * advised MADV_HUGEPAGE (tail.c) */
#define TAIL_NCLASS (TAIL_CHUNK_MAX_SHIFT - TAIL_CHUNK_MIN_SHIFT + 1)

struct segment;
struct tail_chunk;
struct tail_pool;

/* Whoever links chunks into a list of its own (a partition log) embeds
 * one of these, sets both callbacks, and points c->owner at it. A chunk
 * whose owner let go of it while it was referenced (c->owner NULL) goes
 * back to its free list at its last release. @thread shard */
struct tail_owner {
	/* The pool evicts c (clean, already off the FIFO) and reuses it as
	 * soon as this returns: take it off the owner's list. */
	void (*evict)(struct tail_owner *o, struct tail_chunk *c);
	/* The last read reference of c went: put it on the FIFO
	 * (tail_fifo_add) if it is clean. */
	void (*released)(struct tail_owner *o, struct tail_pool *tp, struct tail_chunk *c);
};

struct tail_chunk {
	uint8_t *mem;              /* 4 KiB aligned, cap bytes */
	uint32_t cap;
	uint32_t len;              /* bytes of file data held, from file_base */
	uint32_t data_start;       /* first batch that starts in this chunk */
	uint64_t file_base;        /* file position of mem[0], 4 KiB aligned */
	int64_t first_offset;      /* offset of the first batch starting here */
	int64_t end_offset;        /* offset after the last batch here */
	struct segment *seg;       /* borrowed: the segment this chunk maps */
	struct tail_owner *owner;  /* borrowed: whose list it is on; NULL if none */
	struct tail_chunk *next;   /* partition list, oldest first; or free list */
	struct tail_chunk *prev;
	struct tail_chunk *fifo_next; /* shard clean FIFO (evictable) */
	struct tail_chunk *fifo_prev;
	uint64_t born_ns;
	uint32_t refs;             /* read references (responses in flight) */
	uint8_t shift;
	uint8_t on_fifo;
};

struct tail_pool {
	size_t budget;             /* bytes of chunk memory allowed */
	size_t used;               /* bytes held by chunks in use */
	size_t cached;             /* bytes held on free lists */
	struct tail_chunk *free[TAIL_NCLASS];
	struct tail_chunk *fifo_head, *fifo_tail;
	uint64_t evictions;
	uint64_t allocations;      /* chunks whose memory was allocated (evicted ones are reused) */
	uint64_t hits, misses;
	uint64_t reloads;          /* partial blocks read back after an evicted last chunk */
};

/* @thread shard (setup) */
void tail_pool_init(struct tail_pool *tp, size_t budget);
void tail_pool_fini(struct tail_pool *tp);

/* A chunk of at least `min_bytes`, of 2^shift bytes if possible.
 * Evicts clean chunks (FIFO) to stay within the budget. @thread shard */
struct tail_chunk *tail_chunk_get(struct tail_pool *tp, unsigned shift, size_t min_bytes);
/* Return a chunk to its free list (it must be off every list). */
void tail_chunk_put(struct tail_pool *tp, struct tail_chunk *c);

void tail_fifo_add(struct tail_pool *tp, struct tail_chunk *c);
void tail_fifo_del(struct tail_pool *tp, struct tail_chunk *c);

/* Read references: a chunk with refs > 0 is never evicted or recycled. */
static inline void tail_chunk_ref(struct tail_pool *tp, struct tail_chunk *c)
{
	if (c->refs++ == 0 && c->on_fifo)
		tail_fifo_del(tp, c);
}

void tail_chunk_unref(struct tail_pool *tp, struct tail_chunk *c);

#endif
