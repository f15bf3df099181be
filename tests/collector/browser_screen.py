"""tracegate-collector's web page on a laptop's screen, and "Open in
Perfetto UI" when the UI is not there: checks 5 to 13 of browser_check.py
(its docstring lists them), which runs them in its WebDriver session
with its harness (check, wait_for, the stand-in UI).

Kept apart from browser_check.py so that each file stays about one
thing: that one starts and drives the browser and checks what the page
always did; this one what a person on a 1280 px screen sees.
"""
import base64
import datetime
import hashlib
import os
import re
import time
import urllib.error
import urllib.parse
import zoneinfo

from browser_check import (STAND_IN_JS, ZONE, CheckFailed, api_get, check,
                           http_get, sha256_file, wait_for)

UI_SILENT_S = 40       # "Open" on a UI that never answers (the page's deadline is 10 s)
SCREEN_W = 1280


LAYOUT_JS = """
const out = {inner: window.innerWidth, scroll: document.documentElement.scrollWidth,
             cols: [], inside: []};
for (const sel of arguments[0]) {
  for (const th of document.querySelectorAll(sel)) {
    const r = th.getBoundingClientRect();
    out.cols.push({table: sel, th: th.textContent, right: r.right, width: r.width});
  }
}
for (const e of document.querySelectorAll(arguments[1])) {
  const r = e.getBoundingClientRect(), c = e.closest('td').getBoundingClientRect();
  out.inside.push({what: e.className + ' ' + e.textContent, right: r.right, cell: c.right,
                   width: r.width});
}
return out;
"""


def check_layout(s, args, extra_tables=()):
    tables = ["#snapshots > thead th", "#hosts > thead th"] + list(extra_tables)
    got = s.js(LAYOUT_JS, tables, "#snapshots a.download, #snapshots button.open-ui, "
               "#snapshots a.download-host, #snapshots button.open-host")
    check(got["inner"] <= SCREEN_W,
          "layout: the window is %r px wide, want at most %d" % (got["inner"], SCREEN_W))
    check(got["scroll"] <= got["inner"],
          "layout: the page is %r px wide in a %r px window" % (got["scroll"], got["inner"]))
    for t in tables:
        check(any(c["table"] == t for c in got["cols"]), "layout: no columns for %s" % t)
    for c in got["cols"]:
        check(c["right"] <= got["inner"] and c["width"] >= 24,
              "layout: column %r of %s ends at %.0f px and is %.0f px wide (window %r)"
              % (c["th"], c["table"], c["right"], c["width"], got["inner"]))
    check(got["inside"], "layout: no download links or Open buttons")
    for e in got["inside"]:
        check(e["width"] > 0 and e["right"] <= e["cell"] + 0.5,
              "layout: %r ends at %.0f px, past its cell's %.0f px"
              % (e["what"], e["right"], e["cell"]))
    ids = s.js("return Array.from(document.querySelectorAll('#snapshots button.toggle'),"
               " (b) => [b.textContent, b.parentElement.scrollWidth, b.parentElement.clientWidth]);")
    for text, sw, cw in ids:
        check(sw <= cw, "layout: the id %r is cut: %r px in %r" % (text, sw, cw))
    return "layout: %d columns of %d tables within %r px, %d links and buttons in their cells" % (
        len(got["cols"]), len(tables), got["inner"], len(got["inside"]))


CUT_JS = """
const e = document.querySelector(arguments[0]);
if (!e) return null;
const t = document.querySelector('#snapshots').getBoundingClientRect();
return {text: e.textContent, title: e.title, sw: e.scrollWidth, cw: e.clientWidth,
        h: e.getBoundingClientRect().height, open: e.classList.contains('open'),
        table: t.right};
"""


def check_cut(s, args):
    reason = api_get(args, "/api/v1/snapshots/" + args.partial)["snapshot"]["reason"]
    check(len(reason) > 200, "cut: the partial snapshot's reason is only %r" % reason)
    sel = '#snapshots tr[data-id="%s"] td.reason .cut' % args.partial
    before = s.js(CUT_JS, sel)
    check(before, "cut: no %s" % sel)
    check(before["sw"] > before["cw"],
          "cut: the reason is not cut: %r px of text in %r px" % (before["sw"], before["cw"]))
    check(before["title"] == reason and before["text"] == reason,
          "cut: the reason's title %r / text %r is not the API's %r"
          % (before["title"], before["text"], reason))
    s.click(sel)
    after = wait_for("cut: the reason opens whole on a click", lambda: s.js(CUT_JS, sel),
                     lambda d: d and d["open"])
    check(after["sw"] <= after["cw"] + 1 and after["h"] > before["h"],
          "cut: opened, the reason is %r px of text in %r px, %r px high (was %r)"
          % (after["sw"], after["cw"], after["h"], before["h"]))
    check(after["table"] <= SCREEN_W,
          "cut: opened, the reason widens the table to %r px" % after["table"])
    s.click(sel)
    wait_for("cut: a second click cuts it again", lambda: s.js(CUT_JS, sel),
             lambda d: d and not d["open"])
    return "cut: a %d-character reason cut in %d px, whole in its title and on a click" % (
        len(reason), before["cw"])


TIME_RE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (UTC|[+-]\d\d:\d\d)$")


def check_times(s, args):
    cells = s.js("return Array.from(document.querySelectorAll('td.time'), (td) => ("
                 "{text: td.textContent, sw: td.scrollWidth, cw: td.clientWidth,"
                 " id: td.parentElement.dataset.id || td.parentElement.dataset.host}));")
    shown = [c for c in cells if c["text"]]
    check(shown, "times: no time cells: %r" % cells)
    for c in shown:
        check(TIME_RE.match(c["text"]), "times: %r (row %s) does not end with its zone"
              % (c["text"], c["id"]))
        check(c["sw"] <= c["cw"], "times: %r (row %s) is cut: %r px in %r"
              % (c["text"], c["id"], c["sw"], c["cw"]))
    ms = api_get(args, "/api/v1/snapshots/" + args.snapshot)["snapshot"]["started_ms"]
    want = datetime.datetime.fromtimestamp(ms / 1000, zoneinfo.ZoneInfo(ZONE)).strftime(
        "%Y-%m-%d %H:%M:%S") + " +05:30"
    got = [c["text"] for c in shown if c["id"] == args.snapshot]
    check(got == [want], "times: snapshot %s's time reads %r, want [%r] (%s)"
          % (args.snapshot, got, want, ZONE))
    return "times: %d cells with their zone; %s in %s" % (len(shown), want, ZONE)


