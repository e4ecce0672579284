#!/usr/bin/python3
"""sluicectl on a secured cluster, and the admin endpoint's authentication
(issue 21).

One broker (the authorizer on, admin.require.auth=true) serves a SASL_SSL
listener (PLAIN and SCRAM-SHA-512) and an SSL listener (ssl.client.auth=
requested); its SCRAM users come from sluiced --add-scram; certificates are
made here with the openssl CLI. sluicectl --command-config, with Kafka's
client properties:

- over SASL_SSL with SCRAM-SHA-512 (sasl.jaas.config, as Kafka's tools take
  it) and with PLAIN (librdkafka's sasl.username/sasl.password): a topic
  created and described, its shards read from the admin endpoint with the
  same credentials (no note on stderr);
- over SSL with a client certificate whose subject is a super user: the
  ACLs listed; without the certificate the same call is refused
  (CLUSTER_AUTHORIZATION_FAILED), so the certificate was what counted;
- a wrong password: exit 1 and a message that says authentication failed
  and why; a broker certificate checked against the wrong host name
  refused; a bad --command-config key and a bad value: exit 2 naming the
  file, the line and the key;
- the admin endpoint: without credentials and with a wrong password 401
  with WWW-Authenticate (after the failure delay, logged without the
  password); with a SCRAM user 200; a POST by a user not in super.users
  403, by a super user 200;
- bearer tokens (admin.auth.token.file): a token accepted, a POST with a
  non-super user's token 403, an unknown token 401, a token removed from
  the file and SIGHUP 401 (a new one 200), a file others may read refused
  at the reload with the old tokens kept; the failures counted in
  sluice_admin_auth_failures_total; sluicectl with --admin-token-file and
  admin.token=;
- HTTP Basic checks remembered: a repeated user and password served from
  the cache (counted), a wrong one never, a new password stopping the old
  one at once, SIGHUP forgetting them;
- admin.metrics.open: GET /metrics without credentials 200, /v1/... 401;
- client certificates (admin.ssl.client.auth): requested, a certificate of
  the CA whose subject is a super user POSTs without a password, one of
  another CA gets 401; on a second broker with required, no certificate
  and one of another CA fail the handshake, and SIGHUP serves a new
  certificate; SIGHUP rereads the trusted CAs (the other CA's certificate
  served, the first's refused), and 30 reloads leave few certificates held;
- an admin endpoint bound beyond loopback without admin.require.auth starts
  and logs a warning (one on loopback does not); a token file others may
  read stops the start (exit 2, the file named).

    /usr/bin/python3 tests/integration/test_sluicectl_security.py [test ...]
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (HANG_GUARD, SLUICECTL, Broker, BrokerError, free_port, main, make_ca, make_cert, make_tls_certs, run,  # noqa: E402
                     temp_dir, test)  # noqa: E402

ADD = ["--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
       "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]"]
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_padmin="padmin-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="%s" password="%s";')
STATE = {}


def setup():
    """The certificates and the broker, made once for the suite."""
    if STATE:
        return STATE
    import atexit
    d = make_tls_certs(temp_dir("sluice-ctlsec-certs-"))
    atexit.register(shutil.rmtree, d, True)
    # a client certificate: subject CN=ops (a super user), of the same CA
    run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
         "ops.key", "-out", "ops.csr", "-subj", "/CN=ops"], cwd=d)
    run(["openssl", "x509", "-req", "-in", "ops.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "77",
         "-out", "ops.pem", "-days", "2"], cwd=d)
    make_ca(d, "other")   # a CA the broker does not trust
    make_cert(d, "other", "stranger", "/CN=ops")
    tokens = os.path.join(d, "admin.tokens")
    write_tokens(tokens, "# the admin endpoint's tokens\nUser:admin tok-admin-1\n\nUser:alice   tok-alice-1\n")
    port, ss, s, admin = free_port(), free_port(), free_port(), free_port()
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d,SSL://0.0.0.0:%d" % (port, ss, s),
        "advertised.listeners": "SSL://127.0.0.1:%d" % s,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.location": os.path.join(d, "broker.keystore.pem"),
        "ssl.truststore.location": os.path.join(d, "ca.pem"),
        "ssl.client.auth": "requested",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:padmin;User:CN=ops",
        "admin.listen": "127.0.0.1:%d" % admin,
        "admin.require.auth": "true",
        "admin.ssl.enabled": "true",
        "admin.auth.token.file": tokens,
        "admin.metrics.open": "true",
        "admin.ssl.client.auth": "requested",
    }
    b = Broker(temp_dir(), shards=1, settings=settings, port=port, args=ADD)
    try:
        b.start()
    except BaseException:
        shutil.rmtree(b.workdir, ignore_errors=True)
        raise

    def stop():
        try:
            if b.proc is not None:
                b.stop()
        finally:
            shutil.rmtree(b.workdir, ignore_errors=True)
    atexit.register(stop)
    STATE.update(tokens=tokens, certs=d, b=b, ss="127.0.0.1:%d" % ss, ssl="127.0.0.1:%d" % s, admin=admin)
    return STATE


def write_tokens(path, text, mode=0o600):
    with open(path + ".new", "w") as f:
        f.write(text)
    os.chmod(path + ".new", mode)
    os.rename(path + ".new", path)


def sighup_and_wait(what):
    """SIGHUP the broker and wait for the log line what (one more of it)."""
    b = STATE["b"]
    n = open(b.log_path).read().count(what)
    b.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + HANG_GUARD
    while open(b.log_path).read().count(what) <= n:
        assert time.monotonic() < deadline and b.alive(), b.log_tail()
        time.sleep(0.02)


def props(name, **kv):
    """A --command-config file in the certificates' directory."""
    path = os.path.join(STATE["certs"], name)
    with open(path, "w") as f:
        f.write("# sluicectl's client properties\n")
        for k, v in kv.items():
            f.write("%s=%s\n" % (k.replace("_", "."), v))
    return path


