#!/usr/bin/python3
"""The admin endpoint (admin.listen) against a real sluiced: /metrics parsed
with Prometheus' own parser (Debian's python3-prometheus-client) while a
kafka-python producer and consumer group run; /v1/health, /v1/config,
/v1/shards, /v1/partitions; bad requests answered with the right status
without disturbing the broker."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kraw  # noqa: E402
from harness import HANG_GUARD, SLUICED, broker, free_port, main, temp_dir, test  # noqa: E402

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

COMMON = dict(api_version_auto_timeout_ms=30000, request_timeout_ms=40000)

# every family the scrape must carry (docs/metrics.md lists them)
FAMILIES = [
    "build_info", "process_resident_memory_bytes", "process_open_fds", "process_uptime_seconds", "shards",
    "shard_loops_total", "shard_busy_cycles_total", "shard_busy_ratio", "requests_total", "requests_in_flight",
    "uring_sqes_total", "uring_cqes_total",
    "connections_accepted_total", "connections_open", "bad_frames_total", "unsupported_requests_total",
    "accept_errors_total", "connections_rejected_total", "connections_idle_closed_total",
    "request_memory_waits_total", "request_memory_refused_total", "request_memory_bytes",
    "request_memory_limit_bytes",
    "ring_full_total", "ring_depth", "send_zerocopy_total", "recv_buffers_starved_total",
    "tls_handshakes_total", "tls_failures_total", "tls_connections_total", "tls_reloads_total",
    "tls_client_reloads_total", "admin_tls_certificates",
    "admin_auth_failures_total", "admin_basic_cache_hits_total",
    "produce_requests_total", "produce_batches_total", "produce_records_total", "produce_bytes_total",
    "produce_duplicates_total", "produce_rejected_total", "fetch_requests_total", "fetch_bytes_total",
    "fetch_long_poll_waits_total", "fetch_sessions", "fetch_session_evictions_total",
    "replication_fetch_skips_total",
    "retention_segments_deleted_total", "compaction_passes_total",
    "compaction_segments_cleaned_total", "compaction_records_removed_total", "compaction_tombstones_removed_total",
    "compaction_bytes_before_total", "compaction_bytes_after_total", "compaction_errors_total", "disk_writes_total", "disk_write_bytes_total", "disk_reads_total",
    "disk_read_bytes_total", "disk_io_errors_total", "disk_group_commits_total", "tail_cache_hits_total",
    "tail_cache_misses_total", "tail_cache_bytes", "tail_cache_evictions_total", "tail_cache_allocations_total",
    "tail_cache_budget_bytes",
    "partition_log_start_offset", "partition_log_end_offset", "partition_high_watermark",
    "partition_last_stable_offset", "partition_size_bytes", "partition_segments",
    "partition_produce_batches_total", "partition_produce_records_total", "partition_produce_bytes_total",
    "partition_failed", "group_members", "group_generation", "group_state", "group_committed_offset",
    "group_lag_records", "group_oldest_unconsumed_age_seconds", "group_joins_total", "group_syncs_total",
    "group_heartbeats_total", "group_leaves_total", "group_rebalances_total", "group_rebalances_started_total", "group_members_expired_total",
    "group_offset_commits_total", "group_offset_commits_refused_total", "group_offsets_expired_total",
    "txn_init_producer_ids_total", "txn_fenced_total", "txn_begun_total", "txn_ended_total", "txn_timed_out_total",
    "txn_open", "txn_markers_total", "txn_marker_requests_total", "txn_marker_retries_total", "txn_verifications_total",
    "txn_late_requests_refused_total", "txn_partitions_loads_total",
    "produce_latency_seconds", "fetch_latency_seconds", "request_latency_seconds", "disk_write_latency_seconds",
]


def admin_broker(**kw):
    port = free_port()
    settings = {"admin.listen": "127.0.0.1:%d" % port, "group.initial.rebalance.delay.ms": 0}
    settings.update(kw.pop("settings", {}))
    ctx = broker(settings=settings, **kw)
    ctx.admin = "http://127.0.0.1:%d" % port
    ctx.admin_port = port
    return ctx


def get(url, method="GET", data=None):
    """(status, body bytes); HTTP errors are answers too."""
    req = urllib.request.Request(url, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=HANG_GUARD) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def scrape(admin):
    """{(family, frozenset(labels)): value} of one scrape, parsed by
    prometheus_client; also the set of family names."""
    status, body = get(admin + "/metrics")
    assert status == 200, status
    out, fams = {}, set()
    for fam in text_string_to_metric_families(body.decode()):
        fams.add(fam.name)
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out, fams


def total(m, name, **labels):
    want = set(labels.items())
    return sum(v for (n, ls), v in m.items() if n == name and want <= ls)


def samples(m, name, **labels):
    want = set(labels.items())
    return {ls: v for (n, ls), v in m.items() if n == name and want <= ls}


def wait_for(cond, what):
    deadline = time.monotonic() + HANG_GUARD
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.05)


def base_name(n):
    # prometheus_client strips _total from counter family names
    return n[:-6] if n.endswith("_total") else n


@test
def scrape_follows_producer_and_group():
    ctx = admin_broker(settings={"num.partitions": 2})
    with ctx as b:
        admin = ctx.admin
        n = 400
        p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=5, **COMMON)
        p.send("mt", b"warm", partition=0).get(timeout=HANG_GUARD)   # creates the topic (2 partitions)
        p.flush()
        m0, fams = scrape(admin)
        info = samples(m0, "sluice_build_info")
        assert len(info) == 1 and list(info.values()) == [1.0], info
        assert dict(list(info)[0])["dpdk"] == "off" and dict(list(info)[0])["commit"], info
        version = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "VERSION")).read().strip()
        assert dict(list(info)[0])["version"] == version, (info, version)
        for f in FAMILIES:
            assert "sluice_" + base_name(f) in fams, "family sluice_%s missing" % f
        for i in range(n):
            p.send("mt", b"v%d" % i, partition=i % 2)
        p.flush()
        m1, _ = scrape(admin)
        # the records counter moves by exactly what was produced
        assert total(m1, "sluice_produce_records_total") - total(m0, "sluice_produce_records_total") == n
        assert (total(m1, "sluice_partition_produce_records_total", topic="mt")
                - total(m0, "sluice_partition_produce_records_total", topic="mt")) == n
        assert total(m1, "sluice_partition_log_end_offset", topic="mt") == n + 1
        assert total(m1, "sluice_partition_high_watermark", topic="mt") == n + 1
        assert total(m1, "sluice_produce_bytes_total") > total(m0, "sluice_produce_bytes_total")
        assert total(m1, "sluice_partition_size_bytes", topic="mt") > 0
        assert total(m1, "sluice_disk_write_bytes_total") > total(m0, "sluice_disk_write_bytes_total")
        assert total(m1, "sluice_connections_open") >= 1
        assert total(m1, "sluice_uring_sqes_total") > total(m0, "sluice_uring_sqes_total")
        assert total(m1, "sluice_uring_cqes_total") > total(m0, "sluice_uring_cqes_total")
        # the producer waits for nothing; a request ends when the shard
        # reaps its send's completion, which may come just after the client
        # has the answer, so the gauge reaches 0 within a scrape or two
        wait_for(lambda: total(scrape(admin)[0], "sluice_requests_in_flight") == 0,
                 "no request in flight after the producer's flush")
        hist = samples(m1, "sluice_produce_latency_seconds_count")
        assert sum(hist.values()) >= 1, hist
        assert total(m1, "sluice_disk_write_latency_seconds_count") >= 1
        # the histogram's buckets add up to its count
        assert total(m1, "sluice_produce_latency_seconds_bucket", le="+Inf") == sum(hist.values())

        # a consumer group reads everything and commits: lag drops to 0
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="mg", enable_auto_commit=False,
                          auto_offset_reset="earliest", fetch_max_wait_ms=100, session_timeout_ms=10000,
                          heartbeat_interval_ms=300, **COMMON)
        c.subscribe(["mt"])
        got = 0
        deadline = time.monotonic() + HANG_GUARD
        while got < n + 1 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                got += len(recs)
        assert got == n + 1, got
        c.commit()

        def lag_is(want):
            m, _ = scrape(admin)
            lag = samples(m, "sluice_group_lag_records", group="mg", topic="mt")
            return m if len(lag) == 2 and sum(lag.values()) == want else None
        m2 = wait_for(lambda: lag_is(0), "group lag 0")
        assert total(m2, "sluice_group_committed_offset", group="mg", topic="mt") == n + 1
        assert total(m2, "sluice_group_members", group="mg") == 1
        assert total(m2, "sluice_group_oldest_unconsumed_age_seconds", group="mg") == 0
        assert total(m2, "sluice_fetch_requests_total") > total(m0, "sluice_fetch_requests_total")
        assert total(m2, "sluice_fetch_bytes_total") > 0
        assert total(m2, "sluice_group_offset_commits_total") >= 2
        assert total(m2, "sluice_group_rebalances_started_total", cause="join") >= 1

        # the consumer pauses: 10 new records wait, their age grows
        for i in range(10):
            p.send("mt", b"late%d" % i, partition=0)
        p.flush()
        m3 = wait_for(lambda: lag_is(10), "group lag 10")
        age1 = wait_for(lambda: total(scrape(admin)[0], "sluice_group_oldest_unconsumed_age_seconds",
                                      group="mg", topic="mt"), "an age")
        time.sleep(1.0)
        age2 = total(scrape(admin)[0], "sluice_group_oldest_unconsumed_age_seconds", group="mg", topic="mt")
        assert age2 >= age1 + 0.9, (age1, age2)
        assert total(m3, "sluice_group_lag_records", group="mg", topic="mt", partition="0") == 10

        # it resumes: caught up again
        got = 0
        deadline = time.monotonic() + HANG_GUARD
        while got < 10 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                got += len(recs)
        c.commit()
        wait_for(lambda: lag_is(0), "group lag back to 0")
        c.close()   # LeaveGroup: the group (now empty) counts a rebalance left
        m4 = wait_for(lambda: (lambda m: m if total(m, "sluice_group_members", group="mg") == 0 else None)(
            scrape(admin)[0]), "the member gone")
        assert total(m4, "sluice_group_rebalances_started_total", cause="leave") >= 1
        p.close()


@test
def retention_moves_log_start():
    """Size retention removes sealed segments: the counter and the
    partition's log start move."""
    ctx = admin_broker(settings={"log.segment.bytes": 16384, "log.retention.bytes": 32768,
                                 "log.retention.check.interval.ms": 50})
    with ctx as b:
        p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", batch_size=4096, **COMMON)
        fs = []
        for i in range(200):
            fs.append(p.send("rt", b"z" * 1000, partition=0))
            if i % 10 == 9:
                p.flush()
        p.flush()
        p.close()
        ok = sum(1 for f in fs if f.succeeded())
        m = wait_for(lambda: (lambda m: m if total(m, "sluice_retention_segments_deleted_total") > 0
                              and total(m, "sluice_partition_log_start_offset", topic="rt") > 0 else None)(
            scrape(ctx.admin)[0]), "retention to delete a segment")
        # what was acknowledged is what the counters and the log end say
        assert total(m, "sluice_partition_log_end_offset", topic="rt") == ok
        assert total(m, "sluice_partition_produce_records_total", topic="rt") == ok
        assert total(m, "sluice_partition_size_bytes", topic="rt") < ok * 1000
        assert total(m, "sluice_partition_segments", topic="rt") >= 2


