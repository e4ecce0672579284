#!/usr/bin/python3
"""The metadata log on the Raft quorum (libraft), with a real broker and
real clients (confluent-kafka): every metadata change is a record the
quorum commits (a quorum of one for a lone broker, the same code path as a
cluster's), kept in <log.dirs>/__cluster_metadata-raft.

- Changes of every kind (topics, partition counts, topic and broker
  configs, deletes, producer id blocks) come back after a clean restart and
  after a SIGKILL right after the client was answered.
- A data directory written before the quorum (tests/fixtures/
  datadir-before-quorum, made by the older broker) is upgraded in place
  once, saying so; an upgrade that stopped before it finished is redone.
- A node started with another node.id on the directory exits 2 naming it.

Run: /usr/bin/python3 tests/integration/test_metadata_quorum.py [test ...]
"""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICED, Broker, BrokerError, broker, free_port, main, temp_dir, test  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AdminClient, ConfigResource, NewPartitions,  # noqa: E402
                                   NewTopic)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "fixtures", "datadir-before-quorum", "data.tar.gz")
FIXTURE_CLUSTER = "jpEOseauRVeLU2C9Liftiw"


def admin(b):
    return AdminClient({"bootstrap.servers": b.bootstrap})


def change(b, fn, *args):
    """Run an AdminClient call and wait for every future (the client is
    kept until then: a collected client cancels its futures)."""
    a = admin(b)
    for f in getattr(a, fn)(*args).values():
        f.result(60)


def topics(b):
    a = admin(b)
    md = a.list_topics(timeout=30)
    return {n: len(t.partitions) for n, t in md.topics.items()}


def topic_config(b, name, key):
    r = ConfigResource("topic", name)
    a = admin(b)      # kept: a collected client cancels its futures
    cfg = a.describe_configs([r])[r].result(60)
    return cfg[key].value


def broker_config(b, key):
    r = ConfigResource("broker", "1")
    a = admin(b)
    cfg = a.describe_configs([r])[r].result(60)
    return cfg[key].value, cfg[key].source


def cluster_id(b):
    return b.ready_line.rsplit("cluster ", 1)[1].rstrip(")")


def produce(b, topic, n, tag):
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": True})
    errs = []
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=("%s-%d" % (tag, i)).encode(),
                  on_delivery=lambda e, m: e and errs.append(e))
    assert p.flush(60) == 0 and not errs, errs


def read_all(b, topic, parts):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "mq-%d" % free_port(),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    got, idle = [], 0
    while idle < 6:
        m = c.poll(0.5)
        if m is None:
            idle += 1
            continue
        idle = 0
        assert not m.error(), m.error()
        got.append((m.key(), m.value()))
    c.close()
    return got


def raft_dir(b):
    return os.path.join(b.data_dir, "__cluster_metadata-raft")


@test
def every_kind_of_change_survives_a_restart():
    with broker() as b:
        change(b, "create_topics", [NewTopic("a", 2, 1, config={"retention.ms": "7200000"}),
                                    NewTopic("b", 1, 1), NewTopic("gone", 3, 1)])
        change(b, "create_partitions", [NewPartitions("a", 5)])
        change(b, "delete_topics", ["gone"])
        change(b, "alter_configs", [ConfigResource("broker", "1", set_config={"log.retention.ms": "5400000"})])
        produce(b, "a", 50, "x")     # an idempotent producer: a producer id block
        cid = cluster_id(b)
        before = topics(b)
        assert before.get("a") == 5 and before.get("b") == 1 and "gone" not in before, before
        for hard in (False, True):
            b.restart(hard=hard)
            assert cluster_id(b) == cid, (cid, b.ready_line)
            assert topics(b) == before, (topics(b), before)
            assert topic_config(b, "a", "retention.ms") == "7200000"
            assert broker_config(b, "log.retention.ms")[0] == "5400000"
            assert len(read_all(b, "a", 5)) == 50
        assert os.path.isdir(raft_dir(b)) and not os.path.exists(os.path.join(b.data_dir, "__cluster_metadata-0"))
        # the quorum's own files: raft_uv's segments and metadata, our identity
        names = os.listdir(raft_dir(b))
        assert "sluice-quorum" in names and any(n.startswith("metadata") for n in names), names
        with open(os.path.join(raft_dir(b), "sluice-quorum")) as f:
            ident = f.read()
        assert "cluster.id %s" % cid in ident and "voters 1@127.0.0.1:0" in ident, ident


