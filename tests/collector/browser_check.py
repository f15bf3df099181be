#!/usr/bin/env python3
"""tracegate-collector's web page, checked in a real headless Chromium.

Drives Chromium through chromedriver's W3C WebDriver HTTP protocol with
nothing but the standard library (urllib + json): no selenium, no npm.
Everything is on loopback, every wait is bounded, and what the script
starts (chromedriver, Chromium through the WebDriver session, the stand-in
UI server) is stopped in a finally block, on failure too.

Checks, each a separate assertion that names what differed:
  1. page: / loads, app.js runs (body[data-loaded=1]) and style.css
     applies, under the page's CSP;
     the snapshots table lists the snapshot, "complete", hosts "2/2"; a
     failed snapshot (when given) with no hosts or size and its failure
     text from the API in its row; the hosts table lists each host,
     "tracing".
  2. download: the row's a.download saves tracegate-<id>.pftrace, byte for
     byte the file the test fetched from the API (sha256).
  3. open-ui: the row's button.open-ui opens the configured UI URL (a
     second origin, served here: a stand-in for the Perfetto UI that speaks
     its postMessage protocol: 'PING' -> 'PONG', then {perfetto: {buffer,
     title, fileName}}); the buffer that arrives is the snapshot's bytes,
     the title names the snapshot. The stand-in accepts only messages from
     the collector's origin and from its opener, as the UI does, and
     counts the others: none while the page talks to it, and a forged
     message from another origin is counted and changes nothing.
  4. console: no error in the browser's console (a CSP violation, an
     uncaught exception) but the favicon's 404.
Checks 5 to 13 are in browser_screen.py.
  5. layout, in a 1280x800 window: every column of every table (a
     snapshot's detail's too) has its right edge within the window, no
     column is squeezed to nothing, the page does not scroll sideways,
     and a row's download link and Open button lie inside their cell.
  6. cut: the partial snapshot's long reason is cut to its cell (wider
     than it), its title and text are the API's whole reason, and a click
     opens it whole (no longer cut) with the table still within the
     window.
  7. times: every time cell reads "YYYY-MM-DD hh:mm:ss ZONE" (ZONE "UTC"
     or "+hh:mm"), uncut; Chromium runs with TZ=Asia/Kolkata, and the
     complete snapshot's time is the API's started_ms in that zone,
     "+05:30".
  8. partial: under the partial snapshot's row, each host the API says
     failed is named with its error (the API's text), and no other host;
     the snapshot's detail lists every host with the API's outcome, a
     window with its zone for a host with data, and a per-host download
     (?host=) and Open for it, none for the failed host.
  9. filters: state, trigger and host, set through the form, load the list
     the API gives for the same arguments (the same ids, in order), a
     filter matching nothing says so, and Clear lists everything again.
  9b. per-host: where the API takes ?host=, the partial snapshot's detail's
     download and Open for its host that has data give the API's bytes
     for that host (said as not checked where the API refuses ?host=).
 10. problems: a host's name and a data source's problem, as the API
     gives them, rendered by the page's own functions in the hosts table
     and in a snapshot's detail: the name shown for the host, the problem
     with its code, data source and why, in red, cut in its cell.
 10a. boost: the complete snapshot's detail shows each host's perf boost
     as the API gives it (a real one: sharp, its rate and samples, green,
     in the cell's data-boost) and the snapshot's symbols state; a sharp window (span, rate, samples, start with its
     zone), a held one (by which snapshot), a failure and failed symbols
     whose texts are markup, and done symbols' counts, rendered by the
     page's own functions: every text stays text, no element made. The
     same detail shows each host's requests (started, ended, unmatched)
     and the snapshot's requests across hosts as the API's links count
     them.
 10c. diff: a host's "peers" in the complete snapshot's detail asks the
     API for its differential profile (these hosts have no samples: the
     refusal is shown); a diff rendered by the page's own diffInto(): the
     function rows in the API's order with their shares and samples,
     grown red and shrunk blue, a flame box per call path coloured by its
     difference, within the window, names made of markup kept as text.
 10d. diff history: the diff view's control switches it to the host's
     own last N snapshots: "its last 5 snapshots" asks the API for
     against=history&n=5 (its refusal shown, the control kept); a history
     answer (a stand-in for the page's fetch) drawn with its rows in order,
     its head saying it is against the host's own earlier snapshots, the
     snapshots used and skipped, markup kept as text, within the window,
     and kept (not asked again) over the list's refresh; a 400 shown as
     errors are; "other hosts" asks for the peers again.
 10b. store: the bucket's line (#store, /api/v1/store) rendered by the
     page's storeLine(): hidden for a directory store, shown in red with
     the state, the method, the HTTP status and S3's code for a failing
     bucket, hidden again once it answers.
 11. ui-silent: with the stand-in answering no PING, "Open in Perfetto UI"
     says so in #status (data-open="silent") within a bound, after the
     stand-in saw PINGs, and offers the snapshot's download.
 12. ui-unreachable: with the stand-in's port closed, "Open" says so
     (data-open="unreachable") within a bound, and the download it offers
     saves the snapshot's bytes.
 13. console again: no error but the favicon's, those about the closed
     UI's address and the diff's 409 for a host without samples.

TG_BROWSER_SCREENSHOT=PATH in the environment saves a PNG of the page at
1280x800 (the partial snapshot's detail open) to PATH, and one with the
unreachable UI's message to PATH with "-offline" before ".png", and one
of a host against its last 10 snapshots (check 10d) with "-history", for
a person to look at.

Protocol with the test (race-free: the UI port is known before the
collector's config is written):
  - the script binds the stand-in on 127.0.0.1:0 and writes
    "ui-port <port>\\n" to --ready-fd (stdout without it); the collector's
    config then gets ui_url = http://127.0.0.1:<port>/ui.html;
  - it then reads one JSON line on stdin (unless --url is given):
    {"url": "http://127.0.0.1:PORT", "snapshot": "<16 hex>",
     "trace": "<path of the API's download>", "hosts": ["<host>", ...],
     "failed": "<16 hex>", "partial": "<16 hex>", "down": "<host>"}
    (failed, partial and down optional: checks 6 to 9 need partial and
    down, the host that failed in it)
  - it exits 0 when every check passed (printing what it checked), 1 on a
    failed check, 2 on a usage or setup error.

By hand: browser_check.py --ui-port 8099 --url http://127.0.0.1:8080 \\
    --snapshot ID --trace FILE --host 127.0.0.1:7001 --host ...
(with the collector's ui_url at http://127.0.0.1:8099/ui.html).
"""
import argparse
import ctypes
import hashlib
import http.server
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

