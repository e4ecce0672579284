#!/usr/bin/python3
"""The process, disk and clock nemeses (tests/fault/nemesis_node.py,
nemesis_disk.py, nemesis_clock.py) each shown to do what it says on a real
three-node loopback cluster (tests/integration/cluster.py, through the
small adapter Loopback below, which gives it netcluster's API):

- processes: a SIGKILLed node (random, a partition's leader, the active
  controller) is gone and comes back serving under a new pid, and the
  leadership it held moves; every node killed at once (log.durability=sync)
  and restarted loses nothing acknowledged; a paused leader has every
  thread stopped (T), loses its leadership past its session, and runs
  again after.
- disks (root): node 1's data directory on its own loop-mounted ext4.
  Stall: node 1's threads are in the blkio group, which counts the
  writes it let through, and a partition only node 1 holds acknowledges
  fewer sequential produces while throttled than in as long a window
  before. Full: the leader on the full filesystem answers
  KAFKA_STORAGE_ERROR (56), never acknowledges what it did not write, and
  every acknowledged record is read back once space returns and the node
  restarts (the partition stays failed until then: docs/fault-testing.md).
  Fail: after EXT4_IOC_SHUTDOWN nothing more is acknowledged by node 1's
  partition; after the repair (umount, e2fsck, mount, restart) everything
  acknowledged is there.
- clock: node 2 restarted under libfaketime; a +1 h offset shows in the
  LogAppendTime of the records it leads and in its uptime metric, and
  goes when the nemesis stops.

Everything is removed afterwards (tests/fault/nemesis_disk.py sweep()
finds what an interrupted run left).

Run: /usr/bin/python3 tests/fault/test_nemeses_node.py [test ...]
"""

import os
import random
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import main, skip, temp_dir, test  # noqa: E402
from cluster import CLUSTER, Cluster, create_topic, partitions, until  # noqa: E402

import nemesis_clock  # noqa: E402
import nemesis_disk  # noqa: E402
import nemesis_node  # noqa: E402
from nemeses_node import NODE_NEMESES  # noqa: E402

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


class Loopback:
    """tests/integration/cluster.py's Cluster with netcluster's API
    (nodes, pid, kill, restart waiting until the node serves, data_dir,
    log, leader_of, controller); node_env={id: {...}} is added to that
    node's environment at each restart."""

    def __init__(self, c, node_env=None):
        self.c = c
        self.nodes = list(range(1, c.n + 1))
        self.node_env = node_env or {}
        self.clock_files = {}

    def pid(self, n):
        return self.c.pid(n)

    def kill(self, n):
        self.c.kill(n)

    def restart(self, n):
        p = subprocess.run([CLUSTER, "restart", str(n), "--dir", self.c.dir], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=180, env=dict(self.c.env, **self.node_env.get(n, {})))
        assert p.returncode == 0, (n, p.stderr.decode())
        until("node %d lists itself in Metadata" % n,
              lambda: n in AdminClient({"bootstrap.servers": self.c.addr(n)}).list_topics(timeout=5).brokers)

    start = restart

    def data_dir(self, n):
        return self.c.data_dir(n)

    def log(self, n):
        return self.c.log(n)

    def netns(self, n):
        return None

    def leader_of(self, topic, p):
        return partitions(self.c.bootstrap, topic)[p][0]

    def controller(self):
        return AdminClient({"bootstrap.servers": self.c.bootstrap}).list_topics(timeout=10).controller_id


def create(c, name, assignment, config=None):
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    a.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment, config=config or {})],
                    operation_timeout=30)[name].result(60)
    until("%s led and in sync" % name, lambda: (lambda ps: ps and all(
        v[0] == assignment[p][0] and len(v[2]) == len(assignment[p]) for p, v in ps.items()))(
        partitions(c.bootstrap, name)))


