/* dataplane/cluster_view.c — the cluster as the Kafka APIs tell clients of
 * it (see cluster_view.h). @thread shard */
#include <string.h>

#include "dataplane/broker.h"
#include "dataplane/cluster_view.h"

void cluster_view_self(const struct broker *b, struct cluster_node *n)
{
	n->id = b->set.node_id;
	n->host = (struct kafka_str){ b->set.adv_host, (int32_t)strlen(b->set.adv_host) };
	n->port = b->set.adv_port;
	n->rack = b->set.rack[0] ? (struct kafka_str){ b->set.rack, (int32_t)strlen(b->set.rack) }
				 : (struct kafka_str){ NULL, -1 };
}

struct kafka_str cluster_view_id(const struct broker *b)
{
	return (struct kafka_str){ b->set.cluster_id, (int32_t)strlen(b->set.cluster_id) };
}

int32_t cluster_view_controller(const struct broker *b)
{
	return b->set.node_id;   /* a combined broker and controller, a quorum of one */
}
