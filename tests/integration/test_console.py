#!/usr/bin/python3
"""The web console (docs/console.md) against a real sluiced: its pages in
Debian's chromium (headless, driven by puppeteer-core from
tests/integration/console, installed by `npm ci` from its package-lock.json)
load without console errors and show the figures sluicectl and /metrics
give for the same broker (a partition's high watermark, a group's committed
offset and lag after a known produce and commit); screenshots of each page
are kept in build/test-artifacts/console/. Its JSON endpoints under /v1/
answer bad paths, methods and parameters with the right status; its live
stream (/v1/stream, Server-Sent Events) sends one sample a second whose
record count matches what was produced, resumes after Last-Event-ID, and
serves at most 16 viewers at once (503 beyond); its record browser
(/v1/records) gives back what kcat wrote byte for byte and shows it as
text, JSON or hex; an open transaction shows with its age and the
records it holds back from read_committed consumers."""

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, REPO, SLUICECTL, broker, main, run, test  # noqa: E402

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK_DIR = os.path.join(HERE, "console")
NODE = os.environ.get("NODE", "node")
KCAT = os.environ.get("KCAT", "kcat")
ARTIFACTS = os.path.join(REPO, "build", "test-artifacts", "console")


def http(b, path, method="GET", headers=None):
    """(status, headers, body bytes) of one request to b's admin endpoint."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (b.admin, path), method=method, headers=headers or {})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=HANG_GUARD) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def get_json(b, path):
    st, _, body = http(b, path)
    assert st == 200, (path, st, body)
    return json.loads(body)


def ctl(b, *args, input=None):
    p = run([SLUICECTL, "-b", b.bootstrap, "--admin", "127.0.0.1:%d" % b.admin] + list(args), input=input)
    return p.stdout.decode()


def metric(b, name, **labels):
    _, _, body = http(b, "/metrics")
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == str(v) for k, v in labels.items()):
                return s.value
    return None


def produce(b, topic, partition, n, prefix):
    run([KCAT, "-P", "-b", b.bootstrap, "-t", topic, "-p", str(partition)],
        input=b"".join(b"%s-%d\n" % (prefix, i) for i in range(n)))


def until(what, fn):
    """fn() until it returns something true, at most HANG_GUARD seconds."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        v = fn()
        if v:
            return v
        assert time.monotonic() < deadline, "waited %d s for %s" % (HANG_GUARD, what)
        time.sleep(0.2)


def browse(b, *pages):
    """Run console_check.js over pages ("name|#hash|ready[|WxH[|theme]]");
    its JSON answer, per page: ready, errors, texts."""
    if not os.path.exists(os.path.join(CHECK_DIR, "node_modules", "puppeteer-core")):
        run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=CHECK_DIR)
    os.makedirs(ARTIFACTS, exist_ok=True)
    p = run([NODE, os.path.join(CHECK_DIR, "console_check.js"), "http://127.0.0.1:%d" % b.admin, ARTIFACTS]
            + list(pages), cwd=CHECK_DIR)
    return json.loads(p.stdout.decode().strip().splitlines()[-1])


