/* control/ctl_homes.c — the control thread's book of this node's partition
 * copies (see ctl_homes.h): a chained hash table keyed by (topic id,
 * partition index), grown by doubling. Control thread only.
 */
#include "control/ctl_homes.h"

#include <stdlib.h>
#include <string.h>

#include "control/ctl_internal.h"
#include "dataplane/broker.h"

struct ctl_homes {
	struct ctl_home **slot;      /* nslot heads, a power of two */
	uint32_t nslot, n;
	/* every published block ever allocated, freed at exit only */
	struct part_pub **pubs;
	uint32_t npubs, cap_pubs;
};

static uint32_t home_hash(const uint8_t id[16], int32_t idx)
{
	uint32_t h = 2166136261u;

	for (int i = 0; i < 16; i++)
		h = (h ^ id[i]) * 16777619u;
	return (h ^ (uint32_t)idx) * 16777619u;
}

static void *xalloc(size_t n)
{
	void *p = calloc(1, n);

	if (!p)
		abort();   /* the control thread's own bookkeeping */
	return p;
}

struct ctl_homes *ctl_homes_new(void)
{
	struct ctl_homes *hs = xalloc(sizeof(*hs));

	hs->nslot = 64;
	hs->slot = xalloc(hs->nslot * sizeof(*hs->slot));
	return hs;
}

void ctl_homes_free(struct ctl_homes *hs)
{
	if (!hs)
		return;
	for (uint32_t i = 0; i < hs->nslot; i++)
		while (hs->slot[i]) {
			struct ctl_home *h = hs->slot[i];

			hs->slot[i] = h->next;
			free(h);
		}
	for (uint32_t i = 0; i < hs->npubs; i++)
		free(hs->pubs[i]);
	free(hs->pubs);
	free(hs->slot);
	free(hs);
}

struct ctl_home *ctl_home_find(const struct ctl_homes *hs, const uint8_t id[16], int32_t idx)
{
	struct ctl_home *h = hs->slot[home_hash(id, idx) & (hs->nslot - 1)];

	while (h && (h->index != idx || memcmp(h->topic_id, id, 16)))
		h = h->next;
	return h;
}

static void grow(struct ctl_homes *hs)
{
	uint32_t nslot = hs->nslot * 2;
	struct ctl_home **slot = xalloc(nslot * sizeof(*slot));

	for (uint32_t i = 0; i < hs->nslot; i++)
		while (hs->slot[i]) {
			struct ctl_home *h = hs->slot[i];
			uint32_t at = home_hash(h->topic_id, h->index) & (nslot - 1);

			hs->slot[i] = h->next;
			h->next = slot[at];
			slot[at] = h;
		}
	free(hs->slot);
	hs->slot = slot;
	hs->nslot = nslot;
}

static struct part_pub *pub_new(struct ctl_homes *hs)
{
	struct part_pub *u = aligned_alloc(64, sizeof(*u));

	if (!u)
		abort();
	memset(u, 0, sizeof(*u));
	if (hs->npubs == hs->cap_pubs) {
		hs->cap_pubs = hs->cap_pubs ? hs->cap_pubs * 2 : 64;
		hs->pubs = realloc(hs->pubs, hs->cap_pubs * sizeof(*hs->pubs));
		if (!hs->pubs)
			abort();
	}
	hs->pubs[hs->npubs++] = u;
	return u;
}

struct ctl_home *ctl_home_add(struct ctl_homes *hs, const uint8_t id[16], int32_t idx, int32_t shard)
{
	struct ctl_home *h = ctl_home_find(hs, id, idx);
	uint32_t at;

	if (h)
		return h;
	if (hs->n >= hs->nslot)
		grow(hs);
	h = xalloc(sizeof(*h));
	memcpy(h->topic_id, id, 16);
	h->index = idx;
	h->shard = shard;
	h->part_pub = pub_new(hs);
	at = home_hash(id, idx) & (hs->nslot - 1);
	h->next = hs->slot[at];
	hs->slot[at] = h;
	hs->n++;
	return h;
}

int32_t ctl_home_take(struct ctl_homes *hs, const uint8_t id[16], int32_t idx)
{
	struct ctl_home **pp = &hs->slot[home_hash(id, idx) & (hs->nslot - 1)];
	int32_t shard;

	while (*pp && ((*pp)->index != idx || memcmp((*pp)->topic_id, id, 16)))
		pp = &(*pp)->next;
	if (!*pp)
		return -1;
	{
		struct ctl_home *h = *pp;

		shard = h->opened == 1 ? h->shard : -1;
		*pp = h->next;
		free(h);
	}
	hs->n--;
	return shard;
}

int32_t ctl_home_epoch(const struct ctl_home *h, int32_t leader, int32_t epoch)
{
	return h && h->told && h->told_leader == leader && h->told_epoch > epoch ? h->told_epoch : epoch;
}

int32_t ctl_part_open_on(const struct ctl *ctl, const uint8_t id[16], int32_t idx)
{
	const struct ctl_home *h = ctl_home_find(ctl->homes, id, idx);

	return h && h->opened == 1 ? h->shard : -1;
}

const struct ctl_home *ctl_part_home(const struct ctl *ctl, const uint8_t id[16], int32_t idx)
{
	return ctl_home_find(ctl->homes, id, idx);
}
