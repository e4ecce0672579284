#!/usr/bin/python3
"""Several sluiced processes form one cluster (scripts/cluster): every node
a broker and a voter of the metadata quorum, raft and the controller
channel on each node's controller port; a node that does not lead the
quorum forwards its metadata records and its broker heartbeats to the one
that does (docs/cluster.md, "Several nodes").

- Three nodes: DescribeQuorum on each shows the three voters and one
  leader; Metadata on each lists the three brokers, and Metadata and
  DescribeCluster on each name the quorum's leader the controller (also
  after it changed); sluicectl on any node with no --admin finds each
  broker's admin endpoint (topic describe's log ends and shards, cluster
  info's shards and health); a topic created through
  one node is on every node with the same replicas, topics created
  through each node are listed once on every node, one deleted through a
  node leaves every node; producer id blocks
  reserved by different nodes never overlap.
- CreatePartitions through a node that does not lead the quorum: every
  node lists the new partitions led and in sync, and a record produced
  with acks=all to a new partition another node leads is acknowledged and
  copied to the three (the nodes that did not propose opened them);
  min.insync.replicas=4 set through that node: DescribeConfigs on every
  node says 4, another node's leader answers NOT_ENOUGH_REPLICAS; a
  cluster-wide log.retention.ms set through it: every node's broker and
  topic say it (docs/cluster.md, "Topics and configs other nodes
  changed").
- SIGKILL of the quorum's leader: the other two elect a new one, a topic
  created through a survivor afterwards is seen by both, and the killed
  node, restarted, catches up (sees it too); every node serves the same
  leader epochs (the new controller's elections).
- A node restarted with another cluster.id, or with a node.id that is not
  among the voters, exits 2 naming the key.

The data path between nodes (followers fetching) is checked only for the
grown topic's new partition.

Run: /usr/bin/python3 tests/integration/test_cluster_quorum.py [test ...]
"""

import os
import re
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICECTL, SLUICED, main, test  # noqa: E402
from cluster import Cluster, log_batches, partitions, until  # noqa: E402
from kraw import describe_quorum  # noqa: E402

from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic  # noqa: E402

def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


def request(port, body):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(struct.pack(">i", len(body)) + body)
        n = struct.unpack(">i", recv_exact(s, 4))[0]
        return recv_exact(s, n)
    finally:
        s.close()


def init_producer_id(port):
    """InitProducerId v1 (no transactional id): the producer id."""
    body = struct.pack(">hhih", 22, 1, 7, 2) + b"cq" + struct.pack(">hi", -1, 60000)
    corr, throttle, err, pid, epoch = struct.unpack(">iihqh", request(port, body)[:20])
    assert corr == 7 and err == 0, (corr, err)
    return pid




def metadata(port):
    a = AdminClient({"bootstrap.servers": "127.0.0.1:%d" % port})
    return a.list_topics(timeout=20)


def replicas(port, topic):
    t = metadata(port).topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return {p: sorted(m.replicas) for p, m in t.partitions.items()}




