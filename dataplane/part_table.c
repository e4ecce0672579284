/* dataplane/part_table.c — a shard's partitions by (topic id, index): see
 * part_table.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/part.h"
#include "dataplane/part_table.h"

static uint32_t key_hash(const uint8_t id[16], int32_t index)
{
	uint64_t a, b, h;

	memcpy(&a, id, 8);
	memcpy(&b, id + 8, 8);
	h = a ^ (b * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(uint32_t)index * 0xc2b2ae3d27d4eb4full);
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)h;
}

static int key_eq(const struct part *p, const uint8_t id[16], int32_t index)
{
	return p->index == index && memcmp(p->topic_id, id, 16) == 0;
}

static void put(struct part **slot, uint32_t cap, struct part *p)
{
	uint32_t i = key_hash(p->topic_id, p->index) & (cap - 1);

	while (slot[i])
		i = (i + 1) & (cap - 1);
	slot[i] = p;
}

static int grow(struct part_table *pt)
{
	uint32_t cap = pt->cap ? pt->cap * 2 : 64;
	struct part **slot = calloc(cap, sizeof(*slot)); /* style: allow partition open, not a lookup */

	if (!slot)
		return -ENOMEM;
	for (uint32_t i = 0; i < pt->cap; i++)
		if (pt->slot[i])
			put(slot, cap, pt->slot[i]);
	free(pt->slot);
	pt->slot = slot;
	pt->cap = cap;
	return 0;
}

struct part *part_table_find(const struct part_table *pt, const uint8_t topic_id[16], int32_t index)
{
	if (!pt->cap)
		return NULL;
	for (uint32_t i = key_hash(topic_id, index) & (pt->cap - 1);; i = (i + 1) & (pt->cap - 1)) {
		struct part *p = pt->slot[i];

		if (!p)
			return NULL;
		if (key_eq(p, topic_id, index))
			return p;
	}
}

/* The slot of p's key, or -1. */
static int64_t find_slot(const struct part_table *pt, const uint8_t topic_id[16], int32_t index)
{
	if (!pt->cap)
		return -1;
	for (uint32_t i = key_hash(topic_id, index) & (pt->cap - 1);; i = (i + 1) & (pt->cap - 1)) {
		if (!pt->slot[i])
			return -1;
		if (key_eq(pt->slot[i], topic_id, index))
			return i;
	}
}

int part_table_add(struct part_table *pt, struct part *p)
{
	int64_t at = find_slot(pt, p->topic_id, p->index);

	if (at >= 0) {
		pt->slot[at] = p;
		return 0;
	}
	if ((pt->n + 1) * 2 > pt->cap) {
		int rc = grow(pt);

		if (rc < 0)
			return rc;
	}
	put(pt->slot, pt->cap, p);
	pt->n++;
	return 0;
}

void part_table_remove(struct part_table *pt, const struct part *p)
{
	int64_t at = find_slot(pt, p->topic_id, p->index);
	uint32_t mask = pt->cap - 1, i, j;

	if (at < 0 || pt->slot[at] != p)
		return;
	/* backward shift: move each following entry of the run into the hole
	 * when its home slot does not lie cyclically in (hole, its slot] */
	i = (uint32_t)at;
	pt->slot[i] = NULL;
	for (j = (i + 1) & mask; pt->slot[j]; j = (j + 1) & mask) {
		uint32_t home = key_hash(pt->slot[j]->topic_id, pt->slot[j]->index) & mask;

		if (((j - home) & mask) >= ((j - i) & mask)) {
			pt->slot[i] = pt->slot[j];
			pt->slot[j] = NULL;
			i = j;
		}
	}
	pt->n--;
}

void part_table_fini(struct part_table *pt)
{
	free(pt->slot);
	pt->slot = NULL;
	pt->cap = pt->n = 0;
}
