/* tests/unit/test_sluicectl_rules.c — the rules of `sluicectl cluster
 * check` (control/sluicectl_rules.c) on clusters one broker cannot be:
 * three and four brokers, racks (several, one, some missing), follower
 * replicas out of the ISR, an offline partition, an unreachable broker,
 * internal topics created before the other brokers joined; and a healthy
 * cluster that yields nothing (exit 0). The rule engine's input is the
 * description of a cluster sluicectl builds from Metadata and
 * DescribeConfigs; sluicectl lives outside the core library, so the suite
 * compiles the rules in. tests/integration/test_sluicectl.py checks the
 * same rules against a real broker. */
#include <string.h>

#include "control/sluicectl_rules.c"
#include "tests/unit/helpers.h"

static const int32_t r123[] = { 1, 2, 3 }, r12[] = { 1, 2 }, r1[] = { 1 }, r124[] = { 1, 2, 4 };

static struct cc_broker brokers[8];
static struct cc_partition parts[8][8];
static struct cc_topic topics[8];
static struct cc_report rep;

/* n brokers 1..n, each with rack racks[i] (NULL: none), min.insync.replicas
 * 2 and unclean election off. */
static struct cc_cluster cluster(int n, const char *const *racks)
{
	memset(brokers, 0, sizeof brokers);
	memset(topics, 0, sizeof topics);
	memset(parts, 0, sizeof parts);
	for (int i = 0; i < n; i++)
		brokers[i] = (struct cc_broker){ .id = i + 1, .rack = racks ? racks[i] : NULL,
						 .configs_read = true, .min_isr = 2, .unclean = 0 };
	return (struct cc_cluster){ brokers, n, topics, 0 };
}

/* Topic name with nparts partitions, every one with replicas rep (led by
 * its first) and ISR isr; min.insync.replicas 2 (the broker's), unclean
 * election off. */
static struct cc_topic *topic(struct cc_cluster *cl, const char *name, int nparts, const int32_t *rep, int nrep,
			      const int32_t *isr, int nisr)
{
	int t = cl->ntopics++;

	for (int p = 0; p < nparts; p++)
		parts[t][p] = (struct cc_partition){ p, rep[0], rep, nrep, isr, nisr };
	topics[t] = (struct cc_topic){ .name = name, .internal = name[0] == '_', .min_isr = 2, .unclean = 0,
				       .parts = parts[t], .nparts = nparts };
	return &topics[t];
}

/* The findings named code (of topic, when not NULL). */
static int count(const char *code, const char *topic_name)
{
	int n = 0;

	for (int i = 0; i < rep.n; i++)
		if (!strcmp(rep.f[i].code, code) && (!topic_name || !strcmp(rep.f[i].topic, topic_name)))
			n++;
	return n;
}

static const struct cc_finding *find(const char *code, const char *topic_name)
{
	for (int i = 0; i < rep.n; i++)
		if (!strcmp(rep.f[i].code, code) && (!topic_name || !strcmp(rep.f[i].topic, topic_name)))
			return &rep.f[i];
	cr_assert_fail("no finding %s for %s (of %d)", code, topic_name ? topic_name : "-", rep.n);
	return NULL;
}

static void check(const struct cc_cluster *cl)
{
	cc_report_fini(&rep);
	cr_assert_geq(cc_check(cl, &rep), 0);
}

static void fini(void)
{
	cc_report_fini(&rep);
}

TestSuite(sluicectl_rules, .fini = fini);

static const char *const abc[] = { "a", "b", "c", "d" };

/* Three brokers in three racks, replication factor 3, min.insync.replicas
 * 2, every replica in sync, unclean election off: nothing to report. */
static struct cc_cluster healthy(void)
{
	struct cc_cluster cl = cluster(3, abc);

	topic(&cl, "orders", 3, r123, 3, r123, 3);
	topic(&cl, "__consumer_offsets", 2, r123, 3, r123, 3);
	topic(&cl, "__transaction_state", 2, r123, 3, r123, 3);
	return cl;
}

Test(sluicectl_rules, a_healthy_cluster_has_no_findings_and_exits_0)
{
	struct cc_cluster cl = healthy();

	check(&cl);
	for (int i = 0; i < rep.n; i++)
		cr_log_error("unexpected: %s %s %s", rep.f[i].code, rep.f[i].topic, rep.f[i].what);
	cr_assert_eq(rep.n, 0);
	cr_assert_eq(cc_exit_status(&rep), 0);
}