DOCS_METRICS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "metrics.md")


@test
def docs_table_matches_the_scrape():
    """docs/metrics.md's table of metrics has one row per family of a scrape,
    with its type and its HELP text (STYLE 27: a page that restates a table
    in code is checked against it)."""
    import re
    rows = {}
    with open(DOCS_METRICS) as f:
        for line in f:
            m = re.match(r"\| `(sluice_\w+)` \| (\w+) \| [^|]* \| (.*) \|$", line)
            if m:
                rows[m.group(1)] = (m.group(2), m.group(3).replace("\\|", "|"))
    ctx = admin_broker()
    with ctx:
        status, body = get(ctx.admin + "/metrics")
        assert status == 200, status
    helps, types = {}, {}
    for line in body.decode().split("\n"):
        m = re.match(r"# (HELP|TYPE) (\S+) (.*)", line)
        if m:
            (helps if m.group(1) == "HELP" else types)[m.group(2)] = m.group(3)
    assert set(rows) == set(helps), ("families in docs/metrics.md but not scraped", sorted(set(rows) - set(helps)),
                                     "scraped but not in docs/metrics.md", sorted(set(helps) - set(rows)))
    for name, (typ, meaning) in rows.items():
        assert typ == types[name], (name, "docs/metrics.md says", typ, "the scrape", types[name])
        assert meaning == helps[name], (name, "docs/metrics.md says", meaning, "the scrape's HELP", helps[name])