PARTIAL_JS = """
const id = arguments[0];
const why = Array.from(document.querySelectorAll(
    '#snapshots tr.why[data-of="' + id + '"] .host-why'), (d) => ({
  host: d.dataset.host, text: d.textContent,
  error: (d.querySelector('.cut.error') || {}).title || null}));
const det = document.querySelector('#snapshots tr.detail[data-of="' + id + '"] table.snap-hosts');
const hosts = det && Array.from(det.querySelectorAll(':scope > tbody > tr'), (tr) => ({
  host: tr.dataset.host, outcome: tr.cells[1].textContent,
  window: tr.querySelector('td.window').textContent,
  download: (tr.querySelector('a.download-host') || {}).getAttribute
      ? tr.querySelector('a.download-host').getAttribute('href') : null,
  open: !!tr.querySelector('button.open-host')}));
return {why: why, hosts: hosts};
"""


def check_partial(s, args):
    d = api_get(args, "/api/v1/snapshots/" + args.partial)
    failed = {h["host"]: h["error"] for h in d["hosts"] if h["outcome"] != "ok"}
    check(list(failed) == [args.down] and failed[args.down],
          "partial: the API's snapshot %s has failed hosts %r, want %s with an error"
          % (args.partial, failed, args.down))
    got = wait_for("partial: the row under snapshot %s names its failed host" % args.partial,
                   lambda: s.js(PARTIAL_JS, args.partial), lambda g: g["why"])
    check([w["host"] for w in got["why"]] == [args.down],
          "partial: under snapshot %s the page names %r, want [%s]"
          % (args.partial, got["why"], args.down))
    check(got["why"][0]["error"] == failed[args.down]
          and failed[args.down] in got["why"][0]["text"],
          "partial: host %s's error on the page %r is not the API's %r"
          % (args.down, got["why"][0], failed[args.down]))
    s.click('#snapshots tr[data-id="%s"] button.toggle' % args.partial)
    got = wait_for("partial: snapshot %s's detail lists its hosts" % args.partial,
                   lambda: s.js(PARTIAL_JS, args.partial), lambda g: g["hosts"])
    by = {h["host"]: h for h in got["hosts"]}
    check(sorted(by) == sorted(h["host"] for h in d["hosts"]),
          "partial: the detail lists %r, the API %r" % (sorted(by), d["hosts"]))
    for h in d["hosts"]:
        row = by[h["host"]]
        check(row["outcome"] == h["outcome"], "partial: host %s's outcome reads %r, the API's %r"
              % (h["host"], row["outcome"], h["outcome"]))
        if h["outcome"] == "failed":
            check(not row["download"] and not row["open"],
                  "partial: failed host %s offers its data: %r" % (h["host"], row))
            continue
        href = "/api/v1/snapshots/%s/trace?host=%s" % (args.partial,
                                                       urllib.parse.quote(h["host"], safe=""))
        check(row["download"] == href and row["open"],
              "partial: host %s's download is %r (want %r), Open %r"
              % (h["host"], row["download"], href, row["open"]))
        # A part whose packets carry no time has no window (0 and 0).
        if h["window_first_ms"] or h["window_last_ms"]:
            check(re.search(r" (UTC|[+-]\d\d:\d\d) \+ ", row["window"]),
                  "partial: host %s's window %r lacks its zone" % (h["host"], row["window"]))
        else:
            check(row["window"] == "",
                  "partial: host %s has no window in the API, %r on the page"
                  % (h["host"], row["window"]))
    return "partial: snapshot %s names %s and why under its row; its detail lists %d hosts" % (
        args.partial, args.down, len(d["hosts"]))


# The fields other parts of the collector fill (a host's name, a data
# source's problems) rendered from an answer shaped as the API's, in the
# page's own functions (app.js is a classic script: its functions are the
# window's), then removed.
PROBLEMS_JS = """
const why = arguments[0];
const problem = {kind: 'data_source', data_source: 'linux.ftrace', code: 'TG-6004', why: why};
const out = {};
const tr = hostRow({host: '10.9.9.9:7001', name: 'db-7', hostname: 'db-7.example',
                    state: 'tracing', since_ms: Date.now(), why: '', problems: [problem]});
document.querySelector('#hosts tbody').appendChild(tr);
const p = tr.querySelector('.problem');
out.host = {label: tr.cells[0].textContent, text: p.textContent, title: p.title,
            color: getComputedStyle(p).color, cut: p.scrollWidth > p.clientWidth,
            right: tr.getBoundingClientRect().right};
tr.remove();
const det = document.createElement('tr');
det.className = 'detail';
const td = det.insertCell();
td.colSpan = 9;
document.querySelector('#snapshots tbody').appendChild(det);
detailInto(td, {snapshot: {id: 'ffffffffffffff01', state: 'complete', started_ms: Date.now(),
                           finished_ms: Date.now(), trigger: 'operator', reason: '', bytes: 10,
                           packets: 1, crc32: 1, loss: 0},
                hosts: [{host: '10.9.9.9:7001', name: 'db-7', outcome: 'ok', error: '',
                         problems: [problem], bytes: 10, packets: 1, loss: 0,
                         window_first_ms: Date.now() - 5000, window_last_ms: Date.now()}]});
const row = td.querySelector('table.snap-hosts > tbody > tr');
const q = row.querySelector('.problem');
out.detail = {label: row.cells[0].textContent, text: q.textContent, title: q.title,
              color: getComputedStyle(q).color, right: row.getBoundingClientRect().right};
det.remove();
return out;
"""


def check_problems(s):
    why = ("cannot enable the ftrace events sched/sched_switch and sched/sched_wakeup: "
           "tracefs is read-only in this unit's namespace (ProtectKernelTunables=yes); "
           "the data source runs without them")
    got = s.js(PROBLEMS_JS, why)
    for where in ("host", "detail"):
        g = got[where]
        check(g["label"].startswith("db-7"), "problems: the %s row names the host %r, "
              "want its name db-7" % (where, g["label"]))
        check(g["text"] == g["title"] and "TG-6004" in g["text"]
              and "linux.ftrace" in g["text"] and why in g["text"],
              "problems: the %s row's problem reads %r (title %r)" % (where, g["text"], g["title"]))
        check(g["color"] == "rgb(187, 0, 0)",
              "problems: the %s row's problem is %s, not red" % (where, g["color"]))
        check(g["right"] <= SCREEN_W, "problems: the %s row ends at %r px" % (where, g["right"]))
    check(got["host"]["cut"], "problems: a long problem is not cut in the hosts table")
    return "problems: a host's name and its data source's problem (code, source, why) in red, cut"


