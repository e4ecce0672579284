/* dataplane/fetch_session.c — a shard's fetch session cache (KIP-227).
 * @thread shard */
#include <stdlib.h>
#include <string.h>

#include "dataplane/fetch_session.h"

void fsess_cache_init(struct fsess_cache *c, int nslots, uint32_t seed)
{
	memset(c, 0, sizeof(*c));
	c->nslots = nslots > 0 ? nslots : 0;
	c->rng = seed ? seed : 0x9e3779b9u;
}

void fsess_cache_free(struct fsess_cache *c)
{
	for (int i = 0; c->slots && i < c->nslots; i++) {
		free(c->slots[i].parts);
		free(c->slots[i].names);
	}
	free(c->slots);
	c->slots = NULL;
	c->used = 0;
}

struct fsess *fsess_find(struct fsess_cache *c, int32_t id)
{
	if (!c->slots || id <= 0)
		return NULL;
	for (int i = 0; i < c->nslots; i++)
		if (c->slots[i].id == id)
			return &c->slots[i];
	return NULL;
}

void fsess_remove(struct fsess_cache *c, struct fsess *s)
{
	if (!s || !s->id)
		return;
	s->id = 0;
	s->gen++;
	s->nparts = 0;
	s->names_len = 0;
	c->used--;
}

static uint32_t next_rand(struct fsess_cache *c)
{
	uint32_t x = c->rng;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return c->rng = x;
}

/* Kafka's EvictableKey order: unprivileged before privileged, then fewer
 * partitions first, then the id. <0: a is worth less than b. */
static int key_cmp(int pa, int na, int32_t ida, int pb, int nb, int32_t idb)
{
	if (pa != pb)
		return pa < pb ? -1 : 1;
	if (na != nb)
		return na < nb ? -1 : 1;
	return ida < idb ? -1 : ida > idb;
}

/* The slot to take for a new session, or NULL (Kafka's tryEvict). */
static struct fsess *evict_for(struct fsess_cache *c, int privileged, int nparts, uint64_t now)
{
	struct fsess *lru = NULL, *low = NULL;

	for (int i = 0; i < c->nslots; i++) {
		struct fsess *s = &c->slots[i];
		int old = now > s->created_ns + FSESS_EVICT_NS;

		if (!lru || s->used_ns < lru->used_ns)
			lru = s;
		/* evictable by a privileged session: an unprivileged one, or
		 * any old enough; by anyone: old enough */
		if (!(privileged ? (!s->privileged || old) : old))
			continue;
		if (!low || key_cmp(s->privileged, s->nparts, s->id, low->privileged, low->nparts, low->id) < 0)
			low = s;
	}
	if (lru && now > lru->used_ns + FSESS_EVICT_NS)
		return lru;
	if (low && key_cmp(privileged, nparts, 0, low->privileged, low->nparts, low->id) >= 0)
		return low;
	return NULL;
}

struct fsess *fsess_create(struct fsess_cache *c, int privileged, int nparts, int topic_ids, uint64_t now_ns)
{
	struct fsess *s = NULL;
	int32_t id;

	if (!c->nslots)
		return NULL;
	if (!c->slots) {
		c->slots = calloc((size_t)c->nslots, sizeof(*c->slots)); /* style: allow once per shard, at its first session */
		if (!c->slots)
			return NULL;
	}
	if (c->used < c->nslots) {
		for (int i = 0; i < c->nslots && !s; i++)
			if (!c->slots[i].id)
				s = &c->slots[i];
	} else if ((s = evict_for(c, privileged, nparts, now_ns))) {
		fsess_remove(c, s);
		c->evictions++;
	}
	if (!s)
		return NULL;
	do
		id = (int32_t)(next_rand(c) & 0x7fffffff);
	while (!id || fsess_find(c, id));
	s->id = id;
	s->epoch = 1;
	s->gen++;
	s->privileged = privileged;
	s->topic_ids = topic_ids;
	s->created_ns = s->used_ns = now_ns;
	s->nparts = 0;
	s->names_len = 0;
	c->used++;
	return s;
}

static int same(const struct fsess *s, const struct fsess_part *p, const uint8_t id[16], const char *name,
		int32_t len)
{
	if (s->topic_ids)
		return !memcmp(p->topic_id, id, 16);
	return p->name_len == len && !memcmp(s->names + p->name_off, name, (size_t)(len > 0 ? len : 0));
}

int fsess_part_find(const struct fsess *s, const uint8_t id[16], const char *name, int32_t len, int32_t partition)
{
	for (int i = 0; i < s->nparts; i++)
		if (s->parts[i].partition == partition && same(s, &s->parts[i], id, name, len))
			return i;
	return -1;
}

int fsess_part_upsert(struct fsess *s, const uint8_t id[16], const char *name, int32_t len, int32_t partition)
{
	int i = fsess_part_find(s, id, name, len, partition);
	struct fsess_part *p;

	if (len < 0)
		len = 0;
	if (i >= 0)
		return i;
	if (s->nparts == s->cap) {
		int cap = s->cap ? s->cap * 2 : 8;
		struct fsess_part *np = realloc(s->parts, (size_t)cap * sizeof(*np)); /* style: allow growth: partitions new to the session */

		if (!np)
			return -1;
		s->parts = np;
		s->cap = cap;
	}
	p = &s->parts[s->nparts];
	memset(p, 0, sizeof(*p));
	memcpy(p->topic_id, id, 16);
	p->partition = partition;
	p->hw_sent = p->log_start_sent = -1;
	p->name_len = s->topic_ids ? 0 : len;
	if (!s->topic_ids) {
		/* share the name of a partition of the same topic (the names
		 * grow only with topics new to the session) */
		int k = s->nparts - 1;

		while (k >= 0 && !same(s, &s->parts[k], id, name, len))
			k--;
		if (k >= 0) {
			p->name_off = s->parts[k].name_off;
		} else {
			if (s->names_len + (uint32_t)len + 1 > s->names_cap) {
				uint32_t cap = s->names_cap ? s->names_cap * 2 : 256;
				char *nn;

				while (cap < s->names_len + (uint32_t)len + 1)
					cap *= 2;
				if (!(nn = realloc(s->names, cap))) /* style: allow growth: a topic new to the session */
					return -1;
				s->names = nn;
				s->names_cap = cap;
			}
			memcpy(s->names + s->names_len, name, (size_t)len);
			p->name_off = s->names_len;
			s->names_len += (uint32_t)len + 1;
			s->names[p->name_off + (uint32_t)len] = 0;
		}
	}
	s->gen++;
	return s->nparts++;
}

void fsess_part_forget(struct fsess *s, const uint8_t id[16], const char *name, int32_t len, int32_t partition)
{
	int i = fsess_part_find(s, id, name, len, partition);

	if (i < 0)
		return;
	/* keep the order of the rest (the response's order) */
	memmove(&s->parts[i], &s->parts[i + 1], (size_t)(s->nparts - i - 1) * sizeof(*s->parts));
	s->nparts--;
	s->gen++;
}
