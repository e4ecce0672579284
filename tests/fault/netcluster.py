"""NetCluster: an N-node sluiced cluster on one machine with every node in its
own network namespace and the clients in another, for the fault suite
(docs/fault-testing.md "The harness"). Root only (ip, nft, tc).

    with NetCluster(3, sets=["min.insync.replicas=2"]) as c:
        c.nodes              # [1, 2, 3]
        c.bootstrap          # "10.213.K.1:9092,10.213.K.2:9092,10.213.K.3:9092"
        c.netns(2)           # "sluicef<K>n2"; c.client_ns: "sluicef<K>c"
        c.addr(2)            # "10.213.K.2"; c.client_addr: "10.213.K.200"
        c.kill(2); c.start(2)   # SIGKILL; start again (restart(): SIGTERM first)
        c.pause(2); c.resume(2) # SIGSTOP / SIGCONT
        c.leader_of("t", 0); c.controller()
        p = c.run_client([...])  # a Popen inside the client namespace

The network (names made of the prefix "sluicef" and K):
  bridge   sluicef<K>br in the root namespace, address 10.213.K.254/24 (the
           harness itself reaches every node through it, whatever the faults:
           the nemeses' rules only name the nodes' and the clients' addresses)
  node i   namespace sluicef<K>n<i>, address 10.213.K.<i> on its eth0, the
           root side of its veth sluicef<K>v<i>; listeners 9092 (Kafka),
           9093 (controller), 9094 (admin endpoint)
  clients  namespace sluicef<K>c, address 10.213.K.200, veth sluicef<K>vc
No default route anywhere: nothing leaves the machine. K is the first free
10.213.K.0/24 (no address, route or bridge of scripts/cluster --netns or of
another NetCluster on it), picked under scripts/cluster's lock, and held for
the cluster's life by an flock on ${TMPDIR:-/tmp}/sluicef-<K>.lock. The
nemeses' nftables rules live in a table sluicef_<K> inside the namespaces and
their qdiscs on the veths: both go with the namespaces.

close() (also at exit, SIGINT and SIGTERM) stops the nodes and the clients and
removes all of it. sweep() (tests/fault/cleanup) removes what a cluster whose
owner died (kill -9) left: every sluicef<K>* namespace, link and directory
whose K's lock file nobody holds.
"""

import atexit
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SLUICED = os.path.join(ROOT, "build", "sluiced")
PREFIX = "sluicef"
TMP = os.environ.get("TMPDIR", "/tmp")
PICK_LOCK = os.path.join(TMP, "sluice-cluster-netns.lock")   # scripts/cluster's
CLIENT_HOST = 200
BRIDGE_HOST = 254
KAFKA_PORT, CONTROLLER_PORT, ADMIN_PORT = 9092, 9093, 9094
WAIT = 90
NAME_RE = re.compile(r"^%s(\d+)(br|c|vc|n\d+|v\d+)$" % PREFIX)


class HarnessError(Exception):
    """The cluster or its network could not be made (names what failed)."""


def sh(*argv, check=True, timeout=60):
    p = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    if check and p.returncode != 0:
        raise HarnessError("%s: exit %d: %s" % (" ".join(argv), p.returncode, p.stderr.decode().strip()))
    return p.stdout.decode()


def lock_path(k):
    return os.path.join(TMP, "%s-%d.lock" % (PREFIX, k))


def dir_record(k):
    """The file naming cluster K's temporary directory (for sweep)."""
    return os.path.join(TMP, "%s-%d.dir" % (PREFIX, k))


def require_root():
    if os.geteuid() != 0:
        raise HarnessError("the fault harness needs root (network namespaces, nft, tc)")
    for tool in ("ip", "nft", "tc"):
        if shutil.which(tool) is None:
            raise HarnessError("%s is not installed (scripts/setup: iproute2, nftables)" % tool)