# The complete snapshot's detail as the page shows it: each host's perf
# boost cell (its data-boost, data-reason, data-code, its text and title)
# and the snapshot's symbols (its data-state and text).
BOOST_JS = """
const id = arguments[0];
const det = document.querySelector('#snapshots tr.detail[data-of="' + id + '"]');
if (!det || !det.querySelector('table.snap-hosts')) return null;
const sy = det.querySelector('dd .symbols'), rq = det.querySelector('dd .requests');
return {
  symbols: sy && {state: sy.dataset.state, text: sy.textContent},
  requests: rq && {across: rq.dataset.across, unmatched: rq.dataset.unmatched},
  hosts: Array.from(det.querySelectorAll('table.snap-hosts > tbody > tr'), (tr) => {
    const td = tr.querySelector('td.boost'), c = td && td.querySelector('.cut');
    const rc = tr.querySelector('td.requests');
    return {host: tr.dataset.host, boost: td ? td.dataset.boost || null : null,
            requests: rc ? rc.textContent : '',
            unmatched: rc ? rc.dataset.unmatched || null : null,
            reason: td ? td.dataset.reason || null : null,
            code: td ? td.dataset.code || null : null,
            text: c ? c.textContent : '', title: c ? c.title : '',
            color: c ? getComputedStyle(c).color : ''};
  })};
"""

# The boosts and symbols a run here cannot make (a sharp window, one held
# by another snapshot, a symbolized snapshot, a failure whose texts are
# markup), in answers shaped as the API's, rendered by the page's own
# detailInto() and removed. Host-provided texts must stay text.
BOOST_RENDER_JS = """
const hostile = arguments[0];
const now = Date.now();
const det = document.createElement('tr');
det.className = 'detail';
const td = det.insertCell();
td.colSpan = 9;
document.querySelector('#snapshots tbody').appendChild(det);
const host = (n, boost) => ({host: '10.9.9.' + n + ':7001', outcome: 'ok', error: '', problems: [],
                             bytes: 10, packets: 1, loss: 0, window_first_ms: now - 5000,
                             window_last_ms: now, boost: boost});
const snap = (symbols, hosts) => ({snapshot: {id: 'ffffffffffffff02', state: 'complete',
    started_ms: now, finished_ms: now, trigger: 'operator', reason: '', bytes: 10,
    packets: 1, crc32: 1, loss: 0}, hosts: hosts, symbols: symbols});
const cells = () => Array.from(td.querySelectorAll('td.boost'), (c) => ({
    boost: c.dataset.boost || null, reason: c.dataset.reason || null,
    code: c.dataset.code || null, text: c.textContent,
    color: c.firstChild ? getComputedStyle(c.firstChild).color : ''}));
const sym = () => { const e = td.querySelector('dd .symbols');
                    return e && {state: e.dataset.state, text: e.textContent}; };
const out = {};
detailInto(td, snap({state: 'done', bytes: 2048, modules: 4, modules_found: 3, frames: 120,
                     frames_named: 110, frames_with_line: 90},
    [host(1, {state: 'sharp', frequency_hz: 499, window_ms: 2000, first_ms: now - 2000,
              last_ms: now, samples: 1996, packets: 2100, bytes: 300000, loss: 0}),
     host(2, {state: 'held', frequency_hz: 499, window_ms: 2000, held_by: 'ffffffffffffff01'}),
     host(3, {state: 'failed', frequency_hz: 499, window_ms: 2000, first_ms: 0, last_ms: 0,
              samples: 0, packets: 0, bytes: 0, loss: 0, reason: 'lost', code: 'TG-5090',
              error: hostile}),
     host(5, {state: 'budget', frequency_hz: 499, window_ms: 2000, budget: 'host',
              code: 'TG-5091', used_ms: 360000, limit_ms: 360000, refill_in_ms: 90000})]));
out.done = {cells: cells(), symbols: sym()};
out.done.budget = td.querySelector('td.boost[data-budget]') &&
                  td.querySelector('td.boost[data-budget]').dataset.budget;
// A host row's budget (/api/v1/hosts' boost), full for another 12 min.
const tr = hostRow({host: '10.9.9.6:7001', state: 'tracing', since_ms: now, why: '',
                    problems: [], boost: {used_ms: 360000, limit_ms: 360000,
                    window_ms: 3600000, refill_in_ms: 720000, boosted_ms: 7200000,
                    refused: 3}});
document.querySelector('#hosts tbody').appendChild(tr);
const bc = tr.querySelector('td.boost');
out.row = {used: bc.dataset.usedMs, limit: bc.dataset.limitMs, refused: bc.dataset.refused,
           text: bc.textContent, title: bc.title,
           color: getComputedStyle(bc.firstChild).color,
           right: tr.getBoundingClientRect().right};
tr.remove();
out.none = hostRow({host: '10.9.9.7:7001', state: 'tracing', since_ms: now, why: '',
                    problems: [], boost: null}).querySelector('td.boost').textContent;
detailInto(td, snap({state: 'failed', why: hostile}, [host(4, null)]));
out.failed = {cells: cells(), symbols: sym()};
out.markup = td.querySelectorAll('img, script, b.x').length;
out.ran = window.tgHostileRan === true;
det.remove();
return out;
"""


