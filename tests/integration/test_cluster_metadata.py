#!/usr/bin/python3
"""How nodes follow the metadata log beyond record by record, against real
sluiced processes (scripts/cluster) and real Kafka clients, on one cluster:
node 1 a combined broker and voter, the quorum's only voter, and nodes 2
and 3 brokers only (scripts/cluster start 1 --brokers 2 --combined).

- A quorum of one combined node with a controller listener opens its
  controller port, so broker-only nodes join it: a topic of replication
  factor 3 is placed on the three.
- A broker-only node paused (SIGSTOP) while more records are written than
  the voter keeps for it catches up by a snapshot once it runs again, and
  serves at once, without a restart, what the records it skipped did: a
  topic created meanwhile opens on it (kafka-python produces to every
  partition with acks=all, the one it leads and those it follows, and
  reads them back; its copies are the leaders'), a topic deleted
  meanwhile is retired and its directories removed. The voter keeps 8
  records here (SLUICE_TEST_METADATA_KEEP, a test knob: docs/cluster.md)
  instead of 4,096.
- A broker-only node keeps its image on disk: SIGKILLed and started
  again, it fetches from past index 1; its image damaged, it names the
  file, fetches the whole metadata and writes a new image.
- DescribeQuorum asked of any node (the voter or a broker) is the active
  controller's answer, listing both brokers as observers.
- (A cluster of its own: node 1 combined with a second listener EXTRA,
  node 2 a broker without it.) Metadata on node 1's EXTRA listener: a
  partition led by node 2, which has no endpoint there, is
  LISTENER_NOT_FOUND (72) with leader -1 from v6 on and
  LEADER_NOT_AVAILABLE (5) before, as Kafka's; node 1's partitions are
  served, and on the PLAINTEXT listener every partition."""

import json
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICECTL, main, test  # noqa: E402
from cluster import Cluster, create_topic, partitions, same_logs, until  # noqa: E402




def led(bootstrap, topic, nparts):
    m = partitions(bootstrap, topic)
    return m if m and len(m) == nparts and all(v[0] >= 0 for v in m.values()) else None


def in_sync_on(c, node, topic):
    """Node's own Metadata (raw, v1) lists topic, node in every ISR (its
    replicas open and caught up)."""
    from kraw import Conn, R, W
    w = W()
    w.array([topic], W.str)
    with Conn(c.addr(node), timeout=10) as k:
        r = k.request(3, 1, w)
    r.array(lambda r: (r.i32(), r.str(), r.i32(), r.str()))   # brokers
    r.i32()                                                    # controller
    topics = r.array(lambda r: (r.i16(), r.str(), r.i8(), r.array(
        lambda r: (r.i16(), r.i32(), r.i32(), r.array(R.i32), r.array(R.i32)))))
    return any(err == 0 and name == topic and parts and all(p[0] == 0 and node in p[4] for p in parts)
               for err, name, _, parts in topics)


