#!/usr/bin/python3
"""The checker (tools/sluicefault/checker.py) on synthetic histories: each
anomaly class reported with its count from a history that has exactly that
damage, and clean histories, the tricky ones included (an indefinite
failure that landed, a commit by the new owner after a rebalance, aborted
transactions and transaction markers leaving gaps, a transaction of unknown
outcome, a copier), reported clean. No broker; well under a second."""

import io
import os
import shutil
import sys
import tempfile
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

from harness import main, test  # noqa: E402
from sluicefault import checker, history  # noqa: E402

RC, RU = "read_committed", "read_uncommitted"


class H:
    """A synthetic history: lines with increasing "t", written to one file
    per client by check()."""

    def __init__(self):
        self.lines = []
        self.t = 1_000_000_000

    def add(self, client, type, **kw):
        self.t += 10_000_000
        line = dict(t=self.t, client=client, type=type)
        line.update(kw)
        self.lines.append(line)
        return line

    def produce(self, value, topic, part, offset, txn=None, ack=True, key="k", chosen=True):
        """chosen=False: sent to the partitioner's choice (partition null)."""
        client = value.rsplit("-", 1)[0]
        self.add(client, "send", value=value, key=key, topic=topic, partition=part if chosen else None, txn=txn)
        if ack:
            self.add(client, "ack", value=value, topic=topic, partition=part, offset=offset)

    def read(self, reader, iso, session, topic, part, offset, value):
        self.add(reader, "read", value=value, key="k", topic=topic, partition=part, offset=offset, reader=reader,
                 isolation=iso, session=session)

    def final(self, topic, part, recs, end, iso=(RU, RC)):
        """The final read of one partition: recs [(offset, value)]."""
        for i in iso:
            name = "final-rc" if i == RC else "final-ru"
            for o, v in recs:
                self.read(name, i, 1, topic, part, o, v)
            self.add(name, "final", topic=topic, partition=part, isolation=i, end_offset=end)

    def check(self):
        d = tempfile.mkdtemp(prefix="sluicef-checker-")
        try:
            ws = {}
            for line in self.lines:
                c = line["client"]
                if c not in ws:
                    ws[c] = open(os.path.join(d, c + ".jsonl"), "w")
                ws[c].write(__import__("json").dumps(line) + "\n")
            for f in ws.values():
                f.close()
            return checker.check([d])
        finally:
            shutil.rmtree(d)


def nonzero(res):
    return {a: res[a] for a in checker.ANOMALIES if res[a]}


def queue():
    """Clean: two producers, one reader of both partitions, the final read."""
    h = H()
    for i in range(5):
        h.produce("p1-%d" % i, "t", 0, i)
    for i in range(3):
        h.produce("p2-%d" % i, "t", 1, i)
    h.add("r", "assign", partitions=[["t", 0], ["t", 1]], generation=None, member="r", session=1)
    for i in range(5):
        h.read("r", RU, 1, "t", 0, i, "p1-%d" % i)
    for i in range(3):
        h.read("r", RU, 1, "t", 1, i, "p2-%d" % i)
    return h


def queue_final(h, p0=None, p1=None):
    h.final("t", 0, p0 if p0 is not None else [(i, "p1-%d" % i) for i in range(5)], 5)
    h.final("t", 1, p1 if p1 is not None else [(i, "p2-%d" % i) for i in range(3)], 3)
    return h


@test
def clean_queue():
    res = queue_final(queue()).check()
    assert nonzero(res) == {}, res
    assert (res["sent"], res["acked"], res["read"], res["read_final"]) == (8, 8, 8, 16), res


@test
def clean_indefinite_failures():
    """A timed-out send that landed (read and in the final log) and one that
    did not: neither lost nor unexpected."""
    h = queue()
    h.add("p1", "send", value="p1-5", key="k", topic="t", partition=0, txn=None)
    h.add("p1", "fail", value="p1-5", error="_MSG_TIMED_OUT", definite=False)
    h.add("p1", "send", value="p1-6", key="k", topic="t", partition=0, txn=None)
    h.add("p1", "fail", value="p1-6", error="_MSG_TIMED_OUT", definite=False)
    h.read("r", RU, 1, "t", 0, 5, "p1-5")
    res = queue_final(h, p0=[(i, "p1-%d" % i) for i in range(6)]).check()
    assert nonzero(res) == {}, res


def group_base(h):
    for i in range(8):
        h.produce("p1-%d" % i, "t", 0, i)
    h.add("g1", "assign", partitions=[["t", 0]], generation=1, member="m1", session=1, group="G")


@test
def clean_rebalance_then_commit_by_new_owner():
    """g1 commits 3 and 5 and is revoked; g2 gets the partition in
    generation 2, starts from 5 and commits 5 and 8; g1's commit after its
    revoke was refused (not ok): nothing to report."""
    h = H()
    group_base(h)
    h.add("g1", "commit", partitions=[["t", 0, 3]], generation=1, member="m1", ok=True, error=None, group="G")
    h.add("g1", "commit", partitions=[["t", 0, 5]], generation=1, member="m1", ok=True, error=None, group="G")
    h.add("g1", "revoke", partitions=[["t", 0]], generation=1, member="m1", session=1, group="G")
    h.add("g2", "assign", partitions=[["t", 0]], generation=2, member="m2", session=1, group="G")
    h.add("g1", "commit", partitions=[["t", 0, 2]], generation=1, member="m1", ok=False,
          error="ILLEGAL_GENERATION", group="G")
    h.add("g2", "commit", partitions=[["t", 0, 5]], generation=2, member="m2", ok=True, error=None, group="G")
    h.add("g2", "commit", partitions=[["t", 0, 8]], generation=2, member="m2", ok=True, error=None, group="G")
    h.final("t", 0, [(i, "p1-%d" % i) for i in range(8)], 8)
    res = h.check()
    assert nonzero(res) == {}, res


@test
def clean_generation_restarts_after_coordinator_loss():
    """A new coordinator that did not keep the group starts it again at
    generation 1: a commit in the new generation 1 is not stale."""
    h = H()
    group_base(h)
    h.add("g1", "revoke", partitions=[["t", 0]], generation=1, member="m1", session=1, group="G")
    h.add("g1", "assign", partitions=[["t", 0]], generation=2, member="m1", session=2, group="G")
    h.add("g1", "commit", partitions=[["t", 0, 3]], generation=2, member="m1", ok=True, error=None, group="G")
    h.add("g1", "commit", partitions=[["t", 0, 4]], generation=2, member="m1", ok=False,
          error="UNKNOWN_MEMBER_ID", group="G")
    h.add("g1", "revoke", partitions=[["t", 0]], generation=None, member="", session=2, group="G")
    h.add("g1", "assign", partitions=[["t", 0]], generation=1, member="m9", session=3, group="G")
    h.add("g1", "commit", partitions=[["t", 0, 5]], generation=1, member="m9", ok=True, error=None, group="G")
    h.final("t", 0, [(i, "p1-%d" % i) for i in range(8)], 8)
    res = h.check()
    assert nonzero(res) == {}, res


