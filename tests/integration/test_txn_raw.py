#!/usr/bin/python3
"""Transactions over raw sockets (kraw.py's Conn and encoders, classic
non-flexible versions: InitProducerId 1, AddPartitionsToTxn 0 and 1,
AddOffsetsToTxn 1, EndTxn 1, TxnOffsetCommit 1 and 2, Produce 7, Fetch 4 and
11, ListOffsets 2 and 3) against a real sluiced: the refusals Kafka gives for
bad transactional input, each with its exact error code, and what a
read_committed reader sees (LastStableOffset, AbortedTransactions, the
control markers, ListOffsets with isolation 1, transactional offsets).

Record batches are built by ktxn.py (magic 2, uncompressed, CRC-32C in pure
Python) and the fetched ones are parsed and their CRCs checked. Every test
starts its own broker."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, broker, main, test  # noqa: E402
import kraw  # noqa: E402
from ktxn import (ATTR_CONTROL, ATTR_TRANSACTIONAL, EARLIEST,  # noqa: E402
                  INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, INVALID_RECORD, INVALID_REQUEST,
                  INVALID_TRANSACTION_TIMEOUT, INVALID_TXN_STATE, MARKER_ABORT, MARKER_COMMIT, MAX_TIMEOUT_MS,
                  OPERATION_NOT_ATTEMPTED, OUT_OF_ORDER_SEQUENCE_NUMBER, READ_COMMITTED, READ_UNCOMMITTED,
                  Producer, TConn, batch, crc32c, data_offsets, init_pid, marker, markers, new_topic,
                  parse_batches, plain, read_varint, vals, varint)

SETTINGS = {"transaction.max.timeout.ms": MAX_TIMEOUT_MS, "group.initial.rebalance.delay.ms": 0}


# ---- InitProducerId -----------------------------------------------------------

@test
def init_producer_id_transactional():
    """InitProducerId with a new transactional id: a producer id and epoch 0;
    the same id again: the same producer id, epoch 1, then 2 (v0 and v1
    alike); another id and an idempotent producer (null id) get other
    producer ids, epoch 0; an empty transactional id is INVALID_REQUEST
    (42), as in Kafka."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        r0 = c.init_producer_id("tx-a")
        assert r0.error == 0 and r0.pid >= 0 and r0.epoch == 0, r0
        r1 = c.init_producer_id("tx-a")
        assert (r1.error, r1.pid, r1.epoch) == (0, r0.pid, 1), (r0, r1)
        r2 = c.init_producer_id("tx-a", ver=0)
        assert (r2.error, r2.pid, r2.epoch) == (0, r0.pid, 2), (r0, r2)
        o = c.init_producer_id("tx-b")
        assert o.error == 0 and o.epoch == 0 and o.pid not in (-1, r0.pid), (r0, o)
        i = c.init_producer_id(None)
        assert i.error == 0 and i.epoch == 0 and i.pid not in (-1, r0.pid, o.pid), (r0, o, i)
        e = c.init_producer_id("")
        assert e.error == INVALID_REQUEST, e
        # a new connection sees the same mapping
        with TConn(b.bootstrap) as c2:
            r3 = c2.init_producer_id("tx-a")
            assert (r3.error, r3.pid, r3.epoch) == (0, r0.pid, 3), (r0, r3)


