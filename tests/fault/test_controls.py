#!/usr/bin/python3
"""The checker's controls (issue 20: a checker that cannot fail is no
checker). Each scenario runs twice: against the control broker
(BUILD/control/sluiced, `make control-broker`) with SLUICE_CONTROL=NAME,
which lacks that one protection, and against the normal broker. Both runs
write a history in the fault suite's JSONL contract (docs/fault-testing.md)
and the checker (tools/sluicefault/checker.py) reads it: the
control's anomaly must be counted with the control, and no anomaly at all
without. Each
scenario also asserts the anomaly directly (an offset, a value), so the
scenario itself is proven whatever the checker says.

    /usr/bin/python3 tests/fault/test_controls.py [test_name...]

Scenarios (docs/fault-testing.md#controls):
  no-dedup             duplicated   a resent idempotent batch (its response lost by faultproxy)
  no-seq-check         reordered    a batch past a sequence gap, then the gap's
  lso-ignored          aborted_visible  read_committed after an aborted transaction;
                       cycles       two open transactions reading each other's records;
                       premature_read  an open transaction's record read before its last was sent
  no-generation-check  stale_commit a member that left commits after the new owner
  ack-before-isr       lost         acks=all to a leader cut off from its followers, then killed;
                       copy_mismatch  a copier transaction told committed there, lost whole with
                                    it, its input copied again by the restarted copier
  no-truncate          divergent    the old leader, back as a follower, keeps its own tail
  end-out-of-range     nonmonotonic a member's fetch at the log end refused: it reads from the start
                                    again (not counted as client-stale-reset)
  no-crc-check         unexpected   a batch damaged on its way (its CRC no longer matches) taken
  next-batch           skipped      a member starting inside a batch given the next one
  replay-first-wins    commit_backwards  offsets read back after a restart: the first commit wins
  unanswered-marker-taken partial_txn  a marker whose WriteTxnMarkers went unanswered taken as
                                    written; the producer's next transaction aborts on that partition

Clients are raw (tests/integration/kraw.py, ktxn.py): each request is one
deterministic step. The cluster scenarios need root (network namespaces:
scripts/cluster --netns) and are skipped without it. `make test` runs the
one-broker ones (tests/fault/controls_quick.sh); `make fault-controls` all.
"""

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "tools"))

import cluster  # noqa: E402
import harness  # noqa: E402
import kraw  # noqa: E402
import ktxn  # noqa: E402
from sluicefault import checker, history  # noqa: E402
from harness import main, temp_dir, test  # noqa: E402

NORMAL = harness.SLUICED
# the controller notices a dead node within 4 s; the ISR does not shrink
# within the scenario (replica.lag.time.max.ms 30 s, the default: a leader
# cut off for a second keeps its followers in its ISR, so a follower can be
# elected once it is killed)
CLUSTER_SETS = ["min.insync.replicas=2", "broker.session.timeout.ms=4000", "replica.lag.time.max.ms=30000"]
CONTROL = os.environ.get("SLUICED_CONTROL",
                         os.path.join(os.path.dirname(NORMAL), "control", "sluiced"))


class Hist(history.Writer):
    """One client's history (tools/sluicefault/history.py), with the run's
    unique values "<client>-<seq>"."""

    def __init__(self, out_dir, client):
        super().__init__(out_dir, client)
        self.seq = 0

    def w(self, type_, **kw):
        self.write(type_, **kw)

    def value(self):
        v = "%s-%d" % (self.client, self.seq)
        self.seq += 1
        return v


def final_read(bootstrap, topic, partition, out_dir, check_crc=True):
    """The final reader's full read of one partition from the log start,
    both isolation levels, as a client sees it: read_committed drops the
    records of the transactions the answer lists as aborted (as the Java
    consumer and librdkafka do). Written to the history once the whole read
    succeeded (a caller may retry it). check_crc False reads as librdkafka
    does by default (check.crcs=false): a batch's CRC not checked. Returns
    {isolation: [(offset, value)]}."""
    seen, lines = {}, []
    with ktxn.TConn(bootstrap) as c:
        c.check_crc = check_crc
        for iso, name in ((ktxn.READ_COMMITTED, "read_committed"), (ktxn.READ_UNCOMMITTED, "read_uncommitted")):
            reader = "final-rc" if iso == ktxn.READ_COMMITTED else "final-ru"
            got, off, end = [], 0, None
            while True:
                f = c.fetch1(topic, partition, off, iso)
                assert f.error == 0, "final read %s/%d at %d: error %d" % (topic, partition, off, f.error)
                end = f.lso if iso == ktxn.READ_COMMITTED else f.hw
                aborted = sorted(f.aborted or (), key=lambda a: a[1])
                skipping = set()
                if iso == ktxn.READ_UNCOMMITTED:
                    # the log's batch headers, as the workloads' final read
                    # writes them (sluicefault.batches): a duplicate the
                    # broker made stays duplicated with them
                    for bt in f.batches:
                        lines.append(("final-batches", "batch", dict(
                            node=0, topic=topic, partition=partition, base=bt.base, last=bt.last,
                            producer_id=bt.pid, producer_epoch=bt.epoch, base_sequence=bt.seq)))
                for bt in f.batches:
                    while aborted and aborted[0][1] <= bt.base:
                        skipping.add(aborted.pop(0)[0])
                    if bt.control:
                        skipping.discard(bt.pid)
                        continue
                    if bt.transactional and bt.pid in skipping:
                        continue
                    for r in bt.records:
                        v = r.value.decode()
                        got.append((r.offset, v))
                        lines.append((reader, "read", dict(
                            value=v, key=r.key.decode() if r.key else None, topic=topic, partition=partition,
                            offset=r.offset, reader=reader, isolation=name, session=0)))
                if not f.batches:
                    break
                off = f.batches[-1].last + 1
                if off >= end:
                    break
            lines.append((reader, "final", dict(topic=topic, partition=partition, isolation=name, end_offset=end)))
            seen[name] = got
    hs = {r: Hist(out_dir, r) for r in ("final-rc", "final-ru", "final-batches")}
    for reader, type_, kw in lines:
        hs[reader].w(type_, **kw)
    for h in hs.values():
        h.close()
    return seen


# the checker's anomaly counts (docs/fault-testing.md)
ANOMALIES = ("lost", "duplicated", "reordered", "unexpected", "divergent", "nonmonotonic", "skipped", "stale_commit",
             "commit_backwards", "aborted_visible", "partial_txn", "premature_read", "copy_mismatch", "cycles")


def checked(out_dir):
    """The checker's counts for the run's histories."""
    paths = sorted(os.path.join(out_dir, f) for f in os.listdir(out_dir) if f.endswith(".jsonl"))
    return checker.check(paths)


