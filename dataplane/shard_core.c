/* dataplane/shard_core.c — what everything on a shard builds on (see
 * dataplane/shard_core.h): messages to other threads, parked in order
 * when a ring is full, and the parking of work that waits on the shard. */
#include <stdlib.h>
#include <string.h>

#include "dataplane/shard_core.h"

/* ---- messages --------------------------------------------------------- */

void shard_send(struct shard *sh, int to, const struct shard_msg *m)
{
	if (to == sh->id) {
		struct shard_msg copy = *m;

		copy.fn(sh, &copy);
		return;
	}
	if (sh->backlog_len == 0 && broker_send(sh->b, sh->id, to, m) == 0)
		return;
	/* ring full: park in order and retry next loop turn (never spin) */
	shard_stat_add(&sh->stats.ring_full, 1);
	if (sh->backlog_len == sh->backlog_cap) {
		int ncap = sh->backlog_cap ? sh->backlog_cap * 2 : 64;
		struct shard_msg *nb = realloc(sh->backlog, (size_t)ncap * sizeof(*nb)); /* style: allow rare overflow */
		int *nt = realloc(sh->backlog_to, (size_t)ncap * sizeof(*nt)); /* style: allow rare overflow */

		if (!nb || !nt)
			abort();
		sh->backlog = nb;
		sh->backlog_to = nt;
		sh->backlog_cap = ncap;
	}
	sh->backlog[sh->backlog_len] = *m;
	sh->backlog_to[sh->backlog_len++] = to;
}

void shard_flush_backlog(struct shard *sh)
{
	int i = 0;

	while (i < sh->backlog_len && broker_send(sh->b, sh->id, sh->backlog_to[i], &sh->backlog[i]) == 0)
		i++;
	if (i) {
		memmove(sh->backlog, sh->backlog + i, (size_t)(sh->backlog_len - i) * sizeof(*sh->backlog));
		memmove(sh->backlog_to, sh->backlog_to + i, (size_t)(sh->backlog_len - i) * sizeof(int));
		sh->backlog_len -= i;
	}
}

/* ---- parking ---------------------------------------------------------- */

void shard_park(struct shard *sh, struct shard_park *pk, uint64_t deadline_ns)
{
	pk->deadline_ns = deadline_ns;
	pk->parked = 1;
	pk->prev = NULL;
	pk->next = sh->parked;
	if (sh->parked)
		sh->parked->prev = pk;
	sh->parked = pk;
	sh->park_changes++;
}

void shard_unpark(struct shard *sh, struct shard_park *pk)
{
	if (!pk->parked)
		return;
	if (pk->prev)
		pk->prev->next = pk->next;
	else
		sh->parked = pk->next;
	if (pk->next)
		pk->next->prev = pk->prev;
	pk->parked = 0;
	sh->park_changes++;
}

/* A wake may change the list under the walk: answer a request whose
 * connection then closes (its other parked requests unparked, their memory
 * freed), park again, or wake the shard's parked work itself (a message to
 * its own shard runs at once: shard_send). So the next entry is trusted
 * only when the list did not change during the wake; otherwise the walk
 * starts again from the head, skipping what this pass already woke (an
 * entry parked again by its wake waits for the next pass; its deadline
 * counts in the nearest one returned). */
uint64_t shard_run_parked(struct shard *sh, int all)
{
	uint32_t gen = ++sh->park_gen;
	struct shard_park *pk, *next;
	uint64_t nearest;

again:
	nearest = 0;
	for (pk = sh->parked; pk; pk = next) {
		next = pk->next;
		if (pk->run_gen != gen && (all || pk->deadline_ns <= sh->now_ns)) {
			uint32_t changes;

			shard_unpark(sh, pk);
			pk->run_gen = gen;
			changes = sh->park_changes;
			pk->wake(pk, 0);
			if (sh->park_changes != changes)
				goto again;
			continue;
		}
		/* still parked, or parked again by its wake in this pass */
		if (!nearest || pk->deadline_ns < nearest)
			nearest = pk->deadline_ns;
	}
	return nearest;
}

void shard_stop_parked(struct shard *sh)
{
	uint32_t gen = ++sh->park_gen;
	struct shard_park *pk;

	/* from the head each time: a wake may unpark (and free) others */
again:
	for (pk = sh->parked; pk; pk = pk->next)
		if (pk->run_gen != gen) {
			shard_unpark(sh, pk);
			pk->run_gen = gen;
			pk->wake(pk, 1);
			goto again;
		}
}

void shard_wake_parked(struct shard *sh)
{
	shard_run_parked(sh, 1);
}

void shard_wake_parked_msg(void *self, struct shard_msg *m)
{
	(void)m;
	shard_wake_parked(self);
}
