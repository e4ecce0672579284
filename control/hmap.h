/* control/hmap.h — a small open-addressing hash map of pointers, keyed by a
 * 64-bit hash the caller computes (hmap_hash_str and friends) and an
 * equality function the caller gives; the group and transaction
 * coordinators keep their groups, offsets and transactions in it.
 *
 * Thread: whichever thread owns the map (the control thread, for every map
 * today); no locking. The map owns its two arrays, never the items: the
 * caller frees the items before hmap_free.
 *
 * Errors: none returned; out of memory aborts (control-thread bookkeeping,
 * as xcalloc in control/cutil.h).
 *
 * Iterating: for (i = 0; i < m->cap; i++) if (m->v[i]) ... . Removing
 * slot i while iterating (hmap_del_at) may move a later item into slot i:
 * look at slot i again before moving on.
 */
#ifndef SLUICE_HMAP_H
#define SLUICE_HMAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct hmap {
	void **v;                 /* the items; NULL: a free slot */
	uint64_t *h;              /* each item's hash */
	uint32_t cap, n;          /* cap: power of two or 0 (nothing allocated) */
};

/* FNV-1a, continued from h. */
static inline uint64_t hmap_hash_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static inline uint64_t hmap_hash_mem(const void *p, size_t n)
{
	return hmap_hash_bytes(14695981039346656037ull, p, n);
}

static inline uint64_t hmap_hash_str(const char *s)
{
	return hmap_hash_mem(s, strlen(s));
}

/* @thread owner: add v (never NULL) under hash h; duplicates are the
 * caller's to avoid. */
void hmap_put(struct hmap *m, uint64_t h, void *v);
/* @thread owner: the slot holding an item with hash h that eq() says is
 * key, or -1. */
int64_t hmap_find(const struct hmap *m, uint64_t h, int (*eq)(const void *item, const void *key), const void *key);
/* @thread owner: empty slot i (backward-shift deletion keeps probe chains
 * whole). */
void hmap_del_at(struct hmap *m, uint32_t i);
/* @thread owner: free the arrays (not the items); the map is empty again. */
void hmap_free(struct hmap *m);

#endif
