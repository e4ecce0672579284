/* dataplane/cluster_view.c — the cluster as the Kafka APIs tell clients of
 * it (see cluster_view.h). @thread shard */
#include <string.h>

#include "dataplane/broker.h"
#include "dataplane/cluster_view.h"
#include "dataplane/topic_name.h"

void cluster_view_self(const struct broker *b, int listener, struct cluster_node *n)
{
	const char *host = b->set.adv_host;
	int port = b->set.adv_port;

	if (listener > 0 && listener < b->set.nlisteners) {
		/* as Kafka: a client is told of the listener it came through */
		host = b->set.listeners[listener].adv_host;
		port = b->set.listeners[listener].adv_port;
	}
	n->id = b->set.node_id;
	n->host = (struct kafka_str){ host, (int32_t)strlen(host) };
	n->port = port;
	n->rack = b->set.rack[0] ? (struct kafka_str){ b->set.rack, (int32_t)strlen(b->set.rack) }
				 : (struct kafka_str){ NULL, -1 };
}

struct kafka_str cluster_view_id(const struct broker *b)
{
	return (struct kafka_str){ b->set.cluster_id, (int32_t)strlen(b->set.cluster_id) };
}

int32_t cluster_view_controller(const struct broker *b, const struct md_snapshot *md)
{
	int32_t id = __atomic_load_n(&b->controller_id, __ATOMIC_RELAXED);

	if (id < 0 || id == b->set.node_id)
		return b->set.node_id;
	for (int i = 0; md && i < md->nbrokers; i++)
		if (md->brokers[i].id == id)
			return id;
	return b->set.node_id;   /* not a registered broker (yet): a client could not reach it */
}

int cluster_view_other(const struct broker *b, int listener, const struct md_broker *o, struct cluster_node *out)
{
	const char *host = o->host;
	int32_t port = o->port;

	if (o->nendpoints > 0) {
		/* as Kafka: the endpoint named as the listener the client came
		 * through (the inter-broker one on a node of no listeners) */
		const char *name = b->set.nlisteners > 0 ? b->set.listeners[listener >= 0 && listener < b->set.nlisteners
										? listener : 0].name
							 : NULL;
		int k = 0;

		while (name && k < o->nendpoints && strcmp(o->endpoints[k].name, name))
			k++;
		if (name && k == o->nendpoints)
			return 0;    /* it has no such listener: not for this client */
		if (name) {
			host = o->endpoints[k].host;
			port = o->endpoints[k].port;
		}
	}
	out->id = o->id;
	out->host = (struct kafka_str){ host, (int32_t)strlen(host) };
	out->port = port;
	out->rack = o->rack[0] ? (struct kafka_str){ o->rack, (int32_t)strlen(o->rack) } : (struct kafka_str){ NULL, -1 };
	return 1;
}

int16_t cluster_view_coordinator(const struct broker *b, int listener, const struct md_snapshot *md,
				 int8_t key_type, const char *key, size_t len, struct cluster_node *out)
{
	const char *topic = key_type == 1 ? TOPIC_TRANSACTION_STATE : TOPIC_CONSUMER_OFFSETS;
	const struct md_topic *t = md ? md_find(md, topic, (int32_t)strlen(topic)) : NULL;
	int32_t leader;

	if (!t || t->nparts < 1) {
		if ((md && md->nbrokers > 1) || b->set.broker_only)
			return 15;   /* a cluster's: made once its brokers are up; ask again */
		cluster_view_self(b, listener, out);
		return 0;
	}
	leader = t->parts[topic_key_partition(key, len, t->nparts)].leader;
	if (leader == b->set.node_id) {
		cluster_view_self(b, listener, out);
		return 0;
	}
	for (int i = 0; leader >= 0 && i < md->nbrokers; i++) {
		const struct md_broker *o = &md->brokers[i];

		if (o->id != leader)
			continue;
		return cluster_view_other(b, listener, o, out) ? 0 : 15;
	}
	return 15;   /* COORDINATOR_NOT_AVAILABLE: the client asks again */
}

int cluster_view_brokers(const struct broker *b, int listener, const struct md_snapshot *md,
			 struct cluster_node *out, int cap)
{
	int n = 0;

	if (cap < 1)
		return 0;
	cluster_view_self(b, listener, &out[n++]);
	for (int i = 0; md && i < md->nbrokers && n < cap; i++) {
		const struct md_broker *o = &md->brokers[i];

		if (o->id == b->set.node_id)
			continue;
		n += cluster_view_other(b, listener, o, &out[n]);
	}
	return n;
}
