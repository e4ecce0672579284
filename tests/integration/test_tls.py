#!/usr/bin/python3
"""SSL listeners with real clients (issue 21, listeners and TLS).

Certificates are made with harness.py's make_ca and make_cert (the
openssl CLI): a CA, the broker's certificate (127.0.0.1 and localhost), a
client certificate of that CA and one of another CA. Each test starts its
own broker with a PLAINTEXT and an SSL listener on free loopback ports:

- kcat (security.protocol=ssl) and kafka-python over SSL produce and
  consume; Metadata tells each client the listener it connected to
  (advertised.listeners per listener); `openssl s_client` is refused TLS
  1.0 and 1.1 (alert protocol version) and served 1.2 and 1.3; the
  record-layer metric counts the connections;
- mutual TLS (ssl.client.auth=required): confluent-kafka with the client
  certificate produces and consumes 300 KB records; a client without a
  certificate, and one whose certificate another CA signed, are refused
  while the broker goes on serving everyone else; a principal rule that
  matches no client refuses it;
- SIGHUP, and the admin endpoint's POST /v1/tls/reload, reread the
  certificate: a new connection gets the new one; a broken file keeps the old;
- start-up refusals name the key (exit 2): an SSL listener without a
  certificate, SASL, TLS 1.1 in ssl.enabled.protocols, replication over SSL;
- each SSL listener its own certificates, truststore, client
  authentication and protocols (listener.name.<l>.ssl.*); such keys for
  a listener that does not exist, or with a bad value, refused naming them.

    /usr/bin/python3 tests/integration/test_tls.py [test ...]
"""

import atexit
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (HANG_GUARD, SLUICED, broker, free_port, main, make_ca, make_cert, run,  # noqa: E402
                     temp_dir, test)

CERTS = None


def certs():
    """Made once for the suite: ca, broker, client (of ca), rogue (of rogue-ca)."""
    global CERTS
    if CERTS is None:
        d = temp_dir("sluice-tls-certs-")
        atexit.register(shutil.rmtree, d, True)    # removed with the suite
        make_ca(d, "ca")
        make_ca(d, "rogue-ca")
        make_cert(d, "ca", "broker", "/CN=localhost", "DNS:localhost,IP:127.0.0.1")
        make_cert(d, "ca", "client", "/O=acme/CN=app")
        make_cert(d, "rogue-ca", "rogue", "/O=acme/CN=app")
        make_cert(d, "ca", "stranger", "/O=acme/CN=stranger")
        CERTS = d
    return CERTS


def cert(name):
    return os.path.join(certs(), name)


class tls_broker(broker):
    """harness.broker with a PLAINTEXT listener (port) and an SSL one
    (ssl_port, and b.ssl_bootstrap), one shard."""

    def __init__(self, port=None, ssl_port=None, **settings):
        port, self.ssl_port = port or free_port(), ssl_port or free_port()
        s = {"listeners": "PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d" % (port, self.ssl_port),
             "ssl.keystore.location": cert("broker.keystore.pem")}
        s.update(settings)
        super().__init__(shards=1, settings=s, port=port)

    def __enter__(self):
        b = super().__enter__()
        b.ssl_port = self.ssl_port
        b.ssl_bootstrap = "127.0.0.1:%d" % self.ssl_port
        return b


def kcat_ssl(b, *args, client=None, check=True, inp=None):
    cmd = ["kcat", "-b", b.ssl_bootstrap, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + cert("ca.pem")]
    if client:
        cmd += ["-X", "ssl.certificate.location=" + cert(client + ".pem"),
                "-X", "ssl.key.location=" + cert(client + ".key")]
    return run(cmd + list(args), input=inp, check=check)


def s_client(port, *args, client=None):
    """openssl s_client's handshake: (ok, output)."""
    cmd = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-CAfile", cert("ca.pem")] + list(args)
    if client:
        cmd += ["-cert", cert(client + ".pem"), "-key", cert(client + ".key")]
    p = subprocess.run(cmd, input=b"", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=HANG_GUARD)
    out = p.stdout.decode("utf-8", "replace")
    return "Verify return code: 0 (ok)" in out and ":error:" not in out, out


