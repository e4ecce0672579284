#!/usr/bin/python3
"""Partition reassignments on three real nodes (docs/reassignment.md):
AlterPartitionReassignments and ListPartitionReassignments (KIP-455) over
raw frames, `sluicectl partition reassign` and `sluicectl broker
decommission`.

- ApiVersions advertises 45 and 46 at 0;
- bad input gets Kafka's codes: a broker that is not registered, a broker
  twice and an empty list INVALID_REPLICA_ASSIGNMENT (39), an unknown topic
  or partition UNKNOWN_TOPIC_OR_PARTITION (3), a cancel with nothing in
  progress NO_REASSIGNMENT_IN_PROGRESS (85); List leaves out what does not
  exist;
- a reassignment of a partition with 10 MiB from {1,2} to {2,3} under a
  replication throttle of 2 MB/s shows in ListPartitionReassignments
  (replicas 2,3,1, adding 3, removing 1) while node 3 catches up, node 3
  having less than 7 MiB of it after 2 s; a cancel
  (null replicas) brings back {1,2}, List empty, and node 3's copy is
  removed;
- with leader.replication.throttled.rate=200000 on node 1 alone (the
  leader's quota, no follower rate), the same partition moving to {1,3}
  has less than 3 MiB on node 3 after 2 s, and completes once the rate
  is removed;
- `sluicectl partition reassign` moves another partition from {1,2} to
  {2,3} while an acks=all producer writes to it: every acknowledged record
  is read back at its offset, List ends empty, node 1's copy is removed
  and, the nodes stopped, node 3's log is node 2's, byte for byte;
- `sluicectl broker decommission 1 --format json` moves every replica off
  node 1 (exit 0, JSON), after which Metadata names node 1 in no
  partition; decommissioning a broker when the others cannot hold a
  partition's replicas is refused (exit 1) before anything moves, and a
  reassignment that only removes a replica completes at once;
- DeleteRecords on the leader of a partition on all three nodes moves both
  followers' log start to the leader's (their log start metric), as
  Kafka's follower follows the leader's LogStartOffset.

Run: /usr/bin/python3 tests/integration/test_cluster_reassign.py
"""

import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, test  # noqa: E402
from cluster import Cluster, delete_records, log_batches, partitions, until  # noqa: E402
from kraw import Conn, compact_str, read_compact_str, read_uvarint, uvarint  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

ALTER, LIST, API_VERSIONS = 45, 46, 18
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS = 0, 3, 39, 85
SLUICECTL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "sluicectl")


def alter(addr, moves):
    """AlterPartitionReassignments v0: moves is [(topic, partition, replicas
    or None)]; returns (top error, {(topic, partition): (code, message)})."""
    body = (30000).to_bytes(4, "big") + uvarint(len(moves) + 1)
    for topic, part, reps in moves:
        body += compact_str(topic) + uvarint(2) + part.to_bytes(4, "big")
        if reps is None:
            body += uvarint(0)
        else:
            body += uvarint(len(reps) + 1) + b"".join(r.to_bytes(4, "big") for r in reps)
        body += b"\x00" + b"\x00"
    body += b"\x00"
    with Conn(addr) as c:
        r = c.request_flex(ALTER, 0, body)
        r.i32()
        top = r.i16()
        read_compact_str(r)
        out = {}
        for _ in range(read_uvarint(r) - 1):
            name = read_compact_str(r)
            for _ in range(read_uvarint(r) - 1):
                p, e, m = r.i32(), r.i16(), read_compact_str(r)
                assert read_uvarint(r) == 0
                out[(name, p)] = (e, m)
            assert read_uvarint(r) == 0
        assert read_uvarint(r) == 0
        r.done()
    return top, out


def ids(r):
    return [r.i32() for _ in range(read_uvarint(r) - 1)]


def listing(addr, topics=None):
    """ListPartitionReassignments v0: topics None (every one) or [(name,
    [p...])]; returns {(topic, partition): (replicas, adding, removing)}."""
    body = (30000).to_bytes(4, "big")
    if topics is None:
        body += uvarint(0)
    else:
        body += uvarint(len(topics) + 1)
        for name, parts in topics:
            body += compact_str(name) + uvarint(len(parts) + 1) + b"".join(p.to_bytes(4, "big") for p in parts)
            body += b"\x00"
    body += b"\x00"
    with Conn(addr) as c:
        r = c.request_flex(LIST, 0, body)
        r.i32()
        assert r.i16() == NONE
        read_compact_str(r)
        out = {}
        for _ in range(read_uvarint(r) - 1):
            name = read_compact_str(r)
            for _ in range(read_uvarint(r) - 1):
                p = r.i32()
                out[(name, p)] = (ids(r), ids(r), ids(r))
                assert read_uvarint(r) == 0
            assert read_uvarint(r) == 0
        assert read_uvarint(r) == 0
        r.done()
    return out


