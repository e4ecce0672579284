/* control/sluicectl_rules.c — the rules of `sluicectl cluster check`: a
 * description of the cluster in, findings out (severity, where, what can
 * be lost, the setting to change). Nothing here talks to a broker or
 * prints. See sluicectl_rules.h; the rules and their settings are listed in
 * docs/operating.md ("cluster check"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/sluicectl_rules.h"

const char *cc_severity_name(enum cc_severity s)
{
	return s == CC_DATA_LOSS ? "data-loss" : s == CC_AVAILABILITY ? "availability" : "warning";
}

int cc_exit_status(const struct cc_report *r)
{
	for (int i = 0; i < r->n; i++)
		if (r->f[i].severity >= CC_AVAILABILITY)
			return 1;
	return 0;
}

void cc_report_fini(struct cc_report *r)
{
	for (int i = 0; i < r->n; i++)
		free(r->f[i].parts);
	free(r->f);
	memset(r, 0, sizeof *r);
}

/* A new finding (zeroed but for these), or NULL when out of memory. */
static struct cc_finding *add(struct cc_report *r, enum cc_severity s, const char *code, const char *topic,
			      int32_t broker)
{
	struct cc_finding *f;

	if (r->n == r->cap) {
		int cap = r->cap ? 2 * r->cap : 16;
		struct cc_finding *nf = realloc(r->f, (size_t)cap * sizeof *nf);

		if (!nf)
			return NULL;
		r->f = nf;
		r->cap = cap;
	}
	f = &r->f[r->n++];
	memset(f, 0, sizeof *f);
	f->severity = s;
	f->code = code;
	snprintf(f->topic, sizeof f->topic, "%s", topic ? topic : "");
	f->broker = broker;
	return f;
}

static const struct cc_broker *broker_of(const struct cc_cluster *cl, int32_t id)
{
	for (int32_t i = 0; i < cl->nbrokers; i++)
		if (cl->brokers[i].id == id)
			return &cl->brokers[i];
	return NULL;
}

/* The rack all replicas of p share, or NULL when they span racks or one of
 * them has no rack (or is not a known broker). */
static const char *one_rack(const struct cc_cluster *cl, const struct cc_partition *p)
{
	const char *rack = NULL;

	for (int32_t i = 0; i < p->nreplicas; i++) {
		const struct cc_broker *b = broker_of(cl, p->replicas[i]);

		if (!b || !b->rack)
			return NULL;
		if (rack && strcmp(rack, b->rack))
			return NULL;
		rack = b->rack;
	}
	return rack;
}

/* A list of partition ids of one topic, grown as they are found. */
struct plist {
	int32_t *v;
	int32_t n;
};

static int plist_add(struct plist *l, int32_t id, int32_t cap)
{
	if (!l->v && !(l->v = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *l->v)))
		return -ENOMEM;
	l->v[l->n++] = id;
	return 0;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Hand l to f (every partition of the topic: no list). */
static void give_parts(struct cc_finding *f, struct plist *l, int32_t nparts)
{
	if (l->n == nparts) {
		free(l->v);
	} else {
		qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_i32);
		f->parts = l->v;
		f->nparts = l->n;
	}
	l->v = NULL;
	l->n = 0;
}

static const char *internal_key(const char *name)
{
	if (!strcmp(name, "__consumer_offsets"))
		return "offsets.topic.replication.factor";
	if (!strcmp(name, "__transaction_state"))
		return "transaction.state.log.replication.factor";
	return "default.replication.factor";
}

static const char *internal_risk(const char *name)
{
	if (!strcmp(name, "__consumer_offsets"))
		return "the committed offsets of every consumer group: losing the broker that holds a "
		       "partition loses them, and its groups restart from auto.offset.reset (reprocessing "
		       "or skipping records)";
	if (!strcmp(name, "__transaction_state"))
		return "the state of every transaction: losing the broker that holds a partition "
		       "loses its transactions, and exactly-once producers stop until it returns";
	return "this internal topic's records";
}

