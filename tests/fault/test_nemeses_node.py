#!/usr/bin/python3
"""The process, disk and clock nemeses (tests/fault/nemesis_node.py,
nemesis_disk.py, nemesis_clock.py) each shown to do what it says on one
real three-node loopback cluster (tests/integration/cluster.py, through the
small adapter Loopback below, which gives it netcluster's API):

- processes: a SIGKILLed node (the active controller; with
  SLUICEF_NEMESES_ALL=1 also a random one and a partition's leader) is
  gone and comes back serving under a new pid, and what it led moves;
  every node killed at once (log.durability=sync) and restarted loses
  nothing acknowledged; a paused leader has every thread stopped (T),
  loses its leadership past its session, and runs again after.
- clock: node 2 runs under libfaketime (set up while kill-all has every
  node down); a +1 h offset shows in the LogAppendTime of the records it
  leads and in its uptime metric, and goes when the nemesis stops (all:
  its retention deletes a 10-minute topic's closed segments at once).
- disks (root): node 1's data directory on its own loop-mounted ext4 (put
  there during kill-all too). Stall: node 1's threads in the blkio group,
  which counts the writes it let through, and a partition only node 1
  holds acknowledges fewer sequential produces while throttled than in as
  long a window before. Full: the leader on the full filesystem answers
  KAFKA_STORAGE_ERROR (56), never acknowledges what it did not write, takes
  produce again when space returns (tests/fault/test_disk_failures.py
  asserts that), and every acknowledged record is read back
  after the node restarts. Read-only (EROFS) and, with
  SLUICEF_NEMESES_ALL=1, failing (EIO): KAFKA_STORAGE_ERROR, everything
  acknowledged there after the repair; then a power cut of node 1's page
  cache with every process: nothing acknowledged lost.
- the sweeper removes a SIGKILLed run's loop filesystem and blkio group,
  and nothing of a live one's.

Each phase's time is printed. Everything is removed afterwards
(nemesis_disk.sweep() finds what an interrupted run left).

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
from harness import main, temp_dir, test  # noqa: E402
from cluster import CLUSTER, Cluster, partitions, until  # noqa: E402

import nemesis_clock  # noqa: E402
import nemesis_disk  # noqa: E402
import nemesis_node  # noqa: E402
from nemeses_node import NODE_NEMESES  # noqa: E402

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


# make test runs a shorter set (kill-controller for the SIGKILLs, no
# disk-fail); SLUICEF_NEMESES_ALL=1 runs every nemesis
QUICK = os.environ.get("SLUICEF_NEMESES_ALL") != "1"


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


def create(c, topics):
    """topics {name: (assignment, config)}, all at once; until each is led
    by its first replica with every replica in sync."""
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    todo = dict(topics)

    def created():
        # a node restarted by the nemesis before serves once ready; the
        # node answering may apply its unfencing a moment later, and a
        # manual assignment naming it is refused until then
        # (INVALID_REPLICA_ASSIGNMENT): asked again, the rest not
        fs = a.create_topics([NewTopic(name, len(asg), replica_assignment=asg, config=conf or {})
                              for name, (asg, conf) in todo.items()], operation_timeout=30)
        for name, f in fs.items():
            try:
                f.result(60)
                del todo[name]
            except KafkaException as e:
                if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    del todo[name]      # an earlier ask made it
                elif e.args[0].code() != KafkaError.INVALID_REPLICA_ASSIGNMENT:
                    raise
        return not todo
    until("%s created" % ", ".join(sorted(topics)), created)
    for name, (asg, _) in topics.items():
        until("%s led and in sync" % name, lambda: (lambda ps: ps and all(
            v[0] == asg[p][0] and len(v[2]) == len(asg[p]) for p, v in ps.items()))(
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


# ---- the run ---------------------------------------------------------------

class Phases:
    """Prints how long each phase took."""

    def __init__(self):
        self.t = time.monotonic()

    def __call__(self, what):
        now = time.monotonic()
        print("  %-44s %5.1f s" % (what, now - self.t), flush=True)
        self.t = now


def onto_loopfs(c, n, fs):
    """Node n's data directory (the node stopped) moved onto fs: a symlink
    to fs.mnt/data where it was."""
    d = c.data_dir(n)
    shutil.copytree(d, os.path.join(fs.mnt, "data"), symlinks=True)
    shutil.rmtree(d)
    os.symlink(os.path.join(fs.mnt, "data"), d)


def sequential_acks(p, topic, seconds, tag):
    """How many records producer p sends one at a time (each after the
    previous one's acknowledgement) are acknowledged within seconds."""
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        res = []
        p.produce(topic, value=b"%s-%d" % (tag, n), partition=0, on_delivery=lambda e, m, res=res: res.append(e))
        while not res and time.monotonic() < end:
            p.poll(0.05)
        if res and res[0] is None:
            n += 1
    assert p.flush(60) == 0
    return n


def produce_one(p, topic, value):
    """value through producer p, waiting for its answer: the error or None."""
    res = []
    p.produce(topic, value=value, partition=0, on_delivery=lambda e, m: res.append(e))
    assert p.flush(60) == 0
    return res[0]


def check_acked_readable(bootstrap, topic, want):
    got = [v for v, _ in read_all(bootstrap, topic)]
    missing = set(want) - set(got)
    assert not missing, "%s: %d acknowledged and not read (e.g. %r)" % (topic, len(missing), sorted(missing)[:3])
    assert len(got) == len(set(got)), "%s: a record read twice" % topic
    return got


@test
def each_nemesis_does_what_it_says_on_a_three_node_cluster():
    root = os.geteuid() == 0 and os.path.isdir(nemesis_disk.BLKIO)
    nemesis_clock.library()
    if root:
        nemesis_disk.sweep()
    base = temp_dir("sluicef-")
    fs = None
    rng = random.Random(20)
    ph = Phases()
    sets = ["min.insync.replicas=2", "default.replication.factor=3", "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=500",
            "replica.lag.time.max.ms=3000", "log.durability=sync", "log.retention.check.interval.ms=1000"]
    try:
        with Cluster(3, sets=sets) as c:
            lc = Loopback(c)
            lc.topic = "procs"
            create(c, {"procs": ([[1, 2, 3]], None)})
            sent = []

            def write(tag):
                vals = [b"%s-%d" % (tag, i) for i in range(20)]
                r = produce(c.bootstrap, "procs", vals, enable_idempotence=True)
                assert acked(r) == vals, r
                sent.extend(vals)

            write(b"start")
            ph("cluster up")

            # ---- processes: SIGKILL and restart
            for name in ("kill-controller",) if QUICK else ("kill-random", "kill-leader", "kill-controller"):
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
                ph(name)

            # every node at once; while they are down node 1's data moves
            # onto a loop filesystem of its own (root) and node 2 gets
            # libfaketime, both taking effect at the restart
            nem = NODE_NEMESES["kill-all"]()
            d = nem.start(lc, rng)
            assert all(nemesis_node.gone(p) for p in d["pids"]) and all(lc.pid(n) is None for n in lc.nodes), d
            if root:
                fs = nemesis_disk.LoopFs(base, "n1", size_mb=48)
                onto_loopfs(c, 1, fs)
            clock = os.path.join(base, "n2.faketime")
            lc.node_env[2] = nemesis_clock.node_env(clock)
            lc.clock_files = {2: clock}
            nem.stop(lc)
            assert all(lc.pid(n) for n in lc.nodes)
            write(b"after-all")
            check_acked_readable(c.bootstrap, "procs", sent)
            ph("kill-all (and nothing acknowledged lost)")

            # ---- a pause of the leader past its session
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
            write(b"after-pause")
            until("node %d back in the ISR" % old, lambda: old in partitions(c.bootstrap, "procs")[0][2], timeout=90)
            ph("pause-leader")

            # the others' topics, led by the node each fault is on
            create(c, {"clock": ([[2, 1, 3]], {"message.timestamp.type": "LogAppendTime"}),
                       "stall": ([[1]], None),
                       "full": ([[1, 2, 3]], {"segment.bytes": str(1 << 20)}),
                       "ro": ([[1, 2, 3]], None)})

            # ---- clock: node 2 leads "clock" (LogAppendTime)
            with open("/proc/%d/environ" % lc.pid(2), "rb") as f:
                assert b"LD_PRELOAD=" in f.read()

            cp = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0})
            cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "nemeses-clock"})
            cons.assign([TopicPartition("clock", 0, 0)])

            def stamp(tag):
                """tag's LogAppendTime (s) as read back."""
                assert produce_one(cp, "clock", tag) is None
                end = time.monotonic() + 30
                while time.monotonic() < end:
                    m = cons.poll(1.0)
                    if m is not None and not m.error() and m.value() == tag:
                        return m.timestamp()[1] / 1000.0
                raise AssertionError("%r not read back" % tag)

            t = stamp(b"plain")
            assert abs(t - time.time()) < 300, t - time.time()
            if not QUICK:
                # "ret", led by node 2: 10 minutes' retention, closed
                # segments of records written just now
                create(c, {"ret": ([[2, 1, 3]], {"retention.ms": "600000", "segment.bytes": "65536"})})
                r = produce(c.bootstrap, "ret", [b"r%d-" % i + b"x" * 1000 for i in range(400)],
                            batch_size=16000)
                assert len(acked(r)) == 400
            nem = nemesis_clock.ClockSkew(node=2, offset_s=3600)
            d = nem.start(lc, rng)
            assert d == {"node": 2, "offset": "+3600"}, d
            seen = []
            until("node 2's LogAppendTime an hour ahead", lambda: seen.append(
                stamp(b"skewed-%d" % len(seen)) - time.time()) or seen[-1] > 3000)
            up = lc.c.metric(2, "sluice_process_uptime_seconds")
            # uptime is on the monotonic clock: an hour's step moves it not
            assert 0 <= up < 1800, "node 2's uptime followed the wall clock: %.0f s" % up
            if not QUICK:
                # retention by the leader's skewed clock: every closed
                # segment of "ret" is past 10 minutes, on every copy
                cs = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "nemeses-ret"})
                lo = until("node 2's retention deletes ret's closed segments", lambda: (
                    lambda w: w[0] if w[0] > 0 else None)(
                    cs.get_watermark_offsets(TopicPartition("ret", 0), timeout=10)), timeout=30)
                cs.close()
                print("  retention under the skew: ret's log starts at %d of 400 (10 minutes' retention, "
                      "records written seconds before)" % lo)
            nem.stop(lc)
            after = []
            until("node 2's LogAppendTime back", lambda: after.append(
                stamp(b"back-%d" % len(after)) - time.time()) or abs(after[-1]) < 300)
            print("  LogAppendTime - now: %+.0f s skewed, %+.0f s after; node 2's uptime while skewed %.0f s"
                  % (seen[-1], after[-1], up))
            cons.close()
            assert lc.pid(2)
            ph("clock-skew")

            if not root:
                print("  (the disk nemeses need root and %s: not run)" % nemesis_disk.BLKIO)
                return

            # ---- disks: node 1's filesystem. Stall: a partition only node 1
            # holds, acks=1 one record at a time
            p = Producer({"bootstrap.servers": c.bootstrap, "acks": 1, "linger.ms": 0,
                          "message.timeout.ms": 60000})
            assert produce_one(p, "stall", b"warm-up") is None   # connected, metadata known
            free_run = sequential_acks(p, "stall", 1, b"free")
            nem = nemesis_disk.DiskStall(node=1, bps=1024, iops=1)
            d = nem.start(lc, rng)
            try:
                assert d["device"] == fs.majmin, d
                stalled = sequential_acks(p, "stall", 1, b"stalled")
                through = nem.written()
            finally:
                nem.stop(lc)
            assert not os.path.exists(d["cgroup"])
            print("  acknowledged in 1 s: %d free, %d throttled (%d bytes through the group)"
                  % (free_run, stalled, through))
            assert stalled < free_run and through > 0, (free_run, stalled, through)
            assert produce_one(p, "stall", b"after") is None
            ph("disk-stall")

            # full: node 1 leads "full"; small segments, so new ones need
            # space the filler took
            before = produce(c.bootstrap, "full", [b"before-%d" % i for i in range(50)])
            assert len(acked(before)) == 50, before
            nem = nemesis_disk.DiskFull(node=1)
            d = nem.start(lc, rng)
            during = {}
            big = b"x" * 8000
            for i in range(60):
                r = produce(c.bootstrap, "full", [b"during-%d-%d-" % (i, j) + big for j in range(20)],
                            retries=0, enable_idempotence=False, **{"message.timeout.ms": 30000})
                during.update(r)
                if any(e for e in r.values()):
                    break
            errors = {e for e in during.values() if e}
            leader = lc.leader_of("full", 0)
            print("  full (%d bytes filled): %d acknowledged, then %s; the leader is node %d"
                  % (d["filled_bytes"], len(acked(during)), sorted(errors), leader))
            assert "KAFKA_STORAGE_ERROR" in errors, errors
            assert lc.pid(1), "node 1 exited on a full disk:\n" + lc.log(1)[-3000:]
            nem.stop(lc)
            again = produce(c.bootstrap, "full", [b"space-back-%d" % i for i in range(5)],
                            retries=0, enable_idempotence=False, **{"message.timeout.ms": 30000})
            print("  space back, node 1 not restarted: %s" % sorted({str(e) for e in again.values()}))
            full_acked = acked(before) + acked(during) + acked(again)
            ph("disk-full")

            # read-only: EROFS on every write of node 1's filesystem; its
            # repair (stop) restarts node 1, which "full" waited for too
            before = produce(c.bootstrap, "ro", [b"before-%d" % i for i in range(20)])
            assert len(acked(before)) == 20
            nem = nemesis_disk.DiskReadOnly(node=1)
            d = nem.start(lc, rng)
            assert "emergency_ro" in open("/proc/mounts").read() or not os.access(fs.mnt, os.W_OK), d
            during = produce(c.bootstrap, "ro", [b"during-%d" % i for i in range(5)], retries=0,
                             enable_idempotence=False, **{"message.timeout.ms": 20000})
            print("  read-only: %s; node 1 %s" % (
                sorted({str(e) for e in during.values()}), "runs" if lc.pid(1) else "exited"))
            nem.stop(lc)
            assert lc.pid(1) and os.path.ismount(fs.mnt)
            after = produce(c.bootstrap, "full", [b"after-%d" % i for i in range(20)])
            assert len(acked(after)) == 20, after
            check_acked_readable(c.bootstrap, "full", full_acked + acked(after))
            check_acked_readable(c.bootstrap, "ro", acked(before) + acked(during))
            ph("disk-readonly (and the full one's records after the restart)")

            if QUICK:
                return
            # fail: EIO on every write of node 1's filesystem ("fail" made
            # now: node 1's leaderships moved while it restarted)
            create(c, {"fail": ([[1, 2, 3]], None)})
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
            check_acked_readable(c.bootstrap, "fail", acked(before) + acked(during))
            ph("disk-fail")

            # a power cut (log.durability=sync): node 1's page cache lost
            # with every process
            nem = NODE_NEMESES["disk-power-cut"]()
            d = nem.start(lc, rng)
            assert d["cut"] == [1] and all(nemesis_node.gone(p) for p in d["pids"]), d
            nem.stop(lc)
            assert all(lc.pid(n) for n in lc.nodes)
            write(b"after-power-cut")
            check_acked_readable(c.bootstrap, "procs", sent)
            ph("power-cut (and nothing acknowledged lost)")
    finally:
        if fs:
            fs.close()
        shutil.rmtree(base, ignore_errors=True)
    if root:
        left = nemesis_disk.leftovers(base, os.getpid())
        assert not left, left


