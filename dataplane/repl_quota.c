/* dataplane/repl_quota.c — the leader's replication throttle (see
 * repl_quota.h). @thread owner shard */
#include "dataplane/repl_quota.h"
#include "dataplane/part.h"
#include "dataplane/part_role.h"
#include "dataplane/repl_throttle.h"
#include "dataplane/shard_core.h"

/* p throttled on this leader for follower `replica`: the role says the
 * partition is, and that follower is outside the ISR. */
static int throttled_for(const struct part *p, int32_t replica)
{
	const struct part_role *r = p->role;

	if (!r || !r->leading || !r->leader_throttled)
		return 0;
	for (int i = 0; i < r->nf; i++)
		if (r->f[i].id == replica)
			return !r->f[i].in_isr;
	return 0;
}

/* The owner's budget now: the node's leader rate, each shard its share. */
static int64_t avail(struct shard *sh)
{
	int64_t rate = __atomic_load_n(&sh->b->repl_leader_throttle_bps, __ATOMIC_RELAXED);

	if (rate > 0 && rate != REPL_THROTTLE_NONE)
		rate = rate / sh->b->set.nshards > 0 ? rate / sh->b->set.nshards : 1;
	return repl_throttle_avail(&sh->repl_quota, rate, sh->now_ns);
}

int repl_quota_take(struct part *p, int32_t replica, uint32_t *max_bytes)
{
	int64_t left;

	if (!throttled_for(p, replica))
		return 0;
	left = avail(p->sh);
	if (left == INT64_MAX)
		return 0;                    /* no throttle */
	if (left <= 0)
		return 1;
	if (left < (int64_t)*max_bytes || !*max_bytes)
		*max_bytes = (uint32_t)left;
	return 0;
}

void repl_quota_spend(struct part *p, int32_t replica, int64_t bytes)
{
	if (bytes > 0 && throttled_for(p, replica))
		repl_throttle_spend(&p->sh->repl_quota, bytes);
}

int repl_quota_open(struct part *p)
{
	return avail(p->sh) > 0;
}