@test
def transaction_counters_follow_the_coordinator():
    """The transaction coordinator's families move with what it does: two
    transactional ids (raw InitProducerId, AddPartitionsToTxn, Produce,
    EndTxn: ktxn.py), one transaction committed, one aborted, one left
    open, then the first id fenced by a second InitProducerId (which aborts
    its open transaction): each counter goes up by exactly that, and
    sluice_txn_open reads 1, then 0."""
    from ktxn import Producer, TConn, new_topic
    ctx = admin_broker(settings={"transaction.max.timeout.ms": 60000})
    with ctx as b, TConn(b.bootstrap) as c, TConn(b.bootstrap) as c2:
        new_topic(c, "mtx")
        m0, _ = scrape(ctx.admin)
        p = Producer(c, "mtx-a")
        p.add("mtx", [0])
        assert p.produce("mtx", 0, [b"a"]).error == 0
        assert p.end(True) == 0
        p.add("mtx", [0])
        assert p.produce("mtx", 0, [b"b"]).error == 0
        assert p.end(False) == 0
        q = Producer(c2, "mtx-b")
        q.add("mtx", [0])
        assert q.produce("mtx", 0, [b"c"]).error == 0
        m1, _ = scrape(ctx.admin)

        def d(m, name, **labels):
            return total(m, name, **labels) - total(m0, name, **labels)
        assert d(m1, "sluice_txn_init_producer_ids_total") == 2, d(m1, "sluice_txn_init_producer_ids_total")
        assert d(m1, "sluice_txn_begun_total") == 3, d(m1, "sluice_txn_begun_total")
        assert d(m1, "sluice_txn_ended_total", result="commit") == 1
        assert d(m1, "sluice_txn_ended_total", result="abort") == 1
        assert total(m1, "sluice_txn_open") == 1, total(m1, "sluice_txn_open")
        assert d(m1, "sluice_txn_markers_total", where="here") == 2, d(m1, "sluice_txn_markers_total", where="here")
        assert d(m1, "sluice_txn_markers_total", where="other_node") == 0
        assert total(m1, "sluice_txn_partitions_loads_total") >= 1
        Producer(c, "mtx-b")   # fences q: its open transaction is aborted
        m2 = wait_for(lambda: (lambda m: m if total(m, "sluice_txn_open") == 0 else None)(scrape(ctx.admin)[0]),
                      "the fenced transaction ended")
        assert d(m2, "sluice_txn_fenced_total") == 1, d(m2, "sluice_txn_fenced_total")
        assert d(m2, "sluice_txn_ended_total", result="abort") == 2
        assert d(m2, "sluice_txn_timed_out_total") == 0