def both(name, anomaly, scenario, single=True, settings=None):
    """scenario(bootstrap-or-cluster, out_dir) -> its direct count of the
    anomaly; run with the control broker (SLUICE_CONTROL=name), then the
    normal one. Returns ((direct, checker counts) with, (...) without).
    anomaly may be a tuple, and direct then a tuple of counts, one each."""
    anomalies = anomaly if isinstance(anomaly, tuple) else (anomaly,)

    def dcs(direct):
        return direct if isinstance(direct, tuple) else (direct,)
    assert os.path.exists(CONTROL), "%s: build it with make control-broker" % CONTROL
    out = {}
    for label, binary, env in (("control", CONTROL, name), ("normal", NORMAL, None)):
        d = temp_dir("sluice-ctl-%s-" % name)
        hist = os.path.join(d, "history")
        os.makedirs(hist)
        old_h, old_c = harness.SLUICED, cluster.SLUICED
        harness.SLUICED = cluster.SLUICED = binary
        if env:
            os.environ["SLUICE_CONTROL"] = env
        try:
            if single:
                with harness.broker(settings=settings) as b:
                    if env:
                        log = open(b.log_path, errors="replace").read()
                        assert "protection '%s' is OFF" % env in log, log
                    direct = scenario(b.bootstrap, hist)
            else:
                direct = scenario(None, hist)
            counts = checked(hist)
        finally:
            harness.SLUICED, cluster.SLUICED = old_h, old_c
            os.environ.pop("SLUICE_CONTROL", None)
            shutil.rmtree(d, ignore_errors=True)   # a failed scenario's too
        out[label] = (direct, counts)
        print("  %-20s %-8s direct %s=%s  checker %s" % (
            name, label, "/".join(anomalies), "/".join(map(str, dcs(direct))),
            {a: counts[a] for a in ANOMALIES if counts[a]}),
            flush=True)
    (dc, cc), (dn, cn) = out["control"], out["normal"]
    for i, a in enumerate(anomalies):
        assert dcs(dc)[i] > 0, "%s: the control broker did not show %s" % (name, a)
        assert dcs(dn)[i] == 0, "%s: the normal broker showed %s (%d)" % (name, a, dcs(dn)[i])
        assert cc[a] > 0, "%s: the checker found no %s against the control: %r" % (name, a, cc)
    bad = {a: cn[a] for a in ANOMALIES if cn[a]}
    assert not bad, "%s: the checker found anomalies against the normal broker: %r" % (name, bad)
    return out


def produce_logged(h, p, topic, vals, txn=None):
    """One batch of vals to partition 0 by producer p (ktxn.Producer), with
    its send and ack lines; the answer."""
    for x in vals:
        h.w("send", value=x, key=None, topic=topic, partition=0, txn=txn)
    r = p.produce(topic, 0, [x.encode() for x in vals])
    assert r.error == 0, r
    for i, x in enumerate(vals):
        h.w("ack", value=x, topic=topic, partition=0, offset=r.base + i)
    return r


def positions(seen, value):
    return [o for o, v in seen if v == value]


# ---- single-broker scenarios --------------------------------------------------