def topic_names(port):
    """Every topic Metadata lists, as listed (a topic served twice shows twice)."""
    import json
    p = subprocess.run([SLUICECTL, "-b", "127.0.0.1:%d" % port, "--format", "json", "topic", "list"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    return sorted(t["name"] for t in json.loads(p.stdout)["topics"])


def create_topic(port, name, partitions, rf):
    a = AdminClient({"bootstrap.servers": "127.0.0.1:%d" % port})
    a.create_topics([NewTopic(name, partitions, rf)], operation_timeout=30)[name].result(60)


def controllers(c, nodes):
    """{node: (Metadata's ControllerId, DescribeCluster v0's ControllerId)}."""
    from kraw import Conn, read_compact_str
    out = {}
    for n in nodes:
        with Conn("127.0.0.1:%d" % c.port(n)) as k:
            r = k.request_flex(60, 0, b"\x00\x00")   # DescribeCluster v0
            r.i32()
            assert r.i16() == 0
            read_compact_str(r)
            read_compact_str(r)
            out[n] = (metadata(c.port(n)).controller_id, r.i32())
    return out


def agreed_leader(c, nodes):
    """Every node of nodes names the same leader, one of nodes, and 3 voters."""
    seen = set()
    for n in nodes:
        leader, _epoch, voters = describe_quorum(c.port(n))
        assert voters == [1, 2, 3], voters
        seen.add(leader)
    if len(seen) == 1 and next(iter(seen)) in nodes:
        return next(iter(seen))
    return None


@test
def three_nodes_serve_one_metadata_and_survive_the_loss_of_the_leader():
    # a session far longer than the wait below: the killed active
    # controller must be fenced by its grace (docs/cluster.md), not by it
    with Cluster(3, sets=["broker.session.timeout.ms=60000"]) as c:
        leader = until("one leader agreed on by the three", lambda: agreed_leader(c, [1, 2, 3]))
        for n in (1, 2, 3):
            md = metadata(c.port(n))
            assert sorted(md.brokers) == [1, 2, 3], (n, md.brokers)
        # the ControllerId every node answers is the active controller's
        # (the quorum's leader), not its own
        until("every node names %d the controller" % leader,
              lambda: controllers(c, [1, 2, 3]) == {n: (leader, leader) for n in (1, 2, 3)})

        # a topic created through node 1 is on every node, same replicas
        create_topic(c.port(1), "cq-a", 6, 3)
        want = until("cq-a on node 1", lambda: replicas(c.port(1), "cq-a"))
        assert len(want) == 6 and all(len(r) == 3 for r in want.values()), want
        for n in (2, 3):
            until("cq-a on node %d as on node 1" % n, lambda: replicas(c.port(n), "cq-a") == want)

        # sluicectl on any node with no --admin: each broker's own endpoint
        # (the admin.listen it reports; scripts/cluster gives each a free
        # port, never 9644), so every partition's log end and shard and
        # every broker's shards and health are known, and no note
        import json
        env = {k: v for k, v in os.environ.items() if k != "SLUICE_ADMIN"}
        for n in (1, 2, 3):
            p = subprocess.run([SLUICECTL, "-b", c.addr(n), "--format", "json", "topic", "describe", "cq-a"],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env)
            assert p.returncode == 0 and p.stderr == "", (n, p.returncode, p.stderr)
            ps = json.loads(p.stdout)["topics"][0]["partitions"]
            assert len(ps) == 6 and all(x["log_end_offset"] == 0 and x["shard"] == 0 for x in ps), (n, ps)
            assert {x["leader"] for x in ps} == {1, 2, 3}, ps   # placement spreads the leaders
            p = subprocess.run([SLUICECTL, "-b", c.addr(n), "--format", "json", "cluster", "info"],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env)
            assert p.returncode == 0 and p.stderr == "", (n, p.returncode, p.stderr)
            brokers = json.loads(p.stdout)["brokers"]
            assert [(b["node_id"], b["shards"], b["health"]) for b in sorted(brokers, key=lambda b: b["node_id"])] \
                == [(1, 1, "ready"), (2, 1, "ready"), (3, 1, "ready")], brokers

        # a topic created through each node: listed once on every node
        for n in (1, 2, 3):
            create_topic(c.port(n), "cq-from-%d" % n, 2, 3)
        mine = ["cq-a", "cq-from-1", "cq-from-2", "cq-from-3"]
        for n in (1, 2, 3):
            until("the four topics listed once each on node %d" % n,
                  lambda: [t for t in topic_names(c.port(n)) if t.startswith("cq-")] == mine)
        # a topic deleted through one node leaves every node
        a = AdminClient({"bootstrap.servers": "127.0.0.1:%d" % c.port(2)})
        a.delete_topics(["cq-from-2"], operation_timeout=30)["cq-from-2"].result(60)
        mine.remove("cq-from-2")
        for n in (1, 2, 3):
            until("cq-from-2 gone from node %d" % n,
                  lambda: [t for t in topic_names(c.port(n)) if t.startswith("cq-")] == mine)
        # CreatePartitions and a topic's config changed through one node:
        # every node serves them (the others follow its records)
        grown_and_reconfigured_through_one_node(c, [n for n in (1, 2, 3) if n != leader][-1])

        # a node that does not lead forwarded them on the channel it holds to the leader
        other = [n for n in (1, 2, 3) if n != leader][0]
        assert c.metric(other, 'sluice_controller_channel_requests_total{kind="forwarded"}') >= 1
        assert c.metric(other, "sluice_controller_channel_connected") == 1
        assert c.metric(leader, 'sluice_controller_channel_requests_total{kind="served"}') >= 1

        # producer ids: each node hands out ids from blocks of its own
        pids = {n: [init_producer_id(c.port(n)) for _ in range(5)] for n in (1, 2, 3)}
        allp = [p for v in pids.values() for p in v]
        assert len(set(allp)) == len(allp), pids
        spans = sorted((min(v), max(v)) for v in pids.values())
        for (lo1, hi1), (lo2, hi2) in zip(spans, spans[1:]):
            assert hi1 < lo2, ("producer id blocks overlap", pids)

        # the leader dies; the two others elect one of themselves
        c.run("kill", str(leader))
        rest = [n for n in (1, 2, 3) if n != leader]
        new = until("a new leader among %s" % rest, lambda: agreed_leader(c, rest))
        assert new != leader
        until("cq-b created through node %d" % rest[0],
              lambda: create_topic(c.port(rest[0]), "cq-b", 2, 1) or True)
        for n in rest:
            until("cq-b on node %d" % n, lambda: replicas(c.port(n), "cq-b"))
        print("    leader %d killed, node %d leads now" % (leader, new))
        # the broker of the controller it replaced gets a grace of two
        # heartbeat intervals and a second, not a new 60 s session
        until("the killed node %d fenced (gone from Metadata) well within its 60 s session" % leader,
              lambda: leader not in metadata(c.port(new)).brokers, timeout=30)
        assert "fenced unless it heartbeats within 5000 ms" in c.log(new), c.log(new)[-2000:]
        until("the survivors name %d the controller" % new,
              lambda: controllers(c, rest) == {n: (new, new) for n in rest})

        # the killed node comes back and catches up
        c.run("restart", str(leader))
        until("cq-b on the restarted node %d" % leader, lambda: replicas(c.port(leader), "cq-b"))
        until("the restarted node agrees on the leader", lambda: agreed_leader(c, [1, 2, 3]))
        assert replicas(c.port(leader), "cq-a") == want
        until("3 brokers on the restarted node", lambda: sorted(metadata(c.port(leader)).brokers) == [1, 2, 3])
        # the leader epochs the new controller's elections gave cq-a's
        # partitions the killed node led: every node serves them, the
        # survivor that did not propose them too (no restart)
        until("cq-a's leader epochs the same on every node, some moved",
              lambda: (lambda e: len(set(e)) == 1 and max(x[1][1] for x in e[0]) > 0)(
                  [tuple(sorted(leader_epochs(c.port(n), "cq-a").items())) for n in (1, 2, 3)]))


def leader_epochs(port, topic):
    """{partition: (error, leader epoch)} from Metadata v7."""
    from kraw import Conn
    from test_leader_epochs import metadata_epochs
    with Conn("127.0.0.1:%d" % port) as k:
        return metadata_epochs(k, topic)


def describe_config(port, rtype, name, key):
    a = AdminClient({"bootstrap.servers": "127.0.0.1:%d" % port})
    r = ConfigResource(rtype, name)
    return a.describe_configs([r])[r].result(30)[key].value


def incremental_set(port, rtype, name, key, value):
    """IncrementalAlterConfigs v0 (SET) over raw frames: its error code."""
    from kraw import Conn, W
    with Conn("127.0.0.1:%d" % port) as k:
        w = W().array([0], lambda w, _: w.i8(rtype).str(name).array(
            [0], lambda w, _: w.str(key).i8(0).str(value))).i8(0)
        r = k.request(44, 0, w)
        r.i32()
        res = r.array(lambda r: (r.i16(), r.str(), r.i8(), r.str()))
        return res[0][0]


def grown_and_reconfigured_through_one_node(c, via):
    """cq-grow (3 partitions, 3 replicas) grows to 6 through node via:
    every node lists the 6 led and in sync, and a record produced with
    acks=all to a new partition another node leads is acknowledged and
    copied to the three (each node opened the new partitions it hosts).
    min.insync.replicas=4 set through node via: DescribeConfigs on every
    node says 4, and another node's leader refuses acks=all
    (NOT_ENOUGH_REPLICAS: 3 in sync)."""
    create_topic(c.port(via), "cq-grow", 3, 3)
    a = AdminClient({"bootstrap.servers": c.addr(via)})
    a.create_partitions([NewPartitions("cq-grow", 6)], operation_timeout=30)["cq-grow"].result(60)
    for n in (1, 2, 3):
        until("cq-grow's 6 partitions led and in sync on node %d" % n,
              lambda: (lambda m: m and sorted(m) == list(range(6)) and
                       all(v[0] in (1, 2, 3) and len(v[2]) == 3 for v in m.values()))(
                  partitions(c.addr(n), "cq-grow")))
    parts = partitions(c.addr(via), "cq-grow")
    new = [p for p in range(3, 6) if parts[p][0] != via]
    assert new, parts   # placement spreads the new partitions' leaders
    part = new[0]

    def produce(value):
        got = []
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "retries": 0,
                      "message.timeout.ms": 10000})
        p.produce("cq-grow", value, partition=part, on_delivery=lambda err, msg: got.append(err))
        p.flush(20)
        assert len(got) == 1, got
        return got[0]

    err = produce(b"grown")
    assert err is None, (part, parts[part], err)
    for n in (1, 2, 3):
        until("the record copied to node %d's cq-grow-%d" % (n, part),
              lambda: len(log_batches(os.path.join(c.data_dir(n), "cq-grow-%d" % part))) == 1, timeout=20)

    assert incremental_set(c.port(via), 2, "cq-grow", "min.insync.replicas", "4") == 0
    for n in (1, 2, 3):
        until("min.insync.replicas=4 on node %d" % n,
              lambda: describe_config(c.port(n), ConfigResource.Type.TOPIC, "cq-grow",
                                      "min.insync.replicas") == "4", timeout=20)
    err = produce(b"refused")
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, (part, parts[part], err)

    # a cluster-wide broker default: every node's broker and the topics
    # without an override of their own follow it
    assert incremental_set(c.port(via), 4, "", "log.retention.ms", "1234567") == 0
    for n in (1, 2, 3):
        until("log.retention.ms=1234567 on node %d" % n,
              lambda: describe_config(c.port(n), ConfigResource.Type.BROKER, str(n), "log.retention.ms")
              == "1234567" and describe_config(c.port(n), ConfigResource.Type.TOPIC, "cq-grow", "retention.ms")
              == "1234567", timeout=20)


