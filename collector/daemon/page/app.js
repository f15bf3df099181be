// tracegate-collector's web page's script (page.c serves it at /app.js; the
// page's comment in page.c says what it does and why).
'use strict';
const $ = (s) => document.querySelector(s);

// "Open in Perfetto UI": how long the UI's window has to answer PING
// before the page says it did not, how long the reachability probe may
// take, and when the page stops pinging altogether.
const UI_ANSWER_MS = 10000;
const UI_PROBE_MS = 4000;
const UI_GIVE_UP_MS = 60000;
const LIST_LIMIT = 100;

const view = {
  filters: {trigger: '', host: '', state: ''},
  open: new Set(),      // snapshot ids whose detail is shown
  opened: new Set(),    // keys of cut texts shown whole
  details: new Map(),   // id -> GET /api/v1/snapshots/ID, once not pending
  triggers: new Set(),  // seen, for the trigger filter's suggestions
  diffs: new Map(),     // id -> the diff view shown in its detail (askDiff)
};

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function cell(tr, text, cls) {
  const td = el('td', cls, text);
  tr.appendChild(td);
  return td;
}
function size(b) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(1) : b) + ' ' + u[i];
}
const pad = (n) => String(n).padStart(2, '0');
// The browser's zone at that instant (daylight saving included): "UTC",
// or the offset from it.
function zone(d) {
  const m = -d.getTimezoneOffset();
  if (!m) return 'UTC';
  const a = Math.abs(m);
  return (m < 0 ? '-' : '+') + pad(Math.floor(a / 60)) + ':' + pad(a % 60);
}
function when(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
         pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + ' ' + zone(d);
}
function span(ms) {
  if (!(ms >= 0)) return '';
  if (ms < 1000) return ms + ' ms';
  const s = ms / 1000;
  if (s < 120) return s.toFixed(1) + ' s';
  const m = Math.floor(s / 60);
  return m < 120 ? m + ' min ' + Math.round(s % 60) + ' s'
                 : Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
}
// A time cell: local time with its zone; the UTC instant on hover.
function timeCell(tr, ms) {
  const td = cell(tr, when(ms), 'time');
  if (ms) td.title = new Date(ms).toISOString();
  return td;
}
// A text cut to one line; a click (or Enter) shows it whole, the title
// shows it on hover. |key| keeps it open across the list's refreshes.
function cut(text, key, cls) {
  const s = el('span', 'cut' + (cls ? ' ' + cls : ''), text);
  if (!text) return s;
  s.title = text;
  s.tabIndex = 0;
  s.setAttribute('role', 'button');
  const set = (open) => {
    s.classList.toggle('open', open);
    s.setAttribute('aria-expanded', String(open));
    if (s.parentElement) s.parentElement.classList.toggle('opened', open);
    if (key) { if (open) view.opened.add(key); else view.opened.delete(key); }
  };
  s.setAttribute('aria-expanded', 'false');
  if (key && view.opened.has(key)) {
    s.classList.add('open');
    s.setAttribute('aria-expanded', 'true');
    queueMicrotask(() => s.parentElement && s.parentElement.classList.add('opened'));
  }
  s.addEventListener('click', () => set(!s.classList.contains('open')));
  s.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); set(!s.classList.contains('open')); }
  });
  return s;
}
function cutCell(tr, text, key, cls) {
  const td = cell(tr, null, cls);
  td.appendChild(cut(text, key));
  return td;
}
// A host as people call it: its name when the collector knows one, else
// the address the fleet spells.
const hostLabel = (h) => h.name || h.host;
function problemText(p) {
  if (typeof p !== 'object' || p === null) return String(p);
  const code = typeof p.code === 'number' ? 'TG-' + p.code : p.code;
  const head = [code, p.data_source, p.kind && !p.data_source ? p.kind : '']
      .filter((x) => x).join(' ');
  return (head ? head + ': ' : '') + (p.why || '');
}
// A host's problems (a data source that failed to start, ...), in red,
// each cut; nothing when the API gives none.
function problemsInto(parent, problems, key) {
  if (!Array.isArray(problems)) return;
  problems.forEach((p, i) => parent.appendChild(cut(problemText(p), key + ':' + i, 'problem')));
}