@test
def init_producer_id_timeout():
    """InitProducerId with a transaction timeout above
    transaction.max.timeout.ms (60000 here), or not positive:
    INVALID_TRANSACTION_TIMEOUT (50), and the transactional id is not
    created (exactly 60000 then gives epoch 0)."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        for ms in (MAX_TIMEOUT_MS + 1, 900000, 2 ** 31 - 1, 0, -1):
            r = c.init_producer_id("tx-t", timeout_ms=ms)
            assert r.error == INVALID_TRANSACTION_TIMEOUT, (ms, r)
        r = c.init_producer_id("tx-t", timeout_ms=MAX_TIMEOUT_MS)
        assert r.error == 0 and r.pid >= 0 and r.epoch == 0, r
        r2 = c.init_producer_id("tx-t", timeout_ms=MAX_TIMEOUT_MS + 1)
        assert r2.error == INVALID_TRANSACTION_TIMEOUT, r2
        r3 = c.init_producer_id("tx-t", timeout_ms=1)
        assert (r3.error, r3.pid, r3.epoch) == (0, r.pid, 1), (r, r3)


# ---- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------

@test
def add_partitions_errors():
    """AddPartitionsToTxn (v0 and v1): a producer id that is not the
    transactional id's -> INVALID_PRODUCER_ID_MAPPING (49) for every
    partition; an unknown transactional id -> 49; an older or newer epoch
    -> INVALID_PRODUCER_EPOCH (47); an unknown topic or partition ->
    UNKNOWN_TOPIC_OR_PARTITION (3) for it and OPERATION_NOT_ATTEMPTED (55)
    for the others. None of these added anything: a transactional batch to
    those partitions is still INVALID_TXN_STATE (48). AddOffsetsToTxn with
    a wrong producer id / stale epoch: 49 / 47."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        new_topic(c, "tt", 2)
        init_pid(c, "tx-ap")
        p = Producer(c, "tx-ap")      # epoch 1: epoch 0 is now stale
        assert p.epoch == 1, p.epoch
        both = {"tt": [0, 1]}
        keys = [("tt", 0), ("tt", 1)]
        for ver in (0, 1):
            errs = c.add_partitions("tx-ap", p.pid + 1000, p.epoch, both, ver=ver)
            assert errs == {k: INVALID_PRODUCER_ID_MAPPING for k in keys}, (ver, errs)
            errs = c.add_partitions("tx-nosuch", p.pid, p.epoch, both, ver=ver)
            assert errs == {k: INVALID_PRODUCER_ID_MAPPING for k in keys}, (ver, errs)
            for epoch in (p.epoch - 1, p.epoch + 1):
                errs = c.add_partitions("tx-ap", p.pid, epoch, both, ver=ver)
                assert errs == {k: INVALID_PRODUCER_EPOCH for k in keys}, (ver, epoch, errs)
            errs = c.add_partitions("tx-ap", p.pid, p.epoch, {"tt": [0, 1], "nosuch": [0]}, ver=ver)
            assert errs == {("tt", 0): OPERATION_NOT_ATTEMPTED, ("tt", 1): OPERATION_NOT_ATTEMPTED,
                            ("nosuch", 0): kraw.UNKNOWN_TOPIC_OR_PARTITION}, (ver, errs)
            errs = c.add_partitions("tx-ap", p.pid, p.epoch, {"tt": [0, 7]}, ver=ver)
            assert errs == {("tt", 0): OPERATION_NOT_ATTEMPTED, ("tt", 7): kraw.UNKNOWN_TOPIC_OR_PARTITION}, (ver, errs)
        for part in (0, 1):
            r = p.produce("tt", part, [b"x"])
            assert r.error == INVALID_TXN_STATE, (part, r)
        assert c.add_offsets("tx-ap", p.pid + 1000, p.epoch, "grp") == INVALID_PRODUCER_ID_MAPPING
        assert c.add_offsets("tx-ap", p.pid, p.epoch - 1, "grp") == INVALID_PRODUCER_EPOCH
        # nothing was added: ending is INVALID_TXN_STATE, no transaction is open
        assert p.end(True) == INVALID_TXN_STATE
        # the right call works, and then only that partition takes batches
        p.add("tt", [0], ver=0)
        assert p.produce("tt", 0, [b"a", b"b"]).error == 0
        assert p.produce("tt", 1, [b"c"]).error == INVALID_TXN_STATE
        assert p.end(True) == 0
        assert c.latest("tt", 0, READ_COMMITTED) == 3   # 2 records and the marker
        assert c.latest("tt", 1, READ_COMMITTED) == 0


# ---- Produce --------------------------------------------------------------------

@test
def produce_transactional_needs_add():
    """A transactional batch (attributes bit 4, producer id and epoch from
    InitProducerId, base sequence 0) to a partition not added to the
    transaction: INVALID_TXN_STATE (48); after AddPartitionsToTxn it is
    accepted at offset 0 (and the next batch at 2); another partition of
    the topic, not added: 48. After EndTxn the partition is out of the
    transaction again: 48 until it is added to the next one."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        new_topic(c, "tp", 2)
        p = Producer(c, "tx-p")
        assert p.epoch == 0
        r = p.produce("tp", 0, [b"a", b"b"])
        assert r.error == INVALID_TXN_STATE, r
        p.add("tp", [0])
        r = p.produce("tp", 0, [b"a", b"b"])
        assert (r.error, r.base) == (0, 0), r
        r = p.produce("tp", 0, [b"c"])
        assert (r.error, r.base) == (0, 2), r
        r = p.produce("tp", 1, [b"z"])
        assert r.error == INVALID_TXN_STATE, r
        assert p.end(True) == 0
        r = p.produce("tp", 0, [b"d"])
        assert r.error == INVALID_TXN_STATE, r
        p.add("tp", [0, 1])
        r = p.produce("tp", 0, [b"d"])
        assert (r.error, r.base) == (0, 4), r          # 0..2 data, 3 the marker
        r = p.produce("tp", 1, [b"e"])
        assert (r.error, r.base) == (0, 0), r
        assert p.end(True) == 0
        f = c.fetch1("tp", 0, 0, READ_COMMITTED)
        assert data_offsets(f.batches) == [0, 1, 2, 4], data_offsets(f.batches)
        assert [m[:2] for m in markers(f.batches)] == [(3, MARKER_COMMIT), (5, MARKER_COMMIT)], markers(f.batches)
        assert all(bt.transactional for bt in f.batches), f.batches


@test
def produce_control_bit_refused():
    """A batch with the control bit (bit 5) from a client: INVALID_RECORD
    (87), whether it also has the transactional bit (a forged COMMIT marker
    from a producer whose transaction holds the partition) or not (and no
    producer id); the log does not move, and the transaction can still be
    aborted normally."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        new_topic(c, "tc")
        p = Producer(c, "tx-c")
        p.add("tc", [0])
        assert p.produce("tc", 0, [b"a"]).error == 0
        r = c.produce("tc", 0, marker(MARKER_COMMIT, p.pid, p.epoch), txn_id="tx-c")
        assert r.error == INVALID_RECORD, r
        r = c.produce("tc", 0, batch([b"x"], attributes=ATTR_CONTROL))
        assert r.error == INVALID_RECORD, r
        r = c.produce("tc", 0, batch([b"x"], pid=p.pid, epoch=p.epoch, seq=1,
                                     attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL), txn_id="tx-c")
        assert r.error == INVALID_RECORD, r
        assert c.latest("tc", 0, READ_UNCOMMITTED) == 1
        assert c.latest("tc", 0, READ_COMMITTED) == 0
        assert p.produce("tc", 0, [b"b"]).error == 0   # sequence 1 was never taken
        assert p.end(False) == 0
        f = c.fetch1("tc", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso, f.aborted) == (3, 3, [(p.pid, 0)]), f
        assert markers(f.batches) == [(2, MARKER_ABORT, p.pid, p.epoch)], markers(f.batches)


