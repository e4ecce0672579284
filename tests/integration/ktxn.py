"""ktxn: transactions and record batches over kraw.Conn, for the
transaction suites (test_txn_raw.py, test_txn_clients.py): a magic-2 batch
builder and parser (CRC-32C in pure Python), InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, Produce, Fetch
(with IsolationLevel, LastStableOffset and AbortedTransactions) and
ListOffsets, classic non-flexible encodings only.

    c = TConn(b.bootstrap)
    p = Producer(c, "tx-id")          # InitProducerId
    p.add("t", [0])                   # AddPartitionsToTxn
    assert p.produce("t", 0, [b"v"]).error == 0
    assert p.end(True) == 0           # EndTxn commit
    f = c.fetch1("t", 0, 0, READ_COMMITTED)   # f.hw, f.lso, f.aborted, f.batches
"""

import struct
import time
from types import SimpleNamespace as NS

from harness import HANG_GUARD
from kraw import Conn, W


# Kafka error codes (besides kraw's)
INVALID_REQUEST = 42
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
INVALID_RECORD = 87

PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28

ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
MARKER_ABORT, MARKER_COMMIT = 0, 1
LATEST, EARLIEST = -1, -2
READ_UNCOMMITTED, READ_COMMITTED = 0, 1

MAX_TIMEOUT_MS = 60000