def txn_history(h, rc_reads=True):
    """x1: t0 committed at 0,1 (its marker at 2), t1 aborted at 3,4 (marker
    5), t2 committed at 6,7 (marker 8), t3 of unknown outcome at 9. The
    readers see what read_committed and read_uncommitted see."""
    h.add("x1", "txn_begin", txn="x1-t0")
    h.produce("x1-0", "t", 0, 0, txn="x1-t0")
    h.produce("x1-1", "t", 0, 1, txn="x1-t0")
    h.add("x1", "txn_commit", txn="x1-t0", ok=True, error=None)
    h.add("x1", "txn_begin", txn="x1-t1")
    h.produce("x1-2", "t", 0, 3, txn="x1-t1")
    h.produce("x1-3", "t", 0, 4, txn="x1-t1")
    h.add("x1", "txn_abort", txn="x1-t1", ok=True, error=None)
    h.add("x1", "txn_begin", txn="x1-t2")
    h.produce("x1-4", "t", 0, 6, txn="x1-t2")
    h.produce("x1-5", "t", 0, 7, txn="x1-t2")
    h.add("x1", "txn_commit", txn="x1-t2", ok=False, error="_TIMED_OUT")
    h.add("x1", "txn_commit", txn="x1-t2", ok=True, error=None)
    h.add("x1", "txn_begin", txn="x1-t3")
    h.produce("x1-6", "t", 0, 9, txn="x1-t3")
    h.add("x1", "txn_commit", txn="x1-t3", ok=False, error="_TIMED_OUT")
    ru = [(0, "x1-0"), (1, "x1-1"), (3, "x1-2"), (4, "x1-3"), (6, "x1-4"), (7, "x1-5"), (9, "x1-6")]
    rc = [(0, "x1-0"), (1, "x1-1"), (6, "x1-4"), (7, "x1-5")]
    for o, v in ru:
        h.read("ru", RU, 1, "t", 0, o, v)
    if rc_reads:
        for o, v in rc:
            h.read("rc", RC, 1, "t", 0, o, v)
    return ru, rc


@test
def clean_transactions():
    """Aborted records and markers leave gaps in read_committed, markers
    leave gaps in read_uncommitted, a transaction of unknown outcome is not
    judged (here: past the last stable offset, in no read_committed read)."""
    h = H()
    ru, rc = txn_history(h)
    h.final("t", 0, ru, 10, iso=(RU,))
    h.final("t", 0, rc, 9, iso=(RC,))
    res = h.check()
    assert nonzero(res) == {}, res


def copier(h, copies):
    """Inputs i-0..i-3 (committed, partition 0, offsets 0..3); a copier
    transaction consumed to offset 4 and copied per `copies` {input: n}."""
    h.add("i", "txn_begin", txn="i-t0")
    for n in range(4):
        h.produce("i-%d" % n, "in", 0, n, txn="i-t0")
    h.add("i", "txn_commit", txn="i-t0", ok=True, error=None)
    h.add("c", "txn_begin", txn="c-t0")
    out, seq = [], 0
    for n in range(4):
        h.read("c", RC, 1, "in", 0, n, "i-%d" % n)
        for _ in range(copies.get("i-%d" % n, 1)):
            v = "c-%d" % seq
            h.add("c", "send", value=v, key="i-%d" % n, topic="out", partition=None, txn="c-t0", src="i-%d" % n)
            h.add("c", "ack", value=v, topic="out", partition=0, offset=seq)
            out.append((seq, v))
            seq += 1
    h.add("c", "txn_commit", txn="c-t0", ok=True, error=None, offsets=[["in", 0, 4]])
    h.final("in", 0, [(n, "i-%d" % n) for n in range(4)], 5)
    h.final("out", 0, out, seq + 1)
    return h


@test
def clean_copier():
    res = copier(H(), {}).check()
    assert nonzero(res) == {}, res


@test
def lost():
    res = queue_final(queue(), p0=[(i, "p1-%d" % i) for i in (0, 1, 2, 3)]).check()
    assert nonzero(res) == {"lost": 1}, res
    assert res["details"]["lost"][0]["value"] == "p1-4", res


@test
def duplicated():
    h = queue()
    res = queue_final(h, p0=[(i, "p1-%d" % i) for i in range(5)] + [(5, "p1-2")]).check()
    assert nonzero(res) == {"duplicated": 1}, res


def bumped(epochs, acked_at=None, pid=(7, 7), parts=(0, 0)):
    """p1-9 sent once, in the final log twice: at offset 5 of partition
    parts[0] (a batch of producer id pid[0], epoch epochs[0]) and offset 6
    of parts[1] (pid[1], epochs[1]); acknowledged at acked_at (None: its
    send failed indefinitely, a timeout). The run's final-batches lines
    give the headers."""
    h = queue()
    if acked_at is None:
        h.produce("p1-9", "t", 0, None, ack=False)
        h.add("p1", "fail", value="p1-9", error="_MSG_TIMED_OUT", definite=False)
    else:
        h.produce("p1-9", "t", 0, acked_at)
    p0 = [(i, "p1-%d" % i) for i in range(5)] + [(5, "p1-9")]
    p1 = [(i, "p2-%d" % i) for i in range(3)]
    if parts[1] == 0:
        p0.append((6, "p1-9"))
    else:
        p1.append((3, "p1-9"))
    h.final("t", 0, p0, len(p0))
    h.final("t", 1, p1, len(p1))
    for part, base, last, p_id, ep in ((0, 0, 4, 7, 0), (parts[0], 5, 5, pid[0], epochs[0]),
                                       (parts[1], 6 if parts[1] == 0 else 3, 6 if parts[1] == 0 else 3, pid[1],
                                        epochs[1]), (1, 0, 2, 8, 0)):
        h.lines.insert(0, dict(t=0, client="final-batches", type="batch", node=1, topic="t", partition=part,
                               base=base, last=last, producer_id=p_id, producer_epoch=ep, base_sequence=0))
    return h.check()