def faultproxy(target):
    """tests/integration/faultproxy.c in front of target, cutting the
    connection at every Produce response; (process, its address)."""
    path = os.path.join(os.path.dirname(NORMAL), "itests", "faultproxy")
    assert os.path.exists(path), "%s: build it with make test-bins (or make itest-c-bins)" % path
    p = subprocess.Popen([path, "--target", target, "--cut-pct", "100"], stdout=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    m = re.search(r"listening on (\S+):(\d+)", line)
    if not m:
        p.kill()
        p.wait()
        raise AssertionError("faultproxy: %r" % line)
    return p, "%s:%s" % (m.group(1), m.group(2))


def scenario_resend(bootstrap, out):
    """An idempotent producer's batch whose response is lost (faultproxy
    closes the connection at the Produce response), sent again with the
    same sequence on a new connection, as every client does; then the next
    one. The broker must answer the resend with the first append's offset."""
    topic = "dedup"
    h = Hist(out, "p")
    with ktxn.TConn(bootstrap) as c:
        ktxn.new_topic(c, topic)
        p = ktxn.Producer(c, None)
        v0, v1 = h.value(), h.value()
        b0 = p.batch(topic, 0, [(b"k", v0.encode())], seq=0)
        proxy, via = faultproxy(bootstrap)
        try:
            h.w("send", value=v0, key="k", topic=topic, partition=0, txn=None)
            with ktxn.TConn(via) as lossy:
                try:
                    lossy.produce(topic, 0, b0)
                    raise AssertionError("faultproxy passed a Produce response")
                except (ConnectionError, OSError):
                    pass                        # the response is lost
        finally:
            proxy.terminate()
            proxy.communicate(timeout=harness.HANG_GUARD)
        r = c.produce(topic, 0, b0)             # the resend
        assert r.error == 0, r
        h.w("ack", value=v0, topic=topic, partition=0, offset=r.base)
        h.w("send", value=v1, key="k", topic=topic, partition=0, txn=None)
        r = c.produce(topic, 0, p.batch(topic, 0, [(b"k", v1.encode())], seq=1))
        assert r.error == 0, r
        h.w("ack", value=v1, topic=topic, partition=0, offset=r.base)
    h.close()
    seen = final_read(bootstrap, topic, 0, out)["read_uncommitted"]
    return len(positions(seen, v0)) - 1


def scenario_gap(bootstrap, out):
    """Batches 0, 1, 2 of one idempotent producer and one key; batch 1's
    request is late (lost, resent after): batch 2 arrives first. The broker
    must refuse 2 (OUT_OF_ORDER_SEQUENCE_NUMBER, which the client retries
    after 1) so the log keeps the producer's order."""
    topic = "order"
    h = Hist(out, "p")
    with ktxn.TConn(bootstrap) as c:
        ktxn.new_topic(c, topic)
        p = ktxn.Producer(c, None)
        v = [h.value() for _ in range(3)]
        for x in v:
            h.w("send", value=x, key="k", topic=topic, partition=0, txn=None)
        bt = [p.batch(topic, 0, [(b"k", x.encode())], seq=i) for i, x in enumerate(v)]
        for i in (0, 2, 1, 2):
            r = c.produce(topic, 0, bt[i])
            if r.error == ktxn.OUT_OF_ORDER_SEQUENCE_NUMBER and i == 2:
                continue                            # retried after batch 1
            assert r.error == 0, (i, r)
            if i == 2 and any(json.loads(line).get("value") == v[2] and json.loads(line)["type"] == "ack"
                              for line in open(h.path)):
                continue                            # the retry of an acknowledged batch: a duplicate answer
            h.w("ack", value=v[i], topic=topic, partition=0, offset=r.base)
    h.close()
    seen = [x for _, x in final_read(bootstrap, topic, 0, out)["read_uncommitted"]]
    return 0 if seen == v else 1


def scenario_aborted(bootstrap, out):
    """A transaction aborted, then one committed; read_committed must not
    show the aborted one's records."""
    topic = "txn"
    h = Hist(out, "p")
    with ktxn.TConn(bootstrap) as c:
        ktxn.new_topic(c, topic)
        p = ktxn.Producer(c, "ctl-tx")
        for n, commit in enumerate((False, True)):
            txn = "p-t%d" % n
            h.w("txn_begin", txn=txn)
            p.add(topic, [0])
            vals = [h.value() for _ in range(2)]
            produce_logged(h, p, topic, vals, txn)
            err = p.end(commit)
            assert err == 0, err
            h.w("txn_commit" if commit else "txn_abort", txn=txn, ok=True, error=None)
            if not commit:
                aborted = vals
    h.close()
    seen = final_read(bootstrap, topic, 0, out)["read_committed"]
    return sum(1 for _, x in seen if x in aborted)


def scenario_wr_cycle(bootstrap, out):
    """Two transactions each write a record to a partition of their own,
    then read the other's partition read_committed from its start, then
    commit. Read up to the last stable offset neither sees the other's
    open record; served past it each reads the other's: a -wr-> b -wr-> a,
    a cycle of wr edges (the checker's "cycles"). Returns the number of
    records read that the other transaction wrote."""
    topic = "wr"
    names = ("a", "b")
    with ktxn.TConn(bootstrap) as c:
        ktxn.new_topic(c, topic, partitions=2)
    conns = [ktxn.TConn(bootstrap) for _ in names]
    hs = [Hist(out, n) for n in names]
    try:
        ps, wrote = [], []
        for i, (c, h) in enumerate(zip(conns, hs)):
            p = ktxn.Producer(c, "ctl-wr-" + names[i])
            txn = "%s-t0" % names[i]
            h.w("txn_begin", txn=txn)
            p.add(topic, [i])
            v = h.value()
            h.w("send", value=v, key=None, topic=topic, partition=i, txn=txn)
            r = p.produce(topic, i, [v.encode()])
            assert r.error == 0, r
            h.w("ack", value=v, topic=topic, partition=i, offset=r.base)
            ps.append(p)
            wrote.append(v)
        seen = 0
        for i, (c, h) in enumerate(zip(conns, hs)):
            f = c.fetch1(topic, 1 - i, 0, ktxn.READ_COMMITTED)
            assert f.error == 0, f
            for bt in f.batches:
                for rec in ([] if bt.control else bt.records):
                    v = rec.value.decode()
                    h.w("read", value=v, key=None, topic=topic, partition=1 - i, offset=rec.offset,
                        reader=names[i], isolation="read_committed", session=1, txn="%s-t0" % names[i])
                    seen += v == wrote[1 - i]
        for i, (p, h) in enumerate(zip(ps, hs)):
            err = p.end(True)
            assert err == 0, err
            h.w("txn_commit", txn="%s-t0" % names[i], ok=True, error=None)
    finally:
        for c in conns:
            c.close()
        for h in hs:
            h.close()
    for part in (0, 1):
        final_read(bootstrap, topic, part, out)
    return seen


def scenario_premature(bootstrap, out):
    """A transaction writes a record; a read_committed reader reads the
    partition; the transaction writes its second record and commits. Up to
    the last stable offset the reader sees nothing of it; served past it,
    the reader reads the first record before the transaction's last one was
    sent, so before its commit could have been asked for (the checker's
    premature_read). Returns the number of the transaction's records the
    reader read."""
    topic = "early"
    h, hr = Hist(out, "e"), Hist(out, "er")
    mine, seen = [], 0
    with ktxn.TConn(bootstrap) as c, ktxn.TConn(bootstrap) as cr:
        ktxn.new_topic(c, topic)
        p = ktxn.Producer(c, "ctl-early")
        txn = "e-t0"
        h.w("txn_begin", txn=txn)
        p.add(topic, [0])
        for k in range(2):
            v = h.value()
            mine.append(v)
            produce_logged(h, p, topic, [v], txn)
            if k == 0:
                f = cr.fetch1(topic, 0, 0, ktxn.READ_COMMITTED)
                assert f.error == 0, f
                for bt in f.batches:
                    for rec in ([] if bt.control else bt.records):
                        x = rec.value.decode()
                        hr.w("read", value=x, key=None, topic=topic, partition=0, offset=rec.offset, reader="er",
                             isolation="read_committed", session=1)
                        seen += x in mine
        err = p.end(True)
        assert err == 0, err
        h.w("txn_commit", txn=txn, ok=True, error=None)
    h.close()
    hr.close()
    final_read(bootstrap, topic, 0, out)
    return seen


def scenario_lso(bootstrap, out):
    """scenario_aborted, scenario_wr_cycle and scenario_premature against
    one broker: (records of the aborted transaction read read_committed,
    records of the other open transaction read, records of an open
    transaction read before its last was sent)."""
    return scenario_aborted(bootstrap, out), scenario_wr_cycle(bootstrap, out), scenario_premature(bootstrap, out)


CORRUPT_MESSAGE = 2                     # Kafka's error code


def scenario_corrupt(bootstrap, out):
    """A producer's batch damaged on its way (one bit of a value flipped
    after the client computed the batch's CRC: a bad NIC, a proxy's bug;
    TCP's checksum misses what a CRC-32C catches); refused, the client sends
    it again, undamaged, as clients retry CORRUPT_MESSAGE; then the next one.
    The broker must check the CRC and refuse the damaged batch, so that no
    record nobody sent is ever read: the readers do not check CRCs
    (librdkafka's check.crcs=false, its default), what the broker took is
    what they read. Returns the number of records read that nobody sent."""
    topic = "crc"
    h = Hist(out, "p")
    refused = 0
    with ktxn.TConn(bootstrap) as c:
        ktxn.new_topic(c, topic)
        vals = [h.value() for _ in range(2)]
        for i, v in enumerate(vals):
            h.w("send", value=v, key=None, topic=topic, partition=0, txn=None)
            good = ktxn.batch([v.encode()])
            r = None
            if i == 0:
                bad = bytearray(good)
                bad[good.rindex(v.encode())] ^= 0x01          # "p-0" arrives as "q-0"
                r = c.produce(topic, 0, bytes(bad))
                if r.error == CORRUPT_MESSAGE:
                    refused += 1
                    r = None
            if r is None:
                r = c.produce(topic, 0, good)
            assert r.error == 0, r
            h.w("ack", value=v, topic=topic, partition=0, offset=r.base)
    h.close()
    seen = final_read(bootstrap, topic, 0, out, check_crc=False)["read_uncommitted"]
    bogus = sum(1 for _, x in seen if x not in vals)
    assert refused + bogus == 1, (refused, seen)        # refused, or taken and read
    return bogus


COORDINATOR_LOADING = (14, 15, 16)      # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


def join_when_loaded(conn, group, sub):
    """JoinGroup, asked again while the coordinator reads its offsets back
    after a restart (a bounded wait, as a client's)."""
    deadline = time.monotonic() + harness.HANG_GUARD
    while True:
        j = conn.join_group(group, protocols=[("range", sub)])
        if j.error not in COORDINATOR_LOADING or time.monotonic() > deadline:
            return j
        time.sleep(0.05)


def member(bootstrap, h, name, group, topic, commits):
    """A group member of its own connection: joins, is given partition 0
    of topic, fetches the group's offset there (its start, written in its
    assign line), reads from it and commits each offset of commits(start)
    once it has read up to it, and leaves. Returns (start, offsets read)."""
    sub = kraw.subscription([topic])
    fields = dict(group=group, auto_offset_reset="earliest", consumer=1)
    read = []
    with kraw.Conn(bootstrap) as conn, ktxn.TConn(bootstrap) as fc:
        j = join_when_loaded(conn, group, sub)
        assert j.error == 0, j
        assert conn.sync_group(group, j.generation, j.member_id,
                               [(j.member_id, kraw.assignment({topic: [0]}))]).error == 0
        got, top = conn.offset_fetch(group, {topic: [0]})
        assert top == 0 and got[(topic, 0)][2] == 0, (got, top)
        start = pos = max(got[(topic, 0)][0], 0)
        h.w("assign", partitions=[[topic, 0]], generation=j.generation, member=j.member_id, session=1,
            start=[[topic, 0, start]], **fields)
        for upto in commits(start):
            while pos < upto:
                f = fc.fetch1(topic, 0, pos, ktxn.READ_UNCOMMITTED)
                assert f.error == 0, f.error
                recs = [rec for bt in f.batches for rec in bt.records if pos <= rec.offset < upto]
                if not recs:
                    break
                for rec in recs:
                    h.w("read", value=rec.value.decode(), key=None, topic=topic, partition=0, offset=rec.offset,
                        reader=name, isolation="read_uncommitted", session=1)
                    read.append(rec.offset)
                pos = recs[-1].offset + 1
            e = conn.offset_commit(group, {(topic, 0): (upto, "")}, j.generation, j.member_id)[(topic, 0)]
            h.w("commit", partitions=[[topic, 0, upto]], generation=j.generation, member=j.member_id,
                ok=e == 0, error=None if e == 0 else str(e), group=group)
            assert e == 0, e
            pos = upto
        assert conn.leave_group(group, j.member_id) == 0
        h.w("revoke", partitions=[[topic, 0]], generation=j.generation, member=j.member_id, session=1, **fields)
    return start, read


def produce_batches(bootstrap, h, topic, sizes):
    """A new topic of one partition and one batch per size, acknowledged;
    the values."""
    vals = []
    with ktxn.TConn(bootstrap) as c:
        ktxn.new_topic(c, topic)
        p = ktxn.Producer(c, None)
        for n in sizes:
            vs = [h.value() for _ in range(n)]
            produce_logged(h, p, topic, vs)
            vals += vs
    return vals


def scenario_start_skip(bootstrap, out):
    """Two batches of five records (offsets 0-4, 5-9). Member M reads 0 and
    1, commits 2 and leaves; member R is given the partition, starts at the
    committed 2 (inside the first batch) and reads on. A read from inside a
    batch must start with that batch (the client drops the records before
    its position): R reads 2 to 9. The control starts at the next batch: R
    reads 5 to 9, and 2, 3 and 4 were never read by any owner (skipped,
    from the assignment's start). Returns the number of offsets in [2, 5)
    R did not read."""
    topic, group = "startskip", "ctl-start-group"
    hp, hm, hr = Hist(out, "p"), Hist(out, "m"), Hist(out, "r")
    produce_batches(bootstrap, hp, topic, (5, 5))
    member(bootstrap, hm, "m", group, topic, lambda pos: (2,))
    start, read = member(bootstrap, hr, "r", group, topic, lambda pos: (10,))
    assert start == 2, start
    for h in (hp, hm, hr):
        h.close()
    final_read(bootstrap, topic, 0, out)
    return sum(1 for o in range(2, 5) if o not in read)


def scenario_replay(_, out):
    """Member A reads partition 0 and commits 1, then 3, and leaves; the
    broker restarts and reads __consumer_offsets back; member B joins, is
    given the partition, fetches the group's offset, reads one record from
    there and commits past it. Read back, a key's last commit must win (as
    Kafka's coordinator loads it, and as compaction keeps it): B starts at
    3 and commits 4. The control keeps the first: B starts at 1, reads
    record 1 again and commits 2, behind A's 3 (commit_backwards). Returns
    1 when the offset B fetched is not 3."""
    topic, group = "replay", "ctl-replay-group"
    hp, ha, hb = Hist(out, "p"), Hist(out, "a"), Hist(out, "b")
    ctl = os.environ.get("SLUICE_CONTROL")
    with harness.broker(settings={"group.initial.rebalance.delay.ms": 0}) as b:
        if ctl:
            assert "protection '%s' is OFF" % ctl in open(b.log_path, errors="replace").read()
        produce_batches(b.bootstrap, hp, topic, (5,))
        member(b.bootstrap, ha, "a", group, topic, lambda pos: (1, 3))
        b.restart()
        had, _ = member(b.bootstrap, hb, "b", group, topic, lambda pos: (pos + 1,))
        for h in (hp, ha, hb):
            h.close()
        final_read(b.bootstrap, topic, 0, out)
    return 1 if had != 3 else 0


def scenario_stale_commit(bootstrap, out):
    """Member A owns partition 0 (generation 1) and commits 1; A's session
    ends (it leaves), B joins (generation 2), owns partition 0 and commits
    3; A, not knowing, commits 1 again. The coordinator must refuse A's
    late commit (UNKNOWN_MEMBER_ID), so the group's position stays 3."""
    topic, group = "gtopic", "ctl-group"
    ha, hb = Hist(out, "a"), Hist(out, "b")
    sub = kraw.subscription([topic])
    asg = kraw.assignment({topic: [0]})
    with kraw.Conn(bootstrap) as c:
        assert c.create_topic(topic, 1) == 0
    with kraw.Conn(bootstrap) as ca, kraw.Conn(bootstrap) as cb:
        ja = ca.join_group(group, protocols=[("range", sub)])
        assert ja.error == 0, ja
        assert ca.sync_group(group, ja.generation, ja.member_id, [(ja.member_id, asg)]).error == 0
        ha.w("assign", partitions=[[topic, 0]], generation=ja.generation, member=ja.member_id, session=1, group=group)
        e = ca.offset_commit(group, {(topic, 0): (1, "")}, ja.generation, ja.member_id)[(topic, 0)]
        ha.w("commit", partitions=[[topic, 0, 1]], generation=ja.generation, member=ja.member_id, ok=e == 0,
             error=None if e == 0 else str(e), group=group)
        assert e == 0, e
        assert ca.leave_group(group, ja.member_id) == 0
        ha.w("revoke", partitions=[[topic, 0]], generation=ja.generation, member=ja.member_id, session=1, group=group)
        jb = cb.join_group(group, protocols=[("range", sub)])
        assert jb.error == 0 and jb.generation > ja.generation, jb
        assert cb.sync_group(group, jb.generation, jb.member_id, [(jb.member_id, asg)]).error == 0
        hb.w("assign", partitions=[[topic, 0]], generation=jb.generation, member=jb.member_id, session=1, group=group)
        e = cb.offset_commit(group, {(topic, 0): (3, "")}, jb.generation, jb.member_id)[(topic, 0)]
        hb.w("commit", partitions=[[topic, 0, 3]], generation=jb.generation, member=jb.member_id, ok=e == 0,
             error=None if e == 0 else str(e), group=group)
        assert e == 0, e
        e = ca.offset_commit(group, {(topic, 0): (1, "")}, ja.generation, ja.member_id)[(topic, 0)]
        ha.w("commit", partitions=[[topic, 0, 1]], generation=ja.generation, member=ja.member_id, ok=e == 0,
             error=None if e == 0 else str(e), group=group)
        assert e in (0, kraw.UNKNOWN_MEMBER_ID, kraw.ILLEGAL_GENERATION), e
        got, top = cb.offset_fetch(group, {topic: [0]})
        assert top == 0, top
    ha.close()
    hb.close()
    return 1 if got[(topic, 0)][0] != 3 else 0


OFFSET_OUT_OF_RANGE = 1                 # Kafka's error code


def scenario_end_reset(bootstrap, out):
    """Member M reads 0 and 1 of partition 0 (five records), commits 2 and
    leaves; member R
    (auto.offset.reset earliest, as the group workload's members) is given
    the partition, starts at the committed 2, reads to the end and fetches
    at the log end for more. The broker must answer that fetch with no
    records (R waits); the control answers OFFSET_OUT_OF_RANGE, and R, as
    librdkafka does, looks the earliest offset up and reads again from
    there: back to 0 in the same assignment. The checker must count that
    nonmonotonic, not as librdkafka's stale offset reset (client-stale-reset:
    R had the partition in no earlier assignment)."""
    topic, group = "endreset", "ctl-end-group"
    hp, hm, hr = Hist(out, "p"), Hist(out, "m"), Hist(out, "r")
    sub = kraw.subscription([topic])
    fields = dict(group=group, auto_offset_reset="earliest", consumer=1)
    back = 0
    produce_batches(bootstrap, hp, topic, (5,))
    member(bootstrap, hm, "m", group, topic, lambda pos: (2,))
    with ktxn.TConn(bootstrap) as c, kraw.Conn(bootstrap) as cr:
        j = cr.join_group(group, protocols=[("range", sub)])
        assert j.error == 0, j
        assert cr.sync_group(group, j.generation, j.member_id,
                             [(j.member_id, kraw.assignment({topic: [0]}))]).error == 0
        hr.w("assign", partitions=[[topic, 0]], generation=j.generation, member=j.member_id, session=1, **fields)
        got, top = cr.offset_fetch(group, {topic: [0]})
        assert top == 0 and got[(topic, 0)][0] == 2, (got, top)
        pos, last, resets = 2, None, 0
        for _ in range(20):
            f = c.fetch1(topic, 0, pos, ktxn.READ_UNCOMMITTED)
            if f.error == OFFSET_OUT_OF_RANGE:
                if resets:
                    break                   # librdkafka would go on: once shows it
                # auto.offset.reset=earliest: from the earliest offset
                resets += 1
                err, pos = c.list_offsets({(topic, 0): ktxn.EARLIEST}, ktxn.READ_UNCOMMITTED)[(topic, 0)]
                assert err == 0, err
                continue
            assert f.error == 0, (pos, f.error)
            recs = [rec for bt in f.batches for rec in bt.records if rec.offset >= pos]
            if not recs:
                break
            for rec in recs:
                if last is not None and rec.offset <= last:
                    back += 1
                hr.w("read", value=rec.value.decode(), key=None, topic=topic, partition=0, offset=rec.offset,
                     reader="r", isolation="read_uncommitted", session=1)
                last = rec.offset
            pos = recs[-1].offset + 1
    for h in (hp, hm, hr):
        h.close()
    final_read(bootstrap, topic, 0, out)
    return back


# ---- cluster scenario -----------------------------------------------------------

def produce_timeout(k, topic, blob, timeout_ms):
    """Produce v7, acks=all, the given timeout, to partition 0."""
    w = kraw.W().str(None).i16(-1).i32(timeout_ms)
    w.array([(topic, [(0, blob)])], lambda w, tv: w.str(tv[0]).array(tv[1], lambda w, pv: w.i32(pv[0]).bytes(pv[1])))
    r = k.request(ktxn.PRODUCE, 7, w)
    (_, [(_, err, base)]), = r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i16(), r.i64(), r.i64(),
                                                                             r.i64())[:3])))
    r.i32()
    r.done()
    from types import SimpleNamespace as NS
    return NS(error=err, base=base)


