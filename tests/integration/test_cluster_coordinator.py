#!/usr/bin/python3
"""The group and transaction coordinators move with the leaders of their
internal partitions (docs/groups.md, docs/transactions.md: Coordinator
placement).

Three sluiced processes (scripts/cluster), min.insync.replicas=2; the
internal topics are created by the controller with 3 replicas each (6
partitions each here, to keep the loads short). A consumer group and a
transactional copier run against the node V that leads the group's
__consumer_offsets partition and the copier's __transaction_state
partition; V is killed with SIGKILL mid-run:

- the consumer group (confluent_kafka, synchronous commits) reads topic A
  to its end; no committed offset it reads back ever goes backwards, and
  at the end its committed offset is the last one acknowledged to it (an
  acknowledged commit survives the coordinator's loss: the new leader
  has it, and loaded it before answering);
- the copier (a read_committed consumer of A and a transactional producer
  to B, send_offsets_to_transaction) copies A to B: B, read_committed,
  holds every record of A exactly once (the copier's committed offset and
  its output moved together across the coordinator's move);
- a zombie, an instance of the copier's transactional.id fenced before the
  kill, is still fenced by the new coordinator (the epoch it lost to is in
  the replicated __transaction_state), and so is the copier's own
  instance once a newer one calls init_transactions; nothing a zombie
  sent is read;
- both survivors name the successor in FindCoordinator (group and
  transactional id); the other survivor answers the group's OffsetFetch
  and Heartbeat with NOT_COORDINATOR, the successor with the offset.

A, B, the group's and the copier's internal partitions get the same
replica order: after the kill, the same survivor leads them all.

First, on the same cluster, transactions across nodes (docs/transactions.md,
Across nodes): a transactional id coordinated by node X writes to two
partitions led by the other two nodes, Y and Z (the coordinator's markers
go there by WriteTxnMarkers; the leaders ask X whether a partition is in
the transaction, KIP-890's verification), committing some transactions
and aborting others: a read_committed consumer reads exactly the committed
records, once; a read_uncommitted one the aborted ones too. Then a copier,
its id coordinated by X and its group by another node (TxnOffsetCommit
verified with X, the offsets materialised by X's marker to that node),
copies those partitions to two more led by Y and Z: every committed
record once, and the group's committed offsets are those it sent. Checked
by hand on 2026-12-02: against the build before these (SLUICED=...) the
first commit fails with INVALID_TXN_STATE (the leaders refused the
transactional produce); with the coordinator's WriteTxnMarkers taken out
of control/txn.c send_markers, commit_transaction(30) times out (Y and Z
never get a marker, EndTxn is never answered).

Shown to catch the fault (checked by hand on 2026-12-02 with this test,
not a switch of the broker): with the load on election taken out
(group_lead and txn_lead marking a partition loaded without reading it
back) it fails with "the committed offset went back from 2500 to -1001"
(the new coordinator knew no offset of the group; the copier, whose
committed offset was lost too, ran 164 transactions for 120 batches, so B
would have held records twice). An earlier version of the test failed so
with "B holds 8100 records: 2100 duplicates". Coordinator writes at acks=1
were not tried: a coordinator's appends wait for the high watermark in
the partition's own code (dataplane/part.c part_append_internal), with no
switch to turn that off.

Run: /usr/bin/python3 tests/integration/test_cluster_coordinator.py
"""

import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICECTL, main, test  # noqa: E402
from cluster import Cluster, until  # noqa: E402
import kraw  # noqa: E402

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

NPARTS = 6            # of each internal topic (offsets.topic.num.partitions)
RECORDS = 6000
QUIET = {"log_level": 0}


def java_partition(key, n):
    """Kafka's partitionFor: the Java String hashCode of the key, abs, mod n
    (dataplane/topic_name.h topic_key_partition)."""
    h = 0
    for ch in key.encode():
        h = (31 * h + ch) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    h = 0 if h == -(1 << 31) else abs(h)
    return h % n


def key_for(prefix, part, taken=()):
    i = 0
    while True:
        k = "%s-%d" % (prefix, i)
        if java_partition(k, NPARTS) == part and k not in taken:
            return k
        i += 1