@test
def json_views():
    ctx = admin_broker()
    with ctx as b:
        admin = ctx.admin
        p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", **COMMON)
        for i in range(7):
            p.send("jv", b"x", partition=0)
        p.flush()
        p.close()
        status, body = get(admin + "/v1/health")
        assert status == 200 and json.loads(body)["status"] == "ready", body
        status, body = get(admin + "/v1/config")
        assert status == 200
        cfg = {c["name"]: c for c in json.loads(body)["configs"]}
        assert cfg["admin.listen"]["source"] == "--set" and cfg["admin.listen"]["default"] is False
        assert cfg["admin.listen"]["value"] == "127.0.0.1:%d" % ctx.admin_port
        assert cfg["num.partitions"]["source"] == "default" and cfg["num.partitions"]["default"] is True
        status, body = get(admin + "/v1/shards")
        shards = json.loads(body)["shards"]
        assert status == 200 and len(shards) == 2 and sum(s["partitions"] for s in shards) >= 2
        status, body = get(admin + "/v1/partitions/jv/0")
        part = json.loads(body)
        assert status == 200, body
        assert part["log_end_offset"] == 7 and part["high_watermark"] == 7 and part["open"] is True
        assert part["produce_records"] == 7 and part["segments"] >= 1
        assert get(admin + "/v1/partitions/jv/9")[0] == 404
        assert get(admin + "/v1/partitions/nope/0")[0] == 404
        assert get(admin + "/v1/partitions/jv/x")[0] == 400