@test
def a_record_sent_again_under_a_new_producer_epoch_is_the_clients():
    """librdkafka's epoch bump: the same record in batches of one producer
    id, epochs 1 then 2, only the later copy acknowledged (or none):
    client-epoch-bump with its evidence, not duplicated. Each condition
    broken alone is a duplicate: one epoch (the broker took it twice), the
    earlier copy acknowledged, two producer ids, two partitions, the
    epochs the wrong way round, and no batch headers at all (a run
    without final-batches, a drill)."""
    for acked_at in (6, None):
        res = bumped((1, 2), acked_at)
        assert nonzero(res) == {} and res[checker.EPOCH_BUMP] == 1, (acked_at, res)
        ev = res["details"][checker.EPOCH_BUMP][0]
        assert ev["producer_id"] == 7 and ev["epochs"] == [1, 2] and ev["acked"] == (acked_at is not None), ev
        text = checker.table(res)
        assert "client-epoch-bump       1  (the client's: sent again under a new producer epoch; not counted " \
               "as duplicated) p1-9 at t[0]@5, t[0]@6, producer id 7 epochs 1/2" in text, text
    for why, kw in (("one epoch", dict(epochs=(2, 2), acked_at=6)),
                    ("the earlier copy acknowledged", dict(epochs=(1, 2), acked_at=5)),
                    ("two producer ids", dict(epochs=(1, 2), acked_at=6, pid=(7, 9))),
                    ("two partitions", dict(epochs=(1, 2), acked_at=None, parts=(0, 1))),
                    ("epochs the wrong way", dict(epochs=(2, 1), acked_at=6))):
        res = bumped(**kw)
        assert nonzero(res) == {"duplicated": 1} and res[checker.EPOCH_BUMP] == 0, (why, res)
    h = queue()
    h.produce("p1-9", "t", 0, 6)
    res = queue_final(h, p0=[(i, "p1-%d" % i) for i in range(5)] + [(5, "p1-9"), (6, "p1-9")]).check()
    assert nonzero(res) == {"duplicated": 1} and res[checker.EPOCH_BUMP] == 0, ("no headers", res)


@test
def reordered():
    h = H()
    for i, o in ((0, 0), (1, 2), (2, 1), (3, 3)):
        h.produce("p1-%d" % i, "t", 0, o)
    h.final("t", 0, [(0, "p1-0"), (1, "p1-2"), (2, "p1-1"), (3, "p1-3")], 4)
    res = h.check()
    assert nonzero(res) == {"reordered": 1}, res


def keyed(h, recs):
    """recs [(value, key, partition, offset[, chosen])] sent to the
    partitioner's choice (unless chosen), and the final logs of partitions
    0 and 1."""
    logs = {0: [], 1: []}
    for v, k, p, o, *chosen in recs:
        h.produce(v, "t", p, o, key=k, chosen=bool(chosen and chosen[0]))
        logs[p].append((o, v))
    for p in (0, 1):
        h.final("t", p, sorted(logs[p]), max([o + 1 for o, _ in logs[p]] or [0]))
    return h


@test
def clean_keys():
    """A key two producers send may interleave, and be in two partitions;
    a key one producer sends to partitions it chose has no order across
    them; a key of one producer through the partitioner keeps its order."""
    h = H()
    res = keyed(h, [("p1-0", "solo-chosen", 1, 0, True), ("p1-1", "solo-chosen", 0, 0, True),
                    ("p2-0", "shared", 0, 2), ("p3-0", "shared", 0, 1), ("p2-1", "shared", 1, 1),
                    ("p1-2", "solo", 0, 3), ("p1-3", "solo", 0, 4)]).check()
    assert nonzero(res) == {}, res


@test
def reordered_per_key():
    """A key one producer sends through the partitioner: a record in
    another partition than the key's earlier ones, and one below an
    earlier one (also out of its producer's order, counted once)."""
    h = H()
    res = keyed(h, [("p1-0", "solo", 0, 0), ("p1-1", "solo", 1, 0), ("p1-2", "solo", 0, 2),
                    ("p1-3", "solo", 0, 1)]).check()
    assert nonzero(res) == {"reordered": 2}, res
    assert sorted(d["value"] for d in res["details"]["reordered"]) == ["p1-1", "p1-3"], res


@test
def unexpected():
    """A value nobody sent, and one whose send failed definitely."""
    h = queue()
    h.add("p1", "send", value="p1-5", key="k", topic="t", partition=0, txn=None)
    h.add("p1", "fail", value="p1-5", error="_QUEUE_FULL", definite=True)
    h.read("r", RU, 1, "t", 0, 5, "p1-5")
    h.read("r", RU, 1, "t", 0, 6, "ghost-1")
    res = queue_final(h, p0=[(i, "p1-%d" % i) for i in range(5)] + [(5, "p1-5"), (6, "ghost-1")]).check()
    assert nonzero(res) == {"unexpected": 2}, res


@test
def divergent():
    """The reader saw a record at offset 4 that the final log does not have
    there (a send that timed out, later truncated away)."""
    h = H()
    for i in range(5):
        h.produce("p1-%d" % i, "t", 0, i)
    h.add("p1", "send", value="p1-5", key="k", topic="t", partition=0, txn=None)
    h.add("p1", "fail", value="p1-5", error="_MSG_TIMED_OUT", definite=False)
    for i in range(4):
        h.read("r", RU, 1, "t", 0, i, "p1-%d" % i)
    h.read("r", RU, 1, "t", 0, 4, "p1-5")
    h.final("t", 0, [(i, "p1-%d" % i) for i in range(5)], 5)
    res = h.check()
    assert nonzero(res) == {"divergent": 1}, res


@test
def nonmonotonic():
    h = queue()
    h.read("r", RU, 1, "t", 0, 2, "p1-2")
    res = queue_final(h).check()
    assert nonzero(res) == {"nonmonotonic": 1}, res