def java_partition(key, n):
    h = 0
    for ch in key.encode():
        h = (31 * h + ch) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % n


@test
def every_node_names_the_same_coordinator_the_leader_of_the_keys_internal_partition():
    from kraw import Conn
    from confluent_kafka import Consumer, Producer, TopicPartition
    with Cluster(3) as c:
        # a cluster's internal topics are made by the active controller once
        # enough brokers are registered: until then no coordinator is named
        internal = ("__consumer_offsets", "__transaction_state")

        def led_everywhere():
            mds = [metadata(c.port(n)) for n in (1, 2, 3)]
            return all(t in m.topics and all(p.leader > 0 for p in m.topics[t].partitions.values())
                       for m in mds for t in internal) and mds[0]
        md = until("the internal topics led, as every node sees them", led_everywhere)
        for topic, kt in (("__consumer_offsets", 0), ("__transaction_state", 1)):
            leaders = {p: m.leader for p, m in md.topics[topic].partitions.items()}
            for key in ("g1", "orders-consumers", "txn-7", "x" * 40):
                want = leaders[java_partition(key, len(leaders))]
                for n in (1, 2, 3):
                    with Conn("127.0.0.1:%d" % c.port(n)) as k:
                        r = k.find_coordinator(key, ver=1, key_type=kt)
                    assert r.error == 0 and r.node == want, (topic, key, n, r, want)
                    assert r.port == c.port(want), (r, c.ports)
        # a consumer group through every node: its commits read back through another
        create_topic(c.port(2), "grp", 2, 3)
        p = Producer({"bootstrap.servers": "127.0.0.1:%d" % c.port(3), "acks": "all"})
        for i in range(100):
            p.produce("grp", value=b"%d" % i, partition=i % 2)
        assert p.flush(30) == 0
        boot = ",".join("127.0.0.1:%d" % x for x in c.ports)
        cons = Consumer({"bootstrap.servers": boot, "group.id": "cq-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
        cons.subscribe(["grp"])
        got = 0
        end = time.monotonic() + 60
        while got < 100 and time.monotonic() < end:
            for m in cons.consume(100, 1.0):
                if not m.error():
                    got += 1
        assert got == 100, got
        cons.commit(asynchronous=False)
        cons.close()
        other = Consumer({"bootstrap.servers": "127.0.0.1:%d" % c.port(1), "group.id": "cq-group"})
        committed = other.committed([TopicPartition("grp", 0), TopicPartition("grp", 1)], timeout=30)
        other.close()
        assert sorted(tp.offset for tp in committed) == [50, 50], committed


def start_exit_code(props_path):
    p = subprocess.run([SLUICED, "--config", props_path, "--shards", "1"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stderr.decode()


@test
def a_node_of_another_cluster_id_or_outside_the_voters_exits_2_naming_the_key():
    with Cluster(3) as c:
        props = os.path.join(c.dir, "n3", "server.properties")
        c.kill(3)
        text = open(props).read()
        bad = os.path.join(c.dir, "bad.properties")

        with open(bad, "w") as f:
            f.write(re.sub(r"cluster.id=.*", "cluster.id=AAAAAAAAAAAAAAAAAAAAAA", text))
        rc, err = start_exit_code(bad)
        assert rc == 2 and "cluster.id" in err, (rc, err)

        with open(bad, "w") as f:
            f.write(re.sub(r"node.id=.*", "node.id=7", text))
        rc, err = start_exit_code(bad)
        assert rc == 2 and "node.id" in err, (rc, err)

        with open(bad, "w") as f:
            f.write(re.sub(r"cluster.id=.*\n", "", text))
        rc, err = start_exit_code(bad)
        assert rc == 2 and "cluster.id" in err, (rc, err)

        # the node itself is still fine
        c.run("restart", "3")
        until("3 brokers on node 3", lambda: sorted(metadata(c.port(3)).brokers) == [1, 2, 3])


if __name__ == "__main__":
    main("test_cluster_quorum")
