#!/usr/bin/python3
"""The metadata quorum and the controller channel over TLS (issue 21;
docs/security.md#the-controller-listener).

Three combined nodes (scripts/cluster) whose controller listener is SSL
(listener.security.protocol.map=...,CONTROLLER:SSL): libraft's
connections and the controller channel's run in a TLS tunnel each,
mutual (ssl.client.auth=required on the controller port), certificates
of a CA the test makes (openssl).

- the quorum forms over TLS: every node counts handshakes and no
  failure; a topic created through one node is served by the other two
  (its record went through the leader and raft);
- the leader SIGKILLed: the other two elect one of themselves, a topic
  created then is on both; the killed node restarted catches up;
- a plaintext connection to a controller port that speaks the controller
  channel (its handshake, then a FETCH of the metadata log from index 1,
  which the plaintext port answers with every record) gets no answer:
  nothing, or a TLS alert; the refusal is counted;
- a TLS client without a certificate gets no answer either (mutual TLS);
- node 3 restarted with a certificate of another CA (trusting only that
  CA): nodes 1 and 2 refuse its connections and it refuses theirs
  ("certificate verify failed" logged, counted), a topic created
  meanwhile never reaches it;
- rotation: nodes 1 and 2 get that other CA's keystore and truststore in
  place of their files and reload (node 1 by SIGHUP, node 2 by POST
  /v1/tls/reload; one server and one client reload counted each); node 3
  restarted on those same files joins them and catches up (on the code
  before the controller listener was reloaded, node 1 logs "no SSL
  listener, nothing to reload" and, that check left out, node 3 is
  refused both ways and never becomes ready); a keystore that does not
  load is refused at the POST (422 naming the controller listener and the
  file), the previous contexts stay and the quorum goes on;
- three dedicated controllers and a broker-only node: the broker fetches
  the metadata and forwards its records over TLS.

On the plaintext transport (SLUICE_QTLS_PROTOCOL=PLAINTEXT runs this test
with the controller listener PLAINTEXT, as before this change) the
plaintext FETCH is answered with the metadata records and the test fails
there; on the code before, the nodes exit 2 at start ("a controller
listener over SSL is not implemented").

About 25 s. Run: /usr/bin/python3 tests/integration/test_cluster_quorum_tls.py
"""

import atexit
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICED, main, make_tls_certs, temp_dir, test  # noqa: E402
from cluster import Cluster, until  # noqa: E402
from kraw import describe_quorum  # noqa: E402

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PROTOCOL = os.environ.get("SLUICE_QTLS_PROTOCOL", "SSL")
OK = 'sluice_controller_tls_handshakes_total{result="ok"}'
FAILED = 'sluice_controller_tls_handshakes_total{result="failed"}'
CH_MAGIC = 0x314e4843434c53   # control/quorum_transport.h: QT_CHANNEL_MAGIC
CH_FETCH, CH_FETCH_RESP = 5, 6  # control/ctl_channel.c


def settings(certs):
    return ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:" + PROTOCOL,
            "ssl.keystore.location=" + os.path.join(certs, "broker.keystore.pem"),
            "ssl.truststore.location=" + os.path.join(certs, "ca.pem")]




def agreed_leader(c, nodes):
    seen = set()
    for n in nodes:
        leader, _epoch, voters = describe_quorum(c.port(n))
        assert voters == [1, 2, 3], voters
        seen.add(leader)
    if len(seen) == 1 and next(iter(seen)) in nodes:
        return next(iter(seen))
    return None


def topics(port):
    return set(AdminClient({"bootstrap.servers": "127.0.0.1:%d" % port}).list_topics(timeout=20).topics)


def create_topic(port, name, on=None):
    """name with one partition (on broker `on`, if given)."""
    a = AdminClient({"bootstrap.servers": "127.0.0.1:%d" % port})
    t = NewTopic(name, 1, replica_assignment=[[on]]) if on else NewTopic(name, 1, 1)
    a.create_topics([t], operation_timeout=30)[name].result(60)
    return True


def ctl_addr(c, n):
    host, port = c.listener_addr(n, "CONTROLLER").rsplit(":", 1)
    return host, int(port)


def channel_fetch():
    """The controller channel's handshake as node 1, then a FETCH from
    index 1: a voter answers it with the metadata records it applied."""
    return (struct.pack("<QQ", CH_MAGIC, 1) +
            struct.pack("<IBQQ", 17, CH_FETCH, 7, 1))


def read_all(s, limit=1 << 20):
    data = b""
    try:
        while len(data) < limit:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except (OSError, ssl.SSLError):
        pass
    return data


def plaintext_probe(c, n):
    s = socket.create_connection(ctl_addr(c, n), timeout=5)
    s.sendall(channel_fetch())
    data = read_all(s)
    s.close()
    return data