@test
def the_pages_load_in_chromium_and_show_what_sluicectl_and_metrics_say():
    """Three partitions with 120, 50 and 0 records (kcat), a librdkafka
    group member that committed 100, 50 and 0: the topic page's high
    watermarks and the group page's committed offsets and lags are the
    broker's, and equal sluicectl's group describe and /metrics; every
    page loads in chromium with no console error, no failed request and no
    error response, at 1280x800, at a phone's width (390 px, nothing wider
    than the screen), and dark. The group's rebalance timeline shows the
    join that started generation 1, by its member's client id."""
    from confluent_kafka import Consumer, TopicPartition
    with broker(admin=True, shards=2) as b:
        ctl(b, "topic", "create", "orders", "-p", "3")
        produce(b, "orders", 0, 120, b"a")
        produce(b, "orders", 1, 50, b"b")
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "billing", "client.id": "billing-1",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        try:
            c.subscribe(["orders"])
            until("an assignment", lambda: c.poll(0.2) is None and c.assignment())
            c.commit(offsets=[TopicPartition("orders", 0, 100), TopicPartition("orders", 1, 50),
                              TopicPartition("orders", 2, 0)], asynchronous=False)

            def lags():
                g = get_json(b, "/v1/groups/billing")
                offs = {o["partition"]: o for o in g["offsets"]}
                return offs if len(offs) == 3 and all(o["lag"] >= 0 for o in offs.values()) else None
            offs = until("the lag scan", lags)
            assert {p: (o["committed"], o["high_watermark"], o["lag"]) for p, o in offs.items()} == \
                {0: (100, 120, 20), 1: (50, 50, 0), 2: (0, 0, 0)}, offs
            assert offs[0]["oldest_unconsumed_age_ms"] >= 0 and offs[1]["oldest_unconsumed_age_ms"] == 0, offs
            g = get_json(b, "/v1/groups/billing")
            assert g["state"] == "Stable" and g["protocol_type"] == "consumer", g
            assert [m["client_id"] for m in g["members"]] == ["billing-1"], g
            assert sorted(a["partition"] for a in g["members"][0]["assignment"]) == [0, 1, 2], g
            # the broker's own lag history (a sample each 5 s): 20 records behind
            hist = until("a lag sample of 20", lambda: (lambda h: h if h and h[-1][1] == 20 else None)(
                get_json(b, "/v1/groups/billing")["lag_history"]))
            assert all(t > 0 for t, _ in hist), hist
            # the rebalance that made generation 1: started by billing-1's join
            assert [(e["what"], e["who"], e["generation"]) for e in g["rebalances"]] == \
                [("join", "billing-1", 0), ("generation", "", 1)], g["rebalances"]

            d = json.loads(ctl(b, "--format", "json", "group", "describe", "billing"))
            s = {o["partition"]: (o["committed_offset"], o["high_watermark"], o["lag"]) for o in d["offsets"]}
            assert s == {p: (o["committed"], o["high_watermark"], o["lag"]) for p, o in offs.items()}, (s, offs)
            assert metric(b, "sluice_group_lag_records", group="billing", topic="orders", partition=0) == 20
            t = get_json(b, "/v1/topics/orders")
            hw = {p["partition"]: p["high_watermark"] for p in t["partition_list"]}
            assert hw == {0: 120, 1: 50, 2: 0}, t
            for p in range(3):
                assert metric(b, "sluice_partition_high_watermark", topic="orders", partition=p) == hw[p]
            cl = get_json(b, "/v1/cluster")
            assert cl["status"] == "ready" and [x["id"] for x in cl["brokers"]] == [cl["node_id"]], cl
            assert len(cl["shards"]) == 2 and cl["partitions"]["offline"] == 0, cl

            shutil.rmtree(ARTIFACTS, ignore_errors=True)
            r = browse(b, "overview|#/|overview", "topics|#/topics|topics", "topic|#/topics/orders|topics-one",
                       "groups|#/groups|groups", "group|#/groups/billing|groups-one",
                       "overview-phone|#/|overview|390x844", "group-dark|#/groups/billing|groups-one|1280x800|dark")
        finally:
            c.close()
        for name, page in r.items():
            assert page["errors"] == [] and page["ready"] == page["ready"].strip(), (name, page)
            assert os.path.getsize(os.path.join(ARTIFACTS, name + ".png")) > 10000, name
        tx = {name: page["texts"] for name, page in r.items()}
        total = cl["partitions"]["total"]
        assert tx["overview"]["online"] == "%s / %s" % (format(total, ","), format(total, ",")), tx["overview"]
        assert tx["overview"]["__charts"] == 3, tx["overview"]
        assert [tx["topic"]["hw-%d" % p] for p in range(3)] == ["120", "50", "0"], tx["topic"]
        assert "orders" in tx["topics"]["topics"], tx["topics"]
        assert tx["groups"]["group-lag-billing"] == "20", tx["groups"]
        for name in ("group", "group-dark"):
            assert [tx[name]["lag-orders-%d" % p] for p in range(3)] == ["20", "0", "0"], tx[name]
            assert [tx[name]["committed-orders-%d" % p] for p in range(3)] == ["100", "50", "0"], tx[name]
            assert tx[name]["group-lag"] == "20" and tx[name]["group-state"] == "Stable", tx[name]
            assert "started: join\tbilling-1" in tx[name]["rebalances"], tx[name]["rebalances"]
            assert "generation 1 completed" in tx[name]["rebalances"], tx[name]["rebalances"]
            assert "\t20" in tx[name]["chart-table"], tx[name]["chart-table"]   # the lag chart's last value
        assert tx["group-dark"]["__theme"] == "dark" and tx["group"]["__theme"] == "light", tx
        assert tx["overview-phone"]["__width"] <= 390, tx["overview-phone"]