@test
def produce_idempotent_sequence_errors():
    """An idempotent producer (InitProducerId with a null transactional id):
    base sequence -1 (or -5) with a producer id: INVALID_RECORD (87); 0 is
    taken at offset 0; then 5 when 2 is due (a gap):
    OUT_OF_ORDER_SEQUENCE_NUMBER (45); 2 is taken at offset 2. A
    transactional producer has the same checks within its transaction."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        new_topic(c, "ti")
        p = Producer(c, None)
        for seq in (-1, -5):
            r = p.produce("ti", 0, [b"a"], seq=seq)
            assert r.error == INVALID_RECORD, (seq, r)
        r = p.produce("ti", 0, [b"a", b"b"])
        assert (r.error, r.base) == (0, 0), r
        r = p.produce("ti", 0, [b"c"], seq=5)
        assert r.error == OUT_OF_ORDER_SEQUENCE_NUMBER, r
        r = p.produce("ti", 0, [b"c"])
        assert (r.error, r.base) == (0, 2), r
        # transactional
        t = Producer(c, "tx-i")
        t.add("ti", [0])
        r = t.produce("ti", 0, [b"t"], seq=-1)
        assert r.error == INVALID_RECORD, r
        r = t.produce("ti", 0, [b"t0"])
        assert (r.error, r.base) == (0, 3), r
        r = t.produce("ti", 0, [b"t9"], seq=9)
        assert r.error == OUT_OF_ORDER_SEQUENCE_NUMBER, r
        r = t.produce("ti", 0, [b"t1"])
        assert (r.error, r.base) == (0, 4), r
        assert t.end(True) == 0
        assert c.latest("ti", 0, READ_COMMITTED) == 6


# ---- EndTxn ---------------------------------------------------------------------

@test
def end_txn_errors():
    """EndTxn: with no transaction ongoing (commit or abort) ->
    INVALID_TXN_STATE (48); an older or newer epoch -> INVALID_PRODUCER_EPOCH
    (47); a producer id that is not the id's -> INVALID_PRODUCER_ID_MAPPING
    (49), as for an unknown transactional id; neither refused call ended the
    transaction (it is still open: LSO stays); commit -> 0, commit again (a
    retry) -> 0, abort after the commit -> 48; in the next transaction abort
    -> 0, abort again -> 0, commit after the abort -> 48."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        new_topic(c, "te")
        init_pid(c, "tx-e")
        p = Producer(c, "tx-e")
        assert p.epoch == 1
        assert p.end(True) == INVALID_TXN_STATE
        assert p.end(False) == INVALID_TXN_STATE
        p.add("te", [0])
        assert p.produce("te", 0, [b"a"]).error == 0
        for epoch in (p.epoch - 1, p.epoch + 1):
            for commit in (True, False):
                err = c.end_txn("tx-e", p.pid, epoch, commit)
                assert err == INVALID_PRODUCER_EPOCH, (epoch, commit, err)
        assert c.end_txn("tx-e", p.pid + 1000, p.epoch, True) == INVALID_PRODUCER_ID_MAPPING
        assert c.end_txn("tx-nosuch", p.pid, p.epoch, True) == INVALID_PRODUCER_ID_MAPPING
        assert c.latest("te", 0, READ_COMMITTED) == 0, "a refused EndTxn ended the transaction"
        assert p.end(True) == 0
        assert c.latest("te", 0, READ_COMMITTED) == 2
        assert p.end(True) == 0
        assert p.end(False) == INVALID_TXN_STATE
        assert c.latest("te", 0, READ_COMMITTED) == 2, "a retried EndTxn wrote another marker"
        # next transaction, aborted
        p.add("te", [0])
        assert p.produce("te", 0, [b"b"]).error == 0
        assert p.end(False) == 0
        assert p.end(False) == 0
        assert p.end(True) == INVALID_TXN_STATE
        f = c.fetch1("te", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso, f.aborted) == (4, 4, [(p.pid, 2)]), f
        assert [m[:2] for m in markers(f.batches)] == [(1, MARKER_COMMIT), (3, MARKER_ABORT)], markers(f.batches)