def ctl(cfg, *args, bootstrap=None, check=True):
    # the admin endpoint's address and its HTTPS from the broker's own
    # config (DescribeConfigs of admin.listen and admin.ssl.enabled)
    cmd = [SLUICECTL, "-b", bootstrap or STATE["ss"]]
    if cfg:
        cmd += ["--command-config", cfg]
    p = run(cmd + list(args), check=False)
    out, err = p.stdout.decode(), p.stderr.decode()
    if check:
        assert p.returncode == 0, "%s: exit %d\n%s%s" % (" ".join(args), p.returncode, out, err)
    return p.returncode, out, err


def scram_cfg(user="admin", password="admin-secret", name="scram.properties"):
    return props(name, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                 sasl_jaas_config=SCRAM_JAAS % (user, password),
                 ssl_truststore_location=os.path.join(STATE["certs"], "ca.pem"), ssl_truststore_type="PEM")


def http(path, user=None, password=None, method="GET", token=None, cert=None, port=None):
    import ssl
    ctx = ssl.create_default_context(cafile=os.path.join(STATE["certs"], "ca.pem"))
    if cert:
        ctx.load_cert_chain(os.path.join(STATE["certs"], cert + ".pem"), os.path.join(STATE["certs"], cert + ".key"))
    req = urllib.request.Request("https://127.0.0.1:%d%s" % (port or STATE["admin"], path), method=method)
    if user is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(
            ("%s:%s" % (user, password)).encode()).decode())
    if token is not None:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=HANG_GUARD, context=ctx) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


@test
def sasl_ssl_scram_and_plain():
    setup()
    cfg = scram_cfg()
    ctl(cfg, "topic", "create", "secured", "-p", "2")
    rc, out, err = ctl(cfg, "--format", "json", "topic", "describe", "secured")
    d = json.loads(out)["topics"][0]
    assert len(d["partitions"]) == 2, out
    # the shards came from the admin endpoint, with the same credentials
    assert "admin endpoint" not in err, err
    assert all(p.get("shard") is not None for p in d["partitions"]), out
    plain = props("plain.properties", security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
                  sasl_username="padmin", sasl_password="padmin-secret",
                  ssl_ca_location=os.path.join(STATE["certs"], "ca.pem"))
    rc, out, err = ctl(plain, "topic", "list")
    assert "secured" in out, out + err
    # bash completion's topic names come through the same login
    assert "secured" in ctl(cfg, "__names", "topic")[1]
    # the endpoint named: https://, with the credentials (a SCRAM user's:
    # PLAIN's users of a listener's JAAS config are not the endpoint's)
    rc, out, err = ctl(cfg, "--admin", "https://localhost:%d" % STATE["admin"], "topic", "describe", "secured")
    assert "admin endpoint" not in err and " ? " not in out, out + err