@test
def the_json_endpoints_answer_bad_requests_with_the_right_status():
    """Unknown topics and groups 404, an unknown /v1/ path 404 naming the
    endpoints, a POST 405, a bad stream position 400, an over-long URL
    refused by the endpoint (414 or 431), / and /ui sent to /ui/; the files
    carry their types and a Content-Security-Policy; the broker is healthy
    after."""
    with broker(admin=True) as b:
        ctl(b, "topic", "create", "t", "-p", "1")
        for path in ("/v1/topics/nope", "/v1/groups/nope", "/ui/nope.js"):
            st, _, body = http(b, path)
            assert st == 404, (path, st, body)
        st, _, body = http(b, "/v1/bogus")
        assert st == 404 and b"/v1/topics" in body and b"/v1/stream" in body, body
        st, h, body = http(b, "/v1/topics", method="POST")
        assert st == 405 and h["Allow"] == "GET, HEAD", (st, body)
        st, _, body = http(b, "/v1/stream?from=abc")
        assert st == 400 and b"bad from" in body, (st, body)
        st, _, body = http(b, "/v1/topics/" + "x" * 40000)
        assert st in (414, 431), st
        for path in ("/", "/ui"):
            st, h, _ = http(b, path)
            assert st == 302 and h["Location"] == "/ui/", (path, st)
        st, h, body = http(b, "/ui/")
        assert st == 200 and h["Content-Type"].startswith("text/html") and b"console.js" in body, (st, h)
        assert "default-src 'self'" in h["Content-Security-Policy"], h
        for path, kind in (("/ui/console.js", "text/javascript"), ("/ui/console.css", "text/css"),
                           ("/ui/uPlot.min.js", "text/javascript")):
            st, h, body = http(b, path)
            assert st == 200 and h["Content-Type"].startswith(kind) and len(body) > 1000, (path, st, h)
        st, h, body = http(b, "/ui/console.js", method="HEAD")
        assert st == 200 and body == b"" and int(h["Content-Length"]) > 1000, (st, h)
        t = get_json(b, "/v1/topics")
        assert [x["name"] for x in t["topics"] if not x["internal"]] == ["t"], t
        assert get_json(b, "/v1/groups") == {"groups": []}
        assert get_json(b, "/v1/health")["status"] == "ready"


TEXT = "h\u00e9llo \u2713 w\u00f6rld".encode()


def b64(s):
    return None if s is None else base64.b64decode(s)


