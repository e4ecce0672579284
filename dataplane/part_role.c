/* dataplane/part_role.c — a partition's leader and follower state on its
 * owner (see part_role.h): the followers' log ends, the high watermark of
 * the ISR, the ISR's changes asked of the control thread, the replica
 * fetches woken when the log end moves. @thread owner shard */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/kafka_errors.h"
#include "dataplane/part.h"
#include "dataplane/part_err.h"
#include "dataplane/part_role.h"
#include "dataplane/shard_core.h"
#include "storage/plog_epochs.h"

static int has_id(const int32_t *ids, int n, int32_t id)
{
	for (int i = 0; i < n; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

static struct part_follower *follower(struct part_role *r, int32_t id)
{
	for (int i = 0; i < r->nf; i++)
		if (r->f[i].id == id)
			return &r->f[i];
	return NULL;
}


int part_role_set(struct part *p, const struct part_role_msg *m)
{
	struct part_role *old = p->role, *r;
	int leading = m->leader == m->self, nf = 0;
	uint64_t now = p->sh->now_ns;

	if (p->deleted || !p->pl)
		return -ENOENT;
	if (m->nreplicas < 1 || m->nreplicas > PART_ROLE_MAX_REPLICAS || m->nisr < 0 ||
	    m->nisr > PART_ROLE_MAX_REPLICAS || !has_id(m->replicas, m->nreplicas, m->self))
		return -EINVAL;
	if (leading) {
		/* the metadata's epoch, unless the log already holds a later
		 * one (-ESTALE: nothing moves) */
		int rc = plog_set_leader_epoch(p->pl, m->leader_epoch);

		if (rc < 0 && rc != -ESTALE)
			return rc;
	} else if (!old || old->leading) {
		/* no longer the leader: what waits for the ISR may never be
		 * in it (the new leader may cut it), as Kafka answers */
		part_fail_acks(p, PART_ERR_NOT_LEADER, 1, now);
	}
	if (p->pub) {
		__atomic_store_n(&p->pub->isr_size, (int64_t)m->nisr, __ATOMIC_RELAXED);
		__atomic_store_n(&p->pub->replicas, (int64_t)m->nreplicas, __ATOMIC_RELAXED);
		__atomic_store_n(&p->pub->follower_lag, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&p->pub->follower_lag_ms, 0, __ATOMIC_RELAXED);
	}
	if (leading && m->nreplicas == 1) {
		/* alone: the one-node broker's way */
		part_role_free(p);
		part_hw_role_taken(p, 1);
		part_progress(p);
		return 0;
	}
	if (!old)
		part_hw_role_taken(p, 0);   /* from the checkpoint, not the log end */
	if (leading)
		nf = m->nreplicas - 1;
	r = calloc(1, sizeof(*r) + (size_t)nf * sizeof(r->f[0])); /* style: allow role change */
	if (!r)
		return -ENOMEM;
	r->leading = leading;
	r->self = m->self;
	r->leader = m->leader;
	r->leader_epoch = m->leader_epoch;
	memcpy(r->leader_host, m->leader_host, sizeof(r->leader_host));
	r->leader_host[sizeof(r->leader_host) - 1] = 0;
	r->leader_port = m->leader_port;
	r->leader_repl_ip = m->leader_repl_ip;
	r->leader_repl_port = m->leader_repl_port;
	r->isr_change = m->isr_change;
	r->isr_to = m->isr_to;
	r->throttled = !leading && m->throttled;
	r->leader_throttled = leading && m->leader_throttled;
	r->hw = p->pl->high_watermark;   /* what the previous role allowed */
	r->last_leo = p->pl->next_offset;
	r->last_hw = p->pl->high_watermark;
	r->nisr = m->nisr;
	for (int i = 0; leading && i < m->nreplicas; i++) {
		struct part_follower *f, *was;

		if (m->replicas[i] == m->self)
			continue;
		f = &r->f[r->nf++];
		was = old && old->leading && old->leader_epoch == m->leader_epoch ? follower(old, m->replicas[i]) : NULL;
		if (was) {
			*f = *was;   /* the same leadership: its progress stays */
		} else {
			f->id = m->replicas[i];
			f->leo = -1;
			f->hw_sent = -1;
			f->caught_up_ns = now;   /* Kafka's: a new leader gives each a full lag */
		}
		f->in_isr = (uint8_t)has_id(m->isr, m->nisr, f->id);
		f->reported = 0;
	}
	if (old) {
		r->fetch_watchers = old->fetch_watchers;
		free(old);
	} else {
		p->sh->repl_parts++;
	}
	r->fetch_epoch = -1;
	p->role = r;
	p->sh->roles_changed = 1;            /* the fetchers (dataplane/replica_fetcher.c) */
	part_progress(p);   /* (a failed log asks to leave the ISR again: part_hw.c) */
	return 0;
}





/* Whether follower f may join the ISR (Kafka's isFollowerInSync): it
 * reached the high watermark and has what this leadership began with
 * (the current epoch's start offset). */
static int may_join(const struct part *p, const struct part_follower *f)
{
	int32_t e;
	int64_t start;

	if (f->leo < 0 || f->leo < p->role->hw)
		return 0;
	plog_epoch_end_offset(p->pl, p->role->leader_epoch - 1, &e, &start);
	return e < 0 || start < 0 || f->leo >= start;
}

static void ask_isr(struct part *p, struct part_follower *f, int join, uint64_t now)
{
	struct part_role *r = p->role;
	struct shard_msg m = { .fn = r->isr_change, .v = { p->index, f->id, join, r->leader_epoch } };

	memcpy(&m.p[0], p->topic_id, sizeof(p->topic_id));   /* the partition by value */
	f->reported = 1;
	f->reported_ns = now;
	if (r->isr_change)
		shard_send(p->sh, r->isr_to, &m);   /* parks when the ring is full */
}

int part_role_replica_fetch(struct part *p, int32_t id, int64_t offset, uint64_t now_ns)
{
	struct part_role *r = p->role;
	struct part_follower *f;
	int64_t leo;

	if (!r || !r->leading || !p->pl || !(f = follower(r, id)))
		return -ENOENT;
	leo = p->pl->next_offset;
	if (offset > leo || offset < 0)
		return 0;                    /* out of range: the read says so; nothing learnt */
	/* Kafka's lastCaughtUpTime: it had everything the leader had now, or
	 * everything the leader had at its previous fetch */
	if (offset >= leo)
		f->caught_up_ns = now_ns;
	else if (f->fetch_ns && offset >= f->fetch_leader_leo)
		f->caught_up_ns = f->fetch_ns;
	f->fetch_leader_leo = leo;
	f->fetch_ns = now_ns;
	if (offset != f->leo) {
		f->leo = offset;
		if (f->in_isr)
			part_progress(p);    /* the high watermark may move: acks answered */
	}
	if (!f->in_isr && !f->reported && may_join(p, f))
		ask_isr(p, f, 1, now_ns);   /* caught up with the ISR: back in */
	return 0;
}

int part_fetch_epoch_check(const struct part *p, int32_t current_epoch, int32_t last_epoch, int64_t offset,
			   int16_t *err, int32_t *div_epoch, int64_t *div_end)
{
	const struct plog *pl = p->pl;
	int32_t epoch;
	int64_t end;
	int e;

	*err = 0;
	*div_epoch = -1;
	*div_end = -1;
	if (p->deleted || !pl)
		return 0;                   /* the read answers that */
	if ((e = part_epoch_check(current_epoch, pl->leader_epoch)) != 0) {
		*err = part_err_to_kafka(e);
		return 1;
	}
	if (last_epoch < 0)
		return 0;
	plog_epoch_end_offset(pl, last_epoch, &epoch, &end);
	if (end < 0 || epoch < 0 || offset < pl->log_start) {
		*err = KERR_OFFSET_OUT_OF_RANGE;
		return 1;
	}
	if (epoch < last_epoch || end < offset) {
		*div_epoch = epoch;
		*div_end = end;
		return 1;
	}
	return 0;
}

int part_role_fetch_ready(const struct part *p, int32_t id, int64_t offset)
{
	const struct part_role *r = p->role;

	if (!p->pl || p->pl->next_offset > offset)
		return 1;
	if (!r || !r->leading)
		return 0;
	for (int i = 0; i < r->nf; i++)
		if (r->f[i].id == id)
			return p->pl->high_watermark > r->f[i].hw_sent;
	return 0;
}

void part_role_note_sent(struct part *p, int32_t id, int64_t hw)
{
	struct part_follower *f = p->role && p->role->leading ? follower(p->role, id) : NULL;

	if (f)
		f->hw_sent = hw;
}

/* A join asked and not answered (refused: the broker is fenced, as one
 * starting is until its heartbeat is applied; or lost) is asked again after
 * this, as Kafka's leader tries the expansion again on a later fetch; a
 * removal after the lag time. */
#define PART_ROLE_JOIN_RETRY_NS 1000000000ull

void part_role_tick(struct part *p, uint64_t now_ns, uint64_t lag_ns)
{
	struct part_role *r = p->role;
	uint64_t join_again = lag_ns < PART_ROLE_JOIN_RETRY_NS ? lag_ns : PART_ROLE_JOIN_RETRY_NS;

	if (r && p->pl && p->pl->nospace)
		plog_space_retry(p->pl);    /* the filesystem was full: may it take the writes now */
	if (!r || !r->leading || !p->pl)
		return;
	for (int i = 0; i < r->nf; i++) {
		struct part_follower *f = &r->f[i];

		if (f->reported && now_ns - f->reported_ns < (f->in_isr ? lag_ns : join_again))
			continue;            /* asked; the answer comes as a role */
		if (f->in_isr && now_ns - f->caught_up_ns > lag_ns)
			ask_isr(p, f, 0, now_ns);   /* replica.lag.time.max.ms without catching up */
		else if (!f->in_isr && f->fetch_ns && now_ns - f->fetch_ns <= lag_ns && may_join(p, f))
			ask_isr(p, f, 1, now_ns);   /* asked again: the first was refused or lost */
		/* (only one that still fetches, as Kafka expands on a fetch: one cut
		 * off keeps the log end it had, which the high watermark it holds
		 * back does not pass, and it would be asked in and out for ever) */
		else
			f->reported = 0;
	}
	part_role_publish_lag_ms(p, now_ns);   /* it grows while nothing moves */
	part_fail_acks(p, PART_ERR_TIMED_OUT, 0, now_ns);
}
