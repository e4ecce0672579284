#!/usr/bin/python3
"""What a broker does when a disk under it fails (docs/storage.md, "A
failed disk"), on three real loopback nodes with data directories on
loop-mounted ext4 filesystems of their own (tests/fault/nemesis_disk.py's
LoopFs; root). a_failed_disk_refuses_then_recovers_or_hands_over_leadership,
node 1's data directory on one (its metadata quorum log left on the other
disk, as Kafka's metadata.log.dir apart from log.dirs), node 2's copy of
topic a's partition on another (a symlink out of its log directory):

- full: node 1's filesystem filled (DiskFull): Produce to the partition
  node 1 leads is answered KAFKA_STORAGE_ERROR (56); once the filler is
  removed the same node, not restarted, takes Produce again, and every
  record acknowledged before, during and after is read back.
- a follower's partition: node 2's filesystem of a-0 turned read-only:
  node 2 leaves a's ISR, its sluice_partition_failed for a-0 is 1, and it
  goes on replicating b from the same leader (b's min.insync.replicas 3:
  acks=all Produce succeeds, node 2 stays in b's ISR; before the fix its
  fetcher asked nothing more of the leader, and every record timed out).
  Node 2's log directory is fine: it keeps running.
- read-only (EROFS, errors=remount-ro: DiskReadOnly) under node 1's log
  directory: node 1's log of the partition goes offline, an in-sync
  follower leads, acks=all Produce succeeds again, every acknowledged
  record is read back; node 1, all its log dirs failed, halts (exit 1, a
  line naming the directory), as Kafka's broker does.

a_failed_metadata_log_halts_the_node: the whole data directory of nodes 1
and 3, the quorum's log included, each on a disk of its own (the default
layout), raft snapshotting every 8 entries:

- read-only under node 1, the quorum's leader (a restart of another
  leader hands it on until node 1 leads): node 1 cannot take the change
  that moves its leadership, so it halts (exit 1, one line naming the
  directory and the error), as Kafka's broker does when its metadata log
  directory fails; an in-sync follower leads, acks=all Produce succeeds
  again, every acknowledged record is read back. After the failure node
  1's controller proposes no leader change (before the fix each refused
  proposal made it look again: the same changes, printed 351,798 times).
- full under node 3, then 20 topics made (40 records, 5 snapshots): node
  3 serves every one of them (its metadata log goes on in raft_uv's
  preallocated, recycled segments), or, when a write of it fails, halts
  naming ENOSPC; its metadata is never stale.

a_full_metadata_disk_on_the_active_controller_moves_the_controller: node
1, the quorum's leader, its whole data directory on a disk of its own,
raft_uv's segments 16 KiB (SLUICE_TEST_RAFT_SEGMENT_KIB), its disk
filled, then topics made one a request through node 2 until node 1 exits:
it halts with a line naming ENOSPC (before the fix: SIGSEGV inside
libraft, no line), another voter leads the quorum and takes more topics,
every acknowledged topic is on nodes 2 and 3, and on node 1 restarted
with space.

The regression tests of issue 20's disk findings (docs/fault-testing.md).
Everything is removed afterwards (nemesis_disk.sweep() finds what an
interrupted run left).

Run: /usr/bin/python3 tests/fault/test_disk_failures.py [test ...]
"""

import contextlib
import os
import random
import re
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import main, temp_dir, test  # noqa: E402
from cluster import Cluster, partitions, until  # noqa: E402

import nemesis_disk  # noqa: E402
from nemesis_node import restart_all  # noqa: E402

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
SETS = ["min.insync.replicas=2", "default.replication.factor=3", "broker.session.timeout.ms=2000",
        "broker.heartbeat.interval.ms=500", "replica.lag.time.max.ms=3000"]


@contextlib.contextmanager
def loop_cluster(env=None):
    """Three loopback nodes (SETS; env: their environment's additions) and
    a maker of loop filesystems, fs(name, size_mb), each removed
    afterwards, as is every leftover of an earlier run
    (nemesis_disk.sweep); (None, None) without root."""
    if os.geteuid() != 0:
        print("  (needs root: not run)")
        yield None, None
        return
    nemesis_disk.sweep()
    base = temp_dir("sluicef-")
    made = []

    def fs(name, size_mb=48):
        made.append(nemesis_disk.LoopFs(base, name, size_mb=size_mb))
        return made[-1]
    try:
        with Cluster(3, sets=SETS, env=env) as c:
            yield c, fs
    finally:
        for f in made:
            f.close()
        shutil.rmtree(base, ignore_errors=True)
    left = nemesis_disk.leftovers(base, os.getpid())
    assert not left, left


