#!/usr/bin/python3
"""A leader cut off from the other brokers acknowledges nothing at acks=all
with min.insync.replicas=2 (issue 19): the 2013 Jepsen scenario that lost
Kafka's acknowledged writes, on a real network partition.

Three sluiced processes, each in its own network namespace on a bridge
(scripts/cluster start 3 --netns: root and `ip netns` needed, else the
tests are skipped); `scripts/cluster isolate ID` cuts a node off from the
other nodes while this test, in the root namespace, still reaches it.
Replication factor 3, broker.session.timeout.ms=4000,
replica.lag.time.max.ms=3000.

- The leader L of a partition (min.insync.replicas=2) is cut off: a
  Produce (acks=all) sent to L directly is not acknowledged; the majority
  fences L and elects another leader, acks=all through it succeeds; after
  the heal L follows again (back in the ISR) and every acknowledged record
  is read once, in order, and what was sent to L is in no node's log.

- Jepsen's order: L's followers stop fetching from it first (their
  connections to its Kafka port cut, the quorum's untouched), so the ISR
  shrinks to L alone, then L is cut off and the majority elects a replica
  out of sync (unclean.leader.election.enable=true). With
  min.insync.replicas=2, L refuses acks=all (NOT_ENOUGH_REPLICAS) and
  nothing is lost; a topic with min.insync.replicas=1 on the same leader
  has L acknowledge alone, and after the heal that acknowledged record is
  gone: Kafka's 2013 loss, which shows the checks can catch it.

Run: /usr/bin/python3 tests/integration/test_cluster_partition.py [test ...]
"""

import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, skip, test  # noqa: E402
from cluster import Cluster, create_topic, log_batches, partitions, until  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

SETS = ["default.replication.factor=3", "min.insync.replicas=2", "broker.session.timeout.ms=4000",
        "replica.lag.time.max.ms=3000"]
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS = 19
REFUSALS = (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS)


def need_netns():
    if os.geteuid() != 0:
        skip("network namespaces need root (euid %d)" % os.geteuid())
    if shutil.which("ip") is None or subprocess.run(["ip", "netns", "list"], stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.DEVNULL).returncode != 0:
        skip("`ip netns` is not available")


def leader_isr(bootstrap, topic):
    ps = partitions(bootstrap, topic)
    return (ps[0][0], ps[0][2]) if ps else (None, None)


def in_sync(bootstrap, topic, n):
    leader, isr = leader_isr(bootstrap, topic)
    return leader is not None and leader > 0 and len(isr) == n


class RawProduce:
    """A Produce v7 (acks=all, timeout_ms) of values to partition 0, sent
    on its own connection; answer() is its partition's error code, or None
    when no answer came (the connection's timeout or close)."""

    def __init__(self, addr, topic, values, timeout_ms):
        from kraw import Conn, W
        from ktxn import batch
        self.topic = topic
        self.conn = Conn(addr, timeout=timeout_ms / 1000 + 15)
        w = W().str(None).i16(-1).i32(timeout_ms)
        w.array([topic], lambda w, t: w.str(t).array([0], lambda w, p: w.i32(p).bytes(batch(values))))
        self.corr = self.conn.send(0, 7, w.b)

    def answer(self):
        try:
            r = self.conn.recv(self.corr)
        except Exception:  # noqa: BLE001 - no answer: not acknowledged
            return None
        finally:
            self.conn.close()
        r.i32()
        assert r.str() == self.topic
        r.i32()
        idx, err = r.i32(), r.i16()
        assert idx == 0
        return err


def produce_acked(bootstrap, topic, values):
    """values through an acks=all producer (retrying): the ones acknowledged."""
    acked = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 40000,
                  "topic.metadata.refresh.interval.ms": 1000, "max.in.flight": 1})
    for v in values:
        p.produce(topic, value=v, partition=0,
                  on_delivery=lambda err, m: acked.append(m.value()) if err is None else None)
    assert p.flush(60) == 0
    return acked


def read_values(bootstrap, topic):
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "partition-check", "enable.auto.commit": False})
    _lo, hi = cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    cons.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 60
    while len(out) < hi:
        assert time.monotonic() < deadline, "read %d of %d" % (len(out), hi)
        for m in cons.consume(1000, 1.0):
            if not m.error():
                out.append(m.value())
    cons.close()
    return out


