#!/usr/bin/python3
"""bench/admin_basic.py — what HTTP Basic costs the admin endpoint: requests
per second a dashboard's scrapes get from /metrics (and /v1/health, whose
answer costs little beside the check) with admin.require.auth=true and a
SCRAM user's password (docs/security.md "The admin endpoint").

    bench/admin_basic.py [--sluiced PATH] [--seconds 5] [--iterations 4096]
                         [--path /metrics] [--no-auth]

Starts one broker (a temporary directory, one shard, the admin endpoint on a
free loopback port, the user made with --add-scram at that iteration count),
then asks the path as fast as one keep-alive HTTP connection goes for the
given seconds, each request with the same Authorization header, and prints
requests/s. --no-auth: the same without admin.require.auth (the answer's
own cost). Compare two builds with --sluiced (the broker before a change, and
after). The broker and its directory go at the end.
"""
import argparse
import base64
import http.client
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sluiced", default=os.environ.get("SLUICED", os.path.join(HERE, "build", "sluiced")))
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--iterations", type=int, default=4096)
    ap.add_argument("--path", default="/metrics")
    ap.add_argument("--no-auth", action="store_true")
    a = ap.parse_args()
    os.environ["SLUICED"] = a.sluiced
    sys.path.insert(0, os.path.join(HERE, "tests", "integration"))
    from harness import broker   # noqa: E402 (SLUICED read at import)

    settings = {} if a.no_auth else {"admin.require.auth": "true"}
    args = ["--add-scram", "SCRAM-SHA-512=[name=dash,iterations=%d,password=dash-secret]" % a.iterations]
    with broker(admin=True, shards=1, settings=settings, args=args) as b:
        hdr = {"Authorization": "Basic " + base64.b64encode(b"dash:dash-secret").decode()}
        conn = http.client.HTTPConnection("127.0.0.1", b.admin, timeout=30)
        n, t0 = 0, time.monotonic()
        end = t0 + a.seconds
        while time.monotonic() < end:
            conn.request("GET", a.path, headers=hdr)
            r = conn.getresponse()
            r.read()
            if r.status not in (200, 503):
                raise SystemExit("HTTP %d from %s" % (r.status, a.path))
            n += 1
        dt = time.monotonic() - t0
        conn.close()
    print("%s %s (%s, %d iterations): %d requests in %.1f s: %.0f requests/s" % (
        a.sluiced, a.path, "no auth" if a.no_auth else "Basic", a.iterations, n, dt, n / dt))


if __name__ == "__main__":
    main()
