"""Harness for the client integration suites (kcat, kafka-python, kafkajs).

Each test gets its own broker process (build/sluiced, or $SLUICED) on a free
loopback port with its own data directory under $SLUICE_TEST_DIR (default
/var/tmp). Readiness is the broker's "listening on HOST:PORT" line on stdout;
nothing sleeps and hopes.

    from harness import broker, test, skip, main

    @test
    def produce_then_consume():
        with broker() as b:          # started, stopped (SIGTERM, exit 0 checked), removed
            run(["kcat", "-b", b.bootstrap, ...])

    if __name__ == "__main__":
        main("kcat")

Waits carry a generous hang guard (HANG_GUARD seconds) so that a hung broker
or client fails the test instead of hanging `make test`; it is not a timing
threshold and nothing is measured against it.
"""

import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SLUICED = os.environ.get("SLUICED", os.path.join(REPO, "build", "sluiced"))
# sluicectl: $SLUICECTL, else the one beside SLUICED, else this build's (a
# sanitizer build of sluiced, SLUICED=build/san/sluiced, has none beside it)
SLUICECTL = os.environ.get("SLUICECTL") or next(
    (p for p in (os.path.join(os.path.dirname(SLUICED), "sluicectl"),) if os.path.exists(p)),
    os.path.join(REPO, "build", "sluicectl"))
TEST_DIR = os.environ.get("SLUICE_TEST_DIR", "/var/tmp")
HANG_GUARD = float(os.environ.get("SLUICE_HANG_GUARD", "120"))
READY_RE = re.compile(r"listening on (\S+):(\d+)")


class BrokerError(Exception):
    pass


# what sluiced's refusal of a port another process holds says (exit 2)
PORT_TAKEN = ("already in use", "held by another process", "another process holds")