def internal(admin):
    """{topic: {partition: (leader, replicas in order, isr)}} of both
    internal topics once every partition is led with 3 in sync, else None."""
    md = admin.list_topics(timeout=10)
    out = {}
    for name in ("__consumer_offsets", "__transaction_state"):
        t = md.topics.get(name)
        if t is None or t.error is not None or len(t.partitions) != NPARTS:
            SEEN["internal"] = (name, t and t.error, t and len(t.partitions))
            return None
        out[name] = {p: (m.leader, list(m.replicas), sorted(m.isrs)) for p, m in t.partitions.items()}
        SEEN["internal"] = out
        if any(l < 0 or len(isr) != 3 for l, _r, isr in out[name].values()):
            return None
    return out


SEEN = {}   # what internal() saw last: said when a wait for it fails


def internal_preferred(admin, bootstrap):
    """internal(admin) once every internal partition is led by its
    preferred replica, else None: a node that started late leaves some
    led by another, and a preferred election (sluicectl leader elect)
    is asked for each time until they move back."""
    out = internal(admin)
    if out is None:
        return None
    if all(l == r[0] for t in out.values() for l, r, _i in t.values()):
        return out
    subprocess.run([SLUICECTL, "-b", bootstrap, "leader", "elect"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    return None


def leaders(admin, topics):
    md = admin.list_topics(timeout=10)
    return {t: md.topics[t].partitions[0].leader for t in topics}


class Copier(threading.Thread):
    """Consume-transform-produce A -> B in transactions of up to 50
    records, as Kafka's EOS examples do: an abortable error aborts and
    rewinds to the committed offset; a fenced or fatal one ends it."""

    def __init__(self, bootstrap, group, txn_id):
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.txn_id = bootstrap, group, txn_id
        self.copied = 0          # records in committed transactions
        self.position = 0        # the input offset the last committed transaction reached
        self.commits = 0
        self.aborts = 0
        self.error = None
        self.last_error = None
        self.stop = False
        self.producer = None

    def run(self):
        try:
            self.loop()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def rewind(self, cons):
        tps = cons.assignment()
        if not tps:
            return
        for tp in cons.committed(tps, timeout=30):
            cons.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))

    def loop(self):
        cons = Consumer(dict(QUIET, **{"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                       "isolation.level": "read_committed", "enable.auto.commit": False,
                                       "auto.offset.reset": "earliest", "session.timeout.ms": 10000}))
        prod = Producer(dict(QUIET, **{"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
                                       "transaction.timeout.ms": 20000, "linger.ms": 5}))
        self.producer = prod
        prod.init_transactions(60)
        cons.subscribe(["A"])
        end = time.monotonic() + 150
        while not self.stop:
            assert time.monotonic() < end, "copier: no end after %d copied" % self.copied
            msgs = [m for m in cons.consume(50, 0.5) if not m.error()]
            if not msgs:
                continue
            time.sleep(0.05)   # paced: the kill comes while it runs
            try:
                prod.begin_transaction()
                for m in msgs:
                    prod.produce("B", key=m.key(), value=m.value())
                pos = cons.position(cons.assignment())
                prod.send_offsets_to_transaction(pos, cons.consumer_group_metadata(), 60)
                prod.commit_transaction(60)
                self.copied += len(msgs)
                self.commits += 1
                self.position = max(tp.offset for tp in pos)
            except KafkaException as e:
                err = e.args[0]
                self.last_error = err
                if err.txn_requires_abort() or err.retriable():
                    self.aborts += 1
                    try:
                        prod.abort_transaction(60)
                    except KafkaException:
                        pass
                    self.rewind(cons)
                    continue
                raise
        cons.close()


