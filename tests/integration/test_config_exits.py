#!/usr/bin/python3
"""sluiced's configuration errors: each exits 2 naming what is wrong, and
frees what it allocated first, so that the sanitizer build
(build/san/sluiced, made by `make san-sluiced`; make test builds it) exits 2
too, with no LeakSanitizer report: a bad option or --set value (also after
an --add-scram), a missing value, a role without voters, a SASL listener
without its JAAS users, an unreadable keystore, DPDK without its address,
a data directory that cannot be made, a listener port another process
holds, and a node.id the data directory was not made with (an error the
control thread finds after the shards started). And a clean stop: three
nodes of the sanitizer build with a replicated topic, each SIGTERMed
(controlled shutdown moves leaderships while the shards stop), say
"stopped cleanly" with no LeakSanitizer report (the role messages sent to
shards that had stopped leaked: 160 of them on one node before ctl_roles_fini).

Run: /usr/bin/python3 tests/integration/test_config_exits.py
"""

import os
import shutil
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, REPO, SLUICED, main, temp_dir, test  # noqa: E402
from cluster import Cluster, create_topic, wait_isrs  # noqa: E402

SAN_SLUICED = os.environ.get("SLUICED_SAN", os.path.join(REPO, "build", "san", "sluiced"))
SCRAM = "SCRAM-SHA-256=[name=a,password=b]"


def binaries():
    """The plain build and the sanitizer build (asked to report leaks)."""
    assert os.path.exists(SAN_SLUICED), "%s: build it with make san-sluiced" % SAN_SLUICED
    return [(SLUICED, None), (SAN_SLUICED, dict(os.environ, ASAN_OPTIONS="detect_leaks=1"))]


def refused(args, says):
    """args exit 2 with says on stderr and no leak report, in both builds."""
    for binary, env in binaries():
        r = subprocess.run([binary] + args, capture_output=True, timeout=HANG_GUARD, env=env)
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 2 and says in err and "LeakSanitizer" not in err, (binary, args, r.returncode, err)


def cases(d, port):
    listen = ["--data-dir", os.path.join(d, "data"), "--listen", "127.0.0.1:%d" % port]
    return [
        (["--config"], "--config needs a file"),
        (["--config", os.path.join(d, "none.properties")], "none.properties"),
        (listen + ["--bogus", "1"], "unknown option '--bogus'"),
        (listen + ["--add-scram", SCRAM, "--bogus", "1"], "unknown option '--bogus'"),
        (listen + ["--set"], "--set needs a value"),
        (listen + ["--set", "noequals"], "expected KEY=VALUE"),
        (listen + ["--add-scram", SCRAM, "--set", "authorizer.class.name=x"], "authorizer.class.name"),
        (listen + ["--set", "native.listen=nohostport"], "native.listen"),
        (listen + ["--set", "process.roles=broker"], "controller.quorum.voters"),
        (listen + ["--add-scram", SCRAM, "--set", "listeners=SASL_PLAINTEXT://127.0.0.1:%d" % port, "--set",
                   "sasl.enabled.mechanisms=PLAIN"], "plain.sasl.jaas.config"),
        (listen + ["--set", "listeners=SSL://127.0.0.1:%d" % port, "--set",
                   "ssl.keystore.location=" + os.path.join(d, "none.pem")], "ssl.keystore.location"),
        (listen + ["--set", "dpdk.enable=true"], "dpdk.listen"),
        (["--data-dir", "/proc/none/data", "--listen", "127.0.0.1:%d" % port], "cannot create data directory"),
    ]


@test
def option_and_setting_errors_exit_2_with_nothing_left_behind():
    d = temp_dir()
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]   # unbound again before any case listens
        for args, says in cases(d, port):
            refused(args, says)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def a_held_port_exits_2_with_nothing_left_behind():
    d = temp_dir()
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            refused(["--data-dir", os.path.join(d, "data"), "--listen", "127.0.0.1:%d" % s.getsockname()[1]],
                    "Address already in use")
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def another_node_id_exits_2_with_nothing_left_behind():
    """The data directory of node 1 started as node 2: the control thread
    refuses it after the shards started; all of it is undone."""
    d = temp_dir()
    data = os.path.join(d, "data")
    try:
        p = subprocess.Popen([SLUICED, "--data-dir", data, "--listen", "127.0.0.1:0", "--shards", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            for line in p.stdout:
                if "listening on" in line:
                    break
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=HANG_GUARD) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
        refused(["--data-dir", data, "--listen", "127.0.0.1:0", "--shards", "1", "--node-id", "2"],
                "node.id: ")
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def a_cluster_of_the_sanitizer_build_stops_with_nothing_left_behind():
    assert os.path.exists(SAN_SLUICED), "%s: build it with make san-sluiced" % SAN_SLUICED
    with Cluster(3, shards=2, env={"SLUICED": SAN_SLUICED, "ASAN_OPTIONS": "detect_leaks=1"}) as c:
        create_topic(c.bootstrap, "leaks", 60, 3)
        wait_isrs(c.bootstrap, "leaks", 3)
        c.stop()
        for n in range(1, 4):
            log = c.log(n)
            assert "stopped cleanly" in log and "LeakSanitizer" not in log, \
                "node %d:\n%s" % (n, log[log.find("==ERROR") if "==ERROR" in log else -3000:][:3000])


if __name__ == "__main__":
    main("config exits")