def stale_reset(reset="earliest", to=0, earlier=True, earlier_reads=0, reread_key="k", reread_value="p1-3",
                consumer=1, committed_first=False, again=False, start=6, z_revoke=True, commit_after=None,
                revoke_before_commit=False):
    """The pattern of librdkafka 2.0.2's stale offset reset (docs/fault-results.md,
    group/loss/5n): z is given t[0] (nothing committed) and reads nothing
    (its lookup of the earliest offset in flight); g is given it, reads 0-5,
    commits 6; z is given it again in a new generation, starts at the
    committed 6 (`start`), reads to 9, then `to`-9 again in the same assignment. The
    arguments break one condition each."""
    h = H()
    for i in range(10):
        h.produce("p1-%d" % i, "t", 0, i)
    grp = dict(group="G", auto_offset_reset=reset)
    if committed_first:
        h.add("g", "assign", partitions=[["t", 0]], generation=1, member="mg", session=1, consumer=1, **grp)
        h.add("g", "commit", partitions=[["t", 0, 0]], generation=1, member="mg", ok=True, error=None, group="G")
        h.add("g", "revoke", partitions=[["t", 0]], generation=1, member="mg", session=1, consumer=1, **grp)
    if earlier:
        h.add("z", "assign", partitions=[["t", 0]], generation=2, member="mz", session=1, consumer=1, **grp)
        for i in range(earlier_reads):
            h.read("z", RU, 1, "t", 0, i, "p1-%d" % i)
    h.add("g", "assign", partitions=[["t", 0]], generation=3, member="mg", session=2, consumer=1, **grp)
    for i in range(6):
        h.read("g", RU, 2, "t", 0, i, "p1-%d" % i)
    h.add("g", "commit", partitions=[["t", 0, 6]], generation=3, member="mg", ok=True, error=None, group="G")
    h.add("g", "revoke", partitions=[["t", 0]], generation=3, member="mg", session=2, consumer=1, **grp)
    if earlier and z_revoke:
        h.add("z", "revoke", partitions=[["t", 0]], generation=2, member="mz", session=1, consumer=1, lost=True,
              **grp)
    s = 2 if earlier else 1
    h.add("z", "assign", partitions=[["t", 0]], generation=4, member="mz2", session=s, consumer=consumer, **grp)
    for i in range(start, 10):
        h.read("z", RU, s, "t", 0, i, "p1-%d" % i)
    for i in range(to, 10):
        h.add("z", "read", value=reread_value if i == 3 else "p1-%d" % i, key=reread_key if i == 3 else "k",
              topic="t", partition=0,
              offset=i, reader="z", isolation=RU, session=s)
    if again:
        for i in range(0, 10):
            h.read("z", RU, s, "t", 0, i, "p1-%d" % i)
    if revoke_before_commit:
        h.add("z", "revoke", partitions=[["t", 0]], generation=4, member="mz2", session=s, consumer=consumer, **grp)
        h.add("z", "assign", partitions=[["t", 0]], generation=5, member="mz2", session=s + 1, consumer=consumer,
              **grp)
    if commit_after is not None:
        # z commits its position, which the reset moved back
        h.add("z", "commit", partitions=[["t", 0, commit_after]], generation=4 + revoke_before_commit,
              member="mz2", ok=True, error=None, group="G")
    h.final("t", 0, [(i, "p1-%d" % i) for i in range(10)], 10)
    return h.check()


@test
def client_stale_reset():
    """The exact pattern: client-stale-reset 1 with its evidence, nothing
    counted as nonmonotonic, the CLI exits 0 and its line says it."""
    res = stale_reset()
    assert nonzero(res) == {}, res
    assert res[checker.STALE_RESET] == 1, res
    ev = res["details"][checker.STALE_RESET][0]
    assert (ev["reader"], ev["topic"], ev["partition"], ev["after"], ev["offset"], ev["committed"],
            ev["earlier_session"], ev["reread"]) == ("z", "t", 0, 9, 0, 6, 1, 10), ev
    text = checker.table(res)
    assert "client-stale-reset      1  (the client's, not counted as nonmonotonic) z t[0] 9 -> 0 at +" in text, text
    assert "nonmonotonic            0" in text, text
    # a member whose history has no revoke line (a lost assignment that
    # no callback reported) is judged the same
    res = stale_reset(z_revoke=False)
    assert nonzero(res) == {} and res[checker.STALE_RESET] == 1, res


@test
def drill_report_names_client_stale_resets():
    """sluicectl drill's report (tools/sluicefault/drill.py) counts the
    client's stale offset resets and gives the checker's evidence; none,
    it says 0."""
    from sluicefault import drill
    import contextlib
    import io
    for res, want in ((stale_reset(), 1), (queue_final(queue()).check(), 0)):
        r = dict(scenario="group-leader-loss", seed=1, topic="sluice-drill-x", held=True, broken=[], victim=None,
                 replication_factor=3, topic_config={}, sent=res["sent"], acked=res["acked"], read=res["read"],
                 lost=0, duplicated=0, resume_mismatches=[], stale_commits=[], redelivered=0, redelivered_offsets=[],
                 unavailable_s=0.0, lag_normal=0, lag_max=0, converged_s=1.0, budget_s=60, rebalance_pauses_s=[],
                 errors={}, histories="DIR", anomalies={k: res[k] for k in drill.ANOMALIES}, details=res["details"],
                 client_stale_reset=res[drill.STALE_RESET], client_stale_reset_evidence=drill.stale_reset_text(res))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            drill.print_report(r)
        text = out.getvalue()
        row = [line for line in text.splitlines() if line.startswith("client's stale offset resets")]
        assert len(row) == 1 and row[0].split()[-2:] == [str(want), "counted"], text
        assert ("client-stale-reset 1 (the client's, not counted as nonmonotonic) z t[0] 9 -> 0" in text) == \
            bool(want), text


@test
def drill_report_names_records_the_client_sent_again():
    """sluicectl drill's report counts the records the batch headers show
    the client sent again under a new producer epoch, with the checker's
    evidence; none, it says 0."""
    from sluicefault import drill
    import contextlib
    import io
    for res, want in ((bumped((1, 2), 6), 1), (queue_final(queue()).check(), 0)):
        r = dict(scenario="leader-loss", seed=1, topic="sluice-drill-x", held=True, broken=[], victim=None,
                 replication_factor=3, topic_config={}, sent=res["sent"], acked=res["acked"], read=res["read"],
                 lost=0, duplicated=res["duplicated"], resume_mismatches=[], stale_commits=[], redelivered=0,
                 redelivered_offsets=[], unavailable_s=0.0, lag_normal=0, lag_max=0, converged_s=1.0, budget_s=60,
                 rebalance_pauses_s=[], errors={}, histories="DIR", anomalies={k: res[k] for k in drill.ANOMALIES},
                 details=res["details"], client_epoch_bump=res[drill.EPOCH_BUMP],
                 client_epoch_bump_evidence=drill.epoch_bump_text(res))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            drill.print_report(r)
        text = out.getvalue()
        row = [line for line in text.splitlines() if line.startswith("records the client sent again")]
        assert len(row) == 1 and row[0].split()[-2:] == [str(want), "counted"], text
        dup = [line for line in text.splitlines() if line.startswith("records duplicated in the log")]
        assert dup[0].split()[-2:] == ["0", "0"], text
        assert ("client-epoch-bump 1 (the client's: sent again under a new producer epoch" in text) == bool(want), text


