"""Network nemeses for NetCluster (docs/fault-testing.md "Network faults").

Each nemesis is a class: start(cluster, rng) makes the fault and returns a
dict saying what it did (which nodes, which rates: it goes into the
nemesis.jsonl history); stop(cluster) undoes exactly that. Every choice comes
from rng (random.Random(seed)), so a seed replays the same faults.

Rules are nftables chains in a table `ip sluicef_<K>` inside the nodes' and
the clients' namespaces (base chains named <tag>_in / <tag>_out, one pair per
running nemesis, so two nemeses at once do not undo each other); the slow
link is a tbf qdisc, the reordering an htb one. Both go with the namespaces;
heal_all(cluster) removes every one at once. The rules name only the nodes' and the clients' addresses
(or leave the bridge's 10.213.K.254 alone): the harness, in the root
namespace, always reaches every node.

A nemesis that acts on "the leader" uses cluster.focus = (topic, partition)
when the runner set it (the leader of that partition), else the active
controller, else a random node.
"""

import itertools
import subprocess

_tags = itertools.count()


def nft(cluster, ns, script):
    p = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=script.encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    if p.returncode != 0:
        raise RuntimeError("nft in %s: %s\n%s" % (ns, p.stderr.decode().strip(), script))


def _set(addrs):
    return "{ %s }" % ", ".join(sorted(addrs))


def target_leader(cluster, rng):
    """The node a leader-aimed nemesis acts on (see the module's comment)."""
    focus = getattr(cluster, "focus", None)
    who = None
    try:
        who = cluster.leader_of(*focus) if focus else cluster.controller()
    except Exception:   # noqa: BLE001 - an election under way
        who = None
    if who is None or who not in cluster.nodes:
        who = rng.choice(cluster.nodes)
    return who


class NftNemesis:
    """Base: rules[ns] = {"in": [...], "out": [...]} applied as chains."""
    name = "nft"

    def __init__(self):
        self.tag = "%s%d" % (self.name.replace("-", "_"), next(_tags))
        self.applied = []

    def rules(self, cluster, rng):
        raise NotImplementedError

    def start(self, cluster, rng):
        rules, detail = self.rules(cluster, rng)
        for ns, r in rules.items():
            body = ["table ip %s {" % cluster.table]
            for d, hook in (("in", "input"), ("out", "output")):
                if r.get(d):
                    body.append("  chain %s_%s { type filter hook %s priority -10; policy accept;" % (self.tag, d, hook))
                    body += ["    %s" % x for x in r[d]]
                    body.append("  }")
            body.append("}")
            self.applied.append((ns, [d for d in ("in", "out") if r.get(d)]))
            nft(cluster, ns, "\n".join(body) + "\n")
        return detail

    def stop(self, cluster):
        for ns, dirs in self.applied:
            script = "".join("flush chain ip %s %s_%s\ndelete chain ip %s %s_%s\n" % (
                cluster.table, self.tag, d, cluster.table, self.tag, d) for d in dirs)
            try:
                nft(cluster, ns, script)
            except RuntimeError:
                pass   # healed already (heal_all)
        self.applied = []


def block(rules, cluster, ns, addrs, both=True, direction=None):
    """Drop what ns receives from and sends to addrs (direction "in"/"out":
    one of them)."""
    r = rules.setdefault(ns, {"in": [], "out": []})
    if not addrs:
        return
    if direction in (None, "in"):
        r["in"].append("ip saddr %s drop" % _set(addrs))
    if direction in (None, "out"):
        r["out"].append("ip daddr %s drop" % _set(addrs))


def split(rules, cluster, side_a, side_b):
    """Nothing between the namespaces of side_a and side_b (lists of node
    ids, "c" for the clients), both ways, with rules on both sides."""
    def ns(x):
        return cluster.client_ns if x == "c" else cluster.netns(x)

    def addr(x):
        return cluster.client_addr if x == "c" else cluster.addr(x)
    for a in side_a:
        block(rules, cluster, ns(a), [addr(b) for b in side_b])
    for b in side_b:
        block(rules, cluster, ns(b), [addr(a) for a in side_a])


