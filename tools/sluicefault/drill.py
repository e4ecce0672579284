"""sluicefault.drill - the operators' fault drills (`sluicectl drill`,
docs/drills.md).

    python3 -m sluicefault.drill list [--json]
    python3 -m sluicefault.drill check-file FILE
    python3 -m sluicefault.drill run SCENARIO --drill-file FILE [--bootstrap HOSTS] [--seconds S]
        [--budget S] [--topic-prefix P] [--allow-existing-topics] [--topic-config K=V]...
        [--replication-factor N] [--partitions N] [--rate R] [--out DIR] [--seed N] [--json]

A drill creates its own topics (named sluice-drill-<random>, or
--topic-prefix), produces to them with an idempotent acks=all producer and
consumes them with a consumer group of its own (each client a process or
thread writing a JSONL history, the contract of docs/drills.md and
tools/sluicefault/history.py), causes one fault through the commands of
the drill file, heals it, waits until the clients are served again and
the lag is back to normal, reads every partition back and checks the
histories (sluicefault.checker). It prints what the clients saw against
the promise and exits 0 when every promise held, 1 when one was broken,
2 for bad input (a bad drill file names its line and key; a cluster with
topics the drill did not create is refused without
--allow-existing-topics). Its topics are deleted at the end, also after
Ctrl-C or SIGTERM, and every fault it caused is healed first.

Only the stdlib and confluent_kafka; /usr/bin/python3.
"""

import argparse
import collections
import json
import os
import random
import re
import shlex
import signal
import string
import subprocess
import sys
import threading
import time

EXIT_HELD, EXIT_BROKEN, EXIT_INPUT = 0, 1, 2
TOPIC_MARK = "sluice-drill-"


# ---- the checked workload's final read and the checker (one place) ----------
# The drill's own clients write the history format of TASK/docs (send, ack,
# fail, read, assign, revoke, commit, error, nemesis lines); reading every
# partition back and checking the histories are sluicefault.workload's and
# sluicefault.checker's.

def final_read(bootstrap, topics, out_dir):
    from sluicefault import workload
    workload.final_read(bootstrap, topics, out_dir)


def check(paths):
    from sluicefault import checker
    return checker.check(paths)


STALE_RESET = "client-stale-reset"      # sluicefault.checker.STALE_RESET
EPOCH_BUMP = "client-epoch-bump"        # sluicefault.checker.EPOCH_BUMP


def stale_reset_text(result):
    from sluicefault import checker
    return checker.stale_reset_text(result) if result.get("details") else ""


def epoch_bump_text(result):
    from sluicefault import checker
    return checker.epoch_bump_text(result) if result.get("details") else ""


def need_modules():
    """InputError naming what is missing, before the cluster is touched."""
    for m in ("workload", "checker", "drill_txn"):
        try:
            __import__("sluicefault." + m)
        except ImportError as e:
            raise InputError("the drill needs sluicefault.%s beside %s: %s" % (
                m, os.path.dirname(os.path.abspath(__file__)), e))


# Anomalies that break a drill's promise (the checker's counts).
BROKEN_IF = ("lost", "duplicated", "reordered", "unexpected", "divergent", "stale_commit", "commit_backwards")
ANOMALIES = ("lost", "duplicated", "reordered", "unexpected", "divergent", "nonmonotonic", "skipped",
             "stale_commit", "commit_backwards", "aborted_visible", "partial_txn", "premature_read",
             "copy_mismatch", "cycles")


# ---- the drill file ----------------------------------------------------------

ACTIONS = ("kill", "start", "stop", "pause", "resume", "partition", "partition-heal", "slow-disk",
           "slow-disk-heal", "fill-disk", "fill-disk-heal")
NODE_KEYS = ("kafka", "host") + ACTIONS
ALL_KEYS = ("command-timeout",) + ACTIONS
FIELDS = ("node", "host", "kafka", "port")


class InputError(Exception):
    """Bad input: exit 2 with this message."""


class Node:
    def __init__(self, nid, line):
        self.id = nid
        self.line = line
        self.kafka = None
        self.host = None
        self.cmds = {}          # action -> (template, line)

    def command(self, action):
        tmpl, _ = self.cmds[action]
        port = self.kafka.rsplit(":", 1)[1]
        return tmpl.format(node=self.id, host=self.host, kafka=self.kafka, port=port)


class DrillFile:
    def __init__(self, path):
        self.path = path
        self.nodes = {}         # id -> Node
        self.command_timeout = 120.0

    def err(self, line, key, msg):
        return InputError("%s:%d: %s%s" % (self.path, line, "key '%s': " % key if key else "", msg))

    def require(self, actions, node_ids=None):
        """InputError unless every node (or those named) has each action."""
        for nid in sorted(node_ids if node_ids is not None else self.nodes):
            n = self.nodes.get(nid)
            if n is None:
                raise InputError("%s: the cluster has node %d but the drill file has no [node %d] section"
                                 % (self.path, nid, nid))
            for a in actions:
                if a not in n.cmds:
                    raise InputError("%s:%d: [node %d] has no '%s' command (set it there or under [all]); "
                                     "this drill needs %s" % (self.path, n.line, nid, a, ", ".join(actions)))


def parse_drill_file(path):
    """The drill file at path (docs/drills.md#the-drill-file): sections
    [all] (commands for every node) and [node ID] (kafka = HOST:PORT,
    host = NAME, and commands of its own), `key = value` lines, # or ;
    comments. InputError naming the line and key of the first error."""
    df = DrillFile(path)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError("%s: cannot read the drill file: %s" % (path, e))
    common = {}
    section = None      # "all" or a Node
    for no, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("["):
            m = re.fullmatch(r"\[\s*(all|node\s+(\S+))\s*\]", s)
            if not m:
                raise df.err(no, None, "a section is [all] or [node ID], not %s" % s)
            if m.group(1) == "all":
                section = "all"
                continue
            if not re.fullmatch(r"\d{1,9}", m.group(2)):
                raise df.err(no, None, "[node %s]: the node id is the broker's node.id, a number" % m.group(2))
            nid = int(m.group(2))
            if nid in df.nodes:
                raise df.err(no, None, "[node %d] appears twice (first on line %d)" % (nid, df.nodes[nid].line))
            section = df.nodes[nid] = Node(nid, no)
            continue
        if "=" not in s:
            raise df.err(no, None, "expected `key = value` or a [section], not %r" % s)
        key, val = (x.strip() for x in s.split("=", 1))
        if section is None:
            raise df.err(no, key, "outside any section (start with [all] or [node ID])")
        allowed = ALL_KEYS if section == "all" else NODE_KEYS
        if key not in allowed:
            raise df.err(no, key, "not a key of %s (one of: %s)" % (
                "[all]" if section == "all" else "[node ID]", ", ".join(allowed)))
        if not val:
            raise df.err(no, key, "empty value")
        if key == "command-timeout":
            try:
                df.command_timeout = float(val)
                if df.command_timeout <= 0:
                    raise ValueError
            except ValueError:
                raise df.err(no, key, "seconds, a positive number, not %r" % val)
            continue
        if key == "kafka":
            m = re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[^\s:,\[\]]+):(\d{1,5})", val)
            if not m or not 0 < int(m.group(2)) < 65536:
                raise df.err(no, key, "HOST:PORT of the node's Kafka listener, not %r" % val)
            section.kafka = val
            continue
        if key == "host":
            if re.search(r"\s", val):
                raise df.err(no, key, "a host name without spaces, not %r" % val)
            section.host = val
            continue
        try:
            for _, field, spec, conv in string.Formatter().parse(val):
                if field is not None and (field not in FIELDS or spec or conv):
                    raise df.err(no, key, "{%s} is not a substitution (%s); write {{ }} for a brace"
                                 % (field, ", ".join("{%s}" % x for x in FIELDS)))
            shlex.split(val)
        except ValueError as e:
            raise df.err(no, key, "not a command line: %s" % e)
        (common if section == "all" else section.cmds)[key] = (val, no)
    if not df.nodes:
        raise InputError("%s: no [node ID] section: name each node with its kafka = HOST:PORT" % path)
    for n in df.nodes.values():
        if not n.kafka:
            raise df.err(n.line, "kafka", "[node %d] has no kafka = HOST:PORT" % n.id)
        if not n.host:
            n.host = n.kafka.rsplit(":", 1)[0].strip("[]")
        for a, v in common.items():
            n.cmds.setdefault(a, v)
    return df


