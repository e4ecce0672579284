"""Process nemeses of the fault harness (docs/fault-testing.md, "Process
faults"): SIGKILL of a random node, of a partition's leader, of the active
controller, of every node at once (a power loss when the cluster runs with
log.durability=sync), and a SIGSTOP/SIGCONT pause.

Each nemesis is a class: start(cluster, rng) -> detail (a dict for the
history's "nemesis" line), stop(cluster) heals. They use only this part of
the cluster's API (tests/fault/netcluster.py; tests/fault/test_nemeses_node.py
adapts tests/integration/cluster.py's loopback Cluster to it): nodes,
pid(id), kill(id), restart(id) (waits until the node serves), leader_of(topic,
partition), controller(). Constructor arguments all have defaults, so the
runner may build any of them as cls().

A kill is SIGKILL sent here (then cluster.kill for its book-keeping) and
waits until the process is gone; a restart waits until the node serves
again; a pause waits until every thread of the process is stopped (state T
in /proc/PID/task/*/stat: kill() returns before the group stop reached them
all), holds at least hold_s seconds from then, and after SIGCONT waits until
no thread is stopped.
"""

import functools
import os
import signal
import sys
import threading
import time

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from cluster import until as cluster_until  # noqa: E402

# tests/integration/cluster.py's, polling faster: a process gone or
# stopped is seen within 50 ms
until = functools.partial(cluster_until, every=0.05)