def need_netns():
    if os.geteuid() != 0:
        harness.skip("network namespaces need root (euid %d)" % os.geteuid())
    if shutil.which("nft") is None:
        harness.skip("nft (package nftables) is not installed")


def cut_then_kill(c, node, step):
    """Cut node's Kafka port off from the other nodes (their replica
    fetches; the quorum's connections, and node's own connections to other
    nodes' ports, stay), run step(), kill node (SIGKILL). Nothing node
    appends in step() reaches another node. The cut is an nftables table
    in node's namespace that answers those packets with a reset, both ways,
    and it stays until the cluster (the namespace) goes: the killed
    process's sockets still hold what step() appended, and the kernel would
    send it once the cut was lifted. Neither scripts/cluster isolate (which
    is lifted to restart the node) nor a SIGSTOP of the followers (a fetch
    parked at the leader carries the records into a stopped follower's
    socket) keeps them in."""
    k = open(os.path.join(c.dir, "netns")).read().strip()
    ns = ["ip", "netns", "exec", "sluice%sn%d" % (k, node)]
    peers = ", ".join("10.213.%s.%d" % (k, j) for j in range(1, c.n + 1) if j != node)
    port = c.port(node)
    rules = ("table inet sluicef_ctl {\n"
             " chain in { type filter hook input priority -10;"
             " ip saddr { %s } tcp dport %d reject with tcp reset; }\n"
             " chain out { type filter hook output priority -10;"
             " ip daddr { %s } tcp sport %d reject with tcp reset; }\n"
             "}\n" % (peers, port, peers, port))
    subprocess.run(ns + ["nft", "-f", "-"], input=rules, text=True, check=True, timeout=60)
    step()
    c.kill(node)