def metric(admin_port, name):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin_port, timeout=HANG_GUARD).read().decode()
    total = 0
    for line in body.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


@test
def kcat_and_kafka_python_over_ssl_beside_plaintext():
    admin = free_port()
    ssl_port = free_port()
    port = free_port()
    with tls_broker(port, ssl_port, **{"admin.listen": "127.0.0.1:%d" % admin,
                                       "advertised.listeners": "SSL://localhost:%d" % ssl_port}) as b:
        # Metadata answers each client with the listener it came through
        md = kcat_ssl(b, "-L").stdout.decode()
        assert "broker 1 at localhost:%d" % ssl_port in md, md
        md = run(["kcat", "-b", b.bootstrap, "-L"]).stdout.decode()
        assert "broker 1 at 127.0.0.1:%d" % port in md, md
        # produce over SSL, consume over plaintext, and the other way
        kcat_ssl(b, "-P", "-t", "t", "-K:", inp=b"k1:over-ssl\nk2:%s\n" % (b"x" * 200000))
        run(["kcat", "-b", b.bootstrap, "-P", "-t", "t", "-K:"], input=b"k3:over-plaintext\n")
        want = ["k1 over-ssl", "k2 " + "x" * 200000, "k3 over-plaintext"]
        for got in (kcat_ssl(b, "-C", "-t", "t", "-e", "-f", "%k %s\n").stdout.decode(),
                    run(["kcat", "-b", b.bootstrap, "-C", "-t", "t", "-e", "-f", "%k %s\n"]).stdout.decode()):
            assert got.splitlines() == want, got[:300]
        # kafka-python over SSL
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        kw = dict(bootstrap_servers=b.ssl_bootstrap, security_protocol="SSL", ssl_cafile=cert("ca.pem"),
                  ssl_check_hostname=False)
        p = KafkaProducer(**kw)
        for i in range(100):
            p.send("py", b"m%d" % i)
        p.flush()
        p.close()
        c = KafkaConsumer(auto_offset_reset="earliest", **kw)
        c.assign([TopicPartition("py", 0)])
        got = []
        deadline = time.monotonic() + HANG_GUARD
        while len(got) < 100 and time.monotonic() < deadline:
            for recs in c.poll(1000).values():
                got += [m.value for m in recs]
        c.close()
        assert got == [b"m%d" % i for i in range(100)], got[:5]
        # TLS 1.0 and 1.1 refused with the alert that says why; 1.2 and 1.3 served
        for old in ("-tls1", "-tls1_1"):
            ok, out = s_client(ssl_port, old)
            assert not ok and "alert protocol version" in out, out
        for new in ("-tls1_2", "-tls1_3"):
            ok, out = s_client(ssl_port, new)
            assert ok, out
        # every handshake counted; the record layer each connection got
        assert metric(admin, "sluice_tls_failures_total") >= 2
        assert metric(admin, "sluice_tls_handshakes_total") >= 4
        assert metric(admin, 'sluice_tls_connections_total{shard="0",record_layer="openssl"}') >= 4


