#!/usr/bin/python3
"""Replication over DPDK through a leader's loss (docs/replication.md,
Over DPDK): three sluiced nodes on net_tap ports whose kernel sides a
bridge joins (in a network namespace of the test's, removed at the end),
replication factor 3, min.insync.replicas=2. The leader of partition 0 is
killed with SIGKILL halfway through an acks=all producer's records:

- every record is acknowledged;
- the survivors followed the successor natively: their replication bytes
  all counted by the native path, no replica Fetch served over TCP;
- the killed node, restarted (its tap back on the bridge), catches up
  natively, and the three copies of every partition are the same bytes.

A tap moves onto the bridge only once its node is ready (its port
started), and the test checks that every queue the node opened is on the
moved interface. DPDK's net_tap opens its file descriptors with
TUNSETIFF on the interface's name, in sluiced's network namespace: one
(detached, no queue) when the device is probed, which makes the
interface, then one per queue when the port's queues are set up. A tap
moved away in between (this test did it as soon as the
interface appeared, while the nodes started) leaves the later queues to a
second tap of the same name made in the host's namespace, joined to
nothing: the frames sent on those queues are lost, and frames reach the
node only on the queues that moved (or, moved before the port starts,
the port fails to start: No such device). Which queues went astray
depended on timing, so a run lost some replication flows and not others
(a partition whose followers' REPLICA_FETCH or leader's REPLICA_DATA went
by a lost queue fell out of the ISR before the kill; a node whose
queues all went astray replicated nothing): 1 run of 9 passed; each of
the failed runs that looked had left a tap's queues behind. Moved once
ready: 10 of 10 alone, 8 of 8 beside two CPU-burning processes
(docs/replication.md).

SLUICE_DPDK_REPL_SHARDS=N runs nodes of N shards (default 1);
SLUICE_DPDK_LOGS=DIR keeps the nodes' logs there (their exit lines: the
native and replication counters).

`make itest-dpdk-replication`, after test_dpdk_replication.py (this test
alone: 27-43 s on the 2-core test machine, 38-77 s with both cores
burning; not in make test, whose budget is spent). Root; it fails, never
skips, when DPDK cannot start.

Run: /usr/bin/python3 tests/integration/test_dpdk_replication_failover.py
"""

import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, temp_dir, test  # noqa: E402
from cluster import Cluster, create_topic, eal_dirs_gone, partitions, same_logs, until, wait_isrs  # noqa: E402

from confluent_kafka import Producer  # noqa: E402

TOPIC = "dpdkfail"
RECORDS = int(os.environ.get("SLUICE_DPDK_REPL_RECORDS", "20000"))


SHARDS = int(os.environ.get("SLUICE_DPDK_REPL_SHARDS", "1"))


def metric(c, node, name):
    """The sum over the node's shards."""
    return sum(c.metric(node, "sluice_%s{shard=\"%d\"}" % (name, s)) for s in range(SHARDS))


def pairs(c, node):
    """The queue pairs node's port opened (its log's last port line: a
    restart appends to the log)."""
    m = re.findall(r"queues: (\d+) pairs", c.log(node))
    assert m, "node %d's log has no port line" % node
    return int(m[-1])


def ip(*args):
    subprocess.run(["ip"] + list(args), check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, timeout=30)


