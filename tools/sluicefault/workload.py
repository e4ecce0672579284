"""Checked workloads through confluent_kafka, each client writing its history
(sluicefault.history; the line types are in docs/fault-testing.md).

    /usr/bin/python3 -m sluicefault.workload KIND --bootstrap HOSTS --topic T
        --seconds S --out DIR --seed N [--clients C] [--partitions P]
        [--replication R] [--rate R] [--final]

KIND is one of
  queue  C idempotent acks=all producers ("<kind>-p<i>") sending values
         "<client>-<seq>" to seeded partitions (a quarter to keys of their
         own through the partitioner), and one reader ("queue-r1")
         reading every partition with assign() from the log start;
  group  the same producers and a consumer group of max(2, C) members
         ("group-g<i>") that subscribe, commit their positions synchronously
         twice a second and leave and rejoin at seeded times, so that
         rebalances happen while faults do, and a zombie member
         ("group-z1", a process of its own) SIGSTOPped past its session at
         seeded times, committing on waking what it had before (the
         broker must refuse it);
  txn    C transactional producers ("txn-x<i>", transactional.id
         "<topic>-<client>") writing transactions of 1-4 records to seeded
         partitions, committed or (one in four) aborted by the seed; a
         consume-transform-produce copier ("txn-copier") copying each
         committed input record to T-out in a transaction with its consumer
         offsets (the copy's key is the input value); two clients
         ("txn-m1", "txn-m2") whose transactions write 1-2 records to T
         and then read T read_committed before committing (so that a
         cycle of wr edges could show); a read_committed and a
         read_uncommitted reader of both topics.

--final does only the final read: every partition of the kind's topics (T,
and T-out for txn) read from the log start to its end (the high watermark
for read_uncommitted, the last stable offset for read_committed, waiting a
bounded time for open transactions to end), as clients "final-ru" and
"final-rc", with a "final" line per partition and isolation. It retries
until the cluster answers (120 s by default), printing progress on stderr.

Every client records its errors and goes on through broker failures; the
run ends after --seconds and producers flush with a bound (--flush-s)
before what is left is purged (reported as indefinite failures). The seed
fixes the schedule: which partitions and keys are sent to, which
transactions abort, when group members leave and for how long.

Python: run(kind, bootstrap, topic, seconds, out_dir, seed, ...) and
final_read(bootstrap, topics, out_dir). Topics missing are created
(--partitions, --replication).
"""

import argparse
import os
import random
import sys
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from .history import Writer

KINDS = ("queue", "group", "txn")
QUIET = {"log_level": 0}          # errors reach the history through error_cb, not stderr
if os.environ.get("SLUICEFAULT_RDKAFKA_DEBUG"):
    # librdkafka's own account (e.g. "eos,msg": each produce error, the
    # epoch bumps and renumbered sequences of an idempotent producer) on
    # stderr, which the runner keeps in DIR/workload.log
    QUIET = {"log_level": 7, "debug": os.environ["SLUICEFAULT_RDKAFKA_DEBUG"]}
NANO = 1_000_000_000


def err_name(e):
    """The Kafka error name of a KafkaError / KafkaException, else the
    exception's class name."""
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        e = e.args[0]
    if isinstance(e, KafkaError):
        return e.name()
    return type(e).__name__


def kafka_error(e):
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return e.args[0]
    return None


def group_meta(consumer):
    """(generation, member id) from the consumer's group metadata
    (librdkafka's serialized form "CGMDv2:" generation(int32, host order)
    group.id NUL member.id NUL ...), or (None, None)."""
    try:
        b = bytes(consumer.consumer_group_metadata())
    except Exception:  # noqa: BLE001 - not in a group yet, or an old client
        return None, None
    if not b.startswith(b"CGMDv2:") or len(b) < 11:
        return None, None
    gen = int.from_bytes(b[7:11], sys.byteorder, signed=True)
    parts = b[11:].split(b"\0")
    member = parts[1].decode(errors="replace") if len(parts) > 1 else None
    return gen, member


def read_line(w, m, reader, isolation, session, **extra):
    """The history's "read" line of message m, read by `reader`."""
    w.write("read", value=m.value().decode(errors="replace"),
            key=None if m.key() is None else m.key().decode(errors="replace"),
            topic=m.topic(), partition=m.partition(), offset=m.offset(), reader=reader,
            isolation=isolation, session=session, **extra)


