#!/usr/bin/python3
"""The version table of docs/kafka-protocol.md ("Versions against Kafka")
against a real sluiced: its Sluice column is exactly what ApiVersions v0
and v3 advertise (every API advertised is in the table, every API in the
table is advertised, with the same minimum and maximum), and its Kafka
column is the validVersions of the message definitions the codec is
generated from (../shared/kafka-protocol/messages; that half is said not
checked, and the script still fails on the other half, when ../shared is
not beside the repository). Every row whose ranges differ gives a reason.

Run: /usr/bin/python3 tests/integration/test_version_table.py
"""

import glob
import json
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, broker, main, test  # noqa: E402
from kraw import API_VERSIONS, Conn, W, read_uvarint  # noqa: E402

DOC = os.path.join(REPO, "docs", "kafka-protocol.md")
MESSAGES = os.path.join(REPO, "..", "shared", "kafka-protocol", "messages")


def rng(s):
    lo, _, hi = s.partition("-")
    return int(lo), int(hi or lo)


def doc_table():
    text = open(DOC).read()
    sec = text.split("## Versions against Kafka", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in sec.splitlines():
        m = re.match(r"^\| (\d+) \| (\w+) \| ([\d-]+) \| ([\d-]+) \| (.*) \|$", line)
        if m:
            k = int(m.group(1))
            assert k not in rows, "key %d twice in the table" % k
            rows[k] = (m.group(2), rng(m.group(3)), rng(m.group(4)), m.group(5).strip())
    assert len(rows) > 30, "the table has %d rows: not found?" % len(rows)
    return rows


def api_versions_v3(c):
    """ApiVersions v3 (flexible request, response header v0 as Kafka's)."""
    c.corr += 1
    hdr = W().i16(API_VERSIONS).i16(3).i32(c.corr).str(c.client_id).b + b"\x00"
    body = b"\x07sluice\x02t\x00"   # compact strings "sluice" and "t", no tags
    msg = bytes(hdr) + body
    c.s.sendall(struct.pack(">i", len(msg)) + msg)
    r = c.recv(c.corr)
    err = r.i16()
    n = read_uvarint(r) - 1
    apis = {}
    for _ in range(n):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        assert read_uvarint(r) == 0
        apis[k] = (lo, hi)
    return err, apis


@test
def sluice_column_is_what_api_versions_advertises():
    rows = doc_table()
    want = {k: v[2] for k, v in rows.items()}
    with broker() as b:
        with Conn(b.bootstrap) as c:
            v0 = c.api_versions()
            err3, v3 = api_versions_v3(c)
    assert v0.error == 0 and err3 == 0, (v0.error, err3)
    for name, got in (("v0", v0.apis), ("v3", v3)):
        missing = sorted(set(got) - set(want))
        extra = sorted(set(want) - set(got))
        assert not missing, "ApiVersions %s advertises keys the table lacks: %s" % (name, missing)
        assert not extra, "the table lists keys ApiVersions %s does not advertise: %s" % (name, extra)
        diff = {k: (want[k], got[k]) for k in want if tuple(got[k]) != want[k]}
        assert not diff, "table (doc, broker) differ for ApiVersions %s: %s" % (name, diff)


@test
def every_difference_has_a_reason():
    for k, (name, kafka, sluice, why) in doc_table().items():
        if kafka != sluice:
            assert why and why != "the same", "%s (%d): Kafka %s, Sluice %s, no reason given" % (name, k, kafka, sluice)
        else:
            assert why == "the same", "%s (%d): the same ranges but %r" % (name, k, why)
        # no old version dropped without a reason naming it
        if sluice[0] > kafka[0]:
            assert re.search(r"\b%s\b|\b0-%d\b" % (kafka[0], sluice[0] - 1), why), (name, why)


@test
def an_unserved_version_is_said_once_a_minute():
    """A request of a version not served (Fetch v0: its response has no
    error code, so the connection closes) is said on stderr, naming the
    API, version, client and what is served, once a minute per shard at
    most (a second one, ListOffsets v0, within the minute is counted, not
    said). Sarama's OffsetCommit v1 failed this way, unseen."""
    with broker(shards=1) as b:
        for api, ver in ((1, 0), (2, 0)):
            c = Conn(b.bootstrap, client_id="old-client")
            c.send(api, ver, b"")
            try:
                c.recv(c.corr)
                closed = False
            except (ConnectionError, OSError, struct.error, EOFError, ValueError):
                closed = True
            c.close()
            assert closed, "v%d of ApiKey %d: answered, not closed" % (ver, api)
        with Conn(b.bootstrap) as c:   # the broker serves on
            assert c.api_versions().error == 0
        log = open(b.log_path).read()
        said = re.findall(r"^sluiced: warning: shard 0: (\S+) \(ApiKey (\d+)\) v(\d+) from (\S+) "
                          r"\(client id '([^']*)'\) is not served: Sluice serves (\d+)-(\d+).*$", log, re.M)
        assert said == [("Fetch", "1", "0", "/127.0.0.1", "old-client", "4", "15")], log
        assert "1 such requests on this shard" in log, log


@test
def kafka_column_is_the_definitions():
    if not os.path.isdir(MESSAGES):
        print("  Kafka column not checked: %s not found (the Sluice column was)" % MESSAGES)
        return
    valid = {}
    for f in glob.glob(os.path.join(MESSAGES, "*Request.json")):
        j = json.loads("\n".join(x for x in open(f) if not x.strip().startswith("//")))
        valid[j["apiKey"]] = (j["name"].replace("Request", ""), rng(j["validVersions"]))
    for k, (name, kafka, _, _) in doc_table().items():
        assert valid[k] == (name, kafka), "key %d: table %s %s, definitions %s" % (k, name, kafka, valid[k])


if __name__ == "__main__":
    main("version-table")
