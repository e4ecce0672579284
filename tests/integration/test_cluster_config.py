#!/usr/bin/python3
"""Kafka's KRaft settings against a real sluiced: process.roles,
controller.quorum.voters, controller.listener.names and broker.rack.

A node is a combined broker and controller (the default), a controller
only or a broker only. A config Sluice cannot honour (a node of one role
without voters, a broker-only node among the voters, a controller-only
node with a client listener, three voters without the cluster.id every
node of a cluster must share) must stop the start with exit 2 and a line
naming the key; a one-node KRaft config (its own id as the only voter, a
CONTROLLER listener) must start, serve clients on the client listener
only, and give its rack in Metadata; one controller-only and two
broker-only nodes serve a replicated topic, and only the brokers are named
to clients. Clusters of combined nodes: test_cluster_quorum.py."""

import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICECTL, SLUICED, broker, free_port, main, temp_dir, test  # noqa: E402
from cluster import Cluster, until  # noqa: E402


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
def nodes_of_one_role_are_refused_where_kafka_refuses_them():
    cid = "cluster.id=MkU3OEVBNTcwNTJENDM2Qk\ncontroller.listener.names=CONTROLLER\n"
    # alone: nothing to be a broker or a controller for
    start_fails("process.roles=broker\n", "controller.quorum.voters")
    start_fails("process.roles=controller\n", "controller.quorum.voters")
    start_fails("process.roles=broker,zookeeper\n", "process.roles")
    c = free_port()
    # a broker only is not a voter
    start_fails(cid + "process.roles=broker\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:%d\n"
                "listeners=PLAINTEXT://127.0.0.1:%d\n" % (c, free_port()), "controller.quorum.voters")
    # a controller only serves no client (Kafka: listeners only controller listeners)
    start_fails(cid + "process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:%d\n"
                "listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d\n" % (c, free_port(), c),
                "listeners")
    # and is a voter
    start_fails(cid + "process.roles=controller\nnode.id=2\ncontroller.quorum.voters=1@127.0.0.1:%d\n"
                "listeners=CONTROLLER://127.0.0.1:%d\n" % (c, c), "node.id")


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


