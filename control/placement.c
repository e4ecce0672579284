/* control/placement.c — Kafka's assignment of replicas to brokers. See
 * placement.h. @thread any */
#include "control/placement.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *rack_of(const struct placement_broker *b)
{
	return b->rack ? b->rack : "";
}

static int by_id(const void *a, const void *b)
{
	const struct placement_broker *x = a, *y = b;

	return (x->id > y->id) - (x->id < y->id);
}

static int by_rack_then_id(const void *a, const void *b)
{
	const struct placement_broker *x = a, *y = b;
	int c = strcmp(rack_of(x), rack_of(y));

	return c ? c : by_id(a, b);
}

/* Kafka's getRackAlternatedBrokerList: one broker of each rack in turn
 * (racks in name order, each rack's brokers in id order). s is sorted by
 * rack then id; out gets the order; returns the number of racks. */
static int rack_alternate(const struct placement_broker *s, int n, int32_t *out)
{
	int *start = malloc((size_t)n * sizeof(int)), *at = malloc((size_t)n * sizeof(int)), *end = malloc((size_t)n * sizeof(int));
	int nracks = 0, got = 0;

	if (!start || !at || !end) {
		free(start);
		free(at);
		free(end);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		if (i == 0 || strcmp(rack_of(&s[i]), rack_of(&s[i - 1]))) {
			start[nracks] = at[nracks] = i;
			nracks++;
		}
		end[nracks - 1] = i + 1;
	}
	for (int r = 0; got < n; r = (r + 1) % nracks)
		if (at[r] < end[r])
			out[got++] = s[at[r]++].id;
	free(start);
	free(at);
	free(end);
	return nracks;
}

static int replica_index(int first, int shift, int j, int n)
{
	return (first + 1 + (shift + j) % (n - 1)) % n;
}

int placement_assign(const struct placement_broker *brokers, int n, int32_t first, int32_t nparts, int rf,
		     uint32_t start, int32_t *out)
{
	struct placement_broker *s;
	int32_t *list;
	int *rack, *oi;              /* rack number of list[i]; a partition's replicas as list indexes */
	int racked = n > 0, nracks = 1, si, shift, rc = 0;

	if (nparts < 1 || rf < 1 || first < 0)
		return -EINVAL;
	if (rf > n)
		return -ENOSPC;
	for (int i = 0; i < n; i++)
		racked &= brokers[i].rack && brokers[i].rack[0];
	s = malloc((size_t)n * sizeof(*s));
	list = malloc((size_t)n * sizeof(*list));
	rack = calloc((size_t)n, sizeof(*rack));
	oi = malloc((size_t)rf * sizeof(*oi));
	if (!s || !list || !rack || !oi) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(s, brokers, (size_t)n * sizeof(*s));
	if (racked) {
		qsort(s, (size_t)n, sizeof(*s), by_rack_then_id);
		if ((nracks = rack_alternate(s, n, list)) < 0) {
			rc = nracks;
			goto out;
		}
		for (int i = 0; i < n; i++)
			for (int k = 0, r = 0; k < n; k++) {
				r += k > 0 && strcmp(rack_of(&s[k]), rack_of(&s[k - 1]));
				if (s[k].id == list[i])
					rack[i] = r;
			}
	} else {
		qsort(s, (size_t)n, sizeof(*s), by_id);
		for (int i = 0; i < n; i++)
			list[i] = s[i].id;
	}
	si = (int)(start % (uint32_t)n);
	for (int32_t p = first; p < first + nparts; p++) {
		int32_t *o = &out[(size_t)(p - first) * rf];
		int got = 1;

		/* one more each time the partitions went round the brokers
		 * (from partition 0: added partitions continue the rounds) */
		shift = si + (int)(p / n);
		oi[0] = (int)((p + si) % n);
		if (!racked) {
			for (int j = 0; j < rf - 1; j++)
				oi[got++] = replica_index(oi[0], shift, j, n);
		}
		/* rack-aware: a rack without a replica first, until every rack
		 * has one; a broker once, until every broker has one */
		for (int k = 0; racked && got < rf; k++) {
			int at = replica_index(oi[0], shift * nracks, k, n), rack_used = 0, used = 0, racks_with = 0;

			for (int x = 0; x < got; x++) {
				int seen = 0;

				rack_used |= rack[oi[x]] == rack[at];
				used |= oi[x] == at;
				for (int z = 0; z < x; z++)
					seen |= rack[oi[z]] == rack[oi[x]];
				racks_with += !seen;
			}
			if ((!rack_used || racks_with == nracks) && (!used || got == n))
				oi[got++] = at;
		}
		for (int j = 0; j < rf; j++)
			o[j] = list[oi[j]];
	}
out:
	free(s);
	free(list);
	free(rack);
	free(oi);
	return rc;
}

int placement_check(const struct placement_broker *brokers, int n, int32_t nparts, int rf, const int32_t *ids,
		    int32_t *bad)
{
	if (nparts < 1 || rf < 1)
		return -EINVAL;
	for (int32_t p = 0; p < nparts; p++) {
		const int32_t *r = &ids[(size_t)p * rf];

		for (int i = 0; i < rf; i++) {
			int known = 0;

			for (int k = 0; k < n; k++)
				known |= brokers[k].id == r[i];
			if (bad)
				*bad = r[i];
			if (!known)
				return -ENOENT;
			for (int j = 0; j < i; j++)
				if (r[j] == r[i])
					return -EINVAL;
		}
	}
	return 0;
}
