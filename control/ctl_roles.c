/* control/ctl_roles.c — what this node is for each partition it hosts,
 * told to the owner shards (part_proxy_set_role, dataplane/part_role.h):
 * leader with its replicas and ISR, or follower of a leader at its client
 * listener, at the image's leader epoch. Sent when a partition opens (none
 * for a partition alone: the one-node broker's way) and when an applied
 * PARTITION, PARTITION_CHANGE, BROKER_RESTARTED or LEADER_RESTARTED record
 * moved a hosted partition's leader, epoch or ISR. And the leader's side of Kafka's
 * AlterPartition: a leader shard asks to take a follower out of the ISR
 * or back in; the change is proposed as a PARTITION_CHANGE, and the
 * leader uses the new ISR once it comes back as a role. And, once a role
 * went out, the group and transaction coordinators told which of their
 * internal partitions this node leads now (ctl_coord_refresh: they load
 * or drop them).
 *
 * Thread: the control thread (@thread ctl). The role messages it sends are
 * malloc()ed here, listed on ctl->roles_out, and freed when the owner
 * answers; those no shard answered (the shards stopped first) are freed by
 * ctl_roles_fini.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/group.h"
#include "control/txn.h"
#include "control/meta_brokers.h"
#include "control/meta_parts.h"
#include "control/metalog.h"
#include "control/reassign.h"
#include "dataplane/part_proxy.h"
#include "dataplane/part_role.h"
#include "storage/slog.h"

/* The leader's registered host as a numeric IPv4 or IPv6 address (a
 * numeric one as it is; a name resolved, its first address): the shard's
 * fetcher does no name lookups (they block), so the control thread does
 * it here, once per role sent; a name that does not resolve is passed on
 * (the fetcher retries and says nothing connects). */
static void leader_address(const char *host, char *out, size_t cap)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
	struct in6_addr a;

	snprintf(out, cap, "%s", host);
	if (!host[0] || inet_pton(AF_INET, host, &a) == 1 || inet_pton(AF_INET6, host, &a) == 1)
		return;
	if (getaddrinfo(host, NULL, &hints, &res) == 0 && res) {
		if (res->ai_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)res->ai_addr)->sin6_addr, out, (socklen_t)cap);
		else
			inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, (socklen_t)cap);
		freeaddrinfo(res);
	}
}

/* A role message on its way: what the owner reads, listed until it answers. */
struct ctl_role_out {
	struct ctl_role_out *prev, *next;
	struct part_role_msg m;
};

static void role_answered(void *self, void *cookie, int err)
{
	struct ctl *ctl = self;
	struct ctl_role_out *o = cookie;

	if (err < 0 && err != -ENOENT)
		slog(SLOG_WARN, "a partition could not take its replication role: %s", strerror(-err));
	if (o->prev)
		o->prev->next = o->next;
	else
		ctl->roles_out = o->next;
	if (o->next)
		o->next->prev = o->prev;
	free(o);
}

void ctl_roles_fini(struct ctl *ctl)
{
	while (ctl->roles_out) {
		struct ctl_role_out *o = ctl->roles_out;

		ctl->roles_out = o->next;
		free(o);
	}
}

static void isr_changed(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	(void)ctl;
	(void)cookie;
	(void)a;
	/* refused (a newer change won the race) or lost: the leader asks
	 * again after replica.lag.time.max.ms if it still should */
	(void)err;
}

/* From a leader shard: m->p[0..1] the partition's topic id; v[0] its index,
 * v[1] the broker, v[2] 1 to add it to the ISR, 0 to remove it, v[3] the
 * leader epoch the leader asked at. */
