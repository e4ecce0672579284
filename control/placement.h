/* control/placement.h — where the replicas of new partitions go: Kafka's
 * assignment of replicas to brokers (AdminUtils.assignReplicasToBrokers,
 * the rule `kafka-topics --create` has always followed). The brokers are
 * taken in id order (rack-aware: alternating racks, racks in name order,
 * each rack's brokers in id order); partition p's first replica, its
 * preferred leader, is the broker at (p + start) modulo the broker count,
 * the others follow it at a shift that moves by one each time the
 * partitions have gone once round the brokers, so leaders and followers
 * both spread evenly. Rack-aware (when every broker has a rack), a
 * partition's replicas go to as many racks as there are before any rack
 * gets a second.
 *
 * Shards within a node are chosen elsewhere (control/ctl_topic.c).
 *
 * Thread: any (@thread any): pure functions over the caller's arrays.
 * Errors: -EINVAL (no partition, a replication factor below 1, a broker
 * named twice in one partition), -ENOSPC (more replicas than brokers),
 * -ENOENT (an assignment naming a broker not in the list), -ENOMEM.
 */
#ifndef SLUICE_PLACEMENT_H
#define SLUICE_PLACEMENT_H

#include <stdint.h>

struct placement_broker {
	int32_t id;
	const char *rack;            /* NULL or "": none */
};

/* Place partitions [first, first + nparts) with rf replicas each over
 * brokers[0..n): out[(p - first) * rf + r] is partition p's r-th replica.
 * start (Kafka's start index and first replica shift, which Kafka draws
 * at random): the caller's, e.g. a hash of the topic name. */
int placement_assign(const struct placement_broker *brokers, int n, int32_t first, int32_t nparts, int rf,
		     uint32_t start, int32_t *out);

/* An explicit assignment (CreateTopics' Assignments): nparts x rf ids,
 * each a broker of the list, none twice in a partition. *bad (may be
 * NULL) gets the offending id. */
int placement_check(const struct placement_broker *brokers, int n, int32_t nparts, int rf, const int32_t *ids,
		    int32_t *bad);

#endif
