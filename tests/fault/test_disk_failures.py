#!/usr/bin/python3
"""What a broker does when its disk fails under a partition it leads
(docs/storage.md, "A failed disk"), on three real loopback nodes, node 1's
data directory on a loop-mounted ext4 of its own (tests/fault/
nemesis_disk.py's LoopFs; root):

- full: the filesystem filled (DiskFull): Produce to the partition node 1
  leads is answered KAFKA_STORAGE_ERROR (56); once the filler is removed
  the same node, not restarted, takes Produce again, and every record
  acknowledged before, during and after is read back.
- read-only (EROFS, errors=remount-ro: DiskReadOnly): node 1's log of the
  partition goes offline, node 1 leaves the partition's leadership and ISR,
  an in-sync follower leads, acks=all Produce succeeds again, every
  acknowledged record is read back, node 1's log says the file and the
  error, and its sluice_partition_failed is 1.

In those two node 1's metadata quorum log stays on the other disk
(Kafka's metadata.log.dir apart from log.dirs). In the third it does not:

- metadata log (a_failed_metadata_log_halts_the_node): node 1's whole data
  directory, the quorum's log included, on the disk that turns read-only:
  node 1 cannot take the change that moves its leadership, so it halts
  (exit 1, one line naming the directory and the error), as Kafka's broker
  does when its metadata log directory fails; an in-sync follower leads,
  acks=all Produce succeeds again, every acknowledged record is read back.

The regression tests of issue 20's disk finding (docs/fault-testing.md).
Everything is removed afterwards (nemesis_disk.sweep() finds what an
interrupted run left).

Run: /usr/bin/python3 tests/fault/test_disk_failures.py [test ...]
"""

import os
import random
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import main, temp_dir, test  # noqa: E402
from cluster import Cluster, partitions, until  # noqa: E402

import nemesis_disk  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


class Nodes:
    """What the disk nemeses ask of a cluster: data_dir(n), nodes."""

    def __init__(self, c):
        self.c = c
        self.nodes = list(range(1, c.n + 1))

    def data_dir(self, n):
        return self.c.data_dir(n)


def produce(bootstrap, topic, values, **conf):
    """values to partition 0, acks=all: {value: error name or None}."""
    out = {}
    p = Producer(dict({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                       "message.timeout.ms": 30000}, **{k.replace("_", "."): v for k, v in conf.items()}))
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=lambda err, m: out.__setitem__(m.value(), err and err.name()))
        p.poll(0)
    assert p.flush(90) == 0, "records left unanswered"
    return out


def acked(results):
    return [v for v, e in results.items() if e is None]


def read_all(bootstrap, topic):
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-failures", "enable.auto.commit": False})
    try:
        lo, hi = cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        cons.assign([TopicPartition(topic, 0, lo)])
        out = []
        end = time.monotonic() + 60
        while len(out) < hi - lo:
            assert time.monotonic() < end, "read %d of %d" % (len(out), hi - lo)
            out.extend(m.value() for m in cons.consume(1000, 1.0) if not m.error())
        return out
    finally:
        cons.close()


def check_readable(bootstrap, topic, want):
    got = read_all(bootstrap, topic)
    missing = set(want) - set(got)
    assert not missing, "%s: %d acknowledged and not read (e.g. %r)" % (topic, len(missing), sorted(missing)[:3])


def create(c, topics):
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    for f in a.create_topics([NewTopic(name, 1, replica_assignment=[[1, 2, 3]], config=conf)
                              for name, conf in topics.items()], operation_timeout=30).values():
        f.result(60)
    for name in topics:
        until("%s led by node 1, all in sync" % name,
              lambda: (lambda ps: ps and ps[0][0] == 1 and len(ps[0][2]) == 3)(partitions(c.bootstrap, name)))


QUORUM_DIR = "__cluster_metadata-raft"


def on_loopfs(c, fs):
    """Node 1 stopped, its data directory moved onto fs (a symlink where
    it was), started again. The metadata quorum's log stays on the disk it
    was on (a symlink from fs), as Kafka's metadata.log.dir on a disk of
    its own: what fails here is a data disk (a failed metadata log:
    a_failed_metadata_log_halts_the_node)."""
    c.kill(1)
    d = c.data_dir(1)
    keep = d + ".quorum"
    shutil.move(os.path.join(d, QUORUM_DIR), keep)
    shutil.copytree(d, os.path.join(fs.mnt, "data"), symlinks=True)
    shutil.rmtree(d)
    os.symlink(os.path.join(fs.mnt, "data"), d)
    os.symlink(keep, os.path.join(fs.mnt, "data", QUORUM_DIR))
    c.restart(1)
    until("node 1 serves", lambda: 1 in AdminClient({"bootstrap.servers": c.addr(1)}).list_topics(timeout=5).brokers)