# ---- scenarios ---------------------------------------------------------------

class Scenario:
    def __init__(self, name, desc, fault=None, heal=None, victim=None, consumers=1, kind="node"):
        self.name, self.desc = name, desc
        self.fault, self.heal = fault, heal      # drill-file actions
        self.victim = victim                     # how the node is chosen
        self.consumers = consumers
        self.kind = kind                         # node | client


SCENARIOS = collections.OrderedDict((s.name, s) for s in (
    Scenario("leader-loss", "SIGKILL the leader of one of the drill topic's partitions (kill), start it again "
             "(start)", "kill", "start", "leader"),
    Scenario("follower-loss", "SIGKILL a follower of one partition (kill), start it again (start)", "kill",
             "start", "follower"),
    Scenario("controller-loss", "SIGKILL the active controller (kill), start it again (start)", "kill", "start",
             "controller"),
    Scenario("coordinator-loss", "SIGKILL the node coordinating the drill's consumer group (kill), start it "
             "again (start)", "kill", "start", "coordinator"),
    Scenario("partitioned-broker", "cut a partition leader off the network (partition), heal it "
             "(partition-heal)", "partition", "partition-heal", "leader"),
    Scenario("slow-disk", "slow down a partition leader's disk (slow-disk), heal it (slow-disk-heal)",
             "slow-disk", "slow-disk-heal", "leader"),
    Scenario("full-disk", "fill a partition leader's disk (fill-disk), free it (fill-disk-heal)", "fill-disk",
             "fill-disk-heal", "leader"),
    Scenario("rebalance-storm", "consumers of the drill's group join and leave every second or two while "
             "records flow", consumers=2, kind="storm"),
    Scenario("lost-produce-response", "pause a partition leader (pause) past the producer's request timeout, "
             "resume it (resume): the producer retries what it sent", "pause", "resume", "leader"),
    Scenario("broker-failover", "stop a partition leader cleanly (stop: SIGTERM, controlled shutdown), start "
             "it again (start)", "stop", "start", "leader"),
    Scenario("consumer-crash-after-commit", "the consumer is SIGKILLed right after a commit; its successor "
             "must resume at the committed offset", kind="crash"),
    Scenario("downstream-timeout", "one consumer's processing stalls past max.poll.interval.ms; its partitions "
             "move to the other consumer", consumers=2, kind="stall"),
    Scenario("poison-pill", "records that always fail processing: the consumer must route each to "
             "<prefix>-dlq after 3 tries, or stop loudly", kind="poison"),
    Scenario("hot-key", "one key takes 80% of the records: the partition skew and the lag it causes",
             kind="hotkey"),
    Scenario("txn-leader-loss", "transactional producers and a consume-transform-produce copier while the "
             "leader of one of the drill topic's partitions is SIGKILLed (kill) and started again (start)",
             "kill", "start", "leader", kind="txn"),
))


# ---- histories ---------------------------------------------------------------

class History:
    """One client's JSONL history (one JSON object a line, "t" the writer's
    time.monotonic_ns(), "client" its name)."""

    def __init__(self, path, client):
        self.client = client
        self.f = open(path, "a", encoding="utf-8")
        self.lock = threading.Lock()

    def write(self, type_, **kw):
        d = {"t": time.monotonic_ns(), "client": self.client, "type": type_}
        d.update(kw)
        with self.lock:
            self.f.write(json.dumps(d) + "\n")

    def flush(self):
        with self.lock:
            self.f.flush()

    def close(self):
        with self.lock:
            self.f.close()


def read_jsonl(path):
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass        # a torn last line of a killed process
    except OSError:
        pass
    return out


def err_name(e):
    try:
        return e.name() if hasattr(e, "name") else str(e)
    except Exception:  # noqa: BLE001
        return str(e)


# ---- the producer (a thread of the drill) -------------------------------------

class ProducerClient(threading.Thread):
    """An idempotent acks=all producer at `rate` records a second. Values
    "<client>-<seq>"; keys key-<n> (hot-key: 80% "hot"); poison() marks the
    next records with the header drill-poison=1."""

    def __init__(self, bootstrap, topic, out_dir, rate, seed, request_timeout_ms=5000, hot=False, name="p1"):
        super().__init__(daemon=True)
        self.topic, self.rate, self.hot, self.name = topic, rate, hot, name
        self.rng = random.Random(seed)
        self.h = History(os.path.join(out_dir, name + ".jsonl"), name)
        from confluent_kafka import Producer
        self.p = Producer({"log_level": 0, "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                           "linger.ms": 5, "request.timeout.ms": request_timeout_ms,
                           "message.timeout.ms": 600000, "error_cb": self._on_error,
                           "retry.backoff.ms": 100, "socket.timeout.ms": max(request_timeout_ms, 10000)})
        self.stopping = threading.Event()
        self.crashed = None
        self.seq = 0
        self.acks = []          # monotonic seconds of each ack
        self.acked_end = {}     # partition -> highest acknowledged offset + 1
        self.ack_times = collections.defaultdict(list)   # partition -> monotonic s of its acks
        self.pending = 0
        self.poison_left = 0
        self.poisoned = []      # values sent as poison
        self.errors = collections.Counter()
        self.lock = threading.Lock()

    def _on_error(self, e):
        self.errors[err_name(e)] += 1
        self.h.write("error", error=err_name(e), what=str(e))

    def poison(self, n):
        with self.lock:
            self.poison_left += n

    def _delivered(self, err, msg, value):
        with self.lock:
            self.pending -= 1
        if err is None:
            self.acks.append(time.monotonic())
            self.ack_times[msg.partition()].append(self.acks[-1])
            # an idempotent resend the broker already had may come back
            # without its offset (None): acknowledged all the same
            if msg.offset() is not None and msg.offset() >= 0:
                self.acked_end[msg.partition()] = max(self.acked_end.get(msg.partition(), 0), msg.offset() + 1)
            self.h.write("ack", value=value, topic=msg.topic(), partition=msg.partition(), offset=msg.offset())
        else:
            self.errors[err_name(err)] += 1
            self.h.write("fail", value=value, error=err_name(err), definite=False)

    def run(self):
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - the verdict says so
            self.crashed = "%s: %s" % (type(e).__name__, e)
            self.stopping.set()

    def _run(self):
        start = time.monotonic()
        while not self.stopping.is_set():
            due = start + self.seq / self.rate
            now = time.monotonic()
            if now < due:
                self.p.poll(min(due - now, 0.05))
                continue
            value = "%s-%d" % (self.name, self.seq)
            key = "hot" if self.hot and self.rng.random() < 0.8 else "key-%d" % self.rng.randrange(64)
            headers = None
            with self.lock:
                if self.poison_left:
                    self.poison_left -= 1
                    headers = [("drill-poison", b"1")]
                    self.poisoned.append(value)
                self.pending += 1
            self.h.write("send", value=value, key=key, topic=self.topic, partition=None, txn=None)
            try:
                self.p.produce(self.topic, value.encode(), key.encode(), headers=headers,
                               on_delivery=lambda err, msg, v=value: self._delivered(err, msg, v))
            except BufferError:
                with self.lock:
                    self.pending -= 1
                self.h.write("fail", value=value, error="QUEUE_FULL", definite=True)
                self.p.poll(0.1)
            except Exception as e:  # noqa: BLE001
                with self.lock:
                    self.pending -= 1
                self.h.write("fail", value=value, error=type(e).__name__, definite=True)
            self.seq += 1
            self.p.poll(0)
        deadline = time.monotonic() + 120
        while self.pending > 0 and time.monotonic() < deadline:
            self.p.poll(0.1)
        self.h.flush()
        self.h.close()

    def stop(self):
        self.stopping.set()


