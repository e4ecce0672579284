#!/usr/bin/python3
"""Produce over raw sockets (ktxn.py's TConn, Produce v7, ListOffsets v2,
Fetch v11) against a real sluiced, for what no client library lets a test
send on purpose: a record set with several batches for one partition, and a
batch larger than the broker's shard tail memory (shard.tail.memory.bytes
at its minimum, 1 MiB, with message.max.bytes raised above it).

- A batch larger than the tail memory can never be appended: the answer is
  MESSAGE_TOO_LARGE (10), which clients do not retry, not REQUEST_TIMED_OUT
  (7), which they retry for ever.
- When a later batch of a partition's record set cannot be appended, the
  request fails: it is never acknowledged as a success at the first batch's
  offset with the later batches missing from the log (the broker did that
  before: an acknowledged record lost)."""

import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, free_port, main, test  # noqa: E402
from ktxn import READ_UNCOMMITTED, TConn, new_topic, plain  # noqa: E402

MESSAGE_TOO_LARGE = 10
REQUEST_TIMED_OUT = 7


def settings():
    """1 MiB of tail memory, large batches allowed, the admin endpoint on a
    port of its own (returned too)."""
    port = free_port()
    return {"shard.tail.memory.bytes": 1 << 20, "message.max.bytes": 8000000,
            "admin.listen": "127.0.0.1:%d" % port}, port


def rejected(port, reason):
    """sluice_produce_rejected_total{reason=...} summed over the shards."""
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("sluice_produce_rejected_total{") and 'reason="%s"' % reason in line)


def values(c, topic):
    """Every record value of partition 0 below its high watermark, in
    offset order (a fetch of 1 MiB returns one of these batches at a time)."""
    out, off = [], 0
    while True:
        f = c.fetch1(topic, 0, off, READ_UNCOMMITTED)
        assert f.error == 0, f
        recs = [r for bt in f.batches for r in bt.records]
        if not recs:
            return out
        assert recs[0].offset == off, (off, recs[0].offset)
        out += [r.value for r in recs]
        off = recs[-1].offset + 1


@test
def batch_larger_than_tail_memory_is_message_too_large():
    """A 2 MB batch with 1 MiB of tail memory: MESSAGE_TOO_LARGE at once,
    nothing appended, again on a resend (each counted as a rejected batch,
    reason size); a 500 KB batch is then appended."""
    conf, port = settings()
    with broker(settings=conf) as b, TConn(b.bootstrap) as c:
        new_topic(c, "big")
        for _ in range(2):
            r = c.produce("big", 0, plain([b"x" * 2000000]))
            assert r.error == MESSAGE_TOO_LARGE, r
        assert c.latest("big", 0, READ_UNCOMMITTED) == 0
        assert rejected(port, "size") == 2
        r = c.produce("big", 0, plain([b"y" * 500000]))
        assert r.error == 0 and r.base == 0, r
        assert values(c, "big") == [b"y" * 500000]


@test
def later_batch_failure_fails_the_request():
    """Batches A (600 KB) and B (900 KB) for one partition in one request,
    with 1 MiB of tail memory: A is appended, then B finds no memory (A's
    chunk is still being written). The answer must not be a success unless
    both are in the log; here it is REQUEST_TIMED_OUT (counted as a rejected
    batch, reason other), and resending B alone appends it after A."""
    a, b_ = b"a" * 600000, b"b" * 900000
    conf, port = settings()
    with broker(settings=conf) as b, TConn(b.bootstrap) as c:
        new_topic(c, "two")
        r = c.produce("two", 0, plain([a]) + plain([b_]))
        # A, appended, becomes durable (and visible) on its own
        deadline = time.monotonic() + 10
        while c.latest("two", 0, READ_UNCOMMITTED) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        vs = values(c, "two")
        assert r.error != 0 or vs == [a, b_], \
            "acknowledged (base %d) with %d of the 2 batches in the log" % (r.base, len(vs))
        # the case this test is for happened: B could not be appended
        assert r.error == REQUEST_TIMED_OUT and vs == [a], (r, [len(v) for v in vs])
        assert rejected(port, "other") == 1
        r = c.produce("two", 0, plain([b_]))
        assert r.error == 0 and r.base == 1, r
        assert values(c, "two") == [a, b_]


if __name__ == "__main__":
    main("produce-raw")
