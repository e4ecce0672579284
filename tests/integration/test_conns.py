#!/usr/bin/python3
"""Connections and request memory against a real sluiced, over raw sockets
(kraw.py): what the broker does at its descriptor limit, with large frames,
and with Kafka's connection limits.

- At RLIMIT_NOFILE the accept backs off (it used to be re-armed at once and
  both shards spun on EMFILE): little CPU, one log line, a counter, the
  connections already open still served, new clients served again once
  descriptors are free.
- A connection gives its frame-assembly memory back after a large frame
  (it used to keep its largest frame's buffer until it closed).
- max.connections / max.connections.per.ip close extra connections at once,
  counted; connections.max.idle.ms closes idle and half-sent connections,
  counted; queued.max.request.bytes bounds the memory of frames being read:
  a frame that does not fit waits, one larger than the whole pool is
  refused.

Waits poll a condition under a deadline; the only thresholds are generous
ones (CPU seconds, megabytes)."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import broker, free_port, main, skip, test  # noqa: E402
from kraw import W, Conn  # noqa: E402

PRODUCE = 0

MIB = 1 << 20
DEADLINE = 60.0


def admin():
    port = free_port()
    return {"admin.listen": "127.0.0.1:%d" % port}, port


def metric(port, name, label=None):
    """A family summed over its samples (those with `label` in them)."""
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if label and label not in line:
                continue
            total += float(line.rsplit(" ", 1)[1])
            seen = True
    assert seen, "no %s%s in /metrics" % (name, "{%s}" % label if label else "")
    return total


def wait_for(cond, what, deadline=DEADLINE):
    end = time.monotonic() + deadline
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.05)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def peak_rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def closed_by_peer(s, deadline=DEADLINE):
    """True once the broker closed the socket (EOF or reset), waiting up to
    the deadline."""
    s.settimeout(deadline)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def produce_frame(topic, payload_len, corr=1):
    """A Produce v3 frame of one partition whose record set is
    payload_len bytes of zeros (not a valid batch: the broker reads the
    whole frame, then refuses the batch; its tail memory holds nothing)."""
    body = W().str(None).i16(1).i32(30000)
    body.i32(1).str(topic).i32(1).i32(0).i32(payload_len)
    hdr = W().i16(PRODUCE).i16(3).i32(corr).str("big")
    head = bytes(hdr.b) + bytes(body.b)
    n = len(head) + payload_len
    return n, (n).to_bytes(4, "big") + head


def send_large_produce(c, payload_len, zeros):
    """Send one large Produce on kraw Conn c; returns the correlation id."""
    c.corr += 1
    n, head = produce_frame("big", payload_len, c.corr)
    c.s.sendall(head)
    left = payload_len
    while left:
        k = min(left, len(zeros))
        c.s.sendall(zeros[:k])
        left -= k
    return c.corr


def answered(c, corr):
    """The response's frame arrived (its content does not matter here)."""
    n = int.from_bytes(c._recvn(4), "big")
    body = c._recvn(n)
    return int.from_bytes(body[:4], "big") == corr


@test
def descriptor_limit_backs_off():
    """The broker started with RLIMIT_NOFILE (soft and hard: it cannot
    raise it) 40 above what it holds once started (its internal topics'
    logs hold about 110), then 120 connections: the shards do not spin
    (under 0.5 CPU seconds over 2 s), one log line names the limit, a
    connection opened before still gets answers, and once the extra
    connections are closed a new client is served and
    sluice_accept_errors_total{reason="emfile"} has moved (the admin
    endpoint cannot accept at the limit either)."""
    if not shutil.which("prlimit"):
        skip("no prlimit (util-linux)")
    conf, aport = admin()
    with broker(settings=conf) as b:
        limit = open_fds(b.proc.pid) + 40
    wrap_dir = tempfile.mkdtemp(prefix="sluice-nofile-", dir=harness.TEST_DIR)
    wrapper = os.path.join(wrap_dir, "sluiced")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nexec prlimit --nofile=%d:%d "%s" "$@"\n' % (limit, limit, harness.SLUICED))
    os.chmod(wrapper, 0o755)
    real, harness.SLUICED = harness.SLUICED, wrapper
    try:
        with broker(settings=conf) as b:
            harness.SLUICED = real
            _at_descriptor_limit(b, aport, limit)
    finally:
        harness.SLUICED = real
        shutil.rmtree(wrap_dir, ignore_errors=True)