@test
def the_record_browser_shows_records_produced_with_kcat_byte_for_byte():
    """kcat writes a UTF-8 text, a JSON and a binary value with keys and
    headers, then 600 lz4-compressed records: /v1/records gives every byte
    back (keys, values, header keys and values), pages oldest first from an
    offset, newest first from the end or back from an offset, from a
    timestamp, at most 500 records; bad parameters are 400, a partition
    that does not exist 404, a batch larger than a page 413. In chromium the
    record page shows the text as it was written, the JSON as JSON and the
    binary value as hex, with no console error."""
    with broker(admin=True) as b:
        ctl(b, "topic", "create", "r", "-p", "2")
        run([KCAT, "-P", "-b", b.bootstrap, "-t", "r", "-p", "0", "-K", "\t", "-H", "h1=v1", "-H", "trace=\u00e9"],
            input=b"k1\t" + TEXT + b"\nk2\t{\"a\": [1, 2]}\nk3\t\x01\x02bin\n")
        run([KCAT, "-P", "-b", b.bootstrap, "-t", "r", "-p", "0", "-z", "lz4"],
            input=b"".join(b"n%d\n" % i for i in range(600)))
        r = get_json(b, "/v1/records/r/0?offset=0&limit=3")
        assert [(x["offset"], b64(x["key"]), b64(x["value"])) for x in r["records"]] == \
            [(0, b"k1", TEXT), (1, b"k2", b'{"a": [1, 2]}'), (2, b"k3", b"\x01\x02bin")], r
        assert [(b64(h["key"]), b64(h["value"])) for h in r["records"][0]["headers"]] == \
            [(b"h1", b"v1"), (b"trace", "\u00e9".encode())], r
        assert r["high_watermark"] == 603 and r["next_offset"] == 3 and r["order"] == "oldest", r
        r = get_json(b, "/v1/records/r/0?limit=5")
        assert [x["offset"] for x in r["records"]] == [602, 601, 600, 599, 598], r
        assert [b64(x["value"]) for x in r["records"]][:2] == [b"n599", b"n598"] and r["order"] == "newest", r
        r = get_json(b, "/v1/records/r/0?order=newest&offset=10&limit=3")
        assert [x["offset"] for x in r["records"]] == [10, 9, 8], r
        r = get_json(b, "/v1/records/r/0?offset=100&limit=500")
        assert [x["offset"] for x in r["records"]] == list(range(100, 600)), len(r["records"])
        ts = get_json(b, "/v1/records/r/0?offset=3&limit=1")["records"][0]["timestamp"]
        r = get_json(b, "/v1/records/r/0?timestamp=%d&limit=2" % ts)
        assert r["records"][0]["offset"] <= 3 and all(x["timestamp"] >= ts for x in r["records"]), (ts, r)
        r = get_json(b, "/v1/records/r/0?timestamp=%d" % (ts + 86400000))
        assert r["records"] == [] and r["from"] == 603, r
        assert get_json(b, "/v1/records/r/1")["records"] == []
        for q, word in (("offset=-1", b"bad offset"), ("offset=x", b"bad offset"), ("limit=0", b"bad limit"),
                        ("limit=501", b"bad limit"), ("order=sideways", b"bad order"),
                        ("offset=1&timestamp=2", b"not both"), ("timestamp=-5", b"bad timestamp")):
            st, _, body = http(b, "/v1/records/r/0?" + q)
            assert st == 400 and word in body, (q, st, body)
        for path in ("/v1/records/r/2", "/v1/records/nope/0", "/v1/records/r"):
            st, _, body = http(b, path)
            assert st == 404, (path, st, body)
        st, _, body = http(b, "/v1/records/r/x")
        assert st == 400, (st, body)
        ctl(b, "topic", "create", "big", "-p", "1")
        run([KCAT, "-P", "-b", b.bootstrap, "-t", "big", "-p", "0"], input=b"x" * 300000 + b"\n")
        st, _, body = http(b, "/v1/records/big/0?offset=0")
        assert st == 413 and b"larger than a page" in body, (st, body)

        page = browse(b, "records|#/topics/r/records/0?offset=0&limit=5|topics-records")["records"]
        assert page["errors"] == [] and page["ready"] == "topics-records", page
        tx = page["texts"]
        assert tx["rec-0-key"] == "k1" and tx["rec-0-value"] == TEXT.decode(), tx
        assert tx["rec-0-headers"].splitlines() == ["h1: v1", "trace: \u00e9"], tx
        assert [l.strip() for l in tx["rec-1-value"].splitlines()] == ["{", '"a": [', "1,", "2", "]", "}"], tx
        assert tx["rec-2-value"] == "01 02 62 69 6e", tx
        assert get_json(b, "/v1/health")["status"] == "ready"