def thread_states(pid):
    """The state letter of every thread of pid ([] when it is gone)."""
    out = []
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                out.append(f.read().rsplit(")", 1)[1].split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def gone(pid):
    """pid has exited (gone, or a zombie nobody reaped yet)."""
    st = thread_states(pid)
    return not st or all(s in ("Z", "X") for s in st)


def sigkill(cluster, node):
    """SIGKILL node's process and wait until it is gone; the pid killed."""
    pid = cluster.pid(node)
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        until("node %d (pid %d) gone after SIGKILL" % (node, pid), lambda: gone(pid))
    cluster.kill(node)   # the cluster's book-keeping (its pid file)
    return pid


def restart(cluster, node):
    """Start node again and wait until it serves (cluster.restart waits for
    its ready line; then its pid runs). The new pid."""
    cluster.restart(node)
    return until("node %d running after its restart" % node, lambda: cluster.pid(node))


def restart_all(cluster, nodes):
    """Start every node of nodes at once (a node is ready only once a
    majority of the voters runs, so one at a time would wait on the
    next); wait for all. {node: pid}."""
    errs = {}

    def one(n):
        try:
            cluster.restart(n)
        except BaseException as e:  # noqa: BLE001 - reported below
            errs[n] = e
    ts = [threading.Thread(target=one, args=(n,)) for n in nodes]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise AssertionError("restart failed: %r" % errs)
    return {n: until("node %d running after its restart" % n, lambda: cluster.pid(n)) for n in nodes}


def pause(pid):
    """SIGSTOP pid and wait until every one of its threads is stopped."""
    os.kill(pid, signal.SIGSTOP)
    until("every thread of %d stopped" % pid,
          lambda: (lambda st: st and all(s in ("T", "t") for s in st))(thread_states(pid)), timeout=20)


def resume(pid):
    """SIGCONT pid and wait until none of its threads is stopped."""
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        return
    until("every thread of %d running again" % pid,
          lambda: not any(s in ("T", "t") for s in thread_states(pid)), timeout=20)


class _Kill:
    """SIGKILL of one node (chosen by target()); stop() restarts it."""
    name = "kill"

    def __init__(self):
        self.node = None

    def target(self, cluster, rng):
        raise NotImplementedError

    def start(self, cluster, rng):
        self.node = self.target(cluster, rng)
        pid = sigkill(cluster, self.node)
        return {"node": self.node, "pid": pid, "signal": "KILL"}

    def stop(self, cluster):
        if self.node is not None:
            restart(cluster, self.node)
            self.node = None


class KillRandom(_Kill):
    """SIGKILL of a node chosen at random."""
    name = "kill-random"

    def target(self, cluster, rng):
        return rng.choice(sorted(cluster.nodes))


class KillLeader(_Kill):
    """SIGKILL of the leader of topic's partition (topic None: the cluster's
    attribute topic)."""
    name = "kill-leader"

    def __init__(self, topic=None, partition=0):
        super().__init__()
        self.topic, self.partition = topic, partition

    def target(self, cluster, rng):
        topic = self.topic or getattr(cluster, "topic", None)
        assert topic, "kill-leader: no topic given (KillLeader(topic=...) or cluster.topic)"
        return until("a leader of %s-%d" % (topic, self.partition),
                     lambda: (lambda n: n if n and n > 0 else None)(cluster.leader_of(topic, self.partition)))

    def start(self, cluster, rng):
        d = super().start(cluster, rng)
        d["topic"], d["partition"] = self.topic or getattr(cluster, "topic", None), self.partition
        return d


class KillController(_Kill):
    """SIGKILL of the active controller (the metadata quorum's leader, the
    ControllerId Metadata answers)."""
    name = "kill-controller"

    def target(self, cluster, rng):
        return until("an active controller", lambda: (lambda n: n if n and n > 0 else None)(cluster.controller()))


class KillAll:
    """SIGKILL of every node at once, then every node started again. With
    log.durability=sync (docs/storage.md) a power loss as far as the
    processes go: the page cache survives (the kernel does not crash), but
    sync acknowledges only what RWF_DSYNC wrote, so nothing acknowledged
    depends on it."""
    name = "kill-all"

    def __init__(self):
        self.nodes = []

    def start(self, cluster, rng):
        self.nodes = sorted(cluster.nodes)
        pids = {n: cluster.pid(n) for n in self.nodes}
        for pid in pids.values():          # all signals first, then the waits
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for n, pid in pids.items():
            if pid:
                until("node %d (pid %d) gone" % (n, pid), lambda: gone(pid))
            cluster.kill(n)
        return {"nodes": self.nodes, "pids": [pids[n] for n in self.nodes], "signal": "KILL"}

    def stop(self, cluster):
        if self.nodes:
            restart_all(cluster, self.nodes)
            self.nodes = []


class _Pause:
    """SIGSTOP of one node for at least hold_s seconds (stop() waits out
    what is left before SIGCONT). hold_s must exceed the cluster's
    broker.session.timeout.ms and replica.lag.time.max.ms for the pause to
    cost the node its leadership and ISR places: None takes the cluster's
    attribute pause_s, else 10 s (past the default 9 s session; the
    default replica.lag.time.max.ms is 30 s, so a run lowers it)."""
    name = "pause"

    def __init__(self, hold_s=None):
        self.hold_s = hold_s
        self.pid = self.node = self.since = None

    def target(self, cluster, rng):
        raise NotImplementedError

    def start(self, cluster, rng):
        self.node = self.target(cluster, rng)
        self.pid = cluster.pid(self.node)
        assert self.pid, "node %d is not running" % self.node
        pause(self.pid)
        self.since = time.monotonic()
        hold = self.hold_s if self.hold_s is not None else getattr(cluster, "pause_s", 10)
        self.hold = hold
        return {"node": self.node, "pid": self.pid, "signal": "STOP", "hold_s": hold}

    def stop(self, cluster):
        if self.pid is None:
            return
        left = self.since + self.hold - time.monotonic()
        if left > 0:
            time.sleep(left)
        resume(self.pid)
        self.pid = None


class PauseRandom(_Pause):
    name = "pause-random"

    def target(self, cluster, rng):
        return rng.choice(sorted(cluster.nodes))


class PauseLeader(_Pause):
    """Pause the leader of topic's partition (topic None: cluster.topic)."""
    name = "pause-leader"

    def __init__(self, hold_s=None, topic=None, partition=0):
        super().__init__(hold_s)
        self.topic, self.partition = topic, partition

    def target(self, cluster, rng):
        topic = self.topic or getattr(cluster, "topic", None)
        assert topic, "pause-leader: no topic given (PauseLeader(topic=...) or cluster.topic)"
        return until("a leader of %s-%d" % (topic, self.partition),
                     lambda: (lambda n: n if n and n > 0 else None)(cluster.leader_of(topic, self.partition)))


PROCESS_NEMESES = {c.name: c for c in (KillRandom, KillLeader, KillController, KillAll, PauseRandom, PauseLeader)}
