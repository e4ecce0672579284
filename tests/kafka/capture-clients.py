#!/usr/bin/python3
"""tests/kafka/capture-clients.py — record the first request frames real
clients send, as fixtures for tests/unit/test_kafka_fixtures.c.

    tests/kafka/capture-clients.py [OUTDIR]     (default tests/fixtures/kafka)

Starts a tiny Kafka-speaking listener on a free 127.0.0.1 port that answers
just enough (ApiVersions with Sluice's advertised ranges, read from the
generated table in dataplane/kafka/kafka_msgs.c; Metadata naming itself as
the leader of topic "t"; Produce acks) for kcat (librdkafka 2.0.2) and
kafka-python 2.0.2 to produce one message to "t". The first frame of every
(client, api, version) is written to OUTDIR/<client>-<api>-v<version>.bin,
size prefix included. Responses are encoded with kafka-python's protocol
classes, except the flexible ApiVersions v3 body, written by hand.
"""
import os
import re
import socket
import struct
import subprocess
import sys
import threading

from kafka.protocol import types as T
from kafka.protocol.admin import ApiVersionResponse
from kafka.protocol.metadata import MetadataResponse
from kafka.protocol.produce import ProduceResponse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = {0: "produce", 3: "metadata", 18: "apiversions"}


def advertised():
    rows = []
    with open(os.path.join(REPO, "dataplane/kafka/kafka_msgs.c")) as f:
        for m in re.finditer(r'\{ (\d+), "(\w+)", (-?\d+), (-?\d+), (-?\d+), (\d+), (\d+), (true|false),', f.read()):
            if m.group(8) == "true":
                rows.append((int(m.group(1)), int(m.group(6)), int(m.group(7))))
    return rows


def fill(t, vals):
    """kafka-python value for schema t: named fields from vals, else zero."""
    if isinstance(t, T.Schema):
        return tuple(fill(f, vals.get(n, None) if isinstance(vals, dict) else None) if not (
            isinstance(vals, dict) and n in vals and not isinstance(f, (T.Schema, T.Array)))
            else vals[n] for n, f in zip(t.names, t.fields))
    if isinstance(t, T.Array):
        return [fill(t.array_of, v) for v in (vals or [])]
    if isinstance(t, T.String):
        return vals
    if t is T.Bytes:
        return vals
    if t is T.Boolean:
        return bool(vals)
    return vals if vals is not None else 0


def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7f) | 0x80])
        n >>= 7
    return out + bytes([n])


class Listener:
    def __init__(self, outdir):
        self.outdir = outdir
        self.client = "none"
        self.seen = set()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def recv(self, conn, n):
        b = b""
        while len(b) < n:
            chunk = conn.recv(n - len(b))
            if not chunk:
                raise EOFError
            b += chunk
        return b

    def serve(self, conn):
        try:
            while True:
                size = struct.unpack(">i", self.recv(conn, 4))[0]
                msg = self.recv(conn, size)
                key, ver, corr = struct.unpack(">hhi", msg[:8])
                tag = (self.client, key, ver)
                if tag not in self.seen and key in NAMES:
                    self.seen.add(tag)
                    path = os.path.join(self.outdir, "%s-%s-v%d.bin" % (self.client, NAMES[key], ver))
                    with open(path, "wb") as f:
                        f.write(struct.pack(">i", size) + msg)
                body = self.answer(key, ver, msg)
                if body is None:
                    continue
                resp = struct.pack(">i", corr) + body
                conn.sendall(struct.pack(">i", len(resp)) + resp)
        except (EOFError, ConnectionError):
            pass
        finally:
            conn.close()

    def answer(self, key, ver, msg):
        if key == 18 and ver >= 3:
            rows = advertised()
            b = struct.pack(">h", 0) + uvarint(len(rows) + 1)
            for k, lo, hi in rows:
                b += struct.pack(">hhh", k, lo, hi) + b"\0"
            return b + struct.pack(">i", 0) + b"\0"
        if key == 18:
            cls = ApiVersionResponse[ver]
            vals = {"error_code": 0, "api_versions": [
                {"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in advertised()]}
        elif key == 3:
            cls = MetadataResponse[ver]
            vals = {"brokers": [{"node_id": 0, "host": "127.0.0.1", "port": self.port, "rack": None}],
                    "cluster_id": "sluice-capture", "controller_id": 0,
                    "topics": [{"error_code": 0, "topic": "t", "is_internal": False,
                                "partitions": [{"error_code": 0, "partition": 0, "leader": 0,
                                                "replicas": [0], "isr": [0], "offline_replicas": []}]}]}
        elif key == 0:
            acks = struct.unpack(">h", msg[8 + 2 + struct.unpack(">h", msg[8:10])[0]:][2:4])[0] if ver >= 3 else 1
            if acks == 0:
                return None
            cls = ProduceResponse[ver]
            vals = {"topics": [{"topic": "t", "partitions": [
                {"partition": 0, "error_code": 0, "offset": 0, "timestamp": -1, "log_start_offset": 0}]}]}
        else:
            return None
        obj = cls(*fill(cls.SCHEMA, vals))
        return obj.encode()


def run(cmd, **kw):
    print("capture: " + " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, timeout=30, **kw)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "tests/fixtures/kafka")
    os.makedirs(outdir, exist_ok=True)
    lst = Listener(outdir)
    addr = "127.0.0.1:%d" % lst.port

    lst.client = "kcat"
    run(["kcat", "-P", "-b", addr, "-t", "t", "-p", "0", "-K", ":", "-X", "linger.ms=0"],
        input=b"key:hello sluice\n")

    lst.client = "kpy"
    run(["/usr/bin/python3", "-c", """
import sys
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], request_timeout_ms=5000)
p.send('t', key=b'key', value=b'hello sluice', partition=0).get(timeout=10)
p.close()
""", addr])
    for fn in sorted(os.listdir(outdir)):
        print("capture: %s/%s (%d bytes)" % (outdir, fn, os.path.getsize(os.path.join(outdir, fn))))


if __name__ == "__main__":
    main()
