/* control/ctl_elect.c — leader elections (Kafka's KRaft controller,
 * without KIP-966): the active controller keeps every partition led by a
 * live broker (registered, unfenced, not shutting down), by the rules of
 * control/election.h, through PARTITION_CHANGE records; and every node's
 * published snapshot follows the partition records applied.
 *
 * - When a broker is fenced, unfenced or unregistered (its record
 *   applied), and when this node becomes the active controller (the
 *   previous one may have left a fencing half-followed), the controller
 *   looks at every partition: a broker that is not live leaves the ISR
 *   (unless it is the last member), a partition whose leader is not live
 *   takes the first live ISR member in replicas order, or with
 *   unclean.leader.election.enable the first live replica; else it is
 *   offline (leader -1) until a member of its ISR comes back. One record
 *   per partition changed; the next look waits until they are applied, so
 *   every record is built against an image that has the previous ones.
 * - This node, the active controller, counts as live unless it is
 *   shutting down: it is fenced only for the moment its own registration
 *   takes at start (LEADER_RESTARTED then gives its partitions their new
 *   epoch: control/ctl_brokers.c).
 * - Every node: a PARTITION_CHANGE or LEADER_RESTARTED applied makes the
 *   published snapshot follow the image (each topic whose leaders, epochs
 *   or ISR differ is rebuilt and replaced; it waits while a topic
 *   operation is in flight, as that operation holds the topics it
 *   replaces), and a partition this node now leads takes its new leader
 *   epoch on its shard (part_proxy_set_leader_epoch).
 *
 * @thread ctl
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/config.h"
#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/election.h"
#include "control/meta_brokers.h"
#include "control/meta_parts.h"
#include "control/metalog.h"
#include "control/quorum.h"
#include "dataplane/part_proxy.h"

struct ctl_elect {
	int scan_wanted;             /* brokers changed, or this node leads now */
	int inflight;                /* PARTITION_CHANGE records proposed, not applied */
	int dirty;                   /* partition records applied: the snapshot follows */
	int32_t *shutting;           /* brokers shutting down (not live) */
	int nshutting, cap_shutting;
	uint64_t elections, unclean;
};

static struct ctl_elect *ce_of(struct ctl *ctl)
{
	if (!ctl->elect && !(ctl->elect = calloc(1, sizeof(*ctl->elect))))
		abort();   /* the control thread's own bookkeeping */
	return ctl->elect;
}

void ctl_elect_fini(struct ctl *ctl)
{
	if (!ctl->elect)
		return;
	free(ctl->elect->shutting);
	free(ctl->elect);
	ctl->elect = NULL;
}

int ctl_elect_shutting_down(const struct ctl *ctl, int32_t id)
{
	const struct ctl_elect *ce = ctl->elect;

	return ce && election_has(ce->shutting, ce->nshutting, id);
}

/* The live brokers (*out malloc()ed, the count returned). */
static int live_brokers(struct ctl *ctl, int32_t **out)
{
	int n = metalog_broker_count(ctl->ml), k = 0;
	int32_t self = ctl->b->set.node_id, *ids = malloc(((size_t)n + 1) * sizeof(*ids));

	if (!ids)
		abort();   /* the control thread's own bookkeeping */
	for (int i = 0; i < n; i++) {
		const struct meta_broker *mb = metalog_broker_at(ctl->ml, i);

		if ((mb->fenced && mb->id != self) || ctl_elect_shutting_down(ctl, mb->id))
			continue;
		ids[k++] = mb->id;
	}
	if (!metalog_broker(ctl->ml, self) && !ctl_elect_shutting_down(ctl, self))
		ids[k++] = self;   /* not registered yet: at start, before its record */
	*out = ids;
	return k;
}

int ctl_elect_unclean_enabled(const struct ctl *ctl, const struct meta_topic *mt)
{
	for (int i = 0; i < mt->nconfigs; i++)
		if (!strcmp(mt->config_keys[i], "unclean.leader.election.enable") && mt->config_values[i])
			return !strcasecmp(mt->config_values[i], "true");
	return config_int(ctl->eff, "unclean.leader.election.enable") != 0;
}

static void elect_in(struct ctl *ctl, const struct meta_topic *mt, int32_t idx, const int32_t *live, int nlive,
		  struct election_in *in)
{
	const struct meta_part *p = &mt->parts[idx];

	in->replicas = p->replicas;
	in->nreplicas = p->nreplicas;
	in->isr = p->isr;
	in->nisr = p->nisr;
	in->leader = p->leader;
	in->live = live;
	in->nlive = nlive;
	in->unclean = ctl_elect_unclean_enabled(ctl, mt);
}

/* cookie: bit 0 the leader changes, bit 1 an unclean election */
static void change_done(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct ctl_elect *ce = ce_of(ctl);
	intptr_t how = (intptr_t)cookie;

	(void)a;
	ce->inflight--;
	if (err < 0) {
		/* the image moved on (a topic deleted, a newer change): look again */
		ce->scan_wanted = 1;
		return;
	}
	if (how & 1)
		ce->elections++;
	if (how & 2)
		ce->unclean++;
}