class Grouper(threading.Thread):
    """A consumer group member that reads A and commits synchronously after
    every batch of up to 100 records; every acknowledged commit is remembered, and a second
    thread reads the committed offset back over and over (it must never go
    back)."""

    def __init__(self, bootstrap, group):
        super().__init__(daemon=True)
        self.bootstrap, self.group = bootstrap, group
        self.acked = []          # offsets whose commit was acknowledged, in order
        self.consumed = 0
        self.error = None
        self.failed_commits = 0

    def run(self):
        try:
            cons = Consumer(dict(QUIET, **{"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                           "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                           "session.timeout.ms": 10000}))
            cons.subscribe(["A"])
            end = time.monotonic() + 150
            last = -1
            while last < RECORDS:
                assert time.monotonic() < end, "group: stuck at %d" % last
                time.sleep(0.1)   # paced, as the copier
                for m in cons.consume(100, 0.5):
                    if m.error():
                        continue
                    self.consumed += 1
                    last = m.offset() + 1   # where it is: a rewind commits lower
                if last < 0:
                    continue
                try:
                    cons.commit(offsets=[TopicPartition("A", 0, last)], asynchronous=False)
                    self.acked.append(last)
                except KafkaException:
                    self.failed_commits += 1   # not acknowledged: may or may not be there
            cons.close()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e


def committed(bootstrap, group):
    c = Consumer(dict(QUIET, **{"bootstrap.servers": bootstrap, "group.id": group}))
    try:
        return c.committed([TopicPartition("A", 0)], timeout=20)[0].offset
    finally:
        c.close()