@test
def ssl_with_a_client_certificate():
    setup()
    ca = os.path.join(STATE["certs"], "ca.pem")
    mtls = props("mtls.properties", security_protocol="SSL", ssl_ca_location=ca,
                 ssl_certificate_location=os.path.join(STATE["certs"], "ops.pem"),
                 ssl_key_location=os.path.join(STATE["certs"], "ops.key"))
    rc, out, err = ctl(mtls, "acl", "list", bootstrap=STATE["ssl"])
    # without the certificate: User:ANONYMOUS, who may not describe ACLs
    anon = props("anon.properties", security_protocol="SSL", ssl_ca_location=ca)
    rc, out, err = ctl(anon, "acl", "list", bootstrap=STATE["ssl"], check=False)
    assert rc == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err, (rc, out, err)


@test
def refusals_name_what_is_wrong():
    setup()
    b = STATE["b"]
    rc, out, err = ctl(scram_cfg("admin", "not-the-password", "wrong.properties"), "topic", "list", check=False)
    assert rc == 1, (rc, err)
    assert "authentication failed" in err and "SASL_AUTHENTICATION_FAILED" in err and "'admin'" in err, err
    assert "not-the-password" not in open(b.log_path).read()
    # the broker's certificate is for localhost and 127.0.0.1: reached as
    # 127.0.0.2 (the SSL listener is bound to every address) it is refused,
    # unless the check is turned off
    ca = os.path.join(STATE["certs"], "ca.pem")
    other = "127.0.0.2:%s" % STATE["ssl"].split(":")[1]
    rc, out, err = ctl(props("host.properties", security_protocol="SSL", ssl_ca_location=ca), "topic", "list",
                       bootstrap=other, check=False)
    assert rc == 1 and "IP address mismatch" in err, (rc, err)
    rc, out, err = ctl(props("nohost.properties", security_protocol="SSL", ssl_ca_location=ca,
                             ssl_endpoint_identification_algorithm=""), "topic", "list", bootstrap=other)
    assert out.startswith("TOPIC"), out
    # a bad key and a bad value: exit 2, the file, line and key named
    bad = props("bad.properties", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                ssl_keystore_pasword="x")
    rc, out, err = ctl(bad, "topic", "list", check=False)
    assert rc == 2 and "bad.properties:4: ssl.keystore.pasword: unknown key" in err, (rc, err)
    bad = props("bad2.properties", security_protocol="SASL_TLS")
    rc, out, err = ctl(bad, "topic", "list", check=False)
    assert rc == 2 and "bad2.properties:2: security.protocol: 'SASL_TLS'" in err, (rc, err)