@test
def mutual_tls_refuses_other_cas_and_serves_everyone_else():
    from confluent_kafka import Consumer, Producer, TopicPartition
    admin = free_port()
    with tls_broker(**{"ssl.client.auth": "required", "ssl.truststore.location": cert("ca.pem"),
                       "ssl.principal.mapping.rules": "RULE:^CN=(app),O=acme$/$1/U,RULE:^CN=nobody$/x/",
                       "admin.listen": "127.0.0.1:%d" % admin}) as b:
        conf = {"bootstrap.servers": b.ssl_bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": cert("ca.pem"), "ssl.certificate.location": cert("client.pem"),
                "ssl.key.location": cert("client.key")}
        p = Producer(conf)
        big = os.urandom(300000)   # each fetched in several TLS records and sends
        errs = []
        for i in range(4):
            p.produce("m", value=big[i:] + b"%d" % i, on_delivery=lambda e, m: errs.append(e) if e else None)
        assert p.flush(HANG_GUARD) == 0 and not errs, errs
        c = Consumer(dict(conf, **{"group.id": "g", "auto.offset.reset": "earliest"}))
        c.assign([TopicPartition("m", 0, 0)])
        got = []
        deadline = time.monotonic() + HANG_GUARD
        while len(got) < 4 and time.monotonic() < deadline:
            m = c.poll(1)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        assert got == [big[i:] + b"%d" % i for i in range(4)], [len(g) for g in got]
        # no certificate, or one of another CA: refused; the broker serves on
        # (TLS 1.2: the server's verdict on the client's certificate comes
        # inside the handshake, where s_client reports it; in 1.3 it comes
        # after the client's Finished, so a Kafka client shows it)
        ok, out = s_client(b.ssl_port, "-tls1_2")
        assert not ok and "alert handshake failure" in out.replace("sslv3 ", ""), out
        ok, out = s_client(b.ssl_port, "-tls1_2", client="rogue")
        assert not ok and "alert unknown ca" in out.replace("sslv3 ", "").replace("tlsv1 ", ""), out
        r = kcat_ssl(b, "-L", "-m", "1", client="rogue", check=False)
        assert r.returncode != 0 and b"unknown ca" in r.stderr, r.stderr
        ok, out = s_client(b.ssl_port, "-tls1_2", client="client")
        assert ok, out
        # a certificate of the CA that no principal rule maps: refused
        failures = metric(admin, "sluice_tls_failures_total")
        r = kcat_ssl(b, "-L", "-m", "1", client="stranger", check=False)
        assert r.returncode != 0, r.stderr
        assert metric(admin, "sluice_tls_failures_total") > failures
        md = kcat_ssl(b, "-L", client="client").stdout.decode()
        assert "broker 1 at 127.0.0.1:%d" % b.ssl_port in md, md

@test
def sighup_reloads_the_certificate():
    d = temp_dir("sluice-tls-reload-")
    try:
        ks = os.path.join(d, "keystore.pem")
        shutil.copy(cert("broker.keystore.pem"), ks)
        admin = free_port()
        with tls_broker(**{"ssl.keystore.location": ks, "admin.listen": "127.0.0.1:%d" % admin}) as b:
            ok, out = s_client(b.ssl_port)
            assert ok and "CN = localhost" in out, out
            # a new certificate for the same key pair's place: another subject
            make_cert(certs(), "ca", "broker2", "/CN=reloaded", "DNS:localhost,IP:127.0.0.1")
            shutil.copy(cert("broker2.keystore.pem"), ks + ".new")
            os.rename(ks + ".new", ks)
            b.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + HANG_GUARD
            while "TLS certificates reloaded" not in open(b.log_path).read():
                assert time.monotonic() < deadline and b.alive(), b.log_tail()
                time.sleep(0.05)
            ok, out = s_client(b.ssl_port)
            assert ok and "CN = reloaded" in out, out
            # the admin endpoint's call does the same
            make_cert(certs(), "ca", "broker3", "/CN=by-admin", "DNS:localhost,IP:127.0.0.1")
            shutil.copy(cert("broker3.keystore.pem"), ks + ".new")
            os.rename(ks + ".new", ks)
            r = urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%d/v1/tls/reload" % admin,
                                                              method="POST"), timeout=HANG_GUARD)
            assert r.status == 200 and b'"reloaded": true' in r.read()
            ok, out = s_client(b.ssl_port)
            assert ok and "CN = by-admin" in out, out
            assert metric(admin, "sluice_tls_reloads_total") == 2
            # reloads are unbounded: each frees the context it replaced
            # (the broker once kept every one and refused the 65th)
            for i in range(70):
                r = urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%d/v1/tls/reload" % admin,
                                                                  method="POST"), timeout=HANG_GUARD)
                assert r.status == 200, (i, r.read())
                if i % 10 == 9:
                    ok, out = s_client(b.ssl_port)
                    assert ok and "CN = by-admin" in out, (i, out)
            assert metric(admin, "sluice_tls_reloads_total") == 72
            # a broken file: the old certificate stays
            with open(ks, "w") as f:
                f.write("not a certificate\n")
            b.proc.send_signal(signal.SIGHUP)
            while "TLS reload failed" not in open(b.log_path).read():
                assert time.monotonic() < deadline and b.alive(), b.log_tail()
                time.sleep(0.05)
            ok, out = s_client(b.ssl_port)
            assert ok and "CN = by-admin" in out, out
            try:
                urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%d/v1/tls/reload" % admin,
                                                              method="POST"), timeout=HANG_GUARD)
                assert False, "a broken certificate file reloaded"
            except urllib.error.HTTPError as e:
                assert e.code == 422 and b"ssl.keystore.location" in e.read(), e
    finally:
        shutil.rmtree(d, ignore_errors=True)


