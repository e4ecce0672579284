/* dataplane/cluster_view.h — the cluster as the Kafka APIs tell clients of
 * it: its id, its controller and its brokers at their advertised client
 * addresses. Metadata, DescribeCluster and FindCoordinator all take it from
 * here, so they never disagree.
 *
 * Sluice runs one node today, a combined broker and controller (a quorum
 * of one): the cluster is this node, and its controller is this node.
 *
 * Thread: any shard (@thread shard). Owns nothing: the strings point into
 * the broker's settings (struct broker_settings), read-only once the shards
 * serve (the cluster id is written before `serving` is published, see
 * dataplane/broker.h), so they outlive every request.
 */
#ifndef SLUICE_CLUSTER_VIEW_H
#define SLUICE_CLUSTER_VIEW_H

#include <stdint.h>

#include "dataplane/kafka/kafka_wire.h"

struct broker;

/* A broker as clients reach it. */
struct cluster_node {
	int32_t id;                 /* node.id */
	struct kafka_str host;      /* the advertised client listener */
	int32_t port;
	struct kafka_str rack;      /* broker.rack; null (len -1) when unset */
};

/* @thread shard. This node as clients reach it. */
void cluster_view_self(const struct broker *b, struct cluster_node *n);
/* @thread shard. The cluster id (Metadata v2+, DescribeCluster). */
struct kafka_str cluster_view_id(const struct broker *b);
/* @thread shard. The controller's node id: this node. */
int32_t cluster_view_controller(const struct broker *b);

#endif