# ---- the consumer (a process of its own, so that it can be killed) ------------

def consumer_main(argv):
    """`python3 -m sluicefault.drill _consumer ...`: one member of the
    drill's group. Reads, "processes" and commits each batch (synchronous
    commits); SIGUSR1 is its fault (crash: SIGKILL itself right after the
    next commit; stall: sleep past max.poll.interval.ms before committing
    the next batch); SIGTERM closes it cleanly."""
    ap = argparse.ArgumentParser(prog="drill _consumer")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--on-fault", choices=("none", "crash", "stall"), default="none")
    ap.add_argument("--max-poll-ms", type=int, default=300000)
    ap.add_argument("--dlq")
    ap.add_argument("--poison-tries", type=int, default=3)
    ap.add_argument("--parent", type=int)
    a = ap.parse_args(argv)
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    h = History(os.path.join(a.out, a.name + ".jsonl"), a.name)
    ev = History(os.path.join(a.out, a.name + ".drill.jsonl"), a.name)   # drill-only events
    state = {"fault": False, "stop": False, "session": 0}
    signal.signal(signal.SIGUSR1, lambda *_: state.__setitem__("fault", True))
    signal.signal(signal.SIGTERM, lambda *_: state.__setitem__("stop", True))
    c = None

    def member_id(cons):
        return group_meta(cons)[1] or a.name

    def gen(cons):
        g = group_meta(cons)[0]
        return -1 if g is None else g

    def on_error(e):
        h.write("error", error=err_name(e), what=str(e))

    def on_assign(cons, parts):
        state["session"] += 1
        h.write("assign", partitions=[[p.topic, p.partition] for p in parts], generation=gen(cons),
                member=member_id(cons), session=state["session"], group=a.group)
        h.flush()

    def on_revoke(cons, parts):
        h.write("revoke", partitions=[[p.topic, p.partition] for p in parts], generation=gen(cons),
                member=member_id(cons), session=state["session"], group=a.group)
        h.flush()

    c = Consumer({"log_level": 0, "bootstrap.servers": a.bootstrap, "group.id": a.group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                  "max.poll.interval.ms": a.max_poll_ms, "error_cb": on_error,
                  "partition.assignment.strategy": "range",
                  "topic.metadata.refresh.interval.ms": 2000})
    c.subscribe([a.topic], on_assign=on_assign, on_revoke=on_revoke)
    dlq = Producer({"log_level": 0, "bootstrap.servers": a.bootstrap, "enable.idempotence": True, "acks": "all"}) \
        if a.dlq else None
    tries = collections.Counter()
    while not state["stop"]:
        if a.parent and os.getppid() != a.parent:
            break               # the drill is gone: leave the group
        msgs = c.consume(num_messages=200, timeout=0.5)
        done = {}
        for m in msgs:
            if m.error():
                h.write("error", error=err_name(m.error()), what=str(m.error()))
                continue
            value = m.value().decode(errors="replace") if m.value() is not None else None
            key = m.key().decode(errors="replace") if m.key() is not None else None
            h.write("read", value=value, key=key, topic=m.topic(), partition=m.partition(), offset=m.offset(),
                    reader=a.name, isolation="read_uncommitted", session=state["session"])
            poison = any(k == "drill-poison" for k, _ in (m.headers() or ()))
            if poison:
                # processing fails every time: a few tries, then the dead
                # letter topic; a failure there stops the consumer loudly
                where = (m.topic(), m.partition(), m.offset())
                while tries[where] < a.poison_tries:
                    tries[where] += 1
                    ev.write("poison_try", value=value, partition=m.partition(), offset=m.offset(),
                             attempt=tries[where])
                if dlq is None:
                    sys.stderr.write("drill consumer %s: poison record %s at %s-%d offset %d and no dead "
                                     "letter topic: stopping\n" % (a.name, value, *where))
                    h.flush()
                    ev.flush()
                    os._exit(3)
                result = {}
                dlq.produce(a.dlq, m.value(), m.key(), headers=[
                    ("origin-topic", m.topic().encode()), ("origin-partition", str(m.partition()).encode()),
                    ("origin-offset", str(m.offset()).encode())],
                    on_delivery=lambda err, msg: result.__setitem__("r", (err, msg)))
                dlq.flush(60)
                err = result.get("r", ("no answer within 60 s", None))[0]
                if err is not None:
                    sys.stderr.write("drill consumer %s: cannot write poison record %s (%s-%d offset %d) to the "
                                     "dead letter topic %s: %s: stopping\n" % (a.name, value, *where, a.dlq, err))
                    h.flush()
                    ev.flush()
                    os._exit(3)
                ev.write("dead_lettered", value=value, partition=m.partition(), offset=m.offset(),
                         attempts=tries[where])
            done[(m.topic(), m.partition())] = m.offset() + 1
        if state["fault"] and a.on_fault == "stall" and done:
            state["fault"] = False
            stall = a.max_poll_ms / 1000.0 + 4
            ev.write("stall", seconds=stall)
            h.flush()
            time.sleep(stall)           # the downstream does not answer
        if done:
            h.flush()
            parts = [[t, p, o] for (t, p), o in sorted(done.items())]
            t0, g, mem = time.monotonic_ns(), gen(c), member_id(c)
            try:
                c.commit(offsets=[TopicPartition(t, p, o) for t, p, o in parts], asynchronous=False)
                h.write("commit", partitions=parts, generation=g, member=mem, ok=True, error=None, t0=t0,
                        group=a.group)
                h.flush()
                if state["fault"] and a.on_fault == "crash":
                    ev.write("crash", partitions=parts)
                    ev.flush()
                    os.kill(os.getpid(), signal.SIGKILL)
            except KafkaException as e:
                h.write("commit", partitions=parts, generation=g, member=mem, ok=False,
                        error=err_name(e.args[0]), t0=t0, group=a.group)
                h.flush()
    c.close()
    h.write("revoke", partitions=[], generation=-1, member="", session=state["session"], group=a.group)
    h.close()
    ev.close()
    return 0