/* The rules on one topic's settings and replica sets. */
static int check_topic(const struct cc_cluster *cl, const struct cc_topic *t, struct cc_report *r)
{
	struct plist low_rf = { 0 }, under = { 0 }, under_min = { 0 }, offline = { 0 }, racked = { 0 };
	int32_t rf = INT32_MAX, min_isr_seen = INT32_MAX;
	bool single_copy = false, racks = false;
	const char *rack_name = NULL;
	struct cc_finding *f;
	int rc = -ENOMEM;

	/* racks in use: two or more among the brokers */
	for (int32_t i = 0; i < cl->nbrokers; i++)
		for (int32_t k = 0; k < i && cl->brokers[i].rack; k++)
			racks |= cl->brokers[k].rack && strcmp(cl->brokers[i].rack, cl->brokers[k].rack);
	for (int32_t j = 0; j < t->nparts; j++) {
		const struct cc_partition *p = &t->parts[j];
		const char *rk;

		rf = p->nreplicas < rf ? p->nreplicas : rf;
		if (p->nreplicas < 3 && plist_add(&low_rf, p->id, t->nparts))
			goto out;
		if (cc_under_replicated(p)) {
			single_copy |= p->nisr <= 1;
			if (plist_add(&under, p->id, t->nparts))
				goto out;
		}
		if (cc_under_min_isr(p, t->min_isr)) {
			min_isr_seen = p->nisr < min_isr_seen ? p->nisr : min_isr_seen;
			if (plist_add(&under_min, p->id, t->nparts))
				goto out;
		}
		if (p->leader < 0 && plist_add(&offline, p->id, t->nparts))
			goto out;
		if (racks && p->nreplicas >= 2 && (rk = one_rack(cl, p))) {
			rack_name = rack_name ? rack_name : rk;
			if (plist_add(&racked, p->id, t->nparts))
				goto out;
		}
	}
	if (!t->nparts)
		rf = 0;

	if (low_rf.n && t->internal) {
		int32_t could = cl->nbrokers < 3 ? cl->nbrokers : 3;

		if (!(f = add(r, CC_DATA_LOSS, "internal-topic-replication", t->name, -1)))
			goto out;
		give_parts(f, &low_rf, t->nparts);
		snprintf(f->what, sizeof f->what, "internal topic with replication factor %d, below 3", rf);
		snprintf(f->risk, sizeof f->risk, "%s", internal_risk(t->name));
		snprintf(f->setting, sizeof f->setting, "%s", internal_key(t->name));
		snprintf(f->value, sizeof f->value, "3");
		if (rf < could)
			snprintf(f->fix, sizeof f->fix, "the cluster has %d brokers: reassign its partitions onto %d "
				 "of them now (it was created when there were fewer); %s=3 makes a new cluster "
				 "refuse to create it on fewer", cl->nbrokers, could, f->setting);
		else
			snprintf(f->fix, sizeof f->fix, "add brokers (3 or more), then reassign its partitions onto "
				 "3 of them; %s=3 makes a new cluster refuse to create it on fewer", f->setting);
	} else if (low_rf.n) {
		if (!(f = add(r, rf <= 1 ? CC_DATA_LOSS : CC_AVAILABILITY, "replication-factor", t->name, -1)))
			goto out;
		give_parts(f, &low_rf, t->nparts);
		snprintf(f->what, sizeof f->what, "replication factor %d, below 3", rf);
		snprintf(f->risk, sizeof f->risk, "%s", rf <= 1
			 ? "every acknowledged record lives on one broker: losing its disk loses them, and "
			   "the partitions are offline while it is down"
			 : "one broker down leaves one copy: acks=all producers stop (min.insync.replicas=2) or "
			   "write to that copy alone (min.insync.replicas=1), and a second loss loses "
			   "acknowledged records");
		snprintf(f->setting, sizeof f->setting, "default.replication.factor");
		snprintf(f->value, sizeof f->value, "3");
		snprintf(f->fix, sizeof f->fix, "give the topic 3 replicas (reassign its partitions onto 3 "
			 "brokers); new topics: default.replication.factor=3 on the brokers, or create them "
			 "with --replication-factor 3");
	}

	if (t->min_isr < 0 || t->unclean < 0) {
		if (!(f = add(r, CC_WARNING, "settings-unknown", t->name, -1)))
			goto out;
		snprintf(f->what, sizeof f->what, "%s not read (DescribeConfigs failed)",
			 t->min_isr < 0 ? "min.insync.replicas" : "unclean.leader.election.enable");
		snprintf(f->risk, sizeof f->risk, "not checked: the rules on that setting were skipped");
		snprintf(f->fix, sizeof f->fix, "run the check again; sluicectl topic describe-config %s --all "
			 "shows the values", t->name);
	}
	if (t->min_isr == 1) {
		if (!(f = add(r, CC_DATA_LOSS, "min-insync-replicas-1", t->name, -1)))
			goto out;
		snprintf(f->what, sizeof f->what, "min.insync.replicas 1 (%s)",
			 t->min_isr_on_topic ? "set on the topic" : "the broker default");
		snprintf(f->risk, sizeof f->risk, "acks=all producers get no protection beyond acks=1: a "
			 "batch is acknowledged once the leader alone has it, and a leader lost before a "
			 "follower copied it loses acknowledged records");
		snprintf(f->setting, sizeof f->setting, "min.insync.replicas");
		snprintf(f->value, sizeof f->value, "2");
		snprintf(f->fix, sizeof f->fix, "%ssluicectl topic alter-config %s --set min.insync.replicas=2 "
			 "(with replication factor 3)", t->min_isr_on_topic ? ""
			 : "min.insync.replicas=2 on the brokers (every topic without its own), or on the topic: ",
			 t->name);
	}
	if (t->min_isr > 1 && rf > 0 && t->min_isr >= rf) {
		if (!(f = add(r, CC_AVAILABILITY, "min-insync-replicas-ge-rf", t->name, -1)))
			goto out;
		snprintf(f->what, sizeof f->what, "min.insync.replicas %d with replication factor %d%s", t->min_isr,
			 rf, t->min_isr_on_topic ? "" : " (the broker default)");
		snprintf(f->risk, sizeof f->risk, "%s", t->min_isr > rf
			 ? "acks=all is never acknowledged: every acks=all produce gets NOT_ENOUGH_REPLICAS, "
			   "even with every replica in sync"
			 : "acks=all stops (NOT_ENOUGH_REPLICAS) as soon as any one replica is down or lagging: "
			   "a rolling restart stops acks=all producers");
		snprintf(f->setting, sizeof f->setting, "min.insync.replicas");
		snprintf(f->value, sizeof f->value, "%d", rf >= 2 ? rf - 1 : 1);
		snprintf(f->fix, sizeof f->fix, "sluicectl topic alter-config %s --set min.insync.replicas=%d, or "
			 "raise the replication factor to %d", t->name, rf >= 2 ? rf - 1 : 1, t->min_isr + 1);
	}
	if (t->unclean == 1) {
		if (!(f = add(r, CC_DATA_LOSS, "unclean-leader-election", t->name, -1)))
			goto out;
		snprintf(f->what, sizeof f->what, "unclean.leader.election.enable=true (%s)",
			 t->unclean_on_topic ? "set on the topic" : "the broker default");
		snprintf(f->risk, sizeof f->risk, "a replica outside the ISR can become leader: acknowledged "
			 "records it never copied are lost, truncated from the other replicas when they "
			 "follow it");
		snprintf(f->setting, sizeof f->setting, "unclean.leader.election.enable");
		snprintf(f->value, sizeof f->value, "false");
		if (t->unclean_on_topic)
			snprintf(f->fix, sizeof f->fix, "sluicectl topic alter-config %s --set "
				 "unclean.leader.election.enable=false (or --delete it: Kafka's default is false)",
				 t->name);
		else
			snprintf(f->fix, sizeof f->fix, "unclean.leader.election.enable=false on the brokers");
	}
	if (racked.n) {
		if (!(f = add(r, CC_DATA_LOSS, "replicas-one-rack", t->name, -1)))
			goto out;
		give_parts(f, &racked, -1);
		snprintf(f->what, sizeof f->what, "%d partition(s) with every replica on one rack", f->nparts);
		snprintf(f->risk, sizeof f->risk, "losing rack %s (power, switch) loses every copy of these "
			 "partitions: their acknowledged records and their availability", rack_name);
		snprintf(f->fix, sizeof f->fix, "reassign these partitions so that their replicas span racks "
			 "(replicas are placed rack-aware at creation once every broker has broker.rack)");
	}
	if (under.n) {
		if (!(f = add(r, single_copy ? CC_DATA_LOSS : CC_AVAILABILITY, "under-replicated", t->name, -1)))
			goto out;
		give_parts(f, &under, -1);
		snprintf(f->what, sizeof f->what, "%d partition(s) with fewer in-sync replicas than replicas",
			 f->nparts);
		snprintf(f->risk, sizeof f->risk, "%s", single_copy
			 ? "one in-sync copy holds the newest records of some of them: losing its broker "
			   "loses acknowledged records"
			 : "fewer copies than configured hold the newest records: the next broker lost "
			   "leaves fewer still, and acks=all may stop");
		snprintf(f->fix, sizeof f->fix, "bring the replicas outside the ISR back: a broker down or "
			 "lagging (its log, network, disk); replica.lag.time.max.ms decides when a follower "
			 "leaves the ISR");
	}
	if (under_min.n) {
		if (!(f = add(r, CC_AVAILABILITY, "under-min-isr", t->name, -1)))
			goto out;
		give_parts(f, &under_min, -1);
		snprintf(f->what, sizeof f->what, "%d partition(s) with an ISR smaller than min.insync.replicas %d",
			 f->nparts, t->min_isr);
		snprintf(f->risk, sizeof f->risk, "acks=all producers get NOT_ENOUGH_REPLICAS on these "
			 "partitions now: nothing is acknowledged until the ISR grows");
		snprintf(f->setting, sizeof f->setting, "min.insync.replicas");
		snprintf(f->value, sizeof f->value, "%d", min_isr_seen > 0 ? min_isr_seen : 1);
		snprintf(f->fix, sizeof f->fix, "bring replicas back into the ISR; or sluicectl topic "
			 "alter-config %s --set min.insync.replicas=%d (fewer copies per acknowledged record)",
			 t->name, min_isr_seen > 0 ? min_isr_seen : 1);
	}
	if (offline.n) {
		if (!(f = add(r, CC_AVAILABILITY, "offline-partitions", t->name, -1)))
			goto out;
		give_parts(f, &offline, -1);
		snprintf(f->what, sizeof f->what, "%d partition(s) without a leader", f->nparts);
		snprintf(f->risk, sizeof f->risk, "reads and writes of these partitions fail until a replica "
			 "of their ISR comes back");
		snprintf(f->fix, sizeof f->fix, "bring back the brokers that hold their replicas");
	}
	rc = 0;
out:
	free(low_rf.v);
	free(under.v);
	free(under_min.v);
	free(offline.v);
	free(racked.v);
	return rc;
}