@test
def command_config_errors_name_the_key():
    """Each refused before any broker is asked: exit 2, file:line: key."""
    setup()
    ca = os.path.join(STATE["certs"], "ca.pem")
    cases = [
        (dict(security_protocol="SASL_SSL", sasl_mechanism="GSSAPI"), ":3: sasl.mechanism: 'GSSAPI'"),
        (dict(security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_jaas_config=SCRAM_JAAS % ("a", "b")),
         ":4: sasl.jaas.config: ScramLoginModule goes with"),
        (dict(sasl_jaas_config="ScramLoginModule optional username=\"a\";"),
         ":2: sasl.jaas.config: the control flag must be 'required'"),
        (dict(security_protocol="SASL_SSL"), "needs sasl.mechanism"),
        (dict(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256", sasl_username="a"),
         "needs a user name and a password"),
        (dict(ssl_truststore_location="/nonexistent/ca.pem"), ":2: ssl.truststore.location: cannot load"),
        (dict(ssl_truststore_location=ca, ssl_truststore_type="JKS"), ":3: ssl.truststore.type: 'JKS'"),
        (dict(ssl_certificate_location=os.path.join(STATE["certs"], "ops.pem")),
         ":2: ssl.certificate.location: ssl.certificate.location and ssl.key.location go together"),
        (dict(ssl_certificate_location=os.path.join(STATE["certs"], "ops.pem"),
              ssl_key_location=os.path.join(STATE["certs"], "broker.key")),
         ":3: ssl.key.location: the private key does not match"),
        (dict(ssl_endpoint_identification_algorithm="sometimes"),
         ":2: ssl.endpoint.identification.algorithm: 'sometimes'"),
    ]
    for i, (kv, want) in enumerate(cases):
        rc, out, err = ctl(props("e%d.properties" % i, **kv), "topic", "list", check=False)
        assert rc == 2 and want in err, (kv, rc, err)
    rc, out, err = ctl("/nonexistent.properties", "topic", "list", check=False)
    assert rc == 2 and "/nonexistent.properties: No such file" in err, err


@test
def admin_endpoint_needs_credentials():
    setup()
    b = STATE["b"]
    st, hdr, body = http("/v1/health")
    assert st == 401 and hdr.get("WWW-Authenticate", "").startswith("Basic"), (st, hdr, body)
    st, hdr, body = http("/v1/config", "admin", "wrong-one")
    assert st == 401, (st, body)
    st, hdr, body = http("/v1/config", "nobody", "x")
    assert st == 401, (st, body)
    log = open(b.log_path).read()
    assert "authentication failed" in log and "user 'admin'): wrong password" in log, log[-2000:]
    assert "wrong-one" not in log
    st, hdr, body = http("/v1/health", "alice", "alice-secret")
    assert st in (200, 503), (st, body)
    # what changes the broker is for super.users
    st, hdr, body = http("/v1/tls/reload", "alice", "alice-secret", method="POST")
    assert st == 403, (st, body)
    st, hdr, body = http("/v1/tls/reload", "admin", "admin-secret", method="POST")
    assert st == 200 and '"reloaded": true' in body, (st, body)
    # sluicectl with a client certificate and no password: the certificate
    # serves the endpoint too (admin.ssl.client.auth=requested)
    mtls = props("mtls2.properties", security_protocol="SSL", ssl_ca_location=os.path.join(STATE["certs"], "ca.pem"),
                 ssl_certificate_location=os.path.join(STATE["certs"], "ops.pem"),
                 ssl_key_location=os.path.join(STATE["certs"], "ops.key"))
    ctl(scram_cfg(), "topic", "create", "secured-2")
    rc, out, err = ctl(mtls, "topic", "describe", "secured-2", bootstrap=STATE["ssl"])
    assert "admin endpoint" not in err and " ? " not in out, out + err
    # without credentials for the endpoint (SASL over PLAIN's JAAS user,
    # not a SCRAM user): the Kafka part works, the note says what is missing
    plain = props("plain2.properties", security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
                  sasl_username="padmin", sasl_password="padmin-secret",
                  ssl_ca_location=os.path.join(STATE["certs"], "ca.pem"))
    rc, out, err = ctl(plain, "topic", "describe", "secured-2", check=False)
    err = " ".join(err.split())
    assert rc == 0 and "HTTP 401" in err and "admin.require.auth" in err, (rc, out, err)


def metric(name):
    st, hdr, body = http("/metrics")
    assert st == 200, (st, body)
    for line in body.splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    raise AssertionError("no %s in /metrics" % name)


@test
def admin_basic_checks_remembered_never_for_another_password():
    """A user and password verified are remembered (a keyed digest, a
    minute): the second request is a cache hit, no PBKDF2; a wrong password
    never is one (401); a new password for the user stops the old one at
    once (the digest is bound to the user's SCRAM credential), the new one
    is served; SIGHUP forgets what was verified."""
    setup()
    b = STATE["b"]
    hits = "sluice_admin_basic_cache_hits_total"

    def set_password(pw):
        p = run([SLUICECTL, "-b", STATE["ss"], "--command-config", scram_cfg(), "user", "create", "dana",
                 "--mechanism", "SCRAM-SHA-512"], env=dict(os.environ, SLUICECTL_PASSWORD=pw), check=False)
        assert p.returncode == 0, p.stderr
    set_password("dana-1")
    deadline = time.monotonic() + HANG_GUARD
    while http("/v1/config", "dana", "dana-1")[0] != 200:   # the user on the node
        assert time.monotonic() < deadline, "dana never logged in"
        time.sleep(0.05)
    h0 = metric(hits)
    for _ in range(3):
        assert http("/v1/config", "dana", "dana-1")[0] == 200
    assert metric(hits) == h0 + 3
    # a wrong password: no hit, refused, whatever was verified before
    for wrong in ("dana-1x", "dana-", "DANA-1", ""):
        st, hdr, body = http("/v1/config", "dana", wrong)
        assert st == 401, (wrong, st, body)
    assert metric(hits) == h0 + 3
    # another user with dana's password: refused
    assert http("/v1/config", "alice", "dana-1")[0] == 401
    # a new password: the old one refused from the moment the new one works
    set_password("dana-2")
    deadline = time.monotonic() + HANG_GUARD
    while True:
        st_new = http("/v1/config", "dana", "dana-2")[0]
        st_old = http("/v1/config", "dana", "dana-1")[0]
        if st_new == 200:
            break
        assert st_old == 200 and time.monotonic() < deadline, (st_new, st_old)
        time.sleep(0.05)
    assert http("/v1/config", "dana", "dana-1")[0] == 401
    h1 = metric(hits)
    assert http("/v1/config", "dana", "dana-2")[0] == 200 and metric(hits) == h1 + 1
    # SIGHUP forgets: the next check is a full one (no hit), then remembered
    sighup_and_wait("SIGHUP: the admin endpoint's certificate")
    assert http("/v1/config", "dana", "dana-2")[0] == 200 and metric(hits) == h1 + 1
    assert http("/v1/config", "dana", "dana-2")[0] == 200 and metric(hits) == h1 + 2
    assert "dana-1" not in open(b.log_path).read() and "dana-2" not in open(b.log_path).read()


@test
def admin_metrics_open_the_rest_closed():
    setup()
    st, hdr, body = http("/metrics")
    assert st == 200 and "sluice_admin_auth_failures_total" in body, (st, body[:300])
    for path in ("/v1/config", "/v1/health", "/v1/shards"):
        st, hdr, body = http(path)
        assert st == 401, (path, st, body)
    st, hdr, body = http("/v1/tls/reload", method="POST")
    assert st == 401, (st, body)


@test
def admin_bearer_tokens():
    setup()
    b = STATE["b"]
    failures = metric("sluice_admin_auth_failures_total")
    st, hdr, body = http("/v1/config", token="tok-alice-1")
    assert st == 200 and '"configs"' in body, (st, body[:300])
    st, hdr, body = http("/v1/tls/reload", method="POST", token="tok-alice-1")
    assert st == 403, (st, body)
    assert "refused to User:alice" in open(b.log_path).read()
    st, hdr, body = http("/v1/tls/reload", method="POST", token="tok-admin-1")
    assert st == 200 and '"reloaded": true' in body, (st, body)
    st, hdr, body = http("/v1/config", token="tok-admin-2")
    assert st == 401 and "Bearer realm=\"sluice\"" in hdr.get_all("WWW-Authenticate"), (st, hdr, body)
    assert metric("sluice_admin_auth_failures_total") == failures + 1
    log = open(b.log_path).read()
    assert "unknown bearer token" in log and "tok-admin-2" not in log, log[-2000:]
    # rotated: alice's token gone, a new one for admin, on SIGHUP
    write_tokens(STATE["tokens"], "User:admin tok-admin-2\n")
    sighup_and_wait("admin tokens reloaded (1)")
    st, hdr, body = http("/v1/config", token="tok-alice-1")
    assert st == 401, (st, body)
    st, hdr, body = http("/v1/config", token="tok-admin-2")
    assert st == 200, (st, body[:300])
    # sluicectl with the token: from a file, and as admin.token= (the
    # Kafka part over SSL with the client certificate, no SASL user)
    certs = STATE["certs"]
    mtls = props("mtls3.properties", security_protocol="SSL", ssl_ca_location=os.path.join(certs, "ca.pem"),
                 ssl_certificate_location=os.path.join(certs, "ops.pem"),
                 ssl_key_location=os.path.join(certs, "ops.key"))
    ctl(scram_cfg(), "topic", "create", "secured-3")
    tf = os.path.join(certs, "ctl.token")
    with open(tf, "w") as f:
        f.write("tok-admin-2\n")
    rc, out, err = ctl(mtls, "--admin-token-file", tf, "topic", "describe", "secured-3", bootstrap=STATE["ssl"])
    assert "admin endpoint" not in err and " ? " not in out, out + err
    withtok = props("tok.properties", security_protocol="SSL", ssl_ca_location=os.path.join(certs, "ca.pem"),
                    ssl_certificate_location=os.path.join(certs, "ops.pem"),
                    ssl_key_location=os.path.join(certs, "ops.key"), admin_token="tok-admin-2")
    rc, out, err = ctl(withtok, "topic", "describe", "secured-3", bootstrap=STATE["ssl"])
    assert "admin endpoint" not in err and " ? " not in out, out + err
    with open(tf, "w") as f:
        f.write("tok-alice-1\n")
    rc, out, err = ctl(mtls, "--admin-token-file", tf, "topic", "describe", "secured-3", bootstrap=STATE["ssl"],
                       check=False)
    err = " ".join(err.split())
    assert "HTTP 401" in err and "bearer token" in err, (rc, out, err)
    # a file others may read: refused (named), the tokens before it stay
    write_tokens(STATE["tokens"], "User:admin tok-admin-3\n", mode=0o644)
    sighup_and_wait("admin tokens not reloaded")
    log = open(b.log_path).read()
    assert "%s: permissions 0644 are too open" % STATE["tokens"] in log, log[-2000:]
    st, hdr, body = http("/v1/config", token="tok-admin-2")
    assert st == 200, (st, body[:300])
    write_tokens(STATE["tokens"], "User:admin tok-admin-2\n")


def handshake_refused(**kw):
    import ssl
    try:
        st, hdr, body = http("/v1/config", **kw)
    except (ssl.SSLError, ConnectionError) as e:
        return str(e)
    except urllib.error.URLError as e:
        assert isinstance(e.reason, (ssl.SSLError, ConnectionError)), e
        return str(e.reason)
    raise AssertionError("served: %d %s" % (st, body[:200]))


@test
def admin_client_certificates():
    setup()
    # requested: CN=ops (User:CN=ops, a super user) needs no password
    st, hdr, body = http("/v1/tls/reload", method="POST", cert="ops")
    assert st == 200 and '"reloaded": true' in body, (st, body)
    # a certificate of another CA: 401 (with required: the handshake fails)
    failures = metric("sluice_admin_auth_failures_total")
    st, hdr, body = http("/v1/config", cert="stranger")
    assert st == 401 and metric("sluice_admin_auth_failures_total") == failures + 1, (st, body)
    assert "do not vouch for" in open(STATE["b"].log_path).read()
    # required, on a broker of its own: no certificate fails the handshake
    d = STATE["certs"]
    ks = os.path.join(d, "req.keystore.pem")
    shutil.copy(os.path.join(d, "broker.keystore.pem"), ks)
    admin = free_port()
    b = Broker(temp_dir(), shards=1, settings={
        "ssl.keystore.location": ks, "ssl.truststore.location": os.path.join(d, "ca.pem"),
        "admin.listen": "127.0.0.1:%d" % admin, "admin.require.auth": "true", "admin.ssl.enabled": "true",
        "admin.ssl.client.auth": "required"})
    try:
        b.start()
        handshake_refused(port=admin)
        handshake_refused(port=admin, cert="stranger")
        st, hdr, body = http("/v1/config", cert="ops", port=admin)
        assert st == 200, (st, body[:200])
        # sluicectl without a certificate there: the Kafka part served, a note
        # (the refused handshake is an error, not a SIGPIPE)
        ctl(scram_cfg(), "topic", "create", "secured-4")
        rc, out, err = ctl(scram_cfg(), "--admin", "https://localhost:%d" % admin, "topic", "describe",
                           "secured-4", check=False)
        assert rc == 0 and "admin endpoint" in err, (rc, out, err)
        # SIGHUP: the endpoint serves the new certificate
        import ssl
        make_cert(d, "ca", "renewed", "/CN=renewed", "DNS:localhost,IP:127.0.0.1")
        shutil.copy(os.path.join(d, "renewed.keystore.pem"), ks + ".new")
        os.rename(ks + ".new", ks)
        n = open(b.log_path).read().count("the admin endpoint's certificate reloaded")
        b.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + HANG_GUARD
        while open(b.log_path).read().count("the admin endpoint's certificate reloaded") <= n:
            assert time.monotonic() < deadline and b.alive(), b.log_tail()
            time.sleep(0.02)
        ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.pem"))
        ctx.load_cert_chain(os.path.join(d, "ops.pem"), os.path.join(d, "ops.key"))
        import socket
        with socket.create_connection(("127.0.0.1", admin), timeout=HANG_GUARD) as sock:
            with ctx.wrap_socket(sock, server_hostname="localhost") as tls:
                subj = dict(x[0] for x in tls.getpeercert()["subject"])
        assert subj.get("commonName") == "renewed", subj
    finally:
        try:
            b.stop()
        finally:
            shutil.rmtree(b.workdir, ignore_errors=True)


@test
def admin_beyond_loopback_without_auth_warns():
    setup()
    assert "WARNING: the admin endpoint listens" not in open(STATE["b"].log_path).read()
    admin = free_port()
    b = Broker(temp_dir(), shards=1, settings={"admin.listen": "0.0.0.0:%d" % admin})
    try:
        b.start()
        log = open(b.log_path).read()
        assert "admin: WARNING: the admin endpoint listens on 0.0.0.0:%d, beyond loopback, with " \
               "admin.require.auth=false" % admin in log, log[-2000:]
        try:   # still served: compatibility
            with urllib.request.urlopen("http://127.0.0.1:%d/v1/health" % admin, timeout=HANG_GUARD) as r:
                st = r.status
        except urllib.error.HTTPError as e:
            st = e.code
        assert st in (200, 503), st
    finally:
        try:
            b.stop()
        finally:
            shutil.rmtree(b.workdir, ignore_errors=True)
    # a token file others may read stops the start, naming it (exit 2)
    tf = os.path.join(STATE["certs"], "open.tokens")
    write_tokens(tf, "User:admin tok-x\n", mode=0o644)
    b = Broker(temp_dir(), shards=1, settings={"admin.listen": "127.0.0.1:%d" % free_port(),
                                               "admin.auth.token.file": tf})
    try:
        try:
            b.start()
            raise AssertionError("started with a token file of mode 0644")
        except BrokerError as e:
            assert "exited 2" in str(e) and "%s: permissions 0644 are too open" % tf in str(e), str(e)[-2000:]
    finally:
        shutil.rmtree(b.workdir, ignore_errors=True)


@test
def admin_trusted_cas_reread_and_old_certificates_freed():
    """admin.ssl.client.auth=required: the trusted CAs are read again on
    SIGHUP (a CA taken out refuses its certificates, one put in is
    trusted), and reloads do not keep every certificate served before
    (sluice_admin_tls_certificates stays small). On the code before, the
    CAs were libmicrohttpd's, read at the start (the other CA's
    certificate stayed refused), and every reload kept its predecessor."""
    setup()
    d = STATE["certs"]
    trust = os.path.join(d, "admin-trust.pem")
    shutil.copy(os.path.join(d, "ca.pem"), trust)
    admin = free_port()
    b = Broker(temp_dir(), shards=1, settings={
        "ssl.keystore.location": os.path.join(d, "broker.keystore.pem"), "ssl.truststore.location": trust,
        "admin.listen": "127.0.0.1:%d" % admin, "admin.require.auth": "true", "admin.ssl.enabled": "true",
        "admin.ssl.client.auth": "required", "admin.metrics.open": "true", "super.users": "User:CN=ops"})
    try:
        b.start()
        st, hdr, body = http("/v1/config", cert="ops", port=admin)
        assert st == 200, (st, body[:200])
        handshake_refused(port=admin, cert="stranger")
        # the other CA in, the first out
        shutil.copy(os.path.join(d, "other.pem"), trust + ".new")
        os.rename(trust + ".new", trust)
        n = open(b.log_path).read().count("the admin endpoint's certificate reloaded")
        b.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + HANG_GUARD
        while open(b.log_path).read().count("the admin endpoint's certificate reloaded") <= n:
            assert time.monotonic() < deadline and b.alive(), b.log_tail()
            time.sleep(0.02)
        st, hdr, body = http("/v1/config", cert="stranger", port=admin)
        assert st == 200, (st, body[:200])
        handshake_refused(port=admin, cert="ops")
        # 30 reloads, each on a connection of its own: what is held stays small
        for i in range(30):
            st, hdr, body = http("/v1/tls/reload", method="POST", cert="stranger", port=admin)
            assert st == 200 and '"reloaded": true' in body, (i, st, body)
        st, hdr, body = http("/metrics", cert="stranger", port=admin)
        held = [float(x.rsplit(" ", 1)[1]) for x in body.splitlines()
                if x.startswith("sluice_admin_tls_certificates ")]
        assert held and held[0] <= 3, held
        # a broken trust file: the previous CAs and certificate stay
        with open(trust, "w") as f:
            f.write("not a certificate\n")
        st, hdr, body = http("/v1/tls/reload", method="POST", cert="stranger", port=admin)
        assert st == 200, (st, body)
        assert "the endpoint's certificate not reloaded" in open(b.log_path).read()
        st, hdr, body = http("/v1/config", cert="stranger", port=admin)
        assert st == 200, (st, body[:200])
    finally:
        try:
            b.stop()
        finally:
            shutil.rmtree(b.workdir, ignore_errors=True)


if __name__ == "__main__":
    main("sluicectl security")