@test
def an_open_transaction_shows_with_its_age_and_what_it_holds_back():
    """A confluent-kafka transactional producer writes 5 records to tx-0
    and has not committed: /v1/transactions and the Transactions page show
    its id Ongoing, with tx-0 among its partitions and an age, and tx-0
    holding back 5 records from read_committed consumers (last stable
    offset 0, high watermark 5); the partition's producers (/v1/producers
    and its page) show that producer with last sequence 4 at offset 4 and
    its transaction from offset 0; once it commits, the id is
    CompleteCommit and nothing is held back."""
    from confluent_kafka import Producer
    with broker(admin=True) as b:
        ctl(b, "topic", "create", "tx", "-p", "1")
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "payments-1"})
        p.init_transactions(HANG_GUARD)
        p.begin_transaction()
        for i in range(5):
            p.produce("tx", b"v%d" % i, partition=0)
        p.flush(HANG_GUARD)

        def ongoing():
            j = get_json(b, "/v1/transactions")
            return j if j["held_back"] else None
        j = until("the records held back", ongoing)
        t = [x for x in j["transactions"] if x["transactional_id"] == "payments-1"]
        assert len(t) == 1 and t[0]["state"] == "Ongoing" and t[0]["open"] and t[0]["age_ms"] >= 0, j
        assert [(x["topic"], x["partition"]) for x in t[0]["partitions"]] == [("tx", 0)], t
        assert [(h["topic"], h["partition"], h["last_stable_offset"], h["high_watermark"], h["records_held"])
                for h in j["held_back"]] == [("tx", 0, 0, 5, 5)], j
        # the partition's idempotent producer: its 5 records, its transaction from offset 0
        pr = get_json(b, "/v1/producers/tx/0")
        assert pr["total"] == 1 and [(x["producer_id"], x["last_sequence"], x["last_offset"],
                                      x["transaction_first_offset"]) for x in pr["producers"]] == \
            [(t[0]["producer_id"], 4, 4, 0)], (pr, t)
        pages = browse(b, "transactions|#/transactions|transactions", "producers|#/topics/tx/producers/0|topics-producers")
        page = pages["transactions"]
        assert page["errors"] == [] and page["ready"] == "transactions", page
        assert page["texts"]["txn-state-payments-1"] == "Ongoing" and page["texts"]["held-tx-0"] == "5", page["texts"]
        page = pages["producers"]
        pid = t[0]["producer_id"]
        assert page["errors"] == [] and page["texts"]["seq-%d" % pid] == "4", page
        assert page["texts"]["txn-%d" % pid] == "offset 0", page
        st, _, body = http(b, "/v1/producers/tx/7")
        assert st == 404, (st, body)
        p.commit_transaction(HANG_GUARD)

        def committed():
            j = get_json(b, "/v1/transactions")
            t = [x for x in j["transactions"] if x["transactional_id"] == "payments-1"]
            return j if not j["held_back"] and t and t[0]["state"] == "CompleteCommit" else None
        j = until("the commit", committed)
        assert [x["open"] for x in j["transactions"]] == [False], j