def check_boost(s, args):
    """The complete snapshot's hosts' boosts (real ones: each host's
    producer of linux.perf writes nothing, so each is sharp with no
    sample) and its symbols state as the API gives them, in its detail;
    then a sharp, a held and a hostile failed boost and the symbols' done
    and failed states, rendered by the page's own functions."""
    d = api_get(args, "/api/v1/snapshots/" + args.snapshot)
    api = {h["host"]: h["boost"] for h in d["hosts"]}
    links = {h["host"]: h.get("links") for h in d["hosts"]}
    check(all(isinstance(b, dict) and b.get("state") == "sharp" for b in api.values()),
          "boost: the API's boosts of snapshot %s are not all sharp: %r" % (args.snapshot, api))
    symbols = d.get("symbols")
    check(isinstance(symbols, dict) and symbols.get("state"),
          "boost: the API's snapshot %s has no symbols state: %r" % (args.snapshot, symbols))
    s.click('#snapshots tr[data-id="%s"] button.toggle' % args.snapshot)
    got = wait_for("boost: snapshot %s's detail lists its hosts' boosts" % args.snapshot,
                   lambda: s.js(BOOST_JS, args.snapshot), lambda g: g and g["hosts"])
    by = {h["host"]: h for h in got["hosts"]}
    check(sorted(by) == sorted(api), "boost: the detail lists %r, the API %r"
          % (sorted(by), sorted(api)))
    for host, b in api.items():
        row = by[host]
        check(row["boost"] == "sharp" and row["reason"] is None and row["code"] is None,
              "boost: host %s's boost cell says %r, the API %r" % (host, row, b))
        want = "%d samples" % b["samples"]
        check(row["title"] == row["text"] and row["text"].startswith("sharp ")
              and " at %d Hz, " % b["frequency_hz"] in row["text"] and want in row["text"],
              "boost: host %s's boost reads %r, the API's %r" % (host, row["text"], b))
        check(row["color"] == "rgb(0, 119, 0)",
              "boost: host %s's sharp boost is %s, not green" % (host, row["color"]))
        # Its requests as the API's links count them.
        l = links[host]
        check(isinstance(l, dict) and row["requests"] == "%d started, %d ended, %d unmatched"
              % (l["flows_started"], l["flows_terminated"], l["flows_unmatched"])
              and row["unmatched"] == str(l["flows_unmatched"]),
              "links: host %s's requests cell says %r, the API's links %r" % (host, row, l))
    tot = d["snapshot"].get("links")
    check(isinstance(tot, dict) and got["requests"]
          and got["requests"]["across"] == str(tot["flows_across"])
          and got["requests"]["unmatched"] == str(tot["flows_unmatched"]),
          "links: the detail's requests %r, the API's snapshot links %r" % (got["requests"], tot))
    check(got["symbols"] and got["symbols"]["state"] == symbols["state"]
          and got["symbols"]["text"].startswith(symbols["state"]),
          "boost: the detail's symbols %r, the API's %r" % (got["symbols"], symbols))
    s.click('#snapshots tr[data-id="%s"] button.toggle' % args.snapshot)

    hostile = ('<img src=x onerror="window.tgHostileRan=true"><script>'
               'window.tgHostileRan=true</script><b class="x">bold</b>')
    r = s.js(BOOST_RENDER_JS, hostile)
    sharp, held, failed, budget = r["done"]["cells"]
    check(sharp["boost"] == "sharp" and "2.0 s at 499 Hz" in sharp["text"]
          and "1996 samples" in sharp["text"]
          and re.search(r"from \d{4}-\d\d-\d\d \d\d:\d\d:\d\d (UTC|[+-]\d\d:\d\d)$",
                        sharp["text"]),
          "boost: a sharp boost reads %r" % (sharp,))
    check(held["boost"] == "held" and held["text"] == "held by snapshot ffffffffffffff01",
          "boost: a held boost reads %r" % (held,))
    check(failed["boost"] == "failed" and failed["reason"] == "lost"
          and failed["code"] == "TG-5090"
          and failed["text"] == "failed lost (TG-5090): " + hostile,
          "boost: a failed boost with markup in its error reads %r" % (failed,))
    check(budget["boost"] == "budget" and budget["code"] == "TG-5091"
          and r["done"]["budget"] == "host"
          and budget["text"] == "not boosted: host budget (TG-5091) used 6 min 0 s of "
          "6 min 0 s, room again 90.0 s after the trigger"
          and budget["color"] == "rgb(170, 102, 0)",
          "boost: a boost over its budget reads %r" % (budget,))
    row = r["row"]
    check(row["used"] == "360000" and row["limit"] == "360000" and row["refused"] == "3"
          and row["text"] == "6 min 0 s of 6 min 0 s in 60 min 0 s, 3 refused; "
          "room again in 12 min 0 s" and row["title"] == "boosted 2 h 0 min in all"
          and row["color"] == "rgb(170, 102, 0)" and row["right"] <= SCREEN_W,
          "boost: a host's budget in the hosts table reads %r" % (row,))
    check(r["none"] == "", "boost: a host without a boost budget shows %r" % (r["none"],))
    check(r["done"]["symbols"] == {
        "state": "done", "text": "done: 110 of 120 frames named (90 with a line), "
        "3 of 4 modules found, 2.0 KiB"},
        "boost: done symbols read %r" % (r["done"]["symbols"],))
    check(r["failed"]["symbols"] == {"state": "failed", "text": "failed: " + hostile},
          "boost: failed symbols read %r" % (r["failed"]["symbols"],))
    check(r["failed"]["cells"] == [{"boost": None, "reason": None, "code": None, "text": "",
                                    "color": ""}],
          "boost: a host without a boost shows %r" % (r["failed"]["cells"],))
    check(r["markup"] == 0 and not r["ran"],
          "boost: a host's text became markup (%d elements, script ran: %r)"
          % (r["markup"], r["ran"]))
    return ("boost: snapshot %s's hosts' boosts (sharp) and symbols (%s) "
            "as the API's; sharp, held, failed, budget, a host's budget and symbols "
            "done/failed rendered, markup as text"
            % (args.snapshot, symbols["state"]))


# The bucket's line, rendered by the page's own storeLine(): absent for
# this collector's directory store, red and saying what failed for a
# bucket that fails, gone again once it answers.
STORE_JS = """
const p = document.querySelector('#store');
const out = {dir: {hidden: p.hidden}};
storeLine({kind: 'bucket', bucket: 's3://tg/fleet/', state: 'failing', since_ms: Date.now() - 60000,
           requests: 9, retries: 4, throttled: 4, failures: 1,
           last_error: {at_ms: Date.now(), method: 'PUT', status: 503, code: 'SlowDown',
                        error: 'Resource temporarily unavailable'}});
const r = p.getBoundingClientRect();
out.failing = {hidden: p.hidden, text: p.textContent, color: getComputedStyle(p).color,
               right: r.right, state: p.dataset.state};
storeLine({kind: 'bucket', bucket: 's3://tg/fleet/', state: 'ok', since_ms: Date.now(),
           requests: 10, retries: 4, throttled: 4, failures: 1, last_error: null});
out.ok = {hidden: p.hidden};
return out;
"""