// A host's perf boost (its row's `boost`): the sharp window with its span
// and rate, the failure's reason and code with its error, the snapshot
// that held the host's boost, or the budget that had no room for it; ''
// for a host without one. Every value is the API's or the host's: it goes
// into the page as text only.
function boostText(b) {
  // A window without a timed packet (no sample) has no span to show.
  if (b.state === 'sharp')
    return 'sharp ' + (b.first_ms ? span(b.last_ms - b.first_ms) + ' ' : '') + 'at ' +
           b.frequency_hz + ' Hz, ' + b.samples + ' samples' +
           (b.first_ms ? ', from ' + when(b.first_ms) : '');
  if (b.state === 'failed')
    return 'failed ' + b.reason + ' (' + b.code + ')' + (b.error ? ': ' + b.error : '');
  if (b.state === 'held') return 'held by snapshot ' + b.held_by;
  if (b.state === 'budget')
    return 'not boosted: ' + b.budget + ' budget (' + b.code + ') used ' + span(b.used_ms) +
           ' of ' + span(b.limit_ms) + (b.refill_in_ms >= 0
               ? ', room again ' + span(b.refill_in_ms) + ' after the trigger' : '');
  return String(b.state);
}
// A host's requests (its row's `links`: the merge's flows), or the
// snapshot's summed: how many it started and ended, and the ends whose
// other end is not in the snapshot; '' without them (an older row).
function requestsText(l) {
  if (typeof l !== 'object' || l === null) return '';
  return l.flows_started + ' started, ' + l.flows_terminated + ' ended, ' +
         l.flows_unmatched + ' unmatched';
}
// Into a host's cell: the requests, the counts also in data-across and
// data-unmatched (for tests and styles).
function requestsInto(td, l) {
  const t = requestsText(l);
  if (!t) return;
  td.textContent = t;
  td.dataset.across = String(l.flows_across);
  td.dataset.unmatched = String(l.flows_unmatched);
  td.title = l.flows_across + ' of them across hosts (started here, ended ' +
             'on another host); ' + l.mode + ' app tracks';
  if (l.flows_unmatched) td.classList.add('unmatched');
}
// Into a host's cell: the boost cut to one line, its state, reason and
// code also in the cell's data-boost, data-reason and data-code.
function boostInto(td, b, key) {
  if (typeof b !== 'object' || b === null) return;
  td.dataset.boost = String(b.state);
  if (b.reason) td.dataset.reason = String(b.reason);
  if (b.budget) td.dataset.budget = String(b.budget);
  if (b.code) td.dataset.code = String(b.code);
  const cls = b.state === 'failed' ? 'error' : b.state === 'sharp' ? 'ok' :
              b.state === 'budget' ? 'pending' : '';
  td.appendChild(cut(boostText(b), key, 'boost' + (cls ? ' ' + cls : '')));
}
// A snapshot's symbols (the answer's `symbols`): its state, with the
// counts once done and why once failed.
function symbolsNode(y, key) {
  if (typeof y !== 'object' || y === null) return null;
  let text = String(y.state);
  if (y.state === 'done' && y.frames !== undefined)
    text = 'done: ' + y.frames_named + ' of ' + y.frames + ' frames named (' +
           y.frames_with_line + ' with a line), ' + y.modules_found + ' of ' + y.modules +
           ' modules found, ' + size(y.bytes);
  else if (y.state === 'failed')
    text = 'failed: ' + (y.why || 'no reason recorded');
  const e = cut(text, key, 'symbols' + (y.state === 'failed' ? ' failure' : ''));
  e.dataset.state = String(y.state);
  return e;
}

function traceUrl(id, host) {
  return '/api/v1/snapshots/' + id + '/trace' + (host ? '?host=' + encodeURIComponent(host) : '');
}
function downloadLink(id, host, cls) {
  const a = el('a', cls, 'download');
  a.href = traceUrl(id, host);
  if (host) a.dataset.host = host;
  return a;
}
function openButton(id, host, cls) {
  const b = el('button', cls, host ? 'Open' : 'Open in Perfetto UI');
  if (host) b.dataset.host = host;
  b.title = 'Open ' + (host ? 'this host\'s part of ' : '') + 'snapshot ' + id +
            ' in the Perfetto UI at ' + document.body.dataset.ui;
  b.addEventListener('click', () => openInUi(id, host));
  return b;
}

// --- #status, and "Open in Perfetto UI" ------------------------------------------

