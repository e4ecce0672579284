#!/usr/bin/python3
"""Kafka's KRaft settings against a real sluiced: process.roles,
controller.quorum.voters, controller.listener.names and broker.rack.

Every Sluice node is a combined broker and controller. A config Sluice
cannot honour (a broker-only or a controller-only node, three voters
without the cluster.id every node of a cluster must share) must stop the
start with exit 2 and a line naming the key; a one-node KRaft config (its
own id as the only voter, a CONTROLLER listener) must start, serve clients
on the client listener only, and give its rack in Metadata. Clusters of
several nodes: test_cluster_quorum.py."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICED, broker, free_port, main, temp_dir, test  # noqa: E402


def start_fails(props, key):
    """sluiced with the server.properties text `props` exits 2 naming key,
    before it listens or writes a data directory."""
    d = temp_dir()
    try:
        path = os.path.join(d, "server.properties")
        data = os.path.join(d, "data")
        with open(path, "w") as f:
            f.write(props + "\nlog.dirs=%s\n" % data)
        p = subprocess.run([SLUICED, "--config", path, "--shards", "1"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode()
        assert p.returncode == 2, (props, p.returncode, err)
        assert key in err, ("the refusal does not name %s" % key, err)
        assert b"listening on" not in p.stdout, p.stdout
        assert not os.path.exists(data), "a refused start wrote %s" % os.listdir(data)
        return err
    finally:
        subprocess.run(["rm", "-rf", d])


@test
def a_three_node_kraft_config_without_a_cluster_id_is_refused():
    c, p = free_port(), free_port()
    err = start_fails("process.roles=broker,controller\nnode.id=1\n"
                      "controller.quorum.voters=1@127.0.0.1:%d,2@127.0.0.1:%d,3@127.0.0.1:%d\n"
                      "listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d\n"
                      "controller.listener.names=CONTROLLER\n" % (c, free_port(), free_port(), p, c),
                      "cluster.id")
    assert "3 voters" in err, err


@test
def broker_only_and_controller_only_nodes_are_refused():
    start_fails("process.roles=broker\n", "process.roles")
    start_fails("process.roles=controller\n", "process.roles")
    start_fails("process.roles=broker,zookeeper\n", "process.roles")


@test
def a_node_that_is_not_a_voter_is_refused():
    c = free_port()
    start_fails("node.id=2\ncontroller.quorum.voters=1@127.0.0.1:%d\n"
                "listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d\n" % (c, free_port(), c), "node.id")


@test
def listener_contradictions_are_refused():
    c = free_port()
    # only a controller listener: nothing for clients
    start_fails("listeners=CONTROLLER://127.0.0.1:%d\n" % c, "listeners")
    # the voter's port is not its controller listener's
    start_fails("controller.quorum.voters=1@127.0.0.1:%d\n"
                "listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d\n" % (c, free_port(), free_port()),
                "controller.quorum.voters")
    start_fails("controller.quorum.voters=one@127.0.0.1:%d\n" % c, "controller.quorum.voters")


@test
def a_one_node_kraft_config_serves_clients_on_the_client_listener_with_its_rack():
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient

    c, p = free_port(), free_port()
    settings = {"process.roles": "broker,controller", "node.id": "1",
                "controller.quorum.voters": "1@127.0.0.1:%d" % c,
                # the controller listener first: clients still get the other one
                "listeners": "CONTROLLER://127.0.0.1:%d,PLAINTEXT://127.0.0.1:%d" % (c, p),
                "controller.listener.names": "CONTROLLER", "broker.rack": "rack-7"}
    with broker(shards=1, port=p, settings=settings) as b:
        assert b.port == p
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)
        try:
            nodes = admin.describe_cluster()["brokers"]
        finally:
            admin.close()
        assert len(nodes) == 1, nodes
        assert nodes[0]["port"] == p, ("Metadata advertises the client listener", nodes)
        assert nodes[0]["rack"] == "rack-7", nodes
        prod = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all")
        for i in range(10):
            prod.send("kraft-one", b"v%d" % i).get(timeout=30)
        prod.close()
        cons = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
        cons.assign([TopicPartition("kraft-one", 0)])
        got = []
        for m in cons:
            got.append(m.value)
            if len(got) == 10:
                break
        cons.close()
        assert got == [b"v%d" % i for i in range(10)], got


if __name__ == "__main__":
    main("cluster_config")
