/* tests/unit/test_node_role.c — this node's place in the cluster from
 * Kafka's settings: process.roles, controller.quorum.voters,
 * controller.listener.names and the listeners they pick; every refusal
 * names its key, and the configurations a node can honour (alone, or one
 * of a cluster) pass. */
#include <errno.h>
#include <string.h>

#include "control/config.h"
#include "control/node_role.h"
#include "tests/unit/helpers.h"

static struct config *c;
static struct node_role r;
static char err[512];

static void setup(void)
{
	cr_assert_eq(config_create(&c), 0);
	err[0] = 0;
}

static void teardown(void)
{
	config_destroy(c);
}

static void set(const char *k, const char *v)
{
	char e[512];

	cr_assert_eq(config_set(c, k, v, "test", e, sizeof(e)), 0, "%s=%s: %s", k, v, e);
}

/* Refused, and the message names `key`. */
static void refused(const char *key)
{
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), -EINVAL, "accepted; expected a refusal naming %s",
		     key);
	cr_assert(strstr(err, key), "'%s' does not name %s", err, key);
}

TestSuite(node_role, .init = setup, .fini = teardown);

Test(node_role, defaults_are_one_combined_node)
{
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert(r.broker && r.controller);
	cr_assert_eq(r.nvoters, 0);
	cr_assert_str_eq(r.listen_host, "127.0.0.1");
	cr_assert_eq(r.listen_port, 9092);
	cr_assert_eq(r.adv_port, 9092);
	cr_assert_eq(r.ctl_port, 0);
	cr_assert_str_eq(r.rack, "");
}

Test(node_role, a_quorum_of_one_with_its_controller_listener)
{
	set("node.id", "4");
	set("controller.quorum.voters", "4@127.0.0.1:19093");
	set("listeners", "CONTROLLER://127.0.0.1:19093, PLAINTEXT://127.0.0.1:19092");
	set("broker.rack", "rack-a");
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.nvoters, 1);
	cr_assert_eq(r.voters[0].id, 4);
	cr_assert_eq(r.voters[0].port, 19093);
	/* the client listener is the first that is not the controller's */
	cr_assert_eq(r.listen_port, 19092);
	cr_assert_eq(r.adv_port, 19092);
	cr_assert_eq(r.ctl_port, 19093);
	cr_assert_str_eq(r.rack, "rack-a");
}

Test(node_role, node_id_zero_is_a_voter_id)
{
	set("node.id", "0");
	set("controller.quorum.voters", "0@localhost:9093");
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.voters[0].id, 0);
}

Test(node_role, a_node_of_one_role_needs_the_voters_and_a_cluster_id)
{
	/* alone (no voters), a node of one role has nobody to work with */
	set("process.roles", "broker");
	refused("controller.quorum.voters");
	set("process.roles", "controller");
	refused("controller.quorum.voters");
	set("process.roles", "broker,broker");
	refused("process.roles");
	cr_assert(strstr(err, "twice"), "%s", err);
	set("process.roles", "broker,zookeeper");
	refused("process.roles");
	set("process.roles", "controller, broker");
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
	/* one voter is enough for a cluster of dedicated roles, which always
	 * needs its cluster.id */
	set("process.roles", "controller");
	set("controller.quorum.voters", "1@127.0.0.1:9093");
	set("listeners", "CONTROLLER://127.0.0.1:9093");
	refused("cluster.id");
	set("cluster.id", "MkU3OEVBNTcwNTJENDM2Qk");
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
}

Test(node_role, a_controller_only_node_listens_on_its_controller_listener_only)
{
	set("process.roles", "controller");
	set("cluster.id", "MkU3OEVBNTcwNTJENDM2Qk");
	set("controller.quorum.voters", "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095");
	set("listeners", "CONTROLLER://127.0.0.1:9093");
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert(r.controller && !r.broker);
	cr_assert_eq(r.ctl_port, 9093);
	cr_assert_eq(r.listen_port, 0, "no Kafka listener");
	cr_assert_eq(r.adv_port, 0);
	/* Kafka: listeners must only contain controller listeners */
	set("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093");
	refused("listeners");
	cr_assert(strstr(err, "9092"), "%s", err);
	/* ... and one it needs, on its voter port */
	set("listeners", "CONTROLLER://127.0.0.1:9096");
	refused("controller.quorum.voters");
	set("listeners", "QUORUM://127.0.0.1:9093");
	refused("listeners");
	set("listeners", "CONTROLLER://127.0.0.1:9093");
	set("advertised.listeners", "PLAINTEXT://10.0.0.1:9092");
	refused("advertised.listeners");
	set("advertised.listeners", "");
	/* a controller is a voter */
	set("node.id", "4");
	refused("node.id");
}