Test(sluicectl_rules, one_broker_with_defaults)
{
	struct cc_cluster cl = cluster(1, NULL);
	const struct cc_finding *f;

	brokers[0].min_isr = 1;
	topic(&cl, "t", 2, r1, 1, r1, 1)->min_isr = 1;
	check(&cl);
	f = find("few-brokers", NULL);
	cr_assert_eq(f->severity, CC_DATA_LOSS);
	f = find("replication-factor", "t");
	cr_assert_eq(f->severity, CC_DATA_LOSS);
	cr_assert_eq(f->nparts, 0, "every partition: the whole topic");
	cr_assert_str_eq(f->setting, "default.replication.factor");
	cr_assert_str_eq(f->value, "3");
	f = find("min-insync-replicas-1", "t");
	cr_assert_eq(f->severity, CC_DATA_LOSS);
	cr_assert_str_eq(f->setting, "min.insync.replicas");
	cr_assert_str_eq(f->value, "2");
	cr_assert(strstr(f->risk, "acks=all") && strstr(f->risk, "no protection"), "%s", f->risk);
	cr_assert(strstr(f->what, "broker default"), "not set on the topic: %s", f->what);
	f = find("min-insync-replicas-1", "");
	cr_assert_eq(f->broker, 1);
	cr_assert_eq(cc_exit_status(&rep), 1);
}

Test(sluicectl_rules, two_brokers_are_an_availability_finding)
{
	struct cc_cluster cl = cluster(2, NULL);
	struct cc_topic *t = topic(&cl, "t", 1, r12, 2, r12, 2);

	t->min_isr = 1;
	t->min_isr_on_topic = true;
	check(&cl);
	cr_assert_eq(find("few-brokers", NULL)->severity, CC_AVAILABILITY);
	cr_assert_eq(find("replication-factor", "t")->severity, CC_AVAILABILITY);
	cr_assert(strstr(find("min-insync-replicas-1", "t")->what, "set on the topic"));
}

Test(sluicectl_rules, min_insync_replicas_at_or_above_the_replication_factor)
{
	struct cc_cluster cl = cluster(3, abc);
	const struct cc_finding *f;

	topic(&cl, "equal", 1, r123, 3, r123, 3)->min_isr = 3;
	topic(&cl, "above", 1, r123, 3, r123, 3)->min_isr = 4;
	check(&cl);
	f = find("min-insync-replicas-ge-rf", "equal");
	cr_assert_eq(f->severity, CC_AVAILABILITY);
	cr_assert_str_eq(f->setting, "min.insync.replicas");
	cr_assert_str_eq(f->value, "2");
	cr_assert(strstr(f->risk, "any one replica"), "%s", f->risk);
	f = find("min-insync-replicas-ge-rf", "above");
	cr_assert(strstr(f->risk, "never"), "%s", f->risk);
	/* the ISR (3) is below min.insync.replicas 4 too */
	cr_assert_eq(count("under-min-isr", "above"), 1);
	cr_assert_eq(count("under-min-isr", "equal"), 0);
	cr_assert_eq(count("min-insync-replicas-1", NULL), 0);
}

Test(sluicectl_rules, unclean_election_on_a_topic_and_on_a_broker)
{
	struct cc_cluster cl = healthy();
	const struct cc_finding *f;

	topics[0].unclean = 1;
	topics[0].unclean_on_topic = true;
	brokers[2].unclean = 1;
	check(&cl);
	f = find("unclean-leader-election", "orders");
	cr_assert_eq(f->severity, CC_DATA_LOSS);
	cr_assert_str_eq(f->setting, "unclean.leader.election.enable");
	cr_assert_str_eq(f->value, "false");
	f = find("unclean-leader-election", "");
	cr_assert_eq(f->broker, 3);
	cr_assert_eq(count("unclean-leader-election", NULL), 2);
}

Test(sluicectl_rules, replicas_of_a_partition_on_one_rack)
{
	static const char *const racks[] = { "a", "a", "a", "b" };
	struct cc_cluster cl = cluster(4, racks);
	struct cc_topic *t = topic(&cl, "t", 3, r123, 3, r123, 3);
	const struct cc_finding *f;

	/* partition 1 spans racks a and b; 0 and 2 are all on a */
	parts[0][1].replicas = parts[0][1].isr = r124;
	(void)t;
	check(&cl);
	f = find("replicas-one-rack", "t");
	cr_assert_eq(f->severity, CC_DATA_LOSS);
	cr_assert_eq(f->nparts, 2);
	cr_assert_eq(f->parts[0], 0);
	cr_assert_eq(f->parts[1], 2);
	cr_assert(strstr(f->risk, "rack a"), "%s", f->risk);
	cr_assert_eq(count("one-rack", NULL), 0);
}

Test(sluicectl_rules, every_broker_on_one_rack)
{
	static const char *const racks[] = { "r1", "r1", "r1" };
	struct cc_cluster cl = cluster(3, racks);

	topic(&cl, "t", 2, r123, 3, r123, 3);
	check(&cl);
	cr_assert_eq(find("one-rack", NULL)->severity, CC_DATA_LOSS);
	cr_assert(strstr(find("one-rack", NULL)->what, "r1"));
	/* said once for the cluster, not once per partition */
	cr_assert_eq(count("replicas-one-rack", NULL), 0);
}