// The latest "Open" owns #status; an older one's late news is dropped.
let uiAttempt = 0;
// #status: |text|, then a download link for |url| when given. Its
// data-open says the outcome of the last "Open" for a script to read:
// opening, opened, unreachable, silent, closed, blocked, failed.
function say(text, url, uiState) {
  const st = $('#status');
  st.replaceChildren(document.createTextNode(text));
  if (url) {
    const a = el('a', 'fallback-download', 'download the trace instead');
    a.href = url;
    st.appendChild(a);
  }
  if (uiState) st.dataset.open = uiState; else delete st.dataset.open;
}
// Whether the UI's server answers at all: one GET of the UI's URL without
// credentials, whose answer the page cannot read (no-cors) and does not
// need: an answer of any kind means the server is there, a network error
// that it is not (or that the browser would not let this page reach it).
// page.c puts the UI's origin in the policy's connect-src for this alone.
async function probeUi(ui) {
  // The policy does not name the UI's origin (page.c): a fetch would be
  // refused whatever the UI's state.
  if ($('#status').dataset.probe !== '1') return 'unknown';
  // An http: UI from an https: page is mixed content to fetch() but not
  // to a window: the probe could not tell.
  if (location.protocol === 'https:' && ui.startsWith('http:')) return 'unknown';
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), UI_PROBE_MS);
  try {
    await fetch(ui, {mode: 'no-cors', credentials: 'omit', cache: 'no-store',
                     referrerPolicy: 'no-referrer', signal: ctl.signal});
    return 'up';
  } catch (e) {
    return ctl.signal.aborted ? 'slow' : 'down';
  } finally {
    clearTimeout(t);
  }
}
// The UI's postMessage handshake (page.c): open the UI, PING it until it
// answers PONG, then hand it the trace. Meanwhile the probe and a
// deadline tell the person within seconds when the UI is not there, with
// the download offered instead; the handshake goes on until
// UI_GIVE_UP_MS, so a slow UI that answers late still gets the trace.
async function openInUi(id, host) {
  const attempt = ++uiAttempt;
  const mine = (fn) => (...a) => { if (attempt === uiAttempt) fn(...a); };
  const status = mine(say);
  const ui = document.body.dataset.ui;
  const url = traceUrl(id, host);
  const what = 'snapshot ' + id + (host ? ', host ' + host : '');
  let origin;
  try {
    origin = new URL(ui).origin;
  } catch (e) {
    status('the Perfetto UI\'s address (ui_url) ' + ui + ' does not parse', url, 'failed');
    return;
  }
  const win = window.open(ui);
  if (!win) {
    status('the browser blocked the Perfetto UI\'s window (allow pop-ups for this page)', url, 'blocked');
    return;
  }
  status('opening ' + what + ' in the Perfetto UI at ' + origin + '...', null, 'opening');
  let buffer = null, answered = false, over = false, warned = false;
  let ping = null;
  const timers = [];
  const onMessage = (e) => {
    if (e.origin !== origin || e.source !== win || e.data !== 'PONG') return;
    answered = true;
    deliver();
  };
  const end = () => {
    over = true;
    if (ping) clearInterval(ping);
    timers.forEach(clearTimeout);
    window.removeEventListener('message', onMessage);
  };
  const deliver = () => {
    if (over || !answered || !buffer) return;
    end();
    win.postMessage({perfetto: {buffer: buffer, title: 'tracegate ' + what,
                                fileName: 'tracegate-' + id +
                                    (host ? '-' + host.replace(/[^A-Za-z0-9.-]+/g, '_') : '') +
                                    '.pftrace'}}, origin);
    status(what + ' opened in the Perfetto UI at ' + origin, null, 'opened');
  };
  const warn = (text, uiState) => {
    if (over || warned) return;
    warned = true;
    status(text, url, uiState);
  };
  window.addEventListener('message', onMessage);
  probeUi(ui).then((r) => {
    if (r === 'down')
      warn('the Perfetto UI at ' + origin + ' cannot be reached from this browser ' +
           '(offline, or its address is wrong)', 'unreachable');
  });
  // Nothing will go to the window when the trace does not come: it is
  // closed, and the status says why.
  const failed = (why) => {
    end();
    win.close();
    status('download of ' + what + ' failed: ' + why, null, 'failed');
  };
  let resp;
  try {
    resp = await fetch(url);
    if (!resp.ok) {
      let j = null;
      try { j = await resp.json(); } catch (e) { /* no JSON reason */ }
      failed('HTTP ' + resp.status + (j && j.error ? ': ' + j.error : ''));
      return;
    }
    buffer = await resp.arrayBuffer();
  } catch (e) {
    failed(e.message);
    return;
  }
  if (over) return;
  // PING from now on, and count the UI's time to answer from now: the
  // trace's download is not the UI's delay.
  timers.push(setTimeout(() => warn('the Perfetto UI at ' + origin + ' has not answered in ' +
                                    UI_ANSWER_MS / 1000 + ' s (offline, or ui_url is not a ' +
                                    'Perfetto UI?)', 'silent'), UI_ANSWER_MS));
  timers.push(setTimeout(end, UI_GIVE_UP_MS));
  ping = setInterval(() => {
    if (win.closed) {
      end();
      status('the Perfetto UI\'s window was closed before it took ' + what, url, 'closed');
      return;
    }
    win.postMessage('PING', origin);
  }, 100);
}

// --- the snapshots and their detail ----------------------------------------------