def observers(c, node):
    """DescribeQuorum asked of node (sluicectl cluster info): its observers."""
    out = subprocess.run([SLUICECTL, "-b", c.addr(node), "--format", "json", "cluster", "info"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert out.returncode == 0, out.stderr
    q = json.loads(out.stdout)["quorum"]
    assert [v["node_id"] for v in q["voters"]] == [1], q
    return sorted(o["node_id"] for o in q["observers"])


def produce_consume(c, topic, nparts, tag):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    prod = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all", request_timeout_ms=20000, max_block_ms=30000)
    want = [b"%s%d-%d" % (tag, p, i) for p in range(nparts) for i in range(5)]
    for v in want:
        prod.send(topic, v, partition=int(v.split(b"-")[0][len(tag):])).get(timeout=30)
    prod.close()
    cons = KafkaConsumer(bootstrap_servers=c.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=20000)
    cons.assign([TopicPartition(topic, p) for p in range(nparts)])
    got = []
    for m in cons:
        got.append(m.value)
        if len(got) >= len(want):
            break
    cons.close()
    assert sorted(got) == sorted(want), got


@test
def broker_only_nodes_join_a_combined_quorum_of_one_and_a_paused_one_catches_up_by_a_snapshot():
    from confluent_kafka.admin import AdminClient, NewTopic

    # the session outlasts the pause: node 3 stays unfenced, so the topic
    # made while it is paused is placed on it too
    with Cluster(1, brokers=2, combined=True, sets=["broker.session.timeout.ms=60000"],
                 env={"SLUICE_TEST_METADATA_KEEP": "8"}) as c:
        # the lone voter is a combined node with its controller listener:
        # the brokers joined it (scripts/cluster waited for three brokers)
        assert c.first == 1 and len(c.addrs) == 3, c.bootstrap
        props = open(os.path.join(c.dir, "n1", "server.properties")).read()
        assert "process.roles=broker,controller" in props and "CONTROLLER://" in props, props
        b1 = c.addr(1)
        create_topic(b1, "gone", 2, 3)
        m = until("gone led", lambda: led(b1, "gone", 2))
        assert all(v[1] == [1, 2, 3] for v in m.values()), ("on the voter and both brokers", m)
        gone = [os.path.join(c.data_dir(3), "gone-%d" % p) for p in range(2)]
        until("node 3 hosts gone", lambda: all(os.path.isdir(d) for d in gone))
        assert c.metric(3, "sluice_controller_metadata_snapshots_installed_total") == 0

        os.kill(c.pid(3), signal.SIGSTOP)
        try:
            # asked of node 1 only: node 3 answers nothing while paused
            admin = AdminClient({"bootstrap.servers": b1})
            admin.delete_topics(["gone"], operation_timeout=30)["gone"].result(60)
            # and more records than the 8 the voter keeps
            new = [NewTopic("fresh", 3, 3)] + [NewTopic("filler%d" % i, 1, 1) for i in range(8)]
            for f in admin.create_topics(new, operation_timeout=30).values():
                f.result(60)
            fresh = until("fresh led", lambda: led(b1, "fresh", 3))
        finally:
            os.kill(c.pid(3), signal.SIGCONT)

        until("node 3 installed a snapshot",
              lambda: c.metric(3, "sluice_controller_metadata_snapshots_installed_total") >= 1)
        assert sorted(v[0] for v in fresh.values()) == [1, 2, 3], ("each node leads a partition", fresh)
        # the deleted topic leaves node 3 as a DeleteTopics there would
        until("gone's directories removed on node 3", lambda: not any(os.path.exists(d) for d in gone))
        # the new topic is served on node 3 at once: it leads one
        # partition and follows two (acks=all needs its copies)
        produce_consume(c, "fresh", 3, b"f")
        same_logs(c, "fresh", 3, (1, 2, 3))
        assert "installed a metadata snapshot" in c.log(3), c.log(3)[-2000:]

        # a broker-only node keeps its image: a restart fetches what follows
        image = os.path.join(c.data_dir(3), "sluice-metadata.image")
        c.kill(3)
        c.restart(3)
        at = re.findall(r"metadata image \S+ is at index (\d+): fetching the records after it", c.log(3))
        assert at and int(at[-1]) > 1, c.log(3)[-3000:]
        until("node 3 serves fresh again", lambda: in_sync_on(c, 3, "fresh"))
        # a damaged image is discarded, named, and the whole metadata fetched
        c.kill(3)
        data = bytearray(open(image, "rb").read())
        data[-5] ^= 0xFF
        open(image, "wb").write(bytes(data))
        c.restart(3)
        assert re.search(r"the metadata image \S+sluice-metadata.image: its CRC does not match \(damaged\): "
                         r"discarded; fetching the whole metadata", c.log(3)), c.log(3)[-3000:]
        until("node 3 serves fresh after a whole fetch", lambda: in_sync_on(c, 3, "fresh"))
        until("a new image written", lambda: os.path.exists(image) and open(image, "rb").read() != bytes(data))

        # DescribeQuorum asked of any node is the active controller's
        # answer: the voter, and both broker-only nodes as observers
        for n in (1, 2, 3):
            until("node %d lists both observers" % n, lambda: observers(c, n) == [2, 3])
        for n in (2, 3):
            os.kill(c.pid(n), signal.SIGKILL)


def metadata_leaders(addr, topic, ver):
    """Raw Metadata v5-v8 of topic through addr: ({broker ids},
    {partition: (error, leader)})."""
    from kraw import Conn, R, W
    w = W()
    w.array([topic], W.str)
    w.i8(0)                                                          # AllowAutoTopicCreation
    if ver >= 8:
        w.i8(0).i8(0)                                                # the authorized operations
    with Conn(addr, timeout=10) as k:
        r = k.request(3, ver, w)
    r.i32()                                                          # ThrottleTimeMs
    brokers = r.array(lambda r: (r.i32(), r.str(), r.i32(), r.str()))
    r.str()                                                          # ClusterId
    r.i32()                                                          # ControllerId

    def part(r):
        err, index, leader = r.i16(), r.i32(), r.i32()
        if ver >= 7:
            r.i32()                                                  # LeaderEpoch
        r.array(R.i32), r.array(R.i32), r.array(R.i32)               # replicas, ISR, offline
        return index, (err, leader)

    def one(r):
        err, name, _ = r.i16(), r.str(), r.i8()
        parts = dict(r.array(part))
        if ver >= 8:
            r.i32()
        return name, err, parts
    (name, err, parts), = r.array(one)
    assert name == topic and err == 0, (name, err)
    return {b[0] for b in brokers}, parts


@test
def a_leader_without_the_clients_listener_is_listener_not_found():
    with Cluster(1, brokers=1, combined=True, listener="EXTRA",
                 sets=["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT,"
                       "CONTROLLER:PLAINTEXT"]) as c:
        create_topic(c.bootstrap, "lnf", 4, 1)
        leaders = until("every partition of lnf led", lambda: led(c.bootstrap, "lnf", 4))
        by = {p: v[0] for p, v in leaders.items()}
        assert set(by.values()) == {1, 2}, by   # (both brokers lead some)
        extra = c.listener_addr(1, "EXTRA")
        for ver in (5, 6, 7, 8):
            brokers, parts = metadata_leaders(extra, "lnf", ver)
            assert brokers == {1}, (ver, brokers)   # node 2 has no EXTRA endpoint
            want = {p: (0, 1) if by[p] == 1 else (72 if ver >= 6 else 5, -1) for p in by}
            assert parts == want, (ver, parts, want)
            brokers, parts = metadata_leaders(c.addr(1), "lnf", ver)
            assert brokers == {1, 2} and parts == {p: (0, by[p]) for p in by}, (ver, brokers, parts)


if __name__ == "__main__":
    main("cluster_metadata")
