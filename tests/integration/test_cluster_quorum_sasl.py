#!/usr/bin/python3
"""SASL PLAIN on the controller listener (docs/security.md#the-controller-listener):
SASL_PLAINTEXT and SASL_SSL in listener.security.protocol.map,
sasl.mechanism.controller.protocol=PLAIN, and each node's own login and
the users it accepts in listener.name.controller.plain.sasl.jaas.config.

- SASL_PLAINTEXT, three combined nodes: the quorum forms (every node
  counts authentications accepted and made, none failed); a topic created
  through a node that does not lead reaches the three; the leader
  SIGKILLed, the other two elect one of themselves and a topic created
  then reaches both; the killed node restarted with a wrong password never
  joins (its login and the users it accepts both changed: the others
  count and log its failures, never the password; a topic created
  meanwhile never reaches it, it never leads); restarted with its own password it
  catches up; a raw connection that skips authentication and sends the
  controller channel's handshake and a FETCH of the metadata log gets
  nothing and is counted; configuration errors exit 2 naming the key
  (SCRAM-SHA-512, with Kafka's reason; no JAAS config);
- SASL_SSL, three combined nodes with the TLS set-up of
  test_cluster_quorum_tls.py: the quorum forms and a topic reaches the
  three; a TLS connection with a good certificate that skips SASL and
  sends the channel's FETCH gets nothing and is counted; sessions of 4 s
  (listener.name.controller.plain.connections.max.reauth.ms) end through
  the tunnels and a topic created after reaches the three;
- three dedicated controllers and a broker-only node on SASL_PLAINTEXT:
  the broker authenticates, fetches the metadata and forwards its records;
- the password rotated with reloads only (SIGHUP, POST /v1/tls/reload):
  the new user beside the old, the new login, the old user removed, on
  the three; node 3 restarted on its rotated file joins (nodes 1 and 2
  connect to it with their reloaded login), a topic reaches the three; a
  JAAS config without a password or that does not parse is refused at the
  reload (key and file named, no password) and the previous logins stay;
  node 3 restarted on the file from before the rotation is refused;
- sessions with a lifetime (listener.name.controller.connections.max.reauth.ms
  = 3000): closed at their end, counted and logged, made again; topics
  created after reach the three.

On the code without the SASL check on the accepting side (the exchange
skipped there), the raw connection's FETCH is answered with the metadata
records and the test fails there. Without the reload taking the new JAAS
config, node 3 on its rotated file is refused both ways (its restart never
gets ready); without the closing at a session's end, no session ends.

About 70 s. Run: /usr/bin/python3 tests/integration/test_cluster_quorum_sasl.py [case]
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
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICED, main, make_tls_certs, temp_dir, test  # noqa: E402
from cluster import Cluster, until  # noqa: E402
from kraw import describe_quorum  # noqa: E402

from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

JAAS_KEY = "listener.name.controller.plain.sasl.jaas.config"
MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def jaas(password="ctl-secret"):
    return ('%s=%s username="ctl" password="%s" user_ctl="ctl-secret" user_other="other-secret";'
            % (JAAS_KEY, MODULE, password))


def metric(c, n, side, result):
    return c.metric(n, 'sluice_controller_sasl_authentications_total{side="%s",result="%s"}' % (side, result))


CH_MAGIC = 0x314e4843434c53   # control/quorum_transport.h: QT_CHANNEL_MAGIC
CH_FETCH, CH_FETCH_RESP = 5, 6  # control/ctl_channel.c


def agreed_leader(c, nodes):
    seen = {describe_quorum(c.port(n))[0] for n in nodes}
    if len(seen) == 1 and next(iter(seen)) in nodes:
        return next(iter(seen))
    return None


def topics(port):
    return set(AdminClient({"bootstrap.servers": "127.0.0.1:%d" % port}).list_topics(timeout=20).topics)


def create_topic(port, name, on=None):
    a = AdminClient({"bootstrap.servers": "127.0.0.1:%d" % port})
    t = NewTopic(name, 1, replica_assignment=[[on]]) if on else NewTopic(name, 1, 1)
    a.create_topics([t], operation_timeout=30)[name].result(60)
    return True


def ctl_addr(c, n):
    host, port = c.listener_addr(n, "CONTROLLER").rsplit(":", 1)
    return host, int(port)


def channel_fetch():
    return struct.pack("<QQ", CH_MAGIC, 1) + struct.pack("<IBQQ", 17, CH_FETCH, 7, 1)


def read_all(s, limit=1 << 20):
    data = b""
    s.settimeout(30)
    try:
        while len(data) < limit:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except (OSError, ssl.SSLError):
        pass
    return data


def no_channel_answer(data):
    assert not (len(data) >= 5 and data[4] == CH_FETCH_RESP), ("the controller port answered", data[:32])
    assert CH_FETCH_RESP not in data[4:5], data[:32]


def props(c, n):
    with open(os.path.join(c.dir, "n%d" % n, "server.properties")) as f:
        return f.read()


def write_props(c, n, text):
    with open(os.path.join(c.dir, "n%d" % n, "server.properties"), "w") as f:
        f.write(text)


def start_with(c, node, props_text):
    """Start node with these server.properties, not waiting for its ready
    line (it may never come); scripts/cluster stops it by its pid file."""
    d = os.path.join(c.dir, "n%d" % node)
    write_props(c, node, props_text)
    out = open(os.path.join(d, "stdout"), "w")
    log = open(os.path.join(d, "sluiced.log"), "a")
    p = subprocess.Popen([SLUICED, "--config", os.path.join(d, "server.properties"), "--shards", "1"],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=log, start_new_session=True)
    out.close()
    log.close()
    with open(os.path.join(d, "pid"), "w") as f:
        f.write("%d\n" % p.pid)
    return p


def exit_code(path):
    p = subprocess.run([SLUICED, "--config", path, "--shards", "1"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stderr.decode()


@test
def sasl_plaintext_controller_listener():
    sets = ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.mechanism.controller.protocol=PLAIN", jaas(),
            "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500"]
    with Cluster(3, sets=sets) as c:
        leader = until("one leader agreed on by the three", lambda: agreed_leader(c, [1, 2, 3]))
        # a raw connection that skips authentication gets nothing
        before = metric(c, 1, "accepted", "failed")
        s = socket.create_connection(ctl_addr(c, 1), timeout=10)
        s.sendall(channel_fetch())
        no_channel_answer(read_all(s))
        s.close()
        until("the raw connection counted on node 1", lambda: metric(c, 1, "accepted", "failed") > before)
        assert "controller port: SASL authentication from 127.0.0.1:" in c.log(1), c.log(1)[-2000:]

        for n in (1, 2, 3):
            assert metric(c, n, "accepted", "ok") >= 1 and metric(c, n, "made", "ok") >= 1, n
            assert metric(c, n, "made", "failed") == 0, n
        others = [n for n in (1, 2, 3) if n != leader]
        until("qs-a created through node %d" % others[0], lambda: create_topic(c.port(others[0]), "qs-a"))
        for n in (1, 2, 3):
            until("qs-a on node %d" % n, lambda: "qs-a" in topics(c.port(n)))

        # failover
        c.kill(leader)
        until("a new leader among %s" % others, lambda: agreed_leader(c, others))
        until("qs-b created through node %d" % others[0], lambda: create_topic(c.port(others[0]), "qs-b"))
        for n in others:
            until("qs-b on node %d" % n, lambda: "qs-b" in topics(c.port(n)))

        # the killed node with another password (its own login and the one
        # it accepts) never joins: refused both ways, counted, logged
        good = props(c, leader)
        base = sum(metric(c, n, "accepted", "failed") for n in others)
        log_from = len(c.log(leader))
        foreign = start_with(c, leader, good.replace("ctl-secret", "wrong-secret"))
        try:
            until("the others refuse its connections (several)",
                  lambda: sum(metric(c, n, "accepted", "failed") for n in others) >= base + 4)
            until("it refuses theirs", lambda: "SASL authentication from 127.0.0.1:" in c.log(leader)[log_from:])
            for n in others:
                assert "ctl-secret" not in c.log(n) and "wrong-secret" not in c.log(n), c.log(n)[-2000:]
            until("qs-c created through node %d" % others[0],
                  lambda: create_topic(c.port(others[0]), "qs-c", on=others[0]))
            mark = sum(metric(c, n, "accepted", "failed") for n in others)
            until("refused again since",
                  lambda: sum(metric(c, n, "accepted", "failed") for n in others) >= mark + 4)
            with open(os.path.join(c.dir, "n%d" % leader, "stdout")) as f:
                ready = "listening on" in f.read()
            assert not ready or "qs-c" not in topics(c.port(leader)), "a node with a wrong password joined"
            assert "active controller now" not in c.log(leader)[log_from:], c.log(leader)[log_from:]
        finally:
            foreign.kill()
            foreign.wait()
            if os.path.exists(os.path.join(c.dir, "n%d" % leader, "pid")):
                os.unlink(os.path.join(c.dir, "n%d" % leader, "pid"))
        write_props(c, leader, good)

        # back with its password: it catches up
        c.restart(leader)
        until("qs-c on the restarted node", lambda: "qs-c" in topics(c.port(leader)))
        until("the three agree on a leader", lambda: agreed_leader(c, [1, 2, 3]))

        # configuration errors: exit 2 naming the key
        c.kill(leader)
        path = os.path.join(c.dir, "n%d" % leader, "bad.properties")
        with open(path, "w") as f:
            f.write(good.replace("sasl.mechanism.controller.protocol=PLAIN",
                                 "sasl.mechanism.controller.protocol=SCRAM-SHA-512"))
        code, err = exit_code(path)
        assert code == 2 and "sasl.mechanism.controller.protocol" in err and "metadata log" in err, (code, err)
        with open(path, "w") as f:
            f.write("\n".join(line for line in good.splitlines() if not line.startswith(JAAS_KEY)) + "\n")
        code, err = exit_code(path)
        assert code == 2 and JAAS_KEY in err, (code, err)
        with open(path, "w") as f:
            f.write(good.replace("sasl.mechanism.controller.protocol=PLAIN",
                                 "sasl.mechanism.controller.protocol=GSSAPI"))
        code, err = exit_code(path)
        assert code == 2 and "sasl.mechanism.controller.protocol" in err, (code, err)


@test
def sasl_ssl_controller_listener():
    certs = make_tls_certs(temp_dir("sluice-qsasl-certs-"))
    atexit.register(shutil.rmtree, certs, True)
    sets = ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
            "ssl.keystore.location=" + os.path.join(certs, "broker.keystore.pem"),
            "ssl.truststore.location=" + os.path.join(certs, "ca.pem"),
            "sasl.mechanism.controller.protocol=PLAIN", jaas(),
            "listener.name.controller.plain.connections.max.reauth.ms=4000"]
    with Cluster(3, sets=sets) as c:
        leader = until("one leader agreed on by the three", lambda: agreed_leader(c, [1, 2, 3]))
        for n in (1, 2, 3):
            assert metric(c, n, "accepted", "ok") >= 1 and metric(c, n, "made", "ok") >= 1, n
            assert c.metric(n, 'sluice_controller_tls_handshakes_total{result="ok"}') >= 1, n
        other = [n for n in (1, 2, 3) if n != leader][0]
        until("qss-a created through node %d" % other, lambda: create_topic(c.port(other), "qss-a"))
        for n in (1, 2, 3):
            until("qss-a on node %d" % n, lambda: "qss-a" in topics(c.port(n)))
        # TLS with a good certificate, no SASL: nothing
        before = metric(c, 1, "accepted", "failed")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(os.path.join(certs, "ca.pem"))
        ctx.check_hostname = False
        ctx.load_cert_chain(os.path.join(certs, "broker.keystore.pem"))
        s = ctx.wrap_socket(socket.create_connection(ctl_addr(c, 1), timeout=10))
        s.sendall(channel_fetch())
        no_channel_answer(read_all(s))
        s.close()
        until("the connection without SASL counted on node 1", lambda: metric(c, 1, "accepted", "failed") > before)
        # sessions end through the TLS tunnels too, and are made again
        ended = "sluice_controller_sasl_sessions_ended_total"
        until("sessions ended on node %d" % leader, lambda: c.metric(leader, ended) >= 2)
        until("qss-b created through node %d" % other, lambda: create_topic_once(c.port(other), "qss-b"))
        for n in (1, 2, 3):
            until("qss-b on node %d" % n, lambda: "qss-b" in topics(c.port(n)))
            assert metric(c, n, "made", "failed") == 0, n


@test
def a_broker_only_node_over_sasl():
    """Three dedicated controllers and a broker-only node on a
    SASL_PLAINTEXT controller listener: the broker authenticates to the
    voters, fetches the metadata and forwards its records; nothing fails."""
    sets = ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.mechanism.controller.protocol=PLAIN", jaas()]
    with Cluster(3, brokers=1, sets=sets) as c:
        until("qs-o created through the broker", lambda: create_topic(c.port(4), "qs-o"))
        until("qs-o served by the broker", lambda: "qs-o" in topics(c.port(4)))
        assert metric(c, 4, "made", "ok") >= 1 and metric(c, 4, "made", "failed") == 0, c.log(4)[-2000:]
        for n in (1, 2, 3):
            assert metric(c, n, "accepted", "failed") == 0, c.log(n)[-2000:]


def login_jaas(user, password, users):
    """The controller listener's JAAS line: this node's login and the users it accepts."""
    return "%s=%s username=\"%s\" password=\"%s\" %s;" % (
        JAAS_KEY, MODULE, user, password, " ".join('user_%s="%s"' % u for u in users))


def with_jaas(text, line):
    return "\n".join(line if x.startswith(JAAS_KEY + "=") else x for x in text.splitlines()) + "\n"


def reload_node(c, n, how):
    """SIGHUP or POST /v1/tls/reload on node n; waits for its answer on
    stderr (SIGHUP) or the HTTP answer (POST), and returns the status (POST)."""
    if how == "sighup":
        said = c.log(n).count("the controller listener's logins")
        os.kill(c.pid(n), signal.SIGHUP)
        until("node %d answered the SIGHUP" % n, lambda: c.log(n).count("the controller listener's logins") > said)
        return None
    req = urllib.request.Request("http://%s/v1/tls/reload" % c_admin(c, n), method="POST")
    try:
        r = urllib.request.urlopen(req, timeout=30)
        return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def c_admin(c, n):
    return re.search(r"admin.listen=(\S+)", props(c, n)).group(1)


def reloads(c, n, result):
    return c.metric(n, 'sluice_controller_sasl_reloads_total{result="%s"}' % result)


def create_topic_once(port, name):
    """Create name (retried by until); one that exists already counts: a
    forward whose answer was lost with its connection may have committed."""
    a = AdminClient({"bootstrap.servers": "127.0.0.1:%d" % port})
    try:
        a.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(60)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    return True


@test
def the_controller_password_rotates_with_reloads():
    """Rotation without a restart: every node reloads (SIGHUP or POST)
    its JAAS config three times: the new user accepted beside the old,
    then its login the new one, then the old user removed. Node 3 then
    restarted on its file joins (nodes 1 and 2 accept its new login and
    connect to it with theirs: without the reload they would still send
    the old one, which node 3 no longer accepts), a topic created after
    reaches the three, and node 3 restarted with the old login in its file
    is refused by the others. A JAAS config without a password is refused
    at the reload (named, counted) and the previous logins stay."""
    old, new = ("ctl", "old-secret"), ("ctl2", "new-secret")
    sets = ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.mechanism.controller.protocol=PLAIN", login_jaas(old[0], old[1], [old])]
    with Cluster(3, sets=sets) as c:
        until("one leader agreed on by the three", lambda: agreed_leader(c, [1, 2, 3]))
        steps = [login_jaas(old[0], old[1], [old, new]),    # both users accepted
                 login_jaas(new[0], new[1], [old, new]),    # the new login
                 login_jaas(new[0], new[1], [new])]         # the old user gone
        for i, line in enumerate(steps):
            for n in (1, 2, 3):
                write_props(c, n, with_jaas(props(c, n), line))
                if n == 2:
                    st, body = reload_node(c, n, "post")
                    assert st == 200 and '"controller_logins": true' in body, (st, body)
                else:
                    reload_node(c, n, "sighup")
                assert reloads(c, n, "ok") == i + 1 and reloads(c, n, "failed") == 0, (n, c.log(n)[-2000:])
        for n in (1, 3):
            assert "SIGHUP: the controller listener's logins reloaded: %s in " % JAAS_KEY in c.log(n), c.log(n)
        assert "admin: the controller listener's logins reloaded" in c.log(2), c.log(2)[-2000:]

        # node 3 restarted on its rotated file: the others accept ctl2 and
        # connect to it as ctl2 (it accepts nothing else now)
        failed = {n: metric(c, n, "made", "failed") for n in (1, 2)}
        c.restart(3)
        until("rot-a created through node 3", lambda: create_topic_once(c.port(3), "rot-a"))
        for n in (1, 2, 3):
            until("rot-a on node %d" % n, lambda: "rot-a" in topics(c.port(n)))
        until("the three agree on a leader", lambda: agreed_leader(c, [1, 2, 3]))
        # (the leader at least connected to it, as ctl2: nothing else passes)
        until("node 3 accepted a connection", lambda: metric(c, 3, "accepted", "ok") >= 1)
        assert metric(c, 3, "accepted", "failed") == 0, c.log(3)[-3000:]
        for n in (1, 2):
            assert metric(c, n, "made", "failed") == failed[n], (n, c.log(n)[-2000:])

        # a JAAS config that does not validate: refused, the file and the
        # key named (never the password), the previous logins stay
        good = props(c, 1)
        write_props(c, 1, with_jaas(good, '%s=%s username="ctl2";' % (JAAS_KEY, MODULE)))
        log_from = len(c.log(1))
        reload_node(c, 1, "sighup")
        said = c.log(1)[log_from:]
        assert "logins not reloaded, the previous ones stay: %s in %s" % (
            JAAS_KEY, os.path.join(c.dir, "n1", "server.properties")) in said, said
        assert "new-secret" not in said and reloads(c, 1, "failed") == 1, said
        write_props(c, 1, with_jaas(good, "%s=not a jaas config" % JAAS_KEY))
        st, body = reload_node(c, 1, "post")
        assert st == 422 and JAAS_KEY in body and reloads(c, 1, "failed") == 2, (st, body)
        write_props(c, 1, good)

        # node 3 with the file from before the rotation (the old login, the
        # old user): refused by both others (their user ctl is gone) once
        # it campaigns, as it hears from nobody
        base = {n: metric(c, n, "accepted", "failed") for n in (1, 2)}
        c.kill(3)
        stale = start_with(c, 3, with_jaas(props(c, 3), login_jaas(old[0], old[1], [old])))
        try:
            for n in (1, 2):
                until("node %d refuses the old login" % n, lambda: metric(c, n, "accepted", "failed") >= base[n] + 2)
            # logged (the first failure each 5 s of either side: the leader's
            # own connections to node 3, refused too, may take its turns)
            until("the refusal logged", lambda: "PLAIN: unknown user" in c.log(1) + c.log(2))
            for n in (1, 2):
                assert "old-secret" not in c.log(n) and "new-secret" not in c.log(n), c.log(n)[-2000:]
            until("rot-b created through node 1", lambda: create_topic_once(c.port(1), "rot-b"))
            until("rot-b on node 2", lambda: "rot-b" in topics(c.port(2)))
        finally:
            stale.kill()
            stale.wait()
            if os.path.exists(os.path.join(c.dir, "n3", "pid")):
                os.unlink(os.path.join(c.dir, "n3", "pid"))


@test
def controller_sessions_end_and_are_made_again():
    """connections.max.reauth.ms on the controller listener (its
    listener-prefixed key, 3000): each connection accepted is closed once
    its session is over (counted, logged) and the other node connects
    again, authenticating anew; the quorum keeps committing: a topic
    created after several sessions ended reaches the three."""
    sets = ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.mechanism.controller.protocol=PLAIN", jaas(),
            "listener.name.controller.connections.max.reauth.ms=3000"]
    with Cluster(3, sets=sets) as c:
        until("one leader agreed on by the three", lambda: agreed_leader(c, [1, 2, 3]))
        ended = "sluice_controller_sasl_sessions_ended_total"
        made = {n: metric(c, n, "made", "ok") for n in (1, 2, 3)}
        for n in (1, 2, 3):
            until("sessions ended on node %d" % n, lambda: c.metric(n, ended) >= 2)
        assert any("controller port: the SASL session of 127.0.0.1:" in c.log(n) for n in (1, 2, 3))
        for n in (1, 2, 3):
            until("node %d connected again" % n, lambda: metric(c, n, "made", "ok") >= made[n] + 2)
            assert metric(c, n, "made", "failed") == 0 and metric(c, n, "accepted", "failed") == 0, n
        mark = {n: c.metric(n, ended) for n in (1, 2, 3)}
        leader = until("one leader agreed on by the three", lambda: agreed_leader(c, [1, 2, 3]))
        other = [n for n in (1, 2, 3) if n != leader][0]
        until("rl-a created through node %d" % other, lambda: create_topic_once(c.port(other), "rl-a"))
        for n in (1, 2, 3):
            until("rl-a on node %d" % n, lambda: "rl-a" in topics(c.port(n)))
        for n in (1, 2, 3):
            until("more sessions ended on node %d" % n, lambda: c.metric(n, ended) > mark[n])
        until("rl-b created through node %d" % leader, lambda: create_topic_once(c.port(leader), "rl-b"))
        for n in (1, 2, 3):
            until("rl-b on node %d" % n, lambda: "rl-b" in topics(c.port(n)))


if __name__ == "__main__":
    main("cluster quorum over SASL")
