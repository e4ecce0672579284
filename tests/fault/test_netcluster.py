#!/usr/bin/python3
"""The fault harness itself (docs/fault-testing.md "The harness", "Network
faults"): a 3-node NetCluster, each network nemesis shown to have its effect,
and nothing left after close or after the owner's kill -9. Root only: without
root, ip, nft, tc or ping the tests FAIL naming what is missing (a fault suite
that cannot build its network tested nothing).

- the partitions (majority/minority, the leader with its clients, the leader
  from its clients, the non-transitive bridge): every namespace pings every
  other address exactly when the nemesis's detail says it may;
- one-way: the node's pings fail both ways, but the far side's ICMP counter
  (/proc/net/snmp InEchos, per namespace) shows the echoes that got through
  in the one direction left open, and only those;
- loss (30% each way on a node): some of 300 pings lost, none after stop;
- duplicate (50% on every node): ping reports DUP! replies, none after stop;
- slow link (tbf): a burst larger than its bucket leaves tbf overlimits;
- reorder (htb, half the replies in a 64 kbit/s class): ping sees replies
  after later ones, and all of them after stop;
- the runner's schedule and a nemesis's choices are the same for the same
  seed;
- heal_all leaves no sluicef table or qdisc; close leaves no namespace,
  veth, bridge or lock, nor does an owner's SIGTERM or SIGINT; a cluster
  whose owner is killed (SIGKILL) is removed
  by tests/fault/cleanup, which leaves a live cluster alone.

Run: /usr/bin/python3 tests/fault/test_netcluster.py [test...]   (about 20 s)
"""

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import main, test  # noqa: E402
import netcluster  # noqa: E402
import nemesis_net  # noqa: E402
from netcluster import NetCluster  # noqa: E402

C = None


def cluster():
    global C
    if C is None:
        if shutil.which("ping") is None:
            raise AssertionError("ping is not installed (scripts/setup: iputils-ping)")
        C = NetCluster(3, sets=["min.insync.replicas=2"])
    return C


def ns_of(c, x):
    return c.client_ns if x == "c" else c.netns(x)


def addr_of(c, x):
    return c.client_addr if x == "c" else c.addr(x)