def logs_of(c, topic):
    """Every node's partition 0 log bytes (the nodes stopped)."""
    return {n: b"".join(log_batches(os.path.join(c.data_dir(n), "%s-0" % topic))) for n in (1, 2, 3)}


@test
def a_leader_cut_off_from_the_other_brokers_acknowledges_nothing_at_acks_all():
    need_netns()
    with Cluster(3, sets=SETS, netns=True) as c:
        topic = "cut"
        create_topic(c.bootstrap, topic, 1, 3)
        until("3 in sync", lambda: in_sync(c.bootstrap, topic, 3))
        old = leader_isr(c.bootstrap, topic)[0]
        others = ",".join(c.addr(n) for n in (1, 2, 3) if n != old)
        before = produce_acked(c.bootstrap, topic, [b"before-%d" % i for i in range(100)])
        assert len(before) == 100, "acknowledged %d of 100 before the cut" % len(before)

        c.isolate(old)
        t0 = time.monotonic()
        cut = RawProduce(c.addr(old), topic, [b"cut-%d" % i for i in range(10)], 10000)
        new = until("a new leader among the majority while %d is cut off" % old,
                    lambda: (lambda l: l if l not in (None, -1, old) else None)(leader_isr(others, topic)[0]),
                    timeout=40)
        elected = time.monotonic() - t0
        after = produce_acked(others, topic, [b"after-%d" % i for i in range(100)])
        assert len(after) == 100, "the new leader acknowledged %d of 100" % len(after)
        err = cut.answer()
        print("  node %d cut off: node %d elected after %.1f s; the cut-off leader answered %s" % (
            old, new, elected, "nothing" if err is None else "error %d" % err))
        assert err is None or err in REFUSALS, \
            "the cut-off leader acknowledged a write at acks=all with min.insync.replicas=2 (error %d)" % err
        # a second one, sent once the majority has moved on
        late = RawProduce(c.addr(old), topic, [b"cut-late-%d" % i for i in range(10)], 3000)
        err = late.answer()
        assert err is None or err in REFUSALS, "the cut-off leader acknowledged a late write (error %d)" % err

        c.heal(old)
        rejoined(c, topic, old)
        vals = read_values(c.bootstrap, topic)
        assert not [v for v in vals if v.startswith(b"cut-")], "a write sent to the cut-off leader is readable"
        assert vals == before + after, "read %d records, acknowledged %d (in this order)" % (
            len(vals), len(before + after))
        c.stop()
        logs = logs_of(c, topic)
        for n, data in logs.items():
            assert b"cut-" not in data, "node %d's log holds a write sent to the cut-off leader: %r\n%s" % (
                n, describe(c, topic, n), c.log(n)[-3000:])
        assert logs[1] == logs[2] == logs[3], "the three copies differ (%r bytes)" % [len(x) for x in logs.values()]


