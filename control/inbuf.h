/* control/inbuf.h — the input buffer of a connection the control thread
 * reads frames from (control/ctl_channel.c, control/peer_kafka.c): bytes
 * read land at the end, whole frames are taken from the front, and what
 * is left of a frame moves to the front for the next read.
 *
 * Thread: whoever owns the connection (the control thread).
 * Owns: its memory (heap; inbuf_fini frees it).
 * Errors: none: a failed allocation aborts (the control thread's own
 * bookkeeping, as its other allocations).
 */
#ifndef SLUICE_INBUF_H
#define SLUICE_INBUF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define INBUF_FIRST (64u << 10)   /* the first allocation */
#define INBUF_ROOM 4096u          /* what a read is offered at least */

struct inbuf {
	uint8_t *p;
	size_t len, cap;          /* len bytes held of cap */
};

/* At least INBUF_ROOM free after len (the buffer doubled as needed). */
static inline void inbuf_room(struct inbuf *b)
{
	if (b->cap - b->len < INBUF_ROOM) {
		size_t cap = b->cap ? b->cap * 2 : INBUF_FIRST;
		uint8_t *n = realloc(b->p, cap);

		if (!n)
			abort();
		b->p = n;
		b->cap = cap;
	}
}

/* Drop the first n bytes (the frames taken), keeping the rest. */
static inline void inbuf_consume(struct inbuf *b, size_t n)
{
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

static inline void inbuf_fini(struct inbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

#endif