Test(node_role, a_broker_only_node_is_not_a_voter)
{
	set("process.roles", "broker");
	set("cluster.id", "MkU3OEVBNTcwNTJENDM2Qk");
	set("controller.quorum.voters", "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095");
	set("node.id", "4");
	set("listeners", "PLAINTEXT://127.0.0.1:9092");
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert(r.broker && !r.controller);
	cr_assert_eq(r.listen_port, 9092);
	cr_assert_eq(r.adv_port, 9092);
	cr_assert_eq(r.ctl_port, 0);
	cr_assert_eq(r.nvoters, 3);
	/* among the voters: refused, naming the key */
	set("node.id", "2");
	refused("controller.quorum.voters");
	cr_assert(strstr(err, "node.id=2"), "%s", err);
	set("node.id", "4");
	/* no controller listener of its own (Kafka refuses one too) */
	set("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9096");
	refused("listeners");
	/* and one for clients */
	set("listeners", "CONTROLLER://127.0.0.1:9096");
	refused("listeners");
	/* a single voter is enough */
	set("listeners", "PLAINTEXT://127.0.0.1:9092");
	set("controller.quorum.voters", "1@127.0.0.1:9093");
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
}

Test(node_role, a_cluster_needs_its_controller_listener_and_a_cluster_id)
{
	set("controller.quorum.voters", "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095");
	refused("cluster.id");
	cr_assert(strstr(err, "3 voters"), "%s", err);
	set("cluster.id", "MkU3OEVBNTcwNTJENDM2Qk");
	refused("listeners");
	cr_assert(strstr(err, "9093"), "%s", err);
	set("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9094");
	refused("controller.quorum.voters");
	set("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093");
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.nvoters, 3);
	cr_assert_eq(r.ctl_port, 9093);
	cr_assert_eq(r.listen_port, 9092);
	/* names are taken (resolved when the quorum opens) */
	set("controller.quorum.voters", "1@localhost:9093,2@localhost:9094,3@localhost:9095");
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
	set("node.id", "4");
	refused("node.id");
}

Test(node_role, a_node_outside_the_voters_is_refused)
{
	set("node.id", "7");
	set("controller.quorum.voters", "1@127.0.0.1:9093");
	refused("node.id");
}

Test(node_role, bad_voter_entries_are_refused)
{
	const char *bad[] = { "x@127.0.0.1:9093", "1127.0.0.1:9093", "@127.0.0.1:9093", "1@127.0.0.1",
			      "1@127.0.0.1:0", "-1@127.0.0.1:9093", "1@127.0.0.1:9093,1@127.0.0.1:9094",
			      "1@127.0.0.1:9093,2@127.0.0.1:9093" };

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		set("controller.quorum.voters", bad[i]);
		refused("controller.quorum.voters");
	}
}

Test(node_role, listeners_the_controller_takes_are_not_the_clients)
{
	set("listeners", "CONTROLLER://127.0.0.1:9093");
	refused("listeners");
	set("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9092");
	refused("listeners");
	/* a voter's port is its controller listener's */
	set("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9095");
	set("controller.quorum.voters", "1@127.0.0.1:9093");
	refused("controller.quorum.voters");
	/* other names for the controller listener */
	set("controller.listener.names", "QUORUM");
	set("listeners", "QUORUM://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092");
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.listen_port, 9092);
	cr_assert_eq(r.ctl_port, 9093);
	/* advertised listeners: the controller's is never given to clients */
	set("advertised.listeners", "QUORUM://10.0.0.1:9093");
	refused("advertised.listeners");
	set("advertised.listeners", "QUORUM://10.0.0.1:9093,PLAINTEXT://10.0.0.1:9092");
	cr_assert_eq(node_role_check(c, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(r.adv_host, "10.0.0.1");
	cr_assert_eq(r.adv_port, 9092);
}