def on_leader(c, topic, among, what, fn):
    """(node, fn(node)) for partition 0's leader, one of among, once fn
    gives something true (Metadata may name the old leader for a while,
    the new one may refuse before it knows: both tried again)."""
    def once():
        n = leader_of(c.bootstrap, topic, among)
        v = n and fn(n)
        return v and (n, v)
    return cluster.until(what, once)


def produce_once(addr, topic, values):
    """One batch to partition 0 at addr, acks=all; the answer when taken."""
    with ktxn.TConn(addr) as k:
        r = k.produce(topic, 0, ktxn.plain([v.encode() for v in values]))
    return r.error == 0 and r


def produce_ok(k, topic, values):
    """One batch of values to partition 0, acks=all, sent again while the
    node answers a retriable error (it learns of the topic, of its
    leadership); the answer."""
    blob = ktxn.plain([v.encode() for v in values])

    def once():
        r = k.produce(topic, 0, blob)
        assert r.error in (0, kraw.UNKNOWN_TOPIC_OR_PARTITION, 6, 7, 19, 20), r   # not leader, timeout, ISR
        return r.error == 0 and r
    return cluster.until("%s/0 takes a batch" % topic, once)


def scenario_ack_lost(_, out):
    """3 nodes (each in its network namespace), a topic of replication
    factor 3 and min.insync.replicas 2. One record is acknowledged while all
    are connected; the leader's Kafka port is cut off from the other nodes
    (the followers cannot fetch), a second record is sent acks=all with a
    1 s timeout, the leader is killed (SIGKILL): a follower leads; the old
    leader restarts and catches up (the final read waits for the three in
    sync: a new leader's high watermark lags its log until then). A broker
    that waits for the ISR never acknowledged the second record
    (REQUEST_TIMED_OUT); one that acknowledged it at the leader's append has
    lost it."""
    topic = "acks"
    h = Hist(out, "p")
    with cluster.Cluster(3, sets=CLUSTER_SETS, netns=True) as c:
        cluster.create_topic(c.bootstrap, topic, 1, 3)
        cluster.wait_isrs(c.bootstrap, topic, 3)
        leader = cluster.until("partition 0's leader", lambda: leader_of(c.bootstrap, topic))
        followers = [n for n in range(1, 4) if n != leader]
        v0, v1 = h.value(), h.value()
        got = {}
        with ktxn.TConn(c.addr(leader)) as k:
            h.w("send", value=v0, key=None, topic=topic, partition=0, txn=None)
            r = produce_ok(k, topic, [v0])
            h.w("ack", value=v0, topic=topic, partition=0, offset=r.base)

            def step():
                h.w("send", value=v1, key=None, topic=topic, partition=0, txn=None)
                got["r"] = r = produce_timeout(k, topic, ktxn.plain([v1.encode()]), 1000)
                if r.error == 0:
                    h.w("ack", value=v1, topic=topic, partition=0, offset=r.base)
                else:
                    h.w("fail", value=v1, error=str(r.error), definite=False)
            cut_then_kill(c, leader, step)
        acked1 = got["r"].error == 0
        h.close()
        # the final read once every replica is in sync again: a new
        # leader's high watermark catches up with its log only when its ISR
        # has fetched it (the old leader, dead, held it back until dropped)
        on_leader(c, topic, followers, "a new leader", lambda n: n)
        c.restart(leader)
        cluster.wait_isrs(c.bootstrap, topic, 3)
        seen = on_leader(c, topic, followers, "a read from a new leader",
                         lambda n: final_read(c.addr(n), topic, 0, out))[1]["read_uncommitted"]
    lost = [x for x in ([v0] + ([v1] if acked1 else [])) if not positions(seen, x)]
    return len(lost)


def cut_from(c, node, to):
    """Cut node's own connections to node to's Kafka port (an nftables
    table in node's namespace resets them); to's connections to node stay.
    Returns the function that lifts the cut."""
    k = open(os.path.join(c.dir, "netns")).read().strip()
    ns = ["ip", "netns", "exec", "sluice%sn%d" % (k, node)]
    rules = ("table inet sluicef_cut {\n"
             " chain out { type filter hook output priority -10;"
             " ip daddr 10.213.%s.%d tcp dport %d reject with tcp reset; }\n"
             "}\n" % (k, to, c.port(to)))
    subprocess.run(ns + ["nft", "-f", "-"], input=rules, text=True, check=True, timeout=60)
    return lambda: subprocess.run(ns + ["nft", "delete", "table", "inet", "sluicef_cut"], check=True, timeout=60)