function listQuery() {
  const q = new URLSearchParams({limit: String(LIST_LIMIT)});
  for (const [k, v] of Object.entries(view.filters)) if (v) q.set(k, v);
  return q.toString();
}
async function getJson(path) {
  const r = await fetch(path);
  let j = null;
  try { j = await r.json(); } catch (e) { /* not JSON: said below */ }
  if (!r.ok) throw new Error(path + ': HTTP ' + r.status + (j && j.error ? ': ' + j.error : ''));
  if (!j) throw new Error(path + ': the answer is not JSON');
  return j;
}
// At most DETAIL_FETCHES snapshot reads in flight: a list of many
// partial snapshots reads each once (then from view.details), a few at a
// time, well under the collector's connections per client.
const DETAIL_FETCHES = 4;
let detailsInFlight = 0;
const detailsWaiting = [];
async function detailOf(x) {
  const have = view.details.get(x.id);
  if (have) return have;
  if (detailsInFlight >= DETAIL_FETCHES)
    await new Promise((go) => detailsWaiting.push(go));
  detailsInFlight++;
  try {
    const again = view.details.get(x.id); // read while this one waited
    if (again) return again;
    const d = await getJson('/api/v1/snapshots/' + x.id);
    if (d.snapshot && d.snapshot.state !== 'pending') view.details.set(x.id, d);
    return d;
  } finally {
    detailsInFlight--;
    const next = detailsWaiting.shift();
    if (next) next();
  }
}
// What a partial or failed snapshot's hosts say: each host that failed
// (or failed part-way) and why, and each data source that failed.
function whyInto(td, d) {
  td.replaceChildren();
  const hosts = Array.isArray(d.hosts) ? d.hosts : [];
  let n = 0;
  for (const h of hosts) {
    const bad = h.outcome && h.outcome !== 'ok';
    const problems = Array.isArray(h.problems) ? h.problems : [];
    if (!bad && !problems.length) continue;
    const line = el('div', 'host-why');
    line.dataset.host = h.host;
    line.appendChild(el('b', null, hostLabel(h)));
    line.appendChild(document.createTextNode(bad ? ' ' + h.outcome + ': ' : ': '));
    if (bad) line.appendChild(cut(h.error || 'no reason recorded', 'why:' + d.snapshot.id + ':' + h.host, 'error'));
    problemsInto(line, problems, 'wp:' + d.snapshot.id + ':' + h.host);
    td.appendChild(line);
    n++;
  }
  if (!n) td.appendChild(el('span', 'note', 'no host failed'));
}
function dlRow(dl, term, value) {
  if (value === undefined || value === null || value === '') return;
  dl.appendChild(el('dt', null, term));
  const dd = el('dd');
  if (value instanceof Node) dd.appendChild(value); else dd.textContent = String(value);
  dl.appendChild(dd);
}
function detailInto(td, d) {
  td.replaceChildren();
  const s = d.snapshot || {};
  const dl = el('dl');
  dlRow(dl, 'started', when(s.started_ms));
  dlRow(dl, 'finished', s.finished_ms ? when(s.finished_ms) + ' (' + span(s.finished_ms - s.started_ms) + ')' : '');
  dlRow(dl, 'trigger', s.trigger + (s.origin ? ' @ ' + s.origin : ''));
  if (s.reason) dlRow(dl, 'reason', el('span', 'whole', s.reason));
  dlRow(dl, 'state', s.state + (s.pinned ? ' (pinned)' : ''));
  if (s.failure) dlRow(dl, 'failure', el('span', 'whole failure', s.failure));
  if (s.state === 'complete' || s.state === 'partial') {
    dlRow(dl, 'size', size(s.bytes) + ', ' + s.packets + ' packets, crc32 ' +
          (s.crc32 >>> 0).toString(16).padStart(8, '0'));
  }
  dlRow(dl, 'loss', s.loss);
  if (s.links) {
    const r = el('span', 'requests', s.links.flows_across + ' across hosts (' +
                 requestsText(s.links) + ')');
    r.dataset.across = String(s.links.flows_across);
    r.dataset.unmatched = String(s.links.flows_unmatched);
    dlRow(dl, 'requests', r);
  }
  dlRow(dl, 'symbols', symbolsNode(d.symbols, 'sym:' + s.id));
  td.appendChild(dl);
  const hosts = Array.isArray(d.hosts) ? d.hosts : [];
  if (!hosts.length) { td.appendChild(el('p', 'note', 'no host rows')); return; }
  const t = el('table', 'snap-hosts');
  const cg = el('colgroup');
  for (const c of ['d-host', 'd-outcome', '', 'd-n', 'd-n', 'd-n', 'd-window', 'd-req', 'd-boost',
                   'd-trace'])
    cg.appendChild(el('col', c));
  t.appendChild(cg);
  const head = el('tr');
  for (const [h, c] of [['host'], ['outcome'], ['error, problems'], ['size', 'n'], ['packets', 'n'],
                        ['loss', 'n'], ['window'], ['requests'], ['perf boost'], ['trace']])
    head.appendChild(el('th', c, h));
  t.appendChild(el('thead')).appendChild(head);
  const body = t.appendChild(el('tbody'));
  for (const h of hosts) {
    const tr = el('tr');
    tr.dataset.host = h.host;
    const hc = cell(tr, hostLabel(h));
    hc.title = h.host;
    cell(tr, h.outcome, h.outcome);
    const why = cell(tr, null);
    if (h.error) why.appendChild(cut(h.error, 'he:' + s.id + ':' + h.host, 'error'));
    problemsInto(why, h.problems, 'hp:' + s.id + ':' + h.host);
    const data = h.outcome !== 'failed';
    cell(tr, data ? size(h.bytes) : '', 'n');
    cell(tr, data ? h.packets : '', 'n');
    cell(tr, h.loss, 'n' + (h.loss ? ' lossy' : ''));
    const w = cell(tr, h.window_first_ms ? when(h.window_first_ms) + ' + ' +
                       span(h.window_last_ms - h.window_first_ms) : '', 'window');
    if (h.window_first_ms)
      w.title = new Date(h.window_first_ms).toISOString() + ' .. ' +
                new Date(h.window_last_ms).toISOString();
    requestsInto(cell(tr, null, 'requests'), h.links);
    boostInto(cell(tr, null, 'boost'), h.boost, 'hb:' + s.id + ':' + h.host);
    const tc = cell(tr, null);
    if (data && (s.state === 'complete' || s.state === 'partial')) {
      tc.appendChild(downloadLink(s.id, h.host, 'download-host'));
      tc.appendChild(document.createTextNode(' '));
      tc.appendChild(openButton(s.id, h.host, 'open-host'));
      const cmp = el('button', 'link diff-host', 'peers');
      cmp.title = 'compare this host\'s CPU profile with the median of the other hosts ' +
                  '(or, chosen below, of its own earlier snapshots)';
      cmp.addEventListener('click', () => askDiff(s.id, h, 'peers'));
      tc.appendChild(cmp);
    }
    body.appendChild(tr);
  }
  td.appendChild(t);
  if (d.hosts_truncated)
    td.appendChild(el('p', 'note', 'only the first ' + hosts.length + ' hosts are shown'));
  const v = view.diffs.get(s.id);
  if (v) diffViewInto(td, s.id, v);
}