DIFF_RENDER_JS = """
const [hostile, d] = arguments;
const det = document.createElement('tr');
det.className = 'detail';
const td = det.insertCell();
td.colSpan = 9;
document.querySelector('#snapshots tbody').appendChild(det);
const box = document.createElement('div');
box.className = 'diff-view';
td.appendChild(box);
diffInto(box, d);
const rows = Array.from(box.querySelectorAll('table.diff-funcs tbody tr'), (tr) => ({
    name: tr.dataset.name, cells: Array.from(tr.cells, (c) => c.textContent),
    cls: tr.cells[1].className}));
const rects = Array.from(box.querySelectorAll('svg.flame rect'), (r) => ({
    fill: r.getAttribute('fill'), width: Number(r.getAttribute('width')),
    title: r.querySelector('title').textContent}));
const svg = box.querySelector('svg.flame').getBoundingClientRect();
const cols = Array.from(box.querySelectorAll('table.diff-funcs th'),
                        (th) => th.getBoundingClientRect().right);
const out = {rows: rows, rects: rects, svg_right: svg.right, svg_width: svg.width, cols: cols,
             few: !!box.querySelector('p.few'), made: !!box.querySelector('b.x, img'),
             ran: !!window.tgHostileRan, inner: window.innerWidth};
det.remove();
return out;
"""

# A diff as GET .../profile/diff answers it (consumer/profile/profile_diff.h):
# h7 spends 40% in compress_block where its peers' median is 5%.
def diff_fixture(hostile):
    def fn(name, hs, ps, sig, file=None, pseudo=False, ht=None, pt=None, sigt=False):
        ht = hs if ht is None else ht
        pt = ps if pt is None else pt
        return {"name": name, "file": file, "pseudo": pseudo, "host_share": hs,
                "peers_median_share": ps, "diff": hs - ps, "host_samples": round(hs * 1000),
                "peers_samples": round(ps * 19000), "significant": sig,
                "host_total_share": ht, "peers_median_total_share": pt, "diff_total": ht - pt,
                "host_total_samples": round(ht * 1000), "peers_total_samples": round(pt * 19000),
                "significant_total": sigt, "peers_with": 19}
    funcs = [fn("compress_block", .40, .05, True, sigt=True),
             fn("handle", .30, .50, True, sigt=True),
             fn("parse", .25, .40, True, sigt=True),
             fn("compress", 0, 0, False, ht=.40, pt=.05, sigt=True),
             fn("serve", 0, 0, False, ht=.55, pt=.90, sigt=True),
             fn("[no callstack]", .02, .02, False, pseudo=True),
             fn("[unknown]", .03, .03, False, file="/usr/lib/libc.so.6"),
             fn("main", 0, 0, False, ht=.98, pt=.98),
             fn(hostile, 0, 0, False)]
    def node(parent, f, h, p):
        return {"parent": parent, "function": f, "host_share": h, "peers_median_share": p,
                "diff": h - p, "host_self_share": 0, "peers_median_self_share": 0,
                "host_samples": round(h * 1000), "peers_samples": round(p * 19000)}
    tree = [node(None, None, 1, 1), node(0, 7, .98, .98), node(1, 3, .40, .05),
            node(2, 0, .40, .05), node(1, 4, .55, .90), node(4, 1, .30, .50),
            node(4, 2, .25, .40), node(1, 6, .03, .03), node(0, 5, .02, .02)]
    return {"schema": 1,
            "host": {"name": "h7", "machine_id": 7, "samples": 1000, "cpu_ns": 10**10,
                     "shares_of": "cpu_ns", "too_few_samples": False, "no_callstack": 20,
                     "with_unnamed_frame": 30, "callstack_not_interned": 0, "skipped": 0},
            "peers": {"count": 19, "too_few_samples": 0, "samples": 19000},
            "rule": {"min_samples": 100, "z": 3.0}, "functions": funcs, "tree": tree,
            "tree_min_share": 0.0005, "tree_pruned": 0}


def check_diff(s, args):
    """A host against its peers in a snapshot's detail: each host's
    "peers" asks GET .../profile/diff for it (these hosts have no
    samples: the API's refusal is shown); then a diff rendered by the
    page's own diffInto(): every function a row in the API's order, the
    grown one marked red and the shrunk ones blue, a flame box per call
    path the host has, as wide as its share and coloured by its
    difference, everything within the window, and a function's name made
    of markup stays text."""
    d = api_get(args, "/api/v1/snapshots/" + args.snapshot)
    host = d["hosts"][0]["host"]
    s.click('#snapshots tr[data-id="%s"] button.toggle' % args.snapshot)
    sel = '#snapshots tr.detail tr[data-host="%s"] button.diff-host' % host
    wait_for("diff: snapshot %s's detail offers its hosts' peers" % args.snapshot,
             lambda: s.js("return !!document.querySelector(arguments[0]);", sel))
    s.click(sel)
    said = wait_for("diff: the detail shows the API's answer for %s" % host,
                    lambda: s.js("const b = document.querySelector('.diff-view');"
                                 "return b && b.dataset.host === arguments[0] && "
                                 "b.querySelector('.failure, .diff-head') && "
                                 "b.textContent;", host))
    check("no CPU profile samples" in said,
          "diff: host %s (no samples) reads %r, not the API's refusal" % (host, said))
    s.click('#snapshots tr[data-id="%s"] button.toggle' % args.snapshot)

    hostile = ('<img src=x onerror="window.tgHostileRan=true"><script>'
               'window.tgHostileRan=true</script><b class="x">bold</b>')
    fixture = diff_fixture(hostile)
    r = s.js(DIFF_RENDER_JS, hostile, fixture)
    names = [x["name"] for x in r["rows"]]
    check(names == [f["name"] for f in fixture["functions"]],
          "diff: the rows are %r, the API's functions %r" % (names, fixture["functions"]))
    first = r["rows"][0]
    check(first["cells"][:3] == ["compress_block", "+35.00%", "40.00%"]
          and first["cells"][3] == "5.00%" and first["cells"][4] == "400"
          and first["cells"][5] == "950" and "grew" in first["cls"],
          "diff: the first row reads %r (%s)" % (first["cells"], first["cls"]))
    check("shrank" in r["rows"][1]["cls"], "diff: handle's row is %r" % r["rows"][1])
    check(r["rows"][6]["cells"][0] == "[unknown] /usr/lib/libc.so.6",
          "diff: the unnamed row reads %r" % r["rows"][6])
    check(r["rows"][8]["cells"][0] == hostile and not r["made"] and not r["ran"],
          "diff: a name made of markup became markup: %r" % r["rows"][8])
    check(len(r["rects"]) == len(fixture["tree"]),
          "diff: %d flame boxes for %d call paths" % (len(r["rects"]), len(fixture["tree"])))
    hot = [x for x in r["rects"] if x["title"].startswith("compress_block:")]
    cold = [x for x in r["rects"] if x["title"].startswith("serve:")]
    same = [x for x in r["rects"] if x["title"].startswith("main:")]
    check(hot and hot[0]["fill"] == "rgb(245,110,110)" and abs(hot[0]["width"] - 400) < 1e-6,
          "diff: compress_block's box is %r, want red and 400 of 1000 wide" % hot)
    check(cold and cold[0]["fill"] == "rgb(110,110,245)",
          "diff: serve's box (-35%%) is %r, want blue" % cold)
    check(same and same[0]["fill"] == "rgb(245,245,245)",
          "diff: main's box (no difference) is %r, want white" % same)
    check(r["svg_right"] <= r["inner"] and r["svg_width"] > 600
          and all(c <= r["inner"] for c in r["cols"]),
          "diff: the flame graph (%r px wide, to %r) or the table (%r) is past the %r px window"
          % (r["svg_width"], r["svg_right"], r["cols"], r["inner"]))
    return "diff: the API's refusal for a host without samples; %d rows and %d flame boxes " \
        "coloured by difference, within %r px" % (len(names), len(r["rects"]), r["inner"])