@test
def fenced_producer():
    """InitProducerId for a transactional id whose transaction is open
    aborts it (the caller may see CONCURRENT_TRANSACTIONS (51) meanwhile)
    and bumps the epoch; the older producer then gets
    INVALID_PRODUCER_EPOCH (47) from Produce, AddPartitionsToTxn,
    AddOffsetsToTxn, TxnOffsetCommit and EndTxn; the aborted transaction
    shows in a read_committed Fetch; the new epoch produces with sequence 0
    and commits."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c, TConn(b.bootstrap) as c2:
        new_topic(c, "tf")
        old = Producer(c, "tx-f")
        old.add("tf", [0])
        assert old.produce("tf", 0, [b"a", b"b"]).error == 0
        assert c.add_offsets("tx-f", old.pid, old.epoch, "gf") == 0
        new = Producer(c2, "tx-f")
        # Kafka answers epoch+2 here (the abort fences with epoch+1, the
        # retried InitProducerId bumps again); epoch+1 fences just as well
        assert new.pid == old.pid and new.epoch in (old.epoch + 1, old.epoch + 2), (old.pid, old.epoch, new.pid, new.epoch)
        r = old.produce("tf", 0, [b"c"])
        assert r.error == INVALID_PRODUCER_EPOCH, r
        errs = c.add_partitions("tx-f", old.pid, old.epoch, {"tf": [0]})
        assert errs == {("tf", 0): INVALID_PRODUCER_EPOCH}, errs
        assert c.add_offsets("tx-f", old.pid, old.epoch, "gf") == INVALID_PRODUCER_EPOCH
        errs = c.txn_offset_commit("tx-f", "gf", old.pid, old.epoch, {("tf", 0): (1, "")})
        assert errs == {("tf", 0): INVALID_PRODUCER_EPOCH}, errs
        assert old.end(True) == INVALID_PRODUCER_EPOCH
        f = c.fetch1("tf", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso, f.aborted) == (3, 3, [(old.pid, 0)]), f
        assert [m[:2] for m in markers(f.batches)] == [(2, MARKER_ABORT)], markers(f.batches)
        new.add("tf", [0])
        r = new.produce("tf", 0, [b"n"])
        assert (r.error, r.base) == (0, 3), r
        assert new.end(True) == 0
        f = c.fetch1("tf", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso) == (5, 5), f
        assert [m[:3] for m in markers(f.batches)] == [(2, MARKER_ABORT, old.pid), (4, MARKER_COMMIT, old.pid)], \
            markers(f.batches)
        out, _ = c.offset_fetch("gf", {"tf": [0]})
        assert out == {("tf", 0): (-1, "", 0)}, out


@test
def transaction_timeout_aborts():
    """A transaction open longer than its transaction timeout (1000 ms; the
    timed-out check every 200 ms) is aborted by the broker: the ABORT marker
    arrives on its own (LSO moves to the high watermark), the epoch is
    bumped, so the late producer's EndTxn commit and Produce get
    INVALID_PRODUCER_EPOCH (47); InitProducerId then gives epoch 2."""
    settings = dict(SETTINGS)
    settings["transaction.abort.timed.out.transaction.cleanup.interval.ms"] = 200
    with broker(settings=settings) as b, TConn(b.bootstrap) as c:
        new_topic(c, "tto")
        p = Producer(c, "tx-to", timeout_ms=1000)
        p.add("tto", [0])
        assert p.produce("tto", 0, [b"a"]).error == 0
        assert c.latest("tto", 0, READ_COMMITTED) == 0
        # wait for the durable marker: the LSO passes it. (It may show 1
        # = the high watermark for a moment first: the marker is appended,
        # not yet written; Kafka would keep the LSO at 0 until then.)
        deadline = time.monotonic() + HANG_GUARD
        while c.latest("tto", 0, READ_COMMITTED) != 2:
            assert time.monotonic() < deadline, "the timed-out transaction was not aborted (hang guard)"
            time.sleep(0.05)
        f = c.fetch1("tto", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso, f.aborted) == (2, 2, [(p.pid, 0)]), f
        assert [m[:2] for m in markers(f.batches)] == [(1, MARKER_ABORT)], markers(f.batches)
        assert p.end(True) == INVALID_PRODUCER_EPOCH
        assert p.produce("tto", 0, [b"late"]).error == INVALID_PRODUCER_EPOCH
        r = init_pid(c, "tx-to")
        assert (r.pid, r.epoch) == (p.pid, 2), (p.pid, r)


# ---- read_committed -----------------------------------------------------------------

def open_txn_layout(c, topic):
    """Offsets 0..2 plain, 3..4 an open transaction, 5 plain; returns the
    transactional producer."""
    new_topic(c, topic)
    r = c.produce(topic, 0, plain(vals(b"p", 3)))
    assert (r.error, r.base) == (0, 0), r
    p = Producer(c, "tx-" + topic)
    p.add(topic, [0])
    r = p.produce(topic, 0, vals(b"t", 2))
    assert (r.error, r.base) == (0, 3), r
    r = c.produce(topic, 0, plain([b"after"]))
    assert (r.error, r.base) == (0, 5), r
    return p


def check_open(c, topic, ver):
    f = c.fetch1(topic, 0, 0, READ_COMMITTED, ver=ver)
    assert (f.error, f.hw, f.lso) == (0, 6, 3), (ver, f)
    assert f.aborted in (None, []), (ver, f.aborted)
    assert f.batches and all(bt.last < 3 for bt in f.batches), (ver, [(bt.base, bt.last) for bt in f.batches])
    assert data_offsets(f.batches) == [0, 1, 2], (ver, data_offsets(f.batches))
    f = c.fetch1(topic, 0, 3, READ_COMMITTED, ver=ver)
    assert (f.error, f.hw, f.lso, f.batches) == (0, 6, 3, []), (ver, f)
    f = c.fetch1(topic, 0, 0, READ_UNCOMMITTED, ver=ver)
    assert (f.error, f.hw, f.lso) == (0, 6, 3), (ver, f)
    assert data_offsets(f.batches) == list(range(6)), (ver, data_offsets(f.batches))
    assert [bt.transactional for bt in f.batches] == [False, True, False], (ver, f.batches)


@test
def read_committed_open_then_abort():
    """Offsets 0..2 plain, 3..4 in an open transaction, 5 plain. Fetch (v4
    and v11) with isolation_level 1: high watermark 6, LastStableOffset 3
    (the open transaction's first offset), only records 0..2 and no batch
    reaching 3; from offset 3 nothing. read_uncommitted: all six, and
    LastStableOffset 3 there too. After EndTxn abort: an ABORT marker at 6
    (control batch of the producer's id and epoch), HW = LSO = 7, and
    read_committed gets AbortedTransactions [(pid, 3)] with the batches."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        p = open_txn_layout(c, "ra")
        for ver in (4, 11):
            check_open(c, "ra", ver)
        assert p.end(False) == 0
        for ver in (4, 11):
            f = c.fetch1("ra", 0, 0, READ_COMMITTED, ver=ver)
            assert (f.error, f.hw, f.lso, f.aborted) == (0, 7, 7, [(p.pid, 3)]), (ver, f)
            assert data_offsets(f.batches) == list(range(6)), (ver, data_offsets(f.batches))
            assert markers(f.batches) == [(6, MARKER_ABORT, p.pid, p.epoch)], (ver, markers(f.batches))
            ctl = [bt for bt in f.batches if bt.control][0]
            assert ctl.transactional and ctl.base == ctl.last == 6, ctl
            f = c.fetch1("ra", 0, 0, READ_UNCOMMITTED, ver=ver)
            assert (f.hw, f.lso) == (7, 7) and f.aborted in (None, []), (ver, f)


@test
def read_committed_commit_and_two_producers():
    """The same layout (0..2 plain, 3..4 producer 1's open transaction, 5
    plain), then producer 2's transaction at 6..7: LSO 3 (the oldest open
    transaction). Producer 1 commits (COMMIT marker at 8): LSO moves to 6,
    producer 2's first offset, and read_committed gets 0..5 with the
    committed 3..4 and nothing from 6 on; ListOffsets isolation 1 says 6.
    Producer 2 aborts (marker 9): LSO = HW = 10, AbortedTransactions
    [(pid2, 6)] only, both markers with their producer's id and epoch."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        p = open_txn_layout(c, "rc")
        q = Producer(c, "tx-rc2")
        q.add("rc", [0])
        r = q.produce("rc", 0, vals(b"q", 2))
        assert (r.error, r.base) == (0, 6), r
        f = c.fetch1("rc", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso) == (8, 3), f
        assert p.end(True) == 0
        f = c.fetch1("rc", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso) == (9, 6), f
        assert f.aborted in (None, []), f.aborted
        assert data_offsets(f.batches) == list(range(6)), data_offsets(f.batches)
        assert all(bt.last < 6 for bt in f.batches), [(bt.base, bt.last) for bt in f.batches]
        assert c.latest("rc", 0, READ_COMMITTED) == 6
        assert q.end(False) == 0
        f = c.fetch1("rc", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso, f.aborted) == (10, 10, [(q.pid, 6)]), f
        assert data_offsets(f.batches) == [0, 1, 2, 3, 4, 5, 6, 7], data_offsets(f.batches)
        assert markers(f.batches) == [(8, MARKER_COMMIT, p.pid, p.epoch), (9, MARKER_ABORT, q.pid, q.epoch)], \
            markers(f.batches)
        got = [r.value for bt in f.batches if not bt.control for r in bt.records]
        assert got == vals(b"p", 3) + vals(b"t", 2) + [b"after"] + vals(b"q", 2), got


@test
def empty_transaction_partition():
    """A partition added to a transaction that writes nothing to it: the
    LSO is not held back (it is the high watermark while the transaction
    is open), EndTxn still writes the marker there (abort, then commit in
    the next transaction), and no AbortedTransactions entry appears (there
    is no first offset), as in Kafka."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        new_topic(c, "em")
        assert c.produce("em", 0, plain([b"p"])).error == 0
        p = Producer(c, "tx-em")
        for n, commit in enumerate((False, True)):
            p.add("em", [0])
            f = c.fetch1("em", 0, 0, READ_COMMITTED)
            assert (f.hw, f.lso) == (1 + n, 1 + n), (n, f)
            assert p.end(commit) == 0
        f = c.fetch1("em", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso) == (3, 3) and f.aborted in (None, []), f
        assert markers(f.batches) == [(1, MARKER_ABORT, p.pid, p.epoch), (2, MARKER_COMMIT, p.pid, p.epoch)], \
            markers(f.batches)
        assert data_offsets(f.batches) == [0]


@test
def list_offsets_isolation():
    """ListOffsets v2 and v3, latest (-1): with isolation_level 1 the LSO
    (3) while the transaction is open, 6 with isolation 0 (the high
    watermark); after EndTxn commit both are 7; earliest (-2) is 0 either
    way."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        p = open_txn_layout(c, "lo")
        for ver in (2, 3):
            assert c.latest("lo", 0, READ_COMMITTED, ver=ver) == 3, ver
            assert c.latest("lo", 0, READ_UNCOMMITTED, ver=ver) == 6, ver
            for iso in (0, 1):
                assert c.list_offsets({("lo", 0): EARLIEST}, iso, ver=ver) == {("lo", 0): (0, 0)}, (ver, iso)
        assert p.end(True) == 0
        for ver in (2, 3):
            assert c.latest("lo", 0, READ_COMMITTED, ver=ver) == 7, ver
            assert c.latest("lo", 0, READ_UNCOMMITTED, ver=ver) == 7, ver


# ---- TxnOffsetCommit --------------------------------------------------------------

@test
def txn_offset_commit_visibility():
    """AddOffsetsToTxn, then TxnOffsetCommit (v2) tt/0 = 42 "m", tt/1 = 43:
    OffsetFetch (another connection) still sees nothing (-1) before EndTxn
    and 42/43 after the commit. In the next transaction TxnOffsetCommit (v1)
    tt/0 = 99: still 42 before EndTxn, and after the abort too (dropped)."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c, TConn(b.bootstrap) as other:
        new_topic(c, "to", 2)
        p = Producer(c, "tx-o")
        assert c.add_offsets("tx-o", p.pid, p.epoch, "tg") == 0
        errs = c.txn_offset_commit("tx-o", "tg", p.pid, p.epoch, {("to", 0): (42, "m"), ("to", 1): (43, None)})
        assert errs == {("to", 0): 0, ("to", 1): 0}, errs
        out, _ = other.offset_fetch("tg", {"to": [0, 1]})
        assert out == {("to", 0): (-1, "", 0), ("to", 1): (-1, "", 0)}, out
        assert p.end(True) == 0
        out, _ = other.offset_fetch("tg", {"to": [0, 1]})
        assert {k: v[0] for k, v in out.items()} == {("to", 0): 42, ("to", 1): 43}, out
        assert out[("to", 0)] == (42, "m", 0), out
        # aborted
        assert c.add_offsets("tx-o", p.pid, p.epoch, "tg") == 0
        errs = c.txn_offset_commit("tx-o", "tg", p.pid, p.epoch, {("to", 0): (99, "x")}, ver=1)
        assert errs == {("to", 0): 0}, errs
        out, _ = other.offset_fetch("tg", {"to": [0]})
        assert out == {("to", 0): (42, "m", 0)}, out
        assert p.end(False) == 0
        out, _ = other.offset_fetch("tg", {"to": [0, 1]})
        assert {k: v[0] for k, v in out.items()} == {("to", 0): 42, ("to", 1): 43}, out


# ---- concurrency ------------------------------------------------------------------

def read_committed_values(batches, aborted):
    """What a read_committed client keeps of one Fetch response (the Java
    consumer's CompletedFetch): at every batch with a producer id, the
    aborted transactions that began at or before the batch's last offset
    put their producers in the aborting set; an ABORT marker takes its
    producer out again; a transactional data batch of a producer in the set
    is dropped; control batches are never delivered."""
    pending = sorted(aborted or [], key=lambda a: a[1])
    aborting = set()
    out = []
    for bt in batches:
        if bt.pid >= 0:
            while pending and pending[0][1] <= bt.last:
                aborting.add(pending.pop(0)[0])
        if bt.control:
            if markers([bt])[0][1] == MARKER_ABORT:
                aborting.discard(bt.pid)
            continue
        if bt.transactional and bt.pid in aborting:
            continue
        out.extend(r.value for r in bt.records)
    return out


@test
def concurrent_transactions_read_committed():
    """Eight transactional producers (own connections and ids) run 40
    transactions each over 1..3 of the 4 partitions of a topic (on both
    shards), committing about 60 % and aborting the rest, while a plain
    producer writes between them and a read_committed reader consumes
    incrementally, as a client does (fetch from its position, drop what the
    AbortedTransactions list says, move past every batch). In the end the
    reader has exactly the committed and plain records of each partition,
    each producer's in its order; on the wire every partition's LSO is its
    high watermark, its markers are one per transaction that touched it
    (COMMIT or ABORT as ended), and its AbortedTransactions are exactly the
    aborted transactions with their first offsets."""
    import random
    import threading
    parts = 4
    with broker(settings=SETTINGS) as b:
        with TConn(b.bootstrap) as c:
            new_topic(c, "cc", parts)
        expect = {p: {} for p in range(parts)}        # partition -> source -> [values]
        ended = {p: [] for p in range(parts)}         # partition -> [(pid, kind, first offset)]
        lock = threading.Lock()
        errors = []
        done = threading.Event()

        def producer(k):
            try:
                rng = random.Random(k)
                with TConn(b.bootstrap) as c:
                    pr = Producer(c, "tx-cc-%d" % k)
                    for n in range(40):
                        chosen = sorted(rng.sample(range(parts), rng.randint(1, 3)))
                        pr.add("cc", chosen)
                        firsts, written = {}, {}
                        for p in chosen:
                            values = [b"tx%d-%d-%d-%d" % (k, n, p, i) for i in range(rng.randint(1, 3))]
                            r = pr.produce("cc", p, values)
                            assert r.error == 0, (k, n, p, r)
                            firsts[p], written[p] = r.base, values
                        commit = rng.random() < 0.6
                        assert pr.end(commit) == 0, (k, n, commit)
                        with lock:
                            for p in chosen:
                                if commit:
                                    expect[p].setdefault("tx%d" % k, []).extend(written[p])
                                ended[p].append((pr.pid, MARKER_COMMIT if commit else MARKER_ABORT, firsts[p]))
            except BaseException as e:
                errors.append(e)

        def plain_producer():
            try:
                with TConn(b.bootstrap) as c:
                    n = 0
                    while not done.is_set() or n < 20:
                        p = n % parts
                        v = b"plain-%d" % n
                        r = c.produce("cc", p, plain([v]))
                        assert r.error == 0, r
                        with lock:
                            expect[p].setdefault("plain", []).append(v)
                        n += 1
            except BaseException as e:
                errors.append(e)

        got = {p: [] for p in range(parts)}     # what the reader kept
        pos = {p: 0 for p in range(parts)}

        def read_round(c):
            for p in range(parts):
                f = c.fetch1("cc", p, pos[p], READ_COMMITTED)
                assert f.error == 0 and f.lso <= f.hw, (p, f)
                assert all(bt.last < f.lso for bt in f.batches), (p, f.lso, [(bt.base, bt.last) for bt in f.batches])
                got[p].extend(read_committed_values(f.batches, f.aborted))
                if f.batches:
                    pos[p] = f.batches[-1].last + 1

        def reader():
            try:
                with TConn(b.bootstrap) as c:
                    while not done.is_set():
                        read_round(c)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=producer, args=(k,)) for k in range(8)]
        side = [threading.Thread(target=plain_producer), threading.Thread(target=reader)]
        for t in threads + side:
            t.start()
        for t in threads:
            t.join(HANG_GUARD)
        done.set()
        for t in side:
            t.join(HANG_GUARD)
        assert not any(t.is_alive() for t in threads + side), "a thread hung (hang guard)"
        if errors:
            raise errors[0]
        with TConn(b.bootstrap) as c:
            deadline = time.monotonic() + HANG_GUARD
            while any(pos[p] < c.latest("cc", p, READ_UNCOMMITTED) for p in range(parts)):
                assert time.monotonic() < deadline, "reader did not reach the end (hang guard)"
                read_round(c)
            for p in range(parts):
                by_source = {}
                for v in got[p]:
                    by_source.setdefault(v.split(b"-")[0].decode(), []).append(v)
                assert by_source == expect[p], (p, {k: len(v) for k, v in by_source.items()},
                                                {k: len(v) for k, v in expect[p].items()})
                # the whole partition again, page by page (a Fetch answer
                # is cut short of max_bytes), read_committed
                batches, aborted, at, hw = [], set(), 0, None
                while hw is None or at < hw:
                    g = c.fetch1("cc", p, at, READ_COMMITTED)
                    assert g.lso == g.hw and g.batches, (p, at, g.hw, g.lso)
                    hw = g.hw
                    batches += g.batches
                    aborted |= set(g.aborted or [])
                    at = g.batches[-1].last + 1
                ms = markers(batches)
                assert sorted((pid, kind) for _, kind, pid, _ in ms) == sorted((pid, kind) for pid, kind, _ in ended[p]), p
                want = sorted((pid, first) for pid, kind, first in ended[p] if kind == MARKER_ABORT)
                assert sorted(aborted) == want, (p, sorted(aborted), want)


