#!/usr/bin/python3
"""tests/integration/test_native_raw.py — the native datagram protocol
(dataplane/native/) against a real build/sluiced started with
native.listen, datagram by datagram from a plain UDP socket: sessions,
PRODUCE whole and in fragments, a resend acknowledged once, FETCH, and
every kind of bad datagram answered or counted without changing what
was written. The records are read back over Kafka's TCP too.

    tests/integration/test_native_raw.py [TEST...]
"""
import gzip
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import test  # noqa: E402
from ktxn import TConn, batch, crc32c, parse_batches, new_topic, varint  # noqa: E402

MAGIC, VERSION = 0x534C, 1
HELLO, HELLO_ACK, PRODUCE, PRODUCE_ACK, FETCH, FETCH_DATA, ERROR = range(1, 8)
E_SHORT, E_MAGIC, E_VERSION, E_LENGTH, E_CRC, E_TYPE, E_TOPIC, E_FRAGMENT, E_FIELD = range(1, 10)


def free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def seal(typ, body, session=0, request=0):
    length = 20 + len(body)
    head = struct.pack(">HBBHH", MAGIC, VERSION, typ, length, 0)
    rest = struct.pack(">II", session, request) + body
    crc = crc32c(head + rest)   # the CRC covers the datagram but its own field
    return head + struct.pack(">I", crc) + rest


def hello(credits=1 << 20, max_dg=8972, name=b"raw", request=1):
    return seal(HELLO, struct.pack(">IHB", credits, max_dg, len(name)) + name, 0, request)


def produce(session, request, topic, part, pid, epoch, seq, batch_len, frag_off, idx, count, frag, acks=1):
    t = topic.encode()
    body = struct.pack(">Bbiqhi", len(t), acks, part, pid, epoch, seq)
    body += struct.pack(">IIHH", batch_len, frag_off, idx, count) + t + frag
    return seal(PRODUCE, body, session, request)


def fetch(session, request, topic, part, offset, max_bytes=1 << 20, isolation=0):
    t = topic.encode()
    return seal(FETCH, struct.pack(">Bbiqi", len(t), isolation, part, offset, max_bytes) + t, session, request)


def parse(dg):
    magic, ver, typ, length, flags, crc, session, request = struct.unpack(">HBBHHIII", dg[:20])
    assert magic == MAGIC and ver == VERSION and length == len(dg), dg[:20]
    assert crc == crc32c(dg[:8] + dg[12:]), "bad CRC from the broker"
    b = dg[20:]
    m = {"type": typ, "session": session, "request": request}
    if typ == HELLO_ACK:
        m["session"], m["credits"], m["max_dg"], m["shards"], m["pid"] = struct.unpack(">IIHHq", b[:20])
    elif typ == PRODUCE_ACK:
        (m["error"], m["partition"], m["pid"], m["seq"], m["base"], m["log_start"], m["credits"],
         tl) = struct.unpack(">hiqiqqIB", b[:39])
        m["topic"] = b[39:39 + tl].decode()
    elif typ == FETCH_DATA:
        (m["error"], m["partition"], m["hw"], m["log_start"], m["lso"], m["total"], m["frag_off"],
         m["idx"], m["count"], tl) = struct.unpack(">hiqqqIIHHB", b[:43])
        m["topic"] = b[43:43 + tl].decode()
        m["data"] = b[43 + tl:]
    elif typ == ERROR:
        m["error"], m["about"], n = struct.unpack(">hBH", b[:5])
        m["message"] = b[5:5 + n].decode()
    return m


class Client:
    def __init__(self, port):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.s.settimeout(5)
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.addr = ("127.0.0.1", port)

    def send(self, dg):
        self.s.sendto(dg, self.addr)

    def recv(self):
        return parse(self.s.recvfrom(65536)[0])

    def ask(self, dg):
        self.send(dg)
        return self.recv()

    def hello(self):
        r = self.ask(hello())
        assert r["type"] == HELLO_ACK, r
        return r

    def fetch_all(self, session, topic, part, offset):
        r = self.ask(fetch(session, 9, topic, part, offset))
        assert r["type"] == FETCH_DATA and r["error"] == 0, r
        parts = {r["idx"]: r["data"]}
        for _ in range(1, r["count"]):
            x = self.recv()
            parts[x["idx"]] = x["data"]
        return r, b"".join(parts[i] for i in sorted(parts))