# ---- CRC-32C and record batches ---------------------------------------------

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC32C = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for x in data:
        c = _CRC32C[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(v):
    """zigzag base-128, as protobuf sint64"""
    z = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def read_varint(b, o):
    v = shift = 0
    while True:
        x = b[o]
        o += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return (v >> 1) ^ -(v & 1), o


def batch(values, pid=-1, epoch=-1, seq=-1, attributes=0, ts=None):
    """One magic-2 batch; values are bytes (null key) or (key, value)."""
    ts = int(time.time() * 1000) if ts is None else ts
    recs = bytearray()
    for i, v in enumerate(values):
        key, val = v if isinstance(v, tuple) else (None, v)
        body = bytearray(b"\x00") + varint(0) + varint(i)
        body += varint(-1) if key is None else varint(len(key)) + key
        body += varint(-1) if val is None else varint(len(val)) + val
        body += varint(0)
        recs += varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", attributes, len(values) - 1, ts, ts, pid, epoch, seq, len(values)) + recs
    return struct.pack(">qiibI", 0, 9 + len(after_crc), -1, 2, crc32c(after_crc)) + after_crc


def marker(kind, pid, epoch, coordinator_epoch=0):
    """What a coordinator writes; a client must not (tests the refusal)."""
    key = struct.pack(">hh", 0, kind)
    val = struct.pack(">hi", 0, coordinator_epoch)
    return batch([(key, val)], pid=pid, epoch=epoch, seq=-1, attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL)


def parse_batches(blob, check_crc=True):
    """Whole batches of a fetched records blob (a partial one at the end is
    dropped, as clients do); CRC checked unless check_crc is False (as
    librdkafka's check.crcs=false, its default); records decoded (codec
    none)."""
    out = []
    o = 0
    blob = blob or b""
    while o + 61 <= len(blob):
        base, blen = struct.unpack_from(">qi", blob, o)
        end = o + 12 + blen
        if end > len(blob):
            break
        magic = blob[o + 16]
        crc = struct.unpack_from(">I", blob, o + 17)[0]
        assert magic == 2, "batch at %d: magic %d" % (base, magic)
        assert not check_crc or crc32c(blob[o + 21:end]) == crc, "batch at %d: bad CRC" % base
        attrs, lod, _bts, _mts, pid, epoch, seq, n = struct.unpack_from(">hiqqqhii", blob, o + 21)
        assert attrs & 7 == 0, "batch at %d is compressed (attributes %#x)" % (base, attrs)
        recs = []
        p = o + 61
        for _ in range(n):
            ln, p = read_varint(blob, p)
            q = p + 1
            _tsd, q = read_varint(blob, q)
            od, q = read_varint(blob, q)
            kl, q = read_varint(blob, q)
            key = None if kl < 0 else bytes(blob[q:q + kl])
            q += max(kl, 0)
            vl, q = read_varint(blob, q)
            val = None if vl < 0 else bytes(blob[q:q + vl])
            recs.append(NS(offset=base + od, key=key, value=val))
            p += ln
        out.append(NS(base=base, last=base + lod, attributes=attrs, pid=pid, epoch=epoch, seq=seq,
                      transactional=bool(attrs & ATTR_TRANSACTIONAL), control=bool(attrs & ATTR_CONTROL),
                      records=recs))
        o = end
    return out


def data_offsets(batches):
    """Offsets of the data records (control batches left out)."""
    return [r.offset for bt in batches if not bt.control for r in bt.records]


def markers(batches):
    """[(offset, type, pid, epoch)] of the control batches."""
    out = []
    for bt in batches:
        if bt.control:
            assert len(bt.records) == 1, bt
            r = bt.records[0]
            version, kind = struct.unpack(">hh", r.key)
            assert version == 0 and len(r.value) == 6, r
            out.append((r.offset, kind, bt.pid, bt.epoch))
    return out


# ---- the transactional APIs over kraw.Conn ----------------------------------

def _topics(parts):
    """{(topic, partition): x} -> [(topic, [(partition, x)...])...] sorted"""
    by = {}
    for (t, p), v in sorted(parts.items()):
        by.setdefault(t, []).append((p, v))
    return sorted(by.items())


class TConn(Conn):
    check_crc = True            # Fetch answers' batches CRC-checked (parse_batches)

    def init_producer_id(self, txn_id, timeout_ms=MAX_TIMEOUT_MS, ver=1):
        r = self.request(INIT_PRODUCER_ID, ver, W().str(txn_id).i32(timeout_ms))
        r.i32()
        res = NS(error=r.i16(), pid=r.i64(), epoch=r.i16())
        r.done()
        return res

    def add_partitions(self, txn_id, pid, epoch, parts, ver=1):
        """parts: {topic: [partition...]}; returns {(topic, partition): error}"""
        w = W().str(txn_id).i64(pid).i16(epoch)
        w.array(sorted(parts.items()), lambda w, tp: w.str(tp[0]).array(tp[1], W.i32))
        r = self.request(ADD_PARTITIONS_TO_TXN, ver, w)
        r.i32()
        out = {}
        for t, ps in r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i16())))):
            for p, e in ps:
                out[(t, p)] = e
        r.done()
        return out

    def add_offsets(self, txn_id, pid, epoch, group, ver=1):
        r = self.request(ADD_OFFSETS_TO_TXN, ver, W().str(txn_id).i64(pid).i16(epoch).str(group))
        r.i32()
        err = r.i16()
        r.done()
        return err

    def end_txn(self, txn_id, pid, epoch, commit, ver=1):
        r = self.request(END_TXN, ver, W().str(txn_id).i64(pid).i16(epoch).i8(1 if commit else 0))
        r.i32()
        err = r.i16()
        r.done()
        return err

    def txn_offset_commit(self, txn_id, group, pid, epoch, offsets, ver=2):
        """offsets: {(topic, partition): (offset, metadata)}; returns
        {(topic, partition): error}"""
        w = W().str(txn_id).str(group).i64(pid).i16(epoch)

        def part(w, pv):
            p, (off, meta) = pv
            w.i32(p).i64(off)
            if ver >= 2:
                w.i32(-1)
            w.str(meta)
        w.array(_topics(offsets), lambda w, tv: w.str(tv[0]).array(tv[1], part))
        r = self.request(TXN_OFFSET_COMMIT, ver, w)
        r.i32()
        out = {}
        for t, ps in r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i16())))):
            for p, e in ps:
                out[(t, p)] = e
        r.done()
        return out

    def produce_many(self, blobs, txn_id=None, acks=-1, ver=7):
        """blobs: {(topic, partition): records}; returns {(topic, partition):
        NS(error, base)}"""
        w = W()
        if ver >= 3:
            w.str(txn_id)
        w.i16(acks).i32(30000)
        w.array(_topics(blobs), lambda w, tv: w.str(tv[0]).array(tv[1], lambda w, pv: w.i32(pv[0]).bytes(pv[1])))
        r = self.request(PRODUCE, ver, w)

        def part(r):
            res = NS(index=r.i32(), error=r.i16(), base=r.i64())
            if ver >= 2:
                r.i64()
            if ver >= 5:
                res.log_start = r.i64()
            return res
        out = {}
        for t, ps in r.array(lambda r: (r.str(), r.array(part))):
            for pr in ps:
                out[(t, pr.index)] = pr
        if ver >= 1:
            r.i32()
        r.done()
        return out

    def produce(self, topic, partition, records, txn_id=None, ver=7):
        return self.produce_many({(topic, partition): records}, txn_id=txn_id, ver=ver)[(topic, partition)]

    def fetch(self, parts, isolation, ver=11, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20):
        """parts: {(topic, partition): fetch offset}; returns {(topic,
        partition): NS(error, hw, lso, log_start, aborted, batches)}"""
        w = W().i32(-1).i32(max_wait_ms).i32(min_bytes)
        if ver >= 3:
            w.i32(max_bytes)
        if ver >= 4:
            w.i8(isolation)
        if ver >= 7:
            w.i32(0).i32(-1)

        def part(w, pv):
            p, off = pv
            w.i32(p)
            if ver >= 9:
                w.i32(-1)
            w.i64(off)
            if ver >= 5:
                w.i64(-1)
            w.i32(max_bytes)
        w.array(_topics(parts), lambda w, tv: w.str(tv[0]).array(tv[1], part))
        if ver >= 7:
            w.array([], None)
        if ver >= 11:
            w.str("")
        r = self.request(FETCH, ver, w)
        r.i32()
        if ver >= 7:
            top = r.i16()
            assert top == 0, "fetch: top-level error %d" % top
            r.i32()

        def pdata(r):
            res = NS(index=r.i32(), error=r.i16(), hw=r.i64(), lso=r.i64())
            res.log_start = r.i64() if ver >= 5 else None
            res.aborted = r.array(lambda r: (r.i64(), r.i64()))
            if ver >= 11:
                r.i32()
            res.batches = parse_batches(r.bytes(), self.check_crc)
            return res
        out = {}
        for t, ps in r.array(lambda r: (r.str(), r.array(pdata))):
            for pd in ps:
                out[(t, pd.index)] = pd
        r.done()
        return out

    def fetch1(self, topic, partition, offset, isolation, ver=11):
        return self.fetch({(topic, partition): offset}, isolation, ver=ver)[(topic, partition)]

    def list_offsets(self, parts, isolation, ver=2):
        """parts: {(topic, partition): timestamp}; returns {(topic,
        partition): (error, offset)}"""
        w = W().i32(-1)
        if ver >= 2:
            w.i8(isolation)
        w.array(_topics(parts), lambda w, tv: w.str(tv[0]).array(tv[1], lambda w, pv: w.i32(pv[0]).i64(pv[1])))
        r = self.request(LIST_OFFSETS, ver, w)
        if ver >= 2:
            r.i32()
        out = {}
        for t, ps in r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i16(), r.i64(), r.i64())))):
            for p, e, _ts, off in ps:
                out[(t, p)] = (e, off)
        r.done()
        return out

    def latest(self, topic, partition, isolation, ver=2):
        e, off = self.list_offsets({(topic, partition): LATEST}, isolation, ver=ver)[(topic, partition)]
        assert e == 0, "ListOffsets v%d isolation %d %s/%d: error %d" % (ver, isolation, topic, partition, e)
        return off