def certless_probe(c, n, certs):
    """TLS trusting the CA but with no certificate of its own."""
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
    ctx.check_hostname = False
    raw = socket.create_connection(ctl_addr(c, n), timeout=5)
    try:
        s = ctx.wrap_socket(raw)
    except (OSError, ssl.SSLError):
        raw.close()
        return b""
    try:
        s.sendall(channel_fetch())
    except (OSError, ssl.SSLError):
        pass
    data = read_all(s)
    s.close()
    return data


def no_channel_answer(data):
    """Nothing, or a TLS alert record (0x15): never a FETCH_RESP frame."""
    assert not data or data[0] == 0x15, ("the controller port answered", data[:32])
    assert not (len(data) >= 5 and data[4] == CH_FETCH_RESP), data[:32]


def start_with(c, node, props_text):
    """Start node with these server.properties, not waiting for its ready
    line (it may never come); scripts/cluster stops it by its pid file."""
    d = os.path.join(c.dir, "n%d" % node)
    path = os.path.join(d, "server.properties")
    with open(path, "w") as f:
        f.write(props_text)
    out = open(os.path.join(d, "stdout"), "w")
    log = open(os.path.join(d, "sluiced.log"), "a")
    p = subprocess.Popen([SLUICED, "--config", path, "--shards", "1"], stdin=subprocess.DEVNULL, stdout=out,
                         stderr=log, start_new_session=True)
    out.close()
    log.close()
    with open(os.path.join(d, "pid"), "w") as f:
        f.write("%d\n" % p.pid)
    return p


def admin_addr(c, node):
    with open(os.path.join(c.dir, "n%d" % node, "server.properties")) as f:
        return re.search(r"admin.listen=(\S+)", f.read()).group(1)


def failures(c, nodes):
    return sum(c.metric(n, FAILED) for n in nodes)