@test
def commit_behind_after_a_client_stale_reset():
    """z commits 4 (behind g's 6) in the assignment where librdkafka's
    stale reset moved its position back: the client's doing, written with
    the reset's evidence, not commit_backwards. Without the reset (its
    consumer's auto.offset.reset latest: a plain nonmonotonic jump) or in
    the member's next assignment, the same commit is commit_backwards."""
    res = stale_reset(commit_after=4)
    assert nonzero(res) == {} and res[checker.STALE_RESET] == 1, res
    ev = [e for e in res["details"][checker.STALE_RESET] if "commit" in e]
    assert [(e["reader"], e["commit"], e["after"]) for e in ev] == [("z", 4, 6)], res
    assert "z t[0] then committed 4, behind 6" in checker.table(res), checker.table(res)
    res = stale_reset(commit_after=4, reset="latest")
    assert nonzero(res) == {"nonmonotonic": 1, "commit_backwards": 1}, res
    res = stale_reset(commit_after=4, revoke_before_commit=True)
    assert res[checker.STALE_RESET] == 1 and res["commit_backwards"] == 1, res


@test
def client_stale_reset_conditions():
    """Each condition broken alone: a nonmonotonic read, no client-stale-reset."""
    for why, kw in (("a jump to a later offset than the earliest", dict(to=1)),
                    ("no assignment of the partition before", dict(earlier=False)),
                    ("a record re-read with another key", dict(reread_key="other")),
                    ("auto.offset.reset latest", dict(reset="latest")),
                    ("the new assignment started below the committed offset", dict(start=5)),
                    ("another Consumer object than the earlier assignment's", dict(consumer=2)),
                    ("the earlier assignment read the partition", dict(earlier_reads=2)),
                    ("an offset committed before the earlier assignment", dict(committed_first=True))):
        res = stale_reset(**kw)
        assert res["nonmonotonic"] == 1 and res[checker.STALE_RESET] == 0, (why, res)
        assert nonzero(res) == {"nonmonotonic": 1}, (why, res)
    # a second jump back in the same assignment is not the reset's
    res = stale_reset(again=True)
    assert (res["nonmonotonic"], res[checker.STALE_RESET]) == (1, 1), res


@test
def client_stale_reset_divergent():
    """A record re-read after the jump with another value than before (a
    value sent to another offset): the jump is nonmonotonic, and the offset
    divergent and the value duplicated."""
    res = stale_reset(reread_value="p1-9")
    assert (res["nonmonotonic"], res[checker.STALE_RESET]) == (1, 0), res
    assert nonzero(res) == {"nonmonotonic": 1, "divergent": 1, "duplicated": 1}, res


@test
def client_stale_reset_column():
    """The runner's table (tests/fault/run.py) has the column beside
    nonmonotonic, and a row whose only count is client-stale-reset is no
    anomaly (smoke.sh and make fault pass), one with a nonmonotonic read is."""
    sys.path.insert(0, HERE)
    import run
    cols = run.table_header().splitlines()[0].split(" | ")
    assert cols[cols.index("nonmonotonic") + 1] == checker.STALE_RESET, cols
    row = dict(scenario="group/loss/5n", seed=1, nodes=5, command="c", sent=1, acked=1, read=1)
    row.update(stale_reset())
    assert run.anomalies(row) == 0, row
    cells = run.table_row(row).split(" | ")
    assert cells[cols.index(checker.STALE_RESET)] == "1", (cols, cells)
    row.update(stale_reset(to=1))
    assert run.anomalies(row) == 1 and run.table_row(row).split(" | ")[cols.index(checker.STALE_RESET)] == "0", row


@test
def skipped():
    h = H()
    for i in range(5):
        h.produce("p1-%d" % i, "t", 0, i)
    for i in (0, 1, 3, 4):
        h.read("r", RU, 1, "t", 0, i, "p1-%d" % i)
    h.read("r", RU, 2, "t", 0, 0, "p1-0")        # a new session may start anywhere
    h.final("t", 0, [(i, "p1-%d" % i) for i in range(5)], 5)
    res = h.check()
    assert nonzero(res) == {"skipped": 1}, res
    assert res["details"]["skipped"][0]["offsets"] == [2], res


@test
def skipped_from_an_assignments_start():
    """An assign line's start (the committed offset the member fetched):
    its first read after it must be the first record of the log at or past
    the start. Records at 0-2 and 4-6 (3: a marker). Session 1 starts at 2
    and reads 4 first (2 skipped); session 2 starts at 1 and reads 1; session
    3 starts at 3 and reads 4, the log's next record: nothing skipped."""
    h = H()
    offs = (0, 1, 2, 4, 5, 6)
    for i, o in enumerate(offs):
        h.produce("p1-%d" % i, "t", 0, o)
    for sess, start in ((1, 2), (2, 1), (3, 3)):
        h.add("r", "assign", partitions=[["t", 0]], generation=sess, member="m", session=sess, group="G",
              start=[["t", 0, start]])
        for i, o in enumerate(offs):
            if o >= (4 if sess == 1 else start):
                h.read("r", RU, sess, "t", 0, o, "p1-%d" % i)
    h.final("t", 0, [(o, "p1-%d" % i) for i, o in enumerate(offs)], 7)
    res = h.check()
    assert nonzero(res) == {"skipped": 1}, res
    assert [(d["offsets"], d["between"], d["session"]) for d in res["details"]["skipped"]] == [([2], [2, 4], 1)], res
    # a member that read 1 and 2 itself in an earlier assignment and
    # starts its next at 1 but reads from 4 (its client went on from its own
    # position, as librdkafka did for the zombie of group/kill-leader/5n):
    # nothing skipped, nobody else owned them meanwhile
    h = H()
    for i, o in enumerate(offs):
        h.produce("p1-%d" % i, "t", 0, o)
    h.add("r", "assign", partitions=[["t", 0]], generation=1, member="m", session=1, group="G", start=[])
    for i, o in enumerate(offs[:3]):
        h.read("r", RU, 1, "t", 0, o, "p1-%d" % i)
    h.add("r", "revoke", partitions=[["t", 0]], generation=1, member="m", session=1, group="G")
    h.add("r", "assign", partitions=[["t", 0]], generation=2, member="m", session=2, group="G",
          start=[["t", 0, 1]])
    for i, o in list(enumerate(offs))[3:]:
        h.read("r", RU, 2, "t", 0, o, "p1-%d" % i)
    h.final("t", 0, [(o, "p1-%d" % i) for i, o in enumerate(offs)], 7)
    res = h.check()
    assert nonzero(res) == {}, res


