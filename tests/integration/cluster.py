"""A cluster of sluiced processes for the tests (scripts/cluster underneath):
each node a broker and a voter on free loopback ports with its own data
directory, all under one temporary directory removed at close.

    with Cluster(3, sets=["min.insync.replicas=2"]) as c:
        c.port(1)            # node 1's Kafka port (c.addr(1): host:port)
        c.bootstrap          # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        c.kill(2); c.restart(2)
        c.data_dir(2)        # node 2's log.dirs

    Cluster(1, brokers=2): Kafka's dedicated roles (scripts/cluster
    --brokers): node 1 a controller only, nodes 2 and 3 brokers only; the
    bootstrap, port() and addr() are the brokers'. Cluster(1, brokers=1,
    combined=True): node 1 a combined broker and voter, node 2 a broker only.
    Cluster(2, node_sets=[(1, "k=v")]) gives node 1 a setting of its own;
    base= names the temporary directory to use (made by the caller);
    stagger=S starts each node S seconds after the one before; env= adds
    environment variables to every node's (a test knob such as
    SLUICE_TEST_METADATA_KEEP, docs/cluster.md).

    Cluster(3, listener="INTERNAL", first_args=["--add-scram=..."]): every
    node one more listener named INTERNAL after its PLAINTEXT one (its
    protocol by sets; c.listener_addr(node) its host:port), and sluiced
    arguments for the nodes' first start only.

    Cluster(2, ipv6=True): the client listeners on [::1] (scripts/cluster
    --ipv6); the bootstrap is "[::1]:p1,[::1]:p2".

    Cluster(3, netns=True) puts each node in its own network namespace
    (scripts/cluster --netns, root only); c.isolate(1) cuts node 1 off from
    the others, c.heal(1) joins it again.

until(what, fn) retries fn (exceptions included) until it returns something
true, or fails naming what it waited for; wait_isrs(bootstrap, topic, n)
until every partition has n replicas in sync; same_logs(c, topic, nparts,
nodes) until those nodes' copies are the same bytes; delete_records(c,
topic) moves a partition's log start to its high watermark on its leader;
eal_dirs_gone(tag) removes the EAL runtime directories of a DPDK test's
nodes.
"""

import os
import re
import shutil
import subprocess
import time

from harness import SLUICED, temp_dir

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "..", "..", "scripts", "cluster")
WAIT = 60