@test
def a_create_answered_before_sigkill_is_there_after_it():
    """CreateTopics is answered once the record is committed (durable in
    the quorum's log): a SIGKILL right after the answer loses nothing. Five
    rounds, each topic created and the broker killed at once."""
    with broker() as b:
        made = {}
        for i in range(5):
            name = "k%d" % i
            change(b, "create_topics", [NewTopic(name, i + 1, 1)])
            made[name] = i + 1
            b.restart(hard=True)
            have = topics(b)
            for n, parts in made.items():
                assert have.get(n) == parts, (n, parts, have)
        produce(b, "k4", 20, "after")
        assert len(read_all(b, "k4", 5)) == 20


@test
def producer_ids_stay_unique_across_restarts():
    """Each start reserves a new block through the quorum: an idempotent
    producer after a SIGKILL never gets an id handed out before."""
    seen = set()
    with broker() as b:
        for i in range(4):
            pid = init_producer_id(b.port)
            assert pid not in seen, (pid, seen)
            seen.add(pid)
            pid2 = init_producer_id(b.port)
            assert pid2 not in seen, (pid2, seen)
            seen.add(pid2)
            b.restart(hard=(i % 2 == 0))


def init_producer_id(port):
    """InitProducerId v1 (no transactional id): the producer id."""
    import socket
    import struct
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    body = struct.pack(">hhih", 22, 1, 7, 2) + b"mq"          # header: key, version, corr, client id
    body += struct.pack(">h", -1) + struct.pack(">i", 60000)  # transactional id null, timeout
    s.sendall(struct.pack(">i", len(body)) + body)
    n = struct.unpack(">i", recv_exact(s, 4))[0]
    resp = recv_exact(s, n)
    s.close()
    corr, throttle, err, pid, epoch = struct.unpack(">iihqh", resp[:20])
    assert corr == 7 and err == 0, (corr, err)
    return pid


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


@test
def racing_creates_and_deletes_leave_the_served_topics_and_the_log_agreeing():
    """Records apply turns after they are proposed: creates and deletes of
    the same few names from four clients at once must leave what the
    broker serves equal to what its metadata log says (a restart replays
    the log): no topic served that the log dropped, none in the log whose
    partitions never opened. Each surviving topic takes records."""
    import threading
    with broker() as b:
        stop = []

        def worker(w):
            a = admin(b)
            for i in range(25):
                name = "race-%d" % ((i + w) % 3)
                fs = a.create_topics([NewTopic(name, 1 + (i % 4), 1)], operation_timeout=30)
                fs.update(a.delete_topics(["race-%d" % ((i + w + 1) % 3)], operation_timeout=30))
                for f in fs.values():
                    try:
                        f.result(60)
                    except Exception as e:   # already exists, unknown topic: the race itself
                        if "TOPIC_ALREADY_EXISTS" not in str(e) and "UNKNOWN_TOPIC" not in str(e):
                            stop.append(repr(e))
        ts = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not stop, stop
        served = {n: p for n, p in topics(b).items() if n.startswith("race-")}
        b.restart()
        replayed = {n: p for n, p in topics(b).items() if n.startswith("race-")}
        assert served == replayed, (served, replayed)
        for n, p in replayed.items():
            produce(b, n, 5, n)
            assert len(read_all(b, n, p)) == 5, n
        print("    %d of 3 names alive after the race: %s" % (len(served), served))


def describe_quorum(port, ver, topic="__cluster_metadata", partition=0):
    """DescribeQuorum over raw frames (flexible from v0): (top error,
    partition error, leader, epoch, high watermark, [(voter, log end,
    last fetch, last caught up)], [node ids] (v2))."""
    from kraw import Conn, compact_str, read_compact_str, read_uvarint, uvarint, W
    body = uvarint(2) + compact_str(topic) + uvarint(2) + W().i32(partition).b + b"\x00" + b"\x00" + b"\x00"
    with Conn("127.0.0.1:%d" % port) as c:
        r = c.request_flex(55, ver, body)
        top = r.i16()
        if ver >= 2:
            read_compact_str(r)
        assert read_uvarint(r) == 2, "one topic"
        assert read_compact_str(r) == "__cluster_metadata"
        assert read_uvarint(r) == 2, "one partition"
        assert r.i32() == 0
        perr = r.i16()
        if ver >= 2:
            read_compact_str(r)
        leader, epoch, hw = r.i32(), r.i32(), r.i64()

        def replicas():
            out = []
            for _ in range(read_uvarint(r) - 1):
                rid = r.i32()
                if ver >= 2:
                    r.o += 16
                leo = r.i64()
                lf = lc = None
                if ver >= 1:
                    lf, lc = r.i64(), r.i64()
                assert read_uvarint(r) == 0
                out.append((rid, leo, lf, lc))
            return out
        voters = replicas()
        observers = replicas()
        assert not observers, observers
        assert read_uvarint(r) == 0
        assert read_uvarint(r) == 0
        nodes = []
        if ver >= 2:
            for _ in range(read_uvarint(r) - 1):
                nodes.append(r.i32())
                assert read_uvarint(r) == 1, "a quorum of one has no controller listener"
                assert read_uvarint(r) == 0
        assert read_uvarint(r) == 0
        return top, perr, leader, epoch, hw, voters, nodes


