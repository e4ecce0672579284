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

The clients write the workloads' histories (tools/sluicefault/history.py:
the producer zr-p1, the zombie zr-z1 and its zr-z1-pauser, the other
member zr-m1, and the workloads' final read), and the checker reads them:
it must count the jump back as client-stale-reset (1, nothing else), and
nothing at all when there was none; when it does not, exit 3.
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
TOOLS = os.path.join(HERE, "..", "..", "tools")
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, TOOLS)
import harness  # noqa: E402
from sluicefault import checker, history, workload  # noqa: E402

LIST_OFFSETS, JOIN_GROUP = 2, 11
RECORDS, COMMIT_AT = 200, 100
TOPIC, GROUP = "zr", "zr-group"
ZOMBIE_NAME, MEMBER_NAME, PRODUCER_NAME = "zr-z1", "zr-m1", "zr-p1"


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
import os, sys, time
from confluent_kafka import Consumer
from sluicefault.history import Writer
from sluicefault.workload import group_meta, read_line
w = Writer(sys.argv[2], "%(zombie)s")
session = [0]
def fields(c):
    gen, member = group_meta(c)
    return dict(generation=gen, member=member, session=session[0], group="%(group)s", auto_offset_reset="earliest",
                consumer=1)
def on_assign(c, parts):
    session[0] += 1
    w.write("assign", partitions=[[p.topic, p.partition] for p in parts], **fields(c))
def on_revoke(c, parts, lost=False):
    w.write("revoke", partitions=[[p.topic, p.partition] for p in parts], lost=lost, **fields(c))
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "%(group)s", "client.id": "%(zombie)s",
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 500, "enable.partition.eof": False, "debug": "cgrp,fetch,consumer,topic",
              "log_level": 7})
c.subscribe(["%(topic)s"], on_assign=on_assign, on_revoke=on_revoke,
            on_lost=lambda c, parts: on_revoke(c, parts, lost=True))
while not os.path.exists(sys.argv[3]):
    for m in c.consume(200, 0.2):
        if m.error():
            w.write("error", error=m.error().name(), what="read")
        else:
            read_line(w, m, "%(zombie)s", "read_uncommitted", session[0])