PAGE_WAIT_S = 20       # each wait in the browser
CLICK_WAIT_S = 10      # an element to click coming back after a redraw
ZONE = "Asia/Kolkata"  # Chromium's TZ: an offset that is not whole hours
DRIVER_START_S = 15    # chromedriver's "started successfully" line
STDIN_WAIT_S = 120     # the test's JSON line
HTTP_TIMEOUT_S = 30    # one WebDriver command
ELEMENT_KEY = "element-6066-11e4-a52e-4f735466cecf"

# No request may leave loopback: Chromium's background services resolve
# names, and every name but 127.0.0.1 fails here.
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu",
    "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
    "--no-proxy-server", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps",
    "--disable-domain-reliability", "--disable-client-side-phishing-detection",
    "--disable-features=Translate,OptimizationHints,MediaRouter",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--window-size=1280,800",
]


class CheckFailed(Exception):
    """A check saw something other than what it wants."""


class WebDriverError(Exception):
    """chromedriver answered a command with an error."""


def check(cond, what):
    if not cond:
        raise CheckFailed(what)


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# The stand-in for the Perfetto UI: the UI's side of the handshake
# (ui/src/frontend/post_message_handler.ts), recording what arrives in its
# body's dataset. Served with an inline script: it is ours, not the page
# under test.
STAND_IN = """<!doctype html>
<html><head><meta charset="utf-8"><title>Perfetto UI stand-in</title></head>
<body data-ignored="0" data-malformed="0" data-pings="0">
<p>Perfetto UI stand-in</p>
<script>
'use strict';
const trusted = %s;
const d = document.body.dataset;
const bump = (k) => { d[k] = String(Number(d[k]) + 1); };
window.addEventListener('message', async (e) => {
  // As the UI: only its opener is heard (post_message_handler.ts).
  if (e.origin !== trusted || e.source !== window.opener) { bump('ignored'); return; }
  if (e.data === 'PING') {
    bump('pings');
    e.source.postMessage('PONG', e.origin);
    return;
  }
  const p = e.data && e.data.perfetto;
  if (!p || !(p.buffer instanceof ArrayBuffer)) { bump('malformed'); return; }
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', p.buffer));
  d.title = String(p.title);
  d.fileName = String(p.fileName);
  d.len = String(p.buffer.byteLength);
  d.sha256 = Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
});
</script></body></html>
"""


