#!/usr/bin/python3
"""SASL listeners with real clients (issue 21, SASL).

One broker serves a PLAINTEXT, a SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512; PLAIN's users from its JAAS config) and a SASL_SSL listener
(SCRAM-SHA-512 only, certificates made here with the openssl CLI); its
SCRAM users come from sluiced --add-scram:

- librdkafka (confluent_kafka) logs in with PLAIN and SCRAM-SHA-256 over
  SASL_PLAINTEXT and SCRAM-SHA-512 over SASL_SSL, and produces and
  consumes; kcat over SASL_SSL, kafka-python SCRAM over TLS, kafkajs SCRAM;
- refusals, the broker serving the others after them: a wrong password and
  an unknown user (SASL_AUTHENTICATION_FAILED, counted, logged with the
  address and never the password), a mechanism the listener does not
  enable (UNSUPPORTED_SASL_MECHANISM), SaslAuthenticate before
  SaslHandshake (ILLEGAL_SASL_STATE, closed), a Produce before
  authentication (closed, no answer), a 100 MB frame header before
  authentication (closed, the broker's RSS does not grow with what follows);
- AlterUserScramCredentials (raw frames: Debian's confluent-kafka 1.7 has no
  such admin call) adds a user who then logs in, DescribeUserScramCredentials
  lists it, a deletion of a user that is not there is RESOURCE_NOT_FOUND;
  sluicectl user create, list and delete;
- KIP-368 (connections.max.reauth.ms): SaslAuthenticate v1/v2 tells the
  session's lifetime; a request after it closes the connection unanswered
  (v0 SaslAuthenticate too); raw re-authentications keep a connection
  working, one as another user closes it, one within a second of the one
  before is answered ILLEGAL_SASL_STATE and the session goes on (Kafka's
  limit); kafkajs re-authenticates while it produces and consumes;
  connections.max.reauth.ms 0 and the listener-prefixed keys as Kafka's
  (a listener's 0 over the broker's value; a SaslHandshake on a session
  that never ends answered ILLEGAL_SASL_STATE, the connection going on);
- --add-scram on a data directory that already has users: exit 2;
- a user added on node 1 of a 3-node cluster logs in on node 3.

    /usr/bin/python3 tests/integration/test_sasl.py [test ...]
"""

import hashlib
import json
import os
import socket
import struct
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, SLUICECTL, broker, free_port, main, make_tls_certs, run, temp_dir, test  # noqa: E402
from kraw import Conn, R, W, compact_str, read_compact_str, read_uvarint, uvarint  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KJS_DIR = os.path.join(HERE, "kafkajs")
CERTS = None
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="alice" password="alice-secret" user_alice="alice-secret" user_bob="bob-secret";')
ADD = ["--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]",
       "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"]


def certs():
    global CERTS
    if CERTS is None:
        import atexit
        import shutil
        CERTS = make_tls_certs(temp_dir("sluice-sasl-certs-"))
        atexit.register(shutil.rmtree, CERTS, True)    # removed with the suite
    return CERTS


def sasl_broker(args=ADD, **settings):
    """A broker with PLAINTEXT (bootstrap), SASL_PLAINTEXT and SASL_SSL
    listeners (b.addr[name]) and an admin endpoint (b.admin)."""
    s = {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
         "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
         "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
         "ssl.keystore.location": os.path.join(certs(), "broker.keystore.pem")}
    s.update(settings)
    return broker(listeners=("SASL_PLAINTEXT", "SASL_SSL"), admin=True, shards=1, settings=s, args=args)


def metric(b, name):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % b.admin, timeout=HANG_GUARD).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def conf(bootstrap, mech, user, password, ssl=False):
    c = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL" if ssl else "SASL_PLAINTEXT",
         "sasl.mechanisms": mech, "sasl.username": user, "sasl.password": password}
    if ssl:
        c["ssl.ca.location"] = os.path.join(certs(), "ca.pem")
    return c


