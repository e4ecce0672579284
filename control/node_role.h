/* control/node_role.h — this node's place in the cluster, from Kafka's
 * settings: process.roles (broker, controller, or both), node.id against
 * controller.quorum.voters ("id@host:port,..."), the controller listener
 * (a listeners entry whose name is in controller.listener.names) and
 * broker.rack. Checked once at start-up, before anything is opened: a
 * configuration that contradicts itself is refused with one line naming
 * the key (sluiced exits 2).
 *
 * A node is a combined broker and controller (the default), a controller
 * only (a voter that serves no Kafka client: its listeners are controller
 * listeners only, as Kafka requires) or a broker only (not a voter: its
 * node.id must not be among the voters, it has no controller listener and
 * reaches the controllers at their voter addresses). An empty voter list,
 * or one naming only this combined node, is a quorum of one (no socket for
 * the quorum, unless the node has a controller listener: then its port
 * is open for broker-only nodes); a list naming several nodes, or any node of one role, is a
 * cluster: a controller must be among the voters and have its controller
 * listener on its voter port (it carries raft and the controller channel:
 * control/quorum_transport.h), and every node needs a cluster.id.
 *
 * Thread: main, at start-up (pure: reads the frozen config).
 * Errors: 0, or -EINVAL with err naming the key and what to do.
 */
#ifndef SLUICE_NODE_ROLE_H
#define SLUICE_NODE_ROLE_H

#include <stddef.h>
#include <stdint.h>

struct config;

#define NODE_ROLE_MAX_VOTERS 64

struct node_voter {
	int32_t id;
	char host[256];
	int port;
};

struct node_role {
	int broker;                   /* process.roles has broker */
	int controller;               /* ... has controller */
	int nvoters;                  /* 0: the voter list is empty (this node alone) */
	struct node_voter voters[NODE_ROLE_MAX_VOTERS];
	/* the Kafka listener clients connect to: the first entry of listeners
	 * that is not a controller listener (a controller only: port 0, none) */
	char listen_host[256];
	int listen_port;
	/* what Metadata returns: the first entry of advertised.listeners (or
	 * listeners) that is not a controller listener */
	char adv_host[256];
	int adv_port;
	/* the controller listener, if listeners has one (port 0: none) */
	char ctl_host[256];
	int ctl_port;
	char rack[256];               /* broker.rack; "" = none (null in Metadata) */
};

/* Fill r from c, or refuse. */
int node_role_check(const struct config *c, struct node_role *r, char *err, size_t errlen);

/* Parse controller.quorum.voters ("id@host:port,..."; "" gives 0 voters).
 * -EINVAL, with err naming the entry, for a bad entry, a repeated id or a
 * repeated host:port; -E2BIG past NODE_ROLE_MAX_VOTERS. */
int node_voters_parse(const char *s, struct node_voter *v, int max, int *n, char *err, size_t errlen);

#endif