def produce(bootstrap, topic, values, partition=0, **conf):
    """values, acks=all: {value: error name or None}, each one answered."""
    out = {}
    p = Producer(dict({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000,
                       "linger.ms": 0}, **{k.replace("_", "."): v for k, v in conf.items()}))
    for v in values:
        p.produce(topic, value=v, partition=partition,
                  on_delivery=lambda err, m: out.__setitem__(m.value(), err and err.name()))
        p.poll(0)
    assert p.flush(120) == 0, "records left unanswered"
    return out


def read_all(bootstrap, topic, partition=0):
    """Every record of the partition: [(value, timestamp)]."""
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "nemeses-node", "enable.auto.commit": False})
    try:
        lo, hi = cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        cons.assign([TopicPartition(topic, partition, lo)])
        out = []
        end = time.monotonic() + 60
        while len(out) < hi - lo:
            assert time.monotonic() < end, "read %d of %d" % (len(out), hi - lo)
            for m in cons.consume(1000, 1.0):
                if not m.error():
                    out.append((m.value(), m.timestamp()))
        return out
    finally:
        cons.close()


def acked(results):
    return [v for v, e in results.items() if e is None]


# ---- processes -------------------------------------------------------------

@test
def process_nemeses_kill_and_pause_nodes_and_the_cluster_comes_back():
    sets = ["min.insync.replicas=2", "default.replication.factor=3", "broker.session.timeout.ms=3000",
            "replica.lag.time.max.ms=3000", "log.durability=sync"]
    rng = random.Random(20)
    with Cluster(3, sets=sets) as c:
        lc = Loopback(c)
        lc.topic = "procs"
        create_topic(c.bootstrap, "procs", 1, 3)
        until("procs led", lambda: (lambda ps: ps and ps[0][0] > 0 and len(ps[0][2]) == 3)(
            partitions(c.bootstrap, "procs")))
        sent = []

        def write(tag):
            vals = [b"%s-%d" % (tag, i) for i in range(20)]
            r = produce(c.bootstrap, "procs", vals, enable_idempotence=True)
            assert acked(r) == vals, r
            sent.extend(vals)

        write(b"start")
        for name in ("kill-random", "kill-leader", "kill-controller"):
            nem = NODE_NEMESES[name]()
            before = {n: lc.pid(n) for n in lc.nodes}
            led = lc.leader_of("procs", 0) if name == "kill-leader" else lc.controller()
            d = nem.start(lc, rng)
            n = d["node"]
            assert nemesis_node.gone(d["pid"]) and lc.pid(n) is None, d
            if name != "kill-random":
                assert n == led, (name, n, led)
            if name == "kill-leader":
                until("a new leader of procs-0", lambda: lc.leader_of("procs", 0) not in (-1, n))
            if name == "kill-controller":
                until("a new controller", lambda: lc.controller() not in (-1, None, n))
            nem.stop(lc)
            assert lc.pid(n) not in (None, before[n]), (name, n)
            write(name.encode())
        nemesis_node.until("3 in sync", lambda: len(partitions(c.bootstrap, "procs")[0][2]) == 3)

        nem = NODE_NEMESES["kill-all"]()
        d = nem.start(lc, rng)
        assert all(nemesis_node.gone(p) for p in d["pids"]) and all(lc.pid(n) is None for n in lc.nodes), d
        nem.stop(lc)
        assert all(lc.pid(n) for n in lc.nodes)
        write(b"after-all")

        nem = NODE_NEMESES["pause-leader"](hold_s=1)
        old = lc.leader_of("procs", 0)
        d = nem.start(lc, rng)
        assert d["node"] == old and all(s in "Tt" for s in nemesis_node.thread_states(d["pid"])), d
        others = ",".join(c.addr(n) for n in lc.nodes if n != old)
        until("a new leader while %d is paused" % old,
              lambda: partitions(others, "procs")[0][0] not in (-1, old))
        assert all(s in "Tt" for s in nemesis_node.thread_states(d["pid"]))
        nem.stop(lc)
        assert not any(s in "Tt" for s in nemesis_node.thread_states(d["pid"]))
        until("node %d back in the ISR" % old, lambda: old in partitions(c.bootstrap, "procs")[0][2], timeout=90)
        write(b"after-pause")
        got = [v for v, _ in read_all(c.bootstrap, "procs")]
        assert got == sent, "read %d records, acknowledged %d" % (len(got), len(sent))