def produce_consume(c, topic, n=20):
    """Produce n records with client config c, then consume them back."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    p = Producer(dict(c, acks="all"))
    for i in range(n):
        p.produce(topic, value=b"%s-%d" % (topic.encode(), i))
    assert p.flush(HANG_GUARD) == 0, "records not delivered"
    cons = Consumer(dict(c, **{"group.id": "g-" + topic, "auto.offset.reset": "earliest"}))
    cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + HANG_GUARD
    while len(got) < n and time.monotonic() < deadline:
        m = cons.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value())
    cons.close()
    assert sorted(got) == sorted(b"%s-%d" % (topic.encode(), i) for i in range(n)), got


def auth_error(c):
    """The authentication error librdkafka reports for config c (it keeps
    retrying: the first error is waited for, not slept for)."""
    from confluent_kafka.admin import AdminClient
    errs = []
    a = AdminClient(dict(c, error_cb=lambda e: errs.append(str(e)), log_level=0))
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline:
        try:
            a.list_topics(timeout=1)
            return None   # served: no error
        except Exception:  # noqa: BLE001
            pass
        a.poll(0.1)   # error_cb runs here
        auth = [e for e in errs if "Authentication failed" in e]
        if auth:
            return auth[0]
    return " | ".join(errs[-3:])


# ---- raw frames --------------------------------------------------------------

def handshake(conn, mech, ver=1):
    r = conn.request(17, ver, W().str(mech))
    return r.i16(), r.array(lambda r: r.str())


def authenticate(conn, token, ver=1):
    r = conn.request(36, ver, W().bytes(token))
    err, msg, data = r.i16(), r.str(), r.bytes()
    return err, msg, data


def authenticate_lifetime(conn, token, ver=1):
    """SaslAuthenticate v1 or v2 (flexible): (error, message, auth bytes,
    SessionLifetimeMs)."""
    if ver == 1:
        r = conn.request(36, 1, W().bytes(token))
        return r.i16(), r.str(), r.bytes(), r.i64()
    r = conn.request_flex(36, 2, uvarint(len(token) + 1) + token + b"\x00")
    err, msg, n = r.i16(), read_compact_str(r), read_uvarint(r) - 1
    data, r.o = r.b[r.o:r.o + n], r.o + n
    return err, msg, data, r.i64()


def closed(s):
    """Whether the broker closed s: end of file or a reset, waited for."""
    s.settimeout(HANG_GUARD)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def scram_upsert(conn, user, mech, password, iterations=4096):
    """AlterUserScramCredentials v0: one upsertion; returns (error, message)."""
    salt = os.urandom(24)
    salted = hashlib.pbkdf2_hmac("sha256" if mech == 1 else "sha512", password.encode(), salt, iterations)
    body = (uvarint(1) + uvarint(2) + compact_str(user) + struct.pack(">bi", mech, iterations)
            + uvarint(len(salt) + 1) + salt + uvarint(len(salted) + 1) + salted + b"\x00" + b"\x00")
    return scram_results(conn.request_flex(51, 0, body))[0][1:]


def scram_delete(conn, user, mech):
    body = uvarint(2) + compact_str(user) + struct.pack(">b", mech) + b"\x00" + uvarint(1) + b"\x00"
    return scram_results(conn.request_flex(51, 0, body))[0][1:]


def scram_results(r):
    r.i32()
    out = []
    for _ in range(read_uvarint(r) - 1):
        user, err, msg = read_compact_str(r), r.i16(), read_compact_str(r)
        read_uvarint(r)
        out.append((user, err, msg))
    return out


def scram_describe(conn):
    """DescribeUserScramCredentials v0 for every user: {user: [(mech, iterations)]}."""
    r = conn.request_flex(50, 0, b"\x00" + b"\x00")
    r.i32()
    assert r.i16() == 0
    read_compact_str(r)
    out = {}
    for _ in range(read_uvarint(r) - 1):
        user, err = read_compact_str(r), r.i16()
        read_compact_str(r)
        infos = []
        for _ in range(read_uvarint(r) - 1):
            infos.append((r.i8(), r.i32()))
            read_uvarint(r)
        read_uvarint(r)
        out[user] = (err, infos)
    return out


# ---- tests -------------------------------------------------------------------

@test
def clients_log_in_over_every_sasl_listener():
    with sasl_broker() as b:
        produce_consume(conf(b.addr["SASL_PLAINTEXT"], "PLAIN", "alice", "alice-secret"), "plain")
        produce_consume(conf(b.addr["SASL_PLAINTEXT"], "SCRAM-SHA-256", "admin", "admin-secret"), "scram256")
        produce_consume(conf(b.addr["SASL_SSL"], "SCRAM-SHA-512", "admin", "admin-secret", ssl=True), "scram512ssl")
        # kcat over SASL_SSL
        p = run(["kcat", "-b", b.addr["SASL_SSL"], "-X", "security.protocol=SASL_SSL",
                 "-X", "sasl.mechanisms=SCRAM-SHA-512",
                 "-X", "sasl.username=admin", "-X", "sasl.password=admin-secret",
                 "-X", "ssl.ca.location=" + os.path.join(certs(), "ca.pem"), "-P", "-t", "kcat"],
                input=b"k1\nk2\nk3\n")
        p = run(["kcat", "-b", b.addr["SASL_SSL"], "-X", "security.protocol=SASL_SSL",
                 "-X", "sasl.mechanisms=SCRAM-SHA-512",
                 "-X", "sasl.username=admin", "-X", "sasl.password=admin-secret",
                 "-X", "ssl.ca.location=" + os.path.join(certs(), "ca.pem"), "-C", "-t", "kcat", "-e", "-o",
                 "beginning"])
        assert p.stdout.split() == [b"k1", b"k2", b"k3"], p.stdout
        # kafka-python: SCRAM over TLS
        from kafka import KafkaConsumer, KafkaProducer
        kp = dict(bootstrap_servers=b.addr["SASL_SSL"], security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                  sasl_plain_username="admin", sasl_plain_password="admin-secret",
                  ssl_cafile=os.path.join(certs(), "ca.pem"))
        prod = KafkaProducer(acks="all", **kp)
        for i in range(5):
            prod.send("kpy", b"v%d" % i)
        prod.flush(timeout=HANG_GUARD)
        prod.close()
        from kafka import TopicPartition as KTP
        cons = KafkaConsumer(auto_offset_reset="earliest", **kp)
        cons.assign([KTP("kpy", 0)])
        got = []
        deadline = time.monotonic() + HANG_GUARD
        while len(got) < 5 and time.monotonic() < deadline:
            for recs in cons.poll(timeout_ms=500).values():
                got += [m.value for m in recs]
        cons.close()
        assert got == [b"v%d" % i for i in range(5)], got
        # kafkajs: SCRAM over SASL_PLAINTEXT
        p = run(["node", os.path.join(KJS_DIR, "sasl_check.js"), b.addr["SASL_PLAINTEXT"], "SCRAM-SHA-256", "admin",
                 "admin-secret", "kjs", "7"], check=False, cwd=KJS_DIR)
        res = json.loads(p.stdout.decode().strip().splitlines()[-1])
        assert res == {"ok": True, "end": 7}, (res, p.stderr[-2000:])
        assert metric(b, "sluice_sasl_authentications_total") >= 6
        assert metric(b, "sluice_sasl_authentication_failures_total") == 0


@test
def refusals_close_or_fail_and_the_broker_serves_the_others():
    with sasl_broker() as b:
        # a wrong password, an unknown user: SASL_AUTHENTICATION_FAILED
        e = auth_error(conf(b.addr["SASL_PLAINTEXT"], "SCRAM-SHA-256", "admin", "not-the-password"))
        assert e and "Authentication failed" in e, e
        e = auth_error(conf(b.addr["SASL_PLAINTEXT"], "PLAIN", "alice", "wrong-alice-pw"))
        assert e and "Authentication failed" in e, e
        e = auth_error(conf(b.addr["SASL_SSL"], "SCRAM-SHA-512", "mallory", "whatever-pw", ssl=True))
        assert e and "Authentication failed" in e, e
        assert metric(b, "sluice_sasl_authentication_failures_total") >= 3
        with open(b.log_path) as f:
            log = f.read()
        assert "SASL authentication failed from /127.0.0.1" in log and "user 'mallory'" in log, log[-2000:]
        assert "not-the-password" not in log and "wrong-alice-pw" not in log and "whatever-pw" not in log
        # a mechanism the listener does not enable (SASL_SSL: SCRAM-SHA-512
        # only); raw frames over TLS
        import ssl as pyssl
        ctx = pyssl.create_default_context(cafile=os.path.join(certs(), "ca.pem"))
        c = Conn(b.addr["SASL_SSL"])
        c.s = ctx.wrap_socket(c.s, server_hostname="127.0.0.1")
        err, mechs = handshake(c, "PLAIN")
        assert err == 33 and mechs == ["SCRAM-SHA-512"], (err, mechs)
        assert closed(c.s)
        # SaslAuthenticate before SaslHandshake: ILLEGAL_SASL_STATE, closed
        c = Conn(b.addr["SASL_PLAINTEXT"])
        assert c.api_versions().error == 0   # allowed before authentication
        err, msg, _ = authenticate(c, b"\x00alice\x00alice-secret")
        assert err == 34, (err, msg)
        assert closed(c.s)
        # a Produce before authentication: closed, no answer
        c = Conn(b.addr["SASL_PLAINTEXT"])
        c.send(0, 3, W().str(None).i16(1).i32(1000).i32(0).b)
        assert closed(c.s)
        # a Metadata after the handshake but before the authentication
        c = Conn(b.addr["SASL_PLAINTEXT"])
        assert handshake(c, "PLAIN")[0] == 0
        c.send(3, 1, W().i32(-1).b)
        assert closed(c.s)
        # a 100 MB frame header before authentication: closed before
        # anything is allocated; what follows never lands in the broker
        before = rss_kb(b.proc.pid)
        s = socket.create_connection(("127.0.0.1", int(b.addr["SASL_PLAINTEXT"].rsplit(":", 1)[1])), timeout=HANG_GUARD)
        s.sendall(struct.pack(">ihhi", 100 * 1024 * 1024, 18, 0, 1))
        junk = b"x" * (1 << 20)
        try:
            for _ in range(24):
                s.sendall(junk)
        except (ConnectionResetError, BrokenPipeError):
            pass
        assert closed(s)
        grew = rss_kb(b.proc.pid) - before
        assert grew < 8 * 1024, "the broker's RSS grew by %d KiB" % grew
        assert metric(b, "sluice_sasl_preauth_closed_total") >= 3
        # and everyone else is served
        produce_consume(conf(b.addr["SASL_PLAINTEXT"], "PLAIN", "bob", "bob-secret"), "after")
        produce_consume(conf(b.addr["SASL_SSL"], "SCRAM-SHA-512", "admin", "admin-secret", ssl=True), "after-ssl")


@test
def sessions_expire_unless_reauthenticated():
    """KIP-368: connections.max.reauth.ms=2000 (2200 for SCRAM-SHA-256 on
    the SASL_PLAINTEXT listener): SaslAuthenticate v1/v2 tells the session's
    lifetime; a connection that sends a request after it is closed
    unanswered, one that re-authenticates keeps working, one that
    re-authenticates as another user is closed; a re-authentication within
    a second of the one before is answered ILLEGAL_SASL_STATE and the
    session goes on (Kafka's limit); kafkajs re-authenticates on its own
    across several lifetimes (its threshold, 1 s before the end, leaves
    more than a second between them)."""
    with sasl_broker(**{"connections.max.reauth.ms": 2000,
                        "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": 2200,
                        "group.initial.rebalance.delay.ms": 0}) as b:
        # kafkajs (SCRAM-SHA-256: 2.2 s sessions) meanwhile: 5 rounds 0.8 s
        # apart, then a consumer group reads everything back
        import subprocess
        kjs = subprocess.Popen(["node", os.path.join(KJS_DIR, "sasl_check.js"), b.addr["SASL_PLAINTEXT"], "SCRAM-SHA-256", "admin",
                                "admin-secret", "kjs-reauth", "5", "5", "800"], cwd=KJS_DIR,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            plain = {u: b"\x00%s\x00%s-secret" % (u.encode(), u.encode()) for u in ("alice", "bob")}

            def login(user, ver=1):
                c = Conn(b.addr["SASL_PLAINTEXT"])
                assert handshake(c, "PLAIN")[0] == 0
                err, msg, _, life = authenticate_lifetime(c, plain[user], ver)
                assert err == 0, (err, msg)
                return c, life

            # (a) the lifetime, v1 and v2
            stale, life = login("alice")
            assert 0 < life <= 2000, life
            fresh, life = login("alice", 2)
            assert 0 < life <= 2000, life
            other, _ = login("alice")
            v0 = Conn(b.addr["SASL_PLAINTEXT"])   # SaslAuthenticate v0: no lifetime in the answer
            assert handshake(v0, "PLAIN")[0] == 0
            assert authenticate(v0, plain["bob"], ver=0)[0] == 0
            t0 = time.monotonic()
            # (c) fresh re-authenticates before each 2 s session ends and
            # keeps working past the first lifetime; (d) other does so as bob
            assert handshake(other, "PLAIN")[0] == 0
            err, msg, _, _ = authenticate_lifetime(other, plain["bob"])
            assert err == 58 and "Cannot change principals" in (msg or ""), (err, msg)
            assert closed(other.s)
            reauths = 0
            while time.monotonic() - t0 < 2.6:
                time.sleep(0.5 if not reauths else 1.05)   # Kafka's: at most one a second
                assert fresh.api_versions().error == 0
                assert handshake(fresh, "PLAIN")[0] == 0
                err, msg, _, life = authenticate_lifetime(fresh, plain["alice"], 2)
                assert err == 0 and 0 < life <= 2000, (err, msg, life)
                reauths += 1
                # (e) another at once: too soon, ILLEGAL_SASL_STATE; the
                # session and the connection go on
                assert handshake(fresh, "PLAIN")[0] == 34
                assert fresh.api_versions().error == 0
            assert fresh.api_versions().error == 0
            # (b) stale authenticated more than 2 s ago: its ApiVersions and
            # its Metadata are not answered, the connection is closed
            stale.send(3, 1, W().i32(-1).b)
            assert closed(stale.s)
            v0.send(18, 0, W().b)
            assert closed(v0.s)
        except BaseException:
            kjs.kill()
            kjs.wait()
            raise
        out, err = kjs.communicate(timeout=HANG_GUARD)
        res = json.loads(out.decode().strip().splitlines()[-1])
        assert res == {"ok": True, "end": 25, "consumed": 25}, (res, err[-2000:])
        # kafkajs re-authenticated too (a few times in 4 s of 2.2 s sessions)
        assert metric(b, "sluice_sasl_reauthentications_total") >= reauths + 2
        assert metric(b, "sluice_sasl_expired_closed_total") >= 2


def scram_login(conn, mech, user, password):
    """A raw SCRAM exchange (RFC 5802) with SaslHandshake v1 and
    SaslAuthenticate v2: (error, message, SessionLifetimeMs)."""
    import base64
    import hmac
    h = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mech]
    assert handshake(conn, mech)[0] == 0
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = "n=%s,r=%s" % (user, nonce)
    err, msg, first, _ = authenticate_lifetime(conn, ("n,," + bare).encode(), 2)
    if err:
        return err, msg, 0
    f = dict(kv.split("=", 1) for kv in first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(h().name, password.encode(), base64.b64decode(f["s"]), int(f["i"]))
    ck = hmac.new(salted, b"Client Key", h).digest()
    final = "c=biws,r=" + f["r"]
    sig = hmac.new(h(ck).digest(), ("%s,%s,%s" % (bare, first.decode(), final)).encode(), h).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(ck, sig))).decode()
    err, msg, _, life = authenticate_lifetime(conn, ("%s,p=%s" % (final, proof)).encode(), 2)
    return err, msg, life


@test
def reauth_ms_zero_and_listener_keys_as_kafka():
    """connections.max.reauth.ms as Kafka's SaslChannelBuilder reads it for
    a listener: listener.name.<l>.<mechanism>.connections.max.reauth.ms,
    else listener.name.<l>.connections.max.reauth.ms, else the broker's,
    a 0 given counting as set. The broker's 2000, SASL_PLAINTEXT's 0 and
    its SCRAM-SHA-256's 1500: PLAIN and SCRAM-SHA-512 there are told 0 (the
    listener's 0 over the broker's 2000), SCRAM-SHA-256 1500. With 0 a
    session never ends, and a SaslHandshake on its connection begins no
    re-authentication: answered ILLEGAL_SASL_STATE, the connection served
    on (KafkaChannel.maybeBeginServerReauthentication without a session
    expiration; Sluice re-authenticated it, and refused the listener-wide
    key as unknown, before)."""
    with sasl_broker(**{"connections.max.reauth.ms": 2000,
                        "listener.name.sasl_plaintext.connections.max.reauth.ms": 0,
                        "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": 1500}) as b:
        c = Conn(b.addr["SASL_PLAINTEXT"])
        assert handshake(c, "PLAIN")[0] == 0
        err, msg, _, life = authenticate_lifetime(c, b"\x00alice\x00alice-secret", 2)
        assert (err, life) == (0, 0), (err, msg, life)
        # no re-authentication with sessions that never end: Kafka's answer,
        # and the connection goes on (twice: no close, no one-a-second rule)
        for _ in range(2):
            assert handshake(c, "PLAIN")[0] == 34
            assert c.api_versions().error == 0
        c.close()
        for mech, want in (("SCRAM-SHA-256", 1500), ("SCRAM-SHA-512", 0)):
            with Conn(b.addr["SASL_PLAINTEXT"]) as c:
                err, msg, life = scram_login(c, mech, "admin", "admin-secret")
                assert (err, life) == (0, want), (mech, err, msg, life)
                assert c.api_versions().error == 0
        assert metric(b, "sluice_sasl_reauthentications_total") == 0


@test
def alter_user_scram_credentials_adds_a_user_who_logs_in():
    with sasl_broker() as b:
        with Conn(b.bootstrap) as c:
            assert scram_upsert(c, "carol", 2, "carol-secret", 8192) == (0, None)
            assert scram_upsert(c, "", 2, "x")[0] == 93                 # UNACCEPTABLE_CREDENTIAL
            assert scram_upsert(c, "dave", 2, "x", 1000)[0] == 93       # too few iterations
            assert scram_upsert(c, "dave", 7, "x")[0] == 33             # UNSUPPORTED_SASL_MECHANISM
            assert scram_delete(c, "nobody", 1)[0] == 91                # RESOURCE_NOT_FOUND
            users = scram_describe(c)
            assert users["carol"] == (0, [(2, 8192)]), users
            assert sorted(users["admin"][1]) == [(1, 4096), (2, 4096)], users
        produce_consume(conf(b.addr["SASL_SSL"], "SCRAM-SHA-512", "carol", "carol-secret", ssl=True), "carol")
        with Conn(b.bootstrap) as c:
            assert scram_delete(c, "carol", 2) == (0, None)
        e = auth_error(conf(b.addr["SASL_SSL"], "SCRAM-SHA-512", "carol", "carol-secret", ssl=True))
        assert e and "Authentication failed" in e, e
        # sluicectl user create|list|delete
        ctl = [SLUICECTL, "-b", b.bootstrap]
        run(ctl + ["user", "create", "frank", "-m", "SCRAM-SHA-256", "--iterations", "8192"],
            env=dict(os.environ, SLUICECTL_PASSWORD="frank-secret"))
        out = json.loads(run(ctl + ["user", "list", "--format", "json"]).stdout)
        assert {"user": "frank", "mechanism": "SCRAM-SHA-256", "iterations": 8192} in out["users"], out
        produce_consume(conf(b.addr["SASL_PLAINTEXT"], "SCRAM-SHA-256", "frank", "frank-secret"), "frank")
        run(ctl + ["user", "delete", "frank"])
        p = run(ctl + ["user", "delete", "frank"], check=False)
        assert p.returncode == 1 and b"RESOURCE_NOT_FOUND" in p.stderr, p.stderr
        # the users survive a restart (the metadata log); without
        # --add-scram, which a directory with users refuses
        b.args = []
        b.restart()
        produce_consume(conf(b.addr["SASL_SSL"], "SCRAM-SHA-512", "admin", "admin-secret", ssl=True), "restarted")


@test
def add_scram_on_a_directory_with_users_exits_2():
    with sasl_broker() as b:
        b.stop()
        b.settings["listeners"] = "PLAINTEXT://127.0.0.1:%d" % b.port
        rc, _ = b._spawn(b.port)
        assert rc == 2, rc
        with open(b.log_path) as f:
            assert "--add-scram" in f.read()
        b.args = []
        b.start()
        with Conn(b.bootstrap) as c:
            assert "admin" in scram_describe(c)


@test
def a_user_added_on_one_node_logs_in_on_another():
    from cluster import Cluster, until
    with Cluster(3) as c:
        with Conn(c.addr(1)) as k:
            assert scram_upsert(k, "erin", 1, "erin-secret") == (0, None)
        # node 3 gets a SASL listener: its server.properties, then a restart
        sp = free_port()
        props = os.path.join(os.path.dirname(c.data_dir(3)), "server.properties")
        with open(props) as f:
            lines = f.read().splitlines()
        lines = [line + ",SASL_PLAINTEXT://127.0.0.1:%d" % sp if line.startswith("listeners=") else line
                 for line in lines]
        with open(props, "w") as f:
            f.write("\n".join(lines) + "\n")
        c.restart(3)
        until("erin logs in on node 3", lambda: auth_error(
            conf("127.0.0.1:%d" % sp, "SCRAM-SHA-256", "erin", "erin-secret")) is None)


if __name__ == "__main__":
    main("sasl")