def refused(settings, *words):
    d = temp_dir()
    try:
        cmd = [SLUICED, "--data-dir", os.path.join(d, "data"), "--shards", "1"]
        for k, v in settings.items():
            cmd += ["--set", "%s=%s" % (k, v)]
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=HANG_GUARD)
        err = p.stderr.decode()
        assert p.returncode == 2 and b"listening on" not in p.stdout, (settings, p.returncode, err)
        for w in words:
            assert w in err, (settings, w, err)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def start_up_refusals_name_the_key():
    two = "PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d" % (free_port(), free_port())
    ks = cert("broker.keystore.pem")
    refused({"listeners": two}, "ssl.keystore.location")
    refused({"listeners": two, "ssl.keystore.location": cert("ca.pem")}, "ssl.keystore.location")
    refused({"listeners": two, "ssl.keystore.location": ks, "ssl.enabled.protocols": "TLSv1.1"},
            "ssl.enabled.protocols")
    # an SSL inter-broker listener checks other brokers against the truststore
    refused({"listeners": two, "ssl.keystore.location": ks, "inter.broker.listener.name": "SSL"},
            "ssl.truststore.location")
    refused({"listeners": two, "ssl.keystore.location": ks, "ssl.client.auth": "required"},
            "ssl.truststore.location")
    refused({"listeners": two, "ssl.keystore.location": ks, "ssl.cipher.suites": "TLS_NO_SUCH_SUITE"},
            "ssl.cipher.suites")
    # a SASL inter-broker listener needs the broker's own mechanism (Kafka's default GSSAPI is not there)
    refused({"listeners": "SASL_SSL://127.0.0.1:%d" % free_port(), "ssl.keystore.location": ks,
             "ssl.truststore.location": cert("ca.pem")}, "sasl.mechanism.inter.broker.protocol", "SASL_SSL")
    refused({"listeners": "CLIENT://127.0.0.1:%d" % free_port()}, "listener.security.protocol.map")


def handshake(port, ca, client=None, max_tls12=False):
    """A TLS handshake with Python's ssl module trusting ca (a file name in
    certs()), presenting client's certificate when given: (ok, the
    server certificate's CN or the error)."""
    import socket
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cert(ca))
    if client:
        ctx.load_cert_chain(cert(client + ".pem"), cert(client + ".key"))
    if max_tls12:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                # TLS 1.3: a refused client certificate shows at the first read
                s.settimeout(1.0)
                try:
                    if s.recv(1) == b"":
                        return False, "closed after the handshake"
                except socket.timeout:
                    pass
                cn = dict(x[0] for x in s.getpeercert()["subject"]).get("commonName")
                return True, cn
    except (ssl.SSLError, OSError) as e:
        return False, str(e)


