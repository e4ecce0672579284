#!/usr/bin/python3
"""The group workload's zombie, made to go back to its partition's start
(not in make test): a deterministic reproduction of the `nonmonotonic`
read of `group/loss/5n` (docs/fault-results.md).

    /usr/bin/python3 tests/fault/zombie_reset.py [--no-hold] [--keep DIR]

One real broker (build/sluiced) behind a proxy in this script that it
advertises (advertised.listeners), a topic of one partition holding 200
records and no committed offset, and a consumer group:

1. The zombie (a child process, confluent-kafka, `auto.offset.reset=earliest`,
   session 6 s, librdkafka's debug log "cgrp,fetch,consumer,topic") joins
   and is given the partition; with nothing committed its client asks for
   the earliest offset (ListOffsets). The proxy holds the answer to that
   first ListOffsets (and what follows it on that connection), so the
   lookup is still in flight, as it was when the workload's pause came.
2. The zombie is SIGSTOPped; its session expires, a second member is given
   the partition, reads 100 records, commits offset 100 and leaves.
3. The zombie is SIGCONTed: its client finds it was dropped, rejoins and is
   given the partition again in a new generation at the committed 100. The
   held ListOffsets answer is let through when the zombie's JoinGroup
   passes the proxy (or 10 s after the SIGCONT).

The zombie's reads in its new assignment must start at 100 and never go
back. With librdkafka 2.0.2 they do not: the answer to the lookup of the
old assignment is outdated (its op version is older), and librdkafka's
handler of an outdated ListOffsets answer (rd_kafka_toppar_handle_Offset)
schedules a new lookup of the partition's query offset (still "earliest")
500 ms later, which the new assignment's fetch start did not cancel: it
is sent with the current version, its answer (offset 0, right for what
was asked) moves the fetch position to 0, and the records the fetch from
100 had returned are delivered before those from 0.

Prints each read of the new assignment (as ranges), the broker's answers
as the client logged them, and the librdkafka lines of the outdated
answer and of the timed lookup; exits 1 when the new assignment's reads
went back or started below the committed offset, 0 when they did not.
`--no-hold` lets every answer through at once (the control: the lookup is
over before the pause, and the reads are monotonic).
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import harness  # noqa: E402

LIST_OFFSETS, JOIN_GROUP = 2, 11
RECORDS, COMMIT_AT = 200, 100
TOPIC, GROUP = "zr", "zr-group"


class HoldProxy:
    """A TCP proxy to the broker that forwards whole Kafka frames and, when
    `hold` is set, keeps back the response to the first ListOffsets request
    it sees (and every later response on that connection) until release():
    Kafka answers in order on a connection, so what follows it waits too."""

    def __init__(self, target_port, hold):
        self.target = ("127.0.0.1", target_port)
        self.hold = hold
        self.lock = threading.Lock()
        self.held_conn = None            # the connection whose responses are held
        self.held = threading.Event()    # a ListOffsets answer is held
        self.released = threading.Event()
        self.release_on_join = threading.Event()
        self.release_reason, self.released_at = None, None
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.closing = False
        threading.Thread(target=self.accept, daemon=True).start()

    def release(self, reason):
        with self.lock:
            if self.released.is_set():
                return
            self.release_reason, self.released_at = reason, time.monotonic()
            self.released.set()

    def accept(self):
        while not self.closing:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                b = socket.create_connection(self.target)
            except OSError:                  # the broker has stopped
                c.close()
                continue
            conn = {"corr": {}, "c": c, "b": b}
            threading.Thread(target=self.upstream, args=(conn,), daemon=True).start()
            threading.Thread(target=self.downstream, args=(conn,), daemon=True).start()

    @staticmethod
    def frame(s):
        hdr = b""
        while len(hdr) < 4:
            chunk = s.recv(4 - len(hdr))
            if not chunk:
                return None
            hdr += chunk
        n = struct.unpack(">i", hdr)[0]
        body = b""
        while len(body) < n:
            chunk = s.recv(min(65536, n - len(body)))
            if not chunk:
                return None
            body += chunk
        return hdr + body

    def upstream(self, conn):
        try:
            while True:
                f = self.frame(conn["c"])
                if f is None:
                    break
                key, _ver, corr = struct.unpack(">hhi", f[4:12])
                conn["corr"][corr] = key
                if key == JOIN_GROUP and self.release_on_join.is_set():
                    self.release("the zombie's JoinGroup passed")
                conn["b"].sendall(f)
        except OSError:
            pass
        for s in (conn["b"], conn["c"]):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def downstream(self, conn):
        try:
            while True:
                f = self.frame(conn["b"])
                if f is None:
                    break
                corr = struct.unpack(">i", f[4:8])[0]
                key = conn["corr"].pop(corr, None)
                with self.lock:
                    if self.hold and key == LIST_OFFSETS and self.held_conn is None:
                        self.held_conn = conn
                        self.held.set()
                    holding = self.held_conn is conn
                if holding:
                    self.released.wait()
                conn["c"].sendall(f)
        except OSError:
            pass
        for s in (conn["b"], conn["c"]):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.closing = True
        self.release("closing")
        self.ls.close()


ZOMBIE = r'''
import json, os, sys, time
from confluent_kafka import Consumer
out = open(sys.argv[2], "a", buffering=1)
def line(**kw):
    kw["t"] = time.monotonic_ns()
    out.write(json.dumps(kw) + "\n")
session = [0]
def on_assign(c, parts):
    session[0] += 1
    line(type="assign", session=session[0], partitions=[[p.topic, p.partition, p.offset] for p in parts])
def on_revoke(c, parts):
    line(type="revoke", session=session[0], partitions=[[p.topic, p.partition] for p in parts])
def on_lost(c, parts):
    line(type="lost", session=session[0], partitions=[[p.topic, p.partition] for p in parts])
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "%s", "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
              "enable.partition.eof": False, "debug": "cgrp,fetch,consumer,topic", "log_level": 7})
c.subscribe(["%s"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
while not os.path.exists(sys.argv[3]):
    for m in c.consume(200, 0.2):
        if m.error():
            line(type="error", error=m.error().name())
        else:
            line(type="read", session=session[0], partition=m.partition(), offset=m.offset())
c.close()
''' % (GROUP, TOPIC)


def lines(path):
    try:
        with open(path) as f:
            return [json.loads(x) for x in f if x.endswith("\n")]
    except OSError:
        return []


def until(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise SystemExit("timed out after %ds waiting for %s" % (timeout, what))


def ranges(offsets):
    out = []
    for o in offsets:
        if out and o == out[-1][1] + 1:
            out[-1][1] = o
        else:
            out.append([o, o])
    return ", ".join("%d-%d" % (a, b) if a != b else str(a) for a, b in out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-hold", action="store_true", help="let every answer through at once (the control)")
    ap.add_argument("--keep", help="copy the zombie's history and librdkafka log here")
    a = ap.parse_args()
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    work = harness.temp_dir("sluice-zombie-reset-")
    hist, log, stop = (os.path.join(work, n) for n in ("zombie.jsonl", "zombie.log", "STOP"))
    port = harness.free_port()
    proxy, z, zlog = None, None, None
    try:
        # the broker advertises the proxy's address, so that the clients
        # reach it through the proxy after the bootstrap too
        proxy = HoldProxy(port, hold=not a.no_hold)
        boot = "127.0.0.1:%d" % proxy.port
        with harness.broker(port=port, settings={"advertised.listeners": "PLAINTEXT://" + boot,
                                                 "group.initial.rebalance.delay.ms": "0"}):
            adm = AdminClient({"bootstrap.servers": boot, "log_level": 0})
            for f in adm.create_topics([NewTopic(TOPIC, 1, 1)]).values():
                f.result(30)
            p = Producer({"bootstrap.servers": boot, "linger.ms": 5, "log_level": 0})
            for i in range(RECORDS):
                p.produce(TOPIC, value=b"r%d" % i, partition=0)
            assert p.flush(30) == 0, "records not acknowledged"

            zlog = open(log, "w")
            z = subprocess.Popen([sys.executable, "-c", ZOMBIE, boot, hist, stop],
                                 stdout=subprocess.DEVNULL, stderr=zlog)
            until(lambda: any(x["type"] == "assign" and x["partitions"] for x in lines(hist)), 60,
                  "the zombie's first assignment")
            if not a.no_hold:
                until(proxy.held.is_set, 30, "the zombie's ListOffsets answer to be held")
            else:
                until(lambda: any(x["type"] == "read" for x in lines(hist)), 30, "the zombie's first read")
            z.send_signal(signal.SIGSTOP)
            t_stop = time.monotonic()

            # the other member: given the partition once the zombie's
            # session has expired; reads to COMMIT_AT, commits, leaves
            m = Consumer({"bootstrap.servers": boot, "group.id": GROUP, "enable.auto.commit": False,
                          "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                          "heartbeat.interval.ms": 500, "log_level": 0})
            got = []
            m.subscribe([TOPIC], on_assign=lambda c, ps: got.append(("assign", [x.partition for x in ps])))
            nxt = None
            deadline = time.monotonic() + 60
            while (nxt is None or nxt < COMMIT_AT) and time.monotonic() < deadline:
                for msg in m.consume(50, 0.2):
                    if not msg.error() and msg.offset() < COMMIT_AT:
                        nxt = msg.offset() + 1
            if nxt is None or nxt < COMMIT_AT:
                raise SystemExit("the other member did not read to %d (assignments %s)" % (COMMIT_AT, got))
            m.commit(offsets=[TopicPartition(TOPIC, 0, COMMIT_AT)], asynchronous=False)
            m.close()
            paused = time.monotonic() - t_stop

            proxy.release_on_join.set()
            z.send_signal(signal.SIGCONT)
            if a.no_hold:
                proxy.release("nothing held")
            guard = threading.Timer(10, proxy.release, args=("10 s after the SIGCONT",))
            guard.daemon = True
            guard.start()

            def second_done():
                h = lines(hist)
                s2 = [x for x in h if x["type"] == "assign" and x["partitions"] and x["session"] >= 2]
                if not s2:
                    return None
                s = s2[0]["session"]
                reads = [x["offset"] for x in h if x["type"] == "read" and x["session"] == s]
                # done once the new assignment has read to the end at
                # least 2 s after the held answer passed: a lookup it makes
                # librdkafka schedule goes out 500 ms after it
                return (s, reads) if reads and reads[-1] == RECORDS - 1 and proxy.released.is_set() and \
                    time.monotonic() > proxy.released_at + 2 else None

            s, reads = until(second_done, 60, "the zombie's new assignment to read to the end")
            open(stop, "w").close()
            z.wait(30)
            z = None
        h = lines(hist)
        with open(log, errors="replace") as f:
            rdk = f.read().splitlines()
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            shutil.copy(hist, a.keep)
            shutil.copy(log, a.keep)
    finally:
        if z is not None:
            z.send_signal(signal.SIGCONT)
            z.kill()
            z.wait()
        if zlog:
            zlog.close()
        if proxy:
            proxy.close()
        shutil.rmtree(work, ignore_errors=True)

    print("zombie paused %.1f s; the held answer passed: %s" % (paused, proxy.release_reason))
    for x in h:
        if x["type"] in ("assign", "revoke", "lost"):
            print("  %s session %d %s" % (x["type"], x["session"], x["partitions"]))
    print("new assignment (session %d) read: %s" % (s, ranges(reads)))
    pat = re.compile(r"outdated offset response|timed offset query|Offset reply for|returned offset|"
                     r"Start fetch|Stopping fetch|Offset .* request for")
    for ln in rdk:
        if TOPIC in ln and pat.search(ln):
            print("  rdkafka: " + ln.split("|", 3)[-1][:200])
    bad = [(i, o) for i, o in enumerate(reads) if (i and o <= reads[i - 1]) or o < COMMIT_AT]
    if bad:
        i, o = bad[0]
        print("NONMONOTONIC: the new assignment read offset %d after %s (committed %d)" % (
            o, reads[i - 1] if i else "nothing", COMMIT_AT))
        return 1
    print("monotonic: the new assignment read from %d on, never back" % COMMIT_AT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