@test
def a_failed_disk_refuses_then_recovers_or_hands_over_leadership():
    if os.geteuid() != 0:
        print("  (needs root: not run)")
        return
    nemesis_disk.sweep()
    base = temp_dir("sluicef-")
    fs = None
    sets = ["min.insync.replicas=2", "default.replication.factor=3", "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=500", "replica.lag.time.max.ms=3000"]
    try:
        with Cluster(3, sets=sets) as c:
            fs = nemesis_disk.LoopFs(base, "n1", size_mb=48)
            on_loopfs(c, fs)
            create(c, {"full": {"segment.bytes": str(1 << 20)}, "ro": {}})
            nodes = Nodes(c)
            t0 = time.monotonic()

            # ---- full: refused with 56, then the same node takes produce again
            before = produce(c.bootstrap, "full", [b"before-%d" % i for i in range(20)])
            assert len(acked(before)) == 20, before
            pid = c.pid(1)
            nem = nemesis_disk.DiskFull(node=1)
            nem.start(nodes, random.Random(20))
            during = {}
            big = b"x" * 8000
            try:
                for i in range(60):
                    r = produce(c.bootstrap, "full", [b"during-%d-%d-" % (i, j) + big for j in range(20)],
                                retries=0, enable_idempotence=False)
                    during.update(r)
                    if any(r.values()):
                        break
            finally:
                nem.stop(nodes)
            errors = {e for e in during.values() if e}
            assert "KAFKA_STORAGE_ERROR" in errors, errors
            assert partitions(c.bootstrap, "full")[0][0] == 1, "a full disk moved the leadership"
            again = produce(c.bootstrap, "full", [b"space-back-%d" % i for i in range(20)], enable_idempotence=True)
            assert acked(again) == list(again), "space back, node 1 still refuses: %s" % again
            assert c.pid(1) == pid and partitions(c.bootstrap, "full")[0][0] == 1
            check_readable(c.bootstrap, "full", acked(before) + acked(during) + acked(again))
            print("  full: %d acknowledged, then %s; space back: 20 acknowledged by node 1 (%.1f s)"
                  % (len(acked(during)), sorted(errors), time.monotonic() - t0))

            # ---- read-only: the leadership moves to an in-sync follower
            t0 = time.monotonic()
            before = produce(c.bootstrap, "ro", [b"before-%d" % i for i in range(20)])
            assert len(acked(before)) == 20, before
            nem = nemesis_disk.DiskReadOnly(node=1)
            nem.inject(nemesis_disk.fs_of(c.data_dir(1)))
            # retried (idempotent) until the new leader takes them
            during = produce(c.bootstrap, "ro", [b"during-%d" % i for i in range(20)], enable_idempotence=True)
            assert acked(during) == list(during), during
            others = ",".join(c.addr(n) for n in (2, 3))
            ps = partitions(others, "ro")[0]
            assert ps[0] in (2, 3) and 1 not in ps[2], ps
            assert c.pid(1), "node 1 exited"
            check_readable(others, "ro", acked(before) + acked(during))
            log = c.log(1)
            assert "Read-only file system" in log and "offline" in log, log[-2000:]
            assert c.metric(1, 'sluice_partition_failed{topic="ro",partition="0"') == 1
            print("  read-only: node %d leads, ISR %s; 20 acknowledged (%.1f s)" % (ps[0], ps[2], time.monotonic() - t0))
    finally:
        if fs:
            fs.close()
        shutil.rmtree(base, ignore_errors=True)
    left = nemesis_disk.leftovers(base, os.getpid())
    assert not left, left


def all_on_loopfs(c, fs):
    """Node 1 stopped, its whole data directory, the metadata quorum's log
    included, moved onto fs (a symlink where it was), started again."""
    c.kill(1)
    d = c.data_dir(1)
    shutil.copytree(d, os.path.join(fs.mnt, "data"), symlinks=True)
    shutil.rmtree(d)
    os.symlink(os.path.join(fs.mnt, "data"), d)
    c.restart(1)
    until("node 1 serves", lambda: 1 in AdminClient({"bootstrap.servers": c.addr(1)}).list_topics(timeout=5).brokers)


@test
def a_failed_metadata_log_halts_the_node():
    """Node 1's metadata quorum log on the disk that turns read-only: it
    cannot append the change that moves its leaderships, so it halts
    (exit 1, one line saying what failed and what to do); an in-sync
    follower leads, acks=all Produce succeeds again, and every
    acknowledged record is read back."""
    if os.geteuid() != 0:
        print("  (needs root: not run)")
        return
    nemesis_disk.sweep()
    base = temp_dir("sluicef-")
    fs = None
    sets = ["min.insync.replicas=2", "default.replication.factor=3", "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=500", "replica.lag.time.max.ms=3000"]
    try:
        with Cluster(3, sets=sets) as c:
            fs = nemesis_disk.LoopFs(base, "n1", size_mb=48)
            all_on_loopfs(c, fs)
            create(c, {"meta": {}})
            t0 = time.monotonic()
            before = produce(c.bootstrap, "meta", [b"before-%d" % i for i in range(20)])
            assert len(acked(before)) == 20, before
            nemesis_disk.DiskReadOnly(node=1).inject(nemesis_disk.fs_of(c.data_dir(1)))
            # retried (idempotent) until the new leader takes them
            during = produce(c.bootstrap, "meta", [b"during-%d" % i for i in range(20)], enable_idempotence=True)
            assert acked(during) == list(during), during
            until("node 1 exits", lambda: c.pid(1) is None, timeout=60)
            others = ",".join(c.addr(n) for n in (2, 3))
            ps = partitions(others, "meta")[0]
            assert ps[0] in (2, 3) and 1 not in ps[2], ps
            check_readable(others, "meta", acked(before) + acked(during))
            log = c.log(1)
            assert "the metadata quorum's log" in log and "halting" in log, log[-2000:]
            assert "stopped after a fatal error" in log, log[-2000:]
            print("  metadata log read-only: node 1 halted, node %d leads, ISR %s; 20 acknowledged (%.1f s)"
                  % (ps[0], ps[2], time.monotonic() - t0))
    finally:
        if fs:
            fs.close()
        shutil.rmtree(base, ignore_errors=True)
    left = nemesis_disk.leftovers(base, os.getpid())
    assert not left, left


if __name__ == "__main__":
    main("disk-failures")