@test
def with_the_isr_shrunk_to_the_leader_min_insync_replicas_2_refuses_what_1_acknowledges_and_loses():
    need_netns()
    with Cluster(3, sets=SETS + ["unclean.leader.election.enable=true"], netns=True) as c:
        # the same leader for both: created one after the other, the second
        # moved to the first's leader by a preferred election if needed
        create_topic(c.bootstrap, "safe", 1, 3)
        until("safe: 3 in sync", lambda: in_sync(c.bootstrap, "safe", 3))
        old = leader_isr(c.bootstrap, "safe")[0]
        others = [n for n in (1, 2, 3) if n != old]
        create_topic_on(c, "unsafe", old, others, {"min.insync.replicas": "1"})
        until("unsafe: 3 in sync, led by %d" % old,
              lambda: in_sync(c.bootstrap, "unsafe", 3) and leader_isr(c.bootstrap, "unsafe")[0] == old)
        before = {t: produce_acked(c.bootstrap, t, [b"before-%d" % i for i in range(50)]) for t in ("safe", "unsafe")}
        assert all(len(v) == 50 for v in before.values())

        # the followers stop fetching from node `old` (their connections to
        # its Kafka port cut; the quorum's are not): after
        # replica.lag.time.max.ms the ISRs shrink to it alone
        c.isolate(old, port=c.port(old))
        until("both ISRs shrunk to node %d" % old,
              lambda: all(leader_isr(c.addr(old), t) == (old, [old]) for t in ("safe", "unsafe")), timeout=30)
        # then it is cut off from the other nodes altogether
        c.isolate(old)
        sent = {t: RawProduce(c.addr(old), t, [b"cut-%s-%d" % (t.encode(), i) for i in range(5)], 5000)
                for t in ("safe", "unsafe")}
        errs = {t: p.answer() for t, p in sent.items()}
        print("  node %d alone in the ISR and cut off answered %r" % (old, errs))
        assert errs["safe"] == NOT_ENOUGH_REPLICAS, \
            "min.insync.replicas=2, the ISR the leader alone: answered %r, not NOT_ENOUGH_REPLICAS" % errs["safe"]
        assert errs["unsafe"] == 0, \
            "min.insync.replicas=1: the leader alone did not acknowledge (answered %r)" % errs["unsafe"]
        alone = [b"cut-unsafe-%d" % i for i in range(5)]

        peers = ",".join(c.addr(n) for n in others)
        for t in ("safe", "unsafe"):
            until("%s: an unclean leader among the majority" % t,
                  lambda: leader_isr(peers, t)[0] in others, timeout=40)
        after = {t: produce_acked(peers, t, [b"after-%d" % i for i in range(50)]) for t in ("safe", "unsafe")}
        assert all(len(v) == 50 for v in after.values()), {t: len(v) for t, v in after.items()}

        c.heal(old)
        for t in ("safe", "unsafe"):
            rejoined(c, t, old)
        vals = {t: read_values(c.bootstrap, t) for t in ("safe", "unsafe")}
        assert vals["safe"] == before["safe"] + after["safe"], "safe: read %d, acknowledged %d" % (
            len(vals["safe"]), len(before["safe"] + after["safe"]))
        lost = [v for v in alone if v not in vals["unsafe"]]
        print("  min.insync.replicas=1: %d of the %d records node %d acknowledged alone are gone after the heal" % (
            len(lost), len(alone), old))
        assert lost == alone, "the lone leader's acknowledged writes survived: %r" % vals["unsafe"]
        assert vals["unsafe"] == before["unsafe"] + after["unsafe"]
        c.stop()
        for n, data in logs_of(c, "safe").items():
            assert b"cut-" not in data, "node %d's log holds a write min.insync.replicas=2 refused" % n


def rejoined(c, topic, old):
    """Wait until node old follows again: the others' Metadata and its own
    name the same leader, not old, with all three in the ISR."""
    others = ",".join(c.addr(n) for n in (1, 2, 3) if n != old)

    def agreed():
        ours = leader_isr(others, topic)
        return ours[0] not in (None, -1, old) and len(ours[1]) == 3 and leader_isr(c.addr(old), topic) == ours
    try:
        until("node %d back in the ISR of %s, following" % (old, topic), agreed, timeout=40)
    except AssertionError as e:
        raise AssertionError("%s; the majority says %r, node %d %r; node %d's log:\n%s" % (
            e, leader_isr(others, topic), old, leader_isr(c.addr(old), topic), old, c.log(old)[-4000:]))


def describe(c, topic, n):
    """node n's batches: (base offset, leader epoch, count, first value's prefix)."""
    out = []
    for b in log_batches(os.path.join(c.data_dir(n), "%s-0" % topic)):
        base = int.from_bytes(b[0:8], "big")
        epoch = int.from_bytes(b[12:16], "big", signed=True)
        count = int.from_bytes(b[57:61], "big")
        i = b.find(b"-", 61)
        out.append((base, epoch, count, b[max(61, i - 8):i + 4]))
    return out


def create_topic_on(c, topic, leader, others, config):
    """topic (1 partition) with leader as its preferred replica."""
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    nt = NewTopic(topic, 1, replica_assignment=[[leader] + others], config=config)
    a.create_topics([nt], operation_timeout=30)[topic].result(60)


if __name__ == "__main__":
    main("test_cluster_partition")