Test(sluicectl_rules, brokers_without_racks_are_not_a_rack_finding)
{
	struct cc_cluster cl = healthy();

	for (int i = 0; i < 3; i++)
		brokers[i].rack = NULL;
	check(&cl);
	cr_assert_eq(rep.n, 0);
}

Test(sluicectl_rules, some_brokers_without_a_rack_is_a_warning_only)
{
	struct cc_cluster cl = healthy();

	brokers[1].rack = NULL;
	check(&cl);
	cr_assert_eq(rep.n, 1);
	cr_assert_eq(find("rack-missing", NULL)->severity, CC_WARNING);
	cr_assert_eq(find("rack-missing", NULL)->broker, 2);
	cr_assert_eq(cc_exit_status(&rep), 0, "a warning does not gate");
}

Test(sluicectl_rules, internal_topics_created_before_the_brokers_joined)
{
	struct cc_cluster cl = healthy();
	const struct cc_finding *f;

	parts[1][0].replicas = parts[1][0].isr = r1;
	parts[1][0].nreplicas = parts[1][0].nisr = 1;
	parts[1][1] = parts[1][0];
	parts[1][1].id = 1;
	check(&cl);
	f = find("internal-topic-replication", "__consumer_offsets");
	cr_assert_eq(f->severity, CC_DATA_LOSS);
	cr_assert_str_eq(f->setting, "offsets.topic.replication.factor");
	cr_assert_str_eq(f->value, "3");
	cr_assert(strstr(f->fix, "reassign"), "3 brokers could hold 3 replicas now: %s", f->fix);
	cr_assert(strstr(f->risk, "committed offsets"), "%s", f->risk);
	/* not also the generic replication-factor finding */
	cr_assert_eq(count("replication-factor", NULL), 0);
	cr_assert_eq(count("internal-topic-replication", "__transaction_state"), 0);
}

Test(sluicectl_rules, internal_topic_on_a_cluster_too_small_for_three)
{
	struct cc_cluster cl = cluster(1, NULL);
	const struct cc_finding *f;

	topic(&cl, "__transaction_state", 2, r1, 1, r1, 1)->min_isr = 2;
	check(&cl);
	f = find("internal-topic-replication", "__transaction_state");
	cr_assert_str_eq(f->setting, "transaction.state.log.replication.factor");
	cr_assert(strstr(f->fix, "add brokers"), "%s", f->fix);
}

Test(sluicectl_rules, followers_out_of_the_isr)
{
	struct cc_cluster cl = healthy();
	struct cc_topic *t;
	const struct cc_finding *f;

	t = topic(&cl, "lagging", 3, r123, 3, r123, 3);
	parts[3][1].isr = r12;
	parts[3][1].nisr = 2;   /* under-replicated, still at min.insync.replicas */
	parts[3][2].isr = r1;
	parts[3][2].nisr = 1;   /* one copy: under min.insync.replicas too */
	(void)t;
	check(&cl);
	f = find("under-replicated", "lagging");
	cr_assert_eq(f->nparts, 2);
	cr_assert_eq(f->parts[0], 1);
	cr_assert_eq(f->parts[1], 2);
	cr_assert_eq(f->severity, CC_DATA_LOSS, "one partition is down to one copy");
	f = find("under-min-isr", "lagging");
	cr_assert_eq(f->nparts, 1);
	cr_assert_eq(f->parts[0], 2);
	cr_assert_eq(f->severity, CC_AVAILABILITY);
	cr_assert(strstr(f->risk, "NOT_ENOUGH_REPLICAS"), "%s", f->risk);
	cr_assert_eq(count("under-replicated", "orders"), 0);
	cr_assert(cc_under_replicated(&parts[3][1]) && !cc_under_min_isr(&parts[3][1], 2));
	cr_assert(cc_under_min_isr(&parts[3][2], 2) && !cc_under_replicated(&parts[3][0]));
}

Test(sluicectl_rules, offline_partition_and_unreachable_broker)
{
	struct cc_cluster cl = healthy();

	parts[0][2].leader = -1;
	brokers[1].configs_read = false;
	brokers[1].min_isr = -1;
	brokers[1].unclean = -1;
	check(&cl);
	cr_assert_eq(find("offline-partitions", "orders")->nparts, 1);
	cr_assert_eq(find("offline-partitions", "orders")->parts[0], 2);
	cr_assert_eq(find("broker-unreachable", NULL)->broker, 2);
	cr_assert_eq(find("broker-unreachable", NULL)->severity, CC_AVAILABILITY);
}

Test(sluicectl_rules, settings_not_read_are_a_warning)
{
	struct cc_cluster cl = healthy();

	topics[0].min_isr = -1;
	check(&cl);
	cr_assert_eq(rep.n, 1);
	cr_assert_eq(find("settings-unknown", "orders")->severity, CC_WARNING);
	cr_assert_eq(cc_exit_status(&rep), 0);
}