@test
def every_broker_of_a_cluster_shows():
    """Three nodes, a topic of 3 partitions with 3 replicas each: node 1's
    /v1/cluster lists brokers 1, 2 and 3 and the quorum's controller; its
    topic page has each partition's leader, replicas and a full ISR, held
    on one of its shards; in chromium the overview says 3 brokers. Node 3
    killed: it stays listed, fenced once its session is over, in the JSON
    and on the page ("2 (+1 fenced)")."""
    from cluster import Cluster, create_topic, wait_isrs
    import re as re_
    with Cluster(3) as c:
        create_topic(c.bootstrap, "c", 3, 3)
        wait_isrs(c.bootstrap, "c", 3)
        props = open(os.path.join(c.dir, "n1", "server.properties")).read()
        admin = int(re_.search(r"admin.listen=\S+:(\d+)", props).group(1))

        class Node:
            pass
        n1 = Node()
        n1.admin = admin
        cl = until("three brokers", lambda: (lambda j: j if len(j["brokers"]) == 3 else None)(get_json(n1, "/v1/cluster")))
        assert sorted(x["id"] for x in cl["brokers"]) == [1, 2, 3] and cl["controller"] in (1, 2, 3), cl
        assert [x["this"] for x in sorted(cl["brokers"], key=lambda x: x["id"])] == [True, False, False], cl
        # node 1 serves the topic once it has applied its records
        def served():
            st, _, body = http(n1, "/v1/topics/c")
            t = json.loads(body) if st == 200 else None
            return t if t and all(len(p["isr"]) == 3 for p in t["partition_list"]) else None
        t = until("node 1 serving topic c with 3 replicas in sync", served)
        for p in t["partition_list"]:
            assert sorted(p["replicas"]) == [1, 2, 3] and sorted(p["isr"]) == [1, 2, 3], t
            assert p["leader"] in (1, 2, 3) and p["shard"] >= 0 and "high_watermark" in p, t
        page = browse(n1, "cluster|#/|overview")["cluster"]
        assert page["errors"] == [] and page["texts"]["brokers"] == "3", page
        assert page["texts"]["broker-3"] == "serving", page["texts"]
        # a broker lost: still listed, fenced once its session is over
        c.kill(3)
        until("broker 3 fenced", lambda: [x["fenced"] for x in get_json(n1, "/v1/cluster")["brokers"]
                                           if x["id"] == 3] == [True])
        page = browse(n1, "cluster|#/|overview")["cluster"]
        assert page["errors"] == [] and page["texts"]["brokers"] == "2 (+1 fenced)", page["texts"]
        assert page["texts"]["broker-3"] == "fenced", page["texts"]


@test
def the_overview_holds_the_node_against_a_hardware_profile():
    """hardware.profile=hw-profiles/commodity-2026.conf: /v1/cluster carries
    its limits in bytes (7,152 GiB of disk, 8,200 MB/s of disk writes,
    25 Gb/s of NIC, 32 cores) and the overview a table of them; without
    the key the profile is null; a profile with an unknown key stops the
    start, naming the file, the line and the key."""
    from harness import BrokerError, temp_dir
    prof = os.path.join(REPO, "hw-profiles", "commodity-2026.conf")
    with broker(admin=True, settings={"hardware.profile": prof}) as b:
        p = get_json(b, "/v1/cluster")["profile"]
        assert p["file"] == prof and p["description"].startswith("Commodity 2026"), p
        assert (p["disk_bytes"], p["disk_write_bytes_per_sec"], p["nic_bytes_per_sec"], p["cores"]) == \
            (7152 * 2 ** 30, 8200 * 10 ** 6, 25 * 10 ** 9 // 8, 32), p
        page = browse(b, "profile|#/|overview")["profile"]
        assert page["errors"] == [], page
        assert page["texts"]["limit-disk-space"] == "6.98 TiB" and page["texts"]["limit-cores"] == "32", page["texts"]
    with broker(admin=True) as b:
        assert get_json(b, "/v1/cluster")["profile"] is None
    d = temp_dir()
    try:
        bad = os.path.join(d, "bad.conf")
        with open(bad, "w") as f:
            f.write("description=x\nbogus=1\n")
        try:
            with broker(admin=True, settings={"hardware.profile": bad}):
                raise AssertionError("a broker started with a bad hardware profile")
        except BrokerError as e:
            assert "%s:2" % bad in str(e) and "bogus" in str(e) and "hardware.profile" in str(e), str(e)
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Stream:
    """One GET /v1/stream over a raw socket: its status, then its events."""

    def __init__(self, b, path="/v1/stream", headers=()):
        self.s = socket.create_connection(("127.0.0.1", b.admin), timeout=HANG_GUARD)
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (path, "".join(h + "\r\n" for h in headers)))
                       .encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.status = int(head.split()[1])
        self.head = head.decode()

    def _more(self):
        d = self.s.recv(65536)
        assert d, "the stream ended"
        self.buf += d

    def event(self):
        """The next event's (id, data), chunk framing skipped."""
        while True:
            m = re.search(rb"id: (\d+)\nevent: sample\ndata: (.*?)\n\n", self.buf, re.S)
            if m:
                self.buf = self.buf[m.end():]
                return int(m.group(1)), json.loads(m.group(2))
            self._more()

    def close(self):
        self.s.close()


