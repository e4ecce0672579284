#!/usr/bin/python3
"""A listener's keystore and truststore changed at run time, as Kafka's
dynamic listener configs (kafka-configs.sh --entity-type brokers
--entity-name 1 --alter --add-config
listener.name.ssl.ssl.keystore.location=/new/path): IncrementalAlterConfigs
over raw frames (kraw.py) on the broker resource named with the node id,
certificates made by the test with the openssl CLI (harness.make_ca,
make_cert).

- a certificate of another CA, written to a new path, set as the SSL
  listener's keystore: a client trusting only the new CA connects (a TLS
  handshake, and kcat), one trusting only the old CA is refused; the
  PLAINTEXT listener is untouched; DescribeConfigs shows the key with
  source DYNAMIC_BROKER_CONFIG, not read-only; a missing file, a key that
  does not match its certificate and validateOnly are refused or change
  nothing, naming the key, while the new certificate keeps serving; the
  setting survives a restart; AlterConfigs (the legacy request) that does
  not name the key puts the file's keystore back, as Kafka's replaces all
  of the node's dynamic keys; DELETE goes back to the file's keystore.
- an encrypted key set with its password (the chain and key form): a wrong
  password is refused naming the key and not echoing it; the password is
  sensitive in DescribeConfigs (null) and never in the broker's stderr.
- Kafka's refusals: the cluster-wide default ("") for a listener's store,
  the broker-wide ssl.keystore.location, another node's id, a listener
  that is not SSL, a listener key that is not dynamic.
- three nodes over an SSL inter-broker listener with mutual TLS: two of
  them moved to another CA by AlterConfigs of their own resource (another
  node's resource refused where it arrives); a new replica fetcher between
  those two uses the new certificates both ways (the node's client side
  follows its inter-broker listener's keys), one to the third node, still
  on the old CA, is refused (about 12 s).

    /usr/bin/python3 tests/integration/test_tls_dynamic.py [test ...]
"""

import atexit
import os
import shutil
import socket
import ssl
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, broker, free_port, main, make_ca, make_cert, run, temp_dir, test  # noqa: E402
from kraw import Conn, W  # noqa: E402

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource  # noqa: E402

INCREMENTAL_ALTER_CONFIGS = 44
INVALID_CONFIG, INVALID_REQUEST = 40, 42
RES_BROKER = 4
OP_SET, OP_DELETE = 0, 1
KS = "listener.name.ssl.ssl.keystore.location"
PASSWORD = "s3cret-Pa55word-9731"

CERTS = None


def certs():
    """Made once: ca and its broker certificate (CN localhost); ca2 (another
    CA) and its broker certificate of the same subject and names (rotated),
    one of another subject (renamed), one without the IP address (fewer); a
    keystore of ca2's certificate with the first key (mismatched); ca2's key
    encrypted with PASSWORD."""
    global CERTS
    if CERTS is None:
        d = temp_dir("sluice-tls-dyn-certs-")
        atexit.register(shutil.rmtree, d, True)
        make_ca(d, "ca")
        make_ca(d, "ca2")
        make_cert(d, "ca", "broker", "/CN=localhost", "DNS:localhost,IP:127.0.0.1")
        # the same subject and names as the first (Kafka refuses others by default)
        make_cert(d, "ca2", "rotated", "/CN=localhost", "DNS:localhost,IP:127.0.0.1")
        make_cert(d, "ca2", "renamed", "/CN=elsewhere", "DNS:localhost,IP:127.0.0.1")
        make_cert(d, "ca2", "fewer", "/CN=localhost", "DNS:localhost")
        with open(os.path.join(d, "mismatched.keystore.pem"), "w") as out:
            for part in ("rotated.pem", "broker.key"):
                with open(os.path.join(d, part)) as f:
                    out.write(f.read())
        run(["openssl", "pkey", "-in", "rotated.key", "-aes256", "-passout", "pass:" + PASSWORD,
             "-out", "rotated.enc.key"], cwd=d)
        CERTS = d
    return CERTS