// --- a host against its peers or its past (GET .../profile/diff) -----------------

const DIFF_ROWS = 40;       // functions listed, largest difference first
const FLAME_W = 1000;       // the flame graph's user units across
const FLAME_ROW = 17;       // one call depth
const FLAME_DEPTH = 48;     // deeper paths are left out (and said so)
const FLAME_FULL = 0.1;     // a difference of 10 points of share: full colour
// What the host is compared with (the control above the view's head):
// "peers", the snapshot's other hosts, or "history:N", the host's own
// last N snapshots before this one (the API's against=history&n=N, N 1
// to 20). A few N, not any: each is N parts read on the collector.
const DIFF_AGAINST = [['peers', 'other hosts'], ['history:1', 'its last snapshot'],
                      ['history:5', 'its last 5 snapshots'],
                      ['history:10', 'its last 10 snapshots'],
                      ['history:20', 'its last 20 snapshots']];
const pct = (v) => (100 * v).toFixed(2) + '%';
const signed = (v) => (v > 0 ? '+' : '') + (100 * v).toFixed(2) + '%';
// What the median is of, in the view's words: the snapshot's other hosts,
// or the host's own earlier snapshots (the answer's `against`).
const pastOf = (d) => d.against === 'history';
const medianName = (d) => pastOf(d) ? 'past median' : 'peers\' median';
// Red for a share the host has more of than the median, blue for
// less, white for the same.
function diffColour(diff) {
  const t = Math.min(1, Math.abs(diff) / FLAME_FULL);
  const fade = Math.round(245 - 135 * t);
  return diff > 0 ? 'rgb(245,' + fade + ',' + fade + ')' : 'rgb(' + fade + ',' + fade + ',245)';
}
const SVG = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}
function funcName(f) {
  return f ? f.name + (f.file ? ' ' + f.file : '') : 'all';
}
// The host's call tree as an icicle (the root on top), each box as wide
// as the host's share through that path, coloured by the path's
// difference with the peers' median. The tree comes parent first.
function flameInto(box, d) {
  const tree = Array.isArray(d.tree) ? d.tree : [];
  const funcs = Array.isArray(d.functions) ? d.functions : [];
  const kids = tree.map(() => []);
  tree.forEach((n, i) => { if (i && n.parent !== null && kids[n.parent]) kids[n.parent].push(i); });
  const x = new Array(tree.length).fill(0), depth = new Array(tree.length).fill(0);
  let deepest = 0, cut = 0;
  const g = svgEl('g', {});
  for (let i = 0; i < tree.length; i++) {
    const n = tree[i];
    if (i) depth[i] = depth[n.parent] + 1;
    let at = x[i];
    kids[i].sort((a, b) => tree[b].host_share - tree[a].host_share);
    for (const k of kids[i]) { x[k] = at; at += tree[k].host_share; }
    const w = n.host_share * FLAME_W;
    if (w <= 0) continue;
    if (depth[i] >= FLAME_DEPTH) { cut++; continue; }
    deepest = Math.max(deepest, depth[i]);
    const f = i ? funcs[n.function] : null;
    const r = svgEl('rect', {x: x[i] * FLAME_W, y: depth[i] * FLAME_ROW, width: w,
                             height: FLAME_ROW - 1, fill: diffColour(n.diff)});
    r.setAttribute('class', 'flame-box');
    const tip = svgEl('title', {});
    tip.textContent = funcName(f) + ': host ' + pct(n.host_share) + ' (' + n.host_samples +
      ' samples), ' + medianName(d) + ' ' + pct(n.peers_median_share) + ' (' + n.peers_samples +
      ' samples), ' + signed(n.diff);
    r.appendChild(tip);
    g.appendChild(r);
    if (w > 40) {
      const t = svgEl('text', {x: x[i] * FLAME_W + 3, y: depth[i] * FLAME_ROW + 12});
      t.textContent = funcName(f).slice(0, Math.floor(w / 6.5));
      g.appendChild(t);
    }
  }
  const svg = svgEl('svg', {viewBox: '0 0 ' + FLAME_W + ' ' + (deepest + 1) * FLAME_ROW,
                            preserveAspectRatio: 'none', role: 'img'});
  svg.setAttribute('class', 'flame');
  svg.setAttribute('height', String((deepest + 1) * FLAME_ROW));
  svg.appendChild(g);
  box.appendChild(svg);
  const notes = [];
  if (d.tree_pruned) notes.push(d.tree_pruned + ' call paths under ' + pct(d.tree_min_share) + ' on both sides left out');
  if (cut) notes.push(cut + ' paths deeper than ' + FLAME_DEPTH + ' not drawn');
  notes.push('red: more than the ' + medianName(d) + ', blue: less; paths the host lacks are in ' +
             'the table only');
  box.appendChild(el('p', 'note', notes.join('; ')));
}
function diffTableInto(box, d) {
  const funcs = Array.isArray(d.functions) ? d.functions : [];
  const t = el('table', 'diff-funcs');
  const cg = el('colgroup');
  for (const c of ['f-name', 'f-n', 'f-n', 'f-n', 'f-n', 'f-n', 'f-n']) cg.appendChild(el('col', c));
  t.appendChild(cg);
  const head = el('tr');
  const past = pastOf(d);
  for (const [h, c] of [['function'], ['diff (self)', 'n'], ['host', 'n'], [medianName(d), 'n'],
                        ['host samples', 'n'], [past ? 'past samples' : 'peers\' samples', 'n'],
                        ['diff (total)', 'n']])
    head.appendChild(el('th', c, h));
  t.appendChild(el('thead')).appendChild(head);
  const body = t.appendChild(el('tbody'));
  for (const f of funcs.slice(0, DIFF_ROWS)) {
    const tr = el('tr', 'diff-row');
    tr.dataset.name = f.name;
    const nc = cell(tr, funcName(f), f.pseudo ? 'pseudo' : null);
    nc.title = funcName(f);
    const dc = cell(tr, signed(f.diff), 'n ' + (f.significant ? (f.diff > 0 ? 'grew' : 'shrank') : 'same'));
    if (f.significant) dc.title = 'beyond ' + d.rule.z + ' standard errors at the host\'s samples';
    cell(tr, pct(f.host_share), 'n');
    cell(tr, pct(f.peers_median_share), 'n');
    cell(tr, f.host_samples, 'n');
    cell(tr, f.peers_samples, 'n');
    cell(tr, signed(f.diff_total), 'n' + (f.significant_total ? (f.diff_total > 0 ? ' grew' : ' shrank') : ''));
    body.appendChild(tr);
  }
  box.appendChild(t);
  if (funcs.length > DIFF_ROWS)
    box.appendChild(el('p', 'note', 'the ' + DIFF_ROWS + ' largest differences of ' + funcs.length +
                                    ' functions (the API gives all)'));
}
function diffInto(box, d) {
  box.replaceChildren();
  const h = d.host || {}, p = d.peers || {}, past = pastOf(d);
  const head = el('p', 'diff-head');
  head.dataset.against = String(d.against || 'peers');
  head.appendChild(el('b', null, h.name || 'machine ' + h.machine_id));
  head.appendChild(document.createTextNode(': ' + h.samples + ' samples against the median of ' +
    (past ? 'its own ' + p.count + ' earlier snapshots' : p.count + ' peers') + ' (' + p.samples +
    ' samples); shares of ' + (h.shares_of === 'samples' ? 'samples' : 'CPU time') +
    ', self time first'));
  box.appendChild(head);
  if (past) {
    // Which of the host's snapshots before this one made the median, and
    // how many the collector could not use.
    const ids = Array.isArray(d.snapshots) ? d.snapshots : [];
    const used = el('p', 'note diff-past', (ids.length ? 'its snapshots used: ' +
      ids.join(', ') : 'no earlier snapshot of this host with samples: every median is 0') +
      (d.snapshots_skipped ? '; ' + d.snapshots_skipped + ' skipped (unreadable, or without ' +
                             'the host\'s samples)' : ''));
    used.dataset.used = String(ids.length);
    used.dataset.skipped = String(d.snapshots_skipped || 0);
    box.appendChild(used);
  }
  if (h.too_few_samples)
    box.appendChild(el('p', 'error few', 'too few samples (under ' + d.rule.min_samples +
                                         '): no difference is significant'));
  if (p.too_few_samples)
    box.appendChild(el('p', 'note', p.too_few_samples + (past ? ' earlier snapshots' : ' peers') +
                                    ' under ' + d.rule.min_samples +
                                    ' samples left out of the median'));
  const odd = [];
  if (h.no_callstack) odd.push(h.no_callstack + ' without a callstack');
  if (h.with_unnamed_frame) odd.push(h.with_unnamed_frame + ' with an unnamed frame');
  if (h.skipped) odd.push(h.skipped + ' skipped');
  if (odd.length) box.appendChild(el('p', 'note', 'of the host\'s samples: ' + odd.join(', ') +
                                                  ' (rows of their own)'));
  flameInto(box, d);
  diffTableInto(box, d);
}
// The diff view shown in a snapshot's detail (view.diffs, by snapshot
// id): its host, what it is compared with (a DIFF_AGAINST value) and,
// once answered, the answer or the error. It is kept outside the DOM
// because the list's refresh rebuilds the detail: detailInto() draws it
// again from here, without asking again. A later choice replaces the
// entry, so an earlier answer that comes late finds it is not wanted.
const diffPath = (id, h, against) => {
  const [kind, n] = against.split(':');
  return '/api/v1/snapshots/' + id + '/profile/diff?host=' + encodeURIComponent(h.host) +
         (kind === 'history' ? '&against=history&n=' + encodeURIComponent(n) : '');
};
// Into the view's body: the answer, the error, or that it is coming.
function diffBodyInto(body, v) {
  if (v.answer) diffInto(body, v.answer);
  else if (v.error) body.replaceChildren(el('p', 'failure', v.error));
  else body.replaceChildren(el('p', 'note', 'comparing ' + hostLabel(v.h) + ' with ' +
    DIFF_AGAINST.find(([k]) => k === v.against)[1] + '...'));
}
// The view under the detail's hosts in |td|: a control to pick what the
// host is compared with, then the answer.
function diffViewInto(td, id, v) {
  let box = td.querySelector('.diff-view');
  if (!box) { box = el('div', 'diff-view'); td.appendChild(box); }
  box.dataset.host = v.h.host;
  const pick = el('select', 'diff-against');
  for (const [k, text] of DIFF_AGAINST) {
    const o = el('option', null, text);
    o.value = k;
    pick.appendChild(o);
  }
  pick.value = v.against;
  const label = el('label', null, 'compare ' + hostLabel(v.h) + ' with ');
  label.appendChild(pick);
  const body = el('div', 'diff-body');
  box.replaceChildren(el('p', 'bar diff-bar'), body);
  box.firstChild.appendChild(label);
  pick.addEventListener('change', () => askDiff(id, v.h, pick.value));
  diffBodyInto(body, v);
}
// Asks the API for host |h| of snapshot |id| against |against|, and
// shows it in the detail that is there when the answer comes (if that
// view still wants it: a later choice wins).
function askDiff(id, h, against) {
  const v = {h: h, against: against, answer: null, error: null};
  view.diffs.set(id, v);
  const current = () => {
    const row = document.querySelector('#snapshots tr.detail[data-of="' + CSS.escape(id) + '"]');
    return view.diffs.get(id) === v && row ? row.cells[0] : null;
  };
  const td = current();
  if (td) diffViewInto(td, id, v);
  getJson(diffPath(id, h, against))
    .then((d) => { v.answer = d; })
    .catch((e) => { v.error = String(e.message || e); })
    .then(() => {
      const now = current();
      const body = now && now.querySelector('.diff-view .diff-body');
      if (body) diffBodyInto(body, v);
    });
}
function fill(td, x, into) {
  detailOf(x).then((d) => into(td, d)).catch((e) => {
    td.replaceChildren(el('span', 'failure', String(e.message || e)));
  });
}
// The detail goes under the snapshot's row and its failed hosts' row,
// as snapshotRows() puts it.
function toggleDetail(x, tr, button) {
  let last = tr;
  while (last.nextElementSibling && last.nextElementSibling.dataset.of === x.id)
    last = last.nextElementSibling;
  if (view.open.has(x.id)) {
    view.open.delete(x.id);
    view.diffs.delete(x.id);
    if (last.classList.contains('detail')) last.remove();
    button.setAttribute('aria-expanded', 'false');
    return;
  }
  view.open.add(x.id);
  button.setAttribute('aria-expanded', 'true');
  last.after(detailRow(x));
}
function detailRow(x) {
  const tr = el('tr', 'detail');
  tr.dataset.of = x.id;
  const td = cell(tr, 'loading...');
  td.colSpan = 9;
  fill(td, x, detailInto);
  return tr;
}
function snapshotRows(x) {
  view.triggers.add(x.trigger);
  const rows = [];
  const tr = el('tr', 'snapshot');
  tr.dataset.id = x.id;
  tr.dataset.state = x.state;
  const idc = cell(tr, null);
  const b = el('button', 'link toggle id', x.id);
  b.setAttribute('aria-expanded', String(view.open.has(x.id)));
  b.title = 'this snapshot\'s hosts, outcomes, windows, loss and problems';
  b.addEventListener('click', () => toggleDetail(x, tr, b));
  idc.appendChild(b);
  timeCell(tr, x.started_ms);
  cutCell(tr, x.trigger + (x.origin ? ' @ ' + x.origin : ''), 'trigger:' + x.id);
  cutCell(tr, x.reason, 'reason:' + x.id, 'reason');
  cell(tr, x.state + (x.pinned ? ' (pinned)' : ''), 'state ' + x.state);
  const live = x.state === 'complete' || x.state === 'partial';
  cell(tr, x.hosts ? (x.hosts - x.hosts_failed) + '/' + x.hosts : '', 'n' + (x.hosts_failed ? ' partial' : ''));
  cell(tr, live ? size(x.bytes) : '', 'n');
  cell(tr, x.loss, 'n' + (x.loss ? ' lossy' : ''));
  const td = cell(tr, null, 'trace');
  if (x.failure) td.appendChild(cut(x.failure, 'failure:' + x.id, 'failure'));
  if (live) {
    td.appendChild(downloadLink(x.id, null, 'download'));
    td.appendChild(document.createTextNode(' '));
    td.appendChild(openButton(x.id, null, 'open-ui'));
  }
  rows.push(tr);
  // A snapshot that lost hosts names each one and why, under its row.
  if (x.hosts_failed > 0) {
    const why = el('tr', 'why');
    why.dataset.of = x.id;
    const wtd = cell(why, '...');
    wtd.colSpan = 9;
    fill(wtd, x, whyInto);
    rows.push(why);
  }
  if (view.open.has(x.id)) rows.push(detailRow(x));
  return rows;
}