# A UI that loads but never answers: it counts the PINGs it hears.
STAND_IN_SILENT = """<!doctype html>
<html><head><meta charset="utf-8"><title>silent stand-in</title></head>
<body data-pings="0"><p>a page that is not the Perfetto UI</p>
<script>
'use strict';
window.addEventListener('message', (e) => {
  if (e.data === 'PING') document.body.dataset.pings = String(Number(document.body.dataset.pings) + 1);
});
</script></body></html>
"""


class StandIn:
    """The stand-in UI on 127.0.0.1:|port| (0: any), in a thread; with
    |silent| set, a page that never answers."""

    def __init__(self, port):
        self.trusted_origin = None  # set before the page may open it
        self.silent = False
        self.stopped = False
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.split("?")[0] != "/ui.html" or not outer.trusted_origin:
                    self.send_error(404)
                    return
                body = (STAND_IN_SILENT if outer.silent
                        else STAND_IN % json.dumps(outer.trusted_origin)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def stop(self):
        """Closes its port: a connection to it is then refused."""
        if self.stopped:
            return
        self.stopped = True
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def die_with_parent():
    """In the child: SIGKILL when we die (Linux), so a killed test leaves
    no chromedriver behind."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ChromeDriver:
    """chromedriver on a loopback port of its choosing, in a process group
    of its own (Chromium runs in it too)."""

    def __init__(self, path, log_path):
        # Chromium inherits the zone the page's times are checked in.
        env = dict(os.environ, TZ=ZONE)
        self.proc = subprocess.Popen(
            [path, "--port=0", "--log-path=" + log_path],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env,
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=die_with_parent)
        self.port = None
        end = time.monotonic() + DRIVER_START_S
        seen = b""
        fd = self.proc.stdout.fileno()
        while self.port is None:
            left = end - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise RuntimeError("chromedriver did not start in %d s: %r"
                                   % (DRIVER_START_S, seen.decode(errors="replace")))
            if not select.select([fd], [], [], left)[0]:
                continue
            chunk = os.read(fd, 4096)
            seen += chunk
            for line in seen.decode(errors="replace").splitlines():
                if "started successfully on port" in line:
                    self.port = int(line.rstrip(". ").rsplit(" ", 1)[1])
        # Its stdout is drained so that a chatty driver never blocks on it.
        threading.Thread(target=lambda: self.proc.stdout.read(), daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.port

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        # Whatever it left in its group (a Chromium whose session did not end).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# Never through a proxy: everything here is on loopback.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url):
    with _opener.open(url, timeout=HTTP_TIMEOUT_S) as r:
        return r.read()


class Session:
    """One W3C WebDriver session."""

    def __init__(self, driver_url, chromium, user_data_dir, download_dir):
        self.base = driver_url
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "timeouts": {"pageLoad": PAGE_WAIT_S * 1000,
                         "script": PAGE_WAIT_S * 1000, "implicit": 0},
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": chromium,
                "args": CHROMIUM_ARGS + ["--user-data-dir=" + user_data_dir],
                "prefs": {"download.default_directory": download_dir,
                          "download.prompt_for_download": False,
                          "download.directory_upgrade": True,
                          "safebrowsing.enabled": False},
            },
        }}}
        value = self._call("POST", "/session", caps, timeout=60)
        self.id = value["sessionId"]
        self.path = "/session/" + self.id

    def _call(self, method, path, body=None, timeout=HTTP_TIMEOUT_S):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with _opener.open(req, timeout=timeout) as r:
                payload = json.load(r)
        except urllib.error.HTTPError as e:
            try:
                v = json.load(e).get("value", {})
                msg = "%s: %s" % (v.get("error"), v.get("message", "").splitlines()[0])
            except (ValueError, AttributeError, IndexError):
                msg = "HTTP %d" % e.code
            raise WebDriverError("%s %s: %s" % (method, path, msg)) from None
        return payload.get("value")

    def cmd(self, method, rel, body=None):
        return self._call(method, self.path + rel, body)

    def get(self, url):
        self.cmd("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find(self, css):
        return self.cmd("POST", "/element", {"using": "css selector", "value": css})[ELEMENT_KEY]

    def click(self, css):
        # The page rebuilds its tables every 10 s, a snapshot's detail once
        # its answer is in: an element found just before is then stale, or
        # for a moment not there at all; it is found again, for at most
        # CLICK_WAIT_S.
        deadline = time.monotonic() + CLICK_WAIT_S
        while True:
            try:
                self.cmd("POST", "/element/%s/click" % self.find(css), {})
                return
            except WebDriverError as e:
                again = "stale element" in str(e) or "no such element" in str(e)
                if not again or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def handles(self):
        return self.cmd("GET", "/window/handles")

    def browser_log(self):
        try:
            return self.cmd("POST", "/se/log", {"type": "browser"})
        except WebDriverError:
            return []

    def delete(self):
        self._call("DELETE", self.path, timeout=15)


def wait_for(what, probe, ready=bool, timeout=PAGE_WAIT_S):
    """Polls |probe| until |ready| of what it returns, for |timeout| s;
    returns that. A WebDriver error while polling (a page still loading)
    is retried. On timeout the last answer is in the message."""
    end = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = probe()
            if ready(last):
                return last
        except WebDriverError as e:
            last = e
        if time.monotonic() >= end:
            raise CheckFailed("%s: not within %d s (last: %r)" % (what, timeout, last))
        time.sleep(0.1)


TABLE_JS = """
const t = document.querySelector(arguments[0]);
if (!t) return null;
const head = Array.from(t.querySelectorAll(':scope > thead th'), (th) => th.textContent);
return Array.from(t.querySelectorAll(':scope > tbody > tr:not(.why):not(.detail)'), (tr) => {
  const row = {'data-id': tr.dataset.id || null, 'data-host': tr.dataset.host || null};
  Array.from(tr.cells).forEach((td, i) => { row[head[i] || ('#' + i)] = td.textContent; });
  return row;
});
"""


def api_get(args, path):
    return json.loads(http_get(args.url + path))


def check_page(s, args):
    if args.down:
        # The API first: the page shows what it says when it loads.
        def down(hosts):
            return [h for h in hosts["hosts"]
                    if h["host"] == args.down and h["state"] != "tracing" and h["why"]]
        wait_for("page: the API says host %s is down, and why" % args.down,
                 lambda: api_get(args, "/api/v1/hosts"), down)
    s.get(args.url + "/")
    wait_for("page: document.body.dataset.loaded === '1' (app.js ran and loaded the API)",
             lambda: s.js("return document.body && document.body.dataset.loaded === '1';"))
    # style.css applied under the CSP (style-src 'self'): td.n cells are
    # right-aligned by it alone.
    align = s.js("const td = document.querySelector('#snapshots td.n');"
                 "return td ? getComputedStyle(td).textAlign : null;")
    check(align == "right",
          "page: style.css not applied (a td.n cell's text-align is %r)" % (align,))
    # The stand-in's URL is a plain origin: page.c lets the page probe it.
    probe = s.js("return document.querySelector('#status').dataset.probe;")
    check(probe == "1", "page: #status's data-probe is %r, want '1'" % (probe,))
    rows = s.js(TABLE_JS, "#snapshots")
    mine = [r for r in rows if r["data-id"] == args.snapshot]
    check(len(mine) == 1, "page: #snapshots lists snapshot %s once; rows: %r"
          % (args.snapshot, rows))
    row = mine[0]
    check(row.get("id") == args.snapshot,
          "page: snapshot %s's id cell reads %r" % (args.snapshot, row.get("id")))
    check(row.get("state") == "complete",
          "page: snapshot %s's state is %r, not 'complete'" % (args.snapshot, row.get("state")))
    check(row.get("hosts") == "2/2",
          "page: snapshot %s's hosts are %r, not '2/2'" % (args.snapshot, row.get("hosts")))
    if args.failed:
        # A failed snapshot says why in its row, and shows no hosts or size
        # it does not have (issue 59 point 12).
        api = json.loads(http_get("%s/api/v1/snapshots/%s" % (args.url, args.failed)))
        failure = api["snapshot"]["failure"]
        check(api["snapshot"]["state"] == "failed" and failure,
              "page: snapshot %s is not a failed one with a reason: %r" % (args.failed, api))
        mine = [r for r in rows if r["data-id"] == args.failed]
        check(len(mine) == 1, "page: #snapshots lists snapshot %s once; rows: %r"
              % (args.failed, rows))
        row = mine[0]
        check(row.get("state") == "failed",
              "page: snapshot %s's state is %r" % (args.failed, row.get("state")))
        check(row.get("hosts") == "" and row.get("size") == "",
              "page: failed snapshot %s shows hosts %r and size %r"
              % (args.failed, row.get("hosts"), row.get("size")))
        check(failure in row.values(),
              "page: failed snapshot %s's row %r lacks its failure %r"
              % (args.failed, row, failure))
    hosts = s.js(TABLE_JS, "#hosts")
    check(len(hosts) == len(args.host),
          "page: #hosts has %d rows, want %d: %r" % (len(hosts), len(args.host), hosts))
    for want in args.host:
        got = [h for h in hosts if h.get("data-host") == want]
        check(len(got) == 1, "page: #hosts lists host %s once: %r" % (want, hosts))
        if want == args.down:
            # Down since the partial snapshot: not tracing, and why.
            check(got[0].get("state") != "tracing" and got[0].get("why"),
                  "page: host %s (its relay killed) reads %r" % (want, got[0]))
            continue
        check(got[0].get("state") == "tracing",
              "page: host %s's state is %r, not 'tracing'" % (want, got[0].get("state")))
        # The collector boosts (perf_boost_window): each host's budget,
        # 10% of an hour by default, in the API and in its row.
        api = [h for h in api_get(args, "/api/v1/hosts")["hosts"] if h["host"] == want]
        b = api[0].get("boost") if api else None
        check(isinstance(b, dict) and b.get("limit_ms") == 360000
              and b.get("window_ms") == 3600000,
              "page: the API's host %s has no boost budget of 10%% of 1 h: %r" % (want, b))
        check(" of 6 min 0 s in 60 min 0 s" in got[0].get("perf boost budget", ""),
              "page: host %s's boost budget reads %r" % (want, got[0]))
    return "page: / loaded, snapshot %s complete 2/2, hosts %s listed" % (
        args.snapshot, ", ".join(args.host))


def check_download(s, args, download_dir, want_len, want_sha):
    s.click('#snapshots tr[data-id="%s"] a.download' % args.snapshot)
    name = "tracegate-%s.pftrace" % args.snapshot

    # In flight, Chromium holds .crdownload and hidden temporary files.
    def finished(names):
        return names and not any(n.endswith(".crdownload") or n.startswith(".")
                                 for n in names)
    names = wait_for("download: a finished file in %s" % download_dir,
                     lambda: sorted(os.listdir(download_dir)), finished)
    check(names == [name], "download: the directory holds %r, want [%r] "
          "(the name from Content-Disposition)" % (names, name))
    path = os.path.join(download_dir, name)
    got_len = os.path.getsize(path)
    got_sha = sha256_file(path)
    check(got_len == want_len and got_sha == want_sha,
          "download: %s is %d bytes sha256 %s; the API's is %d bytes sha256 %s"
          % (name, got_len, got_sha, want_len, want_sha))
    return "download: a.download saved %s, %d bytes, sha256 equal to the API's" % (
        name, got_len)


STAND_IN_JS = "return Object.assign({url: location.href}, document.body ? document.body.dataset : {});"


def check_open_ui(s, args, ui_url, want_len, want_sha):
    page = s.cmd("GET", "/window")
    before = set(s.handles())
    s.click('#snapshots tr[data-id="%s"] button.open-ui' % args.snapshot)
    new = wait_for("open-ui: a new window after the click",
                   lambda: [h for h in s.handles() if h not in before])
    check(len(new) == 1, "open-ui: one new window, got %r" % new)
    s.cmd("POST", "/window", {"handle": new[0]})
    got = wait_for("open-ui: the stand-in UI at %s receives the trace" % ui_url,
                   lambda: s.js(STAND_IN_JS), lambda d: d.get("sha256"))
    check(got["url"] == ui_url, "open-ui: the window is at %r, want %r" % (got["url"], ui_url))
    check(int(got["pings"]) >= 1, "open-ui: no PING reached the stand-in: %r" % got)
    check(got["ignored"] == "0" and got["malformed"] == "0",
          "open-ui: the stand-in ignored %s and found %s malformed messages from the page"
          % (got["ignored"], got["malformed"]))
    check(int(got["len"]) == want_len,
          "open-ui: the buffer is %s bytes, the snapshot %d" % (got["len"], want_len))
    check(got["sha256"] == want_sha,
          "open-ui: the buffer's sha256 is %s, the snapshot's %s" % (got["sha256"], want_sha))
    check(args.snapshot in got["title"],
          "open-ui: the title %r does not name snapshot %s" % (got["title"], args.snapshot))
    check(got["fileName"] == "tracegate-%s.pftrace" % args.snapshot,
          "open-ui: the fileName is %r" % got["fileName"])

    # The origin check is real: a message from the stand-in's own origin
    # (not the collector's) is counted and changes nothing.
    s.js("window.postMessage({perfetto: {buffer: new ArrayBuffer(3), title: 'forged',"
         " fileName: 'forged'}}, '*'); window.postMessage('PING', '*');")
    after = wait_for("open-ui: the stand-in counts 2 ignored foreign-origin messages",
                     lambda: s.js(STAND_IN_JS), lambda d: d.get("ignored") == "2")
    check(after["len"] == got["len"] and after["sha256"] == got["sha256"]
          and after["title"] == got["title"] and after["pings"] == got["pings"],
          "open-ui: a foreign-origin message changed the stand-in: %r -> %r" % (got, after))
    s.cmd("DELETE", "/window")
    s.cmd("POST", "/window", {"handle": page})
    wait_for("open-ui: #status says the snapshot opened", lambda: s.js(
        "return document.querySelector('#status').dataset.open;"), lambda o: o == "opened")
    return ("open-ui: PING/PONG with %s, then %d bytes, sha256 equal, title %r; "
            "foreign-origin messages ignored" % (ui_url, want_len, got["title"]))


def check_console(s, allowed=()):
    """Both windows' console: no error (a CSP violation, an uncaught
    exception) but the favicon's 404, which neither server serves."""
    errors = [e.get("message") for e in s.browser_log()
              if e.get("level") == "SEVERE" and "/favicon.ico " not in e.get("message", "")
              and not any(a in e.get("message", "") for a in allowed)]
    check(not errors, "console: errors in the browser: %r" % errors)
    return "console: no errors (CSP violations, exceptions)"


