/* dataplane/spsc.h — single-producer single-consumer ring of fixed-size
 * messages, the only way Sluice's threads meet.
 *
 * Thread: exactly one producer thread and one consumer thread per ring.
 * Owns: its slots (caller memory given at init).
 * Errors: spsc_push returns -ENOBUFS when full (the caller parks the
 * message and retries on its next loop turn: never spin, never abort).
 *
 * Invariant (why it is safe without locks): `head` is written only by the
 * consumer and `tail` only by the producer, each on its own cache line. The
 * producer writes the slot, then publishes tail with a release store; the
 * consumer reads tail with an acquire load before reading the slot, then
 * publishes head with a release store so the producer may reuse the slot.
 */
#ifndef SLUICE_SPSC_H
#define SLUICE_SPSC_H

#include <assert.h>
#include <errno.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One message: a function to run on the consumer's thread and its
 * arguments (STYLE 15: fixed-size {fn, arg} messages). Pointers travel,
 * record data never does. */
struct shard_msg {
	void (*fn)(void *self, struct shard_msg *m);  /* self: the consumer's thread object */
	void *p[4];
	int64_t v[4];
};

struct spsc {
	alignas(64) uint32_t head;        /* consumer */
	alignas(64) uint32_t tail;        /* producer */
	uint32_t cached_head;             /* producer's view */
	alignas(64) uint32_t mask;
	struct shard_msg *slots;
};

static_assert(offsetof(struct spsc, tail) - offsetof(struct spsc, head) >= 64, "head/tail on separate lines");

static inline void spsc_init(struct spsc *r, struct shard_msg *slots, uint32_t size_pow2)
{
	memset(r, 0, sizeof(*r));
	r->mask = size_pow2 - 1;
	r->slots = slots;
}

/* @thread producer */
static inline int spsc_push(struct spsc *r, const struct shard_msg *m)
{
	uint32_t t = r->tail;

	if (t - r->cached_head > r->mask) {
		r->cached_head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		if (t - r->cached_head > r->mask)
			return -ENOBUFS;
	}
	r->slots[t & r->mask] = *m;
	__atomic_store_n(&r->tail, t + 1, __ATOMIC_RELEASE);
	return 0;
}

/* @thread consumer. 1 and *m filled, or 0 if empty. */
static inline int spsc_pop(struct spsc *r, struct shard_msg *m)
{
	uint32_t h = r->head;

	if (h == __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE))
		return 0;
	*m = r->slots[h & r->mask];
	__atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
	return 1;
}

static inline int spsc_empty(struct spsc *r)
{
	return r->head == __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
}

#endif