# The page's fetch, wrapped: every URL it asks for is recorded in
# window.tgFetched (DIFF_VIEW_JS hands back the diff view's own, the
# profile/diff URLs: the list's timed refresh may fetch between them), and the answers in window.tgStub (a URL part -> [HTTP
# status, JSON]) are given for the URLs holding that part, without the
# network; every other URL goes to the collector.
STUB_FETCH_JS = """
if (!window.tgRealFetch) window.tgRealFetch = window.fetch;
window.tgFetched = [];
window.tgStub = arguments[0];
window.fetch = (u, o) => {
  const url = String(u);
  window.tgFetched.push(url);
  for (const [part, [status, body]] of Object.entries(window.tgStub))
    if (url.includes(part))
      return Promise.resolve(new Response(JSON.stringify(body),
                                          {status: status,
                                           headers: {'Content-Type': 'application/json'}}));
  return window.tgRealFetch(u, o);
};
"""

# The diff view as a person sees it: its control, its head, its lines and
# rows, and where they end.
DIFF_VIEW_JS = """
const b = document.querySelector('#snapshots tr.detail[data-of="' + arguments[1] +
                                '"] .diff-view');
if (!b || b.dataset.host !== arguments[0]) return null;
const pick = b.querySelector('select.diff-against');
const head = b.querySelector('.diff-head'), past = b.querySelector('.diff-past');
const fail = b.querySelector('.diff-body .failure');
return {against: pick && pick.value, pick_right: pick && pick.getBoundingClientRect().right,
        options: pick ? Array.from(pick.options, (o) => o.value) : [],
        head: head && head.textContent, head_against: head && head.dataset.against,
        past: past && past.textContent, used: past && past.dataset.used,
        skipped: past && past.dataset.skipped, failure: fail && fail.textContent,
        coming: !head && !fail,
        rows: Array.from(b.querySelectorAll('table.diff-funcs tbody tr'), (tr) => tr.dataset.name),
        ths: Array.from(b.querySelectorAll('table.diff-funcs th'), (th) => th.textContent),
        cols: Array.from(b.querySelectorAll('table.diff-funcs th'),
                         (th) => th.getBoundingClientRect().right),
        made: !!b.querySelector('b.x, img'), ran: !!window.tgHostileRan,
        fetched: window.tgFetched.filter((u) => u.includes('/profile/diff')),
        inner: window.innerWidth};
"""