def start(**settings):
    port = free_udp_port()
    s = {"native.listen": "127.0.0.1:%d" % port, "num.partitions": 2}
    s.update(settings)
    return harness.broker(settings=s), port


@test
def hello_produce_resend_fetch_and_tcp_readback():
    ctx, port = start()
    with ctx as b, TConn(b.bootstrap) as kc:
        new_topic(kc, "n", 2)
        c = Client(port)
        h = c.hello()
        assert h["pid"] >= 0 and h["credits"] == 1 << 20 and h["max_dg"] == 8972, h
        sid, pid = h["session"], h["pid"]
        h2 = Client(port).hello()
        assert h2["pid"] != pid, "each session its own producer id"
        b0 = batch([b"a", b"b", b"c"], pid=pid, epoch=0, seq=0)
        r = c.ask(produce(sid, 2, "n", 1, pid, 0, 0, len(b0), 0, 0, 1, b0))
        assert r["type"] == PRODUCE_ACK and r["error"] == 0 and r["base"] == 0 and r["credits"] == len(b0), r
        # the same batch again (its acknowledgement was lost): same offset, appended once
        r = c.ask(produce(sid, 3, "n", 1, pid, 0, 0, len(b0), 0, 0, 1, b0))
        assert r["error"] == 0 and r["base"] == 0, r
        # a gap in the sequence: refused
        b9 = batch([b"x"], pid=pid, epoch=0, seq=9)
        r = c.ask(produce(sid, 4, "n", 1, pid, 0, 9, len(b9), 0, 0, 1, b9))
        assert r["error"] == 45, r
        # a 30 KB batch in 4 fragments, sent out of order with one fragment twice
        big = batch([bytes([i % 251]) * 1000 for i in range(30)], pid=pid, epoch=0, seq=3)
        room = 8000
        frags = [(i, big[i * room:(i + 1) * room]) for i in range((len(big) + room - 1) // room)]
        order = [frags[2], frags[0], frags[0], frags[3], frags[1]]
        replies = []
        for i, f in order:
            c.send(produce(sid, 5, "n", 1, pid, 0, 3, len(big), i * room, i, len(frags), f))
        replies.append(c.recv())
        assert replies[0]["type"] == PRODUCE_ACK and replies[0]["error"] == 0 and replies[0]["base"] == 3, replies
        # read by offset until the end, as a reader does (an answer holds
        # what one read of the log gives: one batch or many)
        off, data = 0, b""
        while off < 33:
            r, d = c.fetch_all(sid, "n", 1, off)
            assert r["hw"] == 33 and r["lso"] == 33 and r["total"] == len(d) > 0, r
            data += d
            off = parse_batches(d)[-1].last + 1
        got = parse_batches(data)
        assert [x.base for x in got] == [0, 3], got
        assert data.endswith(big[16:]), "the reassembled batch is stored as sent (offset and epoch stamped)"
        # the same records over Kafka's TCP
        f = kc.fetch1("n", 1, 0, 0)
        assert f.hw == 33 and f.batches[0].base == 0
        assert [r.value for r in f.batches[0].records] == [b"a", b"b", b"c"]
        f = kc.fetch1("n", 1, 3, 0)
        assert [r.offset for bt in f.batches for r in bt.records] == list(range(3, 33))
        assert [r.value for r in f.batches[0].records] == [bytes([i % 251]) * 1000 for i in range(30)]
        # an empty answer at the end
        r = c.ask(fetch(sid, 10, "n", 1, 33))
        assert r["type"] == FETCH_DATA and r["error"] == 0 and r["total"] == 0 and r["count"] == 0, r
        r = c.ask(fetch(sid, 11, "n", 1, 99))
        assert r["error"] == 1, r   # OFFSET_OUT_OF_RANGE


@test
def bad_datagrams_answered_or_counted_and_nothing_changes():
    ctx, port = start(**{"native.session.credits.bytes": 65536})
    with ctx as b, TConn(b.bootstrap) as kc:
        new_topic(kc, "n", 2)
        c = Client(port)
        h = c.hello()
        sid, pid = h["session"], h["pid"]
        b0 = batch([b"keep"], pid=pid, epoch=0, seq=0)
        assert c.ask(produce(sid, 1, "n", 0, pid, 0, 0, len(b0), 0, 0, 1, b0))["error"] == 0
        good = produce(sid, 2, "n", 0, pid, 0, 1, len(b0), 0, 0, 1, b0)
        # short and foreign datagrams: silently counted
        c.send(b"\x00" * 5)
        c.send(b"\x12\x34" + good[2:])
        # bad version, bad CRC, truncated, unknown type: answered ERROR with the reason
        expect = []
        bad_ver = bytearray(good)
        bad_ver[2] = 9
        expect.append((bytes(bad_ver), -E_VERSION))
        bad_crc = bytearray(good)
        bad_crc[-1] ^= 1
        expect.append((bytes(bad_crc), -E_CRC))
        expect.append((good[:-3], -E_LENGTH))
        expect.append((seal(42, b"", sid, 3), -E_TYPE))
        expect.append((seal(HELLO_ACK, b"\x00" * 20, sid, 3), -E_TYPE))
        for dg, reason in expect:
            r = c.ask(dg)
            assert r["type"] == ERROR and r["error"] == reason, (reason, r)
        # unknown topic / partition: a PRODUCE_ACK with Kafka's error
        r = c.ask(produce(sid, 4, "nope", 0, pid, 0, 1, len(b0), 0, 0, 1, b0))
        assert r["type"] == PRODUCE_ACK and r["error"] == 3, r
        r = c.ask(produce(sid, 4, "n", 7, pid, 0, 1, len(b0), 0, 0, 1, b0))
        assert r["error"] == 3, r
        # a producer id the broker never issued to this session
        r = c.ask(produce(sid, 5, "n", 0, pid + 1000, 0, 0, len(b0), 0, 0, 1, b0))
        assert r["type"] == PRODUCE_ACK and r["error"] == 59, r
        # an unknown session
        r = c.ask(produce(sid ^ 0x7ff, 6, "n", 0, pid, 0, 1, len(b0), 0, 0, 1, b0))
        assert r["type"] == ERROR and r["error"] == 59, r
        # fragments that do not add up (different sizes for non-last fragments)
        big = batch([b"z" * 1000 for _ in range(10)], pid=pid, epoch=0, seq=1)
        c.send(produce(sid, 7, "n", 0, pid, 0, 1, len(big), 0, 0, 3, big[:4000]))
        r = c.ask(produce(sid, 7, "n", 0, pid, 0, 1, len(big), 3000, 1, 3, big[3000:6000]))
        assert r["type"] == ERROR and r["error"] == -E_FRAGMENT, r
        # a batch whose CRC is wrong inside a good datagram: CORRUPT_MESSAGE
        worse = bytearray(batch([b"q"], pid=pid, epoch=0, seq=1))
        worse[-1] ^= 1
        r = c.ask(produce(sid, 8, "n", 0, pid, 0, 1, len(worse), 0, 0, 1, bytes(worse)))
        assert r["type"] == PRODUCE_ACK and r["error"] == 2, r
        # a transactional batch: refused (no transactions on the native path)
        tx = batch([b"t"], pid=pid, epoch=0, seq=1, attributes=0x10)
        r = c.ask(produce(sid, 9, "n", 0, pid, 0, 1, len(tx), 0, 0, 1, tx))
        assert r["error"] == 87, r
        # compressed batches are checked inside: an inner offset delta of
        # 1,000,000 is INVALID_RECORD, a payload that is not gzip
        # CORRUPT_MESSAGE
        body = b"\x00" + varint(0) + varint(1000000) + varint(-1) + varint(1) + b"p" + varint(0)
        for req, payload, want in ((12, gzip.compress(varint(len(body)) + body), 87),
                                   (13, b"\x1f\x8b" + b"x" * 50, 2)):
            after_crc = struct.pack(">hiqqqhii", 1, 0, 0, 0, pid, 0, 1, 1) + payload
            gz = struct.pack(">qiibI", 0, 9 + len(after_crc), -1, 2, crc32c(after_crc)) + after_crc
            r = c.ask(produce(sid, req, "n", 0, pid, 0, 1, len(gz), 0, 0, 1, gz))
            assert r["type"] == PRODUCE_ACK and r["error"] == want, (want, r)
        # beyond credits (64 KiB): refused, THROTTLING_QUOTA_EXCEEDED
        huge = batch([b"h" * 1000 for _ in range(70)], pid=pid, epoch=0, seq=1)
        r = c.ask(produce(sid, 10, "n", 0, pid, 0, 1, len(huge), 0, 0, 9, huge[:8000]))
        assert r["type"] == ERROR and r["error"] == 89, r
        # the shard still serves, and partition 0 holds just the first batch
        r = c.ask(produce(sid, 11, "n", 0, pid, 0, 1, len(b0), 0, 0, 1, batch([b"next"], pid=pid, epoch=0, seq=1)))
        assert r["error"] == 0 and r["base"] == 1, r
        f = kc.fetch1("n", 0, 0, 0)
        assert f.hw == 2, f.hw
        b.stop()
        log = open(b.log_path).read()
        assert "unreadable (short 1, magic 1, version 1, length 1, crc 1, type 2" in log, log[-2000:]


@test
def many_fragmented_batches_in_flight_all_acknowledged():
    """64 fragmented batches sent back to back, well within credits: every
    one is put together and acknowledged (reassembly room grows with the
    load, up to native.reassembly.memory.bytes), none is dropped silently."""
    ctx, port = start()
    with ctx as b, TConn(b.bootstrap) as kc:
        new_topic(kc, "n", 2)
        c = Client(port)
        h = c.hello()
        sid, pid = h["session"], h["pid"]
        room, n = 8000, 64
        for k in range(n):
            bt = batch([bytes([k]) * 1000 for _ in range(12)], pid=pid, epoch=0, seq=k * 12)
            frags = [bt[i:i + room] for i in range(0, len(bt), room)]
            assert len(frags) == 2
            for i, f in enumerate(frags):
                c.send(produce(sid, 100 + k, "n", 0, pid, 0, k * 12, len(bt), i * room, i, 2, f))
        acks = sorted(c.recv()["base"] for _ in range(n))
        assert acks == [k * 12 for k in range(n)], acks
        assert kc.fetch1("n", 0, 0, 0).hw == n * 12


@test
def dpdk_settings_refused_with_the_key_named():
    """dpdk.enable without what it needs, or with EAL arguments the EAL
    does not know: the broker refuses to start (exit 2) and says which key
    and which argument, before any port or disk is touched."""
    d = harness.temp_dir()
    try:
        cases = [
            (["dpdk.enable=true", "dpdk.eal.args=--no-huge"], "dpdk.listen"),
            (["dpdk.enable=true", "dpdk.listen=10.9.9.1:9093"], "dpdk.eal.args"),
            (["dpdk.enable=true", "dpdk.listen=10.9.9.1:9093", "dpdk.eal.args=--no-huge --bogus-flag"],
             "--bogus-flag"),
            (["dpdk.enable=true", "dpdk.listen=broker.local:9093", "dpdk.eal.args=--no-huge"], "dpdk.listen"),
            (["dpdk.enable=true", "dpdk.listen=10.9.9.1:9093", "dpdk.eal.args=--no-huge 'unterminated"],
             "quote"),
        ]
        for sets, needle in cases:
            cmd = [harness.SLUICED, "--data-dir", os.path.join(d, "data"), "--listen",
                   "127.0.0.1:%d" % harness.free_port()]
            for kv in sets:
                cmd += ["--set", kv]
            p = harness.run(cmd, check=False)
            err = p.stderr.decode("utf-8", "replace")
            assert p.returncode == 2, (sets, p.returncode, err)
            assert needle in err, (sets, err)
    finally:
        import shutil
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    harness.main("native-raw")