def scenario_partial(_, out):
    """3 nodes, a topic of three partitions of one replica each. A
    transaction writes a record to a partition node Y leads and one to a
    partition another node leads; its coordinator X (not Y) is cut off from
    Y's Kafka port, and the transaction commits: X's marker to Y's
    partition gets no answer. The coordinator must write it again until Y
    takes it, and answer EndTxn only then (the cut is lifted once X has
    logged the unanswered marker); the control takes the unanswered marker
    as written and answers at once, leaving the transaction open on Y's
    partition. The producer's next transaction writes to Y's partition and
    aborts: its ABORT marker closes the first one's record there too, so the
    first transaction, told committed, is visible on one partition and
    aborted on the other (partial_txn). Returns 1 when the committed
    transaction's two records are not both read read_committed."""
    topic, tid = "partial", "ctl-partial"
    h = Hist(out, "p")
    ctl = os.environ.get("SLUICE_CONTROL")
    with cluster.Cluster(3, sets=CLUSTER_SETS, netns=True) as c:
        cluster.create_topic(c.bootstrap, topic, 3, 1, config={"min.insync.replicas": "1"})
        lead = cluster.until("every partition's leader", lambda: (lambda m: m and len(m) == 3 and all(
            v[0] > 0 for v in m.values()) and {p: v[0] for p, v in m.items()})(cluster.partitions(c.bootstrap, topic)))
        with kraw.Conn(c.addr(1)) as k:
            x = cluster.until("the transaction coordinator", lambda: (lambda r: r.error == 0 and r.node)(
                k.find_coordinator(tid, ver=1, key_type=1)))
        if ctl:
            assert "protection '%s' is OFF" % ctl in c.log(x), c.log(x)[-2000:]
        py = min(p for p, n in lead.items() if n != x)
        y = lead[py]
        po = min(p for p, n in lead.items() if n != y)
        conns = {n: ktxn.TConn(c.addr(n)) for n in set(lead.values()) | {x}}
        try:
            cx = conns[x]
            p = cluster.until("InitProducerId", lambda: _init_or_none(cx, tid))

            def send(txn, part):
                v = h.value()
                h.w("send", value=v, key=None, topic=topic, partition=part, txn=txn)
                blob = p.batch(topic, part, [v.encode()])
                r = cluster.until("%s/%d takes a batch" % (topic, part), lambda: (lambda r: r.error == 0 and r)(
                    conns[lead[part]].produce(topic, part, blob, txn_id=tid)))
                p.seq[(topic, part)] = p.seq.get((topic, part), 0) + 1
                h.w("ack", value=v, topic=topic, partition=part, offset=r.base)
                return v

            h.w("txn_begin", txn="p-t0")
            p.add(topic, [po, py])
            first = [send("p-t0", po), send("p-t0", py)]
            lift = cut_from(c, x, y)
            got = {}
            th = threading.Thread(target=lambda: got.setdefault("err", p.end(True)))
            th.start()
            try:
                needle = "marker to %s-%d: no answer from its leader" % (topic, py)
                cluster.until("node %d's unanswered marker" % x, lambda: needle in c.log(x))
            finally:
                lift()
            th.join(harness.HANG_GUARD)
            assert not th.is_alive() and got.get("err") == 0, got
            h.w("txn_commit", txn="p-t0", ok=True, error=None)
            h.w("txn_begin", txn="p-t1")
            p.add(topic, [py])
            send("p-t1", py)
            err = p.end(False)
            assert err == 0, err
            h.w("txn_abort", txn="p-t1", ok=True, error=None)
        finally:
            for k in conns.values():
                k.close()
        h.close()
        seen = []
        for part in (po, py):
            seen += [v for _, v in final_read(c.addr(lead[part]), topic, part, out)["read_committed"]]
    return 0 if all(v in seen for v in first) else 1


def same_coordinator(c, prefix):
    """(node, group, transactional id): the group "<prefix>-g" and a
    transactional id "<prefix>-t-<n>" that FindCoordinator places on the
    same node (names that differ in one letter at one place hash a
    constant apart: the id is searched for on its own)."""
    def coordinator(k, name, key_type):
        return cluster.until("the coordinator of %s" % name, lambda: (lambda r: r.error == 0 and r.node > 0 and r.node)(
            k.find_coordinator(name, ver=1, key_type=key_type)))
    group = "%s-g" % prefix
    with kraw.Conn(c.addr(1)) as k:
        node = coordinator(k, group, 0)
        for n in range(200):
            t = "%s-t-%d" % (prefix, n)
            if coordinator(k, t, 1) == node:
                return node, group, t
    raise AssertionError("no %s-t-N coordinated by node %d, %s's coordinator, in 200 names" % (prefix, node, group))