def pings(c, pairs):
    """{(a, b): whether a's namespace got any reply from b (3 pings)}."""
    procs = {(a, b): subprocess.Popen(["ip", "netns", "exec", ns_of(c, a), "ping", "-n", "-q", "-c", "3", "-i", "0.1",
                                       "-W", "0.3", addr_of(c, b)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL) for a, b in pairs}
    return {k: p.wait(timeout=30) == 0 for k, p in procs.items()}


def check_matrix(c, side_a, side_b, what):
    ends = list(c.nodes) + ["c"]
    pairs = [(a, b) for a in ends for b in ends if a != b]
    got = pings(c, pairs)
    for (a, b), ok in got.items():
        cut = (a in side_a and b in side_b) or (a in side_b and b in side_a)
        assert ok == (not cut), "%s: %s -> %s %s, expected %s" % (
            what, a, b, "answered" if ok else "silent", "silent" if cut else "an answer")


def all_reach(c, what):
    check_matrix(c, [], [], what)


PARTITIONS = {
    "partition-halves": lambda d: (d["minority"], d["majority"]),
    "isolate-leader-with-clients": lambda d: ([d["leader"], "c"], d["others"]),
    "isolate-leader-from-clients": lambda d: ([d["leader"]], ["c"]),
    "partition-bridge": lambda d: (d["side_a"], d["side_b"]),
}


@test
def test_partitions():
    c = cluster()
    rng = random.Random(20)
    all_reach(c, "before any nemesis")
    for name, sides in PARTITIONS.items():
        n = nemesis_net.NEMESES[name]()
        detail = n.start(c, rng)
        a, b = sides(detail)
        assert a and b, (name, detail)
        check_matrix(c, a, b, "%s %s" % (name, detail))
        n.stop(c)
    all_reach(c, "after the partitions stopped")


def in_echos(c, x):
    snmp = subprocess.run(["ip", "netns", "exec", ns_of(c, x), "cat", "/proc/net/snmp"], stdout=subprocess.PIPE,
                          check=True).stdout.decode().splitlines()
    heads = [line.split() for line in snmp if line.startswith("Icmp:")]
    return int(heads[1][heads[0].index("InEchos")])


@test
def test_one_way():
    c = cluster()
    seen = set()
    for seed in range(40):   # until both directions were seen
        rng = random.Random(seed)
        n = nemesis_net.OneWay()
        d = n.start(c, rng)
        x = d["node"]
        y = next(i for i in c.nodes if i != x)
        before_x, before_y = in_echos(c, x), in_echos(c, y)
        got = pings(c, [(x, y), (y, x), (x, "c"), ("c", x)])
        assert not any(got.values()), (d, got)
        gained_x, gained_y = in_echos(c, x) - before_x, in_echos(c, y) - before_y
        if d["direction"] == "in":   # x hears nothing; what x sends arrives
            assert gained_x == 0 and gained_y == 3, (d, gained_x, gained_y)
        else:                        # x's sends go nowhere; it hears the others
            assert gained_y == 0 and gained_x >= 3, (d, gained_x, gained_y)
        n.stop(c)
        seen.add(d["direction"])
        if len(seen) == 2:
            all_reach(c, "after one-way stopped")
            return
    raise AssertionError("no seed of 40 gave both directions")


def ping_stats(c, a, b, count, size=56):
    out = subprocess.run(["ip", "netns", "exec", ns_of(c, a), "ping", "-n", "-q", "-c", str(count), "-i", "0.002",
                          "-W", "1", "-s", str(size), addr_of(c, b)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=60).stdout.decode()
    m = re.search(r"(\d+) packets transmitted, (\d+) received(?:, \+(\d+) duplicates)?", out)
    assert m, out
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


class Loss30(nemesis_net.Loss):
    low = high = 30


@test
def test_loss():
    c = cluster()
    n = Loss30()
    d = n.start(c, random.Random(3))
    target = d["nodes"][0]
    sent, got, _ = ping_stats(c, "c", target, 300)
    assert 0 < got < sent, ("30%% loss each way on %s: %d of %d answered" % (d, got, sent))
    print("  loss %s: %d of %d pings answered" % (d, got, sent))
    n.stop(c)
    sent, got, _ = ping_stats(c, "c", target, 100)
    assert got == sent, "after loss stopped: %d of %d" % (got, sent)


@test
def test_duplicate():
    c = cluster()
    n = nemesis_net.Duplicate()
    rng = random.Random(0)
    d = n.start(c, rng)
    target = d["nodes"][0]
    sent, got, dups = ping_stats(c, "c", target, 100)
    assert dups > 0 and got == sent, "duplicate %s: %d sent, %d received, %d DUP!" % (d, sent, got, dups)
    print("  duplicate %s: %d pings, %d DUP! replies" % (d, sent, dups))
    n.stop(c)
    sent, got, dups = ping_stats(c, "c", target, 50)
    assert dups == 0 and got == sent, "after duplicate stopped: %d DUP!" % dups


class Reorder50(nemesis_net.Reorder):
    """Half the packets into the slow class (64 kbit/s, chosen by the rng)."""

    def start(self, cluster, rng):
        class Fixed:
            def __init__(self, r):
                self.r = r

            def randint(self, a, b):
                return 50

            def choice(self, xs):
                return xs[0]

            def random(self):
                return 0.9   # one node

        return nemesis_net.Reorder.start(self, cluster, Fixed(rng))


@test
def test_reorder():
    c = cluster()
    n = Reorder50()
    d = n.start(c, random.Random(0))
    x = d["nodes"][0]
    out = subprocess.run(["ip", "netns", "exec", c.client_ns, "ping", "-n", "-c", "100", "-i", "0.002", "-s", "1400",
                          "-W", "1", c.addr(x)], stdout=subprocess.PIPE, timeout=60).stdout.decode()
    seqs = [int(v) for v in re.findall(r"icmp_seq=(\d+)", out)]
    back = sum(1 for a, b in zip(seqs, seqs[1:]) if b < a)
    assert back > 0, "reorder %s: %d replies, none out of order" % (d, len(seqs))
    print("  reorder %s: %d replies, %d after a later one" % (d, len(seqs), back))
    n.stop(c)
    _, got, _ = ping_stats(c, "c", x, 100, size=1400)
    assert got == 100, "after reorder stopped: %d of 100 answered" % got


def tbf_counts(c, x):
    """{device: (overlimits, dropped)} of the tbf qdiscs on node x's two
    sides: its eth0 (what it sends) and its veth in the root namespace (what
    it receives); a side without a tbf is left out."""
    found = {}
    for pre, dev in ((["ip", "netns", "exec", c.netns(x)], "eth0"), ([], c.veth(x))):
        out = subprocess.run(pre + ["tc", "-s", "qdisc", "show", "dev", dev],
                             stdout=subprocess.PIPE, check=True).stdout.decode()
        m = re.search(r"qdisc tbf .*?dropped (\d+), overlimits (\d+)", out, re.S)
        if m:
            found[dev] = (int(m.group(2)), int(m.group(1)))
    return found


@test
def test_slow_link():
    c = cluster()
    n = nemesis_net.SlowLink()
    d = n.start(c, random.Random(1))
    x = d["nodes"][0]
    before = tbf_counts(c, x)
    assert sorted(before) == sorted(["eth0", c.veth(x)]), ("a tbf on both sides of node %d" % x, before)
    assert all(v == (0, 0) for v in before.values()), (d, before)
    # 30 echoes of 8 KB at once through a 16 KB bucket. The inbound side (the
    # veth) sees the client's burst and must hold it back; the replies leave
    # eth0 already paced by it, so eth0's count depends on timing and is
    # only printed.
    ping_stats(c, "c", x, 30, size=8000)
    after = tbf_counts(c, x)
    over, dropped = after[c.veth(x)]
    assert over > 0, "the tbf before node %d saw no packet over its rate: %s %s" % (x, d, after)
    print("  slow link %s: inbound %d over the rate, %d dropped; outbound %d over, %d dropped"
          % (d, over, dropped, after["eth0"][0], after["eth0"][1]))
    n.stop(c)
    assert tbf_counts(c, x) == {}, "a tbf qdisc is still on node %d" % x


@test
def test_schedule_replays():
    # the runner's schedule and a nemesis's choices come from the seed alone
    import run
    names = ["partition-halves", "loss", "one-way"]
    a, b = run.schedule(random.Random(7), names, 60), run.schedule(random.Random(7), names, 60)
    assert a == b and a, (a, b)
    assert a != run.schedule(random.Random(8), names, 60)
    assert all(3 <= s and s + d <= 48 for s, d, _, _ in a), a
    c = cluster()
    details = []
    for _ in range(2):
        n = nemesis_net.PartitionHalves()
        details.append(n.start(c, random.Random(a[0][3])))
        n.stop(c)
    assert details[0] == details[1], details


@test
def test_heal_all_and_close():
    c = cluster()
    rng = random.Random(5)
    for name in nemesis_net.NEMESES:
        nemesis_net.NEMESES[name]().start(c, rng)
    nemesis_net.heal_all(c)
    left = {ns: t for ns, t in nemesis_net.nft_tables(c).items() if t}
    assert not left, "heal_all left %s" % left
    for i in c.nodes:
        assert tbf_counts(c, i) == {}, "heal_all left a tbf on node %d: %s" % (i, tbf_counts(c, i))
    all_reach(c, "after heal_all")
    k = c.k
    c.close()
    left = [x for x in netcluster.leftovers() if x.startswith("sluicef%d" % k)]
    assert not left, "close left %s" % left
    assert not os.path.exists(netcluster.lock_path(k))


CHILD = r"""
import sys
sys.path.insert(0, %r)
from netcluster import NetCluster
c = NetCluster(1)
print(c.k, flush=True)
sys.stdin.read()
"""


@test
def test_sweep_after_kill9():
    # a live cluster is left alone by the sweeper; one whose owner died is not
    with NetCluster(1) as live:
        child = subprocess.Popen([sys.executable, "-c", CHILD % HERE], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE)
        k = int(child.stdout.readline())
        assert any(x.startswith("sluicef%dn1" % k) for x in netcluster.leftovers())
        child.send_signal(signal.SIGKILL)
        child.wait()
        out = subprocess.run([os.path.join(HERE, "cleanup")], stdout=subprocess.PIPE, check=True).stdout.decode()
        assert not [x for x in netcluster.leftovers() if NAME_K(x) == k], (out, netcluster.leftovers())
        assert live.running(1) and [x for x in netcluster.leftovers() if NAME_K(x) == live.k], out
        assert "K=%d is in use" % live.k in out, out


@test
def test_signals_clean_up():
    # SIGTERM and SIGINT to the owner: its handler removes everything, then
    # it dies of the signal
    for sig in (signal.SIGTERM, signal.SIGINT):
        # the owner gets the signal's default disposition: a test runner
        # started in the background by a non-interactive shell (or under
        # nohup) ignores SIGINT, the owner inherits that, keeps it ignored,
        # as a program should, and never ends
        child = subprocess.Popen([sys.executable, "-c", CHILD % HERE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
        k = int(child.stdout.readline())
        assert [x for x in netcluster.leftovers() if NAME_K(x) == k]
        child.send_signal(sig)
        # the handler's clean-up (SIGKILL and reap the node, ip netns del,
        # link and rule removal) took over 60 s once in CI with two other
        # lanes running cluster suites: a hang guard, not a figure
        t0 = time.monotonic()
        try:
            rc = child.wait(timeout=180)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise AssertionError("signal %d: the owner did not end within 180 s; left: %r"
                                 % (sig, [x for x in netcluster.leftovers() if NAME_K(x) == k]))
        assert rc == -sig, (sig, rc)
        print("  signal %d: the owner cleaned up and ended in %.1f s" % (sig, time.monotonic() - t0))
        left = [x for x in netcluster.leftovers() if NAME_K(x) == k]
        assert not left and not os.path.exists(netcluster.lock_path(k)), (sig, left)


def NAME_K(name):
    m = netcluster.NAME_RE.match(name)
    return int(m.group(1)) if m else None


if __name__ == "__main__":
    try:
        main("netcluster")
    finally:
        if C is not None:
            C.close()