static int elect_propose(struct ctl *ctl, const struct meta_topic *mt, int32_t idx, const struct election_out *out,
		      ctl_meta_done_fn done, void *cookie)
{
	struct metalog_rec r;
	int rc = metalog_build_partition_change(ctl->ml, mt->name, idx, out->leader_changed ? out->leader : -2,
						out->isr_changed ? out->isr : NULL, out->nisr, NULL, 0, &r);

	if (rc < 0 || !r.len) {
		metalog_rec_free(&r);
		return rc < 0 ? rc : -EALREADY;
	}
	if (out->leader_changed)
		fprintf(stderr, "sluiced: partition %s-%d: leader %d -> %d%s\n", mt->name, idx,
			mt->parts[idx].leader, out->leader,
			out->unclean ? " (unclean: out of sync)" : out->leader < 0 ? " (offline: no live replica in sync)"
			: "");
	ctl_meta_propose(ctl, &r, done, cookie);
	return 0;
}

/* The active controller's look at every partition. */
static void elect_scan(struct ctl *ctl)
{
	struct ctl_elect *ce = ce_of(ctl);
	int32_t *live;
	int nlive = live_brokers(ctl, &live);

	for (int i = 0; i < metalog_topic_count(ctl->ml); i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);

		for (int32_t j = 0; j < mt->partitions; j++) {
			struct election_in in;
			struct election_out out;

			elect_in(ctl, mt, j, live, nlive, &in);
			if (!election_on_brokers(&in, &out))
				continue;
			if (elect_propose(ctl, mt, j, &out, change_done,
					      (void *)(intptr_t)((out.leader_changed && out.leader >= 0) |
								 (out.unclean ? 2 : 0))) == 0)
				ce->inflight++;
		}
	}
	free(live);
}

int ctl_elect_active(const struct ctl *ctl)
{
	return ctl_quorum_leads(ctl);
}

/* Whether the published topic t says what the image's mt says. */
static int topic_current(const struct md_topic *t, const struct meta_topic *mt)
{
	if (t->nparts != mt->partitions)
		return 1;   /* partitions being added: their operation publishes */
	for (int32_t i = 0; i < t->nparts; i++) {
		const struct md_partition *mp = &t->parts[i];
		const struct meta_part *p = &mt->parts[i];

		if (mp->leader != p->leader || mp->leader_epoch < p->leader_epoch || mp->nisr != p->nisr ||
		    memcmp(mp->isr, p->isr, (size_t)p->nisr * sizeof(*p->isr)))
			return 0;
	}
	return 1;
}

static void epoch_set(void *self, void *cookie, int err)
{
	(void)self;
	(void)cookie;
	(void)err;   /* -ESTALE: the log was there already; -ENOENT: deleted since */
}

/* The snapshot follows the image: every topic that differs, rebuilt. */
static void elect_republish(struct ctl *ctl)
{
	const struct md_snapshot *md = ctl->b->md;
	struct md_topic **add, **rep;
	int n = 0;

	if (!md || !md->ntopics)
		return;
	add = xcalloc((size_t)md->ntopics, sizeof(*add));
	rep = xcalloc((size_t)md->ntopics, sizeof(*rep));
	for (int i = 0; i < md->ntopics; i++) {
		struct md_topic *t = md->topics[i];
		const struct meta_topic *mt = metalog_topic(ctl->ml, t->name);
		struct md_topic *nt;

		if (!mt || topic_current(t, mt))
			continue;
		nt = ctl_topic_build(ctl, mt);
		ctl_topic_keep(nt, t);
		for (int32_t j = 0; j < nt->nparts; j++) {
			struct md_partition *np = &nt->parts[j];
			const struct md_partition *op = &t->parts[j];
			struct part_proxy px;

			if (np->leader == op->leader && np->leader_epoch < op->leader_epoch)
				np->leader_epoch = op->leader_epoch;   /* the log's, when it was higher */
			if (np->part && np->leader == ctl->b->set.node_id && np->leader_epoch > op->leader_epoch)
				part_proxy_set_leader_epoch(ctl_part_proxy(ctl, &px), np->shard, np->part,
							    np->leader_epoch, epoch_set, NULL);
		}
		add[n] = nt;
		rep[n++] = t;
	}
	if (n)
		ctl_publish_replaced(ctl, add, rep, n);
	free(add);
	free(rep);
}

void ctl_elect_tick(struct ctl *ctl)
{
	struct ctl_elect *ce = ce_of(ctl);

	if (ctl->elect_due & CTL_ELECT_PUBLISH)
		ce->dirty = 1;
	if (ctl->elect_due & CTL_ELECT_SCAN)
		ce->scan_wanted = 1;
	ctl->elect_due = 0;

	if (ce->dirty && !ctl->ops_open) {
		ce->dirty = 0;
		elect_republish(ctl);
	}
	if (ce->scan_wanted && !ce->inflight && ctl->brokers && ctl_elect_active(ctl)) {
		ce->scan_wanted = 0;
		elect_scan(ctl);
	}
}

void ctl_elect_state(const struct ctl *ctl, struct ctl_elect_state *st)
{
	memset(st, 0, sizeof(*st));
	if (ctl->elect) {
		st->elections_total = ctl->elect->elections;
		st->unclean_total = ctl->elect->unclean;
	}
	for (int i = 0; ctl->ml && i < metalog_topic_count(ctl->ml); i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);

		for (int32_t j = 0; j < mt->partitions; j++)
			st->offline += mt->parts[j].leader < 0;
	}
}