// --- the hosts -------------------------------------------------------------------

// A host's perf boost budget (/api/v1/hosts' `boost`, null without a
// boost): what it used of its share in the window, the boosts its budgets
// refused, and when one fits again if none does now. The cell's data-used-ms,
// data-limit-ms and data-refused hold the numbers.
function budgetInto(td, b) {
  if (typeof b !== 'object' || b === null) return;
  td.dataset.usedMs = String(b.used_ms);
  td.dataset.limitMs = String(b.limit_ms);
  td.dataset.refused = String(b.refused);
  const full = b.refill_in_ms > 0;
  const text = span(b.used_ms) + ' of ' + span(b.limit_ms) + ' in ' + span(b.window_ms) +
               (b.refused ? ', ' + b.refused + ' refused' : '') +
               (full ? '; room again in ' + span(b.refill_in_ms) : '');
  td.appendChild(el('span', full ? 'pending' : '', text));
  td.title = 'boosted ' + span(b.boosted_ms) + ' in all';
}

function hostRow(x) {
  const tr = el('tr');
  tr.dataset.host = x.host;
  const label = hostLabel(x);
  const hc = cell(tr, label + (x.hostname && x.hostname !== label ? ' (' + x.hostname + ')' : ''));
  hc.title = [...new Set([x.name, x.host, x.hostname].filter((v) => v))].join(', ');
  const sc = cell(tr, x.state, x.state);
  if (x.restarts || x.failures)
    sc.title = (x.restarts || 0) + ' restarts, ' + (x.failures || 0) + ' failures';
  timeCell(tr, x.since_ms);
  cutCell(tr, x.why, 'hwhy:' + x.host, x.state === 'tracing' ? '' : 'error');
  const pc = cell(tr, null, 'problems');
  problemsInto(pc, x.problems, 'hprob:' + x.host);
  budgetInto(cell(tr, null, 'boost'), x.boost);
  return tr;
}