class Switch:
    """A bridge in a network namespace of its own (no host firewall between
    the nodes) joining the kernel sides of the nodes' net_tap ports. DPDK's
    net_tap gives its kernel side the port's own MAC: the bridge would take
    frames to that MAC as its own, so each kernel side gets another."""

    def __init__(self, tag):
        self.ns = tag + "sw"
        ip("netns", "add", self.ns)
        ip("-n", self.ns, "link", "add", "br0", "type", "bridge")
        ip("-n", self.ns, "link", "set", "br0", "up")

    def join(self, iface, k, pairs):
        """Move a started node's tap (its port started: every queue open)
        onto the bridge; pairs: the queue pairs the node's log says it
        opened, all of which must be on the moved interface."""
        ip("link", "set", iface, "netns", self.ns)
        ip("-n", self.ns, "link", "set", iface, "address", "02:00:5e:00:00:%02x" % k)
        ip("-n", self.ns, "link", "set", iface, "master", "br0", "up")
        self.check(iface, pairs)

    def check(self, iface, pairs):
        """A queue opened after the move would have made a second tap of
        that name in our namespace, its frames going nowhere."""
        left = subprocess.run(["ip", "link", "show", iface], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert left.returncode, "a second %s left behind: some of its queues are not on the bridge" % iface
        d = subprocess.run(["ip", "-n", self.ns, "-d", "link", "show", iface], stdout=subprocess.PIPE,
                           check=True).stdout.decode()
        q = re.search(r"numqueues (\d+)", d)
        assert q and int(q.group(1)) == pairs, "%s on the bridge with %s queues of %d" % (
            iface, q and q.group(1), pairs)

    def close(self):
        subprocess.run(["ip", "netns", "del", self.ns], stderr=subprocess.DEVNULL)


@test
def three_nodes_on_tap_a_leader_killed_the_followers_fetch_natively_from_its_successor():
    assert os.geteuid() == 0, "DPDK over net_tap needs root: this test does not skip"
    tag = "sdt%d" % (os.getpid() % 100000)
    net = "10.79.%d" % (os.getpid() % 200)
    base = temp_dir()
    sw = Switch(tag)
    c = None
    try:
        node_sets = []
        for n in (1, 2, 3):
            eal = ("--no-huge -m 256 --no-pci --no-telemetry --file-prefix=%s-%d --vdev=net_tap0,iface=%s%d"
                   % (tag, n, tag, n))
            node_sets += [(n, "dpdk.eal.args=" + eal), (n, "dpdk.listen=%s.%d:9095" % (net, n))]
        c = Cluster(3, base=base, node_sets=node_sets, shards=SHARDS,
                    sets=["dpdk.enable=true", "dpdk.prefix.length=24", "dpdk.poll.sleep.us=50",
                          "min.insync.replicas=2", "broker.session.timeout.ms=4000"])
        for n in (1, 2, 3):   # ready: their ports started (see the header)
            sw.join("%s%d" % (tag, n), n, pairs(c, n))
        create_topic(c.bootstrap, TOPIC, 3, 3)
        wait_isrs(c.bootstrap, TOPIC, 3)
        errors, acked = [], [0]

        def done(err, msg):
            if err:
                errors.append(err)
            else:
                acked[0] += 1

        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 60000})
        half = RECORDS // 2
        for i in range(RECORDS):
            if i == half:
                p.flush(60)
                victim = partitions(c.bootstrap, TOPIC)[0][0]
                c.kill(victim)
                seen = []

                def moved():
                    m = partitions(c.bootstrap, TOPIC)
                    seen[:] = [m]
                    return m and m[0][0] not in (-1, victim)

                try:
                    until("partition 0 led by another node", moved)
                except AssertionError:
                    print("  after killing node %d: %r; acked %d of %d, errors %r" % (victim, seen, acked[0], i,
                                                                                    errors[:2]), flush=True)
                    raise
            while True:
                try:
                    p.produce(TOPIC, value=b"v%08d" % i, key=b"k%d" % (i % 50), on_delivery=done)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        assert p.flush(90) == 0, "records not acknowledged in 90 s"
        assert not errors and acked[0] == RECORDS, (acked[0], errors[:3])
        live = [n for n in (1, 2, 3) if n != victim]
        native_in = sum(metric(c, n, "replication_native_bytes_in_total") for n in live)
        all_in = sum(metric(c, n, "replication_bytes_in_total") for n in live)
        tcp_out = sum(metric(c, n, "replication_bytes_out_total") for n in live)
        print("  %d records acks=all, node %d killed halfway; survivors' follower bytes %d, native %d, "
              "Fetch served %d" % (RECORDS, victim, all_in, native_in, tcp_out), flush=True)
        assert native_in > RECORDS * 9 and native_in == all_in and tcp_out == 0, (native_in, all_in, tcp_out)
        # the killed node back: its tap again on the switch; it catches up natively
        c.restart(victim)
        sw.join("%s%d" % (tag, victim), victim, pairs(c, victim))
        wait_isrs(c.bootstrap, TOPIC, 3, timeout=60)
        same_logs(c, TOPIC, 3, (1, 2, 3))
        assert metric(c, victim, "replication_native_bytes_in_total") > 0, "the restarted node fetched over TCP"
        assert metric(c, victim, "replication_native_bytes_in_total") == metric(
            c, victim, "replication_bytes_in_total")
        c.stop()
        # with nodes of several shards, how many fetches came by another
        # shard's queue than their partition's (the kernel's flow hash
        # picks the queue: not asserted, it may be none)
        handed = sum(int(x) for n in (1, 2, 3) for x in re.findall(r"(\d+) handed to another shard", c.log(n)))
        other = sum(int(x) for n in (1, 2, 3) for x in re.findall(r"(\d+) answered for another shard", c.log(n)))
        print("  REPLICA_FETCH handed to their partition's shard %d, answers sent for another shard %d"
              % (handed, other), flush=True)
    finally:
        keep = os.environ.get("SLUICE_DPDK_LOGS")
        if c and keep:   # the nodes' logs (exit lines included) kept for a look
            c.stop()
            os.makedirs(keep, exist_ok=True)
            for n in (1, 2, 3):
                with open(os.path.join(keep, "n%d.log" % n), "w") as f:
                    f.write(c.log(n))
        if c:
            c.close()
        sw.close()
        shutil.rmtree(base, ignore_errors=True)
        eal_dirs_gone(tag)


if __name__ == "__main__":
    main("dpdk_replication_failover")