@test
def the_quorum_over_mutual_tls():
    certs = make_tls_certs(temp_dir("sluice-qtls-certs-"))
    atexit.register(shutil.rmtree, certs, True)
    t0 = time.monotonic()

    def step(what):
        print("  %5.1f s  %s" % (time.monotonic() - t0, what), flush=True)
    with Cluster(3, sets=settings(certs) + ["broker.session.timeout.ms=3000",
                                             "broker.heartbeat.interval.ms=500"]) as c:
        step("cluster up")
        # the controller port's connections are not plaintext: a channel
        # FETCH on it gets no metadata, and the refusal is counted
        no_channel_answer(plaintext_probe(c, 1))
        until("the plaintext connection counted on node 1", lambda: c.metric(1, FAILED) >= 1)
        assert "controller port: TLS from 127.0.0.1:" in c.log(1), c.log(1)[-2000:]
        # nor does a TLS client without a certificate
        before = c.metric(2, FAILED)
        no_channel_answer(certless_probe(c, 2, certs))
        until("the certificate-less client counted on node 2", lambda: c.metric(2, FAILED) > before)
        step("plaintext and certificate-less connections refused, counted")

        leader = until("one leader agreed on by the three", lambda: agreed_leader(c, [1, 2, 3]))
        for n in (1, 2, 3):
            assert c.metric(n, OK) >= 1, n
        others = [n for n in (1, 2, 3) if n != leader]
        # a metadata change through a node that does not lead: the
        # controller channel to the leader, raft to the others
        until("qtls-a created through node %d" % others[0], lambda: create_topic(c.port(others[0]), "qtls-a"))
        for n in (1, 2, 3):
            until("qtls-a on node %d" % n, lambda: "qtls-a" in topics(c.port(n)))
        assert c.metric(others[0], 'sluice_controller_channel_requests_total{kind="forwarded"}') >= 1
        step("leader %d; a topic through node %d on every node" % (leader, others[0]))

        # failover
        c.kill(leader)
        new = until("a new leader among %s" % others, lambda: agreed_leader(c, others))
        until("qtls-b created through node %d" % others[0], lambda: create_topic(c.port(others[0]), "qtls-b"))
        for n in others:
            until("qtls-b on node %d" % n, lambda: "qtls-b" in topics(c.port(n)))
        c.restart(leader)
        until("qtls-b on the restarted node %d" % leader, lambda: "qtls-b" in topics(c.port(leader)))
        until("the restarted node agrees on the leader", lambda: agreed_leader(c, [1, 2, 3]))
        step("leader %d killed, %d leads, the killed node back and caught up" % (leader, new))

        # node 3 with a certificate of another CA, trusting only that CA
        other = make_tls_certs(temp_dir("sluice-qtls-other-ca-"))
        atexit.register(shutil.rmtree, other, True)
        path = os.path.join(c.dir, "n3", "server.properties")
        with open(path) as f:
            good = f.read()
        c.kill(3)
        base = failures(c, (1, 2))
        log_from = len(c.log(3))
        foreign = start_with(c, 3, good.replace(certs, other))
        try:
            until("nodes 1 and 2 refuse node 3's connections (several)", lambda: failures(c, (1, 2)) >= base + 4)
            until("node 3 refuses theirs", lambda: "controller port: TLS to 127.0.0.1" in c.log(3) and
                  "certificate verify failed" in c.log(3))
            assert "certificate verify failed" in c.log(1) + c.log(2)
            step("node 3 with another CA refused")
            # (on node 1: not placed on node 3, which is fenced only after its session)
            until("qtls-c created through node 1", lambda: create_topic(c.port(1), "qtls-c", on=1))
            for n in (1, 2):
                until("qtls-c on node %d" % n, lambda: "qtls-c" in topics(c.port(n)))
            step("qtls-c on nodes 1 and 2")
            # node 3 keeps trying and keeps being refused; it never has qtls-c
            mark = failures(c, (1, 2))
            until("node 3 refused again since", lambda: failures(c, (1, 2)) >= mark + 4)
            with open(os.path.join(c.dir, "n3", "stdout")) as f:
                ready3 = "listening on" in f.read()
            assert not ready3 or "qtls-c" not in topics(c.port(3)), "node 3 joined the quorum with a foreign CA"
            assert "active controller now" not in c.log(3)[log_from:], c.log(3)[log_from:]
        finally:
            # ours to reap (scripts/cluster would wait on its zombie)
            foreign.kill()
            foreign.wait()
            if os.path.exists(os.path.join(c.dir, "n3", "pid")):
                os.unlink(os.path.join(c.dir, "n3", "pid"))
        step("node 3 with another CA: refused both ways, logged, counted; qtls-c never reached it")

        # rotation: nodes 1 and 2 take the other CA's files in place of
        # theirs and reload (1 by SIGHUP, 2 by POST), still running; node 3
        # restarted on the same paths (the new files only) joins them
        for name in ("broker.keystore.pem", "ca.pem"):
            shutil.copyfile(os.path.join(other, name), os.path.join(certs, name))
        os.kill(c.pid(1), signal.SIGHUP)
        until("node 1 answered the SIGHUP", lambda: "sluiced: SIGHUP: " in c.log(1))
        assert "SIGHUP: TLS certificates reloaded" in c.log(1), c.log(1)[-2000:]
        r = urllib.request.urlopen(urllib.request.Request("http://%s/v1/tls/reload" % admin_addr(c, 2),
                                                          method="POST"), timeout=30)
        assert r.status == 200, r.read()
        for n in (1, 2):   # the controller listener's server and client contexts
            assert c.metric(n, "sluice_tls_reloads_total") == 1, n
            assert c.metric(n, "sluice_tls_client_reloads_total") == 1, n
        with open(path, "w") as f:
            f.write(good)
        c.restart(3)
        until("qtls-c on node 3 with the rotated certificates", lambda: "qtls-c" in topics(c.port(3)))
        until("the three agree on the leader", lambda: agreed_leader(c, [1, 2, 3]))
        step("nodes 1 and 2 reloaded the other CA's files; node 3 on them caught up")

        # a file that does not load: refused, named, the previous context stays
        with open(os.path.join(certs, "broker.keystore.pem"), "w") as f:
            f.write("not a certificate\n")
        try:
            urllib.request.urlopen(urllib.request.Request("http://%s/v1/tls/reload" % admin_addr(c, 2),
                                                          method="POST"), timeout=30)
            raise AssertionError("a reload of a bad keystore was accepted")
        except urllib.error.HTTPError as e:
            body = e.read().decode()
            assert e.code == 422 and "controller listener" in body and "broker.keystore.pem" in body, body
        assert c.metric(2, "sluice_tls_reloads_total") == 1
        until("qtls-d created through node 2", lambda: create_topic(c.port(2), "qtls-d", on=2))
        for n in (1, 2, 3):
            until("qtls-d on node %d" % n, lambda: "qtls-d" in topics(c.port(n)))
        step("a bad keystore refused at the reload, the quorum goes on")
        for pid in [c.pid(n) for n in (1, 2, 3)]:
            if pid:
                os.kill(pid, signal.SIGKILL)
    step("closed")


@test
def a_broker_only_node_over_tls():
    """Three dedicated controllers and a broker-only node (Kafka's
    process.roles=broker): the broker fetches the metadata log from the
    voters and forwards its records over the controller channel, both on
    TLS; its handshakes counted, none failed."""
    certs = make_tls_certs(temp_dir("sluice-qtls-certs-"))
    atexit.register(shutil.rmtree, certs, True)
    with Cluster(3, brokers=1, sets=settings(certs)) as c:
        until("qtls-o created through the broker", lambda: create_topic(c.port(4), "qtls-o"))
        until("qtls-o served by the broker", lambda: "qtls-o" in topics(c.port(4)))
        assert c.metric(4, OK) >= 1 and c.metric(4, FAILED) == 0, c.log(4)[-2000:]
        for n in (1, 2, 3):
            assert c.metric(n, FAILED) == 0, c.log(n)[-2000:]


if __name__ == "__main__":
    main("cluster quorum over TLS")
