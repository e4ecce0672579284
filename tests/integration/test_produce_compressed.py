#!/usr/bin/python3
"""Compressed batches over raw Produce frames (ktxn.py's TConn, Produce v7)
against a real sluiced: the broker looks inside a compressed batch before it
appends it, as Kafka's LogValidator does.

- A payload that does not decompress (random bytes as gzip, snappy, lz4 or
  zstd) is CORRUPT_MESSAGE (2).
- Inner records that disagree with the header (a header saying 1 record over
  3, or 3 over 1; an inner offset delta of 1,000,000, which made caught-up
  consumers reset and the cleaner delete later values of the key) are
  INVALID_RECORD (87).
- A record whose length runs past the decompressed data is CORRUPT_MESSAGE.
- A payload that inflates beyond the broker's bound (64 MiB) is
  MESSAGE_TOO_LARGE (10).
In each case nothing is appended (the log end offset stays 0). Valid
batches of every codec (snappy both xerial-framed and raw; records larger
than the broker's decompression window; several zstd and gzip frames) are
acknowledged, and kcat (librdkafka) reads every value back.

The codecs come from the system's libzstd, liblz4 and libsnappy through
ctypes (Debian's python has no zstd, lz4 or snappy module) and gzip from
Python's own zlib."""

import ctypes
import ctypes.util
import gzip
import os
import random
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, main, skip, test  # noqa: E402
from ktxn import INVALID_RECORD, READ_UNCOMMITTED, TConn, crc32c, new_topic, varint  # noqa: E402

CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def _lib(name):
    path = ctypes.util.find_library(name)
    if not path:
        skip("lib%s not found" % name)
    return ctypes.CDLL(path)


def zstd(data):
    z = _lib("zstd")
    z.ZSTD_compressBound.restype = ctypes.c_size_t
    z.ZSTD_compress.restype = ctypes.c_size_t
    z.ZSTD_isError.argtypes = [ctypes.c_size_t]
    cap = z.ZSTD_compressBound(ctypes.c_size_t(len(data)))
    out = ctypes.create_string_buffer(cap)
    n = z.ZSTD_compress(out, ctypes.c_size_t(cap), data, ctypes.c_size_t(len(data)), 3)
    assert not z.ZSTD_isError(n)
    return out.raw[:n]


def lz4(data):
    z = _lib("lz4")
    z.LZ4F_compressFrameBound.restype = ctypes.c_size_t
    z.LZ4F_compressFrame.restype = ctypes.c_size_t
    cap = z.LZ4F_compressFrameBound(ctypes.c_size_t(len(data)), None)
    out = ctypes.create_string_buffer(cap)
    n = z.LZ4F_compressFrame(out, ctypes.c_size_t(cap), data, ctypes.c_size_t(len(data)), None)
    assert n < cap or n == cap
    return out.raw[:n]


def snappy_raw(data):
    z = _lib("snappy")
    z.snappy_max_compressed_length.restype = ctypes.c_size_t
    cap = z.snappy_max_compressed_length(ctypes.c_size_t(len(data)))
    out = ctypes.create_string_buffer(cap)
    n = ctypes.c_size_t(cap)
    assert z.snappy_compress(data, ctypes.c_size_t(len(data)), out, ctypes.byref(n)) == 0
    return out.raw[:n.value]


def snappy_xerial(data, block=32768):
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for i in range(0, len(data), block):
        c = snappy_raw(data[i:i + block])
        out += struct.pack(">i", len(c)) + c
    return out


def records(values, deltas=None):
    """The records section (uncompressed) for values, offset deltas 0, 1,
    ... unless given."""
    out = bytearray()
    for i, val in enumerate(values):
        body = b"\x00" + varint(i) + varint(i if deltas is None else deltas[i]) + varint(-1)
        body += varint(len(val)) + val + varint(0)
        out += varint(len(body)) + body
    return bytes(out)