def ensure_topics(bootstrap, topics, partitions, replication, deadline):
    """Create the topics that are missing; wait until each has `partitions`
    partitions with leaders (bounded by deadline). Returns {topic: nparts}."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(dict(QUIET, **{"bootstrap.servers": bootstrap}))
    out = {}
    while True:
        try:
            md = admin.list_topics(timeout=10)
            missing = [t for t in topics if t not in md.topics or md.topics[t].error is not None]
            if missing:
                fs = admin.create_topics([NewTopic(t, partitions, replication) for t in missing],
                                         operation_timeout=30)
                for t, f in fs.items():
                    try:
                        f.result(60)
                    except KafkaException as e:
                        if err_name(e) != "TOPIC_ALREADY_EXISTS":
                            raise
                md = admin.list_topics(timeout=10)
            for t in topics:
                tm = md.topics.get(t)
                if tm is None or tm.error is not None or not tm.partitions or any(
                        p.leader < 0 for p in tm.partitions.values()):
                    raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE))
                out[t] = len(tm.partitions)
            return out
        except KafkaException as e:
            if time.monotonic() > deadline:
                raise
            print("sluicefault: waiting for topics %s: %s" % (topics, err_name(e)), file=sys.stderr)
            time.sleep(1)


class _Client(threading.Thread):
    """A client thread with its own history file; exceptions it did not
    expect are recorded as "error" lines instead of killing the run."""

    def __init__(self, name, out_dir, stop_at, bootstrap):
        super().__init__(name=name, daemon=True)
        self.cname = name
        self.w = Writer(out_dir, name)
        self.stop_at = stop_at
        self.bootstrap = bootstrap

    def running(self):
        return time.monotonic() < self.stop_at

    def on_error(self, err):
        self.w.write("error", error=err.name(), what=err.str())

    def on_delivery(self, err, msg):
        """A producer's delivery report: "ack", or an indefinite "fail"."""
        value = msg.value().decode()
        if err is not None:
            self.w.write("fail", value=value, error=err.name(), definite=False)
        else:
            self.w.write("ack", value=value, topic=msg.topic(), partition=msg.partition(), offset=msg.offset())

    def run(self):
        try:
            self.body()
        except Exception as e:  # noqa: BLE001 - recorded; the run goes on
            self.w.write("error", error=err_name(e), what="client stopped: %r" % (e,))
        finally:
            self.w.write("end")

    def close_consumer(self, c):
        """c.close() after a "closing" line. librdkafka 2.0.2 through
        confluent-kafka 1.7 has once hung in a close (rd_kafka_assign of its
        rebalance) holding Python's lock, which stops every thread of the
        process; the runner (tests/fault/run.py wait_workload) knows such a
        hang by this line, the client's last, and ends the process: the
        history up to it is complete. SLUICEFAULT_TEST_HANG_CLOSE=NAME makes
        client NAME's close hang so (tests/fault/test_close_hang.py)."""
        self.w.write("closing")
        if os.environ.get("SLUICEFAULT_TEST_HANG_CLOSE") == self.cname:
            import ctypes
            ctypes.PyDLL(None).sleep(3600)   # libc's sleep, Python's lock held (a PyDLL call keeps it)
        c.close()


class _Sender(_Client):
    """An idempotent acks=all producer: values "<client>-<seq>" at `rate`
    records a second to seeded partitions and keys."""

    def __init__(self, name, out_dir, stop_at, bootstrap, topic, nparts, seed, rate, flush_s):
        super().__init__(name, out_dir, stop_at, bootstrap)
        self.topic, self.nparts, self.rate, self.flush_s = topic, nparts, rate, flush_s
        self.rng = random.Random("%s/%s" % (seed, name))
        self.fatal = False

    def conf(self):
        return dict(QUIET, **{"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                              "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000,
                              "reconnect.backoff.max.ms": 1000, "error_cb": self.on_error})

    def on_error(self, err):
        super().on_error(err)
        if err.fatal():
            self.fatal = True

    def body(self):
        p = Producer(self.conf())
        seq = 0
        interval = 1.0 / self.rate
        next_t = time.monotonic()
        while self.running():
            if self.fatal:
                self.w.write("error", error="_FATAL", what="producer re-created after a fatal error")
                p = self.replace(p)
            part = self.rng.randrange(self.nparts)
            key = "k%d" % self.rng.randrange(16)
            if self.rng.random() < 0.25:
                # a key of this producer alone, to the partitioner's choice:
                # its order is Kafka's per-key promise (checked per key)
                part, key = None, "%s-s%d" % (self.cname, self.rng.randrange(4))
            value = "%s-%d" % (self.cname, seq)
            seq += 1
            self.w.write("send", value=value, key=key, topic=self.topic, partition=part, txn=None)
            try:
                if part is None:
                    p.produce(self.topic, value=value, key=key, on_delivery=self.on_delivery)
                else:
                    p.produce(self.topic, value=value, key=key, partition=part, on_delivery=self.on_delivery)
            except BufferError:
                self.w.write("fail", value=value, error="_QUEUE_FULL", definite=True)
            except KafkaException as e:
                self.w.write("fail", value=value, error=err_name(e), definite=True)
            p.poll(0)
            now = time.monotonic()
            next_t = max(next_t + interval, now - 1.0)
            if next_t > now:
                p.poll(next_t - now)
        self.finish(p)

    def replace(self, p):
        self.fatal = False
        try:
            p.purge()
            p.poll(0)
        except Exception:  # noqa: BLE001
            pass
        return Producer(self.conf())

    def finish(self, p):
        left = p.flush(self.flush_s)
        if left:
            self.w.write("error", error="_TIMED_OUT", what="%d records unanswered after %s s; purged" % (
                left, self.flush_s))
            p.purge()
            p.flush(5)


