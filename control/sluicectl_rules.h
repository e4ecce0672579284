/* control/sluicectl_rules.h — the rules of `sluicectl cluster check`: which
 * combinations of brokers, racks, replica sets, ISR and settings can lose
 * acknowledged records or availability (Kafka's replication tuning
 * matrix). A pure function of a description of the cluster (struct
 * cc_cluster, filled from Metadata and DescribeConfigs by
 * sluicectl_cluster.c, or by a test): no socket, no output, so the rules
 * are tested on clusters of any size and shape (tests/unit/
 * test_sluicectl_rules.c).
 *
 * Thread: sluicectl's only thread (@thread main).
 * Owns: a cc_report owns its findings and their partition lists (freed by
 * cc_report_fini); a cc_cluster and everything it points to is the
 * caller's, borrowed for the length of cc_check.
 * Errors: cc_check returns the number of findings or -ENOMEM.
 */
#ifndef SLUICE_SLUICECTL_RULES_H
#define SLUICE_SLUICECTL_RULES_H

#include <stdbool.h>
#include <stdint.h>

/* Ordered: a higher severity is worse. Availability and data loss gate a
 * deployment (cc_exit_status 1); a warning does not. */
enum cc_severity { CC_WARNING = 0, CC_AVAILABILITY = 1, CC_DATA_LOSS = 2 };

struct cc_partition {
	int32_t id;
	int32_t leader;                 /* -1: none (offline) */
	const int32_t *replicas;
	int32_t nreplicas;
	const int32_t *isr;
	int32_t nisr;
};

/* A setting as read: its value (-1: unknown, not read) and whether it is set
 * on the topic itself (else it is the broker's default). */
struct cc_topic {
	const char *name;
	bool internal;
	int32_t min_isr;                /* effective min.insync.replicas; -1 unknown */
	bool min_isr_on_topic;
	int unclean;                    /* effective unclean.leader.election.enable: 1, 0; -1 unknown */
	bool unclean_on_topic;
	const struct cc_partition *parts;
	int32_t nparts;
};

struct cc_broker {
	int32_t id;
	const char *rack;               /* NULL: none */
	bool configs_read;              /* false: unreachable, its settings unknown */
	int32_t min_isr;                /* its default min.insync.replicas; -1 unknown */
	int unclean;                    /* its default unclean.leader.election.enable; -1 unknown */
};

struct cc_cluster {
	const struct cc_broker *brokers;
	int32_t nbrokers;
	const struct cc_topic *topics;
	int32_t ntopics;
};

struct cc_finding {
	enum cc_severity severity;
	const char *code;               /* stable name, e.g. "replication-factor" (static) */
	char topic[256];                /* "": not a topic's */
	int32_t *parts;                 /* the topic's partitions concerned (owned) */
	int32_t nparts;                 /* 0 with a topic: every partition */
	int32_t broker;                 /* -1: not one broker's */
	char what[256];                 /* the state found */
	char risk[512];                 /* what can be lost */
	char setting[96];               /* the key to change; "": the fix is not a setting */
	char value[32];                 /* its value */
	char fix[512];                  /* what to do, in words */
};

struct cc_report {
	struct cc_finding *f;
	int n, cap;
};

/* Check cl and append its findings to r (zeroed before the first call):
 * the number of findings, or -ENOMEM. */
int cc_check(const struct cc_cluster *cl, struct cc_report *r);
void cc_report_fini(struct cc_report *r);
/* 1 when a finding is of availability or data-loss severity, else 0. */
int cc_exit_status(const struct cc_report *r);
/* "data-loss", "availability", "warning". */
const char *cc_severity_name(enum cc_severity s);

/* The two per-partition states topic describe marks too. */
static inline bool cc_under_replicated(const struct cc_partition *p)
{
	return p->nisr < p->nreplicas;
}

static inline bool cc_under_min_isr(const struct cc_partition *p, int32_t min_isr)
{
	return min_isr > 0 && p->nisr < min_isr;
}

#endif