def move_onto(c, moves):
    """Each node of moves, {node: (fs, quorum)}, stopped, its data
    directory moved onto fs (a symlink where it was), all started again at
    once. quorum False: the metadata quorum's log stays on the disk it was
    on (a symlink from fs), as Kafka's metadata.log.dir on a disk of its
    own, so what fails on fs is a data disk; True: the quorum's log moves
    too (one disk for everything, the default layout)."""
    for node, (fs, quorum) in moves.items():
        c.kill(node)
        d = c.data_dir(node)
        keep = d + ".quorum"
        if not quorum:
            shutil.move(os.path.join(d, QUORUM_DIR), keep)
        shutil.copytree(d, os.path.join(fs.mnt, "data"), symlinks=True)
        shutil.rmtree(d)
        os.symlink(os.path.join(fs.mnt, "data"), d)
        if not quorum:
            os.symlink(keep, os.path.join(fs.mnt, "data", QUORUM_DIR))
    restart_all(c, list(moves))
    for node in moves:
        until("node %d serves" % node,
              lambda: node in AdminClient({"bootstrap.servers": c.addr(node)}).list_topics(timeout=5).brokers)


def partition_onto(c, node, fs, topic):
    """Before topic is made: its partition 0's directory on node is a
    symlink to one on fs (a partition on a disk of its own, out of the
    log directory's filesystem)."""
    os.makedirs(os.path.join(fs.mnt, "%s-0" % topic))
    os.symlink(os.path.join(fs.mnt, "%s-0" % topic), os.path.join(c.data_dir(node), "%s-0" % topic))


def halted(c, node, why):
    """node exits by itself, its log saying why and that it stopped after a
    fatal error (sluiced's exit 1)."""
    until("node %d exits" % node, lambda: c.pid(node) is None, timeout=60)
    log = c.log(node)
    assert why in log, log[-2000:]
    assert "stopped after a fatal error" in log, log[-2000:]
    return log


@test
def a_failed_disk_refuses_then_recovers_or_hands_over_leadership():
    """full, one partition's disk on a follower, read-only (the module's
    docstring)."""
    with loop_cluster() as (c, fs):
        if not c:
            return
        move_onto(c, {1: (fs("n1"), False)})
        partition_onto(c, 2, fs("n2", size_mb=16), "a")
        create(c, {"full": {"segment.bytes": str(1 << 20)}, "ro": {}, "a": {},
                   "b": {"min.insync.replicas": "3"}})
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

        # ---- one partition's log fails on a follower: that partition
        # alone leaves its fetches; b, from the same leader, goes on
        t0 = time.monotonic()
        before = produce(c.bootstrap, "a", [b"before-%d" % i for i in range(20)])
        assert len(acked(before)) == 20, before
        nemesis_disk.DiskReadOnly(node=2).inject(nemesis_disk.fs_of(os.path.join(c.data_dir(2), "a-0")))
        during = produce(c.bootstrap, "a", [b"during-%d" % i for i in range(20)], enable_idempotence=True)
        assert acked(during) == list(during), during
        until("node 2 out of a's ISR", lambda: 2 not in partitions(c.bootstrap, "a")[0][2])
        assert c.metric(2, 'sluice_partition_failed{topic="a",partition="0"') == 1
        # b needs all three in sync (min.insync.replicas 3): each record
        # acknowledged is on node 2; for longer than the fetcher waits to
        # ask again for a partition whose append failed (0.5 s), after
        # which the fetcher before the fix asked nothing more
        bs, t1 = [], time.monotonic()
        while time.monotonic() - t1 < 1.5:
            r = produce(c.bootstrap, "b", [b"b-%d-%d" % (len(bs), i) for i in range(5)],
                        message_timeout_ms=10000)
            assert acked(r) == list(r), "node 2 stopped replicating b: %s" % r
            bs.extend(r)
        ps = partitions(c.bootstrap, "b")[0]
        assert ps[0] == 1 and sorted(ps[2]) == [1, 2, 3], ps
        assert c.pid(2), "node 2 exited (its log directory did not fail)"
        check_readable(c.bootstrap, "a", acked(before) + acked(during))
        print("  a follower's partition failed: node 2 out of a's ISR, b's ISR %s, %d acks=all records on b "
              "(%.1f s)" % (ps[2], len(bs), time.monotonic() - t0))

        # ---- read-only: the leaderships move to in-sync followers and
        # node 1, its log directory failed, halts
        t0 = time.monotonic()
        before = produce(c.bootstrap, "ro", [b"before-%d" % i for i in range(20)])
        assert len(acked(before)) == 20, before
        nemesis_disk.DiskReadOnly(node=1).inject(nemesis_disk.fs_of(c.data_dir(1)))
        # retried (idempotent) until the new leader takes them
        during = produce(c.bootstrap, "ro", [b"during-%d" % i for i in range(20)], enable_idempotence=True)
        assert acked(during) == list(during), during
        log = halted(c, 1, "all log dirs in %s have failed" % c.data_dir(1))
        assert "Read-only file system" in log and "offline" in log, log[-2000:]
        others = ",".join(c.addr(n) for n in (2, 3))
        ps = partitions(others, "ro")[0]
        assert ps[0] in (2, 3) and 1 not in ps[2], ps
        check_readable(others, "ro", acked(before) + acked(during))
        line = [x for x in log.splitlines() if "all log dirs in" in x][0]
        print("  read-only: node 1 halted, node %d leads, ISR %s; 20 acknowledged (%.1f s): %s"
              % (ps[0], ps[2], time.monotonic() - t0, line))


