/* control/reassign.h — the steps of a partition reassignment (Kafka's
 * KIP-455 in KRaft's ReplicationControlManager), as pure functions of a
 * partition's state: which replicas a target adds and removes, when the
 * reassignment completes, what a cancel restores. No I/O, no allocation:
 * control/ctl_reassign.c turns each plan into a PARTITION_REASSIGN record.
 *
 * A reassignment from replicas R to a target T:
 * - start: the replicas become T followed by R's not in T (the first of T
 *   is the preferred leader), adding T - R, removing R - T; the ISR and
 *   the leader stay (a previous reassignment's adding replicas that T no
 *   longer names leave at once);
 * - the adding replicas fetch from the leader and join the ISR as any
 *   follower does;
 * - complete, once every adding replica is in the ISR (and the ISR keeps
 *   a member of T): the replicas become T, the ISR its members in T, and
 *   a leader outside T hands over to the first member of T in the ISR;
 * - cancel: the replicas before it (R), the ISR its members in R, a leader
 *   outside R handing over likewise (none in sync: -1).
 *
 * Thread: any (pure). */
#ifndef SLUICE_REASSIGN_H
#define SLUICE_REASSIGN_H

#include <stdint.h>

#define REASSIGN_MAX 64              /* as META_MAX_REPLICAS */

/* A partition's state, borrowed. */
struct reassign_state {
	const int32_t *replicas, *isr, *adding, *removing;
	int nreplicas, nisr, nadding, nremoving;
	int32_t leader;
};

/* A record's content: leader -2 unchanged, nisr -1 unchanged. */
struct reassign_plan {
	int32_t leader;
	int nreplicas, nisr, nadding, nremoving;
	int32_t replicas[REASSIGN_MAX], isr[REASSIGN_MAX], adding[REASSIGN_MAX], removing[REASSIGN_MAX];
};

enum reassign_check {
	REASSIGN_OK = 0,
	REASSIGN_EMPTY,              /* no replica named */
	REASSIGN_DUPLICATE,          /* a broker twice */
	REASSIGN_UNKNOWN_BROKER,     /* a broker that is not registered (or negative) */
	REASSIGN_TOO_MANY,           /* more than REASSIGN_MAX */
};

/* Whether target can be a partition's replicas: *bad names the broker
 * that is repeated or unknown. */
enum reassign_check reassign_check_target(const int32_t *target, int n, const int32_t *known, int nknown,
					  int32_t *bad);
/* The record that starts (or replaces) a reassignment to target: 1 and
 * *out, or 0 when there is nothing to do (target is the replicas as they
 * are, none in progress). */
int reassign_start(const struct reassign_state *s, const int32_t *target, int ntarget, struct reassign_plan *out);
/* The record that completes it: 1 and *out when every adding replica is
 * in the ISR (and a member of the target is), 0 not yet (or none in
 * progress). */
int reassign_complete(const struct reassign_state *s, struct reassign_plan *out);
/* The record that cancels it: 1 and *out, 0 when none is in progress. */
int reassign_cancel(const struct reassign_state *s, struct reassign_plan *out);

/* A throttled-replica list (Kafka's leader.replication.throttled.replicas
 * or follower.: "*", or "partition:broker,...", validated when set) names
 * partition idx on broker id: "*", or an entry idx:id (the broker being
 * this node: the leader for the leader's list, the follower for the
 * follower's, as Kafka's parseThrottledPartitions keeps the entries of
 * its own broker). */
int reassign_throttle_names(const char *list, int32_t idx, int32_t id);

#endif