def passed(what):
    print("browser_check: ok: " + what, flush=True)


def read_job(args):
    """The test's JSON line on stdin, unless everything is on argv."""
    if args.url:
        return
    if not select.select([sys.stdin], [], [], STDIN_WAIT_S)[0]:
        raise RuntimeError("no job on stdin within %d s" % STDIN_WAIT_S)
    line = sys.stdin.readline()
    if not line:
        raise RuntimeError("stdin closed before the job (the test failed?)")
    job = json.loads(line)
    args.url, args.snapshot, args.trace = job["url"], job["snapshot"], job["trace"]
    args.host = list(job.get("hosts", []))
    args.failed = job.get("failed")
    args.partial = job.get("partial")
    args.down = job.get("down")


def main():
    # browser_screen imports this file's harness as "browser_check": the
    # module running now, not a second copy with classes of its own.
    sys.modules.setdefault("browser_check", sys.modules[__name__])
    import browser_screen as screen
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--ready-fd", type=int, help="where to write 'ui-port N'")
    ap.add_argument("--ui-port", type=int, default=0, help="the stand-in's port (0: any)")
    ap.add_argument("--dir", help="scratch directory (default: a new one, removed)")
    ap.add_argument("--url", help="the collector, http://127.0.0.1:PORT")
    ap.add_argument("--snapshot", help="a complete snapshot's id")
    ap.add_argument("--trace", help="that snapshot's file, as the API served it")
    ap.add_argument("--host", action="append", default=[], help="a host (repeat)")
    ap.add_argument("--failed", help="a failed snapshot's id (optional)")
    ap.add_argument("--partial", help="a partial snapshot's id (optional)")
    ap.add_argument("--down", help="the host that failed in it")
    args = ap.parse_args()
    for exe in (args.chromium, args.chromedriver):
        if not os.access(exe, os.X_OK):
            print("browser_check: %s is not installed: run deploy/deps.sh" % exe,
                  file=sys.stderr)
            return 2
    # A SIGTERM still runs the finally blocks.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))

    scratch = args.dir or tempfile.mkdtemp(prefix="tg-browser-")
    stand_in = driver = session = None
    try:
        stand_in = StandIn(args.ui_port)
        ready = "ui-port %d\n" % stand_in.port
        if args.ready_fd is not None:
            os.write(args.ready_fd, ready.encode())
            os.close(args.ready_fd)
        else:
            sys.stdout.write(ready)
            sys.stdout.flush()
        read_job(args)
        if not (args.url and args.snapshot and args.trace and args.host):
            print("browser_check: need url, snapshot, trace and hosts", file=sys.stderr)
            return 2
        stand_in.trusted_origin = args.url.rstrip("/")
        args.url = args.url.rstrip("/")
        ui_url = "http://127.0.0.1:%d/ui.html" % stand_in.port
        with open(args.trace, "rb") as f:
            data = f.read()
        want_len, want_sha = len(data), hashlib.sha256(data).hexdigest()

        download_dir = os.path.join(scratch, "downloads")
        profile = os.path.join(scratch, "profile")
        os.makedirs(download_dir, exist_ok=True)
        os.makedirs(profile, exist_ok=True)
        driver = ChromeDriver(args.chromedriver, os.path.join(scratch, "chromedriver.log"))
        session = Session(driver.url, args.chromium, profile, download_dir)
        passed(check_page(session, args))
        passed(check_download(session, args, download_dir, want_len, want_sha))
        passed(check_open_ui(session, args, ui_url, want_len, want_sha))
        passed(check_console(session))
        passed(screen.check_layout(session, args))
        passed(screen.check_times(session, args))
        if args.partial and args.down:
            passed(screen.check_cut(session, args))
            passed(screen.check_partial(session, args))
            passed(screen.check_layout(session, args, ["table.snap-hosts > thead th"]))
            screen.screenshot(session)
            passed(screen.check_filters(session, args))
            passed(screen.check_per_host(session, args, download_dir))
        passed(screen.check_problems(session))
        passed(screen.check_boost(session, args))
        passed(screen.check_diff(session, args))
        passed(screen.check_diff_history(session, args))
        passed(screen.check_store(session))
        passed(screen.check_ui_silent(session, args, stand_in))
        passed(screen.check_ui_unreachable(session, args, stand_in, download_dir,
                                           want_len, want_sha))
        # The closed UI's address, and the 409 the diff check asked for (a
        # host without samples has no differential profile).
        passed(check_console(session, allowed=["127.0.0.1:%d" % stand_in.port,
                                               "/profile/diff?host="]))
    except CheckFailed as e:
        print("browser_check: FAILED: %s" % e, file=sys.stderr)
        if session:
            for entry in session.browser_log():
                print("browser_check: console: %s %s" % (entry.get("level"),
                                                        entry.get("message")), file=sys.stderr)
        return 1
    except (RuntimeError, WebDriverError, OSError, ValueError, KeyError) as e:
        print("browser_check: ERROR: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 2
    finally:
        if session:
            try:
                session.delete()
            except (WebDriverError, OSError) as e:
                print("browser_check: ending the session: %s" % e, file=sys.stderr)
        if driver:
            driver.stop()
        if stand_in:
            stand_in.stop()
        if not args.dir:
            shutil.rmtree(scratch, ignore_errors=True)
    print("browser_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