def read_committed_b(bootstrap):
    c = Consumer(dict(QUIET, **{"bootstrap.servers": bootstrap, "group.id": "reader-b",
                                "isolation.level": "read_committed", "enable.auto.commit": False,
                                "enable.partition.eof": True}))
    _lo, hi = c.get_watermark_offsets(TopicPartition("B", 0), timeout=30)
    c.assign([TopicPartition("B", 0, 0)])
    got = []
    deadline = time.monotonic() + 60
    eof = False
    while not eof:
        assert time.monotonic() < deadline, "reading B back: %d of up to %d" % (len(got), hi)
        for m in c.consume(1000, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof = True
                continue
            got.append(m.value())
    c.close()
    return got


def read_all(bootstrap, topic, nparts, isolation):
    """Every record of topic's partitions, as a consumer at isolation reads them."""
    c = Consumer(dict(QUIET, **{"bootstrap.servers": bootstrap, "group.id": "reader-%s" % topic,
                                "isolation.level": isolation, "enable.auto.commit": False,
                                "enable.partition.eof": True}))
    c.assign([TopicPartition(topic, p, 0) for p in range(nparts)])
    got, eof = [], set()
    deadline = time.monotonic() + 30
    while len(eof) < nparts:
        assert time.monotonic() < deadline, "reading %s (%s): %d records, at EOF in %r" % (
            topic, isolation, len(got), eof)
        for m in c.consume(1000, 0.5):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            got.append(m.value())
    c.close()
    return got


def transactions_across_nodes(c, admin, parts):
    """A transaction whose coordinator, partitions and group coordinator
    are on different nodes (see the module's docstring)."""
    t0 = time.monotonic()
    tstate, offs = parts["__transaction_state"], parts["__consumer_offsets"]
    tpart = 0
    x = tstate[tpart][0]
    y, z = [n for n in (1, 2, 3) if n != x]
    opart = [p for p, (l, _r, _i) in sorted(offs.items()) if l != x][0]
    txn_id = key_for("xtxn", tpart)
    copy_id = key_for("xcopy", tpart, {txn_id})
    group = key_for("xgroup", opart)
    fs = admin.create_topics([NewTopic(t, 2, replica_assignment=[[y, z, x], [z, y, x]]) for t in ("XT", "XO")],
                             operation_timeout=30)
    for f in fs.values():
        f.result(60)

    def led():
        md = admin.list_topics(timeout=10)
        return {(t, p): md.topics[t].partitions[p].leader for t in ("XT", "XO") for p in (0, 1)}
    until("XT and XO led by nodes %d and %d" % (y, z),
          lambda: led() == {("XT", 0): y, ("XT", 1): z, ("XO", 0): y, ("XO", 1): z})
    print("  across nodes: transaction coordinator %d, partitions led by %d and %d, the group's "
          "coordinator %d" % (x, y, z, offs[opart][0]))

    prod = Producer(dict(QUIET, **{"bootstrap.servers": c.bootstrap, "transactional.id": txn_id,
                                   "linger.ms": 5}))
    prod.init_transactions(30)
    committed, aborted = [], []
    for i in range(6):
        vals = [b"x%d-%02d" % (i, j) for j in range(20)]
        prod.begin_transaction()
        for j, v in enumerate(vals):
            prod.produce("XT", value=v, partition=j % 2)
        if i % 2 == 0:
            prod.commit_transaction(30)
            committed += vals
        else:
            assert prod.flush(30) == 0   # written, then aborted
            prod.abort_transaction(30)
            aborted += vals
    got = read_all(c.bootstrap, "XT", 2, "read_committed")
    assert sorted(got) == sorted(committed), "read_committed: %d records (%d committed, %d aborted among them)" % (
        len(got), len(set(got) & set(committed)), len(set(got) & set(aborted)))
    got = read_all(c.bootstrap, "XT", 2, "read_uncommitted")
    assert sorted(got) == sorted(committed + aborted), "read_uncommitted: %d of %d" % (
        len(got), len(committed + aborted))

    # the copier: its group's offsets partition led by another node than
    # its transaction's coordinator
    cons = Consumer(dict(QUIET, **{"bootstrap.servers": c.bootstrap, "group.id": group,
                                   "isolation.level": "read_committed", "enable.auto.commit": False}))
    cons.assign([TopicPartition("XT", p, 0) for p in (0, 1)])
    cp = Producer(dict(QUIET, **{"bootstrap.servers": c.bootstrap, "transactional.id": copy_id,
                                 "linger.ms": 5}))
    cp.init_transactions(30)
    copied, sent = 0, None
    deadline = time.monotonic() + 60
    while copied < len(committed):
        assert time.monotonic() < deadline, "the copier: %d of %d copied" % (copied, len(committed))
        msgs = [m for m in cons.consume(40, 0.5) if not m.error()]
        if not msgs:
            continue
        cp.begin_transaction()
        for m in msgs:
            cp.produce("XO", value=m.value(), partition=m.partition())
        sent = cons.position(cons.assignment())
        cp.send_offsets_to_transaction(sent, cons.consumer_group_metadata(), 30)
        cp.commit_transaction(30)
        copied += len(msgs)
    cons.close()
    got = read_all(c.bootstrap, "XO", 2, "read_committed")
    assert len(got) == len(set(got)) and sorted(got) == sorted(committed), (
        "XO holds %d records, %d distinct, of %d" % (len(got), len(set(got)), len(committed)))
    reader = Consumer(dict(QUIET, **{"bootstrap.servers": c.bootstrap, "group.id": group}))
    have = {(tp.partition, tp.offset) for tp in reader.committed([TopicPartition("XT", p) for p in (0, 1)],
                                                                 timeout=20)}
    reader.close()
    assert have == {(tp.partition, tp.offset) for tp in sent}, "committed %r, sent %r" % (have, sent)
    # the markers go to each leader in one WriteTxnMarkers per decision:
    # a transaction over XB's two partitions, both led by Y, costs X one
    # request for two markers
    fs = admin.create_topics([NewTopic("XB", 2, replica_assignment=[[y, z, x], [y, z, x]])], operation_timeout=30)
    fs["XB"].result(60)
    until("XB led by node %d" % y, lambda: {p.leader for p in admin.list_topics(timeout=10).topics["XB"]
                                            .partitions.values()} == {y})
    remote0 = c.metric(x, 'sluice_txn_markers_total{where="other_node"}')
    requests0 = c.metric(x, "sluice_txn_marker_requests_total")
    retries0 = c.metric(x, "sluice_txn_marker_retries_total")
    prod.begin_transaction()
    prod.produce("XB", value=b"b0", partition=0)
    prod.produce("XB", value=b"b1", partition=1)
    prod.commit_transaction(30)
    prod.flush(30)
    assert sorted(read_all(c.bootstrap, "XB", 2, "read_committed")) == [b"b0", b"b1"]
    remote = c.metric(x, 'sluice_txn_markers_total{where="other_node"}') - remote0
    requests = c.metric(x, "sluice_txn_marker_requests_total") - requests0
    retries = c.metric(x, "sluice_txn_marker_retries_total") - retries0   # a retry round sends again
    assert remote == 2 and 1 <= requests <= 1 + retries, "node %d: %d WriteTxnMarkers requests for %d markers " \
        "(%d retry rounds)" % (x, requests, remote, retries)
    print("  across nodes: %d records committed, %d aborted, copied once, in %.1f s; two partitions of one "
          "leader marked in %d WriteTxnMarkers request" % (len(committed), len(aborted), time.monotonic() - t0,
                                                         requests))


@test
def group_and_copier_keep_their_guarantees_through_their_coordinators_sigkill():
    sets = ["min.insync.replicas=2", "replica.lag.time.max.ms=10000", "broker.session.timeout.ms=6000",
            "offsets.topic.num.partitions=%d" % NPARTS, "transaction.state.log.num.partitions=%d" % NPARTS]
    with Cluster(3, sets=sets) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        try:
            parts = until("the internal topics led by their preferred replicas, 3 in sync",
                          lambda: internal_preferred(admin, c.bootstrap), timeout=120)
        except AssertionError as e:
            raise AssertionError("%s; last seen {topic: {partition: (leader, replicas, isr)}}: %r"
                                 % (e, SEEN.get("internal")))
        transactions_across_nodes(c, admin, parts)
        # the group's offsets partition, and the transaction state
        # partition with the same replica order: one node leads both
        opart = 0
        order = parts["__consumer_offsets"][opart][1]
        tpart = [p for p, (_l, r, _i) in parts["__transaction_state"].items() if r == order][0]
        victim = order[0]
        assert parts["__consumer_offsets"][opart][0] == victim, parts
        copy_group = key_for("copier", opart)
        plain_group = key_for("group", opart, {copy_group})
        txn_id = key_for("txn", tpart)
        fs = admin.create_topics([NewTopic("A", 1, replica_assignment=[order]),
                                  NewTopic("B", 1, replica_assignment=[order])], operation_timeout=30)
        for f in fs.values():
            f.result(60)
        until("A and B led by node %d" % victim,
              lambda: leaders(admin, ["A", "B"]) == {"A": victim, "B": victim})

        prod = Producer(dict(QUIET, **{"bootstrap.servers": c.bootstrap, "enable.idempotence": True,
                                       "linger.ms": 5}))
        for i in range(RECORDS):
            prod.produce("A", key=b"k%d" % (i % 50), value=b"r%06d" % i)
            if i % 1000 == 0:
                prod.poll(0)
        assert prod.flush(60) == 0

        # the zombie: an instance of the copier's id, fenced by the copier's
        # own init_transactions before the kill
        zombie = Producer(dict(QUIET, **{"bootstrap.servers": c.bootstrap, "transactional.id": txn_id}))
        zombie.init_transactions(60)

        copier = Copier(c.bootstrap, copy_group, txn_id)
        grouper = Grouper(c.bootstrap, plain_group)
        copier.start()
        grouper.start()
        seen = []
        stop_watch = threading.Event()

        def watch():
            while not stop_watch.is_set():
                try:
                    seen.append(committed(c.bootstrap, plain_group))
                except Exception:  # noqa: BLE001 - no coordinator for a moment
                    pass
                time.sleep(0.2)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()

        until("a third copied and committed",
              lambda: copier.error or grouper.error or
              (copier.position >= RECORDS // 3 and len(grouper.acked) >= 3), timeout=90)
        assert not copier.error and not grouper.error, (copier.error, grouper.error)
        # the same successor for all four: every replica in sync now
        def isrs():
            md = admin.list_topics(timeout=10)
            return {(t, p): sorted(md.topics[t].partitions[p].isrs)
                    for t, p in (("A", 0), ("B", 0), ("__consumer_offsets", opart), ("__transaction_state", tpart))}
        print("  in sync before the kill: %r" % isrs())
        until("every replica of A, B and the coordinator partitions in sync",
              lambda: all(len(v) == 3 for v in isrs().values()), timeout=30)
        acked_before = grouper.acked[-1]
        copied_before = copier.position
        t_kill = time.monotonic()
        c.kill(victim)
        try:
            until("the copier done", lambda: copier.error or copier.position >= RECORDS, timeout=120)
        except AssertionError:
            for n in (1, 2, 3):
                print("  node %d's log:\n%s" % (n, "\n".join(c.log(n).splitlines()[-40:])))
            raise AssertionError("the copier did not finish: at %d of %d, %d transactions, %d aborted, "
                                 "last error %r" % (copier.position, RECORDS, copier.commits, copier.aborts,
                                                    copier.last_error))
        assert not copier.error, "copier: %r" % copier.error
        grouper.join(120)
        assert not grouper.is_alive() and not grouper.error, "group: %r" % grouper.error
        stop_watch.set()
        watcher.join(30)
        took = time.monotonic() - t_kill
        successor = leaders(admin, ["A", "B"])
        print("  node %d killed with %d of %d copied; the rest copied %.1f s later (led by %r); "
              "%d transactions, %d aborted; group: %d commits acknowledged (%d refused), %d reads of "
              "the committed offset" % (victim, copied_before, RECORDS, took, successor,
                                        copier.commits, copier.aborts, len(grouper.acked),
                                        grouper.failed_commits, len(seen)))

        assert copied_before < RECORDS, "the copier was done before the kill: nothing was tested"
        assert grouper.acked[-1] > acked_before, "the group committed nothing after the kill"

        # the group's commits: never back, the last acknowledged one kept
        # (none committed reads -1001: after a committed one, that is back too)
        real = [o for o in seen if o is not None]
        assert any(o >= 0 for o in real), "the committed offset was never read"
        for a, b in zip(real, real[1:]):
            assert b >= a, "the committed offset went back from %d to %d: %r" % (a, b, real)
        assert grouper.acked == sorted(grouper.acked), "the group's commits went back: %r" % grouper.acked
        final = committed(c.bootstrap, plain_group)
        assert final == grouper.acked[-1], "committed %r, last acknowledged %r" % (final, grouper.acked[-1])
        assert final >= acked_before

        # NOT_COORDINATOR sends clients to the right node: both survivors
        # name the successor; the other one refuses the group's requests
        successor_node = successor["A"]
        for n in (1, 2, 3):
            if n == victim:
                continue
            with kraw.Conn(c.addr(n)) as k:
                fc = k.find_coordinator(plain_group, ver=1, key_type=0)
                ft = k.find_coordinator(txn_id, ver=1, key_type=1)
                assert (fc.error, fc.node, ft.error, ft.node) == (0, successor_node, 0, successor_node), (
                    n, fc, ft)
                out, top = k.offset_fetch(plain_group, {"A": [0]}, ver=2)
                if n == successor_node:
                    assert top == 0 and out[("A", 0)][0] == final, (n, top, out)
                else:
                    assert top == kraw.NOT_COORDINATOR and out[("A", 0)][2] == kraw.NOT_COORDINATOR, (
                        n, top, out)
                    hb = k.heartbeat(plain_group, 1, "nobody")
                    assert hb == kraw.NOT_COORDINATOR, (n, hb)

        # the copier's output: every record of A once
        got = read_committed_b(c.bootstrap)
        want = [b"r%06d" % i for i in range(RECORDS)]
        dup = len(got) - len(set(got))
        missing = set(want) - set(got)
        assert dup == 0 and not missing and len(got) == RECORDS, (
            "B holds %d records: %d duplicates, %d missing (e.g. %r)" % (len(got), dup, len(missing),
                                                                      sorted(missing)[:3]))
        assert committed(c.bootstrap, copy_group) == RECORDS

        # the zombies: fenced by the new coordinator
        copier.stop = True
        copier.join(30)
        for name, z in (("the instance fenced before the kill", zombie), ("the copier's instance", None)):
            if z is None:
                newer = Producer(dict(QUIET, **{"bootstrap.servers": c.bootstrap, "transactional.id": txn_id}))
                newer.init_transactions(60)
                z = copier.producer
            fenced = False
            try:
                z.begin_transaction()
                z.produce("B", value=b"zombie")
                z.commit_transaction(30)
            except KafkaException as e:
                fenced = e.args[0].fatal() or e.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                                                   KafkaError.INVALID_PRODUCER_EPOCH)
            assert fenced, "%s committed a transaction after the coordinator moved" % name
        assert b"zombie" not in read_committed_b(c.bootstrap), "a zombie's record is read"


if __name__ == "__main__":
    main("test_cluster_coordinator")