def free_port():
    """A loopback port nobody holds right now, picked at random below the
    kernel's ephemeral range (ip_local_port_range): no other process's
    connect() or bind to port 0 is handed it meanwhile, which is what took
    the ports bind(0) gave us while another lane of make test ran. Another
    test's pick may still take it: the broker then exits 2 naming the port,
    and Broker.start() and broker() pick again."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    if low > 2048:
        rnd = random.SystemRandom()
        for _ in range(200):
            port = rnd.randrange(max(1024, low - 12000), low)
            if port_bindable(port):
                return port
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def port_bindable(port):
    """True when a listener could bind the port now (SO_REUSEADDR, like the
    broker's own check: TIME_WAIT leftovers do not count)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_port_free(port):
    """After a SIGKILL the kernel tears the dead broker's io_uring down
    asynchronously, and the listening socket it references stays bound for
    a few milliseconds after waitpid() returned; a restart on the same port
    waits for that (polling the condition, under the hang guard)."""
    deadline = time.monotonic() + HANG_GUARD
    while not port_bindable(port):
        if time.monotonic() > deadline:
            raise BrokerError("port %d still held (hang guard)" % port)
        time.sleep(0.005)


def temp_dir(prefix="sluice-itpy-"):
    return tempfile.mkdtemp(prefix=prefix, dir=TEST_DIR)


class Broker:
    """One sluiced process. start/stop/kill/restart; the data directory and
    the port survive a restart."""

    def __init__(self, workdir, shards=2, settings=None, port=None, nofile=None, args=None):
        self.workdir = workdir
        self.args = list(args or [])   # more sluiced arguments (--add-scram ...)
        self.nofile = nofile    # RLIMIT_NOFILE (soft and hard) of the broker, or inherited
        self.data_dir = os.path.join(workdir, "data")
        self.shards = shards
        self.settings = dict(settings or {})
        self.port = port
        self.host = "127.0.0.1"
        self.proc = None
        self.ready_line = None
        self.starts = 0
        self._drain = None

    @property
    def bootstrap(self):
        return "%s:%d" % (self.host, self.port)

    @property
    def log_path(self):
        return os.path.join(self.workdir, "sluiced-%d.log" % self.starts)

    def log_tail(self, n=30):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return "(no log)"

    def _spawn(self, port):
        self.starts += 1
        cmd = [SLUICED, "--data-dir", self.data_dir, "--listen", "127.0.0.1:%d" % port,
               "--shards", str(self.shards)]
        for k, v in self.settings.items():
            cmd += ["--set", "%s=%s" % (k, v)]
        cmd += self.args
        log = open(self.log_path, "wb")
        try:
            pre = None
            if self.nofile:
                import resource
                pre = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))  # noqa: E731
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                    preexec_fn=pre)
        finally:
            log.close()
        # read stdout up to the ready line, or EOF (the broker exited)
        deadline = time.monotonic() + HANG_GUARD
        buf = b""
        fd = proc.stdout.fileno()
        while True:
            nl = buf.find(b"\n")
            if nl >= 0:
                line, buf = buf[:nl].decode("utf-8", "replace"), buf[nl + 1:]
                m = READY_RE.search(line)
                if m:
                    if int(m.group(2)) != port:
                        proc.kill()
                        proc.wait()
                        raise BrokerError("broker says %r, asked for port %d" % (line, port))
                    self.ready_line = line
                    break
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                proc.kill()
                proc.wait()
                raise BrokerError("no 'listening on' line within the hang guard; log:\n" + self.log_tail())
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    rc = proc.wait()
                    return rc, None
                buf += chunk
        # keep draining stdout so the broker never blocks on a full pipe
        def drain(f):
            for _ in iter(lambda: f.read(4096), b""):
                pass
        self._drain = threading.Thread(target=drain, args=(proc.stdout,), daemon=True)
        self._drain.start()
        return None, proc

    def start(self):
        assert self.proc is None, "already running"
        os.makedirs(self.workdir, exist_ok=True)
        tries = 0
        while True:
            if self.port is not None:
                wait_port_free(self.port)
            port = self.port or free_port()
            rc, proc = self._spawn(port)
            if proc:
                self.proc, self.port = proc, port
                return self
            tries += 1
            # exit 2 = the port is taken (a race with another process for a
            # fresh port): pick another, unless the port was fixed (restart)
            if rc == 2 and self.port is None and tries < 5:
                continue
            e = BrokerError("sluiced exited %s before it was ready; log:\n%s" % (rc, self.log_tail()))
            e.port_taken = rc == 2 and any(m in str(e) for m in PORT_TAKEN)
            raise e

    def _wait(self):
        try:
            return self.proc.wait(timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise BrokerError("sluiced did not exit after SIGTERM (hang guard); log:\n" + self.log_tail())
        finally:
            self.proc.stdout.close()
            self.proc = None

    def stop(self):
        """SIGTERM; the broker must exit 0 ("stopped cleanly")."""
        assert self.proc is not None, "not running"
        self.proc.send_signal(signal.SIGTERM)
        rc = self._wait()
        if rc != 0:
            raise BrokerError("sluiced exited %d after SIGTERM; log:\n%s" % (rc, self.log_tail()))

    def kill(self):
        """SIGKILL: a crash, as far as the data directory can tell."""
        assert self.proc is not None, "not running"
        self.proc.send_signal(signal.SIGKILL)
        self._wait()

    def restart(self, hard=False):
        """Stop (SIGTERM, or SIGKILL when hard) and start again on the same
        port and data directory."""
        if self.proc is not None:
            self.kill() if hard else self.stop()
        return self.start()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None


class broker:
    """Context manager: a fresh temp dir and a started broker; on exit the
    broker is stopped (a broker that does not exit 0 on SIGTERM fails the
    test) and the directory removed.

    A broker with security: `listeners` names more listeners (SSL,
    SASL_PLAINTEXT, SASL_SSL) beside the PLAINTEXT one it is started and
    awaited on, each on a free loopback port, b.addr[name] its
    "127.0.0.1:port"; `admin` adds an admin endpoint (its port b.admin).
    The rest (settings, args, shards) goes to Broker; settings win."""

    def __init__(self, listeners=(), admin=False, **kw):
        self.listeners, self.admin, self.kw = listeners, admin, kw
        self.b = None

    def __enter__(self):
        for tries in range(1, 6):
            kw, addr, admin = dict(self.kw), {}, None
            if self.listeners or self.admin:
                port = free_port()
                addr = {name: "127.0.0.1:%d" % free_port() for name in self.listeners}
                s = {"listeners": ",".join(["PLAINTEXT://127.0.0.1:%d" % port] +
                                           ["%s://%s" % (name, a) for name, a in addr.items()])}
                if self.admin:
                    admin = free_port()
                    s["admin.listen"] = "127.0.0.1:%d" % admin
                s.update(kw.get("settings") or {})
                kw.update(settings=s, port=port)
            self.b = Broker(temp_dir(), **kw)
            self.b.addr, self.b.admin = addr, admin
            try:
                self.b.start()
                return self.b
            except BrokerError as e:
                shutil.rmtree(self.b.workdir, ignore_errors=True)
                # a port picked here, taken by another process before the
                # broker bound it (exit 2 naming it): pick them all again
                if not (getattr(e, "port_taken", False) and (self.listeners or self.admin) and tries < 5):
                    raise
            except BaseException:
                shutil.rmtree(self.b.workdir, ignore_errors=True)
                raise

    def __exit__(self, et, ev, tb):
        try:
            if self.b.proc is not None:
                if et is None:
                    self.b.stop()
                else:
                    # the test failed: say whether the broker was still
                    # running and what it last logged, before its
                    # directory goes (a CI log is all there is to read)
                    rc = self.b.proc.poll()
                    print("-- the broker (port %s) %s; its log ends:\n%s"
                          % (self.b.port, "was running" if rc is None else "had exited %d" % rc,
                             self.b.log_tail()), flush=True)
                    self.b.kill()
        finally:
            shutil.rmtree(self.b.workdir, ignore_errors=True)
        return False


def make_ca(d, name):
    """A test CA made with the openssl CLI in directory d: name.pem,
    name.key (subject /CN=name)."""
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=" + name], cwd=d)


def make_cert(d, ca, name, subj, san=None):
    """A certificate of CA ca (make_ca) for subj, with the subjectAltName
    san when given, in directory d: name.pem, name.key, and both in
    name.keystore.pem."""
    def openssl(*args):
        run(["openssl"] + list(args), cwd=d)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", name + ".key",
            "-out", name + ".csr", "-subj", subj)
    args = ["x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key", "-set_serial",
            str(int(time.time() * 1000) % 1000000007), "-out", name + ".pem", "-days", "2"]
    if san:
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write("subjectAltName=%s\n" % san)
        args += ["-extfile", name + ".ext"]
    openssl(*args)
    with open(os.path.join(d, name + ".keystore.pem"), "w") as out:
        for part in (name + ".pem", name + ".key"):
            with open(os.path.join(d, part)) as f:
                out.write(f.read())