def _at_descriptor_limit(b, aport, limit):
    pid = b.proc.pid
    keep = Conn(b.bootstrap)
    assert keep.api_versions().error == 0
    extra = []
    for _ in range(120):
        s = socket.socket()
        s.settimeout(10)
        s.connect(("127.0.0.1", b.port))   # the kernel completes it (listen backlog)
        extra.append(s)
    wait_for(lambda: open_fds(pid) >= limit - 2, "the broker to reach its descriptor limit")
    time.sleep(0.5)
    t0 = cpu_seconds(pid)
    time.sleep(2.0)
    burnt = cpu_seconds(pid) - t0
    print("    broker CPU over 2 s at the limit: %.2f s (%d descriptors open)" % (burnt, open_fds(pid)))
    assert burnt < 0.5, "the broker burnt %.2f CPU seconds in 2 s at its descriptor limit" % burnt
    assert keep.api_versions().error == 0
    with open(b.log_path, "rb") as f:
        log = f.read().decode("utf-8", "replace")
    lines = [ln for ln in log.splitlines() if "RLIMIT_NOFILE" in ln]
    assert len(lines) == 1, "expected one log line naming RLIMIT_NOFILE, got:\n" + log[-3000:]
    print("    " + lines[0])
    for s in extra:
        s.close()

    # the backlog's closed connections are accepted and dropped; then a
    # new client is served
    def served():
        try:
            with Conn(b.bootstrap, timeout=5) as c:
                return c.api_versions().error == 0
        except OSError:
            return False
    wait_for(served, "a new client to be served after the extra connections closed")
    assert metric(aport, "sluice_accept_errors_total", 'reason="emfile"') >= 1
    keep.close()


@test
def large_frames_give_memory_back():
    """6 connections each send one 50 MiB Produce (socket.request.max.bytes
    64 MiB; the batch is refused, so the tail holds nothing) and stay open:
    the broker's RSS afterwards is within 40 MiB of its baseline, less than
    one frame (it kept 6 x 50 MiB)."""
    conf, aport = admin()
    conf["socket.request.max.bytes"] = 64 * MIB
    with broker(settings=conf) as b:
        pid = b.proc.pid
        conns = [Conn(b.bootstrap, timeout=120) for _ in range(6)]
        for c in conns:
            assert c.api_versions().error == 0
        base = rss_bytes(pid)
        zeros = bytes(4 * MIB)
        for c in conns:
            corr = send_large_produce(c, 50 * MIB, zeros)
            assert answered(c, corr)
        # the last response may arrive before the broker has taken its
        # frame's buffer back: wait (a deadline, not a threshold) for RSS
        # to settle within 100 MiB of the baseline
        try:
            wait_for(lambda: rss_bytes(pid) - base < 40 * MIB, "RSS to come back", deadline=10)
        except AssertionError:
            pass
        after = rss_bytes(pid)
        print("    RSS baseline %.1f MiB, after 6 x 50 MiB frames %.1f MiB" % (base / MIB, after / MIB))
        assert after - base < 40 * MIB, "RSS grew by %.1f MiB" % ((after - base) / MIB)
        for c in conns:
            assert c.api_versions().error == 0
            c.close()


@test
def large_join_group_gives_memory_back():
    """A JoinGroup whose protocol metadata is 60 MiB (its member leads the
    group, so the answer carries it back): at its peak the broker holds
    three copies, not four (frame, the member's metadata, the encoded
    response; the response memory references the metadata instead of
    copying it): peak RSS under 210 MiB over the baseline. Once answered it
    keeps one copy (the member's metadata, as Kafka does) and no more: RSS
    within 100 MiB of the baseline (it kept the frame and the response
    buffer as well); after LeaveGroup, within 40 MiB."""
    conf, aport = admin()
    conf["socket.request.max.bytes"] = 64 * MIB
    conf["group.initial.rebalance.delay.ms"] = 0
    with broker(settings=conf) as b:
        pid = b.proc.pid
        c = Conn(b.bootstrap, timeout=120)
        assert c.api_versions().error == 0
        base = rss_bytes(pid)
        meta = bytes(60 * MIB)
        j = c.join_group("big", protocols=[("range", meta)])
        assert j.error == 0 and j.leader == j.member_id and len(j.members) == 1, j.error
        assert len(j.members[0].metadata) == len(meta)
        member = j.member_id
        del j

        def settled(limit):
            try:
                wait_for(lambda: rss_bytes(pid) - base < limit, "RSS to come back", deadline=10)
            except AssertionError:
                pass
            return rss_bytes(pid)
        joined = settled(100 * MIB)
        peak = peak_rss_bytes(pid)
        print("    RSS baseline %.1f MiB, peak %.1f MiB, after a 60 MiB JoinGroup %.1f MiB"
              % (base / MIB, peak / MIB, joined / MIB))
        assert peak - base < 210 * MIB, "a 60 MiB JoinGroup peaked at %.1f MiB over the baseline" % (
            (peak - base) / MIB)
        assert joined - base < 100 * MIB, "RSS grew by %.1f MiB" % ((joined - base) / MIB)
        assert c.leave_group("big", member) == 0
        left = settled(40 * MIB)
        print("    after its LeaveGroup %.1f MiB" % (left / MIB))
        assert left - base < 40 * MIB, "RSS grew by %.1f MiB" % ((left - base) / MIB)
        c.close()