def cbatch(codec, payload, count, last_offset_delta=None, ts=1700000000000):
    """A magic-2 batch with codec in its attributes and payload as its
    records section, the header saying count records; CRC correct."""
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    after_crc = struct.pack(">hiqqqhii", codec, lod, ts, ts + lod, -1, -1, -1, count) + payload
    return struct.pack(">qiibI", 0, 9 + len(after_crc), -1, 2, crc32c(after_crc)) + after_crc


def conf():
    return {"message.max.bytes": 8000000}


def refused(c, topic, blob, want):
    r = c.produce(topic, 0, blob)
    assert r.error == want, "expected error %d, got %r" % (want, r)
    end = c.latest(topic, 0, READ_UNCOMMITTED)
    assert end == 0, "refused, yet the log end offset is %d" % end


def kcat_values(bootstrap, topic, n):
    out = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning",
                          "-c", str(n), "-e", "-q", "-f", "%S %s\n"],
                         capture_output=True, timeout=60, check=True)
    return out.stdout


@test
def garbage_payloads_are_corrupt_message():
    """Random bytes as the payload of each codec (and a valid gzip member
    followed by junk): CORRUPT_MESSAGE, nothing appended."""
    rnd = random.Random(17)
    junk = bytes(rnd.getrandbits(8) for _ in range(3000))
    with broker(settings=conf()) as b, TConn(b.bootstrap) as c:
        new_topic(c, "junk")
        for codec in (GZIP, SNAPPY, LZ4, ZSTD):
            refused(c, "junk", cbatch(codec, junk, 3), CORRUPT_MESSAGE)
        # each codec's magic, then junk
        refused(c, "junk", cbatch(GZIP, b"\x1f\x8b\x08\x00" + junk, 3), CORRUPT_MESSAGE)
        refused(c, "junk", cbatch(ZSTD, b"\x28\xb5\x2f\xfd" + junk, 3), CORRUPT_MESSAGE)
        refused(c, "junk", cbatch(LZ4, b"\x04\x22\x4d\x18" + junk, 3), CORRUPT_MESSAGE)
        refused(c, "junk", cbatch(SNAPPY, b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + junk, 3),
                CORRUPT_MESSAGE)
        refused(c, "junk", cbatch(GZIP, gzip.compress(records([b"a", b"b", b"c"])) + b"junk", 3),
                CORRUPT_MESSAGE)


@test
def inner_count_must_match_the_header():
    """A gzip batch whose header says 1 record but holds 3, one saying 3
    over 1, a zstd one saying 2 over 3, an lz4 one with bytes after its
    record: INVALID_RECORD, nothing appended."""
    with broker(settings=conf()) as b, TConn(b.bootstrap) as c:
        new_topic(c, "count")
        refused(c, "count", cbatch(GZIP, gzip.compress(records([b"a", b"b", b"c"])), 1), INVALID_RECORD)
        refused(c, "count", cbatch(GZIP, gzip.compress(records([b"a"])), 3), INVALID_RECORD)
        refused(c, "count", cbatch(ZSTD, zstd(records([b"a", b"b", b"c"])), 2), INVALID_RECORD)
        # bytes after the last record the header counts
        refused(c, "count", cbatch(LZ4, lz4(records([b"a"]) + b"\x00\x00"), 1), INVALID_RECORD)


@test
def inner_offset_delta_must_be_its_position():
    """An inner record claiming offset delta 1,000,000 (gzip, zstd, lz4,
    snappy), and two records with deltas 1, 0: INVALID_RECORD."""
    with broker(settings=conf()) as b, TConn(b.bootstrap) as c:
        new_topic(c, "delta")
        recs = records([b"poison"], deltas=[1000000])
        for codec, fn in ((GZIP, gzip.compress), (ZSTD, zstd), (LZ4, lz4), (SNAPPY, snappy_xerial)):
            refused(c, "delta", cbatch(codec, fn(recs), 1), INVALID_RECORD)
        refused(c, "delta", cbatch(GZIP, gzip.compress(records([b"x", b"y"], deltas=[1, 0])), 2),
                INVALID_RECORD)


