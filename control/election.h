/* control/election.h — who leads a partition, Kafka's rules
 * (PartitionChangeBuilder, without KIP-966's eligible leader replicas):
 * given its replicas (the first is the preferred leader), its ISR, its
 * leader and the brokers that are live (registered, unfenced, not shutting
 * down), the new leader and ISR.
 *
 * - A broker that is not live leaves the ISR, unless no live member would
 *   be left: then the ISR keeps its last member (the leader, if it was in
 *   it), so that broker can lead again when it comes back with everything
 *   the ISR had acknowledged.
 * - The leader stays if it is live and in the ISR; else the first replica
 *   (replicas order) that is live and in the ISR leads.
 * - None: with unclean.leader.election.enable the first live replica out
 *   of sync leads and the ISR becomes it alone (records the ISR had may be
 *   lost); without, there is no leader (-1: the partition is offline).
 *
 * A change of leader bumps the leader epoch and the partition epoch, an
 * ISR-only change the partition epoch (what applying the PARTITION_CHANGE
 * record does, control/meta_parts.c); these functions only choose.
 *
 * Thread: any (@thread any): pure functions over the caller's arrays.
 */
#ifndef SLUICE_ELECTION_H
#define SLUICE_ELECTION_H

#include <stdint.h>

#define ELECTION_MAX_REPLICAS 64     /* as META_MAX_REPLICAS */

struct election_in {
	const int32_t *replicas;
	int nreplicas;
	const int32_t *isr;
	int nisr;
	int32_t leader;              /* -1: none */
	const int32_t *live;         /* the live brokers, any order */
	int nlive;
	int unclean;                 /* unclean.leader.election.enable in effect */
};

struct election_out {
	int32_t leader;              /* -1: none (offline) */
	int32_t isr[ELECTION_MAX_REPLICAS];
	int nisr;
	int leader_changed, isr_changed;
	int unclean;                 /* the leader came from outside the ISR */
};

/* What an ElectLeaders request got for one partition (Kafka's codes). */
enum election_result {
	ELECTION_DONE = 0,                       /* out holds the change */
	ELECTION_NOT_NEEDED = 84,                /* ELECTION_NOT_NEEDED */
	ELECTION_PREFERRED_NOT_AVAILABLE = 80,   /* PREFERRED_LEADER_NOT_AVAILABLE */
	ELECTION_ELIGIBLE_NOT_AVAILABLE = 83,    /* ELIGIBLE_LEADERS_NOT_AVAILABLE */
};

/* Whether id is among ids[0..n). */
int election_has(const int32_t *ids, int n, int32_t id);

/* The brokers changed (one fenced, unfenced, shutting down): the ISR
 * without brokers that are not live, and the leader by the rules above.
 * Returns whether anything changed (leader or ISR). */
int election_on_brokers(const struct election_in *in, struct election_out *out);

/* ElectLeaders, type 0 (preferred): the first replica leads if it is live
 * and in the ISR. ELECTION_NOT_NEEDED when it leads already,
 * ELECTION_PREFERRED_NOT_AVAILABLE when it cannot. */
enum election_result election_preferred(const struct election_in *in, struct election_out *out);

/* ElectLeaders, type 1 (unclean): only for a partition without a live
 * leader (ELECTION_NOT_NEEDED otherwise): a live ISR member leads if there
 * is one, else the first live replica, its ISR itself alone
 * (ELECTION_ELIGIBLE_NOT_AVAILABLE when no replica is live). in->unclean
 * is ignored: the request asks for it. */
enum election_result election_unclean(const struct election_in *in, struct election_out *out);

#endif