class Producer:
    """A transactional (or, with txn_id None, idempotent) producer over one
    connection: its pid, epoch and next sequence per partition."""

    def __init__(self, c, txn_id, timeout_ms=MAX_TIMEOUT_MS):
        self.c, self.txn_id = c, txn_id
        r = init_pid(c, txn_id, timeout_ms)
        self.pid, self.epoch = r.pid, r.epoch
        self.seq = {}

    def add(self, topic, partitions, ver=1):
        errs = self.c.add_partitions(self.txn_id, self.pid, self.epoch, {topic: list(partitions)}, ver=ver)
        assert errs == {(topic, p): 0 for p in partitions}, errs
        return errs

    def batch(self, topic, partition, values, seq=None, epoch=None):
        s = self.seq.get((topic, partition), 0) if seq is None else seq
        attrs = ATTR_TRANSACTIONAL if self.txn_id is not None else 0
        return batch(values, pid=self.pid, epoch=self.epoch if epoch is None else epoch, seq=s, attributes=attrs)

    def produce(self, topic, partition, values, seq=None, epoch=None):
        """Produce one batch; the sequence moves on only when it is taken."""
        s = self.seq.get((topic, partition), 0) if seq is None else seq
        r = self.c.produce(topic, partition, self.batch(topic, partition, values, seq=s, epoch=epoch),
                           txn_id=self.txn_id)
        if r.error == 0:
            self.seq[(topic, partition)] = s + len(values)
        return r

    def end(self, commit):
        return self.c.end_txn(self.txn_id, self.pid, self.epoch, commit)


def init_pid(c, txn_id, timeout_ms=MAX_TIMEOUT_MS, ver=1):
    """InitProducerId, retried while the coordinator answers
    CONCURRENT_TRANSACTIONS (it is aborting the id's open transaction), as
    clients do; anything else but 0 fails."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        r = c.init_producer_id(txn_id, timeout_ms, ver=ver)
        if r.error != CONCURRENT_TRANSACTIONS:
            break
        assert time.monotonic() < deadline, "InitProducerId(%r): CONCURRENT_TRANSACTIONS (hang guard)" % txn_id
        time.sleep(0.02)
    assert r.error == 0 and r.pid >= 0 and r.epoch >= 0, (txn_id, r)
    return r


def new_topic(c, name, partitions=1):
    err = c.create_topic(name, partitions)
    assert err == 0, "CreateTopics %s: %d" % (name, err)


def plain(values):
    """A batch from a non-idempotent producer."""
    return batch(values)


def vals(tag, n):
    return [b"%s-%d" % (tag, i) for i in range(n)]