/* The rules on the brokers: how many, their racks, their defaults. */
static int check_brokers(const struct cc_cluster *cl, struct cc_report *r)
{
	int32_t with_rack = 0;
	bool one = true;
	struct cc_finding *f;

	if (cl->nbrokers < 3) {
		if (!(f = add(r, cl->nbrokers <= 1 ? CC_DATA_LOSS : CC_AVAILABILITY, "few-brokers", NULL, -1)))
			return -ENOMEM;
		snprintf(f->what, sizeof f->what, "%d broker(s), fewer than 3", cl->nbrokers);
		snprintf(f->risk, sizeof f->risk, "%s", cl->nbrokers <= 1
			 ? "every record lives on one machine: losing its disk loses them all, and the "
			   "cluster is down while it is"
			 : "replication factor 3 is impossible: one broker down leaves one copy, so acks=all "
			   "either stops or is acknowledged by that copy alone");
		snprintf(f->fix, sizeof f->fix, "run 3 brokers or more (replication factor 3 with "
			 "min.insync.replicas 2 survives one loss without stopping; one rack each)");
	}
	for (int32_t i = 0; i < cl->nbrokers; i++) {
		with_rack += cl->brokers[i].rack != NULL;
		one &= cl->brokers[i].rack && cl->brokers[0].rack && !strcmp(cl->brokers[i].rack, cl->brokers[0].rack);
	}
	if (with_rack == cl->nbrokers && one && cl->nbrokers > 1) {
		if (!(f = add(r, CC_DATA_LOSS, "one-rack", NULL, -1)))
			return -ENOMEM;
		snprintf(f->what, sizeof f->what, "every broker is in rack %s", cl->brokers[0].rack);
		snprintf(f->risk, sizeof f->risk, "losing that rack (power, switch) loses every copy of "
			 "every partition");
		snprintf(f->setting, sizeof f->setting, "broker.rack");
		snprintf(f->value, sizeof f->value, "one per failure domain");
		snprintf(f->fix, sizeof f->fix, "spread the brokers over 3 racks (or zones), set broker.rack "
			 "on each to its own, and reassign the partitions across them");
	}
	for (int32_t i = 0; i < cl->nbrokers; i++) {
		const struct cc_broker *b = &cl->brokers[i];

		if (with_rack && !b->rack) {
			if (!(f = add(r, CC_WARNING, "rack-missing", NULL, b->id)))
				return -ENOMEM;
			snprintf(f->what, sizeof f->what, "no broker.rack, while %d broker(s) have one", with_rack);
			snprintf(f->risk, sizeof f->risk, "replicas on this broker are not placed rack-aware: "
				 "partitions can end up with every copy in one rack");
			snprintf(f->setting, sizeof f->setting, "broker.rack");
			snprintf(f->value, sizeof f->value, "its rack");
			snprintf(f->fix, sizeof f->fix, "set broker.rack on broker %d and restart it", b->id);
		}
		if (!b->configs_read) {
			if (!(f = add(r, CC_AVAILABILITY, "broker-unreachable", NULL, b->id)))
				return -ENOMEM;
			snprintf(f->what, sizeof f->what, "registered, but did not answer DescribeConfigs");
			snprintf(f->risk, sizeof f->risk, "the partitions it holds may have a replica fewer, and "
				 "its own settings were not checked");
			snprintf(f->fix, sizeof f->fix, "check that broker %d is up and reachable at its "
				 "advertised address, then run the check again", b->id);
		}
		if (b->min_isr == 1) {
			if (!(f = add(r, CC_DATA_LOSS, "min-insync-replicas-1", NULL, b->id)))
				return -ENOMEM;
			snprintf(f->what, sizeof f->what, "broker default min.insync.replicas 1");
			snprintf(f->risk, sizeof f->risk, "every topic without its own min.insync.replicas "
				 "(new ones too): acks=all producers get no protection beyond acks=1");
			snprintf(f->setting, sizeof f->setting, "min.insync.replicas");
			snprintf(f->value, sizeof f->value, "2");
			snprintf(f->fix, sizeof f->fix, "min.insync.replicas=2 in broker %d's configuration (with "
				 "default.replication.factor=3)", b->id);
		}
		if (b->unclean == 1) {
			if (!(f = add(r, CC_DATA_LOSS, "unclean-leader-election", NULL, b->id)))
				return -ENOMEM;
			snprintf(f->what, sizeof f->what, "broker default unclean.leader.election.enable=true");
			snprintf(f->risk, sizeof f->risk, "every topic without its own setting: a replica "
				 "outside the ISR can become leader and acknowledged records are lost");
			snprintf(f->setting, sizeof f->setting, "unclean.leader.election.enable");
			snprintf(f->value, sizeof f->value, "false");
			snprintf(f->fix, sizeof f->fix, "unclean.leader.election.enable=false in broker %d's "
				 "configuration", b->id);
		}
	}
	return 0;
}

int cc_check(const struct cc_cluster *cl, struct cc_report *r)
{
	int rc = check_brokers(cl, r);

	for (int32_t i = 0; !rc && i < cl->ntopics; i++)
		rc = check_topic(cl, &cl->topics[i], r);
	return rc ? rc : r->n;
}