@test
def stale_commit():
    """g1 commits (ok) after its revoke; g3 commits (ok) with generation 1
    after g2 was assigned in generation 2, without having seen a revoke."""
    h = H()
    group_base(h)
    h.add("g3", "assign", partitions=[["t", 1]], generation=1, member="m3", session=1, group="G")
    h.add("g1", "commit", partitions=[["t", 0, 3]], generation=1, member="m1", ok=True, error=None, group="G")
    h.add("g1", "revoke", partitions=[["t", 0]], generation=1, member="m1", session=1, group="G")
    h.add("g2", "assign", partitions=[["t", 0]], generation=2, member="m2", session=1, group="G")
    h.add("g1", "commit", partitions=[["t", 0, 4]], generation=1, member="m1", ok=True, error=None, group="G")
    h.add("g3", "commit", partitions=[["t", 1, 0]], generation=1, member="m3", ok=True, error=None, group="G")
    h.final("t", 0, [(i, "p1-%d" % i) for i in range(8)], 8)
    res = h.check()
    assert nonzero(res) == {"stale_commit": 2}, res


@test
def stale_commit_of_a_zombie():
    """g1 was dropped from the group without knowing it (no revoke yet); g2
    got the partition; g1's later ok commit (generation -1, outside the
    group's generations) is stale. A zombie's older assignment does not
    make the new owner's commits stale."""
    h = H()
    group_base(h)
    h.add("g2", "assign", partitions=[["t", 0]], generation=2, member="m2", session=1, group="G")
    h.add("g2", "commit", partitions=[["t", 0, 3]], generation=2, member="m2", ok=True, error=None, group="G")
    h.add("g1", "commit", partitions=[["t", 0, 4]], generation=-1, member="", ok=True, error=None, group="G")
    h.final("t", 0, [(i, "p1-%d" % i) for i in range(8)], 8)
    res = h.check()
    assert nonzero(res) == {"stale_commit": 1}, res
    assert res["details"]["stale_commit"][0]["client"] == "g1", res


@test
def commit_backwards():
    h = H()
    group_base(h)
    h.add("g1", "commit", partitions=[["t", 0, 6]], generation=1, member="m1", ok=True, error=None, group="G")
    h.add("g1", "revoke", partitions=[["t", 0]], generation=1, member="m1", session=1, group="G")
    h.add("g2", "assign", partitions=[["t", 0]], generation=2, member="m2", session=1, group="G")
    h.add("g2", "commit", partitions=[["t", 0, 4]], generation=2, member="m2", ok=True, error=None, group="G")
    h.final("t", 0, [(i, "p1-%d" % i) for i in range(8)], 8)
    res = h.check()
    assert nonzero(res) == {"commit_backwards": 1}, res


@test
def aborted_visible():
    h = H()
    ru, rc = txn_history(h)
    h.read("rc", RC, 2, "t", 0, 4, "x1-3")   # an aborted record, in a later session
    h.final("t", 0, ru, 10, iso=(RU,))
    h.final("t", 0, rc, 9, iso=(RC,))
    res = h.check()
    assert nonzero(res) == {"aborted_visible": 1}, res


@test
def intermediate_read_of_a_transaction_of_unknown_outcome():
    """x1-t3 (unknown outcome) read read_committed: once while it is still
    open at the final read (offset 9, the read_committed end 9), once after
    the broker aborted it (below the end, not in the final log). The same
    read is clean when the final read_committed log has the record (it
    committed)."""
    h = H()
    ru, rc = txn_history(h)
    h.read("rc", RC, 1, "t", 0, 9, "x1-6")
    h.final("t", 0, ru, 10, iso=(RU,))
    h.final("t", 0, rc, 9, iso=(RC,))
    res = h.check()
    assert nonzero(res) == {"aborted_visible": 1}, res
    assert "still open" in res["details"]["aborted_visible"][0]["why"], res
    h = H()
    ru, rc = txn_history(h)
    h.produce("p1-0", "t", 0, 11)
    h.read("rc", RC, 1, "t", 0, 9, "x1-6")
    h.final("t", 0, ru + [(11, "p1-0")], 12, iso=(RU,))
    h.final("t", 0, rc + [(11, "p1-0")], 12, iso=(RC,))
    res = h.check()
    assert nonzero(res) == {"aborted_visible": 1}, res
    assert "not committed" in res["details"]["aborted_visible"][0]["why"], res
    h = H()
    ru, rc = txn_history(h)
    h.read("rc", RC, 1, "t", 0, 9, "x1-6")
    h.final("t", 0, ru, 11, iso=(RU,))
    h.final("t", 0, rc + [(9, "x1-6")], 11, iso=(RC,))
    res = h.check()
    assert nonzero(res) == {}, res


@test
def premature_read():
    """A read_committed read of a transaction's first record before its
    second was sent (so before its commit could be asked for)."""
    h = H()
    h.add("x1", "txn_begin", txn="x1-t0")
    h.produce("x1-0", "t", 0, 0, txn="x1-t0")
    h.read("rc", RC, 1, "t", 0, 0, "x1-0")
    h.produce("x1-1", "t", 0, 1, txn="x1-t0")
    h.add("x1", "txn_commit", txn="x1-t0", ok=True, error=None)
    h.read("rc", RC, 1, "t", 0, 1, "x1-1")
    h.final("t", 0, [(0, "x1-0"), (1, "x1-1")], 3)
    res = h.check()
    assert nonzero(res) == {"premature_read": 1}, res
    assert res["details"]["premature_read"][0]["value"] == "x1-0", res


@test
def partial_txn():
    """A committed transaction of which read_committed shows one record of
    two: partial, and the missing record lost."""
    h = H()
    ru, rc = txn_history(h, rc_reads=False)
    h.final("t", 0, ru, 10, iso=(RU,))
    h.final("t", 0, [r for r in rc if r[1] != "x1-5"], 9, iso=(RC,))
    res = h.check()
    assert nonzero(res) == {"partial_txn": 1, "lost": 1}, res


@test
def copier_not_exactly_once():
    res = copier(H(), {"i-1": 0, "i-2": 2}).check()
    assert nonzero(res) == {"lost": 1, "duplicated": 1}, res
    assert {d.get("why", "")[:5] for a in ("lost", "duplicated") for d in res["details"][a]} == {"input"}, res