@test
def bad_requests_do_not_disturb():
    ctx = admin_broker()
    with ctx as b:
        admin = ctx.admin
        host, port = "127.0.0.1", ctx.admin_port
        # a slow client holds a half-sent request open all along
        slow = socket.create_connection((host, port))
        slow.sendall(b"GET /metr")
        assert get(admin + "/nope")[0] == 404
        st, body = get(admin + "/")   # sent on to the web console (/ui/)
        assert st == 200 and b"console.js" in body, (st, body[:200])
        assert get(admin + "/metrics", method="POST", data=b"x" * 100)[0] == 405
        assert get(admin + "/v1/health", method="DELETE")[0] == 405
        try:
            urllib.request.urlopen(urllib.request.Request(admin + "/v1/health", method="PUT"), timeout=HANG_GUARD)
            assert False, "PUT answered"
        except urllib.error.HTTPError as e:
            assert (e.code, e.headers.get("Allow"), e.read()) == (
                405, "GET, HEAD", b"method not allowed: only GET and HEAD\n"), e.headers

        def raw(req):
            s = socket.create_connection((host, port))
            s.settimeout(HANG_GUARD)
            s.sendall(req)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            s.close()
            return data
        big = raw(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n")
        assert big.startswith(b"HTTP/1.1 431 "), big[:80]
        longurl = raw(b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert longurl.startswith(b"HTTP/1.1 414 "), longurl[:80]
        badline = raw(b"GET /metrics HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n")
        assert badline.startswith(b"HTTP/1.1 400 "), badline[:80]
        badlen = raw(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
        assert badlen.startswith(b"HTTP/1.1 400 "), badlen[:80]
        badver = raw(b"GET /metrics HTTP/9.9\r\n\r\n")
        assert badver.startswith(b"HTTP/1.1 505 "), badver[:80]
        # the endpoint and the broker still serve, the slow client still open
        assert get(admin + "/v1/health")[0] == 200
        p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", **COMMON)
        p.send("bd", b"ok").get(timeout=HANG_GUARD)
        p.close()
        m, _ = scrape(admin)
        assert total(m, "sluice_partition_log_end_offset", topic="bd") == 1
        slow.close()


def describe_log_dirs(c, topics):
    """DescribeLogDirs v1 (non-flexible): {topic: {partition: size}}, dir."""
    def topic(w, t):
        w.str(t[0]).array(t[1], lambda w, p: w.i32(p))
    r = c.request(35, 1, kraw.W().array(topics, topic))
    r.i32()                                   # ThrottleTimeMs
    out = {}

    def part(r):
        return r.i32(), r.i64(), r.i64(), r.i8()

    def tp(r):
        name = r.str()
        out[name] = {p: (size, lag, fut) for p, size, lag, fut in r.array(part)}

    def result(r):
        err, d = r.i16(), r.str()
        r.array(tp)
        return err, d
    results = r.array(result)
    r.done()
    assert len(results) == 1 and results[0][0] == 0, results
    return out, results[0][1]


@test
def describe_log_dirs_sizes():
    ctx = admin_broker(settings={"num.partitions": 2})
    with ctx as b:
        p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", **COMMON)
        for i in range(50):
            p.send("ld", b"y" * 1000, partition=0)
        p.flush()
        p.close()
        with kraw.Conn(b.bootstrap) as c:
            assert c.api_versions().apis[35] == (0, 4)
            sizes, d = describe_log_dirs(c, None)
            assert os.path.isabs(d) and os.path.realpath(b.data_dir) == d, d
            assert set(sizes["ld"]) == {0, 1} and "__consumer_offsets" in sizes
            assert sizes["ld"][0][0] >= 50 * 1000 and sizes["ld"][1][0] == 0, sizes["ld"]
            assert sizes["ld"][0][1:] == (0, 0)
            # the same size the admin endpoint shows
            _, body = get(ctx.admin + "/v1/partitions/ld/0")
            assert json.loads(body)["size_bytes"] == sizes["ld"][0][0]
            # listed topics and partitions only; unknown ones left out
            sizes, _ = describe_log_dirs(c, [("ld", [1, 7]), ("nope", [0])])
            assert sizes == {"ld": {1: (0, 0, 0)}}, sizes


@test
def explicit_port_in_use_is_an_error():
    """admin.listen set explicitly on a port another process holds: the
    broker refuses to start and names the key (a default port in use only
    turns the endpoint off)."""
    hold = socket.socket()
    hold.bind(("127.0.0.1", 0))
    hold.listen(1)
    port = hold.getsockname()[1]
    d = temp_dir()
    try:
        p = subprocess.run([SLUICED, "--data-dir", os.path.join(d, "data"), "--listen",
                            "127.0.0.1:%d" % free_port(), "--set", "admin.listen=127.0.0.1:%d" % port],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=HANG_GUARD)
        assert p.returncode == 2, p.returncode
        assert b"admin.listen" in p.stderr, p.stderr
    finally:
        hold.close()
        subprocess.run(["rm", "-rf", d])


@test
def default_port_in_use_turns_endpoint_off():
    """admin.listen left at its default (127.0.0.1:9644) on a port another
    process holds: the broker starts and serves, without the endpoint."""
    # the test holds the port itself: another process that holds it now
    # (another test's broker) may let it go while this broker starts
    hold = socket.socket()
    hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # past TIME_WAIT, never beside a listener
    deadline = time.monotonic() + 60
    while True:
        try:
            hold.bind(("127.0.0.1", 9644))
            hold.listen(1)
            break
        except OSError:
            assert time.monotonic() < deadline, "127.0.0.1:9644 stayed held by another process for 60 s"
            time.sleep(0.5)
    try:
        with broker() as b:
            p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", **COMMON)
            p.send("dp", b"ok").get(timeout=HANG_GUARD)
            p.close()
            with open(b.log_path, "rb") as f:
                assert b"the admin endpoint is off" in f.read()
    finally:
        hold.close()


@test
def compaction_keeps_the_newest_value_per_key():
    """cleanup.policy=compact: the broker's cleaner rewrites sealed
    segments (its counters move), a reader from offset 0 sees far fewer
    records, each key's newest value (a tombstone included) is there, and
    offsets only grow. The control: the same records in a topic with
    cleanup.policy=delete are all still there."""
    from kafka.admin import KafkaAdminClient, NewTopic
    ctx = admin_broker(settings={"log.retention.check.interval.ms": 100})
    keys, rounds = 20, 150
    with ctx as b:
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap, **COMMON)
        adm.create_topics([NewTopic("cmp", 1, 1, topic_configs={"cleanup.policy": "compact",
                                                                 "segment.bytes": "16384"}),
                           NewTopic("del", 1, 1, topic_configs={"segment.bytes": "16384"})])
        adm.close()
        p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", **COMMON)
        for r in range(rounds):
            for k in range(keys):
                v = None if (k == 3 and r == rounds - 1) else ("k%d-%d" % (k, r)).encode() * 5
                for t in ("cmp", "del"):
                    p.send(t, key=b"k%d" % k, value=v, partition=0)
        p.flush()
        p.close()
        produced = keys * rounds

        def read_all(topic):
            c = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False, **COMMON)
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek_to_beginning(tp)
            end = c.end_offsets([tp])[tp]
            out = []
            while not out or out[-1].offset < end - 1:
                got = c.poll(timeout_ms=2000)
                if not got:
                    break
                for recs in got.values():
                    out.extend(recs)
            c.close()
            return out, end

        m = wait_for(lambda: (lambda m: m if total(m, "sluice_compaction_segments_cleaned_total") > 0 else None)(
            scrape(ctx.admin)[0]), "the cleaner to rewrite a segment")
        assert total(m, "sluice_compaction_records_removed_total") > 0
        assert total(m, "sluice_compaction_bytes_after_total") < total(m, "sluice_compaction_bytes_before_total")
        assert total(m, "sluice_compaction_errors_total") == 0
        recs, end = read_all("cmp")
        assert end == produced, (end, produced)
        assert len(recs) < produced / 2, "compacted: %d records of %d" % (len(recs), produced)
        offs = [r.offset for r in recs]
        assert offs == sorted(set(offs)), "offsets only grow"
        newest = {}
        for r in recs:
            newest[r.key] = r.value
        for k in range(keys):
            want = None if k == 3 else ("k%d-%d" % (k, rounds - 1)).encode() * 5
            assert newest.get(b"k%d" % k, b"missing") == want, (k, newest.get(b"k%d" % k, b"missing"))
        drecs, dend = read_all("del")
        assert dend == produced and len(drecs) == produced, (len(drecs), produced)


if __name__ == "__main__":
    main("metrics")
