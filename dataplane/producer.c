/* dataplane/producer.c — idempotent producer state of a partition (see
 * producer.h): an open-addressing table keyed by producer id. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/producer.h"

static uint32_t slot_of(const struct producer_table *t, int64_t pid)
{
	uint64_t h = (uint64_t)pid * 0x9E3779B97F4A7C15ull;

	return (uint32_t)(h >> 32) & (t->cap - 1);
}

static struct producer_entry *find(const struct producer_table *t, int64_t pid)
{
	if (!t->cap)
		return NULL;
	for (uint32_t i = slot_of(t, pid);; i = (i + 1) & (t->cap - 1)) {
		if (t->e[i].pid == pid)
			return &t->e[i];
		if (t->e[i].pid == -1)
			return NULL;
	}
}

int producer_check(const struct producer_table *t, int64_t pid, int16_t epoch, int32_t first_seq,
		   int32_t last_seq, struct producer_batch *dup)
{
	const struct producer_entry *e = find(t, pid);
	const struct producer_batch *newest;

	if (!e)
		return PRODUCER_APPEND;
	if (epoch < e->epoch)
		return KERR_INVALID_PRODUCER_EPOCH;   /* a zombie of an older epoch */
	if (epoch > e->epoch)
		return first_seq == 0 ? PRODUCER_APPEND : KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
	for (int i = 0; i < e->n; i++) {
		const struct producer_batch *b = &e->b[(e->head + i) % PRODUCER_BATCHES];

		if (b->first_seq == first_seq && b->last_seq == last_seq) {
			*dup = *b;
			return PRODUCER_DUPLICATE;
		}
	}
	if (!e->n)
		return PRODUCER_APPEND;
	newest = &e->b[(e->head + e->n - 1) % PRODUCER_BATCHES];
	if (first_seq != producer_seq_add(newest->last_seq, 1))
		return KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
	return PRODUCER_APPEND;
}

static int grow(struct producer_table *t)
{
	struct producer_table old = *t;
	uint32_t cap = old.cap ? old.cap * 2 : 4;

	t->e = malloc(sizeof(*t->e) * cap); /* style: allow per producer id, amortized */
	if (!t->e) {
		*t = old;
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cap; i++)
		t->e[i].pid = -1;
	t->cap = cap;
	t->n = 0;
	for (uint32_t i = 0; i < old.cap; i++)
		if (old.e[i].pid != -1) {
			uint32_t j = slot_of(t, old.e[i].pid);

			while (t->e[j].pid != -1)
				j = (j + 1) & (t->cap - 1);
			t->e[j] = old.e[i];
			t->n++;
		}
	free(old.e);
	return 0;
}

int producer_record(struct producer_table *t, int64_t pid, int16_t epoch, int32_t first_seq, int32_t last_seq,
		    int64_t base_offset, int64_t last_offset, int64_t now_ms)
{
	struct producer_entry *e = find(t, pid);

	if (!e) {
		uint32_t i;

		if ((t->n + 1) * 4 > t->cap * 3 && grow(t) < 0)
			return -ENOMEM;
		for (i = slot_of(t, pid); t->e[i].pid != -1; i = (i + 1) & (t->cap - 1))
			;
		e = &t->e[i];
		memset(e, 0, sizeof(*e));
		e->pid = pid;
		e->epoch = epoch;
		t->n++;
	}
	if (epoch != e->epoch) {
		/* a new epoch starts its sequences over */
		e->epoch = epoch;
		e->n = 0;
		e->head = 0;
	}
	if (e->n == PRODUCER_BATCHES) {
		e->head = (uint8_t)((e->head + 1) % PRODUCER_BATCHES);
		e->n--;
	}
	e->b[(e->head + e->n) % PRODUCER_BATCHES] = (struct producer_batch){ first_seq, last_seq, base_offset,
									    last_offset };
	e->n++;
	e->last_ms = now_ms;
	return 0;
}

void producer_expire(struct producer_table *t, int64_t now_ms, int64_t ttl_ms)
{
	int gone = 0;

	for (uint32_t i = 0; i < t->cap; i++)
		if (t->e[i].pid != -1 && now_ms - t->e[i].last_ms >= ttl_ms) {
			t->e[i].pid = -2;   /* tombstone until the rebuild below */
			gone++;
		}
	if (!gone)
		return;
	/* rebuild in place: linear probing has no cheap delete */
	{
		struct producer_table old = *t;
		uint32_t n = 0;

		for (uint32_t i = 0; i < old.cap; i++)
			n += old.e[i].pid >= 0;
		t->e = NULL;
		t->cap = t->n = 0;
		if (n) {
			while (t->cap * 3 < (n + 1) * 4)
				if (grow(t) < 0)
					break;
			for (uint32_t i = 0; i < old.cap && t->cap; i++)
				if (old.e[i].pid >= 0) {
					uint32_t j = slot_of(t, old.e[i].pid);

					while (t->e[j].pid != -1)
						j = (j + 1) & (t->cap - 1);
					t->e[j] = old.e[i];
					t->n++;
				}
		}
		free(old.e);
	}
}

void producer_table_free(struct producer_table *t)
{
	free(t->e);
	memset(t, 0, sizeof(*t));
}