class ConsumerProc:
    def __init__(self, drill, name, on_fault="none", max_poll_ms=300000, dlq=None):
        self.name = name
        cmd = [sys.executable, "-m", "sluicefault.drill", "_consumer", "--bootstrap", drill.bootstrap,
               "--topic", drill.topic, "--group", drill.group, "--out", drill.out, "--name", name,
               "--on-fault", on_fault, "--max-poll-ms", str(max_poll_ms), "--parent", str(os.getpid())] + (["--dlq", dlq] if dlq else [])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] +
            [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        self.errf = open(os.path.join(drill.out, name + ".stderr"), "w")
        self.p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.errf, stderr=self.errf, env=env,
                                  start_new_session=True)

    def assigned(self, out):
        return any(r["type"] == "assign" and r["partitions"] for r in read_jsonl(os.path.join(out, self.name + ".jsonl")))

    def signal(self, sig):
        if self.p.poll() is None:
            os.kill(self.p.pid, sig)

    def stop(self, timeout=30):
        self.signal(signal.SIGTERM)
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.errf.close()


# ---- the run -----------------------------------------------------------------

def group_meta(consumer):
    """(generation, member id) from librdkafka's serialized group metadata
    ("CGMDv2:" int32 generation in host order, group.id NUL member.id NUL
    ...), or (None, None): confluent-kafka 1.7 has no accessor."""
    try:
        b = bytes(consumer.consumer_group_metadata())
    except Exception:  # noqa: BLE001 - not in a group yet
        return None, None
    if not b.startswith(b"CGMDv2:") or len(b) < 11:
        return None, None
    parts = b[11:].split(b"\0")
    return (int.from_bytes(b[7:11], sys.byteorder, signed=True),
            parts[1].decode(errors="replace") if len(parts) > 1 and parts[1] else None)


def find_coordinator(bootstrap, group):
    """The node id of group's coordinator: FindCoordinator v0 (ApiKey 10)
    over a plain socket (confluent-kafka before 2.0 has no
    describe_consumer_groups)."""
    import socket
    import struct
    last = None
    for addr in bootstrap.split(","):
        host, port = addr.rsplit(":", 1)
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=10) as s:
                cid, key = b"sluice-drill", group.encode()
                body = struct.pack(">hhih", 10, 0, 1, len(cid)) + cid + struct.pack(">h", len(key)) + key
                s.sendall(struct.pack(">i", len(body)) + body)
                buf = b""
                while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
                    chunk = s.recv(65536)
                    if not chunk:
                        raise OSError("connection closed")
                    buf += chunk
                _corr, err, node = struct.unpack(">ihi", buf[4:14])
                if err == 0:
                    return node
                last = "error code %d" % err
        except (OSError, struct.error) as e:
            last = e
    raise RuntimeError("cannot find the coordinator of group %s: %s" % (group, last))


def tail(path, n=1500):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def say(*a):
    print("drill:", *a, file=sys.stderr, flush=True)