@test
def record_lengths_must_fit():
    """A record whose length runs past the decompressed data, a value
    length past its record, a negative header count: CORRUPT_MESSAGE."""
    good = records([b"abc"])
    overrun = varint(200) + good[1:]
    body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(50) + b"abc" + varint(0)
    value_past = varint(len(body)) + body
    body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(3) + b"abc" + varint(-2)
    neg_headers = varint(len(body)) + body
    with broker(settings=conf()) as b, TConn(b.bootstrap) as c:
        new_topic(c, "len")
        for recs in (overrun, value_past, neg_headers):
            refused(c, "len", cbatch(GZIP, gzip.compress(recs), 1), CORRUPT_MESSAGE)
            refused(c, "len", cbatch(LZ4, lz4(recs), 1), CORRUPT_MESSAGE)


@test
def payload_inflating_past_the_bound_is_refused():
    """One record of 100 MB of zeros, zstd- and gzip-compressed to ~100 KB:
    beyond the broker's 64 MiB decompression bound, MESSAGE_TOO_LARGE."""
    val = bytes(100 << 20)
    recs = records([val])
    with broker(settings=conf()) as b, TConn(b.bootstrap) as c:
        new_topic(c, "bomb")
        refused(c, "bomb", cbatch(ZSTD, zstd(recs), 1), MESSAGE_TOO_LARGE)
        refused(c, "bomb", cbatch(GZIP, gzip.compress(recs, 1), 1), MESSAGE_TOO_LARGE)
        refused(c, "bomb", cbatch(LZ4, lz4(recs), 1), MESSAGE_TOO_LARGE)


@test
def valid_batches_of_every_codec_are_taken():
    """Valid batches of each codec (snappy xerial and raw; zstd as two
    concatenated frames; 3 MB records spanning the broker's decompression
    window) are acknowledged at consecutive offsets, and kcat reads every
    value back; a gzip payload of two members is acknowledged."""
    rnd = random.Random(5)
    small = [b"value %d " % i * (i + 1) for i in range(50)]
    big = [bytes(rnd.choice(b"abcdefgh") for _ in range(3 << 20)), b"tail"]
    expect = []
    with broker(settings=conf()) as b, TConn(b.bootstrap) as c:
        new_topic(c, "ok")
        for vals in (small, big):
            recs = records(vals)
            half = len(recs) // 2
            blobs = [cbatch(GZIP, gzip.compress(recs), len(vals)),
                     cbatch(SNAPPY, snappy_xerial(recs), len(vals)),
                     cbatch(SNAPPY, snappy_raw(recs), len(vals)),
                     cbatch(LZ4, lz4(recs), len(vals)),
                     cbatch(ZSTD, zstd(recs), len(vals)),
                     cbatch(ZSTD, zstd(recs[:half]) + zstd(recs[half:]), len(vals))]
            for blob in blobs:
                r = c.produce("ok", 0, blob)
                assert r.error == 0 and r.base == len(expect), (r, len(expect))
                expect += vals
        assert c.latest("ok", 0, READ_UNCOMMITTED) == len(expect)
        # two gzip members (Java reads them; librdkafka only the first,
        # hence another topic)
        new_topic(c, "members")
        recs = records(small)
        half = len(recs) // 2
        r = c.produce("members", 0, cbatch(GZIP, gzip.compress(recs[:half]) + gzip.compress(recs[half:]),
                                           len(small)))
        assert r.error == 0 and r.base == 0, r
        got = kcat_values(b.bootstrap, "ok", len(expect))
        want = b"".join(b"%d %s\n" % (len(v), v) for v in expect)
        assert got == want, "kcat read %d bytes, expected %d" % (len(got), len(want))


if __name__ == "__main__":
    main("produce-compressed")