def check_diff_history(s, args):
    """A host against its own last N snapshots, from the diff view's
    control: choosing "its last 5 snapshots" asks the API for
    against=history&n=5 and shows its refusal (these hosts have no
    samples), with the control still there; "its last 10 snapshots",
    answered by a stand-in history diff, draws its rows in the API's order
    under a head that says it is against the host's own earlier
    snapshots, names the snapshots used and the ones skipped, keeps
    markup as text, and is still shown, unasked again, after the list's
    refresh; a 400 is shown as the view shows errors; "other hosts" asks
    for the peers again. Everything within the window."""
    d = api_get(args, "/api/v1/snapshots/" + args.snapshot)
    host = d["hosts"][0]["host"]
    base = "/api/v1/snapshots/%s/profile/diff?host=%s" % (
        args.snapshot, urllib.parse.quote(host, safe=""))
    hostile = ('<img src=x onerror="window.tgHostileRan=true"><script>'
               'window.tgHostileRan=true</script><b class="x">bold</b>')
    fixture = diff_fixture(hostile)
    fixture["host"]["name"] = hostile
    fixture["peers"] = {"count": 3, "too_few_samples": 0, "samples": 3000}
    used = ["00000000000000a3", "00000000000000a1", "<b class=\"x\">00a0</b>"]
    fixture.update({"against": "history", "snapshots": used, "snapshots_skipped": 2})
    refusal = {"error": "n: 1 to 20, with against=history"}
    s.js(STUB_FETCH_JS, {"&against=history&n=10": [200, fixture],
                         "&against=history&n=20": [400, refusal]})
    s.click('#snapshots tr[data-id="%s"] button.toggle' % args.snapshot)
    # Another snapshot's detail may be open above (check 8's): this one's.
    detail = '#snapshots tr.detail[data-of="%s"]' % args.snapshot
    sel = detail + ' tr[data-host="%s"] button.diff-host' % host
    wait_for("history: snapshot %s's detail offers its hosts' peers" % args.snapshot,
             lambda: s.js("return !!document.querySelector(arguments[0]);", sel))
    s.click(sel)
    peers = wait_for("history: the peers' refusal for %s" % host,
                     lambda: s.js(DIFF_VIEW_JS, host, args.snapshot), lambda g: g and g["failure"])
    check(peers["against"] == "peers" and peers["fetched"] == [base]
          and peers["options"] == ["peers", "history:1", "history:5", "history:10", "history:20"],
          "history: the view opens on %r, asked %r (want the peers, %r)"
          % (peers["against"], peers["fetched"], base))

    def choose(value, what, ready):
        s.click(detail + ' .diff-view select.diff-against option[value="%s"]' % value)
        return wait_for("history: %s" % what, lambda: s.js(DIFF_VIEW_JS, host, args.snapshot),
                        lambda g: g and g["against"] == value and not g["coming"] and ready(g))

    five = choose("history:5", "the API's refusal for the last 5 snapshots",
                  lambda g: g["failure"] and len(g["fetched"]) == 2)
    check(five["fetched"][1] == base + "&against=history&n=5"
          and "HTTP 409" in five["failure"] and "no CPU profile samples" in five["failure"],
          "history: the last 5 snapshots asked %r and read %r, not the API's 409"
          % (five["fetched"][1:], five["failure"]))
    ten = choose("history:10", "the history diff drawn", lambda g: g["head"])
    check(ten["fetched"][2:] == [base + "&against=history&n=10"],
          "history: the last 10 snapshots asked %r" % (ten["fetched"][2:],))
    check(ten["rows"] == [f["name"] for f in fixture["functions"]],
          "history: the rows are %r, the API's functions %r" % (ten["rows"], fixture["functions"]))
    check(ten["head_against"] == "history" and ten["head"].startswith(hostile + ": 1000 samples ")
          and "against the median of its own 3 earlier snapshots (3000 samples)" in ten["head"],
          "history: the head reads %r (%r)" % (ten["head"], ten["head_against"]))
    check(ten["used"] == "3" and ten["skipped"] == "2" and ", ".join(used) in ten["past"]
          and "2 skipped" in ten["past"],
          "history: the snapshots used read %r (%r used, %r skipped)"
          % (ten["past"], ten["used"], ten["skipped"]))
    check("past median" in ten["ths"] and "peers' median" not in ten["ths"],
          "history: the table's heads are %r" % (ten["ths"],))
    check(not ten["made"] and not ten["ran"],
          "history: a host's text became markup (%r)" % (ten["head"],))
    check(ten["pick_right"] <= ten["inner"] and all(c <= ten["inner"] for c in ten["cols"]),
          "history: the control (to %r) or the table (%r) is past the %r px window"
          % (ten["pick_right"], ten["cols"], ten["inner"]))
    s.js("document.querySelector(arguments[0]).scrollIntoView();", detail + " .diff-view")
    screenshot(s, "-history")
    # The list's refresh rebuilds the detail: the view comes back as it was.
    check(s.js("return load().then(() => true);"), "history: the list did not load again")
    again = wait_for("history: the view after the list's refresh",
                     lambda: s.js(DIFF_VIEW_JS, host, args.snapshot), lambda g: g and g["head"])
    check(again["against"] == "history:10" and again["rows"] == ten["rows"]
          and again["head"] == ten["head"]
          and not any("/profile/diff" in u for u in again["fetched"][3:]),
          "history: after the refresh the view is %r, asked %r"
          % (again["against"], again["fetched"][3:]))
    bad = choose("history:20", "a 400 shown", lambda g: g["failure"])
    check(bad["failure"].endswith(": HTTP 400: " + refusal["error"]) and not bad["rows"],
          "history: a 400 reads %r" % (bad["failure"],))
    back = choose("peers", "the peers again", lambda g: g["failure"])
    check(back["fetched"][-1] == base and "HTTP 409" in back["failure"],
          "history: other hosts asked %r and read %r" % (back["fetched"][-1], back["failure"]))
    s.js("window.fetch = window.tgRealFetch;")
    s.click('#snapshots tr[data-id="%s"] button.toggle' % args.snapshot)
    return "history: last 5 asked n=5 (API's 409 shown), last 10 drawn (%d rows, against " \
        "its own 3 snapshots, 2 skipped, markup as text) and kept over a refresh, a 400 shown, " \
        "back to the peers" % len(ten["rows"])


def check_store(s):
    got = s.js(STORE_JS)
    check(got["dir"]["hidden"], "store: a directory store shows the bucket's line")
    f = got["failing"]
    check(not f["hidden"] and f["state"] == "failing",
          "store: a failing bucket's line is hidden (state %r)" % f["state"])
    for want in ("s3://tg/fleet/", "failing", "PUT", "HTTP 503 SlowDown", "4 retries"):
        check(want in f["text"], "store: the line %r does not say %r" % (f["text"], want))
    check(f["color"] == "rgb(187, 0, 0)", "store: the line is %s, not red" % f["color"])
    check(f["right"] <= SCREEN_W, "store: the line ends at %r px" % f["right"])
    check(got["ok"]["hidden"], "store: the line stays once the bucket answers")
    return "store: no bucket line for a directory; a failing bucket's line in red; gone when ok"


def check_per_host(s, args, download_dir):
    """The partial snapshot's detail (open since check_partial): a host's
    download and Open give what the API's ?host= gives. Checked only where
    the API takes ?host= (a 400 naming the argument says it does not)."""
    d = api_get(args, "/api/v1/snapshots/" + args.partial)
    host = [h["host"] for h in d["hosts"] if h["outcome"] != "failed"][0]
    path = "/api/v1/snapshots/%s/trace?host=%s" % (args.partial, urllib.parse.quote(host, safe=""))
    try:
        want = http_get(args.url + path)
    except urllib.error.HTTPError as e:
        if e.code != 400:
            raise CheckFailed("per-host: GET %s: HTTP %d" % (path, e.code))
        return "per-host: not checked: the API answers ?host= with 400 (%s)" % (
            e.read().decode(errors="replace"),)
    want_sha = hashlib.sha256(want).hexdigest()
    for n in os.listdir(download_dir):
        os.remove(os.path.join(download_dir, n))
    row = '#snapshots tr.detail[data-of="%s"] tr[data-host="%s"]' % (args.partial, host)
    s.click(row + " a.download-host")
    names = wait_for("per-host: host %s's download finishes" % host,
                     lambda: sorted(os.listdir(download_dir)),
                     lambda ns: ns and not any(n.endswith(".crdownload") or n.startswith(".")
                                               for n in ns))
    check(len(names) == 1 and sha256_file(os.path.join(download_dir, names[0])) == want_sha,
          "per-host: host %s's download %r is not the API's %d bytes" % (host, names, len(want)))
    page = s.cmd("GET", "/window")
    before = set(s.handles())
    s.click(row + " button.open-host")
    new = wait_for("per-host: a new window after Open",
                   lambda: [h for h in s.handles() if h not in before])
    s.cmd("POST", "/window", {"handle": new[0]})
    got = wait_for("per-host: the stand-in UI receives host %s's trace" % host,
                   lambda: s.js(STAND_IN_JS), lambda g: g.get("sha256"))
    check(got["sha256"] == want_sha and host in got["title"],
          "per-host: the stand-in got %r, want host %s's %d bytes" % (got, host, len(want)))
    s.cmd("DELETE", "/window")
    s.cmd("POST", "/window", {"handle": page})
    return "per-host: host %s's download and Open give the API's %d bytes" % (host, len(want))


