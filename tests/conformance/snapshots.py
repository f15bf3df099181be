"""Snapshots of a running session: a clone, and a collector's snapshot.

clone: a ring session (clone.cfg: sched, process_stats and an app's track
events) cloned by name while it runs, on tracegated (`tracegate record
--clone-by-name`) and on traced (`perfetto --clone-by-name`); the clone
and the session's own trace import with no error or data-loss stat. The
two services record at the same time.

collector: the same ring held by tracegate-collector on one host through
its relay, a snapshot taken over the collector's API; it imports with no
error or data-loss stat. Perfetto has no counterpart.
"""

import json
import os
import subprocess
import threading
import time
import urllib.request

import tracecheck
from harness import Stack, Timeout, wait_until

SESSION = "conformance_clone"
CLONE_AFTER_S = 3  # the ring holds this much when it is cloned


def _app(h, tools, stack):
    # An app writing track events on 2 threads: writers whose chunks the
    # clone takes while they are being filled.
    stack.procs.append(h.spawn(
        [tools.emit, "--socket", stack.psock, "--name", "conformance-app",
         "--track-events", "--threads", "2", "--rate", "1000"],
        os.path.join(stack.dir, "app.log"), env=stack.env()))


def _verdict(tools, workdir, traces):
    """(ok, text, problems) for traces imported with no error or data-loss
    stat; problems: one "FILE: STAT[IDX]=VALUE" (or why it did not
    import) each."""
    bad = []
    for t in traces:
        name = os.path.basename(t)
        try:
            _, stats, _ = tracecheck.inspect(tools, t, workdir)
        except tracecheck.ImportError_ as e:
            bad.append("%s: %s" % (name, e))
            continue
        bad += ["%s: %s=%d" % (name, k, v) for k, v in sorted(stats.items())]
    return (not bad, "; ".join(bad) or "clean", bad)


def clone_one(h, tools, here, workdir, ours, duration_s):
    os.makedirs(workdir, exist_ok=True)
    final = os.path.join(workdir, "session.pftrace")
    clone = os.path.join(workdir, "clone.pftrace")
    with open(os.path.join(here, "clone.cfg")) as f:
        text = f.read().replace("DURATION_MS", str(duration_s * 1000))
    cfg = os.path.join(workdir, "clone.cfg")
    with open(cfg, "w") as f:
        f.write(text)
    if ours:
        stack = Stack(h, tools, workdir, "tracegated", "tracegate-probes")
        rec = [tools.cli, "record", "--socket", stack.csock, "-c", cfg,
               "--txt", "-o", final]
        snap = [tools.cli, "record", "--socket", stack.csock,
                "--clone-by-name", SESSION, "-o", clone]
    else:
        stack = Stack(h, tools, workdir, "traced", "traced_probes")
        rec = [tools.perfetto_bin("perfetto"), "--txt", "-c", cfg, "-o", final]
        snap = [tools.perfetto_bin("perfetto"), "--clone-by-name", SESSION,
                "-o", clone]
    try:
        stack.start()
        _app(h, tools, stack)
        recorder = h.spawn(rec, os.path.join(workdir, "record.log"),
                           env=stack.env())
        wait_until("the session to start",
                   lambda: stack.sessions_started() >= 1, 30, 0.1)
        time.sleep(CLONE_AFTER_S)
        rc = h.run(snap, os.path.join(workdir, "clone.log"), 60,
                   env=stack.env())
        try:
            rrc = recorder.wait(timeout=duration_s + 60)
        except subprocess.TimeoutExpired:
            rrc = "timeout"
    except Timeout as e:
        return False, "setup: %s" % e, []
    finally:
        stack.stop()
    if rc != 0:
        return False, "clone exit %s" % rc, ["clone exit %s" % rc]
    if rrc != 0:
        return False, "record exit %s" % rrc, ["record exit %s" % rrc]
    return _verdict(tools, workdir, (clone, final))