# ---- disks -----------------------------------------------------------------

def onto_loopfs(lc, n, fs):
    """Node n's data directory moved onto fs (a symlink to fs.mnt/data
    where it was); the node restarted."""
    c = lc.c
    c.kill(n)
    d = c.data_dir(n)
    shutil.copytree(d, os.path.join(fs.mnt, "data"), symlinks=True)
    shutil.rmtree(d)
    os.symlink(os.path.join(fs.mnt, "data"), d)
    lc.restart(n)


def sequential_acks(bootstrap, topic, seconds, tag):
    """How many records one at a time (each waiting for its ack, acks=1)
    are acknowledged in seconds; the last one's wait is let finish."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0, "message.timeout.ms": 60000})
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        res = []
        p.produce(topic, value=b"%s-%d" % (tag, n), partition=0, on_delivery=lambda e, m: res.append(e))
        while not res and time.monotonic() < end:
            p.poll(0.05)
        if res and res[0] is None:
            n += 1
    assert p.flush(60) == 0
    return n


@test
def disk_nemeses_stall_fill_and_fail_a_nodes_filesystem():
    if os.geteuid() != 0:
        skip("needs root (loop devices, mounts, cgroups)")
    if not os.path.isdir(nemesis_disk.BLKIO):
        skip("no cgroup v1 blkio hierarchy at %s" % nemesis_disk.BLKIO)
    nemesis_disk.sweep()
    base = temp_dir("sluicef-")
    fs = None
    rng = random.Random(20)
    try:
        fs = nemesis_disk.LoopFs(base, "n1", size_mb=48)
        sets = ["min.insync.replicas=2", "default.replication.factor=3"]
        with Cluster(3, sets=sets) as c:
            lc = Loopback(c)
            onto_loopfs(lc, 1, fs)
            assert nemesis_disk.fs_of(c.data_dir(1))[1] == fs.dev

            # stall: a partition only node 1 holds, acks=1 one at a time
            create(c, "stall", [[1]])
            free_run = sequential_acks(c.bootstrap, "stall", 3, b"free")
            nem = nemesis_disk.DiskStall(node=1, bps=1024, iops=1)
            d = nem.start(lc, rng)
            try:
                assert d["device"] == fs.majmin, d
                stalled = sequential_acks(c.bootstrap, "stall", 3, b"stalled")
                through = nem.written()
            finally:
                nem.stop(lc)
            assert not os.path.exists(d["cgroup"])
            print("  acknowledged in 3 s: %d free, %d throttled (%d bytes through the group)"
                  % (free_run, stalled, through))
            assert stalled < free_run and through > 0, (free_run, stalled, through)
            assert sequential_acks(c.bootstrap, "stall", 1, b"after") > 0

            # full: node 1 leads "full"; small segments, so new ones need
            # space the filler took
            create(c, "full", [[1, 2, 3]], {"segment.bytes": str(1 << 20)})
            before = produce(c.bootstrap, "full", [b"before-%d" % i for i in range(50)])
            assert len(acked(before)) == 50, before
            nem = nemesis_disk.DiskFull(node=1)
            d = nem.start(lc, rng)
            print("  filler %d bytes, %d left" % (d["filled_bytes"], d["free_bytes_left"]))
            during = {}
            big = b"x" * 8000
            for i in range(60):
                r = produce(c.bootstrap, "full", [b"during-%d-%d-" % (i, j) + big for j in range(20)],
                            retries=0, enable_idempotence=False, **{"message.timeout.ms": 30000})
                during.update(r)
                if any(e for e in r.values()):
                    break
            errors = {e for e in during.values() if e}
            print("  while full: %d acknowledged, errors %s" % (len(acked(during)), sorted(errors)))
            assert "KAFKA_STORAGE_ERROR" in errors, errors
            assert lc.pid(1), "node 1 exited on a full disk:\n" + lc.log(1)[-3000:]
            nem.stop(lc)
            again = produce(c.bootstrap, "full", [b"space-back-%d" % i for i in range(5)],
                            retries=0, enable_idempotence=False, **{"message.timeout.ms": 30000})
            print("  space back, no restart: %s" % sorted({str(e) for e in again.values()}))
            lc.restart(1)
            after = produce(c.bootstrap, "full", [b"after-%d" % i for i in range(20)])
            assert len(acked(after)) == 20, after
            got = [v for v, _ in read_all(c.bootstrap, "full")]
            want = acked(before) + acked(during) + acked(again) + acked(after)
            assert sorted(set(got) & set(want)) == sorted(want), "acknowledged and not read: %d" % len(
                set(want) - set(got))
            assert len(got) == len(set(got)), "a record read twice"

            # fail: EIO on every write of node 1's filesystem
            create(c, "fail", [[1, 2, 3]])
            before = produce(c.bootstrap, "fail", [b"before-%d" % i for i in range(20)])
            assert len(acked(before)) == 20
            nem = nemesis_disk.DiskFail(node=1)
            d = nem.start(lc, rng)
            during = produce(c.bootstrap, "fail", [b"during-%d" % i for i in range(5)], retries=0,
                             enable_idempotence=False, **{"message.timeout.ms": 20000})
            print("  after the shutdown: %s; node 1 %s" % (
                sorted({str(e) for e in during.values()}), "runs" if lc.pid(1) else "exited"))
            nem.stop(lc)
            assert lc.pid(1) and os.path.ismount(fs.mnt)
            got = [v for v, _ in read_all(c.bootstrap, "fail")]
            want = acked(before) + acked(during)
            assert set(want) <= set(got), "acknowledged and not read: %r" % sorted(set(want) - set(got))
    finally:
        if fs:
            fs.close()
        shutil.rmtree(base, ignore_errors=True)
    left = [x for x in nemesis_disk.sweep(force=False) if base in x]
    assert not left, left


# ---- clock -----------------------------------------------------------------

@test
def a_clock_skew_moves_a_nodes_log_append_times_and_goes_when_stopped():
    try:
        nemesis_clock.library()
    except FileNotFoundError as e:
        skip(str(e))
    base = temp_dir("sluicef-clock-")
    try:
        with Cluster(3, sets=["min.insync.replicas=2"]) as c:
            path = os.path.join(base, "n2.faketime")
            lc = Loopback(c, node_env={2: nemesis_clock.node_env(path)})
            lc.clock_files = {2: path}
            lc.restart(2)
            with open("/proc/%d/environ" % lc.pid(2), "rb") as f:
                assert b"LD_PRELOAD=" in f.read()
            create(c, "clock", [[2, 1, 3]], {"message.timestamp.type": "LogAppendTime"})

            def stamp(tag):
                r = produce(c.bootstrap, "clock", [tag])
                assert acked(r) == [tag], r
                return dict(read_all(c.bootstrap, "clock"))[tag][1] / 1000.0

            t = stamp(b"plain")
            assert abs(t - time.time()) < 300, t - time.time()
            nem = nemesis_clock.ClockSkew(node=2, offset_s=3600)
            d = nem.start(lc, random.Random(20))
            assert d == {"node": 2, "offset": "+3600"}, d
            seen = []
            until("node 2's LogAppendTime an hour ahead", lambda: seen.append(
                stamp(b"skewed-%d" % len(seen)) - time.time()) or seen[-1] > 3000)
            nem.stop(lc)
            after = []
            until("node 2's LogAppendTime back", lambda: after.append(
                stamp(b"back-%d" % len(after)) - time.time()) or abs(after[-1]) < 300)
            print("  LogAppendTime - now: %+.0f s skewed, %+.0f s after" % (seen[-1], after[-1]))
            assert lc.pid(2)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    # SIGTERM unwinds like Ctrl-C: the finally blocks remove what was made
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    main("test_nemeses_node")