@test
def a_failed_metadata_log_halts_the_node():
    """read-only, then full: a node whose metadata quorum log cannot be
    written halts (the module's docstring)."""
    # raft snapshots every 8 entries (docs/cluster.md's test knob): on a
    # full disk the quorum's log goes on into the segments raft_uv
    # preallocated (8 MiB each, three ahead); a snapshot is its first
    # write that needs new space
    with loop_cluster(env={"SLUICE_TEST_METADATA_KEEP": "8"}) as (c, fs):
        if not c:
            return
        move_onto(c, {1: (fs("n1"), True), 3: (fs("n3"), True)})
        # node 1 leads the quorum (the active controller): a restart of
        # the one that leads hands it to another voter
        for _ in range(8):
            lead = until("a quorum leader", lambda: next((n for n in (1, 2, 3) if c.pid(n) and c.metric(
                n, "sluice_controller_quorum_is_leader ") == 1), None))
            if lead == 1:
                break
            c.restart(lead)
        assert lead == 1, "node %d still leads the quorum" % lead
        create(c, {"meta": {}})

        # ---- read-only: node 1 cannot append the change that moves its
        # leadership; it halts and an in-sync follower leads
        t0 = time.monotonic()
        before = produce(c.bootstrap, "meta", [b"before-%d" % i for i in range(20)])
        assert len(acked(before)) == 20, before
        nemesis_disk.DiskReadOnly(node=1).inject(nemesis_disk.fs_of(c.data_dir(1)))
        # retried (idempotent) until the new leader takes them
        during = produce(c.bootstrap, "meta", [b"during-%d" % i for i in range(20)], enable_idempotence=True)
        assert acked(during) == list(during), during
        log = halted(c, 1, "the metadata quorum's log")
        # its controller, every proposal refused once the log failed,
        # proposed no leader change after: before the fix it looked at the
        # partitions again at each refusal, printing the same changes
        # hundreds of times until the node was gone
        after = log.split("the metadata quorum's log", 1)[1]
        moves = re.findall(r"^sluiced: partition \S+: leader -?\d+ -> -?\d+.*$", after, re.M)
        assert not moves, "%d leader changes proposed after the failure: %s" % (len(moves), moves[:3])
        others = ",".join(c.addr(n) for n in (2, 3))
        ps = partitions(others, "meta")[0]
        assert ps[0] in (2, 3) and 1 not in ps[2], ps
        check_readable(others, "meta", acked(before) + acked(during))
        print("  metadata log read-only: node 1 halted, node %d leads, ISR %s; 20 acknowledged (%.1f s)"
              % (ps[0], ps[2], time.monotonic() - t0))

        # ---- full: node 3's disk filled (the quorum's log on it), then
        # 40 metadata records (20 topics made, 5 snapshots): its metadata
        # log goes on in raft_uv's recycled segments and node 3 serves
        # every new topic, or, when a write of it fails, node 3 halts
        # naming ENOSPC; never stale metadata
        t0 = time.monotonic()
        nemesis_disk.DiskFull(node=3).start(Nodes(c), random.Random(3))
        names = ["m%d" % i for i in range(20)]
        admin = AdminClient({"bootstrap.servers": c.addr(2)})
        for f in admin.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=30).values():
            try:
                f.result(60)
            except Exception as e:   # noqa: BLE001 - node 3 halted: no quorum left
                print("  (create: %s)" % e)

        def current_or_halted():
            if c.pid(3) is None:
                return "halted"
            md = AdminClient({"bootstrap.servers": c.addr(3)}).list_topics(timeout=5)
            return set(names) <= set(md.topics) and "serves every new topic"
        what = until("node 3 serves the new topics or halts", current_or_halted, timeout=30)
        if what == "halted":
            log = halted(c, 3, "the metadata quorum's log")
            line = [x for x in log.splitlines() if "the metadata quorum's log" in x][0]
            assert "No space left on device" in line, line
        print("  metadata log's disk full: node 3 %s (%.1f s)" % (what, time.monotonic() - t0))


