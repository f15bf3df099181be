/* The web page at / and its script at /app.js (api.c routes them): the
 * snapshots, newest first, with their trigger, hosts, size and loss; the
 * hosts and their state; a download link per snapshot, and "Open in
 * Perfetto UI", which fetches the trace and hands it to the UI through the
 * UI's documented postMessage handshake: open the UI's URL, send 'PING'
 * until it answers 'PONG', then send {perfetto: {buffer, title,
 * fileName}} to the UI's origin (never '*'). The UI's window keeps its
 * opener: the UI takes messages only from its opener (or the page that
 * frames it), so 'noopener' would leave it deaf (docs/security.md). A
 * failed snapshot's row says why (its failure text), with no hosts or
 * size to show.
 *
 * The page is static; the only value put into it is the UI's URL, which
 * the config checked (http(s), no quotes or angle brackets) and which is
 * HTML-escaped here all the same. The script is served apart so that the
 * Content-Security-Policy allows no inline script at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/daemon/coll.h"
#include "collector/http.h"

static const char page_head[] =
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<title>tracegate-collector</title>\n"
    "<meta name=\"viewport\" content=\"width=device-width\">\n"
    "<style>\n"
    "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\n"
    "table{border-collapse:collapse;margin-bottom:2em}\n"
    "th,td{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}\n"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    ".failed,.partial,.failure{color:#b00}.tracing,.complete{color:#070}\n"
    "button{cursor:pointer}\n"
    "</style></head>\n";

static const char page_body[] =
    "<h1>tracegate-collector</h1>\n"
    "<p><button id=\"snap\">Snapshot the fleet now</button> "
    "<span id=\"status\" role=\"status\"></span></p>\n"
    "<h2>Snapshots</h2>\n"
    "<table id=\"snapshots\"><thead><tr><th>id</th><th>time</th>"
    "<th>trigger</th><th>reason</th><th>state</th><th>hosts</th>"
    "<th>size</th><th>loss</th><th></th></tr></thead><tbody></tbody></table>\n"
    "<h2>Hosts</h2>\n"
    "<table id=\"hosts\"><thead><tr><th>host</th><th>state</th><th>since</th>"
    "<th>why</th></tr></thead><tbody></tbody></table>\n"
    "<script src=\"/app.js\"></script>\n</body></html>\n";

static const char app_js[] =
    "'use strict';\n"
    "const $ = (s) => document.querySelector(s);\n"
    "function cell(tr, text, cls) {\n"
    "  const td = document.createElement('td');\n"
    "  td.textContent = text;\n"
    "  if (cls) td.className = cls;\n"
    "  tr.appendChild(td);\n"
    "  return td;\n"
    "}\n"
    "function size(b) {\n"
    "  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];\n"
    "  let i = 0;\n"
    "  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }\n"
    "  return (i ? b.toFixed(1) : b) + ' ' + u[i];\n"
    "}\n"
    "function when(ms) { return ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : ''; }\n"
    "async function openInUi(id) {\n"
    "  const ui = document.body.dataset.ui;\n"
    "  const origin = new URL(ui).origin;\n"
    "  const win = window.open(ui);\n"
    "  if (!win) { $('#status').textContent = 'the browser blocked the UI window'; return; }\n"
    "  const resp = await fetch('/api/v1/snapshots/' + id + '/trace');\n"
    "  if (!resp.ok) { $('#status').textContent = 'download failed: ' + resp.status; return; }\n"
    "  const buffer = await resp.arrayBuffer();\n"
    "  const ping = setInterval(() => win.postMessage('PING', origin), 50);\n"
    "  const onMessage = (e) => {\n"
    "    if (e.origin !== origin || e.source !== win || e.data !== 'PONG') return;\n"
    "    clearInterval(ping);\n"
    "    window.removeEventListener('message', onMessage);\n"
    "    win.postMessage({perfetto: {buffer: buffer, title: 'tracegate snapshot ' + id,\n"
    "                                fileName: 'tracegate-' + id + '.pftrace'}}, origin);\n"
    "  };\n"
    "  window.addEventListener('message', onMessage);\n"
    "  setTimeout(() => clearInterval(ping), 60000);\n"
    "}\n"
    "async function load() {\n"
    "  const [s, h] = await Promise.all([\n"
    "    fetch('/api/v1/snapshots?limit=100').then((r) => r.json()),\n"
    "    fetch('/api/v1/hosts').then((r) => r.json())]);\n"
    "  const sb = $('#snapshots tbody');\n"
    "  sb.replaceChildren();\n"
    "  for (const x of s.snapshots) {\n"
    "    const tr = document.createElement('tr');\n"
    "    tr.dataset.id = x.id;\n"
    "    cell(tr, x.id);\n"
    "    cell(tr, when(x.started_ms));\n"
    "    cell(tr, x.trigger + (x.origin ? ' @ ' + x.origin : ''));\n"
    "    cell(tr, x.reason);\n"
    "    cell(tr, x.state + (x.pinned ? ' (pinned)' : ''), x.state);\n"
    "    const live = x.state === 'complete' || x.state === 'partial';\n"
    "    cell(tr, x.hosts ? (x.hosts - x.hosts_failed) + '/' + x.hosts : '', 'n');\n"
    "    cell(tr, live ? size(x.bytes) : '', 'n');\n"
    "    cell(tr, x.loss, 'n');\n"
    "    const td = cell(tr, '');\n"
    "    if (x.failure) { td.textContent = x.failure; td.className = 'failure'; }\n"
    "    if (live) {\n"
    "      const a = document.createElement('a');\n"
    "      a.href = '/api/v1/snapshots/' + x.id + '/trace';\n"
    "      a.textContent = 'download';\n"
    "      a.className = 'download';\n"
    "      td.appendChild(a);\n"
    "      td.appendChild(document.createTextNode(' '));\n"
    "      const b = document.createElement('button');\n"
    "      b.textContent = 'Open in Perfetto UI';\n"
    "      b.className = 'open-ui';\n"
    "      b.addEventListener('click', () => openInUi(x.id));\n"
    "      td.appendChild(b);\n"
    "    }\n"
    "    sb.appendChild(tr);\n"
    "  }\n"
    "  const hb = $('#hosts tbody');\n"
    "  hb.replaceChildren();\n"
    "  for (const x of h.hosts) {\n"
    "    const tr = document.createElement('tr');\n"
    "    cell(tr, x.host + (x.hostname && x.hostname !== x.host ? ' (' + x.hostname + ')' : ''));\n"
    "    cell(tr, x.state, x.state);\n"
    "    cell(tr, when(x.since_ms));\n"
    "    cell(tr, x.why);\n"
    "    hb.appendChild(tr);\n"
    "  }\n"
    "  document.body.dataset.loaded = '1';\n"
    "}\n"
    "$('#snap').addEventListener('click', async () => {\n"
    "  $('#status').textContent = 'snapshotting...';\n"
    "  const r = await fetch('/api/v1/snapshots?wait=1&reason=web+page', {method: 'POST'});\n"
    "  const j = await r.json();\n"
    "  $('#status').textContent = r.ok ? 'snapshot ' + j.snapshot.id + ': ' + j.snapshot.state\n"
    "                                  : 'refused: ' + j.error;\n"
    "  load();\n"
    "});\n"
    "load().catch((e) => { $('#status').textContent = String(e); });\n"
    "setInterval(() => load().catch(() => {}), 10000);\n";

static const char csp[] =
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'";

static void html_escape(FILE *f, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '&': fputs("&amp;", f); break;
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '"': fputs("&quot;", f); break;
      case '\'': fputs("&#39;", f); break;
      default: fputc(*s, f);
    }
  }
}

void coll_page_send(coll_t *c, tg_http_exchange_t *x) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) {
    tg_http_respond(x, 500, NULL, NULL, 0);
    return;
  }
  fputs(page_head, f);
  fputs("<body data-ui=\"", f);
  html_escape(f, c->cfg.ui_url);
  fputs("\">\n", f);
  fputs(page_body, f);
  fclose(f);
  tg_http_add_header(x, "Content-Security-Policy", csp);
  tg_http_add_header(x, "X-Frame-Options", "DENY");
  if (tg_http_respond(x, 200, "text/html; charset=utf-8", buf, len) < 0)
    tg_http_respond(x, 500, NULL, NULL, 0);
  free(buf);
}

void coll_app_js_send(coll_t *c, tg_http_exchange_t *x) {
  (void)c;
  tg_http_respond(x, 200, "text/javascript; charset=utf-8", app_js,
                  sizeof(app_js) - 1);
}