def make_tls_certs(d):
    """Test certificates in directory d: a CA (ca.pem, ca.key) and the
    broker's certificate for localhost and 127.0.0.1 (broker.pem,
    broker.key, and both in broker.keystore.pem). Returns d."""
    make_ca(d, "ca")
    make_cert(d, "ca", "broker", "/CN=localhost", "DNS:localhost,IP:127.0.0.1")
    return d


def run(cmd, input=None, check=True, env=None, cwd=None):
    """Run a client command under the hang guard; returns CompletedProcess
    with bytes stdout/stderr; raises AssertionError on a non-zero exit when
    check."""
    try:
        p = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=HANG_GUARD, env=env, cwd=cwd)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("%s: hung (hang guard %.0f s); stderr:\n%s"
                             % (" ".join(cmd), HANG_GUARD, (e.stderr or b"").decode("utf-8", "replace")))
    if check and p.returncode != 0:
        raise AssertionError("%s: exit %d; stderr:\n%s" % (" ".join(cmd), p.returncode,
                                                            p.stderr.decode("utf-8", "replace")))
    return p


# ---- a tiny test runner ----------------------------------------------------

_TESTS = []


class Skip(Exception):
    pass


def skip(reason):
    raise Skip(reason)


def test(fn):
    _TESTS.append(fn)
    return fn


def main(suite):
    """Run the registered tests (or those named on the command line), print
    one line per test and a closing "N passed, N failed[, N skipped]" line;
    exit 1 on any failure."""
    names = sys.argv[1:]
    todo = [t for t in _TESTS if not names or t.__name__ in names]
    unknown = set(names) - {t.__name__ for t in _TESTS}
    passed = failed = skipped = 0
    start = time.monotonic()
    for t in todo:
        t0 = time.monotonic()
        try:
            t()
        except Skip as e:
            skipped += 1
            print("SKIP %s: %s" % (t.__name__, e), flush=True)
            continue
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            failed += 1
            print("FAIL %s" % t.__name__, flush=True)
            traceback.print_exc(file=sys.stdout)
            sys.stdout.flush()
            continue
        passed += 1
        print("ok   %s (%.1f s)" % (t.__name__, time.monotonic() - t0), flush=True)
    for n in sorted(unknown):
        failed += 1
        print("FAIL %s: no such test" % n)
    line = "%s: %d passed, %d failed" % (suite, passed, failed)
    if skipped:
        line += ", %d skipped" % skipped
    print("%s: %d tests in %.1f s" % (suite, len(todo), time.monotonic() - start))
    print(line, flush=True)
    sys.exit(1 if failed or not (passed + skipped) else 0)