def sluicectl(c, *args, timeout=120):
    return subprocess.run([SLUICECTL, "-b", c.addr(2)] + list(args), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)


def fill(bootstrap, topic, mib):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for _ in range(mib * 1024):
        while True:
            try:
                p.produce(topic, value=b"f" * 1024)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def dirs_of(c, node, topic):
    return sorted(d for d in os.listdir(c.data_dir(node)) if d.startswith(topic + "-"))


def read_back(bootstrap, topic, end):
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "reassign-check", "enable.auto.commit": False})
    cons.assign([TopicPartition(topic, 0, 0)])
    got = {}
    deadline = time.monotonic() + 60
    while len(got) < end and time.monotonic() < deadline:
        for m in cons.consume(2000, 1.0):
            if not m.error():
                got[m.offset()] = m.value()
    cons.close()
    return got


def broker_config(addr, node, key, value):
    """IncrementalAlterConfigs v0 on broker `node`'s own resource: SET key
    to value, or DELETE it (value None)."""
    import kraw
    with kraw.Conn(addr) as k:
        w = kraw.W().array([0], lambda w, _: w.i8(4).str(str(node)).array(
            [0], lambda w, _: w.str(key).i8(0 if value is not None else 1).str(value))).i8(0)
        r = k.request(44, 0, w)
        r.i32()
        res = r.array(lambda r: (r.i16(), r.str(), r.i8(), r.str()))
    assert res[0][0] == 0, res


def the_leader_alone_throttles_what_it_sends_a_new_replica(c):
    """cancelled-0 (10 MiB, led by node 1, on 1 and 2) moves to {1,3} with
    leader.replication.throttled.rate=200000 on node 1 alone (Kafka's
    leader-side quota; no follower rate anywhere): after 2 s node 3 has
    less than 3 MiB of it (a second's budget and a batch past the rate at
    most; unthrottled it copies the 10 MiB in about a second here), and
    once the rate is removed it catches up and the move completes. Before,
    only the follower applied a throttle (the least of both keys, from its
    own node's settings): node 3 copied at full speed."""
    broker_config(c.addr(1), 1, "leader.replication.throttled.rate", "200000")
    until("node 1 applies its leader throttle", lambda: "replication throttle: 200000 " in c.log(1))
    top, res = alter(c.addr(1), [("cancelled", 0, [1, 3])])
    assert (top, res) == (NONE, {("cancelled", 0): (NONE, None)}), (top, res)
    until("node 3 opened its copy", lambda: dirs_of(c, 3, "cancelled") == ["cancelled-0"])
    t0 = time.monotonic()
    time.sleep(2.0)
    copied = sum(len(b) for b in log_batches(os.path.join(c.data_dir(3), "cancelled-0")))
    assert copied < 3 << 20, "node 3 copied %d bytes in %.1f s from a leader throttled at 200 kB/s" % (
        copied, time.monotonic() - t0)
    print("  leader throttled at 200 kB/s: %.2f MiB copied in the first %.1f s" % (
        copied / (1 << 20), time.monotonic() - t0))
    broker_config(c.addr(1), 1, "leader.replication.throttled.rate", None)
    t1 = time.monotonic()
    until("the move completes once the throttle is gone",
          lambda: partitions(c.bootstrap, "cancelled")[0] == (1, [1, 3], [1, 3]), timeout=30)
    print("  unthrottled, the rest copied and the move done in %.1f s" % (time.monotonic() - t1))
    until("node 2's copy removed", lambda: dirs_of(c, 2, "cancelled") == [])


def followers_log_start_follows_the_leaders(c):
    """wide-0 (on nodes 1, 2 and 3): 200 acks=all records, DeleteRecords on
    its leader up to the high watermark; both followers' log start (their
    partition_log_start_offset) becomes the leader's, from the leader's
    fetch answers (Kafka's follower moves its log start to the leader's
    LogStartOffset; before, theirs stayed at 0 until their own retention)."""
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(200):
        p.produce("wide", partition=0, value=b"w%d" % i)
    assert p.flush(30) == 0
    lead, low = delete_records(c, "wide")
    assert low >= 200, low
    line = 'sluice_partition_log_start_offset{topic="wide",partition="0"'
    for n in (1, 2, 3):
        if n != lead:
            until("node %d's log start of wide-0 at its leader's %d" % (n, low),
                  lambda: c.metric(n, line) == low, timeout=20)
    print("  wide-0: DeleteRecords on node %d moved every copy's log start to %d" % (lead, low))