class _Reader(_Client):
    """A consumer that assign()s every partition of its topics from the log
    start and reads to the end of the run; one session (a reset after an
    error seeks back to where it was and keeps the session)."""

    def __init__(self, name, out_dir, stop_at, bootstrap, topics, isolation):
        super().__init__(name, out_dir, stop_at, bootstrap)
        self.topics, self.isolation = topics, isolation

    def body(self):
        c = Consumer(dict(QUIET, **{
            "bootstrap.servers": self.bootstrap, "group.id": self.cname + "-unused",
            "enable.auto.commit": False, "auto.offset.reset": "error", "isolation.level": self.isolation,
            "enable.partition.eof": False, "error_cb": self.on_error}))
        tps = []
        while not tps and self.running():
            try:
                md = c.list_topics(timeout=5)
                tps = [(t, p) for t in self.topics for p in sorted(md.topics[t].partitions)]
            except Exception as e:  # noqa: BLE001
                self.w.write("error", error=err_name(e), what="metadata")
                time.sleep(0.5)
        nxt = {}
        session = 1
        c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in tps])
        self.w.write("assign", partitions=[[t, p] for t, p in tps], generation=None, member=self.cname,
                     session=session)
        while self.running():
            try:
                msgs = c.consume(200, 0.3)
            except KafkaException as e:
                self.w.write("error", error=err_name(e), what="consume")
                time.sleep(0.3)
                continue
            for m in msgs:
                if m.error():
                    self.w.write("error", error=m.error().name(), what="read %s[%s]" % (m.topic(), m.partition()))
                    if m.error().code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        time.sleep(0.3)
                        c.assign([TopicPartition(t, p, nxt.get((t, p), OFFSET_BEGINNING)) for t, p in tps])
                        break
                    continue
                read_line(self.w, m, self.cname, self.isolation, session)
                nxt[(m.topic(), m.partition())] = m.offset() + 1
        self.close_consumer(c)


