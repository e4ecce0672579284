/* control/hmap.c — a small open-addressing hash map of pointers (see hmap.h). */
#include <stdlib.h>
#include <string.h>

#include "control/hmap.h"

static void hmap_grow(struct hmap *m)
{
	struct hmap old = *m;

	m->cap = old.cap ? old.cap * 2 : 16;
	m->n = 0;
	m->v = calloc(m->cap, sizeof(*m->v));
	m->h = calloc(m->cap, sizeof(*m->h));
	if (!m->v || !m->h)
		abort();
	for (uint32_t i = 0; i < old.cap; i++)
		if (old.v[i])
			hmap_put(m, old.h[i], old.v[i]);
	free(old.v);
	free(old.h);
}

void hmap_put(struct hmap *m, uint64_t h, void *v)
{
	uint32_t i;

	if ((m->n + 1) * 10 > m->cap * 7)
		hmap_grow(m);
	for (i = (uint32_t)h & (m->cap - 1); m->v[i]; i = (i + 1) & (m->cap - 1))
		;
	m->v[i] = v;
	m->h[i] = h;
	m->n++;
}

int64_t hmap_find(const struct hmap *m, uint64_t h, int (*eq)(const void *item, const void *key), const void *key)
{
	if (!m->cap)
		return -1;
	for (uint32_t i = (uint32_t)h & (m->cap - 1); m->v[i]; i = (i + 1) & (m->cap - 1))
		if (m->h[i] == h && eq(m->v[i], key))
			return i;
	return -1;
}

void hmap_del_at(struct hmap *m, uint32_t i)
{
	uint32_t mask = m->cap - 1, j = i;

	m->v[i] = NULL;
	m->n--;
	for (;;) {
		uint32_t home;

		j = (j + 1) & mask;
		if (!m->v[j])
			return;
		home = (uint32_t)m->h[j] & mask;
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			m->v[i] = m->v[j];
			m->h[i] = m->h[j];
			m->v[j] = NULL;
			i = j;
		}
	}
}

void hmap_free(struct hmap *m)
{
	free(m->v);
	free(m->h);
	memset(m, 0, sizeof(*m));
}