@test
def reassignments_move_replicas_cancel_refuse_bad_input_and_a_broker_is_decommissioned():
    # the internal topics on two replicas, so that two brokers can hold
    # every partition once node 1 is decommissioned
    sets = ["replica.lag.time.max.ms=10000", "broker.session.timeout.ms=6000",
            "offsets.topic.replication.factor=2", "transaction.state.log.replication.factor=2"]
    with Cluster(3, sets=sets) as c:
        a = AdminClient({"bootstrap.servers": c.bootstrap})
        fs = a.create_topics([NewTopic(t, 1, replica_assignment=[[1, 2]]) for t in ("cancelled", "moved")])
        for f in fs.values():
            f.result(30)
        # every node is asked below and answers from its own image, which
        # may apply the topics' records after the node that created them
        # (a lagging node answers UNKNOWN_TOPIC_OR_PARTITION, retriable)
        until("both topics led by node 1, in sync, on every node", lambda: all(
            (partitions(c.addr(n), t) or {}).get(0) == (1, [1, 2], [1, 2])
            for t in ("cancelled", "moved") for n in (1, 2, 3)))

        with Conn(c.addr(1)) as k:
            apis = k.api_versions().apis
        assert apis.get(ALTER) == (0, 0) and apis.get(LIST) == (0, 0), apis

        # ---- bad input -------------------------------------------------
        top, res = alter(c.addr(1), [("moved", 0, [2, 9]), ("cancelled", 0, [3, 3]), ("nosuch", 0, [1]),
                                     ("moved", 7, [1, 2])])
        assert top == NONE, top
        assert res[("moved", 0)][0] == INVALID_REPLICA_ASSIGNMENT and "9" in res[("moved", 0)][1], res
        assert res[("cancelled", 0)][0] == INVALID_REPLICA_ASSIGNMENT, res
        assert res[("nosuch", 0)][0] == UNKNOWN_TOPIC_OR_PARTITION, res
        assert res[("moved", 7)][0] == UNKNOWN_TOPIC_OR_PARTITION, res
        got = alter(c.addr(2), [("moved", 0, [])])
        assert got[1][("moved", 0)][0] == INVALID_REPLICA_ASSIGNMENT, got
        assert alter(c.addr(3), [("moved", 0, None)])[1][("moved", 0)] == (
            NO_REASSIGNMENT_IN_PROGRESS, "No reassignment is in progress for topic moved partition 0")
        assert listing(c.addr(1)) == {}
        assert listing(c.addr(1), [("nosuch", [0]), ("moved", [0, 5])]) == {}
        assert partitions(c.bootstrap, "moved")[0] == (1, [1, 2], [1, 2]), "bad input changed nothing"

        # ---- in progress, then cancelled -------------------------------
        fill(c.bootstrap, "cancelled", 10)
        t0 = time.monotonic()
        r = sluicectl(c, "partition", "reassign", "--topic", "cancelled", "--partition", "0", "--replicas", "2,3",
                      "--throttle", "2000000", "--no-wait", "--format", "json")
        assert r.returncode == 0, r.stderr.decode()
        out = json.loads(r.stdout)
        assert out["partitions"][0]["result"] == "started" and out["throttle"] == "2000000", out
        seen = until("the reassignment listed on every node", lambda: all(
            listing(c.addr(n)).get(("cancelled", 0)) == ([2, 3, 1], [3], [1]) for n in (1, 2, 3)))
        assert listing(c.addr(1), [("cancelled", [0])]) == {("cancelled", 0): ([2, 3, 1], [3], [1])}, seen
        until("node 3 opened its copy", lambda: dirs_of(c, 3, "cancelled") == ["cancelled-0"])
        time.sleep(max(0.0, t0 + 2.0 - time.monotonic()))
        copied = sum(len(b) for b in log_batches(os.path.join(c.data_dir(3), "cancelled-0")))
        # 2 s at 2 MB/s, and at most one batch beyond the budget: not the 10 MiB
        assert 0 < copied < 7 << 20, "node 3 copied %d bytes in 2 s at 2 MB/s" % copied
        print("  throttled at 2 MB/s: %.1f MiB copied in the first 2 s" % (copied / (1 << 20)))
        top, res = alter(c.addr(3), [("cancelled", 0, None)])
        assert (top, res) == (NONE, {("cancelled", 0): (NONE, None)}), (top, res)
        assert listing(c.addr(3)) == {}, "answered once applied on the node asked"
        until("no reassignment listed on any node", lambda: all(listing(c.addr(n)) == {} for n in (1, 2, 3)))
        until("replicas back to 1,2", lambda: partitions(c.bootstrap, "cancelled")[0] == (1, [1, 2], [1, 2]))
        until("node 3's copy removed", lambda: dirs_of(c, 3, "cancelled") == [])
        r = sluicectl(c, "partition", "reassign", "--unthrottle")
        assert r.returncode == 0, r.stderr.decode()
        the_leader_alone_throttles_what_it_sends_a_new_replica(c)

        # ---- moved while an acks=all producer writes -------------------
        fill(c.bootstrap, "moved", 4)
        acked, errors, stop = {}, [], threading.Event()

        def produce():
            p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                          "linger.ms": 2, "message.timeout.ms": 60000,
                          "topic.metadata.refresh.interval.ms": 1000})
            i = 0

            def dr(err, msg):
                if err is not None:
                    errors.append(str(err))
                else:
                    acked[msg.offset()] = msg.value()
            while not stop.is_set():
                try:
                    p.produce("moved", value=b"v%08d" % i + b"x" * 200, on_delivery=dr)
                    i += 1
                except BufferError:
                    pass
                p.poll(0.001 if i % 50 else 0.01)
            assert p.flush(60) == 0
        t = threading.Thread(target=produce)
        t.start()
        try:
            until("the producer acknowledged some", lambda: len(acked) > 500)
            t0 = time.monotonic()
            r = sluicectl(c, "partition", "reassign", "--topic", "moved", "--partition", "0", "--replicas", "2,3",
                          "--throttle", "20000000", "--format", "json")
            took = time.monotonic() - t0
            assert r.returncode == 0, r.stderr.decode()
            out = json.loads(r.stdout)
            p0 = out["partitions"][0]
            assert p0["before"] == [1, 2] and p0["replicas"] == [2, 3] and p0["result"] == "moved", out
            assert out["complete"] is True, out
            n_at_move = len(acked)
            until("more acknowledged after the move", lambda: len(acked) > n_at_move + 500)
        finally:
            stop.set()
            t.join()
        assert not errors, errors[:5]
        assert listing(c.addr(2)) == {}, "sluicectl waited for it on node 2"
        leader, reps, isr = partitions(c.bootstrap, "moved")[0]
        assert reps == [2, 3] and leader in (2, 3), (leader, reps, isr)
        until("node 1's copy removed", lambda: dirs_of(c, 1, "moved") == [])
        end = max(acked) + 1
        got = read_back(c.bootstrap, "moved", end)
        missing = [o for o in acked if got.get(o) != acked[o]]
        assert not missing, "%d acknowledged records not read back at their offset, e.g. %r" % (
            len(missing), missing[:5])
        print("  %d records acknowledged while the partition moved (sluicectl: %.1f s)" % (len(acked), took))

        # ---- decommission ----------------------------------------------
        a.create_topics([NewTopic("spread", 3, replica_assignment=[[1, 2], [3, 1], [2, 3]])])["spread"].result(30)
        until("spread in sync", lambda: all(len(v[2]) == 2 for v in partitions(c.bootstrap, "spread").values()))
        a.create_topics([NewTopic("wide", 1, replica_assignment=[[1, 2, 3]])])["wide"].result(30)
        until("wide in sync, as node 2 (sluicectl's) serves it",
              lambda: (partitions(c.addr(2), "wide") or {}).get(0, (0, 0, []))[2] == [1, 2, 3])
        followers_log_start_follows_the_leaders(c)
        r = sluicectl(c, "broker", "decommission", "1")
        assert r.returncode == 1 and b"wide-0 has 3 replicas" in r.stderr, (r.returncode, r.stderr)
        assert partitions(c.bootstrap, "spread")[0][1] == [1, 2], "a refused decommission moved nothing"
        # a removal alone (no replica added) completes at once
        # (node 1 may apply the topic's records after node 2: asked again,
        # a target the replicas already are is nothing to do)
        until("the removal taken by node 1", lambda: alter(c.addr(1), [("wide", 0, [3, 2])]) == (
            NONE, {("wide", 0): (NONE, None)}))
        until("wide on 3,2 on node 2, nothing in progress",
              lambda: partitions(c.addr(2), "wide")[0][1] == [2, 3] and listing(c.addr(2)) == {})
        r = sluicectl(c, "broker", "decommission", "1", "--format", "json")
        assert r.returncode == 0, r.stderr.decode()
        out = json.loads(r.stdout)
        assert out["broker"] == 1 and out["complete"] is True and out["failed"] == 0, out
        assert {(p["topic"], p["partition"]) for p in out["partitions"]} >= {("spread", 0), ("spread", 1)}, out

        def holding(node):
            md = AdminClient({"bootstrap.servers": c.addr(node)}).list_topics(timeout=20)
            return [(t, p) for t, tm in md.topics.items() for p, pm in tm.partitions.items() if 1 in pm.replicas]
        assert not holding(2), holding(2)[:5]   # sluicectl's node: it waited for it there
        until("node 1 in no partition on any node", lambda: not any(holding(n) for n in (1, 2, 3)))
        c.stop()
        copies = [log_batches(os.path.join(c.data_dir(n), "moved-0")) for n in (2, 3)]
        assert copies[0] == copies[1] and len(copies[0]) > 10, (len(copies[0]), len(copies[1]))


if __name__ == "__main__":
    main("test_cluster_reassign")
