#!/usr/bin/python3
"""docs/security.md's ten-command guide (from nothing to TLS, SCRAM and
ACLs), run as the page has it, so that the page stays true (issue 21).

The block between <!-- guide:start --> and <!-- guide:end --> runs in bash
in a new directory with build/ first on the PATH; only its ports change
(9093 and 9644 become free ones) and the broker started in the background
is waited for (its port accepts) before the next command. Then, from here:

- what the guide promised: alice's record is in `orders` (read back as the
  super user admin over SASL_SSL), alice may not read it
  (TOPIC_AUTHORIZATION_FAILED), a wrong password and a plaintext client
  get nothing, and the admin endpoint wants credentials (401 without);
- the broker is stopped and the directory removed, whatever happened.

    /usr/bin/python3 tests/integration/test_security_guide.py
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, SLUICED, free_port, main, temp_dir, test  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "docs", "security.md")


def guide_block():
    """The guide's commands, as docs/security.md has them."""
    text = open(PAGE).read()
    m = re.search(r"<!-- guide:start -->\n```sh\n(.*?)```\n<!-- guide:end -->", text, re.S)
    assert m, "%s: no block between <!-- guide:start --> and <!-- guide:end -->" % PAGE
    return m.group(1)


def commands(block):
    """The block's commands (comments left out; a heredoc is one command
    with its body); the count is what the heading promises."""
    out, lines = [], block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.search(r"<<'(\w+)'$", line)
        if m:
            body = []
            while i < len(lines) and lines[i] != m.group(1):
                body.append(lines[i])
                i += 1
            i += 1
            line = "\n".join([line] + body + [m.group(1)])
        out.append(line)
    return out


def kafka_conf(port, d, user, password, **kw):
    c = {"bootstrap.servers": "127.0.0.1:%d" % port, "security.protocol": "SASL_SSL",
         "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
         "ssl.ca.location": os.path.join(d, "ca.pem"), "log_level": 0}
    c.update(kw)
    return c


def read_all(conf, topic, nparts=3, timeout=15):
    """Every record of topic (values), or the first error the consumer got."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer(dict(conf, **{"group.id": "guide-check", "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(nparts)])
        got, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                if got:
                    break
                continue
            if m.error():
                return got, m.error()
            got.append(m.value())
        return got, None
    finally:
        c.close()


@test
def the_ten_commands_make_a_secured_broker():
    block = guide_block()
    cmds = commands(block)
    assert len(cmds) == 10, "the guide says ten commands; it has %d: %r" % (len(cmds), cmds)
    d = temp_dir("sluice-guide-")
    kport, aport = free_port(), free_port()
    script = block.replace("127.0.0.1:9093", "127.0.0.1:%d" % kport).replace("127.0.0.1:9644", "127.0.0.1:%d" % aport)
    # the background start: note its pid, then wait for its port
    script = re.sub(r"^(sluiced .*&)$", r"\1\necho $! > sluiced.pid\nfor i in $(seq 300); do "
                    r"(exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null && break; sleep 0.1; done" % kport,
                    script, count=1, flags=re.M)
    assert "sluiced.pid" in script, "the guide has no `sluiced ... &` line"
    env = dict(os.environ, PATH=os.path.dirname(SLUICED) + os.pathsep + os.environ.get("PATH", ""))
    pid = None
    try:
        with open(os.path.join(d, "guide.log"), "w") as log:
            r = subprocess.run(["bash", "-e", "-c", script], cwd=d, env=env, stdout=log, stderr=subprocess.STDOUT,
                               timeout=HANG_GUARD * 4)
        if os.path.exists(os.path.join(d, "sluiced.pid")):
            pid = int(open(os.path.join(d, "sluiced.pid")).read())
        out = open(os.path.join(d, "guide.log")).read()
        assert r.returncode == 0, "the guide failed (exit %d):\n%s" % (r.returncode, out[-3000:])
        assert "created topic orders" in out, out[-2000:]
        # alice's record is there: admin (a super user) reads it
        got, err = read_all(kafka_conf(kport, d, "admin", "admin-secret"), "orders")
        assert err is None and got == [b"hello"], (got, err)
        # alice may write but not read
        # (kcat, as the page says: no consumer group, so the topic's refusal
        # is the one seen)
        r = subprocess.run(["kcat", "-b", "127.0.0.1:%d" % kport, "-X", "security.protocol=SASL_SSL",
                            "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice",
                            "-X", "sasl.password=alice-secret", "-X", "ssl.ca.location=ca.pem",
                            "-C", "-t", "orders", "-e", "-o", "beginning"], cwd=d, capture_output=True,
                           timeout=HANG_GUARD)
        assert b"hello" not in r.stdout and b"Topic authorization failed" in r.stderr, (r.stdout, r.stderr[-500:])
        # a wrong password and a plaintext client get nothing
        from confluent_kafka import Producer
        for conf in (kafka_conf(kport, d, "alice", "wrong"),
                     {"bootstrap.servers": "127.0.0.1:%d" % kport, "log_level": 0}):
            p = Producer(dict(conf, **{"message.timeout.ms": 1000}))
            errs = []
            p.produce("orders", b"x", on_delivery=lambda e, m: errs.append(e))
            p.flush(10)
            assert errs and errs[0] is not None, "a %s client produced" % conf.get("security.protocol", "plaintext")
        # the admin endpoint wants credentials
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/v1/health" % aport, timeout=HANG_GUARD)
            raise AssertionError("the admin endpoint answered without credentials")
        except urllib.error.HTTPError as e:
            assert e.code == 401, e.code
    finally:
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)
                for _ in range(100):
                    os.kill(pid, 0)
                    time.sleep(0.1)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main("security guide")