# ---- restarts ---------------------------------------------------------------------

@test
def state_survives_restart():
    """Producer 1 commits a transaction (2 records, marker at 2, and a
    transactional offset 10 for group rg); producer 2 leaves one open at
    3..4. After a SIGTERM restart and again after a SIGKILL one: the LSO is
    still 3 (the open transaction is not forgotten), the committed offset
    is still 10, InitProducerId for producer 1's id gives its producer id
    with the next epoch, and a new transactional id gets a producer id
    never handed out before. Then InitProducerId for producer 2's id aborts
    its open transaction: ABORT marker at 5, LSO = HW = 6,
    AbortedTransactions [(pid2, 3)]."""
    with broker(settings=SETTINGS) as b:
        with TConn(b.bootstrap) as c:
            new_topic(c, "rs")
            p = Producer(c, "tx-rs1")
            p.add("rs", [0])
            assert p.produce("rs", 0, vals(b"c", 2)).error == 0
            assert c.add_offsets("tx-rs1", p.pid, p.epoch, "rg") == 0
            assert c.txn_offset_commit("tx-rs1", "rg", p.pid, p.epoch, {("rs", 0): (10, "")}) == {("rs", 0): 0}
            assert p.end(True) == 0
            q = Producer(c, "tx-rs2")
            q.add("rs", [0])
            assert q.produce("rs", 0, vals(b"o", 2)).error == 0
        pids = {p.pid, q.pid}
        epoch1 = p.epoch
        for hard in (False, True):
            b.restart(hard=hard)
            with TConn(b.bootstrap) as c:
                f = c.fetch1("rs", 0, 0, READ_COMMITTED)
                assert (f.hw, f.lso) == (5, 3), (hard, f)
                assert data_offsets(f.batches) == [0, 1], (hard, data_offsets(f.batches))
                assert [m[:3] for m in markers(f.batches)] == [(2, MARKER_COMMIT, p.pid)], (hard, markers(f.batches))
                out, _ = c.offset_fetch("rg", {"rs": [0]})
                assert out == {("rs", 0): (10, "", 0)}, (hard, out)
                r = init_pid(c, "tx-rs1")
                assert (r.pid, r.epoch) == (p.pid, epoch1 + 1), (hard, p.pid, epoch1, r)
                epoch1 = r.epoch
                r = init_pid(c, "tx-rs-new-%d" % hard)
                assert r.pid not in pids and r.epoch == 0, (hard, pids, r)
                pids.add(r.pid)
        with TConn(b.bootstrap) as c:
            r = init_pid(c, "tx-rs2")
            assert r.pid == q.pid and r.epoch > q.epoch, (q.pid, q.epoch, r)
            f = c.fetch1("rs", 0, 0, READ_COMMITTED)
            assert (f.hw, f.lso, f.aborted) == (6, 6, [(q.pid, 3)]), f
            assert [m[:3] for m in markers(f.batches)] == [(2, MARKER_COMMIT, p.pid), (5, MARKER_ABORT, q.pid)], \
                markers(f.batches)