def lead_quorum(c, node, voters=(1, 2, 3)):
    """Restart whichever voter leads the metadata quorum until node does
    (a restart hands the leadership to another voter)."""
    for _ in range(8):
        lead = until("a quorum leader", lambda: next((n for n in voters if c.pid(n) and c.metric(
            n, "sluice_controller_quorum_is_leader ") == 1), None))
        if lead == node:
            return
        c.restart(lead)
    raise AssertionError("node %d still leads the quorum" % lead)


def create_topics(bootstrap, names):
    """Each of names made (one partition, replication factor 1, a metadata
    record each), through bootstrap: the ones the controller acknowledged,
    and the errors of the others."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ok, errors = [], {}
    for n, f in admin.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=30,
                                    request_timeout=60).items():
        try:
            f.result(90)
            ok.append(n)
        except Exception as e:   # noqa: BLE001 - reported: the quorum's answer
            errors[n] = str(e)
    return ok, errors


def topics_at(c, node):
    return set(AdminClient({"bootstrap.servers": c.addr(node)}).list_topics(timeout=10).topics)


@test
def a_full_metadata_disk_on_the_active_controller_moves_the_controller():
    """The active controller's disk (the quorum's log and snapshots on it)
    fills while topics are made through another node: the controller
    either serves every change from raft_uv's preallocated segments or
    halts naming ENOSPC, and then another voter leads the quorum and takes
    changes; no change the quorum acknowledged is lost (every acknowledged
    topic is in the metadata of the nodes left, and of node 1 once its
    disk has space again and it is restarted)."""
    # raft_uv's segments of 16 KiB (docs/cluster.md's test knob): the
    # topics below fill the ones it prepared before the disk filled, and
    # it must create another on the full disk
    with loop_cluster(env={"SLUICE_TEST_METADATA_KEEP": "8", "SLUICE_TEST_RAFT_SEGMENT_KIB": "16"}) as (c, fs):
        if not c:
            return
        move_onto(c, {1: (fs("n1"), True)})
        lead_quorum(c, 1)
        t0 = time.monotonic()
        before, errs = create_topics(c.addr(2), ["pre%d" % i for i in range(4)])
        assert not errs, errs
        filler = nemesis_disk.DiskFull(node=1)
        filled = filler.start(Nodes(c), random.Random(1))
        try:
            # up to 60 topics, one request each, until node 1 exits (two
            # metadata records each, a snapshot every 8: each snapshot
            # closes raft_uv's open segment, and the next one it prepares
            # needs space the disk no longer has)
            acked_names, refused = [], {}
            for i in range(60):
                ok, errs = create_topics(c.addr(2), ["full%d" % i])
                acked_names += ok
                refused.update(errs)
                if c.pid(1) is None:
                    break

            # halted, its line naming ENOSPC (before the fix: SIGSEGV in
            # libraft, no line)
            log = halted(c, 1, "the metadata quorum's log")
            line = [x for x in log.splitlines() if "the metadata quorum's log" in x][0]
            assert "No space left on device" in line, line
            lead = until("another voter leads the quorum", lambda: next(
                (n for n in (2, 3) if c.metric(n, "sluice_controller_quorum_is_leader ") == 1), None),
                timeout=60)
            # the quorum that is left takes changes
            after, errs = create_topics(c.addr(3), ["after%d" % i for i in range(4)])
            assert not errs, errs
            acked_names += after
            # every acknowledged change reaches both nodes left (each
            # applies the committed records in its own time)
            want = set(before) | set(acked_names)
            for n in (2, 3):
                until("node %d holds every acknowledged topic" % n, lambda: want <= topics_at(c, n), timeout=30)
        finally:
            filler.stop(Nodes(c))
        # space again: node 1 restarts from its log and snapshot and
        # holds every acknowledged change
        c.restart(1)
        until("node 1 holds every acknowledged topic", lambda: want <= topics_at(c, 1), timeout=60)
        print("  active controller's metadata disk full (%d bytes left): node 1 halted, node %d leads the "
              "quorum; %d topics acknowledged before the halt (%d refused), none lost (%.1f s)"
              % (filled["free_bytes_left"], lead, len([x for x in acked_names if x.startswith("full")]),
                 len(refused), time.monotonic() - t0))


if __name__ == "__main__":
    main("disk-failures")