@test
def describe_quorum_shows_the_quorum_of_one_and_its_high_watermark_moving():
    """DescribeQuorum v0-v2 (what kafka-metadata-quorum asks): this node
    leads and is the only voter; its log end is the high watermark; a
    CreateTopics moves both; another partition gets UNKNOWN_TOPIC_OR_PARTITION;
    /metrics says the same and counts the commit latency."""
    import urllib.request
    with broker(settings={"admin.listen": "127.0.0.1:%d" % free_port()}) as b:
        for ver in (0, 1, 2):
            top, perr, leader, epoch, hw, voters, nodes = describe_quorum(b.port, ver)
            assert (top, perr, leader) == (0, 0, 1) and epoch >= 1 and hw >= 1, (ver, top, perr, leader, epoch, hw)
            assert [v[0] for v in voters] == [1] and voters[0][1] == hw, voters
            if ver >= 1:
                assert voters[0][2] == -1 and voters[0][3] > 0, voters
            if ver >= 2:
                assert nodes == [1], nodes
        change(b, "create_topics", [NewTopic("moves", 1, 1)])
        _, _, _, epoch2, hw2, voters2, _ = describe_quorum(b.port, 1)
        assert hw2 > hw and voters2[0][1] == hw2 and epoch2 == epoch, (hw, hw2, voters2)
        assert describe_quorum(b.port, 0, partition=1)[1] == 3, "UNKNOWN_TOPIC_OR_PARTITION"
        assert describe_quorum(b.port, 0, topic="other")[1] == 3
        admin_port = b.settings["admin.listen"].rsplit(":", 1)[1]
        m = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % admin_port, timeout=30).read().decode()
        assert "sluice_controller_quorum_leader 1\n" in m and "sluice_controller_quorum_is_leader 1\n" in m, m
        assert 'sluice_controller_quorum_index{index="committed"} %d\n' % hw2 in m, m
        count = [ln for ln in m.splitlines() if ln.startswith("sluice_controller_commit_latency_seconds_count")]
        assert count and int(count[0].split()[-1]) >= 5, count


@test
def a_snapshot_replaces_the_log_and_a_restart_restores_the_image_from_it():
    """libraft keeps a snapshot of the image (every 1,024 entries here)
    instead of the log before it: 600 topics created and 540 of them
    deleted (1,140 records) make raft_uv write one, and a SIGKILL and a
    clean restart then come back with exactly the 60 topics left, their
    configs, and producer ids beyond every block handed out before."""
    from kraw import Conn, W
    with broker() as b:
        with Conn(b.bootstrap) as c:
            for i in range(600):
                w = W().array(["s%d" % i], lambda w, n: w.str(n).i32(1).i16(1).array([], None).array(
                    [("retention.ms", str(3600000 + i))], lambda w, kv: w.str(kv[0]).str(kv[1]))).i32(30000).i8(0)
                r = c.request(19, 1, w)
                assert r.array(lambda r: (r.str(), r.i16(), r.str()))[0][1] == 0, i
            for i in range(600):
                if i % 10:
                    r = c.request(20, 0, W().array(["s%d" % i], lambda w, n: w.str(n)).i32(30000))
                    assert r.array(lambda r: (r.str(), r.i16()))[0][1] == 0, i
        snaps = [n for n in os.listdir(raft_dir(b)) if n.startswith("snapshot-")]
        assert snaps, ("no raft snapshot after 1,140 records", sorted(os.listdir(raft_dir(b))))
        pid = init_producer_id(b.port)
        want = {"s%d" % i: 1 for i in range(0, 600, 10)}
        for hard in (True, False):
            b.restart(hard=hard)
            have = {n: p for n, p in topics(b).items() if n.startswith("s")}
            assert have == want, (sorted(set(have) ^ set(want))[:10], len(have))
            assert topic_config(b, "s590", "retention.ms") == "3600590"
            pid2 = init_producer_id(b.port)
            assert pid2 > pid, (pid, pid2)
            pid = pid2
        print("    raft snapshots: %s" % ", ".join(sorted(snaps)))


def fixture_broker():
    """A Broker on a copy of the older broker's data directory."""
    work = temp_dir()
    subprocess.run(["tar", "-xzf", FIXTURE, "-C", work], check=True)
    return Broker(work, settings={"offsets.topic.num.partitions": "2",
                                  "transaction.state.log.num.partitions": "2"})