def copier2(h, second=("i-2", "i-3"), outcome=True):
    """Inputs i-0..i-3 (committed, partition 0, offsets 0..3); copier
    transaction c-t0 consumes to 2 and copies i-0 and i-1... except that the
    copies of `second` are sent in c-t1, which consumes to 4. outcome False:
    c-t1's commit timed out (unknown outcome)."""
    h.add("i", "txn_begin", txn="i-t0")
    for n in range(4):
        h.produce("i-%d" % n, "in", 0, n, txn="i-t0")
    h.add("i", "txn_commit", txn="i-t0", ok=True, error=None)
    out, seq = [], 0
    for txn, upto, srcs in (("c-t0", 2, [s for s in ("i-0", "i-1", "i-2", "i-3") if s not in second]),
                            ("c-t1", 4, list(second))):
        h.add("c", "txn_begin", txn=txn)
        for src in srcs:
            h.read("c", RC, 1, "in", 0, int(src[2:]), src)
            v = "c-%d" % seq
            h.add("c", "send", value=v, key=src, topic="out", partition=None, txn=txn, src=src)
            h.add("c", "ack", value=v, topic="out", partition=0, offset=len(out) + (1 if txn == "c-t1" else 0))
            out.append((len(out) + (1 if txn == "c-t1" else 0), v))
            seq += 1
        ok = outcome or txn == "c-t0"
        h.add("c", "txn_commit", txn=txn, ok=ok, error=None if ok else "_TIMED_OUT", offsets=[["in", 0, upto]])
    h.final("in", 0, [(n, "i-%d" % n) for n in range(4)], 5)
    h.final("out", 0, out, len(out) + 2)
    return h


@test
def clean_copier_transactions():
    """Each input record's copy in the transaction that committed its
    offset; also when that transaction's commit timed out but its copies
    are in the final read_committed log (it committed)."""
    res = copier2(H()).check()
    assert nonzero(res) == {}, res
    res = copier2(H(), outcome=False).check()
    assert nonzero(res) == {}, res


@test
def copy_mismatch():
    """i-1's copy was sent in c-t1, but c-t0 committed i-1's offset (it
    consumed to 2): c-t0 committed having read a record it did not copy."""
    res = copier2(H(), second=("i-1", "i-2", "i-3")).check()
    assert nonzero(res) == {"copy_mismatch": 1}, res
    d = res["details"]["copy_mismatch"][0]
    assert (d["value"], d["consumed_in"], d["copied_in"]) == ("i-1", "c-t0", "c-t1"), res


@test
def figures_and_cli():
    """recovery_s from a nemesis stop to the next ack; the longest
    unavailability; a history cut short by a kill is read; the CLI exits 1
    on an anomaly and 0 when clean."""
    h = queue()
    h.add("runner", "nemesis", name="kill", phase="start", detail={})
    h.add("p1", "send", value="p1-5", key="k", topic="t", partition=0, txn=None)
    h.add("p1", "error", error="_TRANSPORT", what="x")
    h.add("runner", "nemesis", name="kill", phase="stop", detail={})
    h.add("p1", "ack", value="p1-5", topic="t", partition=0, offset=5)
    queue_final(h, p0=[(i, "p1-%d" % i) for i in range(6)])
    res = h.check()
    assert nonzero(res) == {}, res
    assert abs(res["recovery_s"] - 0.01) < 1e-6, res
    acks = [x["t"] for x in h.lines if x["client"] == "p1" and x["type"] == "ack"]
    assert res["longest_unavailable_s"] == round((acks[-1] - acks[-2]) / 1e9, 3), res
    assert res["unavailable_client"] == "p1", res
    d = tempfile.mkdtemp(prefix="sluicef-checker-")
    try:
        w = history.Writer(d, "p1")
        w.write("send", value="p1-0", key="k", topic="t", partition=0, txn=None)
        w.write("ack", value="p1-0", topic="t", partition=0, offset=0)
        w.close()
        w = history.Writer(d, "final-ru")
        w.write("final", topic="t", partition=0, isolation=RU, end_offset=0)
        w.close()
        with open(os.path.join(d, "p1.jsonl"), "a") as f:
            f.write('{"t": 1, "client": "p1", "ty')     # killed mid-line
        out = io.StringIO()
        with redirect_stdout(out):
            rc = checker.main([d])
        assert rc == 1 and "lost                    1" in out.getvalue(), out.getvalue()
        w = history.Writer(d, "final-ru")
        w.write("read", value="p1-0", key="k", topic="t", partition=0, offset=0, reader="final-ru",
                isolation=RU, session=1)
        w.close()
        with redirect_stdout(io.StringIO()):
            assert checker.main([d, "--json"]) == 0
    finally:
        shutil.rmtree(d)


def txns(h, specs):
    """Committed transactions in order: specs [(txn, [op])], an op
    ("w", topic, partition, offset) (the value "<client>-<n>", acked at
    that offset) or ("r", topic, partition, offset, value) (a read inside
    the transaction, read_committed)."""
    n = {}
    for txn, ops in specs:
        client = txn.split("-")[0]
        h.add(client, "txn_begin", txn=txn)
        for op in ops:
            if op[0] == "w":
                v = "%s-%d" % (client, n.get(client, 0))
                n[client] = n.get(client, 0) + 1
                h.produce(v, op[1], op[2], op[3], txn=txn)
            else:
                h.add(client, "read", value=op[4], key="k", topic=op[1], partition=op[2], offset=op[3],
                      reader=client, isolation=RC, session=1, txn=txn)
        h.add(client, "txn_commit", txn=txn, ok=True, error=None)
    return h.check()


def kinds(res):
    return {k: n for k, n in res["cycle_kinds"].items() if n}


@test
def cycle_g0():
    """Two transactions write partitions 0 and 1 in opposite orders: a
    write cycle (G0; a figure, not an anomaly: Kafka orders concurrent
    transactions per partition only). Clean: the same order in both."""
    res = txns(H(), [("a-t0", [("w", "t", 0, 0), ("w", "t", 1, 1)]), ("b-t0", [("w", "t", 0, 1), ("w", "t", 1, 0)])])
    assert kinds(res) == {"G0": 1} and nonzero(res) == {}, res
    ex = [d for d in res["details"]["cycles"] if d["kind"] == "G0"][0]
    assert sorted(ex["txns"]) == ["a-t0", "b-t0"] and {e["kind"] for e in ex["edges"]} == {"ww"}, ex
    assert {(e["src"], e["partition"], tuple(e["offsets"])) for e in ex["edges"]} == \
        {("a-t0", 0, (0, 1)), ("b-t0", 1, (0, 1))}, ex
    res = txns(H(), [("a-t0", [("w", "t", 0, 0), ("w", "t", 1, 0)]), ("b-t0", [("w", "t", 0, 1), ("w", "t", 1, 1)])])
    assert kinds(res) == {} and res["cycle_graph"] == {"txns": 2, "edges": 1}, res