// --- the filters -----------------------------------------------------------------

// The filters live in the page's fragment (#trigger=..&host=..&state=..):
// a filtered view can be bookmarked, and the page itself takes no query.
function filtersFromHash() {
  const q = new URLSearchParams(location.hash.slice(1));
  for (const k of Object.keys(view.filters)) view.filters[k] = q.get(k) || '';
  $('#f-trigger').value = view.filters.trigger;
  $('#f-host').value = view.filters.host;
  $('#f-state').value = view.filters.state;
}
function applyFilters() {
  view.filters.trigger = $('#f-trigger').value.trim();
  view.filters.host = $('#f-host').value.trim();
  view.filters.state = $('#f-state').value;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(view.filters)) if (v) q.set(k, v);
  const hash = q.toString();
  history.replaceState(null, '', hash ? '#' + hash : location.pathname);
  load().catch(showError);
}
// A datalist's suggestions: [value, label] pairs, by value.
function options(list, pairs) {
  list.replaceChildren(...[...pairs].sort((a, b) => a[0].localeCompare(b[0])).map(([v, l]) => {
    const o = el('option');
    o.value = v;
    if (l && l !== v) o.label = l;
    return o;
  }));
}

// --- loading ---------------------------------------------------------------------

// The snapshot bucket's line (/api/v1/store): shown while the bucket
// retries or fails, hidden while it answers and for a directory store.
function storeLine(st) {
  const p = $('#store');
  p.dataset.state = st.state;
  p.hidden = st.state === 'ok';
  if (p.hidden) return;
  const e = st.last_error;
  let text = 'snapshot bucket ' + st.bucket + ': ' + st.state + ' since ' + when(st.since_ms);
  if (e) text += '; last error ' + when(e.at_ms) + ': ' + e.method + ' ' +
                 (e.status ? 'HTTP ' + e.status + (e.code ? ' ' + e.code : '') : 'no answer') +
                 ' (' + e.error + ')';
  text += '; ' + st.retries + ' retries, ' + st.failures + ' failed requests';
  p.textContent = text;
}