def scenario_copy_lost(_, out):
    """3 nodes, replication factor 3, min.insync.replicas 2. A copier
    (consume, transform, produce, exactly once: its copies and its offsets
    in one transaction) copies input records 0-2 in transaction t0; node L,
    which leads the output partition, the copier group's
    __consumer_offsets partition and its transactional id's
    __transaction_state partition, is cut off from its followers, and the
    copier copies 3-5 in transaction t1; L is killed, the copier restarts
    (a new producer epoch, the group's committed offset) and copies from
    there in t2. The normal broker never acknowledged t1's writes (they
    could not reach the followers): t1 never commits, the copier restarts
    from t0's offset 3 and t2 copies 3-5. The control acknowledged them at
    L's own append: t1 was told committed, and lost whole with L (its
    copies and its offset 6), so the restarted copier found 3 again and t2
    copied 3-5 a second time: the only copies of t1's input are t2's
    (copy_mismatch), and t1's own are gone (lost). Returns the number of
    t1's input records whose copy is t2's while t1 was told committed."""
    hp, hc = Hist(out, "p"), Hist(out, "c")
    src, dst = "cin", "cout"
    with cluster.Cluster(3, sets=CLUSTER_SETS, netns=True) as c:
        L, group, tid = same_coordinator(c, "ctl-copier")
        cluster.create_topic(c.bootstrap, src, 1, 3)
        # L the output's preferred replica, so its leader
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(dst, 1, replica_assignment=[[L] + [n for n in range(1, 4) if n != L]])],
                            operation_timeout=30)[dst].result(60)
        for t in (src, dst):
            cluster.wait_isrs(c.bootstrap, t, 3)
        cluster.until("node %d leads cout" % L, lambda: leader_of(c.bootstrap, dst, [L]))
        ctl = os.environ.get("SLUICE_CONTROL")
        if ctl:
            assert "protection '%s' is OFF" % ctl in c.log(L), c.log(L)[-2000:]
        vals = [hp.value() for _ in range(6)]
        src_leader = cluster.until("cin's leader", lambda: leader_of(c.bootstrap, src))
        with ktxn.TConn(c.addr(src_leader)) as k:
            for v in vals:
                hp.w("send", value=v, key=None, topic=src, partition=0, txn=None)
                r = produce_ok(k, src, [v])
                hp.w("ack", value=v, topic=src, partition=0, offset=r.base)
        hp.close()
        state = {"session": 0}
        sent = collections.defaultdict(list)         # txn -> its copies

        def copy(txn, coord, gcoord, out_leader, src_leader, p, start, n, step_timeout=None):
            """One copier transaction of input [start, start + n): reads,
            copies, offsets, commit; the end it reached ("committed",
            or the error of the step that failed)."""
            hc.w("txn_begin", txn=txn)
            def fetched():
                # a new leader's high watermark catches up once its ISR
                # has fetched: asked again until the records are there
                with ktxn.TConn(c.addr(src_leader)) as fk:
                    f = fk.fetch1(src, 0, start, ktxn.READ_UNCOMMITTED)
                assert f.error in (0, 6), f.error          # NOT_LEADER_OR_FOLLOWER: the leader is moving
                recs = [rec for bt in f.batches for rec in bt.records if start <= rec.offset < start + n]
                return len(recs) == n and recs
            recs = cluster.until("input %d-%d readable at node %d" % (start, start + n - 1, src_leader), fetched)
            for rec in recs:
                hc.w("read", value=rec.value.decode(), key=None, topic=src, partition=0, offset=rec.offset,
                     reader="c", isolation="read_uncommitted", session=state["session"], txn=txn)
            try:
                for conn in (coord, gcoord, out_leader):
                    conn.s.settimeout(step_timeout)
                errs = coord.add_partitions(tid, p.pid, p.epoch, {dst: [0]})
                if errs != {(dst, 0): 0}:
                    return "AddPartitionsToTxn %r" % errs
                for rec in recs:
                    v = hc.value()
                    sent[txn].append(v)
                    hc.w("send", value=v, key=rec.value.decode(), topic=dst, partition=0, txn=txn,
                         src=rec.value.decode())
                    r = out_leader.produce(dst, 0, p.batch(dst, 0, [(rec.value, v.encode())]), txn_id=tid)
                    if r.error:
                        return "Produce %d" % r.error
                    p.seq[(dst, 0)] = p.seq.get((dst, 0), 0) + 1
                    hc.w("ack", value=v, topic=dst, partition=0, offset=r.base)
                err = coord.add_offsets(tid, p.pid, p.epoch, group)
                if err:
                    return "AddOffsetsToTxn %d" % err
                errs = gcoord.txn_offset_commit(tid, group, p.pid, p.epoch, {(src, 0): (start + n, "")})
                if errs != {(src, 0): 0}:
                    return "TxnOffsetCommit %r" % errs
                err = p.end(True)
                hc.w("txn_commit", txn=txn, ok=err == 0, error=None if err == 0 else str(err),
                     offsets=[[src, 0, start + n]])
                return "committed" if err == 0 else "EndTxn %d" % err
            except (OSError, ConnectionError) as e:      # a timeout: the outcome unknown
                hc.w("error", error=type(e).__name__, what=txn)
                return type(e).__name__

        # t0, all connected
        state["session"] = 1
        coord = ktxn.TConn(c.addr(L))
        p = cluster.until("InitProducerId", lambda: _init_or_none(coord, tid))
        got = {"t0": copy("c-t0", coord, coord, coord, src_leader, p, 0, 3)}
        assert got["t0"] == "committed", got

        def step():
            got["t1"] = copy("c-t1", coord, coord, coord, src_leader, p, 3, 3, step_timeout=3)
        cut_then_kill(c, L, step)
        coord.close()
        # the copier restarts: its coordinators moved with L's leaderships
        followers = [n for n in range(1, 4) if n != L]
        state["session"] = 2
        new_coord = cluster.until("the transaction coordinator", lambda: (lambda r: r.error == 0 and r.node in
                                  followers and r.node)(kraw.Conn(c.addr(followers[0])).find_coordinator(
                                      tid, ver=1, key_type=1)))
        coord = ktxn.TConn(c.addr(new_coord))
        p = cluster.until("InitProducerId at node %d" % new_coord, lambda: _init_or_none(coord, tid))
        gnode = cluster.until("the group coordinator", lambda: (lambda r: r.error == 0 and r.node in followers and
                              r.node)(kraw.Conn(c.addr(followers[0])).find_coordinator(group, ver=1, key_type=0)))
        with kraw.Conn(c.addr(gnode)) as gk:
            committed = cluster.until("the group's offset", lambda: (lambda o: o[1] == 0 and o[0].get(
                (src, 0)) and o[0][(src, 0)][2] == 0 and o[0][(src, 0)])(gk.offset_fetch(group, {src: [0]})))[0]
        out_leader = cluster.until("cout's new leader", lambda: leader_of(c.bootstrap, dst, followers))
        src_leader = cluster.until("cin's leader", lambda: leader_of(c.bootstrap, src, followers))
        conns = {n: ktxn.TConn(c.addr(n)) for n in {out_leader, gnode} - {new_coord}}
        conns[new_coord] = coord
        got["t2"] = copy("c-t2", coord, conns[gnode], conns[out_leader], src_leader, p, committed, 6 - committed)
        assert got["t2"] == "committed", got
        for k in conns.values():
            k.close()
        hc.close()

        def settled():
            """cout's leader now, once t2's committed copies are there
            (its high watermark and last stable offset catch up)."""
            n = leader_of(c.bootstrap, dst, followers)
            if not n:
                return None
            with ktxn.TConn(c.addr(n)) as k:
                f = k.fetch1(dst, 0, 0, ktxn.READ_COMMITTED)
            vs = {rec.value.decode() for bt in f.batches if not bt.control for rec in bt.records}
            return f.error == 0 and set(sent["c-t2"]) <= vs and n
        out_leader = cluster.until("t2's copies readable read_committed", settled)
        final_read(c.addr(src_leader), src, 0, out)
        seen = final_read(c.addr(out_leader), dst, 0, out)["read_committed"]
    final = [v for _, v in seen]
    by_t2 = [v for v in sent["c-t2"] if v in final]
    print("  copy-lost: t1 %s, the group's offset after the restart %d, t2's copies read %d" % (
        got["t1"], committed, len(by_t2)), flush=True)
    # both ways t2 copied 3-5 from the offset t0 committed
    assert committed == 3 and len(by_t2) == 3, (committed, by_t2, final)
    return len(by_t2) if got["t1"] == "committed" else 0


def _init_or_none(c, tid):
    """A transactional producer once its coordinator answers (it may still
    be loading its state); None meanwhile."""
    r = c.init_producer_id(tid, ktxn.MAX_TIMEOUT_MS)
    if r.error in COORDINATOR_LOADING + (ktxn.CONCURRENT_TRANSACTIONS,):
        return None
    assert r.error == 0 and r.pid >= 0, r
    p = ktxn.Producer.__new__(ktxn.Producer)
    p.c, p.txn_id, p.pid, p.epoch, p.seq = c, tid, r.pid, r.epoch, {}
    return p