class _GroupReader:
    """What the workloads' consumer group members share (the group
    workload's members and zombie, the txn workload's copier), mixed into
    a _Client that sets self.topic, self.group and self.session: the
    consumer, its "assign" and "revoke" lines (each assignment starts a
    new session), its positions, and the loop that reads."""

    def group_consumer(self, session_ms=6000, **conf):
        # client.id: librdkafka names its handle after it ("group-z1#consumer-1"),
        # so that the debug log (SLUICEFAULT_RDKAFKA_DEBUG) says whose line it is
        conf = dict(QUIET, **{
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.cname,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": 500, "enable.partition.eof": False, "error_cb": self.on_error}, **conf)
        # what the assign and revoke lines say of the consumer: its
        # auto.offset.reset, and which of the client's Consumer objects it
        # is (the checker's client-stale-reset needs both)
        self.offset_reset = conf["auto.offset.reset"]
        self.consumer_n = getattr(self, "consumer_n", 0) + 1
        c = Consumer(conf)
        c.subscribe([self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost)
        return c

    def group_fields(self):
        """The consumer's fields of its assign and revoke lines."""
        return dict(group=self.group, auto_offset_reset=self.offset_reset, consumer=self.consumer_n)

    def on_assign(self, c, parts):
        gen, member = group_meta(c)
        self.session += 1
        start = self.starts(c, parts)
        self.w.write("assign", partitions=[[tp.topic, tp.partition] for tp in parts], generation=gen,
                     member=member, session=self.session, **dict(self.group_fields(), **start))

    def starts(self, c, parts):
        """Where the member starts reading: the group's committed offsets,
        looked up here and assigned as they are (librdkafka would look them
        up itself), so that the checker can tell a record skipped at an
        assignment's start. {"start": [[topic, partition, offset], ...]} of
        the partitions that have one; {} when the lookup failed (librdkafka
        then looks them up as usual)."""
        if not parts:
            return {}
        try:
            got = c.committed(parts, timeout=5)
        except KafkaException as e:
            self.w.write("error", error=err_name(e), what="committed")
            return {}
        c.assign(got)
        return {"start": [[tp.topic, tp.partition, tp.offset] for tp in got
                          if tp.offset >= 0 and tp.error is None]}

    def on_revoke(self, c, parts, lost=False):
        gen, member = group_meta(c)
        self.w.write("revoke", partitions=[[tp.topic, tp.partition] for tp in parts], generation=gen,
                     member=member, session=self.session, lost=lost, **self.group_fields())

    def on_lost(self, c, parts):
        self.on_revoke(c, parts, lost=True)

    def positions(self, c):
        try:
            return [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
        except KafkaException as e:
            self.w.write("error", error=err_name(e), what="position")
            return None

    def read_loop(self, c, until, each, isolation="read_uncommitted", n=200, timeout=0.2, woke=None, tag=None):
        """Consume up to n records at a time from c while until(): each
        batch's records are written as reads of the current session, then
        each(c, msgs) gets those without an error (returning False ends
        the loop). A consume that raises is written and tried again 0.2 s
        later. woke(c) (the zombie's) runs before each consume and after
        it: when it returns true it acted instead, and each() does not get
        the batch that consume got; its records are written as reads all
        the same, before woke's lines (the client delivered them: a batch
        left out of the history would be records the reader skipped, as
        the 200 of a zombie's first fetch in a new generation once were).
        tag(), when given, adds its fields to each read line (the copier's:
        the transaction the batch is copied in)."""
        while until():
            if woke and woke(c):
                continue
            try:
                msgs = c.consume(n, timeout)
            except KafkaException as e:
                self.w.write("error", error=err_name(e), what="consume")
                time.sleep(0.2)
                continue
            good = []
            for m in msgs:
                if m.error():
                    self.w.write("error", error=m.error().name(), what="read")
                    continue
                read_line(self.w, m, self.cname, isolation, self.session, **(tag() if tag else {}))
                good.append(m)
            if woke and woke(c):          # this consume was the one the pause cut short
                continue
            if each(c, good) is False:
                break


class _Member(_GroupReader, _Client):
    """A member of a consumer group: subscribes, reads, commits its
    positions (commit(asynchronous=False)) every `commit_s`, and leaves and
    rejoins at seeded times. Each assignment starts a new session."""

    def __init__(self, name, out_dir, stop_at, bootstrap, topic, group, seed, commit_s=0.5):
        super().__init__(name, out_dir, stop_at, bootstrap)
        self.topic, self.group, self.commit_s = topic, group, commit_s
        self.rng = random.Random("%s/%s" % (seed, name))
        self.session = 0
        self.next_commit = 0.0

    def commit(self, c, parts=None, **extra):
        """Commit parts (default: the positions of the assignment)."""
        if parts is None:
            parts = self.positions(c)
        if not parts:
            return
        gen, member = group_meta(c)
        t0 = time.monotonic_ns()
        ok, error = True, None
        try:
            res = c.commit(offsets=parts, asynchronous=False)
            bad = [tp.error for tp in res or () if tp.error is not None]
            if bad:
                ok, error = False, err_name(bad[0])
        except KafkaException as e:
            ok, error = False, err_name(e)
        self.w.write("commit", partitions=[[tp.topic, tp.partition, tp.offset] for tp in parts],
                     generation=gen, member=member, ok=ok, error=error, t0=t0, group=self.group, **extra)

    def commit_due(self, c):
        """The positions committed when commit_s has passed since the last
        time."""
        if time.monotonic() >= self.next_commit:
            self.commit(c)
            self.next_commit = time.monotonic() + self.commit_s

    def body(self):
        while self.running():
            c = self.group_consumer()
            stay = self.rng.uniform(1.5, 4.0)
            away = self.rng.uniform(0.2, 1.0)
            self.next_commit = time.monotonic() + self.commit_s
            session = self.session
            leave_at = self.stop_at

            def staying():
                nonlocal leave_at
                if self.session != session and leave_at == self.stop_at:
                    # the stay is counted from the first assignment
                    leave_at = min(time.monotonic() + stay, self.stop_at)
                return time.monotonic() < leave_at

            self.read_loop(c, staying, lambda c, msgs: self.commit_due(c))
            self.commit(c)
            self.close_consumer(c)
            if self.running():
                time.sleep(away)


class _ZombieMember(_Member):
    """A group member that never leaves, run in a process of its own
    (zombie_main) so that the workload can SIGSTOP it past its session
    (_Zombie). On SIGUSR1 (sent with the SIGCONT) it first commits the
    positions it had before the pause, as a zombie does: the partitions it
    no longer owns, with its old generation, before its client has served
    the rebalance. The broker must refuse that commit."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.woke = False
        self.before, self.before_meta = None, None

    def wake(self, c):
        """On waking: the commit of the positions it had before the pause."""
        if not self.woke:
            return False
        self.woke = False
        gen, member = group_meta(c)
        if member and (gen, member) != self.before_meta:
            # the client rejoined (a new generation) before the pause could
            # cut it off: a commit now would be the owner's, not a zombie's
            self.w.write("error", error="_ZOMBIE_REJOINED", what="woke as %s generation %s, not %s" % (
                member, gen, self.before_meta))
        else:
            self.commit(c, self.before, zombie=True)
        return True

    def read(self, c, msgs):
        self.before, self.before_meta = self.positions(c) or self.before, group_meta(c)
        self.commit_due(c)

    def body(self):
        import signal
        signal.signal(signal.SIGUSR1, lambda *_: setattr(self, "woke", True))
        c = self.group_consumer(session_ms=ZOMBIE_SESSION_MS)
        self.next_commit = time.monotonic() + self.commit_s
        self.read_loop(c, lambda: self.running() or self.woke, self.read, woke=self.wake)
        self.commit(c)
        self.close_consumer(c)


ZOMBIE_SESSION_MS = 6000                # Kafka's (and Sluice's) group.min.session.timeout.ms


def zombie_main(name, bootstrap, topic, group, out_dir, seed, stop_at_ns):
    """The zombie member's process (python3 -m sluicefault.workload group
    --zombie NAME ...)."""
    z = _ZombieMember(name, out_dir, stop_at_ns / NANO, bootstrap, topic, group, seed)
    z.run()
    z.w.close()


class _Zombie(_Client):
    """Runs _ZombieMember NAME in a child process and, once it has an
    assignment, SIGSTOPs it at seeded times for longer than its session
    (the coordinator drops it and gives its partitions to the others),
    then SIGCONTs it and tells it (SIGUSR1) to commit what it had. Its
    own history ("<NAME>-pauser") has a "pause" line (phase start/stop) at
    each. The first pause may end after the run's end (a short run gets
    one too); later ones end before it."""

    def __init__(self, name, out_dir, stop_at, bootstrap, topic, group, seed):
        super().__init__(name + "-pauser", out_dir, stop_at, bootstrap)
        self.target, self.topic, self.group, self.seed, self.out_dir = name, topic, group, seed, out_dir
        self.rng = random.Random("%s/%s/pauses" % (seed, name))

    def steady(self):
        """Whether the member's last assign or revoke line is an assign of
        some partitions (its client cannot start a new generation before
        the member has served the revoke, so a pause now cuts off the
        generation it has)."""
        import json
        last = None
        try:
            with open("%s/%s.jsonl" % (self.out_dir, self.target)) as f:
                for text in f:
                    if '"assign"' in text or '"revoke"' in text:
                        try:
                            last = json.loads(text)
                        except ValueError:
                            pass
        except OSError:
            pass
        return last is not None and last["type"] == "assign" and bool(last.get("partitions"))

    def body(self):
        import os
        import signal
        import subprocess
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([here] + [x for x in [os.environ.get("PYTHONPATH")] if x]))
        child = subprocess.Popen([sys.executable, "-m", "sluicefault.workload", "group", "--zombie", self.target,
                                  "--bootstrap", self.bootstrap, "--topic", self.topic, "--out", self.out_dir,
                                  "--seed", str(self.seed), "--zombie-stop-at-ns", str(int(self.stop_at * NANO))],
                                 env=env)
        try:
            first = True
            while child.poll() is None:
                wait = self.rng.uniform(0.5, 3.0)
                pause = ZOMBIE_SESSION_MS / 1000 + self.rng.uniform(2.0, 3.5)
                while self.running() and not self.steady() and child.poll() is None:
                    time.sleep(0.1)
                if time.monotonic() + wait >= self.stop_at or (
                        not first and time.monotonic() + wait + pause >= self.stop_at):
                    break
                time.sleep(wait)
                if not self.steady():
                    continue
                self.w.write("pause", phase="start", target=self.target, pid=child.pid, seconds=round(pause, 3))
                child.send_signal(signal.SIGSTOP)
                try:
                    time.sleep(pause)
                finally:
                    child.send_signal(signal.SIGCONT)
                    child.send_signal(signal.SIGUSR1)
                self.w.write("pause", phase="stop", target=self.target, pid=child.pid)
                first = False
            child.wait(max(0.0, self.stop_at - time.monotonic()) + 30)
        finally:
            if child.poll() is None:
                child.send_signal(signal.SIGCONT)
                child.kill()
                child.wait()


class _TxnProducer(_Client):
    """A transactional producer: transactions of 1-4 records to seeded
    partitions, one in four aborted (by the seed). A retriable error retries
    the call; one that needs an abort aborts; a fatal one re-creates the
    producer (init_transactions fences the old one), as the Kafka client
    documentation says. Each outcome is recorded."""

    def __init__(self, name, out_dir, stop_at, bootstrap, topic, nparts, seed, rate, flush_s):
        super().__init__(name, out_dir, stop_at, bootstrap)
        self.topic, self.nparts, self.rate, self.flush_s = topic, nparts, rate, flush_s
        self.rng = random.Random("%s/%s" % (seed, name))
        self.txn_id = "%s-%s" % (topic, name)
        self.p = None
        self.seq = 0
        self.ntxn = 0

    def producer(self, deadline):
        """A producer whose init_transactions() succeeded, or None past
        deadline."""
        while time.monotonic() < deadline:
            if self.p is None:
                self.p = Producer(dict(QUIET, **{
                    "bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
                    "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                    "transaction.timeout.ms": 10000, "message.timeout.ms": 10000,
                    "reconnect.backoff.max.ms": 1000, "error_cb": self.on_error}))
                self.inited = False
            if self.inited:
                return self.p
            try:
                self.p.init_transactions(10)
                self.inited = True
                return self.p
            except KafkaException as e:
                self.w.write("error", error=err_name(e), what="init_transactions")
                k = kafka_error(e)
                if k is None or not k.retriable():
                    self.drop()
                time.sleep(0.5)
        return None

    def drop(self):
        if self.p is not None:
            try:
                self.p.purge()
                self.p.poll(0)
            except Exception:  # noqa: BLE001
                pass
        self.p = None

    def call(self, what, fn, deadline):
        """fn() retried while it fails retriably; "ok", "abort" (the
        transaction must be aborted) or "fatal" (the producer was dropped)
        and the last error name."""
        while True:
            try:
                fn()
                return "ok", None
            except KafkaException as e:
                k = kafka_error(e)
                name = err_name(e)
                self.w.write("error", error=name, what=what)
                if k is not None and k.retriable() and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                if k is not None and k.txn_requires_abort():
                    return "abort", name
                self.drop()
                return "fatal", name

    def abort(self, txn, deadline):
        status, error = self.call("abort_transaction", lambda: self.p.abort_transaction(10), deadline)
        self.w.write("txn_abort", txn=txn, ok=status == "ok", error=error)
        if status != "ok":
            self.drop()

    def producer_txn(self, deadline):
        """The producer (self.producer) and a transaction begun on it
        (self.begin), or a None txn when either could not be had."""
        p = self.producer(deadline)
        return (p, None) if p is None else (p, self.begin(p))

    def begin(self, p):
        """A new transaction begun on p (a "txn_begin" line): its name, or
        None when p could not begin one (p is dropped)."""
        txn = "%s-t%d" % (self.cname, self.ntxn)
        self.ntxn += 1
        try:
            p.begin_transaction()
        except KafkaException as e:
            self.w.write("error", error=err_name(e), what="begin_transaction")
            self.drop()
            return None
        self.w.write("txn_begin", txn=txn)
        return txn

    def send(self, p, txn, topic, partition, key=None, **extra):
        """The next value "<client>-<seq>" (key: the value unless given)
        produced in txn to topic (partition None: the partitioner's
        choice), its "send" line with extra; False when the client refused
        it (a definite "fail")."""
        value = "%s-%d" % (self.cname, self.seq)
        self.seq += 1
        key = value if key is None else key
        self.w.write("send", value=value, key=key, topic=topic, partition=partition, txn=txn, **extra)
        at = {} if partition is None else {"partition": partition}
        try:
            p.produce(topic, value=value, key=key, on_delivery=self.on_delivery, **at)
        except (BufferError, KafkaException) as e:
            self.w.write("fail", value=value, error=err_name(e) if isinstance(e, KafkaException)
                         else "_QUEUE_FULL", definite=True)
            return False
        p.poll(0)
        return True

    def commit_txn(self, p, txn, deadline, **extra):
        """txn committed (a "txn_commit" line with extra), and aborted when
        the commit says it must be; "ok", "abort" or "fatal"."""
        status, error = self.call("commit_transaction", lambda: p.commit_transaction(10), deadline)
        self.w.write("txn_commit", txn=txn, ok=status == "ok", error=error, **extra)
        if status == "abort":
            self.abort(txn, deadline)
        return status

    def one(self, deadline):
        k = self.rng.randint(1, 4)
        parts = [self.rng.randrange(self.nparts) for _ in range(k)]
        abort = self.rng.random() < 0.25
        land = self.rng.random() < 0.5     # an abort after the records reached the log
        p, txn = self.producer_txn(deadline)
        if txn is None:
            return
        failed = not all(self.send(p, txn, self.topic, part) for part in parts)   # stops at a failure
        if abort or failed:
            if land and not failed:
                p.flush(5)
            self.abort(txn, deadline)
            return
        self.commit_txn(p, txn, deadline)

    def body(self):
        interval = 1.0 / self.rate
        while self.running():
            self.one(self.stop_at + self.flush_s)
            if self.p is not None:
                self.p.poll(interval)
        if self.p is not None:
            self.p.flush(self.flush_s)


class _Copier(_GroupReader, _TxnProducer):
    """Consume-transform-produce: reads the input topic read_committed in a
    consumer group, copies each record to T-out (value "<client>-<seq>", key
    the input value) and commits the copies with the consumer's positions
    (send_offsets_to_transaction) in one transaction. After an abort the
    consumer goes back to its committed offsets (a new session)."""

    def __init__(self, name, out_dir, stop_at, bootstrap, topic, out_topic, seed, flush_s):
        super().__init__(name, out_dir, stop_at, bootstrap, topic, 1, seed, 1, flush_s)
        self.out_topic = out_topic
        self.txn_id = "%s-copier" % topic
        self.group = "%s-copier" % topic
        self.session = 0

    def rewind(self, c, deadline):
        """Back to the committed offsets after an abort: a new session."""
        while time.monotonic() < deadline:
            try:
                parts = c.committed(c.assignment(), timeout=10)
                for tp in parts:
                    c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
                self.session += 1
                gen, member = group_meta(c)
                self.w.write("assign", partitions=[[tp.topic, tp.partition] for tp in parts], generation=gen,
                             member=member, session=self.session, rewind=True,
                             start=[[tp.topic, tp.partition, tp.offset] for tp in parts if tp.offset >= 0],
                             **self.group_fields())
                return
            except KafkaException as e:
                self.w.write("error", error=err_name(e), what="rewind")
                time.sleep(0.5)

    def copy(self, c, msgs, deadline):
        """msgs copied in one transaction with the consumer's positions;
        False when no producer could be had before deadline."""
        if not msgs:
            return True
        p = self.producer(deadline)
        if p is None:
            return False
        txn = self.begin(p)
        if txn is None:
            self.rewind(c, deadline)
            return True
        failed = False
        for m in msgs:
            src = m.value().decode(errors="replace")
            if not self.send(p, txn, self.out_topic, None, key=src, src=src):
                failed = True
                break
        offsets = None if failed else self.positions(c)
        if offsets is None:
            status = "abort"
            self.abort(txn, deadline)
        else:
            status, error = self.call("send_offsets_to_transaction", lambda: p.send_offsets_to_transaction(
                offsets, c.consumer_group_metadata(), 10), deadline)
            if status == "ok":
                status = self.commit_txn(p, txn, deadline,
                                         offsets=[[tp.topic, tp.partition, tp.offset] for tp in offsets])
            elif status == "abort":
                self.abort(txn, deadline)
        if status != "ok":
            self.rewind(c, deadline)
        return True

    def body(self):
        c = self.group_consumer(**{"isolation.level": "read_committed"})
        deadline = self.stop_at + self.flush_s
        # each batch's reads name the transaction begin() will open for its
        # copies (the cycle analysis's read edges; a name that never
        # commits is ignored there)
        self.read_loop(c, self.running, lambda c, msgs: self.copy(c, msgs, deadline), "read_committed", 100, 0.3,
                       tag=lambda: {"txn": "%s-t%d" % (self.cname, self.ntxn)})
        self.close_consumer(c)
        if self.p is not None:
            self.p.flush(self.flush_s)


class _Mixer(_TxnProducer):
    """Transactions that write and then read: 1-2 records to seeded
    partitions of the input topic, flushed, then what its read_committed
    consumer (every partition, from the end of the log when it started)
    has for it, then commit. Two of them make a cycle of wr edges possible,
    which read_committed forbids: each transaction reading the other's
    record while both are open (docs/fault-testing.md, "Dependency
    cycles"). Each transaction's reads are a session of their own (the
    readers judge continuity; a reset of this consumer to the log end
    after an out-of-range answer is no skip)."""

    def one_mixed(self, c, deadline):
        p, txn = self.producer_txn(deadline)
        if txn is None:
            return
        for part in [self.rng.randrange(self.nparts) for _ in range(self.rng.randint(1, 2))]:
            if not self.send(p, txn, self.topic, part):
                self.abort(txn, deadline)
                return
        p.flush(5)
        try:
            msgs = c.consume(100, 0.1)
        except KafkaException as e:
            self.w.write("error", error=err_name(e), what="consume")
            msgs = []
        for m in msgs:
            if m.error():
                self.w.write("error", error=m.error().name(), what="read %s[%s]" % (m.topic(), m.partition()))
                continue
            self.w.write("read", value=m.value().decode(errors="replace"),
                         key=None if m.key() is None else m.key().decode(errors="replace"), topic=m.topic(),
                         partition=m.partition(), offset=m.offset(), reader=self.cname, isolation="read_committed",
                         session=self.ntxn, txn=txn)
        self.commit_txn(p, txn, deadline)

    def body(self):
        c = Consumer(dict(QUIET, **{
            "bootstrap.servers": self.bootstrap, "group.id": self.cname + "-unused", "enable.auto.commit": False,
            "auto.offset.reset": "latest", "isolation.level": "read_committed", "enable.partition.eof": False,
            "error_cb": self.on_error}))
        c.assign([TopicPartition(self.topic, n, OFFSET_END) for n in range(self.nparts)])
        self.w.write("assign", partitions=[[self.topic, n] for n in range(self.nparts)], generation=None,
                     member=self.cname, session=0)
        while self.running():
            self.one_mixed(c, self.stop_at + self.flush_s)
            if self.p is not None:
                self.p.poll(1.0 / self.rate)
        self.close_consumer(c)
        if self.p is not None:
            self.p.flush(self.flush_s)


def run(kind, bootstrap, topic, seconds, out_dir, seed, clients=2, partitions=3, replication=3, rate=100,
        flush_s=30, setup_s=120, until=None, until_s=0):
    """Run one workload for `seconds` (after its topics exist; created when
    missing), writing out_dir/<client>.jsonl. Returns the client names.
    until (queue and txn: a callable), when given, keeps the run going past
    `seconds` until it returns true, at most until_s seconds more (the
    drills: until the clients are served again after the fault)."""
    if kind not in KINDS:
        raise ValueError("kind %r: one of %s" % (kind, ", ".join(KINDS)))
    topics = [topic] + ([topic + "-out"] if kind == "txn" else [])
    nparts = ensure_topics(bootstrap, topics, partitions, replication, time.monotonic() + setup_s)[topic]
    stop_at = time.monotonic() + seconds
    end = stop_at
    if until is not None:
        stop_at += until_s          # the clients' end, moved back below
    cs = []
    if kind in ("queue", "group"):
        cs += [_Sender("%s-p%d" % (kind, i), out_dir, stop_at, bootstrap, topic, nparts, seed, rate, flush_s)
               for i in range(1, clients + 1)]
    if kind == "queue":
        cs.append(_Reader("queue-r1", out_dir, stop_at, bootstrap, [topic], "read_uncommitted"))
    if kind == "group":
        cs += [_Member("group-g%d" % i, out_dir, stop_at, bootstrap, topic, topic + "-group", seed)
               for i in range(1, max(2, clients) + 1)]
        cs.append(_Zombie("group-z1", out_dir, stop_at, bootstrap, topic, topic + "-group", seed))
    if kind == "txn":
        cs += [_TxnProducer("txn-x%d" % i, out_dir, stop_at, bootstrap, topic, nparts, seed, max(1, rate // 5),
                            flush_s) for i in range(1, clients + 1)]
        cs.append(_Copier("txn-copier", out_dir, stop_at, bootstrap, topic, topic + "-out", seed, flush_s))
        cs += [_Mixer("txn-m%d" % i, out_dir, stop_at, bootstrap, topic, nparts, seed, max(1, rate // 10), flush_s)
               for i in (1, 2)]
        cs.append(_Reader("txn-rc1", out_dir, stop_at, bootstrap, topics, "read_committed"))
        cs.append(_Reader("txn-ru1", out_dir, stop_at, bootstrap, topics, "read_uncommitted"))
    for c in cs:
        c.start()
    while until is not None and time.monotonic() < stop_at and not (time.monotonic() >= end and until()):
        time.sleep(0.2)
    if until is not None:
        now = time.monotonic()
        for c in cs:
            c.stop_at = min(c.stop_at, now)
    for c in cs:
        c.join(max(0.0, c.stop_at - time.monotonic()) + flush_s + 30)
        if c.is_alive():
            print("sluicefault: client %s still busy at the end; left behind" % c.cname, file=sys.stderr)
    for c in cs:
        if not c.is_alive():
            c.w.close()
    return [c.cname for c in cs]


class _NotReady(Exception):
    pass


def _read_partitions(bootstrap, topics, isolation, attempt_s, want_end=None):
    """One full read of every partition of topics at isolation: ({(t, p):
    [(offset, value, key)]}, {(t, p): end_offset}). Raises _NotReady when
    the cluster does not answer. want_end: for read_committed, the
    read_uncommitted ends to wait for (open transactions ending), bounded."""
    c = Consumer(dict(QUIET, **{
        "bootstrap.servers": bootstrap, "group.id": "sluicefault-final", "enable.auto.commit": False,
        "auto.offset.reset": "error", "isolation.level": isolation, "enable.partition.eof": True}))
    try:
        end_by = time.monotonic() + attempt_s
        try:
            md = c.list_topics(timeout=10)
        except KafkaException as e:
            raise _NotReady("metadata: %s" % err_name(e))
        tps = []
        for t in topics:
            tm = md.topics.get(t)
            if tm is None or tm.error is not None or not tm.partitions:
                raise _NotReady("topic %s: %s" % (t, tm.error if tm else "absent"))
            for p, pm in sorted(tm.partitions.items()):
                if pm.leader < 0:
                    raise _NotReady("%s[%d] has no leader" % (t, p))
                tps.append((t, p))
        ends = {}
        for t, p in tps:
            while True:
                try:
                    low, high = c.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False)
                except KafkaException as e:
                    raise _NotReady("offsets of %s[%d]: %s" % (t, p, err_name(e)))
                if want_end is None or high >= want_end.get((t, p), 0) or time.monotonic() > end_by - 20:
                    break
                time.sleep(0.5)     # an open transaction holds the last stable offset back
            ends[(t, p)] = (low, high)
        out = {tp: [] for tp in tps}
        todo = {tp for tp in tps if ends[tp][1] > ends[tp][0]}
        c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in tps])
        last_msg = time.monotonic()
        while todo:
            if time.monotonic() > end_by:
                raise _NotReady("read not done: %s" % sorted(todo))
            for m in c.consume(500, 0.5):
                tp = (m.topic(), m.partition())
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= ends[tp][1]:
                            todo.discard(tp)
                        continue
                    raise _NotReady("read %s[%d]: %s" % (tp[0], tp[1], m.error().name()))
                last_msg = time.monotonic()
                if m.offset() < ends[tp][1]:
                    out[tp].append((m.offset(), m.value().decode(errors="replace"),
                                    None if m.key() is None else m.key().decode(errors="replace")))
            if todo and time.monotonic() - last_msg > 1:
                for tp in c.position([TopicPartition(t, p) for t, p in todo]):
                    if tp.offset >= ends[(tp.topic, tp.partition)][1]:
                        todo.discard((tp.topic, tp.partition))
        return out, {tp: e[1] for tp, e in ends.items()}
    finally:
        c.close()


def final_read(bootstrap, topics, out_dir, timeout=120):
    """The final full read of every partition of topics in both isolation
    levels (clients "final-ru" and "final-rc"), retried until the cluster
    answers, within timeout seconds. Writes the reads of a partition only
    once its whole read succeeded, then its "final" line; then the headers
    of the batches below each end (sluicefault.batches: final-batches)."""
    deadline = time.monotonic() + timeout
    ru_ends = None
    for isolation, name in (("read_uncommitted", "final-ru"), ("read_committed", "final-rc")):
        while True:
            try:
                reads, ends = _read_partitions(bootstrap, topics, isolation,
                                               max(10, min(60, deadline - time.monotonic())), ru_ends)
                break
            except (_NotReady, KafkaException) as e:
                if time.monotonic() > deadline:
                    raise RuntimeError("final read (%s) of %s: the cluster did not answer within %d s: %s" % (
                        isolation, topics, timeout, e))
                print("sluicefault: final read %s: %s; retrying" % (isolation, e), file=sys.stderr, flush=True)
                time.sleep(1)
        with Writer(out_dir, name) as w:
            for (t, p), rs in sorted(reads.items()):
                for offset, value, key in rs:
                    w.write("read", value=value, key=key, topic=t, partition=p, offset=offset, reader=name,
                            isolation=isolation, session=1)
                w.write("final", topic=t, partition=p, isolation=isolation, end_offset=ends[(t, p)])
        ru_ends = ends
        print("sluicefault: final read %s: %d records in %d partitions" % (
            isolation, sum(len(r) for r in reads.values()), len(reads)), file=sys.stderr, flush=True)
    # the batch headers of the log the final read found (the checker's
    # client-epoch-bump)
    from . import batches
    n = batches.write(bootstrap, ru_ends, out_dir)
    print("sluicefault: batch headers of %d of %d partitions" % (n, len(ru_ends)), file=sys.stderr, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="sluicefault.workload", description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=KINDS)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--replication", type=int, default=3)
    ap.add_argument("--rate", type=int, default=100, help="records a second per producer (txn: a fifth)")
    ap.add_argument("--flush-s", type=float, default=30)
    ap.add_argument("--final", action="store_true", help="only the final read of every partition")
    ap.add_argument("--final-timeout", type=float, default=120)
    ap.add_argument("--zombie", help=argparse.SUPPRESS)           # group's zombie member process
    ap.add_argument("--zombie-stop-at-ns", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.zombie:
        zombie_main(a.zombie, a.bootstrap, a.topic, a.topic + "-group", a.out, a.seed, a.zombie_stop_at_ns)
    elif a.final:
        topics = [a.topic] + ([a.topic + "-out"] if a.kind == "txn" else [])
        final_read(a.bootstrap, topics, a.out, a.final_timeout)
    else:
        print("sluicefault: %s workload, seed %d, %s s" % (a.kind, a.seed, a.seconds), file=sys.stderr)
        run(a.kind, a.bootstrap, a.topic, a.seconds, a.out, a.seed, clients=a.clients, partitions=a.partitions,
            replication=a.replication, rate=a.rate, flush_s=a.flush_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