@test
def max_connections_closes_extras():
    """max.connections=4: a fifth connection is closed at once and counted
    (reason max_connections); after one closes a new one is served."""
    conf, aport = admin()
    conf["max.connections"] = 4
    with broker(settings=conf) as b:
        conns = [Conn(b.bootstrap) for _ in range(4)]
        for c in conns:
            assert c.api_versions().error == 0
        s = socket.create_connection(("127.0.0.1", b.port))
        assert closed_by_peer(s), "a fifth connection stayed open"
        s.close()
        assert metric(aport, "sluice_connections_rejected_total", 'reason="max_connections"') >= 1
        conns.pop().close()
        wait_for(lambda: metric(aport, "sluice_connections_open") <= 3, "a connection to close")
        with Conn(b.bootstrap) as c:
            assert c.api_versions().error == 0
        for c in conns:
            c.close()


@test
def max_connections_per_ip_closes_extras():
    """max.connections.per.ip=2: a third connection from 127.0.0.1 is
    closed and counted (reason max_connections_per_ip); one from 127.0.0.2
    is served."""
    conf, aport = admin()
    conf["max.connections.per.ip"] = 2
    with broker(settings=conf) as b:
        conns = [Conn(b.bootstrap) for _ in range(2)]
        for c in conns:
            assert c.api_versions().error == 0
        s = socket.create_connection(("127.0.0.1", b.port))
        assert closed_by_peer(s), "a third connection from one address stayed open"
        s.close()
        assert metric(aport, "sluice_connections_rejected_total", 'reason="max_connections_per_ip"') >= 1
        other = socket.create_connection(("127.0.0.1", b.port), source_address=("127.0.0.2", 0))
        c = Conn.__new__(Conn)
        c.s, c.client_id, c.corr = other, "kraw", 0
        assert c.api_versions().error == 0
        c.close()
        for c in conns:
            c.close()


@test
def idle_connections_are_closed():
    """connections.max.idle.ms=1000: a connection that sent nothing more
    and one that sent half a frame (slowloris) are closed by the broker and
    counted; one that sends a request every 200 ms stays open."""
    conf, aport = admin()
    conf["connections.max.idle.ms"] = 1000
    with broker(settings=conf) as b:
        idle = Conn(b.bootstrap)
        assert idle.api_versions().error == 0
        half = socket.create_connection(("127.0.0.1", b.port))
        half.sendall((100).to_bytes(4, "big") + b"\x00\x12\x00\x00")   # 8 of 104 bytes
        active = Conn(b.bootstrap)
        t0 = time.monotonic()
        results = {}

        def watch(name, s):
            results[name] = closed_by_peer(s)
        ws = [threading.Thread(target=watch, args=("idle", idle.s)),
              threading.Thread(target=watch, args=("half", half))]
        for w in ws:
            w.start()
        while any(w.is_alive() for w in ws) or time.monotonic() - t0 < 3.0:
            assert active.api_versions().error == 0
            time.sleep(0.2)
            assert time.monotonic() - t0 < DEADLINE, "idle connections not closed"
        assert results == {"idle": True, "half": True}, results
        assert metric(aport, "sluice_connections_idle_closed_total") >= 2
        assert active.api_versions().error == 0
        active.close()
        idle.close()
        half.close()


@test
def request_memory_pool_bounds_frames():
    """queued.max.request.bytes=24 MiB, 4 connections each send a 10 MiB
    Produce at once: all are answered (those that did not fit waited:
    sluice_request_memory_waits_total moves), the memory in use is back to
    0 after, and a 30 MiB frame (larger than the whole pool) is refused:
    its connection is closed and counted."""
    conf, aport = admin()
    conf["queued.max.request.bytes"] = 24 * MIB
    conf["socket.request.max.bytes"] = 64 * MIB
    with broker(settings=conf) as b:
        conns = [Conn(b.bootstrap, timeout=120) for _ in range(4)]
        zeros = bytes(2 * MIB)
        ok = [False] * len(conns)

        def one(i):
            corr = send_large_produce(conns[i], 10 * MIB, zeros)
            ok[i] = answered(conns[i], corr)
        seen = []
        done = threading.Event()

        def sample():
            while not done.is_set():
                seen.append(metric(aport, "sluice_request_memory_bytes"))
                time.sleep(0.01)
        sampler = threading.Thread(target=sample)
        sampler.start()
        ts = [threading.Thread(target=one, args=(i,)) for i in range(len(conns))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(DEADLINE)
        done.set()
        sampler.join()
        assert ok == [True] * len(conns), ok
        print("    request memory in use, sampled: at most %.1f MiB (limit 24)" % (max(seen) / MIB))
        assert max(seen) <= 24 * MIB, max(seen)
        assert metric(aport, "sluice_request_memory_waits_total") >= 1
        wait_for(lambda: metric(aport, "sluice_request_memory_bytes") == 0, "request memory to be given back")
        big = Conn(b.bootstrap, timeout=120)
        big.corr += 1
        n, head = produce_frame("big", 30 * MIB, big.corr)
        big.s.sendall(head + bytes(64 * 1024))
        assert closed_by_peer(big.s), "a frame larger than queued.max.request.bytes was not refused"
        big.close()
        assert metric(aport, "sluice_request_memory_refused_total") >= 1
        for c in conns:
            assert c.api_versions().error == 0
            c.close()


if __name__ == "__main__":
    main("conns")