def run_clone(h, tools, here, work, duration_s, results):
    # Both at the same time, as the configs (configs.py says why): the
    # kernel's ftrace loss depends on how busy the machine is.
    out = {}

    def one(who, ours):
        try:
            out[who] = clone_one(h, tools, here, os.path.join(work, who),
                                 ours, duration_s)
        except Exception as e:  # reported in the row, not lost in a thread
            out[who] = (False, "setup: %s" % e, [])
    threads = [threading.Thread(target=one, args=a)
               for a in (("perfetto", False), ("ours", True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ours, theirs = out["ours"], out["perfetto"]
    results.add("snapshot/clone", _result(ours), ours[1],
                theirs[1], "" if theirs[0] else "Perfetto's is not clean",
                problems=ours[2])


def _result(outcome):
    ok, text = outcome[:2]
    return "pass" if ok else "error" if text.startswith("setup:") else "fail"


def _api(method, url, out=None, timeout=120):
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read()
    if out:
        with open(out, "wb") as f:
            f.write(body)
        return None
    return json.loads(body)


def collector_one(h, tools, here, work):
    os.makedirs(work, exist_ok=True)
    certs = os.path.join(work, "certs")
    tg_certs = os.path.join(tools.top, "deploy", "certs", "tg-certs")
    for args in (["ca", certs], ["host", certs, "localhost", "--ip",
                                 "127.0.0.1"],
                 ["client", certs, "conformance", "--role", "record"]):
        subprocess.run([tg_certs] + args, check=True, capture_output=True,
                       timeout=60)
    stack = Stack(h, tools, work, "tracegated", "tracegate-probes")
    try:
        stack.start()
        _app(h, tools, stack)
        p, port = h.spawn_ready(
            [tools.relay, "--listen", "127.0.0.1:0", "--consumer-socket",
             stack.csock, "--cert", os.path.join(certs, "localhost.pem"),
             "--key", os.path.join(certs, "localhost.key"),
             "--ca", os.path.join(certs, "ca.pem"),
             "--authz", os.path.join(certs, "authz"), "--log-level", "warn"],
            os.path.join(work, "relay.log"))
        stack.procs.append(p)
        with open(os.path.join(work, "hosts"), "w") as f:
            f.write("localhost:%s\n" % port[0])
        with open(os.path.join(here, "clone.cfg")) as f:
            ring = f.read().replace("DURATION_MS", "0")
        with open(os.path.join(work, "ring.pbtxt"), "w") as f:
            f.write(ring.replace('unique_session_name: "%s"' % SESSION, ""))
        with open(os.path.join(work, "collector.conf"), "w") as f:
            f.write("hosts = hosts\nca = certs/ca.pem\n"
                    "cert = certs/conformance.pem\nkey = certs/conformance.key\n"
                    "trace_config = ring.pbtxt\nstore = store\n"
                    "listen = 127.0.0.1:0\n")
        p, port = h.spawn_ready(
            [tools.collector, "--config",
             os.path.join(work, "collector.conf"), "--log-level", "warn"],
            os.path.join(work, "collector.log"))
        stack.procs.append(p)
        url = "http://127.0.0.1:%s" % port[0]
        wait_until("the collector's ring to trace", lambda: [
            x["state"] for x in _api("GET", url + "/api/v1/hosts")["hosts"]
        ] == ["tracing"], 30, 0.2)
        time.sleep(CLONE_AFTER_S)
        snap = _api("POST", url + "/api/v1/snapshots?reason=conformance&wait=1")
        sid = snap["snapshot"]["id"] if "snapshot" in snap else snap["id"]
        trace = os.path.join(work, "snapshot.pftrace")
        _api("GET", "%s/api/v1/snapshots/%s/trace" % (url, sid), out=trace)
    except (Timeout, OSError, ValueError, KeyError) as e:
        return False, "setup: %s" % e, []
    finally:
        stack.stop()  # the collector, the relay, the app, then the stack
    return _verdict(tools, work, (trace,))


def run_collector(h, tools, here, work, results):
    ok, text, problems = collector_one(h, tools, here, work)
    results.add("snapshot/collector", _result((ok, text)), text, "-",
                "Perfetto has no collector", problems=problems)