def _k_in_use(k):
    if os.path.exists("/sys/class/net/sluice%dbr" % k) or os.path.exists("/sys/class/net/%s%dbr" % (PREFIX, k)):
        return True
    if (" 10.213.%d." % k) in sh("ip", "-4", "-o", "addr", "show"):
        return True
    if ("10.213.%d." % k) in sh("ip", "-4", "route", "show", "table", "all"):
        return True
    if any(NAME_RE.match(n) and NAME_RE.match(n).group(1) == str(k) for n in _netns_names()):
        return True
    return False


def _netns_names():
    return [line.split()[0] for line in sh("ip", "netns", "list").splitlines() if line.strip()]


def _link_names():
    return [d for d in os.listdir("/sys/class/net")]


def _try_lock(k):
    """An fd holding K's lock, or None if someone holds it."""
    fd = os.open(lock_path(k), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _remove_k(k):
    """Every process, namespace, link and directory of cluster K."""
    names = [n for n in _netns_names() if NAME_RE.match(n) and NAME_RE.match(n).group(1) == str(k)]
    for ns in names:
        pids = sh("ip", "netns", "pids", ns, check=False).split()
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except (OSError, ValueError):
                pass
    for ns in names:
        pids = sh("ip", "netns", "pids", ns, check=False).split()
        end = time.monotonic() + 10
        while pids and time.monotonic() < end:
            time.sleep(0.05)
            pids = [p for p in pids if os.path.exists("/proc/%s" % p)]
    for link in _link_names():
        m = NAME_RE.match(link)
        if m and m.group(1) == str(k) and m.group(2) != "br":
            sh("ip", "link", "del", link, check=False)
    for ns in names:
        sh("ip", "netns", "del", ns, check=False)
    if os.path.exists("/sys/class/net/%s%dbr" % (PREFIX, k)):
        sh("ip", "link", "del", "%s%dbr" % (PREFIX, k), check=False)
    try:
        with open(dir_record(k)) as f:
            d = f.read().strip()
        if d and os.path.basename(d).startswith(PREFIX + "-") and os.path.isdir(d):
            shutil.rmtree(d, ignore_errors=True)
        os.unlink(dir_record(k))
    except OSError:
        pass


def leftovers():
    """The sluicef names present now: namespaces, links (all K)."""
    out = [n for n in _netns_names() if NAME_RE.match(n)]
    out += [n for n in _link_names() if NAME_RE.match(n)]
    return out


def sweep(verbose=False):
    """Remove every cluster whose owner is gone (its K's lock is free).
    Returns the Ks removed."""
    ks = set()
    for n in _netns_names() + _link_names():
        m = NAME_RE.match(n)
        if m:
            ks.add(int(m.group(1)))
    for f in os.listdir(TMP):
        m = re.match(r"^%s-(\d+)\.(lock|dir)$" % PREFIX, f)
        if m:
            ks.add(int(m.group(1)))
    removed = []
    # under the lock clusters pick their K with: none is being made meanwhile
    lk = open(PICK_LOCK, "a")
    fcntl.flock(lk, fcntl.LOCK_EX)
    try:
        _sweep(ks, removed, verbose)
    finally:
        lk.close()
    return removed


def _sweep(ks, removed, verbose):
    for k in sorted(ks):
        fd = _try_lock(k)
        if fd is None:
            if verbose:
                print("sweep: K=%d is in use (its lock is held): left alone" % k)
            continue
        try:
            _remove_k(k)
            removed.append(k)
            if verbose:
                print("sweep: removed cluster K=%d" % k)
        finally:
            try:
                os.unlink(lock_path(k))
            except OSError:
                pass
            os.close(fd)


_live = []


def _on_signal(signum, frame):
    for c in list(_live):
        c.close()
    # the default action after cleaning up (exit status 128+signum)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_handlers():
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(s) in (signal.SIG_DFL, signal.default_int_handler, None):
            signal.signal(s, _on_signal)


atexit.register(lambda: [c.close() for c in list(_live)])


class NetCluster:
    def __init__(self, n, sets=(), binary=None, env=None, node_env=None, data_dirs=None, node_sets=(),
                 shards=1, base=None):
        require_root()
        self.n = n
        self.nodes = list(range(1, n + 1))
        self.binary = binary or SLUICED
        if not os.access(self.binary, os.X_OK):
            raise HarnessError("%s is not built (make)" % self.binary)
        self.env = dict(os.environ, **(env or {}))
        self.node_env = {int(k): dict(v) for k, v in (node_env or {}).items()}
        self.shards = shards
        self.procs = {}
        self.clients = []
        self.k = None
        self._lock_fd = None
        self._closed = False
        _install_handlers()
        _live.append(self)
        try:
            self._net_create()
            self.dir = base or tempfile.mkdtemp(prefix="%s-%d-" % (PREFIX, self.k))
            with open(dir_record(self.k), "w") as f:
                f.write(self.dir if base is None else "")
            self.data_dirs = {i: (data_dirs or {}).get(i) or os.path.join(self.dir, "n%d" % i, "data")
                              for i in self.nodes}
            self._write_configs(list(sets), list(node_sets))
            for i in self.nodes:
                self._launch(i)
            for i in self.nodes:
                self.wait_ready(i)
            self.wait_brokers()
        except BaseException:
            self.close()
            raise

    # ---- names -------------------------------------------------------
    def netns(self, i):
        return "%s%dn%d" % (PREFIX, self.k, i)

    @property
    def client_ns(self):
        return "%s%dc" % (PREFIX, self.k)

    def addr(self, i):
        return "10.213.%d.%d" % (self.k, i)

    @property
    def client_addr(self):
        return "10.213.%d.%d" % (self.k, CLIENT_HOST)

    def veth(self, i):
        """The root-namespace side of node i's veth ("c": the clients')."""
        return "%s%dv%s" % (PREFIX, self.k, i)

    @property
    def table(self):
        return "%s_%d" % (PREFIX, self.k)

    @property
    def namespaces(self):
        return [self.netns(i) for i in self.nodes] + [self.client_ns]

    @property
    def bootstrap(self):
        return ",".join("%s:%d" % (self.addr(i), KAFKA_PORT) for i in self.nodes)

    def node_dir(self, i):
        return os.path.join(self.dir, "n%d" % i)

    def data_dir(self, i):
        return self.data_dirs[i]

    def log_path(self, i):
        return os.path.join(self.node_dir(i), "sluiced.log")

    def log(self, i):
        try:
            with open(self.log_path(i), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    # ---- the network -------------------------------------------------
    def _net_create(self):
        with open(PICK_LOCK, "a") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            for k in range(1, 254):
                if _k_in_use(k):
                    continue
                fd = _try_lock(k)
                if fd is None:
                    continue
                self.k, self._lock_fd = k, fd
                break
            else:
                raise HarnessError("no free 10.213.K.0/24 for the fault harness")
            k = self.k
            br = "%s%dbr" % (PREFIX, k)
            sh("ip", "link", "add", br, "type", "bridge")
            sh("ip", "addr", "add", "10.213.%d.%d/24" % (k, BRIDGE_HOST), "dev", br)
            sh("ip", "link", "set", br, "up")
        for host, ns, veth in [(i, self.netns(i), self.veth(i)) for i in self.nodes] + [
                (CLIENT_HOST, self.client_ns, self.veth("c"))]:
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "link", "set", veth, "master", br, "up")
            sh("ip", "-n", ns, "addr", "add", "10.213.%d.%d/24" % (k, host), "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")

    def nsexec(self, ns, *argv, check=True, timeout=60):
        return sh("ip", "netns", "exec", ns, *argv, check=check, timeout=timeout)

    # ---- the nodes ---------------------------------------------------
    def _write_configs(self, sets, node_sets):
        import base64
        cid = base64.urlsafe_b64encode(os.urandom(16)).decode()[:22]
        voters = ",".join("%d@%s:%d" % (i, self.addr(i), CONTROLLER_PORT) for i in self.nodes)
        for i in self.nodes:
            os.makedirs(self.node_dir(i), exist_ok=True)
            lines = ["node.id=%d" % i, "process.roles=broker,controller",
                     "controller.quorum.voters=%s" % voters, "controller.listener.names=CONTROLLER",
                     "cluster.id=%s" % cid, "log.dirs=%s" % self.data_dirs[i],
                     "admin.listen=%s:%d" % (self.addr(i), ADMIN_PORT)]
            lines += sets + [s for node, s in node_sets if node == i]
            lines.append("listeners=PLAINTEXT://%s:%d,CONTROLLER://%s:%d" % (
                self.addr(i), KAFKA_PORT, self.addr(i), CONTROLLER_PORT))
            with open(os.path.join(self.node_dir(i), "server.properties"), "w") as f:
                f.write("\n".join(lines) + "\n")

    def _launch(self, i):
        d = self.node_dir(i)
        env = dict(self.env, **self.node_env.get(i, {}))
        with open(os.path.join(d, "stdout"), "w") as out, open(self.log_path(i), "a") as err:
            # ip netns exec execs the command: the pid is sluiced's
            self.procs[i] = subprocess.Popen(
                ["ip", "netns", "exec", self.netns(i), self.binary, "--config",
                 os.path.join(d, "server.properties"), "--shards", str(self.shards)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, start_new_session=True)

    def pid(self, i):
        p = self.procs.get(i)
        return p.pid if p is not None and p.poll() is None else None

    def running(self, i):
        return self.pid(i) is not None

    def wait_ready(self, i, timeout=WAIT):
        end = time.monotonic() + timeout
        path = os.path.join(self.node_dir(i), "stdout")
        while True:
            try:
                with open(path, errors="replace") as f:
                    if "listening on" in f.read():
                        return
            except OSError:
                pass
            if not self.running(i):
                raise HarnessError("node %d exited before it was ready; its log:\n%s" % (
                    i, "\n".join(self.log(i).splitlines()[-20:])))
            if time.monotonic() > end:
                raise HarnessError("node %d not ready within %d s; its log:\n%s" % (
                    i, timeout, "\n".join(self.log(i).splitlines()[-20:])))
            time.sleep(0.1)

    def metadata(self, i, topic=None, timeout=5):
        """Node i's Metadata (confluent_kafka ClusterMetadata), asked from the
        root namespace (never cut off by a nemesis)."""
        from confluent_kafka.admin import AdminClient
        a = AdminClient({"bootstrap.servers": "%s:%d" % (self.addr(i), KAFKA_PORT),
                         "socket.timeout.ms": int(timeout * 1000), "socket.connection.setup.timeout.ms": int(timeout * 1000)})
        return a.list_topics(topic, timeout=timeout) if topic else a.list_topics(timeout=timeout)

    def wait_brokers(self, timeout=WAIT):
        """Until every running node's Metadata lists every node."""
        end = time.monotonic() + timeout
        last = None
        while True:
            try:
                if all(len(self.metadata(i).brokers) == self.n for i in self.nodes if self.running(i)):
                    return
            except Exception as e:   # noqa: BLE001 - a node mid-election
                last = e
            if time.monotonic() > end:
                raise HarnessError("the nodes do not list %d brokers within %d s (last: %r)" % (self.n, timeout, last))
            time.sleep(0.3)

    def kill(self, i, sig=signal.SIGKILL):
        p = self.procs.get(i)
        if p is not None and p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGCONT)    # a paused node dies too
                p.send_signal(sig)
            except OSError:
                pass
            try:
                p.wait(timeout=60 if sig != signal.SIGKILL else 30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop(self, i):
        """SIGTERM node i and wait for it (SIGKILL after 30 s)."""
        p = self.procs.get(i)
        if p is not None and p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGCONT)
                p.terminate()
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            except OSError:
                pass

    def start(self, i, wait=True):
        """Start node i again (it must not run), with its data as it was."""
        if self.running(i):
            raise HarnessError("node %d runs already" % i)
        self._launch(i)
        if wait:
            self.wait_ready(i)

    def restart(self, i, wait=True):
        self.stop(i)
        self.start(i, wait=wait)

    def pause(self, i):
        if self.pid(i):
            os.kill(self.pid(i), signal.SIGSTOP)

    def resume(self, i):
        if self.pid(i):
            os.kill(self.pid(i), signal.SIGCONT)

    # ---- who leads ---------------------------------------------------
    def _ask_all(self, topic=None):
        out = {}
        for i in self.nodes:
            if not self.running(i):
                continue
            try:
                out[i] = self.metadata(i, topic, timeout=3)
            except Exception:   # noqa: BLE001 - paused, electing
                pass
        return out

    @staticmethod
    def _vote(values):
        vals = [v for v in values if v is not None and v >= 0]
        if not vals:
            return None
        return max(set(vals), key=vals.count)

    def controller(self):
        """The active controller (Metadata's ControllerId, the quorum's
        leader) most running nodes agree on, or None."""
        return self._vote([md.controller_id for md in self._ask_all().values()])

    def leader_of(self, topic, partition):
        """The leader of topic/partition: the controller's view if it answers,
        else what most nodes say; None when no one knows."""
        mds = self._ask_all(topic)
        ctl = self._vote([md.controller_id for md in mds.values()])

        def leader(md):
            t = md.topics.get(topic)
            if t is None or t.error is not None or partition not in t.partitions:
                return None
            return t.partitions[partition].leader

        if ctl in mds and leader(mds[ctl]) not in (None, -1):
            return leader(mds[ctl])
        return self._vote([leader(md) for md in mds.values()])

    def create_topic(self, name, partitions, rf, config=None, timeout=60):
        from confluent_kafka.admin import AdminClient, NewTopic
        a = AdminClient({"bootstrap.servers": self.bootstrap})
        a.create_topics([NewTopic(name, partitions, rf, config=config or {})],
                        operation_timeout=30)[name].result(timeout)
        end = time.monotonic() + timeout
        while True:
            try:
                md = self.metadata(self.nodes[0], name)
                t = md.topics.get(name)
                if t is not None and t.error is None and len(t.partitions) == partitions and all(
                        p.leader >= 0 and len(p.isrs) == rf for p in t.partitions.values()):
                    return
            except Exception:   # noqa: BLE001
                pass
            if time.monotonic() > end:
                raise HarnessError("topic %s: not every partition led with %d in sync within %d s" % (name, rf, timeout))
            time.sleep(0.2)

    # ---- clients -----------------------------------------------------
    def run_client(self, argv, env=None, **kw):
        """A Popen of argv inside the client namespace (its own session)."""
        e = dict(self.env, **(env or {}))
        kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen(["ip", "netns", "exec", self.client_ns] + list(argv), env=e,
                             start_new_session=True, **kw)
        self.clients.append(p)
        return p

    def client_run(self, argv, timeout=60, env=None):
        """Run argv in the client namespace to its end: CompletedProcess."""
        e = dict(self.env, **(env or {}))
        return subprocess.run(["ip", "netns", "exec", self.client_ns] + list(argv), env=e,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout)

    # ---- the end -----------------------------------------------------
    def close(self):
        if self._closed:
            return
        self._closed = True
        if self in _live:
            _live.remove(self)
        for p in self.clients:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        # SIGKILL: the directories go with them, and a run interrupted by
        # Ctrl-C should not wait for each node's controlled shutdown
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    p.kill()
                except OSError:
                    pass
        for p in self.procs.values():
            p.wait()
        if self.k is not None:
            _remove_k(self.k)
            try:
                os.unlink(lock_path(self.k))
            except OSError:
                pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self):
        return self

    def __exit__(self, etype, *a):
        if etype is not None and etype is not KeyboardInterrupt and getattr(self, "dir", None):
            for i in self.nodes:
                tail = self.log(i).splitlines()[-40:]
                print("--- node %d: the last %d lines of its log" % (i, len(tail)), file=sys.stderr)
                print("\n".join(tail), file=sys.stderr)
        self.close()
        return False