class Cluster:
    def __init__(self, n, sets=(), shards=1, netns=False, node_sets=(), base=None, stagger=None, brokers=0,
                 env=None, combined=False, ipv6=False, listener=None, first_args=()):
        self.dir = os.path.join(base or temp_dir(), "cluster")
        self.env = dict(os.environ, SLUICED=SLUICED)
        self.env.update(env or {})   # may name another SLUICED
        self.n = n + brokers
        self.first = n + 1 if brokers and not combined else 1   # the first node with a Kafka listener
        args = ["start", str(n), "--shards", str(shards)] + (["--netns"] if netns else []) + (
            ["--ipv6"] if ipv6 else [])
        if brokers:
            args += ["--brokers", str(brokers)] + (["--combined"] if combined else [])
        if listener:
            args += ["--listener", listener]
        for a in first_args:
            args += ["--first-arg", a]
        for s in sets:
            args += ["--set", s]
        for node, s in node_sets:
            args += ["--node-set", str(node), s]
        if stagger:
            args += ["--stagger", str(stagger)]
        try:
            self.run(*args)
        except BaseException:
            self.close()
            raise
        self.bootstrap = self.run("bootstrap").strip()
        self.addrs = self.bootstrap.split(",")
        self.ports = [int(p.rsplit(":", 1)[1]) for p in self.addrs]

    def run(self, *args, timeout=180):
        p = subprocess.run([CLUSTER] + list(args) + ["--dir", self.dir], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           env=self.env)
        assert p.returncode == 0, (args, p.returncode, p.stderr.decode())
        return p.stdout.decode()

    def port(self, node):
        return self.ports[node - self.first]

    def node_of_port(self, port):
        return self.ports.index(port) + self.first

    def addr(self, node):
        """The node's Kafka listener, host:port."""
        return self.addrs[node - self.first]

    def listener_addr(self, node, name=None):
        """The node's address on another listener (default: the --listener one), host:port."""
        props = open(os.path.join(self.dir, "n%d" % node, "server.properties")).read()
        return re.search(r"^listeners=.*?%s://([^,\s]+)" % (name or "INTERNAL"), props, re.M).group(1)

    def isolate(self, node, port=None):
        """(netns) Cut node off from the other nodes (only their connections
        to its port, if given); the test still reaches it."""
        self.run("isolate", str(node), *(["--port", str(port)] if port else []))

    def heal(self, node):
        self.run("heal", str(node))

    def data_dir(self, node):
        return os.path.join(self.dir, "n%d" % node, "data")

    def log(self, node):
        try:
            with open(os.path.join(self.dir, "n%d" % node, "sluiced.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def pid(self, node):
        """The node's running pid (scripts/cluster status), or None."""
        for line in self.run("status").splitlines():
            f = line.split()
            if f and f[0] == str(node):
                return int(f[1]) if f[1].isdigit() and f[2] == "running" else None
        return None

    def kill(self, node):
        self.run("kill", str(node))

    def restart(self, node):
        self.run("restart", str(node))

    def metric(self, node, line_start):
        """The value of the first /metrics line of node starting with line_start."""
        import urllib.request
        props = open(os.path.join(self.dir, "n%d" % node, "server.properties")).read()
        admin = re.search(r"admin.listen=(\S+)", props).group(1)
        body = urllib.request.urlopen("http://%s/metrics" % admin, timeout=30).read().decode()
        for line in body.splitlines():
            if line.startswith(line_start):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError("no %s in node %d's metrics" % (line_start, node))

    def stop(self):
        """SIGTERM every node, keep the directories (to read the logs)."""
        subprocess.run([CLUSTER, "stop", "--keep", "--dir", self.dir], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, timeout=120)

    def close(self):
        subprocess.run([CLUSTER, "stop", "--dir", self.dir], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, timeout=120)
        shutil.rmtree(os.path.dirname(self.dir), ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, etype, *a):
        if etype is not None and etype is not KeyboardInterrupt:
            # a failing test: what each node said last, before its
            # directory goes
            for n in sorted(os.listdir(self.dir)) if os.path.isdir(self.dir) else ():
                log = os.path.join(self.dir, n, "sluiced.log")
                if n.startswith("n") and os.path.exists(log):
                    with open(log, errors="replace") as f:
                        tail = f.read().splitlines()[-40:]
                    print("--- %s: the last %d lines of %s" % (n, len(tail), log))
                    print("\n".join(tail))
        self.close()
        return False


def until(what, fn, timeout=WAIT, every=0.3):
    """fn() every `every` s until it returns something true (exceptions
    retried); its value."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            v = fn()
            if v:
                return v
            last = v
        except Exception as e:  # noqa: BLE001 - a node mid-election or mid-restart
            last = e
        time.sleep(every)
    raise AssertionError("%s: not within %d s (last: %r)" % (what, timeout, last))


def partitions(bootstrap, topic):
    """{partition: (leader, replicas, isrs)} from Metadata, or None."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=20)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return {p: (m.leader, sorted(m.replicas), sorted(m.isrs)) for p, m in t.partitions.items()}


def delete_records(c, topic, partition=0, bootstrap=None):
    """DeleteRecords v0 of topic-partition on its leader, up to the high
    watermark (offset -1): (the leader's node id, the new log start);
    asserts the answer has no error."""
    import kraw
    lead = partitions(bootstrap or c.bootstrap, topic)[partition][0]
    w = kraw.W().array([topic], lambda w, n: w.str(n).array([(partition, -1)],
                                                           lambda w, po: w.i32(po[0]).i64(po[1])))
    w.i32(30000)
    with kraw.Conn(c.addr(lead)) as k:
        r = k.request(21, 0, w)
        r.i32()
        res = r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i64(), r.i16()))))
    (_, low, err), = res[0][1]
    assert err == 0, ("DeleteRecords", topic, partition, err)
    return lead, low


def create_topic(bootstrap, name, nparts, rf, config=None):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, nparts, rf, config=config or {})],
                    operation_timeout=30)[name].result(60)


def log_batches(part_dir):
    """The record batches of one partition directory's segments, in offset
    order, as bytes (a preallocated segment ends at its first zero length)."""
    out = []
    for name in sorted(f for f in os.listdir(part_dir) if f.endswith(".log")):
        with open(os.path.join(part_dir, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos + 12 <= len(data):
            blen = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
            if blen <= 0 or pos + 12 + blen > len(data):
                break
            out.append(data[pos:pos + 12 + blen])
            pos += 12 + blen
    return out


def wait_isrs(bootstrap, topic, n, timeout=WAIT):
    """Until every partition of topic has n replicas in its ISR."""
    until("%d replicas in every ISR of %s" % (n, topic),
          lambda: (lambda m: m and all(len(v[2]) == n for v in m.values()))(partitions(bootstrap, topic)),
          timeout=timeout)


def same_logs(c, topic, nparts, nodes, timeout=30):
    """Until each partition's copies on nodes are the same record batches."""
    for part in range(nparts):
        until("partition %d the same bytes on nodes %s" % (part, list(nodes)),
              lambda: (lambda logs: logs[0] and all(x == logs[0] for x in logs))(
                  [log_batches(os.path.join(c.data_dir(n), "%s-%d" % (topic, part))) for n in nodes]),
              timeout=timeout)


def eal_dirs_gone(tag):
    """sluiced leaves its EAL runtime directory (/var/run/dpdk/PREFIX);
    a DPDK test's nodes' (file prefixes starting tag-) go."""
    d = "/var/run/dpdk"
    for e in os.listdir(d) if os.path.isdir(d) else []:
        if e.startswith(tag + "-"):
            shutil.rmtree(os.path.join(d, e), ignore_errors=True)