static void isr_change(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	int32_t idx = (int32_t)m->v[0], id = (int32_t)m->v[1], self_id = ctl->b->set.node_id;
	const struct md_topic *t = NULL;
	const struct meta_topic *mt;
	const struct meta_part *p;
	int32_t isr[META_MAX_REPLICAS];
	int n = 0;
	struct metalog_rec rec = { 0 };

	if (m->v[2] == 2) {
		ctl_offline_leave(ctl, m);   /* this node's log failed */
		return;
	}
	{
		uint8_t tid[16];

		memcpy(tid, (const void *)&m->p[0], sizeof(tid));   /* the topic by value */
		t = ctl_topic_served_id(ctl, tid);
	}
	if (!t || idx < 0 || idx >= t->nparts || !(mt = metalog_topic(ctl->ml, t->name)) || idx >= mt->partitions)
		return;                      /* gone meanwhile */
	p = &mt->parts[idx];
	if (p->leader != self_id || p->leader_epoch != (int32_t)m->v[3])
		return;                      /* no longer this leadership's to change */
	for (int i = 0; i < p->nisr; i++)
		if (m->v[2] || p->isr[i] != id)
			isr[n++] = p->isr[i];
	if (m->v[2]) {
		const struct meta_broker *b = metalog_broker(ctl->ml, id);

		if (!meta_part_has(p->replicas, p->nreplicas, id) || meta_part_has(p->isr, p->nisr, id))
			return;
		/* Kafka's INELIGIBLE_REPLICA (KIP-841): a fenced broker (one in
		 * its controlled shutdown still fetches) does not join; the
		 * leader asks again, after the lag time, once it is unfenced */
		if (!b || b->fenced)
			return;
		isr[n++] = id;
	} else if (id == self_id || n == p->nisr) {
		return;                      /* the leader stays in its ISR */
	}
	if (metalog_build_partition_change(ctl->ml, t->name, idx, -2, isr, n, NULL, 0, &rec) < 0 || !rec.len) {
		metalog_rec_free(&rec);
		return;
	}
	ctl_meta_propose(ctl, &rec, isr_changed, NULL);
}

/* The topic's throttled-replica list `key` names partition idx on broker
 * id (reassign_throttle_names). */
static int throttle_list_names(const struct meta_topic *mt, const char *key, int32_t idx, int32_t id)
{
	for (int i = 0; i < mt->nconfigs; i++)
		if (!strcmp(mt->config_keys[i], key) && mt->config_values[i])
			return reassign_throttle_names(mt->config_values[i], idx, id);
	return 0;
}

/* Tell mp's owner the image's role for it unless told already (the
 * book's entry says what was told, ctl_homes.h). role_set: 0 not looked
 * at yet, 1 sent (the fields say what), 2 alone and nothing sent (the
 * one-node way: no message). */