def screenshot(s, suffix=""):
    path = os.environ.get("TG_BROWSER_SCREENSHOT")
    if not path:
        return
    path = path[:-4] + suffix + path[-4:] if suffix and path.endswith(".png") else path + suffix
    with open(path, "wb") as f:
        f.write(base64.b64decode(s.cmd("GET", "/screenshot")))
    print("browser_check: screenshot in %s" % path, flush=True)


def page_ids(s):
    return s.js("return Array.from(document.querySelectorAll("
                "'#snapshots > tbody > tr[data-id]'), (tr) => tr.dataset.id);")


def set_input(s, css, value):
    e = s.find(css)
    s.cmd("POST", "/element/%s/clear" % e, {})
    if value:
        s.cmd("POST", "/element/%s/value" % e, {"text": value})


def check_filters(s, args):
    seen = []
    for trigger, host, state in [("", "", "partial"), ("nosuch", "", ""),
                                 ("", args.down, ""), ("operator", "", "complete")]:
        set_input(s, "#f-trigger", trigger)
        set_input(s, "#f-host", host)
        s.click('#f-state option[value="%s"]' % state)
        s.click('#filters button[type="submit"]')
        q = urllib.parse.urlencode([("limit", "100")] + [
            (k, v) for k, v in (("trigger", trigger), ("host", host), ("state", state)) if v])
        wait_for("filters: the page loads ?%s" % q,
                 lambda: s.js("return document.body.dataset.filter;"), lambda f: f == q)
        want = [x["id"] for x in api_get(args, "/api/v1/snapshots?" + q)["snapshots"]]
        got = page_ids(s)
        check(got == want, "filters: ?%s lists %r on the page, %r in the API" % (q, got, want))
        empty = s.js("return !document.querySelector('#empty').hidden;")
        check(empty == (not want), "filters: ?%s: 'no snapshot matches' shown %r for %d rows"
              % (q, empty, len(want)))
        seen.append("%s: %d" % (q, len(want)))
    counts = [int(x.rsplit(" ", 1)[1]) for x in seen]
    check(len(set(counts)) > 1, "filters: every filter listed as many rows: %r" % seen)
    s.click("#f-clear")
    wait_for("filters: Clear loads the whole list",
             lambda: s.js("return document.body.dataset.filter;"), lambda f: f == "limit=100")
    want = [x["id"] for x in api_get(args, "/api/v1/snapshots?limit=100")["snapshots"]]
    check(page_ids(s) == want, "filters: cleared, the page lists %r, the API %r"
          % (page_ids(s), want))
    return "filters: " + "; ".join(seen) + "; Clear lists all %d" % len(want)


STATUS_JS = """
const st = document.querySelector('#status');
const a = st.querySelector('a.fallback-download');
return {open: st.dataset.open || null, text: st.textContent,
        href: a ? a.getAttribute('href') : null};
"""


def open_ui_window(s, args):
    """Clicks the snapshot's Open; returns (the page's handle, the new
    window's)."""
    page = s.cmd("GET", "/window")
    before = set(s.handles())
    s.click('#snapshots tr[data-id="%s"] button.open-ui' % args.snapshot)
    new = wait_for("a new window after the click",
                   lambda: [h for h in s.handles() if h not in before])
    return page, new[0]


def close_window(s, page, win):
    s.cmd("POST", "/window", {"handle": win})
    s.cmd("DELETE", "/window")
    s.cmd("POST", "/window", {"handle": page})


def check_ui_silent(s, args, stand_in):
    stand_in.silent = True
    start = time.monotonic()
    page, win = open_ui_window(s, args)
    got = wait_for("ui-silent: #status says the UI did not answer",
                   lambda: s.js(STATUS_JS), lambda g: g["open"] == "silent",
                   timeout=UI_SILENT_S)
    took = time.monotonic() - start
    href = "/api/v1/snapshots/%s/trace" % args.snapshot
    check(got["href"] == href, "ui-silent: #status offers %r, want %r" % (got, href))
    s.cmd("POST", "/window", {"handle": win})
    pings = int(s.js("return document.body ? document.body.dataset.pings : '0';") or 0)
    s.cmd("POST", "/window", {"handle": page})
    check(pings >= 1, "ui-silent: the silent UI heard no PING")
    close_window(s, page, win)
    return "ui-silent: said after %.1f s (%d PINGs unanswered), download offered" % (took, pings)


def check_ui_unreachable(s, args, stand_in, download_dir, want_len, want_sha):
    stand_in.stop()
    for n in os.listdir(download_dir):
        os.remove(os.path.join(download_dir, n))
    start = time.monotonic()
    page, win = open_ui_window(s, args)
    s.cmd("POST", "/window", {"handle": page})
    got = wait_for("ui-unreachable: #status says the UI cannot be reached",
                   lambda: s.js(STATUS_JS), lambda g: g["open"] == "unreachable")
    took = time.monotonic() - start
    href = "/api/v1/snapshots/%s/trace" % args.snapshot
    check(got["href"] == href, "ui-unreachable: #status offers %r, want %r" % (got, href))
    s.click("#status a.fallback-download")
    name = "tracegate-%s.pftrace" % args.snapshot
    names = wait_for("ui-unreachable: the offered download finishes",
                     lambda: sorted(os.listdir(download_dir)),
                     lambda ns: ns and not any(n.endswith(".crdownload") or n.startswith(".")
                                               for n in ns))
    screenshot(s, "-offline")
    check(names == [name], "ui-unreachable: the download saved %r, want [%r]" % (names, name))
    path = os.path.join(download_dir, name)
    check(os.path.getsize(path) == want_len and sha256_file(path) == want_sha,
          "ui-unreachable: the offered download is not the snapshot's bytes")
    close_window(s, page, win)
    return "ui-unreachable: said after %.1f s; the offered download is the snapshot's %d bytes" % (
        took, want_len)