class PartitionHalves(NftNemesis):
    """The nodes in two random halves (a minority and a majority) that do not
    reach each other; the clients reach both."""
    name = "partition-halves"

    def rules(self, cluster, rng):
        nodes = list(cluster.nodes)
        rng.shuffle(nodes)
        minority, majority = sorted(nodes[:len(nodes) // 2]), sorted(nodes[len(nodes) // 2:])
        rules = {}
        split(rules, cluster, minority, majority)
        return rules, {"minority": minority, "majority": majority}


class IsolateLeaderWithClients(NftNemesis):
    """The leader and the clients on one side, every other node on the other."""
    name = "isolate-leader-with-clients"

    def rules(self, cluster, rng):
        leader = target_leader(cluster, rng)
        others = [i for i in cluster.nodes if i != leader]
        rules = {}
        split(rules, cluster, [leader, "c"], others)
        return rules, {"leader": leader, "others": others, "focus": getattr(cluster, "focus", None)}


class IsolateLeaderFromClients(NftNemesis):
    """The leader cut off from the clients only; the nodes still see it."""
    name = "isolate-leader-from-clients"

    def rules(self, cluster, rng):
        leader = target_leader(cluster, rng)
        rules = {}
        split(rules, cluster, [leader], ["c"])
        return rules, {"leader": leader, "focus": getattr(cluster, "focus", None)}


class PartitionBridge(NftNemesis):
    """A non-transitive partition: the nodes but one in two halves that do not
    see each other, the one left (the bridge) seeing both; the clients see
    every node."""
    name = "partition-bridge"

    def rules(self, cluster, rng):
        nodes = list(cluster.nodes)
        rng.shuffle(nodes)
        bridge, rest = nodes[0], nodes[1:]
        a, b = sorted(rest[:len(rest) // 2]), sorted(rest[len(rest) // 2:])
        rules = {}
        split(rules, cluster, a, b)
        return rules, {"bridge": bridge, "side_a": a, "side_b": b}


class OneWay(NftNemesis):
    """One node's packets lost in one direction only: "in" (it hears no other
    node nor the clients, but they hear it) or "out" (it hears them, they do
    not hear it). The node is the leader half of the time."""
    name = "one-way"

    def rules(self, cluster, rng):
        node = target_leader(cluster, rng) if rng.random() < 0.5 else rng.choice(cluster.nodes)
        direction = rng.choice(["in", "out"])
        peers = [cluster.addr(i) for i in cluster.nodes if i != node] + [cluster.client_addr]
        rules = {}
        block(rules, cluster, cluster.netns(node), peers, direction=direction)
        return rules, {"node": node, "direction": direction}


class Loss(NftNemesis):
    """Random packet loss: each packet a node receives or sends on its eth0
    (the bridge's address excepted) dropped with probability P%, P from 5 to
    40; on one random node or on all."""
    name = "loss"
    low, high = 5, 40

    def rules(self, cluster, rng):
        pct = rng.randint(self.low, self.high)
        targets = sorted(cluster.nodes) if rng.random() < 0.5 else [rng.choice(cluster.nodes)]
        br = "10.213.%d.254" % cluster.k
        rules = {cluster.netns(i): {
            "in": ['iifname "eth0" ip saddr != %s numgen random mod 100 < %d drop' % (br, pct)],
            "out": ['oifname "eth0" ip daddr != %s numgen random mod 100 < %d drop' % (br, pct)]}
            for i in targets}
        return rules, {"nodes": targets, "percent": pct, "where": "each node's input and output"}


class Duplicate(NftNemesis):
    """Duplicated packets: each packet a node sends on its eth0 (to a node or
    the clients) sent twice with probability P% (nft `dup to ip daddr`, the
    TEE of iptables), P from 10 to 50; on one random node or on all."""
    name = "duplicate"

    def rules(self, cluster, rng):
        pct = rng.randint(10, 50)
        targets = sorted(cluster.nodes) if rng.random() < 0.5 else [rng.choice(cluster.nodes)]
        br = "10.213.%d.254" % cluster.k
        rules = {cluster.netns(i): {"out": [
            'oifname "eth0" ip daddr != %s numgen random mod 100 < %d dup to ip daddr device "eth0"' % (br, pct)]}
            for i in targets}
        return rules, {"nodes": targets, "percent": pct}


class SlowLink(NftNemesis):
    """A slow link (no netem on this kernel: no fixed delay): a tbf qdisc on a
    node's eth0 (what it sends) and on its veth's root side (what it
    receives) at RATE kbit/s with a queue of up to LATENCY ms, so that past
    the rate packets wait in the queue (the delay) and past the queue are
    dropped. One node (the leader half of the time) or all."""
    name = "slow-link"

    def start(self, cluster, rng):
        rate = rng.choice([256, 512, 1024, 2048])
        latency = rng.choice([100, 250, 500, 1000])
        if rng.random() < 0.5:
            targets = [target_leader(cluster, rng)]
        else:
            targets = sorted(cluster.nodes) if rng.random() < 0.5 else [rng.choice(cluster.nodes)]
        self.devs = []
        for i in targets:
            for pre, dev in ((["ip", "netns", "exec", cluster.netns(i)], "eth0"), ([], cluster.veth(i))):
                cmd = pre + ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", "%dkbit" % rate,
                             "burst", "16kb", "latency", "%dms" % latency]
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
                if p.returncode != 0:
                    raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr.decode().strip()))
                self.devs.append((pre, dev))
        return {"nodes": targets, "rate_kbit": rate, "latency_ms": latency}

    def stop(self, cluster):
        for pre, dev in getattr(self, "devs", []):
            subprocess.run(pre + ["tc", "qdisc", "del", "dev", dev, "root"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30)
        self.devs = []


class Reorder(NftNemesis):
    """Reordering without netem: an htb qdisc on a node's eth0 with two
    classes, 1:10 (10 Gbit/s, the default) and 1:20 (RATE kbit/s, a queue of
    at most 20 packets); an nft rule puts each packet the node sends into 1:20
    with probability P% (`meta priority set 1:20`). A packet in the slow class
    waits behind its queue while the packets after it go out through the fast
    one: they arrive first. Under load only: while the slow class has tokens
    (an idle link) its packets go at once. Past 20 queued packets the slow
    class drops (some loss as well). P from 10 to 40; one node or all."""
    name = "reorder"

    def start(self, cluster, rng):
        pct = rng.randint(10, 40)
        rate = rng.choice([64, 256, 1024])
        targets = sorted(cluster.nodes) if rng.random() < 0.5 else [rng.choice(cluster.nodes)]
        self.qdiscs = []
        for i in targets:
            pre = ["ip", "netns", "exec", cluster.netns(i), "tc"]
            for cmd in (["qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10"],
                        ["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit"],
                        ["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb", "rate",
                         "%dkbit" % rate, "ceil", "%dkbit" % rate, "burst", "1600"],
                        ["qdisc", "add", "dev", "eth0", "parent", "1:20", "pfifo", "limit", "20"]):
                p = subprocess.run(pre + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
                if p.returncode != 0:
                    raise RuntimeError("%s: %s" % (" ".join(pre + cmd), p.stderr.decode().strip()))
            self.qdiscs.append(i)
        self._rules = {cluster.netns(i): {"out": [
            'oifname "eth0" ip daddr != 10.213.%d.254 numgen random mod 100 < %d meta priority set 1:20' % (
                cluster.k, pct)]} for i in targets}
        NftNemesis.start(self, cluster, rng)
        return {"nodes": targets, "percent": pct, "slow_kbit": rate}

    def rules(self, cluster, rng):
        return self._rules, None

    def stop(self, cluster):
        NftNemesis.stop(self, cluster)
        for i in getattr(self, "qdiscs", []):
            subprocess.run(["ip", "netns", "exec", cluster.netns(i), "tc", "qdisc", "del", "dev", "eth0", "root"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        self.qdiscs = []


def heal_all(cluster):
    """Remove every network fault: the nft table and the root qdiscs in every
    namespace, the qdiscs on the veths."""
    for ns in cluster.namespaces:
        subprocess.run(["ip", "netns", "exec", ns, "nft", "delete", "table", "ip", cluster.table],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    for i in list(cluster.nodes) + ["c"]:
        subprocess.run(["tc", "qdisc", "del", "dev", cluster.veth(i), "root"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)


def nft_tables(cluster):
    """{namespace: [tables named sluicef_*]} for every namespace that exists."""
    out = {}
    for ns in cluster.namespaces:
        p = subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "tables"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=30)
        if p.returncode == 0:
            out[ns] = [line for line in p.stdout.decode().splitlines() if "sluicef" in line]
    return out


NEMESES = {c.name: c for c in (PartitionHalves, IsolateLeaderWithClients, IsolateLeaderFromClients,
                                 PartitionBridge, OneWay, Loss, Duplicate, SlowLink, Reorder)}