def preferred(bootstrap, topic):
    """The first replica of partition 0's assignment (Metadata's order)."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=20)
    return md.topics[topic].partitions[0].replicas[0]


def leader_of(bootstrap, topic, among=None):
    """Partition 0's leader as Metadata says, if it is one of among (any
    node when None); else None."""
    m = cluster.partitions(bootstrap, topic)
    n = m[0][0] if m else -1
    return n if n > 0 and (among is None or n in among) else None


def scenario_divergent(_, out):
    """3 nodes, replication factor 3. v0 acknowledged by all; the followers
    cut off from L's Kafka port; L, the leader (the preferred replica),
    appends a batch of three (sent acks=all: not acknowledged, the
    followers cannot fetch) and is killed; the followers continue, one leads (N) and takes a batch of
    three at the same offsets, acknowledged and read back from N. L
    restarts: as N's follower it must cut its three (the epochs say where
    the logs part) and fetch N's. Then L is elected again (preferred
    election, sluicectl leader elect) and the partition read from it: the
    normal broker gives N's records where N gave them; the control
    (no-truncate) L's own, where other readers read N's."""
    topic = "div"
    h, r = Hist(out, "p"), Hist(out, "r")
    sluicectl = os.path.join(os.path.dirname(NORMAL), "sluicectl")
    with cluster.Cluster(3, sets=CLUSTER_SETS, netns=True) as c:
        cluster.create_topic(c.bootstrap, topic, 1, 3)
        cluster.wait_isrs(c.bootstrap, topic, 3)
        L = cluster.until("partition 0's leader", lambda: leader_of(c.bootstrap, topic))
        assert preferred(c.bootstrap, topic) == L, "the first leader is the preferred replica"
        followers = [n for n in range(1, 4) if n != L]
        v0 = h.value()
        with ktxn.TConn(c.addr(L)) as k:
            h.w("send", value=v0, key=None, topic=topic, partition=0, txn=None)
            res = produce_ok(k, topic, [v0])
            h.w("ack", value=v0, topic=topic, partition=0, offset=res.base)
            xs = [h.value() for _ in range(3)]

            def step():
                for x in xs:
                    h.w("send", value=x, key=None, topic=topic, partition=0, txn=None)
                res = produce_timeout(k, topic, ktxn.plain([x.encode() for x in xs]), 1000)
                assert res.error != 0, "acks=all with the followers cut off: %r" % res
                for x in xs:
                    h.w("fail", value=x, error=str(res.error), definite=False)
            cut_then_kill(c, L, step)
        ys = [h.value() for _ in range(3)]
        for y in ys:
            h.w("send", value=y, key=None, topic=topic, partition=0, txn=None)
        N, res = on_leader(c, topic, followers, "a new leader takes a batch",
                           lambda n: produce_once(c.addr(n), topic, ys))
        for i, y in enumerate(ys):
            h.w("ack", value=y, topic=topic, partition=0, offset=res.base + i)
        with ktxn.TConn(c.addr(N)) as k:
            f = k.fetch1(topic, 0, 0, ktxn.READ_UNCOMMITTED)
        assert f.error == 0, f
        before = {}
        for bt in f.batches:
            for rec in bt.records:
                before[rec.offset] = rec.value.decode()
                r.w("read", value=rec.value.decode(), key=None, topic=topic, partition=0, offset=rec.offset,
                    reader="r", isolation="read_uncommitted", session=1)
        r.close()
        assert [before.get(res.base + i) for i in range(3)] == ys, before
        c.restart(L)
        cluster.wait_isrs(c.bootstrap, topic, 3)

        def elect():
            # asked of each node in turn: the active controller takes it
            # (the others answer NOT_CONTROLLER)
            for n in range(1, 4):
                subprocess.run([sluicectl, "-b", c.addr(n), "leader", "elect", "--topic", topic, "--partition",
                                "0"], stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
            return leader_of(c.bootstrap, topic, [L])
        cluster.until("node %d leads again (preferred election)" % L, elect)
        h.close()
        seen = on_leader(c, topic, [L], "a read from node %d" % L, lambda n: final_read(c.addr(n), topic, 0, out))[1]
    return sum(1 for o, v in seen["read_uncommitted"] if o in before and before[o] != v)


# ---- the tests ------------------------------------------------------------------

@test
def no_dedup_duplicates():
    both("no-dedup", "duplicated", scenario_resend)


@test
def no_seq_check_reorders():
    both("no-seq-check", "reordered", scenario_gap)


@test
def lso_ignored_shows_aborted():
    """read_committed served past the last stable offset: an aborted
    transaction's records read, and two open transactions reading each
    other's records (a cycle of wr edges)."""
    out = both("lso-ignored", ("aborted_visible", "cycles", "premature_read"), scenario_lso)
    ex = [d for d in out["control"][1]["details"]["cycles"] if d["kind"] == "wr"][0]
    assert sorted(ex["txns"]) == ["a-t0", "b-t0"], ex
    ex = out["control"][1]["details"]["premature_read"]
    assert [(d["reader"], d["value"]) for d in ex] == [("er", "e-0")], ex


@test
def no_crc_check_unexpected():
    """A produced batch damaged on its way: refused by its CRC, or, with
    the control, taken and read as a record nobody sent."""
    out = both("no-crc-check", "unexpected", scenario_corrupt)
    ex = out["control"][1]["details"]["unexpected"]
    assert [d["value"] for d in ex] == ["q-0"], ex


@test
def next_batch_skips():
    """A read from inside a batch (a member's committed offset): it must
    start with that batch; the control's next batch skips the records
    between the member's start and it."""
    out = both("next-batch", "skipped", scenario_start_skip, settings={"group.initial.rebalance.delay.ms": 0})
    ex = out["control"][1]["details"]["skipped"]
    assert [(d["reader"], d["offsets"], d["between"]) for d in ex] == [("r", [2, 3, 4], [2, 5])], ex


@test
def replay_first_wins_commits_backwards():
    """__consumer_offsets read back after a restart: a key's last commit
    wins; with the control its first does, and the next member commits
    behind the last owner."""
    out = both("replay-first-wins", "commit_backwards", scenario_replay, single=False)
    ex = out["control"][1]["details"]["commit_backwards"]
    assert [(d["client"], d["offset"], d["after"]) for d in ex] == [("b", 2, 3)], ex


@test
def no_generation_check_stale_commit():
    both("no-generation-check", "stale_commit", scenario_stale_commit,
         settings={"group.initial.rebalance.delay.ms": 0})


@test
def end_out_of_range_resets():
    """A consumer's fetch at the log end answered OFFSET_OUT_OF_RANGE: a
    member with auto.offset.reset earliest reads its assignment again from
    the log start (nonmonotonic), which the checker must not take for
    librdkafka's stale offset reset."""
    out = both("end-out-of-range", "nonmonotonic", scenario_end_reset,
               settings={"group.initial.rebalance.delay.ms": 0})
    assert out["control"][1][checker.STALE_RESET] == 0, out["control"][1]
    ex = out["control"][1]["details"]["nonmonotonic"][0]
    assert (ex["reader"], ex["offset"], ex["after"]) == ("r", 0, 4), ex


@test
def ack_before_isr_loses():
    need_netns()
    both("ack-before-isr", "lost", scenario_ack_lost, single=False)


@test
def no_truncate_diverges():
    need_netns()
    both("no-truncate", "divergent", scenario_divergent, single=False)


@test
def unanswered_marker_taken_partial_txn():
    need_netns()
    both("unanswered-marker-taken", "partial_txn", scenario_partial, single=False)


@test
def ack_before_isr_copy_mismatch():
    """acks=all at the leader's own append, for the coordinators' writes
    too: a copier transaction told committed and lost whole with its
    leader, its input copied again by the next."""
    need_netns()
    both("ack-before-isr", "copy_mismatch", scenario_copy_lost, single=False)


@test
def unknown_control_refused():
    """An unknown name: the control broker refuses to start (exit 2) and
    names the known ones."""
    d = temp_dir("sluice-ctl-unknown-")
    try:
        p = subprocess.run([CONTROL, "--data-dir", os.path.join(d, "data"), "--listen",
                            "127.0.0.1:%d" % harness.free_port()], env=dict(os.environ, SLUICE_CONTROL="no-such"),
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=harness.HANG_GUARD)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert p.returncode == 2, p
    assert b"no-dedup" in p.stderr and b"ack-before-isr" in p.stderr, p.stderr


@test
def normal_build_has_no_controls():
    """The broker holds none of the control code: no sluice_control symbol,
    none of the control build's strings (the control broker has both)."""
    for binary, want in ((NORMAL, False), (CONTROL, True)):
        syms = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
        with open(binary, "rb") as f:
            data = f.read()
        has = ("sluice_control" in syms, b"CONTROL BUILD" in data, b"no-generation-check" in data)
        assert has == (want,) * 3, (binary, has)


if __name__ == "__main__":
    main("controls")