static void role_send(struct ctl *ctl, const struct meta_topic *mt, const uint8_t id[16], int32_t idx)
{
	const struct meta_part *p;
	struct ctl_home *h = ctl_home_find(ctl->homes, id, idx);
	struct ctl_role_out *o;
	struct part_role_msg *r;
	struct part_proxy px;
	int32_t self = ctl->b->set.node_id;
	int alone, thr;

	if (!mt || idx >= mt->partitions || !h || h->opened != 1)
		return;
	p = &mt->parts[idx];
	if (!meta_part_has(p->replicas, p->nreplicas, self))
		return;                      /* no longer a replica here: retired (ctl_reassign.c) */
	alone = p->leader == self && p->nreplicas == 1;
	if (alone && h->role_set != 1) {
		h->role_set = 2;            /* alone, as it opened: nothing to tell */
		return;
	}
	/* throttled: bit 0 this follower's fetches (an adding replica, or
	 * the topic's follower list names it), bit 1 this leader's answers
	 * to followers outside the ISR (replicas being added, or the
	 * topic's leader list names it) */
	thr = p->leader != self && (meta_part_has(p->moving, p->nadding, self) ||
				    throttle_list_names(mt, "follower.replication.throttled.replicas", idx, self));
	if (p->leader == self && (p->nadding > 0 ||
				  throttle_list_names(mt, "leader.replication.throttled.replicas", idx, self)))
		thr |= 2;
	if (h->role_set == 1 && h->role_leader == p->leader && h->role_epoch == p->leader_epoch &&
	    h->role_pepoch == p->partition_epoch && h->role_thr == thr)
		return;                      /* told already */
	h->role_set = 1;
	h->role_leader = p->leader;
	h->role_epoch = p->leader_epoch;
	h->role_pepoch = p->partition_epoch;
	h->role_thr = thr;
	o = xcalloc(1, sizeof(*o));
	o->next = ctl->roles_out;
	if (o->next)
		o->next->prev = o;
	ctl->roles_out = o;
	r = &o->m;
	r->self = self;
	r->leader = p->leader;
	/* the image's, or the later one the owner was told (its log's) */
	r->leader_epoch = h->told && h->told_epoch > p->leader_epoch ? h->told_epoch : p->leader_epoch;
	r->nreplicas = p->nreplicas < PART_ROLE_MAX_REPLICAS ? p->nreplicas : PART_ROLE_MAX_REPLICAS;
	r->nisr = p->nisr < PART_ROLE_MAX_REPLICAS ? p->nisr : PART_ROLE_MAX_REPLICAS;
	memcpy(r->replicas, p->replicas, (size_t)r->nreplicas * sizeof(r->replicas[0]));
	memcpy(r->isr, p->isr, (size_t)r->nisr * sizeof(r->isr[0]));
	if (p->leader >= 0 && p->leader != self) {
		const struct meta_broker *b = metalog_broker(ctl->ml, p->leader);

		if (b) {
			leader_address(b->host, r->leader_host, sizeof(r->leader_host));
			r->leader_port = b->port;
			r->leader_repl_ip = b->repl_ip;
			r->leader_repl_port = b->repl_port;
		}
	}
	r->throttled = thr & 1;
	r->leader_throttled = (thr & 2) != 0;
	r->isr_change = isr_change;
	r->isr_to = broker_ctl_index(ctl->b);
	part_proxy_set_role(ctl_part_proxy(ctl, &px), h->shard, part_addr_of(id, idx), r, role_answered, o);
}

void ctl_role_opened(struct ctl *ctl, const char *name, const uint8_t id[16], int32_t idx, int alone)
{
	const struct meta_topic *mt;

	if (alone) {
		/* alone (the entry it opened with says so; no lookup: one node
		 * opens every partition this way) */
		struct ctl_home *h = ctl_home_find(ctl->homes, id, idx);

		if (h)
			h->role_set = 2;
		return;
	}
	mt = metalog_topic(ctl->ml, name);
	if (!mt || idx >= mt->partitions) {
		/* added partitions whose records come after their opens
		 * (CreatePartitions): once published */
		ctl->roles_pending = 1;
		return;
	}
	role_send(ctl, mt, id, idx);
}

void ctl_roles_refresh(struct ctl *ctl)
{
	int n = metalog_topic_count(ctl->ml);

	for (int i = 0; i < n; i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);
		const struct md_topic *t = ctl_topic_served(ctl, mt->name, (int32_t)strlen(mt->name));

		if (t && memcmp(t->id, mt->id, 16))
			continue;   /* the served one is a topic of that name deleted since */
		for (int32_t j = 0; t && j < t->nparts && j < mt->partitions; j++)
			if (ctl_part_open_on(ctl, t->id, j) >= 0)
				role_send(ctl, mt, t->id, j);
	}
}

void ctl_coord_refresh(struct ctl *ctl)
{
	static const char *const names[2] = { GROUP_OFFSETS_TOPIC, TXN_STATE_TOPIC };
	int32_t self = ctl->b->set.node_id;

	if (!ctl->coord_started)
		return;
	for (int k = 0; k < 2; k++) {
		const struct meta_topic *mt = metalog_topic(ctl->ml, names[k]);
		const struct md_topic *t = ctl_topic_served(ctl, names[k], (int32_t)strlen(names[k]));

		for (int32_t i = 0; mt && t && i < t->nparts && i < mt->partitions; i++) {
			int leads = mt->parts[i].leader == self && ctl_part_open_on(ctl, t->id, i) >= 0;

			if (k == 0)
				group_lead(ctl->gc, i, leads);
			else
				txn_lead(ctl->tc, i, leads);
		}
	}
}