@test
def the_live_stream_sends_a_sample_a_second_and_bounds_its_viewers():
    """Samples arrive about once a second with consecutive ids; a viewer
    that stops reading holds up no other viewer nor the JSON; 2,000
    records produced while it streams show in its produce_records_total
    (exactly) and in a produce_records_per_sec above 0; a viewer that comes
    back with Last-Event-ID goes on after it; a 17th viewer gets 503 with
    Retry-After and the next after one closed gets the stream; /v1/history
    holds the same samples."""
    with broker(admin=True) as b:
        ctl(b, "topic", "create", "s", "-p", "2")
        s = Stream(b)
        assert s.status == 200 and "text/event-stream" in s.head, s.head
        i0, e0 = s.event()
        i1, e1 = s.event()
        assert i1 == i0 + 1 and e1["seq"] == i1 and 500 <= e1["time_ms"] - e0["time_ms"] <= 5000, (e0, e1)
        base = e1["produce_records_total"]
        produce(b, "s", 0, 1200, b"x")
        produce(b, "s", 1, 800, b"y")
        seen = []
        while True:
            i, e = s.event()
            seen.append(e)
            if e["produce_records_total"] - base >= 2000:
                break
            assert len(seen) < HANG_GUARD, seen
        assert e["produce_records_total"] - base == 2000, e
        assert any(x["produce_records_per_sec"] > 0 for x in seen), seen
        hist = {x["seq"]: x for x in get_json(b, "/v1/history")["samples"]}
        assert hist[i]["produce_records_total"] == e["produce_records_total"], (hist[i], e)
        s.close()

        r = Stream(b, headers=["Last-Event-ID: %d" % i0])
        assert r.status == 200 and r.event()[0] == i0 + 1
        r.close()

        # a viewer that stops reading holds up nobody: another viewer gets
        # its samples and the JSON answers meanwhile; when it reads again its
        # events are whole and in order
        slow = Stream(b)
        slow.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        fast = Stream(b)
        ids = [fast.event()[0] for _ in range(3)]
        assert ids == list(range(ids[0], ids[0] + 3)), ids
        assert get_json(b, "/v1/cluster")["status"] == "ready"
        got = [slow.event()[0] for _ in range(3)]
        assert got == sorted(got) and len(set(got)) == 3, got
        slow.close()
        fast.close()

        # a closed stream's slot is free once the next sample finds it closed
        viewers = [until("a free stream", lambda: (lambda v: v if v.status == 200 else v.close())(Stream(b)))
                   for _ in range(16)]
        extra = Stream(b)
        assert extra.status == 503 and "Retry-After: 5" in extra.head, extra.head
        extra.close()
        viewers.pop().close()
        again = until("a free stream", lambda: (lambda v: v if v.status == 200 else v.close())(Stream(b)))
        again.event()
        for v in viewers + [again]:
            v.close()
        assert get_json(b, "/v1/health")["status"] == "ready"


if __name__ == "__main__":
    main("console")