@test
def one_controller_and_two_brokers_serve_a_replicated_topic_and_clients_see_only_the_brokers():
    import json
    import urllib.request
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    # a group's first join waits no rebalance delay
    with Cluster(1, brokers=2, sets=["group.initial.rebalance.delay.ms=0"]) as c:
        assert c.first == 2 and len(c.addrs) == 2, c.bootstrap
        # the controller serves no client, but its health says ready
        props = open(os.path.join(c.dir, "n1", "server.properties")).read()
        assert "PLAINTEXT" not in props, props
        admin_addr = [l.split("=", 1)[1] for l in props.splitlines() if l.startswith("admin.listen=")][0]
        health = json.loads(urllib.request.urlopen("http://%s/v1/health" % admin_addr, timeout=30).read())
        assert health["status"] == "ready", health
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=20000)
        try:
            desc = admin.describe_cluster()
            assert sorted(b["node_id"] for b in desc["brokers"]) == [2, 3], desc
            assert desc["controller_id"] in (2, 3), ("clients are named a broker they can reach", desc)
            admin.create_topics([NewTopic("roles", 2, 2)])
            topics = until("the topic led", lambda: [t for t in admin.describe_topics(["roles"])
                                                      if all(p["leader"] >= 0 for p in t["partitions"])])
            for p in topics[0]["partitions"]:
                assert sorted(p["replicas"]) == [2, 3], topics
        finally:
            admin.close()
        prod = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all")
        for i in range(20):
            prod.send("roles", b"r%d" % i).get(timeout=30)
        prod.close()
        # a group: its coordinator (FindCoordinator) is one of the brokers
        cons = KafkaConsumer("roles", bootstrap_servers=c.bootstrap, group_id="roles-g",
                             auto_offset_reset="earliest", consumer_timeout_ms=20000)
        got = []
        for m in cons:
            got.append(m.value)
            if len(got) == 20:
                break
        cons.close()
        assert sorted(got) == sorted(b"r%d" % i for i in range(20)), got
        # DescribeQuorum on a broker: the active controller's answer (Kafka's
        # brokers forward it there): the controller the voter, both brokers
        # observers
        out = subprocess.run([SLUICECTL, "-b", c.addr(3), "--format", "json",
                              "cluster", "info"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        assert out.returncode == 0, out.stderr
        q = json.loads(out.stdout)["quorum"]
        assert [v["node_id"] for v in q["voters"]] == [1], q
        assert sorted(o["node_id"] for o in q["observers"]) == [2, 3], q
        # the end: the brokers' controlled shutdown, with the controller
        # stopping at once, would wait its 5 s for nothing (not tested here)
        import signal
        for pid in (c.pid(2), c.pid(3)):
            os.kill(pid, signal.SIGKILL)


@test
def a_broker_that_cannot_reach_its_voters_stops_on_sigterm_before_it_is_ready():
    """A broker-only node whose voter nobody answers for never becomes
    ready; SIGTERM (an operator giving up, systemd's stop) still stops it at
    once, exit 0, saying so (it waited on until the voters answered, the
    signal held back, for as long as they did not)."""
    d = temp_dir()
    try:
        path = os.path.join(d, "server.properties")
        with open(path, "w") as f:
            f.write("cluster.id=MkU3OEVBNTcwNTJENDM2Qk\ncontroller.listener.names=CONTROLLER\n"
                    "process.roles=broker\nnode.id=4\ncontroller.quorum.voters=1@127.0.0.1:%d\n"
                    "listeners=PLAINTEXT://127.0.0.1:%d\nadmin.listen=\nlog.dirs=%s\n"
                    % (free_port(), free_port(), os.path.join(d, "data")))
        p = subprocess.Popen([SLUICED, "--config", path, "--shards", "1"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # it runs (the voter is looked for, never found): not ready
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                assert p.poll() is None, "sluiced exited %s: %s" % (p.returncode, p.stderr.read().decode())
                time.sleep(0.1)
            p.send_signal(signal.SIGTERM)
            try:
                out, err = p.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                raise AssertionError("sluiced ignored SIGTERM before it was ready (still running 20 s later)")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 0, (p.returncode, err.decode()[-2000:])
        assert b"listening on" not in out, out
        assert b"before the node was ready: stopping" in err, err.decode()[-2000:]
    finally:
        subprocess.run(["rm", "-rf", d])


def start_with_a_port_taken(knob, what):
    """scripts/cluster start 3 with the test knob holding one port during
    the first try; the second try's nodes must be one cluster."""
    from cluster import CLUSTER
    d = os.path.join(temp_dir(), "cluster")
    env = dict(os.environ, SLUICED=SLUICED, SLUICE_TEST_CLUSTER_TAKE_PORT=knob)
    try:
        p = subprocess.run([CLUSTER, "start", "3", "--dir", d], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=180, env=env)
        err = p.stderr.decode()
        assert p.returncode == 0, ("the start failed with the %s taken" % what, p.returncode, err)
        assert "new ports (try 2)" in err, ("the first try did not lose its port: the knob took nothing", err)
        props = open(os.path.join(d, "n3", "server.properties")).read()
        assert "admin.listen=127.0.0.1:" in props, props
        boot = p.stdout.decode().strip()
        assert len(boot.split(",")) == 3, boot
        # the nodes of the second try are one cluster: a replicated topic
        r = subprocess.run([SLUICECTL, "-b", boot, "topic", "create",
                            "ports", "--partitions", "1", "--replication-factor", "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        assert r.returncode == 0, r.stdout.decode()
    finally:
        subprocess.run([CLUSTER, "stop", "--dir", d], stdin=subprocess.DEVNULL, timeout=120, env=env)
        subprocess.run(["rm", "-rf", os.path.dirname(d)])


@test
def a_port_taken_between_its_pick_and_the_bind_gets_the_cluster_new_ports():
    """scripts/cluster picks free ports and releases them: a process
    elsewhere (a test in another lane of make test) can take one before the
    node binds it. The node exits 2 naming the port, and the script starts
    every node again on new ports. The test knob makes a process hold the
    last node's admin port during the first try; without the retry the
    start fails (the clean-clone run that failed this way: node 3 of
    test_cluster_quorum could not bind its admin port)."""
    start_with_a_port_taken("1", "admin port")


@test
def a_controller_port_taken_is_named_and_the_cluster_gets_new_ports():
    """The same for the controller port (the quorum's listen in
    raft_start): libraft says only "I/O error" there, and the node called
    its new, empty metadata log damaged, so the script did not retry (the
    clean-clone run that failed this way: node 3 of test_features). The
    node must exit 2 saying the port is in use, and the script retry."""
    start_with_a_port_taken("quorum", "controller port")
    # and the node's own words, with nothing retrying: one node whose
    # controller port another process holds
    d = temp_dir()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        with open(os.path.join(d, "server.properties"), "w") as f:
            f.write("node.id=1\nprocess.roles=broker,controller\n"
                    "controller.quorum.voters=1@127.0.0.1:%d\ncontroller.listener.names=CONTROLLER\n"
                    "log.dirs=%s/data\nlisteners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d\n"
                    % (port, d, port))
        p = subprocess.run([SLUICED, "--config", os.path.join(d, "server.properties")],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode()
        assert p.returncode == 2, (p.returncode, err)
        assert "127.0.0.1:%d" % port in err and "already in use" in err, err
        assert "damaged" not in err, err
    finally:
        s.close()
        subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    main("cluster_config")