def delete_records(c, name, partition, offset):
    """DeleteRecords v0: (error, low watermark)."""
    w = kraw.W().array([name], lambda w, n: w.str(n).array([(partition, offset)],
                                                          lambda w, po: w.i32(po[0]).i64(po[1])))
    w.i32(30000)
    r = c.request(21, 0, w)
    r.i32()
    res = r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i64(), r.i16()))))
    r.done()
    _, parts = res[0]
    return parts[0][2], parts[0][1]


@test
def aborted_list_trimmed_on_the_retention_tick():
    """Three aborted transactions (markers at 1, 3, 5) are three records of
    aborted.txns. DeleteRecords to 4 and a fourth abort (marker at 7): the
    retention tick (200 ms) forgets the aborts wholly below the log start
    and rewrites the file (on the shard's ring) with the other two. After
    a SIGTERM restart, read_committed from 4 still gets both."""
    settings = dict(SETTINGS)
    settings["log.retention.check.interval.ms"] = 200
    with broker(settings=settings) as b:
        path = os.path.join(b.data_dir, "tt-0", "aborted.txns")

        def size_becomes(n):
            deadline = time.monotonic() + HANG_GUARD
            while not (os.path.exists(path) and os.path.getsize(path) == n):
                assert time.monotonic() < deadline, (n, os.path.getsize(path) if os.path.exists(path) else None)
                time.sleep(0.05)

        with TConn(b.bootstrap) as c:
            new_topic(c, "tt")
            p = Producer(c, "tx-tt")
            for i in range(3):
                p.add("tt", [0])
                assert p.produce("tt", 0, [b"a%d" % i]).error == 0
                assert p.end(False) == 0
            size_becomes(3 * 24)
            assert delete_records(c, "tt", 0, 4) == (0, 4)
            p.add("tt", [0])
            assert p.produce("tt", 0, [b"a3"]).error == 0
            assert p.end(False) == 0
            size_becomes(2 * 24)
            assert not os.path.exists(path + ".tmp")
            f = c.fetch1("tt", 0, 4, READ_COMMITTED)
            assert (f.hw, f.lso, f.aborted) == (8, 8, [(p.pid, 4), (p.pid, 6)]), f
        b.restart(hard=False)
        with TConn(b.bootstrap) as c:
            f = c.fetch1("tt", 0, 4, READ_COMMITTED)
            assert (f.hw, f.lso, f.aborted) == (8, 8, [(p.pid, 4), (p.pid, 6)]), f
        assert os.path.getsize(path) == 2 * 24


@test
def crc32c_and_batch_self_check():
    """The test's own encoders: CRC-32C of "123456789" is 0xE3069283, and a
    built batch parses back (offsets, keys, values, producer fields)."""
    assert crc32c(b"123456789") == 0xE3069283
    bl = batch([(b"k", b"v"), b"w", (None, None)], pid=7, epoch=3, seq=11, attributes=ATTR_TRANSACTIONAL)
    (bt,) = parse_batches(bl)
    assert (bt.base, bt.last, bt.pid, bt.epoch, bt.seq, bt.transactional, bt.control) == (0, 2, 7, 3, 11, True, False)
    assert [(r.offset, r.key, r.value) for r in bt.records] == [(0, b"k", b"v"), (1, None, b"w"), (2, None, None)]
    for v in (0, 1, -1, 63, -64, 64, 300, -300, 2 ** 40, -(2 ** 40)):
        assert read_varint(varint(v), 0) == (v, len(varint(v))), v


if __name__ == "__main__":
    main("txn-raw")