def cert(name):
    return os.path.join(certs(), name)


def ssl_broker(**settings):
    """A broker with a PLAINTEXT listener and an SSL one (b.addr["SSL"]),
    the SSL one serving ca's certificate from the config file's key."""
    s = {"ssl.keystore.location": cert("broker.keystore.pem")}
    s.update(settings)
    return broker(listeners=("SSL",), admin=True, shards=1, settings=s)


def ssl_port(b):
    return int(b.addr["SSL"].rsplit(":", 1)[1])


def handshake(b, ca):
    """A TLS handshake to the SSL listener trusting only ca (a file in
    certs()): (ok, the server certificate's issuer's CN or the error)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cert(ca))
    try:
        with socket.create_connection(("127.0.0.1", ssl_port(b)), timeout=HANG_GUARD) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                return True, dict(x[0] for x in s.getpeercert()["issuer"]).get("commonName")
    except (ssl.SSLError, OSError) as e:
        return False, str(e)


def serves(b, ca):
    """The SSL listener serves a certificate of ca: a client trusting ca
    connects, one trusting the other CA is refused."""
    assert handshake(b, ca) == (True, ca[:-4]), handshake(b, ca)
    ok, why = handshake(b, "ca2.pem" if ca == "ca.pem" else "ca.pem")
    assert not ok and "certificate verify failed" in why, why


def alter(b, name, ops, validate_only=False):
    """IncrementalAlterConfigs v0 of the broker resource `name`: ops =
    [(key, op, value)]; (error code, message)."""
    c = Conn(b.bootstrap)
    try:
        w = W().array([(RES_BROKER, name, ops)], lambda w, r: w.i8(r[0]).str(r[1]).array(
            r[2], lambda w, o: w.str(o[0]).i8(o[1]).str(o[2]))).i8(1 if validate_only else 0)
        r = c.request(INCREMENTAL_ALTER_CONFIGS, 0, w)
        r.i32()
        res = r.array(lambda r: (r.i16(), r.str(), r.i8(), r.str()))
        r.done()
        return res[0][0], res[0][1]
    finally:
        c.close()


def describe(b):
    """DescribeConfigs of broker 1 through confluent-kafka: {key: ConfigEntry}."""
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    return a.describe_configs([res], request_timeout=30)[res].result(30)


@test
def a_listener_keystore_changes_at_run_time_and_survives_a_restart():
    d = temp_dir("sluice-tls-dyn-")
    try:
        with ssl_broker() as b:
            serves(b, "ca.pem")
            # the new certificate at a NEW path (not the file's, not reloaded)
            new = os.path.join(d, "new", "keystore.pem")
            os.makedirs(os.path.dirname(new))
            shutil.copy(cert("rotated.keystore.pem"), new)
            assert alter(b, "1", [(KS, OP_SET, new)]) == (0, None)
            serves(b, "ca2.pem")
            # a Kafka client trusting only the new CA
            md = run(["kcat", "-b", b.addr["SSL"], "-X", "security.protocol=ssl",
                      "-X", "ssl.ca.location=" + cert("ca2.pem"), "-L"]).stdout.decode()
            assert "broker 1 at " + b.addr["SSL"] in md, md
            r = run(["kcat", "-b", b.addr["SSL"], "-X", "security.protocol=ssl", "-m", "5",
                     "-X", "ssl.ca.location=" + cert("ca.pem"), "-L"], check=False)
            assert r.returncode != 0, r.stdout
            run(["kcat", "-b", b.bootstrap, "-L"])   # PLAINTEXT untouched
            e = describe(b)[KS]
            assert e.value == new and e.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value \
                and not e.is_read_only and not e.is_sensitive, e
            assert describe(b)["ssl.keystore.location"].value == cert("broker.keystore.pem")
            # refused, naming the key and why; the new certificate keeps serving
            err, msg = alter(b, "1", [(KS, OP_SET, os.path.join(d, "missing.pem"))])
            assert err == INVALID_REQUEST and KS in msg and "cannot open" in msg, (err, msg)
            err, msg = alter(b, "1", [(KS, OP_SET, cert("mismatched.keystore.pem"))])
            assert err == INVALID_REQUEST and KS in msg and "does not match" in msg, (err, msg)
            err, msg = alter(b, "1", [(KS, OP_SET, cert("ca.pem"))])   # no key in it
            assert err == INVALID_REQUEST and KS in msg, (err, msg)
            serves(b, "ca2.pem")
            assert describe(b)[KS].value == new
            # validateOnly checks and changes nothing
            err, msg = alter(b, "1", [(KS, OP_SET, os.path.join(d, "missing.pem"))], validate_only=True)
            assert err == INVALID_REQUEST and KS in msg, (err, msg)
            assert alter(b, "1", [(KS, OP_SET, cert("broker.keystore.pem"))], validate_only=True) == (0, None)
            serves(b, "ca2.pem")
            # the metadata log keeps it: a restart serves the new certificate
            b.restart()
            serves(b, "ca2.pem")
            assert describe(b)[KS].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
            # AlterConfigs (the legacy request) replaces all of the node's
            # dynamic keys, as Kafka's: one that does not name the
            # listener's puts the file's back, one that names it sets it
            a = AdminClient({"bootstrap.servers": b.bootstrap})
            for conf, ca in (({"log.retention.ms": "3600000"}, "ca.pem"), ({KS: new}, "ca2.pem")):
                res = ConfigResource(ConfigResource.Type.BROKER, "1", set_config=conf)
                a.alter_configs([res], request_timeout=30)[res].result(30)
                serves(b, ca)
            # the listener's name in another case names the same key (one record)
            assert alter(b, "1", [(KS.replace(".ssl.ssl.", ".SSL.ssl."), OP_SET, new)]) == (0, None)
            assert [k for k in describe(b) if k.lower() == KS] == [KS]
            # DELETE: back to the file's keystore, after a restart too
            assert alter(b, "1", [(KS, OP_DELETE, None)]) == (0, None)
            serves(b, "ca.pem")
            assert KS not in describe(b)
            b.restart()
            serves(b, "ca.pem")
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def an_encrypted_key_and_its_password_never_shown():
    chain, key, pw = ("listener.name.ssl.ssl.keystore.certificate.chain", "listener.name.ssl.ssl.keystore.key",
                      "listener.name.ssl.ssl.key.password")
    with ssl_broker() as b:
        err, msg = alter(b, "1", [(chain, OP_SET, cert("rotated.pem")), (key, OP_SET, cert("rotated.enc.key")),
                                  (pw, OP_SET, "wrong-" + PASSWORD)])
        assert err == INVALID_REQUEST and key in msg and PASSWORD not in msg, (err, msg)
        serves(b, "ca.pem")
        assert alter(b, "1", [(chain, OP_SET, cert("rotated.pem")), (key, OP_SET, cert("rotated.enc.key")),
                              (pw, OP_SET, PASSWORD)]) == (0, None)
        serves(b, "ca2.pem")
        for _ in range(2):
            cfg = describe(b)
            assert cfg[pw].value is None and cfg[pw].is_sensitive and not cfg[pw].is_read_only, cfg[pw]
            assert cfg[pw].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, cfg[pw]
            assert cfg[key].value is None and cfg[key].is_sensitive, cfg[key]
            assert cfg[chain].value == cert("rotated.pem"), cfg[chain]
            assert not any(e.value and PASSWORD in e.value for e in cfg.values())
            import urllib.request
            body = urllib.request.urlopen("http://127.0.0.1:%d/v1/config" % b.admin, timeout=HANG_GUARD).read()
            assert PASSWORD.encode() not in body
            b.restart()
            serves(b, "ca2.pem")
        for n in range(1, b.starts + 1):
            with open(os.path.join(b.workdir, "sluiced-%d.log" % n), "rb") as f:
                assert PASSWORD.encode() not in f.read()


@test
def refused_as_kafka_refuses_them():
    with ssl_broker() as b:
        err, msg = alter(b, "", [(KS, OP_SET, cert("rotated.keystore.pem"))])
        assert err == INVALID_REQUEST and "Cannot update these configs at default cluster level, broker id must " \
            "be specified" in msg and KS in msg, (err, msg)
        err, msg = alter(b, "1", [("ssl.keystore.location", OP_SET, cert("rotated.keystore.pem"))])
        assert err == INVALID_REQUEST and "only per-listener using the listener prefix" in msg, (err, msg)
        err, msg = alter(b, "7", [(KS, OP_SET, cert("rotated.keystore.pem"))])
        assert err == INVALID_REQUEST and "Unexpected broker id, expected 1, but received 7" in msg, (err, msg)
        err, msg = alter(b, "1", [("listener.name.plaintext.ssl.keystore.location", OP_SET,
                                   cert("rotated.keystore.pem"))])
        assert err == INVALID_REQUEST and "listener.name.plaintext" in msg, (err, msg)
        err, msg = alter(b, "1", [("listener.name.ssl.ssl.client.auth", OP_SET, "required")])
        assert err == INVALID_REQUEST and "Cannot update these configs dynamically" in msg, (err, msg)
        # Kafka's checks of a new keystore: the same subject, every subjectAltName kept
        err, msg = alter(b, "1", [(KS, OP_SET, cert("renamed.keystore.pem"))])
        assert err == INVALID_REQUEST and KS in msg and "DistinguishedName does not match" in msg \
            and "CN=elsewhere" in msg, (err, msg)
        err, msg = alter(b, "1", [(KS, OP_SET, cert("fewer.keystore.pem"))])
        assert err == INVALID_REQUEST and KS in msg and "SubjectAltNames do not match" in msg, (err, msg)
        # no truststore added to a listener that had none
        err, msg = alter(b, "1", [("listener.name.ssl.ssl.truststore.location", OP_SET, cert("ca2.pem"))])
        assert err == INVALID_REQUEST and "Cannot add SSL truststore" in msg, (err, msg)
        serves(b, "ca.pem")
        assert KS not in describe(b)
    # ssl.allow.dn.changes lets another subject in
    with ssl_broker(**{"listener.name.ssl.ssl.allow.dn.changes": "true"}) as b:
        assert alter(b, "1", [(KS, OP_SET, cert("renamed.keystore.pem"))]) == (0, None)
        serves(b, "ca2.pem")


def alter_at(bootstrap, name, ops):
    class At:
        pass
    at = At()
    at.bootstrap = bootstrap
    return alter(at, name, ops)


def isr(bootstrap, topic):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=20)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return {p: (m.leader, sorted(m.isrs)) for p, m in t.partitions.items()}


def produce_all(bootstrap, topic, n):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20000})
    errs = []
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, on_delivery=lambda e, m: e and errs.append(str(e)))
    p.flush(50)
    return errs


@test
def an_inter_broker_listener_rotated_node_by_node():
    """Three nodes, INTERNAL (SSL, mutual TLS) the inter-broker listener,
    the config file giving every node certificates of the CA "old". Nodes 1
    and 2 are given a keystore and a truststore of the CA "new" at new
    paths, each by IncrementalAlterConfigs on its own resource sent to it
    (node 2's resource sent to node 1 is refused, as Kafka's): both at once
    is refused (the node's old and new certificates would not trust each
    other, Kafka's handshake check), then in three steps (trust both CAs,
    the new keystore, trust the new CA only) the listener's server and the
    node's client side both take them. A new
    fetcher from node 1 to node 2 (topic "new") uses the new certificates
    both ways: acks=all at min.insync.replicas=2 is acknowledged; node 1's
    fetcher to node 3 (still the old CA) is refused."""
    from cluster import Cluster, until
    from confluent_kafka.admin import NewTopic
    d = temp_dir("sluice-tls-dyn-ib-")
    try:
        for ca in ("old", "new"):
            make_ca(d, ca)
            make_cert(d, ca, ca + "-broker", "/CN=broker", "DNS:localhost,IP:127.0.0.1")
        sets = ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name=INTERNAL",
                "listener.name.internal.ssl.client.auth=required",
                "listener.name.internal.ssl.keystore.location=" + os.path.join(d, "old-broker.keystore.pem"),
                "listener.name.internal.ssl.truststore.location=" + os.path.join(d, "old.pem"),
                "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
                "replica.lag.time.max.ms=2000", "broker.session.timeout.ms=3000",
                "broker.heartbeat.interval.ms=500"]
        with Cluster(3, listener="INTERNAL", sets=sets) as c:
            a = AdminClient({"bootstrap.servers": c.bootstrap})
            ks, ts = "listener.name.internal.ssl.keystore.location", "listener.name.internal.ssl.truststore.location"
            # another node's resource: refused where it arrives
            err, msg = alter_at(c.addr(1), "2", [(ks, OP_SET, os.path.join(d, "new-broker.keystore.pem"))])
            assert err == INVALID_REQUEST and "Unexpected broker id, expected 1, but received 2" in msg, (err, msg)
            with open(os.path.join(d, "both.pem"), "w") as f:
                f.write(open(os.path.join(d, "old.pem")).read() + open(os.path.join(d, "new.pem")).read())
            for n in (1, 2):
                nd = os.path.join(d, "n%d-rotated" % n)
                os.makedirs(nd)
                for src, dst in (("new-broker.keystore.pem", "keystore.pem"), ("new.pem", "trust.pem"),
                                 ("both.pem", "both.pem")):
                    shutil.copy(os.path.join(d, src), os.path.join(nd, dst))
                # both at once: the node would no longer trust itself (Kafka's handshake check)
                err, msg = alter_at(c.addr(n), str(n), [(ks, OP_SET, os.path.join(nd, "keystore.pem")),
                                                        (ts, OP_SET, os.path.join(nd, "trust.pem"))])
                assert err == INVALID_REQUEST and "handshake" in msg, (err, msg)
                # the staged way: trust both CAs, then the new certificate, then trust the new CA only
                for ops in ([(ts, OP_SET, os.path.join(nd, "both.pem"))], [(ks, OP_SET, os.path.join(nd, "keystore.pem"))],
                            [(ts, OP_SET, os.path.join(nd, "trust.pem"))]):
                    assert alter_at(c.addr(n), str(n), ops) == (0, None), ops
                assert c.metric(n, "sluice_tls_reloads_total") == 3
                assert c.metric(n, "sluice_tls_client_reloads_total") == 3
            assert c.metric(3, "sluice_tls_client_reloads_total") == 0
            # node 1 to node 2: the new certificates both ways
            failures = c.metric(1, "sluice_replication_auth_failures_total")
            a.create_topics([NewTopic("new", 1, replica_assignment=[[2, 1]], config={"min.insync.replicas": "2"})],
                            operation_timeout=30)["new"].result(60)
            assert produce_all(c.bootstrap, "new", 100) == []
            assert isr(c.bootstrap, "new") == {0: (2, [1, 2])}
            assert c.metric(1, "sluice_replication_auth_failures_total") == failures, c.log(1)[-2000:]
            # node 1 to node 3: the old CA is no longer trusted
            a.create_topics([NewTopic("old", 1, replica_assignment=[[3, 1]])], operation_timeout=30)["old"].result(60)
            until("node 1's fetcher to node 3 refused",
                  lambda: c.metric(1, "sluice_replication_auth_failures_total") > failures)
            until("old: node 1 out of the ISR", lambda: isr(c.bootstrap, "old") == {0: (3, [3])})
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    try:
        main("tls_dynamic")
    finally:
        if CERTS:
            shutil.rmtree(CERTS, ignore_errors=True)