class Drill:
    def __init__(self, args, df, sc):
        self.args, self.df, self.sc = args, df, sc
        self.seed = args.seed if args.seed is not None else random.randrange(1 << 31)
        self.rng = random.Random(self.seed)
        self.bootstrap = args.bootstrap or ",".join(n.kafka for _, n in sorted(df.nodes.items()))
        self.prefix = args.topic_prefix or TOPIC_MARK + "%08x" % random.SystemRandom().getrandbits(32)
        self.topic, self.dlq, self.group = self.prefix, self.prefix + "-dlq", self.prefix + "-group"
        self.out = args.out or os.path.abspath(self.prefix)
        self.created = []
        self.active_heal = None     # (node, action) to run if interrupted mid-fault
        # Ctrl-C or SIGTERM (the signals taken, in order); while defer is
        # above 0 a signal is only recorded here, and acted on once the
        # fault command or the heal in progress is over
        self.interrupted = []
        self.defer = 0
        self.consumers = []
        self.producer = None
        self.nemesis = None
        self.lag = []               # (monotonic s, total lag or None, {partition: lag})
        self._admin = None
        self.rf, self.topic_conf = None, {}
        self.t_fault = self.t_heal = None

    # -- the cluster
    def admin(self):
        # one client for the whole drill: its futures die with it
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient({"log_level": 0, "bootstrap.servers": self.bootstrap, "socket.timeout.ms": 10000})
        return self._admin

    def metadata(self, timeout=10):
        return self.admin().list_topics(timeout=timeout)

    def preflight(self):
        try:
            md = self.metadata(20)
        except Exception as e:  # noqa: BLE001
            raise InputError("cannot reach the cluster at %s: %s" % (self.bootstrap, e))
        brokers = sorted(md.brokers)
        missing = [b for b in brokers if b not in self.df.nodes]
        if missing:
            raise InputError("%s: the cluster has broker(s) %s the drill file does not name ([node ID] sections)"
                             % (self.df.path, ", ".join(map(str, missing))))
        theirs = sorted(t for t in md.topics if not t.startswith("__") and not t.startswith(TOPIC_MARK)
                        and not t.startswith(self.prefix))
        if theirs and not self.args.allow_existing_topics:
            raise InputError("refusing to run: the cluster has %d topic(s) the drill did not create (%s%s); a "
                             "drill kills, pauses or cuts off brokers that serve them too. Run it on a staging "
                             "cluster, or pass --allow-existing-topics" % (
                                 len(theirs), ", ".join(theirs[:5]), ", ..." if len(theirs) > 5 else ""))
        for t in (self.topic, self.dlq, self.topic + "-out"):
            if t in md.topics:
                raise InputError("topic %s exists already: the drill writes only to topics it creates (pick "
                                 "another --topic-prefix, or delete it: sluicectl topic delete %s)" % (t, t))
        leftovers = sorted(t for t in md.topics if t.startswith(TOPIC_MARK))
        if leftovers:
            say("note: topics of an earlier drill are still there (%s): sluicectl topic delete them"
                % ", ".join(leftovers[:5]))
        return len(brokers)

    def create_topics(self, nbrokers):
        from confluent_kafka.admin import NewTopic
        rf = self.args.replication_factor or min(3, nbrokers)
        conf = {"min.insync.replicas": "2"} if rf >= 3 else {}
        for kv in self.args.topic_config:
            if "=" not in kv:
                raise InputError("--topic-config wants KEY=VALUE, not %r" % kv)
            k, v = kv.split("=", 1)
            conf[k] = v
        topics = [NewTopic(self.topic, self.args.partitions, rf, config=conf)]
        if self.sc.kind == "poison":
            topics.append(NewTopic(self.dlq, 1, rf, config=conf))
        if self.sc.kind == "txn":
            topics.append(NewTopic(self.topic + "-out", self.args.partitions, rf, config=conf))   # the copies
        for t, f in self.admin().create_topics(topics, operation_timeout=30).items():
            try:
                f.result(60)
            except Exception as e:  # noqa: BLE001
                raise InputError("cannot create topic %s: %s" % (t, e))
            self.created.append(t)
        self.wait("every partition of %s led" % self.topic, lambda: self.leaders() is not None, 60)
        # every node knows the topic before a consumer joins (a group led
        # by a member that does not see it yet assigns nothing)
        from confluent_kafka.admin import AdminClient
        for n in sorted(self.df.nodes.values(), key=lambda n: n.id):
            one = AdminClient({"log_level": 0, "bootstrap.servers": n.kafka})
            self.wait("node %d lists %s" % (n.id, self.topic), lambda: all(
                t in one.list_topics(timeout=5).topics for t in self.created), 60)
        self.rf, self.topic_conf = rf, conf

    def leaders(self):
        """{partition: (leader, replicas)} of the drill's topic, or None."""
        t = self.metadata().topics.get(self.topic)
        if t is None or t.error is not None or len(t.partitions) != self.args.partitions:
            return None
        if any(p.leader < 0 for p in t.partitions.values()):
            return None
        return {i: (p.leader, list(p.replicas)) for i, p in t.partitions.items()}

    def delete_topics(self):
        if not self.created:
            return
        try:
            for t, f in self.admin().delete_topics(self.created, operation_timeout=30).items():
                try:
                    f.result(60)
                except Exception as e:  # noqa: BLE001
                    say("could not delete topic %s: %s (sluicectl topic delete %s)" % (t, e, t))
        except Exception as e:  # noqa: BLE001
            say("could not delete topics %s: %s" % (", ".join(self.created), e))
        self.created = []

    @staticmethod
    def wait(what, fn, timeout):
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            try:
                if fn():
                    return
            except Exception as e:  # noqa: BLE001
                last = e
            time.sleep(0.3)
        raise TimeoutError("%s: not within %d s%s" % (what, timeout, " (%s)" % last if last else ""))

    # -- the fault
    def victim(self):
        how = self.sc.victim
        parts = self.leaders()
        p = self.rng.randrange(self.args.partitions)
        leader, replicas = parts[p]
        if how == "leader":
            return leader, "the leader of %s-%d" % (self.topic, p)
        if how == "follower":
            others = [r for r in replicas if r != leader]
            if not others:
                raise InputError("follower-loss needs a replication factor above 1 (%s-%d has one replica)"
                                 % (self.topic, p))
            return self.rng.choice(others), "a follower of %s-%d" % (self.topic, p)
        if how == "controller":
            c = self.metadata().controller_id
            if c < 0:
                raise RuntimeError("the cluster names no active controller")
            return c, "the active controller"
        if how == "coordinator":
            return find_coordinator(self.bootstrap, self.group), "the coordinator of group %s" % self.group
        raise AssertionError(how)

    def command(self, node, action):
        n = self.df.nodes[node]
        cmd = n.command(action)
        t0 = time.monotonic()
        # A fault command runs to its end, interrupted or not: one stopped
        # half-way (an ssh whose remote side goes on) could pause or kill
        # the node after the heal that follows the interruption. So the
        # command gets a session of its own (the terminal's Ctrl-C does not
        # reach it), and a signal meanwhile waits for it (at most the drill
        # file's command-timeout).
        self.defer += 1
        try:
            say("node %d: %s: %s" % (node, action, cmd))
            p = subprocess.run(["/bin/sh", "-c", cmd], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=self.df.command_timeout, start_new_session=True)
        except subprocess.TimeoutExpired:
            raise RuntimeError("%s:%d: node %d's %s command did not finish within %g s: %s" % (
                self.df.path, n.cmds[action][1], node, action, self.df.command_timeout, cmd))
        finally:
            self.defer -= 1
        if p.returncode:
            raise RuntimeError("%s:%d: node %d's %s command failed (exit %d): %s\n%s" % (
                self.df.path, n.cmds[action][1], node, action, p.returncode, cmd,
                p.stdout.decode(errors="replace")[-2000:]))
        self.nemesis.write("nemesis", name=self.sc.name, phase="start" if action == self.sc.fault else "stop",
                           detail={"node": node, "action": action, "command": cmd,
                                   "seconds": round(time.monotonic() - t0, 3)})
        self.nemesis.flush()
        if self.interrupted and not self.defer:
            raise KeyboardInterrupt     # taken while the command ran

    # -- the consumers' lag: what was acknowledged (the producer's highest
    # offset + 1 per partition) less what the group committed last (the
    # consumers' histories); the cluster is not asked, so a fault cannot
    # stall the sampling
    def sample_lag(self, stop):
        pos, committed = {}, {}
        while not stop.is_set():
            now = time.monotonic()
            for c in list(self.consumers):
                path = os.path.join(self.out, c.name + ".jsonl")
                try:
                    with open(path, encoding="utf-8") as f:
                        f.seek(pos.get(path, 0))
                        while True:
                            line = f.readline()
                            if not line.endswith("\n"):
                                break
                            pos[path] = f.tell()
                            try:
                                r = json.loads(line)
                            except ValueError:
                                continue
                            if r.get("type") == "commit" and r.get("ok"):
                                for _, p, o in r["partitions"]:
                                    if committed.get(p, (0, 0))[0] <= r["t"]:
                                        committed[p] = (r["t"], o)
                except OSError:
                    pass
            ends = dict(self.producer.acked_end)
            per = {p: max(0, e - committed.get(p, (0, 0))[1]) for p, e in ends.items()}
            self.lag.append((now, sum(per.values()), per))
            stop.wait(0.5)

    # -- the whole drill
    def run(self):
        a, sc = self.args, self.sc
        os.makedirs(self.out, exist_ok=True)
        self.nemesis = History(os.path.join(self.out, "drill.jsonl"), "drill")
        if sc.kind in ("node", "txn"):
            self.df.require((sc.fault, sc.heal))
        nbrokers = self.preflight()
        say("scenario %s, seed %d, topic %s, histories in %s" % (sc.name, self.seed, self.topic, self.out))
        self.create_topics(nbrokers)
        if sc.kind == "txn":
            from sluicefault import drill_txn
            return drill_txn.run(self, say)
        on_fault = {"crash": "crash", "stall": "stall"}.get(sc.kind, "none")
        max_poll = 6000 if sc.kind == "stall" else 300000
        for i in range(sc.consumers):
            self.consumers.append(ConsumerProc(self, "c%d" % (i + 1), on_fault if i == 0 else "none", max_poll,
                                               self.dlq if sc.kind == "poison" else None))
        self.wait("the drill's consumers assigned", lambda: self.consumers_alive() and all(
            c.assigned(self.out) for c in self.consumers) or sc.consumers > 1 and any(
            c.assigned(self.out) for c in self.consumers), 90)
        self.producer = ProducerClient(self.bootstrap, self.topic, self.out, a.rate, self.seed,
                                       request_timeout_ms=2000 if sc.name == "lost-produce-response" else 5000,
                                       hot=sc.kind == "hotkey")
        stop_lag = threading.Event()
        sampler = threading.Thread(target=self.sample_lag, args=(stop_lag,), daemon=True)
        t0 = time.monotonic()
        self.producer.start()
        sampler.start()
        fault_at, heal_after = a.seconds * 0.25, a.seconds * 0.35
        time.sleep(fault_at)
        self.t_fault = time.monotonic()
        self.victim_desc = None
        storm = 0
        if sc.kind == "node":
            node, self.victim_desc = self.victim()
            self.victim_desc = "node %d (%s)" % (node, self.victim_desc)
            self.active_heal = (node, sc.heal)
            self.command(node, sc.fault)
            time.sleep(max(0.0, self.t_fault + heal_after - time.monotonic()))
            self.command(node, sc.heal)     # a failure here is retried once by cleanup()
            self.active_heal = None
        elif sc.kind in ("crash", "stall"):
            self.nemesis.write("nemesis", name=sc.name, phase="start", detail={"consumer": "c1"})
            self.consumers[0].signal(signal.SIGUSR1)
            self.victim_desc = "consumer c1"
            if sc.kind == "crash":
                self.wait("consumer c1 crashed after a commit", lambda: self.consumers[0].p.poll() is not None, 60)
                self.consumers.append(ConsumerProc(self, "c2"))
            else:
                time.sleep(heal_after)
            self.nemesis.write("nemesis", name=sc.name, phase="stop", detail={})
        elif sc.kind == "storm":
            self.nemesis.write("nemesis", name=sc.name, phase="start", detail={})
            end = time.monotonic() + heal_after
            n = len(self.consumers)
            while time.monotonic() < end:
                live = [c for c in self.consumers if c.p.poll() is None]
                if storm % 2 == 0 or len(live) <= 1:
                    n += 1
                    self.consumers.append(ConsumerProc(self, "c%d" % n))
                else:
                    live[0].stop()
                storm += 1
                time.sleep(1.5)
            self.nemesis.write("nemesis", name=sc.name, phase="stop", detail={"joins_and_leaves": storm})
        elif sc.kind == "poison":
            self.nemesis.write("nemesis", name=sc.name, phase="start", detail={"records": 3})
            self.producer.poison(3)
            time.sleep(heal_after)
            self.nemesis.write("nemesis", name=sc.name, phase="stop", detail={})
        else:
            time.sleep(heal_after)
        self.t_heal = time.monotonic()
        self.nemesis.flush()
        # production continues until the end of --seconds and until the
        # clients are served and the lag is back to normal (or the budget
        # is spent)
        normal = self.normal_lag()
        self.converged_s = None
        budget_end = self.t_heal + a.budget
        last_bad, seen_good = self.t_heal, None
        while time.monotonic() < budget_end:
            now = time.monotonic()
            acked_since = bool(self.producer.acks) and self.producer.acks[-1] > self.t_heal
            for t, v, _ in [x for x in self.lag if x[0] > (seen_good or last_bad)]:
                if v is None or v > normal or not acked_since:
                    last_bad, seen_good = t, None
                elif seen_good is None:
                    seen_good = t
            # back to normal, and staying there for 2 s, past --seconds
            if seen_good is not None and now - seen_good >= 2 and now - t0 >= a.seconds:
                self.converged_s = max(0.0, seen_good - self.t_heal) if last_bad > self.t_heal else 0.0
                break
            time.sleep(0.25)
        self.producer.stop()
        self.producer.join(150)
        # the consumers read to the end of what was acknowledged
        self.wait_drained(60)
        stop_lag.set()
        sampler.join(15)
        with open(os.path.join(self.out, "lag.json"), "w") as f:
            json.dump({"t_start": t0, "t_fault": self.t_fault, "t_heal": self.t_heal,
                       "samples": [[round(t - t0, 2), v, per] for t, v, per in self.lag]}, f)
        for c in self.consumers:
            c.stop()
        self.normal = normal
        final_read(self.bootstrap, [self.topic], self.out)
        return self.verdict()

    def consumers_alive(self):
        for c in self.consumers:
            if c.p.poll() is not None:
                raise RuntimeError("consumer %s exited (%s): %s" % (c.name, c.p.returncode, tail(
                    os.path.join(self.out, c.name + ".stderr"))))
        return True

    def normal_lag(self):
        base = [s[1] for s in self.lag if s[0] < self.t_fault and s[1] is not None]
        return max(base + [0]) + self.args.rate

    def wait_drained(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.lag and self.lag[-1][1] == 0:
                return True
            if not any(c.p.poll() is None for c in self.consumers):
                return False
            time.sleep(0.3)
        return False

    # -- the verdict
    def histories(self):
        return sorted(os.path.join(self.out, f) for f in os.listdir(self.out)
                      if f.endswith(".jsonl") and not f.endswith(".drill.jsonl"))

    def verdict(self):
        a, sc = self.args, self.sc
        paths = self.histories()
        result = check(paths)
        recs = {p: read_jsonl(p) for p in paths}
        broken = []
        for k in BROKEN_IF:
            if result.get(k):
                broken.append("%s: %d" % (k, result[k]))
        # the consumers: commits, first reads of each assignment, redeliveries
        commits = []    # (t, partition, offset)
        firsts = []     # (t, reader, session, partition, offset)
        seen = collections.defaultdict(list)
        handover = collections.defaultdict(list)   # partition -> [(t, reader)]
        pauses = []
        for p, rs in recs.items():
            got = set()
            for r in rs:
                if r.get("type") == "commit" and r.get("ok"):
                    commits += [(r["t"], pp, o) for _, pp, o in r["partitions"]]
                elif r.get("type") == "read" and not str(r.get("reader", "")).startswith("final"):
                    seen[(r["partition"], r["offset"])].append(r["reader"])
                    handover[r["partition"]].append((r["t"], r["reader"]))
                    k = (r["session"], r["partition"])
                    if k not in got:
                        got.add(k)
                        firsts.append((r["t"], r["reader"], r["session"], r["partition"], r["offset"]))
        commits.sort()
        # a rebalance pause: a partition's reads moving from one member to
        # another (the gap between the last read of the one and the first
        # of the next)
        for reads in handover.values():
            reads.sort()
            pauses += [(b[0] - a_[0]) / 1e9 for a_, b in zip(reads, reads[1:]) if a_[1] != b[1]]
        stale = self.stale_commits(recs)
        if stale:
            broken.append("commits by a member that no longer owned the partition: %d (first: %s)" % (
                len(stale), stale[0]))
        resume_bad = []
        for t, reader, session, part, off in sorted(firsts):
            before = [o for ct, cp, o in commits if cp == part and ct < t]
            want = before[-1] if before else 0
            if off != want:
                resume_bad.append({"reader": reader, "partition": part, "first_read": off, "committed": want})
        # a commit may land after another member's first read of a moved
        # partition only from a stale owner: the checker's stale_commit
        if resume_bad:
            broken.append("committed offset != next record read: %d" % len(resume_bad))
        redelivered = sorted((p, o, len(v)) for (p, o), v in seen.items() if len(v) > 1)
        unavailable = self.unavailability()
        errors = collections.Counter()
        for rs in recs.values():
            for r in rs:
                if r.get("type") in ("fail", "error"):
                    errors[r.get("error")] += 1
        extra = {}
        if sc.kind == "poison":
            extra["dead_letters"] = self.check_dlq(broken)
        if sc.kind == "hotkey":
            extra["skew"] = self.skew(recs)
        if sc.kind == "crash":
            crashed = [e for e in read_jsonl(os.path.join(self.out, "c1.drill.jsonl")) if e["type"] == "crash"]
            extra["crashed_after_commit"] = crashed[0]["partitions"] if crashed else None
            if not crashed:
                broken.append("the consumer did not crash after a commit (no evidence in c1.drill.jsonl)")
        if self.producer.crashed:
            broken.append("the drill's producer failed: %s" % self.producer.crashed)
        if self.producer.pending > 0:
            broken.append("%d record(s) sent and never answered (acknowledged or failed) within 120 s of the "
                          "end" % self.producer.pending)
        dead = [c.name for c in self.consumers if c.p.returncode not in (0, None, -signal.SIGKILL)]
        if dead:
            broken.append("consumer(s) %s stopped with an error (see their .stderr in %s)" % (", ".join(dead),
                                                                                              self.out))
        if self.converged_s is None:
            broken.append("not converged within the budget of %g s after the heal" % a.budget)
        max_lag = max([s[1] for s in self.lag if s[1] is not None] + [0])
        return {
            "scenario": sc.name, "seed": self.seed, "topic": self.topic, "histories": self.out,
            "victim": self.victim_desc, "replication_factor": self.rf, "topic_config": self.topic_conf,
            "held": not broken, "broken": broken,
            "sent": result.get("sent"), "acked": result.get("acked"), "read": result.get("read"),
            "lost": result.get("lost", 0), "duplicated": result.get("duplicated", 0),
            "anomalies": {k: result.get(k, 0) for k in ANOMALIES},
            "details": result.get("details", {}),
            # librdkafka's stale offset reset: a read that went back, which
            # the history shows to be the client's (the checker's evidence)
            "client_stale_reset": result.get(STALE_RESET, 0),
            "client_stale_reset_evidence": stale_reset_text(result),
            # a record the client sent again under a new producer epoch
            # (librdkafka's epoch bump), from the log's batch headers
            "client_epoch_bump": result.get(EPOCH_BUMP, 0),
            "client_epoch_bump_evidence": epoch_bump_text(result),
            "unavailable_s": unavailable, "errors": dict(errors),
            "stale_commits": [list(x) for x in stale[:20]],
            "redelivered": len(redelivered), "redelivered_offsets": [[p, o] for p, o, _ in redelivered[:20]],
            "resume_mismatches": resume_bad[:20],
            "rebalance_pauses_s": sorted(round(x, 2) for x in pauses)[-5:],
            "lag_normal": self.normal, "lag_max": max_lag, "converged_s": self.converged_s,
            "budget_s": a.budget, **extra,
        }

    @staticmethod
    def stale_commits(recs):
        """Commits the broker took (ok) from a member after another member
        was assigned the partition, and before this one was given it back:
        [(reader, partition, offset)]."""
        owner = {}          # partition -> (t, reader) of its latest assignment
        events = []
        for rs in recs.values():
            for r in rs:
                if r.get("type") == "assign":
                    events.append((r["t"], 0, r["client"], r))
                elif r.get("type") == "commit" and r.get("ok"):
                    events.append((r["t"], 1, r["client"], r))
        out = []
        for _, kind, who, r in sorted(events, key=lambda e: (e[0], e[1])):
            if kind == 0:
                for _, p in r["partitions"]:
                    owner[p] = who
            else:
                out += [(who, p, o) for _, p, o in r["partitions"] if owner.get(p, who) != who]
        return out

    def unavailability(self):
        """The longest time one partition went without an acknowledgement
        (its records kept coming: keys spread over every partition)."""
        gaps = [0.0]
        for acks in self.producer.ack_times.values():
            acks = sorted(acks)
            gaps += [b - a for a, b in zip(acks, acks[1:])]
        return round(max(gaps), 3)

    def check_dlq(self, broken):
        """Every poison record in <prefix>-dlq with its origin partition and
        offset; each tried at most --poison-tries times."""
        from confluent_kafka import Consumer, TopicPartition
        acks = {}
        for r in read_jsonl(os.path.join(self.out, self.producer.name + ".jsonl")):
            if r["type"] == "ack":
                acks[r["value"]] = (r["partition"], r["offset"])
        c = Consumer({"log_level": 0, "bootstrap.servers": self.bootstrap, "group.id": self.prefix + "-dlqcheck",
                      "enable.auto.commit": False})
        lo, hi = c.get_watermark_offsets(TopicPartition(self.dlq, 0), timeout=30)
        c.assign([TopicPartition(self.dlq, 0, lo)])
        found = {}
        end = time.monotonic() + 60
        while hi > lo and time.monotonic() < end:
            m = c.poll(1.0)
            if m is None or m.error():
                continue
            hd = {k: v.decode() for k, v in (m.headers() or ())}
            found[m.value().decode()] = (int(hd.get("origin-partition", -1)), int(hd.get("origin-offset", -1)),
                                         m.offset())
            if m.offset() + 1 >= hi:
                break
        c.close()
        out = []
        for v in self.producer.poisoned:
            origin = acks.get(v)
            got = found.get(v)
            ok = origin is not None and got is not None and got[:2] == origin
            out.append({"value": v, "origin": origin, "dlq_offset": got[2] if got else None, "ok": ok})
            if not ok:
                broken.append("poison record %s (acknowledged at %s) %s" % (
                    v, origin, "not in %s" % self.dlq if got is None else "in %s with origin %s" % (self.dlq, got[:2])))
        tries = collections.Counter()
        for f in os.listdir(self.out):
            if f.endswith(".drill.jsonl"):
                for e in read_jsonl(os.path.join(self.out, f)):
                    if e["type"] == "poison_try":
                        tries[(e["partition"], e["offset"])] += 1
        looped = {k: n for k, n in tries.items() if n > 3 * 2}   # a redelivery may try it again once
        if looped:
            broken.append("poison records tried again and again: %s" % looped)
        return out

    def skew(self, recs):
        per = collections.Counter()
        for r in recs.get(os.path.join(self.out, self.producer.name + ".jsonl"), ()):
            if r["type"] == "ack":
                per[r["partition"]] += 1
        counts = [per.get(p, 0) for p in range(self.args.partitions)]
        mean = sum(counts) / len(counts) if counts else 0
        lag_peak = {}
        for _, _, d in self.lag:
            for p, v in d.items():
                lag_peak[p] = max(lag_peak.get(p, 0), v)
        return {"records_per_partition": counts, "max_over_mean": round(max(counts) / mean, 2) if mean else None,
                "peak_lag_per_partition": [lag_peak.get(p, 0) for p in range(self.args.partitions)]}

    def cleanup(self):
        if self.active_heal:
            node, action = self.active_heal
            self.active_heal = None
            self.defer += 1     # a second Ctrl-C does not stop the heal
            try:
                self.command(node, action)
            except Exception as e:  # noqa: BLE001
                say("HEALING FAILED: node %d's %s: %s: heal it by hand" % (node, action, e))
            finally:
                self.defer -= 1
        if self.producer is not None and self.producer.is_alive():
            self.producer.stop()
            self.producer.join(10)
        for c in self.consumers:
            if c.p.poll() is None:
                c.p.kill()
                c.p.wait()
        self.delete_topics()


# ---- the report --------------------------------------------------------------

def print_report(r):
    w = sys.stdout.write
    w("drill %s (seed %d) against topic %s: %s\n" % (r["scenario"], r["seed"], r["topic"],
                                                   "PROMISES HELD" if r["held"] else "PROMISE BROKEN"))
    if r["victim"]:
        w("fault on: %s\n" % r["victim"])
    w("topic: replication factor %d, %s\n" % (r["replication_factor"], ", ".join(
        "%s=%s" % kv for kv in sorted(r["topic_config"].items())) or "the broker's defaults"))
    w("\n%-44s %12s %12s\n" % ("", "seen", "promise"))
    rows = [
        ("records sent / acknowledged / read", "%s/%s/%s" % (r["sent"], r["acked"], r["read"]), ""),
        ("acknowledged records lost", r["lost"], "0"),
        ("records duplicated in the log", r["duplicated"], "0"),
        ("committed offset != next record read", len(r["resume_mismatches"]), "0"),
        ("stale owners' commits", max(r["anomalies"].get("stale_commit", 0), len(r["stale_commits"])), "0"),
        ("records delivered again to the group", r["redelivered"], "counted"),
        ("client's stale offset resets (librdkafka)", r.get("client_stale_reset", 0), "counted"),
        ("records the client sent again (librdkafka)", r.get("client_epoch_bump", 0), "counted"),
        ("longest a partition went unacknowledged (s)", r["unavailable_s"], "reported"),
        ("consumer lag normal / max (records)", "%s/%s" % (r["lag_normal"], r["lag_max"]), "reported"),
        ("converged after the heal (s)", "%.1f" % r["converged_s"] if r["converged_s"] is not None else "no",
         "<= %g" % r["budget_s"]),
        ("longest rebalance pauses (s)", ",".join(map(str, r["rebalance_pauses_s"])) or "-", "reported"),
    ]
    for k, v, p in rows:
        w("%-44s %12s %12s\n" % (k, v, p))
    if r["errors"]:
        w("\nerrors the clients saw, by kind:\n")
        for k, v in sorted(r["errors"].items(), key=lambda kv: -kv[1]):
            w("  %-40s %d\n" % (k, v))
    other = {k: v for k, v in r["anomalies"].items() if v and k not in ("lost", "duplicated", "stale_commit")}
    if other:
        w("\nother anomalies the checker counted: %s\n" % ", ".join("%s %d" % kv for kv in sorted(other.items())))
    if r.get("client_stale_reset"):
        w("client-stale-reset %d %s\n" % (r["client_stale_reset"], r["client_stale_reset_evidence"]))
    if r.get("client_epoch_bump"):
        w("client-epoch-bump %d %s\n" % (r["client_epoch_bump"], r["client_epoch_bump_evidence"]))
    if r["redelivered_offsets"]:
        w("delivered again (partition, offset), first %d: %s\n" % (
            len(r["redelivered_offsets"]), " ".join("%d/%d" % tuple(x) for x in r["redelivered_offsets"])))
    for m in r["resume_mismatches"]:
        w("resumed at the wrong offset: %s read partition %d from %d, committed %d\n" % (
            m["reader"], m["partition"], m["first_read"], m["committed"]))
    if "dead_letters" in r:
        w("\npoison records and the dead letter topic:\n")
        for d in r["dead_letters"]:
            w("  %-20s origin %-12s dlq offset %-6s %s\n" % (d["value"], d["origin"], d["dlq_offset"],
                                                            "ok" if d["ok"] else "MISSING"))
    if "skew" in r:
        s = r["skew"]
        w("\nrecords per partition %s (max/mean %s); peak lag per partition %s\n" % (
            s["records_per_partition"], s["max_over_mean"], s["peak_lag_per_partition"]))
    if "crashed_after_commit" in r:
        w("\nconsumer c1 killed right after committing %s\n" % r["crashed_after_commit"])
    lost = r["details"].get("lost") if isinstance(r["details"], dict) else None
    if lost:
        w("\nlost (first): %s\n" % json.dumps(lost)[:800])
    if r["broken"]:
        w("\nbroken:\n")
        for b in r["broken"]:
            w("  %s\n" % b)
    w("\nevidence (every client's history, JSONL): %s\n" % r["histories"])


# ---- the command line --------------------------------------------------------

def cmd_list(args):
    if args.json:
        print(json.dumps([{"name": s.name, "description": s.desc,
                           "needs": [x for x in (s.fault, s.heal) if x]} for s in SCENARIOS.values()], indent=1))
        return 0
    for s in SCENARIOS.values():
        needs = " [needs %s, %s]" % (s.fault, s.heal) if s.fault else ""
        print("%-28s %s%s" % (s.name, s.desc, needs))
    return 0


def cmd_check_file(args):
    df = parse_drill_file(args.file)
    runnable = [s.name for s in SCENARIOS.values() if not s.fault or all(
        s.fault in n.cmds and s.heal in n.cmds for n in df.nodes.values())]
    if args.json:
        print(json.dumps({"nodes": [{"id": nid, "kafka": n.kafka, "host": n.host,
                                     "commands": {a: n.cmds[a][0] for a in ACTIONS if a in n.cmds}}
                                    for nid, n in sorted(df.nodes.items())],
                          "command_timeout": df.command_timeout, "drills": runnable}, indent=1))
        return 0
    for nid, n in sorted(df.nodes.items()):
        have = [a for a in ACTIONS if a in n.cmds]
        print("node %d: kafka %s, host %s; commands: %s" % (nid, n.kafka, n.host, ", ".join(have) or "none"))
    print("drills it can run: %s" % ", ".join(runnable))
    return 0


def cmd_run(args):
    if args.scenario not in SCENARIOS:
        raise InputError("no drill %r (sluicectl drill list: %s)" % (args.scenario, ", ".join(SCENARIOS)))
    for name, v, lo in (("--seconds", args.seconds, 4), ("--budget", args.budget, 1), ("--rate", args.rate, 1)):
        if v < lo:
            raise InputError("%s must be at least %g" % (name, lo))
    if args.topic_prefix is not None and not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", args.topic_prefix):
        raise InputError("--topic-prefix: a legal topic name (letters, digits, . _ -), not %r" % args.topic_prefix)
    df = parse_drill_file(args.drill_file)
    need_modules()
    d = Drill(args, df, SCENARIOS[args.scenario])

    def on_term(sig, _frame):
        d.interrupted.append(sig)
        if not d.defer:
            raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        r = d.run()
        if d.interrupted:
            # the signal's KeyboardInterrupt can be swallowed where it
            # lands (inside a client library's call): the flag is not
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        say("interrupted: healing, stopping the clients, deleting the drill's topics")
        d.cleanup()
        say("interrupted: no verdict (histories kept in %s)" % d.out)
        return EXIT_INPUT
    except InputError:
        d.cleanup()
        raise
    except (RuntimeError, TimeoutError) as e:
        d.cleanup()
        print("drill %s: could not run: %s" % (args.scenario, e), file=sys.stderr)
        return EXIT_INPUT
    except BaseException:
        d.cleanup()
        raise
    d.cleanup()
    if args.json:
        print(json.dumps(r, indent=1, default=str))
    elif d.sc.kind == "txn":
        from sluicefault import drill_txn
        drill_txn.print_report(r)
    else:
        print_report(r)
    return EXIT_HELD if r["held"] else EXIT_BROKEN


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # `| head` ends us quietly
    if argv and argv[0] == "_consumer":
        return consumer_main(argv[1:])
    ap = argparse.ArgumentParser(prog="sluicectl drill", description="the operators' fault drills "
                                 "(docs/drills.md)")
    sub = ap.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("list")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("check-file")
    p.add_argument("file")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("run")
    p.add_argument("scenario")
    p.add_argument("--drill-file", required=True)
    p.add_argument("--bootstrap")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--budget", type=float, default=60)
    p.add_argument("--topic-prefix")
    p.add_argument("--allow-existing-topics", action="store_true")
    p.add_argument("--topic-config", action="append", default=[])
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--rate", type=float, default=100)
    p.add_argument("--out")
    p.add_argument("--seed", type=int)
    p.add_argument("--json", action="store_true")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return EXIT_INPUT if e.code else 0
    try:
        return {"list": cmd_list, "check-file": cmd_check_file, "run": cmd_run}[args.verb](args)
    except InputError as e:
        print("sluicectl drill: %s" % e, file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