def check_fixture_state(b):
    assert cluster_id(b) == FIXTURE_CLUSTER, b.ready_line
    t = topics(b)
    assert t.get("upgraded") == 3, t
    assert topic_config(b, "upgraded", "retention.ms") == "86400000"
    v, src = broker_config(b, "log.retention.ms")
    assert v == "3600000", (v, src)
    got = read_all(b, "upgraded", 3)
    assert sorted(k for k, _ in got) == sorted(b"k%d" % i for i in range(1, 21)), got


@test
def an_older_data_directory_is_upgraded_in_place_once():
    b = fixture_broker()
    try:
        b.start()
        with open(b.log_path, "rb") as f:
            log = f.read().decode()
        assert "upgraded the data directory" in log and "__cluster_metadata-0.imported" in log, log
        check_fixture_state(b)
        old = os.path.join(b.data_dir, "__cluster_metadata-0")
        assert not os.path.exists(old) and os.path.isdir(old + ".imported"), os.listdir(b.data_dir)
        # a second start does not import again
        b.restart()
        with open(b.log_path, "rb") as f:
            log = f.read().decode()
        assert "upgraded" not in log and "import" not in log, log
        check_fixture_state(b)
        # producing after the upgrade: a producer id block beyond the old ones
        produce(b, "upgraded", 10, "new")
        assert len(read_all(b, "upgraded", 3)) == 30
        b.stop()
    finally:
        if b.proc:
            b.kill()
        shutil.rmtree(b.workdir, ignore_errors=True)


@test
def an_upgrade_that_stopped_before_it_finished_is_redone():
    """The old log is renamed only once every record of it is committed in
    the quorum's log: a crash in between leaves both, and the next start
    imports again from scratch (the same state, nothing twice). Shown by
    putting the old log back under its name after an upgrade."""
    b = fixture_broker()
    try:
        b.start()
        b.kill()
        old = os.path.join(b.data_dir, "__cluster_metadata-0")
        os.rename(old + ".imported", old)
        b.start()
        with open(b.log_path, "rb") as f:
            log = f.read().decode()
        assert "importing again" in log and "upgraded the data directory" in log, log
        check_fixture_state(b)
        b.stop()
    finally:
        if b.proc:
            b.kill()
        shutil.rmtree(b.workdir, ignore_errors=True)


@test
def another_node_id_on_the_directory_exits_2_naming_node_id():
    with broker() as b:
        b.stop()
        p = subprocess.run([SLUICED, "--data-dir", b.data_dir, "--listen", "127.0.0.1:%d" % free_port(),
                            "--shards", "1", "--set", "node.id=7"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode()
        assert p.returncode == 2, (p.returncode, err)
        assert "node.id" in err and "__cluster_metadata-raft" in err, err
        assert b"listening on" not in p.stdout
        b.start()   # still the original node's


def start_exit(data_dir, *sets):
    """sluiced on data_dir with --set each of sets: (exit code, stderr)
    when it exits before serving; ("ready", None) after stopping it once it
    served."""
    cmd = [SLUICED, "--data-dir", data_dir, "--listen", "127.0.0.1:%d" % free_port(), "--shards", "1"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline()
    if b"listening on" in line:
        p.terminate()
        p.communicate(timeout=60)
        return "ready", line.decode()
    _, err = p.communicate(timeout=60)
    return p.returncode, err.decode()


@test
def a_node_configured_for_another_cluster_exits_2_naming_cluster_id():
    """cluster.id (Kafka's kafka-storage format -t): a new data directory
    takes it; a directory of another cluster is refused with exit 2 naming
    the key; the directory's own id, or none, starts; a malformed one is
    refused before anything is written."""
    work = temp_dir()
    try:
        d1 = os.path.join(work, "d1")
        rc, line = start_exit(d1, "cluster.id=MkU3OEVBNTcwNTJENDM2Qk")
        assert rc == "ready" and line.rstrip().endswith("cluster MkU3OEVBNTcwNTJENDM2Qk)"), (rc, line)
        rc, err = start_exit(d1, "cluster.id=AAAAAAAAAAAAAAAAAAAAAA")
        assert rc == 2 and "cluster.id" in err and "MkU3OEVBNTcwNTJENDM2Qk" in err, (rc, err)
        assert start_exit(d1, "cluster.id=MkU3OEVBNTcwNTJENDM2Qk")[0] == "ready"
        assert start_exit(d1)[0] == "ready"
        d2 = os.path.join(work, "d2")
        rc, err = start_exit(d2, "cluster.id=not-an-id")
        assert rc == 2 and "cluster.id" in err, (rc, err)
        assert not os.path.exists(os.path.join(d2, "__cluster_metadata-raft")), os.listdir(d2)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main("metadata-quorum")
    except BrokerError as e:
        print(e)
        sys.exit(1)
