#!/usr/bin/env python3
"""make collector-demo (deploy/demo/collector-demo.sh), run as a newcomer
runs it: the web page's URL it prints must answer while the demo says it
is up.

  1. From a terminal (a pty): the URL is printed, the collector answers
     GET /healthz with 200 until Enter, and after Enter the demo exits 0
     and the collector is gone.
  2. Input not a terminal (/dev/null): the demo exits 0 on its own, names
     DEMO_HOLD=1 as the way to keep the page up, and stops the collector.
  3. After each run, with PERFETTO_BIN (Perfetto's trace_processor_shell):
     the snapshot it saved holds the requests between its hosts, rpc.call
     slices (host2's client) and rpc.serve slices (host1's server), with
     arrows (trace processor's flow rows) from the first to the second.

usage: demo_check.py SCRIPT BUILD_DIR. Exit 0: both held; 1: a check
failed (said on stderr); 2: usage.
"""
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

RUN_S = 240  # the demo's own waits are bounded well inside this
URL_RE = re.compile(rb"(http://127\.0\.0\.1:\d+)/")
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class CheckFailed(Exception):
    pass


SNAPSHOT = "demo-fleet-snapshot.pftrace"
RPC_SQL = ("select name, count(*) as n from slice where category = 'rpc' "
           "group by name union all select 'arrows', count(*) from flow f "
           "join slice o on f.slice_out = o.id join slice i on f.slice_in = "
           "i.id where o.name = 'rpc.call' and i.name = 'rpc.serve' "
           "order by name;\n")


def rpc_slices(cwd, run):
    """The rpc.call and rpc.serve slices of the snapshot the demo saved in
    cwd, counted by trace processor; a note when PERFETTO_BIN is unset."""
    tp_dir = os.environ.get("PERFETTO_BIN")
    if not tp_dir:
        return "%s: rpc slices not checked (PERFETTO_BIN not set)" % run
    trace = os.path.join(cwd, SNAPSHOT)
    if not os.path.exists(trace):
        raise CheckFailed("%s: the demo saved no %s" % (run, SNAPSHOT))
    sql = os.path.join(cwd, "rpc.sql")
    with open(sql, "w") as f:
        f.write(RPC_SQL)
    p = subprocess.run([os.path.join(tp_dir, "trace_processor_shell"), "-q",
                        sql, trace], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, timeout=120)
    if p.returncode != 0:
        raise CheckFailed("%s: trace processor failed on %s (%d)"
                          % (run, SNAPSHOT, p.returncode))
    counts = {}
    for line in p.stdout.decode().splitlines()[1:]:
        name, n = line.rsplit(",", 1)
        counts[name.strip('"')] = int(n)
    if not counts.get("rpc.call") or not counts.get("rpc.serve"):
        raise CheckFailed("%s: the snapshot holds no requests between the "
                          "hosts: %r" % (run, counts))
    # The client is on one host and the server on the other: an arrow
    # means trace processor joined a flow across hosts (docs/merge.md,
    # "Links across hosts"). A ring's edge may cut a few requests.
    if not counts.get("arrows"):
        raise CheckFailed("%s: no arrow from an rpc.call to an rpc.serve "
                          "slice across the hosts: %r" % (run, counts))
    return ("%s: the snapshot holds %d rpc.call and %d rpc.serve slices, "
            "%d arrows between them" % (run, counts["rpc.call"],
                                        counts["rpc.serve"], counts["arrows"]))


def healthz(url):
    """The status of GET url/healthz, or None when nothing answers."""
    try:
        with _opener.open(url + "/healthz", timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def from_a_terminal(script, build, cwd):
    master, slave = pty.openpty()
    p = subprocess.Popen(["sh", script, build], stdin=slave, stdout=slave,
                         stderr=slave, cwd=cwd, start_new_session=True)
    os.close(slave)
    out = b""
    end = time.monotonic() + RUN_S
    try:
        while b"Press Enter" not in out:
            left = end - time.monotonic()
            if left <= 0 or p.poll() is not None:
                raise CheckFailed("terminal: the demo %s before asking for Enter:\n%s"
                                  % ("exited (%s)" % p.returncode if p.poll() is not None
                                     else "timed out", out.decode(errors="replace")))
            if select.select([master], [], [], min(left, 1))[0]:
                try:
                    out += os.read(master, 65536)
                except OSError:
                    pass
        m = URL_RE.search(out)
        if not m:
            raise CheckFailed("terminal: no URL printed:\n%s" % out.decode(errors="replace"))
        url = m.group(1).decode()
        status = healthz(url)
        if status != 200:
            raise CheckFailed("terminal: %s/healthz answered %r while the demo waits"
                              " for Enter" % (url, status))
        os.write(master, b"\n")
        rc = p.wait(timeout=60)
        if rc != 0:
            raise CheckFailed("terminal: the demo exited %d after Enter" % rc)
        if healthz(url) is not None:
            raise CheckFailed("terminal: the collector still answers after the demo")
        return "terminal: %s up until Enter, then stopped; exit 0" % url
    finally:
        if p.poll() is None:
            os.killpg(p.pid, 9)
            p.wait()
        os.close(master)


def without_a_terminal(script, build, cwd):
    env = dict(os.environ)
    env.pop("DEMO_HOLD", None)
    p = subprocess.run(["sh", script, build], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                       env=env, timeout=RUN_S, start_new_session=True)
    out = p.stdout
    if p.returncode != 0:
        raise CheckFailed("no terminal: the demo exited %d:\n%s"
                          % (p.returncode, out.decode(errors="replace")))
    m = URL_RE.search(out)
    if not m:
        raise CheckFailed("no terminal: no URL printed:\n%s" % out.decode(errors="replace"))
    if b"DEMO_HOLD=1" not in out:
        raise CheckFailed("no terminal: the demo stopped without naming DEMO_HOLD=1:\n%s"
                          % out.decode(errors="replace"))
    url = m.group(1).decode()
    if healthz(url) is not None:
        raise CheckFailed("no terminal: the collector still answers after the demo")
    return "no terminal: exit 0, DEMO_HOLD=1 named, %s stopped" % url


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    script, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="tg-demo-check-") as cwd:
        try:
            print("demo_check: " + from_a_terminal(script, build, cwd))
            print("demo_check: " + rpc_slices(cwd, "terminal"))
            # The second run must save its own.
            if os.path.exists(os.path.join(cwd, SNAPSHOT)):
                os.remove(os.path.join(cwd, SNAPSHOT))
            print("demo_check: " + without_a_terminal(script, build, cwd))
            print("demo_check: " + rpc_slices(cwd, "no terminal"))
        except (CheckFailed, subprocess.TimeoutExpired) as e:
            print("demo_check: FAILED: %s" % e, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