@test
def each_ssl_listener_its_own_certificates():
    """listener.name.<l>.ssl.* over the ssl.* keys (Kafka's per-listener
    keys, the listener name matched without case): the SSL listener serves
    the broker's certificate of ca; EXTERNAL its own of rogue-ca, with its
    own truststore, mutual TLS and TLS 1.3 only. A client verifies each
    listener against its CA and not the other's. (Before these keys the
    broker refused them at start as unknown.)"""
    if not os.path.exists(cert("external.pem")):
        make_cert(certs(), "rogue-ca", "external", "/CN=external", "DNS:localhost,IP:127.0.0.1")
    port, a, x = free_port(), free_port(), free_port()
    admin = free_port()
    s = {"listeners": "PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d,EXTERNAL://127.0.0.1:%d" % (port, a, x),
         "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,EXTERNAL:SSL",
         "advertised.listeners": "PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d,EXTERNAL://127.0.0.1:%d" % (
             port, a, x),
         "admin.listen": "127.0.0.1:%d" % admin,
         "ssl.keystore.location": cert("broker.keystore.pem"),
         "listener.name.external.ssl.keystore.certificate.chain": cert("external.pem"),
         "listener.name.external.ssl.keystore.key": cert("external.key"),
         "listener.name.EXTERNAL.ssl.client.auth": "required",
         "listener.name.external.ssl.truststore.location": cert("ca.pem"),
         "listener.name.external.ssl.enabled.protocols": "TLSv1.3"}
    with broker(shards=1, settings=s, port=port) as b:
        assert handshake(a, "ca.pem") == (True, "localhost")
        ok, why = handshake(a, "rogue-ca.pem")
        assert not ok and "certificate verify failed" in why, why
        # EXTERNAL: rogue-ca's certificate, a client certificate of ca required
        assert handshake(x, "rogue-ca.pem", client="client") == (True, "external")
        ok, why = handshake(x, "ca.pem", client="client")
        assert not ok and "certificate verify failed" in why, why
        assert not handshake(x, "rogue-ca.pem")[0]                       # no client certificate
        assert not handshake(x, "rogue-ca.pem", client="rogue")[0]       # one of another CA
        assert not handshake(x, "rogue-ca.pem", client="client", max_tls12=True)[0]
        assert handshake(a, "ca.pem", max_tls12=True)[0]                 # SSL keeps TLS 1.2
        # a Kafka client on each: Metadata over EXTERNAL with its CA
        md = run(["kcat", "-b", "127.0.0.1:%d" % x, "-X", "security.protocol=ssl",
                  "-X", "ssl.ca.location=" + cert("rogue-ca.pem"),
                  "-X", "ssl.certificate.location=" + cert("client.pem"),
                  "-X", "ssl.key.location=" + cert("client.key"), "-L"]).stdout.decode()
        assert "broker 1 at 127.0.0.1:%d" % x in md, md
        md = run(["kcat", "-b", "127.0.0.1:%d" % a, "-X", "security.protocol=ssl",
                  "-X", "ssl.ca.location=" + cert("ca.pem"), "-L"]).stdout.decode()
        assert "broker 1 at 127.0.0.1:%d" % a in md, md
        # a reload rereads both listeners' files
        r = urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%d/v1/tls/reload" % admin,
                                                          method="POST"), timeout=HANG_GUARD)
        assert r.status == 200 and b'"reloads": 2' in r.read()
        assert handshake(x, "rogue-ca.pem", client="client") == (True, "external")
        assert handshake(a, "ca.pem") == (True, "localhost")


@test
def per_listener_keys_refused_naming_the_key():
    two = "PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d" % (free_port(), free_port())
    ks = cert("broker.keystore.pem")
    # a listener name no listener has
    refused({"listeners": two, "ssl.keystore.location": ks, "listener.name.ssl2.ssl.client.auth": "required"},
            "listener.name.ssl2.ssl.client.auth", "no listener is named ssl2")
    # a value the global key's rules refuse
    refused({"listeners": two, "ssl.keystore.location": ks, "listener.name.ssl.ssl.client.auth": "maybe"},
            "listener.name.ssl.ssl.client.auth")
    refused({"listeners": two, "ssl.keystore.location": ks, "listener.name.SSL.ssl.enabled.protocols": "TLSv1.1"},
            "listener.name.SSL.ssl.enabled.protocols")
    # the listener's own keystore is taken whole; without its key, refused naming it
    refused({"listeners": two, "ssl.keystore.location": ks,
             "listener.name.ssl.ssl.keystore.certificate.chain": cert("broker.pem")},
            "listener.name.ssl.ssl.keystore.location")
    refused({"listeners": two, "ssl.keystore.location": ks, "listener.name.ssl.ssl.client.auth": "required"},
            "ssl.truststore.location", "listener.name.ssl.ssl.client.auth")
    # the listener's own truststore is taken whole too: named when empty
    refused({"listeners": two, "ssl.keystore.location": ks, "ssl.truststore.location": cert("ca.pem"),
             "listener.name.ssl.ssl.client.auth": "required", "listener.name.ssl.ssl.truststore.certificates": ""},
            "listener.name.ssl.ssl.truststore.location")


if __name__ == "__main__":
    try:
        main("tls")
    finally:
        if CERTS:
            shutil.rmtree(CERTS, ignore_errors=True)