let loading = 0;
async function load() {
  const gen = ++loading;
  const [s, h, st] = await Promise.all([getJson('/api/v1/snapshots?' + listQuery()),
                                        getJson('/api/v1/hosts'), getJson('/api/v1/store')]);
  if (gen !== loading) return; // a newer load (a filter changed) wins
  storeLine(st);
  const listed = new Set(s.snapshots.map((x) => x.id));
  for (const id of view.details.keys()) if (!listed.has(id)) view.details.delete(id);
  for (const id of view.diffs.keys()) if (!listed.has(id)) view.diffs.delete(id);
  const sb = $('#snapshots tbody');
  sb.replaceChildren(...s.snapshots.flatMap(snapshotRows));
  $('#empty').hidden = s.snapshots.length > 0;
  const hb = $('#hosts tbody');
  hb.replaceChildren(...h.hosts.map(hostRow));
  options($('#triggers'), [...view.triggers].map((t) => [t]));
  // The list filters by the address a snapshot's hosts are spelt with;
  // a host's name is the suggestion's label.
  options($('#host-specs'), h.hosts.map((x) => [x.host, x.name]));
  document.body.dataset.loaded = '1';
  document.body.dataset.filter = listQuery();
}
function showError(e) {
  say(String(e.message || e));
}

$('#zone').textContent = 'times in ' + (Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time') +
                         ' (' + zone(new Date()) + ')';
$('#filters').addEventListener('submit', (e) => { e.preventDefault(); applyFilters(); });
$('#f-state').addEventListener('change', applyFilters);
$('#f-clear').addEventListener('click', () => {
  $('#f-trigger').value = $('#f-host').value = $('#f-state').value = '';
  applyFilters();
});
window.addEventListener('hashchange', () => { filtersFromHash(); load().catch(showError); });
$('#snap').addEventListener('click', async () => {
  say('snapshotting...');
  const r = await fetch('/api/v1/snapshots?wait=1&reason=web+page', {method: 'POST'});
  const j = await r.json();
  say(r.ok ? 'snapshot ' + j.snapshot.id + ': ' + j.snapshot.state : 'refused: ' + j.error);
  load().catch(showError);
});
filtersFromHash();
load().catch(showError);
setInterval(() => load().catch(() => {}), 10000);