@test
def cycle_g1c():
    """b read a's record in partition 0, yet b's record in partition 1 is
    before a's: a -wr-> b -ww-> a (G1c; a figure, its ww edge may be
    Kafka's order of concurrent transactions). Clean: b's record after
    a's."""
    res = txns(H(), [("a-t0", [("w", "t", 0, 0), ("w", "t", 1, 1)]),
                     ("b-t0", [("r", "t", 0, 0, "a-0"), ("w", "t", 1, 0)])])
    assert kinds(res) == {"G1c": 1} and nonzero(res) == {}, res
    ex = [d for d in res["details"]["cycles"] if d["kind"] == "G1c"][0]
    assert ex["kind"] == "G1c" and sorted((e["kind"], e["src"]) for e in ex["edges"]) == \
        [("wr", "a-t0"), ("ww", "b-t0")], ex
    wr = [e for e in ex["edges"] if e["kind"] == "wr"][0]
    assert (wr["partition"], wr["offset"], wr["value"]) == (0, 0, "a-0"), ex
    res = txns(H(), [("a-t0", [("w", "t", 0, 0), ("w", "t", 1, 0)]),
                     ("b-t0", [("r", "t", 0, 0, "a-0"), ("w", "t", 1, 1)])])
    assert kinds(res) == {} and nonzero(res) == {}, res


@test
def cycle_wr_only():
    """a and b each wrote a record and then read the other's (read
    committed, so before either committed): a -wr-> b -wr-> a, the cycle of
    wr edges alone that counts as an anomaly. Clean: b read a's record, a
    only z's."""
    z = [("z-t0", [("w", "t", 1, 0)])]
    h = H()
    for txn, w, r in (("a-t0", ("t", 0, 0), ("t", 1, 1, "b-0")), ("b-t0", ("t", 1, 1), ("t", 0, 0, "a-0"))):
        h.add(txn[0], "txn_begin", txn=txn)
        h.produce(txn[0] + "-0", w[0], w[1], w[2], txn=txn)
    for txn, w, r in (("a-t0", ("t", 0, 0), ("t", 1, 1, "b-0")), ("b-t0", ("t", 1, 1), ("t", 0, 0, "a-0"))):
        h.add(txn[0], "read", value=r[3], key="k", topic=r[0], partition=r[1], offset=r[2], reader=txn[0],
              isolation=RC, session=1, txn=txn)
    for txn in ("a-t0", "b-t0"):
        h.add(txn[0], "txn_commit", txn=txn, ok=True, error=None)
    res = h.check()
    assert nonzero(res) == {"cycles": 1}, res
    ex = [d for d in res["details"]["cycles"] if d["kind"] == "wr"][0]
    assert sorted((e["src"], e["dst"], e["partition"], e["value"]) for e in ex["edges"]) == \
        [("a-t0", "b-t0", 0, "a-0"), ("b-t0", "a-t0", 1, "b-0")], ex
    res = txns(H(), z + [("a-t0", [("w", "t", 0, 0), ("r", "t", 1, 0, "z-0")]),
                         ("b-t0", [("w", "t", 1, 1), ("r", "t", 0, 0, "a-0")])])
    assert nonzero(res) == {} and res["cycle_kinds"]["G1c"] == 0, res


@test
def cycle_g_single():
    """b read a's record in partition 0 but in partition 1 only z's, before
    a's: a -wr-> b -rw-> a (G-single, read skew; a figure: Kafka's
    read_committed is no snapshot across partitions). Clean: b read a's
    record in partition 1 too."""
    z = [("z-t0", [("w", "t", 1, 0)]), ("a-t0", [("w", "t", 0, 0), ("w", "t", 1, 1)])]
    res = txns(H(), z + [("b-t0", [("r", "t", 0, 0, "a-0"), ("r", "t", 1, 0, "z-0"), ("w", "o", 0, 0)])])
    assert kinds(res) == {"G-single": 1} and nonzero(res) == {}, res
    ex = [d for d in res["details"]["cycles"] if d["kind"] == "G-single"][0]
    rw = [e for e in ex["edges"] if e["kind"] == "rw"]
    assert len(rw) == 1 and (rw[0]["src"], rw[0]["dst"], rw[0]["read_to"], rw[0]["next"]) == \
        ("b-t0", "a-t0", 0, 1), ex
    res = txns(H(), z + [("b-t0", [("r", "t", 0, 0, "a-0"), ("r", "t", 1, 1, "a-1"), ("w", "o", 0, 0)])])
    assert kinds(res) == {} and nonzero(res) == {}, res


@test
def cycle_g2():
    """Write skew: a read partition 0 to z's record and wrote partition 1, b
    read partition 1 to z's record and wrote partition 0, neither saw the
    other: a -rw-> b -rw-> a (G2, a figure). Clean: b saw a's record."""
    z = [("z-t0", [("w", "t", 0, 0), ("w", "t", 1, 0)]),
         ("a-t0", [("r", "t", 0, 0, "z-0"), ("w", "t", 1, 1)])]
    res = txns(H(), z + [("b-t0", [("r", "t", 1, 0, "z-1"), ("w", "t", 0, 1)])])
    assert kinds(res) == {"G2": 1} and nonzero(res) == {}, res
    ex = [d for d in res["details"]["cycles"] if d["kind"] == "G2"][0]
    assert sorted(e["kind"] for e in ex["edges"]) == ["rw", "rw"], ex
    res = txns(H(), z + [("b-t0", [("r", "t", 1, 1, "a-0"), ("w", "t", 0, 1)])])
    assert kinds(res) == {} and nonzero(res) == {}, res


@test
def cycles_large():
    """3,000 transactions (past Python's recursion limit) in one long ww chain closed into a cycle: one
    G0, found without recursion."""
    h = H()
    specs = [("a-t%d" % i, [("w", "t", 0, i), ("w", "t", 1, i + 1 if i < 2999 else 0)]) for i in range(3000)]
    res = txns(h, specs)
    assert kinds(res) == {"G0": 1}, kinds(res)


if __name__ == "__main__":
    main("fault checker")
