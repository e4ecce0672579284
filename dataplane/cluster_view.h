/* dataplane/cluster_view.h — the cluster as the Kafka APIs tell clients of
 * it: its id, its controller and its brokers at their advertised client
 * addresses. Metadata, DescribeCluster and FindCoordinator all take it from
 * here, so they never disagree.
 *
 * The brokers are this node and every other broker the metadata log has
 * registered and not fenced (the published snapshot's, dataplane/broker.h);
 * on one node, this node alone, as its settings say. The controller is
 * this node (a combined broker and controller).
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

/* @thread shard. This node as a client of `listener` (the index of the
 * listener its connection came through, conn->listener) reaches it: that
 * listener's advertised address. */
void cluster_view_self(const struct broker *b, int listener, struct cluster_node *n);
struct md_snapshot;
struct md_broker;
/* @thread shard. Another broker o as a client of `listener` reaches it, as
 * Kafka: at its endpoint of the same listener name (its registration's);
 * 0 (*out untouched) when it has none, so the client is not told of it. A
 * broker registered without endpoints (an older REGISTER_BROKER record)
 * is told at its one address on every listener. 1 and *out (strings
 * pointing into o). */
int cluster_view_other(const struct broker *b, int listener, const struct md_broker *o, struct cluster_node *out);
/* @thread shard. The brokers clients may be sent to, at most cap: this
 * node first (from its settings), then every other unfenced registered
 * broker of md (NULL: none), by id. Returns how many were filled; the
 * strings of the others point into md, valid for the shard's loop turn
 * (as the topic names a response borrows from it). */
int cluster_view_brokers(const struct broker *b, int listener, const struct md_snapshot *md,
			 struct cluster_node *out, int cap);
/* @thread shard. Where FindCoordinator sends key (key_type 0: a group id,
 * 1: a transactional id): the leader of the key's partition of its internal
 * topic (__consumer_offsets, __transaction_state), as Kafka's partitionFor
 * picks it, so that every node names the same coordinator; this node while
 * the topic is not in md yet on one node (its first start). 0 and *out
 * (strings as cluster_view_brokers'), or COORDINATOR_NOT_AVAILABLE (15):
 * the partition has no leader now, its leader is not a broker md lists
 * (or has no endpoint for this listener), or (several brokers) the topic
 * is not made yet. */
int16_t cluster_view_coordinator(const struct broker *b, int listener, const struct md_snapshot *md,
				 int8_t key_type, const char *key, size_t len, struct cluster_node *out);
/* @thread shard. The cluster id (Metadata v2+, DescribeCluster). */
struct kafka_str cluster_view_id(const struct broker *b);
/* @thread shard. The controller's node id (Metadata's and DescribeCluster's
 * ControllerId): the active controller, the metadata quorum's leader, when
 * it is known and a broker md lists (every node is both here, so a client
 * reaches it); else this node (one node; an election under way). */
int32_t cluster_view_controller(const struct broker *b, const struct md_snapshot *md);

#endif