c.close()
w.close()
''' % dict(group=GROUP, topic=TOPIC, zombie=ZOMBIE_NAME)


class Member:
    """The other member's history lines, as the group workload writes
    them (tools/sluicefault/workload.py)."""

    def __init__(self, out_dir):
        self.w = history.Writer(out_dir, MEMBER_NAME)
        self.session = 0
        self.assigned = []

    def fields(self, c):
        gen, member = workload.group_meta(c)
        return dict(generation=gen, member=member, session=self.session, group=GROUP, auto_offset_reset="earliest",
                    consumer=1)

    def on_assign(self, c, parts):
        self.session += 1
        self.assigned.append([p.partition for p in parts])
        self.w.write("assign", partitions=[[p.topic, p.partition] for p in parts], **self.fields(c))

    def on_revoke(self, c, parts, lost=False):
        self.w.write("revoke", partitions=[[p.topic, p.partition] for p in parts], lost=lost, **self.fields(c))


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
    ap.add_argument("--keep", help="copy the run's histories and the zombie's librdkafka log here")
    a = ap.parse_args()
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    work = harness.temp_dir("sluice-zombie-reset-")
    hdir, log, stop = (os.path.join(work, n) for n in ("history", "zombie.log", "STOP"))
    hist = os.path.join(hdir, ZOMBIE_NAME + ".jsonl")
    os.makedirs(hdir)
    pw = history.Writer(hdir, PRODUCER_NAME)
    pauser = history.Writer(hdir, ZOMBIE_NAME + "-pauser")
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

            def acked(err, msg):
                if err is None:
                    pw.write("ack", value=msg.value().decode(), topic=msg.topic(), partition=msg.partition(),
                             offset=msg.offset())
                else:
                    pw.write("fail", value=msg.value().decode(), error=err.name(), definite=False)
            for i in range(RECORDS):
                value = "%s-%d" % (PRODUCER_NAME, i)
                pw.write("send", value=value, key=None, topic=TOPIC, partition=0, txn=None)
                p.produce(TOPIC, value=value.encode(), partition=0, on_delivery=acked)
            assert p.flush(30) == 0, "records not acknowledged"

            zlog = open(log, "w")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [os.path.abspath(TOOLS)] + [x for x in [os.environ.get("PYTHONPATH")] if x]))
            z = subprocess.Popen([sys.executable, "-c", ZOMBIE, boot, hdir, stop],
                                 stdout=subprocess.DEVNULL, stderr=zlog, env=env)
            until(lambda: any(x["type"] == "assign" and x["partitions"] for x in lines(hist)), 60,
                  "the zombie's first assignment")
            if not a.no_hold:
                until(proxy.held.is_set, 30, "the zombie's ListOffsets answer to be held")
            else:
                until(lambda: any(x["type"] == "read" for x in lines(hist)), 30, "the zombie's first read")
            pauser.write("pause", phase="start", target=ZOMBIE_NAME, pid=z.pid)
            z.send_signal(signal.SIGSTOP)
            t_stop = time.monotonic()

            # the other member: given the partition once the zombie's
            # session has expired; reads to COMMIT_AT, commits, leaves
            m = Consumer({"bootstrap.servers": boot, "group.id": GROUP, "client.id": MEMBER_NAME,
                          "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                          "heartbeat.interval.ms": 500, "log_level": 0})
            mh = Member(hdir)
            m.subscribe([TOPIC], on_assign=mh.on_assign, on_revoke=mh.on_revoke,
                        on_lost=lambda c, ps: mh.on_revoke(c, ps, lost=True))
            nxt = None
            deadline = time.monotonic() + 60
            while (nxt is None or nxt < COMMIT_AT) and time.monotonic() < deadline:
                for msg in m.consume(50, 0.2):
                    if msg.error():
                        mh.w.write("error", error=msg.error().name(), what="read")
                        continue
                    workload.read_line(mh.w, msg, MEMBER_NAME, "read_uncommitted", mh.session)
                    if msg.offset() < COMMIT_AT:
                        nxt = msg.offset() + 1
            if nxt is None or nxt < COMMIT_AT:
                raise SystemExit("the other member did not read to %d (assignments %s)" % (COMMIT_AT, mh.assigned))
            gen, member = workload.group_meta(m)
            t0 = time.monotonic_ns()
            cres = m.commit(offsets=[TopicPartition(TOPIC, 0, COMMIT_AT)], asynchronous=False)
            bad = [tp.error for tp in cres or () if tp.error is not None]
            mh.w.write("commit", partitions=[[TOPIC, 0, COMMIT_AT]], generation=gen, member=member, ok=not bad,
                       error=bad[0].name() if bad else None, t0=t0, group=GROUP)
            assert not bad, "the other member's commit failed: %s" % bad
            m.close()
            mh.w.close()
            paused = time.monotonic() - t_stop

            proxy.release_on_join.set()
            z.send_signal(signal.SIGCONT)
            pauser.write("pause", phase="stop", target=ZOMBIE_NAME, pid=z.pid)
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
            # the final read (clients final-ru and final-rc), as the
            # workloads' --final writes it
            workload.final_read(boot, [TOPIC], hdir, timeout=60)
        for w in (pw, pauser):
            w.close()
        h = lines(hist)
        verdict = checker.check([hdir])
        with open(log, errors="replace") as f:
            rdk = f.read().splitlines()
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            for f in os.listdir(hdir):
                shutil.copy(os.path.join(hdir, f), a.keep)
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
        if x["type"] in ("assign", "revoke"):
            print("  %s%s session %d generation %s %s" % (x["type"], " (lost)" if x.get("lost") else "", x["session"],
                                                         x["generation"], x["partitions"]))
    print("new assignment (session %d) read: %s" % (s, ranges(reads)))
    pat = re.compile(r"outdated offset response|timed offset query|Offset reply for|returned offset|"
                     r"Start fetch|Stopping fetch|Offset .* request for")
    for ln in rdk:
        if TOPIC in ln and pat.search(ln):
            print("  rdkafka: " + ln.split("|", 3)[-1][:200])
    # the checker on the run's histories: the jump back is the client's
    # stale offset reset (client-stale-reset), nothing else is counted
    found = {k: verdict[k] for k in checker.ANOMALIES + (checker.STALE_RESET,) if verdict[k]}
    print("checker: %s" % (found or "nothing"))
    for row in checker.table(verdict).splitlines():
        if row.startswith(checker.STALE_RESET) and verdict[checker.STALE_RESET]:
            print("  " + row)
    bad = [(i, o) for i, o in enumerate(reads) if (i and o <= reads[i - 1]) or o < COMMIT_AT]
    want = {checker.STALE_RESET: 1} if bad else {}
    if found != want:
        print("CHECKER DISAGREES: it found %s where the reads call for %s" % (found or "nothing", want or "nothing"))
        return 3
    if bad:
        i, o = bad[0]
        print("NONMONOTONIC: the new assignment read offset %d after %s (committed %d)" % (
            o, reads[i - 1] if i else "nothing", COMMIT_AT))
        return 1
    print("monotonic: the new assignment read from %d on, never back" % COMMIT_AT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
