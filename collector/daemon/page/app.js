// tracegate-collector's web page's script (page.c serves it at /app.js; the
// page's comment in page.c says what it does and why).
'use strict';
const $ = (s) => document.querySelector(s);
function cell(tr, text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}
function size(b) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(1) : b) + ' ' + u[i];
}
function when(ms) { return ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : ''; }
async function openInUi(id) {
  const ui = document.body.dataset.ui;
  const origin = new URL(ui).origin;
  const win = window.open(ui);
  if (!win) { $('#status').textContent = 'the browser blocked the UI window'; return; }
  const resp = await fetch('/api/v1/snapshots/' + id + '/trace');
  if (!resp.ok) { $('#status').textContent = 'download failed: ' + resp.status; return; }
  const buffer = await resp.arrayBuffer();
  const ping = setInterval(() => win.postMessage('PING', origin), 50);
  const onMessage = (e) => {
    if (e.origin !== origin || e.source !== win || e.data !== 'PONG') return;
    clearInterval(ping);
    window.removeEventListener('message', onMessage);
    win.postMessage({perfetto: {buffer: buffer, title: 'tracegate snapshot ' + id,
                                fileName: 'tracegate-' + id + '.pftrace'}}, origin);
  };
  window.addEventListener('message', onMessage);
  setTimeout(() => clearInterval(ping), 60000);
}
async function load() {
  const [s, h] = await Promise.all([
    fetch('/api/v1/snapshots?limit=100').then((r) => r.json()),
    fetch('/api/v1/hosts').then((r) => r.json())]);
  const sb = $('#snapshots tbody');
  sb.replaceChildren();
  for (const x of s.snapshots) {
    const tr = document.createElement('tr');
    tr.dataset.id = x.id;
    cell(tr, x.id);
    cell(tr, when(x.started_ms));
    cell(tr, x.trigger + (x.origin ? ' @ ' + x.origin : ''));
    cell(tr, x.reason);
    cell(tr, x.state + (x.pinned ? ' (pinned)' : ''), x.state);
    const live = x.state === 'complete' || x.state === 'partial';
    cell(tr, x.hosts ? (x.hosts - x.hosts_failed) + '/' + x.hosts : '', 'n');
    cell(tr, live ? size(x.bytes) : '', 'n');
    cell(tr, x.loss, 'n');
    const td = cell(tr, '');
    if (x.failure) { td.textContent = x.failure; td.className = 'failure'; }
    if (live) {
      const a = document.createElement('a');
      a.href = '/api/v1/snapshots/' + x.id + '/trace';
      a.textContent = 'download';
      a.className = 'download';
      td.appendChild(a);
      td.appendChild(document.createTextNode(' '));
      const b = document.createElement('button');
      b.textContent = 'Open in Perfetto UI';
      b.className = 'open-ui';
      b.addEventListener('click', () => openInUi(x.id));
      td.appendChild(b);
    }
    sb.appendChild(tr);
  }
  const hb = $('#hosts tbody');
  hb.replaceChildren();
  for (const x of h.hosts) {
    const tr = document.createElement('tr');
    cell(tr, x.host + (x.hostname && x.hostname !== x.host ? ' (' + x.hostname + ')' : ''));
    cell(tr, x.state, x.state);
    cell(tr, when(x.since_ms));
    cell(tr, x.why);
    hb.appendChild(tr);
  }
  document.body.dataset.loaded = '1';
}
$('#snap').addEventListener('click', async () => {
  $('#status').textContent = 'snapshotting...';
  const r = await fetch('/api/v1/snapshots?wait=1&reason=web+page', {method: 'POST'});
  const j = await r.json();
  $('#status').textContent = r.ok ? 'snapshot ' + j.snapshot.id + ': ' + j.snapshot.state
                                  : 'refused: ' + j.error;
  load();
});
load().catch((e) => { $('#status').textContent = String(e); });
setInterval(() => load().catch(() => {}), 10000);