SWEEP_CHILD = r"""
import os, sys, time
sys.path.insert(0, %r)
import nemesis_disk
fs = nemesis_disk.LoopFs(sys.argv[1], "swept", size_mb=16)
cg = os.path.join(nemesis_disk.BLKIO, "sluicef_%%d_n1" %% os.getpid())
os.mkdir(cg)
with open(os.path.join(cg, "blkio.throttle.write_bps_device"), "w") as f:
    f.write("%%s 4096\\n" %% fs.majmin)
print(os.getpid(), fs.dev, flush=True)
time.sleep(600)
"""


@test
def the_sweeper_removes_what_a_killed_run_left():
    if os.geteuid() != 0 or not os.path.isdir(nemesis_disk.BLKIO):
        print("  (needs root and %s: not run)" % nemesis_disk.BLKIO)
        return
    base = temp_dir("sluicef-sweep-")
    try:
        p = subprocess.Popen([sys.executable, "-c", SWEEP_CHILD % HERE, base], stdout=subprocess.PIPE)
        pid, dev = p.stdout.readline().split()
        pid, dev = int(pid), dev.decode()

        def attached():
            """dev still holds the child's image (its path, or what is
            left of it once the directory's bind mount is gone)"""
            out = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE", dev],
                                 capture_output=True, text=True).stdout
            return "image" in out
        assert len(nemesis_disk.leftovers(base, pid)) == 4, nemesis_disk.leftovers(base, pid)
        assert attached()
        assert not [x for x in nemesis_disk.sweep() if base in x or "_%d_" % pid in x], "swept a live run's"
        p.kill()   # SIGKILL: no finally of its own runs
        p.wait()
        done = nemesis_disk.sweep()
        assert not nemesis_disk.leftovers(base, pid), (done, nemesis_disk.leftovers(base, pid))
        assert not attached(), (done, dev)
        assert not os.path.exists(os.path.join(base, "sluicef-disk-swept")), done
    finally:
        nemesis_disk.sweep()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    # SIGTERM unwinds like Ctrl-C: the finally blocks remove what was made
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    main("test_nemeses_node")
